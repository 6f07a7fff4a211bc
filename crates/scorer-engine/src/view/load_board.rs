//! The routers' load: each router's latest report of its outstanding picks
//! (`POST /v1/router/load`), summed for the view stream so that every
//! router sees what the others have sent (`GET /v1/view`'s `load`).
//!
//! Reports are absolute, not increments: a lost report costs nothing once
//! the next arrives, and after a restart of the service the next round of
//! reports rebuilds the whole board. A router silent for
//! [`ROUTER_LOAD_TTL_MS`] no longer counts, and at most [`MAX_ROUTERS`]
//! routers are held, at most `limits.routers_per_credential` of them
//! under one credential. A report names at most as many workers as
//! the pool holds, and only workers the service knows are kept, so one
//! router cannot grow the board past the pool nor make up workers.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use super::{
    MAX_ROUTED_PER_REPORT, MAX_VIEW_AGE_MS, ROUTER_LOAD_TTL_MS, RouterLoad, WorkerLoad,
    is_valid_router_id,
};
use scorer_core::telemetry::validate::is_valid_worker_id;

use super::routed_log::RoutedLog;

/// Most routers whose load is held at once.
pub const MAX_ROUTERS: usize = 1_024;
/// Largest outstanding count a report may give one worker.
pub const MAX_OUTSTANDING: u32 = 1_000_000;

/// Why a load report was refused (422, or 429 for too many routers).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LoadError {
    /// The router id is not 1..=32 bytes of ASCII letters, digits, `-`,
    /// `_` and `.`.
    #[error("`router_id` must be 1..=32 bytes of ASCII letters, digits, `-`, `_` and `.`")]
    RouterId,
    /// An entry names an invalid worker id, or one named before.
    #[error("`outstanding[{0}].worker_id` is not a valid worker id or repeats")]
    Worker(usize),
    /// An entry's count is beyond [`MAX_OUTSTANDING`].
    #[error("`outstanding[{0}].outstanding` must be at most {MAX_OUTSTANDING}")]
    Outstanding(usize),
    /// More routed keys than [`MAX_ROUTED_PER_REPORT`].
    #[error("`routed` holds {0} entries, at most {MAX_ROUTED_PER_REPORT}")]
    TooManyRouted(usize),
    /// A routed key's hash, worker or age is invalid.
    #[error(
        "`routed[{0}]`: `key_hash` must be 16 lowercase hex digits, `worker_id` a valid worker id and `age_ms` at most {MAX_VIEW_AGE_MS}"
    )]
    Routed(usize),
    /// More entries than the service holds workers.
    #[error("`outstanding` holds {count} entries, but the pool holds {max} workers")]
    TooMany {
        /// Entries.
        count: usize,
        /// The workers the service knows now.
        max: usize,
    },
    /// A new router beyond [`MAX_ROUTERS`] live ones.
    #[error("{MAX_ROUTERS} routers already report their load")]
    TooManyRouters,
    /// The router id is held by another credential's live reports.
    #[error("router `{0}` reports under another credential")]
    Owned(String),
    /// A new router beyond the credential's live ones.
    #[error(
        "the credential `{credential}` already reports for {max} routers (limits.routers_per_credential)"
    )]
    TooManyForCredential {
        /// The credential's name.
        credential: String,
        /// Its limit.
        max: usize,
    },
}

/// What a report is checked against.
pub struct ReportLimits<'a> {
    /// Whether the service knows the worker.
    pub known: &'a dyn Fn(&str) -> bool,
    /// The workers the service knows: the most entries a report may have.
    pub pool: usize,
    /// The router credential the report came with; `None` when the role
    /// is open or the caller an admin, who may report for any router.
    pub credential: Option<&'a str>,
    /// Most live routers under one credential.
    pub routers_per_credential: usize,
}

#[derive(Debug)]
struct Entry {
    load: Vec<WorkerLoad>,
    received_ms: u64,
    credential: Option<Box<str>>,
}

