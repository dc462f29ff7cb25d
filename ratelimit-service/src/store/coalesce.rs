//! Decisions that arrive together share one script call.
//!
//! A script call's fixed cost (Redis parsing the call and entering Lua, the
//! client's encoding and reply routing) is a large part of a decision's: the
//! decision script does 75 k calls/s on one Redis core where an empty script
//! does 159 k (docs/benchmarks.md). So at most one call is in flight per
//! connection; a decision that arrives while they all are waits for the next
//! one and goes with every other decision that waited, up to `max_decisions`.
//! Under light load a decision is sent at once, alone; under heavy load the
//! calls grow, and Redis's work per decision falls.
//!
//! Each decision stays atomic and exact: the script runs the decisions of a
//! call one after the other, each on the counters as the earlier ones left
//! them, exactly as separate calls arriving in that order would.

use super::counter::{CounterOp, CounterOutcome, CountingMode, StoreError};
use super::script_call::{self, Connections};
use prometheus_client::metrics::histogram::Histogram;
use std::sync::{Arc, Mutex};
use tokio::sync::oneshot;

type Answer = Result<CounterOutcome, StoreError>;

/// A decision waiting for a call: its ops (owned: the call runs in its own
/// task) and where its answer goes.
struct Waiting {
    ops: Vec<CounterOp>,
    mode: CountingMode,
    answer: oneshot::Sender<Answer>,
}

#[derive(Default)]
struct Queue {
    waiting: Vec<Waiting>,
    in_flight: usize,
}

/// Where decisions wait for a script call: one call in flight per
/// connection at most.
pub(super) struct Coalescer {
    queue: Mutex<Queue>,
    connections: Arc<Connections>,
    script: redis::Script,
    max_decisions: usize,
    decisions_per_call: Histogram,
}

impl Coalescer {
    /// Calls go on `connections`, one in flight per connection, each with
    /// `max_decisions` at most; their sizes are observed into
    /// `decisions_per_call`.
    pub fn new(
        connections: Arc<Connections>,
        script: redis::Script,
        max_decisions: usize,
        decisions_per_call: Histogram,
    ) -> Arc<Self> {
        Arc::new(Coalescer {
            queue: Mutex::new(Queue::default()),
            connections,
            script,
            max_decisions: max_decisions.max(1),
            decisions_per_call,
        })
    }

    /// The same coalescer, observing its calls' sizes into `histogram`.
    pub fn observed_into(&self, histogram: Histogram) -> Arc<Self> {
        Coalescer::new(
            Arc::clone(&self.connections),
            self.script.clone(),
            self.max_decisions,
            histogram,
        )
    }

    /// Decides `ops` under `mode` in the next script call that has room.
    ///
    /// The call runs in its own task: a caller that stops waiting (its
    /// deadline passed, its client left) takes nothing with it, and a
    /// decision whose caller left before its call was made is not sent.
    pub async fn decide(self: &Arc<Self>, ops: &[CounterOp], mode: CountingMode) -> Answer {
        let (answer, answered) = oneshot::channel();
        let first = {
            let mut queue = self.queue.lock().unwrap_or_else(|e| e.into_inner());
            queue.waiting.push(Waiting {
                ops: ops.to_vec(),
                mode,
                answer,
            });
            if queue.in_flight < self.connections.len() {
                queue.in_flight += 1;
                Some(self.take(&mut queue))
            } else {
                None
            }
        };
        if let Some(call) = first {
            tokio::spawn(Arc::clone(self).drive(call));
        }
        answered
            .await
            .unwrap_or_else(|_| Err(StoreError::Failed("decision dropped unanswered".into())))
    }

    /// Up to `max_decisions` waiting decisions whose callers still wait.
    fn take(&self, queue: &mut Queue) -> Vec<Waiting> {
        queue.waiting.retain(|w| !w.answer.is_closed());
        let count = queue.waiting.len().min(self.max_decisions);
        queue.waiting.drain(..count).collect()
    }

    /// Makes `call`, then the calls of whatever waited meanwhile, until
    /// nothing waits.
    async fn drive(self: Arc<Self>, mut call: Vec<Waiting>) {
        loop {
            if !call.is_empty() {
                self.decisions_per_call.observe(call.len() as f64);
                self.call(call).await;
            }
            let mut queue = self.queue.lock().unwrap_or_else(|e| e.into_inner());
            call = self.take(&mut queue);
            if call.is_empty() {
                queue.in_flight -= 1;
                return;
            }
        }
    }

    async fn call(&self, call: Vec<Waiting>) {
        let decisions: Vec<script_call::Decision<'_>> =
            call.iter().map(|w| (&w.ops[..], w.mode)).collect();
        match script_call::decide(&self.script, &self.connections, &decisions).await {
            Ok(outcomes) => {
                for (waiting, outcome) in call.into_iter().zip(outcomes) {
                    let _ = waiting.answer.send(Ok(outcome));
                }
            }
            Err(error) => {
                for waiting in call {
                    let _ = waiting.answer.send(Err(error.clone()));
                }
            }
        }
    }
}
