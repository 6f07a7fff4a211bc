//! One retrained model per scenario, shared by the runs of `evaluate all`.
//!
//! `model-retrained` trains on the scenario's `service-rules` decision log
//! from a held-out seed. Run alone (`evaluate sim`), each run trains on its
//! own seed + [`crate::arms::model::RETRAIN_SEED_OFFSET`]. `evaluate all`
//! trains once per scenario, on the first evaluation seed + the offset, and
//! the three evaluation seeds' runs share that model: the training was
//! about half of the simulator's time, and the held-out seed stays held
//! out. A run that asks while another is training waits for it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use crate::arms::model::Retrained;

type Slot<T> = Arc<OnceLock<Result<Arc<T>, String>>>;

/// The models trained so far, by scenario and logging seed; dropped (and
/// their working directories removed) with the cache.
pub struct RetrainCache<T = Retrained> {
    /// The held-out seed every run trains on.
    pub logging_seed: u64,
    slots: Mutex<HashMap<(String, u64), Slot<T>>>,
}

impl<T> std::fmt::Debug for RetrainCache<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RetrainCache")
            .field("logging_seed", &self.logging_seed)
            .finish_non_exhaustive()
    }
}

impl<T> RetrainCache<T> {
    /// An empty cache whose runs train on `logging_seed`.
    pub fn new(logging_seed: u64) -> Self {
        Self {
            logging_seed,
            slots: Mutex::new(HashMap::new()),
        }
    }

    /// The model of `scenario`, trained by `train` on the first call and
    /// shared after.
    ///
    /// # Errors
    /// The training's error, for every caller.
    pub fn get_or_train(
        &self,
        scenario: &str,
        train: impl FnOnce() -> Result<T, String>,
    ) -> Result<Arc<T>, String> {
        let slot = {
            let mut slots = self
                .slots
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            slots
                .entry((scenario.to_owned(), self.logging_seed))
                .or_default()
                .clone()
        };
        slot.get_or_init(|| train().map(Arc::new)).clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scenario_trains_once_and_its_runs_share_the_model_or_the_error() {
        let cache: RetrainCache<u32> = RetrainCache::new(1_101);
        let calls = std::cell::Cell::new(0);
        let train = |v: u32| {
            calls.set(calls.get() + 1);
            Ok(v)
        };
        assert_eq!(*cache.get_or_train("a", || train(7)).unwrap(), 7);
        assert_eq!(*cache.get_or_train("a", || train(8)).unwrap(), 7, "shared");
        assert_eq!(*cache.get_or_train("b", || train(9)).unwrap(), 9);
        assert_eq!(calls.get(), 2);
        assert!(
            cache
                .get_or_train("c", || Err("no logs".to_owned()))
                .is_err()
        );
        let again = cache.get_or_train("c", || train(1));
        assert_eq!(
            again.unwrap_err(),
            "no logs",
            "a failed training is not retried"
        );
    }
}
