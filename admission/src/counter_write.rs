//! The filter's authority to write counters: refunds and forced charges.
//!
//! Envoy's own rate-limit filter only ever asks "may this pass?". Sluice's
//! filter also corrects what it charged once the real usage is known: it
//! refunds (`is_negative_hits`) and charges past the limit
//! ([`FORCE_CHARGE_METADATA`](crate::descriptors::FORCE_CHARGE_METADATA)). Those two levers move counters without a
//! decision, so sluice-rls accepts them only with the filter's signature:
//! gRPC metadata [`COUNTER_WRITE_AUTH_METADATA`], a token in the format of
//! the deferral tokens (`v1.<issued unix ms>.<64 hex digits of HMAC>`, under
//! the same shared secrets: signers use the first, verifiers accept any), whose
//! MAC covers [`COUNTER_WRITE_CONTEXT`] (so no deferral or resume MAC is
//! ever a counter-write MAC, and back), the issue time and the canonical
//! form of the call ([`CounterWrite`]).
//!
//! Canonical form: one field per line, every string length-prefixed
//! (`<byte length>:<bytes>`), since descriptor values reaching sluice-rls
//! may hold any byte, newlines included; numbers in decimal; absent values `-`.
//!
//! ```text
//! charge:<force|decide>
//! admitted_at:<unix ms|->
//! domain:<len>:<domain>
//! hits:<request hits_addend>
//! descriptors:<n>
//! then per descriptor:
//! entries:<m>
//! <len>:<key><len>:<value>          (m lines)
//! hits:<descriptor hits_addend|->
//! negative:<0|1>
//! override:<requests_per_unit>/<unit>|-
//! ```

use crate::deferral::{hex, unhex, Secret, TokenError, Verifier};

/// Version of the signature format: `v1.<issued unix ms>.<64 hex digits of HMAC>`.
const TOKEN_VERSION: &str = "v1";

/// A signature's issue time and MAC.
fn parse_token(token: &str) -> Result<(u64, Vec<u8>), TokenError> {
    let mut parts = token.trim().split('.');
    let (Some(TOKEN_VERSION), Some(issued), Some(tag), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(TokenError::Malformed);
    };
    let issued: u64 = issued.parse().map_err(|_| TokenError::Malformed)?;
    let tag = unhex(tag)
        .filter(|t| t.len() == 32)
        .ok_or(TokenError::Malformed)?;
    Ok((issued, tag))
}
use prost::Message;
use sluice_proto::rls::RateLimitRequest;
use std::fmt::Write as _;

/// gRPC metadata carrying the filter's signature of a refund or forced charge.
pub const COUNTER_WRITE_AUTH_METADATA: &str = "x-sluice-charge-auth";

/// Domain separation from the deferral and resume MACs.
const COUNTER_WRITE_CONTEXT: &str = "sluice-counter-write-v1";

/// One descriptor of a call, as [`CounterWrite::descriptor`] takes it: its
/// entries (key, value), its own `hits_addend`, its refund flag and its limit
/// override (`requests_per_unit`, `unit`).
pub type DescriptorParts<E> = (E, Option<u64>, bool, Option<(u32, i32)>);

/// The canonical form of one RLS call that writes counters, built from the
/// call as sent (the filter) or as received (sluice-rls). Both sides build
/// it field by field, so neither depends on how protobuf encodes the call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CounterWrite {
    canonical: String,
}

impl CounterWrite {
    /// Starts the canonical form of a call in `domain`. `forced`: it carries
    /// [`FORCE_CHARGE_METADATA`](crate::descriptors::FORCE_CHARGE_METADATA); `admitted_at_ms`: its
    /// [`crate::descriptors::ADMITTED_AT_METADATA`], if any; `hits_addend`:
    /// the request's. Add each descriptor, in order, with [`Self::descriptor`].
    pub fn new(
        domain: &str,
        hits_addend: u32,
        forced: bool,
        admitted_at_ms: Option<u64>,
        descriptors: usize,
    ) -> CounterWrite {
        let mut canonical = String::with_capacity(128 + domain.len());
        let charge = if forced { "force" } else { "decide" };
        let _ = writeln!(canonical, "charge:{charge}");
        let _ = writeln!(canonical, "admitted_at:{}", optional(admitted_at_ms));
        canonical.push_str("domain:");
        push_string(&mut canonical, domain);
        let _ = writeln!(canonical, "\nhits:{hits_addend}");
        let _ = writeln!(canonical, "descriptors:{descriptors}");
        CounterWrite { canonical }
    }

