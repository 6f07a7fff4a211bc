//! A stop request (Ctrl-C, SIGTERM) while training rows are spilled to
//! disk deletes the spill files before the trainer exits: no destructor
//! runs then, and at 10 M decisions they are gigabytes.

mod common;

use std::process::Command;
use std::time::{Duration, Instant};

use common::{TempDir, largest_row_group, synth};
use trainer::budget::{RUNTIME_RESERVE_BYTES, window_bytes};

fn spill_files(dir: &std::path::Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("trainer-"))
        .collect()
}

#[test]
fn ctrl_c_during_a_spilled_training_deletes_the_spill_files() {
    let tmp = TempDir::new("spill-signal");
    let logs = tmp.join("logs");
    synth(&logs, 3_000, 4);
    let spill = tmp.join("spill");
    std::fs::create_dir_all(&spill).unwrap();
    let largest = largest_row_group(std::slice::from_ref(&logs));
    // Room for the map and a row group, not for every row in memory (as in
    // tests/stream.rs): the training rows go to disk.
    let budget = window_bytes(largest) + RUNTIME_RESERVE_BYTES + 1_000_000;
    let mut child = Command::new(env!("CARGO_BIN_EXE_trainer"))
        .args(["--quiet", "train", "--logs"])
        .arg(&logs)
        .args(["--out"])
        .arg(tmp.join("model"))
        .args(["--memory-budget", &budget.to_string(), "--spill-dir"])
        .arg(&spill)
        // Long enough to be stopped: deep trees, many of them.
        .args([
            "--num-trees",
            "10000",
            "--max-depth",
            "30",
            "--num-leaves",
            "4096",
        ])
        .args(["--min-data-in-leaf", "1"])
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while spill_files(&spill).is_empty() {
        assert!(Instant::now() < deadline, "no spill file appeared");
        assert!(
            child.try_wait().unwrap().is_none(),
            "the trainer ended before spilling"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let stop = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(stop.success());
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130), "{status:?}");
    assert_eq!(
        spill_files(&spill),
        Vec::<String>::new(),
        "spill files left behind"
    );
}
