//! The models whose saturation sluice-rls tracks, and their last read
//! state: plain data, no I/O. A decision looks a model up ([`Snapshot::ask`]);
//! the background refresh lists what to read ([`Snapshot::due`]) and stores
//! what it read ([`Snapshot::apply`]).
//!
//! Bounded: model names come from clients, so at most `max_models` are
//! tracked. A model not asked for `idle_ms` leaves at the next refresh, or
//! gives its place to a new model; while every place is held by a model
//! asked within `idle_ms`, a new model is refused (routed straight to the
//! server, as an unknown model is).

use sluice_contract::saturation::Saturation;
use std::collections::HashMap;

/// One tracked model.
#[derive(Clone, Copy, Debug)]
struct Tracked {
    /// The state last read; `None` until the first read, or when the
    /// controller has written none.
    state: Option<Saturation>,
    /// The last decision that asked for this model, ms.
    asked_at_ms: u64,
}

/// What a decision found for its model.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ask {
    /// Tracked: its last read state (`None`: not read yet, or no state).
    Known(Option<Saturation>),
    /// New, tracked from now on (`replaced_idle`: it took the place of a
    /// model not asked for `idle_ms`); not read yet.
    Added { replaced_idle: bool },
    /// New, not tracked: every place is held by a model asked recently.
    Refused,
}

/// The tracked models.
#[derive(Debug)]
pub struct Snapshot {
    models: HashMap<String, Tracked>,
    max_models: usize,
    idle_ms: u64,
    /// Before this instant no tracked model can be idle (a lower bound,
    /// kept by the last scan: `asked_at_ms` only grows), so a full
    /// snapshot refuses a new model without scanning.
    no_idle_before_ms: u64,
}

impl Snapshot {
    pub fn new(max_models: usize, idle_ms: u64) -> Self {
        Snapshot {
            models: HashMap::new(),
            max_models,
            idle_ms,
            no_idle_before_ms: 0,
        }
    }

    /// Models tracked now.
    pub fn len(&self) -> usize {
        self.models.len()
    }

    pub fn is_empty(&self) -> bool {
        self.models.is_empty()
    }

    /// A decision for `model` at `now_ms`: its state if tracked (and the
    /// model marked as asked), else tracked from now if there is room.
    pub fn ask(&mut self, model: &str, now_ms: u64) -> Ask {
        if let Some(tracked) = self.models.get_mut(model) {
            tracked.asked_at_ms = tracked.asked_at_ms.max(now_ms);
            return Ask::Known(tracked.state);
        }
        let replaced_idle = if self.models.len() < self.max_models {
            false
        } else if self.drop_least_recent_idle(now_ms) {
            true
        } else {
            return Ask::Refused;
        };
        let tracked = Tracked {
            state: None,
            asked_at_ms: now_ms,
        };
        self.models.insert(model.to_string(), tracked);
        Ask::Added { replaced_idle }
    }

    /// Drops the least recently asked model if it is idle at `now_ms`.
    fn drop_least_recent_idle(&mut self, now_ms: u64) -> bool {
        if now_ms < self.no_idle_before_ms {
            return false;
        }
        let least = self
            .models
            .iter()
            .min_by_key(|(_, tracked)| tracked.asked_at_ms)
            .map(|(model, tracked)| (model.clone(), tracked.asked_at_ms));
        let Some((model, asked_at_ms)) = least else {
            return false;
        };
        if now_ms.saturating_sub(asked_at_ms) < self.idle_ms {
            self.no_idle_before_ms = asked_at_ms.saturating_add(self.idle_ms);
            return false;
        }
        self.models.remove(&model);
        true
    }

    /// Drops the models idle at `now_ms` and lists the rest, to be read.
    /// Returns the list and how many were dropped.
    pub fn due(&mut self, now_ms: u64) -> (Vec<String>, usize) {
        let before = self.models.len();
        let idle_ms = self.idle_ms;
        self.models
            .retain(|_, tracked| now_ms.saturating_sub(tracked.asked_at_ms) < idle_ms);
        let dropped = before - self.models.len();
        (self.models.keys().cloned().collect(), dropped)
    }

