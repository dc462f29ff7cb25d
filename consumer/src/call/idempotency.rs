//! Idempotency markers: "the model is never called twice for one request",
//! whatever the broker redelivers.
//!
//! # Keys
//!
//! - `done:{id}` (value `ok` | `error` | `cancelled` | `interrupted`, expiry
//!   `done_ttl_secs`, default one day): a terminal entry is in the stream.
//! - `processing:{id}` (value `<owner> <heartbeat-ms>`, the contract's
//!   `sluice_contract::claim` format, built by the scripts below; expiry
//!   `processing_retention_secs`): an attempt claimed the request. `owner`
//!   is unique per attempt (consumer id + a counter), so a redelivery to the
//!   same process is still a different attempt. The owner rewrites the
//!   heartbeat (Redis's clock) every `heartbeat_interval_ms` while its call
//!   runs.
//!
//! # Rules (each one Lua script, atomic on the request's slot)
//!
//! 1. **Claim**, before anything is sent to the model:
//!    - `done` exists → skip, ack ([`Claim::AlreadyDone`]).
//!    - `processing` exists with a heartbeat younger than `lease_ms` → another
//!      attempt is alive: do nothing now, look again later
//!      ([`Claim::InProgressElsewhere`]). It will write the terminal entry.
//!    - `processing` exists with a stale (or unreadable) heartbeat → an
//!      attempt died mid-call: the model may have started on it and the
//!      client may have seen part of the answer. Write `error` (code
//!      `interrupted`), set `done`, ack ([`Claim::Interrupted`]). The model is
//!      **not** called again.
//!    - `cancel` exists → the client is gone: write `error` (code
//!      `cancelled`), set `done`, ack, no call.
//!    - otherwise `SET processing` (atomically with the checks above) →
//!      [`Claim::Proceed`]: this attempt, and only this one, may call the model.
//! 2. **Heartbeat** while the call runs: rewrite the heartbeat only if
//!    `processing` still names this owner, and report `cancel`. If another
//!    attempt took over (it judged this one dead), abort the call.
//! 3. **Finish**: XADD the terminal entry, EXPIRE the stream, SET `done`,
//!    DEL `processing`, all only if `done` is absent and `processing` still
//!    names this owner or is gone (lost by Redis: a takeover would have set
//!    `done`). So exactly one terminal entry is written per request.
//! 4. **Release** (infrastructure failure before any output, the request
//!    must run again): DEL `processing` if it names this owner, so the next
//!    delivery can claim it. If Redis is down the release fails; the marker
//!    then goes stale and the next delivery writes `interrupted` (a
//!    conservative answer, never a second model call).
//!
//! # Why the model is never called twice
//!
//! A call happens only after a successful claim; a claim succeeds only when
//! neither `done` nor `processing` exists, and it creates `processing` in the
//! same atomic step. `processing` disappears only (a) with `done` set in the
//! same step (finish, interrupted), after which every claim skips, or (b) by
//! release, which happens only after the backend call ended without output,
//! or (c) by expiry after `processing_retention_secs`, which must therefore
//! exceed the longest time a message can be redelivered. A second call can
//! therefore only follow a first call that produced nothing (connect failure,
//! timeout before the first chunk, backend busy) — the retry the design asks
//! for. Stale-heartbeat takeover writes an error instead of calling, and the
//! fenced finish keeps a late original attempt from writing a second
//! terminal entry.
//!
//! # Short heartbeats (1 s, dead after 2 s) and a slow owner
//!
//! Timing decides only *how soon* a dead attempt is noticed, never whether
//! the model is called twice. A live owner whose heartbeat is late (Redis
//! slow, the process stalled) past `lease_ms` can be judged dead: the
//! takeover writes `interrupted` and sets `done` in one step, and calls
//! nothing. The owner's next heartbeat then finds `processing` gone (rule 2
//! checks the owner before it rewrites), so the call is aborted; its finish
//! is fenced the same way (rule 3), so the client sees one terminal entry.
//! The cost of a too-short bound is a needless `interrupted`, not a double
//! call. Likewise the pop lease (`lease:{id}`, refreshed every
//! `heartbeat_interval_ms`): if it lapses while its consumer lives, the
//! endpoint publishes the request once more and the two deliveries meet at
//! the atomic claim — one calls, the other finds it running or done.

