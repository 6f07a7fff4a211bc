//! How `trainer loop` hands a model to the service: a versioned directory
//! under `--models-dir` that appears whole or not at all, and the
//! service's admin calls `POST /v1/admin/model/promote` and
//! `POST /v1/admin/model/rollback`.
//!
//! A candidate is trained into a hidden staging directory inside
//! `--models-dir` ([`STAGING_PREFIX`], same filesystem), and published by
//! renaming it to `--models-dir/<model_version>`: a rename within a
//! filesystem is atomic, so a stop or a crash at any point leaves either
//! no model directory or a complete one. A staging directory left by a
//! crash (`kill -9`) is removed when the loop starts.

use std::path::{Path, PathBuf};
use std::time::Duration;

use scorer_client::Credentials;
use scorer_model::card::{CARD_FILE, GOLDEN_FILE, ONNX_FILE, TEXT_FILE};
use serde_json::{Value, json};

use crate::error::{Result, TrainerError, io_err};

/// Name prefix of the staging directories inside `--models-dir`.
pub const STAGING_PREFIX: &str = ".loop-staging-";

/// The files a complete model directory holds.
pub const MODEL_FILES: [&str; 4] = [ONNX_FILE, TEXT_FILE, GOLDEN_FILE, CARD_FILE];

/// A new, empty staging directory inside `models_dir` (created if missing),
/// removed when dropped.
///
/// # Errors
/// [`TrainerError::Io`].
pub fn staging(models_dir: &Path) -> Result<tempfile::TempDir> {
    std::fs::create_dir_all(models_dir).map_err(io_err(models_dir))?;
    tempfile::Builder::new()
        .prefix(STAGING_PREFIX)
        .tempdir_in(models_dir)
        .map_err(io_err(models_dir))
}

/// Removes staging directories a crashed loop left in `models_dir`;
/// returns how many.
///
/// # Errors
/// [`TrainerError::Io`] when `models_dir` cannot be listed or one cannot be
/// removed.
pub fn remove_stale_staging(models_dir: &Path) -> Result<usize> {
    let Ok(entries) = std::fs::read_dir(models_dir) else {
        return Ok(0);
    };
    let mut removed = 0;
    for entry in entries {
        let entry = entry.map_err(io_err(models_dir))?;
        if entry
            .file_name()
            .to_string_lossy()
            .starts_with(STAGING_PREFIX)
        {
            let path = entry.path();
            std::fs::remove_dir_all(&path).map_err(io_err(&path))?;
            removed += 1;
        }
    }
    Ok(removed)
}

/// Publishes the complete model directory `staged` (inside a staging
/// directory of `models_dir`) as `models_dir/<version>` by one rename.
/// When that directory exists already (the same model, byte for byte,
/// since the version hashes `model.onnx`), it is kept and `staged` left to
/// be dropped.
///
/// # Errors
/// [`TrainerError::InvalidArgument`] for a `staged` without every model
/// file, a version that is not a plain name, or a non-directory in the
/// way; [`TrainerError::Io`] when the rename fails.
pub fn publish(staged: &Path, models_dir: &Path, version: &str) -> Result<PathBuf> {
    if version.is_empty() || version.starts_with('.') || version.contains(['/', '\\']) {
        return Err(TrainerError::InvalidArgument(format!(
            "model version {version:?} cannot name a directory"
        )));
    }
    if let Some(missing) = MODEL_FILES.iter().find(|f| !staged.join(f).is_file()) {
        return Err(TrainerError::InvalidArgument(format!(
            "{} has no {missing}: not publishing an incomplete model",
            staged.display()
        )));
    }
    let to = models_dir.join(version);
    if to.is_dir() {
        return Ok(to);
    }
    std::fs::rename(staged, &to).map_err(io_err(&to))?;
    Ok(to)
}

/// The service's admin API, called with the admin role's credentials.
pub struct AdminClient {
    base_url: String,
    client: reqwest::Client,
    runtime: tokio::runtime::Runtime,
}

impl std::fmt::Debug for AdminClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AdminClient")
            .field("base_url", &self.base_url)
            .finish_non_exhaustive()
    }
}

/// How long one admin call may take (a promotion vets the model first).
pub const ADMIN_TIMEOUT: Duration = Duration::from_secs(60);

