//! Evaluation harness for the worker scoring service: does scoring cut
//! tail latency compared with what routers use today?
//!
//! - [`sim`]: a deterministic discrete-event simulator of a KV cluster that
//!   drives each arm in-process on the same workload ([`scenario`]
//!   presets, or a TOML file: [`scenario_file`]);
//! - [`arms`]: the compared arms (baselines, the oracle, the service arms,
//!   the embedded balancer, the model arms), one typed kind each, and the
//!   one table that names them ([`arms::registry`]); [`router`]: what every
//!   arm does (pick, learn from outcomes, follow drains);
//! - [`run_summary`], [`report`], [`plot`], [`targets`]: what is measured, how
//!   it is written, and which targets are met;
//! - [`calibration`], [`embedded_calibration`], [`bus_calibration`]: what
//!   a score call, an embedded pick and a hop on the bus cost, measured;
//! - [`testbed`]: real `redis-server` workers, the telemetry agent and the
//!   service over HTTP, with injected faults.
//!
//! The `evaluate` binary runs them; see `docs/evaluation.md`.

pub mod all_policies;
pub mod arms;
pub mod bus_calibration;
pub mod cache_summary;
pub mod calibration;
pub mod embedded_calibration;
pub mod evaluate_all;
pub mod plot;
pub mod report;
pub mod retrain_cache;
pub mod router;
pub mod run_summary;
pub mod runner;
pub mod scenario;
pub mod scenario_file;
pub mod seeds;
pub mod self_check_series;
pub mod sim;
pub mod targets;
pub mod testbed;
