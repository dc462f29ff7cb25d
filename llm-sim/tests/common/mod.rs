//! A tiny HTTP/1.1 client over `TcpStream`, so the tests see the bytes on
//! the wire (chunked framing, truncated streams) exactly.
#![allow(dead_code)]

use serde_json::Value;
use std::net::SocketAddr;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

pub use sluice_llm_sim::{spawn, SimConfig, SimServer};

#[derive(Debug)]
pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// False when a chunked body ended without its terminating chunk.
    pub complete: bool,
}

impl Response {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(key, _)| key.eq_ignore_ascii_case(name))
            .map(|(_, value)| value.as_str())
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|error| panic!("not JSON ({error}): {}", self.text()))
    }

    /// The `data:` payloads of an event-stream body, checking the framing:
    /// every event is exactly `data: <payload>\n\n`.
    pub fn events(&self) -> Vec<String> {
        split_events(&self.text())
    }
}

pub fn split_events(body: &str) -> Vec<String> {
    assert!(
        body.is_empty() || body.ends_with("\n\n"),
        "body does not end with a blank line: {body:?}"
    );
    body.split_terminator("\n\n")
        .map(|event| {
            assert!(!event.contains('\n'), "multi-line event: {event:?}");
            event
                .strip_prefix("data: ")
                .unwrap_or_else(|| panic!("event without 'data: ': {event:?}"))
                .to_string()
        })
        .collect()
}

fn request_bytes(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&str>,
) -> Vec<u8> {
    let mut text = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    for (name, value) in headers {
        text.push_str(&format!("{name}: {value}\r\n"));
    }
    if let Some(body) = body {
        text.push_str("Content-Type: application/json\r\n");
        text.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    text.push_str("\r\n");
    if let Some(body) = body {
        text.push_str(body);
    }
    text.into_bytes()
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack
        .windows(needle.len())
        .position(|window| window == needle)
}

fn parse_head(head: &[u8]) -> (u16, Vec<(String, String)>) {
    let head = String::from_utf8_lossy(head);
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or_default();
    let status = status_line
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("bad status line {status_line:?}"));
    let headers = lines
        .filter(|line| !line.is_empty())
        .filter_map(|line| line.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    (status, headers)
}

/// Moves the complete chunks of `raw` into `decoded`; returns true once the
/// terminating chunk was seen.
fn decode_chunks(raw: &mut Vec<u8>, decoded: &mut Vec<u8>) -> bool {
    loop {
        let Some(line_end) = find(raw, b"\r\n") else {
            return false;
        };
        let size_text = String::from_utf8_lossy(&raw[..line_end]).into_owned();
        let size = usize::from_str_radix(size_text.split(';').next().unwrap_or("").trim(), 16)
            .unwrap_or_else(|_| panic!("bad chunk size {size_text:?}"));
        if size == 0 {
            return raw.len() >= line_end + 4;
        }
        let end = line_end + 2 + size + 2;
        if raw.len() < end {
            return false;
        }
        decoded.extend_from_slice(&raw[line_end + 2..line_end + 2 + size]);
        raw.drain(..end);
    }
}

/// One request with `Connection: close`, read to the end.
pub async fn request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&str>,
) -> Response {
    let mut tcp = TcpStream::connect(addr).await.unwrap();
    tcp.write_all(&request_bytes(addr, method, path, headers, body))
        .await
        .unwrap();
    let mut raw = Vec::new();
    let mut buf = [0u8; 16 * 1024];
    loop {
        match tcp.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => raw.extend_from_slice(&buf[..n]),
        }
    }
    let head_end = find(&raw, b"\r\n\r\n").unwrap_or_else(|| panic!("no response head: {raw:?}"));
    let (status, headers) = parse_head(&raw[..head_end]);
    let mut rest = raw[head_end + 4..].to_vec();
    let chunked = headers
        .iter()
        .any(|(k, v)| k == "transfer-encoding" && v.contains("chunked"));
    let (body, complete) = if chunked {
        let mut decoded = Vec::new();
        let complete = decode_chunks(&mut rest, &mut decoded);
        (decoded, complete)
    } else {
        (rest, true)
    };
    Response {
        status,
        headers,
        body,
        complete,
    }
}

/// Checks that `GET /metrics` shows every line of `lines`.
pub async fn assert_metrics(addr: SocketAddr, lines: &[&str]) {
    let metrics = get(addr, "/metrics").await.text();
    for line in lines {
        assert!(metrics.contains(line), "{line} not in\n{metrics}");
    }
}

pub async fn get(addr: SocketAddr, path: &str) -> Response {
    request(addr, "GET", path, &[], None).await
}

pub async fn post(addr: SocketAddr, path: &str, headers: &[(&str, &str)], body: &str) -> Response {
    request(addr, "POST", path, headers, Some(body)).await
}

pub async fn chat(addr: SocketAddr, headers: &[(&str, &str)], body: &Value) -> Response {
    post(addr, "/v1/chat/completions", headers, &body.to_string()).await
}