impl AdminClient {
    /// A client of the service at `base_url` (`http://host:port`).
    ///
    /// # Errors
    /// [`TrainerError::InvalidArgument`] for a URL that is not http(s), or
    /// https without a CA; [`TrainerError::Service`] when the client cannot
    /// be built.
    pub fn new(base_url: &str, credentials: &Credentials) -> Result<Self> {
        let base_url = base_url.trim_end_matches('/').to_owned();
        if !(base_url.starts_with("http://") || base_url.starts_with("https://")) {
            return Err(TrainerError::InvalidArgument(format!(
                "--service-url {base_url}: give http://host:port or https://host:port"
            )));
        }
        credentials
            .check_url(&base_url)
            .map_err(|e| TrainerError::InvalidArgument(e.to_string()))?;
        let service = |reason: String| TrainerError::Service {
            url: base_url.clone(),
            reason,
        };
        let client = credentials
            .apply(reqwest::Client::builder().timeout(ADMIN_TIMEOUT))
            .build()
            .map_err(|e| service(format!("cannot build the HTTP client: {e}")))?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| service(format!("cannot start the HTTP runtime: {e}")))?;
        Ok(Self {
            base_url,
            client,
            runtime,
        })
    }

    /// `POST /v1/admin/model/promote {"dir": dir}`: the service vets and
    /// serves `dir`. Returns its answer.
    ///
    /// # Errors
    /// [`TrainerError::Service`] when it cannot be reached or answers
    /// other than 2xx (with its answer).
    pub fn promote(&self, dir: &Path) -> Result<Value> {
        let dir = dir.to_str().ok_or_else(|| {
            TrainerError::InvalidArgument(format!("{} is not UTF-8", dir.display()))
        })?;
        self.post("/v1/admin/model/promote", Some(json!({ "dir": dir })))
    }

    /// `POST /v1/admin/model/rollback`: the service serves again what it
    /// served before the last promotion. Returns its answer.
    ///
    /// # Errors
    /// As [`AdminClient::promote`].
    pub fn rollback(&self) -> Result<Value> {
        self.post("/v1/admin/model/rollback", None)
    }

    fn post(&self, path: &str, body: Option<Value>) -> Result<Value> {
        let url = format!("{}{path}", self.base_url);
        let failed = |reason: String| TrainerError::Service {
            url: url.clone(),
            reason,
        };
        let mut request = self.client.post(&url);
        if let Some(b) = body {
            request = request.json(&b);
        }
        self.runtime.block_on(async {
            let response = request.send().await.map_err(|e| failed(e.to_string()))?;
            let status = response.status();
            let text = response.text().await.map_err(|e| failed(e.to_string()))?;
            if !status.is_success() {
                return Err(failed(format!("{status}: {}", text.trim())));
            }
            Ok(serde_json::from_str(&text).unwrap_or(Value::String(text)))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model_files(dir: &Path) {
        std::fs::create_dir_all(dir).unwrap();
        for f in MODEL_FILES {
            std::fs::write(dir.join(f), f).unwrap();
        }
    }

    #[test]
    fn a_published_model_appears_whole_and_the_staging_goes() {
        let models = tempfile::tempdir().unwrap();
        let stage = staging(models.path()).unwrap();
        let staged = stage.path().join("loop");
        model_files(&staged);
        let to = publish(&staged, models.path(), "loop-0123abcd").unwrap();
        assert_eq!(to, models.path().join("loop-0123abcd"));
        for f in MODEL_FILES {
            assert_eq!(std::fs::read_to_string(to.join(f)).unwrap(), f);
        }
        drop(stage);
        let names: Vec<String> = std::fs::read_dir(models.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, vec!["loop-0123abcd".to_string()]);
    }

    #[test]
    fn an_incomplete_model_is_not_published() {
        let models = tempfile::tempdir().unwrap();
        let stage = staging(models.path()).unwrap();
        let staged = stage.path().join("loop");
        model_files(&staged);
        std::fs::remove_file(staged.join(CARD_FILE)).unwrap();
        let e = publish(&staged, models.path(), "loop-1").unwrap_err();
        assert!(e.to_string().contains("card.json"), "{e}");
        assert!(!models.path().join("loop-1").exists());
        assert!(publish(&staged, models.path(), "../x").is_err());
    }

    #[test]
    fn stale_staging_directories_are_removed() {
        let models = tempfile::tempdir().unwrap();
        let stale = staging(models.path()).unwrap().keep();
        model_files(&stale.join("loop"));
        model_files(&models.path().join("loop-1"));
        assert_eq!(remove_stale_staging(models.path()).unwrap(), 1);
        assert!(!stale.exists());
        assert!(models.path().join("loop-1").is_dir());
    }
}
