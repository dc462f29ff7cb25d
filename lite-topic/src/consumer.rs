//! The LiteTopic consumer rocketmq-client-rust 1.0.0 lacks: dynamic
//! subscription, long-poll pop, and suspend / release of one LiteTopic.
//!
//! Broker behaviour this is written against (rocketmq-rust broker 1.0.0,
//! read in its sources and checked by this crate's tests):
//! * A pop takes messages from the LiteTopics that have *events* for this
//!   client (a message arrived while subscribed), and **commits the position
//!   at pop time**: a popped message is never delivered again, whatever
//!   happens next (at-most-once).
//! * After a pop, the popped LiteTopic is *blocked* for this group until the
//!   pop's invisible time passes, or until [`LiteConsumer::release`] /
//!   [`LiteConsumer::suspend`] sets another time. So one LiteTopic has at
//!   most one batch in flight, and a suspend paces exactly that LiteTopic.
//!
//! The workarounds for the broker's and client's pitfalls are named in
//! capitals where they are applied; `README.md` lists them.

use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap, HashMap, HashSet};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use cheetah_string::CheetahString;
use rocketmq_model::common::lite::{LiteSubscriptionAction, LiteSubscriptionDTO};
use rocketmq_model::common::message::{MessageConst, STRING_HASH_SET};
use rocketmq_model::common::sys_flag::message_sys_flag::MessageSysFlag;
use rocketmq_protocol::code::request_code::RequestCode;
use rocketmq_protocol::common::message::message_decoder;
use rocketmq_protocol::protocol::body::lite_subscription_ctl_request_body::LiteSubscriptionCtlRequestBody;
use rocketmq_protocol::protocol::header::change_invisible_time_request_header::ChangeInvisibleTimeRequestHeader;
use rocketmq_protocol::protocol::header::delete_topic_request_header::DeleteTopicRequestHeader;
use rocketmq_protocol::protocol::header::extra_info_util::ExtraInfoUtil;
use rocketmq_protocol::protocol::header::lite_subscription_ctl_request_header::LiteSubscriptionCtlRequestHeader;
use rocketmq_protocol::protocol::header::pop_lite_message_request_header::PopLiteMessageRequestHeader;
use rocketmq_protocol::protocol::header::pop_lite_message_response_header::PopLiteMessageResponseHeader;
use rocketmq_protocol::protocol::header::trigger_lite_dispatch_request_header::TriggerLiteDispatchRequestHeader;
use rocketmq_protocol::protocol::remoting_command::RemotingCommand;
use rocketmq_protocol::rpc::rpc_request_header::RpcRequestHeader;
use rocketmq_protocol::rpc::topic_request_header::TopicRequestHeader;
use tracing::{debug, instrument, trace, warn};

use crate::client::{broker_error, now_millis, BrokerTarget, LiteClient, Remoting};
use crate::error::{code, LiteError};
use crate::naming::{lmq_name, validate_group, validate_lite_topic, validate_parent_topic};
use crate::producer::{MessageId, BROKER_INTERNAL_PROPERTIES};

/// Most messages one pop may return (broker limit).
pub const MAX_POP_BATCH: u32 = 32;

/// `POP_TIME_SKEW`: how far below the popTime of the pop answer the popTime
/// the broker recorded for a LiteTopic may lie. The broker stamps each
/// LiteTopic of a pop with its clock when it reads it, and the answer with
/// its clock when it is composed, and ChangeInvisibleTime must quote the
/// first exactly (else "stale"). The gap is 0 to a few ms.
const MAX_POP_TIME_SKEW_MS: i64 = 40;

/// The broker ends a long poll this long before `born_time + poll_time`
/// (`EARLY_WAKE_MILLIS` in its pop-lite deadline code); a poll time at or
/// under it means "answer now".
const BROKER_EARLY_WAKE_MS: u64 = 50;

/// `WAKE_ON_SUSPEND_EXPIRY`: how long before a suspend ends the long poll is
/// cut short, to wait for the end locally and pop at once then.
const SUSPEND_END_LEAD_MS: u64 = 25;

/// Tries of a ChangeInvisibleTime answered "busy" (the LiteTopic's lock is
/// held by a pop that is reading it right now).
const BUSY_RETRIES: u32 = 20;

