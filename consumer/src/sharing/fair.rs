//! Fair sharing of a model's admitted concurrency between tenants.
//!
//! Messages of a model that wait for one of its in-flight slots queue here
//! (one lane per tenant; a lane is a bucket, since a bucket is tenant ×
//! model), and each free slot goes to:
//!
//! 1. the highest priority band among the lanes' heads (high, then normal,
//!    then low; strict);
//! 2. inside the band, the lane with the smallest *virtual finish*: start-time
//!    fair queueing on tokens. A lane's next request starts at
//!    `S = max(V, F_lane)` and finishes at `F = S + cost / weight` (cost =
//!    the request's estimated tokens), `V` being the start of the request
//!    served last *in the same band* (one virtual clock per band: a band
//!    above that is served in between must not move the clock of the band
//!    below, or each of its tenants would come back at the moved clock as
//!    if idle, and their weights would be lost — round robin instead of
//!    weighted shares). Backlogged tenants thus get slots in proportion to their
//!    weight in tokens; a tenant back from idle starts at `V` (no credit for
//!    its idle time), and an idle or paced tenant's share goes to the
//!    others (work-conserving);
//! 3. ties: the earlier arrival.
//!
//! Only a lane's head is ever chosen, so a bucket is served in the order its
//! messages were popped (its publish order). A head that its bucket's GCRA
//! rate makes wait is set aside until its slot ([`FairQueue::defer`]): the
//! per-bucket rates stay ceilings and the others go on meanwhile.
//!
//! **Order by attained service** ([`Order::AttainedService`], issue 28):
//! step 2 instead picks the lane whose tenant has *received* the least
//! service so far, per unit of weight — virtual token counters (VTC, Sheng
//! et al., OSDI 2024). Service is what the tenant's calls actually
//! used, charged as it happens ([`FairQueue::charge`], by each call's
//! [`CallCharge`]: the prompt as the call starts, the output as it
//! streams, the difference to the usage at its end): prompt tokens and
//! output tokens weighted by [`ServiceCost`] (default 1 and 2, as VTC), for
//! every call the consumer makes — a request deferred over quota and one
//! routed into the queue in quota alike — so a tenant that had little is
//! served first, and in-quota tenants queued beside deferred work come
//! first by virtue of their low service. A tenant back from idle (nothing
//! waiting, nothing started and not [finished](FairQueue::finish)) is
//! lifted to the least counter among the waiting tenants: no credit for
//! its idle time.
//!
//! [`FairQueue`] is pure (no clock, no I/O); [`FairShare`] holds one per
//! model for the pop loop.

use super::charge::ServiceCounters;
pub use super::charge::{CallCharge, ServiceCost};
use sluice_contract::Priority;
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, RwLock};
use tokio::sync::Notify;

/// A waiting message's place in a [`FairQueue`].
pub type TicketId = u64;

#[derive(Clone, Copy, Debug)]
struct Ticket {
    id: TicketId,
    priority: Priority,
    cost: f64,
    /// Not chosen before this time (its bucket's pacing slot), ms.
    eligible_at_ms: u64,
}

/// One value per priority band.
#[derive(Clone, Copy, Debug, Default)]
struct PerBand([f64; 3]);

impl PerBand {
    fn index(band: Priority) -> usize {
        match band {
            Priority::Low => 0,
            Priority::Normal => 1,
            Priority::High => 2,
        }
    }

    fn get(&self, band: Priority) -> f64 {
        self.0[Self::index(band)]
    }

    fn set(&mut self, band: Priority, value: f64) {
        self.0[Self::index(band)] = value;
    }
}

#[derive(Debug)]
struct Lane {
    weight: f64,
    /// Virtual finish of the lane's last started request, per band.
    last_finish: PerBand,
    /// Virtual start of the head, fixed when it became the head (start-time
    /// fair queueing: a tag computed at pick time would follow the virtual
    /// time and starve a light lane).
    head_start: f64,
    waiting: VecDeque<Ticket>,
    /// Started requests not yet handed to their connection
    /// ([`FairQueue::sending`]): the lane's next head waits for them.
    sending: usize,
}

/// How a band's lanes are ordered.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub enum Order {
    /// Start-time fair queueing on the requests' estimates.
    #[default]
    VirtualFinish,
    /// Least service received first (VTC), counted by [`FairQueue::charge`].
    AttainedService,
}

/// The waiting messages of one model, by tenant.
#[derive(Debug, Default)]
pub struct FairQueue {
    order: Order,
    /// Per band: the virtual start of the request of that band served last.
    virtual_time: PerBand,
    lanes: HashMap<String, Lane>,
    /// Service received per tenant ÷ its weight ([`Order::AttainedService`]).
    attained: HashMap<String, f64>,
    /// Requests started and not finished, per tenant ([`Order::AttainedService`]):
    /// a tenant with one running is not idle (not lifted when it queues again).
    in_service: HashMap<String, usize>,
    /// The highest "least counter among the waiting tenants" seen: a tenant
    /// back from idle starts at least there, so counters at or below it
    /// can be forgotten.
    floor: f64,
    next_id: TicketId,
}

impl FairQueue {
    pub fn new(order: Order) -> Self {
        FairQueue {
            order,
            ..FairQueue::default()
        }
    }

    /// `tenant` received `service` (tokens weighted by [`ServiceCost`]) on
    /// any path: counted against its weight ([`Order::AttainedService`];
    /// nothing otherwise).
    pub fn charge(&mut self, tenant: &str, service: f64, weight: f64) {
        if self.order != Order::AttainedService || !(service.is_finite() && service > 0.0) {
            return;
        }
        *self.attained.entry(tenant.to_string()).or_default() += service / sanitize_weight(weight);
    }

