//! The decision engine: a `RateLimitRequest` in, a `RateLimitResponse` out.

use crate::config::Limit;
use crate::config::{LimitsConfig, Matched, OverLimitAction, Priority};
use crate::metrics::{DecisionLabels, DetailedLabels, Metrics, StoreLabels};
use crate::store::{counter_key, CounterOp, CounterStore, CountingMode, StoreError};
use crate::window::{Unit, Window};
use arc_swap::ArcSwap;
use sluice_proto::pb::envoy::config::core::v3::HeaderValue;
use sluice_proto::pb::envoy::service::ratelimit::v3::rate_limit_response::{
    Code, DescriptorStatus, RateLimit,
};
use sluice_proto::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use sluice_proto::pb::google::protobuf::{value::Kind, ListValue, Struct, Value};
use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// Key of Sluice's block inside `RateLimitResponse.dynamic_metadata`.
pub const METADATA_NAMESPACE: &str = "sluice";

/// Hits above this are clamped: counters are integers well inside what Lua's
/// doubles and `u64` hold exactly.
const MAX_HITS: u64 = 1 << 40;

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

/// Why a request could not be decided.
#[derive(Debug, thiserror::Error)]
pub enum DecisionError {
    #[error("invalid request: {0}")]
    InvalidRequest(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

pub struct Limiter {
    config: ArcSwap<LimitsConfig>,
    store: Arc<dyn CounterStore>,
    mode: CountingMode,
    clock: Arc<dyn Clock>,
    metrics: Arc<Metrics>,
}

/// One descriptor's limit as applied to this request.
struct Applied {
    limit: Arc<Limit>,
    window: Window,
    op_index: usize,
}

enum Resolved {
    None,
    Unlimited,
    Limited(Applied),
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
        }
    }

    /// Swap in a new configuration; decisions in flight finish on the old one.
    pub fn replace_config(&self, config: LimitsConfig) {
        self.metrics.config_limits.set(config.limit_count() as i64);
        self.config.store(Arc::new(config));
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
        self.should_rate_limit_with(request, CountingMode::IncrementAll)
            .await
    }

