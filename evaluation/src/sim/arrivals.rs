//! What reaches a service arm across the network: its routers' outcome
//! batches, half a round trip after they were flushed, and the workers'
//! telemetry, `telemetry_delay_ms` after the snapshot (an embedded arm's
//! through the view stream).

use super::Sim;
use super::event::Event;
use crate::arms::Arm;
use crate::router::Outcome;

impl Sim<'_> {
    /// Handles an outcome batch's or a telemetry batch's arrival at `t`.
    pub(super) fn on_arrival(&mut self, t: f64, ev: Event) {
        match ev {
            Event::FeedbackArrive { batch } => {
                for o in self.feedback_in_transit[batch].take().unwrap_or_default() {
                    self.arm.router().outcome(&Outcome {
                        worker: o.worker,
                        decision_id: o.decision_id.as_deref(),
                        latency_ms: o.latency_ms,
                        success: o.success,
                        now_ms: t,
                        router: o.router,
                        cache_hit: o.cache_hit,
                    });
                }
            }
            Event::TelemetryArrive { batch } => {
                if let Some(b) = self.telemetry_in_transit[batch].take() {
                    let age_ms = self.view_stream_ms();
                    match &mut *self.arm {
                        Arm::Embedded(e) => e.view(&b, t, age_ms),
                        Arm::Remote(r) => r.telemetry(&b, t),
                        Arm::Local(_) | Arm::Oracle(_) => {}
                    }
                }
            }
            _ => {}
        }
    }
}
