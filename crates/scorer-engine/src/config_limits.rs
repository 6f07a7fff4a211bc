//! The `[limits]` section: how much of the service long-lived streams may
//! hold. A view stream (`GET /v1/view`) holds a connection for as long as
//! its router runs; these bounds keep a few credentials from taking every
//! connection, so that health checks and scoring always find one.

use serde::{Deserialize, Serialize};

/// Default [`LimitsConfig::view_streams_per_credential`].
pub const DEFAULT_VIEW_STREAMS_PER_CREDENTIAL: usize = 16;
/// Default [`LimitsConfig::view_streams_max`]: a quarter of the default
/// `server.max_connections`.
pub const DEFAULT_VIEW_STREAMS_MAX: usize = 1_024;
/// Default [`LimitsConfig::reserved_connections_share`].
pub const DEFAULT_RESERVED_CONNECTIONS_SHARE: f64 = 0.75;
/// Default [`LimitsConfig::routers_per_credential`].
pub const DEFAULT_ROUTERS_PER_CREDENTIAL: usize = 16;
/// Default [`LimitsConfig::router_records_per_s`].
pub const DEFAULT_ROUTER_RECORDS_PER_S: f64 = 50_000.0;
/// Default [`LimitsConfig::view_stream_budget_bytes`]: 8 MiB.
pub const DEFAULT_VIEW_STREAM_BUDGET_BYTES: u64 = 8 * 1024 * 1024;

/// `[limits]` section.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LimitsConfig {
    /// View streams one credential (a token or certificate name; the peer
    /// address when the router role is open) may hold open at once; one
    /// more gets 429 `too_many_streams`. Default 16.
    pub view_streams_per_credential: usize,
    /// View streams open at once, whoever holds them. Default 1024.
    pub view_streams_max: usize,
    /// Share of `server.max_connections` that long-lived streams may not
    /// take, kept for health checks, scoring and every other short request,
    /// in [0, 1). Default 0.75: streams together hold at most a quarter.
    pub reserved_connections_share: f64,
    /// Routers one credential may report load for at once (with
    /// `auth.router_ids = "prefixed"`, a fleet sharing it). Default 16.
    pub routers_per_credential: usize,
    /// Router records (decisions plus outcomes, `POST /v1/router/decisions`)
    /// one credential may send per second, with a burst of one second's
    /// worth or one full batch. Default 50000.
    pub router_records_per_s: f64,
    /// Bytes a view stream may have queued and not yet taken by its
    /// client's socket; past it the stream is cut off and the client told
    /// to reconnect. Default 8 MiB.
    pub view_stream_budget_bytes: u64,
}

impl Default for LimitsConfig {
    fn default() -> Self {
        Self {
            view_streams_per_credential: DEFAULT_VIEW_STREAMS_PER_CREDENTIAL,
            view_streams_max: DEFAULT_VIEW_STREAMS_MAX,
            reserved_connections_share: DEFAULT_RESERVED_CONNECTIONS_SHARE,
            routers_per_credential: DEFAULT_ROUTERS_PER_CREDENTIAL,
            router_records_per_s: DEFAULT_ROUTER_RECORDS_PER_S,
            view_stream_budget_bytes: DEFAULT_VIEW_STREAM_BUDGET_BYTES,
        }
    }
}

impl LimitsConfig {
    /// Check every value against its documented range.
    ///
    /// # Errors
    /// The first offending dotted key and what is wrong with it.
    pub fn validate(&self) -> Result<(), (&'static str, String)> {
        if self.view_streams_per_credential == 0 {
            return Err((
                "limits.view_streams_per_credential",
                "must be at least 1".to_owned(),
            ));
        }
        if self.view_streams_max == 0 {
            return Err(("limits.view_streams_max", "must be at least 1".to_owned()));
        }
        if self.routers_per_credential == 0 {
            return Err((
                "limits.routers_per_credential",
                "must be at least 1".to_owned(),
            ));
        }
        let rate = self.router_records_per_s;
        if !(rate.is_finite() && rate >= 1.0) {
            return Err((
                "limits.router_records_per_s",
                format!("must be a finite number of records per second >= 1, got {rate}"),
            ));
        }
        let share = self.reserved_connections_share;
        if !(0.0..1.0).contains(&share) {
            return Err((
                "limits.reserved_connections_share",
                format!("must be in [0, 1), got {share}"),
            ));
        }
        if self.view_stream_budget_bytes == 0 {
            return Err((
                "limits.view_stream_budget_bytes",
                "must be at least 1".to_owned(),
            ));
        }
        Ok(())
    }

    /// Connections long-lived streams may hold together out of
    /// `max_connections`: the part [`Self::reserved_connections_share`]
    /// leaves.
    pub fn long_lived_connections(&self, max_connections: usize) -> usize {
        // Exact for any realistic connection count (below 2^52).
        #[allow(
            clippy::cast_precision_loss,
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss
        )]
        let reserved = (max_connections as f64 * self.reserved_connections_share).ceil() as usize;
        max_connections.saturating_sub(reserved)
    }

    /// View streams that may be open at once with `max_connections`
    /// (`server.max_connections`): the smaller of [`Self::view_streams_max`]
    /// and the long-lived share.
    pub fn view_streams_cap(&self, max_connections: usize) -> usize {
        self.view_streams_max
            .min(self.long_lived_connections(max_connections))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_defaults_leave_a_quarter_of_the_default_connections_to_streams() {
        let l = LimitsConfig::default();
        assert_eq!(l.validate(), Ok(()));
        assert_eq!(l.long_lived_connections(4_096), 1_024);
        assert_eq!(l.view_streams_cap(4_096), 1_024);
        assert_eq!(l.view_streams_cap(100), 25);
        assert_eq!(l.view_streams_cap(2), 0);
    }

    #[test]
    fn out_of_range_values_are_refused_by_name() {
        let bad = |f: fn(&mut LimitsConfig)| {
            let mut l = LimitsConfig::default();
            f(&mut l);
            l.validate().unwrap_err().0
        };
        assert_eq!(
            bad(|l| l.view_streams_per_credential = 0),
            "limits.view_streams_per_credential"
        );
        assert_eq!(bad(|l| l.view_streams_max = 0), "limits.view_streams_max");
        assert_eq!(
            bad(|l| l.routers_per_credential = 0),
            "limits.routers_per_credential"
        );
        for rate in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            let l = LimitsConfig {
                router_records_per_s: rate,
                ..LimitsConfig::default()
            };
            assert_eq!(l.validate().unwrap_err().0, "limits.router_records_per_s");
        }
        for share in [-0.1, 1.0, f64::NAN] {
            let l = LimitsConfig {
                reserved_connections_share: share,
                ..LimitsConfig::default()
            };
            assert_eq!(
                l.validate().unwrap_err().0,
                "limits.reserved_connections_share"
            );
        }
        assert_eq!(
            bad(|l| l.view_stream_budget_bytes = 0),
            "limits.view_stream_budget_bytes"
        );
    }
}
