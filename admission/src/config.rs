//! The filter's plugin configuration (the `configuration` JSON of Envoy's Wasm
//! plugin, or Istio's `WasmPlugin.spec.pluginConfig`).

use crate::deferral::Secret;
pub use crate::descriptors::Budget;
pub use crate::over_limit::OverLimitMemoryConfig;
use serde::Deserialize;
use std::collections::BTreeMap;

/// Where the tenant comes from. Never the request body: the tenant must be
/// set by something the mesh trusts (an authn filter, a JWT claim).
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum TenantSource {
    /// A request header, e.g. one set by an ext_authz/authn filter. Make sure
    /// clients cannot set it themselves (strip it at the edge).
    Header(String),
    /// An Envoy property path, e.g. a JWT claim the jwt_authn filter put in
    /// dynamic metadata:
    /// `["metadata", "filter_metadata", "envoy.filters.http.jwt_authn", "payload", "sub"]`.
    Property(Vec<String>),
}

/// What a failed rate-limit call does. `failure_mode` applies to a
/// service that is down (the call failed fast and no call of this worker
/// was answered for `rls_down_after_ms`); `failure_mode_on_timeout` to a
/// call that ran out its deadline; any other failure (the service answers
/// other calls) is denied, so that load can never open the gate.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureMode {
    /// Let the request through (uncounted).
    #[default]
    Allow,
    /// Answer 503 `rate_limit_unavailable`.
    Deny,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UnknownPaths {
    /// Paths that are not OpenAI inference endpoints go through untouched.
    #[default]
    Pass,
    /// ... or are answered 404.
    Reject,
}

#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OutputTokens {
    /// Estimate when the request sets no max_tokens / max_completion_tokens.
    #[serde(default = "default_output_tokens")]
    pub default: u64,
    /// Per-model defaults (exact name or `prefix*`).
    #[serde(default)]
    pub per_model: BTreeMap<String, u64>,
    /// Upper bound of any estimate (a request asking for 1M output tokens is
    /// charged this much up front; reconciliation corrects it).
    #[serde(default = "default_output_cap")]
    pub max: u64,
}

