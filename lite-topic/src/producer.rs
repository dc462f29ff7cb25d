//! Sending to a LiteTopic: a send to the parent topic's queue on one broker,
//! carrying the `__LITE_TOPIC` system property.
//!
//! Routing (see [`crate::routing`]): the LiteTopic's preferred broker of the
//! parent topic's route first, then the others in order when one does not
//! store the message. The route is read from the name server, kept for
//! `ROUTE_REFRESH`, and read again after any failed send.

use std::collections::HashMap;
use std::fmt;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use cheetah_string::CheetahString;
use rocketmq_client_rust::{DefaultMQProducer, SendStatus};
use rocketmq_model::common::message::message_single::Message;
use rocketmq_model::common::message::{MessageConst, MessageTrait};
use rocketmq_model::message::MessageQueue;
use tracing::{debug, instrument, warn};

use crate::client::{BrokerTarget, LiteClient, Remoting};
use crate::error::LiteError;
use crate::naming::{validate_group, validate_lite_topic, validate_parent_topic};
use crate::routing::{broker_preference, CachedRoute};

/// The parent topic's one queue on each broker (`ensure_parent_topic`
/// creates one read and one write queue per broker).
const PARENT_QUEUE_ID: i32 = 0;

/// A broker that failed a send is tried last for this long (the name server
/// may list a dead broker for a while: its connection to the broker must
/// close first, or the broker's registration expire).
const AVOID_FAILED_BROKER: Duration = Duration::from_secs(5);

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
    /// Name-server lookups of parent topic routes.
    routes_remoting: Remoting,
    routes: Mutex<HashMap<String, CachedRoute>>,
    /// Brokers that failed a send, and when.
    failed: Mutex<HashMap<String, Instant>>,
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
            // Never compress: the consumer refuses compressed bodies (a
            // hostile size claim would be allocated up front; see
            // consumer::decode_pop_answer), and request bodies are small.
            .compress_msg_body_over_howmuch(u32::MAX)
            .build();
        Box::pin(producer.start())
            .await
            .map_err(|e| LiteError::client("start producer", e))?;
        let routes_remoting = match client.remoting("producer-routes").await {
            Ok(remoting) => remoting,
            Err(e) => {
                Box::pin(producer.shutdown()).await;
                return Err(e);
            }
        };
        Ok(LiteProducer {
            producer,
            timeout_ms: client.config().request_timeout.as_millis() as u64,
            routes_remoting,
            routes: Mutex::new(HashMap::new()),
            failed: Mutex::new(HashMap::new()),
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
        self.send_routed(parent, lite_topic, message).await
    }

    /// Try the route's brokers in the LiteTopic's order until one stores the
    /// message. A send that failed for a reason another broker cannot fix
    /// (bad message, refused property) is returned at once.
    async fn send_routed(
        &self,
        parent: &str,
        lite_topic: &str,
        message: Message,
    ) -> Result<MessageId, LiteError> {
        let route = self.route(parent).await?;
        let mut last_error = None;
        for broker in self.send_order(lite_topic, &route) {
            match self.send_to(parent, broker, message.clone()).await {
                Ok(id) => {
                    if last_error.is_some() {
                        debug!(broker = %broker.name, "sent after failing over");
                    }
                    return Ok(id);
                }
                Err(e) if e.is_transient() => {
                    warn!(broker = %broker.name, error = %e, "send failed; trying the next broker");
                    self.forget_route(parent);
                    lock(&self.failed).insert(broker.name.clone(), Instant::now());
                    last_error = Some(e);
                }
                Err(e) => return Err(e),
            }
        }
        Err(last_error.unwrap_or_else(|| LiteError::NoRoute(parent.to_owned())))
    }

    /// The LiteTopic's broker order, with brokers that failed a send in the
    /// last `AVOID_FAILED_BROKER` moved to the end (so a dead broker costs
    /// one timeout, not one per message).
    fn send_order<'a>(&self, lite_topic: &str, route: &'a [BrokerTarget]) -> Vec<&'a BrokerTarget> {
        let mut failed = lock(&self.failed);
        failed.retain(|_, at| at.elapsed() < AVOID_FAILED_BROKER);
        let (healthy, avoided): (Vec<_>, Vec<_>) = broker_preference(lite_topic, route)
            .into_iter()
            .partition(|broker| !failed.contains_key(&broker.name));
        healthy.into_iter().chain(avoided).collect()
    }

    /// One send to `parent`'s queue on `broker`. Ok only when the broker
    /// answered that it stored the message.
    async fn send_to(
        &self,
        parent: &str,
        broker: &BrokerTarget,
        message: Message,
    ) -> Result<MessageId, LiteError> {
        let queue = MessageQueue::from_parts(
            CheetahString::from_slice(parent),
            CheetahString::from_slice(&broker.name),
            PARENT_QUEUE_ID,
        );
        let result = Box::pin(self.producer.send_to_queue_with_timeout(
            message,
            queue,
            self.timeout_ms,
        ))
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
        debug!(%id, broker = %broker.name, "sent");
        Ok(id)
    }

    /// The brokers serving `parent`, from the cache while it is fresh.
    async fn route(&self, parent: &str) -> Result<Vec<BrokerTarget>, LiteError> {
        if let Some(route) = lock(&self.routes).get(parent).filter(|r| r.is_fresh()) {
            return Ok(route.brokers.clone());
        }
        let brokers = self.routes_remoting.topic_masters(parent).await?;
        lock(&self.routes).insert(parent.to_owned(), CachedRoute::new(brokers.clone()));
        Ok(brokers)
    }

    fn forget_route(&self, parent: &str) {
        lock(&self.routes).remove(parent);
    }

    pub async fn shutdown(mut self) {
        Box::pin(self.producer.shutdown()).await;
        self.routes_remoting.shutdown().await;
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

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}
