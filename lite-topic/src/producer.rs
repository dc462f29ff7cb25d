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
use rocketmq_model::common::message::message_client_id_setter::MessageClientIDSetter;
use rocketmq_model::common::message::message_single::Message;
use rocketmq_model::common::message::{MessageConst, MessageTrait};
use rocketmq_protocol::code::request_code::RequestCode;
use rocketmq_protocol::common::message::message_decoder::message_properties_to_string;
use rocketmq_protocol::protocol::header::message_operation_header::send_message_request_header::SendMessageRequestHeader;
use rocketmq_protocol::protocol::header::message_operation_header::send_message_request_header_v2::SendMessageRequestHeaderV2;
use rocketmq_protocol::protocol::remoting_command::RemotingCommand;
use rocketmq_protocol::rpc::rpc_request_header::RpcRequestHeader;
use rocketmq_protocol::rpc::topic_request_header::TopicRequestHeader;
use tracing::{debug, instrument, warn};

use crate::client::{broker_error, lock, now_millis, BrokerTarget, Lanes, LiteClient, Remoting};
use crate::error::{code, LiteError};
use crate::naming::{validate_group, validate_lite_topic, validate_parent_topic};
use crate::routing::{broker_preference, CachedRoute};

/// The parent topic's one queue on each broker (`ensure_parent_topic`
/// creates one read and one write queue per broker).
const PARENT_QUEUE_ID: i32 = 0;

/// A broker that failed a send is tried last for this long (the name server
/// may list a dead broker for a while: its connection to the broker must
/// close first, or the broker's registration expire).
const AVOID_FAILED_BROKER: Duration = Duration::from_secs(5);

