//! `sluice-llm-sim`: a simulated OpenAI-compatible LLM server.
//!
//! Sluice's tests, demo and benchmarks use it as the "GPU backend": it speaks
//! OpenAI's wire format (`/v1/chat/completions`, `/v1/completions`,
//! `/v1/embeddings`, `/v1/models`, streaming included), generates
//! deterministic text at a configurable pace, caps concurrency like a busy GPU
//! server, and injects failures on demand. See the crate's README for the
//! knobs and the per-request `x-sim-*` headers.
//!
//! ```no_run
//! # async fn demo() -> anyhow::Result<()> {
//! let server = sluice_llm_sim::spawn(sluice_llm_sim::SimConfig::default()).await?;
//! println!("base URL: {}", server.url());
//! server.shutdown().await?;
//! # Ok(())
//! # }
//! ```

pub mod call_counts;
pub mod gpu;
pub mod ledger;
pub mod metrics;
pub mod openai;
mod server;
pub mod text;

use anyhow::Context;
use axum::serve::ListenerExt;
use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;

pub use server::router;

/// Request header: how many tokens to generate (still capped by `max_tokens`).
pub const HEADER_COMPLETION_TOKENS: &str = "x-sim-completion-tokens";
/// Request header: generation pace of this request, tokens per second (0 = unpaced).
pub const HEADER_TOKENS_PER_SECOND: &str = "x-sim-tokens-per-second";
/// Request header: `before` (500, no output), `mid` (break the answer halfway)
/// or `none` (no failure, whatever the configured rates).
pub const HEADER_FAIL: &str = "x-sim-fail";
/// Request header: time to first token of this request, in milliseconds.
pub const HEADER_FIRST_TOKEN_MS: &str = "x-sim-first-token-ms";
/// Request header: the ledger key this request's tokens are recorded under
/// (`GET /sim/ledger`), e.g. its tenant.
pub const HEADER_LEDGER: &str = "x-sim-ledger";
/// `GET` each simulated GPU's capacity and load, `POST` a
/// [`gpu::CapacityChange`] to change it (GPU model only).
pub const ADMIN_CAPACITY_PATH: &str = "/admin/capacity";
/// Request header: `omit` answers without usage (no `usage` in a whole
/// answer, no usage chunk in a stream), as some servers do; `send` (default).
pub const HEADER_USAGE: &str = "x-sim-usage";
/// Response header: the request's `x-request-id`, echoed.
pub const HEADER_ECHO_REQUEST_ID: &str = "x-sim-request-id";

/// What to do with a request that arrives while `max_concurrency` requests
/// are being generated.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum OverCapacity {
    /// Answer 429 `rate_limit_exceeded` with `Retry-After`.
    #[default]
    Reject429,
    /// Answer 503 (overloaded) with `Retry-After`.
    Reject503,
    /// Wait for a free slot (FIFO), for as long as the client waits.
    Queue,
}

/// The simulator's knobs.
#[derive(Clone, Debug)]
pub struct SimConfig {
    /// Models listed by `GET /v1/models`. Requests may name any model: it is
    /// echoed back, never checked.
    pub models: Vec<String>,
    /// Generation pace of each answer, tokens per second; 0 = as fast as possible.
    pub tokens_per_second: f64,
    /// Time from admission to the first generated token.
    pub first_token_latency: Duration,
    /// Requests generated at once (chat, completions, embeddings); 0 = unlimited.
    pub max_concurrency: usize,
    /// What happens beyond `max_concurrency`.
    pub over_capacity: OverCapacity,
    /// `Retry-After` seconds sent with over-capacity answers.
    pub retry_after_secs: u64,
    /// Tokens generated when neither the request nor `x-sim-completion-tokens`
    /// says otherwise (capped by `max_tokens`).
    pub default_completion_tokens: u64,
    /// Share of admitted requests answered 500 before any output (0..=1).
    pub failure_rate: f64,
    /// Share of admitted requests broken halfway through (0..=1): the
    /// connection is closed mid-stream (no `[DONE]`), or a whole answer
    /// becomes a 500.
    pub mid_stream_failure_rate: f64,
    /// Seed of the failure draws: the same seed and the same request order
    /// give the same failures.
    pub seed: u64,
    /// Length of embedding vectors when the request has no `dimensions`.
    pub embedding_dimensions: usize,
    /// Distinct `x-request-id`s remembered for `GET /sim/calls`: the last
    /// ones first seen; older ones are forgotten (count 0), so memory is
    /// bounded ([`call_counts`]). Also the most ledger keys.
    pub max_tracked_request_ids: usize,
    /// The GPU model (continuous batching, KV cache, waiting queue; see
    /// [`gpu`]), one GPU per listed model; off when `None`. When on, it sets
    /// the time to first token (queue wait + prefill) and the pace of
    /// chat and completion answers; `tokens_per_second` (or the
    /// `x-sim-tokens-per-second` header) becomes the fastest one answer
    /// decodes on its own (0 = no limit), `first_token_latency` is unused.
    pub gpu: Option<gpu::GpuConfig>,
}

