//! A simulated GPU: continuous batching under a token budget, a KV cache of
//! bounded size and a FIFO waiting queue, in the manner of vLLM's scheduler.
//!
//! [`Scheduler`] is the pure part: its state advances only by
//! [`Scheduler::step`] with an elapsed time, so tests drive it with a fake
//! clock. [`Gpu`] wraps it for the server: one task per GPU steps it every
//! few milliseconds (only while it has work) and wakes the requests whose
//! tokens are ready; there is no timer per request or per token.
//!
//! The model of one step of `dt`:
//! - admission: the head of the waiting queue joins the running batch while
//!   the batch has fewer than `max_batch` requests and its whole context
//!   (prompt + tokens generated so far, plus one) fits in the free KV cache;
//!   strictly first in, first out (a large head blocks smaller ones behind it);
//! - budget: `tokens_per_s × dt` tokens, shared by the batch; prefill first
//!   (prompt tokens, in admission order), then decode: the rest is split
//!   evenly among the decoding requests (water-filling: a request capped by
//!   its own speed limit or nearly finished leaves its share to the others),
//!   so each request slows down as the batch grows;
//! - KV cache: a running request holds its context, prompt + generated so
//!   far. When decoding would overflow the cache, the request admitted last
//!   is preempted: it goes back to the head of the queue and recomputes its
//!   context (prefill again) when readmitted, as vLLM's recompute preemption.
//!
//! With [`SchedulingPolicy::Priority`] (vLLM's `--scheduling-policy
//! priority`) each request carries a `priority` (lower is served first, 0
//! by default): the waiting queue, admission and prefill go by (priority,
//! arrival) instead of arrival alone; a step's budget goes class by class
//! (a better class's prefill and decode before a worse class's prefill, so
//! another class's prompts never hold back its first token); a preemption
//! takes the running request of the largest (priority, arrival), as vLLM's
//! V1 scheduler does. A running request is never preempted only to make
//! room for a waiting one of a better priority.

use serde::{Deserialize, Serialize};
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::sync::{watch, Notify};

/// The longest step taken at once: a scheduler task starved for longer (a
/// loaded machine) does not turn the lost time into one burst of tokens.
const MAX_STEP: Duration = Duration::from_millis(250);

/// What the GPU can do; changeable at runtime (`POST /admin/capacity`).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Capacity {
    /// Tokens processed per second by the whole batch (prefill and decode).
    pub tokens_per_s: f64,
    /// Tokens of context (prompt + generated) the running requests may hold.
    pub kv_cache_tokens: u64,
    /// Requests running at once.
    pub max_batch: usize,
}

impl Capacity {
    pub fn validate(&self) -> Result<(), String> {
        if !(self.tokens_per_s.is_finite() && self.tokens_per_s > 0.0) {
            return Err(format!(
                "tokens_per_s must be a finite number > 0, not {}",
                self.tokens_per_s
            ));
        }
        if self.kv_cache_tokens == 0 {
            return Err("kv_cache_tokens must be > 0".into());
        }
        if self.max_batch == 0 {
            return Err("max_batch must be > 0".into());
        }
        Ok(())
    }
}

/// How the waiting queue is ordered (vLLM's `--scheduling-policy`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SchedulingPolicy {
    /// First come, first served; a request's `priority` must be 0.
    #[default]
    Fcfs,
    /// By (priority, arrival): lower priority values first.
    Priority,
}

/// The GPU model's settings (`SimConfig::gpu`; off when `None`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GpuConfig {
    pub capacity: Capacity,
    /// Requests allowed to wait; beyond, new ones are refused (429 or 503
    /// per `over_capacity`, with `Retry-After`). 0 = unbounded.
    pub max_waiting: usize,
    /// How often the scheduler steps while it has work.
    pub step: Duration,
    /// FCFS, or by each request's priority.
    pub policy: SchedulingPolicy,
}

impl Default for GpuConfig {
    fn default() -> Self {
        Self {
            capacity: Capacity {
                tokens_per_s: 2000.0,
                kv_cache_tokens: 32_768,
                max_batch: 64,
            },
            max_waiting: 0,
            step: Duration::from_millis(5),
            policy: SchedulingPolicy::Fcfs,
        }
    }
}

impl GpuConfig {
    pub fn validate(&self) -> Result<(), String> {
        self.capacity.validate()?;
        if self.step.is_zero() || self.step > MAX_STEP {
            return Err(format!(
                "the GPU step must be between 1 ms and {} ms, not {:?}",
                MAX_STEP.as_millis(),
                self.step
            ));
        }
        Ok(())
    }
}

/// Identifies a request inside one scheduler.
pub type SeqId = u64;

/// Why a request is not queued.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// `max_waiting` requests are waiting already.
    QueueFull,
    /// Its whole context (prompt + completion) is larger than the KV cache:
    /// it could never run.
    TooLong { context: u64, kv_cache_tokens: u64 },
    /// A `priority` other than 0 under [`SchedulingPolicy::Fcfs`] (vLLM
    /// refuses it the same way).
    PriorityNotEnabled { priority: i64 },
}

/// A request as the scheduler sees it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SeqSpec {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    /// The fastest this request decodes on its own, tokens/s (0 = no limit).
    pub max_tokens_per_s: f64,
    /// Lower is served first under [`SchedulingPolicy::Priority`] (vLLM's
    /// request `priority`); 0 by default.
    pub priority: i64,
}

