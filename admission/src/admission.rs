//! The per-request state machine.
//!
//! headers ─▶ body (buffered, bounded) ─▶ count tokens ─▶ RLS call ─▶
//!   OK: forward (+ headers) │ OVER_LIMIT: 429 or defer │ RLS error: fail open/closed
//! response ─▶ RateLimit headers ─▶ usage read as it streams ─▶ reconcile at the end.

use crate::config::{FailureMode, FilterConfig, TenantSource, UnknownPaths};
use crate::deferral::{self, DeferralClaims, HeaderClaims, DEFERRAL_TOKEN_HEADER};
use crate::descriptors::{
    admission_request, reconcile_request, sanitize_value, sluice_metadata, Budget,
};
use crate::errors::LocalReply;
use crate::host::{Host, LogLevel, Metric, TenantUsage};
use crate::openai::{self, Endpoint, Estimate, LlmRequest};
use crate::over_limit::{KnownOver, OverLimitMemory, Remembered, Rule};
use crate::stream_usage::{self, UsageStripper};
use crate::TokenCounter;
use prost::Message;
use sluice_openai::usage::{Outcome, UsageTracker, USAGE_BUFFER_LIMIT};
use sluice_proto::rls::{Code, RateLimitResponse};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// Headers Sluice sets upstream. A client sending any header with
/// [`SLUICE_HEADER_PREFIX`] has it removed.
pub const REQUEST_ID_HEADER: &str = "x-sluice-request-id";
pub const TENANT_HEADER: &str = "x-sluice-tenant";
pub const MODEL_HEADER: &str = "x-sluice-model";
pub const PRIORITY_HEADER: &str = "x-sluice-priority";
pub const PROMPT_TOKENS_HEADER: &str = "x-sluice-prompt-tokens";
pub const ESTIMATED_TOKENS_HEADER: &str = "x-sluice-estimated-tokens";
/// Only with `timing_headers: true`.
pub const COUNT_MICROS_HEADER: &str = "x-sluice-count-micros";
/// The client's own `x-request-id`: kept for correlation only, never as
/// Sluice's request id.
pub const CLIENT_REQUEST_ID_HEADER: &str = "x-request-id";
/// A request body in any coding but `identity` is refused (415).
pub const CONTENT_ENCODING_HEADER: &str = "content-encoding";
/// Every request header starting with this (any case) is Sluice's to set.
pub const SLUICE_HEADER_PREFIX: &str = "x-sluice-";

const CONTENT_LENGTH: &str = "content-length";
const RETRY_AFTER: &str = "retry-after";
const CONTENT_TYPE: &str = "content-type";
const EVENT_STREAM: &str = "text/event-stream";

/// Token counters by encoding, built once per VM.
pub trait Encoders {
    /// OpenAI's encoding for a model name, if it knows the model.
    fn openai_encoding(&self, model: &str) -> Option<&'static str>;
    fn counter(&self, encoding: &str) -> Option<&dyn TokenCounter>;
}

/// What the host should do with the current callback.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    Continue,
    Pause,
}

/// Everything shared by the requests of one VM.
pub struct Shared<E> {
    pub config: FilterConfig,
    pub encoders: E,
    /// OVER_LIMIT answers still in force (see [`crate::over_limit`]).
    memory: Mutex<OverLimitMemory>,
    /// When the rate-limit service last answered a call (Unix ms; 0: never).
    last_rls_answer_ms: AtomicU64,
}

impl<E> Shared<E> {
    pub fn new(config: FilterConfig, encoders: E) -> Self {
        Shared {
            config,
            encoders,
            memory: Mutex::new(OverLimitMemory::default()),
            last_rls_answer_ms: AtomicU64::new(0),
        }
    }

    /// The memory of OVER_LIMIT answers (a poisoned lock still holds a
    /// consistent memory: every change to it is one call).
    pub fn memory(&self) -> MutexGuard<'_, OverLimitMemory> {
        self.memory
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The encoding a model's tokens are counted with: the configured
    /// one, else OpenAI's, else the default.
    fn encoding_of(&self, model: &str) -> Option<&str>
    where
        E: Encoders,
    {
        self.config
            .encoding_for(model, self.encoders.openai_encoding(model))
    }

    fn rls_answered(&self, now_ms: u64) {
        self.last_rls_answer_ms.store(now_ms, Ordering::Relaxed);
    }

    /// No call was answered for `rls_down_after_ms`: the service is down,
    /// not merely slow or busy.
    fn rls_seems_down(&self, now_ms: u64) -> bool {
        let last = self.last_rls_answer_ms.load(Ordering::Relaxed);
        last == 0 || now_ms.saturating_sub(last) >= self.config.rls_down_after_ms
    }
}

#[derive(Debug, PartialEq, Eq)]
enum Phase {
    /// Not an inference request: hands off.
    Bypass,
    WaitingForBody,
    WaitingForRls(u32),
    /// Forwarded upstream after admission (or fail-open).
    Forwarded,
    Deferred,
    /// Answered locally.
    Finished,
}

