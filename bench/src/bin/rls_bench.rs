//! `sluice-rls-bench`: ShouldRateLimit throughput and latency over real gRPC,
//! side by side with two ceilings measured in the same run:
//!
//! * `noop`   — an RLS that answers OK without touching any store (the gRPC floor);
//! * `redis-benchmark` — Redis running the same decision script with the same
//!   pipelining depth, without Sluice in front.
//!
//! Each store is measured closed-loop at full speed, then open-loop at 70 % of
//! that rate for the latency target. Figures only; nothing is asserted.

use anyhow::{bail, Context};
use clap::Parser;
use hdrhistogram::Histogram;
use sluice_admission::descriptors::ASKED_AT_METADATA;
use sluice_proto::pb::envoy::extensions::common::ratelimit::v3::{
    rate_limit_descriptor::Entry, RateLimitDescriptor,
};
use sluice_proto::pb::envoy::service::ratelimit::v3::rate_limit_response::{
    Code, DescriptorStatus,
};
use sluice_proto::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use sluice_proto::pb::envoy::service::ratelimit::v3::rate_limit_service_server::{
    RateLimitService, RateLimitServiceServer,
};
use sluice_proto::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use sluice_proto::pb::google::protobuf::UInt64Value;
use sluice_ratelimit::config::LimitsConfig;
use sluice_ratelimit::guard::CallGuard;
use sluice_ratelimit::limiter::{Limiter, SystemClock};
use sluice_ratelimit::metrics::Metrics;
use sluice_ratelimit::service::RlsService;
use sluice_ratelimit::store::{
    scripts as scripts_source, CounterStore, CountingMode, LocalCacheStore, MemoryStore,
    RedisStore, RedisStoreOptions,
};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::net::TcpListener;
use tonic::transport::{Channel, Endpoint};

// glibc's malloc serialises on arena locks under many small, short-lived
// allocations (h2 frames, protobuf messages); mimalloc does not.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(name = "sluice-rls-bench", about = "Benchmark sluice-rls decisions over gRPC")]
struct Args {
    /// Calls in flight at once.
    #[arg(long, default_value_t = 64)]
    concurrency: usize,
    /// HTTP/2 connections the calls are spread over.
    #[arg(long, default_value_t = 4)]
    connections: usize,
    /// Measured seconds per phase (after a 1 s warm-up).
    #[arg(long, default_value_t = 5)]
    seconds: u64,
    /// Which targets: noop, memory, redis, redis-per-call (the Redis store
    /// with one decision per script call, as before decisions shared
    /// calls), redis-over (every caller over its limit), redis-over-cache
    /// (the same with the over-limit local cache) (comma separated).
    #[arg(long, value_delimiter = ',', default_value = "noop,memory,redis")]
    targets: Vec<String>,
    /// Use this Redis instead of starting a private redis-server.
    #[arg(long)]
    redis_url: Option<String>,
    /// Multiplexed Redis connections of the Redis store.
    #[arg(long, default_value_t = 4)]
    redis_connections: usize,
    /// Most decisions one Redis script call carries (1: a call per
    /// decision, as before decisions shared calls).
    #[arg(long, default_value_t = 32)]
    redis_max_decisions_per_call: usize,
    /// Open-loop load as a fraction of each target's measured maximum.
    #[arg(long, default_value_t = 0.7)]
    open_loop_fraction: f64,
    /// Call the services directly instead of over gRPC (targets noop and
    /// memory only): what a decision costs the service itself, without the
    /// transport, which is most of the CPU of a gRPC decision and the same
    /// for every target.
    #[arg(long)]
    in_process: bool,
    /// Install the subscriber sluice-rls installs (logs at `RUST_LOG`,
    /// default info, to stderr), so that the decisions' spans cost what
    /// they cost in the service; without it no span is made.
    #[arg(long)]
    logs: bool,
    /// Run the targets this many times in turn; each target's rate is
    /// compared with the noop rate of its own round, and the summary gives
    /// the median and range of those ratios (this machine's speed drifts
    /// between rounds more than the stores differ).
    #[arg(long, default_value_t = 1)]
    rounds: usize,
}

