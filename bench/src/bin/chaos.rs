//! `scripts/chaos [--minutes N] [--rate R] [--max-requests N] [--down-seconds S] [--volatile-redis | --sentinel]`
//! (`cargo run --release -p sluice-bench --bin chaos -- ...`)
//!
//! The chaos run: every part a separate process on loopback (Redis, broker,
//! sluice-llm-sim, sluice-rls with its deferral endpoint, two
//! sluice-consumers, Envoy with the filter) under mixed traffic through
//! Envoy — admitted, rejected and deferred requests, JSON and SSE, each with
//! a deadline — while, one after another with a pause between, a consumer,
//! sluice-rls, Redis, the broker and Envoy are killed with SIGKILL and
//! started again. At the end it prints one table: what every client got,
//! what was never answered, model calls more than once for one request
//! (counted by llm-sim per `x-request-id`, which the consumer sets to the
//! Sluice request id), deferred requests accepted and then lost, and the
//! recovery after each fault. Bounded in time and count; stops by itself.
//!
//! Redis keeps every write in its append-only file before it answers
//! (`appendfsync always`) and reloads it when restarted, as a Redis that
//! holds Sluice's claims must: with `--volatile-redis` it restarts empty, and
//! a deferred request whose claim was lost can reach the model twice. With
//! `--sentinel` Redis is a Sentinel set (master, replica, three sentinels,
//! nothing on disk), its fault kills the master (the sentinels promote the
//! replica, which may lack the last writes) and the consumers wait for a
//! replica to hold each claim before the model call (`claim_replicas: 1`).
//!
//! `--faults broker-freeze` (not in the default set) freezes the broker
//! with SIGSTOP instead: the process lives on with its ports open and
//! answers nothing, as rocketmq-rust 1.0.0's store deadlock leaves it. The
//! run then does what kubelet does with the chart's liveness probe
//! ([`sluice_testkit::broker_liveness`]: a send-and-pop round trip every
//! 10 s, 5 s deadline, three failures in a row) and restarts the broker
//! (SIGKILL, started again on its ports and store) once the probe says so.

use clap::Parser;
use sluice_testkit::broker_liveness::{self, Detection, LivenessPolicy};
use sluice_testkit::load::{
    model_calls, quantile, run_open_loop, Class, LoadClient, OpenLoop, Outcome, ProcessStack,
    ProcessStackOptions, Record, RequestSpec,
};
use sluice_testkit::redis_topologies::RedisKind;
use sluice_testkit::Durability;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// The endpoint's deferral timeout in this run: a deferred request not
/// answered by then gets a timeout error from the endpoint.
const DEFERRAL_TIMEOUT_S: u64 = 60;

/// The chaos run's flags (see the header of this file).
#[derive(Parser)]
#[command(about = "Mixed traffic through Envoy while every part is killed and restarted in turn")]
struct Args {
    /// Length of the run in minutes (at least 1.5: five faults with pauses between).
    #[arg(long, default_value_t = 4.0)]
    minutes: f64,
    /// Requests per second.
    #[arg(long, default_value_t = 20.0)]
    rate: f64,
    /// Requests at the most.
    #[arg(long, default_value_t = 100_000)]
    max_requests: u64,
    /// How long each killed part stays down before it is started again, seconds.
    #[arg(long, default_value_t = 2.0)]
    down_seconds: f64,
    /// Where the processes keep their files (default: a new folder in the temp dir).
    #[arg(long)]
    workdir: Option<PathBuf>,
    /// Redis restarts empty instead of reloading its append-only file.
    #[arg(long, conflicts_with = "sentinel")]
    volatile_redis: bool,
    /// Redis is a Sentinel set; its fault kills the master (a failover),
    /// and the consumers run with `idempotency.claim_replicas: 1`.
    #[arg(long)]
    sentinel: bool,
    /// Only these faults, in the usual order (e.g. `--faults redis`): a
    /// shorter run that looks at one part's recovery.
    #[arg(long, value_delimiter = ',', value_parser = Fault::parse)]
    faults: Vec<Fault>,
}

impl Args {
    fn duration(&self) -> Duration {
        Duration::from_secs_f64(self.minutes * 60.0)
    }