/// `REDISPATCH_WHEN_QUIET`: after an empty pop, at most this often...
const REDISPATCH_QUIET: Duration = Duration::from_millis(500);
/// ...and in any case this often, for LiteTopics stuck while others flow.
const REDISPATCH_EVERY: Duration = Duration::from_secs(5);

/// One message taken from a LiteTopic.
#[derive(Debug, Clone)]
pub struct LiteMessage {
    /// The LiteTopic it was sent to.
    pub lite_topic: String,
    pub body: Bytes,
    /// The user properties set at send (system properties left out).
    pub properties: HashMap<String, String>,
    pub message_id: MessageId,
    /// Position in its LiteTopic (`INNER_MULTI_QUEUE_OFFSET`), from 0.
    pub queue_offset: i64,
    /// When the producer sent it, ms since the epoch (producer clock).
    pub born_timestamp_ms: i64,
    /// When the broker stored it, ms since the epoch (broker clock).
    pub store_timestamp_ms: i64,
    /// What [`LiteConsumer::suspend`] and [`LiteConsumer::release`] need.
    pub handle: MessageHandle,
}

/// The receipt of a popped message: names its LiteTopic and the pop it came
/// in, for [`LiteConsumer::suspend`] and [`LiteConsumer::release`]. Valid
/// until the pop's invisible time passes.
#[derive(Debug, Clone)]
pub struct MessageHandle {
    lite_topic: String,
    queue_offset: i64,
    /// popTime of the pop answer (broker clock, ms).
    pop_time: i64,
    invisible_time_ms: i64,
    revive_qid: i32,
    /// Local time the answer arrived: the handle expires
    /// `invisible_time_ms` after it at the latest.
    received_at: Instant,
    /// `POP_TIME_SKEW`: the offset below `pop_time` that worked for another
    /// message of the same pop, tried first.
    skew_hint: Arc<AtomicI64>,
}

impl MessageHandle {
    pub fn lite_topic(&self) -> &str {
        &self.lite_topic
    }

    pub fn queue_offset(&self) -> i64 {
        self.queue_offset
    }

    /// Whether the pop's invisible time has passed by the local clock (the
    /// broker has then freed the LiteTopic on its own).
    pub fn is_expired(&self) -> bool {
        self.received_at.elapsed() >= Duration::from_millis(self.invisible_time_ms.max(0) as u64)
    }
}

/// Counters of one consumer, for metrics and tests.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConsumerStats {
    pub pops: u64,
    pub empty_pops: u64,
    pub messages: u64,
    pub suspends: u64,
    pub releases: u64,
    /// ChangeInvisibleTime retries with an earlier popTime (`POP_TIME_SKEW`).
    pub pop_time_retries: u64,
    /// Largest popTime offset that was needed, ms.
    pub max_pop_time_skew_ms: u64,
    /// Pops whose poll was cut, or that waited locally, for a suspend's end
    /// (`WAKE_ON_SUSPEND_EXPIRY`).
    pub polls_capped: u64,
}

#[derive(Default)]
struct Counters {
    pops: AtomicU64,
    empty_pops: AtomicU64,
    messages: AtomicU64,
    suspends: AtomicU64,
    releases: AtomicU64,
    pop_time_retries: AtomicU64,
    max_pop_time_skew_ms: AtomicU64,
    polls_capped: AtomicU64,
}

/// A consumer of the LiteTopics of one parent topic, in one consumer group,
/// for one explicit set of LiteTopics.
///
/// Share it behind an `Arc`: one task calls [`LiteConsumer::pop`] in a loop
/// (pops run one at a time), any task may call [`LiteConsumer::suspend`],
/// [`LiteConsumer::release`] and the subscription calls meanwhile, without
/// waiting for a pending long poll (`ONE_HANDLE_PER_POLLER`).
pub struct LiteConsumer {
    group: String,
    parent: String,
    client_id: String,
    broker: BrokerTarget,
    /// Long-poll pops only.
    poll: Remoting,
    /// Subscriptions, suspends, releases.
    control: Remoting,
    request_timeout: Duration,
    subscriptions: Mutex<BTreeSet<String>>,
    subscription_version: AtomicI64,
    /// `WAKE_ON_SUSPEND_EXPIRY`: when the suspends in force end.
    suspend_ends: Mutex<BinaryHeap<Reverse<Instant>>>,
    /// `REDISPATCH_WHEN_QUIET`: when the broker was last asked.
    last_redispatch: Mutex<Instant>,
    counters: Counters,
}

