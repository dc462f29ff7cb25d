//! The streaming call to the LLM backend (OpenAI-compatible).
//!
//! The consumer always asks for a stream with usage (`"stream": true`,
//! `"stream_options": {"include_usage": true}`), whatever the client asked:
//! it needs chunks to forward and usage to account; the HTTP side rebuilds a
//! whole answer when the client wanted one.
//!
//! How a call ends ([`CallEnd`]):
//!
//! | what happened | before any chunk was written | after |
//! |---|---|---|
//! | `[DONE]` (or a clean end after a `finish_reason`) | `done` | `done` |
//! | HTTP 429 / 503 from the backend (busy) | retry later, nothing written | — |
//! | other HTTP error status | `error` `backend_error`, no retry | — |
//! | an `{"error": …}` event in the stream | `error` `backend_error` | `error` `backend_error` |
//! | connect failure, first-byte timeout, stream broken | retry later, nothing written | `error` `backend_stream_broken` / `backend_timeout` |
//! | `cancel:{id}` set | `error` `cancelled` | `error` `cancelled` |
//! | a Redis write fails | abort the call, retry later | abort the call, retry later |
//!
//! "Retry later" writes no terminal entry, so a later attempt can still
//! answer the client. A terminal entry after output started is final: the
//! client has seen part of an answer, and calling the model again would
//! burn the GPU twice.

use crate::call::sent::{OnSent, SentBody};
use crate::call::stream::{self, ErrorCode, StreamConfig};
use crate::call::usage::OutputCounter;
use crate::metrics::Metrics;
use crate::work::WorkItem;
use bytes::Bytes;
use http::header::{HeaderMap, HeaderName, HeaderValue, ACCEPT, AUTHORIZATION, CONTENT_TYPE};
use http::{Method, Request, StatusCode, Uri};
use http_body_util::{BodyExt, Limited};
use hyper::body::{Frame, Incoming};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use serde::{Deserialize, Serialize};
use sluice_contract::trace::{TRACEPARENT_HEADER, TRACESTATE_HEADER};
use sluice_openai::stream::{self as sse, EventTooLarge, SseParser};
use sluice_redis::RedisConn;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::time::timeout_at;
use tracing::Instrument;

/// One backend (a base URL and how to talk to it).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct BackendTargetConfig {
    /// `scheme://host[:port][/prefix]`; the work item's path is appended.
    pub base_url: String,
    /// Environment variable holding the API key (sent as `Authorization: Bearer`).
    pub api_key_env: Option<String>,
    /// File holding the API key (trailing whitespace trimmed); wins over `api_key_env`.
    pub api_key_file: Option<PathBuf>,
    /// Extra request headers.
    pub headers: Vec<(String, String)>,
    /// Model name to send upstream instead of the client's.
    pub upstream_model: Option<String>,
    /// The request `priority` the consumer's (deferred) calls carry to this
    /// backend, replacing the client's; none: the body's is left as it is
    /// (default). With vLLM's `--scheduling-policy priority` (lower served
    /// first, in-quota requests sent straight to it carry 0) `1` keeps
    /// deferred work from ever holding an in-quota request back in the
    /// server's queue; SGLang with `--enable-priority-scheduling` serves
    /// higher values first unless `--schedule-low-priority-values-first`
    /// (then `-1`). Leave it unset for a server without priority scheduling:
    /// vLLM refuses a priority other than 0 then (400).
    pub server_priority: Option<i64>,
}

impl Default for BackendTargetConfig {
    fn default() -> Self {
        BackendTargetConfig {
            base_url: "http://127.0.0.1:8000".into(),
            api_key_env: None,
            api_key_file: None,
            headers: Vec::new(),
            upstream_model: None,
            server_priority: None,
        }
    }
}

/// Backends and timeouts.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct BackendConfig {
    /// Backend of models without an entry in `models`.
    pub default: BackendTargetConfig,
    /// Backend per model (the client's model name).
    pub models: HashMap<String, BackendTargetConfig>,
    /// TCP (+ TLS) connect.
    pub connect_timeout_ms: u64,
    /// From sending the request to the first SSE event.
    pub first_byte_timeout_ms: u64,
    /// Longest silence between two reads once the stream has started.
    pub idle_timeout_ms: u64,
    /// Paths a work item may call.
    pub allowed_paths: Vec<String>,
    /// Bytes of an error answer read for its message.
    pub error_body_limit: usize,
}

impl Default for BackendConfig {
    fn default() -> Self {
        BackendConfig {
            default: BackendTargetConfig::default(),
            models: HashMap::new(),
            connect_timeout_ms: 5_000,
            first_byte_timeout_ms: 60_000,
            idle_timeout_ms: 30_000,
            allowed_paths: vec!["/v1/chat/completions".into(), "/v1/completions".into()],
            error_body_limit: 64 * 1024,
        }
    }
}

/// A configuration that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("backend {0:?}: invalid base_url (want scheme://host[:port][/prefix])")]
    BaseUrl(String),
    #[error("backend {base_url:?}: API key: {detail}")]
    ApiKey { base_url: String, detail: String },
    #[error("backend {base_url:?}: invalid header {name:?}")]
    Header { base_url: String, name: String },
    #[error("TLS: {0}")]
    Tls(String),
    #[error("{0}")]
    Invalid(String),
}

