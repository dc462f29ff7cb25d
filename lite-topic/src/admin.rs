//! Start-up set-up: the LITE parent topic and the consumer group bound to it.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use cheetah_string::CheetahString;
use rocketmq_protocol::code::request_code::RequestCode;
use rocketmq_protocol::protocol::header::create_topic_request_header::CreateTopicRequestHeader;
use rocketmq_protocol::protocol::header::get_subscription_group_config_request_header::GetSubscriptionGroupConfigRequestHeader;
use rocketmq_protocol::protocol::header::get_topic_config_request_header::GetTopicConfigRequestHeader;
use rocketmq_protocol::protocol::remoting_command::RemotingCommand;
use rocketmq_protocol::protocol::subscription::subscription_group_config::SubscriptionGroupConfig;
use tracing::{info, instrument, warn};

use crate::client::{expect_success, BrokerTarget, LiteClient, Remoting};
use crate::error::{code, LiteError};
use crate::naming::{validate_group, validate_parent_topic};

/// Topic attribute that makes a topic a LiteTopic parent.
const LITE_TOPIC_ATTRIBUTES: &str = "+message.type=LITE";
/// Group attribute that binds a consumer group to its parent topic.
const LITE_BIND_TOPIC_ATTRIBUTE: &str = "+lite.bind.topic";
/// Read permission | write permission.
const PERM_READ_WRITE: i32 = 6;
/// How long [`LiteAdmin::ensure_parent_topic`] waits for the name server to
/// serve the new topic's route (the broker registers it right after creating
/// it; producers need the route).
const ROUTE_WAIT: Duration = Duration::from_secs(15);
/// How long Sluice's services keep trying [`LiteAdmin::ensure_setup`] at
/// start-up before they give up with the broker's error.
pub const SETUP_PATIENCE: Duration = Duration::from_secs(60);
/// The first and the longest pause between two tries of [`LiteAdmin::ensure_setup`].
const SETUP_RETRY_FIRST: Duration = Duration::from_millis(100);
const SETUP_RETRY_MAX: Duration = Duration::from_secs(2);

/// Idempotent set-up calls for Sluice's start-up.
pub struct LiteAdmin {
    remoting: Remoting,
}

impl LiteAdmin {
    pub async fn new(client: &LiteClient) -> Result<Self, LiteError> {
        Ok(LiteAdmin {
            remoting: client.remoting("admin").await?,
        })
    }

    /// Make sure `parent` exists as a LITE topic on every master broker, and
    /// wait until the name server routes it to all of them (producers and
    /// consumers follow that route). Safe to call any number of
    /// times; refuses (permanently) if `parent` exists as a non-LITE topic.
    #[instrument(skip(self))]
    pub async fn ensure_parent_topic(&self, parent: &str) -> Result<(), LiteError> {
        validate_parent_topic(parent)?;
        let masters = self.remoting.cluster_masters().await?;
        for broker in &masters {
            match self.topic_message_type(broker, parent).await? {
                Some(kind) if kind.eq_ignore_ascii_case("LITE") => continue,
                Some(other) => {
                    return Err(LiteError::Conflict(format!(
                        "topic {parent} exists on {} with message type {other}, not LITE",
                        broker.name
                    )))
                }
                None => {}
            }
            let header = CreateTopicRequestHeader {
                topic: CheetahString::from_slice(parent),
                default_topic: CheetahString::from_static_str("TBW102"),
                read_queue_nums: 1,
                write_queue_nums: 1,
                perm: PERM_READ_WRITE,
                topic_filter_type: CheetahString::from_static_str("SINGLE_TAG"),
                topic_sys_flag: Some(0),
                order: false,
                attributes: Some(CheetahString::from_static_str(LITE_TOPIC_ATTRIBUTES)),
                force: Some(false),
                topic_request_header: None,
            };
            self.remoting
                .request_ok(
                    "create parent topic",
                    &broker.addr,
                    RequestCode::UpdateAndCreateTopic,
                    header,
                )
                .await?;
            info!(parent, broker = %broker.name, "LITE parent topic created");
        }
        self.wait_for_route(parent, &masters).await
    }

