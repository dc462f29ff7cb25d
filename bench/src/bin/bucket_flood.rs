//! `cargo run -p sluice-bench --bin bucket_flood -- --help`
//!
//! A flood of deferred requests: one greedy tenant asking for
//! `GREEDY_MODELS` (40) models, then `FLOOD_TENANTS` (10,000) random tenants,
//! one model each, sent over loopback HTTP to a deferral endpoint started in this
//! process (real Redis, real broker, a real consumer `Runner` answering from
//! the simulated backend), with the bucket caps in place
//! (`FLOOD_MAX_BUCKETS`, `FLOOD_MAX_PER_TENANT`, `FLOOD_MAX_PER_MINUTE`;
//! the service's defaults unless set). The flood stops after all requests or
//! `FLOOD_SECS` (90), whichever comes first, and is aborted if `df /work`
//! shows less than 20 GB free. The consumer retires buckets idle for
//! `IDLE_SECS` (10) and deletes their queues at the broker.
//!
//! Prints before / during (end of flood) / after retirement: the broker's
//! store size (`du`), the broker's RSS, Redis `used_memory`, the consumer's
//! metric series (all, and per-bucket ones), and the requests answered,
//! refused by reason, or failed; and the store bytes per bucket created.
#![recursion_limit = "256"] // rocketmq-client futures are deeply nested

use anyhow::Context;
use clap::Parser;
use sluice_consumer::keys;
use sluice_consumer::Metrics;
use sluice_consumer::RunnerOptions;
use sluice_deferral::caps::{self, BucketCaps, CapLimits, CapsMetrics};
use sluice_deferral::endpoint::{router, EndpointMetrics, EndpointOptions};
use sluice_deferral::hub::{HubOptions, StreamHub};
use sluice_deferral::publisher::LitePublisher;
use sluice_testkit::stack::{
    redis_connection, start_broker, start_consumer, start_fast_llm_sim, unpaced, ConsumerSpec,
    GROUP, PARENT,
};
use sluice_testkit::{http_request, RedisServer, RocketMq};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[derive(Parser)]
#[command(about = "A flood of deferred requests against the bucket caps")]
struct Args {
    /// Random tenants, one model each.
    #[arg(long, env = "FLOOD_TENANTS", default_value_t = 10_000)]
    tenants: usize,
    /// Models the one greedy tenant asks for.
    #[arg(long, env = "GREEDY_MODELS", default_value_t = 40)]
    greedy_models: usize,
    /// The flood stops after this many seconds at the latest.
    #[arg(long, env = "FLOOD_SECS", default_value_t = 90)]
    flood_secs: u64,
    /// Requests in flight at once.
    #[arg(long, env = "FLOOD_CONCURRENCY", default_value_t = 32)]
    concurrency: usize,
    /// The consumer retires buckets idle this long.
    #[arg(long, env = "IDLE_SECS", default_value_t = 10)]
    idle_secs: u64,
    /// Bucket cap: buckets in all.
    #[arg(long, env = "FLOOD_MAX_BUCKETS", default_value_t = caps::DEFAULT_MAX_BUCKETS)]
    max_buckets: u64,
    /// Bucket cap: buckets per tenant.
    #[arg(long, env = "FLOOD_MAX_PER_TENANT", default_value_t = caps::DEFAULT_MAX_BUCKETS_PER_TENANT)]
    max_per_tenant: u64,
    /// Bucket cap: new buckets a minute.
    #[arg(long, env = "FLOOD_MAX_PER_MINUTE", default_value_t = caps::DEFAULT_MAX_NEW_BUCKETS_PER_MINUTE)]
    max_per_minute: u64,
}

/// The flood stops when the disk holding /work has less free space.
const MIN_FREE_BYTES: u64 = 20_000_000_000;

/// Bytes used under `path` (`du -sb`).
fn du_bytes(path: &Path) -> u64 {
    std::process::Command::new("du")
        .arg("-sB1")
        .arg(path)
        .output()
        .ok()
        .and_then(|o| {
            String::from_utf8_lossy(&o.stdout)
                .split_whitespace()
                .next()
                .and_then(|n| n.parse().ok())
        })
        .unwrap_or(0)
}

/// Free bytes on the file system of /work (`df`).
fn free_bytes() -> u64 {
    std::process::Command::new("df")
        .args(["-B1", "--output=avail", "/work"])
        .output()
        .ok()
        .and_then(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .nth(1)
                .and_then(|l| l.trim().parse().ok())
        })
        .unwrap_or(0)
}

/// RSS (KiB) of the broker whose command line names `config`.
fn broker_rss_kib(config: &Path) -> u64 {
    let needle = config.to_string_lossy().into_owned();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return 0;
    };
    for entry in entries.flatten() {
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        let cmdline = String::from_utf8_lossy(&cmdline);
        if cmdline.contains("rocketmq-broker-rust") && cmdline.contains(&needle) {
            let status = std::fs::read_to_string(entry.path().join("status")).unwrap_or_default();
            return status
                .lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|n| n.parse().ok())
                .unwrap_or(0);
        }
    }
    0
}

