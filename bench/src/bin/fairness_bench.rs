//! `cargo run --release -p sluice-bench --bin fairness_bench -- --help`
//!
//! Issue #28's benchmark: how one model server is divided between requests
//! admitted in quota (sent straight to the server) and requests deferred
//! over quota (queued, sent by the consumer under the adaptive limit).
//!
//! **What it simulates** (in process, one thread, a virtual clock stepped
//! every `--dt-ms`; no network, no Redis, no broker): the server is
//! llm-sim's GPU scheduler ([`sluice_llm_sim::gpu::Scheduler`]: continuous
//! batching under a token budget, `max_batch`, a KV cache, one FIFO waiting
//! queue, the vLLM gauges); admission is a per-tenant token quota in fixed
//! windows charged with the estimate (prompt + `max_tokens`), all or
//! nothing, as sluice-rls does; the deferred path is a queue in front of
//! the server that starts a call while the consumers' calls in flight are
//! under the controller's cap; the controller is the real pure law
//! ([`sluice_consumer::controller::step`]) stepped every `--interval-ms` on
//! the server's gauges read at that instant (no scrape delay). Not
//! simulated: network and Redis latency, the broker, pacing (GCRA)
//! ceilings, several consumer instances, answers' streaming.
//!
//! Workload (the same arrivals for every policy, from `--seed`): heavy and
//! light tenants with Poisson arrivals. Light tenants ask for well under
//! their quota all along; heavy tenants ask for under it during the warm-up
//! and far over it (and over the server's capacity) during the overloaded
//! phase; then arrivals stop and the run goes on until everything is
//! answered or `--drain-secs` have passed (what is not answered by then is
//! "never answered").
//!
//! Policies, side by side:
//! * `alone`: no quota; every request goes to the server (its FIFO queue).
//! * `reject`: quota; over quota is answered 429.
//! * `defer-old`: quota, over quota deferred to the consumer's fair queue
//!   (start-time fair queueing on estimates, [`sluice_consumer::fair::FairQueue`]),
//!   the controller without its own calls in the sample: every request at
//!   the server counts as its own (the law before issue 28).
//! * `defer-new`: the same, the controller told its own calls in flight
//!   (`CapacitySample::own_in_flight`): the server's waiting target is for
//!   everyone (issue 28, part 1).
//! * `defer-new-vtc`: `defer-new`, and the deferred queue ordered by attained
//!   service (the product's [`FairQueue`] with [`Order::AttainedService`]:
//!   prompt + 2 × output, counted over both paths: a tenant's in-quota
//!   answers count too with `--count-direct true`; charged as the consumer
//!   charges them: the prompt when the call starts, the output as it is
//!   generated, every [`CHARGE_PERIOD`], as the VTC paper does;
//!   `--charge at-end`: all when the call ends, as the consumer did before).
//! * `admission`: `defer-new-vtc`, and saturation-aware admission with the
//!   product's decision ([`sluice_contract::saturation`]): at each step
//!   the controller's state gives `is_saturated` (smoothed server queue
//!   above its target + ½ while the consumers have calls there); an
//!   in-quota request that arrives while the last state (at most
//!   `--max-age-ms` old) says saturated goes into the fair queue with its
//!   tenant's weight and its own priority (`route_in_quota`), beside the
//!   deferred work; else straight to the server.
//! * `priority`: `defer-new-vtc` on a server with priority scheduling
//!   (llm-sim's [`SchedulingPolicy::Priority`], vLLM's `--scheduling-policy
//!   priority`): the consumer's calls carry `priority: 1` (its
//!   `server_priority`), in-quota requests sent straight to the server 0,
//!   so the server's queue and prefill take in-quota work first.
//! * `admission-priority`: `admission` on that server (the in-quota
//!   requests routed into the queue are the consumer's calls, so they
//!   carry 1 too).
//! * `all-deferred`: every request through the VTC queue and the new law
//!   (the reference for the service difference).
//! * `all-deferred-vf`: every request through the queue in the fair
//!   queue's default order (virtual finish, `fair.order` unset) and the new
//!   law: the "every request deferred" setup as issue 28 measured it,
//!   before the order by attained service existed.
//! * `admission-level`: `admission-priority`, the consumer's calls
//!   carrying `--level-base` + their tenant's service level
//!   ([`FairQueue::service_level`]: quanta of `--level-quantum` service
//!   above the least served active tenant, at most `--levels` - 1), so
//!   the server's own queue and prefill follow attained service too.
//! * `all-deferred-level`: `all-deferred` on a priority server, every call
//!   carrying its tenant's service level.
//! * `direct-level`: `admission-level` with base 0, and the in-quota
//!   requests sent straight to the server carrying their tenant's level
//!   too: what a filter that set the priority on the direct path would
//!   give (not built: the counters live in the consumers).
//!
//! * `tenant-backlog`: `priority` without saturation-aware admission;
//!   instead an in-quota request of a tenant that asked over its quota
//!   within `--over-quota-memory-ms` goes into the fair queue (with its
//!   over-quota backlog), the others straight to the server: sluice-rls
//!   `--route-in-quota-after-over-quota-ms`, its rule modelled here per
//!   tenant (sluice-rls keeps it per deferring bucket; one per tenant here).
//!
//! `--count-direct false` (the default) counts in the fair queue's
//! attained service only what the consumer's calls received, as the
//! product does (the consumer never sees an in-quota request sent
//! straight to the server); `true`: what both paths received.
//!
//! `--in-quota-reserve N` keeps N slots of the batch free for in-quota
//! requests sent straight to the server (the controller's
//! `in_quota_reserve`, its `server_max_running` = `--max-batch`): without it
//! the controller fills the batch (it aims at running + `target_waiting` −
//! foreign) and an in-quota request waits for a call to end.
//! `--static-reserve true` keeps it with a fixed `ceiling` instead.
//!
//! Figures over the overloaded phase: throughput (prompt + output tokens
//! processed per second), rejected, never answered, the light tenants'
//! time to first token (p50 / p99; arrival to first token, queue included;
//! and the p50 of the part at the server, sent to first token)
//! against the same light traffic on an otherwise idle server, and the
//! VTC paper's service difference (Sheng et al., OSDI 2024: in each window
//! of `--window-secs` sliding by one second, the largest difference of
//! service — prompt + 2 × output tokens — received between clients
//! backlogged throughout the window; max and average over the windows).
//! Prints one table (Markdown); asserts nothing.

