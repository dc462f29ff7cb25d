//! What one call is charged to its tenant's attained service (the fair
//! queue ordered by attained service, [`super::fair::Order::AttainedService`]).
//!
//! VTC's counters work when they follow the service as the server gives
//! it: the prompt when the call starts, each output token as it is
//! generated. Charged only when a call ends, a counter stands still for
//! the call's whole life, and every slot freed meanwhile goes to the same
//! tenant: measured with `fairness_bench --charge at-end`, a service
//! difference 27–60 × larger (docs/operations.md, "Charging as the call
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

use crate::call::OutputObserver;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// How tokens count as service: `prompt · prompt_tokens + output ·
/// output_tokens`. The VTC paper's cost by default (an output token costs
/// the GPU about twice a prompt token).
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServiceCost {
    pub prompt: f64,
    pub output: f64,
}

impl Default for ServiceCost {
    fn default() -> Self {
        ServiceCost {
            prompt: 1.0,
            output: 2.0,
        }
    }
}

impl ServiceCost {
    /// The service `prompt` and `output` tokens stand for.
    pub fn of(&self, prompt: u64, output: u64) -> f64 {
        self.prompt * prompt as f64 + self.output * output as f64
    }
}

/// The counters a call's charges move: a model's fair queue
/// ([`super::fair::ModelQueue`]). Service is per unit of `weight`.
pub trait ServiceCounters: Send + Sync + std::fmt::Debug {
    /// `tenant` received `service` more.
    fn charge(&self, tenant: &str, service: f64, weight: f64);
    /// `service` charged ahead to `tenant` was not used.
    fn refund(&self, tenant: &str, service: f64, weight: f64);
    /// A call of `tenant` ended: it no longer runs it.
    fn finish(&self, tenant: &str);
}

/// How often, at most, a call's streamed output is charged.
pub const CHARGE_PERIOD: Duration = Duration::from_millis(50);

/// One started call's charges (see the module's text).
#[derive(Debug)]
pub struct CallCharge {
    counters: Arc<dyn ServiceCounters>,
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
        counters: Arc<dyn ServiceCounters>,
        tenant: String,
        cost: ServiceCost,
        weight: f64,
        prompt_tokens: u64,
    ) -> Self {
        CallCharge {
            counters,
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
        self.counters
            .charge(&self.tenant, self.cost.of(0, due), self.weight);
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
        if used > charged {
            self.counters
                .charge(&self.tenant, used - charged, self.weight);
        } else if used < charged {
            self.counters
                .refund(&self.tenant, charged - used, self.weight);
        }
        self.counters.finish(&self.tenant);
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
    use std::collections::HashMap;

    /// Counters as a fair queue keeps them (without the order).
    #[derive(Debug, Default)]
    struct Counters {
        attained: Mutex<HashMap<String, f64>>,
        finished: Mutex<u32>,
    }

    impl ServiceCounters for Counters {
        fn charge(&self, tenant: &str, service: f64, weight: f64) {
            *self
                .attained
                .lock()
                .unwrap()
                .entry(tenant.into())
                .or_default() += service / weight;
        }

        fn refund(&self, tenant: &str, service: f64, weight: f64) {
            self.charge(tenant, -service, weight);
        }

        fn finish(&self, _: &str) {
            *self.finished.lock().unwrap() += 1;
        }
    }

    impl Counters {
        fn of(&self, tenant: &str) -> f64 {
            self.attained
                .lock()
                .unwrap()
                .get(tenant)
                .copied()
                .unwrap_or(0.0)
        }
    }

    /// A call of `tenant` started with `prompt` tokens charged (as
    /// [`super::super::fair::Ticketed::started`] does), weight 1.
    fn start(counters: &Arc<Counters>, tenant: &str, prompt: u64) -> CallCharge {
        let cost = ServiceCost::default();
        counters.charge(tenant, cost.of(prompt, 0), 1.0);
        CallCharge::new(counters.clone(), tenant.into(), cost, 1.0, prompt)
    }

    #[test]
    fn output_is_charged_as_it_streams_at_most_every_period() {
        let counters = Arc::new(Counters::default());
        let call = start(&counters, "a", 100);
        let t0 = Instant::now();
        call.meter().last_charge = t0;
        call.streamed_at(5, t0 + CHARGE_PERIOD / 2);
        assert_eq!(counters.of("a"), 100.0, "within the period: pending");
        call.streamed_at(1, t0 + CHARGE_PERIOD);
        // 6 output tokens at 2 each.
        assert_eq!(counters.of("a"), 112.0);
        call.streamed_at(2, t0 + CHARGE_PERIOD + CHARGE_PERIOD / 2);
        assert_eq!(counters.of("a"), 112.0);
    }

    #[test]
    fn the_end_brings_the_charges_to_the_usage_once() {
        let counters = Arc::new(Counters::default());
        let over = start(&counters, "a", 500);
        over.settle(Some((400, 10)));
        assert_eq!(counters.of("a"), 420.0, "the estimate's excess refunded");
        let under = start(&counters, "b", 100);
        under.streamed_at(3, Instant::now() + CHARGE_PERIOD);
        under.settle(Some((120, 40)));
        assert_eq!(counters.of("b"), 200.0);
        // Settled once: neither a second settle nor the drop charges again.
        under.settle(Some((1000, 1000)));
        drop(under);
        drop(over);
        assert_eq!(counters.of("b"), 200.0);
        assert_eq!(*counters.finished.lock().unwrap(), 2);
    }

    #[test]
    fn a_call_without_output_or_usage_is_refunded_and_one_with_output_keeps_it() {
        let counters = Arc::new(Counters::default());
        drop(start(&counters, "a", 500));
        assert_eq!(counters.of("a"), 0.0);
        assert_eq!(*counters.finished.lock().unwrap(), 1, "the drop settles");
        let broke = start(&counters, "b", 500);
        broke.streamed_at(7, Instant::now() + CHARGE_PERIOD);
        broke.streamed_at(2, Instant::now());
        broke.settle(None);
        // The prompt, the 7 charged and the 2 pending: 500 + 2 × 9.
        assert_eq!(counters.of("b"), 518.0);
    }
}
