//! HTTP routes, admission (concurrency slots), failure injection and the
//! paced generation of whole and streamed answers.

use crate::call_counts::CallCounts;
use crate::config::{self, OverCapacity, SimConfig};
use crate::gpu::{self, GpuSet, Refusal, SeqSpec, Ticket};
use crate::ledger::Ledger;
use crate::metrics::{Metrics, RequestLabels};
use crate::openai::{self, ApiError, GenerationRequest};
use crate::text;
use axum::body::{Body, Bytes};
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{header, HeaderMap, HeaderName, HeaderValue, Method, StatusCode, Uri};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use serde::Serialize;
use sluice_openai::response::{
    ChatChoice, ChatCompletion, ChatMessage, ChunkChoice, Completion, Delta, EmbeddingData,
    EmbeddingList, EmbeddingUsage, EmbeddingValue, FunctionCall, FunctionDelta, TextChoice,
    TextCompletion, ToolCall, ToolCallDelta,
};
use sluice_openai::{stream, Usage};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, TryAcquireError};
use tokio::time::Instant;

/// Largest request body accepted.
const MAX_BODY_BYTES: usize = 32 * 1024 * 1024;
/// `created` of the listed models.
const MODELS_CREATED: u64 = 1_700_000_000;

type Shared = Arc<App>;

struct App {
    config: SimConfig,
    metrics: Metrics,
    slots: Option<Arc<Semaphore>>,
    /// Index of the next failure draw.
    draws: AtomicU64,
    /// Sequence number of the next response id.
    ids: AtomicU64,
    /// Calls per request id, over the last `max_tracked_request_ids` ids.
    calls: Mutex<CallCounts>,
    /// Calls per W3C trace id (`traceparent`), over as many trace ids.
    traces: Mutex<CallCounts>,
    ledger: Ledger,
    /// The simulated GPUs, when the GPU model is on.
    gpus: Option<GpuSet>,
}

/// The simulator's routes, for embedding in another server or test. With
/// the GPU model on, it starts the GPUs' tasks: call it inside a Tokio runtime.
pub fn router(config: SimConfig) -> Router {
    let max_tracked_request_ids = config.max_tracked_request_ids;
    let ledger = Ledger::new(max_tracked_request_ids);
    let slots =
        (config.max_concurrency > 0).then(|| Arc::new(Semaphore::new(config.max_concurrency)));
    let sim_metrics = Metrics::new();
    let gpus = config.gpu.map(|gpu_config| {
        GpuSet::start(
            &config.models,
            gpu_config,
            Arc::new(sim_metrics.gpu.clone()),
        )
    });
    let app = Arc::new(App {
        config,
        metrics: sim_metrics,
        gpus,
        slots,
        draws: AtomicU64::new(0),
        ids: AtomicU64::new(0),
        calls: Mutex::new(CallCounts::new(max_tracked_request_ids)),
        traces: Mutex::new(CallCounts::new(max_tracked_request_ids)),
        ledger,
    });
    Router::new()
        .route(
            "/v1/chat/completions",
            post(|app, headers, body| generation(app, headers, body, Kind::Chat)),
        )
        .route(
            "/v1/completions",
            post(|app, headers, body| generation(app, headers, body, Kind::Text)),
        )
        .route("/v1/embeddings", post(embeddings))
        .route("/v1/models", get(models))
        .route("/healthz", get(health))
        .route("/health", get(health))
        .route("/metrics", get(metrics))
        .route("/sim/calls", get(calls))
        .route("/sim/stats", get(stats))
        .route("/sim/ledger", get(ledger_totals))
        .route(
            config::ADMIN_CAPACITY_PATH,
            get(capacity).post(change_capacity),
        )
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .layer(middleware::from_fn_with_state(app.clone(), observe))
        .with_state(app)
}

fn endpoint_label(path: &str) -> &'static str {
    match path {
        "/v1/chat/completions" => "chat_completions",
        "/v1/completions" => "completions",
        "/v1/embeddings" => "embeddings",
        "/v1/models" => "models",
        "/healthz" | "/health" => "health",
        "/metrics" => "metrics",
        "/sim/calls" | "/sim/stats" => "sim",
        config::ADMIN_CAPACITY_PATH => "admin",
        _ => "other",
    }
}

/// Counts requests by endpoint and status, counts calls per `x-request-id`
/// to the model endpoints, and echoes `x-request-id` as `x-sim-request-id`.
async fn observe(State(app): State<Shared>, request: Request, next: Next) -> Response {
    let endpoint = endpoint_label(request.uri().path());
    let request_id = request.headers().get("x-request-id").cloned();
    let reaches_model = request.method() == Method::POST
        && matches!(endpoint, "chat_completions" | "completions" | "embeddings");
    if reaches_model {
        if let Some(id) = request_id.as_ref().and_then(|v| v.to_str().ok()) {
            app.count_call(id);
        }
        if let Some(trace_id) = trace_id(request.headers()) {
            if let Ok(mut traces) = app.traces.lock() {
                traces.count(trace_id);
            }
        }
    }
    let mut response = next.run(request).await;
    app.metrics
        .requests
        .get_or_create(&RequestLabels {
            endpoint,
            status: response.status().as_u16(),
        })
        .inc();
    if let Some(id) = request_id {
        response
            .headers_mut()
            .insert(HeaderName::from_static(config::HEADER_ECHO_REQUEST_ID), id);
    }
    response
}

impl App {
    /// A chat to a model with its own tokenizer counts as the model's
    /// server counts it (the template's tokens included).
    fn count_with_model_tokenizer(&self, request: &mut GenerationRequest) {
        if request.messages.is_empty() {
            return;
        }
        let tokenizers = &self.config.tokenizers;
        if let Some(t) = tokenizers.iter().find(|t| t.model == request.model) {
            request.prompt_tokens =
                vec![t.chat_tokens(&request.messages) + request.definition_tokens];
        }
    }