#[derive(Clone, Debug)]
struct Seq {
    id: SeqId,
    spec: SeqSpec,
    /// Context computed into the cache so far (prefill progress); equals
    /// `context()` once decoding.
    computed: u64,
    generated: u64,
    /// Fraction of the next token decoded.
    partial: f64,
    submitted_at: Duration,
    first_token_seen: bool,
}

impl Seq {
    /// Its place under [`SchedulingPolicy::Priority`]: ids grow with arrival.
    fn rank(&self) -> (i64, SeqId) {
        (self.spec.priority, self.id)
    }

    fn context(&self) -> u64 {
        self.spec.prompt_tokens + self.generated
    }

    fn decoding(&self) -> bool {
        self.computed >= self.context()
    }

    fn remaining(&self) -> f64 {
        (self.spec.completion_tokens.saturating_sub(self.generated) as f64 - self.partial).max(0.0)
    }

    fn finished(&self) -> bool {
        self.generated >= self.spec.completion_tokens
    }
}

/// What changed for one request in a step.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Update {
    pub id: SeqId,
    /// Completion tokens generated so far.
    pub generated: u64,
    pub finished: bool,
    /// Set in the step that produced its first token: queue wait + prefill.
    pub time_to_first_token: Option<Duration>,
}

/// The gauges, as vLLM reports them.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Load {
    pub running: usize,
    pub waiting: usize,
    /// Context held by running requests ÷ the KV cache (0..=1).
    pub kv_cache_usage: f64,
}

/// The pure scheduler: state plus a clock that moves only in [`Scheduler::step`].
#[derive(Debug)]
pub struct Scheduler {
    capacity: Capacity,
    max_waiting: usize,
    policy: SchedulingPolicy,
    now: Duration,
    next_id: SeqId,
    waiting: VecDeque<Seq>,
    /// In admission order.
    running: Vec<Seq>,
}

impl Scheduler {
    pub fn new(capacity: Capacity, max_waiting: usize) -> Self {
        Self {
            capacity,
            max_waiting,
            policy: SchedulingPolicy::Fcfs,
            now: Duration::ZERO,
            next_id: 0,
            waiting: VecDeque::new(),
            running: Vec::new(),
        }
    }

    /// The same scheduler ordering its queue by `policy`.
    pub fn with_policy(mut self, policy: SchedulingPolicy) -> Self {
        self.policy = policy;
        self
    }

    pub fn capacity(&self) -> Capacity {
        self.capacity
    }

    /// Takes effect at the next step; running requests beyond a smaller
    /// cache are preempted then.
    pub fn set_capacity(&mut self, capacity: Capacity) {
        self.capacity = capacity;
    }

    /// Queues a request at the tail of the waiting queue (under
    /// [`SchedulingPolicy::Priority`]: behind those of its priority or better).
    pub fn submit(&mut self, spec: SeqSpec) -> Result<SeqId, Refusal> {
        let context = spec.prompt_tokens + spec.completion_tokens;
        if context > self.capacity.kv_cache_tokens {
            return Err(Refusal::TooLong {
                context,
                kv_cache_tokens: self.capacity.kv_cache_tokens,
            });
        }
        if self.max_waiting > 0 && self.waiting.len() >= self.max_waiting {
            return Err(Refusal::QueueFull);
        }
        if spec.priority != 0 && self.policy == SchedulingPolicy::Fcfs {
            return Err(Refusal::PriorityNotEnabled {
                priority: spec.priority,
            });
        }
        let id = self.next_id;
        self.next_id += 1;
        self.enqueue(Seq {
            id,
            spec,
            computed: 0,
            generated: 0,
            partial: 0.0,
            submitted_at: self.now,
            first_token_seen: false,
        });
        Ok(id)
    }

    /// Into the waiting queue: at the tail (FCFS), or in (priority,
    /// arrival) order.
    fn enqueue(&mut self, seq: Seq) {
        match self.policy {
            SchedulingPolicy::Fcfs => self.waiting.push_back(seq),
            SchedulingPolicy::Priority => {
                let at = self.waiting.partition_point(|w| w.rank() < seq.rank());
                self.waiting.insert(at, seq);
            }
        }
    }

    /// Forgets a request (its client went away), freeing its cache.
    pub fn cancel(&mut self, id: SeqId) {
        self.waiting.retain(|seq| seq.id != id);
        self.running.retain(|seq| seq.id != id);
    }

    pub fn is_idle(&self) -> bool {
        self.waiting.is_empty() && self.running.is_empty()
    }

    pub fn load(&self) -> Load {
        let used: u64 = self.running.iter().map(Seq::context).sum();
        Load {
            running: self.running.len(),
            waiting: self.waiting.len(),
            kv_cache_usage: (used as f64 / self.capacity.kv_cache_tokens as f64).min(1.0),
        }
    }

