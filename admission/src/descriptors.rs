//! Descriptor values and the RLS requests the filter sends.
//!
//! Layout (the limits file matches on it; see config/limits.yaml):
//! * requests: `[(tenant, T), (model, M)]`, hits 1;
//! * tokens:   `[(tenant, T), (model, M), (tokens, total)]`, hits = prompt + estimated output;
//! * with the `input` / `output` budgets on (plugin option `token_budgets`):
//!   `(tokens, input)` hits = prompt, `(tokens, output)` hits = estimated output.

use sluice_proto::rls::{Entry, RateLimitDescriptor, RateLimitRequest, UInt64Value};

/// Longest descriptor value the filter sends.
pub const MAX_VALUE_LEN: usize = 96;

/// gRPC metadata that tells sluice-rls to apply a charge even over the limit
/// (reconciliation of usage that already happened).
pub const FORCE_CHARGE_METADATA: (&str, &[u8]) = ("x-sluice-charge", b"force");

/// gRPC metadata on a reconciliation call: when its request was admitted
/// (Unix milliseconds). sluice-rls applies the correction to the window
/// that held the admission charge.
pub const ADMITTED_AT_METADATA: &str = "x-sluice-admitted-at-ms";

/// gRPC metadata on an admission call: the filter's clock when it asked
/// (Unix milliseconds). sluice-rls names the instant it charged at
/// ([`sluice_metadata::CHARGED_AT_MS`]) only when that instant's windows are
/// not the ones containing this one, so most answers carry no metadata.
pub const ASKED_AT_METADATA: &str = "x-sluice-asked-at-ms";

/// The client's W3C trace context headers the filter copies, as they are,
/// into the gRPC metadata of its admission call, so that sluice-rls's
/// decision joins the client's trace (sluice-rls checks them, as it does
/// Envoy's own RLS call's). Same names as the HTTP headers.
pub const TRACE_CONTEXT_METADATA: [&str; 2] = ["traceparent", "tracestate"];
/// Longest trace context value the filter copies (longer ones are dropped,
/// and sluice-rls would drop them too).
pub const MAX_TRACE_CONTEXT_METADATA_LEN: usize = 512;

/// The `dynamic_metadata` sluice-rls returns with an OVER_LIMIT answer and
/// the filter reads: `{"sluice": {"action", "priority", "over_limits",
/// "retry_after_seconds"}}`, or with an OK answer that charged windows other
/// than those of the instant the filter asked at `{"sluice":
/// {"charged_at_ms"}}`. Written by one side, read by the other.
pub mod sluice_metadata {
    /// The namespace (the key of the outer struct).
    pub const NAMESPACE: &str = "sluice";
    /// `"defer"` when every limit that is over says so, else `"reject"`.
    pub const ACTION: &str = "action";
    pub const ACTION_DEFER: &str = "defer";
    pub const ACTION_REJECT: &str = "reject";
    /// The priority class of the deferral (`low`, `normal`, `high`).
    pub const PRIORITY: &str = "priority";
    /// Names of the limits that are over.
    pub const OVER_LIMITS: &str = "over_limits";
    /// Seconds until the earliest of them resets.
    pub const RETRY_AFTER_SECONDS: &str = "retry_after_seconds";
    /// With an OK answer that charged windows other than those containing
    /// the instant the filter asked at ([`super::ASKED_AT_METADATA`]: the
    /// call crossed a window boundary, or the two clocks disagree near one):
    /// the instant (Unix ms, as a string) whose windows were charged. The
    /// filter's correction names it ([`super::ADMITTED_AT_METADATA`]), so it
    /// reaches the same windows; without it the filter names its own instant.
    pub const CHARGED_AT_MS: &str = "charged_at_ms";
    /// With an OK answer (issue 28, saturation-aware admission): where the
    /// in-quota request goes. [`ROUTE_QUEUE`]: the model's server is
    /// saturated with deferred work, so the request is charged (it is in
    /// quota) but joins the token-fair queue at [`PRIORITY`] instead of the
    /// server's FIFO; absent: straight to the server. A filter without a
    /// deferral route ignores it (the request goes straight through).
    pub const ROUTE: &str = "route";
    pub const ROUTE_QUEUE: &str = "queue";
}

/// The model a request's descriptor entries (key, value) name: the first
/// [`MODEL_KEY`] entry, as [`admission_request`] lays them out. (Entries,
/// not a request: sluice-rls holds Envoy's own proto types.)
pub fn model_of<'a>(entries: impl IntoIterator<Item = (&'a str, &'a str)>) -> Option<&'a str> {
    entries
        .into_iter()
        .find(|(key, _)| *key == MODEL_KEY)
        .map(|(_, value)| value)
}

/// The descriptor entry naming the model.
pub const MODEL_KEY: &str = "model";

/// Bound and sanitize a tenant or model value. Values that are fine pass as
/// they are; anything else (odd characters, too long) keeps a readable prefix
/// plus a hash of the original, so two different hostile values never share a
/// counter and no value can smuggle separators or control characters.
pub fn sanitize_value(value: &str) -> String {
    let allowed = |c: char| c.is_ascii_alphanumeric() || "._-:/@+".contains(c);
    if !value.is_empty() && value.len() <= MAX_VALUE_LEN && value.chars().all(allowed) {
        return value.to_string();
    }
    let mut clean: String = value
        .chars()
        .map(|c| if allowed(c) { c } else { '_' })
        .take(MAX_VALUE_LEN - 17)
        .collect();
    clean.push('~');
    clean.push_str(&format!("{:016x}", fnv1a(value.as_bytes())));
    clean
}

fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |hash, &b| {
        (hash ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

fn entry(key: &str, value: &str) -> Entry {
    Entry {
        key: key.to_string(),
        value: value.to_string(),
    }
}

/// The token budgets a limits file can set per tenant × model: the value of
/// the `tokens` descriptor entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Budget {
    /// Prompt + output (`tokens: total`).
    Total,
    /// Prompt only (`tokens: input`; providers' ITPM).
    Input,
    /// Output only (`tokens: output`; providers' OTPM).
    Output,
}

impl Budget {
    pub const fn as_str(self) -> &'static str {
        match self {
            Budget::Total => "total",
            Budget::Input => "input",
            Budget::Output => "output",
        }
    }

    /// This budget's share of a request's tokens.
    pub fn of(self, input: u64, output: u64) -> u64 {
        match self {
            Budget::Total => input.saturating_add(output),
            Budget::Input => input,
            Budget::Output => output,
        }
    }
}

fn tokens_descriptor(
    tenant: &str,
    model: &str,
    budget: Budget,
    hits: u64,
    refund: bool,
) -> RateLimitDescriptor {
    RateLimitDescriptor {
        entries: vec![
            entry("tenant", tenant),
            entry(MODEL_KEY, model),
            entry("tokens", budget.as_str()),
        ],
        hits_addend: Some(UInt64Value { value: hits }),
        is_negative_hits: refund,
    }
}

/// The admission call: one request against the requests limit, each
/// budget's tokens against its limit, in one round trip.
pub fn admission_request(
    domain: &str,
    tenant: &str,
    model: &str,
    budgets: &[(Budget, u64)],
) -> RateLimitRequest {
    let mut descriptors = vec![RateLimitDescriptor {
        entries: vec![entry("tenant", tenant), entry(MODEL_KEY, model)],
        hits_addend: Some(UInt64Value { value: 1 }),
        is_negative_hits: false,
    }];
    descriptors.extend(
        budgets
            .iter()
            .map(|&(budget, tokens)| tokens_descriptor(tenant, model, budget, tokens, false)),
    );
    RateLimitRequest {
        domain: domain.to_string(),
        descriptors,
        hits_addend: 1,
    }
}

/// The reconciliation call: per budget, charge (`delta > 0`) or refund
/// (`delta < 0`) the difference between what was charged up front and what
/// was used. `None` when nothing differs.
pub fn reconcile_request(
    domain: &str,
    tenant: &str,
    model: &str,
    deltas: &[(Budget, i64)],
) -> Option<RateLimitRequest> {
    let descriptors: Vec<RateLimitDescriptor> = deltas
        .iter()
        .filter(|(_, delta)| *delta != 0)
        .map(|&(budget, delta)| {
            tokens_descriptor(tenant, model, budget, delta.unsigned_abs(), delta < 0)
        })
        .collect();
    (!descriptors.is_empty()).then(|| RateLimitRequest {
        domain: domain.to_string(),
        descriptors,
        hits_addend: 1,
    })
}

#[cfg(test)]
#[allow(clippy::indexing_slicing)] // tests fail loudly
mod tests {
    use super::*;

    #[test]
    fn clean_values_pass_unchanged() {
        for v in ["acme", "gpt-4o-mini", "ft:gpt-4o:org::abc", "team.a/b@c+d"] {
            assert_eq!(sanitize_value(v), v);
        }
    }

    #[test]
    fn hostile_values_are_bounded_and_distinct() {
        let a = sanitize_value("acme\r\nx-evil: 1");
        let b = sanitize_value("acme__x-evil:_1");
        assert_ne!(a, b);
        assert!(a.starts_with("acme__x-evil:_1~"), "{a}");
        let long = "x".repeat(10_000);
        let s = sanitize_value(&long);
        assert!(s.len() <= MAX_VALUE_LEN, "{}", s.len());
        assert_ne!(s, sanitize_value(&"x".repeat(10_001)));
        assert!(sanitize_value("").starts_with('~'));
        assert!(sanitize_value("日本").is_ascii());
    }

    #[test]
    fn admission_and_reconcile_requests() {
        let r = admission_request("sluice", "acme", "gpt-4o", &[(Budget::Total, 1234)]);
        assert_eq!(r.descriptors.len(), 2);
        let entries = r.descriptors.iter().flat_map(|d| &d.entries);
        assert_eq!(
            model_of(entries.map(|e| (e.key.as_str(), e.value.as_str()))),
            Some("gpt-4o")
        );
        assert_eq!(r.descriptors[0].hits_addend, Some(UInt64Value { value: 1 }));
        assert_eq!(r.descriptors[1].entries[2], entry("tokens", "total"));
        assert_eq!(
            r.descriptors[1].hits_addend,
            Some(UInt64Value { value: 1234 })
        );
        assert!(reconcile_request("sluice", "a", "m", &[(Budget::Total, 0)]).is_none());
        let refund = reconcile_request("sluice", "a", "m", &[(Budget::Total, -40)]).unwrap();
        assert!(refund.descriptors[0].is_negative_hits);
        assert_eq!(
            refund.descriptors[0].hits_addend,
            Some(UInt64Value { value: 40 })
        );
        let charge = reconcile_request("sluice", "a", "m", &[(Budget::Total, 7)]).unwrap();
        assert!(!charge.descriptors[0].is_negative_hits);
        let both = reconcile_request(
            "sluice",
            "a",
            "m",
            &[(Budget::Total, 5), (Budget::Input, 0), (Budget::Output, -3)],
        )
        .unwrap();
        assert_eq!(both.descriptors.len(), 2);
        assert_eq!(both.descriptors[1].entries[2], entry("tokens", "output"));
        assert!(both.descriptors[1].is_negative_hits);
    }
}
