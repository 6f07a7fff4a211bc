//! [`Selector`]: one instance of every policy plus configuration, dispatched
//! on [`PolicyKind`].
//!
//! The selector is `Send + Sync` and intended to live in an `Arc` shared by
//! all request threads; [`Selector::select`] takes `&self`. The only shared
//! mutable state is the SWRR current-weight map and the hash-ring cache,
//! each behind its own `std::sync::Mutex` held for a single O(n) pass (or a
//! cache lookup). Stateless policies (max, softmax, p2c, prequal) take no
//! lock.

use crate::selection::min_share::apply_min_share;
use crate::selection::support::validate;
use crate::selection::{
    Candidate, ConsistentHash, DEFAULT_PREQUAL_PROBES, DEFAULT_PREQUAL_Q_RIF, MaxScore, Policy,
    PolicyKind, PowerOfTwoChoices, Prequal, Selection, SelectionError, SmoothWeightedRoundRobin,
    Softmax,
};

/// Default softmax temperature (0.1, dimensionless: a candidate one full
/// score-spread below the best gets `e^-10 ≈ 4.5e-5` of its mass).
pub const DEFAULT_TEMPERATURE: f64 = 0.1;

/// Default virtual nodes per worker on the hash ring (160, as in
/// ketama/nginx `hash ... consistent`).
pub const DEFAULT_HASH_VIRTUAL_NODES: u32 = 160;

/// Default bounded-load factor `c` for the hash policy (1.25, as suggested
/// by Mirrokni et al. 2018 and used by HAProxy's `hash-balance-factor 125`).
pub const DEFAULT_HASH_LOAD_FACTOR: f64 = 1.25;

/// Default minimum share (0.0: exploration floor off).
pub const DEFAULT_MIN_SHARE: f64 = 0.0;

/// Configuration for a [`Selector`]. Checked by [`Selector::new`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SelectorConfig {
    /// Softmax temperature used when a call passes `temperature: None`.
    /// Dimensionless, finite, `>= 0` (below 1e-6 means `max`). Default
    /// [`DEFAULT_TEMPERATURE`] (0.1).
    pub default_temperature: f64,
    /// Virtual nodes per worker on the hash ring, `1..=`
    /// [`MAX_VIRTUAL_NODES`](crate::selection::MAX_VIRTUAL_NODES) (4096).
    /// Default [`DEFAULT_HASH_VIRTUAL_NODES`] (160).
    pub hash_virtual_nodes: u32,
    /// Bounded-load factor for the hash policy, finite and `>= 1`. Default
    /// [`DEFAULT_HASH_LOAD_FACTOR`] (1.25).
    pub hash_load_factor: f64,
    /// Exploration floor: minimum pick probability per candidate for the
    /// stochastic policies, `0..=1`, clamped to `1/n` per call. Default
    /// [`DEFAULT_MIN_SHARE`] (0.0 = off).
    pub min_share: f64,
    /// Candidates the prequal policy probes per pick, `>= 1` (`>= n`
    /// probes all). Default [`DEFAULT_PREQUAL_PROBES`] (3).
    pub prequal_probes: u32,
    /// Prequal's hot/cold RIF quantile, finite and in `(0, 1]`. Default
    /// [`DEFAULT_PREQUAL_Q_RIF`] (0.84).
    pub prequal_q_rif: f64,
}

impl Default for SelectorConfig {
    fn default() -> Self {
        Self {
            default_temperature: DEFAULT_TEMPERATURE,
            hash_virtual_nodes: DEFAULT_HASH_VIRTUAL_NODES,
            hash_load_factor: DEFAULT_HASH_LOAD_FACTOR,
            min_share: DEFAULT_MIN_SHARE,
            prequal_probes: DEFAULT_PREQUAL_PROBES,
            prequal_q_rif: DEFAULT_PREQUAL_Q_RIF,
        }
    }
}

/// Stateful, thread-safe worker selector. See the module docs.
#[derive(Debug)]
pub struct Selector {
    config: SelectorConfig,
    swrr: SmoothWeightedRoundRobin,
    hash: ConsistentHash,
    prequal: Prequal,
}

impl Default for Selector {
    /// A selector with [`SelectorConfig::default`].
    fn default() -> Self {
        let config = SelectorConfig::default();
        Self {
            config,
            swrr: SmoothWeightedRoundRobin::new(),
            // The default constants are in range (asserted by the
            // `default_config_is_valid` test), so skipping the check is sound.
            hash: ConsistentHash::new_unchecked(config.hash_virtual_nodes, config.hash_load_factor),
            prequal: Prequal::default(),
        }
    }
}