    fn down(&self) -> Duration {
        Duration::from_secs_f64(self.down_seconds)
    }

    fn workdir(&self) -> PathBuf {
        self.workdir.clone().unwrap_or_else(|| {
            std::env::temp_dir().join(format!("sluice-chaos-{}", std::process::id()))
        })
    }

    /// The faults of this run, in the usual order.
    fn faults(&self) -> Vec<Fault> {
        if self.faults.is_empty() {
            return Fault::DEFAULT.to_vec();
        }
        Fault::ALL
            .into_iter()
            .filter(|f| self.faults.contains(f))
            .collect()
    }

    fn redis_kind(&self) -> RedisKind {
        if self.sentinel {
            RedisKind::Sentinel
        } else {
            RedisKind::Single
        }
    }

    /// Paced far above the run's rate; with `--sentinel`, a claim is held by
    /// a replica before the model is called.
    fn consumer_config(&self) -> String {
        let mut config = ProcessStackOptions::consumer_paced_at(1000);
        if self.sentinel {
            config.push_str("idempotency:\n  claim_replicas: 1\n");
        }
        config
    }

    fn redis(&self) -> Durability {
        if self.volatile_redis {
            Durability::Volatile
        } else {
            Durability::AppendAlways
        }
    }
}

fn parse_args() -> anyhow::Result<Args> {
    let args = Args::parse();
    anyhow::ensure!(
        args.minutes >= 1.5 && args.down_seconds >= 0.0,
        "--minutes must be at least 1.5 (five faults with pauses between) and --down-seconds not negative"
    );
    Ok(args)
}

/// Request `n`: 3 in 10 admitted JSON, 2 admitted SSE, 1 rejected,
/// 2 deferred JSON, 2 deferred SSE.
fn chaos_mix(n: u64) -> RequestSpec {
    let (class, stream) = match n % 10 {
        0..=2 => (Class::Admitted, false),
        3 | 4 => (Class::Admitted, true),
        5 => (Class::Rejected, n % 20 == 15),
        6 | 7 => (Class::Deferred, false),
        _ => (Class::Deferred, true),
    };
    RequestSpec {
        class,
        stream,
        lane: (n / 10) as usize,
    }
}

fn deadline(spec: &RequestSpec) -> Duration {
    match spec.class {
        // The endpoint answers by its timeout; the client waits longer.
        Class::Deferred => Duration::from_secs(DEFERRAL_TIMEOUT_S + 30),
        _ => Duration::from_secs(15),
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Fault {
    Consumer,
    Rls,
    Redis,
    Broker,
    /// SIGSTOP, found by the liveness probe, then restarted.
    BrokerFreeze,
    Envoy,
}

impl Fault {
    /// A run without `--faults`: every part killed once.
    const DEFAULT: [Fault; 5] = [
        Fault::Consumer,
        Fault::Rls,
        Fault::Redis,
        Fault::Broker,
        Fault::Envoy,
    ];
    const ALL: [Fault; 6] = [
        Fault::Consumer,
        Fault::Rls,
        Fault::Redis,
        Fault::Broker,
        Fault::BrokerFreeze,
        Fault::Envoy,
    ];

    fn name(self) -> &'static str {
        match self {
            Fault::Consumer => "consumer-1",
            Fault::Rls => "sluice-rls",
            Fault::Redis => "redis",
            Fault::Broker => "broker",
            Fault::BrokerFreeze => "broker-freeze",
            Fault::Envoy => "envoy",
        }
    }

    fn parse(name: &str) -> Result<Fault, String> {
        Fault::ALL
            .into_iter()
            .find(|f| f.name() == name || (name == "consumer" && *f == Fault::Consumer))
            .ok_or_else(|| {
                format!(
                    "unknown fault {name:?} (consumer, sluice-rls, redis, broker, broker-freeze, envoy)"
                )
            })
    }

    fn kill(self, stack: &mut ProcessStack) -> anyhow::Result<()> {
        match self {
            Fault::Consumer => stack.consumers[0].kill9(),
            Fault::Rls => stack.rls.kill9(),
            Fault::Redis => return stack.redis.fail(),
            Fault::Broker => stack.mq.kill_broker(),
            Fault::BrokerFreeze => {
                let pid = stack
                    .mq
                    .broker_pid()
                    .ok_or_else(|| anyhow::anyhow!("the broker is not running"))?;
                sluice_testkit::signal(pid, "STOP");
            }
            Fault::Envoy => stack.kill_envoy(),
        }
        Ok(())
    }

    /// How the fault is dealt: SIGKILL, or SIGSTOP for a freeze.
    fn signal(self) -> &'static str {
        match self {
            Fault::BrokerFreeze => "kill -STOP",
            _ => "kill -9",
        }
    }

    /// Between the fault and the restart: `down` for a killed part; for a
    /// frozen broker, until the liveness probe run as kubelet runs it says
    /// to restart it (or a minute passes: then it is restarted anyway and
    /// the run says the probe missed it).
    fn wait_for_restart(
        self,
        stack: &ProcessStack,
        since: Instant,
        down: Duration,
    ) -> Option<anyhow::Result<Detection>> {
        if self != Fault::BrokerFreeze {
            std::thread::sleep(down);
            return None;
        }
        let namesrv = stack.mq.namesrv_addr();
        let policy = LivenessPolicy::chart();
        Some(
            tokio::runtime::Handle::current().block_on(broker_liveness::until_restart_due(
                &namesrv,
                &policy,
                since,
                Duration::from_secs(60),
            )),
        )
    }

    fn restart(self, stack: &mut ProcessStack) -> anyhow::Result<()> {
        match self {
            Fault::Consumer => stack.consumers[0].restart(),
            Fault::Rls => stack.rls.restart(),
            Fault::Redis => stack.redis.restart(),
            Fault::Broker | Fault::BrokerFreeze => stack.mq.restart_broker(),
            Fault::Envoy => stack.restart_envoy(),
        }
    }
}

