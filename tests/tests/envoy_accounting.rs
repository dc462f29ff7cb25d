//! Exact accounting through real Envoy + the built Wasm filter + sluice-rls
//! on Redis + llm-sim: streamed answers whose client sent no
//! `include_usage`, streams that break (tool calls included), and the
//! filter's per-tenant usage counters.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests fail loudly

use serde_json::Value;
use sluice_admission::admission::Encoders;
use sluice_admission::encoders::BpeEncoders;
use sluice_admission::host::{UsageKind, OTHER_TENANTS, TENANT_TOKENS_STAT};
use sluice_admission::openai::{self, Endpoint};
use sluice_llm_sim::text::{
    approx_tokens, chat_prompt_tokens, completion_text, tool_arguments, tool_name_tokens,
};
use sluice_llm_sim::SimConfig;
use sluice_ratelimit::limiter::Limiter;
use sluice_ratelimit::metrics::Metrics;
use sluice_testkit::rls::tokens_probe;
use sluice_testkit::stack::limits::{self, OverLimit};
use sluice_testkit::stack::{
    redis_limiter, start_filter_envoy_edited, start_llm_sim, start_rls, used_in_window_at,
    used_since, FilterEnvoy, Rls, RlsParts,
};
use sluice_testkit::{free_port, get, http_request, read_until, HttpResponse, RedisServer};
use std::collections::BTreeMap;
use std::io::Write;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

const TOKEN_LIMIT: u64 = 1_000_000;

/// Any tenant: 100 000 requests and [`TOKEN_LIMIT`] tokens an hour; and
/// [`TICK_AND_SPLIT`].
fn limits() -> String {
    limits::file(&[
        limits::tenant(None, 100_000, TOKEN_LIMIT, OverLimit::Count),
        TICK_AND_SPLIT.into(),
    ])
}

/// `tick`: a one-second token window; `split`: input and output budgets
/// besides the total.
const TICK_AND_SPLIT: &str = r#"  - key: tenant
    value: tick
    descriptors:
      - key: model
        rate_limit: { unit: hour, requests_per_unit: 1000, name: tick-rph }
        descriptors:
          - key: tokens
            rate_limit: { unit: second, requests_per_unit: 1000000, name: tick-tps }
  - key: tenant
    value: split
    descriptors:
      - key: model
        rate_limit: { unit: hour, requests_per_unit: 1000, name: split-rph }
        descriptors:
          - key: tokens
            value: total
            rate_limit: { unit: hour, requests_per_unit: 1000000, name: split-total }
          - key: tokens
            value: input
            rate_limit: { unit: hour, requests_per_unit: 1000000, name: split-input }
          - key: tokens
            value: output
            rate_limit: { unit: hour, requests_per_unit: 1000000, name: split-output }
"#;

struct Stack {
    _envoy: FilterEnvoy,
    listener: SocketAddr,
    /// Envoy's admin interface.
    admin: SocketAddr,
    /// The llm-sim behind Envoy.
    backend: SocketAddr,
    /// A second llm-sim with the same seed, reached without Sluice: what the
    /// client would have received.
    direct: SocketAddr,
    limiter: Arc<Limiter>,
    /// When the stack started (Unix ms): the first of the windows its
    /// requests can be charged in.
    started_ms: u64,
    _redis: RedisServer,
    _rls: Rls,
}

async fn stack() -> Stack {
    stack_with("").await
}

/// `plugin_options`: more keys for the filter's plugin configuration
/// (`, "key": value` JSON text).
async fn stack_with(plugin_options: &str) -> Stack {
    let started_ms = now_millis();
    let redis = RedisServer::start().unwrap();
    let limiter = redis_limiter(&limits(), &redis.url(), Metrics::new());
    let rls = start_rls(limiter.clone(), RlsParts::default()).await;
    let backend = start_llm_sim(SimConfig::fast()).await;
    let direct = start_llm_sim(SimConfig::fast()).await;
    let envoy = start_filter_envoy_edited(rls.port, backend.port(), free_port(), |config| {
        // These tests check what is charged, not the shipped 250 ms
        // deadline: on a loaded machine an admission call can take longer,
        // and a request refused for it (failure_mode_on_timeout: deny) would
        // read as a charge that never happened.
        let edited = config
            .replace(
                "\"reconcile\": true",
                &format!("\"reconcile\": true{plugin_options}"),
            )
            .replace("\"rls_timeout_ms\": 250", "\"rls_timeout_ms\": 5000");
        assert!(edited.contains("\"rls_timeout_ms\": 5000"), "{edited}");
        edited
    })
    .await;
    Stack {
        listener: envoy.listener,
        admin: envoy.admin,
        _envoy: envoy,
        backend,
        direct,
        limiter,
        started_ms,
        _redis: redis,
        _rls: rls,
    }
}

