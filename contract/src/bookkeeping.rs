//! Every Redis command on the shared bucket keys, for both sides.
//!
//! A publish to a bucket (tenant × model LiteTopic), by the deferral endpoint
//! or by a consumer re-publishing, is always the same three steps:
//!
//! 1. [`Bookkeeping::announce`] — one script ([`ADMIT_BUCKET`]): add the
//!    bucket to [`keys::BUCKETS`] if the caps allow it (the endpoint passes
//!    its caps; a re-publish passes [`CapValues::UNBOUNDED`], the request
//!    was admitted already), stamp its activity, and read its subscription
//!    mark. Announcing *before* the broker send is what keeps a consumer
//!    retiring the bucket concurrently from dropping it under the message.
//! 2. the send to the broker (not here: the contract does not link the
//!    broker client);
//! 3. [`count_publish`] — one more queued in the bucket's backlog.
//!
//! The consumer counts a pop ([`record_pop`], which also takes the
//! request's lease), refreshes and drops leases, marks the buckets it
//! subscribed to ([`mark_subscribed`]) and retires idle ones
//! ([`retire_if_idle`], [`RETIRE_IDLE`]: the reverse of the announce); the
//! endpoint watches for a lapsed lease ([`lease_held`], [`lapsed_request`]).

use crate::claim::{ClaimTiming, ClaimValue};
use crate::keys;
use redis::AsyncCommands;
use sluice_redis::RedisConn;
use std::time::Duration;

/// Lifetime of a bucket's backlog counter after its last publish.
pub const BACKLOG_TTL_SECS: u64 = 86_400;
/// Length of the new-bucket rate window.
pub const MINUTE_MS: u64 = 60_000;
/// A minute's counter outlives its window; any window key is safe to expire.
pub const WINDOW_TTL_SECS: u64 = 120;
/// Longest wait for a consumer to finish deleting a retired bucket's queue
/// (a little above the reclaim mark's lifetime).
pub const RECLAIM_WAIT: Duration = Duration::from_millis(keys::RECLAIM_MARK_TTL_MS + 1_000);

/// Check the caps and, if they allow it, register a bucket: atomically.
///
/// KEYS[1]  bucket set (`sluice:{buckets}`)
/// KEYS[2]  activity sorted set (bucket → last publish, ms)
/// KEYS[3]  hash bucket → tenant
/// KEYS[4]  hash tenant → bucket count
/// KEYS[5]  this minute's new-bucket counter
/// KEYS[6]  the bucket's subscription mark (set by the consumer)
/// KEYS[7]  the bucket's reclaim mark (a consumer is deleting its queue)
/// ARGV[1]  the bucket (LiteTopic name)
/// ARGV[2]  its tenant (sanitized)
/// ARGV[3]  now, ms (the activity stamp)
/// ARGV[4]  global cap
/// ARGV[5]  per-tenant cap
/// ARGV[6]  new buckets per minute
/// ARGV[7]  TTL of the minute's counter, seconds
///
/// Returns { status, subscribed (0|1), buckets known after the call }:
/// status 1 = the bucket exists (activity stamped), 0 = created,
/// -1 = refused: tenant cap, -2 = refused: global cap, -3 = refused: rate,
/// 2 = the bucket is being reclaimed: ask again shortly. A refusal (and 2)
/// writes nothing.
///
/// A bucket whose tenant entry survived without it being in the set (retired
/// by a consumer of an older version) still holds its tenant's slot: it is
/// neither checked against nor counted again for its tenant.
pub const ADMIT_BUCKET: &str = r#"
if redis.call('SISMEMBER', KEYS[1], ARGV[1]) == 1 then
  redis.call('ZADD', KEYS[2], ARGV[3], ARGV[1])
  return { 1, redis.call('EXISTS', KEYS[6]), redis.call('SCARD', KEYS[1]) }
end
local known = redis.call('SCARD', KEYS[1])
if redis.call('EXISTS', KEYS[7]) == 1 then return { 2, 0, known } end
local held = redis.call('HEXISTS', KEYS[3], ARGV[1]) == 1
if not held then
  local mine = tonumber(redis.call('HGET', KEYS[4], ARGV[2]) or '0') or 0
  if mine >= tonumber(ARGV[5]) then return { -1, 0, known } end
