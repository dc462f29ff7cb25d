//! `cargo run --release -p sluice-bench --bin pacing_bench -- --help`
//! (every knob below is a flag, e.g. `--models`, or its environment variable)
//!
//! Issue #16's benchmark: one workload under three policies, one after the
//! other in one run, each on fresh parts (llm-sim with its GPU model; for
//! the consumer policies also a real redis-server and RocketMQ broker):
//!
//! 1. `flood`: no deferral; every tenant's clients call llm-sim directly
//!    (`PACING_FLOOD_WORKERS` calls in flight per tenant and model,
//!    retrying after `Retry-After` on 429).
//! 2. `static`: today's consumer, unpaced buckets and a fixed in-flight cap
//!    per model (`PACING_STATIC_CAP`, an operator's guess: the batch that
//!    fills the full-capacity GPU plus a little).
//! 3. `adaptive`: the consumer with a controller per model on the server's
//!    vLLM gauges (`SignalConfig::Prometheus`) and fair sharing by weight.
//!
//! Workload: `PACING_MODELS` models × `PACING_TENANTS` tenants (weights
//! 1 / 2 / 4 in turn). The first two thirds of the tenants are in the
//! normal band and backlogged; the rest alternate between the high band
//! (a burst of `PACING_HIGH_BURST` requests, default 1, per model every
//! 5 s, not backlogged) and the low band (backlogged). With the default
//! size the high band asks for about a quarter of a model's capacity (a
//! burst of 3 asked for three quarters, leaving the normal band, whose
//! shares are measured, too few answers for a meaningful sample). Each model's GPU capacity is multiplied by 0.5
//! (`POST /admin/capacity {"factor":0.5}`) at `PACING_CUT_AT` s for
//! `PACING_CUT_SECS` s, then restored; the run lasts `PACING_SECS` s.
//! Defaults (2 × 9, 60 s, halving 20 s..40 s) fit 2 shared cores; the
//! issue's size is `PACING_MODELS=3 PACING_TENANTS=20 PACING_SECS=90
//! PACING_CUT_AT=30 PACING_CUT_SECS=30`.
//!
//! Prints one table; writes `pacing_bench.csv` (per policy, model and
//! 250 ms sample), `pacing_bench_summary.csv`, `pacing_bench_shares.csv`
//! (per normal-band tenant and model) and `pacing_bench.svg` to
//! `PACING_OUT` (default `target/`). Asserts nothing. Answer times are read
//! from the consumer's response streams at the end; the bench keeps them
//! for the whole run (the consumer's default is 300 s after an answer ends).
#![recursion_limit = "256"] // rocketmq-client futures are deeply nested

use anyhow::{bail, Context};
use sluice_consumer::control_loop;
use sluice_consumer::controller::{ControllerConfig, ModelControl, SignalConfig};
use sluice_consumer::fair::FairConfig;
use sluice_consumer::{keys, InFlightConfig};
use sluice_contract::Priority;
use sluice_deferral::endpoint::Publisher;
use sluice_litetopic::lite_topic_name;
use sluice_llm_sim::gpu::{Capacity, CapacityChange, GpuConfig};
use sluice_openai::model_server::vllm;
use sluice_redis::RedisConn;
use sluice_testkit::chart::{Chart, Panel, Series};
use sluice_testkit::queue_parts::QueueParts;
use sluice_testkit::redis_topologies::RedisKind;
use sluice_testkit::stack::{
    change_sim_capacity, start_consumer, start_llm_sim, unpaced, work_item, ConsumerSpec,
};
use std::collections::HashMap;
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Tokens each answer generates.
const COMPLETION_TOKENS: u64 = 40;
/// The fastest one answer decodes alone: the batch must hold
/// `tokens_per_s / SINGLE_ANSWER_TPS` answers to use the whole GPU.
const SINGLE_ANSWER_TPS: f64 = 20.0;
const SAMPLE_EVERY: Duration = Duration::from_millis(250);
const WEIGHTS: [f64; 3] = [1.0, 2.0, 4.0];
/// Requests allowed to wait at the server before it answers 429.
const SERVER_MAX_WAITING: usize = 32;
const HIGH_EVERY: Duration = Duration::from_secs(5);
/// Completions before this are left out of the shares (lanes filling).
const SHARE_WARMUP_MS: u64 = 5_000;

#[derive(Clone, Debug, clap::Parser)]
#[command(about = "One pacing workload under the flood, static and adaptive policies")]
struct Params {
    /// Models, each with its own simulated GPU.
    #[arg(long, env = "PACING_MODELS", default_value_t = 2)]
    models: usize,
    /// Tenants per model (weights 1 / 2 / 4 in turn); at least 3.
    #[arg(long, env = "PACING_TENANTS", default_value_t = 9)]
    tenants: usize,
    /// Seconds the run lasts.
    #[arg(long, env = "PACING_SECS", default_value_t = 60)]
    secs: u64,
    /// Second at which each GPU's capacity is halved.
    #[arg(long, env = "PACING_CUT_AT", default_value_t = 20)]
    cut_at: u64,
    /// Seconds the halving lasts.
    #[arg(long, env = "PACING_CUT_SECS", default_value_t = 20)]
    cut_secs: u64,
    /// Each GPU's full capacity in tokens per second.
    #[arg(long, env = "PACING_TOKENS_PER_S", default_value_t = 160.0)]
    tokens_per_s: f64,
    /// The static policy's in-flight cap per model.
    #[arg(long, env = "PACING_STATIC_CAP", default_value_t = 10)]
    static_cap: usize,
    /// The flood policy's calls in flight per tenant and model.
    #[arg(long, env = "PACING_FLOOD_WORKERS", default_value_t = 4)]
    flood_workers: usize,
    /// Requests per high-band tenant and model every [`HIGH_EVERY`].
    #[arg(long, env = "PACING_HIGH_BURST", default_value_t = 1)]
    high_burst: usize,
    /// The adaptive controller's target of waiting requests.
    #[arg(long, env = "PACING_TARGET_WAITING", default_value_t = 2.0)]
    target_waiting: f64,
    /// The adaptive controller's target KV-cache usage.
    #[arg(long, env = "PACING_TARGET_KV_USAGE", default_value_t = 0.6)]
    target_kv_usage: f64,
    /// Which policies run, comma-separated (flood, static, adaptive).
    #[arg(long, env = "PACING_POLICIES", value_delimiter = ',',
          default_value = "flood,static,adaptive", value_parser = Policy::parse)]
    policies: Vec<Policy>,
    /// Where the CSV files and the chart go.
    #[arg(long, env = "PACING_OUT", default_value = "target")]
    out: PathBuf,
}

