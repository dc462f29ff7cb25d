//! Prometheus metrics of the rate-limit service.

use prometheus_client::encoding::{EncodeLabelSet, EncodeMetric, MetricEncoder};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::metrics::{MetricType, TypedMetric};
use prometheus_client::registry::Registry;
use sluice_runtime::metrics::{register, register_build_info};
pub use sluice_runtime::metrics::{ReasonLabels, ResultLabels};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DecisionLabels {
    pub domain: String,
    pub code: &'static str,
}

/// A decision's overall answer, the `code` label of `decisions`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DecisionCode {
    Ok,
    OverLimit,
    Invalid,
    Error,
}

impl DecisionCode {
    const ALL: usize = 4;

    pub fn label(self) -> &'static str {
        match self {
            DecisionCode::Ok => "ok",
            DecisionCode::OverLimit => "over_limit",
            DecisionCode::Invalid => "invalid",
            DecisionCode::Error => "error",
        }
    }
}

/// `decisions`, counted without the family's look-up on every decision (it
/// takes a lock every worker shares and wants the domain as an owned
/// label): each domain's handles are kept in a copy-on-write map, added on
/// the domain's first decision, and each code's counter is made on its
/// first use (so `/metrics` lists the same series as before). Only
/// configured domains and "unknown" are ever added: the map stays as small
/// as the config.
pub struct DecisionCounts {
    family: Family<DecisionLabels, Counter>,
    domains: arc_swap::ArcSwap<HashMap<String, Arc<DomainCounts>>>,
    adding: Mutex<()>,
}

#[derive(Default)]
struct DomainCounts {
    by_code: [OnceLock<Counter>; DecisionCode::ALL],
}

impl DecisionCounts {
    fn new(family: Family<DecisionLabels, Counter>) -> Self {
        DecisionCounts {
            family,
            domains: Default::default(),
            adding: Mutex::new(()),
        }
    }

    /// Counts one decision of `domain` answered `code`.
    pub fn inc(&self, domain: &str, code: DecisionCode) {
        if let Some(counts) = self.domains.load().get(domain) {
            self.counter(counts, domain, code).inc();
            return;
        }
        let counts = self.add(domain);
        self.counter(&counts, domain, code).inc();
    }

    fn counter<'a>(
        &self,
        counts: &'a DomainCounts,
        domain: &str,
        code: DecisionCode,
    ) -> &'a Counter {
        counts.by_code[code as usize].get_or_init(|| {
            self.family
                .get_or_create(&DecisionLabels {
                    domain: domain.to_string(),
                    code: code.label(),
                })
                .clone()
        })
    }

    /// The domain's handles, added to the map if not there yet.
    fn add(&self, domain: &str) -> Arc<DomainCounts> {
        let _adding = self.adding.lock().unwrap_or_else(PoisonError::into_inner);
        let domains = self.domains.load_full();
        if let Some(counts) = domains.get(domain) {
            return counts.clone();
        }
        let counts = Arc::new(DomainCounts::default());
        let mut next = (*domains).clone();
        next.insert(domain.to_string(), counts.clone());
        self.domains.store(Arc::new(next));
        counts
    }
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

/// Counters of one limit, cloned out of their families once.
#[derive(Clone, Debug)]
pub struct LimitCounters {
    pub hits: Counter,
    pub over_limit: Counter,
    pub shadow_mode_hits: Counter,
}

/// The saturation router's metrics (saturation-aware admission): cloned
/// handles of the registered ones, or unregistered in tests.
#[derive(Clone, Debug, Default)]
pub struct SaturationMetrics {
    /// Models whose saturation is tracked now.
    pub models: Gauge,
    /// Models dropped (`idle`) or never tracked (`refused`).
    pub dropped: Family<ReasonLabels, Counter>,
    /// Background reads (one round trip each) by result (`ok`, `failed`).
    pub reads: Family<ResultLabels, Counter>,
}

impl SaturationMetrics {
    pub fn dropped(&self, reason: &'static str) -> Counter {
        self.dropped.get_or_create(&ReasonLabels { reason }).clone()
    }

    pub fn read(&self, result: &'static str) -> Counter {
        self.reads.get_or_create(&ResultLabels { result }).clone()
    }