    /// Adds one descriptor: its entries (key, value) in order, its own
    /// `hits_addend` if set, its refund flag, and its limit override
    /// (`requests_per_unit`, `unit`) if it carries one.
    pub fn descriptor<'a>(
        mut self,
        entries: impl ExactSizeIterator<Item = (&'a str, &'a str)>,
        hits_addend: Option<u64>,
        negative: bool,
        limit_override: Option<(u32, i32)>,
    ) -> CounterWrite {
        let canonical = &mut self.canonical;
        let _ = writeln!(canonical, "entries:{}", entries.len());
        for (key, value) in entries {
            push_string(canonical, key);
            push_string(canonical, value);
            canonical.push('\n');
        }
        let _ = writeln!(canonical, "hits:{}", optional(hits_addend));
        let _ = writeln!(canonical, "negative:{}", u8::from(negative));
        match limit_override {
            Some((requests_per_unit, unit)) => {
                let _ = writeln!(canonical, "override:{requests_per_unit}/{unit}");
            }
            None => canonical.push_str("override:-\n"),
        }
        self
    }

    /// The canonical form of a whole call: [`Self::new`], then
    /// [`Self::descriptor`] for each of `descriptors`, in order, each as
    /// (entries, `hits_addend`, refund flag, limit override).
    pub fn of_call<'a, E>(
        domain: &str,
        hits_addend: u32,
        forced: bool,
        admitted_at_ms: Option<u64>,
        descriptors: impl ExactSizeIterator<Item = DescriptorParts<E>>,
    ) -> CounterWrite
    where
        E: ExactSizeIterator<Item = (&'a str, &'a str)>,
    {
        let start = CounterWrite::new(
            domain,
            hits_addend,
            forced,
            admitted_at_ms,
            descriptors.len(),
        );
        descriptors.fold(start, |write, (entries, hits, negative, limit)| {
            write.descriptor(entries, hits, negative, limit)
        })
    }

    /// The canonical form of a request the filter built (its descriptors
    /// never carry a limit override).
    pub fn of_request(
        request: &RateLimitRequest,
        forced: bool,
        admitted_at_ms: Option<u64>,
    ) -> CounterWrite {
        let descriptors = request.descriptors.iter().map(|d| {
            let entries = d.entries.iter().map(|e| (e.key.as_str(), e.value.as_str()));
            (
                entries,
                d.hits_addend.map(|h| h.value),
                d.is_negative_hits,
                None,
            )
        });
        CounterWrite::of_call(
            &request.domain,
            request.hits_addend,
            forced,
            admitted_at_ms,
            descriptors,
        )
    }

    /// The canonical text (for tests and debugging; it holds no secret).
    pub fn canonical(&self) -> &str {
        &self.canonical
    }

    fn mac(&self, secret: &Secret, issued_ms: u64) -> hmac::Hmac<sha2::Sha256> {
        use hmac::Mac as _;
        let mut mac = secret.mac();
        mac.update(format!("{COUNTER_WRITE_CONTEXT}\n{issued_ms}\n").as_bytes());
        mac.update(self.canonical.as_bytes());
        mac
    }

    /// The value of [`COUNTER_WRITE_AUTH_METADATA`] for this call, issued
    /// at `issued_ms` (Unix ms).
    pub fn sign(&self, secret: &Secret, issued_ms: u64) -> String {
        use hmac::Mac as _;
        let tag = self.mac(secret, issued_ms).finalize().into_bytes();
        format!("{TOKEN_VERSION}.{issued_ms}.{}", hex(&tag))
    }

    /// Checks `token` against this call with `verifier`.
    pub fn verify(&self, token: &str, verifier: &Verifier<'_>) -> Result<(), TokenError> {
        let (issued_ms, tag) = parse_token(token)?;
        verifier.check(issued_ms, &tag, |secret| self.mac(secret, issued_ms))
    }
}

/// The filter's signature of one reconciliation call: `message` is the
/// encoded RateLimitRequest it sends with [`FORCE_CHARGE_METADATA`](crate::descriptors::FORCE_CHARGE_METADATA) and
/// `admitted_at_ms`. `None` when `message` does not decode (the filter
/// encoded it itself, so that is a bug, logged by the caller).
pub fn sign_reconciliation(
    secret: &Secret,
    message: &[u8],
    admitted_at_ms: u64,
    issued_ms: u64,
) -> Option<String> {
    let request = RateLimitRequest::decode(message).ok()?;
    Some(CounterWrite::of_request(&request, true, Some(admitted_at_ms)).sign(secret, issued_ms))
}