impl Params {
    /// The knobs, checked against each other.
    fn parse_checked() -> anyhow::Result<Params> {
        let params = <Params as clap::Parser>::parse();
        if params.models == 0 || params.tenants < 3 {
            bail!("--models must be ≥ 1 and --tenants ≥ 3");
        }
        if params.cut_at + params.cut_secs >= params.secs {
            bail!("the halving (--cut-at + --cut-secs) must end before --secs");
        }
        if params.tokens_per_s < SINGLE_ANSWER_TPS {
            bail!("--tokens-per-s must be ≥ {SINGLE_ANSWER_TPS}");
        }
        Ok(params)
    }

    fn model(&self, m: usize) -> String {
        format!("m{m}")
    }

    fn tenant(&self, t: usize) -> String {
        format!("t{t:02}")
    }

    fn weight(&self, t: usize) -> f64 {
        WEIGHTS[t % WEIGHTS.len()]
    }

    fn band(&self, t: usize) -> Priority {
        let normal = self.tenants * 2 / 3;
        if t < normal {
            Priority::Normal
        } else if (t - normal).is_multiple_of(2) {
            Priority::High
        } else {
            Priority::Low
        }
    }

    /// Answers in flight that fill the full-capacity GPU.
    fn full_batch(&self) -> f64 {
        self.tokens_per_s / SINGLE_ANSWER_TPS
    }

    /// Capacity factor at `t_ms` after the start.
    fn factor_at(&self, t_ms: u64) -> f64 {
        let (from, to) = (self.cut_at * 1000, (self.cut_at + self.cut_secs) * 1000);
        if (from..to).contains(&t_ms) {
            0.5
        } else {
            1.0
        }
    }

    /// Requests queued per backlogged tenant and model: a quarter of what
    /// the model serves in the run, over twice the largest share a tenant
    /// gets under any policy (a weight-4 tenant: 4/29 of the normal band
    /// under fair sharing; 1/14 of the model when static serves every
    /// backlogged tenant alike), so every tenant stays backlogged (the
    /// share window checks it) while publishing stays short.
    fn backlog(&self) -> usize {
        let per_request = (COMPLETION_TOKENS + 10) as f64;
        (self.tokens_per_s / per_request * self.secs as f64 * 0.25).ceil() as usize
    }

    fn sim(&self) -> sluice_llm_sim::SimConfig {
        let mut sim = sluice_llm_sim::SimConfig::fast();
        sim.models = (0..self.models).map(|m| self.model(m)).collect();
        sim.default_completion_tokens = COMPLETION_TOKENS;
        sim.tokens_per_second = SINGLE_ANSWER_TPS;
        sim.retry_after_secs = 1;
        sim.gpu = Some(GpuConfig {
            capacity: Capacity {
                tokens_per_s: self.tokens_per_s,
                // Room for the full batch's context (prompt + answer), so
                // halving the cache also halves the batch that fits.
                kv_cache_tokens: (self.full_batch() * (COMPLETION_TOKENS + 16) as f64) as u64,
                max_batch: (self.full_batch() * 2.0) as usize,
            },
            max_waiting: SERVER_MAX_WAITING,
            step: Duration::from_millis(10),
            ..GpuConfig::default()
        });
        sim
    }
}

/// One request's life, in ms since the epoch.
#[derive(Clone, Debug)]
struct Record {
    model: usize,
    tenant: usize,
    enqueued_ms: u64,
    first_ms: Option<u64>,
    done_ms: Option<u64>,
}

#[derive(Clone, Debug)]
struct Sample {
    t_ms: u64,
    model: usize,
    waiting: f64,
    running: f64,
    kv_cache_usage: f64,
    tokens_total: f64,
    limit: Option<f64>,
    /// The consumer's calls in flight to the model (`None`: flood).
    in_flight: Option<i64>,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Policy {
    Flood,
    Static,
    Adaptive,
}

impl Policy {
    fn parse(name: &str) -> anyhow::Result<Policy> {
        match name.trim() {
            "flood" => Ok(Policy::Flood),
            "static" => Ok(Policy::Static),
            "adaptive" => Ok(Policy::Adaptive),
            other => bail!("unknown policy {other:?} (flood, static, adaptive)"),
        }
    }

    fn name(self) -> &'static str {
        match self {
            Policy::Flood => "flood",
            Policy::Static => "static",
            Policy::Adaptive => "adaptive+fair",
        }
    }
}

struct RunResult {
    policy: Policy,
    start_ms: u64,
    records: Vec<Record>,
    samples: Vec<Sample>,
    rejected: u64,
}

// ---------------------------------------------------------------- sampling

/// The value of `name{model_name="model"}` in a Prometheus text page.
fn gauge(page: &str, name: &str, model: &str) -> Option<f64> {
    let label = format!(
        "{}=\"{model}\"",
        sluice_openai::model_server::MODEL_NAME_LABEL
    );
    page.lines()
        .filter(|line| line.starts_with(name) && line[name.len()..].starts_with('{'))
        .find(|line| line.contains(&label))
        .and_then(|line| line.rsplit(' ').next()?.parse().ok())
}

async fn scrape(backend: SocketAddr) -> anyhow::Result<String> {
    let answer = tokio::task::spawn_blocking(move || {
        sluice_testkit::http_request(backend, "GET", "/metrics", &[], b"")
    })
    .await??;
    Ok(answer.body)
}

