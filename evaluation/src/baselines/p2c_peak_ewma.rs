//! Power of two choices on peak-EWMA latency × load.
//!
//! Finagle's `p2cPeakEwma` and Linkerd2-proxy (tower's `PeakEwma`) keep, per
//! worker, an exponentially weighted moving average of round-trip time that
//! jumps up to any slower sample at once (the "peak") and decays toward
//! faster samples with time constant `decay`; the cost of a worker is
//! `rtt_estimate × (in_flight + 1)`, and two random workers are compared by
//! cost. Sources: Finagle client guide
//! (<https://twitter.github.io/finagle/guide/Clients.html#power-of-two-choices-p2c-peak-ewma>),
//! tower `load::peak_ewma` (<https://docs.rs/tower/latest/tower/load/peak_ewma/index.html>),
//! Linkerd's "Beyond round robin" post
//! (<https://linkerd.io/2016/03/16/beyond-round-robin-load-balancing-for-latency/>).
//!
//! Update, as in tower: with `w = exp(−Δt/decay)` for the time since the
//! last update, `rtt' = sample` if `sample > rtt`, else
//! `rtt × w + sample × (1 − w)`. Defaults are Linkerd's: `decay` = 10 s and
//! a default RTT of 30 ms for a worker never measured.

use rand_chacha::ChaCha8Rng;

use super::two_distinct;
use crate::router::{Outcome, Pick, PickRequest, Router};

/// Linkerd's default decay time constant, ms.
pub const DEFAULT_DECAY_MS: f64 = 10_000.0;
/// Linkerd's default RTT estimate for an unmeasured worker, ms.
pub const DEFAULT_RTT_MS: f64 = 30.0;

#[derive(Debug, Clone, Copy)]
struct Estimate {
    rtt_ms: f64,
    updated_ms: f64,
    in_flight: u32,
}

/// P2C peak-EWMA over `n` workers.
#[derive(Debug, Clone)]
pub struct P2cPeakEwma {
    workers: Vec<Estimate>,
    decay_ms: f64,
}

impl P2cPeakEwma {
    /// Over `n ≥ 1` workers with Linkerd's defaults.
    pub fn new(n: usize) -> Self {
        Self::with_params(n, DEFAULT_DECAY_MS, DEFAULT_RTT_MS)
    }

    /// Over `n ≥ 1` workers with a decay (ms) and an initial RTT (ms).
    pub fn with_params(n: usize, decay_ms: f64, default_rtt_ms: f64) -> Self {
        let e = Estimate {
            rtt_ms: default_rtt_ms,
            updated_ms: 0.0,
            in_flight: 0,
        };
        Self {
            workers: vec![e; n.max(1)],
            decay_ms,
        }
    }

    /// Cost of worker `i`: `rtt_estimate_ms × (in_flight + 1)`.
    pub fn cost(&self, i: usize) -> f64 {
        let e = &self.workers[i];
        e.rtt_ms * f64::from(e.in_flight + 1)
    }

    /// Current RTT estimate of worker `i`, ms.
    pub fn rtt_ms(&self, i: usize) -> f64 {
        self.workers[i].rtt_ms
    }
}

impl Router for P2cPeakEwma {
    fn pick(&mut self, _req: &PickRequest<'_>, rng: &mut ChaCha8Rng) -> Pick {
        let (a, b) = two_distinct(self.workers.len(), rng);
        let worker = if self.cost(b) < self.cost(a) { b } else { a };
        self.workers[worker].in_flight += 1;
        Pick {
            worker,
            decision_id: None,
        }
    }

    fn outcome(&mut self, o: &Outcome<'_>) {
        let e = &mut self.workers[o.worker];
        e.in_flight = e.in_flight.saturating_sub(1);
        let dt = (o.now_ms - e.updated_ms).max(0.0);
        let w = (-dt / self.decay_ms).exp();
        e.rtt_ms = if o.latency_ms > e.rtt_ms {
            o.latency_ms
        } else {
            e.rtt_ms * w + o.latency_ms * (1.0 - w)
        };
        e.updated_ms = o.now_ms;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::router::Op;
    use rand::SeedableRng;

    fn done(w: usize, lat: f64, now: f64) -> Outcome<'static> {
        Outcome {
            worker: w,
            decision_id: None,
            latency_ms: lat,
            success: true,
            now_ms: now,
            router: 0,
        }
    }

    #[test]
    fn peak_jumps_up_and_decays_down() {
        let mut p = P2cPeakEwma::with_params(2, 10_000.0, 30.0);
        p.outcome(&done(0, 100.0, 0.0));
        assert_eq!(p.rtt_ms(0), 100.0); // a slower sample is taken at once
        // One decay constant later a 10 ms sample: 100 e^-1 + 10 (1 - e^-1).
        p.outcome(&done(0, 10.0, 10_000.0));
        let want = 100.0 * (-1f64).exp() + 10.0 * (1.0 - (-1f64).exp());
        assert!((p.rtt_ms(0) - want).abs() < 1e-9);
    }

    #[test]
    fn cost_is_rtt_times_in_flight_plus_one() {
        let mut p = P2cPeakEwma::with_params(2, 10_000.0, 30.0);
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        let req = PickRequest {
            now_ms: 0.0,
            key: "k",
            op: Op::Get,
            timeout_ms: 1.0,
            router: 0,
        };
        p.outcome(&done(0, 90.0, 0.0)); // worker 0: 90 ms, worker 1: 30 ms default
        assert_eq!(p.cost(0), 90.0);
        // 30×1 < 90 → 1; 30×2 < 90 → 1; 30×3 = 90, not < → tie goes to the first drawn.
        assert_eq!(p.pick(&req, &mut rng).worker, 1);
        assert_eq!(p.pick(&req, &mut rng).worker, 1);
        assert_eq!(p.cost(1), 90.0);
        p.outcome(&done(1, 30.0, 0.0));
        assert_eq!(p.cost(1), 60.0);
        assert_eq!(p.pick(&req, &mut rng).worker, 1);
    }
}
