//! Envoy as deployed: `LEAST_REQUEST` (P2C) with outlier detection on at
//! its default settings and the default healthy-panic threshold.
//!
//! # Load balancer
//!
//! `LeastRequestLoadBalancer::unweightedHostPickNChoices` in Envoy's
//! `source/extensions/load_balancing_policies/least_request/least_request_lb.cc`
//! (the pick for equal weights): `choice_count` (default 2) draws of
//! `random() % hosts.size()` **with replacement**, keeping the first draw
//! unless a later one has strictly fewer active requests (`rq_active`).
//! Active requests are the router's own: `+1` at pick, `−1` at the outcome.
//! Unlike [`super::p2c_least_request`], the two draws may be the same
//! worker (probability `1/n`), as in Envoy.
//!
//! # Outlier detection
//!
//! From envoyproxy/envoy at `00c7146d`:
//! `api/envoy/config/cluster/v3/outlier_detection.proto` (the field
//! defaults), `source/common/upstream/outlier_detection_impl.h`
//! (`DetectorConfig::DEFAULT_*`) and `outlier_detection_impl.cc`:
//!
//! - Failures: with `split_external_local_origin_errors` false (default),
//!   `DetectorHostMonitorImpl::putResultNoLocalExternalSplit` maps a
//!   timeout (`LocalOriginTimeout`) to 504 and a refused connection
//!   (`LocalOriginConnectFailed`) to 503 (`resultToHttpCode`), so every
//!   failed [`Outcome`] counts as a 5xx. `putHttpResponseCode` counts every
//!   response in the host's success-rate bucket, resets `consecutive_5xx_`
//!   on a success, and calls `onConsecutive5xx` when
//!   `++consecutive_5xx_ == consecutive_5xx` (5).
//! - `DetectorImpl::onConsecutiveErrorWorker`: ignored if the host is
//!   already ejected; otherwise `ejectHost`, then the counter is reset
//!   (whether or not the host was ejected). The ejection is immediate, not
//!   deferred to the sweep.
//! - `DetectorImpl::ejectHost`: ejects only if
//!   `100 × (ejections_active + 1) / hosts ≤ max_ejection_percent` (10), or
//!   if `always_eject_one_host` (default **false**) and nothing is ejected.
//!   So with the defaults and fewer than 10 workers **nothing is ever
//!   ejected**; with 10–19 workers at most one. (Envoy ≤ 1.27 ejected the
//!   first host regardless; 1.28 changed that — `changelogs/1.28.0.yaml`,
//!   "Outlier detection will always respect `max_ejection_percent` now",
//!   runtime guard `check_mep_on_first_eject`, removed in 1.31, which added
//!   `always_eject_one_host`.) An ejection increments the host's backoff
//!   multiplier while `backoff × base_ejection_time < max_ejection_time +
//!   base_ejection_time`.
//! - `DetectorImpl::checkHostForUneject`, at each sweep: back in service
//!   when `min(base_ejection_time × backoff, max_ejection_time) + jitter ≤
//!   now − last_ejection` (30 s, then 60 s, … capped at 300 s;
//!   `max_ejection_time_jitter` defaults to 0). `unejectHost` resets the
//!   consecutive counters.
//! - `DetectorImpl::onIntervalTimer`, every `interval` (10 s): (1) un-eject
//!   due hosts and swap each host's success-rate buckets
//!   (`SuccessRateAccumulator::updateCurrentWriter`: the interval just
//!   ended becomes the one evaluated); (2) `processSuccessRateEjections`;
//!   (3) decrement the backoff multiplier (not below 0) of every host not
//!   ejected whose last un-ejection is at least one interval old
//!   (`changelogs/1.28.0.yaml`: "A node must stay in healthy state for at
//!   least one period of check interval before ejection time multiplier is
//!   decremented").
//! - `processSuccessRateEjections` / `successRateEjectionThreshold`: over
//!   the hosts not ejected with at least `success_rate_request_volume`
//!   (100) requests in the last interval, if there are at least
//!   `success_rate_minimum_hosts` (5) of them, eject (through `ejectHost`)
//!   each whose success rate (%) is strictly below `mean −
//!   success_rate_stdev_factor/1000 × stdev` (1900 → 1.9; population
//!   standard deviation). Success-rate ejection is on by default
//!   (`enforcing_success_rate` 100). Hosts are visited in index order
//!   (Envoy's map order is unspecified).
//! - Not modelled because their defaults never eject: consecutive gateway
//!   failures (`enforcing_consecutive_gateway_failure` 0) and failure
//!   percentage (`enforcing_failure_percentage` 0); local-origin detectors
//!   (only with `split_external_local_origin_errors`); active health
//!   checks (none configured).
//!
//! Sweeps run on the times passed in: before a pick or an outcome at
//! `now_ms`, every sweep due at `k × interval ≤ now_ms` (`k ≥ 1`, the
//! detector starting at time 0) runs, in order, at its own time.
//!
//! # Panic threshold
//!
//! `LoadBalancerBase::recalculatePerPriorityState` gives the (single)
//! priority a health of `min(100, 140 × healthy / hosts)` (overprovisioning
//! factor 1.4); `recalculatePerPriorityPanic` never panics at 100, and
//! otherwise `isHostSetInPanic` panics when `100 × healthy / hosts <
//! healthy_panic_threshold` (default 50 %,
//! `docs/root/intro/arch_overview/upstream/load_balancing/panic_threshold.rst`).
//! In panic the pick ignores health and draws from all hosts. If no host is
//! healthy and the threshold does not apply (threshold 0), Envoy would
//! route nowhere; a router here must pick, so it draws from all hosts.
//!
//! # Retries
//!
//! Envoy retries only with a route `retry_policy` (none by default). The
//! simulator's client already retries every arm's refused or timed-out
//! attempts (`max_retries`, default 2, each on a fresh pick), so this arm
//! adds no retry of its own.