    fn register(registry: &mut Registry) -> Self {
        SaturationMetrics {
            models: register(
                registry,
                "saturation_models",
                "Models whose saturation state sluice-rls tracks (at most --saturation-max-models)",
                Gauge::default(),
            ),
            dropped: register(
                registry,
                "saturation_models_dropped",
                "Models left out of the saturation snapshot: idle (not asked for a minute) or refused (the snapshot full of models asked recently; routed straight to the server)",
                Family::default(),
            ),
            reads: register(
                registry,
                "saturation_reads",
                "Background reads of the tracked models' saturation state (one pipelined round trip each), by result (ok, failed)",
                Family::default(),
            ),
        }
    }
}

/// All metrics, registered once; cheap to update from any task.
pub struct Metrics {
    pub registry: Registry,
    pub decisions: Family<DecisionLabels, Counter>,
    /// `decisions`, as the limiter counts them.
    pub decision_counts: DecisionCounts,
    pub decision_seconds: Histogram,
    pub hits: Family<LimitLabels, Counter>,
    pub over_limit: Family<LimitLabels, Counter>,
    pub shadow_mode_hits: Family<LimitLabels, Counter>,
    pub global_shadow_mode: Counter,
    pub local_cache_answers: Counter,
    /// In-quota requests routed into the fair queue because their model's
    /// server was saturated (saturation-aware admission).
    pub in_quota_queued: Counter,
    pub saturation: SaturationMetrics,
    pub detailed: Family<DetailedLabels, Counter>,
    pub store_errors: Family<StoreLabels, Counter>,
    pub cross_slot_decisions: Counter,
    pub redis_decisions_per_call: Histogram,
    pub config_reloads: Family<ResultLabels, Counter>,
    pub config_limits: Gauge,
    pub ext_authz_events: Family<EventLabels, Counter>,
    pub ext_authz_prompt_tokens: Counter,
    pub counter_writes_refused: Family<ReasonLabels, Counter>,
    pub requests_refused: Family<ReasonLabels, Counter>,
    /// envoyproxy/ratelimit's per-descriptor stats (`--upstream-metrics`).
    pub upstream: Option<UpstreamStats>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// Long on purpose: one registration per metric, in the order
    /// `/metrics` lists them, reads as the metric table; split up it would
    /// only scatter that table.
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("sluice_rls");
        // `sluice_rls_build_info{version="…"} 1`.
        register_build_info(&mut registry, env!("CARGO_PKG_VERSION"));
        let decisions: Family<DecisionLabels, Counter> = register(
            &mut registry,
            "decisions",
            "ShouldRateLimit answers by domain and overall code (ok, over_limit, error)",
            Family::default(),
        );
        Metrics {
            decision_counts: DecisionCounts::new(decisions.clone()),
            decisions,
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
            in_quota_queued: register(
                &mut registry,
                "in_quota_queued",
                "In-quota requests answered OK with route=queue: their model's server was saturated with deferred work, or their bucket was over quota lately",
                Counter::default(),
            ),
            saturation: SaturationMetrics::register(&mut registry),
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
            // 1 .. 128: one decision per call when quiet, up to the
            // --redis-max-decisions-per-call cap under load.
            redis_decisions_per_call: register(
                &mut registry,
                "redis_decisions_per_call",
                "Decisions carried by each Redis script call (decisions that arrive together share one)",
                Histogram::new(exponential_buckets(1.0, 2.0, 8)),
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
            upstream: None,
        }
    }

    /// The same metrics, with upstream's per-descriptor stats when `options`
    /// asks for them.
    pub fn with_upstream_stats(mut self, options: UpstreamStatsOptions) -> Self {
        self.upstream = options
            .enabled
            .then(|| UpstreamStats::new(options.near_limit_ratio));
        self
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

    /// The text exposition format: Sluice's metrics, then upstream's names
    /// (unprefixed, from their own registry) when on.
    pub fn encode(&self) -> String {
        use prometheus_client::encoding::text::{encode_eof, encode_registry};
        let mut text = String::new();
        // Writing into a String cannot fail.
        let _ = encode_registry(&mut text, &self.registry);
        if let Some(upstream) = &self.upstream {
            let _ = encode_registry(&mut text, &upstream.registry);
        }
        let _ = encode_eof(&mut text);
        text
    }
}

/// The `--upstream-metrics` flags, flattened into sluice-rls's command line.
#[derive(Clone, Debug, clap::Args)]
pub struct UpstreamStatsArgs {
    /// Also export envoyproxy/ratelimit's per-descriptor stats (total_hits,
    /// within_limit, near_limit, over_limit, shadow_mode) under the Prometheus
    /// names of its default statsd-exporter mapping, for its dashboards and alerts.
    #[arg(long, env = "SLUICE_RLS_UPSTREAM_METRICS")]
    pub upstream_metrics: bool,

