#!/usr/bin/env python3
"""Read the service's decision and outcome logs with pyarrow, as a data
scientist would, and check them against expectations.

usage: check_parquet.py DIR EXPECTED_DECISION_ROWS EXPECTED_OUTCOME_ROWS
Prints one JSON line with what it found; exits 1 on any mismatch.
"""
import json
import sys

import pyarrow.dataset as ds

DECISION_COLUMNS = [
    "decision_id", "ts_ms", "key_prefix", "shard_id", "request_type", "client_region",
    "timeout_ms", "batch_size", "worker_id", "eligible", "rule_score", "model_action",
    "final_score", "policy", "probability", "picked", "penalty_state", "fallback_reason",
    "model_version", "arm", "config_hash", "feature_schema_version", "features",
]
OUTCOME_COLUMNS = ["decision_id", "worker_id", "ts_ms", "latency_ms", "success"]


def load(path):
    # `dt=YYYY-MM-DD/` directories are hive partitions; in-progress files are not *.parquet.
    return ds.dataset(path, format="parquet", partitioning="hive").to_table()


def main():
    root, want_decisions, want_outcomes = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
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
        problems.append(f"{decisions.num_rows} decision rows, expected {want_decisions}")
    if outcomes.num_rows != want_outcomes:
        problems.append(f"{outcomes.num_rows} outcome rows, expected {want_outcomes}")
    widths = set(len(v) for v in decisions.column("features").to_pylist()) if decisions.num_rows else set()
    if widths and widths != {42}:
        problems.append(f"feature vector widths {widths}, expected {{42}}")
    print(json.dumps({"decision_rows": decisions.num_rows, "outcome_rows": outcomes.num_rows,
                      "decision_columns": decisions.column_names, "problems": problems}))
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
