//! `trainer loop`: the retraining loop. Every `--every-s` seconds, a round
//!
//! 1. trains a candidate on the window's decisions ([`crate::window`]) with
//!    `trainer train`'s pipeline (streaming reader, `--memory-budget`,
//!    time split, parity on the validation rows and golden rows), into a
//!    staging directory ([`crate::promote`]);
//! 2. validates it as `trainer validate` does (golden rows through tract
//!    and LightGBM, the service's own vetting), and measures it against the
//!    served model on the held-out rows (MAE in log space);
//! 3. if a model was promoted, checks whether the model served before it
//!    would now do better on the decisions the promoted one served (the
//!    log's `model_version`), and rolls back when the gate says so;
//! 4. otherwise compares the candidate with the served model on the
//!    window's held-out decisions (the newest, which it did not train on)
//!    with `trainer compare`'s doubly robust estimate and bootstrap
//!    interval, and promotes it only when the gate ([`crate::gate`]) says
//!    so: published as `--models-dir/<model_version>`, then served through
//!    the service's admin API when one is given.
//!
//! Each round ends with one line saying what it decided and why. Time
//! comes from a [`Clock`], so tests run rounds without waiting; a stop
//! request is honoured between steps, and a staging directory never
//! becomes visible as a model.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use scorer_log::LogKind;
use scorer_model::Blend;

use crate::compare::{CompareOptions, compare_predictions};
use crate::dataset::{LogTable, list_log_files};
use crate::error::{Result, TrainerError};
use crate::gate::{
    Evidence, GateConfig, Hold, Promotion, Rollback, decide_promotion, decide_rollback,
};
use crate::pipeline::{TrainExtras, TrainOptions, run_train_with};
use crate::progress::Progress;
use crate::promote::{publish, remove_stale_staging, staging};
use crate::regression_metrics::Errors;
use crate::validate::run_validate_within;
use crate::window::{Window, load_judged, select_decisions};

pub use crate::served::{Serve, Served};

/// Name of the candidate directory inside the staging directory: the
/// prefix of every model version the loop writes (`loop-<8 hex>`).
pub const CANDIDATE_NAME: &str = "loop";

/// `trainer loop --window-decisions`'s default.
pub const DEFAULT_WINDOW_DECISIONS: usize = 200_000;

/// The sliding window, as the flags give it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum WindowSpec {
    /// The latest this many decisions with a target.
    Decisions(usize),
    /// Decisions logged in the last this many hours before the round.
    Hours(f64),
}

/// Everything `trainer loop` needs.
#[derive(Debug, Clone)]
pub struct LoopOptions {
    /// How to train (`out` is ignored: candidates go to `models_dir`).
    pub train: TrainOptions,
    /// Where promoted models are published, one directory per version.
    pub models_dir: PathBuf,
    /// The model the service serves when the loop starts; `None`: the
    /// rules alone.
    pub current: Option<PathBuf>,
    /// The model the service served before `current`, which the loop may
    /// roll back to; `None`: only models the loop promoted are rolled back.
    pub previous: Option<PathBuf>,
    /// The window each round trains and judges on.
    pub window: WindowSpec,
    /// The gate's thresholds.
    pub gate: GateConfig,
    /// The comparison's weight cap and bootstrap.
    pub compare: CompareOptions,
    /// Decide and report, but never promote nor roll back.
    pub forbid_promotion: bool,
    /// Stop after this many rounds.
    pub max_rounds: Option<u64>,
    /// Time between the starts of two rounds.
    pub every: Duration,
    /// Tests only: train every candidate on shuffled targets.
    #[doc(hidden)]
    pub shuffle_targets_seed: Option<u64>,
}

/// Time, for the loop: the wall clock and waiting, or a test's stand-in.
pub trait Clock {
    /// Now, Unix ms.
    fn now_ms(&self) -> i64;
    /// Waits `d`; false when a stop was requested meanwhile.
    fn wait(&mut self, d: Duration) -> bool;
}

/// The system clock, waiting in short slices so a stop request ends the
/// wait at once.
#[derive(Debug)]
pub struct SystemClock<'a> {
    /// Set by the stop handler.
    pub stop: &'a AtomicBool,
}

impl Clock for SystemClock<'_> {
    fn now_ms(&self) -> i64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
    }

    fn wait(&mut self, d: Duration) -> bool {
        let end = Instant::now() + d;
        while !self.stop.load(Ordering::SeqCst) {
            let left = end.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return true;
            }
            std::thread::sleep(left.min(Duration::from_millis(100)));
        }
        false
    }
}

