//! Unit tests of `export.rs`.
use super::*;

fn next_up(x: f32) -> f32 {
    x.next_up()
}

#[test]
fn round_down_is_largest_f32_not_above() {
    let cases = [
        0.0,
        -0.0,
        1.0,
        0.1,
        -0.1,
        1e-35,
        1.0000000180025095e-35,
        -1.0000000180025095e-35,
        1e-45,
        -1e-45,
        1e-320,
        123456.789,
        -98765.4321,
        16777217.0,
        f64::from(f32::MAX),
        1e300,
        -1e300,
        f64::INFINITY,
        f64::NEG_INFINITY,
        0.30000001192092896, // exactly representable as f32
    ];
    for t in cases {
        let d = f32_round_down(t);
        assert!(f64::from(d) <= t, "{t}: {d} > t");
        let up = next_up(d);
        assert!(
            f64::from(up) > t || d == f32::INFINITY,
            "{t}: next_up({d}) = {up} <= t"
        );
        // The defining property on the two boundary inputs.
        for x in [d, up] {
            assert_eq!(f64::from(x) <= t, x <= d, "t={t} x={x}");
        }
    }
    assert!(f32_round_down(f64::NAN).is_nan());
    assert_eq!(f32_round_down(1e300), f32::MAX);
    assert_eq!(f32_round_down(-1e300), f32::NEG_INFINITY);
    assert_eq!(f32_round_down(0.1), 0.1f32.next_down()); // 0.1f32 > 0.1
    assert_eq!(f32_round_down(-0.1), -0.1f32); // -0.1f32 < -0.1
}

#[test]
fn near_zero_thresholds_follow_lightgbm_zeroing() {
    let kz = 1e-35f32;
    // LightGBM: |x| <= kZeroThreshold is read as 0.0, then 0.0 <= t.
    let lgb = |x: f32, t: f64| {
        let x = f64::from(x);
        let x = if x.abs() <= K_ZERO_THRESHOLD { 0.0 } else { x };
        x <= t
    };
    let ts = [
        -K_ZERO_THRESHOLD,
        -5e-36,
        -0.0,
        0.0,
        5e-36,
        K_ZERO_THRESHOLD,
        -2e-35,
        2e-35,
    ];
    let xs = [
        -kz.next_down(),
        -kz,
        (-kz).next_down(),
        (-kz).next_up(),
        -0.0,
        0.0,
        kz.next_down(),
        kz,
        kz.next_up(),
        2e-35,
        -2e-35,
        1.0,
        -1.0,
    ];
    for t in ts {
        let t32 = lightgbm_threshold_f32(t, ThresholdRounding::Down);
        for x in xs {
            assert_eq!(x <= t32, lgb(x, t), "t={t:e} x={x:e}");
        }
    }
}

#[test]
fn nearest_differs_from_down_when_rounding_up() {
    assert_ne!(f32_round_down(0.1), 0.1f64 as f32);
}

fn stump(decision_type: u8, threshold: f64) -> LgbModel {
    LgbModel {
        num_class: 1,
        num_tree_per_iteration: 1,
        max_feature_idx: 1,
        objective: "binary sigmoid:1".into(),
        trees: vec![LgbTree {
            num_leaves: 2,
            split_feature: vec![1],
            threshold: vec![threshold],
            decision_type: vec![decision_type],
            left_child: vec![-1],
            right_child: vec![-2],
            leaf_value: vec![-0.5, 0.75],
            is_linear: false,
            shrinkage: 1.0,
        }],
    }
}

#[test]
fn missing_value_mapping() {
    let o = ExportOptions::default();
    // NaN type, default left
    let a = ensemble_attributes(&stump(2 | 8, 0.5), &o).unwrap();
    assert_eq!(a.nodes_missing_value_tracks_true[0], 1);
    // NaN type, default right
    let a = ensemble_attributes(&stump(8, 0.5), &o).unwrap();
    assert_eq!(a.nodes_missing_value_tracks_true[0], 0);
    // None type: follows 0.0 <= t
    let a = ensemble_attributes(&stump(0, 0.5), &o).unwrap();
    assert_eq!(a.nodes_missing_value_tracks_true[0], 1);
    let a = ensemble_attributes(&stump(2, -0.5), &o).unwrap();
    assert_eq!(a.nodes_missing_value_tracks_true[0], 0);
    assert!(matches!(
        ensemble_attributes(&stump(4, 0.5), &o),
        Err(ExportError::MissingZero { .. })
    ));
    assert!(matches!(
        ensemble_attributes(&stump(1, 0.5), &o),
        Err(ExportError::Categorical { .. })
    ));
    assert!(matches!(
        ensemble_attributes(&stump(12, 0.5), &o),
        Err(ExportError::BadSplit { .. })
    ));
    let mut m = stump(8, 0.5);
    m.num_class = 3;
    m.num_tree_per_iteration = 3;
    assert!(matches!(
        ensemble_attributes(&m, &o),
        Err(ExportError::Multiclass { .. })
    ));
    let mut m = stump(8, 0.5);
    m.trees[0].is_linear = true;
    assert!(matches!(
        ensemble_attributes(&m, &o),
        Err(ExportError::LinearTree { .. })
    ));
    let mut m = stump(8, 0.5);
    m.objective = "multiclassova num_class:3".into();
    assert!(matches!(
        ensemble_attributes(&m, &o),
        Err(ExportError::Objective(_))
    ));
    let mut m = stump(8, 0.5);
    m.objective = "regression".into();
    assert!(ensemble_attributes(&m, &o).is_ok(), "regression exports");
    let mut m = stump(8, 0.5);
    m.objective = "binary sigmoid:2".into();
    assert!(matches!(
        ensemble_attributes(&m, &o),
        Err(ExportError::Objective(_))
    ));
    let mut m = stump(8, 0.5);
    m.trees[0].right_child = vec![-3];
    assert!(matches!(
        ensemble_attributes(&m, &o),
        Err(ExportError::Malformed { .. })
    ));
}

#[test]
fn exported_bytes_run_in_tract() {
    let mut m = stump(8 | 2, 0.1);
    // add a single-leaf tree
    m.trees.push(LgbTree {
        num_leaves: 1,
        leaf_value: vec![0.25],
        shrinkage: 1.0,
        ..Default::default()
    });
    let bytes = export_onnx(&m).unwrap();
    let plan = crate::op::load_model(&bytes).unwrap();
    assert_eq!(plan.n_features(), 2);
    let t32 = f32_round_down(0.1);
    let rows = [
        0.0,
        t32,
        0.0,
        next_up(t32),
        0.0,
        f32::NAN,
        9.0,
        f32::NEG_INFINITY,
    ];
    let all = crate::op::run_all(&plan, &rows, 4).unwrap();
    assert_eq!(all[0], vec![-0.25, 1.0, -0.25, -0.25]);
    let p = crate::op::run(&plan, &rows, 4).unwrap();
    for (p, m) in p.iter().zip(&all[0]) {
        let want = 1.0 / (1.0 + (-f64::from(*m)).exp());
        assert!((f64::from(*p) - want).abs() < 1e-6, "{p} vs {want}");
    }
    assert!(crate::op::run(&plan, &rows, 3).is_err());
    assert!(crate::op::load_model(&b"not onnx"[..]).is_err());
}