use crate::call::stream::{StreamConfig, Terminal};
use crate::keys;
use redis::Value;
use serde::{Deserialize, Serialize};
use sluice_contract::claim::{self, ClaimTiming};
use sluice_redis::RedisConn;
use std::sync::atomic::{AtomicU64, Ordering};

/// Settings of the markers.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct IdempotencyConfig {
    /// A heartbeat older than this means the owning attempt is dead (at
    /// least two heartbeat intervals; 2 s by default). The deferral endpoint
    /// gives a claim up one interval later (`ClaimTiming::stale_after_ms`).
    pub lease_ms: u64,
    /// How often the owner refreshes its heartbeat, and the runner a popped
    /// request's lease (at most `lease_ms / 2`; 1 s by default).
    pub heartbeat_interval_ms: u64,
    /// Expiry of `processing:{id}`: at least `max_work_item_age_secs`.
    pub processing_retention_secs: u64,
    /// Expiry of `done:{id}`: at least `max_work_item_age_secs`. Redis holds
    /// one marker per deferred request for this long, so its memory for
    /// markers is bounded by the deferred rate times this.
    pub done_ttl_secs: u64,
    /// The redelivery horizon: a work item published longer ago than this
    /// (`enqueued_at_ms`, kept by every re-publish) is acknowledged without
    /// a call (outcome `expired`). So a copy that still runs is younger than
    /// its `done` marker can be, whatever the broker or the endpoint
    /// delivers late. At least the deferral endpoint's longest wait
    /// (`--deferral-timeout-s`, 1800 s for high priority): no client waits
    /// longer.
    pub max_work_item_age_secs: u64,
    /// How long a running call rides out Redis being unreachable (its
    /// chunks held back, its heartbeat and terminal entry tried again)
    /// before it gives up: a Redis restart or failover shorter than this
    /// breaks no stream. During the outage nobody can take the request over
    /// (a takeover needs Redis), and the deferral endpoint judges no lapse
    /// until Redis has been back for a while. 0: give up at the first error.
    pub redis_outage_grace_ms: u64,
    /// Replicas that must hold a claim before the model is called (Redis
    /// `WAIT` after the claim, on a connection of its own so that a slow
    /// replica holds up no answer stream). A failover promotes a replica;
    /// one that holds the claim keeps a redelivered copy from calling the
    /// model again. 0 (default): not waited for (a failover that loses the
    /// last writes can then let a copy call the model twice).
    pub claim_replicas: u32,
    /// How long a claim waits for `claim_replicas`, ms. Not acknowledged in
    /// time: the claim is given back and the request tried later (outcome
    /// `retry`, error kind `redis`): fail closed, never an unguarded call.
    /// Below `heartbeat_interval_ms`, so the lease stays fresh meanwhile.
    pub claim_replicas_timeout_ms: u64,
}

/// Default [`IdempotencyConfig::claim_replicas_timeout_ms`].
pub const DEFAULT_CLAIM_REPLICAS_TIMEOUT_MS: u64 = 100;

/// Default [`IdempotencyConfig::redis_outage_grace_ms`].
pub const DEFAULT_REDIS_OUTAGE_GRACE_MS: u64 = 10_000;

/// Default [`IdempotencyConfig::max_work_item_age_secs`]: twice the deferral
/// endpoint's longest wait (high priority, 1800 s).
pub const DEFAULT_MAX_WORK_ITEM_AGE_SECS: u64 = 3600;