/// A resolved backend.
#[derive(Clone)]
struct Target {
    base: String,
    headers: HeaderMap,
    upstream_model: Option<String>,
    server_priority: Option<i64>,
}

impl std::fmt::Debug for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print the headers: they hold the API key.
        f.debug_struct("Target").field("base", &self.base).finish()
    }
}

impl Target {
    fn resolve(config: &BackendTargetConfig) -> Result<Self, ConfigError> {
        let base = config.base_url.trim_end_matches('/').to_string();
        let uri: Uri = base
            .parse()
            .map_err(|_| ConfigError::BaseUrl(config.base_url.clone()))?;
        if !matches!(uri.scheme_str(), Some("http" | "https")) || uri.authority().is_none() {
            return Err(ConfigError::BaseUrl(config.base_url.clone()));
        }
        let mut headers = HeaderMap::new();
        for (name, value) in &config.headers {
            let header_error = || ConfigError::Header {
                base_url: config.base_url.clone(),
                name: name.clone(),
            };
            let name_parsed = HeaderName::try_from(name.as_str()).map_err(|_| header_error())?;
            let value_parsed = HeaderValue::try_from(value.as_str()).map_err(|_| header_error())?;
            headers.append(name_parsed, value_parsed);
        }
        let key_error = |detail: String| ConfigError::ApiKey {
            base_url: config.base_url.clone(),
            detail,
        };
        let key = if let Some(path) = &config.api_key_file {
            Some(
                std::fs::read_to_string(path)
                    .map_err(|e| key_error(format!("reading {}: {e}", path.display())))?
                    .trim_end()
                    .to_string(),
            )
        } else if let Some(var) = &config.api_key_env {
            Some(std::env::var(var).map_err(|_| key_error(format!("${var} is not set")))?)
        } else {
            None
        };
        if let Some(key) = key.filter(|k| !k.is_empty()) {
            let mut value = HeaderValue::try_from(format!("Bearer {key}"))
                .map_err(|_| key_error("not a valid header value".into()))?;
            value.set_sensitive(true);
            headers.insert(AUTHORIZATION, value);
        }
        Ok(Target {
            base,
            headers,
            upstream_model: config.upstream_model.clone(),
            server_priority: config.server_priority,
        })
    }
}

/// Why a call failed (metric label and outcome detail).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FailureKind {
    /// The backend answered an HTTP error status (business error).
    BackendStatus,
    /// The backend answered 429 / 503: busy, try later.
    BackendBusy,
    /// Connection refused / reset / DNS / TLS before any answer.
    Unreachable,
    /// Nothing came within the first-byte timeout.
    FirstByteTimeout,
    /// The stream went silent longer than the idle timeout.
    IdleTimeout,
    /// The stream ended or broke without `[DONE]`.
    StreamBroken,
    /// The backend sent an error event in its stream.
    BackendStreamError,
    /// The backend answered 2xx without an event stream.
    NotStreaming,
    /// The work item cannot be sent (body, path).
    InvalidRequest,
    /// A Redis read or write failed.
    Redis,
}

impl FailureKind {
    pub fn as_str(self) -> &'static str {
        match self {
            FailureKind::BackendStatus => "backend_status",
            FailureKind::BackendBusy => "backend_busy",
            FailureKind::Unreachable => "backend_unreachable",
            FailureKind::FirstByteTimeout => "first_byte_timeout",
            FailureKind::IdleTimeout => "idle_timeout",
            FailureKind::StreamBroken => "stream_broken",
            FailureKind::BackendStreamError => "backend_stream_error",
            FailureKind::NotStreaming => "not_streaming",
            FailureKind::InvalidRequest => "invalid_request",
            FailureKind::Redis => "redis",
        }
    }
}

/// How a call ended (before the terminal entry is written).
#[derive(Debug)]
pub(crate) enum CallEnd {
    Completed {
        usage: Option<String>,
        /// Without usage: the output tokens counted from the stream (`None`
        /// when they could not be: no tokenizer for the model, too long).
        output_tokens: Option<u64>,
    },
    /// Write this `error` entry; no retry.
    Failed {
        status: u16,
        code: ErrorCode,
        message: String,
        kind: FailureKind,
    },
    Cancelled,
    /// Nothing terminal written; run again later.
    RetryLater {
        kind: FailureKind,
        retry_after: Option<Duration>,
        detail: String,
    },
    /// Another attempt took the request over.
    LostOwnership,
}

/// Told of a call's output as it streams: `tokens` more (chunks that
/// carry output, about one token each; the usage at the end is exact).
pub trait OutputObserver: Send + Sync + std::fmt::Debug {
    fn streamed(&self, tokens: u64);
}

