//! The deferral endpoint: accepts a request the filter marked as deferred,
//! queues it for its tenant × model bucket, and answers the client from the
//! Redis Stream the consumer writes — as SSE when the client streams, as one
//! JSON answer when it does not.

use super::caps::PublishError;
use super::hub::{Entry, StreamHub, Subscription};
use super::sse;
use axum::body::{Body, Bytes};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get};
use axum::Router;
use futures::future::BoxFuture;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use serde_json::{json, Value};
use sluice_consumer::keys;
use sluice_consumer::local::{LocalBus, LocalReceiver};
use sluice_consumer::work::{Priority, WorkItem};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::sync::Semaphore;

/// Queues a deferred request (the LiteTopic producer in production).
pub trait Publisher: Send + Sync + 'static {
    /// Publish `work` (the consumer's WorkItem JSON) to the bucket of
    /// `tenant` × `model`. Either it is queued or it is not: no half state.
    /// `Ok(Some(n))`: the bucket holds `n` queued requests now, this one
    /// included (`None` when the publisher does not know). A new bucket may
    /// be refused by a cap ([`PublishError::Refused`]).
    fn publish<'a>(
        &'a self,
        tenant: &'a str,
        model: &'a str,
        req_id: &'a str,
        work: Vec<u8>,
    ) -> BoxFuture<'a, Result<Option<u64>, PublishError>>;
}

#[derive(Clone, Debug)]
pub struct EndpointOptions {
    /// Longest a client waits for its answer, queue time included.
    pub timeout: Duration,
    /// SSE comment interval while nothing else is sent.
    pub keep_alive: Duration,
    /// Deferred requests held open at once by this endpoint; beyond: 503.
    pub max_in_flight: usize,
    pub max_body_bytes: usize,
    /// `cancel:{id}` lifetime after a client disconnects.
    pub cancel_ttl: Duration,
    /// Send an SSE comment saying the request is queued, first thing.
    pub announce_queued: bool,
    /// Low-priority requests fail fast (429) when their bucket already holds
    /// more queued requests than this.
    pub low_priority_max_backlog: u64,
    /// How long low- and high-priority requests may wait (normal: `timeout`).
    pub low_priority_timeout: Duration,
    pub high_priority_timeout: Duration,
    /// How often a waiting request checks its consumer lease (see
    /// consumer/src/runner.rs): a request popped by a consumer that died
    /// before starting it is published again, once.
    pub lease_check: Duration,
}

impl Default for EndpointOptions {
    fn default() -> Self {
        EndpointOptions {
            timeout: Duration::from_secs(600),
            keep_alive: Duration::from_secs(15),
            max_in_flight: 10_000,
            max_body_bytes: 4 * 1024 * 1024,
            cancel_ttl: Duration::from_secs(300),
            announce_queued: true,
            low_priority_max_backlog: 100,
            low_priority_timeout: Duration::from_secs(120),
            high_priority_timeout: Duration::from_secs(1800),
            lease_check: Duration::from_secs(2),
        }
    }
}

/// Metrics of the deferral endpoint; [`EndpointMetrics::register`] adds them
/// to the service's registry (`sluice_rls_deferral_*` on the admin port).
#[derive(Default)]
pub struct EndpointMetrics {
    pub accepted: Counter,
    pub rejected: Family<Vec<(String, String)>, Counter>,
    pub in_flight: Gauge,
    pub cancelled: Counter,
    pub timed_out: Counter,
    /// Requests published again after their consumer lease lapsed.
    pub republished: Counter,
}

