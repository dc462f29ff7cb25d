//! What waiting deferred requests may hold in sluice-rls: body bytes (all
//! tenants together and per tenant) and waiting places per tenant.
//!
//! A request takes its bytes before its body is read (its `Content-Length`,
//! or the largest body when it has none, trimmed once read) and holds them
//! while it waits: the one copy kept for a re-publish is counted, so the
//! memory of the waiting room is bounded by bytes, not by a count. A tenant
//! at its own share is refused with 429 while the others are still served;
//! the endpoint as a whole at its budget answers 503.
//!
//! One process-local ledger behind a mutex: every operation is a few map
//! look-ups, and the figures are this instance's own memory.

use axum::http::StatusCode;
use prometheus_client::metrics::gauge::Gauge;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

/// Deferred requests one endpoint holds open at once by default
/// (`--deferral-max-in-flight`); the next gets a JSON 503 `deferral_busy`.
/// Envoy's circuit breaker on the route to the endpoint must allow at least
/// this many (Envoy's own default, 1,024, answers a plain 503 first).
pub const DEFAULT_MAX_IN_FLIGHT: usize = 10_000;

/// Default `--deferral-max-held-bytes`: body bytes all waiting deferred
/// requests of one sluice-rls may hold (256 MiB).
pub const DEFAULT_MAX_HELD_BYTES: u64 = 256 * 1024 * 1024;

/// Retry-After of a refusal by the ledger: places free as answers end.
pub const RETRY_AFTER_SECS: u64 = 5;

/// The ledger's limits; [`BudgetLimits::for_endpoint`] derives the
/// per-tenant shares from the global ones.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BudgetLimits {
    /// Body bytes held by all waiting requests.
    pub max_held_bytes: u64,
    /// Body bytes held by one tenant's waiting requests.
    pub max_tenant_held_bytes: u64,
    /// Waiting requests of one tenant (every priority band).
    pub max_tenant_waiting: usize,
}

impl BudgetLimits {
    /// Per-tenant shares by default: a quarter of the global byte budget and
    /// of the waiting places (`max_in_flight`), so that no tenant can take
    /// the waiting room alone.
    pub fn for_endpoint(
        max_held_bytes: u64,
        max_tenant_held_bytes: Option<u64>,
        max_in_flight: usize,
        max_tenant_waiting: Option<usize>,
    ) -> Self {
        BudgetLimits {
            max_held_bytes,
            max_tenant_held_bytes: max_tenant_held_bytes.unwrap_or(max_held_bytes / 4).max(1),
            max_tenant_waiting: max_tenant_waiting.unwrap_or(max_in_flight / 4).max(1),
        }
    }
}

impl Default for BudgetLimits {
    fn default() -> Self {
        BudgetLimits::for_endpoint(DEFAULT_MAX_HELD_BYTES, None, DEFAULT_MAX_IN_FLIGHT, None)
    }
}

/// Why the ledger refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// All waiting requests together hold the byte budget: 503.
    HeldBytes,
    /// This tenant's waiting requests hold its byte share: 429.
    TenantHeldBytes,
    /// This tenant has its share of waiting places: 429.
    TenantWaiting,
}

impl Refusal {
    /// The error `code`, also the `reason` of `sluice_rls_deferral_rejected_total`.
    pub fn code(self) -> &'static str {
        match self {
            Refusal::HeldBytes => "deferral_memory_full",
            Refusal::TenantHeldBytes => "tenant_deferral_bytes",
            Refusal::TenantWaiting => "tenant_deferral_busy",
        }
    }

    pub fn status(self) -> StatusCode {
        match self {
            Refusal::HeldBytes => StatusCode::SERVICE_UNAVAILABLE,
            Refusal::TenantHeldBytes | Refusal::TenantWaiting => StatusCode::TOO_MANY_REQUESTS,
        }
    }

    pub fn message(self) -> &'static str {
        match self {
            Refusal::HeldBytes => "this gateway holds as many deferred request bodies as it may; nothing was sent to the model, retry shortly",
            Refusal::TenantHeldBytes => "this tenant's waiting deferred requests hold its share of the gateway's memory; nothing was sent to the model, retry once some have been answered",
            Refusal::TenantWaiting => "this tenant has its share of waiting deferred requests; nothing was sent to the model, retry once some have been answered",
        }
    }
}

#[derive(Default, Debug, Clone, Copy, PartialEq, Eq)]
struct TenantUse {
    bytes: u64,
    waiting: usize,
}

#[derive(Default, Debug)]
struct State {
    held_bytes: u64,
    tenants: HashMap<String, TenantUse>,
}

