//! What the gRPC front checks before the limiter sees a call: its size, and
//! the filter's authority for the calls that move counters without a
//! decision (refunds and forced charges).
//!
//! Envoy's own rate-limit filter sends neither: its calls pass untouched.
//! Sluice's filter signs its reconciliation calls
//! ([`sluice_admission::counter_write`]); anyone else who reaches the gRPC
//! port could otherwise refund its own usage without end or charge past a
//! limit. In-process callers (ext_authz) do not come through here.

use sluice_admission::counter_write::{CounterWrite, COUNTER_WRITE_AUTH_METADATA};
use sluice_admission::deferral::{Secret, TokenError, Verifier};
use sluice_proto::pb::envoy::service::ratelimit::v3::RateLimitRequest;
use std::fmt;
use std::time::Duration;

/// Most descriptors in one call (the filter sends at most 4).
pub const DEFAULT_MAX_DESCRIPTORS: usize = 64;
/// Most entries in one descriptor (the filter sends at most 3).
pub const DEFAULT_MAX_ENTRIES: usize = 16;
/// Longest domain, entry key or entry value, in bytes (the filter's values
/// are at most 96; Envoy's actions may copy a header or a path).
pub const DEFAULT_MAX_ENTRY_BYTES: usize = 1024;
/// Oldest counter-write signature accepted (also the clock skew allowed).
pub const DEFAULT_COUNTER_WRITE_MAX_AGE: Duration = Duration::from_secs(30);

/// Who may refund or force a charge.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum CounterWritePolicy {
    /// Only calls signed with a shared secret (Sluice's filter).
    Signed,
    /// Anyone who reaches the port, as envoyproxy/ratelimit (migrations only).
    Any,
}

/// The size of one call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RequestBounds {
    pub max_descriptors: usize,
    pub max_entries: usize,
    pub max_entry_bytes: usize,
}

impl Default for RequestBounds {
    fn default() -> Self {
        RequestBounds {
            max_descriptors: DEFAULT_MAX_DESCRIPTORS,
            max_entries: DEFAULT_MAX_ENTRIES,
            max_entry_bytes: DEFAULT_MAX_ENTRY_BYTES,
        }
    }
}

/// The front's checks: size bounds and counter-write authority.
#[derive(Clone, Debug)]
pub struct CallGuard {
    pub bounds: RequestBounds,
    pub policy: CounterWritePolicy,
    /// Verifiers: a signature under any of them is the filter's.
    pub secrets: Vec<Secret>,
    pub max_age: Duration,
}

impl Default for CallGuard {
    /// Closed: default bounds, only signed counter writes, and no secret to
    /// verify them with (so none is accepted).
    fn default() -> Self {
        CallGuard {
            bounds: RequestBounds::default(),
            policy: CounterWritePolicy::Signed,
            secrets: Vec::new(),
            max_age: DEFAULT_COUNTER_WRITE_MAX_AGE,
        }
    }
}

/// What the call claims besides its message (from its gRPC metadata).
#[derive(Clone, Copy, Debug, Default)]
pub struct CallMetadata<'a> {
    /// It carries `x-sluice-charge: force`.
    pub forced: bool,
    pub admitted_at_ms: Option<u64>,
    /// The counter-write signature, if any.
    pub auth: Option<&'a str>,
}

/// Why a call is refused before the limiter sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    TooManyDescriptors {
        count: usize,
        max: usize,
    },
    TooManyEntries {
        descriptor: usize,
        count: usize,
        max: usize,
    },
    EntryTooLong {
        what: String,
        bytes: usize,
        max: usize,
    },
    /// A refund or forced charge without a valid signature.
    Unauthorized(Unauthorized),
}

/// Why a counter write lacks the filter's authority.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unauthorized {
    /// No signature sent.
    Unsigned,
    /// sluice-rls has no secret to verify with.
    NoSecret,
    Token(TokenError),
}

impl Refusal {
    /// True for the counter-write refusals (PERMISSION_DENIED), false for
    /// malformed calls (INVALID_ARGUMENT).
    pub fn is_unauthorized(&self) -> bool {
        matches!(self, Refusal::Unauthorized(_))
    }

