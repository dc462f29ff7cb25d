//! Long runs and fault runs through the real stack, shared by the soak
//! (`bench/src/bin/soak.rs`) and the chaos run (`bench/src/bin/chaos.rs`):
//!
//! * [`ProcessStack`] (in [`crate::process`], which the demo shares): every part a separate process on loopback ports —
//!   Redis, the broker (and its name server), `sluice-llm-sim`, `sluice-rls`
//!   with its deferral endpoint, `sluice-consumer`s, Envoy with the filter —
//!   so that resident memory is per process and `kill -9` is real;
//! * [`LoadClient`]: one request through Envoy with a deadline, classified
//!   into an [`Outcome`]; [`run_open_loop`] sends them at a fixed rate,
//!   [`calibrate`] finds the highest rate the stack sustains;
//! * [`MemorySampler`], [`MemoryStats`] and [`rss_chart`]: resident
//!   memory per process over time, RSS and `RssAnon` (heap) apart.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // harness fails loudly

use crate::chart::{Chart, Panel, Series};
pub use crate::process::{metric_sum, ProcessStack, ProcessStackOptions, Service};
use crate::sse_resume::SseProgress;
use crate::Resident;
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use sluice_admission::deferral::{resume_path, RESUME_TOKEN_HEADER};
use std::collections::BTreeMap;
use std::net::SocketAddr;

use std::sync::Arc;
use std::time::{Duration, Instant};

/// The model every load request names.
pub const MODEL: &str = "gpt-4o";
/// Tenant whose limits are never reached: requests go to the model.
pub const TENANT_ADMITTED: &str = "load-admitted";
/// Tenant over its token limit at once, with `over_limit: reject`: 429.
pub const TENANT_REJECTED: &str = "load-rejected";
/// Tenants over their token limit at once, with `over_limit: defer`.
pub const TENANTS_DEFERRED: [&str; 2] = ["load-deferred-a", "load-deferred-b"];

/// The limits file of the load runs: [`TENANT_ADMITTED`] unlimited,
/// [`TENANT_REJECTED`] rejected, every [`TENANTS_DEFERRED`] deferred.
pub fn limits_yaml() -> String {
    use crate::stack::limits::{file, tenant, OverLimit};
    let mut tenants = vec![
        tenant(
            Some(TENANT_ADMITTED),
            4_000_000_000,
            4_000_000_000,
            OverLimit::Count,
        ),
        tenant(Some(TENANT_REJECTED), 4_000_000_000, 1, OverLimit::Reject),
    ];
    for name in TENANTS_DEFERRED {
        tenants.push(tenant(
            Some(name),
            4_000_000_000,
            1,
            OverLimit::Defer("normal"),
        ));
    }
    file(&tenants)
}

// ---------------------------------------------------------------------------
// Requests

/// What a request is meant to meet at the filter.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Class {
    Admitted,
    Rejected,
    Deferred,
}

impl Class {
    pub fn name(self) -> &'static str {
        match self {
            Class::Admitted => "admitted",
            Class::Rejected => "rejected",
            Class::Deferred => "deferred",
        }
    }
}

/// One request to send.
#[derive(Clone, Copy, Debug)]
pub struct RequestSpec {
    pub class: Class,
    pub stream: bool,
    /// Which deferred tenant (of [`TENANTS_DEFERRED`]) for deferred ones.
    pub lane: usize,
}

impl RequestSpec {
    fn tenant(&self) -> &'static str {
        match self.class {
            Class::Admitted => TENANT_ADMITTED,
            Class::Rejected => TENANT_REJECTED,
            Class::Deferred => TENANTS_DEFERRED[self.lane % TENANTS_DEFERRED.len()],
        }
    }
}

