//! In-process counters: the embedded default for a single instance.

use super::counter::{
    decide, Batch, CounterOp, CounterOutcome, CounterStore, CountingMode, StoreError,
};
use futures::future::BoxFuture;
use std::collections::HashMap;
use std::sync::Mutex;

struct Counter {
    value: u64,
    expires_at_millis: u64,
}

#[derive(Default)]
struct State {
    counters: HashMap<String, Counter>,
    next_sweep_millis: u64,
}

/// Counters in a hash map behind one mutex. A decision holds the lock for a
/// few map lookups only, far below the cost of the gRPC call around it.
#[derive(Default)]
pub struct MemoryStore {
    state: Mutex<State>,
}

/// Expired counters are dropped at most this often.
const SWEEP_INTERVAL_MILLIS: u64 = 1_000;

impl MemoryStore {
    pub fn new() -> Self {
        Self::default()
    }

    /// Number of live counters (for tests and metrics).
    pub fn len(&self) -> usize {
        self.state.lock().map(|s| s.counters.len()).unwrap_or(0)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn apply_now(
        &self,
        ops: &[CounterOp],
        mode: CountingMode,
        now_millis: u64,
    ) -> Result<CounterOutcome, StoreError> {
        // A poisoned lock only means another decision panicked mid-update; the
        // map itself is still a valid map of counters.
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if now_millis >= state.next_sweep_millis {
            state
                .counters
                .retain(|_, c| c.expires_at_millis > now_millis);
            state.next_sweep_millis = now_millis + SWEEP_INTERVAL_MILLIS;
        }
        let before: Vec<u64> = ops
            .iter()
            .map(|op| match state.counters.get(&op.key) {
                Some(c) if c.expires_at_millis > now_millis => c.value,
                _ => 0,
            })
            .collect();
        let applied = decide(ops, &before, mode);
        if applied {
            for (op, &b) in ops.iter().zip(&before) {
                if op.hits > 0 {
                    let expires_at_millis = now_millis + op.ttl_secs * 1000;
                    let counter = state.counters.entry(op.key.clone()).or_insert(Counter {
                        value: 0,
                        expires_at_millis,
                    });
                    if counter.expires_at_millis <= now_millis {
                        counter.expires_at_millis = expires_at_millis;
                    }
                    counter.value = op.apply_to(b);
                } else if op.hits < 0 {
                    if let Some(counter) = state.counters.get_mut(&op.key) {
                        if counter.expires_at_millis > now_millis {
                            counter.value = op.apply_to(b);
                        }
                    }
                }
            }
        }
        Ok(CounterOutcome { applied, before })
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
