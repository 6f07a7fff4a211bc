//! Starting, reading and ending a configuration canary (see
//! [`crate::canary`]). Serialised with hot reloads: a reload or rollback
//! while a canary runs ends it, since the candidate was planned against the
//! configuration the reload replaces.

use std::sync::{Arc, PoisonError};

use super::{ActiveConfig, Engine};
use crate::canary::{CANARY_KEYS, Canary, CanaryRequest, CanarySplit, CanaryStatus, check_text};
use crate::config::Config;
use crate::config_reload::{ReloadError, plan};
use scorer_core::selection::Selector;

/// Why a canary was refused or could not end. Nothing changed.
#[derive(Debug, thiserror::Error)]
pub enum CanaryError {
    /// The split or reason is malformed.
    #[error("{0}")]
    Invalid(String),
    /// The candidate fails the reload checks.
    #[error(transparent)]
    Reload(#[from] ReloadError),
    /// The candidate changes keys that are not read per decision.
    #[error(
        "a canary may change only the keys read per decision ({}); apply these with a reload: {}",
        CANARY_KEYS.join(" "),
        .0.join(", ")
    )]
    NotCanaryable(Vec<String>),
    /// The candidate equals the configuration in force.
    #[error(
        "the candidate configuration equals the one in force (hash {0}); change the config file first"
    )]
    NoChange(String),
    /// A canary is running.
    #[error("a canary of config {0} is running; promote or abort it first")]
    Running(String),
    /// A model A/B split is configured: one experiment at a time.
    #[error(
        "a model A/B split ([model.ab]) is running; a config canary beside it would share its keys' arms and confound both"
    )]
    ModelAb,
    /// No canary is running.
    #[error("no config canary is running")]
    NoCanary,
}

impl Engine {
    /// Starts a canary of `candidate` (with [`crate::config_reload::plan`]'s
    /// checks against the configuration in force, `force` waiving the
    /// weight step) on the slice `req` names, at monotonic `now_ms`.
    ///
    /// # Errors
    /// [`CanaryError`]: a malformed request, a candidate a reload would
    /// refuse, one that changes nothing or keys outside [`CANARY_KEYS`], a
    /// canary or a model A/B split already running. Nothing changes then.
    pub fn start_canary(
        &self,
        candidate: Config,
        req: &CanaryRequest,
        set_by: &str,
        force: bool,
        now_ms: u64,
    ) -> Result<CanaryStatus, CanaryError> {
        let split = CanarySplit::from_request(req).map_err(CanaryError::Invalid)?;
        let reason = req.reason.clone().unwrap_or_default();
        check_text("reason", &reason).map_err(CanaryError::Invalid)?;
        let _reload = self
            .reload_lock
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(c) = self.canary.load().as_deref() {
            return Err(CanaryError::Running(c.candidate.hash.to_string()));
        }
        if self.models.current().ab.is_some() {
            return Err(CanaryError::ModelAb);
        }
        let stable = self.active.load_full();
        let changes = plan(&stable.config, &candidate, force)?;
        if changes.is_empty() {
            return Err(CanaryError::NoChange(stable.hash.to_string()));
        }
        let outside: Vec<String> = changes
            .iter()
            .filter(|c| !CANARY_KEYS.iter().any(|p| c.key.starts_with(p)))
            .map(|c| c.key.clone())
            .collect();
        if !outside.is_empty() {
            return Err(CanaryError::NotCanaryable(outside));
        }
        // `plan` validated the candidate, which includes building a selector.
        let selector = Selector::new(candidate.selection.selector_config())
            .map_err(|e| CanaryError::Invalid(e.to_string()))?;
        let generation = self
            .canary_generation
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            + 1;
        let canary = Canary::new(
            generation,
            ActiveConfig::new(candidate),
            selector,
            split,
            stable.hash.clone(),
            changes,
            reason,
            set_by.to_owned(),
            now_ms,
        );
        let status = canary.status();
        for c in &status.changes {
            tracing::warn!(key = %c.key, stable = %c.old, candidate = %c.new, "config canary change");
        }
        tracing::warn!(
            candidate_hash = %status.candidate_hash,
            stable_hash = %status.stable_hash,
            fraction = status.fraction,
            key_prefix = status.key_prefix.as_deref(),
            reason = ?status.reason,
            set_by = ?status.set_by,
            "config canary started"
        );
        self.canary.store(Some(Arc::new(canary)));
        Ok(status)
    }

    /// The canary in force, with both arms' counts; `None` without one.
    pub fn canary(&self) -> Option<CanaryStatus> {
        self.canary.load().as_deref().map(Canary::status)
    }

    /// The candidate configuration of the canary in force, for a promotion
    /// through [`Engine::reload_config`] (which ends the canary).
    pub fn canary_candidate(&self) -> Option<Config> {
        self.canary
            .load()
            .as_deref()
            .map(|c| (*c.candidate.config).clone())
    }

    /// Ends the canary: every decision scores with the stable configuration
    /// again. Returns its last status.
    ///
    /// # Errors
    /// [`CanaryError::NoCanary`] when none runs.
    pub fn abort_canary(&self) -> Result<CanaryStatus, CanaryError> {
        let _reload = self
            .reload_lock
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let ended = self.end_canary("aborted");
        ended.ok_or(CanaryError::NoCanary)
    }

    /// Ends the canary, if one runs, logging `how`; the reload lock is held.
    pub(crate) fn end_canary(&self, how: &str) -> Option<CanaryStatus> {
        let c = self.canary.swap(None)?;
        let status = c.status();
        tracing::warn!(
            candidate_hash = %status.candidate_hash,
            stable_hash = %status.stable_hash,
            how,
            stable_outcomes = status.arms[0].outcomes,
            canary_outcomes = status.arms[1].outcomes,
            "config canary ended"
        );
        Some(status)
    }
}
