//! Decisions ⋈ outcomes on `(decision_id, worker_id, caller)`, for training.
//!
//! A left join: every candidate row is kept, in load order, with two nullable
//! columns appended: `latency_ms` (Float64, ms) and `success` (Boolean), null when
//! no outcome matches (typically non-picked candidates, or outcomes not yet
//! observed). If several outcomes share a key, the last one in load order wins
//! (files in chronological name order, rows in write order), i.e. the latest
//! observation, which is what a retry of the same decision on the same worker
//! reports.
//!
//! An outcome joins only a decision of the same `caller` (both null counts
//! as the same): one credential's outcomes never overwrite another's.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use arrow::array::{
    Array, ArrayRef, AsArray, BooleanBuilder, Float64Builder, RecordBatch, StringArray,
};
use arrow::compute::concat_batches;
use arrow::datatypes::{DataType, Field, Float64Type, Schema, SchemaRef};
use arrow::error::ArrowError;

use super::reader::LoadedLog;
use super::schema::{CALLER_COLUMN, candidate_rows_schema, outcomes_schema};

/// Candidate-rows schema plus nullable `latency_ms` (Float64, ms) and `success`
/// (Boolean); keeps the candidate-rows schema metadata.
pub fn joined_schema() -> SchemaRef {
    static SCHEMA: OnceLock<SchemaRef> = OnceLock::new();
    SCHEMA
        .get_or_init(|| {
            let base = candidate_rows_schema();
            let mut fields: Vec<Arc<Field>> = base.fields().iter().cloned().collect();
            fields.push(Arc::new(Field::new("latency_ms", DataType::Float64, true)));
            fields.push(Arc::new(Field::new("success", DataType::Boolean, true)));
            Arc::new(Schema::new_with_metadata(fields, base.metadata().clone()))
        })
        .clone()
}

fn string_column<'a>(batch: &'a RecordBatch, name: &str) -> Result<&'a StringArray, ArrowError> {
    batch
        .column_by_name(name)
        .and_then(|c| c.as_string_opt::<i32>())
        .ok_or_else(|| ArrowError::SchemaError(format!("missing Utf8 column {name}")))
}

/// Row `i`'s caller, `None` when null.
fn caller(column: &StringArray, i: usize) -> Option<&str> {
    column.is_valid(i).then(|| column.value(i))
}

/// Left-joins outcomes onto decisions (see the module docs). The result has
/// [`joined_schema`] and exactly `decisions.rows` rows.
///
/// # Errors
/// [`ArrowError`] if a batch does not have the expected schema (batches from
/// [`super::reader`] always do).
pub fn join_outcomes(
    decisions: &LoadedLog,
    outcomes: &LoadedLog,
) -> Result<RecordBatch, ArrowError> {
    let d = concat_batches(&candidate_rows_schema(), &decisions.batches)?;
    let o = concat_batches(&outcomes_schema(), &outcomes.batches)?;

    let o_dec = string_column(&o, "decision_id")?;
    let o_wrk = string_column(&o, "worker_id")?;
    let o_who = string_column(&o, CALLER_COLUMN)?;
    let o_lat = o
        .column_by_name("latency_ms")
        .and_then(|c| c.as_primitive_opt::<Float64Type>())
        .ok_or_else(|| ArrowError::SchemaError("missing Float64 column latency_ms".into()))?;
    let o_ok = o
        .column_by_name("success")
        .and_then(|c| c.as_boolean_opt())
        .ok_or_else(|| ArrowError::SchemaError("missing Boolean column success".into()))?;

    // Later rows overwrite earlier ones: last outcome wins.
    let mut index: HashMap<(&str, &str, Option<&str>), usize> =
        HashMap::with_capacity(o.num_rows());
    for i in 0..o.num_rows() {
        index.insert((o_dec.value(i), o_wrk.value(i), caller(o_who, i)), i);
    }

    let d_dec = string_column(&d, "decision_id")?;
    let d_wrk = string_column(&d, "worker_id")?;
    let d_who = string_column(&d, CALLER_COLUMN)?;
    let n = d.num_rows();
    let mut latency = Float64Builder::with_capacity(n);
    let mut success = BooleanBuilder::with_capacity(n);
    for i in 0..n {
        match index.get(&(d_dec.value(i), d_wrk.value(i), caller(d_who, i))) {
            Some(&j) => {
                latency.append_option(o_lat.is_valid(j).then(|| o_lat.value(j)));
                success.append_option(o_ok.is_valid(j).then(|| o_ok.value(j)));
            }
            None => {
                latency.append_null();
                success.append_null();
            }
        }
    }
    let mut columns: Vec<ArrayRef> = d.columns().to_vec();
    columns.push(Arc::new(latency.finish()));
    columns.push(Arc::new(success.finish()));
    RecordBatch::try_new(joined_schema(), columns)
}
