//! Trainer: LightGBM models from the service's decision logs (issue #5).
//!
//! This crate holds the LightGBM side: [`text_model`] parses LightGBM's own
//! text model (`Booster::save_string`) into [`service::model::export::LgbModel`]
//! and evaluates it in f64 exactly as LightGBM does; export to ONNX and
//! serving live in [`service::model`] so the service never links LightGBM.

pub mod text_model;

pub use text_model::{EvaluateF64, TextModelError, parse_model_text};
