//! What a simulator is told: its settings ([`SimConfig`]), what it does at
//! capacity, and the per-request `x-sim-*` headers and admin path.

use crate::tokenizers::ModelTokenizer;
use crate::{call_counts, gpu, openai};
use std::time::Duration;

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
    /// Models whose chat prompts are counted with their own tokenizer and
    /// chat template (as a real server reports them); others approximately.
    pub tokenizers: Vec<ModelTokenizer>,
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
            tokenizers: Vec::new(),
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
