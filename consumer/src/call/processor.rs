//! One work item from claim to terminal entry: idempotency, the streaming
//! model call, the response stream.

use crate::call::idempotency::{Claim, Idempotency, IdempotencyConfig, Lease};
use crate::call::invoke::{
    BackendConfig, CallEnd, CallStats, ConfigError, FailureKind, Invoker, Sink,
};
use crate::call::sent::OnSent;
use crate::call::stream::{ErrorCode, StreamConfig, Terminal};
use crate::call::OutputObserver;
use crate::keys;
use crate::metrics::Metrics;
use serde::{Deserialize, Serialize};
use sluice_contract::{local, now_ms, WorkItem};
use sluice_redis::RedisConn;
use std::sync::Arc;
use std::time::Duration;
use tracing::{debug, info, warn, Instrument};

/// How the pop loop settles a message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Disposition {
    /// Ack: the request reached a terminal state (or never will be answerable).
    Ack,
    /// Do not ack: the request must run again, after `after` if given.
    Retry { after: Option<Duration> },
}

/// Result of [`Processor::process`].
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    /// `done` written.
    Completed {
        chunks: u64,
        usage: Option<serde_json::Value>,
        /// Without usage: the output tokens counted from the stream.
        output_tokens: Option<u64>,
        /// Time to the first token, ms (`None`: the answer had none).
        first_token_ms: Option<u64>,
    },
    /// `error` written (a backend business error, or a failure after output
    /// started). No retry.
    Failed {
        status: u16,
        code: ErrorCode,
        kind: FailureKind,
        chunks: u64,
    },
    /// The client went away; `error` (cancelled) written, the call aborted or
    /// never made.
    Cancelled { chunks: u64 },
    /// A terminal entry existed already (redelivery after success).
    AlreadyDone,
    /// A redelivery of a call that died mid-way: `error` (interrupted)
    /// written, the model not called.
    Interrupted,
    /// Another live attempt holds the request: look again later (it will
    /// write the terminal entry).
    InProgressElsewhere,
    /// Another attempt judged this one dead and answered the request;
    /// this attempt wrote nothing terminal.
    LostOwnership,
    /// Infrastructure failure, no terminal entry written: run again later.
    RetryLater {
        kind: FailureKind,
        retry_after: Option<Duration>,
        detail: String,
    },
    /// The work item cannot be answered at all (no valid request id).
    Rejected { reason: String },
    /// Published longer ago than `max_work_item_age_secs`: acknowledged
    /// without a call (no client waits that long; its `done` marker may be
    /// gone).
    Expired { age_ms: u64 },
}

impl Outcome {
    /// Run again at the runner's own pace (no Retry-After): `kind` failed,
    /// `detail` says how.
    pub(crate) fn retry_later(kind: FailureKind, detail: impl Into<String>) -> Outcome {
        Outcome::RetryLater {
            kind,
            retry_after: None,
            detail: detail.into(),
        }
    }

    pub fn disposition(&self, idempotency: &IdempotencyConfig) -> Disposition {
        match self {
            Outcome::RetryLater { retry_after, .. } => Disposition::Retry {
                after: *retry_after,
            },
            Outcome::InProgressElsewhere => Disposition::Retry {
                after: Some(Duration::from_millis(idempotency.lease_ms)),
            },
            _ => Disposition::Ack,
        }
    }

    /// The error code and message written when a request that keeps ending
    /// this way is given up after its last attempt: the model backend's
    /// failures name the backend, Redis's name Sluice's store (a claim no
    /// replica took, a store that stayed down), not the backend.
    pub fn give_up_reason(&self) -> (ErrorCode, String) {
        match self {
            Outcome::RetryLater {
                kind: FailureKind::Redis,
                detail,
                ..
            } => (
                ErrorCode::StoreUnavailable,
                format!("Sluice's store (Redis) stayed unavailable ({detail}); gave up"),
            ),
            Outcome::RetryLater { detail, .. } => (
                ErrorCode::BackendUnreachable,
                format!("the model backend stayed unavailable ({detail}); gave up"),
            ),
            _ => (
                ErrorCode::BackendUnreachable,
                "another attempt held the request until the attempts ran out; gave up".into(),
            ),
        }
    }

    /// How long a request that must run again (after its `attempt`th try)
    /// waits first, when the outcome names no time: Redis's failures back off
    /// (1, 2, 4, 8 s: the five default attempts span the ~15 s a Sentinel
    /// failover takes to give the new master a replica again, which
    /// `claim_replicas` waits for; measured with `chaos --sentinel`), the
    /// backend's are tried again each second.
    pub fn retry_delay(&self, attempt: u32) -> Duration {
        match self {
            Outcome::RetryLater {
                kind: FailureKind::Redis,
                ..
            } => Duration::from_secs(1 << attempt.saturating_sub(1).min(3)),
            _ => Duration::from_secs(1),
        }
    }

