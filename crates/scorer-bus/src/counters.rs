//! What the bus refused, published, dropped and applied, for `/metrics`.

use std::sync::atomic::{AtomicU64, Ordering};

/// Why a message from the bus was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// Larger than `bus.max_message_bytes`.
    Oversized,
    /// Not the JSON its subject calls for.
    Malformed,
    /// The subject's worker or router is not the payload's, or the subject
    /// is not one the bus writes.
    Subject,
    /// Well-formed, but the engine refused it (an invalid report, an
    /// unknown worker, too many routers).
    Invalid,
    /// A record batch in another log schema version than this writer's.
    Schema,
}

impl Refusal {
    /// Every reason.
    pub const ALL: [Self; 5] = [
        Self::Oversized,
        Self::Malformed,
        Self::Subject,
        Self::Invalid,
        Self::Schema,
    ];

    /// Its label in `/metrics`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Oversized => "oversized",
            Self::Malformed => "malformed",
            Self::Subject => "subject",
            Self::Invalid => "invalid",
            Self::Schema => "schema",
        }
    }
}

/// The kinds of message, as labelled in `/metrics`. For `decisions` and
/// `outcomes`, published, dropped and applied (written by a log writer)
/// count records; refused counts messages (record batches).
pub const KINDS: [&str; 6] = [
    "telemetry",
    "load",
    "replica_load",
    "overrides",
    "decisions",
    "outcomes",
];

/// Counters of one bus connection.
#[derive(Debug, Default)]
pub struct BusCounters {
    refused: [[AtomicU64; Refusal::ALL.len()]; KINDS.len()],
    applied: [AtomicU64; KINDS.len()],
    published: [AtomicU64; KINDS.len()],
    dropped: [AtomicU64; KINDS.len()],
}

fn kind_index(kind: &str) -> usize {
    KINDS.iter().position(|k| *k == kind).unwrap_or(0)
}

impl BusCounters {
    /// Count a refused message of `kind`.
    pub fn refused(&self, kind: &str, why: Refusal) {
        let r = Refusal::ALL.iter().position(|x| *x == why).unwrap_or(0);
        self.refused[kind_index(kind)][r].fetch_add(1, Ordering::Relaxed);
    }

    /// Count an applied message of `kind`.
    pub fn applied(&self, kind: &str) {
        self.applied_n(kind, 1);
    }

    /// Count `n` applied messages (or records) of `kind`.
    pub fn applied_n(&self, kind: &str, n: u64) {
        self.applied[kind_index(kind)].fetch_add(n, Ordering::Relaxed);
    }

    /// Count a published message of `kind`.
    pub fn published(&self, kind: &str) {
        self.published_n(kind, 1);
    }

    /// Count `n` published messages (or records) of `kind`.
    pub fn published_n(&self, kind: &str, n: u64) {
        self.published[kind_index(kind)].fetch_add(n, Ordering::Relaxed);
    }

    /// Count a message of `kind` dropped before it was published (the
    /// outbox was full, or the connection refused it).
    pub fn dropped(&self, kind: &str) {
        self.dropped_n(kind, 1);
    }

    /// Count `n` messages (or records) of `kind` dropped before they were
    /// published.
    pub fn dropped_n(&self, kind: &str, n: u64) {
        self.dropped[kind_index(kind)].fetch_add(n, Ordering::Relaxed);
    }

    /// Refused messages of `kind` for `why`.
    pub fn refused_count(&self, kind: &str, why: Refusal) -> u64 {
        let r = Refusal::ALL.iter().position(|x| *x == why).unwrap_or(0);
        self.refused[kind_index(kind)][r].load(Ordering::Relaxed)
    }

    /// Applied messages of `kind`.
    pub fn applied_count(&self, kind: &str) -> u64 {
        self.applied[kind_index(kind)].load(Ordering::Relaxed)
    }

    /// Published messages of `kind`.
    pub fn published_count(&self, kind: &str) -> u64 {
        self.published[kind_index(kind)].load(Ordering::Relaxed)
    }

    /// Dropped messages of `kind`.
    pub fn dropped_count(&self, kind: &str) -> u64 {
        self.dropped[kind_index(kind)].load(Ordering::Relaxed)
    }
}
