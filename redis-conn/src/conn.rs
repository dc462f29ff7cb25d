//! [`RedisConn`]: one cloneable async connection whatever the deployment.
//!
//! Standalone and Cluster use redis-rs's own reconnecting connections
//! (`ConnectionManager`, `cluster_async::ClusterConnection`, which follows
//! slot moves and failovers by itself). Sentinel has no such connection in
//! redis-rs: [`crate::sentinel`] asks the sentinels for the master again when
//! the one it talks to goes away or turns into a replica.

use crate::address::{self, AddressError, Topology};
use crate::sentinel::SentinelConn;
use futures::future::FutureExt;
use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use redis::{Cmd, ErrorKind, Pipeline, RedisError, RedisFuture, ServerErrorKind, Value};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::OnceCell;

/// How a component reaches Redis: the same three settings in every config
/// file, CLI and environment (see docs/configuration.md).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RedisOptions {
    /// `redis://…`, `rediss://…`, `redis+cluster://…` or `redis+sentinel://…`
    /// (see [`crate::address`]).
    pub url: String,
    /// A file holding the password (ACL user's or `requirepass`); wins over
    /// a password in the URL, so the URL can live in a ConfigMap.
    pub password_file: Option<PathBuf>,
    pub connect_timeout_ms: u64,
    /// Bound of one round trip.
    pub response_timeout_ms: u64,
}

impl Default for RedisOptions {
    fn default() -> Self {
        RedisOptions {
            url: "redis://127.0.0.1:6379".into(),
            password_file: None,
            connect_timeout_ms: 1_000,
            response_timeout_ms: 2_000,
        }
    }
}

/// Why Redis settings cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum OptionsError {
    #[error(transparent)]
    Address(#[from] AddressError),
    #[error("redis password file {path}: {source}")]
    PasswordFile {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("redis password file {0} is empty")]
    EmptyPasswordFile(PathBuf),
    #[error("redis: {0}")]
    Client(#[from] RedisError),
}

impl RedisOptions {
    /// The options for `url` with default timeouts.
    pub fn from_url(url: impl Into<String>) -> Self {
        RedisOptions {
            url: url.into(),
            ..RedisOptions::default()
        }
    }

    /// Checks the URL and reads the password file.
    pub fn topology(&self) -> Result<Topology, OptionsError> {
        let password = match &self.password_file {
            Some(path) => Some(read_password(path)?),
            None => None,
        };
        Ok(address::parse(&self.url, password.as_deref())?)
    }

    fn connect_timeout(&self) -> Duration {
        Duration::from_millis(self.connect_timeout_ms)
    }

    fn response_timeout(&self) -> Duration {
        Duration::from_millis(self.response_timeout_ms)
    }
}

fn read_password(path: &PathBuf) -> Result<String, OptionsError> {
    let text = std::fs::read_to_string(path).map_err(|source| OptionsError::PasswordFile {
        path: path.clone(),
        source,
    })?;
    let password = text.trim_end_matches(['\r', '\n']);
    if password.is_empty() {
        return Err(OptionsError::EmptyPasswordFile(path.clone()));
    }
    Ok(password.to_string())
}

/// Makes connections to one deployment. Cheap to clone.
#[derive(Clone)]
pub struct RedisClient {
    options: RedisOptions,
    topology: Topology,
}

impl std::fmt::Debug for RedisClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", self.topology)
    }
}

impl RedisClient {
    /// Validates the options; connects nothing yet.
    pub fn new(options: &RedisOptions) -> Result<Self, OptionsError> {
        Ok(RedisClient {
            topology: options.topology()?,
            options: options.clone(),
        })
    }

    /// [`RedisClient::new`] for a URL with default timeouts.
    pub fn open(url: &str) -> Result<Self, OptionsError> {
        Self::new(&RedisOptions::from_url(url))
    }

    pub fn topology(&self) -> &Topology {
        &self.topology
    }

