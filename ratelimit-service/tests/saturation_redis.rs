//! Saturation-aware admission on a real Redis: the decision path reads the
//! router's in-memory snapshot and sends Redis nothing (counted with
//! `INFO commandstats` around a batch of decisions); the background read
//! is one pipelined `HMGET` per tracked model; a state the controller
//! writes is picked up by the next read, and by the background task; with
//! Redis gone, the last state counts until it is older than the max age.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests fail loudly

mod common;

use sluice_contract::saturation::{Route, Saturation};
use sluice_proto::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
use sluice_ratelimit::config::LimitsConfig;
use sluice_ratelimit::limiter::{Charge, Limiter};
use sluice_ratelimit::metrics::SaturationMetrics;
use sluice_ratelimit::saturation::{RedisSaturation, RoutingOptions, SaturationRouter};
use sluice_redis::{RedisClient, RedisConn};
use sluice_testkit::rls::{descriptor, request, sluice_field, with_hits};
use sluice_testkit::RedisServer;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Every tenant × model has a token limit that defers when over.
const LIMITS: &str = r#"
domain: llm
descriptors:
  - key: tenant
    descriptors:
      - key: model
        rate_limit: { unit: minute, requests_per_unit: 1000000, name: tpm,
                      sluice: { over_limit: defer, priority: normal } }
"#;

fn connection(server: &RedisServer) -> RedisConn {
    RedisClient::open(&server.url()).unwrap().connect().unwrap()
}

/// Every command Redis has run, by name (`INFO commandstats`), less the
/// `INFO` calls themselves.
async fn commands(conn: &mut RedisConn) -> std::collections::BTreeMap<String, u64> {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(conn)
        .await
        .unwrap();
    info.lines()
        .filter_map(|line| line.strip_prefix("cmdstat_"))
        .filter_map(|line| {
            let (name, stats) = line.split_once(':')?;
            let calls = stats.strip_prefix("calls=")?.split(',').next()?;
            Some((name.to_string(), calls.parse().ok()?))
        })
        .filter(|(name, _)| name != "info")
        .collect()
}

/// Commands run since `before`, by name.
fn since(
    before: &std::collections::BTreeMap<String, u64>,
    after: &std::collections::BTreeMap<String, u64>,
) -> std::collections::BTreeMap<String, u64> {
    after
        .iter()
        .map(|(name, calls)| (name.clone(), calls - before.get(name).copied().unwrap_or(0)))
        .filter(|(_, calls)| *calls > 0)
        .collect()
}

/// Writes `model`'s saturation as the controller's stepper does.
async fn controller_says(conn: &mut RedisConn, model: &str, state: Saturation) {
    let mut write = redis::pipe();
    for (field, value) in state.fields() {
        write.hset(sluice_contract::keys::controller(model), field, value);
    }
    write.query_async::<()>(conn).await.unwrap();
}

fn saturated_now() -> Saturation {
    Saturation {
        saturated: true,
        at_ms: sluice_contract::now_ms(),
    }
}

/// An in-quota admission of `model`; whether it was routed into the queue.
async fn queued(limiter: &Limiter, model: &str) -> bool {
    let descriptor = with_hits(descriptor(&[("tenant", "acme"), ("model", model)]), 1);
    let response = limiter
        .charge(&request("llm", vec![descriptor]), Charge::Decide, None)
        .await
        .unwrap();
    assert_eq!(response.overall_code(), Code::Ok);
    sluice_field(&response, "route").as_deref() == Some("queue")
}