    /// Takes back `service` charged ahead (an estimate above what was
    /// used); the counter never goes below zero.
    pub fn refund(&mut self, tenant: &str, service: f64, weight: f64) {
        if self.order != Order::AttainedService || !(service.is_finite() && service > 0.0) {
            return;
        }
        if let Some(counter) = self.attained.get_mut(tenant) {
            *counter = (*counter - service / sanitize_weight(weight)).max(0.0);
        }
    }

    /// Service `tenant` received so far ÷ its weight, as the order sees it.
    pub fn attained(&self, tenant: &str) -> f64 {
        self.attained.get(tenant).copied().unwrap_or(0.0)
    }

    /// How far `tenant` is ahead of the least served active tenant (one
    /// with a message waiting or a call running), in steps of `quantum`
    /// service per unit of weight, at most `levels - 1`; 0 for the least
    /// served, and always 0 unless ordered by attained service. Added to
    /// the backend's `server_priority` (vLLM: lower first), it carries the
    /// order by attained service into the server's own queue: a tenant that
    /// received more waits there behind one that received less.
    pub fn service_level(&self, tenant: &str, quantum: f64, levels: u32) -> u32 {
        if self.order != Order::AttainedService || !(quantum.is_finite() && quantum > 0.0) {
            return 0;
        }
        let least = self
            .lanes
            .iter()
            .filter(|(_, lane)| !lane.waiting.is_empty())
            .map(|(t, _)| t)
            .chain(self.in_service.keys())
            .map(|t| self.attained(t))
            .reduce(f64::min);
        let ahead = least.map_or(0.0, |least| (self.attained(tenant) - least).max(0.0));
        let level = (ahead / quantum).floor();
        (level.min(f64::from(levels.saturating_sub(1)))) as u32
    }

    /// The least attained service among the tenants with messages waiting.
    fn least_waiting(&self) -> Option<f64> {
        self.lanes
            .iter()
            .filter(|(_, lane)| !lane.waiting.is_empty())
            .map(|(tenant, _)| self.attained(tenant))
            .reduce(f64::min)
    }

    /// A lane's key inside its band: its head's virtual finish, or its
    /// tenant's attained service.
    fn lane_key(&self, tenant: &str, lane: &Lane, head: &Ticket) -> f64 {
        match self.order {
            Order::VirtualFinish => lane.head_start + head.cost / lane.weight,
            Order::AttainedService => self.attained(tenant),
        }
    }

    /// Adds a message of `tenant` at the end of its lane. `weight` > 0
    /// (the tenant's current weight), `cost` its estimated tokens (at least 1).
    pub fn enqueue(
        &mut self,
        tenant: &str,
        priority: Priority,
        cost: u64,
        weight: f64,
    ) -> TicketId {
        self.next_id += 1;
        let id = self.next_id;
        if self.order == Order::AttainedService && !self.active(tenant) {
            // Back from idle: lifted to the least waiting counter (or,
            // with none waiting, to the last such).
            let least = self.least_waiting().unwrap_or(self.floor);
            let counter = self.attained.entry(tenant.to_string()).or_default();
            *counter = counter.max(least);
        }
        let virtual_time = self.virtual_time;
        let lane = self.lanes.entry(tenant.to_string()).or_insert(Lane {
            weight,
            last_finish: virtual_time,
            head_start: virtual_time.get(priority),
            waiting: VecDeque::new(),
            sending: 0,
        });
        lane.weight = sanitize_weight(weight);
        if lane.waiting.is_empty() {
            // Back from idle: no credit for the idle time.
            lane.head_start = virtual_time
                .get(priority)
                .max(lane.last_finish.get(priority));
        }
        lane.waiting.push_back(Ticket {
            id,
            priority,
            cost: cost.max(1) as f64,
            eligible_at_ms: 0,
        });
        id
    }

    /// The message the next free slot goes to, if any is eligible at `now_ms`.
    pub fn pick(&self, now_ms: u64) -> Option<TicketId> {
        self.lanes
            .iter()
            .filter_map(|(tenant, lane)| {
                let head = lane.waiting.front()?;
                (head.eligible_at_ms <= now_ms && lane.sending == 0)
                    .then(|| (head, self.lane_key(tenant, lane, head)))
            })
            .min_by(|(a, fa), (b, fb)| {
                b.priority
                    .cmp(&a.priority)
                    .then(fa.total_cmp(fb))
                    .then(a.id.cmp(&b.id))
            })
            .map(|(head, _)| head.id)
    }

    /// `ticket` got its slot and runs: charged to its lane, out of the queue.
    /// False when it is not a lane's head (nothing changes).
    pub fn start(&mut self, ticket: TicketId) -> bool {
        let Some((tenant, lane)) = self
            .lanes
            .iter_mut()
            .find(|(_, lane)| lane.waiting.front().is_some_and(|t| t.id == ticket))
        else {
            return false;
        };
        let Some(head) = lane.waiting.pop_front() else {
            return false;
        };
        let (start, band) = (lane.head_start, head.priority);
        lane.last_finish.set(band, start + head.cost / lane.weight);
        self.virtual_time
            .set(band, self.virtual_time.get(band).max(start));
        if let Some(next) = lane.waiting.front() {
            lane.head_start = self
                .virtual_time
                .get(next.priority)
                .max(lane.last_finish.get(next.priority));
        }
        let tenant = tenant.clone();
        if self.order == Order::AttainedService {
            *self.in_service.entry(tenant.clone()).or_default() += 1;
        }
        self.forget_idle_lane(&tenant);
        true
    }

