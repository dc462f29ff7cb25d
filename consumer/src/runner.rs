//! The pop loop: LiteTopics in, paced model calls out.
//!
//! * **Discovery**: the deferral endpoint adds every LiteTopic it publishes to
//!   the Redis set `sluice:buckets`; each consumer subscribes to the ones it
//!   does not have yet and marks them `sluice:subscribed:<topic>` (the endpoint
//!   waits for that mark before the first publish to a new bucket: a LiteTopic
//!   subscription does not see messages sent before it).
//! * **Pacing**: for each popped message, [`admit`]; `Run` → a task calls the
//!   model and the LiteTopic is released for its next message; `Suspend(d)` →
//!   the broker stops delivering that LiteTopic for `d` while the message waits
//!   in a task of its own (never in this loop); `WaitLocally(d)` below the
//!   broker's suspend floor.
//! * **Retries**: this broker commits a LiteTopic position at pop time and
//!   never redelivers, so "run again later" means re-publishing the work item
//!   to its LiteTopic ourselves.

use crate::keys;
use crate::{
    admit, Admission, Consumer, Disposition, InFlightLimits, Metrics, Outcome, Pacer, WorkItem,
};
use redis::aio::ConnectionManager;
use sluice_litetopic::{lite_topic_name, LiteConsumer, LiteMessage, LiteProducer};
use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

/// A lease outlives its last refresh by this much.
const LEASE_TTL: Duration = Duration::from_secs(15);
/// Refresh period of a lease (and the longest single local wait).
const LEASE_REFRESH: Duration = Duration::from_secs(5);

#[derive(Clone, Debug)]
pub struct RunnerOptions {
    pub parent: String,
    pub pop_batch: u32,
    pub invisible: Duration,
    pub poll: Duration,
    pub discovery_interval: Duration,
    /// The broker's suspend granularity; shorter waits happen locally.
    pub suspend_floor: Duration,
    /// Give up re-publishing a request after this many attempts.
    pub max_attempts: u32,
    /// How often to ask the broker to re-create pop events for LiteTopics
    /// with waiting messages.
    pub redispatch_interval: Duration,
}

impl Default for RunnerOptions {
    fn default() -> Self {
        RunnerOptions {
            parent: "sluice-deferred".into(),
            // This broker suspends and releases a LiteTopic for every message a
            // pop returned from it: one message per pop keeps pacing exact.
            pop_batch: 1,
            invisible: Duration::from_secs(60),
            poll: Duration::from_secs(1),
            discovery_interval: Duration::from_millis(500),
            suspend_floor: Duration::from_millis(30),
            max_attempts: 5,
            redispatch_interval: Duration::from_secs(2),
        }
    }
}

/// A pop in flight (see [`Runner::run`]).
type PopFuture<'a> = std::pin::Pin<
    Box<
        dyn std::future::Future<Output = Result<Vec<LiteMessage>, sluice_litetopic::LiteError>>
            + Send
            + 'a,
    >,
>;

pub struct Runner {
    pub lite: Arc<LiteConsumer>,
    pub producer: Arc<LiteProducer>,
    pub consumer: Arc<Consumer>,
    pub pacer: Arc<Pacer>,
    pub limits: Arc<InFlightLimits>,
    pub redis: ConnectionManager,
    pub metrics: Arc<Metrics>,
    pub options: RunnerOptions,
}

impl Runner {
    /// Subscribe to buckets the endpoint announced that this consumer does not have yet.
    async fn discover(&self, known: &mut HashSet<String>) {
        let mut redis = self.redis.clone();
        let members: Vec<String> = match redis::cmd("SMEMBERS")
            .arg(keys::BUCKETS)
            .query_async(&mut redis)
            .await
        {
            Ok(m) => m,
            Err(error) => {
                tracing::warn!(%error, "bucket discovery: cannot read the bucket set");
                return;
            }
        };
        let new: Vec<&str> = members
            .iter()
            .map(String::as_str)
            .filter(|t| !known.contains(*t))
            .collect();
        if new.is_empty() {
            return;
        }
        if let Err(error) = self.lite.subscribe(&new).await {
            tracing::warn!(%error, "bucket discovery: subscribe failed; retrying next round");
            return;
        }
        for topic in &new {
            let _: Result<(), _> = redis::cmd("SET")
                .arg(keys::subscribed(topic))
                .arg(1)
                .arg("EX")
                .arg(3600)
                .query_async(&mut redis)
                .await;
            known.insert((*topic).to_string());
        }
        tracing::info!(
            count = new.len(),
            total = known.len(),
            "subscribed to new buckets"
        );
    }

