//! The deferral endpoint: accepts a request the filter marked as deferred,
//! queues it for its tenant × model bucket, and answers the client from the
//! Redis Stream the consumer writes — as SSE when the client streams, as one
//! JSON answer when it does not.

use super::body::{read_body, BodyError};
use super::budget::{self, BudgetLimits, BytesHold, Ledger, WaitingHold};
use super::caps::PublishError;
use super::hub::{Entry, StreamHub, Subscription};
use super::listener::PreTokenSlot;
use super::quota::{self, ChargeRefused};
use super::sse;
use super::watch::LeaseWatch;
pub use crate::budget::DEFAULT_MAX_IN_FLIGHT;
pub use crate::metrics::EndpointMetrics;
pub use crate::publisher::Publisher;
use axum::body::{Body, Bytes};
use axum::extract::{DefaultBodyLimit, Path, Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get};
use axum::Router;
use serde_json::Value;
use sluice_admission::admission::{
    CLIENT_REQUEST_ID_HEADER, ESTIMATED_TOKENS_HEADER, MODEL_HEADER, PRIORITY_HEADER,
    REQUEST_ID_HEADER, TENANT_HEADER,
};
use sluice_admission::config::{DEFAULT_BODY_TIMEOUT_MS, DEFAULT_MAX_BODY_BYTES};
use sluice_admission::deferral::{
    self, HeaderClaims, Secret, SignedBody, DEFAULT_MARKER_HEADER, DEFERRAL_TOKEN_HEADER,
    QUEUE_POSITION_HEADER, RESUME_TOKEN_HEADER,
};
use sluice_admission::errors::openai_error_body;
use sluice_admission::openai::{self, Endpoint};
use sluice_contract::keys;
use sluice_contract::local::{LocalBus, LocalReceiver};
use sluice_contract::trace::{TRACEPARENT_HEADER, TRACESTATE_HEADER};
use sluice_contract::{now_ms, ClaimTiming, Priority, StreamEvent, TraceContext, WorkItem};
use sluice_redis::RedisConn;
use std::sync::{Arc, LazyLock};
use std::time::Duration;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tracing::Instrument;

#[derive(Clone, Debug)]
pub struct EndpointOptions {
    /// Longest a client waits for its answer, queue time included.
    pub timeout: Duration,
    /// SSE comment interval while nothing else is sent.
    pub keep_alive: Duration,
    /// Deferred requests held open at once by this endpoint; beyond: 503.
    pub max_in_flight: usize,
    /// Larger bodies get Sluice's JSON 413 (the filter's `max_body_bytes`).
    pub max_body_bytes: usize,
    /// A body not complete this long after the headers gets 408.
    pub body_timeout: Duration,
    /// `cancel:{id}` lifetime after a client disconnects.
    pub cancel_ttl: Duration,
    /// How long after a client's connection closed mid-wait the model call
    /// is cancelled, unless the stream was resumed meanwhile: a proxy that
    /// restarts (Envoy) closes every connection as a client that left would,
    /// and its clients resume (`Last-Event-ID`) a second or two later. A
    /// client that really left keeps the GPU busy this much longer.
    pub cancel_grace: Duration,
    /// Send an SSE comment saying the request is queued, first thing.
    pub announce_queued: bool,
    /// Low-priority requests fail fast (429) when their bucket already holds
    /// more queued requests than this.
    pub low_priority_max_backlog: u64,
    /// How long low- and high-priority requests may wait (normal: `timeout`).
    pub low_priority_timeout: Duration,
    pub high_priority_timeout: Duration,
    /// How often a waiting request checks its consumer lease (see
    /// consumer/src/queue/runner.rs): a request popped by a consumer that died
    /// before starting it is published again, once. One `EXISTS` per
    /// waiting request per check, only while its answer is silent; it adds
    /// up to this much to the recovery after a consumer's death
    /// (`claim_timing.stale_after()`).
    pub lease_check: Duration,
    /// A waiting request that no consumer has picked up (no lease seen, no
    /// claim, no answer) this long after its publish is published again,
    /// once (`None`: never). rocketmq-store 1.0.0 can leave a message out
    /// of its LiteTopic's queue when two sends collide on an offset; it is
    /// never popped, and its client waited for `timeout`. The claim keeps
    /// the model call single when the first copy was only queued behind
    /// others; the cost is one more message for each request that waits
    /// longer than this in its bucket's backlog.
    pub unclaimed_republish_after: Option<Duration>,
    /// The consumers' heartbeat settings: a `processing` claim older than
    /// `claim_timing.stale_after_ms()` belongs to a dead consumer.
    pub claim_timing: ClaimTiming,
    /// Secrets shared with the filter / ext_authz (`--deferral-secret-file`):
    /// a request is served only with a deferral token signed by one of them.
    /// Empty: every request is refused (403).
    pub secrets: Vec<Secret>,
    /// Longest accepted age (and clock skew) of a deferral token.
    pub token_max_age: Duration,
    /// How long a request id stays bound to its tenant (`owner:{id}`): at
    /// least as long as its answer can be resumed.
    pub owner_ttl: Duration,
    /// The marker header the filter sets on deferred requests (its
    /// `deferral.marker_header`); lowercase.
    pub marker_header: String,
    /// Body bytes and waiting places held by waiting requests (global and
    /// per tenant), see [`super::budget`].
    pub budget: BudgetLimits,
    /// Body bytes one tenant may publish to the broker per clock minute;
    /// beyond: 429 `tenant_broker_bytes`.
    pub max_tenant_bytes_per_minute: u64,
}

/// Default [`EndpointOptions::lease_check`]: a dead consumer's requests are
/// acted on at most this long after their lease or claim goes stale (3 s by
/// default), within the 5 s recovery bound (issue 17).
pub const DEFAULT_LEASE_CHECK_MS: u64 = 500;

/// Default [`EndpointOptions::unclaimed_republish_after`], seconds: off.
/// A request queued behind a paced backlog longer than the bound is
/// published again too: its copy adds to the bucket's backlog count (which
/// the backlog caps read) and, popped while the first copy's call runs,
/// takes a pacing charge of its own. Until the endpoint can tell a message
/// left out of its queue from one still queued, this is for operators who
/// see the broker's gap, with a bound above their longest queue wait.
pub const DEFAULT_UNCLAIMED_REPUBLISH_S: u64 = 0;

/// Default [`EndpointOptions::cancel_grace`]: longer than an Envoy restart
/// (0.4–3 s in the chaos runs) plus a client's first reconnects.
pub const DEFAULT_CANCEL_GRACE: Duration = Duration::from_secs(5);

