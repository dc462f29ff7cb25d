//! ext_authz front door: the same admission as the Wasm filter, for meshes
//! that wire policy through `envoy.filters.http.ext_authz` (or Istio's
//! `AuthorizationPolicy` with `action: CUSTOM`).
//!
//! The request goes through the filter's own state machine
//! (`sluice_admission::admission`) with a [`Host`] made of the `CheckRequest`;
//! its RLS call is answered by the limiter in process, not over gRPC.

use crate::limiter::{DecisionError, Limiter};
use crate::metrics::EventLabels;
use prost::Message;
use sluice_admission::admission::{RequestAdmission, Shared, Verdict};
use sluice_admission::config::FilterConfig;
use sluice_admission::encoders::BpeEncoders;
use sluice_admission::errors::LocalReply;
use sluice_admission::host::{Host, LogLevel, Metric};
use sluice_contract::trace::{TRACEPARENT_HEADER, TRACESTATE_HEADER};
use sluice_contract::TraceContext;
use sluice_proto::pb::envoy::config::core::v3::{HeaderValue, HeaderValueOption};
use sluice_proto::pb::envoy::r#type::v3::HttpStatus;
use sluice_proto::pb::envoy::service::auth::v3::attribute_context::HttpRequest;
use sluice_proto::pb::envoy::service::auth::v3::authorization_server::{
    Authorization, AuthorizationServer,
};
use sluice_proto::pb::envoy::service::auth::v3::check_response::HttpResponse;
use sluice_proto::pb::envoy::service::auth::v3::{
    CheckRequest, CheckResponse, DeniedHttpResponse, OkHttpResponse,
};
use sluice_proto::pb::envoy::service::ratelimit::v3::RateLimitRequest;
use sluice_proto::pb::google::protobuf::{value::Kind, Struct};
use sluice_proto::pb::google::rpc::Status as RpcStatus;
use std::collections::HashMap;
use std::sync::Arc;
use tonic::{Request, Response, Status};
use tracing::Instrument;

/// Header Envoy sets when `with_request_body.allow_partial_message` cut the body.
const PARTIAL_BODY_HEADER: &str = "x-envoy-auth-partial-body";
/// Room for a check's headers and attributes next to its body.
const CHECK_OVERHEAD_BYTES: usize = 1024 * 1024;
/// The single, synchronous "RLS call" of one check.
const LOCAL_CALL: u32 = 1;

pub struct ExtAuthzService {
    limiter: Arc<Limiter>,
    shared: Arc<Shared<BpeEncoders>>,
}

impl ExtAuthzService {
    /// `config` is the same JSON plugin configuration the Wasm filter takes
    /// (its `rls_*` keys are unused: the limiter is in process).
    ///
    /// Counts with the OpenAI encodings only: a config with
    /// `model_tokenizers` needs [`ExtAuthzService::with_encoders`] and
    /// [`BpeEncoders::load`].
    pub fn new(limiter: Arc<Limiter>, config: FilterConfig) -> Self {
        Self::with_encoders(limiter, config, BpeEncoders::new())
    }

    /// With the tokenizers already built (see [`BpeEncoders::load`]).
    pub fn with_encoders(
        limiter: Arc<Limiter>,
        config: FilterConfig,
        encoders: BpeEncoders,
    ) -> Self {
        ExtAuthzService {
            limiter,
            shared: Arc::new(Shared::new(config, encoders)),
        }
    }

    pub fn into_server(self) -> AuthorizationServer<Self> {
        // A check carries the body (up to max_body_bytes) and the headers.
        // Above tonic's default 4 MiB decode limit the check would fail, and
        // Envoy's failure_mode_allow would let the request through uncounted.
        let limit = self.shared.config.max_body_bytes + CHECK_OVERHEAD_BYTES;
        AuthorizationServer::new(self).max_decoding_message_size(limit)
    }

    fn event(&self, event: &'static str) {
        self.limiter
            .metrics()
            .ext_authz_events
            .get_or_create(&EventLabels { event })
            .inc();
    }
}

/// The `CheckRequest` seen as the filter's host.
struct CheckHost<'a> {
    headers: HashMap<String, String>,
    body: &'a [u8],
    metadata: Option<&'a HashMap<String, Struct>>,
    limiter: &'a Limiter,
    upstream_set: Vec<(String, String)>,
    upstream_removed: Vec<String>,
    reply: Option<LocalReply>,
    rls_message: Option<Vec<u8>>,
}

