//! One decision in flight: the request, checked, and the working set of its
//! candidates that every stage reads and extends, in the order of
//! `crate::stages`; beside it, the call that asks for it ([`DecideCall`],
//! with its id source, [`DecisionIds`]), its answer ([`Decided`]), its
//! mode and why it may be refused ([`ScoreError`]).

mod call;
mod decided;
mod error;
mod ids;
mod mode;

pub use call::{DecideCall, Output};
pub use decided::Decided;
pub use error::{MAX_CLIENT_REGION_BYTES, ScoreError};
pub use ids::{DecisionIds, RouterIds, SequenceIds, UuidV7Ids};
pub use mode::ScoreMode;

use std::collections::hash_map::Entry;
use std::hash::BuildHasher;
use std::sync::Arc;

use crate::api::{MAX_KEY_BYTES, ModelDecision, ScoreRequest, ShadowDecision};
use crate::config::Config;
use crate::overrides::{OverrideKind, OverrideTable};
use crate::scratch::{self, Buffers, Scratch};
use scorer_core::dynamics::EvidenceSnapshot;
use scorer_core::features::{CandidateEvidence, FEATURE_COUNT};
use scorer_core::key::{KeyFingerprint, ShardingStrategy};
use scorer_core::scoring::{Explained, RequestContext};
use scorer_core::selection::PolicyKind;
use scorer_core::state::{WorkerSlot, WorkerView};

/// One candidate while it is being scored.
#[derive(Debug)]
pub(crate) struct Scored {
    pub slot: Option<Arc<WorkerSlot>>,
    pub view: Option<Arc<WorkerView>>,
    /// How much the snapshot is trusted by age, 0..=1 (0 when unknown).
    pub freshness: f64,
    /// Past `freshness.fresh_ms` but not dead: scored on pulled signals.
    pub stale: bool,
    pub e: Explained,
    pub rule: f64,
    /// Rule score before dynamics; what panic mode ranks on.
    pub base: f64,
    pub reason: Option<&'static str>,
    pub live: bool,
    pub state: &'static str,
    /// Selection weight (capacity × slow start).
    pub ramp: f64,
    pub evidence: EvidenceSnapshot,
    /// Trust in the candidate's snapshot, fraction 0..=1.
    pub trust: f64,
    /// What the cost stage used, its routing cost and expected latency, once it ran.
    pub cost_evidence: Option<CandidateEvidence>,
    /// The operator's override in force, if any.
    pub operator: Option<OverrideKind>,
    /// The operator's weight (1 without a `weight` override).
    pub operator_weight: f64,
    /// What the cost's locality term knew of the key here, once it ran.
    pub locality: Option<scorer_core::locality::LocalityEstimate>,
    /// The decayed hit rate of the key's prefix here, once the cost ran and
    /// the pair has outcomes that said hit or miss.
    pub prefix_hit_rate: Option<f64>,
}

impl Scored {
    /// A candidate with no telemetry yet: freshness and trust 0, not live;
    /// its score explained when `explain`.
    pub(crate) fn unknown(
        slot: Option<Arc<WorkerSlot>>,
        view: Option<Arc<WorkerView>>,
        explain: bool,
    ) -> Self {
        Self {
            slot,
            view,
            freshness: 0.0,
            stale: false,
            e: Explained::with_explanation(explain),
            rule: 0.0,
            base: 0.0,
            reason: None,
            live: false,
            state: "unknown",
            ramp: 0.0,
            evidence: EvidenceSnapshot::default(),
            trust: 0.0,
            cost_evidence: None,
            operator: None,
            operator_weight: 1.0,
            locality: None,
            prefix_hit_rate: None,
        }
    }

    /// The score selection compares: the rule score in panic mode (penalties
    /// ignored), the final score otherwise.
    pub(crate) fn selection_score(&self, panic: bool) -> f64 {
        if panic { self.base } else { self.e.score }
    }
}

/// A decision as it passes through the stages.
#[derive(Debug)]
pub(crate) struct Decision<'r> {
    pub mode: ScoreMode,
    /// Whether the answer explains itself: adjustments, reasons and every
    /// candidate's feature vector. A compact decision computes the same
    /// scores and pick, bit for bit, and builds none of them.
    pub explain: bool,
    /// Whether every candidate's feature vector is built although nothing
    /// is explained: the decision log reads them.
    pub features: bool,
    /// The hash of the configuration deciding, when the rules stage may
    /// take the candidates' [`crate::worker_terms::WorkerTerms`].
    pub terms_under: Option<Arc<str>>,
    pub req: &'r ScoreRequest,
    pub context: &'r RequestContext,
    pub now_ms: u64,
    pub decision_id: String,
    pub policy: PolicyKind,
    pub key: KeyFingerprint<'r>,
    pub key_hash: u64,
    /// Distinct candidate ids, in request order.
    pub ids: Vec<&'r str>,
    /// One per id, filled by the rules stage.
    pub scored: Vec<Scored>,
    /// Indices the pick is drawn from, ascending: the eligible candidates, or
    /// the live ones in panic mode.
    pub selectable: Vec<usize>,
    pub panic: bool,
    /// No view of the workers' telemetry: every known candidate is live
    /// and healthy, and is scored on local evidence alone.
    pub blackout: bool,
    /// Routers deciding on the pool, this one included (1 for the service).
    pub routers: u32,
    /// The operators' overrides, as the decision started.
    pub overrides: Arc<OverrideTable>,
    /// Every candidate's 42-feature vector.
    pub observations: Vec<[f32; FEATURE_COUNT]>,
    /// Per candidate: the model's action and the rule action, when the
    /// model stage ran on it.
    pub model_actions: Vec<Option<f64>>,
    pub rule_actions: Vec<Option<f64>>,
    pub model: ModelDecision,
    pub shadow: Option<ShadowDecision>,
    /// Per candidate, its pick probability (`None` without a selection).
    pub probability: Vec<Option<f64>>,
    pub pick: Option<usize>,
    /// The stages' other working buffers.
    pub scratch: Scratch,
}