#[tokio::test]
async fn decisions_send_redis_nothing_and_one_pipeline_reads_every_model() {
    let server = RedisServer::start().unwrap();
    let mut conn = connection(&server);
    let models: Vec<String> = (0..50).map(|i| format!("model-{i}")).collect();
    for model in &models {
        controller_says(&mut conn, model, saturated_now()).await;
    }
    let source = RedisSaturation::new(connection(&server), Duration::from_secs(5));
    let options = RoutingOptions::with_max_age(60_000);
    let router = SaturationRouter::new(Arc::new(source), options, SaturationMetrics::default());
    let router = Arc::new(router.unwrap());
    let limits =
        LimitsConfig::from_sources(&[(PathBuf::from("limits.yaml"), LIMITS.into())]).unwrap();
    // Counters in memory: Redis here holds only the controller's state.
    let Ok(limiter) = Arc::try_unwrap(common::memory_limiter(limits)) else {
        unreachable!("not shared yet")
    };
    let limiter = limiter.with_saturation_routing(router.clone());

    // First seen: routed straight to the server, tracked, not read.
    let before = commands(&mut conn).await;
    for model in &models {
        assert!(!queued(&limiter, model).await, "{model} is not read yet");
    }
    assert_eq!(
        since(&before, &commands(&mut conn).await),
        Default::default()
    );
    assert_eq!(router.models(), 50);

    // One background read: an HMGET per model, pipelined.
    let before = commands(&mut conn).await;
    assert_eq!(router.refresh(sluice_contract::now_ms()).await, Ok(50));
    let read = since(&before, &commands(&mut conn).await);
    assert_eq!(read.get("hmget"), Some(&50), "{read:?}");

    // A thousand decisions over known and new models: no command at all.
    let before = commands(&mut conn).await;
    let mut routed = 0;
    for i in 0..1_000 {
        let model = match i % 2 {
            0 => models[i % 50].clone(),
            _ => format!("new-{i}"),
        };
        routed += usize::from(queued(&limiter, &model).await);
    }
    assert_eq!(
        since(&before, &commands(&mut conn).await),
        Default::default()
    );
    assert_eq!(routed, 500, "every known saturated model, no new one");
    assert_eq!(limiter.metrics().in_quota_queued.get(), 500);

    // The controller says model-0's server has room: the next read sees it.
    let room = Saturation {
        saturated: false,
        at_ms: sluice_contract::now_ms(),
    };
    controller_says(&mut conn, &models[0], room).await;
    assert!(queued(&limiter, &models[0]).await, "not read yet");
    router.refresh(sluice_contract::now_ms()).await.unwrap();
    assert!(!queued(&limiter, &models[0]).await);
    assert!(queued(&limiter, &models[1]).await);
}

/// `probe`'s first `Some` (a guard of a minute against a hang: the
/// assertions are on what was read, not on time).
async fn eventually<T>(what: &str, mut probe: impl FnMut() -> Option<T>) -> T {
    let asked = Instant::now();
    loop {
        if let Some(found) = probe() {
            return found;
        }
        assert!(asked.elapsed() < Duration::from_secs(60), "never {what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// The `result` reads of `metrics` once they are at least `at_least`.
async fn reads_reach(metrics: &SaturationMetrics, result: &'static str, at_least: u64) -> u64 {
    let reads = || Some(metrics.read(result).get()).filter(|reads| *reads >= at_least);
    eventually(&format!("{at_least} {result} reads"), reads).await
}

#[tokio::test]
async fn the_background_refresh_picks_up_a_change_and_outlives_redis_until_the_max_age() {
    let mut server = RedisServer::start().unwrap();
    let mut conn = connection(&server);
    let metrics = SaturationMetrics::default();
    let options = RoutingOptions::with_max_age(1_000);
    let source = RedisSaturation::new(connection(&server), Duration::from_millis(250));
    let router = SaturationRouter::start(Arc::new(source), options, metrics.clone()).unwrap();
    let hot = "hot-model";
    assert_eq!(router.route(hot, sluice_contract::now_ms()), Route::Direct);
    reads_reach(&metrics, "ok", 1).await;
    assert_eq!(
        router.route(hot, sluice_contract::now_ms()),
        Route::Direct,
        "no state"
    );

    // The controller says "saturated": the background task picks it up
    // with no decision asking Redis (the next read that starts after the
    // write sees it; how many reads the test's polling saw go by depends
    // on the machine's load, so it is printed, not asserted).
    let state = saturated_now();
    let reads_at_write = metrics.read("ok").get();
    let written = Instant::now();
    controller_says(&mut conn, hot, state).await;
    let picked_up = || {
        let reads = metrics.read("ok").get();
        (router.route(hot, sluice_contract::now_ms()) == Route::Queue).then_some(reads)
    };
    let reads = eventually("picked up", picked_up).await;
    println!(
        "picked up {:?} and {} reads after the write (refresh every {} ms)",
        written.elapsed(),
        reads - reads_at_write,
        options.refresh_ms
    );

    // Redis gone: reads fail, the last state counts until it is older
    // than the max age (judged from the controller's write time).
    server.stop();
    let failed = reads_reach(&metrics, "failed", 1).await;
    reads_reach(&metrics, "failed", failed + 1).await;
    let max_age = options.max_age_ms;
    assert_eq!(router.route(hot, state.at_ms + max_age), Route::Queue);
    assert_eq!(router.route(hot, state.at_ms + max_age + 1), Route::Direct);
}
