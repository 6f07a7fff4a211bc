//! `service-learning`: the service as shipped, starting on its rules
//! alone, with the retraining loop (`trainer loop`, its library
//! [`trainer::retrain_loop::Looper`] and its defaults) running beside it
//! on the run's own decision log. Only what the loop's gate promotes ever
//! scores; what it rolls back stops scoring.
//!
//! Every [`ROUND_EVERY_MS`] of simulated time the decision log is closed
//! (its files become readable, as a deployed log's roll makes them) and a
//! new segment opens; the loop trains on its window of the decisions so
//! far, validates and compares the candidate with what is served, and
//! decides. Its decision reaches the service [`ROUND_TIME_MS`] later, the
//! simulated time a round takes; the simulator does not advance while the
//! loop works, so the run stays a pure function of (scenario, seed). The
//! loop sees only the log: what the service decided, with propensities,
//! and what the routers reported back.
//!
//! The loop runs as `trainer loop` does with its defaults (window, gate,
//! comparison), but more often: a 60 s run cannot wait `--every-s 300`.

use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use rand_chacha::ChaCha8Rng;
use scorer_core::clock::SystemClock;
use scorer_core::telemetry::Snapshot;
use scorer_engine::config::Config;
use scorer_log::{DecisionLog, DecisionRecord, DecisionSink, LogConfig, OutcomeRecord};
use scorer_model::config::ModelConfig;
use scorer_model::{ModelHub, Slot};
use serde::Serialize;
use trainer::error::{Result as TrainerResult, TrainerError};
use trainer::retrain_loop::{
    Action, Clock, DEFAULT_WINDOW_DECISIONS, LoopOptions, Looper, Serve, WindowSpec,
};

use super::model::SIM_BUDGET_US;
use super::service::{ModelSpread, Remote, ServiceRouter};
use super::service_ids::wall;
use crate::router::{Outcome, Pick, PickRequest, Router};

/// Simulated time between the starts of two rounds, ms.
pub const ROUND_EVERY_MS: f64 = 15_000.0;

/// Simulated time from a round's start to its decision reaching the
/// service, ms: a round on this machine trains, validates and compares in
/// about this long.
pub const ROUND_TIME_MS: f64 = 2_000.0;

/// What the loop asked the service to do.
#[derive(Debug, Clone, PartialEq)]
enum Change {
    Promote(PathBuf),
    Rollback,
}

/// The loop's calls, kept until the round's time has passed. A promotion
/// is vetted at once, as `POST /v1/admin/model/promote` vets it before
/// answering.
#[derive(Debug)]
struct Calls<'a> {
    cfg: &'a ModelConfig,
    made: RefCell<Vec<Change>>,
}

impl Serve for Calls<'_> {
    fn promote(&self, dir: &Path) -> TrainerResult<()> {
        let hub = ModelHub::load(
            &model_cfg(self.cfg, Some(dir)),
            Arc::new(SystemClock::new()),
        );
        if let Slot::Refused { message, .. } = &hub.current().primary {
            return Err(TrainerError::Service {
                url: "the simulated service".to_owned(),
                reason: format!("model {} refused: {message}", dir.display()),
            });
        }
        self.made
            .borrow_mut()
            .push(Change::Promote(dir.to_path_buf()));
        Ok(())
    }

    fn rollback(&self) -> TrainerResult<()> {
        self.made.borrow_mut().push(Change::Rollback);
        Ok(())
    }
}

/// The model settings serving `dir` (`None`: the rules alone).
fn model_cfg(base: &ModelConfig, dir: Option<&Path>) -> ModelConfig {
    let mut cfg = base.clone();
    cfg.budget_us = SIM_BUDGET_US;
    match dir {
        Some(d) => {
            d.clone_into(&mut cfg.dir);
            cfg.enabled = true;
        }
        None => cfg.enabled = false,
    }
    cfg
}

/// The loop's clock: simulated wall time; it never waits.
struct SimClock(i64);

impl Clock for SimClock {
    fn now_ms(&self) -> i64 {
        self.0
    }

    fn wait(&mut self, _d: Duration) -> bool {
        true
    }
}

/// The service's decision log, closed and reopened in a new segment
/// directory (`seg-<n>`) before each round.
#[derive(Debug)]
struct SegmentedLog {
    root: PathBuf,
    cfg: LogConfig,
    current: Mutex<Arc<DecisionLog>>,
    segments: AtomicU64,
}

impl SegmentedLog {
    fn start(root: &Path, cfg: &LogConfig) -> std::result::Result<Self, String> {
        let first = crate::runner::start_log(&root.join("seg-0"), cfg)?;
        Ok(Self {
            root: root.to_path_buf(),
            cfg: cfg.clone(),
            current: Mutex::new(first),
            segments: AtomicU64::new(1),
        })
    }

