//! [`TrainerError`]: every way a trainer command can fail, with enough
//! context (file, row, reason) to act on without a backtrace.

use std::path::PathBuf;

use crate::parity::ParityFailure;

/// Errors of the trainer library. The binary prints them with their source
/// chain and exits non-zero ([`TrainerError::exit_code`]).
#[derive(Debug, thiserror::Error)]
pub enum TrainerError {
    /// A file or directory could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The path.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A `--logs` directory does not exist or is not a directory.
    #[error("log directory {0} does not exist or is not a directory")]
    MissingDir(PathBuf),
    /// A `--model` (or `--a` / `--b`) directory does not exist or is not a directory.
    #[error("model directory {0} does not exist or is not a directory")]
    MissingModelDir(PathBuf),
    /// A log file could not be decoded.
    #[error("reading decision logs: {0}")]
    Read(#[from] scorer_log::ReadError),
    /// A log file has another schema or feature/log schema version.
    #[error(
        "{path} was written with a different log or feature schema: {reason} (retrain needs logs of feature schema version {expected})"
    )]
    SchemaMismatch {
        /// The file.
        path: PathBuf,
        /// What differs.
        reason: String,
        /// The feature schema version this trainer builds models for.
        expected: &'static str,
    },
    /// Not enough usable data for the command.
    #[error("not enough data: {0}")]
    NoData(String),
    /// Arrow failed on log data (e.g. an unexpected column type).
    #[error("decision log data: {0}")]
    Arrow(#[from] arrow::error::ArrowError),
    /// Parquet failed while writing synthetic logs.
    #[error("writing Parquet: {0}")]
    Parquet(#[from] parquet::errors::ParquetError),
    /// LightGBM refused the data, the parameters or the model text.
    #[error("LightGBM: {0}")]
    LightGbm(String),
    /// LightGBM's text model could not be parsed.
    #[error("parsing LightGBM's text model: {0}")]
    TextModel(#[from] crate::text_model::TextModelError),
    /// The model could not be exported to ONNX.
    #[error("ONNX export: {0}")]
    Export(#[from] scorer_model::ExportError),
    /// tract could not load or run the exported model.
    #[error("running the ONNX model in tract: {0}")]
    Model(#[from] scorer_model::ModelError),
    /// `card.json` or `golden.json` is missing or malformed.
    #[error("{0}")]
    Card(#[from] scorer_model::CardError),
    /// The model was trained for another feature schema.
    #[error(
        "model {model} was trained for feature schema {found_version} (hash {found_hash}); this build uses {expected_version} (hash {expected_hash})"
    )]
    FeatureSchema {
        /// Model directory.
        model: PathBuf,
        /// Version in the card.
        found_version: String,
        /// Hash in the card.
        found_hash: String,
        /// Version of this build.
        expected_version: &'static str,
        /// Hash of this build.
        expected_hash: &'static str,
    },
    /// The served (ONNX/tract) probability differs from LightGBM's by more
    /// than the tolerance on some row.
    #[error("{0}")]
    Parity(Box<ParityFailure>),
    /// The service would refuse this model directory (its own vetting:
    /// card, schema hash, tract plan, golden rows present and within 1e-5).
    #[error("{dir}: the service would refuse this model: {source}")]
    Refused {
        /// Model directory.
        dir: PathBuf,
        /// The service's reason.
        source: scorer_model::LoadError,
    },
    /// The data would not fit `--memory-budget`: what would pass it, and
    /// what to do.
    #[error("memory budget: {0}")]
    MemoryBudget(String),
    /// LightGBM refused a call made outside lightgbm3 (its network, a
    /// file dataset).
    #[error("{0}")]
    LightGbmExt(#[from] lightgbm_ext::Error),
    /// A command-line value is out of range or inconsistent.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// JSON could not be written.
    #[error("JSON: {0}")]
    Json(#[from] serde_json::Error),
    /// The service's admin API could not be reached or refused a call.
    #[error("service {url}: {reason}")]
    Service {
        /// The URL called.
        url: String,
        /// What went wrong, with the service's answer.
        reason: String,
    },
}

impl From<lightgbm3::Error> for TrainerError {
    fn from(e: lightgbm3::Error) -> Self {
        TrainerError::LightGbm(e.to_string())
    }
}

impl From<ParityFailure> for TrainerError {
    fn from(e: ParityFailure) -> Self {
        TrainerError::Parity(Box::new(e))
    }
}

impl TrainerError {
    /// Process exit code for this error: 2 for a parity failure or a model
    /// the service would refuse (the model must not ship), 1 for everything
    /// else.
    pub fn exit_code(&self) -> i32 {
        match self {
            TrainerError::Parity(_) | TrainerError::Refused { .. } => 2,
            _ => 1,
        }
    }
}

/// `Result` with [`TrainerError`].
pub type Result<T, E = TrainerError> = std::result::Result<T, E>;

/// Maps an I/O error to [`TrainerError::Io`] with its path.
pub(crate) fn io_err(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> TrainerError {
    let path = path.into();
    move |source| TrainerError::Io { path, source }
}
