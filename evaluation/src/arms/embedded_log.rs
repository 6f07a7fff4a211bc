//! The embedded arms' decision log, kept as a deployed router keeps it:
//! each router's balancer queues its decisions and outcomes in its own
//! [`RecordBuffer`] (sampled as the service's `[log]` says), and the
//! simulated service takes them into its decision log as
//! `POST /v1/router/decisions` does: checked with
//! [`RouterDecision::into_record`], written as the router's rows, waiting
//! for the writer rather than dropping.
//!
//! Every decision id is prefixed with the run (scenario, seed, arm), as
//! the central service arms' are, so that logs of several runs can be
//! trained on together. Rows carry simulated wall time.

use std::sync::Arc;

use scorer_balancer::records::{DEFAULT_RECORD_BUFFER, RecordBuffer};
use scorer_core::clock::{Clock, ManualClock};
use scorer_engine::config::Config;
use scorer_engine::router_records::RecordCheck;
use scorer_log::sampling::sampled_at;
use scorer_log::{DecisionLog, DecisionSink};

use super::service_ids::wall;

/// Records a buffer may hold before a pick or an outcome hands them on.
const FLUSH_AT: usize = DEFAULT_RECORD_BUFFER / 4;

/// Routers' record buffers and the log they reach.
#[derive(Debug)]
pub struct EmbeddedLog {
    log: Arc<DecisionLog>,
    clock: Arc<ManualClock>,
    buffers: Vec<Arc<RecordBuffer>>,
    prefix: String,
    max_candidates: usize,
    all_features_below: f64,
}

impl EmbeddedLog {
    /// One buffer per router, sampling as `config`'s `[log]`.
    pub fn new(log: Arc<DecisionLog>, routers: usize, config: &Config) -> Self {
        let clock = Arc::new(ManualClock::new(0, wall(0.0)));
        let buffers = (0..routers.max(1))
            .map(|_| {
                Arc::new(RecordBuffer::new(
                    DEFAULT_RECORD_BUFFER,
                    &config.log,
                    clock.clone(),
                ))
            })
            .collect();
        Self {
            log,
            clock,
            buffers,
            prefix: String::new(),
            max_candidates: config.server.max_candidates,
            all_features_below: config.log.sample_rate * config.log.candidate_features_rate,
        }
    }

    /// Router `r`'s buffer.
    pub fn buffer(&self, r: usize) -> Arc<RecordBuffer> {
        self.buffers[r.min(self.buffers.len() - 1)].clone()
    }

    /// Prefixes every logged decision id with `prefix`.
    pub fn set_prefix(&mut self, prefix: &str) {
        prefix.clone_into(&mut self.prefix);
    }

    /// Moves the records' wall clock to simulated `now_ms` (never back).
    pub fn at(&self, now_ms: f64) {
        let to = wall(now_ms);
        let from = self.clock.wall_ms();
        if to > from {
            self.clock.advance(to - from);
        }
    }

    /// Hands router `r`'s records on once its buffer holds [`FLUSH_AT`].
    pub fn flush_full(&self, r: usize, router_id: &str) {
        if self.buffers.get(r).is_some_and(|b| b.len() >= FLUSH_AT) {
            self.flush(r, router_id);
        }
    }

    /// Hands every record of router `r` (named `router_id`) to the log.
    pub fn flush(&self, r: usize, router_id: &str) {
        let Some(buffer) = self.buffers.get(r) else {
            return;
        };
        let check = RecordCheck {
            router_id,
            now_ms: i64::try_from(self.clock.wall_ms()).unwrap_or(i64::MAX),
            max_candidates: self.max_candidates,
        };
        while let Some(batch) = buffer.drain(router_id, 1024) {
            self.wait_for_room(batch.decisions.len() + batch.outcomes.len());
            for d in batch.decisions {
                let all = sampled_at(&d.decision_id, self.all_features_below);
                if let Ok(mut rec) = d.into_record(&check, all) {
                    rec.decision_id.insert_str(0, &self.prefix);
                    self.log.log_router_decision(rec);
                }
            }
            for o in batch.outcomes {
                if let Ok(mut rec) = o.into_record(&check) {
                    rec.decision_id.insert_str(0, &self.prefix);
                    self.log.log_router_outcome(rec);
                }
            }
        }
    }

    /// The simulator runs far faster than the writer: wait for it, as the
    /// service makes a router's batch wait, rather than drop rows.
    fn wait_for_room(&self, n: usize) {
        for _ in 0..10_000 {
            if self.log.router_room() >= n {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }
}
