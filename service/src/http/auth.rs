//! Who may call what: every route but `/healthz`, `/readyz`,
//! `/openapi.json` and the status page `/` (static, its data comes from
//! reader routes) belongs to a role ([`Role`]), and [`require`] checks the
//! caller's `Authorization: Bearer <token>` against that role's tokens
//! (`[auth]`) and the admin's, in constant time (`subtle`), or, without a
//! token, the DNS names of its verified client certificate against
//! `[auth.certificates]`.
//!
//! - A role with no token is open, except admin: with no admin token
//!   (`[auth.admin]` or `admin.token`) only loopback peers are served.
//! - No or an unknown token: 401 `unauthorized` with a `WWW-Authenticate`
//!   challenge; a known token of another role: 403 `forbidden`; more than
//!   one `Authorization` header: 400 `repeated_authorization`; a peer
//!   locked out by the failed-token limit ([`super::auth_limiter`]): 429
//!   `too_many_auth_failures` with `Retry-After`. All carry the JSON error
//!   body, change nothing, are counted in
//!   `scorer_auth_refusals_total{route, reason}` and logged at warn level,
//!   rate-limited, with the peer's address (never the token).

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::{ConnectInfo, MatchedPath, Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use rustls::server::ParsedCertificate;
use rustls_pki_types::{CertificateDer, ServerName};
use scorer_engine::config::Config;
pub use scorer_engine::config::auth::Role;
use subtle::ConstantTimeEq;

use crate::http::auth_limiter::{Attempt, Limits};
use crate::http::transport::tls::ClientCertificate;
use crate::http::{ApiError, AppState};

/// Whether `presented` equals `expected`, in time independent of where they differ.
pub fn token_matches(presented: &str, expected: &str) -> bool {
    // Lengths are compared in the clear: a token's length is not secret enough
    // to hide at the cost of padding, and `ct_eq` needs equal lengths.
    presented.len() == expected.len() && bool::from(presented.as_bytes().ct_eq(expected.as_bytes()))
}

/// The token of an `Authorization: Bearer <token>` value. The scheme name
/// is case-insensitive (RFC 9110 §11.1: `bearer`, `BEARER` too); one or more
/// spaces separate it from the token.
pub fn bearer_token(value: &str) -> Option<&str> {
    let (scheme, token) = value.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim_start_matches(' '))
}

/// The role of every route but the open ones (`/healthz`, `/readyz`,
/// `/openapi.json`, `/`): what [`super::app`] layers and the OpenAPI document
/// declares.
pub const ROUTE_ROLES: &[(&str, Role)] = &[
    ("/v1/telemetry", Role::Agent),
    ("/v1/score", Role::Router),
    ("/v1/feedback", Role::Router),
    ("/v1/view", Role::Router),
    ("/v1/router/load", Role::Router),
    ("/v1/router/decisions", Role::Router),
    ("/v1/model/files/{file}", Role::Router),
    ("/v1/stats", Role::Reader),
    ("/v1/config/canary", Role::Reader),
    ("/v1/log/stats", Role::Reader),
    ("/v1/workers", Role::Reader),
    ("/v1/features", Role::Reader),
    ("/v1/model", Role::Reader),
    ("/v1/shadow", Role::Reader),
    ("/v1/debug/score", Role::Reader),
    ("/metrics", Role::Reader),
    ("/v1/admin/reload", Role::Admin),
    ("/v1/admin/config", Role::Admin),
    ("/v1/admin/config/rollback", Role::Admin),
    ("/v1/admin/config/canary", Role::Admin),
    ("/v1/admin/config/canary/promote", Role::Admin),
    ("/v1/admin/config/canary/abort", Role::Admin),
    ("/v1/admin/model/promote", Role::Admin),
    ("/v1/admin/model/rollback", Role::Admin),
    ("/v1/admin/model/pin", Role::Admin),
    ("/v1/admin/overrides", Role::Admin),
    ("/v1/admin/workers/{worker_id}/override", Role::Admin),
];

