//! Adaptive concurrency and fair sharing on real parts (Redis, the RocketMQ
//! broker, llm-sim, the endpoint's LitePublisher): weighted shares between
//! backlogged tenants, strict priority bands, work conservation, order
//! inside a bucket with the controller and fair sharing on, and two
//! consumer instances sharing one controller state.
//!
//! The order the model sees calls in is read from Redis: each answer's
//! first chunk is a response-stream entry whose id is Redis's clock at the
//! write; with calls one at a time (in-flight cap 1) or spaced by pacing,
//! that order is the order the calls reached the model.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests fail loudly
#![recursion_limit = "256"] // rocketmq-client futures are deeply nested

use sluice_consumer::control_loop::{self, Controls};
use sluice_consumer::controller::{ControllerConfig, InQuotaReserve, ModelControl, SignalConfig};
use sluice_consumer::fair::{FairConfig, OrderConfig};
use sluice_consumer::{keys, InFlightConfig, InFlightLimits, Metrics, Outcome, PacingConfig};
use sluice_contract::saturation::{self, Saturation};
use sluice_contract::Priority;
use sluice_testkit::queue_parts::QueueParts;
use sluice_testkit::redis_topologies::RedisKind;
use sluice_testkit::stack::{
    paced, redis_connection, unpaced, work_item, ConsumerInstance, ConsumerSpec,
};
use sluice_testkit::RedisServer;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

const MODEL: &str = "fair-model";

/// Each call takes about `call` at the model.
async fn start(call: Duration) -> QueueParts {
    let mut sim = sluice_llm_sim::SimConfig::fast();
    sim.first_token_latency = call;
    sim.default_completion_tokens = 3;
    QueueParts::start(RedisKind::Single, sim).await
}

async fn member(stack: &QueueParts, id: &str, spec: ConsumerSpec) -> ConsumerInstance {
    stack
        .group_member(ConsumerSpec {
            id: id.into(),
            ..spec
        })
        .await
}

/// A model that takes 60 ms a call, and one consumer, `c1`, calling it
/// [`one_at_a_time`] with `weights`.
async fn sole_member(weights: &[(&str, f64)]) -> (QueueParts, ConsumerInstance) {
    let stack = start(Duration::from_millis(60)).await;
    let consumer = member(&stack, "c1", one_at_a_time(weights)).await;
    (stack, consumer)
}

async fn publish(stack: &QueueParts, tenant: &str, req_id: &str, priority: Priority) {
    let mut work = work_item(tenant, MODEL, req_id, 100);
    work.priority = priority;
    stack.publish(&work).await;
}

/// Waits until every id is answered; returns the ids in the order their
/// calls reached the model.
async fn served_order(stack: &QueueParts, ids: &[String], within: Duration) -> Vec<String> {
    stack.wait_done(ids, within).await;
    let mut stamped = Vec::new();
    for id in ids {
        // The server's own arrival order: the order answers came back in
        // can differ by a scheduling hiccup when calls overlap.
        let at = sluice_testkit::stack::model_arrival(stack.backend, id)
            .await
            .expect("an answered call reached the model");
        stamped.push((at, id.clone()));
    }
    stamped.sort();
    stamped.into_iter().map(|(_, id)| id).collect()
}

/// One call at a time to [`MODEL`], fair sharing on, `weights` per tenant.
fn one_at_a_time(weights: &[(&str, f64)]) -> ConsumerSpec {
    ordered_one_at_a_time(weights, OrderConfig::default())
}

/// [`one_at_a_time`], the fair queue in `order`.
fn ordered_one_at_a_time(weights: &[(&str, f64)], order: OrderConfig) -> ConsumerSpec {
    ConsumerSpec {
        pacing: unpaced(),
        limits: InFlightConfig {
            default_max_in_flight: Some(1),
            ..InFlightConfig::default()
        },
        fair: FairConfig {
            models: vec![MODEL.into()],
            weights: weights.iter().map(|(t, w)| (t.to_string(), *w)).collect(),
            order,
            ..FairConfig::default()
        },
        ..ConsumerSpec::new("unused")
    }
}

