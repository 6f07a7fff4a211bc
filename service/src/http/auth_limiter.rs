//! The failed-token limit: per peer address, a token bucket of failed
//! attempts (an unknown bearer token) — `auth.failure_burst` of them, one
//! regained every `auth.failure_refill_ms` — so that a token cannot be
//! guessed at the speed of a connection.
//!
//! While a peer's bucket is empty it is locked out: [`AuthLimiter::admit`]
//! refuses its requests, even one with a right token, unless the request's
//! credential already succeeded from that peer before (the names of those
//! are remembered per peer), so a valid client behind the same address
//! keeps working and a guess during the lockout learns nothing.
//!
//! The table holds at most [`MAX_PEERS`] peers; a new one evicts the peer
//! seen longest ago. IPv6 peers are keyed by their /64, which one host
//! usually holds whole.

use std::collections::{BTreeMap, HashMap};
use std::net::{IpAddr, Ipv6Addr};
use std::sync::Mutex;

/// Most peers the table holds.
pub const MAX_PEERS: usize = 4096;

/// Most credential names remembered per peer; a new one forgets the oldest.
pub const MAX_NAMES_PER_PEER: usize = 8;

/// The limit in force: `auth.failure_burst` and `auth.failure_refill_ms`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Failed attempts in a row before a lockout, at least 1.
    pub burst: u32,
    /// ms to regain one attempt, at least 1.
    pub refill_ms: u64,
}

/// What a request's credential turned out to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Attempt<'a> {
    /// A known credential of this name, valid for the route.
    Succeeded(&'a str),
    /// An unknown bearer token: one failed attempt.
    Failed,
    /// Any other refusal (no credential, another role's): not a guess.
    Refused,
}

/// Failed attempts per peer (see the module documentation).
#[derive(Debug, Default)]
pub struct AuthLimiter {
    table: Mutex<Table>,
}

#[derive(Debug, Default)]
struct Table {
    peers: HashMap<IpAddr, Peer>,
    /// Each peer by the sequence number of its last use, oldest first.
    by_age: BTreeMap<u64, IpAddr>,
    next_seq: u64,
}

#[derive(Debug)]
struct Peer {
    /// GCRA's theoretical arrival time, monotonic ms: each failure moves it
    /// `refill_ms` past max(itself, now); the bucket is empty while it is
    /// more than `(burst - 1) × refill_ms` ahead of now.
    tat_ms: u64,
    /// Its key in `Table::by_age`.
    seq: u64,
    /// Credentials that succeeded from this peer, oldest first.
    names: Vec<Box<str>>,
}

impl Peer {
    /// ms until the peer regains an attempt, when it has none at `now_ms`.
    fn locked_for_ms(&self, now_ms: u64, limits: Limits) -> Option<u64> {
        let allowance = u64::from(limits.burst.saturating_sub(1)).saturating_mul(limits.refill_ms);
        let ahead = self.tat_ms.saturating_sub(now_ms);
        (ahead > allowance).then(|| ahead - allowance)
    }

    fn remembers(&self, name: &str) -> bool {
        self.names.iter().any(|n| &**n == name)
    }
}

/// The key of `ip`'s bucket: itself, IPv4-mapped IPv6 as IPv4, other IPv6
/// reduced to its /64.
fn peer_key(ip: IpAddr) -> IpAddr {
    match ip.to_canonical() {
        IpAddr::V6(v6) => {
            let [a, b, c, d, ..] = v6.segments();
            IpAddr::V6(Ipv6Addr::new(a, b, c, d, 0, 0, 0, 0))
        }
        v4 => v4,
    }
}

impl Table {
    /// `key`'s entry, made (evicting the oldest when full) if absent, and
    /// marked as used now.
    fn touch(&mut self, key: IpAddr) -> &mut Peer {
        let seq = self.next_seq;
        self.next_seq += 1;
        if let Some(old) = self.peers.get(&key).map(|p| p.seq) {
            self.by_age.remove(&old);
        } else if self.peers.len() >= MAX_PEERS
            && let Some((_, oldest)) = self.by_age.pop_first()
        {
            self.peers.remove(&oldest);
        }
        self.by_age.insert(seq, key);
        let peer = self.peers.entry(key).or_insert(Peer {
            tat_ms: 0,
            seq,
            names: Vec::new(),
        });
        peer.seq = seq;
        peer
    }
}

impl AuthLimiter {
    /// Whether a request from `ip` at `now_ms` whose credential came out as
    /// `attempt` may go on; `Err(retry after, s)` while `ip` is locked out.
    /// Counts a failed attempt and remembers a succeeded credential when not
    /// locked out.
    pub fn admit(
        &self,
        ip: IpAddr,
        now_ms: u64,
        limits: Limits,
        attempt: Attempt<'_>,
    ) -> Result<(), u64> {
        let key = peer_key(ip);
        let mut table = self.table.lock().unwrap_or_else(|e| e.into_inner());
        let locked = table.peers.get(&key).and_then(|p| {
            let remembered = matches!(attempt, Attempt::Succeeded(n) if p.remembers(n));
            p.locked_for_ms(now_ms, limits).map(|ms| (ms, remembered))
        });
        if let Some((ms, remembered)) = locked {
            table.touch(key);
            return if remembered {
                Ok(())
            } else {
                Err(ms.div_ceil(1000).max(1))
            };
        }
        match attempt {
            Attempt::Succeeded(name) => {
                if table.peers.get(&key).is_some_and(|p| p.remembers(name)) {
                    table.touch(key);
                } else {
                    let peer = table.touch(key);
                    if peer.names.len() >= MAX_NAMES_PER_PEER {
                        peer.names.remove(0);
                    }
                    peer.names.push(name.into());
                }
            }
            Attempt::Failed => {
                let peer = table.touch(key);
                peer.tat_ms = peer.tat_ms.max(now_ms).saturating_add(limits.refill_ms);
            }
            Attempt::Refused => {}
        }
        Ok(())
    }

