//! Load shedding and request timeouts (issue #8), from tower's
//! `ConcurrencyLimit`, `LoadShed` and `Timeout` layers.
//!
//! `POST /v1/score` admits at most `server.max_concurrent_scores` requests at
//! once; one more is refused at once with 503 and `Retry-After: 1` rather
//! than queued (queueing without bound is what turns an overload into
//! unbounded latency and memory). Every route answers 503 when it takes
//! longer than `server.request_timeout_ms`.

use std::time::Duration;

use axum::BoxError;
use axum::error_handling::HandleErrorLayer;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use tower::ServiceBuilder;
use tower::layer::util::{Identity, Stack};
use tower::limit::ConcurrencyLimitLayer;
use tower::load_shed::LoadShedLayer;
use tower::timeout::TimeoutLayer;

use crate::http::ApiError;

/// Seconds a shed client is asked to wait.
pub const RETRY_AFTER_S: u64 = 1;

async fn overloaded(err: BoxError) -> Response {
    if err.is::<tower::load_shed::error::Overloaded>() {
        let mut r = ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "overloaded",
            "too many score requests in progress; retry after the Retry-After delay",
        )
        .into_response();
        r.headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(RETRY_AFTER_S));
        r
    } else if err.is::<tower::timeout::error::Elapsed>() {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "timeout",
            "the request took longer than server.request_timeout_ms",
        )
        .into_response()
    } else {
        ApiError::internal(format!("unexpected middleware error: {err}")).into_response()
    }
}

type Handle = HandleErrorLayer<fn(BoxError) -> OverloadedFuture, ()>;
type Base = Stack<Handle, Identity>;
/// The layers [`shed_layer`] returns.
pub type ShedLayers = ServiceBuilder<Stack<ConcurrencyLimitLayer, Stack<LoadShedLayer, Base>>>;
/// The layers [`timeout_layer`] returns.
pub type TimeoutLayers = ServiceBuilder<Stack<TimeoutLayer, Base>>;

/// Shedding stack for one route: 503 + `Retry-After` beyond `max_concurrent`.
pub fn shed_layer(max_concurrent: usize) -> ShedLayers {
    ServiceBuilder::new()
        .layer(HandleErrorLayer::new(
            overloaded_boxed as fn(BoxError) -> OverloadedFuture,
        ))
        .layer(LoadShedLayer::new())
        .layer(ConcurrencyLimitLayer::new(max_concurrent.max(1)))
}

/// Future type of the error handler.
pub type OverloadedFuture = std::pin::Pin<Box<dyn std::future::Future<Output = Response> + Send>>;

fn overloaded_boxed(err: BoxError) -> OverloadedFuture {
    Box::pin(overloaded(err))
}

/// Timeout stack for the whole router: 503 after `timeout_ms`.
pub fn timeout_layer(timeout_ms: u64) -> TimeoutLayers {
    ServiceBuilder::new()
        .layer(HandleErrorLayer::new(
            overloaded_boxed as fn(BoxError) -> OverloadedFuture,
        ))
        .layer(TimeoutLayer::new(Duration::from_millis(timeout_ms)))
}
