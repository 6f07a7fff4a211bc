//! The timed probes of one interval: each `PING`'s outcome and their
//! summary (RTT mean and p99, error rate). Pure, like [`crate::redis_info`].

use std::time::Duration;

/// Result of one timed probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProbeOutcome {
    /// The server answered after this round-trip time.
    Ok(Duration),
    /// No answer within the probe timeout: an error, and an RTT sample equal
    /// to the timeout.
    TimedOut,
    /// The probe failed (error reply, broken connection, connect refused)
    /// after `elapsed`: an error, and an RTT sample of `elapsed`.
    Failed {
        /// Time until the failure was observed.
        elapsed: Duration,
        /// `false` when no connection to the server could be made at all;
        /// an interval with only such probes is not reported.
        reached: bool,
    },
}

/// Probe summary over one interval.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ProbeStats {
    /// Number of probes, count.
    pub probes: u32,
    /// Probes that failed or timed out, count.
    pub failures: u32,
    /// Mean RTT, ms (0 without probes).
    pub rtt_ms_avg: f64,
    /// 99th-percentile RTT (nearest rank), ms, never below `rtt_ms_avg`
    /// (0 without probes).
    pub rtt_ms_p99: f64,
    /// `failures / probes`, `0..=1` (0 without probes).
    pub error_rate: f64,
}

/// The probe outcomes collected during one interval.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProbeWindow {
    outcomes: Vec<ProbeOutcome>,
}

impl ProbeWindow {
    /// An empty window.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds one probe outcome.
    pub fn record(&mut self, outcome: ProbeOutcome) {
        self.outcomes.push(outcome);
    }

    /// Number of recorded probes.
    pub fn len(&self) -> usize {
        self.outcomes.len()
    }

    /// No probe recorded.
    pub fn is_empty(&self) -> bool {
        self.outcomes.is_empty()
    }

    /// At least one probe reached the server (answered, timed out or failed
    /// on an established connection).
    pub fn reached(&self) -> bool {
        self.outcomes
            .iter()
            .any(|o| !matches!(o, ProbeOutcome::Failed { reached: false, .. }))
    }

    /// Summarises the window; a timed-out probe is an RTT sample of exactly
    /// `timeout`.
    pub fn stats(&self, timeout: Duration) -> ProbeStats {
        let mut samples_ms: Vec<f64> = Vec::with_capacity(self.outcomes.len());
        let mut failures = 0u32;
        for o in &self.outcomes {
            let d = match *o {
                ProbeOutcome::Ok(rtt) => rtt,
                ProbeOutcome::TimedOut => {
                    failures += 1;
                    timeout
                }
                ProbeOutcome::Failed { elapsed, .. } => {
                    failures += 1;
                    elapsed
                }
            };
            samples_ms.push(d.as_secs_f64() * 1000.0);
        }
        let probes = u32::try_from(samples_ms.len()).unwrap_or(u32::MAX);
        let avg = mean(&samples_ms);
        let p99 = percentile(&mut samples_ms, 0.99).map_or(0.0, |p| p.max(avg));
        ProbeStats {
            probes,
            failures,
            rtt_ms_avg: avg,
            rtt_ms_p99: p99,
            error_rate: if probes == 0 {
                0.0
            } else {
                f64::from(failures) / f64::from(probes)
            },
        }
    }
}

fn mean(xs: &[f64]) -> f64 {
    if xs.is_empty() {
        0.0
    } else {
        xs.iter().sum::<f64>() / xs.len() as f64
    }
}

/// Nearest-rank percentile (`q` in `0..=1`) of `samples`, which are sorted
/// in place; `None` when empty. With fewer than 100 samples p99 is the maximum.
pub fn percentile(samples: &mut [f64], q: f64) -> Option<f64> {
    if samples.is_empty() {
        return None;
    }
    samples.sort_by(f64::total_cmp);
    let n = samples.len();
    let rank = (q.clamp(0.0, 1.0) * n as f64).ceil() as usize;
    samples.get(rank.clamp(1, n) - 1).copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn p99_nearest_rank() {
        let mut ten: Vec<f64> = (1..=10).map(f64::from).collect();
        assert_eq!(percentile(&mut ten, 0.99), Some(10.0));
        assert_eq!(percentile(&mut ten, 0.5), Some(5.0));
        let mut hundred: Vec<f64> = (1..=100).rev().map(f64::from).collect();
        assert_eq!(percentile(&mut hundred, 0.99), Some(99.0));
        let mut two_hundred: Vec<f64> = (1..=200).map(f64::from).collect();
        assert_eq!(percentile(&mut two_hundred, 0.99), Some(198.0));
        assert_eq!(percentile(&mut [], 0.99), None);
        assert_eq!(percentile(&mut [7.0], 0.0), Some(7.0));
    }

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    #[test]
    fn probe_stats_count_timeouts_as_timeout_rtt() {
        let timeout = ms(250);
        let mut w = ProbeWindow::new();
        for rtt in [1, 2, 3, 2, 2, 1, 3, 2] {
            w.record(ProbeOutcome::Ok(ms(rtt)));
        }
        w.record(ProbeOutcome::TimedOut);
        w.record(ProbeOutcome::TimedOut);
        let s = w.stats(timeout);
        assert_eq!(s.probes, 10);
        assert_eq!(s.failures, 2);
        assert!((s.error_rate - 0.2).abs() < 1e-12);
        // (16 + 2 * 250) / 10
        assert!((s.rtt_ms_avg - 51.6).abs() < 1e-9, "{}", s.rtt_ms_avg);
        assert_eq!(s.rtt_ms_p99, 250.0);
        assert!(w.reached());
    }

    #[test]
    fn probe_stats_failures_and_reachability() {
        let mut w = ProbeWindow::new();
        assert_eq!(
            w.stats(ms(100)),
            ProbeStats {
                probes: 0,
                failures: 0,
                rtt_ms_avg: 0.0,
                rtt_ms_p99: 0.0,
                error_rate: 0.0
            }
        );
        assert!(!w.reached() && w.is_empty());
        w.record(ProbeOutcome::Failed {
            elapsed: ms(1),
            reached: false,
        });
        assert!(!w.reached());
        w.record(ProbeOutcome::Failed {
            elapsed: ms(3),
            reached: true,
        });
        assert!(w.reached());
        let s = w.stats(ms(100));
        assert_eq!(s.error_rate, 1.0);
        assert_eq!(s.rtt_ms_avg, 2.0);
        assert_eq!(s.rtt_ms_p99, 3.0);
    }

    #[test]
    fn p99_never_below_mean() {
        // 198 fast probes and 2 timeouts: nearest-rank p99 is 1 ms but the
        // mean is 3.49 ms; the reported p99 is lifted to the mean.
        let mut w = ProbeWindow::new();
        for _ in 0..198 {
            w.record(ProbeOutcome::Ok(ms(1)));
        }
        w.record(ProbeOutcome::TimedOut);
        w.record(ProbeOutcome::TimedOut);
        let s = w.stats(ms(250));
        assert!((s.rtt_ms_avg - 3.49).abs() < 1e-9, "{}", s.rtt_ms_avg);
        assert_eq!(s.rtt_ms_p99, s.rtt_ms_avg);
    }
}
