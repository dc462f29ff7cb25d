//! The deferred path's exact accounting on real parts (Redis, the RocketMQ
//! broker, the endpoint's LitePublisher, a consumer, llm-sim): once a
//! deferred request's answer is in, its bucket's token pacing debt moves
//! from the estimate it was paced with to the real usage llm-sim reported
//! (both ways), and the tenant's usage is counted in the consumer's metrics.
//! A stream that breaks (no usage) keeps its estimate; a complete answer
//! without usage is counted with the model's tokenizer.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests fail loudly
#![recursion_limit = "256"] // rocketmq-client futures are deeply nested

use sluice_admission::admission::Encoders;
use sluice_admission::encoders::BpeEncoders;
use sluice_admission::openai::{self, Endpoint};
use sluice_consumer::gcra::Stored;
use sluice_consumer::keys::{BucketId, Dimension};
use sluice_consumer::{BackendTargetConfig, PaceDecision};
use sluice_deferral::endpoint::Publisher;
use sluice_deferral::publisher::LitePublisher;
use sluice_llm_sim::ledger::LedgerEntry;
use sluice_llm_sim::text::completion_text;
use sluice_testkit::stack::{
    redis_connection, sim_ledger, start_broker, start_consumer, start_llm_sim, token_paced,
    work_item, ConsumerInstance, ConsumerSpec, GROUP, PARENT,
};
use sluice_testkit::RedisServer;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

const MODEL: &str = "gpt-4o";
/// Served by an llm-sim whose every stream breaks midway.
const BROKEN_MODEL: &str = "gpt-4o-broken";
/// Served by the same llm-sim, asked to answer without usage.
const NO_USAGE_MODEL: &str = "gpt-4o-mini";
/// Token pacing of every bucket: 2 tokens/s, one token = 500 ms of debt. A
/// correction moves the debt exactly only while the bucket is still in
/// debt when it comes: an estimate of 20 tokens is 10 s of debt, far beyond
/// the ≈ 0.25 s call even on a loaded machine (at 20 tokens/s, 1 s of debt
/// ran out before a correction beside a CPU hog, and the debt moved 98 ms
/// more than the usage's difference: GCRA starts a paid-off debt at now).
const TOKENS_PER_SECOND: f64 = 2.0;
const MS_PER_TOKEN: f64 = 1000.0 / TOKENS_PER_SECOND;
/// llm-sim's answers: 30 completion tokens at 120 tokens/s (≈ 0.25 s).
const COMPLETION_TOKENS: u64 = 30;
const LEDGER: &str = "deferred";

struct Parts {
    _redis: RedisServer,
    conn: sluice_redis::RedisConn,
    backend: SocketAddr,
    publisher: LitePublisher,
    consumer: ConsumerInstance,
    _broker: sluice_testkit::RocketMq,
}

async fn start() -> Parts {
    sluice_testkit::init_test_tracing();
    let redis = RedisServer::start().unwrap();
    let broker = start_broker().await;
    let backend = start_llm_sim(sluice_llm_sim::SimConfig {
        tokens_per_second: 120.0,
        default_completion_tokens: COMPLETION_TOKENS,
        ..sluice_llm_sim::SimConfig::fast()
    })
    .await;
    let broken = start_llm_sim(sluice_llm_sim::SimConfig {
        tokens_per_second: 120.0,
        default_completion_tokens: COMPLETION_TOKENS,
        mid_stream_failure_rate: 1.0,
        ..sluice_llm_sim::SimConfig::fast()
    })
    .await;
    let conn = redis_connection(&redis);
    let publisher = LitePublisher::connect(&broker.namesrv_addr(), PARENT, GROUP, conn.clone())
        .await
        .unwrap();
    let mut spec = ConsumerSpec::new("accounting");
    spec.pacing = token_paced(TOKENS_PER_SECOND);
    spec.config.backend.default.headers = vec![("x-sim-ledger".into(), LEDGER.into())];
    spec.config.backend.models.insert(
        BROKEN_MODEL.into(),
        BackendTargetConfig {
            base_url: format!("http://{broken}"),
            ..BackendTargetConfig::default()
        },
    );
    spec.config.backend.models.insert(
        NO_USAGE_MODEL.into(),
        BackendTargetConfig {
            base_url: format!("http://{backend}"),
            headers: vec![
                ("x-sim-ledger".into(), LEDGER.into()),
                (sluice_llm_sim::HEADER_USAGE.into(), "omit".into()),
            ],
            ..BackendTargetConfig::default()
        },
    );
    spec.options.discovery_interval = Duration::from_millis(200);
    let consumer = start_consumer(&conn, &broker, backend, spec).await;
    Parts {
        _redis: redis,
        conn,
        backend,
        publisher,
        consumer,
        _broker: broker,
    }
}

