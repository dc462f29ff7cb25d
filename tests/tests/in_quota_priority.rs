//! One server, in-quota and deferred traffic (issue 28), on real parts:
//! real Envoy with the built Wasm filter, sluice-rls with its deferral
//! endpoint, Redis, the RocketMQ broker, a consumer and llm-sim's GPU model
//! with priority scheduling (vLLM's `--scheduling-policy priority`). The
//! consumer sends its deferred calls with `priority: 1` (its
//! `server_priority`); an in-quota request goes straight to the server with
//! the default 0. While the server is saturated with a backlog of deferred
//! calls, the in-quota request is served ahead of the backlog's later ones.
//!
//! The assertions are on order, not on time: the server runs one request at
//! a time, each for about 0.7 s, and the in-quota request is sent only once
//! deferred requests wait at the server (its gauges say so), so first in,
//! first out would serve it after every one of those.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests fail loudly
#![recursion_limit = "256"] // rocketmq-client futures are deeply nested

use sluice_contract::saturation::Route;
use sluice_llm_sim::gpu::SchedulingPolicy;
use sluice_testkit::stack::limits::{self, OverLimit};
use sluice_testkit::stack::{chat_of, gpu_sim, unpaced, ConsumerSpec, Stack, StackBuilder};
use sluice_testkit::{get, HttpResponse};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

const MODEL: &str = "gpt-4o";
/// Deferred requests sent before the in-quota one.
const BACKLOG: usize = 8;
/// Deferred requests waiting at the server when the in-quota one is sent.
const MIN_WAITING: usize = 3;

/// `heavy` has 50 tokens an hour (every request here is over: deferred);
/// `light` has plenty (in quota: straight to the server).
fn limits() -> String {
    limits::file(&[
        limits::tenant(Some("heavy"), 1000, 50, OverLimit::Defer("normal")),
        limits::tenant(Some("light"), 1000, 1_000_000, OverLimit::Defer("normal")),
    ])
}

/// One request at a time, 100 tokens/s for prompt and answer together:
/// about 0.7 s per request (a 40-word prompt, 20 tokens of answer), by
/// priority.
fn one_at_a_time_gpu() -> sluice_llm_sim::SimConfig {
    let mut sim = gpu_sim(100.0, 1, 20);
    sim.models = vec![MODEL.to_string()];
    if let Some(gpu) = sim.gpu.as_mut() {
        gpu.policy = SchedulingPolicy::Priority;
    }
    sim
}

/// A chat of `tenant` through Envoy, and when its answer had fully come.
fn chat(
    envoy: SocketAddr,
    tenant: &'static str,
) -> tokio::task::JoinHandle<(HttpResponse, Instant)> {
    tokio::task::spawn_blocking(move || {
        let response = chat_of(envoy, tenant, MODEL, (40, 20))
            .unwrap_or_else(|e| panic!("chat of {tenant}: {e:#}"));
        (response, Instant::now())
    })
}

