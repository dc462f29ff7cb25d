//! The consumer's Redis connection: the same settings and URL forms as every
//! Sluice component (one server, Redis Cluster or Sentinel; see `sluice_redis`).

pub use sluice_redis::{OptionsError as RedisOptionsError, RedisConn, RedisOptions};

/// A multiplexed, reconnecting connection with bounded round trips (opened
/// lazily: the consumer starts while Redis is down).
pub fn connect(options: &RedisOptions) -> Result<RedisConn, RedisOptionsError> {
    sluice_redis::RedisClient::new(options)?.connect()
}
