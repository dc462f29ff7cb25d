//! Real Envoy loading the built Wasm filter, the real RLS (Redis store), the
//! project's simulated OpenAI backend, and a stand-in deferral endpoint.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests fail loudly

use serde_json::Value;
use sluice_proto::pb::envoy::extensions::common::ratelimit::v3::{
    rate_limit_descriptor::Entry, RateLimitDescriptor,
};
use sluice_proto::pb::envoy::service::ratelimit::v3::RateLimitRequest;
use sluice_proto::pb::google::protobuf::UInt64Value;
use sluice_ratelimit::config::LimitsConfig;
use sluice_ratelimit::limiter::{Limiter, SystemClock};
use sluice_ratelimit::metrics::Metrics;
use sluice_ratelimit::server::{run, Deps};
use sluice_ratelimit::store::{CountingMode, RedisStore, RedisStoreOptions};
use sluice_testkit::{
    filter_wasm, free_port, http_request, workspace_root, Envoy, HttpResponse, RedisServer,
    StaticHttpServer, ECHO_HEADERS,
};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

const LIMITS: &str = r#"
domain: sluice
descriptors:
  - key: tenant
    value: acme
    descriptors:
      - key: model
        rate_limit: { unit: hour, requests_per_unit: 100, name: acme-rph }
        descriptors:
          - key: tokens
            rate_limit: { unit: hour, requests_per_unit: 3000, name: acme-tph,
                          sluice: { over_limit: reject } }
  - key: tenant
    value: patient
    descriptors:
      - key: model
        rate_limit: { unit: hour, requests_per_unit: 100, name: patient-rph }
        descriptors:
          - key: tokens
            rate_limit: { unit: hour, requests_per_unit: 50, name: patient-tph,
                          sluice: { over_limit: defer, priority: high } }
  - key: tenant
    value: meter
    descriptors:
      - key: model
        rate_limit: { unit: hour, requests_per_unit: 1000, name: meter-rph }
        descriptors:
          - key: tokens
            rate_limit: { unit: hour, requests_per_unit: 1000000, name: meter-tph }
"#;

struct Stack {
    envoy: Envoy,
    listener: SocketAddr,
    limiter: Arc<Limiter>,
    _redis: RedisServer,
    _stop: tokio::sync::oneshot::Sender<()>,
}

/// `filter_json_edit` rewrites the plugin configuration (e.g. failure mode);
/// `rls_up: false` points the filter at a port nobody listens on.
async fn stack(filter_json_edit: &[(&str, &str)], rls_up: bool) -> Stack {
    let redis = RedisServer::start().unwrap();
    let store = RedisStore::new(&RedisStoreOptions {
        url: redis.url(),
        ..Default::default()
    })
    .unwrap();
    let config =
        LimitsConfig::from_sources(&[(PathBuf::from("limits.yaml"), LIMITS.into())]).unwrap();
    let limiter = Arc::new(Limiter::new(
        config,
        Arc::new(store),
        CountingMode::AllOrNothing,
        Arc::new(SystemClock),
        Arc::new(Metrics::new()),
    ));
    let grpc = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let rls_port = if rls_up {
        grpc.local_addr().unwrap().port()
    } else {
        free_port()
    };
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(run(
        grpc,
        None,
        Deps {
            limiter: limiter.clone(),
            config_path: None,
            reload_interval: Duration::ZERO,
            ext_authz: None,
        },
        async {
            let _ = stopped.await;
        },
    ));

    let backend = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let backend_port = backend.local_addr().unwrap().port();
    tokio::spawn(sluice_llm_sim::run(
        backend,
        sluice_llm_sim::SimConfig::fast(),
        std::future::pending::<()>(),
    ));
    let deferral = StaticHttpServer::start(ECHO_HEADERS).unwrap();

    let (admin_port, listener_port) = (free_port(), free_port());
    let mut config = std::fs::read_to_string(workspace_root().join("envoy/sluice-filter.yaml"))
        .unwrap()
        .replace("port_value: 9901", &format!("port_value: {admin_port}"))
        .replace("port_value: 10000", &format!("port_value: {listener_port}"))
        .replace("port_value: 8081", &format!("port_value: {rls_port}"))
        .replace("port_value: 8000", &format!("port_value: {backend_port}"))
        .replace(
            "port_value: 8090",
            &format!("port_value: {}", deferral.addr.port()),
        )
        .replace(
            "/etc/sluice/sluice_filter.wasm",
            &filter_wasm().unwrap().display().to_string(),
        );
    for (from, to) in filter_json_edit {
        assert!(config.contains(from), "{from} not in the filter config");
        config = config.replace(from, to);
    }
    let envoy =
        tokio::task::spawn_blocking(move || Envoy::start(&config, admin_port, listener_port))
            .await
            .unwrap()
            .unwrap();
    Stack {
        envoy,
        listener: ([127, 0, 0, 1], listener_port).into(),
        limiter,
        _redis: redis,
        _stop: stop,
    }
}

