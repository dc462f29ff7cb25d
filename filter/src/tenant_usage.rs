//! Per-tenant usage counters: an Envoy stat per tenant and kind
//! ([`UsageKind::stat_name`]), for at most `cap` tenants in the whole Envoy
//! process. Tenants claim a series in proxy-wasm shared data, which every
//! worker's VM sees; a tenant that comes after the cap is counted as
//! [`OTHER_TENANTS`]. Envoy never drops a stat, so the cap bounds its memory
//! for the process's life.

use proxy_wasm::hostcalls;
use proxy_wasm::types::{MetricType, Status};
use sluice_admission::host::{TenantUsage, UsageKind, OTHER_TENANTS};
use std::cell::RefCell;
use std::collections::HashMap;

/// Shared-data key: how many tenants have claimed a series.
const CLAIMED: &str = "sluice.tenant_series.count";
/// Shared-data key prefix: a tenant that holds a series (`…tenant.<id>`).
const CLAIM_PREFIX: &str = "sluice.tenant_series.tenant.";
/// Tries at the compare-and-swap of the claim count before giving up
/// (the tenant is then counted as `~other` this time).
const CAS_ATTEMPTS: usize = 8;

/// This VM's counter ids per tenant (at most the tenants that claimed a
/// series, plus `~other`).
pub struct TenantCounters {
    cap: u32,
    ids: RefCell<HashMap<String, [Option<u32>; 3]>>,
}

impl TenantCounters {
    /// `cap`: the filter's `tenant_usage_series` (0: none).
    pub fn new(cap: u32) -> Self {
        if cap > 0 {
            if let Ok((None, _)) = hostcalls::get_shared_data(CLAIMED) {
                let _ = hostcalls::set_shared_data(CLAIMED, Some(b"0"), None);
            }
        }
        TenantCounters {
            cap,
            ids: RefCell::new(HashMap::new()),
        }
    }

    pub fn add(&self, tenant: &str, usage: TenantUsage) {
        if self.cap == 0 {
            return;
        }
        let Ok(mut ids) = self.ids.try_borrow_mut() else {
            return;
        };
        let series = if ids.contains_key(tenant) || claim(tenant, self.cap) {
            tenant
        } else {
            OTHER_TENANTS
        };
        let counters = ids
            .entry(series.to_string())
            .or_insert_with(|| define(series));
        for (kind, id) in UsageKind::ALL.into_iter().zip(counters.iter()) {
            let by = usage.of(kind);
            if let (Some(id), true) = (id, by > 0) {
                let _ = hostcalls::increment_metric(*id, i64::try_from(by).unwrap_or(i64::MAX));
            }
        }
    }
}

fn define(tenant: &str) -> [Option<u32>; 3] {
    UsageKind::ALL.map(|kind| {
        let name = kind.stat_name(tenant);
        hostcalls::define_metric(MetricType::Counter, &name)
            .map_err(|status| log::warn!("sluice: cannot define metric {name}: {status:?}"))
            .ok()
    })
}

/// Whether `tenant` holds a series, claiming one while fewer than `cap` are
/// taken. Two workers claiming the same new tenant at once may both count
/// it: the cap is then reached a little early, never passed.
fn claim(tenant: &str, cap: u32) -> bool {
    let key = format!("{CLAIM_PREFIX}{tenant}");
    if matches!(hostcalls::get_shared_data(&key), Ok((Some(_), _))) {
        return true;
    }
    for _ in 0..CAS_ATTEMPTS {
        let Ok((count, cas)) = hostcalls::get_shared_data(CLAIMED) else {
            return false;
        };
        let claimed: u32 = count
            .and_then(|bytes| String::from_utf8(bytes).ok())
            .and_then(|text| text.parse().ok())
            .unwrap_or(0);
        if claimed >= cap {
            return false;
        }
        let next = (claimed + 1).to_string();
        match hostcalls::set_shared_data(CLAIMED, Some(next.as_bytes()), cas) {
            Ok(()) => {
                let _ = hostcalls::set_shared_data(&key, Some(b"1"), None);
                return true;
            }
            Err(Status::CasMismatch) => continue,
            Err(status) => {
                log::warn!("sluice: cannot claim a usage series for tenant {tenant}: {status:?}");
                return false;
            }
        }
    }
    false
}
