//! Fixed-window arithmetic.
//!
//! Windows are aligned to the Unix epoch in multiples of the unit, exactly as
//! envoyproxy/ratelimit does, so `duration_until_reset` agrees with it and every
//! instance of the service (and Redis) agrees on where a window starts without
//! coordination.

use serde::Deserialize;
use std::fmt;

/// Length of a rate-limit window.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Unit {
    Second,
    Minute,
    Hour,
    Day,
    Week,
    Month,
    Year,
}

impl Unit {
    /// Window length in seconds. Month and year are fixed lengths (30 and 365
    /// days), as in envoyproxy/ratelimit: calendar months would make the window
    /// math depend on a time zone.
    pub const fn seconds(self) -> u64 {
        match self {
            Unit::Second => 1,
            Unit::Minute => 60,
            Unit::Hour => 3_600,
            Unit::Day => 86_400,
            Unit::Week => 7 * 86_400,
            Unit::Month => 30 * 86_400,
            Unit::Year => 365 * 86_400,
        }
    }

    /// The `RateLimitResponse.RateLimit.Unit` enum value.
    pub const fn proto_value(self) -> i32 {
        match self {
            Unit::Second => 1,
            Unit::Minute => 2,
            Unit::Hour => 3,
            Unit::Day => 4,
            Unit::Month => 5,
            Unit::Year => 6,
            Unit::Week => 7,
        }
    }

    /// From the `RateLimitUnit` enum used by descriptor limit overrides.
    pub const fn from_proto(value: i32) -> Option<Unit> {
        match value {
            1 => Some(Unit::Second),
            2 => Some(Unit::Minute),
            3 => Some(Unit::Hour),
            4 => Some(Unit::Day),
            5 => Some(Unit::Month),
            6 => Some(Unit::Year),
            7 => Some(Unit::Week),
            _ => None,
        }
    }

    pub const fn as_str(self) -> &'static str {
        match self {
            Unit::Second => "second",
            Unit::Minute => "minute",
            Unit::Hour => "hour",
            Unit::Day => "day",
            Unit::Week => "week",
            Unit::Month => "month",
            Unit::Year => "year",
        }
    }

    /// A unit name in any case (`minute`, `MINUTE`), as envoyproxy/ratelimit
    /// reads it; `unknown` is not a unit.
    pub fn parse(text: &str) -> Option<Unit> {
        Unit::ALL
            .into_iter()
            .find(|unit| unit.as_str().eq_ignore_ascii_case(text))
    }

    pub const ALL: [Unit; 7] = [
        Unit::Second,
        Unit::Minute,
        Unit::Hour,
        Unit::Day,
        Unit::Week,
        Unit::Month,
        Unit::Year,
    ];
}

impl fmt::Display for Unit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The window containing a given instant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Window {
    /// Start of the window, seconds since the epoch.
    pub start: u64,
    /// Window length in seconds.
    pub length: u64,
}

impl Window {
    /// The window of `unit` that contains `now_millis` (milliseconds since the epoch).
    pub fn containing(unit: Unit, now_millis: u64) -> Window {
        let length = unit.seconds();
        let now_secs = now_millis / 1000;
        Window {
            start: now_secs - now_secs % length,
            length,
        }
    }

    /// End of the window (exclusive), seconds since the epoch.
    pub fn end(&self) -> u64 {
        self.start + self.length
    }

    /// Milliseconds from `now_millis` until the window resets; never zero, so a
    /// caller told to come back "in 0 ms" does not spin.
    pub fn millis_until_reset(&self, now_millis: u64) -> u64 {
        (self.end() * 1000).saturating_sub(now_millis).max(1)
    }

    /// Whole seconds until reset, rounded up (what `Retry-After` and
    /// `RateLimit-Reset` carry).
    pub fn seconds_until_reset(&self, now_millis: u64) -> u64 {
        self.millis_until_reset(now_millis).div_ceil(1000)
    }

    /// How long after its end a window still takes corrections (usage
    /// reconciled after the window closed): one window length, at least a
    /// minute and at most half an hour.
    pub fn correction_grace_secs(&self) -> u64 {
        self.length.clamp(60, 1800)
    }

    /// Whether the window's counters still exist for a correction at `now_millis`.
    pub fn takes_corrections(&self, now_millis: u64) -> bool {
        now_millis < (self.end() + self.correction_grace_secs()) * 1000
    }

    /// How long a counter of this window must live in a store: to its end and
    /// the correction grace, plus a margin for clock skew between instances.
    pub fn ttl_seconds(&self, now_millis: u64) -> u64 {
        let until = ((self.end() + self.correction_grace_secs()) * 1000).saturating_sub(now_millis);
        until.div_ceil(1000).max(1) + 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_align_to_epoch_multiples() {
        let w = Window::containing(Unit::Minute, 125_500);
        assert_eq!(
            w,
            Window {
                start: 120,
                length: 60
            }
        );
        assert_eq!(w.millis_until_reset(125_500), 54_500);
        assert_eq!(w.seconds_until_reset(125_500), 55);
        let d = Window::containing(Unit::Day, 86_400_000 * 3 + 7);
        assert_eq!(d.start, 86_400 * 3);
    }

    #[test]
    fn windows_take_corrections_for_a_grace_after_their_end() {
        let w = Window::containing(Unit::Minute, 125_500);
        assert_eq!(w.correction_grace_secs(), 60);
        assert!(w.takes_corrections(179_999) && w.takes_corrections(239_999));
        assert!(!w.takes_corrections(240_000));
        // 54.5 s to the end, 60 s of grace, 1 s of skew.
        assert_eq!(w.ttl_seconds(125_500), 116);
        assert_eq!(
            Window::containing(Unit::Second, 0).correction_grace_secs(),
            60
        );
        assert_eq!(
            Window::containing(Unit::Day, 0).correction_grace_secs(),
            1800
        );
    }

    #[test]
    fn reset_is_never_zero() {
        let w = Window::containing(Unit::Second, 1_999);
        assert_eq!(w.millis_until_reset(1_999), 1);
        assert_eq!(w.seconds_until_reset(1_999), 1);
    }

    #[test]
    fn proto_units_round_trip() {
        for unit in Unit::ALL {
            assert_eq!(Unit::from_proto(unit.proto_value()), Some(unit));
            assert_eq!(Unit::parse(&unit.as_str().to_uppercase()), Some(unit));
        }
        assert_eq!(Unit::parse("unknown"), None);
        assert_eq!(Unit::from_proto(0), None);
    }
}
