//! The files of a model directory (`models/NAME/`) shared by the trainer,
//! which writes them, and the service, which reads them (issues #5 and #6).
//!
//! | file | written by | read by |
//! |---|---|---|
//! | [`ONNX_FILE`] `model.onnx` | `trainer train` | service (tract-onnx) |
//! | [`TEXT_FILE`] `model.txt` | `trainer train` (LightGBM's own text model) | trainer |
//! | [`CARD_FILE`] `card.json` ([`ModelCard`]) | `trainer train` | service, trainer |
//! | [`GOLDEN_FILE`] `golden.json` ([`GoldenFile`]) | `trainer train` | service, trainer |
//!
//! JSON has no NaN or infinities, so feature values in `golden.json` are
//! [`JsonF32`]: a number, or one of the strings `"NaN"`, `"inf"`, `"-inf"`.
//! Finite f32 values are written in their shortest round-trip form, so
//! `-0.0` and every threshold-boundary value survive the file exactly.

use std::fmt;
use std::path::{Path, PathBuf};

use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// ONNX graph file name inside a model directory.
pub const ONNX_FILE: &str = "model.onnx";
/// LightGBM text model file name inside a model directory.
pub const TEXT_FILE: &str = "model.txt";
/// Model card file name inside a model directory.
pub const CARD_FILE: &str = "card.json";
/// Golden rows file name inside a model directory.
pub const GOLDEN_FILE: &str = "golden.json";

/// Largest allowed `|p_served − p_lightgbm|` on golden and validation rows
/// (issue #5 "Parity"): f32 summation of leaf values is the only allowed
/// difference.
pub const PARITY_TOLERANCE: f64 = 1e-5;

/// Largest `model.onnx` read, bytes (the shipped 50-tree model is 14 KB; a
/// 5 000-tree, 255-leaf ensemble is about 40 MB).
pub const MAX_ONNX_BYTES: u64 = 64 << 20;
/// Largest `card.json` or `golden.json` read, bytes.
pub const MAX_JSON_BYTES: u64 = 16 << 20;
/// Largest `model.txt` (LightGBM's text model) read, bytes.
pub const MAX_TEXT_MODEL_BYTES: u64 = 256 << 20;

/// Reads a model-directory file of at most `max_bytes`: a regular file
/// (symlinks followed, opened by [`scorer_core::regular_file::open_regular`], so a
/// FIFO is refused at once instead of blocking), read through a bounded
/// reader, so a device, a pipe or an oversized file is refused instead of
/// exhausting memory or hanging.
///
/// # Errors
/// The `std::io::Error` of opening or reading; `InvalidInput` when `path`
/// is not a regular file, `FileTooLarge` when it holds more than
/// `max_bytes` bytes.
pub fn read_capped(path: &Path, max_bytes: u64) -> std::io::Result<Vec<u8>> {
    use std::io::{Error, ErrorKind, Read};
    let file = scorer_core::regular_file::open_regular(path)?;
    let mut bytes = Vec::new();
    file.take(max_bytes.saturating_add(1))
        .read_to_end(&mut bytes)?;
    if bytes.len() as u64 > max_bytes {
        return Err(Error::new(
            ErrorKind::FileTooLarge,
            format!("larger than the {max_bytes}-byte limit"),
        ));
    }
    Ok(bytes)
}

/// Errors reading a model directory's JSON files.
#[derive(Debug, thiserror::Error)]
pub enum CardError {
    /// The file could not be read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The file is not valid JSON of the expected shape.
    #[error("{path} is not a valid {what}: {reason}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// `"model card"` or `"golden file"`.
        what: &'static str,
        /// serde's message, with the JSON path of the offending field.
        reason: String,
    },
    /// A golden row has the wrong number of features.
    #[error("{path}: golden row {row} has {got} features, expected {expected}")]
    RowWidth {
        /// The file.
        path: PathBuf,
        /// Row index (0-based).
        row: usize,
        /// Number of values found.
        got: usize,
        /// `card.n_features`.
        expected: usize,
    },
}

/// The one model output the service's model stage reads: the predicted
/// `ln(latency) − ln(E)`, natural log, of the candidate's outcome latency
/// against the rules' routing cost E (feature `expected_latency_ln_ms`); the
/// string is historical and kept because model cards are checked against it.
pub const MODEL_OUTPUT: &str = "ln(latency / expected latency)";

