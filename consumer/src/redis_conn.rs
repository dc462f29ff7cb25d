//! The consumer's Redis connection.

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// Redis connection settings of the consumer.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct RedisOptions {
    /// `redis://…` or `rediss://…`.
    pub url: String,
    pub connect_timeout_ms: u64,
    /// Bound of one round trip; a write slower than this aborts the call.
    pub response_timeout_ms: u64,
}

impl Default for RedisOptions {
    fn default() -> Self {
        RedisOptions {
            url: "redis://127.0.0.1:6379".into(),
            connect_timeout_ms: 1_000,
            response_timeout_ms: 2_000,
        }
    }
}

/// A multiplexed, reconnecting connection with bounded round trips (opened
/// lazily: the consumer starts while Redis is down).
pub fn connect(options: &RedisOptions) -> Result<ConnectionManager, redis::RedisError> {
    let client = redis::Client::open(options.url.as_str())?;
    let config = ConnectionManagerConfig::new()
        .set_connection_timeout(Some(Duration::from_millis(options.connect_timeout_ms)))
        .set_response_timeout(Some(Duration::from_millis(options.response_timeout_ms)))
        .set_number_of_retries(1)
        .set_max_delay(Duration::from_millis(500));
    ConnectionManager::new_lazy_with_config(client, config)
}
