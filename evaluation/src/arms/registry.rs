//! Every arm in one table, [`ARMS`]: its name (as results.json and
//! EVALUATION.md spell it), its class, its kind (how it is built, and so
//! how the simulator and the testbed run it) and the facts the harness
//! needs about it. The report order is the table's order; every list of
//! names ([`POLICIES`], [`ALL_POLICIES`], [`SIM_ONLY`]) and every predicate
//! below derives from it, and so does each arm's plot colour.
//!
//! # Adding an arm
//!
//! 1. Write it in one file. A baseline (or a locality baseline) is a type
//!    implementing [`Router`] (pick, outcome, drain) with a `new(n)` over
//!    `n` workers, in `arms/baselines/<name>.rs`, declared with `pub mod`
//!    in [`super::baselines`] (whose `Endpoints` can keep its drained
//!    set). An arm of another kind also implements its kind's trait:
//!    [`super::oracle::Omniscient`] for an arm told the simulator's true
//!    state, [`super::service::Remote`] for a scorer across the network.
//! 2. Add its row to [`ARMS`], where it shall appear in the reports, e.g.
//!    `class: Class::LocalityBaseline` and
//!    `kind: Kind::Local(|n| Box::new(HashBounded::new(n)))`. With several
//!    routers a `Local` arm runs one instance per router
//!    ([`super::per_router::PerRouter`]); an `Oracle` arm runs in the
//!    simulator only.
//!
//! Nothing else changes: `evaluate sim` and `evaluate testbed` accept the
//! new name, `evaluate all` runs it when its row says `by_default`, and
//! the plots draw it in its row's colour.

use std::sync::Arc;

use scorer_engine::config::Config;
use scorer_log::DecisionLog;
use scorer_model::ModelHub;

use super::Arm;
use super::arm_spec::{ArmSpec, Class, Kind, Model, Replication, Selection};
use super::baselines::{
    cache_aware::CacheAware, envoy::Envoy, hash_bounded::HashBounded, kv_cost::KvCost,
    least_request_all::LeastRequestAll, p2c_least_request::P2cLeastRequest,
    p2c_peak_ewma::P2cPeakEwma, random::Random, round_robin::RoundRobin,
};
use super::embedded::EmbeddedRouter;
use super::learning::LearningRouter;
use super::oracle::Oracle;
use super::per_router::PerRouter;
use super::replicas::{DEFAULT_REPLICAS, ReplicaSet};
use super::service::ServiceRouter;
use crate::router::Router;

