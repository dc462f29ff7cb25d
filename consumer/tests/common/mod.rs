//! Shared helpers: a real redis-server, a real llm-sim, a consumer wired to both.
#![allow(dead_code)]

use serde_json::json;
use sluice_consumer::{
    connect, BackendConfig, IdempotencyConfig, Metrics, Outcome, Priority, Processor,
    ProcessorConfig, RedisOptions, StreamConfig, WorkItem,
};
use sluice_llm_sim::{SimConfig, SimServer};
use sluice_redis::RedisConn;
use sluice_testkit::RedisServer;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::task::JoinHandle;

pub fn redis_options(redis: &RedisServer) -> RedisOptions {
    RedisOptions {
        connect_timeout_ms: 500,
        response_timeout_ms: 1000,
        ..RedisOptions::from_url(redis.url())
    }
}

pub fn conn(redis: &RedisServer) -> RedisConn {
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
        trace: None,
    }
}

/// llm-sim steering headers for a 5 s answer: 100 tokens, a chunk every 50 ms.
pub const SLOW_ANSWER: [(&str, &str); 2] = [
    ("x-sim-completion-tokens", "100"),
    ("x-sim-tokens-per-second", "20"),
];

/// A fresh redis-server and a fast llm-sim.
pub async fn redis_and_sim() -> (RedisServer, SimServer) {
    let redis = RedisServer::start().unwrap();
    let sim = sluice_llm_sim::spawn(SimConfig::fast()).await.unwrap();
    (redis, sim)
}

/// `base`'s default target set to `base_url` with extra request headers
/// (the llm-sim steering headers).
fn backend_to(
    mut backend: BackendConfig,
    base_url: &str,
    headers: &[(&str, &str)],
) -> BackendConfig {
    backend.default.base_url = base_url.into();
    backend.default.headers = headers
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    backend
}

fn processor(redis: &RedisServer, id: &str, config: ProcessorConfig) -> Processor {
    Processor::new(conn(redis), id, config, Arc::new(Metrics::default())).unwrap()
}

/// The processor's metrics have this line.
pub fn assert_metric(processor: &Processor, line: &str) {
    let metrics = processor.metrics().encode();
    assert!(metrics.contains(line), "no {line:?} in\n{metrics}");
}

/// A consumer on the Redis at `redis_url` (any topology), with claims on a
/// connection of their own, as the binaries run it.
pub fn consumer_at(redis_url: &str, base_url: &str, idempotency: IdempotencyConfig) -> Processor {
    let options = RedisOptions::from_url(redis_url);
    let config = ProcessorConfig {
        backend: backend_to(BackendConfig::default(), base_url, &[]),
        stream: StreamConfig::default(),
        idempotency,
    };
    let metrics = Arc::new(Metrics::default());
    let conn = connect(&options).unwrap();
    Processor::new(conn, "test-consumer", config, metrics)
        .unwrap()
        .with_claim_connection(connect(&options).unwrap())
}

/// A consumer calling `base_url` with extra request headers (the llm-sim
/// steering headers).
pub fn consumer_with(
    redis: &RedisServer,
    base_url: &str,
    headers: &[(&str, &str)],
    idempotency: IdempotencyConfig,
) -> Processor {
    let backend = BackendConfig {
        connect_timeout_ms: 1000,
        first_byte_timeout_ms: 5000,
        idle_timeout_ms: 5000,
        ..BackendConfig::default()
    };
    let config = ProcessorConfig {
        backend: backend_to(backend, base_url, headers),
        stream: StreamConfig::default(),
        idempotency,
    };
    processor(redis, "test-consumer", config)
}

/// A consumer with these backend timeouts (the rest default).
pub fn consumer_with_timeouts(
    redis: &RedisServer,
    base_url: &str,
    headers: &[(&str, &str)],
    first_byte_ms: u64,
    idle_ms: u64,
) -> Processor {
    let backend = BackendConfig {
        first_byte_timeout_ms: first_byte_ms,
        idle_timeout_ms: idle_ms,
        ..BackendConfig::default()
    };
    let config = ProcessorConfig {
        backend: backend_to(backend, base_url, headers),
        ..Default::default()
    };
    processor(redis, "timeouts", config)
}

/// `processor.process(item(req_id))` in a task of its own.
pub fn spawn_process(processor: &Arc<Processor>, req_id: &str) -> JoinHandle<Outcome> {
    let processor = processor.clone();
    let item = item(req_id);
    tokio::spawn(async move { processor.process(&item).await })
}

pub async fn set(conn: &mut RedisConn, key: &str, value: &str) {
    let _: () = redis::cmd("SET")
        .arg(key)
        .arg(value)
        .query_async(conn)
        .await
        .unwrap();
}

/// The answer to `command key` (a one-key read: GET, EXISTS, TTL, …).
pub async fn key_query<T: redis::FromRedisValue>(
    conn: &mut RedisConn,
    command: &str,
    key: &str,
) -> T {
    redis::cmd(command)
        .arg(key)
        .query_async(conn)
        .await
        .unwrap()
}

pub async fn get(conn: &mut RedisConn, key: &str) -> Option<String> {
    key_query(conn, "GET", key).await
}

pub async fn exists(conn: &mut RedisConn, key: &str) -> bool {
    key_query(conn, "EXISTS", key).await
}

/// The key's time to live, seconds (-1: none, -2: no key).
pub async fn ttl_s(conn: &mut RedisConn, key: &str) -> i64 {
    key_query(conn, "TTL", key).await
}

pub fn consumer(redis: &RedisServer, base_url: &str, headers: &[(&str, &str)]) -> Processor {
    consumer_with(redis, base_url, headers, IdempotencyConfig::default())
}

/// Entries of a stream: (id, fields).
pub async fn entries(conn: &mut RedisConn, req_id: &str) -> Vec<(String, HashMap<String, String>)> {
    redis::cmd("XRANGE")
        .arg(sluice_consumer::keys::response(req_id))
        .arg("-")
        .arg("+")
        .query_async(conn)
        .await
        .unwrap()
}

pub async fn xlen(conn: &mut RedisConn, req_id: &str) -> u64 {
    key_query(conn, "XLEN", &sluice_consumer::keys::response(req_id)).await
}

/// Waits until the stream has at least `n` entries.
pub async fn wait_for_entries(conn: &mut RedisConn, req_id: &str, n: u64) {
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
