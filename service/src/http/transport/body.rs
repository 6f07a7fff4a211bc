//! Reading a request body within the body limits of `[server]`: a declared
//! `Content-Length` over `max_body_bytes` is refused before any byte of the
//! body is read, and a body not received in full within
//! `body_read_timeout_ms` gets 408 rather than the request timeout's 503,
//! which a router would read as overload.

use std::time::Duration;

use axum::body::{Body, Bytes, to_bytes};
use axum::http::{HeaderMap, StatusCode, header};

use crate::http::ApiError;
use scorer_engine::config::{DEFAULT_BODY_READ_TIMEOUT_MS, DEFAULT_MAX_BODY_BYTES, ServerConfig};

/// Body limits, carried to the extractors as a request extension.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BodyPolicy {
    /// Largest body, bytes (`server.max_body_bytes`).
    pub max_bytes: usize,
    /// Longest wait for the whole body (`server.body_read_timeout_ms`).
    pub read_timeout: Duration,
}

impl Default for BodyPolicy {
    fn default() -> Self {
        Self {
            max_bytes: DEFAULT_MAX_BODY_BYTES,
            read_timeout: Duration::from_millis(DEFAULT_BODY_READ_TIMEOUT_MS),
        }
    }
}

impl BodyPolicy {
    /// The policy `cfg` configures.
    pub fn from_config(cfg: &ServerConfig) -> Self {
        Self {
            max_bytes: cfg.max_body_bytes,
            read_timeout: Duration::from_millis(cfg.body_read_timeout_ms),
        }
    }

    /// 413 `body_too_large`.
    pub fn too_large(&self) -> ApiError {
        ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "body_too_large",
            format!(
                "request body is over server.max_body_bytes ({} bytes)",
                self.max_bytes
            ),
        )
    }

    /// Reads `req`'s body whole with the policy its extensions carry (the
    /// default without one); returns the request's head with the outcome.
    pub async fn read_request(
        req: axum::extract::Request,
    ) -> (axum::http::request::Parts, Result<Bytes, ApiError>) {
        let policy = req
            .extensions()
            .get::<BodyPolicy>()
            .copied()
            .unwrap_or_default();
        let (parts, body) = req.into_parts();
        let bytes = policy.read(&parts.headers, body).await;
        (parts, bytes)
    }

    /// Read `body` whole, checking the declared `Content-Length` in `headers` first.
    ///
    /// # Errors
    /// 413 `body_too_large` (declared or actual size over the limit), 408
    /// `body_timeout` (not received in time), 400 `bad_body` (the client
    /// aborted mid-body).
    pub async fn read(&self, headers: &HeaderMap, body: Body) -> Result<Bytes, ApiError> {
        let declared = headers
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok());
        if declared.is_some_and(|n| n > u64::try_from(self.max_bytes).unwrap_or(u64::MAX)) {
            return Err(self.too_large());
        }
        match tokio::time::timeout(self.read_timeout, to_bytes(body, self.max_bytes)).await {
            Err(_) => Err(ApiError::new(
                StatusCode::REQUEST_TIMEOUT,
                "body_timeout",
                format!(
                    "the request body did not arrive within server.body_read_timeout_ms ({} ms)",
                    self.read_timeout.as_millis()
                ),
            )),
            Ok(Ok(bytes)) => Ok(bytes),
            Ok(Err(e)) => {
                let inner = e.into_inner();
                Err(if inner.is::<http_body_util::LengthLimitError>() {
                    self.too_large()
                } else {
                    ApiError::new(
                        StatusCode::BAD_REQUEST,
                        "bad_body",
                        format!("could not read the request body: {inner}"),
                    )
                })
            }
        }
    }
}
