//! The stream hub against a real Redis: many waiting streams, few connections.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests fail loudly

use redis::AsyncCommands;
use sluice_contract::keys;
use sluice_deferral::hub::{Entry, HubOptions, StreamHub, Subscription};
use sluice_testkit::RedisServer;
use std::sync::Arc;
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

/// A hub on `redis` (`readers` readers, each XREAD blocking up to `block`)
/// and a connection to write entries with.
async fn hub_and_writer(
    redis: &RedisServer,
    readers: usize,
    block: Duration,
) -> (Arc<StreamHub>, redis::aio::MultiplexedConnection) {
    let hub = StreamHub::start(
        sluice_redis::RedisClient::open(&redis.url()).unwrap(),
        HubOptions {
            readers,
            block,
            buffer: 16,
        },
    )
    .unwrap();
    (hub, connect_writer(redis).await)
}

async fn connect_writer(redis: &RedisServer) -> redis::aio::MultiplexedConnection {
    let client = redis::Client::open(redis.url()).unwrap();
    client.get_multiplexed_async_connection().await.unwrap()
}

/// The subscription's next entry, within `within`.
async fn next_entry(subscription: &mut Subscription, within: Duration) -> Entry {
    tokio::time::timeout(within, subscription.entries.recv())
        .await
        .expect("entry not delivered")
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_streams_over_few_connections_in_order() {
    let redis = RedisServer::start().unwrap();
    let (hub, mut writer) = hub_and_writer(&redis, 2, Duration::from_secs(5)).await;

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
            let entry = next_entry(subscription, Duration::from_secs(10)).await;
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
    let (hub, mut writer) = hub_and_writer(&redis, 1, Duration::from_secs(30)).await;
    let _idle = hub.subscribe(&keys::response("idle"), "0-0").await;
    tokio::time::sleep(Duration::from_millis(200)).await; // the reader is now blocked for 30 s
    let mut late = hub.subscribe(&keys::response("late"), "$").await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    let started = Instant::now();
    xadd(&mut writer, &keys::response("late"), 1).await;
    let entry = next_entry(&mut late, Duration::from_secs(10)).await;
    assert_eq!(entry.field("type"), Some("chunk"));
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "woken by the block timeout, not the wake stream"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resume_from_an_id_and_survive_a_redis_restart() {
    let mut redis = RedisServer::start().unwrap();
    let (hub, mut writer) = hub_and_writer(&redis, 1, Duration::from_millis(500)).await;
    let first = xadd(&mut writer, &keys::response("r"), 0).await;
    xadd(&mut writer, &keys::response("r"), 1).await;
    let mut from_first = hub.subscribe(&keys::response("r"), &first).await;
    let entry = next_entry(&mut from_first, Duration::from_secs(5)).await;
    assert_eq!(
        entry.field("data"),
        Some("{\"n\":1}"),
        "resumed after the given id"
    );

    redis.restart().unwrap();
    let mut writer = connect_writer(&redis).await;
    let mut after = hub.subscribe(&keys::response("after"), "0-0").await;
    xadd(&mut writer, &keys::response("after"), 7).await;
    let entry = next_entry(&mut after, Duration::from_secs(10)).await;
    assert_eq!(entry.field("data"), Some("{\"n\":7}"));
}

/// A Redis restart, however short, is seen by the hub's readers (one waits
/// on Redis for every waiting request), so the endpoint's lease watch
/// judges no lapse right after it even when the request's own look at its
/// lease never met the outage: a Redis that restarted empty shows every
/// lease and claim as gone until their owners write them again, and a
/// request published again then could reach the model twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_short_redis_restart_is_seen_by_the_hub() {
    let mut redis = RedisServer::start().unwrap();
    let (hub, _writer) = hub_and_writer(&redis, 1, Duration::from_secs(5)).await;
    let _waiting = hub.subscribe(&keys::response("restart-seen"), "0-0").await;
    assert!(hub.last_redis_failure().is_none());
    let before = Instant::now();
    tokio::task::block_in_place(|| redis.restart()).unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while hub.last_redis_failure().is_none() {
        assert!(Instant::now() < deadline, "the hub did not see the restart");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(hub.last_redis_failure().unwrap() >= before);
}

/// A restart while nobody waits is seen too, at the next watch: the reader
/// connected when the hub started, and that connection fails once. A reader
/// that connected only after the restart could not tell.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_while_nobody_waits_is_seen_at_the_next_watch() {
    let mut redis = RedisServer::start().unwrap();
    let (hub, _writer) = hub_and_writer(&redis, 1, Duration::from_millis(200)).await;
    // Returns once the reader's connection is up; then nobody waits (the
    // reader's last read ends within its 200 ms block).
    drop(hub.subscribe(&keys::response("first"), "0-0").await);
    tokio::time::sleep(Duration::from_secs(1)).await;
    let before = Instant::now();
    tokio::task::block_in_place(|| redis.restart()).unwrap();
    let _waiting = hub.subscribe(&keys::response("second"), "0-0").await;
    let deadline = Instant::now() + Duration::from_secs(30);
    while hub.last_redis_failure().is_none() {
        assert!(Instant::now() < deadline, "the hub did not see the restart");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(hub.last_redis_failure().unwrap() >= before);
}
