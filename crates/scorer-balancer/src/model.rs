//! Fetching the service's model into the router (`GET /v1/model/files/…`,
//! feature `http`), so that the balancer runs the model the service runs.
//!
//! The three files are fetched into a fresh directory beside `dest` and
//! checked: every answer names the same model version, and `model.onnx`
//! hashes to what the service says it loaded. Only then does the directory
//! replace `dest`, in one rename. Load it with `scorer_model::ModelHub`,
//! which vets it against its golden rows as the service did.

use std::path::{Path, PathBuf};
use std::time::Duration;

use sha2::{Digest, Sha256};

use crate::follow::FollowConfig;

/// The files of a model directory, as the service serves them.
pub const MODEL_FILES: [&str; 3] = ["card.json", "golden.json", "model.onnx"];

/// The longest one file's download may take.
pub const FETCH_TIMEOUT: Duration = Duration::from_secs(30);

/// A fetched model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchedModel {
    /// Where it is.
    pub dir: PathBuf,
    /// Its version (`x-model-version`).
    pub version: String,
    /// The first 16 hex digits of `model.onnx`'s SHA-256.
    pub onnx_sha256_16: String,
}

/// Why a fetch failed; `dest` is unchanged.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    /// The request failed or was refused (a 404 `no_model` included).
    #[error("GET {file}: {source}")]
    Http {
        /// The file.
        file: &'static str,
        /// What happened.
        source: reqwest::Error,
    },
    /// The answers disagree (the service reloaded between them), or lack
    /// their headers.
    #[error("inconsistent answers: {0}")]
    Inconsistent(String),
    /// Writing the directory failed.
    #[error("writing {path}: {source}")]
    Io {
        /// Where.
        path: PathBuf,
        /// What happened.
        source: std::io::Error,
    },
}

/// Fetch the model the service in `cfg` runs into `dest` with `http`.
///
/// # Errors
/// [`FetchError`]; `dest` is then as it was.
pub async fn fetch_model(
    http: &reqwest::Client,
    cfg: &FollowConfig,
    dest: &Path,
) -> Result<FetchedModel, FetchError> {
    let base = cfg.base_url.trim_end_matches('/');
    let incoming = dest.with_extension(format!("incoming-{}", std::process::id()));
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| FetchError::Io { path, source }
    };
    let _ = std::fs::remove_dir_all(&incoming);
    std::fs::create_dir_all(&incoming).map_err(io(&incoming))?;
    let fetched = fetch_into(http, base, cfg.token.as_deref(), &incoming).await;
    let (version, onnx_sha256_16) = match fetched {
        Ok(ids) => ids,
        Err(e) => {
            let _ = std::fs::remove_dir_all(&incoming);
            return Err(e);
        }
    };
    let _ = std::fs::remove_dir_all(dest);
    std::fs::rename(&incoming, dest).map_err(io(dest))?;
    Ok(FetchedModel {
        dir: dest.to_path_buf(),
        version,
        onnx_sha256_16,
    })
}

/// The three files into `dir`; the version and ONNX hash they agree on.
async fn fetch_into(
    http: &reqwest::Client,
    base: &str,
    token: Option<&str>,
    dir: &Path,
) -> Result<(String, String), FetchError> {
    let mut seen: Option<(String, String)> = None;
    for file in MODEL_FILES {
        let mut req = http
            .get(format!("{base}/v1/model/files/{file}"))
            .timeout(FETCH_TIMEOUT);
        if let Some(token) = token {
            req = req.bearer_auth(token);
        }
        let http_err = |source| FetchError::Http { file, source };
        let resp = req.send().await.and_then(|r| r.error_for_status());
        let resp = resp.map_err(http_err)?;
        let header = |name: &str| {
            resp.headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
                .ok_or_else(|| FetchError::Inconsistent(format!("{file} came without {name}")))
        };
        let ids = (header("x-model-version")?, header("x-onnx-sha256-16")?);
        if seen.as_ref().is_some_and(|s| *s != ids) {
            return Err(FetchError::Inconsistent(format!(
                "{file} is of model {} ({}), the files before of {:?}",
                ids.0, ids.1, seen
            )));
        }
        let bytes = resp.bytes().await.map_err(http_err)?;
        if file == "model.onnx" {
            let sha: String = Sha256::digest(&bytes)
                .iter()
                .take(8)
                .map(|b| format!("{b:02x}"))
                .collect();
            if sha != ids.1 {
                return Err(FetchError::Inconsistent(format!(
                    "model.onnx hashes to {sha}, the service says {}",
                    ids.1
                )));
            }
        }
        let path = dir.join(file);
        std::fs::write(&path, &bytes).map_err(|source| FetchError::Io { path, source })?;
        seen = Some(ids);
    }
    Ok(seen.unwrap_or_default())
}
