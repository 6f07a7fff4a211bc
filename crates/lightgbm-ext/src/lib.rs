//! The LightGBM C calls the safe `lightgbm3` API lacks, behind safe types:
//!
//! | module | concept |
//! | --- | --- |
//! | [`network`] | LightGBM's socket network, for data-parallel training |
//! | [`file_train`] | training from a data file LightGBM loads in two rounds |
//! | `ffi` | the C calls, each with its SAFETY note (the only `unsafe` of the workspace) |

mod ffi;
pub mod file_train;
pub mod network;

pub use file_train::train_from_file;
pub use network::{Machine, MachineList, Network, parse_machines};

/// Errors of this crate.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An argument is not usable (a machine list, a rank, a path).
    #[error("{0}")]
    Invalid(String),
    /// LightGBM refused: its own message.
    #[error("LightGBM: {0}")]
    LightGbm(String),
}
