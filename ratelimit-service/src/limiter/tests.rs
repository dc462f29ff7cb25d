//! The pure halves of a decision, without a store: a plan, the store's rule
//! applied to chosen counter values (`store::decide`, as both stores do),
//! an answer.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::answer::{answer, MetricEvent};
use super::plan::{self, Charge, Plan, Resolved, MAX_HITS};
use super::{DecisionError, ResponseOptions};
use crate::config::LimitsConfig;
use crate::store::{self, counter_key, CounterOutcome, CountingMode};
use crate::window::{Unit, Window};
use sluice_proto::pb::envoy::extensions::common::ratelimit::v3::{
    rate_limit_descriptor::RateLimitOverride, RateLimitDescriptor,
};
use sluice_proto::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
use sluice_proto::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use sluice_testkit::rls::{self, descriptor, header, sluice_field, with_hits};
use std::path::PathBuf;

/// 2026-11-29T00:02:05.500Z: 5.5 s into a minute window.
const T0: u64 = 1_795_996_925_500;

/// Shared with the scenario suite (tests/scenarios.rs).
const LIMITS: &str = include_str!("../../tests/fixtures/llm-limits.yaml");

fn config() -> LimitsConfig {
    LimitsConfig::from_sources(&[(PathBuf::from("limits.yaml"), LIMITS.to_string())]).unwrap()
}

fn refund(hits: u64) -> RateLimitDescriptor {
    let mut d = tokens(hits);
    d.is_negative_hits = true;
    d
}

fn rpm() -> RateLimitDescriptor {
    descriptor(&[("tenant", "acme")])
}

fn tokens(hits: u64) -> RateLimitDescriptor {
    with_hits(descriptor(&[("tenant", "acme"), ("model", "m")]), hits)
}

fn request(descriptors: Vec<RateLimitDescriptor>) -> RateLimitRequest {
    rls::request("llm", descriptors)
}

/// Plans borrow the config they were planned under.
static CONFIG: std::sync::LazyLock<LimitsConfig> = std::sync::LazyLock::new(config);

fn plan_of(request: &RateLimitRequest, mode: CountingMode) -> Plan<'static> {
    plan::plan(&CONFIG, request, mode, false, T0).unwrap()
}

/// What the stores do with `before` (one value per op), then the answer:
/// the response and the metric events as `kind:limit[:detail]` strings.
fn decide(
    request: &RateLimitRequest,
    mode: CountingMode,
    before: &[u64],
) -> (RateLimitResponse, Vec<String>) {
    let plan = plan_of(request, mode);
    assert_eq!(plan.ops.len(), before.len(), "one value per op");
    let outcome = CounterOutcome {
        applied: store::decide(&plan.ops, before, mode),
        before: before.to_vec(),
    };
    let answer = answer(request, &plan, &outcome, &ResponseOptions::default());
    let events = answer
        .events
        .iter()
        .filter_map(|event| {
            Some(match event {
                MetricEvent::Hits { limit, hits } => format!("hits:{}:{hits}", limit.name),
                MetricEvent::ShadowModeHit { limit } => format!("shadow:{}", limit.name),
                MetricEvent::OverLimit { limit } => format!("over:{}", limit.name),
                MetricEvent::Detailed {
                    limit,
                    descriptor,
                    code,
                } => format!("detailed:{}:{descriptor}:{code}", limit.name),
                MetricEvent::GlobalShadowMode => "global_shadow".to_string(),
                // Every limited descriptor has one; upstream's stats are
                // tested in metrics and tests/upstream_metrics.rs.
                MetricEvent::Upstream { .. } => return None,
            })
        })
        .collect();
    (answer.response, events)
}

fn codes(response: &RateLimitResponse) -> Vec<Code> {
    response.statuses.iter().map(|s| s.code()).collect()
}

fn remaining(response: &RateLimitResponse) -> Vec<u32> {
    response
        .statuses
        .iter()
        .map(|s| s.limit_remaining)
        .collect()
}

fn limited_names<'p>(plan: &'p Plan<'_>) -> Vec<Option<&'p str>> {
    plan.resolved
        .iter()
        .map(|r| match r {
            Resolved::None => None,
            Resolved::Unlimited => Some("unlimited"),
            Resolved::Limited(applied) => Some(applied.limit.name.as_str()),
        })
        .collect()
}

