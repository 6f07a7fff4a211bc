#!/usr/bin/env python3
"""Read the service's decision and outcome logs with pyarrow, as a data
scientist would, and check them against expectations.

usage: check_parquet.py DIR DECISIONS CANDIDATE_ROWS OUTCOMES
DIR holds decisions/ and outcomes/. A decisions file has one row per
decision, its candidates in the nested `candidates` list column.
Prints one JSON line with what it found; exits 1 on any mismatch.
"""
import json
import sys

import pyarrow.compute as pc
import pyarrow.dataset as ds

DECISION_COLUMNS = [
    "decision_id", "ts_ms", "key_prefix", "shard_id", "request_type", "client_region",
    "timeout_ms", "batch_size", "policy", "panic", "model_version", "arm", "config_hash",
    "feature_schema_version", "pick", "pick_probability", "candidates",
]
CANDIDATE_FIELDS = [
    "worker_id", "eligible", "rule_score", "model_action", "final_score", "probability",
    "picked", "penalty_state", "fallback_reason", "features", "operator_override",
]
OUTCOME_COLUMNS = ["decision_id", "worker_id", "ts_ms", "latency_ms", "success", "caller", "cache_hit"]


def load(path):
    # `dt=YYYY-MM-DD/` directories are hive partitions; in-progress files are hidden (`.name`).
    return ds.dataset(path, format="parquet", partitioning="hive").to_table()


def main():
    root = sys.argv[1]
    want_decisions, want_candidates, want_outcomes = (int(a) for a in sys.argv[2:5])
    decisions = load(f"{root}/decisions")
    outcomes = load(f"{root}/outcomes")
    problems = []
    missing = [c for c in DECISION_COLUMNS if c not in decisions.column_names]
    if missing:
        problems.append(f"decision columns missing: {missing}")
    missing = [c for c in OUTCOME_COLUMNS if c not in outcomes.column_names]
    if missing:
        problems.append(f"outcome columns missing: {missing}")
    if decisions.num_rows != want_decisions:
        problems.append(f"{decisions.num_rows} decisions, expected {want_decisions}")
    if outcomes.num_rows != want_outcomes:
        problems.append(f"{outcomes.num_rows} outcome rows, expected {want_outcomes}")
    candidates = pc.list_flatten(decisions.column("candidates"))
    fields = [candidates.type.field(i).name for i in range(candidates.type.num_fields)]
    if fields != CANDIDATE_FIELDS:
        problems.append(f"candidate fields {fields}, expected {CANDIDATE_FIELDS}")
    if len(candidates) != want_candidates:
        problems.append(f"{len(candidates)} candidates, expected {want_candidates}")
    features = pc.struct_field(candidates, "features")
    picked = pc.struct_field(candidates, "picked")
    widths = set(len(v) for v in features.to_pylist() if v is not None)
    if widths and widths != {42}:
        problems.append(f"feature vector widths {widths}, expected {{42}}")
    picked_without = pc.sum(pc.and_(picked, pc.is_null(features))).as_py() or 0
    if picked_without:
        problems.append(f"{picked_without} picked candidates without features")
    picks = pc.sum(pc.is_valid(decisions.column("pick"))).as_py() or 0
    if picks != (pc.sum(picked).as_py() or 0):
        problems.append(f"{picks} picks but {pc.sum(picked).as_py()} picked candidates")
    print(json.dumps({"decisions": decisions.num_rows, "candidate_rows": len(candidates),
                      "outcome_rows": outcomes.num_rows,
                      "with_features": len(features) - features.null_count,
                      "decision_columns": decisions.column_names, "problems": problems}))
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
