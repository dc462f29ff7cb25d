//! `scripts/soak [--minutes N | --seconds N] [--calibrate-seconds N] [--deferred-share F] [--svg PATH]`
//! (`cargo run --release -p sluice-testkit --example soak -- ...`)
//!
//! The soak: every part a separate process on loopback (Redis, broker,
//! sluice-llm-sim, sluice-rls with its deferral endpoint, one
//! sluice-consumer, Envoy with the filter). It measures the highest rate of
//! admitted requests through Envoy + filter + sluice-rls on Redis
//! (`--calibrate-seconds`, closed loop), then sends 70 % of it for the given
//! time (default 30 minutes), a share of it deferred (through the broker,
//! the consumer and the model server), JSON and SSE. It samples every
//! process's RSS every 10 s and prints errors, p99 at the start vs the end,
//! and memory after warm-up vs the end; the chart of RSS over time goes to
//! `--svg`. Bounded in time and count; stops by itself.

use sluice_testkit::load::{
    calibrate, quantile, rss_chart_svg, run_open_loop, Class, LoadClient, MemorySampler,
    MemorySeries, OpenLoop, ProcessStack, ProcessStackOptions, Record, RequestSpec,
};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

struct Args {
    duration: Duration,
    calibrate: Duration,
    load_share: f64,
    deferred_share: f64,
    svg: Option<PathBuf>,
    workdir: PathBuf,
}

fn parse_args() -> anyhow::Result<Args> {
    let mut args = Args {
        duration: Duration::from_secs(30 * 60),
        calibrate: Duration::from_secs(20),
        load_share: 0.7,
        deferred_share: 0.1,
        svg: None,
        workdir: std::env::temp_dir().join(format!("sluice-soak-{}", std::process::id())),
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || {
            it.next()
                .ok_or_else(|| anyhow::anyhow!("{flag} needs a value"))
        };
        match flag.as_str() {
            "--minutes" => args.duration = Duration::from_secs_f64(value()?.parse::<f64>()? * 60.0),
            "--seconds" => args.duration = Duration::from_secs_f64(value()?.parse()?),
            "--calibrate-seconds" => args.calibrate = Duration::from_secs_f64(value()?.parse()?),
            "--load-share" => args.load_share = value()?.parse()?,
            "--deferred-share" => args.deferred_share = value()?.parse()?,
            "--svg" => args.svg = Some(value()?.into()),
            "--workdir" => args.workdir = value()?.into(),
            other => {
                anyhow::bail!("unknown argument {other:?} (see the header of examples/soak.rs)")
            }
        }
    }
    anyhow::ensure!(
        (0.0..=1.0).contains(&args.deferred_share) && args.load_share > 0.0,
        "--deferred-share must be in 0..=1 and --load-share above 0"
    );
    Ok(args)
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
    let mut stack = ProcessStack::start_for(
        "soak",
        ProcessStackOptions {
            consumers: 1,
            sim_args: ProcessStackOptions::sim_pace(0, 2),
            consumer_config: ProcessStackOptions::consumer_paced_at(100_000),
            dir: args.workdir.clone(),
            rls_args: Vec::new(),
            redis: Default::default(),
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
    let max_rate = calibrate(&client, 32, args.calibrate).await;
    let rate = max_rate * args.load_share;
    eprintln!(
        "soak: max {max_rate:.0} req/s; running {:?} at {rate:.0} req/s",
        args.duration
    );

    let start = Instant::now();
    let sampler = MemorySampler::start(stack.pids(), Duration::from_secs(10), start);
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
    let republished = stack
        .rls_metrics(&["sluice_rls_deferral_republished_total"])
        .map(|v| v[0]);

    print_report(&args, max_rate, rate, &records, &series, republished);
    std::fs::write(
        args.workdir.join("rss.json"),
        serde_json::to_string(&series)?,
    )?;
    if let Some(svg) = &args.svg {
        let title = format!(
            "RSS per process, soak at {rate:.0} req/s ({:.0} % deferred), {:.0} min",
            args.deferred_share * 100.0,
            args.duration.as_secs_f64() / 60.0
        );
        std::fs::write(svg, rss_chart_svg(&series, &title))?;
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
    series: &MemorySeries,
    republished: Option<f64>,
) {
    let total = args.duration.as_secs_f64();
    let window = Duration::from_secs_f64((total / 3.0).min(300.0));
    let warmup = (total / 6.0).min(300.0);
    println!(
        "soak: {:.1} min at {rate:.0} req/s = {:.0} % of the calibrated max {max_rate:.0} req/s; {:.0} % deferred",
        total / 60.0,
        args.load_share * 100.0,
        args.deferred_share * 100.0
    );
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

    println!(
        "\n| process | RSS at {:.0} s (warm) | RSS at end | change | widest swing after warm-up |\n|---|---:|---:|---:|---:|",
        warmup
    );
    for (name, points) in series {
        let Some(warm) = points.iter().find(|(t, _)| *t >= warmup) else {
            continue;
        };
        let Some(end) = points.last() else { continue };
        let warm_kib = warm.1 as f64;
        let swing = points
            .iter()
            .filter(|(t, _)| *t >= warmup)
            .map(|(_, kib)| (*kib as f64 - warm_kib) / warm_kib * 100.0)
            .fold(0.0_f64, |a, b| if b.abs() > a.abs() { b } else { a });
        println!(
            "| {name} | {:.1} MiB | {:.1} MiB | {:+.1} % | {swing:+.1} % |",
            warm_kib / 1024.0,
            end.1 as f64 / 1024.0,
            (end.1 as f64 - warm_kib) / warm_kib * 100.0
        );
    }
}
