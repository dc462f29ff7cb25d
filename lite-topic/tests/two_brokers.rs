//! The client over two real brokers registered with one name server
//! (sluice-testkit's `RocketMqCluster`): LiteTopics land on both and are
//! consumed from both; with the second broker killed (SIGKILL), new sends
//! go to the first, and every message a broker acknowledged — before or
//! after the kill — is consumed once the killed broker is back.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sluice_litetopic::{LiteAdmin, LiteClient, LiteConfig, LiteConsumer, LiteProducer};
use sluice_testkit::rocketmq_cluster::RocketMqCluster;

const PARENT: &str = "sluice-two-brokers";
const GROUP: &str = "sluice-two-brokers-group";
/// User property naming each sent message uniquely.
const SEQ: &str = "seq";

/// What the consumer loop saw: seq → (LiteTopic, broker), and how many
/// times each seq came.
#[derive(Default)]
struct Seen {
    first: BTreeMap<String, (String, String)>,
    deliveries: HashMap<String, usize>,
}

impl Seen {
    fn has_all<'a>(&self, seqs: impl IntoIterator<Item = &'a String>) -> bool {
        seqs.into_iter().all(|s| self.first.contains_key(s))
    }
}

/// Pops until `stop`, releasing each message, recording it in `seen`.
async fn consume(consumer: Arc<LiteConsumer>, seen: Arc<Mutex<Seen>>, stop: Arc<AtomicBool>) {
    while !stop.load(Ordering::Relaxed) {
        let batch = match consumer
            .pop(8, common::INVISIBLE, Duration::from_millis(500))
            .await
        {
            Ok(batch) => batch,
            Err(error) => {
                tracing::info!(%error, "pop failed (a broker is down?)");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        for message in batch {
            record(&seen, &message);
            if let Err(error) = consumer.release(&message.handle).await {
                tracing::info!(%error, "release failed");
            }
        }
    }
    for message in consumer.finish_pops().await {
        record(&seen, &message);
    }
}

fn record(seen: &Mutex<Seen>, message: &sluice_litetopic::LiteMessage) {
    let Some(seq) = message.properties.get(SEQ).cloned() else {
        return;
    };
    let mut seen = seen.lock().unwrap_or_else(|p| p.into_inner());
    *seen.deliveries.entry(seq.clone()).or_default() += 1;
    seen.first.entry(seq).or_insert_with(|| {
        (
            message.lite_topic.clone(),
            message.handle.broker_name().to_owned(),
        )
    });
}

/// Send `per_topic` messages to each topic; returns the seqs the brokers
/// acknowledged, and how long the slowest send took.
async fn send_all(
    producer: &LiteProducer,
    topics: &[String],
    per_topic: usize,
    tag: &str,
) -> (Vec<String>, Duration) {
    let mut acked = Vec::new();
    let mut slowest = Duration::ZERO;
    for round in 0..per_topic {
        for topic in topics {
            let seq = format!("{tag}-{topic}-{round}");
            let started = Instant::now();
            producer
                .send(PARENT, topic, seq.as_bytes(), &[(SEQ, &seq)])
                .await
                .unwrap_or_else(|e| panic!("send {seq}: {e}"));
            slowest = slowest.max(started.elapsed());
            acked.push(seq);
        }
    }
    (acked, slowest)
}

async fn wait_for(seen: &Mutex<Seen>, seqs: &[String], timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if seen.lock().unwrap_or_else(|p| p.into_inner()).has_all(seqs) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    false
}

fn missing(seen: &Mutex<Seen>, seqs: &[String]) -> Vec<String> {
    let seen = seen.lock().unwrap_or_else(|p| p.into_inner());
    seqs.iter()
        .filter(|s| !seen.first.contains_key(*s))
        .cloned()
        .collect()
}

fn brokers_of(seen: &Mutex<Seen>, seqs: &[String]) -> BTreeMap<String, usize> {
    let seen = seen.lock().unwrap_or_else(|p| p.into_inner());
    let mut per_broker = BTreeMap::new();
    for seq in seqs {
        if let Some((_, broker)) = seen.first.get(seq) {
            *per_broker.entry(broker.clone()).or_default() += 1;
        }
    }
    per_broker
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn lite_topics_spread_over_two_brokers_and_survive_losing_one() {
    common::init_tracing();
    let mut cluster =
        RocketMqCluster::start().expect("start two RocketMQ brokers (run ./scripts/setup)");
    let [first, second] = cluster.broker_names();
    let client = LiteClient::connect(LiteConfig::new(cluster.namesrv_addr())).expect("client");
    let admin = LiteAdmin::new(&client).await.expect("admin");
    admin.ensure_parent_topic(PARENT).await.expect("parent");
    admin
        .ensure_consumer_group(GROUP, PARENT)
        .await
        .expect("group");
    let producer = LiteProducer::new(&client, "sluice-two-brokers-producer")
        .await
        .expect("producer");
    let consumer = Arc::new(
        LiteConsumer::new(&client, GROUP, PARENT)
            .await
            .expect("consumer"),
    );
    assert_eq!(
        consumer.brokers(),
        vec![first.to_owned(), second.to_owned()],
        "the parent topic is routed to both brokers"
    );

    let topics: Vec<String> = (0..16).map(|i| format!("tenant-{i}_model")).collect();
    let late: Vec<String> = (0..16).map(|i| format!("late-{i}_model")).collect();
    let refs: Vec<&str> = topics.iter().map(String::as_str).collect();
    consumer.subscribe(&refs).await.expect("subscribe");
    let seen = Arc::new(Mutex::new(Seen::default()));
    let stop = Arc::new(AtomicBool::new(false));
    let loop_task = tokio::spawn(consume(
        Arc::clone(&consumer),
        Arc::clone(&seen),
        Arc::clone(&stop),
    ));

    // 1. Both brokers take LiteTopics, and both are consumed.
    let (before, _) = send_all(&producer, &topics, 2, "before").await;
    assert!(
        wait_for(&seen, &before, Duration::from_secs(30)).await,
        "not consumed: {:?}",
        missing(&seen, &before)
    );
    let per_broker = brokers_of(&seen, &before);
    println!("before the kill, consumed per broker: {per_broker:?}");
    assert!(
        per_broker.get(first).is_some_and(|n| *n > 0)
            && per_broker.get(second).is_some_and(|n| *n > 0),
        "LiteTopics on both brokers are consumed: {per_broker:?}"
    );
    {
        let seen = seen.lock().unwrap_or_else(|p| p.into_inner());
        let mut broker_of_topic: HashMap<&str, BTreeSet<&str>> = HashMap::new();
        for (topic, broker) in seen.first.values() {
            broker_of_topic.entry(topic).or_default().insert(broker);
        }
        for (topic, brokers) in &broker_of_topic {
            assert_eq!(brokers.len(), 1, "{topic} stays on one broker: {brokers:?}");
        }
    }

    // 2. Messages acknowledged and not consumed yet (nobody subscribes to
    // the late LiteTopics yet), some of them on the second broker; then
    // SIGKILL it.
    let (waiting, _) = send_all(&producer, &late, 2, "waiting").await;
    cluster.kill_second();
    let killed_at = Instant::now();

    // 3. New sends all succeed, on the first broker.
    let (after, slowest_send) = send_all(&producer, &topics, 2, "after").await;
    println!(
        "sends after the kill: {} acknowledged, slowest {slowest_send:?}, all done {:?} after the kill",
        after.len(),
        killed_at.elapsed()
    );
    assert!(
        wait_for(&seen, &after, Duration::from_secs(30)).await,
        "not consumed: {:?}",
        missing(&seen, &after)
    );
    let per_broker = brokers_of(&seen, &after);
    assert_eq!(
        per_broker.keys().collect::<Vec<_>>(),
        vec![first],
        "with {second} down every new message goes to {first}: {per_broker:?}"
    );

    // 4. The late LiteTopics are subscribed while the second broker is down:
    // what the first holds comes at once, what the second holds once it is
    // back (the consumer re-subscribes it by itself).
    let late_refs: Vec<&str> = late.iter().map(String::as_str).collect();
    consumer
        .subscribe(&late_refs)
        .await
        .expect("subscribe with one broker down");
    tokio::time::sleep(Duration::from_secs(2)).await;
    let before_restart = brokers_of(&seen, &waiting);
    println!("acknowledged before the kill, consumed while it was down: {before_restart:?}");
    assert!(
        !before_restart.contains_key(second),
        "nothing can come from a dead broker"
    );
    cluster.restart_second().unwrap_or_else(|e| {
        panic!(
            "restart the second broker: {e:#}\n{}",
            cluster.second_log_tail()
        )
    });
    let restarted_at = Instant::now();
    let all_back = wait_for(&seen, &waiting, Duration::from_secs(60)).await;
    println!(
        "after the restart: every waiting message consumed: {all_back} ({:?}); per broker {:?}",
        restarted_at.elapsed(),
        brokers_of(&seen, &waiting)
    );

    stop.store(true, Ordering::Relaxed);
    loop_task.await.expect("consumer loop");
    let lost = missing(&seen, &waiting);
    assert!(
        all_back && lost.is_empty(),
        "acknowledged before the kill and never consumed: {lost:?}\n\
         consumer: brokers {:?}, {:?}\nsecond broker log:\n{}",
        consumer.brokers(),
        consumer.stats(),
        cluster.second_log_tail()
    );
    let all: Vec<String> = before
        .iter()
        .chain(&waiting)
        .chain(&after)
        .cloned()
        .collect();
    assert!(missing(&seen, &all).is_empty());
    // At-most-once holds per broker life only: the restarted broker had not
    // persisted the positions its pops committed shortly before the kill, so
    // it delivers those messages again. Nothing else comes twice.
    let duplicates: Vec<String> = {
        let seen = seen.lock().unwrap_or_else(|p| p.into_inner());
        seen.deliveries
            .iter()
            .filter(|(_, n)| **n > 1)
            .map(|(seq, _)| seq.clone())
            .collect()
    };
    println!(
        "acknowledged {} messages, consumed all of them; {} delivered twice",
        all.len(),
        duplicates.len()
    );
    let redelivered_ok = |seq: &String| {
        before.contains(seq) && brokers_of(&seen, std::slice::from_ref(seq)).contains_key(second)
    };
    assert!(
        duplicates.iter().all(redelivered_ok),
        "only messages the killed broker delivered before the kill may come again: {duplicates:?}"
    );

    match Arc::try_unwrap(consumer) {
        Ok(consumer) => consumer.shutdown().await,
        Err(_) => panic!("consumer still shared"),
    }
    producer.shutdown().await;
    admin.shutdown().await;
    client.shutdown().await;
}
