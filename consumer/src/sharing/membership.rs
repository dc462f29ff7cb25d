//! Consumer group membership and the split of buckets among live instances.
//!
//! Every instance heartbeats into one Redis sorted set (member → last beat,
//! ms); members whose beat is older than the TTL are dropped by whoever
//! looks next. Each bucket (LiteTopic) belongs to the live member with the
//! highest rendezvous score `H(member, topic)`: every instance computes the
//! same owner from the same member list without talking to the others, a
//! departing member's buckets spread over the remaining ones, and a joining
//! member takes about `1/n` of the buckets from each — nothing else moves.
//!
//! While two instances briefly disagree (one saw a member change, the other
//! not yet), a bucket may be subscribed by both or by neither for one
//! discovery round. Neither loses or doubles work: the group's LiteTopic
//! position is shared (a message goes to one pop), pacing state is shared in
//! Redis, and messages wait in the broker until some member subscribes.

use crate::keys;
use std::collections::{HashMap, HashSet};
use std::time::Duration;

/// Default [`crate::RunnerOptions::membership_ttl`]: six missed beats at the
/// default discovery interval, so a dead member's buckets move within the
/// same few seconds as its requests (issue 17: recovery within 5 s).
pub const DEFAULT_MEMBERSHIP_TTL: Duration = Duration::from_secs(3);

/// Rendezvous score of `member` for `topic`: the first 8 bytes of
/// SHA-1(member NUL topic). Stable across builds and platforms (unlike
/// `std`'s hasher), so instances of different versions agree.
pub(crate) fn score(member: &str, topic: &str) -> u64 {
    let mut sha = sha1_smol::Sha1::new();
    sha.update(member.as_bytes());
    sha.update(&[0]);
    sha.update(topic.as_bytes());
    let digest = sha.digest().bytes();
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    u64::from_be_bytes(first)
}

/// The member that owns `topic` (highest score; ties by name), if any.
pub(crate) fn owner<'a>(topic: &str, members: &'a [String]) -> Option<&'a str> {
    members
        .iter()
        .map(|m| (score(m, topic), m.as_str()))
        .max()
        .map(|(_, m)| m)
}

/// Remembers each topic's owner for one member list, so a discovery round
/// hashes only the topics it has not seen (10k buckets × a few members is
/// otherwise ~30k SHA-1 per round).
#[derive(Default)]
pub(crate) struct Assignment {
    members: Vec<String>,
    owners: HashMap<String, String>,
}

impl Assignment {
    /// The topics of `topics` that `me` owns, given the live `members`
    /// (`me` counts as live whatever the list says: this instance is alive).
    pub(crate) fn share(
        &mut self,
        me: &str,
        members: &[String],
        topics: &[String],
    ) -> HashSet<String> {
        let mut live: Vec<String> = members.to_vec();
        if !live.iter().any(|m| m == me) {
            live.push(me.to_string());
        }
        live.sort();
        live.dedup();
        if live != self.members {
            self.members = live;
            self.owners.clear();
        }
        let present: HashSet<&str> = topics.iter().map(String::as_str).collect();
        self.owners.retain(|t, _| present.contains(t.as_str()));
        let mut mine = HashSet::new();
        for topic in topics {
            let owner = match self.owners.get(topic) {
                Some(owner) => owner.as_str(),
                None => {
                    let owner = owner(topic, &self.members).unwrap_or(me).to_string();
                    self.owners.entry(topic.clone()).or_insert(owner).as_str()
                }
            };
            if owner == me {
                mine.insert(topic.clone());
            }
        }
        mine
    }

    /// The member list of the last [`Assignment::share`].
    pub(crate) fn members(&self) -> &[String] {
        &self.members
    }
}

/// What one heartbeat found.
pub(crate) struct Beat {
    /// The live members.
    pub(crate) members: Vec<String>,
    /// This instance's entry was missing and was written again.
    pub(crate) rejoined: bool,
}

/// One instance's heartbeat in the group's member set.
pub(crate) struct Membership {
    id: String,
    ttl: Duration,
    redis: sluice_redis::RedisConn,
}

/// Members that beat at or after this instant (ms) are live.
fn live_since(now_ms: u64, ttl: Duration) -> u64 {
    now_ms.saturating_sub(u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX))
}

/// The live members, sorted, without beating (for readers that are not the
/// group's pop loop, e.g. the controllers sharing a limit).
pub(crate) async fn live_members(
    redis: &mut sluice_redis::RedisConn,
    ttl: Duration,
) -> Result<Vec<String>, redis::RedisError> {
    let cutoff = live_since(crate::now_ms(), ttl);
    let mut members: Vec<String> =
        redis::AsyncCommands::zrangebyscore(redis, keys::CONSUMERS, cutoff, "+inf").await?;
    members.sort();
    Ok(members)
}

