//! The deferral endpoint with a real broker and a real Redis: a deferred
//! request is queued in its tenant × model LiteTopic and its client is
//! answered from the Redis Stream (written here the way the consumer writes
//! it), as SSE or as one JSON answer.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests fail loudly
#![recursion_limit = "256"] // rocketmq-client futures are deeply nested

use redis::AsyncCommands;
use serde_json::Value;
use sluice_admission::deferral;
use sluice_deferral::endpoint::{EndpointMetrics, EndpointOptions};
use sluice_deferral::EndpointConfig;
use sluice_litetopic::{lite_topic_name, LiteClient, LiteConfig, LiteConsumer, LiteMessage};
use sluice_testkit::stack::{
    endpoint_config, redis_and_broker, start_deferral_endpoint, GROUP, PARENT,
};
use sluice_testkit::{
    example_deferral_secret, http_request, new_request_id, sign_deferral_headers, HttpResponse,
    RedisServer, RocketMq,
};
use sluice_testkit::{parse_raw_response, read_raw_response};
use std::io::{Read, Write};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

struct Setup {
    addr: SocketAddr,
    redis: redis::aio::MultiplexedConnection,
    consumer: LiteConsumer,
    metrics: Arc<EndpointMetrics>,
    _broker: RocketMq,
    _redis_server: RedisServer,
    _client: LiteClient,
}

async fn setup(options: EndpointOptions) -> Setup {
    setup_with_metrics(options, Arc::new(EndpointMetrics::default())).await
}

async fn setup_with_metrics(options: EndpointOptions, metrics: Arc<EndpointMetrics>) -> Setup {
    let (redis_server, broker) = redis_and_broker().await;
    let client = redis::Client::open(redis_server.url()).unwrap();
    let addr = start_deferral_endpoint(EndpointConfig {
        options,
        metrics: metrics.clone(),
        ..endpoint_config(&redis_server, &broker)
    })
    .await;
    let lite_client = LiteClient::connect(LiteConfig::new(broker.namesrv_addr())).unwrap();
    let consumer = LiteConsumer::new(&lite_client, GROUP, PARENT)
        .await
        .unwrap();
    Setup {
        addr,
        redis: client.get_multiplexed_async_connection().await.unwrap(),
        consumer,
        metrics,
        _broker: broker,
        _redis_server: redis_server,
        _client: lite_client,
    }
}

fn markers(req_id: &str, tenant: &str) -> Vec<(&'static str, String)> {
    sluice_testkit::deferral_markers(req_id, tenant, "high", 42)
}

/// Binds request `id` to `tenant`, as the endpoint does when it queues one.
async fn own(redis: &mut redis::aio::MultiplexedConnection, id: &str, tenant: &str) {
    let _: () = redis
        .set(sluice_consumer::keys::owner(id), tenant)
        .await
        .unwrap();
}

