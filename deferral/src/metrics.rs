//! The deferral endpoint's metrics (`sluice_rls_deferral_*`), shared by the
//! router and the lease watch.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;

/// `register`, which adds each `"name", "help" => field;` of a metrics
/// struct under `deferral_` to a registry (the service's registry has the
/// `sluice_rls` prefix): the endpoint's, the listener's and the bucket caps'
/// metrics, one line each.
macro_rules! deferral_registration {
    ($metrics:ty { $($name:literal, $help:literal => $field:ident;)+ }) => {
        impl $metrics {
            /// Registers every metric under `deferral_` in `registry`.
            pub fn register(&self, registry: &mut prometheus_client::registry::Registry) {
                let registry = registry.sub_registry_with_prefix("deferral");
                $(registry.register($name, $help, self.$field.clone());)+
            }
        }
    };
}
pub(crate) use deferral_registration;

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
    /// Requests published again because no consumer picked them up within
    /// `unclaimed_republish_after` (a message the broker left out).
    pub republished_unclaimed: Counter,
    /// Body bytes held by requests being read or waiting (the budget's use).
    pub held_bytes: Gauge,
}

deferral_registration!(EndpointMetrics {
    "accepted", "Deferred requests queued for their tenant × model bucket" => accepted;
    "cancelled", "Deferred requests whose client went away before the answer ended" => cancelled;
    "timed_out", "Deferred requests answered with a timeout error" => timed_out;
    "republished", "Requests published again after their consumer lease lapsed" => republished;
    "republished_unclaimed", "Requests published again because no consumer picked them up in time (--deferral-unclaimed-republish-s)" => republished_unclaimed;
    "rejected", "Deferred requests refused before queuing, by reason (method, not_deferred, bad_marker, missing_marker, token_missing, token_malformed, token_expired, token_bad_signature, token_body_mismatch, duplicate_request, too_large, too_large_to_queue, body_timeout, body_unreadable, unknown_path, invalid_request, low_priority_backlog, busy, tenant_deferral_busy, deferral_memory_full, tenant_deferral_bytes, tenant_broker_bytes, store_unavailable, tenant_bucket_limit, bucket_capacity, bucket_rate_limit, publish_failed)" => rejected;
    "in_flight", "Deferred requests whose client is waiting for the answer now" => in_flight;
    "held_bytes", "Body bytes held by deferred requests being read or waiting (at most --deferral-max-held-bytes)" => held_bytes;
});
