//! `trainer synth`: synthetic decision and outcome logs from a documented
//! generative model of worker behaviour, in the service's exact log schema.
//!
//! # How the rows are built
//!
//! Everything the service would compute is computed by the service's own
//! code: each candidate is a real [`WorkerView`] (smoothed telemetry,
//! flags, history), scored by [`scorer_core::scoring::rule_score`] with the
//! default [`ScoringConfig`], turned into the 42-feature vector by
//! [`scorer_core::features::observation`] (same imputation and clamping as the
//! service), picked by the service's [`Softmax`] policy over the rule scores
//! (the logged `probability` is that policy's propensity), and written as
//! [`DecisionRecord`] / [`OutcomeRecord`] through the log's own
//! [`decisions_batch`] / [`outcomes_batch`] and Parquet writer properties,
//! under the log's own file names. So `read_dir` reads these files exactly
//! like the service's.
//!
//! # The generative model
//!
//! A pool of `workers` (default 16) in three regions. Each worker has fixed
//! base levels drawn from the seed (CPU 0.2–0.85, queue 0–30 requests,
//! disk IO await 1–45 ms with one worker in eight at 45–90 ms, cache hit
//! rate 0.5–0.99, RTT p99 3–20 ms, error rate 0–1 %, memory 5–60 %); every
//! [`STEP_DECISIONS`] decisions each signal moves by an AR(1) step around its
//! base (φ = 0.95), and compaction switches on with probability 0.3 % and
//! off with 3 % per step. One worker in eight does not report disk IO
//! await (the service imputes 50 ms); that worker's disk still acts on
//! latency. One worker in five does not report available memory. Report
//! ages are 0–3 s (never dead), every worker is past its warm-up, network
//! loss (0.1 %), memtable (1 GB) and free disk (60 %) are constant.
//!
//! A request has a type (GET 50 %, PUT 30 %, DELETE 5 %, MGET 15 %), a key
//! `prefix:shard:id` over six prefixes (10 % without a numeric shard), a
//! client deadline (60 % of requests; 30, 50, 100, 200 or 500 ms), a batch
//! size (MGET 2–64 keys; otherwise 1 or absent) and a client region (80 %).
//! `candidates`
//! (default 4) distinct workers are drawn uniformly from the pool.
//!
//! The picked worker's latency, in ms, is `mean · exp(0.6·z − 0.18)`
//! (`z` standard normal), with
//!
//! ```text
//! mean = 2
//!      + 60 · max(0, cpu − 0.55)             CPU saturation
//!      + 0.3 · queue_depth                   queueing
//!      + 25 · compacting                     compaction stalls
//!      + 30 · (1 − cache_hit_rate)           misses (GET and MGET only)
//!      + 0.3 · rtt_p99_ms
//!      + 0.5 · batch_size                    (MGET only)
//!      + 2.0 · disk_io_await_ms              PUT only: the hidden effect
//! ```
//!
//! The last term is the interaction the rule scorer does not know: the rule
//! scorer deducts for disk IO await only above 50 ms, and for every request
//! type (doubled for writes), while here any disk latency hurts PUTs and
//! never hurts reads. A model trained on the logs can learn it (features
//! `req_put` × `disk_io_await_ms`); the rule score cannot rank PUT
//! candidates by it.
//!
//! A request fails with probability `error_rate + 0.2 %`, or when its
//! latency exceeds its deadline (the outcome then records the deadline as
//! latency and `success = false`). 2 % of outcomes are never reported (no
//! outcome row), as with lost feedback.
//!
//! Decisions are 1–40 ms apart (uniform), starting at
//! [`SYNTH_START_MS`] (2026-11-01T00:00:00Z), so a time split is meaningful.
//! Everything is a pure function of the seed and the configuration.

use std::fs::File;
use std::path::{Path, PathBuf};

use parquet::arrow::ArrowWriter;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use scorer_core::features::{ObservationInputs, observation};
use scorer_core::key::{KeyFingerprint, SecondSegmentSharding};
use scorer_core::scoring::ScoringConfig;
use scorer_core::scoring::{RequestContext, RequestType, RuleInputs, rule_score};
use scorer_core::selection::{Candidate, Softmax};
use scorer_core::state::WorkerView;
use scorer_log::naming::final_path;
use scorer_log::rolling::writer_properties;
use scorer_log::{
    CandidateRow, DecisionRecord, LogConfig, LogKind, OutcomeRecord, decisions_batch,
    outcomes_batch,
};

