//! Long runs and fault runs through the real stack, shared by the soak
//! (`examples/soak.rs`) and the chaos run (`examples/chaos.rs`):
//!
//! * [`ProcessStack`]: every part a separate process on loopback ports —
//!   Redis, the broker (and its name server), `sluice-llm-sim`, `sluice-rls`
//!   with its deferral endpoint, `sluice-consumer`s, Envoy with the filter —
//!   so that resident memory is per process and `kill -9` is real;
//! * [`LoadClient`]: one request through Envoy with a deadline, classified
//!   into an [`Outcome`]; [`run_open_loop`] sends them at a fixed rate,
//!   [`calibrate`] finds the highest rate the stack sustains;
//! * [`MemorySampler`], [`MemoryStats`] and [`rss_chart_svg`]: resident
//!   memory per process over time, RSS and `RssAnon` (heap) apart.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // harness fails loudly

use crate::{
    free_port, sluice_filter_envoy_config, wait_for_port, workspace_binary, workspace_root,
};
use crate::{Envoy, KillOnDrop, RedisServer, Resident, RocketMq, SluiceFilterPorts};
use anyhow::Context;
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use std::collections::BTreeMap;
use std::ffi::OsString;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The model every load request names.
pub const MODEL: &str = "gpt-4o";
/// Tenant whose limits are never reached: requests go to the model.
pub const TENANT_ADMITTED: &str = "load-admitted";
/// Tenant over its token limit at once, with `over_limit: reject`: 429.
pub const TENANT_REJECTED: &str = "load-rejected";
/// Tenants over their token limit at once, with `over_limit: defer`.
pub const TENANTS_DEFERRED: [&str; 2] = ["load-deferred-a", "load-deferred-b"];

/// The limits file of the load runs: [`TENANT_ADMITTED`] unlimited,
/// [`TENANT_REJECTED`] rejected, every [`TENANTS_DEFERRED`] deferred.
pub fn limits_yaml() -> String {
    use crate::stack::limits::{file, tenant, OverLimit};
    let mut tenants = vec![
        tenant(
            Some(TENANT_ADMITTED),
            4_000_000_000,
            4_000_000_000,
            OverLimit::Count,
        ),
        tenant(Some(TENANT_REJECTED), 4_000_000_000, 1, OverLimit::Reject),
    ];
    for name in TENANTS_DEFERRED {
        tenants.push(tenant(
            Some(name),
            4_000_000_000,
            1,
            OverLimit::Defer("normal"),
        ));
    }
    file(&tenants)
}

// ---------------------------------------------------------------------------
// Processes

/// A workspace binary (or any program) run as a child process of its own,
/// restartable with the same arguments; SIGKILLed when dropped.
pub struct Service {
    pub name: String,
    program: PathBuf,
    args: Vec<OsString>,
    /// Accepting here means started.
    port: u16,
    log: PathBuf,
    child: Option<KillOnDrop>,
}

impl Service {
    /// Starts `program` with `args`, logging to `log` (appended), and waits
    /// until `port` accepts.
    pub fn start(
        name: &str,
        program: PathBuf,
        args: Vec<OsString>,
        port: u16,
        log: PathBuf,
    ) -> anyhow::Result<Service> {
        let mut service = Service {
            name: name.into(),
            program,
            args,
            port,
            log,
            child: None,
        };
        service.spawn()?;
        Ok(service)
    }

    fn spawn(&mut self) -> anyhow::Result<()> {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)?;
        let child = Command::new(&self.program)
            .args(&self.args)
            .env(
                "RUST_LOG",
                std::env::var("SLUICE_LOAD_LOG").unwrap_or_else(|_| "warn".into()),
            )
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .with_context(|| format!("spawning {}", self.program.display()))?;
        self.child = Some(KillOnDrop(child));
        wait_for_port(([127, 0, 0, 1], self.port).into(), Duration::from_secs(30))
            .with_context(|| format!("{} did not start; log {}", self.name, self.log.display()))
    }

    /// The port whose accepting means started (a consumer's admin port).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Its process id while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(KillOnDrop::id)
    }

    /// `kill -9`: no shutdown path runs.
    pub fn kill9(&mut self) {
        self.child = None;
    }

    /// Starts it again with the same arguments (after [`Service::kill9`]).
    pub fn restart(&mut self) -> anyhow::Result<()> {
        self.kill9();
        self.spawn()
    }
}

