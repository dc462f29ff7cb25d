//! The consumer against a real redis-server and the real llm-sim: no mocks.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::*;
use serde_json::json;
use sluice_consumer::ErrorCode;
use sluice_consumer::{keys, Disposition, FailureKind, IdempotencyConfig, Outcome, Processor};
use sluice_llm_sim::SimConfig;
use sluice_testkit::{Durability, RedisServer};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Asserts that `outcome` matches the pattern (and its guard), showing it
/// when it does not.
macro_rules! assert_outcome {
    ($outcome:expr, $pattern:pat $(if $guard:expr)?) => {
        assert!(matches!($outcome, $pattern $(if $guard)?), "{:?}", $outcome)
    };
}

fn short_lease() -> IdempotencyConfig {
    IdempotencyConfig {
        lease_ms: 1000,
        heartbeat_interval_ms: 100,
        ..IdempotencyConfig::default()
    }
}

/// `outcome` is a `RetryLater` of this `kind`.
fn assert_retry_later(outcome: &Outcome, kind: FailureKind) {
    assert_outcome!(outcome, Outcome::RetryLater { kind: k, .. } if *k == kind);
}

/// The processor acknowledges `outcome`: it is final, never redelivered.
fn assert_acked(outcome: &Outcome, processor: &Processor) {
    let disposition = outcome.disposition(processor.idempotency_config());
    assert_eq!(disposition, Disposition::Ack, "{outcome:?}");
}

/// A fresh Redis, llm-sim answering `tokens` tokens, a consumer of both and
/// a connection to the Redis.
async fn answering(
    tokens: &str,
) -> (
    RedisServer,
    sluice_llm_sim::SimServer,
    Processor,
    sluice_redis::RedisConn,
) {
    let (redis, sim) = redis_and_sim().await;
    let consumer = consumer(&redis, &sim.url(), &[("x-sim-completion-tokens", tokens)]);
    let conn = conn(&redis);
    (redis, sim, consumer, conn)
}

#[tokio::test]
async fn streams_chunks_then_done_with_usage() {
    let (redis, sim) = redis_and_sim().await;
    let consumer = consumer(&redis, &sim.url(), &[("x-sim-completion-tokens", "5")]);
    let mut conn = conn(&redis);
    let item = item("stream-1");

    let outcome = consumer.process(&item).await;
    let Outcome::Completed { chunks, usage, .. } = &outcome else {
        panic!("{outcome:?}")
    };
    // role chunk + 5 tokens + finish chunk + usage chunk
    assert_eq!(*chunks, 8);
    assert_eq!(usage.as_ref().unwrap()["completion_tokens"], json!(5));
    assert_acked(&outcome, &consumer);

    let entries = entries(&mut conn, "stream-1").await;
    assert_eq!(entries.len(), 9);
    let mut text = String::new();
    for (_, fields) in &entries[..8] {
        assert_eq!(fields["type"], "chunk");
        let chunk: serde_json::Value = serde_json::from_str(&fields["data"]).unwrap();
        assert_eq!(chunk["object"], "chat.completion.chunk");
        if let Some(content) = chunk["choices"][0]["delta"]["content"].as_str() {
            text.push_str(content);
        }
    }
    assert_eq!(text, sluice_llm_sim::text::completion_text(5));
    let (_, done) = &entries[8];
    assert_eq!(done["type"], "done");
    let usage: serde_json::Value = serde_json::from_str(&done["usage"]).unwrap();
    assert_eq!(usage["completion_tokens"], json!(5));

    let ttl = ttl_s(&mut conn, &keys::response("stream-1")).await;
    assert!((1..=300).contains(&ttl), "ttl {ttl}");
    let done = get(&mut conn, &keys::done("stream-1")).await;
    assert_eq!(done.as_deref(), Some("ok"));
    let processing = exists(&mut conn, &keys::processing("stream-1")).await;
    assert!(!processing);
    assert_eq!(sim_calls(&sim.url(), "stream-1").await, 1);
    let metrics = consumer.metrics().encode();
    assert!(metrics.contains("sluice_consumer_outcomes_total{outcome=\"completed\"} 1"));
    assert!(metrics.contains("sluice_consumer_chunks_total{model=\"sim-model\"} 8"));
    sim.shutdown().await.unwrap();
}

