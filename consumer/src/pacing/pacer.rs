//! Pacing: a leaky bucket per bucket (tenant × model) in requests/s and
//! tokens/s, shared by every consumer instance through Redis.
//!
//! # The math (GCRA)
//!
//! Each bucket and dimension keeps one number in Redis: its *theoretical
//! arrival time* `tat` (ms), the time at which the bucket would be empty
//! again. At rate `r` per second one unit costs the *interval*
//! `T = 1000 / r` ms; a message costing `c` units (1 request; its
//! `estimated_tokens` tokens) adds `inc = c · T`. With a burst tolerance of
//! `b` units (`τ = b · T` ms), a message arriving at `now` fits when
//!
//! ```text
//! wait = max(tat, now) + inc − max(τ, inc) − now  ≤ 0
//! ```
//!
//! and is then admitted with `tat' = max(tat, now) + inc`. Otherwise the
//! caller must wait `wait` ms: the time until the bucket's next slot for this
//! message's cost. `max(τ, inc)` lets a message larger than the burst run
//! when the bucket is empty (it then holds the bucket for its whole cost), so
//! a big message is delayed, never starved. With the defaults (burst 1
//! request, 0 tokens) the bucket is a strict leaky bucket: message `n + 1`
//! runs when message `n`'s cost has drained, so `R` requests/s admits one
//! message every `1000 / R` ms.
//!
//! **Catch-up**: a check that comes a little after the slot (a held message
//! wakes on a millisecond timer, then needs a Redis round trip) keeps the
//! schedule instead of losing the lateness: `max(tat, now)` above is really
//! `max(tat, now − s)` with `s = min(CATCH_UP_MS, inc)`. Without it a
//! strict bucket at 20/s ran 4 % slow (≈ 2 ms lost per 50 ms slot). The
//! price: after a pause, one message may start up to `s` ms early.
//!
//! The key holds `"<tat> <interval>"`. When the rate changed since the last
//! paced start, the outstanding debt is rescaled to the new rate first
//! (`tat ← now + (tat − now) · T_new / T_old`: the same number of units
//! still to drain), so a rate change takes effect on the very next check,
//! both ways; without it, a bucket raised from 0.01/s to 10/s would still
//! wait out its old 100 s interval.
//!
//! Both dimensions are checked in one Lua script, all or nothing: a message
//! that fits the request dimension but not the token one changes neither
//! key, and the answer is the larger of the two waits.
//!
//! # Rates
//!
//! Per dimension, the first that is set wins: the bucket's override
//! (`rps:<tenant>` / `tps:<tenant>` in the model's hash
//! `sluice:rates:{<model>}`), the column's override (`rps:*` / `tps:*`),
//! the configured default of the model, the configured default. The result
//! is multiplied by the column's `factor` (default 1): one write tightens or
//! loosens every bucket of a model. A rate of `-1` (stored) / `None` (API)
//! is unlimited; a rate of 0, or a factor of 0, pauses the bucket (the
//! answer is then `Wait(paused_recheck_ms)`). The script reads the hash on
//! every check, so changes take effect on the next message, on every
//! instance, without restart.
//!
//! # Time
//!
//! The script uses Redis's clock (`TIME`) unless the caller passes `now_ms`,
//! so instances with skewed clocks share one timeline. Tests pass `now_ms`
//! to simulate time without sleeping.

use crate::keys::{self, BucketId, Dimension};
use crate::metrics::{Metrics, PacingLabels};
use serde::{Deserialize, Serialize};
use sluice_redis::RedisConn;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

/// Rates of one bucket. `None` = unlimited in that dimension; `Some(0.0)` =
/// paused.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Rates {
    #[serde(default)]
    pub requests_per_second: Option<f64>,
    #[serde(default)]
    pub tokens_per_second: Option<f64>,
}

/// Pacing configuration (the defaults; runtime overrides live in Redis).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct PacingConfig {
    /// Rates of every bucket without a more specific setting.
    pub default_rates: Rates,
    /// Configured rates per model (unsanitized model name).
    pub model_rates: HashMap<String, Rates>,
    /// Burst tolerance of the requests dimension, in requests (≥ 1).
    pub request_burst: f64,
    /// Burst tolerance of the tokens dimension, in tokens (≥ 0).
    pub token_burst: f64,
    /// Wait returned for a paused bucket (rate or factor 0).
    pub paused_recheck_ms: u64,
}

impl Default for PacingConfig {
    fn default() -> Self {
        PacingConfig {
            default_rates: Rates {
                requests_per_second: Some(1.0),
                tokens_per_second: None,
            },
            model_rates: HashMap::new(),
            request_burst: 1.0,
            token_burst: 0.0,
            paused_recheck_ms: 1000,
        }
    }
}

/// What limited a message that must wait.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Limit {
    Requests,
    Tokens,
    /// Rate or factor 0.
    Paused,
}

impl Limit {
    pub fn as_str(self) -> &'static str {
        match self {
            Limit::Requests => "requests",
            Limit::Tokens => "tokens",
            Limit::Paused => "paused",
        }
    }
}

/// Answer of a pacing check.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PaceDecision {
    /// The message may run now; the bucket's slot is taken.
    Admit,
    /// Nothing was taken; the bucket's next slot for this cost is `wait` away.
    Wait { wait: Duration, limited_by: Limit },
}

/// What the pop loop does with a decision (see [`PaceDecision::plan`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PacePlan {
    /// Run the message now.
    Run,
    /// The wait is below the suspend floor: wait locally (an async sleep in
    /// the message's own task, never in the pop loop), then check again.
    WaitLocally(Duration),
    /// Suspend the LiteTopic for this long; the pop loop moves on.
    Suspend(Duration),
}