/// How a request ended, as its client saw it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Outcome {
    /// A whole answer: JSON with `choices`, or a stream ending in `[DONE]`.
    Full,
    /// A stream that broke (or ended without `[DONE]`) and was resumed with
    /// its resume token and `Last-Event-ID` (`resumes` reconnects) to its
    /// `[DONE]`, every event id after the one before it.
    Resumed { resumes: u32 },
    /// Resumed to its end, but an event id repeated or went back: a chunk
    /// came twice.
    ResumedDisordered,
    /// 429 with an error body.
    TooMany,
    /// Any other status with a JSON error body: (status, its `error.type`).
    JsonError(u16, String),
    /// Any other status without a JSON error body (e.g. Envoy's plain 503).
    PlainError(u16),
    /// A stream that ended with an `event: error`: its `error.type`/`code`.
    SseError(String),
    /// A 200 stream that ended without `[DONE]` or an error event.
    StreamCut,
    /// The connection failed before any answer (refused, reset).
    Connect(String),
    /// The connection broke after the headers.
    BodyBroken,
    /// No answer within the deadline; `started`: headers had come.
    Timeout { started: bool },
    /// Not sent: too many requests in flight already.
    Skipped,
}

impl Outcome {
    /// A whole answer (at once or resumed), or a 429 for a request meant
    /// to be rejected.
    pub fn is_success_for(&self, class: Class) -> bool {
        match class {
            Class::Rejected => *self == Outcome::TooMany,
            _ => self.is_whole(),
        }
    }

    /// A whole answer, at once or resumed after a break.
    pub fn is_whole(&self) -> bool {
        matches!(self, Outcome::Full | Outcome::Resumed { .. })
    }

    /// A short label for tables.
    pub fn label(&self) -> String {
        match self {
            Outcome::Full => "answered fully".into(),
            Outcome::Resumed { .. } => "resumed to a whole answer".into(),
            Outcome::ResumedDisordered => "resumed, but an event id repeated".into(),
            Outcome::TooMany => "429".into(),
            Outcome::JsonError(status, kind) => format!("{status} JSON error {kind}"),
            Outcome::PlainError(status) => format!("{status} without JSON body"),
            Outcome::SseError(kind) => format!("SSE error event {kind}"),
            Outcome::StreamCut => "stream ended without [DONE]/error".into(),
            Outcome::Connect(kind) => format!("connection failed ({kind})"),
            Outcome::BodyBroken => "connection broke mid-answer".into(),
            Outcome::Timeout { started: false } => "never answered (timeout)".into(),
            Outcome::Timeout { started: true } => "started, then no end (timeout)".into(),
            Outcome::Skipped => "not sent (client at its in-flight cap)".into(),
        }
    }
}

/// One request's record.
#[derive(Clone, Debug)]
pub struct Record {
    /// Its number in the run (also its `x-request-id`, `load-<n>`).
    pub number: u64,
    pub spec: RequestSpec,
    /// Since the run began.
    pub sent_at: Duration,
    pub latency: Duration,
    pub outcome: Outcome,
    /// `x-sluice-request-id` of the answer (deferred requests).
    pub sluice_request_id: Option<String>,
    /// A 200 SSE answer's text: its chunks' `delta.content`s joined.
    pub content: Option<String>,
    /// Why the last try to resume a broken stream failed, if the last one did.
    pub resume_error: Option<String>,
}

impl Record {
    pub fn finished_at(&self) -> Duration {
        self.sent_at + self.latency
    }

    /// The `x-request-id` it was sent with.
    pub fn client_request_id(&self) -> String {
        client_request_id(self.number)
    }
}

fn client_request_id(number: u64) -> String {
    format!("load-{number}")
}

/// Sends chat requests to Envoy over pooled keep-alive connections.
#[derive(Clone)]
pub struct LoadClient {
    client: Client<HttpConnector, Full<Bytes>>,
    target: SocketAddr,
    /// Prompt repeated in every request (its size sets the filter's work).
    prompt: Arc<str>,
    /// Tries to resume one broken stream at most.
    resume_tries: u32,
}

#[derive(Default)]
struct Progress {
    started: bool,
    status: u16,
    sluice_request_id: Option<String>,
    content: Option<String>,
    resume_error: Option<String>,
}

/// Tries to resume one broken stream at most, by default (a well-behaved
/// SSE client gives up after a few), waiting [`RESUME_FIRST_WAIT`], doubling up to
/// [`RESUME_MAX_WAIT`], before each: about 10 s in all, longer than a
/// restarted process or proxy takes to come back. The request's deadline
/// bounds them too.
pub const RESUME_TRIES: u32 = 8;
const RESUME_FIRST_WAIT: Duration = Duration::from_millis(250);
const RESUME_MAX_WAIT: Duration = Duration::from_secs(2);

