//! The committed `models/default/` stays valid: its card is for this
//! build's feature schema, its version names its ONNX bytes, its trees are
//! the size issue #6 assumes, and every golden row still comes out of the
//! service's ONNX path (tract) and LightGBM within 1e-5 of the stored
//! prediction. It predicts what the service reads, and was trained on the
//! harness's simulator logs, as its README says.

use std::path::PathBuf;

use scorer_model::card::{ONNX_FILE, PARITY_TOLERANCE, TEXT_FILE};
use scorer_model::{read_card, read_golden};
use trainer::progress::Progress;
use trainer::validate::run_validate;

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../models/default")
}

fn depth(tree: &scorer_model::LgbTree, node: i32) -> usize {
    if node < 0 {
        return 0;
    }
    let n = node as usize;
    1 + depth(tree, tree.left_child[n]).max(depth(tree, tree.right_child[n]))
}

#[test]
fn committed_default_model_passes_parity_on_its_golden_rows() {
    let d = dir();
    let s = run_validate(&d, &[], Progress::hidden()).unwrap();
    assert_eq!(s.parity.len(), 2);
    for p in &s.parity {
        assert!(p.rows >= 24, "{p:?}");
        assert!(p.max_abs_diff <= PARITY_TOLERANCE, "{p:?}");
    }

    let card = read_card(&d).unwrap();
    let onnx = std::fs::read(d.join(ONNX_FILE)).unwrap();
    assert_eq!(
        card.model_version,
        trainer::card::model_version("default", &onnx)
    );
    assert_eq!(
        card.feature_schema_hash,
        scorer_core::features::schema_hash()
    );
    assert_eq!(card.output, scorer_model::card::MODEL_OUTPUT);
    let data = &card.details["training_data"];
    assert_eq!(data["log_dirs"], serde_json::json!(["data/sim-logs"]));
    let files = data["decision_files"].as_array().expect("decision files");
    for s in [
        "compaction",
        "heterogeneous",
        "hidden-signal",
        "many-routers",
    ] {
        assert!(
            files.iter().any(|f| f
                .as_str()
                .is_some_and(|f| f.contains(&format!("/{s}/service-rules/")))),
            "{s} is not in the training data"
        );
    }
    assert_eq!(
        data["decisions_dropped"]["duplicate_ids"], 0,
        "every run's decisions count"
    );

    let text = std::fs::read_to_string(d.join(TEXT_FILE)).unwrap();
    let model = trainer::parse_model_text(&text).unwrap();
    assert_eq!(model.trees.len(), 50);
    assert_eq!(card.num_trees, 50);
    for t in &model.trees {
        assert!(t.num_leaves < 2 || depth(t, 0) <= 6);
    }

    let golden = read_golden(&d, 42).unwrap();
    let has = |k: &str| golden.rows.iter().any(|r| r.kind == k);
    for k in [
        "all_nan",
        "all_zero",
        "all_negative_zero",
        "all_inf",
        "all_neg_inf",
    ] {
        assert!(has(k), "{k}");
    }
    assert!(
        golden
            .rows
            .iter()
            .filter(|r| r.kind.starts_with("split_boundary"))
            .count()
            >= 20
    );
}
