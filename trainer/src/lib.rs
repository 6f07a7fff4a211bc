//! Trainer: LightGBM models from the service's decision logs (issue #5).
//!
//! | module | concept |
//! | --- | --- |
//! | [`cli`] | the command line (clap) |
//! | [`synth`] | synthetic logs from a documented generative model |
//! | [`dataset`] | logs → candidate table → rows with targets, time split |
//! | [`target`] | the target `ln(latency / E)`, censoring, propensity weights |
//! | [`stream`] | logs → labelled rows a row group at a time, within `--memory-budget` |
//! | [`budget`] | what the streaming reader counts against `--memory-budget` |
//! | [`spill`] | training rows on disk, a LightGBM data file loaded in two rounds |
//! | [`sample`] | `--sample`: systematic, time-stratified sample of training decisions |
//! | [`admissible`] | which logged decisions are admitted (the rest dropped and counted) |
//! | [`train`] | LightGBM parameters and training (deterministic) |
//! | [`text_model`] | LightGBM's text model → [`scorer_model::export::LgbModel`], f64 evaluation |
//! | [`regression_metrics`] | R², MAE, quantile calibration, beside the rules' baseline |
//! | [`parity`] | served (ONNX in tract) vs LightGBM probabilities, 1e-5 bar |
//! | [`golden`] | `golden.json` rows (NaN, ±0, ±∞, split boundaries) |
//! | [`card`] | `card.json` contents and model version |
//! | [`pipeline`] | `trainer train` |
//! | [`validate`] | `trainer validate` |
//! | [`compare`] | `trainer compare` (agreement, Spearman, IPS/SNIPS/DR, ESS, bootstrap intervals, verdict) |
//! | [`compare_arms`] | `trainer compare --arms` (two live arms' outcomes, on-policy difference with intervals) |
//! | [`window`] | the sliding window of `trainer loop` |
//! | [`gate`] | the promotion and rollback decisions of `trainer loop` |
//! | [`promote`] | publishing a model directory whole, the service's admin calls |
//! | [`retrain_loop`] | `trainer loop` (train, validate, gate, promote or roll back, every round) |
//! | [`progress`] | indicatif progress bars |
//! | [`error`] | [`TrainerError`] |
//!
//! Export to ONNX and serving live in [`scorer_model`] so the service
//! never links LightGBM.

pub mod admissible;
pub mod budget;
pub mod card;
pub mod cli;
pub mod compare;
pub mod compare_arms;
pub mod dataset;
pub mod error;
pub mod gate;
pub mod golden;
pub mod parity;
pub mod pipeline;
pub mod progress;
pub mod promote;
mod read_kind;
pub mod regression_metrics;
pub mod retrain_loop;
pub mod sample;
mod scan;
mod served;
pub mod spill;
pub mod stream;
pub mod synth;
mod synth_worker;
pub mod target;
pub mod text_model;
pub mod train;
pub mod validate;
pub mod window;

pub use error::{Result, TrainerError};
pub use text_model::{EvaluateF64, TextModelError, parse_model_text};
