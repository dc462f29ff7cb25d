//! Starting and stopping the demo's processes: redis-server, the RocketMQ
//! name server and broker, sluice-llm-sim, sluice-rls, sluice-consumer and
//! Envoy with the Wasm filter, each on free loopback ports — the testkit's
//! [`ProcessStack`], which the soak and chaos runs start too.

use anyhow::Context;
use sluice_testkit::filter_wasm;
use sluice_testkit::process::{ProcessStack, ProcessStackOptions};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// Where the demo finds its programs and configuration.
pub struct Paths {
    /// Folder holding sluice-rls, sluice-consumer and sluice-llm-sim.
    pub bin_dir: PathBuf,
    pub limits: PathBuf,
    /// May name the simulated backend's address as `@SIM_ADDR@` (a
    /// controller scraping its `/metrics`); the rendered file is written
    /// next to the logs.
    pub consumer_config: PathBuf,
    pub logs: PathBuf,
    pub low_priority_max_backlog: u64,
    /// Flags added to sluice-llm-sim's (e.g. its GPU model).
    pub sim_args: Vec<String>,
    /// The filter's rate-limit deadline, if not the shipped one.
    pub decision_deadline_ms: Option<u64>,
}

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

/// What the demo's simulated backend serves, before `Paths::sim_args`.
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

impl Stack {
    /// Start everything, in dependency order (blocking: run it off the async
    /// workers). `progress` hears one line per started part.
    pub fn start(paths: &Paths, progress: fn(&str)) -> anyhow::Result<Self> {
        progress(&format!("Wasm filter         {}", filter_wasm()?.display()));
        let read = |path: &PathBuf| {
            std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))
        };
        let mut options = ProcessStackOptions::new(read(&paths.limits)?, paths.logs.clone());
        options.consumer_config = read(&paths.consumer_config)?;
        options.sim_args = sim_args(&paths.sim_args);
        options.rls_args = vec![
            "--low-priority-max-backlog".into(),
            paths.low_priority_max_backlog.to_string(),
        ];
        options.bin_dir = Some(paths.bin_dir.clone());
        options.decision_deadline_ms = paths.decision_deadline_ms;
        options.progress = progress;
        let processes = ProcessStack::start(options)?;
        let consumer_port = processes.consumers.first().map_or(0, |c| c.port());
        Ok(Stack {
            envoy_addr: processes.listener,
            consumer_admin: ([127, 0, 0, 1], consumer_port).into(),
            rls_admin: processes.rls_admin,
            sim_addr: processes.sim_addr,
            processes,
            logs: paths.logs.clone(),
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
