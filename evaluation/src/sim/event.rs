//! The discrete-event core: a time-ordered queue of events.
//!
//! A [`std::collections::BinaryHeap`] of `(time, sequence)`-keyed entries,
//! popped earliest first; events at the same time pop in the order they were
//! pushed (the sequence number), so a run is deterministic for a seed. Time
//! is simulated milliseconds (`f64`), never the wall clock.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

/// What happens at an instant of simulated time.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// The next client request arrives (Poisson process).
    Arrival,
    /// An attempt of request `req` is (re)dispatched after a retry.
    Retry {
        /// Request index.
        req: usize,
    },
    /// Worker `worker` finished the job of attempt `attempt`.
    JobDone {
        /// Worker index.
        worker: usize,
        /// Attempt index (`usize::MAX` for background load).
        attempt: usize,
    },
    /// Attempt `attempt` fails fast (connection refused by a crashed worker).
    Refused {
        /// Attempt index.
        attempt: usize,
    },
    /// The client's timeout of attempt `attempt` fires.
    Timeout {
        /// Attempt index.
        attempt: usize,
    },
    /// Every live worker takes a telemetry snapshot.
    Telemetry,
    /// Fault number `fault` of the scenario starts (`start = true`) or ends.
    Fault {
        /// Index into the scenario's faults.
        fault: usize,
        /// Start or end.
        start: bool,
    },
    /// A background (unrouted) job arrives at a worker during a burst.
    Background {
        /// Index into the scenario's faults (the burst).
        fault: usize,
    },
    /// A service arm's score call for request `req` reaches the scorer.
    ScoreCall {
        /// Request index.
        req: usize,
        /// The request's attempt this call picks for.
        call: u32,
    },
    /// The router stops waiting for the answer to call `call` of request
    /// `req` (`Scenario::scorer_timeout_ms`).
    ScoreTimeout {
        /// Request index.
        req: usize,
        /// The request's attempt the call picks for.
        call: u32,
    },
    /// A scorer core starts on request `req`'s call: the service decides
    /// now; the answer leaves after `service_ms`.
    Decide {
        /// Request index.
        req: usize,
        /// The request's attempt this call picks for.
        call: u32,
        /// How long the call holds the core, ms.
        service_ms: f64,
    },
    /// The score answer reaches the router, which sends the request.
    Answer {
        /// Request index.
        req: usize,
        /// The request's attempt the pick is for.
        call: u32,
        /// The picked worker.
        worker: usize,
        /// The decision id to report the outcome under.
        decision_id: Option<String>,
    },
    /// Router `router`'s feedback flush clock ticks.
    FeedbackFlush {
        /// Router index.
        router: usize,
    },
    /// Feedback batch `batch` reaches the service.
    FeedbackArrive {
        /// Index of the batch in transit.
        batch: usize,
    },
    /// Router `router`'s load-report clock ticks: it posts its outstanding
    /// picks to the service.
    LoadReport {
        /// Router index.
        router: usize,
    },
    /// Router `router`'s view stream delivers the others' load (the
    /// stream's own 5 ms clock, at its own phase).
    LoadView {
        /// Router index.
        router: usize,
    },
    /// Service replica `replica`'s load-gauge clock ticks: it publishes
    /// its outstanding picks per worker on the bus.
    BusPublish {
        /// Replica index.
        replica: usize,
    },
    /// Telemetry batch `batch` reaches the service.
    TelemetryArrive {
        /// Index of the batch in transit.
        batch: usize,
    },
    /// A compaction on a worker starts or ends.
    Compaction {
        /// Index into the scenario's faults.
        fault: usize,
        /// Start or end of one compaction.
        start: bool,
    },
}

#[derive(Debug)]
struct Entry {
    at_ms: f64,
    seq: u64,
    event: Event,
}

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Entry {
    /// Reversed, so the max-heap pops the earliest (then first-pushed) entry.
    fn cmp(&self, other: &Self) -> Ordering {
        other
            .at_ms
            .total_cmp(&self.at_ms)
            .then_with(|| other.seq.cmp(&self.seq))
    }
}

/// Earliest-first event queue.
#[derive(Debug, Default)]
pub struct EventQueue {
    heap: BinaryHeap<Entry>,
    seq: u64,
}

impl EventQueue {
    /// An empty queue.
    pub fn new() -> Self {
        Self::default()
    }

    /// Schedule `event` at simulated time `at_ms`.
    pub fn push(&mut self, at_ms: f64, event: Event) {
        self.seq += 1;
        self.heap.push(Entry {
            at_ms,
            seq: self.seq,
            event,
        });
    }

    /// The earliest event and its time, if any.
    pub fn pop(&mut self) -> Option<(f64, Event)> {
        self.heap.pop().map(|e| (e.at_ms, e.event))
    }

    /// Events waiting.
    pub fn len(&self) -> usize {
        self.heap.len()
    }

    /// No event is waiting.
    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pops_earliest_first_and_ties_in_push_order() {
        let mut q = EventQueue::new();
        q.push(5.0, Event::Telemetry);
        q.push(1.0, Event::Arrival);
        q.push(5.0, Event::Retry { req: 1 });
        q.push(0.5, Event::Timeout { attempt: 2 });
        let order: Vec<_> = std::iter::from_fn(|| q.pop()).collect();
        assert_eq!(
            order,
            vec![
                (0.5, Event::Timeout { attempt: 2 }),
                (1.0, Event::Arrival),
                (5.0, Event::Telemetry),
                (5.0, Event::Retry { req: 1 }),
            ]
        );
    }
}
