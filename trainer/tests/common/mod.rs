//! Shared helpers of the trainer's integration tests.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use trainer::synth::{SynthConfig, write_logs};

/// A fresh empty directory under the system temp dir, removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> Self {
        static N: AtomicUsize = AtomicUsize::new(0);
        let p = std::env::temp_dir().join(format!(
            "trainer-test-{tag}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }

    pub fn join(&self, s: &str) -> PathBuf {
        self.0.join(s)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Writes `decisions` synthetic decisions with `seed` under `dir`.
pub fn synth(dir: &Path, decisions: usize, seed: u64) {
    let cfg = SynthConfig {
        decisions,
        seed,
        decisions_per_file: 2_500,
        ..SynthConfig::default()
    };
    write_logs(&cfg, dir, |_| {}).unwrap();
}

/// Uncompressed bytes of the largest row group of the decisions files
/// under `dirs`, from their footers.
pub fn largest_row_group(dirs: &[PathBuf]) -> u64 {
    use scorer_log::LogKind;
    use scorer_log::stream::{FileStream, Opened};
    trainer::dataset::list_log_files(dirs, LogKind::Decisions)
        .unwrap()
        .iter()
        .flat_map(|f| match FileStream::open(f, LogKind::Decisions).unwrap() {
            Opened::Stream(s) => s.row_groups().to_vec(),
            Opened::Mismatch(r) => panic!("{r}"),
        })
        .map(|g| g.uncompressed_bytes)
        .max()
        .unwrap()
}
