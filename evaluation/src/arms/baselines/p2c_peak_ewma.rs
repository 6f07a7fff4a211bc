//! Power of two choices on peak-EWMA latency × load, as tower implements it
//! and Linkerd2-proxy runs it.
//!
//! Per worker, an RTT estimate that jumps up to any slower sample at once
//! (the "peak") and otherwise decays with time constant `decay`; the cost
//! of a worker is `estimate × (pending + 1)`; two random workers are
//! compared by cost. Background: Finagle's `p2cPeakEwma`
//! (<https://twitter.github.io/finagle/guide/Clients.html#power-of-two-choices-p2c-peak-ewma>),
//! Linkerd's "Beyond round robin" post
//! (<https://linkerd.io/2016/03/16/beyond-round-robin-load-balancing-for-latency/>).
//!
//! # What is taken from tower, line by line
//!
//! From `tower/src/load/peak_ewma.rs` (tower-rs/tower at `8358ee71`):
//!
//! - `impl Load for PeakEwma { fn load }`: `pending = Arc::strong_count(..) - 1`
//!   (the requests in flight: one `Handle` each), then
//!   `estimate = self.update_estimate()`, then
//!   `Cost(estimate * f64::from(pending + 1))`. The cost has **no special
//!   case** for an estimate of 0 (with or without pending requests): it is
//!   then 0. Here: [`P2cPeakEwma::load`].
//! - `PeakEwma::update_estimate` → `RttEstimate::decay(decay_ns)`, which
//!   calls `self.update(now, now, decay_ns)`: a **sample of 0 at every
//!   read**, so reading the load decays the estimate toward 0 by
//!   `w = exp(−elapsed/decay)` for the time since the last read or sample,
//!   and moves `update_at` to now. A worker that is never picked again
//!   therefore still loses its peak as the balancer keeps comparing it.
//! - `RttEstimate::update`: `if self.rtt_ns < rtt` the sample replaces the
//!   estimate (peak); else `next = rtt_ns × decay + rtt × (1 − decay)` with
//!   `decay = exp(−elapsed / decay_ns)`, `elapsed` since `update_at`; in both
//!   branches `update_at = now`. Here: `RttEstimate::update`.
//! - `impl Drop for Handle`: the sample is `recv_at − sent_at` when the
//!   request's handle is dropped — on the response, on an error, or when a
//!   timeout drops the future; that is also when `pending` falls by one.
//!   Here: every [`Outcome`] (success, refusal or timeout) releases one
//!   pending request and feeds its `latency_ms` as the sample.
//! - `RttEstimate::new(rtt_ns)`: the initial estimate is the default RTT,
//!   `update_at` the construction time (here: time 0), so the default
//!   decays too (tower's tests `default_decay`, `compound_decay`, ported
//!   below).
//! - Default RTT: tower has none of its own — `PeakEwma::new` takes
//!   `default_rtt` (the type doc's "default RTT of 1 second" predates
//!   tower-rs/tower#134, commit `bdecb337`, which made it a parameter).
//!
//! From `tower/src/balance/p2c/service.rs`, `Balance::p2c_ready_index`: two
//! distinct indices (`sample_floyd2`), both loads read, `if aload <= bload
//! { aidx } else { bidx }` — ties go to the first drawn, as here.
//!
//! Defaults are Linkerd's, unchanged: `decay` = 10 s and a default RTT of
//! 30 ms (`DEFAULT_EWMA` in `linkerd/app/outbound/src/http/logical/profile.rs`
//! and `EWMA_CONFIG` in `linkerd/app/core/src/control.rs`, linkerd2-proxy at
//! `29637b64f`; `linkerd/proxy/balance/src/lib.rs` wraps endpoints in
//! `tower::load::PeakEwma`).

use rand_chacha::ChaCha8Rng;

use super::Endpoints;
use crate::router::{Outcome, Pick, PickRequest, Router};

/// Linkerd's decay time constant of the RTT estimate, ms (10 s).
pub const DEFAULT_DECAY_MS: f64 = 10_000.0;
/// Linkerd's initial RTT estimate of a worker never measured, ms.
pub const DEFAULT_RTT_MS: f64 = 30.0;

/// tower's `RttEstimate`: the estimate and when it last changed.
#[derive(Debug, Clone, Copy)]
struct RttEstimate {
    rtt_ms: f64,
    update_at_ms: f64,
}

