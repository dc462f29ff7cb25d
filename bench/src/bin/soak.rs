//! `scripts/soak [--minutes N | --seconds N] [--calibrate-seconds N] [--deferred-share F] [--svg PATH]
//!               [--short-retention] [--done-ttl-secs N] [--max-work-item-age-secs N]
//!               [--owner-ttl-secs N] [--stream-ttl-secs N] [--deferral-timeout-secs N]
//!               [--sim-tracked-request-ids N] [--warmup-seconds N] [--redis-expire-effort N]`
//! (`cargo run --release -p sluice-bench --bin soak -- ...`)
//!
//! The soak: every part a separate process on loopback (Redis, broker,
//! sluice-llm-sim, sluice-rls with its deferral endpoint, one
//! sluice-consumer, Envoy with the filter, whose `failure_mode` is `deny`
//! here: a request that got no rate-limit decision is an error, not an
//! uncounted success). It measures the highest rate of whole answers of the
//! run's own mix (`--calibrate-seconds`, closed loop, 256 in flight), then
//! sends 70 % of it for the given
//! time (default 30 minutes), a share of it deferred (through the broker,
//! the consumer and the model server), JSON and SSE. It samples every
//! process's resident memory every 10 s (RSS, and `RssAnon` / `RssFile` to
//! tell heap from mapped files) and Redis's keys, `used_memory` and share of
//! expired keys not yet reclaimed every 10 s, and prints errors, p99 at the
//! start vs the end, and memory after warm-up (default: twice the longest
//! retention window, at most half the run) vs the end with the flat check
//! (±10 %) on each process's measure ([`flat_measure`]); the chart goes to
//! `--svg`. Bounded in time and count;
//! stops by itself.
//!
//! Redis holds a few keys per deferred request (`done`, `owner`, the
//! answer stream) for their retention, so its memory levels off at rate ×
//! retention; with the default retention (a day for `done` and `owner`)
//! that is after a day. `--short-retention` (or the single knobs) shortens
//! them so that a run of minutes reaches the plateau.

use clap::Parser;
use sluice_testkit::load::{
    calibrate, flat_measure, quantile, rss_chart, run_open_loop, Class, LoadClient, Measure,
    MemorySampler, MemorySeries, MemoryStats, OpenLoop, ProcessStack, ProcessStackOptions, Record,
    RequestSpec, Sampler,
};
use sluice_testkit::redis_info_field;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// The run, as the flags resolve.
struct Args {
    duration: Duration,
    calibrate: Duration,
    load_share: f64,
    deferred_share: f64,
    svg: Option<PathBuf>,
    workdir: PathBuf,
    retention: Retention,
    /// What the memory check leaves out, from the start of the run.
    warmup: Duration,
    /// Redis's `active-expire-effort` (`None`: its default, 1).
    redis_expire_effort: Option<u8>,
}

/// The soak's flags (see the header of this file). A flag given twice takes
/// its last value (`scripts/soak` passes its own `--svg` first).
#[derive(Parser)]
#[command(
    about = "The whole path under 70 % of its highest admitted rate, memory sampled",
    args_override_self = true
)]
struct Flags {
    /// Length of the run in minutes [default: 30].
    #[arg(long, conflicts_with = "seconds")]
    minutes: Option<f64>,
    /// Length of the run in seconds.
    #[arg(long)]
    seconds: Option<f64>,
    /// How long the highest admitted rate is measured first, seconds.
    #[arg(long, default_value_t = 20.0)]
    calibrate_seconds: f64,
    /// Share of the measured rate sent during the run (above 0).
    #[arg(long, default_value_t = 0.7)]
    load_share: f64,
    /// Share of the requests deferred (0..=1).
    #[arg(long, default_value_t = 0.1)]
    deferred_share: f64,
    /// Where the memory chart goes.
    #[arg(long)]
    svg: Option<PathBuf>,
    /// Where the processes keep their files (default: a new folder in the temp dir).
    #[arg(long)]
    workdir: Option<PathBuf>,
    /// What the memory check leaves out, seconds [default: twice the
    /// longest retention window, at most half the run].
    #[arg(long)]
    warmup_seconds: Option<f64>,
    /// Redis's `active-expire-effort` (1..=10; Redis's default is 1): how
    /// hard Redis looks for expired keys, so how many it may keep past
    /// their TTL (about 10 % of them at 1, 1 % at 10).
    #[arg(long, value_parser = clap::value_parser!(u8).range(1..=10))]
    redis_expire_effort: Option<u8>,
    #[command(flatten)]
    retention: RetentionFlags,
}