/// The other routers' load, as a view carries it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OthersLoad {
    /// Outstanding picks summed per worker, sorted by worker id (workers
    /// with none left out).
    pub load: Vec<WorkerLoad>,
    /// The mean time since each counted report arrived, ms (0 without any).
    pub age_ms: u64,
    /// The reports counted.
    pub routers: u32,
}

/// Every router's latest load report.
#[derive(Debug, Default)]
pub struct LoadBoard {
    routers: Mutex<HashMap<String, Entry>>,
    version: AtomicU64,
    routed: RoutedLog,
}

impl LoadBoard {
    /// Replace `report.router_id`'s load with `report` at monotonic
    /// `now_ms`, keeping only the workers `limits` knows. Returns the
    /// routers now counted and the entries dropped for naming an unknown
    /// worker.
    ///
    /// # Errors
    /// [`LoadError`]; nothing changes.
    pub fn report(
        &self,
        mut report: RouterLoad,
        limits: &ReportLimits<'_>,
        now_ms: u64,
    ) -> Result<(usize, usize), LoadError> {
        if !is_valid_router_id(&report.router_id) {
            return Err(LoadError::RouterId);
        }
        let count = report.outstanding.len();
        if count > limits.pool {
            return Err(LoadError::TooMany {
                count,
                max: limits.pool,
            });
        }
        let mut seen = HashSet::with_capacity(count);
        for (i, l) in report.outstanding.iter().enumerate() {
            if !is_valid_worker_id(&l.worker_id) || !seen.insert(l.worker_id.as_str()) {
                return Err(LoadError::Worker(i));
            }
            if l.outstanding > MAX_OUTSTANDING {
                return Err(LoadError::Outstanding(i));
            }
        }
        if report.routed.len() > MAX_ROUTED_PER_REPORT {
            return Err(LoadError::TooManyRouted(report.routed.len()));
        }
        let mut routed = Vec::with_capacity(report.routed.len());
        for (i, r) in report.routed.iter().enumerate() {
            let (Some(hash), true, true) = (
                r.hash(),
                is_valid_worker_id(&r.worker_id),
                r.age_ms <= MAX_VIEW_AGE_MS,
            ) else {
                return Err(LoadError::Routed(i));
            };
            if (limits.known)(&r.worker_id) {
                routed.push((hash, r.worker_id.as_str(), r.age_ms));
            }
        }
        report.outstanding.retain(|l| (limits.known)(&l.worker_id));
        let unknown = count - report.outstanding.len();
        let mut routers = self.routers.lock().unwrap_or_else(|e| e.into_inner());
        routers.retain(|_, e| live(e, now_ms));
        if let Some(held) = routers.get(&report.router_id) {
            if limits.credential.is_some() && held.credential.as_deref() != limits.credential {
                return Err(LoadError::Owned(report.router_id));
            }
        } else {
            if routers.len() >= MAX_ROUTERS {
                return Err(LoadError::TooManyRouters);
            }
            if let Some(credential) = limits.credential {
                let held = routers
                    .values()
                    .filter(|e| e.credential.as_deref() == Some(credential))
                    .count();
                if held >= limits.routers_per_credential {
                    return Err(LoadError::TooManyForCredential {
                        credential: credential.to_owned(),
                        max: limits.routers_per_credential,
                    });
                }
            }
        }
        self.routed.push(&report.router_id, &routed, now_ms);
        let entry = Entry {
            load: report.outstanding,
            received_ms: now_ms,
            credential: limits.credential.map(Box::from),
        };
        routers.insert(report.router_id, entry);
        self.version.fetch_add(1, Ordering::Release);
        Ok((routers.len(), unknown))
    }