impl Default for EndpointOptions {
    fn default() -> Self {
        EndpointOptions {
            timeout: Duration::from_secs(600),
            keep_alive: Duration::from_secs(15),
            max_in_flight: DEFAULT_MAX_IN_FLIGHT,
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            body_timeout: Duration::from_millis(DEFAULT_BODY_TIMEOUT_MS),
            cancel_ttl: Duration::from_secs(300),
            cancel_grace: DEFAULT_CANCEL_GRACE,
            announce_queued: true,
            low_priority_max_backlog: 100,
            low_priority_timeout: Duration::from_secs(120),
            high_priority_timeout: Duration::from_secs(1800),
            lease_check: Duration::from_millis(DEFAULT_LEASE_CHECK_MS),
            unclaimed_republish_after: None,
            claim_timing: ClaimTiming::default(),
            secrets: Vec::new(),
            token_max_age: Duration::from_secs(30),
            owner_ttl: Duration::from_secs(86_400),
            marker_header: DEFAULT_MARKER_HEADER.to_string(),
            budget: BudgetLimits::default(),
            max_tenant_bytes_per_minute: quota::DEFAULT_MAX_TENANT_BYTES_PER_MINUTE,
        }
    }
}

struct EndpointState {
    hub: Arc<StreamHub>,
    publisher: Arc<dyn Publisher>,
    redis: RedisConn,
    slots: Arc<Semaphore>,
    /// Body bytes and per-tenant waiting places.
    ledger: Arc<Ledger>,
    /// Requests parsing and encoding their body at once (see [`PREPARE_CONCURRENCY`]).
    preparing: Arc<Semaphore>,
    options: EndpointOptions,
    metrics: Arc<EndpointMetrics>,
    /// In-process mode: chunks from the consumer in this process.
    local: Option<Arc<LocalBus>>,
}

pub fn router(
    hub: Arc<StreamHub>,
    publisher: Arc<dyn Publisher>,
    redis: RedisConn,
    options: EndpointOptions,
    metrics: Arc<EndpointMetrics>,
) -> Router {
    router_with_local(hub, publisher, redis, options, metrics, None)
}

/// As [`router`]; with `local`, in-process mode: a consumer running in this
/// process sends the chunks of requests waiting here through `local`
/// instead of the Redis Stream (terminal entries still come through Redis).
pub fn router_with_local(
    hub: Arc<StreamHub>,
    publisher: Arc<dyn Publisher>,
    redis: RedisConn,
    options: EndpointOptions,
    metrics: Arc<EndpointMetrics>,
    local: Option<Arc<LocalBus>>,
) -> Router {
    let state = Arc::new(EndpointState {
        hub,
        publisher,
        redis,
        slots: Arc::new(Semaphore::new(options.max_in_flight.max(1))),
        ledger: Ledger::new(options.budget.clone(), metrics.held_bytes.clone()),
        preparing: Arc::new(Semaphore::new(PREPARE_CONCURRENCY)),
        options,
        metrics,
        local,
    });
    // `accept` reads the body itself (deadline, JSON 413); the same limit
    // holds for anything else that buffers a body here.
    let body_limit = DefaultBodyLimit::max(state.options.max_body_bytes);
    Router::new()
        .route(&deferral::resume_path("{resume_token}"), get(resume))
        .fallback(any(accept))
        .layer(body_limit)
        .with_state(state)
}

async fn recv_local(local: &mut Option<LocalReceiver>) -> Option<String> {
    match local {
        Some(receiver) => receiver.chunks.recv().await,
        None => std::future::pending().await,
    }
}

/// `type` of every error the endpoint answers.
const ERROR_TYPE: &str = "sluice_deferral";

/// The OpenAI error body of the endpoint's answers.
fn error_body(code: &str, message: &str) -> String {
    openai_error_body(message, ERROR_TYPE, code)
}

fn error(status: StatusCode, code: &str, message: &str) -> Response {
    (
        status,
        [("content-type", "application/json")],
        error_body(code, message),
    )
        .into_response()
}

fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
        .filter(|v| !v.is_empty())
}

/// Descriptor values as the filter sends them: bounded, plain.
fn valid_marker(value: &str) -> bool {
    value.len() <= 128
        && value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.:/@+~".contains(&b))
}

/// A refusal before anything was queued: the answer, and the reason it is
/// counted under in `sluice_rls_deferral_rejected_total`.
#[derive(Debug)]
pub(crate) struct Rejection {
    status: StatusCode,
    code: &'static str,
    reason: &'static str,
    message: String,
    retry_after: Option<u64>,
}

impl Rejection {
    fn new(
        status: StatusCode,
        code: &'static str,
        reason: &'static str,
        message: impl Into<String>,
    ) -> Self {
        Rejection {
            status,
            code,
            reason,
            message: message.into(),
            retry_after: None,
        }
    }

    fn retry_after(mut self, seconds: u64) -> Self {
        self.retry_after = Some(seconds);
        self
    }

    /// Anything that did not come from Sluice's own admission: 403.
    fn forbidden(reason: &'static str, message: impl Into<String>) -> Self {
        Rejection::new(StatusCode::FORBIDDEN, "forbidden", reason, message)
    }

    fn bad_request(code: &'static str, reason: &'static str, message: impl Into<String>) -> Self {
        Rejection::new(StatusCode::BAD_REQUEST, code, reason, message)
    }

    fn into_response(self) -> Response {
        let mut response = error(self.status, self.code, &self.message);
        if let Some(seconds) = self.retry_after {
            response
                .headers_mut()
                .insert("retry-after", HeaderValue::from(seconds));
        }
        response
    }
}

impl EndpointState {
    fn refuse(&self, rejection: Rejection) -> Response {
        self.metrics
            .rejected
            .get_or_create(&vec![("reason".to_string(), rejection.reason.to_string())])
            .inc();
        tracing::debug!(reason = rejection.reason, message = %rejection.message, "deferred request refused");
        rejection.into_response()
    }
}

/// Requests that parse and re-encode their body at once: each holds its raw
/// body, the parsed JSON and the encoded work item for a moment (about
/// three times the body), outside the byte budget; this bounds that extra
/// to `PREPARE_CONCURRENCY` × 3 × `max_body_bytes` (48 MiB at 4 MiB).
const PREPARE_CONCURRENCY: usize = 4;

/// A deferred request whose headers and token checked out: what the
/// endpoint acts on. The body is not part of it: it is read afterwards.
struct Deferred {
    req_id: String,
    tenant: String,
    model: String,
    priority: Priority,
    estimated_tokens: u64,
    /// The client's own `x-request-id`, for log correlation only.
    client_request_id: Option<String>,
    /// The client's W3C trace context, carried to the model call.
    trace: Option<TraceContext>,
    path: String,
    endpoint: Endpoint,
    /// The body digest the token signed.
    signed_body: SignedBody,
    /// The body's announced length, if any.
    content_length: Option<u64>,
}