impl State {
    /// Adds `bytes` to `tenant` when both budgets allow.
    fn add_bytes(
        &mut self,
        limits: &BudgetLimits,
        tenant: &str,
        bytes: u64,
    ) -> Result<(), Refusal> {
        let used = self.tenants.get(tenant).copied().unwrap_or_default();
        if used.bytes.saturating_add(bytes) > limits.max_tenant_held_bytes {
            return Err(Refusal::TenantHeldBytes);
        }
        if self.held_bytes.saturating_add(bytes) > limits.max_held_bytes {
            return Err(Refusal::HeldBytes);
        }
        self.held_bytes += bytes;
        self.tenants.entry(tenant.to_string()).or_default().bytes += bytes;
        Ok(())
    }

    fn remove_bytes(&mut self, tenant: &str, bytes: u64) {
        self.held_bytes = self.held_bytes.saturating_sub(bytes);
        self.update(tenant, |used| used.bytes = used.bytes.saturating_sub(bytes));
    }

    fn add_waiting(&mut self, limits: &BudgetLimits, tenant: &str) -> Result<(), Refusal> {
        let used = self.tenants.get(tenant).copied().unwrap_or_default();
        if used.waiting >= limits.max_tenant_waiting {
            return Err(Refusal::TenantWaiting);
        }
        self.tenants.entry(tenant.to_string()).or_default().waiting += 1;
        Ok(())
    }

    fn remove_waiting(&mut self, tenant: &str) {
        self.update(tenant, |used| used.waiting = used.waiting.saturating_sub(1));
    }

    /// Changes a tenant's use; a tenant holding nothing leaves the map.
    fn update(&mut self, tenant: &str, change: impl FnOnce(&mut TenantUse)) {
        if let Some(used) = self.tenants.get_mut(tenant) {
            change(used);
            if *used == TenantUse::default() {
                self.tenants.remove(tenant);
            }
        }
    }
}

/// The ledger of one endpoint.
#[derive(Debug)]
pub struct Ledger {
    limits: BudgetLimits,
    state: Mutex<State>,
    /// `sluice_rls_deferral_held_bytes`.
    held_bytes: Gauge,
}

impl Ledger {
    pub fn new(limits: BudgetLimits, held_bytes: Gauge) -> Arc<Ledger> {
        Arc::new(Ledger {
            limits,
            state: Mutex::new(State::default()),
            held_bytes,
        })
    }

    pub fn limits(&self) -> &BudgetLimits {
        &self.limits
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // Every change is complete before it can panic: a poisoned lock
        // still holds consistent figures.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn publish_gauge(&self, state: &State) {
        self.held_bytes
            .set(i64::try_from(state.held_bytes).unwrap_or(i64::MAX));
    }

    /// Holds `bytes` for `tenant` until the returned hold drops.
    pub fn hold_bytes(self: &Arc<Self>, tenant: &str, bytes: u64) -> Result<BytesHold, Refusal> {
        let mut state = self.state();
        state.add_bytes(&self.limits, tenant, bytes)?;
        self.publish_gauge(&state);
        Ok(BytesHold {
            ledger: self.clone(),
            tenant: tenant.to_string(),
            bytes,
        })
    }

    /// One of `tenant`'s waiting places until the returned hold drops.
    pub fn hold_waiting(self: &Arc<Self>, tenant: &str) -> Result<WaitingHold, Refusal> {
        self.state().add_waiting(&self.limits, tenant)?;
        Ok(WaitingHold {
            ledger: self.clone(),
            tenant: tenant.to_string(),
        })
    }

    /// Bytes held by all waiting requests now.
    pub fn held_bytes(&self) -> u64 {
        self.state().held_bytes
    }

    /// Tenants holding anything now.
    pub fn tenants(&self) -> usize {
        self.state().tenants.len()
    }
}

/// Body bytes held for one request; given back when dropped.
#[derive(Debug)]
pub struct BytesHold {
    ledger: Arc<Ledger>,
    tenant: String,
    bytes: u64,
}

impl BytesHold {
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Holds `bytes` instead: a smaller figure always fits; a larger one
    /// only within the budgets (the hold is unchanged when refused).
    pub fn resize(&mut self, bytes: u64) -> Result<(), Refusal> {
        let mut state = self.ledger.state();
        if bytes > self.bytes {
            state.add_bytes(&self.ledger.limits, &self.tenant, bytes - self.bytes)?;
        } else {
            state.remove_bytes(&self.tenant, self.bytes - bytes);
        }
        self.bytes = bytes;
        self.ledger.publish_gauge(&state);
        Ok(())
    }
}

impl Drop for BytesHold {
    fn drop(&mut self) {
        let mut state = self.ledger.state();
        state.remove_bytes(&self.tenant, self.bytes);
        self.ledger.publish_gauge(&state);
    }
}

