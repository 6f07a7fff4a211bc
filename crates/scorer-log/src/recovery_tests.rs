//! Crash recovery, the directory lock and the reader's checks.

use super::*;

/// Writes one valid decisions file of `n` decisions × 2 candidates; returns its path.
fn valid_file(tmp: &TempDir, n: usize) -> PathBuf {
    let c = clock();
    let root = tmp.path().join("source");
    let log = start(cfg(&root), &c);
    for i in 0..n {
        assert!(log.log_decision(decision(i, 2)));
    }
    log.shutdown().unwrap();
    let d = read_dir(&root.join("decisions"), LogKind::Decisions).unwrap();
    assert_eq!(d.files.len(), 1);
    d.files[0].clone()
}

#[test]
fn recovery_renames_complete_and_quarantines_broken_leftovers() {
    let tmp = TempDir::new("recovery");
    let src = valid_file(&tmp, 5);
    let bytes = std::fs::read(&src).unwrap();
    let root = tmp.path().join("svc");
    let part = root.join("decisions/dt=2024-03-05");
    std::fs::create_dir_all(&part).unwrap();
    let name = |s: u32| format!("decisions-20240305T090000000Z-{s:06}.parquet");
    std::fs::write(part.join(format!("{}.inprogress", name(1))), &bytes).unwrap();
    std::fs::write(
        part.join(format!("{}.inprogress", name(2))),
        &bytes[..bytes.len() - 1],
    )
    .unwrap();
    std::fs::write(part.join(format!("{}.inprogress", name(3))), b"").unwrap();

    let c = clock();
    let log = start(cfg(&root), &c);
    let st = log.stats();
    assert_eq!((st.recovered, st.quarantined), (1, 2));
    let dir = root.join("decisions");
    assert_eq!(
        names_under(&dir),
        vec![
            format!("dt=2024-03-05/{}", name(1)),
            format!("quarantine/{}.inprogress", name(2)),
            format!("quarantine/{}.inprogress", name(3)),
        ]
    );
    // New files continue past the highest existing sequence number.
    assert!(log.log_decision(decision(9, 2)));
    log.shutdown().unwrap();
    assert!(
        names_under(&dir)
            .iter()
            .any(|n| n.ends_with("decisions-20240305T100000000Z-000004.parquet"))
    );
    let d = read_dir(&dir, LogKind::Decisions).unwrap();
    assert_eq!(d.files.len(), 2);
    assert_eq!(d.rows, 5 * 2 + 2);
}

#[test]
fn recovery_quarantines_a_fifo_instead_of_blocking_on_it() {
    // Found by a fresh-eyes run: a FIFO named `*.parquet.inprogress` hung
    // start-up (opening it waited for a writer).
    let tmp = TempDir::new("recover-fifo");
    let root = tmp.path().join("r");
    std::fs::create_dir_all(&root).unwrap();
    let fifo = root.join("decisions-x-000001.parquet.inprogress");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    let report = recover_dir(&root).unwrap();
    assert!(report.recovered.is_empty());
    assert_eq!(report.quarantined.len(), 1);
    assert_eq!(
        report.quarantined[0].0,
        root.join("quarantine/decisions-x-000001.parquet.inprogress")
    );
    assert!(
        report.quarantined[0].1.contains("not a regular file"),
        "{}",
        report.quarantined[0].1
    );
}