/// When one fault happened, since the run began.
#[derive(Clone, Copy, Debug)]
struct FaultTimes {
    fault: Fault,
    killed: Duration,
    /// The restart began.
    restarting: Duration,
    /// The process accepted connections again.
    restarted: Duration,
}

/// What the liveness probe saw of a frozen broker, timed from the freeze.
struct FreezeDetection {
    frozen: Duration,
    detection: anyhow::Result<Detection>,
}

/// The endpoint's counters, summed over sluice-rls's lives (a restart
/// zeroes them).
#[derive(Default, Debug)]
struct EndpointCounts {
    accepted: f64,
    republished: f64,
    timed_out: f64,
    republished_unclaimed: f64,
}

const ENDPOINT_METRICS: [&str; 4] = [
    "sluice_rls_deferral_accepted_total",
    "sluice_rls_deferral_republished_total",
    "sluice_rls_deferral_timed_out_total",
    "sluice_rls_deferral_republished_unclaimed_total",
];

impl EndpointCounts {
    fn add_scrape(&mut self, stack: &ProcessStack) {
        if let Some(v) = stack.rls_metrics(&ENDPOINT_METRICS) {
            self.accepted += v[0];
            self.republished += v[1];
            self.timed_out += v[2];
            self.republished_unclaimed += v[3];
        }
    }
}

/// What [`run_faults`] hands back: the stack, when each fault happened, the
/// endpoint's counts and what the broker's liveness probe saw of a freeze.
type FaultRun = (
    ProcessStack,
    Vec<FaultTimes>,
    EndpointCounts,
    Option<FreezeDetection>,
);

