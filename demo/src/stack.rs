//! Starting and stopping the demo's processes: redis-server, the RocketMQ
//! name server and broker, sluice-llm-sim, sluice-rls, sluice-consumer and
//! Envoy with the Wasm filter, each on free loopback ports.

use anyhow::{bail, Context};
use rustix::process::{kill_process_group, Pid, Signal};
use sluice_testkit::{
    built_binary, filter_wasm, free_port, workspace_root, Envoy, EnvoyPorts, RedisServer, RocketMq,
};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A release binary of ours, run as a child in its own process group so that
/// stopping it stops everything it started.
pub struct Service {
    pub name: &'static str,
    child: Option<Child>,
    pub log: PathBuf,
}

impl Service {
    fn spawn(
        name: &'static str,
        program: &Path,
        args: &[String],
        log: PathBuf,
    ) -> anyhow::Result<Self> {
        use std::os::unix::process::CommandExt;
        let file = std::fs::File::create(&log)
            .with_context(|| format!("cannot create {}", log.display()))?;
        let err = file.try_clone()?;
        let child = Command::new(program)
            .args(args)
            .env(
                "RUST_LOG",
                std::env::var("SLUICE_DEMO_SERVICE_LOG").unwrap_or_else(|_| "warn".into()),
            )
            .stdin(Stdio::null())
            .stdout(file)
            .stderr(err)
            .process_group(0)
            .spawn()
            .with_context(|| format!("cannot start {}", program.display()))?;
        Ok(Service {
            name,
            child: Some(child),
            log,
        })
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child
            .as_mut()
            .and_then(|c| c.try_wait().ok().flatten())
    }

    /// Wait until `addr` accepts connections; fail early if the process died.
    fn wait_ready(&mut self, addr: SocketAddr, timeout: Duration) -> anyhow::Result<()> {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if let Some(status) = self.exited() {
                bail!(
                    "{} exited ({status}) before listening on {addr}; log {}:\n{}",
                    self.name,
                    self.log.display(),
                    tail(&self.log, 30)
                );
            }
            if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        bail!(
            "{} does not listen on {addr} after {timeout:?}; log {}:\n{}",
            self.name,
            self.log.display(),
            tail(&self.log, 30)
        )
    }

    /// SIGTERM to the process group, then SIGKILL after `grace`.
    pub fn stop(&mut self, grace: Duration) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        let group = i32::try_from(child.id()).ok().and_then(Pid::from_raw);
        if let Some(group) = group {
            let _ = kill_process_group(group, Signal::TERM);
        }
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline {
            if let Ok(Some(_)) = child.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        if let Some(group) = group {
            // Also whatever the service may have started in its group.
            let _ = kill_process_group(group, Signal::KILL);
        }
        let _ = child.kill();
        let _ = child.wait();
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        self.stop(Duration::from_secs(3));
    }
}

/// Start a service that needs the broker: right after the broker starts, the
/// name server may not list it yet and the service exits ("no broker
/// route"); try again a few times.
fn start_retrying(
    name: &'static str,
    program: &Path,
    args: &[String],
    log: &Path,
    ready: &[SocketAddr],
) -> anyhow::Result<Service> {
    let mut attempt = 0;
    loop {
        attempt += 1;
        let mut service = Service::spawn(name, program, args, log.to_path_buf())?;
        let outcome = ready
            .iter()
            .try_for_each(|addr| service.wait_ready(*addr, Duration::from_secs(30)));
        match outcome {
            Ok(()) => return Ok(service),
            Err(error) if attempt < 5 && service.exited().is_some() => {
                tracing::warn!(%name, attempt, error = %format!("{error:#}").lines().next().unwrap_or(""), "exited at start; trying again");
                std::thread::sleep(Duration::from_secs(1));
            }
            Err(error) => return Err(error),
        }
    }
}

/// The last `lines` lines of a log file.
pub fn tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// Where the demo finds its programs and configuration.
pub struct Paths {
    /// Folder holding sluice-rls, sluice-consumer and sluice-llm-sim.
    pub bin_dir: PathBuf,
    pub limits: PathBuf,
    /// May name the simulated backend's address as `@SIM_ADDR@` (a
    /// controller scraping its `/metrics`); the demo writes the rendered
    /// file next to the logs.
    pub consumer_config: PathBuf,
    pub logs: PathBuf,
    pub low_priority_max_backlog: u64,
    /// Flags added to sluice-llm-sim's (e.g. its GPU model).
    pub sim_args: Vec<String>,
}