    async fn should_rate_limit_with(
        &self,
        request: &RateLimitRequest,
        mode: CountingMode,
    ) -> Result<RateLimitResponse, DecisionError> {
        let started = Instant::now();
        let config = self.config.load_full();
        let domain_label = if config.has_domain(&request.domain) {
            request.domain.clone()
        } else {
            // Unknown domains come from clients: keep them out of label values.
            "unknown".to_string()
        };
        let result = self.decide(&config, request, mode).await;
        self.metrics
            .decision_seconds
            .observe(started.elapsed().as_secs_f64());
        let code = match &result {
            Ok(response) if response.overall_code == Code::OverLimit as i32 => "over_limit",
            Ok(_) => "ok",
            Err(DecisionError::InvalidRequest(_)) => "invalid",
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
                "error"
            }
        };
        self.metrics
            .decisions
            .get_or_create(&DecisionLabels {
                domain: domain_label,
                code,
            })
            .inc();
        result
    }

    async fn decide(
        &self,
        config: &LimitsConfig,
        request: &RateLimitRequest,
        mode: CountingMode,
    ) -> Result<RateLimitResponse, DecisionError> {
        if request.domain.is_empty() {
            return Err(DecisionError::InvalidRequest(
                "domain must not be empty".into(),
            ));
        }
        if request.descriptors.is_empty() {
            return Err(DecisionError::InvalidRequest(
                "descriptor list must not be empty".into(),
            ));
        }
        let now = self.clock.now_millis();
        let request_hits = if request.hits_addend == 0 {
            1
        } else {
            u64::from(request.hits_addend)
        };

        // 1. Match every descriptor to its limit.
        let mut matched: Vec<Option<Matched>> = Vec::with_capacity(request.descriptors.len());
        for (index, descriptor) in request.descriptors.iter().enumerate() {
            if descriptor.entries.is_empty() {
                return Err(DecisionError::InvalidRequest(format!(
                    "descriptor {index} has no entries"
                )));
            }
            let entries = descriptor
                .entries
                .iter()
                .map(|e| (e.key.as_str(), e.value.as_str()));
            let mut found = config.lookup(&request.domain, entries).cloned();
            if let Some(overridden) = &descriptor.limit {
                let unit = Unit::from_proto(overridden.unit).ok_or_else(|| {
                    DecisionError::InvalidRequest(format!(
                        "descriptor {index}: limit override has unknown unit {}",
                        overridden.unit
                    ))
                })?;
                let base = match &found {
                    Some(Matched::Limited(limit)) => Some(limit.clone()),
                    _ => None,
                };
                let name = base
                    .as_ref()
                    .map(|l| l.name.clone())
                    .unwrap_or_else(|| "override".into());
                found = Some(Matched::Limited(Arc::new(Limit {
                    shadow_mode: base.as_ref().is_some_and(|l| l.shadow_mode),
                    detailed_metric: base.as_ref().is_some_and(|l| l.detailed_metric),
                    replaces: base
                        .as_ref()
                        .map(|l| l.replaces.clone())
                        .unwrap_or_default(),
                    sluice: base.as_ref().map(|l| l.sluice).unwrap_or_default(),
                    ..Limit::new(name, unit, overridden.requests_per_unit)
                })));
            }
            matched.push(found);
        }

        // 2. `replaces`: a limit named by another matched limit steps aside.
        let replaced: HashSet<&str> = if !config.has_replaces() {
            HashSet::new()
        } else {
            matched
                .iter()
                .flatten()
                .filter_map(|m| match m {
                    Matched::Limited(limit) => Some(limit.replaces.iter().map(String::as_str)),
                    Matched::Unlimited { .. } => None,
                })
                .flatten()
                .collect()
        };

        // 3. Counter ops, one per limited descriptor.
        let mut ops = Vec::new();
        let mut resolved = Vec::with_capacity(matched.len());
        for (descriptor, found) in request.descriptors.iter().zip(&matched) {
            let entry = match found {
                None => Resolved::None,
                Some(m) if replaced.contains(m.name()) => Resolved::None,
                Some(Matched::Unlimited { .. }) => Resolved::Unlimited,
                Some(Matched::Limited(limit)) => {
                    let hits = match &descriptor.hits_addend {
                        Some(h) => h.value.min(MAX_HITS) as i64,
                        None => request_hits.min(MAX_HITS) as i64,
                    };
                    let hits = if descriptor.is_negative_hits {
                        -hits
                    } else {
                        hits
                    };
                    let window = Window::containing(limit.unit, now);
                    let entries = descriptor
                        .entries
                        .iter()
                        .map(|e| (e.key.as_str(), e.value.as_str()));
                    ops.push(CounterOp {
                        key: counter_key(&request.domain, entries, limit.unit, window),
                        hits,
                        limit: u64::from(limit.requests_per_unit),
                        enforced: !limit.shadow_mode,
                        ttl_secs: window.ttl_seconds(now),
                    });
                    Resolved::Limited(Applied {
                        limit: limit.clone(),
                        window,
                        op_index: ops.len() - 1,
                    })
                }
            };
            resolved.push(entry);
        }

        // 4. One store round trip.
        let outcome = self.store.apply(&ops, mode, now).await?;

        // 5. Statuses, headers, metadata.
        let mut response = RateLimitResponse {
            overall_code: Code::Ok as i32,
            ..Default::default()
        };
        let mut tightest: Option<(u64, u32, &Applied, bool)> = None; // (remaining, seconds to reset, limit, blocking)
        let mut retry_after_secs = 0u64;
        let mut over_limits: Vec<&Limit> = Vec::new();
        for (descriptor, entry) in request.descriptors.iter().zip(&resolved) {
            let status = match entry {
                Resolved::None => DescriptorStatus {
                    code: Code::Ok as i32,
                    ..Default::default()
                },
                Resolved::Unlimited => DescriptorStatus {
                    code: Code::Ok as i32,
                    limit_remaining: u32::MAX,
                    ..Default::default()
                },
                Resolved::Limited(applied) => {
                    let op = &ops[applied.op_index];
                    let before = outcome.before.get(applied.op_index).copied().unwrap_or(0);
                    let over = op.is_over(before);
                    let used = if outcome.applied {
                        op.apply_to(before)
                    } else {
                        before
                    };
                    let remaining = op.limit.saturating_sub(used);
                    let limit = &applied.limit;
                    let counters = limit
                        .metrics
                        .get_or_init(|| self.metrics.limit_counters(&request.domain, &limit.name));
                    if outcome.applied && op.hits > 0 {
                        counters.hits.inc_by(op.hits as u64);
                    }
                    let blocking = over && !limit.shadow_mode;
                    if over && limit.shadow_mode {
                        counters.shadow_mode_hits.inc();
                    }
                    if blocking {
                        counters.over_limit.inc();
                        retry_after_secs =
                            retry_after_secs.max(applied.window.seconds_until_reset(now));
                        over_limits.push(limit);
                    }
                    let code = if blocking { Code::OverLimit } else { Code::Ok };
                    if limit.detailed_metric {
                        let descriptor_label = descriptor
                            .entries
                            .iter()
                            .map(|e| format!("{}={}", e.key, e.value))
                            .collect::<Vec<_>>()
                            .join(",");
                        self.metrics
                            .detailed
                            .get_or_create(&DetailedLabels {
                                domain: request.domain.clone(),
                                limit: limit.name.clone(),
                                descriptor: descriptor_label,
                                code: if blocking { "over_limit" } else { "ok" },
                            })
                            .inc();
                    }
                    let reset_millis = applied.window.millis_until_reset(now);
                    let reset_secs = applied.window.seconds_until_reset(now) as u32;
                    // The headers describe the limit that blocks, if any; else the
                    // one with the least left.
                    let tighter = match tightest {
                        None => true,
                        Some((r, _, _, was_blocking)) => {
                            (blocking, std::cmp::Reverse(remaining))
                                > (was_blocking, std::cmp::Reverse(r))
                        }
                    };
                    if tighter && !limit.shadow_mode {
                        tightest = Some((remaining, reset_secs, applied, blocking));
                    }
                    if blocking {
                        response.overall_code = Code::OverLimit as i32;
                    }
                    DescriptorStatus {
                        code: code as i32,
                        current_limit: Some(RateLimit {
                            name: limit.name.clone(),
                            requests_per_unit: limit.requests_per_unit,
                            unit: limit.unit.proto_value(),
                        }),
                        limit_remaining: remaining.min(u64::from(u32::MAX)) as u32,
                        duration_until_reset: Some(sluice_proto::pb::google::protobuf::Duration {
                            seconds: (reset_millis / 1000) as i64,
                            nanos: ((reset_millis % 1000) * 1_000_000) as i32,
                        }),
                        quota: None,
                    }
                }
            };
            response.statuses.push(status);
        }

        if let Some((remaining, reset_secs, applied, _)) = tightest {
            let limit = &applied.limit;
            let header = |key: &str, value: String| HeaderValue {
                key: key.to_string(),
                value,
                raw_value: Vec::new(),
            };
            response.response_headers_to_add.extend([
                header("RateLimit-Limit", limit.requests_per_unit.to_string()),
                header("RateLimit-Remaining", remaining.to_string()),
                header("RateLimit-Reset", reset_secs.to_string()),
                header(
                    "RateLimit-Policy",
                    format!("{};w={}", limit.requests_per_unit, applied.window.length),
                ),
            ]);
        }
        if response.overall_code == Code::OverLimit as i32 {
            response.response_headers_to_add.push(HeaderValue {
                key: "Retry-After".into(),
                value: retry_after_secs.max(1).to_string(),
                raw_value: Vec::new(),
            });
        }
        if !over_limits.is_empty() {
            response.dynamic_metadata = Some(sluice_metadata(&over_limits, retry_after_secs));
        }
        Ok(response)
    }
}