/// The wait before resume try `attempt` (0-based).
fn resume_wait(attempt: u32) -> Duration {
    RESUME_FIRST_WAIT
        .saturating_mul(1 << attempt.min(16))
        .min(RESUME_MAX_WAIT)
}

impl LoadClient {
    /// A client of `target` with a prompt of about `prompt_words` words.
    pub fn new(target: SocketAddr, prompt_words: usize) -> LoadClient {
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        connector.set_connect_timeout(Some(Duration::from_secs(2)));
        let client = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(Duration::from_secs(30))
            .build(connector);
        LoadClient {
            client,
            target,
            prompt: "hello ".repeat(prompt_words).into(),
            resume_tries: RESUME_TRIES,
        }
    }

    /// As this client, trying to resume a broken stream `tries` times at
    /// most (default [`RESUME_TRIES`]; 0: never).
    pub fn with_resume_tries(mut self, tries: u32) -> LoadClient {
        self.resume_tries = tries;
        self
    }

    /// Sends request `number` as `spec`, waits up to `deadline` for its end.
    pub async fn send(
        &self,
        number: u64,
        spec: RequestSpec,
        run_start: Instant,
        deadline: Duration,
    ) -> Record {
        let sent = Instant::now();
        let mut progress = Progress::default();
        let answered =
            tokio::time::timeout(deadline, self.exchange(number, spec, &mut progress)).await;
        let outcome = answered.unwrap_or(Outcome::Timeout {
            started: progress.started,
        });
        Record {
            number,
            spec,
            sent_at: sent.duration_since(run_start),
            latency: sent.elapsed(),
            outcome,
            sluice_request_id: progress.sluice_request_id,
            content: progress.content,
            resume_error: progress.resume_error,
        }
    }

    async fn exchange(&self, number: u64, spec: RequestSpec, progress: &mut Progress) -> Outcome {
        let body = serde_json::json!({
            "model": MODEL,
            "max_tokens": 16,
            "stream": spec.stream,
            "messages": [{"role": "user", "content": &*self.prompt}]
        })
        .to_string();
        let request = hyper::Request::post(format!("http://{}/v1/chat/completions", self.target))
            .header("content-type", "application/json")
            .header("x-tenant-id", spec.tenant())
            .header("x-request-id", client_request_id(number))
            .body(Full::new(Bytes::from(body)));
        let request = match request {
            Ok(request) => request,
            Err(error) => return Outcome::Connect(format!("bad request: {error}")),
        };
        let response = match self.client.request(request).await {
            Ok(response) => response,
            Err(error) => return Outcome::Connect(connect_error_kind(&error)),
        };
        progress.started = true;
        progress.status = response.status().as_u16();
        progress.sluice_request_id = response
            .headers()
            .get(sluice_admission::admission::REQUEST_ID_HEADER)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let is_sse = response
            .headers()
            .get(hyper::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
        if progress.status == 200 && is_sse {
            let token = response
                .headers()
                .get(RESUME_TOKEN_HEADER)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string);
            let mut stream = SseProgress::default();
            let whole = read_sse(response.into_body(), &mut stream).await;
            let outcome = self
                .resume_until_whole(spec, token.as_deref(), &mut stream, whole, progress)
                .await;
            progress.content = Some(crate::stack::chunk_content(&crate::stack::sse_data(
                stream.text(),
            )));
            return outcome;
        }
        let body = match response.into_body().collect().await {
            Ok(body) => body.to_bytes(),
            Err(_) => return Outcome::BodyBroken,
        };
        classify(progress.status, is_sse, &body)
    }

