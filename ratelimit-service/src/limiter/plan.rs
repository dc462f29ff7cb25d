//! The first, pure half of a decision: which counters a request touches,
//! with which hits, limits and windows. No store, no metrics, no clock.

use super::error::DecisionError;
use crate::config::{Limit, LimitsConfig, Matched};
use crate::store::{CounterOp, CountingMode, KeyLayout};
use crate::window::{Unit, Window};
use sluice_admission::descriptors::FORCE_CHARGE_METADATA;
use sluice_proto::pb::envoy::extensions::common::ratelimit::v3::{
    rate_limit_descriptor::RateLimitOverride, RateLimitDescriptor,
};
use sluice_proto::pb::envoy::service::ratelimit::v3::RateLimitRequest;
use std::borrow::Cow;
use std::collections::HashSet;
use std::ops::Deref;
use std::sync::Arc;

/// Hits above this are clamped: counters are integers well inside what Lua's
/// doubles and `u64` hold exactly.
pub const MAX_HITS: u64 = 1 << 40;

/// How a request moves its counters: the configured way, or every counter
/// even past its limit for usage that already happened (the filter's
/// reconciliation, marked `x-sluice-charge: force`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Charge {
    /// Decide whether the request may pass.
    Decide,
    /// The tokens were already spent: charge them whatever the limits say.
    Force,
}

impl Charge {
    /// The marker's value as sent by the filter; anything but `force` decides.
    pub fn from_marker(value: Option<&[u8]>) -> Charge {
        if value == Some(FORCE_CHARGE_METADATA.1) {
            Charge::Force
        } else {
            Charge::Decide
        }
    }

    /// The store's counting mode for this charge under the configured one.
    pub fn counting_mode(self, configured: CountingMode) -> CountingMode {
        match self {
            Charge::Decide => configured,
            Charge::Force => CountingMode::IncrementAll,
        }
    }
}

/// A limit as one decision applies it: the config's own, borrowed for the
/// decision (cloning its `Arc` would move a reference count that every
/// worker's decisions share, and the workers would fight over its cache
/// line), or one that a descriptor's override made for this request.
#[derive(Debug)]
pub enum LimitRef<'c> {
    Config(&'c Limit),
    Override(Arc<Limit>),
}

impl Deref for LimitRef<'_> {
    type Target = Limit;

    fn deref(&self) -> &Limit {
        match self {
            LimitRef::Config(limit) => limit,
            LimitRef::Override(limit) => limit,
        }
    }
}

/// One descriptor's limit as applied to this request.
#[derive(Debug)]
pub struct Applied<'c> {
    pub limit: LimitRef<'c>,
    pub window: Window,
    /// Index of this descriptor's op in [`Plan::ops`].
    pub op_index: usize,
}

/// What became of one descriptor of the request.
#[derive(Debug)]
pub enum Resolved<'c> {
    /// No limit matched, or the matched limit was replaced.
    None,
    /// `unlimited: true`: always OK, never counted.
    Unlimited,
    Limited(Applied<'c>),
}

/// Everything the store call and the answer need, borrowing the config it
/// was planned under.
#[derive(Debug)]
pub struct Plan<'c> {
    pub now_millis: u64,
    /// The caller's clock when it asked (Sluice's filter sends it). The
    /// answer names the instant the windows were charged at only when some
    /// charged window does not contain this one; the filter's corrections
    /// otherwise name its own instant, which reaches the same windows.
    /// Dynamic metadata on every allowed answer costs ~15 % of throughput.
    pub asked_at_millis: Option<u64>,
    pub mode: CountingMode,
    /// One op per limited descriptor, in descriptor order.
    pub ops: Vec<CounterOp>,
    /// One entry per request descriptor, in request order.
    pub resolved: Vec<Resolved<'c>>,
}

/// Plans `request` under `config` at `now_millis` (the unit tests' entry).
#[cfg(test)]
pub fn plan<'c>(
    config: &'c LimitsConfig,
    request: &RateLimitRequest,
    mode: CountingMode,
    global_quota_mode: bool,
    now_millis: u64,
) -> Result<Plan<'c>, DecisionError> {
    plan_in_window(
        config,
        request,
        mode,
        global_quota_mode,
        &KeyLayout::Sluice,
        (now_millis, now_millis),
    )
}

