//! The scoring engine: state plus the operations the HTTP layer (and
//! in-process callers such as a simulator) invoke. Time is passed in.

use std::collections::HashSet;
use std::sync::Arc;

use arc_swap::ArcSwap;

use crate::api::{MAX_KEY_BYTES, ScoreRequest, ScoreResponse, WorkerScore};
use crate::config::Config;
use crate::features::{ObservationInputs, observation};
use crate::key::{HotnessTracker, KeyFingerprint, SecondSegmentSharding, ShardingStrategy};
use crate::scoring::{Explained, RequestContext, RuleInputs, rule_score};
use crate::state::{IngestError, IngestOutcome, Registry};
use crate::telemetry::Snapshot;

/// Why a score request was refused (client errors, 422).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ScoreError {
    /// `candidates` is empty.
    #[error("`candidates` must name at least one worker")]
    NoCandidates,
    /// More distinct candidates than `server.max_candidates`.
    #[error("{count} distinct candidates, at most {max} are allowed")]
    TooManyCandidates {
        /// Distinct candidates in the request.
        count: usize,
        /// The limit.
        max: usize,
    },
    /// The key is empty or longer than [`MAX_KEY_BYTES`].
    #[error("`key` must be 1..={MAX_KEY_BYTES} bytes, got {0}")]
    BadKey(usize),
    /// A candidate id is empty or longer than 128 bytes.
    #[error("candidate {0} is not a valid worker id (1..=128 bytes)")]
    BadCandidate(usize),
}

/// Scoring state shared by all requests.
#[derive(Debug)]
pub struct Engine {
    config: ArcSwap<Config>,
    registry: Registry,
    hotness: HotnessTracker,
    sharding: Box<dyn ShardingStrategy>,
}

impl Engine {
    /// An engine with an empty registry and the default sharding strategy.
    pub fn new(config: Config) -> Self {
        Self::with_sharding(config, Box::new(SecondSegmentSharding))
    }

    /// An engine using the router's own `sharding`.
    pub fn with_sharding(config: Config, sharding: Box<dyn ShardingStrategy>) -> Self {
        let hotness = HotnessTracker::new(config.features.hotness_half_life_ms);
        Self {
            config: ArcSwap::from_pointee(config),
            registry: Registry::new(),
            hotness,
            sharding,
        }
    }

    /// The current configuration.
    pub fn config(&self) -> Arc<Config> {
        self.config.load_full()
    }

    /// The worker registry.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// Apply a telemetry batch atomically (see [`Registry::ingest`]).
    ///
    /// # Errors
    /// As [`Registry::ingest`].
    pub fn ingest(
        &self,
        batch: &[Snapshot],
        now_mono_ms: u64,
        now_wall_ms: u64,
    ) -> Result<IngestOutcome, IngestError> {
        let cfg = self.config.load();
        self.registry
            .ingest(batch, now_mono_ms, now_wall_ms, &cfg.telemetry, &cfg.server)
    }

    /// Whether at least one worker reported within `telemetry.dead_after_ms`.
    pub fn has_live_worker(&self, now_ms: u64) -> bool {
        let dead = self.config.load().telemetry.dead_after_ms;
        self.registry
            .table()
            .values()
            .any(|w| w.view().age_ms(now_ms) <= dead)
    }