    /// Peers in the table.
    pub fn peers(&self) -> usize {
        self.table
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .peers
            .len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: Limits = Limits {
        burst: 3,
        refill_ms: 1_000,
    };

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn a_burst_of_failures_locks_the_peer_out_until_one_attempt_refills() {
        let l = AuthLimiter::default();
        let a = ip("10.0.0.1");
        for _ in 0..3 {
            assert_eq!(l.admit(a, 5_000, LIMITS, Attempt::Failed), Ok(()));
        }
        assert_eq!(l.admit(a, 5_000, LIMITS, Attempt::Failed), Err(1));
        assert_eq!(l.admit(a, 5_000, LIMITS, Attempt::Refused), Err(1));
        // Another peer is not affected.
        assert_eq!(
            l.admit(ip("10.0.0.2"), 5_000, LIMITS, Attempt::Failed),
            Ok(())
        );
        // One attempt back after refill_ms, and spent again at once.
        assert_eq!(l.admit(a, 5_999, LIMITS, Attempt::Failed), Err(1));
        assert_eq!(l.admit(a, 6_000, LIMITS, Attempt::Failed), Ok(()));
        assert_eq!(l.admit(a, 6_000, LIMITS, Attempt::Failed), Err(1));
        // The whole burst back after burst × refill_ms.
        for _ in 0..3 {
            assert_eq!(l.admit(a, 10_000, LIMITS, Attempt::Failed), Ok(()));
        }
    }

    #[test]
    fn during_a_lockout_only_a_credential_that_succeeded_before_gets_through() {
        let l = AuthLimiter::default();
        let a = ip("10.0.0.1");
        assert_eq!(l.admit(a, 0, LIMITS, Attempt::Succeeded("edge-1")), Ok(()));
        for _ in 0..3 {
            l.admit(a, 0, LIMITS, Attempt::Failed).unwrap();
        }
        assert_eq!(l.admit(a, 0, LIMITS, Attempt::Succeeded("edge-1")), Ok(()));
        // A right guess of another credential during the lockout fails.
        assert_eq!(l.admit(a, 0, LIMITS, Attempt::Succeeded("ops")), Err(1));
        // And is not remembered: after the lockout it has to succeed first.
        l.admit(a, 3_000, LIMITS, Attempt::Succeeded("ops"))
            .unwrap();
        for _ in 0..3 {
            l.admit(a, 3_000, LIMITS, Attempt::Failed).unwrap();
        }
        assert_eq!(l.admit(a, 3_000, LIMITS, Attempt::Succeeded("ops")), Ok(()));
    }

    #[test]
    fn retry_after_is_the_time_to_the_next_attempt_in_whole_seconds() {
        let l = AuthLimiter::default();
        let slow = Limits {
            burst: 1,
            refill_ms: 2_500,
        };
        let a = ip("192.0.2.7");
        l.admit(a, 0, slow, Attempt::Failed).unwrap();
        assert_eq!(l.admit(a, 0, slow, Attempt::Failed), Err(3));
        assert_eq!(l.admit(a, 2_000, slow, Attempt::Failed), Err(1));
        assert_eq!(l.admit(a, 2_500, slow, Attempt::Failed), Ok(()));
    }

    #[test]
    fn ipv6_peers_share_their_64_and_mapped_ipv4_is_ipv4() {
        let l = AuthLimiter::default();
        let one = Limits {
            burst: 1,
            refill_ms: 1_000,
        };
        l.admit(ip("2001:db8:1:2::1"), 0, one, Attempt::Failed)
            .unwrap();
        assert!(
            l.admit(ip("2001:db8:1:2::ffff"), 0, one, Attempt::Failed)
                .is_err()
        );
        assert!(
            l.admit(ip("2001:db8:1:3::1"), 0, one, Attempt::Failed)
                .is_ok()
        );
        l.admit(ip("::ffff:10.0.0.9"), 0, one, Attempt::Failed)
            .unwrap();
        assert!(l.admit(ip("10.0.0.9"), 0, one, Attempt::Failed).is_err());
    }

    #[test]
    fn the_table_is_bounded_and_forgets_the_peer_seen_longest_ago() {
        let l = AuthLimiter::default();
        let one = Limits {
            burst: 1,
            refill_ms: 60_000,
        };
        let first = ip("10.255.255.255");
        l.admit(first, 0, one, Attempt::Failed).unwrap();
        for i in 0..MAX_PEERS as u32 - 1 {
            l.admit(IpAddr::from(i.to_be_bytes()), 0, one, Attempt::Failed)
                .unwrap();
        }
        assert_eq!(l.peers(), MAX_PEERS);
        // Used again, `first` is no longer the oldest; 0.0.0.0 is.
        assert!(l.admit(first, 0, one, Attempt::Failed).is_err());
        l.admit(ip("172.16.0.1"), 0, one, Attempt::Failed).unwrap();
        assert_eq!(l.peers(), MAX_PEERS);
        assert!(l.admit(first, 0, one, Attempt::Failed).is_err());
        assert!(l.admit(ip("0.0.0.0"), 0, one, Attempt::Failed).is_ok());
    }

    #[test]
    fn refusals_that_are_not_guesses_leave_no_entry() {
        let l = AuthLimiter::default();
        l.admit(ip("10.0.0.1"), 0, LIMITS, Attempt::Refused)
            .unwrap();
        assert_eq!(l.peers(), 0);
    }
}
