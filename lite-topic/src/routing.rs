//! Which broker of the parent topic's route a LiteTopic lives on.
//!
//! Each broker keeps its own queue for a LiteTopic (`%LMQ%$<parent>$<lite>`),
//! its own subscriptions and its own suspend / in-flight block. A LiteTopic
//! whose messages were spread over two brokers would be delivered by both at
//! once (a suspend on one does not hold the other) and lose its order, so the
//! producer keeps each LiteTopic on one broker: its *owner*, computed the way
//! Apache RocketMQ's broker computes it (`LiteShardingImpl`, which the
//! broker uses to accept a LiteTopic subscription or not): Guava's
//! `Hashing.consistentHash(liteTopic.hashCode(), n)` over the parent topic's
//! write queues — here one per broker, in broker-name order, as
//! `ensure_parent_topic` creates them. So this client and an Apache broker
//! agree on the owner. When the owner does not store a message, the next
//! broker tried is the owner over the route without it — the owner the
//! name server's route gives once it drops a dead broker.

use std::time::{Duration, Instant};

use crate::client::BrokerTarget;

/// How long a parent topic's route is used before it is asked for again (it
/// is also asked for again after a failed send or pop).
pub(crate) const ROUTE_REFRESH: Duration = Duration::from_secs(10);

/// The brokers of `route` in the order a message of `lite_topic` tries them:
/// its owner among all, then its owner among the rest, and so on.
pub(crate) fn broker_preference<'a>(
    lite_topic: &str,
    route: &'a [BrokerTarget],
) -> Vec<&'a BrokerTarget> {
    let mut remaining: Vec<&BrokerTarget> = route.iter().collect();
    remaining.sort_by(|a, b| a.name.cmp(&b.name));
    let key = i64::from(java_string_hash(lite_topic));
    let mut order = Vec::with_capacity(remaining.len());
    while !remaining.is_empty() {
        let owner = jump_consistent_hash(key, remaining.len());
        order.push(remaining.remove(owner));
    }
    order
}

/// Java's `String.hashCode` (over UTF-16 code units; LiteTopic names are
/// ASCII anyway).
fn java_string_hash(text: &str) -> i32 {
    text.encode_utf16().fold(0i32, |hash, unit| {
        hash.wrapping_mul(31).wrapping_add(i32::from(unit))
    })
}

/// Guava's `Hashing.consistentHash(long, int)` (Lamping & Veach's jump
/// consistent hash with Guava's linear congruential generator), bit for bit:
/// Java's wrapping `long` / `int` arithmetic and its saturating double-to-int
/// cast, which Rust's `as` shares. `buckets` ≥ 1.
fn jump_consistent_hash(input: i64, buckets: usize) -> usize {
    let mut state = input;
    let mut candidate: i32 = 0;
    loop {
        state = state
            .wrapping_mul(2_862_933_555_777_941_757)
            .wrapping_add(1);
        let draw = ((state as u64 >> 33) as i32).wrapping_add(1);
        let next_double = f64::from(draw) / 2_147_483_648.0;
        let next = ((f64::from(candidate) + 1.0) / next_double) as i32;
        match usize::try_from(next) {
            Ok(bucket) if bucket < buckets => candidate = next,
            _ => return usize::try_from(candidate).unwrap_or(0),
        }
    }
}

/// A route as last read from the name server, and when.
#[derive(Debug, Clone)]
pub(crate) struct CachedRoute {
    pub(crate) brokers: Vec<BrokerTarget>,
    pub(crate) fetched_at: Instant,
}

impl CachedRoute {
    pub(crate) fn new(brokers: Vec<BrokerTarget>) -> Self {
        CachedRoute {
            brokers,
            fetched_at: Instant::now(),
        }
    }

