//! `sluice-rls broker-probe`: the broker's liveness as a real round trip
//! ([`sluice_litetopic::probe`]), for Kubernetes and `scripts/broker`'s
//! watchdog.
//!
//! - once (an exec probe, a script): exit status 0 when the round trip came
//!   back within `--deadline-ms`, 1 otherwise, with one line saying which;
//! - `--serve ADDR` (an HTTP probe): `GET /livez` runs one round trip and
//!   answers 200 or 503 (`/healthz` answers 200 at once: the prober itself).
//!   Probes run one at a time: a request that finds one running waits for
//!   it, then runs its own.

use anyhow::Context;
use axum::http::StatusCode;
use axum::routing::get;
use sluice_litetopic::probe::{probe, ProbeOptions};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// `broker-probe`'s own flags (the name server is sluice-rls's `--namesrv`).
#[derive(clap::Args)]
pub(crate) struct ProbeArgs {
    /// The whole round trip (connect, send, pop) within this.
    #[arg(long, default_value_t = 5000, value_name = "MS")]
    deadline_ms: u64,

    /// Serve `GET /livez` on this address instead of probing once.
    #[arg(long, value_name = "ADDR")]
    serve: Option<SocketAddr>,
}

impl ProbeArgs {
    fn options(&self) -> ProbeOptions {
        ProbeOptions {
            deadline: Duration::from_millis(self.deadline_ms.max(1)),
            ..ProbeOptions::default()
        }
    }
}

/// Runs the probe once, or serves it.
pub(crate) async fn run(namesrv: String, args: ProbeArgs) -> anyhow::Result<()> {
    let options = args.options();
    let Some(addr) = args.serve else {
        let live = once(&namesrv, &options).await;
        // Exit now: a frozen broker's connections may hold the client's
        // tasks, and a probe must end within its deadline.
        std::process::exit(if live { 0 } else { 1 });
    };
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("cannot listen on {addr}"))?;
    tracing::info!(%addr, %namesrv, "serving the broker probe on /livez");
    let state = Arc::new(Shared {
        namesrv,
        options,
        running: tokio::sync::Mutex::new(()),
    });
    let app = axum::Router::new()
        .route("/livez", get(livez))
        .route("/healthz", get(|| async { "ok\n" }))
        .with_state(state);
    axum::serve(listener, app)
        .with_graceful_shutdown(sluice_runtime::shutdown_signal())
        .await
        .context("probe server")
}

/// One probe, its result printed; whether the broker is live.
async fn once(namesrv: &str, options: &ProbeOptions) -> bool {
    match probe(namesrv, options).await {
        Ok(report) => {
            println!(
                "broker live: round trip {} ms ({} stale probe messages dropped)",
                report.round_trip.as_millis(),
                report.stale
            );
            true
        }
        Err(error) => {
            println!("broker not live: {error}");
            false
        }
    }
}

struct Shared {
    namesrv: String,
    options: ProbeOptions,
    /// One probe at a time against the broker.
    running: tokio::sync::Mutex<()>,
}

async fn livez(
    axum::extract::State(state): axum::extract::State<Arc<Shared>>,
) -> (StatusCode, String) {
    let _one = state.running.lock().await;
    match probe(&state.namesrv, &state.options).await {
        Ok(report) => (
            StatusCode::OK,
            format!(
                "broker live: round trip {} ms\n",
                report.round_trip.as_millis()
            ),
        ),
        Err(error) => {
            tracing::warn!(%error, "broker probe failed");
            (
                StatusCode::SERVICE_UNAVAILABLE,
                format!("broker not live: {error}\n"),
            )
        }
    }
}
