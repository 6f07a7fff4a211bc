//! The driver of a decision: [`Engine::decide`] checks its call's request
//! into a `Decision`, which passes through the stages of
//! [`crate::stages`] in order: rules → freshness → dynamics → cost → model
//! → select → log → record. When no candidate is eligible, panic mode
//! ranks and picks among the live ones on their rule scores, ignoring
//! penalty states (Envoy's "panic threshold": fail open, never closed by
//! accident).

use std::sync::Arc;
use std::sync::atomic::Ordering;

use rand::RngCore;

use crate::Engine;
use crate::api::{ScoreRequest, ScoreResponse};
use crate::canary::ConfigArm::{self, Canary, Stable};
use crate::decision::{DecideCall, Decided, Decision, Output, ScoreError, ScoreMode};
use crate::stages::{self, DecisionStage as Stage, NoObserver, StageObserver};
use scorer_core::scoring::RequestContext;

impl Engine {
    /// Decide `call` (pick one of its candidates with the request's
    /// policy, or only show it for a preview), drawing randomness from
    /// `rng` (seed it for reproducible picks) and telling `observer` as
    /// each stage ends. A decision takes its id from the call, or else
    /// from the engine's source ([`Engine::with_ids`]), charges its pick
    /// and, when the attached log samples its id, queues its record. The
    /// answer is as the call's [`Output`] asked; the explanation, the
    /// ranking and the feature vectors are built only for
    /// [`Output::Explained`] (the feature vectors also for a logged
    /// decision).
    ///
    /// # Errors
    /// [`ScoreError`]: 422 kinds for bad input, `NoEligibleWorkers` (503)
    /// when every candidate is dead or unknown. Unknown workers alone are
    /// not errors; they come back ineligible.
    pub fn decide<'r>(
        &self,
        call: DecideCall<'r>,
        rng: &mut dyn RngCore,
        observer: &mut dyn StageObserver,
    ) -> Result<Decided<'r>, ScoreError> {
        let output = call.output;
        self.run(call, rng, observer, |mut d, hash, arm| match output {
            Output::Explained => Decided::Explained(stages::answer(d, hash, arm)),
            Output::Pick => {
                let pick = stages::compact(&d, arm);
                d.recycle();
                Decided::Pick(pick)
            }
            Output::Scores => {
                let scores = stages::scores(&mut d);
                d.recycle();
                Decided::Scores(scores)
            }
        })
    }

    /// The stages in order; `finish` builds the answer of the charged
    /// decision.
    fn run<'r, T>(
        &self,
        call: DecideCall<'r>,
        rng: &mut dyn RngCore,
        observer: &mut dyn StageObserver,
        finish: impl for<'c> FnOnce(
            Decision<'r>,
            Arc<str>,
            Option<(&'c crate::canary::Canary, ConfigArm)>,
        ) -> T,
    ) -> Result<T, ScoreError> {
        let DecideCall {
            req,
            context,
            now_ms,
            wall_ms,
            mode,
            output,
            blackout,
            decision_id,
            caller,
        } = call;
        let decision_id = match mode {
            ScoreMode::Preview => String::new(),
            ScoreMode::Decide => decision_id.unwrap_or_else(|| self.ids.next_id()),
        };
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
        let sink = self
            .log
            .as_deref()
            .filter(|log| mode == ScoreMode::Decide && log.sampled(&decision_id));
        let explain = output == Output::Explained;
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
        d.features = sink.is_some();
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
        if let Some(sink) = sink {
            let stamp = stages::Stamp {
                wall_ms,
                caller: caller.as_ref(),
                config_hash: &active.hash,
                arm,
            };
            stages::log(&d, stamp, sink);
        }
        observer.stage_done(Stage::Log);
        // The explained and scores answers show the decision id; a pick
        // gives it to the pending pick.
        let id = match output {
            Output::Pick => std::mem::take(&mut d.decision_id),
            Output::Scores | Output::Explained => d.decision_id.clone(),
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

    /// Decide `req` with `context` at monotonic `now_ms` under
    /// `decision_id`, explained (and logged when the attached log samples
    /// it): [`Engine::decide`] for callers that read the whole answer
    /// (tests, benches).
    ///
    /// # Errors
    /// As [`Engine::decide`].
    pub fn score(
        &self,
        req: &ScoreRequest,
        context: &RequestContext,
        now_ms: u64,
        decision_id: String,
        rng: &mut dyn RngCore,
    ) -> Result<ScoreResponse, ScoreError> {
        let call = DecideCall::new(req, context, now_ms)?
            .output(Output::Explained)
            .with_id(decision_id);
        self.run(call, rng, &mut NoObserver, stages::answer)
    }

    /// What a decision on `req` would show at `now_ms`, changing no state
    /// (a [`ScoreMode::Preview`] of [`Engine::decide`]; the decision id is
    /// empty).
    ///
    /// # Errors
    /// As [`Engine::decide`].
    pub fn preview(
        &self,
        req: &ScoreRequest,
        context: &RequestContext,
        now_ms: u64,
        rng: &mut dyn RngCore,
    ) -> Result<ScoreResponse, ScoreError> {
        let call = DecideCall::new(req, context, now_ms)?.preview();
        self.run(call, rng, &mut NoObserver, stages::answer)
    }
}
