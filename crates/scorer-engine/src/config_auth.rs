//! The `[auth]` section: who may call what. Each role takes named bearer
//! tokens (`[auth.router] edge-1 = "<token>"`, or the environment
//! `SCORER_AUTH__ROUTER__EDGE_1`); several per role let a token rotate
//! without downtime. A role without tokens is open, as everything is on
//! loopback by default; on a non-loopback `server.listen` every writing
//! role must have one ([`check_exposure`]), and the reader role too unless
//! `reader_open` ([`check_reader_exposure`]). With client certificates
//! verified (`server.tls.client_ca_path`), `[auth.certificates]` gives the
//! DNS names of client certificates their roles, and a certificate stands
//! in for a token. `failure_burst` and `failure_refill_ms` bound the failed
//! token guesses of one peer address.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Who a caller is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Posts telemetry.
    Agent,
    /// Scores, sends feedback.
    Router,
    /// Reads workers, stats, metrics and the status page.
    Reader,
    /// Everything, and `/v1/admin/*`.
    Admin,
}

impl Role {
    /// Every role.
    pub const ALL: [Self; 4] = [Self::Agent, Self::Router, Self::Reader, Self::Admin];

    /// The roles that change shared state, which need tokens off loopback.
    pub const WRITERS: [Self; 3] = [Self::Agent, Self::Router, Self::Admin];

    /// Its name, as in `[auth.<name>]`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Agent => "agent",
            Self::Router => "router",
            Self::Reader => "reader",
            Self::Admin => "admin",
        }
    }
}

/// Default of `auth.failure_burst`: unknown tokens a peer address may
/// present in a row before it is locked out.
pub const DEFAULT_FAILURE_BURST: u32 = 20;

/// Default of `auth.failure_refill_ms`: ms for a locked-out peer to regain
/// one attempt.
pub const DEFAULT_FAILURE_REFILL_MS: u64 = 1_000;

/// Largest `auth.failure_burst`.
pub const MAX_FAILURE_BURST: u32 = 1_000_000;

/// Largest `auth.failure_refill_ms` (an hour).
pub const MAX_FAILURE_REFILL_MS: u64 = 3_600_000;

/// Least estimated entropy of a token, bits ([`estimated_entropy_bits`]).
/// A 16-character random hex token (64 bits of randomness) falls below it
/// with probability 7.6e-8; `abababababababab` (16 bits) and one repeated
/// character (0 bits) do not reach it.
pub const MIN_TOKEN_ENTROPY_BITS: f64 = 28.0;

/// `[auth]` section: per role, token name → token, and the limit on failed
/// guesses.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AuthConfig {
    /// Tokens that may post telemetry.
    pub agent: BTreeMap<String, String>,
    /// Tokens that may score and send feedback.
    pub router: BTreeMap<String, String>,
    /// Tokens that may read workers, stats, metrics and the status page.
    pub reader: BTreeMap<String, String>,
    /// Tokens that may do everything (`admin.token` counts as one, named `admin`).
    pub admin: BTreeMap<String, String>,
    /// Client certificate DNS name (a `subjectAltName`) → its role, for
    /// clients that present a certificate verified against
    /// `server.tls.client_ca_path` instead of a token. The name is the
    /// caller's identity, as a token's name is.
    pub certificates: BTreeMap<String, Role>,
    /// Which router ids a router credential may use on `/v1/router/*` and
    /// the view stream: its own name, or also ids its name prefixes.
    pub router_ids: RouterIds,
    /// Serve the reader role without a credential on a non-loopback
    /// `server.listen` (otherwise the service refuses to start).
    pub reader_open: bool,
    /// Unknown tokens one peer address may present in a row before its
    /// requests get 429 `too_many_auth_failures`.
    pub failure_burst: u32,
    /// ms for a peer to regain one failed attempt.
    pub failure_refill_ms: u64,
}

impl Default for AuthConfig {
    fn default() -> Self {
        Self {
            agent: BTreeMap::new(),
            router: BTreeMap::new(),
            reader: BTreeMap::new(),
            admin: BTreeMap::new(),
            certificates: BTreeMap::new(),
            reader_open: false,
            failure_burst: DEFAULT_FAILURE_BURST,
            failure_refill_ms: DEFAULT_FAILURE_REFILL_MS,
            router_ids: RouterIds::default(),
        }
    }
}

/// `auth.router_ids`: how a router's id is tied to its credential's name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RouterIds {
    /// The router id is the credential's name (`edge-1` reports as `edge-1`).
    #[default]
    Exact,
    /// The router id is the credential's name, or starts with it and a
    /// `-`, `.` or `_` (credential `edge` reports as `edge-1`, `edge.7`):
    /// one credential shared by a fleet of routers.
    Prefixed,
}