use crate::error::{Result, TrainerError, io_err};
use crate::synth_worker::{SimWorker, mean_latency_ms, normal, stand_in_evidence};

/// Unix ms of the first synthetic decision (2026-11-01T00:00:00Z).
pub const SYNTH_START_MS: i64 = 1_793_491_200_000;
/// Worker signals take one AR(1) step every this many decisions.
pub const STEP_DECISIONS: usize = 10;
/// Policy name written in the `policy` column.
pub const SYNTH_POLICY: &str = "softmax";

const PREFIXES: [&str; 6] = ["user", "order", "session", "cart", "catalog", "orders_v2"];
pub(crate) const REGIONS: [&str; 3] = ["shanghai", "beijing", "shenzhen"];
const DEADLINES_MS: [u64; 5] = [30, 50, 100, 200, 500];
/// Server monotonic ms at the first decision: workers registered long before.
pub(crate) const MONO_START_MS: u64 = 3_600_000;

/// What `trainer synth` generates.
#[derive(Debug, Clone, PartialEq)]
pub struct SynthConfig {
    /// Number of decisions (each has `candidates` rows in the decisions log
    /// and at most one outcome).
    pub decisions: usize,
    /// RNG seed; the output is a pure function of the configuration.
    pub seed: u64,
    /// Workers in the pool, >= `candidates`.
    pub workers: usize,
    /// Candidates per decision, >= 1.
    pub candidates: usize,
    /// Softmax temperature of the logging policy (dimensionless, > 0;
    /// higher explores more).
    pub temperature: f64,
    /// Decisions per Parquet file (a decisions and an outcomes file each).
    pub decisions_per_file: usize,
}

impl Default for SynthConfig {
    fn default() -> Self {
        Self {
            decisions: 10_000,
            seed: 1,
            workers: 16,
            candidates: 4,
            temperature: 0.5,
            decisions_per_file: 50_000,
        }
    }
}

/// Largest `--workers`: the simulated pool is held in memory (a few
/// hundred bytes per worker).
pub const MAX_WORKERS: usize = 100_000;
/// Largest `--candidates`: the service's default cap on candidates per
/// score request ([`scorer_core::limits::DEFAULT_MAX_CANDIDATES`]).
pub const MAX_CANDIDATES: usize = scorer_core::limits::DEFAULT_MAX_CANDIDATES;
/// Largest `--rows-per-file`: a file's decisions are held in memory until
/// it is written.
pub const MAX_DECISIONS_PER_FILE: usize = 1_000_000;

impl SynthConfig {
    /// Checks the ranges documented on the fields and on [`MAX_WORKERS`],
    /// [`MAX_CANDIDATES`] and [`MAX_DECISIONS_PER_FILE`].
    ///
    /// # Errors
    /// [`TrainerError::InvalidArgument`] naming the offending value.
    pub fn validate(&self) -> Result<()> {
        let bad = |m: String| Err(TrainerError::InvalidArgument(m));
        if self.decisions == 0 {
            return bad("--rows must be >= 1".into());
        }
        if self.workers > MAX_WORKERS || self.candidates > MAX_CANDIDATES {
            return bad(format!(
                "need --workers ({}) <= {MAX_WORKERS} and --candidates ({}) <= {MAX_CANDIDATES}",
                self.workers, self.candidates
            ));
        }
        if self.candidates == 0 || self.workers < self.candidates {
            return bad(format!(
                "need 1 <= --candidates ({}) <= --workers ({})",
                self.candidates, self.workers
            ));
        }
        if !(self.temperature.is_finite() && self.temperature > 0.0) {
            return bad(format!(
                "--temperature must be a finite number > 0, got {}",
                self.temperature
            ));
        }
        if !(1..=MAX_DECISIONS_PER_FILE).contains(&self.decisions_per_file) {
            return bad(format!(
                "--rows-per-file must be in 1..={MAX_DECISIONS_PER_FILE}, got {}",
                self.decisions_per_file
            ));
        }
        Ok(())
    }
}

/// Streaming generator of synthetic decisions (see the module docs).
#[derive(Debug)]
pub struct Synth {
    cfg: SynthConfig,
    rng: ChaCha8Rng,
    workers: Vec<SimWorker>,
    scoring: ScoringConfig,
    policy: Softmax,
    index: usize,
    ts_ms: i64,
}

