//! `cargo run --release -p sluice-bench --bin consumer_bench -- --help`
//!
//! The consumer's pop loop on real parts: a real RocketMQ broker (LiteTopics),
//! a real `redis-server`, the real `Runner` of `sluice-consumer`, and the
//! simulated OpenAI backend (`sluice-llm-sim`, `SimConfig::fast()` unless
//! `SIM_TPS` / `SIM_FIRST_TOKEN_MS` say otherwise). Every section starts a
//! fresh broker and Redis, queues its whole workload first (as after a burst
//! of deferrals), then starts the consumer: the clock starts then.
//!
//! Sections (`--sections` or `SECTIONS=pacing,isolation,scale,subscriptions`,
//! default all; each knob below is a flag too, `--help` lists them):
//!
//! 1. `pacing`: buckets at 2, 5, 20 requests/s and one limited to 4 × T
//!    tokens/s, where T is what the backend reports for one message (the
//!    consumer corrects each message's debt to it), i.e. 4 messages/s,
//!    `PACING_SECS` (20) of work each.
//!    Admit time = the moment the backend received the call (an axum layer
//!    in front of the simulator records it per `x-request-id`, which the
//!    consumer sends): achieved rate vs configured, spacing p50/p99.
//! 2. `isolation`: 45 healthy buckets (unlimited) × `ISO_PER_BUCKET` (10)
//!    messages, alone / with 5 neighbours at 0.5/s, on the runner; and the
//!    same workload with neighbours on a naive sleep-based pacer (one pop
//!    loop that sleeps until the popped message's slot, same GCRA in Redis,
//!    same `Processor::process`). Completion = the ms of the terminal entry of
//!    `response:{id}` (Redis stream id), from the consumer's start.
//! 3. `scale`: `SCALE_BUCKETS` (1000) unlimited buckets × `SCALE_PER_BUCKET`
//!    (5) messages, queued `SCALE_PUBLISH_CONCURRENCY` (16) at a time
//!    through the endpoint's publisher (publishes/s), on one runner:
//!    admits/s and the consumer's `chunk_write_seconds` histogram.
//! 4. `subscriptions`: a runner over `SUBS` (10,000) announced buckets: time
//!    until it owns them all, RSS of this process and of the broker before
//!    and after, and a message through one of them afterwards.
//!
//! `--csv-dir dir` (`CSV_DIR`) also writes the raw per-message times (`pacing_admits.csv`,
//! `isolation.csv`, `scale_admits.csv`). Prints figures; asserts nothing.
#![recursion_limit = "256"] // rocketmq-client futures are deeply nested

use anyhow::{bail, Context};
use axum::serve::ListenerExt;
use clap::Parser;
use futures::StreamExt;
use sluice_consumer::keys::{self, Dimension};
use sluice_consumer::RunnerOptions;
use sluice_consumer::Scope;
use sluice_consumer::{
    gate, InFlightConfig, InFlightLimits, Metrics, Pacer, PacingConfig, Processor, ProcessorConfig,
    StartGate, WorkItem,
};
use sluice_deferral::endpoint::Publisher;
use sluice_deferral::publisher::LitePublisher;
use sluice_litetopic::{lite_topic_name, LiteClient, LiteConfig, LiteConsumer};
use sluice_redis::RedisConn;
use sluice_testkit::stack::{
    redis_connection, start_broker, start_consumer, unpaced, work_item, ConsumerInstance,
    ConsumerSpec, GROUP, PARENT,
};
use sluice_testkit::{RedisServer, RocketMq};
use std::collections::HashMap;
use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

// The allocator of the shipped binaries (`sluice consumer`, bins/): the
// consumer measured here is the one that runs. With glibc's malloc, malloc
// and free were 18 % of this process's CPU in the scale section.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const MODEL: &str = "gpt-4o";

/// Wall clock, Unix ms with sub-ms precision (comparable with Redis stream
/// ids: same host clock).
fn wall_ms() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64() * 1000.0)
        .unwrap_or(0.0)
}

/// Nearest-rank percentile of sorted values.
fn pct(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn sorted(mut v: Vec<f64>) -> Vec<f64> {
    v.sort_by(f64::total_cmp);
    v
}

fn rss_kib(pid: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

fn mib(kib: Option<u64>) -> String {
    kib.map(|k| format!("{:.1} MiB", k as f64 / 1024.0))
        .unwrap_or_else(|| "n/a".into())
}

/// The broker process of `mq`: the one whose command line names its config.
fn broker_pid(mq: &RocketMq) -> Option<String> {
    let conf = mq.dir().join("broker.toml");
    let conf = conf.to_string_lossy();
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !name.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        if let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) {
            if String::from_utf8_lossy(&cmdline).contains(conf.as_ref()) {
                return Some(name);
            }
        }
    }
    None
}

struct Csv(Option<PathBuf>);

#[derive(Parser)]
#[command(about = "The consumer's pop loop on real parts")]
struct Args {
    /// Sections to run, comma-separated: pacing, isolation, scale, subscriptions.
    #[arg(
        env = "SECTIONS",
        value_delimiter = ',',
        default_value = "pacing,isolation,scale,subscriptions"
    )]
    sections: Vec<String>,
    /// Also write the raw per-message times here.
    #[arg(long, env = "CSV_DIR")]
    csv_dir: Option<PathBuf>,
    #[command(flatten)]
    sim: SimKnobs,
    /// Pacing: the request bursts to run, comma-separated.
    #[arg(long, env = "PACING_BURSTS", value_delimiter = ',', default_value = "1,2")]
    pacing_bursts: Vec<f64>,
    /// Pacing: seconds of work per bucket.
    #[arg(long, env = "PACING_SECS", default_value_t = 20.0)]
    pacing_secs: f64,
    #[command(flatten)]
    iso: IsoShape,
    /// Isolation: the modes to run, comma-separated (live, backlog).
    #[arg(long, env = "ISO_MODES", value_delimiter = ',', default_value = "live,backlog")]
    iso_modes: Vec<String>,
    /// Scale: unlimited buckets.
    #[arg(long, env = "SCALE_BUCKETS", default_value_t = 1000)]
    scale_buckets: usize,
    /// Scale: messages per bucket.
    #[arg(long, env = "SCALE_PER_BUCKET", default_value_t = 5)]
    scale_per_bucket: usize,
    /// Scale: publishes in flight through the endpoint's publisher (as
    /// many deferred requests arriving at once).
    #[arg(long, env = "SCALE_PUBLISH_CONCURRENCY", default_value_t = 16, value_parser = clap::value_parser!(u64).range(1..))]
    scale_publish_concurrency: u64,
    /// Scale: seconds to wait for every answer.
    #[arg(long, env = "SCALE_TIMEOUT_S", default_value_t = 300)]
    scale_timeout_s: u64,
    /// Subscriptions: announced buckets.
    #[arg(long, env = "SUBS", default_value_t = 10_000)]
    subs: usize,
    /// Subscriptions: seconds to wait until the runner owns them all.
    #[arg(long, env = "SUBS_TIMEOUT_S", default_value_t = 300)]
    subs_timeout_s: u64,
}