    fn count_call(&self, id: &str) {
        let Ok(mut calls) = self.calls.lock() else {
            return;
        };
        calls.count(id);
        self.metrics
            .tracked_request_ids
            .set(i64::try_from(calls.tracked()).unwrap_or(i64::MAX));
    }

    /// Calls of `id` and its arrival rank ([`CallCounts::arrival_of`]).
    fn calls_of(&self, id: &str) -> (u64, Option<u64>) {
        self.calls
            .lock()
            .map(|calls| (calls.calls_of(id), calls.arrival_of(id)))
            .unwrap_or_default()
    }

    fn next_id(&self, prefix: &str) -> String {
        let n = self.ids.fetch_add(1, Ordering::Relaxed);
        format!(
            "{prefix}-sim{n:08x}{:016x}",
            text::splitmix64(n ^ self.config.seed)
        )
    }

    /// Takes a generation slot, or answers over-capacity.
    async fn admit(self: &Arc<Self>) -> Result<Slot, ApiError> {
        let permit =
            match &self.slots {
                None => None,
                Some(slots) => {
                    match slots.clone().try_acquire_owned() {
                        Ok(permit) => Some(permit),
                        Err(TryAcquireError::NoPermits) => match self.config.over_capacity {
                            OverCapacity::Queue => {
                                self.metrics.queued.inc();
                                let _waiting = QueueGuard::new(self);
                                Some(slots.clone().acquire_owned().await.map_err(|_| {
                                    self.over_capacity(StatusCode::SERVICE_UNAVAILABLE)
                                })?)
                            }
                            OverCapacity::Reject429 => {
                                self.metrics.rejected_over_capacity.inc();
                                return Err(self.over_capacity(StatusCode::TOO_MANY_REQUESTS));
                            }
                            OverCapacity::Reject503 => {
                                self.metrics.rejected_over_capacity.inc();
                                return Err(self.over_capacity(StatusCode::SERVICE_UNAVAILABLE));
                            }
                        },
                        Err(TryAcquireError::Closed) => {
                            return Err(self.over_capacity(StatusCode::SERVICE_UNAVAILABLE))
                        }
                    }
                }
            };
        self.metrics.in_flight.inc();
        Ok(Slot {
            app: self.clone(),
            _permit: permit,
            done: false,
        })
    }

    fn over_capacity(&self, status: StatusCode) -> ApiError {
        let limit = self.config.max_concurrency;
        let mut error = if status == StatusCode::TOO_MANY_REQUESTS {
            ApiError::new(
                status,
                "requests",
                format!(
                    "Rate limit reached: the simulated model is already generating {limit} \
                     request(s) (max_concurrency). Please try again later."
                ),
            )
            .code("rate_limit_exceeded")
        } else {
            ApiError::new(
                status,
                "server_error",
                format!(
                    "The engine is currently overloaded ({limit} request(s) in flight), \
                     please try again later."
                ),
            )
            .code("overloaded")
        };
        error.retry_after = Some(self.config.retry_after_secs);
        error
    }

    /// Draws this request's failure (every admitted request takes the next
    /// two draws, so a header override does not shift later requests).
    fn failure(&self, requested: Option<Fail>) -> Fail {
        let k = self.draws.fetch_add(1, Ordering::Relaxed);
        if let Some(fail) = requested {
            return fail;
        }
        let seed = self.config.seed;
        if text::draw(seed, 2 * k) < self.config.failure_rate {
            Fail::Before
        } else if text::draw(seed, 2 * k + 1) < self.config.mid_stream_failure_rate {
            Fail::Mid
        } else {
            Fail::None
        }
    }

    /// The timing of an answer of `tokens` per choice: queued on the
    /// model's GPU when the GPU model is on, else paced by the config and
    /// the request's headers.
    /// `sizes`: prompt tokens, completion tokens per choice, choices;
    /// `priority`: the request's (vLLM's), for the GPU's scheduler.
    fn timing(
        &self,
        model: &str,
        (prompt_tokens, tokens, choices): (u64, u64, usize),
        priority: i64,
        overrides: &Overrides,
    ) -> Result<Timing, ApiError> {
        let tokens_per_second = overrides
            .tokens_per_second
            .unwrap_or(self.config.tokens_per_second);
        let Some(gpu) = self.gpus.as_ref().and_then(|gpus| gpus.for_model(model)) else {
            return Ok(Timing::Paced(Pace {
                start: Instant::now(),
                first_token: overrides
                    .first_token
                    .unwrap_or(self.config.first_token_latency),
                tokens_per_second,
            }));
        };
        let choices = choices as u64;
        let spec = SeqSpec {
            prompt_tokens,
            completion_tokens: tokens.saturating_mul(choices),
            max_tokens_per_s: tokens_per_second,
            priority,
        };
        match gpu.submit(spec) {
            Ok(ticket) => Ok(Timing::Gpu { ticket, choices }),
            Err(refusal) => Err(self.gpu_refusal(refusal, spec)),
        }
    }

