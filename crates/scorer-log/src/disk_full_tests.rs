//! A disk that fills up and frees again: the writer holds what it could
//! not write, in the same write-ahead file, never blocks the request path,
//! creates no new file while writes fail, and once they succeed writes it
//! all and compacts it at once — nothing accepted is lost.

use std::io::Write;

use super::*;
use crate::wal::{WalFile, WalOpener};
use scorer_core::clock::Clock;

/// A real file on a disk with `room` bytes left: a write past it writes
/// what fits, then fails with ENOSPC, as a full disk does.
struct Filling {
    file: std::fs::File,
    room: Arc<AtomicU64>,
}

impl Write for Filling {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let room = self.room.load(Ordering::SeqCst);
        let n = usize::try_from(room).unwrap_or(usize::MAX).min(buf.len());
        if n == 0 {
            return Err(std::io::Error::from_raw_os_error(28)); // ENOSPC
        }
        let n = self.file.write(&buf[..n])?;
        self.room.fetch_sub(n as u64, Ordering::SeqCst);
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.file.flush()
    }
}

impl WalFile for Filling {
    fn sync(&self, all: bool) -> std::io::Result<()> {
        self.file.sync(all)
    }
}

fn filling_opener(room: Arc<AtomicU64>) -> WalOpener {
    Arc::new(move |path: &Path| {
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(path)?;
        Ok(Box::new(Filling {
            file,
            room: room.clone(),
        }) as Box<dyn WalFile>)
    })
}

/// The write-ahead files under `root`.
fn wal_files(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "arrows") {
                out.push(p);
            }
        }
    }
    out
}

const FREE: u64 = u64::MAX;

#[test]
fn a_full_disk_holds_what_it_accepted_and_writes_it_all_once_it_frees() {
    let tmp = TempDir::new("disk-full");
    let decisions_dir = tmp.path().join("decisions");
    let c = clock();
    let room = Arc::new(AtomicU64::new(FREE));
    let log =
        DecisionLog::start_with_opener(cfg(tmp.path()), c.clone(), filling_opener(room.clone()))
            .unwrap();
    for i in 0..5 {
        assert!(log.log_decision(decision(i, 2)));
    }
    wait_until("5 appended", || log.stats().open_rows == 5);

    // 100 bytes left: the next batch is cut part-way.
    room.store(100, Ordering::SeqCst);
    for i in 5..10 {
        // The request path never waits on the disk.
        assert!(log.log_decision(decision(i, 2)));
    }
    wait_until("the failure noticed", || log.stats().writes_failing == 1);
    // Still failing at each retry: the same file, no new one.
    for tries in 2..5 {
        c.advance(worker::WRITE_RETRY_MS);
        wait_until("retried", || log.stats().write_errors == tries);
    }
    assert_eq!(wal_files(&decisions_dir).len(), 1, "one write-ahead file");
    for i in 10..13 {
        assert!(log.log_decision(decision(i, 2)), "queued meanwhile");
    }
    let st = log.stats();
    assert_eq!((st.dropped, st.writes_failing), (0, 1), "{st:?}");

    room.store(FREE, Ordering::SeqCst);
    c.advance(worker::WRITE_RETRY_MS);
    // Without a restart: the file that saw the failure is completed and
    // compacted at once, every row in it.
    wait_until("resumed and compacted", || {
        let st = log.stats();
        st.writes_failing == 0 && st.written_rows >= 10
    });
    let d = read_dir(&decisions_dir, LogKind::Decisions).unwrap();
    assert_eq!(d.rows, 10 * 2, "the rows before, at and after the cut");
    log.shutdown().unwrap_err(); // the failure is reported at shutdown
    let st = log.stats();
    assert_eq!((st.dropped, st.written_rows), (0, 13), "{st:?}");
    let again = start(cfg(tmp.path()), &c);
    let st = again.stats();
    assert_eq!((st.recovered, st.quarantined), (0, 0), "nothing left over");
    again.shutdown().unwrap();
    let d = read_dir(&decisions_dir, LogKind::Decisions).unwrap();
    assert_eq!(d.rows, 13 * 2, "nothing accepted lost");
}

