//! The endpoint's [`Publisher`] over RocketMQ LiteTopics: one LiteTopic per
//! tenant × model under one parent topic, created by the broker on first send.
//! Sends go through [`PRODUCER_LANES`] producers, a bucket always through
//! the same one.

use super::caps::{BucketCaps, PublishError};
use axum::body::Bytes;
use futures::future::BoxFuture;
use sluice_contract::bookkeeping;
use sluice_litetopic::{lane_of, lite_topic_name, LiteAdmin, LiteClient, LiteConfig, LiteProducer};
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

/// Producers a publisher sends through. One [`LiteProducer`] has one send
/// at the broker at a time (rocketmq-client-rust 1.0.0's producer), about
/// 1.4 ms each on this 2-core machine kind, so it tops out near 690
/// publishes/s however many requests wait. A bucket always goes through the
/// same lane, so its messages reach the broker in the order they came, as
/// with one producer; different buckets go in parallel. Measured (one
/// broker, debug client, 2,000 sends to 1,000 LiteTopics, 16 at once): 1
/// lane 681/s, 4 lanes 1,795/s, 8 lanes 1,837/s (CPU-bound from 4).
pub const PRODUCER_LANES: usize = 4;

pub struct LitePublisher {
    /// [`PRODUCER_LANES`] producers; a bucket's lane is [`lane_of`] its LiteTopic.
    producers: Vec<LiteProducer>,
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
        let producers = start_producers(&client).await?;
        Ok(LitePublisher {
            producers,
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

/// [`PRODUCER_LANES`] producers, in producer groups of their own
/// (`sluice-deferral`, `sluice-deferral-1`, …: a group names the sender).
async fn start_producers(
    client: &LiteClient,
) -> Result<Vec<LiteProducer>, sluice_litetopic::LiteError> {
    let mut producers = Vec::with_capacity(PRODUCER_LANES);
    for lane in 0..PRODUCER_LANES {
        let group = match lane {
            0 => "sluice-deferral".to_string(),
            lane => format!("sluice-deferral-{lane}"),
        };
        match LiteProducer::new(client, &group).await {
            Ok(producer) => producers.push(producer),
            Err(error) => {
                for producer in producers {
                    producer.shutdown().await;
                }
                return Err(error);
            }
        }
    }
    Ok(producers)
}

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
            self.producers[lane_of(&topic, self.producers.len())]
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
