//! Worker scoring service for KV-aware routers: configuration, the engine,
//! HTTP, metrics and the binary, wired over four library crates.
//!
//! * `scorer-core`: [`telemetry`], [`state`], [`dynamics`], [`key`],
//!   [`scoring`], [`features`], [`selection`], [`clock`] (re-exported here
//!   under the same paths);
//! * `scorer-model`: [`model`], the learned cost factor;
//! * `scorer-log`: [`decision_log`], the Parquet decision log;
//! * this crate: [`config`], [`engine`] (the operations), [`http`] (axum
//!   routes), [`api`] (the wire types).
//!
//! `docs/architecture.md` draws the crate graph.
//! See `docs/api.md` for the HTTP contract and `docs/configuration.md` for
//! the configuration.

pub mod api;
pub mod config;
mod config_error;
pub mod config_reload;
pub mod engine;
pub mod http;

pub use scorer_core::{
    clock, dynamics, features, fmt, key, regular_file, scoring, selection, state, telemetry,
};
pub use scorer_log as decision_log;
pub use scorer_model as model;
pub use scorer_signal as signal;

pub use engine::Engine;
pub use http::{AppState, app};