/// Domain `domain`: requests an hour per tenant and tokens an hour per
/// tenant × model.
fn limits(domain: &str, tenant_rph: u64, model_tph: u64) -> String {
    format!(
        r#"
domain: {domain}
descriptors:
  - key: tenant
    rate_limit: {{ unit: hour, requests_per_unit: {tenant_rph}, name: tenant-rph }}
    descriptors:
      - key: model
        rate_limit: {{ unit: hour, requests_per_unit: {model_tph}, name: tenant-model-tph }}
"#
    )
}

/// A typical Sluice decision: requests and tokens of one tenant × model.
fn request(domain: &str, i: usize) -> RateLimitRequest {
    let tenant = format!("tenant-{}", i % 100);
    let entry = |k: &str, v: &str| Entry {
        key: k.into(),
        value: v.into(),
    };
    RateLimitRequest {
        domain: domain.into(),
        descriptors: vec![
            RateLimitDescriptor {
                entries: vec![entry("tenant", &tenant)],
                ..Default::default()
            },
            RateLimitDescriptor {
                entries: vec![entry("tenant", &tenant), entry("model", "gpt-4o")],
                hits_addend: Some(UInt64Value { value: 700 }),
                ..Default::default()
            },
        ],
        hits_addend: 1,
    }
}

/// As Sluice's filter sends it: with its clock when it asked.
fn from_filter(request: RateLimitRequest) -> tonic::Request<RateLimitRequest> {
    let mut request = tonic::Request::new(request);
    if let Ok(value) = sluice_contract::now_ms().to_string().parse() {
        request.metadata_mut().insert(ASKED_AT_METADATA, value);
    }
    request
}

/// The gRPC floor: same service and encoding, no store.
struct NoopRls;

#[tonic::async_trait]
impl RateLimitService for NoopRls {
    async fn should_rate_limit(
        &self,
        request: tonic::Request<RateLimitRequest>,
    ) -> Result<tonic::Response<RateLimitResponse>, tonic::Status> {
        let statuses = request
            .get_ref()
            .descriptors
            .iter()
            .map(|_| DescriptorStatus {
                code: Code::Ok as i32,
                ..Default::default()
            })
            .collect();
        Ok(tonic::Response::new(RateLimitResponse {
            overall_code: Code::Ok as i32,
            statuses,
            ..Default::default()
        }))
    }
}

/// `--in-process`: `concurrency` tasks call `service` back to back for
/// `seconds` (after a 1 s warm-up); decisions/s and CPU ns per decision.
async fn drive_in_process(
    service: Arc<dyn RateLimitService>,
    args: &Args,
    domain: &'static str,
) -> (f64, f64) {
    let run = |seconds: u64| {
        let tasks: Vec<_> = (0..args.concurrency)
            .map(|worker| {
                let service = service.clone();
                tokio::spawn(async move {
                    let end = Instant::now() + Duration::from_secs(seconds);
                    let (mut calls, mut i) = (0u64, worker);
                    while Instant::now() < end {
                        for _ in 0..16 {
                            let _ = service
                                .should_rate_limit(from_filter(request(domain, i)))
                                .await;
                            i += 64;
                        }
                        calls += 16;
                        // Let the other tasks of this worker thread run.
                        tokio::task::yield_now().await;
                    }
                    calls
                })
            })
            .collect();
        async move {
            let mut calls = 0;
            for task in tasks {
                calls += task.await.unwrap_or(0);
            }
            calls
        }
    };
    run(1).await;
    let (started, cpu) = (Instant::now(), cpu_seconds(None));
    let calls = run(args.seconds).await.max(1);
    let cpu_ns = cpu
        .and_then(|before| Some((cpu_seconds(None)? - before) * 1e9 / calls as f64))
        .unwrap_or(f64::NAN);
    (calls as f64 / started.elapsed().as_secs_f64(), cpu_ns)
}

