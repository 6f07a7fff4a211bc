//! Worker scoring service for KV-aware routers.
//!
//! Layers, from the bottom: [`telemetry`] (wire type and validation),
//! [`state`] (per-worker smoothed state), [`key`] (key fingerprint),
//! [`scoring`] (explained rule scores), [`features`] (the 42-feature
//! observation vector), [`engine`] (the operations), [`http`] (axum routes).
//! See `docs/api.md` for the HTTP contract and `docs/configuration.md` for
//! the configuration.

pub mod api;
pub mod clock;
pub mod config;
mod config_error;
pub mod config_reload;
pub mod decision_log;
pub mod dynamics;
pub mod engine;
pub mod features;
mod fmt;
pub mod http;
pub mod key;
pub mod model;
pub mod regular_file;
pub mod scoring;
pub mod selection;
pub mod signal;
pub mod state;
pub mod telemetry;

pub use engine::Engine;
pub use http::{AppState, app};
