//! Caps on deferral buckets (ratelimit-service/src/deferral/caps.rs) on a
//! real Redis, and with the real broker: the per-tenant, global and
//! per-minute caps refuse only new buckets, hold under concurrency, and a
//! retired bucket gives its tenant's slot back; the deferral endpoint answers
//! a refusal with 429 / 503, Retry-After and an OpenAI-style error; a retired
//! bucket's queue files and metric series go, and the bucket comes back.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests fail loudly
#![recursion_limit = "256"] // rocketmq-client futures are deeply nested

use sluice_consumer::keys;
use sluice_consumer::RunnerOptions;
use sluice_contract::bookkeeping;
use sluice_deferral::caps::{Admission, BucketCaps, CapKind, CapLimits, CapsMetrics, PublishError};
use sluice_deferral::endpoint::{EndpointMetrics, EndpointOptions, Publisher};
use sluice_deferral::publisher::LitePublisher;
use sluice_deferral::EndpointConfig;
use sluice_litetopic::lite_topic_name;
use sluice_testkit::stack::{
    endpoint_config, redis_connection, start_broker, start_consumer, start_deferral_endpoint,
    start_fast_llm_sim, unpaced, work_item, ConsumerSpec, GROUP, PARENT,
};
use sluice_testkit::{RedisServer, RocketMq};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn caps(global: u64, per_tenant: u64, per_minute: u64) -> BucketCaps {
    BucketCaps::new(
        CapLimits {
            max_buckets: global,
            max_buckets_per_tenant: per_tenant,
            max_new_buckets_per_minute: per_minute,
            ..Default::default()
        },
        CapsMetrics::default(),
    )
    .unwrap()
}

async fn redis() -> (RedisServer, sluice_redis::RedisConn) {
    let server = RedisServer::start().unwrap();
    let conn = redis_connection(&server);
    (server, conn)
}

/// The caps' answer for `tenant` × `model`, now.
async fn admit(
    caps: &BucketCaps,
    conn: &mut sluice_redis::RedisConn,
    tenant: &str,
    model: &str,
) -> Result<Admission, CapKind> {
    let topic = lite_topic_name(tenant, model);
    match caps
        .admit(conn, tenant, &topic, sluice_contract::now_ms())
        .await
    {
        Ok(admission) => Ok(admission),
        Err(PublishError::Refused(refusal)) => Err(refusal.kind),
        Err(other) => panic!("{other}"),
    }
}

fn created(answer: Result<Admission, CapKind>) -> bool {
    match answer {
        Ok(Admission::Admitted(admitted)) => admitted.created,
        other => panic!("expected an admission, got {other:?}"),
    }
}

async fn tenant_count(conn: &mut sluice_redis::RedisConn, tenant: &str) -> Option<u64> {
    redis::cmd("HGET")
        .arg(keys::TENANT_BUCKET_COUNTS)
        .arg(keys::sanitize(tenant))
        .query_async(conn)
        .await
        .unwrap()
}

async fn bucket_count(conn: &mut sluice_redis::RedisConn) -> u64 {
    redis::cmd("SCARD")
        .arg(keys::BUCKETS)
        .query_async(conn)
        .await
        .unwrap()
}

#[tokio::test]
async fn the_per_tenant_cap_refuses_new_buckets_only() {
    let (_server, mut conn) = redis().await;
    let caps = caps(100, 2, 100);
    assert!(created(admit(&caps, &mut conn, "acme", "m1").await));
    assert!(created(admit(&caps, &mut conn, "acme", "m2").await));
    assert_eq!(
        admit(&caps, &mut conn, "acme", "m3").await,
        Err(CapKind::Tenant)
    );
    // At the cap, the tenant's existing buckets are still accepted ...
    assert!(!created(admit(&caps, &mut conn, "acme", "m1").await));
    assert!(!created(admit(&caps, &mut conn, "acme", "m2").await));
    // ... and other tenants are not affected.
    assert!(created(admit(&caps, &mut conn, "zeta", "m3").await));
    assert_eq!(tenant_count(&mut conn, "acme").await, Some(2));
    assert_eq!(tenant_count(&mut conn, "zeta").await, Some(1));
    // A refusal wrote nothing.
    assert_eq!(bucket_count(&mut conn).await, 3);
}

