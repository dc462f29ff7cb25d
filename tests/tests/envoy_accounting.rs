//! Exact accounting through real Envoy + the built Wasm filter + sluice-rls
//! on Redis + llm-sim: streamed answers whose client sent no
//! `include_usage`, and streams that break.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests fail loudly

use serde_json::Value;
use sluice_llm_sim::text::{approx_tokens, chat_prompt_tokens};
use sluice_proto::pb::envoy::extensions::common::ratelimit::v3::{
    rate_limit_descriptor::Entry, RateLimitDescriptor,
};
use sluice_proto::pb::envoy::service::ratelimit::v3::RateLimitRequest;
use sluice_proto::pb::google::protobuf::UInt64Value;
use sluice_ratelimit::config::LimitsConfig;
use sluice_ratelimit::limiter::{Limiter, SystemClock};
use sluice_ratelimit::metrics::Metrics;
use sluice_ratelimit::server::{run, Deps};
use sluice_ratelimit::store::{CountingMode, RedisStore, RedisStoreOptions};
use sluice_testkit::{
    free_port, http_request, sluice_filter_envoy_config, Envoy, HttpResponse, RedisServer,
    SluiceFilterPorts,
};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

const TOKEN_LIMIT: u64 = 1_000_000;

const LIMITS: &str = r#"
domain: sluice
descriptors:
  - key: tenant
    descriptors:
      - key: model
        rate_limit: { unit: hour, requests_per_unit: 100000, name: rph }
        descriptors:
          - key: tokens
            rate_limit: { unit: hour, requests_per_unit: 1000000, name: tph }
"#;

struct Stack {
    _envoy: Envoy,
    listener: SocketAddr,
    /// A second llm-sim with the same seed, reached without Sluice: what the
    /// client would have received.
    direct: SocketAddr,
    limiter: Arc<Limiter>,
    _redis: RedisServer,
    _stop: tokio::sync::oneshot::Sender<()>,
}

async fn spawn_sim() -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(sluice_llm_sim::run(
        listener,
        sluice_llm_sim::SimConfig::fast(),
        std::future::pending::<()>(),
    ));
    addr
}

async fn stack() -> Stack {
    let redis = RedisServer::start().unwrap();
    let store = RedisStore::new(&RedisStoreOptions {
        url: redis.url(),
        ..Default::default()
    })
    .unwrap();
    let limits =
        LimitsConfig::from_sources(&[(PathBuf::from("limits.yaml"), LIMITS.into())]).unwrap();
    let limiter = Arc::new(Limiter::new(
        limits,
        Arc::new(store),
        CountingMode::AllOrNothing,
        Arc::new(SystemClock),
        Arc::new(Metrics::new()),
    ));
    let grpc = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let rls = grpc.local_addr().unwrap().port();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let deps = Deps {
        limiter: limiter.clone(),
        config_path: None,
        reload_interval: Duration::ZERO,
        ext_authz: None,
        deferral: None,
    };
    tokio::spawn(run(grpc, None, deps, async {
        let _ = stopped.await;
    }));
    let backend = spawn_sim().await;
    let direct = spawn_sim().await;
    let ports = SluiceFilterPorts {
        admin: free_port(),
        listener: free_port(),
        rls,
        backend: backend.port(),
        deferral: free_port(),
    };
    let config = sluice_filter_envoy_config(&ports).unwrap();
    let (admin, listener) = (ports.admin, ports.listener);
    let envoy = tokio::task::spawn_blocking(move || Envoy::start(&config, admin, listener))
        .await
        .unwrap()
        .unwrap();
    Stack {
        _envoy: envoy,
        listener: ([127, 0, 0, 1], listener).into(),
        direct,
        limiter,
        _redis: redis,
        _stop: stop,
    }
}

