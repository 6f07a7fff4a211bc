//! The table of arms keeps its names, order, predicates and kinds.

use std::sync::Arc;

use scorer_engine::config::Config;
use scorer_model::ModelHub;

use super::registry::*;
use super::{Arm, Kind};

/// Every arm before the locality baselines and the cache oracle, in
/// report order.
const BEFORE: [&str; 16] = [
    "round-robin",
    "random",
    "p2c-least-request",
    "p2c-peak-ewma",
    "least-request-all",
    "envoy",
    "oracle",
    "service",
    "service-rules",
    "service-embedded",
    "rules-max",
    "rules-softmax",
    "rules-p2c",
    "rules-prequal",
    "model",
    "model-retrained",
];

/// `names` in the order they have in `list`, which holds them all.
fn in_order_of<'a>(names: &[&'a str], list: &[&'a str]) -> Vec<&'a str> {
    list.iter().copied().filter(|p| names.contains(p)).collect()
}

#[test]
fn the_lists_keep_their_names_and_order() {
    assert_eq!(in_order_of(&BEFORE, &POLICIES), BEFORE);
    let all = [
        "round-robin",
        "random",
        "p2c-least-request",
        "p2c-peak-ewma",
        "least-request-all",
        "envoy",
        "oracle",
        "service",
        "service-rules",
        "service-embedded",
        "model-retrained",
    ];
    assert_eq!(in_order_of(&BEFORE, &ALL_POLICIES), all);
    let locality = ["hash-bounded", "cache-aware", "kv-cost"];
    assert_eq!(&POLICIES[6..9], locality, "after envoy");
    assert_eq!(&ALL_POLICIES[6..9], locality);
    assert_eq!(in_order_of(&BEFORE, &SIM_ONLY), ["oracle"]);
}

#[test]
fn names_and_colours_are_each_arms_own() {
    for (i, a) in ARMS.iter().enumerate() {
        for b in &ARMS[..i] {
            assert_ne!(a.name, b.name);
            assert_ne!(a.colour, b.colour, "{} and {}", a.name, b.name);
        }
    }
}

#[test]
fn the_predicates_say_what_they_said_by_name() {
    let with = |f: fn(&str) -> bool| BEFORE.into_iter().filter(|p| f(p)).collect::<Vec<_>>();
    assert_eq!(with(is_service_arm), &BEFORE[7..]);
    assert_eq!(with(is_model_arm), ["model", "model-retrained"]);
    assert_eq!(
        with(needs_models),
        ["service", "service-embedded", "model", "model-retrained"]
    );
    assert_eq!(with(is_shipped_arm), ["service", "service-rules"]);
    let cfg = Config::default();
    assert_eq!(selection_policy("rules-prequal", &cfg), "prequal");
    assert_eq!(
        selection_policy("service", &cfg),
        cfg.selection.default_policy
    );
    assert!(!is_known("nope") && spec("envoy").is_some());
}

#[test]
fn every_arm_builds_with_models_and_no_model_arm_without() {
    let cfg = Config::default();
    let hub = Arc::new(ModelHub::unloaded(
        &cfg.model,
        Arc::new(scorer_core::clock::SystemClock::new()),
    ));
    for a in ARMS {
        let built = build(a.name, 3, 2, None, &cfg, Some(hub.clone()));
        let kind_matches = matches!(
            (&built, a.kind),
            (Some(Arm::Local(_)), Kind::Local(_))
                | (Some(Arm::Oracle(_)), Kind::Oracle(_))
                | (Some(Arm::Remote(_)), Kind::Service(_) | Kind::Replicas(_))
                | (Some(Arm::Embedded(_)), Kind::Embedded)
        );
        assert!(kind_matches, "{}: {built:?}", a.name);
        let bare = build(a.name, 3, 1, None, &cfg, None);
        assert_eq!(bare.is_some(), !needs_models(a.name), "{}", a.name);
    }
}