use clap::Parser;
use sluice_consumer::charge::CHARGE_PERIOD;
use sluice_consumer::controller::{
    self, CapacitySample, ControllerState, InQuotaReserve, ModelControl,
};
use sluice_consumer::fair::{FairQueue, Order, ServiceCost, TicketId};
use sluice_contract::saturation::{self, Route, Saturation};
use sluice_contract::Priority;
use sluice_llm_sim::gpu::{Capacity, Scheduler, SchedulingPolicy, SeqId, SeqSpec};
use sluice_testkit::figures::percentile;
use std::collections::HashMap;
use std::time::Duration;

#[derive(Clone, Debug, Parser)]
#[command(about = "In-quota and deferred traffic on one simulated GPU, per policy")]
struct Params {
    /// Seed of the arrivals and request sizes.
    #[arg(long, default_value_t = 28)]
    seed: u64,
    /// Heavy tenants.
    #[arg(long, default_value_t = 2)]
    heavy: usize,
    /// Light tenants.
    #[arg(long, default_value_t = 6)]
    light: usize,
    /// Requests per second of each heavy tenant in the overloaded phase.
    #[arg(long, default_value_t = 5.0)]
    heavy_rate: f64,
    /// Requests per second of each light tenant (all along).
    #[arg(long, default_value_t = 0.25)]
    light_rate: f64,
    /// Requests per second of each heavy tenant during the warm-up.
    #[arg(long, default_value_t = 0.25)]
    warm_rate: f64,
    /// Each tenant's quota, estimated tokens per second (charged in 10 s windows).
    #[arg(long, default_value_t = 500.0)]
    quota_tokens_per_s: f64,
    /// Seconds before the overload.
    #[arg(long, default_value_t = 20)]
    warm_secs: u64,
    /// Seconds of overload.
    #[arg(long, default_value_t = 60)]
    overload_secs: u64,
    /// Most seconds after the arrivals end for the answers.
    #[arg(long, default_value_t = 300)]
    drain_secs: u64,
    /// The GPU's tokens per second (prefill and decode).
    #[arg(long, default_value_t = 3000.0)]
    tokens_per_s: f64,
    /// The fastest one answer decodes alone, tokens per second.
    #[arg(long, default_value_t = 60.0)]
    answer_tokens_per_s: f64,
    /// Requests the GPU runs at once.
    #[arg(long, default_value_t = 64)]
    max_batch: usize,
    /// The controller's target of requests waiting at the server.
    #[arg(long, default_value_t = 2.0)]
    target_waiting: f64,
    /// The controller's step period, ms.
    #[arg(long, default_value_t = 500)]
    interval_ms: u64,
    /// Simulation step, ms.
    #[arg(long, default_value_t = 10)]
    dt_ms: u64,
    /// Window of the service difference, s.
    #[arg(long, default_value_t = 10)]
    window_secs: u64,
    /// Oldest saturation state sluice-rls acts on, ms (older: not saturated).
    #[arg(long, default_value_t = 1500)]
    max_age_ms: u64,
    /// Service (prompt + 2 × output, per unit of weight) per server
    /// priority level under the `*-level` policies (the consumer's
    /// `fair.server_priority_levels.quantum`).
    #[arg(long, default_value_t = 2000.0)]
    level_quantum: f64,
    /// The consumer's `server_priority` under `admission-level` (the
    /// service level is added to it; in-quota requests sent straight to
    /// the server carry 0).
    #[arg(long, default_value_t = 1)]
    level_base: i64,
    /// `tenant-backlog`: how long after a tenant's last over-quota
    /// request its in-quota ones still go through the queue, ms.
    #[arg(long, default_value_t = 10_000)]
    over_quota_memory_ms: u64,
    /// Priority levels at most under the `*-level` policies
    /// (`fair.server_priority_levels.levels`).
    #[arg(long, default_value_t = 8)]
    levels: u32,
    /// Whether what in-quota requests sent straight to the server receive
    /// counts in the fair queue's attained service. The product's consumer
    /// only counts the calls it makes (deferred ones, and in-quota ones
    /// routed into its queue): false is the product.
    #[arg(long, default_value_t = false, action = clap::ArgAction::Set)]
    count_direct: bool,
    /// Slots of the server's batch (`--max-batch`) kept free for in-quota
    /// requests: the controller's `in_quota_reserve.slots`, its
    /// `server_max_running` = `--max-batch` (the consumers' limit stays at
    /// or below the batch less this less the foreign requests there). 0:
    /// none. Only the policies whose controller counts its own calls (all
    /// but `defer-old`) can tell foreign requests from their own.
    #[arg(long, default_value_t = 0)]
    in_quota_reserve: usize,
    /// Keep the reserve with a fixed ceiling instead (`ceiling` =
    /// `--max-batch` − `--in-quota-reserve`), whatever the foreign load.
    #[arg(long, default_value_t = false, action = clap::ArgAction::Set)]
    static_reserve: bool,
    /// When the consumer's calls are charged to the attained service:
    /// `as-it-goes` (the product: the prompt when the call starts, the
    /// output as it streams, every [`CHARGE_PERIOD`]) or `at-end` (all of
    /// it when the call ends: the product before 2026-12-07).
    #[arg(long, value_enum, default_value_t = Charge::AsItGoes)]
    charge: Charge,
    /// Run these seeds (`FIRST-LAST`) instead of `--seed` and print one
    /// summary over them: a single seed's service difference swings by
    /// ±40 % around its setting's (docs/operations.md).
    #[arg(long, value_parser = parse_seeds)]
    seeds: Option<(u64, u64)>,
    /// With `--seeds`: the policy the others' average service difference is
    /// held to (issue 28's "all-deferred setup").
    #[arg(long, value_parser = Policy::parse, default_value = "all-deferred")]
    reference: Policy,
    /// Which policies run, comma-separated (all by default).
    #[arg(long, value_delimiter = ',', value_parser = Policy::parse,
          default_value = "alone,reject,defer-old,defer-new,defer-new-vtc,admission,priority,admission-priority,admission-level,all-deferred,all-deferred-vf,all-deferred-level,direct-level,tenant-backlog")]
    policies: Vec<Policy>,
}