    /// A stream read so far (`whole`: its connection ended cleanly) as an
    /// outcome; one that broke or ended without `[DONE]` is resumed with
    /// `token` from its last event id, a few times at most.
    async fn resume_until_whole(
        &self,
        spec: RequestSpec,
        token: Option<&str>,
        stream: &mut SseProgress,
        mut whole: bool,
        progress: &mut Progress,
    ) -> Outcome {
        let mut resumes = 0;
        for attempt in 0..=self.resume_tries {
            let outcome = match whole {
                true => classify_stream(stream.text()),
                false => Outcome::BodyBroken,
            };
            let cut = matches!(outcome, Outcome::BodyBroken | Outcome::StreamCut);
            let Some(token) = token.filter(|_| cut && attempt < self.resume_tries) else {
                return resumed_outcome(outcome, resumes, stream);
            };
            stream.broke();
            tokio::time::sleep(resume_wait(attempt)).await;
            match self.reopen(spec, token, stream.last_event_id()).await {
                Ok(body) => {
                    resumes += 1;
                    progress.resume_error = None;
                    whole = read_sse(body, stream).await;
                }
                Err(reason) => {
                    progress.resume_error = Some(reason);
                    whole = false;
                }
            }
        }
        Outcome::BodyBroken
    }

    /// `GET /v1/sluice/streams/<token>` through the same listener as the
    /// request, with `Last-Event-ID`: the body of a 200 SSE answer, else
    /// why not.
    async fn reopen(
        &self,
        spec: RequestSpec,
        token: &str,
        last_event_id: Option<&str>,
    ) -> Result<hyper::body::Incoming, String> {
        let mut request =
            hyper::Request::get(format!("http://{}{}", self.target, resume_path(token)))
                .header("x-tenant-id", spec.tenant());
        if let Some(id) = last_event_id {
            request = request.header("last-event-id", id);
        }
        let request = request
            .body(Full::new(Bytes::new()))
            .map_err(|e| format!("bad request: {e}"))?;
        let response = self
            .client
            .request(request)
            .await
            .map_err(|e| format!("connection failed ({})", connect_error_kind(&e)))?;
        let status = response.status().as_u16();
        if status == 200 {
            return Ok(response.into_body());
        }
        let body = response
            .into_body()
            .collect()
            .await
            .map(|b| b.to_bytes())
            .unwrap_or_default();
        Err(classify(status, false, &body).label())
    }
}

/// Reads an SSE body into `stream` until it ends: true when it ended
/// cleanly, false when the connection broke.
async fn read_sse(mut body: hyper::body::Incoming, stream: &mut SseProgress) -> bool {
    while let Some(frame) = body.frame().await {
        match frame {
            Ok(frame) => {
                if let Some(data) = frame.data_ref() {
                    stream.feed(data);
                }
            }
            Err(_) => return false,
        }
    }
    true
}

/// `outcome` of a stream after `resumes` reconnects: a whole one counts as
/// resumed when it needed any, and only when its event ids kept order.
fn resumed_outcome(outcome: Outcome, resumes: u32, stream: &SseProgress) -> Outcome {
    match outcome {
        Outcome::Full if resumes > 0 && !stream.ids_increase() => Outcome::ResumedDisordered,
        Outcome::Full if resumes > 0 => Outcome::Resumed { resumes },
        other => other,
    }
}

fn connect_error_kind(error: &hyper_util::client::legacy::Error) -> String {
    let text = format!("{error:?}");
    if text.contains("ConnectionRefused") {
        "refused".into()
    } else if text.contains("ConnectionReset") || text.contains("IncompleteMessage") {
        "reset".into()
    } else if error.is_connect() {
        "connect".into()
    } else {
        "closed before the answer".into()
    }
}

/// What the client got, by status and body.
pub fn classify(status: u16, is_sse: bool, body: &[u8]) -> Outcome {
    let text = String::from_utf8_lossy(body);
    if status == 200 && is_sse {
        return classify_stream(&text);
    }
    let json: Option<serde_json::Value> = serde_json::from_slice(body).ok();
    match (status, &json) {
        (200, Some(json)) if json.get("choices").is_some() => Outcome::Full,
        (429, _) => Outcome::TooMany,
        (_, Some(json)) if json.get("error").is_some() => {
            Outcome::JsonError(status, error_kind(&json["error"]))
        }
        _ => Outcome::PlainError(status),
    }
}

