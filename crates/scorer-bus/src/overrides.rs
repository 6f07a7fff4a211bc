//! The operators' overrides in force, in the state bucket: whichever
//! replica took the admin call writes the whole table, and every replica
//! and router watching the key applies it.

use async_nats::jetstream::kv::{Operation, Watch};
use futures_util::StreamExt;
use scorer_engine::overrides::WorkerOverride;
use serde::{Deserialize, Serialize};

use crate::subject::{OVERRIDES_KEY, STATE_BUCKET};
use crate::{Bus, BusError, Received};

const KIND: &str = "overrides";

/// The value under [`OVERRIDES_KEY`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SharedOverrides {
    /// The instance that wrote it (`<replica>/<instance>`).
    pub origin: String,
    /// Its wall clock when it wrote it, Unix ms: a reader adds the time
    /// since to every override's `age_ms` and takes it from `remaining_ms`.
    pub written_unix_ms: u64,
    /// The configuration hash that replica decides with.
    pub config_hash: String,
    /// Every override in force, as `GET /v1/admin/overrides` lists them.
    pub overrides: Vec<WorkerOverride>,
}

impl Bus {
    /// Writes the overrides in force.
    ///
    /// # Errors
    /// The bucket refused the write (the connection is down).
    pub async fn put_overrides(&self, table: &SharedOverrides) -> Result<(), BusError> {
        let put = async {
            let body = serde_json::to_vec(table).map_err(|e| e.to_string())?;
            let kv = self
                .js
                .get_key_value(STATE_BUCKET)
                .await
                .map_err(|e| e.to_string())?;
            kv.put(OVERRIDES_KEY, body.into())
                .await
                .map_err(|e| e.to_string())
        };
        match put.await {
            Ok(_) => {
                self.counters.published(KIND);
                Ok(())
            }
            Err(reason) => {
                self.counters.dropped(KIND);
                Err(BusError::Setup {
                    what: "the overrides",
                    reason,
                })
            }
        }
    }

    /// The overrides in force now, then each table written after.
    ///
    /// # Errors
    /// [`BusError::Setup`] when the bucket cannot be watched.
    pub async fn overrides_feed(&self) -> Result<OverridesFeed, BusError> {
        let setup = |e: &dyn std::fmt::Display| BusError::Setup {
            what: "the overrides watch",
            reason: e.to_string(),
        };
        let kv = self
            .js
            .get_key_value(STATE_BUCKET)
            .await
            .map_err(|e| setup(&e))?;
        let watch = kv
            .watch_with_history(OVERRIDES_KEY)
            .await
            .map_err(|e| setup(&e))?;
        Ok(OverridesFeed {
            bus: self.clone(),
            watch,
        })
    }
}

/// The overrides the peers write, checked.
pub struct OverridesFeed {
    bus: Bus,
    watch: Watch,
}

impl OverridesFeed {
    /// The next table a peer wrote, skipping this replica's own and the
    /// refused ones (counted); `None` when the watch ended.
    pub async fn next(&mut self) -> Option<Received<SharedOverrides>> {
        loop {
            let entry = match self.watch.next().await? {
                Ok(e) => e,
                Err(e) => {
                    tracing::debug!(error = %e, "overrides watch interrupted");
                    continue;
                }
            };
            if entry.operation != Operation::Put || !self.bus.fits(KIND, entry.value.len()) {
                continue;
            }
            let Some(table) = self.bus.parse::<SharedOverrides>(KIND, &entry.value) else {
                continue;
            };
            if table.origin == *self.bus.origin {
                continue;
            }
            return Some(Received {
                origin: table.origin.as_str().into(),
                value: table,
            });
        }
    }
}