/// `max_tokens` of every request: the quota is charged prompt + this.
const MAX_TOKENS: u64 = 256;
const PROMPT_TOKENS: (u64, u64) = (100, 600);
const OUTPUT_TOKENS: (u64, u64) = (50, 250);
const QUOTA_WINDOW_MS: u64 = 10_000;
/// Backlog samples per second (the service difference's "backlogged
/// throughout the window").
const SAMPLE_MS: u64 = 100;
/// Output tokens count twice in the service (the VTC paper's cost).
const OUTPUT_WEIGHT: f64 = 2.0;
/// The consumer's `server_priority` under the server-priority policies
/// (in-quota requests sent straight to the server carry 0).
const DEFERRED_PRIORITY: i64 = 1;

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum Charge {
    AsItGoes,
    AtEnd,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Policy {
    Unloaded,
    Alone,
    Reject,
    DeferOld,
    DeferNew,
    DeferNewVtc,
    Admission,
    Priority,
    AdmissionPriority,
    AdmissionLevel,
    AllDeferred,
    AllDeferredVirtualFinish,
    AllDeferredLevel,
    DirectLevel,
    TenantBacklog,
}

impl Policy {
    fn parse(s: &str) -> Result<Policy, String> {
        Ok(match s {
            "alone" => Policy::Alone,
            "reject" => Policy::Reject,
            "defer-old" => Policy::DeferOld,
            "defer-new" => Policy::DeferNew,
            "defer-new-vtc" => Policy::DeferNewVtc,
            "admission" => Policy::Admission,
            "priority" => Policy::Priority,
            "admission-priority" => Policy::AdmissionPriority,
            "all-deferred" => Policy::AllDeferred,
            "all-deferred-vf" => Policy::AllDeferredVirtualFinish,
            "admission-level" => Policy::AdmissionLevel,
            "all-deferred-level" => Policy::AllDeferredLevel,
            "direct-level" => Policy::DirectLevel,
            "tenant-backlog" => Policy::TenantBacklog,
            other => return Err(format!("unknown policy {other:?}")),
        })
    }

    fn name(self) -> &'static str {
        match self {
            Policy::Unloaded => "light traffic alone (unloaded)",
            Policy::Alone => "server alone",
            Policy::Reject => "quota + reject",
            Policy::DeferOld => "quota + defer, old law",
            Policy::DeferNew => "quota + defer, new law",
            Policy::DeferNewVtc => "quota + defer, new law + VTC",
            Policy::Admission => "new law + VTC + saturation-aware admission",
            Policy::Priority => "new law + VTC + server priority (deferred 1)",
            Policy::AdmissionPriority => "saturation-aware admission + server priority",
            Policy::AllDeferred => "all deferred (VTC, new law)",
            Policy::AllDeferredVirtualFinish => "all deferred (virtual finish, the default order)",
            Policy::AdmissionLevel => "admission + server priority 1 + service level",
            Policy::AllDeferredLevel => "all deferred + server priority = service level",
            Policy::DirectLevel => "admission + service level on in-quota too (not built)",
            Policy::TenantBacklog => "server priority + in quota after over quota queued",
        }
    }

    fn quota(self) -> bool {
        !matches!(
            self,
            Policy::Alone
                | Policy::Unloaded
                | Policy::AllDeferred
                | Policy::AllDeferredVirtualFinish
                | Policy::AllDeferredLevel
        )
    }

    /// Whether the controller counts its own calls (the new law).
    fn counts_own(self) -> bool {
        self.vtc() || matches!(self, Policy::DeferNew | Policy::AllDeferredVirtualFinish)
    }

    fn vtc(self) -> bool {
        matches!(
            self,
            Policy::DeferNewVtc
                | Policy::Admission
                | Policy::Priority
                | Policy::AdmissionPriority
                | Policy::AllDeferred
                | Policy::AdmissionLevel
                | Policy::AllDeferredLevel
                | Policy::DirectLevel
                | Policy::TenantBacklog
        )
    }

    /// Saturation-aware admission (sluice-rls `--route-in-quota-when-saturated`).
    fn routes_in_quota(self) -> bool {
        matches!(
            self,
            Policy::Admission
                | Policy::AdmissionPriority
                | Policy::AdmissionLevel
                | Policy::DirectLevel
        )
    }

    /// Every request through the consumer's queue.
    fn all_deferred(self) -> bool {
        matches!(
            self,
            Policy::AllDeferred | Policy::AllDeferredVirtualFinish | Policy::AllDeferredLevel
        )
    }

    /// The consumer's calls carry their tenant's service level
    /// ([`FairQueue::service_level`]) on top of their `server_priority`.
    fn levels(self) -> bool {
        matches!(
            self,
            Policy::AdmissionLevel | Policy::AllDeferredLevel | Policy::DirectLevel
        )
    }

    /// The server schedules by priority; the consumer's calls carry
    /// [`DEFERRED_PRIORITY`].
    fn server_priority(self) -> bool {
        matches!(
            self,
            Policy::Priority | Policy::AdmissionPriority | Policy::TenantBacklog
        ) || self.levels()
    }

    /// The `server_priority` of the consumer's calls (in-quota requests
    /// sent straight to the server carry 0).
    fn deferred_base(self, params: &Params) -> i64 {
        match self {
            Policy::AllDeferredLevel | Policy::DirectLevel => 0,
            Policy::AdmissionLevel => params.level_base,
            _ => DEFERRED_PRIORITY,
        }
    }
}

