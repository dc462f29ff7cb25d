//! envoyproxy/ratelimit behaviours that involve Envoy, through a real Envoy
//! and its own `envoy.filters.http.ratelimit` (the repository's
//! envoy/ratelimit-filter.yaml): quota mode lets a request through while one
//! quota-mode descriptor still has room, the passing descriptor's `metadata`
//! reaches Envoy as dynamic metadata, and upstream's header style.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests fail loudly

use sluice_ratelimit::config::LimitsConfig;
use sluice_ratelimit::limiter::{
    HeaderStyle, Limiter, ResponseOptions, SystemClock, UpstreamHeaderNames,
};
use sluice_ratelimit::metrics::Metrics;
use sluice_ratelimit::server::{run, Deps};
use sluice_ratelimit::store::{CountingMode, MemoryStore};
use sluice_testkit::{
    free_port, http_request, workspace_root, Envoy, HttpResponse, StaticHttpServer,
};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// The two descriptors Envoy sends for `x-tenant: svc, x-model: m` are
/// (tenant=svc) and (tenant=svc, model=m): both in quota mode, 1 and 2 a minute.
const LIMITS: &str = r#"
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

async fn envoy_with_sluice() -> (Envoy, SocketAddr, tokio::sync::oneshot::Sender<()>) {
    let config =
        LimitsConfig::from_sources(&[(PathBuf::from("limits.yaml"), LIMITS.into())]).unwrap();
    let limiter = Arc::new(
        Limiter::new(
            config,
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
        }),
    );
    let grpc = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let rls_port = grpc.local_addr().unwrap().port();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(run(
        grpc,
        None,
        Deps {
            limiter,
            config_path: None,
            reload_interval: Duration::ZERO,
            ext_authz: None,
            deferral: None,
        },
        async {
            let _ = stopped.await;
        },
    ));
    let backend = StaticHttpServer::start("generated text\n").unwrap();
    let (admin_port, listener_port) = (free_port(), free_port());
    let template =
        std::fs::read_to_string(workspace_root().join("envoy/ratelimit-filter.yaml")).unwrap();
    let metadata_header = format!(
        "- name: llm\n                      response_headers_to_add:\n                        - header: {{ key: {METADATA_HEADER}, value: \"%DYNAMIC_METADATA(envoy.filters.http.ratelimit:metadata:service_with_quota:name)%\" }}"
    );
    let config = template
        .replace("port_value: 9901", &format!("port_value: {admin_port}"))
        .replace("port_value: 10000", &format!("port_value: {listener_port}"))
        .replace("port_value: 8081", &format!("port_value: {rls_port}"))
        .replace(
            "port_value: 8000",
            &format!("port_value: {}", backend.addr.port()),
        )
        .replace("- name: llm\n", &format!("{metadata_header}\n"));
    assert!(config.contains(METADATA_HEADER), "template changed");
    let envoy =
        tokio::task::spawn_blocking(move || Envoy::start(&config, admin_port, listener_port))
            .await
            .unwrap()
            .unwrap();
    (envoy, ([127, 0, 0, 1], listener_port).into(), stop)
}

async fn get(addr: SocketAddr) -> HttpResponse {
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
    let (envoy, listener, _stop) = envoy_with_sluice().await;

    // Both have room: allowed; on a clash of metadata keys the first wins.
    let first = get(listener).await;
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
    let second = get(listener).await;
    assert_eq!(second.status, 200, "{second:?}");
    assert_eq!(
        second.header(METADATA_HEADER),
        Some("model-quota"),
        "{second:?}"
    );

    // Every quota is spent: refused.
    let third = get(listener).await;
    assert_eq!(third.status, 429, "{third:?}");
}