/// How the [`ProcessStack`] is set up.
pub struct ProcessStackOptions {
    /// `sluice-consumer` instances.
    pub consumers: usize,
    /// Extra `sluice-llm-sim` arguments (pace, answer length).
    pub sim_args: Vec<String>,
    /// The consumers' config file (pacing, limits).
    pub consumer_config: String,
    /// Where the logs and config files go (kept after the run).
    pub dir: PathBuf,
    /// Extra `sluice-rls` arguments.
    pub rls_args: Vec<String>,
    /// What Redis keeps across a restart.
    pub redis: crate::Durability,
    /// More `redis-server` arguments.
    pub redis_args: Vec<String>,
    /// The filter's `failure_mode` is `deny`: a request whose rate-limit
    /// decision failed (sluice-rls too slow or unreachable) gets a 503
    /// instead of going through uncounted, so that a load run counts it
    /// as an error. The shipped config's `allow` otherwise.
    pub refuse_undecided: bool,
}

/// The whole path, one process per part, on free loopback ports.
pub struct ProcessStack {
    pub redis: RedisServer,
    pub mq: RocketMq,
    pub sim: Service,
    pub rls: Service,
    pub consumers: Vec<Service>,
    /// `None` while killed.
    pub envoy: Option<Envoy>,
    envoy_config: String,
    envoy_admin: u16,
    /// Where clients send requests (Envoy's listener).
    pub listener: SocketAddr,
    /// The model server (for `/sim/calls`).
    pub sim_addr: SocketAddr,
    /// sluice-rls's admin port (`/metrics`).
    pub rls_admin: SocketAddr,
}

impl ProcessStackOptions {
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