end
if known >= tonumber(ARGV[4]) then return { -2, 0, known } end
local created = tonumber(redis.call('GET', KEYS[5]) or '0') or 0
if created >= tonumber(ARGV[6]) then return { -3, 0, known } end
if redis.call('INCR', KEYS[5]) == 1 then
  redis.call('EXPIRE', KEYS[5], ARGV[7])
end
if not held then
  redis.call('HSET', KEYS[3], ARGV[1], ARGV[2])
  redis.call('HINCRBY', KEYS[4], ARGV[2], 1)
end
redis.call('SADD', KEYS[1], ARGV[1])
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[1])
return { 0, redis.call('EXISTS', KEYS[6]), known + 1 }
"#;

/// The caps a new bucket is checked against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CapValues {
    /// Distinct buckets in all.
    pub max_buckets: u64,
    /// Distinct buckets (models) per tenant.
    pub max_buckets_per_tenant: u64,
    /// New buckets per clock minute, all tenants together.
    pub max_new_buckets_per_minute: u64,
}

impl CapValues {
    /// No cap: a re-publish of a request that was admitted already.
    pub const UNBOUNDED: CapValues = CapValues {
        max_buckets: i64::MAX as u64,
        max_buckets_per_tenant: i64::MAX as u64,
        max_new_buckets_per_minute: i64::MAX as u64,
    };
}

/// Which cap refused a new bucket.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CapHit {
    Tenant,
    Global,
    Rate,
}

/// What [`Bookkeeping::announce`] found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Announced {
    /// The bucket is registered (it was, or `created` now) and its activity
    /// stamped; `subscribed`: a consumer's subscription mark is set.
    Admitted { created: bool, subscribed: bool },
    /// A consumer is deleting the bucket's retired queue at the broker:
    /// nothing may be published to it until that is done.
    Reclaiming,
    /// A cap refused the new bucket; nothing was written.
    Refused(CapHit),
}

/// An announcement and the number of buckets known after it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Announcement {
    pub outcome: Announced,
    /// Size of [`keys::BUCKETS`] after the call.
    pub known: i64,
}

#[derive(Debug, thiserror::Error)]
pub enum BookkeepingError {
    #[error("cannot register bucket {topic}: {source}")]
    Redis {
        topic: String,
        source: redis::RedisError,
    },
    #[error("bucket bookkeeping: unexpected reply {0:?}")]
    Reply(Vec<i64>),
    #[error("bucket {0} is still being reclaimed at the broker")]
    StillReclaiming(String),
}

/// The announce script, loaded once per process.
pub struct Bookkeeping {
    admit: redis::Script,
}

impl Default for Bookkeeping {
    fn default() -> Self {
        Bookkeeping {
            admit: redis::Script::new(ADMIT_BUCKET),
        }
    }
}

impl Bookkeeping {
    /// Step 1 of a publish (see the module docs): register `topic` (the
    /// bucket of `tenant`) if `caps` allow it and stamp its activity.
    pub async fn announce(
        &self,
        redis: &mut RedisConn,
        tenant: &str,
        topic: &str,
        now_ms: u64,
        caps: &CapValues,
    ) -> Result<Announcement, BookkeepingError> {
        let reply: Vec<i64> = self
            .admit
            .key(keys::BUCKETS)
            .key(keys::ACTIVITY)
            .key(keys::BUCKET_TENANTS)
            .key(keys::TENANT_BUCKET_COUNTS)
            .key(keys::created_in_minute(now_ms / MINUTE_MS))
            .key(keys::subscribed(topic))
            .key(keys::reclaiming(topic))
            .arg(topic)
            .arg(keys::sanitize(tenant))
            .arg(now_ms)
            .arg(caps.max_buckets)
            .arg(caps.max_buckets_per_tenant)
            .arg(caps.max_new_buckets_per_minute)
            .arg(WINDOW_TTL_SECS)
            .invoke_async(redis)
            .await
            .map_err(|source| BookkeepingError::Redis {
                topic: topic.to_string(),
                source,
            })?;
        let [status, subscribed, known] = reply[..] else {
            return Err(BookkeepingError::Reply(reply));
        };
        let outcome = match status {
            1 | 0 => Announced::Admitted {
                created: status == 0,
                subscribed: subscribed == 1,
            },
            2 => Announced::Reclaiming,
            -1 => Announced::Refused(CapHit::Tenant),
            -2 => Announced::Refused(CapHit::Global),
            -3 => Announced::Refused(CapHit::Rate),
            _ => return Err(BookkeepingError::Reply(reply)),
        };
        Ok(Announcement { outcome, known })
    }

