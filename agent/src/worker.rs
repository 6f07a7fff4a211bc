//! The per-worker polling schedule: timed PINGs spread over each interval,
//! one `INFO` at its end, one snapshot per interval.
//!
//! With interval `I` and probe timeout `T` (`I >= 2T`), PING `k` of `n`
//! starts at `k * (I - 2T) / n` and `INFO` at `I - T`, so every call ends by
//! `I` even when each one times out. A PING that would still be running at
//! `I - T` (earlier ones were slow) is skipped. A cache digest whose walk
//! ended since the last report rides on the next one.

use std::time::Duration;

use scorer_core::telemetry::{CacheDigest, Snapshot};
use tokio::sync::{mpsc, watch};
use tokio::time::{Instant, sleep_until};
use tracing::{debug, info, warn};

use crate::probe::Probe;
use crate::redis_info::{
    InfoDerived, InfoSample, MonotonicStamp, ProbeOutcome, ProbeWindow, build_snapshot, derive,
    unix_ms_now,
};

/// Timing of one worker's polling loop (validated by
/// [`crate::AgentConfig::validate`]: `2 * probe_timeout <= interval`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Timing {
    pub interval: Duration,
    pub probe_timeout: Duration,
    pub pings: u32,
}

/// Polls one worker forever, sending one snapshot per interval to `tx`
/// (dropped with a warning if the reporter is behind). Returns when `tx`
/// is closed.
pub(crate) async fn poll_worker(
    id: String,
    mut probe: Probe,
    timing: Timing,
    mut digests: Option<watch::Receiver<Option<CacheDigest>>>,
    tx: mpsc::Sender<Snapshot>,
) {
    let Timing {
        interval,
        probe_timeout,
        pings,
    } = timing;
    let mut prev: Option<(InfoSample, Instant)> = None;
    let mut derived = InfoDerived::default();
    let mut stamp = MonotonicStamp::default();
    let mut reachable: Option<bool> = None;
    let mut next_start = Instant::now();

    loop {
        let t0 = next_start;
        // PINGs start in [t0, info_at - probe_timeout) so that, when the
        // server answers, all of them finish before INFO's slot.
        let info_at = t0 + interval.saturating_sub(probe_timeout);
        let ping_span = interval.saturating_sub(probe_timeout.saturating_mul(2));
        let mut window = ProbeWindow::new();

        for k in 0..pings {
            sleep_until(t0 + ping_span * k / pings).await;
            if Instant::now() + probe_timeout > info_at {
                break; // a slow probe ate the slot; INFO must not be delayed
            }
            if probe.is_connected() {
                window.record(probe.ping().await);
                continue;
            }
            let start = Instant::now();
            match probe.connect().await {
                Ok(()) => {
                    if reachable != Some(true) {
                        info!(worker = %id, "connected");
                    }
                    reachable = Some(true);
                    // Baseline INFO so the first report already has rates.
                    if Instant::now() + probe_timeout <= info_at
                        && let Ok(s) = probe.info().await
                    {
                        prev = Some((s, Instant::now()));
                    }
                }
                Err(e) => {
                    if reachable != Some(false) {
                        warn!(worker = %id, error = %e, "cannot connect; not reporting until reachable");
                    }
                    reachable = Some(false);
                    window.record(ProbeOutcome::Failed {
                        elapsed: start.elapsed(),
                        reached: false,
                    });
                }
            }
        }

        sleep_until(info_at).await;
        let mut info_ok = false;
        if probe.is_connected() {
            match probe.info().await {
                Ok(cur) => {
                    let now = Instant::now();
                    let (p, wall) = match &prev {
                        Some((p, at)) => (Some(p), now.duration_since(*at)),
                        None => (None, Duration::ZERO),
                    };
                    derived = derive(p, &cur, wall, &derived);
                    prev = Some((cur, now));
                    info_ok = true;
                }
                Err(e) => debug!(worker = %id, error = %e, "INFO failed; reusing last values"),
            }
        }

        if window.reached() || info_ok {
            let stats = window.stats(probe_timeout);
            let mut snapshot = build_snapshot(&id, stamp.next(unix_ms_now()), &derived, &stats);
            // A digest goes out once, with the first report after its walk:
            // resent, it would look fresh at the service for longer than it is.
            if let Some(rx) = digests.as_mut()
                && rx.has_changed().unwrap_or(false)
            {
                snapshot.cache_digest = rx.borrow_and_update().clone();
            }
            debug!(worker = %id, ?snapshot, "snapshot");
            match tx.try_send(snapshot) {
                Ok(()) => {}
                Err(mpsc::error::TrySendError::Full(_)) => {
                    warn!(worker = %id, "reporter is behind; dropping snapshot");
                }
                Err(mpsc::error::TrySendError::Closed(_)) => return,
            }
        } else {
            debug!(worker = %id, "unreachable this interval; no snapshot");
        }

        next_start = (t0 + interval).max(Instant::now());
    }
}