/// Where the consumer config names the simulated backend.
const SIM_ADDR_PLACEHOLDER: &str = "@SIM_ADDR@";

/// The consumer config with the simulated backend's address filled in,
/// written to `logs`.
fn render_consumer_config(paths: &Paths, sim_addr: SocketAddr) -> anyhow::Result<PathBuf> {
    let text = std::fs::read_to_string(&paths.consumer_config)
        .with_context(|| format!("cannot read {}", paths.consumer_config.display()))?;
    let rendered = paths.logs.join("consumer.yaml");
    std::fs::write(
        &rendered,
        text.replace(SIM_ADDR_PLACEHOLDER, &sim_addr.to_string()),
    )
    .with_context(|| format!("cannot write {}", rendered.display()))?;
    Ok(rendered)
}

/// Everything the demo started. Fields drop (and stop) top to bottom:
/// the front door first, the stores last.
pub struct Stack {
    pub envoy: Option<Envoy>,
    pub consumer: Service,
    pub rls: Service,
    pub sim: Service,
    pub broker: RocketMq,
    pub redis: RedisServer,
    pub envoy_addr: SocketAddr,
    pub consumer_admin: SocketAddr,
    pub rls_admin: SocketAddr,
    /// The simulated GPU backend (its admin API changes capacity).
    pub sim_addr: SocketAddr,
    logs: PathBuf,
}

fn loopback(port: u16) -> SocketAddr {
    ([127, 0, 0, 1], port).into()
}

fn binary(dir: &Path, name: &str) -> anyhow::Result<PathBuf> {
    built_binary(
        dir,
        name,
        "build it first (./scripts/demo does: cargo build --release -p sluice-bins -p sluice-llm-sim), or pass --bin-dir",
    )
}

