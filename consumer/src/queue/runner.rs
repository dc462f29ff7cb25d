//! The pop loop: LiteTopics in, paced model calls out.
//!
//! * **Discovery and assignment**: every publish (the deferral endpoint's, and
//!   this runner's re-publishes) adds the LiteTopic to the Redis set
//!   [`crate::keys::BUCKETS`] and stamps its activity (`sluice_contract::bookkeeping`).
//!   Each instance heartbeats into the group's member set and subscribes to
//!   the buckets it owns by rendezvous hashing over the live members
//!   ([`crate::sharing::membership`]); a departed member's buckets are picked up within
//!   one membership TTL (at once when it left gracefully). A subscribed
//!   bucket is marked [`crate::keys::subscribed`]: the endpoint waits for that mark
//!   before publishing to a bucket nobody subscribes yet.
//! * **Idle buckets**: a bucket without publishes for `idle_ttl` and nothing
//!   queued is retired by its owner (removed from the set, unsubscribed; the
//!   broker never expires subscriptions by itself), its queue deleted at the
//!   broker (`reclaim_retired`: the broker keeps an LMQ's files forever
//!   otherwise) and its metric series dropped.
//! * **Pacing**: for each popped message, [`gate`]; `Run` → a task calls the
//!   model and the LiteTopic is released for its next message once the
//!   call's request is written (`HeldBack`); `Suspend(d)` →
//!   the broker stops delivering that LiteTopic for `d` while the message waits
//!   in a task of its own (never in this loop); `WaitLocally(d)` below the
//!   broker's suspend floor; `Busy` (the model at its in-flight cap) → the
//!   message keeps its LiteTopic and starts when a call of its model ends
//!   (its FIFO turn on the model's slots).
//! * **Retries**: this broker commits a LiteTopic position at pop time and
//!   never redelivers, so "run again later" means re-publishing the work item
//!   to its LiteTopic ourselves.
//! * **Shutdown**: stop popping, leave the group, unsubscribe; messages held
//!   for their slot are published back to their LiteTopic (another instance
//!   takes them); running calls get `shutdown_grace` to finish. A call cut
//!   off after that is answered `interrupted` through the endpoint's lease
//!   watch by another instance — never by calling the model again.

use crate::call::processor::CallOptions;
use crate::call::sent::OnSent;
use crate::queue::gate::FairTurn;
use crate::sharing::control_loop::Adaptive;
use crate::sharing::fair::{CallCharge, Sending};
use crate::sharing::membership::{self, Assignment, Membership, DEFAULT_MEMBERSHIP_TTL};
use crate::{
    gate, Disposition, InFlightLimits, Metrics, Outcome, Pacer, Processor, StartGate, WorkItem,
};
use sluice_contract::bookkeeping::{self, Bookkeeping, CapValues};
use sluice_litetopic::{lite_topic_name, LiteConsumer, LiteMessage, LiteProducer, MessageHandle};
use sluice_redis::RedisConn;
use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tracing::Instrument;

/// How long a failed re-publish is retried (a Redis or broker failover).
const REPUBLISH_RETRY_FOR: Duration = Duration::from_secs(30);

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
    /// A member whose heartbeat is older than this is gone; its buckets move.
    pub membership_ttl: Duration,
    /// A bucket without publishes for this long and nothing queued is retired.
    pub idle_ttl: Duration,
    /// How often the owner looks for idle buckets.
    pub retire_interval: Duration,
    /// Delete a retired bucket's queue at the broker (its consume-queue
    /// files): without it, every bucket ever created keeps its files.
    pub reclaim_retired: bool,
    /// At shutdown, how long running calls may take to finish.
    pub shutdown_grace: Duration,
}

impl Default for RunnerOptions {
    fn default() -> Self {
        RunnerOptions {
            parent: "sluice-deferred".into(),
            // This broker suspends and releases a LiteTopic for every message a
            // pop returned from it: one message per pop keeps pacing exact.
            pop_batch: 1,
            invisible: Duration::from_secs(60),
            poll: Duration::from_millis(400),
            discovery_interval: Duration::from_millis(500),
            suspend_floor: Duration::from_millis(30),
            max_attempts: 5,
            membership_ttl: DEFAULT_MEMBERSHIP_TTL,
            idle_ttl: Duration::from_secs(600),
            retire_interval: Duration::from_secs(30),
            reclaim_retired: true,
            shutdown_grace: Duration::from_secs(30),
        }
    }
}

/// What a [`Runner`] is made of.
pub struct RunnerParts {
    pub lite: Arc<LiteConsumer>,
    pub producer: Arc<LiteProducer>,
    pub processor: Arc<Processor>,
    pub pacer: Arc<Pacer>,
    pub limits: Arc<InFlightLimits>,
    pub redis: RedisConn,
    pub metrics: Arc<Metrics>,
    /// This instance's id in the group (unique per process).
    pub id: String,
    /// Fair sharing and adaptive controllers (default: neither).
    pub adaptive: Adaptive,
}

