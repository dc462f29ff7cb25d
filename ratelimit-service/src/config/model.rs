//! The limits file format: envoyproxy/ratelimit's YAML plus Sluice's extension keys.
//!
//! ```yaml
//! domain: sluice
//! descriptors:
//!   - key: tenant
//!     descriptors:
//!       - key: model
//!         rate_limit:
//!           unit: minute
//!           requests_per_unit: 600
//!           name: tenant-model-rpm
//!           sluice: { over_limit: defer, priority: normal }   # Sluice extension
//! ```

use crate::window::Unit;
use serde::Deserialize;
use sluice_admission::descriptors::sluice_metadata;

/// One limits file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DomainFile {
    pub domain: String,
    #[serde(default)]
    pub descriptors: Vec<DescriptorNode>,
}

/// A node of the descriptor tree.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DescriptorNode {
    pub key: String,
    /// Exact value, a prefix wildcard ending in `*`, or absent to match any value.
    #[serde(default)]
    pub value: Option<String>,
    #[serde(default)]
    pub rate_limit: Option<RateLimitSpec>,
    #[serde(default)]
    pub descriptors: Vec<DescriptorNode>,
    /// Count and report, but never answer OVER_LIMIT because of this limit.
    #[serde(default)]
    pub shadow_mode: bool,
    /// Per-value metrics for this node (label `descriptor` carries the full key).
    #[serde(default)]
    pub detailed_metric: bool,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RateLimitSpec {
    #[serde(default)]
    pub unit: Option<Unit>,
    #[serde(default)]
    pub requests_per_unit: Option<u32>,
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub unlimited: bool,
    #[serde(default)]
    pub replaces: Vec<Replaces>,
    /// Sluice extension: what the filter should do with a request over this limit.
    #[serde(default)]
    pub sluice: Option<SluiceExtension>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Replaces {
    pub name: String,
}

/// Sluice's extension keys of a limit, handed to callers in `dynamic_metadata`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SluiceExtension {
    #[serde(default)]
    pub over_limit: OverLimitAction,
    #[serde(default)]
    pub priority: Priority,
}

/// What to do with a request that is over this limit.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OverLimitAction {
    /// Answer 429 (what any RLS client does with OVER_LIMIT).
    #[default]
    Reject,
    /// Park the request in its tenant × model queue and answer it later.
    Defer,
}

impl OverLimitAction {
    pub const fn as_str(self) -> &'static str {
        match self {
            OverLimitAction::Reject => sluice_metadata::ACTION_REJECT,
            OverLimitAction::Defer => sluice_metadata::ACTION_DEFER,
        }
    }
}

/// Priority class of traffic matching a limit: the deferral contract's one
/// definition (high waits longest when deferred, low fails fast).
pub use sluice_contract::Priority;
