//! The shapes of every error answer, for the OpenAPI document: the body
//! ([`ErrorBody`]) and the refusals shared by many routes. Answers are
//! built by [`super::ApiError`].

use serde_json::Value;
use utoipa::ToSchema;

/// Every error answer: `{"error": {"code", "message", "details"?}}`.
#[derive(Debug, ToSchema)]
#[allow(dead_code)] // Schema only: answers are built by `ApiError`.
pub struct ErrorBody {
    /// The error.
    error: ErrorDetail,
}

/// The error of an [`ErrorBody`].
#[derive(Debug, ToSchema)]
#[allow(dead_code)]
pub struct ErrorDetail {
    /// Stable machine code, e.g. `invalid_body`, `overloaded`.
    code: String,
    /// Plain sentence naming the problem and the offending value.
    message: String,
    /// Structured details when the code has them: for `invalid_telemetry`
    /// an array of [`FieldError`](scorer_core::telemetry::validate::FieldError) (at most 100), for `restart_required`
    /// `{"keys": [...]}`.
    details: Option<Value>,
}

/// The refusals of every `/v1/admin/*` route (`http::endpoints::admin`).
#[derive(utoipa::IntoResponses)]
#[allow(dead_code)] // Schema only.
pub enum AdminErrors {
    /// `[admin] token` is set and the request lacks `Authorization: Bearer <token>` (`unauthorized`)
    #[response(status = 401)]
    Unauthorized(ErrorBody),
    /// No token is set and the peer is not loopback (`forbidden`)
    #[response(status = 403)]
    Forbidden(ErrorBody),
}

/// The refusals of every route that belongs to a role (`http::auth`).
#[derive(utoipa::IntoResponses)]
#[allow(dead_code)] // Schema only.
pub enum AuthErrors {
    /// More than one `Authorization` header (`repeated_authorization`)
    #[response(status = 400)]
    RepeatedAuthorization(ErrorBody),
    /// The role has credentials and the request presents none, or an unknown token or client certificate (`unauthorized`)
    #[response(status = 401, headers(("WWW-Authenticate" = String, description = "`Bearer realm=\"scorer\"`, with `error=\"invalid_token\"` when the token is unknown")))]
    Unauthorized(ErrorBody),
    /// A credential of another role, or an admin route off loopback without admin tokens (`forbidden`)
    #[response(status = 403)]
    Forbidden(ErrorBody),
    /// The peer address presented `auth.failure_burst` unknown tokens and has not regained an attempt (`too_many_auth_failures`)
    #[response(status = 429, headers(("Retry-After" = u64, description = "Seconds until the peer regains an attempt")))]
    TooManyAuthFailures(ErrorBody),
}

/// The errors every endpoint with a JSON body may answer before its handler
/// runs ([`super::ApiJson`]).
#[derive(utoipa::IntoResponses)]
#[allow(dead_code)] // Schema only.
pub enum JsonBodyErrors {
    /// Body is not JSON (`malformed_json`)
    #[response(status = 400)]
    Malformed(ErrorBody),
    /// Body not received in full within `server.body_read_timeout_ms` (`body_timeout`)
    #[response(status = 408)]
    BodyTimeout(ErrorBody),
    /// Body, or its declared `Content-Length`, over `server.max_body_bytes` (`body_too_large`)
    #[response(status = 413)]
    TooLarge(ErrorBody),
    /// Content type is not `application/json` (`unsupported_media_type`)
    #[response(status = 415)]
    MediaType(ErrorBody),
    /// Valid JSON that breaks the contract (an array where an object is
    /// expected included); the message names the field
    #[response(status = 422)]
    Invalid(ErrorBody),
}
