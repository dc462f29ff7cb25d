//! How answers are shaped: the global switches operators know from
//! envoyproxy/ratelimit, next to Sluice's defaults.

/// The IETF draft's header names, used by both styles.
pub const RATELIMIT_LIMIT: &str = "RateLimit-Limit";
pub const RATELIMIT_REMAINING: &str = "RateLimit-Remaining";
pub const RATELIMIT_RESET: &str = "RateLimit-Reset";
pub const RATELIMIT_POLICY: &str = "RateLimit-Policy";
pub const RETRY_AFTER: &str = "Retry-After";

/// Global answer switches.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ResponseOptions {
    /// Every OVER_LIMIT answer becomes OK (counted in
    /// `sluice_rls_global_shadow_mode_total`); statuses still say which
    /// descriptor was over. envoyproxy/ratelimit's `SHADOW_MODE`.
    pub global_shadow_mode: bool,
    /// Every limit is in quota mode. envoyproxy/ratelimit's `QUOTA_MODE`.
    pub global_quota_mode: bool,
    /// Which rate-limit headers go into `response_headers_to_add`.
    pub headers: HeaderStyle,
    /// Upstream's response dynamic metadata (domain, descriptors,
    /// hitsAddend, the passing limits' `metadata`) next to Sluice's block.
    /// envoyproxy/ratelimit's `RESPONSE_DYNAMIC_METADATA`.
    pub dynamic_metadata: bool,
}

/// Rate-limit response headers.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum HeaderStyle {
    /// `RateLimit-Limit`, `-Remaining`, `-Reset`, `-Policy` of the tightest
    /// enforced limit, and `Retry-After` when over.
    #[default]
    Sluice,
    /// envoyproxy/ratelimit's `LIMIT_RESPONSE_HEADERS_ENABLED`: limit,
    /// remaining and reset of the descriptor with the least left (the last
    /// one over, if any), under configurable names; no `Retry-After`.
    Upstream(UpstreamHeaderNames),
    /// No rate-limit headers (envoyproxy/ratelimit's default).
    Off,
}

/// Header names of [`HeaderStyle::Upstream`] (upstream's `LIMIT_LIMIT_HEADER`,
/// `LIMIT_REMAINING_HEADER`, `LIMIT_RESET_HEADER`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UpstreamHeaderNames {
    pub limit: String,
    pub remaining: String,
    pub reset: String,
}

impl Default for UpstreamHeaderNames {
    fn default() -> Self {
        UpstreamHeaderNames {
            limit: RATELIMIT_LIMIT.into(),
            remaining: RATELIMIT_REMAINING.into(),
            reset: RATELIMIT_RESET.into(),
        }
    }
}