fn optional(value: Option<u64>) -> String {
    value.map_or_else(|| "-".to_string(), |v| v.to_string())
}

fn push_string(out: &mut String, text: &str) {
    let _ = write!(out, "{}:{text}", text.len());
}

#[cfg(test)]
#[allow(clippy::indexing_slicing)] // tests fail loudly
mod tests {
    use super::*;
    use crate::descriptors::{reconcile_request, Budget};

    fn secret(c: char) -> Secret {
        Secret::new(c.to_string().repeat(40)).unwrap()
    }

    fn refund() -> RateLimitRequest {
        reconcile_request(
            "sluice",
            "acme",
            "gpt-4o",
            &[(Budget::Total, -40), (Budget::Input, 7)],
        )
        .unwrap()
    }

    #[test]
    fn the_canonical_form_is_as_documented() {
        let write = CounterWrite::of_request(&refund(), true, Some(1_700_000_000_000));
        let expected = "charge:force\nadmitted_at:1700000000000\ndomain:6:sluice\nhits:1\n\
                        descriptors:2\n\
                        entries:3\n6:tenant4:acme\n5:model6:gpt-4o\n6:tokens5:total\nhits:40\nnegative:1\noverride:-\n\
                        entries:3\n6:tenant4:acme\n5:model6:gpt-4o\n6:tokens5:input\nhits:7\nnegative:0\noverride:-\n";
        assert_eq!(write.canonical(), expected);
    }

    #[test]
    fn a_signed_call_verifies_with_any_configured_secret() {
        let write = CounterWrite::of_request(&refund(), true, Some(5));
        let token = write.sign(&secret('a'), 1_000_000);
        assert!(token.starts_with("v1.1000000."), "{token}");
        let rotating = [secret('b'), secret('a')];
        assert_eq!(
            write.verify(&token, &Verifier::new(&rotating, 1_000_100, 30_000)),
            Ok(())
        );
        assert_eq!(
            write.verify(&token, &Verifier::new(&[secret('b')], 1_000_100, 30_000)),
            Err(TokenError::BadSignature)
        );
        assert_eq!(
            write.verify(&token, &Verifier::new(&[], 1_000_100, 30_000)),
            Err(TokenError::BadSignature)
        );
    }

    #[test]
    fn the_filter_signs_what_it_encoded() {
        let request = refund();
        let token = sign_reconciliation(&secret('a'), &request.encode_to_vec(), 9, 2_000).unwrap();
        let write = CounterWrite::of_request(&request, true, Some(9));
        assert_eq!(
            write.verify(&token, &Verifier::new(&[secret('a')], 2_000, 30_000)),
            Ok(())
        );
        assert_eq!(
            sign_reconciliation(&secret('a'), b"\xff\xff", 9, 2_000),
            None
        );
    }

