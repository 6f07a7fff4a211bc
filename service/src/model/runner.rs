//! Running a loaded plan on the request path (issue #6).
//!
//! tract's `RunnableModel::run` builds a new `SimpleState` (value slots,
//! op states) on every call. [`Runner::predict`] keeps one `SimpleState` per
//! (thread, model) in a small thread-local cache instead, so a request on a
//! tokio worker thread reuses the state its thread built before. tract runs
//! single-threaded on the request's own thread: the model is a few µs of
//! work, less than a hand-off to a pool would cost.

use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};

use tract_onnx::prelude::*;

use super::op::{ModelError, RunnablePlan};

/// Models whose state a thread keeps (primary, A/B arm, shadow, plus one
/// being reloaded).
const STATES_PER_THREAD: usize = 4;

static NEXT_RUNNER_ID: AtomicU64 = AtomicU64::new(1);

thread_local! {
    static STATES: RefCell<Vec<(u64, TypedSimpleState)>> = const { RefCell::new(Vec::new()) };
}

/// A plan plus a process-unique id keying the thread-local states.
#[derive(Debug)]
pub struct Runner {
    plan: RunnablePlan,
    id: u64,
}

fn tract(stage: &'static str) -> impl Fn(TractError) -> ModelError {
    move |e| ModelError::Tract {
        stage,
        message: format!("{e:#}"),
    }
}

impl Runner {
    /// Wraps a loaded plan.
    pub fn new(plan: RunnablePlan) -> Self {
        Self {
            plan,
            id: NEXT_RUNNER_ID.fetch_add(1, Ordering::Relaxed),
        }
    }

    /// Features per row.
    pub fn n_features(&self) -> usize {
        self.plan.n_features()
    }

    /// Builds this thread's state for the model if it has none yet, so that
    /// the one-time set-up is not charged to a timed inference.
    ///
    /// # Errors
    /// [`ModelError::Tract`] if tract cannot create the state.
    pub fn warm(&self) -> Result<(), ModelError> {
        STATES.with(|cell| self.state_index(&mut cell.borrow_mut()).map(|_| ()))
    }

    fn state_index(&self, states: &mut Vec<(u64, TypedSimpleState)>) -> Result<usize, ModelError> {
        if let Some(p) = states.iter().position(|(id, _)| *id == self.id) {
            return Ok(p);
        }
        if states.len() >= STATES_PER_THREAD {
            states.remove(0);
        }
        let st = TypedSimpleState::new(self.plan.plan()).map_err(tract("creating state"))?;
        states.push((self.id, st));
        Ok(states.len() - 1)
    }

    /// Runs `n` rows (`rows`: `n × n_features` f32, row-major) and writes the
    /// primary output (probabilities, one per row) into `out`.
    ///
    /// # Errors
    /// [`ModelError::Shape`] if `rows.len() != n × n_features`;
    /// [`ModelError::Tract`] if tract fails or the output has the wrong length.
    pub fn predict(&self, rows: &[f32], n: usize, out: &mut Vec<f32>) -> Result<(), ModelError> {
        let f = self.plan.n_features();
        if n.checked_mul(f) != Some(rows.len()) {
            return Err(ModelError::Shape {
                got: rows.len(),
                n,
                n_features: f,
            });
        }
        let input = Tensor::from_shape(&[n, f], rows).map_err(tract("building input"))?;
        STATES.with(|cell| {
            let mut states = cell.borrow_mut();
            let pos = self.state_index(&mut states)?;
            let outputs = states[pos]
                .1
                .run(tvec!(input.into_tvalue()))
                .map_err(tract("running"))?;
            let o = outputs
                .get(self.plan.primary_output())
                .ok_or_else(|| ModelError::Tract {
                    stage: "reading outputs",
                    message: "model has no output".into(),
                })?;
            let plain = o.try_as_plain_ram().map_err(tract("reading outputs"))?;
            let values = plain.as_slice::<f32>().map_err(tract("reading outputs"))?;
            if values.len() != n {
                return Err(ModelError::Tract {
                    stage: "reading outputs",
                    message: format!("{} outputs for {n} rows", values.len()),
                });
            }
            out.clear();
            out.extend_from_slice(values);
            Ok(())
        })
    }
}
