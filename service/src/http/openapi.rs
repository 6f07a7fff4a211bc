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
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityRequirement, SecurityScheme};
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
        // Each role's routes take a bearer token of that role or admin's;
        // without tokens configured for the role they are open, hence the
        // empty requirement beside the bearer one.
        for (path, item) in doc.paths.paths.iter_mut() {
            let Some(&(_, role)) = super::auth::ROUTE_ROLES.iter().find(|(p, _)| p == path) else {
                continue;
            };
            for op in [
                &mut item.get,
                &mut item.post,
                &mut item.put,
                &mut item.delete,
            ]
            .into_iter()
            .flatten()
            {
                op.security = Some(vec![
                    SecurityRequirement::default(),
                    SecurityRequirement::new("bearer", Vec::<String>::new()),
                ]);
                let note = format!(
                    "\n\nRole `{}`: with `[auth.{}]` tokens set, a bearer token of that role or `admin` (401 without one, 403 with another role's).",
                    role.as_str(),
                    role.as_str()
                );
                op.description = Some(op.description.take().unwrap_or_default() + &note);
            }
        }
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