    /// Runs until `shutdown` resolves; in-flight calls are left to finish in
    /// their tasks (their claims stay valid while they run).
    pub async fn run(self: Arc<Self>, shutdown: impl std::future::Future<Output = ()>) {
        tokio::pin!(shutdown);
        let mut known = HashSet::new();
        let mut discovery = tokio::time::interval(self.options.discovery_interval);
        discovery.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        // The pending pop survives the other branches: dropping a long poll
        // the broker has not answered yet loses what it answers with (the
        // broker commits at pop time and wakes a LiteTopic's pops only when a
        // message arrives), which left queued requests stranded.
        let mut pending_pop: Option<PopFuture<'_>> = None;
        // Messages that arrived while their LiteTopic was suspended get no pop
        // event of their own: ask the broker for events now and then.
        let mut redispatch = tokio::time::interval(self.options.redispatch_interval);
        redispatch.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            if pending_pop.is_none() && !known.is_empty() {
                pending_pop = Some(Box::pin(self.lite.pop(
                    self.options.pop_batch,
                    self.options.invisible,
                    self.options.poll,
                )));
            }
            tokio::select! {
                _ = &mut shutdown => break,
                _ = discovery.tick() => self.discover(&mut known).await,
                _ = redispatch.tick(), if !known.is_empty() => {
                    if let Err(error) = self.lite.redispatch().await {
                        tracing::debug!(%error, "trigger dispatch failed");
                    }
                }
                popped = async {
                    match pending_pop.as_mut() {
                        Some(pop) => pop.await,
                        None => std::future::pending().await,
                    }
                } => {
                    pending_pop = None;
                    match popped {
                        Ok(messages) => {
                            for message in messages {
                                self.clone().dispatch(message).await;
                            }
                        }
                        Err(error) => {
                            tracing::warn!(%error, "pop failed; backing off");
                            tokio::time::sleep(Duration::from_millis(200)).await;
                        }
                    }
                }
            }
        }
        tracing::info!("pop loop stopped");
    }

    async fn dispatch(self: Arc<Self>, message: LiteMessage) {
        // One round trip on the pop path: one fewer queued in this bucket
        // (the endpoint counted it in), and the request's lease taken.
        let item = WorkItem::from_json(&message.body);
        let mut pipe = redis::pipe();
        pipe.cmd("DECR")
            .arg(keys::backlog(&message.lite_topic))
            .ignore();
        if let Ok(item) = &item {
            pipe.cmd("SET")
                .arg(keys::lease(&item.req_id))
                .arg(1)
                .arg("PX")
                .arg(LEASE_TTL.as_millis() as u64)
                .ignore();
        }
        let mut redis = self.redis.clone();
        if let Err(error) = pipe.query_async::<()>(&mut redis).await {
            tracing::warn!(%error, "cannot record the pop (backlog, lease)");
        }
        let item = match item {
            Ok(item) => item,
            Err(error) => {
                // Nothing can answer it (no usable request id): drop it, free the topic.
                tracing::error!(%error, topic = %message.lite_topic, "unreadable work item dropped");
                let _ = self.lite.release(&message.handle).await;
                return;
            }
        };
        match admit(&self.limits, &self.pacer, &item, self.options.suspend_floor).await {
            Ok(Admission::Run(permit)) => {
                let _ = self.lite.release(&message.handle).await;
                tokio::spawn(async move {
                    self.clone().run_leased(item, permit).await;
                });
            }
            Ok(Admission::Suspend(wait)) => {
                // The broker holds the LiteTopic; this message waits in its own task.
                if let Err(error) = self.lite.suspend(&message.handle, wait).await {
                    tracing::debug!(%error, "suspend refused; holding locally only");
                }
                tokio::spawn(self.hold(item, wait));
            }
            Ok(Admission::WaitLocally(wait)) => {
                tokio::spawn(async move {
                    let handle = message.handle;
                    self.clone().hold(item, wait).await;
                    let _ = self.lite.release(&handle).await;
                });
            }
            Err(error) => {
                tracing::warn!(%error, req_id = %item.req_id, "pacing unavailable; holding the message");
                let wait = Duration::from_millis(200);
                let _ = self.lite.suspend(&message.handle, wait).await;
                tokio::spawn(self.hold(item, wait));
            }
        }
    }

    /// Wait, then admit again until the message may run; then run it.
    async fn hold(self: Arc<Self>, item: WorkItem, first_wait: Duration) {
        let mut wait = first_wait;
        loop {
            // Never sleep past a lease refresh.
            tokio::time::sleep(wait.min(LEASE_REFRESH)).await;
            self.refresh_lease(&item.req_id).await;
            match admit(&self.limits, &self.pacer, &item, Duration::ZERO).await {
                Ok(Admission::Run(permit)) => {
                    self.run_leased(item, permit).await;
                    return;
                }
                Ok(Admission::Suspend(next)) | Ok(Admission::WaitLocally(next)) => wait = next,
                Err(_) => wait = Duration::from_millis(200),
            }
        }
    }

    async fn refresh_lease(&self, req_id: &str) {
        let mut redis = self.redis.clone();
        let result: Result<(), _> = redis::cmd("SET")
            .arg(keys::lease(req_id))
            .arg(1)
            .arg("PX")
            .arg(LEASE_TTL.as_millis() as u64)
            .query_async(&mut redis)
            .await;
        if let Err(error) = result {
            tracing::warn!(%error, %req_id, "cannot refresh the lease");
        }
    }

    /// The call, with the lease kept alive until it ends (the `processing`
    /// claim guards against a second call; the lease only tells the endpoint
    /// the request is not lost).
    async fn run_leased(self: Arc<Self>, item: WorkItem, permit: crate::ModelPermit) {
        let outcome = {
            let call = self.consumer.process(&item);
            tokio::pin!(call);
            let mut refresh = tokio::time::interval(LEASE_REFRESH);
            loop {
                tokio::select! {
                    outcome = &mut call => break outcome,
                    _ = refresh.tick() => self.refresh_lease(&item.req_id).await,
                }
            }
        };
        drop(permit);
        let req_id = item.req_id.clone();
        // Settle first (a retry re-publishes), then drop the lease.
        self.settle(item, outcome).await;
        let mut redis = self.redis.clone();
        let _: Result<(), _> = redis::cmd("DEL")
            .arg(keys::lease(&req_id))
            .query_async(&mut redis)
            .await;
    }

    /// Terminal outcomes are done (the broker already committed the position);
    /// "run again later" re-publishes the item, since this broker never redelivers.
    async fn settle(&self, mut item: WorkItem, outcome: Outcome) {
        tracing::debug!(req_id = %item.req_id, outcome = outcome.as_str(), "processed");
        let Disposition::Retry { after } = outcome.disposition(self.consumer.idempotency_config())
        else {
            return;
        };
        item.attempt = item.attempt.saturating_add(1);
        if item.attempt >= self.options.max_attempts {
            let _ = self
                .consumer
                .give_up(
                    &item.req_id,
                    503,
                    "backend_unavailable",
                    "the model backend stayed unavailable; gave up",
                )
                .await;
            return;
        }
        tokio::time::sleep(after.unwrap_or(Duration::from_secs(1))).await;
        let topic = lite_topic_name(&item.tenant, &item.model);
        let body = match serde_json::to_vec(&item) {
            Ok(b) => b,
            Err(_) => return,
        };
        if let Err(error) = self
            .producer
            .send(
                &self.options.parent,
                &topic,
                &body,
                &[("reqId", item.req_id.as_str())],
            )
            .await
        {
            tracing::error!(%error, req_id = %item.req_id, "cannot re-publish; the endpoint's timeout will answer the client");
        }
    }
}