pub struct Runner {
    lite: Arc<LiteConsumer>,
    producer: Arc<LiteProducer>,
    processor: Arc<Processor>,
    pacer: Arc<Pacer>,
    limits: Arc<InFlightLimits>,
    redis: RedisConn,
    metrics: Arc<Metrics>,
    adaptive: Adaptive,
    membership: Membership,
    /// The shared bucket bookkeeping (re-publishes).
    bookkeeping: Bookkeeping,
    options: RunnerOptions,
    /// Flips to true when the pop loop stops: held messages are handed back.
    stopping: tokio::sync::watch::Sender<bool>,
    /// Held messages and running calls.
    active: AtomicUsize,
    /// The buckets this instance is subscribed to.
    owned: std::sync::Mutex<HashSet<String>>,
    /// A popped request's lease (`lease:{id}`): refreshed every heartbeat
    /// interval, lapsing when its claim would go stale (the idempotency
    /// settings' `ClaimTiming`), so the endpoint sees a dead consumer's
    /// requests within the same bound whether their calls started or not.
    lease_ttl: Duration,
    /// Refresh period of a lease (and the longest single local wait).
    lease_refresh: Duration,
}

/// Counts a task in [`Runner::active`] while it lives.
struct Active(Arc<Runner>);

impl Active {
    fn new(runner: &Arc<Runner>) -> Self {
        runner.active.fetch_add(1, Ordering::SeqCst);
        Active(runner.clone())
    }
}

impl Drop for Active {
    fn drop(&mut self) {
        self.0.active.fetch_sub(1, Ordering::SeqCst);
    }
}

/// What the fair queue gave a call as it started (nothing for a model
/// that is not fair-shared): `level`, its tenant's service level (added to
/// the backend's `server_priority`); `charge`, its charges to its tenant's
/// attained service (a queue ordered by it).
#[derive(Default)]
struct FairStart {
    level: u32,
    charge: Option<CallCharge>,
}

/// What keeps a bucket's next message back until this one's request is on
/// its way to the model server (`call::sent`): its LiteTopic (the next
/// message is not popped) and its lane in the fair queue (not chosen).
/// Let go only then, so the bucket's calls reach the server in its order.
struct HeldBack {
    topic: Option<MessageHandle>,
    lane: Option<Sending>,
}

impl HeldBack {
    fn topic(handle: MessageHandle) -> HeldBack {
        HeldBack {
            topic: Some(handle),
            lane: None,
        }
    }
}

/// What happened to a message held for its slot.
enum Held {
    Ran,
    HandedBack,
}

/// How a held message waits before it is gated again.
#[derive(Clone, Copy, Debug)]
enum Pause {
    /// Not at all.
    Now,
    /// Its bucket's pacing slot (or a retry after a pacing error) is this far.
    For(Duration),
    /// Its model is at its in-flight cap: until a slot frees (its
    /// [`crate::pacing::limits::Slots::turn`]), this long at most.
    Slot(Duration),
}

/// How a [`Pause`] ended.
enum Paused {
    Elapsed,
    /// A freed slot woke the message (its armed turn is used up).
    Woken,
    Stop,
}

/// A message's place in its model's queue for a freed slot.
type Turn<'a> = Option<std::pin::Pin<Box<tokio::sync::futures::Notified<'a>>>>;

/// Messages of one bucket in a model's fair queue at most. One is not
/// enough: the fair queue can only pick a bucket that has a message
/// waiting, and a bucket whose only message just started has none until
/// its next one is popped — when several slots free at once (a cohort of
/// answers ending together), each bucket would get one of them whatever
/// its weight. With a few queued per bucket, a heavy tenant takes its
/// share of such a burst. Bounds the memory per bucket.
const FAIR_LANE_DEPTH: usize = 4;

/// Subscribe calls carry at most this many LiteTopics (a cold start may own
/// thousands).
const SUBSCRIBE_CHUNK: usize = 500;

impl Runner {
    pub fn new(parts: RunnerParts, options: RunnerOptions) -> Arc<Self> {
        let membership = Membership::new(&parts.id, options.membership_ttl, parts.redis.clone());
        let liveness = parts.processor.idempotency_config().claim_timing();
        Arc::new(Runner {
            lease_ttl: liveness.stale_after(),
            lease_refresh: liveness.heartbeat_interval(),
            lite: parts.lite,
            producer: parts.producer,
            processor: parts.processor,
            pacer: parts.pacer,
            limits: parts.limits,
            redis: parts.redis,
            metrics: parts.metrics,
            adaptive: parts.adaptive,
            membership,
            bookkeeping: Bookkeeping::default(),
            options,
            stopping: tokio::sync::watch::channel(false).0,
            active: AtomicUsize::new(0),
            owned: std::sync::Mutex::new(HashSet::new()),
        })
    }

