//! The `trainer` binary: help text, the four subcommands end to end, exit
//! codes (2 on a parity failure), and error messages for bad input.

mod common;

use std::path::Path;
use std::process::{Command, Output};

use common::TempDir;

fn trainer(args: &[&str], cwd: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_trainer"))
        .args(args)
        .current_dir(cwd)
        .output()
        .expect("run trainer")
}

/// Asserts `o` exited with `code` and its stderr contains `needle`.
fn assert_fails(o: &Output, code: i32, needle: &str) {
    assert_eq!(o.status.code(), Some(code), "{}", text(o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains(needle),
        "stderr lacks {needle:?}: {}",
        text(o)
    );
}

fn text(o: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn help_documents_every_subcommand_and_unit() {
    let tmp = TempDir::new("help");
    let o = trainer(&["--help"], tmp.path());
    assert!(o.status.success(), "{}", text(&o));
    let s = String::from_utf8_lossy(&o.stdout);
    for sub in ["train", "validate", "compare", "synth"] {
        assert!(s.contains(sub), "{s}");
    }
    let o = trainer(&["train", "--help"], tmp.path());
    let s = String::from_utf8_lossy(&o.stdout).to_string();
    for flag in [
        "--logs",
        "--out",
        "--seed",
        "--num-trees",
        "--max-depth",
        "--learning-rate",
        "--valid-fraction",
        "--failure-penalty-ms",
        "--slow-factor",
        "--max-weight",
        "milliseconds",
        "[default: 50]",
        "[default: 0.2]",
        "[default: 1000]",
        "[default: 10]",
    ] {
        assert!(s.contains(flag), "train --help lacks {flag}:\n{s}");
    }
    let o = trainer(&["compare", "--help"], tmp.path());
    let s = String::from_utf8_lossy(&o.stdout).to_string();
    for flag in [
        "--a",
        "--b",
        "--logs",
        "--clip",
        "compare.json",
        "--bootstrap <N>",
        "[default: 1000]",
        "--seed <N>",
        "[default: 42]",
        "95% confidence intervals",
    ] {
        assert!(s.contains(flag), "compare --help lacks {flag}:\n{s}");
    }
    let o = trainer(&["synth", "--help"], tmp.path());
    let s = String::from_utf8_lossy(&o.stdout).to_string();
    for flag in ["--rows", "--seed", "--out", "--temperature"] {
        assert!(s.contains(flag), "synth --help lacks {flag}:\n{s}");
    }
}

#[test]
fn cli_end_to_end_and_parity_failures_exit_non_zero() {
    let tmp = TempDir::new("cli");
    let d = tmp.path();
    let o = trainer(
        &["synth", "--out", "logs", "--rows", "3000", "--seed", "4"],
        d,
    );
    assert!(o.status.success(), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("wrote 3000 decisions"));

    let o = trainer(
        &[
            "train",
            "--logs",
            "logs",
            "--out",
            "models/m1",
            "--num-trees",
            "15",
            "--seed",
            "3",
        ],
        d,
    );
    assert!(o.status.success(), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout).to_string();
    for s in [
        "with a target",
        "failures",
        "target ln(latency/E)",
        "parity validation",
        "parity golden",
        "MAE(log)",
        "rules PUT",
        "model_version m1-",
    ] {
        assert!(out.contains(s), "train output lacks {s}:\n{out}");
    }
    let o = trainer(
        &[
            "train",
            "--logs",
            "logs",
            "--out",
            "models/m2",
            "--num-trees",
            "5",
            "--max-depth",
            "3",
        ],
        d,
    );
    assert!(o.status.success(), "{}", text(&o));

    let o = trainer(
        &[
            "validate",
            "--model",
            "models/m1",
            "--logs",
            "logs",
            "--json",
            "v.json",
        ],
        d,
    );
    assert!(o.status.success(), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(
        out.contains("parity OK") && out.contains("share above"),
        "{out}"
    );
    let v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(d.join("v.json")).unwrap()).unwrap();
    let mae = |who: &str| v["metrics"][who]["mae_log"].as_f64().unwrap();
    assert!(mae("model") < 0.8 * mae("rules"), "{v}");

    // Found by a fresh-eyes run: a model with no golden rows passed
    // `validate` and `compare` though the service refuses it; now both
    // refuse it with the service's reason (exit 2: must not ship).
    let nogolden = d.join("models/nogolden");
    std::fs::create_dir_all(&nogolden).unwrap();
    for f in ["model.onnx", "model.txt", "card.json"] {
        std::fs::copy(d.join("models/m2").join(f), nogolden.join(f)).unwrap();
    }
    std::fs::write(nogolden.join("golden.json"), r#"{"rows": []}"#).unwrap();
    let o = trainer(&["validate", "--model", "models/nogolden"], d);
    assert_fails(
        &o,
        2,
        "the service would refuse this model: golden.json has no rows",
    );
    let o = trainer(
        &[
            "compare",
            "--a",
            "models/m1",
            "--b",
            "models/nogolden",
            "--logs",
            "logs",
        ],
        d,
    );
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(!d.join("compare.json").exists(), "nothing written");
    // A failed train into an existing model directory leaves it as it was
    // (found by a fresh-eyes run: model.onnx and model.txt were replaced
    // before golden.json failed).
    let hw = d.join("models/hw");
    std::fs::create_dir_all(hw.join("golden.json")).unwrap();
    for f in ["model.onnx", "model.txt", "card.json"] {
        std::fs::copy(d.join("models/m2").join(f), hw.join(f)).unwrap();
    }
    let o = trainer(
        &[
            "train",
            "--logs",
            "logs",
            "--out",
            "models/hw",
            "--num-trees",
            "7",
            "--seed",
            "8",
        ],
        d,
    );
    assert_fails(&o, 1, "not a regular file; nothing was written");
    for f in ["model.onnx", "model.txt", "card.json"] {
        assert_eq!(
            std::fs::read(hw.join(f)).unwrap(),
            std::fs::read(d.join("models/m2").join(f)).unwrap(),
            "{f} changed"
        );
    }
    let mut left: Vec<String> = std::fs::read_dir(&hw)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(
        left,
        ["card.json", "golden.json", "model.onnx", "model.txt"]
    );

    // The old classifier's thresholds are gone: a clear refusal.
    let o = trainer(
        &[
            "compare",
            "--a",
            "models/m1",
            "--b",
            "models/m2",
            "--logs",
            "logs",
            "--good-ms",
            "50",
        ],
        d,
    );
    assert!(!o.status.success(), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--good-ms"));
    // synth refuses a non-empty --out instead of mixing two runs.
    let o = trainer(
        &["synth", "--out", "logs", "--rows", "10", "--seed", "9"],
        d,
    );
    assert_fails(&o, 1, "is not empty");

    let o = trainer(
        &[
            "compare",
            "--a",
            "models/m1",
            "--b",
            "models/m2",
            "--logs",
            "logs",
        ],
        d,
    );
    assert!(o.status.success(), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout).to_string();
    for s in [
        "top-pick agreement",
        "Spearman",
        "IPS",
        "ESS",
        "95% CI, ms (bootstrap: 1000 resamples",
        "\nverdict: ",
        "compare.json",
    ] {
        assert!(out.contains(s), "compare output lacks {s}:\n{out}");
    }
    assert!(d.join("compare.json").is_file());

    // Tampered golden probability: exit 2, the row is printed.
    let g = d.join("models/m1/golden.json");
    let original = std::fs::read_to_string(&g).unwrap();
    let mut golden: scorer_model::GoldenFile = serde_json::from_str(&original).unwrap();
    golden.rows[3].prediction += 0.01;
    std::fs::write(&g, serde_json::to_string(&golden).unwrap()).unwrap();
    let o = trainer(&["validate", "--model", "models/m1"], d);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr).to_string();
    assert!(
        err.contains("parity check failed on golden row 3") && err.contains("cpu_usage ="),
        "{err}"
    );
    std::fs::write(&g, &original).unwrap();
    let o = trainer(&["validate", "--model", "models/m1"], d);
    assert!(o.status.success(), "{}", text(&o));

    // Tampered model: another model's ONNX under m1's card and golden rows.
    std::fs::copy(
        d.join("models/m2/model.onnx"),
        d.join("models/m1/model.onnx"),
    )
    .unwrap();
    let o = trainer(&["validate", "--model", "models/m1", "--logs", "logs"], d);
    assert_fails(&o, 2, "parity check failed");
    // compare refused it too (it labelled it by its card and compared the
    // other model's ONNX before).
    let o = trainer(
        &[
            "compare",
            "--a",
            "models/m2",
            "--b",
            "models/m1",
            "--logs",
            "logs",
            "--out",
            "c2.json",
        ],
        d,
    );
    assert_fails(&o, 2, "would refuse this model: golden row");
    assert!(!d.join("c2.json").exists());

    // Card of another feature schema: refused, exit 1.
    let card_path = d.join("models/m2/card.json");
    let card = std::fs::read_to_string(&card_path).unwrap();
    let hash = scorer_core::features::schema_hash();
    std::fs::write(&card_path, card.replace(hash, "0000000000000000")).unwrap();
    let o = trainer(&["validate", "--model", "models/m2"], d);
    assert_fails(&o, 1, "feature schema");
}

#[test]
fn cli_bad_inputs_are_errors_not_panics() {
    let tmp = TempDir::new("clibad");
    let d = tmp.path();
    std::fs::create_dir_all(d.join("empty")).unwrap();
    let cases: [(&[&str], &str); 8] = [
        (
            &["train", "--logs", "missing", "--out", "m"],
            "does not exist",
        ),
        (
            &["train", "--logs", "empty", "--out", "m"],
            "no decision rows",
        ),
        (&["validate", "--model", "missing"], "does not exist"),
        (
            &["compare", "--a", "x", "--b", "y", "--logs", "empty"],
            "does not exist",
        ),
        (&["synth", "--out", "s", "--rows", "0"], "--rows"),
        (
            &["synth", "--out", "s", "--rows", "5", "--candidates", "40"],
            "--candidates",
        ),
        (
            &[
                "synth",
                "--out",
                "s",
                "--rows",
                "5",
                "--workers",
                "4000000000",
            ],
            "--workers",
        ),
        (
            &[
                "compare",
                "--a",
                "x",
                "--b",
                "y",
                "--logs",
                "empty",
                "--slow-factor=0.5",
            ],
            "--slow-factor",
        ),
    ];
    for (args, needle) in cases {
        let o = trainer(args, d);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {}", text(&o));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(needle), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
    // clap rejects a missing required flag with its usage (exit 2 is clap's).
    let o = trainer(&["train", "--out", "m"], d);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("--logs"));
}
