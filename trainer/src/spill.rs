//! Training rows on disk, as a LightGBM data file, when they do not fit
//! the memory budget.
//!
//! One row per line, tab-separated: the target, then the `FEATURE_COUNT`
//! features, each the exact value of its f32 (written as the shortest
//! decimal of the widened f64, in scientific notation, so LightGBM parses
//! back the very same number). The weights go one per line to
//! `<file>.weight`, which LightGBM reads beside a data file by itself (a
//! `weight_column` would stay in the model as an unused 43rd feature).
//! LightGBM loads the file in two rounds ([`dataset_params`]): a sample for
//! the bin boundaries, then the rows into bins, never the whole text or a
//! float matrix. Both are temporary files, deleted when the [`Spilled`] is
//! dropped.

use std::fmt::Write as _;
use std::io::{BufWriter, Write as _};
use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use tempfile::{NamedTempFile, TempPath};

use scorer_core::features::FEATURE_COUNT;

use crate::budget::LABELLED_ROW_BYTES;
use crate::dataset::Labelled;
use crate::error::{Result, TrainerError};
use crate::target::TargetCounts;

/// Spill files alive in this process, so that a stop request (Ctrl-C,
/// SIGTERM) can delete them before exiting: a drop never runs then.
static LIVE: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());

fn track(path: &Path) {
    if let Ok(mut live) = LIVE.lock() {
        live.push(path.to_path_buf());
    }
}

fn untrack(path: &Path) {
    if let Ok(mut live) = LIVE.lock() {
        live.retain(|p| p != path);
    }
}

/// Deletes every spill file of this process (for a stop request's
/// handler, just before it exits).
pub fn delete_live_files() {
    if let Ok(mut live) = LIVE.lock() {
        for p in live.drain(..) {
            let _ = std::fs::remove_file(p);
        }
    }
}

/// Keeps a spill file on the list [`delete_live_files`] empties, while
/// the owner (whose drop deletes the file) lives.
#[derive(Debug)]
struct Guard(PathBuf);

impl Guard {
    fn new(path: &Path) -> Self {
        track(path);
        Guard(path.to_path_buf())
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        untrack(&self.0);
    }
}

/// The dataset parameters LightGBM loads a spill file with; `pre_partition`
/// when several machines each load their own shard.
pub fn dataset_params(machines: usize) -> Value {
    let mut p = json!({
        "two_round": true,
        "header": false,
        "label_column": 0,
        "verbosity": -1,
    });
    if machines > 1 {
        p["pre_partition"] = true.into();
    }
    p
}

/// `<data>.weight`, where LightGBM looks for a data file's weights.
fn weight_path(data: &Path) -> PathBuf {
    let mut p = data.as_os_str().to_owned();
    p.push(".weight");
    PathBuf::from(p)
}

/// Training rows written to disk.
#[derive(Debug)]
pub struct Spilled {
    /// The data file (deleted on drop).
    pub path: TempPath,
    /// Its weights, `<path>.weight` (deleted on drop).
    pub weights: TempPath,
    _guards: [Guard; 2],
    /// Rows written.
    pub rows: usize,
    /// Bytes written (rows and weights).
    pub bytes: u64,
}

/// Writes training rows to a spill file.
pub(crate) struct SpillWriter {
    w: BufWriter<NamedTempFile>,
    weights: BufWriter<std::fs::File>,
    weights_path: TempPath,
    guards: [Guard; 2],
    dir: PathBuf,
    line: String,
    rows: usize,
    bytes: u64,
}

fn io(dir: &Path) -> impl Fn(std::io::Error) -> TrainerError + '_ {
    move |source| TrainerError::Io {
        path: dir.to_path_buf(),
        source,
    }
}

impl SpillWriter {
    /// A new spill file in `dir`.
    ///
    /// # Errors
    /// [`TrainerError::Io`] if the file cannot be created.
    pub(crate) fn create(dir: &Path) -> Result<Self> {
        let file = tempfile::Builder::new()
            .prefix("trainer-rows-")
            .suffix(".tsv")
            .tempfile_in(dir)
            .map_err(io(dir))?;
        let weights_file = weight_path(file.path());
        let weights = std::fs::File::create(&weights_file).map_err(io(dir))?;
        let weights_path = TempPath::try_from_path(weights_file).map_err(io(dir))?;
        let guards = [Guard::new(file.path()), Guard::new(&weights_path)];
        Ok(Self {
            w: BufWriter::with_capacity(1 << 20, file),
            weights: BufWriter::with_capacity(1 << 16, weights),
            weights_path,
            guards,
            dir: dir.to_path_buf(),
            line: String::with_capacity(1024),
            rows: 0,
            bytes: 0,
        })
    }

