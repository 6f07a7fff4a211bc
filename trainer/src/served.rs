//! What the retraining loop serves and where its decisions take effect:
//! [`Served`], a model (or the rules alone) loaded once, and [`Serve`],
//! the service's admin API or a host that holds the model itself.

use std::path::{Path, PathBuf};

use scorer_model::RunnablePlan;

use crate::error::Result;
use crate::parity::served_probabilities;
use crate::validate::load_model_dir;

/// A served model: its directory (`None`: the rules alone), version and
/// ONNX plan, loaded once.
#[derive(Debug, Clone)]
pub struct Served {
    /// The model directory; `None` for the rules alone.
    pub dir: Option<PathBuf>,
    /// Its card's model version (`rules` for the rules alone).
    pub version: String,
    pub(crate) plan: Option<RunnablePlan>,
}

impl PartialEq for Served {
    fn eq(&self, other: &Self) -> bool {
        (&self.dir, &self.version) == (&other.dir, &other.version)
    }
}

impl Served {
    /// The model of `dir` (its card read), or the rules alone.
    ///
    /// # Errors
    /// As [`load_model_dir`].
    pub fn of(dir: Option<&Path>) -> Result<Self> {
        Ok(match dir {
            None => Served {
                dir: None,
                version: "rules".into(),
                plan: None,
            },
            Some(d) => {
                let m = load_model_dir(d)?;
                Served {
                    version: m.card.model_version,
                    dir: Some(d.to_path_buf()),
                    plan: Some(m.plan),
                }
            }
        })
    }

    /// Each row's prediction `ln(latency / E)`: the model's, or 0 for the
    /// rules (factor 1).
    ///
    /// # Errors
    /// tract errors.
    pub fn predict(&self, features: &[f32]) -> Result<Vec<f32>> {
        match &self.plan {
            None => Ok(vec![
                0.0;
                features.len() / scorer_core::features::FEATURE_COUNT
            ]),
            Some(plan) => served_probabilities(plan, features, |_| {}),
        }
    }
}

/// Where the loop's decisions take effect: the service's admin API
/// ([`crate::promote::AdminClient`]), or a host that holds the model
/// itself (the simulator's service).
pub trait Serve {
    /// Serve the model in `dir` (already published).
    ///
    /// # Errors
    /// The model was not served; the loop's view of what is served stays.
    fn promote(&self, dir: &Path) -> Result<()>;
    /// Serve again what was served before the last promotion.
    ///
    /// # Errors
    /// As [`Serve::promote`].
    fn rollback(&self) -> Result<()>;
}

impl Serve for crate::promote::AdminClient {
    fn promote(&self, dir: &Path) -> Result<()> {
        crate::promote::AdminClient::promote(self, dir).map(drop)
    }

    fn rollback(&self) -> Result<()> {
        crate::promote::AdminClient::rollback(self).map(drop)
    }
}
