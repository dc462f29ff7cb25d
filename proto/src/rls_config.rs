//! envoyproxy/ratelimit's configuration resource, as an xDS management
//! server (Envoy Gateway, go-control-plane) sends it.
//!
//! Mirror of `api/ratelimit/config/ratelimit/v3/rls_conf.proto` in
//! github.com/envoyproxy/ratelimit (Apache-2.0), package
//! `ratelimit.config.ratelimit.v3`. Field numbers must never change.

use crate::pb::google::protobuf::Struct;

/// The `type_url` of [`RateLimitConfig`] in a `DiscoveryResponse`.
pub const RATE_LIMIT_CONFIG_TYPE_URL: &str =
    "type.googleapis.com/ratelimit.config.ratelimit.v3.RateLimitConfig";

/// One domain's limits.
#[derive(Clone, PartialEq, prost::Message)]
pub struct RateLimitConfig {
    /// Resource name (unique per management server).
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(string, tag = "2")]
    pub domain: String,
    #[prost(message, repeated, tag = "3")]
    pub descriptors: Vec<RateLimitDescriptor>,
}

/// A node of the descriptor tree (the YAML file's descriptor).
#[derive(Clone, PartialEq, prost::Message)]
pub struct RateLimitDescriptor {
    #[prost(string, tag = "1")]
    pub key: String,
    #[prost(string, tag = "2")]
    pub value: String,
    #[prost(message, optional, tag = "3")]
    pub rate_limit: Option<RateLimitPolicy>,
    #[prost(message, repeated, tag = "4")]
    pub descriptors: Vec<RateLimitDescriptor>,
    #[prost(bool, tag = "5")]
    pub shadow_mode: bool,
    #[prost(bool, tag = "6")]
    pub detailed_metric: bool,
    #[prost(bool, tag = "7")]
    pub quota_mode: bool,
    #[prost(message, optional, tag = "8")]
    pub metadata: Option<Struct>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct RateLimitPolicy {
    /// `RateLimitUnit`: UNKNOWN 0, SECOND 1, MINUTE 2, HOUR 3, DAY 4,
    /// MONTH 5, YEAR 6, WEEK 7 (the RLS response's unit numbers).
    #[prost(int32, tag = "1")]
    pub unit: i32,
    #[prost(uint32, tag = "2")]
    pub requests_per_unit: u32,
    #[prost(bool, tag = "3")]
    pub unlimited: bool,
    #[prost(string, tag = "4")]
    pub name: String,
    #[prost(message, repeated, tag = "5")]
    pub replaces: Vec<RateLimitReplace>,
    /// Sluice's extension (the YAML `sluice:` block). Not in upstream's
    /// proto: a tag far above its fields, which upstream skips as unknown.
    #[prost(message, optional, tag = "1000")]
    pub sluice: Option<SluiceExtension>,
}

/// The `sluice:` block of a limit: `over_limit` (`reject`|`defer`) and
/// `priority` (`low`|`normal`|`high`); empty means the default.
#[derive(Clone, PartialEq, prost::Message)]
pub struct SluiceExtension {
    #[prost(string, tag = "1")]
    pub over_limit: String,
    #[prost(string, tag = "2")]
    pub priority: String,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct RateLimitReplace {
    #[prost(string, tag = "1")]
    pub name: String,
}