/// Every arm, in report order: the baselines, the oracle, what users run
/// (`service`, `service-rules`, `service-embedded`, `service-replicas`),
/// then the diagnostics and the model arms.
pub const ARMS: &[ArmSpec] = &[
    ArmSpec {
        name: "round-robin",
        class: Class::Baseline,
        kind: Kind::Local(|n| Box::new(RoundRobin::new(n))),
        model: Model::None,
        model_arm: false,
        by_default: true,
        colour: (228, 26, 28), // red
    },
    ArmSpec {
        name: "random",
        class: Class::Baseline,
        kind: Kind::Local(|n| Box::new(Random::new(n))),
        model: Model::None,
        model_arm: false,
        by_default: true,
        colour: (255, 127, 0), // orange
    },
    ArmSpec {
        name: "p2c-least-request",
        class: Class::Baseline,
        kind: Kind::Local(|n| Box::new(P2cLeastRequest::new(n))),
        model: Model::None,
        model_arm: false,
        by_default: true,
        colour: (55, 126, 184), // blue
    },
    ArmSpec {
        name: "p2c-peak-ewma",
        class: Class::Baseline,
        kind: Kind::Local(|n| Box::new(P2cPeakEwma::new(n))),
        model: Model::None,
        model_arm: false,
        by_default: true,
        colour: (152, 78, 163), // purple
    },
    ArmSpec {
        name: "least-request-all",
        class: Class::Baseline,
        kind: Kind::Local(|n| Box::new(LeastRequestAll::new(n))),
        model: Model::None,
        model_arm: false,
        by_default: true,
        colour: (0, 0, 139), // navy
    },
    ArmSpec {
        name: "envoy",
        class: Class::Baseline,
        kind: Kind::Local(|n| Box::new(Envoy::new(n))),
        model: Model::None,
        model_arm: false,
        by_default: true,
        colour: (255, 20, 147), // deep pink
    },
    ArmSpec {
        name: "hash-bounded",
        class: Class::LocalityBaseline,
        kind: Kind::Local(|n| Box::new(HashBounded::new(n))),
        model: Model::None,
        model_arm: false,
        by_default: true,
        colour: (128, 128, 0), // olive
    },
    ArmSpec {
        name: "cache-aware",
        class: Class::LocalityBaseline,
        kind: Kind::Local(|n| Box::new(CacheAware::new(n))),
        model: Model::None,
        model_arm: false,
        by_default: true,
        colour: (106, 90, 205), // slate blue
    },
    ArmSpec {
        name: "kv-cost",
        class: Class::LocalityBaseline,
        kind: Kind::Local(|n| Box::new(KvCost::new(n))),
        model: Model::None,
        model_arm: false,
        by_default: true,
        colour: (135, 206, 250), // sky blue
    },
    ArmSpec {
        name: "oracle",
        class: Class::Oracle,
        kind: Kind::Oracle(|n| Box::new(Oracle::new(n))),
        model: Model::None,
        model_arm: false,
        by_default: true,
        colour: (255, 215, 0), // yellow
    },
    ArmSpec {
        name: "service",
        class: Class::Service,
        kind: Kind::Service(Selection::Shipped),
        model: Model::Shipped,
        model_arm: false,
        by_default: true,
        colour: (0, 90, 0), // dark green
    },
    ArmSpec {
        name: "service-rules",
        class: Class::Service,
        kind: Kind::Service(Selection::Shipped),
        model: Model::None,
        model_arm: false,
        by_default: true,
        colour: (128, 128, 128), // grey
    },
    ArmSpec {
        name: "service-embedded",
        class: Class::Service,
        kind: Kind::Embedded,
        model: Model::Shipped,
        model_arm: false,
        by_default: true,
        colour: (0, 200, 120), // jade
    },
    // The service as shipped, run as replicas sharing one view over a bus
    // (simulator only; `evaluate all` runs it where several routers are).
    ArmSpec {
        name: "service-replicas",
        class: Class::Service,
        kind: Kind::Replicas(SHIPPED_REPLICATION),
        model: Model::Shipped,
        model_arm: false,
        by_default: true,
        colour: (0, 150, 60), // forest green
    },
    ArmSpec {
        name: "rules-max",
        class: Class::Diagnostic,
        kind: Kind::Service(Selection::Named("max")),
        model: Model::None,
        model_arm: false,
        by_default: false,
        colour: (77, 175, 74), // green
    },
    ArmSpec {
        name: "rules-softmax",
        class: Class::Diagnostic,
        kind: Kind::Service(Selection::Named("softmax")),
        model: Model::None,
        model_arm: false,
        by_default: false,
        colour: (0, 0, 0), // black
    },
    ArmSpec {
        name: "rules-p2c",
        class: Class::Diagnostic,
        kind: Kind::Service(Selection::Named("p2c")),
        model: Model::None,
        model_arm: false,
        by_default: false,
        colour: (0, 170, 170), // teal
    },
    ArmSpec {
        name: "rules-prequal",
        class: Class::Diagnostic,
        kind: Kind::Service(Selection::Named("prequal")),
        model: Model::None,
        model_arm: false,
        by_default: false,
        colour: (200, 160, 0), // gold
    },
    // The embedded balancer on the rules alone: its logs train the shipped
    // model without depending on it.
    ArmSpec {
        name: "service-embedded-rules",
        class: Class::Diagnostic,
        kind: Kind::Embedded,
        model: Model::None,
        model_arm: false,
        by_default: false,
        colour: (0, 120, 80), // dark jade
    },
    // The `service` arm under its older name, so that older commands and
    // result files still read.
    ArmSpec {
        name: "model",
        class: Class::Diagnostic,
        kind: Kind::Service(Selection::Shipped),
        model: Model::Shipped,
        model_arm: true,
        by_default: false,
        colour: (166, 86, 40), // brown
    },
    ArmSpec {
        name: "model-retrained",
        class: Class::Service,
        kind: Kind::Service(Selection::Shipped),
        model: Model::Retrained,
        model_arm: true,
        by_default: true,
        colour: (247, 129, 191), // pink
    },
    // The service as shipped with `trainer loop` beside it: rules until
    // the gate promotes a model trained on the run's own log.
    ArmSpec {
        name: "service-learning",
        class: Class::Service,
        kind: Kind::Service(Selection::Shipped),
        model: Model::Learning,
        model_arm: false,
        by_default: true,
        colour: (0, 90, 160), // deep sky
    },
    ArmSpec {
        name: "service-learning-shuffled",
        class: Class::Diagnostic,
        kind: Kind::Service(Selection::Shipped),
        model: Model::LearningShuffled,
        model_arm: false,
        by_default: false,
        colour: (120, 120, 120), // grey
    },
    // The designs of `service-replicas`, side by side: the replicas share
    // only their load; their load and routed keys; and those, each counting
    // its peers as deciders.
    ArmSpec {
        name: "replicas-load",
        class: Class::Diagnostic,
        kind: Kind::Replicas(Replication {
            replicas: DEFAULT_REPLICAS,
            routed_keys: false,
            count_deciders: false,
        }),
        model: Model::Shipped,
        model_arm: false,
        by_default: false,
        colour: (60, 120, 60), // moss
    },
    ArmSpec {
        name: "replicas-routed",
        class: Class::Diagnostic,
        kind: Kind::Replicas(Replication {
            replicas: DEFAULT_REPLICAS,
            routed_keys: true,
            count_deciders: false,
        }),
        model: Model::Shipped,
        model_arm: false,
        by_default: false,
        colour: (90, 160, 90), // sage
    },
    ArmSpec {
        name: "replicas-deciders",
        class: Class::Diagnostic,
        kind: Kind::Replicas(Replication {
            replicas: DEFAULT_REPLICAS,
            routed_keys: true,
            count_deciders: true,
        }),
        model: Model::Shipped,
        model_arm: false,
        by_default: false,
        colour: (30, 110, 110), // dark cyan
    },
];

