//! Prometheus metrics of the simulator (`GET /metrics`): its own, prefix
//! `sluice_sim`, and with the GPU model on, vLLM's gauges under vLLM's names
//! (`vllm:…`, label `model_name`), so that whatever reads a vLLM server's
//! load reads the simulator's.

use crate::gpu::{GpuObserver, Load};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use sluice_runtime::metrics::{encode, register};
use std::sync::atomic::AtomicU64;
use std::time::Duration;

/// vLLM's metric names (the consumer's capacity signals read the same).
use sluice_openai::model_server::vllm;

/// vLLM's buckets of `time_to_first_token_seconds`.
const TTFT_BUCKETS: [f64; 17] = [
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
    20.0,
];

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ModelLabels {
    pub model_name: String,
}

type FloatGauge = Gauge<f64, AtomicU64>;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    pub endpoint: &'static str,
    pub status: u16,
}

/// The `kind` of an injected failure.
pub type FailureLabels = sluice_runtime::metrics::KindLabels;

/// All metrics, registered once; cheap to update from any task.
pub struct Metrics {
    registry: Registry,
    pub requests: Family<RequestLabels, Counter>,
    pub prompt_tokens: Counter,
    pub tokens_generated: Counter,
    pub in_flight: Gauge,
    pub queue_depth: Gauge,
    pub queued: Counter,
    pub rejected_over_capacity: Counter,
    pub client_disconnects: Counter,
    pub injected_failures: Family<FailureLabels, Counter>,
    pub tracked_request_ids: Gauge,
    pub gpu: GpuMetrics,
}

/// The GPU model's series, per served model.
#[derive(Clone)]
pub struct GpuMetrics {
    pub running: Family<ModelLabels, Gauge>,
    pub waiting: Family<ModelLabels, Gauge>,
    pub kv_cache_usage: Family<ModelLabels, FloatGauge>,
    pub gpu_cache_usage: Family<ModelLabels, FloatGauge>,
    pub prompt_tokens: Family<ModelLabels, Counter>,
    pub generation_tokens: Family<ModelLabels, Counter>,
    pub time_to_first_token: Family<ModelLabels, Histogram>,
}

impl GpuMetrics {
    fn register(registry: &mut Registry) -> Self {
        GpuMetrics {
            running: register(
                registry,
                vllm::NUM_REQUESTS_RUNNING,
                "Number of requests in model execution batches (simulated GPU)",
                Family::default(),
            ),
            waiting: register(
                registry,
                vllm::NUM_REQUESTS_WAITING,
                "Number of requests waiting to be processed (simulated GPU)",
                Family::default(),
            ),
            kv_cache_usage: register(
                registry,
                vllm::KV_CACHE_USAGE_PERC,
                "KV-cache usage. 1 means 100 percent usage (simulated GPU)",
                Family::default(),
            ),
            gpu_cache_usage: register(
                registry,
                vllm::GPU_CACHE_USAGE_PERC,
                "GPU KV-cache usage. 1 means 100 percent usage (older name, simulated GPU)",
                Family::default(),
            ),
            prompt_tokens: register(
                registry,
                vllm::PROMPT_TOKENS,
                "Number of prefill tokens submitted (simulated GPU)",
                Family::default(),
            ),
            generation_tokens: register(
                registry,
                vllm::GENERATION_TOKENS,
                "Number of generation tokens processed (simulated GPU)",
                Family::default(),
            ),
            time_to_first_token: register(
                registry,
                vllm::TIME_TO_FIRST_TOKEN_SECONDS,
                "Histogram of time to first token in seconds: queue wait + prefill (simulated GPU)",
                Family::new_with_constructor(|| Histogram::new(TTFT_BUCKETS.iter().copied())),
            ),
        }
    }

    fn labels(model: &str) -> ModelLabels {
        ModelLabels {
            model_name: model.to_string(),
        }
    }
}

impl GpuObserver for GpuMetrics {
    fn load(&self, model: &str, load: Load) {
        let labels = Self::labels(model);
        self.running
            .get_or_create(&labels)
            .set(i64::try_from(load.running).unwrap_or(i64::MAX));
        self.waiting
            .get_or_create(&labels)
            .set(i64::try_from(load.waiting).unwrap_or(i64::MAX));
        self.kv_cache_usage
            .get_or_create(&labels)
            .set(load.kv_cache_usage);
        self.gpu_cache_usage
            .get_or_create(&labels)
            .set(load.kv_cache_usage);
    }