/// The simulated backend's pace (`SimConfig::fast()` by default).
#[derive(clap::Args, Clone, Copy)]
struct SimKnobs {
    /// Tokens per answer.
    #[arg(long, env = "SIM_TOKENS", default_value_t = 5)]
    sim_tokens: u64,
    /// Tokens per second of an answer (0: unpaced).
    #[arg(long, env = "SIM_TPS", default_value_t = 0.0)]
    sim_tps: f64,
    /// Milliseconds to the first token.
    #[arg(long, env = "SIM_FIRST_TOKEN_MS", default_value_t = 0)]
    sim_first_token_ms: u64,
}

impl Csv {
    fn write(&self, name: &str, header: &str, rows: &[String]) -> anyhow::Result<()> {
        let Some(dir) = &self.0 else { return Ok(()) };
        std::fs::create_dir_all(dir)?;
        let path = dir.join(name);
        let mut file = std::io::BufWriter::new(std::fs::File::create(&path)?);
        writeln!(file, "{header}")?;
        for row in rows {
            writeln!(file, "{row}")?;
        }
        file.flush()?;
        println!("  (wrote {})", path.display());
        Ok(())
    }
}

/// Per `x-request-id`: the first time the backend saw it (Unix ms) and how
/// many calls carried it (at most once: 1).
type Arrivals = Arc<Mutex<HashMap<String, (f64, u32)>>>;

struct Stack {
    _redis: RedisServer,
    broker: RocketMq,
    backend: SocketAddr,
    publisher: Arc<LitePublisher>,
    conn: RedisConn,
    /// First time the backend saw each `x-request-id` (Unix ms), and calls.
    arrivals: Arrivals,
    /// `PacingConfig::request_burst` of the pacers made here (1 = the default).
    request_burst: f64,
    /// EXISTS commands `wait_done` sent (its polling, not the consumer's work).
    polls: std::sync::atomic::AtomicU64,
    /// Publishes `publish_all` keeps in flight.
    publish_concurrency: usize,
}

/// Redis's `INFO commandstats`: calls and microseconds per command.
type CommandStats = HashMap<String, (u64, u64)>;

impl Stack {
    async fn start(knobs: SimKnobs) -> anyhow::Result<Stack> {
        let redis = RedisServer::start()?;
        let broker = start_broker().await;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let backend = listener.local_addr()?;
        let mut sim = sluice_llm_sim::SimConfig::fast();
        sim.default_completion_tokens = knobs.sim_tokens;
        sim.tokens_per_second = knobs.sim_tps;
        sim.first_token_latency = Duration::from_millis(knobs.sim_first_token_ms);
        sim.validate()?;
        let arrivals: Arrivals = Arc::default();
        let record = arrivals.clone();
        let app = sluice_llm_sim::router(sim).layer(axum::middleware::from_fn(
            move |request: axum::extract::Request, next: axum::middleware::Next| {
                let at = wall_ms();
                if let Some(id) = request
                    .headers()
                    .get("x-request-id")
                    .and_then(|v| v.to_str().ok())
                {
                    if let Ok(mut map) = record.lock() {
                        map.entry(id.to_string()).or_insert((at, 0)).1 += 1;
                    }
                }
                next.run(request)
            },
        ));
        // Like `sluice_llm_sim::run`: small writes must not wait for Nagle.
        let listener = listener.tap_io(|tcp| {
            let _ = tcp.set_nodelay(true);
        });
        tokio::spawn(async move { axum::serve(listener, app).await });
        let conn = redis_connection(&redis);
        let publisher = LitePublisher::connect(&broker.namesrv_addr(), PARENT, GROUP, conn.clone())
            .await
            .map_err(|e| anyhow::anyhow!("publisher: {e}"))?;
        Ok(Stack {
            _redis: redis,
            broker,
            backend,
            publisher: Arc::new(publisher),
            conn,
            arrivals,
            request_burst: 1.0,
            polls: Default::default(),
            publish_concurrency: 16,
        })
    }

    fn consumer(&self, id: &str, metrics: &Arc<Metrics>) -> anyhow::Result<Arc<Processor>> {
        let mut config = ProcessorConfig::default();
        config.backend.default.base_url = format!("http://{}", self.backend);
        Ok(Arc::new(Processor::new(
            self.conn.clone(),
            id,
            config,
            metrics.clone(),
        )?))
    }

    /// The pacer every bucket without an override is unlimited on.
    fn pacer(&self, metrics: Option<Arc<Metrics>>) -> anyhow::Result<Arc<Pacer>> {
        let pacing = PacingConfig {
            request_burst: self.request_burst,
            ..unpaced()
        };
        Ok(Arc::new(Pacer::new(self.conn.clone(), pacing, metrics)?))
    }

