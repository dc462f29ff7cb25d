//! One scenario suite, two front doors: real Envoy loading the built Wasm
//! filter, and real Envoy with `envoy.filters.http.ext_authz` pointing at
//! sluice-rls — each with the real RLS (Redis store), the project's simulated
//! OpenAI backend, and a stand-in deferral endpoint that echoes what it got.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests fail loudly

use serde_json::Value;
use sluice_admission::config::FilterConfig;
use sluice_admission::deferral;
use sluice_ratelimit::ext_authz::ExtAuthzService;
use sluice_ratelimit::limiter::Limiter;
use sluice_ratelimit::metrics::Metrics;
use sluice_testkit::stack::limits::{self, OverLimit};
use sluice_testkit::stack::{
    redis_limiter, start_envoy, start_llm_sim, start_rls, tokens_left, Rls, RlsParts,
};
use sluice_testkit::{filter_event_count, post};
use sluice_testkit::{
    filter_wasm, free_port, workspace_root, Envoy, EnvoyPorts, HttpResponse, RedisServer,
    StaticHttpServer, ECHO_HEADERS,
};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// `meter`'s tokens an hour.
const METER_TOKENS: u64 = 50_000_000;

/// `acme` is refused over 3000 tokens an hour, `patient` deferred (high
/// priority) over 50; `meter` is only counted, with room for a 4 MiB body
/// charged by the counting budget's bound (about a token per byte past 128 KiB).
fn limits() -> String {
    limits::file(&[
        limits::tenant(Some("acme"), 100, 3000, OverLimit::Reject),
        limits::tenant(Some("patient"), 100, 50, OverLimit::Defer("high")),
        limits::tenant(Some("meter"), 1000, METER_TOKENS, OverLimit::Count),
    ])
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum FrontDoor {
    Wasm,
    ExtAuthz,
}

struct Stack {
    front: FrontDoor,
    envoy: Envoy,
    listener: SocketAddr,
    limiter: Arc<Limiter>,
    _redis: RedisServer,
    _rls: Rls,
}

/// One scenario, run once behind each front door.
macro_rules! on_both_front_doors {
    ($scenario:ident: $wasm:ident, $ext_authz:ident) => {
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $wasm() {
            $scenario(FrontDoor::Wasm).await;
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $ext_authz() {
            $scenario(FrontDoor::ExtAuthz).await;
        }
    };
}

/// `edits` rewrite the Envoy config (which carries the Wasm plugin
/// configuration) or, for ext_authz, whichever of the Envoy config and
/// config/ext-authz.json holds the text. `rls_up: false` points Envoy at a
/// port nobody listens on.
async fn stack(front: FrontDoor, edits: &[(&str, &str)], rls_up: bool) -> Stack {
    let redis = RedisServer::start().unwrap();
    let limiter = redis_limiter(&limits(), &redis.url(), Metrics::new());

    let envoy_file = match front {
        FrontDoor::Wasm => "envoy/sluice-filter.yaml",
        FrontDoor::ExtAuthz => "envoy/ext-authz.yaml",
    };
    let mut config = std::fs::read_to_string(workspace_root().join(envoy_file)).unwrap();
    let mut admission_json =
        std::fs::read_to_string(workspace_root().join("config/ext-authz.json")).unwrap();
    for (from, to) in edits {
        let target = if front == FrontDoor::ExtAuthz && admission_json.contains(from) {
            &mut admission_json
        } else {
            &mut config
        };
        assert!(target.contains(from), "{from} not in the {front:?} config");
        *target = target.replace(from, to);
    }
    let ext_authz = (front == FrontDoor::ExtAuthz).then(|| {
        let mut admission = FilterConfig::from_json(admission_json.as_bytes()).unwrap();
        // As sluice-rls does: ext_authz signs with its --deferral-secret-file.
        admission.deferral.secrets = vec![sluice_testkit::example_deferral_secret()];
        ExtAuthzService::new(limiter.clone(), admission)
    });

    let rls = start_rls(limiter.clone(), RlsParts::ext_authz(ext_authz)).await;
    let rls_port = if rls_up { rls.port } else { free_port() };

    let backend_port = start_llm_sim(sluice_llm_sim::SimConfig::fast())
        .await
        .port();
    let deferral = StaticHttpServer::start(ECHO_HEADERS).unwrap();

    // Distinct from each other and from the dead RLS port of `rls_up: false`.
    let mut ports = vec![rls_port];
    while ports.len() < 3 {
        let port = free_port();
        if !ports.contains(&port) {
            ports.push(port);
        }
    }
    let (admin_port, listener_port) = (ports[1], ports[2]);
    config = EnvoyPorts {
        admin: admin_port,
        listener: listener_port,
        rls: rls_port,
        backend: backend_port,
        deferral: Some(deferral.addr.port()),
    }
    .apply(&config);
    if front == FrontDoor::Wasm {
        config = config.replace(
            "/etc/sluice/sluice_filter.wasm",
            &filter_wasm().unwrap().display().to_string(),
        );
    }
    let envoy = start_envoy(config, admin_port, listener_port).await;
    Stack {
        front,
        envoy,
        listener: ([127, 0, 0, 1], listener_port).into(),
        limiter,
        _redis: redis,
        _rls: rls,
    }
}

impl Stack {
    async fn post(
        &self,
        path: &'static str,
        headers: Vec<(&'static str, String)>,
        body: Vec<u8>,
    ) -> HttpResponse {
        post(self.listener, path, headers, body).await.unwrap()
    }

    /// [`Stack::chat`], answered 200 with `expected` in the body.
    async fn chat_ok(
        &self,
        tenant: &str,
        body: Value,
        extra: &[(&'static str, &str)],
        expected: &str,
    ) -> HttpResponse {
        let response = self.chat(tenant, body, extra).await;
        assert_eq!(
            response.status,
            200,
            "{response:?}\n{}",
            self.envoy.log_text()
        );
        response.assert_body_contains(expected);
        response
    }

    async fn chat(
        &self,
        tenant: &str,
        body: Value,
        extra: &[(&'static str, &str)],
    ) -> HttpResponse {
        let mut headers = vec![
            ("x-tenant-id", tenant.to_string()),
            ("content-type", "application/json".into()),
        ];
        headers.extend(extra.iter().map(|(k, v)| (*k, v.to_string())));
        self.post(
            "/v1/chat/completions",
            headers,
            body.to_string().into_bytes(),
        )
        .await
    }

    /// How often the front door recorded `event` (admitted, rejected, ...):
    /// Envoy's `wasmcustom.sluice_<event>_total` for the filter,
    /// sluice-rls's `sluice_rls_ext_authz_events_total` for ext_authz.
    async fn events(&self, event: &str) -> u64 {
        match self.front {
            FrontDoor::Wasm => filter_event_count(&self.envoy, event).await.unwrap(),
            FrontDoor::ExtAuthz => {
                let metrics = self.limiter.metrics().encode();
                let name = format!("sluice_rls_ext_authz_events_total{{event=\"{event}\"}} ");
                metrics
                    .lines()
                    .find_map(|l| l.strip_prefix(&name).map(|n| n.trim().parse().unwrap()))
                    .unwrap_or(0)
            }
        }
    }

    /// Fails the test unless each event was recorded as often as `expected` says.
    async fn assert_events(&self, expected: &[(&str, u64)]) {
        let mut counted = Vec::new();
        for (event, _) in expected {
            counted.push((*event, self.events(event).await));
        }
        assert_eq!(counted, expected);
    }

    /// Tokens left in the tenant's token window, without charging anything.
    async fn tokens_left(&self, tenant: &str, model: &str) -> u32 {
        tokens_left(&self.limiter, tenant, model).await
    }
}

fn chat_body(words: usize, max_tokens: u64, stream: bool) -> Value {
    let mut body = serde_json::json!({
        "model": "gpt-4o",
        "max_tokens": max_tokens,
        "messages": [{ "role": "user", "content": "hello ".repeat(words) }]
    });
    if stream {
        body["stream"] = true.into();
        body["stream_options"] = serde_json::json!({ "include_usage": true });
    }
    body
}

/// Admitted, token limit exhausted → 429, defer → deferral route with markers,
/// self-marking stripped. Same inputs, same outcomes, for both front doors.
async fn admission_rejection_and_deferral(front: FrontDoor) {
    let stack = stack(front, &[], true).await;

    // Admitted: 200 from the backend, RateLimit headers on the way back.
    let response = stack
        .chat_ok(
            "meter",
            chat_body(10, 20, false),
            &[("x-sim-completion-tokens", "20")],
            "chat.completion",
        )
        .await;
    assert!(
        response.header("ratelimit-remaining").is_some(),
        "{response:?}"
    );

    // Token limit exhausted by a few large prompts while requests are fine: 429.
    let mut statuses = Vec::new();
    let mut rejected = None;
    for _ in 0..5 {
        let response = stack.chat("acme", chat_body(1000, 200, false), &[]).await;
        statuses.push(response.status);
        if response.status == 429 {
            rejected = Some(response);
            break;
        }
    }
    let rejected = rejected.unwrap_or_else(|| panic!("no 429 after {statuses:?}"));
    assert_eq!(
        statuses,
        [200, 200, 429],
        "1000-word prompts against 3000 tokens/hour"
    );
    assert!(rejected.header("retry-after").is_some(), "{rejected:?}");
    assert_eq!(
        rejected.header("ratelimit-limit"),
        Some("3000"),
        "{rejected:?}"
    );
    let error: Value = serde_json::from_str(&rejected.body).unwrap();
    assert_eq!(
        error["error"]["code"], "rate_limit_exceeded",
        "{}",
        rejected.body
    );

    // Over a defer limit: re-routed to the deferral cluster with the markers.
    let response = stack
        .chat(
            "patient",
            chat_body(100, 10, false),
            &[
                ("x-request-id", "client-chosen"),
                ("x-sluice-foo", "forged"),
            ],
        )
        .await;
    assert_eq!(response.status, 200, "{response:?}");
    let seen: Value = serde_json::from_str(&response.body).unwrap();
    assert_eq!(seen["x-sluice-deferred"], "1", "{seen}");
    // Any client x-sluice-* header is removed, not only Sluice's own.
    assert!(seen.get("x-sluice-foo").is_none(), "{seen}");
    assert_eq!(seen["x-sluice-tenant"], "patient");
    assert_eq!(seen["x-sluice-model"], "gpt-4o");
    assert_eq!(seen["x-sluice-priority"], "high");
    // Sluice's own id (Envoy's CSPRNG through WASI random_get for the
    // filter), and a token the deferral endpoint accepts.
    let id = seen["x-sluice-request-id"].as_str().unwrap();
    assert!(deferral::is_request_id(id), "{seen}");
    let digest = deferral::body_digest(chat_body(100, 10, false).to_string().as_bytes());
    let claims = deferral::DeferralClaims {
        headers: deferral::HeaderClaims {
            request_id: id,
            tenant: "patient",
            model: "gpt-4o",
            priority: "high",
            estimated_tokens: seen["x-sluice-estimated-tokens"]
                .as_str()
                .unwrap()
                .parse()
                .unwrap(),
        },
        body_sha256: &digest,
    };
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let token = seen["x-sluice-deferral-token"].as_str().unwrap();
    assert_eq!(
        claims.verify(
            token,
            &deferral::Verifier::new(&[sluice_testkit::example_deferral_secret()], now_ms, 30_000)
        ),
        Ok(()),
        "{seen}"
    );
    assert!(
        seen["x-sluice-prompt-tokens"]
            .as_str()
            .unwrap()
            .parse::<u64>()
            .unwrap()
            > 100
    );

    // A client cannot mark itself: the marker is stripped, normal route.
    stack
        .chat_ok(
            "meter",
            chat_body(1, 5, false),
            &[("x-sluice-deferred", "1")],
            "chat.completion",
        )
        .await;

    stack
        .assert_events(&[("admitted", 4), ("rejected", 1), ("deferred", 1)])
        .await;
}

on_both_front_doors!(admission_rejection_and_deferral: wasm_admission_rejection_and_deferral, ext_authz_admission_rejection_and_deferral);

/// Reconciliation (Wasm only: ext_authz never sees the response).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wasm_reconciles_real_usage() {
    let stack = stack(FrontDoor::Wasm, &[], true).await;
    let response = stack
        .chat(
            "meter",
            chat_body(10, 20, false),
            &[("x-sim-completion-tokens", "20")],
        )
        .await;
    assert_eq!(response.status, 200, "{response:?}");
    let usage: Value = serde_json::from_str::<Value>(&response.body).unwrap()["usage"].clone();
    let used = usage["total_tokens"].as_u64().unwrap();
    let stack = &stack;
    let settle = |expected: u64| async move {
        let mut left = 0;
        for _ in 0..50 {
            left = u64::from(stack.tokens_left("meter", "gpt-4o").await);
            if left == expected {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        left
    };
    // The estimate (prompt + max_tokens 20) was replaced by what the backend reported.
    assert_eq!(
        settle(METER_TOKENS - used).await,
        METER_TOKENS - used,
        "window not reconciled to {usage}"
    );

    // Streamed, with include_usage: reconciled from the final SSE chunk.
    let response = stack
        .chat_ok(
            "meter",
            chat_body(10, 500, true),
            &[("x-sim-completion-tokens", "7")],
            "data: [DONE]",
        )
        .await;
    let usage_line = response
        .body
        .lines()
        .rfind(|l| l.contains("\"usage\"") && !l.contains("\"usage\":null"))
        .unwrap();
    let streamed: Value = serde_json::from_str(usage_line.trim_start_matches("data: ")).unwrap();
    let stream_used = streamed["usage"]["total_tokens"].as_u64().unwrap();
    let expected = METER_TOKENS - used - stream_used;
    assert_eq!(
        settle(expected).await,
        expected,
        "stream not reconciled (max_tokens 500, used {stream_used})"
    );
    assert_eq!(stack.events("reconciled").await, 2);
}

async fn bad_input_gets_clear_errors(front: FrontDoor) {
    let stack = stack(
        front,
        &[("\"max_body_bytes\": 4194304", "\"max_body_bytes\": 4096")],
        true,
    )
    .await;
    let tenant = || vec![("x-tenant-id", "meter".to_string())];
    let post = |headers: Vec<(&'static str, String)>, body: &[u8]| {
        stack.post("/v1/chat/completions", headers, body.to_vec())
    };

    // Over the 4,096-byte limit, but small enough that Envoy reads all of it
    // before answering: a body left unread when it closes turns its close
    // into a reset, which the client may see before the 413.
    let too_big_body = chat_body(800, 5, false).to_string();
    assert!((4096..8192).contains(&too_big_body.len()));
    let too_big = post(tenant(), too_big_body.as_bytes()).await;
    assert_eq!(too_big.status, 413, "{too_big:?}");
    let invalid = post(tenant(), b"{\"model\": \"gpt-4o\", \"messages\": [").await;
    assert_eq!(invalid.status, 400);
    invalid.assert_body_contains("not valid JSON");
    let no_model = post(tenant(), br#"{"messages": []}"#).await;
    assert_eq!(no_model.status, 400);
    no_model.assert_body_contains("'model'");
    let unknown = post(tenant(), br#"{"model": "mystery-9000", "messages": []}"#).await;
    assert_eq!(unknown.status, 400);
    unknown.assert_body_contains("not known");
    let no_tenant = post(vec![], chat_body(1, 5, false).to_string().as_bytes()).await;
    assert_eq!(no_tenant.status, 401, "{no_tenant:?}");
    let bad_utf8 = post(
        tenant(),
        b"{\"model\": \"gpt-4o\", \"messages\": [{\"role\": \"user\", \"content\": \"\xc3\x28\"}]}",
    )
    .await;
    assert_eq!(bad_utf8.status, 400, "{bad_utf8:?}");
    // Hostile tenant values are bounded and still counted.
    let response = post(
        vec![("x-tenant-id", "t".repeat(3000))],
        chat_body(1, 5, false).to_string().as_bytes(),
    )
    .await;
    assert_eq!(response.status, 200, "{response:?}");
    // Still serving after all of it.
    let fine = post(tenant(), chat_body(1, 5, false).to_string().as_bytes()).await;
    assert_eq!(fine.status, 200);
    stack
        .assert_events(&[
            ("bad_request", 4),
            ("body_too_large", 1),
            ("missing_tenant", 1),
        ])
        .await;
}

on_both_front_doors!(bad_input_gets_clear_errors: wasm_bad_input_gets_clear_errors, ext_authz_bad_input_gets_clear_errors);

/// A body cut by ext_authz's buffer is refused, never counted short.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ext_authz_truncated_body_is_refused() {
    let stack = stack(
        FrontDoor::ExtAuthz,
        &[("max_request_bytes: 4194304", "max_request_bytes: 2048")],
        true,
    )
    .await;
    let response = stack.chat("meter", chat_body(2000, 5, false), &[]).await;
    assert_eq!(response.status, 413, "{response:?}");
    response.assert_body_contains("authorization buffer");
    assert_eq!(stack.events("truncated_body").await, 1);
    let small = stack.chat("meter", chat_body(10, 5, false), &[]).await;
    assert_eq!(small.status, 200);
}

/// The RLS (Wasm) or the ext_authz sidecar unreachable: served when the
/// failure mode allows, refused with 503 when it denies. Shipped: the
/// filter allows (sluice-rls down), ext_authz denies (Envoy cannot tell a
/// slow check from a down sidecar).
async fn limiter_down_fails_open_or_closed(front: FrontDoor) {
    let (open_edits, closed_edits) = match front {
        FrontDoor::Wasm => (
            vec![],
            vec![("\"failure_mode\": \"allow\"", "\"failure_mode\": \"deny\"")],
        ),
        FrontDoor::ExtAuthz => (
            vec![("failure_mode_allow: false", "failure_mode_allow: true")],
            vec![],
        ),
    };
    let open = stack(front, &open_edits, false).await;
    let response = open.chat("meter", chat_body(1, 5, false), &[]).await;
    assert_eq!(response.status, 200, "{response:?}");
    let closed = stack(front, &closed_edits, false).await;
    let response = closed.chat("meter", chat_body(1, 5, false), &[]).await;
    assert_eq!(response.status, 503, "{response:?}");
    // The filter answers itself and counts; with ext_authz Envoy decides.
    if front == FrontDoor::Wasm {
        response.assert_body_contains("rate_limit_unavailable");
        assert_eq!(open.events("rls_failure_allowed").await, 1);
        assert_eq!(closed.events("rls_failure_denied").await, 1);
    }
}

on_both_front_doors!(limiter_down_fails_open_or_closed: wasm_rls_down_fails_open_or_closed, ext_authz_sidecar_down_follows_envoy_failure_mode);

/// The shipped ext-authz.yaml passes Sluice's one maximum body to the check
/// (Envoy's 1 MiB default buffer would refuse 1.5 MiB itself); a body over
/// it is sluice-rls's JSON 413, counted — not a failed check that
/// failure_mode_allow lets through (gRPC's default 4 MiB message limit).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ext_authz_one_maximum_body() {
    use std::io::{Read, Write};
    // It checks what a maximum body gets, not how fast: counting 3 MiB in a
    // debug build beside the other tests can outlast the shipped 0.5 s
    // deadline on a loaded machine, and the answer is then Envoy's 503.
    let stack = stack(
        FrontDoor::ExtAuthz,
        &[("timeout: 0.5s", "timeout: 10s")],
        true,
    )
    .await;
    let max = sluice_admission::config::DEFAULT_MAX_BODY_BYTES;
    let response = stack
        .chat("meter", chat_body(3 * 1024 * 1024 / 12, 5, false), &[])
        .await;
    assert_eq!(
        response.status,
        200,
        "{:?}",
        response.header("content-type")
    );

    // Over the maximum: refused while the client is still sending (a reset
    // after the answer is fine).
    let body = chat_body(max / 6 + 1, 5, false).to_string().into_bytes();
    assert!(body.len() > max);
    let addr = stack.listener;
    let text = tokio::task::spawn_blocking(move || {
        let mut stream = std::net::TcpStream::connect(addr).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        let mut reader = stream.try_clone().unwrap();
        std::thread::spawn(move || {
            let head = format!(
                "POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\nx-tenant-id: meter\r\ncontent-length: {}\r\n\r\n",
                body.len()
            );
            let _ = stream.write_all(head.as_bytes());
            let _ = stream.write_all(&body);
        });
        let mut raw = Vec::new();
        let mut buffer = [0u8; 8192];
        while let Ok(n) = reader.read(&mut buffer) {
            if n == 0 {
                break;
            }
            raw.extend_from_slice(&buffer[..n]);
            // Envoy may keep the connection open: stop at the end of the answer.
            let text = String::from_utf8_lossy(&raw);
            if let Some((head, body)) = text.split_once("\r\n\r\n") {
                let length = head
                    .lines()
                    .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().parse::<usize>().unwrap_or(0)));
                if length.is_some_and(|length| body.len() >= length) {
                    break;
                }
            }
        }
        String::from_utf8_lossy(&raw).into_owned()
    })
    .await
    .unwrap();
    assert!(text.starts_with("HTTP/1.1 413"), "{text}");
    assert!(text.contains("request_too_large"), "{text}");
    assert_eq!(stack.events("body_too_large").await, 1);
}