    fn gpu_refusal(&self, refusal: Refusal, spec: SeqSpec) -> ApiError {
        match refusal {
            Refusal::QueueFull => {
                self.metrics.rejected_over_capacity.inc();
                let status = match self.config.over_capacity {
                    OverCapacity::Reject503 => StatusCode::SERVICE_UNAVAILABLE,
                    OverCapacity::Reject429 | OverCapacity::Queue => StatusCode::TOO_MANY_REQUESTS,
                };
                let mut error = ApiError::new(
                    status,
                    "server_error",
                    "The simulated GPU's waiting queue is full (max_waiting). \
                     Please try again later.",
                )
                .code("overloaded");
                error.retry_after = Some(self.config.retry_after_secs);
                error
            }
            Refusal::TooLong {
                context,
                kv_cache_tokens,
            } => ApiError::invalid(format!(
                "This model's maximum context length is {kv_cache_tokens} tokens. However, you \
                 requested {context} tokens ({} in the messages, {} in the completion). Please \
                 reduce the length of the messages or completion.",
                spec.prompt_tokens, spec.completion_tokens
            ))
            .param("messages")
            .code("context_length_exceeded"),
            // vLLM's words (a 400 there too).
            Refusal::PriorityNotEnabled { priority } => ApiError::invalid(format!(
                "Got priority {priority} but Priority scheduling is not enabled."
            ))
            .param("priority"),
        }
    }

    fn injected_500(&self, kind: &'static str) -> ApiError {
        self.metrics.injected(kind);
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "server_error",
            "The server had an error while processing your request. Sorry about that! \
             (failure injected by sluice-llm-sim)",
        )
    }
}

/// One admitted request: holds its concurrency slot and the in-flight gauge;
/// dropped before `finish`, the client went away.
struct Slot {
    app: Shared,
    _permit: Option<OwnedSemaphorePermit>,
    done: bool,
}

impl Slot {
    fn finish(&mut self) {
        self.done = true;
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.app.metrics.in_flight.dec();
        if !self.done {
            self.app.metrics.client_disconnects.inc();
            tracing::debug!("client went away before the answer was complete");
        }
    }
}

struct QueueGuard(Shared);

impl QueueGuard {
    fn new(app: &Shared) -> Self {
        app.metrics.queue_depth.inc();
        Self(app.clone())
    }
}

impl Drop for QueueGuard {
    fn drop(&mut self) {
        self.0.metrics.queue_depth.dec();
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fail {
    None,
    Before,
    Mid,
}

/// Per-request `x-sim-*` headers.
#[derive(Debug, Default, PartialEq)]
struct Overrides {
    completion_tokens: Option<u64>,
    tokens_per_second: Option<f64>,
    first_token: Option<Duration>,
    fail: Option<Fail>,
    /// `x-sim-usage: omit`: answer without usage, as some servers do.
    omit_usage: bool,
}

fn header_str<'a>(headers: &'a HeaderMap, name: &str) -> Result<Option<&'a str>, ApiError> {
    match headers.get(name) {
        None => Ok(None),
        Some(value) => value
            .to_str()
            .map(|v| Some(v.trim()))
            .map_err(|_| bad_header(name, "is not visible ASCII")),
    }
}

fn bad_header(name: &str, problem: &str) -> ApiError {
    ApiError::invalid(format!("Invalid header '{name}': {problem}."))
        .param(name)
        .code("invalid_sim_header")
}

fn overrides(headers: &HeaderMap) -> Result<Overrides, ApiError> {
    let int = |name: &str| -> Result<Option<u64>, ApiError> {
        header_str(headers, name)?
            .map(|v| {
                v.parse::<u64>()
                    .map_err(|_| bad_header(name, "expected a non-negative integer"))
            })
            .transpose()
    };
    let tokens_per_second = header_str(headers, config::HEADER_TOKENS_PER_SECOND)?
        .map(|v| match v.parse::<f64>() {
            Ok(tps) if tps.is_finite() && tps >= 0.0 => Ok(tps),
            _ => Err(bad_header(
                config::HEADER_TOKENS_PER_SECOND,
                "expected a number >= 0",
            )),
        })
        .transpose()?;
    let fail = header_str(headers, config::HEADER_FAIL)?
        .map(|v| match v.to_ascii_lowercase().as_str() {
            "before" => Ok(Fail::Before),
            "mid" => Ok(Fail::Mid),
            "none" => Ok(Fail::None),
            _ => Err(bad_header(
                config::HEADER_FAIL,
                "expected 'before', 'mid' or 'none'",
            )),
        })
        .transpose()?;
    let omit_usage = match header_str(headers, config::HEADER_USAGE)? {
        None => false,
        Some(v) if v.eq_ignore_ascii_case("omit") => true,
        Some(v) if v.eq_ignore_ascii_case("send") => false,
        Some(_) => {
            return Err(bad_header(
                config::HEADER_USAGE,
                "expected 'omit' or 'send'",
            ))
        }
    };
    Ok(Overrides {
        completion_tokens: int(config::HEADER_COMPLETION_TOKENS)?,
        tokens_per_second,
        first_token: int(config::HEADER_FIRST_TOKEN_MS)?.map(Duration::from_millis),
        fail,
        omit_usage,
    })
}

fn body_bytes(body: Result<Bytes, BytesRejection>) -> Result<Bytes, ApiError> {
    body.map_err(|rejection| ApiError::invalid_request(rejection.status(), rejection.body_text()))
}

