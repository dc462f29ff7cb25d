//! Who may change state through an admin listener.
//!
//! Reads (`GET`, `HEAD`: metrics, health, rate listings) are always open.
//! Every other method is a write and needs `Authorization: Bearer <token>`
//! when an admin token is configured. Without a token, writes are allowed
//! only on a loopback listener (the local operator, the demo, the tests);
//! a listener bound elsewhere refuses them with 403 and says how to
//! configure a token. Used by `sluice-consumer` and by `sluice-rls`'s
//! in-process consumer admin.

use crate::metrics::{ReasonLabels, Refusal};
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::Router;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use sluice_openai::openai_error_body;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use subtle::ConstantTimeEq;

/// The admin token itself (an environment variable, never a flag: a flag
/// shows in `ps`). The file named by `--admin-token-file` wins over it.
pub(crate) const ADMIN_TOKEN_ENV: &str = "SLUICE_ADMIN_TOKEN";
/// Environment variable of `--admin-token-file`.
pub const ADMIN_TOKEN_FILE_ENV: &str = "SLUICE_ADMIN_TOKEN_FILE";
/// Shortest token accepted: shorter ones are guessable.
pub(crate) const MIN_TOKEN_LEN: usize = 16;
/// `type` of the JSON error bodies.
const ERROR_TYPE: &str = "sluice_admin";
/// How to fix a refusal, in every refusal's message.
const HOW_TO_CONFIGURE: &str =
    "start the service with --admin-token-file <file> (or SLUICE_ADMIN_TOKEN) and send \
     'Authorization: Bearer <token>'";

#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    #[error("cannot read the admin token file {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("the admin token from {origin} is empty")]
    Empty { origin: String },
    #[error(
        "the admin token from {origin} has {len} characters; use at least {MIN_TOKEN_LEN} \
         (e.g. `openssl rand -hex 32`)"
    )]
    TooShort { origin: String, len: usize },
}

/// The configured admin token. Only its SHA-256 digest is kept: comparing
/// digests takes the same time whatever the presented token is, its length
/// included.
pub struct AdminToken {
    digest: [u8; 32],
}

impl std::fmt::Debug for AdminToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AdminToken(<redacted>)")
    }
}

fn sha256(bytes: &[u8]) -> [u8; 32] {
    let mut out = [0u8; 32];
    out.copy_from_slice(ring::digest::digest(&ring::digest::SHA256, bytes).as_ref());
    out
}

impl AdminToken {
    /// A token as written in a file or variable (surrounding white space,
    /// such as a trailing newline, is not part of it). `origin` names the
    /// source in errors, never the value.
    pub fn new(secret: &str, origin: &str) -> Result<Self, TokenError> {
        let secret = secret.trim();
        if secret.is_empty() {
            return Err(TokenError::Empty {
                origin: origin.into(),
            });
        }
        let len = secret.chars().count();
        if len < MIN_TOKEN_LEN {
            return Err(TokenError::TooShort {
                origin: origin.into(),
                len,
            });
        }
        Ok(AdminToken {
            digest: sha256(secret.as_bytes()),
        })
    }

    /// Whether `presented` is the token, in constant time.
    pub fn matches(&self, presented: &[u8]) -> bool {
        sha256(presented).ct_eq(&self.digest).into()
    }
}

/// The admin token from `file` (preferred) or [`ADMIN_TOKEN_ENV`]; `None`
/// when neither is set. An empty variable counts as unset (compose files
/// pass `${SLUICE_ADMIN_TOKEN:-}`); an empty file is an error.
pub fn load_token(file: Option<&Path>) -> Result<Option<AdminToken>, TokenError> {
    let file = file
        .map(|path| {
            std::fs::read_to_string(path)
                .map(|text| (path, text))
                .map_err(|source| TokenError::Read {
                    path: path.to_path_buf(),
                    source,
                })
        })
        .transpose()?;
    resolve_token(file, std::env::var(ADMIN_TOKEN_ENV).ok())
}

