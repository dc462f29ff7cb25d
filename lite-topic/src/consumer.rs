//! The LiteTopic consumer (rocketmq-client-rust 1.0.0 has none): dynamic
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
//! Several brokers: each broker of the parent topic's route keeps its own
//! LiteTopic queues, subscriptions and blocks, so the consumer subscribes
//! on every broker of the route, pops from each of them at the same time
//! (`POP_LANES` pops in flight per broker, each on a handle of its own), and
//! sends suspend / release to the broker the message came from (over
//! `CONTROL_LANES` handles, a LiteTopic always on the same one). The route is read
//! again every `ROUTE_REFRESH` and after a broker fails; a broker that
//! failed, or joined the route, gets the whole subscription set again
//! (CompleteAdd) before its next pop, since a restarted broker has lost it.
//!
//! The workarounds for the broker's and client's pitfalls are named in
//! capitals where they are applied; `README.md` lists them.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap, HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
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
use tokio::sync::mpsc;
use tracing::{debug, instrument, trace, warn};

use crate::client::{broker_error, lock, now_millis, BrokerTarget, Lanes, LiteClient, Remoting};
use crate::error::{code, LiteError};
use crate::naming::{lmq_name, validate_group, validate_lite_topic, validate_parent_topic};
use crate::producer::{MessageId, BROKER_INTERNAL_PROPERTIES};
use crate::routing::ROUTE_REFRESH;

/// Most messages one pop may return (broker limit).
pub const MAX_POP_BATCH: u32 = 32;

/// Pops in flight to one broker, each on a handle of its own
/// (`ONE_HANDLE_PER_POLLER`). A pop takes about a millisecond on loopback
/// and, at one message per pop (the consumer's pacing), one pop at a time
/// capped a consumer near a thousand messages a second with the machine
/// half idle. The broker keeps a popped LiteTopic blocked until its
/// release, so pops side by side never take two messages of one LiteTopic.
/// Eight with [`CONTROL_LANES`] eight: 1.14× the messages a second of four
/// and four in `consumer_bench` (1,000 buckets × 5; 10,000 × 1 unchanged,
/// bound by the broker's refill of ready LiteTopics: docs/benchmarks.md).
const POP_LANES: usize = 8;

/// Handles for suspends, releases and the other control calls: each
/// message is released or suspended once, and one handle runs one call at
/// a time.
const CONTROL_LANES: usize = 8;

/// `POP_TIME_SKEW`: how far below the popTime of the pop answer the popTime
/// the broker recorded for a LiteTopic may lie. The broker stamps each
/// LiteTopic of a pop with its clock when it reads it, and the answer with
/// its clock when it is composed, and ChangeInvisibleTime must quote the
/// first exactly (else "stale"). The gap is 0 to a few ms on an idle broker;
/// this many are always tried.
const MAX_POP_TIME_SKEW_MS: i64 = 40;

/// `POP_TIME_SKEW` on a busy broker: the gap is bounded by the pop's round
/// trip (both stamps fall inside the request's life at the broker), and a
/// descheduled broker thread makes it longer than 40 ms (a suite run beside
/// a CPU hog saw suspends refused as stale). Tried up to that round trip,
/// at most this far: each value tried is one round trip when a handle is
/// really stale.
const POP_TIME_SKEW_CAP_MS: i64 = 1000;

/// How far below the answer's popTime a handle's ChangeInvisibleTime looks,
/// for a pop that took `round_trip`.
fn pop_time_skew_window(round_trip: Duration) -> i64 {
    let round_trip_ms = i64::try_from(round_trip.as_millis()).unwrap_or(i64::MAX);
    round_trip_ms
        .saturating_add(1)
        .clamp(MAX_POP_TIME_SKEW_MS, POP_TIME_SKEW_CAP_MS)
}

/// `LMQ_OFFSET_SHIFT`: the broker (rocketmq-store 1.0.0) reads a LiteTopic's
/// next offset for a message's `INNER_MULTI_QUEUE_OFFSET` before the append
/// and counts it up after, outside the append lock: sends to one LiteTopic
/// from two connections at the same moment get the same offset. Its queue
/// then files a message at its next place whatever offset it carries, or
/// leaves it out when that offset is below the next place ("Build consume
/// queue repeatedly": lost to the LiteTopic), and from then on messages
/// carry offsets a place or two off their places ("[BUG]logic queue order
/// maybe wrong"; at offset 0 every one is kept). The broker checks
/// ChangeInvisibleTime against the place, so a release quoting the carried
/// offset was refused as stale and the LiteTopic stayed blocked for the
/// whole invisible time, message after message (issue 29: the deferred
/// buckets after a Redis failover, when the consumers hand messages back
/// in bursts). A refused handle is therefore tried again this many places
/// either side of the shift last learned for its LiteTopic.
const MAX_NEW_OFFSET_SHIFT: i64 = 2;

/// How far below a handle's carried offset its place may lie, in the order
/// tried: the shift learned for its LiteTopic, new collisions above it,
/// the places above (shared first offset), and none at all (a restarted
/// broker counts from its queue again).
fn offset_shift_candidates(learned: i64) -> Vec<i64> {
    let up = (1..=MAX_NEW_OFFSET_SHIFT).map(|k| learned.saturating_add(k));
    let down = (1..=MAX_NEW_OFFSET_SHIFT).map(|k| learned.saturating_sub(k));
    let mut shifts = vec![learned];
    for shift in up.chain(down).chain([0]) {
        if !shifts.contains(&shift) {
            shifts.push(shift);
        }
    }
    shifts
}

/// `POP_TIME_SKEW`: skews this close to the hint are tried at the learned
/// place before any other place. Under load the gap moves by a
/// millisecond or two from pop to pop, while another place is needed only
/// after a broker bug (`LMQ_OFFSET_SHIFT`).
const NEAR_SKEW_MS: i64 = 2;

/// The (offset shift, popTime skew) pairs a ChangeInvisibleTime tries, in
/// order, each once: at the learned place (`shifts[0]`) the hint, then the
/// skews near it; every other place at the hint; then every place across
/// the whole window `0..=window`.
fn change_attempts(
    shifts: &[i64],
    hint: i64,
    window: i64,
) -> impl Iterator<Item = (i64, i64)> + '_ {
    let learned = shifts.first().copied();
    let near = move |skew: i64| (skew - hint).abs() <= NEAR_SKEW_MS && (0..=window).contains(&skew);
    let near_hint = (1..=NEAR_SKEW_MS).flat_map(move |k| [hint + k, hint - k]);
    let at_learned = learned.into_iter().flat_map(move |shift| {
        std::iter::once(hint)
            .chain(near_hint.clone())
            .filter(move |&k| near(k))
            .map(move |k| (shift, k))
    });
    let others_at_hint = shifts.iter().skip(1).map(move |&shift| (shift, hint));
    let sweep = shifts.iter().flat_map(move |&shift| {
        (0..=window)
            .filter(move |&skew| {
                let tried = if Some(shift) == learned {
                    near(skew) || skew == hint
                } else {
                    skew == hint
                };
                !tried
            })
            .map(move |skew| (shift, skew))
    });
    at_learned.chain(others_at_hint).chain(sweep)
}

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