    /// Metric label.
    pub fn as_str(&self) -> &'static str {
        match self {
            Outcome::Completed { .. } => "completed",
            Outcome::Failed { .. } => "failed",
            Outcome::Cancelled { .. } => "cancelled",
            Outcome::AlreadyDone => "already_done",
            Outcome::Interrupted => "interrupted",
            Outcome::InProgressElsewhere => "in_progress_elsewhere",
            Outcome::LostOwnership => "lost_ownership",
            Outcome::RetryLater { .. } => "retry_later",
            Outcome::Rejected { .. } => "rejected",
            Outcome::Expired { .. } => "expired",
        }
    }
}

/// Configuration of [`Processor`].
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ProcessorConfig {
    pub backend: BackendConfig,
    pub stream: StreamConfig,
    pub idempotency: IdempotencyConfig,
}

/// Processes work items: idempotency, the streaming call, the response stream.
pub struct Processor {
    conn: RedisConn,
    /// Where claims are made and `WAIT`ed for (`conn` unless
    /// [`Self::with_claim_connection`]).
    claim_conn: RedisConn,
    invoker: Invoker,
    idempotency: Idempotency,
    stream: StreamConfig,
    metrics: Arc<Metrics>,
    /// In-process mode: chunks for clients waiting in this process.
    local: Option<Arc<local::LocalBus>>,
}

/// How one call runs, beyond its item.
#[derive(Debug, Default)]
pub struct CallOptions {
    /// Raises the call's `priority` above the backend's `server_priority`
    /// (its tenant's service level, `fair.server_priority_levels`).
    pub level: u32,
    /// Fires when the model call's request is being written, or is dropped
    /// when none goes out.
    pub on_sent: OnSent,
    /// Told of the output as it streams.
    pub observer: Option<Arc<dyn OutputObserver>>,
}

impl Processor {
    /// `consumer_id`: unique per process (e.g. pod name + pid).
    pub fn new(
        conn: RedisConn,
        consumer_id: &str,
        config: ProcessorConfig,
        metrics: Arc<Metrics>,
    ) -> Result<Self, ConfigError> {
        let idempotency =
            Idempotency::new(consumer_id, config.idempotency).map_err(ConfigError::Invalid)?;
        Ok(Processor {
            claim_conn: conn.clone(),
            conn,
            invoker: Invoker::new(config.backend)?,
            idempotency,
            stream: config.stream,
            metrics,
            local: None,
        })
    }

    /// Claims on a connection of their own: with `claim_replicas`, a claim
    /// waits (`WAIT`) for replicas, and Redis holds every later command of
    /// that connection meanwhile.
    pub fn with_claim_connection(mut self, conn: RedisConn) -> Self {
        self.claim_conn = conn;
        self
    }

    /// Whether claims wait for replicas (and so want their own connection).
    pub fn claims_wait_for_replicas(&self) -> bool {
        self.idempotency.config().claim_replicas > 0
    }

    /// In-process mode: chunks of requests whose client waits in this
    /// process go through `bus` instead of the Redis Stream (see [`local`]).
    pub fn with_local_bus(mut self, bus: Arc<local::LocalBus>) -> Self {
        self.local = Some(bus);
        self
    }

    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    pub fn idempotency_config(&self) -> &IdempotencyConfig {
        self.idempotency.config()
    }

    /// How old `item` is when past the redelivery horizon
    /// (`max_work_item_age_secs`); `None` while it may run. Items without a
    /// publish time (`enqueued_at_ms` 0) are never expired.
    fn expired_age_ms(&self, item: &WorkItem, now_ms: u64) -> Option<u64> {
        let max_age_ms = self
            .idempotency
            .config()
            .max_work_item_age_secs
            .saturating_mul(1000);
        let age_ms = item.queued_ms(now_ms);
        (item.enqueued_at_ms > 0 && age_ms > max_age_ms).then_some(age_ms)
    }

    /// Loads the Lua scripts.
    pub async fn preload(&self) -> Result<(), redis::RedisError> {
        let mut conn = self.conn.clone();
        self.idempotency.preload(&mut conn).await
    }