impl PaceDecision {
    /// `suspend_floor`: the broker's suspend granularity (about 30 ms).
    pub fn plan(&self, suspend_floor: Duration) -> PacePlan {
        match *self {
            PaceDecision::Admit => PacePlan::Run,
            PaceDecision::Wait { wait, .. } if wait < suspend_floor => PacePlan::WaitLocally(wait),
            PaceDecision::Wait { wait, .. } => PacePlan::Suspend(wait),
        }
    }
}

/// Pure parts of the pacing math, mirrored by the Lua script.
pub mod gcra {
    /// Milliseconds per unit at `rate` units per second; `None` when
    /// unlimited (`None` or infinite rate) and infinite when paused (0).
    pub fn interval_ms(rate_per_second: Option<f64>) -> Option<f64> {
        match rate_per_second {
            None => None,
            Some(r) if r.is_infinite() || r < 0.0 => None,
            Some(r) if r > 0.0 => Some(1000.0 / r),
            Some(_) => Some(f64::INFINITY),
        }
    }

    /// A rate multiplied by a column factor (unlimited stays unlimited).
    pub fn apply_factor(rate_per_second: Option<f64>, factor: f64) -> Option<f64> {
        rate_per_second
            .filter(|r| *r >= 0.0)
            .map(|r| r * factor.max(0.0))
    }

    /// The theoretical arrival time after a rate change: the debt still to
    /// drain (in units) is kept, its duration follows the new interval.
    pub fn rescale(tat: f64, now: f64, old_interval: f64, new_interval: f64) -> f64 {
        if tat <= now || old_interval <= 0.0 {
            return tat;
        }
        now + (tat - now) * new_interval / old_interval
    }

    /// Lateness a check may have and still keep the bucket's schedule (see
    /// "Catch-up" in the module docs). Also in the Lua script.
    pub const CATCH_UP_MS: f64 = 5.0;

    /// Result of one GCRA step.
    #[derive(Clone, Copy, Debug, PartialEq)]
    pub enum Step {
        /// Fits; the new theoretical arrival time.
        Admit { new_tat: f64 },
        /// Does not fit for this many ms.
        Wait(f64),
    }

    /// One dimension's check: `tat` (None = empty bucket), `cost` units,
    /// `interval` ms per unit, `burst` units of tolerance.
    pub fn step(tat: Option<f64>, now: f64, cost: f64, interval: f64, burst: f64) -> Step {
        let inc = cost * interval;
        let slack = CATCH_UP_MS.min(inc);
        let base = tat.map_or(now, |t| t.max(now - slack));
        let tolerance = (burst * interval).max(inc);
        let wait = base + inc - tolerance - now;
        if wait > 0.0 {
            Step::Wait(wait)
        } else {
            Step::Admit {
                new_tat: base + inc,
            }
        }
    }

    /// A dimension's key as the script keeps it: `"<tat> <interval>"`, the
    /// tat with three decimals (`%.3f`), the interval exact (`%.17g`).
    #[derive(Clone, Copy, Debug, PartialEq)]
    pub struct Stored {
        pub tat: f64,
        pub interval: f64,
    }

    impl Stored {
        /// What the script stores for these values: the tat rounded to three
        /// decimals, as Lua's `string.format('%.3f')` does.
        pub fn rounded(tat: f64, interval: f64) -> Stored {
            Stored {
                tat: format!("{tat:.3}").parse().unwrap_or(tat),
                interval,
            }
        }

        /// The key's text; `None` unless it is two numbers (only the script
        /// writes these keys).
        pub fn parse(text: &str) -> Option<Stored> {
            let (tat, interval) = text.split_once(' ')?;
            Some(Stored {
                tat: tat.parse().ok()?,
                interval: interval.parse().ok()?,
            })
        }
    }

    /// One dimension's part of a check.
    #[derive(Clone, Copy, Debug, PartialEq)]
    pub struct DimensionInput {
        /// Effective rate (after the column factor); `None` = unlimited.
        pub rate: Option<f64>,
        /// Units this message costs (1 request; its tokens).
        pub cost: f64,
        /// Burst tolerance in units.
        pub burst: f64,
        /// The key's current value, if any.
        pub stored: Option<Stored>,
    }

    /// A `SET` the script makes: the new value and its `PX` in ms.
    #[derive(Clone, Copy, Debug, PartialEq)]
    pub struct Write {
        pub stored: Stored,
        pub px: i64,
    }

    /// What a check answers and leaves behind.
    #[derive(Clone, Copy, Debug, PartialEq)]
    pub struct Checked {
        /// The script's reply: admitted 1|0, wait ms, limit 0 none |
        /// 1 requests | 2 tokens | 3 paused (see [`super::decision_from_reply`]).
        pub reply: [i64; 3],
        /// The last value written to each dimension's key, if any.
        pub writes: [Option<Write>; 2],
    }

