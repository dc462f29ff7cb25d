//! Prometheus metrics of the consumer (prefix `sluice_consumer_`).
//!
//! Label cardinality is bounded: bucket and model labels are sanitized names
//! (see [`crate::keys::sanitize`]) and only the first `max_buckets` /
//! `max_models` distinct values get their own series; later ones are counted
//! under `other`. Every other label takes values from a fixed set.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;
use sluice_runtime::metrics::{encode, register, register_build_info};
pub use sluice_runtime::metrics::{KindLabels, ReasonLabels, ResultLabels};
use std::collections::{HashMap, HashSet};
use std::sync::atomic::AtomicU64;
use std::sync::Mutex;

/// Label of values beyond the cardinality bound.
pub(crate) const OTHER: &str = "other";

/// Admits the first `max` distinct label values, maps the rest to `other`.
#[derive(Debug)]
pub(crate) struct LabelLimiter {
    max: usize,
    seen: Mutex<HashSet<String>>,
}

impl LabelLimiter {
    pub(crate) fn new(max: usize) -> Self {
        LabelLimiter {
            max,
            seen: Mutex::new(HashSet::new()),
        }
    }

    /// `value` if it already has a series or there is room, else `other`.
    pub(crate) fn label(&self, value: &str) -> String {
        let Ok(mut seen) = self.seen.lock() else {
            return OTHER.into();
        };
        if seen.contains(value) {
            return value.to_string();
        }
        if seen.len() < self.max {
            seen.insert(value.to_string());
            return value.to_string();
        }
        OTHER.into()
    }

    /// Frees `value`'s slot; true when it had one.
    pub(crate) fn forget(&self, value: &str) -> bool {
        self.seen
            .lock()
            .map(|mut seen| seen.remove(value))
            .unwrap_or(false)
    }
}

/// Every (result, limited_by) pair a pacing decision is recorded under.
const PACING_OUTCOMES: [(&str, &str); 4] = [
    ("admitted", "none"),
    ("suspended", "requests"),
    ("suspended", "tokens"),
    ("suspended", "paused"),
];

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PacingLabels {
    /// `tenant/model`, sanitized and bounded.
    pub bucket: String,
    /// `admitted` or `suspended`.
    pub result: &'static str,
    /// `none`, `requests`, `tokens` or `paused`.
    pub limited_by: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ModelLabels {
    pub model: String,
}

/// One series of `M` per model (the label bounded by `max_models`).
pub type PerModel<M> = Family<ModelLabels, M>;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TenantTokenLabels {
    /// Sanitized and bounded (the bucket bound).
    pub tenant: String,
    /// Sanitized and bounded.
    pub model: String,
    /// `prompt`, `completion` or `cached` (cached is part of prompt).
    pub kind: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OutcomeLabels {
    pub outcome: &'static str,
}

// The fixed label vocabularies are declared here, beside the series they
// label, so that this file needs nothing of the crate but its keys and usage
// types: every part records metrics, and none is recorded into.

/// Why a write was refused (the `reason` label of the refusal metric).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    MissingToken,
    WrongToken,
    WritesDisabled,
}

impl Refusal {
    pub const ALL: [Refusal; 3] = [
        Refusal::MissingToken,
        Refusal::WrongToken,
        Refusal::WritesDisabled,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Refusal::MissingToken => "missing_token",
            Refusal::WrongToken => "wrong_token",
            Refusal::WritesDisabled => "writes_disabled",
        }
    }
}

/// What became of a request's pacing estimate (metric label).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Correction {
    /// The debt moved by real − estimated.
    Corrected,
    /// Real = estimated, or nothing to move (tokens unpaced, bucket paused,
    /// an empty bucket owed a refund).
    Unchanged,
    /// The answer carried no usage (broken stream, cancel, backend error,
    /// or a complete answer of a model without a known tokenizer): the
    /// estimate stays. (A complete answer without usage is counted with
    /// the model's tokenizer and corrected.)
    NoUsage,
    /// Redis refused the correction: the estimate stays.
    Failed,
}