    fn log(&self) -> Arc<DecisionLog> {
        self.current
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Closes the current segment (everything accepted is written) and
    /// opens the next.
    fn roll(&self) -> std::result::Result<(), String> {
        let n = self.segments.fetch_add(1, Ordering::Relaxed);
        let next = crate::runner::start_log(&self.root.join(format!("seg-{n}")), &self.cfg)?;
        let old = std::mem::replace(
            &mut *self.current.lock().unwrap_or_else(PoisonError::into_inner),
            next,
        );
        old.shutdown().map_err(|e| format!("decision log: {e}"))
    }

    fn shutdown(&self) {
        let _ = self.log().shutdown();
    }
}

impl DecisionSink for SegmentedLog {
    fn sampled(&self, decision_id: &str) -> bool {
        self.log().sampled(decision_id)
    }

    fn log_decision(&self, rec: DecisionRecord) -> bool {
        self.log().log_decision(rec)
    }

    fn log_outcome(&self, rec: OutcomeRecord) -> bool {
        self.log().log_outcome(rec)
    }

    fn room(&self) -> usize {
        self.log().room()
    }
}

/// One round as results.json reports it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LearningRound {
    /// When it started, simulated s.
    pub at_s: f64,
    /// `promoted`, `rolled_back`, `held`, `skipped` or `error`.
    pub action: String,
    /// The loop's line for it.
    pub line: String,
}

/// What results.json says about `service-learning`'s loop.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LearningInfo {
    /// Simulated time between rounds, ms.
    pub round_every_ms: f64,
    /// Simulated time a round's decision takes to reach the service, ms.
    pub round_time_ms: f64,
    /// Decisions each round trains and judges on.
    pub window_decisions: usize,
    /// Every round, in order.
    pub rounds: Vec<LearningRound>,
    /// Models served by the end (promotions applied).
    pub promotions: u64,
    /// Rollbacks applied.
    pub rollbacks: u64,
    /// What scored at the end: a model version, or `rules`.
    pub served_at_end: String,
}

/// The `service-learning` arm.
pub struct LearningRouter {
    inner: ServiceRouter,
    hub: Arc<ModelHub>,
    model: ModelConfig,
    log: Arc<SegmentedLog>,
    looper: Looper,
    work: PathBuf,
    next_round_ms: f64,
    pending: Vec<(f64, Change)>,
    current: Option<PathBuf>,
    previous: Option<Option<PathBuf>>,
    rounds: Vec<LearningRound>,
    promotions: u64,
    rollbacks: u64,
}

impl std::fmt::Debug for LearningRouter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LearningRouter")
            .field("work", &self.work)
            .finish_non_exhaustive()
    }
}

