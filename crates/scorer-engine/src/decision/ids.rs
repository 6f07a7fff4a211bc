//! Where decision ids come from: the service's time-ordered UUIDs, a
//! router's `<router_id>-<16 hex digits>`, or a test's or simulator's
//! numbered sequence. An engine draws one per decision from the source it
//! was given ([`crate::Engine::with_ids`]); a call may name its own
//! ([`super::DecideCall::with_id`]).

use std::sync::atomic::{AtomicU64, Ordering};

/// Makes decision ids; each call returns a new one.
pub trait DecisionIds: Send + Sync + std::fmt::Debug {
    /// The next decision id.
    fn next_id(&self) -> String;
}

/// UUID v7 (time-ordered) decision ids: an engine's default, the service's.
#[derive(Debug, Default, Clone, Copy)]
pub struct UuidV7Ids;

impl DecisionIds for UuidV7Ids {
    fn next_id(&self) -> String {
        uuid::Uuid::now_v7().to_string()
    }
}

/// A router's ids: `<router_id>-<16 hex digits>`, counting up from a first
/// sequence number.
#[derive(Debug)]
pub struct RouterIds {
    router_id: String,
    next: AtomicU64,
}

impl RouterIds {
    /// Ids of router `router_id`, the first numbered `first_seq`.
    pub fn new(router_id: impl Into<String>, first_seq: u64) -> Self {
        Self {
            router_id: router_id.into(),
            next: AtomicU64::new(first_seq),
        }
    }
}

impl DecisionIds for RouterIds {
    fn next_id(&self) -> String {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        format!("{}-{n:016x}", self.router_id)
    }
}

/// Numbered ids, `<prefix><n>` with `n` counting up from a first number
/// (the simulator's `d1`, `d2`, …).
#[derive(Debug)]
pub struct SequenceIds {
    prefix: String,
    next: AtomicU64,
}

impl SequenceIds {
    /// Ids `<prefix><first>`, `<prefix><first + 1>`, ….
    pub fn new(prefix: impl Into<String>, first: u64) -> Self {
        Self {
            prefix: prefix.into(),
            next: AtomicU64::new(first),
        }
    }
}

impl DecisionIds for SequenceIds {
    fn next_id(&self) -> String {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        format!("{}{n}", self.prefix)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn router_ids_count_up_in_hex_after_the_router_id() {
        let ids = RouterIds::new("r1", 0xfe);
        assert_eq!(ids.next_id(), "r1-00000000000000fe");
        assert_eq!(ids.next_id(), "r1-00000000000000ff");
    }

    #[test]
    fn sequence_ids_count_up_after_their_prefix() {
        let ids = SequenceIds::new("d", 1);
        assert_eq!((ids.next_id(), ids.next_id()), ("d1".into(), "d2".into()));
    }

    #[test]
    fn uuid_ids_are_time_ordered_uuids() {
        let (a, b) = (UuidV7Ids.next_id(), UuidV7Ids.next_id());
        assert_eq!(
            uuid::Uuid::parse_str(&a).ok().map(|u| u.get_version_num()),
            Some(7)
        );
        assert_ne!(a, b);
    }
}