/// `card.json`: what a model is, what it was trained on and how well it did.
///
/// The service needs only the identity and schema fields (it refuses a model
/// whose `feature_schema_hash` differs from
/// [`scorer_core::features::schema::schema_hash`]); everything else the trainer
/// records (data files and row counts, label thresholds, LightGBM
/// parameters, validation metrics, parity figures) is kept in `details` and
/// shown as-is by `GET /v1/model`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelCard {
    /// Model version string, e.g. the directory name plus a short content
    /// hash (`default-3f2a9c1e`). Logged as `model_version` in decision rows.
    pub model_version: String,
    /// Creation time, RFC 3339 UTC.
    pub created_at: String,
    /// `trainer` crate version that wrote the model.
    pub trainer_version: String,
    /// [`scorer_core::features::schema::FEATURE_SCHEMA_VERSION`] at training time.
    pub feature_schema_version: String,
    /// [`scorer_core::features::schema::schema_hash`] at training time.
    pub feature_schema_hash: String,
    /// Input width (42).
    pub n_features: usize,
    /// Number of trees in the ensemble.
    pub num_trees: usize,
    /// What the output means; the service loads only [`MODEL_OUTPUT`].
    pub output: String,
    /// Everything else the trainer records, kept verbatim.
    #[serde(flatten)]
    pub details: serde_json::Map<String, serde_json::Value>,
}

/// `golden.json`: input rows with LightGBM's own outputs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GoldenFile {
    /// The rows, typically a few dozen.
    pub rows: Vec<GoldenRow>,
}

/// One golden row.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GoldenRow {
    /// Why the row is there: `"validation"`, `"nan"`, `"zero"`,
    /// `"negative_zero"`, `"split_boundary f12 <= 0.5"`, …
    pub kind: String,
    /// The f32 features, `n_features` of them.
    pub features: Vec<JsonF32>,
    /// LightGBM's `predict` on these (f32-cast) features ([`MODEL_OUTPUT`]).
    #[serde(alias = "probability")]
    pub prediction: f64,
}

impl GoldenRow {
    /// The features as plain f32.
    pub fn values(&self) -> Vec<f32> {
        self.features.iter().map(|v| v.0).collect()
    }
}

/// An f32 that survives JSON: finite values as numbers, NaN and infinities
/// as the strings `"NaN"`, `"inf"` and `"-inf"`.
#[derive(Debug, Clone, Copy)]
pub struct JsonF32(pub f32);

impl PartialEq for JsonF32 {
    /// Bit equality, so NaN equals NaN and `-0.0` differs from `0.0`.
    fn eq(&self, other: &Self) -> bool {
        self.0.to_bits() == other.0.to_bits() || (self.0.is_nan() && other.0.is_nan())
    }
}

impl Serialize for JsonF32 {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let v = self.0;
        if v.is_nan() {
            s.serialize_str("NaN")
        } else if v == f32::INFINITY {
            s.serialize_str("inf")
        } else if v == f32::NEG_INFINITY {
            s.serialize_str("-inf")
        } else {
            s.serialize_f32(v)
        }
    }
}

impl<'de> Deserialize<'de> for JsonF32 {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = JsonF32;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an f32 number or one of \"NaN\", \"inf\", \"-inf\"")
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<JsonF32, E> {
                let x = v as f32;
                if x.is_finite() {
                    Ok(JsonF32(x))
                } else {
                    Err(E::custom(format!("{v} is out of f32 range")))
                }
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<JsonF32, E> {
                self.visit_f64(v as f64)
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<JsonF32, E> {
                self.visit_f64(v as f64)
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<JsonF32, E> {
                match v {
                    "NaN" => Ok(JsonF32(f32::NAN)),
                    "inf" => Ok(JsonF32(f32::INFINITY)),
                    "-inf" => Ok(JsonF32(f32::NEG_INFINITY)),
                    other => Err(E::invalid_value(de::Unexpected::Str(other), &self)),
                }
            }
        }
        d.deserialize_any(V)
    }
}

