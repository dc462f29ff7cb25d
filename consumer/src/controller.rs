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
//! **The law** (AIMD with a gradient decrease, after TCP congestion control
//! and Netflix's concurrency-limits), once per `interval`:
//!
//! * an overload answer (429 / 503) since the last step → multiplicative
//!   decrease (`× decrease_factor`), and no increase before the server's
//!   `Retry-After` (at least one interval) has passed;
//! * time to first token above `ttft_target_ms` (optional) → multiplicative
//!   decrease;
//! * requests waiting at the server above `target_waiting` → decrease by
//!   the excess (`limit − gain · (waiting − target)`): requests in the server
//!   ≈ the limit, so the excess is how far the limit is above capacity +
//!   target; never below `limit · decrease_factor` in one step;
//! * waiting below the target and the limit in use (requests at the server
//!   ≥ `limit − increase_step`) → additive increase by `increase_step`; an
//!   unused limit is held (it says nothing about capacity);
//! * always within `[floor, ceiling]`.
//!
//! [`step`] is pure; the runtime part (Redis state shared by the
//! instances, the lease, metrics) is below it.

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
    /// Additive increase per interval.
    pub increase_step: f64,
    /// Multiplicative decrease on overload, in (0, 1).
    pub decrease_factor: f64,
    /// Share of the excess waiting removed per step, in (0, 1].
    pub gain: f64,
    /// Time to first token above which the limit decreases (optional).
    pub ttft_target_ms: Option<u64>,
    /// Step period, ms.
    pub interval_ms: u64,
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
            decrease_factor: 0.7,
            gain: 0.5,
            ttft_target_ms: None,
            interval_ms: 1000,
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
        } else if !(self.decrease_factor > 0.0 && self.decrease_factor < 1.0) {
            Some("decrease_factor must lie in (0, 1)")
        } else if !(self.gain > 0.0 && self.gain <= 1.0) {
            Some("gain must lie in (0, 1]")
        } else if self.interval_ms < 50 {
            Some("interval_ms must be at least 50")
        } else {
            None
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
            hold_increase_until_ms: 0,
        }
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
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct ControllerState {
    /// Admitted concurrency, fractional so additive steps below 1 add up;
    /// the cap applied is its floor ([`ControllerState::cap`]).
    pub limit: f64,
    /// No increase before this time (after an overload answer's Retry-After).
    pub hold_increase_until_ms: u64,
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
    /// Fewer waiting than the target while the limit is in use.
    Headroom,
    /// Nothing to do: at target, limit unused, held after an overload, or
    /// at floor / ceiling.
    Hold,
    /// An operator's override (not a controller step).
    Override,
}

impl Reason {
    pub const ALL: [Reason; 6] = [
        Reason::Overloaded,
        Reason::SlowFirstToken,
        Reason::QueueAboveTarget,
        Reason::Headroom,
        Reason::Hold,
        Reason::Override,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Overloaded => "overloaded",
            Reason::SlowFirstToken => "slow_first_token",
            Reason::QueueAboveTarget => "queue_above_target",
            Reason::Headroom => "headroom",
            Reason::Hold => "hold",
            Reason::Override => "override",
        }
    }
}

/// Half a request: a queue this close to the target is at the target.
const DEADBAND: f64 = 0.5;

/// One controller step: the next state and why.
pub fn step(
    config: &ModelControl,
    state: ControllerState,
    sample: &CapacitySample,
    now_ms: u64,
) -> (ControllerState, Reason) {
    let floor = f64::from(config.floor);
    let ceiling = f64::from(config.ceiling);
    let limit = state.limit.clamp(floor, ceiling);
    let decreased = |to: f64, reason, hold_until| {
        let next = ControllerState {
            limit: to.clamp(floor, ceiling),
            hold_increase_until_ms: hold_until,
        };
        (next, reason)
    };
    if sample.overloaded > 0 {
        let hold = sample.retry_after_ms.unwrap_or(0).max(config.interval_ms);
        let hold_until = now_ms
            .saturating_add(hold)
            .max(state.hold_increase_until_ms);
        return decreased(
            limit * config.decrease_factor,
            Reason::Overloaded,
            hold_until,
        );
    }
    let hold_until = state.hold_increase_until_ms;
    if let (Some(target), Some(ttft)) = (config.ttft_target_ms, sample.ttft_ms) {
        if ttft > target as f64 {
            return decreased(
                limit * config.decrease_factor,
                Reason::SlowFirstToken,
                hold_until,
            );
        }
    }
    let held = |limit| {
        (
            ControllerState {
                limit,
                hold_increase_until_ms: hold_until,
            },
            Reason::Hold,
        )
    };
    let Some(waiting) = sample.waiting else {
        // Answers only: no news is room to grow, when the limit is in use.
        return grow_if_used(config, limit, hold_until, sample.running, now_ms)
            .unwrap_or_else(|| held(limit));
    };
    let excess = waiting - config.target_waiting;
    if excess > DEADBAND {
        let by = (config.gain * excess).max(1.0);
        let to = (limit - by).max(limit * config.decrease_factor);
        return decreased(to, Reason::QueueAboveTarget, hold_until);
    }
    if excess < -DEADBAND {
        let in_server = waiting + sample.running.unwrap_or(0.0);
        return grow_if_used(config, limit, hold_until, Some(in_server), now_ms)
            .unwrap_or_else(|| held(limit));
    }
    held(limit)
}