impl Default for OutputTokens {
    fn default() -> Self {
        OutputTokens {
            default: default_output_tokens(),
            per_model: BTreeMap::new(),
            max: default_output_cap(),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Deferral {
    /// When false, OVER_LIMIT answers with action `defer` are rejected (429).
    #[serde(default = "yes")]
    pub enabled: bool,
    /// Header set on deferred requests; the route to the deferral cluster
    /// matches on it.
    #[serde(default = "default_marker_header")]
    pub marker_header: String,
    /// Secrets shared with sluice-rls (`--deferral-secret-file`): the first
    /// signs the deferral token the endpoint checks; list two while rotating.
    /// Without one, nothing is deferred: such requests get 429.
    #[serde(default)]
    pub secrets: Vec<Secret>,
}

impl Deferral {
    /// Deferring needs both the switch and a secret to sign with.
    pub fn active(&self) -> bool {
        self.enabled && !self.secrets.is_empty()
    }
}

impl Default for Deferral {
    fn default() -> Self {
        Deferral {
            enabled: true,
            marker_header: default_marker_header(),
            secrets: Vec::new(),
        }
    }
}

/// A model's Hugging Face tokenizer (`model_tokenizers`).
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelTokenizer {
    /// Path of the model's `tokenizer.json` (byte-level BPE: Llama 3,
    /// Qwen2/2.5/3, DeepSeek V3, gpt-oss).
    pub tokenizer_json: String,
    /// The model's chat template, one of [`CHAT_TEMPLATES`]: `llama3`,
    /// `llama3_1` (Llama 3.1 and 3.3, with their system block), `qwen3`
    /// (ChatML), `deepseek_v3`, `gpt_oss` (harmony), `mistral_v3_tekken`
    /// (Mistral NeMo, Pixtral: a `tekken.json`). A chat of text
    /// messages is counted as the template renders it; without one,
    /// OpenAI's recipe (3 per message, 3 to prime the reply).
    #[serde(default)]
    pub chat_template: Option<String>,
}

/// The chat templates `model_tokenizers` accepts (sluice-tokenizer's
/// `ChatTemplate` names).
pub const CHAT_TEMPLATES: [&str; 6] = [
    "llama3",
    "llama3_1",
    "qwen3",
    "deepseek_v3",
    "gpt_oss",
    "mistral_v3_tekken",
];

/// Plugin configuration. Every field has a default except the tenant source.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FilterConfig {
    /// Envoy cluster (HTTP/2) of the rate-limit service.
    #[serde(default = "default_rls_cluster")]
    pub rls_cluster: String,
    #[serde(default = "default_rls_timeout_ms")]
    pub rls_timeout_ms: u64,
    /// RLS domain of Sluice's descriptors.
    #[serde(default = "default_domain")]
    pub domain: String,
    pub tenant: TenantSource,
    /// Without a tenant: 401 when true, else the request counts as `anonymous_tenant`.
    #[serde(default = "yes")]
    pub tenant_required: bool,
    #[serde(default = "default_anonymous")]
    pub anonymous_tenant: String,
    /// Header that overrides the body's `model` (e.g. set by a router).
    #[serde(default)]
    pub model_header: Option<String>,
    /// Larger bodies get 413 before anything is parsed.
    #[serde(default = "default_max_body")]
    pub max_body_bytes: usize,
    /// A body still incomplete this long after the headers gets 408.
    #[serde(default = "default_body_timeout_ms")]
    pub body_timeout_ms: u64,
    /// A rate-limit service that is down (see [`FailureMode`]).
    #[serde(default)]
    pub failure_mode: FailureMode,
    /// A rate-limit call that ran out `rls_timeout_ms`: denied unless set
    /// to `allow` (a slow service is one under load, which a caller can cause).
    #[serde(default = "deny")]
    pub failure_mode_on_timeout: FailureMode,
    /// How long without any answer from the rate-limit service (per VM,
    /// i.e. Envoy worker) before a fast failure counts as the service being
    /// down, which `failure_mode` decides.
    #[serde(default = "default_rls_down_after_ms")]
    pub rls_down_after_ms: u64,
    /// Bytes of prompt text counted exactly per request; the rest is
    /// charged its byte length (never fewer tokens than it has). Bounds the
    /// time one request's counting holds an Envoy worker.
    #[serde(default = "default_count_budget_bytes")]
    pub count_budget_bytes: usize,
    /// Longest prompt per model (exact name or `prefix*`), in tokens, e.g.
    /// the model's context window: longer prompts get 400
    /// `context_length_exceeded`, before counting when their lower bound
    /// already exceeds it.
    #[serde(default)]
    pub max_prompt_tokens: BTreeMap<String, u64>,
    /// What the VM remembers of OVER_LIMIT answers (see [`crate::over_limit`]).
    #[serde(default)]
    pub over_limit_memory: OverLimitMemoryConfig,
    #[serde(default)]
    pub unknown_paths: UnknownPaths,
    /// Token cost charged per image part (OpenAI's low-detail cost is 85,
    /// a 1024×1024 high-detail image 765).
    #[serde(default = "default_image_tokens")]
    pub image_tokens: u64,
    /// Encoding of models OpenAI's table does not know (exact name or `prefix*`):
    /// `cl100k_base` or `o200k_base`.
    #[serde(default)]
    pub model_encodings: BTreeMap<String, String>,
    /// Encoding for any other unknown model; without it such requests get 400.
    #[serde(default)]
    pub default_encoding: Option<String>,
    /// Hugging Face tokenizers of open models (exact name or `prefix*`),
    /// consulted before `model_encodings`:
    /// `{"llama-3*": {"tokenizer_json": "/etc/sluice/llama3/tokenizer.json"}}`.
    /// Read at start by the native front door (ext_authz); the Wasm filter
    /// cannot read files and refuses the key for now.
    #[serde(default)]
    pub model_tokenizers: BTreeMap<String, ModelTokenizer>,
    #[serde(default)]
    pub output_tokens: OutputTokens,
    #[serde(default)]
    pub deferral: Deferral,
    /// Charge or refund the difference between estimated and real usage when
    /// the response ends.
    #[serde(default = "yes")]
    pub reconcile: bool,
    /// Streamed chat/completions requests without
    /// `stream_options.include_usage: true` get it added (so the answer
    /// carries usage to reconcile), and the answer loses what the client
    /// did not ask for. Needs `reconcile`.
    #[serde(default = "yes")]
    pub add_stream_usage: bool,
    /// The token budgets sent to sluice-rls (`tokens: total | input |
    /// output` descriptors): list those your limits file sets.
    #[serde(default = "default_budgets")]
    pub token_budgets: Vec<Budget>,
    /// How much a cached prompt token (`prompt_tokens_details.cached_tokens`)
    /// counts when usage is reconciled: 1.0 in full, 0.0 not at all.
    #[serde(default)]
    pub cached_tokens_weight: Weight,
    /// Most tenants with their own usage counters
    /// (`sluice_tenant_tokens_total{tenant,kind}`), across Envoy's workers;
    /// later tenants are counted as `~other`. 0: no per-tenant counters.
    #[serde(default = "default_tenant_usage_series")]
    pub tenant_usage_series: u32,
    /// Add `x-sluice-count-micros` (time spent counting prompt tokens) to the
    /// upstream request and the client's response: for benchmarks and debugging.
    #[serde(default)]
    pub timing_headers: bool,
}

fn default_tenant_usage_series() -> u32 {
    1000
}

/// A weight in 0.0..=1.0, kept in millionths so the configuration stays `Eq`
/// and charges are integers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Weight(u64);

impl Weight {
    pub const ONE: Weight = Weight(1_000_000);

    /// `tokens` weighted, rounded up (a cached token is never free unless the weight is 0).
    pub fn apply(self, tokens: u64) -> u64 {
        let weighted = u128::from(tokens) * u128::from(self.0);
        u64::try_from(weighted.div_ceil(1_000_000)).unwrap_or(u64::MAX)
    }
}

impl Default for Weight {
    fn default() -> Self {
        Weight::ONE
    }
}

impl<'de> Deserialize<'de> for Weight {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = f64::deserialize(deserializer)?;
        if !(0.0..=1.0).contains(&value) {
            return Err(serde::de::Error::custom(format!(
                "a weight must be between 0.0 and 1.0, got {value}"
            )));
        }
        Ok(Weight((value * 1_000_000.0).round() as u64))
    }
}

fn default_budgets() -> Vec<Budget> {
    vec![Budget::Total]
}

fn yes() -> bool {
    true
}
fn deny() -> FailureMode {
    FailureMode::Deny
}
/// Exact counting per request, in bytes of prompt text. Measured in Envoy
/// (docs/filter.md, Counting budget): the slowest text found costs about
/// 0.25 µs per budget byte in V8, so 128 KiB holds a worker about 30 ms at
/// worst, and 128 KiB of ordinary text (about 30,000 tokens) counts in
/// under 2 ms.
pub const DEFAULT_COUNT_BUDGET_BYTES: usize = 128 * 1024;
fn default_count_budget_bytes() -> usize {
    DEFAULT_COUNT_BUDGET_BYTES
}
fn default_rls_down_after_ms() -> u64 {
    5_000
}
fn default_output_tokens() -> u64 {
    512
}
fn default_output_cap() -> u64 {
    32_768
}
fn default_marker_header() -> String {
    crate::deferral::DEFAULT_MARKER_HEADER.into()
}
fn default_rls_cluster() -> String {
    "sluice_rls".into()
}
fn default_rls_timeout_ms() -> u64 {
    250
}
fn default_domain() -> String {
    "sluice".into()
}
fn default_anonymous() -> String {
    "anonymous".into()
}
/// The one maximum request body of Sluice (filter, ext_authz, deferral
/// endpoint); the example Envoy configs buffer exactly this much.
pub const DEFAULT_MAX_BODY_BYTES: usize = 4 * 1024 * 1024;
/// How long after the headers a request body may take to arrive.
pub const DEFAULT_BODY_TIMEOUT_MS: u64 = 10_000;

fn default_max_body() -> usize {
    DEFAULT_MAX_BODY_BYTES
}
fn default_body_timeout_ms() -> u64 {
    DEFAULT_BODY_TIMEOUT_MS
}
fn default_image_tokens() -> u64 {
    sluice_openai::DEFAULT_IMAGE_TOKENS
}

/// The encodings Sluice can count with.
pub const ENCODINGS: [&str; 2] = ["cl100k_base", "o200k_base"];

impl FilterConfig {
    /// Things that are allowed but probably not meant, for the log.
    pub fn warnings(&self) -> Vec<String> {
        let mut warnings = Vec::new();
        if self.deferral.enabled && self.deferral.secrets.is_empty() {
            warnings.push(
                "deferral.secrets is empty: requests a limit would defer are rejected with 429 \
                 (set the secret sluice-rls's --deferral-secret-file holds)"
                    .to_string(),
            );
        }
        if self.deferral.secrets.iter().any(Secret::is_example) {
            warnings.push(
                "deferral.secrets holds the public example secret: replace it outside a test setup"
                    .to_string(),
            );
        }
        warnings
    }

