//! In-process mode end to end: the real `sluice-allinone` binary (RLS +
//! deferral endpoint + consumer in one process), real Envoy with the Wasm filter, real Redis and broker, the
//! simulated backend. A deferred request still goes through its LiteTopic;
//! its chunks reach the client without touching the Redis Stream, which
//! holds only the terminal entry.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests fail loudly

use serde_json::Value;
use sluice_testkit::{
    free_port, http_request, wait_for_port, workspace_binary, Envoy, RedisServer, RocketMq,
};
use sluice_testkit::{sluice_filter_envoy_config, workspace_root, SluiceFilterPorts};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// `patient` gets 50 tokens an hour and defers the rest.
const LIMITS: &str = r#"
domain: sluice
descriptors:
  - key: tenant
    value: patient
    descriptors:
      - key: model
        rate_limit: { unit: hour, requests_per_unit: 1000, name: patient-rph }
        descriptors:
          - key: tokens
            rate_limit: { unit: hour, requests_per_unit: 50, name: patient-tph,
                          sluice: { over_limit: defer, priority: normal } }
"#;

struct Process(Child);

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn in_process_mode_answers_deferred_requests_without_the_redis_stream() {
    let redis = RedisServer::start().unwrap();
    let broker = RocketMq::start().unwrap();

    // The backend, on a runtime of its own: 20 tokens per answer.
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let backend_listener = runtime
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let backend = backend_listener.local_addr().unwrap();
    let mut sim = sluice_llm_sim::SimConfig::fast();
    sim.default_completion_tokens = 20;
    runtime.spawn(sluice_llm_sim::run(
        backend_listener,
        sim,
        std::future::pending::<()>(),
    ));

    let dir = tempfile::tempdir().unwrap();
    let limits = dir.path().join("limits.yaml");
    std::fs::write(&limits, LIMITS).unwrap();
    let consumer_config = dir.path().join("consumer.yaml");
    std::fs::write(
        &consumer_config,
        "pacing:\n  default_rates: { requests_per_second: 5 }\n",
    )
    .unwrap();
    let (grpc, admin, deferral, consumer_admin) =
        (free_port(), free_port(), free_port(), free_port());
    let _rls = Process(
        Command::new(workspace_binary("sluice-allinone").unwrap())
            .args(["--config", limits.to_str().unwrap()])
            .args(["--grpc-addr", &format!("127.0.0.1:{grpc}")])
            .args(["--admin-addr", &format!("127.0.0.1:{admin}")])
            .args(["--store", "redis", "--redis-url", &redis.url()])
            .args(["--deferral-addr", &format!("127.0.0.1:{deferral}")])
            .args([
                "--deferral-secret-file",
                workspace_root()
                    .join("config/deferral-secret.example")
                    .to_str()
                    .unwrap(),
            ])
            .args(["--namesrv", &broker.namesrv_addr()])
            .args(["--consumer-config", consumer_config.to_str().unwrap()])
            .args(["--backend-url", &format!("http://{backend}")])
            .args([
                "--consumer-admin-addr",
                &format!("127.0.0.1:{consumer_admin}"),
            ])
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap(),
    );
    for port in [grpc, deferral, consumer_admin] {
        wait_for_port(([127, 0, 0, 1], port).into(), Duration::from_secs(30)).unwrap();
    }

    let (envoy_admin, listener_port) = (free_port(), free_port());
    let config = sluice_filter_envoy_config(&SluiceFilterPorts {
        admin: envoy_admin,
        listener: listener_port,
        rls: grpc,
        backend: backend.port(),
        deferral,
    })
    .unwrap();
    let envoy = Envoy::start(&config, envoy_admin, listener_port).unwrap();
    let envoy_addr: SocketAddr = ([127, 0, 0, 1], listener_port).into();
    let chat = |stream: bool| {
        let body = serde_json::json!({
            "model": "gpt-4o",
            "max_tokens": 30,
            "stream": stream,
            "messages": [{"role": "user", "content": "hello ".repeat(40)}]
        });
        http_request(
            envoy_addr,
            "POST",
            "/v1/chat/completions",
            &[("x-tenant-id", "patient")],
            body.to_string().as_bytes(),
        )
        .unwrap()
    };

    // Streamed: every chunk, in order, then [DONE]; ids are local sequence numbers.
    let response = chat(true);
    assert_eq!(response.status, 200, "{response:?}\n{}", envoy.log_text());
    let request_id = response.header("x-sluice-request-id").unwrap().to_string();
    let resume_token = response
        .header("x-sluice-resume-token")
        .unwrap()
        .to_string();
    let data: Vec<&str> = response
        .body
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .collect();
    assert_eq!(*data.last().unwrap(), "[DONE]", "{}", response.body);
    let content: String = data
        .iter()
        .filter_map(|d| serde_json::from_str::<Value>(d).ok())
        .filter_map(|c| {
            c["choices"][0]["delta"]["content"]
                .as_str()
                .map(str::to_string)
        })
        .collect();
    assert_eq!(content.split_whitespace().count(), 20, "{content}");
    assert!(response.body.contains("id: local-1\n"), "{}", response.body);

    // The Redis Stream holds the terminal entry only: the chunks skipped it.
    let client = redis::Client::open(redis.url()).unwrap();
    let mut conn = client.get_connection().unwrap();
    let entries: Vec<(String, Vec<(String, String)>)> = redis::cmd("XRANGE")
        .arg(sluice_contract::keys::response(&request_id))
        .arg("-")
        .arg("+")
        .query(&mut conn)
        .unwrap();
    assert_eq!(entries.len(), 1, "{entries:?}");
    assert!(
        entries[0].1.contains(&("type".into(), "done".into())),
        "{entries:?}"
    );

    // Not resumable: said plainly.
    let resume = http_request(
        ([127, 0, 0, 1], deferral).into(),
        "GET",
        &format!("/v1/sluice/streams/{resume_token}"),
        &[("last-event-id", "local-3")],
        b"",
    )
    .unwrap();
    assert_eq!(resume.status, 409, "{resume:?}");

    // Not streamed: one JSON answer with usage.
    let response = chat(false);
    assert_eq!(response.status, 200, "{response:?}");
    let json: Value = serde_json::from_str(&response.body).unwrap();
    assert_eq!(json["object"], "chat.completion", "{json}");
    assert_eq!(json["usage"]["completion_tokens"], 20, "{json}");

    // The in-process consumer's admin API is up and counted the chunks.
    let metrics = http_request(
        ([127, 0, 0, 1], consumer_admin).into(),
        "GET",
        "/metrics",
        &[],
        b"",
    )
    .unwrap();
    assert!(
        metrics.body.contains("sluice_consumer_chunks_total"),
        "{}",
        metrics.body
    );
}
