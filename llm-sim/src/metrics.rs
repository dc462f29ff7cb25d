//! Prometheus metrics of the simulator (`GET /metrics`), prefix `sluice_sim`.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use sluice_runtime::metrics::{encode, register};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    pub endpoint: &'static str,
    pub status: u16,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct FailureLabels {
    pub kind: &'static str,
}

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
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("sluice_sim");
        let metrics = Self {
            requests: register(
                &mut registry,
                "requests",
                "HTTP requests answered, by endpoint and status (streams count when their headers go out)",
                Family::default(),
            ),
            prompt_tokens: register(
                &mut registry,
                "prompt_tokens",
                "Prompt tokens of admitted generation and embedding requests (approximate)",
                Counter::default(),
            ),
            tokens_generated: register(
                &mut registry,
                "tokens_generated",
                "Completion tokens generated (streamed chunks, or tokens of whole answers)",
                Counter::default(),
            ),
            in_flight: register(
                &mut registry,
                "in_flight",
                "Requests admitted and being generated now",
                Gauge::default(),
            ),
            queue_depth: register(
                &mut registry,
                "queue_depth",
                "Requests waiting for a generation slot now (queue mode)",
                Gauge::default(),
            ),
            queued: register(
                &mut registry,
                "queued",
                "Requests that had to wait for a generation slot (queue mode)",
                Counter::default(),
            ),
            rejected_over_capacity: register(
                &mut registry,
                "rejected_over_capacity",
                "Requests answered 429 or 503 because max_concurrency requests were being generated",
                Counter::default(),
            ),
            client_disconnects: register(
                &mut registry,
                "client_disconnects",
                "Admitted requests whose client went away before the answer was complete",
                Counter::default(),
            ),
            injected_failures: register(
                &mut registry,
                "injected_failures",
                "Injected failures by kind: before (500, no output) and mid (stream broken)",
                Family::default(),
            ),
            registry,
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
        let text = metrics.encode();
        for needle in [
            "sluice_sim_requests_total{endpoint=\"chat_completions\",status=\"200\"} 1",
            "sluice_sim_tokens_generated_total 5",
            "sluice_sim_in_flight 0",
            "sluice_sim_rejected_over_capacity_total 0",
            "sluice_sim_client_disconnects_total 0",
            "sluice_sim_injected_failures_total{kind=\"mid\"} 1",
            "sluice_sim_queue_depth 0",
        ] {
            assert!(text.contains(needle), "{needle} not in\n{text}");
        }
    }
}
