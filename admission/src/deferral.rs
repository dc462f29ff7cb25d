//! Request identity and the authenticated deferral marker.
//!
//! Sluice names every request itself: a 128-bit random id, never a value a
//! client sent. A deferred request reaches the deferral endpoint with that id
//! and a **deferral token**: an HMAC-SHA256, under a secret shared by the
//! filter (or ext_authz) and sluice-rls, over everything the endpoint acts
//! on — request id, tenant, model, priority, token estimate, the time it was
//! issued and a SHA-256 of the body. The endpoint refuses a request without a
//! valid, fresh token, so only Sluice's own admission can queue work.
//!
//! A streaming client that loses its connection resumes with a **resume
//! token**, `<request id>.<mac>`, the MAC binding the id to its tenant: the
//! bare id (which shows up in logs and headers) opens nothing.
//!
//! Rotation: every verifier accepts any of its configured secrets; signers
//! use the first. Roll a new secret out as the *second* everywhere, then make
//! it the first, then drop the old one.
//!
//! Token format: `v2.<issued unix ms>.<64 hex digits of the body's SHA-256>.<64
//! hex digits of HMAC>`; the MAC input is [`DEFERRAL_CONTEXT`] and the fields,
//! each on its own line (no field can contain a newline: ids and names are
//! sanitized, numbers are decimal), then the body digest. The digest travels
//! in the token so that the endpoint checks the MAC from the headers alone,
//! before it reads any body byte ([`HeaderClaims::verify`]), then hashes the
//! body and compares ([`SignedBody::check`]).
//!
//! `v1` tokens (the MAC over the digest, the digest not in the token) are
//! refused as malformed: verifying one needs the whole body first, which is
//! what `v2` exists to avoid. A rolling upgrade therefore upgrades filters
//! and sluice-rls together (see docs/security.md, "Deferral tokens").

use hmac::{Hmac, KeyInit, Mac};
use serde::Deserialize;
use sha2::{Digest, Sha256};
use std::fmt;

/// The default marker header: the route to the deferral endpoint matches
/// on it (`deferral.marker_header` in the filter config).
pub const DEFAULT_MARKER_HEADER: &str = "x-sluice-deferred";
/// Header carrying the deferral token (set by Sluice only; stripped from clients).
pub const DEFERRAL_TOKEN_HEADER: &str = "x-sluice-deferral-token";
/// Response header of a streamed deferred answer: the resume token.
pub const RESUME_TOKEN_HEADER: &str = "x-sluice-resume-token";
/// Where a client resumes a streamed deferred answer: this, then its resume
/// token (`GET`, with `Last-Event-ID`).
pub const RESUME_PATH_PREFIX: &str = "/v1/sluice/streams/";
/// Response header of a streamed deferred answer: its place in the queue.
pub const QUEUE_POSITION_HEADER: &str = "x-sluice-queue-position";
/// The secret in the repository's example configs (`config/deferral-secret.example`,
/// `envoy/*.yaml`): fine on a laptop, public everywhere else.
pub const EXAMPLE_SECRET: &str = "sluice-example-deferral-secret--replace-me-in-production";
/// Shortest secret accepted (bytes): 256 bits of a random string.
pub const MIN_SECRET_LEN: usize = 32;

/// Domain separation: a deferral MAC is never a valid resume MAC, and back.
const DEFERRAL_CONTEXT: &str = "sluice-deferral-v2";
const RESUME_CONTEXT: &str = "sluice-resume-v1";
const TOKEN_VERSION: &str = "v2";

type HmacSha256 = Hmac<Sha256>;

/// A shared secret. Its `Debug` never shows the value, so configs that hold
/// one can be logged.
#[derive(Clone, PartialEq, Eq, Deserialize)]
#[serde(transparent)]
pub struct Secret(String);

impl Secret {
    /// A secret from its text; at least [`MIN_SECRET_LEN`] bytes.
    pub fn new(value: impl Into<String>) -> Result<Secret, String> {
        let secret = Secret(value.into());
        secret.validate()?;
        Ok(secret)
    }

