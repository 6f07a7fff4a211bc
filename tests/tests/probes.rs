//! The install probes of `scripts/test.sh` (in `scripts/lib/probes.sh`),
//! run against fake directories: a probe that says "present" for a
//! near-miss skips an install that a fresh machine needs.

use std::path::{Path, PathBuf};
use std::process::Command;

fn probes() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/lib/probes.sh")
}

/// Runs `libclang_present DIR` in bash; true when the probe says present.
fn libclang_present(dir: &Path) -> bool {
    let status = Command::new("bash")
        .arg("-c")
        .arg(r#". "$0"; libclang_present "$1""#)
        .arg(probes())
        .arg(dir)
        .status()
        .expect("bash runs");
    status.success()
}

fn dir_with(files: &[&str]) -> tempfile::TempDir {
    let d = tempfile::tempdir().expect("temp dir");
    for f in files {
        std::fs::write(d.path().join(f), b"").expect("write");
    }
    d
}

#[test]
fn libclang_cpp_alone_is_missing() {
    // What the image ships without libclang-dev: bindgen cannot load it.
    let d = dir_with(&["libclang-cpp.so.14", "libclangAST.a"]);
    assert!(!libclang_present(d.path()));
}

#[test]
fn an_empty_directory_is_missing() {
    let d = dir_with(&[]);
    assert!(!libclang_present(d.path()));
}

#[test]
fn each_name_bindgen_loads_is_present() {
    for name in [
        "libclang.so",
        "libclang-14.so",
        "libclang.so.1",
        "libclang-14.so.1",
    ] {
        let d = dir_with(&["libclang-cpp.so.14", name]);
        assert!(libclang_present(d.path()), "{name}");
    }
}

/// Runs `binaries_fresh ROOT BIN...` in bash; true when it says fresh.
fn binaries_fresh(root: &Path, bins: &[PathBuf]) -> bool {
    Command::new("bash")
        .arg("-c")
        .arg(r#". "$0"; binaries_fresh "$@""#)
        .arg(probes())
        .arg(root)
        .args(bins)
        .status()
        .expect("bash runs")
        .success()
}

fn at(path: &Path, secs: u64) {
    let t = std::time::UNIX_EPOCH + std::time::Duration::from_secs(secs);
    std::fs::File::options()
        .write(true)
        .open(path)
        .and_then(|f| f.set_modified(t))
        .expect("set mtime");
}

/// A fake checkout: `src/lib.rs`, `Cargo.toml`, and two executables in
/// `target/release/`, all with the given mtimes (s).
fn checkout(source_s: u64, bins_s: u64) -> (tempfile::TempDir, Vec<PathBuf>) {
    let d = tempfile::tempdir().expect("temp dir");
    let root = d.path();
    std::fs::create_dir_all(root.join("src")).expect("src");
    std::fs::create_dir_all(root.join("target/release")).expect("target");
    for f in ["src/lib.rs", "Cargo.toml"] {
        std::fs::write(root.join(f), b"").expect("write");
        at(&root.join(f), source_s);
    }
    let bins: Vec<PathBuf> = ["service", "agent"]
        .iter()
        .map(|b| root.join("target/release").join(b))
        .collect();
    for b in &bins {
        std::fs::write(b, b"").expect("write");
        Command::new("chmod")
            .arg("+x")
            .arg(b)
            .status()
            .expect("chmod");
        at(b, bins_s);
    }
    (d, bins)
}

#[test]
fn release_binaries_newer_than_every_source_are_fresh() {
    let (d, bins) = checkout(1_000, 2_000);
    assert!(binaries_fresh(d.path(), &bins));
    // Build outputs under target/ newer than the binaries do not count.
    std::fs::write(d.path().join("target/release/build.rs"), b"").expect("write");
    assert!(binaries_fresh(d.path(), &bins));
}

#[test]
fn a_source_edited_after_the_build_or_a_missing_binary_is_stale() {
    let (d, bins) = checkout(1_000, 2_000);
    at(&d.path().join("src/lib.rs"), 3_000);
    assert!(!binaries_fresh(d.path(), &bins), "an edited source");
    let (d, mut bins) = checkout(1_000, 2_000);
    at(&bins[1], 500);
    assert!(!binaries_fresh(d.path(), &bins), "the older binary counts");
    bins.push(d.path().join("target/release/trainer"));
    assert!(!binaries_fresh(d.path(), &bins), "a missing binary");
}