    pub fn start(options: ProcessStackOptions) -> anyhow::Result<ProcessStack> {
        let dir = options.dir;
        std::fs::create_dir_all(&dir)?;
        let redis = RedisServer::start_with_args(options.redis, options.redis_args)?;
        let mq = RocketMq::start()?;

        let sim_port = free_port();
        let mut sim_args: Vec<OsString> =
            vec!["--addr".into(), format!("127.0.0.1:{sim_port}").into()];
        sim_args.extend(options.sim_args.iter().map(OsString::from));
        let sim = Service::start(
            "llm-sim",
            service_binary("sluice-llm-sim")?,
            sim_args,
            sim_port,
            dir.join("llm-sim.log"),
        )?;

        let limits = dir.join("limits.yaml");
        std::fs::write(&limits, limits_yaml())?;
        let (grpc, admin, deferral) = (free_port(), free_port(), free_port());
        let secret = workspace_root().join("config/deferral-secret.example");
        let mut rls_args = vec![
            "--config".into(),
            limits.display().to_string(),
            "--grpc-addr".into(),
            format!("127.0.0.1:{grpc}"),
            "--admin-addr".into(),
            format!("127.0.0.1:{admin}"),
            "--store".into(),
            "redis".into(),
            "--redis-url".into(),
            redis.url(),
            "--deferral-addr".into(),
            format!("127.0.0.1:{deferral}"),
            "--deferral-secret-file".into(),
            secret.display().to_string(),
            "--namesrv".into(),
            mq.namesrv_addr(),
        ];
        rls_args.extend(options.rls_args);
        let rls = Service::start(
            "sluice-rls",
            service_binary("sluice-rls")?,
            os_args(&rls_args),
            deferral,
            dir.join("sluice-rls.log"),
        )?;
        wait_for_port(([127, 0, 0, 1], grpc).into(), Duration::from_secs(10))?;

        let consumer_config = dir.join("consumer.yaml");
        std::fs::write(&consumer_config, &options.consumer_config)?;
        let mut consumers = Vec::new();
        for index in 0..options.consumers {
            consumers.push(start_consumer_process(
                index,
                &redis,
                &mq,
                sim_port,
                &consumer_config,
                &dir,
            )?);
        }

        let (envoy_admin, listener) = (free_port(), free_port());
        let envoy_config = sluice_filter_envoy_config(&SluiceFilterPorts {
            admin: envoy_admin,
            listener,
            rls: grpc,
            backend: sim_port,
            deferral,
        })?;
        let envoy_config = if options.refuse_undecided {
            refuse_undecided(&envoy_config)?
        } else {
            envoy_config
        };
        let envoy = Envoy::start(&envoy_config, envoy_admin, listener)?;
        Ok(ProcessStack {
            redis,
            mq,
            sim,
            rls,
            consumers,
            envoy: Some(envoy),
            envoy_config,
            envoy_admin,
            listener: ([127, 0, 0, 1], listener).into(),
            sim_addr: ([127, 0, 0, 1], sim_port).into(),
            rls_admin: ([127, 0, 0, 1], admin).into(),
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
    pub fn envoy_admin(&self) -> Option<std::net::SocketAddr> {
        self.envoy.as_ref()?;
        Some(([127, 0, 0, 1], self.envoy_admin).into())
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

/// The binary `name` the stack runs: from `$SLUICE_BIN_DIR` when set (e.g.
/// `target/release` under a debug-built driver), else next to the driver.
fn service_binary(name: &str) -> anyhow::Result<PathBuf> {
    match std::env::var_os("SLUICE_BIN_DIR") {
        Some(dir) => {
            let path = PathBuf::from(dir).join(name);
            anyhow::ensure!(path.is_file(), "{} not found", path.display());
            Ok(path)
        }
        None => workspace_binary(name),
    }
}

fn os_args(args: &[String]) -> Vec<OsString> {
    args.iter().map(OsString::from).collect()
}

fn start_consumer_process(
    index: usize,
    redis: &RedisServer,
    mq: &RocketMq,
    sim_port: u16,
    config: &Path,
    dir: &Path,
) -> anyhow::Result<Service> {
    let name = format!("consumer-{}", index + 1);
    let admin = free_port();
    Service::start(
        &name,
        service_binary("sluice-consumer")?,
        os_args(&[
            "--id".into(),
            name.clone(),
            "--redis-url".into(),
            redis.url(),
            "--namesrv".into(),
            mq.namesrv_addr(),
            "--backend-url".into(),
            format!("http://127.0.0.1:{sim_port}"),
            "--config".into(),
            config.display().to_string(),
            "--admin-addr".into(),
            format!("127.0.0.1:{admin}"),
            "--membership-ttl-ms".into(),
            "2000".into(),
        ]),
        admin,
        dir.join(format!("{name}.log")),
    )
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

// ---------------------------------------------------------------------------
// Requests

/// What a request is meant to meet at the filter.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Class {
    Admitted,
    Rejected,
    Deferred,
}

impl Class {
    pub fn name(self) -> &'static str {
        match self {
            Class::Admitted => "admitted",
            Class::Rejected => "rejected",
            Class::Deferred => "deferred",
        }
    }
}

/// One request to send.
#[derive(Clone, Copy, Debug)]
pub struct RequestSpec {
    pub class: Class,
    pub stream: bool,
    /// Which deferred tenant (of [`TENANTS_DEFERRED`]) for deferred ones.
    pub lane: usize,
}

impl RequestSpec {
    fn tenant(&self) -> &'static str {
        match self.class {
            Class::Admitted => TENANT_ADMITTED,
            Class::Rejected => TENANT_REJECTED,
            Class::Deferred => TENANTS_DEFERRED[self.lane % TENANTS_DEFERRED.len()],
        }
    }
}

/// How a request ended, as its client saw it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Outcome {
    /// A whole answer: JSON with `choices`, or a stream ending in `[DONE]`.
    Full,
    /// 429 with an error body.
    TooMany,
    /// Any other status with a JSON error body: (status, its `error.type`).
    JsonError(u16, String),
    /// Any other status without a JSON error body (e.g. Envoy's plain 503).
    PlainError(u16),
    /// A stream that ended with an `event: error`: its `error.type`/`code`.
    SseError(String),
    /// A 200 stream that ended without `[DONE]` or an error event.
    StreamCut,
    /// The connection failed before any answer (refused, reset).
    Connect(String),
    /// The connection broke after the headers.
    BodyBroken,
    /// No answer within the deadline; `started`: headers had come.
    Timeout { started: bool },
    /// Not sent: too many requests in flight already.
    Skipped,
}

impl Outcome {
    /// A whole answer, or a 429 for a request meant to be rejected.
    pub fn is_success_for(&self, class: Class) -> bool {
        match class {
            Class::Rejected => *self == Outcome::TooMany,
            _ => *self == Outcome::Full,
        }
    }

    /// A short label for tables.
    pub fn label(&self) -> String {
        match self {
            Outcome::Full => "answered fully".into(),
            Outcome::TooMany => "429".into(),
            Outcome::JsonError(status, kind) => format!("{status} JSON error {kind}"),
            Outcome::PlainError(status) => format!("{status} without JSON body"),
            Outcome::SseError(kind) => format!("SSE error event {kind}"),
            Outcome::StreamCut => "stream ended without [DONE]/error".into(),
            Outcome::Connect(kind) => format!("connection failed ({kind})"),
            Outcome::BodyBroken => "connection broke mid-answer".into(),
            Outcome::Timeout { started: false } => "never answered (timeout)".into(),
            Outcome::Timeout { started: true } => "started, then no end (timeout)".into(),
            Outcome::Skipped => "not sent (client at its in-flight cap)".into(),
        }
    }
}

/// One request's record.
#[derive(Clone, Debug)]
pub struct Record {
    /// Its number in the run (also its `x-request-id`, `load-<n>`).
    pub number: u64,
    pub spec: RequestSpec,
    /// Since the run began.
    pub sent_at: Duration,
    pub latency: Duration,
    pub outcome: Outcome,
    /// `x-sluice-request-id` of the answer (deferred requests).
    pub sluice_request_id: Option<String>,
}

impl Record {
    pub fn finished_at(&self) -> Duration {
        self.sent_at + self.latency
    }

    /// The `x-request-id` it was sent with.
    pub fn client_request_id(&self) -> String {
        client_request_id(self.number)
    }
}

fn client_request_id(number: u64) -> String {
    format!("load-{number}")
}

/// Sends chat requests to Envoy over pooled keep-alive connections.
#[derive(Clone)]
pub struct LoadClient {
    client: Client<HttpConnector, Full<Bytes>>,
    target: SocketAddr,
    /// Prompt repeated in every request (its size sets the filter's work).
    prompt: Arc<str>,
}

#[derive(Default)]
struct Progress {
    started: bool,
    status: u16,
    sluice_request_id: Option<String>,
}

impl LoadClient {
    /// A client of `target` with a prompt of about `prompt_words` words.
    pub fn new(target: SocketAddr, prompt_words: usize) -> LoadClient {
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        connector.set_connect_timeout(Some(Duration::from_secs(2)));
        let client = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(Duration::from_secs(30))
            .build(connector);
        LoadClient {
            client,
            target,
            prompt: "hello ".repeat(prompt_words).into(),
        }
    }

    /// Sends request `number` as `spec`, waits up to `deadline` for its end.
    pub async fn send(
        &self,
        number: u64,
        spec: RequestSpec,
        run_start: Instant,
        deadline: Duration,
    ) -> Record {
        let sent = Instant::now();
        let mut progress = Progress::default();
        let answered =
            tokio::time::timeout(deadline, self.exchange(number, spec, &mut progress)).await;
        let outcome = answered.unwrap_or(Outcome::Timeout {
            started: progress.started,
        });
        Record {
            number,
            spec,
            sent_at: sent.duration_since(run_start),
            latency: sent.elapsed(),
            outcome,
            sluice_request_id: progress.sluice_request_id,
        }
    }

    async fn exchange(&self, number: u64, spec: RequestSpec, progress: &mut Progress) -> Outcome {
        let body = serde_json::json!({
            "model": MODEL,
            "max_tokens": 16,
            "stream": spec.stream,
            "messages": [{"role": "user", "content": &*self.prompt}]
        })
        .to_string();
        let request = hyper::Request::post(format!("http://{}/v1/chat/completions", self.target))
            .header("content-type", "application/json")
            .header("x-tenant-id", spec.tenant())
            .header("x-request-id", client_request_id(number))
            .body(Full::new(Bytes::from(body)));
        let request = match request {
            Ok(request) => request,
            Err(error) => return Outcome::Connect(format!("bad request: {error}")),
        };
        let response = match self.client.request(request).await {
            Ok(response) => response,
            Err(error) => return Outcome::Connect(connect_error_kind(&error)),
        };
        progress.started = true;
        progress.status = response.status().as_u16();
        progress.sluice_request_id = response
            .headers()
            .get(sluice_admission::admission::REQUEST_ID_HEADER)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let is_sse = response
            .headers()
            .get(hyper::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
        let body = match response.into_body().collect().await {
            Ok(body) => body.to_bytes(),
            Err(_) => return Outcome::BodyBroken,
        };
        classify(progress.status, is_sse, &body)
    }
}

fn connect_error_kind(error: &hyper_util::client::legacy::Error) -> String {
    let text = format!("{error:?}");
    if text.contains("ConnectionRefused") {
        "refused".into()
    } else if text.contains("ConnectionReset") || text.contains("IncompleteMessage") {
        "reset".into()
    } else if error.is_connect() {
        "connect".into()
    } else {
        "closed before the answer".into()
    }
}

/// What the client got, by status and body.
pub fn classify(status: u16, is_sse: bool, body: &[u8]) -> Outcome {
    let text = String::from_utf8_lossy(body);
    if status == 200 && is_sse {
        return classify_stream(&text);
    }
    let json: Option<serde_json::Value> = serde_json::from_slice(body).ok();
    match (status, &json) {
        (200, Some(json)) if json.get("choices").is_some() => Outcome::Full,
        (429, _) => Outcome::TooMany,
        (_, Some(json)) if json.get("error").is_some() => {
            Outcome::JsonError(status, error_kind(&json["error"]))
        }
        _ => Outcome::PlainError(status),
    }
}

fn classify_stream(text: &str) -> Outcome {
    let mut error_next = false;
    for line in text.lines() {
        if line.starts_with("event: error") {
            error_next = true;
        } else if let Some(data) = line.strip_prefix("data: ") {
            if data == "[DONE]" {
                return Outcome::Full;
            }
            let json: Option<serde_json::Value> = serde_json::from_str(data).ok();
            if let Some(error) = json.as_ref().and_then(|j| j.get("error")) {
                return Outcome::SseError(error_kind(error));
            }
            if error_next {
                return Outcome::SseError("unknown".into());
            }
        }
    }
    Outcome::StreamCut
}

fn error_kind(error: &serde_json::Value) -> String {
    let code = error["code"].as_str().unwrap_or("");
    let kind = error["type"].as_str().unwrap_or("");
    match (kind, code) {
        ("", "") => "?".into(),
        (kind, "") => kind.into(),
        ("", code) => code.into(),
        (kind, code) => format!("{kind}/{code}"),
    }
}

/// An open-loop run: a fixed rate, bounded by time and by count.
#[derive(Clone, Copy, Debug)]
pub struct OpenLoop {
    pub rate_per_second: f64,
    pub duration: Duration,
    pub max_requests: u64,
    /// Requests in flight at most; beyond it a request is [`Outcome::Skipped`].
    pub max_in_flight: usize,
    /// Each request's deadline, by class.
    pub deadline: fn(&RequestSpec) -> Duration,
}

/// Sends requests at `plan`'s rate (`mix(n)` says what request `n` is);
/// returns every record once all have ended, in order of sending.
pub async fn run_open_loop(
    client: &LoadClient,
    plan: OpenLoop,
    run_start: Instant,
    mix: impl Fn(u64) -> RequestSpec,
) -> Vec<Record> {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Record>();
    let slots = Arc::new(tokio::sync::Semaphore::new(plan.max_in_flight));
    let begin = tokio::time::Instant::now();
    let period = Duration::from_secs_f64(1.0 / plan.rate_per_second.max(0.001));
    let collector = tokio::spawn(async move {
        let mut records = Vec::new();
        while let Some(record) = rx.recv().await {
            records.push(record);
        }
        records
    });
    let mut number = 0u64;
    while number < plan.max_requests {
        let due = begin + period.mul_f64(number as f64);
        if due.duration_since(begin) >= plan.duration {
            break;
        }
        tokio::time::sleep_until(due).await;
        let spec = mix(number);
        let tx = tx.clone();
        match slots.clone().try_acquire_owned() {
            Ok(permit) => {
                let client = client.clone();
                let deadline = (plan.deadline)(&spec);
                tokio::spawn(async move {
                    let record = client.send(number, spec, run_start, deadline).await;
                    drop(permit);
                    let _ = tx.send(record);
                });
            }
            Err(_) => {
                let _ = tx.send(Record {
                    number,
                    spec,
                    sent_at: run_start.elapsed(),
                    latency: Duration::ZERO,
                    outcome: Outcome::Skipped,
                    sluice_request_id: None,
                });
            }
        }
        number += 1;
    }
    drop(tx);
    let mut records = collector.await.unwrap_or_default();
    records.sort_by_key(|r| r.number);
    records
}

/// The highest rate of whole answers with `workers` requests in flight for
/// `duration`, each request `mix(n)` within `deadline`: requests per second.
/// Requests that fail do not count, so a path that sheds load (a refused
/// decision, a timeout) calibrates lower. Numbered from 2^48 on, apart from
/// a run's.
pub async fn calibrate<M>(
    client: &LoadClient,
    workers: usize,
    duration: Duration,
    mix: M,
    deadline: fn(&RequestSpec) -> Duration,
) -> f64
where
    M: Fn(u64) -> RequestSpec + Send + Sync + 'static,
{
    let start = Instant::now();
    let mix = std::sync::Arc::new(mix);
    let mut tasks = Vec::new();
    for worker in 0..workers {
        let client = client.clone();
        let mix = mix.clone();
        tasks.push(tokio::spawn(async move {
            let mut ok = 0u64;
            let mut number = (1u64 << 48) + worker as u64 * 1_000_000_000;
            while start.elapsed() < duration {
                let spec = mix(number);
                let record = client.send(number, spec, start, deadline(&spec)).await;
                ok += u64::from(record.outcome.is_success_for(spec.class));
                number += 1;
            }
            ok
        }));
    }
    let mut ok = 0;
    for task in tasks {
        ok += task.await.unwrap_or(0);
    }
    ok as f64 / start.elapsed().as_secs_f64()
}

/// The `q` quantile of `latencies` (sorted in place), or zero when empty.
pub fn quantile(latencies: &mut [Duration], q: f64) -> Duration {
    if latencies.is_empty() {
        return Duration::ZERO;
    }
    latencies.sort_unstable();
    latencies[((latencies.len() - 1) as f64 * q).round() as usize]
}

/// How many times the model server at `sim` was called with `x-request-id:
/// request_id` (`/sim/calls`); `None` when it could not be asked.
pub async fn model_calls(sim: SocketAddr, request_id: &str) -> Option<u64> {
    crate::stack::sim_calls(sim, request_id).await?["calls"].as_u64()
}

// ---------------------------------------------------------------------------
// Memory

/// Resident memory samples: per process name, (seconds since start, KiB by kind).
pub type MemorySeries = BTreeMap<String, Vec<(f64, Resident)>>;

/// Which resident memory a process is judged by.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Measure {
    /// `VmRSS`: everything resident.
    Rss,
    /// `RssAnon`: heap and anonymous maps, without mapped files.
    Anon,
}

impl Measure {
    pub fn name(self) -> &'static str {
        match self {
            Measure::Rss => "RSS",
            Measure::Anon => "RssAnon",
        }
    }

    pub fn of(self, resident: &Resident) -> u64 {
        match self {
            Measure::Rss => resident.rss,
            Measure::Anon => resident.anon,
        }
    }
}

/// The measure the flat check uses for `process`, and why: the broker
/// memory-maps its commit log, so every message written adds file pages to
/// its RSS (page cache the kernel drops under pressure, not a leak); its
/// heap is `RssAnon`. Every other process maps only its binary, so RSS is
/// its heap plus a constant.
pub fn flat_measure(process: &str) -> (Measure, &'static str) {
    if process == "broker" {
        (
            Measure::Anon,
            "commit log is memory-mapped: file pages are page cache",
        )
    } else {
        (Measure::Rss, "no data file mapped")
    }
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

/// One measure of one process over a run, in KiB.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MemoryStats {
    /// First sample at or after the warm-up.
    pub warm: u64,
    pub end: u64,
    /// Lowest and highest samples after the warm-up.
    pub min: u64,
    pub max: u64,
}

impl MemoryStats {
    /// Of `measure` in `points` from `warmup_s` on; `None` without samples there.
    pub fn of(points: &[(f64, Resident)], measure: Measure, warmup_s: f64) -> Option<MemoryStats> {
        let warm: Vec<u64> = points
            .iter()
            .filter(|(t, _)| *t >= warmup_s)
            .map(|(_, resident)| measure.of(resident))
            .collect();
        Some(MemoryStats {
            warm: *warm.first()?,
            end: *warm.last()?,
            min: *warm.iter().min()?,
            max: *warm.iter().max()?,
        })
    }