    /// [`LiteAdmin::ensure_parent_topic`], then
    /// [`LiteAdmin::ensure_consumer_group`], tried again while they fail
    /// transiently — a broker still starting, or registered at the name
    /// server a moment before it answers, as when a mesh's pods come up in
    /// any order — until `patience` has passed; then the last error.
    /// Permanent errors (a conflict, a bad name) return at once.
    pub async fn ensure_setup(
        &self,
        parent: &str,
        group: &str,
        patience: Duration,
    ) -> Result<(), LiteError> {
        retry_transient(patience, || async {
            self.ensure_parent_topic(parent).await?;
            self.ensure_consumer_group(group, parent).await
        })
        .await
    }

    /// Make sure consumer group `group` exists on every master broker, bound
    /// to `parent` (`lite.bind.topic`). Safe to call any number of times;
    /// refuses (permanently) if the group is bound to another topic.
    #[instrument(skip(self))]
    pub async fn ensure_consumer_group(&self, group: &str, parent: &str) -> Result<(), LiteError> {
        validate_group(group)?;
        validate_parent_topic(parent)?;
        for broker in self.remoting.cluster_masters().await? {
            match self.group_bind_topic(&broker, group).await? {
                Some(Some(bound)) if bound == parent => continue,
                Some(Some(bound)) => {
                    return Err(LiteError::Conflict(format!(
                        "group {group} on {} is bound to topic {bound}, not {parent}",
                        broker.name
                    )))
                }
                // Absent, or present without a binding: (re)write it.
                Some(None) | None => {}
            }
            let mut config = SubscriptionGroupConfig::new(CheetahString::from_slice(group));
            config.set_attributes(HashMap::from([(
                CheetahString::from_static_str(LITE_BIND_TOPIC_ATTRIBUTE),
                CheetahString::from_slice(parent),
            )]));
            let body = serde_json::to_vec(&config).map_err(|e| {
                LiteError::InvalidArgument(format!("encoding the group config: {e}"))
            })?;
            let request =
                RemotingCommand::new_request(RequestCode::UpdateAndCreateSubscriptionGroup, body);
            self.remoting
                .invoke_ok("create consumer group", &broker.addr, request)
                .await?;
            info!(group, parent, broker = %broker.name, "LiteTopic consumer group created");
        }
        Ok(())
    }

    /// The message type of `topic` on `broker` (`LITE`, `NORMAL`, ...),
    /// `None` when the topic does not exist there.
    async fn topic_message_type(
        &self,
        broker: &BrokerTarget,
        topic: &str,
    ) -> Result<Option<String>, LiteError> {
        let header = GetTopicConfigRequestHeader {
            topic: CheetahString::from_slice(topic),
            topic_request_header: None,
        };
        let request = RemotingCommand::create_request_command(RequestCode::GetTopicConfig, header);
        let Some(attributes) = self
            .read_attributes("get topic config", broker, request, code::TOPIC_NOT_EXIST)
            .await?
        else {
            return Ok(None);
        };
        Ok(Some(
            attribute(&attributes, "message.type").unwrap_or_else(|| "NORMAL".to_owned()),
        ))
    }

    /// `None`: no such group; `Some(None)`: group without a binding;
    /// `Some(Some(t))`: bound to `t`.
    async fn group_bind_topic(
        &self,
        broker: &BrokerTarget,
        group: &str,
    ) -> Result<Option<Option<String>>, LiteError> {
        let header = GetSubscriptionGroupConfigRequestHeader {
            group: CheetahString::from_slice(group),
            rpc_request_header: None,
        };
        let request = RemotingCommand::create_request_command(
            RequestCode::GetSubscriptionGroupConfig,
            header,
        );
        let attributes = self
            .read_attributes(
                "get consumer group config",
                broker,
                request,
                code::SUBSCRIPTION_GROUP_NOT_EXIST,
            )
            .await?;
        Ok(attributes.map(|a| attribute(&a, "lite.bind.topic").filter(|t| !t.is_empty())))
    }

