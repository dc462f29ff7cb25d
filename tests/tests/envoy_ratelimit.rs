//! Real Envoy, its own `envoy.filters.http.ratelimit` filter, and sluice-rls
//! (also in envoyproxy/ratelimit's quota mode, metadata and header style):
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests fail loudly
//! the repository's envoy/ratelimit-filter.yaml with its ports rewritten.

use sluice_ratelimit::config::LimitsConfig;
use sluice_ratelimit::limiter::{
    HeaderStyle, Limiter, ResponseOptions, SystemClock, UpstreamHeaderNames,
};
use sluice_ratelimit::metrics::Metrics;
use sluice_ratelimit::store::{
    CounterStore, CountingMode, MemoryStore, RedisStore, RedisStoreOptions,
};
use sluice_testkit::stack::{limiter, start_envoy, start_rls, Rls, RlsParts};
use sluice_testkit::{
    free_port, http_request, workspace_root, Envoy, EnvoyPorts, HttpResponse, RedisServer,
    StaticHttpServer,
};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// A tenant at 3 requests a minute, its model at 100.
const LIMITS: &str = include_str!("../fixtures/envoy_ratelimit_limits.yaml");

struct Stack {
    envoy: Envoy,
    listener: SocketAddr,
    _rls: Rls,
}

async fn stack(store: Arc<dyn CounterStore>) -> Stack {
    stack_with(limiter(LIMITS, store, Metrics::new()), |envoy_config| {
        envoy_config
    })
    .await
}

fn config(limits: &str) -> LimitsConfig {
    LimitsConfig::from_sources(&[(PathBuf::from("limits.yaml"), limits.into())]).unwrap()
}

/// sluice-rls with `limiter` behind Envoy, the example config edited by `edit`.
async fn stack_with(limiter: Arc<Limiter>, edit: impl FnOnce(String) -> String) -> Stack {
    let rls = start_rls(limiter, RlsParts::default()).await;
    let rls_port = rls.port;
    let backend = StaticHttpServer::start("generated text\n").unwrap();
    let (admin_port, listener_port) = (free_port(), free_port());
    let template =
        std::fs::read_to_string(workspace_root().join("envoy/ratelimit-filter.yaml")).unwrap();
    let config = EnvoyPorts {
        admin: admin_port,
        listener: listener_port,
        rls: rls_port,
        backend: backend.addr.port(),
        deferral: None,
    }
    .apply(&template);
    let config = edit(config);
    let envoy = start_envoy(config, admin_port, listener_port).await;
    Stack {
        envoy,
        listener: ([127, 0, 0, 1], listener_port).into(),
        _rls: rls,
    }
}

async fn get(addr: SocketAddr, headers: &'static [(&'static str, &'static str)]) -> HttpResponse {
    tokio::task::spawn_blocking(move || {
        http_request(addr, "GET", "/v1/models", headers, b"").unwrap()
    })
    .await
    .unwrap()
}