/// POSTs a deferred request, signed as the filter signs it.
fn post(
    addr: SocketAddr,
    mut headers: Vec<(&'static str, String)>,
    body: &str,
) -> tokio::task::JoinHandle<HttpResponse> {
    sign_deferral_headers(&mut headers, body.as_bytes());
    post_unsigned(addr, headers, body)
}

/// POSTs exactly these headers (forgeries).
fn post_unsigned(
    addr: SocketAddr,
    headers: Vec<(&'static str, String)>,
    body: &str,
) -> tokio::task::JoinHandle<HttpResponse> {
    sluice_testkit::spawn_post(addr, "/v1/chat/completions", headers, body)
}

/// Subscribe to a tenant's bucket before its first request is published (a
/// LiteTopic subscription does not see messages sent before it: see
/// lite-topic/README.md).
async fn watch(consumer: &LiteConsumer, tenant: &str) {
    let topic = lite_topic_name(tenant, "gpt-4o");
    consumer.subscribe(&[topic.as_str()]).await.unwrap();
}

/// What a consumer does after subscribing (consumer/src/queue/runner.rs): mark it.
async fn mark_subscribed(redis: &mut redis::aio::MultiplexedConnection, tenant: &str) {
    let topic = lite_topic_name(tenant, "gpt-4o");
    let _: () = redis
        .set(sluice_consumer::keys::subscribed(&topic), 1)
        .await
        .unwrap();
}

/// `response` has `status` and a body that says `part`.
#[track_caller]
fn assert_answer(response: &HttpResponse, status: u16, part: &str) {
    assert_eq!(response.status, status, "{response:?}");
    response.assert_body_contains(part);
}

/// Nothing reaches `consumer` within 800 ms.
async fn assert_nothing_queued(consumer: &LiteConsumer) {
    let popped = consumer
        .pop(1, Duration::from_secs(30), Duration::from_millis(800))
        .await
        .unwrap();
    assert!(popped.is_empty(), "{popped:?}");
}

/// A consumer's lease on `req_id`, lapsing in `millis`.
async fn set_lease(redis: &mut redis::aio::MultiplexedConnection, req_id: &str, millis: u64) {
    let _: () = redis::cmd("SET")
        .arg(sluice_contract::keys::lease(req_id))
        .arg(1)
        .arg("PX")
        .arg(millis)
        .query_async(redis)
        .await
        .unwrap();
}

/// A consumer's claim on `req_id`: `heartbeat` is "<consumer> <millis>".
async fn set_claim(redis: &mut redis::aio::MultiplexedConnection, req_id: &str, heartbeat: &str) {
    let _: () = redis::cmd("SET")
        .arg(sluice_contract::keys::processing(req_id))
        .arg(heartbeat)
        .query_async(redis)
        .await
        .unwrap();
}

/// Pop the deferred request from its LiteTopic, as the consumer will.
async fn pop_work(consumer: &LiteConsumer, tenant: &str) -> (LiteMessage, Value) {
    let topic = lite_topic_name(tenant, "gpt-4o");
    // By time, not by tries: this broker answers a long poll early (~21 ms)
    // while a LiteTopic has a message in flight.
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    while std::time::Instant::now() < deadline {
        let messages = consumer
            .pop(1, Duration::from_secs(30), Duration::from_millis(500))
            .await
            .unwrap();
        if let Some(message) = messages.into_iter().next() {
            let work: Value = serde_json::from_slice(&message.body).unwrap();
            return (message, work);
        }
    }
    panic!("nothing published to {topic}");
}

async fn answer(redis: &mut redis::aio::MultiplexedConnection, req_id: &str, words: &[&str]) {
    let key = sluice_contract::keys::response(req_id);
    for word in words {
        let chunk = serde_json::json!({"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "gpt-4o",
            "choices": [{"index": 0, "delta": {"content": word}, "finish_reason": null}]});
        let _: String = redis
            .xadd(
                &key,
                "*",
                &[("type", "chunk"), ("data", &chunk.to_string())],
            )
            .await
            .unwrap();
    }
    let last = serde_json::json!({"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "gpt-4o",
        "choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": words.len(), "total_tokens": 5 + words.len()}});
    let _: String = redis
        .xadd(&key, "*", &[("type", "chunk"), ("data", &last.to_string())])
        .await
        .unwrap();
    let _: String = redis.xadd(&key, "*", &[("type", "done")]).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queued_then_streamed_back_as_sse_and_json() {
    let mut s = setup(EndpointOptions::default()).await;
    let body =
        r#"{"model": "gpt-4o", "stream": true, "messages": [{"role": "user", "content": "hi"}]}"#;
    watch(&s.consumer, "acme").await;
    mark_subscribed(&mut s.redis, "acme").await;
    let client = post(s.addr, markers("req-sse-1", "acme"), body);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !client.is_finished(),
        "answered before any output: {:?}",
        client.await.unwrap()
    );
    let (message, work) = pop_work(&s.consumer, "acme").await;
    assert_eq!(
        message.properties.get("reqId").map(String::as_str),
        Some("req-sse-1")
    );
    assert_eq!(work["req_id"], "req-sse-1");
    assert_eq!(work["tenant"], "acme");
    assert_eq!(work["priority"], "high");
    assert_eq!(work["estimated_tokens"], 42);
    assert_eq!(work["path"], "/v1/chat/completions");
    assert_eq!(work["body"]["messages"][0]["content"], "hi");
    answer(&mut s.redis, "req-sse-1", &["Hel", "lo"]).await;
    let response = client.await.unwrap();
    assert_eq!(response.status, 200);
    assert_eq!(response.header("content-type"), Some("text/event-stream"));
    assert_eq!(response.header("x-sluice-request-id"), Some("req-sse-1"));
    let events: Vec<&str> = response
        .body
        .split("\n\n")
        .filter(|e| !e.is_empty())
        .collect();
    // First a comment saying it is queued, and where (first in its bucket).
    assert_eq!(
        events[0],
        ": queued; position 1 in this tenant × model queue"
    );
    assert_eq!(response.header("x-sluice-queue-position"), Some("1"));
    // Then the resume token (also in a header), bound to the tenant.
    let token = response.header("x-sluice-resume-token").unwrap();
    assert_eq!(events[1], format!(": resume-token {token}"));
    assert!(deferral::verify_resume_token(
        token,
        &[example_deferral_secret()],
        "acme"
    ));
    assert!(
        events[2].starts_with("id: ") && events[2].contains("\ndata: {"),
        "{}",
        events[2]
    );
    assert!(events[2].contains("\"Hel\""));
    assert_eq!(*events.last().unwrap(), "data: [DONE]");
    // The client did not ask for usage: the usage-only chunk is not forwarded.
    assert!(
        !response.body.contains("\"choices\":[]"),
        "{}",
        response.body
    );

    // Not streamed: one chat.completion with usage.
    let body = r#"{"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}"#;
    watch(&s.consumer, "bravo").await;
    mark_subscribed(&mut s.redis, "bravo").await;
    let client = post(s.addr, markers("req-json-1", "bravo"), body);
    let _ = pop_work(&s.consumer, "bravo").await;
    answer(&mut s.redis, "req-json-1", &["a", "b", "c"]).await;
    let response = client.await.unwrap();
    assert_eq!(response.status, 200, "{response:?}");
    let json: Value = serde_json::from_str(&response.body).unwrap();
    assert_eq!(json["object"], "chat.completion");
    assert_eq!(json["choices"][0]["message"]["content"], "abc");
    assert_eq!(json["usage"]["completion_tokens"], 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_markers_publish_nothing_and_errors_end_streams() {
    let mut s = setup(EndpointOptions::default()).await;
    watch(&s.consumer, "charlie").await;
    mark_subscribed(&mut s.redis, "charlie").await;
    let body = r#"{"model": "gpt-4o", "stream": true, "messages": []}"#;
    let mut no_marker = markers("req-x", "charlie");
    no_marker.remove(0);
    let response = post(s.addr, no_marker, body).await.unwrap();
    assert_eq!(response.status, 400);
    let mut bad_id = markers("req\u{1}x", "charlie");
    bad_id[1].1 = "has spaces and \"quotes\"".into();
    assert_eq!(post(s.addr, bad_id, body).await.unwrap().status, 400);
    assert_eq!(
        post(s.addr, markers("req-y", "charlie"), "{not json")
            .await
            .unwrap()
            .status,
        400
    );
    // Nothing reached the broker for that tenant.
    assert_nothing_queued(&s.consumer).await;

    // A model error ends the stream with an SSE error event; JSON clients get its status.
    watch(&s.consumer, "delta").await;
    mark_subscribed(&mut s.redis, "delta").await;
    let client = post(s.addr, markers("req-err", "delta"), body);
    let _ = pop_work(&s.consumer, "delta").await;
    let _: String = s
        .redis
        .xadd(
            sluice_contract::keys::response("req-err"),
            "*",
            &[
                ("type", "error"),
                ("status", "502"),
                ("code", "backend_error"),
                ("message", "model exploded"),
            ],
        )
        .await
        .unwrap();
    let response = client.await.unwrap();
    response.assert_body_contains("event: error\ndata: {");
    assert!(response.body.contains("model exploded"));
    assert!(!response.body.contains("[DONE]"));
}

/// An endpoint that cancels a lost connection's call after `grace`.
async fn setup_with_cancel_grace(grace: Duration) -> Setup {
    setup(EndpointOptions {
        cancel_grace: grace,
        ..Default::default()
    })
    .await
}

/// Sends a streaming deferred request as `req_id`, reads its first bytes
/// and goes away (the connection closed mid-wait).
fn leave_while_queued(addr: std::net::SocketAddr, req_id: &str) {
    let body = r#"{"model": "gpt-4o", "stream": true, "messages": []}"#;
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    let mut request = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\ncontent-length: {}\r\n",
        body.len()
    );
    let mut gone = markers(req_id, "echo");
    sign_deferral_headers(&mut gone, body.as_bytes());
    for (k, v) in gone {
        request.push_str(&format!("{k}: {v}\r\n"));
    }
    request.push_str("\r\n");
    request.push_str(body);
    stream.write_all(request.as_bytes()).unwrap();
    let mut first = [0u8; 64];
    let _ = stream.read(&mut first).unwrap();
}

/// A client whose connection closed, then resumed within the cancel grace
/// (as after an Envoy restart): the model call is not cancelled.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_resumed_within_the_cancel_grace_keeps_its_call() {
    let grace = Duration::from_secs(1);
    let mut s = setup_with_cancel_grace(grace).await;
    leave_while_queued(s.addr, "req-back");
    answer(&mut s.redis, "req-back", &["one"]).await;
    let token = deferral::resume_token(&example_deferral_secret(), "req-back", "echo");
    let addr = s.addr;
    let resumed = tokio::task::spawn_blocking(move || {
        http_request(
            addr,
            "GET",
            &deferral::resume_path(&token),
            &[("last-event-id", "0-0")],
            b"",
        )
        .unwrap()
    })
    .await
    .unwrap();
    assert_eq!(resumed.status, 200, "{resumed:?}");
    resumed.assert_body_contains("\"one\"");
    // Past the grace of the waiter that left: no cancel.
    tokio::time::sleep(grace * 2).await;
    let cancelled: bool = s
        .redis
        .exists(sluice_contract::keys::cancel("req-back"))
        .await
        .unwrap();
    assert!(
        !cancelled,
        "the call was cancelled although its stream was resumed"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn disconnect_cancels_and_streams_resume() {
    let mut s = setup_with_cancel_grace(Duration::from_millis(100)).await;
    // A client that goes away while queued and does not come back within
    // the cancel grace: cancel:{id} is set for the consumer.
    leave_while_queued(s.addr, "req-gone");
    let mut cancelled = false;
    for _ in 0..50 {
        if s.redis
            .exists::<_, bool>(sluice_contract::keys::cancel("req-gone"))
            .await
            .unwrap()
        {
            cancelled = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        cancelled,
        "cancel:{{req-gone}} not set after the client left"
    );

    // Resume from Last-Event-ID with the request's resume token while the
    // stream exists; 410 once it does not.
    let id = new_request_id();
    own(&mut s.redis, &id, "echo").await;
    answer(&mut s.redis, &id, &["one", "two"]).await;
    let entries: redis::streams::StreamRangeReply = s
        .redis
        .xrange_all(sluice_consumer::keys::response(&id))
        .await
        .unwrap();
    let first_id = entries.ids[0].id.clone();
    let addr = s.addr;
    let secret = example_deferral_secret();
    let token = deferral::resume_token(&secret, &id, "echo");
    let get = move |path: String, last: String| {
        tokio::task::spawn_blocking(move || {
            http_request(addr, "GET", &path, &[("last-event-id", last.as_str())], b"").unwrap()
        })
    };
    // Neither the bare id nor another tenant's token opens it.
    for path in [
        format!("/v1/sluice/streams/{id}"),
        format!(
            "/v1/sluice/streams/{}",
            deferral::resume_token(&secret, &id, "other")
        ),
    ] {
        let refused = get(path, first_id.clone()).await.unwrap();
        assert_eq!(refused.status, 404, "{refused:?}");
        assert!(!refused.body.contains("\"two\""), "{}", refused.body);
    }
    let resumed = get(format!("/v1/sluice/streams/{token}"), first_id)
        .await
        .unwrap();
    assert_eq!(resumed.status, 200);
    assert!(!resumed.body.contains("\"one\""), "{}", resumed.body);
    resumed.assert_body_contains("\"two\"");
    assert!(resumed.body.ends_with("data: [DONE]\n\n"));
    let expired = new_request_id();
    own(&mut s.redis, &expired, "echo").await;
    let token = deferral::resume_token(&secret, &expired, "echo");
    let gone = get(format!("/v1/sluice/streams/{token}"), "0-0".into())
        .await
        .unwrap();
    assert_eq!(gone.status, 410, "{gone:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn low_priority_fails_fast_when_its_bucket_is_backed_up() {
    let options = EndpointOptions {
        low_priority_max_backlog: 1,
        ..Default::default()
    };
    let mut s = setup(options).await;
    watch(&s.consumer, "batch-1").await;
    mark_subscribed(&mut s.redis, "batch-1").await;
    let body = r#"{"model": "gpt-4o", "messages": []}"#;
    let low = |id: &str| {
        let mut m = markers(id, "batch-1");
        m[4].1 = "low".into();
        m
    };
    let first = post(s.addr, low("req-low-1"), body);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let second = post(s.addr, low("req-low-2"), body).await.unwrap();
    assert_eq!(second.status, 429, "{second:?}");
    assert_eq!(second.header("retry-after"), Some("30"));
    second.assert_body_contains("queue_full");
    // Normal priority still queues behind it.
    let normal = post(s.addr, markers("req-normal", "batch-1"), body);
    // The consumer pops (and counts down the backlog); answer both.
    for _ in 0..2 {
        let (message, work) = pop_work(&s.consumer, "batch-1").await;
        s.consumer.release(&message.handle).await.unwrap();
        let _: i64 = redis::cmd("DECR")
            .arg(sluice_consumer::keys::backlog(&message.lite_topic))
            .query_async(&mut s.redis)
            .await
            .unwrap();
        answer(&mut s.redis, work["req_id"].as_str().unwrap(), &["ok"]).await;
    }
    assert_eq!(first.await.unwrap().status, 200);
    assert_eq!(normal.await.unwrap().status, 200);
}

/// An endpoint with `options`, and one deferred request of `tenant` waiting
/// on it (its bucket subscribed), posted at the returned instant.
async fn one_waiting_request(
    options: EndpointOptions,
    tenant: &str,
    req_id: &str,
) -> (
    Setup,
    tokio::task::JoinHandle<HttpResponse>,
    std::time::Instant,
) {
    let mut s = setup(options).await;
    watch(&s.consumer, tenant).await;
    mark_subscribed(&mut s.redis, tenant).await;
    let body = r#"{"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}"#;
    let posted = std::time::Instant::now();
    let client = post(s.addr, markers(req_id, tenant), body);
    (s, client, posted)
}

/// A consumer pops a request, takes its lease, and dies before calling the
/// model (this broker never redelivers): the endpoint holding the client
/// publishes it again once the lease lapses, and the answer still arrives.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_lost_between_pop_and_call_is_published_again() {
    let options = EndpointOptions {
        lease_check: Duration::from_millis(100),
        ..Default::default()
    };
    let (mut s, client, _) = one_waiting_request(options, "foxtrot", "req-lost").await;
    let body = r#"{"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}"#;

    // The doomed consumer: pop, lease for 400 ms, then nothing.
    let (message, _) = pop_work(&s.consumer, "foxtrot").await;
    set_lease(&mut s.redis, "req-lost", 400).await;
    s.consumer.release(&message.handle).await.unwrap();

    // A healthy consumer gets the same request again and answers it.
    let (message, work) = pop_work(&s.consumer, "foxtrot").await;
    s.consumer.release(&message.handle).await.unwrap();
    assert_eq!(work["req_id"], "req-lost");
    answer(&mut s.redis, "req-lost", &["saved"]).await;
    let response = client.await.unwrap();
    assert_answer(&response, 200, "saved");

    // A live claim (fresh heartbeat, Redis time) with a lapsed lease is a
    // call in progress, not a lost request.
    let client = post(s.addr, markers("req-claimed", "foxtrot"), body);
    let (message, _) = pop_work(&s.consumer, "foxtrot").await;
    let (seconds, micros): (u64, u64) = redis::cmd("TIME").query_async(&mut s.redis).await.unwrap();
    let heartbeat = format!("c/1 {}", seconds * 1000 + micros / 1000);
    set_claim(&mut s.redis, "req-claimed", &heartbeat).await;
    set_lease(&mut s.redis, "req-claimed", 300).await;
    s.consumer.release(&message.handle).await.unwrap();
    tokio::time::sleep(Duration::from_millis(800)).await;
    let again = s
        .consumer
        .pop(1, Duration::from_secs(30), Duration::from_millis(500))
        .await
        .unwrap();
    assert!(
        again.is_empty(),
        "claimed request published again: {again:?}"
    );
    answer(&mut s.redis, "req-claimed", &["ok"]).await;
    assert_eq!(client.await.unwrap().status, 200);

    // A dead claim (heartbeat long stale): published again so a live consumer
    // answers `interrupted` instead of calling the model twice.
    let client = post(s.addr, markers("req-dead", "foxtrot"), body);
    let (message, _) = pop_work(&s.consumer, "foxtrot").await;
    set_claim(&mut s.redis, "req-dead", "c/2 1000").await;
    set_lease(&mut s.redis, "req-dead", 300).await;
    s.consumer.release(&message.handle).await.unwrap();
    let (message, work) = pop_work(&s.consumer, "foxtrot").await;
    s.consumer.release(&message.handle).await.unwrap();
    assert_eq!(work["req_id"], "req-dead");
    let _: String = redis::cmd("XADD")
        .arg(sluice_contract::keys::response("req-dead"))
        .arg("*")
        .arg(&[
            "type",
            "error",
            "status",
            "502",
            "code",
            "interrupted",
            "message",
            "the model call was interrupted",
        ])
        .query_async(&mut s.redis)
        .await
        .unwrap();
    let response = client.await.unwrap();
    assert_answer(&response, 502, "interrupted");
}

/// A message that left the queue with no consumer ever taking it — as
/// rocketmq-store 1.0.0 does when two sends collide on one LiteTopic offset
/// (the message is left out of the queue, never popped). Here the test pops
/// it and acknowledges it without a lease, claim or answer: from the
/// endpoint's side the same trace (none). No lease ever lapses, so only the
/// unclaimed bound saves it: published again once, its answer arrives. With
/// the bound off the broker holds nothing more for it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_no_consumer_picked_up_is_published_again() {
    const BOUND: Duration = Duration::from_secs(2);
    let options = EndpointOptions {
        lease_check: Duration::from_millis(100),
        unclaimed_republish_after: Some(BOUND),
        ..Default::default()
    };
    let (mut s, client, posted) = one_waiting_request(options, "golf", "req-left-out").await;
    let (message, work) = pop_work(&s.consumer, "golf").await;
    assert_eq!(work["req_id"], "req-left-out");
    // Gone from the queue, no trace in Redis.
    s.consumer.release(&message.handle).await.unwrap();

    let (message, work) = pop_work(&s.consumer, "golf").await;
    s.consumer.release(&message.handle).await.unwrap();
    assert_eq!(work["req_id"], "req-left-out");
    assert!(
        posted.elapsed() >= BOUND,
        "published again {:?} after the post, within the bound ({BOUND:?})",
        posted.elapsed()
    );
    assert_eq!(s.metrics.republished_unclaimed.get(), 1);
    assert_eq!(s.metrics.republished.get(), 0);
    answer(&mut s.redis, "req-left-out", &["found"]).await;
    assert_answer(&client.await.unwrap(), 200, "found");
    // Once: the copy was answered, nothing more is published.
    assert_nothing_queued(&s.consumer).await;
}

/// With the bound off, a request that left the queue untouched is not
/// published again (what happened before the bound: its client waited for
/// the endpoint's timeout).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_unclaimed_bound_a_left_out_request_waits_for_its_timeout() {
    let options = EndpointOptions {
        lease_check: Duration::from_millis(100),
        unclaimed_republish_after: None,
        high_priority_timeout: Duration::from_secs(4),
        ..Default::default()
    };
    let (s, client, _) = one_waiting_request(options, "hotel", "req-waits").await;
    let (message, _) = pop_work(&s.consumer, "hotel").await;
    s.consumer.release(&message.handle).await.unwrap();
    let response = client.await.unwrap();
    assert_eq!(response.status, 504, "{response:?}");
    assert_eq!(s.metrics.republished_unclaimed.get(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timeouts_and_a_missing_broker_or_redis_answer_clearly() {
    // (the markers say priority high: its class's own bound applies)
    let mut s = setup(EndpointOptions {
        high_priority_timeout: Duration::from_millis(1500),
        ..Default::default()
    })
    .await;
    watch(&s.consumer, "echo").await;
    mark_subscribed(&mut s.redis, "echo").await;

    // Nobody answers: a streaming client gets a `timeout` event, a JSON one 504.
    let streamed = post(
        s.addr,
        markers("req-slow-1", "echo"),
        r#"{"model": "gpt-4o", "stream": true, "messages": []}"#,
    );
    let plain = post(
        s.addr,
        markers("req-slow-2", "echo"),
        r#"{"model": "gpt-4o", "messages": []}"#,
    );
    let response = streamed.await.unwrap();
    assert_eq!(response.status, 200);
    response.assert_body_contains("event: timeout\ndata: {");
    assert!(!response.body.contains("[DONE]"), "{}", response.body);
    let response = plain.await.unwrap();
    assert_answer(&response, 504, "\"code\":\"timeout\"");

    // The broker is gone: 503 with Retry-After, nothing half-published.
    s._broker.stop();
    let body = r#"{"model": "gpt-4o", "stream": true, "messages": []}"#;
    let response = post(s.addr, markers("req-no-broker", "echo"), body)
        .await
        .unwrap();
    assert_answer(&response, 503, "queue_unavailable");
    assert!(response.header("retry-after").is_some(), "{response:?}");

    // Redis is gone too: still a clear 503, not a hang or a reset.
    s._redis_server.stop();
    let started = std::time::Instant::now();
    let response = post(s.addr, markers("req-no-redis", "echo"), body)
        .await
        .unwrap();
    assert_answer(&response, 503, "\"code\"");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "took {:?}",
        started.elapsed()
    );
}

/// Only Sluice's admission can queue work: a forged marker, a token signed
/// with another secret, a stale token, a token for other claims or another
/// body, and a replayed id are all refused before anything is published.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forged_and_replayed_deferrals_are_refused() {
    let metrics = Arc::new(EndpointMetrics::default());
    let mut s = setup_with_metrics(EndpointOptions::default(), metrics.clone()).await;
    watch(&s.consumer, "victim").await;
    mark_subscribed(&mut s.redis, "victim").await;
    let body = r#"{"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}"#;
    let id = new_request_id();

    // The marker headers alone (what an attacker inside the mesh can send).
    let forged = post_unsigned(s.addr, markers(&id, "victim"), body)
        .await
        .unwrap();
    assert_answer(&forged, 403, "\"code\":\"forbidden\"");

    // Signed with a secret sluice-rls does not hold.
    let other = deferral::Secret::new("another-secret-another-secret-another-secret").unwrap();
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let digest = deferral::body_digest(body.as_bytes());
    let claims = deferral::DeferralClaims {
        headers: deferral::HeaderClaims {
            request_id: &id,
            tenant: "victim",
            model: "gpt-4o",
            priority: "high",
            estimated_tokens: 42,
        },
        body_sha256: &digest,
    };
    let with_token = |token: String| {
        let mut headers = markers(&id, "victim");
        headers.push((deferral::DEFERRAL_TOKEN_HEADER, token));
        headers
    };
    let wrong_key = post_unsigned(s.addr, with_token(claims.sign(&other, now_ms)), body);
    assert_eq!(wrong_key.await.unwrap().status, 403);
    // Too old.
    let secret = example_deferral_secret();
    let stale = post_unsigned(
        s.addr,
        with_token(claims.sign(&secret, now_ms - 120_000)),
        body,
    );
    assert_eq!(stale.await.unwrap().status, 403);
    // A good token, moved to another tenant, priority or body.
    let good = claims.sign(&secret, now_ms);
    let mut moved = with_token(good.clone());
    moved[2].1 = "attacker".into();
    assert_eq!(
        post_unsigned(s.addr, moved, body).await.unwrap().status,
        403
    );
    let mut raised = with_token(good.clone());
    raised[4].1 = "low".into();
    assert_eq!(
        post_unsigned(s.addr, raised, body).await.unwrap().status,
        403
    );
    let other_body = r#"{"model": "gpt-4o", "messages": [{"role": "user", "content": "bye"}]}"#;
    let swapped = post_unsigned(s.addr, with_token(good.clone()), other_body);
    assert_eq!(swapped.await.unwrap().status, 403);
    let refused = |reason: &str| {
        metrics
            .rejected
            .get_or_create(&vec![("reason".to_string(), reason.to_string())])
            .get()
    };
    assert_eq!(refused("token_missing"), 1);
    assert_eq!(refused("token_expired"), 1);
    assert_eq!(refused("token_bad_signature"), 3);
    // The token checks out from the headers; the body read after it is not
    // the one it signed.
    assert_eq!(refused("token_body_mismatch"), 1);

    // Signed, but not an inference request: the endpoint checks as the filter does.
    let no_model = r#"{"messages": []}"#;
    let response = post(s.addr, markers(&new_request_id(), "victim"), no_model)
        .await
        .unwrap();
    assert_answer(&response, 400, "model");

    // Nothing reached the broker.
    assert_nothing_queued(&s.consumer).await;

    // The genuine request is served once; its token replayed is refused at
    // once (no wait, no second answer).
    let first = post_unsigned(s.addr, with_token(good.clone()), body);
    let (message, work) = pop_work(&s.consumer, "victim").await;
    s.consumer.release(&message.handle).await.unwrap();
    assert_eq!(work["req_id"], id.as_str());
    let started = std::time::Instant::now();
    let replay = post_unsigned(s.addr, with_token(good), body).await.unwrap();
    assert_eq!(replay.status, 409, "{replay:?}");
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(refused("duplicate_request"), 1);
    answer(&mut s.redis, &id, &["yours"]).await;
    let response = first.await.unwrap();
    assert_answer(&response, 200, "yours");
}

/// Writes `head` + `body` on one connection (ignoring a reset: the server may
/// answer before it read everything) and returns the status line's code, the
/// answer's body and when its first byte came.
fn raw_post(
    addr: SocketAddr,
    head: String,
    body: Vec<u8>,
) -> tokio::task::JoinHandle<(u16, String, Duration)> {
    tokio::task::spawn_blocking(move || {
        let mut stream = std::net::TcpStream::connect(addr).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        let started = std::time::Instant::now();
        let mut reader = stream.try_clone().unwrap();
        std::thread::spawn(move || {
            let _ = stream.write_all(head.as_bytes());
            let _ = stream.write_all(&body);
            // Keep the connection open (a silent client) until the reader is done.
            std::thread::sleep(Duration::from_secs(30));
        });
        let (raw, first_byte) = read_raw_response(&mut reader, started, |raw| {
            raw.windows(4).any(|w| w == b"\r\n\r\n") && raw.ends_with(b"}")
        });
        let (status, body) = parse_raw_response(&raw);
        (status, body, first_byte)
    })
}

fn rejected(s: &Setup, reason: &str) -> u64 {
    s.metrics
        .rejected
        .get_or_create(&vec![("reason".to_string(), reason.to_string())])
        .get()
}

/// The endpoint's body limit is Sluice's one maximum (4 MiB, not the web
/// framework's 2 MiB), answered with Sluice's JSON 413 and counted; a body
/// that does not arrive within the deadline gets 408.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn body_limit_and_body_deadline() {
    let max = sluice_admission::config::DEFAULT_MAX_BODY_BYTES;
    let mut s = setup(EndpointOptions {
        body_timeout: Duration::from_secs(2),
        ..Default::default()
    })
    .await;
    let head = |tenant: &str, length: usize, body: &[u8]| {
        let mut head = format!(
            "POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\ncontent-length: {length}\r\n"
        );
        let mut signed = markers(&format!("req-{tenant}"), tenant);
        sign_deferral_headers(&mut signed, body);
        for (k, v) in signed {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
        head + "\r\n"
    };
    let chat = |size: usize| {
        let frame = r#"{"model": "gpt-4o", "messages": [{"role": "user", "content": ""}]}"#;
        let content = "a".repeat(size - frame.len());
        frame
            .replace(r#""content": """#, &format!(r#""content": "{content}""#))
            .into_bytes()
    };

    let (status, body, _) = raw_post(
        s.addr,
        head("delta", max + 1, &chat(max + 1)),
        chat(max + 1),
    )
    .await
    .unwrap();
    assert_eq!(status, 413, "{body}");
    let error: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(error["error"]["code"], "request_too_large", "{error}");
    assert_eq!(rejected(&s, "too_large"), 1);

    // Headers, then silence: 408 at the deadline.
    let (status, body, after) = raw_post(s.addr, head("delta", 100, b""), Vec::new())
        .await
        .unwrap();
    assert_eq!(status, 408, "{body}");
    assert!(body.contains("request_timeout"), "{body}");
    assert!(
        after >= Duration::from_secs(2) && after < Duration::from_secs(3),
        "answered after {after:?}"
    );
    assert_eq!(rejected(&s, "body_timeout"), 1);

    // 3 MiB (over axum's 2 MiB default, under Sluice's maximum): queued whole.
    watch(&s.consumer, "echo").await;
    mark_subscribed(&mut s.redis, "echo").await;
    let size = 3 * 1024 * 1024;
    let client = raw_post(s.addr, head("echo", size, &chat(size)), chat(size));
    let (_, work) = pop_work(&s.consumer, "echo").await;
    let content = work["body"]["messages"][0]["content"].as_str().unwrap();
    assert!(content.len() > size - 100, "{} bytes queued", content.len());
    assert_eq!(s.metrics.accepted.get(), 1);
    answer(&mut s.redis, "req-echo", &["ok"]).await;
    let (status, body, _) = client.await.unwrap();
    assert_eq!(status, 200, "{body}");
}

/// A signed request head for `tenant`'s request `req_id` (priority
/// `priority`) announcing `length` bytes, for `body`.
fn signed_head(req_id: &str, tenant: &str, priority: &str, length: usize, body: &[u8]) -> String {
    let mut head = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\ncontent-length: {length}\r\n"
    );
    let mut signed = sluice_testkit::deferral_markers(req_id, tenant, priority, 42);
    sign_deferral_headers(&mut signed, body);
    for (k, v) in signed {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head + "\r\n"
}

/// The token is checked from the headers: a request without one, or with a
/// forged one, is refused before its body is read — the answer comes
/// although the client never sends the body it announced (before, the
/// endpoint read the whole body first and answered 408 at the body deadline).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_token_is_checked_before_any_body_byte_is_read() {
    let s = setup(EndpointOptions {
        body_timeout: Duration::from_secs(60),
        ..Default::default()
    })
    .await;
    let length = 3 * 1024 * 1024;
    let mut head = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\ncontent-length: {length}\r\n"
    );
    for (k, v) in markers(&new_request_id(), "victim") {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    let unsigned = head.clone() + "\r\n";
    let (status, body, _) = raw_post(s.addr, unsigned, Vec::new()).await.unwrap();
    assert_eq!(status, 403, "{body}");
    assert!(body.contains("no deferral token"), "{body}");
    // A token whose MAC does not match its claims.
    let forged = format!(
        "{head}{}: v2.{}.{}.{}\r\n\r\n",
        deferral::DEFERRAL_TOKEN_HEADER,
        sluice_contract::now_ms(),
        "0".repeat(64),
        "0".repeat(64)
    );
    let (status, body, _) = raw_post(s.addr, forged, Vec::new()).await.unwrap();
    assert_eq!(status, 403, "{body}");
    assert_eq!(rejected(&s, "token_missing"), 1);
    assert_eq!(rejected(&s, "token_bad_signature"), 1);
    assert_eq!(rejected(&s, "body_timeout"), 0);
    assert_eq!(s.metrics.held_bytes.get(), 0);
}

/// Body bytes are held by budget, taken from the announced length before the
/// body is read: a tenant over its share gets 429, the endpoint over its
/// whole budget 503, both with Retry-After; the bytes come back when the
/// answers end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn held_body_bytes_are_bounded_globally_and_per_tenant() {
    let mib: u64 = 1024 * 1024;
    let mut s = setup(EndpointOptions {
        budget: sluice_deferral::budget::BudgetLimits {
            max_held_bytes: 10 * mib,
            max_tenant_held_bytes: 7 * mib,
            max_tenant_waiting: 100,
        },
        ..Default::default()
    })
    .await;
    for tenant in ["alpha", "beta", "gamma"] {
        watch(&s.consumer, tenant).await;
        mark_subscribed(&mut s.redis, tenant).await;
    }
    let size = (3 * mib) as usize;
    let body = sluice_testkit::chat_of(size);
    let send = |id: &str, tenant: &str| {
        raw_post(
            s.addr,
            signed_head(id, tenant, "high", size, &body),
            body.clone(),
        )
    };
    // A body announced in the headers alone is refused with `status` and `code`.
    let addr = s.addr;
    let refused_from_head = |id: &str, tenant: &str, (status, code): (u16, &'static str)| {
        let head_only = signed_head(id, tenant, "high", size, &body);
        async move {
            let (got, answer_body, _) = raw_post(addr, head_only, Vec::new()).await.unwrap();
            assert_eq!(got, status, "{answer_body}");
            assert!(answer_body.contains(code), "{answer_body}");
        }
    };
    let a1 = send("held-a1", "alpha");
    let a2 = send("held-a2", "alpha");
    for _ in 0..2 {
        let (message, _) = pop_work(&s.consumer, "alpha").await;
        s.consumer.release(&message.handle).await.unwrap();
    }
    // alpha holds 6 MiB of its 7: a third body is refused from its headers.
    refused_from_head("held-a3", "alpha", (429, "tenant_deferral_bytes")).await;
    let held = s.metrics.held_bytes.get();
    assert!(
        held >= 2 * size as i64 && held < 2 * size as i64 + 4096,
        "held {held}"
    );
    // beta fits in what is left of the 10 MiB (gauge: 9 MiB and a little).
    let b1 = send("held-b1", "beta");
    let (message, _) = pop_work(&s.consumer, "beta").await;
    s.consumer.release(&message.handle).await.unwrap();
    // gamma, although within its own share, does not: the endpoint is full.
    refused_from_head("held-c1", "gamma", (503, "deferral_memory_full")).await;
    assert_eq!(rejected(&s, "tenant_deferral_bytes"), 1);
    assert_eq!(rejected(&s, "deferral_memory_full"), 1);
    for id in ["held-a1", "held-a2", "held-b1"] {
        answer(&mut s.redis, id, &["ok"]).await;
    }
    for client in [a1, a2, b1] {
        let (status, body, _) = client.await.unwrap();
        assert_eq!(status, 200, "{body}");
    }
    // Every byte is given back once the answers ended.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while s.metrics.held_bytes.get() != 0 && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(s.metrics.held_bytes.get(), 0);
}

/// One tenant at its share of waiting places gets 429 (not the global 503
/// `deferral_busy`), while another tenant's deferral is queued and served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_at_its_waiting_share_does_not_hold_up_another_tenant() {
    let mut s = setup(EndpointOptions {
        max_in_flight: 4,
        budget: sluice_deferral::budget::BudgetLimits::for_endpoint(
            64 * 1024 * 1024,
            None,
            4,
            Some(2),
        ),
        ..Default::default()
    })
    .await;
    for tenant in ["greedy", "polite"] {
        watch(&s.consumer, tenant).await;
        mark_subscribed(&mut s.redis, tenant).await;
    }
    let body = r#"{"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}"#;
    let g1 = post(s.addr, markers("greedy-1", "greedy"), body);
    let g2 = post(s.addr, markers("greedy-2", "greedy"), body);
    for _ in 0..2 {
        let (message, _) = pop_work(&s.consumer, "greedy").await;
        s.consumer.release(&message.handle).await.unwrap();
    }
    let refused = post(s.addr, markers("greedy-3", "greedy"), body)
        .await
        .unwrap();
    assert_answer(&refused, 429, "tenant_deferral_busy");
    assert_eq!(refused.header("retry-after"), Some("5"));
    // The other tenant is queued and answered meanwhile.
    let polite = post(s.addr, markers("polite-1", "polite"), body);
    let (message, work) = pop_work(&s.consumer, "polite").await;
    s.consumer.release(&message.handle).await.unwrap();
    assert_eq!(work["req_id"], "polite-1");
    answer(&mut s.redis, "polite-1", &["served"]).await;
    assert_answer(&polite.await.unwrap(), 200, "served");
    assert_eq!(rejected(&s, "tenant_deferral_busy"), 1);
    assert_eq!(rejected(&s, "busy"), 0);
    for id in ["greedy-1", "greedy-2"] {
        answer(&mut s.redis, id, &["ok"]).await;
    }
    assert_eq!(g1.await.unwrap().status, 200);
    assert_eq!(g2.await.unwrap().status, 200);
}

/// Concurrent low-priority requests never pass the band's backlog cap: the
/// check and the reservation are one step (it admitted 101 for 100).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_low_band_admits_exactly_its_cap_under_concurrency() {
    let cap = 5;
    let mut s = setup(EndpointOptions {
        low_priority_max_backlog: cap,
        low_priority_timeout: Duration::from_secs(3),
        ..Default::default()
    })
    .await;
    watch(&s.consumer, "batch").await;
    mark_subscribed(&mut s.redis, "batch").await;
    let body = r#"{"model": "gpt-4o", "messages": []}"#;
    let clients: Vec<_> = (0..16)
        .map(|n| {
            let mut m = markers(&format!("low-{n}"), "batch");
            m[4].1 = "low".into();
            post(s.addr, m, body)
        })
        .collect();
    let mut statuses = Vec::new();
    for client in clients {
        statuses.push(client.await.unwrap().status);
    }
    let refused = statuses.iter().filter(|s| **s == 429).count();
    let waited = statuses.iter().filter(|s| **s == 504).count();
    assert_eq!(
        (waited, refused),
        (cap as usize, 16 - cap as usize),
        "{statuses:?}"
    );
    assert_eq!(s.metrics.accepted.get(), cap);
    let backlog: u64 = s
        .redis
        .get(sluice_consumer::keys::backlog(&lite_topic_name(
            "batch", "gpt-4o",
        )))
        .await
        .unwrap();
    assert_eq!(backlog, cap);
}