    /// [`Bookkeeping::announce`], asked again every 25 ms while a consumer
    /// reclaims the bucket's queue (milliseconds in practice; the mark
    /// lapses by itself should that consumer die half-way), at most
    /// [`RECLAIM_WAIT`]. `on_reply` sees every answer (metrics).
    pub async fn announce_after_reclaim(
        &self,
        redis: &mut RedisConn,
        tenant: &str,
        topic: &str,
        caps: &CapValues,
        now_ms: impl Fn() -> u64,
        mut on_reply: impl FnMut(&Announcement),
    ) -> Result<Announced, BookkeepingError> {
        let deadline = tokio::time::Instant::now() + RECLAIM_WAIT;
        loop {
            let announcement = self.announce(redis, tenant, topic, now_ms(), caps).await?;
            on_reply(&announcement);
            match announcement.outcome {
                Announced::Reclaiming if tokio::time::Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(25)).await;
                }
                Announced::Reclaiming => {
                    return Err(BookkeepingError::StillReclaiming(topic.to_string()))
                }
                outcome => return Ok(outcome),
            }
        }
    }
}

/// Step 3 of a publish: one more queued in the bucket (the consumer counts
/// down at pop). Returns the bucket's backlog, this request included.
pub async fn count_publish(redis: &mut RedisConn, topic: &str) -> Result<u64, redis::RedisError> {
    let (queued,): (u64,) = redis::pipe()
        .incr(keys::backlog(topic), 1)
        .expire(keys::backlog(topic), BACKLOG_TTL_SECS as i64)
        .ignore()
        .query_async(redis)
        .await?;
    Ok(queued)
}

/// The bucket's backlog estimate (`None`: never counted or expired).
pub async fn backlog(redis: &mut RedisConn, topic: &str) -> Result<Option<u64>, redis::RedisError> {
    redis.get(keys::backlog(topic)).await
}

/// Whether a consumer is subscribed to the bucket (its mark is set).
pub async fn is_subscribed(redis: &mut RedisConn, topic: &str) -> Result<bool, redis::RedisError> {
    redis.exists(keys::subscribed(topic)).await
}

/// A pop, in one round trip: one fewer queued in the bucket and, when the
/// message was readable, the request's lease taken for `lease_ttl`.
/// Returns whether the request was claimed (`processing`) or answered
/// (`done`) already — a re-publish after its consumer died, or a duplicate:
/// it may be settled without waiting for a pacing slot.
pub async fn record_pop(
    redis: &mut RedisConn,
    topic: &str,
    req_id: Option<&str>,
    lease_ttl: Duration,
) -> Result<bool, redis::RedisError> {
    // The backlog counter lives in the `{buckets}` slot and the request's
    // keys in the request's: two round trips, since a Redis Cluster refuses
    // a pipeline across slots.
    redis::cmd("DECR")
        .arg(keys::backlog(topic))
        .query_async::<()>(redis)
        .await?;
    let Some(req_id) = req_id else {
        return Ok(false);
    };
    let (seen,): (u64,) = redis::pipe()
        .cmd("SET")
        .arg(keys::lease(req_id))
        .arg(1)
        .arg("PX")
        .arg(lease_ttl.as_millis() as u64)
        .ignore()
        .cmd("EXISTS")
        .arg(keys::processing(req_id))
        .arg(keys::done(req_id))
        .query_async(redis)
        .await?;
    Ok(seen > 0)
}

/// Keeps the request's lease for another `lease_ttl`.
pub async fn refresh_lease(
    redis: &mut RedisConn,
    req_id: &str,
    lease_ttl: Duration,
) -> Result<(), redis::RedisError> {
    redis::cmd("SET")
        .arg(keys::lease(req_id))
        .arg(1)
        .arg("PX")
        .arg(lease_ttl.as_millis() as u64)
        .query_async(redis)
        .await
}