/// `REDISPATCH_WHEN_QUIET`: after an empty pop, at most this often while
/// the last redispatch brought messages...
const REDISPATCH_QUIET_MIN: Duration = Duration::from_millis(50);
/// ...doubling up to this while redispatches bring none (an idle consumer)...
const REDISPATCH_QUIET: Duration = Duration::from_millis(500);
/// ...and in any case this often, for LiteTopics stuck while others flow.
const REDISPATCH_EVERY: Duration = Duration::from_secs(5);

/// `REDISPATCH_WHEN_QUIET`: when the next redispatch is due.
///
/// The broker hands a client at most `maxClientEventCount` ready LiteTopics
/// at a time (upstream's default 100; 10,000 in Sluice's broker config)
/// and, for LiteTopics whose messages were already waiting, refills them
/// only when asked: with 100, 10,000 buckets of one queued message each
/// drained at 200–400 messages a second, one refill per 500 ms. So while
/// redispatches bring messages the consumer asks again after
/// `REDISPATCH_QUIET_MIN`, and backs off to `REDISPATCH_QUIET` while they
/// bring none.
#[derive(Debug)]
struct Redispatch {
    last: Instant,
    quiet: Duration,
    /// Messages popped in all, at the last redispatch.
    messages_then: u64,
}

impl Redispatch {
    fn new(now: Instant) -> Self {
        Redispatch {
            last: now,
            quiet: REDISPATCH_QUIET,
            messages_then: 0,
        }
    }

    /// Whether to redispatch now, after an `empty` answer or not, with
    /// `messages` popped in all; if so, counted as done.
    fn due(&mut self, now: Instant, empty: bool, messages: u64) -> bool {
        let since = now.saturating_duration_since(self.last);
        let brought = messages > self.messages_then;
        let quiet = if brought {
            REDISPATCH_QUIET_MIN
        } else {
            self.quiet
        };
        if !((empty && since >= quiet) || since >= REDISPATCH_EVERY) {
            return false;
        }
        self.quiet = if brought {
            REDISPATCH_QUIET_MIN
        } else {
            (self.quiet * 2).min(REDISPATCH_QUIET)
        };
        self.last = now;
        self.messages_then = messages;
        true
    }
}

/// `NUDGE_AFTER_RELEASE`: a released LiteTopic's next message reaches a
/// long poll already waiting only through the broker's replay of "pending"
/// clients, which serves one client per 20 ms tick, the first of a hash
/// set. A client that is always pending — a consumer killed without
/// unsubscribing, whose subscriptions and events the broker keeps — can
/// come first every tick: the live client then waits out its whole poll
/// for each message (one message per ~370 ms after a consumer's SIGKILL,
/// issue 29). So after a release while a long poll to that broker waits,
/// a pop with no poll goes out beside it (on the control handle), which
/// the broker answers at once from this client's events.
const NUDGE_POLL_MS: u64 = 0;

/// How long a broker that failed a pop (or its re-subscription) is left
/// alone before it is tried again.
const BROKER_RETRY: Duration = Duration::from_secs(1);

/// After a broker left the route (the name server drops a broker whose
/// connection closed), the route is read this often for `WATCH_LEFT_FOR`,
/// so a restarted broker is popped again within about a second.
const ROUTE_REFRESH_AFTER_LOSS: Duration = Duration::from_secs(1);
const WATCH_LEFT_FOR: Duration = Duration::from_secs(300);

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
    /// The broker the message was popped from: suspend and release go there.
    broker: Arc<BrokerTarget>,
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
    /// `POP_TIME_SKEW`: offsets up to this are tried ([`pop_time_skew_window`]).
    skew_window_ms: i64,
    /// Released already (shared by its clones): a second release is a
    /// no-op. With pops side by side another pop may hold the LiteTopic's
    /// next message by then, and the broker would refuse it as stale.
    released: Arc<AtomicBool>,
}

impl MessageHandle {
    pub fn lite_topic(&self) -> &str {
        &self.lite_topic
    }

    pub fn queue_offset(&self) -> i64 {
        self.queue_offset
    }

