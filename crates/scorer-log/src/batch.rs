//! Records → `RecordBatch`es: [`decisions_batch`] (one row per decision,
//! candidates nested, [`decisions_schema`]) and [`outcomes_batch`].

use std::sync::Arc;

use arrow::array::BooleanBufferBuilder;
use arrow::array::{
    ArrayRef, BooleanBuilder, FixedSizeListArray, Float32Array, Float64Array, Float64Builder,
    ListArray, RecordBatch, StringArray, StringBuilder, StructArray, TimestampMillisecondArray,
    UInt32Builder, UInt64Builder,
};
use arrow::buffer::{NullBuffer, OffsetBuffer};
use arrow::error::ArrowError;

use super::record::{CandidateRow, DecisionRecord, OutcomeRecord};
use super::sampling::id_unit;
use super::schema::{
    TIMEZONE, candidate_fields, candidate_item_field, decisions_schema, feature_item_field,
    feature_list_len, outcomes_schema,
};
use scorer_core::features::{FEATURE_COUNT, FEATURE_SCHEMA_VERSION};

/// Candidate rows `records` hold (the rows of the flat view,
/// [`super::schema::candidate_rows_schema`]).
pub fn decision_rows(records: &[DecisionRecord]) -> usize {
    records.iter().map(|r| r.candidates.len()).sum()
}

/// The `candidates` column: one list item per candidate, in record then
/// candidate order. `all_features(i)`: record `i` keeps every candidate's
/// feature vector; otherwise only the picked candidate's is kept and the
/// others' are null.
fn candidates_column(
    records: &[DecisionRecord],
    all_features: &dyn Fn(usize) -> bool,
) -> Result<ListArray, ArrowError> {
    let n = decision_rows(records);
    let bytes = |f: &dyn Fn(&CandidateRow) -> usize| -> usize {
        records.iter().flat_map(|r| &r.candidates).map(f).sum()
    };
    let mut worker_id = StringBuilder::with_capacity(n, bytes(&|c| c.worker_id.len()));
    let mut eligible = BooleanBuilder::with_capacity(n);
    let mut rule_score = Vec::with_capacity(n);
    let mut model_action = Float64Builder::with_capacity(n);
    let mut final_score = Vec::with_capacity(n);
    let mut probability = Float64Builder::with_capacity(n);
    let mut picked = BooleanBuilder::with_capacity(n);
    let mut penalty_state = StringBuilder::with_capacity(n, bytes(&|c| c.penalty_state.len()));
    let mut fallback_reason =
        StringBuilder::with_capacity(n, bytes(&|c| c.fallback_reason.map_or(0, str::len)));
    let mut operator_override =
        StringBuilder::with_capacity(n, bytes(&|c| c.operator_override.map_or(0, str::len)));
    let mut features: Vec<f32> = Vec::with_capacity(n * FEATURE_COUNT);
    let mut has_features = BooleanBufferBuilder::new(n);
    let rows = || {
        records
            .iter()
            .enumerate()
            .flat_map(|(i, r)| r.candidates.iter().map(move |c| (i, c)))
    };
    for (i, c) in rows() {
        worker_id.append_value(&c.worker_id);
        eligible.append_value(c.eligible);
        rule_score.push(c.rule_score);
        model_action.append_option(c.model_action);
        final_score.push(c.final_score);
        probability.append_option(c.probability);
        picked.append_value(c.picked);
        penalty_state.append_value(c.penalty_state);
        fallback_reason.append_option(c.fallback_reason);
        operator_override.append_option(c.operator_override);
        let kept = c.picked || all_features(i);
        has_features.append(kept);
        if kept {
            features.extend_from_slice(&c.features);
        } else {
            features.extend_from_slice(&[0.0; FEATURE_COUNT]);
        }
    }
    let nulls = NullBuffer::new(has_features.finish());
    let features = FixedSizeListArray::try_new(
        feature_item_field(),
        feature_list_len(),
        Arc::new(Float32Array::from(features)),
        (nulls.null_count() > 0).then_some(nulls),
    )?;
    let children: Vec<ArrayRef> = vec![
        Arc::new(worker_id.finish()),
        Arc::new(eligible.finish()),
        Arc::new(Float64Array::from(rule_score)),
        Arc::new(model_action.finish()),
        Arc::new(Float64Array::from(final_score)),
        Arc::new(probability.finish()),
        Arc::new(picked.finish()),
        Arc::new(penalty_state.finish()),
        Arc::new(fallback_reason.finish()),
        Arc::new(features),
        Arc::new(operator_override.finish()),
    ];
    let items = StructArray::try_new(candidate_fields(), children, None)?;
    let offsets = OffsetBuffer::from_lengths(records.iter().map(|r| r.candidates.len()));
    ListArray::try_new(candidate_item_field(), offsets, Arc::new(items), None)
}

