//! `cargo run -p sluice-bench --bin accounting_bench -- [REQUESTS] [wasm|ext_authz]`
//!
//! Token-accounting drift, end to end: REQUESTS (default 10 000) requests
//! through real Envoy + the built Wasm filter + sluice-rls on Redis + llm-sim,
//! with one-second token windows (so the run spans many window boundaries).
//! Each request class has its own tenant; llm-sim keeps a ledger per tenant of
//! what it really sent (`x-sim-ledger`). At the end every tenant's window
//! counters (summed over every window of the run) are compared with its ledger.
//!
//! Classes: JSON chat; SSE with include_usage; SSE without include_usage; SSE
//! completions with two prompts (n = 2 choices); embeddings; tool calls
//! (chat with `tools`: llm-sim answers with a call), whole and streamed
//! without include_usage; 5 % clients that disconnect mid-stream; 2 %
//! backends that fail mid-stream (half of them tool-call streams); 3 %
//! deferred (their tenant's token limit defers everything: the deferral
//! endpoint on the broker, run by a consumer with token pacing, whose
//! per-tenant usage metric is compared with the ledger, and whose pacing
//! corrections are counted).
//!
//! For broken streams the filter charges its exact prompt count (BPE) plus
//! the output that passed; llm-sim's ledger holds its own approximate prompt
//! count. The report separates that prompt-count difference from the output
//! drift. With `ext_authz` as the front door (no Wasm: sluice-rls's
//! ext_authz, which never sees the answer) the same run measures that mode's
//! documented approximation. The "usage metric" column is the filter's
//! `sluice_tenant_tokens_total` (prompt + completion) per tenant, the
//! consumer's for deferred requests. Prints figures; asserts nothing.

use sluice_admission::admission::Encoders;
use sluice_admission::config::FilterConfig;
use sluice_admission::encoders::BpeEncoders;
use sluice_admission::host::{UsageKind, TENANT_TOKENS_STAT};
use sluice_admission::openai::{self, Endpoint};
use sluice_consumer::Correction;
use sluice_llm_sim::ledger::LedgerEntry;
use sluice_llm_sim::text::splitmix64;
use sluice_ratelimit::ext_authz::ExtAuthzService;
use sluice_ratelimit::limiter::Limiter;
use sluice_ratelimit::metrics::Metrics;
use sluice_ratelimit::server::{run, Deps};
use sluice_ratelimit::store::{RedisStore, RedisStoreOptions};
use sluice_testkit::stack::{
    deferral_endpoint, endpoint_config, redis_connection, start_broker, start_consumer,
    token_paced, ConsumerInstance, ConsumerSpec,
};
use sluice_testkit::{
    example_deferral_secret, free_port, http_request, sluice_filter_envoy_config, workspace_root,
    Envoy, RedisServer, SluiceFilterPorts,
};
use std::collections::BTreeMap;
use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

const LIMITS: &str = r#"
domain: sluice
descriptors:
  - key: tenant
    value: deferred
    descriptors:
      - key: model
        rate_limit: { unit: hour, requests_per_unit: 4000000000 }
        descriptors:
          - key: tokens
            rate_limit: { unit: hour, requests_per_unit: 1,
                          sluice: { over_limit: defer, priority: normal } }
  - key: tenant
    descriptors:
      - key: model
        rate_limit: { unit: hour, requests_per_unit: 4000000000 }
        descriptors:
          - key: tokens
            rate_limit: { unit: second, requests_per_unit: 4000000000 }
"#;
const LIMIT: u64 = 4_000_000_000;
const CLIENTS: usize = 8;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Class {
    Json,
    SseWithUsage,
    SseWithoutUsage,
    SseTwoChoices,
    Embeddings,
    ToolCallsJson,
    ToolCallsSse,
    ClientDisconnects,
    BackendBreaks,
    ToolCallBreaks,
    Deferred,
}