    /// Name of the broker the message came from.
    pub fn broker_name(&self) -> &str {
        &self.broker.name
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
    /// Pops sent beside a waiting long poll after a release
    /// (`NUDGE_AFTER_RELEASE`), and the messages they brought.
    pub nudges: u64,
    pub nudged_messages: u64,
    /// ChangeInvisibleTimes that needed another offset than the one learned
    /// for the LiteTopic (`LMQ_OFFSET_SHIFT`).
    pub offset_shifts: u64,
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
    nudges: AtomicU64,
    nudged_messages: AtomicU64,
    offset_shifts: AtomicU64,
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
    /// Makes the poll handles of brokers that join the route.
    client: LiteClient,
    /// The brokers of the parent topic's route, by name.
    brokers: Mutex<BTreeMap<String, BrokerPoller>>,
    /// When the route was last read; `None`: read it before the next pop.
    route_read_at: Mutex<Option<Instant>>,
    /// Until when the route is read every `ROUTE_REFRESH_AFTER_LOSS`.
    watch_route_until: Mutex<Option<Instant>>,
    /// Subscriptions, suspends, releases, routes (all brokers), and the
    /// pops of `NUDGE_AFTER_RELEASE`; a LiteTopic's suspends and releases
    /// on its own lane.
    control: Lanes,
    /// Woken by every release (`NUDGE_AFTER_RELEASE`).
    released: tokio::sync::Notify,
    request_timeout: Duration,
    subscriptions: Mutex<BTreeSet<String>>,
    subscription_version: AtomicI64,
    /// `WAKE_ON_SUSPEND_EXPIRY`: when the suspends in force end.
    suspend_ends: Mutex<BinaryHeap<Reverse<Instant>>>,
    /// `REDISPATCH_WHEN_QUIET`: when the brokers were last asked.
    last_redispatch: Mutex<Redispatch>,
    /// A pop (not a nudge) answered empty since `pop` last looked.
    answered_empty: AtomicBool,
    counters: Arc<Counters>,
    /// Answers of the per-broker pop tasks.
    outcomes_tx: mpsc::UnboundedSender<PopOutcome>,
    outcomes: tokio::sync::Mutex<mpsc::UnboundedReceiver<PopOutcome>>,
    /// Popped messages not handed out yet (several brokers answered, or a
    /// `pop` was dropped before its answer came).
    ready: Mutex<VecDeque<LiteMessage>>,
    /// `LMQ_OFFSET_SHIFT`: by broker, then LiteTopic, how far the offset
    /// its last released message carried lay above its place in its queue
    /// (looked up by `&str` on every release: no key is built then).
    offset_shifts: Mutex<HashMap<String, HashMap<String, i64>>>,
}

/// One broker of the route and its pop handles.
struct BrokerPoller {
    target: Arc<BrokerTarget>,
    /// `ONE_HANDLE_PER_POLLER`: long-poll pops to this broker only,
    /// `POP_LANES` of them side by side.
    polls: Lanes,
    /// Whether a pop is in flight on each of `polls`.
    in_flight: Vec<bool>,
    /// `NUDGE_AFTER_RELEASE`: a LiteTopic of this broker was released while
    /// the long poll waits; a nudge pop is due.
    nudge_due: bool,
    /// A nudge pop to this broker is in flight (at most one).
    nudging: bool,
    /// Left alone until then after a failure.
    retry_at: Option<Instant>,
    /// Send it the whole subscription set before its next pop (it joined
    /// the route, or failed and may have restarted without them).
    resync: bool,
    /// Still in the route (a broker that left it is dropped once no pop to
    /// it is in flight).
    in_route: bool,
}

/// The answer of one broker's pop task.
struct PopOutcome {
    broker: String,
    /// The pop lane it ran on; `None` for a pop of `NUDGE_AFTER_RELEASE`
    /// (the broker's long poll may still wait).
    lane: Option<usize>,
    result: Result<Vec<LiteMessage>, LiteError>,
}

impl LiteConsumer {
    /// A consumer in `group` (see [`crate::LiteAdmin::ensure_consumer_group`])
    /// of `parent`'s LiteTopics, subscribed to none yet.
    pub async fn new(client: &LiteClient, group: &str, parent: &str) -> Result<Self, LiteError> {
        validate_group(group)?;
        validate_parent_topic(parent)?;
        let control = client.lanes("consumer-control", CONTROL_LANES).await?;
        let route = match control.first().topic_masters(parent).await {
            Ok(route) => route,
            Err(e) => {
                control.shutdown().await;
                return Err(e);
            }
        };
        let mut brokers = BTreeMap::new();
        for target in route {
            match client.lanes("consumer-poll", POP_LANES).await {
                Ok(polls) => {
                    brokers.insert(target.name.clone(), BrokerPoller::new(target, polls, false));
                }
                Err(e) => {
                    for poller in brokers.into_values() {
                        poller.shutdown().await;
                    }
                    control.shutdown().await;
                    return Err(e);
                }
            }
        }
        let client_id = crate::client::unique_client_name();
        debug!(group, parent, %client_id, brokers = ?brokers.keys().collect::<Vec<_>>(), "LiteTopic consumer ready");
        let (outcomes_tx, outcomes) = mpsc::unbounded_channel();
        Ok(LiteConsumer {
            group: group.to_owned(),
            parent: parent.to_owned(),
            client_id,
            client: client.clone(),
            brokers: Mutex::new(brokers),
            route_read_at: Mutex::new(Some(Instant::now())),
            watch_route_until: Mutex::new(None),
            control,
            released: tokio::sync::Notify::new(),
            request_timeout: client.config().request_timeout,
            subscriptions: Mutex::new(BTreeSet::new()),
            subscription_version: AtomicI64::new(0),
            suspend_ends: Mutex::new(BinaryHeap::new()),
            last_redispatch: Mutex::new(Redispatch::new(Instant::now())),
            answered_empty: AtomicBool::new(false),
            counters: Arc::new(Counters::default()),
            outcomes_tx,
            outcomes: tokio::sync::Mutex::new(outcomes),
            ready: Mutex::new(VecDeque::new()),
            offset_shifts: Mutex::new(HashMap::new()),
        })
    }

    /// Names of the brokers this consumer pops from (the parent topic's
    /// route as last read).
    pub fn brokers(&self) -> Vec<String> {
        lock(&self.brokers)
            .iter()
            .filter(|(_, poller)| poller.in_route)
            .map(|(name, _)| name.clone())
            .collect()
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
            nudges: c.nudges.load(Ordering::Relaxed),
            nudged_messages: c.nudged_messages.load(Ordering::Relaxed),
            offset_shifts: c.offset_shifts.load(Ordering::Relaxed),
        }
    }

    /// Add LiteTopics to this consumer's set (PartialAdd). Messages already
    /// waiting in them are delivered too.
    #[instrument(skip(self), fields(client_id = %self.client_id))]
    pub async fn subscribe(&self, lite_topics: &[&str]) -> Result<(), LiteError> {
        let set = self
            .change_subscriptions(lite_topics, LiteSubscriptionAction::PartialAdd)
            .await?;
        if set.is_empty() {
            // Nothing was asked of the brokers: nothing to dispatch.
            return Ok(());
        }
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
        let set = self
            .change_subscriptions(lite_topics, LiteSubscriptionAction::PartialRemove)
            .await?;
        let mut subscriptions = lock(&self.subscriptions);
        for topic in &set {
            subscriptions.remove(topic);
        }
        Ok(())
    }

    /// Sends a partial `action` for `lite_topics` (checked, deduplicated) to
    /// every broker, unless there are none; hands back that set.
    async fn change_subscriptions(
        &self,
        lite_topics: &[&str],
        action: LiteSubscriptionAction,
    ) -> Result<Vec<String>, LiteError> {
        let set = checked_set(lite_topics)?;
        if !set.is_empty() {
            self.on_every_broker(|broker| self.subscription_ctl_at(broker, action, &set))
                .await?;
        }
        Ok(set)
    }