/// What the body said: how to answer, and the work item to publish.
struct Prepared {
    stream: bool,
    include_usage: bool,
    /// The WorkItem JSON: published, then kept for a re-publish (within the
    /// byte budget) until the answer ends.
    work: Bytes,
}

/// What a waiting request holds: a place in the waiting room (global and
/// its tenant's) and its body bytes. Given back when dropped.
struct Places {
    _slot: OwnedSemaphorePermit,
    _waiting: WaitingHold,
    bytes: BytesHold,
}

/// Checks that a request was deferred by Sluice's admission (its signed
/// token, see `sluice_admission::deferral`) from its headers alone: no body
/// byte is read before this passes.
fn check_headers(
    options: &EndpointOptions,
    method: &Method,
    uri: &Uri,
    headers: &HeaderMap,
) -> Result<Deferred, Rejection> {
    check_marked_post(options, method, headers)?;
    let markers = Markers::read(headers)?;
    let (signed_body, estimated_tokens) = markers.verify(options, headers)?;
    // Signed, but checked again as the filter checks it: this endpoint never
    // queues what the filter would have refused.
    let Some(endpoint) = Endpoint::from_path(uri.path()) else {
        return Err(Rejection::new(
            StatusCode::NOT_FOUND,
            "unknown_url",
            "unknown_path",
            format!("{} is not an inference endpoint", uri.path()),
        ));
    };
    let content_length = declared_length(options, headers)?;
    Ok(Deferred {
        priority: Priority::from_label(&markers.priority),
        req_id: markers.req_id,
        tenant: markers.tenant,
        model: markers.model,
        estimated_tokens,
        client_request_id: header(headers, CLIENT_REQUEST_ID_HEADER)
            .filter(|id| valid_marker(id))
            .map(str::to_string),
        trace: trace_context(headers),
        path: uri.path().to_string(),
        endpoint,
        signed_body,
        content_length,
    })
}

/// The request's `traceparent` and `tracestate` (several `tracestate`
/// headers are one list, joined with `,`), if well formed.
fn trace_context(headers: &HeaderMap) -> Option<TraceContext> {
    let mut states = headers
        .get_all(TRACESTATE_HEADER)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .map(str::trim)
        .filter(|v| !v.is_empty());
    let first = states.next();
    let joined = first.map(|first| {
        states.fold(first.to_string(), |mut all, next| {
            all.push(',');
            all.push_str(next);
            all
        })
    });
    TraceContext::from_headers(header(headers, TRACEPARENT_HEADER), joined.as_deref())
}

/// A POST that carries admission's deferral marker.
fn check_marked_post(
    options: &EndpointOptions,
    method: &Method,
    headers: &HeaderMap,
) -> Result<(), Rejection> {
    if method != Method::POST {
        return Err(Rejection::new(
            StatusCode::METHOD_NOT_ALLOWED,
            "method_not_allowed",
            "method",
            "deferred requests are POSTs",
        ));
    }
    if header(headers, &options.marker_header) != Some("1") {
        return Err(Rejection::bad_request(
            "not_deferred",
            "not_deferred",
            format!(
                "this endpoint only serves requests Sluice deferred ({}: 1); check the route that sent it here",
                options.marker_header
            ),
        ));
    }
    Ok(())
}

/// The request's identity as admission wrote it into headers.
struct Markers {
    req_id: String,
    tenant: String,
    model: String,
    priority: String,
    /// The estimate as written; a number once the token is known present.
    estimated: String,
}

impl Markers {
    fn read(headers: &HeaderMap) -> Result<Markers, Rejection> {
        let marker = |name: &'static str| match header(headers, name) {
            Some(v) if valid_marker(v) => Ok(v.to_string()),
            Some(_) => Err(Rejection::bad_request(
                "bad_marker",
                "bad_marker",
                format!("{name} is malformed"),
            )),
            None => Err(Rejection::bad_request(
                "missing_marker",
                "missing_marker",
                format!("{name} is missing"),
            )),
        };
        let (req_id, tenant, model) = (
            marker(REQUEST_ID_HEADER)?,
            marker(TENANT_HEADER)?,
            marker(MODEL_HEADER)?,
        );
        Ok(Markers {
            req_id,
            tenant,
            model,
            priority: marker(PRIORITY_HEADER)?,
            estimated: marker(ESTIMATED_TOKENS_HEADER)?,
        })
    }

    /// The deferral token over these markers: signed by one of the
    /// endpoint's secrets and young enough; it names the body's digest.
    /// Also the estimate, as a number.
    fn verify(
        &self,
        options: &EndpointOptions,
        headers: &HeaderMap,
    ) -> Result<(SignedBody, u64), Rejection> {
        let Some(token) = header(headers, DEFERRAL_TOKEN_HEADER) else {
            return Err(Rejection::forbidden(
                "token_missing",
                "only requests deferred by Sluice's admission are served here (no deferral token)",
            ));
        };
        let estimated_tokens: u64 = self.estimated.parse().map_err(|_| {
            Rejection::bad_request(
                "bad_marker",
                "bad_marker",
                format!("{ESTIMATED_TOKENS_HEADER} is not a number"),
            )
        })?;
        let claims = HeaderClaims {
            request_id: &self.req_id,
            tenant: &self.tenant,
            model: &self.model,
            priority: &self.priority,
            estimated_tokens,
        };
        let max_age = options.token_max_age.as_millis() as u64;
        let signed_body = claims
            .verify(
                token,
                &deferral::Verifier::new(&options.secrets, now_ms(), max_age),
            )
            .map_err(|why| Rejection::forbidden(why.reason(), why.to_string()))?;
        Ok((signed_body, estimated_tokens))
    }
}

/// The body's announced length, refused when it is over the bound.
fn declared_length(
    options: &EndpointOptions,
    headers: &HeaderMap,
) -> Result<Option<u64>, Rejection> {
    let Some(value) = header(headers, "content-length") else {
        return Ok(None);
    };
    let length = value.parse::<u64>().map_err(|_| {
        Rejection::bad_request(
            "bad_request",
            "body_unreadable",
            "content-length is not a number",
        )
    })?;
    if length > options.max_body_bytes as u64 {
        return Err(too_large(options));
    }
    Ok(Some(length))
}

fn too_large(options: &EndpointOptions) -> Rejection {
    Rejection::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        "request_too_large",
        "too_large",
        format!(
            "request body is larger than this gateway accepts ({} bytes)",
            options.max_body_bytes
        ),
    )
}

/// A body that was too large, too slow or unreadable.
fn body_rejection(why: BodyError, options: &EndpointOptions) -> Rejection {
    match why {
        BodyError::TooLarge => too_large(options),
        BodyError::TimedOut => Rejection::new(
            StatusCode::REQUEST_TIMEOUT,
            "request_timeout",
            "body_timeout",
            format!(
                "request body not received within {} ms",
                options.body_timeout.as_millis()
            ),
        ),
        BodyError::Unreadable => Rejection::bad_request(
            "invalid_request",
            "body_unreadable",
            "request body could not be read",
        ),
    }
}

