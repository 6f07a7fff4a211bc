//! What happens when an attempt ends: its outcome reaches the router (at
//! once, or batched toward a remote scorer), and the request succeeds,
//! retries or fails.

use super::Sim;
use super::event::Event;
use super::remote::{Buffered, PendingOutcome};
use crate::router::Outcome;

impl Sim<'_> {
    /// A batch of outcomes leaves a router's buffer at `t`.
    pub(super) fn send_feedback(&mut self, batch: Vec<PendingOutcome>, t: f64) {
        if batch.is_empty() {
            return;
        }
        self.feedback_in_transit.push(Some(batch));
        self.q.push(
            t + self.scorer.one_way_ms(),
            Event::FeedbackArrive {
                batch: self.feedback_in_transit.len() - 1,
            },
        );
    }

    /// Attempt `attempt` ended at `t` (success, timeout or refusal).
    pub(super) fn complete(&mut self, attempt: usize, t: f64, success: bool) {
        let a = &mut self.attempts[attempt];
        a.done = true;
        let (req, worker, router) = (a.req, a.worker, a.router);
        let latency = t - a.start_ms;
        self.in_flight.done(router, worker);
        let id = a.decision_id.take();
        let cache_hit = a.cache_hit.filter(|_| success);
        if self.remote {
            let pending = PendingOutcome {
                worker,
                decision_id: id,
                latency_ms: latency,
                success,
                router,
                cache_hit,
            };
            match self.outbox.push(pending, t) {
                Buffered::SendNow(batch) => self.send_feedback(batch, t),
                Buffered::TickAt(tick) => self.q.push(tick, Event::FeedbackFlush { router }),
                Buffered::Wait => {}
            }
        } else {
            self.arm.router().outcome(&Outcome {
                worker,
                decision_id: id.as_deref(),
                latency_ms: latency,
                success,
                now_ms: t,
                router,
                cache_hit,
            });
        }
        let r = &self.reqs[req];
        if success {
            self.rec.latencies_ms.push(t - r.start_ms);
            self.rec.finished_at_ms.push(t);
        } else if r.attempts <= self.sc.max_retries {
            self.q.push(t, Event::Retry { req });
        } else {
            self.rec.failed += 1;
            self.rec.latencies_ms.push(t - r.start_ms);
            self.rec.finished_at_ms.push(t);
        }
    }
}