impl<'r> Decision<'r> {
    /// Checks `req` against `cfg` and sets up an empty working set under the
    /// operators' `overrides`; a request naming no policy takes `cfg`'s
    /// default for `routers` deciding on the pool.
    ///
    /// # Errors
    /// The 422 kinds of [`ScoreError`].
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        mode: ScoreMode,
        req: &'r ScoreRequest,
        context: &'r RequestContext,
        now_ms: u64,
        decision_id: String,
        cfg: &Config,
        sharding: &dyn ShardingStrategy,
        routers: u32,
        overrides: Arc<OverrideTable>,
    ) -> Result<Self, ScoreError> {
        if req.key.is_empty() || req.key.len() > MAX_KEY_BYTES {
            return Err(ScoreError::BadKey(req.key.len()));
        }
        let policy = match &req.policy {
            Some(p) => p
                .parse::<PolicyKind>()
                .map_err(|_| ScoreError::BadPolicy(p.clone()))?,
            None => cfg
                .selection
                .policy_for(routers)
                .unwrap_or(PolicyKind::Softmax),
        };
        if let Some(t) = req.temperature
            && !(t.is_finite() && t >= 0.0)
        {
            return Err(ScoreError::BadTemperature(t));
        }
        if req.candidates.is_empty() {
            return Err(ScoreError::NoCandidates);
        }
        let Buffers {
            ids,
            mut scored,
            mut selectable,
            mut probability,
            mut scratch,
        } = scratch::take();
        let mut ids = scratch::relabel(ids);
        // foldhash: candidate ids are request input, but capped in number
        // (`server.max_candidates`) and the hasher is randomly seeded. Two
        // distinct ids of one hash are told apart by a scan.
        let seen = &mut scratch.seen;
        seen.clear();
        seen.reserve(req.candidates.len());
        for (i, c) in req.candidates.iter().enumerate() {
            if !scorer_core::telemetry::validate::is_valid_worker_id(c) {
                return Err(ScoreError::BadCandidate(i));
            }
            let c = c.as_str();
            let distinct = match seen.entry(scratch.ids_hasher.hash_one(c)) {
                Entry::Vacant(v) => {
                    v.insert(ids.len() as u32);
                    true
                }
                Entry::Occupied(o) => ids[*o.get() as usize] != c && !ids.contains(&c),
            };
            if distinct {
                ids.push(c);
            }
        }
        scored.clear();
        scored.reserve(ids.len());
        selectable.clear();
        probability.clear();
        if ids.len() > cfg.server.max_candidates {
            return Err(ScoreError::TooManyCandidates {
                count: ids.len(),
                max: cfg.server.max_candidates,
            });
        }
        Ok(Self {
            mode,
            explain: true,
            features: false,
            terms_under: None,
            req,
            context,
            now_ms,
            decision_id,
            policy,
            key: KeyFingerprint::parse(&req.key, sharding),
            key_hash: scorer_core::locality::hash_str(&req.key),
            scored,
            ids,
            selectable,
            panic: false,
            blackout: false,
            routers,
            overrides,
            observations: Vec::new(),
            model_actions: Vec::new(),
            rule_actions: Vec::new(),
            model: ModelDecision::default(),
            shadow: None,
            probability,
            pick: None,
            scratch,
        })
    }

    /// Gives the decision's buffers back to its thread's pool.
    pub(crate) fn recycle(self) {
        let Self {
            ids,
            mut scored,
            selectable,
            probability,
            scratch,
            ..
        } = self;
        scored.clear();
        scratch::give(Buffers {
            ids: scratch::relabel(ids),
            scored,
            selectable,
            probability,
            scratch,
        });
    }

    /// Whether this is a routing decision (not a preview).
    pub(crate) fn decides(&self) -> bool {
        self.mode == ScoreMode::Decide
    }

    /// Whether candidate `i` is in the selectable set.
    pub(crate) fn in_set(&self) -> Vec<bool> {
        let mut v = vec![false; self.scored.len()];
        for &i in &self.selectable {
            v[i] = true;
        }
        v
    }
}