/// Sleeps until `deadline`, without a trip through the timer when it has passed.
async fn sleep_until(deadline: Instant) {
    if deadline > Instant::now() {
        tokio::time::sleep_until(deadline).await;
    }
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// When each token is due: the first after the first-token latency, the
/// next ones `1 / tokens_per_second` apart (absolute deadlines: no drift).
#[derive(Clone, Copy, Debug)]
struct Pace {
    start: Instant,
    first_token: Duration,
    tokens_per_second: f64,
}

impl Pace {
    fn deadline(&self, step: u64) -> Instant {
        let spacing = if self.tokens_per_second > 0.0 {
            Duration::try_from_secs_f64(step as f64 / self.tokens_per_second)
                .unwrap_or(Duration::MAX)
        } else {
            Duration::ZERO
        };
        let far = Duration::from_secs(100 * 365 * 24 * 3600);
        let offset = self.first_token.saturating_add(spacing).min(far);
        self.start
            .checked_add(offset)
            .or_else(|| self.start.checked_add(Duration::from_secs(24 * 3600)))
            .unwrap_or(self.start)
    }
}

/// When an answer's tokens are ready: on a fixed pace, or when the
/// simulated GPU has generated them.
enum Timing {
    Paced(Pace),
    Gpu {
        ticket: Ticket,
        /// Choices generated in lockstep: step `n` is ready at `(n + 1) × choices` tokens.
        choices: u64,
    },
}

impl Timing {
    /// Waits until token `step` (0-based, of every choice) is ready.
    async fn reach(&mut self, step: u64) {
        match self {
            Timing::Paced(pace) => sleep_until(pace.deadline(step)).await,
            Timing::Gpu { ticket, choices } => {
                ticket
                    .generated(step.saturating_add(1).saturating_mul(*choices))
                    .await
            }
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Chat,
    Text,
}

/// Everything decided about one admitted generation request.
struct Plan {
    kind: Kind,
    id: String,
    created: u64,
    model: String,
    prompt_tokens: u64,
    /// Choices generated in lockstep (one per prompt).
    choices: usize,
    /// Tokens of each choice.
    tokens: u64,
    finish_reason: &'static str,
    /// Usage is sent (a whole answer's `usage`, a stream's usage chunk).
    report_usage: bool,
    include_usage: bool,
    timing: Timing,
    /// The answer is a call of this function (chat with `tools`).
    tool: Option<ToolPlan>,
    /// Break the answer when token `n` is due.
    fail_at: Option<u64>,
    /// Where its tokens are recorded (`x-sim-ledger`).
    ledger_key: Option<String>,
}

/// A tool-call answer: its name is sent whole in the first delta (and
/// counts its tokens), then the arguments one token per delta.
struct ToolPlan {
    call_id: String,
    name: String,
    name_tokens: u64,
    /// The pieces of `arguments`, one token each.
    arguments: Vec<String>,
}

impl ToolPlan {
    /// The tool `request` calls, if it offers any: picked by a hash of the
    /// request and the seed, so the same request calls the same tool.
    fn pick(request: &GenerationRequest, app: &App) -> Option<ToolPlan> {
        let count = request.tool_names.len() as u64;
        let draw = text::splitmix64(request.request_key ^ app.config.seed);
        let name = request.tool_names.get((draw % count.max(1)) as usize)?;
        Some(ToolPlan {
            call_id: format!("call_{:016x}", text::splitmix64(draw)),
            name: name.clone(),
            name_tokens: text::tool_name_tokens(name),
            arguments: Vec::new(),
        })
    }

    /// Sizes the arguments for a call of `tokens` tokens in all.
    fn with_tokens(mut self, tokens: u64) -> Self {
        self.arguments = text::tool_arguments(tokens.saturating_sub(self.name_tokens));
        self
    }

    /// Fewest tokens of a complete call: the name and `{"query":""}`.
    fn min_tokens(&self) -> u64 {
        self.name_tokens + 4
    }
}

impl Plan {
    fn usage(&self, tokens_per_choice: u64) -> Usage {
        Usage::new(self.prompt_tokens, tokens_per_choice * self.choices as u64)
    }
}

/// `POST /v1/chat/completions` and `POST /v1/completions`.
async fn generation(
    State(app): State<Shared>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
    kind: Kind,
) -> Result<Response, ApiError> {
    let body = body_bytes(body)?;
    let mut request: GenerationRequest = match kind {
        Kind::Chat => openai::parse_chat(&body)?,
        Kind::Text => openai::parse_completion(&body)?,
    };
    app.count_with_model_tokenizer(&mut request);
    let overrides = overrides(&headers)?;
    let ledger_key = ledger_key(&headers)?;
    let mut slot = app.admit().await?;
    let prompt_tokens: u64 = request.prompt_tokens.iter().sum();
    app.metrics.prompt_tokens.inc_by(prompt_tokens);
    let fail = app.failure(overrides.fail);
    app.ledger.record(ledger_key.as_deref(), |e| {
        e.requests += 1;
        e.prompt_tokens += prompt_tokens;
        e.broken += u64::from(fail == Fail::Before);
    });
    if fail == Fail::Before {
        slot.finish();
        return Err(app.injected_500("before"));
    }
    let tool = match kind {
        Kind::Chat => ToolPlan::pick(&request, &app),
        Kind::Text => None,
    };
    let wanted = overrides
        .completion_tokens
        .unwrap_or(app.config.default_completion_tokens)
        .max(tool.as_ref().map_or(0, ToolPlan::min_tokens));
    let (tokens, finish_reason) = match request.max_tokens {
        Some(cap) if cap < wanted => (cap, "length"),
        _ if tool.is_some() => (wanted, "tool_calls"),
        _ => (wanted, "stop"),
    };
    let choices = request.prompt_tokens.len().max(1);
    let sizes = (prompt_tokens, tokens, choices);
    let timing = match app.timing(&request.model, sizes, request.priority, &overrides) {
        Ok(timing) => timing,
        Err(error) => {
            slot.finish();
            return Err(error);
        }
    };
    let tool = tool.map(|tool| tool.with_tokens(tokens));
    let plan = Plan {
        kind,
        id: app.next_id(match kind {
            Kind::Chat => "chatcmpl",
            Kind::Text => "cmpl",
        }),
        created: unix_now(),
        model: request.model,
        prompt_tokens,
        choices,
        tokens,
        finish_reason,
        report_usage: !overrides.omit_usage,
        include_usage: request.include_usage && !overrides.omit_usage,
        tool,
        timing,
        fail_at: (fail == Fail::Mid).then_some(tokens / 2),
        ledger_key,
    };
    if request.stream {
        Ok(stream_response(app, plan, slot))
    } else {
        whole_response(app, plan, slot).await
    }
}

/// A non-streamed answer: ready when its last token is due.
async fn whole_response(app: Shared, mut plan: Plan, mut slot: Slot) -> Result<Response, ApiError> {
    if let Some(at) = plan.fail_at {
        plan.timing.reach(at).await;
        app.metrics
            .tokens_generated
            .inc_by(at * plan.choices as u64);
        // Generated, but none of it was sent: the client gets a 500.
        app.ledger
            .record(plan.ledger_key.as_deref(), |e| e.broken += 1);
        slot.finish();
        return Err(app.injected_500("mid"));
    }
    plan.timing.reach(plan.tokens.saturating_sub(1)).await;
    let content = text::completion_text(plan.tokens);
    let arguments = plan.tool.as_ref().map(|tool| tool.arguments.concat());
    let usage = plan.report_usage.then(|| plan.usage(plan.tokens));
    let body = match plan.kind {
        Kind::Chat => serde_json::to_vec(&ChatCompletion {
            id: &plan.id,
            object: "chat.completion",
            created: plan.created,
            model: &plan.model,
            choices: vec![ChatChoice {
                index: 0,
                message: match (&plan.tool, &arguments) {
                    (Some(tool), Some(arguments)) => ChatMessage {
                        role: "assistant",
                        content: None,
                        tool_calls: Some(vec![ToolCall {
                            id: &tool.call_id,
                            kind: "function",
                            function: FunctionCall {
                                name: &tool.name,
                                arguments,
                            },
                        }]),
                        refusal: None,
                    },
                    _ => ChatMessage {
                        role: "assistant",
                        content: Some(&content),
                        tool_calls: None,
                        refusal: None,
                    },
                },
                logprobs: None,
                finish_reason: plan.finish_reason,
            }],
            usage,
        }),
        Kind::Text => serde_json::to_vec(&TextCompletion {
            id: &plan.id,
            object: "text_completion",
            created: plan.created,
            model: &plan.model,
            choices: (0..plan.choices)
                .map(|index| TextChoice {
                    text: &content,
                    index,
                    logprobs: None,
                    finish_reason: Some(plan.finish_reason),
                })
                .collect(),
            usage: usage.map(Some),
        }),
    }
    .map_err(|error| internal(&error))?;
    app.metrics
        .tokens_generated
        .inc_by(plan.tokens * plan.choices as u64);
    app.ledger.record(plan.ledger_key.as_deref(), |e| {
        e.completion_tokens += plan.tokens * plan.choices as u64;
    });
    slot.finish();
    Ok(json_response(body))
}

fn internal(error: &dyn std::fmt::Display) -> ApiError {
    ApiError::new(
        StatusCode::INTERNAL_SERVER_ERROR,
        "server_error",
        format!("internal error: {error}"),
    )
}

fn json_response(body: Vec<u8>) -> Response {
    ([(header::CONTENT_TYPE, "application/json")], body).into_response()
}

/// A streamed answer: Server-Sent Events, each `data: <json>\n\n`, ending
/// with `data: [DONE]\n\n`. The stream is generated as the client reads it:
/// when the client goes away, hyper drops the body and generation stops.
fn stream_response(app: Shared, plan: Plan, slot: Slot) -> Response {
    let stream = EventStream {
        app,
        plan,
        slot,
        phase: Phase::Start,
        step: 0,
        choice: 0,
    };
    let body = Body::from_stream(futures::stream::unfold(stream, |mut stream| async move {
        stream.next_event().await.map(|event| (event, stream))
    }));
    (
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/event-stream"),
            ),
            (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
        ],
        body,
    )
        .into_response()
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Start,
    Tokens,
    Finish(usize),
    Usage,
    Done,
    End,
}

struct EventStream {
    app: Shared,
    plan: Plan,
    slot: Slot,
    phase: Phase,
    /// Next token index.
    step: u64,
    /// Next choice of this step.
    choice: usize,
}

/// A stream dropped before its end: the client (or the proxy) went away.
impl Drop for EventStream {
    fn drop(&mut self) {
        if self.phase != Phase::End {
            self.app
                .ledger
                .record(self.plan.ledger_key.as_deref(), |e| e.broken += 1);
        }
    }
}

fn sse(value: &impl Serialize) -> Result<Bytes, std::io::Error> {
    stream::data_event(value)
        .map(Bytes::from)
        .map_err(std::io::Error::other)
}

impl EventStream {
    async fn next_event(&mut self) -> Option<Result<Bytes, std::io::Error>> {
        loop {
            // `None`: the phase changed without an event; go on.
            let event = match self.phase {
                Phase::Start => self.start_event(),
                Phase::Tokens => self.token_event().await,
                Phase::Finish(choice) => Some(self.finish_event(choice)),
                Phase::Usage => Some(self.usage_event()),
                Phase::Done => {
                    self.phase = Phase::End;
                    self.slot.finish();
                    Some(Ok(Bytes::from_static(stream::DONE_EVENT.as_bytes())))
                }
                Phase::End => return None,
            };
            if event.is_some() {
                return event;
            }
        }
    }

    /// A chat answer opens with the assistant's role.
    fn start_event(&mut self) -> Option<Result<Bytes, std::io::Error>> {
        self.phase = Phase::Tokens;
        if self.plan.kind != Kind::Chat {
            return None;
        }
        let content = self.plan.tool.is_none().then_some("");
        Some(self.chat_chunk(
            Delta {
                role: Some("assistant"),
                content,
                ..Delta::default()
            },
            None,
        ))
    }

    /// The next token (of the next choice), an injected failure, or `None`
    /// once every token is out.
    async fn token_event(&mut self) -> Option<Result<Bytes, std::io::Error>> {
        // `>=`: a tool call's name takes several steps at once.
        if self.choice == 0 && self.plan.fail_at.is_some_and(|at| self.step >= at) {
            return Some(Err(self.fail_mid_stream().await));
        }
        if self.step >= self.plan.tokens {
            self.phase = Phase::Finish(0);
            return None;
        }
        if self.choice == 0 {
            self.plan.timing.reach(self.step).await;
        }
        if self.plan.tool.is_some() {
            return Some(self.tool_call_step());
        }
        let token = text::token_text(self.step);
        let choice = self.choice;
        self.choice += 1;
        if self.choice >= self.plan.choices {
            self.choice = 0;
            self.step += 1;
        }
        self.app.metrics.tokens_generated.inc();
        self.app
            .ledger
            .record(self.plan.ledger_key.as_deref(), |e| {
                e.completion_tokens += 1
            });
        Some(match self.plan.kind {
            Kind::Chat => self.chat_chunk(
                Delta {
                    content: Some(&token),
                    ..Delta::default()
                },
                None,
            ),
            Kind::Text => self.text_chunk(choice, &token, None),
        })
    }

    /// The injected mid-stream failure: an error from the body makes hyper
    /// close the connection without the final chunk, so the client sees a
    /// truncated stream with no [DONE].
    async fn fail_mid_stream(&mut self) -> std::io::Error {
        self.plan.timing.reach(self.step).await;
        // Let hyper flush what was generated so far: it discards buffered
        // output when the body fails.
        tokio::task::yield_now().await;
        self.slot.finish();
        self.app.metrics.injected("mid");
        self.app
            .ledger
            .record(self.plan.ledger_key.as_deref(), |e| e.broken += 1);
        self.phase = Phase::End;
        std::io::Error::other("mid-stream failure injected by sluice-llm-sim")
    }

    /// One choice's finish reason; then the usage chunk or [DONE].
    fn finish_event(&mut self, choice: usize) -> Result<Bytes, std::io::Error> {
        self.phase = if choice + 1 < self.plan.choices {
            Phase::Finish(choice + 1)
        } else if self.plan.include_usage {
            Phase::Usage
        } else {
            Phase::Done
        };
        let reason = Some(self.plan.finish_reason);
        match self.plan.kind {
            Kind::Chat => self.chat_chunk(Delta::default(), reason),
            Kind::Text => self.text_chunk(choice, "", reason),
        }
    }

    /// The final chunk with usage and no choices (`include_usage`).
    fn usage_event(&mut self) -> Result<Bytes, std::io::Error> {
        self.phase = Phase::Done;
        let usage = Some(Some(self.plan.usage(self.plan.tokens)));
        self.streamed::<()>(Vec::new(), usage)
    }

    /// The next delta of a tool call: its name first (all its tokens at
    /// once), then one piece of the arguments per token.
    fn tool_call_step(&mut self) -> Result<Bytes, std::io::Error> {
        let Some(tool) = self.plan.tool.as_ref() else {
            return Err(std::io::Error::other("not a tool call"));
        };
        let first = self.step == 0;
        let (call, tokens) = if first {
            let function = FunctionDelta {
                name: Some(&tool.name),
                arguments: "",
            };
            (function, tool.name_tokens.min(self.plan.tokens))
        } else {
            let piece = usize::try_from(self.step.saturating_sub(tool.name_tokens))
                .ok()
                .and_then(|piece| tool.arguments.get(piece))
                .map_or("", String::as_str);
            let function = FunctionDelta {
                name: None,
                arguments: piece,
            };
            (function, 1)
        };
        let event = self.chat_chunk(
            Delta {
                tool_calls: Some(vec![ToolCallDelta {
                    index: 0,
                    id: first.then_some(tool.call_id.as_str()),
                    kind: first.then_some("function"),
                    function: call,
                }]),
                ..Delta::default()
            },
            None,
        );
        self.count_sent(tokens);
        event
    }

    /// `tokens` more tokens handed to the connection.
    fn count_sent(&mut self, tokens: u64) {
        self.step += tokens;
        self.app.metrics.tokens_generated.inc_by(tokens);
        self.app
            .ledger
            .record(self.plan.ledger_key.as_deref(), |e| {
                e.completion_tokens += tokens
            });
    }

    /// `usage: null` on every chunk but the last when usage was asked for.
    fn usage_placeholder(&self) -> Option<Option<Usage>> {
        self.plan.include_usage.then_some(None)
    }

    /// One streamed object of this answer: a `chat.completion.chunk` or a
    /// `text_completion`, as the request's endpoint.
    fn streamed<C: Serialize>(
        &self,
        choices: Vec<C>,
        usage: Option<Option<Usage>>,
    ) -> Result<Bytes, std::io::Error> {
        sse(&Completion {
            id: &self.plan.id,
            object: match self.plan.kind {
                Kind::Chat => "chat.completion.chunk",
                Kind::Text => "text_completion",
            },
            created: self.plan.created,
            model: &self.plan.model,
            choices,
            usage,
        })
    }

    fn chat_chunk(
        &self,
        delta: Delta<'_>,
        finish_reason: Option<&str>,
    ) -> Result<Bytes, std::io::Error> {
        let choice = ChunkChoice {
            index: 0,
            delta,
            logprobs: None,
            finish_reason,
        };
        self.streamed(vec![choice], self.usage_placeholder())
    }

    fn text_chunk(
        &self,
        index: usize,
        text: &str,
        finish_reason: Option<&str>,
    ) -> Result<Bytes, std::io::Error> {
        let choice = TextChoice {
            text,
            index,
            logprobs: None,
            finish_reason,
        };
        self.streamed(vec![choice], self.usage_placeholder())
    }
}

/// `POST /v1/embeddings`. Embeddings take a slot like generation; of the
/// failures only `before` applies (a `mid` draw or header answers normally).
async fn embeddings(
    State(app): State<Shared>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let body = body_bytes(body)?;
    let request = openai::parse_embedding(&body)?;
    let overrides = overrides(&headers)?;
    let ledger_key = ledger_key(&headers)?;
    let mut slot = app.admit().await?;
    let prompt_tokens: u64 = request.inputs.iter().map(|input| input.tokens).sum();
    app.ledger.record(ledger_key.as_deref(), |e| {
        e.requests += 1;
        e.prompt_tokens += prompt_tokens;
    });
    app.metrics.prompt_tokens.inc_by(prompt_tokens);
    if app.failure(overrides.fail) == Fail::Before {
        slot.finish();
        return Err(app.injected_500("before"));
    }
    let dimensions = request
        .dimensions
        .map_or(app.config.embedding_dimensions, |d| d as usize);
    let data = request
        .inputs
        .iter()
        .enumerate()
        .map(|(index, input)| {
            let vector = text::embedding(input.key, dimensions);
            EmbeddingData {
                object: "embedding",
                index,
                embedding: if request.base64 {
                    EmbeddingValue::Base64(text::embedding_base64(&vector))
                } else {
                    EmbeddingValue::Float(vector)
                },
            }
        })
        .collect();
    let body = serde_json::to_vec(&EmbeddingList {
        object: "list",
        data,
        model: &request.model,
        usage: EmbeddingUsage {
            prompt_tokens,
            total_tokens: prompt_tokens,
        },
    })
    .map_err(|error| internal(&error))?;
    slot.finish();
    Ok(json_response(body))
}

async fn models(State(app): State<Shared>) -> Response {
    #[derive(Serialize)]
    struct Model<'a> {
        id: &'a str,
        object: &'static str,
        created: u64,
        owned_by: &'static str,
    }
    #[derive(Serialize)]
    struct List<'a> {
        object: &'static str,
        data: Vec<Model<'a>>,
    }
    let list = List {
        object: "list",
        data: app
            .config
            .models
            .iter()
            .map(|id| Model {
                id,
                object: "model",
                created: MODELS_CREATED,
                owned_by: "sluice-llm-sim",
            })
            .collect(),
    };
    match serde_json::to_vec(&list) {
        Ok(body) => json_response(body),
        Err(error) => internal(&error).into_response(),
    }
}