    /// Advances the clock by `dt`: admits, prefills, decodes, preempts and
    /// retires; returns the requests that made progress.
    pub fn step(&mut self, dt: Duration) -> Vec<Update> {
        let dt = dt.min(MAX_STEP);
        self.now += dt;
        self.admit();
        let mut budget = self.capacity.tokens_per_s * dt.as_secs_f64();
        let mut updates = Vec::new();
        match self.policy {
            SchedulingPolicy::Fcfs => {
                self.prefill(&mut budget, None);
                self.decode(budget, dt, &mut updates, None);
            }
            // Class by class: a better class's prefill and decode before a
            // worse class's prefill.
            SchedulingPolicy::Priority => {
                let mut classes: Vec<i64> = self.running.iter().map(|s| s.spec.priority).collect();
                classes.dedup();
                for class in classes {
                    self.prefill(&mut budget, Some(class));
                    budget -= self.decode(budget, dt, &mut updates, Some(class));
                }
            }
        }
        // Requests asking for no token end once prefilled (the others end
        // with the update of their last token).
        for seq in &self.running {
            if seq.spec.completion_tokens == 0 && seq.decoding() {
                updates.push(Update {
                    id: seq.id,
                    generated: 0,
                    finished: true,
                    time_to_first_token: None,
                });
            }
        }
        self.running
            .retain(|seq| !(seq.finished() && seq.decoding()));
        updates
    }

    fn kv_used(&self) -> u64 {
        self.running.iter().map(Seq::context).sum()
    }

    fn admit(&mut self) {
        while self.running.len() < self.capacity.max_batch {
            let Some(head) = self.waiting.front() else {
                break;
            };
            let needed = head.context() + 1;
            // A lone request always runs (its context fitted the cache when
            // it was queued; only a shrunk cache makes it overrun).
            if !self.running.is_empty() && self.kv_used() + needed > self.capacity.kv_cache_tokens {
                break;
            }
            if let Some(seq) = self.waiting.pop_front() {
                self.running.push(seq);
            }
        }
        if self.policy == SchedulingPolicy::Priority {
            // Prefill (and the next preemption) by rank; stable, so FCFS
            // within a priority.
            self.running.sort_by_key(Seq::rank);
        }
    }

    /// Computes the running requests' missing context, in admission order.
    /// A fraction of a token carries over to the next step in `partial`
    /// (unused until the request decodes): with less than one token of
    /// budget per step (a slow GPU stepped often) whole-token prefill would
    /// never progress, and a batch of requests readmitted after a
    /// preemption would stall for good.
    /// `class`: only the requests of that priority.
    fn prefill(&mut self, budget: &mut f64, class: Option<i64>) {
        for seq in &mut self.running {
            if *budget <= 0.0 {
                break;
            }
            if class.is_some_and(|c| c != seq.spec.priority) {
                continue;
            }
            let missing = seq.context().saturating_sub(seq.computed);
            if missing == 0 {
                continue;
            }
            let take = (missing as f64 - seq.partial).min(*budget).max(0.0);
            let total = seq.partial + take;
            let whole = ((total + 1e-9).floor() as u64).min(missing);
            seq.computed += whole;
            seq.partial = if seq.decoding() {
                0.0
            } else {
                total - whole as f64
            };
            *budget -= take;
        }
    }

    /// Splits `budget` over the decoding requests (of `class` only, when
    /// given) and grows their context, preempting the latest admitted while
    /// the growth overflows the cache. Returns the budget it used.
    fn decode(
        &mut self,
        budget: f64,
        dt: Duration,
        updates: &mut Vec<Update>,
        class: Option<i64>,
    ) -> f64 {
        let (mut gains, mut used) = self.decode_gains(budget, dt, class);
        while self.running.len() > 1
            && self.kv_used() + gains.iter().map(|g| g.1).sum::<u64>()
                > self.capacity.kv_cache_tokens
        {
            self.preempt_last();
            (gains, used) = self.decode_gains(budget, dt, class);
        }
        for (index, whole, partial) in gains {
            let now = self.now;
            let Some(seq) = self.running.get_mut(index) else {
                continue;
            };
            seq.partial = partial;
            if whole == 0 {
                continue;
            }
            seq.generated += whole;
            seq.computed += whole;
            let first = !seq.first_token_seen;
            seq.first_token_seen = true;
            updates.push(Update {
                id: seq.id,
                generated: seq.generated,
                finished: seq.finished(),
                time_to_first_token: first.then(|| now.saturating_sub(seq.submitted_at)),
            });
        }
        used
    }

    /// `(index in running, whole tokens gained, fraction left over)` per
    /// decoding request (of `class`, when given), and the budget shared.
    fn decode_gains(
        &self,
        budget: f64,
        dt: Duration,
        class: Option<i64>,
    ) -> (Vec<(usize, u64, f64)>, f64) {
        let decoding: Vec<usize> = (0..self.running.len())
            .filter(|&i| self.running[i].decoding() && !self.running[i].finished())
            .filter(|&i| class.is_none_or(|c| c == self.running[i].spec.priority))
            .collect();
        let limits: Vec<f64> = decoding
            .iter()
            .map(|&i| {
                let seq = &self.running[i];
                let speed = if seq.spec.max_tokens_per_s > 0.0 {
                    seq.spec.max_tokens_per_s * dt.as_secs_f64()
                } else {
                    f64::INFINITY
                };
                speed.min(seq.remaining())
            })
            .collect();
        let shares = water_fill(budget, &limits);
        let used = shares.iter().sum();
        let gains = decoding
            .iter()
            .zip(shares)
            .map(|(&i, share)| {
                let seq = &self.running[i];
                let total = seq.partial + share;
                // A share that reaches the last token within rounding ends it.
                let total = if total + 1e-9 >= seq.remaining() + seq.partial {
                    total.ceil()
                } else {
                    total
                };
                let whole = (total.floor() as u64)
                    .min(seq.spec.completion_tokens.saturating_sub(seq.generated));
                (i, whole, (total - whole as f64).max(0.0))
            })
            .collect();
        (gains, used)
    }

