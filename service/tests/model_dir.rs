//! Model directories in the service: every golden row served within the
//! parity bar, broken directories refused with a reason while the rules keep
//! serving, and the shipped `models/default` vetted.

mod common;

use std::path::Path;

use common::WALL;
use common::model_fixture::{app_with, config, fixture, refusal, report};
use scorer_core::features::FEATURE_COUNT;
use scorer_model::card::{GOLDEN_FILE, ONNX_FILE, read_golden};
use scorer_model::fixture::write_model_dir;
use scorer_model::load_model_dir;
use serde_json::json;

#[test]
fn served_predictions_match_every_golden_row() {
    let fx = fixture("parity");
    let cfg = config(&fx.dir.join("v1")).model;
    let m = load_model_dir(&cfg.dir, &cfg, WALL).expect("vetted");
    let golden = read_golden(&cfg.dir, FEATURE_COUNT).expect("golden");
    let rows: Vec<f32> = golden.rows.iter().flat_map(|r| r.values()).collect();
    let mut out = Vec::new();
    m.runner
        .predict(&rows, golden.rows.len(), &mut out)
        .expect("predict");
    let mut worst = 0.0f64;
    for (r, p) in golden.rows.iter().zip(&out) {
        worst = worst.max((f64::from(*p) - r.prediction).abs());
    }
    assert!(worst <= 1e-5, "max |Δ prediction| {worst}");
    assert_eq!(m.golden_rows, 32);
    assert!(m.golden_max_abs_diff <= 1e-5);
}

#[tokio::test]
async fn broken_models_are_refused_with_a_reason_and_rules_keep_serving() {
    let fx = fixture("broken");
    let (reason, msg) = refusal(&fx.dir.join("absent"));
    assert_eq!(reason, "model_missing", "{msg}");

    let corrupt = fx.dir.join("corrupt");
    write_model_dir(&corrupt, &fx.models[0].1, "c", 5, 1).expect("fixture");
    std::fs::write(corrupt.join(ONNX_FILE), b"\x08\x07garbage").expect("write");
    let (reason, msg) = refusal(&corrupt);
    assert_eq!(reason, "model_error", "{msg}");
    assert!(msg.contains("model.onnx"), "{msg}");

    let schema = fx.dir.join("schema");
    write_model_dir(&schema, &fx.models[0].1, "s", 5, 1).expect("fixture");
    let card = std::fs::read_to_string(schema.join("card.json")).expect("card");
    let hash = scorer_core::features::schema_hash();
    std::fs::write(
        schema.join("card.json"),
        card.replace(hash, "0000000000000000"),
    )
    .expect("write");
    let (reason, msg) = refusal(&schema);
    assert_eq!(reason, "schema_mismatch", "{msg}");

    let nogolden = fx.dir.join("nogolden");
    write_model_dir(&nogolden, &fx.models[0].1, "g", 5, 1).expect("fixture");
    std::fs::remove_file(nogolden.join(GOLDEN_FILE)).expect("rm");
    let (reason, msg) = refusal(&nogolden);
    assert_eq!(reason, "model_error", "{msg}");
    assert!(msg.contains("golden.json"), "{msg}");

    // A model file that never ends (a device) is refused at once, not read.
    let endless = fx.dir.join("endless");
    write_model_dir(&endless, &fx.models[0].1, "e", 5, 1).expect("fixture");
    std::fs::remove_file(endless.join(ONNX_FILE)).expect("rm");
    std::os::unix::fs::symlink("/dev/zero", endless.join(ONNX_FILE)).expect("symlink");
    let (reason, msg) = refusal(&endless);
    assert_eq!(reason, "model_error", "{msg}");
    assert!(msg.contains("not a regular file"), "{msg}");

    // A FIFO with no writer is refused at once too (it hung start-up, a
    // reload and the trainer, found by a fresh-eyes run): card, golden, ONNX.
    for file in [ONNX_FILE, "card.json", GOLDEN_FILE] {
        let piped = fx.dir.join(format!("fifo-{file}"));
        write_model_dir(&piped, &fx.models[0].1, "p", 5, 1).expect("fixture");
        std::fs::remove_file(piped.join(file)).expect("rm");
        let made = std::process::Command::new("mkfifo")
            .arg(piped.join(file))
            .status()
            .expect("mkfifo");
        assert!(made.success());
        let (reason, msg) = refusal(&piped);
        assert_eq!(reason, "model_error", "{file}: {msg}");
        assert!(msg.contains("not a regular file"), "{file}: {msg}");
    }

    // Golden rows that disagree with the model (another model's outputs).
    let wrong = fx.dir.join("wrong");
    write_model_dir(&wrong, &fx.models[0].1, "w", 5, 1).expect("fixture");
    std::fs::copy(fx.dir.join("v2").join(GOLDEN_FILE), wrong.join(GOLDEN_FILE)).expect("cp");
    let (reason, msg) = refusal(&wrong);
    assert_eq!(reason, "model_error", "{msg}");
    assert!(msg.contains("golden row"), "{msg}");

    let app = app_with(config(&corrupt));
    report(&app, &[("w1", 5.0)]).await;
    let (s, b) = app
        .post(
            "/v1/score",
            r#"{"key":"k","explain":true,"candidates":["w1"]}"#,
        )
        .await;
    assert_eq!(s, 200);
    assert_eq!(b["model"]["fallback_reason"], "model_error");
    let (_, m) = app.get("/v1/model").await;
    assert_eq!(m["used"], false);
    assert_eq!(m["primary"]["status"], "refused");
    assert_eq!(m["stats"]["fallbacks"][1], json!(["model_error", 1]));
}