    /// Delete idle LiteTopics at the brokers, reclaiming their disk: each is
    /// unsubscribed, then its queue `%LMQ%$<parent>$<lite>` is deleted with
    /// `DeleteTopicInBroker` on every broker of the route (a LiteTopic lives
    /// on one broker, or on two after a failover; the broker drops the
    /// queue's consume-queue files and every group's offset in it). The next
    /// message sent to the LiteTopic creates it again, from offset 0. A
    /// broker that is down keeps its copy.
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
        self.on_every_broker(|broker| self.delete_lite_topics_at(broker, &set))
            .await
    }

    async fn delete_lite_topics_at(
        &self,
        broker: Arc<BrokerTarget>,
        set: &[String],
    ) -> Result<(), LiteError> {
        for lite_topic in set {
            let header = DeleteTopicRequestHeader {
                topic: CheetahString::from_string(lmq_name(&self.parent, lite_topic.as_str())),
                topic_request_header: None,
            };
            self.control
                .first()
                .request_ok(
                    "delete lite topic",
                    &broker.addr,
                    RequestCode::DeleteTopicInBroker,
                    header,
                )
                .await?;
        }
        Ok(())
    }

    /// Replace this consumer's whole set (CompleteAdd) on every broker.
    /// (A broker that restarts gets it again by itself: see the module docs.)
    #[instrument(skip(self), fields(client_id = %self.client_id))]
    pub async fn set_subscriptions(&self, lite_topics: &[&str]) -> Result<(), LiteError> {
        let set = checked_set(lite_topics)?;
        self.on_every_broker(|broker| {
            self.subscription_ctl_at(broker, LiteSubscriptionAction::CompleteAdd, &set)
        })
        .await?;
        *lock(&self.subscriptions) = set.into_iter().collect();
        self.trigger_dispatch().await
    }

    /// Run `call` for every broker of the route, one after the other. A
    /// broker that fails transiently is marked for re-subscription (it gets
    /// the whole set before its next pop) and does not fail the call while
    /// another broker succeeded; a permanent error is returned at once.
    async fn on_every_broker<F, Fut>(&self, call: F) -> Result<(), LiteError>
    where
        F: Fn(Arc<BrokerTarget>) -> Fut,
        Fut: std::future::Future<Output = Result<(), LiteError>>,
    {
        let targets = self.route_targets();
        if targets.is_empty() {
            return Err(LiteError::NoRoute(self.parent.clone()));
        }
        let mut succeeded = false;
        let mut last_error = None;
        for target in targets {
            match call(Arc::clone(&target)).await {
                Ok(()) => succeeded = true,
                Err(e) if e.is_transient() => {
                    warn!(broker = %target.name, error = %e, "broker unreachable; it is brought up to date when it answers again");
                    self.mark_failed(&target.name);
                    last_error = Some(e);
                }
                Err(e) => return Err(e),
            }
        }
        match last_error {
            Some(e) if !succeeded => Err(e),
            _ => Ok(()),
        }
    }

    /// The brokers of the route as last read.
    fn route_targets(&self) -> Vec<Arc<BrokerTarget>> {
        lock(&self.brokers)
            .values()
            .filter(|poller| poller.in_route)
            .map(|poller| Arc::clone(&poller.target))
            .collect()
    }

    /// `broker` failed: leave it alone for `BROKER_RETRY`, re-subscribe it
    /// before its next pop, and read the route again.
    fn mark_failed(&self, broker: &str) {
        if let Some(poller) = lock(&self.brokers).get_mut(broker) {
            poller.resync = true;
            poller.retry_at = Some(Instant::now() + BROKER_RETRY);
        }
        *lock(&self.route_read_at) = None;
    }

    /// Pop up to `max` (1..=32) messages of the subscribed LiteTopics,
    /// waiting up to `poll_time` for one to arrive. Each returned message's
    /// LiteTopic stays blocked for this group for `invisible_time` (or until
    /// [`LiteConsumer::release`] / [`LiteConsumer::suspend`]).
    ///
    /// An empty result is normal (nothing arrived, or a suspend ended: see
    /// `WAKE_ON_SUSPEND_EXPIRY`); call again. An error means no broker of
    /// the route answered; while one does, a failing broker is only logged
    /// and retried after `BROKER_RETRY`.
    ///
    /// Every broker of the route is popped at the same time, `POP_LANES`
    /// pops in flight per broker; this returns as soon as one answers with
    /// messages.
    /// Pops still in flight then, and messages beyond `max`, are kept for the
    /// next call: the broker commits what it answers (at-most-once), so
    /// before dropping the consumer call [`LiteConsumer::finish_pops`] and
    /// handle what it returns.
    ///
    /// `POP_NEVER_CANCELLED`: the requests run in tasks of their own, so a
    /// dropped `pop` future no longer loses their answers (they wait for the
    /// next call); still, await every pop to its end.
    #[instrument(skip(self), level = "trace", fields(client_id = %self.client_id))]
    pub async fn pop(
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
        let messages = self.pop_any(max, invisible_ms, poll_time).await?;
        self.redispatch_if_due(messages.is_empty()).await;
        Ok(messages)
    }

    /// Wait for every pop in flight and return all popped messages not
    /// handed out yet. Call it when the pop loop stops, before
    /// [`LiteConsumer::shutdown`]: these messages are committed at their
    /// broker and delivered nowhere else.
    pub async fn finish_pops(&self) -> Vec<LiteMessage> {
        let mut outcomes = self.outcomes.lock().await;
        while self.in_flight() > 0 {
            // Each pop task ends within its poll time + request timeout.
            let Some(outcome) = outcomes.recv().await else {
                break;
            };
            let _ = self.record_outcome(outcome);
        }
        lock(&self.ready).drain(..).collect()
    }

    /// `REDISPATCH_WHEN_QUIET`: this broker can leave a released LiteTopic
    /// that still holds messages un-ready for the client until a new message
    /// arrives in it (1,000 LiteTopics × 2 queued messages: 400 delivered,
    /// then nothing). After an empty pop (see [`Redispatch`] for how often),
    /// and every 5 s in any case, ask it to make every subscribed LiteTopic
    /// with waiting messages ready again: one control request per broker.
    async fn redispatch_if_due(&self, empty: bool) {
        // An empty answer of any lane counts, even when another lane's
        // messages made this call's result.
        let empty = self.answered_empty.swap(false, Ordering::Relaxed) || empty;
        let messages = self.counters.messages.load(Ordering::Relaxed);
        let due = lock(&self.last_redispatch).due(Instant::now(), empty, messages);
        if due && !lock(&self.subscriptions).is_empty() {
            if let Err(error) = self.trigger_dispatch().await {
                tracing::debug!(%error, "redispatch failed; next time");
            }
        }
    }

    /// Hand out what is ready, else start a pop on every idle broker and
    /// wait for the first that answers with messages (or empty).
    async fn pop_any(
        &self,
        max: u32,
        invisible_ms: i64,
        poll_time: Duration,
    ) -> Result<Vec<LiteMessage>, LiteError> {
        self.refresh_route_if_due().await;
        let mut outcomes = self.outcomes.lock().await;
        while let Ok(outcome) = outcomes.try_recv() {
            let _ = self.record_outcome(outcome);
        }
        if let Some(batch) = self.take_ready(max) {
            return Ok(batch);
        }
        self.resync_brokers().await;
        let (wait, poll_ms) = self.plan_poll(poll_time);
        if !wait.is_zero() {
            tokio::time::sleep(wait).await;
        }
        if self.start_pops(max, invisible_ms, poll_ms) == 0 {
            return Err(LiteError::NoRoute(format!(
                "{} (no broker of its route answers)",
                self.parent
            )));
        }
        loop {
            self.start_nudges(max, invisible_ms);
            let outcome = tokio::select! {
                outcome = outcomes.recv() => outcome,
                // A release: maybe a nudge is due.
                _ = self.released.notified() => continue,
            };
            let Some(outcome) = outcome else {
                return Err(LiteError::Runtime("pop tasks gone".into()));
            };
            let nudge = outcome.lane.is_none();
            let answered = self.record_outcome(outcome);
            while let Ok(outcome) = outcomes.try_recv() {
                let _ = self.record_outcome(outcome);
            }
            if let Some(batch) = self.take_ready(max) {
                return Ok(batch);
            }
            match answered {
                // An empty nudge: the long poll still waits.
                _ if nudge && self.in_flight() > 0 => {}
                Ok(()) => return Ok(Vec::new()),
                Err(e) if self.in_flight() == 0 => return Err(e),
                Err(_) => {}
            }
        }
    }

    /// Up to `max` ready messages, `None` when there are none.
    fn take_ready(&self, max: u32) -> Option<Vec<LiteMessage>> {
        let mut ready = lock(&self.ready);
        if ready.is_empty() {
            return None;
        }
        let n = ready.len().min(max as usize);
        Some(ready.drain(..n).collect())
    }

    /// Pops in flight, nudges included: each may bring committed messages.
    fn in_flight(&self) -> usize {
        lock(&self.brokers)
            .values()
            .map(|poller| poller.pops_in_flight() + usize::from(poller.nudging))
            .sum()
    }

    /// Book one broker's answer: its messages become ready; a failure marks
    /// the broker (see [`LiteConsumer::mark_failed`]) and is returned. A
    /// nudge's failure is only logged (as an empty answer): its long poll
    /// tells how the broker is.
    fn record_outcome(&self, outcome: PopOutcome) -> Result<(), LiteError> {
        if let Some(poller) = lock(&self.brokers).get_mut(&outcome.broker) {
            match outcome.lane {
                None => poller.nudging = false,
                Some(lane) => {
                    if let Some(in_flight) = poller.in_flight.get_mut(lane) {
                        *in_flight = false;
                    }
                }
            }
        }
        let nudge = outcome.lane.is_none();
        match outcome.result {
            Ok(messages) => {
                if messages.is_empty() && !nudge {
                    self.answered_empty.store(true, Ordering::Relaxed);
                }
                if nudge {
                    self.counters
                        .nudged_messages
                        .fetch_add(messages.len() as u64, Ordering::Relaxed);
                }
                lock(&self.ready).extend(messages);
                Ok(())
            }
            Err(e) if nudge => {
                debug!(broker = %outcome.broker, error = %e, "nudge pop failed; the long poll goes on");
                Ok(())
            }
            Err(e) => {
                warn!(broker = %outcome.broker, error = %e, "pop failed; the other brokers go on");
                self.mark_failed(&outcome.broker);
                Err(e)
            }
        }
    }

    /// Start a pop task on every idle lane of every broker of the route
    /// that is not waiting out a failure. Returns how many are in flight.
    fn start_pops(&self, max: u32, invisible_ms: i64, poll_ms: u64) -> usize {
        let now = Instant::now();
        let mut brokers = lock(&self.brokers);
        let mut in_flight = 0;
        for poller in brokers.values_mut() {
            in_flight += poller.pops_in_flight();
            let resting = poller.retry_at.is_some_and(|at| at > now);
            if !poller.in_route || poller.resync || resting {
                continue;
            }
            for (lane, poll) in poller.polls.all().iter().enumerate() {
                if poller.in_flight[lane] {
                    continue;
                }
                let request = self.pop_request(&poller.target, max, invisible_ms, poll_ms);
                let task = PopTask {
                    poll: Arc::clone(poll),
                    broker: Arc::clone(&poller.target),
                    lane: Some(lane),
                    timeout: Duration::from_millis(poll_ms) + self.request_timeout,
                    counters: Arc::clone(&self.counters),
                };
                tokio::spawn(task.run(request, self.outcomes_tx.clone()));
                poller.in_flight[lane] = true;
                poller.nudge_due = false;
                in_flight += 1;
            }
        }
        in_flight
    }

    /// `NUDGE_AFTER_RELEASE`: a pop with no poll to every broker whose long
    /// poll waits while one of its LiteTopics was released, one at a time.
    fn start_nudges(&self, max: u32, invisible_ms: i64) {
        let mut brokers = lock(&self.brokers);
        for poller in brokers.values_mut() {
            if !(poller.pops_in_flight() > 0 && poller.nudge_due) || poller.nudging {
                continue;
            }
            let request = self.pop_request(&poller.target, max, invisible_ms, NUDGE_POLL_MS);
            let task = PopTask {
                poll: Arc::clone(self.control.first()),
                broker: Arc::clone(&poller.target),
                lane: None,
                timeout: self.request_timeout,
                counters: Arc::clone(&self.counters),
            };
            tokio::spawn(task.run(request, self.outcomes_tx.clone()));
            self.counters.nudges.fetch_add(1, Ordering::Relaxed);
            poller.nudge_due = false;
            poller.nudging = true;
        }
    }

    /// `NUDGE_AFTER_RELEASE`: `broker`'s LiteTopic was released; if a long
    /// poll to it waits, the pop loop sends a nudge.
    fn released_at(&self, broker: &str) {
        if let Some(poller) = lock(&self.brokers).get_mut(broker) {
            if poller.pops_in_flight() > 0 {
                poller.nudge_due = true;
            }
        }
        self.released.notify_one();
    }

    fn pop_request(
        &self,
        broker: &BrokerTarget,
        max: u32,
        invisible_ms: i64,
        poll_ms: u64,
    ) -> RemotingCommand {
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
            rpc: Some(rpc_header(broker)),
        };
        RemotingCommand::create_request_command(RequestCode::PopLiteMessage, header)
    }

    /// Read the parent topic's route again when it is due (`ROUTE_REFRESH`,
    /// or at once after a broker failed), and follow it.
    async fn refresh_route_if_due(&self) {
        let watching = lock(&self.watch_route_until).is_some_and(|until| until > Instant::now());
        let every = if watching {
            ROUTE_REFRESH_AFTER_LOSS
        } else {
            ROUTE_REFRESH
        };
        let due = lock(&self.route_read_at).is_none_or(|at| at.elapsed() >= every);
        if !due {
            return;
        }
        *lock(&self.route_read_at) = Some(Instant::now());
        match self.control.first().topic_masters(&self.parent).await {
            Ok(route) => self.follow_route(route).await,
            Err(error) => {
                warn!(%error, parent = %self.parent, "cannot read the route; keeping the last one")
            }
        }
    }

    /// Add the brokers that joined the route (re-subscribed before their
    /// first pop), and drop those that left it once no pop to them is in
    /// flight. A broker that moved to another address counts as new.
    async fn follow_route(&self, route: Vec<BrokerTarget>) {
        let joined: Vec<BrokerTarget> = {
            let mut brokers = lock(&self.brokers);
            for (name, poller) in brokers.iter_mut() {
                poller.in_route = route
                    .iter()
                    .any(|b| &b.name == name && b.addr == poller.target.addr);
            }
            route
                .into_iter()
                .filter(|b| !brokers.get(&b.name).is_some_and(|p| p.in_route))
                .collect()
        };
        self.drop_left_brokers().await;
        for target in joined {
            if lock(&self.brokers).contains_key(&target.name) {
                // Moved, with a pop to its old address still in flight:
                // taken up once that pop ends.
                continue;
            }
            match self.client.lanes("consumer-poll", POP_LANES).await {
                Ok(polls) => {
                    debug!(broker = %target.name, "broker joined the route");
                    let poller = BrokerPoller::new(target, polls, true);
                    lock(&self.brokers).insert(poller.target.name.clone(), poller);
                }
                Err(error) => warn!(%error, broker = %target.name, "cannot reach a new broker"),
            }
        }
    }

    async fn drop_left_brokers(&self) {
        let left: Vec<BrokerPoller> = {
            let mut brokers = lock(&self.brokers);
            let names: Vec<String> = brokers
                .iter()
                .filter(|(_, p)| !p.in_route && p.pops_in_flight() == 0)
                .map(|(name, _)| name.clone())
                .collect();
            names
                .iter()
                .filter_map(|name| brokers.remove(name))
                .collect()
        };
        if !left.is_empty() {
            *lock(&self.watch_route_until) = Some(Instant::now() + WATCH_LEFT_FOR);
        }
        for poller in left {
            debug!(broker = %poller.target.name, "broker left the route");
            poller.shutdown().await;
        }
    }

    /// Give every broker marked for it the whole subscription set
    /// (CompleteAdd) and a dispatch trigger, so a restarted broker delivers
    /// again what it holds.
    async fn resync_brokers(&self) {
        let now = Instant::now();
        let due: Vec<Arc<BrokerTarget>> = lock(&self.brokers)
            .values()
            .filter(|p| p.in_route && p.resync && p.pops_in_flight() == 0)
            .filter(|p| p.retry_at.is_none_or(|at| at <= now))
            .map(|p| Arc::clone(&p.target))
            .collect();
        for target in due {
            let set: Vec<String> = lock(&self.subscriptions).iter().cloned().collect();
            let result = async {
                self.subscription_ctl_at(
                    Arc::clone(&target),
                    LiteSubscriptionAction::CompleteAdd,
                    &set,
                )
                .await?;
                self.trigger_dispatch_at(Arc::clone(&target)).await
            }
            .await;
            match result {
                Ok(()) => {
                    debug!(broker = %target.name, topics = set.len(), "broker re-subscribed");
                    if let Some(poller) = lock(&self.brokers).get_mut(&target.name) {
                        poller.resync = false;
                        poller.retry_at = None;
                    }
                }
                Err(error) => {
                    debug!(%error, broker = %target.name, "broker still unreachable");
                    self.mark_failed(&target.name);
                }
            }
        }
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
    /// before the LiteTopic moves on; an expired handle is already free, and
    /// a handle released once is not released again.
    ///
    /// `RELEASE_NOT_ACK`: AckMessage with a LiteTopic answers success but
    /// leaves the LiteTopic blocked; ChangeInvisibleTime to 0 frees it.
    #[instrument(skip(self, handle), fields(lite_topic = %handle.lite_topic, offset = handle.queue_offset))]
    pub async fn release(&self, handle: &MessageHandle) -> Result<(), LiteError> {
        if handle.is_expired() || handle.released.load(Ordering::Relaxed) {
            return Ok(());
        }
        match self.change_invisible_time(handle, 0, false).await {
            Ok(()) => {}
            Err(LiteError::StaleHandle { .. }) if handle.is_expired() => {}
            Err(e) => return Err(e),
        }
        handle.released.store(true, Ordering::Relaxed);
        self.counters.releases.fetch_add(1, Ordering::Relaxed);
        self.released_at(&handle.broker.name);
        Ok(())
    }

    /// Drop this consumer's subscriptions at every broker (CompleteRemove:
    /// the broker never expires them), wait for the pops in flight and close
    /// its connections. Popped messages not handed out by then are lost
    /// (logged): call [`LiteConsumer::finish_pops`] first to keep them.
    pub async fn shutdown(self) {
        for target in self.route_targets() {
            let dto = self.dto(LiteSubscriptionAction::CompleteRemove, HashSet::new());
            if let Err(e) = self.send_subscription_ctl(&target, dto).await {
                warn!(error = %e, client_id = %self.client_id, broker = %target.name, "could not drop LiteTopic subscriptions");
            }
        }
        let left = self.finish_pops().await;
        if !left.is_empty() {
            warn!(count = left.len(), client_id = %self.client_id, "popped messages dropped at shutdown (call finish_pops first)");
        }
        let pollers: Vec<BrokerPoller> = std::mem::take(&mut *lock(&self.brokers))
            .into_values()
            .collect();
        for poller in pollers {
            poller.shutdown().await;
        }
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
    /// `LMQ_OFFSET_SHIFT`, `POP_TIME_SKEW` and busy-lock retries, in the
    /// order of [`change_attempts`].
    async fn change_invisible_time(
        &self,
        handle: &MessageHandle,
        invisible_ms: i64,
        suspend: bool,
    ) -> Result<(), LiteError> {
        let learned = self.learned_offset_shift(handle);
        let hint = handle.skew_hint.load(Ordering::Relaxed);
        let shifts = offset_shift_candidates(learned);
        let mut tried = 0u64;
        for (shift, skew) in change_attempts(&shifts, hint, handle.skew_window_ms) {
            let offset = handle.queue_offset - shift;
            if offset < 0 {
                continue;
            }
            let pop_time = handle.pop_time - skew;
            match self
                .change_invisible_time_once(handle, offset, pop_time, invisible_ms, suspend)
                .await?
            {
                CitOutcome::Done => {
                    self.took_change(handle, shift, learned, skew, tried);
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
        if handle.is_expired() {
            debug!(lite_topic = %handle.lite_topic, offset = handle.queue_offset, "handle expired while its ChangeInvisibleTime was tried");
            return Err(stale(handle));
        }
        warn!(
            lite_topic = %handle.lite_topic,
            offset = handle.queue_offset,
            learned_shift = learned,
            pop_time = handle.pop_time,
            skew_window_ms = handle.skew_window_ms,
            tried,
            age_ms = handle.received_at.elapsed().as_millis() as u64,
            suspend,
            broker = %handle.broker.name,
            "ChangeInvisibleTime refused as stale for every offset and popTime tried"
        );
        Err(stale(handle))
    }

    /// `LMQ_OFFSET_SHIFT`: the shift last learned for `handle`'s LiteTopic.
    fn learned_offset_shift(&self, handle: &MessageHandle) -> i64 {
        lock(&self.offset_shifts)
            .get(handle.broker.name.as_str())
            .and_then(|topics| topics.get(handle.lite_topic.as_str()))
            .copied()
            .unwrap_or(0)
    }

    /// `LMQ_OFFSET_SHIFT`: remember `shift` for `handle`'s LiteTopic; a
    /// warning the first time (the shift changes with each collision).
    fn learn_offset_shift(&self, handle: &MessageHandle, shift: i64) {
        let first = lock(&self.offset_shifts)
            .entry(handle.broker.name.clone())
            .or_default()
            .insert(handle.lite_topic.clone(), shift)
            .is_none();
        self.counters.offset_shifts.fetch_add(1, Ordering::Relaxed);
        let carried = handle.queue_offset;
        let place = carried - shift;
        let lite_topic = &handle.lite_topic;
        let broker = &handle.broker.name;
        if first {
            warn!(%lite_topic, %broker, carried, place, "a LiteTopic's messages carry offsets off their queue places (the broker gave one offset to two sends): quoting the places");
        } else {
            debug!(%lite_topic, %broker, carried, place, "offset shift of a LiteTopic changed");
        }
    }

    /// A ChangeInvisibleTime was taken at `shift` and `skew` after `tried`
    /// refusals: remember both for the next ones.
    fn took_change(&self, handle: &MessageHandle, shift: i64, learned: i64, skew: i64, tried: u64) {
        handle.skew_hint.store(skew, Ordering::Relaxed);
        self.counters
            .pop_time_retries
            .fetch_add(tried, Ordering::Relaxed);
        self.counters
            .max_pop_time_skew_ms
            .fetch_max(skew as u64, Ordering::Relaxed);
        if shift != learned {
            self.learn_offset_shift(handle, shift);
        }
    }

    async fn change_invisible_time_once(
        &self,
        handle: &MessageHandle,
        offset: i64,
        pop_time: i64,
        invisible_ms: i64,
        suspend: bool,
    ) -> Result<CitOutcome, LiteError> {
        let extra_info = ExtraInfoUtil::build_extra_info_with_offset(
            offset,
            pop_time,
            handle.invisible_time_ms,
            handle.revive_qid,
            &self.parent,
            &handle.broker.name,
            0,
            offset,
        );
        let mut busy = 0;
        loop {
            let header = ChangeInvisibleTimeRequestHeader {
                consumer_group: CheetahString::from_slice(&self.group),
                topic: CheetahString::from_slice(&self.parent),
                queue_id: 0,
                extra_info: CheetahString::from_slice(&extra_info),
                offset,
                invisible_time: invisible_ms,
                lite_topic: Some(CheetahString::from_slice(&handle.lite_topic)),
                suspend,
                topic_request_header: Some(TopicRequestHeader {
                    rpc_request_header: Some(rpc_header(&handle.broker)),
                    lo: None,
                }),
            };
            let request = RemotingCommand::create_request_command(
                RequestCode::ChangeMessageInvisibleTime,
                header,
            );
            let response = self
                .control
                .of(&handle.lite_topic)
                .invoke(
                    "change invisible time",
                    &handle.broker.addr,
                    request,
                    self.request_timeout,
                )
                .await?;
            match response.code() {
                code::SUCCESS => return Ok(CitOutcome::Done),
                // "ordered Lite ownership is missing or stale"; or "Lite
                // offset N exceeds queue maximum M": an offset carried past
                // the queue's end (`LMQ_OFFSET_SHIFT`).
                code::MESSAGE_ILLEGAL | code::NO_MESSAGE => return Ok(CitOutcome::Stale),
                // "ordered Lite queue is owned by another in-flight request":
                // a pop is reading this LiteTopic right now.
                code::SYSTEM_BUSY if busy < BUSY_RETRIES => {
                    busy += 1;
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
                _ => {
                    return Err(broker_error(
                        "change invisible time",
                        &handle.broker.addr,
                        &response,
                    ))
                }
            }
        }
    }

    async fn subscription_ctl_at(
        &self,
        broker: Arc<BrokerTarget>,
        action: LiteSubscriptionAction,
        set: &[String],
    ) -> Result<(), LiteError> {
        let set = set
            .iter()
            .map(|topic| CheetahString::from_slice(topic))
            .collect::<HashSet<_>>();
        let dto = self.dto(action, set);
        self.send_subscription_ctl(&broker, dto).await
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

    async fn send_subscription_ctl(
        &self,
        broker: &BrokerTarget,
        dto: LiteSubscriptionDTO,
    ) -> Result<(), LiteError> {
        let mut body = LiteSubscriptionCtlRequestBody::new();
        body.set_subscription_set(vec![dto]);
        let body = serde_json::to_vec(&body)
            .map_err(|e| LiteError::InvalidArgument(format!("encoding the subscription: {e}")))?;
        let header = LiteSubscriptionCtlRequestHeader {
            rpc_request_header: Some(rpc_header(broker)),
        };
        let request =
            RemotingCommand::create_request_command(RequestCode::LiteSubscriptionCtl, header)
                .set_body(body);
        self.control
            .first()
            .invoke_ok("lite subscription", &broker.addr, request)
            .await?;
        Ok(())
    }

    /// TriggerLiteDispatch for this client on every broker of the route.
    async fn trigger_dispatch(&self) -> Result<(), LiteError> {
        self.on_every_broker(|broker| self.trigger_dispatch_at(broker))
            .await
    }

    async fn trigger_dispatch_at(&self, broker: Arc<BrokerTarget>) -> Result<(), LiteError> {
        let header = TriggerLiteDispatchRequestHeader {
            group: CheetahString::from_slice(&self.group),
            client_id: Some(CheetahString::from_slice(&self.client_id)),
        };
        self.control
            .first()
            .request_ok(
                "trigger lite dispatch",
                &broker.addr,
                RequestCode::TriggerLiteDispatch,
                header,
            )
            .await?;
        Ok(())
    }
}

/// One pop request to one broker, run in a task of its own so that its
/// answer (committed at the broker) is never dropped with a caller's future.
struct PopTask {
    poll: Arc<Remoting>,
    broker: Arc<BrokerTarget>,
    /// Its lane; `None` for a pop of `NUDGE_AFTER_RELEASE`.
    lane: Option<usize>,
    timeout: Duration,
    counters: Arc<Counters>,
}

impl PopTask {
    async fn run(self, request: RemotingCommand, outcomes: mpsc::UnboundedSender<PopOutcome>) {
        let result = self.pop(request).await;
        // The receiver lives as long as the consumer; once it is gone
        // nobody could take these messages anyway.
        let _ = outcomes.send(PopOutcome {
            broker: self.broker.name.clone(),
            lane: self.lane,
            result,
        });
    }

    async fn pop(&self, request: RemotingCommand) -> Result<Vec<LiteMessage>, LiteError> {
        let sent_at = Instant::now();
        let mut response = self
            .poll
            .invoke("pop lite message", &self.broker.addr, request, self.timeout)
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
        let arrival = Arrival {
            received_at,
            round_trip: received_at - sent_at,
        };
        let messages = decode_answer_from(&mut response, arrival, &self.broker)?;
        self.counters
            .messages
            .fetch_add(messages.len() as u64, Ordering::Relaxed);
        if messages.is_empty() {
            self.counters.empty_pops.fetch_add(1, Ordering::Relaxed);
        }
        trace!(count = messages.len(), "popped");
        Ok(messages)
    }
}

impl BrokerPoller {
    fn new(target: BrokerTarget, polls: Lanes, resync: bool) -> Self {
        BrokerPoller {
            target: Arc::new(target),
            in_flight: vec![false; polls.all().len()],
            polls,
            nudge_due: false,
            nudging: false,
            retry_at: None,
            resync,
            in_route: true,
        }
    }

    /// Pops in flight to this broker (nudges not counted).
    fn pops_in_flight(&self) -> usize {
        self.in_flight.iter().filter(|&&busy| busy).count()
    }

    /// Close its pop handles (once no pop task holds them any more).
    async fn shutdown(self) {
        self.polls.shutdown().await;
    }
}

fn rpc_header(broker: &BrokerTarget) -> RpcRequestHeader {
    RpcRequestHeader {
        namespace: None,
        namespaced: None,
        broker_name: Some(CheetahString::from_slice(&broker.name)),
        oneway: None,
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
    // For tests and fuzzing: the handles name no broker.
    let unknown = Arc::new(BrokerTarget {
        name: String::new(),
        addr: String::new(),
    });
    let arrival = Arrival {
        received_at,
        round_trip: Duration::ZERO,
    };
    decode_answer_from(response, arrival, &unknown)
}

/// When a pop answer arrived, and how long after its request was sent.
struct Arrival {
    received_at: Instant,
    round_trip: Duration,
}

/// [`decode_pop_answer`] for an answer of `broker` (its messages are
/// suspended and released there).
fn decode_answer_from(
    response: &mut RemotingCommand,
    arrival: Arrival,
    broker: &Arc<BrokerTarget>,
) -> Result<Vec<LiteMessage>, LiteError> {
    let Arrival {
        received_at,
        round_trip,
    } = arrival;
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
    // producer never compresses (`LiteProducer` sets the threshold to
    // u32::MAX; the client's default compresses bodies over 4 KiB), so a
    // compressed message is not ours.
    for ext in message_decoder::decodes_batch(&mut body, true, false) {
        if ext.sys_flag & MessageSysFlag::COMPRESSED_FLAG != 0 {
            warn!(msg_id = %ext.msg_id(), "popped a compressed message (Sluice never sends one): dropped");
            continue;
        }
        let props = ext.properties();
        let Some((lite_topic, queue_offset)) = lite_topic_and_offset(props) else {
            // Cannot be suspended or released; it is consumed anyway.
            warn!(msg_id = %ext.msg_id(), "popped message without LiteTopic or queue offset: dropped");
            continue;
        };
        let message_id = props
            .get(MessageConst::PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
            .map(|s| s.to_string())
            .unwrap_or_else(|| ext.msg_id().to_string());
        let properties = user_properties(props);
        debug!(
            %lite_topic,
            queue_offset,
            pop_time = answer.pop_time,
            round_trip_ms = round_trip.as_millis() as u64,
            broker = %broker.name,
            "popped"
        );
        messages.push(LiteMessage {
            handle: MessageHandle {
                broker: Arc::clone(broker),
                lite_topic: lite_topic.clone(),
                queue_offset,
                pop_time: answer.pop_time,
                invisible_time_ms: answer.invisible_time,
                revive_qid: answer.revive_qid,
                received_at,
                skew_hint: Arc::clone(&skew_hint),
                skew_window_ms: pop_time_skew_window(round_trip),
                released: Arc::new(AtomicBool::new(false)),
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

/// A popped message's LiteTopic and its offset in that LiteTopic's queue.
fn lite_topic_and_offset(props: &HashMap<CheetahString, CheetahString>) -> Option<(String, i64)> {
    let lite_topic = props.get(MessageConst::PROPERTY_LITE_TOPIC)?.to_string();
    let offsets = props.get(MessageConst::PROPERTY_INNER_MULTI_QUEUE_OFFSET)?;
    let queue_offset = offsets.as_str().split(',').next()?.trim().parse().ok()?;
    Some((lite_topic, queue_offset))
}

/// The properties the sender set (system and broker-internal ones left out).
fn user_properties(props: &HashMap<CheetahString, CheetahString>) -> HashMap<String, String> {
    props
        .iter()
        .filter(|(k, _)| {
            !STRING_HASH_SET.contains(k.as_str())
                && !BROKER_INTERNAL_PROPERTIES.contains(&k.as_str())
        })
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_change_tries_the_skews_near_the_hint_at_the_learned_place_first_and_every_pair_once() {
        let shifts = offset_shift_candidates(0);
        let attempts: Vec<(i64, i64)> = change_attempts(&shifts, 3, 40).collect();
        assert_eq!(attempts[..5], [(0, 3), (0, 4), (0, 2), (0, 5), (0, 1)]);
        assert_eq!(attempts[5..9], [(1, 3), (2, 3), (-1, 3), (-2, 3)]);
        assert_eq!(attempts[9..12], [(0, 0), (0, 6), (0, 7)]);
        let unique: HashSet<(i64, i64)> = attempts.iter().copied().collect();
        assert_eq!(unique.len(), attempts.len(), "a pair tried twice");
        assert_eq!(attempts.len(), shifts.len() * 41, "a pair left out");
        // Near the window's edges: nothing below 0 or past the window.
        let edge: Vec<(i64, i64)> = change_attempts(&[0], 0, 1).collect();
        assert_eq!(edge, [(0, 0), (0, 1)]);
    }

    #[test]
    fn redispatches_come_quickly_while_they_bring_messages_and_back_off_while_they_bring_none() {
        let start = Instant::now();
        let mut redispatch = Redispatch::new(start);
        // (ms since start, an empty pop, messages popped in all, due)
        let steps = [
            // Idle at first: an empty pop waits out the 500 ms, twice.
            (100, true, 0, false),
            (500, true, 0, true),
            (900, true, 0, false),
            (1000, true, 0, true),
            // Messages came since the last one: due after 50 ms.
            (1040, true, 100, false),
            (1050, true, 100, true),
            (1100, true, 200, true),
            // None since: 50 ms once more, then 100, 200, 400, 500, 500.
            (1150, true, 200, true),
            (1249, true, 200, false),
            (1250, true, 200, true),
            (1449, true, 200, false),
            (1450, true, 200, true),
            (1850, true, 200, true),
            (2349, true, 200, false),
            (2350, true, 200, true),
            (2849, true, 200, false),
            (2850, true, 200, true),
            // Without an empty pop only every 5 s, messages or not.
            (7849, false, 300, false),
            (7850, false, 300, true),
        ];
        for (ms, empty, messages, due) in steps {
            let now = start + Duration::from_millis(ms);
            assert_eq!(
                redispatch.due(now, empty, messages),
                due,
                "at {ms} ms: {redispatch:?}"
            );
        }
    }

    #[test]
    fn offset_shifts_are_tried_from_the_learned_one_then_either_side_then_none() {
        assert_eq!(offset_shift_candidates(0), vec![0, 1, 2, -1, -2]);
        assert_eq!(offset_shift_candidates(1), vec![1, 2, 3, 0, -1]);
        assert_eq!(offset_shift_candidates(3), vec![3, 4, 5, 2, 1, 0]);
    }

    #[test]
    fn the_pop_time_skew_window_follows_the_pops_round_trip_within_bounds() {
        let window = |ms| pop_time_skew_window(Duration::from_millis(ms));
        assert_eq!(window(0), MAX_POP_TIME_SKEW_MS);
        assert_eq!(window(3), MAX_POP_TIME_SKEW_MS);
        assert_eq!(window(120), 121);
        assert_eq!(window(60_000), POP_TIME_SKEW_CAP_MS);
        assert_eq!(pop_time_skew_window(Duration::MAX), POP_TIME_SKEW_CAP_MS);
    }
}