impl Correction {
    pub const ALL: [Correction; 4] = [
        Correction::Corrected,
        Correction::Unchanged,
        Correction::NoUsage,
        Correction::Failed,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Correction::Corrected => "corrected",
            Correction::Unchanged => "unchanged",
            Correction::NoUsage => "no_usage",
            Correction::Failed => "failed",
        }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ChangeLabels {
    pub model: String,
    /// A [`crate::sharing::controller::Reason`].
    pub reason: &'static str,
}

/// The controllers' metrics (prefix `sluice_consumer_controller_`).
#[derive(Debug, Default)]
pub struct ControlMetrics {
    /// The shared limit of each model (the override when one is set).
    pub limit: PerModel<Gauge<f64, AtomicU64>>,
    /// This instance's in-flight cap for the model (its share of the limit).
    pub instance_cap: PerModel<Gauge>,
    /// Changes of the limit, by reason.
    pub changes: Family<ChangeLabels, Counter>,
    /// Overload answers (429 / 503) from the model seen by this instance.
    pub overload_answers: PerModel<Counter>,
    /// Requests waiting at the model server at the last sample.
    pub server_waiting: PerModel<Gauge<f64, AtomicU64>>,
    /// The consumers' calls in flight to the model, every instance
    /// together, as the stepper counted them at the last sample.
    pub own_in_flight: PerModel<Gauge<f64, AtomicU64>>,
    /// Requests at the model server that are not the consumers' calls
    /// (in-quota traffic, other clients) at the last sample.
    pub server_foreign: PerModel<Gauge<f64, AtomicU64>>,
}

impl ControlMetrics {
    /// The controllers' metrics, registered in `registry`.
    pub fn registered(registry: &mut Registry) -> Self {
        ControlMetrics {
            limit: register(
                registry,
                "controller_limit",
                "Admitted concurrency of the model over all consumer instances",
                Family::default(),
            ),
            instance_cap: register(
                registry,
                "controller_instance_cap",
                "This instance's in-flight cap for the model (its share of the limit)",
                Family::default(),
            ),
            changes: register(
                registry,
                "controller_changes",
                "Changes of the model's limit, by reason",
                Family::default(),
            ),
            overload_answers: register(
                registry,
                "controller_overload_answers",
                "429 / 503 answers of the model seen by this instance",
                Family::default(),
            ),
            server_waiting: register(
                registry,
                "controller_server_waiting",
                "Requests waiting at the model server at the last sample",
                Family::default(),
            ),
            own_in_flight: register(
                registry,
                "controller_own_in_flight",
                "The consumers' calls in flight to the model, all instances, at the last sample",
                Family::default(),
            ),
            server_foreign: register(
                registry,
                "controller_server_foreign",
                "Requests at the model server that are not the consumers' calls (in-quota traffic) at the last sample",
                Family::default(),
            ),
        }
    }
}

/// The consumer group's buckets as this instance sees them.
#[derive(Debug)]
pub struct GroupMetrics {
    /// Buckets this instance owns and is subscribed to.
    pub buckets_owned: Gauge,
    /// Live instances of the consumer group, as this instance last saw them.
    pub members: Gauge,
    /// Idle buckets this instance retired (unsubscribed, removed from the set).
    pub buckets_retired: Counter,
    /// Retired buckets whose queue this instance deleted at the broker.
    pub buckets_reclaimed: Counter,
}

impl GroupMetrics {
    fn registered(registry: &mut Registry) -> Self {
        GroupMetrics {
            buckets_owned: register(
                registry,
                "buckets_owned",
                "Buckets (LiteTopics) this instance owns and is subscribed to",
                Gauge::default(),
            ),
            members: register(
                registry,
                "group_members",
                "Live consumer instances in the group, as last seen",
                Gauge::default(),
            ),
            buckets_retired: register(
                registry,
                "buckets_retired",
                "Idle buckets retired (unsubscribed and removed from the bucket set)",
                Counter::default(),
            ),
            buckets_reclaimed: register(
                registry,
                "buckets_reclaimed",
                "Retired buckets whose queue (LMQ consume-queue files) was deleted at the broker",
                Counter::default(),
            ),
        }
    }
}

/// All metrics of the consumer, registered once; cheap to update from any task.
#[derive(Debug)]
pub struct Metrics {
    pub registry: Registry,
    buckets: LabelLimiter,
    models: LabelLimiter,
    tenants: LabelLimiter,
    /// Pacing decisions per bucket.
    pub pacing_decisions: Family<PacingLabels, Counter>,
    /// Waits returned by the pacer, per model.
    pub pacing_wait_seconds: PerModel<Histogram>,
    /// Backend calls in flight, per model.
    pub in_flight: PerModel<Gauge>,
    /// Try-acquire refusals of the in-flight cap, per model.
    pub in_flight_refused: PerModel<Counter>,
    /// Time from enqueue to the start of the backend call, per model.
    pub queue_wait_seconds: PerModel<Histogram>,
    /// Time from the start of the call to the first chunk written, per model.
    pub first_chunk_seconds: PerModel<Histogram>,
    /// Round trip of one chunk write (XADD pipeline).
    pub chunk_write_seconds: Histogram,
    /// Chunks written, per model.
    pub chunks: PerModel<Counter>,
    /// Calls aborted because the client cancelled.
    pub cancels: Counter,
    /// Claims given back because fewer than `claim_replicas` replicas
    /// acknowledged them in time.
    pub claims_unreplicated: Counter,
    /// Errors by kind (see [`crate::call::invoke::FailureKind::as_str`]).
    pub errors: Family<KindLabels, Counter>,
    /// Outcomes (see [`crate::Outcome::as_str`]).
    pub outcomes: Family<OutcomeLabels, Counter>,
    /// The consumer group's buckets as this instance sees them.
    pub group: GroupMetrics,
    /// LiteTopic → bucket label, to drop a bucket's series when it goes.
    bucket_topics: Mutex<HashMap<String, String>>,
    /// Time a popped message waited in this consumer for its bucket's slot.
    pub hold_seconds: Histogram,
    /// Held messages handed back to their LiteTopic at shutdown.
    pub handed_back: Counter,
    /// Admin writes refused, by reason (see [`Refusal`]).
    pub admin_refused: Family<ReasonLabels, Counter>,
    /// Tokens the model reported per tenant, model and kind (deferred path).
    pub tenant_tokens: Family<TenantTokenLabels, Counter>,
    /// What became of each call's pacing estimate (see
    /// [`Correction`]).
    pub pacing_corrections: Family<ResultLabels, Counter>,
    /// The adaptive controllers' and fair sharing's metrics.
    pub control: ControlMetrics,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new(1000, 100)
    }
}

