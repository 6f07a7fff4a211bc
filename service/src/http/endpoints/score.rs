//! `POST /v1/score`: score the candidates and pick one.

use std::time::Instant;

use axum::Extension;
use axum::extract::State;
use axum::http::{HeaderMap, header};
use axum::response::IntoResponse;
use rand::SeedableRng;
use scorer_core::scoring::{RequestContext, RequestType};
use scorer_engine::api::{Explain, ScoreRequest, ScoreResponse};
use scorer_engine::{DecideCall, Output};

use super::answer;
use crate::http::ReadStart;
use crate::http::ScoreStage;
use crate::http::auth::Caller;
use crate::http::error_body::{ErrorBody, JsonBodyErrors};
use crate::http::transport::dispatch::Run;
use crate::http::{ApiError, ApiJson, AppState};

fn header<'a>(h: &'a HeaderMap, name: &str) -> Result<Option<&'a str>, ApiError> {
    match h.get(name) {
        None => Ok(None),
        Some(v) => v
            .to_str()
            .map(Some)
            .map_err(|_| ApiError::unprocessable(format!("header {name} is not visible ASCII"))),
    }
}

/// The body's context with absent fields filled from `X-*` headers (the
/// context's bounds are the decision call's, [`DecideCall::new`]).
fn merged_context(body: Option<RequestContext>, h: &HeaderMap) -> Result<RequestContext, ApiError> {
    let mut ctx = body.unwrap_or_default();
    if ctx.request_type.is_none()
        && let Some(v) = header(h, "x-request-type")?
    {
        ctx.request_type = Some(RequestType::parse(v).ok_or_else(|| {
            ApiError::unprocessable(format!(
                "header X-Request-Type `{v}` is not one of GET, PUT, DELETE, MGET"
            ))
        })?);
    }
    if ctx.client_region.is_none()
        && let Some(v) = header(h, "x-client-region")?
    {
        if v.len() > MAX_CLIENT_REGION_BYTES {
            return Err(ApiError::unprocessable(format!(
                "header X-Client-Region is longer than {MAX_CLIENT_REGION_BYTES} bytes"
            )));
        }
        ctx.client_region = Some(v.to_owned());
    }
    if ctx.timeout_ms.is_none()
        && let Some(v) = header(h, "x-timeout-ms")?
    {
        ctx.timeout_ms = Some(v.parse().map_err(|_| {
            ApiError::unprocessable(format!(
                "header X-Timeout-Ms `{v}` is not a whole number of ms"
            ))
        })?);
    }
    if ctx.batch_size.is_none()
        && let Some(v) = header(h, "x-batch-size")?
    {
        ctx.batch_size = Some(v.parse().map_err(|_| {
            ApiError::unprocessable(format!("header X-Batch-Size `{v}` is not a whole number"))
        })?);
    }
    Ok(ctx)
}

use scorer_engine::MAX_CLIENT_REGION_BYTES;
/// Largest client deadline a score call may name, ms (one day, as feedback's
/// `latency_ms`): a deadline sets the failure penalty and the expiry of the
/// outstanding pick, so an absurd one would enter the worker's state.
pub use scorer_engine::api::MAX_TIMEOUT_MS;

/// `POST /v1/score`: score the candidates and pick one; explain each score
/// when `explain` asks.
///
/// A call computes inline or on the blocking pool as
/// `server.score_dispatch` says (see `http::transport::dispatch`); each stage is timed
/// in `scorer_score_stage_seconds`.
#[utoipa::path(post, path = "/v1/score", tag = "scoring", request_body = ScoreRequest,
    params(
        ("X-Request-Type" = Option<String>, Header, description = "`GET`, `PUT`, `DELETE` or `MGET`, when `context.request_type` is absent"),
        ("X-Client-Region" = Option<String>, Header, description = "Client region (at most 64 bytes), when `context.client_region` is absent"),
        ("X-Timeout-Ms" = Option<u64>, Header, format = "uint64", description = "Client deadline, ms, when `context.timeout_ms` is absent"),
        ("X-Batch-Size" = Option<u32>, Header, format = "uint32", minimum = 1, description = "Keys in the request (>= 1), when `context.batch_size` is absent"),
    ),
    responses(
        (status = 200, description = "Scores, ranking, pick and its probability", body = ScoreResponse),
        JsonBodyErrors,
        (status = 503, description = "No candidate is alive (`no_eligible_workers`), overloaded (`overloaded`, with `Retry-After`) or too slow (`timeout`)", body = ErrorBody),
    ))]
pub(crate) async fn score(
    State(st): State<AppState>,
    read_start: Option<Extension<ReadStart>>,
    caller: Option<Extension<Caller>>,
    headers: HeaderMap,
    ApiJson(req): ApiJson<ScoreRequest>,
) -> Result<impl IntoResponse, ApiError> {
    let caller = caller.map(|Extension(Caller(name))| name);
    let entered = Instant::now();
    if let Some(Extension(ReadStart(t))) = read_start {
        st.metrics
            .observe_stage(ScoreStage::ReadParse, (entered - t).as_secs_f64());
    }
    let ctx = merged_context(req.context.clone(), &headers)?;
    let (mono, wall) = (st.clock.monotonic_ms(), st.clock.wall_ms());
    let place = st.in_progress.enter();
    let run = Run::choose(st.engine.config().server.score_dispatch, &place);
    st.metrics.dispatched(run.as_str());
    let (engine, metrics, busy) = (
        st.engine.clone(),
        st.metrics.clone(),
        st.in_progress.clone(),
    );
    let work = move || -> Result<(Vec<u8>, Instant), ApiError> {
        let start = Instant::now();
        metrics.observe_stage(ScoreStage::Queue, (start - entered).as_secs_f64());
        let mut timer = metrics.decision_stage_timer(start);
        let output = match req.explain {
            Explain::None => Output::Scores,
            Explain::Itemised | Explain::Full => Output::Explained,
        };
        let call = DecideCall::new(&req, &ctx, mono)?
            .output(output)
            .logged_at(wall, caller);
        let decided = match req.seed {
            Some(seed) => {
                let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
                engine.decide(call, &mut rng, &mut timer)
            }
            None => engine.decide(call, &mut rand::rng(), &mut timer),
        }?;
        let log_secs = timer.log_secs();
        let decided_at = Instant::now();
        let spent = (decided_at - start).as_secs_f64();
        metrics.observe_score(spent);
        metrics.observe_stage(ScoreStage::Engine, spent - log_secs);
        metrics.observe_stage(ScoreStage::Log, log_secs);
        let body =
            answer::render(&decided, req.explain).map_err(|e| ApiError::internal(e.to_string()))?;
        let done = Instant::now();
        metrics.observe_stage(ScoreStage::Serialise, (done - decided_at).as_secs_f64());
        busy.record_busy(done - start);
        Ok((body, done))
    };
    let (body, done) = match run {
        Run::Inline => work()?,
        Run::BlockInPlace => tokio::task::block_in_place(work)?,
        Run::Pool => tokio::task::spawn_blocking(work)
            .await
            .map_err(|e| ApiError::internal(e.to_string()))??,
    };
    drop(place);
    st.metrics
        .observe_stage(ScoreStage::Return, done.elapsed().as_secs_f64());
    Ok(([(header::CONTENT_TYPE, "application/json")], body))
}
