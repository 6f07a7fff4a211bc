//! A score decision: the request is checked into a
//! `Decision`, which passes through the
//! stages of [`crate::stages`] in order: rules → freshness → dynamics →
//! cost → model → select → record. When no candidate is eligible, panic
//! mode ranks and picks among the live ones on their rule scores, ignoring
//! penalty states (Envoy's "panic threshold": fail open, never closed by
//! accident).

use std::sync::atomic::Ordering;

use rand::RngCore;

use crate::Engine;
use std::sync::Arc;

use crate::api::{CompactPick, MAX_KEY_BYTES, ScoreRequest, ScoreResponse};
use crate::canary::ConfigArm::{self, Canary, Stable};
use crate::decision::Decision;
use crate::no_eligible::NoEligible;
use crate::stages::{self, DecisionStage as Stage, NoObserver, StageObserver};
use scorer_core::scoring::RequestContext;
use scorer_core::selection::SelectionError;

/// Why a score request was refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ScoreError {
    /// `candidates` is empty (422).
    #[error("`candidates` must name at least one worker")]
    NoCandidates,
    /// More distinct candidates than `server.max_candidates` (422).
    #[error("{count} distinct candidates, at most {max} are allowed")]
    TooManyCandidates {
        /// Distinct candidates in the request.
        count: usize,
        /// The limit.
        max: usize,
    },
    /// The key is empty or longer than [`MAX_KEY_BYTES`] (422).
    #[error("`key` must be 1..={MAX_KEY_BYTES} bytes, got {0}")]
    BadKey(usize),
    /// A candidate id fails [`scorer_core::telemetry::validate::is_valid_worker_id`]
    /// (422), as telemetry refuses such worker ids.
    #[error(
        "candidate {0} is not a valid worker id (1..=128 bytes; no control or invisible formatting characters; no whitespace at either end)"
    )]
    BadCandidate(usize),
    /// `policy` is not a policy name (422).
    #[error("unknown policy `{0}`: expected max, softmax, p2c, swrr, hash, prequal or none")]
    BadPolicy(String),
    /// `temperature` is negative, NaN or infinite (422).
    #[error("`temperature` must be finite and >= 0, got {}", scorer_core::fmt::exact(*.0))]
    BadTemperature(f64),
    /// No candidate can be picked: each is dead, unknown, unhealthy, or
    /// drained or disabled by an operator (503); the message names the
    /// operators' overrides.
    #[error("no eligible workers: {0}")]
    NoEligibleWorkers(NoEligible),
    /// The selector refused its input; a bug, answered 500 and logged.
    #[error("selection failed: {0}")]
    Selection(SelectionError),
}

/// Whether a scoring is a routing decision or only shows one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScoreMode {
    /// A decision: the pick is charged to its worker's in-flight count and
    /// remembered for feedback; the decision and model
    /// counters, the model latency histogram and breaker, the shadow
    /// comparison and each worker's last final score are updated.
    Decide,
    /// A preview (`GET /v1/debug/score`, the status page): the same scores,
    /// features and explanations a decision would get at that instant, but
    /// nothing above changes and no shadow model runs, so looking at the
    /// service never moves what it decides.
    Preview,
}

impl Engine {
    /// Score `req`'s candidates at monotonic `now_ms` and pick one with the
    /// request's policy, drawing randomness from `rng` (seed it for
    /// reproducible picks). `context` is the request's context already merged
    /// with headers. A [`ScoreMode::Decide`] scoring.
    ///
    /// # Errors
    /// [`ScoreError`]: 422 kinds for bad input, `NoEligibleWorkers` (503) when
    /// every candidate is dead or unknown. Unknown workers alone are not
    /// errors; they come back ineligible.
    pub fn score(
        &self,
        req: &ScoreRequest,
        context: &RequestContext,
        now_ms: u64,
        decision_id: String,
        rng: &mut dyn RngCore,
    ) -> Result<ScoreResponse, ScoreError> {
        let mode = ScoreMode::Decide;
        let (obs, blackout) = (&mut NoObserver, false);
        let finish = stages::answer;
        self.score_in(
            mode,
            req,
            context,
            now_ms,
            decision_id,
            rng,
            obs,
            blackout,
            true,
            finish,
        )
    }

    /// [`Engine::score`] without a view of the workers' telemetry (a
    /// router's balancer whose last view is older than its time to live):
    /// every candidate the engine has a slot for is live and scores 100
    /// before dynamics, penalty states and reported signals count for
    /// nothing, and the routing cost rests on local evidence alone
    /// (outstanding picks, the outcome peak-EWMA, observed failures and
    /// outlier ejection). Candidates never seen stay ineligible.
    ///
    /// # Errors
    /// As [`Engine::score`].
    pub fn score_blackout(
        &self,
        req: &ScoreRequest,
        context: &RequestContext,
        now_ms: u64,
        decision_id: String,
        rng: &mut dyn RngCore,
    ) -> Result<ScoreResponse, ScoreError> {
        let mode = ScoreMode::Decide;
        let (obs, blackout) = (&mut NoObserver, true);
        let finish = stages::answer;
        self.score_in(
            mode,
            req,
            context,
            now_ms,
            decision_id,
            rng,
            obs,
            blackout,
            true,
            finish,
        )
    }

