//! The `hidden-signal` preset: a slowdown that only a telemetry signal the
//! rules barely weigh (`memtable_bytes`) and the request type explain.
//!
//! Every worker reports a memtable that fills linearly and is reset by a
//! flush ([`super::Fault::Memtable`]). A quarter of the workers
//! ([`hidden_signal_affected`], 3 of 12, 2 of 8) fill to
//! [`MEMTABLE_PEAK_BYTES`] (4 GiB) over [`HIDDEN_SIGNAL_PERIOD_MS`] (20 s),
//! out of phase with each other; the others flush at
//! [`HEALTHY_MEMTABLE_PEAK_BYTES`] (256 MiB) every 5 s. On every worker a
//! PUT that starts while the memtable holds `m` GiB costs
//! × (1 + [`HIDDEN_SIGNAL_PUT_SLOWDOWN_PER_GIB`] × m) — up to 4× on an
//! affected worker just before its flush, at most 1.19× on the others —
//! and a GET costs what it always does. 30% of requests are PUTs.
//!
//! What the service's rules see: the worker's reported RTT (average and
//! p99 over every request it finished in the interval, GETs and PUTs
//! mixed, as in every scenario), CPU and queue, which rise and fall with
//! the cycle but cannot tell a PUT from a GET, and one flat rule on the
//! memtable itself (`scoring.memtable_deduct`, 5 points above
//! `scoring.memtable_high_bytes`, 2 GiB, for GETs and PUTs alike). The
//! baselines see in-flight counts and latencies only. A model that weighs
//! the memtable size with the request type can send PUTs elsewhere while an
//! affected worker's memtable is large, and keep its GETs.
//!
//! The cycle is a property of the workers, not a fault window, so its
//! times do not scale with the run's duration.

use super::{Fault, Scenario};

/// Size an affected worker's memtable reaches before its flush, bytes (4 GiB).
pub const MEMTABLE_PEAK_BYTES: u64 = 4 << 30;

/// Size at which the other workers flush, bytes (256 MiB).
pub const HEALTHY_MEMTABLE_PEAK_BYTES: u64 = 256 << 20;

/// Fill time of an affected worker's memtable, ms.
pub const HIDDEN_SIGNAL_PERIOD_MS: f64 = 20_000.0;

/// Fill time of the other workers' memtables, ms.
const HEALTHY_PERIOD_MS: f64 = 5_000.0;

/// PUT service-time increase per GiB of memtable (k = 3 at 4 GiB).
pub const HIDDEN_SIGNAL_PUT_SLOWDOWN_PER_GIB: f64 = 0.75;

/// Affected workers of a pool of `n`: the first quarter, at least one.
pub fn hidden_signal_affected(n: usize) -> usize {
    (n / 4).max(1)
}

/// The preset for `n` workers over `duration_ms`.
pub(super) fn hidden_signal(n: usize, duration_ms: f64) -> Scenario {
    let a = hidden_signal_affected(n);
    let mut s = Scenario::base(
        "hidden-signal",
        &format!(
            "{a} of {n} workers hold a memtable that fills 0 to 4 GiB over 20 s, then flushes (out of phase); \
             their PUTs cost x(1 + 3 x memtable/4 GiB), GETs are unaffected; the others flush at 256 MiB every 5 s. \
             30% PUTs, 70% load. Only `memtable_bytes` in the telemetry (and the request type) explains the slow PUTs."
        ),
        n,
        duration_ms,
    );
    s.put_fraction = 0.3;
    for w in 0..n {
        s.faults.push(memtable(w, n, w < a, None, None));
    }
    s
}

/// The `hidden-signal-mid-run` preset: [`hidden_signal`]'s workers, but the
/// affected ones hold the healthy 256 MiB sawtooth for the first third of
/// the run and switch to the 4 GiB one at [`MID_RUN_FRACTION`] of it. What
/// was learned before the switch says nothing about what follows it: a
/// model must be learned from the traffic after it.
pub(super) fn hidden_signal_mid_run(n: usize, duration_ms: f64) -> Scenario {
    let a = hidden_signal_affected(n);
    let at = duration_ms * MID_RUN_FRACTION;
    let mut s = hidden_signal(n, duration_ms);
    s.description = format!(
        "hidden-signal from a third of the run on: until {:.0} s every worker flushes at 256 MiB every 5 s; \
         then {a} of {n} switch to a memtable that fills to 4 GiB over 20 s, slowing their PUTs up to 4x. \
         30% PUTs, 70% load.",
        at / 1_000.0
    );
    s.faults.clear();
    for w in 0..n {
        if w < a {
            s.faults.push(memtable(w, n, true, Some(at), None));
            s.faults.push(memtable(w, n, false, None, Some(at)));
        } else {
            s.faults.push(memtable(w, n, false, None, None));
        }
    }
    s
}

