//! Keeping the router's model in step with the service's (feature `http`):
//! every view names the model version the service runs, so a promotion or
//! a rollback on the service reaches the router with its next view event.
//! [`sync_model`] compares that version with the one the router's
//! [`ModelHub`] serves and, when they differ, fetches the service's files
//! ([`crate::model::fetch_model`]) and reloads the hub from them, vetted
//! as the service vetted them. Call it after views are applied, e.g. on
//! every [`crate::follow::FollowEvent::Applied`] from a task of its own:
//! it returns at once when the versions agree.

use std::path::Path;

use scorer_model::{ModelConfig, ModelHub};

use crate::Balancer;
use crate::follow::FollowConfig;
use crate::model::{FetchError, FetchedModel, fetch_model};

/// What [`sync_model`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModelSync {
    /// The hub serves the version the last view named (or no view named
    /// one yet): nothing was fetched.
    InStep,
    /// The service's model was fetched and now serves.
    Loaded(FetchedModel),
    /// The fetched model was refused by the hub (why); it keeps serving
    /// what it served.
    Refused(String),
}

/// Brings `hub` to the model the last view applied to `balancer` named:
/// fetched from the service in `follow` into `dest`, then loaded with
/// `model_cfg` (the router's model settings: its budget, breaker and
/// blend) pointed at `dest`.
///
/// # Errors
/// [`FetchError`] when the files cannot be fetched; the hub is unchanged.
pub async fn sync_model(
    balancer: &Balancer,
    hub: &ModelHub,
    model_cfg: &ModelConfig,
    http: &reqwest::Client,
    follow: &FollowConfig,
    dest: &Path,
) -> Result<ModelSync, FetchError> {
    let Some(want) = balancer.view_model_version() else {
        return Ok(ModelSync::InStep);
    };
    let serving = hub.current();
    if serving
        .primary
        .model()
        .is_some_and(|m| *m.card.model_version == *want)
    {
        return Ok(ModelSync::InStep);
    }
    let fetched = fetch_model(http, follow, dest).await?;
    let mut cfg = model_cfg.clone();
    cfg.dir = fetched.dir.clone();
    cfg.enabled = true;
    let report = hub.reload(&cfg);
    Ok(match report.error {
        None if report.applied => ModelSync::Loaded(fetched),
        why => ModelSync::Refused(why.unwrap_or_else(|| "not applied".to_owned())),
    })
}