    /// A started request of `tenant` ended (answered or not): once none
    /// waits or runs, the tenant is idle, and comes back lifted.
    pub fn finish(&mut self, tenant: &str) {
        if let Some(running) = self.in_service.get_mut(tenant) {
            *running = running.saturating_sub(1);
            if *running == 0 {
                self.in_service.remove(tenant);
            }
        }
        if self.order == Order::AttainedService {
            self.forget_idle_counters();
        }
    }

    /// A started request of `tenant` is on its way to the model server: its
    /// lane's next head is not chosen until [`FairQueue::sent`], so the
    /// bucket's calls reach the server in its order (a call whose request
    /// is not yet written could be overtaken by the next one's).
    pub fn sending(&mut self, tenant: &str) {
        if let Some(lane) = self.lanes.get_mut(tenant) {
            lane.sending += 1;
        }
    }

    /// The request [`FairQueue::sending`] announced is written, or will
    /// not be.
    pub fn sent(&mut self, tenant: &str) {
        if let Some(lane) = self.lanes.get_mut(tenant) {
            lane.sending = lane.sending.saturating_sub(1);
        }
        self.forget_idle_lane(tenant);
    }

    /// A message of `tenant` waits, or one it started still runs.
    fn active(&self, tenant: &str) -> bool {
        self.in_service.contains_key(tenant)
            || self
                .lanes
                .get(tenant)
                .is_some_and(|l| !l.waiting.is_empty())
    }

    /// `ticket`'s bucket is paced: not chosen before `until_ms`.
    pub fn defer(&mut self, ticket: TicketId, until_ms: u64) {
        if let Some(t) = self
            .lanes
            .values_mut()
            .flat_map(|lane| lane.waiting.iter_mut())
            .find(|t| t.id == ticket)
        {
            t.eligible_at_ms = until_ms;
        }
    }

    /// `ticket` leaves without running (handed back at shutdown).
    pub fn remove(&mut self, ticket: TicketId) {
        let Some(tenant) = self.lanes.iter_mut().find_map(|(tenant, lane)| {
            let at = lane.waiting.iter().position(|t| t.id == ticket)?;
            lane.waiting.remove(at);
            Some(tenant.clone())
        }) else {
            return;
        };
        self.forget_idle_lane(&tenant);
    }

    /// Messages waiting.
    pub fn len(&self) -> usize {
        self.lanes.values().map(|l| l.waiting.len()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// How many of `tenant`'s messages wait before `ticket` in its lane
    /// (0: it is the head); `None` if it is not waiting.
    pub fn ahead_in_lane(&self, tenant: &str, ticket: TicketId) -> Option<usize> {
        self.lanes
            .get(tenant)?
            .waiting
            .iter()
            .position(|t| t.id == ticket)
    }

    /// An empty lane whose finishes the virtual times have passed would
    /// start at the virtual time anyway: drop it, so idle tenants cost no
    /// memory.
    fn forget_idle_lane(&mut self, tenant: &str) {
        let virtual_time = self.virtual_time;
        let passed =
            |lane: &Lane| (0..3).all(|band| lane.last_finish.0[band] <= virtual_time.0[band]);
        if self
            .lanes
            .get(tenant)
            .is_some_and(|l| l.waiting.is_empty() && l.sending == 0 && passed(l))
        {
            self.lanes.remove(tenant);
        }
        if self.order == Order::AttainedService {
            self.forget_idle_counters();
        }
    }

    /// A counter at or below the floor would be lifted to it on the
    /// tenant's return anyway: dropped, so idle tenants cost no memory.
    fn forget_idle_counters(&mut self) {
        if let Some(least) = self.least_waiting() {
            self.floor = self.floor.max(least);
        }
        let floor = self.floor;
        let idle: Vec<String> = self
            .attained
            .iter()
            .filter(|(tenant, counter)| **counter <= floor && !self.active(tenant))
            .map(|(tenant, _)| tenant.clone())
            .collect();
        for tenant in idle {
            self.attained.remove(&tenant);
        }
    }
}

fn sanitize_weight(weight: f64) -> f64 {
    if valid_weight(weight) {
        weight
    } else {
        1.0
    }
}

/// The consumer file's `fair` section.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FairConfig {
    /// Models shared fairly besides those with a controller (which always
    /// are); `"*"` = every model.
    pub models: Vec<String>,
    /// Weight per tenant (unsanitized name, > 0); default 1.
    pub weights: HashMap<String, f64>,
    /// How tenants are ordered inside a band: `virtual_finish` (start-time
    /// fair queueing on the estimates; the default) or `attained_service`
    /// (least tokens received first, VTC).
    pub order: OrderConfig,
    /// How tokens count as service for `attained_service`.
    pub service_cost: ServiceCost,
    /// Off (none) by default. With `order: attained_service` and a
    /// backend's `server_priority`, each call's `priority` is that plus its
    /// tenant's service level ([`FairQueue::service_level`]), so a server
    /// with priority scheduling (vLLM: lower first) orders the consumers'
    /// calls by attained service too. Measured in `fairness_bench`
    /// (docs/operations.md, "Server-side priority"): it did not beat the
    /// plain `server_priority`.
    pub server_priority_levels: Option<ServerPriorityLevels>,
}

/// The consumer file's `fair.server_priority_levels`.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerPriorityLevels {
    /// Service (per unit of weight, counted by `service_cost`) per level.
    pub quantum: f64,
    /// Levels at most (the worst is `server_priority + levels - 1`).
    pub levels: u32,
}

