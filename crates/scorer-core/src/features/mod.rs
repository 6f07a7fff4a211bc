//! The 42-feature observation vector a model consumes.
//!
//! [`schema`] is the single source of truth for names, order, units, ranges
//! and the imputation rule; the trainer reads the same definitions.
//! [`observation`] builds one vector per candidate; [`compat`] reads
//! vectors of older schema versions as the current one.

pub mod compat;
pub mod schema;
mod vector;

pub use schema::{
    FEATURE_COUNT, FEATURE_SCHEMA_VERSION, FEATURES, FeatureGroup, FeatureSpec, schema_hash,
};
pub use vector::{
    CandidateEvidence, CandidateInputs, ObservationInputs, RequestFeatures, observation,
};