    /// The whole script in Rust (requests, then tokens), all or nothing; the
    /// randomized test `tests/pacing_mirror.rs` holds the two equal.
    pub fn check(now: f64, dimensions: [DimensionInput; 2], paused_recheck_ms: u64) -> Checked {
        let mut writes = [None, None];
        let mut admits = [None, None];
        let (mut wait, mut limit) = (0.0, 0);
        for (i, dimension) in dimensions.iter().enumerate() {
            let Some(rate) = dimension.rate else {
                continue;
            };
            if rate <= 0.0 {
                return Checked {
                    reply: [0, paused_recheck_ms as i64, 3],
                    writes,
                };
            }
            let interval = 1000.0 / rate;
            let mut tat = dimension.stored.map(|s| s.tat);
            if let Some(rescaled) = rescaled(dimension.stored, now, interval) {
                // Stored even when the message must wait (see the script).
                tat = Some(rescaled);
                writes[i] = Some(write(rescaled, interval, now));
            }
            match step(tat, now, dimension.cost, interval, dimension.burst) {
                Step::Wait(w) if w > wait => (wait, limit) = (w, i as i64 + 1),
                Step::Wait(_) => {}
                Step::Admit { new_tat } => admits[i] = Some((new_tat, interval)),
            }
        }
        if wait > 0.0 {
            return Checked {
                reply: [0, wait.ceil() as i64, limit],
                writes,
            };
        }
        for (i, admit) in admits.iter().enumerate() {
            if let Some((new_tat, interval)) = *admit {
                writes[i] = Some(write(new_tat, interval, now));
            }
        }
        Checked {
            reply: [1, 0, 0],
            writes,
        }
    }

    /// The correction script in Rust ([`super::Pacer::correct`]): the token
    /// dimension's key after `delta` tokens (real − estimated) are added to
    /// the bucket's debt at `rate` (effective, after the factor; `None` =
    /// unlimited), or `None` when the key is left as it is. The debt is
    /// rescaled to a changed rate first (as a check does), never drops below
    /// an empty bucket's (`tat ≥ now`), and an empty bucket gets nothing
    /// back.
    pub fn correct(
        now: f64,
        rate: Option<f64>,
        stored: Option<Stored>,
        delta: f64,
    ) -> Option<Write> {
        let rate = rate?;
        if delta == 0.0 || rate <= 0.0 {
            return None;
        }
        let interval = 1000.0 / rate;
        let tat = rescaled(stored, now, interval).or(stored.map(|s| s.tat));
        let base = tat.filter(|t| *t > now).unwrap_or(now);
        if delta < 0.0 && base <= now {
            return None;
        }
        Some(write((base + delta * interval).max(now), interval, now))
    }

    /// The tat rescaled to a changed rate, when there is debt to rescale.
    fn rescaled(stored: Option<Stored>, now: f64, interval: f64) -> Option<f64> {
        let Stored {
            tat,
            interval: previous,
        } = stored?;
        (previous > 0.0 && tat > now && previous != interval)
            .then(|| rescale(tat, now, previous, interval))
    }

    /// The key outlives the bucket's debt by a second.
    fn write(tat: f64, interval: f64, now: f64) -> Write {
        Write {
            stored: Stored::rounded(tat, interval),
            px: (tat - now).ceil() as i64 + 1000,
        }
    }
}

/// The clock and the rate resolution, shared by [`PACE_SCRIPT`] and
/// [`CORRECT_SCRIPT`] so the two cannot resolve a bucket's rates apart.
/// Reads KEYS[3] (the column's rate hash), ARGV 1 (now ms, '' = Redis TIME),
/// 3 (sanitized tenant), 4 and 5 (default rps, tps; -1 = unlimited); leaves
/// `now`, `factor` and `rates` = {rps, tps} (before the factor; -1 = unlimited).
macro_rules! clock_and_rates_lua {
    () => {
        r#"
local now = tonumber(ARGV[1])
if not now then
  if redis.replicate_commands then pcall(redis.replicate_commands) end
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
end
local tenant = ARGV[3]
local o = redis.call('HMGET', KEYS[3], 'factor', 'rps:' .. tenant, 'tps:' .. tenant, 'rps:*', 'tps:*')
local factor = tonumber(o[1]) or 1
local function pick(bucket, column, default)
  local v = tonumber(bucket)
  if v == nil then v = tonumber(column) end
  if v == nil then v = tonumber(default) end
  if v == nil then v = -1 end
  return v
end
local rates = { pick(o[2], o[4], ARGV[4]), pick(o[3], o[5], ARGV[5]) }
"#
    };
}

/// The check, one round trip: see the module documentation.
///
/// KEYS: 1 requests TAT, 2 tokens TAT, 3 the column's rate hash.
/// ARGV: 1 now ms ('' = Redis TIME), 2 token cost, 3 sanitized tenant,
/// 4 default rps, 5 default tps (-1 = unlimited), 6 request burst,
/// 7 token burst, 8 paused recheck ms.
/// Returns {admitted 1|0, wait ms, limit 0 none|1 requests|2 tokens|3 paused}.
/// Mirrored in Rust by [`gcra::check`] (and the rates by [`resolve`]);
/// `tests/pacing_mirror.rs` holds the two equal: change both together.
const PACE_SCRIPT: &str = concat!(
    clock_and_rates_lua!(),
    r#"
local cost_tokens = tonumber(ARGV[2]) or 0
local costs = { 1, cost_tokens }
local bursts = { tonumber(ARGV[6]) or 1, tonumber(ARGV[7]) or 0 }
local new_tats, intervals = {}, {}
local wait, limit = 0, 0
for i = 1, 2 do
  local rate = rates[i]
  if rate >= 0 then
    rate = rate * factor
    if rate <= 0 then
      return { 0, tonumber(ARGV[8]) or 1000, 3 }
    end
    local interval = 1000 / rate
    local tat, previous = nil, nil
    local stored = redis.call('GET', KEYS[i])
    if stored then
      local t, p = string.match(stored, '^(%S+) (%S+)$')
      tat, previous = tonumber(t), tonumber(p)
    end
    if tat and previous and previous > 0 and tat > now and previous ~= interval then
      -- Stored even when the message must wait, so the next check does not
      -- rescale again from the old interval.
      tat = now + (tat - now) * interval / previous
      redis.call('SET', KEYS[i], string.format('%.3f %.17g', tat, interval),
        'PX', math.ceil(tat - now) + 1000)
    end
    local inc = costs[i] * interval
    -- Catch-up (module docs): a late check keeps the schedule, up to 5 ms.
    local slack = math.min(5, inc)
    local base = now
    if tat then base = math.max(tat, now - slack) end
    local tolerance = math.max(bursts[i] * interval, inc)
    local w = base + inc - tolerance - now
    if w > wait then wait, limit = w, i end
    new_tats[i] = base + inc
    intervals[i] = interval
  end
end
if wait > 0 then
  return { 0, math.ceil(wait), limit }
end
for i = 1, 2 do
  if new_tats[i] then
    redis.call('SET', KEYS[i], string.format('%.3f %.17g', new_tats[i], intervals[i]),
      'PX', math.ceil(new_tats[i] - now) + 1000)
  end
end
return { 1, 0, 0 }
"#
);