/// Additive increase when `in_use` (requests at the server; `None`: unknown,
/// assumed in use) reaches the limit and no overload hold is on.
fn grow_if_used(
    config: &ModelControl,
    limit: f64,
    hold_until: u64,
    in_use: Option<f64>,
    now_ms: u64,
) -> Option<(ControllerState, Reason)> {
    let ceiling = f64::from(config.ceiling);
    let used = in_use.is_none_or(|n| n >= limit - config.increase_step);
    if now_ms < hold_until || !used || limit >= ceiling {
        return None;
    }
    Some((
        ControllerState {
            limit: (limit + config.increase_step).min(ceiling),
            hold_increase_until_ms: hold_until,
        },
        Reason::Headroom,
    ))
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
            decrease_factor: 0.5,
            gain: 0.5,
            ttft_target_ms: Some(2000),
            interval_ms: 1000,
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
            hold_increase_until_ms: 0,
        }
    }

    #[test]
    fn increases_under_target_when_the_limit_is_used() {
        let (next, reason) = step(&control(), state(10.0), &load(0.0, 10.0), 0);
        assert_eq!((next.limit, reason), (11.0, Reason::Headroom));
        // An unused limit says nothing about capacity: held.
        let (next, reason) = step(&control(), state(10.0), &load(0.0, 3.0), 0);
        assert_eq!((next.limit, reason), (10.0, Reason::Hold));
    }

    #[test]
    fn decreases_by_the_excess_queue_and_holds_at_target() {
        let (next, reason) = step(&control(), state(20.0), &load(8.0, 12.0), 0);
        // excess 6, gain 0.5 → −3.
        assert_eq!((next.limit, reason), (17.0, Reason::QueueAboveTarget));
        // A huge queue is cut by at most the decrease factor in one step.
        let (next, _) = step(&control(), state(20.0), &load(100.0, 12.0), 0);
        assert_eq!(next.limit, 10.0);
        let (next, reason) = step(&control(), state(14.0), &load(2.0, 12.0), 0);
        assert_eq!((next.limit, reason), (14.0, Reason::Hold));
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
        let (next, reason) = step(&control(), state(10.0), &slow, 0);
        assert_eq!((next.limit, reason), (5.0, Reason::SlowFirstToken));
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

    /// A server with `capacity` batch slots: what is not running waits.
    fn server(limit: f64, capacity: f64) -> CapacitySample {
        let in_server = limit.floor();
        load((in_server - capacity).max(0.0), in_server.min(capacity))
    }

    #[test]
    fn settles_at_capacity_plus_target_and_follows_a_change() {
        let config = ModelControl {
            ceiling: 200,
            ..control()
        };
        let mut s = state(2.0);
        let mut steps_to_settle = None;
        for i in 0..200 {
            s = step(&config, s, &server(s.limit, 32.0), i).0;
            if steps_to_settle.is_none() && s.cap() == 34 {
                steps_to_settle = Some(i);
            }
        }
        assert_eq!(s.cap(), 34, "capacity 32 + target 2");
        assert!(
            steps_to_settle.is_some_and(|n| n < 40),
            "{steps_to_settle:?}"
        );
        // Capacity halves: back to 16 + 2 within a few steps.
        let mut settled_in = None;
        for i in 0..30 {
            s = step(&config, s, &server(s.limit, 16.0), 300 + i).0;
            if settled_in.is_none() && s.cap() == 18 {
                settled_in = Some(i);
            }
        }
        assert_eq!(s.cap(), 18);
        assert!(settled_in.is_some_and(|n| n <= 10), "{settled_in:?}");
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