/// `--short-retention`, then each single knob over it.
#[derive(clap::Args)]
struct RetentionFlags {
    /// Five minutes for everything a deferred request leaves in Redis, and
    /// llm-sim remembers 20,000 request ids, so the plateau shows within the run.
    #[arg(long)]
    short_retention: bool,
    /// Consumer `idempotency.done_ttl_secs` (and `processing_retention_secs`).
    #[arg(long)]
    done_ttl_secs: Option<u64>,
    /// Consumer `idempotency.max_work_item_age_secs`.
    #[arg(long)]
    max_work_item_age_secs: Option<u64>,
    /// sluice-rls `--deferral-owner-ttl-s`.
    #[arg(long)]
    owner_ttl_secs: Option<u64>,
    /// Consumer `stream.ttl_after_end_secs`.
    #[arg(long)]
    stream_ttl_secs: Option<u64>,
    /// sluice-rls `--deferral-timeout-s` and `--deferral-high-priority-timeout-s`.
    #[arg(long)]
    deferral_timeout_secs: Option<u64>,
    /// llm-sim `--max-tracked-request-ids`.
    #[arg(long)]
    sim_tracked_request_ids: Option<usize>,
}

impl RetentionFlags {
    fn resolve(&self) -> Retention {
        let base = if self.short_retention {
            Retention::SHORT
        } else {
            Retention::DEFAULT
        };
        Retention {
            done_ttl_secs: self.done_ttl_secs.unwrap_or(base.done_ttl_secs),
            max_work_item_age_secs: self
                .max_work_item_age_secs
                .unwrap_or(base.max_work_item_age_secs),
            owner_ttl_secs: self.owner_ttl_secs.unwrap_or(base.owner_ttl_secs),
            stream_ttl_secs: self.stream_ttl_secs.unwrap_or(base.stream_ttl_secs),
            deferral_timeout_secs: self
                .deferral_timeout_secs
                .unwrap_or(base.deferral_timeout_secs),
            sim_tracked_request_ids: self
                .sim_tracked_request_ids
                .unwrap_or(base.sim_tracked_request_ids),
        }
    }
}

/// How long Redis keeps what each deferred request leaves behind, and the
/// waits those bounds depend on (the consumer and sluice-rls refuse
/// combinations that could call the model twice or lose an answer).
#[derive(Clone, Copy, Debug)]
struct Retention {
    /// Consumer `idempotency.done_ttl_secs` (and `processing_retention_secs`).
    done_ttl_secs: u64,
    /// Consumer `idempotency.max_work_item_age_secs`.
    max_work_item_age_secs: u64,
    /// sluice-rls `--deferral-owner-ttl-s`.
    owner_ttl_secs: u64,
    /// Consumer `stream.ttl_after_end_secs`.
    stream_ttl_secs: u64,
    /// sluice-rls `--deferral-timeout-s` and `--deferral-high-priority-timeout-s`.
    deferral_timeout_secs: u64,
    /// llm-sim `--max-tracked-request-ids` (the soak never reads `/sim/calls`).
    sim_tracked_request_ids: usize,
}

impl Retention {
    /// The services' defaults.
    const DEFAULT: Retention = Retention {
        done_ttl_secs: 86_400,
        max_work_item_age_secs: 3_600,
        owner_ttl_secs: 86_400,
        stream_ttl_secs: 300,
        deferral_timeout_secs: 600,
        sim_tracked_request_ids: 200_000,
    };
    /// Five minutes for everything a deferred request leaves in Redis; the
    /// soak's clients give up after 60 s, the endpoint after 120 s.
    const SHORT: Retention = Retention {
        done_ttl_secs: 300,
        max_work_item_age_secs: 240,
        owner_ttl_secs: 300,
        stream_ttl_secs: 300,
        deferral_timeout_secs: 120,
        sim_tracked_request_ids: 20_000,
    };

    fn consumer_yaml(&self) -> String {
        format!(
            "stream:\n  ttl_after_end_secs: {}\nidempotency:\n  done_ttl_secs: {}\n  processing_retention_secs: {}\n  max_work_item_age_secs: {}\n",
            self.stream_ttl_secs, self.done_ttl_secs, self.done_ttl_secs, self.max_work_item_age_secs
        )
    }

    fn rls_args(&self) -> Vec<String> {
        [
            "--deferral-owner-ttl-s",
            &self.owner_ttl_secs.to_string(),
            "--deferral-timeout-s",
            &self.deferral_timeout_secs.to_string(),
            "--deferral-high-priority-timeout-s",
            &self.deferral_timeout_secs.to_string(),
        ]
        .map(String::from)
        .to_vec()
    }