/// `--in-process`: noop and memory in turn, `rounds` times.
async fn in_process(
    args: &Args,
    config: impl Fn() -> Result<LimitsConfig, sluice_ratelimit::config::ConfigError>,
) -> anyhow::Result<()> {
    println!(
        "{:<10} {:>12} {:>14}",
        "target", "decisions/s", "cpu ns/decision"
    );
    let mut extra = Vec::new();
    for round in 1..=args.rounds.max(1) {
        println!("-- round {round}");
        let noop: Arc<dyn RateLimitService> = Arc::new(NoopRls);
        let limiter = Arc::new(Limiter::new(
            config()?,
            Arc::new(MemoryStore::new()),
            CountingMode::AllOrNothing,
            Arc::new(SystemClock),
            Arc::new(Metrics::new()),
        ));
        let memory: Arc<dyn RateLimitService> =
            Arc::new(RlsService::new(limiter, CallGuard::default()));
        let mut cpu = Vec::new();
        for (name, service) in [("noop", noop), ("memory", memory)] {
            if args.targets.iter().any(|t| t == name) {
                let (rate, cpu_ns) = drive_in_process(service, args, "bench").await;
                println!("{name:<10} {rate:>12.0} {cpu_ns:>14.0}");
                cpu.push(cpu_ns);
            }
        }
        if let [noop, memory] = cpu[..] {
            extra.push(memory - noop);
        }
    }
    extra.sort_by(f64::total_cmp);
    if extra.is_empty() {
        return Ok(());
    }
    println!(
        "\nmemory's own cost, ns per decision over noop's: median {:.0} (min {:.0}, max {:.0})",
        extra[extra.len() / 2],
        extra[0],
        extra[extra.len() - 1]
    );
    Ok(())
}

struct Figures {
    rate: f64,
    p50: f64,
    p99: f64,
    p999: f64,
    errors: u64,
    /// Open loop: share of calls sent over 2 ms behind schedule.
    late_percent: f64,
    /// CPU time per decision of this process (client and service) and of
    /// the private redis-server, in µs, over the measured run.
    cpu_us: f64,
    redis_cpu_us: Option<f64>,
}

/// CPU seconds (user + system) process `pid` has used: fields 14 and 15
/// of /proc/<pid>/stat, in clock ticks (100 per second on Linux).
fn cpu_seconds(pid: Option<u32>) -> Option<f64> {
    let path = match pid {
        Some(pid) => format!("/proc/{pid}/stat"),
        None => "/proc/self/stat".into(),
    };
    let stat = std::fs::read_to_string(path).ok()?;
    // The command name (field 2) may hold spaces: count from after its ')'.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks = fields.get(11)?.parse::<f64>().ok()? + fields.get(12)?.parse::<f64>().ok()?;
    Some(ticks / 100.0)
}

async fn serve<S>(service: RateLimitServiceServer<S>) -> anyhow::Result<SocketAddr>
where
    S: RateLimitService,
{
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(service)
            .serve_with_incoming(sluice_ratelimit::server::nodelay_incoming(listener)),
    );
    Ok(addr)
}

async fn channels(addr: SocketAddr, n: usize) -> anyhow::Result<Vec<Channel>> {
    let mut out = Vec::new();
    for _ in 0..n.max(1) {
        out.push(
            Endpoint::from_shared(format!("http://{addr}"))?
                .tcp_nodelay(true)
                .connect()
                .await?,
        );
    }
    Ok(out)
}