    /// End vs warm, in percent.
    pub fn change_pct(&self) -> f64 {
        percent(self.end, self.warm)
    }

    /// The sample farthest from the warm one, in percent of it (signed).
    pub fn widest_swing_pct(&self) -> f64 {
        let (low, high) = (percent(self.min, self.warm), percent(self.max, self.warm));
        if high.abs() >= low.abs() {
            high
        } else {
            low
        }
    }
}

fn percent(value: u64, base: u64) -> f64 {
    (value as f64 - base as f64) / (base.max(1) as f64) * 100.0
}

/// Samples the resident memory of a fixed set of processes every `every`
/// on a thread of its own until stopped.
pub struct MemorySampler {
    stop: Arc<std::sync::atomic::AtomicBool>,
    thread: std::thread::JoinHandle<MemorySeries>,
}

impl MemorySampler {
    pub fn start(pids: Vec<(String, u32)>, every: Duration, start: Instant) -> MemorySampler {
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let stopped = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut series = MemorySeries::new();
            let mut next = Instant::now();
            while !stopped.load(std::sync::atomic::Ordering::Relaxed) {
                if Instant::now() >= next {
                    let at = start.elapsed().as_secs_f64();
                    for (name, pid) in &pids {
                        if let Some(resident) = crate::resident_kib(*pid) {
                            series.entry(name.clone()).or_default().push((at, resident));
                        }
                    }
                    next += every;
                }
                std::thread::sleep(Duration::from_millis(200));
            }
            series
        });
        MemorySampler { stop, thread }
    }

    /// Stops sampling (one last sample is not taken) and returns the series.
    pub fn stop(self) -> MemorySeries {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.thread.join().unwrap_or_default()
    }
}

