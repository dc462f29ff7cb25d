//! `cargo run --release -p sluice-bench --bin queue_hop -- --help`
//!
//! What saturation-aware admission's queue hop costs an in-quota request
//! when the server is idle (issue 28: "the queue hop is skipped when the
//! server has room; measure the cost of the hop when idle"). One stack of
//! real parts (Envoy with the built filter, sluice-rls with
//! `--route-in-quota-when-saturated` and its deferral endpoint, Redis, the
//! RocketMQ broker, one unpaced consumer, llm-sim answering at once), one
//! in-quota tenant, two models on the same idle llm-sim:
//!
//! - `direct`: its controller state says "not saturated": sluice-rls answers
//!   OK, the filter forwards the request straight to llm-sim;
//! - `queued`: its state says "saturated" (rewritten every 250 ms, as the
//!   controller's stepper does): sluice-rls answers OK with `route: queue`,
//!   the filter sends the request through the deferral path (endpoint →
//!   broker → consumer → llm-sim → Redis stream → endpoint).
//!
//! Requests one at a time (the server stays idle), alternating between the
//! two paths (which goes first alternates too), after a warm-up; each timed
//! from the client's send to the whole JSON answer. Prints p50 / p90 / p99 /
//! max per path and the hop's cost (queued − direct) and ratio side by
//! side; checks that every queued request went through the consumer and no
//! direct one did. Asserts nothing about time.
#![recursion_limit = "256"] // rocketmq-client futures are deeply nested

use anyhow::{ensure, Context};
use clap::Parser;
use sluice_contract::saturation::Route;
use sluice_testkit::figures::percentile;
use sluice_testkit::stack::limits::{self, OverLimit};
use sluice_testkit::stack::{chat_of, unpaced, ConsumerSpec, Stack};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const DIRECT: &str = "gpt-4o";
const QUEUED: &str = "gpt-4o-mini";
const TENANT: &str = "light";

#[derive(Parser)]
#[command(about = "The queue hop's cost for an in-quota request on an idle server")]
struct Args {
    /// Timed requests per path.
    #[arg(long, env = "HOP_REQUESTS", default_value_t = 300)]
    requests: usize,
    /// Untimed requests per path first.
    #[arg(long, env = "HOP_WARMUP", default_value_t = 20)]
    warmup: usize,
    /// Words of each prompt.
    #[arg(long, env = "HOP_PROMPT_WORDS", default_value_t = 40)]
    prompt_words: usize,
    /// `max_tokens` of each request (llm-sim answers them at once).
    #[arg(long, env = "HOP_ANSWER_TOKENS", default_value_t = 16)]
    answer_tokens: u64,
}

/// One in-quota chat on `model`, timed.
async fn timed_chat(envoy: SocketAddr, model: &'static str, args: &Args) -> anyhow::Result<f64> {
    let size = (args.prompt_words, args.answer_tokens);
    let (response, elapsed) = tokio::task::spawn_blocking(move || {
        let sent = Instant::now();
        let response = chat_of(envoy, TENANT, model, size);
        (response, sent.elapsed())
    })
    .await?;
    let response = response.with_context(|| format!("chat on {model}"))?;
    ensure!(
        response.status == 200,
        "{model}: HTTP {} {}",
        response.status,
        response.body
    );
    Ok(elapsed.as_secs_f64() * 1000.0)
}

/// Keeps the two models' controller states fresh, as the stepper would.
fn keep_states(stack: Arc<Stack>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            stack.controller_says(DIRECT, false).await;
            stack.controller_says(QUEUED, true).await;
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    })
}

/// `(direct, queued)` latencies in ms, `rounds` of one request each,
/// alternating which goes first.
async fn rounds(envoy: SocketAddr, rounds: usize, args: &Args) -> anyhow::Result<[Vec<f64>; 2]> {
    let mut times = [Vec::with_capacity(rounds), Vec::with_capacity(rounds)];
    for round in 0..rounds {
        let order = if round % 2 == 0 { [0, 1] } else { [1, 0] };
        for path in order {
            let model = [DIRECT, QUEUED][path];
            times[path].push(timed_chat(envoy, model, args).await?);
        }
    }
    Ok(times)
}

