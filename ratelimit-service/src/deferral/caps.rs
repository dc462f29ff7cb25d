//! Caps on deferral buckets.
//!
//! Every new tenant × model bucket becomes a LiteTopic, i.e. an LMQ queue at
//! the broker with files of its own, a subscription at a consumer, Redis keys
//! and metric series. Nothing else bounds how many there are, so a flood of
//! deferred requests from many tenants (or from one tenant naming many
//! models) could fill the broker's disk. Three caps hold when a request would
//! create a **new** bucket; a bucket that already exists is never refused:
//!
//! * per tenant: distinct buckets (models) of one tenant → 429
//!   `tenant_bucket_limit`;
//! * global: distinct buckets in all → 503 `bucket_capacity`;
//! * rate: new buckets per minute (one fixed window per clock minute, all
//!   tenants together) → 429 `bucket_rate_limit`.
//!
//! Check and registration are one Lua script ([`ADMIT_BUCKET`]) over keys that
//! share the `{buckets}` hash tag, so concurrent endpoints never overshoot a
//! cap. The consumer's retire script (consumer/src/membership.rs) gives the
//! tenant's slot back when it retires an idle bucket, in the same step as it
//! removes the bucket from the set.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use sluice_consumer::keys;
use std::time::Duration;

/// Default global cap: half the broker's own LMQ quota
/// (`maxLmqConsumeQueueNum`, 20,000, enforced only with `enableLmqQuota`),
/// and at the configured 56 KiB per idle bucket it bounds the broker's LMQ
/// files to about 550 MiB (see docs/security.md).
pub const DEFAULT_MAX_BUCKETS: u64 = 10_000;
/// Default per-tenant cap: one bucket per model a tenant calls; 16 models is
/// more than a tenant uses in practice.
pub const DEFAULT_MAX_BUCKETS_PER_TENANT: u64 = 16;
/// Default rate: 10 new buckets a second on average. Filling the global cap
/// takes at least 17 minutes, time for an alert on the refusals.
pub const DEFAULT_MAX_NEW_BUCKETS_PER_MINUTE: u64 = 600;
/// Retry-After of a refusal at the global or per-tenant cap: a slot frees
/// only when the consumer retires an idle bucket.
pub const DEFAULT_FULL_RETRY_AFTER: Duration = Duration::from_secs(60);

const MINUTE_MS: u64 = 60_000;
/// A minute's counter outlives its window; any window key is safe to expire.
const WINDOW_TTL_S: u64 = 120;

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

/// The three caps. Every one is at least 1 ([`CapLimits::validate`]): a cap
/// of 0 would refuse every new bucket, i.e. turn deferral off in a way that
/// looks like an outage; remove `over_limit: defer` from the limits instead.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CapLimits {
    /// Distinct buckets in all.
    pub max_buckets: u64,
    /// Distinct buckets (models) per tenant.
    pub max_buckets_per_tenant: u64,
    /// New buckets per clock minute, all tenants together.
    pub max_new_buckets_per_minute: u64,
    /// Retry-After of a refusal at the global or per-tenant cap.
    pub full_retry_after: Duration,
}

impl Default for CapLimits {
    fn default() -> Self {
        CapLimits {
            max_buckets: DEFAULT_MAX_BUCKETS,
            max_buckets_per_tenant: DEFAULT_MAX_BUCKETS_PER_TENANT,
            max_new_buckets_per_minute: DEFAULT_MAX_NEW_BUCKETS_PER_MINUTE,
            full_retry_after: DEFAULT_FULL_RETRY_AFTER,
        }
    }
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CapsError {
    #[error("{0} must be at least 1 (0 would refuse every new deferral bucket; to stop deferring, remove `over_limit: defer` from the limits)")]
    Zero(&'static str),
    #[error("the per-tenant bucket cap ({per_tenant}) is above the global cap ({global})")]
    TenantAboveGlobal { per_tenant: u64, global: u64 },
}

impl CapLimits {
    pub fn validate(&self) -> Result<(), CapsError> {
        for (name, value) in [
            ("the global bucket cap", self.max_buckets),
            ("the per-tenant bucket cap", self.max_buckets_per_tenant),
            (
                "the new-buckets-per-minute cap",
                self.max_new_buckets_per_minute,
            ),
            (
                "the Retry-After of a full cap",
                self.full_retry_after.as_secs(),
            ),
        ] {
            if value == 0 {
                return Err(CapsError::Zero(name));
            }
        }
        if self.max_buckets_per_tenant > self.max_buckets {
            return Err(CapsError::TenantAboveGlobal {
                per_tenant: self.max_buckets_per_tenant,
                global: self.max_buckets,
            });
        }
        Ok(())
    }
}

/// Which cap refused a new bucket.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CapKind {
    Tenant,
    Global,
    Rate,
}

/// A new bucket refused by a cap: what the client is told.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CapRefusal {
    pub kind: CapKind,
    /// The cap that was reached.
    pub limit: u64,
    pub retry_after: Duration,
}