impl Class {
    const ALL: [Class; 11] = [
        Class::Json,
        Class::SseWithUsage,
        Class::SseWithoutUsage,
        Class::SseTwoChoices,
        Class::Embeddings,
        Class::ToolCallsJson,
        Class::ToolCallsSse,
        Class::ClientDisconnects,
        Class::BackendBreaks,
        Class::ToolCallBreaks,
        Class::Deferred,
    ];

    /// The tenant (and ledger key) of the class.
    fn tenant(self) -> &'static str {
        match self {
            Class::Json => "json",
            Class::SseWithUsage => "sse-usage",
            Class::SseWithoutUsage => "sse-plain",
            Class::SseTwoChoices => "sse-n2",
            Class::Embeddings => "embeddings",
            Class::ToolCallsJson => "tools-json",
            Class::ToolCallsSse => "tools-sse",
            Class::ClientDisconnects => "disconnects",
            Class::BackendBreaks => "backend-breaks",
            Class::ToolCallBreaks => "tools-breaks",
            Class::Deferred => "deferred",
        }
    }

    /// Out of 100: 16 % tool calls, 5 % disconnects, 2 % backend failures
    /// (1 % of them tool-call streams), 3 % deferred.
    fn of(draw: u64) -> Class {
        match draw % 100 {
            0..=17 => Class::Json,
            18..=20 => Class::Deferred,
            21..=36 => Class::SseWithUsage,
            37..=54 => Class::SseWithoutUsage,
            55..=64 => Class::SseTwoChoices,
            65..=75 => Class::Embeddings,
            76..=83 => Class::ToolCallsJson,
            84..=91 => Class::ToolCallsSse,
            92..=96 => Class::ClientDisconnects,
            97..=98 => Class::BackendBreaks,
            _ => Class::ToolCallBreaks,
        }
    }
}

const WORDS: [&str; 12] = [
    "tokens",
    "gateway",
    "budget",
    "stream",
    "tenant",
    "window",
    "über",
    "naïve",
    "東京",
    "🚀",
    "reconcile",
    "estimate",
];

fn prompt_text(seed: u64) -> String {
    let words = 5 + seed % 60;
    (0..words)
        .map(|i| WORDS[(splitmix64(seed ^ i) % WORDS.len() as u64) as usize])
        .collect::<Vec<_>>()
        .join(" ")
}

