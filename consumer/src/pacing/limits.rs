//! Per-model cap on in-flight backend calls, protecting the GPU backend.
//!
//! Acquiring never blocks: [`InFlightLimits::try_acquire`] answers at once,
//! and a refusal tells the pop loop to hold the message and move on to other
//! tenants. A held message waits on its model's [`Slots::turn`]: each freed
//! slot wakes the longest-waiting holder (FIFO), so it starts as soon as a
//! call ends, not after a fixed retry time.

use crate::metrics::{Metrics, ModelLabels};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::futures::Notified;
use tokio::sync::Notify;

/// Configuration of the caps.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct InFlightConfig {
    /// Cap of a model without its own entry; `None` = unlimited.
    pub default_max_in_flight: Option<usize>,
    /// Caps per model (unsanitized name).
    pub max_in_flight: HashMap<String, usize>,
    /// A refused message looks again after this long if no freed slot woke
    /// it first (a safety net: a freed slot wakes one waiter at once).
    pub busy_retry_ms: u64,
    /// Distinct models that get a semaphore of their own; models beyond this
    /// share one (protects memory against unbounded model names).
    pub max_models: usize,
}

impl Default for InFlightConfig {
    fn default() -> Self {
        InFlightConfig {
            default_max_in_flight: Some(64),
            max_in_flight: HashMap::new(),
            busy_retry_ms: 100,
            max_models: 1000,
        }
    }
}

/// A held slot; released (and the gauge decremented) when dropped.
#[derive(Debug)]
pub struct ModelPermit {
    slots: Option<Arc<Slots>>,
    gauge: Option<prometheus_client::metrics::gauge::Gauge>,
}

impl Drop for ModelPermit {
    fn drop(&mut self) {
        if let Some(slots) = &self.slots {
            slots.release();
        }
        if let Some(gauge) = &self.gauge {
            gauge.dec();
        }
    }
}

/// A model's slots: a counter against a cap that may change at run time
/// (the adaptive controller, [`InFlightLimits::set_cap`]). Lowering the cap
/// below the calls in flight refuses new ones until enough have ended.
#[derive(Debug)]
pub struct Slots {
    cap: AtomicUsize,
    in_use: AtomicUsize,
    /// Signalled when a slot frees or the cap changes: the fair queue's
    /// waiters look again.
    freed: Notify,
    /// One waiter per freed slot, first come first served (a raised cap
    /// wakes them all): messages held because the model was at its cap.
    turn: Notify,
}

impl Slots {
    fn new(cap: usize) -> Self {
        Slots {
            cap: AtomicUsize::new(cap),
            in_use: AtomicUsize::new(0),
            freed: Notify::new(),
            turn: Notify::new(),
        }
    }

    fn try_take(&self) -> bool {
        let cap = self.cap.load(Ordering::SeqCst);
        self.in_use
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                (n < cap).then_some(n + 1)
            })
            .is_ok()
    }

    fn release(&self) {
        let _ = self
            .in_use
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1));
        self.freed.notify_waiters();
        self.turn.notify_one();
    }

    fn set_cap(&self, cap: usize) {
        if self.cap.swap(cap, Ordering::SeqCst) != cap {
            self.freed.notify_waiters();
            self.turn.notify_waiters();
        }
    }

    /// Free slots now.
    fn available(&self) -> usize {
        self.cap
            .load(Ordering::SeqCst)
            .saturating_sub(self.in_use.load(Ordering::SeqCst))
    }

    /// Signalled when a slot frees or the cap changes.
    pub fn freed(&self) -> &Notify {
        &self.freed
    }

    /// Wakes one waiter per freed slot, the longest waiting first (tokio's
    /// `notify_one` order); all of them when the cap changes. Arm (`enable`)
    /// the `notified()` future before trying a slot, keep it while waiting,
    /// and drop it once the message runs or waits for something else: a
    /// dropped future that had been woken passes its wake to the next one.
    pub fn turn(&self) -> &Notify {
        &self.turn
    }

    /// A [`Slots::turn`] wait, armed: a slot freed from now on wakes it (or,
    /// if it is dropped first, the next waiter).
    pub fn armed_turn(&self) -> Pin<Box<Notified<'_>>> {
        let mut turn = Box::pin(self.turn.notified());
        turn.as_mut().enable();
        turn
    }

    /// True when no slot is free now.
    pub fn full(&self) -> bool {
        self.available() == 0
    }
}