/// Plans `request` against the windows containing `window_at_millis`
/// (clamped to `now_millis`), its counters named by `keys`: a correction goes
/// to the window its request was admitted in. A window past its correction
/// grace ([`Window::takes_corrections`]) has no counters left: its ops move
/// nothing.
pub fn plan_in_window<'c>(
    config: &'c LimitsConfig,
    request: &RateLimitRequest,
    mode: CountingMode,
    global_quota_mode: bool,
    keys: &KeyLayout,
    (now_millis, window_at_millis): (u64, u64),
) -> Result<Plan<'c>, DecisionError> {
    let window_at_millis = window_at_millis.min(now_millis);
    validate(request)?;
    let matched = request
        .descriptors
        .iter()
        .enumerate()
        .map(|(index, descriptor)| match_descriptor(config, &request.domain, index, descriptor))
        .collect::<Result<Vec<_>, _>>()?;
    let replaced = replaced_names(config, &matched);
    let request_hits = request_hits(request);
    let mut ops = Vec::new();
    let mut resolved = Vec::with_capacity(matched.len());
    for (descriptor, found) in request.descriptors.iter().zip(&matched) {
        let entry = match found {
            None => Resolved::None,
            Some((m, _)) if m.replaceable_name().is_some_and(|n| replaced.contains(n)) => {
                Resolved::None
            }
            Some((m, shared)) => {
                let Some(limit) = limit_ref(m) else {
                    // `unlimited: true`.
                    resolved.push(Resolved::Unlimited);
                    continue;
                };
                let window = Window::containing(limit.unit, window_at_millis);
                let hits = if window.takes_corrections(now_millis) {
                    descriptor_hits(descriptor, request_hits)
                } else {
                    0
                };
                let mut op = counter_op(
                    keys.key(
                        &request.domain,
                        counter_entries(descriptor, shared),
                        limit.unit,
                        window,
                    ),
                    &limit,
                    window,
                    hits,
                    now_millis,
                );
                // Over a quota-mode limit the request may still pass: its
                // other counters must move (the answer decides).
                op.enforced &= !(limit.quota_mode || global_quota_mode);
                ops.push(op);
                Resolved::Limited(Applied {
                    limit,
                    window,
                    op_index: ops.len() - 1,
                })
            }
        };
        resolved.push(entry);
    }
    Ok(Plan {
        now_millis,
        asked_at_millis: None,
        mode,
        ops,
        resolved,
    })
}

fn validate(request: &RateLimitRequest) -> Result<(), DecisionError> {
    if request.domain.is_empty() {
        return Err(DecisionError::InvalidRequest(
            "domain must not be empty".into(),
        ));
    }
    if request.descriptors.is_empty() {
        return Err(DecisionError::InvalidRequest(
            "descriptor list must not be empty".into(),
        ));
    }
    Ok(())
}

/// What one descriptor matched (the config's, or its own override), with
/// its shared (`share_threshold`) entries.
type MatchedWith<'c> = (Cow<'c, Matched>, Vec<(usize, &'c str)>);

/// The limit a match applies, if a limited one: the config's borrowed.
fn limit_ref<'c>(matched: &Cow<'c, Matched>) -> Option<LimitRef<'c>> {
    match matched {
        Cow::Borrowed(config_match) => {
            let config_match: &'c Matched = config_match;
            match config_match {
                Matched::Limited(limit) => Some(LimitRef::Config(limit)),
                Matched::Unlimited { .. } => None,
            }
        }
        Cow::Owned(Matched::Limited(limit)) => Some(LimitRef::Override(limit.clone())),
        Cow::Owned(Matched::Unlimited { .. }) => None,
    }
}

/// The limit one descriptor matches, after its own limit override.
fn match_descriptor<'c>(
    config: &'c LimitsConfig,
    domain: &str,
    index: usize,
    descriptor: &RateLimitDescriptor,
) -> Result<Option<MatchedWith<'c>>, DecisionError> {
    if descriptor.entries.is_empty() {
        return Err(DecisionError::InvalidRequest(format!(
            "descriptor {index} has no entries"
        )));
    }
    let entries = descriptor
        .entries
        .iter()
        .map(|e| (e.key.as_str(), e.value.as_str()));
    let found = config
        .lookup(domain, entries)
        .map(|found| (Cow::Borrowed(found.matched), found.shared));
    match &descriptor.limit {
        None => Ok(found),
        // An override counts per value, as upstream's does.
        Some(overridden) => {
            overridden_limit(found.map(|(m, _)| m), overridden, index).map(|mut limit| {
                limit.stats_key = override_stats_key(domain, descriptor);
                Some((Cow::Owned(Matched::Limited(Arc::new(limit))), Vec::new()))
            })
        }
    }
}

