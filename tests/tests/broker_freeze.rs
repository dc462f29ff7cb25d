//! The broker cannot hang the queue (issue 29). rocketmq-rust 1.0.0's store
//! can deadlock: the broker process lives on with its ports open and never
//! answers again. Here the broker is frozen (SIGSTOP, which looks the same
//! from outside) under a small, bounded load of deferred requests through
//! the whole path (Envoy, filter, sluice-rls's endpoint, the consumer, the
//! model); the test acts as Kubernetes does with the chart's liveness probe:
//! the round-trip probe (`sluice_litetopic::probe`, what `sluice-rls
//! broker-probe` runs) every second, and after two failures in a row a
//! restart of the broker (SIGKILL, started again on its ports and store).
//!
//! Required: the probe passes on a live broker and fails on the frozen one
//! within its deadline; meanwhile new deferrals get 503 `queue_unavailable`
//! with `Retry-After`; after the restart deferrals are answered again; and
//! every request the endpoint accepted is answered — none is lost. Timing
//! is printed (`--nocapture`), asserted only as generous upper bounds.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests fail loudly
#![recursion_limit = "256"] // rocketmq-client futures are deeply nested

use sluice_litetopic::probe::probe;
use sluice_testkit::broker_liveness::{self, LivenessPolicy};
use sluice_testkit::stack::{limits, patient_chat, sse_data, Stack};
use sluice_testkit::{retry_until, signal, HttpResponse};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Most requests one load client sends.
const REQUESTS_PER_CLIENT: usize = 40;
const CLIENTS: usize = 2;
/// The probe's deadline, and Kubernetes' `failureThreshold`.
const PROBE_DEADLINE: Duration = Duration::from_secs(4);
const FAILURES_BEFORE_RESTART: u32 = 2;

/// What one load request got, and when it started.
struct Sent {
    started: Instant,
    response: anyhow::Result<HttpResponse>,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_frozen_broker_is_detected_and_restarted_and_no_accepted_request_is_lost() {
    sluice_testkit::init_test_tracing();
    let mut sim = sluice_llm_sim::SimConfig::fast();
    sim.default_completion_tokens = 5;
    let mut stack = Stack::builder(limits::patient_defers())
        .sim(sim)
        .start()
        .await;
    let namesrv = stack.broker.namesrv_addr();
    let mut policy = LivenessPolicy::chart();
    policy.period = Duration::from_secs(1);
    policy.failure_threshold = FAILURES_BEFORE_RESTART;
    policy.probe.deadline = PROBE_DEADLINE;
    let options = policy.probe.clone();
    let live = probe(&namesrv, &options)
        .await
        .expect("the probe passes on a live broker");
    println!("live broker: round trip {:?}", live.round_trip);

    // Bounded load: two clients, one streamed deferred request after
    // another, until told to stop or at most 40 each.
    let envoy = stack.envoy.listener;
    let stop = Arc::new(AtomicBool::new(false));
    let clients: Vec<_> = (0..CLIENTS)
        .map(|_| {
            let stop = stop.clone();
            tokio::task::spawn_blocking(move || {
                let mut sent = Vec::new();
                while !stop.load(Ordering::Relaxed) && sent.len() < REQUESTS_PER_CLIENT {
                    let started = Instant::now();
                    let response = patient_chat(envoy, true);
                    let refused = matches!(&response, Ok(r) if r.status == 503);
                    sent.push(Sent { started, response });
                    if refused {
                        // A client honouring Retry-After, shortened.
                        std::thread::sleep(Duration::from_millis(500));
                    }
                }
                sent
            })
        })
        .collect();

    // Some deferrals answered before the freeze.
    let accepted = |stack: &Stack| stack.endpoint_metrics.accepted.get();
    let began = Instant::now();
    while accepted(&stack) < 4 {
        assert!(
            began.elapsed() < Duration::from_secs(60),
            "no deferral accepted"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    let pid = stack.broker.broker_pid().unwrap();
    signal(pid, "STOP");
    let frozen_at = Instant::now();
    let accepted_at_freeze = accepted(&stack);

    // Kubernetes: probe every second; two failures in a row restart it.
    let detection =
        broker_liveness::until_restart_due(&namesrv, &policy, frozen_at, Duration::from_secs(60))
            .await
            .expect("the probe fails on the frozen broker");
    let (first_failure, longest_failed_probe) =
        (detection.first_failure, detection.longest_failed_probe);
    let detected_after = detection.decided;
    // SIGKILL works on a stopped process; the broker starts again on its
    // ports and store.
    tokio::task::block_in_place(|| stack.broker.restart_broker()).expect("the broker restarts");
    let restarted_after = frozen_at.elapsed();

    // Live again: the probe passes, and new deferrals are accepted.
    let (probe_back, _) = retry_until(
        Duration::from_secs(90),
        Duration::from_millis(500),
        async || probe(&namesrv, &options).await,
    )
    .await;
    let probe_back_after = frozen_at.elapsed();
    let accepted_after_restart = accepted(&stack);
    let began = Instant::now();
    while accepted(&stack) < accepted_after_restart + 3 {
        assert!(
            began.elapsed() < Duration::from_secs(90),
            "no deferral accepted after the restart"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let deferrals_back_after = frozen_at.elapsed();
    stop.store(true, Ordering::Relaxed);
    let mut sent = Vec::new();
    for client in clients {
        sent.extend(client.await.unwrap());
    }

    // Every request: answered, or refused before it was queued (503
    // queue_unavailable, Retry-After). Nothing else, nothing lost.
    let (mut answered, mut refused, mut answered_after_restart) = (0, 0, 0);
    let restart = frozen_at + restarted_after;
    for Sent { started, response } in &sent {
        let response = response.as_ref().expect("every client gets an answer");
        match response.status {
            200 => {
                let data = sse_data(&response.body);
                assert_eq!(data.last(), Some(&"[DONE]"), "{response:?}");
                answered += 1;
                if *started > restart {
                    answered_after_restart += 1;
                }
            }
            503 => {
                assert!(response.body.contains("queue_unavailable"), "{response:?}");
                assert!(response.header("retry-after").is_some(), "{response:?}");
                refused += 1;
            }
            other => panic!("a request got {other}: {response:?}"),
        }
    }
    // The endpoint counts a request accepted once it is published: each
    // of those got its answer (requests still in the clients' hands when
    // the load stopped are among `sent` too).
    let accepted_total = accepted(&stack);
    assert_eq!(
        answered, accepted_total,
        "accepted {accepted_total}, answered {answered}: an accepted request was lost"
    );
    assert!(
        answered_after_restart > 0,
        "nothing answered after the restart"
    );
    assert!(
        longest_failed_probe < PROBE_DEADLINE + Duration::from_secs(5),
        "a failing probe took {longest_failed_probe:?}, deadline {PROBE_DEADLINE:?}"
    );
    println!(
        "requests {} (accepted before the freeze {accepted_at_freeze}), answered {answered} \
         ({answered_after_restart} sent after the restart), refused 503 {refused}",
        sent.len()
    );
    println!(
        "after the freeze: first probe failure {first_failure:?} (longest failing probe \
         {longest_failed_probe:?}, deadline {PROBE_DEADLINE:?}), restart decided {detected_after:?}, \
         broker restarted {restarted_after:?}, probe passes {probe_back_after:?} (round trip \
         {:?}), 3 more deferrals accepted {deferrals_back_after:?}",
        probe_back.round_trip
    );
}