#[test]
fn plan_has_one_op_per_limited_descriptor() {
    let req = request(vec![
        rpm(),
        descriptor(&[("nothing", "matches")]),
        tokens(7),
        descriptor(&[("internal", "x")]),
    ]);
    let plan = plan_of(&req, CountingMode::AllOrNothing);
    assert_eq!(
        limited_names(&plan),
        [Some("acme-rpm"), None, Some("acme-tpm"), Some("unlimited")]
    );
    let minute = Window::containing(Unit::Minute, T0);
    assert_eq!(plan.ops.len(), 2);
    assert_eq!(
        plan.ops[0].key,
        counter_key(
            "llm",
            [("tenant", "acme")].into_iter(),
            Unit::Minute,
            minute
        )
    );
    assert_eq!(
        plan.ops[1].key,
        counter_key(
            "llm",
            [("tenant", "acme"), ("model", "m")].into_iter(),
            Unit::Minute,
            minute
        )
    );
    assert_eq!(
        plan.ops
            .iter()
            .map(|op| (op.hits, op.limit, op.enforced, op.ttl_secs))
            .collect::<Vec<_>>(),
        // 54.5 s left in the minute and 60 s of correction grace: 115 s
        // rounded up, one more for skew.
        [(1, 3, true, 116), (7, 1000, true, 116)]
    );
    assert_eq!(plan.now_millis, T0);
    assert_eq!(plan.mode, CountingMode::AllOrNothing);
}

#[test]
fn hits_per_descriptor_and_per_request() {
    // (request hits_addend, descriptor, expected op hits)
    let table: [(u32, RateLimitDescriptor, i64); 7] = [
        (0, rpm(), 1), // the API's 0 means 1
        (4, rpm(), 4),
        (4, tokens(9), 9),                      // the descriptor's own wins
        (4, tokens(0), 0),                      // the descriptor's 0 is a check only
        (0, refund(300), -300),                 // a refund
        (0, tokens(u64::MAX), MAX_HITS as i64), // clamped
        (0, refund(u64::MAX), -(MAX_HITS as i64)),
    ];
    for (request_hits, d, expected) in table {
        let mut req = request(vec![d]);
        req.hits_addend = request_hits;
        let plan = plan_of(&req, CountingMode::AllOrNothing);
        assert_eq!(plan.ops[0].hits, expected, "{req:?}");
    }
}

/// A request within its request limit and over its token limit (2000 of
/// 1000), decided under `mode` with both counters at 0.
fn over_on_tokens(mode: CountingMode) -> (RateLimitResponse, Vec<String>) {
    let req = request(vec![rpm(), tokens(2000)]);
    let (response, events) = decide(&req, mode, &[0, 0]);
    assert_eq!(response.overall_code(), Code::OverLimit);
    assert_eq!(codes(&response), [Code::Ok, Code::OverLimit]);
    (response, events)
}

#[test]
fn all_or_nothing_moves_no_counter_when_over() {
    let (response, events) = over_on_tokens(CountingMode::AllOrNothing);
    // Nothing applied: the request-count limit still has all three.
    assert_eq!(remaining(&response), [3, 1000]);
    // The headers describe the limit that blocks, not the one with the least left.
    assert_eq!(header(&response, "RateLimit-Limit"), Some("1000"));
    assert_eq!(header(&response, "RateLimit-Remaining"), Some("1000"));
    assert_eq!(header(&response, "RateLimit-Reset"), Some("55"));
    assert_eq!(header(&response, "RateLimit-Policy"), Some("1000;w=60"));
    assert_eq!(header(&response, "Retry-After"), Some("55"));
    assert_eq!(events, ["over:acme-tpm"]);
    assert_eq!(sluice_field(&response, "action").as_deref(), Some("defer"));
    assert_eq!(sluice_field(&response, "priority").as_deref(), Some("high"));
    assert_eq!(
        sluice_field(&response, "over_limits").as_deref(),
        Some("acme-tpm")
    );
    assert_eq!(
        sluice_field(&response, "retry_after_seconds").as_deref(),
        Some("55")
    );
}

#[test]
fn increment_all_moves_every_counter() {
    let (response, events) = over_on_tokens(CountingMode::IncrementAll);
    assert_eq!(remaining(&response), [2, 0]);
    assert_eq!(
        events,
        ["hits:acme-rpm:1", "hits:acme-tpm:2000", "over:acme-tpm"]
    );
}

