//! Prometheus metrics of the rate-limit service.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;
use sluice_runtime::metrics::{encode, register};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DecisionLabels {
    pub domain: String,
    pub code: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct LimitLabels {
    pub domain: String,
    pub limit: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DetailedLabels {
    pub domain: String,
    pub limit: String,
    pub descriptor: String,
    pub code: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StoreLabels {
    pub store: &'static str,
    pub kind: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct EventLabels {
    pub event: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReasonLabels {
    pub reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResultLabels {
    pub result: &'static str,
}

/// Counters of one limit, cloned out of their families once.
#[derive(Clone, Debug)]
pub struct LimitCounters {
    pub hits: Counter,
    pub over_limit: Counter,
    pub shadow_mode_hits: Counter,
}

/// All metrics, registered once; cheap to update from any task.
pub struct Metrics {
    pub registry: Registry,
    pub decisions: Family<DecisionLabels, Counter>,
    pub decision_seconds: Histogram,
    pub hits: Family<LimitLabels, Counter>,
    pub over_limit: Family<LimitLabels, Counter>,
    pub shadow_mode_hits: Family<LimitLabels, Counter>,
    pub global_shadow_mode: Counter,
    pub local_cache_answers: Counter,
    pub detailed: Family<DetailedLabels, Counter>,
    pub store_errors: Family<StoreLabels, Counter>,
    pub cross_slot_decisions: Counter,
    pub config_reloads: Family<ResultLabels, Counter>,
    pub config_limits: Gauge,
    pub ext_authz_events: Family<EventLabels, Counter>,
    pub ext_authz_prompt_tokens: Counter,
    pub counter_writes_refused: Family<ReasonLabels, Counter>,
    pub requests_refused: Family<ReasonLabels, Counter>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("sluice_rls");
        Metrics {
            decisions: register(
                &mut registry,
                "decisions",
                "ShouldRateLimit answers by domain and overall code (ok, over_limit, error)",
                Family::default(),
            ),
            // 50 µs .. ~1.6 s: in-memory decisions sit at the bottom, Redis trouble at the top.
            decision_seconds: register(
                &mut registry,
                "decision_duration_seconds",
                "Time to decide one ShouldRateLimit call, store round trip included",
                Histogram::new(exponential_buckets(0.000_05, 2.0, 16)),
            ),
            hits: register(
                &mut registry,
                "hits",
                "Hits charged against each limit (hits_addend summed)",
                Family::default(),
            ),
            over_limit: register(
                &mut registry,
                "over_limit",
                "Descriptors answered OVER_LIMIT, by limit name",
                Family::default(),
            ),
            shadow_mode_hits: register(
                &mut registry,
                "shadow_mode_over_limit",
                "Descriptors over a shadow-mode limit (answered OK)",
                Family::default(),
            ),
            global_shadow_mode: register(
                &mut registry,
                "global_shadow_mode",
                "OVER_LIMIT answers turned into OK by --global-shadow-mode",
                Counter::default(),
            ),
            local_cache_answers: register(
                &mut registry,
                "local_cache_answers",
                "Decisions answered from the over-limit local cache, without the store",
                Counter::default(),
            ),
            detailed: register(
                &mut registry,
                "detailed_decisions",
                "Per-descriptor-value decisions of limits with detailed_metric: true",
                Family::default(),
            ),
            store_errors: register(
                &mut registry,
                "store_errors",
                "Counter store failures by store and kind (unavailable, failed)",
                Family::default(),
            ),
            cross_slot_decisions: register(
                &mut registry,
                "cross_slot_decisions",
                "Redis Cluster decisions whose counters spanned hash slots (decided per slot, not atomic across them)",
                Counter::default(),
            ),
            config_reloads: register(
                &mut registry,
                "config_reloads",
                "Limits reloads by result (applied, rejected)",
                Family::default(),
            ),
            config_limits: register(
                &mut registry,
                "config_limits",
                "Limits in the active configuration",
                Gauge::default(),
            ),
            ext_authz_events: register(
                &mut registry,
                "ext_authz_events",
                "ext_authz front door: admitted, rejected, deferred, bad_request, body_too_large, missing_tenant, truncated_body, limiter_unavailable",
                Family::default(),
            ),
            ext_authz_prompt_tokens: register(
                &mut registry,
                "ext_authz_prompt_tokens",
                "Prompt tokens counted by the ext_authz front door",
                Counter::default(),
            ),
            counter_writes_refused: register(
                &mut registry,
                "counter_writes_refused",
                "Refunds and forced charges refused without the filter's signature, by reason (unsigned, no_secret, malformed, expired, bad_signature)",
                Family::default(),
            ),
            requests_refused: register(
                &mut registry,
                "requests_refused",
                "ShouldRateLimit calls refused as too large, by reason (too_many_descriptors, too_many_entries, entry_too_long)",
                Family::default(),
            ),
            registry,
        }
    }

    /// Handles for one limit's counters.
    pub fn limit_counters(&self, domain: &str, limit: &str) -> LimitCounters {
        let labels = LimitLabels {
            domain: domain.to_string(),
            limit: limit.to_string(),
        };
        LimitCounters {
            hits: self.hits.get_or_create(&labels).clone(),
            over_limit: self.over_limit.get_or_create(&labels).clone(),
            shadow_mode_hits: self.shadow_mode_hits.get_or_create(&labels).clone(),
        }
    }

    /// The text exposition format.
    pub fn encode(&self) -> String {
        encode(&self.registry)
    }
}
