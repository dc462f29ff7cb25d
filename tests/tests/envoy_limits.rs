//! Deadlines, the one maximum body, header stripping and the tenant's source,
//! through real Envoy loading the built Wasm filter (`envoy/sluice-filter.yaml`
//! with its ports, and here and there a deadline, rewritten), the real RLS on
//! a real Redis, and loopback stand-ins for the backend and deferral endpoint.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests fail loudly

use serde_json::Value;
use sluice_ratelimit::limiter::Limiter;
use sluice_ratelimit::metrics::Metrics;
use sluice_testkit::stack::limits::{self, OverLimit};
use sluice_testkit::stack::{redis_limiter, start_envoy, start_rls, tokens_left, Rls, RlsParts};
use sluice_testkit::{filter_event_count, parse_raw_response, post, read_raw_response};
use sluice_testkit::{
    free_port, sluice_filter_envoy_config, Envoy, HttpResponse, RedisServer, SluiceFilterPorts,
    StaticHttpServer, ECHO_HEADERS,
};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Every tenant is only counted; `patient` is deferred (high priority)
/// over 5 tokens an hour. The catch-all's tokens hold a 4 MiB body charged
/// by the counting budget's bound (about one token per byte past 128 KiB).
fn limits() -> String {
    limits::file(&[
        limits::tenant(None, 1000, 50_000_000, OverLimit::Count),
        limits::tenant(Some("patient"), 100, 5, OverLimit::Defer("high")),
    ])
}

/// Sluice's one maximum body (the filter's default `max_body_bytes`).
const MAX_BODY: usize = sluice_admission::config::DEFAULT_MAX_BODY_BYTES;

struct Stack {
    envoy: Envoy,
    listener: SocketAddr,
    limiter: Arc<Limiter>,
    _redis: RedisServer,
    _rls: Rls,
}

/// Envoy + filter + RLS (Redis); the backend echoes the request headers it
/// got; the deferral cluster goes to `deferral` (an echo server if `None`).
/// `edits` rewrite the Envoy config text (after the ports).
async fn stack(edits: &[(&str, &str)], deferral: Option<SocketAddr>) -> Stack {
    let redis = RedisServer::start().unwrap();
    let limiter = redis_limiter(&limits(), &redis.url(), Metrics::new());
    let rls_server = start_rls(limiter.clone(), RlsParts::default()).await;
    let rls = rls_server.port;
    let backend = StaticHttpServer::start(ECHO_HEADERS).unwrap();
    let deferral = match deferral {
        Some(addr) => addr,
        None => StaticHttpServer::start(ECHO_HEADERS).unwrap().addr,
    };
    let mut ports = vec![rls, backend.addr.port(), deferral.port()];
    while ports.len() < 5 {
        let port = free_port();
        if !ports.contains(&port) {
            ports.push(port);
        }
    }
    let (admin, listener) = (ports[3], ports[4]);
    let mut config = sluice_filter_envoy_config(&SluiceFilterPorts {
        admin,
        listener,
        rls,
        backend: backend.addr.port(),
        deferral: deferral.port(),
    })
    .unwrap();
    for (from, to) in edits {
        assert!(
            config.contains(from),
            "`{from}` not in envoy/sluice-filter.yaml"
        );
        config = config.replace(from, to);
    }
    let envoy = start_envoy(config, admin, listener).await;
    Stack {
        envoy,
        listener: ([127, 0, 0, 1], listener).into(),
        limiter,
        _redis: redis,
        _rls: rls_server,
    }
}