/// [`Order`] as the consumer file spells it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OrderConfig {
    #[default]
    VirtualFinish,
    AttainedService,
}

impl From<OrderConfig> for Order {
    fn from(config: OrderConfig) -> Order {
        match config {
            OrderConfig::VirtualFinish => Order::VirtualFinish,
            OrderConfig::AttainedService => Order::AttainedService,
        }
    }
}

/// A weight that is not a positive number.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum WeightError {
    #[error("fair.weights.{tenant}: a weight must be a positive number")]
    Tenant { tenant: String },
    #[error("fair.service_cost: prompt and output must be finite, at least 0, not both 0")]
    ServiceCost,
    #[error(
        "fair.server_priority_levels: quantum must be a positive number, levels at least 1, \
         and fair.order attained_service"
    )]
    ServerPriorityLevels,
}

impl FairConfig {
    pub fn validate(&self) -> Result<(), WeightError> {
        let cost = self.service_cost;
        if ![cost.prompt, cost.output]
            .iter()
            .all(|w| w.is_finite() && *w >= 0.0)
            || cost.prompt + cost.output <= 0.0
        {
            return Err(WeightError::ServiceCost);
        }
        if let Some(levels) = self.server_priority_levels {
            let usable = levels.quantum.is_finite() && levels.quantum > 0.0 && levels.levels >= 1;
            if !usable || self.order != OrderConfig::AttainedService {
                return Err(WeightError::ServerPriorityLevels);
            }
        }
        match self.weights.iter().find(|(_, w)| !valid_weight(**w)) {
            Some((tenant, _)) => Err(WeightError::Tenant {
                tenant: tenant.clone(),
            }),
            None => Ok(()),
        }
    }

    /// The models shared fairly, given those with a controller.
    pub fn models(&self, controlled: impl Iterator<Item = String>) -> FairModels {
        if self.models.iter().any(|m| m == "*") {
            return FairModels::All;
        }
        let mut models: Vec<String> = self.models.iter().cloned().chain(controlled).collect();
        models.sort();
        models.dedup();
        if models.is_empty() {
            FairModels::None
        } else {
            FairModels::Only(models)
        }
    }
}

/// A usable weight: finite and positive.
pub fn valid_weight(weight: f64) -> bool {
    weight.is_finite() && weight > 0.0
}

/// Tenants' weights: the consumer file's, overridden at run time (shared
/// through Redis, see [`crate::admin`]). Default 1.
#[derive(Debug, Default)]
pub struct Weights {
    configured: HashMap<String, f64>,
    runtime: RwLock<HashMap<String, f64>>,
}

impl Weights {
    pub fn new(configured: HashMap<String, f64>) -> Self {
        Weights {
            configured,
            runtime: RwLock::new(HashMap::new()),
        }
    }

    pub fn weight(&self, tenant: &str) -> f64 {
        let runtime = self
            .runtime
            .read()
            .ok()
            .and_then(|r| r.get(tenant).copied());
        sanitize_weight(
            runtime
                .or_else(|| self.configured.get(tenant).copied())
                .unwrap_or(1.0),
        )
    }

    /// Replaces the run-time overrides (as read from Redis).
    pub fn set_runtime(&self, weights: HashMap<String, f64>) {
        if let Ok(mut runtime) = self.runtime.write() {
            *runtime = weights;
        }
    }
}

/// One model's queue and its wake-up.
#[derive(Debug, Default)]
pub struct ModelQueue {
    queue: Mutex<FairQueue>,
    /// Signalled when the head set changes (a start, a deferral, a removal).
    changed: Notify,
}

impl ModelQueue {
    fn new(order: Order) -> Self {
        ModelQueue {
            queue: Mutex::new(FairQueue::new(order)),
            changed: Notify::new(),
        }
    }

    fn with<R>(&self, f: impl FnOnce(&mut FairQueue) -> R) -> R {
        // The queue is only changed by the short closures here: a poisoned
        // lock still holds a consistent queue.
        let mut queue = self
            .queue
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        f(&mut queue)
    }

    pub fn changed(&self) -> &Notify {
        &self.changed
    }
}

impl ServiceCounters for ModelQueue {
    fn charge(&self, tenant: &str, service: f64, weight: f64) {
        self.with(|q| q.charge(tenant, service, weight));
    }

    fn refund(&self, tenant: &str, service: f64, weight: f64) {
        self.with(|q| q.refund(tenant, service, weight));
    }

    fn finish(&self, tenant: &str) {
        self.with(|q| q.finish(tenant));
    }
}

/// The per-model queues of this instance, for the models fair sharing is
/// on for.
#[derive(Debug)]
pub struct FairShare {
    enabled: FairModels,
    weights: Arc<Weights>,
    order: Order,
    cost: ServiceCost,
    levels: Option<ServerPriorityLevels>,
    models: Mutex<HashMap<String, Arc<ModelQueue>>>,
}

/// Which models are fair-shared.
#[derive(Clone, Debug)]
pub enum FairModels {
    None,
    All,
    Only(Vec<String>),
}

impl FairShare {
    pub fn new(enabled: FairModels, weights: Arc<Weights>) -> Self {
        FairShare {
            enabled,
            weights,
            order: Order::default(),
            cost: ServiceCost::default(),
            levels: None,
            models: Mutex::new(HashMap::new()),
        }
    }

    /// Orders the models' queues by `order`, service counted by `cost`.
    pub fn with_order(mut self, order: Order, cost: ServiceCost) -> Self {
        self.order = order;
        self.cost = cost;
        self
    }

