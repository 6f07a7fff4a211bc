//! Unit tests of `ensemble.rs`.
use super::*;

/// Tree 0: f0 <= 0.5 ? (f1 <= -1 ? 1 : 2) : 3, NaN on f0 goes right, on f1 left.
/// Tree 1: single leaf 0.25.
pub(crate) fn small() -> TreeEnsembleAttributes {
    TreeEnsembleAttributes {
        nodes_treeids: vec![0, 0, 0, 0, 0, 1],
        nodes_nodeids: vec![0, 1, 2, 3, 4, 0],
        nodes_featureids: vec![0, 1, 0, 0, 0, 0],
        nodes_values: vec![0.5, -1.0, 0.0, 0.0, 0.0, 0.0],
        nodes_modes: ["BRANCH_LEQ", "BRANCH_LEQ", "LEAF", "LEAF", "LEAF", "LEAF"]
            .map(String::from)
            .to_vec(),
        nodes_truenodeids: vec![1, 2, 0, 0, 0, 0],
        nodes_falsenodeids: vec![4, 3, 0, 0, 0, 0],
        nodes_missing_value_tracks_true: vec![0, 1, 0, 0, 0, 0],
        target_treeids: vec![0, 0, 0, 1],
        target_nodeids: vec![2, 3, 4, 0],
        target_ids: vec![0; 4],
        target_weights: vec![1.0, 2.0, 3.0, 0.25],
        n_targets: 1,
        aggregate_function: None,
        post_transform: Some("NONE".into()),
        base_values: vec![],
    }
}

#[test]
fn evaluates_small_ensemble() {
    let e = FlatEnsemble::from_attributes(&small()).unwrap();
    assert_eq!(e.n_trees(), 2);
    assert_eq!(e.n_features(), 2);
    let cases: &[([f32; 2], f32)] = &[
        ([0.5, -1.0], 1.25),
        ([0.5, -0.5], 2.25),
        ([0.6, -5.0], 3.25),
        ([f32::NAN, -5.0], 3.25),
        ([0.0, f32::NAN], 1.25),
        ([f32::NEG_INFINITY, f32::INFINITY], 2.25),
    ];
    let mut flat = vec![];
    for (row, want) in cases {
        assert_eq!(e.eval_reference(row), *want, "{row:?}");
        flat.extend_from_slice(row);
    }
    let mut out = vec![0.0; cases.len()];
    e.eval_batch(&flat, &mut out);
    for (o, (_, want)) in out.iter().zip(cases) {
        assert_eq!(o, want);
    }
}

#[test]
fn many_trees_lockstep_matches_reference() {
    // 19 copies of the small tree (not a multiple of LANES) with distinct weights.
    let base = small();
    let mut a = TreeEnsembleAttributes {
        n_targets: 1,
        ..Default::default()
    };
    for t in 0..19i64 {
        for i in 0..5 {
            a.nodes_treeids.push(t);
            a.nodes_nodeids.push(base.nodes_nodeids[i]);
            a.nodes_featureids.push(base.nodes_featureids[i]);
            a.nodes_values.push(base.nodes_values[i] + t as f32 * 0.1);
            a.nodes_modes.push(base.nodes_modes[i].clone());
            a.nodes_truenodeids.push(base.nodes_truenodeids[i]);
            a.nodes_falsenodeids.push(base.nodes_falsenodeids[i]);
            a.nodes_missing_value_tracks_true.push((t + i as i64) % 2);
        }
        for k in 0..3 {
            a.target_treeids.push(t);
            a.target_nodeids.push(base.target_nodeids[k]);
            a.target_ids.push(0);
            a.target_weights
                .push(0.1 * (t as f32 + 1.0) * (k as f32 - 1.3));
        }
    }
    let e = FlatEnsemble::from_attributes(&a).unwrap();
    let vals = [
        f32::NAN,
        -1.0,
        -0.0,
        0.0,
        0.5,
        0.55,
        1.0,
        2.0,
        f32::INFINITY,
    ];
    let mut rows = vec![];
    for x in vals {
        for y in vals {
            rows.extend([x, y]);
        }
    }
    let mut out = vec![0.0; rows.len() / 2];
    e.eval_batch(&rows, &mut out);
    for (row, o) in rows.chunks(2).zip(&out) {
        assert_eq!(o.to_bits(), e.eval_reference(row).to_bits());
    }
}

#[test]
fn refuses_unsupported() {
    let mut a = small();
    a.nodes_modes[0] = "BRANCH_LT".into();
    assert!(matches!(
        FlatEnsemble::from_attributes(&a),
        Err(EnsembleError::UnsupportedMode { .. })
    ));
    let mut a = small();
    a.post_transform = Some("LOGISTIC".into());
    assert!(FlatEnsemble::from_attributes(&a).is_err());
    let mut a = small();
    a.base_values = vec![0.5];
    assert!(FlatEnsemble::from_attributes(&a).is_err());
    let mut a = small();
    a.n_targets = 2;
    assert!(FlatEnsemble::from_attributes(&a).is_err());
    let mut a = small();
    a.nodes_falsenodeids[0] = 1; // node 1 reached twice, node 4 unreachable
    assert!(matches!(
        FlatEnsemble::from_attributes(&a),
        Err(EnsembleError::NotATree { .. })
    ));
    let mut a = small();
    a.nodes_truenodeids[1] = 0; // cycle back to the root
    assert!(matches!(
        FlatEnsemble::from_attributes(&a),
        Err(EnsembleError::NotATree { .. })
    ));
    let mut a = small();
    a.nodes_truenodeids[1] = 9;
    assert!(matches!(
        FlatEnsemble::from_attributes(&a),
        Err(EnsembleError::DanglingReference { .. })
    ));
    let mut a = small();
    a.target_nodeids[0] = 1;
    assert!(matches!(
        FlatEnsemble::from_attributes(&a),
        Err(EnsembleError::TargetOnBranch { .. })
    ));
    let mut a = small();
    a.nodes_values.pop();
    assert!(matches!(
        FlatEnsemble::from_attributes(&a),
        Err(EnsembleError::LengthMismatch { .. })
    ));
}

#[test]
fn batch_with_bad_width_fills_nan() {
    let e = FlatEnsemble::from_attributes(&small()).unwrap();
    let mut out = [0.0f32; 2];
    e.eval_batch(&[0.0; 3], &mut out);
    assert!(out.iter().all(|x| x.is_nan()));
    e.eval_batch(&[0.0; 2], &mut out); // width 1 < 2 features
    assert!(out.iter().all(|x| x.is_nan()));
}

#[test]
fn padded_pair_path_matches_reference_at_schema_width() {
    use crate::export::{ExportOptions, ensemble_attributes};
    use crate::fixture::{random_model, random_row};
    use rand::SeedableRng;
    let m = random_model(37, 6, 5);
    let e =
        FlatEnsemble::from_attributes(&ensemble_attributes(&m, &ExportOptions::default()).unwrap())
            .unwrap();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(9);
    for n in [1usize, 2, 16, 17] {
        let rows: Vec<f32> = (0..n).flat_map(|_| random_row(&mut rng)).collect();
        let mut out = vec![0.0; n];
        e.eval_batch(&rows, &mut out);
        for (row, o) in rows.chunks(42).zip(&out) {
            assert_eq!(o.to_bits(), e.eval_reference(row).to_bits(), "n={n}");
        }
    }
}
