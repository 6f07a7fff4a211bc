//! `POST /v1/router/decisions`: the decisions routers' balancers made and
//! their outcomes, written to the service's decision log beside its own.
//!
//! When the log's queue cannot take a batch's sampled records, the request
//! waits up to [`LOG_WAIT_MS`] for the writer to make room, then answers
//! 503 `log_busy`: the router keeps the batch and sends it again.
//!
//! The envelope is refused whole when it is not `RouterRecords` JSON, names
//! a bad router id or holds more than [`MAX_ROUTER_BATCH`] records. Each
//! record is then checked on its own: a bad one is counted in `refused`,
//! with its error among the first [`MAX_ERRORS`] in `errors`, and the
//! others are logged.

use std::collections::HashSet;

use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use crate::http::auth::{Caller, CallerRole};
use crate::http::error_body::{ErrorBody, JsonBodyErrors};
use crate::http::extract::json::{JsonBytes, batch_envelope_error, parse};
use crate::http::router_identity::{RouterCredential, check_router_id};
use crate::http::transport::streams::ANONYMOUS;
use crate::http::{ApiError, AppState, RETRY_AFTER_S};
use scorer_engine::DecisionSink;
use scorer_engine::router_records::{
    MAX_ROUTER_BATCH, RecordCheck, RecordError, RouterDecision, RouterOutcome,
};
use scorer_engine::view::is_valid_router_id;
use scorer_log::sampling::sampled_at;

/// Most record errors an answer lists.
pub const MAX_ERRORS: usize = 16;
/// Longest a batch waits for room in the log's queue before `log_busy`, ms.
pub const LOG_WAIT_MS: u64 = 500;
/// How often a waiting batch looks for room, ms.
const LOG_POLL_MS: u64 = 2;

/// Body of `POST /v1/router/decisions` (what the library sends as
/// `RouterRecords`), as the service reads it: the envelope checked whole,
/// each record parsed and checked on its own.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct RecordsBody {
    /// The sending router: 1..=32 bytes of ASCII letters, digits, `-`, `_`
    /// and `.`.
    #[schema(min_length = 1, max_length = 32, pattern = "^[A-Za-z0-9._-]{1,32}$")]
    router_id: String,
    /// Decisions, each shaped as `RouterDecision`; with `outcomes`, at most
    /// 4 096 records. Each is parsed on its own: one that is not a valid
    /// `RouterDecision` is refused in the answer, so the schema admits any
    /// value as an item.
    #[serde(default)]
    #[schema(value_type = Vec<serde_json::Value>, max_items = 4096)]
    decisions: Vec<Box<RawValue>>,
    /// Outcomes, each shaped as `RouterOutcome`, parsed on their own.
    #[serde(default)]
    #[schema(value_type = Vec<serde_json::Value>, max_items = 4096)]
    outcomes: Vec<Box<RawValue>>,
}

/// 429 `too_many_records` for `n` records past `credential`'s rate,
/// counted and logged at a limited rate.
fn too_many_records(
    st: &AppState,
    credential: Option<&str>,
    n: usize,
    retry_after_s: u64,
    per_s: f64,
) -> Response {
    let label = credential.unwrap_or(ANONYMOUS);
    st.view_streams
        .count_refusal("router", label, "router_records_per_s");
    if let Some(held_back) = st.records_warn.admit(st.clock.monotonic_ms()) {
        tracing::warn!(credential = ?label, records = n, limit = "router_records_per_s", held_back,
            "router records refused: past the credential's rate");
    }
    let mut r = ApiError::new(
        StatusCode::TOO_MANY_REQUESTS,
        "too_many_records",
        format!(
            "{n} records would exceed this credential's limits.router_records_per_s ({per_s}); retry after the Retry-After delay"
        ),
    )
    .into_response();
    r.headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from(retry_after_s));
    r
}

/// `Ok` the first time a batch names `key` (a decision id, or an
/// outcome's decision and worker).
fn unique(seen: &mut HashSet<(String, String)>, key: (String, String)) -> Result<(), RecordError> {
    if seen.insert(key) {
        Ok(())
    } else {
        Err(RecordError {
            field: "decision_id".into(),
            reason: "repeats an earlier record of this batch".into(),
        })
    }
}

/// One record parsed as strictly as every other body (an array in place
/// of an object, a duplicate key or an unknown field is refused).
fn parsed<T: serde::de::DeserializeOwned>(raw: &RawValue) -> Result<T, RecordError> {
    parse(raw.get().as_bytes()).map_err(|e| RecordError {
        field: String::new(),
        reason: e.message,
    })
}