#[tokio::test]
async fn the_global_cap_answers_capacity_and_keeps_existing_buckets() {
    let (_server, mut conn) = redis().await;
    let caps = caps(3, 2, 100);
    for tenant in ["a", "b", "c"] {
        assert!(created(admit(&caps, &mut conn, tenant, "m").await));
    }
    assert_eq!(
        admit(&caps, &mut conn, "d", "m").await,
        Err(CapKind::Global)
    );
    // A tenant over its own cap hears about that first.
    assert!(!created(admit(&caps, &mut conn, "a", "m").await));
    assert_eq!(bucket_count(&mut conn).await, 3);
    assert_eq!(tenant_count(&mut conn, "d").await, None);
}

#[tokio::test]
async fn the_per_minute_cap_limits_new_buckets_in_all() {
    let (_server, mut conn) = redis().await;
    let caps = caps(100, 16, 2);
    // Stay inside one clock minute, or the window would reset mid-test.
    let into_minute = sluice_contract::now_ms() % 60_000;
    if into_minute > 55_000 {
        tokio::time::sleep(Duration::from_millis(60_500 - into_minute)).await;
    }
    assert!(created(admit(&caps, &mut conn, "a", "m").await));
    assert!(created(admit(&caps, &mut conn, "b", "m").await));
    let topic = lite_topic_name("c", "m");
    let refused = caps
        .admit(&mut conn, "c", &topic, sluice_contract::now_ms())
        .await;
    let Err(PublishError::Refused(refusal)) = refused else {
        panic!("third new bucket in a minute admitted: {refused:?}");
    };
    assert_eq!(refusal.kind, CapKind::Rate);
    assert_eq!(refusal.code(), "bucket_rate_limit");
    assert!((1..=60).contains(&refusal.retry_after_secs()));
    // Existing buckets are not new buckets.
    assert!(!created(admit(&caps, &mut conn, "a", "m").await));
    assert_eq!(tenant_count(&mut conn, "c").await, None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_requests_never_overshoot_a_cap() {
    let (_server, conn) = redis().await;
    let caps = Arc::new(caps(10, 3, 1000));
    // 60 new buckets at once: 40 tenants × 1 model and one tenant × 20 models.
    let mut tasks = Vec::new();
    for i in 0..60 {
        let (caps, mut conn) = (caps.clone(), conn.clone());
        let (tenant, model) = if i < 40 {
            (format!("t{i}"), "m".to_string())
        } else {
            ("greedy".to_string(), format!("m{i}"))
        };
        tasks.push(tokio::spawn(async move {
            let topic = lite_topic_name(&tenant, &model);
            caps.admit(&mut conn, &tenant, &topic, sluice_contract::now_ms())
                .await
        }));
    }
    let mut admitted = 0;
    for task in tasks {
        match task.await.unwrap() {
            Ok(Admission::Admitted(a)) => {
                assert!(a.created);
                admitted += 1;
            }
            Err(PublishError::Refused(_)) => {}
            other => panic!("{other:?}"),
        }
    }
    let mut conn = conn.clone();
    assert_eq!(admitted, 10);
    assert_eq!(bucket_count(&mut conn).await, 10);
    assert!(tenant_count(&mut conn, "greedy").await.unwrap_or(0) <= 3);
}

#[tokio::test]
async fn retiring_a_bucket_frees_its_tenants_slot() {
    let (_server, mut conn) = redis().await;
    let caps = caps(100, 1, 100);
    assert!(created(admit(&caps, &mut conn, "acme", "m1").await));
    assert_eq!(
        admit(&caps, &mut conn, "acme", "m2").await,
        Err(CapKind::Tenant)
    );
    // The consumer's retire script (nothing queued, idle since the cutoff).
    let topic = lite_topic_name("acme", "m1");
    let cutoff = sluice_contract::now_ms() + 1;
    assert!(
        bookkeeping::retire_if_idle(&mut conn, &topic, cutoff, false)
            .await
            .unwrap()
    );
    assert_eq!(tenant_count(&mut conn, "acme").await, None);
    assert!(created(admit(&caps, &mut conn, "acme", "m2").await));
    assert_eq!(tenant_count(&mut conn, "acme").await, Some(1));
    // The retired bucket is new again, and the tenant is at its cap.
    assert_eq!(
        admit(&caps, &mut conn, "acme", "m1").await,
        Err(CapKind::Tenant)
    );
}

#[tokio::test]
async fn a_bucket_being_reclaimed_is_not_published_to() {
    let (_server, mut conn) = redis().await;
    let caps = caps(100, 16, 100);
    assert!(created(admit(&caps, &mut conn, "acme", "m").await));
    let topic = lite_topic_name("acme", "m");
    let cutoff = sluice_contract::now_ms() + 1;
    assert!(bookkeeping::retire_if_idle(&mut conn, &topic, cutoff, true)
        .await
        .unwrap());
    assert_eq!(
        admit(&caps, &mut conn, "acme", "m").await,
        Ok(Admission::Reclaiming)
    );
    assert_eq!(bucket_count(&mut conn).await, 0);
    bookkeeping::end_reclaim(&mut conn, &topic).await.unwrap();
    assert!(created(admit(&caps, &mut conn, "acme", "m").await));
}

/// The endpoint with real Redis and broker; each bucket marked subscribed
/// beforehand, so a publish does not wait for a consumer.
struct Endpoint {
    addr: std::net::SocketAddr,
    metrics: Arc<EndpointMetrics>,
    caps_metrics: CapsMetrics,
    _broker: RocketMq,
    _redis: RedisServer,
}

async fn endpoint(limits: CapLimits) -> (Endpoint, sluice_redis::RedisConn) {
    let (server, conn) = redis().await;
    let broker = start_broker().await;
    let caps_metrics = CapsMetrics::default();
    let metrics = Arc::new(EndpointMetrics::default());
    let addr = start_deferral_endpoint(EndpointConfig {
        caps: limits,
        caps_metrics: caps_metrics.clone(),
        options: EndpointOptions {
            timeout: Duration::from_millis(500),
            ..Default::default()
        },
        metrics: metrics.clone(),
        ..endpoint_config(&server, &broker)
    })
    .await;
    (
        Endpoint {
            addr,
            metrics,
            caps_metrics,
            _broker: broker,
            _redis: server,
        },
        conn,
    )
}

async fn defer(
    endpoint: &Endpoint,
    conn: &mut sluice_redis::RedisConn,
    tenant: &str,
    model: &str,
    req_id: &str,
) -> sluice_testkit::HttpResponse {
    let _: () = redis::cmd("SET")
        .arg(keys::subscribed(&lite_topic_name(tenant, model)))
        .arg(1)
        .query_async(conn)
        .await
        .unwrap();
    let addr = endpoint.addr;
    let body = format!(r#"{{"model":"{model}","messages":[{{"role":"user","content":"hi"}}]}}"#);
    // Signed as the filter signs a deferral (the endpoint refuses anything else).
    let headers =
        sluice_testkit::deferral_headers(req_id, tenant, model, "normal", 1, body.as_bytes());
    sluice_testkit::spawn_post(addr, "/v1/chat/completions", headers, body)
        .await
        .unwrap()
}

fn error_code(response: &sluice_testkit::HttpResponse) -> String {
    let body: serde_json::Value = serde_json::from_str(&response.body).unwrap();
    body["error"]["code"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_endpoint_answers_refusals_with_429_or_503_and_retry_after() {
    let (endpoint, mut conn) = endpoint(CapLimits {
        max_buckets: 2,
        max_buckets_per_tenant: 1,
        max_new_buckets_per_minute: 100,
        ..Default::default()
    })
    .await;
    // Queued: nobody answers, so the client gets the endpoint's timeout.
    let queued = defer(&endpoint, &mut conn, "acme", "m1", "r-1").await;
    assert_eq!(queued.status, 504, "{}", queued.body);
    assert_eq!(error_code(&queued), "timeout");

    let tenant = defer(&endpoint, &mut conn, "acme", "m2", "r-2").await;
    assert_eq!(tenant.status, 429, "{}", tenant.body);
    assert_eq!(error_code(&tenant), "tenant_bucket_limit");
    assert_eq!(tenant.header("retry-after"), Some("60"));
    let body: serde_json::Value = serde_json::from_str(&tenant.body).unwrap();
    assert_eq!(body["error"]["type"], "sluice_deferral");
    assert!(body["error"]["message"].as_str().unwrap().contains('1'));

    assert_eq!(
        defer(&endpoint, &mut conn, "zeta", "m1", "r-3")
            .await
            .status,
        504
    );
    let full = defer(&endpoint, &mut conn, "omega", "m1", "r-4").await;
    assert_eq!(full.status, 503, "{}", full.body);
    assert_eq!(error_code(&full), "bucket_capacity");
    assert_eq!(full.header("retry-after"), Some("60"));

    // The existing bucket still takes requests at both caps.
    assert_eq!(
        defer(&endpoint, &mut conn, "acme", "m1", "r-5")
            .await
            .status,
        504
    );
    let rejected = |reason: &str| {
        endpoint
            .metrics
            .rejected
            .get_or_create(&vec![("reason".to_string(), reason.to_string())])
            .get()
    };
    assert_eq!(rejected("tenant_bucket_limit"), 1);
    assert_eq!(rejected("bucket_capacity"), 1);
    assert_eq!(endpoint.metrics.accepted.get(), 3);
    assert_eq!(endpoint.caps_metrics.buckets.get(), 2);
    assert_eq!(endpoint.caps_metrics.created.get(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_endpoint_answers_429_beyond_the_new_bucket_rate() {
    let (endpoint, mut conn) = endpoint(CapLimits {
        max_new_buckets_per_minute: 1,
        ..Default::default()
    })
    .await;
    let into_minute = sluice_contract::now_ms() % 60_000;
    if into_minute > 55_000 {
        tokio::time::sleep(Duration::from_millis(60_500 - into_minute)).await;
    }
    assert_eq!(
        defer(&endpoint, &mut conn, "a", "m", "r-1").await.status,
        504
    );
    let refused = defer(&endpoint, &mut conn, "b", "m", "r-2").await;
    assert_eq!(refused.status, 429, "{}", refused.body);
    assert_eq!(error_code(&refused), "bucket_rate_limit");
    let retry: u64 = refused.header("retry-after").unwrap().parse().unwrap();
    assert!((1..=60).contains(&retry), "{retry}");
}

/// The reclaim path on real parts: a consumer retires an idle bucket, the
/// broker's queue directory and the bucket's metric series go, and the next
/// request re-creates the bucket and is answered.
///
/// The test holds the bucket while it looks (one more in its backlog, which
/// a consumer never retires) and lets it go after: with a 1 s idle TTL, a
/// loaded run had retired the bucket before the test saw its queue.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retired_bucket_is_reclaimed_at_the_broker_and_comes_back() {
    sluice_testkit::init_test_tracing();
    let (_server, conn) = redis().await;
    let broker = start_broker().await;
    let backend = start_fast_llm_sim(5).await;
    let publisher = LitePublisher::connect(&broker.namesrv_addr(), PARENT, GROUP, conn.clone())
        .await
        .unwrap();
    let reclaimer = ConsumerSpec {
        pacing: unpaced(),
        options: RunnerOptions {
            discovery_interval: Duration::from_millis(200),
            idle_ttl: Duration::from_secs(1),
            retire_interval: Duration::from_millis(300),
            ..Default::default()
        },
        ..ConsumerSpec::new("reclaimer")
    };
    let consumer = start_consumer(&conn, &broker, backend, reclaimer).await;
    let metrics = consumer.metrics.clone();

    let topic = lite_topic_name("sleepy", "gpt-4o");
    let queue_dir = broker
        .dir()
        .join("store/consumequeue")
        .join(format!("%LMQ%${PARENT}${topic}"));
    let publish = |req_id: &'static str| {
        let work = work_item("sleepy", "gpt-4o", req_id, 10);
        let publisher = &publisher;
        async move {
            publisher
                .publish("sleepy", "gpt-4o", req_id, work.to_json().into())
                .await
                .unwrap();
        }
    };
    let hold = |held: bool| {
        let mut conn = conn.clone();
        let topic = topic.clone();
        async move {
            redis::cmd(if held { "INCR" } else { "DECR" })
                .arg(keys::backlog(&topic))
                .query_async::<()>(&mut conn)
                .await
                .unwrap();
        }
    };
    // The broker's store writes a LiteTopic's consume queue files in its own
    // background dispatch, not in step with the answer: wait for them.
    let queue_appears = || async {
        let deadline = Instant::now() + Duration::from_secs(15);
        while !queue_dir.is_dir() && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert!(queue_dir.is_dir(), "no queue at {}", queue_dir.display());
    };
    let done = |req_id: &'static str| {
        let mut conn = conn.clone();
        async move {
            let deadline = Instant::now() + Duration::from_secs(15);
            while Instant::now() < deadline {
                let done: bool = redis::cmd("EXISTS")
                    .arg(keys::done(req_id))
                    .query_async(&mut conn)
                    .await
                    .unwrap();
                if done {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            panic!("{req_id} not answered");
        }
    };

    hold(true).await;
    publish("reclaim-1").await;
    done("reclaim-1").await;
    queue_appears().await;
    assert!(metrics.encode().contains("bucket=\"sleepy/gpt-4o\""));
    hold(false).await;

    let deadline = Instant::now() + Duration::from_secs(15);
    while metrics.group.buckets_retired.get() == 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(metrics.group.buckets_retired.get(), 1);
    assert_eq!(
        metrics.group.buckets_reclaimed.get(),
        1,
        "{}",
        metrics.encode()
    );
    assert!(
        !queue_dir.exists(),
        "the broker kept {}: {:?}",
        queue_dir.display(),
        std::fs::read_dir(&queue_dir).map(|d| d.count())
    );
    let text = metrics.encode();
    assert!(!text.contains("sleepy/gpt-4o"), "series left:\n{text}");
    let mut redis = conn.clone();
    let (mark, in_set): (bool, bool) = redis::pipe()
        .exists(keys::reclaiming(&topic))
        .cmd("SISMEMBER")
        .arg(keys::BUCKETS)
        .arg(&topic)
        .query_async(&mut redis)
        .await
        .unwrap();
    assert!(!mark && !in_set);

    // The bucket comes back: its queue is created anew (from offset 0) and
    // the request is answered.
    hold(true).await;
    publish("reclaim-2").await;
    done("reclaim-2").await;
    queue_appears().await;
    assert!(metrics.encode().contains("bucket=\"sleepy/gpt-4o\""));

    consumer.stop().await;
}

/// The broker queues up to `maxClientEventCount` ready LiteTopics per
/// consumer client and refills the rest only when the client asks again
/// (lite-topic/README.md): below the endpoint's default bucket cap, a
/// consumer of that many one-message buckets gets them a slice at a time
/// (10,000 buckets at 100: about 400 messages/s, docs/benchmarks.md).
#[test]
fn the_broker_readies_as_many_lite_topics_per_consumer_as_the_default_bucket_cap() {
    let path = sluice_testkit::workspace_root().join("lite-topic/broker/broker.toml.in");
    let template = std::fs::read_to_string(&path).unwrap();
    let values: Vec<u64> = template
        .lines()
        .filter_map(|line| line.trim().strip_prefix("maxClientEventCount"))
        .map(|rest| rest.trim().trim_start_matches('=').trim().parse().unwrap())
        .collect();
    assert_eq!(
        values.len(),
        1,
        "one maxClientEventCount in {}",
        path.display()
    );
    assert!(
        values[0] >= sluice_deferral::caps::DEFAULT_MAX_BUCKETS,
        "maxClientEventCount {} < the default bucket cap {}",
        values[0],
        sluice_deferral::caps::DEFAULT_MAX_BUCKETS
    );
}