    /// Appends one row.
    ///
    /// # Errors
    /// [`TrainerError::Io`] (a full disk, typically).
    pub(crate) fn push(&mut self, target: f32, weight: f32, features: &[f32]) -> Result<()> {
        self.line.clear();
        let _ = write!(self.line, "{:e}", f64::from(target));
        for x in features {
            let _ = write!(self.line, "\t{:e}", f64::from(*x));
        }
        self.line.push('\n');
        self.w
            .write_all(self.line.as_bytes())
            .map_err(io(&self.dir))?;
        let w = format!("{:e}\n", f64::from(weight));
        self.weights
            .write_all(w.as_bytes())
            .map_err(io(&self.dir))?;
        self.bytes += w.len() as u64;
        self.rows += 1;
        self.bytes += self.line.len() as u64;
        Ok(())
    }

    /// Flushes and closes the file.
    ///
    /// # Errors
    /// [`TrainerError::Io`].
    pub(crate) fn finish(mut self) -> Result<Spilled> {
        let dir = self.dir;
        let file = self.w.into_inner().map_err(|e| io(&dir)(e.into_error()))?;
        file.as_file().sync_all().map_err(io(&dir))?;
        self.weights.flush().map_err(io(&dir))?;
        Ok(Spilled {
            path: file.into_temp_path(),
            weights: self.weights_path,
            _guards: self.guards,
            rows: self.rows,
            bytes: self.bytes,
        })
    }
}

/// Validation rows parked on disk while LightGBM trains, in their
/// in-memory layout (little-endian, [`LABELLED_ROW_BYTES`] a row), read
/// back for the validation step.
pub(crate) struct ParkWriter {
    w: BufWriter<NamedTempFile>,
    guard: Guard,
    dir: PathBuf,
    rows: usize,
}

/// Parked validation rows (the file is deleted on drop).
#[derive(Debug)]
pub struct Parked {
    file: NamedTempFile,
    _guard: Guard,
    rows: usize,
}

impl ParkWriter {
    /// A new file in `dir`.
    ///
    /// # Errors
    /// [`TrainerError::Io`].
    pub(crate) fn create(dir: &Path) -> Result<Self> {
        let file = tempfile::Builder::new()
            .prefix("trainer-validation-")
            .tempfile_in(dir)
            .map_err(io(dir))?;
        Ok(Self {
            guard: Guard::new(file.path()),
            w: BufWriter::with_capacity(1 << 20, file),
            dir: dir.to_path_buf(),
            rows: 0,
        })
    }

    /// Appends row `i` of `l`.
    ///
    /// # Errors
    /// [`TrainerError::Io`].
    pub(crate) fn push(&mut self, l: &Labelled, i: usize) -> Result<()> {
        let mut rec = Vec::with_capacity(LABELLED_ROW_BYTES as usize);
        for x in l.row(i) {
            rec.extend_from_slice(&x.to_le_bytes());
        }
        rec.extend_from_slice(&l.targets[i].to_le_bytes());
        rec.extend_from_slice(&l.weights[i].to_le_bytes());
        rec.push(u8::from(l.slow[i]));
        rec.extend_from_slice(&l.latency_ms[i].to_le_bytes());
        rec.extend_from_slice(&l.ts_ms[i].to_le_bytes());
        rec.extend_from_slice(&l.rule_score[i].to_le_bytes());
        self.w.write_all(&rec).map_err(io(&self.dir))?;
        self.rows += 1;
        Ok(())
    }

    /// Flushes the file.
    ///
    /// # Errors
    /// [`TrainerError::Io`].
    pub(crate) fn finish(self) -> Result<Parked> {
        let dir = self.dir;
        let file = self.w.into_inner().map_err(|e| io(&dir)(e.into_error()))?;
        Ok(Parked {
            file,
            _guard: self.guard,
            rows: self.rows,
        })
    }
}

