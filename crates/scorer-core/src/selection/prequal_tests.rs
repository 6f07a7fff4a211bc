//! Tests of the `prequal` policy (hot-cold lexicographic rule). All
//! randomness is seeded ChaCha8.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::selection::{
    Candidate, DEFAULT_PREQUAL_PROBES, DEFAULT_PREQUAL_Q_RIF, Policy, PolicyKind, Prequal,
    SelectionError, Selector, SelectorConfig,
};

fn rng(seed: u64) -> ChaCha8Rng {
    ChaCha8Rng::seed_from_u64(seed)
}

/// A candidate with `rif` requests in flight and latency estimate `ms`.
fn c(id: &str, rif: u32, ms: f64) -> Candidate<'_> {
    Candidate {
        outstanding: rif,
        cost: Some(ms),
        ..Candidate::new(id, 50.0)
    }
}

fn assert_close(a: &[f64], b: &[f64], tol: f64) {
    assert_eq!(a.len(), b.len());
    for (x, y) in a.iter().zip(b) {
        assert!((x - y).abs() <= tol, "{a:?} vs {b:?}");
    }
}

/// Pick frequencies over `trials` seeded picks.
fn frequencies(p: &Prequal, cs: &[Candidate<'_>], trials: u32, seed: u64) -> Vec<f64> {
    let mut r = rng(seed);
    let mut counts = vec![0u32; cs.len()];
    for _ in 0..trials {
        counts[p.select(cs, "", &mut r).unwrap().pick] += 1;
    }
    counts
        .iter()
        .map(|&k| f64::from(k) / f64::from(trials))
        .collect()
}

/// Propensities by brute force: every `d`-subset is equally likely; the
/// subset's pick is what `select` would keep (probing all of the subset).
fn brute_force(p: &Prequal, cs: &[Candidate<'_>]) -> Vec<f64> {
    let n = cs.len();
    let d = (p.probes() as usize).min(n);
    let t = p.rif_threshold(cs);
    let mut out = vec![0.0; n];
    let mut subsets = 0u64;
    for mask in 0u32..(1 << n) {
        if mask.count_ones() as usize != d {
            continue;
        }
        subsets += 1;
        let members: Vec<usize> = (0..n).filter(|i| mask & (1 << i) != 0).collect();
        let cold: Vec<usize> = members
            .iter()
            .copied()
            .filter(|&i| cs[i].outstanding <= t)
            .collect();
        // The paper's rule, written out independently of the policy's order.
        let best = if cold.is_empty() {
            *members
                .iter()
                .min_by(|&&a, &&b| {
                    cs[a]
                        .outstanding
                        .cmp(&cs[b].outstanding)
                        .then(lat(&cs[a]).total_cmp(&lat(&cs[b])))
                        .then(cs[a].worker_id.cmp(cs[b].worker_id))
                })
                .unwrap()
        } else {
            *cold
                .iter()
                .min_by(|&&a, &&b| {
                    lat(&cs[a])
                        .total_cmp(&lat(&cs[b]))
                        .then(cs[a].outstanding.cmp(&cs[b].outstanding))
                        .then(cs[a].worker_id.cmp(cs[b].worker_id))
                })
                .unwrap()
        };
        out[best] += 1.0;
    }
    out.iter().map(|k| k / subsets as f64).collect()
}

fn lat(c: &Candidate<'_>) -> f64 {
    c.cost.unwrap_or(0.0)
}

#[test]
fn cold_candidate_with_the_lowest_latency_wins_over_a_faster_hot_one() {
    // RIFs sorted [0, 0, 1, 2, 10]: the 0.8 quantile (rank 4) is 2, so only
    // `a` (RIF 10) is hot, even though it is the fastest.
    let cs = [
        c("a", 10, 1.0),
        c("b", 0, 5.0),
        c("c", 1, 3.0),
        c("d", 0, 4.0),
        c("e", 2, 9.0),
    ];
    let all = Prequal::new(5, 0.8).unwrap();
    assert_eq!(all.rif_threshold(&cs), 2);
    let s = all.select(&cs, "", &mut rng(1)).unwrap();
    assert_eq!(s.pick, 2, "lowest-latency cold candidate");
    assert_eq!(s.probabilities, vec![0.0, 0.0, 1.0, 0.0, 0.0]);

    // Probing 2 of 5: the hot `a` is ranked last, so it is never picked.
    let two = Prequal::new(2, 0.8).unwrap();
    let p = two.probabilities(&cs).unwrap();
    assert_eq!(p[0], 0.0, "{p:?}");
    // Order c, d, b, e, a: P(r) = C(4−r, 1)/C(5, 2) = (4−r)/10.
    assert_close(&p, &[0.0, 0.2, 0.4, 0.3, 0.1], 1e-12);
    let f = frequencies(&two, &cs, 20_000, 2);
    assert_eq!(f[0], 0.0);
    assert_close(&f, &p, 0.015);
}

#[test]
fn all_hot_probes_fall_back_to_the_lowest_rif() {
    // q = 1/3 of 3 RIFs (rank 1) is the minimum, 0: only `cold` is cold.
    // When the probes are {fast, busy}, both are hot and the lower RIF
    // (`busy`, 5 in flight, 50 ms) beats the faster `fast` (9, 1 ms).
    let cs = [c("cold", 0, 100.0), c("fast", 9, 1.0), c("busy", 5, 50.0)];
    let p = Prequal::new(2, 1.0 / 3.0).unwrap();
    assert_eq!(p.rif_threshold(&cs), 0);
    let exact = p.probabilities(&cs).unwrap();
    assert_close(&exact, &[2.0 / 3.0, 0.0, 1.0 / 3.0], 1e-12);
    let f = frequencies(&p, &cs, 30_000, 3);
    assert_eq!(f[1], 0.0, "the hot fast candidate must never win: {f:?}");
    assert_close(&f, &exact, 0.015);
}

#[test]
fn idle_pool_is_all_cold_and_picks_by_latency() {
    // Every RIF 0: nothing exceeds the quantile, so latency decides.
    let cs = [c("a", 0, 7.0), c("b", 0, 2.0), c("c", 0, 4.0)];
    let s = Prequal::new(3, DEFAULT_PREQUAL_Q_RIF)
        .unwrap()
        .select(&cs, "", &mut rng(4))
        .unwrap();
    assert_eq!(s.pick, 1);
}

#[test]
fn exact_propensities_match_brute_force_and_sum_to_one() {
    let ids: Vec<String> = (0..10).map(|i| format!("w{i}")).collect();
    let mut r = rng(5);
    for case in 0..200 {
        let n = r.random_range(1..=10usize);
        let cs: Vec<Candidate<'_>> = ids[..n]
            .iter()
            .map(|id| {
                c(
                    id,
                    r.random_range(0..4u32),
                    f64::from(r.random_range(0..4u8)),
                )
            })
            .collect();
        let probes = r.random_range(1..=12u32);
        let q = [0.1, 0.5, DEFAULT_PREQUAL_Q_RIF, 1.0][case % 4];
        let p = Prequal::new(probes, q).unwrap();
        let exact = p.probabilities(&cs).unwrap();
        let sum: f64 = exact.iter().sum();
        assert!((sum - 1.0).abs() <= 1e-12, "case {case}: sum {sum}");
        assert_close(&exact, &brute_force(&p, &cs), 1e-12);
        let s = p.select(&cs, "", &mut r).unwrap();
        assert_eq!(s.probabilities, exact);
        assert!(exact[s.pick] > 0.0, "case {case}: zero-propensity pick");
    }
}

#[test]
fn empirical_frequencies_match_propensities_on_a_large_pool() {
    let ids: Vec<String> = (0..40).map(|i| format!("w{i:02}")).collect();
    let mut setup = rng(6);
    let cs: Vec<Candidate<'_>> = ids
        .iter()
        .map(|id| {
            c(
                id,
                setup.random_range(0..8u32),
                setup.random_range(1.0..20.0),
            )
        })
        .collect();
    let p = Prequal::default();
    assert_eq!(p.probes(), DEFAULT_PREQUAL_PROBES);
    let exact = p.probabilities(&cs).unwrap();
    let sum: f64 = exact.iter().sum();
    assert!((sum - 1.0).abs() <= 1e-12, "sum {sum}");
    assert_close(&frequencies(&p, &cs, 40_000, 7), &exact, 0.01);
}

#[test]
fn ties_break_deterministically_by_worker_id() {
    let cs = [c("b", 1, 3.0), c("a", 1, 3.0), c("c", 1, 3.0)];
    for seed in 0..20 {
        let s = Prequal::new(3, 0.84)
            .unwrap()
            .select(&cs, "", &mut rng(seed))
            .unwrap();
        assert_eq!(s.pick, 1);
    }
    // Probing 2 of 3: `a` wins whenever probed, then `b`.
    let p = Prequal::new(2, 0.84).unwrap().probabilities(&cs).unwrap();
    assert_close(&p, &[1.0 / 3.0, 2.0 / 3.0, 0.0], 1e-12);
}

#[test]
fn missing_latency_falls_back_to_the_score() {
    // `b` has no estimate, so every candidate is ranked by score instead.
    let mut cs = [c("a", 0, 1.0), c("b", 0, 2.0), c("c", 0, 3.0)];
    cs[0].score = 20.0;
    cs[1].score = 90.0;
    cs[1].cost = None;
    cs[2].score = 60.0;
    let s = Prequal::new(3, 0.84)
        .unwrap()
        .select(&cs, "", &mut rng(8))
        .unwrap();
    assert_eq!(s.pick, 1);
}

#[test]
fn invalid_latency_and_config_are_errors() {
    for bad in [f64::NAN, f64::INFINITY, -1.0] {
        let mut cs = [c("a", 0, 1.0), c("b", 0, 1.0)];
        cs[1].cost = Some(bad);
        assert!(matches!(
            Prequal::default().select(&cs, "", &mut rng(0)),
            Err(SelectionError::InvalidCost { index: 1, .. })
        ));
    }
    assert!(Prequal::new(0, 0.5).is_err());
    for q in [0.0, -0.1, 1.01, f64::NAN] {
        assert!(Prequal::new(3, q).is_err(), "{q}");
        let cfg = SelectorConfig {
            prequal_q_rif: q,
            ..SelectorConfig::default()
        };
        assert!(matches!(
            Selector::new(cfg),
            Err(SelectionError::InvalidConfig { .. })
        ));
    }
    let cfg = SelectorConfig {
        prequal_probes: 0,
        ..SelectorConfig::default()
    };
    assert!(Selector::new(cfg).is_err());
}

#[test]
fn selector_dispatches_prequal_by_name_with_its_config() {
    assert_eq!("prequal".parse::<PolicyKind>(), Ok(PolicyKind::Prequal));
    assert!(PolicyKind::Prequal.is_stochastic());
    let d = SelectorConfig::default();
    assert_eq!((d.prequal_probes, d.prequal_q_rif), (3, 0.84));
    let cs = [
        c("a", 10, 1.0),
        c("b", 0, 5.0),
        c("c", 1, 3.0),
        c("d", 0, 4.0),
        c("e", 2, 9.0),
    ];
    let sel = Selector::new(SelectorConfig {
        prequal_probes: 5,
        prequal_q_rif: 0.8,
        ..d
    })
    .unwrap();
    let s = sel
        .select(PolicyKind::Prequal, &cs, "", None, &mut rng(9))
        .unwrap()
        .unwrap();
    assert_eq!(s.pick, 2);
    // The min-share floor applies: every candidate keeps at least 0.05.
    let floored = Selector::new(SelectorConfig {
        prequal_probes: 5,
        prequal_q_rif: 0.8,
        min_share: 0.05,
        ..d
    })
    .unwrap();
    let s = floored
        .select(PolicyKind::Prequal, &cs, "", None, &mut rng(9))
        .unwrap()
        .unwrap();
    assert_close(&s.probabilities, &[0.05, 0.05, 0.8, 0.05, 0.05], 1e-12);
}
