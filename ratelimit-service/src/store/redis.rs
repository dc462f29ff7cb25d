//! Counters in Redis: one Lua script call decides one decision, or several
//! that arrived together (`coalesce`).

use super::coalesce::Coalescer;
use super::counter::{Batch, CounterOp, CounterOutcome, CounterStore, CountingMode, StoreError};
use super::keys::hash_tag;
use super::script_call::{self, map_error, Connections};
use super::scripts;
use futures::future::BoxFuture;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::histogram::Histogram;
use sluice_redis::{RedisClient, RedisConn, RedisOptions};
use std::sync::Arc;
use std::time::Duration;

/// Connection settings of the Redis store.
#[derive(Clone, Debug)]
pub struct RedisStoreOptions {
    /// Which Redis: standalone, Cluster or Sentinel, credentials, TLS (see
    /// `sluice_redis::address`).
    pub redis: RedisOptions,
    /// Multiplexed connections. Each one pipelines every concurrent decision
    /// sent over it, so a few are enough. (A cluster connection already
    /// holds one connection per node.)
    pub connections: usize,
    /// Upper bound for one decision's round trip; beyond it the decision fails
    /// as unavailable and Envoy's failure mode decides.
    pub timeout: Duration,
    /// Most decisions one script call carries. Above 1, decisions that
    /// arrive while every connection has a call in flight wait for the
    /// next call and share it (standalone and Sentinel; a Redis Cluster
    /// call always carries one decision). 1: a call per decision, pipelined.
    pub max_decisions_per_call: usize,
}

impl Default for RedisStoreOptions {
    fn default() -> Self {
        RedisStoreOptions {
            redis: RedisOptions::default(),
            connections: 4,
            timeout: Duration::from_millis(250),
            max_decisions_per_call: 32,
        }
    }
}

pub struct RedisStore {
    connections: Arc<Connections>,
    script: redis::Script,
    /// Where decisions wait to share a script call; `None` in a Redis
    /// Cluster or with `max_decisions_per_call` 1.
    coalescer: Option<Arc<Coalescer>>,
    timeout: Duration,
    /// Decisions whose counters lie in more than one hash slot (see [`RedisStore::run`]).
    cross_slot: Counter,
    /// Only a cluster refuses scripts over several slots: elsewhere a
    /// decision is one script call, whatever its tags.
    cluster: bool,
    /// The deployment, without credentials, for logs.
    described: String,
}

impl RedisStore {
    /// Builds the store. Connections are opened lazily and re-opened after a
    /// failure, so the service starts (not ready) while Redis is down.
    pub fn new(options: &RedisStoreOptions) -> Result<Self, StoreError> {
        let redis = RedisOptions {
            connect_timeout_ms: duration_ms(options.timeout.max(Duration::from_secs(1))),
            response_timeout_ms: duration_ms(options.timeout),
            ..options.redis.clone()
        };
        // Errors never echo the URL: it may hold a password.
        let client = RedisClient::new(&redis).map_err(|e| StoreError::Failed(e.to_string()))?;
        let count = if client.is_cluster() {
            1
        } else {
            options.connections.max(1)
        };
        let connections = (0..count)
            .map(|_| client.connect())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| StoreError::Failed(e.to_string()))?;
        let connections = Arc::new(Connections::new(connections));
        let script = redis::Script::new(scripts::DECIDE);
        let coalescer = (!client.is_cluster() && options.max_decisions_per_call > 1).then(|| {
            Coalescer::new(
                Arc::clone(&connections),
                script.clone(),
                options.max_decisions_per_call,
                Histogram::new([]),
            )
        });
        Ok(RedisStore {
            connections,
            script,
            coalescer,
            timeout: options.timeout,
            cross_slot: Counter::default(),
            cluster: client.is_cluster(),
            described: format!("{client:?}"),
        })
    }

    /// The Redis deployment (kind and addresses, never credentials).
    pub fn describe(&self) -> &str {
        &self.described
    }

    /// Counts decisions that spanned hash slots into `counter` (a metric).
    pub fn with_cross_slot_counter(mut self, counter: Counter) -> Self {
        self.cross_slot = counter;
        self
    }

    /// Observes the decisions each script call carries into `histogram` (a
    /// metric; with a Redis Cluster or one decision per call, nothing).
    pub fn with_decisions_per_call_histogram(mut self, histogram: Histogram) -> Self {
        self.coalescer = self.coalescer.map(|c| c.observed_into(histogram));
        self
    }

    fn connection(&self) -> RedisConn {
        self.connections.next()
    }

    /// Loads the decision script so the first decision needs no NOSCRIPT retry.
    pub async fn preload(&self) -> Result<(), StoreError> {
        let mut connection = self.connection();
        self.script
            .load_async(&mut connection)
            .await
            .map(|_| ())
            .map_err(map_error)
    }

    /// One decision. Counters of one hash tag are one slot: one script
    /// call decides them atomically. A decision spanning tags (descriptors
    /// that start with different entries) runs the script per tag, in order;
    /// if a later tag refuses under all-or-nothing, the tags already charged
    /// are refunded. That never admits over a limit, but it is not atomic: a
    /// concurrent decision may see the charge before its refund.
    async fn run(
        &self,
        ops: &[CounterOp],
        mode: CountingMode,
    ) -> Result<CounterOutcome, StoreError> {
        if !self.cluster {
            return self.run_group(ops, mode).await;
        }
        let groups = slot_groups(ops);
        if groups.len() <= 1 {
            return self.run_group(ops, mode).await;
        }
        self.cross_slot.inc();
        let mut before = vec![0u64; ops.len()];
        let mut charged: Vec<&[usize]> = Vec::new();
        let mut refused = false;
        for indices in &groups {
            // After a refusal the other groups are only read, for their
            // values: the answer reports every counter, as one store would.
            let group: Vec<CounterOp> = indices
                .iter()
                .map(|&i| CounterOp {
                    hits: if refused { 0 } else { ops[i].hits },
                    ..ops[i].clone()
                })
                .collect();
            let outcome = match self.run_group(&group, mode).await {
                Ok(outcome) => outcome,
                Err(error) => {
                    if !refused {
                        self.refund(ops, &charged, &before).await;
                    }
                    return Err(error);
                }
            };
            for (&i, value) in indices.iter().zip(outcome.before) {
                before[i] = value;
            }
            if refused {
                continue;
            }
            if outcome.applied {
                charged.push(indices);
            } else {
                refused = true;
                self.refund(ops, &charged, &before).await;
            }
        }
        Ok(CounterOutcome {
            applied: !refused,
            before,
        })
    }

    /// Undoes the groups a cross-slot decision charged before a later group
    /// refused (best effort: a failure is logged, the counters expire with
    /// their window). Each op's applied change is known from its `before`
    /// value, so the undo is exact: a charge is taken back, a refund (which
    /// stops at 0) is given back as far as it went.
    async fn refund(&self, ops: &[CounterOp], charged: &[&[usize]], before: &[u64]) {
        for indices in charged {
            let group: Vec<CounterOp> = indices
                .iter()
                .filter_map(|&i| {
                    let applied = ops[i].apply_to(before[i]) as i64 - before[i] as i64;
                    (applied != 0).then(|| CounterOp {
                        hits: -applied,
                        ..ops[i].clone()
                    })
                })
                .collect();
            if let Err(error) = self.run_group(&group, CountingMode::IncrementAll).await {
                tracing::warn!(%error, "could not undo a refused cross-slot decision");
            }
        }
    }

    /// One decision over counters of one slot: in the next shared script
    /// call, or in a call of its own.
    async fn run_group(
        &self,
        ops: &[CounterOp],
        mode: CountingMode,
    ) -> Result<CounterOutcome, StoreError> {
        if ops.is_empty() {
            return Ok(CounterOutcome {
                applied: true,
                before: Vec::new(),
            });
        }
        if let Some(coalescer) = &self.coalescer {
            return coalescer.decide(ops, mode).await;
        }
        script_call::decide(&self.script, &self.connections, &[(ops, mode)])
            .await?
            .pop()
            .ok_or_else(|| StoreError::Failed("decision script returned nothing".into()))
    }
}

