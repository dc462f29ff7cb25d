//! Issue 25's memory bound, on the real `sluice-rls` binary: 300 deferred
//! 3.9 MiB requests and 300 token-less connections at the deferral port
//! keep its RSS under the configured byte budget plus a documented constant,
//! and the memory is given back once they end. Also the broker's disk per
//! deferred byte (printed; docs/security.md quotes it).
//!
//! Needs `cargo build -p sluice-ratelimit --bin sluice-rls` (or
//! `SLUICE_BIN_DIR`), Redis and the rocketmq-rust broker.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests fail loudly
#![recursion_limit = "256"] // rocketmq-client futures are deeply nested

use sluice_litetopic::lite_topic_name;
use sluice_testkit::load::Service;
use sluice_testkit::stack::{redis_and_broker, redis_connection, GROUP, PARENT};
use sluice_testkit::{
    free_port, parse_raw_response, resident_kib, sign_deferral_headers_for_digest,
    workspace_binary, workspace_root,
};
use std::ffi::OsString;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const MIB: u64 = 1024 * 1024;
/// The byte budget the test runs sluice-rls with.
const BUDGET: u64 = 64 * MIB;
/// What sluice-rls may use above its idle RSS besides the budget: bodies
/// being hashed, parsed and re-encoded (4 at a time, each its raw body, the
/// parsed JSON and the growing encoding: about 56 MiB at 3.9 MiB), bodies
/// being read (a growing buffer's old and new copies), and memory freed
/// less than the allocator's purge delay (1 s) ago, not yet handed back.
/// Measured 71–96 MiB over budget (8 debug-build runs on 2 loaded cores);
/// docs/operations.md and docs/security.md quote it.
const CONSTANT: u64 = 128 * MIB;
/// RSS may stay this far above idle once everything ended (allocator
/// caches, grown maps and buffers); measured 10–21 MiB.
const GIVEN_BACK_MARGIN: u64 = 48 * MIB;
const BODY_BYTES: usize = 3_900 * 1024;
const TENANTS: usize = 10;

/// A signed deferred request head asking for `100-continue`: the body is
/// sent only if the endpoint takes the request (it refuses from the headers).
/// `digest`: the body's SHA-256, computed once for all clients.
fn signed_head(req_id: &str, tenant: &str, body: &[u8], digest: &[u8; 32]) -> String {
    let mut head = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\ncontent-length: {}\r\nexpect: 100-continue\r\n",
        body.len()
    );
    let mut signed = sluice_testkit::deferral_markers(req_id, tenant, "normal", 42);
    sign_deferral_headers_for_digest(&mut signed, digest);
    for (k, v) in signed {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head + "\r\n"
}

/// Reads one response head (and what follows it in the same reads).
fn read_head(stream: &mut TcpStream) -> Vec<u8> {
    let mut raw = Vec::new();
    let mut buffer = [0u8; 4096];
    while !raw.windows(4).any(|w| w == b"\r\n\r\n") {
        match stream.read(&mut buffer) {
            Ok(0) | Err(_) => break,
            Ok(n) => raw.extend_from_slice(&buffer[..n]),
        }
    }
    raw
}

/// One deferred client: the final status (0: no answer). The head is
/// ready before the connection opens, as a proxy's would be: a client that
/// connects and then computes for seconds meets the header deadline.
fn deferred_client(addr: SocketAddr, head: String, body: Arc<Vec<u8>>) -> u16 {
    let Ok(mut stream) = TcpStream::connect(addr) else {
        return 0;
    };
    stream
        .set_read_timeout(Some(Duration::from_secs(120)))
        .unwrap();
    if stream.write_all(head.as_bytes()).is_err() {
        return 0;
    }
    let first = read_head(&mut stream);
    let (status, _) = parse_raw_response(&first);
    if status != 100 {
        return status;
    }
    if stream.write_all(&body).is_err() {
        return 0;
    }
    let mut rest = first[first
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map_or(first.len(), |p| p + 4)..]
        .to_vec();
    if rest.is_empty() {
        rest = read_head(&mut stream);
    }
    parse_raw_response(&rest).0
}

