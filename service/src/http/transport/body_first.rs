//! Read the whole request body before the concurrency limit decides.
//!
//! A shed `POST /v1/score` used to be answered 503 as soon as its headers
//! arrived. When the client sends the body in a later segment (Python's
//! `http.client` does, and so may any pooled router under load), hyper then
//! had an unread body on the connection and closed it after the 503, so the
//! client saw a reset on its next write instead of a reusable keep-alive
//! connection — at the moment when reconnecting is most expensive. Reading the
//! body first (capped at `server.max_body_bytes` and
//! `server.body_read_timeout_ms`, so a slow sender gets its 408) keeps the connection open
//! for the `Retry-After` retry. The JSON extractor later reads the buffered
//! copy; nothing is read twice from the socket.

use axum::body::Body;
use axum::extract::Request;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::body::BodyPolicy;

/// When [`read_body_first`] started reading a request's body: the start of
/// the `read_parse` stage of a score call.
#[derive(Debug, Clone, Copy)]
pub struct ReadStart(pub std::time::Instant);

/// Middleware (for `axum::middleware::from_fn`): buffers the request body
/// within the [`BodyPolicy`] extension's limits (the defaults when absent),
/// then runs the rest of the stack on the buffered copy.
///
/// Answers without calling `next` when the body cannot be read whole: see
/// [`BodyPolicy::read`].
pub async fn read_body_first(req: Request, next: Next) -> Response {
    let start = ReadStart(std::time::Instant::now());
    let (mut parts, bytes) = BodyPolicy::read_request(req).await;
    match bytes {
        Ok(bytes) => {
            parts.extensions.insert(start);
            next.run(Request::from_parts(parts, Body::from(bytes)))
                .await
        }
        Err(e) => e.into_response(),
    }
}
