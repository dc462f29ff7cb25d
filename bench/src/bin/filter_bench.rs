//! `cargo run --release -p sluice-bench --bin filter_bench -- --help`
//!
//! Figures for the Wasm filter, measured side by side in one run:
//! 1. prompt-token counting inside Envoy (V8) vs natively, same text, same code;
//! 2. the first request after the VM starts;
//! 3. Envoy + filter + RLS vs the same Envoy without the filter, 1k-token prompts;
//! 4. module size and Envoy memory with and without the filter, per worker;
//! 5. streamed answers (llm-sim, SSE_TOKENS tokens each, default 200): the
//!    filter's per-request cost when the client sends `include_usage` (usage
//!    read from every chunk) vs when it does not (`add_stream_usage`: the
//!    option injected, and every chunk's `usage` stripped), SSE_REQUESTS
//!    (default 1000) requests each, alternating rounds.
//!
//! 6. open models' vocabularies (`--vocab-bundle`, made by `sluice-vocab
//!    bundle`): how each way of handing them to the filter costs — none,
//!    compiled into the module (`--vocab-embedded-wasm`, built by
//!    `SLUICE_VOCAB_BUNDLE=… scripts/build-wasm`), the VM configuration —
//!    in module size, start to listening, memory per worker VM, the first
//!    request and a 32k-token prompt counted inside Envoy.
//!
//! `--rounds`, `--per-round` (section 3), `--sse-requests`, `--sse-tokens`
//! (section 5), also read from `ROUNDS` ... `SSE_TOKENS`; `--sse-only`
//! (`SSE_ONLY=1`) runs section 5 alone, `--vocab-bundle` (`VOCAB_BUNDLE`)
//! section 6 alone. Prints figures; asserts nothing.
#![allow(clippy::expect_used)] // a benchmark's own client fails loudly

use clap::Parser;
use sluice_admission::config::FilterConfig;
use sluice_admission::openai::{self, Endpoint};
use sluice_ratelimit::config::LimitsConfig;
use sluice_ratelimit::ext_authz::ExtAuthzService;
use sluice_ratelimit::limiter::{Limiter, SystemClock};
use sluice_ratelimit::metrics::Metrics;
use sluice_ratelimit::server::{run, Deps};
use sluice_ratelimit::store::{CountingMode, MemoryStore};
use sluice_testkit::{filter_wasm, free_port, workspace_root, Envoy, EnvoyPorts, StaticHttpServer};
use sluice_tokenizer::{Encoding, Tokenizer};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

const LIMITS: &str = "domain: sluice\ndescriptors:\n  - key: tenant\n    descriptors:\n      - key: model\n        rate_limit: { unit: hour, requests_per_unit: 4000000000 }\n        descriptors:\n          - key: tokens\n            rate_limit: { unit: hour, requests_per_unit: 4000000000 }\n";

const BACKEND_REPLY: &str = r#"{"id":"chatcmpl-bench","object":"chat.completion","created":0,"model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1000,"completion_tokens":1,"total_tokens":1001}}"#;

#[derive(Parser)]
#[command(about = "The Wasm filter's cost inside Envoy")]
struct Args {
    /// Section 3: rounds, each with and without the filter.
    #[arg(long, env = "ROUNDS", default_value_t = 10)]
    rounds: usize,
    /// Section 3: requests per round.
    #[arg(long, env = "PER_ROUND", default_value_t = 200)]
    per_round: usize,
    /// Section 5 alone (`SSE_ONLY=1`).
    #[arg(long, env = "SSE_ONLY", value_parser = clap::builder::FalseyValueParser::new())]
    sse_only: bool,
    /// Section 5: streamed requests each way.
    #[arg(long, env = "SSE_REQUESTS", default_value_t = 1000)]
    sse_requests: usize,
    /// Section 5: tokens in each streamed answer.
    #[arg(long, env = "SSE_TOKENS", default_value_t = 200)]
    sse_tokens: u64,
    /// Section 6 alone: a bundle of compact vocabularies (`sluice-vocab
    /// bundle -o FILE tokenizer.json...`).
    #[arg(long, env = "VOCAB_BUNDLE")]
    vocab_bundle: Option<PathBuf>,
    /// Section 6: the filter built with that bundle compiled in
    /// (`SLUICE_VOCAB_BUNDLE=FILE scripts/build-wasm`, then copied aside).
    #[arg(long, env = "VOCAB_EMBEDDED_WASM")]
    vocab_embedded_wasm: Option<PathBuf>,
}