fn ledger_rejection(refusal: budget::Refusal) -> Rejection {
    Rejection::new(
        refusal.status(),
        refusal.code(),
        refusal.code(),
        refusal.message(),
    )
    .retry_after(budget::RETRY_AFTER_SECS)
}

/// A place in the waiting room and the body's bytes, taken before any body
/// byte is read: a tenant at its share gets 429, a full endpoint 503.
fn take_places(state: &EndpointState, deferred: &Deferred) -> Result<Places, Rejection> {
    let waiting = state
        .ledger
        .hold_waiting(&deferred.tenant)
        .map_err(ledger_rejection)?;
    let Ok(slot) = state.slots.clone().try_acquire_owned() else {
        return Err(Rejection::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "deferral_busy",
            "busy",
            "too many requests are waiting on this gateway; retry shortly",
        )
        .retry_after(5));
    };
    // Without a length, the largest body is held until the body is read.
    let bytes = deferred
        .content_length
        .unwrap_or(state.options.max_body_bytes as u64);
    let bytes = state
        .ledger
        .hold_bytes(&deferred.tenant, bytes)
        .map_err(ledger_rejection)?;
    Ok(Places {
        _slot: slot,
        _waiting: waiting,
        bytes,
    })
}

/// Reads the body within the bytes held for it, checks it is the body the
/// token signed, and turns it into the work item; only the work item's
/// bytes stay held.
async fn prepare(
    state: &EndpointState,
    deferred: &Deferred,
    body: Body,
    places: &mut Places,
) -> Result<Prepared, Rejection> {
    let limit = (places.bytes.bytes() as usize).min(state.options.max_body_bytes);
    let raw = read_body(body, limit, state.options.body_timeout)
        .await
        .map_err(|why| body_rejection(why, &state.options))?;
    let _ = places.bytes.resize(raw.len() as u64);
    // Hashing, parsing and encoding are CPU work of up to ~3× the body:
    // a few at a time, off the async workers (they would stall the accept
    // loop and every other request of this process).
    let _preparing = state.preparing.acquire().await.map_err(|_| {
        Rejection::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "shutting_down",
            "busy",
            "the gateway is shutting down",
        )
    })?;
    let envelope = WorkItem {
        req_id: deferred.req_id.clone(),
        tenant: deferred.tenant.clone(),
        model: deferred.model.clone(),
        priority: deferred.priority,
        path: deferred.path.clone(),
        body: Value::Null,
        enqueued_at_ms: now_ms(),
        estimated_tokens: deferred.estimated_tokens,
        attempt: 0,
        trace: deferred.trace.clone(),
    };
    let (signed_body, endpoint) = (deferred.signed_body, deferred.endpoint);
    let encoded = tokio::task::spawn_blocking(move || encode(raw, signed_body, endpoint, envelope))
        .await
        .map_err(|_| {
            Rejection::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "internal_error",
                "body_unreadable",
                "the request body could not be processed",
            )
        })??;
    let (stream, include_usage, work) = encoded;
    check_queueable(&state.options, work.len())?;
    places
        .bytes
        .resize(work.len() as u64)
        .map_err(ledger_rejection)?;
    Ok(Prepared {
        stream,
        include_usage,
        work: Bytes::from(work),
    })
}

/// Checks the body against the token's digest, parses it as the filter
/// does, and encodes the work item (`envelope` with the body): returns
/// `stream`, `include_usage` and the work item's JSON.
fn encode(
    raw: Bytes,
    signed_body: SignedBody,
    endpoint: Endpoint,
    envelope: WorkItem,
) -> Result<(bool, bool, Vec<u8>), Rejection> {
    if let Err(why) = signed_body.check(&raw) {
        return Err(Rejection::forbidden(why.reason(), why.to_string()));
    }
    let parsed = openai::parse(endpoint, &raw)
        .map_err(|message| Rejection::bad_request("invalid_request", "invalid_request", message))?;
    drop(raw);
    // The consumer always asks the model for usage; a client that did not
    // gets no usage-only chunk.
    let (stream, include_usage) = (parsed.stream, parsed.include_usage);
    let work = WorkItem {
        body: parsed.into_body(),
        ..envelope
    }
    .to_json();
    Ok((stream, include_usage, work))
}

/// A work item the broker would refuse (its message size limit) gets a
/// 413 that says so: retrying cannot help.
fn check_queueable(options: &EndpointOptions, encoded: usize) -> Result<(), Rejection> {
    if encoded <= sluice_litetopic::MAX_BODY_LEN {
        return Ok(());
    }
    Err(Rejection::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        "request_too_large",
        "too_large_to_queue",
        format!(
            "this request cannot be deferred: queued with its envelope it takes {encoded} bytes, \
             more than the queue's {} (its body is within the gateway's {} bytes, but too close \
             to it); send a smaller request, or retry when the tenant is under its limit",
            sluice_litetopic::MAX_BODY_LEN,
            options.max_body_bytes
        ),
    ))
}

/// Low-priority requests fail fast when their bucket's queue is long. The
/// check reserves the place in the same step (see [`quota::reserve_low`]),
/// so concurrent requests never pass the cap.
async fn check_backlog(
    state: &EndpointState,
    deferred: &Deferred,
) -> Result<Option<quota::LowReservation>, Rejection> {
    if deferred.priority != Priority::Low {
        return Ok(None);
    }
    let topic = sluice_litetopic::lite_topic_name(&deferred.tenant, &deferred.model);
    let reserved = quota::reserve_low(
        &state.redis,
        &topic,
        &deferred.req_id,
        state.options.low_priority_max_backlog,
        now_ms(),
    )
    .await;
    match reserved {
        Ok(Some(reservation)) => Ok(Some(reservation)),
        Ok(None) => Err(Rejection::new(
            StatusCode::TOO_MANY_REQUESTS,
            "queue_full",
            "low_priority_backlog",
            "this tenant's queue for the model is long; low-priority requests are not queued now",
        )
        .retry_after(30)),
        // As before: a store error does not refuse low-priority work here;
        // the publish that follows needs the store and says so.
        Err(error) => {
            tracing::debug!(%error, "cannot check the low-priority backlog");
            Ok(None)
        }
    }
}

