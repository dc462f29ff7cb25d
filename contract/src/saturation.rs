//! Whether a model's server is saturated, as the consumers' controller
//! saw it, and what admission does with an in-quota request then
//! (issue 28: one GPU, one fair order).
//!
//! **Written** by the consumer instance that steps the model's controller,
//! into the model's controller hash ([`crate::keys::controller`]) at each
//! step: [`SATURATED`] (1 or 0) and [`SATURATED_AT_MS`] (the step's time).
//! **Read** by every `sluice-rls` instance (cached per model for a short
//! time) to route an in-quota request: straight to the server, or into
//! the token-fair queue beside the deferred work ([`route_in_quota`]).
//!
//! **Saturated** means: the server's waiting queue (every request there,
//! in quota or deferred, smoothed by the controller) is above the
//! controller's `target_waiting` by more than half a request while the
//! consumers have their own calls at the server — the deferred work is what fills the server, so an in-quota request
//! sent there blind waits in its FIFO behind deferred calls.
//!
//! **A missing or old state means "not saturated"**, and that is the safe
//! reading: the request then goes straight to the server, which is what
//! Sluice did before this existed — the controller still backs the
//! deferred work off until the server's queue is at its target for
//! everyone, so the worst case is the old latency, never a lost request.
//! The other reading would route every in-quota request through the
//! deferral path exactly when the consumers that write the state (and
//! drain that path) may be down, leaving them unanswered.

use serde::{Deserialize, Serialize};

/// Field of the controller hash: 1 while the server is saturated, else 0.
pub const SATURATED: &str = "saturated";
/// Field of the controller hash: when [`SATURATED`] was written (Unix ms).
pub const SATURATED_AT_MS: &str = "saturated_at_ms";

/// A model's saturation as the controller last wrote it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Saturation {
    pub saturated: bool,
    /// When the controller decided it (Unix ms).
    pub at_ms: u64,
}

impl Saturation {
    /// From the controller hash's two fields (as Redis returns them);
    /// `None` if either is missing or not a number.
    pub fn from_fields(saturated: Option<&str>, at_ms: Option<&str>) -> Option<Saturation> {
        let saturated = saturated?.trim().parse::<u8>().ok()? != 0;
        let at_ms = at_ms?.trim().parse::<u64>().ok()?;
        Some(Saturation { saturated, at_ms })
    }

    /// The two fields to write (see [`SATURATED`], [`SATURATED_AT_MS`]).
    pub fn fields(&self) -> [(&'static str, u64); 2] {
        [
            (SATURATED, u64::from(self.saturated)),
            (SATURATED_AT_MS, self.at_ms),
        ]
    }
}

/// The law: is the server saturated, from the controller's smoothed view.
/// `smoothed_waiting`: requests waiting at the server (everyone's);
/// `target_waiting`: the controller's target; `own_in_flight`: the
/// consumers' calls in flight, every instance together (0: the queue at
/// the server is not deferred work, and holding in-quota requests back
/// would help nobody).
pub fn is_saturated(
    smoothed_waiting: Option<f64>,
    target_waiting: f64,
    own_in_flight: f64,
) -> bool {
    const DEADBAND: f64 = 0.5;
    own_in_flight > 0.0 && smoothed_waiting.is_some_and(|w| w > target_waiting + DEADBAND)
}

/// Where an in-quota request goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Route {
    /// Straight to the model server (the server has room, or no fresh state).
    Direct,
    /// Into the token-fair queue with its tenant's weight and its own
    /// priority, beside the deferred work.
    Queue,
}

/// Routes an in-quota request from the last saturation read. `state` is
/// `None` when nothing was read; a state older than `max_age_ms` counts
/// as none (see the module's note on why that is safe).
pub fn route_in_quota(state: Option<Saturation>, now_ms: u64, max_age_ms: u64) -> Route {
    match state {
        Some(s) if s.saturated && now_ms.saturating_sub(s.at_ms) <= max_age_ms => Route::Queue,
        _ => Route::Direct,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fresh_saturation_queues_and_old_or_missing_goes_direct() {
        let saturated = Saturation {
            saturated: true,
            at_ms: 10_000,
        };
        assert_eq!(route_in_quota(Some(saturated), 11_000, 1_500), Route::Queue);
        assert_eq!(
            route_in_quota(Some(saturated), 11_501, 1_500),
            Route::Direct
        );
        assert_eq!(route_in_quota(None, 11_000, 1_500), Route::Direct);
        let room = Saturation {
            saturated: false,
            ..saturated
        };
        assert_eq!(route_in_quota(Some(room), 10_000, 1_500), Route::Direct);
        // A clock behind the writer's: fresh.
        assert_eq!(route_in_quota(Some(saturated), 9_000, 1_500), Route::Queue);
    }

    #[test]
    fn saturated_only_above_target_with_deferred_work() {
        assert!(is_saturated(Some(3.0), 2.0, 5.0));
        assert!(!is_saturated(Some(2.4), 2.0, 5.0));
        assert!(!is_saturated(Some(9.0), 2.0, 0.0));
        assert!(!is_saturated(None, 2.0, 5.0));
    }

    #[test]
    fn fields_round_trip() {
        let s = Saturation {
            saturated: true,
            at_ms: 42,
        };
        let [(f1, v1), (f2, v2)] = s.fields();
        assert_eq!((f1, f2), (SATURATED, SATURATED_AT_MS));
        assert_eq!(
            Saturation::from_fields(Some(&v1.to_string()), Some(&v2.to_string())),
            Some(s)
        );
        assert_eq!(Saturation::from_fields(None, Some("42")), None);
        assert_eq!(Saturation::from_fields(Some("x"), Some("42")), None);
    }
}