impl EndpointMetrics {
    /// Registers every metric under `deferral_` in `registry` (the service's
    /// registry has the `sluice_rls` prefix).
    pub fn register(&self, registry: &mut prometheus_client::registry::Registry) {
        let registry = registry.sub_registry_with_prefix("deferral");
        registry.register(
            "accepted",
            "Deferred requests queued for their tenant × model bucket",
            self.accepted.clone(),
        );
        registry.register(
            "rejected",
            "Deferred requests refused before queuing, by reason (method, not_deferred, bad_marker, missing_marker, too_large, invalid_json, low_priority_backlog, busy, tenant_bucket_limit, bucket_capacity, bucket_rate_limit, publish_failed)",
            self.rejected.clone(),
        );
        registry.register(
            "in_flight",
            "Deferred requests whose client is waiting for the answer now",
            self.in_flight.clone(),
        );
        registry.register(
            "cancelled",
            "Deferred requests whose client went away before the answer ended",
            self.cancelled.clone(),
        );
        registry.register(
            "timed_out",
            "Deferred requests answered with a timeout error",
            self.timed_out.clone(),
        );
        registry.register(
            "republished",
            "Requests published again after their consumer lease lapsed",
            self.republished.clone(),
        );
    }
}

struct EndpointState {
    hub: Arc<StreamHub>,
    publisher: Arc<dyn Publisher>,
    redis: redis::aio::ConnectionManager,
    slots: Arc<Semaphore>,
    options: EndpointOptions,
    metrics: Arc<EndpointMetrics>,
    /// In-process mode: chunks from the consumer in this process.
    local: Option<Arc<LocalBus>>,
}

pub fn router(
    hub: Arc<StreamHub>,
    publisher: Arc<dyn Publisher>,
    redis: redis::aio::ConnectionManager,
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
    redis: redis::aio::ConnectionManager,
    options: EndpointOptions,
    metrics: Arc<EndpointMetrics>,
    local: Option<Arc<LocalBus>>,
) -> Router {
    let state = Arc::new(EndpointState {
        hub,
        publisher,
        redis,
        slots: Arc::new(Semaphore::new(options.max_in_flight.max(1))),
        options,
        metrics,
        local,
    });
    Router::new()
        .route("/v1/sluice/streams/{req_id}", get(resume))
        .fallback(any(accept))
        .with_state(state)
}

async fn recv_local(local: &mut Option<LocalReceiver>) -> Option<String> {
    match local {
        Some(receiver) => receiver.chunks.recv().await,
        None => std::future::pending().await,
    }
}

/// A `processing` claim whose heartbeat (Redis time, refreshed every 5 s by
/// its owner) is older than this belongs to a dead consumer: above the
/// consumer's own 15 s lease, so the two never disagree about a live call.
const STALE_CLAIM_MS: u64 = 20_000;