    /// Parse and validate; the error says what is wrong in words an operator
    /// can act on.
    pub fn from_json(bytes: &[u8]) -> Result<FilterConfig, String> {
        let config: FilterConfig = serde_json::from_slice(bytes)
            .map_err(|e| format!("invalid Sluice filter configuration: {e}"))?;
        config.validate()?;
        Ok(config)
    }

    fn validate(&self) -> Result<(), String> {
        self.validate_names()
            .and_then(|()| self.validate_bounds())
            .and_then(|()| self.validate_counting())
            .and_then(|()| {
                for (i, secret) in self.deferral.secrets.iter().enumerate() {
                    secret
                        .validate()
                        .map_err(|why| format!("deferral.secrets[{i}]: {why}"))?;
                }
                Ok(())
            })
            .map_err(|m| format!("invalid Sluice filter configuration: {m}"))
    }

    /// The cluster, domain, tenant source and header names.
    fn validate_names(&self) -> Result<(), String> {
        if self.rls_cluster.trim().is_empty() {
            return Err("rls_cluster must name an Envoy cluster".into());
        }
        if self.domain.is_empty() || self.domain.contains(['{', '}']) {
            return Err("domain must be non-empty and without braces".into());
        }
        match &self.tenant {
            TenantSource::Header(h) if !valid_header_name(h) => {
                return Err(format!(
                    "tenant header '{h}' is not a lowercase header name"
                ))
            }
            TenantSource::Property(path) if path.is_empty() => {
                return Err("tenant property path is empty".into())
            }
            _ => {}
        }
        for header in self
            .model_header
            .iter()
            .chain([&self.deferral.marker_header])
        {
            if !valid_header_name(header) {
                return Err(format!("'{header}' is not a lowercase header name"));
            }
        }
        Ok(())
    }

