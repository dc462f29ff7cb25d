//! The stream hub against a real Redis: many waiting streams, few connections.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests fail loudly

use redis::AsyncCommands;
use sluice_contract::keys;
use sluice_ratelimit::deferral::hub::{HubOptions, StreamHub};
use sluice_testkit::RedisServer;
use std::time::{Duration, Instant};

async fn xadd(conn: &mut redis::aio::MultiplexedConnection, key: &str, n: usize) -> String {
    conn.xadd(
        key,
        "*",
        &[("type", "chunk"), ("data", &format!("{{\"n\":{n}}}"))],
    )
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_streams_over_few_connections_in_order() {
    let redis = RedisServer::start().unwrap();
    let client = redis::Client::open(redis.url()).unwrap();
    let hub = StreamHub::start(
        sluice_redis::RedisClient::open(&redis.url()).unwrap(),
        HubOptions {
            readers: 2,
            block: Duration::from_secs(5),
            buffer: 16,
        },
    )
    .unwrap();
    let mut writer = client.get_multiplexed_async_connection().await.unwrap();

    let mut subscriptions = Vec::new();
    for i in 0..300 {
        subscriptions.push(
            hub.subscribe(&keys::response(&format!("req-{i}")), "0-0")
                .await,
        );
    }
    for round in 0..3 {
        for i in 0..300 {
            xadd(&mut writer, &keys::response(&format!("req-{i}")), round).await;
        }
    }
    for subscription in &mut subscriptions {
        for round in 0..3 {
            let entry = tokio::time::timeout(Duration::from_secs(10), subscription.entries.recv())
                .await
                .expect("entry not delivered")
                .unwrap();
            assert_eq!(
                entry.field("data"),
                Some(format!("{{\"n\":{round}}}").as_str())
            );
        }
    }
    // 2 readers + 1 control + the test's writer (+ the CLIENT LIST caller itself).
    let clients: String = redis::cmd("CLIENT")
        .arg("LIST")
        .query_async(&mut writer)
        .await
        .unwrap();
    assert!(clients.lines().count() <= 4, "{clients}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_watch_does_not_wait_for_the_block_timeout() {
    let redis = RedisServer::start().unwrap();
    let client = redis::Client::open(redis.url()).unwrap();
    let hub = StreamHub::start(
        sluice_redis::RedisClient::open(&redis.url()).unwrap(),
        HubOptions {
            readers: 1,
            block: Duration::from_secs(30),
            buffer: 16,
        },
    )
    .unwrap();
    let mut writer = client.get_multiplexed_async_connection().await.unwrap();
    let _idle = hub.subscribe(&keys::response("idle"), "0-0").await;
    tokio::time::sleep(Duration::from_millis(200)).await; // the reader is now blocked for 30 s
    let mut late = hub.subscribe(&keys::response("late"), "$").await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    let started = Instant::now();
    xadd(&mut writer, &keys::response("late"), 1).await;
    let entry = tokio::time::timeout(Duration::from_secs(10), late.entries.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(entry.field("type"), Some("chunk"));
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "woken by the block timeout, not the wake stream"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resume_from_an_id_and_survive_a_redis_restart() {
    let mut redis = RedisServer::start().unwrap();
    let client = redis::Client::open(redis.url()).unwrap();
    let hub = StreamHub::start(
        sluice_redis::RedisClient::open(&redis.url()).unwrap(),
        HubOptions {
            readers: 1,
            block: Duration::from_millis(500),
            buffer: 16,
        },
    )
    .unwrap();
    let mut writer = client.get_multiplexed_async_connection().await.unwrap();
    let first = xadd(&mut writer, &keys::response("r"), 0).await;
    xadd(&mut writer, &keys::response("r"), 1).await;
    let mut from_first = hub.subscribe(&keys::response("r"), &first).await;
    let entry = tokio::time::timeout(Duration::from_secs(5), from_first.entries.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        entry.field("data"),
        Some("{\"n\":1}"),
        "resumed after the given id"
    );

    redis.restart().unwrap();
    let mut writer = client.get_multiplexed_async_connection().await.unwrap();
    let mut after = hub.subscribe(&keys::response("after"), "0-0").await;
    xadd(&mut writer, &keys::response("after"), 7).await;
    let entry = tokio::time::timeout(Duration::from_secs(10), after.entries.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(entry.field("data"), Some("{\"n\":7}"));
}
