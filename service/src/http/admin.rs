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

use super::{ApiError, AppState};

/// Whether `presented` equals `expected`, in time independent of where they differ.
pub fn token_matches(presented: &str, expected: &str) -> bool {
    // Lengths are compared in the clear: a token's length is not secret enough
    // to hide at the cost of padding, and `ct_eq` needs equal lengths.
    presented.len() == expected.len() && bool::from(presented.as_bytes().ct_eq(expected.as_bytes()))
}

/// Middleware for the admin routes.
pub(super) async fn require_admin(
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
                .and_then(|v| v.strip_prefix("Bearer "));
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
    fn tokens_compare_exactly() {
        assert!(token_matches("0123456789abcdef", "0123456789abcdef"));
        assert!(!token_matches("0123456789abcdeF", "0123456789abcdef"));
        assert!(!token_matches("0123456789abcde", "0123456789abcdef"));
        assert!(!token_matches("", "0123456789abcdef"));
    }
}