/// Counters of one call, shared with the heartbeat.
#[derive(Debug)]
pub(crate) struct CallStats {
    chunks: AtomicU64,
    /// Told of the output as it is read (the fair queue's charge).
    observer: Option<Arc<dyn OutputObserver>>,
    pub started: Instant,
    /// When the first chunk carrying output (text, a tool call, reasoning)
    /// arrived, ms after the call started: the model's time to first token
    /// as its client sees it (queue + prefill). Not the first chunk: an
    /// OpenAI-style server may send the role before any token.
    first_token_ms: std::sync::OnceLock<u64>,
}

impl CallStats {
    pub(crate) fn new(observer: Option<Arc<dyn OutputObserver>>) -> Self {
        CallStats {
            chunks: AtomicU64::new(0),
            observer,
            started: Instant::now(),
            first_token_ms: std::sync::OnceLock::new(),
        }
    }

    pub(crate) fn chunks(&self) -> u64 {
        self.chunks.load(Ordering::Relaxed)
    }

    pub(crate) fn first_token_ms(&self) -> Option<u64> {
        self.first_token_ms.get().copied()
    }

    /// A chunk carrying output arrived.
    fn saw_output(&self) {
        if self.first_token_ms.get().is_none() {
            let _ = self
                .first_token_ms
                .set(self.started.elapsed().as_millis() as u64);
        }
        if let Some(observer) = &self.observer {
            observer.streamed(1);
        }
    }
}

/// Where chunks go.
pub(crate) struct Sink<'a> {
    pub conn: RedisConn,
    pub config: &'a StreamConfig,
    pub response_key: String,
    pub cancel_key: String,
    /// The claim's time: the first part of this attempt's chunk ids.
    pub claimed_at_ms: u64,
    /// How long a chunk write rides out an unreachable Redis (the model's
    /// stream waits meanwhile) before the call gives up.
    pub outage_grace: Duration,
    pub stats: &'a CallStats,
    pub metrics: &'a Metrics,
    /// In-process mode: the waiting client's channel (chunks skip Redis).
    pub local: Option<tokio::sync::mpsc::Sender<String>>,
}

impl Sink<'_> {
    /// Writes a batch; `Err(end)` when the call must stop. Only one write
    /// of a call runs at a time (the chunks' ids follow `stats.chunks()`).
    async fn write(&self, chunks: Vec<String>, model: &str) -> Result<(), CallEnd> {
        if chunks.is_empty() {
            return Ok(());
        }
        let started = Instant::now();
        let result = match &self.local {
            // A closed channel is a client that went away: cancelled.
            Some(local) => {
                let mut gone = false;
                for chunk in chunks.iter() {
                    if local.send(chunk.clone()).await.is_err() {
                        gone = true;
                        break;
                    }
                }
                Ok(gone)
            }
            None => {
                let target = stream::ChunkTarget {
                    response_key: &self.response_key,
                    cancel_key: &self.cancel_key,
                    claimed_at_ms: self.claimed_at_ms,
                    first_seq: self.stats.chunks() + 1,
                };
                let (conn, config) = (&self.conn, self.config);
                // Idempotent: a batch sent again is not written twice.
                sluice_redis::retry::ride_out(self.outage_grace, || {
                    let mut conn = conn.clone();
                    let (target, chunks) = (&target, &chunks[..]);
                    async move { stream::write_chunks(&mut conn, config, target, chunks).await }
                })
                .await
            }
        };
        self.metrics
            .chunk_write_seconds
            .observe(started.elapsed().as_secs_f64());
        let cancelled = result.map_err(|e| CallEnd::RetryLater {
            kind: FailureKind::Redis,
            retry_after: None,
            detail: format!("writing chunks: {e}"),
        })?;
        let labels = self.metrics.model_label(model);
        let before = self
            .stats
            .chunks
            .fetch_add(chunks.len() as u64, Ordering::Relaxed);
        if before == 0 {
            self.metrics
                .first_chunk_seconds
                .get_or_create(&labels)
                .observe(self.stats.started.elapsed().as_secs_f64());
        }
        self.metrics
            .chunks
            .get_or_create(&labels)
            .inc_by(chunks.len() as u64);
        if cancelled {
            return Err(CallEnd::Cancelled);
        }
        Ok(())
    }
}

type HttpClient = Client<HttpsConnector<HttpConnector>, SentBody>;

/// The backend client.
#[derive(Clone)]
pub(crate) struct Invoker {
    client: HttpClient,
    default: Arc<Target>,
    models: Arc<HashMap<String, Target>>,
    config: Arc<BackendConfig>,
}

impl Invoker {
    /// Resolves the targets (reads API keys now) and builds the client.
    pub(crate) fn new(config: BackendConfig) -> Result<Self, ConfigError> {
        if config.first_byte_timeout_ms == 0 || config.idle_timeout_ms == 0 {
            return Err(ConfigError::Invalid(
                "first_byte_timeout_ms and idle_timeout_ms must be > 0".into(),
            ));
        }
        let default = Arc::new(Target::resolve(&config.default)?);
        let models = config
            .models
            .iter()
            .map(|(model, target)| Ok((model.clone(), Target::resolve(target)?)))
            .collect::<Result<HashMap<_, _>, ConfigError>>()?;
        let connect_timeout = (config.connect_timeout_ms > 0)
            .then(|| Duration::from_millis(config.connect_timeout_ms));
        let client = crate::call::http_client::pooled(connect_timeout).map_err(ConfigError::Tls)?;
        Ok(Invoker {
            client,
            default,
            models: Arc::new(models),
            config: Arc::new(config),
        })
    }