    /// The same deployment with another bound on one round trip: for a
    /// connection that runs blocking commands (`XREAD BLOCK`), whose round
    /// trip is as long as the block.
    pub fn with_response_timeout(&self, timeout: Duration) -> RedisClient {
        let mut client = self.clone();
        client.options.response_timeout_ms = u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX);
        client
    }

    pub fn is_cluster(&self) -> bool {
        matches!(self.topology, Topology::Cluster(_))
    }

    /// A multiplexed, reconnecting connection, opened on first use (a
    /// component starts while Redis is down and answers per its fail mode).
    /// Clones share it. Blocking commands (`XREAD BLOCK`) hold it up for
    /// every clone: give them a connection of their own.
    pub fn connect(&self) -> Result<RedisConn, OptionsError> {
        let inner = match &self.topology {
            Topology::Standalone(info) => {
                let client = redis::Client::open(info.clone())?;
                let config = ConnectionManagerConfig::new()
                    .set_connection_timeout(Some(self.options.connect_timeout()))
                    .set_response_timeout(Some(self.options.response_timeout()))
                    .set_number_of_retries(1)
                    .set_max_delay(Duration::from_millis(500));
                Inner::Standalone(ConnectionManager::new_lazy_with_config(client, config)?)
            }
            Topology::Cluster(nodes) => {
                let client = ClusterClient::builder(nodes.clone())
                    .connection_timeout(self.options.connect_timeout())
                    .response_timeout(self.options.response_timeout())
                    .retries(3)
                    .min_retry_wait(50)
                    .max_retry_wait(1_000)
                    .build()?;
                Inner::Cluster(Arc::new(LazyCluster {
                    client,
                    connection: OnceCell::new(),
                }))
            }
            Topology::Sentinel {
                sentinels,
                master_name,
                node,
                db,
            } => Inner::Sentinel(SentinelConn::new(
                sentinels.clone(),
                master_name.clone(),
                node.clone(),
                *db,
                self.options.connect_timeout(),
                self.options.response_timeout(),
            )?),
        };
        Ok(RedisConn { inner })
    }
}

/// A connection to whichever deployment the options name; implements
/// redis-rs's `ConnectionLike`, so commands, pipelines and scripts run on it
/// as on any redis-rs connection.
#[derive(Clone)]
pub struct RedisConn {
    inner: Inner,
}

#[derive(Clone)]
enum Inner {
    Standalone(ConnectionManager),
    Cluster(Arc<LazyCluster>),
    Sentinel(SentinelConn),
}

/// The cluster connection is made on first use: unlike `ConnectionManager`,
/// redis-rs's cluster client has no lazy constructor. A failed first attempt
/// is retried by the next command.
struct LazyCluster {
    client: ClusterClient,
    connection: OnceCell<ClusterConnection>,
}

impl LazyCluster {
    async fn get(&self) -> Result<ClusterConnection, RedisError> {
        self.connection
            .get_or_try_init(|| self.client.get_async_connection())
            .await
            .cloned()
    }
}

/// Commands refused because their keys span hash slots, in this process.
static CROSS_SLOT_ERRORS: AtomicU64 = AtomicU64::new(0);

/// How many commands of this process a Redis Cluster (or redis-rs's cluster
/// client, for a pipeline) refused with `CROSSSLOT`. Every multi-key command
/// Sluice sends is meant to stay in one slot: the cluster tests assert 0.
pub fn cross_slot_errors() -> u64 {
    CROSS_SLOT_ERRORS.load(Ordering::Relaxed)
}

fn note_cross_slot(error: &RedisError) {
    if matches!(error.kind(), ErrorKind::Server(ServerErrorKind::CrossSlot)) {
        CROSS_SLOT_ERRORS.fetch_add(1, Ordering::Relaxed);
        tracing::error!(%error, "redis: a command's keys span hash slots (a bug in Sluice's key layout)");
    }
}

impl RedisConn {
    async fn command(&mut self, cmd: &Cmd) -> Result<Value, RedisError> {
        let result = self.command_inner(cmd).await;
        if let Err(error) = &result {
            note_cross_slot(error);
        }
        result
    }

    async fn pipeline(
        &mut self,
        pipeline: &Pipeline,
        offset: usize,
        count: usize,
    ) -> Result<Vec<Value>, RedisError> {
        let result = self.pipeline_inner(pipeline, offset, count).await;
        if let Err(error) = &result {
            note_cross_slot(error);
        }
        result
    }

    async fn command_inner(&mut self, cmd: &Cmd) -> Result<Value, RedisError> {
        match &mut self.inner {
            Inner::Standalone(conn) => conn.req_packed_command(cmd).await,
            Inner::Cluster(lazy) => lazy.get().await?.req_packed_command(cmd).await,
            Inner::Sentinel(conn) => conn.command(cmd).await,
        }
    }

    async fn pipeline_inner(
        &mut self,
        pipeline: &Pipeline,
        offset: usize,
        count: usize,
    ) -> Result<Vec<Value>, RedisError> {
        match &mut self.inner {
            Inner::Standalone(conn) => conn.req_packed_commands(pipeline, offset, count).await,
            Inner::Cluster(lazy) => {
                lazy.get()
                    .await?
                    .req_packed_commands(pipeline, offset, count)
                    .await
            }
            Inner::Sentinel(conn) => conn.pipeline(pipeline, offset, count).await,
        }
    }
}

impl ConnectionLike for RedisConn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        self.command(cmd).boxed()
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        self.pipeline(pipeline, offset, count).boxed()
    }

    fn get_db(&self) -> i64 {
        match &self.inner {
            Inner::Standalone(conn) => conn.get_db(),
            Inner::Cluster(_) => 0,
            Inner::Sentinel(conn) => conn.db(),
        }
    }
}
