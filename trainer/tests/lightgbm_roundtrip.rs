//! End-to-end checks against real LightGBM: text-model parsing and f64
//! evaluation, ONNX export run in tract, threshold rounding, fast evaluator.

use lightgbm3::{Booster, Dataset};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use scorer_model::FlatEnsemble;
use scorer_model::export::{
    ExportOptions, LgbModel, ThresholdRounding, ensemble_attributes, export_onnx, export_onnx_with,
    lightgbm_threshold_f32,
};
use trainer::{EvaluateF64, parse_model_text};

const F: usize = 42;

/// One synthetic row: feature kind = column % 7, plus an all-NaN last column.
fn gen_row(rng: &mut ChaCha8Rng) -> Vec<f32> {
    let mut r = vec![0f32; F];
    for (j, x) in r.iter_mut().enumerate() {
        *x = match j % 7 {
            0 => rng.random_range(-1.0f32..1.0) * 1e-3,
            1 => rng.random_range(0.0f32..1.0) * 1e5,
            2 => rng.random_range(0..20) as f32,
            3 => f32::from(rng.random_bool(0.3)),
            4 => {
                if rng.random_bool(0.7) {
                    0.0
                } else {
                    rng.random_range(-1.0f32..1.0)
                }
            }
            5 => {
                if rng.random_bool(0.3) {
                    f32::NAN
                } else {
                    rng.random_range(0.0f32..100.0)
                }
            }
            _ => {
                let v = rng.random_range(-3.0f32..3.0);
                if rng.random_bool(0.1) { -0.0 } else { v }
            }
        };
    }
    r[F - 1] = f32::NAN;
    r
}

fn label(r: &[f32], rng: &mut ChaCha8Rng) -> f32 {
    let nan_bonus = if r[5].is_nan() {
        1.0
    } else {
        (r[5] - 50.0) / 50.0
    };
    let z = r[0] * 1e3 + r[1] / 5e4 - 1.0 + (r[2] - 10.0) / 5.0 + r[3] * 1.5 - r[4] * 2.0
        + nan_bonus
        + r[6]
        + rng.random_range(-1.0f32..1.0);
    f32::from(z > 0.0)
}

struct Fixture {
    booster: Booster,
    model: LgbModel,
    text: String,
    random_rows: Vec<Vec<f32>>,
}

fn fixture() -> Fixture {
    let mut rng = ChaCha8Rng::seed_from_u64(20240611);
    let n = 2000;
    let mut x = Vec::with_capacity(n * F);
    let mut y = Vec::with_capacity(n);
    for _ in 0..n {
        let r = gen_row(&mut rng);
        y.push(label(&r, &mut rng));
        x.extend(r.iter().map(|v| f64::from(*v)));
    }
    // Dataset-level parameters are not passed by Dataset::from_slice: LightGBM defaults apply.
    let ds = Dataset::from_slice(&x, &y, F as i32, true).unwrap();
    let params = serde_json::json!({
        "objective": "binary",
        "num_iterations": 20,
        "num_leaves": 31,
        "learning_rate": 0.1,
        "deterministic": true,
        "force_row_wise": true,
        "num_threads": 1,
        "seed": 7,
        "verbose": -1,
    });
    let booster = Booster::train(ds, &params).unwrap();
    let text = booster.save_string().unwrap();
    let model = parse_model_text(&text).unwrap();
    let random_rows = (0..3000).map(|_| gen_row(&mut rng)).collect();
    Fixture {
        booster,
        model,
        text,
        random_rows,
    }
}

fn to_f64(rows: &[Vec<f32>]) -> Vec<f64> {
    rows.iter().flatten().map(|v| f64::from(*v)).collect()
}

