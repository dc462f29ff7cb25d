//! The consumer group on real parts (Redis, the RocketMQ broker, the
//! simulated backend, the endpoint's LitePublisher): buckets split among
//! live instances, a departed instance's buckets taken over, held messages
//! handed back at shutdown, 50 buckets with 5 throttled, idle buckets
//! retired and revived.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests fail loudly
#![recursion_limit = "256"] // rocketmq-client futures are deeply nested

use sluice_consumer::keys::{self, Dimension};
use sluice_consumer::RunnerOptions;
use sluice_consumer::Scope;
use sluice_litetopic::lite_topic_name;
use sluice_testkit::queue_parts::QueueParts;
use sluice_testkit::redis_topologies::RedisKind;
use sluice_testkit::stack::{model_calls, unpaced, work_item, ConsumerInstance, ConsumerSpec};
use std::collections::HashSet;
use std::time::{Duration, Instant};

const MODEL: &str = "gpt-4o";

async fn start(kind: RedisKind) -> QueueParts {
    let mut sim = sluice_llm_sim::SimConfig::fast();
    sim.default_completion_tokens = 5;
    QueueParts::start(kind, sim).await
}

/// A member of the group, unlimited pacing unless set otherwise.
async fn instance(stack: &QueueParts, id: &str, options: RunnerOptions) -> Instance {
    stack
        .group_member(ConsumerSpec {
            pacing: unpaced(),
            options,
            ..ConsumerSpec::new(id)
        })
        .await
}

async fn publish(stack: &QueueParts, tenant: &str, req_id: &str) {
    stack.publish(&work_item(tenant, MODEL, req_id, 10)).await;
}

/// Publishes `req_id` to `tenant`'s bucket, waits for its answer and checks
/// that `one` owns that bucket and no other; the bucket's LiteTopic.
async fn answered_by(stack: &QueueParts, one: &Instance, tenant: &str, req_id: &str) -> String {
    publish(stack, tenant, req_id).await;
    stack
        .wait_done(&[req_id.into()], Duration::from_secs(10))
        .await;
    let topic = lite_topic_name(tenant, MODEL);
    assert_eq!(one.runner.owned(), vec![topic.clone()]);
    topic
}

/// Paces `tenant`'s bucket at `per_second` requests (through `instance`'s pacer: Redis, so every instance).
async fn throttle(instance: &Instance, tenant: &str, per_second: f64) {
    let bucket = Scope::Bucket {
        tenant,
        model: MODEL,
    };
    instance
        .pacer
        .set_rate(bucket, Dimension::Requests, Some(per_second))
        .await
        .unwrap();
}

async fn members(stack: &QueueParts) -> Vec<String> {
    let mut conn = stack.conn.clone();
    redis::cmd("ZRANGE")
        .arg(keys::CONSUMERS)
        .arg(0)
        .arg(-1)
        .query_async(&mut conn)
        .await
        .unwrap()
}

type Instance = ConsumerInstance;

