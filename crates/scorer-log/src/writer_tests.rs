//! The writer channel's slot size.

use super::{DecisionRecord, Msg, OutcomeRecord};
use std::mem::size_of;

#[test]
fn a_channel_slot_is_a_pointer_not_a_record() {
    let (slot, record) = (size_of::<Msg>(), size_of::<DecisionRecord>());
    assert!(
        slot <= size_of::<OutcomeRecord>() + 8,
        "{slot} bytes per slot"
    );
    assert!(record > 2 * slot, "{record} bytes per record");
}

mod durable {
    use std::path::{Path, PathBuf};
    use std::sync::Arc;

    use crate::batch::{decisions_batch, outcomes_batch};
    use crate::wal::read_wal;
    use crate::{DecisionLog, LogConfig, LogKind, OutcomeRecord, read_dir};
    use scorer_core::clock::ManualClock;

    fn outcomes(n: usize) -> Vec<OutcomeRecord> {
        (0..n)
            .map(|i| OutcomeRecord {
                decision_id: format!("d-{i}"),
                worker_id: "w".into(),
                ts_ms: 1_700_000_000_000,
                latency_ms: 1.0,
                success: true,
                caller: None,
                cache_hit: None,
            })
            .collect()
    }

    fn wal_files(dir: &Path) -> Vec<PathBuf> {
        let mut out = Vec::new();
        for e in std::fs::read_dir(dir).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                out.extend(wal_files(&p));
            } else if p.extension().is_some_and(|x| x == "arrows") {
                out.push(p);
            }
        }
        out
    }

    #[test]
    fn a_durable_append_is_in_the_write_ahead_file_when_it_returns() {
        let root = tempfile::tempdir().unwrap();
        let cfg = LogConfig {
            dir: root.path().join("d"),
            ..LogConfig::default()
        };
        let outcomes_dir = cfg.resolved_outcomes_dir();
        let clock = Arc::new(ManualClock::new(1_000, 1_700_000_000_000));
        let log = DecisionLog::start(cfg, clock).unwrap();
        log.append_durable(LogKind::Outcomes, outcomes_batch(&outcomes(3)).unwrap())
            .unwrap();
        // Before any flush or shutdown: the rows are on disk already.
        let rows: usize = wal_files(&outcomes_dir)
            .iter()
            .flat_map(|p| read_wal(p).unwrap().0)
            .map(|b| b.num_rows())
            .sum();
        assert_eq!(rows, 3);
        // A batch of another kind's schema is refused, nothing written.
        let wrong = log.append_durable(LogKind::Decisions, outcomes_batch(&outcomes(2)).unwrap());
        assert!(wrong.is_err());
        log.append_durable(LogKind::Decisions, decisions_batch(&[]).unwrap())
            .unwrap();
        assert_eq!(log.stats().outcomes_logged, 3);
        log.shutdown().unwrap();
        assert_eq!(read_dir(&outcomes_dir, LogKind::Outcomes).unwrap().rows, 3);
        assert!(
            log.append_durable(LogKind::Outcomes, outcomes_batch(&outcomes(1)).unwrap())
                .is_err()
        );
    }
}