async fn post(
    addr: SocketAddr,
    path: &'static str,
    tenant: &str,
    extra: &[(&'static str, &str)],
    body: String,
) -> HttpResponse {
    let mut headers = vec![
        ("x-tenant-id", tenant.to_string()),
        ("content-type", "application/json".to_string()),
    ];
    headers.extend(extra.iter().map(|(k, v)| (*k, v.to_string())));
    tokio::task::spawn_blocking(move || {
        let headers: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
        http_request(addr, "POST", path, &headers, body.as_bytes()).unwrap()
    })
    .await
    .unwrap()
}

impl Stack {
    /// Tokens used in the tenant's window so far, without charging anything.
    async fn tokens_used(&self, tenant: &str, model: &str) -> u64 {
        let entry = |k: &str, v: &str| Entry {
            key: k.into(),
            value: v.into(),
        };
        let request = RateLimitRequest {
            domain: "sluice".into(),
            descriptors: vec![RateLimitDescriptor {
                entries: vec![
                    entry("tenant", tenant),
                    entry("model", model),
                    entry("tokens", "total"),
                ],
                hits_addend: Some(UInt64Value { value: 0 }),
                ..Default::default()
            }],
            hits_addend: 0,
        };
        let left = self
            .limiter
            .should_rate_limit(&request)
            .await
            .unwrap()
            .statuses[0]
            .limit_remaining;
        TOKEN_LIMIT - u64::from(left)
    }

    /// Waits for the window to reach `expected` (reconciliation is sent after
    /// the answer); returns what it holds.
    async fn settled_usage(&self, tenant: &str, model: &str, expected: u64) -> u64 {
        let mut used = 0;
        for _ in 0..60 {
            used = self.tokens_used(tenant, model).await;
            if used == expected {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        used
    }
}

/// The same body through Sluice and straight to the twin simulator.
/// `created` is whole seconds: a pair that straddles a second is sent again.
async fn through_both(
    stack: &Stack,
    path: &'static str,
    tenant: &str,
    extra: &[(&'static str, &str)],
    body: &str,
) -> (HttpResponse, HttpResponse) {
    for _ in 0..3 {
        let (via, direct) = tokio::join!(
            post(stack.listener, path, tenant, extra, body.to_string()),
            post(stack.direct, path, tenant, extra, body.to_string()),
        );
        let created = |r: &HttpResponse| {
            r.body
                .lines()
                .find_map(|l| l.split_once("\"created\":").map(|(_, t)| t[..10].to_string()))
        };
        if created(&via) == created(&direct) {
            return (via, direct);
        }
    }
    panic!("three pairs in a row straddled a second");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_without_include_usage_is_byte_identical_and_charged_exactly() {
    let stack = stack().await;
    let content = "Count the tokens of this sentence, exactly.";
    let chat = serde_json::json!({
        "model": "gpt-4o",
        "stream": true,
        "max_tokens": 400,
        "messages": [{ "role": "user", "content": content }]
    })
    .to_string();
    // Pretty-printed, with stream_options that lacks include_usage.
    let completions = "{\n  \"model\": \"gpt-4o\",\n  \"stream\": true,\n  \"max_tokens\": 300,\n  \"prompt\": [\"one\", \"two two\"],\n  \"stream_options\": {}\n}";
    let mut expected = 0;
    for (path, body, tokens, prompt) in [
        (
            "/v1/chat/completions",
            chat.as_str(),
            "9",
            chat_prompt_tokens([content]),
        ),
        (
            "/v1/completions",
            completions,
            "5",
            approx_tokens("one") + approx_tokens("two two"),
        ),
    ] {
        let extra = [("x-sim-completion-tokens", tokens)];
        let (via, direct) = through_both(&stack, path, "quiet", &extra, body).await;
        assert_eq!(via.status, 200, "{via:?}");
        assert!(via.body.ends_with("data: [DONE]\n\n"), "{}", via.body);
        assert!(!via.body.contains("usage"), "{}", via.body);
        assert_eq!(via.body, direct.body, "{path}: the client sees other bytes");
        let choices = if path == "/v1/completions" { 2 } else { 1 };
        expected += prompt + choices * tokens.parse::<u64>().unwrap();
        assert_eq!(
            stack.settled_usage("quiet", "gpt-4o", expected).await,
            expected,
            "{path}: the window does not hold the real usage"
        );
    }

    // A client that asked for usage still gets it (and is charged it).
    let asked: Value = serde_json::from_str(&chat).unwrap();
    let mut asked = asked;
    asked["stream_options"] = serde_json::json!({ "include_usage": true });
    let extra = [("x-sim-completion-tokens", "4")];
    let (via, direct) =
        through_both(&stack, "/v1/chat/completions", "asks", &extra, &asked.to_string()).await;
    assert_eq!(via.body, direct.body);
    assert!(via.body.contains("\"completion_tokens\":4"), "{}", via.body);
    let expected = chat_prompt_tokens([content]) + 4;
    assert_eq!(
        stack.settled_usage("asks", "gpt-4o", expected).await,
        expected
    );
}