impl Host for CheckHost<'_> {
    fn request_header(&self, name: &str) -> Option<String> {
        self.headers.get(name).cloned()
    }
    fn request_header_names(&self) -> Vec<String> {
        self.headers.keys().cloned().collect()
    }
    fn set_request_header(&mut self, name: &str, value: &str) {
        self.upstream_removed.retain(|n| n != name);
        self.upstream_set.retain(|(n, _)| n != name);
        self.upstream_set
            .push((name.to_string(), value.to_string()));
    }
    fn remove_request_header(&mut self, name: &str) {
        self.upstream_set.retain(|(n, _)| n != name);
        if self.headers.contains_key(name) && !self.upstream_removed.iter().any(|n| n == name) {
            self.upstream_removed.push(name.to_string());
        }
    }
    fn add_response_header(&mut self, _name: &str, _value: &str) {}
    fn response_header(&self, _name: &str) -> Option<String> {
        None
    }
    /// `["metadata", "filter_metadata", <namespace>, <key>...]` from the
    /// check's metadata context (what Envoy's filters put there, e.g. jwt_authn).
    fn property(&self, path: &[&str]) -> Option<Vec<u8>> {
        let (namespace, keys) = match path {
            ["metadata", "filter_metadata", namespace, keys @ ..] if !keys.is_empty() => {
                (*namespace, keys)
            }
            _ => return None,
        };
        let mut current = self.metadata?.get(namespace)?;
        let (last, walk) = keys.split_last()?;
        for key in walk {
            match &current.fields.get(*key)?.kind {
                Some(Kind::StructValue(inner)) => current = inner,
                _ => return None,
            }
        }
        match &current.fields.get(*last)?.kind {
            Some(Kind::StringValue(s)) => Some(s.clone().into_bytes()),
            Some(Kind::NumberValue(n)) => Some(n.to_string().into_bytes()),
            // Not an identity: the admission answers 401 `invalid_tenant`
            // (what the contents were does not matter).
            Some(Kind::StructValue(_)) => Some(b"{}".to_vec()),
            Some(Kind::ListValue(_)) => Some(b"[]".to_vec()),
            _ => None,
        }
    }
    fn request_body(&self, size: usize) -> Option<Vec<u8>> {
        self.body
            .get(..size.min(self.body.len()))
            .map(<[u8]>::to_vec)
    }
    fn response_body_chunk(&self, _size: usize) -> Option<Vec<u8>> {
        None
    }
    fn dispatch_rls(
        &mut self,
        message: &[u8],
        _timeout_ms: u64,
        _asked_at_ms: u64,
    ) -> Result<u32, String> {
        self.rls_message = Some(message.to_vec());
        Ok(LOCAL_CALL)
    }
    fn send_reconcile(&mut self, _message: Vec<u8>, _admitted_at_ms: u64) {}
    fn send_local_reply(&mut self, reply: &LocalReply) {
        self.reply = Some(reply.clone());
    }
    fn resume_request(&mut self) {}
    fn count(&mut self, metric: Metric, by: u64) {
        let metrics = self.limiter.metrics();
        match metric {
            Metric::PromptTokens => {
                metrics.ext_authz_prompt_tokens.inc_by(by);
                return;
            }
            // The in-process limiter has no transport to fail; reconciliation
            // does not happen on this path.
            Metric::RlsFailureAllowed | Metric::RlsFailureDenied | Metric::Reconciled => return,
            _ => {}
        }
        let event = metric.event();
        metrics
            .ext_authz_events
            .get_or_create(&EventLabels { event })
            .inc_by(by);
    }
    fn now_nanos(&self) -> u64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0)
    }
    fn random_128(&mut self) -> Option<[u8; 16]> {
        let mut bytes = [0u8; 16];
        getrandom::fill(&mut bytes).ok().map(|()| bytes)
    }
    fn log(&self, level: LogLevel, message: &str) {
        match level {
            LogLevel::Debug => tracing::debug!("{message}"),
            LogLevel::Info => tracing::info!("{message}"),
            LogLevel::Warn => tracing::warn!("{message}"),
            LogLevel::Error => tracing::error!("{message}"),
        }
    }
}

fn header_options(headers: impl IntoIterator<Item = (String, String)>) -> Vec<HeaderValueOption> {
    headers
        .into_iter()
        .map(|(key, value)| HeaderValueOption {
            header: Some(HeaderValue {
                key,
                value,
                raw_value: Vec::new(),
            }),
            // OVERWRITE_IF_EXISTS_OR_ADD: Sluice's headers replace anything a client sent.
            append_action: 2,
            ..Default::default()
        })
        .collect()
}

fn denied(reply: LocalReply) -> CheckResponse {
    CheckResponse {
        status: Some(RpcStatus {
            code: tonic::Code::PermissionDenied as i32,
            message: format!("sluice: {}", reply.status),
            details: Vec::new(),
        }),
        http_response: Some(HttpResponse::DeniedResponse(DeniedHttpResponse {
            status: Some(HttpStatus {
                code: reply.status as i32,
            }),
            headers: header_options(reply.headers),
            body: reply.body,
        })),
        ..Default::default()
    }
}

