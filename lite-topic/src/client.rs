//! The shared client: the runtime that drives the connections, remoting
//! handles over rocketmq-transport, and broker discovery through the name
//! server.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use cheetah_string::CheetahString;
use rocketmq_protocol::code::request_code::RequestCode;
use rocketmq_protocol::protocol::body::broker_body::cluster_info::ClusterInfo;
use rocketmq_protocol::protocol::command_custom_header::CommandCustomHeader;
use rocketmq_protocol::protocol::header::client_request_header::GetRouteInfoRequestHeader;
use rocketmq_protocol::protocol::header::empty_header::EmptyHeader;
use rocketmq_protocol::protocol::remoting_command::RemotingCommand;
use rocketmq_protocol::protocol::route::route_data_view::BrokerData;
use rocketmq_protocol::protocol::route::topic_route_data::TopicRouteData;
use rocketmq_runtime::{ChildServiceContext, RuntimeConfig, RuntimeOwner, ShutdownDeadline};
use rocketmq_transport::api::{
    DefaultRequestProcessor, OutboundRequestOutcome, RemotingClient, TransportClientConfig,
};
use tracing::{debug, warn};

use crate::error::{code, LiteError, TransportFailure};

/// Master broker id in RocketMQ routes.
const MASTER_ID: u64 = 0;

/// How long a handle's shutdown waits for its connections to close.
const HANDLE_SHUTDOWN_WAIT: Duration = Duration::from_secs(3);

/// How to reach the RocketMQ cluster.
#[derive(Debug, Clone)]
pub struct LiteConfig {
    /// Name server address(es), `host:port[;host:port...]`.
    pub namesrv_addr: String,
    /// Timeout of one ordinary request (a long-poll pop adds its poll time).
    pub request_timeout: Duration,
    /// Worker threads of the client's own runtime (rocketmq-transport drives
    /// its connections on a runtime the client owns).
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

    /// The name server addresses, `;`-separated in [`Self::namesrv_addr`].
    fn namesrv_addrs(&self) -> Vec<CheetahString> {
        self.namesrv_addr
            .split(';')
            .map(str::trim)
            .filter(|addr| !addr.is_empty())
            .map(CheetahString::from_slice)
            .collect()
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
    /// Where the handles' connection tasks run: the runtime `owner` holds.
    context: ChildServiceContext,
    owner: Mutex<Option<RuntimeOwner>>,
}

/// A name no other client shares, `sluice-<pid>-<12 random hex>`: a
/// consumer's pop client id. The broker (rocketmq-broker 1.0.0) keys a
/// consumer's LiteTopic subscriptions and pops by it: two consumers in one
/// process (two in a test, an endpoint beside a consumer) or two processes
/// with one pid on one address (containers on the host network) must not
/// share one.
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
        if config.namesrv_addrs().is_empty() {
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
        let context = owner.root_context().component("sluice-litetopic");
        Ok(LiteClient {
            inner: Arc::new(ClientInner {
                config,
                context,
                owner: Mutex::new(Some(owner)),
            }),
        })
    }

    pub fn config(&self) -> &LiteConfig {
        &self.inner.config
    }

    /// A started remoting handle of its own (its own connections and its
    /// own call gate: see [`Remoting`]).
    pub(crate) async fn remoting(&self, role: &'static str) -> Result<Remoting, LiteError> {
        let transport = self.transport(role).await?;
        Ok(self.gate(transport))
    }

    /// `n` handles (at least one) for calls that may run side by side: a
    /// call gate each, over connections they share (the broker answers a
    /// connection's requests in any order, as each is done).
    pub(crate) async fn lanes(&self, role: &'static str, n: usize) -> Result<Lanes, LiteError> {
        let transport = self.transport(role).await?;
        Ok(Lanes(
            (0..n.max(1))
                .map(|_| Arc::new(self.gate(transport.clone())))
                .collect(),
        ))
    }