#[test]
fn allowed_requests_carry_the_tightest_limit_and_no_metadata() {
    let req = request(vec![rpm(), tokens(10)]);
    let (response, events) = decide(&req, CountingMode::AllOrNothing, &[1, 500]);
    assert_eq!(response.overall_code(), Code::Ok);
    assert_eq!(remaining(&response), [1, 490]);
    assert_eq!(header(&response, "RateLimit-Limit"), Some("3"));
    assert_eq!(header(&response, "RateLimit-Remaining"), Some("1"));
    assert_eq!(header(&response, "Retry-After"), None);
    // No instructions; the caller did not say when it asked, so no instant.
    assert_eq!(response.dynamic_metadata, None);
    assert_eq!(events, ["hits:acme-rpm:1", "hits:acme-tpm:10"]);
    let status = &response.statuses[0];
    let reset = status.duration_until_reset.as_ref().unwrap();
    assert_eq!((reset.seconds, reset.nanos), (54, 500_000_000));
}

/// The instant the windows were charged at goes back only when the caller's
/// own instant (sent with its call) falls in other windows.
#[test]
fn the_charge_instant_goes_back_only_when_the_callers_names_other_windows() {
    let req = request(vec![rpm(), tokens(10)]);
    let answer_asked_at = |asked_at: Option<u64>, before: &[u64]| {
        let mut plan = plan_of(&req, CountingMode::AllOrNothing);
        plan.asked_at_millis = asked_at;
        let outcome = CounterOutcome {
            applied: store::decide(&plan.ops, before, CountingMode::AllOrNothing),
            before: before.to_vec(),
        };
        answer(&req, &plan, &outcome, &ResponseOptions::default()).response
    };
    // T0 is 5.5 s into a minute: asked 5 s earlier, same minute windows.
    let same_window = answer_asked_at(Some(T0 - 5_000), &[0, 0]);
    assert_eq!(same_window.dynamic_metadata, None);
    // Asked 6 s earlier: the previous minute (the call crossed the boundary).
    let crossed = answer_asked_at(Some(T0 - 6_000), &[0, 0]);
    assert_eq!(
        sluice_field(&crossed, "charged_at_ms"),
        Some(T0.to_string())
    );
    // A clock ahead of ours by a minute: other windows too.
    let ahead = answer_asked_at(Some(T0 + 60_000), &[0, 0]);
    assert_eq!(sluice_field(&ahead, "charged_at_ms"), Some(T0.to_string()));
    // Refused: nothing was charged, so no instant (only instructions).
    let refused = answer_asked_at(Some(T0 - 6_000), &[3, 0]);
    assert_eq!(refused.overall_code(), Code::OverLimit);
    assert_eq!(sluice_field(&refused, "charged_at_ms"), None);
}

#[test]
fn check_only_at_the_limit_is_over_and_counts_nothing() {
    let req = request(vec![tokens(0)]);
    let (response, events) = decide(&req, CountingMode::AllOrNothing, &[1000]);
    assert_eq!(codes(&response), [Code::OverLimit]);
    assert_eq!(events, ["over:acme-tpm"]);
    let (response, events) = decide(&req, CountingMode::AllOrNothing, &[999]);
    assert_eq!(codes(&response), [Code::Ok]);
    assert_eq!(remaining(&response), [1]);
    assert!(events.is_empty(), "{events:?}");
}

#[test]
fn upstream_rule_check_only_is_over_only_past_the_limit() {
    // envoyproxy/ratelimit: `used + 0 > limit`; at the limit the check passes.
    let req = request(vec![tokens(0)]);
    let (response, events) = decide(&req, CountingMode::IncrementAll, &[1000]);
    assert_eq!(codes(&response), [Code::Ok]);
    assert_eq!(remaining(&response), [0]);
    assert!(events.is_empty(), "{events:?}");
    let (response, events) = decide(&req, CountingMode::IncrementAll, &[1001]);
    assert_eq!(codes(&response), [Code::OverLimit]);
    assert_eq!(remaining(&response), [0]);
    assert_eq!(events, ["over:acme-tpm"]);
    // A charge is decided alike by both rules: 1000 + 1 > 1000.
    let charge = request(vec![tokens(1)]);
    for mode in [CountingMode::AllOrNothing, CountingMode::IncrementAll] {
        let (response, _) = decide(&charge, mode, &[1000]);
        assert_eq!(codes(&response), [Code::OverLimit], "{mode:?}");
    }
}