    fn target(&self, model: &str) -> &Target {
        self.models.get(model).unwrap_or(&self.default)
    }

    /// The request sent for `item` (also used by tests); `level` (its
    /// tenant's service level, [`crate::fair::FairQueue::service_level`])
    /// is added to the target's `server_priority`.
    fn request(
        &self,
        item: &WorkItem,
        level: u32,
        on_sent: OnSent,
    ) -> Result<Request<SentBody>, String> {
        if !self.config.allowed_paths.iter().any(|p| p == &item.path) {
            return Err(format!("path {:?} is not allowed", item.path));
        }
        let target = self.target(&item.model);
        let body = prepare_body(
            item,
            target.upstream_model.as_deref(),
            target
                .server_priority
                .map(|priority| priority.saturating_add(i64::from(level))),
        )?;
        let uri: Uri = format!("{}{}", target.base, item.path)
            .parse()
            .map_err(|_| format!("path {:?} does not make a valid URL", item.path))?;
        let mut builder = Request::builder()
            .method(Method::POST)
            .uri(uri)
            .header(CONTENT_TYPE, "application/json")
            .header(ACCEPT, "text/event-stream");
        if let Ok(id) = HeaderValue::try_from(item.req_id.as_str()) {
            builder = builder.header("x-request-id", id);
        }
        // The client's trace context goes on: the model's spans join the
        // client's trace, as on the direct path through Envoy (as children
        // of this call's span when Sluice exports traces, else unchanged).
        let onward = sluice_contract::onward_trace(&tracing::Span::current(), item.trace.as_ref());
        if let Some(trace) = &onward {
            if let Ok(value) = HeaderValue::try_from(trace.traceparent.as_str()) {
                builder = builder.header(TRACEPARENT_HEADER, value);
            }
            if let Some(Ok(value)) = trace.tracestate.as_deref().map(HeaderValue::try_from) {
                builder = builder.header(TRACESTATE_HEADER, value);
            }
        }
        let mut request = builder
            .body(SentBody::new(Bytes::from(body), on_sent))
            .map_err(|e| e.to_string())?;
        for (name, value) in &target.headers {
            request.headers_mut().insert(name, value.clone());
        }
        Ok(request)
    }

    /// Streams the call, writing each chunk; returns how it ended. Dropping
    /// the future aborts the backend call (the connection is closed).
    pub(crate) async fn stream_call(
        &self,
        item: &WorkItem,
        level: u32,
        on_sent: OnSent,
        sink: &mut Sink<'_>,
    ) -> CallEnd {
        let opened = self
            .open(item, level, on_sent)
            .instrument(sluice_contract::trace_span!("consumer.model_call"))
            .await;
        match opened {
            Ok((body, first_byte_deadline)) => {
                self.read_stream(body, first_byte_deadline, item, sink)
                    .instrument(sluice_contract::trace_span!("consumer.stream_write"))
                    .await
            }
            Err(end) => end,
        }
    }

    /// Sends the request: the body of an event stream and the first-byte
    /// deadline, or how the call ended.
    async fn open(
        &self,
        item: &WorkItem,
        level: u32,
        on_sent: OnSent,
    ) -> Result<(Incoming, tokio::time::Instant), CallEnd> {
        let request = self
            .request(item, level, on_sent)
            .map_err(|message| CallEnd::Failed {
                status: 400,
                code: ErrorCode::InvalidRequest,
                message,
                kind: FailureKind::InvalidRequest,
            })?;
        let first_byte_deadline =
            tokio::time::Instant::now() + Duration::from_millis(self.config.first_byte_timeout_ms);
        let response = match timeout_at(first_byte_deadline, self.client.request(request)).await {
            Err(_) => {
                return Err(retry(
                    FailureKind::FirstByteTimeout,
                    "no answer within the first-byte timeout",
                ))
            }
            Ok(Err(error)) => {
                return Err(retry(
                    FailureKind::Unreachable,
                    &format!("backend request failed: {}", error_chain(&error)),
                ))
            }
            Ok(Ok(response)) => response,
        };
        if !response.status().is_success() {
            return Err(self.error_answer(response).await);
        }
        expect_event_stream(response.headers())?;
        Ok((response.into_body(), first_byte_deadline))
    }

