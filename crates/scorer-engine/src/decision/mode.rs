//! Whether a decision routes or only shows how it would.

/// Whether a scoring is a routing decision or only shows one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScoreMode {
    /// A decision: the pick is charged to its worker's in-flight count and
    /// remembered for feedback; the decision and model
    /// counters, the model latency histogram and breaker, the shadow
    /// comparison and each worker's last final score are updated, and the
    /// decision goes to the log when sampled.
    Decide,
    /// A preview (`GET /v1/debug/score`, the status page): the same scores,
    /// features and explanations a decision would get at that instant, but
    /// nothing above changes and no shadow model runs, so looking at the
    /// service never moves what it decides.
    Preview,
}
