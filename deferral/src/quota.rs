//! Checks in Redis, shared by every sluice-rls instance: the low band's
//! backlog cap (check and reservation in one step, so concurrent requests
//! never admit more than the cap) and the bytes a tenant may publish to the
//! broker per minute (what bounds the broker's disk per tenant: the commit
//! log keeps every message for its retention, consumed or not).

use sluice_contract::bookkeeping::MINUTE_MS;
use sluice_contract::keys;
use sluice_redis::RedisConn;
use std::sync::LazyLock;

/// Default `--deferral-max-tenant-bytes-per-minute`: 64 MiB. At the
/// broker's commit log, about 1.03 bytes of disk per deferred byte
/// (docs/security.md): a tenant adds at most ~66 MiB of disk per minute of
/// retention.
pub const DEFAULT_MAX_TENANT_BYTES_PER_MINUTE: u64 = 64 * 1024 * 1024;

/// How long a low-priority reservation counts at most: above the longest a
/// publish takes (the first publish to a new bucket waits up to 3 s for a
/// subscriber, a broker send up to 3 s). A process that died between check
/// and publish leaves a reservation that stops counting after this.
const LOW_PENDING_MS: u64 = 30_000;

/// Reserves a low-priority place in a bucket's backlog.
/// KEYS[1] the bucket's backlog counter, KEYS[2] its pending set.
/// ARGV[1] the cap, ARGV[2] now (ms), ARGV[3] how long a reservation
/// counts (ms), ARGV[4] the request id.
/// Returns 1 when reserved, 0 when the backlog and the pending reservations
/// already reach the cap.
const RESERVE_LOW: &str = r#"
local now = tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now - tonumber(ARGV[3]))
local backlog = math.max(tonumber(redis.call('GET', KEYS[1]) or '0') or 0, 0)
local pending = redis.call('ZCARD', KEYS[2])
if backlog + pending >= tonumber(ARGV[1]) then return 0 end
redis.call('ZADD', KEYS[2], now, ARGV[4])
redis.call('PEXPIRE', KEYS[2], ARGV[3])
return 1
"#;

/// Charges bytes to a tenant's minute.
/// KEYS[1] the tenant's counter of the minute. ARGV[1] the bytes, ARGV[2]
/// the most per minute, ARGV[3] the key's lifetime (ms).
/// Returns -1 (nothing charged) when the charge would pass the limit, else
/// the minute's total.
const CHARGE_BYTES: &str = r#"
local used = tonumber(redis.call('GET', KEYS[1]) or '0') or 0
local bytes = tonumber(ARGV[1])
if used + bytes > tonumber(ARGV[2]) then return -1 end
redis.call('INCRBY', KEYS[1], bytes)
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return used + bytes
"#;

// Built once: `Script::new` hashes its source, and both run per deferral.
static RESERVE_LOW_SCRIPT: LazyLock<redis::Script> =
    LazyLock::new(|| redis::Script::new(RESERVE_LOW));
static CHARGE_BYTES_SCRIPT: LazyLock<redis::Script> =
    LazyLock::new(|| redis::Script::new(CHARGE_BYTES));

/// The clock minute of `now_ms`, and the ms left in it.
fn minute_of(now_ms: u64) -> (u64, u64) {
    (now_ms / MINUTE_MS, MINUTE_MS - now_ms % MINUTE_MS)
}

/// A low-priority place reserved in a bucket's backlog; [`LowReservation::release`]
/// once the request is published (it is then in the backlog counter) or
/// refused. Dropped unreleased (the client left mid-publish), it is
/// released in the background.
pub struct LowReservation {
    redis: RedisConn,
    pending: String,
    req_id: String,
    released: bool,
}

impl LowReservation {
    pub async fn release(mut self) {
        self.released = true;
        let result: Result<(), _> = redis::cmd("ZREM")
            .arg(&self.pending)
            .arg(&self.req_id)
            .query_async(&mut self.redis)
            .await;
        if let Err(error) = result {
            tracing::debug!(%error, "cannot release a low-priority reservation; it lapses on its own");
        }
    }
}

impl Drop for LowReservation {
    fn drop(&mut self) {
        if self.released {
            return;
        }
        let mut redis = self.redis.clone();
        let (pending, req_id) = (
            std::mem::take(&mut self.pending),
            std::mem::take(&mut self.req_id),
        );
        tokio::spawn(async move {
            let _: Result<(), _> = redis::cmd("ZREM")
                .arg(pending)
                .arg(req_id)
                .query_async(&mut redis)
                .await;
        });
    }
}

/// Reserves a place for `req_id` in the low band of `topic` unless the
/// backlog (with the reservations of requests still being published)
/// reaches `cap`. `Ok(None)`: refused.
pub async fn reserve_low(
    redis: &RedisConn,
    topic: &str,
    req_id: &str,
    cap: u64,
    now_ms: u64,
) -> Result<Option<LowReservation>, redis::RedisError> {
    let mut conn = redis.clone();
    let pending = keys::low_pending(topic);
    let reserved: i64 = RESERVE_LOW_SCRIPT
        .key(keys::backlog(topic))
        .key(&pending)
        .arg(cap)
        .arg(now_ms)
        .arg(LOW_PENDING_MS)
        .arg(req_id)
        .invoke_async(&mut conn)
        .await?;
    Ok((reserved == 1).then(|| LowReservation {
        redis: redis.clone(),
        pending,
        req_id: req_id.to_string(),
        released: false,
    }))
}

/// Bytes charged to a tenant's minute.
pub struct BytesCharge {
    key: String,
    bytes: u64,
}

/// Why a charge was not made.
pub enum ChargeRefused {
    /// The tenant published its bytes for this minute; retry after this many ms.
    OverLimit {
        retry_after_ms: u64,
    },
    Store(redis::RedisError),
}

/// Charges `bytes` to `tenant`'s minute unless it would pass `limit`.
pub async fn charge_tenant_bytes(
    redis: &RedisConn,
    tenant: &str,
    bytes: u64,
    limit: u64,
    now_ms: u64,
) -> Result<BytesCharge, ChargeRefused> {
    let (minute, left_ms) = minute_of(now_ms);
    let key = keys::deferred_bytes(tenant, minute);
    let mut conn = redis.clone();
    let total: i64 = CHARGE_BYTES_SCRIPT
        .key(&key)
        .arg(bytes)
        .arg(limit)
        .arg(2 * MINUTE_MS)
        .invoke_async(&mut conn)
        .await
        .map_err(ChargeRefused::Store)?;
    if total < 0 {
        return Err(ChargeRefused::OverLimit {
            retry_after_ms: left_ms,
        });
    }
    Ok(BytesCharge { key, bytes })
}

impl BytesCharge {
    /// Gives the bytes back: the request was not published after all.
    pub async fn refund(self, redis: &RedisConn) {
        let mut conn = redis.clone();
        let result: Result<(), _> = redis::cmd("DECRBY")
            .arg(&self.key)
            .arg(self.bytes)
            .query_async(&mut conn)
            .await;
        if let Err(error) = result {
            tracing::debug!(%error, "cannot refund a tenant's deferred bytes");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_window_is_the_clock_minute() {
        assert_eq!(minute_of(120_000), (2, 60_000));
        assert_eq!(minute_of(179_999), (2, 1));
    }
}