impl CapRefusal {
    /// The error `code` of the answer, also the `reason` label of
    /// `sluice_rls_deferral_rejected_total`.
    pub fn code(&self) -> &'static str {
        match self.kind {
            CapKind::Tenant => "tenant_bucket_limit",
            CapKind::Global => "bucket_capacity",
            CapKind::Rate => "bucket_rate_limit",
        }
    }

    /// 429 when the tenant or the rate of new buckets is at fault, 503 when
    /// the gateway as a whole is full.
    pub fn status(&self) -> axum::http::StatusCode {
        match self.kind {
            CapKind::Tenant | CapKind::Rate => axum::http::StatusCode::TOO_MANY_REQUESTS,
            CapKind::Global => axum::http::StatusCode::SERVICE_UNAVAILABLE,
        }
    }

    pub fn message(&self) -> String {
        match self.kind {
            CapKind::Tenant => format!(
                "this tenant already has {} deferral queues (one per model), the most allowed; a queue frees once it has been idle for a while. Nothing was sent to the model; retry later",
                self.limit
            ),
            CapKind::Global => "this gateway's deferral queues are all in use. Nothing was sent to the model; retry later".to_string(),
            CapKind::Rate => format!(
                "more than {} new deferral queues were opened in the last minute. Nothing was sent to the model; retry shortly",
                self.limit
            ),
        }
    }

    /// Whole seconds, at least 1 (the `Retry-After` header).
    pub fn retry_after_secs(&self) -> u64 {
        self.retry_after.as_secs().max(1)
    }
}

/// Why a deferred request was not published.
#[derive(Debug, thiserror::Error)]
pub enum PublishError {
    /// A new bucket was refused by a cap: the client gets 429 / 503.
    #[error("new bucket refused: {}", .0.code())]
    Refused(CapRefusal),
    /// Redis or the broker failed.
    #[error("{0}")]
    Failed(String),
}

impl From<String> for PublishError {
    fn from(why: String) -> Self {
        PublishError::Failed(why)
    }
}

/// What the caps said of a bucket.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Admission {
    /// The bucket exists or was created now.
    Admitted(Admitted),
    /// A consumer is deleting the bucket's retired queue at the broker:
    /// nothing may be published to it until that is done (see
    /// `sluice_consumer::keys::reclaiming`).
    Reclaiming,
}

/// A bucket the caps let through.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Admitted {
    /// This call created the bucket.
    pub created: bool,
    /// A consumer is subscribed to it (its mark is set).
    pub subscribed: bool,
}

/// Metrics of the caps (`sluice_rls_deferral_buckets`,
/// `sluice_rls_deferral_buckets_created_total`); refusals are counted by the
/// endpoint under `sluice_rls_deferral_rejected_total{reason=<code>}`.
#[derive(Clone, Debug, Default)]
pub struct CapsMetrics {
    /// Buckets known (the size of the bucket set) as of this instance's last
    /// deferred request.
    pub buckets: Gauge,
    pub created: Counter,
}

impl CapsMetrics {
    /// Registers under `deferral_` in `registry` (prefix `sluice_rls`).
    pub fn register(&self, registry: &mut prometheus_client::registry::Registry) {
        let registry = registry.sub_registry_with_prefix("deferral");
        registry.register(
            "buckets",
            "Deferral buckets (tenant × model LiteTopics) known, as of this instance's last deferred request",
            self.buckets.clone(),
        );
        registry.register(
            "buckets_created",
            "Deferral buckets this instance created (new tenant × model LiteTopics)",
            self.created.clone(),
        );
    }
}

/// The caps, checked in Redis.
pub struct BucketCaps {
    limits: CapLimits,
    script: redis::Script,
    metrics: CapsMetrics,
}

impl Default for BucketCaps {
    /// The default caps (valid: see the tests), with metrics of their own.
    fn default() -> Self {
        BucketCaps {
            limits: CapLimits::default(),
            script: redis::Script::new(ADMIT_BUCKET),
            metrics: CapsMetrics::default(),
        }
    }
}

impl BucketCaps {
    pub fn new(limits: CapLimits, metrics: CapsMetrics) -> Result<Self, CapsError> {
        limits.validate()?;
        Ok(BucketCaps {
            limits,
            script: redis::Script::new(ADMIT_BUCKET),
            metrics,
        })
    }

    pub fn limits(&self) -> &CapLimits {
        &self.limits
    }