/// The correction of a bucket's token debt once the real usage is known
/// (see [`Pacer::correct`]): a script of its own rather than a mode of the
/// check, so the check — run for every message — keeps its arguments and
/// its mirror, while both share [`clock_and_rates_lua`].
///
/// KEYS: as the check's (1 requests TAT, unused; 2 tokens TAT; 3 the
/// column's rate hash). ARGV: 1 now ms ('' = Redis TIME), 2 token delta
/// (real − estimated, signed), 3–5 as the check's.
/// Returns 1 when the tokens key was written, else 0. Mirrored in Rust by
/// [`gcra::correct`]; `tests/pacing_mirror.rs` holds the two equal.
const CORRECT_SCRIPT: &str = concat!(
    clock_and_rates_lua!(),
    r#"
local delta = tonumber(ARGV[2]) or 0
local rate = rates[2]
-- Unlimited: no token debt is kept. Paused: the debt waits untouched.
if rate < 0 or delta == 0 then return 0 end
rate = rate * factor
if rate <= 0 then return 0 end
local interval = 1000 / rate
local tat, previous = nil, nil
local stored = redis.call('GET', KEYS[2])
if stored then
  local t, p = string.match(stored, '^(%S+) (%S+)$')
  tat, previous = tonumber(t), tonumber(p)
end
if tat and previous and previous > 0 and tat > now and previous ~= interval then
  tat = now + (tat - now) * interval / previous
end
local base = now
if tat and tat > now then base = tat end
-- An empty bucket has nothing to give back.
if delta < 0 and base <= now then return 0 end
local new_tat = math.max(base + delta * interval, now)
redis.call('SET', KEYS[2], string.format('%.3f %.17g', new_tat, interval),
  'PX', math.ceil(new_tat - now) + 1000)
return 1
"#
);

/// A pacing failure (Redis unreachable or misbehaving). The caller treats the
/// message as not admitted and tries again later.
#[derive(Debug, thiserror::Error)]
pub enum PacingError {
    #[error("redis: {0}")]
    Redis(#[from] redis::RedisError),
    #[error("invalid value: {0}")]
    Invalid(String),
    #[error("unexpected script reply: {0}")]
    Reply(String),
}

/// Where a runtime rate override applies.
#[derive(Clone, Copy, Debug)]
pub enum Scope<'a> {
    /// Every bucket of the model column (below bucket overrides).
    Column { model: &'a str },
    /// One bucket.
    Bucket { tenant: &'a str, model: &'a str },
}

/// A stored override of one dimension.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RateSetting {
    Unlimited,
    PerSecond(f64),
}

impl RateSetting {
    /// Lua's `tonumber` (what the script reads) allows surrounding blanks.
    fn parse(text: &str) -> Option<Self> {
        let value: f64 = text.trim().parse().ok()?;
        Some(if value < 0.0 {
            RateSetting::Unlimited
        } else {
            RateSetting::PerSecond(value)
        })
    }

    fn as_rate(self) -> Option<f64> {
        match self {
            RateSetting::Unlimited => None,
            RateSetting::PerSecond(r) => Some(r),
        }
    }
}

/// Overrides of one scope.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ScopeOverrides {
    pub requests_per_second: Option<RateSetting>,
    pub tokens_per_second: Option<RateSetting>,
}

/// Everything stored for one model column.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ColumnOverrides {
    pub factor: Option<f64>,
    pub column: ScopeOverrides,
    /// Per tenant (unsanitized name where known, else the sanitized one).
    pub buckets: BTreeMap<String, ScopeOverrides>,
}

/// The rates a bucket runs at now (after overrides and factor).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct EffectiveRates {
    pub requests_per_second: Option<f64>,
    pub tokens_per_second: Option<f64>,
    pub factor: f64,
}

/// Upper bound of a column factor.
pub(crate) const MAX_FACTOR: f64 = 1000.0;

/// The shared pacer.
#[derive(Clone)]
pub struct Pacer {
    conn: RedisConn,
    script: redis::Script,
    correct_script: redis::Script,
    config: Arc<PacingConfig>,
    /// Configured per-model rates, keyed by sanitized model.
    model_rates: Arc<HashMap<String, Rates>>,
    metrics: Option<Arc<Metrics>>,
}

