//! The adaptive controllers at run time ([`crate::sharing::controller`] is the law).
//!
//! **Shared state**: one Redis hash per model ([`keys::controller`]) holds
//! the limit — the admitted concurrency of *all* consumer instances — and an
//! operator's override. Every interval each instance tries to take the
//! model's lease ([`keys::controller_lease`], `SET NX PX` for a bit less
//! than the interval); the one that gets it samples the server and steps the
//! limit, the others only read it. A lease rather than a compare-and-set
//! because the step must happen once per interval, not once per instance:
//! with N instances reacting to the same queue, N decreases would cut N
//! times too deep. If the stepper dies, its lease lapses within an interval
//! and another instance steps.
//!
//! **This instance's cap**: the limit (or the override, which wins) split
//! evenly over the live consumer instances (`floor(limit / n)`, the
//! remainder to the first instances by id, at least 1), set on the model's
//! in-flight cap ([`InFlightLimits::set_cap`]).
//!
//! **Overload answers** (429 / 503) are counted into the hash by whichever
//! instance got them ([`Controls::observe`]), so the stepper sees them all.
//!
//! **Saturation**: the stepper also writes whether the server is
//! saturated for everyone (`saturated`, `saturated_at_ms`:
//! [`sluice_contract::saturation`]), for admission to read.
//!
//! **Own calls in flight**: every instance writes its calls in flight to
//! the model into the hash each interval (`in_flight:<instance>`), and the
//! stepper sums those of the live members: the law tells the consumers'
//! own calls from the foreign requests at the server (in-quota traffic
//! sent there directly) by it. Fields of instances no longer live are
//! dropped at the step.

use crate::metrics::{ChangeLabels, ModelLabels};
use crate::sharing::controller::{
    self, CapacitySample, ControllerConfig, ControllerState, ModelControl, Reason, SignalConfig,
};
use crate::sharing::fair::Weights;
use crate::{InFlightLimits, Outcome};
use futures::future::BoxFuture;
use redis::AsyncCommands;
use sluice_contract::keys;
use sluice_contract::saturation::{self, Saturation};
use sluice_redis::RedisConn;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

/// Fields of the [`keys::controller`] hash that hold the controller's
/// state and the answers counted for it (besides the saturation fields and
/// the per-instance [`IN_FLIGHT_PREFIX`] ones): a closed set, so a read
/// cannot name a field no step writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Field {
    /// The controller's limit (fractional).
    Limit,
    /// No increase before this time (ms).
    HoldUntil,
    /// An operator's limit: wins over the controller while set.
    Override,
    /// 429 / 503 answers since the last step.
    Overloaded,
    /// The last such answer's Retry-After, ms.
    RetryAfter,
    /// The server's waiting queue, smoothed over the steps.
    SmoothedWaiting,
    /// The server's KV-cache usage, smoothed over the steps.
    SmoothedKvUsage,
    /// Where slow start ends (the limit the last decrease set).
    SlowStartUntil,
    /// Consecutive increases (slow start's streak).
    Increases,
    /// No KV-cache decrease before this time (ms).
    HoldDecreaseUntil,
    /// 1 while slow start has ended on the cache with no decrease since.
    YoungBatch,
    /// Times to first token of the answers since the last step, summed (ms)
    /// and counted, by every instance (with `ttft_target_ms` only).
    TtftSum,
    TtftCount,
}

impl Field {
    /// The field's name in the hash.
    pub const fn as_str(self) -> &'static str {
        match self {
            Field::Limit => "limit",
            Field::HoldUntil => "hold_until_ms",
            Field::Override => "override",
            Field::Overloaded => "overloaded",
            Field::RetryAfter => "retry_after_ms",
            Field::SmoothedWaiting => "smoothed_waiting",
            Field::SmoothedKvUsage => "smoothed_kv_usage",
            Field::SlowStartUntil => "slow_start_until",
            Field::Increases => "increases",
            Field::HoldDecreaseUntil => "hold_decrease_until_ms",
            Field::YoungBatch => "young_batch",
            Field::TtftSum => "ttft_sum_ms",
            Field::TtftCount => "ttft_count",
        }
    }
}

impl redis::ToRedisArgs for Field {
    fn write_redis_args<W>(&self, out: &mut W)
    where
        W: ?Sized + redis::RedisWrite,
    {
        out.write_arg(self.as_str().as_bytes());
    }
}