    /// Preempts the request admitted last (FCFS) or of the largest
    /// (priority, arrival) (the running batch is kept in that order).
    fn preempt_last(&mut self) {
        if let Some(mut seq) = self.running.pop() {
            seq.computed = 0;
            seq.partial = 0.0;
            match self.policy {
                SchedulingPolicy::Fcfs => self.waiting.push_front(seq),
                SchedulingPolicy::Priority => self.enqueue(seq),
            }
        }
    }
}

/// Splits `budget` evenly among claimants, none above its limit; what a
/// limited claimant leaves goes to the others.
fn water_fill(budget: f64, limits: &[f64]) -> Vec<f64> {
    let mut shares = vec![0.0; limits.len()];
    let mut order: Vec<usize> = (0..limits.len()).collect();
    order.sort_by(|&a, &b| limits[a].total_cmp(&limits[b]));
    let mut left = budget.max(0.0);
    let mut claimants = limits.len();
    for i in order {
        let even = left / claimants as f64;
        let share = limits[i].min(even).max(0.0);
        shares[i] = share;
        left -= share;
        claimants -= 1;
    }
    shares
}

/// The GPU's answer to "is token n ready?".
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Progress {
    pub generated: u64,
    pub finished: bool,
}

/// Hooks the server gives a GPU to report to its metrics.
pub trait GpuObserver: Send + Sync {
    fn load(&self, model: &str, load: Load);
    fn tokens(&self, model: &str, prompt: u64, generated: u64);
    fn first_token(&self, model: &str, after: Duration);
}

struct State {
    scheduler: Scheduler,
    watchers: HashMap<SeqId, watch::Sender<Progress>>,
}

/// One simulated GPU serving one model, shared by the request handlers and
/// its stepping task.
pub struct Gpu {
    model: String,
    base: Capacity,
    state: Mutex<State>,
    wake: Notify,
    closed: AtomicBool,
    observer: Arc<dyn GpuObserver>,
}

impl Gpu {
    /// Starts the GPU and its stepping task (on the current Tokio runtime).
    pub fn start(model: String, config: GpuConfig, observer: Arc<dyn GpuObserver>) -> GpuHandle {
        let gpu = Arc::new(Gpu {
            model,
            base: config.capacity,
            state: Mutex::new(State {
                scheduler: Scheduler::new(config.capacity, config.max_waiting)
                    .with_policy(config.policy),
                watchers: HashMap::new(),
            }),
            wake: Notify::new(),
            closed: AtomicBool::new(false),
            observer,
        });
        gpu.report();
        tokio::spawn(drive(gpu.clone(), config.step));
        GpuHandle(gpu)
    }

    pub fn model(&self) -> &str {
        &self.model
    }

    /// The capacity it started with (the base of `factor`).
    pub fn base_capacity(&self) -> Capacity {
        self.base
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // A panic while stepping leaves numbers, not broken invariants worth dying for.
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub fn capacity(&self) -> Capacity {
        self.state().scheduler.capacity()
    }

    pub fn set_capacity(&self, capacity: Capacity) {
        self.state().scheduler.set_capacity(capacity);
        tracing::info!(
            model = %self.model,
            tokens_per_s = capacity.tokens_per_s,
            kv_cache_tokens = capacity.kv_cache_tokens,
            max_batch = capacity.max_batch,
            "GPU capacity changed"
        );
        self.wake.notify_one();
    }

    /// Queues a request; its [`Ticket`] follows its progress and cancels it
    /// when dropped.
    pub fn submit(self: &Arc<Self>, spec: SeqSpec) -> Result<Ticket, Refusal> {
        let (sender, progress) = watch::channel(Progress::default());
        let id = {
            let mut state = self.state();
            let id = state.scheduler.submit(spec)?;
            state.watchers.insert(id, sender);
            self.observer.load(&self.model, state.scheduler.load());
            id
        };
        self.observer.tokens(&self.model, spec.prompt_tokens, 0);
        self.wake.notify_one();
        Ok(Ticket {
            gpu: self.clone(),
            id,
            progress,
        })
    }

    fn cancel(&self, id: SeqId) {
        let mut state = self.state();
        state.scheduler.cancel(id);
        state.watchers.remove(&id);
        self.observer.load(&self.model, state.scheduler.load());
    }

    fn step(&self, dt: Duration) {
        let mut state = self.state();
        let updates = state.scheduler.step(dt);
        let mut generated = 0;
        for update in &updates {
            if let Some(after) = update.time_to_first_token {
                self.observer.first_token(&self.model, after);
            }
            let Some(watcher) = state.watchers.get(&update.id) else {
                continue;
            };
            let before = watcher.borrow().generated;
            generated += update.generated.saturating_sub(before);
            watcher.send_replace(Progress {
                generated: update.generated,
                finished: update.finished,
            });
            if update.finished {
                state.watchers.remove(&update.id);
            }
        }
        self.observer.load(&self.model, state.scheduler.load());
        drop(state);
        self.observer.tokens(&self.model, 0, generated);
    }

    fn report(&self) {
        self.observer
            .load(&self.model, self.state().scheduler.load());
    }

    fn is_idle(&self) -> bool {
        self.state().scheduler.is_idle()
    }
}

/// Owns a GPU for the server; dropping it stops the stepping task.
pub struct GpuHandle(Arc<Gpu>);

impl std::ops::Deref for GpuHandle {
    type Target = Arc<Gpu>;
    fn deref(&self) -> &Arc<Gpu> {
        &self.0
    }
}

impl Drop for GpuHandle {
    fn drop(&mut self) {
        self.0.closed.store(true, Ordering::Release);
        self.0.wake.notify_one();
    }
}

/// Steps the GPU every `period` while it has work, sleeps while idle.
async fn drive(gpu: Arc<Gpu>, period: Duration) {
    let mut last = tokio::time::Instant::now();
    while !gpu.closed.load(Ordering::Acquire) {
        if gpu.is_idle() {
            gpu.wake.notified().await;
            last = tokio::time::Instant::now();
            continue;
        }
        tokio::time::sleep(period).await;
        let now = tokio::time::Instant::now();
        gpu.step(now - last);
        last = now;
    }
    // Wake whoever still waits: their answers end now.
    gpu.state().watchers.clear();
}

/// One queued or running request.
pub struct Ticket {
    gpu: Arc<Gpu>,
    id: SeqId,
    progress: watch::Receiver<Progress>,
}

impl Ticket {
    /// Waits until `tokens` completion tokens are generated (or the GPU stops).
    pub async fn generated(&mut self, tokens: u64) {
        // An error means the GPU stopped: nothing more will come.
        let _ = self
            .progress
            .wait_for(|p| p.finished || p.generated >= tokens)
            .await;
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        if !self.progress.borrow().finished {
            self.gpu.cancel(self.id);
        }
    }
}

/// One GPU per served model (the first model also serves requests naming
/// a model not listed).
pub struct GpuSet {
    gpus: Vec<GpuHandle>,
}

/// A change of capacity (`POST /admin/capacity`): absolute values, or a
/// `factor` applied to the capacity each GPU started with.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CapacityChange {
    /// Only this model's GPU; all when absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tokens_per_s: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kv_cache_tokens: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_batch: Option<usize>,
    /// Scales the starting `tokens_per_s` and `kv_cache_tokens` (1 restores them).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub factor: Option<f64>,
}

