//! What the admission logic needs from its host (Envoy through proxy-wasm, or
//! a test double).

use crate::errors::LocalReply;

/// Counters the filter exports (as Envoy stats in the Wasm build).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Metric {
    Admitted,
    Rejected,
    Deferred,
    RlsFailureAllowed,
    RlsFailureDenied,
    BadRequest,
    BodyTooLarge,
    MissingTenant,
    Reconciled,
    PromptTokens,
    BodyTimeout,
    /// Answers without usage, charged their prompt plus the output counted as it passed.
    CountedOutput,
    /// Prompts whose counting budget ran out: the rest charged its bytes.
    CountBounded,
    /// Prompts over the model's `max_prompt_tokens` (400 `context_length_exceeded`).
    PromptTooLong,
    /// Refused (429) by the VM's memory of OVER_LIMIT answers, without a call.
    LocalRejected,
    /// Deferred by that memory, without a call.
    LocalDeferred,
    /// A tenant property that was an object or a list (401 `invalid_tenant`).
    InvalidTenant,
    /// Prompts of a `model_tokenizers` model counted with the documented
    /// estimate (o200k_base and OpenAI's chat recipe) because its
    /// vocabulary did not reach this front door.
    TokenizerFallback,
}

impl Metric {
    pub const ALL: [Metric; 18] = [
        Metric::Admitted,
        Metric::Rejected,
        Metric::Deferred,
        Metric::RlsFailureAllowed,
        Metric::RlsFailureDenied,
        Metric::BadRequest,
        Metric::BodyTooLarge,
        Metric::MissingTenant,
        Metric::Reconciled,
        Metric::PromptTokens,
        Metric::BodyTimeout,
        Metric::CountedOutput,
        Metric::CountBounded,
        Metric::PromptTooLong,
        Metric::LocalRejected,
        Metric::LocalDeferred,
        Metric::InvalidTenant,
        Metric::TokenizerFallback,
    ];

    /// Short event name (`admitted`, `bad_request`, ...): the stat name
    /// without its `sluice_` prefix and `_total` suffix.
    pub fn event(self) -> &'static str {
        let name = self.name();
        name.strip_prefix("sluice_")
            .and_then(|n| n.strip_suffix("_total"))
            .unwrap_or(name)
    }

    /// Stat name (Envoy shows it as `wasmcustom.<name>`).
    pub fn name(self) -> &'static str {
        match self {
            Metric::Admitted => "sluice_admitted_total",
            Metric::Rejected => "sluice_rejected_total",
            Metric::Deferred => "sluice_deferred_total",
            Metric::RlsFailureAllowed => "sluice_rls_failure_allowed_total",
            Metric::RlsFailureDenied => "sluice_rls_failure_denied_total",
            Metric::BadRequest => "sluice_bad_request_total",
            Metric::BodyTooLarge => "sluice_body_too_large_total",
            Metric::MissingTenant => "sluice_missing_tenant_total",
            Metric::Reconciled => "sluice_reconciled_total",
            Metric::PromptTokens => "sluice_prompt_tokens_total",
            Metric::BodyTimeout => "sluice_body_timeout_total",
            Metric::CountedOutput => "sluice_counted_output_total",
            Metric::CountBounded => "sluice_count_bounded_total",
            Metric::PromptTooLong => "sluice_prompt_too_long_total",
            Metric::LocalRejected => "sluice_local_rejected_total",
            Metric::LocalDeferred => "sluice_local_deferred_total",
            Metric::InvalidTenant => "sluice_invalid_tenant_total",
            Metric::TokenizerFallback => "sluice_tokenizer_fallback_total",
        }
    }
}

/// The per-tenant usage counter (Envoy keeps it as
/// `wasmcustom.sluice_tenant_tokens_total.kind.<kind>.tenant.<tenant>`; the
/// `stats_tags` of `envoy/sluice-filter.yaml` turn `kind` and `tenant` into
/// tags, so Prometheus shows `sluice_tenant_tokens_total{kind,tenant}`).
pub const TENANT_TOKENS_STAT: &str = "sluice_tenant_tokens_total";
/// The tenant that tenants beyond the filter's `tenant_usage_series` cap are
/// counted as (no tenant id can take this value: `~` only appears in a
/// sanitized id before 16 hex digits).
pub const OTHER_TENANTS: &str = "~other";

