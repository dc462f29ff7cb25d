//! The endpoint's [`Publisher`] over RocketMQ LiteTopics: one LiteTopic per
//! tenant × model under one parent topic, created by the broker on first send.
//! Sends go through [`PRODUCER_LANES`] lanes of one producer, a bucket
//! always through the same one.

use super::caps::{BucketCaps, PublishError};
use axum::body::Bytes;
use futures::future::BoxFuture;
use sluice_contract::bookkeeping;
use sluice_litetopic::{lite_topic_name, LiteAdmin, LiteClient, LiteConfig, LiteProducer};
use sluice_redis::RedisConn;

/// Queues a deferred request (the LiteTopic producer in production).
pub trait Publisher: Send + Sync + 'static {
    /// Publish `work` (the consumer's WorkItem JSON, shared with the copy a
    /// waiting request keeps for a re-publish) to the bucket of
    /// `tenant` × `model`. Either it is queued or it is not: no half state.
    /// `Ok(Some(n))`: the bucket holds `n` queued requests now, this one
    /// included (`None` when the publisher does not know). A new bucket may
    /// be refused by a cap ([`PublishError::Refused`]).
    fn publish<'a>(
        &'a self,
        tenant: &'a str,
        model: &'a str,
        req_id: &'a str,
        work: Bytes,
    ) -> BoxFuture<'a, Result<Option<u64>, PublishError>>;
}

/// How long the first publish to a new bucket waits for a consumer to
/// subscribe (a LiteTopic subscription does not see earlier messages).
const FIRST_SUBSCRIBE_WAIT: std::time::Duration = std::time::Duration::from_secs(3);

/// Lanes a publisher sends through. One lane has one send at the broker at
/// a time, each after the answer to the one before, about 1.4 ms on this
/// 2-core machine kind, so one lane tops out near 700 publishes/s however
/// many requests wait. A bucket always goes through the same lane, so its
/// messages reach the broker in the order they came; different buckets go in
/// parallel, over one connection per broker. Each lane sends in a producer
/// group of its own (the broker runs one group's sends to one queue over
/// one connection one after the other). With 64 requests arriving at once,
/// 64 lanes published 5,695–6,213/s against 16 lanes' 4,398–4,990/s
/// (docs/benchmarks.md, session 29); idle lanes cost nothing at the broker.
pub const PRODUCER_LANES: usize = 64;

pub struct LitePublisher {
    /// Sends through [`PRODUCER_LANES`] lanes; a bucket's lane is
    /// [`sluice_litetopic::lane_of`] its LiteTopic.
    producer: LiteProducer,
    parent: String,
    redis: RedisConn,
    /// Caps on new buckets, checked as a bucket is announced.
    caps: BucketCaps,
    /// The producer runs on the client's runtime: it must live as long.
    _client: LiteClient,
}

impl LitePublisher {
    /// Connects through the name server and makes sure the parent topic
    /// (`message.type=LITE`) and the consumer group bound to it exist. New
    /// buckets are capped by the default [`BucketCaps`]; see
    /// [`LitePublisher::with_caps`].
    pub async fn connect(
        namesrv: &str,
        parent: &str,
        consumer_group: &str,
        redis: RedisConn,
    ) -> Result<Self, sluice_litetopic::LiteError> {
        let client = LiteClient::connect(LiteConfig::new(namesrv))?;
        let admin = LiteAdmin::new(&client).await?;
        admin
            .ensure_setup(parent, consumer_group, sluice_litetopic::SETUP_PATIENCE)
            .await?;
        admin.shutdown().await;
        let producer = LiteProducer::with_lanes(&client, PRODUCER_GROUP, PRODUCER_LANES).await?;
        Ok(LitePublisher {
            producer,
            parent: parent.to_string(),
            redis,
            caps: BucketCaps::default(),
            _client: client,
        })
    }

    /// Caps new buckets with `caps` instead of the defaults.
    pub fn with_caps(mut self, caps: BucketCaps) -> Self {
        self.caps = caps;
        self
    }
}

impl LitePublisher {
    /// Make the bucket known to the consumers and record the publish — or
    /// refuse a new bucket that a cap does not allow; when no consumer is
    /// subscribed yet (a new bucket, or one retired as idle), give one the
    /// chance to subscribe before the message goes out.
    ///
    /// Order matters: the activity is recorded in the same round trip (the
    /// caps' script) that looks at the subscription mark, so a consumer
    /// retiring the bucket concurrently either sees the fresh activity and
    /// keeps it, or has already dropped the mark and this publish waits for
    /// a new one.
    async fn announce(&self, tenant: &str, topic: &str) -> Result<(), PublishError> {
        let mut redis = self.redis.clone();
        // A consumer deleting the bucket's retired queue at the broker would
        // take this message with it: the caps wait until it is done.
        let subscribed = self
            .caps
            .admit_after_reclaim(&mut redis, tenant, topic)
            .await?
            .subscribed;
        if subscribed {
            return Ok(());
        }
        let deadline = tokio::time::Instant::now() + FIRST_SUBSCRIBE_WAIT;
        while tokio::time::Instant::now() < deadline {
            tokio::time::sleep(std::time::Duration::from_millis(25)).await;
            let ready = bookkeeping::is_subscribed(&mut redis, topic)
                .await
                .unwrap_or(false);
            if ready {
                return Ok(());
            }
        }
        tracing::warn!(%topic, "no consumer subscribed to the bucket in time; publishing anyway");
        Ok(())
    }
}

/// The producer group of the endpoint's first lane; lane `n` sends in
/// `sluice-deferral-<n>` ([`LiteProducer::with_lanes`]; a group only names
/// the sender).
const PRODUCER_GROUP: &str = "sluice-deferral";

impl Publisher for LitePublisher {
    fn publish<'a>(
        &'a self,
        tenant: &'a str,
        model: &'a str,
        req_id: &'a str,
        work: axum::body::Bytes,
    ) -> BoxFuture<'a, Result<Option<u64>, PublishError>> {
        Box::pin(async move {
            let topic = lite_topic_name(tenant, model);
            self.announce(tenant, &topic).await?;
            self.producer
                .send(&self.parent, &topic, &work, &[("reqId", req_id)])
                .await
                .map_err(|e| PublishError::Failed(e.to_string()))?;
            // One more queued in the bucket (the consumer counts down at pop);
            // re-publishes count too, so the figure does not drift.
            let mut redis = self.redis.clone();
            match bookkeeping::count_publish(&mut redis, &topic).await {
                Ok(queued) => Ok(Some(queued)),
                Err(error) => {
                    tracing::warn!(%error, %topic, "published, but the backlog count was not updated");
                    Ok(None)
                }
            }
        })
    }
}