/// Charges the work item's bytes to its tenant's minute at the broker.
async fn charge_broker_bytes(
    state: &EndpointState,
    deferred: &Deferred,
    bytes: usize,
) -> Result<quota::BytesCharge, Rejection> {
    let limit = state.options.max_tenant_bytes_per_minute;
    match quota::charge_tenant_bytes(&state.redis, &deferred.tenant, bytes as u64, limit, now_ms())
        .await
    {
        Ok(charge) => Ok(charge),
        Err(ChargeRefused::OverLimit { retry_after_ms }) => Err(Rejection::new(
            StatusCode::TOO_MANY_REQUESTS,
            "tenant_broker_bytes",
            "tenant_broker_bytes",
            format!(
                "this tenant deferred more than {limit} bytes of requests in the last minute; nothing was sent to the model, retry shortly"
            ),
        )
        .retry_after(retry_after_ms.div_ceil(1000).max(1))),
        Err(ChargeRefused::Store(error)) => {
            tracing::warn!(%error, "cannot charge a tenant's deferred bytes");
            Err(store_unavailable())
        }
    }
}

fn store_unavailable() -> Rejection {
    Rejection::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "queue_unavailable",
        "store_unavailable",
        "the request could not be queued; nothing was sent to the model, retry shortly",
    )
    .retry_after(5)
}

/// Binds the request id to its tenant, once: a second request with the same
/// id (a replayed token) is refused at once, never served another's answer.
async fn claim_request_id(state: &EndpointState, deferred: &Deferred) -> Result<(), Rejection> {
    let mut redis = state.redis.clone();
    let claimed: Result<Option<String>, _> = redis::cmd("SET")
        .arg(keys::owner(&deferred.req_id))
        .arg(&deferred.tenant)
        .arg("NX")
        .arg("EX")
        .arg(state.options.owner_ttl.as_secs().max(1))
        .query_async(&mut redis)
        .await;
    match claimed {
        Ok(Some(_)) => Ok(()),
        Ok(None) => Err(Rejection::new(
            StatusCode::CONFLICT,
            "duplicate_request",
            "duplicate_request",
            "this request id was already used",
        )),
        Err(error) => {
            tracing::warn!(%error, "cannot record a deferred request's owner");
            Err(store_unavailable())
        }
    }
}

/// The deferral endpoint's handler: headers and token first, then the
/// waiting room's places and bytes, only then the body.
async fn accept(State(state): State<Arc<EndpointState>>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let deferred = match check_headers(&state.options, &parts.method, &parts.uri, &parts.headers) {
        Ok(deferred) => deferred,
        Err(rejection) => return state.refuse(rejection),
    };
    if let Some(slot) = parts.extensions.get::<PreTokenSlot>() {
        slot.authenticated();
    }
    let span = sluice_contract::request_span!(&deferred.req_id, deferred.trace.as_ref());
    // The request's span in the client's trace; the consumer's spans are
    // its children (its context travels in the work item).
    let traced = sluice_contract::trace_span!("deferral.request", req_id = %deferred.req_id);
    sluice_contract::join_trace(&traced, deferred.trace.as_ref());
    let mut deferred = deferred;
    deferred.trace = sluice_contract::onward_trace(&traced, deferred.trace.as_ref());
    serve(state, deferred, body)
        .instrument(traced)
        .instrument(span)
        .await
}

/// [`accept`] once the headers checked out, in the request's span.
async fn serve(state: Arc<EndpointState>, deferred: Deferred, body: Body) -> Response {
    let mut places = match take_places(&state, &deferred) {
        Ok(places) => places,
        Err(rejection) => return state.refuse(rejection),
    };
    let prepared = match prepare(&state, &deferred, body, &mut places).await {
        Ok(prepared) => prepared,
        Err(rejection) => return state.refuse(rejection),
    };
    let queued = admit_and_queue(&state, &deferred, &prepared, places).await;
    // The waiter keeps the one copy a re-publish needs; this one goes now.
    let Prepared {
        stream,
        include_usage,
        work,
    } = prepared;
    drop(work);
    match queued {
        Ok((waiter, queue_position)) => {
            let how = AnswerAs {
                stream,
                include_usage,
                queue_position,
            };
            answer(waiter, &deferred, how).await
        }
        Err(rejection) => state.refuse(rejection),
    }
}

/// The checks that need the store (backlog, bytes at the broker, the
/// request id), then the publish.
async fn admit_and_queue(
    state: &Arc<EndpointState>,
    deferred: &Deferred,
    prepared: &Prepared,
    places: Places,
) -> Result<(Waiter, Option<u64>), Rejection> {
    let low_reservation = check_backlog(state, deferred).await?;
    let charge = charge_broker_bytes(state, deferred, prepared.work.len()).await?;
    if let Err(rejection) = claim_request_id(state, deferred).await {
        charge.refund(&state.redis).await;
        return Err(rejection);
    }
    let queued = queue(state, deferred, prepared, places).await;
    if let Some(reservation) = low_reservation {
        reservation.release().await;
    }
    if queued.is_err() {
        charge.refund(&state.redis).await;
    }
    queued
}

/// Watches the response stream, then publishes the work item; the waiter
/// holds the client's place until the answer ends.
async fn queue(
    state: &Arc<EndpointState>,
    deferred: &Deferred,
    prepared: &Prepared,
    places: Places,
) -> Result<(Waiter, Option<u64>), Rejection> {
    let req_id = &deferred.req_id;
    // Watch the response stream (and in in-process mode register for local
    // chunks) before the work can possibly start.
    let subscription = state.hub.subscribe(&keys::response(req_id), "0-0").await;
    let local = state.local.as_ref().map(|bus| bus.register(req_id));
    let queue_position = match state
        .publisher
        .publish(
            &deferred.tenant,
            &deferred.model,
            req_id,
            prepared.work.clone(),
        )
        .instrument(sluice_contract::trace_span!("deferral.publish"))
        .await
    {
        Ok(position) => position.filter(|n| *n > 0),
        Err(PublishError::Refused(refusal)) => {
            return Err(Rejection::new(
                refusal.status(),
                refusal.code(),
                refusal.code(),
                refusal.message(),
            )
            .retry_after(refusal.retry_after_secs()));
        }
        Err(PublishError::Failed(why)) => {
            tracing::warn!(req_id = %req_id, %why, "cannot queue deferred request");
            return Err(Rejection::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "queue_unavailable",
                "publish_failed",
                "the request could not be queued; nothing was sent to the model, retry shortly",
            )
            .retry_after(5));
        }
    };
    state.metrics.accepted.inc();
    state.metrics.in_flight.inc();
    tracing::debug!(
        req_id = %req_id,
        client_request_id = deferred.client_request_id.as_deref().unwrap_or(""),
        tenant = %deferred.tenant,
        model = %deferred.model,
        stream = prepared.stream,
        "deferred request queued"
    );
    let timeout = match deferred.priority {
        Priority::Low => state.options.low_priority_timeout,
        Priority::High => state.options.high_priority_timeout,
        Priority::Normal => state.options.timeout,
    };
    let waiter = Waiter {
        state: state.clone(),
        lease_watch: Some(LeaseWatch::new(
            deferred.tenant.clone(),
            deferred.model.clone(),
            prepared.work.clone(),
            state.options.unclaimed_republish_after,
        )),
        timeout,
        req_id: req_id.clone(),
        span: tracing::Span::current(),
        phase: Phase::holding(),
        subscription,
        local,
        local_seq: 0,
        held_back: None,
        finished: false,
        resumes_seen: 0,
        _permit: Held::Places(places),
    };
    Ok((waiter, queue_position))
}

