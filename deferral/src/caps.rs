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
//! Check and registration are one Lua script
//! (`sluice_contract::bookkeeping::ADMIT_BUCKET`, the announce step of every
//! publish) over keys that share the `{buckets}` hash tag, so concurrent
//! endpoints never overshoot a cap. The consumer's retire script
//! (`sluice_contract::bookkeeping::RETIRE_IDLE`) gives the tenant's slot back
//! when it retires an idle bucket, in the same step as it removes the bucket
//! from the set.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use sluice_contract::bookkeeping::{
    Announced, Announcement, Bookkeeping, BookkeepingError, CapHit, CapValues, MINUTE_MS,
};
use sluice_redis::RedisConn;
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
    /// The caps as the announce script takes them.
    pub fn values(&self) -> CapValues {
        CapValues {
            max_buckets: self.max_buckets,
            max_buckets_per_tenant: self.max_buckets_per_tenant,
            max_new_buckets_per_minute: self.max_new_buckets_per_minute,
        }
    }

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
pub use sluice_contract::bookkeeping::CapHit as CapKind;

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

impl From<BookkeepingError> for PublishError {
    fn from(why: BookkeepingError) -> Self {
        PublishError::Failed(why.to_string())
    }
}

/// What the caps said of a bucket.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Admission {
    /// The bucket exists or was created now.
    Admitted(Admitted),
    /// A consumer is deleting the bucket's retired queue at the broker:
    /// nothing may be published to it until that is done (see
    /// `sluice_contract::keys::reclaiming`).
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

crate::metrics::deferral_registration!(CapsMetrics {
    "buckets", "Deferral buckets (tenant × model LiteTopics) known, as of this instance's last deferred request" => buckets;
    "buckets_created", "Deferral buckets this instance created (new tenant × model LiteTopics)" => created;
});

/// The caps, checked in Redis.
#[derive(Default)]
pub struct BucketCaps {
    limits: CapLimits,
    bookkeeping: Bookkeeping,
    metrics: CapsMetrics,
}

impl BucketCaps {
    pub fn new(limits: CapLimits, metrics: CapsMetrics) -> Result<Self, CapsError> {
        limits.validate()?;
        Ok(BucketCaps {
            limits,
            bookkeeping: Bookkeeping::default(),
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
        redis: &mut RedisConn,
        tenant: &str,
        topic: &str,
        now_ms: u64,
    ) -> Result<Admission, PublishError> {
        let announcement = self
            .bookkeeping
            .announce(redis, tenant, topic, now_ms, &self.limits.values())
            .await?;
        self.observe(topic, &announcement);
        self.judge(announcement.outcome, now_ms)
    }

    /// As [`BucketCaps::admit`], waiting (at most
    /// `sluice_contract::bookkeeping::RECLAIM_WAIT`) while a consumer
    /// deletes the bucket's retired queue at the broker.
    pub async fn admit_after_reclaim(
        &self,
        redis: &mut RedisConn,
        tenant: &str,
        topic: &str,
    ) -> Result<Admitted, PublishError> {
        let outcome = self
            .bookkeeping
            .announce_after_reclaim(
                redis,
                tenant,
                topic,
                &self.limits.values(),
                sluice_contract::now_ms,
                |announcement| self.observe(topic, announcement),
            )
            .await?;
        match self.judge(outcome, sluice_contract::now_ms())? {
            Admission::Admitted(admitted) => Ok(admitted),
            Admission::Reclaiming => Err(PublishError::Failed(format!(
                "bucket {topic} is still being reclaimed at the broker"
            ))),
        }
    }

    /// Metrics of one answer of the announce script.
    fn observe(&self, topic: &str, announcement: &Announcement) {
        self.metrics.buckets.set(announcement.known);
        if let Announced::Admitted { created: true, .. } = announcement.outcome {
            self.metrics.created.inc();
            tracing::debug!(%topic, known = announcement.known, "new deferral bucket");
        }
    }

    /// What the client is told of the script's answer.
    fn judge(&self, outcome: Announced, now_ms: u64) -> Result<Admission, PublishError> {
        let refusal = |kind, limit, retry_after| {
            Err(PublishError::Refused(CapRefusal {
                kind,
                limit,
                retry_after,
            }))
        };
        match outcome {
            Announced::Admitted {
                created,
                subscribed,
            } => Ok(Admission::Admitted(Admitted {
                created,
                subscribed,
            })),
            Announced::Reclaiming => Ok(Admission::Reclaiming),
            Announced::Refused(CapHit::Tenant) => refusal(
                CapKind::Tenant,
                self.limits.max_buckets_per_tenant,
                self.limits.full_retry_after,
            ),
            Announced::Refused(CapHit::Global) => refusal(
                CapKind::Global,
                self.limits.max_buckets,
                self.limits.full_retry_after,
            ),
            Announced::Refused(CapHit::Rate) => refusal(
                CapKind::Rate,
                self.limits.max_new_buckets_per_minute,
                until_next_minute(now_ms),
            ),
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
}
