//! `GET /v1/model/files/{file}`: the files of the model the service runs
//! (its primary), so that a router's balancer loads the very same model
//! (`scorer_balancer::model::fetch_model`) and vets it as the service did.

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::Response;
use sha2::{Digest, Sha256};

use crate::http::error_body::ErrorBody;
use crate::http::{ApiError, AppState};
use scorer_model::card::{CARD_FILE, GOLDEN_FILE, MAX_JSON_BYTES, MAX_ONNX_BYTES, ONNX_FILE};

/// Header naming the model's version.
pub const VERSION_HEADER: &str = "x-model-version";
/// Header holding the first 16 hex digits of `model.onnx`'s SHA-256, as
/// `GET /v1/model` shows it.
pub const SHA_HEADER: &str = "x-onnx-sha256-16";

/// `GET /v1/model/files/{file}`: `card.json`, `golden.json` or
/// `model.onnx` of the loaded primary model, with its version and ONNX
/// hash in headers. Router role.
#[utoipa::path(get, path = "/v1/model/files/{file}", tag = "model",
    params(("file" = String, Path, description = "`card.json`, `golden.json` or `model.onnx`")),
    responses(
        (status = 200, description = "The file's bytes (`application/json` or `application/octet-stream`); headers `x-model-version` and `x-onnx-sha256-16`",
            content((String = "application/json"), (Vec<u8> = "application/octet-stream"))),
        (status = 404, description = "No model loaded (`no_model`) or another file name (`unknown_model_file`)", body = ErrorBody),
        (status = 409, description = "The model directory changed since it was loaded (`model_changed`): reload first", body = ErrorBody),
    ))]
pub(crate) async fn model_file(
    State(st): State<AppState>,
    Path(file): Path<String>,
) -> Result<Response, ApiError> {
    let (name, cap, content_type) = match file.as_str() {
        CARD_FILE => (CARD_FILE, MAX_JSON_BYTES, "application/json"),
        GOLDEN_FILE => (GOLDEN_FILE, MAX_JSON_BYTES, "application/json"),
        ONNX_FILE => (ONNX_FILE, MAX_ONNX_BYTES, "application/octet-stream"),
        _ => {
            return Err(ApiError::new(
                StatusCode::NOT_FOUND,
                "unknown_model_file",
                format!(
                    "no model file `{file}`: expected {CARD_FILE}, {GOLDEN_FILE} or {ONNX_FILE}"
                ),
            ));
        }
    };
    let set = st.engine.models().current();
    let Some(model) = set.primary.model().cloned() else {
        return Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "no_model",
            "the service runs no model (rules alone)",
        ));
    };
    let path = model.dir.join(name);
    let read = tokio::task::spawn_blocking(move || scorer_model::card::read_capped(&path, cap))
        .await
        .map_err(|e| ApiError::internal(e.to_string()))?;
    let changed = |why: String| {
        ApiError::new(
            StatusCode::CONFLICT,
            "model_changed",
            format!(
                "the model directory changed since it was loaded ({why}); reload the service first"
            ),
        )
    };
    let bytes = read.map_err(|e| changed(format!("{name}: {e}")))?;
    if name == ONNX_FILE {
        let sha: String = Sha256::digest(&bytes)
            .iter()
            .take(8)
            .map(|b| format!("{b:02x}"))
            .collect();
        if sha != model.onnx_sha256 {
            return Err(changed(format!("{ONNX_FILE} hashes to {sha}")));
        }
    }
    let header = |v: &str| HeaderValue::from_str(v).map_err(|e| ApiError::internal(e.to_string()));
    let mut resp = Response::new(Body::from(bytes));
    let h = resp.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    h.insert(VERSION_HEADER, header(&model.card.model_version)?);
    h.insert(SHA_HEADER, header(&model.onnx_sha256)?);
    Ok(resp)
}
