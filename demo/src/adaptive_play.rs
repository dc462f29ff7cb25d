//! Plays the adaptive scenario (`--scenario adaptive`) on a started stack:
//! the teams' closed-loop users keep gpt-4o's queue full through Envoy, the
//! simulated GPU's capacity halves and recovers on schedule, and a sampler
//! records the GPU and the controller every half second.

use crate::client::{self, Chat, Journal};
use crate::stack::Stack;
use crate::Ending;
use anyhow::{bail, Context};
use sluice_consumer::ControllerView;
use sluice_demo::adaptive::{self, GpuSample, Timing, MODEL, TEAMS};
use sluice_demo::stats;
use sluice_llm_sim::gpu::{CapacityChange, CapacityReport, GpuStatus};
use sluice_testkit::chart;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Prompt length and answer size of every request.
const PROMPT_WORDS: usize = 200;
const MAX_TOKENS: u32 = 64;
/// How often the GPU and the controller are sampled.
const SAMPLE_EVERY: Duration = Duration::from_millis(500);
/// Longest wait for open requests after sending stops.
const DRAIN: Duration = Duration::from_secs(40);

/// The simulated GPU's flags: the KV cache (4,096 tokens: about 15 of the
/// scenario's requests) binds before the batch size, so halving the
/// capacity halves how many requests the GPU can run at once.
pub fn sim_args() -> Vec<String> {
    [
        "--gpu-tokens-per-s",
        "1600",
        "--kv-cache-tokens",
        "4096",
        "--max-batch",
        "32",
    ]
    .map(String::from)
    .to_vec()
}

/// Plays the scenario, stops the stack, writes `summary.txt`,
/// `gpu-samples.csv`, `requests.csv` and `demo.png` into `out`.
pub async fn run(
    stack: Stack,
    out: &Path,
    quick: bool,
    interrupted: impl std::future::Future<Output = ()>,
) -> anyhow::Result<Ending> {
    let timing = Timing::new(quick);
    println!(
        "==> scenario (adaptive{}): {} users per team send {MODEL} requests through Envoy {}, \
         one after another; over their quota of 1 a minute they are deferred",
        if quick { ", quick" } else { "" },
        TEAMS[0].users,
        stack.envoy_addr
    );
    println!(
        "    GPU capacity halves at {:.0} s and recovers at {:.0} s; sending stops at {:.0} s",
        timing.cut_at_s, timing.restore_at_s, timing.send_until_s
    );
    let journal = Journal::new();
    let ending = tokio::select! {
        samples = play(&stack, &journal, timing) => Ok(samples),
        _ = interrupted => Err(Ending::Interrupted),
    };
    let end_s = journal.now_s();
    let stopping = tokio::task::spawn_blocking(move || stack.stop());
    let _ = stopping.await;
    println!("==> stack stopped (nothing left running)");
    let samples = match ending {
        Ok(samples) => samples,
        Err(ending) => {
            println!("==> interrupted at {end_s:.1} s");
            return Ok(ending);
        }
    };
    let records = journal.snapshot();
    let text = format!(
        "==> summary after {end_s:.1} s\n{}",
        adaptive::summary(&samples, &records, &timing)
    );
    print!("{text}");
    let mut files = Vec::new();
    for (name, content) in [
        ("summary.txt", text),
        ("gpu-samples.csv", adaptive::samples_csv(&samples)),
        ("requests.csv", stats::records_csv(&records)),
    ] {
        let path = out.join(name);
        std::fs::write(&path, content)
            .with_context(|| format!("cannot write {}", path.display()))?;
        files.push(path);
    }
    let png = out.join("demo.png");
    match chart::render(&adaptive::chart(&samples, &records, end_s), &png) {
        Ok(()) => files.push(png),
        Err(error) => eprintln!("sluice-demo: no chart: {error}"),
    }
    println!("==> files");
    for path in files {
        println!("    {}", path.display());
    }
    Ok(Ending::Finished)
}