/// Samples the server's gauges (the controller's shared limit when
/// `redis` is given, the consumer's calls in flight when `consumer` is)
/// every [`SAMPLE_EVERY`] until `end_ms`.
async fn sample_loop(
    params: Params,
    backend: SocketAddr,
    mut redis: Option<RedisConn>,
    consumer: Option<Arc<sluice_consumer::Metrics>>,
    start_ms: u64,
    end_ms: u64,
) -> Vec<Sample> {
    let mut samples = Vec::new();
    let mut tick = tokio::time::interval(SAMPLE_EVERY);
    while sluice_contract::now_ms() < end_ms {
        tick.tick().await;
        let Ok(page) = scrape(backend).await else {
            continue;
        };
        let t_ms = sluice_contract::now_ms().saturating_sub(start_ms);
        for m in 0..params.models {
            let model = params.model(m);
            let read = |name: &str| gauge(&page, name, &model).unwrap_or(0.0);
            let limit = match redis.as_mut() {
                Some(conn) => control_loop::shared_state(conn, &model)
                    .await
                    .ok()
                    .and_then(|(limit, _)| limit),
                None => None,
            };
            samples.push(Sample {
                t_ms,
                model: m,
                waiting: read(vllm::NUM_REQUESTS_WAITING),
                running: read(vllm::NUM_REQUESTS_RUNNING),
                kv_cache_usage: read(vllm::KV_CACHE_USAGE_PERC),
                tokens_total: read(&format!("{}_total", vllm::GENERATION_TOKENS))
                    + read(&format!("{}_total", vllm::PROMPT_TOKENS)),
                limit,
                in_flight: consumer.as_ref().map(|metrics| {
                    metrics
                        .in_flight
                        .get_or_create(&metrics.model_label(&model))
                        .get()
                }),
            });
        }
    }
    samples
}

async fn change_capacity(backend: SocketAddr, factor: f64) -> anyhow::Result<()> {
    let change = CapacityChange {
        factor: Some(factor),
        ..CapacityChange::default()
    };
    change_sim_capacity(backend, &change).await
}

/// Halves every GPU at the cut and restores it after.
async fn capacity_schedule(params: Params, backend: SocketAddr) -> anyhow::Result<()> {
    tokio::time::sleep(Duration::from_secs(params.cut_at)).await;
    change_capacity(backend, 0.5).await?;
    tokio::time::sleep(Duration::from_secs(params.cut_secs)).await;
    change_capacity(backend, 1.0).await
}

// ---------------------------------------------------------------- flood

enum CallResult {
    Served { first_ms: u64, done_ms: u64 },
    Rejected { retry_after: Duration },
    Failed,
}

/// One streamed chat call on a fresh connection.
async fn direct_call(backend: SocketAddr, model: &str, tenant: &str) -> anyhow::Result<CallResult> {
    let body = serde_json::json!({
        "model": model,
        "stream": true,
        "user": tenant,
        "messages": [{"role": "user", "content": "hi"}]
    })
    .to_string();
    let mut stream = tokio::net::TcpStream::connect(backend).await?;
    let head = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await?;
    stream.write_all(body.as_bytes()).await?;
    let mut raw = Vec::new();
    let mut buf = [0u8; 4096];
    let mut first_ms = None;
    loop {
        let n = stream.read(&mut buf).await?;
        if n == 0 {
            break;
        }
        raw.extend_from_slice(&buf[..n]);
        // The first event is the role chunk, sent before the GPU admits
        // the request; the second carries the first token.
        if first_ms.is_none() && String::from_utf8_lossy(&raw).matches("data:").count() >= 2 {
            first_ms = Some(sluice_contract::now_ms());
        }
    }
    let text = String::from_utf8_lossy(&raw);
    let status: u16 = text
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .context("no status line")?;
    if status == 429 || status == 503 {
        let retry_after = text
            .lines()
            .find_map(|l| {
                l.to_ascii_lowercase()
                    .strip_prefix("retry-after:")
                    .map(str::to_string)
            })
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(1);
        return Ok(CallResult::Rejected {
            retry_after: Duration::from_secs(retry_after),
        });
    }
    match (status, first_ms) {
        (200, Some(first_ms)) => Ok(CallResult::Served {
            first_ms,
            done_ms: sluice_contract::now_ms(),
        }),
        _ => Ok(CallResult::Failed),
    }
}