    pub(crate) fn is_fresh(&self) -> bool {
        self.fetched_at.elapsed() < ROUTE_REFRESH
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn brokers(names: &[&str]) -> Vec<BrokerTarget> {
        names
            .iter()
            .enumerate()
            .map(|(i, name)| BrokerTarget {
                name: (*name).to_owned(),
                addr: format!("127.0.0.1:{}", 10911 + i),
            })
            .collect()
    }

    #[test]
    fn the_order_is_a_permutation_and_stable() {
        let route = brokers(&["broker-a", "broker-b", "broker-c"]);
        let order = broker_preference("acme_gpt-4o", &route);
        assert_eq!(order.len(), 3);
        let mut names: Vec<&str> = order.iter().map(|b| b.name.as_str()).collect();
        assert_eq!(
            names,
            broker_preference("acme_gpt-4o", &route)
                .iter()
                .map(|b| b.name.as_str())
                .collect::<Vec<_>>()
        );
        names.sort();
        assert_eq!(names, ["broker-a", "broker-b", "broker-c"]);
        // The route's own order does not matter.
        let mut reversed = route.clone();
        reversed.reverse();
        assert_eq!(
            broker_preference("acme_gpt-4o", &route)[0].name,
            broker_preference("acme_gpt-4o", &reversed)[0].name
        );
    }

    #[test]
    fn lite_topics_spread_over_the_brokers() {
        let route = brokers(&["broker-a", "broker-b"]);
        let mut per_broker: HashMap<&str, usize> = HashMap::new();
        for i in 0..1_000 {
            let first = broker_preference(&format!("tenant-{i}_model"), &route)[0];
            *per_broker.entry(first.name.as_str()).or_default() += 1;
        }
        for (broker, count) in &per_broker {
            assert!((400..=600).contains(count), "{broker}: {count} of 1000");
        }
    }

    #[test]
    fn losing_the_last_broker_moves_only_its_lite_topics() {
        let three = brokers(&["broker-a", "broker-b", "broker-c"]);
        let two: Vec<BrokerTarget> = three[..2].to_vec();
        for i in 0..500 {
            let topic = format!("t{i}_m");
            let before = broker_preference(&topic, &three)[0].name.clone();
            let after = broker_preference(&topic, &two)[0].name.clone();
            if before != "broker-c" {
                assert_eq!(before, after, "{topic} moved without reason");
            }
        }
    }

    #[test]
    fn failover_goes_to_the_owner_without_the_failed_broker() {
        let three = brokers(&["broker-a", "broker-b", "broker-c"]);
        for i in 0..200 {
            let topic = format!("t{i}_m");
            let order = broker_preference(&topic, &three);
            let rest: Vec<BrokerTarget> = three
                .iter()
                .filter(|b| b.name != order[0].name)
                .cloned()
                .collect();
            assert_eq!(order[1].name, broker_preference(&topic, &rest)[0].name);
        }
    }

    /// Values printed by the same algorithms in Java (`String.hashCode`,
    /// Guava's `Hashing.consistentHash`, its code copied into a class and
    /// run with OpenJDK); the first row is Guava's own golden test.
    #[test]
    fn matches_java_and_guava() {
        let golden: Vec<usize> = (0..10).map(|i| jump_consistent_hash(i, 100)).collect();
        assert_eq!(golden, [0, 55, 62, 8, 45, 59, 86, 97, 82, 59]);
        assert_eq!(jump_consistent_hash(i64::MIN, 11_000), 453);
        assert_eq!(jump_consistent_hash(-1, 11_000), 5934);
        for (name, hash, of2, of3, of7) in [
            ("acme_gpt-4o", 1_469_794_754, 0, 0, 4),
            ("tenant-0_model", 667_876_407, 1, 1, 5),
            ("late-3_model", 1_319_345_142, 1, 1, 3),
            ("a", 97, 0, 0, 0),
            (&"z".repeat(63), 605_228_986, 1, 2, 6),
        ] {
            assert_eq!(java_string_hash(name), hash, "{name}");
            let key = i64::from(hash);
            assert_eq!(
                [2, 3, 7].map(|n| jump_consistent_hash(key, n)),
                [of2, of3, of7],
                "{name}"
            );
        }
    }

    #[test]
    fn an_empty_route_gives_no_broker() {
        assert!(broker_preference("x", &[]).is_empty());
    }
}
