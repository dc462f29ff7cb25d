//! The whole path, real parts only: real Envoy with the built Wasm filter,
//! sluice-rls (RLS + deferral endpoint), real Redis, the real RocketMQ
//! broker, the consumer's pop loop, and the simulated OpenAI backend. A
//! request over its tenant's token budget is deferred instead of refused, and
//! its client gets the model's answer — streamed, or as one JSON body.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests fail loudly
#![recursion_limit = "256"] // rocketmq-client futures are deeply nested

use serde_json::Value;
use sluice_consumer::{
    connect, InFlightConfig, InFlightLimits, Metrics as ConsumerMetrics, Pacer, PacingConfig,
    Processor, ProcessorConfig, Rates, RedisOptions,
};
use sluice_consumer::{Runner, RunnerOptions, RunnerParts};
use sluice_litetopic::{LiteClient, LiteConfig, LiteConsumer, LiteProducer};
use sluice_ratelimit::config::LimitsConfig;
use sluice_ratelimit::deferral::endpoint::EndpointOptions;
use sluice_ratelimit::deferral::{Endpoint, EndpointConfig};
use sluice_ratelimit::limiter::{Limiter, SystemClock};
use sluice_ratelimit::metrics::Metrics;
use sluice_ratelimit::server::{run, Deps};
use sluice_ratelimit::store::{CountingMode, RedisStore, RedisStoreOptions};
use sluice_testkit::{free_port, http_request, Envoy, RedisServer, RocketMq};
use sluice_testkit::{sluice_filter_envoy_config, spawn_post, SluiceFilterPorts};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

const PARENT: &str = "sluice-deferred";
const GROUP: &str = "sluice-consumer";

