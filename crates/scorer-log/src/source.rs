//! [`Source`]: who made a logged record — the service itself, or a router
//! whose balancer decided and sent its records to the service. The log's
//! queue gives each source its own budget, and counts drops per source.

use serde::Serialize;

/// Who made a record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    /// A decision the service made (`/v1/score`), or its outcome.
    Service,
    /// A decision a router's balancer made, or its outcome, received on
    /// `POST /v1/router/decisions`.
    Router,
}

impl Source {
    /// Both sources, in the order metrics list them.
    pub const ALL: [Source; 2] = [Source::Service, Source::Router];

    /// The label: `service` or `router`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Source::Service => "service",
            Source::Router => "router",
        }
    }
}