/// Counts what it is told of a call's output.
#[derive(Debug, Default)]
struct Told {
    calls: std::sync::atomic::AtomicU64,
    tokens: std::sync::atomic::AtomicU64,
}

impl sluice_consumer::OutputObserver for Told {
    fn streamed(&self, tokens: u64) {
        use std::sync::atomic::Ordering::Relaxed;
        self.calls.fetch_add(1, Relaxed);
        self.tokens.fetch_add(tokens, Relaxed);
    }
}

/// The fair queue's charge hears of each chunk carrying output as it is
/// read (the role, finish and usage chunks carry none).
#[tokio::test]
async fn the_output_observer_is_told_of_each_output_chunk() {
    let (redis, sim, consumer, _conn) = answering("7").await;
    let told = std::sync::Arc::new(Told::default());
    let observer: std::sync::Arc<dyn sluice_consumer::OutputObserver> = told.clone();
    let outcome = consumer
        .process_with(
            &item("told-1"),
            sluice_consumer::CallOptions {
                observer: Some(observer),
                ..Default::default()
            },
        )
        .await;
    let Outcome::Completed { chunks, .. } = &outcome else {
        panic!("{outcome:?}")
    };
    assert_eq!(*chunks, 10, "role + 7 tokens + finish + usage");
    use std::sync::atomic::Ordering::Relaxed;
    assert_eq!(told.tokens.load(Relaxed), 7);
    assert_eq!(told.calls.load(Relaxed), 7, "one call per chunk");
    sim.shutdown().await.unwrap();
    drop(redis);
}

/// A backend that streams faster than Redis takes writes: the chunks read
/// while a write is in flight go together in the next one, every chunk
/// once, in order, with consecutive ids.
#[tokio::test]
async fn chunks_read_during_a_write_share_the_next_write() {
    let (_redis, sim, consumer, mut conn) = answering("300").await;
    let outcome = consumer.process(&item("fast-1")).await;
    let Outcome::Completed { chunks, .. } = &outcome else {
        panic!("{outcome:?}")
    };
    // role chunk + 300 tokens + finish chunk + usage chunk
    assert_eq!(*chunks, 303);
    let entries = entries(&mut conn, "fast-1").await;
    assert_eq!(entries.len(), 304);
    let mut text = String::new();
    for (at, (id, fields)) in entries[..303].iter().enumerate() {
        assert_eq!(fields["type"], "chunk");
        let seq = id.rsplit('-').next().unwrap();
        assert_eq!(seq, (at + 1).to_string(), "chunk ids in order, none twice");
        let chunk: serde_json::Value = serde_json::from_str(&fields["data"]).unwrap();
        if let Some(content) = chunk["choices"][0]["delta"]["content"].as_str() {
            text.push_str(content);
        }
    }
    assert_eq!(text, sluice_llm_sim::text::completion_text(300));
    assert_eq!(entries[303].1["type"], "done");
    let metrics = consumer.metrics().encode();
    let writes: u64 = metrics
        .lines()
        .find_map(|l| l.strip_prefix("sluice_consumer_chunk_write_seconds_count "))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(
        (1..303).contains(&writes),
        "303 chunks in {writes} writes: one write per chunk"
    );
    sim.shutdown().await.unwrap();
}