    /// Processes one work item from claim to terminal entry. Never panics on
    /// network failures; every path ends in an [`Outcome`]. Dropping the
    /// future aborts the backend call (the claim then goes stale and a
    /// redelivery writes `interrupted`).
    pub async fn process(&self, item: &WorkItem) -> Outcome {
        self.process_with(item, CallOptions::default()).await
    }

    /// [`Processor::process`] with `options` (see [`CallOptions`]).
    pub async fn process_with(&self, item: &WorkItem, options: CallOptions) -> Outcome {
        let outcome = self.process_inner(item, options).await;
        self.metrics.outcome(outcome.as_str());
        match &outcome {
            Outcome::RetryLater { kind, detail, .. } => {
                self.metrics.error(kind.as_str());
                warn!(req_id = %item.req_id, kind = kind.as_str(), %detail, "retry later");
            }
            Outcome::Failed {
                kind,
                status,
                code,
                chunks,
            } => {
                self.metrics.error(kind.as_str());
                info!(req_id = %item.req_id, kind = kind.as_str(), status, code = code.as_str(), chunks, "failed");
            }
            Outcome::Cancelled { chunks } => {
                self.metrics.cancels.inc();
                info!(req_id = %item.req_id, chunks, "cancelled");
            }
            other => debug!(req_id = %item.req_id, outcome = other.as_str(), "processed"),
        }
        outcome
    }

    /// Answers, without pacing and without a model call, a request that
    /// needs none: done already, cancelled, or its earlier attempt died
    /// mid-call (`interrupted`). `None`: it must go through pacing and
    /// [`Processor::process`] (free, alive elsewhere, or Redis unreachable).
    pub async fn settle_without_call(&self, item: &WorkItem) -> Option<Outcome> {
        item.validate().ok()?;
        let mut conn = self.conn.clone();
        let claim = self
            .idempotency
            .settle(&mut conn, &item.req_id, &self.stream)
            .await
            .ok()??;
        let outcome = match claim {
            Claim::AlreadyDone(_) => Outcome::AlreadyDone,
            Claim::Cancelled => Outcome::Cancelled { chunks: 0 },
            Claim::Interrupted { previous_owner, .. } => {
                warn!(req_id = %item.req_id, %previous_owner, "earlier attempt interrupted; answered with an error");
                Outcome::Interrupted
            }
            Claim::InProgressElsewhere { .. } | Claim::Proceed(_) => return None,
        };
        self.metrics.outcome(outcome.as_str());
        debug!(req_id = %item.req_id, outcome = outcome.as_str(), "settled without a call");
        Some(outcome)
    }

    async fn process_inner(&self, item: &WorkItem, options: CallOptions) -> Outcome {
        let CallOptions {
            level,
            on_sent,
            observer,
        } = options;
        let claimed = self
            .claim(item)
            .instrument(sluice_contract::trace_span!("consumer.claim"))
            .await;
        let lease = match claimed {
            Ok(lease) => lease,
            Err(answered) => return answered,
        };
        if item.enqueued_at_ms > 0 {
            let waited = item.queued_ms(now_ms());
            self.metrics
                .queue_wait_seconds
                .get_or_create(&self.metrics.model_label(&item.model))
                .observe(waited as f64 / 1000.0);
        }
        let stats = CallStats::new(observer);
        let end = self.call(item, level, on_sent, &lease, &stats).await;
        let mut conn = self.conn.clone();
        let (terminal, outcome) = match ending(end, &stats) {
            Ok(ending) => ending,
            Err(CallEnd::RetryLater {
                kind,
                retry_after,
                detail,
            }) if stats.chunks() > 0 => {
                // Output was written: the model is not called again. The
                // claim goes stale and the next delivery answers
                // `interrupted`.
                warn!(req_id = %item.req_id, %detail, "call stopped after output; not released");
                return Outcome::RetryLater {
                    kind,
                    retry_after,
                    detail,
                };
            }
            Err(CallEnd::RetryLater {
                kind,
                retry_after,
                detail,
            }) => {
                // Let the next delivery claim the request. If Redis is down
                // this fails; the claim then goes stale (see idempotency.rs).
                let release = tokio::time::timeout(
                    Duration::from_secs(2),
                    self.idempotency.release(&mut conn, &lease),
                )
                .await;
                if !matches!(release, Ok(Ok(_))) {
                    warn!(req_id = %item.req_id, "could not release the claim");
                }
                return Outcome::RetryLater {
                    kind,
                    retry_after,
                    detail,
                };
            }
            Err(_) => return Outcome::LostOwnership,
        };
        // Sent again while Redis is away; a finish that ran but lost its
        // reply reads as "not written" (`done` exists): lost ownership.
        let finished = sluice_redis::retry::ride_out(self.outage_grace(), || {
            let mut conn = self.conn.clone();
            let (lease, terminal) = (&lease, &terminal);
            async move {
                self.idempotency
                    .finish(&mut conn, lease, terminal, &self.stream)
                    .await
            }
        })
        .await;
        match finished {
            Ok(true) => outcome,
            Ok(false) => Outcome::LostOwnership,
            Err(error) => redis_failure("writing the terminal entry", &error),
        }
    }