impl Pacer {
    /// The Redis connection the pacer's state lives on (the admin API
    /// writes the controllers' overrides and the weights there too).
    pub(crate) fn redis(&self) -> RedisConn {
        self.conn.clone()
    }

    pub fn new(
        conn: RedisConn,
        config: PacingConfig,
        metrics: Option<Arc<Metrics>>,
    ) -> Result<Self, PacingError> {
        validate_rates(&config.default_rates)?;
        for rates in config.model_rates.values() {
            validate_rates(rates)?;
        }
        if !(config.request_burst.is_finite() && config.request_burst >= 1.0) {
            return Err(PacingError::Invalid("request_burst must be >= 1".into()));
        }
        if !(config.token_burst.is_finite() && config.token_burst >= 0.0) {
            return Err(PacingError::Invalid("token_burst must be >= 0".into()));
        }
        let model_rates = config
            .model_rates
            .iter()
            .map(|(model, rates)| (keys::sanitize(model), *rates))
            .collect();
        Ok(Pacer {
            conn,
            script: redis::Script::new(PACE_SCRIPT),
            correct_script: redis::Script::new(CORRECT_SCRIPT),
            config: Arc::new(config),
            model_rates: Arc::new(model_rates),
            metrics,
        })
    }

    /// Loads the script so the first check needs no NOSCRIPT retry.
    pub async fn preload(&self) -> Result<(), PacingError> {
        let mut conn = self.conn.clone();
        self.script.load_async(&mut conn).await?;
        self.correct_script.load_async(&mut conn).await?;
        Ok(())
    }

    fn configured(&self, bucket: &BucketId) -> Rates {
        let model = self.model_rates.get(bucket.model());
        Rates {
            requests_per_second: model.map_or(self.config.default_rates.requests_per_second, |r| {
                r.requests_per_second
            }),
            tokens_per_second: model.map_or(self.config.default_rates.tokens_per_second, |r| {
                r.tokens_per_second
            }),
        }
    }

    /// The keys and arguments both scripts share (see
    /// [`clock_and_rates_lua`]): KEYS 1–3, ARGV 1–5 with `tokens` as ARGV 2.
    fn invocation<'s>(
        &self,
        script: &'s redis::Script,
        bucket: &BucketId,
        now_ms: Option<u64>,
        tokens: impl redis::ToRedisArgs,
    ) -> redis::ScriptInvocation<'s> {
        let configured = self.configured(bucket);
        let mut invocation = script.prepare_invoke();
        invocation
            .key(bucket.pace_key(Dimension::Requests))
            .key(bucket.pace_key(Dimension::Tokens))
            .key(bucket.rates_key())
            .arg(now_ms.map(|n| n.to_string()).unwrap_or_default())
            .arg(tokens)
            .arg(bucket.tenant())
            .arg(rate_arg(configured.requests_per_second))
            .arg(rate_arg(configured.tokens_per_second));
        invocation
    }

    /// Checks (and on admit takes) the bucket's next slot for a message
    /// costing one request and `tokens` tokens. `now_ms`: `None` in
    /// production (Redis's clock), a simulated clock in tests.
    pub async fn check(
        &self,
        bucket: &BucketId,
        tokens: u64,
        now_ms: Option<u64>,
    ) -> Result<PaceDecision, PacingError> {
        let mut invocation = self.invocation(&self.script, bucket, now_ms, tokens);
        invocation
            .arg(self.config.request_burst)
            .arg(self.config.token_burst)
            .arg(self.config.paused_recheck_ms);
        let mut conn = self.conn.clone();
        let reply: Vec<i64> = invocation.invoke_async(&mut conn).await?;
        let decision = decision_from_reply(&reply)?;
        if let Some(metrics) = &self.metrics {
            record(metrics, bucket, decision);
        }
        Ok(decision)
    }

    /// Corrects the bucket's token debt by `delta_tokens` (the real usage
    /// minus the estimate the message was paced with) once its answer is
    /// known, atomically in Redis (see [`gcra::correct`] for the rule).
    /// Returns whether the debt changed. `now_ms` as for [`Pacer::check`].
    pub async fn correct(
        &self,
        bucket: &BucketId,
        delta_tokens: i64,
        now_ms: Option<u64>,
    ) -> Result<bool, PacingError> {
        let invocation = self.invocation(&self.correct_script, bucket, now_ms, delta_tokens);
        let mut conn = self.conn.clone();
        let written: i64 = invocation.invoke_async(&mut conn).await?;
        Ok(written == 1)
    }

    /// Sets a rate override (`None` = unlimited). Takes effect on the next check.
    pub async fn set_rate(
        &self,
        scope: Scope<'_>,
        dimension: Dimension,
        rate: Option<f64>,
    ) -> Result<(), PacingError> {
        if let Some(r) = rate {
            validate_rate(r)?;
        }
        let (key, field, model) = scope_field(scope, dimension);
        let mut conn = self.conn.clone();
        let mut pipe = redis::pipe();
        pipe.atomic()
            .hset(&key, field, rate_arg(rate).to_string())
            .ignore();
        if let Scope::Bucket { tenant, .. } = scope {
            pipe.hset(&key, format!("name:{}", keys::sanitize(tenant)), tenant)
                .ignore();
        }
        pipe.query_async::<()>(&mut conn).await?;
        self.index(model).await
    }

    /// Removes a rate override (the scope inherits again).
    pub async fn clear_rate(
        &self,
        scope: Scope<'_>,
        dimension: Dimension,
    ) -> Result<(), PacingError> {
        let (key, field, _) = scope_field(scope, dimension);
        let mut conn = self.conn.clone();
        redis::cmd("HDEL")
            .arg(&key)
            .arg(field)
            .query_async::<()>(&mut conn)
            .await?;
        Ok(())
    }

    /// Sets the factor of a model column (0 pauses it, 1 is neutral).
    pub async fn set_model_factor(&self, model: &str, factor: f64) -> Result<(), PacingError> {
        if !(factor.is_finite() && (0.0..=MAX_FACTOR).contains(&factor)) {
            return Err(PacingError::Invalid(format!(
                "factor must be within 0..={MAX_FACTOR}, not {factor}"
            )));
        }
        let mut conn = self.conn.clone();
        redis::cmd("HSET")
            .arg(keys::rates_key(model))
            .arg("factor")
            .arg(factor.to_string())
            .query_async::<()>(&mut conn)
            .await?;
        self.index(model).await
    }

    /// Removes the factor of a model column (back to 1).
    pub async fn clear_model_factor(&self, model: &str) -> Result<(), PacingError> {
        let mut conn = self.conn.clone();
        redis::cmd("HDEL")
            .arg(keys::rates_key(model))
            .arg("factor")
            .query_async::<()>(&mut conn)
            .await?;
        Ok(())
    }

    async fn index(&self, model: &str) -> Result<(), PacingError> {
        let mut conn = self.conn.clone();
        redis::cmd("HSET")
            .arg(keys::RATES_INDEX)
            .arg(keys::sanitize(model))
            .arg(model)
            .query_async::<()>(&mut conn)
            .await?;
        Ok(())
    }

    /// Model columns that have (or had) overrides.
    pub async fn models_with_overrides(&self) -> Result<Vec<String>, PacingError> {
        let mut conn = self.conn.clone();
        let map: BTreeMap<String, String> = redis::cmd("HGETALL")
            .arg(keys::RATES_INDEX)
            .query_async(&mut conn)
            .await?;
        Ok(map.into_values().collect())
    }

    /// Everything stored for a model column.
    pub async fn column_overrides(&self, model: &str) -> Result<ColumnOverrides, PacingError> {
        let mut conn = self.conn.clone();
        let map: HashMap<String, String> = redis::cmd("HGETALL")
            .arg(keys::rates_key(model))
            .query_async(&mut conn)
            .await?;
        Ok(parse_overrides(&map))
    }

    /// The rates a bucket runs at now: the script's resolution, in Rust.
    pub async fn effective_rates(
        &self,
        tenant: &str,
        model: &str,
    ) -> Result<EffectiveRates, PacingError> {
        let bucket = BucketId::new(tenant, model);
        let mut conn = self.conn.clone();
        let map: HashMap<String, String> = redis::cmd("HGETALL")
            .arg(bucket.rates_key())
            .query_async(&mut conn)
            .await?;
        Ok(resolve(&map, bucket.tenant(), self.configured(&bucket)))
    }
}