use rand::Rng;
use rand_chacha::ChaCha8Rng;

use super::Endpoints;
use crate::router::{Outcome, Pick, PickRequest, Router};

/// `LeastRequest.choice_count` default: hosts drawn per pick.
pub const DEFAULT_CHOICE_COUNT: u32 = 2;
/// `OutlierDetection.consecutive_5xx` default.
pub const DEFAULT_CONSECUTIVE_5XX: u32 = 5;
/// `OutlierDetection.interval` default, ms (10 s).
pub const DEFAULT_INTERVAL_MS: f64 = 10_000.0;
/// `OutlierDetection.base_ejection_time` default, ms (30 s).
pub const DEFAULT_BASE_EJECTION_TIME_MS: f64 = 30_000.0;
/// `OutlierDetection.max_ejection_time` default, ms (300 s = 10 × base).
pub const DEFAULT_MAX_EJECTION_TIME_MS: f64 = 300_000.0;
/// `OutlierDetection.max_ejection_percent` default, %.
pub const DEFAULT_MAX_EJECTION_PERCENT: u32 = 10;
/// `OutlierDetection.always_eject_one_host` default.
pub const DEFAULT_ALWAYS_EJECT_ONE_HOST: bool = false;
/// `OutlierDetection.success_rate_minimum_hosts` default.
pub const DEFAULT_SUCCESS_RATE_MINIMUM_HOSTS: usize = 5;
/// `OutlierDetection.success_rate_request_volume` default, requests per
/// interval.
pub const DEFAULT_SUCCESS_RATE_REQUEST_VOLUME: u64 = 100;
/// `OutlierDetection.success_rate_stdev_factor` default, thousandths (1.9).
pub const DEFAULT_SUCCESS_RATE_STDEV_FACTOR: u32 = 1_900;
/// `CommonLbConfig.healthy_panic_threshold` default, %.
pub const DEFAULT_HEALTHY_PANIC_THRESHOLD_PERCENT: f64 = 50.0;
/// `ClusterLoadAssignment.Policy.overprovisioning_factor` default, %.
pub const OVERPROVISIONING_FACTOR_PERCENT: u64 = 140;