/// Kills and restarts every part in turn, `gap` apart after `lead`.
fn run_faults(
    mut stack: ProcessStack,
    faults: Vec<Fault>,
    start: Instant,
    lead: Duration,
    gap: Duration,
    down: Duration,
) -> FaultRun {
    let mut times = Vec::new();
    let mut counts = EndpointCounts::default();
    let mut freeze = None;
    let mut next = start + lead;
    for fault in faults {
        std::thread::sleep(next.saturating_duration_since(Instant::now()));
        if fault == Fault::Rls {
            counts.add_scrape(&stack);
        }
        // Taken before the kill: requests it breaks end after this.
        let killed = start.elapsed();
        if let Err(error) = fault.kill(&mut stack) {
            eprintln!("chaos: killing {} failed: {error:#}", fault.name());
        }
        eprintln!(
            "chaos: {:>6.1} s {} {}",
            killed.as_secs_f64(),
            fault.signal(),
            fault.name()
        );
        let since = Instant::now();
        if let Some(detection) = fault.wait_for_restart(&stack, since, down) {
            report_detection(&detection);
            freeze = Some(FreezeDetection {
                frozen: killed,
                detection,
            });
        }
        let restarting = start.elapsed();
        if let Err(error) = fault.restart(&mut stack) {
            eprintln!("chaos: restarting {} failed: {error:#}", fault.name());
        }
        let restarted = start.elapsed();
        eprintln!(
            "chaos: {:>6.1} s {} back (restart took {:.1} s)",
            restarted.as_secs_f64(),
            fault.name(),
            (restarted - restarting).as_secs_f64()
        );
        times.push(FaultTimes {
            fault,
            killed,
            restarting,
            restarted,
        });
        next += gap;
    }
    (stack, times, counts, freeze)
}