/// Answer of [`InFlightLimits::try_acquire`].
#[derive(Debug)]
pub enum Acquire {
    /// Run; hold the permit for the whole call.
    Acquired(ModelPermit),
    /// The model is at its cap: hold the message, try again after `retry_after`.
    Busy { retry_after: Duration },
}

/// The per-model slots.
pub struct InFlightLimits {
    config: InFlightConfig,
    semaphores: Mutex<HashMap<String, Option<Arc<Slots>>>>,
    overflow: Option<Arc<Slots>>,
    metrics: Option<Arc<Metrics>>,
}

impl InFlightLimits {
    pub fn new(config: InFlightConfig, metrics: Option<Arc<Metrics>>) -> Self {
        let overflow = config
            .default_max_in_flight
            .map(|n| Arc::new(Slots::new(n)));
        InFlightLimits {
            config,
            semaphores: Mutex::new(HashMap::new()),
            overflow,
            metrics,
        }
    }

    fn semaphore(&self, model: &str) -> Option<Arc<Slots>> {
        let Ok(mut map) = self.semaphores.lock() else {
            return self.overflow.clone();
        };
        if let Some(semaphore) = map.get(model) {
            return semaphore.clone();
        }
        let cap = self
            .config
            .max_in_flight
            .get(model)
            .copied()
            .or(self.config.default_max_in_flight);
        if map.len() >= self.config.max_models && !self.config.max_in_flight.contains_key(model) {
            return self.overflow.clone();
        }
        let semaphore = cap.map(|n| Arc::new(Slots::new(n)));
        map.insert(model.to_string(), semaphore.clone());
        semaphore
    }

    /// Takes a slot of `model` if one is free; never waits.
    pub fn try_acquire(&self, model: &str) -> Acquire {
        let labels = self.metrics.as_ref().map(|m| (m, m.model_label(model)));
        let slots = self.semaphore(model);
        if let Some(slots) = &slots {
            if !slots.try_take() {
                if let Some((metrics, labels)) = &labels {
                    metrics.in_flight_refused.get_or_create(labels).inc();
                }
                return Acquire::Busy {
                    retry_after: self.busy_retry(),
                };
            }
        }
        let gauge = labels.map(|(metrics, labels): (&Arc<Metrics>, ModelLabels)| {
            let gauge = metrics.in_flight.get_or_create(&labels).clone();
            gauge.inc();
            gauge
        });
        Acquire::Acquired(ModelPermit { slots, gauge })
    }

    /// Free slots of `model` (`None` = unlimited).
    pub fn available(&self, model: &str) -> Option<usize> {
        self.semaphore(model).map(|s| s.available())
    }

    /// How long a refused message waits before it looks again (when no
    /// slot-freed signal comes first).
    pub fn busy_retry(&self) -> Duration {
        Duration::from_millis(self.config.busy_retry_ms)
    }

    /// Sets `model`'s cap (the adaptive controller's share of this
    /// instance). A model past `max_models` shares the overflow slots,
    /// whose cap it then sets.
    pub fn set_cap(&self, model: &str, cap: usize) {
        let existing = self.semaphore(model);
        match existing {
            Some(slots) => slots.set_cap(cap),
            None => {
                // An unlimited model gets slots of its own.
                if let Ok(mut map) = self.semaphores.lock() {
                    map.insert(model.to_string(), Some(Arc::new(Slots::new(cap))));
                }
            }
        }
    }

    /// Calls of `model` in flight on this instance (`None`: the model is
    /// unlimited, so not counted; a model past `max_models` counts the
    /// overflow slots it shares).
    pub fn in_flight(&self, model: &str) -> Option<usize> {
        self.semaphore(model)
            .map(|s| s.in_use.load(Ordering::SeqCst))
    }