impl redis::ToSingleRedisArg for Field {}

/// Prefix of one instance's calls in flight to the model
/// (`in_flight:<instance>`), written by every instance each interval.
pub const IN_FLIGHT_PREFIX: &str = "in_flight:";

/// Load of a model server, as its metrics endpoint reports it.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ServerLoad {
    pub waiting: f64,
    pub running: f64,
    pub kv_cache_usage: Option<f64>,
}

/// A failed sample (the controller then steps on the answers only).
#[derive(Debug, thiserror::Error)]
#[error("capacity signal: {0}")]
pub struct SignalError(pub String);

/// Where the server gauges of a model come from (the Prometheus scraper
/// plugs in here; `Ok(None)`: no gauges for this model).
pub trait CapacitySource: Send + Sync {
    fn sample<'a>(
        &'a self,
        model: &'a str,
        control: &'a ModelControl,
    ) -> BoxFuture<'a, Result<Option<ServerLoad>, SignalError>>;
}

/// How long one scrape of a model server's metrics may take.
pub const SCRAPE_TIMEOUT: Duration = Duration::from_secs(1);

/// The model servers' own gauges (vLLM / SGLang `/metrics`, read by
/// [`crate::sharing::signals`]) for models whose signal is
/// [`SignalConfig::Prometheus`]; no gauges for the others.
pub struct PrometheusSource {
    reader: crate::sharing::signals::SignalReader,
}

impl PrometheusSource {
    pub fn new(timeout: Duration) -> Result<Self, crate::sharing::signals::SignalError> {
        Ok(PrometheusSource {
            reader: crate::sharing::signals::SignalReader::new(timeout)?,
        })
    }
}

impl CapacitySource for PrometheusSource {
    fn sample<'a>(
        &'a self,
        model: &'a str,
        control: &'a ModelControl,
    ) -> BoxFuture<'a, Result<Option<ServerLoad>, SignalError>> {
        Box::pin(async move {
            let SignalConfig::Prometheus { url } = &control.signal else {
                return Ok(None);
            };
            let signal = self
                .reader
                .read(url, model)
                .await
                .map_err(|error| SignalError(format!("{url}: {error}")))?;
            Ok(Some(ServerLoad {
                waiting: signal.waiting,
                running: signal.running,
                kv_cache_usage: signal.kv_cache_usage,
            }))
        })
    }
}

/// No server gauges: the controller steps on the answers only.
pub struct AnswersOnly;

impl CapacitySource for AnswersOnly {
    fn sample<'a>(
        &'a self,
        _model: &'a str,
        _control: &'a ModelControl,
    ) -> BoxFuture<'a, Result<Option<ServerLoad>, SignalError>> {
        Box::pin(async { Ok(None) })
    }
}

/// The model's [`keys::controller`] hash as read by the stepper.
struct Stored(HashMap<String, String>);

/// The answers the instances counted in the hash since the last step.
struct Answers {
    overloaded: u64,
    ttft_sum: i64,
    ttft_count: i64,
}

impl Answers {
    /// The mean over the answers that ended since the last step.
    fn ttft_ms(&self) -> Option<f64> {
        (self.ttft_count > 0).then(|| self.ttft_sum as f64 / self.ttft_count as f64)
    }
}

impl Stored {
    fn number(&self, field: Field) -> Option<f64> {
        self.0
            .get(field.as_str())
            .and_then(|v| v.parse::<f64>().ok())
    }

    /// The controller's state, `None` before its first step.
    fn state(&self) -> Option<ControllerState> {
        let number = |f| self.number(f);
        Some(ControllerState {
            limit: number(Field::Limit)?,
            hold_increase_until_ms: number(Field::HoldUntil).unwrap_or(0.0) as u64,
            smoothed_waiting: number(Field::SmoothedWaiting),
            smoothed_kv_usage: number(Field::SmoothedKvUsage),
            slow_start_until: number(Field::SlowStartUntil),
            increases: number(Field::Increases).unwrap_or(0.0).max(0.0) as u32,
            hold_decrease_until_ms: number(Field::HoldDecreaseUntil).unwrap_or(0.0).max(0.0) as u64,
            young_batch: number(Field::YoungBatch).is_some_and(|v| v > 0.0),
        })
    }

