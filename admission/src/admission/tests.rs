use super::*;
use crate::config::FilterConfig;
use crate::testing::{self, FakeHost};
use sluice_proto::rls::{self, HeaderValue};
use std::sync::OnceLock;

fn o200k(text: &str) -> usize {
    static BPE: OnceLock<tiktoken_rs::CoreBPE> = OnceLock::new();
    BPE.get_or_init(|| tiktoken_rs::o200k_base().unwrap())
        .encode_ordinary(text)
        .len()
}

struct TestEncoders;

impl Encoders for TestEncoders {
    fn openai_encoding(&self, model: &str) -> Option<&'static str> {
        model.starts_with("gpt-4o").then_some("o200k_base")
    }
    fn counter(&self, encoding: &str) -> Option<&dyn TokenCounter> {
        (encoding == "o200k_base").then_some(&o200k as &dyn TokenCounter)
    }
}

const SECRET: &str = "test-secret-test-secret-test-secret-0001";

fn shared(extra: &str) -> Arc<Shared<TestEncoders>> {
    let json = format!(r#"{{"tenant": {{"header": "x-tenant-id"}} {extra}}}"#);
    Arc::new(Shared::new(
        FilterConfig::from_json(json.as_bytes()).unwrap(),
        TestEncoders,
    ))
}

const CHAT: &str = r#"{"model": "gpt-4o", "max_tokens": 100, "messages": [{"role": "user", "content": "Hello there"}]}"#;

fn host_with(body: &str) -> FakeHost {
    let mut host = FakeHost::default();
    for (k, v) in [
        (":path", "/v1/chat/completions"),
        (":method", "POST"),
        ("x-tenant-id", "acme"),
        ("x-request-id", "req-1"),
        ("content-length", &body.len().to_string()),
    ] {
        host.request_headers.insert(k.into(), v.into());
    }
    host.body = body.as_bytes().to_vec();
    host.random = Some(0xab);
    host
}

/// [`through_body`], then the RLS's OK.
fn admitted(
    shared: &Arc<Shared<TestEncoders>>,
    host: &mut FakeHost,
) -> RequestAdmission<TestEncoders> {
    let mut admission = through_body(shared, host);
    admission.on_rls_response(host, 7, 0, Some(&rls_answer(rls::Code::Ok, None, &[])));
    admission
}

/// A request of `body` (default config) admitted, and the upstream's
/// answer to it begun: `status`, `content_type`.
fn answering(
    body: &str,
    status: &str,
    content_type: &str,
) -> (FakeHost, RequestAdmission<TestEncoders>) {
    let mut host = host_with(body);
    let mut admission = admitted(&shared(""), &mut host);
    answer_headers(&mut admission, &mut host, status, content_type);
    (host, admission)
}

/// The upstream answers `status` with a body of `content_type`.
fn answer_headers(
    admission: &mut RequestAdmission<TestEncoders>,
    host: &mut FakeHost,
    status: &str,
    content_type: &str,
) {
    host.response_headers = vec![
        (":status".into(), status.into()),
        ("content-type".into(), content_type.into()),
    ];
    admission.on_response_headers(host);
}

/// Runs headers + body; returns the machine waiting for the RLS.
fn through_body<E: Encoders>(shared: &Arc<Shared<E>>, host: &mut FakeHost) -> RequestAdmission<E> {
    let mut admission = RequestAdmission::new(shared.clone());
    assert_eq!(admission.on_request_headers(host, false), Verdict::Pause);
    let size = host.body.len();
    assert_eq!(
        admission.on_request_body(host, size / 2, false),
        Verdict::Pause
    );
    assert_eq!(admission.on_request_body(host, size, true), Verdict::Pause);
    admission
}

/// A [`CHAT`] request whose JWT `sub` claim (the property
/// `metadata.filter_metadata.jwt.sub`) is `sub`.
fn with_jwt_sub(sub: &[u8]) -> FakeHost {
    let mut host = host_with(CHAT);
    let path = ["metadata", "filter_metadata", "jwt", "sub"];
    host.properties
        .insert(path.iter().map(|s| s.to_string()).collect(), sub.to_vec());
    host
}

/// A [`CHAT`] request through its body ([`through_body`]), with its host.
fn chat_through_body<E: Encoders>(shared: &Arc<Shared<E>>) -> (FakeHost, RequestAdmission<E>) {
    let mut host = host_with(CHAT);
    let admission = through_body(shared, &mut host);
    (host, admission)
}

fn rls_answer(code: rls::Code, action: Option<&str>, headers: &[(&str, &str)]) -> Vec<u8> {
    let metadata = action.map(|a| testing::sluice_metadata(&[("action", a), ("priority", "high")]));
    RateLimitResponse {
        overall_code: code as i32,
        statuses: vec![],
        response_headers_to_add: headers
            .iter()
            .map(|(k, v)| HeaderValue {
                key: k.to_string(),
                value: v.to_string(),
            })
            .collect(),
        request_headers_to_add: vec![],
        dynamic_metadata: metadata,
    }
    .encode_to_vec()
}

#[test]
fn admitted_request_carries_counts_and_rate_limit_headers() {
    let shared = shared("");
    let (mut host, mut admission) = chat_through_body(&shared);
    let call = &host.dispatched[0];
    assert_eq!(call.domain, "sluice");
    let prompt = (3 + o200k("user") + o200k("Hello there") + 3) as u64;
    assert_eq!(call.descriptors[1].hits_addend.unwrap().value, prompt + 100);
    assert_eq!(call.descriptors[0].entries[0].value, "acme");
    assert_eq!(call.descriptors[0].entries[1].value, "gpt-4o");

    let answer = rls_answer(rls::Code::Ok, None, &[("RateLimit-Remaining", "41")]);
    admission.on_rls_response(&mut host, 7, 0, Some(&answer));
    assert_eq!(host.resumed, 1);
    assert_eq!(
        host.request_headers[PROMPT_TOKENS_HEADER],
        prompt.to_string()
    );
    assert_eq!(host.metrics[&Metric::Admitted], 1);

    answer_headers(&mut admission, &mut host, "200", "application/json");
    assert!(host
        .response_headers
        .contains(&("RateLimit-Remaining".into(), "41".into())));

    // The backend used fewer tokens than estimated: refund the difference.
    host.response_chunk = br#"{"usage": {"prompt_tokens": 11, "completion_tokens": 20}}"#.to_vec();
    let n = host.response_chunk.len();
    admission.on_response_body(&mut host, n, true);
    let refund = &host.reconciles[0];
    assert!(refund.descriptors[0].is_negative_hits);
    assert_eq!(
        refund.descriptors[0].hits_addend.unwrap().value,
        prompt + 100 - 31
    );
}

#[test]
fn over_limit_reject_answers_429_with_openai_error() {
    let shared = shared("");
    let (mut host, mut admission) = chat_through_body(&shared);
    let answer = rls_answer(
        rls::Code::OverLimit,
        Some("reject"),
        &[("Retry-After", "42"), ("RateLimit-Limit", "1000")],
    );
    admission.on_rls_response(&mut host, 7, 0, Some(&answer));
    assert_eq!(host.resumed, 0);
    let reply = &host.replies[0];
    assert_eq!(reply.status, 429);
    assert!(reply.headers.contains(&("Retry-After".into(), "42".into())));
    assert!(reply
        .headers
        .contains(&("RateLimit-Limit".into(), "1000".into())));
    let body: serde_json::Value = serde_json::from_str(&reply.body).unwrap();
    assert_eq!(body["error"]["code"], "rate_limit_exceeded");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("retry after 42 s"),
        "{}",
        reply.body
    );
}

