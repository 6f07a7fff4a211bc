//! Where a `POST /v1/score` call computes: inline on the runtime worker that
//! read it, or on the blocking pool.
//!
//! Scoring is CPU work of tens of µs. On the blocking pool it costs two
//! thread hand-offs (wake a pool thread, wake the worker back), which on a
//! small VM cost more than the scoring; inline it costs none. But a call
//! computed inline holds its concurrency permit only while a worker polls
//! it, so under overload at most one call per worker is ever admitted and
//! the backlog waits unseen in the sockets: the limit in front of the route
//! never sheds (measured, `scripts/bench_shedding.sh`).
//!
//! [`ScoreDispatch::Adaptive`] takes both: a call computes inline when no
//! other score call is in progress (the service is not saturated: at most
//! one worker is ever busy scoring inline, the others keep reading), and on
//! the pool otherwise, where waiting calls hold permits and the limit sheds
//! the excess as before.

use std::sync::atomic::{AtomicUsize, Ordering};

use crate::config::ScoreDispatch;

/// Score calls in progress (admitted, not yet answered).
#[derive(Debug, Default)]
pub struct InProgress(AtomicUsize);

/// One call's place in [`InProgress`]; leaves it when dropped.
pub struct Entered<'a> {
    count: &'a AtomicUsize,
    /// Score calls already in progress when this one entered.
    pub ahead: usize,
}

impl Drop for Entered<'_> {
    fn drop(&mut self) {
        self.count.fetch_sub(1, Ordering::AcqRel);
    }
}

impl InProgress {
    /// Enters one call; it leaves when the returned guard is dropped.
    pub fn enter(&self) -> Entered<'_> {
        let ahead = self.0.fetch_add(1, Ordering::AcqRel);
        Entered {
            count: &self.0,
            ahead,
        }
    }

    /// Calls in progress now.
    pub fn get(&self) -> usize {
        self.0.load(Ordering::Acquire)
    }
}

/// How one call runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Run {
    Inline,
    Pool,
    BlockInPlace,
}

impl Run {
    /// The way to run a call under `mode` with `ahead` calls in progress.
    pub(super) fn choose(mode: ScoreDispatch, ahead: usize) -> Self {
        match mode {
            ScoreDispatch::Adaptive if ahead == 0 => Self::Inline,
            ScoreDispatch::Adaptive | ScoreDispatch::Pool => Self::Pool,
            ScoreDispatch::Inline => Self::Inline,
            ScoreDispatch::BlockInPlace => {
                let multi = tokio::runtime::Handle::try_current().is_ok_and(|h| {
                    h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread
                });
                if multi { Self::BlockInPlace } else { Self::Inline }
            }
        }
    }

    /// Label of the `dispatch` metric.
    pub(super) const fn as_str(self) -> &'static str {
        match self {
            Self::Inline => "inline",
            Self::Pool => "pool",
            Self::BlockInPlace => "block_in_place",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adaptive_scores_inline_only_when_nothing_else_is_in_progress() {
        let p = InProgress::default();
        let first = p.enter();
        assert_eq!(
            Run::choose(ScoreDispatch::Adaptive, first.ahead),
            Run::Inline
        );
        let second = p.enter();
        assert_eq!(second.ahead, 1);
        assert_eq!(
            Run::choose(ScoreDispatch::Adaptive, second.ahead),
            Run::Pool
        );
        drop(first);
        drop(second);
        assert_eq!(p.get(), 0);
        assert_eq!(Run::choose(ScoreDispatch::Adaptive, p.enter().ahead), Run::Inline);
        assert_eq!(Run::choose(ScoreDispatch::Pool, 0), Run::Pool);
        // No multi-thread runtime here: block_in_place would panic.
        assert_eq!(Run::choose(ScoreDispatch::BlockInPlace, 0), Run::Inline);
    }
}