/// Op indices grouped by hash tag, in order of first appearance.
fn slot_groups(ops: &[CounterOp]) -> Vec<Vec<usize>> {
    let mut groups: Vec<(&str, Vec<usize>)> = Vec::new();
    for (index, op) in ops.iter().enumerate() {
        let tag = hash_tag(&op.key);
        match groups.iter_mut().find(|(t, _)| *t == tag) {
            Some((_, indices)) => indices.push(index),
            None => groups.push((tag, vec![index])),
        }
    }
    groups.into_iter().map(|(_, indices)| indices).collect()
}

fn duration_ms(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

impl CounterStore for RedisStore {
    fn apply<'a>(&'a self, batch: Batch<'a>) -> BoxFuture<'a, Result<CounterOutcome, StoreError>> {
        Box::pin(self.run(batch.ops, batch.mode))
    }

    fn ping(&self) -> BoxFuture<'_, Result<(), StoreError>> {
        Box::pin(async move {
            let mut connection = self.connection();
            let reply = tokio::time::timeout(
                self.timeout,
                redis::cmd("PING").query_async::<String>(&mut connection),
            )
            .await
            .map_err(|_| StoreError::Unavailable("PING timed out".into()))?
            .map_err(map_error)?;
            if reply == "PONG" {
                Ok(())
            } else {
                Err(StoreError::Failed(format!(
                    "unexpected PING reply {reply:?}"
                )))
            }
        })
    }

    fn kind(&self) -> &'static str {
        "redis"
    }
}

/// The URL with any password replaced by `***`, safe for logs.
pub fn redact_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return "<unparseable url>".into();
    };
    match rest.rsplit_once('@') {
        Some((userinfo, host)) => {
            let user = userinfo.split_once(':').map(|(u, _)| u).unwrap_or("");
            if userinfo.contains(':') || !userinfo.is_empty() {
                format!("{scheme}://{user}:***@{host}")
            } else {
                format!("{scheme}://{host}")
            }
        }
        None => url.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::redact_url;

    #[test]
    fn passwords_are_redacted() {
        assert_eq!(
            redact_url("redis://:s3cret@host:6379/0"),
            "redis://:***@host:6379/0"
        );
        assert_eq!(redact_url("rediss://user:pw@h:1"), "rediss://user:***@h:1");
        assert_eq!(redact_url("redis://h:1"), "redis://h:1");
        assert_eq!(redact_url("nonsense"), "<unparseable url>");
    }
}