async fn wait_until(what: &str, within: Duration, mut check: impl FnMut() -> bool) {
    let started = Instant::now();
    while !check() {
        assert!(started.elapsed() < within, "{what}: not within {within:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn ids(prefix: &str, tenants: &[String], per_tenant: usize) -> Vec<(String, String)> {
    tenants
        .iter()
        .flat_map(|t| (0..per_tenant).map(move |i| (t.clone(), format!("{prefix}-{t}-{i}"))))
        .collect()
}

// Every scenario of this file, on a single Redis and on a Redis Cluster.
sluice_testkit::single_and_cluster_tests!(
    instances_split_buckets_take_over_the_departed_and_hand_back_held_work_on,
    instances_split_buckets_take_over_the_departed_and_hand_back_held_work,
    instances_split_buckets_take_over_the_departed_and_hand_back_held_work_on_a_redis_cluster;
    five_throttled_buckets_do_not_hold_up_forty_five_others_on,
    five_throttled_buckets_do_not_hold_up_forty_five_others,
    five_throttled_buckets_do_not_hold_up_forty_five_others_on_a_redis_cluster;
    idle_buckets_are_retired_and_come_back_on_the_next_request_on,
    idle_buckets_are_retired_and_come_back_on_the_next_request,
    idle_buckets_are_retired_and_come_back_on_the_next_request_on_a_redis_cluster
);

async fn instances_split_buckets_take_over_the_departed_and_hand_back_held_work_on(
    redis: RedisKind,
) {
    let stack = start(redis).await;
    let tenants: Vec<String> = (0..8).map(|i| format!("tenant-{i}")).collect();
    let topics: HashSet<String> = tenants.iter().map(|t| lite_topic_name(t, MODEL)).collect();

    let a = instance(&stack, "consumer-a", RunnerOptions::default()).await;
    let b = instance(&stack, "consumer-b", RunnerOptions::default()).await;
    wait_until("both members seen by both", Duration::from_secs(5), || {
        a.metrics.group.members.get() == 2 && b.metrics.group.members.get() == 2
    })
    .await;

    // Round 1: 8 buckets × 3 requests; the buckets are split, each answered once.
    let round1 = ids("r1", &tenants, 3);
    for (tenant, id) in &round1 {
        publish(&stack, tenant, id).await;
    }
    let ids1: Vec<String> = round1.iter().map(|(_, id)| id.clone()).collect();
    let took = stack.wait_done(&ids1, Duration::from_secs(30)).await;
    eprintln!("round 1: 24 requests over 2 instances in {took:?}");
    let (owned_a, owned_b): (HashSet<String>, HashSet<String>) = (
        a.runner.owned().into_iter().collect(),
        b.runner.owned().into_iter().collect(),
    );
    assert!(owned_a.is_disjoint(&owned_b), "{owned_a:?} / {owned_b:?}");
    assert_eq!(&owned_a | &owned_b, topics);
    assert!(
        !owned_a.is_empty() && !owned_b.is_empty(),
        "{owned_a:?} / {owned_b:?}"
    );
    for id in &ids1 {
        assert_eq!(model_calls(stack.backend, id).await, 1, "{id}");
    }

    // A dies without a word: after the membership TTL B owns every bucket,
    // and requests to A's former buckets are answered.
    a.crash().await;
    wait_until("B takes over A's buckets", Duration::from_secs(10), || {
        b.runner.owned().len() == tenants.len()
    })
    .await;
    assert_eq!(members(&stack).await, vec!["consumer-b".to_string()]);
    let round2 = ids("r2", &tenants, 2);
    for (tenant, id) in &round2 {
        publish(&stack, tenant, id).await;
    }
    let ids2: Vec<String> = round2.iter().map(|(_, id)| id.clone()).collect();
    stack.wait_done(&ids2, Duration::from_secs(30)).await;
    for id in &ids2 {
        assert_eq!(model_calls(stack.backend, id).await, 1, "{id}");
    }

    // C joins and takes a share; then B is stopped gracefully while holding
    // a message of a throttled bucket: it leaves the member set at once and
    // hands the message back, and C answers it.
    let c = instance(&stack, "consumer-c", RunnerOptions::default()).await;
    wait_until("C takes a share", Duration::from_secs(10), || {
        !c.runner.owned().is_empty()
            && c.runner.owned().len() + b.runner.owned().len() == tenants.len()
    })
    .await;
    let slow_tenant = tenants
        .iter()
        .find(|t| b.runner.owned().contains(&lite_topic_name(t, MODEL)))
        .unwrap()
        .clone();
    // One every 3 s, with the slot just taken: the next message waits ~3 s.
    throttle(&b, &slow_tenant, 1.0 / 3.0).await;
    publish(&stack, &slow_tenant, "r3-first").await;
    stack
        .wait_done(&["r3-first".into()], Duration::from_secs(10))
        .await;
    publish(&stack, &slow_tenant, "r3-held").await;
    wait_until("B holds the paced message", Duration::from_secs(5), || {
        b.runner.active() == 1
    })
    .await;
    let b_metrics = b.metrics.clone();
    let took = b.stop().await;
    eprintln!("B stopped in {took:?}");
    assert_eq!(b_metrics.handed_back.get(), 1);
    assert!(took < Duration::from_secs(2), "{took:?}");
    assert_eq!(members(&stack).await, vec!["consumer-c".to_string()]);
    stack
        .wait_done(&["r3-held".into()], Duration::from_secs(15))
        .await;
    assert_eq!(model_calls(stack.backend, "r3-held").await, 1);
    assert!(c.counter("sluice_consumer_outcomes_total") >= 1.0);
    c.stop().await;
    drop(stack);
}

async fn five_throttled_buckets_do_not_hold_up_forty_five_others_on(redis: RedisKind) {
    let stack = start(redis).await;
    let one = instance(&stack, "consumer-solo", RunnerOptions::default()).await;
    let tenants: Vec<String> = (0..50).map(|i| format!("iso-{i:02}")).collect();
    let (throttled, healthy) = tenants.split_at(5);
    for tenant in throttled {
        throttle(&one, tenant, 0.2).await;
    }
    let work = ids("iso", &tenants, 3);
    let started = Instant::now();
    for (tenant, id) in &work {
        publish(&stack, tenant, id).await;
    }
    let published = started.elapsed();
    let healthy_ids: Vec<String> = work
        .iter()
        .filter(|(t, _)| healthy.contains(t))
        .map(|(_, id)| id.clone())
        .collect();
    let took = stack.wait_done(&healthy_ids, Duration::from_secs(60)).await;
    // Every throttled bucket runs its first message (its burst) too: slow,
    // not starved.
    let firsts: Vec<String> = throttled.iter().map(|t| format!("iso-{t}-0")).collect();
    stack.wait_done(&firsts, Duration::from_secs(30)).await;
    // At 0.2/s a throttled bucket gets its burst slot, then one more per 5 s
    // since publishing began: no more.
    let mut throttled_done = 0;
    for (tenant, id) in &work {
        if throttled.contains(tenant) && stack.is_done(id).await {
            throttled_done += 1;
        }
    }
    eprintln!(
        "135 healthy requests answered {took:?} after publishing started (publishing took {published:?}); \
         throttled answered so far: {throttled_done} of 15"
    );
    let allowed = 5 * (1 + (started.elapsed().as_secs_f64() * 0.2).floor() as usize);
    assert!(
        (5..=allowed).contains(&throttled_done),
        "throttled buckets ran {throttled_done}, pace allows {allowed}"
    );
    one.stop().await;
}

async fn idle_buckets_are_retired_and_come_back_on_the_next_request_on(redis: RedisKind) {
    let stack = start(redis).await;
    let one = instance(
        &stack,
        "consumer-idle",
        RunnerOptions {
            idle_ttl: Duration::from_secs(1),
            retire_interval: Duration::from_millis(300),
            ..Default::default()
        },
    )
    .await;
    let topic = answered_by(&stack, &one, "sleepy", "idle-1").await;

    wait_until("bucket retired", Duration::from_secs(10), || {
        one.runner.owned().is_empty()
    })
    .await;
    let mut conn = stack.conn.clone();
    let (in_set, marked): (bool, bool) = redis::pipe()
        .cmd("SISMEMBER")
        .arg(keys::BUCKETS)
        .arg(&topic)
        .exists(keys::subscribed(&topic))
        .query_async(&mut conn)
        .await
        .unwrap();
    assert!(!in_set && !marked, "retired bucket still announced");
    assert_eq!(one.metrics.group.buckets_retired.get(), 1);

    // The next request brings it back: the publish waits for the fresh
    // subscription and is answered.
    answered_by(&stack, &one, "sleepy", "idle-2").await;
    one.stop().await;
}

/// Redis comes back empty while a consumer keeps its bucket, and the
/// endpoint announces the bucket again before the consumer looks (so the
/// consumer never sees it leave and subscribe anew): the consumer writes
/// the bucket's subscription mark again. Without it the endpoint waited its
/// first-subscribe wait (3 s) on every publish to the bucket for good — a
/// chaos run with `--volatile-redis` showed 564 such waits after the Redis
/// kill (issue 29).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bucket_keeps_its_subscription_mark_across_an_empty_redis_restart() {
    let stack = start(RedisKind::Single).await;
    let one = instance(&stack, "consumer-flushed", RunnerOptions::default()).await;
    let topic = answered_by(&stack, &one, "phoenix", "flush-1").await;

    // Everything gone, and the bucket announced again, in one step.
    let mut conn = stack.conn.clone();
    let () = redis::pipe()
        .atomic()
        .cmd("FLUSHALL")
        .ignore()
        .cmd("SADD")
        .arg(keys::BUCKETS)
        .arg(&topic)
        .ignore()
        .query_async(&mut conn)
        .await
        .unwrap();
    let started = Instant::now();
    loop {
        let marked: bool = redis::cmd("EXISTS")
            .arg(keys::subscribed(&topic))
            .query_async(&mut conn)
            .await
            .unwrap();
        if marked {
            break;
        }
        // Many discovery rounds (500 ms each): the mark never comes back
        // without the fix, however loaded the machine.
        assert!(
            started.elapsed() < Duration::from_secs(15),
            "the owned bucket's subscription mark was not written again"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    answered_by(&stack, &one, "phoenix", "flush-2").await;
    one.stop().await;
}
