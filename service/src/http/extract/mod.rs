//! Extraction and errors: the JSON body extractor, the one error type every
//! handler answers with, and the error shapes the OpenAPI document shows.

pub mod error;
pub mod error_body;
pub mod json;

pub use error::ApiError;
pub use json::ApiJson;