/// upstream's stats key of an overridden limit (`descriptorKey`): the domain
/// and the request's `key` or `key_value` entries, joined by `.`.
fn override_stats_key(domain: &str, descriptor: &RateLimitDescriptor) -> String {
    let mut key = domain.to_string();
    for entry in &descriptor.entries {
        key.push('.');
        key.push_str(&entry.key);
        if !entry.value.is_empty() {
            key.push('_');
            key.push_str(&entry.value);
        }
    }
    key
}

/// A descriptor's own limit: rate and unit from the request, everything else
/// from the limit it matched (if a limited one).
fn overridden_limit(
    found: Option<Cow<'_, Matched>>,
    overridden: &RateLimitOverride,
    index: usize,
) -> Result<Limit, DecisionError> {
    let unit = Unit::from_proto(overridden.unit).ok_or_else(|| {
        DecisionError::InvalidRequest(format!(
            "descriptor {index}: limit override has unknown unit {}",
            overridden.unit
        ))
    })?;
    let base = match found.as_deref() {
        Some(Matched::Limited(limit)) => Some(limit),
        _ => None,
    };
    let name = base
        .as_ref()
        .map(|l| l.name.clone())
        .unwrap_or_else(|| "override".into());
    Ok(Limit {
        named: base.as_ref().is_some_and(|l| l.named),
        shadow_mode: base.as_ref().is_some_and(|l| l.shadow_mode),
        quota_mode: base.as_ref().is_some_and(|l| l.quota_mode),
        metadata: base.as_ref().and_then(|l| l.metadata.clone()),
        detailed_metric: base.as_ref().is_some_and(|l| l.detailed_metric),
        replaces: base
            .as_ref()
            .map(|l| l.replaces.clone())
            .unwrap_or_default(),
        sluice: base.as_ref().map(|l| l.sluice).unwrap_or_default(),
        ..Limit::new(name, unit, overridden.requests_per_unit)
    })
}

/// `replaces`: a named limit named by another matched limit (unlimited
/// ones included, as upstream) steps aside.
fn replaced_names<'a>(
    config: &LimitsConfig,
    matched: &'a [Option<MatchedWith<'_>>],
) -> HashSet<&'a str> {
    if !config.has_replaces() {
        return HashSet::new();
    }
    matched
        .iter()
        .flatten()
        .flat_map(|(m, _)| m.replaces().iter().map(String::as_str))
        .collect()
}

/// The request's hits: `hits_addend`, where 0 means 1 (the RLS API).
fn request_hits(request: &RateLimitRequest) -> u64 {
    if request.hits_addend == 0 {
        1
    } else {
        u64::from(request.hits_addend)
    }
}

/// A descriptor's own `hits_addend` (0 included: a check that counts
/// nothing) or the request's, clamped, negative for a refund.
fn descriptor_hits(descriptor: &RateLimitDescriptor, request_hits: u64) -> i64 {
    let hits = match &descriptor.hits_addend {
        Some(h) => h.value.min(MAX_HITS) as i64,
        None => request_hits.min(MAX_HITS) as i64,
    };
    if descriptor.is_negative_hits {
        -hits
    } else {
        hits
    }
}

/// The entries a descriptor's counter is named by: the request's, with the
/// pattern in place of the value where a `share_threshold` wildcard matched
/// (every value matching it shares the counter).
fn counter_entries<'d>(
    descriptor: &'d RateLimitDescriptor,
    shared: &'d [(usize, &'d str)],
) -> impl Iterator<Item = (&'d str, &'d str)> {
    descriptor.entries.iter().enumerate().map(|(index, e)| {
        let value = shared
            .iter()
            .find(|(at, _)| *at == index)
            .map_or(e.value.as_str(), |(_, pattern)| pattern);
        (e.key.as_str(), value)
    })
}

/// The op of one limited descriptor on the counter `key`.
fn counter_op(key: String, limit: &Limit, window: Window, hits: i64, now_millis: u64) -> CounterOp {
    CounterOp {
        key,
        hits,
        limit: u64::from(limit.requests_per_unit),
        enforced: !limit.shadow_mode,
        ttl_secs: window.ttl_seconds(now_millis),
    }
}