    /// The consumers' calls in flight: the sum of the `in_flight:<instance>`
    /// fields of `live` instances (and of `me`, which may not have
    /// registered yet; `None` when none of them wrote one), and the fields
    /// of instances that are no longer live (to drop).
    fn own_in_flight(&self, live: &[String], me: &str) -> (Option<f64>, Vec<String>) {
        let mut own = None;
        let mut stale = Vec::new();
        for (name, value) in &self.0 {
            let Some(instance) = name.strip_prefix(IN_FLIGHT_PREFIX) else {
                continue;
            };
            if instance == me || live.iter().any(|m| m == instance) {
                let count = value.parse::<f64>().unwrap_or(0.0).max(0.0);
                own = Some(own.unwrap_or(0.0) + count);
            } else {
                stale.push(name.clone());
            }
        }
        (own, stale)
    }

    fn answers(&self) -> Answers {
        let count = |f| self.number(f).unwrap_or(0.0).max(0.0);
        Answers {
            overloaded: count(Field::Overloaded) as u64,
            ttft_sum: count(Field::TtftSum) as i64,
            ttft_count: count(Field::TtftCount) as i64,
        }
    }
}

/// The writes of one step: the new state, the answers it saw taken off
/// their counters (answers counted meanwhile stay), and the in-flight
/// fields of instances no longer live dropped.
fn write_step(
    key: &str,
    (next, saturation): (&ControllerState, &Saturation),
    seen: &Answers,
    stale: &[String],
) -> redis::Pipeline {
    let mut write = redis::pipe();
    for field in stale {
        write.hdel(key, field).ignore();
    }
    for (field, value) in saturation.fields() {
        write.hset(key, field, value).ignore();
    }
    write
        .hset(key, Field::Limit, next.limit)
        .ignore()
        .hset(key, Field::HoldUntil, next.hold_increase_until_ms)
        .ignore()
        .hset(key, Field::Increases, next.increases)
        .ignore()
        .hset(key, Field::HoldDecreaseUntil, next.hold_decrease_until_ms)
        .ignore()
        .hset(key, Field::YoungBatch, u8::from(next.young_batch))
        .ignore();
    if let Some(smoothed) = next.smoothed_waiting {
        write.hset(key, Field::SmoothedWaiting, smoothed).ignore();
    }
    if let Some(until) = next.slow_start_until {
        write.hset(key, Field::SlowStartUntil, until).ignore();
    }
    if let Some(smoothed) = next.smoothed_kv_usage {
        write.hset(key, Field::SmoothedKvUsage, smoothed).ignore();
    }
    if seen.overloaded > 0 {
        write
            .hincr(key, Field::Overloaded, -(seen.overloaded as i64))
            .ignore()
            .hdel(key, Field::RetryAfter)
            .ignore();
    }
    if seen.ttft_count > 0 {
        write
            .hincr(key, Field::TtftSum, -seen.ttft_sum)
            .ignore()
            .hincr(key, Field::TtftCount, -seen.ttft_count)
            .ignore();
    }
    write
}

/// What the pop loop needs beyond pacing: fair sharing and controllers.
#[derive(Clone, Default)]
pub struct Adaptive {
    pub fair: Option<Arc<crate::sharing::fair::FairShare>>,
    pub controls: Option<Arc<Controls>>,
}

/// The controllers of this instance's models.
pub struct Controls {
    config: ControllerConfig,
    redis: RedisConn,
    limits: Arc<InFlightLimits>,
    source: Arc<dyn CapacitySource>,
    metrics: Arc<crate::Metrics>,
    weights: Option<Arc<Weights>>,
    /// A member whose heartbeat is older is not counted in the split.
    membership_ttl: Duration,
}

impl Controls {
    pub fn new(
        config: ControllerConfig,
        redis: RedisConn,
        limits: Arc<InFlightLimits>,
        metrics: Arc<crate::Metrics>,
    ) -> Self {
        Controls {
            config,
            redis,
            limits,
            source: Arc::new(AnswersOnly),
            metrics,
            weights: None,
            membership_ttl: crate::sharing::membership::DEFAULT_MEMBERSHIP_TTL,
        }
    }

    /// The server gauges' source (default: [`AnswersOnly`]).
    pub fn with_source(mut self, source: Arc<dyn CapacitySource>) -> Self {
        self.source = source;
        self
    }

    /// Run-time weights to refresh from Redis every second.
    pub fn with_weights(mut self, weights: Arc<Weights>) -> Self {
        self.weights = Some(weights);
        self
    }

