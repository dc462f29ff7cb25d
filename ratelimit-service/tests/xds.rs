//! Limits over xDS: a management server started by the test pushes, changes
//! and withdraws `RateLimitConfig` resources; sluice-rls applies good sets,
//! NACKs bad ones, keeps the last good config, and reconnects.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests fail loudly

mod common;

use common::xds_server::ManagementServer;
use sluice_proto::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
use sluice_proto::pb::google::protobuf::Any;
use sluice_proto::rls_config::RateLimitConfig;
use sluice_ratelimit::config::{parse_file, LimitsConfig, LoadOptions};
use sluice_ratelimit::limiter::Limiter;
use sluice_ratelimit::xds::{to_resource, XdsClient, XdsOptions};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

fn resource(name: &str, yaml: &str) -> RateLimitConfig {
    to_resource(name, &parse_file(Path::new(name), yaml).unwrap())
}

fn per_minute(domain: &str, key: &str, limit: u32) -> String {
    format!(
        "domain: {domain}\ndescriptors:\n  - key: {key}\n    rate_limit: {{ unit: minute, requests_per_unit: {limit}, name: {key}-limit }}\n"
    )
}

struct Client {
    limiter: Arc<Limiter>,
    versions: watch::Receiver<Option<String>>,
    _stop: watch::Sender<bool>,
}

fn start_client(server: &str, files: Vec<(PathBuf, String)>) -> Client {
    let config = LimitsConfig::from_sources_with(&files, LoadOptions::default()).unwrap();
    let limiter = common::memory_limiter(config);
    let (client, versions) = XdsClient::new(
        XdsOptions {
            server: server.to_string(),
            node_id: "test-node".into(),
            backoff_initial: Duration::from_millis(50),
            backoff_max: Duration::from_millis(200),
            ..Default::default()
        },
        limiter.clone(),
    );
    let (stop, mut stopped) = watch::channel(false);
    tokio::spawn(client.run(async move {
        let _ = stopped.wait_for(|s| *s).await;
    }));
    Client {
        limiter,
        versions,
        _stop: stop,
    }
}

impl Client {
    async fn wait_version(&mut self, version: &str) {
        tokio::time::timeout(
            Duration::from_secs(10),
            self.versions.wait_for(|v| v.as_deref() == Some(version)),
        )
        .await
        .unwrap_or_else(|_| panic!("version {version} not applied within 10 s"))
        .unwrap();
    }

    /// Checks that a one-entry `key` descriptor of `domain` gets the limit
    /// [`per_minute`] wrote for `key`, at `requests` a minute.
    async fn assert_per_minute(&self, domain: &str, key: &str, requests: u32) {
        assert_eq!(
            self.limit(domain, key).await,
            Some((format!("{key}-limit"), requests))
        );
    }

    /// The limit (name, requests_per_unit) a one-entry descriptor gets, if any.
    async fn limit(&self, domain: &str, key: &str) -> Option<(String, u32)> {
        let request = common::one_entry_request(domain, key, "v");
        let response = self.limiter.should_rate_limit(&request).await.unwrap();
        assert_eq!(response.overall_code(), Code::Ok);
        response.statuses[0]
            .current_limit
            .as_ref()
            .map(|l| (l.name.clone(), l.requests_per_unit))
    }
}

/// A management server serving `xd`'s tenant limit (10 a minute) as
/// version v1, and a client (no files) that has applied it.
async fn serving_v1() -> (ManagementServer, Client) {
    let server = ManagementServer::start(None).await;
    let mut client = start_client(&server.url(), Vec::new());
    server.set("v1", &[resource("a", &per_minute("xd", "tenant", 10))]);
    client.wait_version("v1").await;
    (server, client)
}

#[tokio::test]
async fn push_change_reject_and_withdraw() {
    let (server, mut client) = serving_v1().await;
    let subscribe_ack = server.next_reply().await;
    assert_eq!(
        subscribe_ack.version_info, "v1",
        "ACK carries the new version"
    );
    assert!(subscribe_ack.error_detail.is_none());
    client.assert_per_minute("xd", "tenant", 10).await;

    // A set upstream would refuse (a unit on an unlimited limit) is NACKed.
    let mut bad = resource("a", &per_minute("xd", "tenant", 99));
    let policy = bad.descriptors[0].rate_limit.as_mut().unwrap();
    policy.unlimited = true;
    server.set("v2", &[bad]);
    let nack = server.next_reply().await;
    assert_eq!(nack.version_info, "v1", "NACK names the last good version");
    let detail = nack.error_detail.expect("NACK has an error");
    assert!(detail.message.contains("xds:a"), "{}", detail.message);
    assert!(detail.message.contains("unit"), "{}", detail.message);
    assert_eq!(
        client.limit("xd", "tenant").await,
        Some(("tenant-limit".into(), 10)),
        "the last good config stays"
    );

    // A resource of another type is NACKed too.
    server.set_raw(
        "v2b",
        vec![Any {
            type_url: "type.googleapis.com/envoy.config.cluster.v3.Cluster".into(),
            value: Vec::new(),
        }],
    );
    let nack = server.next_reply().await;
    assert!(nack.error_detail.unwrap().message.contains("Cluster"));

    // A change, with a second domain.
    server.set(
        "v3",
        &[
            resource("a", &per_minute("xd", "tenant", 20)),
            resource("b", &per_minute("other", "user", 5)),
        ],
    );
    client.wait_version("v3").await;
    client.assert_per_minute("xd", "tenant", 20).await;
    client.assert_per_minute("other", "user", 5).await;
    assert_eq!(server.next_reply().await.version_info, "v3");

    // Withdrawn: an empty set removes every xDS domain.
    server.set("v4", &[]);
    client.wait_version("v4").await;
    assert_eq!(client.limit("xd", "tenant").await, None);
    assert!(!client.limiter.config().has_domain("other"));
}

#[tokio::test]
async fn xds_next_to_files() {
    let server = ManagementServer::start(None).await;
    let files = vec![(
        PathBuf::from("files.yaml"),
        per_minute("from-file", "tenant", 3),
    )];
    let mut client = start_client(&server.url(), files);
    server.set("v1", &[resource("x", &per_minute("from-xds", "tenant", 7))]);
    client.wait_version("v1").await;
    client.assert_per_minute("from-file", "tenant", 3).await;
    client.assert_per_minute("from-xds", "tenant", 7).await;
    // A domain the files already define is refused (no --merge-domains).
    server.set(
        "v2",
        &[resource("x", &per_minute("from-file", "tenant", 7))],
    );
    let _ack_v1 = server.next_reply().await;
    let nack = server.next_reply().await;
    let message = nack.error_detail.unwrap().message;
    assert!(
        message.contains("already defined in files.yaml"),
        "{message}"
    );
    client.assert_per_minute("from-xds", "tenant", 7).await;
}

#[tokio::test]
async fn reconnects_and_keeps_the_last_good_config_meanwhile() {
    let (server, mut client) = serving_v1().await;
    let addr = server.stop().await;

    // The server is gone: decisions go on with the last good limits.
    tokio::time::sleep(Duration::from_millis(300)).await;
    client.assert_per_minute("xd", "tenant", 10).await;

    // Back on the same address with new limits: the client finds it again.
    let server = ManagementServer::start(Some(addr)).await;
    server.set("v2", &[resource("a", &per_minute("xd", "tenant", 30))]);
    client.wait_version("v2").await;
    let resubscribe = server.next_reply().await;
    assert_eq!(resubscribe.version_info, "v2");
    client.assert_per_minute("xd", "tenant", 30).await;
}
