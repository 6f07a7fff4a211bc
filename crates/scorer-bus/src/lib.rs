//! The bus between scorer replicas, routers and agents: NATS subjects for
//! what is live, JetStream for what a newcomer must find, each message
//! checked before it is applied.
//!
//! - **Telemetry**: one worker report per message on
//!   `scorer.telemetry.<worker>` ([`subject::telemetry`]), the JSON of one
//!   snapshot of `POST /v1/telemetry`. The stream [`subject::TELEMETRY_STREAM`]
//!   keeps each worker's latest (one message per subject, as a JetStream
//!   key-value bucket does), so a replica that starts reads every worker's
//!   last report, then follows ([`TelemetryFeed`]).
//! - **Router load**: a router's absolute outstanding gauges on
//!   `scorer.load.<router>`, the JSON of `POST /v1/router/load` ([`LoadFeed`]).
//! - **Overrides**: the operators' overrides in force, in the key-value
//!   bucket [`subject::STATE_BUCKET`] under [`subject::OVERRIDES_KEY`]
//!   ([`SharedOverrides`], [`OverridesFeed`]).
//!
//! - **Decision and outcome records**: the log's own Arrow IPC batches on
//!   `scorer.records.<decisions|outcomes>.<replica>`, kept in the
//!   work-queue stream [`subject::RECORDS_STREAM`] until a log writer
//!   acknowledges them ([`Bus::publish_records`], [`RecordsFeed`]); each
//!   batch goes to one writer of the shared consumer
//!   [`subject::LOG_WRITERS_CONSUMER`], and [`WrittenIds`] keeps a writer
//!   from writing a batch delivered to it again.
//!
//! Every message carries its publisher in the [`subject::ORIGIN_HEADER`]
//! header (the overrides in their body), and a replica skips what its own
//! process published ([`Bus::origin`]). A
//! message larger than `bus.max_message_bytes`, not the JSON its subject
//! calls for, or naming another worker or router than its subject is
//! refused whole and counted ([`BusCounters`]); it is never applied.
//!
//! This crate owns the NATS client; the engine crate stays free of it, and
//! the service applies what the feeds yield through the same engine calls
//! as its HTTP endpoints.
//!
//! The design follows NVIDIA Dynamo's KV router, whose router replicas
//! share their load over NATS and whose workers publish their load
//! latest-value-wins, with a new router starting from a snapshot.

mod connect;
pub mod counters;
mod load;
mod log_writers;
mod overrides;
pub mod records;
pub mod subject;
mod telemetry;
pub mod written;

use std::sync::Arc;

pub use arrow;
pub use async_nats;
pub use connect::{Bus, BusError};
pub use counters::{BusCounters, Refusal};
pub use load::LoadFeed;
pub use log_writers::{Delivered, RecordsFeed};
pub use overrides::{OverridesFeed, SharedOverrides};
pub use telemetry::TelemetryFeed;
pub use written::WrittenIds;

/// A message from a peer, checked: who published it and what it says.
#[derive(Debug, Clone, PartialEq)]
pub struct Received<T> {
    /// The publisher's name (its [`subject::ORIGIN_HEADER`]); empty when it
    /// gave none.
    pub origin: Arc<str>,
    /// The payload.
    pub value: T,
}
