//! The shared client: rocketmq-client-rust's runtime, remoting handles, and
//! broker discovery through the name server.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cheetah_string::CheetahString;
use rocketmq_client_rust::{
    ClientConfig, ClientInstanceHandle, ClientRuntime, ClientRuntimeConfig, TelemetryHandle,
};
use rocketmq_protocol::code::request_code::RequestCode;
use rocketmq_protocol::protocol::command_custom_header::CommandCustomHeader;
use rocketmq_protocol::protocol::remoting_command::RemotingCommand;
use rocketmq_protocol::protocol::route::route_data_view::BrokerData;
use rocketmq_runtime::{RuntimeConfig, RuntimeOwner};
use tracing::{debug, warn};

use crate::error::{code, LiteError};

/// Master broker id in RocketMQ routes.
const MASTER_ID: u64 = 0;

/// How to reach the RocketMQ cluster.
#[derive(Debug, Clone)]
pub struct LiteConfig {
    /// Name server address(es), `host:port[;host:port...]`.
    pub namesrv_addr: String,
    /// Timeout of one ordinary request (a long-poll pop adds its poll time).
    pub request_timeout: Duration,
    /// Worker threads of the client's own runtime (rocketmq-client-rust
    /// drives its connections on a runtime it owns).
    pub worker_threads: usize,
}

impl LiteConfig {
    pub fn new(namesrv_addr: impl Into<String>) -> Self {
        LiteConfig {
            namesrv_addr: namesrv_addr.into(),
            request_timeout: Duration::from_secs(3),
            worker_threads: 2,
        }
    }
}

/// A master broker: its name (used in request headers and handles) and its
/// remoting address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerTarget {
    pub name: String,
    pub addr: String,
}

/// Entry point: one client runtime shared by [`crate::LiteAdmin`],
/// [`crate::LiteProducer`] and [`crate::LiteConsumer`]s. Cheap to clone.
///
/// Call [`LiteClient::shutdown`] after shutting the parts down; dropping it
/// instead stops its runtime in the background.
#[derive(Clone)]
pub struct LiteClient {
    pub(crate) inner: Arc<ClientInner>,
}

pub(crate) struct ClientInner {
    pub(crate) config: LiteConfig,
    pub(crate) runtime: Arc<ClientRuntime>,
    owner: Mutex<Option<RuntimeOwner>>,
    next_domain: AtomicU64,
    /// This client's part of the client id the broker sees (`ip@instance`).
    instance_name: String,
}

/// A name no other client shares, `sluice-<pid>-<12 random hex>`: the
/// client id part of a `LiteClient` and a consumer's pop client id. The
/// broker (rocketmq-broker 1.0.0) closes the connection of a producer whose
/// client id another connection's heartbeat claims, and the sends in flight
/// on it are never answered: two clients in one process (two endpoints, an
/// endpoint beside a consumer) or two processes with one pid on one address
/// (containers on the host network) must not share `ip@sluice-<pid>`.
pub(crate) fn unique_client_name() -> String {
    format!(
        "sluice-{}-{}",
        std::process::id(),
        &uuid::Uuid::new_v4().simple().to_string()[..12]
    )
}

impl LiteClient {
    /// Build the client runtime. Nothing is contacted yet.
    pub fn connect(config: LiteConfig) -> Result<Self, LiteError> {
        if config.namesrv_addr.trim().is_empty() {
            return Err(LiteError::InvalidArgument(
                "name server address is empty".into(),
            ));
        }
        let runtime_config =
            RuntimeConfig::for_parallelism("sluice-rocketmq", config.worker_threads.max(1));
        let owner = RuntimeOwner::plan(runtime_config)
            .map_err(|e| LiteError::Runtime(format!("runtime configuration: {e}")))?
            .build()
            .map_err(|e| LiteError::Runtime(format!("building the client runtime: {e}")))?;
        let runtime = ClientRuntime::try_new(
            owner.root_context().component("sluice-litetopic"),
            ClientRuntimeConfig::default(),
            TelemetryHandle::noop(),
        )
        .map_err(|e| LiteError::Runtime(format!("client runtime: {e}")))?;
        Ok(LiteClient {
            inner: Arc::new(ClientInner {
                config,
                runtime,
                owner: Mutex::new(Some(owner)),
                next_domain: AtomicU64::new(1),
                instance_name: unique_client_name(),
            }),
        })
    }

    pub fn config(&self) -> &LiteConfig {
        &self.inner.config
    }