/// Rows that reach split `s` of every tree, with the split's feature at the
/// rounded-down threshold and at the next f32 above it.
fn boundary_rows(model: &LgbModel, base: &[Vec<f32>]) -> Vec<Vec<f32>> {
    let mut rows = vec![];
    let mut k = 0;
    for tree in &model.trees {
        let n = tree.num_leaves.saturating_sub(1);
        let mut parent: Vec<Option<(usize, bool)>> = vec![None; n];
        for s in 0..n {
            if tree.left_child[s] >= 0 {
                parent[tree.left_child[s] as usize] = Some((s, true));
            }
            if tree.right_child[s] >= 0 {
                parent[tree.right_child[s] as usize] = Some((s, false));
            }
        }
        for s in 0..n {
            // Interval (lo, hi] per constrained feature along the path.
            let mut bounds = [(f64::NEG_INFINITY, f64::INFINITY); F];
            let mut constrained = [false; F];
            let mut cur = s;
            while let Some((p, left)) = parent[cur] {
                let f = tree.split_feature[p] as usize;
                let t = tree.threshold[p];
                constrained[f] = true;
                if left {
                    bounds[f].1 = bounds[f].1.min(t);
                } else {
                    bounds[f].0 = bounds[f].0.max(t);
                }
                cur = p;
            }
            let mut row = base[k % base.len()].clone();
            k += 1;
            for f in 0..F {
                if !constrained[f] {
                    continue;
                }
                let (lo, hi) = bounds[f];
                let v = f64::from(row[f]);
                if v.is_nan() || v <= lo || v > hi {
                    let cand = lightgbm_threshold_f32(hi, ThresholdRounding::Down);
                    row[f] = if hi.is_finite() && f64::from(cand) > lo {
                        cand
                    } else if lo.is_finite() {
                        lightgbm_threshold_f32(lo, ThresholdRounding::Down).next_up()
                    } else {
                        0.0
                    };
                }
            }
            let f = tree.split_feature[s] as usize;
            let t32 = lightgbm_threshold_f32(tree.threshold[s], ThresholdRounding::Down);
            for v in [t32, t32.next_up()] {
                let mut r = row.clone();
                r[f] = v;
                rows.push(r);
            }
        }
    }
    rows
}

fn special_rows(base: &[Vec<f32>]) -> Vec<Vec<f32>> {
    let specials = [
        f32::NAN,
        0.0,
        -0.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        1e-36,
        -1e-36,
    ];
    let mut rows = vec![];
    for (i, v) in specials.iter().enumerate() {
        rows.push(vec![*v; F]);
        for j in 0..F {
            let mut r = base[(i * F + j) % base.len()].clone();
            r[j] = *v;
            rows.push(r);
        }
    }
    rows
}

fn sigmoid(m: f64) -> f64 {
    1.0 / (1.0 + (-m).exp())
}