/// Mixed-language text: prose in several scripts, code, numbers, emoji;
/// `count` tells its tokens.
fn mixed_text(target_tokens: usize, count: impl Fn(&str) -> usize) -> String {
    const PARTS: [&str; 8] = [
        "The quick brown fox jumps over the lazy dog while the platform team rolls out rate limits across the mesh. ",
        "Die Überprüfung der Kontingente erfolgt pro Mandant und Modell, bevor die Anfrage weitergeleitet wird. ",
        "令牌桶算法按租户和模型限制请求速率，超出配额的请求将被延迟处理而不是直接拒绝。 ",
        "トークン数を正確に数えることで、GPUの利用率を公平に配分できます。 ",
        "Запросы сверх квоты ставятся в очередь и обрабатываются с заданной скоростью. ",
        "fn main() { let limits = vec![60, 40_000]; for l in &limits { println!(\"{l:>8}\"); } }\n",
        "مرحبا بالعالم، هذه رسالة اختبار للتحقق من عد الرموز. 🚀🔥👩‍💻 ",
        "{\"tenant\": \"acme\", \"model\": \"gpt-4o\", \"tokens\": 1234567, \"ok\": true}\n",
    ];
    let mut text = String::new();
    let mut i = 0;
    while count(&text) < target_tokens {
        for _ in 0..50 {
            text.push_str(PARTS[i % PARTS.len()]);
            i += 1;
        }
    }
    text
}

fn chat_body(text: &str) -> String {
    chat_body_for("gpt-4o", text)
}

fn chat_body_for(model: &str, text: &str) -> String {
    serde_json::json!({
        "model": model,
        "max_tokens": 16,
        "messages": [{"role": "user", "content": text}]
    })
    .to_string()
}

/// A keep-alive HTTP/1.1 connection.
struct Connection {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
}

struct Reply {
    status: u16,
    count_micros: Option<u64>,
}

impl Connection {
    fn open(addr: SocketAddr) -> Connection {
        let stream = TcpStream::connect(addr).expect("connect");
        stream.set_nodelay(true).ok();
        Connection {
            reader: BufReader::new(stream.try_clone().expect("clone")),
            writer: stream,
        }
    }

    /// Sends a chat POST and reads the answer's head: status,
    /// `content-length`, `x-sluice-count-micros`.
    fn send(&mut self, body: &str) -> (u16, usize, Option<u64>) {
        let request = format!(
            "POST /v1/chat/completions HTTP/1.1\r\nHost: bench\r\nx-tenant-id: bench\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        );
        self.writer.write_all(request.as_bytes()).expect("write");
        let mut line = String::new();
        self.reader.read_line(&mut line).expect("status line");
        let status = line
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        let (mut length, mut count_micros) = (0usize, None);
        loop {
            line.clear();
            self.reader.read_line(&mut line).expect("header");
            if line == "\r\n" || line.is_empty() {
                break;
            }
            if let Some((k, v)) = line.split_once(':') {
                let k = k.trim().to_ascii_lowercase();
                if k == "content-length" {
                    length = v.trim().parse().unwrap_or(0);
                } else if k == "x-sluice-count-micros" {
                    count_micros = v.trim().parse().ok();
                }
            }
        }
        (status, length, count_micros)
    }

    fn post(&mut self, body: &str) -> Reply {
        let (status, length, count_micros) = self.send(body);
        let mut body = vec![0; length];
        self.reader.read_exact(&mut body).expect("body");
        Reply {
            status,
            count_micros,
        }
    }

    /// POSTs a streaming request and reads its chunked answer to the end;
    /// returns the status and the body's length.
    fn post_stream(&mut self, body: &str) -> (u16, usize) {
        let (status, _, _) = self.send(body);
        let mut line = String::new();
        let mut bytes = 0;
        loop {
            line.clear();
            self.reader.read_line(&mut line).expect("chunk size");
            let size = usize::from_str_radix(line.trim(), 16).expect("chunked answer");
            let mut chunk = vec![0; size + 2];
            self.reader.read_exact(&mut chunk).expect("chunk");
            bytes += size;
            if size == 0 {
                return (status, bytes);
            }
        }
    }
}

fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() as f64 - 1.0) * q).round() as usize]
}