    /// A started rocketmq-transport client: one connection to each broker
    /// and name server it is asked to reach.
    async fn transport(&self, role: &'static str) -> Result<Arc<RemotingClient>, LiteError> {
        let transport = RemotingClient::builder(
            Arc::new(TransportClientConfig::default()),
            DefaultRequestProcessor,
            self.inner.context.component(role),
        )
        .build()
        .map_err(|e| LiteError::transport("create client handle", e))?;
        let transport = Arc::new(transport);
        if let Err(e) = transport.start().await {
            transport.shutdown();
            return Err(LiteError::transport("start client handle", e));
        }
        transport
            .update_name_server_address_list(self.inner.config.namesrv_addrs())
            .await;
        debug!(role, "remoting client started");
        Ok(transport)
    }

    fn gate(&self, transport: Arc<RemotingClient>) -> Remoting {
        Remoting {
            transport,
            gate: tokio::sync::Mutex::new(()),
            timeout: self.inner.config.request_timeout,
        }
    }

    /// Stop the client runtime. Shut the admin, producers and consumers down
    /// first.
    pub async fn shutdown(self) {
        let owner = lock(&self.inner.owner).take();
        if let Some(owner) = owner {
            let report = Box::pin(owner.shutdown_tasks()).await;
            if !report.is_healthy() {
                warn!(report = %report.to_json(), "rocketmq runtime tasks shut down unhealthy");
            }
            // Dropping the owner stops its runtime in the background (safe
            // inside an async context).
            drop(owner);
        }
    }
}

/// One remoting handle: a call gate over a rocketmq-transport client (a
/// connection to each broker and name server), one call at a time.
///
/// One call at a time keeps what rocketmq-client-rust's handles did, which
/// Sluice was checked against: a LiteTopic's calls, all made through one
/// handle ([`Lanes`]), reach the broker one after the other, each after the
/// answer to the one before. So a long-poll pop waiting for up to its poll
/// time holds up every other call on its handle (`ONE_HANDLE_PER_POLLER` in
/// the facts sheet): each consumer keeps pops and everything else on
/// handles of their own, and several of each. Handles are cheap: the lanes
/// of one [`Lanes`] share their connections.
pub(crate) struct Remoting {
    transport: Arc<RemotingClient>,
    gate: tokio::sync::Mutex<()>,
    pub(crate) timeout: Duration,
}

/// Several [`Remoting`] handles used side by side, over shared connections:
/// one handle runs one call at a time (about a millisecond each on
/// loopback), so one handle caps a consumer at about a thousand suspends and
/// releases a second, whatever the broker could take. A LiteTopic's calls
/// always go through the same handle ([`crate::lane_of`]), so they reach
/// the broker in the order made.
pub(crate) struct Lanes(Vec<Arc<Remoting>>);

impl Lanes {
    /// The handle for calls not tied to one LiteTopic (routes,
    /// subscriptions, dispatch triggers).
    pub(crate) fn first(&self) -> &Arc<Remoting> {
        &self.0[0]
    }

    /// The handle of LiteTopic `lite_topic`.
    pub(crate) fn of(&self, lite_topic: &str) -> &Arc<Remoting> {
        &self.0[self.index_of(lite_topic)]
    }

    /// The number of LiteTopic `lite_topic`'s handle ([`crate::lane_of`]).
    pub(crate) fn index_of(&self, lite_topic: &str) -> usize {
        crate::lane_of(lite_topic, self.0.len())
    }

    /// Every handle, in lane order.
    pub(crate) fn all(&self) -> &[Arc<Remoting>] {
        &self.0
    }

    /// Close the lanes' connections once no call holds a lane any more
    /// (else they close when the last call drops its lane).
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
    /// Send one request to `addr` (a name server's when `None`) and return
    /// the answer, whatever its code.
    async fn call(
        &self,
        operation: &'static str,
        addr: Option<&str>,
        request: RemotingCommand,
        timeout: Duration,
    ) -> Result<RemotingCommand, LiteError> {
        let addr = addr.map(CheetahString::from_slice);
        let _turn = self.gate.lock().await;
        let outcome = self
            .transport
            .invoke_request(addr.as_ref(), request, timeout.as_millis() as u64)
            .await
            .map_err(|e| LiteError::transport(operation, e))?;
        match outcome {
            OutboundRequestOutcome::Response(response) => Ok(response),
            OutboundRequestOutcome::Rejected(rejection) => Err(LiteError::transport(
                operation,
                TransportFailure::Rejected {
                    reason: rejection.reason(),
                    stage: rejection.stage(),
                },
            )),
            OutboundRequestOutcome::Contract(contract) => {
                Err(LiteError::transport(operation, contract.reason()))
            }
        }
    }

