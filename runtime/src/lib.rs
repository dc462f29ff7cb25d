//! What every Sluice binary sets up the same way: the shutdown signal, the
//! tracing subscriber and metric registration. For binaries only: libraries
//! log through `tracing` and take their shutdown as a future.

pub mod metrics;

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
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_filter));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    // `try_init`: a subscriber set already (a test harness) is kept.
    let _ = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().try_init(),
    };
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
