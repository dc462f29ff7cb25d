//! What one VM (one Envoy worker) remembers of the rate-limit service's
//! OVER_LIMIT answers, so that a tenant × model it already knows to be over
//! is refused (or deferred) without another call until the window resets.
//!
//! The service answers with one status per descriptor, in the order the
//! filter sent them (`descriptors::admission_request`): the requests
//! descriptor (cost 1), then one per token budget. A descriptor over with a
//! cost `c` and `r` left means every later request costing at least
//! `min(c, r + 1)` on that descriptor is over too, until its reset: usage
//! only grows within a window (a refund can free some early; the memory
//! then refuses a request the service would have taken, until the entry
//! ends, which `max_ms` caps).
//!
//! Bounded in entries and bytes; a full memory first drops what has
//! expired, then the entry that ends soonest. A per-tenant index answers
//! "is anything known about this tenant?" before the body is parsed.

use std::collections::HashMap;

use serde::Deserialize;

/// Bytes one entry costs besides its tenant and model names (the map
/// slots, the rules, the allocations' headers): a round upper figure. The
/// tenant's name counts twice (the entry's key and the tenant index).
pub const ENTRY_OVERHEAD_BYTES: usize = 256;

/// The `over_limit_memory` settings of the filter.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OverLimitMemoryConfig {
    /// Most tenant × model pairs remembered per VM (Envoy worker).
    #[serde(default = "default_max_entries")]
    pub max_entries: usize,
    /// Most bytes those entries take (tenant and model names plus
    /// [`ENTRY_OVERHEAD_BYTES`] each).
    #[serde(default = "default_max_bytes")]
    pub max_bytes: usize,
    /// Longest an entry is kept, whatever reset the answer gave; 0 turns
    /// the memory off.
    #[serde(default = "default_max_ms")]
    pub max_ms: u64,
}

fn default_max_entries() -> usize {
    10_000
}
fn default_max_bytes() -> usize {
    4 * 1024 * 1024
}
fn default_max_ms() -> u64 {
    60_000
}

impl Default for OverLimitMemoryConfig {
    fn default() -> Self {
        OverLimitMemoryConfig {
            max_entries: default_max_entries(),
            max_bytes: default_max_bytes(),
            max_ms: default_max_ms(),
        }
    }
}

/// One descriptor known to be over: requests costing at least `at_least`
/// on descriptor `index` are over until `until_ms` (Unix ms).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rule {
    pub index: usize,
    pub at_least: u64,
    pub until_ms: u64,
}

/// What the service said to do with the tenant's requests while over.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Remembered {
    Reject,
    /// Defer at this priority.
    Defer(String),
}

#[derive(Clone, Debug)]
struct Entry {
    rules: Vec<Rule>,
    action: Remembered,
    bytes: usize,
}

impl Entry {
    fn until_ms(&self) -> u64 {
        self.rules.iter().map(|r| r.until_ms).max().unwrap_or(0)
    }
}

/// A request found over by the memory: what to do, and for how long it
/// stays so (the Retry-After).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KnownOver {
    pub action: Remembered,
    pub retry_after_ms: u64,
}

/// What the memory holds for one tenant, whatever the model.
#[derive(Clone, Copy, Debug)]
struct TenantEntries {
    count: usize,
    /// The latest end of an entry added (an entry removed early leaves it
    /// as is: an over-estimate only costs a needless look at the body).
    until_ms: u64,
}

#[derive(Debug, Default)]
pub struct OverLimitMemory {
    entries: HashMap<(String, String), Entry>,
    tenants: HashMap<String, TenantEntries>,
    bytes: usize,
}

impl OverLimitMemory {
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Whether any model of `tenant` may be known over at `now_ms`: one
    /// hash lookup, no allocation (false: no request of the tenant can be).
    pub fn knows_tenant(&self, tenant: &str, now_ms: u64) -> bool {
        self.tenants
            .get(tenant)
            .is_some_and(|t| t.count > 0 && t.until_ms > now_ms)
    }

