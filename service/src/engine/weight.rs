//! The selection weight of a worker: what a decision's `weight` shows and
//! `GET /v1/workers` reports.

use crate::config::Config;
use crate::dynamics::{PenaltyView, slow_start_fraction};
use crate::state::WorkerView;

/// The selection weight of a live worker at `now_ms` (dimensionless, `>= 0`):
/// `capacity × ramp`, where the ramp is the penalty view's slow-start
/// fraction after a cooldown and, with `selection.slow_start_new_workers`,
/// at most the new-worker ramp `max(min_weight_fraction, registered_ms /
/// slow_start_ms)` (Envoy `slow_start_config`; issue #3). What a decision's
/// `weight` shows and `GET /v1/workers` reports.
pub fn selection_weight(v: &WorkerView, pv: &PenaltyView, now_ms: u64, cfg: &Config) -> f64 {
    let mut ramp = pv.slow_start_fraction;
    if cfg.selection.slow_start_new_workers {
        ramp = ramp.min(slow_start_fraction(
            v.registered_for_ms(now_ms),
            &cfg.penalty,
        ));
    }
    ramp * v.capacity
}
