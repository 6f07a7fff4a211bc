//! The scoring core of the worker scoring service: everything a decision is
//! made of, as pure functions over injected time ([`clock`]) and randomness.
//! No async runtime, HTTP, model runtime or Parquet here; the `service`
//! crate wires these to HTTP, `scorer-model` adds the learned cost factor
//! and `scorer-log` records the decisions.
//!
//! Layers, from the bottom: [`telemetry`] (wire type and validation),
//! [`state`] (per-worker smoothed state), [`dynamics`] (penalty state
//! machine, freshness, the service's own evidence), [`key`] (key
//! fingerprint), [`locality`] (where a key is likely warm), [`scoring`] (explained rule scores and the routing
//! cost), [`features`] (the 42-feature observation vector), [`selection`]
//! (the pick and its propensity).

pub mod clock;
pub mod dynamics;
pub mod features;
pub mod fmt;
pub mod key;
pub mod limits;
pub mod locality;
pub mod regular_file;
pub mod scoring;
pub mod selection;
pub mod state;
pub mod telemetry;