/// `rate == None`: closed loop, each worker calls back to back.
/// `rate == Some(r)`: open loop, r calls/s in total. Latency is measured from
/// the actual send; sends that start well behind schedule are reported as
/// `late`, so a client that cannot keep up shows instead of hiding server stalls.
async fn drive(
    channels: &[Channel],
    args: &Args,
    domain: &'static str,
    rate: Option<f64>,
    redis_pid: Option<u32>,
) -> Figures {
    let run = |seconds: u64, record: bool| {
        let mut tasks = Vec::new();
        for worker in 0..args.concurrency {
            let mut client = RateLimitServiceClient::new(channels[worker % channels.len()].clone());
            let interval = rate.map(|r| Duration::from_secs_f64(args.concurrency as f64 / r));
            tasks.push(tokio::spawn(async move {
                let mut histogram = Histogram::<u64>::new(3).unwrap_or_else(|_| unreachable!());
                let (mut calls, mut errors, mut late) = (0u64, 0u64, 0u64);
                let start = Instant::now();
                let end = start + Duration::from_secs(seconds);
                // Spread open-loop workers over one interval.
                let mut next = start
                    + interval
                        .map(|i| i.mul_f64(worker as f64 / 64.0 % 1.0))
                        .unwrap_or_default();
                let mut i = worker;
                while Instant::now() < end {
                    if let Some(interval) = interval {
                        tokio::time::sleep_until(next.into()).await;
                        // Tokio's timer has 1 ms granularity: waking up to 2 ms
                        // late is the client, not the server. Later than that
                        // means the client fell behind its schedule: counted.
                        late += u64::from(next.elapsed() > Duration::from_millis(2));
                        next += interval;
                    }
                    let sent = Instant::now();
                    let ok = client
                        .should_rate_limit(from_filter(request(domain, i)))
                        .await
                        .is_ok();
                    let micros = sent.elapsed().as_micros() as u64;
                    if record {
                        let _ = histogram.record(micros.max(1));
                    }
                    calls += 1;
                    errors += u64::from(!ok);
                    i += 64;
                }
                (histogram, calls, errors, late)
            }));
        }
        async move {
            let mut total = Histogram::<u64>::new(3).unwrap_or_else(|_| unreachable!());
            let (mut calls, mut errors, mut late) = (0, 0, 0);
            for task in tasks {
                if let Ok((h, c, e, l)) = task.await {
                    let _ = total.add(&h);
                    calls += c;
                    errors += e;
                    late += l;
                }
            }
            (total, calls, errors, late)
        }
    };
    run(1, false).await;
    let started = Instant::now();
    let (cpu, redis_cpu) = (
        cpu_seconds(None),
        redis_pid.and_then(|p| cpu_seconds(Some(p))),
    );
    let (histogram, calls, errors, late) = run(args.seconds, true).await;
    let elapsed = started.elapsed().as_secs_f64();
    let per_call =
        |before: Option<f64>, pid| Some((cpu_seconds(pid)? - before?) * 1e6 / calls.max(1) as f64);
    let cpu_us = per_call(cpu, None).unwrap_or(f64::NAN);
    let redis_cpu_us = redis_pid.and_then(|pid| per_call(redis_cpu, Some(pid)));
    let ms = |q: f64| histogram.value_at_quantile(q) as f64 / 1000.0;
    Figures {
        cpu_us,
        redis_cpu_us,
        rate: calls as f64 / elapsed,
        p50: ms(0.5),
        p99: ms(0.99),
        p999: ms(0.999),
        errors,
        late_percent: 100.0 * late as f64 / calls.max(1) as f64,
    }
}

struct PrivateRedis {
    child: Child,
    _dir: tempfile_dir::TempDir,
    url: String,
    port: u16,
}

