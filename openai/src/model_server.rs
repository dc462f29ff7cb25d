//! The model servers' Prometheus metric names that Sluice reads (the
//! consumer's capacity signals) and sluice-llm-sim's GPU model exports:
//! vLLM's and SGLang's own names, defined once here.

/// The label naming the served model, in vLLM's and SGLang's metrics.
pub const MODEL_NAME_LABEL: &str = "model_name";

/// vLLM (0.6 – 0.10).
pub mod vllm {
    /// Gauge: requests in the running batch.
    pub const NUM_REQUESTS_RUNNING: &str = "vllm:num_requests_running";
    /// Gauge: requests waiting to be scheduled.
    pub const NUM_REQUESTS_WAITING: &str = "vllm:num_requests_waiting";
    /// Gauge: KV-cache usage, 0..1 (V1 engine).
    pub const KV_CACHE_USAGE_PERC: &str = "vllm:kv_cache_usage_perc";
    /// Gauge: the same, under the V0 engine's name.
    pub const GPU_CACHE_USAGE_PERC: &str = "vllm:gpu_cache_usage_perc";
    /// Counter (the text format adds `_total`): prompt tokens.
    pub const PROMPT_TOKENS: &str = "vllm:prompt_tokens";
    /// Counter (the text format adds `_total`): generated tokens.
    pub const GENERATION_TOKENS: &str = "vllm:generation_tokens";
    /// Histogram: time to first token, seconds.
    pub const TIME_TO_FIRST_TOKEN_SECONDS: &str = "vllm:time_to_first_token_seconds";
}

/// SGLang.
pub mod sglang {
    /// Gauge: requests in the waiting queue.
    pub const NUM_QUEUE_REQS: &str = "sglang:num_queue_reqs";
    /// Gauge: requests running.
    pub const NUM_RUNNING_REQS: &str = "sglang:num_running_reqs";
    /// Gauge: KV-cache (token pool) usage, 0..1.
    pub const TOKEN_USAGE: &str = "sglang:token_usage";
}