/// One request: path, body, extra headers, and how many content deltas the
/// client reads before it leaves (disconnects only).
struct Planned {
    class: Class,
    path: &'static str,
    body: String,
    headers: Vec<(&'static str, String)>,
    leave_after: Option<u64>,
}

/// One to three function tools (llm-sim calls one of them, picked by a hash
/// of the request). Their names' o200k counts equal llm-sim's approximate
/// counts, so a broken call's drift is the tokens in flight only.
fn tools_of(seed: u64) -> serde_json::Value {
    const NAMES: [&str; 3] = ["get_time", "get_news", "get_user_id"];
    let count = 1 + (seed >> 40) % 3;
    NAMES
        .iter()
        .take(count as usize)
        .map(|name| {
            serde_json::json!({"type": "function", "function": {"name": name,
                "description": format!("{name} for the user"),
                "parameters": {"type": "object", "properties": {"query": {"type": "string"}}}}})
        })
        .collect()
}

fn plan(i: u64) -> Planned {
    let seed = splitmix64(i);
    let class = Class::of(seed);
    let text = prompt_text(seed >> 8);
    let completion = 1 + (seed >> 20) % 120;
    let chat_with = |stream: bool, usage: bool, tools: bool| {
        let mut body = serde_json::json!({
            "model": "gpt-4o",
            "max_tokens": 400,
            "messages": [{"role": "user", "content": text}]
        });
        if stream {
            body["stream"] = true.into();
        }
        if usage {
            body["stream_options"] = serde_json::json!({"include_usage": true});
        }
        if tools {
            body["tools"] = tools_of(seed);
        }
        body.to_string()
    };
    let chat = |stream: bool, usage: bool| chat_with(stream, usage, false);
    let mut headers = vec![("x-sim-completion-tokens", completion.to_string())];
    let mut leave_after = None;
    let (path, body) = match class {
        Class::Json | Class::Deferred => ("/v1/chat/completions", chat(false, false)),
        Class::SseWithUsage => ("/v1/chat/completions", chat(true, true)),
        Class::SseWithoutUsage => ("/v1/chat/completions", chat(true, false)),
        Class::SseTwoChoices => (
            "/v1/completions",
            serde_json::json!({
                "model": "gpt-4o", "stream": true, "max_tokens": 400,
                "prompt": [text.clone(), format!("{text} again")]
            })
            .to_string(),
        ),
        Class::Embeddings => (
            "/v1/embeddings",
            serde_json::json!({"model": "text-embedding-3-small", "input": [text.clone(), "second"]})
                .to_string(),
        ),
        Class::ClientDisconnects => {
            headers = vec![
                ("x-sim-completion-tokens", "400".to_string()),
                ("x-sim-tokens-per-second", "400".to_string()),
            ];
            leave_after = Some(1 + (seed >> 30) % 60);
            ("/v1/chat/completions", chat(true, false))
        }
        Class::BackendBreaks => {
            headers.push(("x-sim-fail", "mid".to_string()));
            ("/v1/chat/completions", chat(true, false))
        }
        Class::ToolCallsJson => ("/v1/chat/completions", chat_with(false, false, true)),
        Class::ToolCallsSse => ("/v1/chat/completions", chat_with(true, false, true)),
        Class::ToolCallBreaks => {
            headers.push(("x-sim-fail", "mid".to_string()));
            ("/v1/chat/completions", chat_with(true, false, true))
        }
    };
    headers.push(("x-tenant-id", class.tenant().to_string()));
    headers.push(("x-sim-ledger", class.tenant().to_string()));
    headers.push(("content-type", "application/json".to_string()));
    Planned {
        class,
        path,
        body,
        headers,
        leave_after,
    }
}

/// Sends a request and reads until `leave_after` content deltas (then drops
/// the connection) or the end. Returns the HTTP status.
fn exchange(addr: SocketAddr, request: &Planned) -> u16 {
    let Ok(mut stream) = TcpStream::connect(addr) else {
        return 0;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(30)));
    let mut head = format!(
        "POST {} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nContent-Length: {}\r\n",
        request.path,
        request.body.len()
    );
    for (k, v) in &request.headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    if stream.write_all(head.as_bytes()).is_err()
        || stream.write_all(request.body.as_bytes()).is_err()
    {
        return 0;
    }
    // After `leave_after` deltas the client goes away.
    let raw = sluice_testkit::read_until(&mut stream, |text| {
        request
            .leave_after
            .is_some_and(|k| text.matches("\"delta\":{\"content\":\"").count() as u64 >= k)
    });
    raw.split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

fn now_millis() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// Every class's tokens in the one-second window starting at `second`.
async fn window_totals(limiter: &Limiter, second: u64) -> BTreeMap<Class, u64> {
    let mut totals = BTreeMap::new();
    for class in Class::ALL {
        let model = if class == Class::Embeddings {
            "text-embedding-3-small"
        } else {
            "gpt-4o"
        };
        let request = sluice_testkit::rls::tokens_probe(class.tenant(), model, "total");
        let used = match limiter.correct(&request, Some(second * 1000)).await {
            Ok(response) => {
                LIMIT - u64::from(response.statuses.first().map_or(0, |s| s.limit_remaining))
            }
            Err(error) => {
                eprintln!("window {second}: {error}");
                0
            }
        };
        totals.insert(class, used);
    }
    totals
}

/// The prompt tokens Sluice counts for `planned` (the filter's own code).
fn exact_prompt_tokens(encoders: &BpeEncoders, planned: &Planned) -> anyhow::Result<u64> {
    let endpoint = Endpoint::from_path(planned.path)
        .ok_or_else(|| anyhow::anyhow!("{} is no endpoint", planned.path))?;
    let parsed = openai::parse(endpoint, planned.body.as_bytes()).map_err(anyhow::Error::msg)?;
    let counter = encoders
        .openai_encoding(&parsed.model)
        .and_then(|encoding| encoders.counter(encoding))
        .ok_or_else(|| anyhow::anyhow!("no encoding for {}", parsed.model))?;
    Ok(parsed.prompt_tokens(counter, sluice_openai::DEFAULT_IMAGE_TOKENS))
}

/// `envoy/ext-authz.yaml` on the bench's ports.
fn ext_authz_envoy_config(ports: &SluiceFilterPorts) -> anyhow::Result<String> {
    let mut config = std::fs::read_to_string(workspace_root().join("envoy/ext-authz.yaml"))?;
    for (from, to) in [
        (9901, ports.admin),
        (10000, ports.listener),
        (8081, ports.rls),
        (8000, ports.backend),
        (8090, ports.deferral),
    ] {
        config = config.replace(&format!("port_value: {from}"), &format!("port_value: {to}"));
    }
    Ok(config)
}

fn ext_authz_service(limiter: Arc<Limiter>) -> anyhow::Result<ExtAuthzService> {
    let json = std::fs::read(workspace_root().join("config/ext-authz.json"))?;
    let mut admission = FilterConfig::from_json(&json).map_err(anyhow::Error::msg)?;
    admission.deferral.secrets = vec![example_deferral_secret()];
    Ok(ExtAuthzService::new(limiter, admission))
}

/// Token pacing of the deferred tenant's bucket (requests unpaced).
const DEFERRED_TOKENS_PER_SECOND: f64 = 2_000.0;
const CONSUMER_PACING: &str =
    "consumer pacing 2,000 tokens/s per bucket, llm-sim answers of 60 tokens";

/// The deferred path: the broker, the deferral endpoint on the port Envoy's
/// deferral route points at, and one consumer pacing tokens. The model call
/// carries none of the client's headers, so the consumer sends the ledger
/// key and the answer length itself.
async fn start_deferred_path(
    redis: &RedisServer,
    ports: &SluiceFilterPorts,
    sim: SocketAddr,
) -> anyhow::Result<(sluice_testkit::RocketMq, ConsumerInstance)> {
    let broker = start_broker().await;
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", ports.deferral)).await?;
    let app = deferral_endpoint(endpoint_config(redis, &broker)).await;
    tokio::spawn(async move { axum::serve(listener, app).await });
    let mut spec = ConsumerSpec::new("accounting-bench");
    spec.pacing = token_paced(DEFERRED_TOKENS_PER_SECOND);
    spec.config.backend.default.headers = vec![
        ("x-sim-ledger".into(), Class::Deferred.tenant().into()),
        ("x-sim-completion-tokens".into(), "60".into()),
    ];
    let consumer = start_consumer(&redis_connection(redis), &broker, sim, spec).await;
    Ok((broker, consumer))
}

#[derive(clap::Parser)]
#[command(about = "What the accounting charges, through Envoy, against what the backend served")]
struct Args {
    /// Requests in all.
    #[arg(default_value_t = 10_000)]
    requests: u64,
    /// The front door: the Wasm filter or ext_authz.
    #[arg(value_enum, default_value_t = FrontDoor::Wasm)]
    front_door: FrontDoor,
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum FrontDoor {
    Wasm,
    #[value(name = "ext_authz")]
    ExtAuthz,
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let args = <Args as clap::Parser>::parse();
    let requests = args.requests;
    let ext_authz = args.front_door == FrontDoor::ExtAuthz;

    let redis = RedisServer::start()?;
    let store = RedisStore::new(&RedisStoreOptions {
        redis: sluice_redis::RedisOptions::from_url(redis.url()),
        ..Default::default()
    })?;
    let limiter = sluice_testkit::stack::limiter(LIMITS, Arc::new(store), Metrics::new());
    let grpc = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let rls = grpc.local_addr()?.port();
    let deps = Deps {
        limiter: limiter.clone(),
        guard: sluice_testkit::stack::example_call_guard(),
        config_path: None,
        reload_interval: Duration::ZERO,
        ext_authz: ext_authz
            .then(|| ext_authz_service(limiter.clone()))
            .transpose()?,
        deferral: None,
    };
    tokio::spawn(run(grpc, None, deps, std::future::pending::<()>()));
    let sim = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let sim_addr = sim.local_addr()?;
    let sim_config = sluice_llm_sim::SimConfig {
        max_tracked_request_ids: 1000,
        ..sluice_llm_sim::SimConfig::fast()
    };
    tokio::spawn(sluice_llm_sim::run(
        sim,
        sim_config,
        std::future::pending::<()>(),
    ));
    let ports = SluiceFilterPorts {
        admin: free_port(),
        listener: free_port(),
        rls,
        backend: sim_addr.port(),
        deferral: free_port(),
    };
    let (_broker, consumer) = start_deferred_path(&redis, &ports, sim_addr).await?;
    let config = if ext_authz {
        ext_authz_envoy_config(&ports)?
    } else {
        sluice_filter_envoy_config(&ports)?
    };
    let (admin, listener_port) = (ports.admin, ports.listener);
    let _envoy =
        tokio::task::spawn_blocking(move || Envoy::start(&config, admin, listener_port)).await??;
    let listener: SocketAddr = ([127, 0, 0, 1], listener_port).into();

    // What Sluice counts for a prompt, where that count is what stays
    // charged (a broken stream; every request under ext_authz): llm-sim's own
    // count is an approximation, so that part of the drift is shown apart.
    let encoders = BpeEncoders::new();
    let mut exact_prompt = BTreeMap::<Class, u64>::new();
    let mut count = BTreeMap::<Class, u64>::new();
    for i in 0..requests {
        let planned = plan(i);
        *count.entry(planned.class).or_default() += 1;
        let broken = matches!(
            planned.class,
            Class::ClientDisconnects | Class::BackendBreaks | Class::ToolCallBreaks
        );
        if (broken || ext_authz) && planned.class != Class::Deferred {
            *exact_prompt.entry(planned.class).or_default() +=
                exact_prompt_tokens(&encoders, &planned)?;
        }
    }

    let first_second = now_millis() / 1000;
    let started = Instant::now();
    let next = Arc::new(AtomicU64::new(0));
    let statuses = Arc::new(Mutex::new(BTreeMap::<u16, u64>::new()));
    let workers: Vec<_> = (0..CLIENTS)
        .map(|_| {
            let (next, statuses) = (next.clone(), statuses.clone());
            std::thread::spawn(move || loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= requests {
                    break;
                }
                let status = exchange(listener, &plan(i));
                if let Ok(mut s) = statuses.lock() {
                    *s.entry(status).or_default() += 1;
                }
            })
        })
        .collect();
    // Windows are read 20 s after they end (corrections are in by then; a
    // one-second window takes corrections for 60 s after its end).
    let mut totals = BTreeMap::<Class, u64>::new();
    let mut next_window = first_second;
    let read_ready = |totals: &mut BTreeMap<Class, u64>, window: u64| {
        let limiter = limiter.clone();
        let mut sums = std::mem::take(totals);
        async move {
            for (class, used) in window_totals(&limiter, window).await {
                *sums.entry(class).or_default() += used;
            }
            sums
        }
    };
    while workers.iter().any(|w| !w.is_finished()) {
        tokio::time::sleep(Duration::from_millis(200)).await;
        while next_window + 1 + 20 <= now_millis() / 1000 {
            totals = read_ready(&mut totals, next_window).await;
            next_window += 1;
        }
    }
    for worker in workers {
        let _ = worker.join();
    }
    let elapsed = started.elapsed();
    let last_second = now_millis() / 1000;
    tokio::time::sleep(Duration::from_secs(21)).await;
    while next_window <= last_second {
        totals = read_ready(&mut totals, next_window).await;
        next_window += 1;
    }

