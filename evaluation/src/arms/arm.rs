//! An arm as the simulator and the runners hold it: one of four kinds.
//! Every kind picks, learns from outcomes and follows drains ([`Router`]);
//! what else the simulator gives an arm, and what it charges for a
//! decision, follows from its kind alone.

use super::embedded::EmbeddedRouter;
use super::oracle::Omniscient;
use super::service::Remote;
use crate::router::Router;

/// A running arm.
pub enum Arm {
    /// Decides inside the router, at no cost, and learns each outcome at
    /// once; sees no telemetry. The baselines (with several routers, one
    /// instance per router: [`super::per_router::PerRouter`]).
    Local(Box<dyn Router + Send>),
    /// Told every worker's true expected delay before each pick
    /// ([`Omniscient::truth`]); decides for free. Simulator only.
    Oracle(Box<dyn Omniscient + Send>),
    /// A scorer across the network: the simulator charges each pick's
    /// score call (round trip, queueing at the scorer's cores, in-service
    /// time), delivers outcomes in batches half a round trip later and
    /// telemetry `telemetry_delay_ms` after the snapshot.
    Remote(Box<dyn Remote + Send>),
    /// The service's decision inside each router: pays its measured pick
    /// time, learns outcomes at once, and sees telemetry through the
    /// service's view stream and the other routers' load through the
    /// service's load board.
    Embedded(Box<EmbeddedRouter>),
}

impl std::fmt::Debug for Arm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Local(_) => "Arm::Local",
            Self::Oracle(_) => "Arm::Oracle",
            Self::Remote(_) => "Arm::Remote",
            Self::Embedded(_) => "Arm::Embedded",
        })
    }
}

impl Arm {
    /// What every kind does: pick, learn, drain.
    pub fn router(&mut self) -> &mut dyn Router {
        match self {
            Self::Local(r) => r.as_mut(),
            Self::Oracle(o) => o.as_mut(),
            Self::Remote(r) => r.as_mut(),
            Self::Embedded(e) => e.as_mut(),
        }
    }

    /// Picks that fell back to a uniform choice because the arm could not
    /// decide (a scorer that answered no eligible worker, a balancer
    /// without a view).
    pub fn fallbacks(&self) -> u64 {
        match self {
            Self::Remote(r) => r.fallbacks(),
            Self::Embedded(e) => e.fallbacks(),
            Self::Local(_) | Self::Oracle(_) => 0,
        }
    }
}
