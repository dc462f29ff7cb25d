//! The pacing script against a real redis-server, on a simulated clock.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use sluice_consumer::keys::{BucketId, Dimension};
use sluice_consumer::{Limit, RateSetting, Scope};
use sluice_consumer::{Metrics, PaceDecision, Pacer, PacingConfig, Rates};
use sluice_testkit::RedisServer;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

const T0: u64 = 1_700_000_000_000;

fn pacer(redis: &RedisServer, config: PacingConfig) -> Pacer {
    metered_pacer(redis, config).0
}

/// A pacer and the metrics it records into.
fn metered_pacer(redis: &RedisServer, config: PacingConfig) -> (Pacer, Arc<Metrics>) {
    let metrics = Arc::new(Metrics::default());
    let pacer = Pacer::new(common::conn(redis), config, Some(metrics.clone())).unwrap();
    (pacer, metrics)
}

fn rps(r: f64) -> PacingConfig {
    PacingConfig {
        default_rates: Rates {
            requests_per_second: Some(r),
            tokens_per_second: None,
        },
        ..PacingConfig::default()
    }
}

/// The `acme` × `gpt` bucket, as an override's scope.
const ACME_GPT: Scope = Scope::Bucket {
    tenant: "acme",
    model: "gpt",
};
/// The whole `gpt` column, as an override's scope.
const GPT_COLUMN: Scope = Scope::Column { model: "gpt" };

/// Sets the requests-per-second override of `scope` (`None`: unlimited).
async fn set_requests_rate(pacer: &Pacer, scope: Scope<'_>, rate: Option<f64>) {
    pacer
        .set_rate(scope, Dimension::Requests, rate)
        .await
        .unwrap();
}

/// Checks every `step_ms` over `[from, to)`; returns the admit times.
async fn run(
    pacer: &Pacer,
    bucket: &BucketId,
    tokens: u64,
    from: u64,
    to: u64,
    step_ms: u64,
) -> Vec<u64> {
    let mut admitted = Vec::new();
    let mut now = from;
    while now < to {
        if decide(pacer, bucket, tokens, now).await == PaceDecision::Admit {
            admitted.push(now);
        }
        now += step_ms;
    }
    admitted
}

/// Checks that `got` is `expected`, give or take one.
#[track_caller]
fn assert_about(got: f64, expected: f64, what: std::fmt::Arguments) {
    assert!(
        (got - expected).abs() <= 1.0,
        "{what}: {got}, expected {expected} ± 1"
    );
}

/// Checks that `admits` (from [`run`]) holds `expected` admissions, give or
/// take one.
#[track_caller]
fn assert_admits_about(admits: &[u64], expected: i64) {
    assert_about(admits.len() as f64, expected as f64, format_args!("admits"));
}

/// The pacer's decision for a message of `tokens` in `bucket` at `now`.
async fn decide(pacer: &Pacer, bucket: &BucketId, tokens: u64, now: u64) -> PaceDecision {
    pacer.check(bucket, tokens, Some(now)).await.unwrap()
}

/// A refusal: the next slot comes in `ms`, held back by `limited_by`.
fn wait_of(ms: u64, limited_by: Limit) -> PaceDecision {
    PaceDecision::Wait {
        wait: Duration::from_millis(ms),
        limited_by,
    }
}

fn per_second(admits: &[u64], from: u64, seconds: u64) -> Vec<usize> {
    (0..seconds)
        .map(|s| {
            let start = from + s * 1000;
            admits
                .iter()
                .filter(|&&t| t >= start && t < start + 1000)
                .count()
        })
        .collect()
}

#[tokio::test]
async fn r_per_second_admits_r_per_second() {
    let redis = RedisServer::start().unwrap();
    for (rate, bucket) in [(5.0, "five"), (3.0, "three"), (0.5, "half")] {
        let pacer = pacer(&redis, rps(rate));
        let bucket = BucketId::new(bucket, "m");
        let admits = run(&pacer, &bucket, 0, T0, T0 + 10_000, 7).await;
        let total = admits.len() as f64;
        assert_about(total, rate * 10.0, format_args!("rate {rate}: in 10 s"));
        if rate >= 1.0 {
            for count in per_second(&admits, T0, 10) {
                assert_about(
                    count as f64,
                    rate,
                    format_args!("rate {rate}: in one second"),
                );
            }
        }
    }
}

