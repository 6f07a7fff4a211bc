//! `POST /v1/router/load`: a router's outstanding picks per worker, which
//! the view stream sums for the other routers.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use scorer_engine::view::RouterLoad;
use serde::Serialize;

use crate::http::error_body::{ErrorBody, JsonBodyErrors};
use crate::http::{ApiError, ApiJson, AppState};
use crate::load_board::LoadError;

/// Answer of `POST /v1/router/load`.
#[derive(Serialize, utoipa::ToSchema)]
pub(crate) struct LoadAccepted {
    /// Routers whose load now counts (reported within the last second).
    routers: usize,
}

/// `POST /v1/router/load`: replace this router's load (absolute, not an
/// increment). Router role. Routers send it every 5 ms while their load
/// changes, and at least once a second; a router silent for a second no
/// longer counts.
#[utoipa::path(post, path = "/v1/router/load", tag = "scoring", request_body = RouterLoad,
    responses(
        (status = 200, description = "The load replaced", body = LoadAccepted),
        JsonBodyErrors,
        (status = 429, description = "1024 routers already report (`too_many_routers`)", body = ErrorBody),
    ))]
pub(crate) async fn router_load(
    State(st): State<AppState>,
    body: Result<ApiJson<RouterLoad>, ApiError>,
) -> Result<Json<LoadAccepted>, ApiError> {
    let ApiJson(report) = body?;
    let max_workers = st.engine.config().telemetry.max_workers;
    let now_ms = st.clock.monotonic_ms();
    match st.load_board.report(report, max_workers, now_ms) {
        Ok(routers) => Ok(Json(LoadAccepted { routers })),
        Err(e @ LoadError::TooManyRouters) => Err(ApiError::new(
            StatusCode::TOO_MANY_REQUESTS,
            "too_many_routers",
            e.to_string(),
        )),
        Err(e) => Err(ApiError::unprocessable(e.to_string())),
    }
}