impl LiteConsumer {
    /// A consumer in `group` (see [`crate::LiteAdmin::ensure_consumer_group`])
    /// of `parent`'s LiteTopics, subscribed to none yet.
    pub async fn new(client: &LiteClient, group: &str, parent: &str) -> Result<Self, LiteError> {
        validate_group(group)?;
        validate_parent_topic(parent)?;
        let control = client.remoting("consumer-control").await?;
        let broker = match control.topic_masters(parent).await {
            Ok(mut masters) if masters.len() == 1 => masters.remove(0),
            Ok(masters) => {
                control.shutdown().await;
                return Err(LiteError::Unsupported(format!(
                    "parent topic {parent} is served by {} brokers; this consumer pops from one",
                    masters.len()
                )));
            }
            Err(e) => {
                control.shutdown().await;
                return Err(e);
            }
        };
        let poll = match client.remoting("consumer-poll").await {
            Ok(poll) => poll,
            Err(e) => {
                control.shutdown().await;
                return Err(e);
            }
        };
        let client_id = format!(
            "sluice-{}-{}",
            std::process::id(),
            &uuid::Uuid::new_v4().simple().to_string()[..12]
        );
        debug!(group, parent, %client_id, broker = %broker.name, "LiteTopic consumer ready");
        Ok(LiteConsumer {
            group: group.to_owned(),
            parent: parent.to_owned(),
            client_id,
            broker,
            poll,
            control,
            request_timeout: client.config().request_timeout,
            subscriptions: Mutex::new(BTreeSet::new()),
            subscription_version: AtomicI64::new(0),
            suspend_ends: Mutex::new(BinaryHeap::new()),
            last_redispatch: Mutex::new(Instant::now()),
            counters: Counters::default(),
        })
    }

    /// The id this consumer is known by at the broker.
    pub fn client_id(&self) -> &str {
        &self.client_id
    }

    pub fn group(&self) -> &str {
        &self.group
    }

    pub fn parent(&self) -> &str {
        &self.parent
    }

    /// The LiteTopics this consumer is subscribed to.
    pub fn subscriptions(&self) -> Vec<String> {
        lock(&self.subscriptions).iter().cloned().collect()
    }

    pub fn stats(&self) -> ConsumerStats {
        let c = &self.counters;
        ConsumerStats {
            pops: c.pops.load(Ordering::Relaxed),
            empty_pops: c.empty_pops.load(Ordering::Relaxed),
            messages: c.messages.load(Ordering::Relaxed),
            suspends: c.suspends.load(Ordering::Relaxed),
            releases: c.releases.load(Ordering::Relaxed),
            pop_time_retries: c.pop_time_retries.load(Ordering::Relaxed),
            max_pop_time_skew_ms: c.max_pop_time_skew_ms.load(Ordering::Relaxed),
            polls_capped: c.polls_capped.load(Ordering::Relaxed),
        }
    }

    /// Add LiteTopics to this consumer's set (PartialAdd). Messages already
    /// waiting in them are delivered too.
    #[instrument(skip(self), fields(client_id = %self.client_id))]
    pub async fn subscribe(&self, lite_topics: &[&str]) -> Result<(), LiteError> {
        let set = checked_set(lite_topics)?;
        if set.is_empty() {
            return Ok(());
        }
        self.subscription_ctl(LiteSubscriptionAction::PartialAdd, set.clone())
            .await?;
        lock(&self.subscriptions).extend(set);
        // `TRIGGER_DISPATCH_ON_SUBSCRIBE`: the broker only creates a pop
        // event when a message arrives for a subscribed LiteTopic; messages
        // already waiting would sit there until the next one arrives. Ask it
        // to create events for every subscribed LiteTopic with messages.
        self.trigger_dispatch().await
    }

