//! The lease/claim watch of a waiting request: a request whose consumer
//! lease was seen and has lapsed was lost — with no claim, between pop and
//! call; with a stale claim, mid-call. Either way it is published again,
//! once: a live consumer then runs it (no claim) or answers `interrupted`
//! (stale claim) — never a second model call.
//!
//! A lapse seen while Redis was recently unreachable is not judged yet: a
//! Redis that restarted (with or without its data) shows every lease as
//! gone, and a claim as stale, until the live consumers' next heartbeat
//! writes them again (they retry every few hundred ms while Redis is away).
//! Publishing such a request again would have a second consumer answer
//! `interrupted` (or, with the claim lost, call the model again).
//!
//! The HTTP handler only asks [`LeaseWatch::watching`] and calls
//! [`LeaseWatch::check`] after `lease_check` of silence; the decisions are
//! pure ([`LeaseWatch::on_lease`], [`LeaseWatch::on_lapse`]) and unit-tested.

use crate::metrics::EndpointMetrics;
use crate::publisher::Publisher;
use axum::body::Bytes;
use sluice_contract::bookkeeping::{self, Lapse};
use sluice_contract::ClaimTiming;

/// What was published, to publish again if a consumer lost it. `work` is
/// the one copy of the work item a waiting request keeps (shared with what
/// was published, counted in the endpoint's byte budget); it is let go once
/// the request was published again.
pub(super) struct LeaseWatch {
    tenant: String,
    model: String,
    work: Option<Bytes>,
    /// A consumer's lease was seen: its absence now means a lapse.
    lease_seen: bool,
    /// Published again (or judged lost): nothing more to watch.
    done: bool,
    /// When a look at Redis last failed.
    last_redis_error: Option<std::time::Instant>,
}

/// What a lease look-up asks for next.
#[derive(Debug, PartialEq, Eq)]
enum LeaseStep {
    /// Nothing to do until the next look.
    Wait,
    /// The lease was seen and is gone: judge the claim.
    JudgeLapse,
}

/// What a judged lapse asks for.
#[derive(Debug, PartialEq, Eq)]
enum LapseStep {
    /// Finished or still running: keep watching.
    Keep,
    /// Lost: publish again (once).
    Republish { call_started: bool },
}

impl LeaseWatch {
    pub(super) fn new(tenant: String, model: String, work: Bytes) -> Self {
        LeaseWatch {
            tenant,
            model,
            work: Some(work),
            lease_seen: false,
            done: false,
            last_redis_error: None,
        }
    }

    /// Whether the lease still needs looking at.
    pub(super) fn watching(&self) -> bool {
        !self.done
    }

    /// Pure: the lease is held (`true`) or not. A lease not yet seen is not
    /// a lapse (the request may still be queued).
    fn on_lease(&mut self, held: bool) -> LeaseStep {
        if held {
            self.lease_seen = true;
            LeaseStep::Wait
        } else if self.lease_seen {
            LeaseStep::JudgeLapse
        } else {
            LeaseStep::Wait
        }
    }

    /// Pure: whether a lapse may be judged now — not while Redis was
    /// unreachable within the last `settle` (the claim timing's stale
    /// bound: time for every live owner to write its lease and claim again),
    /// as this watch saw it or as `elsewhere` (the stream hub's readers) did.
    fn may_judge(
        &self,
        now: std::time::Instant,
        settle: std::time::Duration,
        elsewhere: Option<std::time::Instant>,
    ) -> bool {
        [self.last_redis_error, elsewhere]
            .into_iter()
            .flatten()
            .all(|at| now.saturating_duration_since(at) >= settle)
    }

    /// Pure: a judged lapse. A lost request is published again once; a
    /// live claim is left alone.
    fn on_lapse(&mut self, lapse: Lapse) -> LapseStep {
        match lapse {
            Lapse::Lost { call_started } => {
                self.done = true;
                LapseStep::Republish { call_started }
            }
            Lapse::Finished | Lapse::Running => LapseStep::Keep,
        }
    }