fn print_figures(direct: &mut [f64], queued: &mut [f64]) {
    let quantiles = [("p50", 0.5), ("p90", 0.9), ("p99", 0.99), ("max", 1.0)];
    println!(
        "\n| in-quota request, idle llm-sim | {} |",
        quantiles.map(|(name, _)| format!("{name} ms")).join(" | ")
    );
    println!("|---|---:|---:|---:|---:|");
    let row =
        |values: &mut [f64]| quantiles.map(|(_, q)| percentile(values, q).unwrap_or(f64::NAN));
    let (d, q) = (row(direct), row(queued));
    let cells = |values: [f64; 4]| values.map(|v| format!("{v:.2}")).join(" | ");
    println!("| direct (server has room) | {} |", cells(d));
    println!("| through the queue (`route: queue`) | {} |", cells(q));
    // Quantile against quantile; the maxima are single outliers, not
    // compared.
    let compared = |f: &dyn Fn(f64, f64) -> String| {
        let cells: [String; 3] = std::array::from_fn(|i| f(q[i], d[i]));
        format!("{} | –", cells.join(" | "))
    };
    println!(
        "| the hop's cost (queued − direct) | {} |",
        compared(&|q, d| format!("{:.2}", q - d))
    );
    println!(
        "| ratio queued / direct | {} |",
        compared(&|q, d| format!("{:.1}×", q / d))
    );
}

#[tokio::main(flavor = "multi_thread", worker_threads = 4)]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    sluice_testkit::init_bench_tracing();
    let limits = limits::file(&[limits::tenant(
        Some(TENANT),
        1_000_000_000,
        1_000_000_000,
        OverLimit::Defer("normal"),
    )]);
    let mut sim = sluice_llm_sim::SimConfig::fast();
    sim.models = vec![DIRECT.to_string(), QUEUED.to_string()];
    let consumer = ConsumerSpec {
        pacing: unpaced(),
        ..ConsumerSpec::new("hop-consumer")
    };
    let stack = Arc::new(
        Stack::builder(limits)
            .sim(sim)
            .consumer(consumer)
            .route_in_quota_when_saturated()
            .start()
            .await,
    );
    let states = keep_states(stack.clone());
    stack.rls_routes(DIRECT, Route::Direct).await;
    stack.rls_routes(QUEUED, Route::Queue).await;
    let envoy = stack.envoy.listener;

    rounds(envoy, args.warmup, &args).await?;
    let queue_wait = || {
        let consumer = &stack.consumer;
        [
            consumer.counter("sluice_consumer_queue_wait_seconds_sum"),
            consumer.counter("sluice_consumer_queue_wait_seconds_count"),
        ]
    };
    let wait_before = queue_wait();
    let started = Instant::now();
    let [mut direct, mut queued] = rounds(envoy, args.requests, &args).await?;
    let seconds = started.elapsed().as_secs_f64();
    states.abort();

    let sent = (args.warmup + args.requests) as f64;
    let through_queue = stack.rls.limiter.metrics().in_quota_queued.get() as f64;
    // The consumer counts an outcome as it acks, after the answer is out.
    let completed = || {
        stack
            .consumer
            .counter("sluice_consumer_outcomes_total{outcome=\"completed\"}")
    };
    let asked = Instant::now();
    while completed() < sent && asked.elapsed() < Duration::from_secs(10) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let completed = completed();
    println!(
        "{} requests per path ({} warm-up), one at a time, alternating, in {seconds:.1} s; \
         prompt {} words, answer {} tokens",
        args.requests, args.warmup, args.prompt_words, args.answer_tokens
    );
    println!(
        "routed through the queue: {through_queue} (sent {sent} queued); consumer completed: {completed}"
    );
    ensure!(
        through_queue == sent && completed == sent,
        "every queued request, and only those, goes through the consumer"
    );
    let wait_after = queue_wait();
    let mean_wait = (wait_after[0] - wait_before[0]) / (wait_after[1] - wait_before[1]);
    let mean = |values: &[f64]| values.iter().sum::<f64>() / values.len() as f64;
    println!(
        "mean: direct {:.2} ms, queued {:.2} ms, of which {:.2} ms from the endpoint's enqueue \
         to the consumer's model call (sluice_consumer_queue_wait_seconds, whole ms)",
        mean(&direct),
        mean(&queued),
        mean_wait * 1000.0
    );
    print_figures(&mut direct, &mut queued);
    Ok(())
}