    /// Remove LiteTopics from this consumer's set (PartialRemove). Call it
    /// for idle LiteTopics: the broker never expires subscriptions.
    #[instrument(skip(self), fields(client_id = %self.client_id))]
    pub async fn unsubscribe(&self, lite_topics: &[&str]) -> Result<(), LiteError> {
        let set = checked_set(lite_topics)?;
        if set.is_empty() {
            return Ok(());
        }
        self.subscription_ctl(LiteSubscriptionAction::PartialRemove, set.clone())
            .await?;
        let mut subscriptions = lock(&self.subscriptions);
        for topic in &set {
            subscriptions.remove(topic);
        }
        Ok(())
    }

    /// Delete idle LiteTopics at the broker, reclaiming their disk: each is
    /// unsubscribed, then its queue `%LMQ%$<parent>$<lite>` is deleted with
    /// `DeleteTopicInBroker` (the broker drops the queue's consume-queue
    /// files and every group's offset in it). The next message sent to the
    /// LiteTopic creates it again, from offset 0.
    ///
    /// Only for LiteTopics nobody sends to any more: a message still queued
    /// in one, or sent while the request is under way, is lost. The caller
    /// makes sure of that (Sluice: its retire script and reclaim mark).
    #[instrument(skip(self), fields(client_id = %self.client_id))]
    pub async fn delete_lite_topics(&self, lite_topics: &[&str]) -> Result<(), LiteError> {
        let set = checked_set(lite_topics)?;
        if set.is_empty() {
            return Ok(());
        }
        self.unsubscribe(lite_topics).await?;
        for lite_topic in &set {
            let header = DeleteTopicRequestHeader {
                topic: CheetahString::from_string(lmq_name(&self.parent, lite_topic.as_str())),
                topic_request_header: None,
            };
            let request =
                RemotingCommand::create_request_command(RequestCode::DeleteTopicInBroker, header);
            self.control
                .invoke_ok("delete lite topic", &self.broker.addr, request)
                .await?;
        }
        Ok(())
    }

    /// Replace this consumer's whole set (CompleteAdd), e.g. after a broker
    /// restart (the broker keeps subscriptions in memory only).
    #[instrument(skip(self), fields(client_id = %self.client_id))]
    pub async fn set_subscriptions(&self, lite_topics: &[&str]) -> Result<(), LiteError> {
        let set = checked_set(lite_topics)?;
        self.subscription_ctl(LiteSubscriptionAction::CompleteAdd, set.clone())
            .await?;
        *lock(&self.subscriptions) = set.into_iter().collect();
        self.trigger_dispatch().await
    }

    /// Pop up to `max` (1..=32) messages of the subscribed LiteTopics,
    /// waiting up to `poll_time` for one to arrive. Each returned message's
    /// LiteTopic stays blocked for this group for `invisible_time` (or until
    /// [`LiteConsumer::release`] / [`LiteConsumer::suspend`]).
    ///
    /// An empty result is normal (nothing arrived, or a suspend ended: see
    /// `WAKE_ON_SUSPEND_EXPIRY`); call again.
    ///
    /// **Not cancel-safe** (`POP_NEVER_CANCELLED`): the broker commits the
    /// positions of what it answers, so dropping this future after the
    /// request went out (e.g. in a `select!` beside a timer) loses those
    /// messages for good. Await every pop to its end.
    #[instrument(skip(self), level = "trace", fields(client_id = %self.client_id))]
    pub async fn pop(
        &self,
        max: u32,
        invisible_time: Duration,
        poll_time: Duration,
    ) -> Result<Vec<LiteMessage>, LiteError> {
        let messages = self.pop_once(max, invisible_time, poll_time).await?;
        self.redispatch_if_due(messages.is_empty()).await;
        Ok(messages)
    }

