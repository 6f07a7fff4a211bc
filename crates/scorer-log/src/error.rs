//! Error types of the decision log.

use std::path::PathBuf;

use arrow::error::ArrowError;
use parquet::errors::ParquetError;

/// Errors of starting, writing and shutting down the log.
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    /// [`super::LogConfig::validate`] rejected the configuration.
    #[error("invalid decision log config: {0}")]
    Config(String),
    /// A filesystem operation on `path` failed.
    #[error("decision log I/O on {path}: {source}")]
    Io {
        /// The file or directory involved.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// Parquet encoding of `path` failed.
    #[error("decision log parquet write to {path}: {source}")]
    Parquet {
        /// The file being written.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: ParquetError,
    },
    /// Building a record batch failed.
    #[error("decision log arrow: {0}")]
    Arrow(#[from] ArrowError),
    /// Another running service writes to this log directory
    /// ([`super::dir_lock`]).
    #[error(
        "decision log directory {dir} is in use by another running service (it holds {dir}/.writer.lock); give each service its own log.dir"
    )]
    DirInUse {
        /// The directory.
        dir: PathBuf,
    },
    /// The writer thread could not be spawned or panicked.
    #[error("decision log writer thread: {0}")]
    Thread(String),
    /// A durable append was not done ([`super::DecisionLog::append_durable`]).
    #[error("decision log append not durable: {0}")]
    Rejected(String),
}

impl LogError {
    /// Wraps an I/O error with the path it concerns.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Self::Io {
            path: path.into(),
            source,
        }
    }
}

/// Errors of reading log files back.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// Listing or opening a directory failed.
    #[error("reading {path}: {source}")]
    Io {
        /// The directory or file involved.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A file is unreadable: empty, truncated, not Parquet, or corrupt.
    #[error("unreadable log file {path}: {reason}")]
    File {
        /// The offending file.
        path: PathBuf,
        /// What was wrong, from the Parquet/Arrow reader.
        reason: String,
    },
}
