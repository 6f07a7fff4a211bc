//! The Arrow schemas of the decision log: the one place they are defined
//! (the trainer imports this module), plus record → `RecordBatch` conversion.
//!
//! # Decisions: one row per (decision, candidate)
//!
//! | column | type | null | unit / meaning |
//! | --- | --- | --- | --- |
//! | `decision_id` | Utf8 | no | decision id, joins outcomes |
//! | `ts_ms` | Timestamp(ms, "UTC") | no | decision wall time, Unix ms |
//! | `key_prefix` | Utf8 | no | routed key prefix |
//! | `shard_id` | UInt64 | yes | shard index |
//! | `request_type` | Utf8 | yes | request type label |
//! | `client_region` | Utf8 | yes | client region label |
//! | `timeout_ms` | UInt64 | yes | client timeout, ms |
//! | `batch_size` | UInt32 | yes | keys in the request, count |
//! | `worker_id` | Utf8 | no | candidate worker id |
//! | `eligible` | Boolean | no | passed eligibility filters |
//! | `rule_score` | Float64 | no | rule score, dimensionless |
//! | `model_action` | Float64 | yes | raw model output, dimensionless |
//! | `final_score` | Float64 | no | score ranked on, dimensionless |
//! | `policy` | Utf8 | no | policy name |
//! | `probability` | Float64 | yes | propensity of picking this candidate, [0, 1] |
//! | `picked` | Boolean | no | this candidate was picked |
//! | `panic` | Boolean | no | decision made in panic mode |
//! | `penalty_state` | Utf8 | no | worker penalty state label |
//! | `fallback_reason` | Utf8 | yes | why the model was bypassed |
//! | `model_version` | Utf8 | yes | model version used |
//! | `arm` | Utf8 | yes | experiment arm |
//! | `config_hash` | Utf8 | no | hash of the active config |
//! | `feature_schema_version` | Utf8 | no | [`FEATURE_SCHEMA_VERSION`] at write time |
//! | `features` | FixedSizeList<Float32 (non-null), 42> | no | observation vector, feature-schema order and units |
//!
//! Schema metadata: [`META_FEATURE_SCHEMA_VERSION`] = [`FEATURE_SCHEMA_VERSION`],
//! [`META_LOG_SCHEMA_VERSION`] = [`LOG_SCHEMA_VERSION`].
//!
//! # Outcomes: one row per outcome
//!
//! | column | type | null | unit / meaning |
//! | --- | --- | --- | --- |
//! | `decision_id` | Utf8 | no | decision id |
//! | `worker_id` | Utf8 | no | worker that served the request |
//! | `ts_ms` | Timestamp(ms, "UTC") | no | outcome wall time, Unix ms |
//! | `latency_ms` | Float64 | no | observed latency, ms |
//! | `success` | Boolean | no | request succeeded |
//!
//! Schema metadata: [`META_LOG_SCHEMA_VERSION`] only (outcomes carry no features).

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use arrow::array::{
    ArrayRef, BooleanBuilder, FixedSizeListArray, Float32Array, Float64Array, Float64Builder,
    RecordBatch, StringArray, StringBuilder, TimestampMillisecondArray, UInt32Builder,
    UInt64Builder,
};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use arrow::error::ArrowError;

use super::record::{CandidateRow, DecisionRecord, OutcomeRecord};
use crate::features::{FEATURE_COUNT, FEATURE_SCHEMA_VERSION};

/// Version of the log layout (columns and their meaning); bump on any change.
pub const LOG_SCHEMA_VERSION: &str = "1";
/// Schema metadata key holding the feature schema version of the `features` column.
pub const META_FEATURE_SCHEMA_VERSION: &str = "feature_schema_version";
/// Schema metadata key holding [`LOG_SCHEMA_VERSION`].
pub const META_LOG_SCHEMA_VERSION: &str = "log_schema_version";
/// Time zone of every timestamp column.
pub const TIMEZONE: &str = "UTC";
/// Name of the item field inside the `features` list.
pub const FEATURE_ITEM_NAME: &str = "item";

