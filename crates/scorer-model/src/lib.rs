//! The model path: a LightGBM regression of `ln(latency / E)` (E the rules'
//! routing cost) exported to ONNX in pure Rust and served with
//! tract-onnx.
//!
//! * [`blend`]: the model's bounded cost factor, the deterministic rule
//!   action and the final score.
//! * Serving (issue #6): [`config`] (`[model]`), [`loaded`] (vetting a
//!   model directory), [`runner`] (per-thread tract state), [`hub`] (the
//!   models in use, swapped on reload), [`breaker`], [`fallback`], [`stats`],
//!   [`ab`] (arm by key hash), [`shadow`] (shadow comparison).
//! * [`card`]: the files of a model directory (`card.json`, `golden.json`).
//! * [`attributes`]: the ONNX-ML `TreeEnsembleRegressor` attributes as vectors.
//! * [`ensemble`]: flat tree-ensemble representation built from ONNX-ML
//!   `TreeEnsembleRegressor` attributes, with a reference and a fast batch
//!   evaluator; [`complete`]: its complete-tree layout for shallow trees;
//!   [`warmth`]: when that layout streams a cold ensemble in first.
//! * [`op`]: the `TreeEnsembleRegressor` op registered in tract's ONNX op
//!   registry (stock tract 0.23.9 has none), [`op::load_model`] and [`op::run`].
//! * [`export`]: LightGBM tree structure ([`export::LgbModel`]) → ONNX
//!   `ModelProto` bytes (`ai.onnx.ml` opset 3 `TreeEnsembleRegressor` + `Sigmoid`),
//!   thresholds rounded so that f32 inputs branch exactly as LightGBM's f64 compare.
//!
//! The service depends on tract only; LightGBM itself lives in the `trainer` crate.

pub mod ab;
pub mod attributes;
pub mod blend;
pub mod breaker;
pub mod card;
pub mod complete;
pub mod config;
pub mod ensemble;
pub mod export;
mod export_graph;
pub mod fallback;
pub mod fixture;
pub mod hub;
pub mod loaded;
pub mod op;
pub mod runner;
pub mod shadow;
pub mod stats;
pub mod warmth;

pub use ab::{Arm, arm_for};
pub use blend::{Blend, mean_prediction, rule_actions};
pub use breaker::{Breaker, BreakerState};
pub use card::{CardError, GoldenFile, GoldenRow, JsonF32, ModelCard, read_card, read_golden};
pub use config::ModelConfig;
pub use ensemble::{EnsembleError, FlatEnsemble, TreeEnsembleAttributes};
pub use export::{ExportError, LgbModel, LgbTree, export_onnx, f32_round_down};
pub use fallback::FallbackReason;
pub use hub::{ModelHub, ModelSet, ReloadReport, Slot};
pub use loaded::{LoadError, LoadedModel, load_model_dir};
pub use op::{ModelError, RunnablePlan, load_model, onnx_with_tree_ensemble, run};
pub use runner::Runner;
pub use shadow::{ShadowReport, ShadowStats};
pub use stats::{ModelStats, ModelStatsSnapshot};
