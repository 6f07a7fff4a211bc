//! What [`crate::Engine::decide`] answers, as its call's
//! [`super::Output`] asked.

use crate::api::{CompactPick, CompactScores, ScoreResponse};

/// A decision's answer.
#[derive(Debug, Clone, PartialEq)]
pub enum Decided<'r> {
    /// [`super::Output::Pick`].
    Pick(CompactPick<'r>),
    /// [`super::Output::Scores`].
    Scores(CompactScores<'r>),
    /// [`super::Output::Explained`].
    Explained(ScoreResponse),
}

impl<'r> Decided<'r> {
    /// The explained answer; `None` for a compact one.
    pub fn explained(self) -> Option<ScoreResponse> {
        match self {
            Self::Explained(r) => Some(r),
            _ => None,
        }
    }

    /// The picked candidate and its propensity, whatever the output
    /// (`None` under policy `none`).
    pub fn picked(&self) -> Option<(&str, Option<f64>)> {
        match self {
            Self::Pick(p) => p.pick.map(|w| (w, p.probability)),
            Self::Scores(s) => s.pick.map(|w| (w, s.probability)),
            Self::Explained(r) => r.pick.as_deref().map(|w| (w, r.probability)),
        }
    }
}