impl Default for IdempotencyConfig {
    fn default() -> Self {
        IdempotencyConfig {
            lease_ms: claim::DEFAULT_LEASE_MS,
            heartbeat_interval_ms: claim::DEFAULT_HEARTBEAT_INTERVAL_MS,
            processing_retention_secs: 86_400,
            done_ttl_secs: 86_400,
            max_work_item_age_secs: DEFAULT_MAX_WORK_ITEM_AGE_SECS,
            redis_outage_grace_ms: DEFAULT_REDIS_OUTAGE_GRACE_MS,
            claim_replicas: 0,
            claim_replicas_timeout_ms: DEFAULT_CLAIM_REPLICAS_TIMEOUT_MS,
        }
    }
}

impl IdempotencyConfig {
    /// The heartbeat settings the deferral endpoint judges claims by (see
    /// `sluice_contract::claim`).
    pub fn claim_timing(&self) -> ClaimTiming {
        ClaimTiming {
            lease_ms: self.lease_ms,
            heartbeat_interval_ms: self.heartbeat_interval_ms,
        }
    }

    /// [`Self::redis_outage_grace_ms`].
    pub fn redis_outage_grace(&self) -> std::time::Duration {
        std::time::Duration::from_millis(self.redis_outage_grace_ms)
    }

    pub fn validate(&self) -> Result<(), String> {
        self.claim_timing()
            .validate()
            .map_err(|why| format!("idempotency: {why}"))?;
        if self.claim_replicas > 0
            && !(1..self.heartbeat_interval_ms).contains(&self.claim_replicas_timeout_ms)
        {
            return Err(format!(
                "idempotency: claim_replicas_timeout_ms ({}) must be at least 1 (WAIT 0 waits \
                 forever) and below heartbeat_interval_ms ({}), so the lease stays fresh",
                self.claim_replicas_timeout_ms, self.heartbeat_interval_ms
            ));
        }
        if self.max_work_item_age_secs == 0 {
            return Err("idempotency: max_work_item_age_secs must be > 0".into());
        }
        for (name, secs) in [
            ("done_ttl_secs", self.done_ttl_secs),
            ("processing_retention_secs", self.processing_retention_secs),
        ] {
            if secs < self.max_work_item_age_secs {
                return Err(format!(
                    "idempotency: {name} ({secs}) must be at least max_work_item_age_secs ({}): \
                     a copy of a message can still arrive that long after it was published, \
                     and must find the marker or the model is called twice",
                    self.max_work_item_age_secs
                ));
            }
        }
        Ok(())
    }
}

const NOW: &str = r#"
if redis.replicate_commands then pcall(redis.replicate_commands) end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
"#;

/// KEYS: done, processing, cancel, response.
/// ARGV: owner, lease ms, retention ms, maxlen, stream ttl s, done ttl s,
/// interrupted message, cancelled message, settle only ('1': take no claim).
/// Returns {0, claimed at ms} claimed | {1, done} | {2} cancelled | {3,
/// owner, age} alive elsewhere | {4, owner, age} interrupted | {5} free, not
/// claimed (settle only). A claim sent again by the same attempt (its reply
/// was lost with the connection) finds its own claim and gets {0, …} again.
const CLAIM_BODY: &str = r#"
local done = redis.call('GET', KEYS[1])
if done then return {1, done} end
local function terminal(code, status, message, done_value)
  redis.call('XADD', KEYS[4], 'MAXLEN', '~', ARGV[4], '*', 'type', 'error',
    'status', status, 'code', code, 'message', message)
  redis.call('EXPIRE', KEYS[4], ARGV[5])
  redis.call('SET', KEYS[1], done_value, 'EX', ARGV[6])
  redis.call('DEL', KEYS[2])
end
local cur = redis.call('GET', KEYS[2])
if cur then
  local owner, hb = string.match(cur, '^(%S+) (%d+)$')
  local age = -1
  if hb then age = now - tonumber(hb) end
  if owner == ARGV[1] and hb then return {0, tonumber(hb)} end
  if hb and age <= tonumber(ARGV[2]) then
    return {3, owner, age}
  end
  terminal('interrupted', '502', ARGV[7], 'interrupted')
  return {4, owner or cur, age}
