//! Rolling: by rows, by age without traffic, at UTC midnight.

use super::*;

#[test]
fn rolls_by_rows_with_names_and_partitions() {
    let tmp = TempDir::new("rows");
    let c = clock();
    let config = LogConfig {
        max_rows: 10,
        ..cfg(tmp.path())
    };
    let log = start(config, &c);
    for i in 0..25 {
        assert!(log.log_decision(decision(i, 2)));
    }
    log.shutdown().unwrap();
    let dir = tmp.path().join("decisions");
    let names = names_under(&dir);
    // max_rows counts decisions: 10, 10 and 5 of them, 2 candidate rows each.
    let want: Vec<String> = (1..=3)
        .map(|s| format!("dt=2024-03-05/decisions-20240305T100000000Z-{s:06}.parquet"))
        .collect();
    assert_eq!(names, want);
    for (name, rows) in names.iter().zip([20, 20, 10]) {
        let f = read_file(&dir.join(name), LogKind::Decisions).unwrap();
        assert_eq!(f.rows, rows, "{name}");
    }
    assert_eq!(log.stats().files, 3);
    assert_eq!(log.stats().written_rows, 25);
}

#[test]
fn rolls_by_age_without_traffic() {
    let tmp = TempDir::new("age");
    let c = clock();
    let log = start(cfg(tmp.path()), &c);
    assert!(log.log_decision(decision(1, 3)));
    wait_until("first file open", || log.stats().open_rows == 1);
    assert_eq!(log.stats().files, 0);
    c.advance(60_000);
    wait_until("age roll", || log.stats().files == 1);
    assert_eq!(log.stats().open_rows, 0);
    assert!(log.log_decision(decision(2, 3)));
    wait_until("second file open", || log.stats().open_rows == 1);
    log.shutdown().unwrap();
    let names = names_under(&tmp.path().join("decisions"));
    assert_eq!(
        names,
        vec![
            "dt=2024-03-05/decisions-20240305T100000000Z-000001.parquet".to_string(),
            "dt=2024-03-05/decisions-20240305T100100000Z-000002.parquet".to_string(),
        ]
    );
}

#[test]
fn rolls_at_utc_midnight_into_new_partition() {
    let tmp = TempDir::new("midnight");
    // 23:59:59.990 on 2024-03-05.
    let c = Arc::new(ManualClock::new(0, T0 + 14 * 3_600_000 - 10));
    let log = start(cfg(tmp.path()), &c);
    assert!(log.log_decision(decision(1, 1)));
    wait_until("file open", || log.stats().open_rows == 1);
    c.advance(20);
    wait_until("day roll", || log.stats().files == 1);
    assert!(log.log_decision(decision(2, 1)));
    log.shutdown().unwrap();
    let names = names_under(&tmp.path().join("decisions"));
    assert_eq!(names.len(), 2);
    assert!(names[0].starts_with("dt=2024-03-05/decisions-20240305T235959990Z-"));
    assert!(names[1].starts_with("dt=2024-03-06/decisions-20240306T000000010Z-"));
}
