//! Layout 2 → the flat view: [`candidate_rows`] turns a batch of
//! [`decisions_schema`](super::schema::decisions_schema) (one row per decision, candidates nested) into
//! [`candidate_rows_schema`] (one row per candidate, the decision's columns
//! repeated), the form the join and the trainer work on.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, RecordBatch, UInt32Array, new_null_array};
use arrow::compute::take;
use arrow::error::ArrowError;

use super::schema::{CANDIDATE_ROW_COLUMNS, CANDIDATES_COLUMN, candidate_rows_schema};

fn missing(name: &str) -> ArrowError {
    ArrowError::SchemaError(format!("decisions batch has no column `{name}`"))
}

/// The candidate rows of `batch` (a batch of [`decisions_schema`](super::schema::decisions_schema), as the
/// reader restamps it), in decision then candidate order. Decisions without
/// candidates give no row.
///
/// # Errors
/// [`ArrowError`] if `batch` lacks a column of the layout or holds more than
/// `u32::MAX` candidates.
pub fn candidate_rows(batch: &RecordBatch) -> Result<RecordBatch, ArrowError> {
    let list = batch
        .column_by_name(CANDIDATES_COLUMN)
        .and_then(|c| c.as_list_opt::<i32>())
        .ok_or_else(|| missing(CANDIDATES_COLUMN))?;
    let offsets = list.value_offsets();
    let (first, last) = match (offsets.first(), offsets.last()) {
        (Some(&a), Some(&b)) => (a, b),
        _ => (0, 0),
    };
    let too_many = || ArrowError::ComputeError("more than u32::MAX candidate rows".into());
    let start = usize::try_from(first).map_err(|_| too_many())?;
    let len = usize::try_from(last - first).map_err(|_| too_many())?;
    let items = list.values().slice(start, len);
    let items = items
        .as_struct_opt()
        .ok_or_else(|| missing("candidates.item"))?;
    let mut repeat = Vec::with_capacity(len);
    for (i, w) in offsets.windows(2).enumerate() {
        let i = u32::try_from(i).map_err(|_| too_many())?;
        let n = usize::try_from(w[1] - w[0]).map_err(|_| too_many())?;
        repeat.extend(std::iter::repeat_n(i, n));
    }
    let repeat = UInt32Array::from(repeat);
    let schema = candidate_rows_schema();
    let columns = CANDIDATE_ROW_COLUMNS
        .iter()
        .zip(schema.fields())
        .map(|(name, field)| -> Result<ArrayRef, ArrowError> {
            match (items.column_by_name(name), batch.column_by_name(name)) {
                (Some(c), _) => Ok(Arc::clone(c)),
                (None, Some(c)) => take(c.as_ref(), &repeat, None),
                // A column added by a later layout (`caller`, after layout 2).
                (None, None) if field.is_nullable() => {
                    Ok(new_null_array(field.data_type(), repeat.len()))
                }
                (None, None) => Err(missing(name)),
            }
        })
        .collect::<Result<Vec<_>, _>>()?;
    RecordBatch::try_new(schema, columns)
}

/// Whether `batch` has a nested layout ([`decisions_schema`](super::schema::decisions_schema) or layout 2's).
pub fn is_nested(batch: &RecordBatch) -> bool {
    batch.column_by_name(CANDIDATES_COLUMN).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::decisions_batch;
    use crate::record::{CandidateRow, DecisionRecord};
    use arrow::array::StringArray;
    use scorer_core::features::FEATURE_COUNT;

    fn rec(id: &str, workers: &[&str], pick: usize) -> DecisionRecord {
        DecisionRecord {
            decision_id: id.to_string(),
            ts_ms: 1_700_000_000_000,
            key_prefix: format!("k-{id}"),
            shard_id: None,
            request_type: Some("get"),
            client_region: None,
            timeout_ms: Some(50),
            batch_size: None,
            policy: "p2c",
            panic: false,
            model_version: None,
            arm: None,
            config_hash: "h".into(),
            caller: None,
            candidates: workers
                .iter()
                .enumerate()
                .map(|(j, w)| CandidateRow {
                    worker_id: (*w).to_string(),
                    eligible: true,
                    rule_score: j as f64,
                    model_action: None,
                    final_score: 10.0 * j as f64,
                    probability: Some(0.5),
                    picked: j == pick,
                    penalty_state: "none",
                    fallback_reason: None,
                    features: [j as f32; FEATURE_COUNT],
                    operator_override: None,
                })
                .collect(),
        }
    }

    fn strings(b: &RecordBatch, name: &str) -> Vec<String> {
        let c: &StringArray = b.column_by_name(name).unwrap().as_string::<i32>();
        c.iter().map(|s| s.unwrap_or("").to_string()).collect()
    }

    #[test]
    fn every_candidate_becomes_a_row_carrying_its_decision() {
        let recs = [
            rec("a", &["w1", "w2"], 1),
            rec("b", &[], 0),
            rec("c", &["w3"], 0),
        ];
        let nested = decisions_batch(&recs).unwrap();
        assert_eq!(nested.num_rows(), 3);
        assert_eq!(strings(&nested, "pick"), ["w2", "", "w3"]);
        let flat = candidate_rows(&nested).unwrap();
        assert_eq!(flat.schema(), candidate_rows_schema());
        assert_eq!(strings(&flat, "decision_id"), ["a", "a", "c"]);
        assert_eq!(strings(&flat, "worker_id"), ["w1", "w2", "w3"]);
        assert_eq!(strings(&flat, "key_prefix"), ["k-a", "k-a", "k-c"]);
        let picked = flat.column_by_name("picked").unwrap().as_boolean();
        assert_eq!(
            picked.iter().collect::<Vec<_>>(),
            [Some(false), Some(true), Some(true)]
        );
        let feats = flat
            .column_by_name("features")
            .unwrap()
            .as_fixed_size_list();
        let second = feats.value(1);
        assert_eq!(
            second
                .as_primitive::<arrow::datatypes::Float32Type>()
                .value(0),
            1.0
        );
    }

    #[test]
    fn a_sliced_batch_flattens_only_its_own_candidates() {
        let recs = [rec("a", &["w1", "w2"], 0), rec("b", &["w3", "w4", "w5"], 2)];
        let nested = decisions_batch(&recs).unwrap().slice(1, 1);
        let flat = candidate_rows(&nested).unwrap();
        assert_eq!(strings(&flat, "worker_id"), ["w3", "w4", "w5"]);
        assert_eq!(strings(&flat, "decision_id"), ["b", "b", "b"]);
    }
}