impl Selector {
    /// Builds a selector after checking `config`.
    ///
    /// # Errors
    /// [`SelectionError::InvalidConfig`] if `default_temperature` is
    /// negative/NaN/infinite, `hash_virtual_nodes` is outside
    /// `1..=`[`MAX_VIRTUAL_NODES`](crate::selection::MAX_VIRTUAL_NODES),
    /// `hash_load_factor` is not finite and
    /// `>= 1`, `min_share` is not finite and in `0..=1`, `prequal_probes`
    /// is 0, or `prequal_q_rif` is not finite and in `(0, 1]`.
    pub fn new(config: SelectorConfig) -> Result<Self, SelectionError> {
        if !(config.default_temperature.is_finite() && config.default_temperature >= 0.0) {
            return Err(SelectionError::InvalidConfig {
                field: "default_temperature",
                reason: "must be finite and >= 0",
            });
        }
        if !(config.min_share.is_finite() && (0.0..=1.0).contains(&config.min_share)) {
            return Err(SelectionError::InvalidConfig {
                field: "min_share",
                reason: "must be finite and in 0..=1",
            });
        }
        let hash = ConsistentHash::new(config.hash_virtual_nodes, config.hash_load_factor)?;
        let prequal = Prequal::new(config.prequal_probes, config.prequal_q_rif)?;
        Ok(Self {
            config,
            swrr: SmoothWeightedRoundRobin::new(),
            hash,
            prequal,
        })
    }

    /// The configuration this selector was built with.
    pub fn config(&self) -> &SelectorConfig {
        &self.config
    }

    /// The SWRR policy instance (for state inspection/reset).
    pub fn swrr(&self) -> &SmoothWeightedRoundRobin {
        &self.swrr
    }

    /// The consistent-hash policy instance (for cache inspection).
    pub fn hash(&self) -> &ConsistentHash {
        &self.hash
    }

    /// Scores-to-pick for one request.
    ///
    /// * `policy`: which policy to run. [`PolicyKind::None`] validates the
    ///   candidates and returns `Ok(None)`; every other kind returns
    ///   `Ok(Some(selection))`.
    /// * `candidates`: eligible workers (non-empty, at most
    ///   [`MAX_CANDIDATES`](crate::selection::MAX_CANDIDATES); see the module
    ///   guide for field ranges).
    /// * `key`: request affinity key; only the hash policy reads it.
    /// * `temperature`: softmax temperature override (dimensionless, `>= 0`);
    ///   `None` uses `config.default_temperature`. Ignored (not validated)
    ///   by the other policies.
    /// * `rng`: the only source of randomness.
    ///
    /// The min-share floor ([`SelectorConfig::min_share`]) is applied to
    /// max, softmax, p2c and prequal only.
    ///
    /// # Errors
    /// [`SelectionError::Empty`], [`SelectionError::TooManyCandidates`],
    /// [`SelectionError::InvalidScore`], [`SelectionError::InvalidWeight`],
    /// [`SelectionError::InvalidInFlight`] for bad input;
    /// [`SelectionError::InvalidTemperature`] for a negative/NaN/infinite
    /// softmax temperature; [`SelectionError::DuplicateWorker`] for repeated
    /// ids under the hash policy.
    pub fn select<R: rand::Rng + ?Sized>(
        &self,
        policy: PolicyKind,
        candidates: &[Candidate<'_>],
        key: &str,
        temperature: Option<f64>,
        rng: &mut R,
    ) -> Result<Option<Selection>, SelectionError> {
        let mut selection = match policy {
            PolicyKind::None => {
                validate(candidates)?;
                return Ok(None);
            }
            PolicyKind::Max => MaxScore.select(candidates, key, rng)?,
            PolicyKind::Softmax => {
                let t = temperature.unwrap_or(self.config.default_temperature);
                Softmax::new(t)?.select(candidates, key, rng)?
            }
            PolicyKind::P2c => PowerOfTwoChoices.select(candidates, key, rng)?,
            PolicyKind::Prequal => self.prequal.select(candidates, key, rng)?,
            PolicyKind::Swrr => return self.swrr.select(candidates, key, rng).map(Some),
            PolicyKind::Hash => return self.hash.select(candidates, key, rng).map(Some),
        };
        apply_min_share(&mut selection, self.config.min_share, rng)?;
        Ok(Some(selection))
    }
}