    /// Whether a request of `costs` (one per descriptor, as sent) for
    /// `tenant` × `model` is known to be over at `now_ms`.
    pub fn check(
        &mut self,
        tenant: &str,
        model: &str,
        costs: &[u64],
        now_ms: u64,
    ) -> Option<KnownOver> {
        let key = (tenant.to_string(), model.to_string());
        let entry = self.entries.get(&key)?;
        if entry.until_ms() <= now_ms {
            self.remove(&key);
            return None;
        }
        let until = entry
            .rules
            .iter()
            .filter(|r| r.until_ms > now_ms)
            .filter(|r| costs.get(r.index).is_some_and(|&c| c >= r.at_least))
            .map(|r| r.until_ms)
            .max()?;
        Some(KnownOver {
            action: entry.action.clone(),
            retry_after_ms: until - now_ms,
        })
    }

    /// Remember `rules` for `tenant` × `model` (replacing what was known).
    pub fn remember(
        &mut self,
        config: &OverLimitMemoryConfig,
        tenant: &str,
        model: &str,
        rules: Vec<Rule>,
        action: Remembered,
        now_ms: u64,
    ) {
        let key = (tenant.to_string(), model.to_string());
        self.remove(&key);
        if rules.is_empty() || config.max_ms == 0 {
            return;
        }
        let bytes = 2 * tenant.len() + model.len() + ENTRY_OVERHEAD_BYTES;
        if bytes > config.max_bytes || config.max_entries == 0 {
            return;
        }
        if self.entries.len() >= config.max_entries || self.bytes + bytes > config.max_bytes {
            self.remove_expired(now_ms);
        }
        while self.entries.len() >= config.max_entries || self.bytes + bytes > config.max_bytes {
            let Some(soonest) = self
                .entries
                .iter()
                .min_by_key(|(_, e)| e.until_ms())
                .map(|(k, _)| k.clone())
            else {
                break;
            };
            self.remove(&soonest);
        }
        self.bytes += bytes;
        let entry = Entry {
            rules,
            action,
            bytes,
        };
        let index = self
            .tenants
            .entry(tenant.to_string())
            .or_insert(TenantEntries {
                count: 0,
                until_ms: 0,
            });
        index.count += 1;
        index.until_ms = index.until_ms.max(entry.until_ms());
        self.entries.insert(key, entry);
    }

    fn remove_expired(&mut self, now_ms: u64) {
        let expired: Vec<(String, String)> = self
            .entries
            .iter()
            .filter(|(_, e)| e.until_ms() <= now_ms)
            .map(|(k, _)| k.clone())
            .collect();
        for key in &expired {
            self.remove(key);
        }
    }

    /// The service took a request of `tenant` × `model`: whatever was known
    /// about it is stale.
    pub fn forget(&mut self, tenant: &str, model: &str) {
        if self.entries.is_empty() {
            return;
        }
        self.remove(&(tenant.to_string(), model.to_string()));
    }

