//! Request limits that the scoring core and the offline tools share.

/// Default most candidates in one score request (`server.max_candidates`).
pub const DEFAULT_MAX_CANDIDATES: usize = 1024;
