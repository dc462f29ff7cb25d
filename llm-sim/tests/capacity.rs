//! Concurrency limit (429 / 503 / queue), pacing and client disconnects.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests fail loudly

mod common;

use common::*;
use serde_json::json;
use sluice_llm_sim::text::completion_text;
use sluice_llm_sim::OverCapacity;
use std::time::{Duration, Instant};

/// Opens a long stream and waits for its role chunk: it holds a slot.
async fn hold_a_slot(server: &SimServer) -> EventReader {
    let mut stream = EventReader::open(
        server.addr(),
        "/v1/chat/completions",
        &[
            ("x-sim-completion-tokens", "100000"),
            ("x-sim-tokens-per-second", "20"),
        ],
        &stream_body("hold", false).to_string(),
    )
    .await;
    assert_eq!(stream.status, 200);
    let role = parse(&stream.next_event().await.unwrap());
    assert_eq!(role["choices"][0]["delta"]["role"], "assistant");
    stream
}

/// A simulator with one generation slot, answering `over_capacity` beyond.
async fn start_one_slot(over_capacity: OverCapacity) -> SimServer {
    start(SimConfig {
        max_concurrency: 1,
        over_capacity,
        ..SimConfig::fast()
    })
    .await
}

/// A whole (non-streamed) chat answered with `tokens` completion tokens at
/// `per_second`, in the background.
fn spawn_paced_chat(
    addr: std::net::SocketAddr,
    tokens: &'static str,
    per_second: &'static str,
    prompt: &'static str,
) -> tokio::task::JoinHandle<Response> {
    tokio::spawn(async move {
        chat(
            addr,
            &[
                ("x-sim-completion-tokens", tokens),
                ("x-sim-tokens-per-second", per_second),
            ],
            &chat_body(prompt),
        )
        .await
    })
}

