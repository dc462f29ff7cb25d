//! Shared by the test files that `mod common;` it.
#![allow(dead_code)] // each test file uses part of it

pub mod xds_server;

/// The tests' clock: 2026-11-29T00:02:05.500Z, 5.5 s into a minute window,
/// 2 min 5.5 s into an hour.
pub const T0: u64 = 1_795_996_925_500;

use sluice_proto::pb::envoy::extensions::common::ratelimit::v3::{
    rate_limit_descriptor::Entry, RateLimitDescriptor,
};
use sluice_proto::pb::envoy::service::ratelimit::v3::RateLimitRequest;

/// A request with one descriptor of one entry.
pub fn one_entry_request(domain: &str, key: &str, value: &str) -> RateLimitRequest {
    RateLimitRequest {
        domain: domain.into(),
        descriptors: vec![RateLimitDescriptor {
            entries: vec![Entry {
                key: key.into(),
                value: value.into(),
            }],
            ..Default::default()
        }],
        hits_addend: 0,
    }
}

/// A counter store for a test: a fresh Redis server's (kept alive by the
/// returned handle) when `redis`, else one in memory.
pub fn store(
    redis: bool,
) -> (
    std::sync::Arc<dyn sluice_ratelimit::store::CounterStore>,
    Option<sluice_testkit::RedisServer>,
) {
    use sluice_ratelimit::store::{MemoryStore, RedisStore, RedisStoreOptions};
    if !redis {
        return (std::sync::Arc::new(MemoryStore::new()), None);
    }
    let server = sluice_testkit::RedisServer::start().unwrap();
    let store = RedisStore::new(&RedisStoreOptions {
        redis: sluice_redis::RedisOptions::from_url(server.url()),
        ..Default::default()
    })
    .unwrap();
    (std::sync::Arc::new(store), Some(server))
}

/// A limiter of `config` counting in `store`, all-or-nothing, on the system clock.
pub fn limiter_on(
    config: sluice_ratelimit::config::LimitsConfig,
    store: std::sync::Arc<dyn sluice_ratelimit::store::CounterStore>,
) -> std::sync::Arc<sluice_ratelimit::limiter::Limiter> {
    std::sync::Arc::new(sluice_ratelimit::limiter::Limiter::new(
        config,
        store,
        sluice_ratelimit::store::CountingMode::AllOrNothing,
        std::sync::Arc::new(sluice_ratelimit::limiter::SystemClock),
        std::sync::Arc::new(sluice_ratelimit::metrics::Metrics::new()),
    ))
}

/// [`limiter_on`] a fresh in-memory store.
pub fn memory_limiter(
    config: sluice_ratelimit::config::LimitsConfig,
) -> std::sync::Arc<sluice_ratelimit::limiter::Limiter> {
    limiter_on(
        config,
        std::sync::Arc::new(sluice_ratelimit::store::MemoryStore::new()),
    )
}