    /// Stamps the activity of `topic` (the bucket of `tenant`) and, when it
    /// is new, registers it if the caps allow — in one round trip that also
    /// reads the bucket's subscription mark.
    pub async fn admit(
        &self,
        redis: &mut redis::aio::ConnectionManager,
        tenant: &str,
        topic: &str,
        now_ms: u64,
    ) -> Result<Admission, PublishError> {
        let minute = now_ms / MINUTE_MS;
        let reply: Vec<i64> = self
            .script
            .key(keys::BUCKETS)
            .key(keys::ACTIVITY)
            .key(keys::BUCKET_TENANTS)
            .key(keys::TENANT_BUCKET_COUNTS)
            .key(keys::created_in_minute(minute))
            .key(keys::subscribed(topic))
            .key(keys::reclaiming(topic))
            .arg(topic)
            .arg(keys::sanitize(tenant))
            .arg(now_ms)
            .arg(self.limits.max_buckets)
            .arg(self.limits.max_buckets_per_tenant)
            .arg(self.limits.max_new_buckets_per_minute)
            .arg(WINDOW_TTL_S)
            .invoke_async(redis)
            .await
            .map_err(|e| PublishError::Failed(format!("cannot register bucket {topic}: {e}")))?;
        let [status, subscribed, known] = reply[..] else {
            return Err(PublishError::Failed(format!(
                "bucket caps: unexpected reply {reply:?}"
            )));
        };
        self.metrics.buckets.set(known);
        let refusal = |kind, limit, retry_after| {
            Err(PublishError::Refused(CapRefusal {
                kind,
                limit,
                retry_after,
            }))
        };
        match status {
            1 | 0 => {
                if status == 0 {
                    self.metrics.created.inc();
                    tracing::debug!(%topic, known, "new deferral bucket");
                }
                Ok(Admission::Admitted(Admitted {
                    created: status == 0,
                    subscribed: subscribed == 1,
                }))
            }
            2 => Ok(Admission::Reclaiming),
            -1 => refusal(
                CapKind::Tenant,
                self.limits.max_buckets_per_tenant,
                self.limits.full_retry_after,
            ),
            -2 => refusal(
                CapKind::Global,
                self.limits.max_buckets,
                self.limits.full_retry_after,
            ),
            -3 => refusal(
                CapKind::Rate,
                self.limits.max_new_buckets_per_minute,
                until_next_minute(now_ms),
            ),
            other => Err(PublishError::Failed(format!(
                "bucket caps: unexpected status {other}"
            ))),
        }
    }
}

/// Time left in the clock minute of `now_ms` (the rate window).
fn until_next_minute(now_ms: u64) -> Duration {
    Duration::from_millis(MINUTE_MS - now_ms % MINUTE_MS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid() {
        assert_eq!(CapLimits::default().validate(), Ok(()));
    }

    #[test]
    fn zero_and_inverted_caps_are_refused() {
        let zero_global = CapLimits {
            max_buckets: 0,
            ..Default::default()
        };
        assert!(matches!(
            zero_global.validate(),
            Err(CapsError::Zero("the global bucket cap"))
        ));
        let zero_rate = CapLimits {
            max_new_buckets_per_minute: 0,
            ..Default::default()
        };
        assert!(matches!(zero_rate.validate(), Err(CapsError::Zero(_))));
        let zero_tenant = CapLimits {
            max_buckets_per_tenant: 0,
            ..Default::default()
        };
        assert!(matches!(zero_tenant.validate(), Err(CapsError::Zero(_))));
        let inverted = CapLimits {
            max_buckets: 4,
            max_buckets_per_tenant: 5,
            ..Default::default()
        };
        assert_eq!(
            inverted.validate(),
            Err(CapsError::TenantAboveGlobal {
                per_tenant: 5,
                global: 4
            })
        );
        assert!(BucketCaps::new(inverted, CapsMetrics::default()).is_err());
    }

    #[test]
    fn refusals_answer_429_or_503_with_their_code() {
        let refusal = |kind| CapRefusal {
            kind,
            limit: 16,
            retry_after: Duration::from_millis(300),
        };
        assert_eq!(refusal(CapKind::Tenant).code(), "tenant_bucket_limit");
        assert_eq!(refusal(CapKind::Tenant).status().as_u16(), 429);
        assert_eq!(refusal(CapKind::Rate).code(), "bucket_rate_limit");
        assert_eq!(refusal(CapKind::Rate).status().as_u16(), 429);
        assert_eq!(refusal(CapKind::Global).code(), "bucket_capacity");
        assert_eq!(refusal(CapKind::Global).status().as_u16(), 503);
        // Never "Retry-After: 0".
        assert_eq!(refusal(CapKind::Rate).retry_after_secs(), 1);
        assert!(refusal(CapKind::Tenant).message().contains("16"));
    }

    #[test]
    fn the_rate_window_is_the_clock_minute() {
        assert_eq!(until_next_minute(120_000), Duration::from_secs(60));
        assert_eq!(until_next_minute(179_500), Duration::from_millis(500));
    }

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
        for line in ADMIT_BUCKET.lines().filter(|l| l.contains("redis.call")) {
            assert!(!line.contains("'sluice:"), "undeclared key: {line}");
        }
    }
}