/// Line charts of RSS (top) and RssAnon (bottom) per process over time, as
/// one small standalone SVG; a dashed line marks the end of the warm-up.
pub fn rss_chart_svg(series: &MemorySeries, title: &str, warmup_s: f64) -> String {
    let (width, panel_height) = (760.0, 300.0);
    let mut svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{}\" font-family=\"sans-serif\" font-size=\"11\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n<text x=\"60\" y=\"18\" font-size=\"13\">{title}</text>\n",
        2.0 * panel_height + 20.0
    );
    for (index, measure) in [Measure::Rss, Measure::Anon].into_iter().enumerate() {
        let top = 20.0 + index as f64 * panel_height;
        chart_panel(&mut svg, series, measure, warmup_s, top, panel_height);
    }
    svg.push_str("</svg>\n");
    svg
}

/// One panel of [`rss_chart_svg`]: `measure` of every process, `height`
/// pixels from `top`.
fn chart_panel(
    svg: &mut String,
    series: &MemorySeries,
    measure: Measure,
    warmup_s: f64,
    top: f64,
    height: f64,
) {
    const COLORS: [&str; 8] = [
        "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
    ];
    let (width, left, right, pad_top, bottom) = (760.0, 60.0, 150.0, 24.0, 36.0);
    let plot_w = width - left - right;
    let plot_h = height - pad_top - bottom;
    let top = top + pad_top;
    let t_max = series
        .values()
        .flat_map(|s| s.iter().map(|p| p.0))
        .fold(1.0_f64, f64::max);
    let mib_max = series
        .values()
        .flat_map(|s| s.iter().map(|p| measure.of(&p.1) as f64 / 1024.0))
        .fold(1.0_f64, f64::max);
    let mib_top = nice_ceiling(mib_max);
    let x = |t: f64| left + t / t_max * plot_w;
    let y = |mib: f64| top + plot_h - mib / mib_top * plot_h;
    svg.push_str(&format!(
        "<text x=\"{left}\" y=\"{:.1}\" font-size=\"12\">{}</text>\n",
        top - 6.0,
        measure.name()
    ));
    for step in 0..=4 {
        let mib = mib_top * step as f64 / 4.0;
        svg.push_str(&format!(
            "<line x1=\"{left}\" x2=\"{:.1}\" y1=\"{:.1}\" y2=\"{:.1}\" stroke=\"#ddd\"/><text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{mib:.0} MiB</text>\n",
            left + plot_w,
            y(mib),
            y(mib),
            left - 4.0,
            y(mib) + 4.0
        ));
    }
    for step in 0..=4 {
        let t = t_max * step as f64 / 4.0;
        svg.push_str(&format!(
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{:.0} min</text>\n",
            x(t),
            top + plot_h + 16.0,
            t / 60.0
        ));
    }
    if warmup_s > 0.0 && warmup_s < t_max {
        svg.push_str(&format!(
            "<line x1=\"{0:.1}\" x2=\"{0:.1}\" y1=\"{top:.1}\" y2=\"{1:.1}\" stroke=\"#999\" stroke-dasharray=\"4 3\"/><text x=\"{0:.1}\" y=\"{2:.1}\" fill=\"#999\"> warm-up</text>\n",
            x(warmup_s),
            top + plot_h,
            top + 10.0
        ));
    }
    for (index, (name, points)) in series.iter().enumerate() {
        let color = COLORS[index % COLORS.len()];
        let path: Vec<String> = points
            .iter()
            .map(|(t, resident)| {
                format!(
                    "{:.1},{:.1}",
                    x(*t),
                    y(measure.of(resident) as f64 / 1024.0)
                )
            })
            .collect();
        svg.push_str(&format!(
            "<polyline fill=\"none\" stroke=\"{color}\" stroke-width=\"1.5\" points=\"{}\"/>\n<text x=\"{:.1}\" y=\"{:.1}\" fill=\"{color}\">{name}</text>\n",
            path.join(" "),
            left + plot_w + 8.0,
            top + 14.0 * (index as f64 + 1.0)
        ));
    }
}