/// splitmix64: a small, seeded, reproducible generator.
struct Rng(u64);

impl Rng {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in (0, 1].
    fn unit(&mut self) -> f64 {
        ((self.next_u64() >> 11) as f64 + 1.0) / (1u64 << 53) as f64
    }

    fn between(&mut self, (lo, hi): (u64, u64)) -> u64 {
        lo + self.next_u64() % (hi - lo + 1)
    }

    /// Exponential with rate `per_s`, in ms.
    fn gap_ms(&mut self, per_s: f64) -> f64 {
        -self.unit().ln() / per_s * 1000.0
    }
}

#[derive(Clone, Copy, Debug)]
struct Arrival {
    at_ms: u64,
    tenant: usize,
    prompt: u64,
    output: u64,
}

impl Params {
    fn tenants(&self) -> usize {
        self.heavy + self.light
    }

    fn is_light(&self, tenant: usize) -> bool {
        tenant >= self.heavy
    }

    fn overload(&self) -> (u64, u64) {
        let from = self.warm_secs * 1000;
        (from, from + self.overload_secs * 1000)
    }

    /// Every tenant's arrivals, merged in time order (`light_only`: the
    /// light tenants' alone, the same ones).
    fn arrivals(&self, light_only: bool) -> Vec<Arrival> {
        let end_ms = self.overload().1;
        let mut all = Vec::new();
        for tenant in 0..self.tenants() {
            let mut rng = Rng(self.seed.wrapping_mul(1000).wrapping_add(tenant as u64));
            let mut t = 0.0;
            loop {
                let rate = if self.is_light(tenant) {
                    self.light_rate
                } else if (t as u64) < self.overload().0 {
                    self.warm_rate
                } else {
                    self.heavy_rate
                };
                let gap = rng.gap_ms(rate);
                let change = self.overload().0 as f64;
                if t < change && t + gap >= change && !self.is_light(tenant) {
                    // The rate changes here: the process is memoryless, so
                    // the next gap starts afresh at the new rate (a gap
                    // drawn at the warm-up rate would start the overload
                    // seconds late).
                    t = change;
                    continue;
                }
                t += gap;
                if t as u64 >= end_ms {
                    break;
                }
                let arrival = Arrival {
                    at_ms: t as u64,
                    tenant,
                    prompt: rng.between(PROMPT_TOKENS),
                    output: rng.between(OUTPUT_TOKENS),
                };
                if !light_only || self.is_light(tenant) {
                    all.push(arrival);
                }
            }
        }
        all.sort_by_key(|a| (a.at_ms, a.tenant));
        all
    }

    fn control(&self) -> ModelControl {
        ModelControl {
            signal: controller::SignalConfig::Responses,
            floor: 1,
            ceiling: if self.static_reserve {
                self.max_batch.saturating_sub(self.in_quota_reserve).max(1) as u32
            } else {
                512
            },
            in_quota_reserve: (!self.static_reserve && self.in_quota_reserve > 0).then_some(
                InQuotaReserve {
                    server_max_running: self.max_batch as u32,
                    slots: self.in_quota_reserve as u32,
                },
            ),
            initial: None,
            target_waiting: self.target_waiting,
            // The KV cache is sized never to bind (see `capacity`).
            target_kv_usage: None,
            interval_ms: self.interval_ms,
            ..ModelControl::default()
        }
    }

    fn capacity(&self) -> Capacity {
        Capacity {
            tokens_per_s: self.tokens_per_s,
            kv_cache_tokens: self.max_batch as u64 * (PROMPT_TOKENS.1 + MAX_TOKENS + 1),
            max_batch: self.max_batch,
        }
    }
}

/// One request's life.
#[derive(Clone, Debug, Default)]
struct Request {
    arrival_ms: u64,
    tenant: usize,
    prompt: u64,
    output: u64,
    /// Went through the consumer's queue.
    queued: bool,
    rejected: bool,
    /// Sent to the server.
    submitted_ms: Option<u64>,
    first_token_ms: Option<u64>,
    finished_ms: Option<u64>,
    generated: u64,
    /// Output generated and not yet charged to the queue's counter.
    uncharged: u64,
}

/// The consumer's fair queue, the product's own ([`FairQueue`]): start-time
/// fair queueing on estimates, or ordered by attained service (VTC) charged
/// with what every request of a tenant received on either path.
struct Queue {
    queue: FairQueue,
    tickets: HashMap<TicketId, usize>,
    cost: ServiceCost,
}