impl Synth {
    /// A generator for `cfg`.
    ///
    /// # Errors
    /// [`TrainerError::InvalidArgument`] if `cfg` is out of range.
    pub fn new(cfg: SynthConfig) -> Result<Self> {
        cfg.validate()?;
        let mut rng = ChaCha8Rng::seed_from_u64(cfg.seed);
        let workers = (0..cfg.workers)
            .map(|i| SimWorker::new(i, &mut rng))
            .collect();
        let policy = Softmax::new(cfg.temperature)
            .map_err(|e| TrainerError::InvalidArgument(e.to_string()))?;
        Ok(Synth {
            cfg,
            rng,
            workers,
            scoring: ScoringConfig::default(),
            policy,
            index: 0,
            ts_ms: SYNTH_START_MS,
        })
    }

    /// The next decision and its outcome (`None` when the outcome is lost),
    /// or `None` after `cfg.decisions` decisions.
    pub fn next_decision(&mut self) -> Option<(DecisionRecord, Option<OutcomeRecord>)> {
        if self.index >= self.cfg.decisions {
            return None;
        }
        if self.index.is_multiple_of(STEP_DECISIONS) {
            for w in &mut self.workers {
                w.step(&mut self.rng);
            }
        }
        let i = self.index;
        self.index += 1;
        if i > 0 {
            self.ts_ms += self.rng.random_range(1..=40);
        }
        let rng = &mut self.rng;
        let now_ms = MONO_START_MS + u64::try_from(self.ts_ms - SYNTH_START_MS).unwrap_or(0);

        // Request.
        let rt = match rng.random_range(0..100) {
            0..50 => RequestType::Get,
            50..80 => RequestType::Put,
            80..85 => RequestType::Delete,
            _ => RequestType::Mget,
        };
        let prefix_i = rng.random_range(0..PREFIXES.len());
        let prefix = PREFIXES[prefix_i];
        let key = if rng.random_bool(0.1) {
            format!("{prefix}:profile:{}", rng.random_range(0..100_000))
        } else {
            format!(
                "{prefix}:{}:{}",
                rng.random_range(0..4096),
                rng.random_range(0..100_000)
            )
        };
        let timeout_ms = rng
            .random_bool(0.6)
            .then(|| DEADLINES_MS[rng.random_range(0..DEADLINES_MS.len())]);
        let batch_size = match rt {
            RequestType::Mget => Some(rng.random_range(2..=64)),
            _ => rng.random_bool(0.5).then_some(1),
        };
        let client_region = rng
            .random_bool(0.8)
            .then(|| REGIONS[rng.random_range(0..REGIONS.len())].to_string());
        let ctx = RequestContext {
            request_type: Some(rt),
            client_region: client_region.clone(),
            timeout_ms,
            batch_size,
        };
        let fp = KeyFingerprint::parse(&key, &SecondSegmentSharding);
        let value_size_bytes = 256u64 << prefix_i;

        // Candidates: distinct workers, uniformly.
        let mut ids: Vec<usize> = (0..self.workers.len()).collect();
        for j in 0..self.cfg.candidates {
            let k = rng.random_range(j..ids.len());
            ids.swap(j, k);
        }
        ids.truncate(self.cfg.candidates);
        let views: Vec<WorkerView> = ids
            .iter()
            .map(|&w| self.workers[w].view(now_ms, rng))
            .collect();
        let inputs = RuleInputs {
            cfg: &self.scoring,
            dead_after_ms: scorer_core::telemetry::DEFAULT_DEAD_AFTER_MS,
            request_type: Some(rt),
            now_ms,
            warmup: true,
        };
        let scores: Vec<f64> = views
            .iter()
            .map(|v| rule_score(v, &inputs).0.score)
            .collect();
        let best = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let cands: Vec<Candidate<'_>> = views
            .iter()
            .zip(&scores)
            .map(|(v, s)| Candidate::new(&v.worker_id, *s))
            .collect();
        let probs = self
            .policy
            .probabilities(&cands)
            .unwrap_or_else(|_| vec![1.0 / cands.len() as f64; cands.len()]);
        let u: f64 = rng.random();
        let mut acc = 0.0;
        let pick = probs
            .iter()
            .position(|p| {
                acc += p;
                u < acc
            })
            .unwrap_or(probs.len() - 1);
        let candidates: Vec<CandidateRow> = views
            .iter()
            .enumerate()
            .map(|(j, v)| {
                let rank = scores
                    .iter()
                    .enumerate()
                    .filter(|&(o, s)| *s > scores[j] || (*s == scores[j] && o < j))
                    .count();
                let features = observation(&ObservationInputs {
                    value_size_bytes,
                    ctx: &ctx,
                    worker: Some(v),
                    evidence: Some(stand_in_evidence(v)),
                    locality: None,
                    prefix_hit_rate: None,
                    rule_score: scores[j],
                    candidate_count: views.len(),
                    rule_rank: rank,
                    best_rule_score: best,
                    warmup_ms: self.scoring.warmup_ms,
                    now_ms,
                });
                CandidateRow {
                    worker_id: v.worker_id.to_string(),
                    eligible: true,
                    rule_score: scores[j],
                    model_action: None,
                    final_score: scores[j],
                    probability: Some(probs[j]),
                    picked: j == pick,
                    penalty_state: "healthy",
                    fallback_reason: None,
                    features,
                    operator_override: None,
                }
            })
            .collect();

        // Outcome of the picked worker.
        let w = &self.workers[ids[pick]];
        let mean = mean_latency_ms(&w.now, w.compacting, rt, batch_size.unwrap_or(1));
        let mut latency = mean * (0.6 * normal(rng) - 0.18).exp();
        let mut success = !rng.random_bool((w.now.err + 0.002).min(1.0));
        if let Some(t) = timeout_ms
            && latency > t as f64
        {
            latency = t as f64;
            success = false;
        }
        let decision_id = format!("syn{:x}-{i:09}", self.cfg.seed);
        let outcome = (!rng.random_bool(0.02)).then(|| OutcomeRecord {
            decision_id: decision_id.clone(),
            worker_id: w.id.to_string(),
            ts_ms: self.ts_ms + latency.ceil() as i64,
            latency_ms: (latency * 1000.0).round() / 1000.0,
            success,
            caller: None,
            cache_hit: None,
        });
        let rec = DecisionRecord {
            decision_id,
            ts_ms: self.ts_ms,
            key_prefix: fp.prefix.to_string(),
            shard_id: fp.shard_id,
            request_type: Some(rt.as_str()),
            client_region,
            timeout_ms,
            batch_size,
            policy: SYNTH_POLICY,
            panic: false,
            model_version: None,
            arm: None,
            config_hash: "synthetic".to_string(),
            caller: None,
            candidates,
        };
        Some((rec, outcome))
    }
}

