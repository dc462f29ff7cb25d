//! An over-limit local cache in front of a shared store, as
//! envoyproxy/ratelimit's `LOCAL_CACHE_SIZE_IN_BYTES`: a counter seen where
//! even a check-only op is over (the counting mode's rule) stays over until
//! its window ends, so a request whose every counter is known to be over is
//! answered here, without a round trip.
//!
//! Only a counter that itself reached its limit is remembered (not one that
//! was over only because of a large `hits_addend`: a smaller request could
//! still fit). A refund on a remembered counter forgets it. Requests that
//! touch any counter not known to be over go to the store in full, so the
//! answer for them is exactly the store's.

use super::counter::{Batch, CounterOp, CounterOutcome, CounterStore, CountingMode, StoreError};
use futures::future::BoxFuture;
use prometheus_client::metrics::counter::Counter;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

/// Rough bytes one remembered counter costs besides its key.
const ENTRY_OVERHEAD_BYTES: usize = 64;

pub struct LocalCacheStore {
    inner: Arc<dyn CounterStore>,
    capacity_bytes: usize,
    /// store key → expiry (ms since the epoch), and the bytes in use.
    over: Mutex<(HashMap<String, u64>, usize)>,
    /// Decisions answered from the cache.
    answered: Counter,
}

impl LocalCacheStore {
    pub fn new(inner: Arc<dyn CounterStore>, capacity_bytes: usize, answered: Counter) -> Self {
        LocalCacheStore {
            inner,
            capacity_bytes,
            over: Mutex::new((HashMap::new(), 0)),
            answered,
        }
    }

    /// Whether every op is a charge or check on a counter known to be over.
    fn all_known_over(&self, ops: &[CounterOp], now_millis: u64) -> bool {
        let over = self.over.lock().unwrap_or_else(PoisonError::into_inner);
        !ops.is_empty()
            && ops.iter().all(|op| {
                op.hits >= 0 && over.0.get(&op.key).is_some_and(|&until| until > now_millis)
            })
    }

    /// Remembers the counters the store left where even a check-only op is
    /// over (`mode`'s rule); forgets refunded ones.
    fn remember(
        &self,
        ops: &[CounterOp],
        outcome: &CounterOutcome,
        mode: CountingMode,
        now_millis: u64,
    ) {
        let mut guard = self.over.lock().unwrap_or_else(PoisonError::into_inner);
        let (over, used_bytes) = &mut *guard;
        for (op, &before) in ops.iter().zip(&outcome.before) {
            if op.hits < 0 {
                if over.remove(&op.key).is_some() {
                    *used_bytes -= op.key.len() + ENTRY_OVERHEAD_BYTES;
                }
                continue;
            }
            let after = if outcome.applied {
                op.apply_to(before)
            } else {
                before
            };
            if !mode.check_only_over(after, op.limit) || over.contains_key(&op.key) {
                continue;
            }
            let cost = op.key.len() + ENTRY_OVERHEAD_BYTES;
            if *used_bytes + cost > self.capacity_bytes {
                // Full: make room from expired counters, or skip this one.
                over.retain(|_, until| *until > now_millis);
                *used_bytes = over.keys().map(|k| k.len() + ENTRY_OVERHEAD_BYTES).sum();
                if *used_bytes + cost > self.capacity_bytes {
                    continue;
                }
            }
            over.insert(op.key.clone(), now_millis + op.ttl_secs * 1000);
            *used_bytes += cost;
        }
    }
}

impl CounterStore for LocalCacheStore {
    fn apply<'a>(&'a self, batch: Batch<'a>) -> BoxFuture<'a, Result<CounterOutcome, StoreError>> {
        let Batch {
            ops,
            mode,
            now_millis,
        } = batch;
        Box::pin(async move {
            if self.all_known_over(ops, now_millis) {
                self.answered.inc();
                // Past the limit: every op is over under either mode's rule,
                // nothing moves (as the store would leave it in
                // all-or-nothing; increment-all would add to counters already
                // over, which changes no answer).
                return Ok(CounterOutcome {
                    applied: false,
                    before: ops.iter().map(|op| op.limit.saturating_add(1)).collect(),
                });
            }
            let outcome = self.inner.apply(batch).await?;
            self.remember(ops, &outcome, mode, now_millis);
            Ok(outcome)
        })
    }

