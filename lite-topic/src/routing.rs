//! Which broker of the parent topic's route a LiteTopic lives on.
//!
//! Each broker keeps its own queue for a LiteTopic (`%LMQ%$<parent>$<lite>`),
//! its own subscriptions and its own suspend / in-flight block. A LiteTopic
//! whose messages were spread over two brokers would be delivered by both at
//! once (a suspend on one does not hold the other) and lose its order, so the
//! producer keeps each LiteTopic on one broker: the first of
//! [`broker_preference`], a rendezvous (highest-random-weight) order over the
//! route's brokers. Every producer computes the same order from the same
//! route, and a broker joining or leaving moves only the LiteTopics it wins
//! or held. When the preferred broker does not store a message, the next one
//! in the order does (failover).

use std::cmp::Reverse;
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

use crate::client::BrokerTarget;

/// How long a parent topic's route is used before it is asked for again (it
/// is also asked for again after a failed send or pop).
pub(crate) const ROUTE_REFRESH: Duration = Duration::from_secs(10);

/// The brokers of `route` in the order a message of `lite_topic` tries them:
/// highest `SHA-256(broker name, lite topic)` first. Stable across processes
/// and builds (the name is the broker's registered name, not its address).
pub(crate) fn broker_preference<'a>(
    lite_topic: &str,
    route: &'a [BrokerTarget],
) -> Vec<&'a BrokerTarget> {
    let mut ranked: Vec<(u64, &BrokerTarget)> = route
        .iter()
        .map(|broker| (rendezvous_weight(&broker.name, lite_topic), broker))
        .collect();
    ranked.sort_by_key(|(weight, broker)| (Reverse(*weight), broker.name.as_str()));
    ranked.into_iter().map(|(_, broker)| broker).collect()
}

fn rendezvous_weight(broker: &str, lite_topic: &str) -> u64 {
    let mut hasher = Sha256::new();
    // Length-prefixed, so ("ab", "c") and ("a", "bc") differ.
    hasher.update((broker.len() as u64).to_be_bytes());
    hasher.update(broker.as_bytes());
    hasher.update(lite_topic.as_bytes());
    let digest = hasher.finalize();
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    u64::from_be_bytes(first)
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
    fn losing_a_broker_moves_only_its_lite_topics() {
        let three = brokers(&["broker-a", "broker-b", "broker-c"]);
        let two: Vec<BrokerTarget> = three
            .iter()
            .filter(|b| b.name != "broker-c")
            .cloned()
            .collect();
        for i in 0..500 {
            let topic = format!("t{i}_m");
            let before = broker_preference(&topic, &three)[0].name.clone();
            let after = broker_preference(&topic, &two)[0].name.clone();
            if before != "broker-c" {
                assert_eq!(before, after, "{topic} moved without reason");
            }
            // Failover order: the second choice with three brokers is the
            // first with two when the first was the lost one.
            if before == "broker-c" {
                assert_eq!(broker_preference(&topic, &three)[1].name, after);
            }
        }
    }

    #[test]
    fn an_empty_route_gives_no_broker() {
        assert!(broker_preference("x", &[]).is_empty());
    }
}
