//! Calls per `x-request-id` for `GET /sim/calls`, over a bounded window:
//! the last `capacity` distinct ids. When a new id would exceed it, the id
//! seen first is forgotten (FIFO), so memory stays flat under any load and
//! a count is exact for every id still inside the window.
//!
//! Hand-written (a map plus an insertion-order queue) rather than an LRU
//! crate: the window is "first seen", not "last used", so a request id that
//! keeps being called twice cannot keep itself in and push others out, and
//! both operations stay O(1).

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

/// Distinct request ids remembered when not configured: about 25 MB at
/// 36-byte ids (map entry, queue slot, shared string), and a window of 200 s
/// at 1,000 requests/s.
pub const DEFAULT_MAX_TRACKED_REQUEST_IDS: usize = 200_000;

/// What is remembered of one id.
#[derive(Clone, Copy, Debug)]
struct Seen {
    calls: u64,
    /// Its place among the ids in the order they first arrived (0: first).
    arrival: u64,
}

#[derive(Debug)]
pub struct CallCounts {
    counts: HashMap<Arc<str>, Seen>,
    /// Ids in the order they were first seen; the front is forgotten first.
    order: VecDeque<Arc<str>>,
    capacity: usize,
    forgotten: u64,
    /// Distinct ids seen so far, forgotten ones included.
    arrivals: u64,
}

impl CallCounts {
    /// A window of `capacity` ids (0: nothing is counted).
    pub fn new(capacity: usize) -> Self {
        CallCounts {
            counts: HashMap::new(),
            order: VecDeque::new(),
            capacity,
            forgotten: 0,
            arrivals: 0,
        }
    }

    /// Counts one call of `id`; forgets the oldest id when the window is full.
    pub fn count(&mut self, id: &str) {
        if let Some(seen) = self.counts.get_mut(id) {
            seen.calls += 1;
            return;
        }
        if self.capacity == 0 {
            return;
        }
        if self.order.len() >= self.capacity {
            if let Some(oldest) = self.order.pop_front() {
                self.counts.remove(&oldest);
                self.forgotten += 1;
            }
        }
        let id: Arc<str> = Arc::from(id);
        self.order.push_back(id.clone());
        let arrival = self.arrivals;
        self.arrivals += 1;
        self.counts.insert(id, Seen { calls: 1, arrival });
    }

    /// Calls of `id` (0: never seen, or forgotten).
    pub fn calls_of(&self, id: &str) -> u64 {
        self.counts.get(id).map_or(0, |seen| seen.calls)
    }

    /// The place of `id`'s first call among every id's first call (0: the
    /// first id ever seen); `None`: never seen, or forgotten. What a test
    /// of call order reads: the server's own arrival order, not the order
    /// its answers came back in.
    pub fn arrival_of(&self, id: &str) -> Option<u64> {
        self.counts.get(id).map(|seen| seen.arrival)
    }

    /// Ids remembered now.
    pub fn tracked(&self) -> usize {
        self.counts.len()
    }

    /// Ids forgotten so far to keep the window.
    pub fn forgotten(&self) -> u64 {
        self.forgotten
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_exactly_inside_the_window() {
        let mut calls = CallCounts::new(3);
        for id in ["a", "b", "a", "c", "a"] {
            calls.count(id);
        }
        assert_eq!(calls.calls_of("a"), 3);
        assert_eq!(calls.calls_of("b"), 1);
        assert_eq!(calls.calls_of("zz"), 0);
        assert_eq!(calls.tracked(), 3);
    }

    #[test]
    fn ranks_ids_by_their_first_call() {
        let mut calls = CallCounts::new(2);
        for id in ["b", "a", "b", "c"] {
            calls.count(id);
        }
        // "b" was forgotten for "c"; ranks count forgotten ids too.
        assert_eq!(calls.arrival_of("b"), None);
        assert_eq!(calls.arrival_of("a"), Some(1));
        assert_eq!(calls.arrival_of("c"), Some(2));
        assert_eq!(calls.arrival_of("zz"), None);
    }

    #[test]
    fn forgets_the_first_seen_id_first() {
        let mut calls = CallCounts::new(2);
        calls.count("a");
        calls.count("b");
        // A repeat does not move "a" to the back: the window is first seen.
        calls.count("a");
        calls.count("c");
        assert_eq!(calls.calls_of("a"), 0);
        assert_eq!(calls.calls_of("b"), 1);
        assert_eq!(calls.calls_of("c"), 1);
        assert_eq!((calls.tracked(), calls.forgotten()), (2, 1));
    }

    #[test]
    fn stays_within_capacity_under_many_ids() {
        let mut calls = CallCounts::new(100);
        for n in 0..10_000 {
            calls.count(&format!("id-{n}"));
        }
        assert_eq!(calls.tracked(), 100);
        assert_eq!(calls.order.len(), 100);
        assert_eq!(calls.forgotten(), 9_900);
        assert_eq!(calls.calls_of("id-9999"), 1);
        assert_eq!(calls.calls_of("id-9899"), 0);
    }

    #[test]
    fn zero_capacity_counts_nothing() {
        let mut calls = CallCounts::new(0);
        calls.count("a");
        assert_eq!((calls.tracked(), calls.calls_of("a")), (0, 0));
    }
}