    fn tokens(&self, model: &str, prompt: u64, generated: u64) {
        let labels = Self::labels(model);
        self.prompt_tokens.get_or_create(&labels).inc_by(prompt);
        self.generation_tokens
            .get_or_create(&labels)
            .inc_by(generated);
    }

    fn first_token(&self, model: &str, after: Duration) {
        self.time_to_first_token
            .get_or_create(&Self::labels(model))
            .observe(after.as_secs_f64());
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        let mut root = Registry::default();
        let gpu = GpuMetrics::register(&mut root);
        let registry = root.sub_registry_with_prefix("sluice_sim");
        let metrics = Self {
            requests: register(
                registry,
                "requests",
                "HTTP requests answered, by endpoint and status (streams count when their headers go out)",
                Family::default(),
            ),
            prompt_tokens: register(
                registry,
                "prompt_tokens",
                "Prompt tokens of admitted generation and embedding requests (approximate)",
                Counter::default(),
            ),
            tokens_generated: register(
                registry,
                "tokens_generated",
                "Completion tokens generated (streamed chunks, or tokens of whole answers)",
                Counter::default(),
            ),
            in_flight: register(
                registry,
                "in_flight",
                "Requests admitted and being generated now",
                Gauge::default(),
            ),
            queue_depth: register(
                registry,
                "queue_depth",
                "Requests waiting for a generation slot now (queue mode)",
                Gauge::default(),
            ),
            queued: register(
                registry,
                "queued",
                "Requests that had to wait for a generation slot (queue mode)",
                Counter::default(),
            ),
            rejected_over_capacity: register(
                registry,
                "rejected_over_capacity",
                "Requests answered 429 or 503 because max_concurrency requests were being generated",
                Counter::default(),
            ),
            client_disconnects: register(
                registry,
                "client_disconnects",
                "Admitted requests whose client went away before the answer was complete",
                Counter::default(),
            ),
            injected_failures: register(
                registry,
                "injected_failures",
                "Injected failures by kind: before (500, no output) and mid (stream broken)",
                Family::default(),
            ),
            tracked_request_ids: register(
                registry,
                "tracked_request_ids",
                "Distinct x-request-id values remembered for /sim/calls now (at most --max-tracked-request-ids)",
                Gauge::default(),
            ),
            gpu,
            registry: root,
        };
        // Both kinds show from the start, at 0.
        for kind in ["before", "mid"] {
            drop(
                metrics
                    .injected_failures
                    .get_or_create(&FailureLabels { kind }),
            );
        }
        metrics
    }

    pub fn injected(&self, kind: &'static str) {
        self.injected_failures
            .get_or_create(&FailureLabels { kind })
            .inc();
    }

    /// OpenMetrics text.
    pub fn encode(&self) -> String {
        encode(&self.registry)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_every_metric() {
        let metrics = Metrics::new();
        metrics
            .requests
            .get_or_create(&RequestLabels {
                endpoint: "chat_completions",
                status: 200,
            })
            .inc();
        metrics.injected("mid");
        metrics.tokens_generated.inc_by(5);
        metrics.gpu.load(
            "m",
            Load {
                running: 3,
                waiting: 2,
                kv_cache_usage: 0.25,
            },
        );
        metrics.gpu.tokens("m", 7, 9);
        metrics.gpu.first_token("m", Duration::from_millis(30));
        let text = metrics.encode();
        for needle in [
            "sluice_sim_requests_total{endpoint=\"chat_completions\",status=\"200\"} 1",
            "sluice_sim_tokens_generated_total 5",
            "sluice_sim_in_flight 0",
            "sluice_sim_rejected_over_capacity_total 0",
            "sluice_sim_client_disconnects_total 0",
            "sluice_sim_injected_failures_total{kind=\"mid\"} 1",
            "sluice_sim_queue_depth 0",
            "# TYPE vllm:num_requests_running gauge",
            "vllm:num_requests_running{model_name=\"m\"} 3",
            "vllm:num_requests_waiting{model_name=\"m\"} 2",
            "vllm:kv_cache_usage_perc{model_name=\"m\"} 0.25",
            "vllm:gpu_cache_usage_perc{model_name=\"m\"} 0.25",
            "vllm:prompt_tokens_total{model_name=\"m\"} 7",
            "vllm:generation_tokens_total{model_name=\"m\"} 9",
            "vllm:time_to_first_token_seconds_bucket{le=\"0.04\",model_name=\"m\"} 1",
        ] {
            assert!(text.contains(needle), "{needle} not in\n{text}");
        }
    }
}
