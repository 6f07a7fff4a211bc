//! Herding: how many routers sent to the same worker within one view
//! interval (`scorer_engine::view::LOAD_INTERVAL_MS`, the time in which a
//! router learns nothing new of the others' picks).
//!
//! For every interval and every worker picked in it, the number of distinct
//! routers that picked it; [`Herding::mean_routers`] is their mean over the
//! (interval, worker) pairs with a pick. Routers that spread their picks
//! keep it near what independent random picks give; routers that chase the
//! same apparent minimum push it toward the number of routers (Mitzenmacher,
//! "How Useful Is Old Information?", IEEE TPDS 2000).

use scorer_engine::view::LOAD_INTERVAL_MS;

/// Picks by (interval, worker, router), for runs with several routers.
#[derive(Debug, Clone, Default)]
pub struct Herding {
    picks: Vec<(u32, u32, u32)>,
}

impl Herding {
    /// Router `router` picked `worker` at `t_ms`.
    pub fn record(&mut self, t_ms: f64, worker: usize, router: usize) {
        let interval = (t_ms.max(0.0) / LOAD_INTERVAL_MS as f64) as u32;
        self.picks.push((interval, worker as u32, router as u32));
    }

    /// The mean number of distinct routers per picked (interval, worker)
    /// pair; `None` without picks.
    pub fn mean_routers(mut self) -> Option<f64> {
        if self.picks.is_empty() {
            return None;
        }
        self.picks.sort_unstable();
        self.picks.dedup();
        let distinct = self.picks.len();
        let pairs = self.picks.chunk_by(|a, b| (a.0, a.1) == (b.0, b.1)).count();
        Some(distinct as f64 / pairs as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routers_that_pick_one_worker_in_an_interval_herd_and_spread_ones_do_not() {
        let mut herd = Herding::default();
        for r in 0..4 {
            herd.record(1.0, 3, r);
        }
        assert_eq!(herd.mean_routers(), Some(4.0));
        let mut spread = Herding::default();
        for r in 0..4 {
            spread.record(1.0, r, r);
        }
        // The same router twice on one worker, and the next interval, count
        // once and apart.
        spread.record(1.5, 0, 0);
        spread.record(LOAD_INTERVAL_MS as f64 + 1.0, 0, 1);
        assert_eq!(spread.mean_routers(), Some(1.0));
        assert_eq!(Herding::default().mean_routers(), None);
    }
}