/// An Envoy with `workers` worker threads on free ports, with the config
/// `config` writes for them (admin, listener); its listener, and how long it
/// took from the config to listening.
fn start_envoy(
    workers: usize,
    config: impl FnOnce(u16, u16) -> String,
) -> anyhow::Result<(Envoy, SocketAddr, Duration)> {
    let (admin, listener) = (free_port(), free_port());
    let started = Instant::now();
    let envoy = Envoy::start_with_workers(&config(admin, listener), admin, listener, workers)?;
    Ok((envoy, ([127, 0, 0, 1], listener).into(), started.elapsed()))
}

/// Envoy with the filter and Envoy alone (see [`start_envoy`]), both in
/// front of the backend on `backend_port`.
fn start_with_and_without(
    rls_port: u16,
    backend_port: u16,
) -> anyhow::Result<[(Envoy, SocketAddr, Duration); 2]> {
    let [with, without] = [true, false].map(|filter| {
        start_envoy(1, |admin, listener| {
            envoy_config(filter, rls_port, backend_port, admin, listener)
        })
    });
    Ok([with?, without?])
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    percentile(&v, 0.5)
}

fn envoy_config(
    filter: bool,
    rls_port: u16,
    backend_port: u16,
    admin: u16,
    listener: u16,
) -> String {
    let template =
        std::fs::read_to_string(workspace_root().join("envoy/sluice-filter.yaml")).expect("config");
    let ports = EnvoyPorts {
        admin,
        listener,
        rls: rls_port,
        backend: backend_port,
        deferral: None,
    };
    let mut config = ports
        .apply(&template)
        .replace(
            "/etc/sluice/sluice_filter.wasm",
            &filter_wasm()
                .expect("build the filter first")
                .display()
                .to_string(),
        )
        .replace(
            "\"reconcile\": true",
            "\"reconcile\": true, \"timing_headers\": true",
        );
    if !filter {
        let start = config
            .find("                  - name: envoy.filters.http.wasm")
            .expect("wasm filter block");
        let end = config
            .find("                  - name: envoy.filters.http.router")
            .expect("router block");
        config.replace_range(start..end, "");
    }
    config
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let (rounds, per_round) = (args.rounds, args.per_round);

    // RLS (memory store, limits never reached) and a fixed-reply backend.
    let config = LimitsConfig::from_sources(&[(PathBuf::from("bench.yaml"), LIMITS.into())])?;
    let limiter = Arc::new(Limiter::new(
        config,
        Arc::new(MemoryStore::new()),
        CountingMode::AllOrNothing,
        Arc::new(SystemClock),
        Arc::new(Metrics::new()),
    ));
    let limiter_for_authz = limiter.clone();
    let admission = FilterConfig::from_json(&std::fs::read(
        workspace_root().join("config/ext-authz.json"),
    )?)
    .map_err(anyhow::Error::msg)?;
    let grpc = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let rls_port = grpc.local_addr()?.port();
    tokio::spawn(run(
        grpc,
        None,
        Deps {
            limiter,
            guard: sluice_testkit::stack::example_call_guard(),
            config_path: None,
            reload_interval: Duration::ZERO,
            ext_authz: Some(ExtAuthzService::new(limiter_for_authz, admission)),
            deferral: None,
        },
        std::future::pending::<()>(),
    ));
    if args.sse_only {
        return stream_usage_cost(rls_port, &args).await;
    }
    let backend = StaticHttpServer::start(BACKEND_REPLY)?;
    if let Some(bundle) = &args.vocab_bundle {
        return vocabulary_delivery(rls_port, backend.addr.port(), bundle, &args).await;
    }

    let tokenizer = Tokenizer::new(Encoding::O200kBase);
    let wasm = filter_wasm()?;
    println!(
        "sluice filter bench: {} ({:.1} MiB)",
        wasm.display(),
        std::fs::metadata(&wasm)?.len() as f64 / 1048576.0
    );

    // Envoy with the filter: time from spawn to listening includes building the tokenizers.
    let backend_port = backend.addr.port();
    let [(with, with_addr, with_start), (without, without_addr, without_start)] =
        start_with_and_without(rls_port, backend_port)?;
    // The same filter without a deferral secret: it defers nothing, so it
    // skips the body's SHA-256 that signing a deferral needs.
    let (_unsigned, unsigned_addr, _) = start_envoy(1, |admin, listener| {
        let config = envoy_config(true, rls_port, backend_port, admin, listener).replace(
            &format!(
                r#", "secrets": ["{}"]"#,
                sluice_admission::deferral::EXAMPLE_SECRET
            ),
            "",
        );
        assert!(
            !config.contains("\"secrets\""),
            "secrets left in the config"
        );
        config
    })?;
    let authz_template = std::fs::read_to_string(workspace_root().join("envoy/ext-authz.yaml"))?;
    let (_authz, authz_addr, _) = start_envoy(1, |admin, listener| {
        EnvoyPorts {
            admin,
            listener,
            rls: rls_port,
            backend: backend_port,
            deferral: None,
        }
        .apply(&authz_template)
    })?;
    println!(
        "envoy start to listening: {:.0} ms with filter, {:.0} ms without",
        with_start.as_secs_f64() * 1e3,
        without_start.as_secs_f64() * 1e3
    );

    // 1 + 2: counting, first request, then steady state, vs native.
    let big = mixed_text(37_000, |t| tokenizer.count(t));
    let big_body = chat_body(&big);
    let prompt_32k = mixed_text(32_000, |t| tokenizer.count(t));
    let body_32k = chat_body(&prompt_32k);
    let mut connection = Connection::open(with_addr);
    let t = Instant::now();
    let first = connection.post(&big_body);
    let first_total = t.elapsed();
    println!();
    println!("first request after VM start ({} tokens, mixed languages): status {}, counted in {} µs, whole request {:.1} ms",
        tokenizer.count(&big), first.status, first.count_micros.unwrap_or(0), first_total.as_secs_f64() * 1e3);
    for (label, text, body) in [
        ("37k mixed", &big, &big_body),
        ("32k mixed", &prompt_32k, &body_32k),
    ] {
        let in_envoy: Vec<f64> = (0..20)
            .filter_map(|_| connection.post(body).count_micros)
            .map(|m| m as f64)
            .collect();
        let native: Vec<f64> = (0..20)
            .map(|_| {
                let t = Instant::now();
                let request =
                    openai::parse(Endpoint::ChatCompletions, body.as_bytes()).expect("parse");
                let n = request.prompt_tokens(
                    &|s: &str| tokenizer.count(s),
                    sluice_openai::DEFAULT_IMAGE_TOKENS,
                );
                std::hint::black_box(n);
                t.elapsed().as_secs_f64() * 1e6
            })
            .collect();
        // The filter times only the counting (parse excluded); time it natively the same way.
        let request = openai::parse(Endpoint::ChatCompletions, body.as_bytes()).expect("parse");
        let native_count: Vec<f64> = (0..20)
            .map(|_| {
                let t = Instant::now();
                std::hint::black_box(request.prompt_tokens(
                    &|s: &str| tokenizer.count(s),
                    sluice_openai::DEFAULT_IMAGE_TOKENS,
                ));
                t.elapsed().as_secs_f64() * 1e6
            })
            .collect();
        let (envoy_us, native_us) = (median(in_envoy), median(native_count));
        println!("{label:>10} ({} tokens): count in Envoy {:.0} µs, native {:.0} µs (parse+count {:.0} µs), Envoy/native {:.2}x",
            tokenizer.count(text), envoy_us, native_us, median(native), envoy_us / native_us);
    }

    // 3: added latency, 1k-token prompts, alternating rounds.
    let prompt_1k = "hello ".repeat(1000);
    let body_1k = chat_body(&prompt_1k);
    let mut a = Connection::open(with_addr);
    let mut b = Connection::open(without_addr);
    let mut c = Connection::open(authz_addr);
    let mut d = Connection::open(unsigned_addr);
    for _ in 0..50 {
        a.post(&body_1k);
        b.post(&body_1k);
        c.post(&body_1k);
        d.post(&body_1k);
    }
    let (mut with_ms, mut without_ms, mut authz_ms) = (Vec::new(), Vec::new(), Vec::new());
    let mut unsigned_ms = Vec::new();
    let mut errors = 0;
    for _ in 0..rounds {
        for (connection, out) in [
            (&mut a, &mut with_ms),
            (&mut b, &mut without_ms),
            (&mut c, &mut authz_ms),
            (&mut d, &mut unsigned_ms),
        ] {
            for _ in 0..per_round {
                let t = Instant::now();
                let reply = connection.post(&body_1k);
                out.push(t.elapsed().as_secs_f64() * 1e3);
                errors += usize::from(reply.status != 200);
            }
        }
    }
    with_ms.sort_by(|x, y| x.total_cmp(y));
    without_ms.sort_by(|x, y| x.total_cmp(y));
    authz_ms.sort_by(|x, y| x.total_cmp(y));
    unsigned_ms.sort_by(|x, y| x.total_cmp(y));
    println!();
    println!(
        "1k-token prompt ({} tokens), {} requests each, one connection, alternating rounds:",
        tokenizer.count(&prompt_1k),
        with_ms.len()
    );
    println!(
        "{:<28} {:>9} {:>9} {:>9}",
        "", "p50 ms", "p99 ms", "p99.9 ms"
    );
    for (label, v) in [
        ("envoy + sluice filter + RLS", &with_ms),
        ("filter, no deferral secret", &unsigned_ms),
        ("envoy + ext_authz (sluice)", &authz_ms),
        ("envoy alone", &without_ms),
    ] {
        println!(
            "{:<28} {:>9.3} {:>9.3} {:>9.3}",
            label,
            percentile(v, 0.5),
            percentile(v, 0.99),
            percentile(v, 0.999)
        );
    }
    for (label, more, less) in [
        ("added by the filter", &with_ms, &without_ms),
        ("added by ext_authz", &authz_ms, &without_ms),
        ("added by the body digest", &with_ms, &unsigned_ms),
    ] {
        let added = |q| percentile(more, q) - percentile(less, q);
        println!(
            "{:<28} {:>9.3} {:>9.3} {:>9.3}",
            label,
            added(0.5),
            added(0.99),
            added(0.999)
        );
    }
    println!("non-200 answers: {errors}");

    // 4: memory.
    let rss = |e: &Envoy| e.rss_kib().map(|k| k as f64 / 1024.0).unwrap_or(f64::NAN);
    println!();
    println!(
        "Envoy RSS, 1 worker, after the runs: {:.0} MiB with filter, {:.0} MiB without",
        rss(&with),
        rss(&without)
    );
    drop(with);
    let with_workers = |workers| {
        start_envoy(workers, |admin, listener| {
            envoy_config(true, rls_port, backend_port, admin, listener)
        })
        .map(|(envoy, _, _)| envoy)
    };
    let two = with_workers(2)?;
    let one = with_workers(1)?;
    tokio::time::sleep(Duration::from_millis(500)).await;
    println!("Envoy RSS with filter at start: {:.0} MiB with 1 worker, {:.0} MiB with 2 workers (≈ {:.0} MiB per extra worker VM)",
        rss(&one), rss(&two), rss(&two) - rss(&one));
    drop((one, two));
    stream_usage_cost(rls_port, &args).await
}