    /// Reads the event stream to its end, writing chunks as they come.
    async fn read_stream(
        &self,
        mut body: Incoming,
        first_byte_deadline: tokio::time::Instant,
        item: &WorkItem,
        sink: &mut Sink<'_>,
    ) -> CallEnd {
        let idle = Duration::from_millis(self.config.idle_timeout_ms);
        let mut reading = Reading {
            output: OutputCounter::for_model(&item.model),
            ..Reading::default()
        };
        let model = item.model.as_str();
        // The write in flight, if any; the next one takes every chunk read
        // meanwhile (`reading.pending`), so a backend that streams faster
        // than Redis takes writes gets fewer, larger writes.
        let mut writing = None;
        let mut stopped: Option<Stop> = None;
        loop {
            if writing.is_none() && !reading.pending.is_empty() {
                let batch = reading.take_pending();
                writing = Some(Box::pin(sink.write(batch, model)));
            }
            let Some(write) = writing.as_mut() else {
                if let Some(stop) = stopped {
                    return reading.finish(stop, sink.stats, model, &mut body).await;
                }
                // Nothing in flight: wait for the backend alone.
                let deadline = reading.deadline(sink.stats, first_byte_deadline, idle);
                let frame = timeout_at(deadline, body.frame()).await;
                stopped = reading.take_frame(frame, sink.stats, model);
                continue;
            };
            let deadline = reading.deadline(sink.stats, first_byte_deadline, idle);
            let room = reading.has_room();
            tokio::select! {
                biased;
                written = write => {
                    writing = None;
                    if let Err(end) = written {
                        return end;
                    }
                }
                frame = timeout_at(deadline, body.frame()), if stopped.is_none() && room => {
                    stopped = reading.take_frame(frame, sink.stats, model);
                }
            }
        }
    }

    async fn error_answer(&self, response: http::Response<hyper::body::Incoming>) -> CallEnd {
        let status = response.status();
        let retry_after = response
            .headers()
            .get(http::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map(Duration::from_secs);
        let limited = Limited::new(response.into_body(), self.config.error_body_limit);
        let body = tokio::time::timeout(
            Duration::from_millis(self.config.idle_timeout_ms),
            limited.collect(),
        )
        .await
        .ok()
        .and_then(|r| r.ok())
        .map(|c| c.to_bytes())
        .unwrap_or_default();
        let message = serde_json::from_slice::<serde_json::Value>(&body)
            .ok()
            .and_then(|v| v.get("error").and_then(error_message_of))
            .unwrap_or_else(|| format!("the backend answered {status}"));
        if status == StatusCode::TOO_MANY_REQUESTS || status == StatusCode::SERVICE_UNAVAILABLE {
            return CallEnd::RetryLater {
                kind: FailureKind::BackendBusy,
                retry_after,
                detail: format!("backend busy ({status}): {message}"),
            };
        }
        CallEnd::Failed {
            status: client_status(status),
            code: ErrorCode::BackendError,
            message,
            kind: FailureKind::BackendStatus,
        }
    }
}

/// What a call has read so far.
#[derive(Default)]
struct Reading {
    parser: SseParser,
    /// Chunks read, not yet written.
    pending: Vec<String>,
    /// The last usage the backend reported.
    usage: Option<String>,
    /// Bytes of `pending`.
    pending_bytes: usize,
    /// Any event came.
    read_any: bool,
    /// A choice carried a `finish_reason`.
    finished: bool,
    /// The output, counted when the answer carries no usage.
    output: OutputCounter,
}

impl Reading {
    /// Bytes of the stream: their complete events.
    fn read(&mut self, bytes: &[u8]) -> Result<Vec<String>, EventTooLarge> {
        self.output.feed(bytes);
        self.parser.push(bytes)
    }

    /// The call completed: its usage, else its output counted.
    fn completed(&mut self, model: &str) -> CallEnd {
        let usage = self.usage.take();
        let output_tokens = match usage {
            Some(_) => None,
            None => self.output.output_tokens(model),
        };
        CallEnd::Completed {
            usage,
            output_tokens,
        }
    }

    /// The chunks read and not written yet.
    fn take_pending(&mut self) -> Vec<String> {
        self.pending_bytes = 0;
        std::mem::take(&mut self.pending)
    }

    /// The backend's deadline for its next frame: the first-byte deadline
    /// until any event came, then the idle timeout.
    fn deadline(
        &self,
        stats: &CallStats,
        first_byte_deadline: tokio::time::Instant,
        idle: Duration,
    ) -> tokio::time::Instant {
        if stats.chunks() == 0 && !self.read_any {
            first_byte_deadline
        } else {
            tokio::time::Instant::now() + idle
        }
    }

    /// Whether more events may be read before the write in flight ends
    /// (one write carries at most [`MAX_EVENTS_PER_WRITE`] events, or about
    /// [`MAX_BYTES_PER_WRITE`]; past that the backend waits, as it would
    /// for one write per frame).
    fn has_room(&self) -> bool {
        self.pending.len() < MAX_EVENTS_PER_WRITE && self.pending_bytes < MAX_BYTES_PER_WRITE
    }

    /// Takes one frame's events (or how the body stopped): `Some` when
    /// reading is over.
    fn take_frame(
        &mut self,
        frame: Result<Option<Result<Frame<Bytes>, hyper::Error>>, tokio::time::error::Elapsed>,
        stats: &CallStats,
        model: &str,
    ) -> Option<Stop> {
        let frame = match frame {
            Err(_) => return Some(Stop::Silent),
            Ok(None) => {
                // An event without its blank line still counts.
                let last = self.parser.finish().into_iter().collect();
                return Some(
                    self.queue(last, stats, model)
                        .map_or(Stop::Ended, Stop::End),
                );
            }
            Ok(Some(Err(error))) => return Some(Stop::Broke(error_chain(&error))),
            Ok(Some(Ok(frame))) => frame,
        };
        let Ok(data) = frame.into_data() else {
            return None; // trailers
        };
        match self.read(&data) {
            Ok(payloads) => self.queue(payloads, stats, model).map(Stop::End),
            Err(error) => Some(Stop::TooLarge(error.to_string())),
        }
    }

