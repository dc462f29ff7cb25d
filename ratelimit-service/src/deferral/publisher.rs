//! The endpoint's [`Publisher`] over RocketMQ LiteTopics: one LiteTopic per
//! tenant × model under one parent topic, created by the broker on first send.

use super::endpoint::Publisher;
use futures::future::BoxFuture;
use sluice_consumer::keys;
use sluice_litetopic::{lite_topic_name, LiteAdmin, LiteClient, LiteConfig, LiteProducer};

/// How long the first publish to a new bucket waits for a consumer to
/// subscribe (a LiteTopic subscription does not see earlier messages).
const FIRST_SUBSCRIBE_WAIT: std::time::Duration = std::time::Duration::from_secs(3);

pub struct LitePublisher {
    producer: LiteProducer,
    parent: String,
    redis: redis::aio::ConnectionManager,
    /// The producer runs on the client's runtime: it must live as long.
    _client: LiteClient,
}

impl LitePublisher {
    /// Connects through the name server and makes sure the parent topic
    /// (`message.type=LITE`) and the consumer group bound to it exist.
    pub async fn connect(
        namesrv: &str,
        parent: &str,
        consumer_group: &str,
        redis: redis::aio::ConnectionManager,
    ) -> Result<Self, sluice_litetopic::LiteError> {
        let client = LiteClient::connect(LiteConfig::new(namesrv))?;
        let admin = LiteAdmin::new(&client).await?;
        admin.ensure_parent_topic(parent).await?;
        admin.ensure_consumer_group(consumer_group, parent).await?;
        admin.shutdown().await;
        let producer = LiteProducer::new(&client, "sluice-deferral").await?;
        Ok(LitePublisher {
            producer,
            parent: parent.to_string(),
            redis,
            _client: client,
        })
    }
}

impl LitePublisher {
    /// Make the bucket known to the consumers; for a new one, give a consumer
    /// the chance to subscribe before the first message goes out.
    async fn announce(&self, topic: &str) -> Result<(), String> {
        let mut redis = self.redis.clone();
        let added: i64 = redis::cmd("SADD")
            .arg(keys::BUCKETS)
            .arg(topic)
            .query_async(&mut redis)
            .await
            .map_err(|e| format!("cannot register bucket {topic}: {e}"))?;
        if added == 0 {
            return Ok(());
        }
        let mark = keys::subscribed(topic);
        let deadline = tokio::time::Instant::now() + FIRST_SUBSCRIBE_WAIT;
        while tokio::time::Instant::now() < deadline {
            let ready: bool = redis::cmd("EXISTS")
                .arg(&mark)
                .query_async(&mut redis)
                .await
                .unwrap_or(false);
            if ready {
                return Ok(());
            }
            tokio::time::sleep(std::time::Duration::from_millis(25)).await;
        }
        tracing::warn!(%topic, "no consumer subscribed to a new bucket in time; publishing anyway");
        Ok(())
    }
}

impl Publisher for LitePublisher {
    fn publish<'a>(
        &'a self,
        tenant: &'a str,
        model: &'a str,
        req_id: &'a str,
        work: Vec<u8>,
    ) -> BoxFuture<'a, Result<(), String>> {
        Box::pin(async move {
            let topic = lite_topic_name(tenant, model);
            self.announce(&topic).await?;
            self.producer
                .send(&self.parent, &topic, &work, &[("reqId", req_id)])
                .await
                .map(|_| ())
                .map_err(|e| e.to_string())
        })
    }
}
