//! Adaptive concurrency per model: how many calls the consumers may have in
//! flight to a model, set from the model server's load.
//!
//! **Why concurrency, not tokens/s**: a continuous-batching server (vLLM,
//! SGLang) runs whatever is in its batch; what overloads it is more
//! requests in its batch and waiting queue than it can hold, whatever their
//! arrival rate. Concurrency is what its queue depth measures (requests in
//! the server ≈ calls the consumers have in flight), so the controller's
//! output maps one to one onto the per-model in-flight cap
//! ([`crate::InFlightLimits`]) and needs no model of token speed. The
//! per-bucket GCRA rates stay as ceilings.
//!
//! **The law** (after TCP congestion control and Netflix's
//! concurrency-limits), once per `interval`, on the server's waiting queue
//! smoothed over the last steps (`smoothing`):
//!
//! * an overload answer (429 / 503) since the last step → multiplicative
//!   decrease (`× decrease_factor`), and no increase before the server's
//!   `Retry-After` (at least one interval) has passed;
//! * time to first token above `ttft_target_ms` (optional) → multiplicative
//!   decrease;
//! * more requests waiting than `target_waiting` → a gradient decrease
//!   towards what the server shows it holds: `running + target_waiting`
//!   (`limit − gain · (limit − aim)`), never below `limit · decrease_factor`
//!   in one step. Aiming at the running batch rather than cutting by the
//!   queue's excess does not cut again while a queue the last cut already
//!   accounts for drains;
//! * **the server is shared**: requests admitted in quota go to the server
//!   directly, beside the consumers' calls. With the consumers' own calls
//!   in flight in the sample ([`CapacitySample::own_in_flight`]), the
//!   server's waiting target is for everyone: the queue's aim, and the KV
//!   cache's aim below, are less the *foreign* requests at the server
//!   (running + waiting − own), so the consumers back off until in-quota
//!   requests no longer queue behind deferred ones; and a limit is "in
//!   use" by the consumers' own calls only. Work-conserving: when little
//!   in-quota traffic is there, the foreign count is small and the
//!   deferred work fills the batch. Without foreign requests (or without
//!   the count) nothing changes;
//! * KV cache (smoothed) fuller than `target_kv_usage` → the same gradient
//!   decrease towards the requests that fill the cache to the target,
//!   `(running + waiting) · target / usage`. A full cache is where a
//!   vLLM-like server starts preempting (recomputing) requests: its
//!   throughput collapses while its queue still looks short, so the queue
//!   alone would keep the limit there;
//! * fewer waiting than the target, the cache under its target and the
//!   limit in use (requests at the server ≥ the applied cap − one slot) →
//!   increase: `increase_step`, doubling with each consecutive increase
//!   (slow start: from the floor the limit reaches the server's batch in a
//!   few steps rather than one step per interval), never more than
//!   `× max_growth` in one step; any other step ends the streak. Slow
//!   start also ends, without a decrease, once the KV cache (smoothed or
//!   now) holds half its target: a call's cache grows over its life, so a
//!   young batch at half the target fills it as it ages (as HyStart ends
//!   TCP's slow start on rising delay, before the loss). Above the
//!   limit the last decrease (or that exit) set (TCP's slow-start threshold) the first
//!   [`ADDITIVE_STEPS`] increases are additive, then they double again (the
//!   capacity grew): probing gently where the server refused before. Each
//!   such probe raises the applied cap by at least one whole slot (a
//!   fraction leaves the cap as it was and probes nothing), and the next
//!   one waits until the smoothed signals have taken `ceil(1 / smoothing)`
//!   samples since (the streak goes on meanwhile): probing every interval
//!   adds slots faster than the server's gauges can show the first one
//!   (a call fills the KV cache over its life), overshoots, and each
//!   overshoot costs a decrease — a limit that never settles. With
//!   answers only (no server gauges) the increase stays additive: there the
//!   only sign of the ceiling is a refusal;
//! * an unused limit is held (it says nothing about capacity);
//! * always within `[floor, ceiling]`.
//!
//! [`step`] is pure; the runtime part (Redis state shared by the
//! instances, the lease, metrics) is in [`crate::sharing::control_loop`].

use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// Where a model's capacity signal comes from.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum SignalConfig {
    /// No controller: the configured in-flight cap holds (today's behaviour).
    #[default]
    Static,
    /// Only the answers of the model: 429 / 503 (with Retry-After) and the
    /// time to first token.
    Responses,
    /// The model server's Prometheus gauges (vLLM / SGLang: requests
    /// waiting and running, KV-cache usage), plus the answers.
    Prometheus {
        /// The server's metrics URL, e.g. `http://gpu-1:8000/metrics`.
        url: String,
    },
}

/// The controller of one model (`controller.models.<model>` in the consumer file).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ModelControl {
    pub signal: SignalConfig,
    /// Lowest limit (≥ 1: a model is never shut off by the controller).
    pub floor: u32,
    /// Highest limit.
    pub ceiling: u32,
    /// Limit before the first step (default: the floor).
    pub initial: Option<u32>,
    /// Requests waiting at the model server the controller aims at: a small
    /// queue keeps the batch full between calls without inflating TTFT.
    pub target_waiting: f64,
    /// First increase after a hold or a decrease; each consecutive
    /// increase doubles it (with server gauges).
    pub increase_step: f64,
    /// Largest growth in one step (limit × this), > 1.
    pub max_growth: f64,
    /// Weight of the newest waiting sample in the smoothed queue, in (0, 1]
    /// (1: no smoothing).
    pub smoothing: f64,
    /// Multiplicative decrease on overload, in (0, 1).
    pub decrease_factor: f64,
    /// Share of the gap to `running + target_waiting` closed per decrease,
    /// in (0, 1].
    pub gain: f64,
    /// KV-cache usage (0..1, from the server's gauge) above which the limit
    /// decreases and below which it may grow (± 0.05); `None`: ignored.
    pub target_kv_usage: Option<f64>,
    /// Time to first token above which the limit decreases (optional).
    pub ttft_target_ms: Option<u64>,
    /// Step period, ms.
    pub interval_ms: u64,
    /// Slots of the server's batch kept free for in-quota requests
    /// (`None`: none).
    pub in_quota_reserve: Option<InQuotaReserve>,
}

/// Slots of the model server's batch kept free for requests that are not
/// the consumers' (in-quota ones sent straight to the server): the limit
/// stays at or below `server_max_running − slots − foreign` (never below
/// the floor), so an in-quota request finds a free slot instead of waiting
/// for a deferred call to end, and deferred work fills the rest. Needs the
/// server's gauges (`signal.kind: prometheus`); a step without a server
/// sample holds the limit (no growth).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InQuotaReserve {
    /// Requests the server runs at once: vLLM `--max-num-seqs`, SGLang
    /// `--max-running-requests`.
    pub server_max_running: u32,
    pub slots: u32,
}

impl Default for ModelControl {
    fn default() -> Self {
        ModelControl {
            signal: SignalConfig::Static,
            floor: 1,
            ceiling: 64,
            initial: None,
            target_waiting: 2.0,
            increase_step: 1.0,
            max_growth: 1.5,
            smoothing: 0.5,
            decrease_factor: 0.7,
            gain: 0.5,
            target_kv_usage: Some(0.8),
            ttft_target_ms: None,
            interval_ms: 1000,
            in_quota_reserve: None,
        }
    }
}

/// Invalid controller settings.
#[derive(Debug, thiserror::Error, PartialEq)]
#[error("controller of model {model:?}: {problem}")]
pub struct ControlConfigError {
    pub model: String,
    pub problem: &'static str,
}

impl ModelControl {
    /// Whether a controller runs for this model.
    pub fn enabled(&self) -> bool {
        self.signal != SignalConfig::Static
    }