    /// Score `req`'s candidates at monotonic `now_ms`; `context` is the
    /// request's context already merged with headers.
    ///
    /// # Errors
    /// [`ScoreError`] for an empty or oversized candidate list or a bad key;
    /// unknown workers are not errors (they come back ineligible).
    pub fn score(
        &self,
        req: &ScoreRequest,
        context: &RequestContext,
        now_ms: u64,
        decision_id: String,
    ) -> Result<ScoreResponse, ScoreError> {
        let cfg = self.config.load();
        if req.key.is_empty() || req.key.len() > MAX_KEY_BYTES {
            return Err(ScoreError::BadKey(req.key.len()));
        }
        if req.candidates.is_empty() {
            return Err(ScoreError::NoCandidates);
        }
        let mut seen = HashSet::with_capacity(req.candidates.len());
        let mut ids = Vec::with_capacity(req.candidates.len());
        for (i, c) in req.candidates.iter().enumerate() {
            if c.is_empty() || c.len() > crate::telemetry::validate::MAX_WORKER_ID_BYTES {
                return Err(ScoreError::BadCandidate(i));
            }
            if seen.insert(c.as_str()) {
                ids.push(c.as_str());
            }
        }
        if ids.len() > cfg.server.max_candidates {
            return Err(ScoreError::TooManyCandidates {
                count: ids.len(),
                max: cfg.server.max_candidates,
            });
        }

        let key = KeyFingerprint::parse(&req.key, self.sharding.as_ref());
        let hotness = self.hotness.touch(key.prefix, now_ms);
        let table_size = cfg.features.value_size_bytes.get(key.prefix).copied();
        let rule_inputs = RuleInputs {
            cfg: &cfg.scoring,
            dead_after_ms: cfg.telemetry.dead_after_ms,
            request_type: context.request_type,
            now_ms,
        };

        let table = self.registry.table();
        let mut scored: Vec<(Explained, Option<&'static str>, Option<_>)> = ids
            .iter()
            .map(|id| match table.get(*id) {
                None => {
                    let mut e = Explained::new();
                    e.multiply(
                        "unknown_worker",
                        0.0,
                        format!("worker `{id}` has never reported telemetry"),
                        None,
                    );
                    (e, Some("unknown_worker"), None)
                }
                Some(slot) => {
                    let view = slot.view_full();
                    let (e, alive) = rule_score(&view, &rule_inputs);
                    (e, (!alive).then_some("heartbeat_dead"), Some(view))
                }
            })
            .collect();

        // Rank by rule score for the context features (0 = best).
        let mut order: Vec<usize> = (0..ids.len()).collect();
        order.sort_by(|&a, &b| {
            scored[b]
                .0
                .score
                .total_cmp(&scored[a].0.score)
                .then_with(|| ids[a].cmp(ids[b]))
        });
        let mut rank = vec![0usize; ids.len()];
        for (r, &i) in order.iter().enumerate() {
            rank[i] = r;
        }
        let best = order.first().map_or(0.0, |&i| scored[i].0.score);

        let scores: Vec<WorkerScore> = scored
            .iter_mut()
            .enumerate()
            .map(|(i, (e, reason, view))| {
                let obs = observation(&ObservationInputs {
                    key: &key,
                    value_size_bytes: table_size.unwrap_or(cfg.features.default_value_size_bytes),
                    prefix_in_size_table: table_size.is_some(),
                    hotness_level: hotness,
                    ctx: context,
                    worker: view.as_deref(),
                    rule_score: e.score,
                    candidate_count: ids.len(),
                    rule_rank: rank[i],
                    best_rule_score: best,
                    warmup_ms: cfg.scoring.warmup_ms,
                    now_ms,
                });
                WorkerScore {
                    worker_id: ids[i].to_owned(),
                    eligible: reason.is_none(),
                    reason: *reason,
                    rule_score: e.score,
                    final_score: e.score,
                    adjustments: std::mem::take(&mut e.adjustments),
                    features: req.explain.then(|| obs.to_vec()),
                    observation: obs,
                }
            })
            .collect();

        let mut ranking: Vec<usize> = (0..scores.len()).collect();
        ranking.sort_by(|&a, &b| {
            let (x, y) = (&scores[a], &scores[b]);
            y.eligible
                .cmp(&x.eligible)
                .then_with(|| y.final_score.total_cmp(&x.final_score))
                .then_with(|| x.worker_id.cmp(&y.worker_id))
        });
        let ranking = ranking
            .into_iter()
            .map(|i| scores[i].worker_id.clone())
            .collect();
        Ok(ScoreResponse {
            decision_id,
            scores,
            ranking,
        })
    }
}