    pub(crate) fn client_config(&self) -> ClientConfig {
        let mut config = ClientConfig::new();
        config.set_namesrv_addr(CheetahString::from_string(
            self.inner.config.namesrv_addr.clone(),
        ));
        config.set_instance_name(CheetahString::from_string(self.inner.instance_name.clone()));
        config
    }

    /// A started remoting handle of its own (its own connections and its
    /// own call gate: see [`Remoting`]).
    pub(crate) async fn remoting(&self, role: &'static str) -> Result<Remoting, LiteError> {
        let domain = self.inner.next_domain.fetch_add(1, Ordering::Relaxed);
        let handle = ClientInstanceHandle::get_or_create(
            &self.inner.runtime,
            domain,
            self.client_config(),
            None,
        )
        .map_err(|e| LiteError::client("create client handle", e))?;
        if let Err(e) = Box::pin(handle.start()).await {
            Box::pin(handle.shutdown_owned()).await;
            return Err(LiteError::client("start client handle", e));
        }
        debug!(role, domain, "remoting handle started");
        Ok(Remoting {
            handle,
            timeout: self.inner.config.request_timeout,
        })
    }

    /// `n` handles (at least one) for calls that may run side by side.
    pub(crate) async fn lanes(&self, role: &'static str, n: usize) -> Result<Lanes, LiteError> {
        let mut lanes = Vec::with_capacity(n.max(1));
        for _ in 0..n.max(1) {
            match self.remoting(role).await {
                Ok(remoting) => lanes.push(Arc::new(remoting)),
                Err(e) => {
                    Lanes(lanes).shutdown().await;
                    return Err(e);
                }
            }
        }
        Ok(Lanes(lanes))
    }

    /// Stop the client runtime. Shut the admin, producers and consumers down
    /// first.
    pub async fn shutdown(self) {
        let report = Box::pin(self.inner.runtime.shutdown()).await;
        if !report.is_healthy() {
            warn!(report = %report.to_json(), "rocketmq client runtime shut down unhealthy");
        }
        let owner = self
            .inner
            .owner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .take();
        if let Some(owner) = owner {
            let report = Box::pin(owner.shutdown_tasks()).await;
            if !report.is_healthy() {
                debug!(report = %report.to_json(), "rocketmq runtime tasks shut down unhealthy");
            }
            // Dropping the owner stops its runtime in the background (safe
            // inside an async context).
            drop(owner);
        }
    }
}

/// One `ClientInstanceHandle`.
///
/// Workaround `ONE_HANDLE_PER_POLLER` (facts sheet): a handle runs one call
/// at a time behind an async mutex, so a long-poll pop waiting for up to its
/// poll time would hold up every suspend, release or subscribe sent through
/// the same handle. Each consumer therefore keeps pops and everything else
/// on handles of their own, and several of each ([`Lanes`]).
pub(crate) struct Remoting {
    handle: ClientInstanceHandle,
    pub(crate) timeout: Duration,
}

/// Several [`Remoting`] handles used side by side: one handle runs one call
/// at a time (about a millisecond each on loopback), so one handle caps a
/// consumer at about a thousand suspends and releases a second, whatever
/// the broker could take. A LiteTopic's calls always go through the same
/// handle ([`crate::lane_of`]), so they reach the broker in the order made.
pub(crate) struct Lanes(Vec<Arc<Remoting>>);

impl Lanes {
    /// The handle for calls not tied to one LiteTopic (routes,
    /// subscriptions, dispatch triggers).
    pub(crate) fn first(&self) -> &Arc<Remoting> {
        &self.0[0]
    }

    /// The handle of LiteTopic `lite_topic`.
    pub(crate) fn of(&self, lite_topic: &str) -> &Arc<Remoting> {
        &self.0[crate::lane_of(lite_topic, self.0.len())]
    }

    /// Every handle, in lane order.
    pub(crate) fn all(&self) -> &[Arc<Remoting>] {
        &self.0
    }

    /// Close every handle no call holds any more (the others close when
    /// their last call drops them).
    pub(crate) async fn shutdown(self) {
        for lane in self.0 {
            match Arc::try_unwrap(lane) {
                Ok(remoting) => remoting.shutdown().await,
                Err(_) => debug!("remoting handle still in use; closed when dropped"),
            }
        }
    }
}

impl Remoting {
    /// Send one request and return the broker's answer, whatever its code.
    pub(crate) async fn invoke(
        &self,
        operation: &'static str,
        addr: &str,
        request: RemotingCommand,
        timeout: Duration,
    ) -> Result<RemotingCommand, LiteError> {
        Box::pin(self.handle.invoke_remoting(
            &CheetahString::from_slice(addr),
            request,
            timeout.as_millis() as u64,
        ))
        .await
        .map_err(|e| LiteError::client(operation, e))
    }

