//! The body of a `POST /v1/score` answer at the request's `explain` level.
//!
//! A router needs the pick, its probability, the decision id and each
//! candidate's id, eligibility and final score: the compact answer, the
//! default, is that (about 1 KB for 16 candidates). The itemised
//! explanation (every adjustment with its sentence) is ~15× larger and costs
//! more to render than to score, so it is sent only when asked for.

use serde::Serialize;
use serde::ser::{SerializeSeq, SerializeStruct};

use scorer_engine::Decided;
use scorer_engine::api::{CompactScore, CompactScores, Explain, ScoreResponse, WorkerScore};

/// `decided` serialised as JSON at `level`: a compact answer as itself, an
/// explained one at `level` (its compact part alone at `none`).
pub(crate) fn render(decided: &Decided<'_>, level: Explain) -> serde_json::Result<Vec<u8>> {
    match (decided, level) {
        (Decided::Explained(resp), Explain::None) => serde_json::to_vec(&Compact(resp)),
        (Decided::Explained(resp), Explain::Itemised | Explain::Full) => serde_json::to_vec(resp),
        (Decided::Scores(scores), _) => serde_json::to_vec(&Scores(scores)),
        (Decided::Pick(_), _) => Err(serde::ser::Error::custom(
            "a pick answer has no candidates to show",
        )),
    }
}

/// The compact answer of a compact decision: the same JSON as
/// [`Compact`] of its explained twin.
struct Scores<'a, 'r>(&'a CompactScores<'r>);

impl Serialize for Scores<'_, '_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let r = self.0;
        let mut m = s.serialize_struct("ScoreResponse", 6)?;
        m.serialize_field("decision_id", &r.decision_id)?;
        if let Some(pick) = r.pick {
            m.serialize_field("pick", pick)?;
        }
        if let Some(p) = r.probability {
            m.serialize_field("probability", &p)?;
        }
        m.serialize_field("policy", r.policy)?;
        m.serialize_field("panic", &r.panic)?;
        m.serialize_field("scores", &ScoreRows(&r.scores))?;
        m.end()
    }
}

struct ScoreRows<'a, 'r>(&'a [CompactScore<'r>]);

impl Serialize for ScoreRows<'_, '_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(self.0.len()))?;
        for w in self.0 {
            seq.serialize_element(&ScoreRow(w))?;
        }
        seq.end()
    }
}

struct ScoreRow<'a, 'r>(&'a CompactScore<'r>);

impl Serialize for ScoreRow<'_, '_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let w = self.0;
        let mut m = s.serialize_struct("WorkerScore", 4)?;
        m.serialize_field("worker_id", w.worker_id)?;
        m.serialize_field("eligible", &w.reason.is_none())?;
        if let Some(reason) = w.reason {
            m.serialize_field("reason", reason)?;
        }
        m.serialize_field("final_score", &scorer_core::fmt::points(w.final_score))?;
        m.end()
    }
}

struct Compact<'a>(&'a ScoreResponse);

impl Serialize for Compact<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let r = self.0;
        let mut m = s.serialize_struct("ScoreResponse", 6)?;
        m.serialize_field("decision_id", &r.decision_id)?;
        if let Some(pick) = &r.pick {
            m.serialize_field("pick", pick)?;
        }
        if let Some(p) = r.probability {
            m.serialize_field("probability", &p)?;
        }
        m.serialize_field("policy", r.policy)?;
        m.serialize_field("panic", &r.panic)?;
        m.serialize_field("scores", &Candidates(&r.scores))?;
        m.end()
    }
}

struct Candidates<'a>(&'a [WorkerScore]);

impl Serialize for Candidates<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(self.0.len()))?;
        for w in self.0 {
            seq.serialize_element(&Candidate(w))?;
        }
        seq.end()
    }
}

struct Candidate<'a>(&'a WorkerScore);

impl Serialize for Candidate<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let w = self.0;
        let mut m = s.serialize_struct("WorkerScore", 4)?;
        m.serialize_field("worker_id", &w.worker_id)?;
        m.serialize_field("eligible", &w.eligible)?;
        if let Some(reason) = w.reason {
            m.serialize_field("reason", reason)?;
        }
        m.serialize_field("final_score", &scorer_core::fmt::points(w.final_score))?;
        m.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;
    use scorer_core::scoring::RequestContext;
    use scorer_core::telemetry::Snapshot;
    use scorer_engine::api::ScoreRequest;
    use scorer_engine::config::Config;
    use scorer_engine::{DecideCall, Engine, NoObserver, Output};

    const WALL: u64 = 1_750_000_000_000;

    fn engine() -> Engine {
        let e = Engine::new(Config::default());
        let batch: Vec<Snapshot> = (0..4)
            .map(|w| {
                let mut s = Snapshot::new(format!("w{w}"), WALL);
                s.cpu_usage = 0.2 * w as f64;
                s.queue_depth = 3 * w;
                s
            })
            .collect();
        e.ingest(&batch, 1_000, WALL).expect("valid batch");
        e
    }

    #[test]
    fn a_compact_decision_renders_as_the_explained_one_does_without_explain() {
        let (compact, explained) = (engine(), engine());
        let ctx = RequestContext::default();
        for (round, policy) in ["softmax", "max", "p2c", "none"].iter().enumerate() {
            let mut req = ScoreRequest::new(
                format!("user:{round}:profile"),
                ["w0", "w1", "w2", "w3", "ghost"].map(String::from).to_vec(),
            );
            req.policy = Some((*policy).into());
            let decide = |e: &Engine, output| {
                let call = DecideCall::new(&req, &ctx, 1_000)
                    .expect("a valid call")
                    .output(output)
                    .with_id(format!("d-{round}"));
                let mut rng = ChaCha8Rng::seed_from_u64(round as u64);
                let d = e.decide(call, &mut rng, &mut NoObserver).expect("decided");
                render(&d, Explain::None).expect("renders")
            };
            assert_eq!(
                String::from_utf8(decide(&compact, Output::Scores)),
                String::from_utf8(decide(&explained, Output::Explained)),
                "{policy}"
            );
        }
    }
}