#[tokio::test]
async fn client_asking_without_stream_still_gets_chunks() {
    let (redis, sim) = redis_and_sim().await;
    let consumer = consumer(&redis, &sim.url(), &[("x-sim-completion-tokens", "2")]);
    let mut item = item("nostream-1");
    item.body = json!({"model": "sim-model", "messages": [{"role": "user", "content": "hi"}], "stream": false});
    let outcome = consumer.process(&item).await;
    assert_outcome!(
        outcome,
        Outcome::Completed {
            chunks: 5,
            usage: Some(_),
            output_tokens: None,
            first_token_ms: Some(_),
        }
    );
    sim.shutdown().await.unwrap();
}

#[tokio::test]
async fn backend_business_error_is_final_and_not_retried() {
    let (redis, sim) = redis_and_sim().await;
    let mut conn = conn(&redis);

    // 500 before any output.
    let failing = consumer(&redis, &sim.url(), &[("x-sim-fail", "before")]);
    let outcome = failing.process(&item("err-500")).await;
    assert_outcome!(
        outcome,
        Outcome::Failed {
            status: 502,
            code: ErrorCode::BackendError,
            kind: FailureKind::BackendStatus,
            chunks: 0
        }
    );
    assert_acked(&outcome, &failing);
    let entries_500 = entries(&mut conn, "err-500").await;
    assert_eq!(entries_500.len(), 1);
    assert_eq!(entries_500[0].1["type"], "error");
    assert_eq!(entries_500[0].1["status"], "502");
    assert_eq!(entries_500[0].1["code"], "backend_error");
    assert_eq!(sim_calls(&sim.url(), "err-500").await, 1);
    // A redelivery does not call the model again.
    assert_eq!(
        failing.process(&item("err-500")).await,
        Outcome::AlreadyDone
    );
    assert_eq!(sim_calls(&sim.url(), "err-500").await, 1);

    // 400 for a bad body: the client's own mistake, status passed through.
    let plain = consumer(&redis, &sim.url(), &[]);
    let mut bad = item("err-400");
    bad.body = json!({"model": "sim-model"});
    let outcome = plain.process(&bad).await;
    assert_outcome!(outcome, Outcome::Failed { status: 400, .. });
    let entries_400 = entries(&mut conn, "err-400").await;
    assert_eq!(entries_400.last().unwrap().1["status"], "400");
    assert!(entries_400.last().unwrap().1["message"].contains("messages"));
    assert_eq!(sim_calls(&sim.url(), "err-400").await, 1);

    // A body that is not an object never reaches the model.
    let mut not_object = item("err-shape");
    not_object.body = json!([1, 2]);
    let outcome = plain.process(&not_object).await;
    assert_outcome!(
        outcome,
        Outcome::Failed {
            status: 400,
            code: ErrorCode::InvalidRequest,
            ..
        }
    );
    assert_eq!(sim_calls(&sim.url(), "err-shape").await, 0);
    sim.shutdown().await.unwrap();
}

#[tokio::test]
async fn unreachable_backend_retries_later_without_terminal_entry() {
    let redis = RedisServer::start().unwrap();
    let closed = format!("http://127.0.0.1:{}", sluice_testkit::free_port());
    let consumer = consumer(&redis, &closed, &[]);
    let mut conn = conn(&redis);

    let outcome = consumer.process(&item("unreach-1")).await;
    assert_retry_later(&outcome, FailureKind::Unreachable);
    assert!(matches!(
        outcome.disposition(consumer.idempotency_config()),
        Disposition::Retry { .. }
    ));
    assert_eq!(xlen(&mut conn, "unreach-1").await, 0);
    for key in [keys::done("unreach-1"), keys::processing("unreach-1")] {
        assert!(!exists(&mut conn, &key).await, "{key} left behind");
    }

    // The retry, once the backend is back, answers the request.
    let sim = sluice_llm_sim::spawn(SimConfig::fast()).await.unwrap();
    let working = common::consumer(&redis, &sim.url(), &[("x-sim-completion-tokens", "3")]);
    let outcome = working.process(&item("unreach-1")).await;
    assert!(matches!(outcome, Outcome::Completed { .. }), "{outcome:?}");
    assert_eq!(sim_calls(&sim.url(), "unreach-1").await, 1);

    // The pop loop can give up on a request that never got through.
    assert!(consumer
        .give_up(
            "unreach-2",
            504,
            ErrorCode::BackendUnreachable,
            "backend unreachable"
        )
        .await
        .unwrap());
    let given_up = entries(&mut conn, "unreach-2").await;
    assert_eq!(given_up.len(), 1);
    assert_eq!(given_up[0].1["code"], "backend_unreachable");
    // ... once only.
    assert!(!consumer
        .give_up("unreach-2", 504, ErrorCode::BackendUnreachable, "again")
        .await
        .unwrap());
    sim.shutdown().await.unwrap();
}