fn nice_ceiling(value: f64) -> f64 {
    let magnitude = 10f64.powf(value.log10().floor());
    for step in [1.0, 2.0, 2.5, 5.0, 10.0] {
        if step * magnitude >= value {
            return step * magnitude;
        }
    }
    10.0 * magnitude
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outcomes_by_status_and_body() {
        assert_eq!(classify(200, false, br#"{"choices":[]}"#), Outcome::Full);
        assert_eq!(classify(429, false, b"{}"), Outcome::TooMany);
        assert_eq!(
            classify(503, false, br#"{"error":{"type":"t","code":"c"}}"#),
            Outcome::JsonError(503, "t/c".into())
        );
        assert_eq!(classify(503, false, b"upstream"), Outcome::PlainError(503));
        assert_eq!(
            classify(200, true, b": queued\n\ndata: {}\n\ndata: [DONE]\n\n"),
            Outcome::Full
        );
        assert_eq!(
            classify(
                200,
                true,
                b"data: {}\n\nevent: error\ndata: {\"error\":{\"code\":\"interrupted\"}}\n\n"
            ),
            Outcome::SseError("interrupted".into())
        );
        assert_eq!(classify(200, true, b"data: {}\n\n"), Outcome::StreamCut);
    }

    #[test]
    fn metric_sum_adds_every_label_set_of_one_name_only() {
        let text = "# HELP x\nsluice_a_total{k=\"1\"} 2\nsluice_a_total{k=\"2\"} 3\nsluice_a_total_more 7\n";
        assert_eq!(metric_sum(text, "sluice_a_total"), 5.0);
    }

    fn resident(rss: u64, anon: u64) -> Resident {
        Resident {
            rss,
            anon,
            file: rss - anon,
        }
    }

    #[test]
    fn the_chart_has_one_line_per_process_and_measure() {
        let mut series = MemorySeries::new();
        series.insert(
            "a".into(),
            vec![(0.0, resident(1024, 512)), (10.0, resident(2048, 512))],
        );
        series.insert(
            "b".into(),
            vec![(0.0, resident(512, 256)), (10.0, resident(512, 256))],
        );
        let svg = rss_chart_svg(&series, "t", 5.0);
        assert_eq!(svg.matches("<polyline").count(), 4);
        assert!(svg.contains(">RssAnon</text>"));
        assert!(svg.starts_with("<svg"));
    }

    #[test]
    fn memory_stats_start_after_the_warm_up() {
        let points = vec![
            (0.0, resident(100, 50)),
            (10.0, resident(400, 200)),
            (20.0, resident(360, 180)),
            (30.0, resident(430, 190)),
            (40.0, resident(420, 210)),
        ];
        let rss = MemoryStats::of(&points, Measure::Rss, 10.0).unwrap();
        assert_eq!((rss.warm, rss.end, rss.min, rss.max), (400, 420, 360, 430));
        assert_eq!(rss.change_pct(), 5.0);
        assert_eq!(rss.widest_swing_pct(), -10.0);
        let anon = MemoryStats::of(&points, Measure::Anon, 10.0).unwrap();
        assert_eq!(anon.change_pct(), 5.0);
        assert!(MemoryStats::of(&points, Measure::Rss, 50.0).is_none());
        assert_eq!(flat_measure("broker").0, Measure::Anon);
        assert_eq!(flat_measure("redis").0, Measure::Rss);
    }
}