#[test]
fn lightgbm_parse_export_tract_roundtrip() {
    let fx = fixture();
    let m = &fx.model;
    assert_eq!(m.trees.len(), 20);
    assert_eq!(m.max_feature_idx, F - 1);
    let n_splits: usize = m.trees.iter().map(|t| t.num_leaves - 1).sum();
    let mut missing_types = [0usize; 4];
    for t in &m.trees {
        for d in &t.decision_type {
            missing_types[usize::from((d >> 2) & 3)] += 1;
        }
    }
    eprintln!("splits {n_splits}, missing types None/Zero/NaN: {missing_types:?}");
    assert!(
        missing_types[2] > 0,
        "the NaN column should produce NaN-type splits"
    );

    let mut rows: Vec<Vec<f32>> = fx.random_rows.clone();
    let special = special_rows(&fx.random_rows);
    let boundary = boundary_rows(m, &fx.random_rows);
    rows.extend(special.iter().cloned());
    rows.extend(boundary.iter().cloned());
    let n = rows.len();
    let flat64 = to_f64(&rows);
    let flat32: Vec<f32> = rows.iter().flatten().copied().collect();

    // (a) text model f64 evaluation == LightGBM raw scores, exactly.
    let raw = fx.booster.raw_scores(&flat64, F as i32, true).unwrap();
    let prob_lgb = fx.booster.predict(&flat64, F as i32, true).unwrap();
    assert_eq!(raw.len(), n);
    let mut max_raw_diff = 0f64;
    for (i, r) in flat64.chunks(F).enumerate() {
        let ours = m.evaluate_f64(r);
        max_raw_diff = max_raw_diff.max((ours - raw[i]).abs());
        assert!(
            (ours - raw[i]).abs() <= 1e-12,
            "row {i}: ours {ours} lightgbm {}",
            raw[i]
        );
        assert!((sigmoid(raw[i]) - prob_lgb[i]).abs() <= 1e-12);
    }
    eprintln!("(a) {n} rows: max |margin_f64 - lightgbm raw| = {max_raw_diff:e}");

    // Reloading the text model in LightGBM gives the same predictions (text is lossless).
    let reloaded = Booster::from_string(&fx.text).unwrap();
    assert_eq!(reloaded.raw_scores(&flat64, F as i32, true).unwrap(), raw);

    // (b) export -> ONNX bytes -> tract.
    let bytes = export_onnx(m).unwrap();
    let plan = scorer_model::load_model(&bytes).unwrap();
    assert_eq!(plan.n_features(), F);
    let outs = scorer_model::op::run_all(&plan, &flat32, n).unwrap();
    assert_eq!(plan.output_names(), ["margin", "probability"]);
    let (margin_tract, p_tract) = (&outs[0], &outs[1]);
    let mut max_dp = 0f64;
    let mut max_dmargin = 0f64;
    for i in 0..n {
        let dp = (f64::from(p_tract[i]) - prob_lgb[i]).abs();
        max_dp = max_dp.max(dp);
        max_dmargin = max_dmargin.max((f64::from(margin_tract[i]) - raw[i]).abs());
        assert!(
            dp <= 1e-5,
            "row {i}: tract p {} lightgbm p {} row {:?}",
            p_tract[i],
            prob_lgb[i],
            rows[i]
        );
    }
    let boundary_start = fx.random_rows.len() + special.len();
    eprintln!(
        "(b) {n} rows ({} random, {} special, {} boundary for {n_splits} splits): max |dp| = {max_dp:e}, max |d margin| = {max_dmargin:e}",
        fx.random_rows.len(),
        special.len(),
        boundary.len()
    );

    // (c) nearest rounding is wrong on boundary inputs.
    let nearest = export_onnx_with(
        m,
        &ExportOptions {
            rounding: ThresholdRounding::Nearest,
        },
    )
    .unwrap();
    let plan_nearest = scorer_model::load_model(&nearest).unwrap();
    let p_nearest = scorer_model::run(&plan_nearest, &flat32, n).unwrap();
    let mismatches: Vec<f64> = (boundary_start..n)
        .map(|i| (f64::from(p_nearest[i]) - prob_lgb[i]).abs())
        .filter(|d| *d > 1e-5)
        .collect();
    eprintln!(
        "(c) nearest rounding: {} of {} boundary rows off by > 1e-5 (max {:e})",
        mismatches.len(),
        boundary.len(),
        mismatches.iter().copied().fold(0.0, f64::max)
    );
    assert!(!mismatches.is_empty());

    // (d) fast evaluator == reference evaluator, bit for bit; and == tract's margin.
    let attrs = ensemble_attributes(m, &ExportOptions::default()).unwrap();
    let ens = FlatEnsemble::from_attributes(&attrs).unwrap();
    let mut fast = vec![0f32; n];
    ens.eval_batch(&flat32, &mut fast);
    for (i, r) in rows.iter().enumerate() {
        assert_eq!(
            fast[i].to_bits(),
            ens.eval_reference(r).to_bits(),
            "row {i}"
        );
        assert_eq!(fast[i].to_bits(), margin_tract[i].to_bits(), "row {i}");
    }
    // Single-row batches agree too.
    for (i, r) in rows.iter().enumerate().step_by(97) {
        let mut o = [0f32];
        ens.eval_batch(r, &mut o);
        assert_eq!(o[0].to_bits(), fast[i].to_bits());
    }
    eprintln!("(d) fast == reference == tract margin on {n} rows");
}