    pub fn validate(&self, model: &str) -> Result<(), ControlConfigError> {
        let problem = if self.floor < 1 {
            Some("floor must be at least 1")
        } else if self.ceiling < self.floor {
            Some("ceiling must be at least the floor")
        } else if self
            .initial
            .is_some_and(|i| i < self.floor || i > self.ceiling)
        {
            Some("initial must lie between floor and ceiling")
        } else if !(self.target_waiting.is_finite() && self.target_waiting >= 0.0) {
            Some("target_waiting must be a non-negative number")
        } else if !(self.increase_step.is_finite() && self.increase_step > 0.0) {
            Some("increase_step must be positive")
        } else if !(self.max_growth.is_finite() && self.max_growth > 1.0) {
            Some("max_growth must be a number above 1")
        } else if !(self.smoothing > 0.0 && self.smoothing <= 1.0) {
            Some("smoothing must lie in (0, 1]")
        } else if !(self.decrease_factor > 0.0 && self.decrease_factor < 1.0) {
            Some("decrease_factor must lie in (0, 1)")
        } else if !(self.gain > 0.0 && self.gain <= 1.0) {
            Some("gain must lie in (0, 1]")
        } else if self
            .target_kv_usage
            .is_some_and(|kv| !(kv > 0.0 && kv <= 1.0))
        {
            Some("target_kv_usage must lie in (0, 1]")
        } else if self.interval_ms < 50 {
            Some("interval_ms must be at least 50")
        } else {
            self.in_quota_reserve
                .and_then(|reserve| reserve.problem(&self.signal))
        };
        match problem {
            Some(problem) => Err(ControlConfigError {
                model: model.to_string(),
                problem,
            }),
            None => Ok(()),
        }
    }

    /// The state a model starts from.
    pub fn initial_state(&self) -> ControllerState {
        ControllerState {
            limit: f64::from(self.initial.unwrap_or(self.floor)),
            ..ControllerState::default()
        }
    }
}

impl InQuotaReserve {
    /// What is wrong with it under `signal`, if anything.
    fn problem(&self, signal: &SignalConfig) -> Option<&'static str> {
        if self.slots < 1 {
            Some("in_quota_reserve.slots must be at least 1")
        } else if self.slots >= self.server_max_running {
            Some("in_quota_reserve.slots must be below server_max_running")
        } else if !matches!(signal, SignalConfig::Prometheus { .. }) {
            Some("in_quota_reserve needs the server's gauges (signal.kind: prometheus)")
        } else {
            None
        }
    }

    /// The most calls the consumers may have in flight while `slots` of
    /// the server's batch stay free for the foreign requests to come: the
    /// batch less the slots less the foreign requests there now (running
    /// or waiting). `None` without the gauges and the consumers' count
    /// that tell foreign from own.
    pub fn room(&self, sample: &CapacitySample) -> Option<f64> {
        sample.waiting?;
        sample.running?;
        sample.own_in_flight?;
        Some(f64::from(self.server_max_running) - f64::from(self.slots) - sample.foreign())
    }
}

/// The consumer file's `controller` section.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ControllerConfig {
    /// Per model (unsanitized name); a model without an entry is static.
    pub models: HashMap<String, ModelControl>,
}

impl ControllerConfig {
    pub fn validate(&self) -> Result<(), ControlConfigError> {
        self.models.iter().try_for_each(|(m, c)| c.validate(m))
    }

    /// The controller of `model`, if one runs.
    pub fn for_model(&self, model: &str) -> Option<&ModelControl> {
        self.models.get(model).filter(|c| c.enabled())
    }
}

/// What the controller keeps between steps (shared through Redis).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ControllerState {
    /// Admitted concurrency, fractional so additive steps below 1 add up;
    /// the cap applied is its floor ([`ControllerState::cap`]).
    pub limit: f64,
    /// No increase before this time (after an overload answer's Retry-After).
    pub hold_increase_until_ms: u64,
    /// Requests waiting at the server, smoothed (`None`: no sample yet).
    #[serde(default)]
    pub smoothed_waiting: Option<f64>,
    /// KV-cache usage at the server, smoothed (`None`: no sample yet).
    #[serde(default)]
    pub smoothed_kv_usage: Option<f64>,
    /// Consecutive increases so far (the next one is
    /// `increase_step · 2^streak` in slow start).
    #[serde(default)]
    pub increases: u32,
    /// Slow start's end: the limit the last decrease set (`None`: none yet).
    /// Above it the increase is additive for [`ADDITIVE_STEPS`] steps before
    /// it doubles again.
    #[serde(default)]
    pub slow_start_until: Option<f64>,
    /// No KV-cache decrease before this time: the last one has not shown
    /// in the smoothed usage yet.
    #[serde(default)]
    pub hold_decrease_until_ms: u64,
    /// Slow start ended on the cache, with no decrease since: the batch is
    /// young and holds less cache than it will, so a probe adds one slot,
    /// not what the cache seems to have room for.
    #[serde(default)]
    pub young_batch: bool,
}

impl ControllerState {
    /// The in-flight cap this state stands for.
    pub fn cap(&self) -> usize {
        self.limit.max(1.0).floor() as usize
    }
}

/// What the controller saw since its last step.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct CapacitySample {
    /// Requests waiting at the model server (`None`: no server gauges).
    pub waiting: Option<f64>,
    /// Requests running at the model server.
    pub running: Option<f64>,
    /// KV-cache usage in [0, 1], informational.
    pub kv_cache_usage: Option<f64>,
    /// 429 / 503 answers since the last step, by every instance.
    pub overloaded: u64,
    /// The longest Retry-After among them, ms.
    pub retry_after_ms: Option<u64>,
    /// Time to first token (recent), ms.
    pub ttft_ms: Option<f64>,
    /// The consumers' own calls in flight to the model, every instance
    /// together (`None`: unknown, every request at the server is counted as
    /// the consumers' own). What the server holds beyond them is *foreign*:
    /// requests admitted in quota straight to the server, other clients.
    pub own_in_flight: Option<f64>,
}

impl CapacitySample {
    /// Requests at the server that are not the consumers' own calls: the
    /// server's running + waiting less the consumers' in flight, at least 0
    /// (a call still on its way, or gauges older than the count, can make
    /// the difference negative). 0 without gauges or without the count.
    pub fn foreign(&self) -> f64 {
        match (self.waiting, self.running, self.own_in_flight) {
            (Some(waiting), Some(running), Some(own)) => (waiting + running - own).max(0.0),
            _ => 0.0,
        }
    }
}

/// Why a step changed (or kept) the limit: a metric label.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Reason {
    /// 429 / 503 from the model.
    Overloaded,
    /// Time to first token above its target.
    SlowFirstToken,
    /// More requests waiting at the server than the target.
    QueueAboveTarget,
    /// The server's KV cache fuller than its target.
    KvCacheAboveTarget,
    /// Fewer waiting than the target while the limit is in use.
    Headroom,
    /// Nothing to do: at target, limit unused, held after an overload, or
    /// at floor / ceiling.
    Hold,
    /// An operator's override (not a controller step).
    Override,
    /// Lowered to keep `in_quota_reserve` slots of the server's batch free
    /// for foreign requests.
    InQuotaReserve,
}

impl Reason {
    pub const ALL: [Reason; 8] = [
        Reason::Overloaded,
        Reason::SlowFirstToken,
        Reason::QueueAboveTarget,
        Reason::KvCacheAboveTarget,
        Reason::Headroom,
        Reason::Hold,
        Reason::Override,
        Reason::InQuotaReserve,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Overloaded => "overloaded",
            Reason::SlowFirstToken => "slow_first_token",
            Reason::QueueAboveTarget => "queue_above_target",
            Reason::KvCacheAboveTarget => "kv_cache_above_target",
            Reason::Headroom => "headroom",
            Reason::Hold => "hold",
            Reason::Override => "override",
            Reason::InQuotaReserve => "in_quota_reserve",
        }
    }
}

/// Half a request: a queue this close to the target is at the target.
const DEADBAND: f64 = 0.5;
/// A smoothed queue this short is empty: room whatever the target.
const NEARLY_EMPTY: f64 = 0.05;

/// The smoothed queue is short enough to grow: half a request under the
/// target, or under half of a target below one request, or empty. (Half a
/// request under a target of 0.5 or less is below zero, so the limit never
/// grew there.)
fn queue_has_room(waiting: f64, target_waiting: f64) -> bool {
    waiting
        < (target_waiting - DEADBAND)
            .max(target_waiting / 2.0)
            .max(NEARLY_EMPTY)
}
/// A KV-cache usage this close to its target is at the target.
const KV_DEADBAND: f64 = 0.05;
/// Additive increases above the last decrease before they double again
/// (the capacity grew more than a few steps' worth).
pub const ADDITIVE_STEPS: u32 = 4;

/// One controller step: the next state and why. In order: pushed back
/// (overload answers, slow first tokens) cuts; without server gauges, grow
/// while the limit is in use; a queue or cache above target cuts towards
/// it; below both, grow. Then the in-quota reserve caps the result
/// ([`InQuotaReserve::room`]).
pub fn step(
    config: &ModelControl,
    state: ControllerState,
    sample: &CapacitySample,
    now_ms: u64,
) -> (ControllerState, Reason) {
    let (next, reason) = law(config, state, sample, now_ms);
    keep_reserve(config, state, sample, next, reason)
}