impl Queue {
    fn new(order: Order) -> Self {
        Queue {
            queue: FairQueue::new(order),
            tickets: HashMap::new(),
            cost: ServiceCost::default(),
        }
    }

    fn push(&mut self, requests: &[Request], index: usize) {
        let request = &requests[index];
        let tenant = tenant_name(request.tenant);
        let estimate = request.prompt + MAX_TOKENS;
        let ticket = self.queue.enqueue(&tenant, Priority::Normal, estimate, 1.0);
        self.tickets.insert(ticket, index);
    }

    /// The next request and its tenant's service level (`levels`:
    /// quantum and levels), taken before it starts, as the consumer does.
    fn pop(&mut self, requests: &[Request], levels: Option<(f64, u32)>) -> Option<(usize, u32)> {
        let ticket = self.queue.pick(0)?;
        let index = *self.tickets.get(&ticket)?;
        let level = self.level(requests[index].tenant, levels);
        self.queue.start(ticket);
        self.tickets.remove(&ticket);
        Some((index, level))
    }

    fn level(&self, tenant: usize, levels: Option<(f64, u32)>) -> u32 {
        levels.map_or(0, |(quantum, levels)| {
            self.queue
                .service_level(&tenant_name(tenant), quantum, levels)
        })
    }

    /// A request of `tenant` that went through the queue ended.
    fn finish(&mut self, tenant: usize) {
        self.queue.finish(&tenant_name(tenant));
    }

    /// `tenant` received `prompt` and `output` tokens (on either path).
    fn serve(&mut self, tenant: usize, prompt: u64, output: u64) {
        let service = self.cost.of(prompt, output);
        self.queue.charge(&tenant_name(tenant), service, 1.0);
    }
}

fn tenant_name(tenant: usize) -> String {
    format!("t{tenant}")
}

/// Per-tenant fixed-window token quota, charged with the estimate.
struct Quota {
    per_window: f64,
    window: Vec<(u64, f64)>,
}

impl Quota {
    fn admit(&mut self, tenant: usize, now_ms: u64, estimate: u64) -> bool {
        let start = now_ms / QUOTA_WINDOW_MS;
        let (window, used) = &mut self.window[tenant];
        if *window != start {
            (*window, *used) = (start, 0.0);
        }
        if *used + estimate as f64 > self.per_window {
            return false;
        }
        *used += estimate as f64;
        true
    }
}

/// What one run recorded.
struct Run {
    policy: Policy,
    requests: Vec<Request>,
    /// Per 100 ms sample: tokens processed (prompt + output).
    processed: Vec<f64>,
    /// Per tenant, per sample: service (prompt + 2 × output) received.
    service: Vec<Vec<f64>>,
    /// Per tenant, per sample: had a request waiting (not started: in a
    /// queue, or admitted but before its first token).
    backlogged: Vec<Vec<bool>>,
    /// Mean consumer limit and server queue over the overload.
    mean_limit: f64,
    mean_waiting: f64,
}

