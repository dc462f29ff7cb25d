//! RocketMQ **LiteTopic** client for Sluice.
//!
//! Over-quota LLM requests are parked in LiteTopics, one per tenant × model
//! ([`lite_topic_name`]), under one parent topic, and a paced consumer drains
//! them: it pops, and for each LiteTopic either runs the message and
//! [`LiteConsumer::release`]s the LiteTopic, or [`LiteConsumer::suspend`]s
//! the LiteTopic for as long as its pacing policy says, while the others keep
//! flowing.
//!
//! Built on `rocketmq-transport` 1.0.0 (the remoting protocol; every call
//! is a raw remoting request) against the rocketmq-rust broker 1.0.0
//! with `enableLmq` and `enableMultiDispatch`. Delivery is **at most once**
//! with that broker: a popped message is never delivered again, so callers
//! keep their own lease and re-publish (see `README.md`).
//!
//! Any number of brokers: the client follows the name server's route of the
//! parent topic. Each LiteTopic lives on one owner broker (Apache
//! RocketMQ's own sharding, `routing`), sends fail over to the next owner
//! when a broker does not store a message, and the consumer pops from every
//! broker of the route (README: "Several brokers").
//!
//! ```no_run
//! # async fn demo() -> Result<(), sluice_litetopic::LiteError> {
//! use std::time::Duration;
//! use sluice_litetopic::*;
//!
//! let client = LiteClient::connect(LiteConfig::new("127.0.0.1:9876"))?;
//! let admin = LiteAdmin::new(&client).await?;
//! admin.ensure_parent_topic("sluice-deferred").await?;
//! admin.ensure_consumer_group("sluice-consumer", "sluice-deferred").await?;
//!
//! let topic = lite_topic_name("acme", "gpt-4o");
//! let producer = LiteProducer::new(&client, "sluice-producer").await?;
//! producer.send("sluice-deferred", &topic, b"{...}", &[("reqId", "r-1")]).await?;
//!
//! let consumer = LiteConsumer::new(&client, "sluice-consumer", "sluice-deferred").await?;
//! consumer.subscribe(&[topic.as_str()]).await?;
//! for msg in consumer.pop(8, Duration::from_secs(30), Duration::from_secs(5)).await? {
//!     // ... run it, then free its LiteTopic, or pace it:
//!     consumer.suspend(&msg.handle, Duration::from_millis(300)).await?;
//! }
//! # Ok(()) }
//! ```

mod admin;
mod client;
mod consumer;
mod error;
mod naming;
pub mod probe;
mod producer;
mod routing;

pub use admin::{LiteAdmin, SETUP_PATIENCE};
pub use client::{BrokerTarget, LiteClient, LiteConfig};
pub use consumer::{
    decode_pop_answer, ConsumerStats, LiteConsumer, LiteMessage, MessageHandle, MAX_POP_BATCH,
};
pub use error::LiteError;
pub use naming::{
    lane_of, lite_topic_name, validate_group, validate_lite_topic, validate_parent_topic,
    MAX_GROUP_LEN, MAX_LITE_TOPIC_LEN, MAX_PARENT_TOPIC_LEN,
};
pub use producer::{LiteProducer, MessageId, MAX_BODY_LEN};