impl Parked {
    /// Rows parked.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Reads the rows back (with `counts`), and deletes the file.
    ///
    /// # Errors
    /// [`TrainerError::Io`], or a file shorter than its rows.
    pub fn read(self, counts: TargetCounts) -> Result<Labelled> {
        use std::io::{Read as _, Seek as _};
        let path = self.file.path().to_path_buf();
        let mut f = self.file.reopen().map_err(io(&path))?;
        f.rewind().map_err(io(&path))?;
        let mut r = std::io::BufReader::with_capacity(1 << 20, f);
        let mut l = Labelled {
            features: Vec::with_capacity(self.rows * FEATURE_COUNT),
            targets: Vec::with_capacity(self.rows),
            weights: Vec::with_capacity(self.rows),
            slow: Vec::with_capacity(self.rows),
            latency_ms: Vec::with_capacity(self.rows),
            ts_ms: Vec::with_capacity(self.rows),
            rule_score: Vec::with_capacity(self.rows),
            counts,
        };
        let mut rec = vec![0u8; LABELLED_ROW_BYTES as usize];
        for _ in 0..self.rows {
            r.read_exact(&mut rec).map_err(io(&path))?;
            let (feats, rest) = rec.split_at(FEATURE_COUNT * 4);
            l.features.extend(
                feats
                    .chunks_exact(4)
                    .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])),
            );
            let f32_at =
                |o: usize| f32::from_le_bytes([rest[o], rest[o + 1], rest[o + 2], rest[o + 3]]);
            let b8 = |o: usize| -> [u8; 8] {
                let mut a = [0u8; 8];
                a.copy_from_slice(&rest[o..o + 8]);
                a
            };
            l.targets.push(f32_at(0));
            l.weights.push(f32_at(4));
            l.slow.push(rest[8] != 0);
            l.latency_ms.push(f64::from_le_bytes(b8(9)));
            l.ts_ms.push(i64::from_le_bytes(b8(17)));
            l.rule_score.push(f64::from_le_bytes(b8(25)));
        }
        Ok(l)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spill_line_reads_back_as_the_same_f32s_and_the_file_goes_with_its_owner() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = SpillWriter::create(dir.path()).unwrap();
        let features = [0.1f32, -0.0, 1e-30, 3.4e38, 7.0];
        w.push(-1.25, 10.0, &features).unwrap();
        w.push(0.5, 1.0, &features).unwrap();
        let s = w.finish().unwrap();
        assert_eq!(s.rows, 2);
        let text = std::fs::read_to_string(&s.path).unwrap();
        assert_eq!(text.len() as u64 + 8, s.bytes, "rows and weights");
        let first: Vec<f64> = text
            .lines()
            .next()
            .unwrap()
            .split('\t')
            .map(|v| v.parse().unwrap())
            .collect();
        assert_eq!(first[0], -1.25);
        let weights = std::fs::read_to_string(&s.weights).unwrap();
        assert_eq!(weights, "1e1\n1e0\n");
        for (x, y) in features.iter().zip(&first[1..]) {
            assert_eq!(f64::from(*x), *y, "exact");
            assert_eq!(x.to_bits(), (*y as f32).to_bits());
        }
        let (path, weights) = (s.path.to_path_buf(), s.weights.to_path_buf());
        assert_eq!(weights, weight_path(&path));
        drop(s);
        assert!(!path.exists() && !weights.exists());
    }

    #[test]
    fn parked_rows_read_back_bit_for_bit() {
        let dir = tempfile::tempdir().unwrap();
        let mut l = Labelled::default();
        for i in 0..3 {
            l.features
                .extend((0..FEATURE_COUNT).map(|j| (i * 100 + j) as f32 * 0.1));
            l.targets.push(i as f32 - 0.5);
            l.weights.push(1.5);
            l.slow.push(i == 1);
            l.latency_ms.push(0.1 + i as f64);
            l.ts_ms.push(1_700_000_000_000 + i as i64);
            l.rule_score.push(99.5);
        }
        let mut w = ParkWriter::create(dir.path()).unwrap();
        for i in 0..3 {
            w.push(&l, i).unwrap();
        }
        let parked = w.finish().unwrap();
        assert_eq!(parked.rows(), 3);
        let back = parked.read(TargetCounts::default()).unwrap();
        assert_eq!(back.features, l.features);
        assert_eq!(back.targets, l.targets);
        assert_eq!(back.weights, l.weights);
        assert_eq!(back.slow, l.slow);
        assert_eq!(back.latency_ms, l.latency_ms);
        assert_eq!(back.ts_ms, l.ts_ms);
        assert_eq!(back.rule_score, l.rule_score);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "deleted");
    }
}
