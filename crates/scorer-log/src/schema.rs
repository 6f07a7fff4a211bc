//! The Arrow schemas of the decision log: the one place they are defined
//! (the trainer imports this module).
//!
//! # Decisions on disk: one row per decision ([`decisions_schema`], layout 5)
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
//! | `policy` | Utf8 | no | policy name |
//! | `panic` | Boolean | no | decision made in panic mode |
//! | `model_version` | Utf8 | yes | model version used |
//! | `arm` | Utf8 | yes | experiment arm |
//! | `config_hash` | Utf8 | no | hash of the active config |
//! | `feature_schema_version` | Utf8 | no | [`FEATURE_SCHEMA_VERSION`] at write time |
//! | `caller` | Utf8 | yes | configured name of the credential that asked for the decision (a token's or a client certificate's name); null without one |
//! | `pick` | Utf8 | yes | picked worker id; null when nothing was picked |
//! | `pick_probability` | Float64 | yes | propensity of the pick, [0, 1] |
//! | `candidates` | `List<Struct>` (non-null items) | no | every candidate scored, in scoring order |
//!
//! Each `candidates` item ([`candidate_fields`]):
//!
//! | field | type | null | unit / meaning |
//! | --- | --- | --- | --- |
//! | `worker_id` | Utf8 | no | candidate worker id |
//! | `eligible` | Boolean | no | passed eligibility filters |
//! | `rule_score` | Float64 | no | rule score, dimensionless |
//! | `model_action` | Float64 | yes | raw model output, dimensionless |
//! | `final_score` | Float64 | no | score ranked on, dimensionless |
//! | `probability` | Float64 | yes | propensity of picking this candidate, [0, 1] |
//! | `picked` | Boolean | no | this candidate was picked |
//! | `penalty_state` | Utf8 | no | worker penalty state label |
//! | `fallback_reason` | Utf8 | yes | why the model was bypassed |
//! | `features` | FixedSizeList<Float32 (non-null), 42> | yes | observation vector, feature-schema order and units; null on the unpicked candidates of a decision outside the `candidate_features_rate` sample |
//! | `operator_override` | Utf8 | yes | the operator's override in force on the worker: `drain`, `disable` or `weight`; null without one |
//!
//! Schema metadata: [`META_FEATURE_SCHEMA_VERSION`] = [`FEATURE_SCHEMA_VERSION`],
//! [`META_LOG_SCHEMA_VERSION`] = [`LOG_SCHEMA_VERSION`].
//!
//! # Candidate rows: the flat view readers load ([`candidate_rows_schema`])
//!
//! One row per (decision, candidate): the decision-level columns above
//! (except `pick` and `pick_probability`) repeated on each of its
//! candidates' rows, in the column order of layout 1 (which was written
//! this way): `decision_id`, `ts_ms`, `key_prefix`, `shard_id`,
//! `request_type`, `client_region`, `timeout_ms`, `batch_size`,
//! `worker_id`, `eligible`, `rule_score`, `model_action`, `final_score`,
//! `policy`, `probability`, `picked`, `panic`, `penalty_state`,
//! `fallback_reason`, `model_version`, `arm`, `config_hash`,
//! `feature_schema_version`, `features`, then `caller` and
//! `operator_override`. [`super::reader`] gives every layout in this form
//! ([`super::flatten`]); files of layouts 1 and 2, written before `caller`,
//! read with a null `caller`, and files of layouts 1 to 3 with a null
//! `operator_override`.
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
//! | `caller` | Utf8 | yes | configured name of the credential that reported it; null without one |
//! | `cache_hit` | Boolean | yes | the worker served it from its cache: true a hit, false a miss (a cache-aside GET that found nothing); null when unknown or not a read |
//!
//! Schema metadata: [`META_LOG_SCHEMA_VERSION`] only (outcomes carry no features).
//! Files of layouts 1 to 4, written before `cache_hit`, read with it null.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use arrow::datatypes::{DataType, Field, Fields, Schema, SchemaRef, TimeUnit};

use scorer_core::features::{FEATURE_COUNT, FEATURE_SCHEMA_VERSION};