/// What a round did.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// The candidate was published (and served, with a service).
    Promoted {
        /// Its directory.
        dir: PathBuf,
        /// Its model version.
        version: String,
    },
    /// The gate would promote, but promotion is forbidden.
    WouldPromote,
    /// The served model stays.
    Held,
    /// The promoted model was rolled back to the one before it.
    RolledBack,
    /// The round could not judge a candidate (too little data, a candidate
    /// that failed parity or vetting).
    Skipped,
}

/// One round's result: its number, its decision and the line saying why.
#[derive(Debug, Clone, PartialEq)]
pub struct Round {
    /// From 1.
    pub number: u64,
    /// What was decided.
    pub action: Action,
    /// `round N: …`.
    pub line: String,
}

/// The loop's state between rounds.
#[derive(Debug)]
struct State {
    served: Served,
    /// What was served before the last promotion, while it can be rolled
    /// back to.
    previous: Option<Served>,
}

/// Errors a round reports and survives: the next round may have the data
/// or a better candidate. (A call the service did not apply is reported by
/// the round itself, and leaves the loop's view of the served model
/// unchanged.)
fn skippable(e: &TrainerError) -> bool {
    matches!(
        e,
        TrainerError::NoData(_)
            | TrainerError::Parity(_)
            | TrainerError::Refused { .. }
            | TrainerError::MemoryBudget(_)
    )
}

/// The loop between rounds: what is served, what was served before it,
/// and the next round's number. [`run_loop`] drives it on a clock; a host
/// with its own time (the simulator) calls [`Looper::round`] itself.
#[derive(Debug)]
pub struct Looper {
    opts: LoopOptions,
    state: State,
    next: u64,
}

impl Looper {
    /// Checks `opts`, removes staging directories a killed loop left, and
    /// reads the served models.
    ///
    /// # Errors
    /// Bad options, an unreadable current or previous model, a models
    /// directory that cannot be cleaned.
    pub fn new(opts: LoopOptions) -> Result<Self> {
        check(&opts)?;
        remove_stale_staging(&opts.models_dir)?;
        let state = State {
            served: Served::of(opts.current.as_deref())?,
            previous: match &opts.previous {
                Some(p) => Some(Served::of(Some(p))?),
                None => None,
            },
        };
        Ok(Self {
            opts,
            state,
            next: 1,
        })
    }

    /// What is served now, as the loop knows it.
    pub fn served(&self) -> &Served {
        &self.state.served
    }

    /// One round, through `serve` when given; `None` when a stop was
    /// requested before it decided. A round that cannot judge (too little
    /// data, a candidate that fails parity or vetting) is
    /// [`Action::Skipped`].
    ///
    /// # Errors
    /// A round's error that the next round would meet again (an unreadable
    /// log, a models directory that cannot be written).
    pub fn round(
        &mut self,
        serve: Option<&dyn Serve>,
        clock: &dyn Clock,
        stop: &AtomicBool,
        progress: Progress,
    ) -> Result<Option<Round>> {
        let number = self.next;
        self.next += 1;
        match run_round(
            &self.opts,
            serve,
            clock,
            stop,
            progress,
            &mut self.state,
            number,
        ) {
            Ok(r) => Ok(r),
            Err(e) if skippable(&e) => Ok(Some(Round {
                number,
                action: Action::Skipped,
                line: format!("round {number}: skipped: {e}"),
            })),
            Err(e) => Err(e),
        }
    }
}

/// Runs the loop until `max_rounds`, or a stop request; calls `on_round`
/// after every round and returns them all.
///
/// # Errors
/// As [`Looper::new`] and [`Looper::round`].
pub fn run_loop(
    opts: &LoopOptions,
    serve: Option<&dyn Serve>,
    clock: &mut dyn Clock,
    stop: &AtomicBool,
    progress: Progress,
    on_round: &mut dyn FnMut(&Round),
) -> Result<Vec<Round>> {
    let mut looper = Looper::new(opts.clone())?;
    let mut rounds = Vec::new();
    while !stop.load(Ordering::SeqCst) {
        let Some(round) = looper.round(serve, clock, stop, progress)? else {
            break;
        };
        on_round(&round);
        let number = round.number;
        rounds.push(round);
        if opts.max_rounds.is_some_and(|m| number >= m) || !clock.wait(opts.every) {
            break;
        }
    }
    Ok(rounds)
}