    pub fn with_membership_ttl(mut self, ttl: Duration) -> Self {
        self.membership_ttl = ttl;
        self
    }

    pub fn config(&self) -> &ControllerConfig {
        &self.config
    }

    /// One task per controlled model, plus the weights refresh; they end
    /// when the returned handles are dropped.
    pub fn start(self: &Arc<Self>, id: &str) -> Vec<AbortOnDrop> {
        let mut tasks: Vec<AbortOnDrop> = self
            .config
            .models
            .iter()
            .filter(|(_, c)| c.enabled())
            .map(|(model, control)| {
                let this = self.clone();
                let (model, control, id) = (model.clone(), control.clone(), id.to_string());
                AbortOnDrop(tokio::spawn(async move {
                    this.run_model(&model, &control, &id).await
                }))
            })
            .collect();
        if let Some(weights) = &self.weights {
            let (redis, weights) = (self.redis.clone(), weights.clone());
            tasks.push(AbortOnDrop(tokio::spawn(refresh_weights(redis, weights))));
        }
        tasks
    }

    async fn run_model(&self, model: &str, control: &ModelControl, id: &str) {
        let mut ticks = tokio::time::interval(Duration::from_millis(control.interval_ms));
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticks.tick().await;
            if let Err(error) = self.tick(model, control, id).await {
                tracing::warn!(%error, model, "controller: Redis unavailable; keeping the current cap");
            }
        }
    }

    /// One interval: step the shared limit if this instance holds the
    /// lease, then apply this instance's share.
    pub async fn tick(
        &self,
        model: &str,
        control: &ModelControl,
        id: &str,
    ) -> Result<(), redis::RedisError> {
        let mut redis = self.redis.clone();
        let lease_ms = control.interval_ms.saturating_sub(control.interval_ms / 10);
        // This instance's calls in flight, for the stepper (same hash tag as
        // the lease: one pipeline, one slot).
        let in_flight = self.limits.in_flight(model).unwrap_or(0);
        let own_field = format!("{}{id}", IN_FLIGHT_PREFIX);
        let (leased,): (Option<String>,) = redis::pipe()
            .hset(keys::controller(model), own_field, in_flight)
            .ignore()
            .cmd("SET")
            .arg(keys::controller_lease(model))
            .arg(id)
            .arg("NX")
            .arg("PX")
            .arg(lease_ms.max(1))
            .query_async(&mut redis)
            .await?;
        if leased.is_some() {
            self.step_shared(model, control, id).await?;
        }
        self.apply(&mut redis, model, control, id).await
    }

    /// The stepper's part: read the state, sample, step, write.
    async fn step_shared(
        &self,
        model: &str,
        control: &ModelControl,
        id: &str,
    ) -> Result<(), redis::RedisError> {
        let key = keys::controller(model);
        let mut redis = self.redis.clone();
        let stored = Stored(redis.hgetall(&key).await?);
        if stored.number(Field::Override).is_some() {
            return Ok(());
        }
        let state = stored.state().unwrap_or_else(|| control.initial_state());
        let answers = stored.answers();
        let live =
            crate::sharing::membership::live_members(&mut redis, self.membership_ttl).await?;
        let (own_in_flight, stale) = stored.own_in_flight(&live, id);
        let labels = self.metrics.model_label(model);
        let load = self.server_load(model, control, &labels).await;
        let sample = CapacitySample {
            waiting: load.map(|l| l.waiting),
            running: load.map(|l| l.running),
            kv_cache_usage: load.and_then(|l| l.kv_cache_usage),
            overloaded: answers.overloaded,
            retry_after_ms: stored.number(Field::RetryAfter).map(|v| v as u64),
            ttft_ms: answers.ttft_ms(),
            own_in_flight,
        };
        if let (Some(_), Some(own)) = (load, own_in_flight) {
            let control_metrics = &self.metrics.control;
            control_metrics
                .own_in_flight
                .get_or_create(&labels)
                .set(own);
            control_metrics
                .server_foreign
                .get_or_create(&labels)
                .set(sample.foreign());
        }
        let now_ms = crate::now_ms();
        let (next, reason) = controller::step(control, state, &sample, now_ms);
        // Unknown own calls count as none: not saturated (the safe reading,
        // see sluice_contract::saturation).
        let saturation = Saturation {
            saturated: saturation::is_saturated(
                next.smoothed_waiting,
                control.target_waiting,
                own_in_flight.unwrap_or(0.0),
            ),
            at_ms: now_ms,
        };
        write_step(&key, (&next, &saturation), &answers, &stale)
            .query_async::<()>(&mut redis)
            .await?;
        if next.limit != state.limit {
            self.record_change((model, labels), reason, (&state, &next), &sample);
        }
        Ok(())
    }

    /// The server's load this interval (`None`: answers only, or no sample),
    /// its queue kept as a gauge.
    async fn server_load(
        &self,
        model: &str,
        control: &ModelControl,
        labels: &ModelLabels,
    ) -> Option<ServerLoad> {
        let load = match self.source.sample(model, control).await {
            Ok(load) => load,
            Err(error) => {
                tracing::debug!(%error, model, "controller: no server sample this interval");
                None
            }
        };
        if let Some(load) = load {
            self.metrics
                .control
                .server_waiting
                .get_or_create(labels)
                .set(load.waiting);
        }
        load
    }

    /// A change of the limit, counted by reason and logged.
    fn record_change(
        &self,
        (model, labels): (&str, ModelLabels),
        reason: Reason,
        (state, next): (&ControllerState, &ControllerState),
        sample: &CapacitySample,
    ) {
        self.metrics
            .control
            .changes
            .get_or_create(&ChangeLabels {
                model: labels.model,
                reason: reason.as_str(),
            })
            .inc();
        tracing::info!(
            model,
            from = state.limit,
            to = next.limit,
            reason = reason.as_str(),
            waiting = ?sample.waiting,
            smoothed_waiting = ?next.smoothed_waiting,
            kv_cache_usage = ?sample.kv_cache_usage,
            running = ?sample.running,
            own_in_flight = ?sample.own_in_flight,
            foreign = sample.foreign(),
            overloaded = sample.overloaded,
            ttft_ms = ?sample.ttft_ms,
            "controller: limit changed"
        );
    }

    /// Every instance's part: this instance's share of the limit (or of the
    /// override) as the model's in-flight cap, read on the tick's `redis`.
    async fn apply(
        &self,
        redis: &mut RedisConn,
        model: &str,
        control: &ModelControl,
        id: &str,
    ) -> Result<(), redis::RedisError> {
        let (limit, manual) = shared_state(redis, model).await?;
        let effective = manual.or(limit).unwrap_or(control.initial_state().limit);
        let members = crate::sharing::membership::live_members(redis, self.membership_ttl).await?;
        let rank = members.iter().position(|m| m == id);
        let cap = instance_share(effective, members.len(), rank);
        self.limits.set_cap(model, cap);
        let labels = self.metrics.model_label(model);
        self.metrics
            .control
            .limit
            .get_or_create(&labels)
            .set(effective);
        self.metrics
            .control
            .instance_cap
            .get_or_create(&labels)
            .set(cap as i64);
        Ok(())
    }

    /// Counts an overload answer (429 / 503) of the model, or a completed
    /// answer's time to first token (when the model has a TTFT target),
    /// into the shared state, for the stepper.
    pub async fn observe(&self, model: &str, outcome: &Outcome) {
        let Some(control) = self.config.for_model(model) else {
            return;
        };
        if let Outcome::Completed {
            first_token_ms: Some(ttft),
            ..
        } = outcome
        {
            if control.ttft_target_ms.is_some() {
                self.count_first_token(model, *ttft).await;
            }
            return;
        }
        let Outcome::RetryLater {
            kind: crate::FailureKind::BackendBusy,
            retry_after,
            ..
        } = outcome
        else {
            return;
        };
        self.metrics
            .control
            .overload_answers
            .get_or_create(&self.metrics.model_label(model))
            .inc();
        let key = keys::controller(model);
        let mut pipe = redis::pipe();
        pipe.hincr(&key, Field::Overloaded, 1).ignore();
        if let Some(after) = retry_after {
            pipe.hset(&key, Field::RetryAfter, after.as_millis() as u64)
                .ignore();
        }
        let mut redis = self.redis.clone();
        if let Err(error) = pipe.query_async::<()>(&mut redis).await {
            tracing::warn!(%error, model, "controller: cannot count an overload answer");
        }
    }

    /// Adds one answer's time to first token to the shared sum and count.
    async fn count_first_token(&self, model: &str, ttft_ms: u64) {
        let key = keys::controller(model);
        let mut pipe = redis::pipe();
        pipe.hincr(&key, Field::TtftSum, ttft_ms as i64)
            .ignore()
            .hincr(&key, Field::TtftCount, 1)
            .ignore();
        let mut redis = self.redis.clone();
        if let Err(error) = pipe.query_async::<()>(&mut redis).await {
            tracing::warn!(%error, model, "controller: cannot count a time to first token");
        }
    }
}

