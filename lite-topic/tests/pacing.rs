//! Suspend: pacing one LiteTopic while the others keep flowing, against a
//! real broker. Timings are asserted as lower bounds and ratios only; the
//! figures are printed (`cargo test -- --nocapture`). The tests of this file
//! run one at a time so they do not skew each other's timings.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::time::{Duration, Instant};

use common::*;

static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_suspended_lite_topic_does_not_hold_up_the_others() {
    let _serial = SERIAL.lock().await;
    let (env, producer, consumer) = Env::start_subscribed(&["a", "b"]).await;
    let producer = std::sync::Arc::new(producer);
    // A: a backlog, paced by a 2 s suspend after each message.
    // B: a steady stream, one message every 20 ms for ~1.2 s.
    // The suspend is long against a loaded machine's scheduling delays
    // (B's send-to-pop median reached ~200 ms beside a CPU hog): a B held
    // behind A's suspends would wait about half of one, 1 s at the median.
    const A: usize = 4;
    const B: usize = 60;
    let suspend = Duration::from_secs(2);
    let poll = Duration::from_secs(4);
    for _ in 0..A {
        producer.send(&env.parent, "a", b"a", &[]).await.unwrap();
    }
    let stream = {
        let producer = producer.clone();
        let parent = env.parent.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_millis(20));
            for _ in 0..B {
                tick.tick().await;
                producer.send(&parent, "b", b"b", &[]).await.unwrap();
            }
        })
    };

    let start = Instant::now();
    let mut a_times = Vec::new();
    let mut b_times = Vec::new();
    let mut b_latency_ms = Vec::new();
    while (a_times.len() < A || b_times.len() < B) && start.elapsed() < Duration::from_secs(40) {
        // One message per pop, as a pacing consumer takes them; a poll
        // longer than the suspend, so an A that came only when a poll ends
        // would show.
        for msg in consumer.pop(1, INVISIBLE, poll).await.unwrap() {
            let at = start.elapsed();
            if msg.lite_topic == "a" {
                a_times.push(at);
                consumer.suspend(&msg.handle, suspend).await.unwrap();
            } else {
                b_times.push(at);
                b_latency_ms.push(now_ms() - msg.born_timestamp_ms);
                consumer.release(&msg.handle).await.unwrap();
            }
        }
    }
    stream.await.unwrap();
    assert_eq!(a_times.len(), A);
    assert_eq!(b_times.len(), B);
    // Rates over the window B was flowing.
    let (b_first, b_last) = (b_times[0], b_times[B - 1]);
    let window = (b_last - b_first).as_secs_f64();
    let a_in_window = a_times
        .iter()
        .filter(|t| **t >= b_first && **t <= b_last)
        .count()
        .max(1);
    let b_rate = B as f64 / window;
    let a_rate = a_in_window as f64 / window;
    b_latency_ms.sort();
    let b_median = b_latency_ms[B / 2];
    let gaps = gaps(&a_times);
    eprintln!(
        "B: {B} in {window:.2} s ({b_rate:.1}/s, send->pop median {b_median} ms, max {} ms); \
         A meanwhile: {a_in_window} ({a_rate:.1}/s); A gaps (2 s suspend): {gaps:?}; {:?}",
        b_latency_ms[B - 1],
        consumer.stats()
    );
    // B is not held up by A's suspends: several times A's rate, and its
    // messages do not wait for A's suspends to end.
    assert!(b_rate >= 4.0 * a_rate, "B {b_rate:.1}/s vs A {a_rate:.1}/s");
    let held_bound = i64::try_from(suspend.as_millis() / 4).unwrap();
    assert!(
        b_median < held_bound,
        "B median latency {b_median} ms (held behind A: ~1,000)"
    );
    // A is paced: never faster than its suspend (lower bound only).
    for gap in &gaps {
        assert!(*gap >= suspend - Duration::from_millis(15), "A gap {gap:?}");
    }
    // And A is not left to the 4 s long poll: a suspend's end cuts the poll
    // short (a gap of ~2 s, against up to 6 s when the poll runs out).
    let mean = gaps.iter().sum::<Duration>() / gaps.len() as u32;
    assert!(
        mean < suspend + Duration::from_secs(1),
        "mean A gap {mean:?}"
    );
    env.shutdown_with(consumer, producer).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn suspend_spacing_is_honoured() {
    let _serial = SERIAL.lock().await;
    let (env, producer, consumer) = Env::start_subscribed(&["paced"]).await;
    for suspend_ms in [30u64, 100, 250] {
        let suspend = Duration::from_millis(suspend_ms);
        for _ in 0..5 {
            producer
                .send(&env.parent, "paced", b"x", &[])
                .await
                .unwrap();
        }
        let mut times = Vec::new();
        let start = Instant::now();
        while times.len() < 5 && start.elapsed() < Duration::from_secs(15) {
            for msg in consumer
                .pop(1, INVISIBLE, Duration::from_secs(2))
                .await
                .unwrap()
            {
                times.push(Instant::now());
                consumer.suspend(&msg.handle, suspend).await.unwrap();
            }
        }
        assert_eq!(times.len(), 5);
        let gaps: Vec<Duration> = times.windows(2).map(|w| w[1] - w[0]).collect();
        let mean = gaps.iter().sum::<Duration>() / gaps.len() as u32;
        eprintln!("suspend {suspend_ms} ms -> gaps {gaps:?}, mean {mean:?}");
        for gap in &gaps {
            assert!(
                *gap >= suspend.saturating_sub(Duration::from_millis(5)),
                "suspend {suspend:?}, gap {gap:?}"
            );
        }
        // Wait out the last suspend before the next round.
        tokio::time::sleep(suspend).await;
    }
    eprintln!("{:?}", consumer.stats());
    env.shutdown_with(consumer, producer).await;
}

fn gaps(times: &[Duration]) -> Vec<Duration> {
    times.windows(2).map(|w| w[1] - w[0]).collect()
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}
