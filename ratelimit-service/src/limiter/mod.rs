//! The decision engine: a `RateLimitRequest` in, a `RateLimitResponse` out,
//! in three steps: a pure `plan` (which counters, with which hits, limits
//! and windows), exactly one store call, a pure `answer` (statuses,
//! headers, Sluice's metadata, metric events).

mod answer;
mod error;
mod options;
mod over_quota;
mod plan;

pub use answer::METADATA_NAMESPACE;
pub use error::DecisionError;
pub use options::{HeaderStyle, ResponseOptions, UpstreamHeaderNames};
pub use over_quota::OverQuotaMemory;
pub use plan::Charge;

use answer::MetricEvent;

use crate::config::{Limit, LimitsConfig};
use crate::metrics::{DecisionCode, DetailedLabels, LimitCounters, Metrics, StoreLabels};
use crate::saturation::SaturationRouter;
use crate::store::{CounterStore, CountingMode, KeyOptions};
use arc_swap::ArcSwap;
use sluice_contract::saturation::Route;
use sluice_proto::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
use sluice_proto::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// Source of "now"; tests use [`ManualClock`] to cross window edges instantly.
pub trait Clock: Send + Sync + 'static {
    fn now_millis(&self) -> u64;
}

pub struct SystemClock;

impl Clock for SystemClock {
    fn now_millis(&self) -> u64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0)
    }
}

/// A clock that only moves when told to.
#[derive(Default)]
pub struct ManualClock(AtomicU64);