/// An operator's limit for `model` (`None`: back to the controller).
pub async fn set_override(
    redis: &mut RedisConn,
    model: &str,
    limit: Option<u32>,
) -> Result<(), redis::RedisError> {
    let key = keys::controller(model);
    match limit {
        Some(limit) => redis.hset(key, Field::Override, limit).await,
        None => redis.hdel(key, Field::Override).await,
    }
}

/// A tenant's run-time fair-share weight on every instance (`None`: back
/// to the configured one). The caller checks it ([`crate::sharing::fair::valid_weight`]).
pub async fn set_weight(
    redis: &mut RedisConn,
    tenant: &str,
    weight: Option<f64>,
) -> Result<(), redis::RedisError> {
    match weight {
        Some(w) => redis.hset(keys::FAIR_WEIGHTS, tenant, w).await,
        None => redis.hdel(keys::FAIR_WEIGHTS, tenant).await,
    }
}

/// The shared state of `model`'s controller: (limit, override).
pub async fn shared_state(
    redis: &mut RedisConn,
    model: &str,
) -> Result<(Option<f64>, Option<f64>), redis::RedisError> {
    redis
        .hmget(keys::controller(model), &[Field::Limit, Field::Override])
        .await
}

/// This instance's share of `limit` among `members` live instances, `rank`
/// its place among them by id (`None`: not registered yet, counted as one
/// more). At least 1, so no instance starves a bucket it owns.
pub fn instance_share(limit: f64, members: usize, rank: Option<usize>) -> usize {
    let limit = limit.max(0.0).floor() as usize;
    let (members, rank) = match rank {
        Some(rank) => (members.max(1), rank),
        None => (members + 1, members),
    };
    let share = limit / members + usize::from(rank < limit % members);
    share.max(1)
}