/// The consumer is done with the request (answered or handed back).
pub async fn drop_lease(redis: &mut RedisConn, req_id: &str) -> Result<(), redis::RedisError> {
    redis.del(keys::lease(req_id)).await
}

/// Whether a consumer holds the request's lease now.
pub async fn lease_held(redis: &mut RedisConn, req_id: &str) -> Result<bool, redis::RedisError> {
    redis.exists(keys::lease(req_id)).await
}

/// A request whose lease was seen and has lapsed, as it stands now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lapse {
    /// A terminal entry exists: nothing was lost.
    Finished,
    /// A claim with a live heartbeat: the call still runs.
    Running,
    /// Lost: popped but never started (`call_started: false`), or its call's
    /// owner stopped its heartbeat (`true`). Publish it again, once: a live
    /// consumer then runs it, or answers `interrupted` — never a second call.
    Lost { call_started: bool },
}

/// Looks at a request whose lease lapsed (one round trip: `done`, the claim,
/// Redis's clock) and judges its claim with `timing`.
pub async fn lapsed_request(
    redis: &mut RedisConn,
    req_id: &str,
    timing: &ClaimTiming,
) -> Result<Lapse, redis::RedisError> {
    let (finished, claim, (seconds, micros)): (bool, Option<String>, (u64, u64)) = redis::pipe()
        .exists(keys::done(req_id))
        .get(keys::processing(req_id))
        .cmd("TIME")
        .query_async(redis)
        .await?;
    Ok(judge_lapse(
        finished,
        claim.as_deref(),
        seconds * 1000 + micros / 1000,
        timing,
    ))
}

/// The pure part of [`lapsed_request`].
pub fn judge_lapse(
    finished: bool,
    claim: Option<&str>,
    now_ms: u64,
    timing: &ClaimTiming,
) -> Lapse {
    if finished {
        return Lapse::Finished;
    }
    match claim {
        Some(claim) if !timing.is_stale(&ClaimValue::parse(claim), now_ms) => Lapse::Running,
        claim => Lapse::Lost {
            call_started: claim.is_some(),
        },
    }
}

/// The buckets known now (each consumer subscribes to its share).
pub async fn known_buckets(redis: &mut RedisConn) -> Result<Vec<String>, redis::RedisError> {
    redis::cmd("SMEMBERS")
        .arg(keys::BUCKETS)
        .query_async(redis)
        .await
}

/// A consumer is subscribed to `topics`: the endpoint's first publish to
/// one of them need not wait.
pub async fn mark_subscribed(
    redis: &mut RedisConn,
    topics: &[String],
) -> Result<(), redis::RedisError> {
    let mut pipe = redis::pipe();
    for topic in topics {
        pipe.cmd("SET").arg(keys::subscribed(topic)).arg(1).ignore();
    }
    pipe.query_async(redis).await
}

/// Retire an idle bucket atomically: only if nothing was published to it
/// since `cutoff` and nothing is queued. Removes it from the bucket set and
/// drops its subscription mark, so the endpoint's next publish to it waits
/// for a fresh subscription (it records activity before it looks at the
/// mark: [`Bookkeeping::announce`]). A bucket without an activity entry
/// (created before activity was recorded) gets one now and stays. The
/// bucket's tenant gives its slot back (the endpoint's per-tenant cap,
/// deferral/src/caps.rs; see [`ADMIT_BUCKET`]) in the same step, so the count
/// never drifts from the set.
///
/// KEYS[1]  activity sorted set (bucket → last publish, ms)
/// KEYS[2]  bucket set
/// KEYS[3]  the bucket's backlog counter
/// KEYS[4]  the bucket's subscription mark
/// KEYS[5]  hash bucket → tenant
/// KEYS[6]  hash tenant → bucket count
/// KEYS[7]  the bucket's reclaim mark
/// ARGV[1]  the bucket (LiteTopic name)
/// ARGV[2]  cutoff, ms: retire only if the last publish is at or before it
/// ARGV[3]  now, ms (stamps a bucket that has no activity entry yet)
/// ARGV[4]  lifetime of the reclaim mark, ms; 0 = the caller reclaims nothing
///
/// Returns 1 when retired, 0 when kept.
pub const RETIRE_IDLE: &str = r#"
local last = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not last then
  redis.call('ZADD', KEYS[1], ARGV[3], ARGV[1])
  return 0