#[tokio::test]
async fn wait_is_the_time_to_the_next_slot() {
    let redis = RedisServer::start().unwrap();
    let (pacer, metrics) = metered_pacer(&redis, rps(5.0));
    let bucket = BucketId::new("acme", "m");
    let other = BucketId::new("other", "m");
    for (bucket, at, expected) in [
        (&bucket, T0, PaceDecision::Admit),
        (&bucket, T0 + 1, wait_of(199, Limit::Requests)),
        // A refused check takes nothing: the slot is still at T0 + 200.
        (&bucket, T0 + 150, wait_of(50, Limit::Requests)),
        (&bucket, T0 + 200, PaceDecision::Admit),
        // Another bucket is independent.
        (&other, T0 + 200, PaceDecision::Admit),
    ] {
        let decision = decide(&pacer, bucket, 0, at).await;
        assert_eq!(decision, expected, "{bucket:?} at T0 + {}", at - T0);
    }

    // Redis's own clock when no time is passed.
    let live = BucketId::new("live", "m");
    assert_eq!(
        pacer.check(&live, 0, None).await.unwrap(),
        PaceDecision::Admit
    );
    match pacer.check(&live, 0, None).await.unwrap() {
        PaceDecision::Wait { wait, .. } => {
            assert!(wait > Duration::from_millis(100) && wait <= Duration::from_millis(200))
        }
        other => panic!("{other:?}"),
    }
    let metrics = metrics.encode();
    assert!(
        metrics.contains("bucket=\"acme/m\",result=\"suspended\",limited_by=\"requests\"} 2"),
        "{metrics}"
    );
}

#[tokio::test]
async fn runtime_rate_change_and_model_factor_take_effect_on_the_next_check() {
    let redis = RedisServer::start().unwrap();
    let (pacer, metrics) = metered_pacer(&redis, rps(1.0));
    let bucket = BucketId::new("acme", "gpt");
    assert_eq!(decide(&pacer, &bucket, 0, T0).await, PaceDecision::Admit);
    assert!(matches!(
        decide(&pacer, &bucket, 0, T0 + 10).await,
        PaceDecision::Wait { wait, .. } if wait == Duration::from_millis(990)
    ));

    // Raise this bucket to 100/s: the next check already uses it (the
    // outstanding 0.99 request drains in 9.9 ms).
    set_requests_rate(&pacer, ACME_GPT, Some(100.0)).await;
    assert!(matches!(
        decide(&pacer, &bucket, 0, T0 + 10).await,
        PaceDecision::Wait { wait, .. } if wait == Duration::from_millis(10)
    ));
    assert_admits_about(&run(&pacer, &bucket, 0, T0 + 20, T0 + 2020, 1).await, 200);

    // Halve the whole model column.
    pacer.set_model_factor("gpt", 0.5).await.unwrap();
    assert_admits_about(&run(&pacer, &bucket, 0, T0 + 3000, T0 + 5000, 1).await, 100);
    // ... including a tenant without overrides (1/s × 0.5).
    let other = BucketId::new("beta", "gpt");
    assert_admits_about(&run(&pacer, &other, 0, T0, T0 + 10_000, 10).await, 5);
    // ... and not another model.
    let elsewhere = BucketId::new("acme", "other-model");
    assert_admits_about(&run(&pacer, &elsewhere, 0, T0, T0 + 10_000, 10).await, 10);

    // Factor 0 pauses the column.
    pacer.set_model_factor("gpt", 0.0).await.unwrap();
    assert_eq!(
        decide(&pacer, &bucket, 0, T0 + 20_000).await,
        wait_of(1000, Limit::Paused)
    );
    // Clearing the factor and the override: back to the configured 1/s.
    pacer.clear_model_factor("gpt").await.unwrap();
    pacer
        .clear_rate(ACME_GPT, Dimension::Requests)
        .await
        .unwrap();
    assert_admits_about(
        &run(&pacer, &bucket, 0, T0 + 30_000, T0 + 40_000, 10).await,
        10,
    );

    // A column override applies to every tenant of the model.
    set_requests_rate(&pacer, GPT_COLUMN, Some(4.0)).await;
    assert_admits_about(
        &run(&pacer, &other, 0, T0 + 50_000, T0 + 60_000, 10).await,
        40,
    );

    // Unlimited bucket override.
    let vip_scope = Scope::Bucket {
        tenant: "vip",
        model: "gpt",
    };
    set_requests_rate(&pacer, vip_scope, None).await;
    let vip = BucketId::new("vip", "gpt");
    let admits = run(&pacer, &vip, 0, T0, T0 + 100, 1).await;
    assert_eq!(admits.len(), 100);

    // What the admin endpoint shows.
    let overrides = pacer.column_overrides("gpt").await.unwrap();
    assert_eq!(overrides.factor, None);
    assert_eq!(
        overrides.column.requests_per_second,
        Some(RateSetting::PerSecond(4.0))
    );
    assert_eq!(
        overrides.buckets["vip"].requests_per_second,
        Some(RateSetting::Unlimited)
    );
    let effective = pacer.effective_rates("beta", "gpt").await.unwrap();
    assert_eq!(effective.requests_per_second, Some(4.0));
    assert_eq!(
        pacer
            .effective_rates("vip", "gpt")
            .await
            .unwrap()
            .requests_per_second,
        None
    );
    assert_eq!(
        pacer.models_with_overrides().await.unwrap(),
        vec!["gpt".to_string()]
    );
    assert!(pacer.set_model_factor("gpt", -1.0).await.is_err());
    assert!(pacer
        .set_rate(GPT_COLUMN, Dimension::Tokens, Some(f64::NAN))
        .await
        .is_err());

    let text = metrics.encode();
    assert!(text.contains("limited_by=\"paused\"} 1"), "{text}");
    assert!(text.contains("sluice_consumer_pacing_wait_seconds_count{model=\"gpt\"}"));
}