impl RouterIds {
    /// Whether credential `name` may report as router `router_id`.
    pub fn allows(self, name: &str, router_id: &str) -> bool {
        match router_id.strip_prefix(name) {
            Some("") => true,
            Some(rest) => {
                self == Self::Prefixed && rest.len() > 1 && rest.starts_with(['-', '.', '_'])
            }
            None => false,
        }
    }

    /// Its name, as in the configuration.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Exact => "exact",
            Self::Prefixed => "prefixed",
        }
    }
}

impl AuthConfig {
    /// The tokens of `role`.
    pub fn tokens(&self, role: Role) -> &BTreeMap<String, String> {
        match role {
            Role::Agent => &self.agent,
            Role::Router => &self.router,
            Role::Reader => &self.reader,
            Role::Admin => &self.admin,
        }
    }

    /// Checks names and tokens; `Err((key, reason))` names the first bad one.
    pub fn validate(&self) -> Result<(), (String, String)> {
        for role in Role::ALL {
            for (name, token) in self.tokens(role) {
                let key = format!("auth.{}.{name}", role.as_str());
                let name_ok = !name.is_empty()
                    && name.len() <= 64
                    && name
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b"-_".contains(&b));
                if !name_ok {
                    return Err((
                        key,
                        "a token's name must be 1..=64 letters, digits, `-` or `_`".to_owned(),
                    ));
                }
                if let Err(reason) = check_token(token) {
                    return Err((key, reason));
                }
            }
        }
        for name in self.certificates.keys() {
            if !is_dns_name(name) {
                return Err((
                    format!("auth.certificates.{name}"),
                    "must be a DNS name like router-1.scorer.internal, as in the \
                     certificate's subjectAltName"
                        .to_owned(),
                ));
            }
        }
        if !(1..=MAX_FAILURE_BURST).contains(&self.failure_burst) {
            return Err((
                "auth.failure_burst".to_owned(),
                format!(
                    "must be in 1..={MAX_FAILURE_BURST} failed attempts, got {}",
                    self.failure_burst
                ),
            ));
        }
        if !(1..=MAX_FAILURE_REFILL_MS).contains(&self.failure_refill_ms) {
            return Err((
                "auth.failure_refill_ms".to_owned(),
                format!(
                    "must be in 1..={MAX_FAILURE_REFILL_MS} ms, got {}",
                    self.failure_refill_ms
                ),
            ));
        }
        Ok(())
    }

    /// Whether `role` has a credential: a token, or a certificate name when
    /// `certificates_verified` (client certificates are checked).
    pub fn has_credentials(&self, role: Role, certificates_verified: bool) -> bool {
        !self.tokens(role).is_empty()
            || (certificates_verified && self.certificates.values().any(|&r| r == role))
    }
}

/// A DNS name of 1..=253 characters: dot-separated labels of 1..=63
/// letters, digits and `-`, not starting or ending with `-`.
fn is_dns_name(n: &str) -> bool {
    n.len() <= 253
        && n.split('.').all(|l| {
            !l.is_empty()
                && l.len() <= 63
                && !l.starts_with('-')
                && !l.ends_with('-')
                && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
        })
}

/// Checks one bearer token: at least 16 characters of RFC 6750 token68,
/// with at least [`MIN_TOKEN_ENTROPY_BITS`] of estimated entropy. The
/// reason never quotes the token.
pub fn check_token(t: &str) -> Result<(), String> {
    if t.len() < 16 {
        return Err("must be at least 16 characters".to_owned());
    }
    if !is_token68(t) {
        return Err(
            "must be a bearer token (RFC 6750 token68: letters, digits and \
                    `-._~+/`, then optional `=` padding); spaces and other characters \
                    cannot be sent in an Authorization header"
                .to_owned(),
        );
    }
    let bits = estimated_entropy_bits(t);
    if bits < MIN_TOKEN_ENTROPY_BITS {
        return Err(format!(
            "is too easy to guess: its estimated entropy is {bits:.1} bits, under \
             {MIN_TOKEN_ENTROPY_BITS} (length × the Shannon entropy of its own characters; \
             repeated characters or patterns score low); generate one with \
             `openssl rand -hex 16`"
        ));
    }
    Ok(())
}

/// Length × the Shannon entropy (bits per character) of the distribution of
/// `t`'s own bytes: 0 for one repeated character, 16 for `abab…` of 16.
pub fn estimated_entropy_bits(t: &str) -> f64 {
    let mut counts = [0u32; 256];
    for b in t.bytes() {
        counts[usize::from(b)] += 1;
    }
    let n = t.len() as f64;
    let per_char: f64 = counts
        .iter()
        .filter(|&&c| c > 0)
        .map(|&c| {
            let p = f64::from(c) / n;
            -p * p.log2()
        })
        .sum();
    n * per_char
}