fn classify_stream(text: &str) -> Outcome {
    let mut error_next = false;
    for line in text.lines() {
        if line.starts_with("event: error") {
            error_next = true;
        } else if let Some(data) = line.strip_prefix("data: ") {
            if data == "[DONE]" {
                return Outcome::Full;
            }
            let json: Option<serde_json::Value> = serde_json::from_str(data).ok();
            if let Some(error) = json.as_ref().and_then(|j| j.get("error")) {
                return Outcome::SseError(error_kind(error));
            }
            if error_next {
                return Outcome::SseError("unknown".into());
            }
        }
    }
    Outcome::StreamCut
}

fn error_kind(error: &serde_json::Value) -> String {
    let code = error["code"].as_str().unwrap_or("");
    let kind = error["type"].as_str().unwrap_or("");
    match (kind, code) {
        ("", "") => "?".into(),
        (kind, "") => kind.into(),
        ("", code) => code.into(),
        (kind, code) => format!("{kind}/{code}"),
    }
}

/// An open-loop run: a fixed rate, bounded by time and by count.
#[derive(Clone, Copy, Debug)]
pub struct OpenLoop {
    pub rate_per_second: f64,
    pub duration: Duration,
    pub max_requests: u64,
    /// Requests in flight at most; beyond it a request is [`Outcome::Skipped`].
    pub max_in_flight: usize,
    /// Each request's deadline, by class.
    pub deadline: fn(&RequestSpec) -> Duration,
}

/// Sends requests at `plan`'s rate (`mix(n)` says what request `n` is);
/// returns every record once all have ended, in order of sending.
pub async fn run_open_loop(
    client: &LoadClient,
    plan: OpenLoop,
    run_start: Instant,
    mix: impl Fn(u64) -> RequestSpec,
) -> Vec<Record> {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Record>();
    let slots = Arc::new(tokio::sync::Semaphore::new(plan.max_in_flight));
    let begin = tokio::time::Instant::now();
    let period = Duration::from_secs_f64(1.0 / plan.rate_per_second.max(0.001));
    let collector = tokio::spawn(async move {
        let mut records = Vec::new();
        while let Some(record) = rx.recv().await {
            records.push(record);
        }
        records
    });
    let mut number = 0u64;
    while number < plan.max_requests {
        let due = begin + period.mul_f64(number as f64);
        if due.duration_since(begin) >= plan.duration {
            break;
        }
        tokio::time::sleep_until(due).await;
        let spec = mix(number);
        let tx = tx.clone();
        match slots.clone().try_acquire_owned() {
            Ok(permit) => {
                let client = client.clone();
                let deadline = (plan.deadline)(&spec);
                tokio::spawn(async move {
                    let record = client.send(number, spec, run_start, deadline).await;
                    drop(permit);
                    let _ = tx.send(record);
                });
            }
            Err(_) => {
                let _ = tx.send(Record {
                    number,
                    spec,
                    sent_at: run_start.elapsed(),
                    latency: Duration::ZERO,
                    outcome: Outcome::Skipped,
                    sluice_request_id: None,
                    content: None,
                    resume_error: None,
                });
            }
        }
        number += 1;
    }
    drop(tx);
    let mut records = collector.await.unwrap_or_default();
    records.sort_by_key(|r| r.number);
    records
}

/// The highest rate of whole answers with `workers` requests in flight for
/// `duration`, each request `mix(n)` within `deadline`: requests per second.
/// Requests that fail do not count, so a path that sheds load (a refused
/// decision, a timeout) calibrates lower. Numbered from 2^48 on, apart from
/// a run's.
pub async fn calibrate<M>(
    client: &LoadClient,
    workers: usize,
    duration: Duration,
    mix: M,
    deadline: fn(&RequestSpec) -> Duration,
) -> f64
where
    M: Fn(u64) -> RequestSpec + Send + Sync + 'static,
{
    let start = Instant::now();
    let mix = std::sync::Arc::new(mix);
    let mut tasks = Vec::new();
    for worker in 0..workers {
        let client = client.clone();
        let mix = mix.clone();
        tasks.push(tokio::spawn(async move {
            let mut ok = 0u64;
            let mut number = (1u64 << 48) + worker as u64 * 1_000_000_000;
            while start.elapsed() < duration {
                let spec = mix(number);
                let record = client.send(number, spec, start, deadline(&spec)).await;
                ok += u64::from(record.outcome.is_success_for(spec.class));
                number += 1;
            }
            ok
        }));
    }
    let mut ok = 0;
    for task in tasks {
        ok += task.await.unwrap_or(0);
    }
    ok as f64 / start.elapsed().as_secs_f64()
}