    pub fn validate(&self) -> Result<(), String> {
        if self.0.len() < MIN_SECRET_LEN {
            return Err(format!(
                "a deferral secret must be at least {MIN_SECRET_LEN} bytes (it is {})",
                self.0.len()
            ));
        }
        Ok(())
    }

    /// True for [`EXAMPLE_SECRET`]: services warn when they run with it.
    pub fn is_example(&self) -> bool {
        self.0 == EXAMPLE_SECRET
    }

    pub(crate) fn mac(&self) -> HmacSha256 {
        // HMAC takes keys of any length, so this never falls back; the
        // fallback (a zero key) only keeps the filter free of panics.
        HmacSha256::new_from_slice(self.0.as_bytes())
            .unwrap_or_else(|_| HmacSha256::new(&Default::default()))
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(***)")
    }
}

/// A new request id: 32 lowercase hex digits of 128 random bits.
pub fn request_id(random: [u8; 16]) -> String {
    hex(&random)
}

/// True for ids [`request_id`] makes.
pub fn is_request_id(id: &str) -> bool {
    id.len() == 32 && id.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// SHA-256 of a request body, as signed in the token.
pub fn body_digest(body: &[u8]) -> [u8; 32] {
    Sha256::digest(body).into()
}

/// What a deferral token vouches for: the claims that travel in headers,
/// and the body.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeferralClaims<'a> {
    pub headers: HeaderClaims<'a>,
    pub body_sha256: &'a [u8; 32],
}

/// The claims a deferral token vouches for that travel in headers: all of
/// them but the body. [`HeaderClaims::verify`] checks a token with these
/// alone, before any body byte is read, and returns the body digest the
/// token signed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HeaderClaims<'a> {
    pub request_id: &'a str,
    pub tenant: &'a str,
    pub model: &'a str,
    pub priority: &'a str,
    pub estimated_tokens: u64,
}

/// The body digest a verified token signed: the body read afterwards must
/// hash to it ([`SignedBody::check`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[must_use = "a token vouches for a body only once the body is checked against it"]
pub struct SignedBody {
    sha256: [u8; 32],
}

impl SignedBody {
    /// `Ok` when `body` is the body the token was issued for.
    pub fn check(&self, body: &[u8]) -> Result<(), TokenError> {
        self.check_digest(&body_digest(body))
    }

    /// As [`SignedBody::check`], for a digest computed as the body streamed.
    pub fn check_digest(&self, digest: &[u8; 32]) -> Result<(), TokenError> {
        if &self.sha256 == digest {
            Ok(())
        } else {
            Err(TokenError::BodyMismatch)
        }
    }
}

impl HeaderClaims<'_> {
    fn mac(&self, secret: &Secret, issued_ms: u64, body_sha256: &[u8; 32]) -> HmacSha256 {
        let mut mac = secret.mac();
        let text = format!(
            "{DEFERRAL_CONTEXT}\n{}\n{}\n{}\n{}\n{}\n{issued_ms}\n",
            self.request_id, self.tenant, self.model, self.priority, self.estimated_tokens
        );
        mac.update(text.as_bytes());
        mac.update(body_sha256);
        mac
    }

    /// Checks `token` against these claims with `verifier`. The body digest
    /// is read from the token and covered by its MAC: on success, the body
    /// must still be checked against the returned [`SignedBody`].
    pub fn verify(&self, token: &str, verifier: &Verifier<'_>) -> Result<SignedBody, TokenError> {
        let parsed = parse_token(token)?;
        verifier.check(parsed.issued_ms, &parsed.tag, |secret| {
            self.mac(secret, parsed.issued_ms, &parsed.body_sha256)
        })?;
        Ok(SignedBody {
            sha256: parsed.body_sha256,
        })
    }
}

