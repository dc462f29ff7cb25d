//! Prometheus registration the way every Sluice binary does it: a metric is
//! registered once and the caller keeps a handle to update it.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::registry::{Metric, Registry};

// The one-label sets more than one binary's metrics are labelled with; each
// value is one of a fixed set the caller names.

/// A `kind` label.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KindLabels {
    pub kind: &'static str,
}

/// A `reason` label.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReasonLabels {
    pub reason: &'static str,
}

/// A `result` label.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResultLabels {
    pub result: &'static str,
}

/// Registers `metric` under `name` with `help` and hands it back (handles
/// share their value, so updates show in the registry).
pub fn register<M: Metric + Clone>(
    registry: &mut Registry,
    name: &str,
    help: &str,
    metric: M,
) -> M {
    registry.register(name, help, metric.clone());
    metric
}

/// Registers `build_info{version="…"} 1` (under the registry's prefix):
/// which build answers, for dashboards and upgrades.
pub fn register_build_info(registry: &mut Registry, version: &'static str) {
    registry.register(
        "build",
        "The version of this build",
        prometheus_client::metrics::info::Info::new(vec![("version", version)]),
    );
}

/// The text exposition format of every metric in `registry`.
pub fn encode(registry: &Registry) -> String {
    let mut text = String::new();
    // Writing into a String cannot fail.
    let _ = prometheus_client::encoding::text::encode(&mut text, registry);
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus_client::metrics::counter::Counter;

    #[test]
    fn a_registered_handle_updates_what_the_registry_encodes() {
        let mut registry = Registry::with_prefix("demo");
        let hits: Counter = register(&mut registry, "hits", "Hits", Counter::default());
        hits.inc_by(3);
        let text = encode(&registry);
        assert!(text.contains("# HELP demo_hits Hits."), "{text}");
        assert!(text.contains("demo_hits_total 3"), "{text}");
    }
}
