//! Failover under load, measured: sluice-rls decisions (the real limiter and
//! Redis store) for one busy tenant on a Redis Cluster (3 masters + 3
//! replicas) and on a Sentinel set (master, replica, 3 sentinels), while the
//! master holding that tenant's counters is SIGKILLed.
//!
//! Prints, per deployment: the time from the kill until decisions succeed
//! again, decisions that failed meanwhile (Envoy applies its failure mode to
//! them), and increments lost (acknowledged to a caller, but missing from the
//! promoted replica: Redis replicates asynchronously). That last figure bounds
//! over-admission: a lost increment is a request the window forgets.
//!
//! `cargo run -p sluice-bench --bin redis_failover [-- --seconds-before 3]`
//! (recovery is bound by Redis, not by this process: a debug build is enough)
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use redis::AsyncCommands;
use sluice_contract::now_ms;
use sluice_proto::pb::envoy::extensions::common::ratelimit::v3::{
    rate_limit_descriptor::Entry, RateLimitDescriptor,
};
use sluice_proto::pb::envoy::service::ratelimit::v3::RateLimitRequest;
use sluice_ratelimit::limiter::Limiter;
use sluice_ratelimit::metrics::Metrics;
use sluice_ratelimit::store::{counter_key, RedisStore, RedisStoreOptions};
use sluice_ratelimit::window::{Unit, Window};
use sluice_redis::{RedisClient, RedisOptions};
use sluice_testkit::redis_topologies::{RedisCluster, RedisSentinelSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const LIMITS: &str = r#"
domain: failover
descriptors:
  - key: tenant
    rate_limit: { unit: hour, requests_per_unit: 4000000000, name: tenant-rph }
"#;
const TENANT: &str = "busy";
const CALLERS: usize = 16;

fn request() -> RateLimitRequest {
    RateLimitRequest {
        domain: "failover".into(),
        descriptors: vec![RateLimitDescriptor {
            entries: vec![Entry {
                key: "tenant".into(),
                value: TENANT.into(),
            }],
            ..Default::default()
        }],
        hits_addend: 1,
    }
}

fn counter(now_ms: u64) -> String {
    counter_key(
        "failover",
        [("tenant", TENANT)],
        Unit::Hour,
        Window::containing(Unit::Hour, now_ms),
    )
}

struct Load {
    ok: AtomicU64,
    failed: AtomicU64,
    last_failure_ms: AtomicU64,
    stop: AtomicBool,
}

async fn drive(limiter: Arc<Limiter>, load: Arc<Load>, started: Instant) {
    while !load.stop.load(Ordering::Relaxed) {
        match limiter.should_rate_limit(&request()).await {
            Ok(_) => {
                load.ok.fetch_add(1, Ordering::Relaxed);
            }
            Err(_) => {
                load.failed.fetch_add(1, Ordering::Relaxed);
                load.last_failure_ms
                    .store(started.elapsed().as_millis() as u64, Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
    }
}

struct Figures {
    recovery: Duration,
    failed: u64,
    acknowledged: u64,
    counted: u64,
}

/// Runs the load against `url`, calls `kill` after `before`, and measures.
async fn measure(url: &str, before: Duration, kill: impl FnOnce()) -> Figures {
    let options = RedisOptions {
        connect_timeout_ms: 300,
        response_timeout_ms: 300,
        ..RedisOptions::from_url(url)
    };
    let store = RedisStore::new(&RedisStoreOptions {
        redis: options.clone(),
        connections: 2,
        timeout: Duration::from_millis(300),
        ..Default::default()
    })
    .unwrap();
    store.preload().await.unwrap();
    let limiter = sluice_testkit::stack::limiter(LIMITS, Arc::new(store), Metrics::new());
    let load = Arc::new(Load {
        ok: AtomicU64::new(0),
        failed: AtomicU64::new(0),
        last_failure_ms: AtomicU64::new(0),
        stop: AtomicBool::new(false),
    });
    let started = Instant::now();
    let callers: Vec<_> = (0..CALLERS)
        .map(|_| tokio::spawn(drive(limiter.clone(), load.clone(), started)))
        .collect();
    tokio::time::sleep(before).await;
    let killed_at = started.elapsed();
    kill();
    // Run on until decisions have succeeded for 2 s without a failure.
    loop {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let last_failure = Duration::from_millis(load.last_failure_ms.load(Ordering::Relaxed));
        if last_failure > killed_at && started.elapsed() > last_failure + Duration::from_secs(2) {
            break;
        }
        if started.elapsed() > killed_at + Duration::from_secs(30) {
            println!("  (no recovery within 30 s)");
            break;
        }
    }
    load.stop.store(true, Ordering::Relaxed);
    for caller in callers {
        let _ = caller.await;
    }
    let last_failure = Duration::from_millis(load.last_failure_ms.load(Ordering::Relaxed));
    let mut conn = RedisClient::new(&options).unwrap().connect().unwrap();
    let counted: u64 = conn.get(counter(now_ms())).await.unwrap_or(0);
    Figures {
        recovery: last_failure.saturating_sub(killed_at),
        failed: load.failed.load(Ordering::Relaxed),
        acknowledged: load.ok.load(Ordering::Relaxed),
        counted,
    }
}

fn report(name: &str, f: &Figures) {
    let lost = f.acknowledged.saturating_sub(f.counted);
    println!(
        "{name:<10} recovery {:>6.2} s   failed decisions {:>6}   acknowledged {:>8}   counted {:>8}   lost increments {:>5} ({:.3}%)",
        f.recovery.as_secs_f64(),
        f.failed,
        f.acknowledged,
        f.counted,
        lost,
        100.0 * lost as f64 / f.acknowledged.max(1) as f64
    );
}

#[derive(clap::Parser)]
#[command(about = "Decisions lost when a Redis master is SIGKILLed (Cluster, then Sentinel)")]
struct Args {
    /// Seconds of decisions before the master is killed.
    #[arg(long, default_value_t = 3)]
    seconds_before: u64,
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let before = Duration::from_secs(<Args as clap::Parser>::parse().seconds_before);
    println!(
        "{CALLERS} callers deciding for tenant {TENANT:?}; its master is SIGKILLed after {before:?}"
    );

    let mut cluster = RedisCluster::start(3, 1).unwrap();
    let url = cluster.url();
    let victim = cluster.master_of(&counter(now_ms())).unwrap();
    let figures = measure(&url, before, || cluster.kill(victim).unwrap()).await;
    report("cluster", &figures);

    let mut sentinel = RedisSentinelSet::start().unwrap();
    let url = sentinel.url();
    let figures = measure(&url, before, || {
        sentinel.kill_master().unwrap();
    })
    .await;
    report("sentinel", &figures);
}