async fn redis_used_memory(conn: &mut sluice_redis::RedisConn) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("memory")
        .query_async(conn)
        .await
        .unwrap_or_default();
    sluice_testkit::redis_info_field(&info, "used_memory").unwrap_or(0)
}

async fn known_buckets(conn: &mut sluice_redis::RedisConn) -> u64 {
    redis::cmd("SCARD")
        .arg(keys::BUCKETS)
        .query_async(conn)
        .await
        .unwrap_or(0)
}

/// Bytes under the store's LMQ queue directories (one per LiteTopic), and
/// how many there are.
fn lmq_queues(store: &Path) -> (u64, usize) {
    let Ok(entries) = std::fs::read_dir(store.join("consumequeue")) else {
        return (0, 0);
    };
    let lmq: Vec<_> = entries
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("%LMQ%"))
        .map(|e| e.path())
        .collect();
    (lmq.iter().map(|p| du_bytes(p)).sum(), lmq.len())
}

struct Snapshot {
    store: u64,
    lmq_bytes: u64,
    lmq_queues: usize,
    broker_rss_kib: u64,
    redis: u64,
    series: usize,
    bucket_series: usize,
    buckets: u64,
}

impl std::fmt::Display for Snapshot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "store {:>8.1} MiB (LMQ queues: {} in {:.1} MiB) | broker RSS {:>6.1} MiB | Redis used_memory {:>6.2} MiB | consumer metric series {:>5} (per-bucket {:>5}) | buckets known {:>5}",
            self.store as f64 / 1048576.0,
            self.lmq_queues,
            self.lmq_bytes as f64 / 1048576.0,
            self.broker_rss_kib as f64 / 1024.0,
            self.redis as f64 / 1048576.0,
            self.series,
            self.bucket_series,
            self.buckets
        )
    }
}

struct Stack {
    broker: RocketMq,
    conn: sluice_redis::RedisConn,
    metrics: Arc<Metrics>,
}