    /// One look at `req_id`'s lease (and, when it lapsed, its claim); on a
    /// loss, publishes again. A Redis error is a "look again later";
    /// `redis_failed` is when Redis was last seen failing elsewhere in this
    /// process (the stream hub).
    pub(super) async fn check(
        &mut self,
        redis: &mut sluice_redis::RedisConn,
        req_id: &str,
        timing: &ClaimTiming,
        publisher: &dyn Publisher,
        metrics: &EndpointMetrics,
        redis_failed: Option<std::time::Instant>,
    ) {
        let Ok(held) = bookkeeping::lease_held(redis, req_id).await else {
            self.last_redis_error = Some(std::time::Instant::now());
            return;
        };
        if self.on_lease(held) != LeaseStep::JudgeLapse
            || !self.may_judge(
                std::time::Instant::now(),
                timing.stale_after(),
                redis_failed,
            )
        {
            return;
        }
        let Ok(lapse) = bookkeeping::lapsed_request(redis, req_id, timing).await else {
            self.last_redis_error = Some(std::time::Instant::now());
            return;
        };
        let LapseStep::Republish { call_started } = self.on_lapse(lapse) else {
            return;
        };
        metrics.republished.inc();
        tracing::warn!(
            req_id,
            call_started,
            "consumer lease lapsed (its consumer died); publishing again"
        );
        let Some(work) = self.work.take() else {
            return;
        };
        let result = publisher
            .publish(&self.tenant, &self.model, req_id, work)
            .await;
        if let Err(why) = result {
            tracing::error!(req_id, %why, "re-publish failed; the client will time out");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn watch() -> LeaseWatch {
        LeaseWatch::new("acme".into(), "gpt".into(), Bytes::from_static(b"{}"))
    }

    #[test]
    fn an_unseen_lease_is_not_a_lapse() {
        let mut watch = watch();
        assert_eq!(watch.on_lease(false), LeaseStep::Wait);
        assert_eq!(watch.on_lease(false), LeaseStep::Wait);
        assert!(watch.watching());
    }

    #[test]
    fn a_seen_lease_that_is_gone_is_judged() {
        let mut watch = watch();
        assert_eq!(watch.on_lease(true), LeaseStep::Wait);
        assert_eq!(watch.on_lease(false), LeaseStep::JudgeLapse);
    }

    #[test]
    fn finished_or_running_keeps_watching() {
        let mut watch = watch();
        watch.on_lease(true);
        assert_eq!(watch.on_lapse(Lapse::Finished), LapseStep::Keep);
        assert_eq!(watch.on_lapse(Lapse::Running), LapseStep::Keep);
        assert!(watch.watching());
    }

    #[test]
    fn no_lapse_is_judged_until_redis_has_been_back_a_while() {
        let mut watch = watch();
        let settle = std::time::Duration::from_secs(3);
        let now = std::time::Instant::now();
        assert!(watch.may_judge(now, settle, None));
        watch.last_redis_error = Some(now);
        assert!(!watch.may_judge(now, settle, None));
        assert!(!watch.may_judge(now + settle / 2, settle, None));
        assert!(watch.may_judge(now + settle, settle, None));
    }

    #[test]
    fn no_lapse_is_judged_right_after_a_failure_the_hub_saw() {
        // This watch never met the outage (it was shorter than its look
        // interval); the hub's readers did.
        let watch = watch();
        let settle = std::time::Duration::from_secs(3);
        let now = std::time::Instant::now();
        assert!(!watch.may_judge(now, settle, Some(now)));
        assert!(watch.may_judge(now + settle, settle, Some(now)));
    }

    #[test]
    fn a_lost_request_is_published_again_once() {
        let mut watch = watch();
        watch.on_lease(true);
        assert_eq!(
            watch.on_lapse(Lapse::Lost { call_started: true }),
            LapseStep::Republish { call_started: true }
        );
        assert!(!watch.watching());
    }
}