/// The Envoy settings this arm models; [`Default`] is Envoy's defaults.
#[derive(Debug, Clone, PartialEq)]
pub struct EnvoyConfig {
    /// Hosts drawn per pick (≥ 1).
    pub choice_count: u32,
    /// Consecutive failures that eject a host.
    pub consecutive_5xx: u32,
    /// Time between ejection sweeps, ms (> 0).
    pub interval_ms: f64,
    /// Ejection time per unit of backoff, ms.
    pub base_ejection_time_ms: f64,
    /// Cap of the ejection time, ms.
    pub max_ejection_time_ms: f64,
    /// Most hosts ejected at once, % of all hosts.
    pub max_ejection_percent: u32,
    /// Allow one ejection even above `max_ejection_percent`.
    pub always_eject_one_host: bool,
    /// Hosts with enough volume needed for success-rate ejection.
    pub success_rate_minimum_hosts: usize,
    /// Requests in an interval for a host to count in success-rate ejection.
    pub success_rate_request_volume: u64,
    /// Standard deviations below the mean that eject, in thousandths.
    pub success_rate_stdev_factor: u32,
    /// Below this % of healthy hosts, balance over all hosts.
    pub healthy_panic_threshold_percent: f64,
}

impl Default for EnvoyConfig {
    fn default() -> Self {
        Self {
            choice_count: DEFAULT_CHOICE_COUNT,
            consecutive_5xx: DEFAULT_CONSECUTIVE_5XX,
            interval_ms: DEFAULT_INTERVAL_MS,
            base_ejection_time_ms: DEFAULT_BASE_EJECTION_TIME_MS,
            max_ejection_time_ms: DEFAULT_MAX_EJECTION_TIME_MS,
            max_ejection_percent: DEFAULT_MAX_EJECTION_PERCENT,
            always_eject_one_host: DEFAULT_ALWAYS_EJECT_ONE_HOST,
            success_rate_minimum_hosts: DEFAULT_SUCCESS_RATE_MINIMUM_HOSTS,
            success_rate_request_volume: DEFAULT_SUCCESS_RATE_REQUEST_VOLUME,
            success_rate_stdev_factor: DEFAULT_SUCCESS_RATE_STDEV_FACTOR,
            healthy_panic_threshold_percent: DEFAULT_HEALTHY_PANIC_THRESHOLD_PERCENT,
        }
    }
}

/// Requests and successes in one interval (Envoy's
/// `SuccessRateAccumulatorBucket`).
#[derive(Debug, Clone, Copy, Default)]
struct Bucket {
    total: u64,
    success: u64,
}

#[derive(Debug, Clone, Default)]
struct Host {
    in_flight: u32,
    consecutive_5xx: u32,
    ejected: bool,
    last_ejection_ms: f64,
    last_unejection_ms: Option<f64>,
    eject_time_backoff: u32,
    num_ejections: u32,
    /// The interval being written.
    current: Bucket,
    /// The last complete interval (evaluated at the sweep).
    last: Bucket,
}

/// Envoy `LEAST_REQUEST` with outlier detection over `n` workers.
#[derive(Debug, Clone)]
pub struct Envoy {
    hosts: Vec<Host>,
    endpoints: Endpoints,
    cfg: EnvoyConfig,
    next_sweep_ms: f64,
    ejections_active: usize,
}

impl Envoy {
    /// Over `n ≥ 1` workers with Envoy's defaults.
    pub fn new(n: usize) -> Self {
        Self::with_config(n, EnvoyConfig::default())
    }

    /// Over `n ≥ 1` workers with `cfg`.
    ///
    /// # Panics
    /// If `cfg.interval_ms` is not positive and finite (Envoy rejects such
    /// a configuration).
    pub fn with_config(n: usize, cfg: EnvoyConfig) -> Self {
        assert!(
            cfg.interval_ms.is_finite() && cfg.interval_ms > 0.0,
            "outlier detection interval must be > 0 ms, got {}",
            cfg.interval_ms
        );
        Self {
            hosts: vec![Host::default(); n.max(1)],
            endpoints: Endpoints::new(n),
            next_sweep_ms: cfg.interval_ms,
            cfg,
            ejections_active: 0,
        }
    }

