//! A balancer a router links, so that a pick costs microseconds and no
//! round trip.
//!
//! The [`Balancer`] holds a [`scorer_engine::Engine`] of its own and calls
//! it: the rules, dynamics, cost, model and selection code are the
//! service's, not a copy. Two sources feed it, as gRPC's weighted round
//! robin with out-of-band ORCA load reports and NVIDIA Dynamo's KV router
//! are fed:
//!
//! - **the view** ([`scorer_engine::view::View`]), which the service
//!   streams: every worker's latest telemetry report, replayed through the
//!   same ingest path the service runs, so health, penalty states and rule
//!   scores match the service's ([`Balancer::apply_view`]);
//! - **local evidence**: the router's own outstanding picks, outcome
//!   peak-EWMA, failures and outlier ejection, updated at once by
//!   [`Balancer::outcome`].
//!
//! When no view has come for `view_ttl_ms` (gRPC WRR's blackout period),
//! picks rest on local evidence alone ([`PickSource::Blackout`]); when no
//! candidate is known at all, the pick is uniform ([`PickSource::Uniform`]).
//! A pick never blocks on I/O and never fails for want of the service.
//!
//! With the `http` feature, [`follow::follow_view`] keeps a balancer's view
//! current from the service's `GET /v1/view` stream, reconnecting with
//! backoff and jitter, [`report::report_load`] reports the router's
//! outstanding picks, so that many routers act as one,
//! [`report_records::report_records`] sends its decisions and outcomes to
//! the service's decision log ([`records::RecordBuffer`]), and
//! [`model::fetch_model`] fetches the model the service runs, and
//! [`model_sync::sync_model`] follows its promotions and rollbacks.

mod apply;
mod balancer;
#[cfg(feature = "http")]
pub mod follow;
#[cfg(feature = "http")]
pub mod model;
#[cfg(feature = "http")]
pub mod model_sync;
pub mod records;
#[cfg(feature = "http")]
pub mod report;
#[cfg(feature = "http")]
pub mod report_records;
mod stats;

#[cfg(test)]
mod balancer_tests;
#[cfg(test)]
mod many_deciders_tests;
#[cfg(test)]
mod routed_tests;
#[cfg(test)]
mod test_views;

pub use apply::{ViewApplied, ViewError};
pub use balancer::{
    Balancer, BalancerConfig, BalancerConfigError, DEFAULT_LOAD_REPORT_MS, DEFAULT_VIEW_TTL_MS,
    MAX_ROUTER_ID_BYTES, Pick, PickError, PickSource,
};
pub use stats::BalancerStats;