impl LearningRouter {
    /// The service as shipped over `n` workers, on the rules, with its
    /// log and the loop's models in a fresh directory under the system's
    /// temporary directory (removed on drop). With `shuffle_targets`, every
    /// candidate is trained on shuffled targets: a model that has learned
    /// nothing, which the gate must keep out.
    ///
    /// # Errors
    /// The log or the loop could not start.
    pub fn new(n: usize, config: &Config, shuffle_targets: bool) -> Result<Self, String> {
        static RUN: AtomicU64 = AtomicU64::new(0);
        let work = std::env::temp_dir().join(format!(
            "evaluate-learning-{}-{}",
            std::process::id(),
            RUN.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&work);
        let logs = work.join("logs");
        let models_dir = work.join("models");
        std::fs::create_dir_all(&models_dir)
            .map_err(|e| format!("{}: {e}", models_dir.display()))?;
        let log = Arc::new(SegmentedLog::start(&logs, &config.log)?);
        let model = config.model.clone();
        let hub = Arc::new(ModelHub::unloaded(
            &model_cfg(&model, None),
            Arc::new(SystemClock::new()),
        ));
        let inner = ServiceRouter::shipped(n, None, config.clone())
            .with_sink(log.clone())
            .with_models(hub.clone());
        let opts = LoopOptions {
            train: trainer::pipeline::TrainOptions {
                logs: vec![logs],
                out: models_dir.clone(),
                params: trainer::train::TrainParams::default(),
                target: trainer::dataset::TargetRule::default(),
                valid_fraction: 0.2,
                memory_budget_bytes: trainer::budget::DEFAULT_MEMORY_BUDGET_BYTES,
                sample: None,
                network: None,
                spill_dir: None,
            },
            models_dir,
            current: None,
            previous: None,
            window: WindowSpec::Decisions(DEFAULT_WINDOW_DECISIONS),
            gate: trainer::gate::GateConfig::default(),
            compare: trainer::compare::CompareOptions::default(),
            forbid_promotion: false,
            max_rounds: None,
            every: Duration::from_millis(ROUND_EVERY_MS as u64),
            shuffle_targets_seed: shuffle_targets.then_some(7),
        };
        let looper = Looper::new(opts).map_err(|e| format!("trainer loop: {e}"))?;
        Ok(Self {
            inner,
            hub,
            model,
            log,
            looper,
            work,
            next_round_ms: ROUND_EVERY_MS,
            pending: Vec::new(),
            current: None,
            previous: None,
            rounds: Vec::new(),
            promotions: 0,
            rollbacks: 0,
        })
    }

    /// Applies the loop's decisions whose time has come.
    fn apply_due(&mut self, now_ms: f64) {
        while self.pending.first().is_some_and(|(at, _)| *at <= now_ms) {
            let (_, change) = self.pending.remove(0);
            let next = match &change {
                Change::Promote(dir) => Some(dir.clone()),
                Change::Rollback => match &self.previous {
                    Some(p) => p.clone(),
                    None => continue,
                },
            };
            if !self
                .hub
                .reload(&model_cfg(&self.model, next.as_deref()))
                .applied
            {
                continue;
            }
            let before = std::mem::replace(&mut self.current, next);
            match change {
                Change::Promote(_) => {
                    self.previous = Some(before);
                    self.promotions += 1;
                }
                Change::Rollback => {
                    self.previous = None;
                    self.rollbacks += 1;
                }
            }
        }
    }

    /// Runs a round when one is due.
    fn maybe_round(&mut self, now_ms: f64) {
        if now_ms < self.next_round_ms {
            return;
        }
        self.next_round_ms += ROUND_EVERY_MS;
        let at_s = (now_ms / 1_000.0 * 1_000.0).round() / 1_000.0;
        let mut note = |action: &str, line: String| {
            self.rounds.push(LearningRound {
                at_s,
                action: action.to_owned(),
                line,
            });
        };
        if let Err(e) = self.log.roll() {
            note("error", e);
            return;
        }
        let calls = Calls {
            cfg: &self.model,
            made: RefCell::new(Vec::new()),
        };
        let clock = SimClock(i64::try_from(wall(now_ms)).unwrap_or(i64::MAX));
        let stop = AtomicBool::new(false);
        let progress = trainer::progress::Progress::hidden();
        let round = self.looper.round(Some(&calls), &clock, &stop, progress);
        let made = calls.made.into_inner();
        match round {
            Ok(Some(r)) => {
                let action = match r.action {
                    Action::Promoted { .. } => "promoted",
                    Action::RolledBack => "rolled_back",
                    Action::Held | Action::WouldPromote => "held",
                    Action::Skipped => "skipped",
                };
                note(action, r.line);
            }
            Ok(None) => {}
            Err(e) => note("error", e.to_string()),
        }
        let at = now_ms + ROUND_TIME_MS;
        self.pending.extend(made.into_iter().map(|c| (at, c)));
    }

    /// What the loop did in the run.
    pub fn info(&self) -> LearningInfo {
        LearningInfo {
            round_every_ms: ROUND_EVERY_MS,
            round_time_ms: ROUND_TIME_MS,
            window_decisions: DEFAULT_WINDOW_DECISIONS,
            rounds: self.rounds.clone(),
            promotions: self.promotions,
            rollbacks: self.rollbacks,
            served_at_end: self
                .hub
                .current()
                .primary
                .model()
                .map_or_else(|| "rules".to_owned(), |m| m.card.model_version.clone()),
        }
    }
}

impl Drop for LearningRouter {
    fn drop(&mut self) {
        self.log.shutdown();
        let _ = std::fs::remove_dir_all(&self.work);
    }
}

impl Router for LearningRouter {
    fn pick(&mut self, req: &PickRequest<'_>, rng: &mut ChaCha8Rng) -> Pick {
        self.apply_due(req.now_ms);
        self.inner.pick(req, rng)
    }

    fn outcome(&mut self, o: &Outcome<'_>) {
        self.inner.outcome(o);
    }

    fn drain(&mut self, worker: usize, drained: bool, now_ms: f64) {
        self.inner.drain(worker, drained, now_ms);
    }
}

impl Remote for LearningRouter {
    fn telemetry(&mut self, batch: &[Snapshot], now_ms: f64) {
        self.apply_due(now_ms);
        self.inner.telemetry(batch, now_ms);
        self.maybe_round(now_ms);
    }

    fn fallbacks(&self) -> u64 {
        self.inner.fallbacks()
    }

    fn set_decision_id_prefix(&mut self, prefix: &str) {
        self.inner.set_decision_id_prefix(prefix);
    }

    fn model_spread(&self) -> Option<ModelSpread> {
        self.inner.model_spread()
    }

    fn self_check_samples(&self) -> Option<Vec<(f64, f64)>> {
        self.inner.self_check_samples()
    }

    fn learning(&self) -> Option<LearningInfo> {
        Some(self.info())
    }
}