impl Stack {
    async fn post(
        &self,
        path: &'static str,
        headers: Vec<(&'static str, String)>,
        body: String,
    ) -> HttpResponse {
        let addr = self.listener;
        tokio::task::spawn_blocking(move || {
            let headers: Vec<(&str, &str)> =
                headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
            http_request(addr, "POST", path, &headers, body.as_bytes()).unwrap()
        })
        .await
        .unwrap()
    }

    async fn chat(
        &self,
        tenant: &str,
        body: Value,
        extra: &[(&'static str, &str)],
    ) -> HttpResponse {
        let mut headers = vec![
            ("x-tenant-id", tenant.to_string()),
            ("content-type", "application/json".into()),
        ];
        headers.extend(extra.iter().map(|(k, v)| (*k, v.to_string())));
        self.post("/v1/chat/completions", headers, body.to_string())
            .await
    }

    async fn stats(&self) -> String {
        let admin: SocketAddr = ([127, 0, 0, 1], self.envoy.admin_port).into();
        tokio::task::spawn_blocking(move || {
            http_request(admin, "GET", "/stats?filter=sluice", &[], b"")
                .unwrap()
                .body
        })
        .await
        .unwrap()
    }

    /// Tokens left in the tenant's token window, without charging anything.
    async fn tokens_left(&self, tenant: &str, model: &str) -> u32 {
        let entry = |k: &str, v: &str| Entry {
            key: k.into(),
            value: v.into(),
        };
        let request = RateLimitRequest {
            domain: "sluice".into(),
            descriptors: vec![RateLimitDescriptor {
                entries: vec![
                    entry("tenant", tenant),
                    entry("model", model),
                    entry("tokens", "total"),
                ],
                hits_addend: Some(UInt64Value { value: 0 }),
                ..Default::default()
            }],
            hits_addend: 0,
        };
        self.limiter
            .should_rate_limit(&request)
            .await
            .unwrap()
            .statuses[0]
            .limit_remaining
    }
}

fn chat_body(words: usize, max_tokens: u64, stream: bool) -> Value {
    let mut body = serde_json::json!({
        "model": "gpt-4o",
        "max_tokens": max_tokens,
        "messages": [{ "role": "user", "content": "hello ".repeat(words) }]
    });
    if stream {
        body["stream"] = true.into();
        body["stream_options"] = serde_json::json!({ "include_usage": true });
    }
    body
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admission_rejection_deferral_and_reconciliation() {
    let stack = stack(&[], true).await;

    // Admitted: 200 from the backend, RateLimit headers on the way back.
    let response = stack
        .chat(
            "meter",
            chat_body(10, 20, false),
            &[("x-sim-completion-tokens", "20")],
        )
        .await;
    assert_eq!(
        response.status,
        200,
        "{response:?}\n{}",
        stack.envoy.log_text()
    );
    assert!(
        response.header("ratelimit-remaining").is_some(),
        "{response:?}"
    );
    let usage: Value = serde_json::from_str::<Value>(&response.body).unwrap()["usage"].clone();
    let used = usage["total_tokens"].as_u64().unwrap();

    // Reconciliation: the window ends up charged with what the backend reported.
    let mut left = 0;
    for _ in 0..50 {
        left = stack.tokens_left("meter", "gpt-4o").await;
        if u64::from(left) == 1_000_000 - used {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        u64::from(left),
        1_000_000 - used,
        "window not reconciled to usage {usage}"
    );

    // Streamed, with include_usage: reconciled from the final SSE chunk.
    let response = stack
        .chat(
            "meter",
            chat_body(10, 500, true),
            &[("x-sim-completion-tokens", "7")],
        )
        .await;
    assert_eq!(response.status, 200);
    assert!(response.body.contains("data: [DONE]"), "{}", response.body);
    let usage_line = response
        .body
        .lines()
        .filter(|l| l.contains("\"usage\"") && !l.contains("\"usage\":null"))
        .last()
        .unwrap();
    let stream_used = serde_json::from_str::<Value>(usage_line.trim_start_matches("data: "))
        .unwrap()["usage"]["total_tokens"]
        .as_u64()
        .unwrap();
    for _ in 0..50 {
        left = stack.tokens_left("meter", "gpt-4o").await;
        if u64::from(left) == 1_000_000 - used - stream_used {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(u64::from(left), 1_000_000 - used - stream_used);

    // Token limit exhausted by a few large prompts while requests are fine: 429.
    let mut statuses = Vec::new();
    let mut rejected = None;
    for _ in 0..5 {
        let response = stack.chat("acme", chat_body(1000, 200, false), &[]).await;
        statuses.push(response.status);
        if response.status == 429 {
            rejected = Some(response);
            break;
        }
    }
    let rejected = rejected.unwrap_or_else(|| panic!("no 429 after {statuses:?}"));
    assert!(
        statuses.len() >= 2,
        "first large prompt should pass: {statuses:?}"
    );
    assert!(rejected.header("retry-after").is_some(), "{rejected:?}");
    assert_eq!(
        rejected.header("ratelimit-limit"),
        Some("3000"),
        "{rejected:?}"
    );
    let error: Value = serde_json::from_str(&rejected.body).unwrap();
    assert_eq!(
        error["error"]["code"], "rate_limit_exceeded",
        "{}",
        rejected.body
    );

    // Over a defer limit: re-routed to the deferral cluster with the markers.
    let response = stack.chat("patient", chat_body(100, 10, false), &[]).await;
    assert_eq!(response.status, 200, "{response:?}");
    let seen: Value = serde_json::from_str(&response.body).unwrap();
    assert_eq!(seen["x-sluice-deferred"], "1", "{seen}");
    assert_eq!(seen["x-sluice-tenant"], "patient");
    assert_eq!(seen["x-sluice-model"], "gpt-4o");
    assert_eq!(seen["x-sluice-priority"], "high");
    assert!(
        seen["x-sluice-request-id"]
            .as_str()
            .is_some_and(|id| !id.is_empty()),
        "{seen}"
    );
    assert!(
        seen["x-sluice-prompt-tokens"]
            .as_str()
            .unwrap()
            .parse::<u64>()
            .unwrap()
            > 100
    );

    // A client cannot mark itself: small request, marker stripped, normal route.
    let response = stack
        .chat(
            "meter",
            chat_body(1, 5, false),
            &[("x-sluice-deferred", "1")],
        )
        .await;
    assert_eq!(response.status, 200);
    assert!(
        response.body.contains("chat.completion"),
        "{}",
        response.body
    );

    let stats = stack.stats().await;
    for stat in [
        "sluice_admitted_total",
        "sluice_rejected_total: 1",
        "sluice_deferred_total: 1",
        "sluice_reconciled_total",
    ] {
        assert!(stats.contains(stat), "{stat} missing in\n{stats}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_gets_clear_errors() {
    let stack = stack(
        &[("\"max_body_bytes\": 4194304", "\"max_body_bytes\": 4096")],
        true,
    )
    .await;
    let post = |headers: Vec<(&'static str, String)>, body: String| {
        stack.post("/v1/chat/completions", headers, body)
    };
    let tenant = || vec![("x-tenant-id", "meter".to_string())];

    let too_big = post(tenant(), chat_body(2000, 5, false).to_string()).await;
    assert_eq!(too_big.status, 413, "{too_big:?}");
    let invalid = post(tenant(), "{\"model\": \"gpt-4o\", \"messages\": [".into()).await;
    assert_eq!(invalid.status, 400);
    assert!(invalid.body.contains("not valid JSON"), "{}", invalid.body);
    let no_model = post(tenant(), r#"{"messages": []}"#.into()).await;
    assert_eq!(no_model.status, 400);
    assert!(no_model.body.contains("'model'"), "{}", no_model.body);
    let unknown = post(
        tenant(),
        r#"{"model": "mystery-9000", "messages": []}"#.into(),
    )
    .await;
    assert_eq!(unknown.status, 400);
    assert!(unknown.body.contains("not known"), "{}", unknown.body);
    let no_tenant = post(vec![], chat_body(1, 5, false).to_string()).await;
    assert_eq!(no_tenant.status, 401, "{no_tenant:?}");
    // Invalid UTF-8 inside a JSON string.
    let addr = stack.listener;
    let utf8 = tokio::task::spawn_blocking(move || {
        http_request(addr, "POST", "/v1/chat/completions", &[("x-tenant-id", "meter")],
            b"{\"model\": \"gpt-4o\", \"messages\": [{\"role\": \"user\", \"content\": \"\xc3\x28\"}]}").unwrap()
    })
    .await
    .unwrap();
    assert_eq!(utf8.status, 400, "{utf8:?}");
    // Hostile tenant values are bounded and still counted.
    let hostile = "t".repeat(3000);
    let response = post(
        vec![("x-tenant-id", hostile)],
        chat_body(1, 5, false).to_string(),
    )
    .await;
    assert_eq!(response.status, 200, "{response:?}");
    // The VM survived all of it.
    let fine = post(tenant(), chat_body(1, 5, false).to_string()).await;
    assert_eq!(fine.status, 200);
    let stats = stack.stats().await;
    assert!(stats.contains("sluice_bad_request_total: 4"), "{stats}");
    assert!(stats.contains("sluice_body_too_large_total: 1"), "{stats}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rls_down_fails_open_or_closed_as_configured() {
    let open = stack(&[], false).await;
    let response = open.chat("meter", chat_body(1, 5, false), &[]).await;
    assert_eq!(response.status, 200, "{response:?}");
    assert!(open
        .stats()
        .await
        .contains("sluice_rls_failure_allowed_total: 1"));

    let closed = stack(
        &[("\"failure_mode\": \"allow\"", "\"failure_mode\": \"deny\"")],
        false,
    )
    .await;
    let response = closed.chat("meter", chat_body(1, 5, false), &[]).await;
    assert_eq!(response.status, 503, "{response:?}");
    assert!(
        response.body.contains("rate_limit_unavailable"),
        "{}",
        response.body
    );
    assert!(closed
        .stats()
        .await
        .contains("sluice_rls_failure_denied_total: 1"));
}
