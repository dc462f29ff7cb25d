//! Counters in Redis: one Lua script call per decision.

use super::{scripts, CounterOp, CounterOutcome, CounterStore, CountingMode, StoreError};
use futures::future::BoxFuture;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// Connection settings of the Redis store.
#[derive(Clone, Debug)]
pub struct RedisStoreOptions {
    /// `redis://[:password@]host:port[/db]` or `rediss://` for TLS.
    pub url: String,
    /// Multiplexed connections. Each one pipelines every concurrent decision
    /// sent over it, so a few are enough.
    pub connections: usize,
    /// Upper bound for one decision's round trip; beyond it the decision fails
    /// as unavailable and Envoy's failure mode decides.
    pub timeout: Duration,
}

impl Default for RedisStoreOptions {
    fn default() -> Self {
        RedisStoreOptions {
            url: "redis://127.0.0.1:6379".into(),
            connections: 4,
            timeout: Duration::from_millis(250),
        }
    }
}

pub struct RedisStore {
    connections: Vec<ConnectionManager>,
    next: AtomicUsize,
    script: redis::Script,
    timeout: Duration,
}

impl RedisStore {
    /// Builds the store. Connections are opened lazily and re-opened after a
    /// failure, so the service starts (not ready) while Redis is down.
    pub fn new(options: &RedisStoreOptions) -> Result<Self, StoreError> {
        // The URL may hold a password: never echo it in errors.
        let client = redis::Client::open(options.url.as_str()).map_err(|e| {
            StoreError::Failed(format!(
                "invalid Redis URL {}: {:?}",
                redact_url(&options.url),
                e.kind()
            ))
        })?;
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(options.timeout.max(Duration::from_secs(1))))
            .set_response_timeout(Some(options.timeout))
            .set_number_of_retries(2)
            .set_max_delay(Duration::from_secs(1));
        let connections = (0..options.connections.max(1))
            .map(|_| ConnectionManager::new_lazy_with_config(client.clone(), config.clone()))
            .collect::<Result<Vec<_>, _>>()
            .map_err(map_error)?;
        Ok(RedisStore {
            connections,
            next: AtomicUsize::new(0),
            script: redis::Script::new(scripts::DECIDE),
            timeout: options.timeout,
        })
    }

    fn connection(&self) -> ConnectionManager {
        let index = self.next.fetch_add(1, Ordering::Relaxed) % self.connections.len();
        self.connections[index].clone()
    }

    /// Loads the decision script so the first decision needs no NOSCRIPT retry.
    pub async fn preload(&self) -> Result<(), StoreError> {
        let mut connection = self.connection();
        self.script
            .load_async(&mut connection)
            .await
            .map(|_| ())
            .map_err(map_error)
    }

    async fn run(
        &self,
        ops: &[CounterOp],
        mode: CountingMode,
    ) -> Result<CounterOutcome, StoreError> {
        if ops.is_empty() {
            return Ok(CounterOutcome {
                applied: true,
                before: Vec::new(),
            });
        }
        let mut invocation = self.script.prepare_invoke();
        invocation.arg(match mode {
            CountingMode::AllOrNothing => "1",
            CountingMode::IncrementAll => "0",
        });
        for op in ops {
            invocation
                .key(op.key.as_str())
                .arg(op.hits)
                .arg(op.limit)
                .arg(if op.enforced { "1" } else { "0" })
                .arg(op.ttl_secs);
        }
        let mut connection = self.connection();
        // The connection's response timeout (set in `new`) bounds the round
        // trip; no second timer per decision.
        let reply: Vec<i64> = invocation
            .invoke_async(&mut connection)
            .await
            .map_err(map_error)?;
        match reply.split_first() {
            Some((&applied, before)) if before.len() == ops.len() => Ok(CounterOutcome {
                applied: applied == 1,
                before: before.iter().map(|&v| v.max(0) as u64).collect(),
            }),
            _ => Err(StoreError::Failed(format!(
                "decision script returned {} values for {} keys",
                reply.len(),
                ops.len()
            ))),
        }
    }
}

impl CounterStore for RedisStore {
    fn apply<'a>(
        &'a self,
        ops: &'a [CounterOp],
        mode: CountingMode,
        _now_millis: u64,
    ) -> BoxFuture<'a, Result<CounterOutcome, StoreError>> {
        Box::pin(self.run(ops, mode))
    }

    fn ping(&self) -> BoxFuture<'_, Result<(), StoreError>> {
        Box::pin(async move {
            let mut connection = self.connection();
            let reply = tokio::time::timeout(
                self.timeout,
                redis::cmd("PING").query_async::<String>(&mut connection),
            )
            .await
            .map_err(|_| StoreError::Unavailable("PING timed out".into()))?
            .map_err(map_error)?;
            if reply == "PONG" {
                Ok(())
            } else {
                Err(StoreError::Failed(format!(
                    "unexpected PING reply {reply:?}"
                )))
            }
        })
    }

    fn kind(&self) -> &'static str {
        "redis"
    }
}

fn map_error(error: redis::RedisError) -> StoreError {
    let transient = error.is_io_error()
        || error.is_connection_refusal()
        || error.is_timeout()
        || error.is_connection_dropped()
        || matches!(
            error.kind(),
            redis::ErrorKind::Server(
                redis::ServerErrorKind::BusyLoading
                    | redis::ServerErrorKind::TryAgain
                    | redis::ServerErrorKind::ClusterDown
                    | redis::ServerErrorKind::MasterDown
            )
        );
    if transient {
        StoreError::Unavailable(error.to_string())
    } else {
        StoreError::Failed(error.to_string())
    }
}

/// The URL with any password replaced by `***`, safe for logs.
pub fn redact_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return "<unparseable url>".into();
    };
    match rest.rsplit_once('@') {
        Some((userinfo, host)) => {
            let user = userinfo.split_once(':').map(|(u, _)| u).unwrap_or("");
            if userinfo.contains(':') || !userinfo.is_empty() {
                format!("{scheme}://{user}:***@{host}")
            } else {
                format!("{scheme}://{host}")
            }
        }
        None => url.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::redact_url;

    #[test]
    fn passwords_are_redacted() {
        assert_eq!(
            redact_url("redis://:s3cret@host:6379/0"),
            "redis://:***@host:6379/0"
        );
        assert_eq!(redact_url("rediss://user:pw@h:1"), "rediss://user:***@h:1");
        assert_eq!(redact_url("redis://h:1"), "redis://h:1");
        assert_eq!(redact_url("nonsense"), "<unparseable url>");
    }
}