    /// Metric label.
    pub fn reason(&self) -> &'static str {
        match self {
            Refusal::TooManyDescriptors { .. } => "too_many_descriptors",
            Refusal::TooManyEntries { .. } => "too_many_entries",
            Refusal::EntryTooLong { .. } => "entry_too_long",
            Refusal::Unauthorized(Unauthorized::Unsigned) => "unsigned",
            Refusal::Unauthorized(Unauthorized::NoSecret) => "no_secret",
            Refusal::Unauthorized(Unauthorized::Token(TokenError::Malformed)) => "malformed",
            Refusal::Unauthorized(Unauthorized::Token(TokenError::Expired)) => "expired",
            // A counter-write signature covers no body: a mismatch cannot occur, and would be a bad signature.
            Refusal::Unauthorized(Unauthorized::Token(
                TokenError::BadSignature | TokenError::BodyMismatch,
            )) => "bad_signature",
        }
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::TooManyDescriptors { count, max } => write!(
                f,
                "{count} descriptors in one call; at most {max} (--max-descriptors)"
            ),
            Refusal::TooManyEntries {
                descriptor,
                count,
                max,
            } => write!(
                f,
                "descriptor {descriptor} has {count} entries; at most {max} (--max-descriptor-entries)"
            ),
            Refusal::EntryTooLong { what, bytes, max } => write!(
                f,
                "{what} is {bytes} bytes; at most {max} (--max-descriptor-entry-bytes)"
            ),
            Refusal::Unauthorized(why) => {
                write!(
                    f,
                    "refunds (is_negative_hits) and forced charges (x-sluice-charge: force) \
                     need the Sluice filter's signature ({COUNTER_WRITE_AUTH_METADATA}, see \
                     --counter-writes): "
                )?;
                match why {
                    Unauthorized::Unsigned => f.write_str("the call is not signed"),
                    Unauthorized::NoSecret => f.write_str(
                        "sluice-rls has no secret to verify it with (--deferral-secret-file)",
                    ),
                    Unauthorized::Token(TokenError::Malformed) => {
                        f.write_str("the signature is malformed")
                    }
                    Unauthorized::Token(TokenError::Expired) => {
                        f.write_str("the signature is too old (or from the future)")
                    }
                    Unauthorized::Token(TokenError::BadSignature | TokenError::BodyMismatch) => {
                        f.write_str("the signature does not match the call")
                    }
                }
            }
        }
    }
}

impl CallGuard {
    /// Checks `request` with its `metadata` at `now_ms` (Unix ms).
    pub fn check(
        &self,
        request: &RateLimitRequest,
        metadata: &CallMetadata<'_>,
        now_ms: u64,
    ) -> Result<(), Refusal> {
        self.bounds.check(request)?;
        if self.policy == CounterWritePolicy::Any || !writes_counters(request, metadata) {
            return Ok(());
        }
        self.verify(request, metadata, now_ms)
            .map_err(Refusal::Unauthorized)
    }

    fn verify(
        &self,
        request: &RateLimitRequest,
        metadata: &CallMetadata<'_>,
        now_ms: u64,
    ) -> Result<(), Unauthorized> {
        let token = metadata.auth.ok_or(Unauthorized::Unsigned)?;
        if self.secrets.is_empty() {
            return Err(Unauthorized::NoSecret);
        }
        canonical(request, metadata)
            .verify(
                token,
                &Verifier::new(&self.secrets, now_ms, self.max_age.as_millis() as u64),
            )
            .map_err(Unauthorized::Token)
    }

    /// The warning to log at start, if refunds and forced charges can never
    /// be accepted.
    pub fn startup_warning(&self) -> Option<&'static str> {
        (self.policy == CounterWritePolicy::Signed && self.secrets.is_empty()).then_some(
            "--counter-writes signed without a secret (--deferral-secret-file / \
             SLUICE_DEFERRAL_SECRETS): the filter's refunds and forced charges (usage \
             reconciliation) are all refused; give sluice-rls the filter's deferral.secrets",
        )
    }
}

/// A refund or a forced charge: a call that moves counters without a decision.
fn writes_counters(request: &RateLimitRequest, metadata: &CallMetadata<'_>) -> bool {
    metadata.forced || request.descriptors.iter().any(|d| d.is_negative_hits)
}

/// The call as the filter signed it.
fn canonical(request: &RateLimitRequest, metadata: &CallMetadata<'_>) -> CounterWrite {
    let descriptors = request.descriptors.iter().map(|d| {
        let entries = d.entries.iter().map(|e| (e.key.as_str(), e.value.as_str()));
        let limit = d.limit.as_ref().map(|l| (l.requests_per_unit, l.unit));
        (
            entries,
            d.hits_addend.map(|h| h.value),
            d.is_negative_hits,
            limit,
        )
    });
    CounterWrite::of_call(
        &request.domain,
        request.hits_addend,
        metadata.forced,
        metadata.admitted_at_ms,
        descriptors,
    )
}