impl DeferralClaims<'_> {
    /// The token for these claims, issued at `issued_ms` (Unix ms).
    pub fn sign(&self, secret: &Secret, issued_ms: u64) -> String {
        let tag = self
            .headers
            .mac(secret, issued_ms, self.body_sha256)
            .finalize()
            .into_bytes();
        format!(
            "{TOKEN_VERSION}.{issued_ms}.{}.{}",
            hex(self.body_sha256),
            hex(&tag)
        )
    }

    /// [`HeaderClaims::verify`] and the body check in one, for callers that
    /// hold the body already.
    pub fn verify(&self, token: &str, verifier: &Verifier<'_>) -> Result<(), TokenError> {
        self.headers
            .verify(token, verifier)?
            .check_digest(self.body_sha256)
    }
}

/// What a token is checked with: the secrets it may be signed with (signers
/// use the first, verifiers accept any), the verifier's clock (Unix ms) and
/// the oldest token it accepts, in ms (either way: the clocks of the signer
/// and of the verifier differ a little). Deferral tokens and counter-write
/// signatures are checked alike.
#[derive(Clone, Copy, Debug)]
pub struct Verifier<'a> {
    pub secrets: &'a [Secret],
    pub now_ms: u64,
    pub max_age_ms: u64,
}

impl<'a> Verifier<'a> {
    pub fn new(secrets: &'a [Secret], now_ms: u64, max_age_ms: u64) -> Self {
        Verifier {
            secrets,
            now_ms,
            max_age_ms,
        }
    }

    /// A token issued at `issued_ms` is good when it is no older (or newer)
    /// than the verifier accepts and its `tag` is the MAC that `mac` computes
    /// under one of the secrets.
    pub(crate) fn check(
        &self,
        issued_ms: u64,
        tag: &[u8],
        mac: impl Fn(&Secret) -> HmacSha256,
    ) -> Result<(), TokenError> {
        if self.now_ms.abs_diff(issued_ms) > self.max_age_ms {
            return Err(TokenError::Expired);
        }
        if self
            .secrets
            .iter()
            .any(|secret| mac(secret).verify_slice(tag).is_ok())
        {
            Ok(())
        } else {
            Err(TokenError::BadSignature)
        }
    }
}

/// Why a deferral token is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TokenError {
    Malformed,
    Expired,
    BadSignature,
    /// The token is valid, but the body is not the one it was issued for.
    BodyMismatch,
}

impl TokenError {
    /// Metric label.
    pub fn reason(self) -> &'static str {
        match self {
            TokenError::Malformed => "token_malformed",
            TokenError::Expired => "token_expired",
            TokenError::BadSignature => "token_bad_signature",
            TokenError::BodyMismatch => "token_body_mismatch",
        }
    }
}

impl fmt::Display for TokenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            TokenError::Malformed => "the deferral token is malformed",
            TokenError::Expired => "the deferral token is too old (or from the future)",
            TokenError::BadSignature => "the deferral token's signature does not match",
            TokenError::BodyMismatch => {
                "the request body is not the one the deferral token was issued for"
            }
        })
    }
}

/// A token's parts: `v2.<issued ms>.<body sha256 hex>.<mac hex>`.
struct ParsedToken {
    issued_ms: u64,
    body_sha256: [u8; 32],
    tag: Vec<u8>,
}

fn parse_token(token: &str) -> Result<ParsedToken, TokenError> {
    let mut parts = token.trim().split('.');
    let (Some(TOKEN_VERSION), Some(issued), Some(digest), Some(tag), None) = (
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
    ) else {
        return Err(TokenError::Malformed);
    };
    let issued_ms: u64 = issued.parse().map_err(|_| TokenError::Malformed)?;
    let body_sha256: [u8; 32] = unhex(digest)
        .and_then(|d| d.try_into().ok())
        .ok_or(TokenError::Malformed)?;
    let tag = unhex(tag)
        .filter(|t| t.len() == 32)
        .ok_or(TokenError::Malformed)?;
    Ok(ParsedToken {
        issued_ms,
        body_sha256,
        tag,
    })
}