impl Stack {
    /// Start everything, in dependency order (blocking: run it off the async
    /// workers). `progress` hears one line per started part.
    pub fn start(paths: &Paths, progress: &dyn Fn(&str)) -> anyhow::Result<Self> {
        let rls_bin = binary(&paths.bin_dir, "sluice-rls")?;
        let consumer_bin = binary(&paths.bin_dir, "sluice-consumer")?;
        let sim_bin = binary(&paths.bin_dir, "sluice-llm-sim")?;
        let wasm = filter_wasm()?;
        std::fs::create_dir_all(&paths.logs)?;

        let redis = RedisServer::start().context("starting redis-server")?;
        progress(&format!("redis-server        127.0.0.1:{}", redis.port()));
        // The broker sometimes fails to start on a busy machine (a port taken
        // between choosing and binding it): try again.
        let mut tries = 0;
        let broker = loop {
            tries += 1;
            match RocketMq::start() {
                Ok(broker) => break broker,
                Err(error) if tries < 3 => {
                    tracing::warn!(error = %format!("{error:#}").lines().next().unwrap_or(""), "broker did not start; trying again");
                }
                Err(error) => {
                    return Err(error.context(
                        "starting the RocketMQ name server and broker (it refuses to start when \
                         the disk holding $TMPDIR is more than 75% full: free space, or run with \
                         TMPDIR=/dev/shm)",
                    ))
                }
            }
        };
        progress(&format!(
            "RocketMQ            name server {}, broker {}",
            broker.namesrv_addr(),
            broker.broker_addr()
        ));

        let sim_addr = loopback(free_port());
        let sim_args: Vec<String> = [
            "--addr".into(),
            sim_addr.to_string(),
            "--model".into(),
            "gpt-4o".into(),
            "--model".into(),
            "llama-3-8b".into(),
            "--tokens-per-second".into(),
            "100".into(),
            "--first-token-ms".into(),
            "50".into(),
            "--default-completion-tokens".into(),
            "48".into(),
        ]
        .into_iter()
        .chain(paths.sim_args.iter().cloned())
        .collect();
        let mut sim = Service::spawn(
            "sluice-llm-sim",
            &sim_bin,
            &sim_args,
            paths.logs.join("sluice-llm-sim.log"),
        )?;
        sim.wait_ready(sim_addr, Duration::from_secs(10))?;
        let model = if paths.sim_args.is_empty() {
            "100 tokens/s per answer".to_string()
        } else {
            paths.sim_args.join(" ")
        };
        progress(&format!(
            "sluice-llm-sim      {sim_addr}  (simulated GPU backend, {model})"
        ));

        let (rls_grpc, rls_admin, deferral_addr) = (
            loopback(free_port()),
            loopback(free_port()),
            loopback(free_port()),
        );
        let rls_args: Vec<String> = vec![
            "--config".into(),
            paths.limits.display().to_string(),
            "--store".into(),
            "redis".into(),
            "--redis-url".into(),
            redis.url(),
            "--grpc-addr".into(),
            rls_grpc.to_string(),
            "--admin-addr".into(),
            rls_admin.to_string(),
            "--deferral-addr".into(),
            deferral_addr.to_string(),
            "--namesrv".into(),
            broker.namesrv_addr(),
            "--low-priority-max-backlog".into(),
            paths.low_priority_max_backlog.to_string(),
            // The example secret, as in envoy/sluice-filter.yaml.
            "--deferral-secret-file".into(),
            workspace_root()
                .join("config/deferral-secret.example")
                .display()
                .to_string(),
        ];
        let rls = start_retrying(
            "sluice-rls",
            &rls_bin,
            &rls_args,
            &paths.logs.join("sluice-rls.log"),
            &[rls_grpc, deferral_addr],
        )?;
        progress(&format!(
            "sluice-rls          gRPC {rls_grpc}, deferral endpoint {deferral_addr}, admin {rls_admin}"
        ));

        let consumer_admin = loopback(free_port());
        let consumer_config = render_consumer_config(paths, sim_addr)?;
        let consumer_args: Vec<String> = vec![
            "--config".into(),
            consumer_config.display().to_string(),
            "--namesrv".into(),
            broker.namesrv_addr(),
            "--redis-url".into(),
            redis.url(),
            "--backend-url".into(),
            format!("http://{sim_addr}"),
            "--admin-addr".into(),
            consumer_admin.to_string(),
            "--id".into(),
            "demo-consumer".into(),
        ];
        let consumer = start_retrying(
            "sluice-consumer",
            &consumer_bin,
            &consumer_args,
            &paths.logs.join("sluice-consumer.log"),
            &[consumer_admin],
        )?;
        progress(&format!("sluice-consumer     admin {consumer_admin}"));

        let (envoy_admin, envoy_port) = (free_port(), free_port());
        let template = std::fs::read_to_string(workspace_root().join("envoy/sluice-filter.yaml"))
            .context("reading envoy/sluice-filter.yaml")?;
        let config = EnvoyPorts {
            admin: envoy_admin,
            listener: envoy_port,
            rls: rls_grpc.port(),
            backend: sim_addr.port(),
            deferral: Some(deferral_addr.port()),
        }
        .apply(&template)
        .replace("address: 0.0.0.0", "address: 127.0.0.1")
        .replace(
            "/etc/sluice/sluice_filter.wasm",
            &wasm.display().to_string(),
        );
        std::fs::write(paths.logs.join("envoy.yaml"), &config)?;
        let envoy = Envoy::start(&config, envoy_admin, envoy_port).context("starting Envoy")?;
        let envoy_addr = loopback(envoy_port);
        progress(&format!(
            "envoy + Wasm filter {envoy_addr}  (admin 127.0.0.1:{envoy_admin}; filter {})",
            wasm.display()
        ));
        Ok(Stack {
            envoy: Some(envoy),
            consumer,
            rls,
            sim,
            broker,
            redis,
            envoy_addr,
            consumer_admin,
            rls_admin,
            sim_addr,
            logs: paths.logs.clone(),
        })
    }

    /// Process ids of the services (for the operator's `ps`).
    pub fn pids(&self) -> Vec<(&'static str, u32)> {
        [&self.consumer, &self.rls, &self.sim]
            .iter()
            .filter_map(|s| s.pid().map(|p| (s.name, p)))
            .collect()
    }

    /// Stop everything, front to back, keeping the logs.
    pub fn stop(mut self) {
        if let Some(envoy) = self.envoy.take() {
            let _ = std::fs::write(self.logs.join("envoy.log"), envoy.log_text());
            drop(envoy);
        }
        self.consumer.stop(Duration::from_secs(3));
        self.rls.stop(Duration::from_secs(3));
        self.sim.stop(Duration::from_secs(3));
        for name in ["namesrv.log", "broker.log"] {
            let _ = std::fs::copy(self.broker.dir().join(name), self.logs.join(name));
        }
        self.broker.stop();
        self.redis.stop();
    }
}