#[tokio::test]
async fn busy_backend_retries_later_with_its_retry_after() {
    let redis = RedisServer::start().unwrap();
    let sim = sluice_llm_sim::spawn(SimConfig {
        max_concurrency: 1,
        retry_after_secs: 2,
        ..SimConfig::fast()
    })
    .await
    .unwrap();
    let mut conn = conn(&redis);
    let slow = Arc::new(consumer(
        &redis,
        &sim.url(),
        &[
            ("x-sim-completion-tokens", "20"),
            ("x-sim-tokens-per-second", "20"),
        ],
    ));
    let running = spawn_process(&slow, "busy-1");
    wait_for_entries(&mut conn, "busy-1", 1).await;
    let outcome = slow.process(&item("busy-2")).await;
    assert_outcome!(
        outcome,
        Outcome::RetryLater {
            kind: FailureKind::BackendBusy,
            retry_after: Some(d),
            ..
        } if d == Duration::from_secs(2)
    );
    assert_eq!(xlen(&mut conn, "busy-2").await, 0);
    running.abort();
    sim.shutdown().await.unwrap();
}

#[tokio::test]
async fn mid_stream_failure_ends_with_error_after_chunks() {
    let (redis, sim) = redis_and_sim().await;
    let consumer = consumer(
        &redis,
        &sim.url(),
        &[("x-sim-fail", "mid"), ("x-sim-completion-tokens", "10")],
    );
    let mut conn = conn(&redis);
    let outcome = consumer.process(&item("mid-1")).await;
    let Outcome::Failed {
        status,
        code,
        kind,
        chunks,
    } = outcome
    else {
        panic!("{outcome:?}")
    };
    assert_eq!(
        (status, code, kind),
        (
            502,
            ErrorCode::BackendStreamBroken,
            FailureKind::StreamBroken
        )
    );
    // role chunk + 5 of 10 tokens
    assert_eq!(chunks, 6);
    let entries = entries(&mut conn, "mid-1").await;
    assert_eq!(entries.len(), 7);
    assert!(entries[..6].iter().all(|(_, f)| f["type"] == "chunk"));
    assert_eq!(entries[6].1["type"], "error");
    assert_eq!(entries[6].1["code"], "backend_stream_broken");
    assert_eq!(sim_calls(&sim.url(), "mid-1").await, 1);
    sim.shutdown().await.unwrap();
}

#[tokio::test]
async fn cancel_stops_a_slow_stream_within_about_a_chunk() {
    let (redis, sim) = redis_and_sim().await;
    let consumer = Arc::new(consumer(&redis, &sim.url(), &SLOW_ANSWER));
    let mut conn = conn(&redis);
    let running = spawn_process(&consumer, "cancel-1");
    wait_for_entries(&mut conn, "cancel-1", 3).await;
    let cancelled_at = Instant::now();
    set(&mut conn, &keys::cancel("cancel-1"), "1").await;
    let outcome = running.await.unwrap();
    let stopped_after = cancelled_at.elapsed();
    let Outcome::Cancelled { chunks } = outcome else {
        panic!("{outcome:?}")
    };
    eprintln!("cancel: {chunks} chunks written, stopped {stopped_after:?} after the cancel");
    // 20 tokens/s: a chunk every 50 ms; the whole answer would take 5 s.
    assert!(chunks < 20, "{chunks} chunks written");
    assert!(stopped_after < Duration::from_secs(2), "{stopped_after:?}");
    let entries = entries(&mut conn, "cancel-1").await;
    let (_, last) = entries.last().unwrap();
    assert_eq!(last["type"], "error");
    assert_eq!(last["code"], "cancelled");
    assert!(
        wait_for_disconnects(&sim.url(), 1).await,
        "the backend call was not aborted"
    );
    assert_metric(&consumer, "sluice_consumer_cancels_total 1");
    sim.shutdown().await.unwrap();
}