    fn sim_args(&self) -> Vec<String> {
        [
            "--max-tracked-request-ids",
            &self.sim_tracked_request_ids.to_string(),
        ]
        .map(String::from)
        .to_vec()
    }

    /// The longest any deferred request's traces stay in Redis or llm-sim.
    fn longest_window_secs(&self) -> u64 {
        [
            self.done_ttl_secs,
            self.owner_ttl_secs,
            self.stream_ttl_secs
                .saturating_add(self.deferral_timeout_secs),
        ]
        .into_iter()
        .max()
        .unwrap_or(0)
    }

    fn describe(&self) -> String {
        format!(
            "done markers {} s, request owners {} s, answer streams {} s after their end, \
             work items expire after {} s, deferred requests wait at most {} s; \
             llm-sim remembers the last {} request ids",
            self.done_ttl_secs,
            self.owner_ttl_secs,
            self.stream_ttl_secs,
            self.max_work_item_age_secs,
            self.deferral_timeout_secs,
            self.sim_tracked_request_ids
        )
    }
}

fn parse_args() -> anyhow::Result<Args> {
    let flags = Flags::parse();
    let run_s = match (flags.minutes, flags.seconds) {
        (_, Some(seconds)) => seconds,
        (minutes, None) => minutes.unwrap_or(30.0) * 60.0,
    };
    anyhow::ensure!(
        (0.0..=1.0).contains(&flags.deferred_share) && flags.load_share > 0.0,
        "--deferred-share must be in 0..=1 and --load-share above 0"
    );
    anyhow::ensure!(
        run_s > 0.0 && flags.calibrate_seconds > 0.0,
        "the run (--minutes or --seconds) and --calibrate-seconds must be above 0"
    );
    let retention = flags.retention.resolve();
    let warmup_s = flags
        .warmup_seconds
        .unwrap_or_else(|| default_warmup_secs(run_s, &retention));
    anyhow::ensure!(
        (0.0..run_s).contains(&warmup_s),
        "--warmup-seconds must be at least 0 and shorter than the run"
    );
    Ok(Args {
        duration: Duration::from_secs_f64(run_s),
        calibrate: Duration::from_secs_f64(flags.calibrate_seconds),
        load_share: flags.load_share,
        deferred_share: flags.deferred_share,
        svg: flags.svg,
        workdir: flags.workdir.unwrap_or_else(|| {
            std::env::temp_dir().join(format!("sluice-soak-{}", std::process::id()))
        }),
        retention,
        warmup: Duration::from_secs_f64(warmup_s),
        redis_expire_effort: flags.redis_expire_effort,
    })
}

/// Twice the longest retention window (its keys have been written and
/// expired once over before the check starts), at most half the run.
fn default_warmup_secs(run_s: f64, retention: &Retention) -> f64 {
    (2.0 * retention.longest_window_secs() as f64).min(run_s / 2.0)
}

/// Request `n` of the soak: every `1/share`-th deferred (alternating the
/// two deferred tenants); one in two deferred and one in four admitted
/// requests streamed.
fn soak_mix(deferred_share: f64) -> impl Fn(u64) -> RequestSpec {
    move |n| {
        let deferred =
            ((n + 1) as f64 * deferred_share).floor() > (n as f64 * deferred_share).floor();
        if deferred {
            let k = ((n + 1) as f64 * deferred_share).floor() as u64;
            RequestSpec {
                class: Class::Deferred,
                stream: k % 2 == 1,
                lane: (k / 2) as usize,
            }
        } else {
            RequestSpec {
                class: Class::Admitted,
                stream: n % 4 == 3,
                lane: 0,
            }
        }
    }
}

/// Requests in flight while calibrating: a deferred request holds its
/// client for about a second, so enough that the admitted ones between keep
/// the path busy.
const CALIBRATION_IN_FLIGHT: usize = 256;

