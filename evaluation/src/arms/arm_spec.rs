//! What a row of the table of arms ([`super::registry::ARMS`]) says about
//! an arm: its class, its kind, its model and the facts the harness needs.

use super::oracle::Omniscient;
use crate::router::Router;

/// What an arm is, for the reader of a report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// What a router uses today, from its published description.
    Baseline,
    /// A router that sends a key where its data is likely cached.
    LocalityBaseline,
    /// The physical-limit anchor, which reads the true state.
    Oracle,
    /// The service as users run it.
    Service,
    /// A variant kept to explain a result, not a recommendation.
    Diagnostic,
}

/// How an arm is built, and so how it is run.
#[derive(Clone, Copy)]
pub enum Kind {
    /// Decides in the router ([`super::Arm::Local`]): a fresh instance over `n`
    /// workers.
    Local(fn(usize) -> Box<dyn Router + Send>),
    /// Reads the simulator's true state ([`super::Arm::Oracle`]): a fresh instance
    /// over `n` workers. Simulator only.
    Oracle(fn(usize) -> Box<dyn Omniscient + Send>),
    /// The scoring service, called over the network ([`super::Arm::Remote`];
    /// HTTP in the testbed), picking with this selection.
    Service(Selection),
    /// The service's decision inside each router with the embedded
    /// balancer, fed by the view stream ([`super::Arm::Embedded`]).
    Embedded,
    /// The scoring service as several replicas sharing one view over a
    /// bus, each called over the network by its share of the routers
    /// ([`super::replicas`]; a [`super::Arm::Remote`]). Simulator only.
    Replicas(Replication),
}

/// How a replicated service's replicas share ([`super::replicas`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Replication {
    /// Replicas.
    pub replicas: usize,
    /// The load gauges also carry the keys each replica routed, which the
    /// others' routing indexes learn (as a router's load report does).
    pub routed_keys: bool,
    /// Each replica counts its peers as deciders on the pool, as an
    /// embedded balancer counts the routers its view names.
    pub count_deciders: bool,
}

impl std::fmt::Debug for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Local(_) => f.write_str("Local"),
            Self::Oracle(_) => f.write_str("Oracle"),
            Self::Service(s) => f.debug_tuple("Service").field(s).finish(),
            Self::Embedded => f.write_str("Embedded"),
            Self::Replicas(r) => f.debug_tuple("Replicas").field(r).finish(),
        }
    }
}

/// The selection policy a service arm's score requests name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Selection {
    /// None, as shipped: the configured `selection.default_policy` picks.
    Shipped,
    /// This one (`max`, `softmax`, `p2c`, `prequal`).
    Named(&'static str),
}

impl Selection {
    /// The policy a score request names: `None` as shipped.
    pub const fn policy(self) -> Option<&'static str> {
        match self {
            Self::Shipped => None,
            Self::Named(p) => Some(p),
        }
    }
}

/// The model in an arm's scoring path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Model {
    /// None: rules only.
    None,
    /// The shipped default model (`models/default`, or `--model-dir`).
    Shipped,
    /// One the trainer retrained on this harness's own `service-rules`
    /// logs ([`super::model`]).
    Retrained,
    /// None at first; then what the retraining loop, running beside the
    /// service on the run's own log, promotes ([`super::learning`]).
    Learning,
    /// As [`Model::Learning`], but every candidate is trained on shuffled
    /// targets: a model that learned nothing, which the gate must keep out.
    LearningShuffled,
}

impl Model {
    /// Whether the retraining loop chooses it during the run.
    pub const fn learns(self) -> bool {
        matches!(self, Self::Learning | Self::LearningShuffled)
    }
}

/// One arm.
#[derive(Debug, Clone, Copy)]
pub struct ArmSpec {
    /// Its name in commands, results.json and EVALUATION.md.
    pub name: &'static str,
    /// What it is.
    pub class: Class,
    /// How it is built and run.
    pub kind: Kind,
    /// The model in its scoring path.
    pub model: Model,
    /// Whether it is one of the model arms, named for their model rather
    /// than for the service (`model`, `model-retrained`).
    pub model_arm: bool,
    /// Whether `evaluate all` runs it without `--policies`.
    pub by_default: bool,
    /// Its colour in the plots (red, green, blue).
    pub colour: (u8, u8, u8),
}

impl ArmSpec {
    /// Whether it runs in the simulator only: the testbed has no true state
    /// to tell an oracle, no time to train in while it runs, and one
    /// service process.
    pub const fn sim_only(&self) -> bool {
        matches!(self.kind, Kind::Oracle(_) | Kind::Replicas(_)) || self.model.learns()
    }

    /// Whether the scoring service decides for it (every arm but the
    /// baselines and the oracle).
    pub const fn is_service_arm(&self) -> bool {
        matches!(
            self.kind,
            Kind::Service(_) | Kind::Embedded | Kind::Replicas(_)
        )
    }
}