#[test]
fn the_shipped_default_model_passes_its_golden_rows_in_the_service() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../models/default");
    let cfg = config(&dir).model;
    let m = load_model_dir(&dir, &cfg, WALL).expect("models/default is vetted by the service");
    assert_eq!(
        m.card.feature_schema_hash,
        scorer_core::features::schema_hash()
    );
    let golden = read_golden(&dir, FEATURE_COUNT).expect("golden");
    assert!(golden.rows.len() >= 24, "a few dozen golden rows");
    let rows: Vec<f32> = golden.rows.iter().flat_map(|r| r.values()).collect();
    let mut out = Vec::new();
    m.runner
        .predict(&rows, golden.rows.len(), &mut out)
        .expect("predict");
    for (r, p) in golden.rows.iter().zip(&out) {
        let (served, card) = (f64::from(*p), r.prediction);
        assert!(
            (served - card).abs() <= 1e-5,
            "{}: prediction {served} vs {card}",
            r.kind
        );
    }
}

#[test]
fn a_refused_reload_says_the_current_model_stays_not_rules_alone() {
    let fx = fixture("reload-log");
    let good = config(&fx.dir.join("v1")).model;
    let clock = std::sync::Arc::new(scorer_core::clock::ManualClock::new(0, WALL));
    let hub = scorer_model::ModelHub::load(&good, clock);
    let mut bad = good.clone();
    bad.dir = fx.dir.join("absent");
    let log = common::logs_of(tracing::Level::WARN, || {
        let r = hub.reload(&bad);
        assert!(!r.applied);
    });
    assert!(
        log.contains("model reload refused; keeping the current models"),
        "{log}"
    );
    assert!(
        log.contains("absent") && log.contains("role=\"primary\""),
        "{log}"
    );
    assert!(!log.contains("rules alone"), "{log}");
    // At start-up a refused model does leave the rules alone.
    let log = common::logs_of(tracing::Level::WARN, || {
        let clock = std::sync::Arc::new(scorer_core::clock::ManualClock::new(0, WALL));
        let _ = scorer_model::ModelHub::load(&bad, clock);
    });
    assert!(
        log.contains("model refused; scoring on rules alone"),
        "{log}"
    );
}