/// How a queued request is answered.
struct AnswerAs {
    stream: bool,
    include_usage: bool,
    queue_position: Option<u64>,
}

/// SSE for a streaming client (with its resume token), else one JSON body.
async fn answer(waiter: Waiter, deferred: &Deferred, how: AnswerAs) -> Response {
    let AnswerAs {
        stream,
        include_usage,
        queue_position,
    } = how;
    if !stream {
        return json_response(waiter).await;
    }
    let resume = waiter
        .state
        .options
        .secrets
        .first()
        .map(|secret| deferral::resume_token(secret, &deferred.req_id, &deferred.tenant));
    let mut response = sse_response(
        waiter,
        true,
        include_usage,
        queue_position,
        resume.as_deref(),
    );
    let headers = response.headers_mut();
    if let Some(position) = queue_position {
        if let Ok(value) = HeaderValue::from_str(&position.to_string()) {
            headers.insert(QUEUE_POSITION_HEADER, value);
        }
    }
    if let Some(Ok(value)) = resume.as_deref().map(HeaderValue::from_str) {
        headers.insert(RESUME_TOKEN_HEADER, value);
    }
    response
}

/// What a waiter holds until its answer ends (for their `Drop` only).
#[allow(dead_code)]
enum Held {
    /// A new request: its places and its bytes.
    Places(Places),
    /// A resumed stream: a place in the waiting room only.
    Slot(OwnedSemaphorePermit),
}

/// Holds a client's place; cancels the model call if the client goes away.
struct Waiter {
    state: Arc<EndpointState>,
    /// The lease/claim watch: what was published, to publish again if a consumer lost it (none on resume).
    lease_watch: Option<LeaseWatch>,
    /// This client's overall deadline (by priority class).
    timeout: Duration,
    req_id: String,
    /// The request's span: the answer's stream and the cancel run in it.
    span: tracing::Span,
    /// Its trace's current phase: holding, then answering.
    phase: Phase,
    subscription: Subscription,
    /// In-process mode: chunks sent by this process's consumer.
    local: Option<LocalReceiver>,
    /// Local chunks delivered so far (their SSE ids).
    local_seq: u64,
    /// A Redis entry that arrived while local chunks were still queued.
    held_back: Option<Entry>,
    finished: bool,
    /// The resumes of this request's stream counted when this waiter began
    /// (0 for the first): a later one keeps the call when this one goes.
    resumes_seen: u64,
    _permit: Held,
}

impl Drop for Waiter {
    fn drop(&mut self) {
        self.state.metrics.in_flight.dec();
        if self.finished {
            return;
        }
        // The client left before the end: tell the consumer to stop the GPU
        // call, unless it resumes within the grace.
        self.state.metrics.cancelled.inc();
        let mut redis = self.state.redis.clone();
        let req_id = self.req_id.clone();
        let resumes_seen = self.resumes_seen;
        let grace = self.state.options.cancel_grace;
        let ttl = self.state.options.cancel_ttl.as_secs().max(1);
        tokio::spawn(
            async move {
                tokio::time::sleep(grace).await;
                let result: Result<i64, _> = CANCEL_UNLESS_RESUMED_SCRIPT
                    .key(keys::resumed(&req_id))
                    .key(keys::cancel(&req_id))
                    .arg(resumes_seen)
                    .arg(ttl)
                    .invoke_async(&mut redis)
                    .await;
                match result {
                    Ok(0) => {
                        tracing::info!("the client resumed the stream; the model call goes on")
                    }
                    Ok(_) => {}
                    Err(error) => tracing::warn!(%error, "cannot record the cancel"),
                }
            }
            .instrument(self.span.clone()),
        );
    }
}

/// Cancel a request's model call unless its stream was resumed since the
/// waiter that left began.
///
/// KEYS[1]  `resumed:{id}`: the stream's resumes so far
/// KEYS[2]  `cancel:{id}`
/// ARGV[1]  the resumes the waiter that left had seen
/// ARGV[2]  the cancel's lifetime, s
///
/// Returns 1 when cancelled, 0 when a resume came after.
const CANCEL_UNLESS_RESUMED: &str = r#"
local resumes = tonumber(redis.call('GET', KEYS[1]) or '0') or 0
if resumes > tonumber(ARGV[1]) then return 0 end
redis.call('SET', KEYS[2], '1', 'EX', ARGV[2])
return 1
"#;

// Built once: `Script::new` hashes its source (as deferral/src/quota.rs).
static CANCEL_UNLESS_RESUMED_SCRIPT: LazyLock<redis::Script> =
    LazyLock::new(|| redis::Script::new(CANCEL_UNLESS_RESUMED));

enum Next {
    CheckLease,
    Entry(Entry),
    KeepAlive,
    TimedOut,
    Closed,
}

/// The waiter's phase in the request's trace: `deferral.hold` until the
/// first entry of the answer, then `deferral.answer` until the waiter goes
/// (each span ends when the phase is left).
struct Phase {
    span: tracing::Span,
    answering: bool,
}

impl Phase {
    /// Holding, under the current span.
    fn holding() -> Self {
        Self::holding_in(&tracing::Span::current())
    }

    /// Holding, under `parent`.
    fn holding_in(parent: &tracing::Span) -> Self {
        Phase {
            span: sluice_contract::trace_span!(parent: parent, "deferral.hold"),
            answering: false,
        }
    }

    /// The answer began (its first entry): holding ends.
    fn answer(&mut self, parent: &tracing::Span) {
        if !self.answering {
            self.answering = true;
            self.span = sluice_contract::trace_span!(parent: parent, "deferral.answer");
        }
    }
}

impl Waiter {
    /// The next entry of the answer, or why none came.
    async fn next(&mut self, deadline: tokio::time::Instant, keep_alive: Option<Duration>) -> Next {
        let next = self.next_step(deadline, keep_alive).await;
        if matches!(next, Next::Entry(_)) {
            self.phase.answer(&self.span);
        }
        next
    }

