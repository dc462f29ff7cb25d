//! The liveness probe against a real broker: it passes on a live broker,
//! fails within its deadline on a frozen one (SIGSTOP: the process and its
//! ports stay, nothing is answered — what the store's deadlock looks like),
//! and passes again once the broker runs, dropping the probe message a
//! failed probe left behind. Timing is printed, bounded only loosely.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests fail loudly

use sluice_litetopic::probe::{probe, ProbeError, ProbeOptions};
use sluice_testkit::{retry_until, signal, RocketMq};
use std::time::{Duration, Instant};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_probe_tells_a_frozen_broker_from_a_live_one() {
    sluice_testkit::init_test_tracing();
    let mq = tokio::task::spawn_blocking(RocketMq::start)
        .await
        .unwrap()
        .expect("start the RocketMQ broker (run ./scripts/setup)");
    let namesrv = mq.namesrv_addr();
    let options = ProbeOptions {
        deadline: Duration::from_secs(3),
        ..ProbeOptions::default()
    };
    let live = probe(&namesrv, &options).await.expect("live broker");
    let again = probe(&namesrv, &options).await.expect("live broker, again");
    println!("live: {live:?}, then {again:?}");
    assert_eq!(again.stale, 0);

    let pid = mq.broker_pid().unwrap();
    signal(pid, "STOP");
    let started = Instant::now();
    let frozen = probe(&namesrv, &options).await;
    let took = started.elapsed();
    signal(pid, "CONT");
    println!("frozen: {frozen:?} after {took:?}");
    assert!(
        matches!(
            frozen,
            Err(ProbeError::Deadline(_)) | Err(ProbeError::Lite(_))
        ),
        "{frozen:?}"
    );
    // The deadline, plus the bounded client shutdown, plus a loaded machine.
    assert!(took < Duration::from_secs(3 + 2 + 5), "{took:?}");

    // Running again: the probe passes (it may meet what the frozen probe
    // sent, once the broker reads it, and drops it).
    let (back, after) = retry_until(
        Duration::from_secs(60),
        Duration::from_millis(500),
        async || probe(&namesrv, &options).await,
    )
    .await;
    println!("live again after {after:?}: {back:?}");
}
