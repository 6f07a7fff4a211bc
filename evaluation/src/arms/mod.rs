//! The compared arms, one typed kind each, and the one table that names
//! them ([`registry::ARMS`]).
//!
//! - [`baselines`]: round robin, random, P2C least-request (Envoy's
//!   default), P2C peak-EWMA (Finagle/Linkerd), least-request over all
//!   workers, Envoy as deployed, from their published descriptions; the
//!   locality baselines join them there;
//! - [`oracle`]: `oracle`, the physical-limit anchor, told the simulator's
//!   true state (simulator only);
//! - [`service`]: `service`, `service-rules` (the service as shipped, with
//!   and without its model), the diagnostics `rules-*` and the model arms:
//!   the in-process [`scorer_engine::Engine`], run as a remote scorer;
//! - [`embedded`]: `service-embedded`, the same decision inside each router
//!   with the embedded balancer, paying its measured pick time;
//! - [`replicas`]: `service-replicas`, the service as several replicas
//!   sharing telemetry and load over a bus ([`load_gauges`]), each called
//!   by its share of the routers;
//! - [`model`]: the models of `model` (the shipped default) and
//!   `model-retrained` (run → log → train → run again, in-process);
//! - [`learning`]: `service-learning`, the service with the retraining
//!   loop beside it, promoting and rolling back during the run;
//! - [`per_router`]: many independent routers, one baseline instance each;
//! - [`registry`]: the table, the lists and predicates derived from it,
//!   building an arm by name, and how to add one; [`arm_spec`]: what a row
//!   says;
//! - [`Arm`]: a running arm, by kind.

mod arm;
pub mod arm_spec;
pub mod baselines;
pub mod embedded;
mod embedded_log;
pub mod learning;
#[cfg(test)]
mod learning_tests;
pub mod load_gauges;
pub mod model;
pub mod oracle;
pub mod per_router;
pub mod registry;
#[cfg(test)]
mod registry_tests;
pub mod replicas;
pub mod service;
pub mod service_ids;

pub use arm::Arm;
pub use arm_spec::{ArmSpec, Class, Kind, Model, Replication, Selection};
pub use registry::{
    ALL_POLICIES, ARMS, POLICIES, SIM_ONLY, build, check_names, is_known, is_model_arm,
    is_service_arm, is_shipped_arm, local, needs_models, selection_policy, spec,
};
