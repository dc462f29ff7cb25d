//! In-process counters: the embedded default for a single instance.

use super::counter::{
    decide, Batch, CounterOp, CounterOutcome, CounterStore, CountingMode, StoreError,
};
use futures::future::BoxFuture;
use hashbrown::HashTable;
use smallvec::SmallVec;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

struct Counter {
    key: String,
    value: u64,
    expires_at_millis: u64,
}

#[derive(Default)]
struct State {
    counters: HashTable<Counter>,
}

impl State {
    fn get(&self, hash: u64, key: &str) -> Option<&Counter> {
        self.counters.find(hash, |c| c.key == key)
    }

    fn get_mut(&mut self, hash: u64, key: &str) -> Option<&mut Counter> {
        self.counters.find_mut(hash, |c| c.key == key)
    }
}

/// Counters in hash tables, each behind its own mutex (a shard). A
/// decision hashes its keys before it locks anything, then locks the shards
/// its keys fall in, in ascending order (so two decisions never wait on each
/// other in a cycle), for a few probes each: far below the cost of the gRPC
/// call around it, and two workers rarely meet on one lock. The hash is
/// std's keyed SipHash: keys come from requests, so their hashes must not be
/// guessable.
pub struct MemoryStore {
    shards: Vec<Mutex<State>>,
    hasher: std::collections::hash_map::RandomState,
    /// When the next sweep of every shard is due.
    next_sweep_millis: AtomicU64,
}

/// Shards of the counters: enough that the workers of a busy service rarely
/// want the same one at the same time.
const SHARDS: usize = 16;

/// Expired counters are dropped at most this often.
const SWEEP_INTERVAL_MILLIS: u64 = 1_000;

impl Default for MemoryStore {
    fn default() -> Self {
        MemoryStore {
            shards: (0..SHARDS).map(|_| Mutex::default()).collect(),
            hasher: Default::default(),
            next_sweep_millis: AtomicU64::new(0),
        }
    }
}

/// A decision's ops, as most requests have at most (on the stack up to it).
const OPS: usize = 4;

/// The shards one decision holds, in ascending order.
type Guards<'a> = SmallVec<[std::sync::MutexGuard<'a, State>; OPS]>;

/// One op's place: its key's hash and the index, in the decision's list of
/// locked shards, of the shard it falls in.
struct Place {
    hash: u64,
    guard: usize,
}

impl MemoryStore {
    pub fn new() -> Self {
        Self::default()
    }

    /// Number of live counters (for tests and metrics).
    pub fn len(&self) -> usize {
        (0..SHARDS).map(|i| self.lock(i).counters.len()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self, shard: usize) -> std::sync::MutexGuard<'_, State> {
        // A poisoned lock only means another decision panicked mid-update; the
        // table itself is still a valid table of counters.
        self.shards[shard].lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The shard of a hash: bits 32 and up, which the shard's table does
    /// not use (hashbrown finds the bucket with the low bits and tags its
    /// slots with the top seven: a shard chosen by those would leave its
    /// table's tags only three bits of their seven, and a probe would
    /// compare many more keys).
    fn shard_of(hash: u64) -> usize {
        (hash >> 32) as usize % SHARDS
    }

    /// Locks the shards `ops` fall in, in ascending order, and says where
    /// each op's counter is.
    fn lock_for(&self, ops: &[CounterOp]) -> (Guards<'_>, SmallVec<[Place; OPS]>) {
        let hashes: SmallVec<[u64; OPS]> =
            ops.iter().map(|op| self.hasher.hash_one(&op.key)).collect();
        let mut shards: SmallVec<[usize; OPS]> =
            hashes.iter().map(|&h| Self::shard_of(h)).collect();
        shards.sort_unstable();
        shards.dedup();
        let guards = shards.iter().map(|&shard| self.lock(shard)).collect();
        let places = hashes
            .into_iter()
            .map(|hash| Place {
                hash,
                guard: shards
                    .binary_search(&Self::shard_of(hash))
                    .unwrap_or_default(),
            })
            .collect();
        (guards, places)
    }

    /// Drops the expired counters of every shard, at most once per
    /// [`SWEEP_INTERVAL_MILLIS`]: the decision that finds it due does it,
    /// one shard locked at a time and none of its own held. Every shard, not
    /// only those decisions touch: a flood of keys that stops is dropped too.
    fn sweep_if_due(&self, now_millis: u64) {
        let due = self.next_sweep_millis.load(Ordering::Relaxed);
        if now_millis < due
            || self
                .next_sweep_millis
                .compare_exchange(
                    due,
                    now_millis + SWEEP_INTERVAL_MILLIS,
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                )
                .is_err()
        {
            return;
        }
        for shard in 0..SHARDS {
            self.lock(shard)
                .counters
                .retain(|c| c.expires_at_millis > now_millis);
        }
    }

    fn apply_now(
        &self,
        ops: &[CounterOp],
        mode: CountingMode,
        now_millis: u64,
    ) -> Result<CounterOutcome, StoreError> {
        self.sweep_if_due(now_millis);
        let (mut guards, places) = self.lock_for(ops);
        let before: Vec<u64> = ops
            .iter()
            .zip(&places)
            .map(
                |(op, place)| match guards[place.guard].get(place.hash, &op.key) {
                    Some(c) if c.expires_at_millis > now_millis => c.value,
                    _ => 0,
                },
            )
            .collect();
        let applied = decide(ops, &before, mode);
        if applied {
            for ((op, place), &b) in ops.iter().zip(&places).zip(&before) {
                guards[place.guard].apply(op, place.hash, b, now_millis, &self.hasher);
            }
        }
        Ok(CounterOutcome { applied, before })
    }
}

impl State {
    /// Moves one op's counter from `before` (read under this same lock).
    fn apply(
        &mut self,
        op: &CounterOp,
        hash: u64,
        before: u64,
        now_millis: u64,
        hasher: &impl BuildHasher,
    ) {
        if op.hits > 0 {
            let expires_at_millis = now_millis + op.ttl_secs * 1000;
            match self.get_mut(hash, &op.key) {
                Some(counter) => {
                    if counter.expires_at_millis <= now_millis {
                        counter.expires_at_millis = expires_at_millis;
                    }
                    counter.value = op.apply_to(before);
                }
                None => {
                    let counter = Counter {
                        key: op.key.clone(),
                        value: op.apply_to(before),
                        expires_at_millis,
                    };
                    self.counters
                        .insert_unique(hash, counter, |c| hasher.hash_one(&c.key));
                }
            }
        } else if op.hits < 0 {
            if let Some(counter) = self.get_mut(hash, &op.key) {
                if counter.expires_at_millis > now_millis {
                    counter.value = op.apply_to(before);
                }
            }
        }
    }
}

impl CounterStore for MemoryStore {
    fn apply<'a>(&'a self, batch: Batch<'a>) -> BoxFuture<'a, Result<CounterOutcome, StoreError>> {
        let result = self.apply_now(batch.ops, batch.mode, batch.now_millis);
        Box::pin(std::future::ready(result))
    }