end
if redis.call('EXISTS', KEYS[3]) == 1 then
  terminal('cancelled', '499', ARGV[8], 'cancelled')
  return {2}
end
if ARGV[9] == '1' then return {5} end
redis.call('SET', KEYS[2], ARGV[1] .. ' ' .. now, 'PX', ARGV[3])
return {0, now}
"#;

/// KEYS: processing, cancel, done. ARGV: owner, retention ms.
/// Returns {owned 1|0, cancelled 1|0}.
///
/// A claim that is gone while `done` is absent was lost by Redis (a restart
/// without its data, a failover that dropped the last writes): nobody took
/// the request over (a takeover sets `done` in the same step), so the owner
/// writes its claim again — before a copy of the message can claim it and
/// call the model a second time.
const HEARTBEAT_BODY: &str = r#"
local cur = redis.call('GET', KEYS[1])
local cancelled = redis.call('EXISTS', KEYS[2])
local prefix = ARGV[1] .. ' '
if not cur then
  if redis.call('EXISTS', KEYS[3]) == 1 then return {0, cancelled} end
elseif string.sub(cur, 1, #prefix) ~= prefix then
  return {0, cancelled}
end
redis.call('SET', KEYS[1], prefix .. now, 'PX', ARGV[2])
return {1, cancelled}
"#;

/// KEYS: done, processing, response. ARGV: owner ('' = no owner check, only
/// when no live attempt holds the request: see `give_up`), maxlen, stream
/// ttl s, done ttl s, done value, lease ms, then field/value pairs.
/// Returns 1 written | 0 not (done already, or another owner / a live owner).
///
/// A claim that is gone while `done` is absent was lost by Redis, as in the
/// heartbeat: the owner still owns the request. A call whose answer ended
/// while Redis was away finishes before its next heartbeat could write the
/// claim again; refusing it left the client without an end until its
/// timeout.
const FINISH_BODY: &str = r#"
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
local cur = redis.call('GET', KEYS[2])
if ARGV[1] ~= '' then
  local prefix = ARGV[1] .. ' '
  if cur and string.sub(cur, 1, #prefix) ~= prefix then return 0 end
elseif cur then
  local hb = string.match(cur, '^%S+ (%d+)$')
  if hb and now - tonumber(hb) <= tonumber(ARGV[6]) then return 0 end
end
local entry = {'XADD', KEYS[3], 'MAXLEN', '~', ARGV[2], '*'}
for i = 7, #ARGV do entry[#entry + 1] = ARGV[i] end
redis.call(unpack(entry))
redis.call('EXPIRE', KEYS[3], ARGV[3])
redis.call('SET', KEYS[1], ARGV[5], 'EX', ARGV[4])
redis.call('DEL', KEYS[2])
return 1
"#;

/// KEYS: processing. ARGV: owner. Returns 1 deleted | 0 not ours.
const RELEASE_SCRIPT: &str = r#"
local cur = redis.call('GET', KEYS[1])
local prefix = ARGV[1] .. ' '
if cur and string.sub(cur, 1, #prefix) == prefix then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
"#;

/// `message` of the `interrupted` error.
pub(crate) const INTERRUPTED_MESSAGE: &str =
    "an earlier attempt of this request was interrupted; it is not sent to the model again";
/// `message` of a `cancelled` error written before any call.
pub(crate) const CANCELLED_BEFORE_CALL_MESSAGE: &str =
    "the client went away before the request reached the model";

/// Result of a claim.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Claim {
    /// This attempt owns the request and may call the model.
    Proceed(Lease),
    /// A terminal entry exists already (`done:{id}` holds this value).
    AlreadyDone(String),
    /// The client had gone away: `error` (cancelled) written, no call.
    Cancelled,
    /// Another attempt holds the request and is alive.
    InProgressElsewhere {
        owner: String,
        heartbeat_age_ms: i64,
    },
    /// An earlier attempt died mid-call: `error` (interrupted) written, no call.
    Interrupted {
        previous_owner: String,
        heartbeat_age_ms: i64,
    },
}

/// Ownership of one request by one attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Lease {
    pub req_id: String,
    pub owner: String,
    /// When the claim was taken (Redis's clock, ms): the first part of the
    /// ids of this attempt's chunk entries (see `stream::write_chunks`).
    pub claimed_at_ms: u64,
}

/// What a heartbeat found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Heartbeat {
    pub owned: bool,
    pub cancelled: bool,
}