    /// `REDISPATCH_WHEN_QUIET`: this broker can leave a released LiteTopic
    /// that still holds messages un-ready for the client until a new message
    /// arrives in it (1,000 LiteTopics × 2 queued messages: 400 delivered,
    /// then nothing). After an empty pop (at most every 500 ms), and every
    /// 5 s in any case, ask it to make every subscribed LiteTopic with
    /// waiting messages ready again: one control request.
    async fn redispatch_if_due(&self, empty: bool) {
        let due = {
            let mut last = lock(&self.last_redispatch);
            let since = last.elapsed();
            let due = (empty && since >= REDISPATCH_QUIET) || since >= REDISPATCH_EVERY;
            if due {
                *last = Instant::now();
            }
            due
        };
        if due && !lock(&self.subscriptions).is_empty() {
            if let Err(error) = self.trigger_dispatch().await {
                tracing::debug!(%error, "redispatch failed; next time");
            }
        }
    }

    async fn pop_once(
        &self,
        max: u32,
        invisible_time: Duration,
        poll_time: Duration,
    ) -> Result<Vec<LiteMessage>, LiteError> {
        if max == 0 || max > MAX_POP_BATCH {
            return Err(LiteError::InvalidArgument(format!(
                "max must be 1..={MAX_POP_BATCH}, got {max}"
            )));
        }
        let invisible_ms = invisible_time.as_millis() as i64;
        if invisible_ms <= 0 {
            return Err(LiteError::InvalidArgument(
                "invisible time must be at least 1 ms".into(),
            ));
        }
        let (wait, poll_ms) = self.plan_poll(poll_time);
        if !wait.is_zero() {
            tokio::time::sleep(wait).await;
        }
        let header = PopLiteMessageRequestHeader {
            client_id: CheetahString::from_slice(&self.client_id),
            consumer_group: CheetahString::from_slice(&self.group),
            topic: CheetahString::from_slice(&self.parent),
            max_msg_num: max as i32,
            invisible_time: invisible_ms,
            poll_time: poll_ms as i64,
            born_time: now_millis(),
            // `FRESH_ATTEMPT_ID`: the broker lets a pop with the same attempt
            // id as the LiteTopic's last pop through its block; a new id per
            // pop keeps the one-batch-in-flight rule.
            attempt_id: Some(CheetahString::from_string(
                uuid::Uuid::new_v4().simple().to_string(),
            )),
            rpc: Some(self.rpc_header()),
        };
        let request = RemotingCommand::create_request_command(RequestCode::PopLiteMessage, header);
        let timeout = Duration::from_millis(poll_ms) + self.request_timeout;
        let mut response = self
            .poll
            .invoke("pop lite message", &self.broker.addr, request, timeout)
            .await?;
        let received_at = Instant::now();
        self.counters.pops.fetch_add(1, Ordering::Relaxed);
        match response.code() {
            code::SUCCESS => {}
            code::POLLING_TIMEOUT | code::PULL_NOT_FOUND | code::POLLING_FULL => {
                self.counters.empty_pops.fetch_add(1, Ordering::Relaxed);
                return Ok(Vec::new());
            }
            _ => {
                return Err(broker_error(
                    "pop lite message",
                    &self.broker.addr,
                    &response,
                ))
            }
        }
        let messages = decode_pop_answer(&mut response, received_at)?;
        self.counters
            .messages
            .fetch_add(messages.len() as u64, Ordering::Relaxed);
        if messages.is_empty() {
            self.counters.empty_pops.fetch_add(1, Ordering::Relaxed);
        }
        trace!(count = messages.len(), "popped");
        Ok(messages)
    }

    /// Stop delivering `handle`'s LiteTopic to this group for `duration`,
    /// counted from now; other LiteTopics keep flowing. This is how a pacing
    /// policy spaces one tenant × model without holding a task.
    #[instrument(skip(self, handle), fields(lite_topic = %handle.lite_topic, offset = handle.queue_offset))]
    pub async fn suspend(
        &self,
        handle: &MessageHandle,
        duration: Duration,
    ) -> Result<(), LiteError> {
        let ms = duration.as_millis() as i64;
        if handle.is_expired() {
            return Err(stale(handle));
        }
        self.change_invisible_time(handle, ms, true).await?;
        self.counters.suspends.fetch_add(1, Ordering::Relaxed);
        if ms > 0 {
            lock(&self.suspend_ends).push(Reverse(Instant::now() + duration));
        }
        Ok(())
    }

