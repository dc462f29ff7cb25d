//! Shared set-up of the integration tests: a real name server + broker
//! (sluice-testkit's `RocketMq`) and a client wired to it.

#![allow(dead_code)]

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use sluice_litetopic::{
    LiteAdmin, LiteClient, LiteConfig, LiteConsumer, LiteError, LiteMessage, LiteProducer,
};
use sluice_testkit::RocketMq;

pub const INVISIBLE: Duration = Duration::from_secs(30);

pub fn init_tracing() {
    sluice_testkit::init_test_tracing();
}

/// A broker, a client, and a parent topic + consumer group set up on it.
pub struct Env {
    pub mq: RocketMq,
    pub client: LiteClient,
    pub admin: LiteAdmin,
    pub parent: String,
    pub group: String,
}

static SEQ: AtomicU32 = AtomicU32::new(0);

impl Env {
    pub async fn start() -> Env {
        init_tracing();
        let mq = RocketMq::start().expect("start the RocketMQ broker (run ./scripts/setup)");
        let client = LiteClient::connect(LiteConfig::new(mq.namesrv_addr())).expect("client");
        let admin = LiteAdmin::new(&client).await.expect("admin");
        let n = SEQ.fetch_add(1, Ordering::Relaxed);
        let parent = format!("sluice-test-{n}");
        let group = format!("sluice-test-group-{n}");
        admin
            .ensure_parent_topic(&parent)
            .await
            .expect("parent topic");
        admin
            .ensure_consumer_group(&group, &parent)
            .await
            .expect("consumer group");
        Env {
            mq,
            client,
            admin,
            parent,
            group,
        }
    }

    /// [`Env::start`], with a producer and a consumer subscribed to
    /// `lite_topics`.
    pub async fn start_subscribed(lite_topics: &[&str]) -> (Env, LiteProducer, LiteConsumer) {
        let env = Env::start().await;
        let producer = env.producer().await;
        let consumer = env.consumer().await;
        consumer.subscribe(lite_topics).await.expect("subscribe");
        (env, producer, consumer)
    }

    pub async fn producer(&self) -> LiteProducer {
        LiteProducer::new(&self.client, "sluice-test-producer")
            .await
            .expect("producer")
    }

    pub async fn consumer(&self) -> LiteConsumer {
        LiteConsumer::new(&self.client, &self.group, &self.parent)
            .await
            .expect("consumer")
    }

    pub async fn shutdown(self) {
        self.admin.shutdown().await;
        self.client.shutdown().await;
    }

    /// Shuts down `consumer`, `producer` (its last handle) and then this.
    pub async fn shutdown_with(
        self,
        consumer: LiteConsumer,
        producer: impl Into<Arc<LiteProducer>>,
    ) {
        consumer.shutdown().await;
        Arc::into_inner(producer.into())
            .expect("the producer's last handle")
            .shutdown()
            .await;
        self.shutdown().await;
    }
}

/// Send `bodies` to LiteTopic `lite_topic` of `parent`, one after the other.
pub async fn send_each(producer: &LiteProducer, parent: &str, lite_topic: &str, bodies: &[&[u8]]) {
    for body in bodies {
        producer
            .send(parent, lite_topic, body, &[])
            .await
            .expect("send");
    }
}

/// Pop until `want` messages arrived or `timeout` passed, releasing each.
pub async fn pop_n(
    consumer: &LiteConsumer,
    want: usize,
    timeout: Duration,
) -> Result<Vec<LiteMessage>, LiteError> {
    let deadline = Instant::now() + timeout;
    let mut got = Vec::new();
    while got.len() < want && Instant::now() < deadline {
        let batch = consumer
            .pop(16, INVISIBLE, Duration::from_millis(500))
            .await?;
        for msg in batch {
            consumer.release(&msg.handle).await?;
            got.push(msg);
        }
    }
    Ok(got)
}

/// Pop exactly one message (max 1), waiting up to `timeout`; not released.
pub async fn pop_one(consumer: &LiteConsumer, timeout: Duration) -> LiteMessage {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        let batch = consumer
            .pop(1, INVISIBLE, Duration::from_secs(5))
            .await
            .expect("pop");
        if let Some(msg) = batch.into_iter().next() {
            return msg;
        }
    }
    panic!("no message within {timeout:?}");
}
