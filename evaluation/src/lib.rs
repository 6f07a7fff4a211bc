//! Evaluation harness for the worker scoring service (issue #7): does
//! scoring cut tail latency compared with what routers use today?
//!
//! - [`sim`]: a deterministic discrete-event simulator of a KV cluster that
//!   drives each policy in-process on the same workload ([`scenario`]
//!   presets, or a TOML file: [`scenario_file`]);
//! - [`per_router`]: many independent routers (sidecars) in front of the
//!   same workers, one baseline instance each;
//! - [`baselines`]: round robin, random, P2C least-request (Envoy's
//!   default), P2C peak-EWMA (Finagle/Linkerd), from their published
//!   descriptions;
//! - [`policies`]: the policy names and the service arms (`service`,
//!   `service-rules`: the service as shipped, with and without its model;
//!   diagnostics `rules-*`) that call [`scorer_engine::Engine`] in-process;
//! - [`embedded_arm`]: `service-embedded`, the same decision inside each
//!   router with the embedded balancer, paying its measured pick time;
//! - [`model_arms`]: `model` (rules + the shipped default model) and
//!   `model-retrained` (run → log → train → run again, in-process);
//! - [`run_summary`], [`report`], [`plot`], [`targets`]: what is measured, how
//!   it is written, and which targets are met;
//! - [`testbed`]: real `redis-server` workers, the telemetry agent and the
//!   service over HTTP, with injected faults.
//!
//! The `evaluate` binary runs them; see `docs/evaluation.md`.

pub mod baselines;
pub mod cache_summary;
pub mod calibration;
pub mod embedded_arm;
pub mod embedded_calibration;
pub mod evaluate_all;
pub mod model_arms;
pub mod oracle;
pub mod per_router;
pub mod plot;
pub mod policies;
pub mod report;
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