/// RFC 6750 `b64token` (RFC 7235 `token68`): `1*( ALPHA / DIGIT / "-" /
/// "." / "_" / "~" / "+" / "/" ) *"="`.
fn is_token68(t: &str) -> bool {
    let body = t.trim_end_matches('=');
    !body.is_empty()
        && body
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-._~+/".contains(&b))
}

/// The service may listen on `listen` with these credentials: on loopback
/// always; elsewhere only when every writing role has a token or, with
/// `certificates_verified`, a certificate name (the admin role may have
/// `admin.token` instead), or when `insecure` (the operator's explicit
/// `server.insecure_allow_unauthenticated`). `Err` names the missing keys.
pub fn check_exposure(
    listen: std::net::SocketAddr,
    auth: &AuthConfig,
    admin_token: Option<&str>,
    certificates_verified: bool,
    insecure: bool,
) -> Result<(), String> {
    if listen.ip().is_loopback() || insecure {
        return Ok(());
    }
    let missing: Vec<String> = Role::WRITERS
        .into_iter()
        .filter(|&r| {
            let legacy_admin = r == Role::Admin && admin_token.is_some();
            !(auth.has_credentials(r, certificates_verified) || legacy_admin)
        })
        .map(|r| format!("auth.{}", r.as_str()))
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    Err(format!(
        "{listen} is not a loopback address, so anyone who reaches it could steer traffic: \
         give each writing role a token ({} have none), or set \
         server.insecure_allow_unauthenticated = true to accept that",
        missing.join(", ")
    ))
}