    /// Every field of the call is bound: changing any one of them (or the
    /// issue time) breaks the signature.
    #[test]
    fn tampering_with_any_field_breaks_the_signature() {
        let good = refund();
        let token = CounterWrite::of_request(&good, true, Some(5)).sign(&secret('a'), 1_000);
        let mut tampered: Vec<(&str, CounterWrite)> = Vec::new();
        let mut variant = |name, edit: &dyn Fn(&mut RateLimitRequest)| {
            let mut request = good.clone();
            edit(&mut request);
            tampered.push((name, CounterWrite::of_request(&request, true, Some(5))));
        };
        variant("domain", &|r| r.domain = "other".into());
        variant("request hits", &|r| r.hits_addend = 2);
        variant("entry key", &|r| {
            r.descriptors[0].entries[0].key = "tenantx".into()
        });
        variant("tenant", &|r| {
            r.descriptors[0].entries[0].value = "victim".into()
        });
        variant("budget", &|r| {
            r.descriptors[1].entries[2].value = "output".into()
        });
        variant("hits", &|r| {
            r.descriptors[0].hits_addend = Some(sluice_proto::rls::UInt64Value { value: 4_000 })
        });
        variant("no hits", &|r| r.descriptors[0].hits_addend = None);
        variant("negative flag", &|r| {
            r.descriptors[1].is_negative_hits = true
        });
        variant("descriptor dropped", &|r| {
            r.descriptors.pop();
        });
        variant("descriptor repeated", &|r| {
            let first = r.descriptors[0].clone();
            r.descriptors.push(first);
        });
        variant("descriptors swapped", &|r| r.descriptors.swap(0, 1));
        variant("entries swapped", &|r| r.descriptors[0].entries.swap(0, 1));
        let request = good.clone();
        tampered.push((
            "not forced",
            CounterWrite::of_request(&request, false, Some(5)),
        ));
        tampered.push((
            "admitted at",
            CounterWrite::of_request(&request, true, Some(6)),
        ));
        tampered.push((
            "no admitted at",
            CounterWrite::of_request(&request, true, None),
        ));
        let with_override = CounterWrite::new("sluice", 1, true, Some(5), 2)
            .descriptor(
                [("tenant", "acme"), ("model", "gpt-4o"), ("tokens", "total")].into_iter(),
                Some(40),
                true,
                Some((1_000_000, 2)),
            )
            .descriptor(
                [("tenant", "acme"), ("model", "gpt-4o"), ("tokens", "input")].into_iter(),
                Some(7),
                false,
                None,
            );
        tampered.push(("limit override", with_override));
        for (name, write) in &tampered {
            assert_eq!(
                write.verify(&token, &Verifier::new(&[secret('a')], 1_000, 30_000)),
                Err(TokenError::BadSignature),
                "{name}"
            );
        }
        let moved = token.replacen("v1.1000.", "v1.1001.", 1);
        let write = CounterWrite::of_request(&good, true, Some(5));
        assert_eq!(
            write.verify(&moved, &Verifier::new(&[secret('a')], 1_000, 30_000)),
            Err(TokenError::BadSignature)
        );
        assert_eq!(
            write.verify(&token, &Verifier::new(&[secret('a')], 1_000, 30_000)),
            Ok(())
        );
    }

    /// Length prefixes keep values that hold separators apart.
    #[test]
    fn values_cannot_shift_across_fields() {
        let split = |key: &'static str, value: &'static str| {
            CounterWrite::new("d", 1, true, None, 1).descriptor(
                [(key, value)].into_iter(),
                Some(1),
                true,
                None,
            )
        };
        assert_ne!(split("a:1", "b"), split("a", "1:b"));
        assert_ne!(split("a\nhits:1", ""), split("a", "\nhits:1"));
    }

    #[test]
    fn stale_future_and_malformed_signatures_are_refused() {
        let write = CounterWrite::of_request(&refund(), true, Some(5));
        let token = write.sign(&secret('a'), 100_000);
        let s = [secret('a')];
        crate::deferral::assert_refused_when_stale_or_malformed(
            |token, now| write.verify(token, &Verifier::new(&s, now, 30_000)),
            &token,
            &["", "v1", "v1.100000", "v2.100000.00", "v1.x.00", "v1.1.2.3"],
        );
    }

    /// A deferral token's MAC never passes as a counter write's, even over
    /// the same secret and issue time.
    #[test]
    fn deferral_tokens_are_not_counter_write_signatures() {
        let digest = crate::deferral::body_digest(b"{}");
        let claims = crate::deferral::DeferralClaims {
            headers: crate::deferral::HeaderClaims {
                request_id: "0123456789abcdef0123456789abcdef",
                tenant: "acme",
                model: "gpt-4o",
                priority: "normal",
                estimated_tokens: 40,
            },
            body_sha256: &digest,
        };
        let deferral_token = claims.sign(&secret('a'), 1_000);
        let write = CounterWrite::of_request(&refund(), true, Some(5));
        // As sent: a deferral token (v2, with the body digest) is not even
        // of a signature's shape.
        assert_eq!(
            write.verify(
                &deferral_token,
                &Verifier::new(&[secret('a')], 1_000, 30_000)
            ),
            Err(TokenError::Malformed)
        );
        // Re-shaped as a signature, its MAC still fails: the contexts differ.
        let parts: Vec<&str> = deferral_token.split('.').collect();
        let reshaped = format!("{TOKEN_VERSION}.{}.{}", parts[1], parts[3]);
        assert_eq!(
            write.verify(&reshaped, &Verifier::new(&[secret('a')], 1_000, 30_000)),
            Err(TokenError::BadSignature)
        );
    }
}