async fn post(
    addr: SocketAddr,
    path: &'static str,
    tenant: &str,
    extra: &[(&'static str, &str)],
    body: String,
) -> HttpResponse {
    let mut headers = vec![
        ("x-tenant-id", tenant.to_string()),
        ("content-type", "application/json".to_string()),
    ];
    headers.extend(extra.iter().map(|(k, v)| (*k, v.to_string())));
    tokio::task::spawn_blocking(move || {
        let headers: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
        http_request(addr, "POST", path, &headers, body.as_bytes()).unwrap()
    })
    .await
    .unwrap()
}

impl Stack {
    /// Tokens used in the tenant's window so far, without charging anything.
    async fn tokens_used(&self, tenant: &str, model: &str) -> u64 {
        self.budget_used(tenant, model, "total").await
    }

    /// Tokens used in the tenant's hour windows since the stack started
    /// (see [`used_since`]).
    async fn budget_used(&self, tenant: &str, model: &str, budget: &str) -> u64 {
        let probe = tokens_probe(tenant, model, budget);
        used_since(&self.limiter, &probe, self.started_ms, 3_600_000)
            .await
            .unwrap()
    }

    /// Waits for the window to reach `expected` (reconciliation is sent after
    /// the answer); returns what it holds.
    async fn settled_usage(&self, tenant: &str, model: &str, expected: u64) -> u64 {
        self.settled_budget(tenant, model, "total", expected).await
    }

    /// [`Stack::settled_usage`] of one token budget.
    async fn settled_budget(&self, tenant: &str, model: &str, budget: &str, expected: u64) -> u64 {
        let mut used = 0;
        for _ in 0..60 {
            used = self.budget_used(tenant, model, budget).await;
            if used == expected {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        used
    }
}

/// The same body through Sluice and straight to the twin simulator.
/// `created` is whole seconds: a pair that straddles a second is sent again,
/// which on a loaded machine happens, and each send through Sluice is
/// charged: the third value is how many were sent through it.
async fn through_both(
    stack: &Stack,
    path: &'static str,
    tenant: &str,
    extra: &[(&'static str, &str)],
    body: &str,
) -> (HttpResponse, HttpResponse, u64) {
    for sent in 1..=3 {
        let (via, direct) = tokio::join!(
            post(stack.listener, path, tenant, extra, body.to_string()),
            post(stack.direct, path, tenant, extra, body.to_string()),
        );
        let created = |r: &HttpResponse| {
            r.body.lines().find_map(|l| {
                l.split_once("\"created\":")
                    .map(|(_, t)| t[..10].to_string())
            })
        };
        if created(&via) == created(&direct) {
            return (via, direct, sent);
        }
    }
    panic!("three pairs in a row straddled a second");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_without_include_usage_is_byte_identical_and_charged_exactly() {
    let stack = stack().await;
    let content = "Count the tokens of this sentence, exactly.";
    let chat = serde_json::json!({
        "model": "gpt-4o",
        "stream": true,
        "max_tokens": 400,
        "messages": [{ "role": "user", "content": content }]
    })
    .to_string();
    // Pretty-printed, with stream_options that lacks include_usage.
    let completions = "{\n  \"model\": \"gpt-4o\",\n  \"stream\": true,\n  \"max_tokens\": 300,\n  \"prompt\": [\"one\", \"two two\"],\n  \"stream_options\": {}\n}";
    let mut expected = 0;
    for (path, body, tokens, prompt) in [
        (
            "/v1/chat/completions",
            chat.as_str(),
            "9",
            chat_prompt_tokens([content]),
        ),
        (
            "/v1/completions",
            completions,
            "5",
            approx_tokens("one") + approx_tokens("two two"),
        ),
    ] {
        let extra = [("x-sim-completion-tokens", tokens)];
        let (via, direct, sent) = through_both(&stack, path, "quiet", &extra, body).await;
        assert_eq!(via.status, 200, "{via:?}");
        assert!(via.body.ends_with("data: [DONE]\n\n"), "{}", via.body);
        assert!(!via.body.contains("usage"), "{}", via.body);
        assert_eq!(via.body, direct.body, "{path}: the client sees other bytes");
        let choices = if path == "/v1/completions" { 2 } else { 1 };
        expected += sent * (prompt + choices * tokens.parse::<u64>().unwrap());
        assert_eq!(
            stack.settled_usage("quiet", "gpt-4o", expected).await,
            expected,
            "{path}: the window does not hold the real usage"
        );
    }

    // A client that asked for usage still gets it (and is charged it).
    let asked: Value = serde_json::from_str(&chat).unwrap();
    let mut asked = asked;
    asked["stream_options"] = serde_json::json!({ "include_usage": true });
    let extra = [("x-sim-completion-tokens", "4")];
    let (via, direct, sent) = through_both(
        &stack,
        "/v1/chat/completions",
        "asks",
        &extra,
        &asked.to_string(),
    )
    .await;
    assert_eq!(via.body, direct.body);
    via.assert_body_contains("\"completion_tokens\":4");
    let expected = sent * (chat_prompt_tokens([content]) + 4);
    assert_eq!(
        stack.settled_usage("asks", "gpt-4o", expected).await,
        expected
    );
}

/// What the filter counts for a chat body's prompt (o200k for gpt-4o).
fn exact_prompt_tokens(body: &str) -> u64 {
    let encoders = BpeEncoders::new();
    let counter = encoders.counter("o200k_base").unwrap();
    openai::parse(Endpoint::ChatCompletions, body.as_bytes())
        .unwrap()
        .prompt_tokens(counter, sluice_openai::DEFAULT_IMAGE_TOKENS)
}

fn o200k_tokens(text: &str) -> u64 {
    let encoders = BpeEncoders::new();
    encoders.counter("o200k_base").unwrap().count(text) as u64
}

/// Streamed tokens in `raw` (an SSE answer, possibly cut short): every
/// non-empty content delta of llm-sim's chat chunks.
fn content_deltas(raw: &str) -> u64 {
    raw.matches("\"delta\":{\"content\":\"").count() as u64
}

/// Opens a streaming chat request through Envoy; returns the connection.
fn open_stream(
    addr: SocketAddr,
    tenant: &str,
    extra: &[(&str, &str)],
    body: &str,
) -> std::net::TcpStream {
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut head = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\nContent-Length: {}\r\n\
         content-type: application/json\r\nx-tenant-id: {tenant}\r\n",
        body.len()
    );
    for (k, v) in extra {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).unwrap();
    stream.write_all(body.as_bytes()).unwrap();
    stream
}

/// A streamed chat of `tenant` that llm-sim breaks halfway through
/// `completion_tokens`: what the client received, a 200 without [DONE].
async fn broken_stream(
    stack: &Stack,
    tenant: &'static str,
    completion_tokens: &'static str,
    body: &str,
) -> String {
    let listener = stack.listener;
    let request = body.to_string();
    let received = tokio::task::spawn_blocking(move || {
        let extra = [
            ("x-sim-fail", "mid"),
            ("x-sim-completion-tokens", completion_tokens),
        ];
        let mut stream = open_stream(listener, tenant, &extra, &request);
        read_until(&mut stream, |_| false)
    })
    .await
    .unwrap();
    assert!(received.starts_with("HTTP/1.1 200"), "{received}");
    assert!(!received.contains("[DONE]"), "{received}");
    received
}

async fn sim_tokens_generated(sim: SocketAddr) -> u64 {
    let stats = get(sim, "/sim/stats").await.unwrap().body;
    serde_json::from_str::<Value>(&stats).unwrap()["tokens_generated"]
        .as_u64()
        .unwrap()
}

fn stream_body(content: &str) -> String {
    serde_json::json!({
        "model": "gpt-4o",
        "stream": true,
        "max_tokens": 4000,
        "messages": [{ "role": "user", "content": content }]
    })
    .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_that_breaks_mid_stream_is_charged_what_passed() {
    let stack = stack().await;
    let body = stream_body("Tell me a long story, please.");
    // llm-sim breaks after half of the 40 tokens: no usage, no [DONE].
    let received = broken_stream(&stack, "broken", "40", &body).await;
    let seen = content_deltas(&received);
    assert_eq!(seen, 20, "{received}");
    let expected = exact_prompt_tokens(&body) + o200k_tokens(&completion_text(seen));
    assert_eq!(
        stack.settled_usage("broken", "gpt-4o", expected).await,
        expected,
        "the estimate ({} + 4000 output) was not replaced by what passed",
        exact_prompt_tokens(&body)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_goes_away_is_charged_what_passed() {
    let stack = stack().await;
    let body = stream_body("Stream slowly, I may leave.");
    let listener = stack.listener;
    let request = body.clone();
    // 2000 tokens at 200/s: the client leaves after 10 of them.
    let received = tokio::task::spawn_blocking(move || {
        let extra = [
            ("x-sim-completion-tokens", "2000"),
            ("x-sim-tokens-per-second", "200"),
        ];
        let mut stream = open_stream(listener, "leaver", &extra, &request);
        read_until(&mut stream, |raw| content_deltas(raw) >= 10)
        // The connection drops here.
    })
    .await
    .unwrap();
    let seen = content_deltas(&received);
    assert!(seen >= 10, "{received}");
    let prompt = exact_prompt_tokens(&body);
    // Settled: the window stops moving once the filter has charged.
    let mut used = 0;
    for _ in 0..60 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        used = stack.tokens_used("leaver", "gpt-4o").await;
        if used < prompt + 4000 {
            break;
        }
    }
    let generated = sim_tokens_generated(stack.backend).await;
    assert!(
        generated < 2000,
        "the backend kept generating after the client left ({generated})"
    );
    assert!(
        (prompt + o200k_tokens(&completion_text(seen))
            ..=prompt + o200k_tokens(&completion_text(generated)))
            .contains(&used),
        "window {used}: prompt {prompt}, client saw {seen} tokens, backend made {generated}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn input_and_output_budgets_hold_the_real_usage() {
    let stack = stack_with(r#", "token_budgets": ["total", "input", "output"]"#).await;
    let content = "Split my budget.";
    let body = serde_json::json!({
        "model": "gpt-4o",
        "max_tokens": 300,
        "messages": [{ "role": "user", "content": content }]
    })
    .to_string();
    let extra = [("x-sim-completion-tokens", "12")];
    let response = post(
        stack.listener,
        "/v1/chat/completions",
        "split",
        &extra,
        body,
    )
    .await;
    assert_eq!(response.status, 200, "{response:?}");
    let input = chat_prompt_tokens([content]);
    for (budget, expected) in [("input", input), ("output", 12), ("total", input + 12)] {
        let used = stack
            .settled_budget("split", "gpt-4o", budget, expected)
            .await;
        assert_eq!(used, expected, "tokens={budget}");
    }
}

fn now_millis() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// A stream admitted in one one-second window and finished two windows
/// later: its correction lands in the window of its admission.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_correction_goes_to_the_window_of_admission() {
    let stack = stack().await;
    let content = "Across the boundary.";
    let body = stream_body(content);
    let tick = |tenant_window_at: u64| {
        let probe = tokens_probe("tick", "gpt-4o", "total");
        let limiter = stack.limiter.clone();
        async move {
            used_in_window_at(&limiter, &probe, tenant_window_at)
                .await
                .unwrap()
        }
    };
    for _attempt in 0..5 {
        // Start early in a second, so the admission surely falls in it.
        while now_millis() % 1000 > 300 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let sent_at = now_millis();
        let listener = stack.listener;
        let request = body.clone();
        // 30 tokens at 10/s: three seconds.
        let received = tokio::task::spawn_blocking(move || {
            let extra = [
                ("x-sim-completion-tokens", "30"),
                ("x-sim-tokens-per-second", "10"),
                ("x-sim-first-token-ms", "0"),
            ];
            let mut stream = open_stream(listener, "tick", &extra, &request);
            let head = read_until(&mut stream, |raw| raw.contains("\r\n\r\n"));
            let admitted_by = now_millis();
            let rest = read_until(&mut stream, |raw| raw.contains("[DONE]"));
            (head + &rest, admitted_by)
        })
        .await
        .unwrap();
        let (received, admitted_by) = received;
        if sent_at / 1000 != admitted_by / 1000 {
            continue; // the admission may have fallen in either second: again
        }
        assert!(received.contains("[DONE]"), "{received}");
        assert!(
            now_millis() / 1000 >= sent_at / 1000 + 2,
            "the stream ended two windows later"
        );
        let expected = chat_prompt_tokens([content]) + 30;
        let mut used = 0;
        for _ in 0..40 {
            used = tick(sent_at).await;
            if used == expected {
                break;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        assert_eq!(used, expected, "the admission window holds the real usage");
        assert_eq!(
            tick(now_millis()).await,
            0,
            "the current window got no correction"
        );
        return;
    }
    panic!("five admissions in a row were not timed within one second");
}

/// A streamed chat request offering one tool, `get_time`.
fn tool_stream_body(content: &str) -> String {
    serde_json::json!({
        "model": "gpt-4o",
        "stream": true,
        "max_tokens": 4000,
        "messages": [{ "role": "user", "content": content }],
        "tools": [{"type": "function", "function": {"name": "get_time",
            "parameters": {"type": "object", "properties": {"query": {"type": "string"}}}}}]
    })
    .to_string()
}

/// The tool call's name and argument pieces in the `data:` lines of `raw`.
fn tool_call_deltas(raw: &str) -> (String, Vec<String>) {
    let (mut name, mut pieces) = (String::new(), Vec::new());
    for line in raw.lines() {
        let Some(chunk) = line
            .strip_prefix("data: ")
            .and_then(|data| serde_json::from_str::<Value>(data).ok())
        else {
            continue;
        };
        let function = &chunk["choices"][0]["delta"]["tool_calls"][0]["function"];
        if let Some(n) = function["name"].as_str() {
            name.push_str(n);
        }
        match function["arguments"].as_str() {
            Some(piece) if !piece.is_empty() => pieces.push(piece.to_string()),
            _ => {}
        }
    }
    (name, pieces)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broken_tool_call_stream_is_charged_the_call_that_passed() {
    let stack = stack().await;
    let body = tool_stream_body("What time is it in Tokyo?");
    // llm-sim breaks at token 15 of 30: the name (2 tokens) and 13 pieces.
    let received = broken_stream(&stack, "tool-broken", "30", &body).await;
    let (name, pieces) = tool_call_deltas(&received);
    assert_eq!(name, "get_time");
    assert_eq!(
        pieces.len() as u64,
        15 - tool_name_tokens(&name),
        "{received}"
    );
    assert_eq!(
        pieces,
        tool_arguments(30 - tool_name_tokens(&name))[..pieces.len()]
    );
    // Each piece is one token for the filter's tokenizer too: the in-flight
    // bound of accounting_bench holds for tool calls.
    let arguments = pieces.concat();
    assert_eq!(o200k_tokens(&arguments), pieces.len() as u64, "{arguments}");
    let expected = exact_prompt_tokens(&body) + o200k_tokens(&name) + o200k_tokens(&arguments);
    assert_eq!(
        stack.settled_usage("tool-broken", "gpt-4o", expected).await,
        expected,
        "the call's name and arguments were not counted as they passed"
    );
}

/// `sluice_tenant_tokens_total` in Envoy's Prometheus output: (tenant, kind) → value.
async fn tenant_usage_series(admin: SocketAddr) -> BTreeMap<(String, String), u64> {
    let text = get(admin, "/stats/prometheus").await.unwrap().body;
    let mut series = BTreeMap::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix(&format!("{TENANT_TOKENS_STAT}{{")) else {
            continue;
        };
        let (labels, value) = rest.rsplit_once("} ").unwrap();
        let label = |key: &str| {
            labels
                .split(',')
                .find_map(|pair| pair.strip_prefix(&format!("{key}=\"")))
                .and_then(|v| v.strip_suffix('"'))
                .unwrap_or_else(|| panic!("no {key} in {line}"))
                .to_string()
        };
        series.insert((label("tenant"), label("kind")), value.parse().unwrap());
    }
    series
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn per_tenant_usage_is_a_prometheus_series_with_a_cap() {
    let stack = stack_with(r#", "tenant_usage_series": 2"#).await;
    let content = "Count me.";
    let chat = |stream: bool| {
        let mut body = serde_json::json!({
            "model": "gpt-4o", "max_tokens": 300,
            "messages": [{ "role": "user", "content": content }]
        });
        if stream {
            body["stream"] = true.into();
        }
        body.to_string()
    };
    // One after the other: meter-a and meter-b claim the two series, the
    // third tenant is counted as ~other.
    let mut expected = BTreeMap::<(String, String), u64>::new();
    let prompt = chat_prompt_tokens([content]);
    for (tenant, stream, completion, series) in [
        ("meter-a", false, 5, "meter-a"),
        ("meter-a", true, 8, "meter-a"),
        ("meter-b", false, 6, "meter-b"),
        ("meter-c", true, 7, OTHER_TENANTS),
        ("meter-d", false, 9, OTHER_TENANTS),
    ] {
        let tokens = completion.to_string();
        let extra = [("x-sim-completion-tokens", tokens.as_str())];
        let response = post(
            stack.listener,
            "/v1/chat/completions",
            tenant,
            &extra,
            chat(stream),
        )
        .await;
        assert_eq!(response.status, 200, "{response:?}");
        for (kind, value) in [
            (UsageKind::Prompt, prompt),
            (UsageKind::Completion, completion),
            (UsageKind::Cached, 0),
        ] {
            *expected
                .entry((series.to_string(), kind.as_str().to_string()))
                .or_default() += value;
        }
    }
    let mut series = BTreeMap::new();
    for _ in 0..60 {
        series = tenant_usage_series(stack.admin).await;
        if series == expected {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(series, expected);
}
