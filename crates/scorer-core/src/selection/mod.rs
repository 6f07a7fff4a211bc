//! Worker selection policies.
//!
//! A router asks "which of these candidate workers should take this
//! request?". Upstream code has already filtered the pool down to eligible
//! [`Candidate`]s and given each a final score in `0..=100`; this module turns
//! that list into one pick plus the propensity (probability) with which every
//! candidate could have been picked, so that downstream evaluation can do
//! off-policy analysis.
//!
//! # Layout
//!
//! The layout follows tower's `balance::p2c` and pingora-load-balancing's
//! `selection/`: this file holds only the guide, the [`Policy`] trait, the
//! shared types and re-exports; every policy lives in its own file.
//!
//! | kind                   | file         | type                          | propensities            |
//! |------------------------|--------------|-------------------------------|-------------------------|
//! | [`PolicyKind::Max`]    | `max.rs`     | [`MaxScore`]                  | `1/k` over the `k` tied best |
//! | [`PolicyKind::Softmax`]| `softmax.rs` | [`Softmax`]                   | Boltzmann over normalised scores, weight-scaled |
//! | [`PolicyKind::P2c`]    | `p2c.rs`     | [`PowerOfTwoChoices`]         | exact marginal of the two-choice procedure |
//! | [`PolicyKind::Swrr`]   | `swrr.rs`    | [`SmoothWeightedRoundRobin`]  | degenerate: 1.0 on the pick |
//! | [`PolicyKind::Hash`]   | `hash.rs`    | [`ConsistentHash`]            | degenerate: 1.0 on the pick |
//! | [`PolicyKind::Prequal`]| `prequal.rs` | [`Prequal`]                   | exact marginal of `d` probes, `C(n−1−r, d−1)/C(n, d)` |
//! | (wrapper)              | `min_share.rs` | [`MinShareFloor`]             | `(1 − n·q)·p + q` |
//!
//! [`Selector`] (in `selector.rs`) bundles one instance of each policy plus
//! its [`SelectorConfig`] and dispatches on [`PolicyKind`]; it is `Send +
//! Sync` and meant to be shared across request threads by `&self`. Stateful
//! policies (SWRR current weights, the hash-ring cache) keep their state
//! behind a `std::sync::Mutex` that is held only for the O(n) bookkeeping of
//! one call.
//!
//! # Which input fields each policy uses
//!
//! | policy  | `score` | `weight` | `in_flight` | `key` | rng |
//! |---------|---------|----------|-------------|-------|-----|
//! | max     | yes     | no       | no          | no    | tie-break |
//! | softmax | yes     | mass multiplier | no   | no    | sampling |
//! | p2c     | yes     | no       | tie-break   | no    | two draws + coin |
//! | swrr    | `score × weight` | (same) | no    | no    | no  |
//! | hash    | no      | no       | bounded loads | yes | no  |
//! | prequal | latency fallback | no | no (reads `outstanding`, `cost`) | no | `d` probes |
//!
//! # Input contract and errors
//!
//! Every policy validates its input first and never panics:
//!
//! * an empty candidate list is [`SelectionError::Empty`];
//! * more than [`MAX_CANDIDATES`] is [`SelectionError::TooManyCandidates`];
//! * `score` must be finite and within `0..=100`
//!   ([`SelectionError::InvalidScore`]; NaN and ±inf are rejected);
//! * `weight` must be finite and `> 0` ([`SelectionError::InvalidWeight`]);
//! * `in_flight` must be finite and `>= 0` ([`SelectionError::InvalidInFlight`]);
//! * `cost`, when present, must be finite and `>= 0`
//!   (checked by `prequal` only, [`SelectionError::InvalidCost`]).
//!
//! Worker ids should be unique within one call. The hash policy rejects
//! duplicates ([`SelectionError::DuplicateWorker`]); SWRR lets duplicates
//! share one state entry; the stateless policies do not care.
//!
//! # Randomness and time
//!
//! Randomness is injected: every call takes `&mut R where R: rand::Rng`, so
//! tests can use a seeded `rand_chacha::ChaCha8Rng` and get reproducible pick
//! sequences. No policy reads the clock; SWRR state ageing counts calls, not
//! seconds.
//!
//! # Cost
//!
//! `max`, `softmax` and `p2c` allocate nothing but the returned
//! probabilities `Vec` (p2c sorts an index buffer kept in a thread-local
//! scratch vector that is reused across calls). A hash-ring lookup on a cache
//! hit allocates nothing beyond the probabilities `Vec` either: the
//! candidate→ring mapping is staged inside that `Vec` before it is filled.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

use std::fmt;
use std::str::FromStr;

use thiserror::Error;