    /// Stores one read: `states[i]` is `models[i]`'s state. A model dropped
    /// meanwhile stays dropped.
    pub fn apply(&mut self, models: &[String], states: Vec<Option<Saturation>>) {
        for (model, state) in models.iter().zip(states) {
            if let Some(tracked) = self.models.get_mut(model) {
                tracked.state = state;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Ask, Saturation, Snapshot};

    fn saturated(at_ms: u64) -> Option<Saturation> {
        Some(Saturation {
            saturated: true,
            at_ms,
        })
    }

    #[test]
    fn a_new_model_is_tracked_unread_then_known_once_read() {
        let mut snapshot = Snapshot::new(4, 10_000);
        assert_eq!(
            snapshot.ask("m", 0),
            Ask::Added {
                replaced_idle: false
            }
        );
        assert_eq!(snapshot.ask("m", 10), Ask::Known(None), "not read yet");
        let (due, dropped) = snapshot.due(20);
        assert_eq!((due.clone(), dropped), (vec!["m".to_string()], 0));
        snapshot.apply(&due, vec![saturated(15)]);
        assert_eq!(snapshot.ask("m", 30), Ask::Known(saturated(15)));
    }

    #[test]
    fn a_failed_read_changes_nothing_and_a_later_one_replaces_the_state() {
        let mut snapshot = Snapshot::new(4, 10_000);
        snapshot.ask("m", 0);
        let (due, _) = snapshot.due(0);
        snapshot.apply(&due, vec![saturated(5)]);
        // A failed read stores nothing: the last state stays (its age is
        // judged by the route, from the controller's write time).
        let (due, _) = snapshot.due(1_000);
        assert_eq!(snapshot.ask("m", 1_000), Ask::Known(saturated(5)));
        let room = Some(Saturation {
            saturated: false,
            at_ms: 1_000,
        });
        snapshot.apply(&due, vec![room]);
        assert_eq!(snapshot.ask("m", 1_001), Ask::Known(room));
    }

    #[test]
    fn idle_models_leave_at_the_refresh_and_a_late_read_does_not_bring_them_back() {
        let mut snapshot = Snapshot::new(4, 1_000);
        snapshot.ask("old", 0);
        snapshot.ask("busy", 0);
        let (reading, _) = snapshot.due(0);
        snapshot.ask("busy", 900);
        let (due, dropped) = snapshot.due(1_000);
        assert_eq!((due, dropped), (vec!["busy".to_string()], 1));
        // The read started before "old" left ends after.
        let states = reading.iter().map(|_| saturated(1)).collect();
        snapshot.apply(&reading, states);
        assert_eq!(snapshot.len(), 1);
        assert_eq!(snapshot.ask("busy", 1_001), Ask::Known(saturated(1)));
    }

    #[test]
    fn a_full_snapshot_refuses_new_models_while_its_models_are_asked() {
        let mut snapshot = Snapshot::new(2, 1_000);
        snapshot.ask("a", 0);
        snapshot.ask("b", 100);
        assert_eq!(snapshot.ask("c", 500), Ask::Refused);
        assert_eq!(
            snapshot.ask("d", 999),
            Ask::Refused,
            "a was asked 999 ms ago"
        );
        assert_eq!(snapshot.len(), 2);
        // "a" idle: the least recently asked gives its place.
        assert_eq!(
            snapshot.ask("c", 1_000),
            Ask::Added {
                replaced_idle: true
            }
        );
        assert_eq!(
            snapshot.ask("a", 1_001),
            Ask::Refused,
            "b was asked 901 ms ago"
        );
        assert_eq!(snapshot.ask("b", 1_050), Ask::Known(None));
        // Both asked within the last second: neither gives its place.
        assert_eq!(snapshot.ask("e", 1_100), Ask::Refused);
        let (mut due, _) = snapshot.due(1_100);
        due.sort();
        assert_eq!(due, vec!["b".to_string(), "c".to_string()]);
    }

    #[test]
    fn many_distinct_names_never_grow_it_past_its_bound() {
        let mut snapshot = Snapshot::new(16, 60_000);
        let mut refused = 0;
        for i in 0..10_000u64 {
            if snapshot.ask(&format!("model-{i}"), i) == Ask::Refused {
                refused += 1;
            }
        }
        assert_eq!(snapshot.len(), 16);
        assert_eq!(refused, 10_000 - 16);
        // Once they are idle, each new name takes one place.
        assert_eq!(
            snapshot.ask("late", 70_000),
            Ask::Added {
                replaced_idle: true
            }
        );
        assert_eq!(snapshot.len(), 16);
    }
}