async fn health() -> &'static str {
    "ok\n"
}

async fn metrics(State(app): State<Shared>) -> Response {
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        app.metrics.encode(),
    )
        .into_response()
}

/// Decodes `%XX` and `+` of a query-string component.
fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3])
                    .ok()
                    .and_then(|h| u8::from_str_radix(h, 16).ok());
                match hex {
                    Some(byte) => {
                        out.push(byte);
                        i += 2;
                    }
                    None => out.push(b'%'),
                }
            }
            byte => out.push(byte),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn query_param(uri: &Uri, name: &str) -> Option<String> {
    uri.query()?.split('&').find_map(|pair| {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        (percent_decode(key) == name).then(|| percent_decode(value))
    })
}

/// The trace id of a request's `traceparent` (`00-<32 hex>-<16 hex>-<2
/// hex>`, the second field), if it has that shape.
fn trace_id(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get("traceparent")?.to_str().ok()?;
    let mut fields = value.trim().split('-');
    let (_version, trace_id) = (fields.next()?, fields.next()?);
    (trace_id.len() == 32 && trace_id.bytes().all(|b| b.is_ascii_hexdigit())).then_some(trace_id)
}

/// `GET /sim/calls?request_id=ID` → `{"request_id": ID, "calls": n,
/// "arrival": rank}`: how many requests with `x-request-id: ID` reached the
/// model endpoints, and the place of its first among the ids' first
/// arrivals (`null`: never seen or no longer remembered).
///
/// `GET /sim/calls?trace_id=T` → `{"trace_id": T, "calls": n, "arrival":
/// rank}`: the same for the W3C trace id `T` of their `traceparent`
/// (32 lowercase hex digits as sent), over a window of as many trace ids.
async fn calls(State(app): State<Shared>, uri: Uri) -> Response {
    if let Some(trace) = query_param(&uri, "trace_id").filter(|t| !t.is_empty()) {
        let (calls, arrival) = app
            .traces
            .lock()
            .map(|traces| (traces.calls_of(&trace), traces.arrival_of(&trace)))
            .unwrap_or_default();
        return json_response(
            serde_json::json!({"trace_id": trace, "calls": calls, "arrival": arrival})
                .to_string()
                .into_bytes(),
        );
    }
    match query_param(&uri, "request_id") {
        Some(id) if !id.is_empty() => json_response(
            {
                let (calls, arrival) = app.calls_of(&id);
                serde_json::json!({"request_id": id, "calls": calls, "arrival": arrival})
            }
            .to_string()
            .into_bytes(),
        ),
        _ => ApiError::missing("request_id").into_response(),
    }
}

