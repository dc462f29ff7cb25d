//! `sluice-llm-sim`'s command line: its flags, read from the process's
//! arguments, and the server they configure. Its own binary (`src/main.rs`)
//! and the multi-call `sluice` (sluice-bins, run as `sluice-llm-sim`) run it.

use crate::gpu::{Capacity, GpuConfig, SchedulingPolicy};
use crate::tokenizers::ModelTokenizer;
use crate::{OverCapacity, SimConfig};
use anyhow::Context;
use clap::Parser;
use sluice_runtime::{init_tracing, shutdown_signal, LogFormat};
use std::net::SocketAddr;
use std::time::Duration;

#[derive(Parser)]
#[command(
    name = "sluice-llm-sim",
    version,
    about = "Simulated OpenAI-compatible LLM server: paced deterministic tokens, capacity limits, failure injection"
)]
struct Cli {
    /// Listen address.
    #[arg(long, env = "SLUICE_SIM_ADDR", default_value = "0.0.0.0:8000")]
    addr: SocketAddr,

    /// Models listed by /v1/models (comma-separated or repeated); requests may name any model.
    #[arg(
        long = "model",
        env = "SLUICE_SIM_MODELS",
        value_delimiter = ',',
        default_value = "sim-model"
    )]
    models: Vec<String>,

    /// Generation pace of each answer, tokens per second (0 = as fast as possible).
    #[arg(long, env = "SLUICE_SIM_TOKENS_PER_SECOND", default_value_t = 50.0)]
    tokens_per_second: f64,

    /// Time from admission to the first token, in milliseconds.
    #[arg(long, env = "SLUICE_SIM_FIRST_TOKEN_MS", default_value_t = 20)]
    first_token_ms: u64,

    /// Requests generated at once (0 = unlimited).
    #[arg(long, env = "SLUICE_SIM_MAX_CONCURRENCY", default_value_t = 0)]
    max_concurrency: usize,

    /// Beyond --max-concurrency: answer `429`, answer `503`, or `queue` until a slot frees.
    #[arg(long, env = "SLUICE_SIM_OVER_CAPACITY", value_enum, default_value = "429")]
    over_capacity: OverCapacityArg,

    /// Retry-After seconds of over-capacity answers.
    #[arg(long, env = "SLUICE_SIM_RETRY_AFTER_SECS", default_value_t = 1)]
    retry_after_secs: u64,

    /// Tokens generated when the request does not cap them lower.
    #[arg(long, env = "SLUICE_SIM_DEFAULT_COMPLETION_TOKENS", default_value_t = 16)]
    default_completion_tokens: u64,

    /// Share of requests answered 500 before any output (0..1).
    #[arg(long, env = "SLUICE_SIM_FAILURE_RATE", default_value_t = 0.0)]
    failure_rate: f64,

    /// Share of requests broken halfway (streams: connection closed, no [DONE]) (0..1).
    #[arg(long, env = "SLUICE_SIM_MID_STREAM_FAILURE_RATE", default_value_t = 0.0)]
    mid_stream_failure_rate: f64,

    /// Seed of the failure draws.
    #[arg(long, env = "SLUICE_SIM_SEED", default_value_t = 0)]
    seed: u64,

    /// Embedding length when a request has no `dimensions`.
    #[arg(long, env = "SLUICE_SIM_EMBEDDING_DIMENSIONS", default_value_t = 8)]
    embedding_dimensions: usize,

    /// Distinct x-request-id values remembered for /sim/calls (the last
    /// ones first seen; older ones are forgotten).
    #[arg(
        long,
        env = "SLUICE_SIM_MAX_TRACKED_REQUEST_IDS",
        default_value_t = crate::call_counts::DEFAULT_MAX_TRACKED_REQUEST_IDS
    )]
    max_tracked_request_ids: usize,

    /// Turns the GPU model on: tokens per second the whole batch processes
    /// (prefill + decode), shared by the running requests (0 = off).
    #[arg(long, env = "SLUICE_SIM_GPU_TOKENS_PER_S", default_value_t = 0.0)]
    gpu_tokens_per_s: f64,

    /// GPU model: KV-cache size in tokens (prompt + generated of the running requests).
    #[arg(long, env = "SLUICE_SIM_KV_CACHE_TOKENS", default_value_t = 32_768)]
    kv_cache_tokens: u64,

    /// GPU model: requests running at once (the batch).
    #[arg(long, env = "SLUICE_SIM_MAX_BATCH", default_value_t = 64)]
    max_batch: usize,

    /// GPU model: requests allowed to wait; beyond, answer 429 (or 503 with --over-capacity 503) (0 = unbounded).
    #[arg(long, env = "SLUICE_SIM_MAX_WAITING", default_value_t = 0)]
    max_waiting: usize,

    /// GPU model: scheduler step, milliseconds.
    #[arg(long, env = "SLUICE_SIM_GPU_STEP_MS", default_value_t = 5)]
    gpu_step_ms: u64,

    /// GPU model: vLLM's `--scheduling-policy`: `fcfs` (a request's
    /// `priority` other than 0 is refused, 400) or `priority` (waiting
    /// queue, admission and prefill by (priority, arrival), lower first).
    #[arg(long, env = "SLUICE_SIM_SCHEDULING_POLICY", value_enum, default_value = "fcfs")]
    scheduling_policy: SchedulingPolicyArg,

    /// A model counted with its own tokenizer and chat template, as its
    /// server reports usage: `MODEL=PATH/tokenizer.json:TEMPLATE` (`llama3`,
    /// `llama3_1`, `qwen3`, `deepseek_v3`, `gpt_oss`, `mistral_v3_tekken`
    /// with a `tekken.json`); repeated for several models.
    #[arg(long = "tokenizer", env = "SLUICE_SIM_TOKENIZERS", value_delimiter = ',')]
    tokenizers: Vec<String>,

    /// Log format.
    #[arg(long, env = "SLUICE_SIM_LOG_FORMAT", value_enum, default_value = "text")]
    log_format: LogFormat,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum OverCapacityArg {
    #[value(name = "429")]
    Reject429,
    #[value(name = "503")]
    Reject503,
    Queue,
}