/// `patient` and `other` get 50 tokens an hour and defer the rest.
const LIMITS: &str = r#"
domain: sluice
descriptors:
  - key: tenant
    value: patient
    descriptors:
      - key: model
        rate_limit: { unit: hour, requests_per_unit: 1000, name: patient-rph }
        descriptors:
          - key: tokens
            rate_limit: { unit: hour, requests_per_unit: 50, name: patient-tph,
                          sluice: { over_limit: defer, priority: normal } }
  - key: tenant
    value: other
    descriptors:
      - key: model
        rate_limit: { unit: hour, requests_per_unit: 1000, name: other-rph }
        descriptors:
          - key: tokens
            rate_limit: { unit: hour, requests_per_unit: 50, name: other-tph,
                          sluice: { over_limit: defer, priority: normal } }
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deferred_requests_are_answered_through_the_queue_at_the_bucket_pace() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter("warn")
        .with_test_writer()
        .try_init();
    let redis = RedisServer::start().unwrap();
    let broker = tokio::task::spawn_blocking(RocketMq::start)
        .await
        .unwrap()
        .unwrap();

    // sluice-rls: RLS on Redis + the deferral endpoint.
    let limits =
        LimitsConfig::from_sources(&[(PathBuf::from("limits.yaml"), LIMITS.into())]).unwrap();
    let store = RedisStore::new(&RedisStoreOptions {
        url: redis.url(),
        ..Default::default()
    })
    .unwrap();
    let limiter = Arc::new(Limiter::new(
        limits,
        Arc::new(store),
        CountingMode::AllOrNothing,
        Arc::new(SystemClock),
        Arc::new(Metrics::new()),
    ));
    let deferral_app = Endpoint::build(EndpointConfig {
        parent: PARENT.into(),
        consumer_group: GROUP.into(),
        options: EndpointOptions {
            secrets: vec![sluice_testkit::example_deferral_secret()],
            ..Default::default()
        },
        ..EndpointConfig::new(redis.url(), broker.namesrv_addr())
    })
    .await
    .unwrap();
    let deferral_listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let deferral_port = deferral_listener.local_addr().unwrap().port();
    let grpc = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let rls_port = grpc.local_addr().unwrap().port();
    let deps = Deps {
        limiter,
        config_path: None,
        reload_interval: Duration::ZERO,
        ext_authz: None,
        deferral: Some((deferral_listener, deferral_app)),
    };
    tokio::spawn(run(grpc, None, deps, std::future::pending::<()>()));

    // The model backend: 20 tokens per answer.
    let backend = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let backend_url = format!("http://{}", backend.local_addr().unwrap());
    let mut sim = sluice_llm_sim::SimConfig::fast();
    sim.default_completion_tokens = 20;
    tokio::spawn(sluice_llm_sim::run(
        backend,
        sim,
        std::future::pending::<()>(),
    ));

    // The consumer: 2 requests/s per bucket.
    let conn = connect(&RedisOptions {
        url: redis.url(),
        ..Default::default()
    })
    .unwrap();
    let metrics = Arc::new(ConsumerMetrics::new(1000, 100));
    let mut config = ProcessorConfig::default();
    config.backend.default.base_url = backend_url.clone();
    let consumer =
        Arc::new(Processor::new(conn.clone(), "e2e-consumer", config, metrics.clone()).unwrap());
    let pacing = PacingConfig {
        default_rates: Rates {
            requests_per_second: Some(2.0),
            tokens_per_second: None,
        },
        ..Default::default()
    };
    let pacer = Arc::new(Pacer::new(conn.clone(), pacing, Some(metrics.clone())).unwrap());
    let lite_client = LiteClient::connect(LiteConfig::new(broker.namesrv_addr())).unwrap();
    let runner = Runner::new(
        RunnerParts {
            lite: Arc::new(
                LiteConsumer::new(&lite_client, GROUP, PARENT)
                    .await
                    .unwrap(),
            ),
            producer: Arc::new(LiteProducer::new(&lite_client, "e2e-retry").await.unwrap()),
            processor: consumer,
            pacer,
            limits: Arc::new(InFlightLimits::new(
                InFlightConfig::default(),
                Some(metrics.clone()),
            )),
            redis: conn,
            metrics,
            id: "e2e-consumer".into(),
        },
        RunnerOptions {
            parent: PARENT.into(),
            ..Default::default()
        },
    );
    tokio::spawn(runner.run(std::future::pending::<()>()));

    // Envoy with the filter, its deferral route pointing at the endpoint.
    let (admin_port, listener_port) = (free_port(), free_port());
    let config = sluice_filter_envoy_config(&SluiceFilterPorts {
        admin: admin_port,
        listener: listener_port,
        rls: rls_port,
        backend: backend_url.rsplit(':').next().unwrap().parse().unwrap(),
        deferral: deferral_port,
    })
    .unwrap();
    let envoy =
        tokio::task::spawn_blocking(move || Envoy::start(&config, admin_port, listener_port))
            .await
            .unwrap()
            .unwrap();
    let envoy_addr: SocketAddr = ([127, 0, 0, 1], listener_port).into();

    let chat = |stream: bool| {
        let body = serde_json::json!({
            "model": "gpt-4o",
            "max_tokens": 30,
            "stream": stream,
            "messages": [{"role": "user", "content": "hello ".repeat(40)}]
        });
        tokio::task::spawn_blocking(move || {
            let started = Instant::now();
            let response = http_request(
                envoy_addr,
                "POST",
                "/v1/chat/completions",
                &[("x-tenant-id", "patient")],
                body.to_string().as_bytes(),
            )
            .unwrap();
            (response, started.elapsed())
        })
    };

    // 40 words + 30 output tokens is over 50 tokens/hour: deferred, not refused.
    let (response, _) = chat(true).await.unwrap();
    assert_eq!(response.status, 200, "{response:?}\n{}", envoy.log_text());
    assert_eq!(
        response.header("content-type"),
        Some("text/event-stream"),
        "{response:?}"
    );
    let request_id = response.header("x-sluice-request-id").unwrap().to_string();
    let data: Vec<&str> = response
        .body
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .collect();
    assert_eq!(*data.last().unwrap(), "[DONE]", "{}", response.body);
    let content: String = data
        .iter()
        .filter_map(|d| serde_json::from_str::<Value>(d).ok())
        .filter_map(|c| {
            c["choices"][0]["delta"]["content"]
                .as_str()
                .map(str::to_string)
        })
        .collect();
    assert_eq!(content.split_whitespace().count(), 20, "{content}");
    assert!(
        response.body.contains("\nid: ")
            || response.body.starts_with("id: ")
            || response.body.contains(" queue\n\nid: "),
        "{}",
        response.body
    );

    // The model was called exactly once for it.
    let calls = tokio::task::spawn_blocking({
        let addr: SocketAddr = backend_url.trim_start_matches("http://").parse().unwrap();
        move || {
            http_request(
                addr,
                "GET",
                &format!("/sim/calls?request_id={request_id}"),
                &[],
                b"",
            )
            .unwrap()
        }
    })
    .await
    .unwrap();
    assert!(calls.body.contains("\"calls\":1"), "{}", calls.body);

    // Non-streamed clients get one JSON answer. Three at once from one bucket
    // at 2/s: the last can only start about a second after the first.
    let started = Instant::now();
    let clients: Vec<_> = (0..3).map(|_| chat(false)).collect();
    let mut finished = Vec::new();
    for client in clients {
        let (response, took) = client.await.unwrap();
        assert_eq!(response.status, 200, "{response:?}");
        let json: Value = serde_json::from_str(&response.body).unwrap();
        assert_eq!(json["object"], "chat.completion");
        assert_eq!(json["usage"]["completion_tokens"], 20, "{json}");
        finished.push(took);
    }
    let spread = finished
        .iter()
        .max()
        .unwrap()
        .saturating_sub(*finished.iter().min().unwrap());
    assert!(
        spread >= Duration::from_millis(700),
        "paced at 2/s, yet all three finished within {spread:?}"
    );
    assert!(started.elapsed() < Duration::from_secs(30));

    tenants_sharing_a_client_request_id_get_their_own_answers(envoy_addr, &backend_url).await;
    resume_needs_the_token_and_forged_deferrals_are_refused(
        envoy_addr,
        ([127, 0, 0, 1], deferral_port).into(),
        &response,
    )
    .await;
}

