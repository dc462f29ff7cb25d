//! One deferred request is one OpenTelemetry trace: through real Envoy with
//! the built Wasm filter, sluice-rls (RLS + deferral endpoint), Redis, the
//! RocketMQ broker, the consumer and llm-sim, exported over OTLP/gRPC by
//! sluice-runtime's exporter to an in-process collector. Its own test binary:
//! the exporting subscriber is the process's global one.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests fail loudly
#![recursion_limit = "256"] // rocketmq-client futures are deeply nested

use sluice_testkit::http_request;
use sluice_testkit::otlp::{render_tree, CollectedSpan, OtlpCollector};
use sluice_testkit::stack::{limits, Stack};
use std::time::Duration;

/// The client's trace and its span, as a client with its own tracing sends them.
const TRACE_ID: &str = "5ee1ce0000000000000000000000abc1";
const CLIENT_SPAN: &str = "00f067aa0ba902b7";

/// Each Sluice span of a deferred request and the span it must be a child of.
const EXPECTED: [(&str, &str); 10] = [
    ("rls.should_rate_limit", "client"),
    ("deferral.request", "client"),
    ("deferral.publish", "deferral.request"),
    ("deferral.hold", "deferral.request"),
    ("deferral.answer", "deferral.request"),
    ("consumer.message", "deferral.request"),
    ("consumer.pop", "consumer.message"),
    ("consumer.claim", "consumer.message"),
    ("consumer.model_call", "consumer.message"),
    ("consumer.stream_write", "consumer.message"),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_deferred_request_is_one_trace_from_the_filter_to_the_stream() {
    let collector = OtlpCollector::start().await;
    let args = sluice_runtime::TraceArgs {
        otlp_endpoint: Some(collector.endpoint()),
    };
    let traces = sluice_runtime::init_telemetry(
        sluice_runtime::LogFormat::Text,
        &args,
        "sluice-e2e",
        sluice_contract::TRACE_TARGET,
    )
    .unwrap();
    let stack = Stack::builder(limits::patient_defers()).start().await;

    // `patient` is over its tokens: deferred, answered as one JSON body.
    let envoy = stack.envoy.listener;
    let traceparent = format!("00-{TRACE_ID}-{CLIENT_SPAN}-01");
    let body = serde_json::json!({
        "model": "gpt-4o",
        "max_tokens": 30,
        "messages": [{"role": "user", "content": "hello ".repeat(40)}]
    });
    let response = tokio::task::spawn_blocking(move || {
        http_request(
            envoy,
            "POST",
            "/v1/chat/completions",
            &[("x-tenant-id", "patient"), ("traceparent", &traceparent)],
            body.to_string().as_bytes(),
        )
        .unwrap()
    })
    .await
    .unwrap();
    assert_eq!(response.status, 200, "{response:?}");
    assert!(
        response.header("x-sluice-request-id").is_some(),
        "not deferred: {response:?}"
    );

    // Spans are exported in batches: flush until every expected one is in
    // (or the expected ones never come: the assertions below say which).
    let mut spans = Vec::new();
    for _ in 0..120 {
        tokio::task::block_in_place(|| traces.flush());
        spans = collector.trace(TRACE_ID);
        if EXPECTED
            .iter()
            .all(|(name, _)| find(&spans, name).is_some())
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    println!("trace {TRACE_ID}:\n{}", render_tree(&spans));

    for (name, parent) in EXPECTED {
        let span = find(&spans, name)
            .unwrap_or_else(|| panic!("no {name} span in the client's trace: {spans:#?}"));
        let parent_id = match parent {
            "client" => CLIENT_SPAN.to_string(),
            parent => find(&spans, parent).unwrap().span_id.clone(),
        };
        assert_eq!(
            span.parent_span_id, parent_id,
            "{name} is not a child of {parent}: {spans:#?}"
        );
        assert!(span.end_unix_nanos >= span.start_unix_nanos, "{span:?}");
    }
    // The answer follows the hold; the model's call, the consumer's claim.
    let start = |name| find(&spans, name).unwrap().start_unix_nanos;
    assert!(start("deferral.answer") >= start("deferral.hold"));
    assert!(start("consumer.model_call") >= start("consumer.claim"));
    // The model got the trace too (the model call's span as its parent).
    let path = format!("/sim/calls?trace_id={TRACE_ID}");
    let backend = stack.backend;
    let calls = tokio::task::spawn_blocking(move || http_request(backend, "GET", &path, &[], b""))
        .await
        .unwrap()
        .unwrap();
    let calls: serde_json::Value = serde_json::from_str(&calls.body).unwrap();
    assert_eq!(calls["calls"], 1, "{calls}");
}

/// The first span named `name` (a deferred request has one of each).
fn find<'a>(spans: &'a [CollectedSpan], name: &str) -> Option<&'a CollectedSpan> {
    spans.iter().find(|span| span.name == name)
}