impl RttEstimate {
    /// tower's `RttEstimate::update` with a sample `sample_ms` at `now_ms`.
    fn update(&mut self, sample_ms: f64, now_ms: f64, decay_ms: f64) -> f64 {
        self.rtt_ms = if self.rtt_ms < sample_ms {
            sample_ms
        } else {
            let elapsed_ms = (now_ms - self.update_at_ms).max(0.0);
            let decay = (-elapsed_ms / decay_ms).exp();
            self.rtt_ms * decay + sample_ms * (1.0 - decay)
        };
        // Simulated time never goes back; keep `update_at` monotonic anyway.
        self.update_at_ms = self.update_at_ms.max(now_ms);
        self.rtt_ms
    }

    /// tower's `RttEstimate::decay`: an update with a sample of 0.
    fn decay(&mut self, now_ms: f64, decay_ms: f64) -> f64 {
        self.update(0.0, now_ms, decay_ms)
    }
}

#[derive(Debug, Clone, Copy)]
struct Endpoint {
    estimate: RttEstimate,
    pending: u32,
}

/// P2C peak-EWMA over `n` workers.
#[derive(Debug, Clone)]
pub struct P2cPeakEwma {
    workers: Vec<Endpoint>,
    decay_ms: f64,
    default_rtt_ms: f64,
    endpoints: Endpoints,
}

impl P2cPeakEwma {
    /// Over `n ≥ 1` workers with Linkerd's defaults.
    pub fn new(n: usize) -> Self {
        Self::with_params(n, DEFAULT_DECAY_MS, DEFAULT_RTT_MS)
    }

    /// Over `n ≥ 1` workers with a decay time constant (ms, > 0) and an
    /// initial RTT estimate (ms), both set at time 0.
    pub fn with_params(n: usize, decay_ms: f64, default_rtt_ms: f64) -> Self {
        let e = Endpoint {
            estimate: RttEstimate {
                rtt_ms: default_rtt_ms,
                update_at_ms: 0.0,
            },
            pending: 0,
        };
        Self {
            workers: vec![e; n.max(1)],
            decay_ms,
            default_rtt_ms,
            endpoints: Endpoints::new(n),
        }
    }

    /// tower's `PeakEwma::load` for worker `i` at `now_ms`: decays the
    /// estimate to `now_ms` (a read is an update with a sample of 0), then
    /// `estimate_ms × (pending + 1)`.
    pub fn load(&mut self, i: usize, now_ms: f64) -> f64 {
        let decay_ms = self.decay_ms;
        let w = &mut self.workers[i];
        let estimate_ms = w.estimate.decay(now_ms, decay_ms);
        estimate_ms * f64::from(w.pending + 1)
    }

    /// Worker `i`'s RTT estimate as of its last read or sample, ms.
    pub fn rtt_ms(&self, i: usize) -> f64 {
        self.workers[i].estimate.rtt_ms
    }

    /// Requests in flight at worker `i` (tower's `pending`).
    pub fn pending(&self, i: usize) -> u32 {
        self.workers[i].pending
    }
}

impl Router for P2cPeakEwma {
    fn pick(&mut self, req: &PickRequest<'_>, rng: &mut ChaCha8Rng) -> Pick {
        let (a, b) = self.endpoints.two_distinct(rng);
        let load_a = self.load(a, req.now_ms);
        let load_b = self.load(b, req.now_ms);
        let worker = if load_a <= load_b { a } else { b };
        self.workers[worker].pending += 1;
        Pick {
            worker,
            decision_id: None,
        }
    }

    fn outcome(&mut self, o: &Outcome<'_>) {
        let decay_ms = self.decay_ms;
        let w = &mut self.workers[o.worker];
        w.pending = w.pending.saturating_sub(1);
        w.estimate.update(o.latency_ms, o.now_ms, decay_ms);
    }