    /// [`Engine::score`], telling `observer` as each stage ends (the service
    /// times the stages with it).
    ///
    /// # Errors
    /// As [`Engine::score`].
    pub fn score_observed(
        &self,
        req: &ScoreRequest,
        context: &RequestContext,
        now_ms: u64,
        decision_id: String,
        rng: &mut dyn RngCore,
        observer: &mut dyn StageObserver,
    ) -> Result<ScoreResponse, ScoreError> {
        let mode = ScoreMode::Decide;
        self.score_in(
            mode,
            req,
            context,
            now_ms,
            decision_id,
            rng,
            observer,
            false,
            true,
            stages::answer,
        )
    }

    /// [`Engine::score`] as a [`ScoreMode::Preview`]: what a decision would
    /// show at `now_ms`, changing no state (the decision id is empty).
    ///
    /// # Errors
    /// As [`Engine::score`].
    pub fn preview(
        &self,
        req: &ScoreRequest,
        context: &RequestContext,
        now_ms: u64,
        rng: &mut dyn RngCore,
    ) -> Result<ScoreResponse, ScoreError> {
        let (mode, id) = (ScoreMode::Preview, String::new());
        let obs = &mut NoObserver;
        let finish = stages::answer;
        self.score_in(
            mode, req, context, now_ms, id, rng, obs, false, true, finish,
        )
    }

    /// [`Engine::score`] answered compactly: the same decision, pick,
    /// propensity and effects (the pick charged and remembered, the
    /// counters, self-check, model statistics and each worker's last final
    /// score), but no explanation, ranking or feature vector is built, and
    /// the candidates' rule scores come from their [`WorkerTerms`] while
    /// those hold. With `blackout`, as [`Engine::score_blackout`].
    ///
    /// [`WorkerTerms`]: crate::worker_terms
    ///
    /// # Errors
    /// As [`Engine::score`].
    pub fn pick<'r>(
        &self,
        req: &'r ScoreRequest,
        context: &'r RequestContext,
        now_ms: u64,
        decision_id: String,
        rng: &mut dyn RngCore,
        blackout: bool,
    ) -> Result<CompactPick<'r>, ScoreError> {
        let mode = ScoreMode::Decide;
        let obs = &mut NoObserver;
        self.score_in(
            mode,
            req,
            context,
            now_ms,
            decision_id,
            rng,
            obs,
            blackout,
            false,
            |d, _, arm| {
                let answer = stages::compact(&d, arm);
                d.recycle();
                answer
            },
        )
    }

    /// The pipeline: check the request, then each stage in order; `finish`
    /// builds the answer of the charged decision.
    #[allow(clippy::too_many_arguments)]
    fn score_in<'r, T>(
        &self,
        mode: ScoreMode,
        req: &'r ScoreRequest,
        context: &'r RequestContext,
        now_ms: u64,
        decision_id: String,
        rng: &mut dyn RngCore,
        observer: &mut dyn StageObserver,
        blackout: bool,
        explain: bool,
        finish: impl for<'c> FnOnce(
            Decision<'r>,
            Arc<str>,
            Option<(&'c crate::canary::Canary, ConfigArm)>,
        ) -> T,
    ) -> Result<T, ScoreError> {
        let stable = self.active.load();
        let canary = self.canary.load();
        let arm = canary.as_deref().map(|c| (c, c.split.takes(&req.key)));
        let stable_selector;
        let (active, selector) = match arm {
            Some((c, true)) => (&c.candidate, &c.selector),
            _ => {
                stable_selector = self.selector.load();
                (&**stable, &**stable_selector)
            }
        };
        let arm = arm.map(|(c, canary)| (c, if canary { Canary } else { Stable }));
        let cfg = &*active.config;
        let sharding = self.sharding.as_ref();
        let routers = self.routers_sharing.load(Ordering::Relaxed);
        let mut d = Decision::new(
            mode,
            req,
            context,
            now_ms,
            decision_id,
            cfg,
            sharding,
            routers,
            self.overrides.load(),
        )?;
        d.blackout = blackout;
        d.explain = explain;
        if !explain {
            d.terms_under = Some(active.hash.clone());
        }
        stages::rules(&mut d, &self.registry, cfg);
        observer.stage_done(Stage::Rules);
        stages::freshness(&mut d, cfg);
        observer.stage_done(Stage::Freshness);
        if let Err(e) = stages::dynamics(&mut d, cfg) {
            if d.decides() {
                self.counters.no_eligible.fetch_add(1, Ordering::Relaxed);
            }
            return Err(e);
        }
        observer.stage_done(Stage::Dynamics);
        if !d.panic {
            let on = cfg.locality.enabled;
            let index = self.routing_index().filter(|_| on);
            let rates = self.prefix_hit_rates().filter(|_| on);
            stages::cost(&mut d, cfg, index, rates);
        }
        observer.stage_done(Stage::Cost);
        stages::model(&mut d, &self.models, cfg);
        observer.stage_done(Stage::Model);
        stages::select(&mut d, selector, rng)?;
        observer.stage_done(Stage::Select);
        // The explained answer shows the decision id; a compact one gives
        // it to the pending pick.
        let id = if explain {
            d.decision_id.clone()
        } else {
            std::mem::take(&mut d.decision_id)
        };
        stages::charge(
            &d,
            id,
            &self.pending,
            &self.counters,
            &self.self_check,
            cfg,
            arm,
            self.routing_index()
                .map(|ix| (ix, self.routed_outbox.as_ref())),
        );
        let answer = finish(d, active.hash.clone(), arm);
        observer.stage_done(Stage::Record);
        Ok(answer)
    }
}
