//! The claim of a running call: `processing:{<req_id>}` holds
//! `<consumer-id>/<attempt> <heartbeat-ms>`.
//!
//! The consumer writes it (its Lua scripts in consumer/src/call/idempotency.rs
//! build `owner .. ' ' .. now` with Redis's clock, and rewrite the heartbeat
//! every heartbeat interval); the deferral endpoint reads it to tell a call
//! that is still running from one whose consumer died. Both judge staleness
//! from the same [`ClaimTiming`].

use std::time::Duration;

/// Default: a heartbeat older than this means the owning attempt is dead
/// (the consumer's `idempotency.lease_ms`): two missed beats.
pub const DEFAULT_LEASE_MS: u64 = 2_000;
/// Default: how often the owner rewrites its heartbeat (and the consumer
/// refreshes a popped request's lease; `idempotency.heartbeat_interval_ms`).
pub const DEFAULT_HEARTBEAT_INTERVAL_MS: u64 = 1_000;

/// Timing that cannot tell a live consumer from a dead one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClaimTimingError {
    #[error("heartbeat_interval_ms must be > 0")]
    ZeroInterval,
    #[error(
        "lease_ms ({lease_ms}) must be at least 2 × heartbeat_interval_ms ({interval_ms}): \
         a claim may only be given up after two missed heartbeats"
    )]
    LeaseTooShort { lease_ms: u64, interval_ms: u64 },
}

/// The owner part of a claim: unique per attempt, so a second delivery to
/// the same process is still another owner.
pub fn owner(consumer_id: &str, attempt: u64) -> String {
    format!("{consumer_id}/{attempt}")
}

/// A claim value: `<owner> <heartbeat-ms>`.
pub fn value(owner: &str, heartbeat_ms: u64) -> String {
    format!("{owner} {heartbeat_ms}")
}

/// A claim value as read back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClaimValue<'a> {
    pub owner: &'a str,
    /// `None` when the value has no readable heartbeat (treated as stale).
    pub heartbeat_ms: Option<u64>,
}

impl<'a> ClaimValue<'a> {
    /// Splits at the last space: owners never contain one (consumer ids
    /// are checked for whitespace), and the heartbeat is the last word.
    pub fn parse(value: &'a str) -> Self {
        match value.rsplit_once(' ') {
            Some((owner, heartbeat)) => ClaimValue {
                owner,
                heartbeat_ms: heartbeat.parse().ok(),
            },
            None => ClaimValue {
                owner: value,
                heartbeat_ms: value.parse().ok(),
            },
        }
    }
}

/// The consumer's heartbeat settings, from which both sides derive when a
/// claim is stale — and when a popped request's lease (`lease:{id}`) lapses:
/// the consumer refreshes it every `heartbeat_interval_ms` for
/// [`ClaimTiming::stale_after`], so both liveness signals go stale together.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClaimTiming {
    /// A heartbeat older than this means the owning attempt is dead (the
    /// consumer's own takeover rule).
    pub lease_ms: u64,
    /// How often the owner rewrites its heartbeat.
    pub heartbeat_interval_ms: u64,
}

impl Default for ClaimTiming {
    fn default() -> Self {
        ClaimTiming {
            lease_ms: DEFAULT_LEASE_MS,
            heartbeat_interval_ms: DEFAULT_HEARTBEAT_INTERVAL_MS,
        }
    }
}

impl ClaimTiming {
    /// Age at which the deferral endpoint gives a claim up for dead: the
    /// consumer's lease plus one heartbeat interval of margin, so the
    /// endpoint never judges dead a call the consumer still counts as alive
    /// (3 s with the defaults).
    pub fn stale_after_ms(&self) -> u64 {
        self.lease_ms.saturating_add(self.heartbeat_interval_ms)
    }

    /// [`ClaimTiming::stale_after_ms`] as a duration: also the lifetime of a
    /// popped request's lease after its last refresh (3 s by default).
    pub fn stale_after(&self) -> Duration {
        Duration::from_millis(self.stale_after_ms())
    }

    /// How often a live consumer proves it: the claim's heartbeat and the
    /// pop lease's refresh.
    pub fn heartbeat_interval(&self) -> Duration {
        Duration::from_millis(self.heartbeat_interval_ms)
    }

    /// A claim is given up only after two missed heartbeats (the consumer's
    /// takeover, `lease_ms`), so the endpoint's bound (`lease_ms` + one
    /// interval) is more than twice the interval.
    pub fn validate(&self) -> Result<(), ClaimTimingError> {
        if self.heartbeat_interval_ms == 0 {
            return Err(ClaimTimingError::ZeroInterval);
        }
        if self.lease_ms < self.heartbeat_interval_ms.saturating_mul(2) {
            return Err(ClaimTimingError::LeaseTooShort {
                lease_ms: self.lease_ms,
                interval_ms: self.heartbeat_interval_ms,
            });
        }
        Ok(())
    }

    /// Whether `claim`'s owner stopped its heartbeat, at Redis time `now_ms`.
    pub fn is_stale(&self, claim: &ClaimValue<'_>, now_ms: u64) -> bool {
        match claim.heartbeat_ms {
            Some(heartbeat) => now_ms.saturating_sub(heartbeat) >= self.stale_after_ms(),
            None => true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_round_trip() {
        let owner = owner("c-1", 7);
        assert_eq!(owner, "c-1/7");
        let text = value(&owner, 1_000);
        assert_eq!(text, "c-1/7 1000");
        assert_eq!(
            ClaimValue::parse(&text),
            ClaimValue {
                owner: "c-1/7",
                heartbeat_ms: Some(1_000)
            }
        );
        assert_eq!(ClaimValue::parse("c-1/7 soon").heartbeat_ms, None);
    }

    #[test]
    fn staleness_follows_the_configured_heartbeat() {
        let timing = ClaimTiming::default();
        // Every second, stale after three.
        assert_eq!(timing.heartbeat_interval(), Duration::from_secs(1));
        assert_eq!(timing.stale_after(), Duration::from_secs(3));
        let claim = ClaimValue::parse("c/1 100000");
        assert!(!timing.is_stale(&claim, 102_999));
        assert!(timing.is_stale(&claim, 103_000));
        // A heartbeat from the future (clock step) is alive.
        assert!(!timing.is_stale(&claim, 50_000));
        assert!(timing.is_stale(&ClaimValue::parse("garbage"), 0));
        let slow = ClaimTiming {
            lease_ms: 60_000,
            heartbeat_interval_ms: 20_000,
        };
        assert!(!slow.is_stale(&claim, 120_000));
        assert!(slow.is_stale(&claim, 180_000));
    }

    #[test]
    fn a_claim_is_given_up_only_after_two_missed_heartbeats() {
        assert_eq!(ClaimTiming::default().validate(), Ok(()));
        let timing = |lease_ms, heartbeat_interval_ms| ClaimTiming {
            lease_ms,
            heartbeat_interval_ms,
        };
        assert_eq!(
            timing(2_000, 0).validate(),
            Err(ClaimTimingError::ZeroInterval)
        );
        assert_eq!(
            timing(1_999, 1_000).validate(),
            Err(ClaimTimingError::LeaseTooShort {
                lease_ms: 1_999,
                interval_ms: 1_000
            })
        );
        assert_eq!(timing(200, 100).validate(), Ok(()));
        // Stale (lease + interval) is then more than twice the interval.
        assert!(timing(200, 100).stale_after_ms() > 2 * 100);
    }
}
