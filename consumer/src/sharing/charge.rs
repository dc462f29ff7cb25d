//! What one call is charged to its tenant's attained service (the fair
//! queue ordered by attained service, [`super::fair::Order::AttainedService`]).
//!
//! VTC's counters work when they follow the service as the server gives
//! it: the prompt when the call starts, each output token as it is
//! generated. Charged only when a call ends, a counter stands still for
//! the call's whole life, and every slot freed meanwhile goes to the same
//! tenant: measured with `fairness_bench --charge end`, a service
//! difference 25–50 × larger (docs/operations.md, "Charging as the call
//! goes"). So a call is charged in three steps:
//!
//! 1. its prompt's estimate when it leaves the queue
//!    ([`super::fair::Ticketed::started`]), before the next pick;
//! 2. its output as it streams, counted in chunks carrying output and
//!    charged at most every [`CHARGE_PERIOD`] (one lock of the model's
//!    queue per period, not per chunk; 50 ms measured as good as every
//!    token);
//! 3. when it ends, the difference to its usage (more, or a refund), or,
//!    without usage, nothing more, all of it refunded when no output came
//!    (the call did not run). Dropped unsettled (its task aborted), it
//!    settles without usage.

use super::fair::{ModelQueue, ServiceCost};
use crate::call::OutputObserver;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// How often, at most, a call's streamed output is charged.
pub const CHARGE_PERIOD: Duration = Duration::from_millis(50);

/// One started call's charges (see the module's text).
#[derive(Debug)]
pub struct CallCharge {
    queue: Arc<ModelQueue>,
    tenant: String,
    cost: ServiceCost,
    weight: f64,
    meter: Mutex<Meter>,
}

#[derive(Debug)]
struct Meter {
    /// Prompt tokens charged (the estimate, at the start).
    prompt: u64,
    /// Output tokens charged.
    output: u64,
    /// Output tokens streamed and not yet charged.
    pending: u64,
    last_charge: Instant,
    settled: bool,
}

impl CallCharge {
    /// A call whose `prompt_tokens` were charged as it started.
    pub(crate) fn new(
        queue: Arc<ModelQueue>,
        tenant: String,
        cost: ServiceCost,
        weight: f64,
        prompt_tokens: u64,
    ) -> Self {
        CallCharge {
            queue,
            tenant,
            cost,
            weight,
            meter: Mutex::new(Meter {
                prompt: prompt_tokens,
                output: 0,
                pending: 0,
                last_charge: Instant::now(),
                settled: false,
            }),
        }
    }

    fn meter(&self) -> std::sync::MutexGuard<'_, Meter> {
        // Only plain counters behind it: a poisoned lock still holds them.
        self.meter.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// `tokens` more output streamed by `now`; charged once
    /// [`CHARGE_PERIOD`] has passed since the last charge.
    fn streamed_at(&self, tokens: u64, now: Instant) {
        let due = {
            let mut meter = self.meter();
            if meter.settled {
                return;
            }
            meter.pending = meter.pending.saturating_add(tokens);
            let since = now.saturating_duration_since(meter.last_charge);
            if since < CHARGE_PERIOD || meter.pending == 0 {
                return;
            }
            meter.last_charge = now;
            let due = std::mem::take(&mut meter.pending);
            meter.output = meter.output.saturating_add(due);
            due
        };
        let service = self.cost.of(0, due);
        self.queue
            .with(|q| q.charge(&self.tenant, service, self.weight));
    }