/// The `q` quantile of `latencies` (sorted in place), or zero when empty.
pub fn quantile(latencies: &mut [Duration], q: f64) -> Duration {
    if latencies.is_empty() {
        return Duration::ZERO;
    }
    latencies.sort_unstable();
    latencies[((latencies.len() - 1) as f64 * q).round() as usize]
}

/// How many times the model server at `sim` was called with `x-request-id:
/// request_id` (`/sim/calls`); `None` when it could not be asked.
pub async fn model_calls(sim: SocketAddr, request_id: &str) -> Option<u64> {
    crate::stack::sim_calls(sim, request_id).await?["calls"].as_u64()
}

// ---------------------------------------------------------------------------
// Memory

/// Resident memory samples: per process name, (seconds since start, KiB by kind).
pub type MemorySeries = BTreeMap<String, Vec<(f64, Resident)>>;

/// Which resident memory a process is judged by.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Measure {
    /// `VmRSS`: everything resident.
    Rss,
    /// `RssAnon`: heap and anonymous maps, without mapped files.
    Anon,
}

impl Measure {
    pub fn name(self) -> &'static str {
        match self {
            Measure::Rss => "RSS",
            Measure::Anon => "RssAnon",
        }
    }

    pub fn of(self, resident: &Resident) -> u64 {
        match self {
            Measure::Rss => resident.rss,
            Measure::Anon => resident.anon,
        }
    }
}

/// The measure the flat check uses for `process`, and why: the broker
/// memory-maps its commit log, so every message written adds file pages to
/// its RSS (page cache the kernel drops under pressure, not a leak); its
/// heap is `RssAnon`. Every other process maps only its binary, so RSS is
/// its heap plus a constant.
pub fn flat_measure(process: &str) -> (Measure, &'static str) {
    if process == "broker" {
        (
            Measure::Anon,
            "commit log is memory-mapped: file pages are page cache",
        )
    } else {
        (Measure::Rss, "no data file mapped")
    }
}

/// One measure of one process over a run, in KiB.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MemoryStats {
    /// First sample at or after the warm-up.
    pub warm: u64,
    pub end: u64,
    /// Lowest and highest samples after the warm-up.
    pub min: u64,
    pub max: u64,
}

impl MemoryStats {
    /// Of `measure` in `points` from `warmup_s` on; `None` without samples there.
    pub fn of(points: &[(f64, Resident)], measure: Measure, warmup_s: f64) -> Option<MemoryStats> {
        let warm: Vec<u64> = points
            .iter()
            .filter(|(t, _)| *t >= warmup_s)
            .map(|(_, resident)| measure.of(resident))
            .collect();
        Some(MemoryStats {
            warm: *warm.first()?,
            end: *warm.last()?,
            min: *warm.iter().min()?,
            max: *warm.iter().max()?,
        })
    }

    /// End vs warm, in percent.
    pub fn change_pct(&self) -> f64 {
        percent(self.end, self.warm)
    }

    /// The sample farthest from the warm one, in percent of it (signed).
    pub fn widest_swing_pct(&self) -> f64 {
        let (low, high) = (percent(self.min, self.warm), percent(self.max, self.warm));
        if high.abs() >= low.abs() {
            high
        } else {
            low
        }
    }
}

fn percent(value: u64, base: u64) -> f64 {
    (value as f64 - base as f64) / (base.max(1) as f64) * 100.0
}

/// Calls `sample` every `every` on a thread of its own until stopped, with
/// what it has gathered so far and the seconds since `start`.
pub struct Sampler<T> {
    stop: Arc<std::sync::atomic::AtomicBool>,
    thread: std::thread::JoinHandle<T>,
}