/// A body the filter lets through but whose work item the broker would
/// refuse (within ~300 B of 4 MiB) gets a 413 that says so, not a retryable
/// 503; nothing is queued.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_too_close_to_the_maximum_gets_a_clear_413() {
    let s = setup(EndpointOptions::default()).await;
    watch(&s.consumer, "edge").await;
    let size = sluice_admission::config::DEFAULT_MAX_BODY_BYTES;
    let body = sluice_testkit::chat_of(size);
    let (status, answer_body, _) = raw_post(
        s.addr,
        signed_head("edge-1", "edge", "high", size, &body),
        body,
    )
    .await
    .unwrap();
    assert_eq!(status, 413, "{answer_body}");
    assert!(answer_body.contains("cannot be deferred"), "{answer_body}");
    assert_eq!(rejected(&s, "too_large_to_queue"), 1);
    assert_nothing_queued(&s.consumer).await;
    assert_eq!(s.metrics.held_bytes.get(), 0);
}

/// Reads from `stream` until it closes or `limit` passes; what was read.
fn read_until_closed(stream: &mut std::net::TcpStream, limit: Duration) -> (Vec<u8>, bool) {
    stream.set_read_timeout(Some(limit)).unwrap();
    let mut raw = Vec::new();
    let mut buffer = [0u8; 4096];
    loop {
        match stream.read(&mut buffer) {
            Ok(0) => return (raw, true),
            Ok(n) => raw.extend_from_slice(&buffer[..n]),
            // A reset is a close too.
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return (raw, true),
            Err(_) => return (raw, false),
        }
    }
}

