//! The endpoint's [`Publisher`] over RocketMQ LiteTopics: one LiteTopic per
//! tenant × model under one parent topic, created by the broker on first send.

use super::endpoint::Publisher;
use futures::future::BoxFuture;
use sluice_litetopic::{lite_topic_name, LiteAdmin, LiteClient, LiteConfig, LiteProducer};

pub struct LitePublisher {
    producer: LiteProducer,
    parent: String,
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
            _client: client,
        })
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
            self.producer
                .send(&self.parent, &topic, &work, &[("reqId", req_id)])
                .await
                .map(|_| ())
                .map_err(|e| e.to_string())
        })
    }
}