impl<T: Default + Send + 'static> Sampler<T> {
    pub fn start(
        every: Duration,
        start: Instant,
        mut sample: impl FnMut(&mut T, f64) + Send + 'static,
    ) -> Sampler<T> {
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let stopped = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut gathered = T::default();
            let mut next = Instant::now();
            while !stopped.load(std::sync::atomic::Ordering::Relaxed) {
                if Instant::now() >= next {
                    sample(&mut gathered, start.elapsed().as_secs_f64());
                    next += every;
                }
                std::thread::sleep(Duration::from_millis(200));
            }
            gathered
        });
        Sampler { stop, thread }
    }

    /// Stops sampling (one last sample is not taken) and returns what was
    /// gathered.
    pub fn stop(self) -> T {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.thread.join().unwrap_or_default()
    }
}

/// Samples the resident memory of a fixed set of processes every `every`
/// on a thread of its own until stopped.
pub struct MemorySampler(Sampler<MemorySeries>);

impl MemorySampler {
    pub fn start(pids: Vec<(String, u32)>, every: Duration, start: Instant) -> MemorySampler {
        MemorySampler(Sampler::start(
            every,
            start,
            move |series: &mut MemorySeries, at| {
                for (name, pid) in &pids {
                    if let Some(resident) = crate::resident_kib(*pid) {
                        series.entry(name.clone()).or_default().push((at, resident));
                    }
                }
            },
        ))
    }

    /// Stops sampling (one last sample is not taken) and returns the series.
    pub fn stop(self) -> MemorySeries {
        self.0.stop()
    }
}

