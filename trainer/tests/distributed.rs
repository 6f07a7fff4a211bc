//! Data-parallel training on loopback: two `trainer train` processes, each
//! on its own half of the log files, joined by LightGBM's network, write
//! the same model, as good as one process on all the files.

mod common;

use std::net::TcpListener;
use std::path::Path;
use std::process::Command;

use common::{TempDir, synth};
use scorer_model::read_card;
use trainer::progress::Progress;
use trainer::validate::run_validate;

/// Largest difference in validation R² between the two-process model and
/// the one-process model on the same rows (measured: 0.0003 on 40 000
/// decisions; binning from each shard's sample moves split points a little).
const R2_TOLERANCE: f64 = 0.02;

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn shard(all: &Path, out: &Path, odd: bool) {
    std::fs::create_dir_all(out).unwrap();
    for f in trainer::dataset::list_log_files(&[all.to_path_buf()], scorer_log::LogKind::Decisions)
        .unwrap()
        .into_iter()
        .chain(
            trainer::dataset::list_log_files(&[all.to_path_buf()], scorer_log::LogKind::Outcomes)
                .unwrap(),
        )
    {
        let name = f.file_name().unwrap().to_string_lossy().into_owned();
        let seq: u64 = name
            .rsplit('-')
            .next()
            .unwrap()
            .trim_end_matches(".parquet")
            .parse()
            .unwrap();
        if (seq % 2 == 1) == odd {
            std::fs::copy(&f, out.join(&name)).unwrap();
        }
    }
}

#[test]
fn two_ranks_on_loopback_write_one_model_as_good_as_one_process() {
    let tmp = TempDir::new("distributed");
    let all = tmp.join("all");
    synth(&all, 10_000, 21);
    shard(&all, &tmp.join("a"), true);
    shard(&all, &tmp.join("b"), false);
    let machines = format!("127.0.0.1:{},127.0.0.1:{}", free_port(), free_port());
    let rank = |r: usize, logs: &str, out: &str| {
        Command::new(env!("CARGO_BIN_EXE_trainer"))
            .args([
                "--quiet",
                "train",
                "--logs",
                logs,
                "--out",
                out,
                "--num-trees",
                "20",
            ])
            .args(["--machines", &machines, "--rank", &r.to_string()])
            .args(["--network-timeout-minutes", "1"])
            .current_dir(tmp.path())
            .spawn()
            .unwrap()
    };
    let mut r0 = rank(0, "a", "m0");
    let mut r1 = rank(1, "b", "m1");
    assert!(r0.wait().unwrap().success());
    assert!(r1.wait().unwrap().success());

    let text = |m: &str| std::fs::read_to_string(tmp.join(m).join("model.txt")).unwrap();
    assert_eq!(text("m0"), text("m1"), "both ranks grew the same trees");
    let card = read_card(&tmp.join("m0")).unwrap();
    assert_eq!(card.details["distributed"]["rank"], 0);
    assert_eq!(card.details["lightgbm_params"]["tree_learner"], "data");
    assert_eq!(card.details["lightgbm_params"]["num_machines"], 2);
    let shard_rows = card.details["training_data"]["decision_rows"]
        .as_u64()
        .unwrap();
    assert!(
        shard_rows < 40_000 * 3 / 4,
        "rank 0 read its half: {shard_rows}"
    );

    let single = Command::new(env!("CARGO_BIN_EXE_trainer"))
        .args([
            "--quiet",
            "train",
            "--logs",
            "a",
            "--logs",
            "b",
            "--out",
            "one",
            "--num-trees",
            "20",
        ])
        .current_dir(tmp.path())
        .status()
        .unwrap();
    assert!(single.success());
    let r2 = |m: &str| {
        let v = run_validate(&tmp.join(m), std::slice::from_ref(&all), Progress::hidden()).unwrap();
        v.metrics.unwrap().model.r2.unwrap()
    };
    let (two, one) = (r2("m0"), r2("one"));
    assert!(one > 0.3, "the one-process model learned: {one}");
    assert!(
        (two - one).abs() <= R2_TOLERANCE,
        "two ranks R² {two}, one process {one}"
    );
}