/// The marker scripts of one consumer instance.
pub(crate) struct Idempotency {
    consumer_id: String,
    attempt: AtomicU64,
    config: IdempotencyConfig,
    claim: redis::Script,
    heartbeat: redis::Script,
    finish: redis::Script,
    release: redis::Script,
}

impl Idempotency {
    /// `consumer_id`: the consumer's name (e.g. pod name + pid);
    /// whitespace is replaced, and a random word appended, so that owner
    /// names stay unique per attempt even where two consumers were given
    /// the same name (a claim sent again finds its own owner's claim and
    /// proceeds: a shared name would let two attempts both call).
    pub(crate) fn new(consumer_id: &str, config: IdempotencyConfig) -> Result<Self, String> {
        config.validate()?;
        let consumer_id: String = consumer_id
            .chars()
            .map(|c| {
                if c.is_whitespace() || c.is_control() {
                    '_'
                } else {
                    c
                }
            })
            .collect();
        Ok(Idempotency {
            consumer_id: format!("{consumer_id}.{:08x}", instance_nonce()),
            attempt: AtomicU64::new(0),
            config,
            claim: redis::Script::new(&format!("{NOW}{CLAIM_BODY}")),
            heartbeat: redis::Script::new(&format!("{NOW}{HEARTBEAT_BODY}")),
            finish: redis::Script::new(&format!("{NOW}{FINISH_BODY}")),
            release: redis::Script::new(RELEASE_SCRIPT),
        })
    }

    pub(crate) fn config(&self) -> &IdempotencyConfig {
        &self.config
    }

    /// Loads the scripts so the first calls need no NOSCRIPT retry.
    pub(crate) async fn preload(&self, conn: &mut RedisConn) -> Result<(), redis::RedisError> {
        for script in [&self.claim, &self.heartbeat, &self.finish, &self.release] {
            script.load_async(conn).await?;
        }
        Ok(())
    }

    /// Rule 1.
    /// `owner` from [`Self::new_owner`]: the same one when the claim is
    /// sent again after a lost reply.
    pub(crate) async fn claim(
        &self,
        conn: &mut RedisConn,
        req_id: &str,
        owner: &str,
        stream: &StreamConfig,
    ) -> Result<Claim, redis::RedisError> {
        self.run_claim(conn, req_id, owner, stream, false)
            .await?
            .ok_or_else(|| unexpected_reply("claim script reply", "free but not claimed"))
    }

    /// A new attempt's owner name (unique per attempt).
    pub(crate) fn new_owner(&self) -> String {
        claim::owner(
            &self.consumer_id,
            self.attempt.fetch_add(1, Ordering::Relaxed),
        )
    }

    /// Rule 1 without taking a free request: answers what needs no model
    /// call (done, cancelled, interrupted, alive elsewhere); `None` when the
    /// request is free, to be claimed (after pacing) with [`Self::claim`].
    /// For a request seen claimed at pop: its answer must not wait for a
    /// pacing slot it will not use.
    pub(crate) async fn settle(
        &self,
        conn: &mut RedisConn,
        req_id: &str,
        stream: &StreamConfig,
    ) -> Result<Option<Claim>, redis::RedisError> {
        let owner = self.new_owner();
        self.run_claim(conn, req_id, &owner, stream, true).await
    }