mod tempfile_dir {
    /// A scratch directory removed on drop (std only, to keep the bench's deps small).
    pub struct TempDir(pub std::path::PathBuf);
    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

impl Drop for PrivateRedis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_redis() -> anyhow::Result<PrivateRedis> {
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let dir = std::env::temp_dir().join(format!("sluice-bench-redis-{port}"));
    std::fs::create_dir_all(&dir)?;
    let child = Command::new("redis-server")
        .args([
            "--port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
        ])
        .arg("--dir")
        .arg(&dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .context(
            "cannot start redis-server (install it with the set-up command or pass --redis-url)",
        )?;
    let redis = PrivateRedis {
        child,
        _dir: tempfile_dir::TempDir(dir),
        url: format!("redis://127.0.0.1:{port}"),
        port,
    };
    for _ in 0..200 {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return Ok(redis);
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    bail!("redis-server did not come up on port {port}")
}

/// Per target: the median, lowest and highest of its per-round ratios to
/// the same round's noop rate.
fn print_ratio_summary(targets: &[String], ratios: &[(String, f64)]) {
    println!(
        "\n{:<28} {:>8} {:>8} {:>8} {:>7}",
        "vs noop, per round", "median", "min", "max", "rounds"
    );
    for target in targets.iter().filter(|t| *t != "noop") {
        let mut mine: Vec<f64> = ratios
            .iter()
            .filter(|(t, _)| t == target)
            .map(|(_, r)| *r)
            .collect();
        if mine.is_empty() {
            continue;
        }
        mine.sort_by(f64::total_cmp);
        let median = if mine.len() % 2 == 1 {
            mine[mine.len() / 2]
        } else {
            (mine[mine.len() / 2 - 1] + mine[mine.len() / 2]) / 2.0
        };
        println!(
            "{:<28} {:>7.0}% {:>7.0}% {:>7.0}% {:>7}",
            target,
            100.0 * median,
            100.0 * mine[0],
            100.0 * mine[mine.len() - 1],
            mine.len()
        );
    }
}

/// Redis alone running the decision script at the store's pipelining depth.
fn redis_benchmark(port: u16, args: &Args, sha: &str) -> anyhow::Result<f64> {
    let connections = args.redis_connections.max(1);
    let pipeline = (args.concurrency / connections).max(1);
    let requests = 400_000;
    let output = Command::new("redis-benchmark")
        .args([
            "-p",
            &port.to_string(),
            "-c",
            &connections.to_string(),
            "-P",
            &pipeline.to_string(),
        ])
        .args(["-n", &requests.to_string(), "-r", "100", "-q"])
        .args([
            "EVALSHA",
            sha,
            "2",
            "sluice:{bench}:hour:0:tenant=__rand_int__",
            "sluice:{bench}:hour:0:tenant=__rand_int__/model=m",
        ])
        // One decision (the script's call format: decisions, then per
        // decision its mode and key count, then four values per key).
        .args([
            "1",
            "1",
            "2",
            "1",
            "4000000000",
            "1",
            "3600",
            "700",
            "4000000000",
            "1",
            "3600",
        ])
        .output()
        .context("cannot run redis-benchmark")?;
    let text = String::from_utf8_lossy(&output.stdout);
    // "EVALSHA ...: 123456.79 requests per second, p50=0.391 msec"
    let rate = text
        .rsplit(':')
        .find_map(|part| {
            part.trim()
                .split(' ')
                .next()
                .and_then(|n| n.parse::<f64>().ok())
        })
        .with_context(|| format!("unexpected redis-benchmark output: {text}"))?;
    Ok(rate)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let config = || {
        LimitsConfig::from_sources(&[
            (
                PathBuf::from("bench.yaml"),
                limits("bench", 4_000_000_000, 4_000_000_000),
            ),
            // Every tenant over after its first request (1 request, 700
            // tokens an hour): the "many callers are over" load the local
            // cache is for.
            (
                PathBuf::from("bench-over.yaml"),
                limits("bench-over", 1, 700),
            ),
        ])
    };
    let _traces = if args.logs {
        Some(sluice_runtime::init_telemetry(
            sluice_runtime::LogFormat::Text,
            &sluice_runtime::TraceArgs::default(),
            "sluice-rls-bench",
            sluice_contract::TRACE_TARGET,
        )?)
    } else {
        None
    };
    if args.in_process {
        return in_process(&args, config).await;
    }
    let mut redis_guard: Option<PrivateRedis> = None;
    println!(
        "sluice-rls-bench: concurrency {} over {} connection(s), {} s per phase, {} CPU(s)",
        args.concurrency,
        args.connections,
        args.seconds,
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
    );
    println!();
    println!(
        "{:<28} {:>12} {:>8} {:>8} {:>9} {:>8} {:>7} {:>6} {:>7} {:>8}",
        "target",
        "decisions/s",
        "p50 ms",
        "p99 ms",
        "p99.9 ms",
        "vs noop",
        "errors",
        "late",
        "cpu µs",
        "redis µs"
    );
    let mut noop_rate = None;
    let mut results = Vec::new();
    // (target, its max rate ÷ the same round's noop max rate) per round.
    let mut ratios: Vec<(String, f64)> = Vec::new();
    let rounds = args.rounds.max(1);
    let planned: Vec<&String> = (0..rounds).flat_map(|_| args.targets.iter()).collect();
    for (index, target) in planned.into_iter().enumerate() {
        if index % args.targets.len().max(1) == 0 && rounds > 1 {
            println!("-- round {}", 1 + index / args.targets.len().max(1));
        }
        let addr = match target.as_str() {
            "noop" => serve(RateLimitServiceServer::new(NoopRls)).await?,
            "memory" | "redis" | "redis-per-call" | "redis-over" | "redis-over-cache" => {
                let store: Arc<dyn CounterStore> = if target == "memory" {
                    Arc::new(MemoryStore::new())
                } else {
                    let url = match (&args.redis_url, &redis_guard) {
                        (Some(url), _) => url.clone(),
                        (None, Some(redis)) => redis.url.clone(),
                        (None, None) => {
                            let redis = start_redis()?;
                            let url = redis.url.clone();
                            redis_guard = Some(redis);
                            url
                        }
                    };
                    let max_decisions_per_call = if target == "redis-per-call" {
                        1
                    } else {
                        args.redis_max_decisions_per_call
                    };
                    let store = RedisStore::new(&RedisStoreOptions {
                        redis: sluice_redis::RedisOptions::from_url(url),
                        connections: args.redis_connections,
                        timeout: Duration::from_secs(1),
                        max_decisions_per_call,
                    })?;
                    store.preload().await?;
                    Arc::new(store)
                };
                let metrics = Arc::new(Metrics::new());
                let store: Arc<dyn CounterStore> = if target == "redis-over-cache" {
                    Arc::new(LocalCacheStore::new(
                        store,
                        1 << 20,
                        metrics.local_cache_answers.clone(),
                    ))
                } else {
                    store
                };
                let limiter = Arc::new(Limiter::new(
                    config()?,
                    store,
                    CountingMode::AllOrNothing,
                    Arc::new(SystemClock),
                    metrics,
                ));
                serve(RlsService::new(limiter, CallGuard::default()).into_server()).await?
            }
            other => bail!(
                "unknown target '{other}' (noop, memory, redis, redis-per-call, redis-over, redis-over-cache)"
            ),
        };
        let chans = channels(addr, args.connections).await?;
        let domain = if target.starts_with("redis-over") {
            "bench-over"
        } else {
            "bench"
        };
        let redis_pid = redis_guard
            .as_ref()
            .filter(|_| target.starts_with("redis"))
            .map(|r| r.child.id());
        let max = drive(&chans, &args, domain, None, redis_pid).await;
        if target == "noop" {
            noop_rate = Some(max.rate);
        }
        let ratio = noop_rate
            .map(|n| format!("{:.0}%", 100.0 * max.rate / n))
            .unwrap_or_else(|| "-".into());
        // CPU per decision: this process (client and service together) and
        // the private redis-server, over the closed-loop run.
        println!(
            "{:<28} {:>12.0} {:>8.3} {:>8.3} {:>9.3} {:>8} {:>7} {:>6} {:>7.1} {:>8}",
            format!("{target} (max)"),
            max.rate,
            max.p50,
            max.p99,
            max.p999,
            ratio,
            max.errors,
            "",
            max.cpu_us,
            max.redis_cpu_us
                .map(|us| format!("{us:.1}"))
                .unwrap_or_else(|| "-".into())
        );
        let target_rate = max.rate * args.open_loop_fraction;
        let open = drive(&chans, &args, domain, Some(target_rate), None).await;
        println!(
            "{:<28} {:>12.0} {:>8.3} {:>8.3} {:>9.3} {:>8} {:>7} {:>5.1}%",
            format!("{target} (open @{:.0}%)", 100.0 * args.open_loop_fraction),
            open.rate,
            open.p50,
            open.p99,
            open.p999,
            "",
            open.errors,
            open.late_percent
        );
        if let Some(noop) = noop_rate.filter(|_| target != "noop") {
            ratios.push((target.clone(), max.rate / noop));
        }
        results.push((target.clone(), max.rate));
    }
    if rounds > 1 {
        print_ratio_summary(&args.targets, &ratios);
    }
    if let Some(redis) = &redis_guard {
        let sha = {
            let client = redis::Client::open(redis.url.as_str())?;
            let mut connection = client.get_multiplexed_async_connection().await?;
            redis::Script::new(scripts_source::DECIDE)
                .load_async(&mut connection)
                .await?
        };
        match redis_benchmark(redis.port, &args, &sha) {
            Ok(rate) => {
                let ratio = noop_rate
                    .map(|n| format!("{:.0}%", 100.0 * rate / n))
                    .unwrap_or_else(|| "-".into());
                println!(
                    "{:<28} {:>12.0} {:>8} {:>8} {:>9} {:>8} {:>7}",
                    "redis-benchmark (raw)", rate, "", "", "", ratio, ""
                );
                if let Some((_, redis_rate)) = results.iter().find(|(t, _)| t == "redis") {
                    println!(
                        "\nRedis store reaches {:.0}% of raw Redis running the same script.",
                        100.0 * redis_rate / rate
                    );
                }
            }
            Err(error) => println!("redis-benchmark skipped: {error:#}"),
        }
    }
    Ok(())
}