#[tokio::test]
async fn cancel_before_start_never_calls_the_model() {
    let (redis, sim) = redis_and_sim().await;
    let consumer = consumer(&redis, &sim.url(), &[]);
    let mut conn = conn(&redis);
    set(&mut conn, &keys::cancel("cancel-2"), "1").await;
    assert_eq!(
        consumer.process(&item("cancel-2")).await,
        Outcome::Cancelled { chunks: 0 }
    );
    assert_eq!(
        entries(&mut conn, "cancel-2").await[0].1["code"],
        "cancelled"
    );
    assert_eq!(sim_calls(&sim.url(), "cancel-2").await, 0);
    sim.shutdown().await.unwrap();
}

#[tokio::test]
async fn same_item_twice_is_skipped() {
    let (_redis, sim, consumer, mut conn) = answering("3").await;
    assert!(matches!(
        consumer.process(&item("twice-1")).await,
        Outcome::Completed { .. }
    ));
    let outcome = consumer.process(&item("twice-1")).await;
    assert_eq!(outcome, Outcome::AlreadyDone);
    assert_acked(&outcome, &consumer);
    assert_eq!(sim_calls(&sim.url(), "twice-1").await, 1);
    let entries = entries(&mut conn, "twice-1").await;
    assert_eq!(
        entries.iter().filter(|(_, f)| f["type"] == "done").count(),
        1
    );
    sim.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_copy_older_than_the_redelivery_horizon_is_acknowledged_without_a_call() {
    let (redis, sim) = redis_and_sim().await;
    let horizon = IdempotencyConfig {
        max_work_item_age_secs: 60,
        done_ttl_secs: 60,
        processing_retention_secs: 60,
        ..IdempotencyConfig::default()
    };
    let consumer = consumer_with(&redis, &sim.url(), &[], horizon);
    let mut conn = conn(&redis);
    // Published 61 s ago: its done marker may have expired by now.
    let mut late = item("late-1");
    late.enqueued_at_ms -= 61_000;
    let outcome = consumer.process(&late).await;
    assert_outcome!(outcome, Outcome::Expired { age_ms } if age_ms >= 61_000);
    assert_acked(&outcome, &consumer);
    assert_eq!(sim_calls(&sim.url(), "late-1").await, 0);
    assert!(!exists(&mut conn, &keys::processing("late-1")).await);
    // Inside the horizon it runs, and its done marker lives the configured 60 s.
    let mut recent = item("recent-1");
    recent.enqueued_at_ms -= 59_000;
    assert!(matches!(
        consumer.process(&recent).await,
        Outcome::Completed { .. }
    ));
    let ttl = ttl_s(&mut conn, &keys::done("recent-1")).await;
    assert!((1..=60).contains(&ttl), "done ttl {ttl}");
    assert_metric(
        &consumer,
        "sluice_consumer_outcomes_total{outcome=\"expired\"} 1",
    );
    sim.shutdown().await.unwrap();
}

#[tokio::test]
async fn half_done_redelivery_writes_interrupted_without_calling_the_model() {
    let (redis, sim) = redis_and_sim().await;
    let headers = SLOW_ANSWER;
    let first = Arc::new(consumer_with(&redis, &sim.url(), &headers, short_lease()));
    let second = consumer_with(&redis, &sim.url(), &headers, short_lease());
    let mut conn = conn(&redis);

    // The first attempt runs; a redelivery meanwhile sees it alive.
    let running = spawn_process(&first, "half-1");
    wait_for_entries(&mut conn, "half-1", 3).await;
    // Longer than the lease: the heartbeat keeps the claim fresh.
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let outcome = second.process(&item("half-1")).await;
    assert_eq!(outcome, Outcome::InProgressElsewhere);
    assert!(matches!(
        outcome.disposition(second.idempotency_config()),
        Disposition::Retry { after: Some(_) }
    ));
    // Settling at pop leaves a live claim to the normal path.
    assert_eq!(second.settle_without_call(&item("half-1")).await, None);

    // The first attempt dies mid-call (its task is dropped: no heartbeat, no
    // terminal entry, the backend connection closed).
    running.abort();
    let _ = running.await;
    tokio::time::sleep(Duration::from_millis(1200)).await;
    // Settled at pop, with no pacing slot and no model call.
    let outcome = second.settle_without_call(&item("half-1")).await.unwrap();
    assert_eq!(outcome, Outcome::Interrupted);
    assert_acked(&outcome, &second);
    assert_eq!(sim_calls(&sim.url(), "half-1").await, 1);
    let entries = entries(&mut conn, "half-1").await;
    let (_, last) = entries.last().unwrap();
    assert_eq!(last["type"], "error");
    assert_eq!(last["code"], "interrupted");
    // And from then on, redeliveries are skipped.
    assert_eq!(second.process(&item("half-1")).await, Outcome::AlreadyDone);
    assert_eq!(sim_calls(&sim.url(), "half-1").await, 1);

    assert_eq!(
        second.settle_without_call(&item("half-1")).await,
        Some(Outcome::AlreadyDone)
    );
    // A free request is never claimed by settling: it must be paced first.
    assert_eq!(second.settle_without_call(&item("half-3")).await, None);
    assert!(!exists(&mut conn, &keys::processing("half-3")).await);
    assert_eq!(sim_calls(&sim.url(), "half-3").await, 0);

    // A marker left by someone else (no readable heartbeat) counts as dead.
    set(&mut conn, &keys::processing("half-2"), "other-consumer").await;
    assert_eq!(second.process(&item("half-2")).await, Outcome::Interrupted);
    assert_eq!(sim_calls(&sim.url(), "half-2").await, 0);
    sim.shutdown().await.unwrap();
}

#[tokio::test]
async fn an_attempt_that_lost_its_claim_stops_and_writes_nothing() {
    let (redis, sim) = redis_and_sim().await;
    let consumer = Arc::new(consumer_with(
        &redis,
        &sim.url(),
        &SLOW_ANSWER,
        short_lease(),
    ));
    let mut conn = conn(&redis);
    let running = spawn_process(&consumer, "lost-1");
    wait_for_entries(&mut conn, "lost-1", 2).await;
    // Another attempt took the request over.
    set(
        &mut conn,
        &keys::processing("lost-1"),
        "someone-else/1 99999999999999",
    )
    .await;
    let outcome = running.await.unwrap();
    assert_eq!(outcome, Outcome::LostOwnership);
    assert!(entries(&mut conn, "lost-1")
        .await
        .iter()
        .all(|(_, f)| f["type"] == "chunk"));
    assert!(wait_for_disconnects(&sim.url(), 1).await);
    sim.shutdown().await.unwrap();
}

#[tokio::test]
async fn redis_down_past_the_outage_grace_aborts_the_backend_call() {
    let (mut redis, sim) = redis_and_sim().await;
    let grace = IdempotencyConfig {
        redis_outage_grace_ms: 500,
        ..IdempotencyConfig::default()
    };
    let consumer = Arc::new(consumer_with(&redis, &sim.url(), &SLOW_ANSWER, grace));
    let mut conn = conn(&redis);
    let running = spawn_process(&consumer, "redis-down-1");
    wait_for_entries(&mut conn, "redis-down-1", 3).await;
    let stopped_at = Instant::now();
    redis.stop();
    let outcome = running.await.unwrap();
    assert_retry_later(&outcome, FailureKind::Redis);
    eprintln!(
        "redis down: call stopped {:?} after the kill",
        stopped_at.elapsed()
    );
    // The whole answer would take 5 s; the call stops at the first write
    // after the grace.
    assert!(
        stopped_at.elapsed() < Duration::from_secs(4),
        "{:?}",
        stopped_at.elapsed()
    );
    assert!(
        wait_for_disconnects(&sim.url(), 1).await,
        "the backend call was not aborted"
    );
    assert_eq!(sim_calls(&sim.url(), "redis-down-1").await, 1);

    // Redis down before the claim: nothing reaches the model.
    let outcome = consumer.process(&item("redis-down-2")).await;
    assert_retry_later(&outcome, FailureKind::Redis);
    assert_eq!(sim_calls(&sim.url(), "redis-down-2").await, 0);
    sim.shutdown().await.unwrap();
}

/// Redis killed mid-call and started again 1 s later, `durability` deciding
/// what it kept: the call rides the outage out (no broken stream), the model
/// is called once, and no chunk is in the stream twice.
async fn a_redis_restart_mid_call(
    durability: Durability,
    req_id: &str,
    idempotency: IdempotencyConfig,
) {
    let mut redis = RedisServer::start_with(durability).unwrap();
    let sim = sluice_llm_sim::spawn(SimConfig::fast()).await.unwrap();
    let consumer = Arc::new(consumer_with(&redis, &sim.url(), &SLOW_ANSWER, idempotency));
    let mut conn = conn(&redis);
    let running = spawn_process(&consumer, req_id);
    wait_for_entries(&mut conn, req_id, 3).await;
    let before = entries(&mut conn, req_id).await.len();
    redis.stop();
    tokio::time::sleep(Duration::from_secs(1)).await;
    tokio::task::block_in_place(|| redis.restart()).unwrap();

    let outcome = running.await.unwrap();
    let mut conn = common::conn(&redis);
    let Outcome::Completed { chunks, .. } = outcome else {
        panic!("{durability:?}: {outcome:?}")
    };
    assert_eq!(sim_calls(&sim.url(), req_id).await, 1, "{durability:?}");
    let stream = entries(&mut conn, req_id).await;
    let (terminal, written) = stream.split_last().unwrap();
    assert_eq!(terminal.1["type"], "done", "{durability:?}");
    assert!(written.iter().all(|(_, f)| f["type"] == "chunk"));
    let ids: Vec<&str> = written.iter().map(|(id, _)| id.as_str()).collect();
    let mut unique = ids.clone();
    unique.dedup();
    assert_eq!(unique, ids, "{durability:?}: a chunk written twice");
    match durability {
        // Every chunk once: none lost, none twice.
        Durability::AppendAlways => assert_eq!(written.len() as u64, chunks),
        // What Redis held before the kill is gone; what came after is whole.
        Durability::Volatile => assert!(
            (written.len() as u64) <= chunks - before as u64 && !written.is_empty(),
            "{} written of {chunks}, {before} before the kill",
            written.len()
        ),
    }
    // The claim ended with the answer (written again after an empty restart).
    assert!(exists(&mut conn, &keys::done(req_id)).await);
    sim.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_restart_with_its_data_breaks_no_stream() {
    a_redis_restart_mid_call(
        Durability::AppendAlways,
        "restart-aof-1",
        IdempotencyConfig::default(),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_restart_without_its_data_breaks_no_stream_and_keeps_the_claim() {
    a_redis_restart_mid_call(
        Durability::Volatile,
        "restart-empty-1",
        IdempotencyConfig::default(),
    )
    .await;
}

/// After an empty restart the answer ends before the owner's next heartbeat
/// has written the claim again (here: no heartbeat within the test): the
/// finish still writes the terminal entry. It used to find no claim, end as
/// `LostOwnership` and write nothing, so the client waited for its timeout
/// (the chaos run's 56 s in-flight request at the Redis kill).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_ending_before_the_claim_is_written_again_is_still_finished() {
    let heartbeat_after_the_test = IdempotencyConfig {
        lease_ms: 120_000,
        heartbeat_interval_ms: 60_000,
        ..IdempotencyConfig::default()
    };
    a_redis_restart_mid_call(
        Durability::Volatile,
        "restart-empty-2",
        heartbeat_after_the_test,
    )
    .await;
}

/// A copy of the request delivered after Redis restarted empty finds the
/// running call's claim, written again by its heartbeat: no second call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_an_empty_restart_a_copy_finds_the_claim_again() {
    let mut redis = RedisServer::start().unwrap();
    let sim = sluice_llm_sim::spawn(SimConfig::fast()).await.unwrap();
    let first = Arc::new(consumer(&redis, &sim.url(), &SLOW_ANSWER));
    let mut conn = conn(&redis);
    let running = spawn_process(&first, "copy-1");
    wait_for_entries(&mut conn, "copy-1", 3).await;
    tokio::task::block_in_place(|| redis.restart()).unwrap();
    let mut conn = common::conn(&redis);
    // The owner's heartbeat (every second) writes the claim again.
    let deadline = Instant::now() + Duration::from_secs(30);
    while !exists(&mut conn, &keys::processing("copy-1")).await {
        assert!(Instant::now() < deadline, "the claim was not written again");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let second = consumer(&redis, &sim.url(), &SLOW_ANSWER);
    let copy = second.process(&item("copy-1")).await;
    assert_eq!(copy, Outcome::InProgressElsewhere);
    assert!(matches!(running.await.unwrap(), Outcome::Completed { .. }));
    assert_eq!(sim_calls(&sim.url(), "copy-1").await, 1);
    sim.shutdown().await.unwrap();
}

#[tokio::test]
async fn invalid_items_are_rejected() {
    let redis = RedisServer::start().unwrap();
    let consumer = consumer(&redis, "http://127.0.0.1:9", &[]);
    let outcome = consumer.process(&item("bad}id")).await;
    assert!(matches!(outcome, Outcome::Rejected { .. }), "{outcome:?}");
    assert_acked(&outcome, &consumer);
}

#[tokio::test]
async fn timeouts_before_and_after_output() {
    let (redis, sim) = redis_and_sim().await;
    let mut conn = conn(&redis);

    // A backend that accepts and never answers: retry later, nothing written.
    let hung = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let hung_url = format!("http://{}", hung.local_addr().unwrap());
    let holder = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = hung.accept().await {
            held.push(socket);
        }
    });
    let slow_start = consumer_with_timeouts(&redis, &hung_url, &[], 300, 5000);
    let outcome = slow_start.process(&item("timeout-1")).await;
    assert_retry_later(&outcome, FailureKind::FirstByteTimeout);
    assert_eq!(xlen(&mut conn, "timeout-1").await, 0);
    holder.abort();

    // Silence after output started: a final 504.
    let stalling = consumer_with_timeouts(
        &redis,
        &sim.url(),
        &[
            ("x-sim-completion-tokens", "5"),
            ("x-sim-tokens-per-second", "1"),
        ],
        5000,
        300,
    );
    let outcome = stalling.process(&item("timeout-2")).await;
    assert_outcome!(
        outcome,
        Outcome::Failed {
            status: 504,
            code: ErrorCode::BackendTimeout,
            kind: FailureKind::IdleTimeout,
            ..
        }
    );
    let entries = entries(&mut conn, "timeout-2").await;
    assert!(entries.len() >= 2);
    assert_eq!(entries.last().unwrap().1["code"], "backend_timeout");
    sim.shutdown().await.unwrap();
}
