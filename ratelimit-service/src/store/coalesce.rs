//! Decisions that arrive together share one script call.
//!
//! A script call's fixed cost (Redis parsing the call and entering Lua, the
//! client's encoding and reply routing) is a large part of a decision's: the
//! decision script does 75 k calls/s on one Redis core where an empty script
//! does 159 k (docs/benchmarks.md). So at most `depth` calls are in flight
//! at once; a decision that arrives while they all are waits for the next one
//! and goes with every other decision that waited, up to `max_decisions`.
//! Under light load a decision is sent at once, alone; under heavy load the
//! calls grow, and Redis's work per decision falls.
//!
//! Each decision stays atomic and exact: the script runs the decisions of a
//! call one after the other, each on the counters as the earlier ones left
//! them, exactly as separate calls arriving in that order would.

use super::counter::{CounterOp, CounterOutcome, CountingMode, StoreError};
use prometheus_client::metrics::histogram::Histogram;
use sluice_redis::RedisConn;
use std::sync::{Arc, Mutex};
use tokio::sync::oneshot;

/// One decision: its ops under its mode.
pub(super) struct Decision {
    pub ops: Vec<CounterOp>,
    pub mode: CountingMode,
}

type Answer = Result<CounterOutcome, StoreError>;

struct Waiting {
    decision: Decision,
    answer: oneshot::Sender<Answer>,
}

#[derive(Default)]
struct Queue {
    waiting: Vec<Waiting>,
    in_flight: usize,
}

/// Where decisions wait for a script call.
pub(super) struct Coalescer {
    queue: Mutex<Queue>,
    connection: Arc<dyn Fn() -> RedisConn + Send + Sync>,
    script: redis::Script,
    depth: usize,
    max_decisions: usize,
    decisions_per_call: Histogram,
}

impl Coalescer {
    /// `connection` hands out the connection for the next call; `depth`
    /// script calls at most in flight, each with `max_decisions` at most.
    pub fn new(
        connection: Arc<dyn Fn() -> RedisConn + Send + Sync>,
        script: redis::Script,
        depth: usize,
        max_decisions: usize,
        decisions_per_call: Histogram,
    ) -> Arc<Self> {
        Arc::new(Coalescer {
            queue: Mutex::new(Queue::default()),
            connection,
            script,
            depth: depth.max(1),
            max_decisions: max_decisions.max(1),
            decisions_per_call,
        })
    }

    /// Decides `decision` in the next script call that has room.
    ///
    /// The call runs in its own task: a caller that stops waiting (its
    /// deadline passed, its client left) takes nothing with it, and a
    /// decision whose caller left before its call was made is not sent.
    pub async fn decide(self: &Arc<Self>, decision: Decision) -> Answer {
        let (answer, answered) = oneshot::channel();
        let first = {
            let mut queue = self.queue.lock().unwrap_or_else(|e| e.into_inner());
            queue.waiting.push(Waiting { decision, answer });
            if queue.in_flight < self.depth {
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
        let decisions: Vec<&Decision> = call.iter().map(|w| &w.decision).collect();
        let mut invocation = self.script.prepare_invoke();
        add_decisions(&mut invocation, &decisions);
        let mut connection = (self.connection)();
        // The connection's response timeout bounds the round trip.
        let reply: Result<Vec<i64>, _> = invocation.invoke_async(&mut connection).await;
        match reply {
            Ok(reply) => match split_reply(&reply, &decisions) {
                Ok(outcomes) => {
                    for (waiting, outcome) in call.into_iter().zip(outcomes) {
                        let _ = waiting.answer.send(Ok(outcome));
                    }
                }
                Err(error) => answer_all(call, StoreError::Failed(error)),
            },
            Err(error) => answer_all(call, map_error(error)),
        }
    }
}

fn answer_all(call: Vec<Waiting>, error: StoreError) {
    for waiting in call {
        let _ = waiting.answer.send(Err(error.clone()));
    }
}

/// A Redis failure as a store error: transient (a retry may work) or not.
pub(super) fn map_error(error: redis::RedisError) -> StoreError {
    let transient = error.is_io_error()
        || error.is_connection_refusal()
        || error.is_timeout()
        || error.is_connection_dropped()
        || matches!(
            error.kind(),
            redis::ErrorKind::Server(
                redis::ServerErrorKind::BusyLoading
                    | redis::ServerErrorKind::TryAgain
                    | redis::ServerErrorKind::ClusterDown
                    | redis::ServerErrorKind::MasterDown
            )
        );
    if transient {
        StoreError::Unavailable(error.to_string())
    } else {
        StoreError::Failed(error.to_string())
    }
}

/// The arguments of [`super::scripts::DECIDE`] for `decisions`, in order.
pub(super) fn add_decisions(invocation: &mut redis::ScriptInvocation<'_>, decisions: &[&Decision]) {
    invocation.arg(decisions.len());
    for decision in decisions {
        invocation
            .arg(match decision.mode {
                CountingMode::AllOrNothing => "1",
                CountingMode::IncrementAll => "0",
            })
            .arg(decision.ops.len());
        for op in &decision.ops {
            invocation
                .key(op.key.as_str())
                .arg(op.hits)
                .arg(op.limit)
                .arg(if op.enforced { "1" } else { "0" })
                .arg(op.ttl_secs);
        }
    }
}

/// Each decision's outcome from the script's flat reply:
/// `applied, before_1 .. before_n` per decision, in order.
pub(super) fn split_reply(
    reply: &[i64],
    decisions: &[&Decision],
) -> Result<Vec<CounterOutcome>, String> {
    let expected: usize = decisions.iter().map(|d| 1 + d.ops.len()).sum();
    if reply.len() != expected {
        return Err(format!(
            "decision script returned {} values for {} decisions expecting {expected}",
            reply.len(),
            decisions.len()
        ));
    }
    let mut rest = reply;
    let mut outcomes = Vec::with_capacity(decisions.len());
    for decision in decisions {
        let (head, tail) = rest.split_at(1 + decision.ops.len());
        outcomes.push(CounterOutcome {
            applied: head[0] == 1,
            before: head[1..].iter().map(|&v| v.max(0) as u64).collect(),
        });
        rest = tail;
    }
    Ok(outcomes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(key: &str) -> CounterOp {
        CounterOp {
            key: key.into(),
            hits: 1,
            limit: 10,
            enforced: true,
            ttl_secs: 60,
        }
    }

    #[test]
    fn replies_are_split_by_each_decisions_key_count() {
        let one = Decision {
            ops: vec![op("a")],
            mode: CountingMode::AllOrNothing,
        };
        let two = Decision {
            ops: vec![op("a"), op("b")],
            mode: CountingMode::IncrementAll,
        };
        let outcomes = split_reply(&[1, 4, 0, 5, -1], &[&one, &two]).unwrap();
        assert_eq!(
            outcomes,
            vec![
                CounterOutcome {
                    applied: true,
                    before: vec![4]
                },
                CounterOutcome {
                    applied: false,
                    before: vec![5, 0]
                },
            ]
        );
        assert!(split_reply(&[1, 4, 0, 5], &[&one, &two]).is_err());
        assert!(split_reply(&[1, 4, 0, 5, 1, 1], &[&one, &two]).is_err());
    }
}
