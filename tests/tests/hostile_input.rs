//! Hostile input through the real stack: Envoy loading the built Wasm filter,
//! sluice-rls (its gRPC server, in-memory counters) and llm-sim as the model.
//! Each case is raw bytes on a fresh connection with its expected answer
//! class; after every case a normal request must still be served, so no case
//! can take the filter's VM, Envoy or the RLS down.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests fail loudly

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::Duration;

use sluice_ratelimit::metrics::Metrics;
use sluice_ratelimit::store::MemoryStore;
use sluice_testkit::stack::{
    limiter, start_filter_envoy_edited, start_llm_sim, start_rls, FilterEnvoy, Rls, RlsParts,
};
use sluice_testkit::StaticHttpServer;

const LIMITS: &str = r#"
domain: sluice
descriptors:
  - key: tenant
    descriptors:
      - key: model
        rate_limit: { unit: hour, requests_per_unit: 100000, name: rph }
"#;

/// The filter's body deadline and Envoy's whole-request deadline, shortened
/// from the example's 10 s / 15 s so the slow-body cases take seconds.
const BODY_TIMEOUT: Duration = Duration::from_millis(1000);
const REQUEST_TIMEOUT: Duration = Duration::from_secs(3);
/// The filter's (and the example config's) largest body.
const MAX_BODY: usize = 4 * 1024 * 1024;
/// Longest any answer may take; a case past it was never answered.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(20);

/// In every chat completion llm-sim answers with.
const MODEL_ANSWER: &str = "\"choices\"";
const CHAT_PATH: &str = "/v1/chat/completions";
const TENANT: (&str, &str) = ("x-tenant-id", "acme");
const JSON: (&str, &str) = ("content-type", "application/json");

/// One piece of a request as the client writes it, and how long it then waits.
struct Part {
    bytes: Vec<u8>,
    pause: Duration,
}

struct Case {
    name: &'static str,
    parts: Vec<Part>,
    /// The answer's status; 0: the connection closes without one.
    expect: u16,
}

fn case(name: &'static str, request: Vec<u8>, expect: u16) -> Case {
    Case {
        name,
        parts: vec![Part {
            bytes: request,
            pause: Duration::ZERO,
        }],
        expect,
    }
}

fn head(method: &str, path: &str, headers: &[(&str, &str)]) -> String {
    let mut head = format!("{method} {path} HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\n");
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head
}

/// A request with a `content-length` for `body`.
fn request(method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> Vec<u8> {
    let mut bytes = head(method, path, headers).into_bytes();
    bytes.extend_from_slice(format!("content-length: {}\r\n\r\n", body.len()).as_bytes());
    bytes.extend_from_slice(body);
    bytes
}

fn post(headers: &[(&str, &str)], body: &[u8]) -> Vec<u8> {
    request("POST", CHAT_PATH, headers, body)
}

/// A POST whose body comes in HTTP/1.1 chunks, with no length up front.
fn chunked(headers: &[(&str, &str)], body: &[u8]) -> Vec<u8> {
    let mut bytes = head("POST", CHAT_PATH, headers).into_bytes();
    bytes.extend_from_slice(b"transfer-encoding: chunked\r\n\r\n");
    for chunk in body.chunks(64 * 1024) {
        bytes.extend_from_slice(format!("{:x}\r\n", chunk.len()).as_bytes());
        bytes.extend_from_slice(chunk);
        bytes.extend_from_slice(b"\r\n");
    }
    bytes.extend_from_slice(b"0\r\n\r\n");
    bytes
}

fn chat(model: &str, content: &str) -> Vec<u8> {
    serde_json::json!({
        "model": model,
        "max_tokens": 5,
        "messages": [{"role": "user", "content": content}],
    })
    .to_string()
    .into_bytes()
}

fn normal_chat() -> Vec<u8> {
    post(&[TENANT, JSON], &chat("gpt-4o", "Hello there"))
}

/// What came back: the status (0 if none) and the body text.
struct Answer {
    status: u16,
    text: String,
}

/// Sends `parts` on a fresh connection and reads the answer. A reader thread
/// reads while the parts are written, and write errors are ignored: a server
/// may answer and close before the whole request is sent (413 on a huge body),
/// and its answer must still be seen.
fn exchange(addr: SocketAddr, parts: &[Part]) -> Answer {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).unwrap();
    stream.set_read_timeout(Some(ANSWER_TIMEOUT)).unwrap();
    stream.set_write_timeout(Some(ANSWER_TIMEOUT)).unwrap();
    let mut reading = stream.try_clone().unwrap();
    let reader = std::thread::spawn(move || {
        let mut raw = Vec::new();
        let mut buffer = [0u8; 64 * 1024];
        loop {
            match reading.read(&mut buffer) {
                Ok(0) | Err(_) => break,
                Ok(n) => raw.extend_from_slice(&buffer[..n]),
            }
        }
        raw
    });
    for part in parts {
        if stream.write_all(&part.bytes).is_err() {
            break;
        }
        std::thread::sleep(part.pause);
    }
    let raw = reader.join().unwrap();
    let text = String::from_utf8_lossy(&raw).into_owned();
    let status = text
        .lines()
        .next()
        .and_then(|line| line.split_whitespace().nth(1))
        .and_then(|code| code.parse().ok())
        .unwrap_or(0);
    Answer { status, text }
}