pub struct RequestAdmission<E> {
    shared: Arc<Shared<E>>,
    phase: Phase,
    endpoint: Option<Endpoint>,
    tenant: String,
    model: String,
    /// Sluice's own id for this request (random, see [`deferral::request_id`]).
    request_id: String,
    /// SHA-256 of the body, kept only when this request may be deferred.
    body_sha256: Option<[u8; 32]>,
    estimate: Estimate,
    /// Tokens charged at admission (0 if nothing was charged).
    charged: u64,
    downstream_headers: Vec<(String, String)>,
    usage: Option<UsageTracker>,
    /// The encoding the prompt was counted with (output is counted with it too).
    encoding: Option<String>,
    /// The charge still waits for the answer's end to be corrected.
    owes_correction: bool,
    /// When the charge was made (Unix ms): its correction goes to that window.
    admitted_at_ms: u64,
    /// When the RLS call went out (Unix ms).
    rls_asked_at_ms: u64,
    /// The body with `include_usage` added, waiting for admission (a
    /// deferred request goes on as the client sent it).
    body_with_usage: Option<Vec<u8>>,
    /// The backend was asked for usage the client did not ask for.
    added_stream_usage: bool,
    /// Takes that usage back out of the streamed answer.
    stripper: Option<UsageStripper>,
    /// When the request headers arrived (`Host::now_nanos`): the body deadline counts from here.
    headers_at: u64,
    /// The hits of each descriptor sent to the RLS, in order (requests,
    /// then each token budget): what an OVER_LIMIT answer refused.
    costs: Vec<u64>,
}

impl<E: Encoders> RequestAdmission<E> {
    pub fn new(shared: Arc<Shared<E>>) -> Self {
        RequestAdmission {
            shared,
            phase: Phase::WaitingForBody,
            endpoint: None,
            tenant: String::new(),
            model: String::new(),
            request_id: String::new(),
            body_sha256: None,
            estimate: Estimate::default(),
            charged: 0,
            downstream_headers: Vec::new(),
            usage: None,
            encoding: None,
            owes_correction: false,
            admitted_at_ms: 0,
            rls_asked_at_ms: 0,
            body_with_usage: None,
            added_stream_usage: false,
            stripper: None,
            headers_at: 0,
            costs: Vec::new(),
        }
    }

    fn config(&self) -> &FilterConfig {
        &self.shared.config
    }

    /// Headers for the client's response (`RateLimit-*`, and timing when on);
    /// the filter adds them in `on_response_headers`, ext_authz returns them.
    pub fn downstream_headers(&self) -> &[(String, String)] {
        &self.downstream_headers
    }

    fn reply(&mut self, host: &mut dyn Host, reply: LocalReply) -> Verdict {
        host.send_local_reply(&reply);
        self.phase = Phase::Finished;
        Verdict::Pause
    }

    /// A 401 `authentication_error`: the request carries no usable tenant.
    fn unauthenticated(&mut self, host: &mut dyn Host, message: &str, code: &str) -> Verdict {
        self.reply(
            host,
            LocalReply::error(401, message, "authentication_error", code),
        )
    }

    fn bad_request(&mut self, host: &mut dyn Host, message: &str) -> Verdict {
        host.count(Metric::BadRequest, 1);
        host.log(LogLevel::Debug, &format!("sluice: 400: {message}"));
        self.reply(host, LocalReply::bad_request(message))
    }

    /// A request refused for its body (`invalid_request_error`), counted
    /// under `metric`.
    fn refuse_body(
        &mut self,
        host: &mut dyn Host,
        metric: Metric,
        status: u32,
        message: &str,
        code: &str,
    ) -> Verdict {
        host.count(metric, 1);
        self.reply(
            host,
            LocalReply::error(status, message, "invalid_request_error", code),
        )
    }

    fn too_large(&mut self, host: &mut dyn Host) -> Verdict {
        let message = format!(
            "request body is larger than this gateway accepts ({} bytes)",
            self.config().max_body_bytes
        );
        self.refuse_body(
            host,
            Metric::BodyTooLarge,
            413,
            &message,
            "request_too_large",
        )
    }

    /// Sluice's headers are only ever set by Sluice: a client must not be
    /// able to route itself to the deferral path, fake its token count, or
    /// pass anything `x-sluice-*` to the backend.
    fn strip_client_headers(&self, host: &mut dyn Host) {
        host.remove_request_header(&self.config().deferral.marker_header);
        for name in host.request_header_names() {
            let is_sluice = name
                .get(..SLUICE_HEADER_PREFIX.len())
                .is_some_and(|p| p.eq_ignore_ascii_case(SLUICE_HEADER_PREFIX));
            if is_sluice {
                host.remove_request_header(&name);
            }
        }
    }

    /// A compressed body cannot be counted (and would read as invalid JSON):
    /// 415, saying what to send instead.
    fn encoded_body(&mut self, host: &mut dyn Host, encoding: &str) -> Verdict {
        let message = format!(
            "request bodies with content-encoding '{}' are not accepted: send the JSON uncompressed",
            sanitize_value(encoding)
        );
        self.refuse_body(
            host,
            Metric::BadRequest,
            415,
            &message,
            "unsupported_encoding",
        )
    }