    /// The request's lease, or the answer without a call (invalid,
    /// expired, done, cancelled, running elsewhere, interrupted, or Redis
    /// unreachable).
    async fn claim(&self, item: &WorkItem) -> Result<Lease, Outcome> {
        if let Err(error) = item.validate() {
            return Err(Outcome::Rejected {
                reason: error.to_string(),
            });
        }
        if let Some(age_ms) = self.expired_age_ms(item, now_ms()) {
            warn!(req_id = %item.req_id, age_ms, "work item older than max_work_item_age_secs; acknowledged without a call");
            return Err(Outcome::Expired { age_ms });
        }
        // The same owner when sent again: a claim whose reply was lost with
        // the connection is found as this attempt's own.
        let owner = self.idempotency.new_owner();
        let claim = sluice_redis::retry::ride_out(self.outage_grace(), || {
            let mut conn = self.claim_conn.clone();
            let owner = &owner;
            async move {
                self.idempotency
                    .claim(&mut conn, &item.req_id, owner, &self.stream)
                    .await
            }
        })
        .await
        .map_err(|error| redis_failure("claim", &error))?;
        match claim {
            Claim::Proceed(lease) => self.replicate_claim(item, lease).await,
            Claim::AlreadyDone(_) => Err(Outcome::AlreadyDone),
            Claim::Cancelled => Err(Outcome::Cancelled { chunks: 0 }),
            Claim::InProgressElsewhere { .. } => Err(Outcome::InProgressElsewhere),
            Claim::Interrupted { previous_owner, .. } => {
                warn!(req_id = %item.req_id, %previous_owner, "earlier attempt interrupted; answered with an error");
                Err(Outcome::Interrupted)
            }
        }
    }

    /// With `claim_replicas`: the lease once that many replicas hold the
    /// claim; else the claim given back and the request tried later.
    async fn replicate_claim(&self, item: &WorkItem, lease: Lease) -> Result<Lease, Outcome> {
        let config = self.idempotency.config();
        if config.claim_replicas == 0 {
            return Ok(lease);
        }
        let mut conn = self.claim_conn.clone();
        let acknowledged: Result<u32, _> = redis::cmd("WAIT")
            .arg(config.claim_replicas)
            .arg(config.claim_replicas_timeout_ms)
            .query_async(&mut conn)
            .await;
        let detail = match acknowledged {
            Ok(n) if n >= config.claim_replicas => return Ok(lease),
            Ok(n) => format!(
                "the claim reached {n} of {} replicas in {} ms",
                config.claim_replicas, config.claim_replicas_timeout_ms
            ),
            Err(error) => format!("waiting for replicas of the claim: {error}"),
        };
        self.metrics.claims_unreplicated.inc();
        warn!(req_id = %item.req_id, %detail, "claim not replicated; given back, tried later");
        if !matches!(self.idempotency.release(&mut conn, &lease).await, Ok(true)) {
            warn!(req_id = %item.req_id, "could not give the claim back; it goes stale");
        }
        Err(Outcome::retry_later(FailureKind::Redis, detail))
    }

    /// The model call, its chunks written as they come, while the lease is
    /// kept alive.
    async fn call(
        &self,
        item: &WorkItem,
        level: u32,
        on_sent: OnSent,
        lease: &Lease,
        stats: &CallStats,
    ) -> CallEnd {
        let mut sink = Sink {
            conn: self.conn.clone(),
            config: &self.stream,
            response_key: keys::response(&item.req_id),
            cancel_key: keys::cancel(&item.req_id),
            claimed_at_ms: lease.claimed_at_ms,
            outage_grace: self.outage_grace(),
            stats,
            metrics: &self.metrics,
            local: self.local.as_ref().and_then(|bus| bus.sender(&item.req_id)),
        };
        // Whichever ends first wins; the other future is dropped, which
        // for the call closes the backend connection.
        tokio::select! {
            end = self.invoker.stream_call(item, level, on_sent, &mut sink) => end,
            end = self.heartbeat_loop(lease) => end,
        }
    }

    fn outage_grace(&self) -> Duration {
        self.idempotency.config().redis_outage_grace()
    }