fn deadline(spec: &RequestSpec) -> Duration {
    match spec.class {
        Class::Deferred => Duration::from_secs(60),
        _ => Duration::from_secs(10),
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    sluice_testkit::init_bench_tracing();
    let args = parse_args()?;
    eprintln!("soak: retention: {}", args.retention.describe());
    let retention = args.retention;
    let mut stack = ProcessStack::start_for(
        "soak",
        ProcessStackOptions {
            limits: sluice_testkit::load::limits_yaml(),
            bin_dir: None,
            progress: |_| {},
            consumers: 1,
            sim_args: ProcessStackOptions::sim_pace(0, 2)
                .into_iter()
                .chain(retention.sim_args())
                .collect(),
            consumer_config: format!(
                "{}{}",
                ProcessStackOptions::consumer_paced_at(100_000),
                retention.consumer_yaml()
            ),
            dir: args.workdir.clone(),
            rls_args: retention.rls_args(),
            redis_kind: Default::default(),
            redis: Default::default(),
            redis_args: args
                .redis_expire_effort
                .map(|effort| vec!["--active-expire-effort".to_string(), effort.to_string()])
                .unwrap_or_default(),
            // A request let through without a decision is a load the path
            // did not carry: count it as an error (503), in the calibration too.
            refuse_undecided: true,
            decision_deadline_ms: None,
        },
    )
    .await?;
    let client = LoadClient::new(stack.listener, 40);

    // Warm-up: every class once (the deferred buckets get their subscriber).
    let warm_start = Instant::now();
    let warm_mix = soak_mix(0.5);
    for n in 0..8 {
        let spec = warm_mix(n);
        let record = client.send(n, spec, warm_start, deadline(&spec)).await;
        anyhow::ensure!(
            record.outcome.is_success_for(spec.class),
            "warm-up request {spec:?} failed: {:?}",
            record.outcome
        );
    }

    eprintln!("soak: calibrating for {:?}", args.calibrate);
    let max_rate = calibrate(
        &client,
        CALIBRATION_IN_FLIGHT,
        args.calibrate,
        soak_mix(args.deferred_share),
        deadline,
    )
    .await;
    let rate = max_rate * args.load_share;
    eprintln!(
        "soak: max {max_rate:.0} req/s; running {:?} at {rate:.0} req/s",
        args.duration
    );

    let start = Instant::now();
    let sampler = MemorySampler::start(stack.pids(), Duration::from_secs(10), start);
    let redis_sampler = RedisSampler::start(stack.redis.url(), start);
    let envoy_sampler = stack.envoy_admin().map(|admin| sample_envoy(admin, start));
    let plan = OpenLoop {
        rate_per_second: rate,
        duration: args.duration,
        max_requests: (rate * args.duration.as_secs_f64()).ceil() as u64 + 1,
        max_in_flight: 4096,
        deadline,
    };
    let progress = tokio::spawn(async move {
        loop {
            tokio::time::sleep(Duration::from_secs(60)).await;
            eprintln!("soak: {:.0} min", start.elapsed().as_secs_f64() / 60.0);
        }
    });
    let records = run_open_loop(&client, plan, start, soak_mix(args.deferred_share)).await;
    progress.abort();
    let series = sampler.stop();
    let redis_samples = redis_sampler.stop().await;
    let republished = stack
        .rls_metrics(&["sluice_rls_deferral_republished_total"])
        .map(|v| v[0]);
    let rls_metrics = sluice_testkit::http_request(stack.rls_admin, "GET", "/metrics", &[], b"")
        .map(|answer| answer.body)
        .unwrap_or_default();
    let envoy_samples = envoy_sampler.map(Sampler::stop).unwrap_or_default();
    let envoy_stats = stack
        .envoy_admin()
        .and_then(|admin| sluice_testkit::http_request(admin, "GET", "/stats", &[], b"").ok())
        .map(|answer| answer.body)
        .unwrap_or_default();
    keep_metrics(&stack, &args.workdir, &rls_metrics, &envoy_stats)?;

    print_report(&args, max_rate, rate, &records, republished);
    print_errors_by_minute(&records);
    print_decisions(&decision_codes(&rls_metrics));
    print_upstream_trouble(&envoy_stats);
    let warmup = args.warmup.as_secs_f64();
    print_memory(&series, &redis_samples, warmup);
    print_envoy_heap(&envoy_samples, warmup);
    std::fs::write(args.workdir.join("rss.json"), series_json(&series))?;
    std::fs::write(
        args.workdir.join("envoy-heap.json"),
        serde_json::to_string(&envoy_samples)?,
    )?;
    let redis_rows: Vec<serde_json::Value> = redis_samples
        .iter()
        .map(|r| serde_json::json!([r.at, r.keys, r.used_memory, r.stale_percent, r.without_ttl]))
        .collect();
    // [seconds, keys, used_memory bytes, expired_stale_perc, keys without a TTL]
    std::fs::write(
        args.workdir.join("redis.json"),
        serde_json::Value::Array(redis_rows).to_string(),
    )?;
    if let Some(svg) = &args.svg {
        let title = format!(
            "Resident memory per process, soak at {rate:.0} req/s ({:.0} % deferred), {:.0} min",
            args.deferred_share * 100.0,
            args.duration.as_secs_f64() / 60.0
        );
        sluice_testkit::chart::render(&rss_chart(&series, &title, warmup), svg)?;
        eprintln!("soak: chart written to {}", svg.display());
    }
    stack.kill_envoy();
    Ok(())
}

fn print_report(
    args: &Args,
    max_rate: f64,
    rate: f64,
    records: &[Record],
    republished: Option<f64>,
) {
    let total = args.duration.as_secs_f64();
    let window = Duration::from_secs_f64((total / 3.0).min(300.0));
    println!(
        "soak: {:.1} min at {rate:.0} req/s = {:.0} % of the calibrated max {max_rate:.0} req/s; {:.0} % deferred",
        total / 60.0,
        args.load_share * 100.0,
        args.deferred_share * 100.0
    );
    println!("retention: {}", args.retention.describe());
    let mut errors: BTreeMap<String, u64> = BTreeMap::new();
    let mut by_class: BTreeMap<&str, (u64, u64)> = BTreeMap::new();
    for record in records {
        let entry = by_class.entry(record.spec.class.name()).or_default();
        entry.0 += 1;
        if record.outcome.is_success_for(record.spec.class) {
            entry.1 += 1;
        } else {
            *errors.entry(record.outcome.label()).or_default() += 1;
        }
    }
    println!("\n| class | sent | answered fully |\n|---|---:|---:|");
    for (class, (sent, ok)) in &by_class {
        println!("| {class} | {sent} | {ok} |");
    }
    println!(
        "\nerrors: {}{}",
        errors.values().sum::<u64>(),
        errors
            .iter()
            .map(|(k, v)| format!("; {k}: {v}"))
            .collect::<String>()
    );
    if let Some(republished) = republished {
        println!("deferred requests published again after a lapsed lease: {republished}");
    }

    let window_s = window.as_secs_f64();
    println!(
        "\n| latency (whole answer) | first {:.0} s | last {:.0} s |\n|---|---:|---:|",
        window_s, window_s
    );
    for (class, stream) in [
        (Class::Admitted, false),
        (Class::Admitted, true),
        (Class::Deferred, false),
        (Class::Deferred, true),
    ] {
        let pick = |from: f64, to: f64| -> Vec<Duration> {
            records
                .iter()
                .filter(|r| r.spec.class == class && r.spec.stream == stream)
                .filter(|r| r.outcome.is_success_for(class))
                .filter(|r| (from..to).contains(&r.sent_at.as_secs_f64()))
                .map(|r| r.latency)
                .collect()
        };
        let mut first = pick(0.0, window_s);
        let mut last = pick(total - window_s, total + 1.0);
        let kind = if stream { "SSE" } else { "JSON" };
        for (name, q) in [("p50", 0.5), ("p99", 0.99)] {
            println!(
                "| {} {kind} {name} | {:.1} ms | {:.1} ms |",
                class.name(),
                quantile(&mut first, q).as_secs_f64() * 1000.0,
                quantile(&mut last, q).as_secs_f64() * 1000.0
            );
        }
    }
}

/// The minutes that had errors, with their kinds: a burst points at one
/// moment (a stalled part), a steady trickle at a constant cause.
fn print_errors_by_minute(records: &[Record]) {
    let mut by_minute: BTreeMap<u64, BTreeMap<String, u64>> = BTreeMap::new();
    for record in records {
        if !record.outcome.is_success_for(record.spec.class) {
            let minute = record.sent_at.as_secs() / 60;
            *by_minute
                .entry(minute)
                .or_default()
                .entry(format!(
                    "{} {}",
                    record.spec.class.name(),
                    record.outcome.label()
                ))
                .or_default() += 1;
        }
    }
    if by_minute.is_empty() {
        return;
    }
    println!("\n| minute (sent) | errors |\n|---:|---|");
    for (minute, kinds) in &by_minute {
        let kinds: Vec<String> = kinds.iter().map(|(k, n)| format!("{k}: {n}")).collect();
        println!("| {minute} | {} |", kinds.join("; "));
    }
}

/// Envoy's counters of upstream trouble per cluster (overflow of its
/// circuit breakers, failed connects, resets, timeouts), where not zero:
/// the cause behind a plain 503 or a broken stream.
fn print_upstream_trouble(envoy_stats: &str) {
    const TROUBLE: [&str; 13] = [
        "upstream_rq_pending_overflow",
        "upstream_rq_active_overflow",
        "upstream_cx_overflow",
        "upstream_rq_retry_overflow",
        "upstream_cx_connect_fail",
        "upstream_cx_connect_timeout",
        "upstream_rq_pending_failure_eject",
        "upstream_cx_destroy_remote_with_active_rq",
        "upstream_cx_destroy_local_with_active_rq",
        "upstream_rq_timeout",
        "upstream_rq_rx_reset",
        "upstream_rq_tx_reset",
        "upstream_rq_5xx",
    ];
    let found: Vec<String> = envoy_stats
        .lines()
        .filter_map(|line| {
            let (name, value) = line.split_once(": ")?;
            let rest = name.strip_prefix("cluster.")?;
            let (cluster, stat) = rest.split_once('.')?;
            let value: u64 = value.trim().parse().ok()?;
            (TROUBLE.contains(&stat) && value > 0).then(|| format!("{cluster}.{stat} {value}"))
        })
        .collect();
    let filter: Vec<String> = envoy_stats
        .lines()
        .filter_map(|line| {
            let (name, value) = line.split_once(": ")?;
            let counter = name
                .strip_prefix("wasmcustom.sluice_")?
                .strip_suffix("_total")?;
            [
                "admitted",
                "deferred",
                "rejected",
                "rls_failure_allowed",
                "rls_failure_denied",
            ]
            .contains(&counter)
            .then(|| format!("{counter} {}", value.trim()))
        })
        .collect();
    println!("filter decisions: {}", filter.join(", "));
    println!(
        "envoy upstream trouble: {}",
        if found.is_empty() {
            "none".to_string()
        } else {
            found.join(", ")
        }
    );
}

/// Every part's metrics at the end, next to its log in the work dir.
fn keep_metrics(
    stack: &ProcessStack,
    dir: &std::path::Path,
    rls_metrics: &str,
    envoy_stats: &str,
) -> anyhow::Result<()> {
    std::fs::write(dir.join("sluice-rls.metrics"), rls_metrics)?;
    std::fs::write(dir.join("envoy.stats"), envoy_stats)?;
    for consumer in &stack.consumers {
        let admin = ([127, 0, 0, 1], consumer.port()).into();
        if let Ok(answer) = sluice_testkit::http_request(admin, "GET", "/metrics", &[], b"") {
            std::fs::write(dir.join(format!("{}.metrics", consumer.name)), answer.body)?;
        }
    }
    Ok(())
}

/// Memory per process after the warm-up: RSS and RssAnon (and RssFile),
/// then the flat check on each process's measure; Redis's keys.
fn print_memory(series: &MemorySeries, redis: &[RedisSample], warmup: f64) {
    let mib = |kib: u64| kib as f64 / 1024.0;
    println!(
        "\n| process | measure | at {warmup:.0} s (warm) | end | min | max | change |\n|---|---|---:|---:|---:|---:|---:|"
    );
    for (name, points) in series {
        for measure in [Measure::Rss, Measure::Anon] {
            let Some(stats) = MemoryStats::of(points, measure, warmup) else {
                continue;
            };
            println!(
                "| {name} | {} | {:.1} MiB | {:.1} MiB | {:.1} MiB | {:.1} MiB | {:+.1} % |",
                measure.name(),
                mib(stats.warm),
                mib(stats.end),
                mib(stats.min),
                mib(stats.max),
                stats.change_pct()
            );
        }
        if let (Some((_, first)), Some((_, last))) =
            (points.iter().find(|(t, _)| *t >= warmup), points.last())
        {
            println!(
                "| {name} | RssFile | {:.1} MiB | {:.1} MiB | | | |",
                mib(first.file),
                mib(last.file)
            );
        }
    }

    println!(
        "\nflat check (within ±10 % of the warm value after {warmup:.0} s):\n\n| process | measure (why) | change | widest swing | flat |\n|---|---|---:|---:|---|"
    );
    for (name, points) in series {
        let (measure, why) = flat_measure(name);
        let Some(stats) = MemoryStats::of(points, measure, warmup) else {
            continue;
        };
        let swing = stats.widest_swing_pct();
        println!(
            "| {name} | {} ({why}) | {:+.1} % | {swing:+.1} % | {} |",
            measure.name(),
            stats.change_pct(),
            if swing.abs() <= 10.0 { "yes" } else { "NO" }
        );
    }

    if let (Some(warm), Some(end)) = (redis.iter().find(|s| s.at >= warmup), redis.last()) {
        let after: Vec<&RedisSample> = redis.iter().filter(|s| s.at >= warmup).collect();
        let range = |value: fn(&RedisSample) -> f64| {
            after
                .iter()
                .map(|s| value(s))
                .fold((f64::MAX, f64::MIN), |(lo, hi), v| (lo.min(v), hi.max(v)))
        };
        let (keys_lo, keys_hi) = range(|s| s.keys as f64);
        let (stale_lo, stale_hi) = range(|s| s.stale_percent);
        let (lasting_lo, lasting_hi) = range(|s| s.without_ttl as f64);
        println!(
            "\nredis keys: {} at {:.0} s, {} at the end ({keys_lo:.0}..{keys_hi:.0} after warm-up; \
             {lasting_lo:.0}..{lasting_hi:.0} of them without a TTL); \
             used_memory {:.1} MiB -> {:.1} MiB; expired keys not yet reclaimed \
             (Redis's estimate, expired_stale_perc): {stale_lo:.1}..{stale_hi:.1} %",
            warm.keys,
            warm.at,
            end.keys,
            mib(warm.used_memory / 1024),
            mib(end.used_memory / 1024)
        );
    }
}

/// The series as JSON: per process, [seconds, rss, anon, file] in KiB.
fn series_json(series: &MemorySeries) -> String {
    let value: serde_json::Map<String, serde_json::Value> = series
        .iter()
        .map(|(name, points)| {
            let points: Vec<serde_json::Value> = points
                .iter()
                .map(|(t, r)| serde_json::json!([t, r.rss, r.anon, r.file]))
                .collect();
            (name.clone(), serde_json::Value::Array(points))
        })
        .collect();
    serde_json::Value::Object(value).to_string()
}

/// Redis's key count and `used_memory` (bytes) at one time.
#[derive(Clone, Copy, Debug, Default)]
struct RedisSample {
    at: f64,
    keys: u64,
    used_memory: u64,
    /// Share of the keys with a TTL that have expired and still take
    /// memory, as Redis estimates it (`INFO stats` `expired_stale_perc`).
    stale_percent: f64,
    /// Keys without a TTL (`INFO keyspace`: keys − expires): answer streams
    /// still being written, anything that would never leave.
    without_ttl: u64,
}

/// Samples Redis every 10 s until stopped.
struct RedisSampler {
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<Vec<RedisSample>>,
}

impl RedisSampler {
    fn start(url: String, start: Instant) -> RedisSampler {
        let (stop, mut stopped) = tokio::sync::oneshot::channel();
        let task = tokio::spawn(async move {
            let mut samples = Vec::new();
            let Ok(client) = redis::Client::open(url) else {
                return samples;
            };
            let Ok(mut conn) = client.get_multiplexed_async_connection().await else {
                return samples;
            };
            let mut tick = tokio::time::interval(Duration::from_secs(10));
            loop {
                tokio::select! {
                    _ = &mut stopped => return samples,
                    _ = tick.tick() => {}
                }
                let keys: u64 = redis::cmd("DBSIZE")
                    .query_async(&mut conn)
                    .await
                    .unwrap_or(0);
                let info: String = redis::cmd("INFO")
                    .arg("memory")
                    .query_async(&mut conn)
                    .await
                    .unwrap_or_default();
                let stats: String = redis::cmd("INFO")
                    .arg("stats")
                    .query_async(&mut conn)
                    .await
                    .unwrap_or_default();
                let keyspace: String = redis::cmd("INFO")
                    .arg("keyspace")
                    .query_async(&mut conn)
                    .await
                    .unwrap_or_default();
                samples.push(RedisSample {
                    at: start.elapsed().as_secs_f64(),
                    keys,
                    used_memory: redis_info_field(&info, "used_memory").unwrap_or(0),
                    stale_percent: redis_info_field(&stats, "expired_stale_perc").unwrap_or(0.0),
                    without_ttl: keys_without_ttl(&keyspace),
                });
            }
        });
        RedisSampler { stop, task }
    }

    async fn stop(self) -> Vec<RedisSample> {
        let _ = self.stop.send(());
        self.task.await.unwrap_or_default()
    }
}

/// Envoy's heap and connections at one time: tells a live-memory climb
/// (`allocated` grows) from the allocator keeping freed pages after a
/// burst of connections (`heap_size` grows, `allocated` comes back).
#[derive(Clone, Copy, Debug, Default, serde::Serialize)]
struct EnvoySample {
    at: f64,
    /// Bytes in use (admin `/memory`).
    allocated: u64,
    /// Bytes tcmalloc holds from the system, in use or free.
    heap_size: u64,
    /// Free bytes tcmalloc has given back to the system.
    pageheap_unmapped: u64,
    /// Connections open, downstream and upstream (`server.total_connections`).
    connections: u64,
    /// Deferred requests waiting on the deferral cluster
    /// (`cluster.sluice_deferral.upstream_rq_active`).
    deferral_active: u64,
}

/// Samples Envoy's admin `/memory` and two gauges every 10 s until stopped.
fn sample_envoy(admin: std::net::SocketAddr, start: Instant) -> Sampler<Vec<EnvoySample>> {
    Sampler::start(
        Duration::from_secs(10),
        start,
        move |samples: &mut Vec<EnvoySample>, at| {
            samples.push(envoy_sample(admin, at));
        },
    )
}

fn envoy_sample(admin: std::net::SocketAddr, at: f64) -> EnvoySample {
    let get = |path: &str| {
        sluice_testkit::http_request(admin, "GET", path, &[], b"")
            .map(|answer| answer.body)
            .unwrap_or_default()
    };
    // `/memory` answers its numbers as JSON strings.
    let memory: serde_json::Value = serde_json::from_str(&get("/memory")).unwrap_or_default();
    let bytes = |field: &str| {
        memory[field]
            .as_str()
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    let gauges = get("/stats");
    let gauge = |name: &str| {
        gauges
            .lines()
            .find_map(|line| line.strip_prefix(name)?.strip_prefix(": "))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0)
    };
    EnvoySample {
        at,
        allocated: bytes("allocated"),
        heap_size: bytes("heap_size"),
        pageheap_unmapped: bytes("pageheap_unmapped"),
        connections: gauge("server.total_connections"),
        deferral_active: gauge("cluster.sluice_deferral.upstream_rq_active"),
    }
}

/// Envoy's heap after the warm-up (at warm-up, end, highest), and the most
/// connections and waiting deferred requests it held, with when.
fn print_envoy_heap(samples: &[EnvoySample], warmup: f64) {
    let after: Vec<&EnvoySample> = samples.iter().filter(|s| s.at >= warmup).collect();
    let (Some(warm), Some(end)) = (after.first(), after.last()) else {
        return;
    };
    let mib = |bytes: u64| bytes as f64 / (1024.0 * 1024.0);
    let peak = |value: fn(&EnvoySample) -> u64| {
        samples
            .iter()
            .max_by_key(|s| value(s))
            .map(|s| (value(s), s.at))
            .unwrap_or((0, 0.0))
    };
    let highest =
        |value: fn(&EnvoySample) -> u64| after.iter().map(|s| value(s)).max().unwrap_or(0);
    let (connections, connections_at) = peak(|s| s.connections);
    let (waiting, waiting_at) = peak(|s| s.deferral_active);
    println!(
        "envoy heap (admin /memory) from {warmup:.0} s: allocated {:.1} -> {:.1} MiB (max {:.1}); \
         heap_size {:.1} -> {:.1} MiB (max {:.1}); given back {:.1} -> {:.1} MiB; \
         most connections {connections} at {connections_at:.0} s; \
         most deferred requests waiting {waiting} at {waiting_at:.0} s",
        mib(warm.allocated),
        mib(end.allocated),
        mib(highest(|s| s.allocated)),
        mib(warm.heap_size),
        mib(end.heap_size),
        mib(highest(|s| s.heap_size)),
        mib(warm.pageheap_unmapped),
        mib(end.pageheap_unmapped),
    );
}

/// `keys − expires` of db0 in `INFO keyspace` (`db0:keys=5,expires=3,…`).
fn keys_without_ttl(keyspace: &str) -> u64 {
    let Some(db0) = keyspace.lines().find_map(|l| l.strip_prefix("db0:")) else {
        return 0;
    };
    let field = |name: &str| -> u64 {
        db0.split(',')
            .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('='))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0)
    };
    field("keys").saturating_sub(field("expires"))
}

