//! Unit tests of `complete.rs`: the complete-tree layout agrees bit
//! for bit with the reference walk on unbalanced trees, boundary inputs and
//! every batch length, and is skipped outside its limits.
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::{COMPLETE_MAX_DEPTH, ROW_WIDTH};
use crate::ensemble::{FlatEnsemble, MODE_BRANCH_LEQ, MODE_LEAF, TreeEnsembleAttributes};

const THRESHOLDS: [f32; 6] = [-1.5, -0.0, 0.0, 0.25, 3.0, 1e5];

/// Random trees whose leaves sit at any depth up to `max_depth` (the first
/// tree reaches it), with splits on features `0..n_features`.
fn random_ensemble(
    trees: usize,
    max_depth: usize,
    n_features: usize,
    seed: u64,
) -> TreeEnsembleAttributes {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut a = TreeEnsembleAttributes {
        n_targets: 1,
        ..TreeEnsembleAttributes::default()
    };
    for t in 0..trees as i64 {
        let mut next_id = 1i64;
        // (node id, depth)
        let mut stack = vec![(0i64, 0usize)];
        while let Some((id, depth)) = stack.pop() {
            let forced = t == 0 && depth < max_depth;
            let leaf = depth == max_depth || (!forced && rng.random_bool(0.3));
            if leaf {
                a.push_leaf(t, id, rng.random_range(-1.0..1.0));
            } else {
                a.nodes_treeids.push(t);
                a.nodes_nodeids.push(id);
                let (l, r) = (next_id, next_id + 1);
                next_id += 2;
                a.nodes_featureids
                    .push(rng.random_range(0..n_features) as i64);
                a.nodes_values
                    .push(THRESHOLDS[rng.random_range(0..THRESHOLDS.len())]);
                a.nodes_modes.push(MODE_BRANCH_LEQ.into());
                a.nodes_truenodeids.push(l);
                a.nodes_falsenodeids.push(r);
                a.nodes_missing_value_tracks_true
                    .push(i64::from(rng.random_bool(0.5)));
                stack.push((r, depth + 1));
                stack.push((l, depth + 1));
            }
        }
    }
    a
}

/// Rows of `width` values drawn from the thresholds, the next f32 above
/// them, NaN, ±∞ and random values.
fn boundary_rows(n: usize, width: usize, seed: u64) -> Vec<f32> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    (0..n * width)
        .map(|_| match rng.random_range(0..6) {
            0 => f32::NAN,
            1 => THRESHOLDS[rng.random_range(0..THRESHOLDS.len())],
            2 => THRESHOLDS[rng.random_range(0..THRESHOLDS.len())].next_up(),
            3 => [f32::INFINITY, f32::NEG_INFINITY][rng.random_range(0..2)],
            _ => rng.random_range(-3.0..3.0),
        })
        .collect()
}

fn assert_matches_reference(e: &FlatEnsemble, width: usize, seed: u64) {
    for n in (0..=20).chain([33, 64]) {
        let rows = boundary_rows(n, width, seed + n as u64);
        let mut out = vec![f32::NAN; n];
        e.eval_batch(&rows, &mut out);
        for (k, (row, o)) in rows.chunks(width).zip(&out).enumerate() {
            let want = e.eval_reference(row);
            assert_eq!(
                o.to_bits(),
                want.to_bits(),
                "n={n} row {k}: {o} vs reference {want}, row {row:?}"
            );
        }
    }
}

#[test]
fn unbalanced_trees_match_the_reference_bit_for_bit() {
    // Every depth the layout takes: one kernel per tree stride.
    for depth in 1..=COMPLETE_MAX_DEPTH {
        let seed = depth as u64;
        let e = FlatEnsemble::from_attributes(&random_ensemble(23, depth, 5, seed)).unwrap();
        assert!(e.uses_complete_layout(), "depth {depth}");
        assert_matches_reference(&e, 5, seed * 100);
    }
}

#[test]
fn single_leaf_trees_and_wide_rows() {
    // Depth 0: every tree is one leaf (stride 2, no step).
    let e = FlatEnsemble::from_attributes(&random_ensemble(1, 0, 3, 7)).unwrap();
    assert!(e.uses_complete_layout());
    assert_matches_reference(&e, 3, 70);
    // Rows wider than the row buffer: only the first 64 columns are read.
    let e = FlatEnsemble::from_attributes(&random_ensemble(9, 5, ROW_WIDTH, 8)).unwrap();
    assert!(e.uses_complete_layout());
    assert_matches_reference(&e, ROW_WIDTH + 6, 80);
}

#[test]
fn reused_row_buffers_carry_nothing_between_calls() {
    // The kernel's row buffers are per thread and not cleared between calls:
    // a wide batch of extreme values, then a narrow one, must give what the
    // narrow one gives alone.
    let narrow = FlatEnsemble::from_attributes(&random_ensemble(17, 6, 3, 11)).unwrap();
    let wide = FlatEnsemble::from_attributes(&random_ensemble(17, 6, ROW_WIDTH, 12)).unwrap();
    let rows = boundary_rows(16, 3, 13);
    let mut first = vec![0f32; 16];
    narrow.eval_batch(&rows, &mut first);
    let extreme: Vec<f32> = (0..16 * ROW_WIDTH)
        .map(|i| if i % 2 == 0 { f32::MAX } else { f32::NAN })
        .collect();
    let mut sink = vec![0f32; 16];
    wide.eval_batch(&extreme, &mut sink);
    let mut again = vec![0f32; 16];
    narrow.eval_batch(&rows, &mut again);
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(&first), bits(&again));
    for (row, got) in rows.chunks_exact(3).zip(&again) {
        assert_eq!(narrow.eval_reference(row).to_bits(), got.to_bits());
    }
}