fn simulate(params: &Params, policy: Policy, arrivals: &[Arrival]) -> Run {
    let tenants = params.tenants();
    let dt = Duration::from_millis(params.dt_ms);
    let mut server =
        Scheduler::new(params.capacity(), 0).with_policy(if policy.server_priority() {
            SchedulingPolicy::Priority
        } else {
            SchedulingPolicy::Fcfs
        });
    let mut control = params.control();
    if !policy.counts_own() {
        // The old law does not tell its own calls from foreign ones, so a
        // reserve could only hold its limit: none (it predates them both).
        control.in_quota_reserve = None;
    }
    let mut state: ControllerState = control.initial_state();
    let mut queue = Queue::new(if policy.vtc() {
        Order::AttainedService
    } else {
        Order::VirtualFinish
    });
    let mut saturation: Option<Saturation> = None;
    let mut quota = Quota {
        per_window: params.quota_tokens_per_s * QUOTA_WINDOW_MS as f64 / 1000.0,
        window: vec![(u64::MAX, 0.0); tenants],
    };
    let mut requests: Vec<Request> = Vec::with_capacity(arrivals.len());
    let mut at_server: HashMap<SeqId, usize> = HashMap::new();
    let mut own_in_flight = 0usize;
    let mut pending = vec![0usize; tenants];
    // Requests arrived (not rejected) without their first token yet.
    let mut unstarted = vec![0usize; tenants];
    let arrivals_end = params.overload().1;
    let end_ms = arrivals_end + params.drain_secs * 1000;
    let samples = (end_ms / SAMPLE_MS + 1) as usize;
    let mut processed = vec![0.0; samples];
    let mut service = vec![vec![0.0; samples]; tenants];
    let mut backlogged = vec![vec![false; samples]; tenants];
    let (mut limit_sum, mut waiting_sum, mut overload_steps) = (0.0, 0.0, 0u64);
    // When each tenant last asked over its quota.
    let mut last_over_ms: Vec<Option<u64>> = vec![None; tenants];
    let charge_period_ms = (CHARGE_PERIOD.as_millis() as u64).max(1);
    let mut next_arrival = 0;
    let mut now_ms = 0;
    let mut next_step_ms = 0;
    let levels = policy
        .levels()
        .then_some((params.level_quantum, params.levels));
    // The consumer's calls carry its `server_priority` (+ their tenant's
    // service level) on a server that schedules by priority.
    let submit = |server: &mut Scheduler, request: &Request, level: u32| {
        let base = if request.queued && policy.server_priority() {
            policy.deferred_base(params)
        } else {
            0
        };
        let priority = base + i64::from(level);
        server.submit(SeqSpec {
            prompt_tokens: request.prompt,
            completion_tokens: request.output,
            max_tokens_per_s: params.answer_tokens_per_s,
            priority,
        })
    };
    while now_ms < end_ms {
        // Arrivals: admission.
        while let Some(arrival) = arrivals.get(next_arrival).filter(|a| a.at_ms <= now_ms) {
            next_arrival += 1;
            let index = requests.len();
            let estimate = arrival.prompt + MAX_TOKENS;
            let in_quota = !policy.quota() || quota.admit(arrival.tenant, now_ms, estimate);
            requests.push(Request {
                arrival_ms: arrival.at_ms,
                tenant: arrival.tenant,
                prompt: arrival.prompt,
                output: arrival.output,
                ..Request::default()
            });
            // Saturation-aware admission: sluice-rls's own decision on the
            // saturation the controller last wrote (its background read:
            // `--state-age-ms` old at most).
            let queued = (policy.routes_in_quota()
                && saturation::route_in_quota(saturation, now_ms, params.max_age_ms)
                    == Route::Queue)
                || (policy == Policy::TenantBacklog
                    && last_over_ms[arrival.tenant].is_some_and(|at| {
                        now_ms.saturating_sub(at) <= params.over_quota_memory_ms
                    }));
            if !in_quota {
                last_over_ms[arrival.tenant] = Some(now_ms);
            }
            let deferred = !in_quota || queued || policy.all_deferred();
            if !deferred {
                // Only where the in-quota path could set it (not built).
                let level = if policy == Policy::DirectLevel {
                    queue.level(arrival.tenant, levels)
                } else {
                    0
                };
                if let Ok(seq) = submit(&mut server, &requests[index], level) {
                    at_server.insert(seq, index);
                    requests[index].submitted_ms = Some(now_ms);
                    pending[arrival.tenant] += 1;
                    unstarted[arrival.tenant] += 1;
                    if params.count_direct {
                        queue.serve(arrival.tenant, arrival.prompt, 0);
                    }
                }
            } else if policy == Policy::Reject {
                requests[index].rejected = true;
            } else {
                requests[index].queued = true;
                pending[arrival.tenant] += 1;
                unstarted[arrival.tenant] += 1;
                queue.push(&requests, index);
            }
        }
        // The consumer: calls under the cap.
        while own_in_flight < state.cap() {
            let Some((index, level)) = queue.pop(&requests, levels) else {
                break;
            };
            if let Ok(seq) = submit(&mut server, &requests[index], level) {
                at_server.insert(seq, index);
                requests[index].submitted_ms = Some(now_ms);
                own_in_flight += 1;
                let tenant = requests[index].tenant;
                if params.charge == Charge::AsItGoes {
                    queue.serve(tenant, requests[index].prompt, 0);
                }
            }
        }
        // The server.
        let sample = (now_ms / SAMPLE_MS) as usize;
        for update in server.step(dt) {
            let Some(&index) = at_server.get(&update.id) else {
                continue;
            };
            let request = &mut requests[index];
            let tenant = request.tenant;
            let generated = update.generated.saturating_sub(request.generated);
            let output = generated as f64;
            request.generated = update.generated;
            // The prompt counts when its first token shows (prefill done).
            let prompt = if request.first_token_ms.is_none() {
                request.first_token_ms = Some(now_ms + params.dt_ms);
                unstarted[tenant] -= 1;
                request.prompt as f64
            } else {
                0.0
            };
            processed[sample] += prompt + output;
            service[tenant][sample] += prompt + OUTPUT_WEIGHT * output;
            // The queue's counter took the prompt at the start; the
            // consumer charges the output it streams every period.
            if request.queued && params.charge == Charge::AsItGoes {
                request.uncharged += generated;
                let since = now_ms - request.submitted_ms.unwrap_or(now_ms);
                if since.is_multiple_of(charge_period_ms) || update.finished {
                    queue.serve(tenant, 0, std::mem::take(&mut request.uncharged));
                }
            } else if !request.queued && params.count_direct {
                queue.serve(tenant, 0, generated);
            }
            if update.finished {
                request.finished_ms = Some(now_ms + params.dt_ms);
                at_server.remove(&update.id);
                pending[tenant] -= 1;
                if request.queued {
                    if params.charge == Charge::AtEnd {
                        queue.serve(tenant, request.prompt, request.generated);
                    }
                    own_in_flight -= 1;
                    queue.finish(tenant);
                }
            }
        }
        for tenant in 0..tenants {
            backlogged[tenant][sample] |= unstarted[tenant] > 0;
        }
        // The controller.
        if now_ms >= next_step_ms {
            next_step_ms += params.interval_ms;
            let load = server.load();
            let sample = CapacitySample {
                waiting: Some(load.waiting as f64),
                running: Some(load.running as f64),
                kv_cache_usage: Some(load.kv_cache_usage),
                own_in_flight: policy.counts_own().then_some(own_in_flight as f64),
                ..CapacitySample::default()
            };
            state = controller::step(&control, state, &sample, now_ms).0;
            // Written as the stepper writes it; read `--state-age-ms` later.
            saturation = Some(Saturation {
                saturated: saturation::is_saturated(
                    state.smoothed_waiting,
                    control.target_waiting,
                    own_in_flight as f64,
                ),
                at_ms: now_ms,
            });
            let (from, to) = params.overload();
            if (from..to).contains(&now_ms) {
                limit_sum += state.limit;
                waiting_sum += load.waiting as f64;
                overload_steps += 1;
            }
        }
        now_ms += params.dt_ms;
        if now_ms > arrivals_end
            && next_arrival >= arrivals.len()
            && pending.iter().all(|p| *p == 0)
        {
            break;
        }
    }
    let steps = overload_steps.max(1) as f64;
    Run {
        policy,
        requests,
        processed,
        service,
        backlogged,
        mean_limit: limit_sum / steps,
        mean_waiting: waiting_sum / steps,
    }
}

