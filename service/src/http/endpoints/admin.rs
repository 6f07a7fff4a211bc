//! Protection of `/v1/admin/*` (issue #8).
//!
//! With `[admin] token` set, a request needs `Authorization: Bearer <token>`;
//! the comparison is constant-time (`subtle`). Without a token, only loopback
//! peers (the `ConnectInfo` address the server records) are served; a
//! request with no recorded peer is refused. Refusals are 401 (bad or
//! missing token) or 403 (not loopback), with the usual JSON error body.

use std::net::SocketAddr;

use axum::extract::{ConnectInfo, Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use subtle::ConstantTimeEq;

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

/// Middleware for the admin routes.
pub(crate) async fn require_admin(
    State(st): State<AppState>,
    req: Request,
    next: Next,
) -> Response {
    let cfg = st.engine.config();
    match cfg.admin.token.as_deref() {
        Some(expected) => {
            let presented = req
                .headers()
                .get(header::AUTHORIZATION)
                .and_then(|v| v.to_str().ok())
                .and_then(bearer_token);
            match presented {
                Some(t) if token_matches(t, expected) => next.run(req).await,
                _ => ApiError::new(
                    StatusCode::UNAUTHORIZED,
                    "unauthorized",
                    "admin endpoints need `Authorization: Bearer <[admin] token>`",
                )
                .into_response(),
            }
        }
        None => {
            let peer = req
                .extensions()
                .get::<ConnectInfo<SocketAddr>>()
                .map(|c| c.0);
            if peer.is_some_and(|p| p.ip().is_loopback()) {
                next.run(req).await
            } else {
                ApiError::new(
                    StatusCode::FORBIDDEN,
                    "forbidden",
                    "admin endpoints answer only on loopback unless [admin] token is set",
                )
                .into_response()
            }
        }
    }
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
}