/// The service may listen on `listen` with the reader role's credentials:
/// on loopback always; elsewhere only when the reader role has a token or,
/// with `certificates_verified`, a certificate name, or when it is opened
/// on purpose (`auth.reader_open`, or `insecure`). `Err` says how to fix it.
pub fn check_reader_exposure(
    listen: std::net::SocketAddr,
    auth: &AuthConfig,
    certificates_verified: bool,
    insecure: bool,
) -> Result<(), String> {
    if listen.ip().is_loopback()
        || insecure
        || auth.reader_open
        || auth.has_credentials(Role::Reader, certificates_verified)
    {
        return Ok(());
    }
    Err(format!(
        "{listen} is not a loopback address and auth.reader has no token, so anyone who \
         reaches it could read the workers, metrics and status page: give the reader role \
         a token, or set auth.reader_open = true to serve them to anyone"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(role: Role) -> AuthConfig {
        let mut a = AuthConfig::default();
        let t = "0123456789abcdef0123".to_owned();
        match role {
            Role::Agent => a.agent.insert("a".into(), t),
            Role::Router => a.router.insert("r".into(), t),
            Role::Reader => a.reader.insert("d".into(), t),
            Role::Admin => a.admin.insert("x".into(), t),
        };
        a
    }

    #[test]
    fn off_loopback_every_writing_role_needs_a_token_and_the_refusal_names_the_missing() {
        let any: std::net::SocketAddr = "0.0.0.0:8080".parse().unwrap();
        let lo: std::net::SocketAddr = "127.0.0.1:8080".parse().unwrap();
        let none = AuthConfig::default();
        assert!(check_exposure(lo, &none, None, false, false).is_ok());
        let e = check_exposure(any, &none, None, false, false).unwrap_err();
        assert!(e.contains("auth.agent, auth.router, auth.admin"), "{e}");
        let mut some = with(Role::Agent);
        some.router = with(Role::Router).router;
        let e = check_exposure(any, &some, None, false, false).unwrap_err();
        assert!(e.contains("(auth.admin have none)"), "{e}");
        assert!(check_exposure(any, &some, Some("x"), false, false).is_ok());
        assert!(check_exposure(any, &none, None, false, true).is_ok());
        // A certificate name stands in for a token only when certificates
        // are verified.
        let mut certs = some.clone();
        certs
            .certificates
            .insert("ops.scorer.internal".into(), Role::Admin);
        assert!(check_exposure(any, &certs, None, false, false).is_err());
        assert!(check_exposure(any, &certs, None, true, false).is_ok());
    }

    #[test]
    fn names_and_tokens_are_checked() {
        let mut a = with(Role::Router);
        assert!(a.validate().is_ok());
        a.router
            .insert("bad name".into(), "0123456789abcdef0123".into());
        assert_eq!(a.validate().unwrap_err().0, "auth.router.bad name");
        let mut b = AuthConfig::default();
        b.agent.insert("short".into(), "abc".into());
        assert!(b.validate().unwrap_err().1.contains("16 characters"));
        assert!(check_token("0123456789abcdef 123").is_err());
        let mut c = AuthConfig::default();
        c.certificates
            .insert("router-1.scorer.internal".into(), Role::Router);
        assert!(c.validate().is_ok());
        c.certificates
            .insert("bad_name.internal".into(), Role::Router);
        assert_eq!(
            c.validate().unwrap_err().0,
            "auth.certificates.bad_name.internal"
        );
    }

    #[test]
    fn a_router_id_is_its_credentials_name_or_prefixed_by_it() {
        for mode in [RouterIds::Exact, RouterIds::Prefixed] {
            assert!(mode.allows("edge-1", "edge-1"));
            assert!(!mode.allows("edge-1", "edge-2"));
            assert!(!mode.allows("edge", "edgy"));
            assert!(!mode.allows("edge-1", "edge"));
        }
        assert!(!RouterIds::Exact.allows("edge", "edge-1"));
        for id in ["edge-1", "edge.7", "edge_b"] {
            assert!(RouterIds::Prefixed.allows("edge", id), "{id}");
        }
        // The name must end at a separator, and something must follow it.
        assert!(!RouterIds::Prefixed.allows("edge", "edge1"));
        assert!(!RouterIds::Prefixed.allows("edge", "edge-"));
    }

    #[test]
    fn weak_tokens_are_refused_naming_the_key_never_the_token() {
        for weak in [
            "aaaaaaaaaaaaaaaa",
            "abababababababab",
            "aaaaaaaaaaaaaaaaaaaaaaaaab",
        ] {
            let mut a = AuthConfig::default();
            a.router.insert("edge-1".into(), weak.into());
            let (key, reason) = a.validate().unwrap_err();
            assert_eq!(key, "auth.router.edge-1");
            assert!(reason.contains("entropy"), "{reason}");
            assert!(!reason.contains(weak), "{reason}");
        }
        // Random hex of 16, and the tokens of the tests and docs.
        for strong in [
            "5c1e0a0e3b1f7d2a",
            "e0d3b0c58e1a9f47",
            "0123456789abcdef",
            "agent-token-0123456789",
            "s3cret-s3cret-s3cret",
        ] {
            assert!(check_token(strong).is_ok(), "{strong}");
        }
        assert_eq!(estimated_entropy_bits("aaaaaaaaaaaaaaaa"), 0.0);
        assert!((estimated_entropy_bits("abababababababab") - 16.0).abs() < 1e-9);
        assert!((estimated_entropy_bits("0123456789abcdef") - 64.0).abs() < 1e-9);
    }

    #[test]
    fn off_loopback_the_reader_role_needs_a_credential_unless_opened() {
        let any: std::net::SocketAddr = "10.0.0.1:8080".parse().unwrap();
        let lo: std::net::SocketAddr = "[::1]:8080".parse().unwrap();
        let none = AuthConfig::default();
        assert!(check_reader_exposure(lo, &none, false, false).is_ok());
        let e = check_reader_exposure(any, &none, false, false).unwrap_err();
        assert!(
            e.contains("auth.reader") && e.contains("auth.reader_open"),
            "{e}"
        );
        assert!(check_reader_exposure(any, &with(Role::Reader), false, false).is_ok());
        assert!(check_reader_exposure(any, &none, false, true).is_ok());
        let open = AuthConfig {
            reader_open: true,
            ..AuthConfig::default()
        };
        assert!(check_reader_exposure(any, &open, false, false).is_ok());
        let mut certs = AuthConfig::default();
        certs
            .certificates
            .insert("dash.scorer.internal".into(), Role::Reader);
        assert!(check_reader_exposure(any, &certs, false, false).is_err());
        assert!(check_reader_exposure(any, &certs, true, false).is_ok());
    }

    #[test]
    fn the_failure_limits_are_checked() {
        assert!(AuthConfig::default().validate().is_ok());
        for (a, key) in [
            (
                AuthConfig {
                    failure_burst: 0,
                    ..AuthConfig::default()
                },
                "auth.failure_burst",
            ),
            (
                AuthConfig {
                    failure_refill_ms: 0,
                    ..AuthConfig::default()
                },
                "auth.failure_refill_ms",
            ),
            (
                AuthConfig {
                    failure_refill_ms: MAX_FAILURE_REFILL_MS + 1,
                    ..AuthConfig::default()
                },
                "auth.failure_refill_ms",
            ),
        ] {
            assert_eq!(a.validate().unwrap_err().0, key);
        }
    }
}