    async fn next_step(
        &mut self,
        deadline: tokio::time::Instant,
        keep_alive: Option<Duration>,
    ) -> Next {
        let keep = tokio::time::sleep(keep_alive.unwrap_or(Duration::from_secs(86_400)));
        tokio::pin!(keep);
        loop {
            // Local chunks were all sent before any later Redis entry (the
            // terminal) was written: drain them first.
            if let Some(entry) = self.try_local() {
                return Next::Entry(entry);
            }
            if let Some(entry) = self.held_back.take() {
                return Next::Entry(entry);
            }
            let watching = self.lease_watch.as_ref().is_some_and(LeaseWatch::watching);
            let lease_check = self.state.options.lease_check;
            let local_open = self.local.is_some();
            let step = tokio::select! {
                chunk = recv_local(&mut self.local), if local_open => match chunk {
                    Some(data) => Next::Entry(self.local_entry(data)),
                    None => {
                        self.local = None;
                        continue;
                    }
                },
                entry = self.subscription.entries.recv() => match entry {
                    Some(entry) => match self.try_local() {
                        Some(chunk) => {
                            self.held_back = Some(entry);
                            Next::Entry(chunk)
                        }
                        None => Next::Entry(entry),
                    },
                    None => Next::Closed,
                },
                _ = tokio::time::sleep_until(deadline) => Next::TimedOut,
                _ = &mut keep, if keep_alive.is_some() => Next::KeepAlive,
                _ = tokio::time::sleep(lease_check), if watching => Next::CheckLease,
            };
            match step {
                Next::CheckLease => self.check_lease().await,
                // The lease stays watched while chunks arrive: a consumer that
                // dies mid-stream stops refreshing it. The check only runs after
                // `lease_check` of silence, so a flowing stream costs nothing.
                Next::Entry(entry) => return Next::Entry(entry),
                other => return other,
            }
        }
    }

    fn try_local(&mut self) -> Option<Entry> {
        let data = self.local.as_mut()?.chunks.try_recv().ok()?;
        Some(self.local_entry(data))
    }

    /// A local chunk as a stream entry. Its id (`local-<n>`) is not a Redis
    /// stream id: in-process streams cannot be resumed.
    fn local_entry(&mut self, data: String) -> Entry {
        self.local_seq += 1;
        Entry {
            id: format!("local-{}", self.local_seq),
            fields: StreamEvent::Chunk { data }
                .fields()
                .into_iter()
                .map(|(name, value)| (name.to_string(), value))
                .collect(),
        }
    }

    /// The lease/claim watch (see [`LeaseWatch`]), after `lease_check` of silence.
    async fn check_lease(&mut self) {
        let Some(watch) = self.lease_watch.as_mut() else {
            return;
        };
        let mut redis = self.state.redis.clone();
        watch
            .check(
                &mut redis,
                &self.req_id,
                &self.state.options.claim_timing,
                self.state.publisher.as_ref(),
                &self.state.metrics,
                self.state.hub.last_redis_failure(),
            )
            .await;
    }
}

/// The client's answer to an `error` entry.
fn error_payload(status: u16, code: &str, message: &str) -> (StatusCode, String) {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_GATEWAY);
    (status, error_body(code, message))
}

/// A chunk carrying only usage (`"choices": []`), as models send it last.
fn is_usage_only(data: &str) -> bool {
    data.contains("\"usage\"")
        && serde_json::from_str::<Value>(data)
            .ok()
            .and_then(|v| {
                v.get("choices")
                    .and_then(Value::as_array)
                    .map(Vec::is_empty)
            })
            .unwrap_or(false)
}

fn sse_response(
    waiter: Waiter,
    announce: bool,
    include_usage: bool,
    queue_position: Option<u64>,
    resume_token: Option<&str>,
) -> Response {
    let options = waiter.state.options.clone();
    let deadline = tokio::time::Instant::now() + waiter.timeout;
    let req_id = waiter.req_id.clone();
    let span = waiter.span.clone();
    // A comment: OpenAI clients ignore it; people and load balancers see it.
    let first = (announce && options.announce_queued).then(|| {
        let mut text = match queue_position {
            Some(n) => sse::comment(&format!(
                "queued; position {n} in this tenant × model queue"
            )),
            None => sse::comment("queued"),
        };
        if let Some(token) = resume_token {
            text.push_str(&sse::comment(&format!("resume-token {token}")));
        }
        text
    });
    let stream = futures::stream::unfold(
        (Box::new(waiter), first, false),
        move |(mut waiter, pending, done)| {
            let keep_alive = options.keep_alive;
            let span = span.clone();
            async move {
                if let Some(text) = pending {
                    return Some((
                        Ok::<_, std::convert::Infallible>(Bytes::from(text)),
                        (waiter, None, false),
                    ));
                }
                if done {
                    return None;
                }
                let next = waiter.next(deadline, Some(keep_alive)).await;
                let (text, finished) = sse_text(&waiter, next, include_usage);
                if finished {
                    waiter.finished = true;
                }
                Some((Ok(Bytes::from(text)), (waiter, None, finished)))
            }
            .instrument(span)
        },
    );
    let mut response = Response::new(Body::from_stream(stream));
    let headers = response.headers_mut();
    headers.insert(
        "content-type",
        HeaderValue::from_static("text/event-stream"),
    );
    headers.insert("cache-control", HeaderValue::from_static("no-cache"));
    // Ask buffering proxies (nginx-style) not to hold the stream back.
    headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    if let Ok(value) = HeaderValue::from_str(&req_id) {
        headers.insert(REQUEST_ID_HEADER, value);
    }
    response
}

/// What one step of the wait sends on the SSE stream, and whether it ends it.
fn sse_text(waiter: &Waiter, next: Next, include_usage: bool) -> (String, bool) {
    match next {
        Next::KeepAlive => (sse::comment("keep-alive"), false),
        Next::Entry(entry) => match entry.event() {
            Some(StreamEvent::Chunk { data }) => {
                if !include_usage && is_usage_only(&data) {
                    (String::new(), false)
                } else {
                    (sse::event(Some(&entry.id), None, &data), false)
                }
            }
            Some(StreamEvent::Done { .. }) => (sse::DONE.to_string(), true),
            Some(StreamEvent::Error {
                status,
                code,
                message,
            }) => {
                let (_, body) = error_payload(status, &code, &message);
                (sse::event(Some(&entry.id), Some("error"), &body), true)
            }
            None => (String::new(), false),
        },
        Next::TimedOut => {
            waiter.state.metrics.timed_out.inc();
            let body = error_body("timeout", "no answer in time");
            (sse::event(None, Some("timeout"), &body), true)
        }
        Next::Closed => (String::new(), true),
        // Handled inside `next`.
        Next::CheckLease => (String::new(), false),
    }
}