/// `next` capped at the room the in-quota reserve leaves: the cap follows
/// the foreign requests at each step (a burst of in-quota requests lowers
/// it at once, their end raises it again), so it is applied outside the
/// law and leaves the law's own state (slow start, streak) as it was.
fn keep_reserve(
    config: &ModelControl,
    state: ControllerState,
    sample: &CapacitySample,
    next: ControllerState,
    reason: Reason,
) -> (ControllerState, Reason) {
    let Some(reserve) = config.in_quota_reserve else {
        return (next, reason);
    };
    let before = state
        .limit
        .clamp(f64::from(config.floor), f64::from(config.ceiling));
    let Some(room) = reserve.room(sample) else {
        // A reserve whose room is unknown this step (no server sample:
        // the scrape failed) holds the limit where it was: growing on the
        // answers alone could take the reserved slots.
        if next.limit > before {
            return (
                ControllerState {
                    limit: before,
                    ..next
                },
                Reason::Hold,
            );
        }
        return (next, reason);
    };
    let room = room.max(f64::from(config.floor));
    if next.limit <= room {
        return (next, reason);
    }
    let reason = if room < before {
        Reason::InQuotaReserve
    } else {
        Reason::Hold
    };
    (
        ControllerState {
            limit: room,
            ..next
        },
        reason,
    )
}

/// The law of one step, before the in-quota reserve.
fn law(
    config: &ModelControl,
    state: ControllerState,
    sample: &CapacitySample,
    now_ms: u64,
) -> (ControllerState, Reason) {
    let step = Step::new(config, state, sample, now_ms);
    if let Some(cut) = step.pushed_back() {
        return cut;
    }
    let hold_until = state.hold_increase_until_ms;
    let held = (step.next(step.limit, hold_until, 0), Reason::Hold);
    let Some(waiting) = step.smoothed_waiting else {
        // Answers only: no news is room to grow, when the limit is in use;
        // additively, since only a refusal shows where the ceiling is.
        return match increase(config, step.limit, hold_until, sample.running, now_ms, 0) {
            Some(to) => (step.next(to, hold_until, 0), Reason::Headroom),
            None => held,
        };
    };
    let load = step.load(waiting);
    if let Some((aim, reason)) = load.aim() {
        return step.decrease(&load, aim, reason).unwrap_or(held);
    }
    if queue_has_room(waiting, config.target_waiting) && step.cache_has_room(&load) {
        return step.grow(&load).unwrap_or(held);
    }
    held
}

/// What one step works from: the settings, the state before, the sample,
/// and the limit and gauges as this step sees them.
struct Step<'a> {
    config: &'a ModelControl,
    state: ControllerState,
    sample: &'a CapacitySample,
    now_ms: u64,
    floor: f64,
    ceiling: f64,
    /// The limit before the step, within floor and ceiling.
    limit: f64,
    smoothed_waiting: Option<f64>,
    smoothed_kv_usage: Option<f64>,
}

/// The server's load against the targets, from the smoothed queue.
struct Load {
    /// Requests in the server: waiting (now) and running.
    in_server: f64,
    /// Of those, the ones that are not the consumers' own calls.
    foreign: f64,
    /// How far the cache is above its target (negative: below), the
    /// target and the smoothed usage; `None` without a target or a gauge.
    kv_excess: Option<(f64, f64, f64)>,
    /// The limit that would bring the queue to its target.
    queue_aim: Option<f64>,
    /// The limit that would bring the cache to its target.
    kv_aim: Option<f64>,
}

impl Load {
    /// The lower of the two aims, and which one it is.
    fn aim(&self) -> Option<(f64, Reason)> {
        match (self.queue_aim, self.kv_aim) {
            (Some(q), Some(k)) if k < q => Some((k, Reason::KvCacheAboveTarget)),
            (Some(q), _) => Some((q, Reason::QueueAboveTarget)),
            (None, Some(k)) => Some((k, Reason::KvCacheAboveTarget)),
            (None, None) => None,
        }
    }
}

impl<'a> Step<'a> {
    fn new(
        config: &'a ModelControl,
        state: ControllerState,
        sample: &'a CapacitySample,
        now_ms: u64,
    ) -> Self {
        let floor = f64::from(config.floor);
        let ceiling = f64::from(config.ceiling);
        let smooth = |now: Option<f64>, before: Option<f64>| {
            now.map(|now| match before {
                Some(before) => config.smoothing * now + (1.0 - config.smoothing) * before,
                None => now,
            })
        };
        Step {
            config,
            state,
            sample,
            now_ms,
            floor,
            ceiling,
            limit: state.limit.clamp(floor, ceiling),
            smoothed_waiting: smooth(sample.waiting, state.smoothed_waiting),
            smoothed_kv_usage: smooth(sample.kv_cache_usage, state.smoothed_kv_usage),
        }
    }

    /// The state after moving the limit to `to` (within floor and ceiling).
    fn next(&self, to: f64, hold_until: u64, increases: u32) -> ControllerState {
        let limit = to.clamp(self.floor, self.ceiling);
        ControllerState {
            limit,
            hold_increase_until_ms: hold_until,
            smoothed_waiting: self.smoothed_waiting,
            smoothed_kv_usage: self.smoothed_kv_usage,
            increases,
            // A decrease ends slow start where it landed.
            slow_start_until: if to < self.limit {
                Some(limit)
            } else {
                self.state.slow_start_until
            },
            hold_decrease_until_ms: self.state.hold_decrease_until_ms,
            young_batch: self.state.young_batch && to >= self.limit,
        }
    }

    /// The cut for overload answers (holding increases for their
    /// Retry-After) or for a first token slower than its target.
    fn pushed_back(&self) -> Option<(ControllerState, Reason)> {
        let (config, sample) = (self.config, self.sample);
        let to = self.limit * config.decrease_factor;
        if sample.overloaded > 0 {
            let hold = sample.retry_after_ms.unwrap_or(0).max(config.interval_ms);
            let hold_until = self
                .now_ms
                .saturating_add(hold)
                .max(self.state.hold_increase_until_ms);
            return Some((self.next(to, hold_until, 0), Reason::Overloaded));
        }
        let (target, ttft) = (config.ttft_target_ms?, sample.ttft_ms?);
        (ttft > target as f64).then(|| {
            let hold_until = self.state.hold_increase_until_ms;
            (self.next(to, hold_until, 0), Reason::SlowFirstToken)
        })
    }

    /// The load against the targets, from the smoothed queue `waiting`.
    fn load(&self, waiting: f64) -> Load {
        let config = self.config;
        let excess = waiting - config.target_waiting;
        let running = self
            .sample
            .running
            .unwrap_or((self.limit - excess).max(0.0));
        let in_server = self.sample.waiting.unwrap_or(waiting) + running;
        let foreign = self.sample.foreign().min(in_server);
        let kv_excess = match (config.target_kv_usage, self.smoothed_kv_usage) {
            (Some(target), Some(usage)) => Some((usage - target, target, usage)),
            _ => None,
        };
        // The server holds what it runs + the target for everyone; the
        // consumers' share is that less the foreign requests in it. Their
        // own calls in the server ≈ the limit, so the queue's excess is how
        // far the limit is above that share; aiming at it (not at limit −
        // excess) does not cut twice for one queue: as an own call ends
        // unreplaced, the running batch takes a waiting request and the
        // foreign count stays. Without foreign load: running + target.
        let queue_aim = (excess > DEADBAND).then_some(running + config.target_waiting - foreign);
        let kv_aim = kv_excess
            .filter(|(over, _, usage)| *over > KV_DEADBAND && *usage > 0.0)
            .map(|(_, target, usage)| in_server * target / usage - foreign);
        Load {
            in_server,
            foreign,
            kv_excess,
            queue_aim,
            kv_aim,
        }
    }

    /// `gain` of the way down to `aim`; `None` when that is no cut, or a
    /// cut for the cache whose last one has not shown yet.
    fn decrease(&self, load: &Load, aim: f64, reason: Reason) -> Option<(ControllerState, Reason)> {
        let (config, limit) = (self.config, self.limit);
        let to = (limit - config.gain * (limit - aim)).max(limit * config.decrease_factor);
        // A cut for the cache alone (no queue above target).
        let by_cache = reason == Reason::KvCacheAboveTarget && load.queue_aim.is_none();
        if to >= limit || (by_cache && self.now_ms < self.state.hold_decrease_until_ms) {
            // At the aim already, or the last cut for the cache has not
            // shown in the smoothed usage yet (the cache empties only as
            // answers end): cutting again on the usage from before it
            // cuts twice for one excess (from 10 to 3 where 5 was the
            // level, in the benchmark's halving). With a queue above its
            // target too, the server is overloaded now, not draining: no
            // hold (the queue's aim is the running batch, which the drain
            // does not lower).
            return None;
        }
        let mut decreased = self.next(to, self.state.hold_increase_until_ms, 0);
        if by_cache {
            decreased.hold_decrease_until_ms = self.now_ms.saturating_add(signal_gap_ms(config));
        }
        Some((decreased, reason))
    }

