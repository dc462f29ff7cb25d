//! The GPU model: batching under a token budget, the waiting queue, the
//! vLLM gauges and the runtime capacity knob, over HTTP.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests fail loudly

mod common;

use common::*;
use serde_json::{json, Value};
use sluice_llm_sim::gpu::{Capacity, GpuConfig};
use sluice_llm_sim::text::completion_text;
use sluice_llm_sim::OverCapacity;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

const MODEL: &str = "test-model";

fn gpu_config(tokens_per_s: f64, kv_cache_tokens: u64, max_batch: usize) -> SimConfig {
    SimConfig {
        models: vec![MODEL.to_string()],
        // No speed limit per answer: the batch shares the whole budget.
        tokens_per_second: 0.0,
        gpu: Some(GpuConfig {
            capacity: Capacity {
                tokens_per_s,
                kv_cache_tokens,
                max_batch,
            },
            ..GpuConfig::default()
        }),
        ..SimConfig::default()
    }
}

/// The value of `name{model_name="test-model"}` in `/metrics`.
fn series(metrics: &str, name: &str) -> f64 {
    let prefix = format!("{name}{{model_name=\"{MODEL}\"}} ");
    metrics
        .lines()
        .find_map(|line| line.strip_prefix(&prefix))
        .and_then(|value| value.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {prefix} in\n{metrics}"))
}

async fn metrics(addr: SocketAddr) -> String {
    get(addr, "/metrics").await.text()
}

/// Polls `/metrics` until `name` is `value` (fails after 10 s).
async fn wait_for_series(addr: SocketAddr, name: &str, value: f64) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let text = metrics(addr).await;
        if series(&text, name) == value {
            return;
        }
        assert!(Instant::now() < deadline, "{name} never {value}:\n{text}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Sends `n` whole chat answers of `tokens` tokens at once; returns how
/// long all took and the highest waiting / running / KV usage seen meanwhile.
async fn burst(addr: SocketAddr, n: usize, tokens: u64) -> (Duration, f64, f64, f64) {
    let start = Instant::now();
    let requests: Vec<_> = (0..n)
        .map(|i| {
            tokio::spawn(async move {
                let tokens = tokens.to_string();
                let response = chat(
                    addr,
                    &[("x-sim-completion-tokens", &tokens)],
                    &chat_body(&format!("r{i}")),
                )
                .await;
                assert_eq!(response.status, 200, "{}", response.text());
                response.json()["usage"]["completion_tokens"]
                    .as_u64()
                    .unwrap()
            })
        })
        .collect();
    let (mut waiting, mut running, mut kv) = (0.0_f64, 0.0_f64, 0.0_f64);
    while requests.iter().any(|r| !r.is_finished()) {
        let text = metrics(addr).await;
        waiting = waiting.max(series(&text, "vllm:num_requests_waiting"));
        running = running.max(series(&text, "vllm:num_requests_running"));
        let usage = series(&text, "vllm:kv_cache_usage_perc");
        assert!((0.0..=1.0).contains(&usage), "kv usage {usage}");
        assert_eq!(usage, series(&text, "vllm:gpu_cache_usage_perc"));
        kv = kv.max(usage);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let elapsed = start.elapsed();
    for request in requests {
        assert_eq!(request.await.unwrap(), tokens);
    }
    (elapsed, waiting, running, kv)
}

/// Tokens the GPU processed (prompt + generated) per `/metrics`.
async fn processed(addr: SocketAddr) -> f64 {
    let text = metrics(addr).await;
    series(&text, "vllm:prompt_tokens_total") + series(&text, "vllm:generation_tokens_total")
}

#[tokio::test]
async fn a_burst_queues_beyond_the_batch_and_runs_at_the_configured_throughput() {
    let server = start(gpu_config(1000.0, 100_000, 4)).await;
    let addr = server.addr();
    let (elapsed, waiting, running, kv) = burst(addr, 12, 100).await;
    let tokens = processed(addr).await;
    let throughput = tokens / elapsed.as_secs_f64();
    eprintln!("{tokens} tokens in {elapsed:?}: {throughput:.0} tokens/s (budget 1000)");
    // Never faster than the budget (one step of rounding); slower only by
    // the HTTP round trips and a loaded machine.
    assert!(
        (700.0..=1030.0).contains(&throughput),
        "{tokens} tokens in {elapsed:?}: {throughput:.0} tokens/s"
    );
    assert!(waiting >= 4.0, "max waiting {waiting}");
    assert_eq!(running, 4.0);
    assert!(kv > 0.0);
    let text = metrics(addr).await;
    assert_eq!(series(&text, "vllm:generation_tokens_total"), 1200.0);
    assert_eq!(series(&text, "vllm:num_requests_running"), 0.0);
    assert_eq!(series(&text, "vllm:num_requests_waiting"), 0.0);
    assert_eq!(series(&text, "vllm:kv_cache_usage_perc"), 0.0);
    let ttft_count = format!("vllm:time_to_first_token_seconds_count{{model_name=\"{MODEL}\"}} 12");
    assert!(text.contains(&ttft_count), "{text}");
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn the_kv_cache_bounds_the_batch() {
    // Six answers start together (their prompts fit), grow to about 110
    // tokens each, and 250 hold two of those: the latest are preempted
    // back to the queue while the cache stays within bounds.
    let server = start(gpu_config(2000.0, 250, 8)).await;
    let (_, waiting, running, kv) = burst(server.addr(), 6, 100).await;
    assert!(running >= 2.0, "max running {running}");
    assert!(waiting >= 1.0, "max waiting {waiting}");
    assert!(kv > 0.8, "max kv usage {kv}");
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn the_capacity_knob_changes_throughput_at_runtime() {
    let server = start(gpu_config(1000.0, 100_000, 64)).await;
    let addr = server.addr();
    let (full, ..) = burst(addr, 8, 75).await;
    let response = post(addr, "/admin/capacity", &[], r#"{"factor":0.5}"#).await;
    assert_eq!(response.status, 200, "{}", response.text());
    let gpus = response.json()["gpus"].clone();
    assert_eq!(gpus[0]["model"], MODEL);
    assert_eq!(gpus[0]["tokens_per_s"], 500.0);
    assert_eq!(gpus[0]["kv_cache_tokens"], 50_000);
    let (half, ..) = burst(addr, 8, 75).await;
    let ratio = half.as_secs_f64() / full.as_secs_f64();
    eprintln!("full {full:?}, half {half:?}: ratio {ratio:.2}");
    assert!(
        (1.6..=2.5).contains(&ratio),
        "full {full:?}, half {half:?}: ratio {ratio:.2}"
    );
    // Absolute values; GET reports them.
    let response = post(
        addr,
        "/admin/capacity",
        &[],
        &json!({"model": MODEL, "tokens_per_s": 1500, "max_batch": 3}).to_string(),
    )
    .await;
    assert_eq!(response.status, 200, "{}", response.text());
    let now = get(addr, "/admin/capacity").await.json();
    assert_eq!(now["gpus"][0]["tokens_per_s"], 1500.0);
    assert_eq!(now["gpus"][0]["max_batch"], 3);
    assert_eq!(now["gpus"][0]["kv_cache_tokens"], 50_000);
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn bad_capacity_changes_are_refused() {
    let server = start(gpu_config(1000.0, 1000, 4)).await;
    let addr = server.addr();
    for (body, status) in [
        (r#"{"factor":0.5,"tokens_per_s":3}"#, 400),
        (r#"{"factor":-1}"#, 400),
        (r#"{"tokens_per_s":0}"#, 400),
        (r#"{"max_batch":0}"#, 400),
        (r#"{"speed":3}"#, 400),
        ("not json", 400),
        (r#"{"model":"other","factor":2}"#, 404),
    ] {
        let response = post(addr, "/admin/capacity", &[], body).await;
        assert_eq!(response.status, status, "{body}: {}", response.text());
        assert!(response.json()["error"]["message"].is_string());
    }
    // Nothing changed.
    let now = get(addr, "/admin/capacity").await.json();
    assert_eq!(now["gpus"][0]["tokens_per_s"], 1000.0);
    server.shutdown().await.unwrap();

    // Without the GPU model there is nothing to change.
    let plain = start(SimConfig::fast()).await;
    let response = post(plain.addr(), "/admin/capacity", &[], r#"{"factor":2}"#).await;
    assert_eq!(response.status, 409, "{}", response.text());
    plain.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_full_queue_answers_with_retry_after_and_a_too_long_request_400() {
    let server = start(SimConfig {
        over_capacity: OverCapacity::Reject503,
        retry_after_secs: 2,
        gpu: Some(GpuConfig {
            capacity: Capacity {
                tokens_per_s: 50.0,
                kv_cache_tokens: 1000,
                max_batch: 1,
            },
            max_waiting: 1,
            ..GpuConfig::default()
        }),
        ..gpu_config(50.0, 1000, 1)
    })
    .await;
    let addr = server.addr();
    // One runs, one waits: both streams stay open.
    let mut running = open_chat_stream(addr, "500", &stream_body("a", false)).await;
    assert_eq!(running.status, 200);
    running.next_event().await.unwrap();
    wait_for_series(addr, "vllm:num_requests_running", 1.0).await;
    let waiting = open_chat_stream(addr, "500", &stream_body("b", false)).await;
    assert_eq!(waiting.status, 200);
    wait_for_series(addr, "vllm:num_requests_waiting", 1.0).await;
    let refused = chat(addr, &[], &chat_body("c")).await;
    assert_eq!(refused.status, 503, "{}", refused.text());
    assert_eq!(refused.header("retry-after"), Some("2"));
    assert_eq!(stats(addr).await["rejected_over_capacity"], 1);

    let too_long = chat(
        addr,
        &[("x-sim-completion-tokens", "5000")],
        &chat_body("d"),
    )
    .await;
    assert_eq!(too_long.status, 400, "{}", too_long.text());
    assert_eq!(too_long.json()["error"]["code"], "context_length_exceeded");

    // Clients that leave free the GPU.
    drop(running);
    drop(waiting);
    wait_for_series(addr, "vllm:num_requests_running", 0.0).await;
    wait_for_series(addr, "vllm:num_requests_waiting", 0.0).await;
    let text = metrics(addr).await;
    assert_eq!(series(&text, "vllm:kv_cache_usage_perc"), 0.0, "{text}");
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn streams_run_to_the_end_on_the_gpu() {
    let server = start(gpu_config(2000.0, 10_000, 8)).await;
    let addr = server.addr();
    let mut stream = open_chat_stream(addr, "40", &stream_body("s", true)).await;
    assert_eq!(stream.status, 200);
    let events = stream.rest().await;
    assert_eq!(events.last().map(String::as_str), Some("[DONE]"));
    let usage: Value = parse(&events[events.len() - 2]);
    assert_eq!(usage["usage"]["completion_tokens"], 40);
    let content: String = events[..events.len() - 1]
        .iter()
        .filter_map(|e| {
            parse(e)["choices"][0]["delta"]["content"]
                .as_str()
                .map(str::to_string)
        })
        .collect();
    assert_eq!(content, completion_text(40));
    // Completions with several prompts generate their choices in lockstep.
    let response = post(
        addr,
        "/v1/completions",
        &[("x-sim-completion-tokens", "10")],
        &json!({"model": MODEL, "prompt": ["a", "b", "c"]}).to_string(),
    )
    .await;
    assert_eq!(response.status, 200, "{}", response.text());
    assert_eq!(response.json()["usage"]["completion_tokens"], 30);
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_priority_is_refused_under_fcfs_and_taken_under_priority_scheduling() {
    let mut body = chat_body("p");
    body["priority"] = json!(1);
    let fcfs = start(gpu_config(10_000.0, 100_000, 8)).await;
    let refused = chat(fcfs.addr(), &[], &body).await;
    assert_eq!(refused.status, 400, "{}", refused.text());
    assert_eq!(
        refused.json()["error"]["message"],
        "Got priority 1 but Priority scheduling is not enabled."
    );
    // 0 is everybody's priority: taken as vLLM takes it.
    body["priority"] = json!(0);
    assert_eq!(chat(fcfs.addr(), &[], &body).await.status, 200);
    body["priority"] = json!("high");
    assert_eq!(chat(fcfs.addr(), &[], &body).await.status, 400);
    fcfs.shutdown().await.unwrap();

    let mut config = gpu_config(10_000.0, 100_000, 8);
    if let Some(gpu) = config.gpu.as_mut() {
        gpu.policy = sluice_llm_sim::gpu::SchedulingPolicy::Priority;
    }
    let priority = start(config).await;
    body["priority"] = json!(1);
    let served = chat(priority.addr(), &[], &body).await;
    assert_eq!(served.status, 200, "{}", served.text());
    priority.shutdown().await.unwrap();
}
