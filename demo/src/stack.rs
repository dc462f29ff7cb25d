//! Starting and stopping the demo's processes: redis-server, the RocketMQ
//! name server and broker, sluice-llm-sim, sluice-rls, sluice-consumer and
//! Envoy with the Wasm filter, each on free loopback ports — the testkit's
//! [`ProcessStack`], which the soak and chaos runs start too.

use anyhow::Context;
use sluice_testkit::filter_wasm;
use sluice_testkit::process::{ProcessStack, ProcessStackOptions};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Everything the demo started.
pub struct Stack {
    processes: ProcessStack,
    pub envoy_addr: SocketAddr,
    pub consumer_admin: SocketAddr,
    pub rls_admin: SocketAddr,
    /// The simulated GPU backend (its admin API changes capacity).
    pub sim_addr: SocketAddr,
    logs: PathBuf,
}

/// What the demo's simulated backend serves, before a scenario's `extra`
/// flags (e.g. its GPU model).
fn sim_args(extra: &[String]) -> Vec<String> {
    let mut args: Vec<String> = [
        "--model",
        "gpt-4o",
        "--model",
        "llama-3-8b",
        "--tokens-per-second",
        "100",
        "--first-token-ms",
        "50",
        "--default-completion-tokens",
        "48",
    ]
    .map(String::from)
    .to_vec();
    args.extend(extra.iter().cloned());
    args
}

/// The demo's stack around `limits` and `consumer_config` (which may name
/// the simulated backend as `@SIM_ADDR@`), logs in `logs`: sluice-llm-sim
/// serves the demo's models plus `extra_sim_args`, and sluice-rls lets 3
/// low-priority requests wait per bucket.
pub fn options(
    limits: &Path,
    consumer_config: &Path,
    logs: PathBuf,
    extra_sim_args: &[String],
) -> anyhow::Result<ProcessStackOptions> {
    let read = |path: &Path| {
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))
    };
    let mut options = ProcessStackOptions::new(read(limits)?, logs);
    options.consumer_config = read(consumer_config)?;
    options.sim_args = sim_args(extra_sim_args);
    options.rls_args = vec!["--low-priority-max-backlog".into(), "3".into()];
    Ok(options)
}

impl Stack {
    /// Start everything, in dependency order (blocking: run it off the async
    /// workers). `options.progress` hears one line per started part.
    pub fn start(options: ProcessStackOptions) -> anyhow::Result<Self> {
        (options.progress)(&format!("Wasm filter         {}", filter_wasm()?.display()));
        let logs = options.dir.clone();
        let processes = ProcessStack::start(options)?;
        let consumer_port = processes.consumers.first().map_or(0, |c| c.port());
        Ok(Stack {
            envoy_addr: processes.listener,
            consumer_admin: ([127, 0, 0, 1], consumer_port).into(),
            rls_admin: processes.rls_admin,
            sim_addr: processes.sim_addr,
            processes,
            logs,
        })
    }

    /// Process ids of every part (for the operator's `ps`).
    pub fn pids(&self) -> Vec<(String, u32)> {
        self.processes.pids()
    }

    /// Stop everything, front to back, keeping the logs.
    pub fn stop(self) {
        let Stack {
            mut processes,
            logs,
            ..
        } = self;
        if let Some(envoy) = processes.envoy.take() {
            let _ = std::fs::write(logs.join("envoy.log"), envoy.log_text());
        }
        for consumer in &mut processes.consumers {
            consumer.stop(Duration::from_secs(3));
        }
        processes.rls.stop(Duration::from_secs(3));
        processes.sim.stop(Duration::from_secs(3));
        for name in ["namesrv.log", "broker.log"] {
            let _ = std::fs::copy(processes.mq.dir().join(name), logs.join(name));
        }
        processes.mq.stop();
        processes.redis.stop();
    }
}