impl Stack {
    async fn post(&self, headers: Vec<(&'static str, String)>, body: Vec<u8>) -> HttpResponse {
        post(self.listener, "/v1/chat/completions", headers, body)
            .await
            .unwrap()
    }

    /// Raw HTTP/1.1 on one connection: `head` (request line + headers, no
    /// blank line), then `body` in `chunks` with `pause` between them; the
    /// response (status, body) and when its first byte came, measured from
    /// the headers.
    async fn raw(
        &self,
        head: String,
        body: Vec<u8>,
        chunk: usize,
        pause: Duration,
    ) -> (u16, String, Duration) {
        let addr = self.listener;
        tokio::task::spawn_blocking(move || {
            let mut stream = TcpStream::connect(addr).unwrap();
            stream
                .set_read_timeout(Some(Duration::from_secs(60)))
                .unwrap();
            let started = Instant::now();
            stream
                .write_all(format!("{head}\r\n\r\n").as_bytes())
                .unwrap();
            let mut reader = stream.try_clone().unwrap();
            let writer = std::thread::spawn(move || {
                for piece in body.chunks(chunk.max(1)) {
                    if stream.write_all(piece).is_err() {
                        return;
                    }
                    std::thread::sleep(pause);
                }
            });
            // Until the server closes (or resets) the connection; timed at
            // the answer's first byte.
            let (raw, elapsed) = read_raw_response(&mut reader, started, |_| false);
            drop(writer);
            let (status, body) = parse_raw_response(&raw);
            (status, body, elapsed)
        })
        .await
        .unwrap()
    }

    /// Envoy's `wasmcustom.sluice_<event>_total`.
    async fn events(&self, event: &str) -> u64 {
        filter_event_count(&self.envoy, event).await.unwrap()
    }

    /// Tokens left in the tenant's window, without charging anything.
    async fn tokens_left(&self, tenant: &str) -> u32 {
        tokens_left(&self.limiter, tenant, "gpt-4o").await
    }
}

fn tenant(name: &str) -> Vec<(&'static str, String)> {
    vec![
        ("x-tenant-id", name.to_string()),
        ("content-type", "application/json".into()),
    ]
}

/// A chat request of exactly `size` bytes.
fn chat_of_size(size: usize) -> Vec<u8> {
    let frame =
        r#"{"model": "gpt-4o", "max_tokens": 5, "messages": [{"role": "user", "content": ""}]}"#;
    let words = "hello ".repeat((size - frame.len()) / 6 + 1);
    let content = &words[..size - frame.len()];
    let body = frame.replace(r#""content": """#, &format!(r#""content": "{content}""#));
    assert_eq!(body.len(), size);
    body.into_bytes()
}

fn small_chat() -> Vec<u8> {
    br#"{"model": "gpt-4o", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}"#
        .to_vec()
}

fn head(extra: &str) -> String {
    format!(
        "POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\nx-tenant-id: meter\r\ncontent-type: application/json{extra}"
    )
}

/// Body at 1 byte/s: the filter answers 408 once the body deadline has
/// passed. Headers and then silence: no body callback ever comes, Envoy's
/// request_timeout answers. Short deadlines rewritten onto the shipped config.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_bodies_are_cut_at_the_deadline() {
    let stack = stack(
        &[
            ("\"body_timeout_ms\": 10000", "\"body_timeout_ms\": 2000"),
            ("request_timeout: 15s", "request_timeout: 4s"),
        ],
        None,
    )
    .await;
    let body = small_chat();
    let (status, text, elapsed) = stack
        .raw(
            head(&format!("\r\ncontent-length: {}", body.len())),
            body.clone(),
            1,
            Duration::from_secs(1),
        )
        .await;
    assert_eq!(status, 408, "{text}\n{}", stack.envoy.log_text());
    assert!(text.contains("\"request_timeout\""), "{text}");
    assert!(
        elapsed >= Duration::from_millis(1900) && elapsed < Duration::from_secs(6),
        "trickled body answered after {elapsed:?}"
    );
    assert_eq!(stack.events("body_timeout").await, 1);
    println!("trickle (1 byte/s, body_timeout_ms 2000): 408 after {elapsed:?}");

    let (status, text, elapsed) = stack
        .raw(
            head("\r\ncontent-length: 100"),
            Vec::new(),
            1,
            Duration::ZERO,
        )
        .await;
    assert_eq!(status, 408, "{text}");
    assert!(
        // Envoy arms request_timeout when the headers arrive; its timer
        // may fire a few ms short of 4 s as the client measures it.
        elapsed >= Duration::from_millis(3500) && elapsed < Duration::from_secs(8),
        "silent body answered after {elapsed:?}"
    );
    println!("headers then silence (request_timeout 4s): 408 after {elapsed:?}");

    // A body that arrives in time is served as before.
    let response = stack.post(tenant("meter"), small_chat()).await;
    assert_eq!(response.status, 200, "{response:?}");
}

/// The shipped config buffers Sluice's maximum: one byte more is the
/// filter's JSON 413 (counted), with or without a Content-Length; a body
/// between Envoy's old 1 MiB default and the maximum goes through.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_maximum_body_answered_by_the_filter() {
    let stack = stack(&[], None).await;
    let over = chat_of_size(MAX_BODY + 1);