    /// Queues the chunks of `payloads` for writing; `Some(end)` at `[DONE]`
    /// or an error event (what follows it is not read).
    fn queue(&mut self, payloads: Vec<String>, stats: &CallStats, model: &str) -> Option<CallEnd> {
        for payload in payloads {
            self.read_any = true;
            if sse::is_done(&payload) {
                return Some(self.completed(model));
            }
            let probe = serde_json::from_str::<ChunkProbe>(&payload).ok();
            if let Some(probe) = probe {
                if let Some(error) = probe.error.filter(|e| !e.is_null()) {
                    return Some(CallEnd::Failed {
                        status: 502,
                        code: ErrorCode::BackendError,
                        message: error_message_of(&error)
                            .unwrap_or_else(|| "the backend sent an error event".into()),
                        kind: FailureKind::BackendStreamError,
                    });
                }
                if let Some(u) = probe.usage.filter(|u| !u.is_null()) {
                    self.usage = Some(u.to_string());
                }
                if probe
                    .choices
                    .iter()
                    .any(|c| c.finish_reason.as_ref().is_some_and(|r| !r.is_null()))
                {
                    self.finished = true;
                }
                if probe.choices.iter().any(ChoiceProbe::carries_output) {
                    stats.saw_output();
                }
            }
            self.pending_bytes += payload.len();
            self.pending.push(payload);
        }
        None
    }

    /// Reading stopped and every chunk read is written: how the call ended
    /// (a broken stream counts the chunks written, so it is judged after
    /// them).
    async fn finish(
        &mut self,
        stop: Stop,
        stats: &CallStats,
        model: &str,
        body: &mut Incoming,
    ) -> CallEnd {
        let broke =
            |kind, message: &str| broken(stats, kind, 502, ErrorCode::BackendStreamBroken, message);
        match stop {
            Stop::End(end) => {
                if matches!(end, CallEnd::Completed { .. }) {
                    drain(body).await;
                }
                end
            }
            Stop::Silent => broken(
                stats,
                FailureKind::IdleTimeout,
                504,
                ErrorCode::BackendTimeout,
                "the backend went silent",
            ),
            // A backend that closes after its last chunk without `[DONE]`
            // still answered completely.
            Stop::Ended if self.finished => self.completed(model),
            Stop::Ended => broke(
                FailureKind::StreamBroken,
                "the backend's stream ended without [DONE]",
            ),
            Stop::Broke(error) => broke(
                FailureKind::StreamBroken,
                &format!("the backend's stream broke: {error}"),
            ),
            Stop::TooLarge(message) => CallEnd::Failed {
                status: 502,
                code: ErrorCode::BackendError,
                message,
                kind: FailureKind::StreamBroken,
            },
        }
    }
}

/// Why reading a stream stopped.
enum Stop {
    /// `[DONE]` or an error event.
    End(CallEnd),
    /// No frame within the first-byte or idle timeout.
    Silent,
    /// The body ended.
    Ended,
    /// The body failed.
    Broke(String),
    /// An event over the parser's limit.
    TooLarge(String),
}

/// Most events one chunk write carries, and about the most bytes (a
/// frame's events are never split): one script call stays small.
const MAX_EVENTS_PER_WRITE: usize = 64;
const MAX_BYTES_PER_WRITE: usize = 256 * 1024;

/// Reads the (normally empty) rest of a completed body briefly so the
/// connection can go back to the pool.
async fn drain(body: &mut Incoming) {
    let _ = tokio::time::timeout(Duration::from_millis(50), async {
        while let Some(Ok(_)) = body.frame().await {}
    })
    .await;
}

/// A success that is not an event stream is a backend error.
fn expect_event_stream(headers: &HeaderMap) -> Result<(), CallEnd> {
    let content_type = headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_ascii_lowercase();
    if content_type.starts_with("text/event-stream") {
        return Ok(());
    }
    Err(CallEnd::Failed {
        status: 502,
        code: ErrorCode::BackendError,
        message: format!("the backend answered {content_type:?}, not an event stream"),
        kind: FailureKind::NotStreaming,
    })
}

/// What the consumer reads of a stream chunk (serde takes a missing
/// `Option` field as `None`).
#[derive(Deserialize)]
struct ChunkProbe {
    usage: Option<serde_json::Value>,
    error: Option<serde_json::Value>,
    #[serde(default)]
    choices: Vec<ChoiceProbe>,
}

#[derive(Deserialize)]
struct ChoiceProbe {
    finish_reason: Option<serde_json::Value>,
    /// Chat.
    delta: Option<DeltaProbe>,
    /// Completions.
    text: Option<serde_json::Value>,
}

#[derive(Deserialize)]
struct DeltaProbe {
    content: Option<serde_json::Value>,
    tool_calls: Option<serde_json::Value>,
    /// vLLM's and SGLang's reasoning models.
    reasoning_content: Option<serde_json::Value>,
}

impl ChoiceProbe {
    /// Whether the chunk carries generated output (not just the role).
    fn carries_output(&self) -> bool {
        let some = |v: &Option<serde_json::Value>| match v {
            Some(serde_json::Value::String(s)) => !s.is_empty(),
            Some(serde_json::Value::Array(a)) => !a.is_empty(),
            _ => false,
        };
        some(&self.text)
            || self.delta.as_ref().is_some_and(|d| {
                some(&d.content) || some(&d.tool_calls) || some(&d.reasoning_content)
            })
    }
}

fn retry(kind: FailureKind, detail: &str) -> CallEnd {
    CallEnd::RetryLater {
        kind,
        retry_after: None,
        detail: detail.to_string(),
    }
}

/// A failure of the stream: retry if nothing was written yet, else a final error.
fn broken(
    stats: &CallStats,
    kind: FailureKind,
    status: u16,
    code: ErrorCode,
    message: &str,
) -> CallEnd {
    if stats.chunks() == 0 {
        retry(kind, message)
    } else {
        CallEnd::Failed {
            status,
            code,
            message: format!("{message} after {} chunks", stats.chunks()),
            kind,
        }
    }
}

/// The status shown to the client for a backend error status: the client's
/// own mistakes (bad request, unknown model, too large, unprocessable) pass
/// through; everything else is the gateway's problem (502).
pub(crate) fn client_status(backend: StatusCode) -> u16 {
    match backend.as_u16() {
        400 | 404 | 413 | 422 => backend.as_u16(),
        _ => 502,
    }
}

/// `error.message` of an OpenAI error object (or the error if it is a string).
fn error_message_of(error: &serde_json::Value) -> Option<String> {
    let message = match error {
        serde_json::Value::String(s) => s.clone(),
        other => other.get("message")?.as_str()?.to_string(),
    };
    Some(message.chars().take(1000).collect())
}

fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(inner) = source {
        text.push_str(": ");
        text.push_str(&inner.to_string());
        source = inner.source();
    }
    text
}

