//! What every Sluice binary sets up the same way: the shutdown signal, the
//! tracing subscriber and metric registration. For binaries only: libraries
//! log through `tracing` and take their shutdown as a future.

pub mod metrics;
pub mod traces;

pub use traces::{TraceArgs, TraceExportError, Traces};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::Layer;

/// How the binaries write their logs (`--log-format`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    #[default]
    Text,
    /// One JSON object per line.
    Json,
}

/// Logs to stderr in `format`, filtered by `RUST_LOG` (default `info`).
pub fn init_tracing(format: LogFormat) {
    init_tracing_with_default(format, "info");
}

/// As [`init_tracing`], with `default_filter` when `RUST_LOG` is unset or
/// invalid (the demo keeps its own output quiet with `warn`). A second call
/// leaves the first subscriber in place.
pub fn init_tracing_with_default(format: LogFormat, default_filter: &str) {
    // `try_init`: a subscriber set already (a test harness) is kept.
    let _ = tracing_subscriber::registry()
        .with(log_layer(format, default_filter))
        .try_init();
}

/// As [`init_tracing`], and OpenTelemetry trace export of the spans of
/// target `trace_target` as `service` when `traces` names a collector
/// (inside a Tokio runtime). The log lines leave those spans out unless
/// `RUST_LOG` asks for them. Keep the [`Traces`] returned until exit: its
/// drop sends the last spans.
pub fn init_telemetry(
    format: LogFormat,
    traces: &TraceArgs,
    service: &'static str,
    trace_target: &'static str,
) -> Result<Traces, TraceExportError> {
    let (otlp, handle) = traces::otlp_layer(traces, service, trace_target)?;
    // The request spans are for export: left out of the log lines by
    // default, so that without export no request makes one (about 0.7 µs
    // of a rate-limit decision's CPU, docs/benchmarks.md).
    // `RUST_LOG=info,sluice_trace=info` puts them in the log lines.
    let default_filter = format!("info,{trace_target}=off");
    let _ = tracing_subscriber::registry()
        .with(log_layer(format, &default_filter))
        .with(otlp)
        .try_init();
    Ok(handle)
}

/// The log lines to stderr in `format`, filtered by `RUST_LOG` (else
/// `default_filter`); the filter is this layer's alone, so trace export
/// does not depend on the log level.
fn log_layer<S>(format: LogFormat, default_filter: &str) -> Box<dyn Layer<S> + Send + Sync>
where
    S: tracing::Subscriber + for<'span> tracing_subscriber::registry::LookupSpan<'span>,
{
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_filter));
    let fmt = tracing_subscriber::fmt::layer().with_writer(std::io::stderr);
    match format {
        LogFormat::Text => fmt.with_filter(filter).boxed(),
        LogFormat::Json => fmt.json().with_filter(filter).boxed(),
    }
}

/// Resolves on Ctrl-C or SIGTERM (the orchestrator's stop), after logging
/// that in-flight work is being finished.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {},
        _ = terminate => {},
    }
    tracing::info!("shutting down: finishing in-flight work");
}
