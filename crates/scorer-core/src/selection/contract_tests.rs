//! What every policy promises: determinism per seed, errors on bad input,
//! probabilities that sum to one, configuration, thread safety.

use super::*;

// ---------------------------------------------------------------- cross-cutting

#[test]
fn same_seed_gives_same_pick_sequence_for_every_policy() {
    let ids: Vec<String> = (0..12).map(|i| format!("w{i}")).collect();
    let mut setup = rng(20);
    let cs: Vec<Candidate<'_>> = ids
        .iter()
        .map(|id| Candidate {
            worker_id: id,
            score: f64::from(setup.random_range(0..4u8)) * 25.0,
            weight: setup.random_range(0.5..2.0),
            in_flight: f64::from(setup.random_range(0..3u8)),
            outstanding: setup.random_range(0..3u32),
            cost: Some(f64::from(setup.random_range(1..4u8))),
        })
        .collect();
    let config = SelectorConfig {
        min_share: 0.01,
        ..SelectorConfig::default()
    };
    for kind in STOCHASTIC_AND_DETERMINISTIC {
        let (s1, s2) = (
            Selector::new(config).unwrap(),
            Selector::new(config).unwrap(),
        );
        let (mut r1, mut r2) = (rng(21), rng(21));
        let a: Vec<Selection> = (0..300)
            .map(|k| pick(&s1, kind, &cs, &format!("k{k}"), Some(0.3), &mut r1))
            .collect();
        let b: Vec<Selection> = (0..300)
            .map(|k| pick(&s2, kind, &cs, &format!("k{k}"), Some(0.3), &mut r2))
            .collect();
        assert_eq!(a, b, "{kind}");
        if kind.is_stochastic() {
            let distinct: std::collections::HashSet<usize> = a.iter().map(|s| s.pick).collect();
            assert!(distinct.len() > 1, "{kind} never varied");
        }
    }
}

#[test]
fn nan_or_infinite_or_out_of_range_score_is_an_error() {
    let sel = Selector::default();
    for bad in [
        f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
        -0.5,
        100.000_001,
    ] {
        let cs = [cand("a", 50.0), cand("b", bad)];
        for kind in PolicyKind::ALL {
            match sel.select(kind, &cs, "k", None, &mut rng(0)) {
                Err(SelectionError::InvalidScore { index: 1, .. }) => {}
                other => panic!("{kind} score {bad}: {other:?}"),
            }
        }
    }
}

#[test]
fn invalid_weight_or_in_flight_is_an_error() {
    let sel = Selector::default();
    for bad in [f64::NAN, f64::INFINITY, 0.0, -1.0] {
        let mut cs = [cand("a", 50.0)];
        cs[0].weight = bad;
        for kind in PolicyKind::ALL {
            assert!(matches!(
                sel.select(kind, &cs, "", None, &mut rng(0)),
                Err(SelectionError::InvalidWeight { index: 0, .. })
            ));
        }
    }
    for bad in [f64::NAN, f64::INFINITY, -0.1] {
        let mut cs = [cand("a", 50.0)];
        cs[0].in_flight = bad;
        for kind in PolicyKind::ALL {
            assert!(matches!(
                sel.select(kind, &cs, "", None, &mut rng(0)),
                Err(SelectionError::InvalidInFlight { index: 0, .. })
            ));
        }
    }
}

#[test]
fn empty_candidate_list_is_an_error() {
    let sel = Selector::default();
    for kind in PolicyKind::ALL {
        assert_eq!(
            sel.select(kind, &[], "k", None, &mut rng(0)),
            Err(SelectionError::Empty),
            "{kind}"
        );
    }
}

#[test]
fn none_policy_returns_none() {
    let cs = [cand("a", 1.0)];
    let r = Selector::default().select(PolicyKind::None, &cs, "", None, &mut rng(0));
    assert_eq!(r, Ok(None));
}

