//! Shared helpers: a real redis-server, a real llm-sim, a consumer wired to both.
#![allow(dead_code)]

use redis::aio::ConnectionManager;
use serde_json::json;
use sluice_consumer::{
    connect, BackendConfig, IdempotencyConfig, Metrics, Priority, Processor, ProcessorConfig,
    RedisOptions, StreamConfig, WorkItem,
};
use sluice_testkit::RedisServer;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

pub fn redis_options(redis: &RedisServer) -> RedisOptions {
    RedisOptions {
        url: redis.url(),
        connect_timeout_ms: 500,
        response_timeout_ms: 1000,
    }
}

pub fn conn(redis: &RedisServer) -> ConnectionManager {
    connect(&redis_options(redis)).unwrap()
}

pub fn item(req_id: &str) -> WorkItem {
    WorkItem {
        req_id: req_id.into(),
        tenant: "acme".into(),
        model: "sim-model".into(),
        priority: Priority::Normal,
        path: "/v1/chat/completions".into(),
        body: json!({"model": "sim-model", "messages": [{"role": "user", "content": "hi"}]}),
        enqueued_at_ms: sluice_consumer::now_ms(),
        estimated_tokens: 20,
        attempt: 0,
    }
}

/// A consumer calling `base_url` with extra request headers (the llm-sim
/// steering headers).
pub fn consumer_with(
    redis: &RedisServer,
    base_url: &str,
    headers: &[(&str, &str)],
    idempotency: IdempotencyConfig,
) -> Processor {
    let mut backend = BackendConfig {
        connect_timeout_ms: 1000,
        first_byte_timeout_ms: 5000,
        idle_timeout_ms: 5000,
        ..BackendConfig::default()
    };
    backend.default.base_url = base_url.into();
    backend.default.headers = headers
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    Processor::new(
        conn(redis),
        "test-consumer",
        ProcessorConfig {
            backend,
            stream: StreamConfig::default(),
            idempotency,
        },
        Arc::new(Metrics::default()),
    )
    .unwrap()
}

pub fn consumer(redis: &RedisServer, base_url: &str, headers: &[(&str, &str)]) -> Processor {
    consumer_with(redis, base_url, headers, IdempotencyConfig::default())
}

/// Entries of a stream: (id, fields).
pub async fn entries(
    conn: &mut ConnectionManager,
    req_id: &str,
) -> Vec<(String, HashMap<String, String>)> {
    redis::cmd("XRANGE")
        .arg(sluice_consumer::keys::response(req_id))
        .arg("-")
        .arg("+")
        .query_async(conn)
        .await
        .unwrap()
}

pub async fn xlen(conn: &mut ConnectionManager, req_id: &str) -> u64 {
    redis::cmd("XLEN")
        .arg(sluice_consumer::keys::response(req_id))
        .query_async(conn)
        .await
        .unwrap()
}

/// Waits until the stream has at least `n` entries.
pub async fn wait_for_entries(conn: &mut ConnectionManager, req_id: &str, n: u64) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while xlen(conn, req_id).await < n {
        assert!(
            Instant::now() < deadline,
            "stream never reached {n} entries"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// `GET path` on the simulator, JSON body.
pub async fn sim_get(base_url: &str, path: &str) -> serde_json::Value {
    let addr = base_url.trim_start_matches("http://");
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut response = Vec::new();
    stream.read_to_end(&mut response).await.unwrap();
    let text = String::from_utf8_lossy(&response);
    let (_, body) = text.split_once("\r\n\r\n").unwrap();
    serde_json::from_str(body.trim()).unwrap_or_else(|e| panic!("{e}: {text}"))
}

/// How many requests with this `x-request-id` reached the simulated model.
pub async fn sim_calls(base_url: &str, req_id: &str) -> u64 {
    sim_get(base_url, &format!("/sim/calls?request_id={req_id}")).await["calls"]
        .as_u64()
        .unwrap()
}

/// Waits until the simulator counted at least `n` client disconnects.
pub async fn wait_for_disconnects(base_url: &str, n: u64) -> bool {
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        let stats = sim_get(base_url, "/sim/stats").await;
        if stats["client_disconnects"].as_u64().unwrap_or(0) >= n {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    false
}
