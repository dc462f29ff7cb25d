//! What a consumer test runs around the consumer: Redis, a RocketMQ broker,
//! the simulated model and the deferral endpoint's publisher.

use crate::redis_topologies::{RedisDeployment, RedisKind};
use crate::stack::{redis_connection_at, start_broker, start_llm_sim, GROUP, PARENT};
use crate::RocketMq;
use sluice_ratelimit::deferral::publisher::LitePublisher;
use sluice_redis::RedisConn;
use std::net::SocketAddr;

pub struct QueueParts {
    pub redis: RedisDeployment,
    pub broker: RocketMq,
    /// llm-sim.
    pub backend: SocketAddr,
    pub publisher: LitePublisher,
    pub conn: RedisConn,
}

impl QueueParts {
    /// Starts every part on free loopback ports; panics when one cannot start.
    pub async fn start(kind: RedisKind, sim: sluice_llm_sim::SimConfig) -> QueueParts {
        crate::init_test_tracing();
        let redis = tokio::task::spawn_blocking(move || RedisDeployment::start(kind))
            .await
            .unwrap()
            .unwrap();
        let broker = start_broker().await;
        let backend = start_llm_sim(sim).await;
        let conn = redis_connection_at(&redis.url());
        let publisher = LitePublisher::connect(&broker.namesrv_addr(), PARENT, GROUP, conn.clone())
            .await
            .unwrap();
        QueueParts {
            redis,
            broker,
            backend,
            publisher,
            conn,
        }
    }
}