impl Metrics {
    /// `max_buckets` / `max_models`: distinct bucket / model label values
    /// before `other`.
    // Long because it is a list: one registration per series, in the
    // struct's order, so that each name and help text is checked against
    // its field at a glance; split, it would only be harder to read.
    pub fn new(max_buckets: usize, max_models: usize) -> Self {
        let mut registry = Registry::with_prefix("sluice_consumer");
        // `sluice_consumer_build_info{version="…"} 1`.
        register_build_info(&mut registry, env!("CARGO_PKG_VERSION"));
        let metrics = Metrics {
            pacing_decisions: register(
                &mut registry,
                "pacing_decisions",
                "Pacing decisions per bucket (tenant/model)",
                Family::default(),
            ),
            pacing_wait_seconds: register(
                &mut registry,
                "pacing_wait_seconds",
                "Wait returned by the pacer before a bucket's next slot",
                Family::new_with_constructor(wait_histogram as fn() -> _),
            ),
            in_flight: register(
                &mut registry,
                "in_flight",
                "Backend calls in flight per model",
                Family::default(),
            ),
            in_flight_refused: register(
                &mut registry,
                "in_flight_refused",
                "Messages held back because the model's in-flight cap was reached",
                Family::default(),
            ),
            queue_wait_seconds: register(
                &mut registry,
                "queue_wait_seconds",
                "Time from enqueue to the start of the backend call",
                Family::new_with_constructor(wait_histogram as fn() -> _),
            ),
            first_chunk_seconds: register(
                &mut registry,
                "first_chunk_seconds",
                "Time from the start of the backend call to the first chunk written",
                Family::new_with_constructor(latency_histogram as fn() -> _),
            ),
            chunk_write_seconds: register(
                &mut registry,
                "chunk_write_seconds",
                "Round trip of one chunk write to the response stream",
                Histogram::new(exponential_buckets(0.0001, 2.0, 16)),
            ),
            chunks: register(
                &mut registry,
                "chunks",
                "Chunks written to response streams",
                Family::default(),
            ),
            cancels: register(
                &mut registry,
                "cancels",
                "Backend calls aborted because the client went away",
                Counter::default(),
            ),
            claims_unreplicated: register(
                &mut registry,
                "claims_unreplicated",
                "Claims given back because too few replicas acknowledged them in time",
                Counter::default(),
            ),
            errors: register(
                &mut registry,
                "errors",
                "Errors by kind",
                Family::default(),
            ),
            outcomes: register(
                &mut registry,
                "outcomes",
                "Outcomes of processed messages",
                Family::default(),
            ),
            group: GroupMetrics::registered(&mut registry),
            hold_seconds: register(
                &mut registry,
                "hold_seconds",
                "Time a popped message waited in the consumer for its bucket's slot",
                Histogram::new(exponential_buckets(0.001, 2.0, 18)),
            ),
            handed_back: register(
                &mut registry,
                "handed_back",
                "Held messages published back to their LiteTopic at shutdown",
                Counter::default(),
            ),
            admin_refused: register(
                &mut registry,
                "admin_refused",
                "Admin API writes refused (missing_token, wrong_token, writes_disabled)",
                Family::default(),
            ),
            tenant_tokens: register(
                &mut registry,
                "tenant_tokens",
                "Tokens the model reported for deferred requests, per tenant, model and kind (prompt, completion, cached; cached is part of prompt)",
                Family::default(),
            ),
            pacing_corrections: register(
                &mut registry,
                "pacing_corrections",
                "Token pacing debt after a call: corrected to the real usage, unchanged, no_usage (estimate kept), failed",
                Family::default(),
            ),
            control: ControlMetrics::registered(&mut registry),
            registry,
            buckets: LabelLimiter::new(max_buckets),
            models: LabelLimiter::new(max_models),
            tenants: LabelLimiter::new(max_buckets),
            bucket_topics: Mutex::new(HashMap::new()),
        };
        // Every reason from the start, so alerts see 0 rather than nothing.
        for refusal in Refusal::ALL {
            let _ = metrics.admin_refused.get_or_create(&ReasonLabels {
                reason: refusal.as_str(),
            });
        }
        for correction in Correction::ALL {
            let _ = metrics.pacing_corrections.get_or_create(&ResultLabels {
                result: correction.as_str(),
            });
        }
        metrics
    }

