//! A JSON extractor whose rejections are [`ApiError`]s with JSON bodies.

use axum::extract::{FromRequest, Request};
use axum::http::{StatusCode, header};
use serde::de::DeserializeOwned;

use super::error::ApiError;
use crate::http::transport::body::BodyPolicy;
use crate::http::transport::strict::Strict;

/// Like [`axum::Json`], but every rejection is a JSON error:
/// - no `content-type: application/json` (or `+json`) → 415 `unsupported_media_type`;
/// - body (or its declared `Content-Length`) over `server.max_body_bytes` →
///   413 `body_too_large`, at once;
/// - body not received within `server.body_read_timeout_ms` → 408 `body_timeout`;
/// - not JSON at all (including `NaN`/`Infinity` tokens) → 400 `malformed_json`;
/// - valid JSON that does not fit the type (unknown field, wrong type,
///   missing field, an array where an object is expected) → 422
///   `invalid_body`, naming the field's path.
#[derive(Debug, Clone, Copy, Default)]
pub struct ApiJson<T>(pub T);

fn is_json(req: &Request) -> bool {
    let Some(ct) = req.headers().get(header::CONTENT_TYPE) else {
        return false;
    };
    let Ok(ct) = ct.to_str() else {
        return false;
    };
    let essence = ct
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    essence == "application/json"
        || essence
            .strip_prefix("application/")
            .and_then(|sub| sub.strip_suffix("+json"))
            .is_some_and(|prefix| !prefix.is_empty())
}

impl<S, T> FromRequest<S> for ApiJson<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let JsonBytes(bytes) = JsonBytes::from_request(req, state).await?;
        parse(&bytes).map(Self)
    }
}

/// Deserialize `bytes` into `T`, classifying failures as described on [`ApiJson`].
pub fn parse<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    let de = &mut serde_json::Deserializer::from_slice(bytes);
    let err = match serde_path_to_error::deserialize::<_, T>(Strict(&mut *de)) {
        Ok(v) => {
            return de.end().map(|()| v).map_err(|e| {
                ApiError::new(StatusCode::BAD_REQUEST, "malformed_json", e.to_string())
            });
        }
        Err(err) => err,
    };
    let path = err.path().to_string();
    let inner = err.into_inner();
    // serde_json calls some type mismatches "syntax"; a body that parses as a
    // JSON value is well-formed all the same, so it is a 422, not a 400.
    Err(
        match serde_json::from_slice::<serde::de::IgnoredAny>(bytes) {
            Ok(_) => {
                let at = if path == "." {
                    String::new()
                } else {
                    format!("{path}: ")
                };
                ApiError::new(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    "invalid_body",
                    format!("{at}{inner}"),
                )
            }
            // Not JSON: say why as JSON syntax (the typed error may be a type
            // mismatch met before the syntax error, e.g. in `[[[…` unclosed).
            Err(syntax) => ApiError::new(
                StatusCode::BAD_REQUEST,
                "malformed_json",
                syntax.to_string(),
            ),
        },
    )
}

/// The raw body of a JSON request, its content type checked and read within
/// the [`BodyPolicy`]: what [`ApiJson`] parses, and what handlers that
/// choose the body's type from its shape read.
#[derive(Debug, Clone)]
pub struct JsonBytes(pub axum::body::Bytes);

impl<S: Send + Sync> FromRequest<S> for JsonBytes {
    type Rejection = ApiError;

    async fn from_request(req: Request, _state: &S) -> Result<Self, Self::Rejection> {
        if !is_json(&req) {
            return Err(ApiError::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "unsupported_media_type",
                "expected `content-type: application/json` (or `application/*+json`)",
            ));
        }
        let (_, bytes) = BodyPolicy::read_request(req).await;
        Ok(Self(bytes?))
    }
}

/// The error of a batch body (`{"outcomes": [...]}` and the like) that
/// `serde_json` refused: 400 `malformed_json` when it is not JSON at all,
/// else 422 `invalid_body` naming what is wrong with the envelope.
pub fn batch_envelope_error(bytes: &[u8], e: &serde_json::Error) -> ApiError {
    if serde_json::from_slice::<serde::de::IgnoredAny>(bytes).is_ok() {
        ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_body",
            format!("batch: {e}"),
        )
    } else {
        ApiError::new(StatusCode::BAD_REQUEST, "malformed_json", e.to_string())
    }
}