    /// The body did not finish within `body_timeout_ms` of the headers: 408.
    fn body_too_slow(&mut self, host: &mut dyn Host) -> Verdict {
        let message = format!(
            "request body not received within {} ms",
            self.config().body_timeout_ms
        );
        self.refuse_body(host, Metric::BodyTimeout, 408, &message, "request_timeout")
    }

    pub fn on_request_headers(&mut self, host: &mut dyn Host, end_of_stream: bool) -> Verdict {
        self.strip_client_headers(host);
        self.headers_at = host.now_nanos();
        let steps = self.inference_endpoint(host).and_then(|endpoint| {
            self.endpoint = Some(endpoint);
            self.tenant = self.identify_tenant(host)?;
            self.request_id = self.name_request(host)?;
            Ok(())
        });
        if let Err(verdict) = steps {
            return verdict;
        }
        self.check_body_headers(host, end_of_stream)
    }

    /// The OpenAI endpoint a POST asks for; anything else is refused or
    /// passed through untouched, as `unknown_paths` says.
    fn inference_endpoint(&mut self, host: &mut dyn Host) -> Result<Endpoint, Verdict> {
        let path = host.request_header(":path").unwrap_or_default();
        let method = host.request_header(":method").unwrap_or_default();
        let endpoint = Endpoint::from_path(&path).filter(|_| method.eq_ignore_ascii_case("POST"));
        if let Some(endpoint) = endpoint {
            return Ok(endpoint);
        }
        if self.config().unknown_paths == UnknownPaths::Reject {
            let reply = LocalReply::error(
                404,
                &format!("{method} {path} is not an inference endpoint of this gateway"),
                "invalid_request_error",
                "unknown_url",
            );
            return Err(self.reply(host, reply));
        }
        self.phase = Phase::Bypass;
        Err(Verdict::Continue)
    }

    /// The tenant (sanitized) from the configured header or token claim;
    /// 401 when it is not a string, or missing where one is required.
    fn identify_tenant(&mut self, host: &mut dyn Host) -> Result<String, Verdict> {
        let tenant = match &self.config().tenant {
            TenantSource::Header(name) => Ok(host.request_header(name)),
            TenantSource::Property(path) => {
                let path: Vec<&str> = path.iter().map(String::as_str).collect();
                host.property(&path).map(tenant_from_property).transpose()
            }
        };
        let Ok(tenant) = tenant else {
            host.count(Metric::InvalidTenant, 1);
            return Err(self.unauthenticated(
                host,
                "the tenant identity on this request is not a string (an object or a list in the token?)",
                "invalid_tenant",
            ));
        };
        match tenant.filter(|t| !t.is_empty()) {
            Some(t) => Ok(sanitize_value(&t)),
            None if self.config().tenant_required => {
                host.count(Metric::MissingTenant, 1);
                Err(self.unauthenticated(
                    host,
                    "no tenant identity on this request (the gateway's authentication did not set one)",
                    "missing_tenant",
                ))
            }
            None => Ok(sanitize_value(&self.config().anonymous_tenant)),
        }
    }

    /// Sluice names the request itself: a client-chosen id could address
    /// another request's answer.
    fn name_request(&mut self, host: &mut dyn Host) -> Result<String, Verdict> {
        if let Some(random) = host.random_128() {
            return Ok(deferral::request_id(random));
        }
        host.log(
            LogLevel::Error,
            "sluice: the host gave no random bytes for a request id",
        );
        let reply = LocalReply::error(
            503,
            "the gateway cannot admit requests right now",
            "service_unavailable",
            "no_request_id",
        );
        Err(self.reply(host, reply))
    }

    /// Refusals the headers already decide (declared size, an encoded
    /// body, no body); otherwise wait for the body.
    fn check_body_headers(&mut self, host: &mut dyn Host, end_of_stream: bool) -> Verdict {
        let declared = host
            .request_header("content-length")
            .and_then(|v| v.trim().parse::<usize>().ok());
        if declared.is_some_and(|n| n > self.config().max_body_bytes) {
            return self.too_large(host);
        }
        if let Some(encoding) = host
            .request_header(CONTENT_ENCODING_HEADER)
            .filter(|e| !e.trim().eq_ignore_ascii_case("identity"))
        {
            return self.encoded_body(host, &encoding);
        }
        if end_of_stream {
            return self.bad_request(host, "request body is required");
        }
        self.phase = Phase::WaitingForBody;
        Verdict::Pause
    }

