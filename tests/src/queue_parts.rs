//! What a consumer test runs around the consumer: Redis, a RocketMQ broker,
//! the simulated model and the deferral endpoint's publisher.

use crate::redis_topologies::{RedisDeployment, RedisKind};
use crate::stack::{
    redis_connection_at, start_broker, start_consumer, start_llm_sim, ConsumerInstance,
    ConsumerSpec, GROUP, PARENT,
};
use crate::{retry_until, RocketMq};
use sluice_consumer::{keys, RunnerOptions, WorkItem};
use sluice_deferral::endpoint::Publisher;
use sluice_deferral::publisher::LitePublisher;
use sluice_redis::RedisConn;
use std::net::SocketAddr;
use std::time::Duration;

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

    /// A consumer instance of the group on its own broker client (as a
    /// separate process would have), quick to find buckets and to notice a
    /// member gone.
    pub async fn group_member(&self, spec: ConsumerSpec) -> ConsumerInstance {
        let spec = ConsumerSpec {
            options: RunnerOptions {
                discovery_interval: Duration::from_millis(200),
                membership_ttl: Duration::from_secs(2),
                ..spec.options
            },
            ..spec
        };
        start_consumer(&self.conn, &self.broker, self.backend, spec).await
    }

    /// Queues `work` as the endpoint does, on its tenant's and model's LiteTopic.
    pub async fn publish(&self, work: &WorkItem) {
        self.publisher
            .publish(
                &work.tenant,
                &work.model,
                &work.req_id,
                work.to_json().into(),
            )
            .await
            .unwrap();
    }

    /// Whether `req_id`'s answer is complete (its done marker is set).
    pub async fn is_done(&self, req_id: &str) -> bool {
        let mut conn = self.conn.clone();
        redis::cmd("EXISTS")
            .arg(keys::done(req_id))
            .query_async(&mut conn)
            .await
            .unwrap()
    }

    /// Waits until every id is answered; fails the test with the missing ones.
    pub async fn wait_done(&self, ids: &[String], within: Duration) -> Duration {
        let all_answered = async || {
            let mut unanswered = Vec::new();
            for id in ids {
                if !self.is_done(id).await {
                    unanswered.push(id.clone());
                }
            }
            if unanswered.is_empty() {
                Ok(())
            } else {
                Err(unanswered)
            }
        };
        retry_until(within, Duration::from_millis(50), all_answered)
            .await
            .1
    }
}