/// One token-less client: half stay silent, half send a deferral's headers
/// without a token and blast a 3.9 MiB body.
fn tokenless_client(addr: SocketAddr, n: usize, body: Arc<Vec<u8>>, hold: Duration) {
    let Ok(mut stream) = TcpStream::connect(addr) else {
        return;
    };
    if n % 2 == 1 {
        let head = format!(
            "POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\ncontent-length: {}\r\nx-sluice-deferred: 1\r\nx-sluice-request-id: tokenless-{n}\r\nx-sluice-tenant: t0\r\nx-sluice-model: gpt-4o\r\nx-sluice-priority: normal\r\nx-sluice-estimated-tokens: 1\r\n\r\n",
            body.len()
        );
        let _ = stream.write_all(head.as_bytes());
        let _ = stream.write_all(&body);
    }
    let _ = stream.set_read_timeout(Some(hold));
    let mut sink = [0u8; 4096];
    while let Ok(n) = stream.read(&mut sink) {
        if n == 0 {
            break;
        }
    }
}

/// The sum of the metric samples named `name` on sluice-rls's admin port.
fn metric(admin: SocketAddr, name: &str) -> f64 {
    let Ok(response) = sluice_testkit::http_request(admin, "GET", "/metrics", &[], b"") else {
        return 0.0;
    };
    response
        .body
        .lines()
        .filter(|l| l.starts_with(name) && !l.starts_with('#'))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

fn rss(pid: u32) -> u64 {
    resident_kib(pid).map_or(0, |r| r.rss * 1024)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiting_bodies_and_tokenless_connections_stay_within_the_byte_budget() {
    let (redis, broker) = redis_and_broker().await;
    let dir = tempfile::tempdir().unwrap();
    let (grpc, admin, deferral) = (free_port(), free_port(), free_port());
    let args: Vec<OsString> = [
        "--config",
        &workspace_root()
            .join("config/limits.yaml")
            .display()
            .to_string(),
        "--grpc-addr",
        &format!("127.0.0.1:{grpc}"),
        "--admin-addr",
        &format!("127.0.0.1:{admin}"),
        "--redis-url",
        &redis.url(),
        "--deferral-addr",
        &format!("127.0.0.1:{deferral}"),
        "--deferral-secret-file",
        &workspace_root()
            .join("config/deferral-secret.example")
            .display()
            .to_string(),
        "--namesrv",
        &broker.namesrv_addr(),
        "--lite-parent",
        PARENT,
        "--consumer-group",
        GROUP,
        "--deferral-max-held-bytes",
        &BUDGET.to_string(),
        "--deferral-max-tenant-bytes-per-minute",
        &(4096 * MIB).to_string(),
        // Fewer than the 150 silent token-less connections, which hold
        // their slot to the header deadline: some of them are refused at
        // accept. Deferred clients beyond it get 503 at accept too.
        "--deferral-max-unauthenticated-connections",
        "100",
        "--deferral-header-timeout-ms",
        "5000",
        "--deferral-timeout-s",
        "20",
    ]
    .iter()
    .map(OsString::from)
    .collect();
    let log = dir.path().join("sluice-rls.log");
    let rls = Service::start(
        "sluice-rls",
        workspace_binary("sluice-rls").unwrap(),
        args,
        &[deferral],
        log,
    )
    // The error carries the log's tail.
    .unwrap_or_else(|e| panic!("{e:#}"));
    let pid = rls.pid().unwrap();
    let addr: SocketAddr = ([127, 0, 0, 1], deferral).into();
    let admin: SocketAddr = ([127, 0, 0, 1], admin).into();
    // No consumer: requests wait until their 20 s timeout. Mark the buckets
    // subscribed so that a publish does not wait for a subscriber first.
    let mut conn = redis_connection(&redis);
    for t in 0..TENANTS {
        let topic = lite_topic_name(&format!("t{t}"), "gpt-4o");
        let _: () = redis::cmd("SET")
            .arg(sluice_contract::keys::subscribed(&topic))
            .arg(1)
            .query_async(&mut conn)
            .await
            .unwrap();
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let idle = rss(pid);

    // Sample RSS every 50 ms for the whole run.
    let peak = Arc::new(AtomicU64::new(idle));
    let stop = Arc::new(AtomicBool::new(false));
    let sampler = {
        let (peak, stop) = (peak.clone(), stop.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                peak.fetch_max(rss(pid), Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(50));
            }
        })
    };

    let body = Arc::new(sluice_testkit::chat_of(BODY_BYTES));
    let digest = sluice_admission::deferral::body_digest(&body);
    let started = Instant::now();
    let deferred: Vec<_> = (0..300)
        .map(|n| {
            let body = body.clone();
            let tenant = format!("t{}", n % TENANTS);
            let head = signed_head(&sluice_testkit::new_request_id(), &tenant, &body, &digest);
            std::thread::spawn(move || deferred_client(addr, head, body))
        })
        .collect();
    // Every request decided (queued or refused) before the token-less ones.
    let decided = |admin| {
        metric(admin, "sluice_rls_deferral_accepted_total")
            + metric(admin, "sluice_rls_deferral_rejected_total")
            + metric(admin, "sluice_rls_deferral_connections_refused_total")
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    while decided(admin) < 300.0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let accepted = metric(admin, "sluice_rls_deferral_accepted_total");
    let held = metric(admin, "sluice_rls_deferral_held_bytes");
    let refused_before = metric(admin, "sluice_rls_deferral_connections_refused_total");
    let tokenless: Vec<_> = (0..300)
        .map(|n| {
            let body = body.clone();
            std::thread::spawn(move || tokenless_client(addr, n, body, Duration::from_secs(8)))
        })
        .collect();
    for client in tokenless {
        client.join().unwrap();
    }
    let refused_connections =
        metric(admin, "sluice_rls_deferral_connections_refused_total") - refused_before;
    if let Ok(response) = sluice_testkit::http_request(admin, "GET", "/metrics", &[], b"") {
        for line in response.body.lines() {
            if line.starts_with("sluice_rls_deferral_") && !line.starts_with('#') {
                println!("{line}");
            }
        }
    }
    let statuses: Vec<u16> = deferred.into_iter().map(|c| c.join().unwrap()).collect();
    let count = |status| statuses.iter().filter(|s| **s == status).count();
    let run = started.elapsed();
    // sluice-rls hands freed memory back within about two seconds (its
    // allocator's purge delay, then its once-a-second collection): measured
    // after 3 s, waited for up to 15 s more on a loaded machine.
    let ended = Instant::now();
    tokio::time::sleep(Duration::from_secs(3)).await;
    let mut after = rss(pid);
    while after > idle + GIVEN_BACK_MARGIN && ended.elapsed() < Duration::from_secs(15) {
        tokio::time::sleep(Duration::from_millis(250)).await;
        after = rss(pid);
    }
    let given_back_in = ended.elapsed();
    stop.store(true, Ordering::Relaxed);
    sampler.join().unwrap();
    let peak = peak.load(Ordering::Relaxed);
    println!(
        "sluice-rls RSS: idle {} MiB, peak {} MiB, after {} MiB (budget {} MiB); {accepted} queued \
         (held {:.1} MiB), answers: 504 {} / 503 {} / 429 {} / other {}; token-less connections \
         refused at accept: {refused_connections}; {run:?}, back near idle in {given_back_in:?}",
        idle / MIB,
        peak / MIB,
        after / MIB,
        BUDGET / MIB,
        held / MIB as f64,
        count(504),
        count(503),
        count(429),
        300 - count(504) - count(503) - count(429),
    );
    assert!(accepted >= 8.0, "the budget admits some: {accepted}");
    assert_eq!(
        count(504) as f64,
        accepted,
        "every queued request waited to its timeout"
    );
    assert_eq!(count(504) + count(503) + count(429), 300, "{statuses:?}");
    assert!(held <= BUDGET as f64, "held {held}");
    assert!(refused_connections > 0.0);
    assert!(
        peak <= idle + BUDGET + CONSTANT,
        "peak RSS {} MiB over idle {} MiB + budget {} MiB + {} MiB",
        peak / MIB,
        idle / MIB,
        BUDGET / MIB,
        CONSTANT / MIB
    );
    assert!(
        after <= idle + GIVEN_BACK_MARGIN,
        "RSS {} MiB after the run, idle was {} MiB",
        after / MIB,
        idle / MIB
    );
    assert_eq!(metric(admin, "sluice_rls_deferral_held_bytes"), 0.0);
    drop(rls);
}

/// Allocated KiB under `path` (`du -sk`).
fn du_kib(path: &std::path::Path) -> u64 {
    let output = std::process::Command::new("du")
        .arg("-sk")
        .arg(path)
        .output()
        .unwrap();
    String::from_utf8_lossy(&output.stdout)
        .split_whitespace()
        .next()
        .and_then(|kib| kib.parse().ok())
        .unwrap_or(0)
}

/// [`du_kib`] once the broker has stopped allocating: two reads 500 ms
/// apart agree (at most 15 s). The broker creates and flushes its files
/// lazily; on a loaded machine a read taken right after a publish missed
/// files allocated for it, which then counted as growth (3.5 bytes of disk
/// per deferred byte instead of ~1).
async fn settled_du_kib(path: &std::path::Path) -> u64 {
    let mut last = du_kib(path);
    for _ in 0..30 {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let now = du_kib(path);
        if now == last {
            return now;
        }
        last = now;
    }
    last
}

/// The broker's disk per deferred byte: work items of a 3.9 MiB body
/// published as the endpoint publishes them, and the store's growth. The
/// figure is printed (docs/security.md quotes it); the bound only catches a
/// store that writes a message more than once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broker_disk_per_deferred_byte() {
    use sluice_deferral::endpoint::Publisher;
    use sluice_deferral::publisher::LitePublisher;
    let (redis, broker) = redis_and_broker().await;
    let conn = redis_connection(&redis);
    let publisher = LitePublisher::connect(&broker.namesrv_addr(), PARENT, GROUP, conn.clone())
        .await
        .unwrap();
    let topic = lite_topic_name("disk", "gpt-4o");
    let _: () = redis::cmd("SET")
        .arg(sluice_contract::keys::subscribed(&topic))
        .arg(1)
        .query_async(&mut conn.clone())
        .await
        .unwrap();
    let store = broker.dir().join("store");
    let work = sluice_testkit::stack::work_item("disk", "gpt-4o", "probe", 1);
    let body: serde_json::Value =
        serde_json::from_slice(&sluice_testkit::chat_of(BODY_BYTES)).unwrap();
    let mut published = 0u64;
    // One first message allocates the files; measure from there.
    let first = sluice_contract::WorkItem {
        body: body.clone(),
        ..work.clone()
    }
    .to_json();
    publisher
        .publish("disk", "gpt-4o", "first", first.into())
        .await
        .unwrap();
    let before = settled_du_kib(&store).await;
    let count = 40;
    for n in 0..count {
        let item = sluice_contract::WorkItem {
            req_id: format!("disk-{n}"),
            body: body.clone(),
            ..work.clone()
        }
        .to_json();
        published += item.len() as u64;
        publisher
            .publish("disk", "gpt-4o", &format!("disk-{n}"), item.into())
            .await
            .unwrap();
    }
    // Once the broker has flushed its commit log pages.
    let after = settled_du_kib(&store).await;
    let grown = (after.saturating_sub(before)) * 1024;
    let per_byte = grown as f64 / published as f64;
    println!(
        "broker store: {count} work items of {} bytes ({:.1} MiB) grew it by {:.1} MiB (du -sk {}): {per_byte:.3} bytes of disk per deferred byte",
        published / count,
        published as f64 / MIB as f64,
        grown as f64 / MIB as f64,
        store.display()
    );
    assert!(per_byte < 1.5, "{per_byte}");
}