    pub fn on_request_body(
        &mut self,
        host: &mut dyn Host,
        body_size: usize,
        end_of_stream: bool,
    ) -> Verdict {
        if self.phase != Phase::WaitingForBody {
            return Verdict::Continue;
        }
        if body_size > self.config().max_body_bytes {
            return self.too_large(host);
        }
        let elapsed_ms = host.now_nanos().saturating_sub(self.headers_at) / 1_000_000;
        if elapsed_ms > self.config().body_timeout_ms {
            // Only seen when more bytes arrive: a body that stalls completely
            // gives no callback, and Envoy's request_timeout ends it.
            return self.body_too_slow(host);
        }
        if !end_of_stream {
            // Envoy buffers until the whole body is in.
            return Verdict::Pause;
        }
        let Some(endpoint) = self.endpoint else {
            return Verdict::Continue;
        };
        let body = host.request_body(body_size).unwrap_or_default();
        if let Some(verdict) = self.refuse_known_over_unparsed(host, endpoint, &body) {
            return verdict;
        }
        let request = match openai::parse(endpoint, &body) {
            Ok(r) => r,
            Err(message) => return self.bad_request(host, &message),
        };
        let model = self.model_of(host, &request.model);
        let shared = self.shared.clone();
        let encoding = shared.encoding_of(&model);
        let Some(counter) = encoding.and_then(|e| shared.encoders.counter(e)) else {
            let message = format!(
                "model '{}' is not known to this gateway's token accounting",
                sanitize_value(&model)
            );
            return self.bad_request(host, &message);
        };
        self.model = sanitize_value(&model);
        self.encoding = encoding.map(str::to_string);
        let output_tokens = shared
            .config
            .output_estimate(&model, request.requested_output);
        let max_prompt = shared.config.max_prompt_for(&model);
        if let Some(verdict) =
            self.refuse_before_counting(host, &request, counter, output_tokens, max_prompt)
        {
            return verdict;
        }
        let counted = self.count_prompt(host, &request, counter);
        self.estimate = Estimate {
            prompt_tokens: counted.tokens,
            output_tokens,
        };
        // A bounded count only says "at most": it refuses nothing by itself.
        if let Some(max) = max_prompt.filter(|&max| counted.exact && counted.tokens > max) {
            return self.prompt_too_long(host, max, counted.tokens, "");
        }
        host.count(Metric::PromptTokens, self.estimate.prompt_tokens);
        self.keep_for_forwarding(endpoint, &request, &body);
        self.costs = self.descriptor_costs(self.estimate.prompt_tokens, output_tokens);
        if let Some(known) = self.known_over(host) {
            self.act_on_known_over(host, known);
            return Verdict::Pause;
        }
        self.ask_rls(host)
    }

    /// The model the request is accounted under: `model_header`'s value
    /// when configured and set, else the body's.
    fn model_of(&self, host: &dyn Host, body_model: &str) -> String {
        self.config()
            .model_header
            .as_ref()
            .and_then(|header| host.request_header(header))
            .filter(|m| !m.is_empty())
            .unwrap_or_else(|| body_model.to_string())
    }

    /// A tenant this VM knows over: decides from a light read of the body
    /// (model, requested output, a lower bound of the prompt; no JSON tree)
    /// whether the memory refuses it, so a flood of large bodies costs a
    /// worker no full parse. `None`: the full path decides (it also gives
    /// a body the light read cannot vouch for its 400).
    fn refuse_known_over_unparsed(
        &mut self,
        host: &mut dyn Host,
        endpoint: Endpoint,
        body: &[u8],
    ) -> Option<Verdict> {
        let now_ms = host.now_nanos() / 1_000_000;
        if !self.shared.memory().knows_tenant(&self.tenant, now_ms) {
            return None;
        }
        let scan = openai::scan(endpoint, body)?;
        let model = self.model_of(host, &scan.model);
        let shared = self.shared.clone();
        let counter = shared
            .encoding_of(&model)
            .and_then(|e| shared.encoders.counter(e))?;
        let at_least = scan.prompt_tokens_at_least(counter.max_token_bytes()?);
        // Longer than the model takes: the full path's 400.
        if shared
            .config
            .max_prompt_for(&model)
            .is_some_and(|max| at_least > max)
        {
            return None;
        }
        let output_tokens = shared.config.output_estimate(&model, scan.requested_output);
        let costs = self.descriptor_costs(at_least, output_tokens);
        let key_model = sanitize_value(&model);
        let known = shared
            .memory()
            .check(&self.tenant, &key_model, &costs, now_ms)?;
        if known.action != Remembered::Reject {
            return None;
        }
        self.model = key_model;
        self.estimate = Estimate {
            prompt_tokens: at_least,
            output_tokens,
        };
        self.costs = costs;
        self.act_on_known_over(host, known);
        Some(Verdict::Pause)
    }

    /// Counts the prompt within the budget (timed when `timing_headers`).
    fn count_prompt(
        &mut self,
        host: &mut dyn Host,
        request: &LlmRequest,
        counter: &dyn crate::TokenCounter,
    ) -> openai::PromptCount {
        let started = host.now_nanos();
        let config = &self.shared.config;
        let counted = request.prompt_count(counter, config.image_tokens, config.count_budget_bytes);
        if config.timing_headers {
            let micros = (host.now_nanos().saturating_sub(started) / 1000).to_string();
            host.set_request_header(COUNT_MICROS_HEADER, &micros);
            self.downstream_headers
                .push((COUNT_MICROS_HEADER.into(), micros));
        }
        if !counted.exact {
            host.count(Metric::CountBounded, 1);
        }
        if counter.is_fallback() {
            host.count(Metric::TokenizerFallback, 1);
        }
        counted
    }