fn resume_mac(secret: &Secret, request_id: &str, tenant: &str) -> HmacSha256 {
    let mut mac = secret.mac();
    mac.update(format!("{RESUME_CONTEXT}\n{request_id}\n{tenant}\n").as_bytes());
    mac
}

/// The resume token of a request: `<request id>.<hex MAC>`.
pub fn resume_token(secret: &Secret, request_id: &str, tenant: &str) -> String {
    let tag = resume_mac(secret, request_id, tenant)
        .finalize()
        .into_bytes();
    format!("{request_id}.{}", hex(&tag))
}

/// The path that resumes the stream of `resume_token`.
pub fn resume_path(resume_token: &str) -> String {
    format!("{RESUME_PATH_PREFIX}{resume_token}")
}

/// The request id a resume token names, before its MAC is checked (the
/// verifier needs the id to look up the tenant). `None` when malformed.
pub fn resume_token_request_id(token: &str) -> Option<&str> {
    // The MAC is hex (no dots), so the last dot ends the id.
    let (id, tag) = token.rsplit_once('.')?;
    let plain_id = !id.is_empty()
        && id.len() <= 128
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.:@+~".contains(&b));
    (plain_id && tag.len() == 64).then_some(id)
}

/// True when `token` is the resume token of `request_id` for `tenant` under
/// any of `secrets`.
pub fn verify_resume_token(token: &str, secrets: &[Secret], tenant: &str) -> bool {
    let Some(id) = resume_token_request_id(token) else {
        return false;
    };
    let Some(tag) = token.rsplit_once('.').and_then(|(_, tag)| unhex(tag)) else {
        return false;
    };
    secrets
        .iter()
        .any(|secret| resume_mac(secret, id, tenant).verify_slice(&tag).is_ok())
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(out, "{b:02x}");
    }
    out
}

pub(crate) fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    let digit = |c: u8| match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None,
    };
    text.as_bytes()
        .chunks_exact(2)
        .map(|pair| match pair {
            [hi, lo] => Some(digit(*hi)? << 4 | digit(*lo)?),
            _ => None,
        })
        .collect()
}