    /// Every deadline and byte limit within its documented range.
    fn validate_bounds(&self) -> Result<(), String> {
        const MIB_64: usize = 64 * 1024 * 1024;
        within("rls_timeout_ms", self.rls_timeout_ms, 1, 60_000)?;
        within("rls_down_after_ms", self.rls_down_after_ms, 100, 600_000)?;
        within("body_timeout_ms", self.body_timeout_ms, 100, 600_000)?;
        within("max_body_bytes", self.max_body_bytes, 1024, MIB_64)?;
        within("count_budget_bytes", self.count_budget_bytes, 1024, MIB_64)?;
        within(
            "over_limit_memory.max_ms",
            self.over_limit_memory.max_ms,
            0,
            3_600_000,
        )
    }

    /// Encodings, budgets and output bounds: what counting needs.
    fn validate_counting(&self) -> Result<(), String> {
        if let Some((model, _)) = self.max_prompt_tokens.iter().find(|(_, &max)| max == 0) {
            return Err(format!("max_prompt_tokens.{model} must be positive"));
        }
        for (model, encoding) in self
            .model_encodings
            .iter()
            .map(|(m, e)| (m.as_str(), e))
            .chain(
                self.default_encoding
                    .iter()
                    .map(|e| ("default_encoding", e)),
            )
        {
            if !ENCODINGS.contains(&encoding.as_str()) {
                return Err(format!(
                    "{model}: unknown encoding '{encoding}' (use one of {ENCODINGS:?})"
                ));
            }
        }
        if let Some((model, _)) = self
            .model_tokenizers
            .iter()
            .find(|(_, t)| t.tokenizer_json.is_empty())
        {
            return Err(format!("model_tokenizers.{model}.tokenizer_json is empty"));
        }
        for (model, t) in &self.model_tokenizers {
            if let Some(template) = &t.chat_template {
                if !CHAT_TEMPLATES.contains(&template.as_str()) {
                    return Err(format!(
                        "model_tokenizers.{model}.chat_template: unknown template '{template}' \
                         (use one of {CHAT_TEMPLATES:?})"
                    ));
                }
            }
            // One file, one template: the tokenizer is built once per file.
            if let Some((other, _)) = self.model_tokenizers.iter().find(|(_, u)| {
                u.tokenizer_json == t.tokenizer_json && u.chat_template != t.chat_template
            }) {
                return Err(format!(
                    "model_tokenizers.{model} and model_tokenizers.{other} name the same \
                     tokenizer_json with different chat_template"
                ));
            }
        }
        if self.token_budgets.is_empty() {
            return Err("token_budgets must list at least one of total, input, output".into());
        }
        let mut budgets = self.token_budgets.clone();
        budgets.sort();
        budgets.dedup();
        if budgets.len() != self.token_budgets.len() {
            return Err("token_budgets lists a budget twice".into());
        }
        if self.output_tokens.max == 0 {
            return Err("output_tokens.max must be positive".into());
        }
        Ok(())
    }