/// What happened to one kind of record.
#[derive(Debug, Default, Serialize, utoipa::ToSchema)]
pub(crate) struct RecordCounts {
    /// Queued for the log.
    logged: usize,
    /// Outside the log's `sample_rate` (a router sends only sampled ones;
    /// these were skipped).
    unsampled: usize,
    /// Dropped because the log's queue was full or its disk failing
    /// (counted in the log's `dropped` too).
    dropped: usize,
    /// Refused: invalid (the first errors are in `errors`).
    refused: usize,
}

/// A refused record.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub(crate) struct RecordRefusal {
    /// The record, e.g. `decisions[3].candidates[1].features`.
    field: String,
    /// Why.
    reason: String,
}

/// Answer of `POST /v1/router/decisions`.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub(crate) struct RecordsAccepted {
    /// Whether the service has a decision log (`log.enabled`); without
    /// one nothing is logged and nothing is refused.
    logging: bool,
    /// The decisions.
    decisions: RecordCounts,
    /// The outcomes.
    outcomes: RecordCounts,
    /// The first refused records' errors, at most 16.
    errors: Vec<RecordRefusal>,
}

/// The two kinds of record a batch carries.
#[derive(Clone, Copy)]
enum Kind {
    Decisions,
    Outcomes,
}

impl RecordsAccepted {
    /// Counts record `i` of `kind`: refused, skipped as unsampled, or
    /// handed to `queue` (logged, or dropped by a full log).
    fn take<R>(
        &mut self,
        kind: Kind,
        i: usize,
        checked: Result<R, RecordError>,
        log: &dyn DecisionSink,
        id: impl Fn(&R) -> &str,
        queue: impl FnOnce(R) -> bool,
    ) {
        let (label, c) = match kind {
            Kind::Decisions => ("decisions", &mut self.decisions),
            Kind::Outcomes => ("outcomes", &mut self.outcomes),
        };
        match checked {
            Err(e) => {
                c.refused += 1;
                self.refuse(label, i, e);
            }
            Ok(rec) if !log.sampled(id(&rec)) => c.unsampled += 1,
            Ok(rec) => {
                if queue(rec) {
                    c.logged += 1;
                } else {
                    c.dropped += 1;
                }
            }
        }
    }

    fn refuse(&mut self, kind: &str, i: usize, e: RecordError) {
        if self.errors.len() < MAX_ERRORS {
            let field = if e.field.is_empty() {
                format!("{kind}[{i}]")
            } else {
                format!("{kind}[{i}].{}", e.field)
            };
            self.errors.push(RecordRefusal {
                field,
                reason: e.reason,
            });
        }
    }
}

/// `POST /v1/router/decisions`: a router's sampled decisions and their
/// outcomes, for the decision log. Router role. A balancer sends a batch
/// every few ms; the rows are tagged with the router by their decision ids
/// (`<router_id>-<16 hex digits>`) and with the caller's credential name.
#[utoipa::path(post, path = "/v1/router/decisions", tag = "scoring", request_body = RecordsBody,
    responses(
        (status = 200, description = "Each record logged, skipped or refused", body = RecordsAccepted),
        JsonBodyErrors,
        (status = 403, description = "A router credential other than `router_id`'s (`router_id_not_yours`; see `auth.router_ids`), or another role's (`forbidden`)", body = ErrorBody),
        (status = 429, description = "The batch would exceed this credential's `limits.router_records_per_s` (`too_many_records`, with `Retry-After`): send it again later; nothing was logged", body = ErrorBody,
            headers(("Retry-After" = u64, description = "Seconds to wait before retrying"))),
        (status = 503, description = "The decision log cannot take the batch now (`log_busy`, with `Retry-After`): send it again later; nothing was logged", body = ErrorBody),
    ))]