impl ManualClock {
    pub fn new(now_millis: u64) -> Self {
        ManualClock(AtomicU64::new(now_millis))
    }
    pub fn set(&self, now_millis: u64) {
        self.0.store(now_millis, Ordering::SeqCst);
    }
    pub fn advance(&self, millis: u64) {
        self.0.fetch_add(millis, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_millis(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }
}

/// The instants a decision is about besides now (Unix milliseconds).
#[derive(Clone, Copy, Debug, Default)]
struct Timing {
    /// A correction's window: when its request was admitted.
    window_at_millis: Option<u64>,
    /// The caller's clock when it asked.
    asked_at_millis: Option<u64>,
    /// An admission (not a correction): an allowed request may be routed
    /// into the fair queue while its model's server is saturated.
    admission: bool,
}

pub struct Limiter {
    config: ArcSwap<LimitsConfig>,
    store: Arc<dyn CounterStore>,
    mode: CountingMode,
    clock: Arc<dyn Clock>,
    metrics: Arc<Metrics>,
    response: ResponseOptions,
    keys: KeyOptions,
    /// Saturation-aware admission, when on.
    routing: Option<Arc<SaturationRouter>>,
    /// In-quota requests of a bucket over quota lately go to the fair
    /// queue, when on.
    over_quota: Option<OverQuotaMemory>,
    /// Serialises config updates (file reloads and xDS), so that neither
    /// loses the other's change.
    updating: std::sync::Mutex<()>,
}

impl Limiter {
    pub fn new(
        config: LimitsConfig,
        store: Arc<dyn CounterStore>,
        mode: CountingMode,
        clock: Arc<dyn Clock>,
        metrics: Arc<Metrics>,
    ) -> Self {
        metrics.config_limits.set(config.limit_count() as i64);
        Limiter {
            config: ArcSwap::from_pointee(config),
            store,
            mode,
            clock,
            metrics,
            response: ResponseOptions::default(),
            keys: KeyOptions::default(),
            routing: None,
            over_quota: None,
            updating: std::sync::Mutex::new(()),
        }
    }

    /// The same limiter with these answer switches.
    pub fn with_response_options(mut self, response: ResponseOptions) -> Self {
        self.response = response;
        self
    }

    /// The same limiter with its counters named and expired as `keys` says.
    pub fn with_key_options(mut self, keys: KeyOptions) -> Self {
        self.keys = keys;
        self
    }

    /// The same limiter routing in-quota requests by their model's
    /// saturation (see [`crate::saturation`]).
    pub fn with_saturation_routing(mut self, router: Arc<SaturationRouter>) -> Self {
        self.routing = Some(router);
        self
    }

    /// The same limiter routing an in-quota request into the fair queue
    /// when one of its deferring buckets was over quota within
    /// `memory_ms` (see [`OverQuotaMemory`]).
    pub fn with_over_quota_routing(mut self, memory_ms: u64) -> Self {
        self.over_quota = Some(OverQuotaMemory::new(memory_ms));
        self
    }

    /// The saturation router, when routing is on.
    pub fn saturation_router(&self) -> Option<&Arc<SaturationRouter>> {
        self.routing.as_ref()
    }

    pub fn response_options(&self) -> &ResponseOptions {
        &self.response
    }

    /// Swap in a new configuration; decisions in flight finish on the old one.
    pub fn replace_config(&self, config: LimitsConfig) {
        self.metrics.config_limits.set(config.limit_count() as i64);
        self.config.store(Arc::new(config));
    }

    /// Build a new config from the running one and swap it in; on error the
    /// running config stays.
    pub fn update_config<E>(
        &self,
        build: impl FnOnce(&LimitsConfig) -> Result<LimitsConfig, E>,
    ) -> Result<Arc<LimitsConfig>, E> {
        // A panic while holding it cannot leave a config half-built: the swap is atomic.
        let _guard = self
            .updating
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let next = Arc::new(build(&self.config.load_full())?);
        self.metrics.config_limits.set(next.limit_count() as i64);
        self.config.store(next.clone());
        Ok(next)
    }

    pub fn config(&self) -> Arc<LimitsConfig> {
        self.config.load_full()
    }

    pub fn store(&self) -> &Arc<dyn CounterStore> {
        &self.store
    }

    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    /// Decide one request, recording metrics.
    pub async fn should_rate_limit(
        &self,
        request: &RateLimitRequest,
    ) -> Result<RateLimitResponse, DecisionError> {
        self.should_rate_limit_with(request, self.mode).await
    }

    /// Apply a charge for usage that already happened (the filter's
    /// reconciliation): counters move even past the limit.
    pub async fn force_charge(
        &self,
        request: &RateLimitRequest,
    ) -> Result<RateLimitResponse, DecisionError> {
        self.charge(request, Charge::Force, None).await
    }

    /// Correct a charge made at admission (the filter's reconciliation, forced
    /// like [`Limiter::force_charge`]) in the window the request was admitted
    /// in: `admitted_at_millis`, or now when unknown. See
    /// [`plan::plan_in_window`] for windows that have closed since.
    pub async fn correct(
        &self,
        request: &RateLimitRequest,
        admitted_at_millis: Option<u64>,
    ) -> Result<RateLimitResponse, DecisionError> {
        let mode = Charge::Force.counting_mode(self.mode);
        let timing = Timing {
            window_at_millis: admitted_at_millis,
            asked_at_millis: None,
            admission: false,
        };
        self.run_decision(request, mode, timing).await
    }

    /// Decide one request as `charge` says (see [`Charge`]). `asked_at_millis`:
    /// the caller's clock when it asked, if it said (Sluice's filter does);
    /// the answer then names the instant it charged at only when that
    /// instant's windows differ (see [`plan::Plan::asked_at_millis`]).
    pub async fn charge(
        &self,
        request: &RateLimitRequest,
        charge: Charge,
        asked_at_millis: Option<u64>,
    ) -> Result<RateLimitResponse, DecisionError> {
        let timing = Timing {
            window_at_millis: None,
            asked_at_millis,
            admission: charge == Charge::Decide,
        };
        self.run_decision(request, charge.counting_mode(self.mode), timing)
            .await
    }

    async fn should_rate_limit_with(
        &self,
        request: &RateLimitRequest,
        mode: CountingMode,
    ) -> Result<RateLimitResponse, DecisionError> {
        let timing = Timing {
            admission: true,
            ..Timing::default()
        };
        self.run_decision(request, mode, timing).await
    }

    async fn run_decision(
        &self,
        request: &RateLimitRequest,
        mode: CountingMode,
        timing: Timing,
    ) -> Result<RateLimitResponse, DecisionError> {
        let started = Instant::now();
        // A guard, not a clone: the config's reference count is shared by
        // every worker's decisions.
        let config = self.config.load();
        let result = self.decide(&config, request, mode, timing).await;
        self.metrics
            .decision_seconds
            .observe(started.elapsed().as_secs_f64());
        let code = match &result {
            Ok(response) if response.overall_code == Code::OverLimit as i32 => {
                DecisionCode::OverLimit
            }
            Ok(_) => DecisionCode::Ok,
            Err(DecisionError::InvalidRequest(_)) => DecisionCode::Invalid,
            Err(DecisionError::Store(error)) => {
                self.metrics
                    .store_errors
                    .get_or_create(&StoreLabels {
                        store: self.store.kind(),
                        kind: if error.is_transient() {
                            "unavailable"
                        } else {
                            "failed"
                        },
                    })
                    .inc();
                DecisionCode::Error
            }
        };
        let domain_label = if config.has_domain(&request.domain) {
            request.domain.as_str()
        } else {
            // Unknown domains come from clients: keep them out of label values.
            "unknown"
        };
        self.metrics.decision_counts.inc(domain_label, code);
        result
    }

    /// Plan, one store round trip, answer.
    async fn decide(
        &self,
        config: &LimitsConfig,
        request: &RateLimitRequest,
        mode: CountingMode,
        timing: Timing,
    ) -> Result<RateLimitResponse, DecisionError> {
        let now = self.clock.now_millis();
        let mut plan = plan::plan_in_window(
            config,
            request,
            mode,
            self.response.global_quota_mode,
            &self.keys.layout,
            (now, timing.window_at_millis.unwrap_or(now)),
        )?;
        plan.asked_at_millis = timing.asked_at_millis;
        for op in &mut plan.ops {
            op.ttl_secs += self.keys.expiration_jitter_secs();
        }
        let outcome = self
            .store
            .apply(crate::store::Batch::new(
                &plan.ops,
                plan.mode,
                plan.now_millis,
            ))
            .await?;
        let answer = answer::answer(request, &plan, &outcome, &self.response);
        self.record(&request.domain, &answer.events);
        let mut response = answer.response;
        if timing.admission {
            let over_lately = self
                .over_quota
                .as_ref()
                .is_some_and(|memory| memory.observe(request, &plan, &response, now));
            if response.overall_code == Code::Ok as i32 {
                self.route_in_quota(request, &plan, &mut response, now, over_lately);
            }
        }
        Ok(response)
    }

    /// Saturation-aware admission: an allowed request whose model's
    /// server is saturated with deferred work, or one of whose deferring
    /// buckets was over quota lately (`over_lately`), is marked for the
    /// fair queue (the request stays charged: it is in quota). From
    /// in-memory state: no I/O here.
    fn route_in_quota(
        &self,
        request: &RateLimitRequest,
        plan: &plan::Plan<'_>,
        response: &mut RateLimitResponse,
        now: u64,
        over_lately: bool,
    ) {
        let Some(priority) = answer::queue_priority(plan) else {
            return;
        };
        if over_lately || self.saturated(request, now) {
            answer::mark_queued(response, priority);
            self.metrics.in_quota_queued.inc();
        }
    }

    /// Whether the request's model's server is saturated, by the router's
    /// snapshot (false when routing by saturation is off).
    fn saturated(&self, request: &RateLimitRequest, now: u64) -> bool {
        let Some(router) = &self.routing else {
            return false;
        };
        let entries = request.descriptors.iter().flat_map(|d| &d.entries);
        let entries = entries.map(|e| (e.key.as_str(), e.value.as_str()));
        sluice_admission::descriptors::model_of(entries)
            .is_some_and(|model| router.route(model, now) == Route::Queue)
    }

    fn record(&self, domain: &str, events: &[MetricEvent<'_>]) {
        for event in events {
            match event {
                MetricEvent::Hits { limit, hits } => {
                    self.counters(domain, limit).hits.inc_by(*hits);
                }
                MetricEvent::ShadowModeHit { limit } => {
                    self.counters(domain, limit).shadow_mode_hits.inc();
                }
                MetricEvent::OverLimit { limit } => {
                    self.counters(domain, limit).over_limit.inc();
                }
                MetricEvent::Detailed {
                    limit,
                    descriptor,
                    code,
                } => {
                    self.metrics
                        .detailed
                        .get_or_create(&DetailedLabels {
                            domain: domain.to_string(),
                            limit: limit.name.clone(),
                            descriptor: descriptor.clone(),
                            code,
                        })
                        .inc();
                }
                MetricEvent::GlobalShadowMode => {
                    self.metrics.global_shadow_mode.inc();
                }
                MetricEvent::Upstream { limit, hit } => self.record_upstream(limit, *hit),
            }
        }
    }

    /// upstream's per-descriptor stats, when `--upstream-metrics` is on.
    fn record_upstream(&self, limit: &Limit, hit: crate::metrics::UpstreamHit) {
        if let Some(upstream) = &self.metrics.upstream {
            let counters = limit
                .upstream_metrics
                .get_or_init(|| upstream.counters(&limit.stats_key));
            upstream.record(counters, hit);
        }
    }

    /// The limit's metric handles, resolved on its first use.
    fn counters<'l>(&self, domain: &str, limit: &'l Limit) -> &'l LimitCounters {
        limit
            .metrics
            .get_or_init(|| self.metrics.limit_counters(domain, &limit.name))
    }
}

#[cfg(test)]
mod tests;
