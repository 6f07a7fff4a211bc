//! `POST /v1/router/load`: a router's outstanding picks per worker, which
//! the view stream sums for the other routers.

use axum::extract::State;
use axum::http::StatusCode;
use axum::{Extension, Json};
use scorer_engine::view::RouterLoad;
use serde::Serialize;

use crate::http::auth::{Caller, CallerRole};
use crate::http::error_body::{ErrorBody, JsonBodyErrors};
use crate::http::router_identity::{RouterCredential, check_router_id};
use crate::http::transport::streams::ANONYMOUS;
use crate::http::{ApiError, ApiJson, AppState};
use scorer_engine::view::load_board::{LoadError, ReportLimits};

/// Answer of `POST /v1/router/load`.
#[derive(Serialize, utoipa::ToSchema)]
pub(crate) struct LoadAccepted {
    /// Routers whose load now counts (reported within the last second).
    routers: usize,
    /// Entries left out because they name a worker the service does not
    /// know (never reported, or forgotten).
    unknown_workers: usize,
}

/// `POST /v1/router/load`: replace this router's load (absolute, not an
/// increment). Router role. Routers send it every 5 ms while their load
/// changes, and at least once a second; a router silent for a second no
/// longer counts. At most as many entries as the pool has workers, each
/// at most 1000000; entries for workers the service does not know are
/// left out and counted.
#[utoipa::path(post, path = "/v1/router/load", tag = "scoring", request_body = RouterLoad,
    responses(
        (status = 200, description = "The load replaced", body = LoadAccepted),
        JsonBodyErrors,
        (status = 403, description = "A router credential other than `router_id`'s (`router_id_not_yours`; see `auth.router_ids`), or another role's (`forbidden`)", body = ErrorBody),
        (status = 429, description = "1024 routers already report, or the credential's `limits.routers_per_credential` do (`too_many_routers`)", body = ErrorBody),
    ))]
pub(crate) async fn router_load(
    State(st): State<AppState>,
    caller: Option<Extension<Caller>>,
    role: Option<Extension<CallerRole>>,
    body: Result<ApiJson<RouterLoad>, ApiError>,
) -> Result<Json<LoadAccepted>, ApiError> {
    let ApiJson(report) = body?;
    let cred = RouterCredential::of(caller.as_deref(), role.as_deref());
    check_router_id(cred, st.engine.config().auth.router_ids, &report.router_id)?;
    let now_ms = st.clock.monotonic_ms();
    let shared = st.bus.is_some().then(|| report.clone());
    match put_load(&st, report, cred.bound_name(), now_ms) {
        Ok((routers, unknown_workers)) => {
            if let Some(report) = shared {
                st.share(crate::bus::Outgoing::Load(report));
            }
            Ok(Json(LoadAccepted {
                routers,
                unknown_workers,
            }))
        }
        Err(e @ (LoadError::TooManyRouters | LoadError::TooManyForCredential { .. })) => {
            let limit = match e {
                LoadError::TooManyForCredential { .. } => "routers_per_credential",
                _ => "max_routers",
            };
            let label = cred.bound_name().unwrap_or(ANONYMOUS);
            st.view_streams.count_refusal("router", label, limit);
            if let Some(held_back) = st.records_warn.admit(now_ms) {
                tracing::warn!(credential = ?label, limit, held_back, "router load refused: too many routers");
            }
            Err(ApiError::new(
                StatusCode::TOO_MANY_REQUESTS,
                "too_many_routers",
                e.to_string(),
            ))
        }
        Err(e @ LoadError::Owned(_)) => Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "router_id_not_yours",
            e.to_string(),
        )),
        Err(e) => Err(ApiError::unprocessable(e.to_string())),
    }
}

/// Puts `report` on the load board at monotonic `now_ms`, checked against
/// the workers the engine knows and `credential`'s limit (none for a
/// report from the bus, whose server checked its sender); returns the
/// routers that count and the entries left out.
pub(crate) fn put_load(
    st: &AppState,
    report: RouterLoad,
    credential: Option<&str>,
    now_ms: u64,
) -> Result<(usize, usize), LoadError> {
    let registry = st.engine.registry();
    let known = |id: &str| registry.get(id).is_some();
    let limits = ReportLimits {
        known: &known,
        pool: registry.len(),
        credential,
        routers_per_credential: st.engine.config().limits.routers_per_credential,
    };
    st.load_board.report(report, &limits, now_ms)
}