fn error(status: StatusCode, code: &str, message: &str) -> Response {
    let body = json!({"error": {"message": message, "type": "sluice_deferral", "param": null, "code": code}});
    (
        status,
        [("content-type", "application/json")],
        body.to_string(),
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

/// Request ids and descriptor values as the filter sends them: bounded, plain.
fn valid_marker(value: &str) -> bool {
    value.len() <= 128
        && value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.:/@+~".contains(&b))
}

fn now_millis() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

async fn accept(
    State(state): State<Arc<EndpointState>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let reject = |code: &str| {
        state
            .metrics
            .rejected
            .get_or_create(&vec![("reason".to_string(), code.to_string())])
            .inc();
    };
    if method != Method::POST {
        reject("method");
        return error(
            StatusCode::METHOD_NOT_ALLOWED,
            "method_not_allowed",
            "deferred requests are POSTs",
        );
    }
    if header(&headers, "x-sluice-deferred") != Some("1") {
        reject("not_deferred");
        return error(
            StatusCode::BAD_REQUEST,
            "not_deferred",
            "this endpoint only serves requests Sluice deferred (x-sluice-deferred: 1); check the route that sent it here",
        );
    }
    let mut markers = Vec::new();
    for name in ["x-sluice-request-id", "x-sluice-tenant", "x-sluice-model"] {
        match header(&headers, name) {
            Some(v) if valid_marker(v) => markers.push(v.to_string()),
            Some(_) => {
                reject("bad_marker");
                return error(
                    StatusCode::BAD_REQUEST,
                    "bad_marker",
                    &format!("{name} is malformed"),
                );
            }
            None => {
                reject("missing_marker");
                return error(
                    StatusCode::BAD_REQUEST,
                    "missing_marker",
                    &format!("{name} is missing"),
                );
            }
        }
    }
    let (req_id, tenant, model) = (markers[0].clone(), markers[1].clone(), markers[2].clone());
    let priority = match header(&headers, "x-sluice-priority") {
        Some("low") => Priority::Low,
        Some("high") => Priority::High,
        _ => Priority::Normal,
    };
    let estimated: u64 = header(&headers, "x-sluice-estimated-tokens")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    if body.len() > state.options.max_body_bytes {
        reject("too_large");
        return error(
            StatusCode::PAYLOAD_TOO_LARGE,
            "request_too_large",
            "request body too large",
        );
    }
    let Ok(request) = serde_json::from_slice::<Value>(&body) else {
        reject("invalid_json");
        return error(
            StatusCode::BAD_REQUEST,
            "invalid_request",
            "request body is not valid JSON",
        );
    };
    let stream = request
        .get("stream")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    // The consumer always asks the model for usage; a client that did not
    // gets no usage-only chunk.
    let include_usage = request
        .get("stream_options")
        .and_then(|o| o.get("include_usage"))
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let topic = sluice_litetopic::lite_topic_name(&tenant, &model);
    let mut redis = state.redis.clone();
    if priority == Priority::Low {
        let backlog: Option<u64> = redis::cmd("GET")
            .arg(keys::backlog(&topic))
            .query_async(&mut redis)
            .await
            .unwrap_or(None);
        if backlog.unwrap_or(0) >= state.options.low_priority_max_backlog {
            reject("low_priority_backlog");
            let mut response = error(
                StatusCode::TOO_MANY_REQUESTS,
                "queue_full",
                "this tenant's queue for the model is long; low-priority requests are not queued now",
            );
            response
                .headers_mut()
                .insert("retry-after", HeaderValue::from_static("30"));
            return response;
        }
    }
    let timeout = match priority {
        Priority::Low => state.options.low_priority_timeout,
        Priority::High => state.options.high_priority_timeout,
        Priority::Normal => state.options.timeout,
    };
    let Ok(permit) = state.slots.clone().try_acquire_owned() else {
        reject("busy");
        let mut response = error(
            StatusCode::SERVICE_UNAVAILABLE,
            "deferral_busy",
            "too many requests are waiting on this gateway; retry shortly",
        );
        response
            .headers_mut()
            .insert("retry-after", HeaderValue::from_static("5"));
        return response;
    };

    // Watch the response stream (and in in-process mode register for local
    // chunks) before the work can possibly start.
    let subscription = state.hub.subscribe(&keys::response(&req_id), "0-0").await;
    let local = state.local.as_ref().map(|bus| bus.register(&req_id));
    let work = WorkItem {
        req_id: req_id.clone(),
        tenant: tenant.clone(),
        model: model.clone(),
        priority,
        path: uri.path().to_string(),
        body: request,
        enqueued_at_ms: now_millis(),
        estimated_tokens: estimated,
        attempt: 0,
    }
    .to_json();
    let queue_position = match state
        .publisher
        .publish(&tenant, &model, &req_id, work.clone())
        .await
    {
        Ok(position) => position.filter(|n| *n > 0),
        Err(PublishError::Refused(refusal)) => {
            reject(refusal.code());
            let mut response = error(refusal.status(), refusal.code(), &refusal.message());
            response
                .headers_mut()
                .insert("retry-after", HeaderValue::from(refusal.retry_after_secs()));
            return response;
        }
        Err(PublishError::Failed(why)) => {
            reject("publish_failed");
            tracing::warn!(req_id = %req_id, %why, "cannot queue deferred request");
            let mut response = error(
                StatusCode::SERVICE_UNAVAILABLE,
                "queue_unavailable",
                "the request could not be queued; nothing was sent to the model, retry shortly",
            );
            response
                .headers_mut()
                .insert("retry-after", HeaderValue::from_static("5"));
            return response;
        }
    };
    state.metrics.accepted.inc();
    state.metrics.in_flight.inc();
    tracing::debug!(req_id = %req_id, tenant = %tenant, model = %model, stream, "deferred request queued");
    let waiter = Waiter {
        state: state.clone(),
        republish: Some(Republish {
            tenant: tenant.clone(),
            model: model.clone(),
            work,
            lease_seen: false,
            done: false,
        }),
        timeout,
        req_id: req_id.clone(),
        subscription,
        local,
        local_seq: 0,
        held_back: None,
        finished: false,
        _permit: permit,
    };
    if stream {
        let mut response = sse_response(waiter, true, include_usage, queue_position);
        if let Some(position) = queue_position {
            if let Ok(value) = HeaderValue::from_str(&position.to_string()) {
                response
                    .headers_mut()
                    .insert("x-sluice-queue-position", value);
            }
        }
        response
    } else {
        json_response(waiter).await
    }
}

/// Holds a client's place; cancels the model call if the client goes away.
struct Waiter {
    state: Arc<EndpointState>,
    /// What was published, to publish again if a consumer lost it.
    republish: Option<Republish>,
    /// This client's overall deadline (by priority class).
    timeout: Duration,
    req_id: String,
    subscription: Subscription,
    /// In-process mode: chunks sent by this process's consumer.
    local: Option<LocalReceiver>,
    /// Local chunks delivered so far (their SSE ids).
    local_seq: u64,
    /// A Redis entry that arrived while local chunks were still queued.
    held_back: Option<Entry>,
    finished: bool,
    _permit: tokio::sync::OwnedSemaphorePermit,
}

impl Drop for Waiter {
    fn drop(&mut self) {
        self.state.metrics.in_flight.dec();
        if self.finished {
            return;
        }
        // The client left before the end: tell the consumer to stop the GPU call.
        self.state.metrics.cancelled.inc();
        let mut redis = self.state.redis.clone();
        let key = keys::cancel(&self.req_id);
        let ttl = self.state.options.cancel_ttl.as_secs().max(1);
        tokio::spawn(async move {
            let result: Result<(), _> = redis::cmd("SET")
                .arg(&key)
                .arg(1)
                .arg("EX")
                .arg(ttl)
                .query_async(&mut redis)
                .await;
            if let Err(error) = result {
                tracing::warn!(%key, %error, "cannot record the cancel");
            }
        });
    }
}

struct Republish {
    tenant: String,
    model: String,
    work: Vec<u8>,
    lease_seen: bool,
    done: bool,
}

enum Next {
    CheckLease,
    Entry(Entry),
    KeepAlive,
    TimedOut,
    Closed,
}

impl Waiter {
    async fn next(&mut self, deadline: tokio::time::Instant, keep_alive: Option<Duration>) -> Next {
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
            let watching = self.republish.as_ref().is_some_and(|r| !r.done);
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
            fields: [
                ("type".to_string(), "chunk".to_string()),
                ("data".to_string(), data),
            ]
            .into_iter()
            .collect(),
        }
    }

    /// A request whose consumer lease was seen and has lapsed was lost: with
    /// no claim, between pop and call; with a stale claim, mid-call. Either
    /// way publish it again, once: a live consumer then runs it (no claim) or
    /// answers `interrupted` (stale claim) — never a second model call.
    async fn check_lease(&mut self) {
        let mut redis = self.state.redis.clone();
        let lease: Result<bool, _> = redis::cmd("EXISTS")
            .arg(keys::lease(&self.req_id))
            .query_async(&mut redis)
            .await;
        let Some(republish) = self.republish.as_mut() else {
            return;
        };
        match lease {
            Ok(true) => republish.lease_seen = true,
            Ok(false) if republish.lease_seen => {
                let (processing, done) = (keys::processing(&self.req_id), keys::done(&self.req_id));
                let state: Result<(bool, Option<String>, (u64, u64)), _> = redis::pipe()
                    .exists(&done)
                    .get(&processing)
                    .cmd("TIME")
                    .query_async(&mut redis)
                    .await;
                let Ok((finished, claim, (seconds, micros))) = state else {
                    return;
                };
                if finished {
                    return;
                }
                if let Some(claim) = &claim {
                    // A claim whose owner stopped its heartbeat died mid-call. Publish
                    // again so a live consumer answers `interrupted` (it never calls
                    // the model a second time); a live claim is left alone.
                    let now_ms = seconds * 1000 + micros / 1000;
                    let heartbeat = claim
                        .rsplit(' ')
                        .next()
                        .and_then(|t| t.parse::<u64>().ok())
                        .unwrap_or(0);
                    if now_ms.saturating_sub(heartbeat) < STALE_CLAIM_MS {
                        return;
                    }
                }
                republish.done = true;
                self.state.metrics.republished.inc();
                tracing::warn!(
                    req_id = %self.req_id,
                    call_started = claim.is_some(),
                    "consumer lease lapsed (its consumer died); publishing again"
                );
                let result = self
                    .state
                    .publisher
                    .publish(
                        &republish.tenant,
                        &republish.model,
                        &self.req_id,
                        republish.work.clone(),
                    )
                    .await;
                if let Err(why) = result {
                    tracing::error!(req_id = %self.req_id, %why, "re-publish failed; the client will time out");
                }
            }
            _ => {}
        }
    }
}

fn error_payload(entry: &Entry) -> (StatusCode, Value) {
    let status = entry
        .field("status")
        .and_then(|s| s.parse::<u16>().ok())
        .and_then(|s| StatusCode::from_u16(s).ok())
        .unwrap_or(StatusCode::BAD_GATEWAY);
    let body = json!({"error": {
        "message": entry.field("message").unwrap_or("the model call failed"),
        "type": "sluice_deferral",
        "param": null,
        "code": entry.field("code").unwrap_or("backend_error"),
    }});
    (status, body)
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
) -> Response {
    let options = waiter.state.options.clone();
    let deadline = tokio::time::Instant::now() + waiter.timeout;
    let req_id = waiter.req_id.clone();
    // A comment: OpenAI clients ignore it; people and load balancers see it.
    let first = (announce && options.announce_queued).then(|| match queue_position {
        Some(n) => sse::comment(&format!(
            "queued; position {n} in this tenant × model queue"
        )),
        None => sse::comment("queued"),
    });
    let stream = futures::stream::unfold(
        (Box::new(waiter), first, false),
        move |(mut waiter, pending, done)| {
            let keep_alive = options.keep_alive;
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
                let (text, finished) = match waiter.next(deadline, Some(keep_alive)).await {
                    Next::KeepAlive => (sse::comment("keep-alive"), false),
                    Next::Entry(entry) => match entry.field("type") {
                        Some("chunk") => {
                            let data = entry.field("data").unwrap_or("");
                            if !include_usage && is_usage_only(data) {
                                (String::new(), false)
                            } else {
                                (sse::event(Some(&entry.id), None, data), false)
                            }
                        }
                        Some("done") => (sse::DONE.to_string(), true),
                        Some("error") => {
                            let (_, body) = error_payload(&entry);
                            (
                                sse::event(Some(&entry.id), Some("error"), &body.to_string()),
                                true,
                            )
                        }
                        _ => (String::new(), false),
                    },
                    Next::TimedOut => {
                        waiter.state.metrics.timed_out.inc();
                        let body = json!({"error": {"message": "no answer in time", "type": "sluice_deferral", "param": null, "code": "timeout"}});
                        (sse::event(None, Some("timeout"), &body.to_string()), true)
                    }
                    Next::Closed => (String::new(), true),
                    // Handled inside `next`.
                    Next::CheckLease => (String::new(), false),
                };
                if finished {
                    waiter.finished = true;
                }
                Some((Ok(Bytes::from(text)), (waiter, None, finished)))
            }
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
        headers.insert("x-sluice-request-id", value);
    }
    response
}

async fn json_response(mut waiter: Waiter) -> Response {
    let deadline = tokio::time::Instant::now() + waiter.timeout;
    let mut assembler = sse::Assembler::default();
    loop {
        match waiter.next(deadline, None).await {
            Next::Entry(entry) => match entry.field("type") {
                Some("chunk") => assembler.feed(entry.field("data").unwrap_or("")),
                Some("done") => {
                    waiter.finished = true;
                    let mut response = (
                        StatusCode::OK,
                        [("content-type", "application/json")],
                        assembler.finish().to_string(),
                    )
                        .into_response();
                    if let Ok(value) = HeaderValue::from_str(&waiter.req_id) {
                        response.headers_mut().insert("x-sluice-request-id", value);
                    }
                    return response;
                }
                Some("error") => {
                    waiter.finished = true;
                    let (status, body) = error_payload(&entry);
                    return (
                        status,
                        [("content-type", "application/json")],
                        body.to_string(),
                    )
                        .into_response();
                }
                _ => {}
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

/// `GET /v1/sluice/streams/{req_id}` with `Last-Event-ID`: pick a stream up
/// again after a disconnect, while it still exists.
async fn resume(
    State(state): State<Arc<EndpointState>>,
    Path(req_id): Path<String>,
    headers: HeaderMap,
) -> Response {
    if !valid_marker(&req_id) {
        return error(
            StatusCode::BAD_REQUEST,
            "bad_request_id",
            "malformed request id",
        );
    }
    let from = header(&headers, "last-event-id")
        .unwrap_or("0-0")
        .to_string();
    if from.starts_with("local-") {
        return error(
            StatusCode::CONFLICT,
            "not_resumable",
            "this stream was served in in-process mode; its chunks were not kept and it cannot be resumed",
        );
    }
    if !from.bytes().all(|b| b.is_ascii_digit() || b == b'-') {
        return error(
            StatusCode::BAD_REQUEST,
            "bad_last_event_id",
            "Last-Event-ID must be a stream entry id",
        );
    }
    let mut redis = state.redis.clone();
    let exists: Result<bool, _> = redis::cmd("EXISTS")
        .arg(keys::response(&req_id))
        .query_async(&mut redis)
        .await;
    match exists {
        Ok(true) => {}
        Ok(false) => {
            return error(
                StatusCode::GONE,
                "stream_gone",
                "this response stream has expired or never existed; send the request again",
            )
        }
        Err(e) => {
            tracing::warn!(%e, "cannot check a stream for resume");
            return error(
                StatusCode::SERVICE_UNAVAILABLE,
                "store_unavailable",
                "try again shortly",
            );
        }
    }
    let Ok(permit) = state.slots.clone().try_acquire_owned() else {
        return error(
            StatusCode::SERVICE_UNAVAILABLE,
            "deferral_busy",
            "too many waiting requests",
        );
    };
    let subscription = state.hub.subscribe(&keys::response(&req_id), &from).await;
    state.metrics.in_flight.inc();
    let waiter = Waiter {
        state: state.clone(),
        republish: None,
        timeout: state.options.timeout,
        req_id,
        subscription,
        // Resume reads the Redis Stream only (in-process chunks are not kept).
        local: None,
        local_seq: 0,
        held_back: None,
        finished: false,
        _permit: permit,
    };
    // A resumed stream cannot know what the client asked: usage is sent.
    sse_response(waiter, false, true, None)
}