    /// The load of every live router but `except` at monotonic `now_ms`.
    pub fn others(&self, except: Option<&str>, now_ms: u64) -> OthersLoad {
        let routers = self.routers.lock().unwrap_or_else(|e| e.into_inner());
        let mut sum: BTreeMap<&str, u32> = BTreeMap::new();
        let counted = routers
            .iter()
            .filter(|(id, e)| Some(id.as_str()) != except && live(e, now_ms));
        let (mut reports, mut age_sum) = (0u64, 0u64);
        for (_, e) in counted {
            reports += 1;
            age_sum = age_sum.saturating_add(now_ms.saturating_sub(e.received_ms));
            for l in &e.load {
                let n = sum.entry(&l.worker_id).or_default();
                *n = n.saturating_add(l.outstanding);
            }
        }
        let load = sum
            .into_iter()
            .filter(|(_, n)| *n > 0)
            .map(|(w, outstanding)| WorkerLoad {
                worker_id: w.to_owned(),
                outstanding,
            })
            .collect();
        OthersLoad {
            load,
            age_ms: age_sum.checked_div(reports).unwrap_or(0),
            routers: u32::try_from(reports).unwrap_or(u32::MAX),
        }
    }

    /// The keys the routers reported routing.
    pub fn routed(&self) -> &RoutedLog {
        &self.routed
    }

    /// Changes with every accepted report.
    pub fn version(&self) -> u64 {
        self.version.load(Ordering::Acquire)
    }
}

fn live(e: &Entry, now_ms: u64) -> bool {
    now_ms.saturating_sub(e.received_ms) <= ROUTER_LOAD_TTL_MS
}

#[cfg(test)]
mod tests {
    use crate::config::limits::DEFAULT_ROUTERS_PER_CREDENTIAL;

    use super::*;
    use crate::view::routed_log::Cursor;

    fn any(_: &str) -> bool {
        true
    }