    /// A returning endpoint is a new service to tower's balancer
    /// (`Change::Insert`): its estimate starts again from the default RTT.
    /// Requests sent before the drain still count down its `pending`.
    fn drain(&mut self, worker: usize, drained: bool, now_ms: f64) {
        let returning = !drained && !self.endpoints.is_live(worker);
        self.endpoints.set_drained(worker, drained);
        if returning && let Some(w) = self.workers.get_mut(worker) {
            w.estimate = RttEstimate {
                rtt_ms: self.default_rtt_ms,
                update_at_ms: now_ms,
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    fn done(w: usize, lat: f64, now: f64) -> Outcome<'static> {
        Outcome {
            worker: w,
            decision_id: None,
            latency_ms: lat,
            success: true,
            now_ms: now,
            router: 0,
            cache_hit: None,
        }
    }

    #[test]
    fn peak_jumps_up_and_decays_toward_faster_samples() {
        let mut p = P2cPeakEwma::with_params(2, 10_000.0, 30.0);
        p.outcome(&done(0, 100.0, 0.0));
        assert_eq!(p.rtt_ms(0), 100.0); // a slower sample is taken at once
        // One decay constant later a 10 ms sample: 100 e^-1 + 10 (1 - e^-1).
        p.outcome(&done(0, 10.0, 10_000.0));
        let want = 100.0 * (-1f64).exp() + 10.0 * (1.0 - (-1f64).exp());
        assert!((p.rtt_ms(0) - want).abs() < 1e-9);
    }

    /// tower's `default_decay` test: a 10 ms default RTT with a 1 s decay
    /// reads 10 ms at once, then in (9, 10) after 100 ms and (8, 9) after
    /// 200 ms: the default decays on read.
    #[test]
    fn default_rtt_decays_on_read_as_in_tower() {
        let mut p = P2cPeakEwma::with_params(1, 1_000.0, 10.0);
        assert_eq!(p.load(0, 0.0), 10.0);
        let l = p.load(0, 100.0);
        assert!(9.0 < l && l < 10.0, "{l}");
        let l = p.load(0, 200.0);
        assert!(8.0 < l && l < 9.0, "{l}");
    }

    /// tower's `compound_decay` test, in ms: 20 ms default, 1 s decay;
    /// requests sent at 100 and 200 ms both take 200 ms.
    #[test]
    fn compound_decay_as_in_tower() {
        let mut p = P2cPeakEwma::with_params(1, 1_000.0, 20.0);
        let mut rng = ChaCha8Rng::seed_from_u64(0);
        assert_eq!(p.load(0, 0.0), 20.0);
        p.pick(&PickRequest::test_get(100.0), &mut rng); // rsp0 in flight
        assert!(p.load(0, 100.0) > 20.0);
        p.pick(&PickRequest::test_get(200.0), &mut rng); // rsp1 in flight
        assert!(p.load(0, 200.0) > 40.0);
        p.outcome(&done(0, 200.0, 300.0)); // rsp0: 200 ms, a new peak
        assert_eq!(p.load(0, 300.0), 400.0); // 200 × (1 pending + 1)
        p.outcome(&done(0, 200.0, 400.0)); // rsp1: 200 ms, not above the estimate
        assert!((p.load(0, 400.0) - 200.0).abs() < 1e-9);
        assert!(p.load(0, 1_400.0) < 100.0); // 200 e^-1 ≈ 73.6
        assert!(p.load(0, 11_400.0) < 0.1); // 73.6 e^-10 ≈ 0.0033
    }

    #[test]
    fn cost_is_estimate_times_pending_plus_one() {
        let mut p = P2cPeakEwma::with_params(2, 10_000.0, 30.0);
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        p.outcome(&done(0, 90.0, 0.0)); // worker 0: 90 ms, worker 1: 30 ms default
        assert_eq!(p.load(0, 0.0), 90.0);
        // 30×1 < 90 → 1; 30×2 < 90 → 1; 30×3 = 90: a tie goes to the first drawn.
        assert_eq!(p.pick(&PickRequest::test_get(0.0), &mut rng).worker, 1);
        assert_eq!(p.pick(&PickRequest::test_get(0.0), &mut rng).worker, 1);
        assert_eq!(p.pending(1), 2);
        assert_eq!(p.load(1, 0.0), 90.0);
        p.outcome(&done(1, 30.0, 0.0));
        assert_eq!(p.load(1, 0.0), 60.0);
        assert_eq!(p.pick(&PickRequest::test_get(0.0), &mut rng).worker, 1);
    }

    /// Fails without decay on read: worker 0 peaked at 100 ms at t = 0 and
    /// is never picked again, so it gets no outcome; worker 1 answers every
    /// 100 ms request in 30 ms. Worker 0's cost 100 e^(−t/10 s) falls below
    /// worker 1's (30 ms, decayed for the 70 ms since its last sample) after
    /// 10 s × ln(100 / (30 e^−0.007)) ≈ 12.11 s: the first pick after that,
    /// at 12.2 s, goes to worker 0.
    #[test]
    fn an_idle_peaked_worker_is_picked_again_once_its_cost_decays() {
        let mut p = P2cPeakEwma::new(2);
        let mut rng = ChaCha8Rng::seed_from_u64(11);
        p.outcome(&done(0, 100.0, 0.0));
        let mut first_back_ms = None;
        for step in 1..=200 {
            let t = f64::from(step) * 100.0;
            let w = p.pick(&PickRequest::test_get(t), &mut rng).worker;
            if w == 0 {
                first_back_ms = Some(t);
                break;
            }
            p.outcome(&done(1, 30.0, t + 30.0));
        }
        let want_ms = DEFAULT_DECAY_MS * (100.0 / (30.0 * (-70.0 / DEFAULT_DECAY_MS).exp())).ln();
        assert!((12_100.0..12_200.0).contains(&want_ms), "{want_ms}");
        assert_eq!(first_back_ms, Some(12_200.0));
    }
}