/// When `hidden-signal-mid-run`'s signal starts, as a fraction of the run.
pub const MID_RUN_FRACTION: f64 = 1.0 / 3.0;

/// Worker `w`'s sawtooth in a pool of `n`: the 4 GiB one when `affected`,
/// else the healthy one, holding in `[from_ms, until_ms)`.
fn memtable(
    w: usize,
    n: usize,
    affected: bool,
    from_ms: Option<f64>,
    until_ms: Option<f64>,
) -> Fault {
    let a = hidden_signal_affected(n);
    let (period_ms, peak_bytes, offset_ms) = if affected {
        let p = HIDDEN_SIGNAL_PERIOD_MS;
        (p, MEMTABLE_PEAK_BYTES, p * w as f64 / a as f64)
    } else {
        let p = HEALTHY_PERIOD_MS;
        let k = w.saturating_sub(a) as f64 / (n - a).max(1) as f64;
        (p, HEALTHY_MEMTABLE_PEAK_BYTES, p * k)
    };
    Fault::Memtable {
        worker: w,
        from_ms,
        until_ms,
        offset_ms,
        period_ms,
        peak_bytes,
        put_slowdown_per_gib: HIDDEN_SIGNAL_PUT_SLOWDOWN_PER_GIB,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_quarter_of_the_workers_fill_to_4_gib_out_of_phase() {
        let s = Scenario::preset("hidden-signal", 8, 120.0).expect("preset");
        assert_eq!(hidden_signal_affected(8), 2);
        assert_eq!(s.faults.len(), 8, "every worker reports a memtable");
        let big: Vec<(usize, f64)> = s
            .faults
            .iter()
            .filter_map(|f| match f {
                Fault::Memtable {
                    worker,
                    offset_ms,
                    peak_bytes,
                    ..
                } if *peak_bytes == MEMTABLE_PEAK_BYTES => Some((*worker, *offset_ms)),
                _ => None,
            })
            .collect();
        assert_eq!(big, vec![(0, 0.0), (1, 10_000.0)]);
        // The first fault is an affected worker (the report's impaired one).
        assert_eq!(s.faults[0].worker(), 0);
        assert!(s.put_fraction > 0.0 && s.put_fraction < 1.0);
        // Not scaled with the duration.
        let short = Scenario::preset("hidden-signal", 8, 60.0).expect("preset");
        assert_eq!(short.faults, s.faults);
        assert_eq!(hidden_signal_affected(2), 1);
    }

    #[test]
    fn mid_run_the_affected_workers_switch_to_the_big_memtable_at_a_third() {
        let s = Scenario::preset("hidden-signal-mid-run", 8, 60.0).expect("preset");
        crate::scenario_file::validate(&s).expect("a valid scenario");
        assert_eq!(s.faults.len(), 10, "two sawtooths on each affected worker");
        let windows: Vec<(usize, u64, (f64, f64))> = s
            .faults
            .iter()
            .filter(|f| f.worker() < 2)
            .filter_map(|f| match f {
                Fault::Memtable {
                    worker, peak_bytes, ..
                } => Some((*worker, *peak_bytes, f.memtable_window_ms()?)),
                _ => None,
            })
            .collect();
        let inf = f64::INFINITY;
        let (big, small) = (MEMTABLE_PEAK_BYTES, HEALTHY_MEMTABLE_PEAK_BYTES);
        assert_eq!(
            windows,
            vec![
                (0, big, (20_000.0, inf)),
                (0, small, (0.0, 20_000.0)),
                (1, big, (20_000.0, inf)),
                (1, small, (0.0, 20_000.0)),
            ]
        );
        assert_eq!(s.faults[0].worker(), 0, "the impaired worker comes first");
    }
}