fn resolve_token(
    file: Option<(&Path, String)>,
    env: Option<String>,
) -> Result<Option<AdminToken>, TokenError> {
    if let Some((path, text)) = file {
        return AdminToken::new(&text, &path.display().to_string()).map(Some);
    }
    match env {
        Some(value) if !value.trim().is_empty() => {
            AdminToken::new(&value, ADMIN_TOKEN_ENV).map(Some)
        }
        _ => Ok(None),
    }
}

/// What an admin listener does with writes.
#[derive(Debug)]
pub enum WritePolicy {
    /// Loopback listener, no token: the local operator may write.
    Open,
    /// Writes need this bearer token (wherever the listener is bound).
    Token(AdminToken),
    /// Non-loopback listener, no token: writes are refused.
    Disabled { listener: SocketAddr },
}

/// Whether `addr` only accepts local connections. `0.0.0.0` and `::` are
/// not loopback: they listen on every interface.
pub(crate) fn is_loopback(addr: SocketAddr) -> bool {
    addr.ip().to_canonical().is_loopback()
}

/// Reads are the methods that change nothing.
fn is_read(method: &Method) -> bool {
    method == Method::GET || method == Method::HEAD
}

/// The token of an `Authorization: Bearer <token>` header, if there is one.
fn bearer(headers: &HeaderMap) -> Option<&[u8]> {
    let value = headers.get(header::AUTHORIZATION)?.as_bytes();
    let (scheme, token) = value.split_at_checked(7)?;
    scheme
        .eq_ignore_ascii_case(b"bearer ")
        .then(|| token.trim_ascii())
        .filter(|token| !token.is_empty())
}

impl WritePolicy {
    /// The policy of a listener bound to `listener`, with the configured token.
    pub fn for_listener(listener: SocketAddr, token: Option<AdminToken>) -> Self {
        match token {
            Some(token) => WritePolicy::Token(token),
            None if is_loopback(listener) => WritePolicy::Open,
            None => WritePolicy::Disabled { listener },
        }
    }

    /// Whether a request may go on.
    pub fn check(&self, method: &Method, headers: &HeaderMap) -> Result<(), Refusal> {
        if is_read(method) {
            return Ok(());
        }
        match self {
            WritePolicy::Open => Ok(()),
            WritePolicy::Disabled { .. } => Err(Refusal::WritesDisabled),
            WritePolicy::Token(token) => match bearer(headers) {
                None => Err(Refusal::MissingToken),
                Some(presented) if token.matches(presented) => Ok(()),
                Some(_) => Err(Refusal::WrongToken),
            },
        }
    }

    /// One line at start-up saying how writes are guarded (a warning when
    /// they are disabled). Never the token.
    pub fn log_startup(&self, name: &str, listener: SocketAddr) {
        match self {
            WritePolicy::Open => {
                tracing::info!(%listener, "{name}: loopback listener without an admin token: local writes allowed")
            }
            WritePolicy::Token(_) => {
                tracing::info!(%listener, "{name}: admin writes need the bearer token")
            }
            WritePolicy::Disabled { .. } => tracing::warn!(
                %listener,
                "{name}: listening beyond loopback without an admin token: write endpoints answer 403; {HOW_TO_CONFIGURE}"
            ),
        }
    }