    /// Share of a limit past which hits count as near_limit (NEAR_LIMIT_RATIO).
    #[arg(long, env = "SLUICE_RLS_NEAR_LIMIT_RATIO", default_value_t = 0.8)]
    pub near_limit_ratio: f32,
}

impl UpstreamStatsArgs {
    pub fn options(&self) -> UpstreamStatsOptions {
        UpstreamStatsOptions {
            enabled: self.upstream_metrics,
            near_limit_ratio: self.near_limit_ratio,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct UpstreamStatsOptions {
    pub enabled: bool,
    pub near_limit_ratio: f32,
}

/// A counter exposed under its bare name: statsd_exporter's counters have no
/// `_total` suffix, and upstream's dashboards query the bare name. Typed
/// `unknown`, under which OpenMetrics allows a sample named as its family.
#[derive(Clone, Debug, Default)]
pub struct BareCounter(Counter);

impl BareCounter {
    pub fn inc_by(&self, value: u64) {
        self.0.inc_by(value);
    }

    pub fn get(&self) -> u64 {
        self.0.get()
    }
}

impl TypedMetric for BareCounter {
    const TYPE: MetricType = MetricType::Unknown;
}

impl EncodeMetric for BareCounter {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        encoder.encode_gauge(&self.0.get())
    }

    fn metric_type(&self) -> MetricType {
        Self::TYPE
    }
}

/// Labels of upstream's stats as its default mapping sets them: `domain`,
/// `key1`, and `key2` for deeper descriptors.
pub type UpstreamLabels = Vec<(&'static str, String)>;

/// envoyproxy/ratelimit's per-descriptor stats (`src/stats/manager_impl.go`:
/// `ratelimit.service.rate_limit.<stats key>.<stat>`) under the Prometheus
/// names and labels its default statsd-exporter mapping
/// (`src/stats/prom/default_mapper.yaml`) gives them.
pub struct UpstreamStats {
    registry: Registry,
    near_limit_ratio: f32,
    families: PerStat<Family<UpstreamLabels, BareCounter>>,
}

/// Something per stat of upstream's five: their families (labelled by
/// stats key), or one limit's counters.
#[derive(Clone, Debug)]
pub struct PerStat<T> {
    total_hits: T,
    within_limit: T,
    near_limit: T,
    over_limit: T,
    shadow_mode: T,
}

impl<T> PerStat<T> {
    fn map<U>(&self, f: impl Fn(&T) -> U) -> PerStat<U> {
        PerStat {
            total_hits: f(&self.total_hits),
            within_limit: f(&self.within_limit),
            near_limit: f(&self.near_limit),
            over_limit: f(&self.over_limit),
            shadow_mode: f(&self.shadow_mode),
        }
    }
}

/// One limit's upstream stats, cloned out of their families once.
pub type UpstreamCounters = PerStat<BareCounter>;

/// One descriptor's decision as upstream's stats read it.
#[derive(Clone, Copy, Debug)]
pub struct UpstreamHit {
    pub hits: u64,
    /// The counter before the decision.
    pub before: u64,
    pub limit: u64,
    pub shadow_mode: bool,
}

impl UpstreamStats {
    fn new(near_limit_ratio: f32) -> Self {
        let mut registry = Registry::default();
        let mut family = |name: &str, help: &str| {
            let family = Family::<UpstreamLabels, BareCounter>::default();
            registry.register(name, help, family.clone());
            family
        };
        let families = PerStat {
            total_hits: family(
                "ratelimit_service_rate_limit_total_hits",
                "Hits of each descriptor (envoyproxy/ratelimit's total_hits)",
            ),
            within_limit: family(
                "ratelimit_service_rate_limit_within_limit",
                "Hits within the limit (envoyproxy/ratelimit's within_limit)",
            ),
            near_limit: family(
                "ratelimit_service_rate_limit_near_limit",
                "Hits past NEAR_LIMIT_RATIO of the limit, over included (envoyproxy/ratelimit's near_limit)",
            ),
            over_limit: family(
                "ratelimit_service_rate_limit_over_limit",
                "Hits over the limit (envoyproxy/ratelimit's over_limit)",
            ),
            shadow_mode: family(
                "ratelimit_service_rate_limit_shadow_mode",
                "Hits over a shadow-mode limit (envoyproxy/ratelimit's shadow_mode)",
            ),
        };
        UpstreamStats {
            registry,
            near_limit_ratio,
            families,
        }
    }

    /// Handles for the limit with upstream stats key `stats_key`.
    pub fn counters(&self, stats_key: &str) -> UpstreamCounters {
        let labels = upstream_labels(stats_key);
        self.families
            .map(|family| family.get_or_create(&labels).clone())
    }

    /// Counts one descriptor's decision as upstream's `GetResponseDescriptorStatus`
    /// (`src/limiter/base_limiter.go`) does, from the counter before and after it.
    pub fn record(&self, counters: &UpstreamCounters, hit: UpstreamHit) {
        let UpstreamHit {
            hits,
            before,
            limit,
            shadow_mode,
        } = hit;
        let after = before.saturating_add(hits);
        // float32 arithmetic, as upstream's `float32(limit) * nearLimitRatio`.
        let near = (limit as f32 * self.near_limit_ratio).floor() as u64;
        counters.total_hits.inc_by(hits);
        if after > limit {
            // Past the limit: the hits beyond it are over; those between the
            // near threshold and the limit were near (checkOverLimitThreshold).
            if before >= limit {
                counters.over_limit.inc_by(hits);
            } else {
                counters.over_limit.inc_by(after - limit);
                counters.near_limit.inc_by(limit - near.max(before));
            }
            if shadow_mode {
                counters
                    .shadow_mode
                    .inc_by(if before >= limit { hits } else { after - limit });
            }
        } else {
            if after > near {
                counters
                    .near_limit
                    .inc_by(if before >= near { hits } else { after - near });
            }
            counters.within_limit.inc_by(hits);
        }
    }
}

/// The labels upstream's default mapping reads off
/// `ratelimit.service.rate_limit.<stats key>.<stat>`: the stats key,
/// sanitized as upstream's `SanitizeStatName`, split at dots; `domain` and
/// `key1`, plus `key2` when there are more parts (the rest is dropped, so
/// deeper descriptors sharing the first two levels share a series, as there).
pub fn upstream_labels(stats_key: &str) -> UpstreamLabels {
    let sanitized = sanitize_stat_name(stats_key);
    let mut parts = sanitized.split('.');
    let mut labels = vec![
        ("domain", parts.next().unwrap_or_default().to_string()),
        ("key1", parts.next().unwrap_or_default().to_string()),
    ];
    if let Some(key2) = parts.next() {
        labels.push(("key2", key2.to_string()));
    }
    labels
}

/// upstream's `SanitizeStatName`: `:` and `|` become `_`, and so do the dots
/// of anything shaped like an IPv4 address.
fn sanitize_stat_name(name: &str) -> String {
    let replaced = name.replace([':', '|'], "_");
    let mut out = String::with_capacity(replaced.len());
    let bytes = replaced.as_bytes();
    let mut at = 0;
    while at < bytes.len() {
        match ipv4_at(bytes, at) {
            Some(end) => {
                out.push_str(&replaced[at..end].replace('.', "_"));
                at = end;
            }
            None => {
                let next = replaced[at..].chars().next().map_or(1, char::len_utf8);
                out.push_str(&replaced[at..at + next]);
                at += next;
            }
        }
    }
    out
}

/// The end of the IPv4-shaped run (`\d{1,3}(\.\d{1,3}){3}`, upstream's
/// `ipv4Regex`, leftmost first) starting at `start`, if one does.
fn ipv4_at(bytes: &[u8], start: usize) -> Option<usize> {
    let mut at = start;
    for part in 0..4 {
        if part > 0 {
            if bytes.get(at) != Some(&b'.') {
                return None;
            }
            at += 1;
        }
        let digits = bytes[at.min(bytes.len())..]
            .iter()
            .take(3)
            .take_while(|b| b.is_ascii_digit())
            .count();
        if digits == 0 {
            return None;
        }
        at += digits;
    }
    Some(at)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stats() -> (UpstreamStats, UpstreamCounters) {
        let stats = UpstreamStats::new(0.8);
        let counters = stats.counters("rl.foo_bar");
        (stats, counters)
    }

    fn hit(hits: u64, before: u64) -> UpstreamHit {
        UpstreamHit {
            hits,
            before,
            limit: 10,
            shadow_mode: false,
        }
    }

    /// Each (domain, code) series counts its own decisions, and appears in
    /// `/metrics` only once it has counted one (as the family's look-up
    /// did).
    #[test]
    fn decision_counts_are_per_domain_and_code_and_appear_on_first_use() {
        let metrics = Metrics::new();
        let counts = &metrics.decision_counts;
        counts.inc("llm", DecisionCode::Ok);
        counts.inc("llm", DecisionCode::Ok);
        counts.inc("llm", DecisionCode::OverLimit);
        counts.inc("unknown", DecisionCode::Invalid);
        let text = metrics.encode();
        for series in [
            r#"sluice_rls_decisions_total{domain="llm",code="ok"} 2"#,
            r#"sluice_rls_decisions_total{domain="llm",code="over_limit"} 1"#,
            r#"sluice_rls_decisions_total{domain="unknown",code="invalid"} 1"#,
        ] {
            assert!(text.contains(series), "{series} missing from:\n{text}");
        }
        assert!(!text.contains(r#"domain="llm",code="error""#), "{text}");
        assert!(!text.contains(r#"domain="unknown",code="ok""#), "{text}");
    }

    #[test]
    fn the_build_is_named() {
        let text = Metrics::new().encode();
        let build = format!(
            "sluice_rls_build_info{{version=\"{}\"}} 1",
            env!("CARGO_PKG_VERSION")
        );
        assert!(text.contains(&build), "{text}");
    }

    /// upstream's arithmetic (base_limiter.go), worked by hand: limit 10,
    /// ratio 0.8, so near from 8.
    #[test]
    fn counts_as_upstreams_base_limiter() {
        let (stats, c) = stats();
        stats.record(&c, hit(1, 4)); // 5: within
        assert_eq!((c.within_limit.get(), c.near_limit.get()), (1, 0));
        stats.record(&c, hit(3, 6)); // 9: 1 near (8 → 9), within
        assert_eq!((c.within_limit.get(), c.near_limit.get()), (4, 1));
        stats.record(&c, hit(4, 7)); // 11: 1 over, near 10 − max(8, 7) = 2
        assert_eq!((c.over_limit.get(), c.near_limit.get()), (1, 3));
        stats.record(&c, hit(2, 11)); // all over
        assert_eq!((c.over_limit.get(), c.total_hits.get()), (3, 10));
        assert_eq!(c.within_limit.get(), 4);
        let shadow = UpstreamHit {
            shadow_mode: true,
            ..hit(3, 9)
        };
        stats.record(&c, shadow); // 12: 2 over, shadow 2
        assert_eq!((c.over_limit.get(), c.shadow_mode.get()), (5, 2));
    }

    #[test]
    fn labels_follow_the_default_mapping() {
        let labels = |key: &str| upstream_labels(key);
        assert_eq!(
            labels("rl.foo_bar"),
            [("domain", "rl".into()), ("key1", "foo_bar".into())]
        );
        assert_eq!(
            labels("rl.a_1.b.c_2"),
            [
                ("domain", "rl".into()),
                ("key1", "a_1".into()),
                ("key2", "b".into())
            ]
        );
        assert_eq!(
            labels("rl.remote_address_10.0.0.1:80|x"),
            [
                ("domain", "rl".into()),
                ("key1", "remote_address_10_0_0_1_80_x".into())
            ]
        );
    }
}