/// `GET /sim/stats`: the counters tests look at, as JSON.
async fn stats(State(app): State<Shared>) -> Response {
    let m = &app.metrics;
    let injected = |kind: &'static str| {
        m.injected_failures
            .get_or_create(&crate::metrics::FailureLabels { kind })
            .get()
    };
    let (tracked, forgotten) = app
        .calls
        .lock()
        .map(|calls| (calls.tracked(), calls.forgotten()))
        .unwrap_or_default();
    json_response(
        serde_json::json!({
            "in_flight": m.in_flight.get(),
            "queue_depth": m.queue_depth.get(),
            "queued": m.queued.get(),
            "rejected_over_capacity": m.rejected_over_capacity.get(),
            "client_disconnects": m.client_disconnects.get(),
            "tokens_generated": m.tokens_generated.get(),
            "prompt_tokens": m.prompt_tokens.get(),
            "injected_failures_before": injected("before"),
            "injected_failures_mid": injected("mid"),
            "tracked_request_ids": tracked,
            "forgotten_request_ids": forgotten,
        })
        .to_string()
        .into_bytes(),
    )
}

/// `GET /sim/ledger`: every ledger key's totals ([`crate::ledger::LedgerEntry`]).
async fn ledger_totals(State(app): State<Shared>) -> Response {
    match serde_json::to_vec(&app.ledger.snapshot()) {
        Ok(body) => json_response(body),
        Err(error) => internal(&error).into_response(),
    }
}

