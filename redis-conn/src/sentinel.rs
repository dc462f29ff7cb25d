//! A connection that follows a Sentinel-managed master across failovers.
//!
//! redis-rs finds a master through sentinels (`Sentinel::async_master_for`)
//! but its reconnecting `ConnectionManager` keeps dialling the old address.
//! This wrapper holds a `ConnectionManager` to the current master and asks
//! the sentinels again when that master refuses connections or answers
//! `READONLY` (it was demoted to a replica). A command is re-sent only when
//! the error proves it did not run (refused connection, `READONLY`): a
//! dropped connection may have run it, and a retried counter increment
//! would count twice.

use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::sentinel::{Sentinel, SentinelNodeConnectionInfo};
use redis::{Cmd, ConnectionInfo, ErrorKind, Pipeline, RedisError, ServerErrorKind, Value};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex as SyncMutex};
use std::time::{Duration, Instant};
use tokio::sync::Mutex;
use tracing::{info, warn};

/// Do not ask the sentinels more often than this while they elect a master.
const RESOLVE_BACKOFF: Duration = Duration::from_millis(100);

#[derive(Clone)]
pub(crate) struct SentinelConn {
    shared: Arc<Shared>,
}

struct Shared {
    /// Also serialises resolution: one task asks, the others wait for it.
    sentinel: Mutex<Resolver>,
    master_name: String,
    node: SentinelNodeConnectionInfo,
    db: i64,
    config: ConnectionManagerConfig,
    connect_timeout: Duration,
    current: SyncMutex<Option<Current>>,
    /// Numbers connections, so a late error on an old one never drops a newer one.
    generations: AtomicU64,
}

struct Resolver {
    sentinel: Sentinel,
    last_failure: Option<Instant>,
}

#[derive(Clone)]
struct Current {
    generation: u64,
    conn: ConnectionManager,
}

impl SentinelConn {
    pub(crate) fn new(
        sentinels: Vec<ConnectionInfo>,
        master_name: String,
        node: SentinelNodeConnectionInfo,
        db: i64,
        connect_timeout: Duration,
        response_timeout: Duration,
    ) -> Result<Self, RedisError> {
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(connect_timeout))
            .set_response_timeout(Some(response_timeout))
            .set_number_of_retries(0);
        Ok(SentinelConn {
            shared: Arc::new(Shared {
                sentinel: Mutex::new(Resolver {
                    sentinel: Sentinel::build(sentinels)?,
                    last_failure: None,
                }),
                master_name,
                node,
                db,
                config,
                connect_timeout,
                current: SyncMutex::new(None),
                generations: AtomicU64::new(0),
            }),
        })
    }

    pub(crate) fn db(&self) -> i64 {
        self.shared.db
    }

    pub(crate) async fn command(&self, cmd: &Cmd) -> Result<Value, RedisError> {
        let mut current = self.current().await?;
        match current.conn.req_packed_command(cmd).await {
            Err(error) if master_moved(&error) => {
                self.forget(current.generation, &error);
                self.current().await?.conn.req_packed_command(cmd).await
            }
            Err(error) => {
                if error.is_io_error() || error.is_connection_dropped() {
                    self.forget(current.generation, &error);
                }
                Err(error)
            }
            ok => ok,
        }
    }

    pub(crate) async fn pipeline(
        &self,
        pipeline: &Pipeline,
        offset: usize,
        count: usize,
    ) -> Result<Vec<Value>, RedisError> {
        let mut current = self.current().await?;
        match current
            .conn
            .req_packed_commands(pipeline, offset, count)
            .await
        {
            Err(error) if master_moved(&error) => {
                self.forget(current.generation, &error);
                self.current()
                    .await?
                    .conn
                    .req_packed_commands(pipeline, offset, count)
                    .await
            }
            Err(error) => {
                if error.is_io_error() || error.is_connection_dropped() {
                    self.forget(current.generation, &error);
                }
                Err(error)
            }
            ok => ok,
        }
    }

    fn cached(&self) -> Option<Current> {
        self.shared
            .current
            .lock()
            .ok()
            .and_then(|current| current.clone())
    }

    /// The connection to the master, asking the sentinels if there is none.
    async fn current(&self) -> Result<Current, RedisError> {
        if let Some(current) = self.cached() {
            return Ok(current);
        }
        // The lookup holds the resolver lock; it runs in a task of its own
        // so that the lock is released even when the caller's future stops
        // being polled (a `select!` arm awaiting something else): a caller
        // parked while holding it stopped every other command of this
        // connection after a failover.
        let this = self.clone();
        tokio::spawn(async move { this.resolve_once().await })
            .await
            .map_err(|_| no_master(&self.shared.master_name))?
    }

    /// One task asks the sentinels; the others wait for it and take its answer.
    async fn resolve_once(&self) -> Result<Current, RedisError> {
        let mut resolver = self.shared.sentinel.lock().await;
        // Another task may have resolved while this one waited.
        if let Some(current) = self.cached() {
            return Ok(current);
        }
        if let Some(failed) = resolver.last_failure {
            if failed.elapsed() < RESOLVE_BACKOFF {
                return Err(no_master(&self.shared.master_name));
            }
        }
        match self.resolve(&mut resolver.sentinel).await {
            Ok(conn) => {
                resolver.last_failure = None;
                let mut slot = self
                    .shared
                    .current
                    .lock()
                    .map_err(|_| no_master(&self.shared.master_name))?;
                let generation = self.shared.generations.fetch_add(1, Ordering::Relaxed) + 1;
                let current = Current { generation, conn };
                *slot = Some(current.clone());
                Ok(current)
            }
            Err(error) => {
                resolver.last_failure = Some(Instant::now());
                Err(error)
            }
        }
    }

    async fn resolve(&self, sentinel: &mut Sentinel) -> Result<ConnectionManager, RedisError> {
        let name = &self.shared.master_name;
        let lookup = sentinel.async_master_for(name, Some(&self.shared.node));
        let client = tokio::time::timeout(self.shared.connect_timeout * 2, lookup)
            .await
            .map_err(|_| no_master(name))??;
        let addr = client.get_connection_info().addr().to_string();
        let conn = ConnectionManager::new_with_config(client, self.shared.config.clone()).await?;
        info!(master = %name, %addr, "redis sentinel: connected to the master");
        Ok(conn)
    }

    /// Drops the connection of `generation` (a newer one stays).
    fn forget(&self, generation: u64, error: &RedisError) {
        if let Ok(mut slot) = self.shared.current.lock() {
            if slot.as_ref().is_some_and(|c| c.generation == generation) {
                warn!(master = %self.shared.master_name, %error, "redis sentinel: master lost; asking the sentinels again");
                *slot = None;
            }
        }
    }
}

/// The command did not run on a master: safe to send again to the new one.
fn master_moved(error: &RedisError) -> bool {
    error.is_connection_refusal()
        || matches!(error.kind(), ErrorKind::Server(ServerErrorKind::ReadOnly))
}

fn no_master(name: &str) -> RedisError {
    RedisError::from((
        ErrorKind::Io,
        "redis sentinel: no reachable master",
        name.to_string(),
    ))
}