fn report_detection(detection: &anyhow::Result<Detection>) {
    match detection {
        Ok(d) => eprintln!(
            "chaos: liveness probe: first failure {:.1} s after the freeze, restart due after {:.1} s",
            d.first_failure.as_secs_f64(),
            d.decided.as_secs_f64()
        ),
        Err(error) => eprintln!("chaos: liveness probe missed the freeze: {error:#}"),
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    sluice_testkit::init_bench_tracing();
    let args = parse_args()?;
    let stack = ProcessStack::start_for(
        "chaos",
        ProcessStackOptions {
            limits: sluice_testkit::load::limits_yaml(),
            bin_dir: None,
            progress: |_| {},
            consumers: 2,
            // 16 tokens at 50/s: a stream lasts ~0.3 s, long enough to be cut.
            sim_args: ProcessStackOptions::sim_pace(50, 20),
            consumer_config: args.consumer_config(),
            dir: args.workdir(),
            // The unclaimed bound (off by default) on: the broker's offset
            // collision can leave a message out of its queue (issue 29).
            rls_args: vec![
                "--deferral-timeout-s".into(),
                DEFERRAL_TIMEOUT_S.to_string(),
                "--deferral-unclaimed-republish-s".into(),
                "30".into(),
            ],
            redis_kind: args.redis_kind(),
            redis: args.redis(),
            redis_args: Vec::new(),
            // sluice-rls is one of the parts killed: while it is down, the
            // shipped `failure_mode: allow` keeps requests flowing.
            refuse_undecided: false,
            decision_deadline_ms: None,
        },
    )
    .await?;
    let client = LoadClient::new(stack.listener, 40);
    let sim = stack.sim_addr;

    // Warm-up: every class once, outside the counted run.
    let warm_start = Instant::now();
    for n in 0..10 {
        let spec = chaos_mix(n);
        let record = client
            .send(1_000_000_000 + n, spec, warm_start, deadline(&spec))
            .await;
        anyhow::ensure!(
            record.outcome.is_success_for(spec.class),
            "warm-up request {spec:?} failed: {:?}",
            record.outcome
        );
    }

    // Faults spread over the run: the first after 1/8 of it, the last
    // leaving 1/4 of it to heal.
    let duration = args.duration();
    let lead = duration / 8;
    let chosen = args.faults();
    let gap = (duration - lead - duration / 4) / (chosen.len().max(2) as u32 - 1);
    let start = Instant::now();
    let down = args.down();
    let faults =
        tokio::task::spawn_blocking(move || run_faults(stack, chosen, start, lead, gap, down));
    let plan = OpenLoop {
        rate_per_second: args.rate,
        duration,
        max_requests: args.max_requests,
        max_in_flight: 4096,
        deadline,
    };
    let records = run_open_loop(&client, plan, start, chaos_mix).await;
    let (mut stack, times, mut counts, freeze) = faults.await?;
    counts.add_scrape(&stack);
    eprintln!(
        "chaos: traffic over after {:.0} s; asking llm-sim for its calls",
        start.elapsed().as_secs_f64()
    );

    let calls = model_calls_per_request(sim, &records).await;
    print_report(&args, &records, &calls, &times, &counts);
    print_freeze(freeze.as_ref(), &times);
    stack.kill_envoy();
    Ok(())
}

/// llm-sim's call count of each record's model request: the Sluice request
/// id for deferred requests (the consumer's `x-request-id`), the client's
/// `x-request-id` for admitted ones (Envoy passes it on).
async fn model_calls_per_request(
    sim: std::net::SocketAddr,
    records: &[Record],
) -> BTreeMap<u64, u64> {
    let mut calls = BTreeMap::new();
    for record in records {
        let id = match record.spec.class {
            Class::Deferred => record.sluice_request_id.clone(),
            Class::Admitted => Some(record.client_request_id()),
            Class::Rejected => None,
        };
        if let Some(id) = id {
            if let Some(n) = model_calls(sim, &id).await {
                calls.insert(record.number, n);
            }
        }
    }
    calls
}

fn print_report(
    args: &Args,
    records: &[Record],
    calls: &BTreeMap<u64, u64>,
    times: &[FaultTimes],
    counts: &EndpointCounts,
) {
    let count = |f: &dyn Fn(&Record) -> bool| records.iter().filter(|r| f(r)).count();
    let sent = count(&|r| r.outcome != Outcome::Skipped);
    let full = count(&|r| r.outcome == Outcome::Full);
    let rejected_429 = count(&|r| r.spec.class == Class::Rejected && r.outcome == Outcome::TooMany);
    let never = count(&|r| r.outcome == Outcome::Timeout { started: false });
    let started_no_end = count(&|r| r.outcome == Outcome::Timeout { started: true });
    let skipped = count(&|r| r.outcome == Outcome::Skipped);
    let mut errors: BTreeMap<String, usize> = BTreeMap::new();
    for record in records {
        let expected = record.outcome.is_success_for(record.spec.class)
            || (record.spec.class == Class::Rejected && record.outcome == Outcome::Full);
        if !expected && !matches!(record.outcome, Outcome::Timeout { .. } | Outcome::Skipped) {
            *errors
                .entry(format!(
                    "{} ({})",
                    record.outcome.label(),
                    record.spec.class.name()
                ))
                .or_default() += 1;
        }
    }
    let double = calls.values().filter(|n| **n > 1).count();
    let checked_deferred = records
        .iter()
        .filter(|r| r.spec.class == Class::Deferred && calls.contains_key(&r.number))
        .count();
    let checked_admitted = records
        .iter()
        .filter(|r| r.spec.class == Class::Admitted && calls.get(&r.number).is_some_and(|n| *n > 0))
        .count();
    // Accepted (the endpoint named the request) and then lost: no whole
    // answer and the model never ran it.
    let lost: Vec<&Record> = records
        .iter()
        .filter(|r| accepted_then_lost(r, calls))
        .collect();
    let deferred_total = count(&|r| r.spec.class == Class::Deferred);
    let deferred_full = count(&|r| r.spec.class == Class::Deferred && r.outcome == Outcome::Full);
    let deferred_resumed =
        count(&|r| r.spec.class == Class::Deferred && matches!(r.outcome, Outcome::Resumed { .. }));

    println!(
        "chaos: {:.1} min at {} req/s, each part killed (SIGKILL) and restarted after {:.0} s",
        args.minutes, args.rate, args.down_seconds
    );
    println!("\n| | requests |\n|---|---:|");
    println!("| sent | {sent} |");
    println!("| answered fully (whole JSON answer or SSE ending in [DONE]) | {full} |");
    println!("| rejected as meant: 429 with a JSON error | {rejected_429} |");
    print_resumed(records);
    for (kind, n) in &errors {
        println!("| clear error: {kind} | {n} |");
    }
    println!("| **never answered** (no answer within the deadline) | **{never}** |");
    println!("| started (headers), then no end within the deadline | {started_no_end} |");
    if skipped > 0 {
        println!("| not sent (client at its in-flight cap) | {skipped} |");
    }
    println!(
        "| **model called more than once for one request** (of {checked_deferred} deferred and {checked_admitted} admitted checked at llm-sim) | **{double}** |"
    );
    println!(
        "| **deferred, accepted and then lost** (named by the endpoint, not answered fully, never run) | **{}** |",
        lost.len()
    );
    println!(
        "| deferred: sent / answered fully / resumed to a whole answer | {deferred_total} / {deferred_full} / {deferred_resumed} |"
    );
    if let Some(first) = times.first() {
        // What "answered within" below compares to: a backlog shows here.
        let mut before: Vec<Duration> = records
            .iter()
            .filter(|r| r.spec.class == Class::Deferred && r.outcome == Outcome::Full)
            .filter(|r| r.finished_at() < first.killed)
            .map(|r| r.latency)
            .collect();
        println!(
            "| deferred answered fully before the first fault: latency p50 / max | {:.2} s / {:.2} s |",
            quantile(&mut before, 0.5).as_secs_f64(),
            quantile(&mut before, 1.0).as_secs_f64()
        );
    }
    println!(
        "| endpoint: accepted / published again after a lapsed lease / published again, picked up by no consumer in time / timed out (sum over sluice-rls's lives) | {:.0} / {:.0} / {:.0} / {:.0} |",
        counts.accepted, counts.republished, counts.republished_unclaimed, counts.timed_out
    );
    for record in records
        .iter()
        .filter(|r| calls.get(&r.number).is_some_and(|n| *n > 1))
    {
        println!(
            "called {} times: {}",
            calls[&record.number],
            describe(record)
        );
    }
    for record in lost.iter().take(10) {
        println!("lost: {}", describe(record));
    }

    println!(
        "\n| fault (SIGKILL at) | restart took | admitted: failed / healed after restart | rejected: failed / healed | deferred: failed / healed | deferred in flight at the kill: answered within |\n|---|---:|---:|---:|---:|---:|"
    );
    for (index, fault) in times.iter().enumerate() {
        let until = times
            .get(index + 1)
            .map_or(Duration::MAX, |next| next.killed);
        let per_class = [Class::Admitted, Class::Rejected, Class::Deferred]
            .map(|class| recovery(records, class, fault, until));
        let in_flight = records
            .iter()
            .filter(|r| r.spec.class == Class::Deferred)
            .filter(|r| r.sent_at < fault.killed && r.finished_at() > fault.killed)
            .map(|r| r.finished_at() - fault.killed)
            .max();
        println!(
            "| {} ({:.0} s) | {:.1} s | {} | {} | {} | {} |",
            fault.fault.name(),
            fault.killed.as_secs_f64(),
            (fault.restarted - fault.restarting).as_secs_f64(),
            per_class[0],
            per_class[1],
            per_class[2],
            in_flight.map_or("none".into(), |d| format!("{:.1} s", d.as_secs_f64()))
        );
    }
    print_fault_outcomes(records, calls, times);
    print_fault_details(records, times);
}

/// Per fault, the requests that ended while it was the latest (from its
/// kill to the next one; before the first fault its own row): deferred
/// streams that broke mid-answer, of those resumed to a whole answer and
/// left broken; requests the model ran more than once; never answered;
/// deferred accepted and then lost.
fn print_fault_outcomes(records: &[Record], calls: &BTreeMap<u64, u64>, times: &[FaultTimes]) {
    println!(
        "\n| requests that ended while this fault was the latest | deferred streams broken mid-answer / resumed whole / left broken | model called more than once | never answered | deferred accepted and then lost |\n|---|---:|---:|---:|---:|"
    );
    let first = times.first().map_or(Duration::MAX, |t| t.killed);
    let mut rows = vec![("before the first fault".to_string(), Duration::ZERO, first)];
    for (index, fault) in times.iter().enumerate() {
        let until = times
            .get(index + 1)
            .map_or(Duration::MAX, |next| next.killed);
        rows.push((
            format!(
                "{} ({:.0} s)",
                fault.fault.name(),
                fault.killed.as_secs_f64()
            ),
            fault.killed,
            until,
        ));
    }
    for (name, from, until) in rows {
        let ended: Vec<&Record> = records
            .iter()
            .filter(|r| r.outcome != Outcome::Skipped)
            .filter(|r| r.finished_at() > from && r.finished_at() <= until)
            .collect();
        let deferred = || ended.iter().filter(|r| r.spec.class == Class::Deferred);
        let broke = deferred().filter(|r| broke_mid_answer(&r.outcome)).count();
        let resumed = deferred()
            .filter(|r| matches!(r.outcome, Outcome::Resumed { .. }))
            .count();
        let twice = ended
            .iter()
            .filter(|r| calls.get(&r.number).is_some_and(|n| *n > 1))
            .count();
        let never = ended
            .iter()
            .filter(|r| r.outcome == Outcome::Timeout { started: false })
            .count();
        let lost = deferred().filter(|r| accepted_then_lost(r, calls)).count();
        println!(
            "| {name} | {broke} / {resumed} / {} | {twice} | {never} | {lost} |",
            broke - resumed
        );
    }
}

/// A stream that broke after its headers: resumed (whole or not), or left
/// cut.
fn broke_mid_answer(outcome: &Outcome) -> bool {
    matches!(
        outcome,
        Outcome::Resumed { .. }
            | Outcome::ResumedDisordered
            | Outcome::BodyBroken
            | Outcome::StreamCut
    )
}

/// Named by the endpoint, no whole answer, and the model never ran it.
fn accepted_then_lost(record: &Record, calls: &BTreeMap<u64, u64>) -> bool {
    record.spec.class == Class::Deferred
        && record.sluice_request_id.is_some()
        && !record.outcome.is_whole()
        && calls.get(&record.number) == Some(&0)
}

/// The streams that broke and were resumed to their end: how many, and
/// whether each one's text is the text of the streams that never broke
/// (llm-sim answers every load request with the same words), so that a
/// chunk lost or repeated at the resume shows. Then why resuming failed,
/// for the streams it could not save.
fn print_resumed(records: &[Record]) {
    let resumed: Vec<&Record> = records
        .iter()
        .filter(|r| matches!(r.outcome, Outcome::Resumed { .. }))
        .collect();
    let mut texts: BTreeMap<&str, usize> = BTreeMap::new();
    for record in records.iter().filter(|r| r.outcome == Outcome::Full) {
        if let Some(text) = record.content.as_deref().filter(|t| !t.is_empty()) {
            *texts.entry(text).or_default() += 1;
        }
    }
    let reference = texts.iter().max_by_key(|(_, n)| **n).map(|(text, _)| *text);
    let same = resumed
        .iter()
        .filter(|r| r.content.as_deref() == reference)
        .count();
    let reconnects: u32 = resumed
        .iter()
        .map(|r| match r.outcome {
            Outcome::Resumed { resumes } => resumes,
            _ => 0,
        })
        .sum();
    println!(
        "| broke mid-answer, **resumed to a whole answer** (resume token + Last-Event-ID through Envoy; {reconnects} reconnects) | {} |",
        resumed.len()
    );
    println!(
        "| of those, text equal to an unbroken stream's (nothing lost or repeated) | {same} / {} |",
        resumed.len()
    );
    let mut why: BTreeMap<&str, usize> = BTreeMap::new();
    for record in records.iter().filter(|r| !r.outcome.is_whole()) {
        if let Some(reason) = record.resume_error.as_deref() {
            *why.entry(reason).or_default() += 1;
        }
    }
    for (reason, n) in why {
        println!("| could not resume, last try: {reason} | {n} |");
    }
}

/// Under the table, per fault: the deferred requests in flight at the kill
/// that ended more than [`SLOW_AFTER_RESTART`] after the restart, and the
/// deferred requests that did not get a whole answer and ended while this
/// fault was the latest (each with its Sluice id, to follow in the logs).
fn print_fault_details(records: &[Record], times: &[FaultTimes]) {
    for (index, fault) in times.iter().enumerate() {
        let until = times
            .get(index + 1)
            .map_or(Duration::MAX, |next| next.killed);
        let mut slow: Vec<&Record> = records
            .iter()
            .filter(|r| r.spec.class == Class::Deferred)
            .filter(|r| r.sent_at < fault.killed && r.finished_at() > fault.killed)
            .filter(|r| r.finished_at() > fault.restarted + SLOW_AFTER_RESTART)
            .collect();
        slow.sort_by_key(|r| std::cmp::Reverse(r.finished_at()));
        let failed: Vec<&Record> = records
            .iter()
            .filter(|r| r.spec.class == Class::Deferred && !r.outcome.is_whole())
            .filter(|r| r.finished_at() > fault.killed && r.finished_at() <= until)
            .collect();
        if slow.is_empty() && failed.is_empty() {
            continue;
        }
        println!(
            "\n{}: {} in flight at the kill ended more than {:.0} s after the restart; {} deferred without a whole answer ended before the next fault",
            fault.fault.name(),
            slow.len(),
            SLOW_AFTER_RESTART.as_secs_f64(),
            failed.len()
        );
        for record in slow.iter().take(10) {
            println!(
                "  slow: {} (ended {:.1} s after the restart)",
                describe(record),
                (record.finished_at() - fault.restarted).as_secs_f64()
            );
        }
        for record in failed.iter().take(30) {
            println!("  not whole: {}", describe(record));
        }
    }
}

/// The recovery target for requests in flight at a kill.
const SLOW_AFTER_RESTART: Duration = Duration::from_secs(5);

/// For requests of `class` sent between `fault`'s kill and `until`: how many
/// failed, and how long after the restart was done the first success after
/// the last failure ended ("0 / —" when none failed).
fn recovery(records: &[Record], class: Class, fault: &FaultTimes, until: Duration) -> String {
    let window: Vec<&Record> = records
        .iter()
        .filter(|r| r.spec.class == class && r.sent_at >= fault.killed)
        // Ended before the next fault: not its doing.
        .filter(|r| r.finished_at() < until)
        .collect();
    let failed: Vec<&&Record> = window
        .iter()
        .filter(|r| !r.outcome.is_success_for(class))
        .collect();
    let Some(last_failure) = failed.iter().map(|r| r.sent_at).max() else {
        return "0 / —".into();
    };
    let healed = window
        .iter()
        .filter(|r| r.sent_at > last_failure && r.outcome.is_success_for(class))
        .map(|r| r.finished_at())
        .min();
    match healed {
        Some(at) => format!(
            "{} / {:.1} s",
            failed.len(),
            at.saturating_sub(fault.restarted).as_secs_f64()
        ),
        None => format!("{} / not before the next fault", failed.len()),
    }
}

/// One request of the run, for the lists of suspicious ones.
fn describe(record: &Record) -> String {
    format!(
        "#{} {:?} sent at {:.1} s, {} after {:.1} s, sluice id {:?}",
        record.number,
        record.spec,
        record.sent_at.as_secs_f64(),
        record.outcome.label(),
        record.latency.as_secs_f64(),
        record.sluice_request_id
    )
}

/// Under the tables, for a `broker-freeze` fault: when the liveness probe
/// (run as kubelet runs the chart's) first failed and decided on the
/// restart, and when the broker was back — all after the SIGSTOP.
fn print_freeze(freeze: Option<&FreezeDetection>, times: &[FaultTimes]) {
    let Some(freeze) = freeze else {
        return;
    };
    let back = times
        .iter()
        .find(|t| t.fault == Fault::BrokerFreeze)
        .map(|t| t.restarted.saturating_sub(freeze.frozen).as_secs_f64());
    let back = back.map_or("never".into(), |s| format!("{s:.1} s"));
    match &freeze.detection {
        Ok(d) => println!(
            "\nbroker-freeze (SIGSTOP): liveness probe (every 10 s, 5 s deadline, 3 failures in a row) first failed {:.1} s after the freeze (slowest failing probe {:.1} s; {} passed meanwhile), restart due {:.1} s, broker back {back}",
            d.first_failure.as_secs_f64(),
            d.longest_failed_probe.as_secs_f64(),
            d.passed,
            d.decided.as_secs_f64()
        ),
        Err(error) => println!(
            "\nbroker-freeze (SIGSTOP): **the liveness probe did not find it** ({error:#}); restarted anyway, back {back}"
        ),
    }
}
