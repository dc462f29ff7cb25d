//! Sending to a LiteTopic: a plain send to the parent topic carrying the
//! `__LITE_TOPIC` system property.

use std::fmt;

use cheetah_string::CheetahString;
use rocketmq_client_rust::{DefaultMQProducer, SendStatus};
use rocketmq_model::common::message::message_single::Message;
use rocketmq_model::common::message::{MessageConst, MessageTrait};
use tracing::{debug, instrument, warn};

use crate::client::LiteClient;
use crate::error::LiteError;
use crate::naming::{validate_group, validate_lite_topic, validate_parent_topic};

/// Largest body the broker takes by default (4 MiB).
pub const MAX_BODY_LEN: usize = 4 * 1024 * 1024;

/// The broker-wide unique id of a sent message (RocketMQ's `UNIQ_KEY`, the
/// `msg_id` of a send result); [`crate::LiteMessage::message_id`] carries the
/// same value.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct MessageId(pub String);

impl fmt::Display for MessageId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Sends messages to LiteTopics. Clone-free but `&self` everywhere: share it
/// behind an `Arc`.
pub struct LiteProducer {
    producer: DefaultMQProducer,
    timeout_ms: u64,
}

impl LiteProducer {
    /// Start a producer in producer group `group` (the group only names the
    /// sender to the broker).
    pub async fn new(client: &LiteClient, group: &str) -> Result<Self, LiteError> {
        validate_group(group)?;
        let mut producer = DefaultMQProducer::builder(client.inner.runtime.clone())
            .client_config(client.client_config())
            .producer_group(group.to_owned())
            .name_server_addr(client.config().namesrv_addr.clone())
            .send_msg_timeout(client.config().request_timeout.as_millis() as u32)
            .build();
        Box::pin(producer.start())
            .await
            .map_err(|e| LiteError::client("start producer", e))?;
        Ok(LiteProducer {
            producer,
            timeout_ms: client.config().request_timeout.as_millis() as u64,
        })
    }

    /// Send `body` to LiteTopic `lite_topic` of `parent`, with user
    /// `properties` (e.g. the request id) that come back on the consumer.
    /// The LiteTopic is created by the broker on the first send.
    #[instrument(skip(self, body, properties), fields(len = body.len()))]
    pub async fn send(
        &self,
        parent: &str,
        lite_topic: &str,
        body: &[u8],
        properties: &[(&str, &str)],
    ) -> Result<MessageId, LiteError> {
        validate_parent_topic(parent)?;
        validate_lite_topic(lite_topic)?;
        if body.len() > MAX_BODY_LEN {
            return Err(LiteError::InvalidArgument(format!(
                "body of {} bytes is over the {MAX_BODY_LEN}-byte limit",
                body.len()
            )));
        }
        let mut message = Message::builder()
            .topic(CheetahString::from_slice(parent))
            .body_slice(body)
            .build()
            .map_err(|e| LiteError::InvalidArgument(format!("message: {e}")))?;
        for (name, value) in properties {
            check_property(name, value)?;
            message
                .put_user_property(
                    CheetahString::from_slice(name),
                    CheetahString::from_slice(value),
                )
                .map_err(|e| LiteError::InvalidArgument(format!("property {name:?}: {e}")))?;
        }
        // The builder has no setter for it and refuses reserved names, so
        // the LiteTopic goes in as a system property.
        message.put_property(
            CheetahString::from_static_str(MessageConst::PROPERTY_LITE_TOPIC),
            CheetahString::from_slice(lite_topic),
        );
        let result = Box::pin(self.producer.send_with_timeout(message, self.timeout_ms))
            .await
            .map_err(|e| LiteError::client("send", e))?
            .ok_or_else(|| LiteError::Decode {
                operation: "send",
                detail: "no send result".into(),
            })?;
        if result.send_status != SendStatus::SendOk {
            // Stored on the master but not flushed or replicated as asked:
            // the message exists, so this is not an error to retry on.
            warn!(status = ?result.send_status, "LiteTopic send not fully acknowledged");
        }
        let id = result
            .msg_id
            .map(|id| MessageId(id.to_string()))
            .ok_or_else(|| LiteError::Decode {
                operation: "send",
                detail: "send result without a message id".into(),
            })?;
        debug!(%id, "sent");
        Ok(id)
    }

    pub async fn shutdown(mut self) {
        Box::pin(self.producer.shutdown()).await;
    }
}

/// Properties the broker acts on that the client crate's reserved-name check
/// lets through: `INNER_MULTI_DISPATCH` names the queues a message is copied
/// into, so a caller-controlled one could write into any LiteTopic.
pub(crate) const BROKER_INTERNAL_PROPERTIES: [&str; 3] = [
    MessageConst::PROPERTY_INNER_MULTI_DISPATCH,
    MessageConst::PROPERTY_INNER_MULTI_QUEUE_OFFSET,
    MessageConst::PROPERTY_LITE_TOPIC,
];

/// RocketMQ encodes properties as `name\x01value\x02`: those two characters
/// cannot appear, and a name cannot be empty.
fn check_property(name: &str, value: &str) -> Result<(), LiteError> {
    let bad = |s: &str| s.contains('\u{1}') || s.contains('\u{2}');
    if name.is_empty() || bad(name) || bad(value) {
        return Err(LiteError::InvalidArgument(format!(
            "property {name:?} has an empty name or a \\x01/\\x02 character"
        )));
    }
    if BROKER_INTERNAL_PROPERTIES.contains(&name) {
        return Err(LiteError::InvalidArgument(format!(
            "property {name:?} is reserved for the broker"
        )));
    }
    Ok(())
}
