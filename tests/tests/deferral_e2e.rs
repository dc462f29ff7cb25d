//! The whole path, real parts only: real Envoy with the built Wasm filter,
//! sluice-rls (RLS + deferral endpoint), real Redis, the real RocketMQ
//! broker, the consumer's pop loop, and the simulated OpenAI backend. A
//! request over its tenant's token budget is deferred instead of refused, and
//! its client gets the model's answer — streamed, or as one JSON body.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests fail loudly
#![recursion_limit = "256"] // rocketmq-client futures are deeply nested

use serde_json::Value;
use sluice_testkit::redis_topologies::RedisKind;
use sluice_testkit::stack::{
    chunk_content, limits, model_calls, paced, patient_chat, sse_data, ConsumerSpec, Stack,
};
use sluice_testkit::{get, spawn_post};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

// The cluster test runs the same path with every component on a Redis
// Cluster (3 masters + 3 replicas): counters, request keys, bucket
// bookkeeping and pacing keys spread over slots, and no command crosses one.
sluice_testkit::single_and_cluster_tests!(
    deferred_requests_end_to_end,
    deferred_requests_are_answered_through_the_queue_at_the_bucket_pace,
    deferred_requests_end_to_end_on_a_redis_cluster
);

async fn deferred_requests_end_to_end(redis: RedisKind) {
    sluice_testkit::init_test_tracing();
    // `patient` and `other` get 50 tokens an hour and defer the rest; the
    // model answers with 20 tokens; the consumer goes at 2 requests/s per
    // bucket.
    let mut sim = sluice_llm_sim::SimConfig::fast();
    sim.default_completion_tokens = 20;
    let stack = Stack::builder(limits::patient_and_other_defer())
        .redis(redis)
        .sim(sim)
        .consumer(ConsumerSpec {
            pacing: paced(2.0),
            ..ConsumerSpec::new("e2e-consumer")
        })
        .start()
        .await;
    let envoy = &stack.envoy.envoy;
    let envoy_addr = stack.envoy.listener;
    let backend_url = format!("http://{}", stack.backend);
    let deferral_addr = stack.rls.deferral.unwrap();

    let chat = |stream: bool| {
        tokio::task::spawn_blocking(move || {
            let started = Instant::now();
            let response = patient_chat(envoy_addr, stream).unwrap();
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
    let data = sse_data(&response.body);
    assert_eq!(*data.last().unwrap(), "[DONE]", "{}", response.body);
    let content = chunk_content(&data);
    assert_eq!(content.split_whitespace().count(), 20, "{content}");
    assert!(
        response.body.contains("\nid: ")
            || response.body.starts_with("id: ")
            || response.body.contains(" queue\n\nid: "),
        "{}",
        response.body
    );

    // The model was called exactly once for it.
    assert_eq!(model_calls(stack.backend, &request_id).await, 1);

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
    resume_needs_the_token_and_forged_deferrals_are_refused(envoy_addr, deferral_addr, &response)
        .await;
}

const CHAT_PATH: &str = "/v1/chat/completions";

/// A chat of forty words that asks `model` for 30 tokens.
fn hello_chat(model: &str) -> Vec<u8> {
    let body = serde_json::json!({
        "model": model,
        "max_tokens": 30,
        "messages": [{"role": "user", "content": "hello ".repeat(40)}]
    });
    body.to_string().into_bytes()
}

/// Two tenants send the same `x-request-id` at once (the attack that used
/// to hand one tenant the other's answer): each gets its own answer, under
/// its own Sluice id, and the model is called once for each.
async fn tenants_sharing_a_client_request_id_get_their_own_answers(
    envoy_addr: SocketAddr,
    backend_url: &str,
) {
    let ask = |tenant: &str, model: &str| {
        let headers = vec![
            ("x-tenant-id", tenant.to_string()),
            ("x-request-id", "shared-client-id".to_string()),
        ];
        spawn_post(envoy_addr, CHAT_PATH, headers, hello_chat(model))
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
        assert_eq!(model_calls(backend, &id).await, 1);
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
    streamed.assert_body_contains(&format!(": resume-token {token}\n"));
    // The token resumes the whole answer, from the endpoint and through
    // Envoy (the shipped config routes resume to the endpoint).
    let resumes = |addr: SocketAddr| {
        let path = format!("/v1/sluice/streams/{token}");
        async move {
            let resumed = get(addr, path).await.unwrap();
            assert_eq!(resumed.status, 200, "{resumed:?}");
            assert!(
                resumed.body.ends_with("data: [DONE]\n\n"),
                "{}",
                resumed.body
            );
        }
    };
    resumes(deferral_addr).await;
    let bare = get(deferral_addr, format!("/v1/sluice/streams/{id}"))
        .await
        .unwrap();
    assert_eq!(bare.status, 404, "{bare:?}");
    resumes(envoy_addr).await;

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

/// A client's W3C trace context reaches the model on both paths: through
/// Envoy directly, and deferred (the endpoint puts it in the work item, the
/// consumer sends it with its call). llm-sim counts calls per trace id.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_client_trace_context_reaches_the_model_on_both_paths() {
    sluice_testkit::init_test_tracing();
    let stack = Stack::builder(limits::patient_defers()).start().await;
    let envoy_addr = stack.envoy.listener;
    let ask = |tenant: &str, traceparent: String| {
        let headers = vec![
            ("x-tenant-id", tenant.to_string()),
            ("traceparent", traceparent),
            ("tracestate", "sluice-test=1".to_string()),
        ];
        spawn_post(envoy_addr, CHAT_PATH, headers, hello_chat("gpt-4o"))
    };
    let trace_id = |n: u8| format!("{:032x}", u128::from(n) << 64 | 0xabc);
    let parent = |n: u8| format!("00-{}-00f067aa0ba902b7-01", trace_id(n));

    // `patient` is over its tokens: deferred. An unlimited tenant goes direct.
    let deferred = ask("patient", parent(1)).await.unwrap();
    assert_eq!(deferred.status, 200, "{deferred:?}");
    assert!(
        deferred.header("x-sluice-request-id").is_some(),
        "not deferred: {deferred:?}"
    );
    let direct = ask("direct", parent(2)).await.unwrap();
    assert_eq!(direct.status, 200, "{direct:?}");
    assert!(
        direct.header("x-sluice-request-id").is_none(),
        "deferred: {direct:?}"
    );
    for (n, path) in [(1, "deferred"), (2, "direct")] {
        assert_eq!(
            model_trace_calls(stack.backend, &trace_id(n)).await,
            1,
            "the {path} request's trace id did not reach the model once"
        );
    }
    // A malformed traceparent costs a deferred request nothing (dropped).
    let bad = ask("patient", "00-not-a-trace".into()).await.unwrap();
    assert_eq!(bad.status, 200, "{bad:?}");
}

/// Calls that reached the model with trace id `trace_id` (llm-sim's
/// `/sim/calls?trace_id=`).
async fn model_trace_calls(backend: SocketAddr, trace_id: &str) -> u64 {
    let path = format!("/sim/calls?trace_id={trace_id}");
    let response = get(backend, path).await.unwrap();
    let json: Value = serde_json::from_str(&response.body).unwrap();
    json["calls"].as_u64().unwrap()
}