async fn n_plus_one_gets_429(store: Arc<dyn CounterStore>) {
    let stack = stack(store).await;
    let acme: &[(&str, &str)] = &[("x-tenant", "acme"), ("x-model", "gpt-4o")];
    for remaining in ["2", "1", "0"] {
        let response = get(stack.listener, acme).await;
        assert_eq!(
            response.status,
            200,
            "{response:?}\n{}",
            stack.envoy.log_text()
        );
        assert_eq!(response.body, "generated text\n");
        assert_eq!(
            response.header("ratelimit-remaining"),
            Some(remaining),
            "{response:?}"
        );
        assert_eq!(response.header("ratelimit-limit"), Some("3"));
    }
    let response = get(stack.listener, acme).await;
    assert_eq!(response.status, 429, "{response:?}");
    assert_eq!(response.header("ratelimit-limit"), Some("3"));
    assert_eq!(response.header("ratelimit-remaining"), Some("0"));
    let retry_after: u64 = response.header("retry-after").unwrap().parse().unwrap();
    assert!((1..=60).contains(&retry_after), "{response:?}");
    // Another tenant is unaffected.
    let other = get(
        stack.listener,
        &[("x-tenant", "other"), ("x-model", "gpt-4o")],
    )
    .await;
    assert_eq!(other.status, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn envoy_ratelimit_filter_with_memory_store() {
    n_plus_one_gets_429(Arc::new(MemoryStore::new())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn envoy_ratelimit_filter_with_redis_store() {
    let redis = RedisServer::start().unwrap();
    let store = RedisStore::new(&RedisStoreOptions {
        redis: sluice_redis::RedisOptions::from_url(redis.url()),
        ..Default::default()
    })
    .unwrap();
    n_plus_one_gets_429(Arc::new(store)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_down_lets_envoy_failure_mode_decide() {
    let mut redis = RedisServer::start().unwrap();
    let store = RedisStore::new(&RedisStoreOptions {
        redis: sluice_redis::RedisOptions::from_url(redis.url()),
        connections: 1,
        timeout: Duration::from_millis(100),
        ..Default::default()
    })
    .unwrap();
    let stack = stack(Arc::new(store)).await;
    let acme: &[(&str, &str)] = &[("x-tenant", "acme")];
    for _ in 0..3 {
        assert_eq!(get(stack.listener, acme).await.status, 200);
    }
    assert_eq!(get(stack.listener, acme).await.status, 429);
    redis.stop();
    // The example config has failure_mode_deny: false, so UNAVAILABLE means "let it through".
    for _ in 0..3 {
        let response = get(stack.listener, acme).await;
        assert_eq!(response.status, 200, "{response:?}");
        assert_eq!(response.header("ratelimit-limit"), None);
    }
    let stats = tokio::task::spawn_blocking({
        let admin: SocketAddr = ([127, 0, 0, 1], stack.envoy.admin_port).into();
        move || http_request(admin, "GET", "/stats?filter=ratelimit", &[], b"").unwrap()
    })
    .await
    .unwrap();
    assert!(
        stats.body.contains("ratelimit.error: 3")
            && stats.body.contains("ratelimit.failure_mode_allowed: 3"),
        "{}",
        stats.body
    );
}

// envoyproxy/ratelimit behaviours that involve Envoy: quota mode lets a
// request through while one quota-mode descriptor still has room, the passing
// descriptor's `metadata` reaches Envoy as dynamic metadata, and upstream's
// header style.

/// The two descriptors Envoy sends for `x-tenant: svc, x-model: m` are
/// (tenant=svc) and (tenant=svc, model=m): both in quota mode, 1 and 2 a minute.
const QUOTA_LIMITS: &str = r#"
domain: sluice
descriptors:
  - key: tenant
    value: svc
    quota_mode: true
    metadata: { service_with_quota: { name: tenant-quota } }
    rate_limit: { unit: minute, requests_per_unit: 1 }
    descriptors:
      - key: model
        quota_mode: true
        metadata: { service_with_quota: { name: model-quota } }
        rate_limit: { unit: minute, requests_per_unit: 2 }
"#;

/// Copies the ratelimit filter's dynamic metadata into a response header.
const METADATA_HEADER: &str = "x-quota-service";

/// The quota-mode limits, upstream's header style and dynamic metadata, and a
/// route that copies the ratelimit filter's dynamic metadata into a header.
async fn quota_stack() -> Stack {
    let limiter = Limiter::new(
        config(QUOTA_LIMITS),
        Arc::new(MemoryStore::new()),
        CountingMode::IncrementAll,
        Arc::new(SystemClock),
        Arc::new(Metrics::new()),
    )
    .with_response_options(ResponseOptions {
        headers: HeaderStyle::Upstream(UpstreamHeaderNames {
            limit: "X-RateLimit-Limit".into(),
            remaining: "X-RateLimit-Remaining".into(),
            reset: "X-RateLimit-Reset".into(),
        }),
        dynamic_metadata: true,
        ..Default::default()
    });
    let metadata_header = format!(
        "- name: llm\n                      response_headers_to_add:\n                        - header: {{ key: {METADATA_HEADER}, value: \"%DYNAMIC_METADATA(envoy.filters.http.ratelimit:metadata:service_with_quota:name)%\" }}"
    );
    stack_with(Arc::new(limiter), |envoy_config| {
        let edited = envoy_config.replace("- name: llm\n", &format!("{metadata_header}\n"));
        assert!(edited.contains(METADATA_HEADER), "template changed");
        edited
    })
    .await
}

async fn get_svc(addr: SocketAddr) -> HttpResponse {
    tokio::task::spawn_blocking(move || {
        http_request(
            addr,
            "GET",
            "/v1/models",
            &[("x-tenant", "svc"), ("x-model", "m")],
            b"",
        )
        .unwrap()
    })
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quota_mode_metadata_and_upstream_headers_through_envoy() {
    let stack = quota_stack().await;
    let (envoy, listener) = (&stack.envoy, stack.listener);

    // Both have room: allowed; on a clash of metadata keys the first wins.
    let first = get_svc(listener).await;
    assert_eq!(first.status, 200, "{first:?}\n{}", envoy.log_text());
    assert_eq!(
        first.header(METADATA_HEADER),
        Some("tenant-quota"),
        "{first:?}"
    );
    // Upstream's header style: the tightest descriptor (tenant: 1 a minute, none left).
    assert_eq!(first.header("x-ratelimit-limit"), Some("1"), "{first:?}");
    assert_eq!(first.header("x-ratelimit-remaining"), Some("0"));
    assert!(first.header("x-ratelimit-reset").is_some());
    assert_eq!(first.header("retry-after"), None, "not in upstream's style");

    // The tenant quota is spent, the model quota is not: still allowed, and
    // the metadata names the quota that let it through.
    let second = get_svc(listener).await;
    assert_eq!(second.status, 200, "{second:?}");
    assert_eq!(
        second.header(METADATA_HEADER),
        Some("model-quota"),
        "{second:?}"
    );

    // Every quota is spent: refused.
    let third = get_svc(listener).await;
    assert_eq!(third.status, 429, "{third:?}");
}