    /// A consumer instance (the real `Runner`) on its own broker client,
    /// unpaced.
    async fn runner(&self, id: &str) -> anyhow::Result<Instance> {
        let spec = ConsumerSpec {
            pacing: PacingConfig {
                request_burst: self.request_burst,
                ..unpaced()
            },
            options: RunnerOptions {
                discovery_interval: Duration::from_millis(200),
                ..Default::default()
            },
            ..ConsumerSpec::new(id)
        };
        Ok(start_consumer(&self.conn, &self.broker, self.backend, spec).await)
    }

    /// What the deferral endpoint does for a bucket (`LitePublisher::announce`),
    /// for many at once: the bucket set and its activity, plus the
    /// "subscribed" mark so that the workload can be queued before the
    /// consumer starts (messages wait in their LiteTopics; a subscription
    /// triggers their dispatch).
    async fn announce(&self, topics: &[String], mark: bool) -> anyhow::Result<()> {
        let mut conn = self.conn.clone();
        for chunk in topics.chunks(1000) {
            let mut pipe = redis::pipe();
            for topic in chunk {
                pipe.cmd("ZADD")
                    .arg(keys::ACTIVITY)
                    .arg(sluice_contract::now_ms())
                    .arg(topic)
                    .ignore();
                pipe.cmd("SADD").arg(keys::BUCKETS).arg(topic).ignore();
                if mark {
                    pipe.cmd("SET").arg(keys::subscribed(topic)).arg(1).ignore();
                }
            }
            pipe.query_async::<()>(&mut conn).await?;
        }
        Ok(())
    }

    /// Queues every item through the endpoint's publisher,
    /// `publish_concurrency` at a time, each bucket's items in order. Returns how long it took.
    async fn publish_all(&self, items: &[WorkItem]) -> anyhow::Result<Duration> {
        let mut by_bucket: Vec<(String, Vec<WorkItem>)> = Vec::new();
        let mut index: HashMap<String, usize> = HashMap::new();
        for item in items {
            let i = *index.entry(item.tenant.clone()).or_insert_with(|| {
                by_bucket.push((item.tenant.clone(), Vec::new()));
                by_bucket.len() - 1
            });
            by_bucket[i].1.push(item.clone());
        }
        let topics: Vec<String> = by_bucket
            .iter()
            .map(|(t, _)| lite_topic_name(t, MODEL))
            .collect();
        self.announce(&topics, true).await?;
        let started = Instant::now();
        let results: Vec<anyhow::Result<()>> = futures::stream::iter(by_bucket)
            .map(|(tenant, items)| {
                let publisher = self.publisher.clone();
                async move {
                    for item in items {
                        publisher
                            .publish(&tenant, MODEL, &item.req_id, item.to_json().into())
                            .await
                            .map_err(|e| anyhow::anyhow!("publish {}: {e}", item.req_id))?;
                    }
                    Ok(())
                }
            })
            .buffer_unordered(self.publish_concurrency)
            .collect()
            .await;
        for result in results {
            result?;
        }
        Ok(started.elapsed())
    }