/// A `--tokenizer MODEL=PATH:TEMPLATE`, loaded.
fn model_tokenizer(spec: &str) -> anyhow::Result<ModelTokenizer> {
    let parsed = spec
        .split_once('=')
        .and_then(|(model, rest)| Some((model, rest.rsplit_once(':')?)));
    let Some((model, (path, template))) = parsed else {
        anyhow::bail!("--tokenizer {spec:?}: expected MODEL=PATH:TEMPLATE");
    };
    ModelTokenizer::load(model, std::path::Path::new(path), template)
}

impl Cli {
    fn config(&self) -> anyhow::Result<SimConfig> {
        let tokenizers = self
            .tokenizers
            .iter()
            .map(|spec| model_tokenizer(spec))
            .collect::<anyhow::Result<_>>()?;
        Ok(SimConfig {
            tokenizers,
            models: self.models.clone(),
            tokens_per_second: self.tokens_per_second,
            first_token_latency: Duration::from_millis(self.first_token_ms),
            max_concurrency: self.max_concurrency,
            over_capacity: match self.over_capacity {
                OverCapacityArg::Reject429 => OverCapacity::Reject429,
                OverCapacityArg::Reject503 => OverCapacity::Reject503,
                OverCapacityArg::Queue => OverCapacity::Queue,
            },
            retry_after_secs: self.retry_after_secs,
            default_completion_tokens: self.default_completion_tokens,
            failure_rate: self.failure_rate,
            mid_stream_failure_rate: self.mid_stream_failure_rate,
            seed: self.seed,
            embedding_dimensions: self.embedding_dimensions,
            max_tracked_request_ids: self.max_tracked_request_ids,
            gpu: (self.gpu_tokens_per_s != 0.0).then(|| GpuConfig {
                capacity: Capacity {
                    tokens_per_s: self.gpu_tokens_per_s,
                    kv_cache_tokens: self.kv_cache_tokens,
                    max_batch: self.max_batch,
                },
                max_waiting: self.max_waiting,
                step: Duration::from_millis(self.gpu_step_ms),
                policy: match self.scheduling_policy {
                    SchedulingPolicyArg::Fcfs => SchedulingPolicy::Fcfs,
                    SchedulingPolicyArg::Priority => SchedulingPolicy::Priority,
                },
            }),
        })
    }
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum SchedulingPolicyArg {
    Fcfs,
    Priority,
}

/// The simulator as its binary runs it: flags from the process's arguments
/// (a usage error or `--help` exits the process, as clap does), logs set up,
/// then served until SIGINT or SIGTERM.
pub async fn run() -> anyhow::Result<()> {
    let cli = Cli::parse();
    init_tracing(cli.log_format);
    serve(&cli).await
}

async fn serve(cli: &Cli) -> anyhow::Result<()> {
    let config = cli.config().context("refusing to start")?;
    config.validate().context("refusing to start")?;
    let listener = tokio::net::TcpListener::bind(cli.addr)
        .await
        .with_context(|| format!("cannot listen on {}", cli.addr))?;
    crate::run(listener, config, shutdown_signal()).await?;
    tracing::info!("sluice-llm-sim stopped");
    Ok(())
}
