//! One of our binaries (or any program) run as a child process on loopback
//! ports, for the tests, the benchmark drivers and the demo alike: started in
//! its own process group (stopping it stops whatever it started), ready when
//! its ports accept, restartable with the same arguments, killed when dropped.

use crate::redis_topologies::{RedisDeployment, RedisKind};
use crate::{free_port, sluice_filter_envoy_config, workspace_root};
use crate::{Envoy, RocketMq, SluiceFilterPorts};
use anyhow::{bail, Context};
use rustix::process::{kill_process_group, Pid, Signal};
use std::ffi::OsString;
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long a service may take to accept on its ports (a loaded machine
/// builds the tokenizers and connects to Redis and the broker first).
const READY_WITHIN: Duration = Duration::from_secs(30);
/// Starts of a service that exits at once (see [`Service::start`]).
const START_ATTEMPTS: u32 = 5;

/// A child process whose accepting on `ready` ports means started.
pub struct Service {
    pub name: String,
    program: PathBuf,
    args: Vec<OsString>,
    ready: Vec<u16>,
    log: PathBuf,
    child: Option<Child>,
}

impl Service {
    /// Starts `program` with `args`, its output appended to `log`, and waits
    /// until every port in `ready` accepts. A service that needs the broker
    /// may exit right after the broker starts (the name server does not list
    /// it yet: "no broker route"); one that exits before it is ready is
    /// started again, a few times. `RUST_LOG` is `$SLUICE_SERVICE_LOG`, else
    /// `warn`.
    pub fn start(
        name: &str,
        program: PathBuf,
        args: Vec<OsString>,
        ready: &[u16],
        log: PathBuf,
    ) -> anyhow::Result<Service> {
        let mut service = Service {
            name: name.into(),
            program,
            args,
            ready: ready.to_vec(),
            log,
            child: None,
        };
        service.spawn()?;
        Ok(service)
    }

    fn spawn(&mut self) -> anyhow::Result<()> {
        let mut attempt = 1;
        loop {
            self.spawn_once()?;
            match self.wait_ready() {
                Ok(()) => return Ok(()),
                Err(error) if attempt < START_ATTEMPTS && self.exited() => {
                    let first_line = format!("{error:#}")
                        .lines()
                        .next()
                        .unwrap_or("")
                        .to_string();
                    eprintln!(
                        "{}: exited at start ({first_line}); trying again",
                        self.name
                    );
                    std::thread::sleep(Duration::from_secs(1));
                    attempt += 1;
                }
                Err(error) => return Err(error),
            }
        }
    }

    fn spawn_once(&mut self) -> anyhow::Result<()> {
        use std::os::unix::process::CommandExt;
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .with_context(|| format!("cannot open {}", self.log.display()))?;
        let child = Command::new(&self.program)
            .args(&self.args)
            .env(
                "RUST_LOG",
                std::env::var("SLUICE_SERVICE_LOG").unwrap_or_else(|_| "warn".into()),
            )
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .process_group(0)
            .spawn()
            .with_context(|| format!("cannot start {}", self.program.display()))?;
        self.child = Some(child);
        Ok(())
    }

    /// Waits until every ready port accepts; fails early if the process died.
    fn wait_ready(&mut self) -> anyhow::Result<()> {
        let deadline = Instant::now() + READY_WITHIN;
        for port in self.ready.clone() {
            let addr = SocketAddr::from(([127, 0, 0, 1], port));
            loop {
                if self.exited() {
                    bail!(
                        "{} exited before listening on {addr}; log {}:\n{}",
                        self.name,
                        self.log.display(),
                        tail(&self.log, 30)
                    );
                }
                if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
                    break;
                }
                if Instant::now() >= deadline {
                    bail!(
                        "{} does not listen on {addr} after {READY_WITHIN:?}; log {}:\n{}",
                        self.name,
                        self.log.display(),
                        tail(&self.log, 30)
                    );
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        Ok(())
    }

    fn exited(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|child| matches!(child.try_wait(), Ok(Some(_))))
    }

    /// The first ready port (a consumer's admin port).
    pub fn port(&self) -> u16 {
        self.ready.first().copied().unwrap_or_default()
    }

    /// Its process id while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Where its output goes.
    pub fn log(&self) -> &Path {
        &self.log
    }

    /// `kill -9` to its process group: no shutdown path runs.
    pub fn kill9(&mut self) {
        self.stop(Duration::ZERO);
    }

    /// Starts it again with the same arguments (after [`Service::kill9`]).
    pub fn restart(&mut self) -> anyhow::Result<()> {
        self.kill9();
        self.spawn()
    }

    /// SIGTERM to its process group, then SIGKILL after `grace`.
    pub fn stop(&mut self, grace: Duration) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        let group = i32::try_from(child.id()).ok().and_then(Pid::from_raw);
        if let (Some(group), false) = (group, grace.is_zero()) {
            let _ = kill_process_group(group, Signal::TERM);
            let deadline = Instant::now() + grace;
            while Instant::now() < deadline && !matches!(child.try_wait(), Ok(Some(_))) {
                std::thread::sleep(Duration::from_millis(50));
            }
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
        self.kill9();
    }
}

/// What `program --help` prints (its stdout), once it has exited 0.
pub fn help_text(program: &str) -> anyhow::Result<String> {
    let output = Command::new(program)
        .arg("--help")
        .output()
        .with_context(|| format!("{program} --help"))?;
    let help = String::from_utf8_lossy(&output.stdout).into_owned();
    anyhow::ensure!(output.status.success(), "{help}");
    Ok(help)
}

/// The last `lines` lines of a log file.
pub fn tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

// ---------------------------------------------------------------------------
// The whole path, one process per part

/// Where the consumer config names the simulated backend's address (a
/// controller scraping its `/metrics`): [`ProcessStack::start`] fills it in.
pub const SIM_ADDR_PLACEHOLDER: &str = "@SIM_ADDR@";

/// How the [`ProcessStack`] is set up.
pub struct ProcessStackOptions {
    /// The limits file sluice-rls reads.
    pub limits: String,
    /// `sluice-consumer` instances (`consumer-1`, `consumer-2`, ...).
    pub consumers: usize,
    /// Extra `sluice-llm-sim` arguments (pace, answer length, models).
    pub sim_args: Vec<String>,
    /// The consumers' config file (pacing, limits); may name the simulated
    /// backend as [`SIM_ADDR_PLACEHOLDER`].
    pub consumer_config: String,
    /// Where the logs and config files go (kept after the run).
    pub dir: PathBuf,
    /// Extra `sluice-rls` arguments.
    pub rls_args: Vec<String>,
    /// One server (the default), or a Sentinel set or Cluster whose
    /// replicas hold the copies.
    pub redis_kind: RedisKind,
    /// What a single Redis server keeps across a restart.
    pub redis: crate::Durability,
    /// More arguments for a single `redis-server`.
    pub redis_args: Vec<String>,
    /// The filter's `failure_mode` is `deny`: a request whose rate-limit
    /// decision failed (sluice-rls too slow or unreachable) gets a 503
    /// instead of going through uncounted, so that a load run counts it
    /// as an error. The shipped config's `allow` otherwise.
    pub refuse_undecided: bool,
    /// The filter's deadline for a rate-limit decision (`rls_timeout_ms`);
    /// `None`: the shipped one. A run that checks what is decided, not how
    /// fast, on a loaded machine with debug builds sets a longer one.
    pub decision_deadline_ms: Option<u64>,
    /// Where sluice-rls, sluice-consumer and sluice-llm-sim are; `None`:
    /// `$SLUICE_BIN_DIR`, else next to the running program.
    pub bin_dir: Option<PathBuf>,
    /// Hears one line per started part.
    pub progress: fn(&str),
}

impl ProcessStackOptions {
    /// The defaults around `limits`: one unpaced consumer, llm-sim's own
    /// pace, Redis without persistence, the shipped `failure_mode`, logs in
    /// `dir`, nothing said while starting.
    pub fn new(limits: String, dir: PathBuf) -> ProcessStackOptions {
        ProcessStackOptions {
            limits,
            consumers: 1,
            sim_args: Vec::new(),
            consumer_config: String::new(),
            dir,
            rls_args: Vec::new(),
            redis_kind: RedisKind::Single,
            redis: Default::default(),
            redis_args: Vec::new(),
            refuse_undecided: false,
            decision_deadline_ms: None,
            bin_dir: None,
            progress: |_| {},
        }
    }

    /// `sluice-llm-sim`'s pace: `tokens_per_second` (0: no pacing) after a
    /// first token at `first_token_ms`.
    pub fn sim_pace(tokens_per_second: u32, first_token_ms: u32) -> Vec<String> {
        vec![
            "--tokens-per-second".into(),
            tokens_per_second.to_string(),
            "--first-token-ms".into(),
            first_token_ms.to_string(),
        ]
    }

    /// A consumer config pacing every bucket at `requests_per_second`.
    pub fn consumer_paced_at(requests_per_second: u32) -> String {
        format!("pacing:\n  default_rates: {{ requests_per_second: {requests_per_second} }}\n")
    }

    /// The binary `name` the stack runs.
    fn binary(&self, name: &str) -> anyhow::Result<PathBuf> {
        let dir = self
            .bin_dir
            .clone()
            .or_else(|| std::env::var_os("SLUICE_BIN_DIR").map(PathBuf::from));
        match dir {
            Some(dir) => crate::built_binary(
                &dir,
                name,
                "build it first (./scripts/demo does: cargo build --release -p sluice-bins \
                 -p sluice-llm-sim), or name its folder (--bin-dir, SLUICE_BIN_DIR)",
            ),
            None => crate::workspace_binary(name),
        }
    }
}

/// The whole path, one process per part, on free loopback ports. Fields
/// drop (and stop) top to bottom: the front door first, the stores last.
pub struct ProcessStack {
    /// `None` while killed.
    pub envoy: Option<Envoy>,
    pub consumers: Vec<Service>,
    pub rls: Service,
    pub sim: Service,
    pub mq: RocketMq,
    pub redis: RedisDeployment,
    envoy_config: String,
    envoy_admin: u16,
    /// Where clients send requests (Envoy's listener).
    pub listener: SocketAddr,
    /// The model server (for `/sim/calls`, `/admin/capacity`).
    pub sim_addr: SocketAddr,
    /// sluice-rls's admin port (`/metrics`).
    pub rls_admin: SocketAddr,
}

fn loopback(port: u16) -> SocketAddr {
    ([127, 0, 0, 1], port).into()
}

fn os_args(args: &[String]) -> Vec<OsString> {
    args.iter().map(OsString::from).collect()
}

impl ProcessStack {
    /// [`ProcessStack::start`] off the runtime's threads; `what` (the
    /// program) says where the logs go first.
    pub async fn start_for(
        what: &str,
        options: ProcessStackOptions,
    ) -> anyhow::Result<ProcessStack> {
        eprintln!(
            "{what}: starting the stack (logs in {})",
            options.dir.display()
        );
        tokio::task::spawn_blocking(move || ProcessStack::start(options)).await?
    }

    /// Starts every part, in dependency order (blocking).
    pub fn start(options: ProcessStackOptions) -> anyhow::Result<ProcessStack> {
        let (dir, progress) = (options.dir.clone(), options.progress);
        std::fs::create_dir_all(&dir)?;
        let redis = RedisDeployment::start_with(
            options.redis_kind,
            options.redis,
            options.redis_args.clone(),
        )
        .context("starting Redis")?;
        progress(&redis.describe());
        let mq = start_broker()?;
        progress(&format!(
            "RocketMQ            name server {}, broker {}",
            mq.namesrv_addr(),
            mq.broker_addr()
        ));

        let sim_addr = loopback(free_port());
        let mut sim_args = vec!["--addr".to_string(), sim_addr.to_string()];
        sim_args.extend(options.sim_args.iter().cloned());
        let sim = Service::start(
            "llm-sim",
            options.binary("sluice-llm-sim")?,
            os_args(&sim_args),
            &[sim_addr.port()],
            dir.join("llm-sim.log"),
        )?;
        progress(&format!(
            "sluice-llm-sim      {sim_addr}  (simulated GPU backend {})",
            options.sim_args.join(" ")
        ));

        let (rls, ports) = start_rls(&options, &redis, &mq)?;
        progress(&format!(
            "sluice-rls          gRPC 127.0.0.1:{}, deferral endpoint 127.0.0.1:{}, admin 127.0.0.1:{}",
            ports.grpc, ports.deferral, ports.admin
        ));

        let consumer_config = dir.join("consumer.yaml");
        std::fs::write(
            &consumer_config,
            options
                .consumer_config
                .replace(SIM_ADDR_PLACEHOLDER, &sim_addr.to_string()),
        )?;
        let mut consumers = Vec::new();
        for index in 0..options.consumers {
            let consumer =
                start_consumer(&options, index, &redis, &mq, sim_addr, &consumer_config)?;
            progress(&format!(
                "{:<19} admin 127.0.0.1:{}",
                consumer.name,
                consumer.port()
            ));
            consumers.push(consumer);
        }

        let (envoy_admin, listener) = (free_port(), free_port());
        let envoy_config = sluice_filter_envoy_config(&SluiceFilterPorts {
            admin: envoy_admin,
            listener,
            rls: ports.grpc,
            backend: sim_addr.port(),
            deferral: ports.deferral,
        })?
        .replace("address: 0.0.0.0", "address: 127.0.0.1");
        let envoy_config = if options.refuse_undecided {
            refuse_undecided(&envoy_config)?
        } else {
            envoy_config
        };
        let envoy_config = match options.decision_deadline_ms {
            Some(ms) => with_decision_deadline(&envoy_config, ms)?,
            None => envoy_config,
        };
        std::fs::write(dir.join("envoy.yaml"), &envoy_config)?;
        let envoy = Envoy::start(&envoy_config, envoy_admin, listener).context("starting Envoy")?;
        progress(&format!(
            "envoy + Wasm filter 127.0.0.1:{listener}  (admin 127.0.0.1:{envoy_admin})"
        ));
        Ok(ProcessStack {
            envoy: Some(envoy),
            consumers,
            rls,
            sim,
            mq,
            redis,
            envoy_config,
            envoy_admin,
            listener: loopback(listener),
            sim_addr,
            rls_admin: loopback(ports.admin),
        })
    }

    /// SIGKILL Envoy.
    pub fn kill_envoy(&mut self) {
        self.envoy = None;
    }

    /// Start Envoy again on the same ports and config.
    pub fn restart_envoy(&mut self) -> anyhow::Result<()> {
        self.envoy = None;
        self.envoy = Some(Envoy::start(
            &self.envoy_config,
            self.envoy_admin,
            self.listener.port(),
        )?);
        Ok(())
    }

    /// Every process by name with its id (those running now).
    pub fn pids(&self) -> Vec<(String, u32)> {
        let mut pids = Vec::new();
        let mut add = |name: &str, pid: Option<u32>| {
            if let Some(pid) = pid {
                pids.push((name.to_string(), pid));
            }
        };
        add("envoy", self.envoy.as_ref().map(Envoy::pid));
        add("sluice-rls", self.rls.pid());
        for consumer in &self.consumers {
            add(&consumer.name, consumer.pid());
        }
        add("llm-sim", self.sim.pid());
        add("redis", self.redis.pid());
        add("broker", self.mq.broker_pid());
        add("namesrv", self.mq.namesrv_pid());
        pids
    }

    /// Envoy's admin address while it runs (`/stats`, `/memory`).
    pub fn envoy_admin(&self) -> Option<SocketAddr> {
        self.envoy.as_ref()?;
        Some(loopback(self.envoy_admin))
    }

    /// The sums of sluice-rls's metrics `names` (their samples, all
    /// labels), from one scrape; blocks.
    pub fn rls_metrics(&self, names: &[&str]) -> Option<Vec<f64>> {
        let text = crate::http_request(self.rls_admin, "GET", "/metrics", &[], b"")
            .ok()?
            .body;
        Some(names.iter().map(|name| metric_sum(&text, name)).collect())
    }
}

/// The name server and broker; tried again when they do not start (a port
/// taken between choosing and binding it, on a busy machine).
fn start_broker() -> anyhow::Result<RocketMq> {
    let mut tries = 0;
    loop {
        tries += 1;
        match RocketMq::start() {
            Ok(mq) => return Ok(mq),
            Err(error) if tries < 3 => {
                let first_line = format!("{error:#}")
                    .lines()
                    .next()
                    .unwrap_or("")
                    .to_string();
                eprintln!("the broker did not start ({first_line}); trying again");
            }
            Err(error) => {
                return Err(error.context(
                    "starting the RocketMQ name server and broker (it refuses to start when \
                     the disk holding $TMPDIR is more than 75% full: free space, or run with \
                     TMPDIR=/dev/shm)",
                ))
            }
        }
    }
}

/// sluice-rls's ports.
struct RlsPorts {
    grpc: u16,
    admin: u16,
    deferral: u16,
}

/// sluice-rls with its deferral endpoint, on the Redis store, publishing to
/// `mq`, signing with the example secret (as envoy/sluice-filter.yaml).
fn start_rls(
    options: &ProcessStackOptions,
    redis: &RedisDeployment,
    mq: &RocketMq,
) -> anyhow::Result<(Service, RlsPorts)> {
    let limits = options.dir.join("limits.yaml");
    std::fs::write(&limits, &options.limits)?;
    let ports = RlsPorts {
        grpc: free_port(),
        admin: free_port(),
        deferral: free_port(),
    };
    let secret = workspace_root().join("config/deferral-secret.example");
    let mut args = vec![
        "--config".into(),
        limits.display().to_string(),
        "--grpc-addr".into(),
        loopback(ports.grpc).to_string(),
        "--admin-addr".into(),
        loopback(ports.admin).to_string(),
        "--store".into(),
        "redis".into(),
        "--redis-url".into(),
        redis.url(),
        "--deferral-addr".into(),
        loopback(ports.deferral).to_string(),
        "--deferral-secret-file".into(),
        secret.display().to_string(),
        "--namesrv".into(),
        mq.namesrv_addr(),
    ];
    args.extend(options.rls_args.iter().cloned());
    let rls = Service::start(
        "sluice-rls",
        options.binary("sluice-rls")?,
        os_args(&args),
        &[ports.deferral, ports.grpc],
        options.dir.join("sluice-rls.log"),
    )?;
    Ok((rls, ports))
}

fn start_consumer(
    options: &ProcessStackOptions,
    index: usize,
    redis: &RedisDeployment,
    mq: &RocketMq,
    sim_addr: SocketAddr,
    config: &Path,
) -> anyhow::Result<Service> {
    let name = format!("consumer-{}", index + 1);
    let admin = free_port();
    Service::start(
        &name,
        options.binary("sluice-consumer")?,
        os_args(&[
            "--id".into(),
            name.clone(),
            "--redis-url".into(),
            redis.url(),
            "--namesrv".into(),
            mq.namesrv_addr(),
            "--backend-url".into(),
            format!("http://{sim_addr}"),
            "--config".into(),
            config.display().to_string(),
            "--admin-addr".into(),
            loopback(admin).to_string(),
            "--membership-ttl-ms".into(),
            "2000".into(),
        ]),
        &[admin],
        options.dir.join(format!("{name}.log")),
    )
}

/// `config` (the filter's Envoy config) with `failure_mode: deny`.
fn refuse_undecided(config: &str) -> anyhow::Result<String> {
    const ALLOW: &str = r#""failure_mode": "allow""#;
    anyhow::ensure!(
        config.matches(ALLOW).count() == 1,
        "envoy/sluice-filter.yaml has no single `{ALLOW}`"
    );
    Ok(config.replace(ALLOW, r#""failure_mode": "deny""#))
}

/// `config` (the filter's Envoy config) with the filter's rate-limit
/// deadline set to `ms`.
pub fn with_decision_deadline(config: &str, ms: u64) -> anyhow::Result<String> {
    const SHIPPED: &str = r#""rls_timeout_ms": 250"#;
    anyhow::ensure!(
        config.matches(SHIPPED).count() == 1,
        "envoy/sluice-filter.yaml has no single `{SHIPPED}`"
    );
    Ok(config.replace(SHIPPED, &format!(r#""rls_timeout_ms": {ms}"#)))
}

/// The sum of the samples of metric `name` in Prometheus text.
pub fn metric_sum(text: &str, name: &str) -> f64 {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter(|l| {
            l.strip_prefix(name)
                .is_some_and(|rest| rest.starts_with(' ') || rest.starts_with('{'))
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}