#[test]
fn a_second_log_on_the_same_directory_is_refused_and_touches_nothing() {
    // Found by a fresh-eyes run: a second service on the same log.dir
    // quarantined the first one's open `.inprogress` file at start-up.
    let tmp = TempDir::new("second-writer");
    let c = clock();
    let first = start(cfg(tmp.path()), &c);
    assert!(first.log_decision(decision(1, 2)));
    // Stands for the first writer's open file: recovery would quarantine it.
    let open_file = tmp
        .path()
        .join("decisions/decisions-20240305T090000000Z-000001.parquet.inprogress");
    std::fs::write(&open_file, b"PAR1").unwrap();
    let before = names_under(tmp.path());
    match DecisionLog::start(cfg(tmp.path()), c.clone()) {
        Err(LogError::DirInUse { dir }) => {
            assert_eq!(
                dir,
                std::fs::canonicalize(tmp.path().join("decisions")).unwrap()
            );
        }
        other => panic!("expected DirInUse, got {:?}", other.map(|_| ())),
    }
    assert_eq!(names_under(tmp.path()), before, "nothing moved");
    std::fs::remove_file(&open_file).unwrap();
    first.shutdown().unwrap();
    let d = read_dir(&tmp.path().join("decisions"), LogKind::Decisions).unwrap();
    assert_eq!(d.rows, 2, "the first writer kept its rows");
    // Once the first writer has stopped, a new one may start.
    let again = start(cfg(tmp.path()), &c);
    again.shutdown().unwrap();
}

#[test]
fn recover_dir_reports_paths_and_reasons() {
    let tmp = TempDir::new("recover-fn");
    let root = tmp.path().join("r");
    std::fs::create_dir_all(root.join("dt=2024-03-05")).unwrap();
    std::fs::write(
        root.join("dt=2024-03-05/decisions-x-000001.parquet.inprogress"),
        b"PAR1 not really",
    )
    .unwrap();
    let report = recover_dir(&root).unwrap();
    assert!(report.recovered.is_empty());
    assert_eq!(report.quarantined.len(), 1);
    assert!(report.quarantined[0].0.starts_with(root.join("quarantine")));
    assert!(!report.quarantined[0].1.is_empty());
    // Missing root: nothing to do.
    assert_eq!(
        recover_dir(&tmp.path().join("missing")).unwrap(),
        RecoveryReport::default()
    );
}

#[test]
fn reader_names_unreadable_files() {
    let tmp = TempDir::new("reader-bad");
    let src = valid_file(&tmp, 3);
    let bytes = std::fs::read(&src).unwrap();
    let dir = tmp.path().join("bad");
    std::fs::create_dir_all(&dir).unwrap();
    let cases: [(&str, &[u8]); 4] = [
        ("decisions-a-000001.parquet", &bytes[..bytes.len() - 1]),
        ("decisions-b-000002.parquet", b""),
        (
            "decisions-c-000003.parquet",
            b"this is not parquet at all, just text",
        ),
        (
            "decisions-d-000004.parquet",
            &[b'P', b'A', b'R', b'1', 0, 0, 0, 0, b'P', b'A', b'R', b'1'],
        ),
    ];
    for (name, content) in cases {
        let path = dir.join(name);
        std::fs::write(&path, content).unwrap();
        match read_file(&path, LogKind::Decisions) {
            Err(ReadError::File { path: p, reason }) => {
                assert_eq!(p, path);
                assert!(!reason.is_empty());
            }
            other => panic!("{name}: expected ReadError::File, got {other:?}"),
        }
    }
    // Corrupt bytes in the middle of the data pages: an error or a clean read, never a panic.
    let mut flipped = bytes.clone();
    for b in flipped.iter_mut().skip(8).take(bytes.len() / 2) {
        *b ^= 0x5a;
    }
    let path = dir.join("decisions-e-000005.parquet");
    std::fs::write(&path, &flipped).unwrap();
    let _ = read_file(&path, LogKind::Decisions);
    // read_dir fails on the first bad file, naming it.
    match read_dir(&dir, LogKind::Decisions) {
        Err(ReadError::File { path, .. }) => {
            assert_eq!(path, dir.join("decisions-a-000001.parquet"))
        }
        other => panic!("expected ReadError::File, got {other:?}"),
    }
}