    fn open(pool: usize) -> ReportLimits<'static> {
        ReportLimits {
            known: &any,
            pool,
            credential: None,
            routers_per_credential: DEFAULT_ROUTERS_PER_CREDENTIAL,
        }
    }

    fn load(router: &str, w: &[(&str, u32)]) -> RouterLoad {
        RouterLoad {
            routed: Vec::new(),
            router_id: router.into(),
            outstanding: w
                .iter()
                .map(|(w, n)| WorkerLoad {
                    worker_id: (*w).into(),
                    outstanding: *n,
                })
                .collect(),
        }
    }

    #[test]
    fn routed_keys_reach_the_other_routers_and_a_bad_one_refuses_the_report_whole() {
        use crate::view::RoutedKey;
        let b = LoadBoard::default();
        let mut r2_stream = b.routed().end();
        let mut report = load("r1", &[("a", 1)]);
        report.routed = vec![RoutedKey::new(7, "a", 3), RoutedKey::new(8, "ghost", 0)];
        let only_a = |w: &str| w == "a";
        let limits = ReportLimits {
            known: &only_a,
            ..open(10)
        };
        assert_eq!(b.report(report.clone(), &limits, 100), Ok((1, 0)));
        // The unknown worker's key is dropped; r1 is not told its own.
        assert_eq!(
            b.routed().since(Some("r2"), &mut r2_stream, 110),
            [RoutedKey::new(7, "a", 13)]
        );
        let mut own = b.routed().end();
        report.routed = vec![RoutedKey::new(9, "a", 0)];
        b.report(report.clone(), &limits, 120).unwrap();
        let mut r1_view = Cursor::default();
        assert!(b.routed().since(Some("r1"), &mut r1_view, 120).is_empty());
        assert_eq!(b.routed().since(None, &mut own, 120).len(), 1);
        // A malformed entry: refused, the board unchanged.
        let version = b.version();
        report.routed = vec![
            RoutedKey::new(10, "a", 0),
            RoutedKey {
                key_hash: "xyz".into(),
                worker_id: "a".into(),
                age_ms: 0,
            },
        ];
        assert_eq!(
            b.report(report.clone(), &limits, 130),
            Err(LoadError::Routed(1))
        );
        report.routed = vec![RoutedKey::new(10, "a", 0); MAX_ROUTED_PER_REPORT + 1];
        assert_eq!(
            b.report(report, &limits, 130),
            Err(LoadError::TooManyRouted(MAX_ROUTED_PER_REPORT + 1))
        );
        assert_eq!(b.version(), version);
        assert!(b.routed().since(None, &mut own, 130).is_empty());
    }

    #[test]
    fn each_router_sees_the_sum_of_the_others_until_they_fall_silent() {
        let b = LoadBoard::default();
        assert_eq!(
            b.report(load("r1", &[("a", 2), ("b", 1)]), &open(10), 0),
            Ok((1, 0))
        );
        assert_eq!(
            b.report(load("r2", &[("a", 3)]), &open(10), 500),
            Ok((2, 0))
        );
        let pairs = |o: OthersLoad| -> Vec<(String, u32)> {
            o.load
                .into_iter()
                .map(|l| (l.worker_id, l.outstanding))
                .collect()
        };
        assert_eq!(pairs(b.others(Some("r1"), 500)), [("a".to_owned(), 3)]);
        assert_eq!(
            pairs(b.others(None, 500)),
            [("a".to_owned(), 5), ("b".to_owned(), 1)]
        );
        // Its age: the mean time since each counted report arrived.
        let (one, both) = (b.others(Some("r1"), 700), b.others(None, 700));
        assert_eq!((one.age_ms, one.routers), (200, 1));
        assert_eq!((both.age_ms, both.routers), ((700 + 200) / 2, 2));
        // A report replaces, it does not add.
        b.report(load("r2", &[]), &open(10), 600).unwrap();
        assert!(b.others(Some("r1"), 600).load.is_empty());
        // r1 silent past the TTL no longer counts.
        let silent = b.others(Some("r2"), ROUTER_LOAD_TTL_MS + 1);
        assert!(silent.load.is_empty());
        assert_eq!(silent.routers, 0);
    }

    #[test]
    fn a_bad_report_is_refused_and_changes_nothing() {
        let b = LoadBoard::default();
        let v = b.version();
        assert_eq!(
            b.report(load("r 1", &[]), &open(10), 0),
            Err(LoadError::RouterId)
        );
        assert_eq!(
            b.report(load("r1", &[("a", 1), ("a", 2)]), &open(10), 0),
            Err(LoadError::Worker(1))
        );
        assert_eq!(
            b.report(load("r1", &[("a", 1), ("b", 1)]), &open(1), 0),
            Err(LoadError::TooMany { count: 2, max: 1 })
        );
        assert_eq!(
            b.report(load("r1", &[("a", 1), ("b", u32::MAX)]), &open(10), 0),
            Err(LoadError::Outstanding(1))
        );
        assert_eq!(b.version(), v);
        assert_eq!(b.others(None, 0).routers, 0);
        assert!(b.others(None, 0).load.is_empty());
    }

    #[test]
    fn only_known_workers_are_kept_and_one_credential_holds_only_its_routers() {
        let b = LoadBoard::default();
        let known = |id: &str| id.starts_with('w');
        let as_cred = |credential: &'static str| ReportLimits {
            known: &known,
            pool: 4,
            credential: Some(credential),
            routers_per_credential: 2,
        };
        // A made-up worker is left out, and counted.
        let edge = as_cred("edge");
        assert_eq!(
            b.report(load("edge-1", &[("w1", 2), ("made-up", 9)]), &edge, 0),
            Ok((1, 1))
        );
        assert_eq!(b.others(None, 0).load.len(), 1);
        // The credential's third router is refused; another's is not.
        b.report(load("edge-2", &[]), &edge, 0).unwrap();
        assert_eq!(
            b.report(load("edge-3", &[]), &edge, 0),
            Err(LoadError::TooManyForCredential {
                credential: "edge".into(),
                max: 2
            })
        );
        assert_eq!(
            b.report(load("core-1", &[]), &as_cred("core"), 0),
            Ok((3, 0))
        );
        // Nor may another credential replace a router's live load.
        assert_eq!(
            b.report(load("edge-1", &[]), &as_cred("core"), 1),
            Err(LoadError::Owned("edge-1".into()))
        );
        assert_eq!(b.others(None, 1).load[0].outstanding, 2);
        // Once silent past the TTL, the id is free again.
        let later = ROUTER_LOAD_TTL_MS + 10;
        assert_eq!(
            b.report(load("edge-1", &[]), &as_cred("core"), later),
            Ok((1, 0))
        );
    }
}