    fn ping(&self) -> BoxFuture<'_, Result<(), StoreError>> {
        self.inner.ping()
    }

    fn kind(&self) -> &'static str {
        self.inner.kind()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::MemoryStore;

    fn op(key: &str, hits: i64, limit: u64) -> CounterOp {
        CounterOp {
            key: key.into(),
            hits,
            limit,
            enforced: true,
            ttl_secs: 60,
        }
    }

    async fn apply(
        store: &LocalCacheStore,
        ops: &[CounterOp],
        mode: CountingMode,
        now_millis: u64,
    ) -> CounterOutcome {
        store
            .apply(Batch::new(ops, mode, now_millis))
            .await
            .unwrap()
    }

    #[tokio::test]
    async fn known_over_counters_are_answered_locally_until_the_window_ends() {
        let answered = Counter::default();
        let store = LocalCacheStore::new(Arc::new(MemoryStore::new()), 1 << 20, answered.clone());
        let mode = CountingMode::AllOrNothing;
        let now = 1_000_000;
        // 2 of 2: the second reaches the limit and is remembered.
        for _ in 0..2 {
            let outcome = apply(&store, &[op("k", 1, 2)], mode, now).await;
            assert!(outcome.applied);
        }
        assert_eq!(answered.get(), 0);
        let outcome = apply(&store, &[op("k", 1, 2)], mode, now + 1).await;
        assert!(!outcome.applied);
        assert_eq!(outcome.before, [3], "answered as past the limit");
        assert_eq!(answered.get(), 1);
        // A request with another counter goes to the store.
        let outcome = apply(&store, &[op("k", 1, 2), op("other", 1, 5)], mode, now + 2).await;
        assert!(!outcome.applied, "k is still over");
        assert_eq!(answered.get(), 1);
        // After the window, the key is forgotten.
        apply(&store, &[op("k", 1, 2)], mode, now + 61_000).await;
        assert_eq!(answered.get(), 1);
    }

    #[tokio::test]
    async fn under_upstreams_rule_a_counter_at_its_limit_still_passes_a_check() {
        let answered = Counter::default();
        let store = LocalCacheStore::new(Arc::new(MemoryStore::new()), 1 << 20, answered.clone());
        let mode = CountingMode::IncrementAll;
        // 1 of 1: at the limit, a check-only op (hits 0) still passes, so the
        // counter is not remembered and the check goes to the store.
        apply(&store, &[op("k", 1, 1)], mode, 0).await;
        let check = apply(&store, &[op("k", 0, 1)], mode, 1).await;
        assert_eq!(check.before, [1]);
        assert_eq!(answered.get(), 0);
        // Past it (2 of 1) it is remembered, and the next check is answered here, over.
        apply(&store, &[op("k", 1, 1)], mode, 2).await;
        let check = apply(&store, &[op("k", 0, 1)], mode, 3).await;
        assert_eq!(answered.get(), 1);
        assert!(op("k", 0, 1).is_over(check.before[0], mode));
    }

    #[tokio::test]
    async fn a_large_charge_that_does_not_fit_is_not_remembered() {
        let answered = Counter::default();
        let store = LocalCacheStore::new(Arc::new(MemoryStore::new()), 1 << 20, answered.clone());
        let mode = CountingMode::AllOrNothing;
        let big = apply(&store, &[op("k", 10, 5)], mode, 0).await;
        assert!(!big.applied);
        let small = apply(&store, &[op("k", 1, 5)], mode, 1).await;
        assert!(small.applied, "a small request still fits");
        assert_eq!(answered.get(), 0);
    }

    #[tokio::test]
    async fn refunds_forget_and_capacity_is_respected() {
        let answered = Counter::default();
        let store = LocalCacheStore::new(Arc::new(MemoryStore::new()), 1, answered.clone());
        let mode = CountingMode::AllOrNothing;
        for _ in 0..3 {
            apply(&store, &[op("k", 1, 1)], mode, 0).await;
        }
        assert_eq!(answered.get(), 0, "no room for even one entry");

        let store = LocalCacheStore::new(Arc::new(MemoryStore::new()), 1 << 20, answered.clone());
        apply(&store, &[op("k", 1, 1)], mode, 0).await;
        apply(&store, &[op("k", -1, 1)], mode, 1).await;
        let outcome = apply(&store, &[op("k", 1, 1)], mode, 2).await;
        assert!(outcome.applied, "the refund made room");
        assert_eq!(answered.get(), 0);
    }
}