/// Waits until the controller's shared limit of [`MODEL`] is `wanted`;
/// returns it.
async fn limit_reaches(
    stack: &QueueParts,
    wanted: fn(f64) -> bool,
    within: Duration,
) -> Option<f64> {
    let mut conn = stack.conn.clone();
    let started = Instant::now();
    loop {
        let (limit, _) = control_loop::shared_state(&mut conn, MODEL).await.unwrap();
        if limit.is_some_and(wanted) {
            return limit;
        }
        assert!(started.elapsed() < within, "the limit stayed at {limit:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A controller steering by the model's answers (429/503s, times to first
/// token) between `floor` and `ceiling`, a step every `interval_ms`.
fn on_responses(floor: u32, ceiling: u32, interval_ms: u64) -> ModelControl {
    ModelControl {
        signal: SignalConfig::Responses,
        floor,
        ceiling,
        interval_ms,
        ..ModelControl::default()
    }
}

/// A controller on [`MODEL`].
fn controller(control: ModelControl) -> ControllerConfig {
    ControllerConfig {
        models: HashMap::from([(MODEL.to_string(), control)]),
    }
}

/// `pacing`, a controller on [`MODEL`].
fn controlled(pacing: PacingConfig, control: ModelControl) -> ConsumerSpec {
    ConsumerSpec {
        pacing,
        controller: controller(control),
        ..ConsumerSpec::new("unused")
    }
}

fn tenant_of(req_id: &str) -> &str {
    req_id.split('-').next().unwrap_or_default()
}

/// Publishes `per_tenant` requests per tenant, interleaved, all at once.
async fn backlog(
    stack: &QueueParts,
    tenants: &[(&str, Priority)],
    per_tenant: usize,
) -> Vec<String> {
    let mut ids = Vec::new();
    for i in 0..per_tenant {
        for (tenant, priority) in tenants {
            let id = format!("{tenant}-{i}");
            publish(stack, tenant, &id, *priority).await;
            ids.push(id);
        }
    }
    ids
}

/// [`backlog`] of tenants all of normal priority.
async fn backlog_of_normal(stack: &QueueParts, tenants: &[&str], per_tenant: usize) -> Vec<String> {
    let tenants: Vec<(&str, Priority)> = tenants.iter().map(|t| (*t, Priority::Normal)).collect();
    backlog(stack, &tenants, per_tenant).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn backlogged_tenants_share_the_model_by_weight_and_idle_shares_go_to_the_others() {
    shares_follow_the_weights(OrderConfig::VirtualFinish).await;
}

/// The same with the order by attained service: each answer's usage is
/// counted for its tenant when it ends, and the weights still hold.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn ordered_by_attained_service_backlogged_tenants_still_share_by_weight() {
    shares_follow_the_weights(OrderConfig::AttainedService).await;
}

async fn shares_follow_the_weights(order: OrderConfig) {
    let stack = start(Duration::from_millis(60)).await;
    let weights = [("light", 1.0), ("mid", 2.0), ("heavy", 4.0)];
    let consumer = member(&stack, "c1", ordered_one_at_a_time(&weights, order)).await;
    let ids = backlog_of_normal(&stack, &["light", "mid", "heavy"], 28).await;
    let order = served_order(&stack, &ids, Duration::from_secs(60)).await;
    // While all three are backlogged (until heavy's 28 are served, about
    // 49 calls in), shares follow the weights 1 : 2 : 4. The first calls
    // ran before every lane had a head queued: skip them.
    let window: Vec<&str> = order[7..42].iter().map(|id| tenant_of(id)).collect();
    let count = |t: &str| window.iter().filter(|w| **w == t).count();
    let (light, mid, heavy) = (count("light"), count("mid"), count("heavy"));
    println!("35 calls while backlogged: light {light}, mid {mid}, heavy {heavy}");
    assert!(
        (3..=7).contains(&light),
        "light {light} of 35 (weight 1/7 → 5)"
    );
    assert!((8..=12).contains(&mid), "mid {mid} of 35 (weight 2/7 → 10)");
    assert!(
        (17..=23).contains(&heavy),
        "heavy {heavy} of 35 (weight 4/7 → 20)"
    );
    // Work conservation: once heavy is done its share goes to the others,
    // and the last calls are all theirs (nothing waits for heavy's turn).
    let last_heavy = order
        .iter()
        .rposition(|id| tenant_of(id) == "heavy")
        .unwrap();
    assert!(last_heavy < 70, "heavy's last call at {last_heavy} of 84");
    assert!(order[last_heavy + 1..]
        .iter()
        .all(|id| tenant_of(id) != "heavy"));
    consumer.stop().await;
}

/// Ordered by attained service, a call is charged as it starts (its
/// prompt's estimate) and as it streams, not only when it ends: while
/// tenant `long`'s first call (a large prompt, a long answer) runs, the
/// slots freed by `short`'s quick calls go on to `short`, whose counter is
/// below. Charged only at the end (the consumer before 2026-12-07), `long`'s
/// counter stood still while its call ran, and its next call took the
/// next free slot: both slots held long answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn ordered_by_attained_service_a_running_call_counts_before_it_ends() {
    let mut sim = sluice_llm_sim::SimConfig::fast();
    sim.first_token_latency = Duration::from_millis(20);
    sim.tokens_per_second = 40.0;
    sim.default_completion_tokens = 80; // `long`'s answers: about 2 s
    let stack = QueueParts::start(RedisKind::Single, sim).await;
    let mut spec = ordered_one_at_a_time(&[], OrderConfig::AttainedService);
    spec.limits.default_max_in_flight = Some(2);
    let consumer = member(&stack, "c1", spec).await;
    // `short` first, a backlog of quick calls (4 output tokens each).
    let mut ids = Vec::new();
    for i in 0..24 {
        let id = format!("short-{i}");
        let mut work = work_item("short", MODEL, &id, 104);
        work.body["max_tokens"] = 4.into();
        stack.publish(&work).await;
        ids.push(id);
    }
    for i in 0..3 {
        let id = format!("long-{i}");
        stack.publish(&work_item("long", MODEL, &id, 2000)).await;
        ids.push(id);
    }
    let order = served_order(&stack, &ids, Duration::from_secs(90)).await;
    let first_long = order.iter().position(|id| tenant_of(id) == "long").unwrap();
    let next: Vec<&str> = order[first_long + 1..first_long + 5]
        .iter()
        .map(|id| tenant_of(id))
        .collect();
    println!("calls after long's first: {next:?} (order {order:?})");
    assert_eq!(
        next, ["short"; 4],
        "long's running call (2000 tokens charged at its start) keeps its next call behind short's"
    );
    consumer.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn priority_bands_are_served_strictly_in_order() {
    let (stack, consumer) = sole_member(&[("low", 100.0), ("normal", 10.0)]).await;
    let ids = backlog(
        &stack,
        &[
            ("low", Priority::Low),
            ("normal", Priority::Normal),
            ("high", Priority::High),
        ],
        12,
    )
    .await;
    let order = served_order(&stack, &ids, Duration::from_secs(60)).await;
    let bands: Vec<&str> = order.iter().map(|id| tenant_of(id)).collect();
    println!("served: {bands:?}");
    // Once all three lanes are queued (a few calls in), high drains before
    // normal, normal before low, whatever the weights: the bands of the
    // calls never go up again.
    let rank = |band: &str| match band {
        "high" => 2,
        "normal" => 1,
        _ => 0,
    };
    let settled = 6;
    let out_of_order = bands[settled..]
        .windows(2)
        .filter(|pair| rank(pair[0]) < rank(pair[1]))
        .count();
    assert_eq!(out_of_order, 0, "{bands:?}");
    consumer.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_bucket_reaches_the_model_in_publish_order_with_controller_and_fair_sharing_on() {
    let stack = start(Duration::from_millis(20)).await;
    let control = on_responses(1, 4, 200);
    let spec = controlled(paced(10.0), control);
    let consumer = member(&stack, "c1", spec).await;
    let mut ids = Vec::new();
    for i in 0..30 {
        let id = format!("solo-{i:02}");
        publish(&stack, "solo", &id, Priority::Normal).await;
        ids.push(id);
    }
    let order = served_order(&stack, &ids, Duration::from_secs(60)).await;
    let inversions = order.windows(2).filter(|pair| pair[0] > pair[1]).count();
    assert_eq!(order, ids, "{inversions} inversions");
    // The controller ran: its limit is in Redis and in the metrics.
    let mut conn = stack.conn.clone();
    let (limit, _) = control_loop::shared_state(&mut conn, MODEL).await.unwrap();
    assert!(limit.is_some_and(|l| (1.0..=4.0).contains(&l)), "{limit:?}");
    assert!(consumer.counter("sluice_consumer_controller_limit") >= 1.0);
    consumer.stop().await;
}

/// Two controllers on one Redis, as two instances run them.
fn controls(
    redis: &sluice_redis::RedisConn,
    control: &ModelControl,
) -> (Arc<Controls>, Arc<InFlightLimits>, Arc<Metrics>) {
    let metrics = Arc::new(Metrics::default());
    let limits = Arc::new(InFlightLimits::new(InFlightConfig::default(), None));
    let config = controller(control.clone());
    let controls = Arc::new(
        Controls::new(config, redis.clone(), limits.clone(), metrics.clone())
            .with_membership_ttl(Duration::from_secs(5)),
    );
    (controls, limits, metrics)
}

async fn beat(conn: &mut sluice_redis::RedisConn, id: &str) {
    let _: () = redis::cmd("ZADD")
        .arg(keys::CONSUMERS)
        .arg(sluice_contract::now_ms())
        .arg(id)
        .query_async(conn)
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_instances_share_one_controller_state() {
    let redis = RedisServer::start_off_runtime().await.unwrap();
    let mut conn = redis_connection(&redis);
    let control = ModelControl {
        initial: Some(20),
        decrease_factor: 0.5,
        ..on_responses(2, 40, 300)
    };
    let (a, limits_a, metrics_a) = controls(&conn, &control);
    let (b, limits_b, metrics_b) = controls(&conn, &control);
    beat(&mut conn, "a").await;
    beat(&mut conn, "b").await;
    // Both tick in one interval: the shared (limit, override), and the
    // calls each instance may have in flight.
    let tick_both = async |conn: &mut sluice_redis::RedisConn| {
        a.tick(MODEL, &control, "a").await.unwrap();
        b.tick(MODEL, &control, "b").await.unwrap();
        let shared = control_loop::shared_state(conn, MODEL).await.unwrap();
        (shared, limits_a.available(MODEL), limits_b.available(MODEL))
    };
    // One steps (the limit grows by one step, not two), both apply half of it.
    let ((limit, _), in_a, in_b) = tick_both(&mut conn).await;
    assert_eq!((limit, in_a, in_b), (Some(21.0), Some(11), Some(10)));
    // Overload answers seen by b are stepped on by whoever holds the next
    // lease, once: one halving.
    let busy = Outcome::RetryLater {
        kind: sluice_consumer::FailureKind::BackendBusy,
        retry_after: Some(Duration::from_secs(2)),
        detail: "429".into(),
    };
    b.observe(MODEL, &busy).await;
    b.observe(MODEL, &busy).await;
    tokio::time::sleep(Duration::from_millis(350)).await;
    let ((limit, _), in_a, in_b) = tick_both(&mut conn).await;
    assert_eq!((limit, in_a, in_b), (Some(10.5), Some(5), Some(5)));
    let changes = |m: &Metrics| {
        m.encode()
            .lines()
            .filter(|l| l.starts_with("sluice_consumer_controller_changes_total"))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum::<f64>()
    };
    assert_eq!(changes(&metrics_a) + changes(&metrics_b), 2.0);
    // Retry-After holds increases for 2 s: the next interval holds.
    tokio::time::sleep(Duration::from_millis(350)).await;
    a.tick(MODEL, &control, "a").await.unwrap();
    let (limit, _) = control_loop::shared_state(&mut conn, MODEL).await.unwrap();
    assert_eq!(limit, Some(10.5));
    // An operator's override wins on both instances, and the controller
    // stops stepping until it is handed back.
    control_loop::set_override(&mut conn, MODEL, Some(30))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(350)).await;
    let ((limit, manual), in_a, in_b) = tick_both(&mut conn).await;
    assert_eq!((in_a, in_b), (Some(15), Some(15)));
    assert_eq!((limit, manual), (Some(10.5), Some(30.0)));
    control_loop::set_override(&mut conn, MODEL, None)
        .await
        .unwrap();
    a.tick(MODEL, &control, "a").await.unwrap();
    assert_eq!(limits_a.available(MODEL), Some(5), "10.5 → 10, split 5 + 5");
    // b leaves: a gets the whole limit.
    let _: () = redis::cmd("ZREM")
        .arg(keys::CONSUMERS)
        .arg("b")
        .query_async(&mut conn)
        .await
        .unwrap();
    a.tick(MODEL, &control, "a").await.unwrap();
    assert_eq!(limits_a.available(MODEL), Some(10));
}

/// A model server that always reports the same load.
struct FixedLoad(control_loop::ServerLoad);

/// A controller on the server's gauges (never scraped: the tests give
/// [`controls_on`] the load instead), from 20 between 1 and 40.
fn on_gauges() -> ModelControl {
    ModelControl {
        signal: SignalConfig::Prometheus {
            url: "http://unused/metrics".into(),
        },
        floor: 1,
        ceiling: 40,
        initial: Some(20),
        interval_ms: 300,
        ..ModelControl::default()
    }
}

/// A controller on the gauges of `stack`'s llm-sim, from 1 between 1 and
/// 16, one request waiting at the server as its target, a step every 200 ms.
fn on_sim_gauges(stack: &QueueParts) -> ModelControl {
    ModelControl {
        signal: SignalConfig::Prometheus {
            url: format!("http://{}/metrics", stack.backend),
        },
        floor: 1,
        ceiling: 16,
        initial: Some(1),
        target_waiting: 1.0,
        interval_ms: 200,
        ..ModelControl::default()
    }
}

/// [`controls`] reading a server that queues `waiting` and runs `running`.
fn controls_on(
    redis: &sluice_redis::RedisConn,
    control: &ModelControl,
    (waiting, running): (f64, f64),
) -> (Arc<Controls>, Arc<InFlightLimits>, Arc<Metrics>) {
    let (controls, limits, metrics) = controls(redis, control);
    let server = Arc::new(FixedLoad(control_loop::ServerLoad {
        waiting,
        running,
        kv_cache_usage: None,
    }));
    let controls = Arc::try_unwrap(controls).ok().unwrap().with_source(server);
    (Arc::new(controls), limits, metrics)
}

impl control_loop::CapacitySource for FixedLoad {
    fn sample<'a>(
        &'a self,
        _model: &'a str,
        _control: &'a ModelControl,
    ) -> futures::future::BoxFuture<
        'a,
        Result<Option<control_loop::ServerLoad>, control_loop::SignalError>,
    > {
        let load = self.0;
        Box::pin(async move { Ok(Some(load)) })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_stepper_counts_every_live_instances_calls_as_its_own_and_the_rest_as_foreign() {
    let redis = RedisServer::start_off_runtime().await.unwrap();
    let mut conn = redis_connection(&redis);
    let control = ModelControl {
        decrease_factor: 0.5,
        ..on_gauges()
    };
    // The server runs 12 and queues 8.
    let instance = || controls_on(&conn, &control, (8.0, 12.0));
    let (a, limits_a, _) = instance();
    let (b, limits_b, metrics_b) = instance();
    beat(&mut conn, "a").await;
    beat(&mut conn, "b").await;
    // a has 3 calls in flight, b 4; an instance that left wrote 9.
    let _held_a: Vec<_> = (0..3).map(|_| limits_a.try_acquire(MODEL)).collect();
    let _held_b: Vec<_> = (0..4).map(|_| limits_b.try_acquire(MODEL)).collect();
    let key = keys::controller(MODEL);
    let _: () = redis::cmd("HSET")
        .arg(&key)
        .arg("in_flight:gone")
        .arg(9)
        .query_async(&mut conn)
        .await
        .unwrap();
    // a writes its count and steps first (b has written nothing yet).
    a.tick(MODEL, &control, "a").await.unwrap();
    let (after_a, _) = control_loop::shared_state(&mut conn, MODEL).await.unwrap();
    // b steps the next interval on both counts: 7 own of the server's 20,
    // 13 foreign.
    tokio::time::sleep(Duration::from_millis(350)).await;
    b.tick(MODEL, &control, "b").await.unwrap();
    let text = metrics_b.encode();
    let gauge = |name: &str| {
        text.lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
    };
    assert_eq!(
        gauge("sluice_consumer_controller_own_in_flight"),
        Some(7.0),
        "{text}"
    );
    assert_eq!(
        gauge("sluice_consumer_controller_server_foreign"),
        Some(13.0),
        "{text}"
    );
    // The departed instance's count is dropped, the live ones stay.
    let fields: HashMap<String, String> = redis::cmd("HGETALL")
        .arg(&key)
        .query_async(&mut conn)
        .await
        .unwrap();
    assert!(!fields.contains_key("in_flight:gone"), "{fields:?}");
    assert_eq!(fields.get("in_flight:a").map(String::as_str), Some("3"));
    assert_eq!(fields.get("in_flight:b").map(String::as_str), Some("4"));
    // The law saw the foreign load: the server holds 12 + 2 for everyone,
    // 13 of it foreign, so the consumers' limit falls at both steps (the
    // old law, counting all 20 as its own, aims at 12 + 2 = 14 and stops
    // there, however many of them are foreign).
    let (after_b, _) = control_loop::shared_state(&mut conn, MODEL).await.unwrap();
    assert_eq!(
        after_a,
        Some(10.0),
        "a: aim 12 + 2 − 17 = −3, one step at most halves"
    );
    assert!(after_b.is_some_and(|l| l < 10.0), "{after_b:?}");
    // The stepper wrote the server saturated for admission: 8 waiting
    // (smoothed) against a target of 2, with the consumers' calls there.
    let saturation = Saturation::from_fields(
        fields.get(saturation::SATURATED).map(String::as_str),
        fields.get(saturation::SATURATED_AT_MS).map(String::as_str),
    );
    let stepped_at = saturation.map(|s| s.at_ms).unwrap_or(0);
    assert!(saturation.is_some_and(|s| s.saturated), "{fields:?}");
    assert_eq!(
        saturation::route_in_quota(saturation, stepped_at + 100, 1_500),
        saturation::Route::Queue
    );
    assert_eq!(
        saturation::route_in_quota(saturation, stepped_at + 1_501, 1_500),
        saturation::Route::Direct,
        "an old state counts as not saturated"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_in_quota_reserve_keeps_slots_of_the_servers_batch_free_through_the_control_loop() {
    let control = ModelControl {
        target_waiting: 1.0,
        in_quota_reserve: Some(InQuotaReserve {
            server_max_running: 32,
            slots: 4,
        }),
        ..on_gauges()
    };
    let redis = RedisServer::start_off_runtime().await.unwrap();
    let mut conn = redis_connection(&redis);
    // The server runs 24 and queues nothing: room to grow, by the queue.
    let (controls, limits, metrics) = controls_on(&conn, &control, (0.0, 24.0));
    beat(&mut conn, "a").await;
    // 6 of the 24 are the consumer's calls, 18 came in quota straight to
    // the server: room for 32 − 4 − 18 = 10 calls of the consumer's.
    let _held: Vec<_> = (0..6).map(|_| limits.try_acquire(MODEL)).collect();
    controls.tick(MODEL, &control, "a").await.unwrap();
    let (limit, _) = control_loop::shared_state(&mut conn, MODEL).await.unwrap();
    assert_eq!(limit, Some(10.0));
    let text = metrics.encode();
    assert!(
        text.lines().any(
            |l| l.starts_with("sluice_consumer_controller_changes_total")
                && l.contains(r#"reason="in_quota_reserve""#)
                && l.ends_with(" 1")
        ),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_in_quota_reserve_holds_deferred_work_to_the_batch_less_the_reserve_on_real_gauges() {
    // 3 slots sharing 150 tokens/s, 50 tokens an answer: about 1 s a call
    // with 3 running.
    let sim = sluice_testkit::stack::gpu_sim(150.0, 3, 50);
    let stack = QueueParts::start(RedisKind::Single, sim).await;
    let control = ModelControl {
        in_quota_reserve: Some(InQuotaReserve {
            server_max_running: 3,
            slots: 1,
        }),
        ..on_sim_gauges(&stack)
    };
    let consumer = member(&stack, "c1", controlled(unpaced(), control)).await;
    let ids = backlog_of_normal(&stack, &["t1", "t2"], 15).await;
    // The deferred work takes all but the reserved slot, and no more
    // (without the reserve the limit climbs past the 3 slots, to keep one
    // waiting at the server).
    limit_reaches(&stack, |limit| limit >= 2.0, Duration::from_secs(20)).await;
    let mut conn = stack.conn.clone();
    let highest = |limits: &[f64]| limits.iter().copied().fold(0.0, f64::max);
    let mut limits = Vec::new();
    for _ in 0..10 {
        let (limit, _) = control_loop::shared_state(&mut conn, MODEL).await.unwrap();
        limits.extend(limit);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(highest(&limits) <= 2.0, "{limits:?}");
    // A request straight to the server, as an in-quota one goes: while it
    // runs, the consumers make room for the next (3 − 1 − 1 = 1).
    let backend = stack.backend;
    let direct = tokio::task::spawn_blocking(move || {
        sluice_testkit::stack::chat_of(backend, "in-quota", MODEL, (40, 50))
    });
    let low = limit_reaches(&stack, |limit| limit < 2.0, Duration::from_secs(20)).await;
    let response = direct.await.unwrap().unwrap();
    assert_eq!(response.status, 200, "{response:?}");
    assert!(low.is_some_and(|limit| limit <= 1.0), "{low:?}");
    // Work-conserving: the backlog is answered all the same.
    stack.wait_done(&ids, Duration::from_secs(60)).await;
    consumer.stop().await;
}

/// A consumer whose answers-only controller on [`MODEL`] starts at 12
/// against `sim`, under a backlog: waits until the limit has halved
/// (at least once) and checks it changed for `reason`. The parts are
/// returned to outlive the consumer.
async fn limit_halves_for(
    sim: sluice_llm_sim::SimConfig,
    ttft_target_ms: Option<u64>,
    reason: &str,
) -> (QueueParts, ConsumerInstance) {
    let stack = QueueParts::start(RedisKind::Single, sim).await;
    let control = ModelControl {
        initial: Some(12),
        decrease_factor: 0.5,
        ttft_target_ms,
        ..on_responses(1, 20, 200)
    };
    let consumer = member(&stack, "c1", controlled(unpaced(), control)).await;
    backlog_of_normal(&stack, &["t1", "t2", "t3", "t4"], 8).await;
    limit_reaches(&stack, |limit| limit <= 6.0, Duration::from_secs(20)).await;
    let text = consumer.metrics.encode();
    let change = format!(
        "sluice_consumer_controller_changes_total{{model=\"{MODEL}\",reason=\"{reason}\"}}"
    );
    assert!(text.lines().any(|l| l.starts_with(&change)), "{text}");
    (stack, consumer)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_controller_cuts_its_limit_when_the_model_answers_429() {
    // A model that takes 3 calls at once and answers 429 beyond them: 12
    // at once get 429s, counted into Redis by the runner, stepped on by
    // the controller.
    let mut sim = sluice_llm_sim::SimConfig::fast();
    sim.first_token_latency = Duration::from_millis(150);
    sim.max_concurrency = 3;
    sim.over_capacity = sluice_llm_sim::OverCapacity::Reject429;
    sim.retry_after_secs = 1;
    let (_stack, consumer) = limit_halves_for(sim, None, "overloaded").await;
    assert!(consumer.counter("sluice_consumer_controller_overload_answers_total") >= 1.0);
    consumer.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_controller_cuts_its_limit_when_first_tokens_come_later_than_its_target() {
    // Every answer's first token after 300 ms; the target is 100 ms.
    // Answers only and no refusal would be room to grow: the limit falls
    // only because the answers' times to first token reach the stepper.
    let mut sim = sluice_llm_sim::SimConfig::fast();
    sim.first_token_latency = Duration::from_millis(300);
    let (_stack, consumer) = limit_halves_for(sim, Some(100), "slow_first_token").await;
    consumer.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_consumer_instances_split_one_controller_limit_and_follow_an_override() {
    let stack = start(Duration::from_millis(30)).await;
    let control = ModelControl {
        initial: Some(4),
        ..on_responses(2, 10, 200)
    };
    let spec = || controlled(unpaced(), control.clone());
    let c1 = member(&stack, "c1", spec()).await;
    let c2 = member(&stack, "c2", spec()).await;
    let ids = backlog_of_normal(&stack, &["t1", "t2", "t3", "t4"], 5).await;
    served_order(&stack, &ids, Duration::from_secs(60)).await;
    // The operator pins the limit: both instances take half of it.
    let mut conn = stack.conn.clone();
    control_loop::set_override(&mut conn, MODEL, Some(6))
        .await
        .unwrap();
    let cap = |c: &ConsumerInstance| c.counter("sluice_consumer_controller_instance_cap");
    let started = Instant::now();
    while !(cap(&c1) == 3.0 && cap(&c2) == 3.0) {
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "caps {} + {} for an override of 6",
            cap(&c1),
            cap(&c2)
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(c1.counter("sluice_consumer_controller_limit"), 6.0);
    // Handed back: the controller's own limit, stepped by one instance per
    // interval, again split between the two.
    control_loop::set_override(&mut conn, MODEL, None)
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(600)).await;
    let (limit, manual) = control_loop::shared_state(&mut conn, MODEL).await.unwrap();
    assert_eq!(manual, None);
    let limit = limit.unwrap().floor();
    let both = cap(&c1) + cap(&c2);
    assert!(
        (limit - both).abs() <= 1.0,
        "caps {both} for a limit of {limit} (one step may fall between the reads)"
    );
    c1.stop().await;
    c2.stop().await;
}

/// The controller follows the model server's own queue, read from its
/// vLLM gauges (llm-sim's GPU model): with 4 batch slots the limit climbs
/// past 4; when the server is cut to 2 slots at run time, requests wait
/// there and the limit comes down to near 2 + the target queue (a cap of 3).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_controller_follows_a_capacity_change_read_from_the_servers_gauges() {
    // 50 tokens per answer, 200 tokens/s shared by the batch: about 1 s a
    // call with 4 running.
    let sim = sluice_testkit::stack::gpu_sim(200.0, 4, 50);
    let stack = QueueParts::start(RedisKind::Single, sim).await;
    let spec = controlled(unpaced(), on_sim_gauges(&stack));
    let consumer = member(&stack, "c1", spec).await;
    backlog_of_normal(&stack, &["t1", "t2", "t3"], 30).await;
    let mut conn = stack.conn.clone();
    // Room at the server: the limit climbs past its 4 slots.
    let high = limit_reaches(&stack, |limit| limit >= 4.5, Duration::from_secs(20)).await;
    // Half the slots: requests wait at the server, the limit follows.
    let change = sluice_llm_sim::gpu::CapacityChange {
        max_batch: Some(2),
        ..Default::default()
    };
    sluice_testkit::stack::change_sim_capacity(stack.backend, &change)
        .await
        .unwrap();
    // Near 2 + the target queue: the cap applied (the limit's whole part)
    // is at most 3. Where inside [3, 4) the limit lands depends on the
    // queue samples on the way down; at 2 running + 1 waiting it is on
    // target and stays.
    let low = limit_reaches(&stack, |limit| limit < 4.0, Duration::from_secs(20)).await;
    println!("limit with 4 slots: {high:?}; after the cut to 2: {low:?}");
    let (limit, _) = control_loop::shared_state(&mut conn, MODEL).await.unwrap();
    assert!(limit.is_some_and(|l| l >= 1.0), "floor holds: {limit:?}");
    consumer.stop().await;
}
