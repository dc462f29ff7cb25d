//! The admission state machine driven through its `Host` trait by a test host
//! whose request, RLS answer and response all come from the fuzz input.

use std::sync::{Arc, OnceLock};

use prost::Message;
use sluice_admission::admission::{RequestAdmission, Shared, Verdict, TENANT_HEADER};
use sluice_admission::config::FilterConfig;
use sluice_admission::descriptors::sluice_metadata;
use sluice_admission::encoders::BpeEncoders;
use sluice_admission::testing::{self, FakeHost, RLS_TOKEN};
use sluice_proto::rls::{self, RateLimitResponse};

use crate::{cached, ENDPOINT_PATHS};

/// Splits the input into its parts: tenant, request body, RLS answer,
/// response body (0xFF never occurs in UTF-8 text).
const SEPARATOR: u8 = 0xFF;
const TENANT_SOURCE: &str = "x-tenant-id";
const MODEL_OVERRIDE: &str = "x-model";
/// Past the configurations' body timeout (10 s).
const SLOW_BODY_NANOS: u64 = 11_000_000_000;

/// Deferral on with a secret, an unknown model counted as cl100k, a model header.
const DEFERRING: &str = r#"{"tenant": {"header": "x-tenant-id"}, "model_header": "x-model",
  "default_encoding": "cl100k_base", "max_body_bytes": 65536, "timing_headers": true,
  "deferral": {"secrets": ["fuzz-secret-fuzz-secret-fuzz-secret-0001"]}}"#;
/// Anonymous tenants allowed, fail closed, no deferral, unknown models refused.
const STRICT: &str = r#"{"tenant": {"header": "x-tenant-id"}, "tenant_required": false,
  "failure_mode": "deny", "unknown_paths": "reject", "deferral": {"enabled": false}}"#;

fn shared(strict: bool) -> Option<Arc<Shared<BpeEncoders>>> {
    static DEFERRING_SHARED: OnceLock<Option<Arc<Shared<BpeEncoders>>>> = OnceLock::new();
    static STRICT_SHARED: OnceLock<Option<Arc<Shared<BpeEncoders>>>> = OnceLock::new();
    let (cell, json) = if strict {
        (&STRICT_SHARED, STRICT)
    } else {
        (&DEFERRING_SHARED, DEFERRING)
    };
    cached(cell, || {
        let config = FilterConfig::from_json(json.as_bytes()).ok()?;
        Some(Arc::new(Shared::new(config, BpeEncoders::new())))
    })
    .clone()
}

/// The selector byte's bits.
struct Choices(u8);

impl Choices {
    fn strict(&self) -> bool {
        self.0 & 0x01 != 0
    }
    fn path(&self) -> &'static str {
        ENDPOINT_PATHS[usize::from((self.0 >> 1) & 0x07) % ENDPOINT_PATHS.len()]
    }
    fn raw_rls_answer(&self) -> bool {
        self.0 & 0x10 != 0
    }
    fn rls_fails(&self) -> bool {
        self.0 & 0x20 != 0
    }
    fn sse_response(&self) -> bool {
        self.0 & 0x40 != 0
    }
    fn slow_body(&self) -> bool {
        self.0 & 0x80 != 0
    }
}

/// Runs one request through the state machine: headers, the body in two
/// callbacks, the RLS answer, the response headers and the response body in
/// chunks. Besides not panicking, it must answer the client at most once.
pub fn admission(data: &[u8]) {
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    let choices = Choices(selector);
    let Some(shared) = shared(choices.strict()) else {
        return;
    };
    let mut parts = rest.splitn(4, |b| *b == SEPARATOR);
    let tenant = String::from_utf8_lossy(parts.next().unwrap_or_default()).into_owned();
    let body = parts.next().unwrap_or_default();
    let rls_part = parts.next().unwrap_or_default();
    let response = parts.next().unwrap_or_default();

    let mut host = host_for(&choices, &tenant);
    let mut machine = RequestAdmission::new(shared);
    let headers_verdict = machine.on_request_headers(&mut host, body.is_empty());
    if headers_verdict == Verdict::Pause && !body.is_empty() {
        let half = body.len() / 2;
        host.body = body.get(..half).unwrap_or_default().to_vec();
        machine.on_request_body(&mut host, half, false);
        if choices.slow_body() {
            host.elapsed = SLOW_BODY_NANOS;
        }
        host.body = body.to_vec();
        machine.on_request_body(&mut host, body.len(), true);
    }
    if !host.dispatched.is_empty() {
        let answer = if choices.raw_rls_answer() {
            rls_part.to_vec()
        } else {
            rls_answer(rls_part)
        };
        let grpc_status = if choices.rls_fails() { 14 } else { 0 };
        machine.on_rls_response(&mut host, RLS_TOKEN, grpc_status, Some(&answer));
    }
    host.response_headers.push((":status".into(), "200".into()));
    let content_type = if choices.sse_response() {
        "text/event-stream"
    } else {
        "application/json"
    };
    host.response_headers
        .push(("content-type".into(), content_type.into()));
    machine.on_response_headers(&mut host);
    let chunks: Vec<&[u8]> = response.chunks(97).collect();
    for (index, chunk) in chunks.iter().enumerate() {
        host.response_chunk = chunk.to_vec();
        machine.on_response_body(&mut host, chunk.len(), index + 1 == chunks.len());
    }
    assert!(
        host.replies.len() <= 1,
        "answered the client {} times",
        host.replies.len()
    );
}

/// A well-formed RLS answer whose fields come from the input: the first byte
/// the code, the next the action, the rest the priority text.
fn rls_answer(part: &[u8]) -> Vec<u8> {
    let code = match part.first().copied().unwrap_or(0) % 3 {
        0 => rls::Code::Ok,
        1 => rls::Code::OverLimit,
        _ => rls::Code::Unknown,
    };
    let action = match part.get(1).copied().unwrap_or(0) % 3 {
        0 => sluice_metadata::ACTION_DEFER,
        1 => sluice_metadata::ACTION_REJECT,
        _ => "",
    };
    let priority = String::from_utf8_lossy(part.get(2..).unwrap_or_default()).into_owned();
    let metadata = testing::sluice_metadata(&[
        (sluice_metadata::ACTION, action),
        (sluice_metadata::PRIORITY, &priority),
    ]);
    RateLimitResponse {
        overall_code: code as i32,
        dynamic_metadata: Some(metadata),
        ..Default::default()
    }
    .encode_to_vec()
}

/// The fake Envoy with the request from the input (the body arrives as the
/// driver hands it over).
fn host_for(choices: &Choices, tenant: &str) -> FakeHost {
    let mut host = FakeHost {
        random: Some(1),
        ..FakeHost::default()
    };
    for (name, value) in [
        (":path", choices.path()),
        (":method", "POST"),
        ("content-type", "application/json"),
        (TENANT_SOURCE, tenant),
        // A client trying to set Sluice's own headers: must be stripped.
        (TENANT_HEADER, "spoofed"),
    ] {
        host.request_headers
            .insert(name.to_string(), value.to_string());
    }
    if choices.strict() {
        host.request_headers
            .insert(MODEL_OVERRIDE.into(), tenant.into());
    }
    host
}