    /// Room only when the cache is under its target both smoothed and now:
    /// a cache filling with one cohort of answers is a peak the smoothed
    /// value has not seen yet, and growing into it ends in preemptions.
    fn cache_has_room(&self, load: &Load) -> bool {
        load.kv_excess.is_none_or(|(over, target, _)| {
            over < -KV_DEADBAND
                && self
                    .sample
                    .kv_cache_usage
                    .is_none_or(|now| now < target - KV_DEADBAND)
        })
    }

    /// An increase with the queue and the cache below their targets:
    /// doubling in slow start, probing (additive, a whole slot at least,
    /// one signal gap apart) above the last decrease. `None`: not now.
    fn grow(&self, load: &Load) -> Option<(ControllerState, Reason)> {
        let (config, state, limit, now_ms) = (self.config, self.state, self.limit, self.now_ms);
        let hold_until = state.hold_increase_until_ms;
        let mut streak = state.increases;
        let mut slow_start_until = state.slow_start_until;
        let mut young_batch = state.young_batch;
        if slow_start_until.is_none()
            && cache_half_full(config, self.smoothed_kv_usage, self.sample)
        {
            // Slow start ends here (as HyStart ends TCP's on the first
            // sign of delay, before the loss): a call's cache grows over
            // its life, so a young batch holding half the target fills it
            // as it ages; doubling on until the gauge reaches the target
            // overshoots the batch by half (17 where 11 was the level, a
            // queue and preemptions for seconds). From here it probes.
            slow_start_until = Some(limit);
            young_batch = true;
            streak = 0;
        }
        // Above the last decrease the server pushed back before: probing.
        let probing = slow_start_until.is_some_and(|until| limit >= until);
        let doublings = if probing {
            (streak + 1).saturating_sub(ADDITIVE_STEPS)
        } else {
            streak
        };
        let (to, hold_until, increases, reason) = if now_ms < hold_until {
            // Waiting for a probe's effect (or a Retry-After): the streak
            // goes on.
            (limit, hold_until, streak, Reason::Hold)
        } else {
            // In use: the consumers' own calls (foreign requests at the
            // server do not use the limit).
            let own = Some(load.in_server - load.foreign);
            let to = increase(config, limit, hold_until, own, now_ms, doublings)?;
            let (to, hold_until) = if probing {
                self.probe(load, to, young_batch)
            } else {
                (to, hold_until)
            };
            (to, hold_until, streak.saturating_add(1), Reason::Headroom)
        };
        let mut grown = self.next(to, hold_until, increases);
        grown.slow_start_until = slow_start_until;
        grown.young_batch = young_batch;
        Some((grown, reason))
    }

    /// A probe above the last decrease: one whole slot at least (the cap is
    /// the limit's whole part: a fraction changes nothing and probes
    /// nothing), and the next probe only once the smoothed signals can show
    /// this one's effect.
    fn probe(&self, load: &Load, to: f64, young_batch: bool) -> (f64, u64) {
        let (config, limit) = (self.config, self.limit);
        let reach = if young_batch {
            limit.floor()
        } else {
            towards_cache_room(
                config,
                limit,
                (load.in_server, load.foreign),
                self.smoothed_kv_usage,
                self.sample,
            )
        };
        let to = to.max(limit.floor() + 1.0).max(reach);
        let hold_until = self
            .state
            .hold_increase_until_ms
            .max(self.now_ms.saturating_add(signal_gap_ms(config)));
        (to.min(self.ceiling), hold_until)
    }
}

/// A probe's reach when the cache shows room for more than one slot: the
/// same gradient as a decrease, upwards — `gain` of the way to the calls
/// that would fill the cache to its target, `in_server · target / usage`,
/// less the foreign requests in the server — on the smoothed usage (the current one swings with each cohort of
/// answers), to the nearest whole slot, within `× max_growth`. After the capacity
/// doubles the limit climbs in a few probes instead of one slot per
/// probe; near the level it is one slot. Not while the batch is young
/// (see [`ControllerState::young_batch`]): its calls hold less cache than
/// they will. The floor (no gauge: nothing).
fn towards_cache_room(
    config: &ModelControl,
    limit: f64,
    (in_server, foreign): (f64, f64),
    smoothed: Option<f64>,
    sample: &CapacitySample,
) -> f64 {
    let (Some(target), Some(usage)) = (config.target_kv_usage, smoothed.or(sample.kv_cache_usage))
    else {
        return limit.floor();
    };
    if usage <= 0.0 || in_server < 1.0 {
        return limit.floor();
    }
    let aim = in_server * target / usage - foreign;
    // The nearest whole slot: the smoothed usage lags a rising batch, and
    // `gain` of a lagging gap rounded down is one slot however wide it is.
    let reach = (limit + config.gain * (aim - limit)).round();
    reach.min(limit * config.max_growth).max(limit.floor())
}

/// Whether the KV cache, smoothed or now, holds half its target or more.
fn cache_half_full(config: &ModelControl, smoothed: Option<f64>, sample: &CapacitySample) -> bool {
    let Some(target) = config.target_kv_usage else {
        return false;
    };
    [smoothed, sample.kv_cache_usage]
        .into_iter()
        .flatten()
        .any(|usage| usage >= target / 2.0)
}

/// How long a change takes to show in the smoothed gauges: until they
/// have taken `ceil(1 / smoothing)` samples since it (less half an
/// interval, for a tick that comes early). A probe above the last
/// decrease waits this long for the next (probing faster than the signal
/// answers adds slots the server cannot hold before the first of them
/// shows, and each overshoot costs a decrease), and so does a decrease
/// for the KV cache.
fn signal_gap_ms(config: &ModelControl) -> u64 {
    let samples = (1.0 / config.smoothing).ceil().max(1.0) as u64;
    if samples <= 1 {
        return 0;
    }
    (samples - 1) * config.interval_ms + config.interval_ms / 2
}