async fn json_response(mut waiter: Waiter) -> Response {
    let deadline = tokio::time::Instant::now() + waiter.timeout;
    let mut assembler = sse::Assembler::default();
    loop {
        match waiter.next(deadline, None).await {
            Next::Entry(entry) => match entry.event() {
                Some(StreamEvent::Chunk { data }) => assembler.feed(&data),
                Some(StreamEvent::Done { .. }) => {
                    waiter.finished = true;
                    let mut response = (
                        StatusCode::OK,
                        [("content-type", "application/json")],
                        assembler.finish().to_string(),
                    )
                        .into_response();
                    if let Ok(value) = HeaderValue::from_str(&waiter.req_id) {
                        response.headers_mut().insert(REQUEST_ID_HEADER, value);
                    }
                    return response;
                }
                Some(StreamEvent::Error {
                    status,
                    code,
                    message,
                }) => {
                    waiter.finished = true;
                    let (status, body) = error_payload(status, &code, &message);
                    return (status, [("content-type", "application/json")], body).into_response();
                }
                None => {}
            },
            Next::TimedOut => {
                waiter.state.metrics.timed_out.inc();
                return error(
                    StatusCode::GATEWAY_TIMEOUT,
                    "timeout",
                    "no answer in time; the request was cancelled",
                );
            }
            Next::Closed => {
                return error(
                    StatusCode::BAD_GATEWAY,
                    "stream_closed",
                    "the response channel closed",
                )
            }
            Next::KeepAlive | Next::CheckLease => {}
        }
    }
}

/// The request a resume token opens, if the token is that request's and
/// its tenant's. Unknown, wrong-tenant and forged tokens all get the same
/// 404: the answer tells nothing about other requests.
async fn resumable_request(state: &EndpointState, token: &str) -> Result<String, Response> {
    let not_found = || {
        error(
            StatusCode::NOT_FOUND,
            "stream_not_found",
            "no stream for this resume token (use the x-sluice-resume-token of the original answer)",
        )
    };
    let Some(req_id) = deferral::resume_token_request_id(token) else {
        return Err(not_found());
    };
    let mut redis = state.redis.clone();
    let owner: Result<Option<String>, _> = redis::cmd("GET")
        .arg(keys::owner(req_id))
        .query_async(&mut redis)
        .await;
    match owner {
        Ok(Some(tenant))
            if deferral::verify_resume_token(token, &state.options.secrets, &tenant) =>
        {
            Ok(req_id.to_string())
        }
        Ok(_) => Err(not_found()),
        Err(e) => {
            tracing::warn!(%e, "cannot check a resume token");
            Err(error(
                StatusCode::SERVICE_UNAVAILABLE,
                "store_unavailable",
                "try again shortly",
            ))
        }
    }
}

/// One more resume of `req_id`'s stream; the count so far.
async fn count_resume(state: &EndpointState, req_id: &str) -> Result<u64, Response> {
    let mut redis = state.redis.clone();
    let key = keys::resumed(req_id);
    let counted: Result<(u64,), _> = redis::pipe()
        .incr(&key, 1)
        .expire(&key, state.options.cancel_ttl.as_secs().max(1) as i64)
        .ignore()
        .query_async(&mut redis)
        .await;
    counted.map(|(resumes,)| resumes).map_err(|e| {
        tracing::warn!(%e, "cannot count a resume");
        error(
            StatusCode::SERVICE_UNAVAILABLE,
            "store_unavailable",
            "try again shortly",
        )
    })
}

/// Where a resumed stream starts: the client's `Last-Event-ID` (a stream
/// entry id), or the beginning.
#[allow(clippy::result_large_err)] // the refusal is the answer itself, built once
fn resume_point(headers: &HeaderMap) -> Result<String, Response> {
    let from = header(headers, "last-event-id")
        .unwrap_or("0-0")
        .to_string();
    if from.starts_with("local-") {
        return Err(error(
            StatusCode::CONFLICT,
            "not_resumable",
            "this stream was served in in-process mode; its chunks were not kept and it cannot be resumed",
        ));
    }
    if !from.bytes().all(|b| b.is_ascii_digit() || b == b'-') {
        return Err(error(
            StatusCode::BAD_REQUEST,
            "bad_last_event_id",
            "Last-Event-ID must be a stream entry id",
        ));
    }
    Ok(from)
}

/// The answer's stream is still in Redis (it expires after the answer).
async fn stream_exists(state: &EndpointState, req_id: &str) -> Result<(), Response> {
    let mut redis = state.redis.clone();
    let exists: Result<bool, _> = redis::cmd("EXISTS")
        .arg(keys::response(req_id))
        .query_async(&mut redis)
        .await;
    match exists {
        Ok(true) => Ok(()),
        Ok(false) => Err(error(
            StatusCode::GONE,
            "stream_gone",
            "this response stream has expired or never existed; send the request again",
        )),
        Err(e) => {
            tracing::warn!(%e, "cannot check a stream for resume");
            Err(error(
                StatusCode::SERVICE_UNAVAILABLE,
                "store_unavailable",
                "try again shortly",
            ))
        }
    }
}

/// `GET /v1/sluice/streams/{resume token}` with `Last-Event-ID`: pick a
/// stream up again after a disconnect, while it still exists.
async fn resume(
    State(state): State<Arc<EndpointState>>,
    Path(token): Path<String>,
    headers: HeaderMap,
) -> Response {
    let req_id = match resumable_request(&state, &token).await {
        Ok(req_id) => req_id,
        Err(response) => return response,
    };
    let from = match resume_point(&headers) {
        Ok(from) => from,
        Err(response) => return response,
    };
    if let Err(response) = stream_exists(&state, &req_id).await {
        return response;
    }
    let Ok(permit) = state.slots.clone().try_acquire_owned() else {
        return error(
            StatusCode::SERVICE_UNAVAILABLE,
            "deferral_busy",
            "too many waiting requests",
        );
    };
    // Counted before the stream is read: a waiter that lost its connection
    // then keeps the call (see `CANCEL_UNLESS_RESUMED`).
    let resumes_seen = match count_resume(&state, &req_id).await {
        Ok(resumes) => resumes,
        Err(response) => return response,
    };
    let subscription = state.hub.subscribe(&keys::response(&req_id), &from).await;
    state.metrics.in_flight.inc();
    // The resuming request's own trace context, if it sent one (the
    // original's is not kept).
    let trace = trace_context(&headers);
    let span = sluice_contract::request_span!(&req_id, trace.as_ref());
    let waiter = Waiter {
        state: state.clone(),
        lease_watch: None,
        timeout: state.options.timeout,
        req_id,
        phase: Phase::holding_in(&span),
        span,
        subscription,
        // Resume reads the Redis Stream only (in-process chunks are not kept).
        local: None,
        local_seq: 0,
        held_back: None,
        finished: false,
        resumes_seen,
        _permit: Held::Slot(permit),
    };
    // A resumed stream cannot know what the client asked: usage is sent.
    sse_response(waiter, false, true, None, None)
}