    /// Encodings the configuration can ever ask for besides OpenAI's table
    /// (the filter builds those tokenizers at VM start).
    pub fn extra_encodings(&self) -> impl Iterator<Item = &str> {
        self.model_encodings
            .values()
            .chain(self.default_encoding.iter())
            .map(String::as_str)
    }

    /// Configured encoding for `model`: its `model_tokenizers` entry (the
    /// encoding is then named by the `tokenizer_json` path), else its
    /// `model_encodings` entry; in each, the exact entry, then the longest
    /// `prefix*`.
    pub fn configured_encoding(&self, model: &str) -> Option<&str> {
        lookup_pattern(&self.model_tokenizers, model)
            .map(|t| t.tokenizer_json.as_str())
            .or_else(|| lookup_pattern(&self.model_encodings, model).map(String::as_str))
    }

    /// The encoding a model's tokens are counted with: the configured one,
    /// else OpenAI's (`openai`, from the model table), else the default.
    pub fn encoding_for<'a>(&'a self, model: &str, openai: Option<&'a str>) -> Option<&'a str> {
        self.configured_encoding(model)
            .or(openai)
            .or(self.default_encoding.as_deref())
    }

    /// The `tokenizer.json` files `model_tokenizers` names (each once),
    /// with their chat template.
    pub fn tokenizer_files(&self) -> impl Iterator<Item = (&str, Option<&str>)> {
        let mut files: Vec<(&str, Option<&str>)> = self
            .model_tokenizers
            .values()
            .map(|t| (t.tokenizer_json.as_str(), t.chat_template.as_deref()))
            .collect();
        files.sort_unstable();
        files.dedup();
        files.into_iter()
    }

    /// The longest prompt `model` accepts, if configured.
    pub fn max_prompt_for(&self, model: &str) -> Option<u64> {
        lookup_pattern(&self.max_prompt_tokens, model).copied()
    }

    /// Output-token estimate for a request: what it asked for, else the
    /// model's default, capped.
    pub fn output_estimate(&self, model: &str, requested: Option<u64>) -> u64 {
        let fallback = lookup_pattern(&self.output_tokens.per_model, model)
            .copied()
            .unwrap_or(self.output_tokens.default);
        requested.unwrap_or(fallback).min(self.output_tokens.max)
    }
}

/// Exact key first, then the longest `prefix*` key that matches.
fn lookup_pattern<'a, V>(map: &'a BTreeMap<String, V>, name: &str) -> Option<&'a V> {
    if let Some(v) = map.get(name) {
        return Some(v);
    }
    map.iter()
        .filter_map(|(k, v)| k.strip_suffix('*').map(|prefix| (prefix, v)))
        .filter(|(prefix, _)| name.starts_with(prefix))
        .max_by_key(|(prefix, _)| prefix.len())
        .map(|(_, v)| v)
}

/// `value` of setting `name` in `min..=max`, or an error that says both.
fn within<T: PartialOrd + std::fmt::Display>(
    name: &str,
    value: T,
    min: T,
    max: T,
) -> Result<(), String> {
    if value < min || value > max {
        return Err(format!("{name} must be {min}..{max}, got {value}"));
    }
    Ok(())
}

/// A lowercase HTTP header name (what the filter's header settings accept).
pub fn valid_header_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
}

#[cfg(test)]
#[allow(clippy::indexing_slicing)] // tests fail loudly
mod tests {
    use super::*;

