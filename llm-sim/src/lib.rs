//! `sluice-llm-sim`: a simulated OpenAI-compatible LLM server.
//!
//! Sluice's tests, demo and benchmarks use it as the "GPU backend": it speaks
//! OpenAI's wire format (`/v1/chat/completions`, `/v1/completions`,
//! `/v1/embeddings`, `/v1/models`, streaming included), generates
//! deterministic text at a configurable pace, caps concurrency like a busy GPU
//! server, and injects failures on demand. See the crate's README for the
//! knobs and the per-request `x-sim-*` headers.
//!
//! ```no_run
//! # async fn demo() -> anyhow::Result<()> {
//! let server = sluice_llm_sim::spawn(sluice_llm_sim::SimConfig::default()).await?;
//! println!("base URL: {}", server.url());
//! server.shutdown().await?;
//! # Ok(())
//! # }
//! ```

pub mod call_counts;
pub mod cli;
mod config;
pub mod gpu;
pub mod ledger;
pub mod metrics;
pub mod openai;
mod server;
pub mod text;
pub mod tokenizers;

use anyhow::Context;
use axum::serve::ListenerExt;
use std::future::Future;
use std::net::SocketAddr;

pub use config::{
    OverCapacity, SimConfig, ADMIN_CAPACITY_PATH, HEADER_COMPLETION_TOKENS, HEADER_ECHO_REQUEST_ID,
    HEADER_FAIL, HEADER_FIRST_TOKEN_MS, HEADER_LEDGER, HEADER_TOKENS_PER_SECOND, HEADER_USAGE,
};
pub use server::router;

/// Serves the simulator on `listener` until `shutdown` completes, then lets
/// in-flight answers finish.
pub async fn run(
    listener: tokio::net::TcpListener,
    config: SimConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    config.validate()?;
    let addr = listener.local_addr()?;
    let app = router(config.clone());
    tracing::info!(
        %addr,
        tokens_per_second = config.tokens_per_second,
        first_token_ms = config.first_token_latency.as_millis() as u64,
        max_concurrency = config.max_concurrency,
        "sluice-llm-sim listening"
    );
    if let Some(gpu) = &config.gpu {
        tracing::info!(
            tokens_per_s = gpu.capacity.tokens_per_s,
            kv_cache_tokens = gpu.capacity.kv_cache_tokens,
            max_batch = gpu.capacity.max_batch,
            max_waiting = gpu.max_waiting,
            models = ?config.models,
            "GPU model on: one simulated GPU per model"
        );
    }
    // Tokens are small writes: without TCP_NODELAY, Nagle's algorithm would
    // hold them back and distort the pacing clients see.
    let listener = listener.tap_io(|tcp| {
        if let Err(error) = tcp.set_nodelay(true) {
            tracing::debug!(%error, "cannot set TCP_NODELAY");
        }
    });
    axum::serve(listener, app)
        .with_graceful_shutdown(shutdown)
        .await
        .context("simulator server failed")?;
    Ok(())
}

/// A simulator running in the background on `127.0.0.1`, for tests.
pub struct SimServer {
    addr: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<anyhow::Result<()>>>,
}

/// Starts the simulator on a free loopback port.
pub async fn spawn(config: SimConfig) -> anyhow::Result<SimServer> {
    config.validate()?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(run(listener, config, async {
        let _ = stopped.await;
    }));
    Ok(SimServer {
        addr,
        stop: Some(stop),
        task: Some(task),
    })
}

impl SimServer {
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT`, without a trailing slash.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Stops accepting, waits for in-flight answers, returns the server's result.
    pub async fn shutdown(mut self) -> anyhow::Result<()> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        match self.task.take() {
            Some(task) => task.await.context("simulator task panicked")?,
            None => Ok(()),
        }
    }
}

impl Drop for SimServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn default_config_is_valid_and_bad_values_are_refused() {
        SimConfig::default().validate().unwrap();
        SimConfig::fast().validate().unwrap();
        for bad in [
            SimConfig {
                tokens_per_second: -1.0,
                ..SimConfig::default()
            },
            SimConfig {
                tokens_per_second: f64::NAN,
                ..SimConfig::default()
            },
            SimConfig {
                failure_rate: 1.5,
                ..SimConfig::default()
            },
            SimConfig {
                mid_stream_failure_rate: -0.1,
                ..SimConfig::default()
            },
            SimConfig {
                embedding_dimensions: 0,
                ..SimConfig::default()
            },
            SimConfig {
                gpu: Some(gpu::GpuConfig {
                    max_waiting: 0,
                    step: Duration::from_secs(5),
                    ..gpu::GpuConfig::default()
                }),
                ..SimConfig::default()
            },
            SimConfig {
                models: Vec::new(),
                gpu: Some(gpu::GpuConfig::default()),
                ..SimConfig::default()
            },
        ] {
            assert!(bad.validate().is_err(), "{bad:?}");
        }
    }
}
