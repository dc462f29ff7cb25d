//! The in-process consumer's admin API (`sluice-allinone
//! --consumer-admin-addr`) with the real binary, Redis and broker: bound
//! beyond loopback with `SLUICE_ADMIN_TOKEN` set, a rate change needs the
//! token; reads do not.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests fail loudly

use sluice_testkit::{
    allinone_command, free_port, http_request, wait_for_port, AllinonePorts, KillOnDrop,
    RedisServer, RocketMq,
};
use std::net::SocketAddr;
use std::time::Duration;

const TOKEN: &str = "in-process-admin-token-93c1";

#[test]
fn in_process_consumer_admin_writes_need_the_token() {
    let redis = RedisServer::start().unwrap();
    let broker = RocketMq::start().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let limits = dir.path().join("limits.yaml");
    std::fs::write(&limits, "domain: sluice\n").unwrap();
    let consumer_admin = free_port();
    let _rls = KillOnDrop(
        allinone_command(
            &limits,
            &redis.url(),
            &broker.namesrv_addr(),
            &AllinonePorts::free(),
        )
        .unwrap()
        .args(["--backend-url", "http://127.0.0.1:1"])
        .args([
            "--consumer-admin-addr",
            &format!("0.0.0.0:{consumer_admin}"),
        ])
        .env_remove("SLUICE_CONSUMER_CONFIG")
        .env_remove("SLUICE_ADMIN_TOKEN_FILE")
        .env("SLUICE_ADMIN_TOKEN", TOKEN)
        .spawn()
        .unwrap(),
    );
    let addr: SocketAddr = ([127, 0, 0, 1], consumer_admin).into();
    wait_for_port(addr, Duration::from_secs(60)).unwrap();

    let put = |headers: &[(&str, &str)]| {
        http_request(addr, "PUT", "/factor/gpt-4o?factor=0.5", headers, b"").unwrap()
    };
    let refused = put(&[]);
    assert_eq!(refused.status, 401, "{}", refused.body);
    refused.assert_body_contains("missing_token");
    let bearer = format!("Bearer {TOKEN}");
    let applied = put(&[("authorization", bearer.as_str())]);
    assert_eq!(applied.status, 200, "{}", applied.body);

    let rates = http_request(addr, "GET", "/rates", &[], b"").unwrap();
    assert_eq!(rates.status, 200, "{}", rates.body);
    let json: serde_json::Value = serde_json::from_str(&rates.body).unwrap();
    assert_eq!(json["gpt-4o"]["factor"], 0.5, "{json}");
    let metrics = http_request(addr, "GET", "/metrics", &[], b"").unwrap();
    assert!(
        metrics
            .body
            .contains("sluice_consumer_admin_refused_total{reason=\"missing_token\"} 1"),
        "{}",
        metrics.body
    );
}
