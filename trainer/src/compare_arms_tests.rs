use super::*;
use crate::dataset::Decision;

/// A table of one-candidate decisions: `(arm, latency ms, success)` each,
/// with the outcome joined.
fn table(rows: &[(&str, f64, bool)]) -> LogTable {
    let mut t = LogTable::default();
    for (i, &(arm, latency, ok)) in rows.iter().enumerate() {
        t.decisions.push(Decision {
            id: format!("d{i}"),
            ts_ms: i as i64,
            key_prefix: "user".into(),
            rows: i..i + 1,
            all_features: true,
            arm: Some(arm.into()),
            config_hash: format!("h-{arm}"),
            model_version: None,
        });
        t.decision_of.push(i);
        t.eligible.push(true);
        t.rule_score.push(50.0);
        t.probability.push(Some(1.0));
        t.picked.push(true);
        t.latency_ms.push(Some(latency));
        t.success.push(Some(ok));
    }
    t
}

#[test]
fn quantiles_are_numpys_linear_ones() {
    let mut xs: Vec<f64> = (1..=101).rev().map(f64::from).collect();
    assert_eq!(quantile(&mut xs, 0.5), 51.0);
    assert_eq!(quantile(&mut xs, 0.99), 100.0);
    let mut two = vec![4.0, 2.0];
    assert_eq!(quantile(&mut two, 0.25), 2.5);
}

#[test]
fn a_slower_canary_is_detected_with_its_interval() {
    let mut rows = Vec::new();
    for i in 0..400 {
        let jitter = f64::from(i % 10) / 10.0;
        rows.push(("stable", 2.0 + jitter, true));
        rows.push(("canary", 3.0 + jitter, i % 20 != 0));
    }
    let r = compare_arms(&table(&rows), ["stable", "canary"], None, 500, 7).expect("two arms");
    assert_eq!(r.arms[0].decisions, 400);
    assert_eq!(r.arms[1].failures, 20);
    assert_eq!(r.arms[1].error_rate, Some(0.05));
    assert_eq!(r.arms[0].config_hashes, ["h-stable"]);
    let d = r.mean_latency_ms.value.expect("both have outcomes");
    assert!((d - 1.0).abs() < 1e-9, "{d}");
    let ci = r.mean_latency_ms.interval.expect("bootstrapped");
    assert!(ci.low > 0.9 && ci.high < 1.1, "{ci:?}");
    assert!(
        r.verdict
            .starts_with("canary raises mean latency by 1.000 ms"),
        "{}",
        r.verdict
    );
    let e = r.error_rate.interval.expect("bootstrapped");
    assert!(e.low > 0.0, "{e:?}");
    // Same seed, same intervals.
    let again = compare_arms(&table(&rows), ["stable", "canary"], None, 500, 7).expect("two arms");
    assert_eq!(again, r);
}

#[test]
fn equal_arms_show_no_difference_and_no_bootstrap_no_interval() {
    let rows: Vec<(&str, f64, bool)> = (0..600)
        .map(|i| {
            (
                if i % 2 == 0 { "a" } else { "b" },
                1.0 + f64::from(i % 7),
                true,
            )
        })
        .collect();
    let r = compare_arms(&table(&rows), ["a", "b"], None, 300, 1).expect("two arms");
    assert!(
        r.verdict.starts_with("no detectable difference"),
        "{}",
        r.verdict
    );
    let r = compare_arms(&table(&rows), ["a", "b"], None, 0, 1).expect("two arms");
    assert_eq!(r.mean_latency_ms.interval, None);
    assert!(
        r.verdict.starts_with("none without the bootstrap"),
        "{}",
        r.verdict
    );
}

#[test]
fn an_arm_absent_from_the_logs_is_an_error_naming_the_arms_present() {
    let t = table(&[("stable", 1.0, true), ("canary", 1.0, true)]);
    let e = compare_arms(&t, ["a", "b"], None, 10, 1).expect_err("no arm a");
    assert_eq!(
        e.to_string(),
        "not enough data: no decision of arm `a` in the logs (arms present: canary, stable)"
    );
}

#[test]
fn two_canaries_in_one_log_are_compared_one_at_a_time() {
    let mut rows = Vec::new();
    for _ in 0..200 {
        rows.push(("stable", 2.0, true));
        rows.push(("canary", 3.0, true));
    }
    for _ in 0..200 {
        rows.push(("stable", 2.0, true));
        rows.push(("canary", 1.0, true));
    }
    let mut t = table(&rows);
    // The second canary ran a later, other candidate.
    for d in t.decisions.iter_mut().skip(400) {
        if d.arm.as_deref() == Some("canary") {
            d.config_hash = "h-second".into();
        }
    }
    let e = compare_arms(&t, ["stable", "canary"], None, 10, 1).expect_err("two canaries");
    assert_eq!(
        e.to_string(),
        "not enough data: arm `canary` spans 2 config hashes, each its own experiment: h-canary (200 decisions), h-second (200 decisions); choose one with --arm-hash"
    );
    let second = compare_arms(&t, ["stable", "canary"], Some("h-second"), 10, 1).expect("one");
    assert_eq!(
        (second.arms[0].decisions, second.arms[1].decisions),
        (199, 200)
    );
    assert_eq!(second.mean_latency_ms.value, Some(-1.0));
    let e = compare_arms(&t, ["stable", "canary"], Some("h-third"), 10, 1).expect_err("absent");
    assert!(
        e.to_string()
            .contains("no decision of arm `canary` with config hash h-third"),
        "{e}"
    );
}
