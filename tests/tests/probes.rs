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