impl RequestBounds {
    /// Refuses a call larger than these bounds, before anything is built from it.
    pub fn check(&self, request: &RateLimitRequest) -> Result<(), Refusal> {
        let count = request.descriptors.len();
        if count > self.max_descriptors {
            return Err(Refusal::TooManyDescriptors {
                count,
                max: self.max_descriptors,
            });
        }
        self.check_text("the domain", &request.domain)?;
        for (index, descriptor) in request.descriptors.iter().enumerate() {
            let count = descriptor.entries.len();
            if count > self.max_entries {
                return Err(Refusal::TooManyEntries {
                    descriptor: index,
                    count,
                    max: self.max_entries,
                });
            }
            for entry in &descriptor.entries {
                self.check_text("a descriptor entry's key", &entry.key)?;
                self.check_text("a descriptor entry's value", &entry.value)?;
            }
        }
        Ok(())
    }

    fn check_text(&self, what: &str, text: &str) -> Result<(), Refusal> {
        if text.len() > self.max_entry_bytes {
            return Err(Refusal::EntryTooLong {
                what: what.to_string(),
                bytes: text.len(),
                max: self.max_entry_bytes,
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_proto::pb::envoy::extensions::common::ratelimit::v3::{
        rate_limit_descriptor::RateLimitOverride, RateLimitDescriptor,
    };
    use sluice_proto::pb::google::protobuf::UInt64Value;
    use sluice_testkit::rls;

    const NOW: u64 = 1_700_000_000_000;

    fn secret(c: char) -> Secret {
        Secret::new(c.to_string().repeat(40)).unwrap()
    }

    fn descriptor(entries: &[(&str, &str)], hits: u64, negative: bool) -> RateLimitDescriptor {
        RateLimitDescriptor {
            is_negative_hits: negative,
            ..rls::with_hits(rls::descriptor(entries), hits)
        }
    }

    fn request(descriptors: Vec<RateLimitDescriptor>) -> RateLimitRequest {
        RateLimitRequest {
            domain: "sluice".into(),
            descriptors,
            hits_addend: 1,
        }
    }

    fn refund() -> RateLimitRequest {
        request(vec![descriptor(
            &[("tenant", "acme"), ("model", "m"), ("tokens", "total")],
            500,
            true,
        )])
    }

    fn guard(secrets: Vec<Secret>) -> CallGuard {
        CallGuard {
            secrets,
            ..Default::default()
        }
    }

    /// The filter's signature over its own encoding of the call.
    fn filter_signature(request: &RateLimitRequest, admitted_at: u64, issued: u64) -> String {
        let filter_request = sluice_proto::rls::RateLimitRequest {
            domain: request.domain.clone(),
            hits_addend: request.hits_addend,
            descriptors: request
                .descriptors
                .iter()
                .map(|d| sluice_proto::rls::RateLimitDescriptor {
                    entries: d
                        .entries
                        .iter()
                        .map(|e| sluice_proto::rls::Entry {
                            key: e.key.clone(),
                            value: e.value.clone(),
                        })
                        .collect(),
                    hits_addend: d
                        .hits_addend
                        .map(|h| sluice_proto::rls::UInt64Value { value: h.value }),
                    is_negative_hits: d.is_negative_hits,
                })
                .collect(),
        };
        use prost::Message as _;
        sluice_admission::counter_write::sign_reconciliation(
            &secret('a'),
            &filter_request.encode_to_vec(),
            admitted_at,
            issued,
        )
        .unwrap()
    }

    fn forced(auth: Option<&str>) -> CallMetadata<'_> {
        CallMetadata {
            forced: true,
            admitted_at_ms: Some(NOW - 2_000),
            auth,
        }
    }

    #[test]
    fn decisions_need_no_signature() {
        let plain = request(vec![descriptor(&[("tenant", "acme")], 3, false)]);
        assert_eq!(
            guard(Vec::new()).check(&plain, &CallMetadata::default(), NOW),
            Ok(())
        );
    }

    #[test]
    fn unsigned_refunds_and_forced_charges_are_refused() {
        let g = guard(vec![secret('a')]);
        let unsigned = g.check(&refund(), &CallMetadata::default(), NOW);
        assert_eq!(unsigned, Err(Refusal::Unauthorized(Unauthorized::Unsigned)));
        let charge = request(vec![descriptor(&[("tenant", "acme")], 3, false)]);
        let refusal = g.check(&charge, &forced(None), NOW).unwrap_err();
        assert_eq!(refusal.reason(), "unsigned");
        assert!(refusal.is_unauthorized());
        assert!(
            refusal.to_string().contains("x-sluice-charge-auth"),
            "{refusal}"
        );
    }

    #[test]
    fn the_filters_signature_is_accepted_with_any_configured_secret() {
        let call = refund();
        let token = filter_signature(&call, NOW - 2_000, NOW - 10);
        let rotating = guard(vec![secret('b'), secret('a')]);
        assert_eq!(rotating.check(&call, &forced(Some(&token)), NOW), Ok(()));
        let other = guard(vec![secret('b')]);
        assert_eq!(
            other
                .check(&call, &forced(Some(&token)), NOW)
                .map_err(|r| r.reason()),
            Err("bad_signature")
        );
        let none = guard(Vec::new());
        assert_eq!(
            none.check(&call, &forced(Some(&token)), NOW)
                .map_err(|r| r.reason()),
            Err("no_secret")
        );
        assert!(none.startup_warning().is_some());
        assert!(rotating.startup_warning().is_none());
    }

    #[test]
    fn a_signature_binds_the_call_and_its_metadata() {
        let call = refund();
        let token = filter_signature(&call, NOW - 2_000, NOW);
        let g = guard(vec![secret('a')]);
        let mut more = call.clone();
        more.descriptors[0].hits_addend = Some(UInt64Value { value: 5_000 });
        let mut other_tenant = call.clone();
        other_tenant.descriptors[0].entries[0].value = "victim".into();
        let mut overridden = call.clone();
        overridden.descriptors[0].limit = Some(RateLimitOverride {
            requests_per_unit: 1,
            unit: 1,
        });
        for tampered in [more, other_tenant, overridden] {
            assert_eq!(
                g.check(&tampered, &forced(Some(&token)), NOW)
                    .map_err(|r| r.reason()),
                Err("bad_signature")
            );
        }
        let moved = CallMetadata {
            admitted_at_ms: Some(NOW - 60_000),
            ..forced(Some(&token))
        };
        assert_eq!(
            g.check(&call, &moved, NOW).map_err(|r| r.reason()),
            Err("bad_signature")
        );
        let stale = g.check(&call, &forced(Some(&token)), NOW + 30_001);
        assert_eq!(stale.map_err(|r| r.reason()), Err("expired"));
        let garbled = g.check(&call, &forced(Some("v1.x.y")), NOW);
        assert_eq!(garbled.map_err(|r| r.reason()), Err("malformed"));
    }

    #[test]
    fn policy_any_lets_unsigned_writes_through() {
        let g = CallGuard {
            policy: CounterWritePolicy::Any,
            ..Default::default()
        };
        assert_eq!(g.check(&refund(), &forced(None), NOW), Ok(()));
        assert!(g.startup_warning().is_none());
    }

    #[test]
    fn oversized_calls_are_refused_whatever_the_policy() {
        let g = CallGuard {
            policy: CounterWritePolicy::Any,
            ..Default::default()
        };
        let one = descriptor(&[("tenant", "acme")], 1, false);
        let many = request(vec![one.clone(); DEFAULT_MAX_DESCRIPTORS + 1]);
        let refusal = g.check(&many, &CallMetadata::default(), NOW).unwrap_err();
        assert_eq!(refusal.reason(), "too_many_descriptors");
        assert!(!refusal.is_unauthorized());
        assert!(refusal.to_string().contains("65 descriptors"), "{refusal}");
        let at_bound = request(vec![one; DEFAULT_MAX_DESCRIPTORS]);
        assert_eq!(g.check(&at_bound, &CallMetadata::default(), NOW), Ok(()));

        let entries: Vec<(&str, &str)> = vec![("k", "v"); DEFAULT_MAX_ENTRIES + 1];
        let wide = request(vec![descriptor(&entries, 1, false)]);
        let refusal = g.check(&wide, &CallMetadata::default(), NOW).unwrap_err();
        assert_eq!(refusal.reason(), "too_many_entries");

        let long = "x".repeat(DEFAULT_MAX_ENTRY_BYTES + 1);
        let at_max = "x".repeat(DEFAULT_MAX_ENTRY_BYTES);
        let long_value = request(vec![descriptor(&[("tenant", &long)], 1, false)]);
        let long_key = request(vec![descriptor(&[(&long, "acme")], 1, false)]);
        let mut long_domain = request(vec![descriptor(&[("tenant", "acme")], 1, false)]);
        long_domain.domain = long.clone();
        for call in [long_value, long_key, long_domain] {
            let refusal = g.check(&call, &CallMetadata::default(), NOW).unwrap_err();
            assert_eq!(refusal.reason(), "entry_too_long", "{refusal}");
        }
        let fits = request(vec![descriptor(&[(&at_max, &at_max)], 1, false)]);
        assert_eq!(g.check(&fits, &CallMetadata::default(), NOW), Ok(()));
    }
}
