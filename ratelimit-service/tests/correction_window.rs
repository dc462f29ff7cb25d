//! The window rule for corrections, in both stores: a correction (the
//! filter's reconciliation) goes to the window its request was admitted in,
//! while that window takes corrections (its end plus a grace); later, it
//! moves nothing.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests fail loudly

use sluice_proto::pb::envoy::extensions::common::ratelimit::v3::{
    rate_limit_descriptor::Entry, RateLimitDescriptor,
};
use sluice_proto::pb::envoy::service::ratelimit::v3::RateLimitRequest;
use sluice_proto::pb::google::protobuf::UInt64Value;
use sluice_ratelimit::config::LimitsConfig;
use sluice_ratelimit::limiter::{Limiter, ManualClock};
use sluice_ratelimit::metrics::Metrics;
use sluice_ratelimit::store::CountingMode;
use sluice_testkit::RedisServer;
use std::path::PathBuf;
use std::sync::Arc;

mod common;
use common::T0;
const MINUTE: u64 = 60_000;

const LIMITS: &str = r#"
domain: sluice
descriptors:
  - key: tenant
    value: acme
    descriptors:
      - key: tokens
        rate_limit: { unit: minute, requests_per_unit: 1000, name: acme-tpm }
"#;

fn tokens(hits: u64, refund: bool) -> RateLimitRequest {
    RateLimitRequest {
        domain: "sluice".into(),
        descriptors: vec![RateLimitDescriptor {
            entries: vec![
                Entry {
                    key: "tenant".into(),
                    value: "acme".into(),
                },
                Entry {
                    key: "tokens".into(),
                    value: "total".into(),
                },
            ],
            hits_addend: Some(UInt64Value { value: hits }),
            is_negative_hits: refund,
            ..Default::default()
        }],
        hits_addend: 0,
    }
}

struct Harness {
    limiter: Limiter,
    clock: Arc<ManualClock>,
    _redis: Option<RedisServer>,
}

fn harness(redis: bool) -> Harness {
    let (store, server) = common::store(redis);
    let config =
        LimitsConfig::from_sources(&[(PathBuf::from("limits.yaml"), LIMITS.into())]).unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    Harness {
        limiter: Limiter::new(
            config,
            store,
            CountingMode::AllOrNothing,
            clock.clone(),
            Arc::new(Metrics::new()),
        ),
        clock,
        _redis: server,
    }
}

impl Harness {
    /// Tokens used in the window that contains `at` (nothing charged).
    async fn used_in_window_of(&self, at: u64) -> u64 {
        let response = self
            .limiter
            .correct(&tokens(0, false), Some(at))
            .await
            .unwrap();
        1000 - u64::from(response.statuses[0].limit_remaining)
    }

    async fn admit(&self, hits: u64) {
        let response = self
            .limiter
            .should_rate_limit(&tokens(hits, false))
            .await
            .unwrap();
        assert_eq!(response.overall_code, 1, "admitted");
    }

    async fn correct(&self, delta: i64, admitted_at: u64) {
        self.limiter
            .correct(&tokens(delta.unsigned_abs(), delta < 0), Some(admitted_at))
            .await
            .unwrap();
    }
}

async fn corrections_go_to_the_admission_window(h: Harness) {
    // Admitted in window 1 with an estimate of 500.
    h.admit(500).await;
    // Window 2: another request, 100.
    h.clock.set(T0 + MINUTE);
    h.admit(100).await;

    // The first request ends now, in window 2, having used 200: its refund
    // of 300 goes back to window 1, where the estimate was charged.
    h.correct(-300, T0).await;
    assert_eq!(h.used_in_window_of(T0).await, 200);
    assert_eq!(
        h.used_in_window_of(T0 + MINUTE).await,
        100,
        "window 2 untouched"
    );
    // A charge (it used more than estimated) goes there too.
    h.correct(50, T0).await;
    assert_eq!(h.used_in_window_of(T0).await, 250);
    assert_eq!(h.used_in_window_of(T0 + MINUTE).await, 100);
    // A correction of a request admitted in window 2 lands in window 2.
    h.correct(-40, T0 + MINUTE).await;
    assert_eq!(h.used_in_window_of(T0 + MINUTE).await, 60);
    // An admission time in the future is taken as now.
    h.correct(7, T0 + 10 * MINUTE).await;
    assert_eq!(h.used_in_window_of(T0 + MINUTE).await, 67);

    // Window 1 ended 54.5 s + 60 s ago: past its grace, a late correction
    // moves nothing (and certainly not the current window).
    h.clock.set(T0 + 2 * MINUTE);
    h.admit(10).await;
    h.correct(-250, T0).await;
    h.correct(900, T0).await;
    assert_eq!(h.used_in_window_of(T0 + 2 * MINUTE).await, 10);
    assert_eq!(h.used_in_window_of(T0 + MINUTE).await, 67);
}

#[tokio::test]
async fn corrections_go_to_the_admission_window_memory() {
    corrections_go_to_the_admission_window(harness(false)).await;
}

#[tokio::test]
async fn corrections_go_to_the_admission_window_redis() {
    corrections_go_to_the_admission_window(harness(true)).await;
}
