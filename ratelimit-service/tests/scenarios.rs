//! One scenario suite, run against every counter store.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests fail loudly

use common::xds_server::ManagementServer;
use sluice_proto::pb::envoy::extensions::common::ratelimit::v3::{
    rate_limit_descriptor::RateLimitOverride, RateLimitDescriptor,
};
use sluice_proto::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
use sluice_proto::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use sluice_ratelimit::config::parse_file;
use sluice_ratelimit::config::LimitsConfig;
use sluice_ratelimit::limiter::{DecisionError, Limiter, ManualClock};
use sluice_ratelimit::metrics::Metrics;
use sluice_ratelimit::store::{
    Batch, CounterOp, CounterStore, CountingMode, MemoryStore, RedisStore, RedisStoreOptions,
};
use sluice_ratelimit::xds::{to_resource, XdsClient, XdsOptions};
use sluice_testkit::redis_topologies::{self, RedisCluster};
use sluice_testkit::rls::{self, descriptor, header, sluice_field, with_hits};
use sluice_testkit::RedisServer;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tokio::sync::watch;

mod common;
use common::T0;

/// Shared with the limiter's unit tests.
const LIMITS: &str = include_str!("fixtures/llm-limits.yaml");

struct Harness {
    limiter: Arc<Limiter>,
    clock: Arc<ManualClock>,
    /// Keeps the Redis server (if any) alive for the test.
    _redis: Option<RedisServer>,
    /// The management server and the client's stop switch, for `xds` runs.
    _xds: Option<(ManagementServer, watch::Sender<bool>)>,
}

fn config() -> LimitsConfig {
    LimitsConfig::from_sources(&[(PathBuf::from("limits.yaml"), LIMITS.to_string())]).unwrap()
}

fn harness(redis: bool, mode: CountingMode) -> Harness {
    let clock = Arc::new(ManualClock::new(T0));
    let (store, redis_server) = common::store(redis);
    let limiter = Limiter::new(
        config(),
        store,
        mode,
        clock.clone(),
        Arc::new(Metrics::new()),
    );
    Harness {
        limiter: Arc::new(limiter),
        clock,
        _redis: redis_server,
        _xds: None,
    }
}

/// The same limits, but served by an xDS management server: the instance
/// starts with no limits at all and gets them as a RateLimitConfig resource.
async fn xds_harness() -> Harness {
    let clock = Arc::new(ManualClock::new(T0));
    let empty = LimitsConfig::from_sources(&[]).unwrap();
    let limiter = Arc::new(Limiter::new(
        empty,
        Arc::new(MemoryStore::new()),
        CountingMode::AllOrNothing,
        clock.clone(),
        Arc::new(Metrics::new()),
    ));
    let server = ManagementServer::start(None).await;
    let file = parse_file(Path::new("limits.yaml"), LIMITS).unwrap();
    server.set("1", &[to_resource("llm-limits", &file)]);
    let (client, mut versions) = XdsClient::new(
        XdsOptions {
            server: server.url(),
            ..Default::default()
        },
        limiter.clone(),
    );
    let (stop, mut stopped) = watch::channel(false);
    tokio::spawn(client.run(async move {
        let _ = stopped.wait_for(|s| *s).await;
    }));
    tokio::time::timeout(
        std::time::Duration::from_secs(10),
        versions.wait_for(Option::is_some),
    )
    .await
    .expect("limits from xDS within 10 s")
    .unwrap();
    Harness {
        limiter,
        clock,
        _redis: None,
        _xds: Some((server, stop)),
    }
}

fn request(descriptors: Vec<RateLimitDescriptor>) -> RateLimitRequest {
    rls::request("llm", descriptors)
}

impl Harness {
    async fn ask(&self, descriptors: Vec<RateLimitDescriptor>) -> RateLimitResponse {
        self.limiter
            .should_rate_limit(&request(descriptors))
            .await
            .unwrap()
    }