fn cases() -> Vec<Case> {
    let deep = |depth: usize| {
        let mut body =
            br#"{"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}], "x": "#
                .to_vec();
        body.extend(std::iter::repeat_n(b'[', depth));
        body.extend(std::iter::repeat_n(b']', depth));
        body.push(b'}');
        body
    };
    let long_tenant = "t".repeat(4096);
    let huge_tenant = "t".repeat(100 * 1024);
    let long_model = format!("llama-{}", "x".repeat(10_000));
    let half = chat("gpt-4o", &"slow ".repeat(200));
    let (first, rest) = half.split_at(half.len() / 2);
    let slow_head = head("POST", CHAT_PATH, &[TENANT, JSON]);
    let with_length = |start: &[u8]| {
        let mut bytes = slow_head.clone().into_bytes();
        bytes.extend_from_slice(format!("content-length: {}\r\n\r\n", half.len()).as_bytes());
        bytes.extend_from_slice(start);
        bytes
    };
    let big = vec![b' '; MAX_BODY + 1024 * 1024];
    vec![
        // Malformed JSON.
        case("truncated JSON", post(&[TENANT, JSON], br#"{"model": "gpt-4o", "messages": ["#), 400),
        case("trailing garbage", post(&[TENANT, JSON], &[chat("gpt-4o", "x"), b" }{".to_vec()].concat()), 400),
        case("JSON array, not an object", post(&[TENANT, JSON], b"[1, 2, 3]"), 400),
        case("JSON null", post(&[TENANT, JSON], b"null"), 400),
        case("empty body", post(&[TENANT, JSON], b""), 400),
        case("messages is a string", post(&[TENANT, JSON], br#"{"model": "gpt-4o", "messages": "hi"}"#), 400),
        case("empty messages (the backend's 400)", post(&[TENANT, JSON], br#"{"model": "gpt-4o", "messages": []}"#), 400),
        case("max_tokens negative", post(&[TENANT, JSON], br#"{"model": "gpt-4o", "max_tokens": -1, "messages": [{"role": "user", "content": "hi"}]}"#), 400),
        case("max_tokens 1e30 and n 1e9", post(&[TENANT, JSON], br#"{"model": "gpt-4o", "max_tokens": 1e30, "n": 1000000000, "messages": [{"role": "user", "content": "hi"}]}"#), 400),
        case("max_tokens u64::MAX and n u64::MAX", post(&[TENANT, JSON], br#"{"model": "gpt-4o", "max_tokens": 18446744073709551615, "n": 18446744073709551615, "messages": [{"role": "user", "content": "hi"}]}"#), 200),
        // Invalid text.
        case("invalid UTF-8 in a string", post(&[TENANT, JSON], b"{\"model\": \"gpt-4o\", \"messages\": [{\"role\": \"user\", \"content\": \"\xff\xfe\xc3\"}]}"), 400),
        case("lone surrogate escape", post(&[TENANT, JSON], br#"{"model": "gpt-4o", "messages": [{"role": "user", "content": "\ud800"}]}"#), 400),
        case("NUL and control escapes in content", post(&[TENANT, JSON], br#"{"model": "gpt-4o", "messages": [{"role": "user", "content": "a\u0000b\u001b[31m"}]}"#), 200),
        // Nesting.
        case("nesting 100 deep (under serde_json's limit)", post(&[TENANT, JSON], &deep(100)), 200),
        case("nesting 100000 deep", post(&[TENANT, JSON], &deep(100_000)), 400),
        // Size and pace.
        case("content-length over the limit, no body sent", {
            let mut bytes = head("POST", CHAT_PATH, &[TENANT, JSON]).into_bytes();
            bytes.extend_from_slice(format!("content-length: {}\r\n\r\n", MAX_BODY + 1).as_bytes());
            bytes
        }, 413),
        case("5 MiB body with its length", post(&[TENANT, JSON], &big), 413),
        case("5 MiB chunked body, no length", chunked(&[TENANT, JSON], &big), 413),
        // Written at once: Envoy reads up to its listener buffer (5 MiB) in
        // one go; without the route's larger stream buffer these got Envoy's
        // plain 413 most of the time (every 413 must be Sluice's JSON: below).
        case("6 MiB chunked body, sent fast", chunked(&[TENANT, JSON], &vec![b' '; 6 * 1024 * 1024]), 413),
        case("6 MiB chunked body, sent fast, again", chunked(&[TENANT, JSON], &vec![b' '; 6 * 1024 * 1024]), 413),
        case("12 MiB chunked body, sent fast", chunked(&[TENANT, JSON], &vec![b' '; 12 * 1024 * 1024]), 413),
        case("content-length not a number", {
            let mut bytes = head("POST", CHAT_PATH, &[TENANT, JSON]).into_bytes();
            bytes.extend_from_slice(b"content-length: 99999999999999999999999\r\n\r\n{}");
            bytes
        }, 400),
        case("chunked without length, valid JSON", chunked(&[TENANT, JSON], &chat("gpt-4o", "chunked")), 200),
        Case {
            name: "body trickles past the body deadline",
            parts: vec![
                Part { bytes: with_length(first), pause: BODY_TIMEOUT + Duration::from_millis(500) },
                Part { bytes: rest[..1].to_vec(), pause: Duration::ZERO },
            ],
            expect: 408,
        },
        Case {
            name: "body stalls half-way",
            parts: vec![Part { bytes: with_length(first), pause: REQUEST_TIMEOUT + Duration::from_secs(1) }],
            expect: 408,
        },
        // Methods and encodings.
        case("GET on the chat path (passed on: OpenAI lists stored completions there)", request("GET", CHAT_PATH, &[TENANT], b""), 405),
        case("PUT on the chat path", request("PUT", CHAT_PATH, &[TENANT, JSON], &chat("gpt-4o", "x")), 405),
        case("gzip-encoded body", post(&[TENANT, JSON, ("content-encoding", "gzip")], b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03\xabV\xca\xcdOI\xcdQ\xb2R\x02\x00"), 415),
        case("form-encoded body", post(&[TENANT, ("content-type", "application/x-www-form-urlencoded")], b"model=gpt-4o&messages=hi"), 400),
        // Tenants.
        case("no tenant", post(&[JSON], &chat("gpt-4o", "x")), 401),
        case("empty tenant", post(&[("x-tenant-id", ""), JSON], &chat("gpt-4o", "x")), 401),
        case("tenant with separators and dots", post(&[("x-tenant-id", "../a|b*c=d;e"), JSON], &chat("gpt-4o", "x")), 200),
        case("tenant in non-ASCII bytes", post(&[("x-tenant-id", "\u{202e}acme\u{1d4ea}"), JSON], &chat("gpt-4o", "x")), 200),
        case("tenant 4 KiB long", post(&[("x-tenant-id", &long_tenant), JSON], &chat("gpt-4o", "x")), 200),
        case("tenant 100 KiB long (over Envoy's header limit)", post(&[("x-tenant-id", &huge_tenant), JSON], &chat("gpt-4o", "x")), 431),
        case("two tenant headers", post(&[TENANT, ("x-tenant-id", "other"), JSON], &chat("gpt-4o", "x")), 200),
        case("control byte in a header value", post(&[("x-tenant-id", "ac\x01me"), JSON], &chat("gpt-4o", "x")), 400),
        // Models.
        case("unknown model path-like", post(&[TENANT, JSON], &chat("../../etc/passwd", "x")), 400),
        case("model 10 000 characters", post(&[TENANT, JSON], &chat(&long_model, "x")), 200),
        case("model with NUL and newline", post(&[TENANT, JSON], &chat("llama\u{0}\nx", "x")), 200),
        case("model is a number", post(&[TENANT, JSON], br#"{"model": 42, "messages": []}"#), 400),
        case("model missing", post(&[TENANT, JSON], br#"{"messages": [{"role": "user", "content": "hi"}]}"#), 400),
        // Sluice's own headers from a client: stripped, the request served normally.
        case("client sets x-sluice-deferred and x-sluice-tenant", post(&[TENANT, JSON, ("x-sluice-deferred", "1"), ("x-sluice-tenant", "root")], &chat("gpt-4o", "x")), 200),
    ]
}

struct Stack {
    listener: SocketAddr,
    _envoy: FilterEnvoy,
    _rls: Rls,
}

async fn stack() -> Stack {
    let limiter = limiter(LIMITS, Arc::new(MemoryStore::new()), Metrics::new());
    let rls = start_rls(limiter, RlsParts::default()).await;
    let backend = start_llm_sim(sluice_llm_sim::SimConfig::fast()).await;
    // Nothing here may be deferred; a stand-in that would show it if it were.
    let deferral = StaticHttpServer::start(r#"{"deferred": true}"#).unwrap();
    let envoy = start_filter_envoy_edited(
        rls.port,
        backend.port(),
        deferral.addr.port(),
        |mut config| {
            for (from, to) in [
                (
                    "\"body_timeout_ms\": 10000",
                    format!("\"body_timeout_ms\": {}", BODY_TIMEOUT.as_millis()),
                ),
                (
                    "request_timeout: 15s",
                    format!("request_timeout: {}s", REQUEST_TIMEOUT.as_secs()),
                ),
            ] {
                assert!(
                    config.contains(from),
                    "{from} not in envoy/sluice-filter.yaml"
                );
                config = config.replace(from, &to);
            }
            config
        },
    )
    .await;
    Stack {
        listener: envoy.listener,
        _envoy: envoy,
        _rls: rls,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_input_gets_its_answer_and_the_next_request_is_served() {
    let stack = stack().await;
    let addr = stack.listener;
    let outcomes = tokio::task::spawn_blocking(move || {
        let first = exchange(
            addr,
            &[Part {
                bytes: normal_chat(),
                pause: Duration::ZERO,
            }],
        );
        assert_eq!(
            first.status, 200,
            "the stack does not serve: {}",
            first.text
        );
        let mut outcomes = Vec::new();
        for case in cases() {
            let answer = exchange(addr, &case.parts);
            let after = exchange(
                addr,
                &[Part {
                    bytes: normal_chat(),
                    pause: Duration::ZERO,
                }],
            );
            let served_after = after.status == 200 && after.text.contains(MODEL_ANSWER);
            let first_line = answer
                .text
                .lines()
                .last()
                .unwrap_or_default()
                .chars()
                .take(160)
                .collect::<String>();
            println!(
                "| {} | {} | {} | {} | {first_line} |",
                case.name,
                case.expect,
                answer.status,
                if served_after { "served" } else { "NOT SERVED" }
            );
            outcomes.push((
                case.name,
                case.expect,
                answer.status,
                served_after,
                answer.text,
            ));
        }
        outcomes
    })
    .await
    .unwrap();
    let failures: Vec<String> = outcomes
        .iter()
        .filter(|(_, expect, status, served_after, text)| {
            // A 200 must be the model's answer (never the deferral stand-in's).
            let wrong_200 = *status == 200 && !text.contains(MODEL_ANSWER);
            // A 413 must be Sluice's JSON (counted), never Envoy's plain one.
            let plain_413 = *status == 413 && !text.contains("request_too_large");
            status != expect || !served_after || wrong_200 || plain_413
        })
        .map(|(name, expect, status, served_after, text)| {
            format!("{name}: expected {expect}, got {status}, next request served: {served_after}\n{text:.400}")
        })
        .collect();
    assert!(
        failures.is_empty(),
        "{} case(s) failed:\n{}",
        failures.len(),
        failures.join("\n\n")
    );
}