/// The limit after an increase, when `in_use` (requests at the server;
/// `None`: unknown, assumed in use) reaches the limit and no overload hold
/// is on: `increase_step · 2^doublings`, at most `× max_growth`, at least
/// `increase_step`.
fn increase(
    config: &ModelControl,
    limit: f64,
    hold_until: u64,
    in_use: Option<f64>,
    now_ms: u64,
    doublings: u32,
) -> Option<f64> {
    let ceiling = f64::from(config.ceiling);
    // The cap applied is the limit's whole part: in use when at most one
    // slot of it (or one step, if larger) is idle.
    let used = in_use.is_none_or(|n| n + config.increase_step.max(1.0) >= limit.floor());
    if now_ms < hold_until || !used || limit >= ceiling {
        return None;
    }
    let doubled = config.increase_step * 2f64.powi(doublings.min(30) as i32);
    let by = doubled
        .min(limit * (config.max_growth - 1.0))
        .max(config.increase_step);
    Some((limit + by).min(ceiling))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn control() -> ModelControl {
        ModelControl {
            signal: SignalConfig::Responses,
            floor: 2,
            ceiling: 40,
            initial: Some(10),
            target_waiting: 2.0,
            increase_step: 1.0,
            max_growth: 1.5,
            smoothing: 0.5,
            decrease_factor: 0.5,
            gain: 0.5,
            target_kv_usage: Some(0.8),
            ttft_target_ms: Some(2000),
            interval_ms: 1000,
            in_quota_reserve: None,
        }
    }

    /// [`control`] without smoothing: each step reads its sample as it is.
    fn unsmoothed() -> ModelControl {
        ModelControl {
            smoothing: 1.0,
            ..control()
        }
    }

    fn load(waiting: f64, running: f64) -> CapacitySample {
        CapacitySample {
            waiting: Some(waiting),
            running: Some(running),
            ..CapacitySample::default()
        }
    }

    fn state(limit: f64) -> ControllerState {
        ControllerState {
            limit,
            ..ControllerState::default()
        }
    }

    /// Checks one step from `limit` on `sample` (at time 0): the next limit, and why.
    #[track_caller]
    fn assert_step(
        config: &ModelControl,
        limit: f64,
        sample: &CapacitySample,
        want: (f64, Reason),
    ) {
        let (next, reason) = step(config, state(limit), sample, 0);
        assert_eq!((next.limit, reason), want, "from {limit} on {sample:?}");
    }

    #[test]
    fn increases_under_target_when_the_limit_is_used_doubling_each_step() {
        let config = unsmoothed();
        let mut s = state(10.0);
        let mut limits = Vec::new();
        for _ in 0..4 {
            let (next, reason) = step(&config, s, &load(0.0, s.limit), 0);
            assert_eq!(reason, Reason::Headroom);
            limits.push(next.limit);
            s = next;
        }
        // +1, +2, +4, +8 (within × max_growth: 17 · 1.5 = 25.5).
        assert_eq!(limits, vec![11.0, 13.0, 17.0, 25.0]);
        let (next, _) = step(&config, s, &load(0.0, s.limit), 0);
        assert_eq!(next.limit, 37.5, "+16 capped at × 1.5");
        // A hold ends the streak: the next increase is one step again.
        let (held, reason) = step(&config, s, &load(2.0, 23.0), 0);
        assert_eq!(
            (held.limit, reason, held.increases),
            (25.0, Reason::Hold, 0)
        );
        let (next, _) = step(&config, held, &load(0.0, 25.0), 0);
        assert_eq!(next.limit, 26.0);
        // An unused limit says nothing about capacity: held.
        assert_step(&control(), 10.0, &load(0.0, 3.0), (10.0, Reason::Hold));
    }

    #[test]
    fn above_the_last_decrease_increases_are_additive_before_doubling() {
        let config = unsmoothed();
        // A queue of 8 with 12 running: down to 17, slow start ends there.
        let (mut s, reason) = step(&config, state(20.0), &load(8.0, 12.0), 0);
        assert_eq!(
            (s.limit, reason, s.slow_start_until),
            (17.0, Reason::QueueAboveTarget, Some(17.0))
        );
        let mut limits = Vec::new();
        for _ in 0..ADDITIVE_STEPS + 2 {
            s = step(&config, s, &load(0.0, s.limit), 0).0;
            limits.push(s.limit);
        }
        // ADDITIVE_STEPS steps of one, then doubling again.
        let additive: Vec<f64> = (1..=ADDITIVE_STEPS).map(|i| 17.0 + f64::from(i)).collect();
        assert_eq!(limits[..additive.len()], additive[..]);
        let last = 17.0 + f64::from(ADDITIVE_STEPS);
        assert_eq!(limits[additive.len()..], [last + 2.0, last + 6.0]);
    }

    #[test]
    fn slow_start_ends_when_the_cache_holds_half_its_target() {
        let config = unsmoothed();
        let sample = |running: f64, kv: f64| CapacitySample {
            kv_cache_usage: Some(kv),
            ..load(0.0, running)
        };
        // A young batch: the cache at a quarter of its 0.8 target, doubling.
        let (s, _) = step(&config, state(10.0), &sample(10.0, 0.2), 0);
        let (s, _) = step(&config, s, &sample(11.0, 0.25), 1000);
        assert_eq!((s.limit, s.slow_start_until), (13.0, None));
        // Half the target: from here a whole slot per probe, not + 4.
        let (s, reason) = step(&config, s, &sample(13.0, 0.4), 2000);
        assert_eq!(
            (s.limit, reason, s.slow_start_until),
            (14.0, Reason::Headroom, Some(13.0))
        );
        let (s, _) = step(&config, s, &sample(14.0, 0.45), 5000);
        assert_eq!(s.limit, 15.0);
    }

    #[test]
    fn a_probe_reaches_towards_the_room_the_cache_shows() {
        let config = ModelControl {
            target_kv_usage: Some(0.6),
            ..unsmoothed()
        };
        let probing = |limit| ControllerState {
            slow_start_until: Some(5.0),
            ..state(limit)
        };
        let sample = |running: f64, kv: f64| CapacitySample {
            kv_cache_usage: Some(kv),
            ..load(0.0, running)
        };
        // The capacity doubled: 5 calls fill the cache to 0.3 of a 0.6
        // target, room for 10: half the way, 7.5, is 8, within × 1.5: 7.5
        // (one slot would be 6).
        let (s, reason) = step(&config, probing(5.0), &sample(5.0, 0.3), 0);
        assert_eq!((s.limit, reason), (7.5, Reason::Headroom));
        // Near the level (10 fill it to 0.5, room for 12): one slot.
        let (s, _) = step(&config, probing(10.0), &sample(10.0, 0.5), 0);
        assert_eq!(s.limit, 11.0);
        // Never more than × max_growth in one probe.
        let (s, _) = step(&config, probing(6.0), &sample(6.0, 0.05), 0);
        assert_eq!(s.limit, 9.0);
    }

    #[test]
    fn a_target_of_half_a_request_or_less_still_grows_on_an_empty_queue() {
        for target_waiting in [0.0, 0.25, 0.5] {
            let config = ModelControl {
                target_waiting,
                increase_step: 0.5,
                ..unsmoothed()
            };
            let (next, reason) = step(&config, state(8.0), &load(0.0, 8.0), 0);
            assert!(
                next.limit > 8.0,
                "target {target_waiting}: {reason:?} at {}",
                next.limit
            );
            // A queue of a whole request is over these targets: no growth.
            let (next, _) = step(&config, state(8.0), &load(1.0, 8.0), 0);
            assert!(
                next.limit <= 8.0,
                "target {target_waiting}: grew to {}",
                next.limit
            );
        }
    }

    #[test]
    fn the_room_to_grow_is_unchanged_for_targets_of_a_request_or_more() {
        for (target, room_below) in [(1.0, 0.5), (2.0, 1.5), (4.0, 3.5)] {
            assert!(queue_has_room(room_below - 0.01, target));
            assert!(!queue_has_room(room_below, target));
        }
        assert!(queue_has_room(0.2, 0.5) && !queue_has_room(0.25, 0.5));
        assert!(queue_has_room(0.04, 0.0) && !queue_has_room(0.05, 0.0));
    }

    #[test]
    fn a_fractional_step_sees_the_whole_cap_in_use() {
        // Limit 7.9 applies a cap of 7; 7 at the server is the cap in use.
        let config = ModelControl {
            increase_step: 0.5,
            ..unsmoothed()
        };
        assert_step(&config, 7.9, &load(0.0, 7.0), (8.4, Reason::Headroom));
        assert_step(&config, 7.9, &load(0.0, 5.0), (7.9, Reason::Hold));
    }

    #[test]
    fn answers_only_increase_stays_additive() {
        let mut s = state(10.0);
        for expected in [11.0, 12.0, 13.0] {
            s = step(&control(), s, &CapacitySample::default(), 0).0;
            assert_eq!(s.limit, expected);
        }
    }

    #[test]
    fn decreases_towards_the_running_batch_plus_target() {
        let config = unsmoothed();
        // 20 in the server, 12 running: aim 14, gain 0.5 → 17.
        assert_step(
            &config,
            20.0,
            &load(8.0, 12.0),
            (17.0, Reason::QueueAboveTarget),
        );
        // A huge queue is cut by at most the decrease factor in one step.
        let steep = ModelControl {
            gain: 1.0,
            ..config.clone()
        };
        let (next, _) = step(&steep, state(20.0), &load(100.0, 2.0), 0);
        assert_eq!(next.limit, 10.0);
        // At the target: held.
        assert_step(&config, 14.0, &load(2.0, 12.0), (14.0, Reason::Hold));
        // The limit is at the aim already while the queue drains: no second cut.
        assert_step(&config, 14.0, &load(6.0, 12.0), (14.0, Reason::Hold));
    }

    #[test]
    fn the_queue_is_smoothed() {
        // One sample of 6 waiting after a quiet queue at the target: the
        // smoothed queue (0.5 · 6 + 0.5 · 2 = 4) is above it, but a single
        // spike of 3 is not.
        let quiet = step(&control(), state(14.0), &load(2.0, 12.0), 0).0;
        assert_eq!(quiet.smoothed_waiting, Some(2.0));
        let (_, reason) = step(&control(), quiet, &load(3.0, 12.0), 0);
        assert_eq!(reason, Reason::Hold);
        let (next, reason) = step(&control(), quiet, &load(6.0, 10.0), 0);
        assert_eq!(next.smoothed_waiting, Some(4.0));
        assert_eq!(reason, Reason::QueueAboveTarget);
    }

    #[test]
    fn overload_answers_cut_and_hold_increases_for_retry_after() {
        let overloaded = CapacitySample {
            overloaded: 3,
            retry_after_ms: Some(5000),
            ..CapacitySample::default()
        };
        let (next, reason) = step(&control(), state(20.0), &overloaded, 1000);
        assert_eq!((next.limit, reason), (10.0, Reason::Overloaded));
        assert_eq!(next.hold_increase_until_ms, 6000);
        // Room again, but the Retry-After hold is on until 6000.
        let (held, reason) = step(&control(), next, &load(0.0, 10.0), 3000);
        assert_eq!((held.limit, reason), (10.0, Reason::Hold));
        let (grown, reason) = step(&control(), held, &load(0.0, 10.0), 6000);
        assert_eq!((grown.limit, reason), (11.0, Reason::Headroom));
    }

    #[test]
    fn slow_first_token_decreases() {
        let slow = CapacitySample {
            ttft_ms: Some(2500.0),
            ..load(0.0, 10.0)
        };
        assert_step(&control(), 10.0, &slow, (5.0, Reason::SlowFirstToken));
    }

    #[test]
    fn floor_and_ceiling_hold() {
        let overloaded = CapacitySample {
            overloaded: 1,
            ..CapacitySample::default()
        };
        let mut s = state(3.0);
        for _ in 0..10 {
            s = step(&control(), s, &overloaded, 0).0;
        }
        assert_eq!(s.limit, 2.0);
        let mut s = state(38.0);
        for t in 0..10 {
            s = step(&control(), s, &load(0.0, 100.0), t).0;
        }
        assert_eq!(s.limit, 40.0);
        let (s, reason) = step(&control(), s, &load(0.0, 100.0), 11);
        assert_eq!((s.limit, reason), (40.0, Reason::Hold));
        assert_eq!(s.cap(), 40);
    }

    #[test]
    fn a_full_kv_cache_decreases_and_blocks_increases() {
        let config = unsmoothed();
        let kv = |waiting, running, usage| CapacitySample {
            kv_cache_usage: Some(usage),
            ..load(waiting, running)
        };
        // 16 in the server fill the cache to 1.0: aim 16 · 0.8 = 12.8,
        // gain 0.5 → 18 − 2.6 = 15.4; even with a short queue.
        let (next, reason) = step(&config, state(18.0), &kv(0.0, 16.0, 1.0), 0);
        assert_eq!(reason, Reason::KvCacheAboveTarget);
        assert!((next.limit - 15.4).abs() < 1e-9, "{}", next.limit);
        // Near the target (± 0.05): held, though the queue is empty.
        assert_step(&config, 12.0, &kv(0.0, 12.0, 0.83), (12.0, Reason::Hold));
        // Well under it: room.
        assert_step(&config, 12.0, &kv(0.0, 12.0, 0.5), (13.0, Reason::Headroom));
        // Smoothed under the target but full right now: no increase.
        let calm = step(&config, state(12.0), &kv(0.0, 12.0, 0.5), 0).0;
        let peak = ModelControl {
            smoothing: 0.3,
            ..config.clone()
        };
        let (next, reason) = step(&peak, calm, &kv(0.0, 12.0, 0.9), 0);
        assert!(next.smoothed_kv_usage.is_some_and(|kv| kv < 0.75));
        assert_eq!((next.limit, reason), (13.0, Reason::Hold));
        // Off: the cache is not looked at.
        let off = ModelControl {
            target_kv_usage: None,
            ..config.clone()
        };
        let (_, reason) = step(&off, state(12.0), &kv(0.0, 12.0, 1.0), 0);
        assert_eq!(reason, Reason::Headroom);
    }

    /// A model server with `capacity` batch slots behind consumers that
    /// keep the limit in flight: what is not running waits; each step a
    /// quarter of the running requests end (a call lasts ~4 intervals), and
    /// the consumers refill up to the limit — a lowered limit is reached
    /// only as calls end. `jitter` alternates the queue by ± that much, as
    /// a sampled gauge would.
    struct Server {
        capacity: f64,
        in_server: f64,
        jitter: f64,
        steps: u64,
    }

    impl Server {
        fn sample(&self) -> CapacitySample {
            let running = self.in_server.min(self.capacity);
            let sign = if self.steps.is_multiple_of(2) {
                1.0
            } else {
                -1.0
            };
            let waiting = (self.in_server - running + sign * self.jitter).max(0.0);
            load(waiting, running)
        }

        fn advance(&mut self, limit: f64) {
            let ended = self.in_server.min(self.capacity) / 4.0;
            self.in_server = (self.in_server - ended).max(limit.floor());
            self.steps += 1;
        }
    }

    /// Runs `steps` steps; the limit after each.
    fn drive(
        config: &ModelControl,
        s: &mut ControllerState,
        server: &mut Server,
        steps: u64,
    ) -> Vec<f64> {
        (0..steps)
            .map(|_| {
                let now_ms = server.steps * config.interval_ms;
                let (next, _) = step(config, *s, &server.sample(), now_ms);
                *s = next;
                server.advance(s.limit);
                s.limit
            })
            .collect()
    }

    /// Steps until the limit stays within ±10 % of `aim` to the end of `trace`.
    fn settled_after(trace: &[f64], aim: f64) -> Option<usize> {
        let outside = trace.iter().rposition(|l| (l - aim).abs() > 0.1 * aim);
        match outside {
            None => Some(0),
            Some(i) if i + 1 < trace.len() => Some(i + 1),
            Some(_) => None,
        }
    }

    #[test]
    fn converges_to_a_capacity_and_follows_a_halving_and_a_restore() {
        for jitter in [0.0, 1.0] {
            let config = ModelControl {
                ceiling: 200,
                floor: 1,
                ..control()
            };
            let mut s = state(1.0);
            let mut server = Server {
                capacity: 32.0,
                in_server: 0.0,
                jitter,
                steps: 0,
            };
            // From the floor: capacity 32 + target 2 in a dozen steps
            // (one step per interval would take 33).
            let start = drive(&config, &mut s, &mut server, 40);
            let settled = settled_after(&start, 34.0);
            assert!(
                settled.is_some_and(|n| n <= 12),
                "jitter {jitter}: {settled:?} {start:?}"
            );
            // Settled: no oscillation beyond ±2 around the aim.
            let tail = &start[20..];
            assert!(
                tail.iter().all(|l| (l - 34.0).abs() <= 2.0),
                "jitter {jitter}: {tail:?}"
            );
            // Capacity halves: 16 + 2 within 10 steps.
            server.capacity = 16.0;
            let cut = drive(&config, &mut s, &mut server, 30);
            let settled = settled_after(&cut, 18.0);
            assert!(
                settled.is_some_and(|n| n <= 10),
                "jitter {jitter}: {settled:?} {cut:?}"
            );
            // And no undershoot below the new batch while the queue drains.
            assert!(cut.iter().all(|l| *l >= 16.0), "jitter {jitter}: {cut:?}");
            // Restored (the capacity doubles: +16): back to 34 within
            // ADDITIVE_STEPS gentle steps and a few doublings.
            server.capacity = 32.0;
            let restore = drive(&config, &mut s, &mut server, 30);
            let settled = settled_after(&restore, 34.0);
            assert!(
                // Each of the ADDITIVE_STEPS gentle probes waits a probe
                // gap (2 steps at smoothing 0.5), then a few doublings.
                settled.is_some_and(|n| n <= 2 * ADDITIVE_STEPS as usize + 5),
                "jitter {jitter}: {settled:?} {restore:?}"
            );
        }
    }

    #[test]
    fn a_kv_cache_decrease_waits_for_the_signal_before_the_next() {
        let config = ModelControl {
            smoothing: 0.3,
            interval_ms: 500,
            ..control()
        };
        let full = |running| CapacitySample {
            kv_cache_usage: Some(1.0),
            ..load(0.0, running)
        };
        // A full cache at 10: cut towards 10 · 0.8 = 8, halfway: 9.
        let (s, reason) = step(&config, state(10.0), &full(10.0), 0);
        assert_eq!((s.limit, reason), (9.0, Reason::KvCacheAboveTarget));
        // Still full while the cut drains: held for 4 samples, not cut again.
        let mut s = s;
        for now in [500, 1000, 1500] {
            let (held, reason) = step(&config, s, &full(10.0), now);
            assert_eq!((held.limit, reason), (9.0, Reason::Hold));
            s = held;
        }
        let (s, reason) = step(&config, s, &full(9.0), 2000);
        assert_eq!(reason, Reason::KvCacheAboveTarget);
        assert!(s.limit < 9.0, "{}", s.limit);
        // Nor a cut with a queue above its target as well.
        let holding = |smoothed_waiting| ControllerState {
            hold_decrease_until_ms: 10_000,
            smoothed_waiting: Some(smoothed_waiting),
            smoothed_kv_usage: Some(1.0),
            ..state(12.0)
        };
        let queued = CapacitySample {
            waiting: Some(3.0),
            ..full(9.0)
        };
        // Queue aim 9 + 2 = 11, cache aim 12 · 0.8 = 9.6: halfway, 10.8.
        let (cut, reason) = step(&config, holding(3.0), &queued, 2500);
        assert_eq!(reason, Reason::KvCacheAboveTarget);
        assert!((cut.limit - 10.8).abs() < 1e-9, "{}", cut.limit);
        let (held, reason) = step(&config, holding(0.0), &full(12.0), 2500);
        assert_eq!((held.limit, reason), (12.0, Reason::Hold));
        // An overload answer is not held.
        let refused = CapacitySample {
            overloaded: 1,
            ..full(9.0)
        };
        let (cut, reason) = step(&config, s, &refused, 3000);
        assert_eq!(reason, Reason::Overloaded);
        assert!(cut.limit < s.limit);
    }

    #[test]
    fn a_probe_above_the_last_decrease_is_a_whole_slot_and_waits_for_the_signal() {
        // The pacing benchmark's settings: smoothed over ~3 samples.
        let config = ModelControl {
            smoothing: 0.3,
            increase_step: 0.5,
            interval_ms: 500,
            ..control()
        };
        let s = ControllerState {
            slow_start_until: Some(5.0),
            ..state(5.05)
        };
        // Cap 5 → 6: half a step would leave the cap at 5 and probe nothing.
        let (s, reason) = step(&config, s, &load(0.0, 5.0), 0);
        assert_eq!((s.limit, reason), (6.0, Reason::Headroom));
        // Room still, but ceil(1 / 0.3) = 4 samples must see the probe first;
        // the streak goes on meanwhile.
        let mut s = s;
        for now in [500, 1000, 1500] {
            let (held, reason) = step(&config, s, &load(0.0, 6.0), now);
            assert_eq!((held.limit, reason, held.increases), (6.0, Reason::Hold, 1));
            s = held;
        }
        let (s, reason) = step(&config, s, &load(0.0, 6.0), 2000);
        assert_eq!((s.limit, reason), (7.0, Reason::Headroom));
    }

    /// A server whose gauges show the load of `delay` steps ago (a call's
    /// effect on the server shows over its life, not when it starts):
    /// `capacity` run, the rest waits; backlogged consumers fill the cap
    /// at once.
    struct DelayedServer {
        capacity: f64,
        delay: usize,
        history: Vec<f64>,
    }

    impl DelayedServer {
        fn sample(&self) -> CapacitySample {
            let at = self.history.len().saturating_sub(1 + self.delay);
            let in_server = self.history.get(at).copied().unwrap_or(0.0);
            let running = in_server.min(self.capacity);
            load(in_server - running, running)
        }
    }

    #[test]
    fn probing_near_the_level_overshoots_by_at_most_a_slot_under_a_delayed_signal() {
        let config = ModelControl {
            smoothing: 0.3,
            increase_step: 0.5,
            interval_ms: 500,
            ..control()
        };
        // Just after a cut to 4 on a server that runs 4: the level is
        // 4 + 2 waiting = 6. The gauges lag 3 steps (1.5 s).
        let mut s = ControllerState {
            slow_start_until: Some(4.0),
            ..state(4.0)
        };
        let mut server = DelayedServer {
            capacity: 4.0,
            delay: 3,
            history: vec![4.0],
        };
        let mut caps = Vec::new();
        for i in 0..80u64 {
            s = step(&config, s, &server.sample(), i * config.interval_ms).0;
            server.history.push(s.limit.floor());
            caps.push(s.cap());
        }
        // Probing every step would add slots for the 3 steps the gauges lag
        // and the ~3 the smoothing takes: 8 or more before the first pushback.
        assert!(caps.iter().all(|c| *c <= 7), "{caps:?}");
        // And it reaches the level and stays within a slot of it.
        assert!(caps[20..].iter().all(|c| (5..=7).contains(c)), "{caps:?}");
    }

    /// A sample of a server running `running` and queueing `waiting`, of
    /// which `own` are the consumers' calls.
    fn shared(waiting: f64, running: f64, own: f64) -> CapacitySample {
        CapacitySample {
            own_in_flight: Some(own),
            ..load(waiting, running)
        }
    }

    #[test]
    fn foreign_requests_at_the_server_shrink_the_consumers_aim() {
        let config = unsmoothed();
        // 12 running, 8 waiting; 14 of the 20 are the consumers' own, 6
        // came in quota straight to the server. The server holds 12 + 2 for
        // everyone, so the consumers' share is 14 − 6 = 8: halfway, 11.
        assert_step(
            &config,
            14.0,
            &shared(8.0, 12.0, 14.0),
            (11.0, Reason::QueueAboveTarget),
        );
        // Counted as the consumers' own (no count, the old law): the limit is
        // at running + target already and holds, and the 6 foreign requests
        // queue behind the consumers' calls for good.
        assert_step(&config, 14.0, &load(8.0, 12.0), (14.0, Reason::Hold));
        // The cut drains without a second one: 3 own calls ended unreplaced,
        // 3 waiting took their places (11 own, 6 foreign, 12 running, 5
        // waiting): the aim is still 8, the limit 11 → 9.5, not lower.
        let (next, _) = step(&config, state(11.0), &shared(5.0, 12.0, 11.0), 0);
        assert_eq!(next.limit, 9.5);
        // The KV cache's aim is shared the same way: 20 in the server fill
        // it to 1.0, 16 would fill it to the 0.8 target, 6 are foreign: 10.
        let kv = CapacitySample {
            kv_cache_usage: Some(1.0),
            ..shared(0.0, 20.0, 14.0)
        };
        assert_step(&config, 14.0, &kv, (12.0, Reason::KvCacheAboveTarget));
    }

    /// [`unsmoothed`] on the server's gauges, a batch of 32, 4 slots
    /// reserved for in-quota requests.
    fn reserving() -> ModelControl {
        ModelControl {
            signal: SignalConfig::Prometheus {
                url: "http://gpu:8000/metrics".into(),
            },
            in_quota_reserve: Some(InQuotaReserve {
                server_max_running: 32,
                slots: 4,
            }),
            ..unsmoothed()
        }
    }

    #[test]
    fn the_in_quota_reserve_lowers_the_limit_as_foreign_requests_arrive() {
        let config = reserving();
        // (waiting, running, own) at a batch of 32 with 4 reserved; from 20.
        let cases = [
            // 10 of 30 running are in-quota requests: room for 32 − 4 − 10
            // = 18 calls of the consumers', though the queue alone would
            // let them grow.
            ((0.0, 30.0, 20.0), (18.0, Reason::InQuotaReserve)),
            // In-quota requests waiting (the batch is full) count too.
            ((3.0, 32.0, 20.0), (13.0, Reason::InQuotaReserve)),
            // A batch full of foreign requests leaves the consumers their floor.
            ((10.0, 32.0, 1.0), (2.0, Reason::InQuotaReserve)),
            // The law's own cuts still apply under the room: 8 foreign leave
            // room for 20; the queue's aim is 24 + 2 − 8 = 18, halfway 19.
            ((8.0, 24.0, 24.0), (19.0, Reason::QueueAboveTarget)),
        ];
        for ((waiting, running, own), want) in cases {
            assert_step(&config, 20.0, &shared(waiting, running, own), want);
        }
    }

    #[test]
    fn the_in_quota_reserve_lets_deferred_work_fill_the_rest() {
        let config = reserving();
        // Nothing foreign: the consumers grow up to 32 − 4 = 28, no further
        // (doubling from 20 would reach 21, 23, 27, 35); there, growing is
        // holding.
        let in_use = |s: &ControllerState| {
            let own = s.cap() as f64;
            step(&config, *s, &shared(0.0, own, own), 0)
        };
        let steps: Vec<(f64, Reason)> =
            std::iter::successors(Some(in_use(&state(20.0))), |(s, _)| Some(in_use(s)))
                .take(6)
                .map(|(s, reason)| (s.limit, reason))
                .collect();
        let held = (28.0, Reason::Hold);
        assert_eq!(
            steps[..3],
            [21.0, 23.0, 27.0].map(|l| (l, Reason::Headroom))
        );
        assert_eq!(steps[3].0, 28.0);
        assert_eq!(steps[4..], [held, held]);
        // The in-quota requests end: the room comes back at once.
        let back = (19.0, Reason::Headroom);
        assert_step(&config, 18.0, &shared(0.0, 18.0, 18.0), back);
    }

    #[test]
    fn a_reserve_without_a_server_sample_holds_the_limit() {
        let config = reserving();
        // The scrape failed: answers only, none refused. The law alone
        // grows a limit in use; the reserve cannot tell its room, so holds.
        let answers_only = CapacitySample {
            own_in_flight: Some(20.0),
            ..CapacitySample::default()
        };
        let plain = ModelControl {
            in_quota_reserve: None,
            ..reserving()
        };
        assert!(step(&plain, state(20.0), &answers_only, 0).0.limit > 20.0);
        assert_step(&config, 20.0, &answers_only, (20.0, Reason::Hold));
        // Cuts still go through.
        let refused = CapacitySample {
            overloaded: 1,
            ..answers_only
        };
        assert_step(&config, 20.0, &refused, (10.0, Reason::Overloaded));
    }

    #[test]
    fn without_the_consumers_count_the_reserve_only_holds() {
        let config = reserving();
        let reserve = config.in_quota_reserve.unwrap();
        // Gauges without the consumers' count: foreign unknown, no room
        // to compute. The law's cut goes through; its growth is held.
        assert_eq!(reserve.room(&load(0.0, 30.0)), None);
        assert_eq!(
            step(&config, state(20.0), &load(8.0, 12.0), 0),
            step(&unsmoothed(), state(20.0), &load(8.0, 12.0), 0),
        );
        let grown = step(&unsmoothed(), state(20.0), &load(0.0, 30.0), 0).0;
        assert!(grown.limit > 20.0, "{grown:?}");
        assert_step(&config, 20.0, &load(0.0, 30.0), (20.0, Reason::Hold));
        // With the count: the batch less the slots less the foreign ones.
        assert_eq!(reserve.room(&shared(0.0, 30.0, 20.0)), Some(18.0));
    }

    #[test]
    fn the_in_quota_reserve_is_validated() {
        let problem = |slots: u32, signal: SignalConfig| {
            let config = ModelControl {
                signal,
                in_quota_reserve: Some(InQuotaReserve {
                    server_max_running: 32,
                    slots,
                }),
                ..reserving()
            };
            config.validate("m").err().map(|e| e.problem)
        };
        let gauges = reserving().signal;
        assert_eq!(problem(4, gauges.clone()), None);
        assert_eq!(
            problem(0, gauges.clone()),
            Some("in_quota_reserve.slots must be at least 1")
        );
        assert_eq!(
            problem(32, gauges),
            Some("in_quota_reserve.slots must be below server_max_running")
        );
        assert_eq!(
            problem(4, SignalConfig::Responses),
            Some("in_quota_reserve needs the server's gauges (signal.kind: prometheus)")
        );
    }

    #[test]
    fn without_foreign_requests_the_law_is_unchanged() {
        let config = ModelControl {
            smoothing: 0.5,
            ..control()
        };
        // Every request at the server is the consumers' own: stepping with
        // the count or without it gives the same states, whatever the load.
        let samples = [
            (0.0, 10.0, None),
            (0.0, 11.0, Some(0.5)),
            (6.0, 12.0, Some(0.7)),
            (9.0, 12.0, Some(0.95)),
            (2.0, 12.0, Some(0.8)),
            (0.0, 9.0, Some(0.4)),
            (0.0, 10.0, Some(0.45)),
        ];
        let (mut with, mut without) = (state(10.0), state(10.0));
        for (i, (waiting, running, kv)) in samples.into_iter().enumerate() {
            let plain = CapacitySample {
                kv_cache_usage: kv,
                ..load(waiting, running)
            };
            let counted = CapacitySample {
                own_in_flight: Some(waiting + running),
                ..plain
            };
            assert_eq!(counted.foreign(), 0.0);
            let now = i as u64 * config.interval_ms;
            let a = step(&config, with, &counted, now);
            let b = step(&config, without, &plain, now);
            assert_eq!(a, b, "sample {i}");
            (with, without) = (a.0, b.0);
        }
        // More own calls than the gauges show (a call on its way): no
        // negative foreign load.
        assert_eq!(shared(0.0, 4.0, 6.0).foreign(), 0.0);
        // Answers only: nothing is foreign.
        let answers = CapacitySample {
            own_in_flight: Some(3.0),
            ..CapacitySample::default()
        };
        assert_eq!(answers.foreign(), 0.0);
    }

    #[test]
    fn a_limit_is_in_use_only_by_the_consumers_own_calls() {
        let config = unsmoothed();
        // 15 running, no queue, but only 5 of them are the consumers' own
        // under a cap of 10: the limit is not used, so no increase.
        assert_step(&config, 10.0, &shared(0.0, 15.0, 5.0), (10.0, Reason::Hold));
        // Its own 10 in use beside 5 foreign, room at the server: grow
        // (work-conserving: light in-quota traffic leaves the batch to the
        // deferred work).
        assert_step(
            &config,
            10.0,
            &shared(0.0, 15.0, 10.0),
            (11.0, Reason::Headroom),
        );
    }

    /// A server with `capacity` batch slots holding `foreign` requests that
    /// are not the consumers' (in-quota traffic, replaced as they end)
    /// beside the consumers' own calls (backlogged: refilled up to the
    /// limit); each step a quarter of the running requests end, own and
    /// foreign in proportion.
    struct SharedServer {
        capacity: f64,
        foreign: f64,
        own: f64,
    }

    impl SharedServer {
        fn sample(&self, counted: bool) -> CapacitySample {
            let in_server = self.own + self.foreign;
            let running = in_server.min(self.capacity);
            CapacitySample {
                own_in_flight: counted.then_some(self.own),
                ..load(in_server - running, running)
            }
        }

        fn waiting(&self) -> f64 {
            (self.own + self.foreign - self.capacity).max(0.0)
        }

        fn advance(&mut self, limit: f64) {
            let in_server = self.own + self.foreign;
            let running = in_server.min(self.capacity);
            let ended = running / 4.0 * self.own / in_server.max(1.0);
            self.own = (self.own - ended).max(limit.floor());
        }
    }

    #[test]
    fn with_foreign_load_the_server_queue_settles_at_the_target_for_everyone() {
        let config = ModelControl {
            ceiling: 200,
            ..control()
        };
        let run = |counted: bool| {
            let mut s = state(1.0);
            let mut server = SharedServer {
                capacity: 32.0,
                foreign: 10.0,
                own: 0.0,
            };
            let mut waiting = Vec::new();
            for i in 0..60u64 {
                let (next, _) = step(&config, s, &server.sample(counted), i * 1000);
                s = next;
                server.advance(s.limit);
                waiting.push(server.waiting());
            }
            (s.limit, waiting)
        };
        // Counting its own calls: 32 + 2 − 10 = 24 for the consumers, and
        // the queue (which the in-quota requests wait in) at the target.
        let (limit, waiting) = run(true);
        assert!((limit - 24.0).abs() <= 2.0, "{limit}");
        assert!(
            waiting[30..].iter().all(|w| *w <= 4.0),
            "{:?}",
            &waiting[30..]
        );
        // Not counting them (the old law): the consumers keep running +
        // target to themselves, and the foreign 10 queue on top.
        let (limit, waiting) = run(false);
        assert!(limit >= 32.0, "{limit}");
        assert!(waiting[30..].iter().all(|w| *w >= 10.0), "{waiting:?}");
    }

    #[test]
    fn static_is_the_default_and_bad_settings_are_refused() {
        let config: ControllerConfig = serde_yaml::from_str(
            "models:\n  llama:\n    signal: {kind: responses}\n    floor: 2\n    ceiling: 8\n  other: {}\n",
        )
        .unwrap_or_default();
        assert!(config.for_model("llama").is_some());
        assert!(config.for_model("other").is_none());
        assert!(config.for_model("unknown").is_none());
        assert!(config.validate().is_ok());
        let bad = ModelControl {
            floor: 0,
            ..control()
        };
        assert!(bad.validate("m").is_err());
        let bad = ModelControl {
            ceiling: 1,
            ..control()
        };
        assert!(bad.validate("m").is_err());
        let bad = ModelControl {
            decrease_factor: 1.0,
            ..control()
        };
        assert!(bad.validate("m").is_err());
    }
}