async fn refresh_weights(redis: RedisConn, weights: Arc<Weights>) {
    let mut ticks = tokio::time::interval(Duration::from_secs(1));
    loop {
        ticks.tick().await;
        let mut conn = redis.clone();
        match conn
            .hgetall::<_, HashMap<String, String>>(keys::FAIR_WEIGHTS)
            .await
        {
            Ok(map) => weights.set_runtime(
                map.into_iter()
                    .filter_map(|(t, w)| Some((t, w.parse::<f64>().ok()?)))
                    .collect(),
            ),
            Err(error) => tracing::debug!(%error, "cannot refresh the fair-share weights"),
        }
    }
}

/// A task aborted when this is dropped.
pub struct AbortOnDrop(pub tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_calls_are_summed_over_the_live_instances() {
        let stored = Stored(HashMap::from([
            ("limit".to_string(), "10".to_string()),
            ("in_flight:a".to_string(), "3".to_string()),
            ("in_flight:b".to_string(), "4".to_string()),
            ("in_flight:gone".to_string(), "9".to_string()),
            ("in_flight:me".to_string(), "1".to_string()),
        ]));
        let live = vec!["a".to_string(), "b".to_string()];
        let (own, stale) = stored.own_in_flight(&live, "me");
        assert_eq!(own, Some(8.0));
        assert_eq!(stale, vec!["in_flight:gone".to_string()]);
        // No instance wrote a count: unknown, not zero.
        let (own, stale) = Stored(HashMap::new()).own_in_flight(&live, "me");
        assert_eq!((own, stale.len()), (None, 0));
    }

    #[test]
    fn the_limit_is_split_over_the_instances() {
        assert_eq!(instance_share(10.0, 1, Some(0)), 10);
        let shares: Vec<usize> = (0..3).map(|r| instance_share(10.0, 3, Some(r))).collect();
        assert_eq!(shares, vec![4, 3, 3]);
        assert_eq!(shares.iter().sum::<usize>(), 10);
        // Not registered yet: counted as one more.
        assert_eq!(instance_share(10.0, 1, None), 5);
        // Fewer slots than instances: each keeps one.
        assert_eq!(instance_share(1.0, 3, Some(2)), 1);
    }
}