    /// Send one request to broker `addr` and return the broker's answer,
    /// whatever its code.
    pub(crate) async fn invoke(
        &self,
        operation: &'static str,
        addr: &str,
        request: RemotingCommand,
        timeout: Duration,
    ) -> Result<RemotingCommand, LiteError> {
        self.call(operation, Some(addr), request, timeout).await
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

    /// A name server's answer to `request`: its body when it answered
    /// success, `None` for "topic not exist".
    async fn ask_name_server(
        &self,
        operation: &'static str,
        request: RemotingCommand,
    ) -> Result<Option<bytes::Bytes>, LiteError> {
        let mut response = self.call(operation, None, request, self.timeout).await?;
        match response.code() {
            code::SUCCESS => response
                .take_body()
                .map(Some)
                .ok_or_else(|| LiteError::Decode {
                    operation,
                    detail: "answer without a body".into(),
                }),
            code::TOPIC_NOT_EXIST => Ok(None),
            _ => Err(broker_error(operation, "the name server", &response)),
        }
    }

    /// Master brokers of the whole cluster, as the name server knows them.
    pub(crate) async fn cluster_masters(&self) -> Result<Vec<BrokerTarget>, LiteError> {
        const OPERATION: &str = "get cluster info";
        let request = RemotingCommand::create_request_command(
            RequestCode::GetBrokerClusterInfo,
            EmptyHeader {},
        );
        let body = self
            .ask_name_server(OPERATION, request)
            .await?
            .ok_or_else(|| LiteError::NoRoute("the cluster (no cluster info)".into()))?;
        let info = ClusterInfo::decode(&body).map_err(|e| LiteError::Decode {
            operation: OPERATION,
            detail: e.to_string(),
        })?;
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
        const OPERATION: &str = "get topic route";
        let header = GetRouteInfoRequestHeader {
            topic: CheetahString::from_slice(topic),
            accept_standard_json_only: None,
            topic_request_header: None,
        };
        let request =
            RemotingCommand::create_request_command(RequestCode::GetRouteinfoByTopic, header);
        let Some(body) = self.ask_name_server(OPERATION, request).await? else {
            return Err(LiteError::NoRoute(topic.to_owned()));
        };
        let route = TopicRouteData::decode(&body).map_err(|e| LiteError::Decode {
            operation: OPERATION,
            detail: e.to_string(),
        })?;
        let masters = sorted_masters(route.broker_datas.iter());
        if masters.is_empty() {
            return Err(LiteError::NoRoute(topic.to_owned()));
        }
        Ok(masters)
    }

    /// Close the handle's connections, unless other handles share them (the
    /// last one to shut down closes them).
    pub(crate) async fn shutdown(self) {
        let Some(transport) = Arc::into_inner(self.transport) else {
            return;
        };
        let deadline = ShutdownDeadline::after(HANDLE_SHUTDOWN_WAIT);
        match transport.shutdown_until(deadline).await {
            Ok(report) if !report.is_healthy() => {
                debug!(?report, "remoting handle shut down unhealthy");
            }
            Ok(_) => {}
            Err(e) => debug!(error = %e, "remoting handle shutdown failed"),
        }
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

/// The guarded value, also after a panic elsewhere poisoned the mutex (its
/// state is still whole: no code here panics while holding one).
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
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
    fn two_clients_in_one_process_have_different_names() {
        let (a, b) = (unique_client_name(), unique_client_name());
        assert_ne!(a, b);
        let pid = format!("sluice-{}-", std::process::id());
        assert!(a.starts_with(&pid) && a.len() == pid.len() + 12, "{a}");
    }

    #[test]
    fn name_server_addresses_are_split_on_semicolons() {
        let config = LiteConfig::new(" 127.0.0.1:9876; 127.0.0.2:9876 ;");
        let addrs: Vec<String> = config
            .namesrv_addrs()
            .iter()
            .map(|a| a.to_string())
            .collect();
        assert_eq!(addrs, ["127.0.0.1:9876", "127.0.0.2:9876"]);
        assert!(LiteClient::connect(LiteConfig::new(" ; ")).is_err());
    }
}
