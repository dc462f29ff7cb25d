//! Steps 2 and 3 of the pop loop: may this message start now?

use crate::keys::BucketId;
use crate::limits::{Acquire, InFlightLimits, ModelPermit};
use crate::pacing::{self, PacePlan, Pacer};
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
) -> Result<StartGate, pacing::PacingError> {
    let permit = match limits.try_acquire(&item.model) {
        Acquire::Acquired(permit) => permit,
        Acquire::Busy { retry_after } => return Ok(StartGate::Suspend(retry_after)),
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