/// One waiting place of a tenant; given back when dropped.
#[derive(Debug)]
pub struct WaitingHold {
    ledger: Arc<Ledger>,
    tenant: String,
}

impl Drop for WaitingHold {
    fn drop(&mut self) {
        self.ledger.state().remove_waiting(&self.tenant);
    }
}

#[allow(clippy::unwrap_used)] // tests fail loudly
#[cfg(test)]
mod tests {
    use super::*;

    fn ledger(global: u64, tenant: u64, waiting: usize) -> (Arc<Ledger>, Gauge) {
        let gauge = Gauge::default();
        let limits = BudgetLimits {
            max_held_bytes: global,
            max_tenant_held_bytes: tenant,
            max_tenant_waiting: waiting,
        };
        (Ledger::new(limits, gauge.clone()), gauge)
    }

    /// Why holding `bytes` for `tenant` is refused (it must be).
    fn refusal(ledger: &Arc<Ledger>, tenant: &str, bytes: u64) -> Refusal {
        ledger.hold_bytes(tenant, bytes).unwrap_err()
    }

    #[test]
    fn shares_default_to_a_quarter_of_the_global_limits() {
        let limits = BudgetLimits::for_endpoint(256 << 20, None, 10_000, None);
        assert_eq!(limits.max_tenant_held_bytes, 64 << 20);
        assert_eq!(limits.max_tenant_waiting, 2_500);
        let set = BudgetLimits::for_endpoint(100, Some(60), 8, Some(3));
        assert_eq!((set.max_tenant_held_bytes, set.max_tenant_waiting), (60, 3));
        // Never a share of zero.
        let tiny = BudgetLimits::for_endpoint(3, None, 2, None);
        assert_eq!(
            (tiny.max_tenant_held_bytes, tiny.max_tenant_waiting),
            (1, 1)
        );
    }

    #[test]
    fn a_tenant_at_its_byte_share_is_refused_while_others_are_served() {
        let (ledger, gauge) = ledger(100, 40, 10);
        let a1 = ledger.hold_bytes("a", 30).unwrap();
        assert_eq!(refusal(&ledger, "a", 11), Refusal::TenantHeldBytes);
        let a2 = ledger.hold_bytes("a", 10).unwrap();
        let b = ledger.hold_bytes("b", 40).unwrap();
        assert_eq!(gauge.get(), 80);
        let c = ledger.hold_bytes("c", 20).unwrap();
        // The global budget is full: the next is a 503 for anyone.
        assert_eq!(refusal(&ledger, "d", 1), Refusal::HeldBytes);
        assert_eq!(Refusal::HeldBytes.status().as_u16(), 503);
        assert_eq!(Refusal::TenantHeldBytes.status().as_u16(), 429);
        drop((a1, a2, b, c));
        assert_eq!(
            (ledger.held_bytes(), gauge.get(), ledger.tenants()),
            (0, 0, 0)
        );
    }

    #[test]
    fn exactly_the_budget_fits() {
        let (ledger, _) = ledger(100, 100, 10);
        let hold = ledger.hold_bytes("a", 100).unwrap();
        assert_eq!(refusal(&ledger, "a", 1), Refusal::TenantHeldBytes);
        drop(hold);
        assert!(ledger.hold_bytes("a", 100).is_ok());
    }

    #[test]
    fn a_hold_shrinks_freely_and_grows_within_the_budgets() {
        let (ledger, gauge) = ledger(100, 50, 10);
        let mut hold = ledger.hold_bytes("a", 50).unwrap();
        hold.resize(20).unwrap();
        assert_eq!((hold.bytes(), gauge.get()), (20, 20));
        let other = ledger.hold_bytes("a", 25).unwrap();
        assert_eq!(hold.resize(26).unwrap_err(), Refusal::TenantHeldBytes);
        assert_eq!(hold.bytes(), 20, "a refused resize changes nothing");
        hold.resize(25).unwrap();
        assert_eq!(ledger.held_bytes(), 50);
        drop(other);
        drop(hold);
        assert_eq!((gauge.get(), ledger.tenants()), (0, 0));
    }

    #[test]
    fn waiting_places_are_counted_per_tenant() {
        let (ledger, _) = ledger(100, 100, 2);
        let a1 = ledger.hold_waiting("a").unwrap();
        let _a2 = ledger.hold_waiting("a").unwrap();
        assert_eq!(
            ledger.hold_waiting("a").unwrap_err(),
            Refusal::TenantWaiting
        );
        let _b = ledger.hold_waiting("b").unwrap();
        drop(a1);
        assert!(ledger.hold_waiting("a").is_ok());
        assert_eq!(Refusal::TenantWaiting.code(), "tenant_deferral_busy");
    }
}
