//! Candidate rows of an older feature schema, read as the current one.
//!
//! A decisions file names the feature schema of its `features` in its
//! [`META_FEATURE_SCHEMA_VERSION`]. Those of a version that reads as the
//! current one ([`scorer_core::features::compat`]: version 2) are loaded
//! with the slots that version lacks imputed in every vector; their rows
//! keep the `feature_schema_version` they were written under. Files of
//! other versions are skipped with the reason ([`super::reader::layout_of`]).

use std::sync::Arc;

use arrow::array::{Array, AsArray, FixedSizeListArray, Float32Array, RecordBatch};
use arrow::datatypes::{DataType, Float32Type, SchemaRef};
use arrow::error::ArrowError;

use super::schema::META_FEATURE_SCHEMA_VERSION;
use scorer_core::features::{FEATURE_COUNT, FEATURES, compat};

/// The column holding the observation vectors.
const FEATURES_COLUMN: &str = "features";

/// The feature schema version a decisions file with `schema` was written
/// under, if it names one.
pub(crate) fn feature_version(schema: &SchemaRef) -> Option<String> {
    schema.metadata().get(META_FEATURE_SCHEMA_VERSION).cloned()
}

/// `batch` (candidate rows) with its vectors, written under feature schema
/// `version`, in the current schema; unchanged when `version` is current.
///
/// # Errors
/// A version that does not read as the current one, or a `features` column
/// that is not a list of 42 `f32`.
pub(crate) fn upgrade_features(
    batch: RecordBatch,
    version: &str,
) -> Result<RecordBatch, ArrowError> {
    let slots =
        compat::imputed_slots(version).map_err(|e| ArrowError::SchemaError(e.to_string()))?;
    if slots.is_empty() {
        return Ok(batch);
    }
    let bad = || ArrowError::SchemaError(format!("`{FEATURES_COLUMN}` is not a list of f32"));
    let idx = batch.schema().index_of(FEATURES_COLUMN)?;
    let list = batch
        .column(idx)
        .as_fixed_size_list_opt()
        .filter(|l| l.value_length() as usize == FEATURE_COUNT)
        .ok_or_else(bad)?;
    let DataType::FixedSizeList(item, _) = list.data_type() else {
        return Err(bad());
    };
    let values = list
        .values()
        .as_primitive_opt::<Float32Type>()
        .ok_or_else(bad)?;
    let mut out = Vec::with_capacity(list.len() * FEATURE_COUNT);
    for i in 0..list.len() {
        let start = list.value_offset_at(i);
        let mut row = [0f32; FEATURE_COUNT];
        row.copy_from_slice(&values.values()[start..start + FEATURE_COUNT]);
        for &s in slots {
            row[s] = FEATURES[s].impute;
        }
        out.extend_from_slice(&row);
    }
    let upgraded = FixedSizeListArray::try_new(
        item.clone(),
        FEATURE_COUNT as i32,
        Arc::new(Float32Array::from(out)),
        list.nulls().cloned(),
    )?;
    let mut columns = batch.columns().to_vec();
    columns[idx] = Arc::new(upgraded);
    RecordBatch::try_new(batch.schema(), columns)
}