/// One row per decision, in order, with [`decisions_schema`]: the
/// decision-level columns once, the pick and its propensity, and every
/// candidate, with its feature vector, in the nested `candidates` column.
///
/// # Errors
/// Only if Arrow rejects the arrays (e.g. string data over 2 GiB in one batch).
pub fn decisions_batch(records: &[DecisionRecord]) -> Result<RecordBatch, ArrowError> {
    decisions_batch_sampled(records, 1.0)
}

/// [`decisions_batch`], keeping every candidate's feature vector only for
/// the decisions whose id [`id_unit`] is below `all_features_below` (a
/// fraction; ≥ 1 keeps all); the other decisions keep only the picked
/// candidate's vector, the rest null. Which decisions keep all is a
/// function of the id alone, like [`super::sampling::sampled_at`].
///
/// # Errors
/// Only if Arrow rejects the arrays (e.g. string data over 2 GiB in one batch).
pub fn decisions_batch_sampled(
    records: &[DecisionRecord],
    all_features_below: f64,
) -> Result<RecordBatch, ArrowError> {
    let n = records.len();
    let bytes = |f: &dyn Fn(&DecisionRecord) -> usize| -> usize { records.iter().map(f).sum() };
    let opt_len = |s: Option<&str>| s.map_or(0, str::len);
    let mut decision_id = StringBuilder::with_capacity(n, bytes(&|r| r.decision_id.len()));
    let mut ts_ms = Vec::with_capacity(n);
    let mut key_prefix = StringBuilder::with_capacity(n, bytes(&|r| r.key_prefix.len()));
    let mut shard_id = UInt64Builder::with_capacity(n);
    let mut request_type = StringBuilder::with_capacity(n, bytes(&|r| opt_len(r.request_type)));
    let mut client_region =
        StringBuilder::with_capacity(n, bytes(&|r| opt_len(r.client_region.as_deref())));
    let mut timeout_ms = UInt64Builder::with_capacity(n);
    let mut batch_size = UInt32Builder::with_capacity(n);
    let mut policy = StringBuilder::with_capacity(n, bytes(&|r| r.policy.len()));
    let mut panic = BooleanBuilder::with_capacity(n);
    let mut model_version =
        StringBuilder::with_capacity(n, bytes(&|r| opt_len(r.model_version.as_deref())));
    let mut arm = StringBuilder::with_capacity(n, bytes(&|r| opt_len(r.arm.as_deref())));
    let mut config_hash = StringBuilder::with_capacity(n, bytes(&|r| r.config_hash.len()));
    let mut caller = StringBuilder::with_capacity(n, bytes(&|r| opt_len(r.caller.as_deref())));
    let mut pick = StringBuilder::with_capacity(n, n * 16);
    let mut pick_probability = Float64Builder::with_capacity(n);
    for rec in records {
        decision_id.append_value(&rec.decision_id);
        ts_ms.push(rec.ts_ms);
        key_prefix.append_value(&rec.key_prefix);
        shard_id.append_option(rec.shard_id);
        request_type.append_option(rec.request_type);
        client_region.append_option(rec.client_region.as_deref());
        timeout_ms.append_option(rec.timeout_ms);
        batch_size.append_option(rec.batch_size);
        policy.append_value(rec.policy);
        panic.append_value(rec.panic);
        model_version.append_option(rec.model_version.as_deref());
        arm.append_option(rec.arm.as_deref());
        config_hash.append_value(&rec.config_hash);
        caller.append_option(rec.caller.as_deref());
        let picked = rec.candidates.iter().find(|c| c.picked);
        pick.append_option(picked.map(|c| c.worker_id.as_str()));
        pick_probability.append_option(picked.and_then(|c| c.probability));
    }
    let version = StringArray::from_iter_values(std::iter::repeat_n(FEATURE_SCHEMA_VERSION, n));
    let all_features: Vec<bool> = records
        .iter()
        .map(|r| all_features_below >= 1.0 || id_unit(&r.decision_id) < all_features_below)
        .collect();
    let columns: Vec<ArrayRef> = vec![
        Arc::new(decision_id.finish()),
        Arc::new(TimestampMillisecondArray::from(ts_ms).with_timezone(TIMEZONE)),
        Arc::new(key_prefix.finish()),
        Arc::new(shard_id.finish()),
        Arc::new(request_type.finish()),
        Arc::new(client_region.finish()),
        Arc::new(timeout_ms.finish()),
        Arc::new(batch_size.finish()),
        Arc::new(policy.finish()),
        Arc::new(panic.finish()),
        Arc::new(model_version.finish()),
        Arc::new(arm.finish()),
        Arc::new(config_hash.finish()),
        Arc::new(version),
        Arc::new(caller.finish()),
        Arc::new(pick.finish()),
        Arc::new(pick_probability.finish()),
        Arc::new(candidates_column(records, &|i| all_features[i])?),
    ];
    RecordBatch::try_new(decisions_schema(), columns)
}

