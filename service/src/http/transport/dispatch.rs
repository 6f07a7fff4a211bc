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
//! [`ScoreDispatch::Adaptive`] takes both: a call computes inline when the
//! service is not saturated, and on the pool otherwise, where waiting calls
//! hold permits and the limit sheds the excess as before. Saturated means
//! either of:
//! - another score call is in progress (so at most one worker is ever busy
//!   scoring inline, and the others keep reading);
//! - scoring took more than [`SATURATED_SHARE`] of the current or the
//!   previous [`WINDOW_NS`] window ([`Busy`]). This is the signal that
//!   matters with a single runtime worker: it computes every call inline
//!   one after the other, so no call ever sees another in progress, while
//!   the backlog grows in the sockets (measured: with only the first rule,
//!   `scripts/bench_shedding.sh` at 2× capacity shed nothing and accepted
//!   calls waited 6–12 s).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use scorer_core::clock::Clock;

/// Length of a [`Busy`] window, ns (10 ms).
pub const WINDOW_NS: u64 = 10_000_000;
/// Share of a window that score calls may take before the next ones go to
/// the pool: half of one core. A service at 8 000 calls/s of ~30 µs spends
/// a quarter; one offered more than it can score spends nearly all.
pub const SATURATED_SHARE: f64 = 0.5;

/// Time spent scoring in the current and the previous window, from which
/// [`Busy::saturated`] tells whether the service is near its capacity.
/// Times are ns on any monotonic scale, passed in.
#[derive(Debug, Default)]
pub struct Busy {
    window: AtomicU64,
    busy_ns: AtomicU64,
    previous_ns: AtomicU64,
}

impl Busy {
    fn rotate(&self, now_ns: u64) {
        let w = now_ns / WINDOW_NS;
        let current = self.window.load(Ordering::Acquire);
        if w > current
            && self
                .window
                .compare_exchange(current, w, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
        {
            let done = self.busy_ns.swap(0, Ordering::AcqRel);
            let previous = if w == current + 1 { done } else { 0 };
            self.previous_ns.store(previous, Ordering::Release);
        }
    }

    /// Counts `busy_ns` of scoring that ended at `now_ns`.
    pub fn record(&self, now_ns: u64, busy_ns: u64) {
        self.rotate(now_ns);
        self.busy_ns.fetch_add(busy_ns, Ordering::AcqRel);
    }

    /// Whether scoring took more than [`SATURATED_SHARE`] of the current or
    /// the previous window at `now_ns`.
    pub fn saturated(&self, now_ns: u64) -> bool {
        self.rotate(now_ns);
        let limit = (WINDOW_NS as f64 * SATURATED_SHARE) as u64;
        self.busy_ns.load(Ordering::Acquire) > limit
            || self.previous_ns.load(Ordering::Acquire) > limit
    }
}

use scorer_engine::config::ScoreDispatch;

/// Score calls in progress (admitted, not yet answered) and the time they
/// spent scoring, in windows of the injected clock's monotonic time.
pub struct InProgress {
    count: AtomicUsize,
    busy: Busy,
    clock: Arc<dyn Clock>,
}

impl InProgress {
    /// Windows on `clock`'s monotonic nanoseconds.
    pub fn new(clock: Arc<dyn Clock>) -> Self {
        Self {
            count: AtomicUsize::new(0),
            busy: Busy::default(),
            clock,
        }
    }
}

/// One call's place in [`InProgress`]; leaves it when dropped.
pub struct Entered<'a> {
    count: &'a AtomicUsize,
    /// Score calls already in progress when this one entered.
    pub ahead: usize,
    /// Whether scoring was near capacity when this one entered.
    pub saturated: bool,
}

impl Drop for Entered<'_> {
    fn drop(&mut self) {
        self.count.fetch_sub(1, Ordering::AcqRel);
    }
}

impl InProgress {
    /// Enters one call; it leaves when the returned guard is dropped.
    pub fn enter(&self) -> Entered<'_> {
        let ahead = self.count.fetch_add(1, Ordering::AcqRel);
        Entered {
            count: &self.count,
            ahead,
            saturated: self.busy.saturated(self.now_ns()),
        }
    }

    /// Calls in progress now.
    pub fn get(&self) -> usize {
        self.count.load(Ordering::Acquire)
    }

    /// Counts `busy` of scoring that just ended.
    pub fn record_busy(&self, busy: std::time::Duration) {
        let ns = u64::try_from(busy.as_nanos()).unwrap_or(u64::MAX);
        self.busy.record(self.now_ns(), ns);
    }

    fn now_ns(&self) -> u64 {
        self.clock.monotonic_ns()
    }
}

