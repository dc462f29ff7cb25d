//! The shared Redis keys as docs/architecture.md's key table shows them:
//! one row per key of [`crate::keys`], with an example built by the key's
//! own function. A test checks every example against its pattern and the
//! table in the docs against these rows, so the docs cannot drift from the
//! code.

use crate::keys;

/// One row of the key table.
pub struct KeyRow {
    /// The key with `<placeholders>`; literal `{…}` are Redis Cluster hash tags.
    pub pattern: &'static str,
    /// Redis type.
    pub kind: &'static str,
    pub written_by: &'static str,
    pub meaning: &'static str,
    /// The key as [`crate::keys`] builds it for example arguments.
    pub example: fn() -> String,
}

impl KeyRow {
    /// The row as a Markdown table line.
    pub fn markdown(&self) -> String {
        format!(
            "| `{}` | {} | {} | {} |",
            self.pattern, self.kind, self.written_by, self.meaning
        )
    }
}

/// Every shared key, in the docs' order.
pub const ROWS: &[KeyRow] = &[
    KeyRow {
        pattern: "sluice:{r<shard>}:response:<id>",
        kind: "stream",
        written_by: "consumer",
        meaning: "the model's answer: `chunk`, then `done` or `error`",
        example: || keys::response("req-1"),
    },
    KeyRow {
        pattern: "sluice:{r<shard>}:owner:<id>",
        kind: "string",
        written_by: "deferral endpoint",
        meaning: "the tenant the request id belongs to, set once at accept (`NX`, 1 day): reuse is refused, resume checks it",
        example: || keys::owner("req-1"),
    },
    KeyRow {
        pattern: "sluice:{r<shard>}:cancel:<id>",
        kind: "string",
        written_by: "deferral endpoint",
        meaning: "the client went away (expires after 300 s)",
        example: || keys::cancel("req-1"),
    },
    KeyRow {
        pattern: "sluice:{r<shard>}:resumed:<id>",
        kind: "string (counter)",
        written_by: "deferral endpoint",
        meaning: "resumes of the request's stream; a lost connection cancels the call only if none came within the cancel grace (expires with `cancel`)",
        example: || keys::resumed("req-1"),
    },
    KeyRow {
        pattern: "sluice:{r<shard>}:done:<id>",
        kind: "string",
        written_by: "consumer",
        meaning: "a terminal entry exists (kept 1 day): a redelivery does not call the model again",
        example: || keys::done("req-1"),
    },
    KeyRow {
        pattern: "sluice:{r<shard>}:processing:<id>",
        kind: "string",
        written_by: "consumer",
        meaning: "`<consumer-id>/<attempt> <heartbeat-ms>` while the call runs; the endpoint counts it dead after the consumer's `lease_ms` + `heartbeat_interval_ms` (3 s by default)",
        example: || keys::processing("req-1"),
    },
    KeyRow {
        pattern: "sluice:{r<shard>}:lease:<id>",
        kind: "string",
        written_by: "consumer",
        meaning: "popped but maybe not started; refreshed every `heartbeat_interval_ms` (1 s), lapses after `lease_ms` + `heartbeat_interval_ms` (3 s) without refresh",
        example: || keys::lease("req-1"),
    },
    KeyRow {
        pattern: "sluice:{r<shard>}:wake:<instance>",
        kind: "stream",
        written_by: "deferral endpoint",
        meaning: "wakes a blocked `XREAD` of that shard when a new request registers",
        example: || keys::wake(3, "rls-a"),
    },
    KeyRow {
        pattern: "sluice:{buckets}",
        kind: "set",
        written_by: "every publish (deferral endpoint, consumer re-publishes)",
        meaning: "active LiteTopics (each consumer subscribes to its share)",
        example: || keys::BUCKETS.to_string(),
    },
    KeyRow {
        pattern: "sluice:{buckets}:activity",
        kind: "sorted set",
        written_by: "deferral endpoint, consumer re-publishes",
        meaning: "LiteTopic → last publish (ms); idle buckets are retired from it",
        example: || keys::ACTIVITY.to_string(),
    },
    KeyRow {
        pattern: "sluice:{buckets}:consumers",
        kind: "sorted set",
        written_by: "consumer",
        meaning: "instance id → last heartbeat (ms): the live members of the group",
        example: || keys::CONSUMERS.to_string(),
    },
    KeyRow {
        pattern: "sluice:{buckets}:subscribed:<topic>",
        kind: "string",
        written_by: "consumer",
        meaning: "a consumer subscribed to this LiteTopic (dropped when the bucket is retired)",
        example: || keys::subscribed("t1_gpt-4o"),
    },
    KeyRow {
        pattern: "sluice:{buckets}:backlog:<topic>",
        kind: "string (counter)",
        written_by: "every publish (+1, expires 1 day after the last), consumer (−1 at pop)",
        meaning: "queue depth estimate; low priority fails fast on it",
        example: || keys::backlog("t1_gpt-4o"),
    },
    KeyRow {
        pattern: "sluice:{buckets}:low_pending:<topic>",
        kind: "sorted set",
        written_by: "deferral endpoint",
        meaning: "low-priority requests between their backlog check and their publish, counted with the backlog so concurrent checks never pass the cap",
        example: || keys::low_pending("t1_gpt-4o"),
    },
    KeyRow {
        pattern: "sluice:{buckets}:owners",
        kind: "hash",
        written_by: "every publish that (re-)creates a bucket (caps script), consumer retire script",
        meaning: "LiteTopic → its tenant, to give the tenant's slot back on retirement",
        example: || keys::BUCKET_TENANTS.to_string(),
    },
    KeyRow {
        pattern: "sluice:{buckets}:per-tenant",
        kind: "hash",
        written_by: "same",
        meaning: "tenant → buckets it holds (the per-tenant cap)",
        example: || keys::TENANT_BUCKET_COUNTS.to_string(),
    },
    KeyRow {
        pattern: "sluice:{buckets}:created:<minute>",
        kind: "string (counter)",
        written_by: "every publish that (re-)creates a bucket",
        meaning: "new buckets in one clock minute (the rate cap; expires after 120 s)",
        example: || keys::created_in_minute(29_000_000),
    },
    KeyRow {
        pattern: "sluice:{buckets}:reclaiming:<topic>",
        kind: "string",
        written_by: "consumer",
        meaning: "its queue is being deleted at the broker; the endpoint waits (≤ 10 s)",
        example: || keys::reclaiming("t1_gpt-4o"),
    },
    KeyRow {
        pattern: "sluice:deferred_bytes:{<tenant>}:<minute>",
        kind: "string (counter)",
        written_by: "deferral endpoint",
        meaning: "body bytes the tenant published to the broker in one clock minute (the per-tenant byte quota)",
        example: || keys::deferred_bytes("acme", 29_000_000),
    },
    KeyRow {
        pattern: "sluice:{ctl:<model>}",
        kind: "hash",
        written_by: "consumer (controller, admin API)",
        meaning: "a model's adaptive concurrency limit, its operator override, the overload answers since the last step, each live instance's own calls in flight (`in_flight:<instance>`, summed to tell its calls from foreign load at the server) and whether the server is saturated (`saturated`, `saturated_at_ms`: for saturation-aware admission)",
        example: || keys::controller("gpt-4o"),
    },
    KeyRow {
        pattern: "sluice:{ctl:<model>}:lease",
        kind: "string",
        written_by: "consumer",
        meaning: "which instance steps the model's controller this interval (`SET NX PX`)",
        example: || keys::controller_lease("gpt-4o"),
    },
    KeyRow {
        pattern: "sluice:{fair}:weights",
        kind: "hash",
        written_by: "consumer admin API",
        meaning: "tenant → fair-share weight, read by every consumer instance",
        example: || keys::FAIR_WEIGHTS.to_string(),
    },
];

