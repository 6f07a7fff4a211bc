//! `POST /v1/feedback`: one outcome, or a batch of them.
//!
//! A router may send each outcome as it lands, or buffer them and send
//! `{"outcomes": [...]}` every few milliseconds: one request per batch
//! instead of one per routed request. Each item of a batch is checked and
//! applied on its own: an invalid item is answered with its error in
//! `results` at its index and changes nothing, the valid ones are applied
//! in order. Each item is parsed from its own text exactly as a single
//! outcome would be (a duplicate key, an out-of-range number or an unknown
//! field is that item's error). The batch is refused whole only when its
//! envelope is wrong: not JSON, not `{"outcomes": [...]}`, or more than
//! `server.max_feedback_batch` items.

use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use serde::{Deserialize, Serialize};

use crate::http::auth::Caller;
use crate::http::error_body::{ErrorBody, JsonBodyErrors};
use crate::http::extract::json::{JsonBytes, batch_envelope_error, parse};
use crate::http::{ApiError, AppState};
use scorer_engine::{Feedback, FeedbackOutcome};

/// Body of `POST /v1/feedback`: one outcome or a batch.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(untagged)]
#[allow(dead_code)]
pub(crate) enum FeedbackBody {
    /// One outcome.
    One(Feedback),
    /// Several outcomes.
    Batch(FeedbackBatch),
}

/// A batch of outcomes.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct FeedbackBatch {
    /// The outcomes, 0..=`server.max_feedback_batch` of them, applied in
    /// order. Each should be shaped as a single outcome (`Feedback`) and is
    /// parsed on its own: one that is not is refused in `results` at its
    /// index, so the schema admits any value as an item.
    #[schema(value_type = Vec<serde_json::Value>)]
    outcomes: Vec<Box<serde_json::value::RawValue>>,
}

/// Answer of `POST /v1/feedback`: one outcome's, or a batch's.
#[derive(Serialize, utoipa::ToSchema)]
#[serde(untagged)]
#[allow(dead_code)]
pub(crate) enum FeedbackAnswer {
    /// What the outcome did.
    One(FeedbackOutcome),
    /// What each outcome of the batch did.
    Batch(BatchOutcome),
}

/// What a batch did.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub(crate) struct BatchOutcome {
    /// Items recorded.
    accepted: usize,
    /// Items refused (each with its error in `results`).
    rejected: usize,
    /// One entry per item, in order: its outcome or its error.
    results: Vec<ItemResult>,
}

/// One batch item's result.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(untagged)]
pub(crate) enum ItemResult {
    /// Recorded.
    Recorded(FeedbackOutcome),
    /// Refused; nothing was recorded for it.
    Refused {
        /// The error, as a single call would have been answered.
        #[schema(value_type = crate::http::ErrorDetail)]
        error: ItemError,
    },
}

/// A refused item's error.
#[derive(Debug, Serialize)]
pub(crate) struct ItemError {
    code: &'static str,
    message: String,
}

/// Whether the body is a batch: a JSON object with an `outcomes` key
/// (whatever its value, and however often it appears).
fn is_batch(bytes: &[u8]) -> bool {
    let object = bytes
        .iter()
        .find(|b| !b.is_ascii_whitespace())
        .is_some_and(|&b| b == b'{');
    object
        && serde_json::from_slice::<std::collections::HashMap<String, serde::de::IgnoredAny>>(bytes)
            .is_ok_and(|keys| keys.contains_key("outcomes"))
}

/// `POST /v1/feedback`: the outcome of a picked request (or a batch of
/// them); releases the worker's in-flight pick and goes to the `outcomes`
/// log.
#[utoipa::path(post, path = "/v1/feedback", tag = "scoring", request_body = FeedbackBody,
    responses(
        (status = 200, description = "Recorded (one outcome), or the batch's per-item results", body = FeedbackAnswer),
        JsonBodyErrors,
        (status = 503, description = "Overloaded (`overloaded`, with `Retry-After`) or slower than `server.request_timeout_ms` (`timeout`)", body = ErrorBody),
    ))]
pub(crate) async fn feedback(
    State(st): State<AppState>,
    caller: Option<Extension<Caller>>,
    JsonBytes(bytes): JsonBytes,
) -> Result<Response, ApiError> {
    let caller = caller.map(|Extension(Caller(name))| name);
    let caller = caller.as_ref();
    if !is_batch(&bytes) {
        let f: Feedback = parse(&bytes)?;
        return Ok(Json(record(&st, &f, caller)?).into_response());
    }
    let batch: FeedbackBatch =
        serde_json::from_slice(&bytes).map_err(|e| batch_envelope_error(&bytes, &e))?;
    let max = st.engine.config().server.max_feedback_batch;
    if batch.outcomes.len() > max {
        return Err(ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_body",
            format!(
                "`outcomes`: at most server.max_feedback_batch = {max} items, got {}",
                batch.outcomes.len()
            ),
        ));
    }
    let results: Vec<ItemResult> = batch
        .outcomes
        .into_iter()
        .map(|raw| {
            match parse::<Feedback>(raw.get().as_bytes()).and_then(|f| record(&st, &f, caller)) {
                Ok(out) => ItemResult::Recorded(out),
                Err(e) => ItemResult::Refused {
                    error: ItemError {
                        code: e.code,
                        message: e.message,
                    },
                },
            }
        })
        .collect();
    let accepted = results
        .iter()
        .filter(|r| matches!(r, ItemResult::Recorded(_)))
        .count();
    Ok(Json(BatchOutcome {
        accepted,
        rejected: results.len() - accepted,
        results,
    })
    .into_response())
}

/// A batch envelope that could not be read: 400 when the body is not JSON,
/// 422 naming the problem when it is JSON of the wrong shape.
fn record(
    st: &AppState,
    f: &Feedback,
    caller: Option<&Arc<str>>,
) -> Result<FeedbackOutcome, ApiError> {
    if !is_decision_id(&f.decision_id) {
        let shown: String = f.decision_id.chars().take(64).collect();
        return Err(ApiError::unprocessable(format!(
            "`decision_id`: must be the `decision_id` of a `POST /v1/score` answer, a hyphenated UUID such as 019ad1c4-5e2a-7c3d-9f10-2b3c4d5e6f70 (36 characters), got `{shown}` ({} characters)",
            f.decision_id.chars().count()
        )));
    }
    let (mono, wall) = (st.clock.monotonic_ms(), st.clock.wall_ms());
    // Decision ids are issued in lower case; a UUID is the same id in either.
    if f.decision_id.bytes().any(|b| b.is_ascii_uppercase()) {
        let lower = Feedback {
            decision_id: f.decision_id.to_ascii_lowercase(),
            ..f.clone()
        };
        return Ok(st.engine.feedback_and_log(&lower, mono, wall, caller)?);
    }
    Ok(st.engine.feedback_and_log(f, mono, wall, caller)?)
}

/// Whether `id` is a decision id as the score endpoint issues them: a
/// hyphenated UUID (any version, so ids from before an upgrade still match).
fn is_decision_id(id: &str) -> bool {
    id.len() == 36 && uuid::Uuid::try_parse(id).is_ok()
}