    async fn codes(&self, descriptors: Vec<RateLimitDescriptor>) -> Vec<Code> {
        let response = self.ask(descriptors).await;
        response.statuses.iter().map(|s| s.code()).collect()
    }
}

/// Defines each scenario three times: `<name>::memory`, `<name>::redis`, and
/// `<name>::xds` (memory store, limits from an xDS management server), and
/// runs them all, one after another, in `all_scenarios_on_a_redis_cluster`.
macro_rules! scenarios {
    ($($name:ident($h:ident) $body:block)*) => {
        $(
            mod $name {
                use super::*;
                pub(super) async fn scenario($h: Harness) $body
                #[tokio::test]
                async fn memory() { scenario(harness(false, CountingMode::AllOrNothing)).await }
                #[tokio::test]
                async fn redis() { scenario(harness(true, CountingMode::AllOrNothing)).await }
                #[tokio::test]
                async fn xds() { scenario(xds_harness().await).await }
            }
        )*

        /// The same scenarios on a Redis Cluster (3 masters, 3 replicas):
        /// one cluster for all of them, emptied between scenarios.
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn all_scenarios_on_a_redis_cluster() {
            let cluster = RedisCluster::start(3, 1).unwrap();
            $(
                for port in cluster.ports() {
                    // Replicas refuse FLUSHALL; their masters' flush reaches them.
                    let _ = redis_topologies::cli(port, &["flushall"]);
                }
                println!("cluster scenario {}", stringify!($name));
                $name::scenario(cluster_harness(&cluster)).await;
            )*
            assert_eq!(sluice_redis::cross_slot_errors(), 0, "a command crossed slots");
        }
    };
}

fn cluster_harness(cluster: &RedisCluster) -> Harness {
    let store = default_redis_store(cluster.url());
    let clock = Arc::new(ManualClock::new(T0));
    let limiter = Limiter::new(
        config(),
        Arc::new(store),
        CountingMode::AllOrNothing,
        clock.clone(),
        Arc::new(Metrics::new()),
    );
    Harness {
        limiter: Arc::new(limiter),
        clock,
        _redis: None,
        _xds: None,
    }
}