    /// What forwarding may need of the body: its digest for a deferral
    /// token, and the body asking for stream usage.
    fn keep_for_forwarding(&mut self, endpoint: Endpoint, request: &LlmRequest, body: &[u8]) {
        let config = &self.shared.config;
        if config.deferral.active() {
            self.body_sha256 = Some(deferral::body_digest(body));
        }
        let streams_text = matches!(endpoint, Endpoint::ChatCompletions | Endpoint::Completions);
        if config.reconcile
            && config.add_stream_usage
            && streams_text
            && request.stream
            && !request.include_usage
        {
            self.body_with_usage = stream_usage::request_with_usage(body);
        }
    }

    /// Answers a request the cheap lower bound of its prompt already
    /// decides, before any token is counted: longer than the model takes,
    /// or over a limit this VM knows of (when that limit rejects: a
    /// deferral needs the real count).
    fn refuse_before_counting(
        &mut self,
        host: &mut dyn Host,
        request: &LlmRequest,
        counter: &dyn crate::TokenCounter,
        output_tokens: u64,
        max_prompt: Option<u64>,
    ) -> Option<Verdict> {
        let max_token_bytes = counter.max_token_bytes()?;
        let at_least = request.prompt_tokens_at_least(max_token_bytes, self.config().image_tokens);
        if let Some(max) = max_prompt.filter(|&max| at_least > max) {
            return Some(self.prompt_too_long(host, max, at_least, "at least "));
        }
        self.estimate = Estimate {
            prompt_tokens: at_least,
            output_tokens,
        };
        self.costs = self.descriptor_costs(at_least, output_tokens);
        let known = self.known_over(host)?;
        if known.action != Remembered::Reject {
            return None;
        }
        self.act_on_known_over(host, known);
        Some(Verdict::Pause)
    }

    /// 400 in OpenAI's shape for a prompt longer than the model's context.
    fn prompt_too_long(
        &mut self,
        host: &mut dyn Host,
        max: u64,
        tokens: u64,
        qualifier: &str,
    ) -> Verdict {
        let message = format!(
            "This model's maximum context length is {max} tokens. However, your messages resulted in {qualifier}{tokens} tokens. Please reduce the length of the messages."
        );
        self.refuse_body(
            host,
            Metric::PromptTooLong,
            400,
            &message,
            "context_length_exceeded",
        )
    }

    /// The hits of each descriptor the admission call sends (requests
    /// first, then each budget).
    fn descriptor_costs(&self, input: u64, output: u64) -> Vec<u64> {
        std::iter::once(1)
            .chain(self.per_budget(input, output).into_iter().map(|(_, c)| c))
            .collect()
    }

    fn known_over(&self, host: &dyn Host) -> Option<KnownOver> {
        let now_ms = host.now_nanos() / 1_000_000;
        self.shared
            .memory()
            .check(&self.tenant, &self.model, &self.costs, now_ms)
    }

    /// Reject or defer without a call, as the remembered answer did.
    fn act_on_known_over(&mut self, host: &mut dyn Host, known: KnownOver) {
        match known.action {
            Remembered::Defer(priority) if self.config().deferral.active() => {
                host.count(Metric::LocalDeferred, 1);
                self.defer(host, &priority);
            }
            _ => {
                host.count(Metric::LocalRejected, 1);
                let seconds = known.retry_after_ms.div_ceil(1000).max(1).to_string();
                self.downstream_headers
                    .retain(|(k, _)| !k.eq_ignore_ascii_case(RETRY_AFTER));
                self.downstream_headers.push((RETRY_AFTER.into(), seconds));
                self.reject(host, true);
            }
        }
    }

    /// The admission call; its deadline (`rls_timeout_ms`) runs from here,
    /// after counting.
    fn ask_rls(&mut self, host: &mut dyn Host) -> Verdict {
        let shared = self.shared.clone();
        let message = admission_request(
            &shared.config.domain,
            &self.tenant,
            &self.model,
            &self.per_budget(self.estimate.prompt_tokens, self.estimate.output_tokens),
        )
        .encode_to_vec();
        self.rls_asked_at_ms = host.now_nanos() / 1_000_000;
        match host.dispatch_rls(&message, shared.config.rls_timeout_ms, self.rls_asked_at_ms) {
            Ok(token) => {
                self.phase = Phase::WaitingForRls(token);
                Verdict::Pause
            }
            Err(error) => {
                self.rls_failed(
                    host,
                    &format!("cannot call the rate-limit service: {error}"),
                    false,
                );
                // rls_failed either resumed or replied; the body callback itself stays paused.
                Verdict::Pause
            }
        }
    }

