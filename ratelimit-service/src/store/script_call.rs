//! One call of the decision script ([`super::scripts::DECIDE`]): its
//! arguments, its reply, the connection it goes on and how its failures
//! read. Used alike by a decision called alone and by decisions sharing a
//! call (`coalesce`).

use super::counter::{CounterOp, CounterOutcome, CountingMode, StoreError};
use sluice_redis::RedisConn;
use std::sync::atomic::{AtomicUsize, Ordering};

/// One decision as the script takes it: its ops under its mode.
pub(super) type Decision<'a> = (&'a [CounterOp], CountingMode);

/// The store's connections, handed out in turn.
pub(super) struct Connections {
    all: Vec<RedisConn>,
    next: AtomicUsize,
}

impl Connections {
    pub fn new(all: Vec<RedisConn>) -> Self {
        Connections {
            all,
            next: AtomicUsize::new(0),
        }
    }

    pub fn len(&self) -> usize {
        self.all.len()
    }

    pub fn next(&self) -> RedisConn {
        let index = self.next.fetch_add(1, Ordering::Relaxed) % self.all.len();
        self.all[index].clone()
    }
}

/// Decides `decisions` in one script call on the next connection, in order.
/// The connection's response timeout bounds the round trip; no second
/// timer per call.
pub(super) async fn decide(
    script: &redis::Script,
    connections: &Connections,
    decisions: &[Decision<'_>],
) -> Result<Vec<CounterOutcome>, StoreError> {
    let mut invocation = script.prepare_invoke();
    add_decisions(&mut invocation, decisions);
    let mut connection = connections.next();
    let reply: Vec<i64> = invocation
        .invoke_async(&mut connection)
        .await
        .map_err(map_error)?;
    split_reply(&reply, decisions).map_err(StoreError::Failed)
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

/// The script's arguments for `decisions`, in order.
fn add_decisions(invocation: &mut redis::ScriptInvocation<'_>, decisions: &[Decision<'_>]) {
    invocation.arg(decisions.len());
    for (ops, mode) in decisions {
        invocation
            .arg(match mode {
                CountingMode::AllOrNothing => "1",
                CountingMode::IncrementAll => "0",
            })
            .arg(ops.len());
        for op in *ops {
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
fn split_reply(reply: &[i64], decisions: &[Decision<'_>]) -> Result<Vec<CounterOutcome>, String> {
    let expected: usize = decisions.iter().map(|(ops, _)| 1 + ops.len()).sum();
    if reply.len() != expected {
        return Err(format!(
            "decision script returned {} values for {} decisions expecting {expected}",
            reply.len(),
            decisions.len()
        ));
    }
    let mut rest = reply;
    let mut outcomes = Vec::with_capacity(decisions.len());
    for (ops, _) in decisions {
        let (head, tail) = rest.split_at(1 + ops.len());
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
        let one = [op("a")];
        let two = [op("a"), op("b")];
        let decisions = [
            (&one[..], CountingMode::AllOrNothing),
            (&two[..], CountingMode::IncrementAll),
        ];
        let outcomes = split_reply(&[1, 4, 0, 5, -1], &decisions).unwrap();
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
        assert!(split_reply(&[1, 4, 0, 5], &decisions).is_err());
        assert!(split_reply(&[1, 4, 0, 5, 1, 1], &decisions).is_err());
    }
}
