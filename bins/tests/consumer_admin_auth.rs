//! The admin API's write guard with the real `sluice-consumer` binary, real
//! Redis and the real broker: bound beyond loopback, rate changes need the
//! admin token (403 without one configured, 401 with a missing or wrong
//! one); reads stay open; the default bind is not reachable from the
//! machine's other addresses.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests fail loudly

use sluice_testkit::{free_port, http_request, wait_for_port, HttpResponse, RedisServer, RocketMq};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

const TOKEN: &str = "test-admin-token-4b1d9e2f7c";
const RATE_PUT: &str = "/rates/gpt-4o/acme?requests_per_second=0.25";
const DEFAULT_ADMIN_PORT: u16 = 9092;

/// A running `sluice-consumer`; its stderr goes to `log`.
struct Consumer {
    child: Child,
    log: std::path::PathBuf,
}

impl Consumer {
    /// `admin_addr: None` keeps the built-in default.
    fn start(
        redis: &RedisServer,
        broker: &RocketMq,
        dir: &Path,
        admin_addr: Option<String>,
        token_file: Option<&Path>,
    ) -> Self {
        let log = dir.join(format!("consumer-{}.log", free_port()));
        let mut command = Command::new(env!("CARGO_BIN_EXE_sluice-consumer"));
        command
            .args([
                "--redis-url",
                &redis.url(),
                "--namesrv",
                &broker.namesrv_addr(),
            ])
            .args([
                "--backend-url",
                "http://127.0.0.1:1",
                "--id",
                "admin-auth-test",
            ])
            .env_remove("SLUICE_CONSUMER_CONFIG")
            .env_remove("SLUICE_CONSUMER_ADMIN_ADDR")
            .env_remove("SLUICE_ADMIN_TOKEN")
            .env_remove("SLUICE_ADMIN_TOKEN_FILE")
            .env("RUST_LOG", "info")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap());
        if let Some(addr) = admin_addr {
            command.args(["--admin-addr", &addr]);
        }
        if let Some(file) = token_file {
            command.arg("--admin-token-file").arg(file);
        }
        Consumer {
            child: command.spawn().unwrap(),
            log,
        }
    }

    fn wait_ready(&mut self, addr: SocketAddr) {
        if let Err(e) = wait_for_port(addr, Duration::from_secs(60)) {
            let _ = self.child.kill();
            panic!("{e}\n{}", self.log_text());
        }
    }

    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Consumer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One of this machine's non-loopback IPv4 addresses, if it has one.
fn non_loopback_ip() -> Option<IpAddr> {
    let from_hostname = Command::new("hostname")
        .arg("-I")
        .output()
        .ok()
        .and_then(|out| {
            String::from_utf8_lossy(&out.stdout)
                .split_whitespace()
                .filter_map(|word| word.parse::<IpAddr>().ok())
                .find(|ip| ip.is_ipv4() && !ip.is_loopback() && !ip.is_unspecified())
        });
    // Fallback: the source address of a route (UDP connect sends nothing).
    from_hostname.or_else(|| {
        let socket = std::net::UdpSocket::bind("0.0.0.0:0").ok()?;
        socket.connect("203.0.113.1:9").ok()?;
        let ip = socket.local_addr().ok()?.ip();
        (!ip.is_loopback() && !ip.is_unspecified()).then_some(ip)
    })
}

fn call(addr: SocketAddr, method: &str, path: &str, token: Option<&str>) -> HttpResponse {
    let authorization = token.map(|t| format!("Bearer {t}"));
    let headers: Vec<(&str, &str)> = authorization
        .iter()
        .map(|value| ("authorization", value.as_str()))
        .collect();
    http_request(addr, method, path, &headers, b"").unwrap()
}