/// The body sent upstream: the client's object with `stream: true` and
/// `stream_options.include_usage: true` forced (other `stream_options`
/// kept), `model` set to the upstream model when configured, or to the work
/// item's model when the body has none, and `priority` set to
/// `server_priority` when configured.
pub(crate) fn prepare_body(
    item: &WorkItem,
    upstream_model: Option<&str>,
    server_priority: Option<i64>,
) -> Result<Vec<u8>, String> {
    let serde_json::Value::Object(mut body) = item.body.clone() else {
        return Err("the request body is not a JSON object".into());
    };
    body.insert("stream".into(), serde_json::Value::Bool(true));
    let options = body
        .entry("stream_options")
        .or_insert_with(|| serde_json::Value::Object(Default::default()));
    if !options.is_object() {
        *options = serde_json::Value::Object(Default::default());
    }
    if let Some(options) = options.as_object_mut() {
        options.insert("include_usage".into(), serde_json::Value::Bool(true));
    }
    if let Some(model) = upstream_model {
        body.insert("model".into(), model.into());
    } else if !body.contains_key("model") {
        body.insert("model".into(), item.model.clone().into());
    }
    if let Some(priority) = server_priority {
        body.insert("priority".into(), priority.into());
    }
    serde_json::to_vec(&body).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn item(body: serde_json::Value) -> WorkItem {
        crate::call::test_item(body, 0)
    }

    #[test]
    fn a_chunk_carries_output_with_text_a_tool_call_or_reasoning_not_the_role_alone() {
        let carries = |chunk: serde_json::Value| {
            serde_json::from_value::<ChunkProbe>(chunk)
                .unwrap()
                .choices
                .iter()
                .any(ChoiceProbe::carries_output)
        };
        let role = json!({"choices": [{"delta": {"role": "assistant", "content": ""}}]});
        assert!(!carries(role));
        assert!(!carries(
            json!({"choices": [], "usage": {"completion_tokens": 1}})
        ));
        assert!(carries(json!({"choices": [{"delta": {"content": "Hi"}}]})));
        assert!(carries(
            json!({"choices": [{"delta": {"tool_calls": [{"index": 0}]}}]})
        ));
        assert!(carries(
            json!({"choices": [{"delta": {"reasoning_content": "so"}}]})
        ));
        assert!(carries(json!({"choices": [{"text": "Hi"}]})));
        assert!(!carries(json!({"choices": [{"text": ""}]})));
    }

    #[test]
    fn body_forces_stream_with_usage() {
        let body = prepare_body(
            &item(
                json!({"messages": [], "stream": false, "stream_options": {"x": 1}, "priority": 7}),
            ),
            None,
            None,
        )
        .unwrap();
        let body: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(body["stream"], json!(true));
        assert_eq!(
            body["stream_options"],
            json!({"x": 1, "include_usage": true})
        );
        assert_eq!(body["model"], json!("m"));
        assert_eq!(body["priority"], json!(7), "not configured: the body's");
        let body = prepare_body(
            &item(json!({"model": "a", "stream_options": 3, "priority": -5})),
            Some("up"),
            Some(1),
        )
        .unwrap();
        let body: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(body["model"], json!("up"));
        assert_eq!(body["stream_options"], json!({"include_usage": true}));
        assert_eq!(body["priority"], json!(1), "the configured one wins");
        assert!(prepare_body(&item(json!([1])), None, None).is_err());
    }

    #[test]
    fn status_mapping() {
        assert_eq!(client_status(StatusCode::BAD_REQUEST), 400);
        assert_eq!(client_status(StatusCode::NOT_FOUND), 404);
        assert_eq!(client_status(StatusCode::UNAUTHORIZED), 502);
        assert_eq!(client_status(StatusCode::INTERNAL_SERVER_ERROR), 502);
    }

    #[test]
    fn error_messages() {
        assert_eq!(
            error_message_of(&json!({"message": "bad", "type": "x"})).as_deref(),
            Some("bad")
        );
        assert_eq!(error_message_of(&json!("plain")).as_deref(), Some("plain"));
        assert_eq!(error_message_of(&json!({"code": 1})), None);
    }

    #[test]
    fn targets_and_requests() {
        let mut config = BackendConfig::default();
        config.default.base_url = "http://backend:8000/".into();
        config.default.headers = vec![("x-extra".into(), "1".into())];
        config.models.insert(
            "special".into(),
            BackendTargetConfig {
                base_url: "https://api.example.com/proxy".into(),
                upstream_model: Some("real".into()),
                ..BackendTargetConfig::default()
            },
        );
        let invoker = Invoker::new(config.clone()).unwrap();
        let request = invoker
            .request(&item(json!({"messages": []})), 0, OnSent::default())
            .unwrap();
        assert_eq!(request.uri(), "http://backend:8000/v1/chat/completions");
        assert_eq!(request.headers()["x-extra"], "1");
        assert_eq!(request.headers()["x-request-id"], "r");
        assert!(request.headers().get(AUTHORIZATION).is_none());
        assert!(request.headers().get(TRACEPARENT_HEADER).is_none());
        // The client's trace context goes to the model as it came.
        let mut traced = item(json!({"messages": []}));
        let parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        traced.trace = sluice_contract::TraceContext::from_headers(Some(parent), Some("a=1,b=2"));
        let request = invoker.request(&traced, 0, OnSent::default()).unwrap();
        assert_eq!(request.headers()[TRACEPARENT_HEADER], parent);
        assert_eq!(request.headers()[TRACESTATE_HEADER], "a=1,b=2");
        let mut special = item(json!({"messages": []}));
        special.model = "special".into();
        let request = invoker.request(&special, 0, OnSent::default()).unwrap();
        assert_eq!(
            request.uri(),
            "https://api.example.com/proxy/v1/chat/completions"
        );
        let mut bad_path = item(json!({}));
        bad_path.path = "/admin".into();
        assert!(invoker.request(&bad_path, 0, OnSent::default()).is_err());

        let mut bad = config.clone();
        bad.default.base_url = "backend:8000".into();
        assert!(Invoker::new(bad).is_err());
        let mut missing_key = config;
        missing_key.default.api_key_env = Some("SLUICE_CONSUMER_TEST_SURELY_UNSET".into());
        assert!(Invoker::new(missing_key).is_err());
    }

    /// The body `invoker` sends for `item` at `level`.
    async fn body_at(invoker: &Invoker, level: u32) -> serde_json::Value {
        let request = invoker
            .request(&item(json!({"messages": []})), level, OnSent::default())
            .unwrap();
        let bytes = request.into_body().collect().await.unwrap().to_bytes();
        serde_json::from_slice(&bytes).unwrap()
    }

    #[tokio::test]
    async fn a_service_level_is_added_to_the_server_priority() {
        let mut config = BackendConfig::default();
        let plain = Invoker::new(config.clone()).unwrap();
        config.default.server_priority = Some(1);
        let invoker = Invoker::new(config).unwrap();
        assert_eq!(body_at(&invoker, 0).await["priority"], json!(1));
        assert_eq!(body_at(&invoker, 3).await["priority"], json!(4));
        // No server_priority: no priority is sent, whatever the level.
        assert!(body_at(&plain, 3).await.get("priority").is_none());
    }

    #[test]
    fn api_key_from_file_is_sensitive() {
        let dir = std::env::temp_dir().join(format!("sluice-consumer-key-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("key");
        std::fs::write(&path, "sk-test\n").unwrap();
        let mut config = BackendConfig::default();
        config.default.api_key_file = Some(path);
        let invoker = Invoker::new(config).unwrap();
        let request = invoker
            .request(&item(json!({})), 0, OnSent::default())
            .unwrap();
        let auth = &request.headers()[AUTHORIZATION];
        assert_eq!(auth, "Bearer sk-test");
        assert!(auth.is_sensitive());
        assert!(!format!("{:?}", invoker.default).contains("sk-test"));
        let _ = std::fs::remove_dir_all(dir);
    }
}