fn ledger_key(headers: &HeaderMap) -> Result<Option<String>, ApiError> {
    Ok(header_str(headers, config::HEADER_LEDGER)?.map(str::to_string))
}

/// `GET /admin/capacity`: each simulated GPU's capacity and load.
async fn capacity(State(app): State<Shared>) -> Response {
    match &app.gpus {
        Some(gpus) => gpu_status_response(&gpus.status()),
        None => gpu_off().into_response(),
    }
}

/// `POST /admin/capacity` with a [`gpu::CapacityChange`]: changes the
/// capacity of one GPU (`model`) or all, answers like `GET`.
async fn change_capacity(
    State(app): State<Shared>,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let Some(gpus) = &app.gpus else {
        return gpu_off().into_response();
    };
    let change = match body_bytes(body).and_then(|body| {
        serde_json::from_slice::<gpu::CapacityChange>(&body)
            .map_err(|error| ApiError::invalid(format!("Invalid capacity change: {error}")))
    }) {
        Ok(change) => change,
        Err(error) => return error.into_response(),
    };
    match gpus.change(&change) {
        Ok(status) => gpu_status_response(&status),
        Err(error @ gpu::ChangeError::UnknownModel(_)) => {
            ApiError::invalid_request(StatusCode::NOT_FOUND, error.to_string())
                .param("model")
                .into_response()
        }
        Err(error) => ApiError::invalid(error.to_string()).into_response(),
    }
}

