//! The demo's HTTP clients: OpenAI-style streaming chat requests through
//! Envoy, recording what came back; and plain admin calls.

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::Request;
use hyper_util::rt::TokioIo;
use serde_json::Value;
use sluice_demo::stats::Record;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Records shared between the request tasks and the table.
#[derive(Clone)]
pub struct Journal {
    pub start: Instant,
    records: Arc<Mutex<Vec<Record>>>,
}

impl Journal {
    pub fn new() -> Self {
        Journal {
            start: Instant::now(),
            records: Arc::new(Mutex::new(Vec::new())),
        }
    }

    pub fn now_s(&self) -> f64 {
        self.start.elapsed().as_secs_f64()
    }

    fn push(&self, record: Record) -> usize {
        let mut records = self.records.lock().unwrap_or_else(|e| e.into_inner());
        records.push(record);
        records.len() - 1
    }

    fn update(&self, index: usize, f: impl FnOnce(&mut Record)) {
        let mut records = self.records.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(record) = records.get_mut(index) {
            f(record);
        }
    }

    pub fn snapshot(&self) -> Vec<Record> {
        self.records
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Requests that have not ended yet.
    pub fn open(&self) -> usize {
        self.records
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .filter(|r| r.done_s.is_none())
            .count()
    }
}

/// One chat request as a client would send it.
pub struct Chat {
    pub tenant: &'static str,
    pub model: &'static str,
    /// Prompt length in words (about one token each).
    pub words: usize,
    pub max_tokens: u32,
    pub seq: u64,
}

impl Chat {
    fn body(&self) -> String {
        // Common English words: about one token each, in both encodings.
        const WORDS: [&str; 20] = [
            "the", "of", "and", "to", "in", "is", "that", "for", "it", "with", "as", "on", "was",
            "be", "at", "by", "this", "from", "or", "an",
        ];
        let text: String = (0..self.words as u64)
            .map(|i| WORDS[((i * 7 + self.seq) % WORDS.len() as u64) as usize])
            .collect::<Vec<_>>()
            .join(" ");
        serde_json::json!({
            "model": self.model,
            "max_tokens": self.max_tokens,
            "stream": true,
            "stream_options": {"include_usage": true},
            "messages": [{"role": "user", "content": text}],
        })
        .to_string()
    }
}

/// Longest a request may take before the client gives up.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(180);

/// Send `chat` to Envoy and record everything that happens to it.
pub async fn send(journal: Journal, envoy: SocketAddr, chat: Chat) {
    let index = journal.push(Record {
        tenant: chat.tenant.to_string(),
        model: chat.model.to_string(),
        sent_s: journal.now_s(),
        ..Default::default()
    });
    let outcome =
        tokio::time::timeout(REQUEST_TIMEOUT, exchange(&journal, index, envoy, &chat)).await;
    let failure = match outcome {
        Ok(Ok(())) => None,
        Ok(Err(error)) => Some(format!("{error:#}")),
        Err(_) => Some(format!("no answer within {REQUEST_TIMEOUT:?}")),
    };
    let now = journal.now_s();
    journal.update(index, |r| {
        if r.failure.is_none() {
            r.failure = failure;
        }
        r.done_s.get_or_insert(now);
    });
}

async fn exchange(
    journal: &Journal,
    index: usize,
    envoy: SocketAddr,
    chat: &Chat,
) -> anyhow::Result<()> {
    let stream = tokio::net::TcpStream::connect(envoy).await?;
    stream.set_nodelay(true)?;
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    tokio::spawn(connection);
    let request = Request::post("/v1/chat/completions")
        .header("host", "localhost")
        .header("content-type", "application/json")
        .header("x-tenant-id", chat.tenant)
        .body(Full::new(Bytes::from(chat.body())))?;
    let response = sender.send_request(request).await?;
    let status = response.status().as_u16();
    let deferred = response.headers().contains_key("x-sluice-request-id");
    let retry_after = response
        .headers()
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    journal.update(index, |r| {
        r.status = Some(status);
        r.deferred = deferred;
        r.retry_after = retry_after;
    });
    let mut body = response.into_body();
    let mut pending = String::new();
    let mut error_body = String::new();
    let mut saw_content = false;
    let mut event_is_error = false;
    while let Some(frame) = body.frame().await {
        let frame = frame?;
        let Ok(data) = frame.into_data() else {
            continue;
        };
        let text = String::from_utf8_lossy(&data);
        if status != 200 {
            error_body.push_str(&text);
            continue;
        }
        pending.push_str(&text);
        while let Some(end) = pending.find('\n') {
            let line: String = pending.drain(..=end).collect();
            let line = line.trim_end();
            if line.starts_with("event: error") {
                event_is_error = true;
                continue;
            }
            let Some(data) = line.strip_prefix("data: ") else {
                continue;
            };
            let now = journal.now_s();
            if data == "[DONE]" {
                let completed = saw_content;
                journal.update(index, |r| {
                    r.completed = completed;
                    r.done_s = Some(now);
                });
                continue;
            }
            let Ok(json) = serde_json::from_str::<Value>(data) else {
                continue;
            };
            if event_is_error || json.get("error").is_some() {
                let code = json
                    .pointer("/error/code")
                    .and_then(Value::as_str)
                    .unwrap_or("error")
                    .to_string();
                journal.update(index, |r| {
                    r.error_code = Some(code);
                    r.done_s = Some(now);
                });
                event_is_error = false;
                continue;
            }
            let has_content = json
                .pointer("/choices/0/delta/content")
                .and_then(Value::as_str)
                .is_some_and(|c| !c.is_empty());
            if has_content && !saw_content {
                saw_content = true;
                journal.update(index, |r| {
                    r.first_token_s.get_or_insert(now);
                });
            }
            if let Some(usage) = json.get("usage").filter(|u| u.is_object()) {
                let prompt = usage["prompt_tokens"].as_u64().unwrap_or(0);
                let completion = usage["completion_tokens"].as_u64().unwrap_or(0);
                journal.update(index, |r| {
                    r.prompt_tokens = prompt;
                    r.completion_tokens = completion;
                });
            }
        }
    }
    if status != 200 {
        let code = serde_json::from_str::<Value>(&error_body)
            .ok()
            .and_then(|j| {
                j.pointer("/error/code")
                    .or_else(|| j.pointer("/error/type"))
                    .and_then(Value::as_str)
                    .map(str::to_string)
            })
            .unwrap_or_else(|| format!("http_{status}"));
        journal.update(index, |r| r.error_code = Some(code));
    }
    Ok(())
}

/// A small HTTP/1.1 call (admin APIs): status and body.
pub async fn call(addr: SocketAddr, method: &str, path: &str) -> anyhow::Result<(u16, String)> {
    call_with_body(addr, method, path, Vec::new()).await
}

/// [`call`] with a JSON request body.
pub async fn call_with_body(
    addr: SocketAddr,
    method: &str,
    path: &str,
    json: Vec<u8>,
) -> anyhow::Result<(u16, String)> {
    let stream = tokio::net::TcpStream::connect(addr).await?;
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    tokio::spawn(connection);
    let request = Request::builder()
        .method(method)
        .uri(path)
        .header("host", "localhost")
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(json)))?;
    let response =
        tokio::time::timeout(Duration::from_secs(5), sender.send_request(request)).await??;
    let status = response.status().as_u16();
    let body =
        tokio::time::timeout(Duration::from_secs(5), response.into_body().collect()).await??;
    Ok((
        status,
        String::from_utf8_lossy(&body.to_bytes()).into_owned(),
    ))
}
