//! The claim of a running call: `processing:{<req_id>}` holds
//! `<consumer-id>/<attempt> <heartbeat-ms>`.
//!
//! The consumer writes it (its Lua scripts in consumer/src/idempotency.rs
//! build `owner .. ' ' .. now` with Redis's clock, and rewrite the heartbeat
//! every heartbeat interval); the deferral endpoint reads it to tell a call
//! that is still running from one whose consumer died. Both judge staleness
//! from the same [`ClaimTiming`].

/// Default: a heartbeat older than this means the owning attempt is dead
/// (the consumer's `idempotency.lease_ms`).
pub const DEFAULT_LEASE_MS: u64 = 15_000;
/// Default: how often the owner rewrites its heartbeat
/// (`idempotency.heartbeat_interval_ms`).
pub const DEFAULT_HEARTBEAT_INTERVAL_MS: u64 = 5_000;

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
/// claim is stale.
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
    /// (20 s with the defaults).
    pub fn stale_after_ms(&self) -> u64 {
        self.lease_ms.saturating_add(self.heartbeat_interval_ms)
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
        // The value the endpoint hard-coded before (STALE_CLAIM_MS).
        assert_eq!(timing.stale_after_ms(), 20_000);
        let claim = ClaimValue::parse("c/1 100000");
        assert!(!timing.is_stale(&claim, 119_999));
        assert!(timing.is_stale(&claim, 120_000));
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
}