fn ts_type() -> DataType {
    DataType::Timestamp(TimeUnit::Millisecond, Some(TIMEZONE.into()))
}

/// The non-null Float32 item field of the `features` list.
pub fn feature_item_field() -> Arc<Field> {
    Arc::new(Field::new(FEATURE_ITEM_NAME, DataType::Float32, false))
}

/// `FEATURE_COUNT` as the `i32` Arrow wants for a fixed list size.
fn feature_list_len() -> i32 {
    // ok: FEATURE_COUNT is a small compile-time constant (42).
    i32::try_from(FEATURE_COUNT).unwrap_or(i32::MAX)
}

/// Adds `schema`'s metadata (the version keys) to `writer` as plain Parquet
/// key-value metadata. arrow-rs otherwise keeps it only inside the
/// serialized Arrow schema (`ARROW:schema`), which pyarrow does not surface
/// (`pq.ParquetFile(f).schema_arrow.metadata` is empty) and drops when it
/// rewrites a file; as key-value metadata the versions are visible to every
/// Parquet tool and survive a rewrite. arrow-rs reads both places into the
/// schema's metadata.
pub fn append_version_metadata<W: std::io::Write + Send>(
    writer: &mut parquet::arrow::ArrowWriter<W>,
    schema: &Schema,
) {
    let mut keys: Vec<_> = schema.metadata().iter().collect();
    keys.sort();
    for (k, v) in keys {
        writer.append_key_value_metadata(parquet::file::metadata::KeyValue::new(
            k.clone(),
            v.clone(),
        ));
    }
}

/// Schema of the decisions log (see the module table). Cheap: cloned from a cache.
pub fn decisions_schema() -> SchemaRef {
    static SCHEMA: OnceLock<SchemaRef> = OnceLock::new();
    SCHEMA
        .get_or_init(|| {
            let fields = vec![
                Field::new("decision_id", DataType::Utf8, false),
                Field::new("ts_ms", ts_type(), false),
                Field::new("key_prefix", DataType::Utf8, false),
                Field::new("shard_id", DataType::UInt64, true),
                Field::new("request_type", DataType::Utf8, true),
                Field::new("client_region", DataType::Utf8, true),
                Field::new("timeout_ms", DataType::UInt64, true),
                Field::new("batch_size", DataType::UInt32, true),
                Field::new("worker_id", DataType::Utf8, false),
                Field::new("eligible", DataType::Boolean, false),
                Field::new("rule_score", DataType::Float64, false),
                Field::new("model_action", DataType::Float64, true),
                Field::new("final_score", DataType::Float64, false),
                Field::new("policy", DataType::Utf8, false),
                Field::new("probability", DataType::Float64, true),
                Field::new("picked", DataType::Boolean, false),
                Field::new("panic", DataType::Boolean, false),
                Field::new("penalty_state", DataType::Utf8, false),
                Field::new("fallback_reason", DataType::Utf8, true),
                Field::new("model_version", DataType::Utf8, true),
                Field::new("arm", DataType::Utf8, true),
                Field::new("config_hash", DataType::Utf8, false),
                Field::new("feature_schema_version", DataType::Utf8, false),
                Field::new(
                    "features",
                    DataType::FixedSizeList(feature_item_field(), feature_list_len()),
                    false,
                ),
            ];
            let metadata = HashMap::from([
                (
                    META_FEATURE_SCHEMA_VERSION.to_string(),
                    FEATURE_SCHEMA_VERSION.to_string(),
                ),
                (
                    META_LOG_SCHEMA_VERSION.to_string(),
                    LOG_SCHEMA_VERSION.to_string(),
                ),
            ]);
            Arc::new(Schema::new_with_metadata(fields, metadata))
        })
        .clone()
}