/// Why a request was refused (the `reason` label).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// No bearer token (nor a client certificate), where the role has credentials.
    MissingToken,
    /// A token no role has.
    UnknownToken,
    /// A verified client certificate whose names `[auth.certificates]` does not list.
    UnknownCertificate,
    /// A credential of another role.
    WrongRole,
    /// Admin without an admin token, from a non-loopback peer.
    NotLoopback,
    /// More than one `Authorization` header (RFC 9110 §5.3: it is not a list).
    RepeatedAuthorization,
    /// The peer spent its failed attempts (`auth.failure_burst`).
    TooManyFailures,
}

impl Refusal {
    /// Label value.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::MissingToken => "missing_token",
            Self::UnknownToken => "unknown_token",
            Self::UnknownCertificate => "unknown_certificate",
            Self::WrongRole => "wrong_role",
            Self::NotLoopback => "not_loopback",
            Self::RepeatedAuthorization => "repeated_authorization",
            Self::TooManyFailures => "too_many_auth_failures",
        }
    }
}

/// Who is calling: the role and configured name of the credential it
/// presented (a token's name, or a certificate's DNS name).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Identity<'c> {
    /// The credential's role.
    pub role: Role,
    /// Its name in `[auth.<role>]` or `[auth.certificates]`.
    pub name: &'c str,
}

/// The caller's name on an authorised request, for the decision log's
/// provenance; absent when the caller presented no known credential.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller(pub Arc<str>);

/// The role of the caller's credential, beside [`Caller`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallerRole(pub Role);

/// The tokens of `role`, name and value: `[auth.<role>]`, and for admin
/// also `admin.token`, named `admin`.
fn role_tokens(cfg: &Config, role: Role) -> impl Iterator<Item = (&str, &str)> {
    let legacy = cfg
        .admin
        .token
        .as_deref()
        .filter(|_| role == Role::Admin)
        .map(|t| ("admin", t));
    cfg.auth
        .tokens(role)
        .iter()
        .map(|(n, t)| (n.as_str(), t.as_str()))
        .chain(legacy)
}

/// The role of the token `presented`, and its name; `None` when no role has it.
/// Every configured token is compared, so the time does not tell which matched.
fn role_of<'c>(cfg: &'c Config, presented: &str) -> Option<Identity<'c>> {
    let mut found = None;
    for role in Role::ALL {
        for (name, token) in role_tokens(cfg, role) {
            if token_matches(presented, token) && found.is_none() {
                found = Some(Identity { role, name });
            }
        }
    }
    found
}

/// The identity of a client certificate that rustls verified against
/// `server.tls.client_ca_path`: the first `[auth.certificates]` DNS name it
/// is valid for, matched as an HTTPS client matches a server's name
/// (`subjectAltName` DNS entries, wildcards included).
fn certificate_identity<'c>(cfg: &'c Config, cert: &CertificateDer<'_>) -> Option<Identity<'c>> {
    if !cfg.server.tls.verifies_clients() || cfg.auth.certificates.is_empty() {
        return None;
    }
    let parsed = ParsedCertificate::try_from(cert).ok()?;
    cfg.auth
        .certificates
        .iter()
        .find(|(name, _)| {
            ServerName::try_from(name.as_str())
                .is_ok_and(|n| rustls::client::verify_server_name(&parsed, &n).is_ok())
        })
        .map(|(name, &role)| Identity { role, name })
}

/// Whether `role` has any credential: a token, or a certificate name while
/// client certificates are verified.
pub(crate) fn has_credentials(cfg: &Config, role: Role) -> bool {
    role_tokens(cfg, role).next().is_some()
        || (cfg.server.tls.verifies_clients() && cfg.auth.certificates.values().any(|&r| r == role))
}

