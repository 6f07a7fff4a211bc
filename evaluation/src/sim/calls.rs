//! A service arm's score call, as its router sees it: the call crosses to
//! the scorer, waits for a core, is decided and answered; the router
//! stops waiting after `Scenario::scorer_timeout_ms` and picks by itself
//! (an answer that comes later is dropped). An embedded arm's pick comes
//! back as an answer too, after its pick time.

use super::Sim;
use super::event::Event;

impl Sim<'_> {
    /// Handles a score call's event at `t`.
    pub(super) fn on_call(&mut self, t: f64, ev: Event) {
        match ev {
            Event::ScoreCall { req, call } => {
                // Router r calls replica r % replicas (0 with one service).
                let replica = self.reqs[req].router % self.replicas;
                let (start_ms, service_ms) = self.scorer.admit(replica, t);
                self.q.push(
                    start_ms,
                    Event::Decide {
                        req,
                        call,
                        service_ms,
                    },
                );
            }
            Event::Decide {
                req,
                call,
                service_ms,
            } => {
                let pick = self.decide(req, t);
                self.q.push(
                    t + service_ms + self.scorer.one_way_ms(),
                    Event::Answer {
                        req,
                        call,
                        worker: pick.worker,
                        decision_id: pick.decision_id,
                    },
                );
            }
            Event::ScoreTimeout { req, call } if self.reqs[req].awaiting == Some(call) => {
                self.reqs[req].awaiting = None;
                self.rec.scorer_errors += 1;
                self.rec.decision_ms.push(t - self.reqs[req].asked_ms);
                let router = self.reqs[req].router;
                let worker = self.in_flight.fallback_pick(router, &mut self.pick_rng);
                self.send(req, worker, None, t);
            }
            Event::Answer {
                req,
                call,
                worker,
                decision_id,
            } => {
                // A remote answer after the router gave up on it is dropped:
                // the service's pick expires without feedback.
                if self.remote && self.reqs[req].awaiting.take() != Some(call) {
                    return;
                }
                self.rec.decision_ms.push(t - self.reqs[req].asked_ms);
                self.send(req, worker, decision_id, t);
            }
            _ => {}
        }
    }
}