    /// Calls carry their tenant's service level on top of the backend's
    /// `server_priority` (none: level 0).
    pub fn with_server_priority_levels(mut self, levels: Option<ServerPriorityLevels>) -> Self {
        self.levels = levels;
        self
    }

    fn queue(&self, model: &str) -> Arc<ModelQueue> {
        let mut models = self
            .models
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        models
            .entry(model.to_string())
            .or_insert_with(|| Arc::new(ModelQueue::new(self.order)))
            .clone()
    }

    pub fn enabled_for(&self, model: &str) -> bool {
        match &self.enabled {
            FairModels::None => false,
            FairModels::All => true,
            FairModels::Only(models) => models.iter().any(|m| m == model),
        }
    }

    pub fn weights(&self) -> &Arc<Weights> {
        &self.weights
    }

    /// Queues a message; the returned ticket leaves the queue when dropped
    /// unless it started.
    pub fn enqueue(&self, tenant: &str, model: &str, priority: Priority, cost: u64) -> Ticketed {
        let queue = self.queue(model);
        let weight = self.weights.weight(tenant);
        let id = queue.with(|q| q.enqueue(tenant, priority, cost, weight));
        Ticketed {
            queue,
            tenant: tenant.to_string(),
            id,
            levels: self.levels,
            charging: (self.order == Order::AttainedService).then_some((self.cost, weight)),
            done: false,
        }
    }
}

/// A message's place in its model's queue.
#[derive(Debug)]
pub struct Ticketed {
    queue: Arc<ModelQueue>,
    tenant: String,
    id: TicketId,
    levels: Option<ServerPriorityLevels>,
    /// Ordered by attained service: how its call is charged (the cost, its
    /// tenant's weight when it queued).
    charging: Option<(ServiceCost, f64)>,
    done: bool,
}

impl Ticketed {
    /// Messages of its bucket waiting before it (0: it is its lane's head).
    pub fn ahead_in_lane(&self) -> usize {
        self.queue
            .with(|q| q.ahead_in_lane(&self.tenant, self.id))
            .unwrap_or(0)
    }

    /// Whether the next free slot is this message's.
    pub fn is_next(&self, now_ms: u64) -> bool {
        self.queue.with(|q| q.pick(now_ms)) == Some(self.id)
    }

    /// Its tenant's service level now ([`FairQueue::service_level`]; 0
    /// without `fair.server_priority_levels`): taken before it starts.
    pub fn service_level(&self) -> u32 {
        self.levels.map_or(0, |l| {
            self.queue
                .with(|q| q.service_level(&self.tenant, l.quantum, l.levels))
        })
    }

    /// It got its slot: charged, out of the queue; the others look again.
    /// Its lane's next message waits until the returned [`Sending`] is
    /// dropped, once this call's request is written. Ordered by attained
    /// service, its tenant is charged `prompt_tokens` now, before the next
    /// pick (the prompt is the first service a call receives), and the
    /// returned [`CallCharge`] charges the rest as the call goes.
    #[must_use = "the lane waits until the Sending is dropped"]
    pub fn started(mut self, prompt_tokens: u64) -> (Sending, Option<CallCharge>) {
        let charging = self.charging;
        // Announced before the start, which may forget an emptied lane.
        let started = self.queue.with(|q| {
            q.sending(&self.tenant);
            let started = q.start(self.id);
            if !started {
                q.sent(&self.tenant);
            } else if let Some((cost, weight)) = charging {
                q.charge(&self.tenant, cost.of(prompt_tokens, 0), weight);
            }
            started
        });
        self.done = true;
        self.queue.changed.notify_waiters();
        let charge = charging.filter(|_| started).map(|(cost, weight)| {
            CallCharge::new(
                self.queue.clone() as Arc<dyn ServiceCounters>,
                self.tenant.clone(),
                cost,
                weight,
                prompt_tokens,
            )
        });
        let sending = Sending {
            queue: self.queue.clone(),
            tenant: std::mem::take(&mut self.tenant),
            started,
        };
        (sending, charge)
    }

    /// Its bucket is paced until `until_ms`: the others go first meanwhile.
    pub fn defer(&self, until_ms: u64) {
        self.queue.with(|q| q.defer(self.id, until_ms));
        self.queue.changed.notify_waiters();
    }

    pub fn queue(&self) -> &Arc<ModelQueue> {
        &self.queue
    }
}

/// A started message's request not yet written: its lane's next message
/// is not chosen while this lives.
#[derive(Debug)]
pub struct Sending {
    queue: Arc<ModelQueue>,
    tenant: String,
    started: bool,
}

impl Drop for Sending {
    fn drop(&mut self) {
        if self.started {
            self.queue.with(|q| q.sent(&self.tenant));
            self.queue.changed.notify_waiters();
        }
    }
}