/// Whether a request with `presented` (its bearer token, if any) and `cert`
/// (its verified client certificate, if any) from `peer` may call a route
/// of `role` under `cfg`: `Ok` with the caller's identity when it presented
/// a known credential. A token, when present, decides; a certificate counts
/// only without one.
pub fn authorize<'c>(
    cfg: &'c Config,
    role: Role,
    presented: Option<&str>,
    cert: Option<&CertificateDer<'_>>,
    peer: Option<SocketAddr>,
) -> Result<Option<Identity<'c>>, Refusal> {
    let by_token = presented.map(|t| role_of(cfg, t));
    let by_cert = || cert.and_then(|c| certificate_identity(cfg, c));
    if !has_credentials(cfg, role) {
        if role == Role::Admin && !peer.is_some_and(|p| p.ip().is_loopback()) {
            return Err(Refusal::NotLoopback);
        }
        return Ok(by_token.unwrap_or_else(by_cert));
    }
    let who = match by_token {
        Some(Some(who)) => who,
        Some(None) => return Err(Refusal::UnknownToken),
        None => match (by_cert(), cert) {
            (Some(who), _) => who,
            (None, Some(_)) if cfg.server.tls.verifies_clients() => {
                return Err(Refusal::UnknownCertificate);
            }
            (None, _) => return Err(Refusal::MissingToken),
        },
    };
    if who.role == role || who.role == Role::Admin {
        Ok(Some(who))
    } else {
        Err(Refusal::WrongRole)
    }
}

/// The `WWW-Authenticate` challenge of a 401 (RFC 6750 §3).
pub const CHALLENGE: &str = "Bearer realm=\"scorer\"";

/// The challenge of a 401 for a token that no role has.
pub const CHALLENGE_INVALID_TOKEN: &str = "Bearer realm=\"scorer\", error=\"invalid_token\"";

/// The answer to a refused request; `retry_after_s` for
/// [`Refusal::TooManyFailures`].
fn refusal_answer(role: Role, why: Refusal, retry_after_s: u64) -> Response {
    let role = role.as_str();
    let error = match why {
        Refusal::MissingToken | Refusal::UnknownToken => ApiError::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            format!(
                "this route needs `Authorization: Bearer <token>` with a token of role `{role}` (or `admin`)"
            ),
        ),
        Refusal::UnknownCertificate => ApiError::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            format!(
                "the client certificate is valid but none of its names is in [auth.certificates]; this route needs a certificate or token of role `{role}` (or `admin`)"
            ),
        ),
        Refusal::WrongRole => ApiError::new(
            StatusCode::FORBIDDEN,
            "forbidden",
            format!("the credential is valid but not of role `{role}` (or `admin`)"),
        ),
        Refusal::NotLoopback => ApiError::new(
            StatusCode::FORBIDDEN,
            "forbidden",
            "admin endpoints answer only on loopback unless an admin token is set ([auth.admin] or [admin] token)",
        ),
        Refusal::RepeatedAuthorization => ApiError::new(
            StatusCode::BAD_REQUEST,
            "repeated_authorization",
            "the request carries more than one Authorization header; send exactly one",
        ),
        Refusal::TooManyFailures => ApiError::new(
            StatusCode::TOO_MANY_REQUESTS,
            "too_many_auth_failures",
            format!("too many unknown tokens from this address; retry after {retry_after_s} s"),
        ),
    };
    let mut resp = error.into_response();
    let headers = resp.headers_mut();
    match why {
        Refusal::MissingToken | Refusal::UnknownCertificate => {
            headers.insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static(CHALLENGE),
            );
        }
        Refusal::UnknownToken => {
            headers.insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static(CHALLENGE_INVALID_TOKEN),
            );
        }
        Refusal::TooManyFailures => {
            headers.insert(header::RETRY_AFTER, HeaderValue::from(retry_after_s));
        }
        Refusal::WrongRole | Refusal::NotLoopback | Refusal::RepeatedAuthorization => {}
    }
    resp
}

/// What the failed-token limit makes of `outcome` (see [`authorize`]) on a
/// route of `role`: routes of a role without credentials are open, so a
/// token there is no guess, and neither is passing there.
fn attempt_of<'a>(
    cfg: &Config,
    role: Role,
    outcome: &'a Result<Option<Identity<'_>>, Refusal>,
) -> Option<Attempt<'a>> {
    if !has_credentials(cfg, role) && outcome.is_ok() {
        return None;
    }
    Some(match outcome {
        Ok(Some(who)) => Attempt::Succeeded(who.name),
        Err(Refusal::UnknownToken) => Attempt::Failed,
        Ok(None) | Err(_) => Attempt::Refused,
    })
}

