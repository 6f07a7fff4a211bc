//! Worker scoring service for KV-aware routers: configuration loading,
//! HTTP, metrics and the binary.
//!
//! It wires library crates, used by their own names: `scorer-engine` (the
//! decisions), `scorer-core` (telemetry, state, dynamics, rules, cost,
//! features, selection), `scorer-model` (the learned cost factor),
//! `scorer-log` (the Parquet decision log) and `scorer-signal` (the stop
//! request). This crate holds
//! [`config`] (loading), [`http`] (axum routes), [`decision_log`] (the
//! Parquet log behind the engine) [`view_hub`] (the tasks that stream
//! the view to the routers' balancers over `GET /v1/view`); the engine,
//! its configuration, the view protocol (its types, schedule, reports and
//! the routers' load board) and the wire types are `scorer-engine`.
//!
//! `docs/architecture.md` draws the crate graph.
//! See `docs/api.md` for the HTTP contract and `docs/configuration.md` for
//! the configuration.

pub mod bus;
pub mod config;
pub mod decision_log;
pub mod http;
pub mod view_hub;

pub use decision_log::EngineLog;
pub use http::{AppState, app};