    // Refused at the headers (Content-Length), while the client still sends.
    let (status, text, _) = stack
        .raw(
            head(&format!("\r\ncontent-length: {}", over.len())),
            over.clone(),
            256 * 1024,
            Duration::ZERO,
        )
        .await;
    assert_eq!(status, 413, "{text}");
    let error: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(error["error"]["code"], "request_too_large", "{error}");

    // Chunked: no Content-Length to refuse early; Envoy buffers and the
    // filter sees the size grow past the maximum.
    let mut chunked = Vec::new();
    for piece in over.chunks(64 * 1024) {
        chunked.extend_from_slice(format!("{:x}\r\n", piece.len()).as_bytes());
        chunked.extend_from_slice(piece);
        chunked.extend_from_slice(b"\r\n");
    }
    chunked.extend_from_slice(b"0\r\n\r\n");
    let (status, text, _) = stack
        .raw(
            head("\r\ntransfer-encoding: chunked"),
            chunked,
            256 * 1024,
            Duration::ZERO,
        )
        .await;
    assert_eq!(status, 413, "{text}");
    assert!(text.contains("request_too_large"), "{text}");
    assert_eq!(stack.events("body_too_large").await, 2);

    // Exactly the maximum, and 3 MiB: admitted and forwarded.
    for size in [3 * 1024 * 1024, MAX_BODY] {
        let response = stack.post(tenant("meter"), chat_of_size(size)).await;
        assert_eq!(
            response.status,
            200,
            "{size} bytes: {response:?}\n{}",
            stack.envoy.log_text()
        );
        let seen: Value = serde_json::from_str(&response.body).unwrap();
        assert_eq!(seen["content-length"], size.to_string(), "{seen}");
    }
    assert_eq!(stack.events("admitted").await, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_sluice_headers_do_not_reach_the_backend() {
    let stack = stack(&[], None).await;
    let mut headers = tenant("meter");
    headers.extend([
        ("x-sluice-foo", "forged".to_string()),
        ("X-Sluice-Bar", "forged".to_string()),
        ("x-sluice-request-id", "forged".to_string()),
        ("x-sluiced", "kept".to_string()),
    ]);
    let response = stack.post(headers, small_chat()).await;
    assert_eq!(response.status, 200, "{response:?}");
    let seen: Value = serde_json::from_str(&response.body).unwrap();
    let sluice: Vec<(&String, &Value)> = seen
        .as_object()
        .unwrap()
        .iter()
        .filter(|(k, _)| k.starts_with("x-sluice-"))
        .collect();
    // Only what the filter set itself, none of it forged.
    let names: Vec<&str> = sluice.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(
        names,
        [
            "x-sluice-estimated-tokens",
            "x-sluice-prompt-tokens",
            "x-sluice-request-id"
        ],
        "{seen}"
    );
    assert!(sluice.iter().all(|(_, v)| *v != "forged"), "{seen}");
    assert_eq!(seen["x-sluiced"], "kept");
}

/// A deferral endpoint stand-in that keeps the client waiting `silence`
/// without a byte, then answers one JSON body (a non-streaming deferred client).
fn silent_deferral_endpoint(silence: Duration) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut length = 0;
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 {
                        return;
                    }
                    if let Some((k, v)) = line.split_once(':') {
                        if k.eq_ignore_ascii_case("content-length") {
                            length = v.trim().parse().unwrap_or(0);
                        }
                    }
                    if line == "\r\n" {
                        break;
                    }
                }
                let mut body = vec![0; length];
                let _ = reader.read_exact(&mut body);
                std::thread::sleep(silence);
                let answer = r#"{"object": "chat.completion", "waited": true}"#;
                let mut stream = stream;
                let _ = stream.write_all(
                    format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{answer}",
                        answer.len()
                    )
                    .as_bytes(),
                );
            });
        }
    });
    addr
}