    /// Refreshes the claim every heartbeat interval; returns only when the
    /// call must stop (cancel, lost ownership, Redis unreachable for longer
    /// than the outage grace). While Redis is away the heartbeat is tried
    /// again every few hundred ms, so the claim is fresh again within
    /// moments of Redis being back (and written again if Redis lost it).
    async fn heartbeat_loop(&self, lease: &Lease) -> CallEnd {
        let period = Duration::from_millis(self.idempotency.config().heartbeat_interval_ms);
        let mut ticker = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticker.tick().await;
            let beat = sluice_redis::retry::ride_out(self.outage_grace(), || {
                let mut conn = self.conn.clone();
                async move { self.idempotency.heartbeat(&mut conn, lease).await }
            })
            .await;
            match beat {
                Ok(beat) if !beat.owned => return CallEnd::LostOwnership,
                Ok(beat) if beat.cancelled => return CallEnd::Cancelled,
                Ok(_) => {}
                Err(error) => {
                    return CallEnd::RetryLater {
                        kind: FailureKind::Redis,
                        retry_after: None,
                        detail: format!("heartbeat: {error}"),
                    }
                }
            }
        }
    }

    /// Ends a request the pop loop gives up on (e.g. the backend stayed
    /// unreachable for too many attempts): writes `error` unless a terminal
    /// entry exists or a live attempt holds the request. `Ok(false)`: not written.
    pub async fn give_up(
        &self,
        req_id: &str,
        status: u16,
        code: ErrorCode,
        message: &str,
    ) -> Result<bool, redis::RedisError> {
        let mut conn = self.conn.clone();
        let terminal = Terminal::Error {
            status,
            code,
            message: message.to_string(),
        };
        self.idempotency
            .give_up(&mut conn, req_id, &terminal, &self.stream)
            .await
    }
}

/// The terminal entry and the outcome of a call that ended for good;
/// `Err`: it did not (lost ownership, or to be run again later).
fn ending(end: CallEnd, stats: &CallStats) -> Result<(Terminal, Outcome), CallEnd> {
    let chunks = stats.chunks();
    match end {
        CallEnd::Completed {
            usage,
            output_tokens,
        } => {
            let value = usage.as_deref().and_then(|u| serde_json::from_str(u).ok());
            Ok((
                Terminal::Done { usage },
                Outcome::Completed {
                    chunks,
                    usage: value,
                    output_tokens,
                    first_token_ms: stats.first_token_ms(),
                },
            ))
        }
        CallEnd::Failed {
            status,
            code,
            message,
            kind,
        } => Ok((
            Terminal::Error {
                status,
                code,
                message,
            },
            Outcome::Failed {
                status,
                code,
                kind,
                chunks,
            },
        )),
        CallEnd::Cancelled => Ok((
            Terminal::Error {
                status: 499,
                code: ErrorCode::Cancelled,
                message: "the client went away; the model call was aborted".into(),
            },
            Outcome::Cancelled { chunks },
        )),
        CallEnd::LostOwnership | CallEnd::RetryLater { .. } => Err(end),
    }
}

fn redis_failure(what: &str, error: &redis::RedisError) -> Outcome {
    Outcome::retry_later(FailureKind::Redis, format!("{what}: {error}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const UNREPLICATED: &str = "the claim reached 0 of 1 replicas in 100 ms";

    #[test]
    fn a_request_given_up_names_what_failed() {
        let (code, message) =
            Outcome::retry_later(FailureKind::Redis, UNREPLICATED).give_up_reason();
        assert_eq!(code.as_str(), "store_unavailable");
        assert!(message.contains("0 of 1 replicas"), "{message}");
        let (code, message) =
            Outcome::retry_later(FailureKind::Unreachable, UNREPLICATED).give_up_reason();
        assert_eq!(code.as_str(), "backend_unreachable");
        assert!(message.contains("model backend"), "{message}");
        let (code, _) = Outcome::InProgressElsewhere.give_up_reason();
        assert_eq!(code.as_str(), "backend_unreachable");
    }

    #[test]
    fn redis_failures_back_off_and_backend_failures_do_not() {
        let redis: Vec<u64> = (1..=6)
            .map(|attempt| {
                Outcome::retry_later(FailureKind::Redis, "")
                    .retry_delay(attempt)
                    .as_secs()
            })
            .collect();
        assert_eq!(redis, [1, 2, 4, 8, 8, 8]);
        let backend = Outcome::retry_later(FailureKind::Unreachable, "").retry_delay(4);
        assert_eq!(backend, Duration::from_secs(1));
    }
}
