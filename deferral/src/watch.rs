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
//! A request no consumer has picked up (no lease ever seen, no claim, no
//! terminal entry) within `unclaimed_after` of its publish is published
//! again, once, and still watched: rocketmq-store 1.0.0 can leave a message
//! out of its LiteTopic's queue when two sends collide on one offset; such a
//! message is never popped, so no lease ever lapses, and without this its
//! client waited for the endpoint's timeout. When the first copy was only
//! queued behind others (a backlog longer than the bound), both copies
//! reach a consumer: the claim lets one call the model, the other finds
//! `done` (skipped) or a live claim (looked at again until it is `done`).
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
    /// When the request was published, and how long it may stay unclaimed
    /// before it is published again (`None`: never).
    published_at: std::time::Instant,
    unclaimed_after: Option<std::time::Duration>,
    /// Published again because nobody picked it up: not a second time.
    unclaimed_republished: bool,
}

/// What a lease look-up asks for next.
#[derive(Debug, PartialEq, Eq)]
enum LeaseStep {
    /// Nothing to do until the next look.
    Wait,
    /// The lease was seen and is gone: judge the claim.
    JudgeLapse,
    /// No lease seen for `unclaimed_after` since the publish: judge whether
    /// anyone ever claimed it.
    JudgeUnclaimed,
}

/// What a judged lapse asks for.
#[derive(Debug, PartialEq, Eq)]
enum LapseStep {
    /// Finished or still running: keep watching.
    Keep,
    /// Lost: publish again (once).
    Republish { call_started: bool },
    /// Never picked up: publish a copy (once) and keep watching.
    RepublishUnclaimed,
}

impl LeaseWatch {
    /// `unclaimed_after`: see [`crate::EndpointOptions::unclaimed_republish_after`].
    pub(super) fn new(
        tenant: String,
        model: String,
        work: Bytes,
        unclaimed_after: Option<std::time::Duration>,
    ) -> Self {
        LeaseWatch {
            tenant,
            model,
            work: Some(work),
            lease_seen: false,
            done: false,
            last_redis_error: None,
            published_at: std::time::Instant::now(),
            unclaimed_after,
            unclaimed_republished: false,
        }
    }

    /// Whether the lease still needs looking at.
    pub(super) fn watching(&self) -> bool {
        !self.done
    }

    /// Pure: the lease is held (`true`) or not, at `now`. A lease not yet
    /// seen is not a lapse (the request may still be queued), but one not
    /// seen `unclaimed_after` past the publish asks whether anyone has it.
    fn on_lease(&mut self, held: bool, now: std::time::Instant) -> LeaseStep {
        if held {
            self.lease_seen = true;
            LeaseStep::Wait
        } else if self.lease_seen {
            LeaseStep::JudgeLapse
        } else if self.unclaimed_due(now) {
            LeaseStep::JudgeUnclaimed
        } else {
            LeaseStep::Wait
        }
    }