#[test]
fn refunds_are_never_over_and_stop_at_zero() {
    let (response, events) = decide(
        &request(vec![refund(300)]),
        CountingMode::AllOrNothing,
        &[900],
    );
    assert_eq!(codes(&response), [Code::Ok]);
    assert_eq!(remaining(&response), [400]);
    assert!(events.is_empty(), "a refund is no hit: {events:?}");
    let (response, _) = decide(
        &request(vec![refund(5000)]),
        CountingMode::AllOrNothing,
        &[900],
    );
    assert_eq!(remaining(&response), [1000]);
}

#[test]
fn shadow_mode_counts_but_never_blocks() {
    let req = request(vec![descriptor(&[("canary", "x")]), rpm()]);
    let plan = plan_of(&req, CountingMode::AllOrNothing);
    assert!(!plan.ops[0].enforced);
    assert!(plan.ops[1].enforced);
    let (response, events) = decide(&req, CountingMode::AllOrNothing, &[1, 0]);
    assert_eq!(response.overall_code(), Code::Ok);
    assert_eq!(codes(&response), [Code::Ok, Code::Ok]);
    // Applied: a shadow limit over its count holds back no other counter.
    assert_eq!(remaining(&response), [0, 2]);
    assert_eq!(
        events,
        [
            "hits:canary-shadow:1",
            "shadow:canary-shadow",
            "hits:acme-rpm:1"
        ]
    );
    // The headers never describe a shadow limit.
    assert_eq!(header(&response, "RateLimit-Limit"), Some("3"));
    let (alone, _) = decide(
        &request(vec![descriptor(&[("canary", "x")])]),
        CountingMode::AllOrNothing,
        &[5],
    );
    assert!(alone.response_headers_to_add.is_empty());
    assert_eq!(sluice_field(&alone, "action"), None);
}

#[test]
fn unlimited_is_ok_with_everything_left_and_no_counter() {
    let req = request(vec![descriptor(&[("internal", "x")])]);
    let plan = plan_of(&req, CountingMode::AllOrNothing);
    assert!(plan.ops.is_empty());
    let (response, events) = decide(&req, CountingMode::AllOrNothing, &[]);
    assert_eq!(codes(&response), [Code::Ok]);
    assert_eq!(remaining(&response), [u32::MAX]);
    assert!(response.statuses[0].current_limit.is_none());
    assert!(response.response_headers_to_add.is_empty());
    assert!(events.is_empty());
}

#[test]
fn a_replaced_limit_steps_aside() {
    let both = request(vec![
        descriptor(&[("model", "gpt-4o")]),
        descriptor(&[("model", "gpt-4o-mini")]),
    ]);
    let plan = plan_of(&both, CountingMode::AllOrNothing);
    assert_eq!(limited_names(&plan), [None, Some("mini-global")]);
    assert_eq!(plan.ops.len(), 1);
    assert_eq!(plan.ops[0].limit, 100);
    let (response, _) = decide(&both, CountingMode::AllOrNothing, &[0]);
    assert_eq!(remaining(&response), [0, 99]);
    assert!(response.statuses[0].current_limit.is_none());
    // Alone, it applies.
    let alone = plan_of(
        &request(vec![descriptor(&[("model", "gpt-4o")])]),
        CountingMode::AllOrNothing,
    );
    assert_eq!(limited_names(&alone), [Some("gpt4o-global")]);
}