/// The script's reply `{admitted, wait ms, limit}` as a decision.
pub fn decision_from_reply(reply: &[i64]) -> Result<PaceDecision, PacingError> {
    match reply {
        [1, ..] => Ok(PaceDecision::Admit),
        [0, wait, limit] => Ok(PaceDecision::Wait {
            wait: Duration::from_millis((*wait).max(1) as u64),
            limited_by: match limit {
                1 => Limit::Requests,
                2 => Limit::Tokens,
                _ => Limit::Paused,
            },
        }),
        other => Err(PacingError::Reply(format!("{other:?}"))),
    }
}

fn record(metrics: &Metrics, bucket: &BucketId, decision: PaceDecision) {
    let (result, limited_by) = match decision {
        PaceDecision::Admit => ("admitted", "none"),
        PaceDecision::Wait { limited_by, wait } => {
            metrics
                .pacing_wait_seconds
                .get_or_create(&metrics.model_label(bucket.model()))
                .observe(wait.as_secs_f64());
            ("suspended", limited_by.as_str())
        }
    };
    metrics
        .pacing_decisions
        .get_or_create(&PacingLabels {
            bucket: metrics.bucket_label(&bucket.label()),
            result,
            limited_by,
        })
        .inc();
}

/// Resolution of one bucket's rates from its column hash and the configured
/// rates (what the script does).
pub(crate) fn resolve(
    hash: &HashMap<String, String>,
    tenant: &str,
    configured: Rates,
) -> EffectiveRates {
    let factor = hash
        .get("factor")
        .and_then(|f| f.trim().parse::<f64>().ok())
        .unwrap_or(1.0);
    // As the script's `pick`: a field that is not a number counts as unset.
    let pick = |prefix: &str, fallback: Option<f64>| {
        [format!("{prefix}:{tenant}"), format!("{prefix}:*")]
            .iter()
            .find_map(|field| hash.get(field).and_then(|v| RateSetting::parse(v)))
            .map_or(fallback, RateSetting::as_rate)
    };
    EffectiveRates {
        requests_per_second: gcra::apply_factor(
            pick("rps", configured.requests_per_second),
            factor,
        ),
        tokens_per_second: gcra::apply_factor(pick("tps", configured.tokens_per_second), factor),
        factor,
    }
}

fn parse_overrides(map: &HashMap<String, String>) -> ColumnOverrides {
    let mut out = ColumnOverrides {
        factor: map.get("factor").and_then(|f| f.parse().ok()),
        ..ColumnOverrides::default()
    };
    for (field, value) in map {
        let Some((kind, tenant)) = field.split_once(':') else {
            continue;
        };
        let setting = RateSetting::parse(value);
        let target = if tenant == "*" {
            &mut out.column
        } else {
            let name = map
                .get(&format!("name:{tenant}"))
                .cloned()
                .unwrap_or_else(|| tenant.to_string());
            out.buckets.entry(name).or_default()
        };
        match kind {
            "rps" => target.requests_per_second = setting,
            "tps" => target.tokens_per_second = setting,
            _ => {}
        }
    }
    out
}

