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
use axum::extract::State;
use scorer_engine::config::Config;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityRequirement, SecurityScheme};
use utoipa::{IntoResponses, Modify, OpenApi};

use super::AppState;
use super::endpoints::{
    canary, explain, feedback, model, model_files, operations, overrides, promote, reconfigure,
    router_decisions, router_load, score, telemetry, view, workers,
};
use super::error_body::{AuthErrors, ErrorBody, ErrorDetail};
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
                for (status, response) in AuthErrors::responses() {
                    op.responses.responses.entry(status).or_insert(response);
                }
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
        view::view,
        router_load::router_load,
        router_decisions::router_decisions,
        model_files::model_file,
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
        reconfigure::config_rollback,
        canary::start,
        canary::status,
        canary::promote,
        canary::abort,
        promote::promote,
        promote::rollback,
        promote::pin,
        promote::unpin,
        overrides::set_override,
        overrides::clear_override,
        overrides::list_overrides,
        overrides::clear_overrides,
        explain::debug_score,
        explain::status_page,
        prometheus::metrics,
        openapi_json,
    ),
    // The records' shapes: the router endpoint's items are parsed one by
    // one (any value is an item), each shaped as one of these.
    components(schemas(
        ErrorBody,
        ErrorDetail,
        FieldError,
        scorer_engine::router_records::RouterDecision,
        scorer_engine::router_records::RouterOutcome
    )),
    modifiers(&BearerAuth),
    tags(
        (name = "scoring", description = "Score, pick, feedback, and the view stream for the routers' balancers"),
        (name = "telemetry", description = "Worker reports"),
        (name = "model", description = "The ONNX model in the scoring path"),
        (name = "admin", description = "Reload, config view, config canary and rollback, worker overrides: Bearer token, or loopback when no token is set"),
        (name = "operations", description = "Health, metrics, status page, debugging"),
    )
)]
pub struct ApiDoc;

/// The document as compiled: each role's routes take a bearer token, or
/// nothing (a role without credentials is open).
pub fn document() -> &'static utoipa::openapi::OpenApi {
    static DOC: std::sync::LazyLock<utoipa::openapi::OpenApi> =
        std::sync::LazyLock::new(ApiDoc::openapi);
    &DOC
}

/// The document as `cfg` serves it: a role with credentials drops the empty
/// (open) requirement, and with client certificates verified its routes
/// also take `mutualTLS`.
pub fn document_for(cfg: &Config) -> utoipa::openapi::OpenApi {
    let mut doc = document().clone();
    let certificates = cfg.server.tls.verifies_clients();
    if certificates {
        let components = doc.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "mutualTLS",
            SecurityScheme::MutualTls {
                description: Some(
                    "A client certificate signed by server.tls.client_ca_path whose DNS name [auth.certificates] gives a role".to_owned(),
                ),
                extensions: None,
            },
        );
    }
    for (path, item) in doc.paths.paths.iter_mut() {
        let Some(&(_, role)) = super::auth::ROUTE_ROLES.iter().find(|(p, _)| p == path) else {
            continue;
        };
        let mut requirements = Vec::new();
        if !super::auth::has_credentials(cfg, role) {
            requirements.push(SecurityRequirement::default());
        }
        requirements.push(SecurityRequirement::new("bearer", Vec::<String>::new()));
        if certificates {
            requirements.push(SecurityRequirement::new("mutualTLS", Vec::<String>::new()));
        }
        for op in [
            &mut item.get,
            &mut item.post,
            &mut item.put,
            &mut item.delete,
        ]
        .into_iter()
        .flatten()
        {
            op.security = Some(requirements.clone());
        }
    }
    doc
}

/// `GET /openapi.json`: this document, with each route's security as the
/// running configuration enforces it.
#[utoipa::path(get, path = "/openapi.json", tag = "operations",
    responses((status = 200, description = "The OpenAPI 3.1 document; each route's `security` as the running configuration enforces it", body = Object)))]
pub(super) async fn openapi_json(State(st): State<AppState>) -> Json<utoipa::openapi::OpenApi> {
    Json(document_for(&st.engine.config()))
}
