//! The broker's liveness as its clients see it: one real round trip — send
//! a message to a probe LiteTopic and pop it back — within a deadline.
//!
//! rocketmq-rust 1.0.0's store can deadlock (lite-topic/README.md, "Broker
//! settings"): the process stays up and its ports stay open (a TCP check
//! passes), but it reads nothing from its sockets again. Only a request
//! that must be answered tells; this is the one a liveness check runs
//! (`sluice-rls broker-probe`, the chart's broker `livenessProbe`, the
//! watchdog of `scripts/broker`).
//!
//! The probe keeps to its own parent topic and consumer group
//! ([`ProbeOptions::default`]: `sluice-probe`), so deferred requests never
//! meet its messages. A message left behind by an earlier probe that ran
//! out of time is popped and dropped by the next one.

use crate::{LiteAdmin, LiteClient, LiteConfig, LiteConsumer, LiteError, LiteProducer};
use std::time::{Duration, Instant};

/// What a probe sends to, and waits for.
#[derive(Clone, Debug)]
pub struct ProbeOptions {
    /// Parent topic of the probe LiteTopic (created if missing).
    pub parent: String,
    /// Consumer group that pops it (created if missing, bound to `parent`).
    pub group: String,
    /// The probe LiteTopic.
    pub lite_topic: String,
    /// The whole round trip, connection included, within this.
    pub deadline: Duration,
}

impl Default for ProbeOptions {
    fn default() -> Self {
        ProbeOptions {
            parent: "sluice-probe".into(),
            group: "sluice-probe".into(),
            lite_topic: "probe".into(),
            deadline: Duration::from_secs(5),
        }
    }
}

/// A round trip that came back.
#[derive(Clone, Copy, Debug)]
pub struct ProbeReport {
    /// From the start (connection included) to the probe message popped.
    pub round_trip: Duration,
    /// Messages of earlier probes popped and dropped on the way.
    pub stale: usize,
}

/// Why the broker is not counted live.
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    /// Nothing wrong answered, but the round trip did not end in time: what
    /// a deadlocked broker looks like.
    #[error("no round trip within {0:?} (the broker does not answer)")]
    Deadline(Duration),
    /// A request failed (refused, timed out, no route).
    #[error("round trip failed: {0}")]
    Lite(#[from] LiteError),
}

/// How long a probe waits for the client runtime to stop after its round
/// trip (a frozen broker can hold its connections' tasks).
const SHUTDOWN_WAIT: Duration = Duration::from_secs(2);

/// One round trip through the broker(s) the name server at `namesrv` lists,
/// bounded by `options.deadline` (plus at most [`SHUTDOWN_WAIT`] to stop
/// the client afterwards).
pub async fn probe(namesrv: &str, options: &ProbeOptions) -> Result<ProbeReport, ProbeError> {
    let started = Instant::now();
    let mut config = LiteConfig::new(namesrv);
    config.request_timeout = options.deadline.min(Duration::from_secs(3));
    config.worker_threads = 1;
    let client = LiteClient::connect(config)?;
    let result = tokio::time::timeout(options.deadline, round_trip(&client, options)).await;
    // Parts left in an unfinished round trip were dropped with it.
    let _ = tokio::time::timeout(SHUTDOWN_WAIT, client.shutdown()).await;
    match result {
        Ok(Ok(stale)) => Ok(ProbeReport {
            round_trip: started.elapsed(),
            stale,
        }),
        Ok(Err(error)) => Err(error.into()),
        Err(_) => Err(ProbeError::Deadline(options.deadline)),
    }
}

/// Set-up (idempotent), send, pop until this probe's message is back.
/// Returns the stale messages dropped.
async fn round_trip(client: &LiteClient, options: &ProbeOptions) -> Result<usize, LiteError> {
    let admin = LiteAdmin::new(client).await?;
    let set_up = async {
        admin.ensure_parent_topic(&options.parent).await?;
        admin
            .ensure_consumer_group(&options.group, &options.parent)
            .await
    }
    .await;
    admin.shutdown().await;
    set_up?;
    let consumer = LiteConsumer::new(client, &options.group, &options.parent).await?;
    let producer = match LiteProducer::new(client, &format!("{}-producer", options.group)).await {
        Ok(producer) => producer,
        Err(error) => {
            consumer.shutdown().await;
            return Err(error);
        }
    };
    let result = send_and_pop(&consumer, &producer, options).await;
    producer.shutdown().await;
    let _ = consumer.finish_pops().await;
    consumer.shutdown().await;
    result
}

async fn send_and_pop(
    consumer: &LiteConsumer,
    producer: &LiteProducer,
    options: &ProbeOptions,
) -> Result<usize, LiteError> {
    let topic = options.lite_topic.as_str();
    consumer.subscribe(&[topic]).await?;
    let nonce = format!(
        "{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default()
    );
    producer
        .send(&options.parent, topic, nonce.as_bytes(), &[])
        .await?;
    let mut stale = 0;
    // The caller's deadline ends this loop.
    loop {
        let popped = consumer
            .pop(
                crate::MAX_POP_BATCH,
                Duration::from_secs(10),
                Duration::from_millis(500),
            )
            .await?;
        let mut found = false;
        for message in popped {
            // Free the LiteTopic for the next pop (and the next probe).
            let _ = consumer.release(&message.handle).await;
            if message.body.as_ref() == nonce.as_bytes() {
                found = true;
            } else {
                stale += 1;
            }
        }
        if found {
            return Ok(stale);
        }
    }
}