struct Figures {
    policy: Policy,
    throughput: f64,
    answered: usize,
    rejected: usize,
    never_answered: usize,
    light_ttft: (Option<f64>, Option<f64>),
    /// Of the light tenants' TTFT, the part at the server (sent to first
    /// token), p50.
    light_at_server_p50: Option<f64>,
    heavy_ttft_p50: Option<f64>,
    light_queued: usize,
    diff_max: f64,
    diff_avg: f64,
    mean_limit: f64,
    mean_waiting: f64,
}

fn figures(params: &Params, run: &Run) -> Figures {
    let (from, to) = params.overload();
    let in_phase = |r: &&Request| (from..to).contains(&r.arrival_ms);
    let samples = |ms: u64| (ms / SAMPLE_MS) as usize;
    let processed: f64 = run.processed[samples(from)..samples(to)].iter().sum();
    let ttfts = |light: bool| -> Vec<f64> {
        run.requests
            .iter()
            .filter(in_phase)
            .filter(|r| params.is_light(r.tenant) == light)
            .filter_map(|r| Some((r.first_token_ms? - r.arrival_ms) as f64 / 1000.0))
            .collect()
    };
    let mut light = ttfts(true);
    let mut at_server: Vec<f64> = run
        .requests
        .iter()
        .filter(in_phase)
        .filter(|r| params.is_light(r.tenant))
        .filter_map(|r| Some((r.first_token_ms? - r.submitted_ms?) as f64 / 1000.0))
        .collect();
    let mut heavy = ttfts(false);
    let (diff_max, diff_avg) = service_difference(params, run);
    Figures {
        policy: run.policy,
        throughput: processed / params.overload_secs as f64,
        answered: run
            .requests
            .iter()
            .filter(|r| r.finished_ms.is_some())
            .count(),
        rejected: run.requests.iter().filter(|r| r.rejected).count(),
        never_answered: run
            .requests
            .iter()
            .filter(|r| !r.rejected && r.finished_ms.is_none())
            .count(),
        light_ttft: (percentile(&mut light, 0.5), percentile(&mut light, 0.99)),
        light_at_server_p50: percentile(&mut at_server, 0.5),
        heavy_ttft_p50: percentile(&mut heavy, 0.5),
        light_queued: run
            .requests
            .iter()
            .filter(|r| params.is_light(r.tenant) && r.queued)
            .count(),
        diff_max,
        diff_avg,
        mean_limit: run.mean_limit,
        mean_waiting: run.mean_waiting,
    }
}

/// The VTC paper's service difference over the overloaded phase: windows
/// of `window_secs` sliding by a second; in each, among the tenants
/// backlogged (a request waiting for its first token) at every sample of it (at least two), the largest minus the
/// smallest service received in it. (max, average) over those windows.
fn service_difference(params: &Params, run: &Run) -> (f64, f64) {
    let (from, to) = params.overload();
    let per_s = (1000 / SAMPLE_MS) as usize;
    let window = params.window_secs as usize * per_s;
    let (first, last) = ((from / SAMPLE_MS) as usize, (to / SAMPLE_MS) as usize);
    let mut diffs = Vec::new();
    let mut start = first;
    while start + window <= last {
        let range = start..start + window;
        let received: Vec<f64> = (0..params.tenants())
            .filter(|&t| run.backlogged[t][range.clone()].iter().all(|b| *b))
            .map(|t| run.service[t][range.clone()].iter().sum())
            .collect();
        if received.len() >= 2 {
            let max = received.iter().copied().fold(f64::MIN, f64::max);
            let min = received.iter().copied().fold(f64::MAX, f64::min);
            diffs.push(max - min);
        }
        start += per_s;
    }
    if diffs.is_empty() {
        return (0.0, 0.0);
    }
    let max = diffs.iter().copied().fold(0.0, f64::max);
    (max, diffs.iter().sum::<f64>() / diffs.len() as f64)
}

fn seconds(value: Option<f64>) -> String {
    value.map_or("–".into(), |v| format!("{v:.2}"))
}

fn table(unloaded: &Figures, all: &[Figures]) -> String {
    let alone = all
        .iter()
        .find(|f| f.policy == Policy::Alone)
        .map(|f| f.throughput);
    let mut out = String::new();
    out.push_str(
        "| policy | tokens/s | × alone | answered | rejected | never answered | light TTFT p50 / p99 s | × unloaded p50 | light p50 at server s | heavy TTFT p50 s | light via queue | service diff max / avg | mean limit | mean server queue |\n",
    );
    out.push_str("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    for f in std::iter::once(unloaded).chain(all) {
        let ratio = |v: Option<f64>, base: Option<f64>| match (v, base) {
            (Some(v), Some(b)) if b > 0.0 => format!("{:.2}", v / b),
            _ => "–".into(),
        };
        let limited = !matches!(f.policy, Policy::Unloaded | Policy::Alone | Policy::Reject);
        out.push_str(&format!(
            "| {} | {:.0} | {} | {} | {} | {} | {} / {} | {} | {} | {} | {} | {:.0} / {:.0} | {} | {:.1} |\n",
            f.policy.name(),
            f.throughput,
            ratio(Some(f.throughput), alone),
            f.answered,
            f.rejected,
            f.never_answered,
            seconds(f.light_ttft.0),
            seconds(f.light_ttft.1),
            ratio(f.light_ttft.0, unloaded.light_ttft.0),
            seconds(f.light_at_server_p50),
            seconds(f.heavy_ttft_p50),
            f.light_queued,
            f.diff_max,
            f.diff_avg,
            if limited {
                format!("{:.1}", f.mean_limit)
            } else {
                "–".into()
            },
            f.mean_waiting,
        ));
    }
    out
}

