//! The engine's decision sink as the Parquet [`DecisionLog`] the service
//! attached, for its stats, flush and shutdown.

use std::any::Any;
use std::sync::Arc;

use scorer_engine::Engine;
use scorer_log::DecisionLog;

/// The Parquet decision log behind an [`Engine`].
pub trait EngineLog {
    /// The attached sink when it is a [`DecisionLog`]; `None` without a
    /// log or with another kind of sink.
    fn decision_log(&self) -> Option<Arc<DecisionLog>>;
}

impl EngineLog for Engine {
    fn decision_log(&self) -> Option<Arc<DecisionLog>> {
        let sink: Arc<dyn Any + Send + Sync> = self.decision_sink()?.clone();
        sink.downcast().ok()
    }
}