    /// The RLS answered (`grpc_status` 0) or failed.
    pub fn on_rls_response(
        &mut self,
        host: &mut dyn Host,
        token: u32,
        grpc_status: u32,
        body: Option<&[u8]>,
    ) {
        if self.phase != Phase::WaitingForRls(token) {
            return;
        }
        let now_ms = host.now_nanos() / 1_000_000;
        if grpc_status != 0 {
            // Envoy reports its own deadline as a failed call (UNAVAILABLE,
            // like a refused connection): the time taken tells them apart.
            let timed_out =
                now_ms.saturating_sub(self.rls_asked_at_ms) + 1 >= self.config().rls_timeout_ms;
            return self.rls_failed(
                host,
                &format!("rate-limit service answered gRPC status {grpc_status}"),
                timed_out,
            );
        }
        let response = match body.map(RateLimitResponse::decode) {
            Some(Ok(response)) => response,
            _ => {
                return self.rls_failed(
                    host,
                    "unreadable answer from the rate-limit service",
                    false,
                )
            }
        };
        self.shared.rls_answered(now_ms);
        for header in &response.response_headers_to_add {
            self.downstream_headers
                .push((header.key.clone(), header.value.clone()));
        }
        let metadata = sluice_namespace(&response);
        let field = |name: &str| {
            metadata
                .and_then(|m| m.fields.get(name))
                .and_then(|v| v.as_str())
        };
        if response.overall_code != Code::OverLimit as i32 {
            self.shared.memory().forget(&self.tenant, &self.model);
            // In quota, but the model's server is saturated with deferred
            // work: into the token-fair queue (charged; see `defer`).
            if field(sluice_metadata::ROUTE) == Some(sluice_metadata::ROUTE_QUEUE)
                && self.config().deferral.active()
            {
                let priority = field(sluice_metadata::PRIORITY).unwrap_or("normal");
                return self.defer(host, priority);
            }
            let charged_at = field(sluice_metadata::CHARGED_AT_MS).and_then(|v| v.parse().ok());
            self.admit(host, charged_at);
            return;
        }
        let action = field(sluice_metadata::ACTION).unwrap_or(sluice_metadata::ACTION_REJECT);
        let priority = field(sluice_metadata::PRIORITY)
            .unwrap_or("normal")
            .to_string();
        let retry_after_ms = field(sluice_metadata::RETRY_AFTER_SECONDS)
            .and_then(|v| v.parse::<u64>().ok())
            .map(|s| s.saturating_mul(1000));
        let defers = action == sluice_metadata::ACTION_DEFER && self.config().deferral.active();
        let remembered = if defers {
            Remembered::Defer(priority.clone())
        } else {
            Remembered::Reject
        };
        self.remember_over(&response, retry_after_ms, remembered, now_ms);
        if defers {
            self.defer(host, &priority);
        } else {
            self.reject(host, metadata.is_some());
        }
    }

    /// Keeps what an OVER_LIMIT answer says about this tenant × model: for
    /// each descriptor over, the least cost that is over and until when
    /// (its reset, else the answer's retry-after, capped by `max_ms`).
    fn remember_over(
        &self,
        response: &RateLimitResponse,
        retry_after_ms: Option<u64>,
        action: Remembered,
        now_ms: u64,
    ) {
        let config = &self.config().over_limit_memory;
        let rules: Vec<Rule> = response
            .statuses
            .iter()
            .enumerate()
            .filter(|(_, status)| status.code == Code::OverLimit as i32)
            .filter_map(|(index, status)| {
                let cost = *self.costs.get(index)?;
                let reset_ms = status
                    .duration_until_reset
                    .as_ref()
                    .map(|d| {
                        u64::try_from(d.seconds).unwrap_or(0).saturating_mul(1000)
                            + u64::try_from(d.nanos).unwrap_or(0) / 1_000_000
                    })
                    .or(retry_after_ms)
                    .filter(|&ms| ms > 0)?;
                let at_least = cost
                    .min(u64::from(status.limit_remaining).saturating_add(1))
                    .max(1);
                Some(Rule {
                    index,
                    at_least,
                    until_ms: now_ms.saturating_add(reset_ms.min(config.max_ms)),
                })
            })
            .collect();
        self.shared
            .memory()
            .remember(config, &self.tenant, &self.model, rules, action, now_ms);
    }

    fn set_accounting_headers(&self, host: &mut dyn Host) {
        host.set_request_header(REQUEST_ID_HEADER, &self.request_id);
        host.set_request_header(
            PROMPT_TOKENS_HEADER,
            &self.estimate.prompt_tokens.to_string(),
        );
        host.set_request_header(ESTIMATED_TOKENS_HEADER, &self.estimate.total().to_string());
    }

    /// `charged_at_ms`: the instant sluice-rls charged the windows at (its
    /// answer says); without it, the moment the filter asked.
    fn admit(&mut self, host: &mut dyn Host, charged_at_ms: Option<u64>) {
        self.set_accounting_headers(host);
        self.add_stream_usage(host);
        self.charged = self.estimate.total();
        self.owes_correction = self.config().reconcile && self.charged > 0;
        self.admitted_at_ms = charged_at_ms.unwrap_or(self.rls_asked_at_ms);
        self.phase = Phase::Forwarded;
        host.count(Metric::Admitted, 1);
        host.resume_request();
    }

    /// Swap in the body that asks for usage (content-length follows).
    fn add_stream_usage(&mut self, host: &mut dyn Host) {
        let Some(body) = self.body_with_usage.take() else {
            return;
        };
        if !host.replace_request_body(&body) {
            return;
        }
        if host.request_header(CONTENT_LENGTH).is_some() {
            host.set_request_header(CONTENT_LENGTH, &body.len().to_string());
        }
        self.added_stream_usage = true;
    }