    /// `model`'s slots (`None` = unlimited), for waiting on a freed slot.
    pub fn slots(&self, model: &str) -> Option<Arc<Slots>> {
        self.semaphore(model)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caps_per_model_without_blocking() {
        let metrics = Arc::new(Metrics::default());
        let limits = InFlightLimits::new(
            InFlightConfig {
                default_max_in_flight: Some(1),
                max_in_flight: HashMap::from([("big".to_string(), 2)]),
                ..InFlightConfig::default()
            },
            Some(metrics.clone()),
        );
        let Acquire::Acquired(a) = limits.try_acquire("m") else {
            panic!("first refused")
        };
        assert!(matches!(limits.try_acquire("m"), Acquire::Busy { .. }));
        // Another model is independent.
        let Acquire::Acquired(b1) = limits.try_acquire("big") else {
            panic!()
        };
        let Acquire::Acquired(_b2) = limits.try_acquire("big") else {
            panic!()
        };
        assert!(matches!(limits.try_acquire("big"), Acquire::Busy { .. }));
        assert!(metrics
            .encode()
            .contains("sluice_consumer_in_flight{model=\"big\"} 2"));
        drop(a);
        drop(b1);
        assert_eq!(limits.available("m"), Some(1));
        assert!(matches!(limits.try_acquire("m"), Acquire::Acquired(_)));
        assert!(metrics
            .encode()
            .contains("sluice_consumer_in_flight{model=\"big\"} 1"));
        assert!(metrics
            .encode()
            .contains("sluice_consumer_in_flight_refused_total{model=\"m\"} 1"));
    }

    /// Each freed slot wakes one held message, the first to wait first; a
    /// wake that reached a message no longer waiting goes to the next.
    #[tokio::test]
    async fn a_freed_slot_wakes_the_longest_waiting() {
        use std::future::Future;
        use std::task::Context;
        let limits = InFlightLimits::new(
            InFlightConfig {
                default_max_in_flight: Some(1),
                ..InFlightConfig::default()
            },
            None,
        );
        let Acquire::Acquired(permit) = limits.try_acquire("m") else {
            panic!("first refused")
        };
        let Some(slots) = limits.slots("m") else {
            panic!("no slots for a capped model")
        };
        let (mut first, mut second, mut third) =
            (slots.armed_turn(), slots.armed_turn(), slots.armed_turn());
        let mut cx = Context::from_waker(std::task::Waker::noop());
        let mut woken = |turn: &mut Pin<Box<Notified<'_>>>| turn.as_mut().poll(&mut cx).is_ready();
        assert!(!woken(&mut first) && !woken(&mut second) && !woken(&mut third));
        assert!(slots.full());
        drop(permit);
        assert!(!slots.full());
        assert!(woken(&mut first), "the first waiter is woken");
        assert!(
            !woken(&mut second) && !woken(&mut third),
            "one wake per freed slot"
        );
        // Freed again; the second waiter went away without looking: its wake
        // passes on to the third.
        let Acquire::Acquired(permit) = limits.try_acquire("m") else {
            panic!("freed slot refused")
        };
        drop(permit);
        drop(second);
        assert!(woken(&mut third));
    }

    #[test]
    fn unlimited_and_overflow() {
        let limits = InFlightLimits::new(
            InFlightConfig {
                default_max_in_flight: None,
                ..InFlightConfig::default()
            },
            None,
        );
        let permits: Vec<_> = (0..100).map(|_| limits.try_acquire("m")).collect();
        assert!(permits.iter().all(|p| matches!(p, Acquire::Acquired(_))));
        assert_eq!(limits.available("m"), None);

        let limits = InFlightLimits::new(
            InFlightConfig {
                default_max_in_flight: Some(1),
                max_models: 1,
                ..InFlightConfig::default()
            },
            None,
        );
        let _a = limits.try_acquire("a");
        // "b" and "c" exceed max_models and share the overflow semaphore.
        let _b = limits.try_acquire("b");
        assert!(matches!(limits.try_acquire("c"), Acquire::Busy { .. }));
    }

    #[test]
    fn the_cap_follows_set_cap_both_ways() {
        let limits = InFlightLimits::new(
            InFlightConfig {
                default_max_in_flight: Some(3),
                ..InFlightConfig::default()
            },
            None,
        );
        let held: Vec<_> = (0..3).map(|_| limits.try_acquire("m")).collect();
        assert!(held.iter().all(|p| matches!(p, Acquire::Acquired(_))));
        // Lowered below the calls in flight: refused until two have ended.
        limits.set_cap("m", 1);
        let mut held = held;
        held.pop();
        assert!(matches!(limits.try_acquire("m"), Acquire::Busy { .. }));
        held.pop();
        assert!(matches!(limits.try_acquire("m"), Acquire::Busy { .. }));
        held.pop();
        let Acquire::Acquired(one) = limits.try_acquire("m") else {
            panic!("a slot is free at cap 1")
        };
        limits.set_cap("m", 2);
        assert_eq!(limits.available("m"), Some(1));
        assert_eq!(limits.in_flight("m"), Some(1));
        drop(one);
        // An unlimited model gets a cap of its own.
        let unlimited = InFlightLimits::new(
            InFlightConfig {
                default_max_in_flight: None,
                ..InFlightConfig::default()
            },
            None,
        );
        unlimited.set_cap("u", 1);
        let _u = unlimited.try_acquire("u");
        assert!(matches!(unlimited.try_acquire("u"), Acquire::Busy { .. }));
    }
}