/// Version of the log layout (columns and their meaning); bump on any change.
/// `"5"`: one decisions row per decision, candidates nested with the
/// operator's override, the `caller` of decisions and outcomes, and the
/// outcomes' `cache_hit`.
pub const LOG_SCHEMA_VERSION: &str = "5";
/// Layout 4: layout 5 without the outcomes' `cache_hit`
/// ([`outcomes_schema_v4`]; its decisions are layout 5's,
/// [`decisions_schema_v4`]). Still read.
pub const LOG_SCHEMA_VERSION_OVERRIDE: &str = "4";
/// The outcomes' column saying whether the worker served the request from
/// its cache.
pub const CACHE_HIT_COLUMN: &str = "cache_hit";
/// Layout 3: layout 4 without the candidates' `operator_override`
/// ([`decisions_schema_v3`]; its outcomes are layout 4's). Still read.
pub const LOG_SCHEMA_VERSION_CALLER: &str = "3";
/// The candidates' field naming the operator's override.
pub const OVERRIDE_FIELD: &str = "operator_override";
/// Layout 2: layout 3 without `caller` ([`decisions_schema_v2`],
/// [`outcomes_schema_v2`]). Still read.
pub const LOG_SCHEMA_VERSION_NESTED: &str = "2";
/// The column naming who asked for a decision or reported an outcome.
pub const CALLER_COLUMN: &str = "caller";
/// Layout 1: one decisions row per (decision, candidate),
/// [`flat_layout_schema`]. Still read.
pub const LOG_SCHEMA_VERSION_FLAT: &str = "1";
/// Schema metadata key holding the feature schema version of the `features` column.
pub const META_FEATURE_SCHEMA_VERSION: &str = "feature_schema_version";
/// Schema metadata key holding [`LOG_SCHEMA_VERSION`].
pub const META_LOG_SCHEMA_VERSION: &str = "log_schema_version";
/// Time zone of every timestamp column.
pub const TIMEZONE: &str = "UTC";
/// Name of the item field inside the `features` and `candidates` lists.
pub const FEATURE_ITEM_NAME: &str = "item";
/// Name of the nested candidates column.
pub const CANDIDATES_COLUMN: &str = "candidates";
/// Decision-level columns of [`decisions_schema`] before `pick`, in order.
pub const DECISION_COLUMNS: [&str; 15] = [
    "decision_id",
    "ts_ms",
    "key_prefix",
    "shard_id",
    "request_type",
    "client_region",
    "timeout_ms",
    "batch_size",
    "policy",
    "panic",
    "model_version",
    "arm",
    "config_hash",
    "feature_schema_version",
    CALLER_COLUMN,
];

pub(crate) fn ts_type() -> DataType {
    DataType::Timestamp(TimeUnit::Millisecond, Some(TIMEZONE.into()))
}

/// The non-null Float32 item field of the `features` list.
pub fn feature_item_field() -> Arc<Field> {
    Arc::new(Field::new(FEATURE_ITEM_NAME, DataType::Float32, false))
}

/// `FEATURE_COUNT` as the `i32` Arrow wants for a fixed list size.
pub(crate) fn feature_list_len() -> i32 {
    // ok: FEATURE_COUNT is a small compile-time constant (42).
    i32::try_from(FEATURE_COUNT).unwrap_or(i32::MAX)
}

