//! The scenario's faults as scheduled events, and its workers as they
//! start (a memtable is a property of its worker from the start).

use super::event::{Event, EventQueue};
use super::worker::{BACKGROUND_BASE, Memtable, SimWorker};
use crate::scenario::{Fault, Scenario};
use scorer_core::telemetry::Snapshot;

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
            from_ms,
            until_ms,
            offset_ms,
            period_ms,
            peak_bytes,
            put_slowdown_per_gib,
        } = *f
            && let Some(w) = ws.get_mut(worker)
        {
            w.memtables.push(Memtable {
                from_ms: from_ms.unwrap_or(0.0),
                until_ms: until_ms.unwrap_or(f64::INFINITY),
                offset_ms,
                period_ms,
                peak_bytes: peak_bytes as f64,
                put_slowdown_per_gib,
            });
        }
    }
    ws
}

/// `batch` as the workers report it at `t`: a worker with a [`Fault::Lie`]
/// in force carries its `as_worker`'s numbers (when that one reported)
/// under its own id and time; one with a [`Fault::Misreport`] in force
/// carries the fields it names instead of its own.
pub(super) fn lie(sc: &Scenario, mut batch: Vec<Snapshot>, t: f64) -> Vec<Snapshot> {
    let truth = batch.clone();
    let id = |w: usize| crate::arms::service_ids::worker_id(w);
    for f in &sc.faults {
        if let Fault::Misreport {
            worker,
            from_ms,
            to_ms,
            error_rate,
            queue_depth,
            cpu_usage,
        } = f
            && (*from_ms..*to_ms).contains(&t)
            && let Some(s) = batch.iter_mut().find(|s| s.worker_id == id(*worker))
        {
            s.error_rate = error_rate.unwrap_or(s.error_rate);
            s.queue_depth = queue_depth.unwrap_or(s.queue_depth);
            s.cpu_usage = cpu_usage.unwrap_or(s.cpu_usage);
            continue;
        }
        let Fault::Lie {
            worker,
            as_worker,
            from_ms,
            to_ms,
        } = f
        else {
            continue;
        };
        if !(*from_ms..*to_ms).contains(&t) {
            continue;
        }
        let (liar, told) = (id(*worker), id(*as_worker));
        let Some(numbers) = truth.iter().find(|s| s.worker_id == told) else {
            continue;
        };
        if let Some(s) = batch.iter_mut().find(|s| s.worker_id == liar) {
            let (own_id, own_ts) = (s.worker_id.clone(), s.timestamp_ms);
            *s = numbers.clone();
            s.worker_id = own_id;
            s.timestamp_ms = own_ts;
        }
    }
    batch
}

impl super::Sim<'_> {
    /// Fault `fault` starts (`start`) or ends at `t`.
    pub(super) fn fault(&mut self, fault: usize, start: bool, t: f64) {
        match self.sc.faults[fault] {
            Fault::Slow { worker, factor, .. } => {
                self.workers[worker].slow_factor = if start { factor } else { 1.0 };
            }
            Fault::Crash { worker, .. } => {
                if start {
                    for id in self.workers[worker].crash(t) {
                        if id < BACKGROUND_BASE {
                            self.q.push(t, Event::Refused { attempt: id });
                        }
                    }
                } else {
                    self.workers[worker].down = false;
                }
            }
            Fault::Zombie { worker, .. } => self.workers[worker].zombie = start,
            Fault::Burst { .. } => {
                if start {
                    self.q.push(t, Event::Background { fault });
                }
            }
            Fault::Drain { worker, .. } => self.arm.router().drain(worker, start, t),
            Fault::Compaction { .. }
            | Fault::Memtable { .. }
            | Fault::Lie { .. }
            | Fault::Misreport { .. } => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_liar_reports_its_mirrors_numbers_under_its_own_id_inside_the_window() {
        let sc = Scenario {
            faults: vec![Fault::Lie {
                worker: 0,
                as_worker: 2,
                from_ms: 1_000.0,
                to_ms: 2_000.0,
            }],
            ..Scenario::default()
        };
        let batch: Vec<Snapshot> = (0..3)
            .map(|i| {
                let mut s = Snapshot::new(format!("w{i}"), 100 + i as u64);
                s.cpu_usage = [0.1, 0.2, 0.3][i];
                s.queue_depth = i as u32;
                s
            })
            .collect();
        let told = lie(&sc, batch.clone(), 1_500.0);
        assert_eq!(
            (told[0].worker_id.as_str(), told[0].timestamp_ms),
            ("w0", 100)
        );
        assert_eq!((told[0].cpu_usage, told[0].queue_depth), (0.3, 2));
        assert_eq!(told[1..], batch[1..], "the others tell the truth");
        assert_eq!(
            lie(&sc, batch.clone(), 2_000.0),
            batch,
            "the window is half-open"
        );
    }

    #[test]
    fn a_misreport_replaces_only_the_fields_it_names_inside_the_window() {
        let sc = Scenario {
            faults: vec![Fault::Misreport {
                worker: 1,
                from_ms: 1_000.0,
                to_ms: 2_000.0,
                error_rate: Some(0.25),
                queue_depth: None,
                cpu_usage: Some(0.95),
            }],
            ..Scenario::default()
        };
        let batch: Vec<Snapshot> = (0..2)
            .map(|i| {
                let mut s = Snapshot::new(format!("w{i}"), 100);
                s.cpu_usage = 0.2;
                s.queue_depth = 3;
                s
            })
            .collect();
        let told = lie(&sc, batch.clone(), 1_000.0);
        assert_eq!(
            (told[1].error_rate, told[1].cpu_usage, told[1].queue_depth),
            (0.25, 0.95, 3)
        );
        assert_eq!(told[0], batch[0], "the others tell the truth");
        assert_eq!(lie(&sc, batch.clone(), 2_000.0), batch);
    }
}
