//! OpenTelemetry trace export (OTLP over gRPC), off unless an endpoint is
//! given: `--otlp-endpoint` / `SLUICE_OTLP_ENDPOINT`.
//!
//! Only the spans Sluice opens for a request's trace are exported (one
//! `tracing` target, `sluice_contract::TRACE_TARGET`, passed in by the
//! binaries), not every `tracing` span of every library. Export never
//! holds a request back: a finished span goes into a bounded queue
//! ([`MAX_QUEUED_SPANS`]; beyond it spans are dropped and counted by the SDK),
//! and a background thread sends them in batches, each export bounded by
//! [`EXPORT_TIMEOUT`]. A slow or absent collector costs dropped spans, not
//! latency or memory.

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::WithExportConfig;
use opentelemetry_sdk::trace::{BatchConfigBuilder, BatchSpanProcessor, SdkTracerProvider};
use std::time::Duration;
use tracing::Subscriber;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::Layer;

/// Finished spans waiting for export at most (a bounded queue: beyond it a
/// span is dropped, never waited for).
pub const MAX_QUEUED_SPANS: usize = 4096;
/// Spans per export call at most.
pub const MAX_EXPORT_BATCH: usize = 512;
/// How often queued spans are sent.
pub const EXPORT_DELAY: Duration = Duration::from_millis(500);
/// How long one export may take (connecting included) before it is given up.
pub const EXPORT_TIMEOUT: Duration = Duration::from_secs(5);

/// A layer of a subscriber `S`, boxed.
pub type BoxedLayer<S> = Box<dyn Layer<S> + Send + Sync>;

/// The trace export flag every binary takes.
#[derive(Clone, Debug, Default, clap::Args)]
pub struct TraceArgs {
    /// Export OpenTelemetry traces to this OTLP/gRPC collector (e.g.
    /// `http://otel-collector:4317`); off when unset.
    #[arg(long, env = "SLUICE_OTLP_ENDPOINT", value_name = "URL")]
    pub otlp_endpoint: Option<String>,
}

/// Why trace export could not start.
#[derive(Debug, thiserror::Error)]
#[error("OTLP trace export to {endpoint}: {source}")]
pub struct TraceExportError {
    endpoint: String,
    #[source]
    source: opentelemetry_otlp::ExporterBuildError,
}

/// The running trace export; dropping it sends what is queued (within
/// [`EXPORT_TIMEOUT`]) and stops the export thread. Keep it for the life of
/// the process.
#[derive(Default)]
pub struct Traces {
    provider: Option<SdkTracerProvider>,
}

impl Traces {
    /// Sends the spans queued so far now (tests read a collector after it).
    pub fn flush(&self) {
        if let Some(provider) = &self.provider {
            let _ = provider.force_flush();
        }
    }
}

impl Drop for Traces {
    fn drop(&mut self) {
        if let Some(provider) = self.provider.take() {
            let _ = provider.shutdown();
        }
    }
}

/// The layer that exports the spans of `tracing` target `target` to
/// `args.otlp_endpoint` as `service` (none when the flag is unset), and the handle that keeps the
/// export running. Must be called inside a Tokio runtime (the gRPC channel
/// is driven by it).
pub fn otlp_layer<S>(
    args: &TraceArgs,
    service: &'static str,
    target: &'static str,
) -> Result<(Option<BoxedLayer<S>>, Traces), TraceExportError>
where
    S: Subscriber + for<'span> LookupSpan<'span> + Send + Sync,
{
    let Some(endpoint) = &args.otlp_endpoint else {
        return Ok((None, Traces::default()));
    };
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_tonic()
        .with_endpoint(endpoint.clone())
        .with_timeout(EXPORT_TIMEOUT)
        .build()
        .map_err(|source| TraceExportError {
            endpoint: endpoint.clone(),
            source,
        })?;
    let batch = BatchConfigBuilder::default()
        .with_max_queue_size(MAX_QUEUED_SPANS)
        .with_max_export_batch_size(MAX_EXPORT_BATCH)
        .with_scheduled_delay(EXPORT_DELAY)
        .build();
    let processor = BatchSpanProcessor::builder(exporter)
        .with_batch_config(batch)
        .build();
    let resource = opentelemetry_sdk::Resource::builder()
        .with_service_name(service)
        .build();
    let provider = SdkTracerProvider::builder()
        .with_span_processor(processor)
        .with_resource(resource)
        .build();
    let layer = tracing_opentelemetry::layer()
        .with_tracer(provider.tracer(service))
        .with_threads(false)
        .with_location(false)
        .with_filter(tracing_subscriber::filter::filter_fn(move |meta| {
            meta.is_span() && meta.target() == target
        }));
    Ok((
        Some(Box::new(layer)),
        Traces {
            provider: Some(provider),
        },
    ))
}
