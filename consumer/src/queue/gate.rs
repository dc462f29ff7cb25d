//! Steps 2 and 3 of the pop loop: may this message start now?

use crate::keys::BucketId;
use crate::pacing::limits::{Acquire, InFlightLimits, ModelPermit};
use crate::pacing::pacer::{self, PaceDecision, PacePlan, Pacer};
use crate::sharing::fair::Ticketed;
use sluice_contract::WorkItem;
use std::time::Duration;

/// What the pop loop does with a message before processing it (see [`gate`]).
#[derive(Debug)]
pub enum StartGate {
    /// Run now, holding the permit for the whole call.
    Run(ModelPermit),
    /// The bucket's next slot is closer than the suspend floor: wait this
    /// long in the message's own task (never in the pop loop), then call
    /// [`gate`] again.
    WaitLocally(Duration),
    /// Suspend the LiteTopic this long and move on.
    Suspend(Duration),
    /// The model is at its in-flight cap (the pace was not looked at): hold
    /// the message until one of the model's slots frees
    /// ([`crate::pacing::limits::Slots::turn`]), or this long at most.
    Busy(Duration),
}

/// Steps 2 and 3 of the pop loop: the model's in-flight cap first (local, so
/// a paced slot is never taken by a message that then cannot run), then the
/// bucket's pacing (one Redis round trip). `suspend_floor`: the broker's
/// suspend granularity (about 30 ms). A pacing error is returned as is: the
/// caller suspends briefly and tries again.
pub async fn gate(
    limits: &InFlightLimits,
    pacer: &Pacer,
    item: &WorkItem,
    suspend_floor: Duration,
) -> Result<StartGate, pacer::PacingError> {
    let permit = match limits.try_acquire(&item.model) {
        Acquire::Acquired(permit) => permit,
        Acquire::Busy { retry_after } => return Ok(StartGate::Busy(retry_after)),
    };
    let decision = pacer
        .check(
            &BucketId::new(&item.tenant, &item.model),
            item.estimated_tokens,
            None,
        )
        .await?;
    Ok(match decision.plan(suspend_floor) {
        PacePlan::Run => StartGate::Run(permit),
        PacePlan::WaitLocally(wait) => StartGate::WaitLocally(wait),
        PacePlan::Suspend(wait) => StartGate::Suspend(wait),
    })
}

/// Answer of [`fair_turn`].
#[derive(Debug)]
pub enum FairTurn {
    /// Run now, holding the permit for the whole call; the ticket must be
    /// marked started.
    Run(ModelPermit),
    /// Not this message's turn (another is first in the fair order, the
    /// model is at its cap, or its bucket is paced): look again when the
    /// queue changes, a slot frees, or after this long.
    Wait(Duration),
}

/// [`gate`] for a fair-shared model: the message may take a slot only when
/// the fair order ([`crate::sharing::fair`]) names it; then the bucket's pacing is
/// checked as in [`gate`] (the rates stay ceilings). A paced message is set
/// aside until its slot, so the others go on meanwhile.
pub async fn fair_turn(
    limits: &InFlightLimits,
    pacer: &Pacer,
    item: &WorkItem,
    ticket: &Ticketed,
) -> FairTurn {
    if !ticket.is_next(crate::now_ms()) {
        return FairTurn::Wait(limits.busy_retry());
    }
    let permit = match limits.try_acquire(&item.model) {
        Acquire::Acquired(permit) => permit,
        Acquire::Busy { retry_after } => return FairTurn::Wait(retry_after),
    };
    let bucket = BucketId::new(&item.tenant, &item.model);
    let wait = match pacer.check(&bucket, item.estimated_tokens, None).await {
        Ok(PaceDecision::Admit) => return FairTurn::Run(permit),
        Ok(PaceDecision::Wait { wait, .. }) => wait,
        Err(error) => {
            tracing::warn!(%error, req_id = %item.req_id, "pacing unavailable; holding the message");
            PACING_DOWN_RETRY
        }
    };
    drop(permit);
    ticket.defer(crate::now_ms() + wait.as_millis() as u64);
    FairTurn::Wait(wait)
}

/// How long a message waits when pacing cannot be checked.
const PACING_DOWN_RETRY: Duration = Duration::from_millis(200);
