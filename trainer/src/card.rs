//! Building `card.json` ([`scorer_model::ModelCard`]) for a trained model:
//! identity (version from the ONNX bytes' SHA-256), creation time, feature
//! schema, and the trainer's details map.

use std::time::{SystemTime, UNIX_EPOCH};

use scorer_core::features::{FEATURE_COUNT, FEATURE_SCHEMA_VERSION, schema_hash};
use scorer_log::naming::civil_from_days;
use scorer_model::ModelCard;
use sha2::{Digest, Sha256};

/// The card's `output` field.
pub const OUTPUT_MEANING: &str = scorer_model::card::MODEL_OUTPUT;

/// Lower-case hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// `NAME-<first 8 hex digits of sha256(model.onnx)>`.
pub fn model_version(name: &str, onnx: &[u8]) -> String {
    format!("{name}-{}", &sha256_hex(onnx)[..8])
}

/// RFC 3339 UTC (`YYYY-MM-DDTHH:MM:SSZ`) of Unix seconds `secs`.
pub fn rfc3339(secs: u64) -> String {
    let days = i64::try_from(secs / 86_400).unwrap_or(0);
    let (y, m, d) = civil_from_days(days);
    let s = secs % 86_400;
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        s / 3600,
        s / 60 % 60,
        s % 60
    )
}

/// Creation time: `SOURCE_DATE_EPOCH` (Unix seconds) when set, for
/// reproducible cards, else now.
pub fn created_at() -> String {
    let secs = std::env::var("SOURCE_DATE_EPOCH")
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok())
        .unwrap_or_else(|| {
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_secs())
        });
    rfc3339(secs)
}

/// A card for the model `name` with ONNX bytes `onnx`, `num_trees` trees
/// and the trainer's `details`.
pub fn build_card(
    name: &str,
    onnx: &[u8],
    num_trees: usize,
    details: serde_json::Map<String, serde_json::Value>,
) -> ModelCard {
    ModelCard {
        model_version: model_version(name, onnx),
        created_at: created_at(),
        trainer_version: env!("CARGO_PKG_VERSION").to_string(),
        feature_schema_version: FEATURE_SCHEMA_VERSION.to_string(),
        feature_schema_hash: schema_hash().to_string(),
        n_features: FEATURE_COUNT,
        num_trees,
        output: OUTPUT_MEANING.to_string(),
        details,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(1_793_491_200 + 3_661), "2026-11-01T01:01:01Z");
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(model_version("default", b"abc"), "default-ba7816bf");
    }
}