    /// The answer to a refused request: a JSON error, with
    /// `WWW-Authenticate` on 401.
    fn refusal_response(&self, refusal: Refusal) -> Response {
        let (status, message) = match (refusal, self) {
            (Refusal::WritesDisabled, WritePolicy::Disabled { listener }) => (
                StatusCode::FORBIDDEN,
                format!(
                    "admin writes are disabled: this listener is bound to {listener} (not \
                     loopback) and no admin token is configured; {HOW_TO_CONFIGURE}"
                ),
            ),
            (Refusal::WritesDisabled, _) => (
                StatusCode::FORBIDDEN,
                format!("admin writes are disabled; {HOW_TO_CONFIGURE}"),
            ),
            (Refusal::MissingToken, _) => (
                StatusCode::UNAUTHORIZED,
                "admin writes need 'Authorization: Bearer <token>'".to_string(),
            ),
            (Refusal::WrongToken, _) => (
                StatusCode::UNAUTHORIZED,
                "the admin bearer token is not valid".to_string(),
            ),
        };
        let body = openai_error_body(&message, ERROR_TYPE, refusal.as_str());
        let mut response = (
            status,
            [(header::CONTENT_TYPE, "application/json")],
            format!("{body}\n"),
        )
            .into_response();
        if status == StatusCode::UNAUTHORIZED {
            let challenge = match refusal {
                Refusal::WrongToken => r#"Bearer realm="sluice-admin", error="invalid_token""#,
                _ => r#"Bearer realm="sluice-admin""#,
            };
            response.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static(challenge),
            );
        }
        response
    }
}

/// A policy and the counter of its refusals.
struct Guard {
    policy: WritePolicy,
    refused: Family<ReasonLabels, Counter>,
}

async fn enforce(State(guard): State<Arc<Guard>>, request: Request, next: Next) -> Response {
    match guard.policy.check(request.method(), request.headers()) {
        Ok(()) => next.run(request).await,
        Err(refusal) => {
            guard
                .refused
                .get_or_create(&ReasonLabels {
                    reason: refusal.as_str(),
                })
                .inc();
            tracing::warn!(
                method = %request.method(),
                path = %request.uri().path(),
                reason = refusal.as_str(),
                "admin write refused"
            );
            guard.policy.refusal_response(refusal)
        }
    }
}

