//! A disk that fills up and frees again: the writer drops, counts and says
//! so while writes fail, never blocks the request path, and resumes.

use std::io::Write;
use std::sync::atomic::AtomicBool;

use super::*;
use crate::wal::{WalFile, WalOpener};

/// A real file whose writes fail with ENOSPC while `full` is set.
struct Filling {
    file: std::fs::File,
    full: Arc<AtomicBool>,
}

impl Write for Filling {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.full.load(Ordering::SeqCst) {
            return Err(std::io::Error::from_raw_os_error(28)); // ENOSPC
        }
        self.file.write(buf)
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

fn filling_opener(full: Arc<AtomicBool>) -> WalOpener {
    Arc::new(move |path: &Path| {
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(path)?;
        Ok(Box::new(Filling {
            file,
            full: full.clone(),
        }) as Box<dyn WalFile>)
    })
}

#[test]
fn a_full_disk_drops_counted_and_logging_resumes_when_it_frees() {
    let tmp = TempDir::new("disk-full");
    let c = clock();
    let full = Arc::new(AtomicBool::new(false));
    let log =
        DecisionLog::start_with_opener(cfg(tmp.path()), c.clone(), filling_opener(full.clone()))
            .unwrap();
    for i in 0..5 {
        assert!(log.log_decision(decision(i, 2)));
    }
    wait_until("5 appended", || log.stats().open_rows == 5);

    full.store(true, Ordering::SeqCst);
    for i in 5..10 {
        // The request path never waits on the disk.
        assert!(log.log_decision(decision(i, 2)));
    }
    wait_until("the failure noticed", || {
        let st = log.stats();
        st.writes_failing == 1 && st.dropped == 5
    });
    // Until the retry is due nothing is tried: drained records are dropped.
    for i in 10..13 {
        assert!(log.log_decision(decision(i, 2)));
    }
    wait_until("dropped while failing", || log.stats().dropped == 8);
    assert_eq!(log.stats().write_errors, 1, "{:?}", log.stats());

    full.store(false, Ordering::SeqCst);
    c.advance(worker::WRITE_RETRY_MS);
    for i in 13..16 {
        assert!(log.log_decision(decision(i, 2)));
    }
    wait_until("resumed", || {
        let st = log.stats();
        st.writes_failing == 0 && st.open_rows == 3
    });
    log.shutdown().unwrap_err(); // the failure is reported at shutdown
    let d = read_dir(&tmp.path().join("decisions"), LogKind::Decisions).unwrap();
    assert_eq!(d.rows, 3 * 2, "written after the disk freed");
    // The write-ahead file cut off by the failure is compacted at the next start.
    let again = start(cfg(tmp.path()), &c);
    assert_eq!(again.stats().recovered, 1);
    again.shutdown().unwrap();
    let d = read_dir(&tmp.path().join("decisions"), LogKind::Decisions).unwrap();
    assert_eq!(
        d.rows,
        (5 + 3) * 2,
        "nothing written before the failure lost"
    );
}
