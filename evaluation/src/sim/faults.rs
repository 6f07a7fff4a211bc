//! The scenario's faults as scheduled events, and its workers as they
//! start (a memtable is a property of its worker from the start).

use super::event::{Event, EventQueue};
use super::worker::{Memtable, SimWorker};
use crate::scenario::{Fault, Scenario};

/// Push every fault's start and end (every compaction of a periodic one)
/// onto `q`.
pub(super) fn schedule(sc: &Scenario, q: &mut EventQueue) {
    for (i, f) in sc.faults.iter().enumerate() {
        match f {
            Fault::Compaction {
                first_ms,
                period_ms,
                duration_ms,
                ..
            } => {
                let mut t = *first_ms;
                while t < sc.duration_ms && *period_ms > 0.0 {
                    q.push(
                        t,
                        Event::Compaction {
                            fault: i,
                            start: true,
                        },
                    );
                    q.push(
                        t + duration_ms,
                        Event::Compaction {
                            fault: i,
                            start: false,
                        },
                    );
                    t += period_ms;
                }
            }
            _ => {
                if let Some((from, to)) = f.window_ms() {
                    q.push(
                        from,
                        Event::Fault {
                            fault: i,
                            start: true,
                        },
                    );
                    q.push(
                        to,
                        Event::Fault {
                            fault: i,
                            start: false,
                        },
                    );
                }
            }
        }
    }
}

/// The scenario's workers, idle, with their memtables (a
/// [`Fault::Memtable`] is a property of its worker from the start: no event
/// turns it on or off).
pub(super) fn workers(sc: &Scenario) -> Vec<SimWorker> {
    let mut ws: Vec<SimWorker> = sc.workers.iter().cloned().map(SimWorker::new).collect();
    for f in &sc.faults {
        if let Fault::Memtable {
            worker,
            offset_ms,
            period_ms,
            peak_bytes,
            put_slowdown_per_gib,
        } = *f
            && let Some(w) = ws.get_mut(worker)
        {
            w.memtable = Some(Memtable {
                offset_ms,
                period_ms,
                peak_bytes: peak_bytes as f64,
                put_slowdown_per_gib,
            });
        }
    }
    ws
}