    let admin_addr: SocketAddr = ([127, 0, 0, 1], admin).into();
    let stats = tokio::task::spawn_blocking(move || {
        http_request(admin_addr, "GET", "/stats?filter=wasmcustom", &[], b"")
    })
    .await??
    .body;
    let ledger: BTreeMap<String, LedgerEntry> = serde_json::from_str(
        &tokio::task::spawn_blocking(move || {
            http_request(sim_addr, "GET", "/sim/ledger", &[], b"")
        })
        .await??
        .body,
    )?;
    println!(
        "front door: {}",
        if ext_authz {
            "ext_authz"
        } else {
            "Wasm filter"
        }
    );
    println!(
        "{requests} requests in {:.1} s ({:.0}/s), {} one-second windows, {CLIENTS} clients; statuses {:?}",
        elapsed.as_secs_f64(),
        requests as f64 / elapsed.as_secs_f64(),
        last_second + 1 - first_second,
        statuses.lock().map(|s| s.clone()).unwrap_or_default()
    );
    let per_tenant = format!("wasmcustom.{TENANT_TOKENS_STAT}.");
    println!(
        "filter: {}",
        stats
            .lines()
            .filter(|line| !line.starts_with(&per_tenant))
            .collect::<Vec<_>>()
            .join(" ")
    );
    // The filter's per-tenant usage counters (prompt + completion).
    let filter_usage = |tenant: &str| -> u64 {
        [UsageKind::Prompt, UsageKind::Completion]
            .iter()
            .filter_map(|kind| {
                let name = format!("wasmcustom.{}: ", kind.stat_name(tenant));
                stats
                    .lines()
                    .find_map(|line| line.strip_prefix(&name))
                    .and_then(|value| value.trim().parse::<u64>().ok())
            })
            .sum()
    };
    let deferred_usage = ["prompt", "completion"]
        .iter()
        .map(|kind| {
            consumer.counter(&format!(
                "sluice_consumer_tenant_tokens_total{{tenant=\"{}\",model=\"gpt-4o\",kind=\"{kind}\"}}",
                Class::Deferred.tenant()
            )) as u64
        })
        .sum::<u64>();
    println!(
        "deferred: {CONSUMER_PACING}; not charged at admission, so their window tokens are the consumer's sluice_consumer_tenant_tokens_total (prompt + completion); pacing corrections {}",
        Correction::ALL
            .iter()
            .map(|c| format!(
                "{}={}",
                c.as_str(),
                consumer.counter(&format!(
                    "sluice_consumer_pacing_corrections_total{{result=\"{}\"}}",
                    c.as_str()
                ))
            ))
            .collect::<Vec<_>>()
            .join(" ")
    );
    println!(
        "\n| class | requests | broken (ledger) | ledger tokens | window tokens | usage metric | drift | drift % | prompt-count difference | output drift |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for class in Class::ALL {
        let entry = ledger.get(class.tenant()).copied().unwrap_or_default();
        let truth = entry.prompt_tokens + entry.completion_tokens;
        let window = match class {
            Class::Deferred => deferred_usage,
            _ => totals.get(&class).copied().unwrap_or(0),
        };
        // sluice_tenant_tokens_total (filter) or the consumer's metric.
        let metric = match class {
            Class::Deferred => deferred_usage,
            _ => filter_usage(class.tenant()),
        };
        let drift = window as i64 - truth as i64;
        let percent = if truth > 0 {
            100.0 * drift as f64 / truth as f64
        } else {
            0.0
        };
        let (prompt_diff, output_drift) = match exact_prompt.get(&class) {
            Some(&exact) => {
                let diff = exact as i64 - entry.prompt_tokens as i64;
                (format!("{diff:+}"), format!("{:+}", drift - diff))
            }
            None => ("—".into(), format!("{drift:+}")),
        };
        println!(
            "| {} | {} | {} | {truth} | {window} | {metric} | {drift:+} | {percent:+.3} % | {prompt_diff} | {output_drift} |",
            class.tenant(),
            count.get(&class).copied().unwrap_or(0),
            entry.broken,
        );
    }
    Ok(())
}