#[test]
fn a_disk_full_before_a_files_first_byte_leaves_one_file_completed_later() {
    let tmp = TempDir::new("disk-full-new-file");
    let decisions_dir = tmp.path().join("decisions");
    let c = clock();
    let room = Arc::new(AtomicU64::new(0));
    let log =
        DecisionLog::start_with_opener(cfg(tmp.path()), c.clone(), filling_opener(room.clone()))
            .unwrap();
    assert!(log.log_decision(decision(0, 3)));
    wait_until("the failure noticed", || log.stats().writes_failing == 1);
    for tries in 2..6 {
        c.advance(worker::WRITE_RETRY_MS);
        wait_until("retried", || log.stats().write_errors == tries);
    }
    let wals = wal_files(&decisions_dir);
    assert_eq!(wals.len(), 1, "no new file per retry: {wals:?}");
    assert_eq!(std::fs::metadata(&wals[0]).unwrap().len(), 0);
    room.store(FREE, Ordering::SeqCst);
    c.advance(worker::WRITE_RETRY_MS);
    wait_until("compacted", || log.stats().written_rows == 1);
    assert!(wal_files(&decisions_dir).is_empty());
    assert_eq!(
        read_dir(&decisions_dir, LogKind::Decisions).unwrap().rows,
        3
    );
    log.shutdown().unwrap_err();
}

#[test]
fn a_shutdown_on_a_disk_still_full_counts_what_it_loses() {
    let tmp = TempDir::new("disk-full-shutdown");
    let c = clock();
    let room = Arc::new(AtomicU64::new(0));
    let log =
        DecisionLog::start_with_opener(cfg(tmp.path()), c.clone(), filling_opener(room.clone()))
            .unwrap();
    assert!(log.log_decision(decision(0, 2)));
    wait_until("the failure noticed", || log.stats().writes_failing == 1);
    for i in 1..4 {
        assert!(log.log_outcome(outcome(i, 0, 1.0)));
    }
    log.shutdown().unwrap_err();
    let st = log.stats();
    assert_eq!(
        st.dropped_service,
        1 + 3,
        "the held decision, the queued outcomes: {st:?}"
    );
}

#[test]
fn a_compaction_that_fails_is_tried_again_before_the_next_one() {
    let tmp = TempDir::new("compaction-retry");
    let decisions_dir = tmp.path().join("decisions");
    let c = clock();
    let config = LogConfig {
        max_rows: 1,
        ..cfg(tmp.path())
    };
    let log = start(config, &c);
    // Something in the way of the first file's Parquet output.
    let first = crate::naming::final_path(&decisions_dir, LogKind::Decisions, c.wall_ms(), 1);
    let blocker = crate::naming::inprogress_path(&first);
    std::fs::create_dir_all(&blocker).unwrap();
    assert!(log.log_decision(decision(0, 2)));
    wait_until("compaction failed", || log.stats().write_errors == 1);
    assert_eq!((log.stats().written_rows, log.stats().open_rows), (0, 1));
    assert_eq!(wal_files(&decisions_dir).len(), 1, "kept");

    std::fs::remove_dir(&blocker).unwrap();
    assert!(log.log_decision(decision(1, 2)));
    // Without a restart: the next roll compacts the earlier file first.
    wait_until("both compacted", || log.stats().written_rows == 2);
    assert_eq!(log.stats().open_rows, 0);
    assert!(wal_files(&decisions_dir).is_empty());
    log.shutdown().unwrap_err(); // the failure is reported at shutdown
    let d = read_dir(&decisions_dir, LogKind::Decisions).unwrap();
    assert_eq!(d.rows, 2 * 2);
}