    pub fn id(&self) -> &str {
        self.membership.id()
    }

    /// The buckets this instance owns and is subscribed to (sorted).
    pub fn owned(&self) -> Vec<String> {
        let mut owned: Vec<String> = self.owned_set().iter().cloned().collect();
        owned.sort();
        owned
    }

    /// Held messages plus running calls.
    pub fn active(&self) -> usize {
        self.active.load(Ordering::SeqCst)
    }

    fn owned_set(&self) -> std::sync::MutexGuard<'_, HashSet<String>> {
        // A panic elsewhere cannot leave the set half-updated: take it anyway.
        self.owned
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// One membership and discovery round: beat, read the live members and
    /// the bucket set, subscribe to this instance's new share and drop what
    /// moved to another member.
    async fn discover(&self, assignment: &mut Assignment) {
        let members = match self.membership.beat().await {
            Ok(beat) => {
                if beat.rejoined {
                    self.mark_owned_subscribed().await;
                }
                beat.members
            }
            Err(error) => {
                tracing::warn!(%error, "membership heartbeat failed; keeping the current buckets");
                return;
            }
        };
        let mut redis = self.redis.clone();
        let topics = match bookkeeping::known_buckets(&mut redis).await {
            Ok(m) => m,
            Err(error) => {
                tracing::warn!(%error, "bucket discovery: cannot read the bucket set");
                return;
            }
        };
        let mine = assignment.share(self.id(), &members, &topics);
        self.metrics
            .group
            .members
            .set(assignment.members().len() as i64);
        let (new, gone): (Vec<String>, Vec<String>) = {
            let owned = self.owned_set();
            (
                mine.difference(&owned).cloned().collect(),
                owned.difference(&mine).cloned().collect(),
            )
        };
        if !gone.is_empty() {
            let refs: Vec<&str> = gone.iter().map(String::as_str).collect();
            match self.lite.unsubscribe(&refs).await {
                Ok(()) => {
                    let mut owned = self.owned_set();
                    for topic in &gone {
                        owned.remove(topic);
                        self.metrics.forget_bucket(topic);
                    }
                    tracing::info!(
                        count = gone.len(),
                        "handed buckets to other members or dropped retired ones"
                    );
                }
                Err(error) => tracing::warn!(%error, "unsubscribe failed; retrying next round"),
            }
        }
        for chunk in new.chunks(SUBSCRIBE_CHUNK) {
            let refs: Vec<&str> = chunk.iter().map(String::as_str).collect();
            if let Err(error) = self.lite.subscribe(&refs).await {
                tracing::warn!(%error, "bucket discovery: subscribe failed; retrying next round");
                break;
            }
            if let Err(error) = bookkeeping::mark_subscribed(&mut redis, chunk).await {
                tracing::warn!(%error, "cannot mark buckets subscribed; the endpoint waits a little on them");
            }
            self.owned_set().extend(chunk.iter().cloned());
            tracing::info!(count = chunk.len(), "subscribed to buckets");
        }
        self.metrics
            .group
            .buckets_owned
            .set(self.owned_set().len() as i64);
    }

    /// This instance's member entry was gone (Redis lost its data): its
    /// buckets' subscription marks are gone with it, and nothing else writes
    /// them again while it keeps the buckets — without them the endpoint
    /// waited its first-subscribe wait (3 s) on every publish to them
    /// (chaos run with an empty Redis restart, issue 29).
    async fn mark_owned_subscribed(&self) {
        let owned: Vec<String> = self.owned_set().iter().cloned().collect();
        if owned.is_empty() {
            return;
        }
        let mut redis = self.redis.clone();
        for chunk in owned.chunks(SUBSCRIBE_CHUNK) {
            if let Err(error) = bookkeeping::mark_subscribed(&mut redis, chunk).await {
                tracing::warn!(%error, "cannot mark buckets subscribed again; the endpoint waits a little on them");
                return;
            }
        }
        tracing::info!(
            count = owned.len(),
            "rejoined the group (Redis lost the member set): marked the owned buckets subscribed again"
        );
    }

    /// Retire this instance's buckets that saw no publish for `idle_ttl` and
    /// have nothing queued.
    async fn retire_idle(&self) {
        let cutoff = crate::now_ms().saturating_sub(self.options.idle_ttl.as_millis() as u64);
        let mut redis = self.redis.clone();
        let candidates = match membership::idle_candidates(&mut redis, cutoff).await {
            Ok(c) => c,
            Err(error) => {
                tracing::debug!(%error, "cannot list idle buckets");
                return;
            }
        };
        let mine: Vec<String> = {
            let owned = self.owned_set();
            candidates
                .into_iter()
                .filter(|t| owned.contains(t))
                .collect()
        };
        let reclaim = self.options.reclaim_retired;
        for topic in mine {
            match membership::retire_if_idle(&mut redis, &topic, cutoff, reclaim).await {
                Ok(true) => {
                    self.drop_retired(&mut redis, &topic).await;
                    self.owned_set().remove(&topic);
                    self.metrics.forget_bucket(&topic);
                    self.metrics.group.buckets_retired.inc();
                    tracing::info!(%topic, reclaimed = reclaim, "idle bucket retired");
                }
                Ok(false) => {}
                Err(error) => tracing::debug!(%error, %topic, "cannot retire bucket"),
            }
        }
        self.metrics
            .group
            .buckets_owned
            .set(self.owned_set().len() as i64);
    }