/// How `service-replicas` shares: [`DEFAULT_REPLICAS`] replicas, their
/// load gauges carrying the keys they routed, each counting its peers as
/// deciders (the best of the designs on the tuning seeds).
pub const SHIPPED_REPLICATION: Replication = Replication {
    replicas: DEFAULT_REPLICAS,
    routed_keys: true,
    count_deciders: true,
};

/// Every arm's name, in report order.
pub const POLICIES: [&str; ARMS.len()] = names(Filter::Every);

/// The arms `evaluate all` runs by default: every `by_default` row (the
/// others, diagnostics, are left out to keep the run time reasonable on a
/// small machine, and still run with `--policies`).
pub const ALL_POLICIES: [&str; count(Filter::ByDefault)] = names(Filter::ByDefault);

/// The arms that exist only in the simulator.
pub const SIM_ONLY: [&str; count(Filter::SimOnly)] = names(Filter::SimOnly);

#[derive(Clone, Copy)]
enum Filter {
    Every,
    ByDefault,
    SimOnly,
}

impl Filter {
    const fn holds(self, arm: &ArmSpec) -> bool {
        match self {
            Self::Every => true,
            Self::ByDefault => arm.by_default,
            Self::SimOnly => arm.sim_only(),
        }
    }
}

const fn count(filter: Filter) -> usize {
    let (mut i, mut n) = (0, 0);
    while i < ARMS.len() {
        if filter.holds(&ARMS[i]) {
            n += 1;
        }
        i += 1;
    }
    n
}

const fn names<const N: usize>(filter: Filter) -> [&'static str; N] {
    let mut out = [""; N];
    let (mut i, mut n) = (0, 0);
    while i < ARMS.len() {
        if filter.holds(&ARMS[i]) {
            out[n] = ARMS[i].name;
            n += 1;
        }
        i += 1;
    }
    out
}

/// The row of arm `name`.
pub fn spec(name: &str) -> Option<&'static ArmSpec> {
    ARMS.iter().find(|a| a.name == name)
}

/// Whether `name` is a known arm.
pub fn is_known(name: &str) -> bool {
    spec(name).is_some()
}

/// Checks a `--policies` list: at least one name, every name known, none
/// twice (a repeated arm would be run and reported twice).
///
/// # Errors
/// The first unknown or repeated name, or an empty list.
pub fn check_names(names: &[String]) -> Result<(), String> {
    if names.is_empty() {
        return Err("--policies must name at least one policy".to_owned());
    }
    for (i, p) in names.iter().enumerate() {
        if !is_known(p) {
            return Err(format!(
                "unknown policy `{p}`: expected one of {}",
                POLICIES.join(", ")
            ));
        }
        if names[..i].contains(p) {
            return Err(format!("policy `{p}` is given twice"));
        }
    }
    Ok(())
}

/// Whether `name` is a model arm (`model`, `model-retrained`).
pub fn is_model_arm(name: &str) -> bool {
    spec(name).is_some_and(|a| a.model_arm)
}

