//! The outcome join keys on the caller too: an outcome joins only a
//! decision its own credential asked for.

use super::*;

#[test]
fn one_callers_outcome_never_overwrites_anothers() {
    let tmp = TempDir::new("callers");
    let c = clock();
    let log = start(cfg(tmp.path()), &c);
    // Decision 1 was asked for by edge-1, decision 2 by nobody.
    assert!(log.log_decision(decision(1, 2)));
    assert!(log.log_decision(decision(2, 2)));
    assert!(log.log_outcome(outcome(1, 0, 5.0)));
    assert!(log.log_outcome(outcome(2, 0, 6.0)));
    // Later, edge-2 reports failed day-long outcomes under both ids.
    for i in [1, 2] {
        let mut forged = outcome(i, 0, 86_400_000.0);
        forged.success = false;
        forged.caller = Some(std::sync::Arc::from("edge-2"));
        assert!(log.log_outcome(forged));
    }
    log.shutdown().unwrap();
    let d = read_dir(&tmp.path().join("decisions"), LogKind::Decisions).unwrap();
    let o = read_dir(&tmp.path().join("outcomes"), LogKind::Outcomes).unwrap();
    assert_eq!(o.rows, 4);
    let joined = join_outcomes(&d, &o).unwrap();
    let lat = joined.column_by_name("latency_ms").unwrap();
    let lat = lat.as_primitive::<Float64Type>();
    let picked: Vec<f64> = (0..joined.num_rows())
        .filter(|&r| lat.is_valid(r))
        .map(|r| lat.value(r))
        .collect();
    assert_eq!(picked, [5.0, 6.0]);
}