/// Calls until served or the run ends; records the request.
async fn flood_request(
    backend: SocketAddr,
    params: &Params,
    (m, t): (usize, usize),
    end_ms: u64,
    rejected: &Mutex<u64>,
) -> Record {
    let mut record = Record {
        model: m,
        tenant: t,
        enqueued_ms: sluice_contract::now_ms(),
        first_ms: None,
        done_ms: None,
    };
    let (model, tenant) = (params.model(m), params.tenant(t));
    while sluice_contract::now_ms() < end_ms {
        match direct_call(backend, &model, &tenant).await {
            Ok(CallResult::Served { first_ms, done_ms }) => {
                record.first_ms = Some(first_ms);
                record.done_ms = Some(done_ms);
                break;
            }
            Ok(CallResult::Rejected { retry_after }) => {
                *rejected.lock().unwrap_or_else(|e| e.into_inner()) += 1;
                tokio::time::sleep(retry_after).await;
            }
            Ok(CallResult::Failed) | Err(_) => {
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    }
    record
}

async fn run_flood(params: &Params) -> anyhow::Result<RunResult> {
    let backend = start_llm_sim(params.sim()).await;
    let start_ms = sluice_contract::now_ms();
    let end_ms = start_ms + params.secs * 1000;
    let rejected = Arc::new(Mutex::new(0u64));
    let records = Arc::new(Mutex::new(Vec::new()));
    let mut clients = Vec::new();
    for m in 0..params.models {
        for t in 0..params.tenants {
            let high = params.band(t) == Priority::High;
            let workers = if high {
                params.high_burst
            } else {
                params.flood_workers
            };
            for _ in 0..workers {
                let (params, rejected, records) =
                    (params.clone(), rejected.clone(), records.clone());
                clients.push(tokio::spawn(async move {
                    while sluice_contract::now_ms() < end_ms {
                        let record =
                            flood_request(backend, &params, (m, t), end_ms, &rejected).await;
                        records
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .push(record);
                        if high {
                            tokio::time::sleep(HIGH_EVERY).await;
                        }
                    }
                }));
            }
        }
    }
    let schedule = tokio::spawn(capacity_schedule(params.clone(), backend));
    let samples = sample_loop(params.clone(), backend, None, None, start_ms, end_ms).await;
    schedule.await??;
    for client in clients {
        client.abort();
    }
    let records = records.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let rejected = *rejected.lock().unwrap_or_else(|e| e.into_inner());
    Ok(RunResult {
        policy: Policy::Flood,
        start_ms,
        records,
        samples,
        rejected,
    })
}

// ---------------------------------------------------------------- consumer

struct Published {
    req_id: String,
    record: Record,
}

async fn publish(
    parts: &QueueParts,
    params: &Params,
    (m, t): (usize, usize),
    req_id: String,
) -> anyhow::Result<Published> {
    let (model, tenant) = (params.model(m), params.tenant(t));
    let mut work = work_item(&tenant, &model, &req_id, COMPLETION_TOKENS + 10);
    work.priority = params.band(t);
    let enqueued_ms = work.enqueued_at_ms;
    parts
        .publisher
        .publish(&tenant, &model, &req_id, work.to_json().into())
        .await
        .map_err(|e| anyhow::anyhow!("publish {req_id}: {e:?}"))?;
    Ok(Published {
        req_id,
        record: Record {
            model: m,
            tenant: t,
            enqueued_ms,
            first_ms: None,
            done_ms: None,
        },
    })
}

/// The backlogged tenants' queues, interleaved.
async fn publish_backlog(parts: &QueueParts, params: &Params) -> anyhow::Result<Vec<Published>> {
    let mut published = Vec::new();
    for i in 0..params.backlog() {
        for m in 0..params.models {
            for t in (0..params.tenants).filter(|t| params.band(*t) != Priority::High) {
                let id = format!("{}-{}-{i}", params.model(m), params.tenant(t));
                published.push(publish(parts, params, (m, t), id).await?);
            }
        }
    }
    Ok(published)
}

/// The high band's bursts until `end_ms`.
async fn publish_bursts(
    parts: &QueueParts,
    params: &Params,
    end_ms: u64,
) -> anyhow::Result<Vec<Published>> {
    let mut published = Vec::new();
    let mut round = 0;
    while sluice_contract::now_ms() + HIGH_EVERY.as_millis() as u64 / 2 < end_ms {
        for m in 0..params.models {
            for t in (0..params.tenants).filter(|t| params.band(*t) == Priority::High) {
                for k in 0..params.high_burst {
                    let id = format!("{}-{}-h{round}-{k}", params.model(m), params.tenant(t));
                    published.push(publish(parts, params, (m, t), id).await?);
                }
            }
        }
        round += 1;
        tokio::time::sleep(HIGH_EVERY).await;
    }
    Ok(published)
}

/// First and last chunk of a request's answer (Redis's clock, ms), and
/// whether it is done.
async fn answer_times(conn: &mut RedisConn, req_id: &str) -> (Option<u64>, Option<u64>) {
    let ms_of = |entries: Vec<(String, HashMap<String, String>)>| {
        let (id, _) = entries.into_iter().next()?;
        id.split_once('-')?.0.parse::<u64>().ok()
    };
    let stream = keys::response(req_id);
    let first: Vec<(String, HashMap<String, String>)> = redis::cmd("XRANGE")
        .arg(&stream)
        .arg("-")
        .arg("+")
        .arg("COUNT")
        .arg(1)
        .query_async(conn)
        .await
        .unwrap_or_default();
    let done: bool = redis::cmd("EXISTS")
        .arg(keys::done(req_id))
        .query_async(conn)
        .await
        .unwrap_or(false);
    if !done {
        return (ms_of(first), None);
    }
    let last: Vec<(String, HashMap<String, String>)> = redis::cmd("XREVRANGE")
        .arg(&stream)
        .arg("+")
        .arg("-")
        .arg("COUNT")
        .arg(1)
        .query_async(conn)
        .await
        .unwrap_or_default();
    (ms_of(first), ms_of(last))
}

/// 429/503 answers the consumer got from the model (its failure counter
/// with `kind="backend_busy"`).
fn busy_answers(metrics_text: &str) -> u64 {
    metrics_text
        .lines()
        .filter(|l| !l.starts_with('#') && l.contains("kind=\"backend_busy\""))
        .filter(|l| l.split('{').next().is_some_and(|n| n.ends_with("_total")))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .map(|v| v as u64)
        .max()
        .unwrap_or(0)
}

fn consumer_spec(params: &Params, policy: Policy, backend: SocketAddr) -> ConsumerSpec {
    let models: Vec<String> = (0..params.models).map(|m| params.model(m)).collect();
    let mut spec = ConsumerSpec {
        pacing: unpaced(),
        ..ConsumerSpec::new("bench")
    };
    // The figures are read from the answers' streams at the end: keep them
    // for the whole run (the default 300 s would leave only the last answers
    // of a longer run).
    spec.config.stream.ttl_after_end_secs = spec
        .config
        .stream
        .ttl_after_end_secs
        .max(params.secs.saturating_add(300));
    match policy {
        Policy::Static => {
            spec.limits = InFlightConfig {
                default_max_in_flight: Some(params.static_cap),
                ..InFlightConfig::default()
            };
        }
        Policy::Adaptive | Policy::Flood => {
            let control = ModelControl {
                signal: SignalConfig::Prometheus {
                    url: format!("http://{backend}/metrics"),
                },
                floor: 1,
                ceiling: (params.full_batch() * 4.0) as u32,
                initial: Some(2),
                target_waiting: params.target_waiting,
                // The sim's answers hold on average ~0.6 of their final
                // context: an average cache use of 0.6 is a full cache
                // when they all reach their end (recompute preemption).
                target_kv_usage: Some(params.target_kv_usage),
                // The cache fills and empties with each cohort of answers
                // (~2-5 s): smooth over several 500 ms steps.
                smoothing: 0.3,
                // Half a slot per 500 ms step above the last decrease: a
                // slot per second, slower than a cohort fills the cache.
                increase_step: 0.5,
                interval_ms: 500,
                ..ModelControl::default()
            };
            spec.controller = ControllerConfig {
                models: models
                    .iter()
                    .map(|m| (m.clone(), control.clone()))
                    .collect(),
            };
            spec.fair = FairConfig {
                models: models.clone(),
                weights: (0..params.tenants)
                    .map(|t| (params.tenant(t), params.weight(t)))
                    .collect(),
                ..FairConfig::default()
            };
        }
    }
    spec
}

/// Marks every bucket subscribed, as after a burst of deferrals, so the
/// publisher does not wait for the (not yet started) consumer.
async fn announce_buckets(parts: &QueueParts, params: &Params) -> anyhow::Result<()> {
    let topics: Vec<String> = (0..params.models)
        .flat_map(|m| (0..params.tenants).map(move |t| (m, t)))
        .map(|(m, t)| lite_topic_name(&params.tenant(t), &params.model(m)))
        .collect();
    let mut conn = parts.conn.clone();
    sluice_contract::bookkeeping::mark_subscribed(&mut conn, &topics).await?;
    Ok(())
}

async fn run_consumer(params: &Params, policy: Policy) -> anyhow::Result<RunResult> {
    let parts = QueueParts::start(RedisKind::Single, params.sim()).await;
    announce_buckets(&parts, params).await?;
    let mut published = publish_backlog(&parts, params).await?;
    eprintln!(
        "{}: {} requests queued; consumer starting",
        policy.name(),
        published.len()
    );
    let spec = consumer_spec(params, policy, parts.backend);
    let consumer = start_consumer(&parts.conn, &parts.broker, parts.backend, spec).await;
    let start_ms = sluice_contract::now_ms();
    let end_ms = start_ms + params.secs * 1000;
    let redis = (policy == Policy::Adaptive).then(|| parts.conn.clone());
    let schedule = tokio::spawn(capacity_schedule(params.clone(), parts.backend));
    let sampler = tokio::spawn(sample_loop(
        params.clone(),
        parts.backend,
        redis,
        Some(consumer.metrics.clone()),
        start_ms,
        end_ms,
    ));
    published.extend(publish_bursts(&parts, params, end_ms).await?);
    let samples = sampler.await?;
    schedule.await??;
    let rejected = busy_answers(&consumer.metrics.encode());
    // Answers finished after the end are not counted (their done time is
    // past it); stopping only ends the run.
    let _ = tokio::time::timeout(Duration::from_secs(30), consumer.stop()).await;
    let mut conn = parts.conn.clone();
    let mut records = Vec::with_capacity(published.len());
    for Published { req_id, mut record } in published {
        let (first_ms, done_ms) = answer_times(&mut conn, &req_id).await;
        record.first_ms = first_ms.filter(|ms| *ms <= end_ms);
        record.done_ms = done_ms.filter(|ms| *ms <= end_ms);
        records.push(record);
    }
    Ok(RunResult {
        policy,
        start_ms,
        records,
        samples,
        rejected,
    })
}

// ---------------------------------------------------------------- figures

fn percentile(values: &mut [f64], p: f64) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    values.sort_by(f64::total_cmp);
    let rank = ((p / 100.0) * values.len() as f64).ceil() as usize;
    values[rank.clamp(1, values.len()) - 1]
}

fn jain(values: &[f64]) -> f64 {
    let sum: f64 = values.iter().sum();
    let squares: f64 = values.iter().map(|v| v * v).sum();
    if squares == 0.0 {
        return f64::NAN;
    }
    sum * sum / (values.len() as f64 * squares)
}

struct Figures {
    policy: &'static str,
    utilization: f64,
    waiting_p99: f64,
    rejected: u64,
    completed: usize,
    share_deviation: f64,
    /// Answers of the normal-band tenant with the fewest in the share
    /// window: one answer is `1 / n` of its share, the granularity of the
    /// share deviation.
    fewest_answers: f64,
    jain_min: f64,
    /// Per band (high, normal, low): (p50, p99) queue wait in s, served count.
    waits: Vec<(&'static str, f64, f64, usize)>,
    /// Seconds after the cut and after the restore, band max(±10 %, ±1
    /// slot) around the last 10 s ([`SettleBand::RelativeOrSlot`]); `None`:
    /// no controller or it never settled.
    settling: Vec<Option<f64>>,
    /// The first definition: ±10 % of the last 3 s
    /// ([`SettleBand::Relative`]).
    settling_relative: Vec<Option<f64>>,
    /// Normal band, per tenant and model.
    tenant_shares: Vec<TenantShare>,
    /// Normal band: share of tokens per weight class vs the weights' share.
    class_shares: Vec<(f64, f64, f64)>,
}

/// Whether some request of `model` is queued or running at `t` (ms since epoch).
fn work_pending(records: &[Record], model: usize, t: u64) -> bool {
    records
        .iter()
        .any(|r| r.model == model && r.enqueued_ms <= t && r.done_ms.is_none_or(|d| d > t))
}

/// Tokens processed ÷ tokens the GPUs could process, over the sample
/// intervals in which work was queued or running.
fn utilization(params: &Params, run: &RunResult) -> f64 {
    let (mut used, mut possible) = (0.0, 0.0);
    for m in 0..params.models {
        let series: Vec<&Sample> = run.samples.iter().filter(|s| s.model == m).collect();
        for pair in series.windows(2) {
            let (a, b) = (pair[0], pair[1]);
            if !work_pending(&run.records, m, run.start_ms + a.t_ms) {
                continue;
            }
            let dt = (b.t_ms - a.t_ms) as f64 / 1000.0;
            used += (b.tokens_total - a.tokens_total).max(0.0);
            possible += params.tokens_per_s * params.factor_at(a.t_ms) * dt;
        }
    }
    used / possible
}

/// Answers still running at the end are cut off; the share window ends
/// this long before the run so that the answers running at its end are done.
const SHARE_TAIL_MS: u64 = 10_000;

/// Until when (ms since epoch) every tenant in `tenants` of `model` has
/// demand outstanding (a request enqueued and not done) without a gap from
/// `from`; at most `to`.
fn all_backlogged_until(
    run: &RunResult,
    model: usize,
    tenants: &[usize],
    (from, to): (u64, u64),
) -> u64 {
    tenants
        .iter()
        .map(|t| {
            let mut spans: Vec<(u64, u64)> = run
                .records
                .iter()
                .filter(|r| r.model == model && r.tenant == *t)
                .map(|r| (r.enqueued_ms, r.done_ms.unwrap_or(u64::MAX)))
                .collect();
            spans.sort_unstable();
            let mut covered = from;
            for (start, done) in spans {
                if start > covered {
                    break;
                }
                covered = covered.max(done);
            }
            covered.min(to)
        })
        .min()
        .unwrap_or(to)
}

/// Tokens of `record`'s answer generated inside `[from, to)`, the answer's
/// tokens spread evenly from its first to its last chunk (an answer across
/// an edge of the window counts in part, not all or nothing).
fn tokens_within(record: &Record, (from, to): (u64, u64)) -> f64 {
    let (Some(first), Some(done)) = (record.first_ms, record.done_ms) else {
        return 0.0;
    };
    let overlap = done.min(to).saturating_sub(first.max(from)) as f64;
    if done <= first {
        return if (from..to).contains(&done) {
            COMPLETION_TOKENS as f64
        } else {
            0.0
        };
    }
    COMPLETION_TOKENS as f64 * overlap / (done - first) as f64
}

/// One normal-band tenant's share of its model's normal-band tokens.
#[derive(Clone, Debug)]
struct TenantShare {
    model: usize,
    tenant: usize,
    weight: f64,
    /// Answers' worth of tokens in the window.
    answers: f64,
    share: f64,
    expected: f64,
}

/// The normal band's shares per tenant and model, over the window in which
/// every normal-band tenant of the model is backlogged (after the warm-up,
/// up to [`SHARE_TAIL_MS`] before the end).
fn tenant_shares(params: &Params, run: &RunResult) -> Vec<TenantShare> {
    let normal: Vec<usize> = (0..params.tenants)
        .filter(|t| params.band(*t) == Priority::Normal)
        .collect();
    let weight_sum: f64 = normal.iter().map(|t| params.weight(*t)).sum();
    let mut shares = Vec::new();
    for m in 0..params.models {
        let from = run.start_ms + SHARE_WARMUP_MS;
        let end = run.start_ms + (params.secs * 1000).saturating_sub(SHARE_TAIL_MS);
        let window = (from, all_backlogged_until(run, m, &normal, (from, end)));
        let tokens: Vec<f64> = normal
            .iter()
            .map(|t| {
                run.records
                    .iter()
                    .filter(|r| r.model == m && r.tenant == *t)
                    .map(|r| tokens_within(r, window))
                    .sum()
            })
            .collect();
        let total: f64 = tokens.iter().sum();
        for (t, tokens) in normal.iter().zip(tokens) {
            shares.push(TenantShare {
                model: m,
                tenant: *t,
                weight: params.weight(*t),
                answers: tokens / COMPLETION_TOKENS as f64,
                share: tokens / total,
                expected: params.weight(*t) / weight_sum,
            });
        }
    }
    shares
}

/// Max share deviation, fewest answers, lowest Jain index among equal
/// weights, and per weight class (weight, share, expected).
fn fairness(params: &Params, shares: &[TenantShare]) -> (f64, f64, f64, Vec<(f64, f64, f64)>) {
    let deviation = shares
        .iter()
        .map(|s| (s.share / s.expected - 1.0).abs())
        .fold(0.0, f64::max);
    let fewest = shares
        .iter()
        .map(|s| s.answers)
        .fold(f64::INFINITY, f64::min);
    let mut jain_min = f64::INFINITY;
    for m in 0..params.models {
        for weight in WEIGHTS {
            let equal: Vec<f64> = shares
                .iter()
                .filter(|s| s.model == m && s.weight == weight)
                .map(|s| s.share)
                .collect();
            if equal.len() >= 2 {
                jain_min = jain_min.min(jain(&equal));
            }
        }
    }
    let class_shares = WEIGHTS
        .iter()
        .map(|weight| {
            let class = shares.iter().filter(|s| s.weight == *weight);
            let (share, expected) =
                class.fold((0.0, 0.0), |(a, b), s| (a + s.share, b + s.expected));
            let models = params.models as f64;
            (*weight, share / models, expected / models)
        })
        .collect();
    (deviation, fewest, jain_min, class_shares)
}

fn band_waits(params: &Params, run: &RunResult) -> Vec<(&'static str, f64, f64, usize)> {
    [
        (Priority::High, "high"),
        (Priority::Normal, "normal"),
        (Priority::Low, "low"),
    ]
    .into_iter()
    .map(|(band, name)| {
        let mut waits: Vec<f64> = run
            .records
            .iter()
            .filter(|r| params.band(r.tenant) == band)
            .filter_map(|r| Some(r.first_ms?.saturating_sub(r.enqueued_ms) as f64 / 1000.0))
            .collect();
        let served = waits.len();
        let p50 = percentile(&mut waits, 50.0);
        let p99 = percentile(&mut waits, 99.0);
        (name, p50, p99, served)
    })
    .collect()
}

/// What "settled" means: how close to which final level.
#[derive(Clone, Copy)]
enum SettleBand {
    /// Within ±10 % of the median of the last 3 s before the next change
    /// (the first definition).
    Relative,
    /// Within ±10 %, but at least ±1 slot, of the median of the last 10 s.
    /// The cap applied is the limit's whole part, so a band under one slot
    /// (a limit under 10) asks for more than the actuator resolves; and a
    /// controller that probes for capacity moves its cap by a slot and
    /// back every few seconds, so 3 s catch one phase of that, not the
    /// level.
    RelativeOrSlot,
}

impl SettleBand {
    fn half_width(self, last: f64) -> f64 {
        match self {
            SettleBand::Relative => 0.1 * last,
            SettleBand::RelativeOrSlot => (0.1 * last).max(1.0),
        }
    }

    fn level_window_ms(self) -> u64 {
        match self {
            SettleBand::Relative => 3_000,
            SettleBand::RelativeOrSlot => 10_000,
        }
    }
}

/// Time after each capacity change until the controller's limit stays
/// within `band` of its final level (the median of the limit over the
/// band's window before the next change); the slowest model.
fn settling(params: &Params, run: &RunResult, band: SettleBand) -> Vec<Option<f64>> {
    let changes = [
        params.cut_at * 1000,
        (params.cut_at + params.cut_secs) * 1000,
        params.secs * 1000,
    ];
    changes
        .windows(2)
        .map(|span| {
            let (from, to) = (span[0], span[1]);
            let mut slowest: Option<f64> = Some(0.0);
            for m in 0..params.models {
                let series: Vec<(u64, f64)> = run
                    .samples
                    .iter()
                    .filter(|s| s.model == m && (from..to).contains(&s.t_ms))
                    .filter_map(|s| Some((s.t_ms, s.limit?)))
                    .collect();
                let mut tail: Vec<f64> = series
                    .iter()
                    .filter(|(t, _)| *t + band.level_window_ms() >= to)
                    .map(|(_, l)| *l)
                    .collect();
                if series.is_empty() || tail.is_empty() {
                    return None;
                }
                let last = percentile(&mut tail, 50.0);
                let settled_at = series
                    .iter()
                    .rev()
                    .find(|(_, l)| (l - last).abs() > band.half_width(last))
                    .map_or(from, |(t, _)| *t + SAMPLE_EVERY.as_millis() as u64);
                let secs = settled_at.saturating_sub(from) as f64 / 1000.0;
                slowest = slowest.map(|s| s.max(secs));
            }
            slowest
        })
        .collect()
}

fn figures(params: &Params, run: &RunResult) -> Figures {
    let mut waiting: Vec<f64> = run.samples.iter().map(|s| s.waiting).collect();
    let tenant_shares = tenant_shares(params, run);
    let (share_deviation, fewest_answers, jain_min, class_shares) =
        fairness(params, &tenant_shares);
    let settle = |band| {
        if run.policy == Policy::Adaptive {
            settling(params, run, band)
        } else {
            vec![None, None]
        }
    };
    Figures {
        policy: run.policy.name(),
        utilization: utilization(params, run),
        waiting_p99: percentile(&mut waiting, 99.0),
        rejected: run.rejected,
        completed: run.records.iter().filter(|r| r.done_ms.is_some()).count(),
        share_deviation,
        fewest_answers,
        jain_min,
        waits: band_waits(params, run),
        settling: settle(SettleBand::RelativeOrSlot),
        settling_relative: settle(SettleBand::Relative),
        tenant_shares,
        class_shares,
    }
}

// ---------------------------------------------------------------- output

fn seconds(value: Option<f64>) -> String {
    value.map_or("-".into(), |s| format!("{s:.1} s"))
}

fn table(params: &Params, all: &[Figures]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{} models × {} tenants, {} s, capacity × 0.5 from {} s to {} s; {} tokens/s per model \
         (full batch {:.0}), server queue limit {}, controller target {} waiting",
        params.models,
        params.tenants,
        params.secs,
        params.cut_at,
        params.cut_at + params.cut_secs,
        params.tokens_per_s,
        params.full_batch(),
        SERVER_MAX_WAITING,
        params.target_waiting
    );
    let _ = writeln!(
        out,
        "| policy | GPU util | server queue p99 | 429/503 | done | max share dev (1 answer) | Jain (min) \
         | wait high p50/p99 | wait normal p50/p99 | wait low p50/p99 (served) \
         | settle cut / restore | ±10 % of last 3 s |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|---|---|---|---|---|---|---|");
    for f in all {
        let wait = |i: usize| match f.waits[i] {
            (_, _, _, 0) => "- (0)".to_string(),
            (_, p50, p99, served) => format!("{p50:.1} / {p99:.1} s ({served})"),
        };
        let _ = writeln!(
            out,
            "| {} | {:.1} % | {:.0} | {} | {} | {:.1} % ({:.1} %) | {:.3} | {} | {} | {} | {} / {} | {} / {} |",
            f.policy,
            f.utilization * 100.0,
            f.waiting_p99,
            f.rejected,
            f.completed,
            f.share_deviation * 100.0,
            100.0 / f.fewest_answers,
            f.jain_min,
            wait(0),
            wait(1),
            wait(2),
            seconds(f.settling[0]),
            seconds(f.settling[1]),
            seconds(f.settling_relative[0]),
            seconds(f.settling_relative[1]),
        );
    }
    let _ = writeln!(
        out,
        "\nnormal band, per weight: answers per tenant (min..max) and the largest \
         share deviation of a tenant of that weight:"
    );
    for f in all {
        let per_weight: Vec<String> = WEIGHTS
            .iter()
            .map(|w| {
                let of = || f.tenant_shares.iter().filter(|s| s.weight == *w);
                let answers =
                    |pick: fn(f64, f64) -> f64, start| of().map(|s| s.answers).fold(start, pick);
                let dev = of()
                    .map(|s| (s.share / s.expected - 1.0).abs())
                    .fold(0.0, f64::max);
                format!(
                    "w{w}: {:.0}..{:.0} answers, {:.1} %",
                    answers(f64::min, f64::INFINITY),
                    answers(f64::max, 0.0),
                    dev * 100.0
                )
            })
            .collect();
        let _ = writeln!(out, "  {:<14} {}", f.policy, per_weight.join("; "));
    }
    let _ = writeln!(
        out,
        "\nnormal band, share of tokens per weight class (expected):"
    );
    for f in all {
        let classes: Vec<String> = f
            .class_shares
            .iter()
            .map(|(w, share, expected)| {
                format!("w{w}: {:.1} % ({:.1} %)", share * 100.0, expected * 100.0)
            })
            .collect();
        let _ = writeln!(out, "  {:<14} {}", f.policy, classes.join(", "));
    }
    out
}

fn started_per_s(run: &RunResult, model: usize, t_ms: u64) -> usize {
    let from = run.start_ms + t_ms.saturating_sub(1000);
    let to = run.start_ms + t_ms;
    run.records
        .iter()
        .filter(|r| r.model == model && r.first_ms.is_some_and(|f| f > from && f <= to))
        .count()
}

fn write_csv(params: &Params, runs: &[RunResult], all: &[Figures]) -> anyhow::Result<()> {
    let mut series = String::from(
        "policy,t_s,model,capacity_tokens_per_s,tokens_total,waiting,running,kv_cache_usage,limit,in_flight,\
         started_last_s\n",
    );
    for run in runs {
        for s in &run.samples {
            let _ = writeln!(
                series,
                "{},{:.2},{},{},{},{},{},{:.3},{},{},{}",
                run.policy.name(),
                s.t_ms as f64 / 1000.0,
                params.model(s.model),
                params.tokens_per_s * params.factor_at(s.t_ms),
                s.tokens_total,
                s.waiting,
                s.running,
                s.kv_cache_usage,
                s.limit.map_or(String::new(), |l| l.to_string()),
                s.in_flight.map_or(String::new(), |n| n.to_string()),
                started_per_s(run, s.model, s.t_ms),
            );
        }
    }
    std::fs::write(params.out.join("pacing_bench.csv"), series)?;
    let mut summary = String::from(
        "policy,utilization,server_waiting_p99,rejected,completed,max_share_deviation,jain_min,\
         wait_high_p50_s,wait_high_p99_s,wait_normal_p50_s,wait_normal_p99_s,wait_low_p50_s,\
         wait_low_p99_s,settle_cut_s,settle_restore_s,settle_relative_cut_s,\
         settle_relative_restore_s,fewest_answers\n",
    );
    for f in all {
        let opt = |v: Option<f64>| v.map_or(String::new(), |v| format!("{v:.2}"));
        let _ = writeln!(
            summary,
            "{},{:.4},{},{},{},{:.4},{:.4},{:.2},{:.2},{:.2},{:.2},{:.2},{:.2},{},{},{},{},{:.1}",
            f.policy,
            f.utilization,
            f.waiting_p99,
            f.rejected,
            f.completed,
            f.share_deviation,
            f.jain_min,
            f.waits[0].1,
            f.waits[0].2,
            f.waits[1].1,
            f.waits[1].2,
            f.waits[2].1,
            f.waits[2].2,
            opt(f.settling[0]),
            opt(f.settling[1]),
            opt(f.settling_relative[0]),
            opt(f.settling_relative[1]),
            f.fewest_answers,
        );
    }
    std::fs::write(params.out.join("pacing_bench_summary.csv"), summary)?;
    let mut shares =
        String::from("policy,model,tenant,weight,answers,share,expected_share,deviation\n");
    for f in all {
        for s in &f.tenant_shares {
            let _ = writeln!(
                shares,
                "{},{},{},{},{:.2},{:.5},{:.5},{:.4}",
                f.policy,
                params.model(s.model),
                params.tenant(s.tenant),
                s.weight,
                s.answers,
                s.share,
                s.expected,
                s.share / s.expected - 1.0
            );
        }
    }
    std::fs::write(params.out.join("pacing_bench_shares.csv"), shares)?;
    Ok(())
}

/// Per second and summed over models: (t s, capacity tokens/s, processed
/// tokens/s, limit sum, started calls).
/// Per second of a run: (second, capacity, processed tokens/s, controller
/// limit, calls started/s).
type SecondRow = (f64, f64, f64, Option<f64>, f64);

fn per_second(params: &Params, run: &RunResult) -> Vec<SecondRow> {
    let mut rows = Vec::new();
    for second in 1..=params.secs {
        let t_ms = second * 1000;
        let (mut tokens, mut limit, mut started) = (0.0, None::<f64>, 0.0);
        for m in 0..params.models {
            let at = |ms: u64| {
                run.samples
                    .iter()
                    .rev()
                    .find(|s| s.model == m && s.t_ms <= ms)
            };
            if let (Some(a), Some(b)) = (at(t_ms - 1000), at(t_ms)) {
                let dt = (b.t_ms - a.t_ms).max(1) as f64 / 1000.0;
                tokens += (b.tokens_total - a.tokens_total).max(0.0) / dt;
                if let Some(l) = b.limit {
                    limit = Some(limit.unwrap_or(0.0) + l);
                }
            }
            started += started_per_s(run, m, t_ms) as f64;
        }
        let capacity = params.tokens_per_s * params.factor_at(t_ms - 500) * params.models as f64;
        rows.push((second as f64, capacity, tokens, limit, started));
    }
    rows
}

/// Per policy: capacity, processed tokens/s and calls started/s (in tokens)
/// over time, and the adaptive controller's limit where there is one. The
/// normal band's shares per weight class are in the table and
/// `pacing_bench_summary.csv`.
fn write_chart(params: &Params, runs: &[RunResult]) -> anyhow::Result<()> {
    let mut panels = Vec::new();
    for run in runs {
        let rows = per_second(params, run);
        let line = |label: &str, color, value: &dyn Fn(&SecondRow) -> f64| {
            Series::solid(
                label.into(),
                rows.iter().map(|r| (r.0, value(r))).collect(),
                color,
            )
        };
        panels.push(Panel {
            title: format!("{}: tokens/s", run.policy.name()),
            y_label: "tokens/s".into(),
            series: vec![
                line("capacity", 7, &|r| r.1).thin(),
                line("processed", 0, &|r| r.2),
                line(&format!("calls started/s ×{COMPLETION_TOKENS}"), 2, &|r| {
                    r.4 * COMPLETION_TOKENS as f64
                }),
            ],
        });
        let limits: Vec<(f64, f64)> = rows.iter().filter_map(|r| Some((r.0, r.3?))).collect();
        if !limits.is_empty() {
            panels.push(Panel {
                title: format!("{}: controller limit", run.policy.name()),
                y_label: "in flight".into(),
                series: vec![Series::solid("limit".into(), limits, 3)],
            });
        }
    }
    let chart = Chart {
        title: format!(
            "pacing_bench: {} models × {} tenants, capacity halved {}..{} s",
            params.models,
            params.tenants,
            params.cut_at,
            params.cut_at + params.cut_secs
        ),
        x_label: "seconds".into(),
        width: 900,
        height: 220 * panels.len().max(1) as u32 + 40,
        panels,
    };
    sluice_testkit::chart::render(&chart, &params.out.join("pacing_bench.svg"))?;
    Ok(())
}

#[tokio::main(flavor = "multi_thread")]
async fn main() -> anyhow::Result<()> {
    let params = Params::parse_checked()?;
    std::fs::create_dir_all(&params.out)
        .with_context(|| format!("PACING_OUT={}", params.out.display()))?;
    eprintln!("{params:?}");
    let mut runs = Vec::new();
    for policy in params.policies.clone() {
        runs.push(match policy {
            Policy::Flood => {
                eprintln!("flood: running {} s", params.secs);
                run_flood(&params).await?
            }
            Policy::Static | Policy::Adaptive => run_consumer(&params, policy).await?,
        });
    }
    let all: Vec<Figures> = runs.iter().map(|run| figures(&params, run)).collect();
    print!("{}", table(&params, &all));
    write_csv(&params, &runs, &all)?;
    write_chart(&params, &runs)?;
    println!(
        "wrote {}/pacing_bench.csv, pacing_bench_summary.csv, pacing_bench.svg",
        params.out.display()
    );
    Ok(())
}
