//! A stop request (SIGTERM) ends `trainer loop` cleanly between steps: the
//! wait for the next round ends at once, the process exits 0 after saying
//! so, and the models directory holds only complete models.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::{TempDir, synth};

#[test]
fn sigterm_between_rounds_stops_the_loop_cleanly() {
    let tmp = TempDir::new("loop-signal");
    let logs = tmp.join("logs");
    synth(&logs, 10_000, 7);
    let models = tmp.join("models");
    let mut child = Command::new(env!("CARGO_BIN_EXE_trainer"))
        .args(["--quiet", "loop", "--logs"])
        .arg(&logs)
        .arg("--models-dir")
        .arg(&models)
        // The next round would be an hour away.
        .args(["--every-s", "3600", "--window-decisions", "8000"])
        .args(["--bootstrap", "300"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    // Should the stop be ignored, the test fails instead of waiting an hour.
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    let guard = std::thread::spawn(move || {
        if done_rx.recv_timeout(Duration::from_secs(300)).is_err() {
            let _ = Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
        }
    });
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let first = lines.next().unwrap().unwrap();
    assert!(first.starts_with("round 1: promoted loop-"), "{first}");
    let stop = Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .unwrap();
    assert!(stop.success());
    let rest: Vec<String> = lines.map(Result::unwrap).collect();
    let status = child.wait().unwrap();
    let _ = done_tx.send(());
    guard.join().unwrap();
    assert_eq!(status.code(), Some(0), "{status:?}");
    assert_eq!(rest, vec!["stopped after 1 round".to_string()]);
    let names: Vec<String> = std::fs::read_dir(&models)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names.len(), 1, "{names:?}");
    assert!(names[0].starts_with("loop-"), "{names:?}");
    for f in trainer::promote::MODEL_FILES {
        assert!(models.join(&names[0]).join(f).is_file(), "{f}");
    }
}