end
if tonumber(last) > tonumber(ARGV[2]) then return 0 end
local backlog = tonumber(redis.call('GET', KEYS[3]) or '0') or 0
if backlog > 0 then return 0 end
redis.call('SREM', KEYS[2], ARGV[1])
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('DEL', KEYS[3], KEYS[4])
local tenant = redis.call('HGET', KEYS[5], ARGV[1])
if tenant then
  redis.call('HDEL', KEYS[5], ARGV[1])
  if redis.call('HINCRBY', KEYS[6], tenant, -1) <= 0 then
    redis.call('HDEL', KEYS[6], tenant)
  end
end
if tonumber(ARGV[4]) > 0 then
  redis.call('SET', KEYS[7], '1', 'PX', ARGV[4])
end
return 1
"#;

/// Retires `topic` if idle since `cutoff_ms`; true when it was retired.
/// With `reclaim`, the bucket is left marked [`keys::reclaiming`] for the
/// caller, which deletes its queue at the broker and then drops the mark
/// ([`end_reclaim`]).
pub async fn retire_if_idle(
    redis: &mut RedisConn,
    topic: &str,
    cutoff_ms: u64,
    reclaim: bool,
) -> Result<bool, redis::RedisError> {
    let retired: i64 = redis::Script::new(RETIRE_IDLE)
        .key(keys::ACTIVITY)
        .key(keys::BUCKETS)
        .key(keys::backlog(topic))
        .key(keys::subscribed(topic))
        .key(keys::BUCKET_TENANTS)
        .key(keys::TENANT_BUCKET_COUNTS)
        .key(keys::reclaiming(topic))
        .arg(topic)
        .arg(cutoff_ms)
        .arg(crate::now_ms())
        .arg(if reclaim {
            keys::RECLAIM_MARK_TTL_MS
        } else {
            0
        })
        .invoke_async(redis)
        .await?;
    Ok(retired == 1)
}

/// The broker is done with a retired bucket's queue: publishes may go on.
pub async fn end_reclaim(redis: &mut RedisConn, topic: &str) -> Result<(), redis::RedisError> {
    redis.del(keys::reclaiming(topic)).await
}

/// Topics whose last recorded publish is at or before `cutoff_ms`.
pub async fn idle_candidates(
    redis: &mut RedisConn,
    cutoff_ms: u64,
) -> Result<Vec<String>, redis::RedisError> {
    redis::cmd("ZRANGEBYSCORE")
        .arg(keys::ACTIVITY)
        .arg("-inf")
        .arg(cutoff_ms)
        .query_async(redis)
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_script_names_every_key_it_touches() {
        // Redis Cluster: only declared keys, all on the `{buckets}` slot.
        for key in [
            keys::BUCKETS,
            keys::ACTIVITY,
            keys::BUCKET_TENANTS,
            keys::TENANT_BUCKET_COUNTS,
        ] {
            assert!(key.contains("{buckets}"), "{key}");
        }
        assert!(keys::created_in_minute(7).contains("{buckets}"));
        assert!(keys::subscribed("t").contains("{buckets}"));
        assert!(keys::reclaiming("t").contains("{buckets}"));
        for script in [ADMIT_BUCKET, RETIRE_IDLE] {
            for line in script.lines().filter(|l| l.contains("redis.call")) {
                assert!(!line.contains("'sluice:"), "undeclared key: {line}");
            }
        }
    }

    #[test]
    fn a_lapse_is_lost_only_without_a_live_claim() {
        let timing = ClaimTiming::default();
        assert_eq!(judge_lapse(true, None, 0, &timing), Lapse::Finished);
        assert_eq!(
            judge_lapse(false, None, 0, &timing),
            Lapse::Lost {
                call_started: false
            }
        );
        let claim = Some("c/1 100000");
        assert_eq!(judge_lapse(false, claim, 102_999, &timing), Lapse::Running);
        assert_eq!(
            judge_lapse(false, claim, 103_000, &timing),
            Lapse::Lost { call_started: true }
        );
    }
}