fn scope_field<'a>(scope: Scope<'a>, dimension: Dimension) -> (String, String, &'a str) {
    let prefix = match dimension {
        Dimension::Requests => "rps",
        Dimension::Tokens => "tps",
    };
    match scope {
        Scope::Column { model } => (keys::rates_key(model), format!("{prefix}:*"), model),
        Scope::Bucket { tenant, model } => (
            keys::rates_key(model),
            format!("{prefix}:{}", keys::sanitize(tenant)),
            model,
        ),
    }
}

fn rate_arg(rate: Option<f64>) -> f64 {
    match rate {
        Some(r) if r.is_finite() && r >= 0.0 => r,
        _ => -1.0,
    }
}

fn validate_rate(rate: f64) -> Result<(), PacingError> {
    if rate.is_finite() && rate >= 0.0 {
        Ok(())
    } else {
        Err(PacingError::Invalid(format!(
            "a rate must be finite and >= 0 (None = unlimited), not {rate}"
        )))
    }
}

fn validate_rates(rates: &Rates) -> Result<(), PacingError> {
    for rate in [rates.requests_per_second, rates.tokens_per_second]
        .into_iter()
        .flatten()
    {
        validate_rate(rate)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::gcra::{apply_factor, interval_ms, step, Step, CATCH_UP_MS};
    use super::*;

    #[test]
    fn interval_from_rate() {
        assert_eq!(interval_ms(Some(4.0)), Some(250.0));
        assert_eq!(interval_ms(Some(0.5)), Some(2000.0));
        assert_eq!(interval_ms(None), None);
        assert_eq!(interval_ms(Some(f64::INFINITY)), None);
        assert_eq!(interval_ms(Some(0.0)), Some(f64::INFINITY));
    }

    #[test]
    fn factor_application() {
        assert_eq!(apply_factor(Some(10.0), 0.5), Some(5.0));
        assert_eq!(apply_factor(Some(10.0), 2.0), Some(20.0));
        assert_eq!(apply_factor(None, 0.5), None);
        assert_eq!(apply_factor(Some(10.0), 0.0), Some(0.0));
        assert_eq!(apply_factor(Some(-1.0), 3.0), None);
    }

    /// R/s with burst 1 admits exactly one message per interval.
    #[test]
    fn strict_leaky_bucket() {
        let interval = 1000.0 / 5.0;
        let mut tat = None;
        let mut admitted = 0;
        for now in (0..1000).step_by(10) {
            if let Step::Admit { new_tat } = step(tat, now as f64, 1.0, interval, 1.0) {
                tat = Some(new_tat);
                admitted += 1;
            }
        }
        assert_eq!(admitted, 5);
        // Right after an admit, the wait is one interval.
        let tat = Some(1000.0 + interval);
        assert_eq!(step(tat, 1000.0, 1.0, interval, 1.0), Step::Wait(interval));
    }

    #[test]
    fn a_late_check_keeps_the_schedule_but_a_pause_earns_at_most_the_slack() {
        // 20/s, burst 1: checks 2 ms after each slot still land one per 50 ms.
        let interval = 50.0;
        let mut tat = None;
        let mut now = 0.0;
        for _ in 0..100 {
            match step(tat, now, 1.0, interval, 1.0) {
                Step::Admit { new_tat } => {
                    tat = Some(new_tat);
                    now = new_tat + 2.0;
                }
                Step::Wait(w) => panic!("waited {w} at {now}"),
            }
        }
        // 100 admits, the last at 99 · 50 + 2 ms: no lateness accumulated.
        assert_eq!(now - 2.0, 100.0 * interval);
        // Later than the slack: the lateness beyond it is lost, as before.
        let Step::Admit { new_tat } = step(Some(1000.0), 1020.0, 1.0, interval, 1.0) else {
            panic!("late check refused");
        };
        assert_eq!(new_tat, 1020.0 - CATCH_UP_MS + interval);
        // After a pause, the next slot comes at most CATCH_UP_MS early.
        assert_eq!(
            step(Some(new_tat), 1020.0, 1.0, interval, 1.0),
            Step::Wait(interval - CATCH_UP_MS)
        );
    }

    #[test]
    fn burst_and_big_messages() {
        // Burst 3: three at once, then one per interval.
        let mut tat = None;
        for _ in 0..3 {
            match step(tat, 0.0, 1.0, 100.0, 3.0) {
                Step::Admit { new_tat } => tat = Some(new_tat),
                Step::Wait(w) => panic!("waited {w}"),
            }
        }
        assert_eq!(step(tat, 0.0, 1.0, 100.0, 3.0), Step::Wait(100.0));
        // 1000 tokens/s, burst 0: a 5000-token message runs on an empty
        // bucket, the next one waits its whole cost.
        let interval = 1.0;
        let Step::Admit { new_tat } = step(None, 0.0, 5000.0, interval, 0.0) else {
            panic!("big message starved");
        };
        assert_eq!(new_tat, 5000.0);
        assert_eq!(
            step(Some(new_tat), 0.0, 5000.0, interval, 0.0),
            Step::Wait(5000.0)
        );
        assert_eq!(
            step(Some(new_tat), 1000.0, 10.0, interval, 0.0),
            Step::Wait(4000.0)
        );
    }

    #[test]
    fn a_correction_moves_the_debt_by_the_difference_never_below_empty() {
        use gcra::{correct, Stored};
        let debt = |tat| {
            Some(Stored {
                tat,
                interval: 10.0,
            })
        };
        let tat_after = |w: Option<gcra::Write>| w.map(|w| w.stored.tat);
        // 100 tok/s: 30 tokens more than estimated = 300 ms more debt.
        assert_eq!(
            tat_after(correct(1000.0, Some(100.0), debt(1500.0), 30.0)),
            Some(1800.0)
        );
        // 20 fewer: 200 ms back.
        assert_eq!(
            tat_after(correct(1000.0, Some(100.0), debt(1500.0), -20.0)),
            Some(1300.0)
        );
        // More back than is owed: an empty bucket, not credit.
        assert_eq!(
            tat_after(correct(1000.0, Some(100.0), debt(1500.0), -90.0)),
            Some(1000.0)
        );
        // Already empty (or never used): nothing to give back; a debt starts now.
        assert_eq!(correct(1000.0, Some(100.0), debt(900.0), -5.0), None);
        assert_eq!(correct(1000.0, Some(100.0), None, -5.0), None);
        assert_eq!(
            tat_after(correct(1000.0, Some(100.0), None, 5.0)),
            Some(1050.0)
        );
        // Unpaced tokens, a paused bucket, no difference: untouched.
        assert_eq!(correct(1000.0, None, debt(1500.0), 30.0), None);
        assert_eq!(correct(1000.0, Some(0.0), debt(1500.0), 30.0), None);
        assert_eq!(correct(1000.0, Some(100.0), debt(1500.0), 0.0), None);
        // A changed rate (now 50 tok/s): the 50 units owed are rescaled first.
        let w = correct(1000.0, Some(50.0), debt(1500.0), 10.0);
        assert_eq!(
            w.map(|w| (w.stored.tat, w.stored.interval)),
            Some((2200.0, 20.0))
        );
    }

    #[test]
    fn rate_change_rescales_the_debt() {
        // 1/s: admitted at 0, tat 1000. At 10 the rate becomes 100/s: the
        // 0.99 unit still to drain takes 9.9 ms, not 990 ms.
        let tat = gcra::rescale(1000.0, 10.0, 1000.0, 10.0);
        assert!((tat - 19.9).abs() < 1e-9);
        assert_eq!(gcra::rescale(5.0, 10.0, 1000.0, 10.0), 5.0);
    }

    #[test]
    fn plan_uses_the_suspend_floor() {
        let floor = Duration::from_millis(30);
        assert_eq!(PaceDecision::Admit.plan(floor), PacePlan::Run);
        let wait = |ms| PaceDecision::Wait {
            wait: Duration::from_millis(ms),
            limited_by: Limit::Requests,
        };
        assert_eq!(
            wait(10).plan(floor),
            PacePlan::WaitLocally(Duration::from_millis(10))
        );
        assert_eq!(
            wait(500).plan(floor),
            PacePlan::Suspend(Duration::from_millis(500))
        );
    }

    #[test]
    fn resolution_order() {
        let configured = Rates {
            requests_per_second: Some(10.0),
            tokens_per_second: None,
        };
        let rps = |hash: &HashMap<String, String>, tenant: &str| {
            resolve(hash, tenant, configured).requests_per_second
        };
        let mut hash = HashMap::new();
        assert_eq!(rps(&hash, "t"), Some(10.0));
        hash.insert("rps:*".to_string(), "4".to_string());
        assert_eq!(rps(&hash, "t"), Some(4.0));
        hash.insert("rps:t".to_string(), "2".to_string());
        hash.insert("tps:t".to_string(), "100".to_string());
        hash.insert("factor".to_string(), "0.5".to_string());
        let rates = resolve(&hash, "t", configured);
        assert_eq!(rates.requests_per_second, Some(1.0));
        assert_eq!(rates.tokens_per_second, Some(50.0));
        hash.insert("rps:t".to_string(), "-1".to_string());
        assert_eq!(rps(&hash, "t"), None);
        // Another tenant only sees the column override.
        assert_eq!(rps(&hash, "u"), Some(2.0));
        // Not a number: unset, as for the script's tonumber (blanks allowed).
        hash.insert("rps:t".to_string(), "fast".to_string());
        assert_eq!(rps(&hash, "t"), Some(2.0));
        hash.insert("rps:*".to_string(), String::new());
        hash.insert("factor".to_string(), " 2 ".to_string());
        assert_eq!(rps(&hash, "t"), Some(20.0));
    }

    #[test]
    fn overrides_listing() {
        let mut hash = HashMap::new();
        hash.insert("factor".to_string(), "0.5".to_string());
        hash.insert("rps:*".to_string(), "4".to_string());
        hash.insert("tps:a%20b".to_string(), "-1".to_string());
        hash.insert("name:a%20b".to_string(), "a b".to_string());
        // The whole listing: nothing besides what was stored.
        let a_b = ScopeOverrides {
            requests_per_second: None,
            tokens_per_second: Some(RateSetting::Unlimited),
        };
        let expected = ColumnOverrides {
            factor: Some(0.5),
            column: ScopeOverrides {
                requests_per_second: Some(RateSetting::PerSecond(4.0)),
                tokens_per_second: None,
            },
            buckets: BTreeMap::from([("a b".to_string(), a_b)]),
        };
        assert_eq!(parse_overrides(&hash), expected);
    }
}