    /// The `attributes` object of a topic or group config answer; `None` when
    /// the broker answers `absent_code`. (Read raw: the client crate's typed
    /// getters turn "does not exist" into an opaque invalid-argument error.)
    async fn read_attributes(
        &self,
        operation: &'static str,
        broker: &BrokerTarget,
        request: RemotingCommand,
        absent_code: i32,
    ) -> Result<Option<serde_json::Map<String, serde_json::Value>>, LiteError> {
        let response = self
            .remoting
            .invoke(operation, &broker.addr, request, self.remoting.timeout)
            .await?;
        if response.code() == absent_code {
            return Ok(None);
        }
        let response = expect_success(operation, &broker.addr, response)?;
        let body = response.body().map(|b| b.as_ref()).unwrap_or_default();
        let value: serde_json::Value =
            serde_json::from_slice(body).map_err(|e| LiteError::Decode {
                operation,
                detail: e.to_string(),
            })?;
        Ok(Some(
            value
                .get("attributes")
                .and_then(|a| a.as_object())
                .cloned()
                .unwrap_or_default(),
        ))
    }

    /// Until the name server routes `topic` to every one of `brokers` (each
    /// registers the topic with the name server after creating it, not at
    /// once).
    async fn wait_for_route(&self, topic: &str, brokers: &[BrokerTarget]) -> Result<(), LiteError> {
        let deadline = Instant::now() + ROUTE_WAIT;
        loop {
            let routed = match self.remoting.topic_masters(topic).await {
                Ok(route) => brokers
                    .iter()
                    .all(|b| route.iter().any(|r| r.name == b.name)),
                Err(e) if e.is_transient() => false,
                Err(e) => return Err(e),
            };
            if routed {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(LiteError::NoRoute(format!(
                    "{topic} (not routed to all of {} brokers after {ROUTE_WAIT:?})",
                    brokers.len()
                )));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    pub async fn shutdown(self) {
        self.remoting.shutdown().await;
    }
}

/// Runs `attempt` until it succeeds, fails permanently, or `patience` has
/// passed (then its last error), pausing 100 ms, doubling to 2 s, between
/// tries.
async fn retry_transient<T, Attempt, Fut>(
    patience: Duration,
    mut attempt: Attempt,
) -> Result<T, LiteError>
where
    Attempt: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, LiteError>>,
{
    let deadline = Instant::now() + patience;
    let mut pause = SETUP_RETRY_FIRST;
    loop {
        match attempt().await {
            Err(error) if error.is_transient() && Instant::now() + pause < deadline => {
                warn!(%error, retry_in = ?pause, "broker set-up failed; trying again");
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(SETUP_RETRY_MAX);
            }
            outcome => return outcome,
        }
    }
}

/// An attribute by name, stored with or without the `+` of the "add"
/// syntax it was set with.
fn attribute(
    attributes: &serde_json::Map<String, serde_json::Value>,
    name: &str,
) -> Option<String> {
    attributes
        .get(name)
        .or_else(|| attributes.get(&format!("+{name}")))
        .and_then(|v| v.as_str())
        .map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    fn transient() -> LiteError {
        LiteError::NoRoute("sluice-deferred".into())
    }

    #[tokio::test]
    async fn transient_failures_are_tried_again_until_one_succeeds() {
        let tries = Cell::new(0);
        let outcome = retry_transient(Duration::from_secs(5), || async {
            tries.set(tries.get() + 1);
            if tries.get() < 3 {
                Err(transient())
            } else {
                Ok(tries.get())
            }
        })
        .await;
        assert!(matches!(outcome, Ok(3)), "{outcome:?}");
    }

    #[tokio::test]
    async fn a_permanent_failure_returns_at_once() {
        let tries = Cell::new(0);
        let outcome: Result<(), _> = retry_transient(Duration::from_secs(5), || async {
            tries.set(tries.get() + 1);
            Err(LiteError::Conflict("bound elsewhere".into()))
        })
        .await;
        assert!(
            matches!(outcome, Err(LiteError::Conflict(_))),
            "{outcome:?}"
        );
        assert_eq!(tries.get(), 1);
    }

    #[tokio::test]
    async fn patience_bounds_the_tries_and_the_last_error_comes_back() {
        let started = Instant::now();
        let tries = Cell::new(0);
        let outcome: Result<(), _> = retry_transient(Duration::from_millis(500), || async {
            tries.set(tries.get() + 1);
            Err(transient())
        })
        .await;
        assert!(matches!(outcome, Err(LiteError::NoRoute(_))), "{outcome:?}");
        // 100 + 200 ms of pauses fit in 500 ms, the next 400 ms would not.
        assert_eq!(tries.get(), 3);
        assert!(started.elapsed() < Duration::from_millis(500));
    }
}