    fn defer(&mut self, host: &mut dyn Host, priority: &str) {
        // Over quota: nothing was charged (all-or-nothing); the deferral path
        // accounts for it. In quota but routed to the queue (`route: queue`):
        // charged with the estimate, which is not corrected afterwards.
        self.set_accounting_headers(host);
        host.set_request_header(TENANT_HEADER, &self.tenant);
        host.set_request_header(MODEL_HEADER, &self.model);
        let priority = sanitize_value(priority);
        host.set_request_header(PRIORITY_HEADER, &priority);
        let token = self.deferral_token(host, &priority);
        host.set_request_header(DEFERRAL_TOKEN_HEADER, &token);
        let marker = self.config().deferral.marker_header.clone();
        // Changing request headers makes Envoy recompute the route, which now
        // matches the deferral route on the marker.
        host.set_request_header(&marker, "1");
        self.phase = Phase::Deferred;
        host.count(Metric::Deferred, 1);
        host.log(
            LogLevel::Debug,
            &format!(
                "sluice: deferring {} (tenant {}, model {}, {} tokens)",
                self.request_id,
                self.tenant,
                self.model,
                self.estimate.total()
            ),
        );
        host.resume_request();
    }

    /// Signs what the deferral endpoint will act on (see [`crate::deferral`]).
    fn deferral_token(&self, host: &dyn Host, priority: &str) -> String {
        let digest = self
            .body_sha256
            .unwrap_or_else(|| deferral::body_digest(b""));
        let claims = DeferralClaims {
            headers: HeaderClaims {
                request_id: &self.request_id,
                tenant: &self.tenant,
                model: &self.model,
                priority,
                estimated_tokens: self.estimate.total(),
            },
            body_sha256: &digest,
        };
        // `defer` only runs when `deferral.active()`: there is a first secret.
        match self.config().deferral.secrets.first() {
            Some(secret) => claims.sign(secret, host.now_nanos() / 1_000_000),
            None => String::new(),
        }
    }

