//! `GET /v1/debug/score` (issue #8): why each candidate scores what it
//! scores, one line per candidate for humans, or the `/v1/score` JSON with
//! `explain=true`.
//!
//! Query: `key` (required), `candidates` (comma-separated, required),
//! optional `request_type` (GET, PUT, DELETE, MGET), `timeout_ms`,
//! `client_region`, `format=json`. The request is scored with policy `none`
//! and is not logged: no pick, no in-flight count, no decision remembered.
//!
//! Text form: `w3: 47.8 (base 100, CPU 88% > 70%: −7.2, RTT p99 37.5 ms vs
//! 10 ms: −25, …)`, candidates by final score, each candidate's non-zero
//! adjustments by |impact|, largest first.

use std::fmt::Write as _;

use axum::Json;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use crate::http::ErrorBody;
use crate::http::{ApiError, AppState};
use scorer_core::scoring::{RequestContext, RequestType};
use scorer_engine::api::{Explain, ScoreRequest, ScoreResponse, WorkerScore};

/// Query string of `GET /v1/debug/score`.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub(crate) struct DebugQuery {
    /// The key to score (required), 1..=1024 bytes.
    key: Option<String>,
    /// Comma-separated worker ids (required).
    candidates: Option<String>,
    /// `GET`, `PUT`, `DELETE` or `MGET`.
    request_type: Option<String>,
    /// Client deadline, ms.
    #[param(format = "uint64")]
    timeout_ms: Option<u64>,
    /// Client region, at most 64 bytes.
    client_region: Option<String>,
    /// `text` (default) or `json`.
    format: Option<String>,
}

fn signed(x: f64) -> String {
    let v = scorer_core::fmt::num(x.abs());
    if x < 0.0 {
        format!("−{v}")
    } else {
        format!("+{v}")
    }
}

/// One line for `w`.
pub fn explain_line(w: &WorkerScore) -> String {
    let mut adj: Vec<_> = w.adjustments.iter().filter(|a| a.impact != 0.0).collect();
    adj.sort_by(|a, b| b.impact.abs().total_cmp(&a.impact.abs()));
    let mut line = format!(
        "{}: {} (base 100",
        w.worker_id,
        scorer_core::fmt::num(w.final_score)
    );
    for a in adj {
        let label = a.reason.short().unwrap_or_else(|| a.code.replace('_', " "));
        let _ = write!(line, ", {label}: {}", signed(a.impact));
    }
    line.push(')');
    if let Some(r) = w.reason {
        let _ = write!(line, " [not eligible: {r}]");
    }
    line
}

/// `GET /v1/debug/score`: one line per candidate explaining its score
/// (policy `none`, not logged): an [`Engine::preview`](scorer_engine::Engine::preview),
/// which changes no state.
#[utoipa::path(get, path = "/v1/debug/score", tag = "operations", params(DebugQuery),
    responses(
        (status = 200, description = "Text: `w3: 47.8 (base 100, CPU 88% > 70%: −7.2, …)` per line; with `format=json` the `/v1/score` answer with `explain=true`",
            content((String = "text/plain"), (ScoreResponse = "application/json"))),
        (status = 422, description = "Missing `key` or `candidates`, or a bad parameter", body = ErrorBody),
        (status = 503, description = "No candidate is alive (`no_eligible_workers`) or too slow (`timeout`)", body = ErrorBody),
    ))]
pub(crate) async fn debug_score(
    State(st): State<AppState>,
    q: Result<Query<DebugQuery>, QueryRejection>,
) -> Result<Response, ApiError> {
    let q = q.map_err(|e| ApiError::unprocessable(e.body_text()))?.0;
    let key = q
        .key
        .filter(|k| !k.is_empty())
        .ok_or_else(|| ApiError::unprocessable("query parameter `key` is required"))?;
    let candidates: Vec<String> = q
        .candidates
        .unwrap_or_default()
        .split(',')
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .map(str::to_owned)
        .collect();
    if candidates.is_empty() {
        return Err(ApiError::unprocessable(
            "query parameter `candidates` (comma-separated worker ids) is required",
        ));
    }
    let request_type = match q.request_type.as_deref() {
        None => None,
        Some(t) => Some(RequestType::parse(t).ok_or_else(|| {
            ApiError::unprocessable(format!(
                "request_type `{t}` is not one of GET, PUT, DELETE, MGET"
            ))
        })?),
    };
    let json = match q.format.as_deref() {
        None | Some("text") => false,
        Some("json") => true,
        Some(f) => {
            return Err(ApiError::unprocessable(format!(
                "format `{f}` is not `text` or `json`"
            )));
        }
    };
    let ctx = RequestContext {
        request_type,
        client_region: q.client_region,
        timeout_ms: q.timeout_ms,
        ..RequestContext::default()
    };
    let mut req = ScoreRequest::new(key, candidates);
    req.policy = Some("none".to_owned());
    req.explain = if json {
        Explain::Full
    } else {
        Explain::Itemised
    };
    req.context = Some(ctx.clone());
    let resp = st
        .engine
        .preview(&req, &ctx, st.clock.monotonic_ms(), &mut rand::rng())?;
    if json {
        return Ok(Json(resp).into_response());
    }
    let mut text = String::new();
    for id in &resp.ranking {
        if let Some(w) = resp.scores.iter().find(|w| &w.worker_id == id) {
            text.push_str(&explain_line(w));
            text.push('\n');
        }
    }
    Ok(([(header::CONTENT_TYPE, "text/plain; charset=utf-8")], text).into_response())
}

/// The status page (`GET /`): a self-contained HTML page (no external
/// assets) listing workers with score, state, report age, in-flight count
/// and top adjustments, refreshing every 2 s from `/v1/workers` and
/// `/v1/debug/score` with the reader token typed into it.
pub const STATUS_PAGE: &str = include_str!("../assets/status.html");

/// `GET /`: the status page, open to anyone: it holds no data, and sends
/// the reader token it is given (kept in the tab's `sessionStorage`) as
/// `Authorization: Bearer` on the reader routes it reads.
#[utoipa::path(get, path = "/", tag = "operations",
    responses((status = 200, description = "Self-contained HTML status page; open (it holds no data): it asks for a reader token and sends it with the calls it makes", content_type = "text/html", body = String)))]
pub(crate) async fn status_page() -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
        STATUS_PAGE,
    )
}