pub(crate) async fn router_decisions(
    State(st): State<AppState>,
    caller: Option<Extension<Caller>>,
    role: Option<Extension<CallerRole>>,
    JsonBytes(bytes): JsonBytes,
) -> Result<Response, ApiError> {
    let batch: RecordsBody =
        serde_json::from_slice(&bytes).map_err(|e| batch_envelope_error(&bytes, &e))?;
    if !is_valid_router_id(&batch.router_id) {
        return Err(ApiError::unprocessable(
            "`router_id`: must be 1..=32 bytes of ASCII letters, digits, `-`, `_` and `.`"
                .to_owned(),
        ));
    }
    let cred = RouterCredential::of(caller.as_deref(), role.as_deref());
    check_router_id(cred, st.engine.config().auth.router_ids, &batch.router_id)?;
    let n = batch.decisions.len() + batch.outcomes.len();
    if n > MAX_ROUTER_BATCH {
        return Err(ApiError::unprocessable(format!(
            "at most {MAX_ROUTER_BATCH} decisions and outcomes in one batch, got {n}"
        )));
    }
    let caller = caller.map(|Extension(Caller(name))| name);
    let cfg = st.engine.config();
    if let Err(e) = st.record_rate.take(
        caller.as_ref(),
        n,
        cfg.limits.router_records_per_s,
        st.clock.monotonic_ms(),
    ) {
        return Ok(too_many_records(
            &st,
            caller.as_deref(),
            n,
            e.retry_after_s,
            cfg.limits.router_records_per_s,
        ));
    }
    let all_features_below = cfg.log.sample_rate * cfg.log.candidate_features_rate;
    let max_candidates = cfg.server.max_candidates;
    let mut answer = RecordsAccepted {
        logging: false,
        decisions: RecordCounts::default(),
        outcomes: RecordCounts::default(),
        errors: Vec::new(),
    };
    let Some(log) = st.engine.decision_sink().filter(|_| cfg.log.enabled) else {
        return Ok(Json(answer).into_response());
    };
    let decisions: Vec<Result<RouterDecision, RecordError>> =
        batch.decisions.iter().map(|r| parsed(r)).collect();
    let outcomes: Vec<Result<RouterOutcome, RecordError>> =
        batch.outcomes.iter().map(|r| parsed(r)).collect();
    let sampled = decisions
        .iter()
        .filter_map(|d| d.as_ref().ok().map(|d| &d.decision_id))
        .chain(
            outcomes
                .iter()
                .filter_map(|o| o.as_ref().ok().map(|o| &o.decision_id)),
        )
        .filter(|id| log.sampled(id))
        .count();
    // Backpressure: one batch at a time waits (bounded) for the log's
    // writer to make room; past that the router keeps the batch and sends
    // it again, rather than the log dropping it.
    let give_up = tokio::time::Instant::now() + std::time::Duration::from_millis(LOG_WAIT_MS);
    let turn = tokio::time::timeout_at(give_up, st.records_turn.lock())
        .await
        .ok();
    if turn.is_some() {
        while log.router_room() < sampled && tokio::time::Instant::now() < give_up {
            tokio::time::sleep(std::time::Duration::from_millis(LOG_POLL_MS)).await;
        }
    }
    let (Some(_turn), true) = (turn, log.router_room() >= sampled) else {
        // Nothing was logged: the batch's records are not charged.
        st.record_rate
            .refund(caller.as_ref(), n, cfg.limits.router_records_per_s);
        let mut r = ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "log_busy",
            format!("the decision log cannot take {sampled} records now; retry after the Retry-After delay"),
        )
        .into_response();
        r.headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(RETRY_AFTER_S));
        return Ok(r);
    };
    answer.logging = true;
    let router = batch.router_id.as_str();
    let check = RecordCheck {
        router_id: router,
        now_ms: i64::try_from(st.clock.wall_ms()).unwrap_or(i64::MAX),
        max_candidates,
    };
    let mut ids = HashSet::with_capacity(decisions.len());
    for (i, d) in decisions.into_iter().enumerate() {
        let checked = d.and_then(|d| {
            let all = sampled_at(&d.decision_id, all_features_below);
            let rec = d.into_record(&check, all)?;
            unique(&mut ids, (rec.decision_id.clone(), String::new()))?;
            Ok(rec)
        });
        let checked = checked.map(|mut rec| {
            rec.caller.clone_from(&caller);
            rec
        });
        answer.take(
            Kind::Decisions,
            i,
            checked,
            log.as_ref(),
            |r| &r.decision_id,
            |r| log.log_router_decision(r),
        );
    }
    let mut keys = HashSet::with_capacity(outcomes.len());
    for (i, o) in outcomes.into_iter().enumerate() {
        let checked = o.and_then(|o| {
            let rec = o.into_record(&check)?;
            unique(&mut keys, (rec.decision_id.clone(), rec.worker_id.clone()))?;
            Ok(rec)
        });
        let checked = checked.map(|mut rec| {
            rec.caller.clone_from(&caller);
            rec
        });
        answer.take(
            Kind::Outcomes,
            i,
            checked,
            log.as_ref(),
            |r| &r.decision_id,
            |r| log.log_router_outcome(r),
        );
    }
    if answer.decisions.refused + answer.outcomes.refused > 0
        && let Some(held_back) = st.records_warn.admit(st.clock.monotonic_ms())
    {
        tracing::warn!(router_id = router, decisions_refused = answer.decisions.refused,
            outcomes_refused = answer.outcomes.refused,
            first = ?answer.errors.first(), held_back, "router records refused");
    }
    Ok(Json(answer).into_response())
}