/// What a tenant's usage counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum UsageKind {
    /// Prompt tokens (cached included).
    Prompt,
    Completion,
    /// Prompt tokens served from the backend's cache (part of `Prompt`).
    Cached,
}

impl UsageKind {
    pub const ALL: [UsageKind; 3] = [UsageKind::Prompt, UsageKind::Completion, UsageKind::Cached];

    pub fn as_str(self) -> &'static str {
        match self {
            UsageKind::Prompt => "prompt",
            UsageKind::Completion => "completion",
            UsageKind::Cached => "cached",
        }
    }

    /// The stat name of `tenant`'s counter of this kind.
    pub fn stat_name(self, tenant: &str) -> String {
        format!(
            "{TENANT_TOKENS_STAT}.kind.{}.tenant.{tenant}",
            self.as_str()
        )
    }
}

/// What one answer used, as reconciliation settled it: the usage the
/// backend reported, else the prompt count and the output counted as it passed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TenantUsage {
    pub prompt: u64,
    pub completion: u64,
    pub cached: u64,
}

impl TenantUsage {
    pub fn of(&self, kind: UsageKind) -> u64 {
        match kind {
            UsageKind::Prompt => self.prompt,
            UsageKind::Completion => self.completion,
            UsageKind::Cached => self.cached,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogLevel {
    Debug,
    Info,
    Warn,
    Error,
}

/// Operations on the current HTTP stream.
pub trait Host {
    fn request_header(&self, name: &str) -> Option<String>;
    /// Names of every request header (lowercase, as Envoy keeps them).
    fn request_header_names(&self) -> Vec<String>;
    fn set_request_header(&mut self, name: &str, value: &str);
    fn remove_request_header(&mut self, name: &str);
    fn add_response_header(&mut self, name: &str, value: &str);
    fn response_header(&self, name: &str) -> Option<String>;
    /// An Envoy property (`["metadata", "filter_metadata", ...]`), raw bytes.
    fn property(&self, path: &[&str]) -> Option<Vec<u8>>;
    /// The buffered request body, `size` bytes.
    fn request_body(&self, size: usize) -> Option<Vec<u8>>;
    /// The current response body chunk, `size` bytes.
    fn response_body_chunk(&self, size: usize) -> Option<Vec<u8>>;
    /// Replace the whole buffered request body; `false` when this host
    /// cannot change bodies (ext_authz), and nothing changed.
    fn replace_request_body(&mut self, _body: &[u8]) -> bool {
        false
    }
    /// Replace the current response body chunk (`size` bytes) with `bytes`;
    /// `false` when this host cannot.
    fn replace_response_body_chunk(&mut self, _size: usize, _bytes: &[u8]) -> bool {
        false
    }
    fn remove_response_header(&mut self, _name: &str) {}
    /// Start a gRPC call to the RLS, saying when the filter asked (Unix
    /// milliseconds); returns its token.
    fn dispatch_rls(
        &mut self,
        message: &[u8],
        timeout_ms: u64,
        asked_at_ms: u64,
    ) -> Result<u32, String>;
    /// Hand a reconciliation call to whoever outlives this stream (the root
    /// context), with when the request was admitted (Unix milliseconds).
    fn send_reconcile(&mut self, message: Vec<u8>, admitted_at_ms: u64);
    fn send_local_reply(&mut self, reply: &LocalReply);
    /// Let a paused request go on.
    fn resume_request(&mut self);
    fn count(&mut self, metric: Metric, by: u64);
    /// Add an answer's usage to `tenant`'s usage counters (hosts that never
    /// see answers have none).
    fn count_tenant_usage(&mut self, _tenant: &str, _usage: TenantUsage) {}
    /// Wall-clock time (Unix nanoseconds): times the counting step and
    /// dates the deferral token.
    fn now_nanos(&self) -> u64;
    /// 128 bits from a cryptographically secure source (request ids);
    /// `None` when the host has none (the request is then refused).
    fn random_128(&mut self) -> Option<[u8; 16]>;
    fn log(&self, level: LogLevel, message: &str);
}