    fn reject(&mut self, host: &mut dyn Host, has_sluice_metadata: bool) {
        host.count(Metric::Rejected, 1);
        let retry_after = self
            .downstream_headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(RETRY_AFTER))
            .map(|(_, v)| v.clone());
        let message = format!(
            "Rate limit reached for tenant '{}' on model '{}' ({} tokens requested).{}",
            self.tenant,
            self.model,
            self.estimate.total(),
            retry_after
                .as_deref()
                .map(|s| format!(" Please retry after {s} s."))
                .unwrap_or_default()
        );
        let mut reply = LocalReply::error(429, &message, "rate_limit_error", "rate_limit_exceeded");
        reply
            .headers
            .extend(self.downstream_headers.iter().cloned());
        if !has_sluice_metadata {
            host.log(
                LogLevel::Debug,
                "sluice: OVER_LIMIT without Sluice metadata: rejecting",
            );
        }
        host.send_local_reply(&reply);
        self.phase = Phase::Finished;
    }

    /// A call that failed: `failure_mode_on_timeout` decides a timeout,
    /// `failure_mode` a service that is down (no answer for
    /// `rls_down_after_ms`); any other failure is denied, so that no caller
    /// can open the gate by loading the service or the worker.
    fn rls_failed(&mut self, host: &mut dyn Host, why: &str, timed_out: bool) {
        let now_ms = host.now_nanos() / 1_000_000;
        let (mode, setting) = if timed_out {
            (
                self.config().failure_mode_on_timeout,
                "failure_mode_on_timeout",
            )
        } else if self.shared.rls_seems_down(now_ms) {
            (self.config().failure_mode, "failure_mode")
        } else {
            (
                FailureMode::Deny,
                "the service answered other calls recently",
            )
        };
        match mode {
            FailureMode::Allow => {
                host.count(Metric::RlsFailureAllowed, 1);
                host.log(
                    LogLevel::Warn,
                    &format!("sluice: {why}; letting the request through ({setting})"),
                );
                self.set_accounting_headers(host);
                self.phase = Phase::Forwarded;
                host.resume_request();
            }
            FailureMode::Deny => {
                host.count(Metric::RlsFailureDenied, 1);
                host.log(
                    LogLevel::Warn,
                    &format!("sluice: {why}; refusing the request ({setting})"),
                );
                let reply = LocalReply::error(
                    503,
                    "rate limiting is unavailable; try again shortly",
                    "service_unavailable",
                    "rate_limit_unavailable",
                );
                host.send_local_reply(&reply);
                self.phase = Phase::Finished;
            }
        }
    }

    pub fn on_response_headers(&mut self, host: &mut dyn Host) -> Verdict {
        if self.phase != Phase::Forwarded {
            return Verdict::Continue;
        }
        for (name, value) in &self.downstream_headers {
            host.add_response_header(name, value);
        }
        let ok = host
            .response_header(":status")
            .is_some_and(|s| s.starts_with('2'));
        let content_type = host.response_header(CONTENT_TYPE).unwrap_or_default();
        if self.owes_correction && ok {
            self.usage = UsageTracker::for_content_type(&content_type, USAGE_BUFFER_LIMIT);
        }
        let event_stream = content_type
            .get(..EVENT_STREAM.len())
            .is_some_and(|t| t.eq_ignore_ascii_case(EVENT_STREAM));
        if self.added_stream_usage && ok && event_stream {
            // The answer's length changes.
            host.remove_response_header(CONTENT_LENGTH);
            self.stripper = Some(UsageStripper::new(USAGE_BUFFER_LIMIT));
        }
        Verdict::Continue
    }

    pub fn on_response_body(
        &mut self,
        host: &mut dyn Host,
        chunk_size: usize,
        end_of_stream: bool,
    ) -> Verdict {
        if self.usage.is_none() && self.stripper.is_none() {
            if end_of_stream {
                self.settle(host);
            }
            return Verdict::Continue;
        }
        let chunk = if chunk_size > 0 {
            host.response_body_chunk(chunk_size)
        } else {
            None
        };
        if let (Some(tracker), Some(chunk)) = (self.usage.as_mut(), chunk.as_deref()) {
            tracker.feed(chunk);
        }
        if let Some(stripper) = self.stripper.as_mut() {
            let mut out = chunk
                .as_deref()
                .map(|c| stripper.feed(c))
                .unwrap_or_default();
            if end_of_stream {
                out.extend(stripper.finish());
            }
            if chunk.as_deref() != Some(out.as_slice()) && !(chunk.is_none() && out.is_empty()) {
                host.replace_response_body_chunk(chunk_size, &out);
            }
        }
        if end_of_stream {
            self.stripper = None;
            self.settle(host);
        }
        Verdict::Continue
    }

    /// Each configured budget's share of `input` + `output` tokens.
    fn per_budget(&self, input: u64, output: u64) -> Vec<(Budget, u64)> {
        self.config()
            .token_budgets
            .iter()
            .map(|&budget| (budget, budget.of(input, output)))
            .collect()
    }

    /// The stream is over, however it ended (Envoy's `on_log`): a client
    /// that went away or an upstream reset never reach the body's end.
    pub fn on_stream_end(&mut self, host: &mut dyn Host) {
        self.settle(host);
    }

    /// Corrects the admission charge to what the answer used: the usage the
    /// backend reported, else the prompt plus the output that passed through
    /// (an error answer passes none). Runs once.
    fn settle(&mut self, host: &mut dyn Host) {
        if !std::mem::take(&mut self.owes_correction) {
            return;
        }
        let counter = self
            .encoding
            .as_deref()
            .and_then(|e| self.shared.encoders.counter(e));
        let outcome = match self.usage.take() {
            Some(mut tracker) => tracker.outcome(counter.map(|c| move |text: &str| c.count(text))),
            None => Outcome::Counted { output_tokens: 0 },
        };
        let (input, output, used) = match outcome {
            Outcome::Reported(usage) => {
                let uncached = usage.prompt_tokens.saturating_sub(usage.cached_tokens);
                let cached = self
                    .config()
                    .cached_tokens_weight
                    .apply(usage.cached_tokens);
                let used = TenantUsage {
                    prompt: usage.prompt_tokens,
                    completion: usage.completion_tokens,
                    cached: usage.cached_tokens,
                };
                (
                    uncached.saturating_add(cached),
                    usage.completion_tokens,
                    used,
                )
            }
            Outcome::Counted { output_tokens } => {
                host.count(Metric::CountedOutput, 1);
                let used = TenantUsage {
                    prompt: self.estimate.prompt_tokens,
                    completion: output_tokens,
                    cached: 0,
                };
                (self.estimate.prompt_tokens, output_tokens, used)
            }
            Outcome::Unknown => return,
        };
        host.count_tenant_usage(&self.tenant, used);
        let charged = self.per_budget(self.estimate.prompt_tokens, self.estimate.output_tokens);
        let deltas: Vec<(Budget, i64)> = self
            .per_budget(input, output)
            .into_iter()
            .zip(charged)
            .map(|((budget, used), (_, charged))| (budget, used as i64 - charged as i64))
            .collect();
        if let Some(request) =
            reconcile_request(&self.config().domain, &self.tenant, &self.model, &deltas)
        {
            host.count(Metric::Reconciled, 1);
            host.send_reconcile(request.encode_to_vec(), self.admitted_at_ms);
        }
    }
}

/// A tenant from an Envoy property: a string claim, as its bytes. An
/// object or a list (Envoy hands those over serialized, full of control
/// bytes, or as JSON text) is no identity: `Err`.
fn tenant_from_property(bytes: Vec<u8>) -> Result<String, ()> {
    let text = String::from_utf8(bytes).map_err(|_| ())?;
    let structured =
        text.trim_start().starts_with(['{', '[']) || text.chars().any(|c| c.is_control());
    if structured {
        return Err(());
    }
    Ok(text)
}

#[cfg(test)]
#[allow(clippy::indexing_slicing)] // tests fail loudly
mod tests;

/// The `sluice` namespace of an RLS answer's dynamic metadata.
fn sluice_namespace(response: &RateLimitResponse) -> Option<&sluice_proto::rls::Struct> {
    response
        .dynamic_metadata
        .as_ref()
        .and_then(|m| m.fields.get(sluice_metadata::NAMESPACE))
        .and_then(|v| match &v.kind {
            Some(sluice_proto::rls::value::Kind::StructValue(s)) => Some(s),
            _ => None,
        })
}