fn check(opts: &LoopOptions) -> Result<()> {
    let bad = |m: String| Err(TrainerError::InvalidArgument(m));
    match opts.window {
        WindowSpec::Decisions(0) => return bad("--window-decisions must be >= 1".into()),
        WindowSpec::Hours(h) if !(h > 0.0 && h.is_finite()) => {
            return bad(format!("--window-hours must be > 0, got {h}"));
        }
        _ => {}
    }
    if !(opts.gate.min_gain_ms >= 0.0 && opts.gate.min_gain_ms.is_finite()) {
        return bad(format!(
            "--min-gain-ms must be a finite number of ms >= 0, got {}",
            opts.gate.min_gain_ms
        ));
    }
    if opts.compare.bootstrap == 0 {
        return bad("--bootstrap must be >= 1: the gate needs the interval".into());
    }
    if !(opts.compare.clip >= 1.0 && opts.compare.clip.is_finite()) {
        return bad(format!("--clip must be >= 1, got {}", opts.compare.clip));
    }
    Ok(())
}

/// One round; `None` when a stop was requested before it decided.
fn run_round(
    opts: &LoopOptions,
    serve: Option<&dyn Serve>,
    clock: &dyn Clock,
    stop: &AtomicBool,
    progress: Progress,
    state: &mut State,
    number: u64,
) -> Result<Option<Round>> {
    let stopped = || stop.load(Ordering::SeqCst);
    let window = match opts.window {
        WindowSpec::Decisions(n) => Window::Latest(n),
        WindowSpec::Hours(h) => Window::Since {
            ts_ms: clock.now_ms() - (h * 3_600_000.0) as i64,
        },
    };
    // Dropped at the end of the round, with whatever was not published.
    let stage = staging(&opts.models_dir)?;
    let train = TrainOptions {
        out: stage.path().join(CANDIDATE_NAME),
        ..opts.train.clone()
    };
    let extras = TrainExtras {
        window: Some(window),
        shuffle_targets_seed: opts.shuffle_targets_seed,
    };
    let summary = run_train_with(&train, &extras, progress)?;
    if stopped() {
        return Ok(None);
    }
    run_validate_within(&train.out, &[], opts.train.memory_budget_bytes, progress)?;
    let candidate = Served::of(Some(&train.out))?;
    let Some((valid_from_ms, _)) = summary.valid_ts_ms else {
        return Err(TrainerError::NoData("no validation rows".into()));
    };
    let sp = progress.spinner("comparing with the served model");
    let outcome_files = list_log_files(&opts.train.logs, LogKind::Outcomes)?;
    // What this round judges: the held-out decisions, and, while it may
    // be rolled back, those the served model scored.
    let rollback_version = state
        .previous
        .is_some()
        .then_some(state.served.version.as_str());
    let table = load_judged(
        &summary.decision_files,
        &outcome_files,
        valid_from_ms,
        rollback_version,
    )?;
    if stopped() {
        return Ok(None);
    }
    let rule = opts.train.target;
    let served = state.served.clone();

    let mut kept = String::new();
    if let Some(previous) = state.previous.clone() {
        let back = rollback_evidence(&table, &served, &previous, &rule, &opts.compare)?;
        let verdict = decide_rollback(&opts.gate, &back);
        if let Rollback::Keep(h) = verdict {
            let why = match h {
                Hold::TooFewDecisions => "too few decisions to judge",
                Hold::NoEstimate => "no estimate",
                Hold::IntervalNotAbove0 | Hold::GainBelowMinimum => "not faster beyond the noise",
            };
            kept = format!(
                "; {} kept over {}: {back} for going back, {why}",
                served.version, previous.version
            );
        }
        if let Rollback::RollBack = verdict {
            sp.finish_and_clear();
            let line = if opts.forbid_promotion {
                format!(
                    "round {number}: would roll back {} to {} (promotion forbidden): {back}, the previous model is faster",
                    served.version, previous.version
                )
            } else {
                if let Some(Err(e)) = serve.map(Serve::rollback) {
                    return Ok(Some(Round {
                        number,
                        action: Action::Skipped,
                        line: format!(
                            "round {number}: {} should roll back to {} ({back}) but the service did not: {e}",
                            served.version, previous.version
                        ),
                    }));
                }
                state.served = previous.clone();
                state.previous = None;
                format!(
                    "round {number}: rolled back {} to {}: {back}, the previous model is faster on the decisions {} served",
                    served.version, previous.version, served.version
                )
            };
            let action = if opts.forbid_promotion {
                Action::Held
            } else {
                Action::RolledBack
            };
            return Ok(Some(Round {
                number,
                action,
                line,
            }));
        }
    }

    let held_out = select_decisions(&table, |d| d.ts_ms >= valid_from_ms);
    drop(table);
    // The candidate's gain: served − candidate, the candidate the direct
    // method (the rules' own expectation is far off).
    let evidence = compare(&held_out, &candidate, &served, &rule, &opts.compare)?;
    let mae = mae_line(&held_out, &rule, &served, &candidate)?;
    sp.finish_and_clear();
    let (action, line) = match decide_promotion(&opts.gate, &evidence) {
        Promotion::Hold(h) => (
            Action::Held,
            format!(
                "round {number}: held {} against {}: {}{mae}{kept}",
                served.version,
                candidate.version,
                h.explain(&opts.gate, &evidence)
            ),
        ),
        Promotion::Promote if opts.forbid_promotion => (
            Action::WouldPromote,
            format!(
                "round {number}: would promote {} over {} (promotion forbidden): {evidence}, min-gain {:.3} ms{mae}",
                candidate.version, served.version, opts.gate.min_gain_ms
            ),
        ),
        Promotion::Promote => {
            if stopped() {
                return Ok(None);
            }
            let published = publish(&train.out, &opts.models_dir, &candidate.version)?;
            // The service may run in another directory: it gets the
            // absolute path; the line shows the path as given.
            let dir = std::fs::canonicalize(&published).unwrap_or_else(|_| published.clone());
            if let Some(Err(e)) = serve.map(|a| a.promote(&dir)) {
                return Ok(Some(Round {
                    number,
                    action: Action::Skipped,
                    line: format!(
                        "round {number}: wrote {} ({}) but the service did not serve it: {e}",
                        candidate.version,
                        published.display()
                    ),
                }));
            }
            state.previous = Some(served.clone());
            state.served = Served {
                dir: Some(dir.clone()),
                ..candidate.clone()
            };
            (
                Action::Promoted {
                    dir: dir.clone(),
                    version: candidate.version.clone(),
                },
                format!(
                    "round {number}: promoted {} over {} ({}): {evidence}, above min-gain {:.3} ms{mae}",
                    candidate.version,
                    served.version,
                    published.display(),
                    opts.gate.min_gain_ms
                ),
            )
        }
    };
    drop(stage);
    Ok(Some(Round {
        number,
        action,
        line,
    }))
}