/// A GPU's capacity and load, as `/admin/capacity` reports them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GpuStatus {
    pub model: String,
    #[serde(flatten)]
    pub capacity: Capacity,
    pub running: usize,
    pub waiting: usize,
    pub kv_cache_usage: f64,
}

/// The answer of `/admin/capacity`: every GPU's status.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CapacityReport {
    pub gpus: Vec<GpuStatus>,
}

/// Why a capacity change is refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ChangeError {
    UnknownModel(String),
    Invalid(String),
}

impl std::fmt::Display for ChangeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ChangeError::UnknownModel(model) => {
                write!(f, "no simulated GPU serves model {model:?}")
            }
            ChangeError::Invalid(problem) => f.write_str(problem),
        }
    }
}

impl GpuSet {
    /// Starts one GPU per model (at least one: `models` must not be empty).
    pub fn start(models: &[String], config: GpuConfig, observer: Arc<dyn GpuObserver>) -> Self {
        let gpus = models
            .iter()
            .map(|model| Gpu::start(model.clone(), config, observer.clone()))
            .collect();
        Self { gpus }
    }

    /// The GPU serving `model`.
    pub fn for_model(&self, model: &str) -> Option<&Arc<Gpu>> {
        self.gpus
            .iter()
            .find(|gpu| gpu.model() == model)
            .or_else(|| self.gpus.first())
            .map(|handle| &handle.0)
    }

    pub fn status(&self) -> Vec<GpuStatus> {
        self.gpus
            .iter()
            .map(|gpu| {
                let state = gpu.state();
                let load = state.scheduler.load();
                GpuStatus {
                    model: gpu.model.clone(),
                    capacity: state.scheduler.capacity(),
                    running: load.running,
                    waiting: load.waiting,
                    kv_cache_usage: load.kv_cache_usage,
                }
            })
            .collect()
    }

    /// Applies `change` to the GPUs it names (all of them, or none when invalid).
    pub fn change(&self, change: &CapacityChange) -> Result<Vec<GpuStatus>, ChangeError> {
        let absolute = change.tokens_per_s.is_some() || change.kv_cache_tokens.is_some();
        if change.factor.is_some() && absolute {
            return Err(ChangeError::Invalid(
                "give either factor or tokens_per_s / kv_cache_tokens, not both".into(),
            ));
        }
        if let Some(factor) = change.factor {
            if !(factor.is_finite() && factor > 0.0) {
                return Err(ChangeError::Invalid(format!(
                    "factor must be a finite number > 0, not {factor}"
                )));
            }
        }
        let targets: Vec<&GpuHandle> = match &change.model {
            None => self.gpus.iter().collect(),
            Some(model) => {
                let found: Vec<&GpuHandle> =
                    self.gpus.iter().filter(|g| g.model() == model).collect();
                if found.is_empty() {
                    return Err(ChangeError::UnknownModel(model.clone()));
                }
                found
            }
        };
        let planned = targets
            .iter()
            .map(|gpu| {
                let capacity = changed(gpu.capacity(), gpu.base_capacity(), change);
                capacity.validate().map_err(ChangeError::Invalid)?;
                Ok((gpu, capacity))
            })
            .collect::<Result<Vec<_>, ChangeError>>()?;
        for (gpu, capacity) in planned {
            gpu.set_capacity(capacity);
        }
        Ok(self.status())
    }
}