/// Middleware: the request must be allowed for `role` (see [`authorize`])
/// and its peer not locked out by the failed-token limit
/// ([`super::auth_limiter`]).
pub(crate) async fn require(
    State((st, role)): State<(AppState, Role)>,
    mut req: Request,
    next: Next,
) -> Response {
    let cfg = st.engine.config();
    let peer = req
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|c| c.0);
    let mut values = req.headers().get_all(header::AUTHORIZATION).iter();
    let first = values.next();
    let outcome = if values.next().is_some() {
        Err(Refusal::RepeatedAuthorization)
    } else {
        let presented = first.and_then(|v| v.to_str().ok()).and_then(bearer_token);
        let cert = req.extensions().get::<ClientCertificate>().map(|c| &*c.0);
        authorize(&cfg, role, presented, cert, peer)
    };
    let limits = Limits {
        burst: cfg.auth.failure_burst,
        refill_ms: cfg.auth.failure_refill_ms,
    };
    let gate = match (peer, attempt_of(&cfg, role, &outcome)) {
        (Some(peer), Some(attempt)) => {
            st.auth_limiter
                .admit(peer.ip(), st.clock.monotonic_ms(), limits, attempt)
        }
        _ => Ok(()),
    };
    let (why, retry_after_s) = match (gate, outcome) {
        (Ok(()), Ok(who)) => {
            if let Some(who) = who {
                let caller = Caller(Arc::from(who.name));
                req.extensions_mut().insert(caller);
                req.extensions_mut().insert(CallerRole(who.role));
            }
            drop(cfg);
            return next.run(req).await;
        }
        (Ok(()), Err(why)) => (why, 0),
        (Err(retry_after_s), _) => (Refusal::TooManyFailures, retry_after_s),
    };
    drop(cfg);
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| req.uri().path().to_owned(), |p| p.as_str().to_owned());
    st.metrics.auth_refused(&route, why.as_str());
    if let Some(held_back) = st.auth_warn.admit(st.clock.monotonic_ms()) {
        tracing::warn!(
            route = %route,
            role = role.as_str(),
            reason = why.as_str(),
            peer = %peer.map_or_else(|| "-".to_owned(), |p| p.to_string()),
            held_back,
            "request refused"
        );
    }
    refusal_answer(role, why, retry_after_s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bearer_scheme_is_case_insensitive() {
        // Found by a fresh-eyes run: `bearer <token>` got 401.
        for v in ["Bearer t0k", "bearer t0k", "BEARER t0k", "Bearer  t0k"] {
            assert_eq!(bearer_token(v), Some("t0k"), "{v}");
        }
        for v in ["Basic t0k", "Bearert0k", "Bearer", "t0k"] {
            assert_eq!(bearer_token(v), None, "{v}");
        }
        // The token itself stays exact.
        assert_eq!(bearer_token("bearer T0K"), Some("T0K"));
    }

    #[test]
    fn tokens_compare_exactly() {
        assert!(token_matches("0123456789abcdef", "0123456789abcdef"));
        assert!(!token_matches("0123456789abcdeF", "0123456789abcdef"));
        assert!(!token_matches("0123456789abcde", "0123456789abcdef"));
        assert!(!token_matches("", "0123456789abcdef"));
    }

    const AGENT: &str = "agent-token-0123456789";
    const ROUTER_OLD: &str = "router-old-0123456789";
    const ROUTER_NEW: &str = "router-new-0123456789";
    const ADMIN: &str = "admin-token-0123456789";

    /// [`authorize`] without a certificate, the identity reduced to its name.
    fn name_of<'c>(
        c: &'c Config,
        role: Role,
        token: Option<&str>,
        peer: Option<SocketAddr>,
    ) -> Result<Option<&'c str>, Refusal> {
        authorize(c, role, token, None, peer).map(|who| who.map(|w| w.name))
    }

    fn cfg() -> Config {
        let mut c = Config::default();
        c.auth.agent.insert("agent-1".into(), AGENT.into());
        c.auth.router.insert("old".into(), ROUTER_OLD.into());
        c.auth.router.insert("new".into(), ROUTER_NEW.into());
        c.auth.admin.insert("ops".into(), ADMIN.into());
        c
    }

    #[test]
    fn each_role_takes_its_tokens_or_the_admins_and_refuses_the_others() {
        let c = cfg();
        let lo: Option<SocketAddr> = Some("127.0.0.1:1".parse().unwrap());
        assert_eq!(
            name_of(&c, Role::Agent, Some(AGENT), lo),
            Ok(Some("agent-1"))
        );
        assert_eq!(name_of(&c, Role::Agent, Some(ADMIN), lo), Ok(Some("ops")));
        assert_eq!(
            name_of(&c, Role::Agent, Some(ROUTER_NEW), lo),
            Err(Refusal::WrongRole)
        );
        assert_eq!(
            name_of(&c, Role::Agent, None, lo),
            Err(Refusal::MissingToken)
        );
        assert_eq!(
            name_of(&c, Role::Router, Some("nobody-0123456789xx"), lo),
            Err(Refusal::UnknownToken)
        );
        // Rotation: both router tokens at once.
        assert_eq!(
            name_of(&c, Role::Router, Some(ROUTER_OLD), lo),
            Ok(Some("old"))
        );
        assert_eq!(
            name_of(&c, Role::Router, Some(ROUTER_NEW), lo),
            Ok(Some("new"))
        );
        // Reader has no token: open.
        assert_eq!(name_of(&c, Role::Reader, None, None), Ok(None));
        // Admin with tokens: loopback alone is not enough.
        assert_eq!(
            name_of(&c, Role::Admin, None, lo),
            Err(Refusal::MissingToken)
        );
        assert_eq!(
            name_of(&c, Role::Admin, Some(AGENT), lo),
            Err(Refusal::WrongRole)
        );
    }

    #[test]
    fn without_tokens_everything_is_open_but_admin_off_loopback() {
        let c = Config::default();
        let far: Option<SocketAddr> = Some("10.0.0.1:1".parse().unwrap());
        let lo: Option<SocketAddr> = Some("[::1]:1".parse().unwrap());
        for role in [Role::Agent, Role::Router, Role::Reader] {
            assert_eq!(name_of(&c, role, None, far), Ok(None));
        }
        assert_eq!(name_of(&c, Role::Admin, None, lo), Ok(None));
        assert_eq!(
            name_of(&c, Role::Admin, None, far),
            Err(Refusal::NotLoopback)
        );
        assert_eq!(
            name_of(&c, Role::Admin, None, None),
            Err(Refusal::NotLoopback)
        );
    }

    #[test]
    fn only_unknown_tokens_on_guarded_routes_count_as_failed_attempts() {
        let c = cfg();
        let who: Result<Option<Identity<'_>>, Refusal> = Ok(Some(Identity {
            role: Role::Router,
            name: "old",
        }));
        assert_eq!(
            attempt_of(&c, Role::Router, &who),
            Some(Attempt::Succeeded("old"))
        );
        assert_eq!(
            attempt_of(&c, Role::Router, &Err(Refusal::UnknownToken)),
            Some(Attempt::Failed)
        );
        for why in [
            Refusal::MissingToken,
            Refusal::WrongRole,
            Refusal::RepeatedAuthorization,
        ] {
            assert_eq!(
                attempt_of(&c, Role::Router, &Err(why)),
                Some(Attempt::Refused)
            );
        }
        // Reader has no token here: its routes are open, a token sent there
        // is no guess, right or wrong, and a locked-out peer still gets them.
        assert_eq!(attempt_of(&c, Role::Reader, &who), None);
        assert_eq!(attempt_of(&c, Role::Reader, &Ok(None)), None);
    }
}