    /// Bounded bucket label of a sanitized `tenant/model`.
    pub fn bucket_label(&self, bucket: &str) -> String {
        self.buckets.label(bucket)
    }

    /// Notes which bucket `lite_topic` is (called per popped message), so
    /// that [`Metrics::forget_bucket`] can find its series.
    pub fn remember_bucket(&self, lite_topic: &str, tenant: &str, model: &str) {
        let Ok(mut topics) = self.bucket_topics.lock() else {
            return;
        };
        if !topics.contains_key(lite_topic) {
            let label = crate::keys::BucketId::new(tenant, model).label();
            topics.insert(lite_topic.to_string(), label);
        }
    }

    /// Drops the per-bucket series of `lite_topic` (retired, or handed to
    /// another instance) and frees its label slot; series counted under
    /// `other` stay. Returns how many series were removed.
    pub fn forget_bucket(&self, lite_topic: &str) -> usize {
        let label = match self.bucket_topics.lock() {
            Ok(mut topics) => topics.remove(lite_topic),
            Err(_) => None,
        };
        let Some(bucket) = label else {
            return 0;
        };
        if !self.buckets.forget(&bucket) {
            return 0;
        }
        PACING_OUTCOMES
            .iter()
            .filter(|&&(result, limited_by)| {
                self.pacing_decisions.remove(&PacingLabels {
                    bucket: bucket.clone(),
                    result,
                    limited_by,
                })
            })
            .count()
    }

    /// Bounded model label (sanitizes the name).
    pub fn model_label(&self, model: &str) -> ModelLabels {
        ModelLabels {
            model: self.models.label(&crate::keys::sanitize(model)),
        }
    }

    /// Counts one answer's usage under its tenant and model (labels
    /// sanitized; tenants bounded like buckets, models like models).
    pub fn tenant_usage(&self, tenant: &str, model: &str, usage: &sluice_openai::Usage) {
        let tenant = self.tenants.label(&crate::keys::sanitize(tenant));
        let model = self.model_label(model).model;
        for (kind, tokens) in [
            ("prompt", usage.prompt_tokens),
            ("completion", usage.completion_tokens),
            ("cached", usage.cached_tokens),
        ] {
            self.tenant_tokens
                .get_or_create(&TenantTokenLabels {
                    tenant: tenant.clone(),
                    model: model.clone(),
                    kind,
                })
                .inc_by(tokens);
        }
    }

    pub fn pacing_correction(&self, result: &'static str) {
        self.pacing_corrections
            .get_or_create(&ResultLabels { result })
            .inc();
    }

    pub fn error(&self, kind: &'static str) {
        self.errors.get_or_create(&KindLabels { kind }).inc();
    }