/// The connection manager's stream idle timeout (1 s here) cuts ordinary
/// silent streams, but a deferred JSON request waits quietly on the deferral
/// route, whose own idle_timeout (31 min) applies after the filter re-routed it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quiet_deferred_request_outlives_the_stream_idle_timeout() {
    let endpoint = silent_deferral_endpoint(Duration::from_secs(3));
    let stack = stack(
        &[
            ("stream_idle_timeout: 30s", "stream_idle_timeout: 1s"),
            // The backend route's own idle timeout, short: shows the cut is real.
            ("idle_timeout: 300s", "idle_timeout: 1s"),
        ],
        Some(endpoint),
    )
    .await;
    let started = Instant::now();
    let response = stack.post(tenant("patient"), small_chat()).await;
    assert_eq!(
        response.status,
        200,
        "{response:?}\n{}",
        stack.envoy.log_text()
    );
    response.assert_body_contains("\"waited\"");
    assert!(started.elapsed() >= Duration::from_secs(3));
    assert_eq!(stack.events("deferred").await, 1);
}

// ---------------------------------------------------------------------------
// Tenant from a validated JWT: Envoy's jwt_authn (local JWKS, key made here
// with the openssl CLI) puts the payload in dynamic metadata; the filter reads
// the tenant claim from there and ignores any tenant header.

fn base64url(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::new();
    for group in bytes.chunks(3) {
        let n = group
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | (u32::from(*b) << (16 - 8 * i)));
        for i in 0..=group.len() {
            out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
        }
    }
    out
}

fn openssl(args: &[&str], stdin: &[u8]) -> Vec<u8> {
    let mut child = std::process::Command::new("openssl")
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("openssl CLI (apt install openssl)");
    child.stdin.take().unwrap().write_all(stdin).unwrap();
    let output = child.wait_with_output().unwrap();
    sluice_testkit::assert_success(&output, &format!("openssl {args:?}"));
    output.stdout
}

/// An RSA key of its own: signs tokens, publishes its JWKS.
struct Issuer {
    key: tempfile::NamedTempFile,
}

const ISSUER: &str = "https://idp.sluice.test";

impl Issuer {
    fn new() -> Self {
        let key = tempfile::NamedTempFile::new().unwrap();
        let path = key.path().to_str().unwrap();
        openssl(&["genrsa", "-out", path, "2048"], b"");
        Issuer { key }
    }