impl Membership {
    pub(crate) fn new(id: &str, ttl: Duration, redis: sluice_redis::RedisConn) -> Self {
        Membership {
            id: id.to_string(),
            ttl,
            redis,
        }
    }

    pub(crate) fn id(&self) -> &str {
        &self.id
    }

    /// Beat, drop members that stopped beating, and read the live ones
    /// (one round trip). [`Beat::rejoined`]: this instance was not in the
    /// set — its first beat, or Redis lost the set (a restart without its
    /// data, a failover that lost writes) or dropped this member after a
    /// stall; what it wrote for its buckets may be gone too.
    pub(crate) async fn beat(&self) -> Result<Beat, redis::RedisError> {
        let now = crate::now_ms();
        let cutoff = live_since(now, self.ttl);
        let mut redis = self.redis.clone();
        let (added, members): (u64, Vec<String>) = redis::pipe()
            .cmd("ZADD")
            .arg(keys::CONSUMERS)
            .arg(now)
            .arg(&self.id)
            .cmd("ZREMRANGEBYSCORE")
            .arg(keys::CONSUMERS)
            .arg("-inf")
            .arg(format!("({cutoff}"))
            .ignore()
            .cmd("ZRANGE")
            .arg(keys::CONSUMERS)
            .arg(0)
            .arg(-1)
            .query_async(&mut redis)
            .await?;
        Ok(Beat {
            members,
            rejoined: added > 0,
        })
    }

    /// Leave the group at once (graceful shutdown): the others pick up this
    /// instance's buckets on their next round instead of after the TTL.
    pub(crate) async fn leave(&self) -> Result<(), redis::RedisError> {
        let mut redis = self.redis.clone();
        redis::cmd("ZREM")
            .arg(keys::CONSUMERS)
            .arg(&self.id)
            .query_async(&mut redis)
            .await
    }
}

// Retiring an idle bucket touches the keys the endpoint's publishes write:
// it lives with the rest of the shared bucket bookkeeping.
pub(crate) use sluice_contract::bookkeeping::{end_reclaim, idle_candidates, retire_if_idle};

#[cfg(test)]
mod tests {
    use super::*;

    fn names(n: usize, prefix: &str) -> Vec<String> {
        (0..n).map(|i| format!("{prefix}{i}")).collect()
    }

    #[test]
    fn every_topic_has_exactly_one_owner_and_shares_are_balanced() {
        let members = names(3, "consumer-");
        let topics = names(3000, "t");
        let mut total = 0;
        let mut seen = HashSet::new();
        for me in &members {
            let share = Assignment::default().share(me, &members, &topics);
            // Balanced within 15 % of the fair share.
            assert!((850..=1150).contains(&share.len()), "{me}: {}", share.len());
            for t in &share {
                assert!(seen.insert(t.clone()), "{t} owned twice");
            }
            total += share.len();
        }
        assert_eq!(total, topics.len());
    }

    #[test]
    fn a_departure_moves_only_the_departed_members_topics() {
        let members = names(4, "c");
        let topics = names(2000, "t");
        let before: HashMap<&String, &str> = topics
            .iter()
            .map(|t| (t, owner(t, &members).unwrap_or_default()))
            .collect();
        let remaining: Vec<String> = members.iter().filter(|m| *m != "c2").cloned().collect();
        for topic in &topics {
            let now = owner(topic, &remaining).unwrap_or_default();
            if before[topic] != "c2" {
                assert_eq!(now, before[topic], "{topic} moved without cause");
            } else {
                assert_ne!(now, "c2");
            }
        }
    }

    #[test]
    fn an_instance_counts_itself_live_and_the_cache_follows_member_changes() {
        let topics = names(50, "t");
        let mut assignment = Assignment::default();
        // Heartbeat not written yet (Redis slow): alone, it owns everything.
        assert_eq!(assignment.share("a", &[], &topics).len(), 50);
        let both = vec!["a".to_string(), "b".to_string()];
        let mine = assignment.share("a", &both, &topics);
        let theirs = Assignment::default().share("b", &both, &topics);
        assert_eq!(mine.len() + theirs.len(), 50);
        assert!(mine.is_disjoint(&theirs));
        assert_eq!(assignment.members(), &both[..]);
        // Topics that left the set leave the share.
        assert!(assignment.share("a", &both, &topics[..10]).len() <= 10);
    }

    #[test]
    fn scores_are_stable() {
        // Pinned: instances of different builds must agree on owners.
        assert_eq!(
            score("consumer-1", "acme%2Fgpt-4o"),
            score("consumer-1", "acme%2Fgpt-4o")
        );
        assert_ne!(score("a", "bc"), score("ab", "c"));
        let s = score("consumer-1", "t");
        assert_eq!(s, {
            let d = sha1_smol::Sha1::from(b"consumer-1\0t").digest().bytes();
            u64::from_be_bytes([d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7]])
        });
    }
}