#[test]
fn over_limit_defer_marks_and_resumes() {
    let shared = shared(&format!(r#", "deferral": {{"secrets": ["{SECRET}"]}}"#));
    let (mut host, mut admission) = chat_through_body(&shared);
    let answer = rls_answer(rls::Code::OverLimit, Some("defer"), &[]);
    admission.on_rls_response(&mut host, 7, 0, Some(&answer));
    assert_eq!(host.resumed, 1);
    assert!(host.replies.is_empty());
    assert_eq!(host.request_headers["x-sluice-deferred"], "1");
    assert_eq!(host.request_headers[TENANT_HEADER], "acme");
    assert_eq!(host.request_headers[MODEL_HEADER], "gpt-4o");
    assert_eq!(host.request_headers[PRIORITY_HEADER], "high");
    // Sluice's own id, not the client's x-request-id (kept as it was).
    let id = host.request_headers[REQUEST_ID_HEADER].clone();
    assert_eq!(id, "ab".repeat(16));
    assert_eq!(host.request_headers["x-request-id"], "req-1");
    // The token vouches for exactly what the endpoint will act on.
    let token = &host.request_headers[DEFERRAL_TOKEN_HEADER];
    let digest = deferral::body_digest(CHAT.as_bytes());
    let claims = DeferralClaims {
        headers: HeaderClaims {
            request_id: &id,
            tenant: "acme",
            model: "gpt-4o",
            priority: "high",
            estimated_tokens: host.request_headers[ESTIMATED_TOKENS_HEADER]
                .parse()
                .unwrap(),
        },
        body_sha256: &digest,
    };
    let secrets = [crate::deferral::Secret::new(SECRET).unwrap()];
    assert_eq!(
        claims.verify(token, &deferral::Verifier::new(&secrets, 12, 30_000)),
        Ok(())
    );
    let other_tenant = DeferralClaims {
        headers: HeaderClaims {
            tenant: "evil",
            ..claims.headers
        },
        ..claims
    };
    assert!(other_tenant
        .verify(token, &deferral::Verifier::new(&secrets, 12, 30_000))
        .is_err());
    // Nothing charged, so nothing to reconcile.
    admission.on_response_headers(&mut host);
    admission.on_response_body(&mut host, 0, true);
    assert!(host.reconciles.is_empty());

    // With deferral disabled the same answer is a 429.
    let no_deferral = self::shared(r#", "deferral": {"enabled": false}"#);
    let (mut host, mut admission) = chat_through_body(&no_deferral);
    admission.on_rls_response(&mut host, 7, 0, Some(&answer));
    assert_eq!(host.replies[0].status, 429);

    // Without a secret to sign with, nothing is deferred either.
    let unsigned = self::shared("");
    assert!(!unsigned.config.warnings().is_empty());
    let (mut host, mut admission) = chat_through_body(&unsigned);
    admission.on_rls_response(&mut host, 7, 0, Some(&answer));
    assert_eq!(host.replies[0].status, 429);
    assert!(!host.request_headers.contains_key("x-sluice-deferred"));
}

#[test]
fn every_request_gets_its_own_id_whatever_the_client_sends() {
    let shared = shared("");
    let mut ids = Vec::new();
    for random in [1u8, 2] {
        let mut host = host_with(CHAT);
        host.random = Some(random);
        let mut admission = through_body(&shared, &mut host);
        let answer = rls_answer(rls::Code::Ok, None, &[]);
        admission.on_rls_response(&mut host, 7, 0, Some(&answer));
        ids.push(host.request_headers[REQUEST_ID_HEADER].clone());
    }
    assert_ne!(ids[0], ids[1]);
    assert!(ids.iter().all(|id| deferral::is_request_id(id)), "{ids:?}");

    // No randomness: refused, never a guessable id.
    let mut host = host_with(CHAT);
    host.random = None;
    let mut admission = RequestAdmission::new(shared.clone());
    assert_eq!(
        admission.on_request_headers(&mut host, false),
        Verdict::Pause
    );
    assert_eq!(host.replies[0].status, 503);
}

#[test]
fn clients_cannot_mark_themselves() {
    let shared = shared("");
    let mut host = host_with(CHAT);
    host.request_headers
        .insert("x-sluice-deferred".into(), "1".into());
    host.request_headers
        .insert(PROMPT_TOKENS_HEADER.into(), "1".into());
    host.request_headers
        .insert(DEFERRAL_TOKEN_HEADER.into(), "v1.1.00".into());
    let _ = through_body(&shared, &mut host);
    assert!(!host.request_headers.contains_key("x-sluice-deferred"));
    assert!(!host.request_headers.contains_key(PROMPT_TOKENS_HEADER));
    assert!(!host.request_headers.contains_key(DEFERRAL_TOKEN_HEADER));
}

#[test]
fn rls_failure_follows_failure_mode() {
    for (mode, status) in [("allow", None), ("deny", Some(503))] {
        let shared = shared(&format!(r#", "failure_mode": "{mode}""#));
        let (mut host, mut admission) = chat_through_body(&shared);
        admission.on_rls_response(&mut host, 7, 14, None);
        assert_eq!(host.replies.first().map(|r| r.status), status, "{mode}");
        assert_eq!(host.resumed, u32::from(status.is_none()), "{mode}");
        // Garbage from the RLS is a failure too.
        let (mut host, mut admission) = chat_through_body(&shared);
        admission.on_rls_response(&mut host, 7, 0, Some(b"\xff\xff\xff"));
        assert_eq!(host.replies.first().map(|r| r.status), status, "{mode}");
        // As is a dispatch that cannot even start.
        let mut host = host_with(CHAT);
        host.dispatch_fails = true;
        let _ = through_body(&shared, &mut host);
        assert_eq!(host.replies.first().map(|r| r.status), status, "{mode}");
    }
    // A stale token (another call) is ignored.
    let shared = shared("");
    let (mut host, mut admission) = chat_through_body(&shared);
    admission.on_rls_response(&mut host, 99, 0, None);
    assert_eq!(host.resumed, 0);
}

#[test]
fn bad_input_gets_clear_answers() {
    let shared = shared(r#", "max_body_bytes": 2048"#);
    let cases: [(&str, u32, &str); 5] = [
        ("{oops", 400, "not valid JSON"),
        (r#"{"messages": []}"#, 400, "'model'"),
        (
            r#"{"model": "llama-unknown", "messages": []}"#,
            400,
            "not known",
        ),
        (
            r#"{"model": "gpt-4o", "messages": "nope"}"#,
            400,
            "'messages'",
        ),
        ("", 400, "not valid JSON"),
    ];
    for (body, status, text) in cases {
        let mut host = host_with(body);
        let _ = through_body(&shared, &mut host);
        let reply = &host.replies[0];
        assert_eq!(reply.status, status, "{body}");
        assert!(reply.body.contains(text), "{body}: {}", reply.body);
        assert!(host.dispatched.is_empty());
    }
    // Declared too large: 413 at the headers.
    let big = format!(
        r#"{{"model": "gpt-4o", "messages": [{{"role": "user", "content": "{}"}}]}}"#,
        "x".repeat(5000)
    );
    let mut host = host_with(&big);
    let mut admission = RequestAdmission::new(shared.clone());
    admission.on_request_headers(&mut host, false);
    assert_eq!(host.replies[0].status, 413);
    // Streamed without content-length: 413 once the buffer passes the cap.
    let mut host = host_with(&big);
    host.request_headers.remove("content-length");
    let mut admission = RequestAdmission::new(shared.clone());
    assert_eq!(
        admission.on_request_headers(&mut host, false),
        Verdict::Pause
    );
    admission.on_request_body(&mut host, 5000, false);
    assert_eq!(host.replies[0].status, 413);
    assert_eq!(host.metrics[&Metric::BodyTooLarge], 1);
}

#[test]
fn tenant_sources_and_missing_tenant() {
    let shared = shared("");
    let mut host = host_with(CHAT);
    host.request_headers.remove("x-tenant-id");
    let mut admission = RequestAdmission::new(shared);
    admission.on_request_headers(&mut host, false);
    assert_eq!(host.replies[0].status, 401);

    let json = r#"{"tenant": {"property": ["metadata", "filter_metadata", "jwt", "sub"]}, "tenant_required": false}"#;
    let shared = Arc::new(Shared::new(
        FilterConfig::from_json(json.as_bytes()).unwrap(),
        TestEncoders,
    ));
    let mut host = host_with(CHAT);
    let _ = through_body(&shared, &mut host);
    assert_eq!(
        host.dispatched[0].descriptors[0].entries[0].value,
        "anonymous"
    );
    let mut host = with_jwt_sub(b"tenant:evil/../x");
    let _ = through_body(&shared, &mut host);
    let tenant = &host.dispatched[0].descriptors[0].entries[0].value;
    assert_eq!(tenant, "tenant:evil/../x");
    // Control characters are no identity (Envoy serializes an object or a
    // list claim into bytes full of them): 401, never a garbled tenant.
    let mut host = with_jwt_sub(b"tenant\x00evil");
    let mut admission = RequestAdmission::new(shared);
    admission.on_request_headers(&mut host, false);
    assert_eq!(host.replies[0].status, 401);
    assert!(host.replies[0].body.contains("invalid_tenant"));
}

#[test]
fn unknown_paths_pass_or_404() {
    let mut host = host_with(CHAT);
    host.request_headers
        .insert(":path".into(), "/v1/models".into());
    let mut admission = RequestAdmission::new(shared(""));
    assert_eq!(
        admission.on_request_headers(&mut host, true),
        Verdict::Continue
    );
    assert!(host.replies.is_empty());
    let mut admission = RequestAdmission::new(shared(r#", "unknown_paths": "reject""#));
    admission.on_request_headers(&mut host, true);
    assert_eq!(host.replies[0].status, 404);
    // GET on an inference path is not an inference call either.
    let mut host = host_with(CHAT);
    host.request_headers.insert(":method".into(), "GET".into());
    let mut admission = RequestAdmission::new(shared(""));
    assert_eq!(
        admission.on_request_headers(&mut host, true),
        Verdict::Continue
    );
}

#[test]
fn encoded_bodies_get_415_before_the_body() {
    for encoding in ["gzip", "br, gzip", "Deflate"] {
        let mut host = host_with(CHAT);
        host.request_headers
            .insert(CONTENT_ENCODING_HEADER.into(), encoding.into());
        let mut admission = RequestAdmission::new(shared(""));
        assert_eq!(
            admission.on_request_headers(&mut host, false),
            Verdict::Pause
        );
        assert_eq!(host.replies.len(), 1, "{encoding}");
        assert_eq!(host.replies[0].status, 415, "{encoding}");
        assert!(host.replies[0].body.contains("unsupported_encoding"));
        assert!(host.dispatched.is_empty());
    }
    // `identity` is no coding at all.
    let mut host = host_with(CHAT);
    host.request_headers
        .insert(CONTENT_ENCODING_HEADER.into(), "identity".into());
    let _ = through_body(&shared(""), &mut host);
    assert_eq!(host.dispatched.len(), 1);
}

#[test]
fn timing_headers_only_when_asked() {
    let mut host = host_with(CHAT);
    let _ = through_body(&shared(""), &mut host);
    assert!(!host.request_headers.contains_key(COUNT_MICROS_HEADER));
    let mut host = host_with(CHAT);
    let _ = through_body(&shared(r#", "timing_headers": true"#), &mut host);
    assert_eq!(host.request_headers[COUNT_MICROS_HEADER], "0");
}

#[test]
fn model_header_overrides_body() {
    let shared =
        shared(r#", "model_header": "x-model", "model_encodings": {"llama*": "o200k_base"}"#);
    let mut host = host_with(CHAT);
    host.request_headers
        .insert("x-model".into(), "llama-3-70b".into());
    let _ = through_body(&shared, &mut host);
    assert_eq!(
        host.dispatched[0].descriptors[0].entries[1].value,
        "llama-3-70b"
    );
}

#[test]
fn streamed_usage_charges_the_difference() {
    let (mut host, mut admission) = answering(CHAT, "200", "text/event-stream");
    host.response_chunk =
        b"data: {\"choices\":[],\"usage\":{\"prompt_tokens\":11,\"completion_tokens\":500}}\n\n"
            .to_vec();
    let n = host.response_chunk.len();
    admission.on_response_body(&mut host, n, false);
    host.response_chunk = b"data: [DONE]\n\n".to_vec();
    admission.on_response_body(&mut host, 14, true);
    let charge = &host.reconciles[0];
    assert!(!charge.descriptors[0].is_negative_hits);
    let charged = host.dispatched[0].descriptors[1].hits_addend.unwrap().value;
    assert_eq!(
        charge.descriptors[0].hits_addend.unwrap().value,
        511 - charged
    );
    // The tenant's usage counters get what the backend reported.
    assert_eq!(host.tenant_usage.len(), 1);
    assert_eq!(
        host.tenant_usage[0].1,
        TenantUsage {
            prompt: 11,
            completion: 500,
            cached: 0
        }
    );
}

#[test]
fn every_client_sluice_header_is_stripped() {
    let mut host = host_with(CHAT);
    for name in [
        "x-sluice-foo",
        "X-Sluice-Tenant",
        "x-sluice-deferred",
        "x-sluice-request-id",
    ] {
        host.request_headers.insert(name.into(), "forged".into());
    }
    host.request_headers
        .insert("x-sluicey".into(), "kept".into());
    let shared = shared("");
    let mut admission = through_body(&shared, &mut host);
    let sluice: Vec<_> = host
        .request_headers
        .keys()
        .filter(|k| k.to_ascii_lowercase().starts_with("x-sluice-"))
        .collect();
    assert!(sluice.is_empty(), "{sluice:?}");
    assert_eq!(host.request_headers["x-sluicey"], "kept");
    // Sluice's own headers are set afterwards, by Sluice.
    let answer = rls_answer(rls::Code::Ok, None, &[]);
    admission.on_rls_response(&mut host, 7, 0, Some(&answer));
    assert_ne!(host.request_headers[REQUEST_ID_HEADER], "forged");
}

#[test]
fn a_custom_marker_header_is_stripped_too() {
    let mut host = host_with(CHAT);
    host.request_headers.insert("x-defer-me".into(), "1".into());
    let shared = shared(r#", "deferral": {"marker_header": "x-defer-me"}"#);
    let _ = through_body(&shared, &mut host);
    assert!(!host.request_headers.contains_key("x-defer-me"));
}

#[test]
fn a_body_slower_than_the_deadline_gets_408() {
    let shared = shared(r#", "body_timeout_ms": 2000"#);
    let mut host = host_with(CHAT);
    let mut admission = RequestAdmission::new(shared.clone());
    assert_eq!(
        admission.on_request_headers(&mut host, false),
        Verdict::Pause
    );
    host.elapsed = 1_999_000_000;
    assert_eq!(
        admission.on_request_body(&mut host, 10, false),
        Verdict::Pause
    );
    assert!(host.replies.is_empty());
    host.elapsed = 2_001_000_000;
    assert_eq!(
        admission.on_request_body(&mut host, 11, false),
        Verdict::Pause
    );
    assert_eq!(host.replies[0].status, 408);
    assert!(
        host.replies[0].body.contains("request_timeout"),
        "{}",
        host.replies[0].body
    );
    assert_eq!(host.metrics[&Metric::BodyTimeout], 1);
    assert!(host.dispatched.is_empty());
    // Answered: later body callbacks change nothing.
    assert_eq!(
        admission.on_request_body(&mut host, CHAT.len(), true),
        Verdict::Continue
    );
    assert_eq!(host.replies.len(), 1);

    // The last byte after the deadline is late too.
    let mut host = host_with(CHAT);
    let mut admission = RequestAdmission::new(shared);
    admission.on_request_headers(&mut host, false);
    host.elapsed = 2_500_000_000;
    admission.on_request_body(&mut host, CHAT.len(), true);
    assert_eq!(host.replies[0].status, 408);
}

#[test]
fn with_a_claim_as_tenant_the_client_header_is_ignored() {
    let json = r#"{"tenant": {"property": ["metadata", "filter_metadata", "envoy.filters.http.jwt_authn", "payload", "tenant"]}}"#;
    let shared = Arc::new(Shared::new(
        FilterConfig::from_json(json.as_bytes()).unwrap(),
        TestEncoders,
    ));
    let claim: Vec<String> = [
        "metadata",
        "filter_metadata",
        "envoy.filters.http.jwt_authn",
        "payload",
        "tenant",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    // Valid claim for acme, forged header for another tenant: acme is charged.
    let mut host = host_with(CHAT);
    host.request_headers
        .insert("x-tenant-id".into(), "victim".into());
    host.request_headers
        .insert("x-tenant".into(), "victim".into());
    host.properties.insert(claim, b"acme".to_vec());
    let _ = through_body(&shared, &mut host);
    assert_eq!(host.dispatched[0].descriptors[0].entries[0].value, "acme");
    // No claim: refused, whatever the headers say.
    let mut host = host_with(CHAT);
    host.request_headers
        .insert("x-tenant-id".into(), "victim".into());
    let mut admission = RequestAdmission::new(shared);
    admission.on_request_headers(&mut host, false);
    assert_eq!(host.replies[0].status, 401);
    assert!(host.dispatched.is_empty());
}

/// Feeds `chunk` as the next response body callback and records what goes on.
fn respond(
    admission: &mut RequestAdmission<TestEncoders>,
    host: &mut FakeHost,
    chunk: &[u8],
    end: bool,
) {
    host.response_chunk = chunk.to_vec();
    admission.on_response_body(host, chunk.len(), end);
    let sent = std::mem::take(&mut host.response_chunk);
    host.sent_downstream.extend(sent);
}

const STREAMED_CHAT: &str = r#"{"model": "gpt-4o", "stream": true, "max_tokens": 100, "messages": [{"role": "user", "content": "Hello there"}]}"#;

#[test]
fn a_stream_without_include_usage_is_reconciled_and_answered_as_without_sluice() {
    let shared = shared("");
    let mut host = host_with(STREAMED_CHAT);
    let mut admission = through_body(&shared, &mut host);
    // Nothing changes before admission (a deferred request goes on as sent).
    assert_eq!(host.body, STREAMED_CHAT.as_bytes());
    admission.on_rls_response(&mut host, 7, 0, Some(&rls_answer(rls::Code::Ok, None, &[])));
    let with_usage = STREAMED_CHAT.replace("}]}", r#"}],"stream_options":{"include_usage":true}}"#);
    assert_eq!(String::from_utf8(host.body.clone()).unwrap(), with_usage);
    assert_eq!(
        host.request_headers["content-length"],
        with_usage.len().to_string()
    );

    host.response_headers = vec![
        (":status".into(), "200".into()),
        ("content-type".into(), "text/event-stream".into()),
        ("content-length".into(), "999".into()),
    ];
    admission.on_response_headers(&mut host);
    assert!(host.response_header("content-length").is_none());
    let chunk = r#"{"id":"c","choices":[{"index":0,"delta":{"content":"hi"}}]"#;
    respond(
        &mut admission,
        &mut host,
        format!("data: {chunk},\"usage\":null}}\n\ndata: {chunk},\"us").as_bytes(),
        false,
    );
    respond(&mut admission, &mut host, b"age\":null}\n\ndata: {\"id\":\"c\",\"choices\":[],\"usage\":{\"prompt_tokens\":11,\"completion_tokens\":2}}\n\n", false);
    respond(&mut admission, &mut host, b"data: [DONE]\n\n", true);
    assert_eq!(
        String::from_utf8(host.sent_downstream.clone()).unwrap(),
        format!("data: {chunk}}}\n\ndata: {chunk}}}\n\ndata: [DONE]\n\n")
    );
    let refund = &host.reconciles[0];
    let charged = host.dispatched[0].descriptors[1].hits_addend.unwrap().value;
    assert!(refund.descriptors[0].is_negative_hits);
    assert_eq!(
        refund.descriptors[0].hits_addend.unwrap().value,
        charged - 13
    );
}

#[test]
fn include_usage_is_left_alone_when_sent_or_switched_off() {
    // The client asked for usage: its body and answer pass untouched.
    let sent = STREAMED_CHAT.replace("}]}", r#"}],"stream_options":{"include_usage":true}}"#);
    for (config, body) in [
        ("", sent.as_str()),
        (r#", "add_stream_usage": false"#, STREAMED_CHAT),
    ] {
        let shared = shared(config);
        let mut host = host_with(body);
        let mut admission = admitted(&shared, &mut host);
        assert_eq!(host.body, body.as_bytes());
        answer_headers(&mut admission, &mut host, "200", "text/event-stream");
        let usage =
            b"data: {\"choices\":[],\"usage\":{\"prompt_tokens\":11,\"completion_tokens\":2}}\n\n";
        respond(&mut admission, &mut host, usage, true);
        assert_eq!(host.sent_downstream, usage);
    }
}

#[test]
fn a_broken_stream_is_charged_its_prompt_and_the_output_that_passed() {
    let (mut host, mut admission) = answering(STREAMED_CHAT, "200", "text/event-stream");
    let delta = |text: &str| {
        format!("data: {{\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"{text}\"}}}}],\"usage\":null}}\n\n")
    };
    let passed = ["The", " quick", " brown fox"];
    for text in passed {
        respond(&mut admission, &mut host, delta(text).as_bytes(), false);
    }
    // The client goes away (or the upstream resets): no end of body, only the end of the stream.
    admission.on_stream_end(&mut host);
    admission.on_stream_end(&mut host);
    let prompt = (3 + o200k("user") + o200k("Hello there") + 3) as u64;
    let output = o200k(&passed.concat()) as u64;
    let charged = host.dispatched[0].descriptors[1].hits_addend.unwrap().value;
    assert_eq!(host.reconciles.len(), 1, "settled once");
    let refund = &host.reconciles[0].descriptors[0];
    assert!(refund.is_negative_hits);
    assert_eq!(refund.hits_addend.unwrap().value, charged - prompt - output);
    assert_eq!(host.metrics[&Metric::CountedOutput], 1);
    let tenant = host.dispatched[0].descriptors[0].entries[0].value.clone();
    assert_eq!(
        host.tenant_usage,
        vec![(
            tenant,
            TenantUsage {
                prompt,
                completion: output,
                cached: 0
            }
        )]
    );
}

#[test]
fn an_error_answer_is_charged_its_prompt_only() {
    let (mut host, mut admission) = answering(CHAT, "500", "application/json");
    respond(
        &mut admission,
        &mut host,
        br#"{"error":{"message":"boom"}}"#,
        true,
    );
    let prompt = (3 + o200k("user") + o200k("Hello there") + 3) as u64;
    let refund = &host.reconciles[0].descriptors[0];
    assert!(refund.is_negative_hits);
    assert_eq!(
        refund.hits_addend.unwrap().value,
        100,
        "{prompt} stays charged"
    );
}

#[test]
fn input_and_output_budgets_are_charged_and_corrected_each() {
    let shared =
        shared(r#", "token_budgets": ["total", "input", "output"], "cached_tokens_weight": 0.25"#);
    let (mut host, mut admission) = chat_through_body(&shared);
    let prompt = (3 + o200k("user") + o200k("Hello there") + 3) as u64;
    let call = &host.dispatched[0];
    let budget = |i: usize| {
        let d = &call.descriptors[i];
        (d.entries[2].value.clone(), d.hits_addend.unwrap().value)
    };
    assert_eq!(budget(1), ("total".into(), prompt + 100));
    assert_eq!(budget(2), ("input".into(), prompt));
    assert_eq!(budget(3), ("output".into(), 100));
    admission.on_rls_response(&mut host, 7, 0, Some(&rls_answer(rls::Code::Ok, None, &[])));
    answer_headers(&mut admission, &mut host, "200", "application/json");
    // 11 prompt tokens of which 8 cached (weight 0.25: 2), 30 output.
    respond(
        &mut admission,
        &mut host,
        br#"{"usage":{"prompt_tokens":11,"completion_tokens":30,"prompt_tokens_details":{"cached_tokens":8}}}"#,
        true,
    );
    let corrections: Vec<(String, i64)> = host.reconciles[0]
        .descriptors
        .iter()
        .map(|d| {
            let n = d.hits_addend.unwrap().value as i64;
            (
                d.entries[2].value.clone(),
                if d.is_negative_hits { -n } else { n },
            )
        })
        .collect();
    let input = 3 + 2;
    assert_eq!(
        corrections,
        vec![
            ("total".into(), input + 30 - (prompt as i64 + 100)),
            ("input".into(), input - prompt as i64),
            ("output".into(), 30 - 100),
        ]
    );
}

#[test]
fn a_correction_names_the_instant_the_rls_charged_at() {
    let shared = shared("");
    for (charged_at, expected) in [(Some("1795996925500"), 1_795_996_925_500), (None, 12)] {
        let (mut host, mut admission) = chat_through_body(&shared);
        let mut answer = RateLimitResponse {
            overall_code: rls::Code::Ok as i32,
            ..Default::default()
        };
        if let Some(at) = charged_at {
            answer.dynamic_metadata = Some(testing::sluice_metadata(&[(
                sluice_metadata::CHARGED_AT_MS,
                at,
            )]));
        }
        admission.on_rls_response(&mut host, 7, 0, Some(&answer.encode_to_vec()));
        host.response_headers = vec![(":status".into(), "200".into())];
        admission.on_response_headers(&mut host);
        admission.on_stream_end(&mut host);
        // Without it: the filter's clock when it asked (12 ms in this host),
        // the instant the RLS call carried.
        assert_eq!(host.asked_at, [12]);
        assert_eq!(host.reconciled_at, [expected]);
    }
}

/// The filter's own encoders (Sluice's tokenizer), with `extra` config.
fn bpe_shared(extra: &str) -> Arc<Shared<crate::encoders::BpeEncoders>> {
    let json = format!(r#"{{"tenant": {{"header": "x-tenant-id"}} {extra}}}"#);
    Arc::new(Shared::new(
        FilterConfig::from_json(json.as_bytes()).unwrap(),
        crate::encoders::BpeEncoders::new(),
    ))
}

fn chat_of(text: &str) -> String {
    serde_json::json!({"model": "gpt-4o", "max_tokens": 100, "messages": [{"role": "user", "content": text}]})
        .to_string()
}

/// Pseudo-random lowercase "words": costly to count, about 1 token per 2 bytes.
fn random_words(bytes: usize) -> String {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut text = String::with_capacity(bytes);
    while text.len() < bytes {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        text.push(if x.is_multiple_of(9) {
            ' '
        } else {
            char::from(b'a' + (x % 26) as u8)
        });
    }
    text
}

fn total_hits(host: &FakeHost) -> u64 {
    host.dispatched[0].descriptors[1].hits_addend.unwrap().value
}

#[test]
fn counting_past_the_budget_charges_bytes_and_never_less_than_the_exact_count() {
    let text = random_words(20_000);
    let exact = {
        let mut host = host_with(&chat_of(&text));
        let _ = through_body(&bpe_shared(""), &mut host);
        assert_eq!(host.metrics.get(&Metric::CountBounded), None);
        total_hits(&host)
    };
    let mut host = host_with(&chat_of(&text));
    let _ = through_body(&bpe_shared(r#", "count_budget_bytes": 4096"#), &mut host);
    assert_eq!(host.metrics[&Metric::CountBounded], 1);
    let bounded = total_hits(&host);
    assert!(bounded > exact, "bounded {bounded} vs exact {exact}");
    // The part past the budget is charged at most one token per byte.
    assert!(bounded <= exact + text.len() as u64, "{bounded}");
    assert_eq!(host.replies, vec![]);
}

#[test]
fn every_text_of_a_request_shares_one_budget() {
    let part = random_words(3_000);
    let body = serde_json::json!({
        "model": "gpt-4o",
        "messages": [{"role": "system", "content": part}, {"role": "user", "content": part}],
        "tools": [{"type": "function", "function": {"name": "f", "description": part}}],
    })
    .to_string();
    let mut host = host_with(&body);
    let _ = through_body(&bpe_shared(r#", "count_budget_bytes": 5000"#), &mut host);
    assert_eq!(host.metrics[&Metric::CountBounded], 1);
}

#[test]
fn a_prompt_over_the_models_maximum_gets_400_context_length_exceeded() {
    let shared = bpe_shared(r#", "max_prompt_tokens": {"gpt-4o*": 1000}"#);
    // 200 KB of text has at least 200 KB / longest-token tokens: refused
    // before counting.
    let mut host = host_with(&chat_of(&"word ".repeat(40_000)));
    let _ = through_body(&shared, &mut host);
    assert!(host.dispatched.is_empty());
    let reply = &host.replies[0];
    assert_eq!(reply.status, 400);
    assert!(
        reply.body.contains("context_length_exceeded"),
        "{}",
        reply.body
    );
    assert!(reply.body.contains("maximum context length is 1000 tokens"));
    assert!(
        reply.body.contains("at least"),
        "refused on the lower bound"
    );
    assert_eq!(host.metrics[&Metric::PromptTooLong], 1);
    assert_eq!(host.metrics.get(&Metric::PromptTokens), None, "not counted");
    // 1,500 tokens whose lower bound is under 1,000: refused on the count.
    let mut host = host_with(&chat_of(&"word ".repeat(1_500)));
    let _ = through_body(&shared, &mut host);
    assert!(host.dispatched.is_empty());
    assert_eq!(host.replies[0].status, 400);
    assert!(
        !host.replies[0].body.contains("at least"),
        "{}",
        host.replies[0].body
    );
    // Within it: asked as usual.
    let mut host = host_with(&chat_of(&"word ".repeat(500)));
    let _ = through_body(&shared, &mut host);
    assert_eq!(host.dispatched.len(), 1);
    // Other models have no maximum.
    let mut host = host_with(&chat_of(&"word ".repeat(40_000)).replace("gpt-4o", "gpt-4-turbo"));
    let _ = through_body(&shared, &mut host);
    assert_eq!(host.dispatched.len(), 1);
}

/// An OVER_LIMIT answer: the token descriptor (index 1) over with `remaining`
/// left, resetting in `reset_s`; the requests descriptor as `requests`.
fn over_answer(requests: rls::Code, remaining: u32, reset_s: i64, action: &str) -> Vec<u8> {
    let status = |code: rls::Code, remaining: u32| rls::DescriptorStatus {
        code: code as i32,
        current_limit: None,
        limit_remaining: remaining,
        duration_until_reset: Some(rls::Duration {
            seconds: reset_s,
            nanos: 0,
        }),
    };
    RateLimitResponse {
        overall_code: rls::Code::OverLimit as i32,
        statuses: vec![status(requests, 5), status(rls::Code::OverLimit, remaining)],
        response_headers_to_add: vec![HeaderValue {
            key: "retry-after".into(),
            value: reset_s.to_string(),
        }],
        request_headers_to_add: vec![],
        dynamic_metadata: Some(testing::sluice_metadata(&[
            ("action", action),
            ("priority", "low"),
        ])),
    }
    .encode_to_vec()
}

#[test]
fn a_tenant_known_over_its_tokens_is_refused_without_a_call_until_the_reset() {
    let shared = bpe_shared("");
    let (mut host, mut admission) = chat_through_body(&shared);
    let cost = total_hits(&host);
    admission.on_rls_response(
        &mut host,
        7,
        0,
        Some(&over_answer(rls::Code::Ok, 50, 30, "reject")),
    );
    assert_eq!(host.replies[0].status, 429);
    assert!(cost > 51, "the chat costs {cost}");

    // The same request again: refused locally, same body and Retry-After.
    let mut again = host_with(CHAT);
    let _ = through_body(&shared, &mut again);
    assert!(again.dispatched.is_empty(), "no call");
    let reply = &again.replies[0];
    assert_eq!(reply.status, 429);
    assert!(reply.body.contains("rate_limit_exceeded"));
    assert!(
        reply.headers.contains(&("retry-after".into(), "30".into())),
        "{:?}",
        reply.headers
    );
    assert_eq!(again.metrics[&Metric::LocalRejected], 1);
    assert_eq!(again.metrics[&Metric::Rejected], 1);
    // A huge body is refused on its lower bound, before counting.
    let mut huge = host_with(&chat_of(&random_words(400_000)));
    let _ = through_body(&shared, &mut huge);
    assert!(huge.dispatched.is_empty());
    assert_eq!(huge.replies[0].status, 429);
    assert_eq!(huge.metrics.get(&Metric::PromptTokens), None, "not counted");
    // A request within what was left is asked about.
    let small =
        r#"{"model": "gpt-4o", "max_tokens": 1, "messages": [{"role": "user", "content": "Hi"}]}"#;
    let mut cheap = host_with(small);
    let _ = through_body(&shared, &mut cheap);
    assert_eq!(cheap.dispatched.len(), 1);
    // Another tenant is not affected.
    let mut other = host_with(CHAT);
    other
        .request_headers
        .insert("x-tenant-id".into(), "globex".into());
    let _ = through_body(&shared, &mut other);
    assert_eq!(other.dispatched.len(), 1);
    // After the reset the service is asked again.
    let mut later = host_with(CHAT);
    later.elapsed = 30_000_000_000;
    let _ = through_body(&shared, &mut later);
    assert_eq!(later.dispatched.len(), 1);
}

#[test]
fn a_tenant_over_its_requests_is_refused_whatever_the_cost_and_an_ok_answer_forgets() {
    let shared = bpe_shared(r#", "over_limit_memory": {"max_ms": 10000}"#);
    let (mut host, mut admission) = chat_through_body(&shared);
    admission.on_rls_response(
        &mut host,
        7,
        0,
        Some(&over_answer(rls::Code::OverLimit, 1_000_000, 600, "reject")),
    );
    let small =
        r#"{"model": "gpt-4o", "max_tokens": 1, "messages": [{"role": "user", "content": "Hi"}]}"#;
    let mut cheap = host_with(small);
    let _ = through_body(&shared, &mut cheap);
    assert!(cheap.dispatched.is_empty());
    // The reset (600 s) is capped by max_ms (10 s).
    assert!(cheap.replies[0]
        .headers
        .contains(&("retry-after".into(), "10".into())));
    let mut later = host_with(small);
    later.elapsed = 10_000_000_000;
    let mut admission = through_body(&shared, &mut later);
    assert_eq!(later.dispatched.len(), 1);
    admission.on_rls_response(
        &mut later,
        7,
        0,
        Some(&rls_answer(rls::Code::Ok, None, &[])),
    );
    assert_eq!(shared.memory().len(), 0);
}

#[test]
fn a_tenant_whose_requests_defer_is_deferred_without_a_call() {
    let secret = format!(r#", "deferral": {{"secrets": ["{SECRET}"]}}"#);
    let shared = bpe_shared(&secret);
    let (mut host, mut admission) = chat_through_body(&shared);
    admission.on_rls_response(
        &mut host,
        7,
        0,
        Some(&over_answer(rls::Code::Ok, 0, 30, "defer")),
    );
    assert_eq!(host.request_headers["x-sluice-deferred"], "1");
    let mut again = host_with(CHAT);
    let _ = through_body(&shared, &mut again);
    assert!(again.dispatched.is_empty());
    assert!(again.replies.is_empty());
    assert_eq!(again.resumed, 1);
    assert_eq!(again.request_headers["x-sluice-deferred"], "1");
    assert_eq!(again.request_headers[PRIORITY_HEADER], "low");
    assert!(again.request_headers.contains_key(DEFERRAL_TOKEN_HEADER));
    assert_eq!(again.metrics[&Metric::LocalDeferred], 1);
    // The deferral carries the real count (never the lower bound).
    assert_eq!(
        again.request_headers[ESTIMATED_TOKENS_HEADER],
        host.request_headers[ESTIMATED_TOKENS_HEADER]
    );
}

#[test]
fn load_cannot_open_the_gate() {
    // The service timed out (the deadline passed): denied even with
    // failure_mode allow, unless failure_mode_on_timeout says otherwise.
    for (extra, status) in [
        (r#", "failure_mode": "allow""#, Some(503)),
        (
            r#", "failure_mode": "allow", "failure_mode_on_timeout": "allow""#,
            None,
        ),
    ] {
        let shared = shared(extra);
        let (mut host, mut admission) = chat_through_body(&shared);
        host.elapsed += 250_000_000;
        admission.on_rls_response(&mut host, 7, 14, None);
        assert_eq!(host.replies.first().map(|r| r.status), status, "{extra}");
    }
    // A fast failure while the service answers other calls: denied.
    let shared = shared(r#", "failure_mode": "allow", "rls_down_after_ms": 5000"#);
    let (mut host, mut admission) = chat_through_body(&shared);
    admission.on_rls_response(&mut host, 7, 0, Some(&rls_answer(rls::Code::Ok, None, &[])));
    let mut host = host_with(CHAT);
    host.elapsed = 4_000_000_000;
    let mut admission = through_body(&shared, &mut host);
    admission.on_rls_response(&mut host, 7, 14, None);
    assert_eq!(host.replies[0].status, 503);
    assert_eq!(host.metrics[&Metric::RlsFailureDenied], 1);
    // No answer for rls_down_after_ms: the service is down, failure_mode allows.
    let mut host = host_with(CHAT);
    host.elapsed = 5_100_000_000;
    let mut admission = through_body(&shared, &mut host);
    admission.on_rls_response(&mut host, 7, 14, None);
    assert!(host.replies.is_empty());
    assert_eq!(host.resumed, 1);
    assert_eq!(host.metrics[&Metric::RlsFailureAllowed], 1);
}

#[test]
fn a_tenant_claim_that_is_an_object_or_a_list_gets_401_invalid_tenant() {
    let json = r#"{"tenant": {"property": ["metadata", "filter_metadata", "jwt", "tenant"]}}"#;
    let shared = Arc::new(Shared::new(
        FilterConfig::from_json(json.as_bytes()).unwrap(),
        TestEncoders,
    ));
    let claim: Vec<String> = ["metadata", "filter_metadata", "jwt", "tenant"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    // A google.protobuf.Struct {"id": "acme"} as Envoy serializes it, JSON
    // text of an object and of a list, and bytes that are not UTF-8.
    let structured: [&[u8]; 4] = [
        b"\n\x0c\n\x02id\x12\x06\x1a\x04acme",
        br#"{"id": "acme"}"#,
        br#"["acme", "globex"]"#,
        b"\xff\xfe",
    ];
    for value in structured {
        let mut host = host_with(CHAT);
        host.properties.insert(claim.clone(), value.to_vec());
        let mut admission = RequestAdmission::new(shared.clone());
        admission.on_request_headers(&mut host, false);
        assert_eq!(host.replies[0].status, 401, "{value:?}");
        assert!(host.replies[0].body.contains("invalid_tenant"));
        assert_eq!(host.metrics[&Metric::InvalidTenant], 1);
    }
    let mut host = host_with(CHAT);
    host.properties.insert(claim, b"acme".to_vec());
    let _ = through_body(&shared, &mut host);
    assert_eq!(host.dispatched[0].descriptors[0].entries[0].value, "acme");
}

/// `shared`'s memory told that `tenant`'s `model` is over its tokens with
/// 50 left (30 s), as the RLS's answer to [`CHAT`] would.
fn known_over<E: Encoders>(shared: &Arc<Shared<E>>, tenant: &str, model: &str, action: Remembered) {
    let rule = Rule {
        index: 1,
        at_least: 51,
        until_ms: 12 + 30_000,
    };
    let config = shared.config.over_limit_memory.clone();
    shared
        .memory()
        .remember(&config, tenant, model, vec![rule], action, 12);
}

/// Headers in, and the body handed to the light read alone.
fn light_read<E: Encoders>(
    shared: &Arc<Shared<E>>,
    host: &mut FakeHost,
) -> (RequestAdmission<E>, Option<Verdict>) {
    let mut admission = RequestAdmission::new(shared.clone());
    assert_eq!(admission.on_request_headers(host, false), Verdict::Pause);
    let body = host.body.clone();
    let verdict = admission.refuse_known_over_unparsed(host, Endpoint::ChatCompletions, &body);
    (admission, verdict)
}

#[test]
fn a_large_body_of_a_tenant_known_over_is_refused_from_the_light_read() {
    let shared = bpe_shared("");
    known_over(&shared, "acme", "gpt-4o", Remembered::Reject);
    let huge = chat_of(&random_words(400_000));
    let mut host = host_with(&huge);
    let (_, verdict) = light_read(&shared, &mut host);
    assert_eq!(
        verdict,
        Some(Verdict::Pause),
        "decided without the full parse"
    );
    let reply = &host.replies[0];
    assert_eq!(reply.status, 429);
    assert!(reply.body.contains("rate_limit_exceeded"));
    assert!(reply.headers.contains(&("retry-after".into(), "30".into())));
    assert_eq!(host.metrics[&Metric::LocalRejected], 1);
    // Through the body callback: the same answer, no call, nothing counted.
    let mut again = host_with(&huge);
    let _ = through_body(&shared, &mut again);
    assert!(again.dispatched.is_empty());
    assert_eq!(again.replies, host.replies);
    assert_eq!(again.metrics.get(&Metric::PromptTokens), None);
}

#[test]
fn the_light_read_leaves_to_the_full_path_what_it_does_not_refuse() {
    let shared = bpe_shared("");
    known_over(&shared, "acme", "gpt-4o", Remembered::Reject);
    // Under what was left, another tenant, another model: asked about.
    let small =
        r#"{"model": "gpt-4o", "max_tokens": 1, "messages": [{"role": "user", "content": "Hi"}]}"#;
    let mut other = host_with(CHAT);
    other
        .request_headers
        .insert("x-tenant-id".into(), "globex".into());
    let other_model = CHAT.replace("gpt-4o", "gpt-4o-mini");
    for mut host in [host_with(small), other, host_with(&other_model)] {
        let (_, verdict) = light_read(&shared, &mut host);
        assert_eq!(verdict, None);
        assert!(host.replies.is_empty());
        let _ = through_body(&shared, &mut host);
        assert_eq!(host.dispatched.len(), 1);
    }
    // A body the full parse refuses keeps its 400, over or not.
    for body in [
        "{\"model\": \"gpt-4o\", \"messages\": [".to_string(),
        chat_of("x").replace("messages", "message"),
        chat_of("lone").replace("lone", r"\ud800"),
        chat_of("x").replace("gpt-4o", "no-such-model"),
    ] {
        let mut host = host_with(&body);
        let (_, verdict) = light_read(&shared, &mut host);
        assert_eq!(verdict, None, "{body}");
        let _ = through_body(&shared, &mut host);
        assert_eq!(host.replies[0].status, 400, "{body}");
    }
    // A model known to defer: the deferral needs the real count.
    let secret = format!(r#", "deferral": {{"secrets": ["{SECRET}"]}}"#);
    let deferring = bpe_shared(&secret);
    known_over(
        &deferring,
        "acme",
        "gpt-4o",
        Remembered::Defer("low".into()),
    );
    let mut host = host_with(&chat_of(&random_words(4_000)));
    assert_eq!(light_read(&deferring, &mut host).1, None);
}

#[test]
fn the_light_read_takes_the_model_from_the_model_header() {
    let shared =
        bpe_shared(r#", "model_header": "x-model", "model_encodings": {"llama*": "o200k_base"}"#);
    known_over(&shared, "acme", "llama-3-70b", Remembered::Reject);
    let mut host = host_with(&chat_of(&random_words(10_000)));
    host.request_headers
        .insert("x-model".into(), "llama-3-70b".into());
    let (_, verdict) = light_read(&shared, &mut host);
    assert_eq!(verdict, Some(Verdict::Pause));
    assert!(host.replies[0].body.contains("llama-3-70b"));
    // Without the header, the body's model is not known over.
    let mut host = host_with(&chat_of(&random_words(10_000)));
    assert_eq!(light_read(&shared, &mut host).1, None);
}

/// An OK answer routing the request into the fair queue (saturation-aware
/// admission): `{"sluice": {"route": "queue", "priority": "low"}}`.
fn queue_route_answer() -> Vec<u8> {
    RateLimitResponse {
        overall_code: rls::Code::Ok as i32,
        dynamic_metadata: Some(testing::sluice_metadata(&[
            (sluice_metadata::ROUTE, sluice_metadata::ROUTE_QUEUE),
            (sluice_metadata::PRIORITY, "low"),
        ])),
        ..Default::default()
    }
    .encode_to_vec()
}

#[test]
fn an_in_quota_request_routed_to_the_queue_is_deferred_and_not_remembered_over() {
    let shared = shared(&format!(r#", "deferral": {{"secrets": ["{SECRET}"]}}"#));
    let (mut host, mut admission) = chat_through_body(&shared);
    admission.on_rls_response(&mut host, 7, 0, Some(&queue_route_answer()));
    assert_eq!(host.resumed, 1);
    assert!(host.replies.is_empty());
    assert_eq!(host.request_headers["x-sluice-deferred"], "1");
    assert_eq!(host.request_headers[PRIORITY_HEADER], "low");
    assert!(host.request_headers.contains_key(DEFERRAL_TOKEN_HEADER));
    assert_eq!(host.metrics[&Metric::Deferred], 1);
    assert!(!host.metrics.contains_key(&Metric::Admitted));
    // In quota: nothing is known over, the next request asks again.
    assert!(shared.memory().is_empty());
    // Charged as admitted and not corrected: no reconciliation owed.
    answer_headers(&mut admission, &mut host, "200", "application/json");
    host.response_chunk = br#"{"usage": {"prompt_tokens": 11, "completion_tokens": 20}}"#.to_vec();
    let n = host.response_chunk.len();
    admission.on_response_body(&mut host, n, true);
    assert!(host.reconciles.is_empty());
}

#[test]
fn without_a_deferral_route_the_queue_route_goes_straight_through() {
    let shared = shared("");
    let (mut host, mut admission) = chat_through_body(&shared);
    admission.on_rls_response(&mut host, 7, 0, Some(&queue_route_answer()));
    assert_eq!(host.resumed, 1);
    assert!(!host.request_headers.contains_key("x-sluice-deferred"));
    assert_eq!(host.metrics[&Metric::Admitted], 1);
}