/// 5: what reading usage from a stream costs, and what adding
/// `include_usage` and stripping it from every chunk adds.
async fn stream_usage_cost(rls_port: u16, args: &Args) -> anyhow::Result<()> {
    let (requests, tokens) = (args.sse_requests, args.sse_tokens);
    let sim = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let sim_port = sim.local_addr()?.port();
    tokio::spawn(sluice_llm_sim::run(
        sim,
        sluice_llm_sim::SimConfig {
            default_completion_tokens: tokens,
            ..sluice_llm_sim::SimConfig::fast()
        },
        std::future::pending::<()>(),
    ));
    let [(_with, with_addr, _), (_alone, alone_addr, _)] =
        start_with_and_without(rls_port, sim_port)?;
    let body = |include_usage: bool| {
        let mut body = serde_json::json!({
            "model": "gpt-4o", "stream": true, "max_tokens": 4000,
            "messages": [{"role": "user", "content": "Stream me something."}]
        });
        if include_usage {
            body["stream_options"] = serde_json::json!({"include_usage": true});
        }
        body.to_string()
    };
    let (asked, not_asked) = (body(true), body(false));
    let mut filter = Connection::open(with_addr);
    let mut alone = Connection::open(alone_addr);
    let mut times: [Vec<f64>; 3] = [Vec::new(), Vec::new(), Vec::new()];
    let mut sizes = [0usize; 3];
    let mut errors = 0;
    for _ in 0..20 {
        filter.post_stream(&asked);
        filter.post_stream(&not_asked);
        alone.post_stream(&asked);
    }
    let per_round = 50;
    for _ in 0..requests.div_ceil(per_round) {
        for (index, times) in times.iter_mut().enumerate() {
            let (connection, request) = match index {
                0 => (&mut filter, &asked),
                1 => (&mut filter, &not_asked),
                _ => (&mut alone, &asked),
            };
            for _ in 0..per_round {
                let t = Instant::now();
                let (status, bytes) = connection.post_stream(request);
                times.push(t.elapsed().as_secs_f64() * 1e3);
                sizes[index] = bytes;
                errors += usize::from(status != 200);
            }
        }
    }
    for v in times.iter_mut() {
        v.sort_by(|x, y| x.total_cmp(y));
    }
    println!();
    println!(
        "SSE answers of {tokens} tokens (llm-sim, unpaced), {} requests each, one connection each, alternating rounds:",
        times[0].len()
    );
    println!(
        "{:<36} {:>9} {:>9} {:>9} {:>11}",
        "", "p50 ms", "p99 ms", "mean ms", "body bytes"
    );
    let labels = [
        "filter, client asks include_usage",
        "filter, injected and stripped",
        "envoy alone (include_usage)",
    ];
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len().max(1) as f64;
    for ((label, v), size) in labels.iter().zip(&times).zip(sizes) {
        println!(
            "{label:<36} {:>9.3} {:>9.3} {:>9.3} {size:>11}",
            percentile(v, 0.5),
            percentile(v, 0.99),
            mean(v)
        );
    }
    let read_only = percentile(&times[0], 0.5) - percentile(&times[2], 0.5);
    let injected = percentile(&times[1], 0.5) - percentile(&times[2], 0.5);
    println!(
        "filter cost per request (p50 over envoy alone): {read_only:.3} ms reading usage, {injected:.3} ms with injection and stripping: ratio {:.2}",
        injected / read_only
    );
    let (read_mean, injected_mean) = (
        mean(&times[0]) - mean(&times[2]),
        mean(&times[1]) - mean(&times[2]),
    );
    println!(
        "same on means: {read_mean:.3} ms vs {injected_mean:.3} ms: ratio {:.2}",
        injected_mean / read_mean
    );
    println!("non-200 answers: {errors}");
    Ok(())
}

