//! The deferral endpoint's metrics (`sluice_rls_deferral_*`), shared by the
//! router and the lease watch.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;

/// Metrics of the deferral endpoint; [`EndpointMetrics::register`] adds them
/// to the service's registry (`sluice_rls_deferral_*` on the admin port).
#[derive(Default)]
pub struct EndpointMetrics {
    pub accepted: Counter,
    pub rejected: Family<Vec<(String, String)>, Counter>,
    pub in_flight: Gauge,
    pub cancelled: Counter,
    pub timed_out: Counter,
    /// Requests published again after their consumer lease lapsed.
    pub republished: Counter,
    /// Body bytes held by requests being read or waiting (the budget's use).
    pub held_bytes: Gauge,
}

impl EndpointMetrics {
    /// Registers every metric under `deferral_` in `registry` (the service's
    /// registry has the `sluice_rls` prefix).
    pub fn register(&self, registry: &mut prometheus_client::registry::Registry) {
        let registry = registry.sub_registry_with_prefix("deferral");
        let counters = [
            (
                "accepted",
                "Deferred requests queued for their tenant × model bucket",
                &self.accepted,
            ),
            (
                "cancelled",
                "Deferred requests whose client went away before the answer ended",
                &self.cancelled,
            ),
            (
                "timed_out",
                "Deferred requests answered with a timeout error",
                &self.timed_out,
            ),
            (
                "republished",
                "Requests published again after their consumer lease lapsed",
                &self.republished,
            ),
        ];
        for (name, help, counter) in counters {
            registry.register(name, help, counter.clone());
        }
        registry.register(
            "rejected",
            "Deferred requests refused before queuing, by reason (method, not_deferred, bad_marker, missing_marker, token_missing, token_malformed, token_expired, token_bad_signature, token_body_mismatch, duplicate_request, too_large, too_large_to_queue, body_timeout, body_unreadable, unknown_path, invalid_request, low_priority_backlog, busy, tenant_deferral_busy, deferral_memory_full, tenant_deferral_bytes, tenant_broker_bytes, store_unavailable, tenant_bucket_limit, bucket_capacity, bucket_rate_limit, publish_failed)",
            self.rejected.clone(),
        );
        registry.register(
            "in_flight",
            "Deferred requests whose client is waiting for the answer now",
            self.in_flight.clone(),
        );
        registry.register(
            "held_bytes",
            "Body bytes held by deferred requests being read or waiting (at most --deferral-max-held-bytes)",
            self.held_bytes.clone(),
        );
    }
}