/// Line charts of RSS (top) and RssAnon (bottom) per process over time, in
/// MiB over minutes; a dashed line marks the end of the warm-up.
pub fn rss_chart(series: &MemorySeries, title: &str, warmup_s: f64) -> Chart {
    let panel = |measure: Measure| {
        let mut lines: Vec<Series> = series
            .iter()
            .enumerate()
            .map(|(index, (name, points))| {
                let mib = |resident: &Resident| measure.of(resident) as f64 / 1024.0;
                let points = points.iter().map(|(t, r)| (t / 60.0, mib(r))).collect();
                Series::solid(name.clone(), points, index)
            })
            .collect();
        let top = lines
            .iter()
            .flat_map(|line| line.points.iter().map(|p| p.1))
            .fold(0.0_f64, f64::max);
        if warmup_s > 0.0 {
            let at = warmup_s / 60.0;
            lines.push(Series::dashed("warm-up".into(), vec![(at, 0.0), (at, top)], 7).thin());
        }
        Panel {
            title: measure.name().into(),
            y_label: "MiB".into(),
            series: lines,
        }
    };
    Chart {
        title: title.into(),
        x_label: "minutes".into(),
        width: 760,
        height: 640,
        panels: vec![panel(Measure::Rss), panel(Measure::Anon)],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sampler_gathers_until_stopped() {
        let start = Instant::now();
        let sampler = Sampler::start(Duration::ZERO, start, |seen: &mut Vec<f64>, at| {
            seen.push(at)
        });
        std::thread::sleep(Duration::from_millis(500));
        let seen = sampler.stop();
        assert!(seen.len() >= 2, "{seen:?}");
        assert!(seen.windows(2).all(|w| w[0] <= w[1]), "{seen:?}");
    }

    #[test]
    fn outcomes_by_status_and_body() {
        assert_eq!(classify(200, false, br#"{"choices":[]}"#), Outcome::Full);
        assert_eq!(classify(429, false, b"{}"), Outcome::TooMany);
        assert_eq!(
            classify(503, false, br#"{"error":{"type":"t","code":"c"}}"#),
            Outcome::JsonError(503, "t/c".into())
        );
        assert_eq!(classify(503, false, b"upstream"), Outcome::PlainError(503));
        assert_eq!(
            classify(200, true, b": queued\n\ndata: {}\n\ndata: [DONE]\n\n"),
            Outcome::Full
        );
        assert_eq!(
            classify(
                200,
                true,
                b"data: {}\n\nevent: error\ndata: {\"error\":{\"code\":\"interrupted\"}}\n\n"
            ),
            Outcome::SseError("interrupted".into())
        );
        assert_eq!(classify(200, true, b"data: {}\n\n"), Outcome::StreamCut);
    }

    #[test]
    fn a_stream_counts_as_resumed_only_when_it_needed_it_and_kept_order() {
        let mut ordered = SseProgress::default();
        ordered.feed(b"id: 1-0\ndata: {}\n\nid: 2-0\ndata: {}\n\ndata: [DONE]\n\n");
        assert_eq!(resumed_outcome(Outcome::Full, 0, &ordered), Outcome::Full);
        assert_eq!(
            resumed_outcome(Outcome::Full, 2, &ordered),
            Outcome::Resumed { resumes: 2 }
        );
        let mut repeated = SseProgress::default();
        repeated.feed(b"id: 1-0\ndata: {}\n\nid: 1-0\ndata: {}\n\ndata: [DONE]\n\n");
        assert_eq!(
            resumed_outcome(Outcome::Full, 1, &repeated),
            Outcome::ResumedDisordered
        );
        let cancelled = Outcome::SseError("sluice_deferral/cancelled".into());
        assert_eq!(resumed_outcome(cancelled.clone(), 1, &ordered), cancelled);
        assert!(Outcome::Resumed { resumes: 1 }.is_success_for(Class::Deferred));
        assert!(!Outcome::ResumedDisordered.is_success_for(Class::Deferred));
    }

    #[test]
    fn resume_waits_double_up_to_two_seconds() {
        let waits: Vec<u128> = (0..6).map(|n| resume_wait(n).as_millis()).collect();
        assert_eq!(waits, [250, 500, 1000, 2000, 2000, 2000]);
        assert_eq!(resume_wait(u32::MAX), RESUME_MAX_WAIT);
    }

    #[test]
    fn metric_sum_adds_every_label_set_of_one_name_only() {
        let text = "# HELP x\nsluice_a_total{k=\"1\"} 2\nsluice_a_total{k=\"2\"} 3\nsluice_a_total_more 7\n";
        assert_eq!(metric_sum(text, "sluice_a_total"), 5.0);
    }

    fn resident(rss: u64, anon: u64) -> Resident {
        Resident {
            rss,
            anon,
            file: rss - anon,
        }
    }

    #[test]
    fn the_chart_has_one_line_per_process_and_measure() {
        let mut series = MemorySeries::new();
        series.insert(
            "a".into(),
            vec![(0.0, resident(1024, 512)), (10.0, resident(2048, 512))],
        );
        series.insert(
            "b".into(),
            vec![(0.0, resident(512, 256)), (10.0, resident(512, 256))],
        );
        let chart = rss_chart(&series, "t", 5.0);
        let titles: Vec<&str> = chart.panels.iter().map(|p| p.title.as_str()).collect();
        assert_eq!(titles, ["RSS", "RssAnon"]);
        for panel in &chart.panels {
            let labels: Vec<&str> = panel.series.iter().map(|s| s.label.as_str()).collect();
            assert_eq!(labels, ["a", "b", "warm-up"]);
        }
        // RssAnon of "a" in MiB at minute 1/6.
        assert_eq!(chart.panels[1].series[0].points[1], (10.0 / 60.0, 0.5));
    }

    #[test]
    fn memory_stats_start_after_the_warm_up() {
        let points = vec![
            (0.0, resident(100, 50)),
            (10.0, resident(400, 200)),
            (20.0, resident(360, 180)),
            (30.0, resident(430, 190)),
            (40.0, resident(420, 210)),
        ];
        let rss = MemoryStats::of(&points, Measure::Rss, 10.0).unwrap();
        assert_eq!((rss.warm, rss.end, rss.min, rss.max), (400, 420, 360, 430));
        assert_eq!(rss.change_pct(), 5.0);
        assert_eq!(rss.widest_swing_pct(), -10.0);
        let anon = MemoryStats::of(&points, Measure::Anon, 10.0).unwrap();
        assert_eq!(anon.change_pct(), 5.0);
        assert!(MemoryStats::of(&points, Measure::Rss, 50.0).is_none());
        assert_eq!(flat_measure("broker").0, Measure::Anon);
        assert_eq!(flat_measure("redis").0, Measure::Rss);
    }
}
