//! The service's one error type for HTTP answers: a status and a JSON body
//! `{"error": {"code", "message", "details"?}}`. Client errors are returned
//! as is; internal ones are logged and answered without internals.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Serialize;

use scorer_core::state::IngestError;
use scorer_engine::{FeedbackError, ScoreError};

/// Most per-field problems listed in one answer (the message gives the total).
pub const MAX_DETAILS: usize = 100;

/// An error answer.
#[derive(Debug)]
pub struct ApiError {
    /// HTTP status.
    pub status: StatusCode,
    /// Stable machine code.
    pub code: &'static str,
    /// Plain-sentence message naming the problem.
    pub message: String,
    /// Structured details (e.g. per-field telemetry rejections).
    pub details: Option<serde_json::Value>,
}

#[derive(Serialize)]
struct Body<'a> {
    error: Inner<'a>,
}

#[derive(Serialize)]
struct Inner<'a> {
    code: &'a str,
    message: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    details: Option<&'a serde_json::Value>,
}

impl ApiError {
    /// An error without details.
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            code,
            message: message.into(),
            details: None,
        }
    }

    /// 500 `internal`: logged with `message`; the client sees a generic text.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", message)
    }

    /// 422 `invalid_request`.
    pub fn unprocessable(message: impl Into<String>) -> Self {
        Self::new(StatusCode::UNPROCESSABLE_ENTITY, "invalid_request", message)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        if self.status == StatusCode::INTERNAL_SERVER_ERROR {
            tracing::error!(code = self.code, message = %self.message, "internal error");
        }
        let message = if self.status == StatusCode::INTERNAL_SERVER_ERROR {
            "internal error; see the service log"
        } else {
            &self.message
        };
        let body = Body {
            error: Inner {
                code: self.code,
                message,
                details: self.details.as_ref(),
            },
        };
        (self.status, Json(body)).into_response()
    }
}

impl From<IngestError> for ApiError {
    fn from(e: IngestError) -> Self {
        match e {
            IngestError::Batch(msg) => {
                Self::new(StatusCode::UNPROCESSABLE_ENTITY, "invalid_telemetry", msg)
            }
            IngestError::Invalid(mut details) => {
                let total = details.len();
                let first = details
                    .first()
                    .map(|d| format!("snapshot {} field `{}`: {}", d.index, d.field, d.reason))
                    .unwrap_or_default();
                details.truncate(MAX_DETAILS);
                let message = if total > MAX_DETAILS {
                    format!("{total} problems, the first {MAX_DETAILS} listed; {first}")
                } else {
                    first
                };
                Self {
                    status: StatusCode::UNPROCESSABLE_ENTITY,
                    code: "invalid_telemetry",
                    message,
                    details: serde_json::to_value(details).ok(),
                }
            }
            e @ IngestError::TooManyWorkers { .. } => Self::new(
                StatusCode::TOO_MANY_REQUESTS,
                "too_many_workers",
                e.to_string(),
            ),
        }
    }
}

impl From<ScoreError> for ApiError {
    fn from(e: ScoreError) -> Self {
        match e {
            ScoreError::NoEligibleWorkers(_) => Self::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "no_eligible_workers",
                e.to_string(),
            ),
            ScoreError::Selection(_) => Self::internal(e.to_string()),
            other => Self::unprocessable(other.to_string()),
        }
    }
}

impl From<FeedbackError> for ApiError {
    fn from(e: FeedbackError) -> Self {
        Self::unprocessable(e.to_string())
    }
}