fn gpu_status_response(status: &[gpu::GpuStatus]) -> Response {
    let report = gpu::CapacityReport {
        gpus: status.to_vec(),
    };
    match serde_json::to_vec(&report) {
        Ok(body) => json_response(body),
        Err(error) => internal(&error).into_response(),
    }
}

fn gpu_off() -> ApiError {
    ApiError::invalid_request(
        StatusCode::CONFLICT,
        "The GPU model is off: start sluice-llm-sim with --gpu-tokens-per-s to change its capacity.",
    )
}

async fn not_found(method: Method, uri: Uri) -> Response {
    let message = format!("Invalid URL ({method} {})", uri.path());
    ApiError::invalid_request(StatusCode::NOT_FOUND, message).into_response()
}

async fn method_not_allowed(method: Method, uri: Uri) -> Response {
    let message = format!("Method {method} is not allowed for {}", uri.path());
    ApiError::invalid_request(StatusCode::METHOD_NOT_ALLOWED, message).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_override_per_request() {
        let mut headers = HeaderMap::new();
        assert_eq!(overrides(&headers).unwrap(), Overrides::default());
        headers.insert("x-sim-completion-tokens", HeaderValue::from_static("12"));
        headers.insert("x-sim-tokens-per-second", HeaderValue::from_static("2.5"));
        headers.insert("x-sim-first-token-ms", HeaderValue::from_static("30"));
        headers.insert("x-sim-fail", HeaderValue::from_static("Mid"));
        assert_eq!(
            overrides(&headers).unwrap(),
            Overrides {
                completion_tokens: Some(12),
                tokens_per_second: Some(2.5),
                first_token: Some(Duration::from_millis(30)),
                fail: Some(Fail::Mid),
                omit_usage: false,
            }
        );
        for (name, bad) in [
            ("x-sim-completion-tokens", "-1"),
            ("x-sim-tokens-per-second", "fast"),
            ("x-sim-tokens-per-second", "-3"),
            ("x-sim-fail", "sometimes"),
            ("x-sim-first-token-ms", "1.5"),
            ("x-sim-usage", "never"),
        ] {
            let mut headers = HeaderMap::new();
            headers.insert(name, HeaderValue::from_static(bad));
            let error = overrides(&headers).unwrap_err();
            assert_eq!(error.param.as_deref(), Some(name));
            assert_eq!(error.status, StatusCode::BAD_REQUEST);
        }
    }

    #[test]
    fn pace_spaces_tokens_after_the_first() {
        let start = Instant::now();
        let pace = Pace {
            start,
            first_token: Duration::from_millis(100),
            tokens_per_second: 10.0,
        };
        assert_eq!(pace.deadline(0), start + Duration::from_millis(100));
        assert_eq!(pace.deadline(5), start + Duration::from_millis(600));
        let unpaced = Pace {
            tokens_per_second: 0.0,
            ..pace
        };
        assert_eq!(
            unpaced.deadline(1_000_000),
            start + Duration::from_millis(100)
        );
        let glacial = Pace {
            tokens_per_second: 1e-300,
            ..pace
        };
        assert!(glacial.deadline(u64::MAX) > start);
    }

    #[test]
    fn query_params_are_decoded() {
        let uri: Uri = "/sim/calls?x=1&request_id=a%2Fb+c&y".parse().unwrap();
        assert_eq!(query_param(&uri, "request_id").as_deref(), Some("a/b c"));
        assert_eq!(query_param(&uri, "y").as_deref(), Some(""));
        assert_eq!(query_param(&uri, "z"), None);
        assert_eq!(percent_decode("100%"), "100%");
        assert_eq!(percent_decode("%zz%41"), "%zzA");
    }

    #[test]
    fn endpoints_have_bounded_labels() {
        assert_eq!(endpoint_label("/v1/chat/completions"), "chat_completions");
        assert_eq!(endpoint_label("/v1/anything/else"), "other");
    }
}