/// One way of handing the filter its vocabularies (section 6).
struct Delivery {
    label: &'static str,
    wasm: PathBuf,
    model_tokenizers: bool,
    vm_configuration: bool,
}

/// What one Envoy with the filter cost (section 6).
struct DeliveryCost {
    start_ms: [f64; 2],
    rss_mib: [f64; 2],
    first_count_us: u64,
    first_ms: f64,
    count_us: f64,
    fallbacks: u64,
}

/// 6: the vocabularies' delivery options, side by side.
async fn vocabulary_delivery(
    rls_port: u16,
    backend_port: u16,
    bundle_path: &std::path::Path,
    args: &Args,
) -> anyhow::Result<()> {
    use sluice_testkit::vocab::{with_model_tokenizers, with_vm_vocabularies};
    let bundle = std::fs::read(bundle_path)?;
    let entries = sluice_tokenizer::read_bundle(&bundle).map_err(anyhow::Error::msg)?;
    let Some((first, compact)) = entries.first() else {
        anyhow::bail!("{}: an empty bundle", bundle_path.display());
    };
    let tokenizer =
        sluice_tokenizer::HfTokenizer::from_compact(compact).map_err(anyhow::Error::msg)?;
    let files: Vec<PathBuf> = entries
        .iter()
        .map(|(name, _)| PathBuf::from(name))
        .collect();
    let models: Vec<String> = (0..files.len()).map(|i| format!("m{i}")).collect();
    let tokenizers: Vec<_> = models
        .iter()
        .zip(&files)
        .map(|(m, f)| (m.as_str(), f, None))
        .collect();
    let prompt = mixed_text(32_000, |t| tokenizer.count(t));
    // Without vocabularies the filter knows no `m0`: the baseline counts
    // the same text as gpt-4o (o200k_base).
    let bodies = [chat_body(&prompt), chat_body_for("m0", &prompt)];
    let plain = filter_wasm()?;
    let mut deliveries = vec![
        Delivery {
            label: "none (OpenAI encodings only)",
            wasm: plain.clone(),
            model_tokenizers: false,
            vm_configuration: false,
        },
        Delivery {
            label: "VM configuration",
            wasm: plain.clone(),
            model_tokenizers: true,
            vm_configuration: true,
        },
    ];
    if let Some(embedded) = &args.vocab_embedded_wasm {
        deliveries.push(Delivery {
            label: "compiled into the module",
            wasm: embedded.clone(),
            model_tokenizers: true,
            vm_configuration: false,
        });
    }
    println!(
        "vocabularies: {} ({} bytes, {} vocabularies; the prompt is counted with the first, {first})",
        bundle_path.display(),
        bundle.len(),
        entries.len()
    );
    println!("32k prompt: {} tokens", tokenizer.count(&prompt));
    println!(
        "{:<30} {:>9} {:>13} {:>13} {:>11} {:>11} {:>12} {:>12} {:>9}",
        "delivery",
        "module",
        "start 1w ms",
        "start 4w ms",
        "RSS 1w MiB",
        "RSS 4w MiB",
        "first req ms",
        "first cnt µs",
        "32k µs"
    );
    for delivery in &deliveries {
        let config = |admin, listener| {
            let mut config = envoy_config(true, rls_port, backend_port, admin, listener)
                .replace(
                    &plain.display().to_string(),
                    &delivery.wasm.display().to_string(),
                )
                .replace(
                    "\"count_budget_bytes\": 131072",
                    "\"count_budget_bytes\": 4194304",
                );
            if delivery.model_tokenizers {
                config = with_model_tokenizers(&config, &tokenizers).expect("model_tokenizers");
            }
            if delivery.vm_configuration {
                config = with_vm_vocabularies(&config, &bundle).expect("VM configuration");
            }
            config
        };
        let body = &bodies[usize::from(delivery.model_tokenizers)];
        let cost = delivery_cost(4, body, config).await?;
        println!(
            "{:<30} {:>7.1}Mi {:>13.0} {:>13.0} {:>11.0} {:>11.0} {:>12.1} {:>12} {:>9.0}{}",
            delivery.label,
            std::fs::metadata(&delivery.wasm)?.len() as f64 / 1048576.0,
            cost.start_ms[0],
            cost.start_ms[1],
            cost.rss_mib[0],
            cost.rss_mib[1],
            cost.first_ms,
            cost.first_count_us,
            cost.count_us,
            if cost.fallbacks > 0 {
                format!("  ({} requests counted by the fallback)", cost.fallbacks)
            } else {
                String::new()
            }
        );
    }
    println!("(memory per worker VM ≈ (RSS 4w − RSS 1w) / 3, RSS once settled; first req: the first request once RSS settled, 32k-token prompt, whole exchange)");
    Ok(())
}

