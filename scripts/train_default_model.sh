#!/usr/bin/env bash
# Trains the shipped model (models/default) from simulator logs of the
# shipped configuration with the model off (the `service-rules` arm), one
# run per preset scenario, each on its own seed (11, 12, …: seeds the
# evaluation does not use, and distinct decision ids across runs).
#
#   scripts/train_default_model.sh [LOG_DIR]     (default data/sim-logs)
#
# Deterministic: the same code gives the same logs and a byte-identical
# model.txt / model.onnx (set SOURCE_DATE_EPOCH to pin card.json's time).
set -euo pipefail
cd "$(dirname "$0")/.."

logs=${1:-data/sim-logs}
first_seed=${SEED:-11}
duration_s=${DURATION_S:-30}
scenarios=(homogeneous heterogeneous mixed-sizes slow-worker compaction
           crash-recovery zombie stale-burst many-routers hidden-signal)

cargo build --release -p evaluation --bin evaluate -p trainer --bin trainer
bin=${CARGO_TARGET_DIR:-target}/release
rm -rf "$logs"
mkdir -p "$logs"
seed=$first_seed
for s in "${scenarios[@]}"; do
    seed=$((seed + 1))
    echo "== $s (seed $seed, ${duration_s} s)"
    "$bin/evaluate" sim --scenario "$s" --policies service-rules \
        --seed "$seed" --duration-s "$duration_s" \
        --out "$logs/results/$s" --log-dir "$logs/$s"
done
"$bin/trainer" train --quiet --logs "$logs" --out models/default \
    --seed 42 --num-trees 50 --max-depth 6 --num-leaves 16
"$bin/trainer" validate --model models/default