    /// [`Remoting::invoke`], and turn any code but success into an error.
    pub(crate) async fn invoke_ok(
        &self,
        operation: &'static str,
        addr: &str,
        request: RemotingCommand,
    ) -> Result<RemotingCommand, LiteError> {
        let response = self.invoke(operation, addr, request, self.timeout).await?;
        expect_success(operation, addr, response)
    }

    /// [`Remoting::invoke_ok`] of request `code` carrying `header`.
    pub(crate) async fn request_ok<H>(
        &self,
        operation: &'static str,
        addr: &str,
        code: RequestCode,
        header: H,
    ) -> Result<RemotingCommand, LiteError>
    where
        H: CommandCustomHeader + Sync + Send + 'static,
    {
        let request = RemotingCommand::create_request_command(code, header);
        self.invoke_ok(operation, addr, request).await
    }

    /// Master brokers of the whole cluster, as the name server knows them.
    pub(crate) async fn cluster_masters(&self) -> Result<Vec<BrokerTarget>, LiteError> {
        let info = Box::pin(
            self.handle
                .broker_cluster_info(self.timeout.as_millis() as u64),
        )
        .await
        .map_err(|e| LiteError::client("get cluster info", e))?;
        let table = info.broker_addr_table.unwrap_or_default();
        let masters = sorted_masters(table.values());
        if masters.is_empty() {
            return Err(LiteError::NoRoute(
                "the cluster (no master broker registered)".into(),
            ));
        }
        Ok(masters)
    }

    /// Master brokers serving `topic`, per the name server.
    pub(crate) async fn topic_masters(&self, topic: &str) -> Result<Vec<BrokerTarget>, LiteError> {
        let route = Box::pin(
            self.handle
                .topic_route(topic, self.timeout.as_millis() as u64),
        )
        .await;
        let route = match route {
            Ok(Some(route)) => route,
            Ok(None) => return Err(LiteError::NoRoute(topic.to_owned())),
            Err(e) if e.broker_response_code() == Some(code::TOPIC_NOT_EXIST) => {
                return Err(LiteError::NoRoute(topic.to_owned()))
            }
            Err(e) => return Err(LiteError::client("get topic route", e)),
        };
        let masters = sorted_masters(route.broker_datas.iter());
        if masters.is_empty() {
            return Err(LiteError::NoRoute(topic.to_owned()));
        }
        Ok(masters)
    }

    pub(crate) async fn shutdown(self) {
        Box::pin(self.handle.shutdown_owned()).await;
    }
}

pub(crate) fn expect_success(
    operation: &'static str,
    addr: &str,
    response: RemotingCommand,
) -> Result<RemotingCommand, LiteError> {
    if response.code() == code::SUCCESS {
        Ok(response)
    } else {
        Err(broker_error(operation, addr, &response))
    }
}

pub(crate) fn broker_error(
    operation: &'static str,
    addr: &str,
    response: &RemotingCommand,
) -> LiteError {
    LiteError::Broker {
        operation,
        broker: addr.to_owned(),
        code: response.code(),
        remark: response.remark().map(|r| r.to_string()).unwrap_or_default(),
    }
}

/// Milliseconds since the Unix epoch (the broker's clock unit).
pub(crate) fn now_millis() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// The master (broker id 0) of each broker in `brokers`, by broker name.
fn sorted_masters<'a>(brokers: impl Iterator<Item = &'a BrokerData>) -> Vec<BrokerTarget> {
    let mut masters: Vec<BrokerTarget> = brokers
        .filter_map(|data| {
            data.broker_addrs()
                .get(&MASTER_ID)
                .map(|addr| BrokerTarget {
                    name: data.broker_name().to_string(),
                    addr: addr.to_string(),
                })
        })
        .collect();
    masters.sort_by(|a, b| a.name.cmp(&b.name));
    masters
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_clients_in_one_process_have_different_client_ids() {
        let config = || LiteConfig::new("127.0.0.1:9876");
        let (Ok(a), Ok(b)) = (LiteClient::connect(config()), LiteClient::connect(config())) else {
            panic!("clients need no broker to be built");
        };
        let (a_id, b_id) = (
            a.client_config().build_mq_client_id(),
            b.client_config().build_mq_client_id(),
        );
        assert_ne!(a_id, b_id);
        // One client's producer and remoting handles share its id.
        assert_eq!(a_id, a.client_config().build_mq_client_id());
    }
}