/// Two tenants send the same `x-request-id` at once (the attack that used
/// to hand one tenant the other's answer): each gets its own answer, under
/// its own Sluice id, and the model is called once for each.
async fn tenants_sharing_a_client_request_id_get_their_own_answers(
    envoy_addr: SocketAddr,
    backend_url: &str,
) {
    let ask = |tenant: &'static str, model: &'static str| {
        let body = serde_json::json!({
            "model": model,
            "max_tokens": 30,
            "messages": [{"role": "user", "content": "hello ".repeat(40)}]
        });
        tokio::task::spawn_blocking(move || {
            http_request(
                envoy_addr,
                "POST",
                "/v1/chat/completions",
                &[
                    ("x-tenant-id", tenant),
                    ("x-request-id", "shared-client-id"),
                ],
                body.to_string().as_bytes(),
            )
            .unwrap()
        })
    };
    let (a, b) = (ask("patient", "gpt-4o"), ask("other", "gpt-4o-mini"));
    let (a, b) = (a.await.unwrap(), b.await.unwrap());
    let mut ids = Vec::new();
    for (response, model) in [(&a, "gpt-4o"), (&b, "gpt-4o-mini")] {
        assert_eq!(response.status, 200, "{response:?}");
        let json: Value = serde_json::from_str(&response.body).unwrap();
        assert_eq!(json["model"], model, "{json}");
        ids.push(response.header("x-sluice-request-id").unwrap().to_string());
    }
    assert_ne!(ids[0], ids[1]);
    assert!(ids.iter().all(|id| id != "shared-client-id"), "{ids:?}");
    let backend: SocketAddr = backend_url.trim_start_matches("http://").parse().unwrap();
    for id in ids {
        let calls = tokio::task::spawn_blocking(move || {
            http_request(
                backend,
                "GET",
                &format!("/sim/calls?request_id={id}"),
                &[],
                b"",
            )
            .unwrap()
        })
        .await
        .unwrap();
        assert!(calls.body.contains("\"calls\":1"), "{}", calls.body);
    }
}

/// The streamed answer's resume token reopens it; the bare request id does
/// not; the marker headers sent straight to the endpoint are refused, and
/// sent through Envoy they are stripped.
async fn resume_needs_the_token_and_forged_deferrals_are_refused(
    envoy_addr: SocketAddr,
    deferral_addr: SocketAddr,
    streamed: &sluice_testkit::HttpResponse,
) {
    let id = streamed.header("x-sluice-request-id").unwrap().to_string();
    let token = streamed
        .header("x-sluice-resume-token")
        .unwrap()
        .to_string();
    assert!(
        streamed.body.contains(&format!(": resume-token {token}\n")),
        "{}",
        streamed.body
    );
    let get = |path: String| {
        tokio::task::spawn_blocking(move || {
            http_request(deferral_addr, "GET", &path, &[], b"").unwrap()
        })
    };
    let resumed = get(format!("/v1/sluice/streams/{token}")).await.unwrap();
    assert_eq!(resumed.status, 200, "{resumed:?}");
    assert!(
        resumed.body.ends_with("data: [DONE]\n\n"),
        "{}",
        resumed.body
    );
    let bare = get(format!("/v1/sluice/streams/{id}")).await.unwrap();
    assert_eq!(bare.status, 404, "{bare:?}");

    let body =
        r#"{"model": "gpt-4o", "max_tokens": 1, "messages": [{"role": "user", "content": "hi"}]}"#;
    let forged: Vec<(&'static str, &'static str)> = vec![
        ("x-sluice-deferred", "1"),
        ("x-sluice-request-id", "0123456789abcdef0123456789abcdef"),
        ("x-sluice-tenant", "patient"),
        ("x-sluice-model", "gpt-4o"),
        ("x-sluice-priority", "high"),
        ("x-sluice-estimated-tokens", "1"),
        ("x-sluice-deferral-token", "v1.1.00"),
    ];
    let owned = |headers: &[(&'static str, &'static str)]| -> Vec<(&'static str, String)> {
        headers.iter().map(|(k, v)| (*k, v.to_string())).collect()
    };
    let direct = spawn_post(deferral_addr, "/v1/chat/completions", owned(&forged), body)
        .await
        .unwrap();
    assert_eq!(direct.status, 403, "{direct:?}");
    // Through Envoy, as a tenant with budget left: stripped, admitted directly.
    let mut headers = forged;
    headers.push(("x-tenant-id", "fresh"));
    let through = spawn_post(envoy_addr, "/v1/chat/completions", owned(&headers), body)
        .await
        .unwrap();
    assert_eq!(through.status, 200, "{through:?}");
    assert!(
        through.header("x-sluice-resume-token").is_none(),
        "{through:?}"
    );
    assert_ne!(
        through.header("x-sluice-request-id"),
        Some("0123456789abcdef0123456789abcdef")
    );
}