/// llm-sim's gauge `name` for the model.
async fn gauge(backend: SocketAddr, name: &str) -> f64 {
    let text = get(backend, "/metrics").await.unwrap().body;
    let prefix = format!("{name}{{model_name=\"{MODEL}\"}} ");
    text.lines()
        .find_map(|line| line.strip_prefix(&prefix))
        .and_then(|value| value.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {prefix} in\n{text}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_in_quota_request_is_served_ahead_of_a_deferred_backlog_at_a_saturated_server() {
    sluice_testkit::init_test_tracing();
    let mut consumer = ConsumerSpec {
        pacing: unpaced(),
        ..ConsumerSpec::new("priority-consumer")
    };
    consumer.config.backend.default.server_priority = Some(1);
    let stack = Stack::builder(limits())
        .sim(one_at_a_time_gpu())
        .consumer(consumer)
        .start()
        .await;
    let envoy = stack.envoy.listener;

    let backlog: Vec<_> = (0..BACKLOG).map(|_| chat(envoy, "heavy")).collect();
    // The server saturated with the backlog: every deferred request not
    // answered yet is at the server (none still on its way, to arrive
    // behind the in-quota one), one running and at least `MIN_WAITING`
    // waiting.
    let started = Instant::now();
    let waiting = loop {
        let running = gauge(stack.backend, "vllm:num_requests_running").await;
        let waiting = gauge(stack.backend, "vllm:num_requests_waiting").await;
        let answered = backlog.iter().filter(|h| h.is_finished()).count();
        let all_there = running + waiting + answered as f64 >= BACKLOG as f64;
        if all_there && running >= 1.0 && waiting >= MIN_WAITING as f64 {
            break waiting as usize;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the backlog never queued at the server: {running} running, {waiting} waiting, \
             {answered} answered\n{}",
            stack.envoy.envoy.log_text()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let (light, light_done) = chat(envoy, "light").await.unwrap();
    assert_eq!(light.status, 200, "{light:?}");

    let mut later = 0;
    for handle in backlog {
        let (response, done) = handle.await.unwrap();
        assert_eq!(response.status, 200, "{response:?}");
        later += usize::from(done > light_done);
    }
    // First in, first out would serve it after the `waiting` deferred
    // requests already queued there. With the deferred calls at priority 1
    // it comes right after the one running (which may have ended, and one
    // of the waiting begun, while it was on its way): every one of those
    // but one is answered after it.
    assert!(
        later + 1 >= waiting,
        "the in-quota request was answered before only {later} deferred requests, \
         {waiting} of them waiting at the server when it was sent"
    );
    // The backlog went through the consumer, the in-quota request did not.
    // The consumer counts an outcome after its answer's last entry, which
    // the client may read first (it did, beside a CPU hog: 7 of 8).
    let backlog_done = || completed(&stack) >= BACKLOG as f64;
    wait_for(backlog_done, "count of the backlog's calls").await;
    assert_eq!(completed(&stack), BACKLOG as f64);
}

/// Saturation-aware admission through real Envoy: while the controller
/// state says the model's server is saturated, sluice-rls answers an
/// in-quota request with `route: queue` and the filter sends it through
/// the deferral path (the consumer answers it); once the state says the
/// server has room, the next one goes straight to the server.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_in_quota_request_goes_through_the_fair_queue_while_the_server_is_saturated() {
    sluice_testkit::init_test_tracing();
    let stack = fast_stack(limits(), StackBuilder::route_in_quota_when_saturated).await;
    let envoy = stack.envoy.listener;
    let completed = || completed(&stack);

    stack.controller_says(MODEL, true).await;
    stack.rls_routes(MODEL, Route::Queue).await;
    let (queued, _) = chat(envoy, "light").await.unwrap();
    assert_eq!(queued.status, 200, "{queued:?}");
    let metrics = stack.rls.limiter.metrics();
    assert_eq!(metrics.in_quota_queued.get(), 1);
    // Answered by the consumer (it counts the outcome as it acks).
    let asked = Instant::now();
    while completed() < 1.0 {
        assert!(
            asked.elapsed() < Duration::from_secs(10),
            "no consumer call"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // The server has room again (read in the background within a refresh).
    stack.controller_says(MODEL, false).await;
    stack.rls_routes(MODEL, Route::Direct).await;
    let (direct, _) = chat(envoy, "light").await.unwrap();
    assert_eq!(direct.status, 200, "{direct:?}");
    assert_eq!(metrics.in_quota_queued.get(), 1, "straight to the server");
    assert_eq!(completed(), 1.0);
}

/// Routing by the bucket's recent over-quota answers, through real Envoy:
/// once a tenant's request was deferred over its quota, its next in-quota
/// request goes through the fair queue behind that backlog (the consumer
/// answers it); a tenant never over quota goes straight to the server.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_in_quota_request_of_a_tenant_over_quota_lately_goes_through_the_fair_queue() {
    sluice_testkit::init_test_tracing();
    // `mixed`: 1000 tokens an hour (a request asking for 5000 is over, a
    // small one in quota); `light`: plenty.
    let limits = limits::file(&[
        limits::tenant(Some("mixed"), 1000, 1000, OverLimit::Defer("normal")),
        limits::tenant(Some("light"), 1000, 1_000_000, OverLimit::Defer("normal")),
    ]);
    let stack = fast_stack(limits, |builder| {
        builder.route_in_quota_after_over_quota(600_000)
    })
    .await;
    let envoy = stack.envoy.listener;
    let completed = || completed(&stack);
    let metrics = stack.rls.limiter.metrics();

    // Never over: straight to the server.
    let direct = chat_of_size(envoy, "mixed", (40, 20)).await;
    assert_eq!(direct.status, 200, "{direct:?}");
    assert_eq!(metrics.in_quota_queued.get(), 0);
    // Over quota: deferred (the consumer answers it).
    let deferred = chat_of_size(envoy, "mixed", (40, 5000)).await;
    assert_eq!(deferred.status, 200, "{deferred:?}");
    wait_for(|| completed() >= 1.0, "the deferred call").await;
    // In quota again: through the fair queue (charged, answered by the
    // consumer).
    let queued = chat_of_size(envoy, "mixed", (40, 20)).await;
    assert_eq!(queued.status, 200, "{queued:?}");
    assert_eq!(metrics.in_quota_queued.get(), 1);
    wait_for(|| completed() >= 2.0, "the routed in-quota call").await;
    // Another tenant, never over: straight to the server.
    let light = chat_of_size(envoy, "light", (40, 20)).await;
    assert_eq!(light.status, 200, "{light:?}");
    assert_eq!(metrics.in_quota_queued.get(), 1);
    assert_eq!(
        completed(),
        2.0,
        "the light request did not go through the consumer"
    );
}

/// A stack on a fast llm-sim (5-token answers) with an unpaced consumer,
/// sluice-rls routing in-quota requests as `routing` sets it.
async fn fast_stack(limits: String, routing: impl FnOnce(StackBuilder) -> StackBuilder) -> Stack {
    let mut sim = sluice_llm_sim::SimConfig::fast();
    sim.default_completion_tokens = 5;
    let builder = Stack::builder(limits).sim(sim).consumer(ConsumerSpec {
        pacing: unpaced(),
        ..ConsumerSpec::new("routing-consumer")
    });
    routing(builder).start().await
}

/// Calls the consumer completed.
fn completed(stack: &Stack) -> f64 {
    stack
        .consumer
        .counter("sluice_consumer_outcomes_total{outcome=\"completed\"}")
}

/// A chat of `tenant` through Envoy with `(words, max_tokens)`.
async fn chat_of_size(envoy: SocketAddr, tenant: &'static str, size: (usize, u64)) -> HttpResponse {
    tokio::task::spawn_blocking(move || {
        chat_of(envoy, tenant, MODEL, size).unwrap_or_else(|e| panic!("chat of {tenant}: {e:#}"))
    })
    .await
    .unwrap()
}

/// Polls `done` every 20 ms for up to 30 s.
async fn wait_for(done: impl Fn() -> bool, what: &str) {
    let asked = Instant::now();
    while !done() {
        assert!(asked.elapsed() < Duration::from_secs(30), "no {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