#[test]
fn streaming_a_cold_ensemble_in_changes_no_result() {
    let e = FlatEnsemble::from_attributes(&random_ensemble(29, 6, 7, 21)).unwrap();
    let rows = boundary_rows(16, 7, 22);
    let mut hot = vec![0f32; 16];
    e.eval_batch(&rows, &mut hot);
    let mut cold = vec![0f32; 16];
    assert!(crate::warmth::before_inference(u64::MAX), "cold");
    e.eval_batch(&rows, &mut cold);
    assert!(
        !crate::warmth::take_stream_request(),
        "the evaluation consumed the request"
    );
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(&hot), bits(&cold));
}

#[test]
fn outside_the_limits_the_pointer_walk_is_used_and_agrees() {
    let deep =
        FlatEnsemble::from_attributes(&random_ensemble(5, COMPLETE_MAX_DEPTH + 2, 4, 9)).unwrap();
    assert!(!deep.uses_complete_layout());
    assert_matches_reference(&deep, 4, 90);
    let wide = FlatEnsemble::from_attributes(&random_ensemble(5, 4, ROW_WIDTH + 1, 10)).unwrap();
    // Only when some split actually uses feature 64.
    let uses_64 = wide
        .nodes()
        .iter()
        .any(|n| !n.is_leaf() && n.feature() >= ROW_WIDTH);
    assert_eq!(wide.uses_complete_layout(), !uses_64);
    assert_matches_reference(&wide, ROW_WIDTH + 1, 100);
    // A +∞ threshold whose NaN goes right: NaN must go right, +∞ left.
    let mut a = random_ensemble(3, 3, 4, 11);
    let branch = a
        .nodes_modes
        .iter()
        .position(|m| m == MODE_BRANCH_LEQ)
        .unwrap();
    a.nodes_values[branch] = f32::INFINITY;
    a.nodes_missing_value_tracks_true[branch] = 0;
    let e = FlatEnsemble::from_attributes(&a).unwrap();
    assert!(!e.uses_complete_layout());
    assert_matches_reference(&e, 4, 110);
    // With NaN going left it is expressible.
    a.nodes_missing_value_tracks_true[branch] = 1;
    let e = FlatEnsemble::from_attributes(&a).unwrap();
    assert!(e.uses_complete_layout());
    assert_matches_reference(&e, 4, 120);
}

#[test]
fn pass_through_nodes_route_nan_and_infinity_to_the_leaf_above() {
    // Tree 0: f0 <= 0 ? (f1 <= 1 ? 10 : 20) : 30 (depth 2);
    // tree 1: a single leaf 0.5, padded to depth 2 by pass-through nodes.
    let a = TreeEnsembleAttributes {
        nodes_treeids: vec![0, 0, 0, 0, 0, 1],
        nodes_nodeids: vec![0, 1, 2, 3, 4, 0],
        nodes_featureids: vec![0, 1, 0, 0, 0, 0],
        nodes_values: vec![0.0, 1.0, 0.0, 0.0, 0.0, 0.0],
        nodes_modes: [
            MODE_BRANCH_LEQ,
            MODE_BRANCH_LEQ,
            MODE_LEAF,
            MODE_LEAF,
            MODE_LEAF,
            MODE_LEAF,
        ]
        .map(String::from)
        .to_vec(),
        nodes_truenodeids: vec![1, 3, 0, 0, 0, 0],
        nodes_falsenodeids: vec![2, 4, 0, 0, 0, 0],
        nodes_missing_value_tracks_true: vec![0, 1, 0, 0, 0, 0],
        target_treeids: vec![0, 0, 0, 1],
        target_nodeids: vec![2, 3, 4, 0],
        target_ids: vec![0; 4],
        target_weights: vec![30.0, 10.0, 20.0, 0.5],
        n_targets: 1,
        ..TreeEnsembleAttributes::default()
    };
    let e = FlatEnsemble::from_attributes(&a).unwrap();
    assert!(e.uses_complete_layout());
    let cases: [([f32; 2], f32); 6] = [
        ([0.0, 1.0], 10.5),
        ([-0.0, 1.5], 20.5),
        ([f32::NAN, 0.0], 30.5),  // NaN on f0 goes right (false side)
        ([-1.0, f32::NAN], 10.5), // NaN on f1 goes left
        ([f32::INFINITY, 0.0], 30.5),
        ([f32::NEG_INFINITY, f32::INFINITY], 20.5),
    ];
    // One row at a time (tree lanes) and all six as a padded row chunk.
    let rows: Vec<f32> = cases.iter().flat_map(|(r, _)| *r).collect();
    let mut all = [0f32; 6];
    e.eval_batch(&rows, &mut all);
    for ((row, want), got) in cases.iter().zip(all) {
        let mut one = [0f32];
        e.eval_batch(row, &mut one);
        assert_eq!(one[0], *want, "{row:?}");
        assert_eq!(got, *want, "{row:?} in a batch");
    }
}
