#!/usr/bin/env bash
# Trains the shipped model (models/default) from simulator logs of the
# shipped configuration with the model off, as users run it: the central
# service (the `service-rules` arm) and the embedded balancer in every
# router (`service-embedded-rules`), each preset scenario on one of the
# training seeds 12–21 in turn (seeds the evaluation does not use; the
# run's name in every decision id keeps the runs apart).
#
#   scripts/train_default_model.sh [LOG_DIR]     (default data/sim-logs)
#
# Deterministic: the same code gives the same logs and a byte-identical
# model.txt / model.onnx (set SOURCE_DATE_EPOCH to pin card.json's time).
# No logging arm runs the model, so rebuilding from a retrained model gives
# the same model again.
set -euo pipefail
cd "$(dirname "$0")/.."

logs=${1:-data/sim-logs}
first_seed=${SEED:-11}
duration_s=${DURATION_S:-30}
scenarios=(homogeneous heterogeneous mixed-sizes slow-worker compaction
           crash-recovery zombie stale-burst many-routers hidden-signal
           many-routers-32 many-routers-heterogeneous
           cache-affinity hot-key cold-restart cache-many-routers
           cache-heterogeneous)
arms=service-rules,service-embedded-rules

cargo build --release -p evaluation --bin evaluate -p trainer --bin trainer
bin=${CARGO_TARGET_DIR:-target}/release
rm -rf "$logs"
mkdir -p "$logs"
i=0
for s in "${scenarios[@]}"; do
    seed=$((first_seed + 1 + i % 10))
    i=$((i + 1))
    echo "== $s (seed $seed, ${duration_s} s)"
    "$bin/evaluate" sim --scenario "$s" --policies "$arms" \
        --seed "$seed" --duration-s "$duration_s" \
        --out "$logs/results/$s" --log-dir "$logs/$s"
done
"$bin/trainer" train --quiet --logs "$logs" --out models/default \
    --seed 42 --num-trees 50 --max-depth 6 --num-leaves 16
"$bin/trainer" validate --model models/default