/// The topic a broker copies a new topic's settings from when a send creates
/// it (RocketMQ's `TBW102`; Sluice's parent topics exist before any send).
const CREATE_TOPIC_KEY: &str = "TBW102";
/// Queues of a topic a send creates (RocketMQ's producer default).
const CREATE_TOPIC_QUEUES: i32 = 4;

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
///
/// A LiteTopic's sends go one at a time, each after the answer to the one
/// before, through the LiteTopic's lane ([`crate::lane_of`]; a
/// [`Remoting`] handle), as with rocketmq-client-rust's producer: so its
/// messages are stored in the order sent. Different lanes send side by side
/// ([`LiteProducer::with_lanes`]).
pub struct LiteProducer {
    /// The producer group of each lane: `group`, `group-1`, `group-2`, ….
    /// The broker (rocketmq-broker 1.0.0, `processor/request_ordering.rs`)
    /// runs one connection's sends of one group to one queue one after the
    /// other, so lanes sharing a group would not send side by side.
    groups: Vec<CheetahString>,
    sends: Lanes,
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
        Self::with_lanes(client, group, 1).await
    }

    /// A producer that sends through `lanes` lanes (at least one) side by
    /// side, over one connection to each broker, in producer groups `group`,
    /// `group-1`, `group-2`, … (a group only names the sender).
    pub async fn with_lanes(
        client: &LiteClient,
        group: &str,
        lanes: usize,
    ) -> Result<Self, LiteError> {
        let groups = lane_groups(group, lanes)?;
        let sends = client.lanes("producer-sends", lanes).await?;
        let routes_remoting = match client.remoting("producer-routes").await {
            Ok(remoting) => remoting,
            Err(e) => {
                sends.shutdown().await;
                return Err(e);
            }
        };
        Ok(LiteProducer {
            groups,
            sends,
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
        // The id the consumer sees (`UNIQ_KEY`), the same on every broker
        // tried.
        MessageClientIDSetter::set_uniq_id(&mut message);
        let id = MessageClientIDSetter::get_uniq_id(&message).ok_or_else(|| LiteError::Decode {
            operation: "send",
            detail: "message without a unique id".into(),
        })?;
        self.send_routed(parent, lite_topic, &message).await?;
        debug!(%id, "sent");
        Ok(MessageId(id.to_string()))
    }

    /// Try the route's brokers in the LiteTopic's order until one stores the
    /// message. A send that failed for a reason another broker cannot fix
    /// (bad message, refused property) is returned at once.
    async fn send_routed(
        &self,
        parent: &str,
        lite_topic: &str,
        message: &Message,
    ) -> Result<(), LiteError> {
        let route = self.route(parent).await?;
        let mut last_error = None;
        for broker in self.send_order(lite_topic, &route) {
            match self.send_to(lite_topic, broker, message).await {
                Ok(()) => {
                    if last_error.is_some() {
                        debug!(broker = %broker.name, "sent after failing over");
                    }
                    return Ok(());
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

    /// One send to the parent topic's queue on `broker`. Ok only when the
    /// broker answered that it stored the message.
    async fn send_to(
        &self,
        lite_topic: &str,
        broker: &BrokerTarget,
        message: &Message,
    ) -> Result<(), LiteError> {
        const OPERATION: &str = "send";
        let lane = self.sends.index_of(lite_topic);
        let header = SendMessageRequestHeader {
            producer_group: self.groups[lane].clone(),
            topic: message.topic().clone(),
            default_topic: CheetahString::from_static_str(CREATE_TOPIC_KEY),
            default_topic_queue_nums: CREATE_TOPIC_QUEUES,
            queue_id: PARENT_QUEUE_ID,
            // Never compressed: the consumer refuses compressed bodies (a
            // hostile size claim would be allocated up front; see
            // consumer::decode_pop_answer).
            sys_flag: 0,
            born_timestamp: now_millis(),
            flag: message.get_flag(),
            properties: Some(message_properties_to_string(message.get_properties())),
            reconsume_times: Some(0),
            unit_mode: Some(false),
            batch: Some(false),
            topic_request_header: Some(TopicRequestHeader {
                rpc_request_header: Some(RpcRequestHeader {
                    broker_name: Some(CheetahString::from_slice(&broker.name)),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        };
        let mut request = RemotingCommand::create_request_command(
            RequestCode::SendMessageV2,
            SendMessageRequestHeaderV2::create_send_message_request_header_v2(&header),
        );
        if let Some(body) = message.get_body() {
            request.set_body_mut_ref(body.clone());
        }
        let remoting = &self.sends.all()[lane];
        let response = remoting
            .invoke(OPERATION, &broker.addr, request, remoting.timeout)
            .await?;
        match response.code() {
            code::SUCCESS => {}
            // Stored on the master but not flushed or replicated as asked:
            // the message exists, so this is not an error to retry on.
            code::FLUSH_DISK_TIMEOUT | code::FLUSH_SLAVE_TIMEOUT | code::SLAVE_NOT_AVAILABLE => {
                warn!(
                    code = response.code(),
                    "LiteTopic send not fully acknowledged"
                );
            }
            _ => return Err(broker_error(OPERATION, &broker.addr, &response)),
        }
        debug!(broker = %broker.name, "stored");
        Ok(())
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

    pub async fn shutdown(self) {
        self.sends.shutdown().await;
        self.routes_remoting.shutdown().await;
    }
}

/// The producer group of each of `lanes` lanes (at least one): `group`,
/// `group-1`, `group-2`, …, each a valid group name.
fn lane_groups(group: &str, lanes: usize) -> Result<Vec<CheetahString>, LiteError> {
    (0..lanes.max(1))
        .map(|lane| match lane {
            0 => group.to_owned(),
            lane => format!("{group}-{lane}"),
        })
        .map(|group| validate_group(&group).map(|()| CheetahString::from_string(group)))
        .collect()
}

/// Properties the broker acts on that rocketmq-model's reserved-name check
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::naming::MAX_GROUP_LEN;

    #[test]
    fn each_lane_sends_in_a_group_of_its_own() {
        let groups = lane_groups("sluice-deferral", 3).unwrap_or_default();
        assert_eq!(
            groups,
            ["sluice-deferral", "sluice-deferral-1", "sluice-deferral-2"]
        );
        assert_eq!(lane_groups("g", 0).unwrap_or_default(), ["g"]);
        // A name that fits alone but not with a lane's number is refused
        // before anything is sent.
        let longest = "g".repeat(MAX_GROUP_LEN);
        assert!(lane_groups(&longest, 1).is_ok());
        assert!(matches!(
            lane_groups(&longest, 2),
            Err(LiteError::InvalidArgument(_))
        ));
    }
}