#[test]
fn probabilities_sum_to_one_for_random_inputs_of_size_1_to_1024() {
    let ids: Vec<String> = (0..1024).map(|i| format!("worker-{i:04}")).collect();
    let sel = Selector::default();
    let floored = Selector::new(SelectorConfig {
        min_share: 0.002,
        ..SelectorConfig::default()
    })
    .unwrap();
    for seed in 0..48u64 {
        let mut r = rng(1000 + seed);
        let n = match seed {
            0 => 1,
            1 => 2,
            2 => 1024,
            _ => r.random_range(1..=1024),
        };
        // Mix of coarse (tie-heavy) and continuous scores, extreme weights.
        let cs: Vec<Candidate<'_>> = ids[..n]
            .iter()
            .map(|id| Candidate {
                worker_id: id,
                score: if r.random_bool(0.5) {
                    f64::from(r.random_range(0..=4u8)) * 25.0
                } else {
                    r.random_range(0.0..=100.0)
                },
                weight: match r.random_range(0..4u8) {
                    0 => 1.0,
                    1 => f64::MIN_POSITIVE,
                    2 => 1e300,
                    _ => r.random_range(1e-3..1e3),
                },
                in_flight: r.random_range(0.0..20.0),
                outstanding: r.random_range(0..20u32),
                cost: r.random_bool(0.9).then(|| r.random_range(0.0..50.0)),
            })
            .collect();
        let t = [0.0, 1e-9, 0.01, 0.1, 1.0, 1e308][(seed % 6) as usize];
        for s in [&sel, &floored] {
            for kind in STOCHASTIC_AND_DETERMINISTIC {
                let out = pick(s, kind, &cs, &format!("key{seed}"), Some(t), &mut r);
                assert_valid(&out, n);
            }
        }
    }
}

#[test]
fn policy_kind_parses_and_prints() {
    for kind in PolicyKind::ALL {
        assert_eq!(kind.as_str().parse::<PolicyKind>(), Ok(kind));
        assert_eq!(kind.to_string(), kind.as_str());
    }
    assert_eq!(" P2C ".parse::<PolicyKind>(), Ok(PolicyKind::P2c));
    assert!(matches!(
        "random".parse::<PolicyKind>(),
        Err(SelectionError::UnknownPolicy(_))
    ));
}

#[test]
fn default_config_is_valid_and_bad_config_is_rejected() {
    let d = SelectorConfig::default();
    assert_eq!(d.default_temperature, 0.1);
    assert_eq!(d.hash_virtual_nodes, 160);
    assert_eq!(d.hash_load_factor, 1.25);
    assert_eq!(d.min_share, 0.0);
    assert!(Selector::new(d).is_ok());
    let bad = [
        SelectorConfig {
            default_temperature: -1.0,
            ..d
        },
        SelectorConfig {
            default_temperature: f64::NAN,
            ..d
        },
        SelectorConfig {
            hash_virtual_nodes: 0,
            ..d
        },
        SelectorConfig {
            hash_virtual_nodes: 5000,
            ..d
        },
        SelectorConfig {
            hash_load_factor: 0.9,
            ..d
        },
        SelectorConfig {
            hash_load_factor: f64::INFINITY,
            ..d
        },
        SelectorConfig {
            min_share: 1.5,
            ..d
        },
        SelectorConfig {
            min_share: f64::NAN,
            ..d
        },
    ];
    for c in bad {
        assert!(
            matches!(Selector::new(c), Err(SelectionError::InvalidConfig { .. })),
            "{c:?}"
        );
    }
}

#[test]
fn selector_is_send_sync_and_usable_from_many_threads() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Selector>();

    let sel = Selector::default();
    let ids = ten_workers();
    let cs: Vec<_> = ids.iter().map(|id| cand(id, 50.0)).collect();
    let counts = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..2u64)
            .map(|t| {
                let (sel, cs) = (&sel, &cs);
                scope.spawn(move || {
                    let mut r = rng(t);
                    let mut counts = vec![0u64; cs.len()];
                    for k in 0..5000 {
                        for kind in STOCHASTIC_AND_DETERMINISTIC {
                            let s = pick(sel, kind, cs, &format!("{k}"), None, &mut r);
                            if kind == PolicyKind::Swrr {
                                counts[s.pick] += 1;
                            }
                        }
                    }
                    counts
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap())
            .fold(vec![0u64; 10], |acc, c| {
                acc.iter().zip(&c).map(|(a, b)| a + b).collect()
            })
    });
    // Shared SWRR state: 10 000 picks over 10 equal workers, exactly 1000 each.
    assert!(counts.iter().all(|&c| c == 1000), "{counts:?}");
}