    /// The call ended having used `usage` (prompt, output tokens; `None`:
    /// unknown): its charges are brought to that, and its tenant no longer
    /// runs it. Once; later calls (and the drop) do nothing.
    pub fn settle(&self, usage: Option<(u64, u64)>) {
        let (charged, pending, streamed) = {
            let mut meter = self.meter();
            if meter.settled {
                return;
            }
            meter.settled = true;
            let pending = std::mem::take(&mut meter.pending);
            (
                self.cost.of(meter.prompt, meter.output),
                pending,
                meter.output > 0 || pending > 0,
            )
        };
        let used = match usage {
            Some((prompt, output)) => self.cost.of(prompt, output),
            // No output and no usage: the call did not run (or nothing is
            // known of it), so none of the estimate stands.
            None if !streamed => 0.0,
            None => charged + self.cost.of(0, pending),
        };
        self.queue.with(|q| {
            if used > charged {
                q.charge(&self.tenant, used - charged, self.weight);
            } else if used < charged {
                q.refund(&self.tenant, charged - used, self.weight);
            }
            q.finish(&self.tenant);
        });
    }
}

impl OutputObserver for CallCharge {
    fn streamed(&self, tokens: u64) {
        self.streamed_at(tokens, Instant::now());
    }
}

impl Drop for CallCharge {
    fn drop(&mut self) {
        self.settle(None);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sharing::fair::{FairModels, FairShare, Order, Weights};
    use sluice_contract::Priority;

    fn share() -> FairShare {
        FairShare::new(FairModels::All, Arc::new(Weights::default()))
            .with_order(Order::AttainedService, ServiceCost::default())
    }

    /// Starts one call of `tenant` with `prompt` tokens.
    fn start(share: &FairShare, tenant: &str, prompt: u64) -> CallCharge {
        let ticket = share.enqueue(tenant, "m", Priority::Normal, prompt + 100);
        let (_sending, charge) = ticket.started(prompt);
        charge.expect("ordered by attained service, a started call is charged")
    }

    fn attained(share: &FairShare, tenant: &str) -> f64 {
        share.queue("m").with(|q| q.attained(tenant))
    }

    #[test]
    fn the_prompt_is_charged_when_the_call_starts() {
        let share = share();
        let _call = start(&share, "a", 300);
        assert_eq!(attained(&share, "a"), 300.0);
    }

    #[test]
    fn output_is_charged_as_it_streams_at_most_every_period() {
        let share = share();
        let call = start(&share, "a", 100);
        let t0 = Instant::now();
        call.meter().last_charge = t0;
        call.streamed_at(5, t0 + CHARGE_PERIOD / 2);
        assert_eq!(attained(&share, "a"), 100.0, "within the period: pending");
        call.streamed_at(1, t0 + CHARGE_PERIOD);
        // 6 output tokens at 2 each.
        assert_eq!(attained(&share, "a"), 112.0);
        call.streamed_at(2, t0 + CHARGE_PERIOD + CHARGE_PERIOD / 2);
        assert_eq!(attained(&share, "a"), 112.0);
    }

    #[test]
    fn the_end_brings_the_charges_to_the_usage() {
        let share = share();
        let over = start(&share, "a", 500);
        over.settle(Some((400, 10)));
        assert_eq!(
            attained(&share, "a"),
            420.0,
            "the estimate's excess refunded"
        );
        let under = start(&share, "b", 100);
        under.streamed_at(3, Instant::now() + CHARGE_PERIOD);
        under.settle(Some((120, 40)));
        assert_eq!(attained(&share, "b"), 200.0);
        // Settled once: neither a second settle nor the drop charges again.
        under.settle(Some((1000, 1000)));
        drop(under);
        assert_eq!(attained(&share, "b"), 200.0);
    }

    #[test]
    fn a_call_without_output_or_usage_is_refunded_and_one_with_output_keeps_it() {
        let share = share();
        let never_ran = start(&share, "a", 500);
        drop(never_ran);
        assert_eq!(attained(&share, "a"), 0.0);
        let broke = start(&share, "b", 500);
        broke.streamed_at(7, Instant::now() + CHARGE_PERIOD);
        broke.settle(None);
        assert_eq!(attained(&share, "b"), 514.0);
    }

    #[test]
    fn another_order_charges_nothing() {
        let share = FairShare::new(FairModels::All, Arc::new(Weights::default()));
        let ticket = share.enqueue("a", "m", Priority::Normal, 100);
        let (_sending, charge) = ticket.started(50);
        assert!(charge.is_none());
    }
}