    pub fn outcome(&self, outcome: &'static str) {
        self.outcomes
            .get_or_create(&OutcomeLabels { outcome })
            .inc();
    }

    /// The OpenMetrics text of every metric.
    pub fn encode(&self) -> String {
        encode(&self.registry)
    }
}

fn wait_histogram() -> Histogram {
    // 1 ms .. ~65 s
    Histogram::new(exponential_buckets(0.001, 2.0, 17))
}

fn latency_histogram() -> Histogram {
    // 5 ms .. ~80 s
    Histogram::new(exponential_buckets(0.005, 2.0, 15))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tenant_usage_is_counted_per_kind_with_bounded_tenants() {
        let metrics = Metrics::new(1, 10);
        let usage = sluice_openai::Usage {
            prompt_tokens: 11,
            completion_tokens: 30,
            cached_tokens: 8,
        };
        metrics.tenant_usage("acme", "gpt-4o", &usage);
        metrics.tenant_usage("acme", "gpt-4o", &usage);
        metrics.tenant_usage("zeta co", "gpt-4o", &usage);
        let text = metrics.encode();
        for (tenant, kind, value) in [
            ("acme", "prompt", 22),
            ("acme", "completion", 60),
            ("acme", "cached", 16),
            ("other", "completion", 30),
        ] {
            let line = format!(
                "sluice_consumer_tenant_tokens_total{{tenant=\"{tenant}\",model=\"gpt-4o\",kind=\"{kind}\"}} {value}"
            );
            assert!(text.contains(&line), "{line} not in\n{text}");
        }
        assert!(text.contains("sluice_consumer_pacing_corrections_total{result=\"no_usage\"} 0"));
    }

    #[test]
    fn label_limiter_bounds_cardinality() {
        let limiter = LabelLimiter::new(2);
        assert_eq!(limiter.label("a"), "a");
        assert_eq!(limiter.label("b"), "b");
        assert_eq!(limiter.label("c"), OTHER);
        assert_eq!(limiter.label("a"), "a");
    }

    #[test]
    fn a_forgotten_bucket_loses_its_series_and_its_label_slot() {
        let metrics = Metrics::new(1, 1);
        let record = |bucket: &str, result, limited_by| {
            metrics
                .pacing_decisions
                .get_or_create(&PacingLabels {
                    bucket: metrics.bucket_label(bucket),
                    result,
                    limited_by,
                })
                .inc();
        };
        metrics.remember_bucket("acme_gpt-4o", "acme", "gpt-4o");
        metrics.remember_bucket("zeta_gpt-4o", "zeta", "gpt-4o");
        record("acme/gpt-4o", "admitted", "none");
        record("acme/gpt-4o", "suspended", "requests");
        // Beyond the bound: counted under `other`, which forgetting keeps.
        record("zeta/gpt-4o", "admitted", "none");
        assert!(metrics.encode().contains("bucket=\"acme/gpt-4o\""));
        assert_eq!(metrics.forget_bucket("zeta_gpt-4o"), 0);
        assert_eq!(metrics.forget_bucket("acme_gpt-4o"), 2);
        let text = metrics.encode();
        assert!(!text.contains("acme/gpt-4o"), "{text}");
        assert!(text.contains("bucket=\"other\""), "{text}");
        // Forgotten twice: nothing left to drop.
        assert_eq!(metrics.forget_bucket("acme_gpt-4o"), 0);
        // Its slot is free for the next bucket.
        assert_eq!(metrics.bucket_label("zeta/gpt-4o"), "zeta/gpt-4o");
    }

    #[test]
    fn encodes() {
        let metrics = Metrics::new(1, 1);
        metrics.error("backend_status");
        metrics.outcome("completed");
        metrics
            .in_flight
            .get_or_create(&metrics.model_label("m{1}"))
            .inc();
        metrics
            .in_flight
            .get_or_create(&metrics.model_label("other-model"))
            .inc();
        let text = metrics.encode();
        assert!(text.contains("sluice_consumer_errors_total{kind=\"backend_status\"} 1"));
        assert!(text.contains("sluice_consumer_in_flight{model=\"m%7B1%7D\"} 1"));
        assert!(text.contains("sluice_consumer_in_flight{model=\"other\"} 1"));
        let build = format!(
            "sluice_consumer_build_info{{version=\"{}\"}} 1",
            env!("CARGO_PKG_VERSION")
        );
        assert!(text.contains(&build), "{text}");
    }
}