#[test]
fn reader_skips_other_feature_schema_versions_and_ignores_leftovers() {
    let tmp = TempDir::new("reader-version");
    let src = valid_file(&tmp, 4);
    let dir = tmp.path().join("mixed");
    std::fs::create_dir_all(dir.join("dt=2024-03-05")).unwrap();
    std::fs::create_dir_all(dir.join("quarantine")).unwrap();
    let good = dir.join("dt=2024-03-05/decisions-20240305T100000000Z-000001.parquet");
    std::fs::copy(&src, &good).unwrap();
    std::fs::copy(&src, dir.join("quarantine/decisions-q-000009.parquet")).unwrap();
    std::fs::copy(
        &src,
        dir.join("dt=2024-03-05/decisions-20240305T100000000Z-000003.parquet.inprogress"),
    )
    .unwrap();

    // Same columns, metadata feature_schema_version = "0".
    let base = decisions_schema();
    let mut meta = base.metadata().clone();
    meta.insert(META_FEATURE_SCHEMA_VERSION.to_string(), "0".to_string());
    let old_schema = Arc::new(base.as_ref().clone().with_metadata(meta));
    let batch = decisions_batch(&[decision(1, 2)]).unwrap();
    let batch = RecordBatch::try_new(old_schema.clone(), batch.columns().to_vec()).unwrap();
    let old = dir.join("dt=2024-03-05/decisions-20240305T100000000Z-000002.parquet");
    let mut w =
        ArrowWriter::try_new(std::fs::File::create(&old).unwrap(), old_schema, None).unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();

    let log = read_dir(&dir, LogKind::Decisions).unwrap();
    assert_eq!(log.files, vec![good]);
    assert_eq!(log.rows, 8);
    assert_eq!(log.skipped.len(), 1);
    assert_eq!(log.skipped[0].0, old);
    assert!(
        log.skipped[0].1.contains("feature_schema_version"),
        "{}",
        log.skipped[0].1
    );
    assert!(log.skipped[0].1.contains("\"0\""), "{}", log.skipped[0].1);
    // Outcomes reader ignores decisions files.
    assert_eq!(read_dir(&dir, LogKind::Outcomes).unwrap().rows, 0);
}

/// A write-ahead file of decisions `0..n` (2 candidates each) in two
/// batches, as a killed writer leaves it (not sealed), and where its
/// Parquet file goes.
fn crashed_wal(root: &Path, n: usize) -> (PathBuf, PathBuf) {
    let part = root.join("dt=2024-03-05");
    std::fs::create_dir_all(&part).unwrap();
    let final_path = part.join("decisions-20240305T090000000Z-000001.parquet");
    let wal = crate::naming::wal_path(&final_path);
    let mut w = crate::wal::WalWriter::create(
        &wal,
        &decisions_schema(),
        crate::config::FsyncPolicy::Roll,
        &crate::wal::file_opener(),
    )
    .unwrap();
    let recs: Vec<DecisionRecord> = (0..n).map(|i| decision(i, 2)).collect();
    let half = n / 2;
    w.append(&decisions_batch(&recs[..half]).unwrap()).unwrap();
    w.append(&decisions_batch(&recs[half..]).unwrap()).unwrap();
    drop(w);
    (wal, final_path)
}

#[test]
fn a_torn_write_ahead_tail_is_dropped_and_the_rest_compacted() {
    let tmp = TempDir::new("recover-torn");
    let root = tmp.path().join("decisions");
    let (wal, final_path) = crashed_wal(&root, 10);
    let bytes = std::fs::read(&wal).unwrap();
    std::fs::write(&wal, &bytes[..bytes.len() - 100]).unwrap();
    let report = recover_dir(&root).unwrap();
    assert_eq!(report.recovered, vec![final_path.clone()]);
    assert_eq!(report.torn.len(), 1, "{report:?}");
    assert!(report.quarantined.is_empty());
    assert!(!wal.exists());
    let d = read_dir(&root, LogKind::Decisions).unwrap();
    assert_eq!(d.rows, 5 * 2, "the first batch, whole");
}

