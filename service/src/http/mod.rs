//! The HTTP layer: routes, extraction and error answers. The domain lives in
//! [`crate::engine`]; handlers only translate.
//!
//! Tests call `app(state).oneshot(request)` with no socket.

mod error;
mod extract;
mod handlers;

use std::sync::Arc;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::routing::{get, post};

pub use error::ApiError;
pub use extract::ApiJson;

use crate::clock::Clock;
use crate::engine::Engine;

/// Shared state of every handler.
#[derive(Clone)]
pub struct AppState {
    /// The scoring engine.
    pub engine: Arc<Engine>,
    /// Time source (a [`crate::clock::ManualClock`] in tests).
    pub clock: Arc<dyn Clock>,
}

impl AppState {
    /// State over `engine` reading time from `clock`.
    pub fn new(engine: Engine, clock: Arc<dyn Clock>) -> Self {
        Self {
            engine: Arc::new(engine),
            clock,
        }
    }
}

/// The service's router with every v1 route and the body limit from config.
pub fn app(state: AppState) -> Router {
    let limit = state.engine.config().server.max_body_bytes;
    Router::new()
        .route("/v1/telemetry", post(handlers::telemetry))
        .route("/v1/score", post(handlers::score))
        .route("/v1/feedback", post(handlers::feedback))
        .route("/v1/stats", get(handlers::stats))
        .route("/v1/log/stats", get(handlers::log_stats))
        .route("/v1/workers", get(handlers::workers))
        .route("/v1/features", get(handlers::features))
        .route("/healthz", get(handlers::healthz))
        .route("/readyz", get(handlers::readyz))
        .fallback(handlers::not_found)
        .method_not_allowed_fallback(handlers::method_not_allowed)
        .layer(DefaultBodyLimit::max(limit))
        .with_state(state)
}
