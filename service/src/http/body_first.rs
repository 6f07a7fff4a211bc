//! Read the whole request body before the concurrency limit decides.
//!
//! A shed `POST /v1/score` used to be answered 503 as soon as its headers
//! arrived. When the client sends the body in a later segment (Python's
//! `http.client` does, and so may any pooled router under load), hyper then
//! had an unread body on the connection and closed it after the 503, so the
//! client saw a reset on its next write instead of a reusable keep-alive
//! connection — at the moment when reconnecting is most expensive. Reading the
//! body first (capped at `server.max_body_bytes`, inside the request timeout,
//! so a slow sender still gets its 503 `timeout`) keeps the connection open
//! for the `Retry-After` retry. The JSON extractor later reads the buffered
//! copy; nothing is read twice from the socket.

use axum::body::{Body, to_bytes};
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::ApiError;

/// Largest body [`read_body_first`] buffers, bytes (`server.max_body_bytes`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BodyLimit(pub usize);

/// Middleware (for `axum::middleware::from_fn_with_state`): buffers the
/// request body, then runs the rest of the stack on the buffered copy.
///
/// Answers without calling `next`: 413 `body_too_large` when the body is
/// over `limit` bytes, 400 `bad_body` when it cannot be read (the client
/// aborted mid-body).
pub async fn read_body_first(
    State(BodyLimit(limit)): State<BodyLimit>,
    req: Request,
    next: Next,
) -> Response {
    let (parts, body) = req.into_parts();
    match to_bytes(body, limit).await {
        Ok(bytes) => {
            next.run(Request::from_parts(parts, Body::from(bytes)))
                .await
        }
        Err(e) => {
            let inner = e.into_inner();
            if inner.is::<http_body_util::LengthLimitError>() {
                ApiError::new(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    "body_too_large",
                    format!("request body is over server.max_body_bytes ({limit} bytes)"),
                )
            } else {
                ApiError::new(
                    StatusCode::BAD_REQUEST,
                    "bad_body",
                    format!("could not read the request body: {inner}"),
                )
            }
            .into_response()
        }
    }
}
