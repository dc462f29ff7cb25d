//! `idempotency.claim_replicas`: a claim waits (`WAIT`) until replicas hold
//! it before the model is called, and is given back when they do not in
//! time (fail closed). Real redis-server and Sentinel set, real llm-sim.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::*;
use sluice_consumer::{keys, FailureKind, IdempotencyConfig, Outcome};
use sluice_llm_sim::SimConfig;
use sluice_testkit::redis_topologies::RedisSentinelSet;
use std::time::Duration;

fn one_replica() -> IdempotencyConfig {
    IdempotencyConfig {
        claim_replicas: 1,
        ..IdempotencyConfig::default()
    }
}

/// A master with no replica never acknowledges: the claim is given back,
/// the model is not called, and the request is tried later.
#[tokio::test]
async fn a_claim_no_replica_holds_is_given_back_and_the_model_not_called() {
    let (redis, sim) = redis_and_sim().await;
    let consumer = consumer_at(&redis.url(), &sim.url(), one_replica());
    let outcome = consumer.process(&item("unreplicated-1")).await;
    assert!(
        matches!(&outcome, Outcome::RetryLater { kind: FailureKind::Redis, detail, .. }
            if detail.contains("0 of 1 replicas")),
        "{outcome:?}"
    );
    assert_eq!(sim_calls(&sim.url(), "unreplicated-1").await, 0);
    let mut conn = conn(&redis);
    let claim = keys::processing("unreplicated-1");
    assert!(
        !exists(&mut conn, &claim).await,
        "the claim was not given back"
    );
    assert_metric(&consumer, "sluice_consumer_claims_unreplicated_total 1");
    sim.shutdown().await.unwrap();
}

/// With the replica of a Sentinel set in sync, the claim is acknowledged
/// and the call runs once.
#[tokio::test]
async fn a_claim_the_replica_holds_calls_the_model_once() {
    let set = RedisSentinelSet::start().unwrap();
    set.wait_ready(Duration::from_secs(60)).unwrap();
    let sim = sluice_llm_sim::spawn(SimConfig::fast()).await.unwrap();
    let consumer = consumer_at(&set.url(), &sim.url(), one_replica());
    let outcome = consumer.process(&item("replicated-1")).await;
    assert!(matches!(outcome, Outcome::Completed { .. }), "{outcome:?}");
    assert_eq!(sim_calls(&sim.url(), "replicated-1").await, 1);
    assert_metric(&consumer, "sluice_consumer_claims_unreplicated_total 0");
    sim.shutdown().await.unwrap();
}

#[test]
fn a_wait_without_a_timeout_or_past_the_heartbeat_is_refused() {
    for timeout in [0, IdempotencyConfig::default().heartbeat_interval_ms] {
        let config = IdempotencyConfig {
            claim_replicas_timeout_ms: timeout,
            ..one_replica()
        };
        let error = config.validate().unwrap_err();
        assert!(error.contains("claim_replicas_timeout_ms"), "{error}");
    }
    assert_eq!(one_replica().validate(), Ok(()));
}
