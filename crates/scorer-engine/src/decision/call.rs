//! One decision's call: the request and its context, checked at
//! construction, with what the caller reads of the answer, and when.

use std::sync::Arc;

use super::error::{MAX_CLIENT_REGION_BYTES, ScoreError};
use super::mode::ScoreMode;
use crate::api::{MAX_TIMEOUT_MS, ScoreRequest};
use scorer_core::scoring::RequestContext;

/// The context of a request that states none.
static NO_CONTEXT: RequestContext = RequestContext {
    request_type: None,
    client_region: None,
    timeout_ms: None,
    batch_size: None,
};

/// How much of a decision its caller reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Output {
    /// The pick alone ([`crate::api::CompactPick`]): what a router routes
    /// with; nothing is explained and, in the steady state, nothing is
    /// allocated.
    Pick,
    /// The pick and every candidate's eligibility and final score
    /// ([`crate::api::CompactScores`]): the compact HTTP answer.
    Scores,
    /// The explained answer ([`crate::api::ScoreResponse`]): adjustments,
    /// reasons, ranking and feature vectors.
    Explained,
}

/// A decision's inputs, checked: build one with [`DecideCall::new`] and
/// hand it to [`crate::Engine::decide`].
#[derive(Debug)]
pub struct DecideCall<'r> {
    pub(crate) req: &'r ScoreRequest,
    pub(crate) context: &'r RequestContext,
    pub(crate) now_ms: u64,
    pub(crate) wall_ms: u64,
    pub(crate) mode: ScoreMode,
    pub(crate) output: Output,
    pub(crate) blackout: bool,
    pub(crate) decision_id: Option<String>,
    pub(crate) caller: Option<Arc<str>>,
}

impl<'r> DecideCall<'r> {
    /// A decision on `req` with `context` (the request's own, or one merged
    /// with a transport's headers) at monotonic `now_ms`: a
    /// [`ScoreMode::Decide`] read as [`Output::Pick`], its id from the
    /// engine's source, its log row (if any) stamped at wall time 0 until
    /// [`DecideCall::logged_at`].
    ///
    /// # Errors
    /// [`ScoreError::BadClientRegion`], [`ScoreError::BadBatchSize`] or
    /// [`ScoreError::BadTimeout`] for a context out of its bounds. The
    /// request's own fields are checked when the engine decides, against
    /// its configuration.
    pub fn new(
        req: &'r ScoreRequest,
        context: &'r RequestContext,
        now_ms: u64,
    ) -> Result<Self, ScoreError> {
        check_context(context)?;
        Ok(Self {
            req,
            context,
            now_ms,
            wall_ms: 0,
            mode: ScoreMode::Decide,
            output: Output::Pick,
            blackout: false,
            decision_id: None,
            caller: None,
        })
    }

    /// [`DecideCall::new`] with the request's own context (none: every
    /// field absent).
    ///
    /// # Errors
    /// As [`DecideCall::new`].
    pub fn of_request(req: &'r ScoreRequest, now_ms: u64) -> Result<Self, ScoreError> {
        Self::new(req, req.context.as_ref().unwrap_or(&NO_CONTEXT), now_ms)
    }

    /// Read the answer as `output`.
    #[must_use]
    pub fn output(mut self, output: Output) -> Self {
        self.output = output;
        self
    }

    /// Decide without a view of the workers' telemetry (a router's
    /// balancer whose last view is older than its time to live) when
    /// `blackout`: every candidate the engine has a slot for is live and
    /// scores 100 before dynamics, penalty states and reported signals
    /// count for nothing, and the routing cost rests on local evidence
    /// alone. Candidates never seen stay ineligible.
    #[must_use]
    pub fn blackout(mut self, blackout: bool) -> Self {
        self.blackout = blackout;
        self
    }

    /// Only show what a decision would be ([`ScoreMode::Preview`]),
    /// explained; its decision id is empty.
    #[must_use]
    pub fn preview(mut self) -> Self {
        self.mode = ScoreMode::Preview;
        self.output = Output::Explained;
        self
    }

    /// Use `decision_id` rather than one from the engine's source.
    #[must_use]
    pub fn with_id(mut self, decision_id: String) -> Self {
        self.decision_id = Some(decision_id);
        self
    }

    /// Stamp the decision's log row (when it is sampled) at `wall_ms`
    /// (Unix ms), naming `caller`, the configured name of the credential
    /// that asked.
    #[must_use]
    pub fn logged_at(mut self, wall_ms: u64, caller: Option<Arc<str>>) -> Self {
        self.wall_ms = wall_ms;
        self.caller = caller;
        self
    }
}

/// A context's bounds: a deadline sets the failure penalty and the expiry
/// of the outstanding pick, so an absurd one would enter the worker's
/// state.
fn check_context(ctx: &RequestContext) -> Result<(), ScoreError> {
    if ctx
        .client_region
        .as_ref()
        .is_some_and(|r| r.len() > MAX_CLIENT_REGION_BYTES || r.chars().any(char::is_control))
    {
        return Err(ScoreError::BadClientRegion);
    }
    if ctx.batch_size == Some(0) {
        return Err(ScoreError::BadBatchSize);
    }
    if let Some(t) = ctx.timeout_ms.filter(|&t| t > MAX_TIMEOUT_MS) {
        return Err(ScoreError::BadTimeout(t));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(ctx: RequestContext) -> Result<(), ScoreError> {
        let req = ScoreRequest::new("k", vec!["w1".into()]);
        DecideCall::new(&req, &ctx, 0).map(|_| ())
    }

    #[test]
    fn a_context_out_of_bounds_is_refused_with_its_field() {
        let region = |r: &str| RequestContext {
            client_region: Some(r.into()),
            ..RequestContext::default()
        };
        assert_eq!(call(region(&"r".repeat(64))), Ok(()));
        assert_eq!(
            call(region(&"r".repeat(65))),
            Err(ScoreError::BadClientRegion)
        );
        assert_eq!(call(region("a\u{7}b")), Err(ScoreError::BadClientRegion));
        let batch = RequestContext {
            batch_size: Some(0),
            ..RequestContext::default()
        };
        assert_eq!(call(batch), Err(ScoreError::BadBatchSize));
        let late = RequestContext {
            timeout_ms: Some(MAX_TIMEOUT_MS + 1),
            ..RequestContext::default()
        };
        assert_eq!(
            call(late).map_err(|e| e.to_string()),
            Err("`context.timeout_ms` must be at most 86400000 ms (one day), got 86400001".into())
        );
    }
}