fn read_json<T: serde::de::DeserializeOwned>(
    path: &Path,
    what: &'static str,
) -> Result<T, CardError> {
    let bytes = read_capped(path, MAX_JSON_BYTES).map_err(|source| CardError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let de = &mut serde_json::Deserializer::from_slice(&bytes);
    serde_path_to_error::deserialize(de).map_err(|e| CardError::Parse {
        path: path.to_path_buf(),
        what,
        reason: e.to_string(),
    })
}

/// Reads `dir/card.json`.
///
/// # Errors
/// [`CardError::Io`] when the file is missing or unreadable,
/// [`CardError::Parse`] when it is not a valid card.
pub fn read_card(dir: &Path) -> Result<ModelCard, CardError> {
    read_json(&dir.join(CARD_FILE), "model card")
}

/// Reads `dir/golden.json` and checks every row has `n_features` values.
///
/// # Errors
/// [`CardError::Io`], [`CardError::Parse`], or [`CardError::RowWidth`] for
/// the first row of the wrong width.
pub fn read_golden(dir: &Path, n_features: usize) -> Result<GoldenFile, CardError> {
    let path = dir.join(GOLDEN_FILE);
    let golden: GoldenFile = read_json(&path, "golden file")?;
    if let Some((row, r)) = golden
        .rows
        .iter()
        .enumerate()
        .find(|(_, r)| r.features.len() != n_features)
    {
        return Err(CardError::RowWidth {
            path,
            row,
            got: r.features.len(),
            expected: n_features,
        });
    }
    Ok(golden)
}

#[cfg(test)]
mod tests {

    #[test]
    fn read_capped_refuses_oversized_and_non_regular_files() {
        let dir = std::env::temp_dir().join(format!("scorer-capped-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("ten.bin");
        std::fs::write(&f, [7u8; 10]).unwrap();
        assert_eq!(read_capped(&f, 10).unwrap(), vec![7u8; 10]);
        let e = read_capped(&f, 9).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::FileTooLarge, "{e}");
        let e = read_capped(Path::new("/dev/zero"), 1 << 20).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput, "{e}");
        assert!(read_capped(&dir.join("absent"), 10).is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }

    use super::*;

    #[test]
    fn special_values_round_trip_bit_exactly() {
        let vals = [
            f32::NAN,
            f32::INFINITY,
            f32::NEG_INFINITY,
            0.0,
            -0.0,
            f32::MIN_POSITIVE,
            1e-45,
            0.1,
            16_777_217.0,
            f32::MAX,
        ];
        let row = GoldenRow {
            kind: "t".into(),
            features: vals.iter().map(|&v| JsonF32(v)).collect(),
            prediction: 0.25,
        };
        let text = serde_json::to_string(&row).unwrap();
        assert!(text.contains("\"NaN\",\"inf\",\"-inf\",0.0,-0.0"), "{text}");
        let back: GoldenRow = serde_json::from_str(&text).unwrap();
        for (a, b) in vals.iter().zip(back.values()) {
            if a.is_nan() {
                assert!(b.is_nan());
            } else {
                assert_eq!(a.to_bits(), b.to_bits(), "{a} -> {b}");
            }
        }
    }

    #[test]
    fn bad_values_are_rejected_with_their_path() {
        let err = serde_json::from_str::<GoldenRow>(
            r#"{"kind":"x","features":[1.0,"nan"],"probability":0.5}"#,
        )
        .unwrap_err();
        assert!(err.to_string().contains("nan"), "{err}");
        let err = serde_json::from_str::<GoldenRow>(
            r#"{"kind":"x","features":[1e300],"probability":0.5}"#,
        )
        .unwrap_err();
        assert!(err.to_string().contains("out of f32 range"), "{err}");
    }

    #[test]
    fn card_keeps_unknown_fields() {
        let text = r#"{"model_version":"m1","created_at":"2026-11-29T00:00:00Z",
            "trainer_version":"0.1.0","feature_schema_version":"1","feature_schema_hash":"abc",
            "n_features":42,"num_trees":50,"output":"p","metrics":{"auc":0.8}}"#;
        let card: ModelCard = serde_json::from_str(text).unwrap();
        assert_eq!(card.details["metrics"]["auc"], 0.8);
        let again: ModelCard =
            serde_json::from_str(&serde_json::to_string(&card).unwrap()).unwrap();
        assert_eq!(card, again);
    }

    #[test]
    fn read_golden_reports_wrong_width_and_missing_file() {
        let dir = std::env::temp_dir().join(format!("card-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join(GOLDEN_FILE),
            r#"{"rows":[{"kind":"a","features":[1,2],"probability":0.5},{"kind":"b","features":[1],"probability":0.5}]}"#,
        )
        .unwrap();
        match read_golden(&dir, 2) {
            Err(CardError::RowWidth {
                row: 1,
                got: 1,
                expected: 2,
                ..
            }) => {}
            other => panic!("{other:?}"),
        }
        assert!(matches!(read_card(&dir), Err(CardError::Io { .. })));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