/// How one call runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Run {
    Inline,
    Pool,
    BlockInPlace,
}

impl Run {
    /// The way to run a call under `mode` for a call that entered as `place`.
    pub(crate) fn choose(mode: ScoreDispatch, place: &Entered<'_>) -> Self {
        match mode {
            ScoreDispatch::Adaptive if place.ahead == 0 && !place.saturated => Self::Inline,
            ScoreDispatch::Adaptive | ScoreDispatch::Pool => Self::Pool,
            ScoreDispatch::Inline => Self::Inline,
            ScoreDispatch::BlockInPlace => {
                let multi = tokio::runtime::Handle::try_current().is_ok_and(|h| {
                    h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread
                });
                if multi {
                    Self::BlockInPlace
                } else {
                    Self::Inline
                }
            }
        }
    }

    /// Label of the `dispatch` metric.
    pub(crate) const fn as_str(self) -> &'static str {
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
        let p = InProgress::new(Arc::new(scorer_core::clock::ManualClock::new(1_000, 0)));
        let first = p.enter();
        assert_eq!(Run::choose(ScoreDispatch::Adaptive, &first), Run::Inline);
        let second = p.enter();
        assert_eq!(second.ahead, 1);
        assert_eq!(Run::choose(ScoreDispatch::Adaptive, &second), Run::Pool);
        drop(first);
        drop(second);
        assert_eq!(p.get(), 0);
        let alone = p.enter();
        assert_eq!(Run::choose(ScoreDispatch::Adaptive, &alone), Run::Inline);
        assert_eq!(Run::choose(ScoreDispatch::Pool, &alone), Run::Pool);
        // No multi-thread runtime here: block_in_place would panic.
        assert_eq!(
            Run::choose(ScoreDispatch::BlockInPlace, &alone),
            Run::Inline
        );
    }

    #[test]
    fn a_busy_window_sends_calls_to_the_pool_until_it_is_a_window_old() {
        let b = Busy::default();
        let t0 = 5 * WINDOW_NS;
        assert!(!b.saturated(t0));
        // 40% of the window: not saturated.
        b.record(t0 + 1_000, WINDOW_NS * 4 / 10);
        assert!(!b.saturated(t0 + 2_000));
        // 60%: saturated now, and through the next window.
        b.record(t0 + 3_000, WINDOW_NS * 2 / 10);
        assert!(b.saturated(t0 + 4_000));
        assert!(b.saturated(t0 + WINDOW_NS + 1));
        // Two windows on with no scoring: inline again.
        assert!(!b.saturated(t0 + 2 * WINDOW_NS + 1));
        // A gap of several windows forgets everything at once.
        b.record(t0 + 3 * WINDOW_NS, WINDOW_NS);
        assert!(b.saturated(t0 + 3 * WINDOW_NS + 1));
        assert!(!b.saturated(t0 + 9 * WINDOW_NS));
    }

    #[test]
    fn a_saturated_service_scores_on_the_pool_even_with_nothing_in_progress() {
        let clock = Arc::new(scorer_core::clock::ManualClock::new(1_000, 0));
        let p = InProgress::new(clock.clone());
        p.record_busy(std::time::Duration::from_nanos(WINDOW_NS));
        let alone = p.enter();
        assert_eq!(alone.ahead, 0);
        assert!(alone.saturated);
        assert_eq!(Run::choose(ScoreDispatch::Adaptive, &alone), Run::Pool);
        assert_eq!(Run::choose(ScoreDispatch::Inline, &alone), Run::Inline);
        drop(alone);
        // Two windows of the injected clock later the busy time is forgotten.
        clock.advance(2 * WINDOW_NS / 1_000_000);
        let later = p.enter();
        assert!(!later.saturated);
        assert_eq!(Run::choose(ScoreDispatch::Adaptive, &later), Run::Inline);
    }
}