/// Schema of the outcomes log (see the module table). Cheap: cloned from a cache.
pub fn outcomes_schema() -> SchemaRef {
    static SCHEMA: OnceLock<SchemaRef> = OnceLock::new();
    SCHEMA
        .get_or_init(|| {
            let fields = vec![
                Field::new("decision_id", DataType::Utf8, false),
                Field::new("worker_id", DataType::Utf8, false),
                Field::new("ts_ms", ts_type(), false),
                Field::new("latency_ms", DataType::Float64, false),
                Field::new("success", DataType::Boolean, false),
            ];
            let metadata = HashMap::from([(
                META_LOG_SCHEMA_VERSION.to_string(),
                LOG_SCHEMA_VERSION.to_string(),
            )]);
            Arc::new(Schema::new_with_metadata(fields, metadata))
        })
        .clone()
}

/// Number of decisions-log rows `records` expand to (sum of candidate counts).
pub fn decision_rows(records: &[DecisionRecord]) -> usize {
    records.iter().map(|r| r.candidates.len()).sum()
}

/// Expands decisions into one row per candidate, in record then candidate order,
/// with [`decisions_schema`]. Decisions without candidates contribute no row.
///
/// # Errors
/// Only if Arrow rejects the arrays (e.g. string data over 2 GiB in one batch).
pub fn decisions_batch(records: &[DecisionRecord]) -> Result<RecordBatch, ArrowError> {
    let n = decision_rows(records);
    // Exact string bytes per column, so no builder grows (and copies) mid-batch.
    let per_decision = |f: &dyn Fn(&DecisionRecord) -> usize| -> usize {
        records.iter().map(|r| f(r) * r.candidates.len()).sum()
    };
    let per_row = |f: &dyn Fn(&CandidateRow) -> usize| -> usize {
        records.iter().flat_map(|r| &r.candidates).map(f).sum()
    };
    let opt_len = |s: Option<&str>| s.map_or(0, str::len);
    let mut decision_id = StringBuilder::with_capacity(n, per_decision(&|r| r.decision_id.len()));
    let mut ts_ms = Vec::with_capacity(n);
    let mut key_prefix = StringBuilder::with_capacity(n, per_decision(&|r| r.key_prefix.len()));
    let mut shard_id = UInt64Builder::with_capacity(n);
    let mut request_type =
        StringBuilder::with_capacity(n, per_decision(&|r| opt_len(r.request_type)));
    let mut client_region =
        StringBuilder::with_capacity(n, per_decision(&|r| opt_len(r.client_region.as_deref())));
    let mut timeout_ms = UInt64Builder::with_capacity(n);
    let mut batch_size = UInt32Builder::with_capacity(n);
    let mut worker_id = StringBuilder::with_capacity(n, per_row(&|c| c.worker_id.len()));
    let mut eligible = BooleanBuilder::with_capacity(n);
    let mut rule_score = Vec::with_capacity(n);
    let mut model_action = Float64Builder::with_capacity(n);
    let mut final_score = Vec::with_capacity(n);
    let mut policy = StringBuilder::with_capacity(n, per_decision(&|r| r.policy.len()));
    let mut probability = Float64Builder::with_capacity(n);
    let mut picked = BooleanBuilder::with_capacity(n);
    let mut panic = BooleanBuilder::with_capacity(n);
    let mut penalty_state = StringBuilder::with_capacity(n, per_row(&|c| c.penalty_state.len()));
    let mut fallback_reason =
        StringBuilder::with_capacity(n, per_row(&|c| opt_len(c.fallback_reason)));
    let mut model_version =
        StringBuilder::with_capacity(n, per_decision(&|r| opt_len(r.model_version.as_deref())));
    let mut arm = StringBuilder::with_capacity(n, per_decision(&|r| opt_len(r.arm.as_deref())));
    let mut config_hash = StringBuilder::with_capacity(n, per_decision(&|r| r.config_hash.len()));
    let mut features: Vec<f32> = Vec::with_capacity(n * FEATURE_COUNT);

    for rec in records {
        for c in &rec.candidates {
            decision_id.append_value(&rec.decision_id);
            ts_ms.push(rec.ts_ms);
            key_prefix.append_value(&rec.key_prefix);
            shard_id.append_option(rec.shard_id);
            request_type.append_option(rec.request_type);
            client_region.append_option(rec.client_region.as_deref());
            timeout_ms.append_option(rec.timeout_ms);
            batch_size.append_option(rec.batch_size);
            worker_id.append_value(&c.worker_id);
            eligible.append_value(c.eligible);
            rule_score.push(c.rule_score);
            model_action.append_option(c.model_action);
            final_score.push(c.final_score);
            policy.append_value(rec.policy);
            probability.append_option(c.probability);
            picked.append_value(c.picked);
            panic.append_value(rec.panic);
            penalty_state.append_value(c.penalty_state);
            fallback_reason.append_option(c.fallback_reason);
            model_version.append_option(rec.model_version.as_deref());
            arm.append_option(rec.arm.as_deref());
            config_hash.append_value(&rec.config_hash);
            features.extend_from_slice(&c.features);
        }
    }

    let features = FixedSizeListArray::try_new(
        feature_item_field(),
        feature_list_len(),
        Arc::new(Float32Array::from(features)),
        None,
    )?;
    let version = StringArray::from_iter_values(std::iter::repeat_n(FEATURE_SCHEMA_VERSION, n));
    let columns: Vec<ArrayRef> = vec![
        Arc::new(decision_id.finish()),
        Arc::new(TimestampMillisecondArray::from(ts_ms).with_timezone(TIMEZONE)),
        Arc::new(key_prefix.finish()),
        Arc::new(shard_id.finish()),
        Arc::new(request_type.finish()),
        Arc::new(client_region.finish()),
        Arc::new(timeout_ms.finish()),
        Arc::new(batch_size.finish()),
        Arc::new(worker_id.finish()),
        Arc::new(eligible.finish()),
        Arc::new(Float64Array::from(rule_score)),
        Arc::new(model_action.finish()),
        Arc::new(Float64Array::from(final_score)),
        Arc::new(policy.finish()),
        Arc::new(probability.finish()),
        Arc::new(picked.finish()),
        Arc::new(panic.finish()),
        Arc::new(penalty_state.finish()),
        Arc::new(fallback_reason.finish()),
        Arc::new(model_version.finish()),
        Arc::new(arm.finish()),
        Arc::new(config_hash.finish()),
        Arc::new(version),
        Arc::new(features),
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
    for r in records {
        decision_id.append_value(&r.decision_id);
        worker_id.append_value(&r.worker_id);
        ts_ms.push(r.ts_ms);
        latency_ms.push(r.latency_ms);
        success.append_value(r.success);
    }
    let columns: Vec<ArrayRef> = vec![
        Arc::new(decision_id.finish()),
        Arc::new(worker_id.finish()),
        Arc::new(TimestampMillisecondArray::from(ts_ms).with_timezone(TIMEZONE)),
        Arc::new(Float64Array::from(latency_ms)),
        Arc::new(success.finish()),
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

    #[test]
    fn schemas_carry_versions() {
        let d = decisions_schema();
        assert_eq!(d.fields().len(), 24);
        assert_eq!(
            d.metadata()
                .get(META_FEATURE_SCHEMA_VERSION)
                .map(String::as_str),
            Some(FEATURE_SCHEMA_VERSION)
        );
        assert_eq!(
            d.metadata()
                .get(META_LOG_SCHEMA_VERSION)
                .map(String::as_str),
            Some(LOG_SCHEMA_VERSION)
        );
        assert_eq!(outcomes_schema().fields().len(), 5);
    }
}
