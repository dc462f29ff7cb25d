//! The tonic front of the limiter: `envoy.service.ratelimit.v3.RateLimitService`.

use crate::guard::{CallGuard, CallMetadata, Refusal};
use crate::limiter::{Charge, DecisionError, Limiter};
use crate::metrics::ReasonLabels;
use sluice_admission::counter_write::COUNTER_WRITE_AUTH_METADATA;
use sluice_admission::descriptors::{
    ADMITTED_AT_METADATA, ASKED_AT_METADATA, FORCE_CHARGE_METADATA,
};
use sluice_contract::trace::{TRACEPARENT_HEADER, TRACESTATE_HEADER};
use sluice_contract::TraceContext;
use sluice_proto::pb::envoy::service::ratelimit::v3::rate_limit_service_server::{
    RateLimitService, RateLimitServiceServer,
};
use sluice_proto::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use std::sync::{Arc, LazyLock};
use tonic::metadata::{Ascii, MetadataKey, MetadataMap};
use tonic::{Request, Response, Status};
use tracing::Instrument;

pub struct RlsService {
    limiter: Arc<Limiter>,
    guard: CallGuard,
}

impl RlsService {
    /// The service with `guard`'s checks in front of `limiter`.
    pub fn new(limiter: Arc<Limiter>, guard: CallGuard) -> Self {
        RlsService { limiter, guard }
    }

    pub fn into_server(self) -> RateLimitServiceServer<Self> {
        RateLimitServiceServer::new(self)
    }
}

#[tonic::async_trait]
impl RateLimitService for RlsService {
    async fn should_rate_limit(
        &self,
        request: Request<RateLimitRequest>,
    ) -> Result<Response<RateLimitResponse>, Status> {
        let span = sluice_contract::trace_span!(
            "rls.should_rate_limit",
            domain = %request.get_ref().domain
        );
        sluice_contract::join_trace_read(&span, || client_trace(request.metadata()));
        self.decide(request).instrument(span).await
    }
}

/// The metadata a call is read for, parsed once: a look-up by `&str` parses
/// and checks the name on every call.
struct MetadataKeys {
    force_charge: MetadataKey<Ascii>,
    admitted_at: MetadataKey<Ascii>,
    asked_at: MetadataKey<Ascii>,
    counter_write_auth: MetadataKey<Ascii>,
    traceparent: MetadataKey<Ascii>,
    tracestate: MetadataKey<Ascii>,
}

static KEYS: LazyLock<MetadataKeys> = LazyLock::new(|| MetadataKeys {
    force_charge: MetadataKey::from_static(FORCE_CHARGE_METADATA.0),
    admitted_at: MetadataKey::from_static(ADMITTED_AT_METADATA),
    asked_at: MetadataKey::from_static(ASKED_AT_METADATA),
    counter_write_auth: MetadataKey::from_static(COUNTER_WRITE_AUTH_METADATA),
    traceparent: MetadataKey::from_static(TRACEPARENT_HEADER),
    tracestate: MetadataKey::from_static(TRACESTATE_HEADER),
});

/// The client's trace context, when the caller passes it (Sluice's filter
/// copies it into the metadata; Envoy's tracing adds its own span's).
fn client_trace(metadata: &MetadataMap) -> Option<TraceContext> {
    let value = |name: &MetadataKey<Ascii>| metadata.get(name).and_then(|v| v.to_str().ok());
    TraceContext::from_headers(value(&KEYS.traceparent), value(&KEYS.tracestate))
}

impl RlsService {
    /// [`RateLimitService::should_rate_limit`], in its span.
    async fn decide(
        &self,
        request: Request<RateLimitRequest>,
    ) -> Result<Response<RateLimitResponse>, Status> {
        // Sluice's filter reconciles real usage with this marker: the tokens
        // were already spent, so the charge applies even over the limit.
        // The marker's key is the filter's (sluice-admission); so is its value.
        let metadata = request.metadata();
        let charge = Charge::from_marker(metadata.get(&KEYS.force_charge).map(|v| v.as_bytes()));
        // A correction goes to the window its request was admitted in.
        let admitted_at = millis(metadata, &KEYS.admitted_at);
        // The filter's clock when it asked, to tell it when it was charged
        // only when its own instant would name other windows.
        let asked_at = millis(metadata, &KEYS.asked_at);
        let call = CallMetadata {
            forced: charge == Charge::Force,
            admitted_at_ms: admitted_at,
            auth: metadata
                .get(&KEYS.counter_write_auth)
                .and_then(|v| v.to_str().ok()),
        };
        self.guard
            .check(request.get_ref(), &call, now_millis())
            .map_err(|refusal| self.refuse(&request.get_ref().domain, &refusal))?;
        let request = request.into_inner();
        let result = match charge {
            Charge::Force => self.limiter.correct(&request, admitted_at).await,
            Charge::Decide => self.limiter.charge(&request, charge, asked_at).await,
        };
        match result {
            Ok(response) => Ok(Response::new(response)),
            Err(error) => Err(to_status(&request.domain, error)),
        }
    }
}

impl RlsService {
    /// Counts a refused call and answers it: PERMISSION_DENIED for a counter
    /// write without the filter's authority, INVALID_ARGUMENT for a call too large.
    fn refuse(&self, domain: &str, refusal: &Refusal) -> Status {
        let metrics = self.limiter.metrics();
        let labels = ReasonLabels {
            reason: refusal.reason(),
        };
        let message = format!("sluice-rls: {refusal}");
        if refusal.is_unauthorized() {
            metrics.counter_writes_refused.get_or_create(&labels).inc();
            tracing::debug!(domain, %refusal, "refused a counter write");
            Status::permission_denied(message)
        } else {
            metrics.requests_refused.get_or_create(&labels).inc();
            tracing::debug!(%refusal, "refused an oversized RateLimitRequest");
            Status::invalid_argument(message)
        }
    }
}

fn now_millis() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// A Unix-milliseconds value of gRPC metadata; absent or malformed is `None`.
fn millis(metadata: &MetadataMap, key: &MetadataKey<Ascii>) -> Option<u64> {
    metadata.get(key)?.to_str().ok()?.parse().ok()
}

/// Transient store trouble is UNAVAILABLE: Envoy's `failure_mode_deny` then
/// decides whether traffic flows while the store is away.
fn to_status(domain: &str, error: DecisionError) -> Status {
    match error {
        DecisionError::InvalidRequest(message) => {
            tracing::debug!(domain, %message, "rejected malformed RateLimitRequest");
            Status::invalid_argument(message)
        }
        DecisionError::Store(error) if error.is_transient() => {
            tracing::warn!(domain, %error, "counter store unavailable");
            Status::unavailable(error.to_string())
        }
        DecisionError::Store(error) => {
            tracing::error!(domain, %error, "counter store failed");
            Status::internal(error.to_string())
        }
    }
}
