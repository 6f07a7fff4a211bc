//! The OpenAPI 3.1 document of the HTTP contract, generated from the
//! handlers' annotations and the wire types with `utoipa` (issue #8), served
//! at `GET /openapi.json`.
//!
//! Every route of [`super::app`] is listed; `service/tests/openapi.rs`
//! checks that the two agree and validates real answers against the
//! document's schemas, and `scripts/schemathesis.sh` fuzzes a running
//! service from it.

use axum::Json;
use serde_json::Value;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi, ToSchema};

use super::{explain, feedback, handlers, metrics, model, promote, reconfigure};
use scorer_core::telemetry::validate::FieldError;

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
    /// an array of [`FieldError`] (at most 100), for `restart_required`
    /// `{"keys": [...]}`.
    details: Option<Value>,
}

/// The refusals of every `/v1/admin/*` route ([`super::admin`]).
#[derive(utoipa::IntoResponses)]
#[allow(dead_code)] // Schema only.
pub(super) enum AdminErrors {
    /// `[admin] token` is set and the request lacks `Authorization: Bearer <token>` (`unauthorized`)
    #[response(status = 401)]
    Unauthorized(ErrorBody),
    /// No token is set and the peer is not loopback (`forbidden`)
    #[response(status = 403)]
    Forbidden(ErrorBody),
}

/// The errors every endpoint with a JSON body may answer before its handler
/// runs ([`super::ApiJson`]).
#[derive(utoipa::IntoResponses)]
#[allow(dead_code)] // Schema only.
pub(super) enum JsonBodyErrors {
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

struct BearerAuth;

impl Modify for BearerAuth {
    fn modify(&self, doc: &mut utoipa::openapi::OpenApi) {
        let components = doc.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
    }
}

/// The document.
#[derive(OpenApi)]
#[openapi(
    info(
        title = "KV worker scorer",
        description = "Scores candidate workers for KV-aware routers: a 0–100 score per worker with an itemised explanation, a pick and its probability. Units are in field names (`_ms`, `_bytes`) or descriptions; fractions are 0..=1."
    ),
    paths(
        handlers::telemetry,
        handlers::score,
        feedback::feedback,
        handlers::stats,
        handlers::log_stats,
        handlers::workers,
        handlers::features,
        handlers::healthz,
        handlers::readyz,
        model::model,
        model::shadow,
        reconfigure::reload,
        reconfigure::config_view,
        promote::promote,
        promote::rollback,
        explain::debug_score,
        explain::status_page,
        metrics::metrics,
        openapi_json,
    ),
    components(schemas(ErrorBody, ErrorDetail, FieldError)),
    modifiers(&BearerAuth),
    tags(
        (name = "scoring", description = "Score, pick, feedback"),
        (name = "telemetry", description = "Worker reports"),
        (name = "model", description = "The ONNX model in the scoring path"),
        (name = "admin", description = "Reload and config view: Bearer token, or loopback when no token is set"),
        (name = "operations", description = "Health, metrics, status page, debugging"),
    )
)]
pub struct ApiDoc;

/// `GET /openapi.json`: this document.
#[utoipa::path(get, path = "/openapi.json", tag = "operations",
    responses((status = 200, description = "The OpenAPI 3.1 document", body = Object)))]
pub(super) async fn openapi_json() -> Json<&'static utoipa::openapi::OpenApi> {
    // Built once: the document is fixed at compile time.
    static DOC: std::sync::LazyLock<utoipa::openapi::OpenApi> =
        std::sync::LazyLock::new(ApiDoc::openapi);
    Json(&DOC)
}