fn error_code(response: &HttpResponse) -> String {
    let json: serde_json::Value =
        serde_json::from_str(&response.body).unwrap_or_else(|e| panic!("{e}: {}", response.body));
    json["error"]["code"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// Checks that `response` refuses with `status` and the error code `code`.
fn assert_refused(response: &HttpResponse, status: u16, code: &str) {
    assert_eq!(response.status, status, "{}", response.body);
    assert_eq!(error_code(response), code);
}

/// A 401 with the error code `code`, whose `WWW-Authenticate` challenge
/// passes `challenge`.
fn assert_unauthorized(response: &HttpResponse, code: &str, challenge: impl Fn(&str) -> bool) {
    assert_refused(response, 401, code);
    assert!(
        response.header("www-authenticate").is_some_and(challenge),
        "{response:?}"
    );
}

/// acme's gpt-4o requests/s override as `GET /rates` lists it.
fn acme_override(addr: SocketAddr) -> Option<f64> {
    let response = call(addr, "GET", "/rates", None);
    assert_eq!(response.status, 200, "{}", response.body);
    let json: serde_json::Value = serde_json::from_str(&response.body).unwrap();
    json["gpt-4o"]["buckets"]["acme"]["requests_per_second"]["per_second"].as_f64()
}

fn refused(addr: SocketAddr, reason: &str) -> u64 {
    let metrics = call(addr, "GET", "/metrics", None);
    assert_eq!(metrics.status, 200);
    let series = format!("sluice_consumer_admin_refused_total{{reason=\"{reason}\"}} ");
    metrics
        .body
        .lines()
        .find_map(|line| line.strip_prefix(series.as_str()))
        .unwrap_or_else(|| panic!("{series} missing:\n{}", metrics.body))
        .trim()
        .parse()
        .unwrap()
}

#[test]
fn admin_writes_beyond_loopback_need_the_token() {
    let redis = RedisServer::start().unwrap();
    let broker = RocketMq::start().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let remote_ip = non_loopback_ip();
    // Requests come from the non-loopback address when there is one.
    let target = |port: u16| SocketAddr::new(remote_ip.unwrap_or([127, 0, 0, 1].into()), port);
    // A consumer whose admin API listens on every interface, at a fresh port.
    let start_on_every_interface = |token_file: Option<&Path>| {
        let port = free_port();
        let mut consumer = Consumer::start(
            &redis,
            &broker,
            dir.path(),
            Some(format!("0.0.0.0:{port}")),
            token_file,
        );
        consumer.wait_ready(target(port));
        (consumer, target(port))
    };

    // 1. Bound to every interface, no token configured: writes are disabled.
    let (open, admin) = start_on_every_interface(None);
    let put = call(admin, "PUT", RATE_PUT, None);
    assert_refused(&put, 403, "writes_disabled");
    assert!(put.body.contains("--admin-token-file"), "{}", put.body);
    // A token cannot open what is disabled.
    let put = call(admin, "PUT", "/factor/gpt-4o?factor=0", Some(TOKEN));
    assert_eq!(put.status, 403, "{}", put.body);
    assert_eq!(acme_override(admin), None);
    assert_eq!(refused(admin, "writes_disabled"), 2);
    let log = open.log_text();
    assert!(
        log.contains("WARN") && log.contains("without an admin token"),
        "no start-up warning:\n{log}"
    );
    drop(open);

    // 2. Same bind, token configured (file with a trailing newline).
    let token_file = dir.path().join("admin-token");
    std::fs::write(&token_file, format!("{TOKEN}\n")).unwrap();
    let (guarded, admin) = start_on_every_interface(Some(&token_file));
    let missing = call(admin, "PUT", RATE_PUT, None);
    assert_unauthorized(&missing, "missing_token", |v| v.starts_with("Bearer"));
    let wrong = call(admin, "PUT", RATE_PUT, Some("not-the-admin-token-at-all"));
    assert_unauthorized(&wrong, "wrong_token", |v| v.contains("invalid_token"));
    assert_eq!(acme_override(admin), None, "a refused write was applied");

    let applied = call(admin, "PUT", RATE_PUT, Some(TOKEN));
    assert_eq!(applied.status, 200, "{}", applied.body);
    assert_eq!(acme_override(admin), Some(0.25));
    // Reads need no token; refusals are counted by reason.
    assert_eq!(call(admin, "GET", "/healthz", None).status, 200);
    assert_eq!(refused(admin, "missing_token"), 1);
    assert_eq!(refused(admin, "wrong_token"), 1);
    assert!(
        !guarded.log_text().contains(TOKEN),
        "the token reached the log:\n{}",
        guarded.log_text()
    );
    drop(guarded);

    // 3. The default bind: loopback only.
    let Some(ip) = remote_ip else {
        println!("skipped the default-bind check: this machine has no non-loopback address");
        return;
    };
    if TcpListener::bind(("127.0.0.1", DEFAULT_ADMIN_PORT)).is_err() {
        println!("skipped the default-bind check: 127.0.0.1:{DEFAULT_ADMIN_PORT} is in use here");
        return;
    }
    let mut default = Consumer::start(&redis, &broker, dir.path(), None, None);
    default.wait_ready(SocketAddr::from(([127, 0, 0, 1], DEFAULT_ADMIN_PORT)));
    let remote = SocketAddr::new(ip, DEFAULT_ADMIN_PORT);
    assert!(
        TcpStream::connect_timeout(&remote, Duration::from_secs(2)).is_err(),
        "the default admin bind is reachable on {remote}"
    );
    // On loopback without a token, writes work as before.
    let local = SocketAddr::from(([127, 0, 0, 1], DEFAULT_ADMIN_PORT));
    let put = call(
        local,
        "PUT",
        "/rates/gpt-4o/acme?requests_per_second=0.5",
        None,
    );
    assert_eq!(put.status, 200, "{}", put.body);
    assert_eq!(acme_override(local), Some(0.5));
}