/// Whether `name` runs with a model (`service`, `service-embedded`,
/// `model`, `model-retrained`): its arm needs a model hub.
pub fn needs_models(name: &str) -> bool {
    spec(name).is_some_and(|a| matches!(a.model, Model::Shipped | Model::Retrained))
}

/// Whether `name` is the service as shipped (`service`, `service-rules`):
/// a service arm whose score request names no policy, named for the
/// service rather than for its model.
pub fn is_shipped_arm(name: &str) -> bool {
    spec(name).is_some_and(|a| {
        matches!(a.kind, Kind::Service(Selection::Shipped)) && !a.model_arm && !a.model.learns()
    })
}

/// Whether `name` is served by the scoring service (every arm but the
/// baselines and the oracle).
pub fn is_service_arm(name: &str) -> bool {
    spec(name).is_some_and(ArmSpec::is_service_arm)
}

/// The selection policy arm `name` picks with under `config`: the one its
/// score requests name (the `rules-*` arms), else the configured default,
/// `config.selection.default_policy`.
pub fn selection_policy(name: &str, config: &Config) -> String {
    match spec(name).map(|a| a.kind) {
        Some(Kind::Service(Selection::Named(p))) => p.to_owned(),
        _ => config.selection.default_policy.clone(),
    }
}

/// A fresh instance of the `Local` arm `name` over `n` workers (the
/// testbed's baselines); `None` for another kind.
pub fn local(name: &str, n: usize) -> Option<Box<dyn Router + Send>> {
    match spec(name)?.kind {
        Kind::Local(make) => Some(make(n)),
        _ => None,
    }
}

/// The arm `name` over `n` workers for `routers` independent routers: a
/// `Local` arm gets one independent instance per router (each knows only
/// its own picks and outcomes, as sidecars do); a service arm is one
/// shared service that sees every router's picks and outcomes, with `log`
/// attached, `config` (the shipped defaults unless a diagnostic run passes
/// `--service-config`) and, when its row has a model, `models`. `None` for
/// an unknown name, or for an arm with a model without `models`.
pub fn build(
    name: &str,
    n: usize,
    routers: usize,
    log: Option<Arc<DecisionLog>>,
    config: &Config,
    models: Option<Arc<ModelHub>>,
) -> Option<Arm> {
    let arm = spec(name)?;
    let models = match arm.model {
        Model::None | Model::Learning | Model::LearningShuffled => None,
        Model::Shipped | Model::Retrained => Some(models?),
    };
    Some(match arm.kind {
        Kind::Local(make) if routers > 1 => Arm::Local(Box::new(PerRouter::new(
            (0..routers).map(|_| make(n)).collect(),
        ))),
        Kind::Local(make) => Arm::Local(make(n)),
        // The oracle reads the true state, which no router's view limits.
        Kind::Oracle(make) => Arm::Oracle(make(n)),
        Kind::Service(_) if arm.model.learns() => {
            let shuffled = arm.model == Model::LearningShuffled;
            Arm::Remote(Box::new(LearningRouter::new(n, config, shuffled).ok()?))
        }
        Kind::Service(selection) => {
            let mut r = match selection {
                Selection::Shipped => ServiceRouter::shipped(n, log, config.clone()),
                Selection::Named(p) => ServiceRouter::new(n, p, log, config.clone()),
            };
            if let Some(m) = models {
                r = r.with_models(m);
            }
            Arm::Remote(Box::new(r))
        }
        Kind::Embedded => {
            let arm = EmbeddedRouter::new(n, routers, config, models.as_ref(), log).ok()?;
            Arm::Embedded(Box::new(arm))
        }
        Kind::Replicas(how) => {
            let each = (0..how.replicas)
                .map(|_| {
                    let mut r = ServiceRouter::shipped(n, log.clone(), config.clone());
                    if let Some(m) = &models {
                        r = r.with_models(m.clone());
                    }
                    if how.routed_keys {
                        r = r.with_routed_outbox();
                    }
                    r
                })
                .collect();
            let bus_ms = crate::bus_calibration::NatsBusCalibration::shipped().one_way_ms();
            let mut set = ReplicaSet::new(each, n, bus_ms)?;
            if how.routed_keys {
                set = set.sharing_routed_keys();
            }
            if how.count_deciders {
                set = set.counting_deciders();
            }
            Arm::Remote(Box::new(set))
        }
    })
}