/// `trainer compare --a A --b B` on `table`: the DR difference B − A and
/// its interval, with A's predictions as the direct method.
///
/// # Errors
/// As [`Served::predict`].
pub fn compare(
    table: &LogTable,
    a: &Served,
    b: &Served,
    rule: &crate::target::TargetRule,
    opts: &CompareOptions,
) -> Result<Evidence> {
    let (pa, pb) = (a.predict(&table.features)?, b.predict(&table.features)?);
    let r = compare_predictions(table, &pa, &pb, rule, &Blend::default(), opts);
    Ok(Evidence {
        decisions: r.a.off_policy.decisions,
        gain_ms: r.dr_latency_diff_ms,
        gain_ci_ms: r.dr_latency_diff_ci_ms,
    })
}

/// The rollback's evidence: on the decisions of `table` that `served`
/// scored (the log's `model_version`), the gain of serving `previous`
/// again (served minus previous DR mean latency, ms), with the served
/// model, trained on the logs, as the direct method.
///
/// # Errors
/// As [`compare`].
pub fn rollback_evidence(
    table: &LogTable,
    served: &Served,
    previous: &Served,
    rule: &crate::target::TargetRule,
    opts: &CompareOptions,
) -> Result<Evidence> {
    let since = select_decisions(table, |d| {
        d.model_version.as_deref() == Some(served.version.as_str())
    });
    Ok(compare(&since, served, previous, rule, opts)?.negated())
}

/// `; held-out MAE(log) candidate X, served Y` on the held-out decisions'
/// picked rows with an outcome.
fn mae_line(
    held_out: &LogTable,
    rule: &crate::target::TargetRule,
    served: &Served,
    candidate: &Served,
) -> Result<String> {
    let rows = held_out.labelled(rule);
    if rows.is_empty() {
        return Ok(String::new());
    }
    let mae = |s: &Served| -> Result<f64> {
        let p: Vec<f64> = s
            .predict(&rows.features)?
            .into_iter()
            .map(f64::from)
            .collect();
        Ok(Errors::compute(&p, &rows.targets).mae_log)
    };
    Ok(format!(
        "; held-out MAE(log) candidate {:.3}, served {:.3}",
        mae(candidate)?,
        mae(served)?
    ))
}
