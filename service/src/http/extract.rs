//! A JSON extractor whose rejections are [`ApiError`]s with JSON bodies.

use axum::extract::rejection::JsonRejection;
use axum::extract::{FromRequest, Request};
use axum::http::StatusCode;
use serde::de::DeserializeOwned;

use super::error::ApiError;

/// Like [`axum::Json`], but a malformed body answers 400 `malformed_json`, a
/// body that does not fit the type (unknown field, wrong type, missing
/// field) 422 `invalid_body` naming the field, an oversized body 413
/// `body_too_large`, a missing content type 415.
#[derive(Debug, Clone, Copy, Default)]
pub struct ApiJson<T>(pub T);

impl<S, T> FromRequest<S> for ApiJson<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        match axum::Json::<T>::from_request(req, state).await {
            Ok(axum::Json(v)) => Ok(Self(v)),
            Err(rej) => Err(rejection(rej)),
        }
    }
}

fn rejection(rej: JsonRejection) -> ApiError {
    let text = rej.body_text();
    match rej {
        JsonRejection::JsonDataError(_) => {
            ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "invalid_body", text)
        }
        JsonRejection::JsonSyntaxError(_) => {
            ApiError::new(StatusCode::BAD_REQUEST, "malformed_json", text)
        }
        JsonRejection::MissingJsonContentType(_) => ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
            "expected `content-type: application/json`",
        ),
        other => {
            let status = other.status();
            let code = if status == StatusCode::PAYLOAD_TOO_LARGE {
                "body_too_large"
            } else {
                "bad_body"
            };
            ApiError::new(status, code, text)
        }
    }
}