impl Parts {
    async fn tokens_debt(&self, bucket: &BucketId) -> Option<Stored> {
        let mut conn = self.conn.clone();
        let text: Option<String> = redis::cmd("GET")
            .arg(bucket.pace_key(Dimension::Tokens))
            .query_async(&mut conn)
            .await
            .unwrap();
        text.as_deref().and_then(Stored::parse)
    }

    async fn ledger(&self) -> LedgerEntry {
        sim_ledger(self.backend, LEDGER).await
    }

    fn corrections(&self, result: &str) -> f64 {
        self.consumer.counter(&format!(
            "sluice_consumer_pacing_corrections_total{{result=\"{result}\"}}"
        ))
    }

    /// Publishes one deferred request estimated at `estimate` tokens; returns
    /// the bucket's token debt right after its admission (read while the
    /// call runs) and once the call is settled as `result`.
    async fn settle(
        &self,
        tenant: &str,
        model: &str,
        estimate: u64,
        result: &str,
    ) -> (Stored, Option<Stored>) {
        let bucket = BucketId::new(tenant, model);
        let corrections_before = self.corrections(result);
        let req_id = format!("acct-{tenant}");
        let work = work_item(tenant, model, &req_id, estimate);
        self.publisher
            .publish(tenant, MODEL, &req_id, work.to_json().into())
            .await
            .unwrap();
        let started = Instant::now();
        let admitted = loop {
            if let Some(stored) = self.tokens_debt(&bucket).await {
                break stored;
            }
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "{tenant}: never admitted"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        };
        assert_eq!(
            self.corrections(result),
            corrections_before,
            "{tenant}: the call ended before its admitted debt was read; slow llm-sim down"
        );
        while self.corrections(result) == corrections_before {
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "{tenant}: never settled as {result}"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        (admitted, self.tokens_debt(&bucket).await)
    }

    /// [`Parts::settle`] for an answer with usage: the debt before and after
    /// the correction, and the usage llm-sim recorded.
    async fn run(&self, tenant: &str, estimate: u64) -> (Stored, Stored, LedgerEntry) {
        let ledger_before = self.ledger().await;
        let (admitted, corrected) = self.settle(tenant, MODEL, estimate, "corrected").await;
        let corrected = corrected.expect("the corrected debt outlives the call");
        let ledger = self.ledger().await;
        let usage = LedgerEntry {
            requests: ledger.requests - ledger_before.requests,
            prompt_tokens: ledger.prompt_tokens - ledger_before.prompt_tokens,
            completion_tokens: ledger.completion_tokens - ledger_before.completion_tokens,
            broken: ledger.broken - ledger_before.broken,
        };
        assert_eq!((usage.requests, usage.broken), (1, 0), "{tenant}");
        (admitted, corrected, usage)
    }
}

fn assert_moved_by(tenant: &str, admitted: Stored, corrected: Stored, delta_tokens: i64) {
    let moved = corrected.tat - admitted.tat;
    let expected = delta_tokens as f64 * MS_PER_TOKEN;
    assert!(
        (moved - expected).abs() < 0.002,
        "{tenant}: the debt moved {moved} ms, real − estimate = {delta_tokens} tokens = {expected} ms ({admitted:?} → {corrected:?})"
    );
    assert_eq!(corrected.interval, MS_PER_TOKEN, "{tenant}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deferred_answer_moves_its_buckets_token_debt_to_the_real_usage() {
    let parts = start().await;

    // Estimated short: the debt grows by what the model really used beyond.
    // (20 tokens = 10 s of debt, far longer than the ≈ 0.25 s call, so the
    // bucket is still in debt when the correction comes.)
    let (admitted, corrected, usage) = parts.run("short", 20).await;
    let real = usage.prompt_tokens + usage.completion_tokens;
    assert_eq!(usage.completion_tokens, COMPLETION_TOKENS);
    assert!(real > 20, "llm-sim used {real} tokens");
    assert_moved_by("short", admitted, corrected, real as i64 - 20);

    // Estimated long (as max_tokens-based estimates are): the debt shrinks,
    // and the bucket's next message waits for the real usage only.
    let (admitted, corrected, usage) = parts.run("long", 10_000).await;
    let real = usage.prompt_tokens + usage.completion_tokens;
    assert_moved_by("long", admitted, corrected, real as i64 - 10_000);
    let next = parts
        .consumer
        .pacer
        .check(&BucketId::new("long", MODEL), 1, None)
        .await
        .unwrap();
    let PaceDecision::Wait { wait, .. } = next else {
        panic!("the next message ran at once: the real usage's debt was forgotten");
    };
    let real_ms = real as f64 * MS_PER_TOKEN;
    assert!(
        wait.as_secs_f64() * 1000.0 <= real_ms + MS_PER_TOKEN + 1.0,
        "the next message waits {wait:?}, the real usage is {real_ms} ms of debt (the estimate was 500 s)"
    );

    // The tenants' usage, as the model reported it, in the consumer's metrics.
    let metric = |tenant: &str, kind: &str| {
        parts.consumer.counter(&format!(
            "sluice_consumer_tenant_tokens_total{{tenant=\"{tenant}\",model=\"{MODEL}\",kind=\"{kind}\"}}"
        ))
    };
    assert_eq!(metric("long", "prompt"), usage.prompt_tokens as f64);
    assert_eq!(metric("long", "completion"), COMPLETION_TOKENS as f64);
    assert_eq!(metric("long", "cached"), 0.0);
    assert_eq!(metric("short", "completion"), COMPLETION_TOKENS as f64);

    // A stream that breaks midway carries no usage: the estimate stays, and
    // nothing is counted as the tenant's usage.
    let (admitted, settled) = parts.settle("broken", BROKEN_MODEL, 20, "no_usage").await;
    assert_eq!(settled, Some(admitted), "a broken stream moved the debt");
    assert!(!parts
        .consumer
        .metrics
        .encode()
        .contains("tenant=\"broken\""));

    // A complete answer without usage: counted with the model's tokenizer
    // (the prompt as the filter counts it, the streamed text), not left at
    // the estimate.
    let (admitted, corrected) = parts
        .settle("silent", NO_USAGE_MODEL, 20, "corrected")
        .await;
    let counter = BpeEncoders::new();
    let counter = counter.counter("o200k_base").unwrap();
    let item = work_item("silent", NO_USAGE_MODEL, "x", 20);
    let body = serde_json::to_vec(&item.body).unwrap();
    let prompt = openai::parse(Endpoint::ChatCompletions, &body)
        .unwrap()
        .prompt_tokens(counter, sluice_openai::DEFAULT_IMAGE_TOKENS);
    let completion = counter.count(&completion_text(COMPLETION_TOKENS)) as u64;
    assert_moved_by(
        "silent",
        admitted,
        corrected.expect("the corrected debt outlives the call"),
        (prompt + completion) as i64 - 20,
    );
    let metric = |kind: &str| {
        parts.consumer.counter(&format!(
            "sluice_consumer_tenant_tokens_total{{tenant=\"silent\",model=\"{NO_USAGE_MODEL}\",kind=\"{kind}\"}}"
        ))
    };
    assert_eq!(metric("prompt"), prompt as f64);
    assert_eq!(metric("completion"), completion as f64);
}