fn parse_seeds(s: &str) -> Result<(u64, u64), String> {
    let (first, last) = s
        .split_once('-')
        .ok_or_else(|| format!("{s:?}: expected FIRST-LAST, e.g. 1-64"))?;
    let number = |n: &str| {
        n.trim()
            .parse::<u64>()
            .map_err(|e| format!("{n:?} in {s:?}: {e}"))
    };
    let (first, last) = (number(first)?, number(last)?);
    if first > last {
        return Err(format!("{s:?}: the first seed is after the last"));
    }
    Ok((first, last))
}

/// Issue 28's first done-when, for one policy in one seed: throughput ≥
/// 0.98 × the server alone, nothing rejected or never answered, the light
/// tenants' TTFT p50 within 1.5 × unloaded, and an average service
/// difference at or below `reference`'s.
fn meets_bullet_one(f: &Figures, alone: &Figures, unloaded: &Figures, reference: &Figures) -> bool {
    let latency = match (f.light_ttft.0, unloaded.light_ttft.0) {
        (Some(loaded), Some(idle)) => loaded <= 1.5 * idle,
        _ => false,
    };
    f.throughput >= 0.98 * alone.throughput
        && f.rejected == 0
        && f.never_answered == 0
        && latency
        && f.diff_avg <= reference.diff_avg
}

/// One row per policy over every seed's figures (`runs[seed][policy]`,
/// the policies as in `policies`).
fn summary(params: &Params, policies: &[Policy], runs: &[(Figures, Vec<Figures>)]) -> String {
    let at = |policy: Policy| policies.iter().position(|p| *p == policy);
    let (Some(alone), Some(reference)) = (at(Policy::Alone), at(params.reference)) else {
        return "the summary needs the server alone and the reference among the policies".into();
    };
    let mean_diff =
        |i: usize| runs.iter().map(|(_, r)| r[i].diff_avg).sum::<f64>() / runs.len() as f64;
    let mut out = format!(
        "{} seeds; reference: {}\n| policy | × alone, least | rejected | never answered | light TTFT × unloaded, most | avg service diff, mean | × reference | seeds ≤ reference | seeds meeting issue 28's bullet 1 |\n|---|---|---|---|---|---|---|---|---|\n",
        runs.len(),
        params.reference.name()
    );
    for (i, policy) in policies.iter().enumerate() {
        let least = runs
            .iter()
            .map(|(_, r)| r[i].throughput / r[alone].throughput)
            .fold(f64::MAX, f64::min);
        let worst_ttft = runs
            .iter()
            .filter_map(|(u, r)| Some(r[i].light_ttft.0? / u.light_ttft.0?))
            .fold(0.0, f64::max);
        let (rejected, never): (usize, usize) = runs
            .iter()
            .map(|(_, r)| (r[i].rejected, r[i].never_answered))
            .fold((0, 0), |(a, b), (c, d)| (a + c, b + d));
        let at_or_below = runs
            .iter()
            .filter(|(_, r)| r[i].diff_avg <= r[reference].diff_avg)
            .count();
        let meeting = runs
            .iter()
            .filter(|(u, r)| meets_bullet_one(&r[i], &r[alone], u, &r[reference]))
            .count();
        out.push_str(&format!(
            "| {} | {least:.3} | {rejected} | {never} | {worst_ttft:.2} | {:.0} | {:.3} | {at_or_below} | {meeting} |\n",
            policy.name(),
            mean_diff(i),
            mean_diff(i) / mean_diff(reference).max(f64::MIN_POSITIVE),
        ));
    }
    out
}

/// `--seeds`: every seed's run, then the summary.
fn main_over_seeds(params: &Params, (first, last): (u64, u64)) {
    let mut policies = params.policies.clone();
    for needed in [Policy::Alone, params.reference] {
        if !policies.contains(&needed) {
            policies.push(needed);
        }
    }
    let runs: Vec<(Figures, Vec<Figures>)> = (first..=last)
        .map(|seed| {
            let params = Params {
                seed,
                ..params.clone()
            };
            let arrivals = params.arrivals(false);
            let unloaded = figures(
                &params,
                &simulate(&params, Policy::Unloaded, &params.arrivals(true)),
            );
            let all = policies
                .iter()
                .map(|&policy| figures(&params, &simulate(&params, policy, &arrivals)))
                .collect();
            (unloaded, all)
        })
        .collect();
    println!("{}", summary(params, &policies, &runs));
}

fn main() {
    let params = Params::parse();
    if let Some(seeds) = params.seeds {
        main_over_seeds(&params, seeds);
        return;
    }
    let arrivals = params.arrivals(false);
    let light_alone = params.arrivals(true);
    println!(
        "{} requests ({} from light tenants); overload {}..{} s; GPU {} tokens/s, batch {}, {} tokens/s per answer",
        arrivals.len(),
        light_alone.len(),
        params.overload().0 / 1000,
        params.overload().1 / 1000,
        params.tokens_per_s,
        params.max_batch,
        params.answer_tokens_per_s,
    );
    let unloaded = figures(&params, &simulate(&params, Policy::Unloaded, &light_alone));
    let all: Vec<Figures> = params
        .policies
        .iter()
        .map(|&policy| figures(&params, &simulate(&params, policy, &arrivals)))
        .collect();
    println!("{}", table(&unloaded, &all));
}