#[test]
fn a_write_ahead_file_already_compacted_is_deleted_not_read_twice() {
    let tmp = TempDir::new("recover-dup");
    let root = tmp.path().join("decisions");
    let (wal, final_path) = crashed_wal(&root, 10);
    let copy = std::fs::read(&wal).unwrap();
    let props = crate::rolling::writer_properties(&LogConfig::default());
    crate::compact::compact(&wal, &final_path, LogKind::Decisions, &props)
        .unwrap()
        .unwrap();
    // The crash came after the rename, before the delete.
    std::fs::write(&wal, copy).unwrap();
    let report = recover_dir(&root).unwrap();
    assert!(report.recovered.is_empty() && report.quarantined.is_empty());
    assert!(!wal.exists());
    let d = read_dir(&root, LogKind::Decisions).unwrap();
    assert_eq!(d.rows, 10 * 2, "each decision once");
}

#[test]
fn a_compaction_cut_short_is_redone_from_the_write_ahead_file() {
    let tmp = TempDir::new("recover-redo");
    let root = tmp.path().join("decisions");
    let (wal, final_path) = crashed_wal(&root, 10);
    let partial = crate::naming::inprogress_path(&final_path);
    std::fs::write(&partial, b"PAR1 half a file").unwrap();
    let report = recover_dir(&root).unwrap();
    assert_eq!(report.recovered, vec![final_path]);
    assert!(report.quarantined.is_empty(), "{report:?}");
    assert!(!partial.exists() && !wal.exists());
    assert_eq!(read_dir(&root, LogKind::Decisions).unwrap().rows, 10 * 2);
}

#[test]
fn a_write_ahead_file_without_a_header_or_a_fifo_is_quarantined() {
    let tmp = TempDir::new("recover-bad-wal");
    let root = tmp.path().join("r");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(root.join(".decisions-x-000001.arrows"), b"junk").unwrap();
    let fifo = root.join(".decisions-x-000002.arrows");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    let report = recover_dir(&root).unwrap();
    assert!(report.recovered.is_empty());
    assert_eq!(report.quarantined.len(), 2, "{report:?}");
    assert!(root.join("quarantine/.decisions-x-000002.arrows").exists());
}

#[test]
fn a_write_ahead_file_of_an_older_layout_is_compacted_in_that_layout() {
    use crate::schema::{CACHE_HIT_COLUMN, outcomes_schema_v4};
    let tmp = TempDir::new("recover-v4");
    let root = tmp.path().join("outcomes");
    let part = root.join("dt=2024-03-05");
    std::fs::create_dir_all(&part).unwrap();
    let final_path = part.join("outcomes-20240305T090000000Z-000001.parquet");
    let wal = crate::naming::wal_path(&final_path);
    // Left by a writer of layout 4: outcomes without `cache_hit`.
    let v4 = outcomes_schema_v4();
    let mut w = crate::wal::WalWriter::create(
        &wal,
        &v4,
        crate::config::FsyncPolicy::Roll,
        &crate::wal::file_opener(),
    )
    .unwrap();
    let recs: Vec<OutcomeRecord> = (0..3)
        .map(|i| OutcomeRecord {
            decision_id: format!("d-{i}"),
            worker_id: "w".into(),
            ts_ms: 1_709_629_200_000,
            latency_ms: 1.0,
            success: true,
            caller: None,
            cache_hit: Some(true),
        })
        .collect();
    let full = crate::batch::outcomes_batch(&recs).unwrap();
    let columns = (0..v4.fields().len())
        .map(|i| full.column(i).clone())
        .collect();
    w.append(&RecordBatch::try_new(v4, columns).unwrap())
        .unwrap();
    drop(w);
    let report = recover_dir(&root).unwrap();
    assert_eq!(report.recovered, vec![final_path], "{report:?}");
    let o = read_dir(&root, LogKind::Outcomes).unwrap();
    assert!(o.skipped.is_empty(), "{:?}", o.skipped);
    assert_eq!(o.rows, 3);
    let hits = o.batches[0].column_by_name(CACHE_HIT_COLUMN).unwrap();
    assert_eq!(hits.null_count(), 3, "written before cache_hit");
}
