//! Hand outcomes to the decision log. The request path only builds a
//! record and does a non-blocking send; the log's writer thread does the
//! rest. (A decision's record is the `log` stage's, `crate::stages`.)

use std::sync::Arc;

use super::{Engine, Feedback, FeedbackError, FeedbackOutcome};
use scorer_log::OutcomeRecord;

fn wall_i64(ms: u64) -> i64 {
    i64::try_from(ms).unwrap_or(i64::MAX)
}

impl Engine {
    /// [`Engine::feedback`], then log the outcome (when the decision id is
    /// sampled). `now_wall_ms` (Unix ms) stamps the row; `caller` is the
    /// configured name of the credential that reported it.
    ///
    /// # Errors
    /// As [`Engine::feedback`]; nothing is logged for a refused feedback.
    pub fn feedback_and_log(
        &self,
        f: &Feedback,
        now_mono_ms: u64,
        now_wall_ms: u64,
        caller: Option<&Arc<str>>,
    ) -> Result<FeedbackOutcome, FeedbackError> {
        let out = self.feedback(f, now_mono_ms)?;
        if let Some(log) = &self.log {
            log.log_outcome(OutcomeRecord {
                decision_id: f.decision_id.clone(),
                worker_id: f.worker_id.clone(),
                ts_ms: wall_i64(now_wall_ms),
                latency_ms: f.latency_ms,
                success: f.success,
                caller: caller.cloned(),
                cache_hit: f.cache_hit,
            });
        }
        Ok(out)
    }
}