impl Stack {
    async fn snapshot(&self) -> Snapshot {
        let mut conn = self.conn.clone();
        let text = self.metrics.encode();
        let series: Vec<&str> = text
            .lines()
            .filter(|l| !l.starts_with('#') && !l.is_empty())
            .collect();
        let store = self.broker.dir().join("store");
        let (lmq_bytes, lmq_queues) = lmq_queues(&store);
        Snapshot {
            store: du_bytes(&store),
            lmq_bytes,
            lmq_queues,
            broker_rss_kib: broker_rss_kib(&self.broker.dir().join("broker.toml")),
            redis: redis_used_memory(&mut conn).await,
            series: series.len(),
            bucket_series: series.iter().filter(|l| l.contains("bucket=\"")).count(),
            buckets: known_buckets(&mut conn).await,
        }
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let Args {
        tenants,
        greedy_models,
        flood_secs,
        concurrency,
        idle_secs,
        ..
    } = args;
    let limits = CapLimits {
        max_buckets: args.max_buckets,
        max_buckets_per_tenant: args.max_per_tenant,
        max_new_buckets_per_minute: args.max_per_minute,
        ..Default::default()
    };
    anyhow::ensure!(
        free_bytes() >= MIN_FREE_BYTES,
        "less than 20 GB free on /work: not flooding"
    );
    println!(
        "caps: {} buckets, {} per tenant, {} new per minute; {tenants} tenants + 1 × {greedy_models} models, {concurrency} at once, ≤ {flood_secs} s",
        limits.max_buckets, limits.max_buckets_per_tenant, limits.max_new_buckets_per_minute
    );

    let redis_server = RedisServer::start()?;
    let broker = start_broker().await;
    let conn = redis_connection(&redis_server);
    let backend = start_fast_llm_sim(5).await;

    // The endpoint's publisher first: it creates the parent topic and group.
    let caps_metrics = CapsMetrics::default();
    let publisher = LitePublisher::connect(&broker.namesrv_addr(), PARENT, GROUP, conn.clone())
        .await
        .map_err(|e| anyhow::anyhow!("publisher: {e}"))?
        .with_caps(BucketCaps::new(limits, caps_metrics.clone())?);

    // The consumer: answers every request, retires idle buckets, reclaims.
    let flood_consumer = ConsumerSpec {
        pacing: unpaced(),
        options: RunnerOptions {
            discovery_interval: Duration::from_millis(200),
            idle_ttl: Duration::from_secs(idle_secs),
            retire_interval: Duration::from_secs(1),
            ..Default::default()
        },
        ..ConsumerSpec::new("flood-consumer")
    };
    let consumer = start_consumer(&conn, &broker, backend, flood_consumer).await;
    let metrics = consumer.metrics.clone();

    // The endpoint, as sluice-rls serves it.
    let hub = StreamHub::start(
        sluice_redis::RedisClient::open(&redis_server.url())?,
        HubOptions::default(),
    )?;
    let app = router(
        hub,
        Arc::new(publisher),
        conn.clone(),
        EndpointOptions {
            timeout: Duration::from_secs(30),
            secrets: vec![sluice_testkit::example_deferral_secret()],
            ..Default::default()
        },
        Arc::new(EndpointMetrics::default()),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let endpoint = listener.local_addr()?;
    tokio::spawn(async move { axum::serve(listener, app).await });

    let stack = Stack {
        broker,
        conn: conn.clone(),
        metrics: metrics.clone(),
    };
    let before = stack.snapshot().await;
    println!("before: {before}");

    // The greedy tenant's models first (so they meet its own cap, not the
    // rate cap), then random tenants, one model each.
    let seed = sluice_contract::now_ms();
    let mut requests: Vec<(String, String)> = (0..greedy_models)
        .map(|i| ("greedy".to_string(), format!("model-{i}")))
        .collect();
    requests.extend((0..tenants).map(|i| {
        let tenant = seed.wrapping_mul(31).wrapping_add(i as u64 * 2_654_435_761);
        (format!("t{tenant:016x}"), "gpt-4o".to_string())
    }));
    let outcomes: Arc<Mutex<BTreeMap<String, u64>>> = Arc::default();
    let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let requests = Arc::new(requests);
    let deadline = Instant::now() + Duration::from_secs(flood_secs);
    let aborted = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let disk_watch = {
        let aborted = aborted.clone();
        tokio::spawn(async move {
            while Instant::now() < deadline {
                if free_bytes() < MIN_FREE_BYTES {
                    aborted.store(true, std::sync::atomic::Ordering::SeqCst);
                    eprintln!("ABORT: less than 20 GB free on /work");
                    return;
                }
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        })
    };
    let started = Instant::now();
    let mut workers = Vec::new();
    for _ in 0..concurrency {
        let (requests, next, outcomes, aborted) = (
            requests.clone(),
            next.clone(),
            outcomes.clone(),
            aborted.clone(),
        );
        workers.push(tokio::task::spawn_blocking(move || loop {
            if Instant::now() >= deadline || aborted.load(std::sync::atomic::Ordering::SeqCst) {
                return;
            }
            let i = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let Some((tenant, model)) = requests.get(i) else {
                return;
            };
            let req_id = format!("flood-{i}");
            let body =
                format!(r#"{{"model":"{model}","messages":[{{"role":"user","content":"hi"}}]}}"#);
            let signed = sluice_testkit::deferral_headers(
                &req_id,
                tenant,
                model,
                "normal",
                0,
                body.as_bytes(),
            );
            let headers: Vec<(&str, &str)> = signed.iter().map(|(k, v)| (*k, v.as_str())).collect();
            let outcome = match http_request(
                endpoint,
                "POST",
                "/v1/chat/completions",
                &headers,
                body.as_bytes(),
            ) {
                Ok(response) if response.status == 200 => "answered".to_string(),
                Ok(response) => {
                    let code = serde_json::from_str::<serde_json::Value>(&response.body)
                        .ok()
                        .and_then(|b| b["error"]["code"].as_str().map(str::to_string))
                        .unwrap_or_default();
                    format!("{} {code}", response.status)
                }
                Err(error) => format!("transport error: {error}"),
            };
            if let Ok(mut outcomes) = outcomes.lock() {
                *outcomes.entry(outcome).or_default() += 1;
            }
        }));
    }
    for worker in workers {
        worker.await?;
    }
    disk_watch.abort();
    let flood_took = started.elapsed();
    let sent = next
        .load(std::sync::atomic::Ordering::SeqCst)
        .min(requests.len());
    let during = stack.snapshot().await;
    println!(
        "during (end of flood, {:.1} s, {sent} of {} requests sent): {during}",
        flood_took.as_secs_f64(),
        requests.len()
    );
    let created = caps_metrics.created.get();
    for (outcome, count) in outcomes.lock().map(|o| o.clone()).unwrap_or_default() {
        println!("  {outcome:<32} {count:>6}");
    }
    println!(
        "  buckets created {created}; disk per bucket (LMQ queue directories): {:.1} KiB; store growth / buckets: {:.1} KiB",
        during.lmq_bytes as f64 / during.lmq_queues.max(1) as f64 / 1024.0,
        (during.store.saturating_sub(before.store)) as f64 / created.max(1) as f64 / 1024.0
    );

    // After retirement: every bucket idle, retired and reclaimed.
    let wait_until = Instant::now() + Duration::from_secs(idle_secs + 120);
    let mut redis = conn.clone();
    while known_buckets(&mut redis).await > 0 && Instant::now() < wait_until {
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let after = stack.snapshot().await;
    println!(
        "after retirement ({} retired, {} reclaimed at the broker): {after}",
        metrics.group.buckets_retired.get(),
        metrics.group.buckets_reclaimed.get()
    );
    let per_tenant: u64 = redis::cmd("HLEN")
        .arg(keys::TENANT_BUCKET_COUNTS)
        .query_async(&mut redis)
        .await
        .context("HLEN")?;
    println!("  tenants still counted against the per-tenant cap: {per_tenant}");

    let _ = tokio::time::timeout(Duration::from_secs(40), consumer.stop()).await;
    Ok(())
}