mod hash;
mod max;
mod min_share;
mod p2c;
mod prequal;
mod selector;
mod softmax;
mod support;
mod swrr;

#[cfg(test)]
mod prequal_tests;
#[cfg(test)]
mod selector_tests;

pub use hash::{
    ConsistentHash, HASH_MAX_CACHED_NODES, HASH_MAX_CACHED_RINGS, HASH_MAX_RING_NODES,
    MAX_VIRTUAL_NODES, stable_hash64,
};
pub use max::MaxScore;
pub use min_share::{MinShareFloor, apply_min_share};
pub use p2c::PowerOfTwoChoices;
pub use prequal::{DEFAULT_PREQUAL_PROBES, DEFAULT_PREQUAL_Q_RIF, Prequal};
pub use selector::{
    DEFAULT_HASH_LOAD_FACTOR, DEFAULT_HASH_VIRTUAL_NODES, DEFAULT_MIN_SHARE, DEFAULT_TEMPERATURE,
    Selector, SelectorConfig,
};
pub use softmax::{SOFTMAX_MIN_TEMPERATURE, Softmax};
pub use support::recycle;
pub use swrr::{
    SWRR_MAX_ENTRIES, SWRR_STATE_TTL_CALLS, SWRR_SWEEP_INTERVAL, SmoothWeightedRoundRobin,
};

/// Largest number of candidates accepted in one call (65 536).
///
/// Bounds memory of the hash ring (`n × virtual nodes`) and of the SWRR
/// state map; larger lists are rejected with
/// [`SelectionError::TooManyCandidates`].
pub const MAX_CANDIDATES: usize = 1 << 16;

/// One eligible candidate as seen by a policy.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Candidate<'a> {
    /// Stable worker identifier. Keys SWRR state and hash-ring positions.
    pub worker_id: &'a str,
    /// Final score, finite, `0..=100` (higher is better).
    pub score: f64,
    /// Relative selection weight multiplier, finite and `> 0`
    /// (capacity × slow-start ramp); `1.0` normally.
    pub weight: f64,
    /// Picks handed to this worker not yet released (decayed in-flight
    /// estimate), finite and `>= 0`.
    pub in_flight: f64,
    /// Requests in flight (RIF) on this worker: exact outstanding picks, a
    /// count. Read by `prequal` only.
    pub outstanding: u32,
    /// The routing cost of a request on this worker, lower first, finite
    /// and `>= 0` when present (the engine's cost stage: the expected
    /// latency at the cost's exponent, C3's cubic cost by default). Read by
    /// `prequal` only, as its latency estimate, which falls back to the
    /// score when any candidate lacks it.
    pub cost: Option<f64>,
}

impl<'a> Candidate<'a> {
    /// A candidate with the given id and score, `weight = 1.0`,
    /// `in_flight = 0.0`, `outstanding = 0` and no latency estimate.
    /// Performs no validation (policies validate).
    pub fn new(worker_id: &'a str, score: f64) -> Self {
        Self {
            worker_id,
            score,
            weight: 1.0,
            in_flight: 0.0,
            outstanding: 0,
            cost: None,
        }
    }
}

/// Outcome of one selection.
#[derive(Debug, Clone, PartialEq)]
pub struct Selection {
    /// Index of the chosen candidate in the input slice (`< candidates.len()`).
    pub pick: usize,
    /// Propensity of each candidate, in input order: every entry is finite
    /// and in `[0, 1]`, and they sum to 1 within `1e-9`. For the
    /// deterministic policies (SWRR, hash) it is 1.0 on the pick and 0
    /// elsewhere.
    pub probabilities: Vec<f64>,
}

/// Which policy [`Selector::select`] should run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PolicyKind {
    /// Highest score; exact ties broken uniformly at random. See [`MaxScore`].
    Max,
    /// Temperature-controlled Boltzmann sampling. See [`Softmax`].
    Softmax,
    /// Power of two choices. See [`PowerOfTwoChoices`].
    P2c,
    /// nginx smooth weighted round robin. See [`SmoothWeightedRoundRobin`].
    Swrr,
    /// Consistent hashing with bounded loads. See [`ConsistentHash`].
    Hash,
    /// Prequal's hot-cold lexicographic rule over `d` probed candidates.
    /// See [`Prequal`].
    Prequal,
    /// No selection: [`Selector::select`] returns `Ok(None)` (after
    /// validating the candidates).
    None,
}

impl PolicyKind {
    /// All kinds, in declaration order.
    pub const ALL: [PolicyKind; 7] = [
        PolicyKind::Max,
        PolicyKind::Softmax,
        PolicyKind::P2c,
        PolicyKind::Swrr,
        PolicyKind::Hash,
        PolicyKind::Prequal,
        PolicyKind::None,
    ];