    fn jwks(&self) -> String {
        let path = self.key.path().to_str().unwrap();
        let modulus =
            String::from_utf8(openssl(&["rsa", "-in", path, "-noout", "-modulus"], b"")).unwrap();
        let hex = modulus.trim().trim_start_matches("Modulus=");
        let bytes: Vec<u8> = (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
            .collect();
        serde_json::json!({"keys": [{"kty": "RSA", "alg": "RS256", "use": "sig", "kid": "k1",
            "n": base64url(&bytes), "e": "AQAB"}]})
        .to_string()
    }

    fn token(&self, tenant: &str) -> String {
        self.token_with(serde_json::json!(tenant))
    }

    /// A token whose `tenant` claim is `tenant`, whatever JSON it is.
    fn token_with(&self, tenant: serde_json::Value) -> String {
        let exp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs()
            + 3600;
        let header = base64url(br#"{"alg":"RS256","typ":"JWT","kid":"k1"}"#);
        let claims =
            serde_json::json!({"iss": ISSUER, "sub": "user-1", "tenant": tenant, "exp": exp});
        let input = format!("{header}.{}", base64url(claims.to_string().as_bytes()));
        let path = self.key.path().to_str().unwrap();
        let signature = openssl(&["dgst", "-sha256", "-sign", path], input.as_bytes());
        format!("{input}.{}", base64url(&signature))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_jwt_tenant_wins_over_a_forged_tenant_header() {
    let issuer = Issuer::new();
    let jwt_authn = format!(
        r#"                  - name: envoy.filters.http.jwt_authn
                    typed_config:
                      "@type": type.googleapis.com/envoy.extensions.filters.http.jwt_authn.v3.JwtAuthentication
                      providers:
                        test_idp:
                          issuer: {ISSUER}
                          local_jwks:
                            inline_string: '{}'
                          payload_in_metadata: payload
                      rules:
                        - match: {{ prefix: "/" }}
                          requires: {{ provider_name: test_idp }}
                  - name: envoy.filters.http.wasm
"#,
        issuer.jwks()
    );
    let stack = stack(
        &[
            (
                r#""tenant": { "header": "x-tenant-id" }"#,
                r#""tenant": { "property": ["metadata", "filter_metadata", "envoy.filters.http.jwt_authn", "payload", "tenant"] }"#,
            ),
            ("                  - name: envoy.filters.http.wasm\n", &jwt_authn),
        ],
        None,
    )
    .await;
    let before = (
        stack.tokens_left("alpha").await,
        stack.tokens_left("beta").await,
    );

    // Valid token for alpha, forged tenant headers for beta: alpha pays.
    let mut headers = tenant("beta");
    headers.push(("x-tenant", "beta".into()));
    headers.push(("authorization", format!("Bearer {}", issuer.token("alpha"))));
    let response = stack.post(headers, small_chat()).await;
    assert_eq!(
        response.status,
        200,
        "{response:?}\n{}",
        stack.envoy.log_text()
    );
    let after = (
        stack.tokens_left("alpha").await,
        stack.tokens_left("beta").await,
    );
    assert!(
        after.0 < before.0,
        "alpha not charged: {before:?} → {after:?}"
    );
    assert_eq!(after.1, before.1, "beta charged: {before:?} → {after:?}");

    // No token: refused by jwt_authn, whatever the tenant header says.
    // Refused before the body is read: sent without one, so Envoy closing
    // the connection cannot reset it under the client's feet.
    let response = stack.post(tenant("beta"), Vec::new()).await;
    assert_eq!(response.status, 401, "{response:?}");
    // A token signed by another key: refused too.
    let mut headers = tenant("beta");
    headers.push((
        "authorization",
        format!("Bearer {}", Issuer::new().token("beta")),
    ));
    assert_eq!(stack.post(headers, Vec::new()).await.status, 401);
    assert_eq!(stack.tokens_left("beta").await, before.1);
    // A tenant claim that is an object or a list is no identity: 401
    // invalid_tenant, never a garbled tenant. Refused at the headers: sent
    // without a body, as above.
    for claim in [
        serde_json::json!({"id": "alpha"}),
        serde_json::json!(["alpha", "beta"]),
    ] {
        let headers = vec![(
            "authorization",
            format!("Bearer {}", issuer.token_with(claim.clone())),
        )];
        let response = stack.post(headers, Vec::new()).await;
        assert_eq!(response.status, 401, "{claim}: {response:?}");
        response.assert_body_contains("invalid_tenant");
    }
    assert_eq!(stack.events("invalid_tenant").await, 2);
    assert_eq!(stack.events("admitted").await, 1);
}