    fn remove(&mut self, key: &(String, String)) {
        let Some(entry) = self.entries.remove(key) else {
            return;
        };
        self.bytes -= entry.bytes;
        let tenant = &key.0;
        let last = self.tenants.get_mut(tenant).is_some_and(|t| {
            t.count = t.count.saturating_sub(1);
            t.count == 0
        });
        if last {
            self.tenants.remove(tenant);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(index: usize, at_least: u64, until_ms: u64) -> Rule {
        Rule {
            index,
            at_least,
            until_ms,
        }
    }

    /// Remembers that `tenant` × `model` is over `rule`, to be refused.
    fn reject(
        memory: &mut OverLimitMemory,
        config: &OverLimitMemoryConfig,
        tenant: &str,
        model: &str,
        rule: Rule,
        now: u64,
    ) {
        memory.remember(config, tenant, model, vec![rule], Remembered::Reject, now);
    }

    #[test]
    fn a_requests_rule_refuses_everything_until_its_reset() {
        let config = OverLimitMemoryConfig::default();
        let mut memory = OverLimitMemory::default();
        reject(&mut memory, &config, "t", "m", rule(0, 1, 5_000), 1_000);
        let over = memory.check("t", "m", &[1, 1], 1_000).unwrap();
        assert_eq!(over.retry_after_ms, 4_000);
        assert_eq!(memory.check("t", "other", &[1, 1], 1_000), None);
        assert_eq!(memory.check("t", "m", &[1, 1], 5_000), None);
        assert!(memory.is_empty(), "expired entries go on lookup");
        assert_eq!(memory.bytes(), 0);
    }

    #[test]
    fn a_token_rule_refuses_only_requests_costing_at_least_its_threshold() {
        let config = OverLimitMemoryConfig::default();
        let mut memory = OverLimitMemory::default();
        memory.remember(
            &config,
            "t",
            "m",
            vec![rule(1, 500, 9_000)],
            Remembered::Defer("low".into()),
            0,
        );
        assert_eq!(memory.check("t", "m", &[1, 499], 10), None);
        let over = memory.check("t", "m", &[1, 500], 10).unwrap();
        assert_eq!(over.action, Remembered::Defer("low".into()));
        memory.forget("t", "m");
        assert_eq!(memory.check("t", "m", &[1, 500], 10), None);
    }

    #[test]
    fn the_memory_stays_within_its_entries_and_bytes() {
        let config = OverLimitMemoryConfig {
            max_entries: 3,
            max_bytes: 3 * (ENTRY_OVERHEAD_BYTES + 3),
            max_ms: 60_000,
        };
        let mut memory = OverLimitMemory::default();
        for (i, tenant) in ["a", "b", "c", "d", "e"].iter().enumerate() {
            let until = 10_000 + i as u64;
            reject(&mut memory, &config, tenant, "m", rule(0, 1, until), 0);
            assert!(memory.len() <= 3);
            assert!(memory.bytes() <= config.max_bytes);
        }
        // The soonest to end made room: the last three are kept.
        assert_eq!(memory.check("a", "m", &[1], 0), None);
        assert!(memory.check("e", "m", &[1], 0).is_some());
        let long_name = "x".repeat(config.max_bytes);
        reject(&mut memory, &config, &long_name, "m", rule(0, 1, 10), 0);
        assert!(memory.bytes() <= config.max_bytes);
        assert_eq!(memory.check(&long_name, "m", &[1], 0), None);
    }

    #[test]
    fn nothing_is_remembered_when_turned_off() {
        let config = OverLimitMemoryConfig {
            max_ms: 0,
            ..OverLimitMemoryConfig::default()
        };
        let mut memory = OverLimitMemory::default();
        reject(&mut memory, &config, "t", "m", rule(0, 1, 10), 0);
        assert!(memory.is_empty());
    }

    #[test]
    fn the_tenant_index_follows_the_entries() {
        let config = OverLimitMemoryConfig {
            max_entries: 2,
            ..OverLimitMemoryConfig::default()
        };
        let mut memory = OverLimitMemory::default();
        assert!(!memory.knows_tenant("t", 0));
        let reject = Remembered::Reject;
        memory.remember(&config, "t", "a", vec![rule(0, 1, 100)], reject.clone(), 0);
        memory.remember(&config, "t", "b", vec![rule(0, 1, 200)], reject.clone(), 0);
        assert!(memory.knows_tenant("t", 150));
        assert!(!memory.knows_tenant("u", 150));
        assert!(!memory.knows_tenant("t", 200), "every entry has ended");
        memory.forget("t", "a");
        assert!(memory.knows_tenant("t", 0));
        memory.forget("t", "b");
        assert!(!memory.knows_tenant("t", 0));
        // Expired entries dropped to make room leave the index too.
        memory.remember(&config, "t", "a", vec![rule(0, 1, 100)], reject.clone(), 0);
        memory.remember(&config, "u", "a", vec![rule(0, 1, 100)], reject.clone(), 0);
        memory.remember(&config, "v", "a", vec![rule(0, 1, 900)], reject, 500);
        assert!(!memory.knows_tenant("t", 0) && !memory.knows_tenant("u", 0));
        assert!(memory.knows_tenant("v", 500));
        assert_eq!(memory.len(), 1);
    }
}