    /// Canonical lowercase name: `"max"`, `"softmax"`, `"p2c"`, `"swrr"`,
    /// `"hash"`, `"prequal"` or `"none"`. Round-trips through [`FromStr`].
    pub const fn as_str(self) -> &'static str {
        match self {
            PolicyKind::Max => "max",
            PolicyKind::Softmax => "softmax",
            PolicyKind::P2c => "p2c",
            PolicyKind::Swrr => "swrr",
            PolicyKind::Hash => "hash",
            PolicyKind::Prequal => "prequal",
            PolicyKind::None => "none",
        }
    }

    /// Whether the policy randomises its pick (and so reports non-degenerate
    /// propensities and honours the min-share floor): true for max, softmax,
    /// p2c and prequal.
    pub const fn is_stochastic(self) -> bool {
        matches!(
            self,
            PolicyKind::Max | PolicyKind::Softmax | PolicyKind::P2c | PolicyKind::Prequal
        )
    }
}

impl fmt::Display for PolicyKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for PolicyKind {
    type Err = SelectionError;

    /// Parses a canonical name (ASCII case-insensitive, surrounding
    /// whitespace ignored). Errors: [`SelectionError::UnknownPolicy`].
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let t = s.trim();
        PolicyKind::ALL
            .into_iter()
            .find(|k| k.as_str().eq_ignore_ascii_case(t))
            .ok_or_else(|| SelectionError::UnknownPolicy(t.to_owned()))
    }
}

/// Everything that can go wrong in this module. No policy panics; invalid
/// input is reported here instead.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum SelectionError {
    /// The candidate list was empty.
    #[error("no candidates to select from")]
    Empty,
    /// More than [`MAX_CANDIDATES`] candidates were passed.
    #[error("{len} candidates exceeds the limit of {max}")]
    TooManyCandidates {
        /// Number of candidates passed.
        len: usize,
        /// The limit, [`MAX_CANDIDATES`].
        max: usize,
    },
    /// A score was NaN, infinite or outside `0..=100`.
    #[error("candidate {index}: score {score} is not a finite value in 0..=100")]
    InvalidScore {
        /// Index of the offending candidate.
        index: usize,
        /// The rejected value.
        score: f64,
    },
    /// A weight was NaN, infinite, zero or negative.
    #[error("candidate {index}: weight {weight} is not a finite value > 0")]
    InvalidWeight {
        /// Index of the offending candidate.
        index: usize,
        /// The rejected value.
        weight: f64,
    },
    /// An in-flight estimate was NaN, infinite or negative.
    #[error("candidate {index}: in_flight {in_flight} is not a finite value >= 0")]
    InvalidInFlight {
        /// Index of the offending candidate.
        index: usize,
        /// The rejected value.
        in_flight: f64,
    },
    /// A cost was NaN, infinite or negative (prequal).
    #[error("candidate {index}: cost {cost} is not a finite value >= 0")]
    InvalidCost {
        /// Index of the offending candidate.
        index: usize,
        /// The rejected value.
        cost: f64,
    },
    /// A softmax temperature was negative, NaN or infinite.
    #[error("temperature {0} is not a finite value >= 0")]
    InvalidTemperature(f64),
    /// The same worker id appeared twice where ids must be unique (hash).
    #[error("worker id {0:?} appears more than once")]
    DuplicateWorker(String),
    /// A [`SelectorConfig`] (or policy constructor) field was out of range.
    #[error("invalid selector configuration: {field} {reason}")]
    InvalidConfig {
        /// The [`SelectorConfig`] field (or policy constructor argument).
        field: &'static str,
        /// What its value must be.
        reason: &'static str,
    },
    /// [`PolicyKind::from_str`] got an unknown name.
    #[error(
        "unknown selection policy {0:?} (expected max, softmax, p2c, swrr, hash, prequal or none)"
    )]
    UnknownPolicy(String),
}

/// A selection policy: turns a validated-on-entry candidate list into one
/// pick with its propensities.
///
/// Implementations must validate `candidates` (see the module docs), never
/// panic, and return probabilities satisfying the [`Selection`] contract.
/// `key` is the request's affinity key (only [`ConsistentHash`] uses it);
/// `rng` is the only source of randomness.
pub trait Policy {
    /// Selects one candidate.
    ///
    /// # Errors
    /// Any [`SelectionError`] describing invalid input.
    fn select<R: rand::Rng + ?Sized>(
        &self,
        candidates: &[Candidate<'_>],
        key: &str,
        rng: &mut R,
    ) -> Result<Selection, SelectionError>;
}