impl Default for SimConfig {
    fn default() -> Self {
        Self {
            models: vec!["sim-model".to_string()],
            tokens_per_second: 50.0,
            first_token_latency: Duration::from_millis(20),
            max_concurrency: 0,
            over_capacity: OverCapacity::Reject429,
            retry_after_secs: 1,
            default_completion_tokens: 16,
            failure_rate: 0.0,
            mid_stream_failure_rate: 0.0,
            seed: 0,
            embedding_dimensions: 8,
            max_tracked_request_ids: call_counts::DEFAULT_MAX_TRACKED_REQUEST_IDS,
            gpu: None,
        }
    }
}

impl SimConfig {
    /// A configuration for tests: no pacing, no first-token latency.
    pub fn fast() -> Self {
        Self {
            tokens_per_second: 0.0,
            first_token_latency: Duration::ZERO,
            ..Self::default()
        }
    }

    pub fn validate(&self) -> anyhow::Result<()> {
        anyhow::ensure!(
            self.tokens_per_second.is_finite() && self.tokens_per_second >= 0.0,
            "tokens_per_second must be a finite number >= 0, not {}",
            self.tokens_per_second
        );
        for (name, rate) in [
            ("failure_rate", self.failure_rate),
            ("mid_stream_failure_rate", self.mid_stream_failure_rate),
        ] {
            anyhow::ensure!(
                (0.0..=1.0).contains(&rate),
                "{name} must be between 0 and 1, not {rate}"
            );
        }
        anyhow::ensure!(
            (1..=openai::MAX_EMBEDDING_DIMENSIONS as usize).contains(&self.embedding_dimensions),
            "embedding_dimensions must be between 1 and {}, not {}",
            openai::MAX_EMBEDDING_DIMENSIONS,
            self.embedding_dimensions
        );
        if let Some(gpu) = &self.gpu {
            gpu.validate().map_err(anyhow::Error::msg)?;
            anyhow::ensure!(
                !self.models.is_empty(),
                "the GPU model needs at least one model"
            );
        }
        Ok(())
    }
}

/// Serves the simulator on `listener` until `shutdown` completes, then lets
/// in-flight answers finish.
pub async fn run(
    listener: tokio::net::TcpListener,
    config: SimConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    config.validate()?;
    let addr = listener.local_addr()?;
    let app = router(config.clone());
    tracing::info!(
        %addr,
        tokens_per_second = config.tokens_per_second,
        first_token_ms = config.first_token_latency.as_millis() as u64,
        max_concurrency = config.max_concurrency,
        "sluice-llm-sim listening"
    );
    if let Some(gpu) = &config.gpu {
        tracing::info!(
            tokens_per_s = gpu.capacity.tokens_per_s,
            kv_cache_tokens = gpu.capacity.kv_cache_tokens,
            max_batch = gpu.capacity.max_batch,
            max_waiting = gpu.max_waiting,
            models = ?config.models,
            "GPU model on: one simulated GPU per model"
        );
    }
    // Tokens are small writes: without TCP_NODELAY, Nagle's algorithm would
    // hold them back and distort the pacing clients see.
    let listener = listener.tap_io(|tcp| {
        if let Err(error) = tcp.set_nodelay(true) {
            tracing::debug!(%error, "cannot set TCP_NODELAY");
        }
    });
    axum::serve(listener, app)
        .with_graceful_shutdown(shutdown)
        .await
        .context("simulator server failed")?;
    Ok(())
}

/// A simulator running in the background on `127.0.0.1`, for tests.
pub struct SimServer {
    addr: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<anyhow::Result<()>>>,
}

/// Starts the simulator on a free loopback port.
pub async fn spawn(config: SimConfig) -> anyhow::Result<SimServer> {
    config.validate()?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(run(listener, config, async {
        let _ = stopped.await;
    }));
    Ok(SimServer {
        addr,
        stop: Some(stop),
        task: Some(task),
    })
}

impl SimServer {
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT`, without a trailing slash.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Stops accepting, waits for in-flight answers, returns the server's result.
    pub async fn shutdown(mut self) -> anyhow::Result<()> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        match self.task.take() {
            Some(task) => task.await.context("simulator task panicked")?,
            None => Ok(()),
        }
    }
}

impl Drop for SimServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_config_is_valid_and_bad_values_are_refused() {
        SimConfig::default().validate().unwrap();
        SimConfig::fast().validate().unwrap();
        for bad in [
            SimConfig {
                tokens_per_second: -1.0,
                ..SimConfig::default()
            },
            SimConfig {
                tokens_per_second: f64::NAN,
                ..SimConfig::default()
            },
            SimConfig {
                failure_rate: 1.5,
                ..SimConfig::default()
            },
            SimConfig {
                mid_stream_failure_rate: -0.1,
                ..SimConfig::default()
            },
            SimConfig {
                embedding_dimensions: 0,
                ..SimConfig::default()
            },
            SimConfig {
                gpu: Some(gpu::GpuConfig {
                    max_waiting: 0,
                    step: Duration::from_secs(5),
                    ..gpu::GpuConfig::default()
                }),
                ..SimConfig::default()
            },
            SimConfig {
                models: Vec::new(),
                gpu: Some(gpu::GpuConfig::default()),
                ..SimConfig::default()
            },
        ] {
            assert!(bad.validate().is_err(), "{bad:?}");
        }
    }
}