    /// Whether worker `i` is ejected.
    pub fn is_ejected(&self, i: usize) -> bool {
        self.hosts[i].ejected
    }

    /// Workers ejected now.
    pub fn ejected_count(&self) -> usize {
        self.ejections_active
    }

    /// Worker `i`'s ejection-time multiplier.
    pub fn ejection_backoff(&self, i: usize) -> u32 {
        self.hosts[i].eject_time_backoff
    }

    /// Times worker `i` was ejected.
    pub fn num_ejections(&self, i: usize) -> u32 {
        self.hosts[i].num_ejections
    }

    /// Requests in flight at worker `i`.
    pub fn in_flight(&self, i: usize) -> u32 {
        self.hosts[i].in_flight
    }

    /// Whether the load balancer ignores health (too few healthy hosts).
    pub fn in_panic(&self) -> bool {
        let n = self.endpoints.live().len();
        let healthy = n.saturating_sub(self.ejections_active);
        let health = (OVERPROVISIONING_FACTOR_PERCENT * healthy as u64 / n as u64).min(100);
        let healthy_percent = 100.0 * healthy as f64 / n as f64;
        health < 100 && healthy_percent < self.cfg.healthy_panic_threshold_percent
    }

    /// Runs every interval sweep due by `now_ms`, each at its own time
    /// (pick and outcome call this first).
    pub fn sweep_to(&mut self, now_ms: f64) {
        while self.next_sweep_ms <= now_ms {
            let t = self.next_sweep_ms;
            self.sweep(t);
            self.next_sweep_ms += self.cfg.interval_ms;
        }
    }

    /// Envoy's `DetectorImpl::onIntervalTimer` at `now_ms`.
    fn sweep(&mut self, now_ms: f64) {
        for i in 0..self.hosts.len() {
            let h = &self.hosts[i];
            if h.ejected {
                let eject_ms = (self.cfg.base_ejection_time_ms * f64::from(h.eject_time_backoff))
                    .min(self.cfg.max_ejection_time_ms);
                if eject_ms <= now_ms - h.last_ejection_ms {
                    self.uneject(i, now_ms);
                }
            }
            let h = &mut self.hosts[i];
            h.last = std::mem::take(&mut h.current);
        }
        self.success_rate_ejections(now_ms);
        let interval_ms = self.cfg.interval_ms;
        for h in &mut self.hosts {
            if !h.ejected
                && h.last_unejection_ms
                    .is_some_and(|t| now_ms - t >= interval_ms)
            {
                h.eject_time_backoff = h.eject_time_backoff.saturating_sub(1);
            }
        }
    }

    /// `processSuccessRateEjections` for external-origin results.
    fn success_rate_ejections(&mut self, now_ms: f64) {
        let valid: Vec<(usize, f64)> = self
            .hosts
            .iter()
            .enumerate()
            .filter(|&(i, h)| {
                self.endpoints.is_live(i)
                    && !h.ejected
                    && h.last.total > 0
                    && h.last.total >= self.cfg.success_rate_request_volume
            })
            .map(|(i, h)| (i, h.last.success as f64 * 100.0 / h.last.total as f64))
            .collect();
        if valid.is_empty() || valid.len() < self.cfg.success_rate_minimum_hosts {
            return;
        }
        let k = valid.len() as f64;
        let mean = valid.iter().map(|&(_, sr)| sr).sum::<f64>() / k;
        let variance = valid
            .iter()
            .map(|&(_, sr)| (sr - mean).powi(2))
            .sum::<f64>()
            / k;
        let factor = f64::from(self.cfg.success_rate_stdev_factor) / 1000.0;
        let threshold = mean - factor * variance.sqrt();
        for (i, sr) in valid {
            if sr < threshold {
                self.eject(i, now_ms);
            }
        }
    }