    async fn run_claim(
        &self,
        conn: &mut RedisConn,
        req_id: &str,
        owner: &str,
        stream: &StreamConfig,
        settle_only: bool,
    ) -> Result<Option<Claim>, redis::RedisError> {
        let reply: Vec<Value> = self
            .claim
            .key(keys::done(req_id))
            .key(keys::processing(req_id))
            .key(keys::cancel(req_id))
            .key(keys::response(req_id))
            .arg(owner)
            .arg(self.config.lease_ms)
            .arg(self.config.processing_retention_secs.saturating_mul(1000))
            .arg(stream.maxlen)
            .arg(stream.ttl_after_end_secs)
            .arg(self.config.done_ttl_secs)
            .arg(INTERRUPTED_MESSAGE)
            .arg(CANCELLED_BEFORE_CALL_MESSAGE)
            .arg(if settle_only { "1" } else { "0" })
            .invoke_async(conn)
            .await?;
        let code = reply.first().and_then(as_i64);
        let text = |i: usize| reply.get(i).and_then(as_string).unwrap_or_default();
        let number = |i: usize| reply.get(i).and_then(as_i64).unwrap_or(-1);
        Ok(Some(match code {
            Some(0) => Claim::Proceed(Lease {
                req_id: req_id.to_string(),
                owner: owner.to_string(),
                claimed_at_ms: u64::try_from(number(1))
                    .map_err(|_| unexpected_reply("claim time", format!("{reply:?}")))?,
            }),
            Some(5) => return Ok(None),
            Some(1) => Claim::AlreadyDone(text(1)),
            Some(2) => Claim::Cancelled,
            Some(3) => Claim::InProgressElsewhere {
                owner: text(1),
                heartbeat_age_ms: number(2),
            },
            Some(4) => Claim::Interrupted {
                previous_owner: text(1),
                heartbeat_age_ms: number(2),
            },
            _ => return Err(unexpected_reply("claim script reply", format!("{reply:?}"))),
        }))
    }

    /// Rule 2.
    pub(crate) async fn heartbeat(
        &self,
        conn: &mut RedisConn,
        lease: &Lease,
    ) -> Result<Heartbeat, redis::RedisError> {
        let (owned, cancelled): (i64, i64) = self
            .heartbeat
            .key(keys::processing(&lease.req_id))
            .key(keys::cancel(&lease.req_id))
            .key(keys::done(&lease.req_id))
            .arg(&lease.owner)
            .arg(self.config.processing_retention_secs.saturating_mul(1000))
            .invoke_async(conn)
            .await?;
        Ok(Heartbeat {
            owned: owned == 1,
            cancelled: cancelled == 1,
        })
    }

    /// Rule 3. `Ok(false)`: not written (this attempt lost the request).
    pub(crate) async fn finish(
        &self,
        conn: &mut RedisConn,
        lease: &Lease,
        terminal: &Terminal,
        stream: &StreamConfig,
    ) -> Result<bool, redis::RedisError> {
        self.write_terminal(conn, &lease.req_id, Some(&lease.owner), terminal, stream)
            .await
    }

    /// Writes a terminal entry without owning the request: for a pop loop
    /// that gives up on a message (e.g. the backend stayed unreachable for
    /// too many attempts). Written only if no terminal entry exists and no
    /// live attempt holds the request. `Ok(false)`: not written.
    pub(crate) async fn give_up(
        &self,
        conn: &mut RedisConn,
        req_id: &str,
        terminal: &Terminal,
        stream: &StreamConfig,
    ) -> Result<bool, redis::RedisError> {
        self.write_terminal(conn, req_id, None, terminal, stream)
            .await
    }

    async fn write_terminal(
        &self,
        conn: &mut RedisConn,
        req_id: &str,
        owner: Option<&str>,
        terminal: &Terminal,
        stream: &StreamConfig,
    ) -> Result<bool, redis::RedisError> {
        let mut invocation = self.finish.prepare_invoke();
        invocation
            .key(keys::done(req_id))
            .key(keys::processing(req_id))
            .key(keys::response(req_id))
            .arg(owner.unwrap_or(""))
            .arg(stream.maxlen)
            .arg(stream.ttl_after_end_secs)
            .arg(self.config.done_ttl_secs)
            .arg(terminal.done_value())
            .arg(self.config.lease_ms);
        for (field, value) in terminal.fields() {
            invocation.arg(field).arg(value);
        }
        let written: i64 = invocation.invoke_async(conn).await?;
        Ok(written == 1)
    }

