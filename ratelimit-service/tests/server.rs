//! The service as Envoy sees it: gRPC on a real socket, admin endpoints, hot reload.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests fail loudly

use sluice_proto::pb::envoy::extensions::common::ratelimit::v3::{
    rate_limit_descriptor::Entry, RateLimitDescriptor,
};
use sluice_proto::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
use sluice_proto::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use sluice_proto::pb::envoy::service::ratelimit::v3::RateLimitRequest;
use sluice_ratelimit::config::LimitsConfig;
use sluice_ratelimit::limiter::Limiter;
use sluice_ratelimit::reload::{ReloadOutcome, Reloader};
use sluice_ratelimit::server::{run, Deps};
use sluice_ratelimit::store::{CounterStore, MemoryStore, RedisStore, RedisStoreOptions};
use sluice_testkit::{http_request, RedisServer};
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tonic::transport::Channel;

mod common;

fn limits(per_minute: u32) -> String {
    format!(
        "domain: llm\ndescriptors:\n  - key: tenant\n    rate_limit: {{ unit: minute, requests_per_unit: {per_minute}, name: tenant-rpm }}\n"
    )
}

struct Running {
    grpc: SocketAddr,
    admin: SocketAddr,
    limiter: Arc<Limiter>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<anyhow::Result<()>>,
}

impl Running {
    async fn client(&self) -> RateLimitServiceClient<Channel> {
        RateLimitServiceClient::connect(format!("http://{}", self.grpc))
            .await
            .unwrap()
    }

    async fn shutdown(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        tokio::time::timeout(Duration::from_secs(10), self.task)
            .await
            .expect("server did not stop")
            .unwrap()
            .unwrap();
    }
}

async fn start(config_path: &Path, store: Arc<dyn CounterStore>, reload: Duration) -> Running {
    let config = LimitsConfig::load(config_path).unwrap();
    let limiter = common::limiter_on(config, store);
    let grpc = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let admin = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let (grpc_addr, admin_addr) = (grpc.local_addr().unwrap(), admin.local_addr().unwrap());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let deps = Deps {
        limiter: limiter.clone(),
        guard: Default::default(),
        config_path: Some(config_path.to_path_buf()),
        reload_interval: reload,
        ext_authz: None,
        deferral: None,
    };
    let task = tokio::spawn(run(grpc, Some(admin), deps, async {
        let _ = stopped.await;
    }));
    Running {
        grpc: grpc_addr,
        admin: admin_addr,
        limiter,
        stop: Some(stop),
        task,
    }
}

fn tenant_request(tenant: &str) -> RateLimitRequest {
    RateLimitRequest {
        domain: "llm".into(),
        descriptors: vec![RateLimitDescriptor {
            entries: vec![Entry {
                key: "tenant".into(),
                value: tenant.into(),
            }],
            ..Default::default()
        }],
        hits_addend: 0,
    }
}