pub fn chat_body(content: &str) -> Value {
    serde_json::json!({
        "model": "test-model",
        "messages": [{"role": "user", "content": content}],
    })
}

pub fn stream_body(content: &str, include_usage: bool) -> Value {
    let mut body = chat_body(content);
    body["stream"] = Value::Bool(true);
    if include_usage {
        body["stream_options"] = serde_json::json!({"include_usage": true});
    }
    body
}

/// A streamed response read event by event.
pub struct EventReader {
    tcp: TcpStream,
    raw: Vec<u8>,
    decoded: Vec<u8>,
    pub status: u16,
    pub headers: Vec<(String, String)>,
    /// The terminating chunk arrived.
    pub finished: bool,
    /// The connection ended (EOF or error).
    pub closed: bool,
}

impl EventReader {
    pub async fn open(
        addr: SocketAddr,
        path: &str,
        headers: &[(&str, &str)],
        body: &str,
    ) -> EventReader {
        let mut tcp = TcpStream::connect(addr).await.unwrap();
        tcp.write_all(&request_bytes(addr, "POST", path, headers, Some(body)))
            .await
            .unwrap();
        let mut raw = Vec::new();
        let mut buf = [0u8; 4096];
        let head_end = loop {
            if let Some(end) = find(&raw, b"\r\n\r\n") {
                break end;
            }
            let n = tcp.read(&mut buf).await.unwrap();
            assert!(n > 0, "connection closed before the response head");
            raw.extend_from_slice(&buf[..n]);
        };
        let (status, headers) = parse_head(&raw[..head_end]);
        raw.drain(..head_end + 4);
        EventReader {
            tcp,
            raw,
            decoded: Vec::new(),
            status,
            headers,
            finished: false,
            closed: false,
        }
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(key, _)| key.eq_ignore_ascii_case(name))
            .map(|(_, value)| value.as_str())
    }

    /// The next event's `data:` payload, or None when the stream ended.
    pub async fn next_event(&mut self) -> Option<String> {
        loop {
            if let Some(end) = find(&self.decoded, b"\n\n") {
                let event: Vec<u8> = self.decoded.drain(..end + 2).collect();
                let event = String::from_utf8(event).unwrap();
                return Some(split_events(&event).remove(0));
            }
            if self.finished || self.closed {
                assert!(
                    self.decoded.is_empty(),
                    "partial event at the end: {:?}",
                    String::from_utf8_lossy(&self.decoded)
                );
                return None;
            }
            self.finished = decode_chunks(&mut self.raw, &mut self.decoded);
            if self.finished || find(&self.decoded, b"\n\n").is_some() {
                continue;
            }
            let mut buf = [0u8; 4096];
            match self.tcp.read(&mut buf).await {
                Ok(0) | Err(_) => self.closed = true,
                Ok(n) => self.raw.extend_from_slice(&buf[..n]),
            }
        }
    }

    /// All remaining events.
    pub async fn rest(&mut self) -> Vec<String> {
        let mut events = Vec::new();
        while let Some(event) = self.next_event().await {
            events.push(event);
        }
        events
    }
}

pub async fn stats(addr: SocketAddr) -> Value {
    get(addr, "/sim/stats").await.json()
}

/// Checks that `GET /sim/stats` shows each `(counter, value)` of `expected`.
pub async fn assert_stats(addr: SocketAddr, expected: &[(&str, u64)]) {
    let stats = stats(addr).await;
    for (counter, value) in expected {
        assert_eq!(stats[*counter], *value, "{counter} in {stats}");
    }
}

/// Polls `/sim/stats` until `check` holds (fails the test after 10 s).
pub async fn wait_for_stats(addr: SocketAddr, check: impl Fn(&Value) -> bool) -> Value {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let stats = stats(addr).await;
        if check(&stats) {
            return stats;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "condition not reached; stats: {stats}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

pub fn parse(event: &str) -> Value {
    serde_json::from_str(event).unwrap_or_else(|error| panic!("bad event {event:?}: {error}"))
}

pub async fn start(config: SimConfig) -> SimServer {
    spawn(config).await.unwrap()
}

/// 100 tokens a second from the first token on; defaults otherwise.
pub fn at_100_tokens_per_second() -> SimConfig {
    SimConfig {
        tokens_per_second: 100.0,
        first_token_latency: Duration::ZERO,
        ..SimConfig::default()
    }
}

/// A simulator at 100 tokens a second with one streamed chat completion of
/// `completion_tokens` tokens open on it.
pub async fn start_paced_stream(completion_tokens: &str, body: &Value) -> (SimServer, EventReader) {
    let server = start(at_100_tokens_per_second()).await;
    let stream = open_chat_stream(server.addr(), completion_tokens, body).await;
    (server, stream)
}

/// A streamed chat completion of `completion_tokens` tokens from `addr`.
pub async fn open_chat_stream(
    addr: SocketAddr,
    completion_tokens: &str,
    body: &Value,
) -> EventReader {
    EventReader::open(
        addr,
        "/v1/chat/completions",
        &[("x-sim-completion-tokens", completion_tokens)],
        &body.to_string(),
    )
    .await
}
