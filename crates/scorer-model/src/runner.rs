//! Running a loaded plan on the request path (issue #6).
//!
//! tract's `RunnableModel::run` builds a new `SimpleState` (value slots,
//! op states) on every call. [`Runner::predict`] keeps one `SimpleState` per
//! (thread, model) in a small thread-local cache instead, so a request on a
//! tokio worker thread reuses the state its thread built before. The input
//! tensor is reused too: each thread keeps the last [`INPUTS_PER_THREAD`]
//! `[n, F]` tensors (by shape), refills one in place and lends it to tract
//! by reference count, so a request allocates no input buffer once its
//! batch length has been seen on its thread. tract runs single-threaded on
//! the request's own thread: the model is a few µs of work, less than a
//! hand-off to a pool would cost.

use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};

use tract_onnx::prelude::*;

use super::op::{ModelError, RunnablePlan};

/// Models whose state a thread keeps (primary, A/B arm, shadow, plus one
/// being reloaded).
const STATES_PER_THREAD: usize = 4;

/// Input tensors (distinct `[n, F]` shapes) a thread keeps for reuse.
pub const INPUTS_PER_THREAD: usize = 4;

static NEXT_RUNNER_ID: AtomicU64 = AtomicU64::new(1);

thread_local! {
    static STATES: RefCell<Vec<(u64, TypedSimpleState)>> = const { RefCell::new(Vec::new()) };
    /// Most recently used first.
    static INPUTS: RefCell<Vec<Arc<Tensor>>> = const { RefCell::new(Vec::new()) };
}

/// This thread's `[n, f]` input tensor filled with `rows`: a kept one when
/// no one else holds it, else a new one (which is then kept).
fn input_tensor(rows: &[f32], n: usize, f: usize) -> Result<Arc<Tensor>, ModelError> {
    INPUTS.with(|cell| {
        let mut kept = cell.borrow_mut();
        let hit = kept.iter().position(|t| t.shape() == [n, f]);
        let mut tensor = match hit {
            Some(i) => kept.remove(i),
            None => Arc::new(Tensor::zero::<f32>(&[n, f]).map_err(tract("building input"))?),
        };
        if Arc::get_mut(&mut tensor).is_none() {
            tensor = Arc::new(Tensor::zero::<f32>(&[n, f]).map_err(tract("building input"))?);
        }
        if let Some(t) = Arc::get_mut(&mut tensor) {
            t.try_as_plain_ram_mut()
                .and_then(|mut v| v.as_slice_mut::<f32>().map(|s| s.copy_from_slice(rows)))
                .map_err(tract("building input"))?;
        }
        kept.insert(0, tensor.clone());
        kept.truncate(INPUTS_PER_THREAD);
        Ok(tensor)
    })
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
        let input = TValue::from_const(input_tensor(rows, n, f)?);
        STATES.with(|cell| {
            let mut states = cell.borrow_mut();
            let pos = self.state_index(&mut states)?;
            let outputs = states[pos].1.run(tvec!(input)).map_err(tract("running"))?;
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

#[cfg(test)]
mod tests {
    use rand::SeedableRng;

    use super::*;
    use crate::fixture::{random_model, random_row};
    use crate::{export_onnx, load_model, run};

    fn kept_input_ptr(n: usize, f: usize) -> Option<*const f32> {
        INPUTS.with(|c| {
            c.borrow()
                .iter()
                .find(|t| t.shape() == [n, f])
                .and_then(|t| {
                    t.try_as_plain_ram()
                        .ok()?
                        .as_slice::<f32>()
                        .ok()
                        .map(<[f32]>::as_ptr)
                })
        })
    }

    #[test]
    fn input_tensors_are_reused_and_results_stay_exact() {
        let bytes = export_onnx(&random_model(12, 4, 3)).unwrap();
        let runner = Runner::new(load_model(bytes.as_slice()).unwrap());
        let f = runner.n_features();
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(4);
        let mut out = Vec::new();
        // Lengths revisited after others, and more shapes than are kept.
        for n in [3usize, 3, 5, 3, 1, 2, 7, 9, 3, 3] {
            let rows: Vec<f32> = (0..n).flat_map(|_| random_row(&mut rng)).collect();
            runner.predict(&rows, n, &mut out).unwrap();
            let fresh = run(&runner.plan, &rows, n).unwrap();
            assert_eq!(
                out.iter().map(|p| p.to_bits()).collect::<Vec<_>>(),
                fresh.iter().map(|p| p.to_bits()).collect::<Vec<_>>(),
                "n={n}"
            );
            assert!(
                kept_input_ptr(n, f).is_some(),
                "the shape just used is kept"
            );
        }
        // Two calls in a row with one shape refill the same buffer.
        let rows: Vec<f32> = (0..4).flat_map(|_| random_row(&mut rng)).collect();
        runner.predict(&rows, 4, &mut out).unwrap();
        let before = kept_input_ptr(4, f);
        runner.predict(&rows, 4, &mut out).unwrap();
        assert_eq!(kept_input_ptr(4, f), before);
        INPUTS.with(|c| assert!(c.borrow().len() <= INPUTS_PER_THREAD));
    }
}