/// Sluice's instructions to the filter, under `dynamic_metadata.sluice`, sent
/// with OVER_LIMIT answers only (an allowed request needs no instructions):
/// * `action`: `defer` if every limit that is over says defer, else `reject`;
/// * `priority`: the lowest class among the limits that are over: the most
///   cautious reading;
/// * `over_limits`: names of the limits that are over;
/// * `retry_after_seconds`: when over, until the last of them resets.
fn sluice_metadata(over: &[&Limit], retry_after_secs: u64) -> Struct {
    let string = |s: &str| Value {
        kind: Some(Kind::StringValue(s.to_string())),
    };
    let action = if over
        .iter()
        .all(|l| l.sluice.over_limit == OverLimitAction::Defer)
    {
        OverLimitAction::Defer
    } else {
        OverLimitAction::Reject
    };
    let priority = over
        .iter()
        .map(|l| l.sluice.priority)
        .min()
        .unwrap_or(Priority::Normal);
    let mut fields = BTreeMap::new();
    fields.insert("action".to_string(), string(action.as_str()));
    fields.insert("priority".to_string(), string(priority.as_str()));
    fields.insert(
        "over_limits".to_string(),
        Value {
            kind: Some(Kind::ListValue(ListValue {
                values: over.iter().map(|l| string(&l.name)).collect(),
            })),
        },
    );
    fields.insert(
        "retry_after_seconds".to_string(),
        Value {
            kind: Some(Kind::NumberValue(retry_after_secs as f64)),
        },
    );
    let mut outer = BTreeMap::new();
    outer.insert(
        METADATA_NAMESPACE.to_string(),
        Value {
            kind: Some(Kind::StructValue(Struct {
                fields: fields.into_iter().collect(),
            })),
        },
    );
    Struct {
        fields: outer.into_iter().collect(),
    }
}