#[test]
fn a_descriptor_limit_overrides_rate_and_unit_only() {
    let mut d = descriptor(&[("canary", "x")]);
    d.limit = Some(RateLimitOverride {
        requests_per_unit: 7,
        unit: 1, // second
    });
    let plan = plan_of(&request(vec![d]), CountingMode::AllOrNothing);
    let Resolved::Limited(applied) = &plan.resolved[0] else {
        panic!("{:?}", plan.resolved);
    };
    assert_eq!(applied.limit.name, "canary-shadow");
    assert_eq!(applied.limit.unit, Unit::Second);
    assert_eq!(applied.limit.requests_per_unit, 7);
    assert!(applied.limit.shadow_mode, "kept from the matched limit");
    assert_eq!(applied.window, Window::containing(Unit::Second, T0));
    assert_eq!((plan.ops[0].limit, plan.ops[0].enforced), (7, false));
    assert_eq!(
        plan.ops[0].ttl_secs, 62,
        "0.5 s, 60 s of grace, 1 s of skew"
    );

    // Nothing matched: the override alone, by the name `override`.
    let mut d = descriptor(&[("nothing", "matches")]);
    d.limit = Some(RateLimitOverride {
        requests_per_unit: 1,
        unit: 2, // minute
    });
    let req = request(vec![d]);
    let plan = plan_of(&req, CountingMode::AllOrNothing);
    assert_eq!(limited_names(&plan), [Some("override")]);
    let (response, _) = decide(&req, CountingMode::AllOrNothing, &[1]);
    assert_eq!(codes(&response), [Code::OverLimit]);
    assert_eq!(sluice_field(&response, "action").as_deref(), Some("reject"));
    assert_eq!(
        sluice_field(&response, "priority").as_deref(),
        Some("normal")
    );

    let mut bad = rpm();
    bad.limit = Some(RateLimitOverride {
        requests_per_unit: 1,
        unit: 99,
    });
    let err = plan::plan(
        &config(),
        &request(vec![bad]),
        CountingMode::AllOrNothing,
        false,
        T0,
    )
    .unwrap_err();
    assert!(matches!(err, DecisionError::InvalidRequest(_)), "{err}");
}

#[test]
fn metadata_takes_the_most_cautious_reading() {
    // acme-tpm: defer/high; any-tenant-rph: defer/low; override: reject/normal.
    let zeta = descriptor(&[("tenant", "zeta")]);
    let req = request(vec![tokens(2000), zeta.clone()]);
    let (response, _) = decide(&req, CountingMode::AllOrNothing, &[0, 5]);
    assert_eq!(sluice_field(&response, "action").as_deref(), Some("defer"));
    assert_eq!(sluice_field(&response, "priority").as_deref(), Some("low"));
    assert_eq!(
        sluice_field(&response, "over_limits").as_deref(),
        Some("acme-tpm,any-tenant-rph")
    );
    // The hour resets last: 57 min 54.5 s, rounded up.
    assert_eq!(header(&response, "Retry-After"), Some("3475"));
    let mut strict = descriptor(&[("other", "x")]);
    strict.limit = Some(RateLimitOverride {
        requests_per_unit: 1,
        unit: 2,
    });
    let (response, _) = decide(
        &request(vec![tokens(2000), strict]),
        CountingMode::AllOrNothing,
        &[0, 1],
    );
    assert_eq!(sluice_field(&response, "action").as_deref(), Some("reject"));
    // high and normal: normal.
    assert_eq!(
        sluice_field(&response, "priority").as_deref(),
        Some("normal")
    );
}

#[test]
fn detailed_metric_labels_the_descriptor() {
    let req = request(vec![descriptor(&[("detailed", "a")])]);
    let (_, events) = decide(&req, CountingMode::AllOrNothing, &[0]);
    assert_eq!(
        events,
        [
            "hits:detailed-limit:1",
            "detailed:detailed-limit:detailed=a:ok"
        ]
    );
    let (_, events) = decide(&req, CountingMode::AllOrNothing, &[1]);
    assert_eq!(
        events,
        [
            "over:detailed-limit",
            "detailed:detailed-limit:detailed=a:over_limit"
        ]
    );
}

#[test]
fn malformed_requests_are_invalid() {
    let mut no_domain = request(vec![rpm()]);
    no_domain.domain.clear();
    for bad in [
        no_domain,
        request(vec![]),
        request(vec![rpm(), descriptor(&[])]),
    ] {
        let err = plan::plan(&config(), &bad, CountingMode::AllOrNothing, false, T0).unwrap_err();
        assert!(matches!(err, DecisionError::InvalidRequest(_)), "{err}");
    }
    // An unknown domain is no error: nothing matches, nothing is counted.
    let mut other = request(vec![rpm()]);
    other.domain = "other".into();
    let plan = plan_of(&other, CountingMode::AllOrNothing);
    assert!(plan.ops.is_empty());
}