impl ExtAuthzService {
    /// The limiter's answer to the rate-limit request admission built,
    /// encoded as the RLS would send it.
    async fn ask_limiter(&self, message: &[u8]) -> Result<Vec<u8>, Status> {
        let rls_request = RateLimitRequest::decode(message)
            .map_err(|e| Status::internal(format!("admission built an unreadable request: {e}")))?;
        match self.limiter.should_rate_limit(&rls_request).await {
            Ok(answer) => Ok(answer.encode_to_vec()),
            Err(DecisionError::Store(error)) if error.is_transient() => {
                // Envoy's failure_mode_allow decides, as for the RLS.
                self.event("limiter_unavailable");
                Err(Status::unavailable(error.to_string()))
            }
            Err(error) => Err(Status::internal(error.to_string())),
        }
    }
}

/// The request as admission reads it: lowercase headers plus `:path` and
/// `:method`, and the body (raw bytes when Envoy sends them).
fn request_view(http: &HttpRequest) -> (HashMap<String, String>, &[u8]) {
    let mut headers: HashMap<String, String> = http
        .headers
        .iter()
        .map(|(k, v)| (k.to_ascii_lowercase(), v.clone()))
        .collect();
    headers.insert(":path".into(), http.path.clone());
    headers.insert(":method".into(), http.method.clone());
    let body: &[u8] = if http.raw_body.is_empty() {
        http.body.as_bytes()
    } else {
        &http.raw_body
    };
    (headers, body)
}

#[tonic::async_trait]
impl Authorization for ExtAuthzService {
    async fn check(
        &self,
        request: Request<CheckRequest>,
    ) -> Result<Response<CheckResponse>, Status> {
        let check = request.into_inner();
        let span = sluice_contract::trace_span!("ext_authz.check");
        sluice_contract::join_trace_read(&span, || client_trace(&check));
        self.check_request(check).instrument(span).await
    }
}

/// The client's trace context, from the request headers Envoy passes.
fn client_trace(check: &CheckRequest) -> Option<TraceContext> {
    let http = check.attributes.as_ref()?.request.as_ref()?.http.as_ref()?;
    let header = |name: &str| http.headers.get(name).map(String::as_str);
    TraceContext::from_headers(header(TRACEPARENT_HEADER), header(TRACESTATE_HEADER))
}

impl ExtAuthzService {
    /// [`Authorization::check`], in its span.
    async fn check_request(&self, check: CheckRequest) -> Result<Response<CheckResponse>, Status> {
        let attributes = check.attributes.as_ref();
        let Some(http) = attributes
            .and_then(|a| a.request.as_ref())
            .and_then(|r| r.http.as_ref())
        else {
            // Not an HTTP request: nothing for Sluice to decide.
            return Ok(Response::new(CheckResponse {
                status: Some(RpcStatus::default()),
                http_response: Some(HttpResponse::OkResponse(OkHttpResponse::default())),
                ..Default::default()
            }));
        };
        let (headers, body) = request_view(http);
        let truncated = headers
            .get(PARTIAL_BODY_HEADER)
            .is_some_and(|v| v.eq_ignore_ascii_case("true"));

        let mut host = CheckHost {
            headers,
            body,
            metadata: attributes
                .and_then(|a| a.metadata_context.as_ref())
                .map(|m| &m.filter_metadata),
            limiter: &self.limiter,
            upstream_set: Vec::new(),
            upstream_removed: Vec::new(),
            reply: None,
            rls_message: None,
        };
        let mut admission = RequestAdmission::new(self.shared.clone());
        let verdict = admission.on_request_headers(&mut host, body.is_empty());
        if verdict == Verdict::Pause && host.reply.is_none() {
            if truncated {
                // Counting a cut body would undercount tokens: refuse clearly.
                self.event("truncated_body");
                return Ok(Response::new(denied(LocalReply::error(
                    413,
                    "request body is larger than the gateway's authorization buffer (ext_authz with_request_body.max_request_bytes)",
                    "invalid_request_error",
                    "request_too_large",
                ))));
            }
            admission.on_request_body(&mut host, body.len(), true);
        }
        if let Some(message) = host.rls_message.take() {
            let answer = self.ask_limiter(&message).await?;
            admission.on_rls_response(&mut host, LOCAL_CALL, 0, Some(&answer));
        }
        if let Some(reply) = host.reply.take() {
            return Ok(Response::new(denied(reply)));
        }
        let ok = OkHttpResponse {
            headers: header_options(host.upstream_set),
            headers_to_remove: host.upstream_removed,
            response_headers_to_add: header_options(admission.downstream_headers().iter().cloned()),
            ..Default::default()
        };
        Ok(Response::new(CheckResponse {
            status: Some(RpcStatus::default()),
            http_response: Some(HttpResponse::OkResponse(ok)),
            ..Default::default()
        }))
    }
}