/// One row per outcome, in order, with [`outcomes_schema`].
///
/// # Errors
/// Only if Arrow rejects the arrays (e.g. string data over 2 GiB in one batch).
pub fn outcomes_batch(records: &[OutcomeRecord]) -> Result<RecordBatch, ArrowError> {
    let n = records.len();
    let mut decision_id = StringBuilder::with_capacity(n, n * 16);
    let mut worker_id = StringBuilder::with_capacity(n, n * 16);
    let mut ts_ms = Vec::with_capacity(n);
    let mut latency_ms = Vec::with_capacity(n);
    let mut success = BooleanBuilder::with_capacity(n);
    let mut caller = StringBuilder::with_capacity(n, 0);
    let mut cache_hit = BooleanBuilder::with_capacity(n);
    for r in records {
        decision_id.append_value(&r.decision_id);
        worker_id.append_value(&r.worker_id);
        ts_ms.push(r.ts_ms);
        latency_ms.push(r.latency_ms);
        success.append_value(r.success);
        caller.append_option(r.caller.as_deref());
        cache_hit.append_option(r.cache_hit);
    }
    let columns: Vec<ArrayRef> = vec![
        Arc::new(decision_id.finish()),
        Arc::new(worker_id.finish()),
        Arc::new(TimestampMillisecondArray::from(ts_ms).with_timezone(TIMEZONE)),
        Arc::new(Float64Array::from(latency_ms)),
        Arc::new(success.finish()),
        Arc::new(caller.finish()),
        Arc::new(cache_hit.finish()),
    ];
    RecordBatch::try_new(outcomes_schema(), columns)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_inputs_give_empty_batches_with_the_schemas() {
        let d = decisions_batch(&[]).unwrap();
        assert_eq!(d.num_rows(), 0);
        assert_eq!(d.schema(), decisions_schema());
        let o = outcomes_batch(&[]).unwrap();
        assert_eq!(o.num_rows(), 0);
        assert_eq!(o.schema(), outcomes_schema());
    }
}