    /// Unsubscribe from a bucket just retired and, with `reclaim_retired`,
    /// delete its queue at the broker; then lift its reclaim mark, so the
    /// endpoint may publish to it again (creating it anew).
    async fn drop_retired(&self, redis: &mut RedisConn, topic: &str) {
        if !self.options.reclaim_retired {
            if let Err(error) = self.lite.unsubscribe(&[topic]).await {
                tracing::warn!(%error, %topic, "retired bucket: unsubscribe failed");
            }
            return;
        }
        match self.lite.delete_lite_topics(&[topic]).await {
            Ok(()) => {
                self.metrics.group.buckets_reclaimed.inc();
            }
            Err(error) => {
                self.metrics.error("reclaim");
                tracing::warn!(%error, %topic, "retired bucket: deleting its queue at the broker failed; its files stay");
            }
        }
        if let Err(error) = membership::end_reclaim(redis, topic).await {
            tracing::warn!(%error, %topic, "cannot lift the reclaim mark; it lapses by itself");
        }
    }

    /// Pops until `shutdown` resolves, then shuts down gracefully (see the
    /// module docs); returns once nothing is held or running, or after
    /// `shutdown_grace`.
    pub async fn run(self: Arc<Self>, shutdown: impl std::future::Future<Output = ()>) {
        tokio::pin!(shutdown);
        let (halt, halted) = tokio::sync::watch::channel(false);
        let housekeeping = tokio::spawn(self.clone().housekeeping(halted));
        // The controllers run as long as the pop loop.
        let _controllers = self.adaptive.controls.as_ref().map(|c| c.start(self.id()));
        loop {
            if self.owned_set().is_empty() {
                tokio::select! {
                    _ = &mut shutdown => break,
                    _ = tokio::time::sleep(Duration::from_millis(50)) => continue,
                }
            }
            // `POP_NEVER_CANCELLED`: the broker commits a LiteTopic position when
            // it answers a pop, so a pop future dropped after its request went
            // out loses the messages of its answer. A pop in flight is always
            // awaited to the end, even when shutdown comes first.
            let pop = self.lite.pop(
                self.options.pop_batch,
                self.options.invisible,
                self.options.poll,
            );
            tokio::pin!(pop);
            let (popped, stop) = tokio::select! {
                popped = &mut pop => (popped, false),
                _ = &mut shutdown => (pop.await, true),
            };
            match popped {
                Ok(messages) => {
                    // Each message on its own task: the next pop goes out
                    // while this one's bookkeeping, gate and release run.
                    // The order inside a bucket holds: its LiteTopic gives
                    // no next message before this one releases it.
                    for message in messages {
                        let active = Active::new(&self);
                        let runner = self.clone();
                        tokio::spawn(async move {
                            runner.dispatch(message).await;
                            drop(active);
                        });
                    }
                }
                Err(error) => {
                    tracing::warn!(%error, "pop failed; backing off");
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
            }
            if stop {
                break;
            }
        }
        let _ = halt.send(true);
        let _ = housekeeping.await;
        self.shut_down().await;
    }

    /// Membership, discovery and idle retirement, beside the
    /// pop loop (never interrupting a pop).
    async fn housekeeping(self: Arc<Self>, mut halted: tokio::sync::watch::Receiver<bool>) {
        let mut assignment = Assignment::default();
        let mut discovery = tokio::time::interval(self.options.discovery_interval);
        discovery.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut retire = tokio::time::interval(self.options.retire_interval);
        retire.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        retire.tick().await;
        loop {
            tokio::select! {
                // Also ends when `run` is dropped (its sender goes away).
                _ = halted.changed() => break,
                _ = discovery.tick() => self.discover(&mut assignment).await,
                _ = retire.tick() => self.retire_idle().await,
            }
        }
    }

    async fn shut_down(&self) {
        tracing::info!(
            active = self.active(),
            "stopping: leaving the group, handing back held messages"
        );
        let _ = self.stopping.send(true);
        if let Err(error) = self.membership.leave().await {
            tracing::warn!(%error, "cannot leave the member set; the others take over after its TTL");
        }
        let owned: Vec<String> = self.owned_set().drain().collect();
        let refs: Vec<&str> = owned.iter().map(String::as_str).collect();
        if let Err(error) = self.lite.unsubscribe(&refs).await {
            tracing::warn!(%error, "unsubscribe at shutdown failed");
        }
        self.metrics.group.buckets_owned.set(0);
        let deadline = Instant::now() + self.options.shutdown_grace;
        while self.active() > 0 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        match self.active() {
            0 => tracing::info!("pop loop stopped; nothing left running"),
            n => tracing::warn!(
                running = n,
                "shutdown grace over with calls still running; their clients get `interrupted` via another instance"
            ),
        }
    }

    /// Everything done with one popped message (the tasks it starts
    /// included) runs in its request's span.
    async fn dispatch(self: Arc<Self>, message: LiteMessage) {
        let item = WorkItem::from_json(&message.body);
        let (span, traced) = match &item {
            Ok(item) => (
                sluice_contract::request_span!(&item.req_id, item.trace.as_ref()),
                // In the trace: a child of the endpoint's request span.
                sluice_contract::trace_span!("consumer.message", req_id = %item.req_id),
            ),
            Err(_) => (tracing::Span::none(), tracing::Span::none()),
        };
        if let Ok(item) = &item {
            sluice_contract::join_trace(&traced, item.trace.as_ref());
        }
        self.dispatch_item(message, item)
            .instrument(traced)
            .instrument(span)
            .await
    }

    async fn dispatch_item(
        self: Arc<Self>,
        message: LiteMessage,
        item: Result<WorkItem, sluice_contract::WorkItemError>,
    ) {
        // One round trip on the pop path: one fewer queued in this bucket
        // (the endpoint counted it in), and the request's lease taken.
        let req_id = item.as_ref().ok().map(|item| item.req_id.as_str());
        let mut redis = self.redis.clone();
        let seen_before =
            match bookkeeping::record_pop(&mut redis, &message.lite_topic, req_id, self.lease_ttl)
                .instrument(sluice_contract::trace_span!("consumer.pop"))
                .await
            {
                Ok(seen) => seen,
                Err(error) => {
                    tracing::warn!(%error, "cannot record the pop (backlog, lease)");
                    false
                }
            };
        let item = match item {
            Ok(item) => {
                self.metrics
                    .remember_bucket(&message.lite_topic, &item.tenant, &item.model);
                item
            }
            Err(error) => {
                // Nothing can answer it (no usable request id): drop it, free the topic.
                tracing::error!(%error, topic = %message.lite_topic, "unreadable work item dropped");
                self.release(&message.handle).await;
                return;
            }
        };
        if seen_before && self.settled_without_call(&item, &message.handle).await {
            return;
        }
        if self.fair_shared(&item.model) {
            let runner = self.clone();
            self.spawn_active(runner.hold_fair(item, message.handle));
            return;
        }
        match gate(&self.limits, &self.pacer, &item, self.options.suspend_floor).await {
            Ok(StartGate::Run(permit)) => {
                let runner = self.clone();
                let held = HeldBack::topic(message.handle);
                self.spawn_active(runner.run_leased(item, permit, FairStart::default(), held));
            }
            Ok(StartGate::Busy(_)) => {
                // The model is at its cap: the message keeps its LiteTopic
                // (the bucket's next message is not popped before it starts)
                // and starts when a call of its model ends.
                let runner = self.clone();
                self.spawn_active(runner.hold(item, Pause::Now, Some(message.handle)));
            }
            Ok(StartGate::Suspend(wait)) => {
                // The broker holds the LiteTopic; this message waits in its own task.
                if let Err(error) = self.lite.suspend(&message.handle, wait).await {
                    tracing::debug!(%error, "suspend refused; holding locally only");
                }
                let runner = self.clone();
                self.spawn_active(runner.hold(item, Pause::For(wait), None));
            }
            Ok(StartGate::WaitLocally(wait)) => {
                let runner = self.clone();
                self.spawn_active(runner.hold(item, Pause::For(wait), Some(message.handle)));
            }
            Err(error) => {
                tracing::warn!(%error, req_id = %item.req_id, "pacing unavailable; holding the message");
                let wait = Duration::from_millis(200);
                let _ = self.lite.suspend(&message.handle, wait).await;
                let runner = self.clone();
                self.spawn_active(runner.hold(item, Pause::For(wait), None));
            }
        }
    }

    /// Runs `work` on a task of its own, counted in [`Runner::active`], in
    /// the current span (the request's).
    fn spawn_active(
        self: &Arc<Self>,
        work: impl std::future::Future<Output = ()> + Send + 'static,
    ) {
        let active = Active::new(self);
        tokio::spawn(
            async move {
                work.await;
                drop(active);
            }
            .in_current_span(),
        );
    }

    /// Lets the bucket's next message start: this one's request is on its way.
    async fn let_go(&self, held: HeldBack) {
        drop(held.lane);
        if let Some(handle) = held.topic {
            self.release(&handle).await;
        }
    }

    /// Frees the message's LiteTopic for its next message. A failure is
    /// logged, not fatal: the broker frees it when the invisible time ends.
    async fn release(&self, handle: &MessageHandle) {
        if let Err(error) = self.lite.release(handle).await {
            tracing::warn!(%error, "could not release a LiteTopic; the broker frees it when its invisible time ends");
        }
    }

    /// A request claimed or answered before this pop (its consumer died
    /// mid-call, or a duplicate) is answered at once when that needs no
    /// model call — an `interrupted` client does not wait for a pacing slot
    /// it will not use. True when settled (the topic released, the lease
    /// dropped).
    async fn settled_without_call(&self, item: &WorkItem, handle: &MessageHandle) -> bool {
        if self.processor.settle_without_call(item).await.is_none() {
            return false;
        }
        self.release(handle).await;
        let mut redis = self.redis.clone();
        let _ = bookkeeping::drop_lease(&mut redis, &item.req_id).await;
        true
    }

    /// Wait, then gate again until the message may run; then run it. A
    /// `handle` still holding the LiteTopic (a short local wait, or a model
    /// at its cap) is released once the message runs or is handed back.
    async fn hold(self: Arc<Self>, item: WorkItem, first: Pause, handle: Option<MessageHandle>) {
        let held = self
            .clone()
            .hold_until_admitted(item, first, handle.as_ref())
            .await;
        if let Held::HandedBack = held {
            self.metrics.handed_back.inc();
            if let Some(handle) = handle {
                self.release(&handle).await;
            }
        }
    }

    async fn hold_until_admitted(
        self: Arc<Self>,
        item: WorkItem,
        first: Pause,
        handle: Option<&MessageHandle>,
    ) -> Held {
        let started = Instant::now();
        let mut stopping = self.stopping.subscribe();
        let slots = self.limits.slots(&item.model);
        // Armed before the gate looks at the cap, kept while the cap stays
        // full (so the message keeps its place), dropped otherwise.
        let mut turn: Turn<'_> = None;
        let mut pause = first;
        // The lease was taken at pop.
        let mut last_refresh = Instant::now();
        loop {
            match self.pause(pause, &mut turn, &mut stopping).await {
                Paused::Stop => {
                    self.hand_back(item).await;
                    return Held::HandedBack;
                }
                Paused::Woken => turn = None,
                Paused::Elapsed => {}
            }
            // Only when due: a round trip before every check made a fast
            // bucket's slots late (≈2 ms per slot, −4 % at 20/s with burst 1).
            if last_refresh.elapsed() >= self.lease_refresh {
                self.refresh_lease(&item.req_id).await;
                last_refresh = Instant::now();
            }
            if turn.is_some() && slots.as_deref().is_some_and(|s| s.full()) {
                continue; // the safety-net bound passed, the cap is still full
            }
            if turn.is_none() {
                turn = slots.as_deref().map(|s| s.armed_turn());
            }
            match gate(&self.limits, &self.pacer, &item, Duration::ZERO).await {
                Ok(StartGate::Run(permit)) => {
                    drop(turn);
                    self.metrics
                        .hold_seconds
                        .observe(started.elapsed().as_secs_f64());
                    // The bucket's next message may be popped once this
                    // one's request is on its way.
                    let held = HeldBack {
                        topic: handle.cloned(),
                        lane: None,
                    };
                    self.run_leased(item, permit, FairStart::default(), held)
                        .await;
                    return Held::Ran;
                }
                Ok(StartGate::Busy(bound)) => pause = Pause::Slot(bound),
                Ok(StartGate::Suspend(next)) | Ok(StartGate::WaitLocally(next)) => {
                    turn = None;
                    pause = Pause::For(next);
                }
                Err(_) => {
                    turn = None;
                    pause = Pause::For(Duration::from_millis(200));
                }
            }
        }
    }

    /// One wait of a held message: never past a lease refresh, cut short
    /// by shutdown and, for [`Pause::Slot`], by a freed slot.
    async fn pause(
        &self,
        pause: Pause,
        turn: &mut Turn<'_>,
        stopping: &mut tokio::sync::watch::Receiver<bool>,
    ) -> Paused {
        let (wait, slot) = match pause {
            Pause::Now if *stopping.borrow() => return Paused::Stop,
            Pause::Now => return Paused::Elapsed,
            Pause::For(wait) => (wait, None),
            Pause::Slot(bound) => (bound, turn.as_mut()),
        };
        tokio::select! {
            _ = tokio::time::sleep(wait.min(self.lease_refresh)) => Paused::Elapsed,
            _ = async {
                match slot {
                    Some(turn) => turn.as_mut().await,
                    None => std::future::pending().await,
                }
            } => Paused::Woken,
            // (the guard `wait_for` returns is not Send: keep only a bool)
            changed = stopping.wait_for(|stop| *stop) => match changed.is_ok() {
                true => Paused::Stop,
                false => Paused::Elapsed,
            },
        }
    }

    fn fair_shared(&self, model: &str) -> bool {
        self.adaptive
            .fair
            .as_ref()
            .is_some_and(|fair| fair.enabled_for(model))
    }

    /// A message of a fair-shared model waits for its turn ([`crate::sharing::fair`]),
    /// then runs; handed back at shutdown. It holds its LiteTopic while
    /// [`FAIR_LANE_DEPTH`] or more of its bucket's messages wait before it,
    /// so a bucket has at most that many messages in the fair queue; below
    /// that it releases the LiteTopic at once, so its bucket's next message
    /// can be popped and queued behind it (the lane keeps the publish
    /// order) while it waits.
    async fn hold_fair(self: Arc<Self>, item: WorkItem, handle: MessageHandle) {
        let Some(fair) = self.adaptive.fair.clone() else {
            return;
        };
        let ticket = fair.enqueue(
            &item.tenant,
            &item.model,
            item.priority,
            item.estimated_tokens,
        );
        let queue = ticket.queue().clone();
        let started = Instant::now();
        let mut stopping = self.stopping.subscribe();
        let mut last_refresh = Instant::now();
        let mut topic = Some(handle);
        loop {
            if topic.is_some() && ticket.ahead_in_lane() < FAIR_LANE_DEPTH {
                if let Some(handle) = topic.take() {
                    self.release(&handle).await;
                }
            }
            // Armed before looking, so a change while looking is not missed.
            let queue_changed = queue.changed().notified();
            tokio::pin!(queue_changed);
            queue_changed.as_mut().enable();
            let slots = self.limits.slots(&item.model);
            let mut slot_freed = slots.as_ref().map(|s| Box::pin(s.freed().notified()));
            if let Some(freed) = &mut slot_freed {
                freed.as_mut().enable();
            }
            let wait = match crate::queue::gate::fair_turn(
                &self.limits,
                &self.pacer,
                &item,
                &ticket,
            )
            .await
            {
                FairTurn::Run(permit) => {
                    // Taken while it still waits in its lane, as fairness_bench does.
                    let level = ticket.service_level();
                    let prompt = crate::call::usage::prompt_estimate(&item);
                    let (lane, charge) = ticket.started(prompt);
                    self.metrics
                        .hold_seconds
                        .observe(started.elapsed().as_secs_f64());
                    let held = HeldBack {
                        topic: topic.take(),
                        lane: Some(lane),
                    };
                    let fair = FairStart { level, charge };
                    self.run_leased(item, permit, fair, held).await;
                    return;
                }
                FairTurn::Wait(wait) => wait,
            };
            let stop = tokio::select! {
                _ = &mut queue_changed => false,
                _ = async {
                    match &mut slot_freed {
                        Some(freed) => freed.as_mut().await,
                        None => std::future::pending().await,
                    }
                } => false,
                _ = tokio::time::sleep(wait.min(self.lease_refresh)) => false,
                changed = stopping.wait_for(|stop| *stop) => changed.is_ok(),
            };
            if stop {
                drop(ticket);
                self.hand_back(item).await;
                self.metrics.handed_back.inc();
                if let Some(handle) = topic.take() {
                    self.release(&handle).await;
                }
                return;
            }
            if last_refresh.elapsed() >= self.lease_refresh {
                self.refresh_lease(&item.req_id).await;
                last_refresh = Instant::now();
            }
        }
    }

    /// Shutdown: a held message goes back to its LiteTopic (for the member
    /// that takes the bucket over) and its lease is dropped. If the publish
    /// fails, the lease lapses and the endpoint publishes it again.
    async fn hand_back(&self, item: WorkItem) {
        match self.publish_again(&item).await {
            Ok(()) => {
                let mut redis = self.redis.clone();
                let _ = bookkeeping::drop_lease(&mut redis, &item.req_id).await;
                tracing::info!(req_id = %item.req_id, "held message handed back");
            }
            Err(error) => {
                tracing::warn!(%error, req_id = %item.req_id, "cannot hand back; the endpoint re-publishes it when its lease lapses");
            }
        }
    }

    /// Publish `item` to its LiteTopic again, with the same bookkeeping as
    /// the endpoint's publish (`sluice_contract::bookkeeping`): the bucket
    /// announced first (registered in the bucket set if it was retired
    /// meanwhile, activity stamped; no cap, the request was admitted
    /// already), then the send, then the backlog count.
    async fn publish_again(&self, item: &WorkItem) -> Result<(), String> {
        let topic = lite_topic_name(&item.tenant, &item.model);
        let body = serde_json::to_vec(item).map_err(|e| e.to_string())?;
        let mut redis = self.redis.clone();
        self.bookkeeping
            .announce_after_reclaim(
                &mut redis,
                &item.tenant,
                &topic,
                &CapValues::UNBOUNDED,
                crate::now_ms,
                |_| {},
            )
            .await
            .map_err(|e| e.to_string())?;
        self.producer
            .send(
                &self.options.parent,
                &topic,
                &body,
                &[("reqId", item.req_id.as_str())],
            )
            .await
            .map_err(|e| e.to_string())?;
        if let Err(error) = bookkeeping::count_publish(&mut redis, &topic).await {
            tracing::warn!(%error, %topic, "re-published, but the backlog count was not updated");
        }
        Ok(())
    }

    async fn refresh_lease(&self, req_id: &str) {
        let mut redis = self.redis.clone();
        if let Err(error) = bookkeeping::refresh_lease(&mut redis, req_id, self.lease_ttl).await {
            tracing::warn!(%error, %req_id, "cannot refresh the lease");
        }
    }

    /// The call, with the lease kept alive until it ends (the `processing`
    /// claim guards against a second call; the lease only tells the endpoint
    /// the request is not lost).
    async fn run_leased(
        self: Arc<Self>,
        item: WorkItem,
        permit: crate::ModelPermit,
        fair: FairStart,
        held: HeldBack,
    ) {
        let FairStart { level, charge } = fair;
        let charge = charge.map(Arc::new);
        let on_sent = if held.topic.is_none() && held.lane.is_none() {
            OnSent::default() // nothing held back (a suspended message)
        } else {
            let (on_sent, sent) = OnSent::new();
            let runner = self.clone();
            self.spawn_active(async move {
                // Fired when the request is written, or dropped when none goes out.
                let _ = sent.await;
                runner.let_go(held).await;
            });
            on_sent
        };
        // The refresh runs beside the call, both polled by one `select!`.
        // Awaiting a refresh in a `select!` arm left the call unpolled
        // meanwhile: a call parked mid-way through a Sentinel master lookup
        // held the connection's resolver lock, the refresh waited for that
        // lock, and the whole consumer's Redis stood still after a failover.
        let refresh_forever = async {
            let mut refresh = tokio::time::interval(self.lease_refresh);
            loop {
                refresh.tick().await;
                self.refresh_lease(&item.req_id).await;
            }
        };
        let outcome = tokio::select! {
            outcome = self.processor.process_with(&item, CallOptions {
                level,
                on_sent,
                observer: charge.clone().map(|c| c as Arc<dyn crate::call::OutputObserver>),
            }) => outcome,
            never = refresh_forever => never,
        };
        drop(permit);
        if let Some(controls) = &self.adaptive.controls {
            controls.observe(&item.model, &outcome).await;
        }
        let usage =
            crate::pacing::accounting::settle(&self.pacer, &self.metrics, &item, &outcome).await;
        if let Some(charge) = charge {
            // The order by attained service counts what the tenant received.
            charge.settle(usage.map(|u| (u.prompt_tokens, u.completion_tokens)));
        }
        let req_id = item.req_id.clone();
        // Settle first (a retry re-publishes), then drop the lease.
        self.settle(item, outcome).await;
        let mut redis = self.redis.clone();
        let _ = bookkeeping::drop_lease(&mut redis, &req_id).await;
    }

    /// Terminal outcomes are done (the broker already committed the position);
    /// "run again later" re-publishes the item, since this broker never redelivers.
    async fn settle(&self, mut item: WorkItem, outcome: Outcome) {
        tracing::debug!(req_id = %item.req_id, outcome = outcome.as_str(), "processed");
        let Disposition::Retry { after } = outcome.disposition(self.processor.idempotency_config())
        else {
            return;
        };
        item.attempt = item.attempt.saturating_add(1);
        if item.attempt >= self.options.max_attempts {
            let (code, message) = outcome.give_up_reason();
            tracing::warn!(req_id = %item.req_id, code = code.as_str(), %message, "attempts ran out; gave up");
            let _ = self
                .processor
                .give_up(&item.req_id, 503, code, &message)
                .await;
            return;
        }
        tokio::time::sleep(after.unwrap_or_else(|| outcome.retry_delay(item.attempt))).await;
        // A re-publish fails while Redis or the broker fails over: keep
        // trying for a while (the client is still waiting) before leaving
        // the request to the endpoint's lease watch and timeout.
        let mut delay = Duration::from_millis(250);
        let deadline = tokio::time::Instant::now() + REPUBLISH_RETRY_FOR;
        loop {
            match self.publish_again(&item).await {
                Ok(()) => return,
                Err(error) if tokio::time::Instant::now() + delay < deadline => {
                    tracing::warn!(%error, req_id = %item.req_id, retry_in = ?delay, "cannot re-publish yet");
                    tokio::time::sleep(delay).await;
                    delay = (delay * 2).min(Duration::from_secs(4));
                }
                Err(error) => {
                    tracing::error!(%error, req_id = %item.req_id, "cannot re-publish; the endpoint's timeout will answer the client");
                    return;
                }
            }
        }
    }
}