/// The listener: connections that never present a valid token are bounded
/// (beyond the cap: 503 at once, nothing read) and closed at the header
/// deadline; a connection whose request carried a valid token no longer
/// counts against that cap while it waits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unauthenticated_connections_are_bounded_and_cut_at_the_header_deadline() {
    use sluice_testkit::stack::{start_deferral_endpoint_with, ListenerLimits, ListenerMetrics};
    let (redis_server, broker) = redis_and_broker().await;
    let client = redis::Client::open(redis_server.url()).unwrap();
    let mut redis = client.get_multiplexed_async_connection().await.unwrap();
    let metrics = ListenerMetrics::default();
    let addr = start_deferral_endpoint_with(
        endpoint_config(&redis_server, &broker),
        ListenerLimits {
            header_timeout: Duration::from_secs(2),
            max_connections: 16,
            max_unauthenticated: 2,
        },
        metrics.clone(),
    )
    .await;
    let lite_client = LiteClient::connect(LiteConfig::new(broker.namesrv_addr())).unwrap();
    let consumer = LiteConsumer::new(&lite_client, GROUP, PARENT)
        .await
        .unwrap();
    watch(&consumer, "waiter").await;
    mark_subscribed(&mut redis, "waiter").await;

    // A deferred request waits on its connection: authenticated, it gives
    // its unauthenticated slot back.
    let body = r#"{"model": "gpt-4o", "messages": []}"#;
    let waiting = post(addr, markers("conn-wait", "waiter"), body);
    let (message, _) = pop_work(&consumer, "waiter").await;
    consumer.release(&message.handle).await.unwrap();
    assert_eq!(metrics.unauthenticated.get(), 0);

    // Two silent connections take both unauthenticated slots...
    let silent: Vec<_> = (0..2)
        .map(|_| std::net::TcpStream::connect(addr).unwrap())
        .collect();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while metrics.unauthenticated.get() < 2 && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(metrics.unauthenticated.get(), 2);
    // ...so a third gets 503 at once and is closed.
    let refused = tokio::task::spawn_blocking(move || {
        let mut third = std::net::TcpStream::connect(addr).unwrap();
        read_until_closed(&mut third, Duration::from_secs(10))
    })
    .await
    .unwrap();
    let (status, text) = parse_raw_response(&refused.0);
    assert_eq!((status, refused.1), (503, true), "{text}");
    assert!(text.contains("unauthenticated_connections"), "{text}");
    let refused_count = metrics
        .refused
        .get_or_create(&vec![(
            "reason".into(),
            "unauthenticated_connections".into(),
        )])
        .get();
    assert_eq!(refused_count, 1);

    // The silent ones are closed by the header deadline (2 s; generous
    // margin for a loaded machine), which frees their slots.
    let closed = tokio::task::spawn_blocking(move || {
        silent
            .into_iter()
            .map(|mut stream| read_until_closed(&mut stream, Duration::from_secs(20)).1)
            .collect::<Vec<_>>()
    })
    .await
    .unwrap();
    assert_eq!(closed, vec![true, true]);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let settled =
        |m: &ListenerMetrics| m.unauthenticated.get() == 0 && m.header_timeouts.get() >= 2;
    while !settled(&metrics) && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(metrics.unauthenticated.get(), 0);
    // Closed without an answer, but counted.
    assert_eq!(metrics.header_timeouts.get(), 2);
    // A new token-less request is now read — and refused at its headers.
    let forged = post_unsigned(addr, markers("conn-forged", "waiter"), body)
        .await
        .unwrap();
    assert_answer(&forged, 403, "forbidden");

    // The waiting request was never disturbed.
    answer(&mut redis, "conn-wait", &["still here"]).await;
    assert_answer(&waiting.await.unwrap(), 200, "still here");
}