fn changed(current: Capacity, base: Capacity, change: &CapacityChange) -> Capacity {
    let mut next = current;
    if let Some(factor) = change.factor {
        next.tokens_per_s = base.tokens_per_s * factor;
        next.kv_cache_tokens = (base.kv_cache_tokens as f64 * factor).round() as u64;
    }
    if let Some(tokens_per_s) = change.tokens_per_s {
        next.tokens_per_s = tokens_per_s;
    }
    if let Some(kv_cache_tokens) = change.kv_cache_tokens {
        next.kv_cache_tokens = kv_cache_tokens;
    }
    if let Some(max_batch) = change.max_batch {
        next.max_batch = max_batch;
    }
    next
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    fn capacity(tokens_per_s: f64, kv: u64, batch: usize) -> Capacity {
        Capacity {
            tokens_per_s,
            kv_cache_tokens: kv,
            max_batch: batch,
        }
    }

    fn spec(prompt: u64, completion: u64) -> SeqSpec {
        SeqSpec {
            prompt_tokens: prompt,
            completion_tokens: completion,
            max_tokens_per_s: 0.0,
            priority: 0,
        }
    }

    fn with_priority(spec: SeqSpec, priority: i64) -> SeqSpec {
        SeqSpec { priority, ..spec }
    }

    /// The ids in the order their first token came.
    fn first_token_order(updates: &[Update]) -> Vec<SeqId> {
        updates
            .iter()
            .filter(|u| u.time_to_first_token.is_some())
            .map(|u| u.id)
            .collect()
    }

    #[test]
    fn priority_scheduling_serves_the_lower_value_first_then_arrival() {
        let run = |policy: SchedulingPolicy| {
            // One request at a time: the order of service is the queue's.
            let mut s = Scheduler::new(capacity(1000.0, 1_000_000, 1), 0).with_policy(policy);
            let running = s.submit(spec(10, 10)).unwrap();
            s.step(MS);
            let late_low = s.submit(with_priority(spec(10, 10), 1)).unwrap();
            let later_low = s.submit(with_priority(spec(10, 10), 1)).unwrap();
            let urgent = s.submit(spec(10, 10)).unwrap();
            let (_, updates) = run_to_end(&mut s, MS);
            (
                running,
                late_low,
                later_low,
                urgent,
                first_token_order(&updates),
            )
        };
        let (running, late_low, later_low, urgent, order) = run(SchedulingPolicy::Priority);
        // The running one is not preempted for it; then 0 before 1.
        assert_eq!(order, vec![running, urgent, late_low, later_low]);
        let mut fcfs = Scheduler::new(capacity(1000.0, 1_000_000, 1), 0);
        assert_eq!(
            fcfs.submit(with_priority(spec(10, 10), 1)),
            Err(Refusal::PriorityNotEnabled { priority: 1 })
        );
    }

    #[test]
    fn priority_scheduling_prefills_the_lower_value_first_in_the_batch() {
        // Both admitted at once; 100 tokens/s: the 50-token prompts take
        // 0.5 s each. The later, lower value is prefilled first.
        let mut s = Scheduler::new(capacity(100.0, 1_000_000, 8), 0)
            .with_policy(SchedulingPolicy::Priority);
        let deferred = s.submit(with_priority(spec(50, 1), 1)).unwrap();
        let in_quota = s.submit(spec(50, 1)).unwrap();
        let (_, updates) = run_to_end(&mut s, 10 * MS);
        assert_eq!(first_token_order(&updates), vec![in_quota, deferred]);
    }

    #[test]
    fn another_classs_prompts_do_not_hold_back_a_better_classs_first_token() {
        // 100 tokens/s: `urgent` (10-token prompt) is prefilled in 0.1 s;
        // then a 500-token deferred prompt arrives. FCFS spends the whole
        // budget on that prefill before decoding (5 s); by class, the
        // better class's decode comes first.
        let first_token = |policy: SchedulingPolicy, deferred: i64| {
            let mut s = Scheduler::new(capacity(100.0, 1_000_000, 8), 0).with_policy(policy);
            let urgent = s.submit(spec(10, 5)).unwrap();
            for _ in 0..10 {
                s.step(10 * MS);
            }
            s.submit(with_priority(spec(500, 5), deferred)).unwrap();
            let (_, updates) = run_to_end(&mut s, 10 * MS);
            updates
                .iter()
                .find(|u| u.id == urgent)
                .and_then(|u| u.time_to_first_token)
                .unwrap()
        };
        assert!(first_token(SchedulingPolicy::Priority, 1) < 200 * MS);
        assert!(first_token(SchedulingPolicy::Fcfs, 0) > 5_000 * MS);
    }

    #[test]
    fn priority_preemption_takes_the_largest_value() {
        // Both fit at admission (2 × 41 of 110), not at the end (2 × 60):
        // one is preempted while decoding, the one of the larger value.
        let run = |policy: SchedulingPolicy| {
            let mut s = Scheduler::new(capacity(1000.0, 110, 8), 0).with_policy(policy);
            let low = s.submit(with_priority(spec(40, 20), 1)).unwrap();
            let high = s.submit(spec(40, 20)).unwrap();
            let (_, updates) = run_to_end(&mut s, MS);
            let finished: Vec<SeqId> = updates
                .iter()
                .filter(|u| u.finished)
                .map(|u| u.id)
                .collect();
            (low, high, finished)
        };
        // (FCFS would take `high`, admitted last.)
        let (low, high, finished) = run(SchedulingPolicy::Priority);
        assert_eq!(finished, vec![high, low]);
    }

    /// Steps of `dt` until idle; returns (elapsed, updates).
    fn run_to_end(s: &mut Scheduler, dt: Duration) -> (Duration, Vec<Update>) {
        let mut elapsed = Duration::ZERO;
        let mut all = Vec::new();
        for _ in 0..1_000_000 {
            if s.is_idle() {
                break;
            }
            all.extend(s.step(dt));
            elapsed += dt;
        }
        (elapsed, all)
    }

    #[test]
    fn throughput_is_the_budget_whatever_the_batch() {
        for n in [1, 4, 16] {
            let mut s = Scheduler::new(capacity(1000.0, 1_000_000, 64), 0);
            for _ in 0..n {
                s.submit(spec(0, 1000 / n)).unwrap();
            }
            let (elapsed, updates) = run_to_end(&mut s, 5 * MS);
            let tokens: u64 = updates
                .iter()
                .filter(|u| u.finished)
                .map(|u| u.generated)
                .sum();
            assert_eq!(tokens, (1000 / n) * n);
            // One second of budget, give or take a step of rounding.
            assert!(
                (990..=1015).contains(&(elapsed.as_millis() as u64)),
                "{n}: {elapsed:?}"
            );
        }
    }

    #[test]
    fn prefill_progresses_with_less_than_a_token_per_step() {
        // 80 tokens/s stepped every 10 ms: 0.8 tokens of budget per step.
        // Whole-token prefill never started; now 4 × 16 prompt tokens take
        // 0.8 s and 4 × 40 generated 2 s more.
        let mut s = Scheduler::new(capacity(80.0, 1_000_000, 64), 0);
        for _ in 0..4 {
            s.submit(spec(16, 40)).unwrap();
        }
        let (elapsed, updates) = run_to_end(&mut s, 10 * MS);
        assert_eq!(updates.iter().filter(|u| u.finished).count(), 4);
        assert!(
            (2790..=2830).contains(&(elapsed.as_millis() as u64)),
            "{elapsed:?}"
        );
    }

    #[test]
    fn per_request_speed_falls_as_the_batch_grows() {
        let first_finish = |n: usize| {
            let mut s = Scheduler::new(capacity(1000.0, 1_000_000, 64), 0);
            for _ in 0..n {
                s.submit(spec(0, 100)).unwrap();
            }
            let mut elapsed = Duration::ZERO;
            loop {
                elapsed += MS;
                if s.step(MS).iter().any(|u| u.finished) {
                    return elapsed;
                }
            }
        };
        let alone = first_finish(1);
        let ten = first_finish(10);
        assert!((99..=102).contains(&alone.as_millis()), "{alone:?}");
        assert!((999..=1002).contains(&ten.as_millis()), "{ten:?}");
    }

    #[test]
    fn a_speed_limit_leaves_its_share_to_others() {
        let mut s = Scheduler::new(capacity(1000.0, 1_000_000, 64), 0);
        let slow = s
            .submit(SeqSpec {
                max_tokens_per_s: 100.0,
                ..spec(0, 1000)
            })
            .unwrap();
        let fast = s.submit(spec(0, 1000)).unwrap();
        let mut generated = HashMap::new();
        for _ in 0..100 {
            for u in s.step(10 * MS) {
                generated.insert(u.id, u.generated);
            }
        }
        // One second: the slow one at its 100/s, the other gets the rest.
        assert!((99..=100).contains(&generated[&slow]), "{generated:?}");
        assert!((899..=900).contains(&generated[&fast]), "{generated:?}");
        assert_eq!(
            water_fill(10.0, &[1.0, f64::INFINITY, 2.0]),
            [1.0, 7.0, 2.0]
        );
        assert_eq!(water_fill(3.0, &[5.0, 5.0, 5.0]), [1.0, 1.0, 1.0]);
    }

    #[test]
    fn prefill_spends_the_budget_and_delays_the_first_token() {
        let mut s = Scheduler::new(capacity(1000.0, 1_000_000, 64), 0);
        s.submit(spec(500, 10)).unwrap();
        let (_, updates) = run_to_end(&mut s, 10 * MS);
        let ttft = updates.iter().find_map(|u| u.time_to_first_token).unwrap();
        // 500 prompt tokens at 1000/s: the first token in the step that ends at 510 ms.
        assert_eq!(ttft, 510 * MS);
    }

    #[test]
    fn max_batch_and_the_kv_cache_bound_the_running_batch_fifo() {
        let mut s = Scheduler::new(capacity(1000.0, 100, 2), 0);
        let a = s.submit(spec(10, 10)).unwrap();
        let b = s.submit(spec(10, 10)).unwrap();
        let c = s.submit(spec(10, 10)).unwrap();
        s.step(MS);
        assert_eq!(s.load().running, 2);
        assert_eq!(s.load().waiting, 1);
        // The KV cache: 100 tokens hold three prompts of 30, not four.
        let mut s = Scheduler::new(capacity(1000.0, 100, 64), 0);
        for _ in 0..4 {
            s.submit(spec(30, 5)).unwrap();
        }
        s.step(MS);
        assert_eq!(s.load().running, 3);
        assert!(s.load().kv_cache_usage <= 1.0);
        // First in, first out: the first two finish before the third starts.
        let mut order = Vec::new();
        let mut s2 = Scheduler::new(capacity(1000.0, 100, 2), 0);
        for _ in 0..3 {
            s2.submit(spec(10, 10)).unwrap();
        }
        let (_, updates) = run_to_end(&mut s2, MS);
        for u in updates.iter().filter(|u| u.finished) {
            order.push(u.id);
        }
        assert_eq!(order.last(), Some(&c));
        assert!(order.starts_with(&[a, b]) || order.starts_with(&[b, a]));
    }

    #[test]
    fn kv_overflow_preempts_the_latest_and_usage_stays_within_one() {
        // Two requests whose prompts fit but whose full contexts do not.
        let mut s = Scheduler::new(capacity(100.0, 60, 8), 0);
        let first = s.submit(spec(20, 20)).unwrap();
        let second = s.submit(spec(20, 20)).unwrap();
        let mut preempted = false;
        let mut finished = Vec::new();
        for _ in 0..10_000 {
            if s.is_idle() {
                break;
            }
            for u in s.step(10 * MS) {
                if u.finished {
                    finished.push(u.id);
                }
            }
            let load = s.load();
            assert!(load.kv_cache_usage <= 1.0);
            assert!(s.kv_used() <= 60, "{}", s.kv_used());
            preempted |= load.waiting == 1 && load.running == 1 && finished.is_empty();
        }
        assert!(preempted, "the second request should have been preempted");
        assert_eq!(finished, [first, second]);
    }

    #[test]
    fn refusals_queue_limit_and_too_long() {
        let mut s = Scheduler::new(capacity(100.0, 50, 1), 1);
        assert_eq!(
            s.submit(spec(40, 20)),
            Err(Refusal::TooLong {
                context: 60,
                kv_cache_tokens: 50
            })
        );
        s.submit(spec(1, 1)).unwrap();
        assert_eq!(s.submit(spec(1, 1)), Err(Refusal::QueueFull));
        s.step(MS);
        // Admitted: the queue has room again.
        s.submit(spec(1, 1)).unwrap();
    }

    #[test]
    fn cancel_frees_the_cache_and_capacity_changes_apply() {
        let mut s = Scheduler::new(capacity(1000.0, 1000, 8), 0);
        let a = s.submit(spec(100, 100)).unwrap();
        s.step(MS);
        assert!(s.load().kv_cache_usage > 0.0);
        s.cancel(a);
        assert!(s.is_idle());
        assert_eq!(s.load().kv_cache_usage, 0.0);
        // Halving the budget doubles the time.
        let time = |tps: f64| {
            let mut s = Scheduler::new(capacity(1000.0, 1_000_000, 8), 0);
            s.set_capacity(capacity(tps, 1_000_000, 8));
            s.submit(spec(0, 200)).unwrap();
            run_to_end(&mut s, MS).0
        };
        assert_eq!(time(1000.0) * 2, time(500.0));
    }

    #[test]
    fn time_to_first_token_includes_the_queue_wait() {
        let mut s = Scheduler::new(capacity(1000.0, 1_000_000, 1), 0);
        s.submit(spec(0, 100)).unwrap();
        let second = s.submit(spec(0, 100)).unwrap();
        let (_, updates) = run_to_end(&mut s, MS);
        let ttft = updates
            .iter()
            .find(|u| u.id == second)
            .and_then(|u| u.time_to_first_token)
            .unwrap();
        // Waits 100 ms for the first, then 1 ms for its own first token.
        assert_eq!(ttft, 101 * MS);
    }

    #[test]
    fn a_request_for_no_token_ends_after_its_prefill() {
        let mut s = Scheduler::new(capacity(1000.0, 1000, 8), 0);
        let id = s.submit(spec(5, 0)).unwrap();
        let updates = s.step(10 * MS);
        assert_eq!(
            updates,
            [Update {
                id,
                generated: 0,
                finished: true,
                time_to_first_token: None
            }]
        );
        assert!(s.is_idle());
    }

    #[test]
    fn capacity_changes_are_absolute_or_a_factor_of_the_start() {
        let base = capacity(1000.0, 1000, 8);
        let now = capacity(300.0, 10, 2);
        let half = CapacityChange {
            factor: Some(0.5),
            ..CapacityChange::default()
        };
        assert_eq!(changed(now, base, &half), capacity(500.0, 500, 2));
        let batch = CapacityChange {
            tokens_per_s: Some(42.0),
            max_batch: Some(3),
            ..CapacityChange::default()
        };
        assert_eq!(changed(now, base, &batch), capacity(42.0, 10, 3));
    }

    #[test]
    fn capacity_validation() {
        assert!(GpuConfig::default().validate().is_ok());
        assert!(capacity(0.0, 1, 1).validate().is_err());
        assert!(capacity(f64::NAN, 1, 1).validate().is_err());
        assert!(capacity(1.0, 0, 1).validate().is_err());
        assert!(capacity(1.0, 1, 0).validate().is_err());
        let zero_step = GpuConfig {
            step: Duration::ZERO,
            ..GpuConfig::default()
        };
        assert!(zero_step.validate().is_err());
    }
}