fn features_field() -> Field {
    Field::new(
        "features",
        DataType::FixedSizeList(feature_item_field(), feature_list_len()),
        true,
    )
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

fn decision_field(name: &str) -> Field {
    let (ty, nullable) = match name {
        "ts_ms" => (ts_type(), false),
        "shard_id" | "timeout_ms" => (DataType::UInt64, true),
        "batch_size" => (DataType::UInt32, true),
        "panic" => (DataType::Boolean, false),
        "request_type" | "client_region" | "model_version" | "arm" | CALLER_COLUMN => {
            (DataType::Utf8, true)
        }
        _ => (DataType::Utf8, false),
    };
    Field::new(name, ty, nullable)
}

/// The fields of one `candidates` item, in order (see the module table).
pub fn candidate_fields() -> Fields {
    static FIELDS: OnceLock<Fields> = OnceLock::new();
    FIELDS
        .get_or_init(|| {
            let mut f: Vec<Field> = candidate_fields_v3()
                .iter()
                .map(|f| f.as_ref().clone())
                .collect();
            f.push(Field::new(OVERRIDE_FIELD, DataType::Utf8, true));
            Fields::from(f)
        })
        .clone()
}

/// The `candidates` item fields of layouts 2 and 3: [`candidate_fields`]
/// without `operator_override`.
pub fn candidate_fields_v3() -> Fields {
    static FIELDS: OnceLock<Fields> = OnceLock::new();
    FIELDS
        .get_or_init(|| {
            Fields::from(vec![
                Field::new("worker_id", DataType::Utf8, false),
                Field::new("eligible", DataType::Boolean, false),
                Field::new("rule_score", DataType::Float64, false),
                Field::new("model_action", DataType::Float64, true),
                Field::new("final_score", DataType::Float64, false),
                Field::new("probability", DataType::Float64, true),
                Field::new("picked", DataType::Boolean, false),
                Field::new("penalty_state", DataType::Utf8, false),
                Field::new("fallback_reason", DataType::Utf8, true),
                features_field(),
            ])
        })
        .clone()
}

/// The non-null struct item field of the `candidates` list.
pub fn candidate_item_field() -> Arc<Field> {
    item_of(candidate_fields())
}

fn item_of(fields: Fields) -> Arc<Field> {
    Arc::new(Field::new(
        FEATURE_ITEM_NAME,
        DataType::Struct(fields),
        false,
    ))
}

fn decisions_metadata(log_version: &str) -> HashMap<String, String> {
    HashMap::from([
        (
            META_FEATURE_SCHEMA_VERSION.to_string(),
            FEATURE_SCHEMA_VERSION.to_string(),
        ),
        (META_LOG_SCHEMA_VERSION.to_string(), log_version.to_string()),
    ])
}

fn nested_schema(with_caller: bool, log_version: &str) -> SchemaRef {
    let mut fields: Vec<Field> = DECISION_COLUMNS
        .iter()
        .filter(|c| with_caller || **c != CALLER_COLUMN)
        .map(|c| decision_field(c))
        .collect();
    fields.push(Field::new("pick", DataType::Utf8, true));
    fields.push(Field::new("pick_probability", DataType::Float64, true));
    let with_override = matches!(
        log_version,
        LOG_SCHEMA_VERSION | LOG_SCHEMA_VERSION_OVERRIDE
    );
    let item = if with_override {
        candidate_item_field()
    } else {
        item_of(candidate_fields_v3())
    };
    fields.push(Field::new(CANDIDATES_COLUMN, DataType::List(item), false));
    Arc::new(Schema::new_with_metadata(
        fields,
        decisions_metadata(log_version),
    ))
}

/// Schema of decisions files, one row per decision (see the module table).
/// Cheap: cloned from a cache.
pub fn decisions_schema() -> SchemaRef {
    static SCHEMA: OnceLock<SchemaRef> = OnceLock::new();
    SCHEMA
        .get_or_init(|| nested_schema(true, LOG_SCHEMA_VERSION))
        .clone()
}

/// The on-disk decisions schema of layout 4 ([`LOG_SCHEMA_VERSION_OVERRIDE`]):
/// [`decisions_schema`]'s columns, its metadata naming layout 4.
pub fn decisions_schema_v4() -> SchemaRef {
    static SCHEMA: OnceLock<SchemaRef> = OnceLock::new();
    SCHEMA
        .get_or_init(|| nested_schema(true, LOG_SCHEMA_VERSION_OVERRIDE))
        .clone()
}

/// The on-disk decisions schema of layout 3 ([`LOG_SCHEMA_VERSION_CALLER`]):
/// [`decisions_schema`] without the candidates' `operator_override`.
pub fn decisions_schema_v3() -> SchemaRef {
    static SCHEMA: OnceLock<SchemaRef> = OnceLock::new();
    SCHEMA
        .get_or_init(|| nested_schema(true, LOG_SCHEMA_VERSION_CALLER))
        .clone()
}

/// The on-disk decisions schema of layout 2 ([`LOG_SCHEMA_VERSION_NESTED`]):
/// [`decisions_schema`] without `caller`.
pub fn decisions_schema_v2() -> SchemaRef {
    static SCHEMA: OnceLock<SchemaRef> = OnceLock::new();
    SCHEMA
        .get_or_init(|| nested_schema(false, LOG_SCHEMA_VERSION_NESTED))
        .clone()
}

/// Column names of [`candidate_rows_schema`], in order.
pub const CANDIDATE_ROW_COLUMNS: [&str; 26] = [
    "decision_id",
    "ts_ms",
    "key_prefix",
    "shard_id",
    "request_type",
    "client_region",
    "timeout_ms",
    "batch_size",
    "worker_id",
    "eligible",
    "rule_score",
    "model_action",
    "final_score",
    "policy",
    "probability",
    "picked",
    "panic",
    "penalty_state",
    "fallback_reason",
    "model_version",
    "arm",
    "config_hash",
    "feature_schema_version",
    "features",
    CALLER_COLUMN,
    OVERRIDE_FIELD,
];

fn flat_schema(features_nullable: bool, log_version: &str) -> SchemaRef {
    let candidate = candidate_fields();
    let layout_1 = log_version == LOG_SCHEMA_VERSION_FLAT;
    let fields: Vec<Field> = CANDIDATE_ROW_COLUMNS
        .iter()
        .filter(|c| !layout_1 || (**c != CALLER_COLUMN && **c != OVERRIDE_FIELD))
        .map(|name| match candidate.find(name) {
            Some((_, f)) if f.name() == "features" => {
                f.as_ref().clone().with_nullable(features_nullable)
            }
            Some((_, f)) => f.as_ref().clone(),
            None => decision_field(name),
        })
        .collect();
    Arc::new(Schema::new_with_metadata(
        fields,
        decisions_metadata(log_version),
    ))
}

/// The flat view, one row per (decision, candidate) (see the module docs),
/// `features` nullable as in [`candidate_fields`]. Cheap: cloned from a cache.
pub fn candidate_rows_schema() -> SchemaRef {
    static SCHEMA: OnceLock<SchemaRef> = OnceLock::new();
    SCHEMA
        .get_or_init(|| flat_schema(true, LOG_SCHEMA_VERSION))
        .clone()
}

/// The on-disk schema of layout 1 ([`LOG_SCHEMA_VERSION_FLAT`]): the
/// [`candidate_rows_schema`] columns but `caller` and `operator_override`,
/// `features` never null.
pub fn flat_layout_schema() -> SchemaRef {
    static SCHEMA: OnceLock<SchemaRef> = OnceLock::new();
    SCHEMA
        .get_or_init(|| flat_schema(false, LOG_SCHEMA_VERSION_FLAT))
        .clone()
}

/// The outcomes columns of `log_version`: `caller` from layout 3 on,
/// `cache_hit` from layout 5 on.
fn outcomes(log_version: &str) -> SchemaRef {
    let with_caller = !matches!(
        log_version,
        LOG_SCHEMA_VERSION_NESTED | LOG_SCHEMA_VERSION_FLAT
    );
    let with_cache_hit = log_version == LOG_SCHEMA_VERSION;
    let mut fields = vec![
        Field::new("decision_id", DataType::Utf8, false),
        Field::new("worker_id", DataType::Utf8, false),
        Field::new("ts_ms", ts_type(), false),
        Field::new("latency_ms", DataType::Float64, false),
        Field::new("success", DataType::Boolean, false),
    ];
    if with_caller {
        fields.push(Field::new(CALLER_COLUMN, DataType::Utf8, true));
    }
    if with_cache_hit {
        fields.push(Field::new(CACHE_HIT_COLUMN, DataType::Boolean, true));
    }
    let metadata = HashMap::from([(META_LOG_SCHEMA_VERSION.to_string(), log_version.to_string())]);
    Arc::new(Schema::new_with_metadata(fields, metadata))
}

/// Layout 1 as the reader decodes it: [`flat_layout_schema`] with
/// `features` nullable, as in [`candidate_rows_schema`].
pub fn flat_layout_read_schema() -> SchemaRef {
    static SCHEMA: OnceLock<SchemaRef> = OnceLock::new();
    SCHEMA
        .get_or_init(|| flat_schema(true, LOG_SCHEMA_VERSION_FLAT))
        .clone()
}

/// Schema of the outcomes log (see the module table). Cheap: cloned from a cache.
pub fn outcomes_schema() -> SchemaRef {
    static SCHEMA: OnceLock<SchemaRef> = OnceLock::new();
    SCHEMA.get_or_init(|| outcomes(LOG_SCHEMA_VERSION)).clone()
}

/// The outcomes schema of layout 4 ([`LOG_SCHEMA_VERSION_OVERRIDE`]):
/// [`outcomes_schema`] without `cache_hit`.
pub fn outcomes_schema_v4() -> SchemaRef {
    static SCHEMA: OnceLock<SchemaRef> = OnceLock::new();
    SCHEMA
        .get_or_init(|| outcomes(LOG_SCHEMA_VERSION_OVERRIDE))
        .clone()
}

/// The outcomes schema of layout 3: [`outcomes_schema_v4`]'s columns, its
/// metadata naming layout 3.
pub fn outcomes_schema_v3() -> SchemaRef {
    static SCHEMA: OnceLock<SchemaRef> = OnceLock::new();
    SCHEMA
        .get_or_init(|| outcomes(LOG_SCHEMA_VERSION_CALLER))
        .clone()
}

/// The outcomes schema of layouts 1 and 2: [`outcomes_schema_v4`] without
/// `caller` (its metadata names layout 2).
pub fn outcomes_schema_v2() -> SchemaRef {
    static SCHEMA: OnceLock<SchemaRef> = OnceLock::new();
    SCHEMA
        .get_or_init(|| outcomes(LOG_SCHEMA_VERSION_NESTED))
        .clone()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn version(s: &Schema) -> Option<&str> {
        s.metadata()
            .get(META_LOG_SCHEMA_VERSION)
            .map(String::as_str)
    }

    #[test]
    fn schemas_carry_versions() {
        let d = decisions_schema();
        assert_eq!(d.fields().len(), 18);
        assert_eq!(decisions_schema_v4().fields().len(), 18);
        assert_eq!(decisions_schema_v3().fields().len(), 18);
        assert_eq!(decisions_schema_v2().fields().len(), 17);
        assert_eq!(flat_layout_schema().fields().len(), 24);
        assert_eq!(
            d.metadata()
                .get(META_FEATURE_SCHEMA_VERSION)
                .map(String::as_str),
            Some(FEATURE_SCHEMA_VERSION)
        );
        assert_eq!(version(&d), Some("5"));
        assert_eq!(version(&decisions_schema_v4()), Some("4"));
        assert_eq!(d.fields(), decisions_schema_v4().fields());
        assert_eq!(version(&decisions_schema_v3()), Some("3"));
        assert_ne!(d, decisions_schema_v3(), "the candidates differ");
        assert_eq!(version(&decisions_schema_v2()), Some("2"));
        assert_eq!(version(&flat_layout_schema()), Some("1"));
        assert_eq!(version(&outcomes_schema()), Some("5"));
        assert_eq!(version(&outcomes_schema_v4()), Some("4"));
        assert_eq!(version(&outcomes_schema_v3()), Some("3"));
        assert_eq!(outcomes_schema().fields().len(), 7);
        let hit = outcomes_schema().field(6).clone();
        assert_eq!(
            (hit.name().as_str(), hit.data_type(), hit.is_nullable()),
            (CACHE_HIT_COLUMN, &DataType::Boolean, true)
        );
        assert_eq!(outcomes_schema_v4().fields().len(), 6);
        assert_eq!(outcomes_schema_v3().fields(), outcomes_schema_v4().fields());
        assert_eq!(outcomes_schema_v2().fields().len(), 5);
    }

    #[test]
    fn the_flat_view_has_every_decision_and_candidate_column_once() {
        let flat = candidate_rows_schema();
        assert_eq!(flat.fields().len(), 26);
        let nested: usize = DECISION_COLUMNS.len() + candidate_fields().len();
        assert_eq!(nested, 26);
        for name in DECISION_COLUMNS {
            let (_, d) = decisions_schema()
                .column_with_name(name)
                .map(|(i, f)| (i, f.clone()))
                .unwrap();
            assert_eq!(flat.field_with_name(name).unwrap(), &d, "{name}");
        }
        for c in candidate_fields().iter() {
            assert_eq!(flat.field_with_name(c.name()).unwrap(), c.as_ref());
        }
    }
}