#[tokio::test]
async fn tokens_dimension_limits_big_messages() {
    let redis = RedisServer::start().unwrap();
    let pacer = pacer(
        &redis,
        PacingConfig {
            default_rates: Rates {
                requests_per_second: Some(1.0),
                tokens_per_second: Some(1000.0),
            },
            ..PacingConfig::default()
        },
    );
    let bucket = BucketId::new("acme", "m");
    let mut conn = common::conn(&redis);
    // A 5000-token message runs on an empty bucket (never starved) ...
    assert_eq!(decide(&pacer, &bucket, 5000, T0).await, PaceDecision::Admit);
    // ... and holds the token bucket for 5 s: a small message one second
    // later fits the request dimension but not the token one.
    assert_eq!(
        decide(&pacer, &bucket, 10, T0 + 1000).await,
        wait_of(4000, Limit::Tokens)
    );
    // All or nothing: the refused check did not take the request slot.
    let requests_tat: String = redis::cmd("GET")
        .arg(bucket.pace_key(Dimension::Requests))
        .query_async(&mut conn)
        .await
        .unwrap();
    let tat: f64 = requests_tat.split(' ').next().unwrap().parse().unwrap();
    assert_eq!(tat, (T0 + 1000) as f64);
    assert_eq!(
        decide(&pacer, &bucket, 10, T0 + 5000).await,
        PaceDecision::Admit
    );

    // Over a minute, big messages are admitted at tokens/s, not requests/s.
    let big = BucketId::new("big", "m");
    assert_admits_about(&run(&pacer, &big, 4000, T0, T0 + 60_000, 10).await, 15);
    // Small ones at requests/s.
    let small = BucketId::new("small", "m");
    assert_admits_about(&run(&pacer, &small, 100, T0, T0 + 60_000, 10).await, 60);

    // Per-model configured rates.
    let pacer = Pacer::new(
        common::conn(&redis),
        PacingConfig {
            model_rates: HashMap::from([(
                "fast".to_string(),
                Rates {
                    requests_per_second: Some(10.0),
                    tokens_per_second: None,
                },
            )]),
            ..rps(1.0)
        },
        None,
    )
    .unwrap();
    let fast = BucketId::new("acme", "fast");
    assert_admits_about(
        &run(&pacer, &fast, 1_000_000, T0, T0 + 10_000, 10).await,
        100,
    );
}

#[tokio::test]
async fn admit_takes_the_cap_then_the_pace() {
    use sluice_consumer::{gate, InFlightConfig, InFlightLimits, StartGate};
    let redis = RedisServer::start().unwrap();
    let pacer = pacer(&redis, rps(1.0));
    let limits = InFlightLimits::new(
        InFlightConfig {
            default_max_in_flight: Some(1),
            ..InFlightConfig::default()
        },
        None,
    );
    let item = common::item("admit-1");
    let floor = Duration::from_millis(30);
    let StartGate::Run(permit) = gate(&limits, &pacer, &item, floor).await.unwrap() else {
        panic!("first message not admitted");
    };
    // The cap is full: held back without touching the pace.
    assert!(matches!(
        gate(&limits, &pacer, &item, floor).await.unwrap(),
        StartGate::Busy(d) if d == Duration::from_millis(100)
    ));
    drop(permit);
    // Now the pace (1/s, Redis clock) says wait most of a second.
    match gate(&limits, &pacer, &item, floor).await.unwrap() {
        StartGate::Suspend(d) => {
            assert!(d > Duration::from_millis(500) && d <= Duration::from_secs(1))
        }
        other => panic!("{other:?}"),
    }
    // ... and the refused message did not keep the model's slot.
    assert_eq!(limits.available("sim-model"), Some(1));
}