/// Envoy's RSS in MiB once it stopped growing (its worker VMs built their
/// tokenizers: the same within 1 MiB for 2 s, or after 60 s).
async fn settled_rss(envoy: &Envoy) -> f64 {
    let rss = || {
        envoy
            .rss_kib()
            .map(|k| k as f64 / 1024.0)
            .unwrap_or(f64::NAN)
    };
    let mut last = rss();
    let mut steady = 0;
    for _ in 0..120 {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let now = rss();
        steady = if (now - last).abs() < 1.0 {
            steady + 1
        } else {
            0
        };
        last = now;
        if steady >= 4 {
            break;
        }
    }
    last
}

/// Starts Envoy with 1 then 4 workers with `config`, and measures (section 6).
async fn delivery_cost(
    workers: usize,
    body: &str,
    config: impl Fn(u16, u16) -> String,
) -> anyhow::Result<DeliveryCost> {
    let (many, _, many_start) = start_envoy(workers, &config)?;
    let many_rss = settled_rss(&many).await;
    drop(many);
    let (one, addr, one_start) = start_envoy(1, &config)?;
    let one_rss = settled_rss(&one).await;
    let mut connection = Connection::open(addr);
    let t = Instant::now();
    let first = connection.post(body);
    let first_ms = t.elapsed().as_secs_f64() * 1e3;
    let counts: Vec<f64> = (0..20)
        .filter_map(|_| connection.post(body).count_micros)
        .map(|m| m as f64)
        .collect();
    let fallbacks = sluice_testkit::filter_event_count(&one, "tokenizer_fallback").await?;
    Ok(DeliveryCost {
        start_ms: [
            one_start.as_secs_f64() * 1e3,
            many_start.as_secs_f64() * 1e3,
        ],
        rss_mib: [one_rss, many_rss],
        first_count_us: first.count_micros.unwrap_or(0),
        first_ms,
        count_us: median(counts),
        fallbacks,
    })
}