/// Whether `key` is an instance of `pattern`: literal text must match, and
/// each `<placeholder>` stands for one or more characters other than `:`,
/// `{` and `}`.
pub fn matches(pattern: &str, key: &str) -> bool {
    match pattern.find('<') {
        None => pattern == key,
        Some(open) => {
            let Some(close) = pattern[open..].find('>').map(|c| open + c) else {
                return false;
            };
            let (literal, rest) = (&pattern[..open], &pattern[close + 1..]);
            let Some(tail) = key.strip_prefix(literal) else {
                return false;
            };
            let taken = tail
                .char_indices()
                .find(|(_, c)| matches!(c, ':' | '{' | '}'))
                .map_or(tail.len(), |(i, _)| i);
            // A placeholder takes a whole component: what follows it in the
            // pattern must follow it in the key.
            taken > 0 && matches(rest, &tail[taken..])
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_example_is_an_instance_of_its_pattern() {
        for row in ROWS {
            let key = (row.example)();
            assert!(matches(row.pattern, &key), "{} vs {key}", row.pattern);
        }
    }

    #[test]
    fn a_pattern_refuses_other_keys() {
        assert!(matches(
            "sluice:{r<shard>}:lease:<id>",
            "sluice:{r3}:lease:a"
        ));
        assert!(!matches(
            "sluice:{r<shard>}:lease:<id>",
            "sluice:{r3}:done:a"
        ));
        assert!(!matches(
            "sluice:{r<shard>}:lease:<id>",
            "sluice:{r}:lease:a"
        ));
        assert!(!matches("sluice:{buckets}", "sluice:{buckets}:x"));
    }

    #[test]
    fn patterns_are_distinct() {
        let mut seen = std::collections::HashSet::new();
        for row in ROWS {
            assert!(seen.insert(row.pattern), "{} twice", row.pattern);
        }
    }
}
