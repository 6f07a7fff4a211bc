//! Unit tests of `compare_bootstrap.rs`.
use super::*;

#[test]
fn percentiles_interpolate_between_order_statistics() {
    let xs = [1.0, 2.0, 3.0, 4.0, 5.0];
    assert_eq!(quantile(&xs, 0.5), Some(3.0));
    assert_eq!(quantile(&xs, 0.0), Some(1.0));
    assert_eq!(quantile(&xs, 1.0), Some(5.0));
    assert!((quantile(&xs, 0.025).unwrap() - 1.1).abs() < 1e-12);
    assert!((quantile(&xs, 0.975).unwrap() - 4.9).abs() < 1e-12);
    assert_eq!(quantile(&[], 0.5), None);
    let ci = interval(vec![5.0, 1.0, 4.0, 2.0, 3.0]).unwrap();
    assert!((ci.low - 1.1).abs() < 1e-12 && (ci.high - 4.9).abs() < 1e-12);
}

#[test]
fn no_weight_in_a_resample_leaves_snips_out_not_zero() {
    // A never agrees with the log: no SNIPS, but DR (the direct method) is defined.
    let c = [
        [
            Contribution {
                w: 0.0,
                wy: 0.0,
                dr: 3.0,
            },
            Contribution {
                w: 2.0,
                wy: 4.0,
                dr: 2.0,
            },
        ],
        [
            Contribution {
                w: 0.0,
                wy: 0.0,
                dr: 5.0,
            },
            Contribution {
                w: 2.0,
                wy: 8.0,
                dr: 4.0,
            },
        ],
    ];
    let i = intervals(&c, 100, 1);
    assert_eq!((i.a.snips, i.diff.snips), (None, None));
    let b = i.b.snips.unwrap();
    assert!(b.low >= 2.0 && b.high <= 4.0, "{b:?}");
    let d = i.a.dr.unwrap();
    assert!(d.low >= 3.0 && d.high <= 5.0, "{d:?}");
    assert_eq!(intervals(&c, 0, 1), Intervals::default());
    assert_eq!(intervals(&[], 100, 1), Intervals::default());
}

#[test]
fn verdict_without_an_estimate_says_so() {
    let v = Verdict::new(None, None, 1_000, &[]);
    assert_eq!(v.outcome, VerdictOutcome::Undetermined);
    assert!(
        v.text.starts_with("none: no off-policy estimate"),
        "{}",
        v.text
    );
    let v = Verdict::new(Some(0.5), None, 0, &[]);
    assert_eq!(
        v.text,
        "none without the bootstrap (--bootstrap 0); DR B - A: 0.500 ms"
    );
    let raised = Verdict::new(
        Some(0.5),
        Some(Interval {
            low: 0.25,
            high: 0.75,
        }),
        1_000,
        &[("B", 12.34)],
    );
    assert_eq!(
        raised.text,
        "B raises DR mean latency by 0.500 ms (95% CI 0.250 to 0.750 ms); weak: B's (ESS 12.3) estimate rests on few agreeing outcomes"
    );
}