async fn admin_get(addr: SocketAddr, path: &'static str) -> sluice_testkit::HttpResponse {
    tokio::task::spawn_blocking(move || http_request(addr, "GET", path, &[], b"").unwrap())
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_end_to_end_with_admin_endpoints() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("limits.yaml");
    std::fs::write(&path, limits(2)).unwrap();
    let server = start(&path, Arc::new(MemoryStore::new()), Duration::ZERO).await;
    let mut client = server.client().await;
    let mut codes = Vec::new();
    for _ in 0..3 {
        let response = client
            .should_rate_limit(tenant_request("acme"))
            .await
            .unwrap()
            .into_inner();
        codes.push(response.overall_code());
    }
    assert_eq!(codes, [Code::Ok, Code::Ok, Code::OverLimit]);

    // Malformed request: a gRPC error, not a decision.
    let status = client
        .should_rate_limit(RateLimitRequest {
            domain: "llm".into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(status.code(), tonic::Code::InvalidArgument);

    let health = admin_get(server.admin, "/healthz").await;
    assert_eq!(health.status, 200);
    let ready = admin_get(server.admin, "/readyz").await;
    assert_eq!(ready.status, 200);
    let metrics = admin_get(server.admin, "/metrics").await;
    assert_eq!(metrics.status, 200);
    for needle in [
        r#"sluice_rls_decisions_total{domain="llm",code="ok"} 2"#,
        r#"sluice_rls_decisions_total{domain="llm",code="over_limit"} 1"#,
        r#"sluice_rls_over_limit_total{domain="llm",limit="tenant-rpm"} 1"#,
        "sluice_rls_decision_duration_seconds_bucket",
        "sluice_rls_config_limits 1",
    ] {
        assert!(
            metrics.body.contains(needle),
            "missing {needle} in\n{}",
            metrics.body
        );
    }
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_outage_maps_to_unavailable_and_readyz() {
    let mut redis = RedisServer::start().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("limits.yaml");
    std::fs::write(&path, limits(100)).unwrap();
    let store = RedisStore::new(&RedisStoreOptions {
        redis: sluice_redis::RedisOptions::from_url(redis.url()),
        connections: 2,
        timeout: Duration::from_millis(300),
        ..Default::default()
    })
    .unwrap();
    let server = start(&path, Arc::new(store), Duration::ZERO).await;
    let mut client = server.client().await;
    assert!(client.should_rate_limit(tenant_request("a")).await.is_ok());
    redis.stop();
    let status = client
        .should_rate_limit(tenant_request("a"))
        .await
        .unwrap_err();
    assert_eq!(status.code(), tonic::Code::Unavailable, "{status:?}");
    assert_eq!(admin_get(server.admin, "/readyz").await.status, 503);
    redis.restart().unwrap();
    let mut back = false;
    for _ in 0..50 {
        if client.should_rate_limit(tenant_request("a")).await.is_ok() {
            back = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(back, "decisions did not recover after Redis came back");
    assert_eq!(admin_get(server.admin, "/readyz").await.status, 200);
    server.shutdown().await;
}

#[tokio::test]
async fn bad_reload_keeps_the_last_good_config() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("limits.yaml");
    std::fs::write(&path, limits(1)).unwrap();
    let limiter = common::memory_limiter(LimitsConfig::load(&path).unwrap());
    let mut reloader = Reloader::new(path.clone(), limiter.clone());
    assert_eq!(reloader.check(), ReloadOutcome::Unchanged);

    std::fs::write(
        &path,
        "domain: llm\ndescriptors:\n  - key: tenant\n    rate_limit: { requests_per_unit: 5 }\n",
    )
    .unwrap();
    match reloader.check() {
        ReloadOutcome::Rejected(message) => {
            assert!(message.contains("limits.yaml"), "{message}");
            assert!(message.contains("no 'unit'"), "{message}");
        }
        other => panic!("expected a rejection, got {other:?}"),
    }
    // Reported once per change, not every tick.
    assert_eq!(reloader.check(), ReloadOutcome::Unchanged);
    // Still enforcing the old limit of 1.
    let first = limiter
        .should_rate_limit(&tenant_request("x"))
        .await
        .unwrap();
    let second = limiter
        .should_rate_limit(&tenant_request("x"))
        .await
        .unwrap();
    assert_eq!(
        (first.overall_code(), second.overall_code()),
        (Code::Ok, Code::OverLimit)
    );

    std::fs::write(&path, limits(10)).unwrap();
    assert_eq!(reloader.check(), ReloadOutcome::Applied);
    let third = limiter
        .should_rate_limit(&tenant_request("x"))
        .await
        .unwrap();
    assert_eq!(third.overall_code(), Code::Ok);
    assert_eq!(
        third.statuses[0]
            .current_limit
            .as_ref()
            .unwrap()
            .requests_per_unit,
        10
    );
    let metrics = limiter.metrics().encode();
    assert!(
        metrics.contains(r#"sluice_rls_config_reloads_total{result="rejected"} 1"#),
        "{metrics}"
    );
    assert!(
        metrics.contains(r#"sluice_rls_config_reloads_total{result="applied"} 1"#),
        "{metrics}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reload_under_load_drops_no_request() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("limits.yaml");
    std::fs::write(&path, limits(1_000_000)).unwrap();
    let server = start(
        &path,
        Arc::new(MemoryStore::new()),
        Duration::from_millis(20),
    )
    .await;

    let mut workers = Vec::new();
    for worker in 0..8 {
        let mut client = server.client().await;
        workers.push(tokio::spawn(async move {
            let mut answered = 0u32;
            let deadline = tokio::time::Instant::now() + Duration::from_millis(1500);
            while tokio::time::Instant::now() < deadline {
                // Every call must get an answer: no error while configs swap.
                let response = client
                    .should_rate_limit(tenant_request(&format!("w{worker}")))
                    .await
                    .expect("decision failed during reload")
                    .into_inner();
                assert_eq!(response.overall_code(), Code::Ok);
                answered += 1;
            }
            answered
        }));
    }
    // Flip between two valid configs (and one broken one) while the load runs.
    for round in 0..12u32 {
        let text = match round % 3 {
            0 => limits(2_000_000 + round),
            1 => "domain: llm\ndescriptors: [".to_string(),
            _ => limits(3_000_000 + round),
        };
        std::fs::write(&path, text).unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mut total = 0;
    for worker in workers {
        total += worker.await.unwrap();
    }
    assert!(total > 0);
    let metrics = server.limiter.metrics().encode();
    assert!(
        metrics.contains("sluice_rls_config_reloads_total{result=\"applied\"}"),
        "{metrics}"
    );
    assert!(
        metrics.contains("sluice_rls_config_reloads_total{result=\"rejected\"}"),
        "{metrics}"
    );
    // The last write (round 11) is valid and live.
    let response = server
        .client()
        .await
        .should_rate_limit(tenant_request("final"))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        response.statuses[0]
            .current_limit
            .as_ref()
            .unwrap()
            .requests_per_unit,
        3_000_011
    );
    server.shutdown().await;
}