/// sluice-rls's decisions by code (`sluice_rls_decisions_total{…,code="…"}`).
fn decision_codes(metrics: &str) -> BTreeMap<String, f64> {
    let mut codes = BTreeMap::new();
    for line in metrics.lines() {
        let Some(rest) = line.strip_prefix("sluice_rls_decisions_total{") else {
            continue;
        };
        let code = rest
            .split("code=\"")
            .nth(1)
            .and_then(|c| c.split('"').next());
        let value = rest.rsplit(' ').next().and_then(|v| v.parse::<f64>().ok());
        if let (Some(code), Some(value)) = (code, value) {
            *codes.entry(code.to_string()).or_default() += value;
        }
    }
    codes
}

/// The decisions sluice-rls made; `error` is a decision the store did not
/// answer in time (`--redis-timeout-ms`): the filter's failure mode decides
/// the request (the soak's refuses it: a client error, 503).
fn print_decisions(codes: &BTreeMap<String, f64>) {
    let total: f64 = codes.values().sum();
    if total == 0.0 {
        return;
    }
    let listed: Vec<String> = codes.iter().map(|(c, n)| format!("{c} {n:.0}")).collect();
    let errors = codes.get("error").copied().unwrap_or(0.0);
    println!(
        "sluice-rls decisions: {} ({:.2} % error: the store's answer came too late)",
        listed.join(", "),
        100.0 * errors / total
    );
}
