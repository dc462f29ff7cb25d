//! In-process mode end to end: the real `sluice-allinone` binary (RLS +
//! deferral endpoint + consumer in one process), real Envoy with the Wasm filter, real Redis and broker, the
//! simulated backend. A deferred request still goes through its LiteTopic;
//! its chunks reach the client without touching the Redis Stream, which
//! holds only the terminal entry.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests fail loudly

use serde_json::Value;
use sluice_testkit::stack::{
    chunk_content, patient_chat, sse_data, start_filter_envoy, start_llm_sim,
};
use sluice_testkit::{
    allinone_command, free_port, http_request, wait_for_port, AllinonePorts, KillOnDrop,
    RedisServer, RocketMq,
};
use std::time::Duration;

#[test]
fn in_process_mode_answers_deferred_requests_without_the_redis_stream() {
    let redis = RedisServer::start().unwrap();
    let broker = RocketMq::start().unwrap();

    // The backend, on a runtime of its own: 20 tokens per answer.
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let mut sim = sluice_llm_sim::SimConfig::fast();
    sim.default_completion_tokens = 20;
    let backend = runtime.block_on(start_llm_sim(sim));

    let dir = tempfile::tempdir().unwrap();
    let limits = dir.path().join("limits.yaml");
    // `patient` gets 50 tokens an hour and defers the rest.
    std::fs::write(&limits, sluice_testkit::stack::limits::patient_defers()).unwrap();
    let consumer_config = dir.path().join("consumer.yaml");
    std::fs::write(
        &consumer_config,
        "pacing:\n  default_rates: { requests_per_second: 5 }\n",
    )
    .unwrap();
    let ports = AllinonePorts::free();
    let (grpc, deferral, consumer_admin) = (ports.grpc, ports.deferral, free_port());
    let _rls = KillOnDrop(
        allinone_command(&limits, &redis.url(), &broker.namesrv_addr(), &ports)
            .unwrap()
            .args(["--consumer-config", consumer_config.to_str().unwrap()])
            .args(["--backend-url", &format!("http://{backend}")])
            .args([
                "--consumer-admin-addr",
                &format!("127.0.0.1:{consumer_admin}"),
            ])
            .spawn()
            .unwrap(),
    );
    for port in [grpc, deferral, consumer_admin] {
        wait_for_port(([127, 0, 0, 1], port).into(), Duration::from_secs(30)).unwrap();
    }

    let envoy = runtime.block_on(start_filter_envoy(grpc, backend.port(), deferral));
    let envoy_addr = envoy.listener;
    let envoy = envoy.envoy;
    let chat = |stream: bool| patient_chat(envoy_addr, stream).unwrap();

    // Streamed: every chunk, in order, then [DONE]; ids are local sequence numbers.
    let response = chat(true);
    assert_eq!(response.status, 200, "{response:?}\n{}", envoy.log_text());
    let request_id = response.header("x-sluice-request-id").unwrap().to_string();
    let resume_token = response
        .header("x-sluice-resume-token")
        .unwrap()
        .to_string();
    let data = sse_data(&response.body);
    assert_eq!(*data.last().unwrap(), "[DONE]", "{}", response.body);
    let content = chunk_content(&data);
    assert_eq!(content.split_whitespace().count(), 20, "{content}");
    response.assert_body_contains("id: local-1\n");

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
    metrics.assert_body_contains("sluice_consumer_chunks_total");
}