    fn ping(&self) -> BoxFuture<'_, Result<(), StoreError>> {
        Box::pin(std::future::ready(Ok(())))
    }

    fn kind(&self) -> &'static str {
        "memory"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Duration;

    const NOW: u64 = 1_000_000;

    /// Ops of one hit each, limit `limit`, on counters `k0..kn`.
    fn ops(keys: impl Iterator<Item = usize>, limit: u64) -> Vec<CounterOp> {
        keys.map(|i| CounterOp {
            key: format!("k{i}"),
            hits: 1,
            limit,
            enforced: true,
            ttl_secs: 60,
        })
        .collect()
    }

    fn apply(store: &MemoryStore, ops: &[CounterOp]) -> CounterOutcome {
        store
            .apply_now(ops, CountingMode::AllOrNothing, NOW)
            .unwrap_or_else(|e| panic!("the memory store failed: {e}"))
    }

    /// 40 counters land in most of the 16 shards: a decision over them is
    /// still all or nothing.
    #[test]
    fn a_decision_over_many_shards_is_all_or_nothing() {
        let store = MemoryStore::new();
        let all = ops(0..40, 2);
        let mut shards: Vec<usize> = all
            .iter()
            .map(|op| MemoryStore::shard_of(store.hasher.hash_one(&op.key)))
            .collect();
        shards.sort_unstable();
        shards.dedup();
        assert!(shards.len() > 1, "the keys must span shards");

        assert!(apply(&store, &all).applied);
        // k39 alone reaches its limit of 2.
        assert!(apply(&store, &ops(39..40, 2)).applied);
        let refused = apply(&store, &all);
        assert!(!refused.applied, "k39 is over: nothing moves");
        assert_eq!(refused.before[..39], [1; 39]);
        assert_eq!(refused.before[39], 2);
        // Nothing moved: the same values again.
        assert_eq!(apply(&store, &all).before, refused.before);
        assert_eq!(store.len(), 40);
    }

    /// Two workers deciding over the same counters, listed in opposite
    /// orders, lock their shards in one order: neither waits on the other
    /// for ever, and every hit is counted.
    #[test]
    fn decisions_over_shared_shards_in_opposite_orders_finish_and_count_everything() {
        const DECISIONS: u64 = 20_000;
        let store = Arc::new(MemoryStore::new());
        let (done, finished) = std::sync::mpsc::channel();
        for reversed in [false, true] {
            let (store, done) = (store.clone(), done.clone());
            std::thread::spawn(move || {
                let mut keys = ops(0..24, u64::MAX);
                if reversed {
                    keys.reverse();
                }
                for _ in 0..DECISIONS {
                    apply(&store, &keys);
                }
                let _ = done.send(());
            });
        }
        for _ in 0..2 {
            finished
                .recv_timeout(Duration::from_secs(120))
                .unwrap_or_else(|_| panic!("a worker did not finish: deadlock"));
        }
        let counted = apply(&store, &ops(0..24, u64::MAX));
        assert_eq!(counted.before, vec![2 * DECISIONS; 24]);
    }

    /// A flood of keys that then stops is dropped once expired, even from
    /// the shards later decisions never touch.
    #[test]
    fn expired_counters_leave_every_shard_not_only_those_decided_in() {
        let store = MemoryStore::new();
        assert!(apply(&store, &ops(0..200, 10)).applied);
        assert_eq!(store.len(), 200);
        let later = NOW + 61_000;
        store
            .apply_now(&ops(500..501, 10), CountingMode::AllOrNothing, later)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(store.len(), 1, "only the new counter is left");
    }

    #[test]
    fn expired_counters_start_again_and_are_swept() {
        let store = MemoryStore::new();
        let op = ops(0..1, 10);
        assert!(apply(&store, &op).applied);
        let later = NOW + 61_000;
        let outcome = store
            .apply_now(&ops(1..2, 10), CountingMode::AllOrNothing, later)
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(outcome.applied);
        let outcome = store
            .apply_now(&op, CountingMode::AllOrNothing, later)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(outcome.before, [0], "k0 expired");
    }
}