/// For the tests of each signed token: `token`, issued at 100 000 ms,
/// passes `verify(token, now_ms)` (which allows 30 s) 30 s later and not a
/// millisecond after, is refused 30 s and a millisecond before its issue,
/// and each of `malformed` is refused as malformed.
#[cfg(test)]
pub(crate) fn assert_refused_when_stale_or_malformed(
    verify: impl Fn(&str, u64) -> Result<(), TokenError>,
    token: &str,
    malformed: &[&str],
) {
    assert_eq!(verify(token, 130_000), Ok(()));
    assert_eq!(verify(token, 130_001), Err(TokenError::Expired));
    assert_eq!(verify(token, 69_999), Err(TokenError::Expired));
    for bad in malformed {
        assert_eq!(verify(bad, 100_000), Err(TokenError::Malformed), "{bad}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secret(c: char) -> Secret {
        Secret::new(c.to_string().repeat(40)).unwrap()
    }

    fn claims(body: &[u8; 32]) -> DeferralClaims<'_> {
        DeferralClaims {
            headers: HeaderClaims {
                request_id: "0123456789abcdef0123456789abcdef",
                tenant: "acme",
                model: "gpt-4o",
                priority: "normal",
                estimated_tokens: 1200,
            },
            body_sha256: body,
        }
    }

    #[test]
    fn a_signed_token_verifies_with_any_configured_secret() {
        let digest = body_digest(b"{}");
        let token = claims(&digest).sign(&secret('a'), 1_000_000);
        assert!(token.starts_with(&format!("v2.1000000.{}.", hex(&digest))));
        let both = [secret('b'), secret('a')];
        assert_eq!(
            claims(&digest).verify(&token, &Verifier::new(&both, 1_000_500, 30_000)),
            Ok(())
        );
        assert_eq!(
            claims(&digest).verify(&token, &Verifier::new(&[secret('b')], 1_000_500, 30_000)),
            Err(TokenError::BadSignature)
        );
    }

    #[test]
    fn every_claim_is_bound() {
        let digest = body_digest(b"{\"model\":\"gpt-4o\"}");
        let other_digest = body_digest(b"{\"model\":\"gpt-4\"}");
        let good = claims(&digest);
        let token = good.sign(&secret('a'), 5_000);
        let variants = [
            HeaderClaims {
                request_id: "1123456789abcdef0123456789abcdef",
                ..good.headers
            },
            HeaderClaims {
                tenant: "acme2",
                ..good.headers
            },
            HeaderClaims {
                model: "gpt-4",
                ..good.headers
            },
            HeaderClaims {
                priority: "high",
                ..good.headers
            },
            HeaderClaims {
                estimated_tokens: 1,
                ..good.headers
            },
        ];
        // The body: the signed digest is not this body's.
        assert_eq!(
            DeferralClaims {
                body_sha256: &other_digest,
                ..good
            }
            .verify(&token, &Verifier::new(&[secret('a')], 5_000, 30_000)),
            Err(TokenError::BodyMismatch)
        );
        for headers in variants {
            let claims = DeferralClaims { headers, ..good };
            assert_eq!(
                claims.verify(&token, &Verifier::new(&[secret('a')], 5_000, 30_000)),
                Err(TokenError::BadSignature),
                "{claims:?}"
            );
        }
        // The issue time is signed too.
        let moved = token.replacen("v2.5000.", "v2.5001.", 1);
        assert_eq!(
            good.verify(&moved, &Verifier::new(&[secret('a')], 5_000, 30_000)),
            Err(TokenError::BadSignature)
        );
    }

    /// Each of the token's own fields, changed, fails before any body is
    /// looked at (the header check alone refuses it).
    #[test]
    fn tampering_with_any_field_of_the_token_is_refused_from_the_headers() {
        let digest = body_digest(b"{\"model\":\"gpt-4o\"}");
        let good = claims(&digest);
        let token = good.sign(&secret('a'), 5_000);
        let fields: Vec<String> = token.split('.').map(str::to_string).collect();
        assert_eq!(fields.len(), 4, "{token}");
        let field = |index: usize| fields.get(index).cloned().unwrap_or_default();
        // The text with its last character changed.
        let flip = |text: String| {
            let mut text = text;
            let last = if text.pop() == Some('0') { '1' } else { '0' };
            text.push(last);
            text
        };
        let with = |index: usize, value: &str| {
            let parts: Vec<&str> = fields
                .iter()
                .enumerate()
                .map(|(i, part)| if i == index { value } else { part.as_str() })
                .collect();
            parts.join(".")
        };
        let s = [secret('a')];
        let header_check = |t: &str| good.headers.verify(t, &Verifier::new(&s, 5_000, 30_000));
        assert!(header_check(&token).is_ok());
        // Version.
        assert_eq!(header_check(&with(0, "v1")), Err(TokenError::Malformed));
        assert_eq!(header_check(&with(0, "v3")), Err(TokenError::Malformed));
        // Issue time (still fresh, so only the MAC can tell).
        assert_eq!(
            header_check(&with(1, "5001")),
            Err(TokenError::BadSignature)
        );
        // Body digest: another body's digest, signed by nobody.
        let other = hex(&body_digest(b"{}"));
        assert_eq!(
            header_check(&with(2, &other)),
            Err(TokenError::BadSignature)
        );
        assert_eq!(
            header_check(&with(2, &flip(field(2)))),
            Err(TokenError::BadSignature)
        );
        assert_eq!(header_check(&with(2, "00")), Err(TokenError::Malformed));
        // MAC.
        assert_eq!(
            header_check(&with(3, &flip(field(3)))),
            Err(TokenError::BadSignature)
        );
        assert_eq!(
            header_check(&with(3, field(3).get(..62).unwrap_or_default())),
            Err(TokenError::Malformed)
        );
        // Claims in the headers.
        let other_tenant = HeaderClaims {
            tenant: "acme2",
            ..good.headers
        };
        assert_eq!(
            other_tenant.verify(&token, &Verifier::new(&s, 5_000, 30_000)),
            Err(TokenError::BadSignature)
        );
    }

    #[test]
    fn a_valid_token_vouches_only_for_its_own_body() {
        let body = b"{\"model\":\"gpt-4o\",\"messages\":[]}";
        let digest = body_digest(body);
        let token = claims(&digest).sign(&secret('a'), 5_000);
        let signed = claims(&digest)
            .headers
            .verify(&token, &Verifier::new(&[secret('a')], 5_000, 30_000))
            .unwrap();
        assert_eq!(signed.check(body), Ok(()));
        assert_eq!(signed.check(b"{}"), Err(TokenError::BodyMismatch));
        assert_eq!(
            signed.check(body.get(1..).unwrap_or_default()),
            Err(TokenError::BodyMismatch)
        );
        // The one-call form says the same.
        let other = body_digest(b"{}");
        assert_eq!(
            claims(&other).verify(&token, &Verifier::new(&[secret('a')], 5_000, 30_000)),
            Err(TokenError::BodyMismatch)
        );
        assert_eq!(TokenError::BodyMismatch.reason(), "token_body_mismatch");
    }

    #[test]
    fn old_future_and_malformed_tokens_are_refused() {
        let digest = body_digest(b"");
        let c = claims(&digest);
        let token = c.sign(&secret('a'), 100_000);
        let s = [secret('a')];
        assert_refused_when_stale_or_malformed(
            |token, now| c.verify(token, &Verifier::new(&s, now, 30_000)),
            &token,
            &[
                "",
                "1",
                "v1",
                "v2.100000.00",
                "v1.100000.00",
                "v2.x.00.00",
                "v2.100000.zz.zz",
                "v2.100000.00.00",
                "v2.1.2.3.4",
            ],
        );
    }

    #[test]
    fn resume_tokens_bind_the_id_to_its_tenant() {
        let id = request_id([7; 16]);
        assert!(is_request_id(&id));
        let token = resume_token(&secret('a'), &id, "acme");
        assert_eq!(resume_token_request_id(&token), Some(id.as_str()));
        assert!(verify_resume_token(
            &token,
            &[secret('z'), secret('a')],
            "acme"
        ));
        assert!(!verify_resume_token(&token, &[secret('a')], "other"));
        assert!(!verify_resume_token(&token, &[secret('b')], "acme"));
        assert!(!verify_resume_token(&id, &[secret('a')], "acme"));
        let last = if token.ends_with('0') { "1" } else { "0" };
        let tampered = format!("{}{last}", &token[..token.len() - 1]);
        assert!(!verify_resume_token(&tampered, &[secret('a')], "acme"));
        assert_eq!(resume_token_request_id("an-id.00"), None);
        assert_eq!(
            resume_token_request_id(&format!("a/b.{}", "0".repeat(64))),
            None
        );
        let dotted = resume_token(&secret('a'), "r.1", "acme");
        assert_eq!(resume_token_request_id(&dotted), Some("r.1"));
        assert!(verify_resume_token(&dotted, &[secret('a')], "acme"));
    }

    #[test]
    fn short_secrets_are_refused_and_never_printed() {
        assert!(Secret::new("short").is_err());
        let s = secret('q');
        assert_eq!(format!("{s:?}"), "Secret(***)");
    }

    #[test]
    fn hex_round_trips() {
        let bytes: Vec<u8> = (0..=255).collect();
        assert_eq!(unhex(&hex(&bytes)), Some(bytes));
        assert_eq!(unhex("abc"), None);
        assert_eq!(unhex("AB"), None);
    }
}