impl Drop for Ticketed {
    fn drop(&mut self) {
        if !self.done {
            self.queue.with(|q| q.remove(self.id));
            self.queue.changed.notify_waiters();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Serves `rounds` slots to always-backlogged lanes; counts per tenant.
    fn serve(queue: &mut FairQueue, lanes: &[(&str, f64, u64)], rounds: usize) -> Vec<usize> {
        let mut owner = HashMap::new();
        for (tenant, weight, cost) in lanes {
            for _ in 0..2 {
                owner.insert(
                    queue.enqueue(tenant, Priority::Normal, *cost, *weight),
                    *tenant,
                );
            }
        }
        let mut served: HashMap<&str, usize> = HashMap::new();
        for _ in 0..rounds {
            let Some(ticket) = queue.pick(0) else { break };
            assert!(queue.start(ticket));
            let tenant = owner[&ticket];
            *served.entry(tenant).or_default() += 1;
            let (_, weight, cost) = lanes
                .iter()
                .find(|(t, _, _)| *t == tenant)
                .copied()
                .unwrap_or(("", 1.0, 1));
            owner.insert(
                queue.enqueue(tenant, Priority::Normal, cost, weight),
                tenant,
            );
        }
        lanes
            .iter()
            .map(|(t, _, _)| served.get(t).copied().unwrap_or(0))
            .collect()
    }

    /// Picks and starts the next message: its tenant and weight.
    fn start_next<'a>(
        queue: &mut FairQueue,
        owner: &HashMap<TicketId, (&'a str, f64)>,
    ) -> Option<(&'a str, f64)> {
        let ticket = queue.pick(0)?;
        assert!(queue.start(ticket));
        owner.get(&ticket).copied()
    }

    /// Queues a message of `tenant` (normal band) costing `cost`.
    fn queue_again<'a>(
        queue: &mut FairQueue,
        owner: &mut HashMap<TicketId, (&'a str, f64)>,
        (tenant, weight): (&'a str, f64),
        cost: u64,
    ) {
        let ticket = queue.enqueue(tenant, Priority::Normal, cost, weight);
        owner.insert(ticket, (tenant, weight));
    }

    #[test]
    fn a_ticket_knows_how_many_of_its_bucket_wait_before_it() {
        let mut queue = FairQueue::default();
        let a1 = queue.enqueue("a", Priority::Normal, 10, 1.0);
        let b1 = queue.enqueue("b", Priority::Normal, 10, 1.0);
        let a2 = queue.enqueue("a", Priority::Normal, 10, 1.0);
        let a3 = queue.enqueue("a", Priority::Normal, 10, 1.0);
        assert_eq!(queue.ahead_in_lane("a", a1), Some(0));
        assert_eq!(queue.ahead_in_lane("a", a3), Some(2));
        assert_eq!(queue.ahead_in_lane("b", b1), Some(0));
        assert_eq!(queue.ahead_in_lane("b", a2), None);
        assert!(queue.start(a1));
        assert_eq!(queue.ahead_in_lane("a", a3), Some(1));
        assert_eq!(queue.ahead_in_lane("a", a1), None);
    }

    #[test]
    fn a_lane_waits_while_its_started_request_is_sent_and_the_others_go_on() {
        let mut queue = FairQueue::default();
        let [a1, a2, b1] = [("a", 10), ("a", 10), ("b", 50)]
            .map(|(t, c)| queue.enqueue(t, Priority::Normal, c, 1.0));
        assert_eq!(queue.pick(0), Some(a1));
        queue.sending("a");
        assert!(queue.start(a1));
        // a2 is the cheaper head, but a1's request is not written yet.
        assert_eq!(queue.pick(0), Some(b1));
        queue.sent("a");
        assert_eq!(queue.pick(0), Some(a2));
        // The last message of a lane: the lane is kept until it is sent,
        // so one queued meanwhile still waits for it.
        queue.sending("a");
        assert!(queue.start(a2));
        let a3 = queue.enqueue("a", Priority::Normal, 1, 1.0);
        assert_eq!(queue.pick(0), Some(b1));
        queue.sent("a");
        assert_eq!(queue.pick(0), Some(a3));
    }

    #[test]
    fn a_started_ticket_holds_its_lane_until_its_sending_is_dropped() {
        let share = FairShare::new(FairModels::All, Arc::new(Weights::default()));
        let first = share.enqueue("a", "m", Priority::Normal, 10);
        let second = share.enqueue("a", "m", Priority::Normal, 10);
        assert!(first.is_next(0));
        let (sending, _) = first.started(0);
        assert_eq!(second.ahead_in_lane(), 0);
        assert!(
            !second.is_next(0),
            "the first call's request is not written yet"
        );
        drop(sending);
        assert!(second.is_next(0));
    }

    /// Ordered by attained service, a start charges the prompt before the
    /// next pick, and the call's charge settles to the usage (a refund
    /// included) and ends the tenant's running call; another order
    /// charges nothing.
    #[test]
    fn a_start_charges_the_prompt_and_the_calls_charge_settles_it() {
        let share = FairShare::new(FairModels::All, Arc::new(Weights::default()))
            .with_order(Order::AttainedService, ServiceCost::default());
        let ticket = share.enqueue("a", "m", Priority::Normal, 600);
        let (_sending, charge) = ticket.started(500);
        let attained = || share.queue("m").with(|q| q.attained("a"));
        assert_eq!(attained(), 500.0);
        let charge = charge.expect("ordered by attained service, a started call is charged");
        charge.settle(Some((300, 20)));
        assert_eq!(attained(), 340.0);
        assert!(
            share.queue("m").with(|q| !q.active("a")),
            "no call of a runs"
        );

        let other = FairShare::new(FairModels::All, Arc::new(Weights::default()));
        let (_sending, charge) = other.enqueue("a", "m", Priority::Normal, 100).started(50);
        assert!(charge.is_none());
    }

    #[test]
    fn a_refund_lowers_a_counter_never_below_zero() {
        let mut queue = FairQueue::new(Order::AttainedService);
        queue.charge("a", 300.0, 1.0);
        queue.refund("a", 100.0, 2.0);
        assert_eq!(queue.attained("a"), 250.0);
        queue.refund("a", 1000.0, 1.0);
        assert_eq!(queue.attained("a"), 0.0);
    }

    #[test]
    fn backlogged_tenants_share_by_weight() {
        let mut queue = FairQueue::default();
        let served = serve(
            &mut queue,
            &[("a", 1.0, 100), ("b", 2.0, 100), ("c", 4.0, 100)],
            7000,
        );
        assert_eq!(served.iter().sum::<usize>(), 7000);
        for (got, weight) in served.iter().zip([1.0, 2.0, 4.0]) {
            let share = *got as f64 / 7000.0;
            assert!((share - weight / 7.0).abs() < 0.01, "{served:?}");
        }
    }

    #[test]
    fn shares_are_in_tokens_not_requests() {
        // Equal weights, b's requests cost four times a's: a gets four
        // times the requests, the same tokens.
        let mut queue = FairQueue::default();
        let served = serve(&mut queue, &[("a", 1.0, 100), ("b", 1.0, 400)], 5000);
        let ratio = served[0] as f64 / served[1] as f64;
        assert!((ratio - 4.0).abs() < 0.05, "{served:?}");
    }

    #[test]
    fn an_idle_tenant_leaves_its_share_and_comes_back_without_credit() {
        let mut queue = FairQueue::default();
        // a alone for 1000 slots (work-conserving: it gets them all).
        let served = serve(&mut queue, &[("a", 1.0, 10)], 1000);
        assert_eq!(served, vec![1000]);
        // b arrives: from then on they alternate; b gets no burst for the
        // time it was idle.
        let b = queue.enqueue("b", Priority::Normal, 10, 1.0);
        let mut b_first_ten = 0;
        let mut next_b = Some(b);
        for _ in 0..10 {
            let Some(ticket) = queue.pick(0) else { break };
            queue.start(ticket);
            if Some(ticket) == next_b {
                b_first_ten += 1;
                next_b = Some(queue.enqueue("b", Priority::Normal, 10, 1.0));
            } else {
                queue.enqueue("a", Priority::Normal, 10, 1.0);
            }
        }
        assert!((4..=6).contains(&b_first_ten), "b got {b_first_ten} of 10");
    }

    #[test]
    fn bands_are_strict_and_a_lane_is_served_in_order() {
        let mut queue = FairQueue::default();
        let low = queue.enqueue("a", Priority::Low, 1, 100.0);
        let normal = queue.enqueue("b", Priority::Normal, 1, 100.0);
        let high_1 = queue.enqueue("c", Priority::High, 1_000_000, 1.0);
        let high_2 = queue.enqueue("c", Priority::High, 1, 1.0);
        let order: Vec<TicketId> = std::iter::from_fn(|| {
            let t = queue.pick(0)?;
            queue.start(t);
            Some(t)
        })
        .collect();
        assert_eq!(order, vec![high_1, high_2, normal, low]);
        assert!(queue.is_empty());
    }

    #[test]
    fn a_band_above_served_in_between_keeps_the_weights_below() {
        // One message per bucket waiting at a time (the hardest case for
        // the clock), and a high-band request served between two normal
        // ones.
        let mut queue = FairQueue::default();
        let mut owner = HashMap::new();
        for (tenant, weight) in [("a", 1.0), ("b", 4.0)] {
            owner.insert(
                queue.enqueue(tenant, Priority::Normal, 50, weight),
                (tenant, weight),
            );
        }
        let mut served: HashMap<&str, usize> = HashMap::new();
        for _ in 0..500 {
            let high = queue.enqueue("h", Priority::High, 50, 1.0);
            assert_eq!(queue.pick(0), Some(high));
            assert!(queue.start(high));
            let Some((tenant, weight)) = start_next(&mut queue, &owner) else {
                break;
            };
            *served.entry(tenant).or_default() += 1;
            queue_again(&mut queue, &mut owner, (tenant, weight), 50);
        }
        let ratio = served["b"] as f64 / served["a"] as f64;
        assert!((ratio - 4.0).abs() < 0.1, "{served:?}");
    }

    #[test]
    fn a_paced_head_waits_and_its_lane_keeps_order() {
        let mut queue = FairQueue::default();
        let a1 = queue.enqueue("a", Priority::Normal, 1, 1.0);
        let a2 = queue.enqueue("a", Priority::Normal, 1, 1.0);
        let b1 = queue.enqueue("b", Priority::Normal, 5, 1.0);
        queue.defer(a1, 100);
        // a's head is paced: b goes, never a2 before a1.
        assert_eq!(queue.pick(50), Some(b1));
        queue.start(b1);
        assert_eq!(queue.pick(50), None);
        assert_eq!(queue.pick(100), Some(a1));
        queue.start(a1);
        assert_eq!(queue.pick(100), Some(a2));
        queue.remove(a2);
        assert!(queue.is_empty());
        assert!(!queue.start(a2));
    }

    #[test]
    fn attained_service_serves_who_received_least_on_any_path() {
        let mut queue = FairQueue::new(Order::AttainedService);
        let cost = ServiceCost::default();
        // While both wait, a is served 1000 tokens straight at the server
        // (in quota), b nothing: b's later request goes first, then a's.
        let a = queue.enqueue("a", Priority::Normal, 10, 1.0);
        let b = queue.enqueue("b", Priority::Normal, 10, 1.0);
        queue.charge("a", cost.of(400, 300), 1.0);
        assert_eq!(queue.attained("a"), 1000.0);
        assert_eq!(queue.pick(0), Some(b));
        assert!(queue.start(b));
        // b's answer brings it past a: a goes.
        queue.charge("b", cost.of(200, 450), 1.0);
        let b2 = queue.enqueue("b", Priority::Normal, 10, 1.0);
        assert_eq!(queue.pick(0), Some(a));
        assert!(queue.start(a));
        assert_eq!(queue.pick(0), Some(b2));
        // Bands stay strict.
        let high = queue.enqueue("a", Priority::High, 10, 1.0);
        assert_eq!(queue.pick(0), Some(high));
    }

    #[test]
    fn attained_service_counts_per_unit_of_weight() {
        let mut queue = FairQueue::new(Order::AttainedService);
        let mut served: HashMap<&str, f64> = HashMap::new();
        let mut owner = HashMap::new();
        for lane in [("a", 1.0), ("b", 3.0)] {
            queue_again(&mut queue, &mut owner, lane, 1);
        }
        for _ in 0..4000 {
            let Some((tenant, weight)) = start_next(&mut queue, &owner) else {
                break;
            };
            // Backlogged: its next request queues before this one ends.
            queue_again(&mut queue, &mut owner, (tenant, weight), 1);
            queue.charge(tenant, 100.0, weight);
            queue.finish(tenant);
            *served.entry(tenant).or_default() += 100.0;
        }
        let ratio = served["b"] / served["a"];
        assert!((ratio - 3.0).abs() < 0.05, "{served:?}");
    }

    #[test]
    fn a_tenant_back_from_idle_gets_no_credit_and_idle_counters_go() {
        let mut queue = FairQueue::new(Order::AttainedService);
        let a = queue.enqueue("a", Priority::Normal, 1, 1.0);
        queue.charge("a", 5000.0, 1.0);
        queue.charge("idle", 10.0, 1.0);
        assert!(queue.start(a));
        let a2 = queue.enqueue("a", Priority::Normal, 1, 1.0);
        queue.finish("a");
        // b arrives (never served): lifted to a's 5000, not 0.
        let b = queue.enqueue("b", Priority::Normal, 1, 1.0);
        assert_eq!(queue.attained("b"), 5000.0);
        // Equal counters: the earlier arrival.
        assert_eq!(queue.pick(0), Some(a2));
        assert!(queue.start(a2));
        // "idle" (10, below the floor of 5000) was forgotten and comes back
        // at the floor.
        assert_eq!(queue.attained("idle"), 0.0);
        assert!(queue.start(b));
        queue.enqueue("idle", Priority::Normal, 1, 1.0);
        assert_eq!(queue.attained("idle"), 5000.0);
    }

    #[test]
    fn service_level_counts_quanta_above_the_least_served_active_tenant() {
        let mut queue = FairQueue::new(Order::AttainedService);
        let a = queue.enqueue("a", Priority::Normal, 1, 1.0);
        queue.enqueue("b", Priority::Normal, 1, 1.0);
        queue.charge("a", 2500.0, 1.0);
        queue.charge("b", 400.0, 1.0);
        // a is 2100 ahead of b: two quanta of 1000; b is the least served.
        assert_eq!(queue.service_level("a", 1000.0, 8), 2);
        assert_eq!(queue.service_level("b", 1000.0, 8), 0);
        // Capped at levels - 1.
        assert_eq!(queue.service_level("a", 1000.0, 2), 1);
        // A running call keeps its tenant active: b's counter is still the least.
        assert!(queue.start(a));
        assert_eq!(queue.service_level("a", 1000.0, 8), 2);
        // An unknown tenant (never served) is at level 0; a bad quantum too.
        assert_eq!(queue.service_level("c", 1000.0, 8), 0);
        assert_eq!(queue.service_level("a", 0.0, 8), 0);
        // Ordered by virtual finish: always 0.
        let mut plain = FairQueue::default();
        plain.enqueue("a", Priority::Normal, 1, 1.0);
        assert_eq!(plain.service_level("a", 1.0, 8), 0);
    }

    #[test]
    fn server_priority_levels_need_a_quantum_levels_and_attained_service() {
        let levels = |quantum, levels| FairConfig {
            order: OrderConfig::AttainedService,
            server_priority_levels: Some(ServerPriorityLevels { quantum, levels }),
            ..FairConfig::default()
        };
        assert_eq!(levels(2000.0, 4).validate(), Ok(()));
        for bad in [levels(0.0, 4), levels(f64::NAN, 4), levels(2000.0, 0)] {
            assert_eq!(bad.validate(), Err(WeightError::ServerPriorityLevels));
        }
        let by_finish = FairConfig {
            order: OrderConfig::VirtualFinish,
            ..levels(2000.0, 4)
        };
        assert_eq!(by_finish.validate(), Err(WeightError::ServerPriorityLevels));
        let parsed: FairConfig = serde_yaml::from_str(
            "order: attained_service\nserver_priority_levels: {quantum: 2000, levels: 4}\n",
        )
        .unwrap();
        assert_eq!(parsed, levels(2000.0, 4));
        assert_eq!(FairConfig::default().server_priority_levels, None);
    }

    #[test]
    fn charges_are_ignored_when_ordered_by_virtual_finish() {
        let mut queue = FairQueue::default();
        queue.charge("a", 1000.0, 1.0);
        assert_eq!(queue.attained("a"), 0.0);
    }

    #[test]
    fn weights_fall_back_to_config_then_one() {
        let weights = Weights::new(HashMap::from([("a".to_string(), 4.0)]));
        assert_eq!(weights.weight("a"), 4.0);
        assert_eq!(weights.weight("b"), 1.0);
        weights.set_runtime(HashMap::from([
            ("a".to_string(), 2.0),
            ("b".to_string(), -3.0),
        ]));
        assert_eq!(weights.weight("a"), 2.0);
        assert_eq!(weights.weight("b"), 1.0);
    }
}