scenarios! {
    fixed_window_counts_up_to_the_limit(h) {
        let acme = || vec![descriptor(&[("tenant", "acme")])];
        for expected_remaining in [2, 1, 0] {
            let response = h.ask(acme()).await;
            assert_eq!(response.overall_code(), Code::Ok);
            let status = &response.statuses[0];
            assert_eq!(status.limit_remaining, expected_remaining);
            let limit = status.current_limit.as_ref().unwrap();
            assert_eq!((limit.name.as_str(), limit.requests_per_unit, limit.unit), ("acme-rpm", 3, 2));
            assert_eq!(header(&response, "RateLimit-Remaining"), Some(expected_remaining.to_string().as_str()));
            assert_eq!(header(&response, "Retry-After"), None);
            // Instructions for the filter come with OVER_LIMIT answers only.
            assert_eq!(sluice_field(&response, "action"), None);
        }
        let response = h.ask(acme()).await;
        assert_eq!(response.overall_code(), Code::OverLimit);
        assert_eq!(response.statuses[0].code(), Code::OverLimit);
        assert_eq!(response.statuses[0].limit_remaining, 0);
        assert_eq!(header(&response, "RateLimit-Limit"), Some("3"));
        assert_eq!(header(&response, "RateLimit-Reset"), Some("55"));
        assert_eq!(header(&response, "RateLimit-Policy"), Some("3;w=60"));
        assert_eq!(header(&response, "Retry-After"), Some("55"));
        // acme-rpm has no Sluice extension: the default is reject.
        assert_eq!(sluice_field(&response, "action").as_deref(), Some("reject"));
        assert_eq!(sluice_field(&response, "over_limits").as_deref(), Some("acme-rpm"));
    }

    duration_until_reset_matches_the_aligned_window(h) {
        let response = h.ask(vec![descriptor(&[("tenant", "acme")])]).await;
        let reset = response.statuses[0].duration_until_reset.unwrap();
        assert_eq!((reset.seconds, reset.nanos), (54, 500_000_000));
        h.clock.advance(54_000);
        let response = h.ask(vec![descriptor(&[("tenant", "acme")])]).await;
        let reset = response.statuses[0].duration_until_reset.unwrap();
        assert_eq!((reset.seconds, reset.nanos), (0, 500_000_000));
        assert_eq!(header(&response, "RateLimit-Reset"), Some("1"));
    }

    window_rollover_starts_fresh(h) {
        for _ in 0..3 {
            h.ask(vec![descriptor(&[("tenant", "acme")])]).await;
        }
        assert_eq!(h.codes(vec![descriptor(&[("tenant", "acme")])]).await, [Code::OverLimit]);
        h.clock.advance(54_499);
        assert_eq!(h.codes(vec![descriptor(&[("tenant", "acme")])]).await, [Code::OverLimit]);
        h.clock.advance(1);
        let response = h.ask(vec![descriptor(&[("tenant", "acme")])]).await;
        assert_eq!(response.overall_code(), Code::Ok);
        assert_eq!(response.statuses[0].limit_remaining, 2);
    }

    wildcard_and_default_values_get_their_own_counters(h) {
        // team-* : 2 per second, counted per actual value.
        for tenant in ["team-a", "team-b"] {
            for _ in 0..2 {
                assert_eq!(h.codes(vec![descriptor(&[("tenant", tenant)])]).await, [Code::Ok]);
            }
            assert_eq!(h.codes(vec![descriptor(&[("tenant", tenant)])]).await, [Code::OverLimit]);
        }
        // Any other tenant: 5 per hour, also per value.
        let response = h.ask(vec![descriptor(&[("tenant", "zeta")])]).await;
        assert_eq!(response.statuses[0].current_limit.as_ref().unwrap().name, "any-tenant-rph");
        assert_eq!(response.statuses[0].limit_remaining, 4);
        let response = h.ask(vec![descriptor(&[("tenant", "omega")])]).await;
        assert_eq!(response.statuses[0].limit_remaining, 4);
    }

    nested_descriptors_use_the_leaf_limit(h) {
        let tokens = |n| with_hits(descriptor(&[("tenant", "acme"), ("model", "gpt-4o")]), n);
        let response = h.ask(vec![tokens(600)]).await;
        assert_eq!(response.statuses[0].current_limit.as_ref().unwrap().name, "acme-tpm");
        assert_eq!(response.statuses[0].limit_remaining, 400);
        let response = h.ask(vec![tokens(401)]).await;
        assert_eq!(response.overall_code(), Code::OverLimit);
        // Nothing was charged: 400 still fit.
        assert_eq!(response.statuses[0].limit_remaining, 400);
        assert_eq!(sluice_field(&response, "action").as_deref(), Some("defer"));
        assert_eq!(sluice_field(&response, "priority").as_deref(), Some("high"));
        assert_eq!(h.codes(vec![tokens(400)]).await, [Code::Ok]);
        // A descriptor that goes deeper than the tree matches nothing.
        let response = h.ask(vec![descriptor(&[("tenant", "acme"), ("model", "m"), ("x", "y")])]).await;
        assert_eq!(response.statuses[0].current_limit, None);
        assert_eq!(response.overall_code(), Code::Ok);
        assert_eq!(sluice_field(&response, "action"), None);
    }

    unlimited_is_never_counted(h) {
        for _ in 0..20 {
            let response = h.ask(vec![descriptor(&[("internal", "batch")])]).await;
            assert_eq!(response.overall_code(), Code::Ok);
            assert_eq!(response.statuses[0].limit_remaining, u32::MAX);
            assert_eq!(response.statuses[0].current_limit, None);
        }
    }

    replaces_drops_the_named_limit(h) {
        // Alone, gpt4o-global allows 2 per minute.
        for _ in 0..2 {
            h.ask(vec![descriptor(&[("model", "gpt-4o")])]).await;
        }
        assert_eq!(h.codes(vec![descriptor(&[("model", "gpt-4o")])]).await, [Code::OverLimit]);
        // With mini-global in the same request, gpt4o-global steps aside.
        let response = h
            .ask(vec![descriptor(&[("model", "gpt-4o")]), descriptor(&[("model", "gpt-4o-mini")])])
            .await;
        assert_eq!(response.overall_code(), Code::Ok);
        assert_eq!(response.statuses[0].current_limit, None);
        assert_eq!(response.statuses[1].current_limit.as_ref().unwrap().name, "mini-global");
        assert_eq!(response.statuses[1].limit_remaining, 99);
    }

    shadow_mode_counts_but_never_blocks(h) {
        for _ in 0..3 {
            let response = h.ask(vec![descriptor(&[("canary", "x")])]).await;
            assert_eq!(response.overall_code(), Code::Ok);
        }
        let metrics = h.limiter.metrics().encode();
        assert!(
            metrics.contains(r#"sluice_rls_shadow_mode_over_limit_total{domain="llm",limit="canary-shadow"} 2"#),
            "{metrics}"
        );
        // A shadow-mode limit over its count does not hold back the others in
        // all-or-nothing mode either.
        let response = h
            .ask(vec![descriptor(&[("canary", "x")]), descriptor(&[("tenant", "acme")])])
            .await;
        assert_eq!(response.overall_code(), Code::Ok);
        assert_eq!(response.statuses[1].limit_remaining, 2);
    }

    per_descriptor_hits_and_check_only(h) {
        let tokens = |n| with_hits(descriptor(&[("tenant", "acme"), ("model", "m")]), n);
        // Request-level hits_addend 0 means 1; per-descriptor 0 means check only.
        let response = h.ask(vec![descriptor(&[("tenant", "acme")]), tokens(0)]).await;
        assert_eq!(response.statuses[0].limit_remaining, 2);
        assert_eq!(response.statuses[1].limit_remaining, 1000);
        let response = h.ask(vec![tokens(1000)]).await;
        assert_eq!(response.overall_code(), Code::Ok);
        assert_eq!(response.statuses[0].limit_remaining, 0);
        // Check-only at exactly the limit: no room left.
        assert_eq!(h.codes(vec![tokens(0)]).await, [Code::OverLimit]);
        // Request-level hits apply to descriptors without their own.
        let mut req = request(vec![descriptor(&[("tenant", "zeta")])]);
        req.hits_addend = 4;
        let response = h.limiter.should_rate_limit(&req).await.unwrap();
        assert_eq!(response.statuses[0].limit_remaining, 1);
    }

    negative_hits_refund(h) {
        let tokens = |n| with_hits(descriptor(&[("tenant", "acme"), ("model", "m")]), n);
        h.ask(vec![tokens(900)]).await;
        let mut refund = tokens(300);
        refund.is_negative_hits = true;
        let response = h.ask(vec![refund.clone()]).await;
        assert_eq!(response.overall_code(), Code::Ok);
        assert_eq!(response.statuses[0].limit_remaining, 400);
        // Refunds never go below zero.
        let mut big_refund = tokens(5000);
        big_refund.is_negative_hits = true;
        let response = h.ask(vec![big_refund]).await;
        assert_eq!(response.statuses[0].limit_remaining, 1000);
    }

    all_or_nothing_moves_no_counter_when_over(h) {
        let rpm = || descriptor(&[("tenant", "acme")]);
        let tokens = |n| with_hits(descriptor(&[("tenant", "acme"), ("model", "m")]), n);
        let response = h.ask(vec![rpm(), tokens(2000)]).await;
        assert_eq!(response.overall_code(), Code::OverLimit);
        assert_eq!(response.statuses[0].code(), Code::Ok);
        assert_eq!(response.statuses[1].code(), Code::OverLimit);
        // The headers describe the limit that blocks, not the one with the least left.
        assert_eq!(header(&response, "RateLimit-Limit"), Some("1000"));
        assert_eq!(header(&response, "RateLimit-Remaining"), Some("1000"));
        // The request-count limit was not charged for the refused request.
        let response = h.ask(vec![rpm(), tokens(10)]).await;
        assert_eq!(response.statuses[0].limit_remaining, 2);
        assert_eq!(response.statuses[1].limit_remaining, 990);
    }

    forced_charge_moves_counters_past_the_limit(h) {
        let tokens = |n| with_hits(descriptor(&[("tenant", "acme"), ("model", "m")]), n);
        h.ask(vec![tokens(900)]).await;
        // Reconciliation of usage that already happened: applied although over.
        let response = h.limiter.force_charge(&request(vec![tokens(300)])).await.unwrap();
        assert_eq!(response.overall_code(), Code::OverLimit);
        assert_eq!(h.codes(vec![tokens(0)]).await, [Code::OverLimit]);
        let response = h.ask(vec![tokens(1)]).await;
        assert_eq!(response.statuses[0].limit_remaining, 0);
    }

    limit_override_from_the_descriptor(h) {
        let mut d = descriptor(&[("tenant", "acme")]);
        d.limit = Some(RateLimitOverride { requests_per_unit: 1, unit: 1 });
        let response = h.ask(vec![d.clone()]).await;
        let status = &response.statuses[0];
        assert_eq!(status.current_limit.as_ref().unwrap().requests_per_unit, 1);
        assert_eq!(status.current_limit.as_ref().unwrap().unit, 1);
        assert_eq!(h.codes(vec![d.clone()]).await, [Code::OverLimit]);
        d.limit = Some(RateLimitOverride { requests_per_unit: 1, unit: 99 });
        let err = h.limiter.should_rate_limit(&request(vec![d])).await.unwrap_err();
        assert!(matches!(err, DecisionError::InvalidRequest(_)), "{err}");
    }

    unknown_domains_and_bad_requests(h) {
        let mut req = request(vec![descriptor(&[("tenant", "acme")])]);
        req.domain = "other".into();
        let response = h.limiter.should_rate_limit(&req).await.unwrap();
        assert_eq!(response.overall_code(), Code::Ok);
        assert_eq!(response.statuses.len(), 1);
        assert!(response.response_headers_to_add.is_empty());

        for bad in [request(vec![]), request(vec![descriptor(&[])]), RateLimitRequest::default()] {
            let err = h.limiter.should_rate_limit(&bad).await.unwrap_err();
            assert!(matches!(err, DecisionError::InvalidRequest(_)), "{err}");
        }
        // Hostile values are just values.
        let hostile = "}\u{0}{llm}:minute:0:tenant=acme\r\n\u{202e}";
        assert_eq!(h.codes(vec![descriptor(&[("tenant", hostile)])]).await, [Code::Ok]);
        let metrics = h.limiter.metrics().encode();
        assert!(metrics.contains(r#"sluice_rls_decisions_total{domain="unknown",code="ok"} 1"#), "{metrics}");
        assert!(metrics.contains(r#"sluice_rls_decisions_total{domain="llm",code="invalid"} 2"#), "{metrics}");
    }

    detailed_metric_labels_each_value(h) {
        h.ask(vec![descriptor(&[("detailed", "a")])]).await;
        h.ask(vec![descriptor(&[("detailed", "a")])]).await;
        let metrics = h.limiter.metrics().encode();
        assert!(
            metrics.contains(r#"sluice_rls_detailed_decisions_total{domain="llm",limit="detailed-limit",descriptor="detailed=a",code="over_limit"} 1"#),
            "{metrics}"
        );
    }
}

/// Compatibility mode: every counter moves, as envoyproxy/ratelimit does.
async fn increment_all(h: Harness) {
    let rpm = || descriptor(&[("tenant", "acme")]);
    let tokens = |n| with_hits(descriptor(&[("tenant", "acme"), ("model", "m")]), n);
    let response = h.ask(vec![rpm(), tokens(2000)]).await;
    assert_eq!(response.overall_code(), Code::OverLimit);
    let response = h.ask(vec![rpm(), tokens(0)]).await;
    assert_eq!(response.statuses[0].limit_remaining, 1);
    // The over-limit charge stuck: 2000 > 1000.
    assert_eq!(response.statuses[1].code(), Code::OverLimit);
    assert_eq!(response.statuses[1].limit_remaining, 0);
}

#[tokio::test]
async fn increment_all_memory() {
    increment_all(harness(false, CountingMode::IncrementAll)).await
}

#[tokio::test]
async fn increment_all_redis() {
    increment_all(harness(true, CountingMode::IncrementAll)).await
}

#[tokio::test]
async fn redis_down_is_unavailable_and_recovers() {
    let mut server = RedisServer::start().unwrap();
    let store = Arc::new(
        RedisStore::new(&RedisStoreOptions {
            redis: sluice_redis::RedisOptions::from_url(server.url()),
            connections: 1,
            timeout: std::time::Duration::from_millis(300),
            ..Default::default()
        })
        .unwrap(),
    );
    let limiter = Limiter::new(
        config(),
        store.clone(),
        CountingMode::AllOrNothing,
        Arc::new(ManualClock::new(T0)),
        Arc::new(Metrics::new()),
    );
    let req = request(vec![descriptor(&[("tenant", "acme")])]);
    let ask = || limiter.should_rate_limit(&req);
    assert!(ask().await.is_ok());
    server.stop();
    let err = ask().await.unwrap_err();
    match &err {
        DecisionError::Store(e) => assert!(e.is_transient(), "{e}"),
        other => panic!("expected a store error, got {other}"),
    }
    assert!(store.ping().await.is_err());
    server.restart().unwrap();
    // The connection manager reconnects in the background; the new server is empty.
    let mut recovered = None;
    for _ in 0..50 {
        if let Ok(response) = ask().await {
            recovered = Some(response);
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let response = recovered.expect("Redis store did not recover");
    assert_eq!(response.statuses[0].limit_remaining, 2);
    let metrics = limiter.metrics().encode();
    assert!(
        metrics.contains(r#"sluice_rls_store_errors_total{store="redis",kind="unavailable"}"#),
        "{metrics}"
    );
}

/// A Redis store on `url` with the default options.
fn default_redis_store(url: String) -> RedisStore {
    RedisStore::new(&RedisStoreOptions {
        redis: sluice_redis::RedisOptions::from_url(url),
        ..Default::default()
    })
    .unwrap()
}

/// A xorshift generator from `seed`: each call gives a number below `n`.
fn random_below(mut seed: u64) -> impl FnMut(u64) -> u64 {
    move |n| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    }
}

#[tokio::test]
async fn redis_store_matches_memory_store_on_random_ops() {
    // Same random sequence of decisions through both stores: identical answers.
    let server = RedisServer::start().unwrap();
    let redis = default_redis_store(server.url());
    let memory = MemoryStore::new();
    let mut next = random_below(0x9E37_79B9_7F4A_7C15u64);
    for mode in [CountingMode::AllOrNothing, CountingMode::IncrementAll] {
        for round in 0..300 {
            let ops: Vec<_> = (0..1 + next(3))
                .map(|i| CounterOp {
                    key: format!("sluice:{{t}}:{mode:?}:{}", (next(4) + i * 4)),
                    hits: next(9) as i64 - 3,
                    limit: 10,
                    enforced: next(5) != 0,
                    ttl_secs: 60,
                })
                .collect();
            assert_same_answer(&redis, &memory, &ops, mode, round).await;
        }
    }
}

/// `store` and `memory` answer `ops` alike (round `round` of a random run).
async fn assert_same_answer(
    store: &dyn CounterStore,
    memory: &MemoryStore,
    ops: &[CounterOp],
    mode: CountingMode,
    round: usize,
) {
    let a = store.apply(Batch::new(ops, mode, T0)).await.unwrap();
    let b = memory.apply(Batch::new(ops, mode, T0)).await.unwrap();
    assert_eq!(a, b, "round {round} {mode:?} ops {ops:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_store_matches_memory_store_on_random_cross_slot_ops() {
    // Decisions whose keys spread over several hash tags (slots) go through
    // the per-slot path with its undo; sequentially they must answer and
    // count exactly like one atomic store.
    let cluster = RedisCluster::start(3, 0).unwrap();
    let store = default_redis_store(cluster.url());
    let memory = MemoryStore::new();
    let mut next = random_below(0x2545_F491_4F6C_DD1Du64);
    let mut cross_slot = 0;
    for mode in [CountingMode::AllOrNothing, CountingMode::IncrementAll] {
        for round in 0..300 {
            let ops: Vec<_> = (0..1 + next(4))
                .map(|i| CounterOp {
                    key: format!("sluice:{{t{}}}:{mode:?}:{}", next(3), next(4) + i * 4),
                    hits: next(9) as i64 - 3,
                    limit: 10,
                    enforced: next(5) != 0,
                    ttl_secs: 60,
                })
                .collect();
            let tags: std::collections::BTreeSet<_> =
                ops.iter().map(|op| op.key[7..11].to_string()).collect();
            cross_slot += usize::from(tags.len() > 1);
            assert_same_answer(&store, &memory, &ops, mode, round).await;
        }
    }
    assert!(cross_slot > 200, "only {cross_slot} cross-slot decisions");
}

#[tokio::test]
async fn redis_decisions_that_arrive_together_share_calls_and_answer_as_if_alone() {
    // One connection, 8 decisions per call at most: of 30 decisions asked at
    // once the first goes alone and the others wait and share calls. The
    // test's runtime has one thread, so they queue in the order asked, and
    // each must be answered exactly as that sequence through the memory
    // store answers it: a shared call changes nothing but the call count.
    let server = RedisServer::start().unwrap();
    let metrics = Metrics::new();
    let redis = RedisStore::new(&RedisStoreOptions {
        redis: sluice_redis::RedisOptions::from_url(server.url()),
        connections: 1,
        max_decisions_per_call: 8,
        ..Default::default()
    })
    .unwrap()
    .with_decisions_per_call_histogram(metrics.redis_decisions_per_call.clone());
    let memory = MemoryStore::new();
    let mut next = random_below(0x51_7CC1_B727_220Au64);
    let mut decisions = 0;
    for mode in [CountingMode::AllOrNothing, CountingMode::IncrementAll] {
        for round in 0..10 {
            let asked: Vec<Vec<CounterOp>> = (0..30)
                .map(|_| {
                    (0..1 + next(3))
                        .map(|i| CounterOp {
                            key: format!("sluice:{{t}}:{mode:?}:{}", next(4) + i * 4),
                            hits: next(9) as i64 - 3,
                            limit: 12,
                            enforced: next(5) != 0,
                            ttl_secs: 60,
                        })
                        .collect()
                })
                .collect();
            decisions += asked.len();
            let together = futures::future::join_all(
                asked
                    .iter()
                    .map(|ops| redis.apply(Batch::new(ops, mode, T0))),
            )
            .await;
            for (index, (ops, answer)) in asked.iter().zip(together).enumerate() {
                let alone = memory.apply(Batch::new(ops, mode, T0)).await.unwrap();
                assert_eq!(
                    answer.unwrap(),
                    alone,
                    "{mode:?} round {round} decision {index}: {ops:?}"
                );
            }
        }
    }
    // 20 rounds of 30: [1, 8, 8, 8, 5] calls each.
    let text = metrics.encode();
    let value = |name: &str| {
        text.lines()
            .find_map(|line| line.strip_prefix(name)?.trim().parse::<f64>().ok())
            .unwrap_or_else(|| panic!("{name} not in {text}"))
    };
    assert_eq!(
        value("sluice_rls_redis_decisions_per_call_sum"),
        decisions as f64
    );
    assert_eq!(
        value("sluice_rls_redis_decisions_per_call_count"),
        20.0 * 5.0
    );
}