    /// Pure: the unclaimed bound has passed and no copy was published yet.
    fn unclaimed_due(&self, now: std::time::Instant) -> bool {
        !self.unclaimed_republished
            && self
                .unclaimed_after
                .is_some_and(|bound| now.saturating_duration_since(self.published_at) >= bound)
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

    /// Pure: a request judged after no lease was seen within the bound.
    /// Neither claimed nor answered: a copy goes out, and the watch goes on
    /// (that copy's consumer can die too). A claim gone stale without a
    /// lease seen is a lapse like any other.
    fn on_unclaimed(&mut self, lapse: Lapse) -> LapseStep {
        match lapse {
            Lapse::Lost {
                call_started: false,
            } => {
                self.unclaimed_republished = true;
                LapseStep::RepublishUnclaimed
            }
            lapse => self.on_lapse(lapse),
        }
    }

    /// One look at `req_id`'s lease (and, when it lapsed or nobody picked
    /// the request up in time, its claim); on a loss, publishes again. A
    /// Redis error is a "look again later"; `redis_failed` is when Redis was
    /// last seen failing elsewhere in this process (the stream hub).
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
        let now = std::time::Instant::now();
        let step = self.on_lease(held, now);
        if step == LeaseStep::Wait || !self.may_judge(now, timing.stale_after(), redis_failed) {
            return;
        }
        let Ok(lapse) = bookkeeping::lapsed_request(redis, req_id, timing).await else {
            self.last_redis_error = Some(std::time::Instant::now());
            return;
        };
        let decision = match step {
            LeaseStep::JudgeUnclaimed => self.on_unclaimed(lapse),
            _ => self.on_lapse(lapse),
        };
        let work = match decision {
            LapseStep::Keep => return,
            LapseStep::Republish { call_started } => {
                metrics.republished.inc();
                tracing::warn!(
                    req_id,
                    call_started,
                    "consumer lease lapsed (its consumer died); publishing again"
                );
                self.work.take()
            }
            LapseStep::RepublishUnclaimed => {
                metrics.republished_unclaimed.inc();
                tracing::warn!(
                    req_id,
                    waited_ms = now.saturating_duration_since(self.published_at).as_millis() as u64,
                    "no consumer picked the request up (the broker may have left it out); publishing a copy"
                );
                self.work.clone()
            }
        };
        let Some(work) = work else {
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

    const UNCLAIMED_AFTER: std::time::Duration = std::time::Duration::from_secs(20);

    fn watch() -> LeaseWatch {
        LeaseWatch::new(
            "acme".into(),
            "gpt".into(),
            Bytes::from_static(b"{}"),
            Some(UNCLAIMED_AFTER),
        )
    }

    /// A moment before the unclaimed bound of `watch`.
    fn early(watch: &LeaseWatch) -> std::time::Instant {
        watch.published_at + UNCLAIMED_AFTER / 2
    }

    fn late(watch: &LeaseWatch) -> std::time::Instant {
        watch.published_at + UNCLAIMED_AFTER
    }

    /// `step` is the one re-publish after a lapse, and the watch is over.
    #[track_caller]
    fn assert_last_republish(watch: &LeaseWatch, step: LapseStep, call_started: bool) {
        assert_eq!(step, LapseStep::Republish { call_started });
        assert!(!watch.watching());
    }

    #[test]
    fn an_unseen_lease_is_not_a_lapse() {
        let mut watch = watch();
        let now = early(&watch);
        assert_eq!(watch.on_lease(false, now), LeaseStep::Wait);
        assert_eq!(watch.on_lease(false, now), LeaseStep::Wait);
        assert!(watch.watching());
    }

    #[test]
    fn a_seen_lease_that_is_gone_is_judged() {
        let mut watch = watch();
        let now = early(&watch);
        assert_eq!(watch.on_lease(true, now), LeaseStep::Wait);
        assert_eq!(watch.on_lease(false, now), LeaseStep::JudgeLapse);
        // Seen once: past the bound it is still a lapse, not "unclaimed".
        assert_eq!(watch.on_lease(false, late(&watch)), LeaseStep::JudgeLapse);
    }

    #[test]
    fn finished_or_running_keeps_watching() {
        let mut watch = watch();
        watch.on_lease(true, early(&watch));
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
        watch.on_lease(true, early(&watch));
        let step = watch.on_lapse(Lapse::Lost { call_started: true });
        assert_last_republish(&watch, step, true);
    }

    #[test]
    fn a_request_nobody_picked_up_within_the_bound_is_judged() {
        let mut watch = watch();
        assert_eq!(watch.on_lease(false, early(&watch)), LeaseStep::Wait);
        assert_eq!(
            watch.on_lease(false, late(&watch)),
            LeaseStep::JudgeUnclaimed
        );
    }

    #[test]
    fn an_unclaimed_request_gets_one_copy_and_stays_watched() {
        let mut watch = watch();
        let late = late(&watch);
        assert_eq!(watch.on_lease(false, late), LeaseStep::JudgeUnclaimed);
        assert_eq!(
            watch.on_unclaimed(Lapse::Lost {
                call_started: false
            }),
            LapseStep::RepublishUnclaimed
        );
        assert!(watch.watching(), "the copy's consumer can die too");
        // No second copy, however long nobody picks it up.
        assert_eq!(
            watch.on_lease(false, late + UNCLAIMED_AFTER * 3),
            LeaseStep::Wait
        );
        // The copy's lease, then its lapse: published again as any lapse.
        assert_eq!(watch.on_lease(true, late), LeaseStep::Wait);
        assert_eq!(watch.on_lease(false, late), LeaseStep::JudgeLapse);
        let step = watch.on_lapse(Lapse::Lost {
            call_started: false,
        });
        assert_last_republish(&watch, step, false);
    }

    #[test]
    fn a_request_someone_has_or_answered_gets_no_copy() {
        let mut watch = watch();
        assert_eq!(watch.on_unclaimed(Lapse::Running), LapseStep::Keep);
        assert_eq!(watch.on_unclaimed(Lapse::Finished), LapseStep::Keep);
        assert_eq!(
            watch.on_lease(false, late(&watch)),
            LeaseStep::JudgeUnclaimed,
            "still due: nothing was published"
        );
        // A claim gone stale with no lease seen: the call died; one
        // re-publish, answered `interrupted`, as after a lapse.
        let step = watch.on_unclaimed(Lapse::Lost { call_started: true });
        assert_last_republish(&watch, step, true);
    }

    #[test]
    fn without_a_bound_an_unseen_lease_is_never_judged() {
        let mut watch = LeaseWatch::new("acme".into(), "gpt".into(), Bytes::new(), None);
        let much_later = watch.published_at + std::time::Duration::from_secs(86_400);
        assert_eq!(watch.on_lease(false, much_later), LeaseStep::Wait);
    }
}