/// What [`write_logs`] wrote.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SynthReport {
    /// Decisions generated.
    pub decisions: usize,
    /// Rows in the decisions files (decisions × candidates).
    pub decision_rows: usize,
    /// Rows in the outcomes files.
    pub outcome_rows: usize,
    /// Files written, decisions then outcomes per chunk, in order.
    pub files: Vec<PathBuf>,
}

/// Decisions per record batch within a file.
const BATCH_DECISIONS: usize = 8_192;

/// Writes `batches` as one final log file at `path`, with the service's
/// writer properties and version metadata (for tests and tools that
/// build logs by hand).
///
/// # Errors
/// I/O and Parquet failures.
pub fn write_file(path: &Path, batches: Vec<arrow::array::RecordBatch>) -> Result<()> {
    let Some(first) = batches.first() else {
        return Ok(());
    };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(io_err(dir))?;
    }
    let file = File::create(path).map_err(io_err(path))?;
    let props = writer_properties(&LogConfig::default());
    let schema = first.schema();
    let mut w = ArrowWriter::try_new(file, schema.clone(), Some(props))?;
    scorer_log::schema::append_version_metadata(&mut w, &schema);
    for b in &batches {
        w.write(b)?;
    }
    w.close()?;
    Ok(())
}

/// Generates `cfg.decisions` decisions and writes them under `out` as the
/// service's log would: `out/dt=YYYY-MM-DD/decisions-…-NNNNNN.parquet` and
/// `out/dt=…/outcomes-….parquet`, one pair per `cfg.decisions_per_file`
/// decisions. `on_progress` is called with the number of decisions done.
///
/// `out` must be absent or empty: file names come from the simulated clock,
/// so a second run into the same directory would overwrite some files and
/// leave others, silently mixing two runs.
///
/// # Errors
/// [`TrainerError::InvalidArgument`] for a bad configuration or a non-empty
/// `out`, [`TrainerError::Io`] / [`TrainerError::Parquet`] when writing fails.
pub fn write_logs(
    cfg: &SynthConfig,
    out: &Path,
    mut on_progress: impl FnMut(usize),
) -> Result<SynthReport> {
    let mut synth = Synth::new(cfg.clone())?;
    if out.exists() {
        let mut entries = std::fs::read_dir(out).map_err(io_err(out))?;
        if entries.next().is_some() {
            return Err(TrainerError::InvalidArgument(format!(
                "--out {} is not empty: synth writes a fresh log directory (remove it or pick another)",
                out.display()
            )));
        }
    }
    std::fs::create_dir_all(out).map_err(io_err(out))?;
    let mut report = SynthReport::default();
    let mut seq = 0u64;
    loop {
        let mut dec_batches = Vec::new();
        let mut out_batches = Vec::new();
        let mut first_ts = None;
        let mut in_file = 0;
        while in_file < cfg.decisions_per_file {
            let mut decisions = Vec::with_capacity(BATCH_DECISIONS);
            let mut outcomes = Vec::with_capacity(BATCH_DECISIONS);
            while decisions.len() < BATCH_DECISIONS.min(cfg.decisions_per_file - in_file) {
                let Some((d, o)) = synth.next_decision() else {
                    break;
                };
                first_ts.get_or_insert(d.ts_ms);
                decisions.push(d);
                outcomes.extend(o);
            }
            if decisions.is_empty() {
                break;
            }
            in_file += decisions.len();
            report.decisions += decisions.len();
            report.decision_rows += scorer_log::batch::decision_rows(&decisions);
            report.outcome_rows += outcomes.len();
            dec_batches.push(decisions_batch(&decisions)?);
            out_batches.push(outcomes_batch(&outcomes)?);
            on_progress(report.decisions);
        }
        let Some(ts) = first_ts else { break };
        seq += 1;
        let opened = u64::try_from(ts).unwrap_or(0);
        let dpath = final_path(out, LogKind::Decisions, opened, seq);
        let opath = final_path(out, LogKind::Outcomes, opened, seq);
        write_file(&dpath, dec_batches)?;
        write_file(&opath, out_batches)?;
        report.files.push(dpath);
        report.files.push(opath);
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deterministic_and_plausible() {
        let cfg = SynthConfig {
            decisions: 300,
            seed: 9,
            ..SynthConfig::default()
        };
        let run = || {
            let mut s = Synth::new(cfg.clone()).unwrap();
            std::iter::from_fn(|| s.next_decision()).collect::<Vec<_>>()
        };
        let a = run();
        assert_eq!(a, run());
        assert_eq!(a.len(), 300);
        let mut puts = 0;
        for (d, o) in &a {
            assert_eq!(d.candidates.len(), 4);
            assert_eq!(d.candidates.iter().filter(|c| c.picked).count(), 1);
            let total: f64 = d.candidates.iter().filter_map(|c| c.probability).sum();
            assert!((total - 1.0).abs() < 1e-9);
            for c in &d.candidates {
                assert!(c.features.iter().all(|x| x.is_finite()));
                for (x, spec) in c
                    .features
                    .iter()
                    .zip(scorer_core::features::FEATURES.iter())
                {
                    assert!((spec.min..=spec.max).contains(x), "{} = {x}", spec.name);
                }
                assert_eq!(c.features[25], 1.0, "known worker");
                assert!((c.features[26] - (c.rule_score / 100.0) as f32).abs() < 1e-6);
            }
            if d.request_type == Some("PUT") {
                puts += 1;
                assert_eq!(d.candidates[0].features[29], 1.0);
            }
            if let Some(o) = o {
                assert!(o.latency_ms > 0.0);
                let picked = d.candidates.iter().find(|c| c.picked).unwrap();
                assert_eq!(o.worker_id, picked.worker_id);
            }
        }
        assert!((60..=120).contains(&puts), "{puts} PUTs of 300");
    }

    #[test]
    fn rejects_bad_config() {
        for cfg in [
            SynthConfig {
                decisions: 0,
                ..SynthConfig::default()
            },
            SynthConfig {
                candidates: 17,
                ..SynthConfig::default()
            },
            SynthConfig {
                temperature: 0.0,
                ..SynthConfig::default()
            },
            SynthConfig {
                temperature: f64::INFINITY,
                ..SynthConfig::default()
            },
            // Found by a fresh-eyes run: 4e9 workers aborted on a 640 GB
            // allocation, 1e8 took 24 GB.
            SynthConfig {
                workers: MAX_WORKERS + 1,
                ..SynthConfig::default()
            },
            SynthConfig {
                workers: MAX_CANDIDATES + 1,
                candidates: MAX_CANDIDATES + 1,
                ..SynthConfig::default()
            },
            SynthConfig {
                decisions_per_file: MAX_DECISIONS_PER_FILE + 1,
                ..SynthConfig::default()
            },
        ] {
            assert!(matches!(
                Synth::new(cfg),
                Err(TrainerError::InvalidArgument(_))
            ));
        }
    }
}
