//! What the simulator really produced, per ledger key (the client's
//! `x-sim-ledger` header, e.g. its tenant): the ground truth that
//! accounting benchmarks compare a gateway's counters with.

use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

/// One key's totals.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LedgerEntry {
    /// Requests admitted by the simulator (after its concurrency slots).
    pub requests: u64,
    /// Prompt tokens, as the simulator counts them (and reports in `usage`).
    pub prompt_tokens: u64,
    /// Completion tokens sent: every token of a whole answer, every token
    /// chunk of a stream handed to the connection (a stream that breaks
    /// counts what went out before).
    pub completion_tokens: u64,
    /// Answers that broke: an injected failure, or a client that went away.
    pub broken: u64,
}

/// Totals per key, bounded (keys beyond `max_keys` are not recorded).
#[derive(Debug)]
pub struct Ledger {
    entries: Mutex<HashMap<String, LedgerEntry>>,
    max_keys: usize,
}

impl Ledger {
    pub fn new(max_keys: usize) -> Self {
        Ledger {
            entries: Mutex::new(HashMap::new()),
            max_keys,
        }
    }

    /// Applies `change` to `key`'s entry; requests without a key are not recorded.
    pub fn record(&self, key: Option<&str>, change: impl FnOnce(&mut LedgerEntry)) {
        let Some(key) = key else { return };
        let Ok(mut entries) = self.entries.lock() else {
            return;
        };
        if let Some(entry) = entries.get_mut(key) {
            change(entry);
        } else if entries.len() < self.max_keys {
            let mut entry = LedgerEntry::default();
            change(&mut entry);
            entries.insert(key.to_string(), entry);
        }
    }

    /// Every key's totals, sorted by key.
    pub fn snapshot(&self) -> BTreeMap<String, LedgerEntry> {
        self.entries
            .lock()
            .map(|entries| entries.iter().map(|(k, v)| (k.clone(), *v)).collect())
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_per_key_within_bounds() {
        let ledger = Ledger::new(1);
        ledger.record(Some("a"), |e| e.prompt_tokens += 3);
        ledger.record(Some("a"), |e| e.completion_tokens += 2);
        ledger.record(Some("b"), |e| e.requests += 1);
        ledger.record(None, |e| e.requests += 1);
        let snapshot = ledger.snapshot();
        assert_eq!(snapshot.len(), 1);
        assert_eq!(
            snapshot.get("a").copied(),
            Some(LedgerEntry {
                prompt_tokens: 3,
                completion_tokens: 2,
                ..LedgerEntry::default()
            })
        );
    }
}