    /// Rule 4. `Ok(false)`: the marker was not this attempt's any more.
    pub(crate) async fn release(
        &self,
        conn: &mut RedisConn,
        lease: &Lease,
    ) -> Result<bool, redis::RedisError> {
        let released: i64 = self
            .release
            .key(keys::processing(&lease.req_id))
            .arg(&lease.owner)
            .invoke_async(conn)
            .await?;
        Ok(released == 1)
    }
}

/// A random word, new for every call (std's per-process random hasher
/// keys, advanced on each use): no dependency needed for 32 unguessable bits.
fn instance_nonce() -> u32 {
    use std::hash::BuildHasher;
    std::collections::hash_map::RandomState::new().hash_one(std::time::SystemTime::now()) as u32
}

fn unexpected_reply(what: &'static str, detail: impl Into<String>) -> redis::RedisError {
    redis::RedisError::from((redis::ErrorKind::UnexpectedReturnType, what, detail.into()))
}

fn as_i64(value: &Value) -> Option<i64> {
    match value {
        Value::Int(n) => Some(*n),
        _ => None,
    }
}

fn as_string(value: &Value) -> Option<String> {
    match value {
        Value::BulkString(bytes) => Some(String::from_utf8_lossy(bytes).into_owned()),
        Value::SimpleString(s) => Some(s.clone()),
        Value::Int(n) => Some(n.to_string()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_validation() {
        assert!(IdempotencyConfig::default().validate().is_ok());
        let bad = IdempotencyConfig {
            lease_ms: 1000,
            heartbeat_interval_ms: 600,
            ..IdempotencyConfig::default()
        };
        assert!(bad.validate().is_err());
        let zero = IdempotencyConfig {
            heartbeat_interval_ms: 0,
            ..IdempotencyConfig::default()
        };
        assert!(zero.validate().is_err());
    }

    #[test]
    fn markers_must_outlive_the_redelivery_horizon() {
        let short = IdempotencyConfig {
            done_ttl_secs: 300,
            processing_retention_secs: 300,
            max_work_item_age_secs: 240,
            ..IdempotencyConfig::default()
        };
        assert_eq!(short.validate(), Ok(()));
        let done_too_short = IdempotencyConfig {
            done_ttl_secs: 239,
            ..short.clone()
        };
        let why = done_too_short.validate().unwrap_err();
        assert!(why.contains("done_ttl_secs (239)"), "{why}");
        assert!(why.contains("max_work_item_age_secs (240)"), "{why}");
        let processing_too_short = IdempotencyConfig {
            processing_retention_secs: 100,
            ..short.clone()
        };
        assert!(processing_too_short.validate().is_err());
        // The default horizon refuses a done TTL below an hour.
        let below_default = IdempotencyConfig {
            done_ttl_secs: 300,
            ..IdempotencyConfig::default()
        };
        assert!(below_default.validate().is_err());
        let no_horizon = IdempotencyConfig {
            max_work_item_age_secs: 0,
            ..short
        };
        assert!(no_horizon.validate().is_err());
    }

    #[test]
    fn owners_are_unique_per_attempt_and_have_no_spaces() {
        let idem = Idempotency::new("pod a", IdempotencyConfig::default()).unwrap();
        assert!(
            idem.consumer_id.starts_with("pod_a."),
            "{}",
            idem.consumer_id
        );
        assert!(!idem.new_owner().contains(char::is_whitespace));
        assert_ne!(idem.new_owner(), idem.new_owner());
        // Two consumers given the same name still never share an owner.
        let twin = Idempotency::new("pod a", IdempotencyConfig::default()).unwrap();
        assert_ne!(idem.new_owner(), twin.new_owner());
    }
}
