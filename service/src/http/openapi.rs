//! The OpenAPI 3.1 document of the HTTP contract, gathered from the
//! endpoints' annotations and the wire types with `utoipa`, served at
//! `GET /openapi.json`. It defines nothing: the error shapes are
//! [`super::error_body`].
//!
//! Every route of [`super::app`] is listed; `service/tests/openapi.rs`
//! checks that the two agree and validates real answers against the
//! document's schemas, and `scripts/schemathesis.sh` fuzzes a running
//! service from it.

use axum::Json;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};

use super::endpoints::{
    explain, feedback, model, operations, promote, reconfigure, score, telemetry, workers,
};
use super::error_body::{ErrorBody, ErrorDetail};
use super::prometheus;
use scorer_core::telemetry::validate::FieldError;

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
        telemetry::telemetry,
        score::score,
        feedback::feedback,
        operations::stats,
        operations::log_stats,
        workers::workers,
        operations::features,
        operations::healthz,
        operations::readyz,
        model::model,
        model::shadow,
        reconfigure::reload,
        reconfigure::config_view,
        promote::promote,
        promote::rollback,
        explain::debug_score,
        explain::status_page,
        prometheus::metrics,
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