    #[test]
    fn minimal_config_gets_defaults() {
        let c = FilterConfig::from_json(br#"{"tenant": {"header": "x-tenant-id"}}"#).unwrap();
        assert_eq!(c.rls_cluster, "sluice_rls");
        assert_eq!(c.domain, "sluice");
        assert_eq!(c.failure_mode, FailureMode::Allow);
        assert!(c.tenant_required && c.reconcile && c.deferral.enabled);
        assert!(c.add_stream_usage);
        assert_eq!(c.token_budgets, vec![Budget::Total]);
        assert_eq!(c.cached_tokens_weight, Weight::ONE);
        assert_eq!(c.tenant_usage_series, 1000);
        assert_eq!((c.max_body_bytes, c.body_timeout_ms), (4 << 20, 10_000));
        assert_eq!(c.output_estimate("gpt-4o", None), 512);
        assert_eq!(c.output_estimate("gpt-4o", Some(1_000_000)), 32_768);
    }

    #[test]
    fn the_new_limits_have_closed_defaults_and_old_configs_still_parse() {
        let c = FilterConfig::from_json(
            br#"{"tenant": {"header": "x-tenant-id"}, "failure_mode": "allow", "rls_timeout_ms": 250}"#,
        )
        .unwrap();
        assert_eq!(c.failure_mode, FailureMode::Allow);
        assert_eq!(c.failure_mode_on_timeout, FailureMode::Deny);
        assert_eq!(c.rls_down_after_ms, 5_000);
        assert_eq!(c.count_budget_bytes, DEFAULT_COUNT_BUDGET_BYTES);
        assert_eq!(c.over_limit_memory, OverLimitMemoryConfig::default());
        assert_eq!(c.max_prompt_for("gpt-4o"), None);
        let c = FilterConfig::from_json(
            br#"{"tenant": {"header": "t"}, "max_prompt_tokens": {"gpt-4o*": 128000, "gpt-4o-mini": 64000},
                 "over_limit_memory": {"max_entries": 10, "max_bytes": 100000, "max_ms": 0},
                 "failure_mode_on_timeout": "allow", "count_budget_bytes": 1048576}"#,
        )
        .unwrap();
        assert_eq!(c.max_prompt_for("gpt-4o-mini"), Some(64_000));
        assert_eq!(c.max_prompt_for("gpt-4o-2024"), Some(128_000));
        assert_eq!(c.failure_mode_on_timeout, FailureMode::Allow);
        assert_eq!(c.over_limit_memory.max_entries, 10);
        for (json, why) in [
            (r#""count_budget_bytes": 10"#, "count_budget_bytes"),
            (r#""max_prompt_tokens": {"m": 0}"#, "max_prompt_tokens.m"),
            (r#""rls_down_after_ms": 1"#, "rls_down_after_ms"),
            (
                r#""over_limit_memory": {"max_ms": 99999999}"#,
                "over_limit_memory.max_ms",
            ),
        ] {
            let text = format!(r#"{{"tenant": {{"header": "t"}}, {json}}}"#);
            let error = FilterConfig::from_json(text.as_bytes()).unwrap_err();
            assert!(error.contains(why), "{json}: {error}");
        }
    }

    #[test]
    fn model_tokenizers_come_before_model_encodings() {
        let c = FilterConfig::from_json(
            br#"{"tenant": {"header": "t"},
                 "model_encodings": {"llama*": "cl100k_base"},
                 "model_tokenizers": {"llama-3*": {"tokenizer_json": "/t/llama3.json"},
                                      "qwen3-8b": {"tokenizer_json": "/t/qwen3.json"},
                                      "qwen3*": {"tokenizer_json": "/t/qwen3.json"}}}"#,
        )
        .unwrap();
        assert_eq!(
            c.configured_encoding("llama-3.1-8b"),
            Some("/t/llama3.json")
        );
        assert_eq!(c.configured_encoding("llama-2"), Some("cl100k_base"));
        assert_eq!(c.configured_encoding("qwen3-8b"), Some("/t/qwen3.json"));
        assert_eq!(
            c.tokenizer_files().collect::<Vec<_>>(),
            [("/t/llama3.json", None), ("/t/qwen3.json", None)]
        );
        for bad in [
            r#""model_tokenizers": {"x": {"tokenizer_json": ""}}"#,
            r#""model_tokenizers": {"x": {"path": "/t"}}"#,
            r#""model_tokenizers": {"x": {"tokenizer_json": "/t", "chat_template": "vicuna"}}"#,
            r#""model_tokenizers": {"x": {"tokenizer_json": "/t", "chat_template": "llama3"}, "y": {"tokenizer_json": "/t"}}"#,
        ] {
            let text = format!(r#"{{"tenant": {{"header": "t"}}, {bad}}}"#);
            assert!(FilterConfig::from_json(text.as_bytes()).is_err(), "{bad}");
        }
    }

    /// Every chat template is offered by name; an unknown one is refused
    /// with its name and the list.
    #[test]
    fn chat_templates_are_offered_by_name() {
        let config = |template: &str| {
            FilterConfig::from_json(
                format!(
                    r#"{{"tenant": {{"header": "t"}}, "model_tokenizers": {{"x": {{"tokenizer_json": "/t", "chat_template": "{template}"}}}}}}"#
                )
                .as_bytes(),
            )
        };
        for template in CHAT_TEMPLATES {
            let c = config(template).unwrap();
            assert_eq!(
                c.tokenizer_files().collect::<Vec<_>>(),
                [("/t", Some(template))]
            );
        }
        let error = config("llama2").unwrap_err();
        assert!(
            error.contains("model_tokenizers.x.chat_template: unknown template 'llama2'")
                && error.contains("gpt_oss")
                && error.contains("llama3_1"),
            "{error}"
        );
    }

    #[test]
    fn patterns_prefer_exact_then_longest_prefix() {
        let c = FilterConfig::from_json(
            br#"{"tenant": {"property": ["metadata", "filter_metadata", "jwt", "sub"]},
                 "model_encodings": {"llama*": "cl100k_base", "llama-3*": "o200k_base", "llama-3-8b": "cl100k_base"},
                 "output_tokens": {"default": 100, "per_model": {"gpt-4o*": 2000}, "max": 4000}}"#,
        )
        .unwrap();
        assert_eq!(c.configured_encoding("llama-3-8b"), Some("cl100k_base"));
        assert_eq!(c.configured_encoding("llama-3-70b"), Some("o200k_base"));
        assert_eq!(c.configured_encoding("llama-2"), Some("cl100k_base"));
        assert_eq!(c.configured_encoding("mistral"), None);
        assert!(c.model_tokenizers.is_empty());
        assert_eq!(c.output_estimate("gpt-4o-mini", None), 2000);
        assert_eq!(c.output_estimate("gpt-4o-mini", Some(10)), 10);
        assert_eq!(c.output_estimate("other", None), 100);
    }

    #[test]
    fn invalid_configs_say_why() {
        let cases: [(&str, &str); 12] = [
            ("{}", "missing field `tenant`"),
            (
                r#"{"tenant": {"header": "t"}, "token_budgets": []}"#,
                "at least one",
            ),
            (
                r#"{"tenant": {"header": "t"}, "token_budgets": ["input", "input"]}"#,
                "twice",
            ),
            (
                r#"{"tenant": {"header": "t"}, "cached_tokens_weight": 1.5}"#,
                "between 0.0 and 1.0",
            ),
            (
                r#"{"tenant": {"header": "X-Tenant"}}"#,
                "lowercase header name",
            ),
            (
                r#"{"tenant": {"header": "t"}, "rls_timeout_ms": 0}"#,
                "rls_timeout_ms",
            ),
            (
                r#"{"tenant": {"header": "t"}, "max_body_bytes": 10}"#,
                "max_body_bytes",
            ),
            (
                r#"{"tenant": {"header": "t"}, "body_timeout_ms": 0}"#,
                "body_timeout_ms",
            ),
            (
                r#"{"tenant": {"header": "t"}, "default_encoding": "p50k"}"#,
                "unknown encoding 'p50k'",
            ),
            (
                r#"{"tenant": {"header": "t"}, "failure_mode": "maybe"}"#,
                "unknown variant `maybe`",
            ),
            (
                r#"{"tenant": {"header": "t"}, "surprise": 1}"#,
                "unknown field `surprise`",
            ),
            ("not json", "invalid Sluice filter configuration"),
        ];
        for (json, expected) in cases {
            let err = FilterConfig::from_json(json.as_bytes()).unwrap_err();
            assert!(err.contains(expected), "{json}: {err}");
        }
    }
}