    /// Envoy's `DetectorImpl::ejectHost` (enforcement 100 %).
    fn eject(&mut self, i: usize, now_ms: f64) {
        let n = self.endpoints.live().len() as f64;
        let ejected_percent = 100.0 * (self.ejections_active + 1) as f64 / n;
        let max_percent = f64::from(self.cfg.max_ejection_percent.min(100));
        let should_eject = ejected_percent <= max_percent
            || (self.cfg.always_eject_one_host && self.ejections_active == 0);
        if !should_eject {
            return;
        }
        self.ejections_active += 1;
        let (base, max) = (
            self.cfg.base_ejection_time_ms,
            self.cfg.max_ejection_time_ms,
        );
        let h = &mut self.hosts[i];
        h.ejected = true;
        h.num_ejections += 1;
        h.last_ejection_ms = now_ms;
        if f64::from(h.eject_time_backoff) * base < max + base {
            h.eject_time_backoff += 1;
        }
    }

    /// Envoy's `DetectorImpl::unejectHost`.
    fn uneject(&mut self, i: usize, now_ms: f64) {
        self.ejections_active -= 1;
        let h = &mut self.hosts[i];
        h.ejected = false;
        h.consecutive_5xx = 0;
        h.last_unejection_ms = Some(now_ms);
    }
}

impl Router for Envoy {
    fn pick(&mut self, req: &PickRequest<'_>, rng: &mut ChaCha8Rng) -> Pick {
        self.sweep_to(req.now_ms);
        let live = self.endpoints.live();
        let n = live.len();
        // The healthy hosts, unless every host is (no ejection, panic, or
        // all ejected): then no list is built.
        let healthy: Option<Vec<usize>> = (self.ejections_active > 0
            && self.ejections_active < n
            && !self.in_panic())
        .then(|| {
            live.iter()
                .copied()
                .filter(|&i| !self.hosts[i].ejected)
                .collect()
        });
        let len = healthy.as_ref().map_or(n, Vec::len);
        let draw = |rng: &mut ChaCha8Rng| {
            let j = rng.random_range(0..len);
            healthy.as_ref().map_or(live[j], |h| h[j])
        };
        let mut worker = draw(rng);
        for _ in 1..self.cfg.choice_count.max(1) {
            let sampled = draw(rng);
            if self.hosts[sampled].in_flight < self.hosts[worker].in_flight {
                worker = sampled;
            }
        }
        self.hosts[worker].in_flight += 1;
        Pick {
            worker,
            decision_id: None,
        }
    }

    fn outcome(&mut self, o: &Outcome<'_>) {
        self.sweep_to(o.now_ms);
        let threshold = self.cfg.consecutive_5xx;
        let h = &mut self.hosts[o.worker];
        h.in_flight = h.in_flight.saturating_sub(1);
        h.current.total += 1;
        if o.success {
            h.current.success += 1;
            h.consecutive_5xx = 0;
            return;
        }
        h.consecutive_5xx += 1;
        if h.consecutive_5xx == threshold && !h.ejected && self.endpoints.is_live(o.worker) {
            self.eject(o.worker, o.now_ms);
            self.hosts[o.worker].consecutive_5xx = 0;
        }
    }

    /// A host leaving the endpoint set takes its outlier state with it (an
    /// ejected one no longer counts against `max_ejection_percent`); one
    /// coming back is a new host, not ejected, with fresh counters.
    /// Requests sent before the drain still count down its in-flight.
    fn drain(&mut self, worker: usize, drained: bool, now_ms: f64) {
        self.sweep_to(now_ms);
        if worker >= self.hosts.len() || drained != self.endpoints.is_live(worker) {
            return;
        }
        self.endpoints.set_drained(worker, drained);
        if self.endpoints.is_live(worker) == drained {
            return;
        }
        if self.hosts[worker].ejected {
            self.ejections_active -= 1;
        }
        let in_flight = self.hosts[worker].in_flight;
        self.hosts[worker] = Host {
            in_flight,
            ..Host::default()
        };
    }
}

#[cfg(test)]
mod tests;