#[test]
fn the_force_marker_charges_every_counter() {
    let table: [(Option<&[u8]>, Charge); 5] = [
        (Some(b"force"), Charge::Force),
        (Some(b"Force"), Charge::Decide),
        (Some(b"forced"), Charge::Decide),
        (Some(b""), Charge::Decide),
        (None, Charge::Decide),
    ];
    for (marker, expected) in table {
        assert_eq!(Charge::from_marker(marker), expected, "{marker:?}");
    }
    for configured in [CountingMode::AllOrNothing, CountingMode::IncrementAll] {
        assert_eq!(Charge::Decide.counting_mode(configured), configured);
        assert_eq!(
            Charge::Force.counting_mode(configured),
            CountingMode::IncrementAll
        );
    }
    // A forced charge past the limit moves the counter and answers over.
    let req = request(vec![tokens(300)]);
    let mode = Charge::Force.counting_mode(CountingMode::AllOrNothing);
    let (response, events) = decide(&req, mode, &[900]);
    assert_eq!(codes(&response), [Code::OverLimit]);
    assert_eq!(remaining(&response), [0]);
    assert_eq!(events, ["hits:acme-tpm:300", "over:acme-tpm"]);
}

/// upstream's `ratelimitToMetadata`: the request's `hitsAddend` when not 0,
/// each descriptor's own when set (0 included), as numbers.
#[test]
fn upstream_metadata_carries_hits_addend_as_upstream() {
    use sluice_proto::pb::google::protobuf::value::Kind;
    let mut req = request(vec![tokens(0), rpm()]);
    req.hits_addend = 3;
    let plan = plan_of(&req, CountingMode::IncrementAll);
    let outcome = CounterOutcome {
        applied: true,
        before: vec![0, 0],
    };
    let options = ResponseOptions {
        dynamic_metadata: true,
        ..Default::default()
    };
    let response = answer(&req, &plan, &outcome, &options).response;
    let fields = response.dynamic_metadata.unwrap().fields;
    let number = |value: Option<&sluice_proto::pb::google::protobuf::Value>| match value
        .and_then(|v| v.kind.clone())
    {
        Some(Kind::NumberValue(n)) => Some(n),
        _ => None,
    };
    assert_eq!(number(fields.get("hitsAddend")), Some(3.0));
    let Some(Kind::ListValue(descriptors)) = fields["descriptors"].kind.clone() else {
        panic!("descriptors is a list");
    };
    let hits: Vec<Option<f64>> = descriptors
        .values
        .iter()
        .map(|d| match &d.kind {
            Some(Kind::StructValue(s)) => number(s.fields.get("hitsAddend")),
            _ => panic!("a descriptor is a struct"),
        })
        .collect();
    assert_eq!(
        hits,
        [Some(0.0), None],
        "set (0 too) or absent, as upstream"
    );

    req.hits_addend = 0;
    let response = answer(&req, &plan, &outcome, &options).response;
    let fields = response.dynamic_metadata.unwrap().fields;
    assert!(
        !fields.contains_key("hitsAddend"),
        "0 is left out, as upstream"
    );
}

mod saturation_routing {
    use super::*;
    use crate::limiter::{Limiter, ManualClock};
    use crate::metrics::Metrics;
    use crate::saturation::tests::Fixed;
    use crate::saturation::{RoutingOptions, SaturationRouter};
    use crate::store::MemoryStore;
    use sluice_contract::saturation::Saturation;
    use std::sync::Arc;

    /// A limiter whose router has read model "m"'s state once.
    async fn routed(saturated: bool) -> (Limiter, Arc<SaturationRouter>) {
        let source = Arc::new(Fixed::default());
        source.set(Some(Saturation {
            saturated,
            at_ms: T0,
        }));
        let metrics = Arc::new(Metrics::new());
        let router = SaturationRouter::new(
            source,
            RoutingOptions::default(),
            metrics.saturation.clone(),
        )
        .unwrap();
        router.route("m", T0);
        router.refresh(T0).await.unwrap();
        let router = Arc::new(router);
        let limiter = Limiter::new(
            config(),
            Arc::new(MemoryStore::new()),
            CountingMode::AllOrNothing,
            Arc::new(ManualClock::new(T0)),
            metrics,
        )
        .with_saturation_routing(router.clone());
        (limiter, router)
    }

    async fn ask(limiter: &Limiter, descriptors: Vec<RateLimitDescriptor>) -> RateLimitResponse {
        limiter
            .charge(&request(descriptors), Charge::Decide, None)
            .await
            .unwrap()
    }