/// Sends, changes capacity and samples until the scenario ends; returns the
/// samples (the journal holds the requests).
pub async fn play(stack: &Stack, journal: &Journal, timing: Timing) -> Vec<GpuSample> {
    let seq = Arc::new(AtomicU64::new(0));
    let mut users = tokio::task::JoinSet::new();
    for team in TEAMS {
        for _ in 0..team.users {
            users.spawn(user(
                journal.clone(),
                stack.envoy_addr,
                team.tenant,
                timing.send_until_s,
                seq.clone(),
            ));
        }
    }
    let mut samples = Vec::new();
    let mut changes = vec![(timing.cut_at_s, 0.5), (timing.restore_at_s, 1.0)].into_iter();
    let mut next_change = changes.next();
    let mut next_line = 0.0;
    let mut tick = tokio::time::interval(SAMPLE_EVERY);
    loop {
        tick.tick().await;
        let now = journal.now_s();
        if let Some((at, factor)) = next_change.filter(|(at, _)| *at <= now) {
            match change_capacity(stack.sim_addr, factor).await {
                Ok(()) => println!("    {at:>5.1} s  GPU capacity × {factor}"),
                Err(error) => eprintln!("sluice-demo: capacity change failed: {error:#}"),
            }
            next_change = changes.next();
        }
        let sample = sample(stack, now).await;
        if now >= next_line {
            println!("{}", progress_line(&sample, journal));
            next_line += 5.0;
        }
        samples.push(sample);
        let drained = journal.open() == 0 || now >= timing.send_until_s + DRAIN.as_secs_f64();
        if now >= timing.send_until_s && drained {
            break;
        }
    }
    users.abort_all();
    samples
}

/// One closed-loop user: its next request as soon as the last one ended.
async fn user(
    journal: Journal,
    envoy: SocketAddr,
    tenant: &'static str,
    until_s: f64,
    seq: Arc<AtomicU64>,
) {
    while journal.now_s() < until_s {
        let chat = Chat {
            tenant,
            model: MODEL,
            words: PROMPT_WORDS,
            max_tokens: MAX_TOKENS,
            seq: seq.fetch_add(1, Ordering::Relaxed),
        };
        client::send(journal.clone(), envoy, chat).await;
    }
}

/// `POST /admin/capacity` of the simulated GPU: `factor` × its start-up capacity.
async fn change_capacity(sim: SocketAddr, factor: f64) -> anyhow::Result<()> {
    let change = CapacityChange {
        model: Some(MODEL.to_string()),
        factor: Some(factor),
        ..CapacityChange::default()
    };
    let body = serde_json::to_vec(&change)?;
    let (status, text) =
        client::call_with_body(sim, "POST", sluice_llm_sim::ADMIN_CAPACITY_PATH, body).await?;
    if status != 200 {
        bail!("the simulated GPU refused the change: {status} {text}");
    }
    Ok(())
}

/// The GPU's capacity and load, and the controller's limit; what cannot be
/// read stays at its default (a missing point on the chart).
async fn sample(stack: &Stack, t_s: f64) -> GpuSample {
    let mut sample = GpuSample {
        t_s,
        ..Default::default()
    };
    match gpu_status(stack.sim_addr).await {
        Ok(gpu) => {
            sample.capacity_tps = gpu.capacity.tokens_per_s;
            sample.running = gpu.running as f64;
            sample.waiting = gpu.waiting as f64;
        }
        Err(error) => tracing::warn!(error = %format!("{error:#}"), "GPU not sampled"),
    }
    sample.limit = controller_limit(stack.consumer_admin).await;
    sample
}

async fn gpu_status(sim: SocketAddr) -> anyhow::Result<GpuStatus> {
    let (status, text) = client::call(sim, "GET", sluice_llm_sim::ADMIN_CAPACITY_PATH).await?;
    if status != 200 {
        bail!("{} answered {status}", sluice_llm_sim::ADMIN_CAPACITY_PATH);
    }
    let report: CapacityReport =
        serde_json::from_str(&text).context("reading the simulated GPU's status")?;
    report
        .gpus
        .into_iter()
        .find(|gpu| gpu.model == MODEL)
        .with_context(|| format!("no simulated GPU serves {MODEL}"))
}

/// The limit in force (`GET /controller/<model>`): an operator's, else the
/// controller's.
async fn controller_limit(consumer_admin: SocketAddr) -> Option<f64> {
    let path = format!("/controller/{MODEL}");
    let (status, text) = client::call(consumer_admin, "GET", &path).await.ok()?;
    if status != 200 {
        return None;
    }
    let view: ControllerView = serde_json::from_str(&text).ok()?;
    view.manual.or(view.limit)
}

fn progress_line(sample: &GpuSample, journal: &Journal) -> String {
    let records = journal.snapshot();
    let answered: Vec<String> = TEAMS
        .iter()
        .map(|team| {
            let n = records
                .iter()
                .filter(|r| r.tenant == team.tenant && r.completed)
                .count();
            format!("{} {n:>4}", team.tenant)
        })
        .collect();
    let limit = sample
        .limit
        .map(|l| format!("{l:>3.0}"))
        .unwrap_or_else(|| "  -".into());
    format!(
        "    {:>5.1} s  capacity {:>5.0} tokens/s  limit {limit}  running {:>3.0}  waiting {:>3.0}  answered: {}",
        sample.t_s,
        sample.capacity_tps,
        sample.running,
        sample.waiting,
        answered.join("  ")
    )
}
