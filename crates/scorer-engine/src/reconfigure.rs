//! Applying a configuration hot reload (issue #8). The checks live in
//! [`crate::config_reload`]; this file swaps the result in.

use std::sync::{Arc, PoisonError};

use serde::Serialize;

use super::{ActiveConfig, Engine};
use crate::config::Config;
use crate::config_reload::{ConfigChange, ReloadError, plan};
use scorer_core::selection::Selector;
use scorer_model::ReloadReport;

/// What an applied reload changed.
#[derive(Debug, Clone, Serialize)]
pub struct ConfigReloadReport {
    /// [`Config::hash`] before the reload.
    pub old_hash: String,
    /// [`Config::hash`] now in force (equal to `old_hash` when nothing changed).
    pub new_hash: String,
    /// Every key that changed, with old and new values (secrets redacted).
    pub changes: Vec<ConfigChange>,
    /// Whether the weight step limit was waived (`force=true`).
    pub forced: bool,
    /// The model reload that went with it (the models are always re-read,
    /// so a new model in the same directory is picked up).
    pub model: ReloadReport,
    /// The config canary this reload ended (it was planned against the
    /// configuration replaced), with its last counts.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub canary_ended: Option<crate::canary::CanaryStatus>,
}

impl Engine {
    /// The configuration the last applied change replaced (a reload whose
    /// hash differed), for a config rollback; `None` before any.
    pub fn previous_config(&self) -> Option<Arc<Config>> {
        self.reload_lock
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Replaces the configuration with `new` and reloads the models from
    /// `new.model`, all or nothing: the config is planned first
    /// ([`crate::config_reload::plan`]), then the models are loaded, and only
    /// when both succeed is the new config swapped in (atomically with its
    /// hash, so decision rows name the config that scored them). Every change
    /// is logged at info level with its old and new value and both hashes.
    ///
    /// A refused model refuses the reload only while a model is in use: a
    /// service already scoring on rules alone (no model, or a refused one)
    /// still takes config changes, and the report's `model` says why the
    /// model stays out.
    ///
    /// Blocking (loads model files): call from a thread of its own
    /// (the service's `reload_on_own_thread`), not the blocking pool the
    /// score path uses. Concurrent reloads are serialised.
    ///
    /// # Errors
    /// [`ReloadError`] when the config is invalid, changes a start-up key,
    /// moves a weight by more than the step without `force`, or a configured
    /// model is refused while a model is in use. Nothing changes then.
    pub fn reload_config(
        &self,
        new: Config,
        force: bool,
    ) -> Result<ConfigReloadReport, ReloadError> {
        let mut previous = self
            .reload_lock
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let old = self.active.load_full();
        let changes = plan(&old.config, &new, force)?;
        let had_model = self.models.current().primary.model().is_some();
        let model = self.models.reload(&new.model);
        if !model.applied && had_model {
            return Err(ReloadError::Model(model.error.unwrap_or_default()));
        }
        let next = ActiveConfig::new(new);
        let sel = next.config.selection.selector_config();
        if sel != old.config.selection.selector_config() {
            // `plan` validated the config, which includes building a selector.
            if let Ok(s) = Selector::new(sel) {
                self.selector.store(Arc::new(s));
            }
        }
        for c in &changes {
            tracing::info!(
                key = %c.key,
                old = %c.old,
                new = %c.new,
                old_hash = %old.hash,
                new_hash = %next.hash,
                forced = force,
                "config changed"
            );
        }
        let mut report = ConfigReloadReport {
            old_hash: old.hash.to_string(),
            new_hash: next.hash.to_string(),
            changes,
            forced: force,
            model,
            canary_ended: None,
        };
        self.active.store(Arc::new(next));
        if report.new_hash != report.old_hash {
            *previous = Some(old.config.clone());
        }
        if report.new_hash != report.old_hash || self.models.current().ab.is_some() {
            // Planned against the config replaced, or now beside a model A/B.
            report.canary_ended = self.end_canary("ended by a configuration change");
        }
        tracing::info!(
            old_hash = %report.old_hash,
            new_hash = %report.new_hash,
            changed = report.changes.len(),
            model_generation = report.model.generation,
            "configuration reloaded"
        );
        Ok(report)
    }
}