    /// Waits until every id has its `done` marker; returns the missing ones
    /// after `within`.
    async fn wait_done(&self, ids: &[String], within: Duration) -> anyhow::Result<Vec<String>> {
        let started = Instant::now();
        let mut missing: Vec<String> = ids.to_vec();
        let mut conn = self.conn.clone();
        loop {
            let mut still = Vec::new();
            for chunk in missing.chunks(1000) {
                let mut pipe = redis::pipe();
                for id in chunk {
                    pipe.exists(keys::done(id));
                }
                self.polls
                    .fetch_add(chunk.len() as u64, std::sync::atomic::Ordering::Relaxed);
                let done: Vec<bool> = pipe.query_async(&mut conn).await?;
                still.extend(
                    chunk
                        .iter()
                        .zip(done)
                        .filter(|(_, d)| !d)
                        .map(|(id, _)| id.clone()),
                );
            }
            missing = still;
            if missing.is_empty() || started.elapsed() > within {
                return Ok(missing);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// What Redis has run so far, per command.
    async fn command_stats(&self) -> anyhow::Result<CommandStats> {
        let mut conn = self.conn.clone();
        let info: String = redis::cmd("INFO")
            .arg("commandstats")
            .query_async(&mut conn)
            .await?;
        Ok(parse_command_stats(&info))
    }

    /// Unix ms of each request's terminal stream entry (its Redis stream id).
    async fn end_ms(&self, ids: &[String]) -> anyhow::Result<HashMap<String, f64>> {
        let mut conn = self.conn.clone();
        let mut out = HashMap::new();
        for chunk in ids.chunks(1000) {
            let mut pipe = redis::pipe();
            for id in chunk {
                pipe.cmd("XREVRANGE")
                    .arg(keys::response(id))
                    .arg("+")
                    .arg("-")
                    .arg("COUNT")
                    .arg(1);
            }
            let answers: Vec<redis::streams::StreamRangeReply> =
                pipe.query_async(&mut conn).await?;
            for (id, reply) in chunk.iter().zip(answers) {
                if let Some(entry) = reply.ids.first() {
                    if let Some(ms) = entry.id.split('-').next().and_then(|m| m.parse().ok()) {
                        out.insert(id.clone(), ms);
                    }
                }
            }
        }
        Ok(out)
    }

    fn arrival(&self, id: &str) -> Option<f64> {
        self.arrivals.lock().ok()?.get(id).map(|(at, _)| *at)
    }

    /// Model calls that carried `id` (0 when none reached the backend).
    fn calls(&self, id: &str) -> u32 {
        self.arrivals
            .lock()
            .ok()
            .and_then(|map| map.get(id).map(|(_, calls)| *calls))
            .unwrap_or(0)
    }

    /// The tokens the backend reports for one bench message (prompt and
    /// answer): what the consumer's pacing debt ends at once it corrects the
    /// estimate with the real usage.
    async fn tokens_per_message(&self) -> anyhow::Result<u64> {
        let mut body = item("probe", "probe".into(), 0).body;
        body["stream"] = false.into();
        let response = sluice_testkit::post(
            self.backend,
            "/v1/chat/completions",
            vec![("content-type", "application/json".into())],
            body.to_string().into_bytes(),
        )
        .await?;
        let answer: serde_json::Value = serde_json::from_str(&response.body)?;
        answer["usage"]["total_tokens"]
            .as_u64()
            .with_context(|| format!("no usage in the backend's answer: {}", response.body))
    }
}

type Instance = ConsumerInstance;

fn item(tenant: &str, req_id: String, estimated_tokens: u64) -> WorkItem {
    work_item(tenant, MODEL, &req_id, estimated_tokens)
}

fn ids_of(items: &[WorkItem]) -> Vec<String> {
    items.iter().map(|i| i.req_id.clone()).collect()
}

// ---------------------------------------------------------------------------
// 1. Pacing accuracy

async fn pacing(args: &Args, csv: &Csv) -> anyhow::Result<()> {
    let mut rows = Vec::new();
    for &burst in &args.pacing_bursts {
        pacing_run(args, burst, &mut rows).await?;
    }
    csv.write(
        "pacing_admits.csv",
        "request_burst,bucket,messages_per_s,req_id,admit_ms",
        &rows,
    )?;
    Ok(())
}

async fn pacing_run(args: &Args, burst: f64, rows: &mut Vec<String>) -> anyhow::Result<()> {
    let secs = args.pacing_secs;
    println!("\n== pacing: 4 buckets, {secs} s of work each, one runner, request burst {burst} ==");
    let mut stack = Stack::start(args.sim).await?;
    stack.request_burst = burst;
    let pacer = stack.pacer(None)?;
    // The token bucket's debt ends at each message's real usage (the
    // consumer corrects its estimate): size its rate for 4 messages/s of
    // that, and estimate exactly that.
    let tokens = stack.tokens_per_message().await?;
    // (tenant, dimension, rate, estimated tokens per message, messages/s)
    let buckets: [(&str, Dimension, f64, u64, f64); 4] = [
        ("pace-2rps", Dimension::Requests, 2.0, 10, 2.0),
        ("pace-5rps", Dimension::Requests, 5.0, 10, 5.0),
        ("pace-20rps", Dimension::Requests, 20.0, 10, 20.0),
        (
            "pace-4msg-tps",
            Dimension::Tokens,
            4.0 * tokens as f64,
            tokens,
            4.0,
        ),
    ];
    let mut items = Vec::new();
    for (tenant, dimension, rate, tokens, per_s) in buckets {
        pacer
            .set_rate(
                Scope::Bucket {
                    tenant,
                    model: MODEL,
                },
                dimension,
                Some(rate),
            )
            .await?;
        let n = (per_s * secs).round() as usize + 1;
        items.extend((0..n).map(|i| item(tenant, format!("{tenant}-{i}"), tokens)));
    }
    let published = stack.publish_all(&items).await?;
    println!(
        "queued {} messages in {:.2} s; starting the consumer",
        items.len(),
        published.as_secs_f64()
    );
    let t0 = wall_ms();
    let one = stack.runner("bench-pacing").await?;
    let missing = stack
        .wait_done(&ids_of(&items), Duration::from_secs_f64(secs * 2.0 + 30.0))
        .await?;
    one.stop().await;
    if !missing.is_empty() {
        println!("!! {} messages not answered in time", missing.len());
    }
    println!(
        "{:<14} {:>10} {:>5} {:>10} {:>8} {:>11} {:>11} {:>11} {:>10}",
        "bucket",
        "configured",
        "n",
        "achieved/s",
        "error",
        "spacing p50",
        "spacing p99",
        "spacing max",
        "first at"
    );
    for (tenant, dimension, rate, _, per_s) in buckets {
        let mut times: Vec<f64> = items
            .iter()
            .filter(|i| i.tenant == tenant)
            .filter_map(|i| {
                let at = stack.arrival(&i.req_id)?;
                rows.push(format!(
                    "{burst},{tenant},{per_s},{},{:.3}",
                    i.req_id,
                    at - t0
                ));
                Some(at)
            })
            .collect();
        times.sort_by(f64::total_cmp);
        // A burst of b requests lets the first b go at once: measure the
        // steady pace from the b-th admit on.
        let skip = match dimension {
            Dimension::Requests => (burst.max(1.0) as usize) - 1,
            Dimension::Tokens => 0,
        };
        let all = times.len();
        let first = times.first().copied().unwrap_or(f64::NAN);
        let times: Vec<f64> = times.into_iter().skip(skip).collect();
        if times.len() < 2 {
            println!("{tenant:<14} too few admits ({all})");
            continue;
        }
        let span = times[times.len() - 1] - times[0];
        let achieved = (times.len() - 1) as f64 / span * 1000.0;
        let gaps = sorted(times.windows(2).map(|w| w[1] - w[0]).collect());
        let unit = match dimension {
            Dimension::Requests => format!("{rate} rps"),
            Dimension::Tokens => format!("{rate} tps"),
        };
        println!(
            "{:<14} {:>10} {:>5} {:>10.3} {:>+7.2}% {:>8.1} ms {:>8.1} ms {:>8.1} ms {:>7.0} ms",
            tenant,
            unit,
            all,
            achieved,
            (achieved / per_s - 1.0) * 100.0,
            pct(&gaps, 50.0),
            pct(&gaps, 99.0),
            gaps[gaps.len() - 1],
            first - t0,
        );
    }
    println!(
        "(achieved = admits / (last admit − first admit), from the burst-th admit on; expected spacing \
         500 / 200 / 50 / 250 ms; admit = the backend received the call)"
    );
    Ok(())
}

// ---------------------------------------------------------------------------
// 2. Isolation

struct IsoResult {
    label: &'static str,
    healthy: Vec<f64>,
    healthy_drain: f64,
    throttled_drain: Option<f64>,
    missing: usize,
}

/// The naive pacer: one pop loop; a popped message waits *in the loop* for
/// its bucket's slot (same GCRA check in Redis as the runner, sleeping for
/// the wait it returns), then its call is spawned and the LiteTopic released.
async fn naive_loop(
    lite: Arc<LiteConsumer>,
    consumer: Arc<Processor>,
    pacer: Arc<Pacer>,
    limits: Arc<InFlightLimits>,
    stop: tokio::sync::watch::Receiver<bool>,
) {
    while !*stop.borrow() {
        // Awaited to its end every time (`POP_NEVER_CANCELLED`).
        let messages = match lite
            .pop(1, Duration::from_secs(60), Duration::from_millis(200))
            .await
        {
            Ok(m) => m,
            Err(error) => {
                eprintln!("naive pacer: pop failed: {error}");
                tokio::time::sleep(Duration::from_millis(200)).await;
                continue;
            }
        };
        for message in messages {
            let Ok(item) = WorkItem::from_json(&message.body) else {
                let _ = lite.release(&message.handle).await;
                continue;
            };
            let permit = loop {
                match gate(&limits, &pacer, &item, Duration::ZERO).await {
                    Ok(StartGate::Run(permit)) => break permit,
                    Ok(StartGate::Suspend(wait))
                    | Ok(StartGate::WaitLocally(wait))
                    | Ok(StartGate::Busy(wait)) => tokio::time::sleep(wait).await,
                    Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
                }
            };
            if let Err(error) = lite.release(&message.handle).await {
                eprintln!("naive pacer: release failed: {error}");
            }
            let consumer = consumer.clone();
            tokio::spawn(async move {
                let _ = consumer.process(&item).await;
                drop(permit);
            });
        }
    }
}

/// How the healthy buckets' work comes: all queued before the consumer
/// starts (`backlog`), or arriving while it runs (`live`).
#[derive(Clone, Copy, PartialEq)]
enum IsoMode {
    Backlog,
    Live,
}

#[derive(clap::Args)]
struct IsoShape {
    /// Isolation: healthy (unlimited) buckets.
    #[arg(long = "iso-healthy", env = "ISO_HEALTHY", default_value_t = 45)]
    healthy_n: usize,
    /// Isolation: throttled neighbours.
    #[arg(long = "iso-throttled", env = "ISO_THROTTLED", default_value_t = 5)]
    throttled_n: usize,
    /// Isolation: messages per bucket.
    #[arg(long = "iso-per-bucket", env = "ISO_PER_BUCKET", default_value_t = 10)]
    per_bucket: usize,
    /// Isolation: the throttled neighbours' messages per second.
    #[arg(long = "iso-throttled-rate", env = "ISO_THROTTLED_RATE", default_value_t = 0.5)]
    throttled_rate: f64,
    /// Isolation, live: messages per second to the healthy buckets in all.
    #[arg(long = "iso-live-rps", env = "ISO_LIVE_RPS", default_value_t = 45.0)]
    live_rps: f64,
    /// Isolation, live: seconds of arrivals.
    #[arg(long = "iso-live-secs", env = "ISO_LIVE_SECS", default_value_t = 20.0)]
    live_secs: f64,
}

async fn isolation_case(
    sim: SimKnobs,
    label: &'static str,
    mode: IsoMode,
    shape: &IsoShape,
    with_throttled: bool,
    naive: bool,
    csv_rows: &mut Vec<String>,
) -> anyhow::Result<IsoResult> {
    let stack = Stack::start(sim).await?;
    let pacer = stack.pacer(None)?;
    let throttled_n = if with_throttled { shape.throttled_n } else { 0 };
    let healthy: Vec<String> = (0..shape.healthy_n).map(|i| format!("ok-{i:02}")).collect();
    let throttled: Vec<String> = (0..throttled_n).map(|i| format!("slow-{i:02}")).collect();
    for tenant in &throttled {
        pacer
            .set_rate(
                Scope::Bucket {
                    tenant,
                    model: MODEL,
                },
                Dimension::Requests,
                Some(shape.throttled_rate),
            )
            .await?;
    }
    let topics: Vec<String> = throttled
        .iter()
        .chain(&healthy)
        .map(|t| lite_topic_name(t, MODEL))
        .collect();
    stack.announce(&topics, true).await?;
    // Queued first, round-robin: message i of every bucket, then i+1.
    let queued_tenants: Vec<&String> = match mode {
        IsoMode::Backlog => throttled.iter().chain(&healthy).collect(),
        IsoMode::Live => throttled.iter().collect(),
    };
    let mut queued = Vec::new();
    for i in 0..shape.per_bucket {
        for tenant in &queued_tenants {
            queued.push(item(tenant, format!("{tenant}-{i}"), 10));
        }
    }
    stack.publish_all(&queued).await?;

    let t0 = wall_ms();
    let (halt, halted) = tokio::sync::watch::channel(false);
    let mut runner = None;
    let mut naive_parts = None;
    if naive {
        let metrics = Arc::new(Metrics::default());
        let client = LiteClient::connect(LiteConfig::new(stack.broker.namesrv_addr()))?;
        let lite = Arc::new(LiteConsumer::new(&client, GROUP, PARENT).await?);
        for chunk in topics.chunks(500) {
            let refs: Vec<&str> = chunk.iter().map(String::as_str).collect();
            lite.subscribe(&refs).await?;
        }
        let task = tokio::spawn(naive_loop(
            lite.clone(),
            stack.consumer("bench-naive", &metrics)?,
            pacer.clone(),
            Arc::new(InFlightLimits::new(InFlightConfig::default(), None)),
            halted,
        ));
        naive_parts = Some((client, task, lite));
    } else {
        runner = Some(stack.runner("bench-isolation").await?);
    }

    // Healthy work: queued (backlog) or published now at a steady pace (live).
    let mut started_at: HashMap<String, f64> =
        queued.iter().map(|i| (i.req_id.clone(), t0)).collect();
    let mut healthy_ids: Vec<String> = queued
        .iter()
        .filter(|i| i.tenant.starts_with("ok-"))
        .map(|i| i.req_id.clone())
        .collect();
    if mode == IsoMode::Live {
        // Let the consumer subscribe first.
        tokio::time::sleep(Duration::from_secs(1)).await;
        let total = (shape.live_rps * shape.live_secs).round() as usize;
        let period = Duration::from_secs_f64(1.0 / shape.live_rps);
        let begin = tokio::time::Instant::now();
        for k in 0..total {
            tokio::time::sleep_until(begin + period * k as u32).await;
            let tenant = &healthy[k % healthy.len()];
            let work = item(tenant, format!("{tenant}-live-{k}"), 10);
            started_at.insert(work.req_id.clone(), wall_ms());
            stack
                .publisher
                .publish(tenant, MODEL, &work.req_id, work.to_json().into())
                .await
                .map_err(|e| anyhow::anyhow!("live publish: {e}"))?;
            healthy_ids.push(work.req_id);
        }
    }
    let mut missing = stack
        .wait_done(&healthy_ids, Duration::from_secs(60))
        .await?;
    let throttled_ids: Vec<String> = queued
        .iter()
        .filter(|i| i.tenant.starts_with("slow-"))
        .map(|i| i.req_id.clone())
        .collect();
    // The naive pacer may serialize every throttled slot.
    let slots = if naive {
        throttled_ids.len() as f64
    } else {
        shape.per_bucket as f64
    };
    let within = Duration::from_secs_f64(slots / shape.throttled_rate.max(0.01) + 30.0);
    missing.extend(stack.wait_done(&throttled_ids, within).await?);
    if let Some(one) = runner {
        one.stop().await;
    }
    if let Some((client, task, lite)) = naive_parts {
        let _ = halt.send(true);
        let _ = task.await;
        println!("  naive pacer's broker client: {:?}", lite.stats());
        tokio::spawn(client.shutdown());
    }
    let all: Vec<String> = healthy_ids.iter().chain(&throttled_ids).cloned().collect();
    let ends = stack.end_ms(&all).await?;
    let mut healthy_lat = Vec::new();
    let mut healthy_drain: f64 = 0.0;
    let mut throttled_end: Option<f64> = None;
    let first_start = started_at.values().copied().fold(f64::INFINITY, f64::min);
    for id in &all {
        let (Some(end), Some(start)) = (ends.get(id), started_at.get(id)) else {
            continue;
        };
        let latency = end - start;
        let tenant = id.rsplit_once('-').map(|(t, _)| t).unwrap_or(id);
        let tenant = tenant.strip_suffix("-live").unwrap_or(tenant);
        let class = if id.starts_with("ok-") {
            healthy_lat.push(latency);
            healthy_drain = healthy_drain.max(end - first_start);
            "healthy"
        } else {
            let from_start = end - t0;
            throttled_end = Some(throttled_end.map_or(from_start, |m: f64| m.max(from_start)));
            "throttled"
        };
        csv_rows.push(format!("{label},{tenant},{class},{id},{latency:.0}"));
    }
    Ok(IsoResult {
        label,
        healthy: sorted(healthy_lat),
        healthy_drain,
        throttled_drain: throttled_end,
        missing: missing.len(),
    })
}

async fn isolation(args: &Args, csv: &Csv) -> anyhow::Result<()> {
    let shape = &args.iso;
    let mut rows = Vec::new();
    for mode in args.iso_modes.iter().map(|mode| mode.trim()) {
        let mode = match mode {
            "live" => IsoMode::Live,
            "backlog" => IsoMode::Backlog,
            other => bail!("ISO_MODES: unknown mode {other:?} (live, backlog)"),
        };
        match mode {
            IsoMode::Live => println!(
                "\n== isolation, live: {} healthy (unlimited) buckets get {} messages/s in all for {} s \
                 while {} throttled ({}/s) buckets hold {} queued messages each ==",
                shape.healthy_n,
                shape.live_rps,
                shape.live_secs,
                shape.throttled_n,
                shape.throttled_rate,
                shape.per_bucket
            ),
            IsoMode::Backlog => println!(
                "\n== isolation, backlog: {} healthy (unlimited) + {} throttled ({}/s) buckets, \
                 {} messages each, all queued before the consumer starts ==",
                shape.healthy_n, shape.throttled_n, shape.throttled_rate, shape.per_bucket
            ),
        }
        let mut results = Vec::new();
        for (label, with_throttled, naive) in [
            ("runner, healthy only", false, false),
            ("runner, with throttled", true, false),
            ("naive sleep pacer, with throttled", true, true),
        ] {
            let r = isolation_case(
                args.sim,
                label,
                mode,
                shape,
                with_throttled,
                naive,
                &mut rows,
            )
            .await
            .with_context(|| format!("isolation case {label}"))?;
            results.push(r);
        }
        println!(
            "{:<36} {:>9} {:>9} {:>13} {:>15} {:>8}",
            "case", "p50", "p99", "healthy drain", "throttled drain", "missing"
        );
        for r in &results {
            println!(
                "{:<36} {:>6.0} ms {:>6.0} ms {:>10.0} ms {:>15} {:>8}",
                r.label,
                pct(&r.healthy, 50.0),
                pct(&r.healthy, 99.0),
                r.healthy_drain,
                r.throttled_drain
                    .map(|d| format!("{d:.0} ms"))
                    .unwrap_or_else(|| "-".into()),
                r.missing
            );
        }
        if let [alone, with, naive] = &results[..] {
            println!(
                "runner with/without throttled neighbours: p50 ×{:.2}, p99 ×{:.2}, healthy drain ×{:.2}",
                pct(&with.healthy, 50.0) / pct(&alone.healthy, 50.0),
                pct(&with.healthy, 99.0) / pct(&alone.healthy, 99.0),
                with.healthy_drain / alone.healthy_drain,
            );
            println!(
                "naive vs runner, both with throttled neighbours: p50 ×{:.2}, p99 ×{:.2}, healthy drain ×{:.2}",
                pct(&naive.healthy, 50.0) / pct(&with.healthy, 50.0),
                pct(&naive.healthy, 99.0) / pct(&with.healthy, 99.0),
                naive.healthy_drain / with.healthy_drain,
            );
        }
        println!(
            "(healthy latency = terminal entry of response:{{id}} − its publish (live) or the consumer's \
             start (backlog); healthy drain = last healthy answer − first publish / start; \
             throttled drain from the consumer's start)"
        );
    }
    csv.write(
        "isolation.csv",
        "case,bucket,class,req_id,completion_ms",
        &rows,
    )?;
    Ok(())
}

// ---------------------------------------------------------------------------
// 3. Scale

/// p-quantile of a Prometheus histogram in `text` (linear within a bucket).
fn histogram_quantile(text: &str, name: &str, q: f64) -> Option<f64> {
    let prefix = format!("{name}_bucket{{le=\"");
    let mut buckets: Vec<(f64, f64)> = Vec::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix(&prefix) else {
            continue;
        };
        let (le, rest) = rest.split_once('"')?;
        let le = if le == "+Inf" {
            f64::INFINITY
        } else {
            le.parse().ok()?
        };
        let count: f64 = rest.rsplit(' ').next()?.parse().ok()?;
        buckets.push((le, count));
    }
    let total = buckets.last()?.1;
    if total == 0.0 {
        return None;
    }
    let target = q * total;
    let mut prev = (0.0, 0.0);
    for (le, count) in buckets {
        if count >= target {
            if le.is_infinite() {
                return Some(prev.0);
            }
            let share = if count > prev.1 {
                (target - prev.1) / (count - prev.1)
            } else {
                1.0
            };
            return Some(prev.0 + (le - prev.0) * share);
        }
        prev = (le, count);
    }
    None
}

fn metric_value(text: &str, name: &str) -> Option<f64> {
    text.lines()
        .find(|l| l.starts_with(name) && l[name.len()..].starts_with(' '))?
        .rsplit(' ')
        .next()?
        .parse()
        .ok()
}

/// `cmdstat_<name>:calls=N,usec=M,...` lines of `INFO commandstats`.
fn parse_command_stats(info: &str) -> CommandStats {
    info.lines()
        .filter_map(|line| {
            let (name, rest) = line.strip_prefix("cmdstat_")?.split_once(':')?;
            let field = |key: &str| {
                rest.split(',')
                    .find_map(|kv| kv.strip_prefix(key)?.parse::<u64>().ok())
            };
            Some((name.to_string(), (field("calls=")?, field("usec=")?)))
        })
        .collect()
}

/// Redis's work per message between two `INFO commandstats`: script calls,
/// their time (the commands inside included), and every command (those run
/// inside scripts included, the bench's own `polls` EXISTS not).
fn print_redis_work(before: &CommandStats, after: &CommandStats, polls: u64, messages: usize) {
    let delta = |name: &str| {
        let (calls, usec) = after.get(name).copied().unwrap_or_default();
        let (calls0, usec0) = before.get(name).copied().unwrap_or_default();
        (calls.saturating_sub(calls0), usec.saturating_sub(usec0))
    };
    let (scripts, script_usec) = delta("evalsha");
    let commands: u64 = after.keys().map(|name| delta(name).0).sum::<u64>();
    let commands = commands.saturating_sub(polls);
    let per = |v: u64| v as f64 / messages.max(1) as f64;
    println!(
        "redis per message (consume phase): {:.2} script calls, {:.0} µs of script time, \
         {:.1} commands (inside scripts included; the bench's {polls} EXISTS polls not)",
        per(scripts),
        per(script_usec),
        per(commands),
    );
}

async fn scale(args: &Args, csv: &Csv) -> anyhow::Result<()> {
    let (buckets, per_bucket) = (args.scale_buckets, args.scale_per_bucket);
    println!("\n== scale: {buckets} unlimited buckets × {per_bucket} messages, one runner ==");
    let mut stack = Stack::start(args.sim).await?;
    stack.publish_concurrency = usize::try_from(args.scale_publish_concurrency)?;
    let mut items = Vec::new();
    for i in 0..per_bucket {
        for b in 0..buckets {
            let tenant = format!("s-{b:05}");
            items.push(item(&tenant, format!("{tenant}-{i}"), 10));
        }
    }
    let published = stack.publish_all(&items).await?;
    println!(
        "queued {} messages in {:.1} s ({:.0}/s through the endpoint's publisher, {} in flight); starting the consumer",
        items.len(),
        published.as_secs_f64(),
        items.len() as f64 / published.as_secs_f64(),
        stack.publish_concurrency
    );
    let t0 = wall_ms();
    let redis_before = stack.command_stats().await?;
    let polls_before = stack.polls.load(std::sync::atomic::Ordering::Relaxed);
    let one = stack.runner("bench-scale").await?;
    let ids = ids_of(&items);
    let missing = stack
        .wait_done(&ids, Duration::from_secs(args.scale_timeout_s))
        .await?;
    let drained = wall_ms() - t0;
    let redis_after = stack.command_stats().await?;
    let polls = stack.polls.load(std::sync::atomic::Ordering::Relaxed) - polls_before;
    let metrics = one.metrics.encode();
    println!("  runner's broker client: {:?}", one.lite.stats());
    one.stop().await;
    let mut times: Vec<f64> = ids.iter().filter_map(|id| stack.arrival(id)).collect();
    times.sort_by(f64::total_cmp);
    if times.len() < 2 {
        bail!("scale: only {} calls reached the backend", times.len());
    }
    let n = times.len();
    let first = times[0];
    let last = times[n - 1];
    let lo = times[n / 10];
    let hi = times[n * 9 / 10];
    println!(
        "answered {} of {} ({} missing) in {:.1} s from the consumer's start; first call at +{:.0} ms",
        n,
        items.len(),
        missing.len(),
        drained / 1000.0,
        first - t0
    );
    println!(
        "admits/s: {:.0} first→last call, {:.0} over the middle 80 % (10th→90th percentile call)",
        (n - 1) as f64 / (last - first) * 1000.0,
        (n * 8 / 10) as f64 / (hi - lo) * 1000.0
    );
    let mut per_second = vec![0usize; ((last - t0) / 1000.0).ceil() as usize + 1];
    for t in &times {
        per_second[((t - t0) / 1000.0).floor().max(0.0) as usize] += 1;
    }
    println!(
        "calls per 1 s since start: {}",
        per_second
            .iter()
            .map(|c| c.to_string())
            .collect::<Vec<_>>()
            .join(" ")
    );
    let (out_of_order, buckets_seen) = order_breaks(&stack, &items);
    let twice = ids.iter().filter(|id| stack.calls(id) > 1).count();
    println!(
        "order inside a bucket: {out_of_order} of {buckets_seen} buckets had a call start before an earlier-published message's; \
         at most once: {twice} requests called more than once"
    );
    let name = "sluice_consumer_chunk_write_seconds";
    let count = metric_value(&metrics, &format!("{name}_count")).unwrap_or(0.0);
    let sum = metric_value(&metrics, &format!("{name}_sum")).unwrap_or(0.0);
    let ms = |v: Option<f64>| {
        v.map(|s| format!("{:.2} ms", s * 1000.0))
            .unwrap_or_else(|| "n/a".into())
    };
    println!(
        "chunk writes: {count:.0}, p50 {} p99 {} (histogram, interpolated in 2× buckets from 0.1 ms), mean {:.2} ms",
        ms(histogram_quantile(&metrics, name, 0.5)),
        ms(histogram_quantile(&metrics, name, 0.99)),
        if count > 0.0 { sum / count * 1000.0 } else { f64::NAN }
    );
    print_redis_work(&redis_before, &redis_after, polls, items.len());
    let rows: Vec<String> = items
        .iter()
        .filter_map(|i| {
            let at = stack.arrival(&i.req_id)?;
            Some(format!("{},{},{:.3}", i.tenant, i.req_id, at - t0))
        })
        .collect();
    csv.write("scale_admits.csv", "bucket,req_id,admit_ms", &rows)?;
    Ok(())
}

/// Buckets in which some message reached the backend before a message
/// published earlier to the same bucket, and the buckets looked at.
fn order_breaks(stack: &Stack, items: &[WorkItem]) -> (usize, usize) {
    // `items` is in publish order within each bucket.
    let mut last: HashMap<&str, f64> = HashMap::new();
    let mut broken: std::collections::HashSet<&str> = std::collections::HashSet::new();
    for item in items {
        let Some(at) = stack.arrival(&item.req_id) else {
            continue;
        };
        let previous = last.insert(item.tenant.as_str(), at);
        if previous.is_some_and(|before| before > at) {
            broken.insert(item.tenant.as_str());
        }
    }
    (broken.len(), last.len())
}

// ---------------------------------------------------------------------------
// 4. Subscriptions

async fn subscriptions(args: &Args) -> anyhow::Result<()> {
    let n = args.subs;
    println!("\n== subscriptions: one runner over {n} announced buckets ==");
    let stack = Stack::start(args.sim).await?;
    let pid = broker_pid(&stack.broker);
    let topics: Vec<String> = (0..n)
        .map(|i| lite_topic_name(&format!("sub-{i:05}"), MODEL))
        .collect();
    stack.announce(&topics, false).await?;
    let self_before = rss_kib("self");
    let broker_before = pid.as_deref().and_then(rss_kib);
    let started = Instant::now();
    let one = stack.runner("bench-subs").await?;
    let deadline = Duration::from_secs(args.subs_timeout_s);
    while one.runner.owned().len() < n && started.elapsed() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let took = started.elapsed();
    let owned = one.runner.owned().len();
    // Let the broker settle, then read both.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let self_after = rss_kib("self");
    let broker_after = pid.as_deref().and_then(rss_kib);
    println!(
        "subscribed to {owned} of {n} in {:.2} s (start → all owned, incl. SET subscribed marks)",
        took.as_secs_f64()
    );
    let delta = |a: Option<u64>, b: Option<u64>| match (a, b) {
        (Some(a), Some(b)) => format!("{:+.1} MiB", (b as f64 - a as f64) / 1024.0),
        _ => "n/a".into(),
    };
    println!(
        "this process RSS: {} → {} ({})",
        mib(self_before),
        mib(self_after),
        delta(self_before, self_after)
    );
    println!(
        "broker RSS (pid {}): {} → {} ({})",
        pid.as_deref().unwrap_or("?"),
        mib(broker_before),
        mib(broker_after),
        delta(broker_before, broker_after)
    );
    // One message through the last bucket: does the loop still deliver?
    let tenant = format!("sub-{:05}", n - 1);
    let probe = item(&tenant, "sub-probe".into(), 10);
    let sent = Instant::now();
    stack
        .publisher
        .publish(&tenant, MODEL, &probe.req_id, probe.to_json().into())
        .await
        .map_err(|e| anyhow::anyhow!("probe publish: {e}"))?;
    let missing = stack
        .wait_done(std::slice::from_ref(&probe.req_id), Duration::from_secs(30))
        .await?;
    println!(
        "a message to bucket #{n} with {owned} subscribed: {} in {:.0} ms",
        if missing.is_empty() {
            "answered"
        } else {
            "NOT answered"
        },
        sent.elapsed().as_secs_f64() * 1000.0
    );
    one.stop().await;
    Ok(())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    sluice_testkit::init_bench_tracing();
    let args = Args::parse();
    let csv = Csv(args.csv_dir.clone());
    println!(
        "consumer bench: sections {}; simulator {} tokens/s (0 = unpaced), first token {} ms, {} tokens per answer",
        args.sections.join(","),
        args.sim.sim_tps,
        args.sim.sim_first_token_ms,
        args.sim.sim_tokens
    );
    for section in args.sections.iter().map(|section| section.trim()) {
        let started = Instant::now();
        match section {
            "pacing" => pacing(&args, &csv).await?,
            "isolation" => isolation(&args, &csv).await?,
            "scale" => scale(&args, &csv).await?,
            "subscriptions" => subscriptions(&args).await?,
            "" => continue,
            other => bail!("unknown section {other:?} (pacing, isolation, scale, subscriptions)"),
        }
        println!("({section}: {:.0} s)", started.elapsed().as_secs_f64());
    }
    Ok(())
}