    #[tokio::test]
    async fn an_in_quota_request_of_a_deferring_tenant_is_queued_while_saturated() {
        let (limiter, _) = routed(true).await;
        let response = ask(&limiter, vec![tokens(10)]).await;
        assert_eq!(response.overall_code(), Code::Ok);
        assert_eq!(sluice_field(&response, "route").as_deref(), Some("queue"));
        // acme-tpm's class: defer, high.
        assert_eq!(sluice_field(&response, "priority").as_deref(), Some("high"));
        assert_eq!(limiter.metrics().in_quota_queued.get(), 1);
        // Beside a limit that does not defer (acme-rpm), the deferring one
        // decides.
        let response = ask(&limiter, vec![rpm(), tokens(10)]).await;
        assert_eq!(sluice_field(&response, "route").as_deref(), Some("queue"));
        assert_eq!(limiter.metrics().in_quota_queued.get(), 2);
        // Charged: it is in quota (1000 per minute; 20 + 985 is over).
        let over = ask(&limiter, vec![tokens(985)]).await;
        assert_eq!(over.overall_code(), Code::OverLimit);
        assert_eq!(sluice_field(&over, "route"), None);
        assert_eq!(sluice_field(&over, "action").as_deref(), Some("defer"));
        assert_eq!(limiter.metrics().in_quota_queued.get(), 2);
    }

    #[tokio::test]
    async fn an_in_quota_request_of_a_bucket_over_quota_lately_is_queued() {
        let clock = Arc::new(ManualClock::new(T0));
        let limiter = Limiter::new(
            config(),
            Arc::new(MemoryStore::new()),
            CountingMode::AllOrNothing,
            clock.clone(),
            Arc::new(Metrics::new()),
        )
        .with_over_quota_routing(10_000);
        // Never over: straight to the server.
        let response = ask(&limiter, vec![tokens(10)]).await;
        assert_eq!(response.overall_code(), Code::Ok);
        assert_eq!(sluice_field(&response, "route"), None);
        // Over acme-tpm (defer): remembered; the answer itself defers.
        let over = ask(&limiter, vec![tokens(2000)]).await;
        assert_eq!(over.overall_code(), Code::OverLimit);
        assert_eq!(sluice_field(&over, "action").as_deref(), Some("defer"));
        assert_eq!(sluice_field(&over, "route"), None);
        // In quota again within the memory: into the fair queue, at
        // acme-tpm's class.
        clock.advance(10_000);
        let queued = ask(&limiter, vec![tokens(10)]).await;
        assert_eq!(queued.overall_code(), Code::Ok);
        assert_eq!(sluice_field(&queued, "route").as_deref(), Some("queue"));
        assert_eq!(sluice_field(&queued, "priority").as_deref(), Some("high"));
        assert_eq!(limiter.metrics().in_quota_queued.get(), 1);
        // Past the memory: straight again.
        clock.advance(1);
        let direct = ask(&limiter, vec![tokens(10)]).await;
        assert_eq!(direct.overall_code(), Code::Ok);
        assert_eq!(sluice_field(&direct, "route"), None);
        assert_eq!(limiter.metrics().in_quota_queued.get(), 1);
    }

    #[tokio::test]
    async fn the_server_with_room_a_rejecting_limit_or_a_correction_go_direct() {
        let (limiter, _) = routed(false).await;
        let response = ask(&limiter, vec![tokens(10)]).await;
        assert_eq!(response.overall_code(), Code::Ok);
        assert_eq!(sluice_field(&response, "route"), None);

        let (limiter, router) = routed(true).await;
        // gpt4o-global does not defer: a request under no deferring limit
        // is never queued.
        let response = ask(&limiter, vec![descriptor(&[("model", "gpt-4o")])]).await;
        assert_eq!(response.overall_code(), Code::Ok);
        assert_eq!(sluice_field(&response, "route"), None);
        // A correction of usage is no admission.
        let response = limiter.correct(&request(vec![tokens(10)]), Some(T0)).await;
        assert_eq!(sluice_field(&response.unwrap(), "route"), None);
        assert_eq!(limiter.metrics().in_quota_queued.get(), 0);
        assert_eq!(
            router.models(),
            1,
            "no model tracked for a request that cannot be queued"
        );
    }
}