/// `router` with every route behind `policy`; refusals are counted in `refused`.
pub(crate) fn protect(
    router: Router,
    policy: WritePolicy,
    refused: Family<ReasonLabels, Counter>,
) -> Router {
    let guard = Arc::new(Guard { policy, refused });
    router.layer(axum::middleware::from_fn_with_state(guard, enforce))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    const TOKEN: &str = "0123456789abcdef0123";

    fn addr(text: &str) -> SocketAddr {
        text.parse().unwrap()
    }

    fn headers(authorization: Option<&str>) -> HeaderMap {
        let mut headers = HeaderMap::new();
        if let Some(value) = authorization {
            headers.insert(header::AUTHORIZATION, HeaderValue::from_str(value).unwrap());
        }
        headers
    }

    fn token() -> AdminToken {
        AdminToken::new(TOKEN, "test").unwrap()
    }

    #[test]
    fn loopback_is_only_the_loopback_addresses() {
        for a in [
            "127.0.0.1:9092",
            "127.1.2.3:1",
            "[::1]:9092",
            "[::ffff:127.0.0.1]:9",
        ] {
            assert!(is_loopback(addr(a)), "{a}");
        }
        for a in [
            "0.0.0.0:9092",
            "[::]:9092",
            "10.0.0.5:9092",
            "[::ffff:10.0.0.5]:9",
        ] {
            assert!(!is_loopback(addr(a)), "{a}");
        }
    }

    #[test]
    fn without_a_token_loopback_writes_and_elsewhere_refuses() {
        let open = WritePolicy::for_listener(addr("127.0.0.1:9092"), None);
        assert!(matches!(open, WritePolicy::Open));
        assert_eq!(open.check(&Method::PUT, &headers(None)), Ok(()));

        for listener in ["0.0.0.0:9092", "[::]:9092", "192.168.1.4:9092"] {
            let closed = WritePolicy::for_listener(addr(listener), None);
            for method in [Method::PUT, Method::POST, Method::DELETE, Method::PATCH] {
                assert_eq!(
                    closed.check(&method, &headers(Some(&format!("Bearer {TOKEN}")))),
                    Err(Refusal::WritesDisabled),
                    "{listener} {method}"
                );
            }
            assert_eq!(closed.check(&Method::GET, &headers(None)), Ok(()));
            assert_eq!(closed.check(&Method::HEAD, &headers(None)), Ok(()));
        }
    }

    #[test]
    fn a_configured_token_is_required_even_on_loopback() {
        for listener in ["127.0.0.1:9092", "0.0.0.0:9092"] {
            let policy = WritePolicy::for_listener(addr(listener), Some(token()));
            let check = |h: Option<&str>| policy.check(&Method::PUT, &headers(h));
            assert_eq!(check(None), Err(Refusal::MissingToken));
            assert_eq!(
                check(Some("Basic dXNlcjpwYXNz")),
                Err(Refusal::MissingToken)
            );
            assert_eq!(check(Some("Bearer ")), Err(Refusal::MissingToken));
            assert_eq!(
                check(Some("Bearer wrong-token-wrong-token")),
                Err(Refusal::WrongToken)
            );
            assert_eq!(
                check(Some(&format!("Bearer {TOKEN}x"))),
                Err(Refusal::WrongToken)
            );
            assert_eq!(
                check(Some(&format!("Bearer {}", &TOKEN[1..]))),
                Err(Refusal::WrongToken)
            );
            assert_eq!(check(Some(&format!("Bearer {TOKEN}"))), Ok(()));
            assert_eq!(check(Some(&format!("bearer {TOKEN}"))), Ok(()));
            assert_eq!(check(Some(&format!("BEARER  {TOKEN} "))), Ok(()));
            // Reads need nothing.
            assert_eq!(policy.check(&Method::GET, &headers(None)), Ok(()));
        }
    }

    #[test]
    fn tokens_compare_by_digest_whatever_their_length() {
        let t = token();
        assert!(t.matches(TOKEN.as_bytes()));
        assert!(!t.matches(b""));
        assert!(!t.matches(&TOKEN.as_bytes()[..TOKEN.len() - 1]));
        assert!(!t.matches(format!("{TOKEN}{TOKEN}").as_bytes()));
        // Same length, one byte off at either end.
        let mut first = TOKEN.as_bytes().to_vec();
        first[0] ^= 1;
        let mut last = TOKEN.as_bytes().to_vec();
        *last.last_mut().unwrap() ^= 1;
        assert!(!t.matches(&first) && !t.matches(&last));
        // Only the digest is kept, and Debug never shows the secret.
        assert_eq!(format!("{t:?}"), "AdminToken(<redacted>)");
    }

    #[test]
    fn token_sources_file_first_trimmed_and_checked() {
        let path = Path::new("/run/secrets/admin-token");
        let from_file = resolve_token(
            Some((path, format!("{TOKEN}\n"))),
            Some("another-token-from-the-env".into()),
        )
        .unwrap()
        .unwrap();
        assert!(from_file.matches(TOKEN.as_bytes()));

        let from_env = resolve_token(None, Some(format!(" {TOKEN} ")))
            .unwrap()
            .unwrap();
        assert!(from_env.matches(TOKEN.as_bytes()));

        assert!(resolve_token(None, None).unwrap().is_none());
        assert!(resolve_token(None, Some("  ".into())).unwrap().is_none());
        assert!(matches!(
            resolve_token(Some((path, "\n".into())), None),
            Err(TokenError::Empty { .. })
        ));
        let short = resolve_token(None, Some("secret".into())).unwrap_err();
        assert!(matches!(short, TokenError::TooShort { len: 6, .. }));
        // Errors name the source, never the value.
        assert!(!short.to_string().contains("secret"), "{short}");
        assert!(short.to_string().contains(ADMIN_TOKEN_ENV), "{short}");
    }

    #[test]
    fn a_missing_token_file_is_an_error() {
        let error = load_token(Some(Path::new("/nonexistent/sluice-admin-token"))).unwrap_err();
        assert!(matches!(error, TokenError::Read { .. }), "{error}");
    }
}
