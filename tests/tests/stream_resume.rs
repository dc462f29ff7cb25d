//! A deferred SSE answer whose connection dies mid-answer with a process:
//! the load client (as a well-written SSE client) resumes the stream with
//! its resume token and `Last-Event-ID` through Envoy, as a client would,
//! and must get the whole answer — nothing lost or repeated, the model
//! called once. Every part is a real process (`ProcessStack`), so
//! `kill -9` is real: no shutdown path runs in the killed process.
//!
//! Needs sluice-rls, sluice-consumer and sluice-llm-sim built
//! (`cargo build --workspace --bins`, as `cargo test --workspace` does, or
//! `SLUICE_BIN_DIR`), Envoy with the built filter, Redis and the broker.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests fail loudly

use sluice_testkit::load::{
    self, model_calls, Class, LoadClient, Outcome, ProcessStack, ProcessStackOptions, RequestSpec,
};
use sluice_testkit::stack::redis_connection_at;
use std::time::{Duration, Instant};

/// Generous: a restarted part may take long on a loaded machine; the
/// client keeps trying (2 s apart at most) until then.
const RESUME_TRIES: u32 = 90;
const DEADLINE: Duration = Duration::from_secs(300);
/// The model's answer: 16 tokens (the load client's `max_tokens`).
const ANSWER_WORDS: usize = 16;

/// sluice-rls holds the deferral endpoint, so the client's SSE connection:
/// killed, it cannot cancel the model call, the consumer goes on writing
/// the answer to Redis, and the restarted endpoint serves the resume.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deferred_stream_cut_by_a_sluice_rls_kill_is_resumed_whole() {
    cut_and_resume(
        |stack| stack.rls.kill9(),
        |stack| stack.rls.restart().unwrap(),
    )
    .await;
}

/// Envoy killed: the endpoint sees its connection from Envoy close, as if
/// the client had left, and sets `cancel:{id}`: the consumer stops the
/// model call, and the resumed stream ends in `sluice_deferral/cancelled`
/// (found while building this test; a product change, see
/// docs/operations.md's chaos section).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deferred_stream_cut_by_an_envoy_kill_is_resumed_whole() {
    cut_and_resume(ProcessStack::kill_envoy, |stack| {
        stack.restart_envoy().unwrap()
    })
    .await;
}

async fn cut_and_resume(kill: fn(&mut ProcessStack), restart: fn(&mut ProcessStack)) {
    sluice_testkit::init_test_tracing();
    let dir = tempfile::tempdir().unwrap();
    // 16 tokens at 2/s: the answer takes ~8 s, so a kill once 2 chunks are
    // written lands mid-answer.
    let options = ProcessStackOptions {
        sim_args: ProcessStackOptions::sim_pace(2, 20),
        ..ProcessStackOptions::new(load::limits_yaml(), dir.path().to_path_buf())
    };
    let mut stack = ProcessStack::start_for("stream_resume", options)
        .await
        .unwrap();
    let client = LoadClient::new(stack.listener, 40).with_resume_tries(RESUME_TRIES);
    let spec = RequestSpec {
        class: Class::Deferred,
        stream: true,
        lane: 0,
    };
    let start = Instant::now();
    let cut = tokio::spawn({
        let client = client.clone();
        async move { client.send(1, spec, start, DEADLINE).await }
    });

    let written = chunks_written(&stack.redis.url(), 2).await;
    assert!(
        written < ANSWER_WORDS as u64,
        "the answer was over before the kill: {written} entries"
    );
    tokio::task::block_in_place(|| {
        kill(&mut stack);
        restart(&mut stack);
    });

    let record = cut.await.unwrap();
    assert!(
        matches!(record.outcome, Outcome::Resumed { .. }),
        "{record:?}"
    );
    // The same request unbroken: the same words (llm-sim's are fixed).
    let whole = client.send(2, spec, start, DEADLINE).await;
    assert_eq!(whole.outcome, Outcome::Full, "{whole:?}");
    let text = record.content.as_deref().unwrap();
    assert_eq!(text.split_whitespace().count(), ANSWER_WORDS, "{text}");
    assert_eq!(record.content, whole.content);
    let id = record.sluice_request_id.as_deref().unwrap();
    assert_eq!(model_calls(stack.sim_addr, id).await, Some(1));
}

/// Waits until some response stream holds `at_least` entries (the model is
/// mid-answer); returns how many it held.
async fn chunks_written(redis_url: &str, at_least: u64) -> u64 {
    let mut conn = redis_connection_at(redis_url);
    loop {
        let keys: Vec<String> = redis::cmd("KEYS")
            .arg("sluice:*response:*")
            .query_async(&mut conn)
            .await
            .unwrap();
        for key in keys {
            let len: u64 = redis::cmd("XLEN")
                .arg(&key)
                .query_async(&mut conn)
                .await
                .unwrap();
            if len >= at_least {
                return len;
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