#[tokio::test]
async fn over_capacity_answers_429_with_retry_after() {
    let server = start(SimConfig {
        max_concurrency: 1,
        retry_after_secs: 3,
        ..SimConfig::fast()
    })
    .await;
    let addr = server.addr();
    let holder = hold_a_slot(&server).await;

    let response = chat(addr, &[], &chat_body("one more")).await;
    assert_eq!(response.status, 429, "{}", response.text());
    assert_eq!(response.header("retry-after"), Some("3"));
    let error = &response.json()["error"];
    assert_eq!(error["type"], "requests");
    assert_eq!(error["code"], "rate_limit_exceeded");
    assert_eq!(error["param"], serde_json::Value::Null);
    // Embeddings need a slot too.
    let response = post(addr, "/v1/embeddings", &[], r#"{"model":"e","input":"x"}"#).await;
    assert_eq!(response.status, 429);

    assert_stats(addr, &[("rejected_over_capacity", 2), ("in_flight", 1)]).await;
    assert_metrics(
        addr,
        &[
            "sluice_sim_rejected_over_capacity_total 2",
            "sluice_sim_in_flight 1",
            "sluice_sim_requests_total{endpoint=\"chat_completions\",status=\"429\"} 1",
        ],
    )
    .await;

    // The slot frees when the holder goes away.
    drop(holder);
    wait_for_stats(addr, |s| s["in_flight"] == 0).await;
    let response = chat(addr, &[], &chat_body("now")).await;
    assert_eq!(response.status, 200);
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn over_capacity_can_answer_503() {
    let server = start_one_slot(OverCapacity::Reject503).await;
    let _holder = hold_a_slot(&server).await;
    let response = chat(server.addr(), &[], &chat_body("one more")).await;
    assert_eq!(response.status, 503, "{}", response.text());
    assert_eq!(response.header("retry-after"), Some("1"));
    assert_eq!(response.json()["error"]["type"], "server_error");
    assert_eq!(stats(server.addr()).await["rejected_over_capacity"], 1);
}

#[tokio::test]
async fn over_capacity_can_queue_instead() {
    let server = start_one_slot(OverCapacity::Queue).await;
    let addr = server.addr();
    let first = spawn_paced_chat(addr, "10", "50", "first");
    wait_for_stats(addr, |s| s["in_flight"] == 1).await;
    let second = tokio::spawn(async move {
        chat(
            addr,
            &[("x-sim-completion-tokens", "3")],
            &chat_body("second"),
        )
        .await
    });
    let queued = wait_for_stats(addr, |s| s["queue_depth"] == 1).await;
    assert_eq!(queued["queued"], 1);
    let first = first.await.unwrap();
    let second = second.await.unwrap();
    assert_eq!(first.status, 200);
    assert_eq!(second.status, 200);
    assert_eq!(
        second.json()["choices"][0]["message"]["content"],
        completion_text(3)
    );
    let stats = wait_for_stats(addr, |s| s["in_flight"] == 0).await;
    assert_eq!(stats["queue_depth"], 0);
    assert_eq!(stats["queued"], 1);
    assert_eq!(stats["rejected_over_capacity"], 0);
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn generation_is_paced_by_tokens_per_second() {
    let server = start(SimConfig {
        default_completion_tokens: 20,
        ..at_100_tokens_per_second()
    })
    .await;
    let addr = server.addr();
    // 20 tokens at 100 tokens/s: the last one is due 190 ms after the first.
    let started = Instant::now();
    let answer = chat(addr, &[], &chat_body("pace me")).await;
    let elapsed = started.elapsed();
    assert_eq!(answer.json()["usage"]["completion_tokens"], 20);
    assert!(elapsed >= Duration::from_millis(185), "{elapsed:?}");

    let started = Instant::now();
    let response = chat(addr, &[], &stream_body("pace me", false)).await;
    let elapsed = started.elapsed();
    assert_eq!(response.events().len(), 1 + 20 + 1 + 1);
    assert!(elapsed >= Duration::from_millis(185), "{elapsed:?}");

    // Per-request headers: first-token latency, then 10 tokens at 50/s.
    let started = Instant::now();
    let mut stream = EventReader::open(
        addr,
        "/v1/chat/completions",
        &[
            ("x-sim-first-token-ms", "150"),
            ("x-sim-tokens-per-second", "50"),
            ("x-sim-completion-tokens", "10"),
        ],
        &stream_body("x", false).to_string(),
    )
    .await;
    stream.next_event().await.unwrap(); // role
    stream.next_event().await.unwrap(); // first token
    assert!(
        started.elapsed() >= Duration::from_millis(145),
        "{:?}",
        started.elapsed()
    );
    let rest = stream.rest().await;
    assert_eq!(rest.len(), 9 + 1 + 1);
    // 150 ms + 9 × 20 ms
    assert!(
        started.elapsed() >= Duration::from_millis(325),
        "{:?}",
        started.elapsed()
    );
    assert!(stream.finished);

    // 0 tokens/s: as fast as possible.
    let response = chat(
        addr,
        &[
            ("x-sim-tokens-per-second", "0"),
            ("x-sim-completion-tokens", "2000"),
        ],
        &chat_body("fast"),
    )
    .await;
    assert_eq!(response.json()["usage"]["completion_tokens"], 2000);
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn client_disconnect_stops_generation() {
    let (server, mut stream) =
        start_paced_stream("100000", &stream_body("long answer", true)).await;
    let addr = server.addr();
    for _ in 0..4 {
        stream.next_event().await.unwrap();
    }
    assert_eq!(stats(addr).await["in_flight"], 1);
    drop(stream);
    let stats = wait_for_stats(addr, |s| {
        s["client_disconnects"] == 1 && s["in_flight"] == 0
    })
    .await;
    let generated = stats["tokens_generated"].as_u64().unwrap();
    // Generation stopped: the count no longer moves.
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(common::stats(addr).await["tokens_generated"], generated);
    assert!(generated < 1000, "{generated}");
    assert_metrics(addr, &["sluice_sim_client_disconnects_total 1"]).await;

    // A client that gives up on a whole (non-streamed) answer counts too.
    let mut request = spawn_paced_chat(addr, "1000", "10", "slow");
    wait_for_stats(addr, |s| s["in_flight"] == 1).await;
    request.abort();
    let _ = (&mut request).await;
    wait_for_stats(addr, |s| {
        s["client_disconnects"] == 2 && s["in_flight"] == 0
    })
    .await;
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn max_tokens_still_caps_paced_streams() {
    let server = start(SimConfig::fast()).await;
    let mut body = stream_body("x", false);
    body["max_completion_tokens"] = json!(3);
    let response = chat(server.addr(), &[("x-sim-completion-tokens", "9")], &body).await;
    let events = response.events();
    assert_eq!(events.len(), 1 + 3 + 1 + 1);
    assert_eq!(parse(&events[4])["choices"][0]["finish_reason"], "length");
    server.shutdown().await.unwrap();
}