    /// Free `handle`'s LiteTopic now, so its next message can be popped.
    /// Every message of a batch must be released (or the batch suspended)
    /// before the LiteTopic moves on; an expired handle is already free.
    ///
    /// `RELEASE_NOT_ACK`: AckMessage with a LiteTopic answers success but
    /// leaves the LiteTopic blocked; ChangeInvisibleTime to 0 frees it.
    #[instrument(skip(self, handle), fields(lite_topic = %handle.lite_topic, offset = handle.queue_offset))]
    pub async fn release(&self, handle: &MessageHandle) -> Result<(), LiteError> {
        if handle.is_expired() {
            return Ok(());
        }
        match self.change_invisible_time(handle, 0, false).await {
            Ok(()) => {}
            Err(LiteError::StaleHandle { .. }) if handle.is_expired() => {}
            Err(e) => return Err(e),
        }
        self.counters.releases.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Drop this consumer's subscriptions at the broker (CompleteRemove: the
    /// broker never expires them) and close its connections.
    pub async fn shutdown(self) {
        let dto = self.dto(LiteSubscriptionAction::CompleteRemove, HashSet::new());
        if let Err(e) = self.send_subscription_ctl(dto).await {
            warn!(error = %e, client_id = %self.client_id, "could not drop LiteTopic subscriptions");
        }
        self.poll.shutdown().await;
        self.control.shutdown().await;
    }

    /// `WAKE_ON_SUSPEND_EXPIRY`: the broker does not wake a waiting pop when
    /// a suspend ends. While a suspended LiteTopic has messages waiting, it
    /// ends a waiting pop, empty, about every 20 ms ("empty-pop churn"), and
    /// ends a poll on a timer of the same grain: the suspended LiteTopic
    /// would come up to ~20 ms late. So a long poll is cut to end just
    /// before the earliest suspend in force ends (`SUSPEND_END_LEAD_MS`;
    /// the broker answers `BROKER_EARLY_WAKE_MS` before a poll's end), and
    /// the pop after it waits here for that end and asks with no poll at
    /// all, which the broker answers at once.
    ///
    /// Returns (local wait, poll time in ms).
    fn plan_poll(&self, poll_time: Duration) -> (Duration, u64) {
        let requested = poll_time.as_millis() as u64;
        let now = Instant::now();
        let mut ends = lock(&self.suspend_ends);
        while ends.peek().is_some_and(|Reverse(end)| *end <= now) {
            ends.pop();
        }
        let Some(Reverse(next_end)) = ends.peek() else {
            return (Duration::ZERO, requested);
        };
        let until_end = next_end.duration_since(now);
        let until_end_ms = until_end.as_millis() as u64;
        if until_end_ms <= SUSPEND_END_LEAD_MS {
            self.counters.polls_capped.fetch_add(1, Ordering::Relaxed);
            return (until_end, 0);
        }
        let capped = until_end_ms - SUSPEND_END_LEAD_MS + BROKER_EARLY_WAKE_MS;
        if capped < requested {
            self.counters.polls_capped.fetch_add(1, Ordering::Relaxed);
            (Duration::ZERO, capped)
        } else {
            (Duration::ZERO, requested)
        }
    }

    /// ChangeInvisibleTime on the LiteTopic of `handle`, with the
    /// `POP_TIME_SKEW` and busy-lock retries.
    async fn change_invisible_time(
        &self,
        handle: &MessageHandle,
        invisible_ms: i64,
        suspend: bool,
    ) -> Result<(), LiteError> {
        let hint = handle.skew_hint.load(Ordering::Relaxed);
        let skews = std::iter::once(hint).chain((0..=MAX_POP_TIME_SKEW_MS).filter(|k| *k != hint));
        let mut tried = 0u64;
        for skew in skews {
            match self
                .change_invisible_time_once(handle, handle.pop_time - skew, invisible_ms, suspend)
                .await?
            {
                CitOutcome::Done => {
                    handle.skew_hint.store(skew, Ordering::Relaxed);
                    if tried > 0 {
                        self.counters
                            .pop_time_retries
                            .fetch_add(tried, Ordering::Relaxed);
                    }
                    self.counters
                        .max_pop_time_skew_ms
                        .fetch_max(skew as u64, Ordering::Relaxed);
                    return Ok(());
                }
                CitOutcome::Stale => {
                    tried += 1;
                    if handle.is_expired() {
                        break;
                    }
                }
            }
        }
        self.counters
            .pop_time_retries
            .fetch_add(tried, Ordering::Relaxed);
        Err(stale(handle))
    }

    async fn change_invisible_time_once(
        &self,
        handle: &MessageHandle,
        pop_time: i64,
        invisible_ms: i64,
        suspend: bool,
    ) -> Result<CitOutcome, LiteError> {
        let extra_info = ExtraInfoUtil::build_extra_info_with_offset(
            handle.queue_offset,
            pop_time,
            handle.invisible_time_ms,
            handle.revive_qid,
            &self.parent,
            &self.broker.name,
            0,
            handle.queue_offset,
        );
        let mut busy = 0;
        loop {
            let header = ChangeInvisibleTimeRequestHeader {
                consumer_group: CheetahString::from_slice(&self.group),
                topic: CheetahString::from_slice(&self.parent),
                queue_id: 0,
                extra_info: CheetahString::from_slice(&extra_info),
                offset: handle.queue_offset,
                invisible_time: invisible_ms,
                lite_topic: Some(CheetahString::from_slice(&handle.lite_topic)),
                suspend,
                topic_request_header: Some(TopicRequestHeader {
                    rpc_request_header: Some(self.rpc_header()),
                    lo: None,
                }),
            };
            let request = RemotingCommand::create_request_command(
                RequestCode::ChangeMessageInvisibleTime,
                header,
            );
            let response = self
                .control
                .invoke(
                    "change invisible time",
                    &self.broker.addr,
                    request,
                    self.request_timeout,
                )
                .await?;
            match response.code() {
                code::SUCCESS => return Ok(CitOutcome::Done),
                // "ordered Lite ownership is missing or stale"
                code::MESSAGE_ILLEGAL => return Ok(CitOutcome::Stale),
                // "ordered Lite queue is owned by another in-flight request":
                // a pop is reading this LiteTopic right now.
                code::SYSTEM_BUSY if busy < BUSY_RETRIES => {
                    busy += 1;
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
                _ => {
                    return Err(broker_error(
                        "change invisible time",
                        &self.broker.addr,
                        &response,
                    ))
                }
            }
        }
    }

    async fn subscription_ctl(
        &self,
        action: LiteSubscriptionAction,
        set: Vec<String>,
    ) -> Result<(), LiteError> {
        let set = set
            .into_iter()
            .map(CheetahString::from_string)
            .collect::<HashSet<_>>();
        let dto = self.dto(action, set);
        self.send_subscription_ctl(dto).await
    }

    fn dto(
        &self,
        action: LiteSubscriptionAction,
        set: HashSet<CheetahString>,
    ) -> LiteSubscriptionDTO {
        let mut dto = LiteSubscriptionDTO::new();
        dto.action = action;
        dto.client_id = CheetahString::from_slice(&self.client_id);
        dto.group = CheetahString::from_slice(&self.group);
        dto.topic = CheetahString::from_slice(&self.parent);
        dto.lite_topic_set = set;
        dto.version = self.subscription_version.fetch_add(1, Ordering::Relaxed) + 1;
        dto
    }

    async fn send_subscription_ctl(&self, dto: LiteSubscriptionDTO) -> Result<(), LiteError> {
        let mut body = LiteSubscriptionCtlRequestBody::new();
        body.set_subscription_set(vec![dto]);
        let body = serde_json::to_vec(&body)
            .map_err(|e| LiteError::InvalidArgument(format!("encoding the subscription: {e}")))?;
        let header = LiteSubscriptionCtlRequestHeader {
            rpc_request_header: Some(self.rpc_header()),
        };
        let request =
            RemotingCommand::create_request_command(RequestCode::LiteSubscriptionCtl, header)
                .set_body(body);
        self.control
            .invoke_ok("lite subscription", &self.broker.addr, request)
            .await?;
        Ok(())
    }

    async fn trigger_dispatch(&self) -> Result<(), LiteError> {
        let header = TriggerLiteDispatchRequestHeader {
            group: CheetahString::from_slice(&self.group),
            client_id: Some(CheetahString::from_slice(&self.client_id)),
        };
        let request =
            RemotingCommand::create_request_command(RequestCode::TriggerLiteDispatch, header);
        self.control
            .invoke_ok("trigger lite dispatch", &self.broker.addr, request)
            .await?;
        Ok(())
    }

    fn rpc_header(&self) -> RpcRequestHeader {
        RpcRequestHeader {
            namespace: None,
            namespaced: None,
            broker_name: Some(CheetahString::from_slice(&self.broker.name)),
            oneway: None,
        }
    }
}

enum CitOutcome {
    Done,
    Stale,
}

/// The messages of a successful pop answer (its header and body). The bytes
/// are the broker's, so this never panics on them; `fuzz/` feeds it
/// arbitrary frames.
pub fn decode_pop_answer(
    response: &mut RemotingCommand,
    received_at: Instant,
) -> Result<Vec<LiteMessage>, LiteError> {
    let answer = response
        .decode_command_custom_header::<PopLiteMessageResponseHeader>()
        .map_err(|e| LiteError::Decode {
            operation: "pop lite message",
            detail: format!("response header: {e}"),
        })?;
    let Some(mut body) = response.take_body() else {
        return Ok(Vec::new());
    };
    let skew_hint = Arc::new(AtomicI64::new(0));
    let mut messages = Vec::new();
    // Never decompressed: the size an LZ4 body claims is allocated up front
    // (a 661-byte answer asked for 2.6 GB under fuzzing), and Sluice's
    // producer never compresses, so a compressed message is not ours.
    for ext in message_decoder::decodes_batch(&mut body, true, false) {
        if ext.sys_flag & MessageSysFlag::COMPRESSED_FLAG != 0 {
            warn!(msg_id = %ext.msg_id(), "popped a compressed message (Sluice never sends one): dropped");
            continue;
        }
        let props = ext.properties();
        let lite_topic = props
            .get(MessageConst::PROPERTY_LITE_TOPIC)
            .map(|s| s.to_string());
        let queue_offset = props
            .get(MessageConst::PROPERTY_INNER_MULTI_QUEUE_OFFSET)
            .and_then(|s| {
                s.as_str()
                    .split(',')
                    .next()
                    .and_then(|o| o.trim().parse::<i64>().ok())
            });
        let (Some(lite_topic), Some(queue_offset)) = (lite_topic, queue_offset) else {
            // Cannot be suspended or released; it is consumed anyway.
            warn!(msg_id = %ext.msg_id(), "popped message without LiteTopic or queue offset: dropped");
            continue;
        };
        let message_id = props
            .get(MessageConst::PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
            .map(|s| s.to_string())
            .unwrap_or_else(|| ext.msg_id().to_string());
        let properties = props
            .iter()
            .filter(|(k, _)| {
                !STRING_HASH_SET.contains(k.as_str())
                    && !BROKER_INTERNAL_PROPERTIES.contains(&k.as_str())
            })
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        messages.push(LiteMessage {
            handle: MessageHandle {
                lite_topic: lite_topic.clone(),
                queue_offset,
                pop_time: answer.pop_time,
                invisible_time_ms: answer.invisible_time,
                revive_qid: answer.revive_qid,
                received_at,
                skew_hint: Arc::clone(&skew_hint),
            },
            lite_topic,
            body: ext.body().unwrap_or_default(),
            properties,
            message_id: MessageId(message_id),
            queue_offset,
            born_timestamp_ms: ext.born_timestamp(),
            store_timestamp_ms: ext.store_timestamp(),
        });
    }
    Ok(messages)
}

fn stale(handle: &MessageHandle) -> LiteError {
    LiteError::StaleHandle {
        lite_topic: handle.lite_topic.clone(),
        offset: handle.queue_offset,
    }
}

fn checked_set(lite_topics: &[&str]) -> Result<Vec<String>, LiteError> {
    let mut set = BTreeSet::new();
    for topic in lite_topics {
        validate_lite_topic(topic)?;
        set.insert((*topic).to_owned());
    }
    Ok(set.into_iter().collect())
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}
