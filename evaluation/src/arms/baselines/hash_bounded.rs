//! Consistent hashing with bounded loads, as HAProxy runs it with
//! `balance hdr(…)` (or any key), `hash-type consistent` and
//! `hash-balance-factor 125`.
//!
//! Mirrokni, Thorup and Zadimoghaddam, "Consistent Hashing with Bounded
//! Loads" (SODA 2018, arXiv:1608.01350): a key goes to the first server
//! clockwise from its hash on the ring whose load stays within
//! `⌈c × average⌉`; a saturated server passes the key on to the next.
//!
//! Sources (haproxy/haproxy at `50872daa`):
//!
//! - The ring, `src/lb_chash.c`: each server appears `eweight` times, its
//!   user weight (default 1) × `BE_WEIGHT_SCALE` (16,
//!   `include/haproxy/backend-t.h`), so **16 points per server**. With the
//!   default `hash-key id` a server's base key is `puid × SRV_EWGHT_RANGE`
//!   (256 × 16; `puid` counts servers from 1 in declaration order) and its
//!   point `j` sits at `full_hash(base + j)` (`chash_compute_server_key`,
//!   `chash_compute_node_key`).
//! - The key's hash, `src/backend.c` `gen_hash`: `hash-type consistent`
//!   with no function named is **`sdbm` followed by the `avalanche`
//!   modifier** (`src/cfgparse-listen.c`: "the default hash function is
//!   sdbm for map-based and sdbm+avalanche for consistent";
//!   `doc/configuration.txt`, `hash-type`). `sdbm` is `src/hash.c`
//!   `hash_sdbm`; `avalanche` is `full_hash`
//!   (`include/haproxy/intops.h`, one of Bob Jenkins' integer hashes times
//!   3221225473). The other functions (`djb2`, `wt6`, `crc32`, `none`) are
//!   opt-in and not modelled.
//! - The lookup, `chash_get_server_hash`: the point **closest** to the hash
//!   (the one before it when it is no farther than the one after, distances
//!   on the 32-bit circle), then, while that server is not eligible, the
//!   next point **clockwise** (`eb32_next`, wrapping to the first; after a
//!   second wrap it stops and returns the server it is on).
//! - The bound, `chash_server_is_eligible`: with `served` the backend's
//!   total requests in flight, `tot_slots = ⌈(served + 1) × 125 / 100⌉`
//!   split over the servers by weight — each gets
//!   `eweight × ⌊tot_slots / tot_weight⌋` plus its share of the remainder,
//!   `⌊(cum + eweight) × rem / tot_weight⌋ − ⌊cum × rem / tot_weight⌋`
//!   with `cum` the weight of the servers before it — and at least 1; a
//!   server is eligible while its own in flight is below its slots
//!   (outstanding + 1 ≤ slots).
//! - A drain (`set server … state drain`) gives the server weight 0: its
//!   points leave the ring and the weights are recounted
//!   (`recount_servers` in `src/backend.c`); its requests still in flight
//!   stay in the backend's `served`. It comes back with its 16 points.
//!
//! In flight is the router's own count: `+1` at the pick, `−1` at the
//! outcome. Memory: the ring, 16 points per worker, and one count per
//! worker; no per-key state.

use rand_chacha::ChaCha8Rng;

use super::Endpoints;
use crate::router::{Outcome, Pick, PickRequest, Router};

/// HAProxy's `BE_WEIGHT_SCALE`: ring points per unit of server weight.
pub const POINTS_PER_SERVER: u32 = 16;

/// `hash-balance-factor`, percent of the average load.
pub const BALANCE_FACTOR: u64 = 125;

/// HAProxy's `SRV_EWGHT_RANGE` (`SRV_UWGHT_RANGE` 256 × `BE_WEIGHT_SCALE`).
const SRV_EWGHT_RANGE: u32 = 256 * POINTS_PER_SERVER;

/// HAProxy's `hash_sdbm` over the key's bytes.
pub fn sdbm(key: &[u8]) -> u32 {
    key.iter().fold(0u32, |h, &c| {
        u32::from(c)
            .wrapping_add(h << 6)
            .wrapping_add(h << 16)
            .wrapping_sub(h)
    })
}

/// HAProxy's `full_hash`, the `avalanche` modifier.
pub fn full_hash(a: u32) -> u32 {
    let mut a = a;
    a = a.wrapping_add(0x7ed5_5d16).wrapping_add(a << 12);
    a = (a ^ 0xc761_c23c) ^ (a >> 19);
    a = a.wrapping_add(0x1656_67b1).wrapping_add(a << 5);
    a = a.wrapping_add(0xd3a2_646c) ^ (a << 9);
    a = a.wrapping_add(0xfd70_46c5).wrapping_add(a << 3);
    a = (a ^ 0xb55a_4f09) ^ (a >> 16);
    a.wrapping_mul(3_221_225_473)
}

/// The key's position on the ring: `sdbm` then `avalanche`.
pub fn key_hash(key: &str) -> u32 {
    full_hash(sdbm(key.as_bytes()))
}

/// The slots of the live server at `position` among `live` live servers
/// (all of weight 1) when `served` requests are in flight in the backend:
/// `chash_server_is_eligible`'s arithmetic.
pub fn slots(position: usize, live: usize, served: u64) -> u64 {
    let eweight = u64::from(POINTS_PER_SERVER);
    let tot_weight = eweight * live.max(1) as u64;
    let cum = eweight * position as u64;
    let tot_slots = ((served + 1) * BALANCE_FACTOR).div_ceil(100);
    let per_weight = tot_slots / tot_weight;
    let rem = tot_slots % tot_weight;
    let share = (cum + eweight) * rem / tot_weight - cum * rem / tot_weight;
    (eweight * per_weight + share).max(1)
}

/// Bounded-load consistent hashing over `n` workers.
#[derive(Debug, Clone)]
pub struct HashBounded {
    in_flight: Vec<u32>,
    endpoints: Endpoints,
    /// Every worker's points, sorted by (point, worker).
    points: Vec<(u32, usize)>,
    /// The live workers' points, sorted.
    ring: Vec<(u32, usize)>,
}

impl HashBounded {
    /// Over `n ≥ 1` workers of weight 1, all idle; worker `i` is HAProxy's
    /// server with `puid` `i + 1`.
    pub fn new(n: usize) -> Self {
        let n = n.max(1);
        let mut points = Vec::with_capacity(n * POINTS_PER_SERVER as usize);
        for w in 0..n {
            let base = (w as u32 + 1).wrapping_mul(SRV_EWGHT_RANGE);
            for j in 0..POINTS_PER_SERVER {
                points.push((full_hash(base.wrapping_add(j)), w));
            }
        }
        Self::with_points(n, points)
    }

    fn with_points(n: usize, mut points: Vec<(u32, usize)>) -> Self {
        points.sort_unstable();
        let mut h = Self {
            in_flight: vec![0; n.max(1)],
            endpoints: Endpoints::new(n),
            points,
            ring: Vec::new(),
        };
        h.rebuild_ring();
        h
    }

    fn rebuild_ring(&mut self) {
        let endpoints = &self.endpoints;
        self.ring = self
            .points
            .iter()
            .copied()
            .filter(|&(_, w)| endpoints.is_live(w))
            .collect();
    }

    /// Requests in flight at worker `i`.
    pub fn in_flight(&self, i: usize) -> u32 {
        self.in_flight[i]
    }

    fn eligible(&self, w: usize, served: u64) -> bool {
        let live = self.endpoints.live();
        let Ok(position) = live.binary_search(&w) else {
            return false;
        };
        u64::from(self.in_flight[w]) < slots(position, live.len(), served)
    }

    /// The worker for a key whose hash is `hash`.
    fn lookup(&self, hash: u32) -> usize {
        let n = self.ring.len();
        if n == 0 {
            return self.endpoints.live().first().copied().unwrap_or(0);
        }
        let next = self.ring.partition_point(|&(p, _)| p < hash) % n;
        let prev = if next == 0 { n - 1 } else { next - 1 };
        let dp = hash.wrapping_sub(self.ring[prev].0);
        let dn = self.ring[next].0.wrapping_sub(hash);
        let mut i = if dp <= dn { prev } else { next };
        let served: u64 = self.in_flight.iter().map(|&c| u64::from(c)).sum();
        let mut wraps = 0;
        while !self.eligible(self.ring[i].1, served) {
            i += 1;
            if i == n {
                i = 0;
                wraps += 1;
                if wraps > 1 {
                    break;
                }
            }
        }
        self.ring[i].1
    }
}

impl Router for HashBounded {
    fn pick(&mut self, req: &PickRequest<'_>, _rng: &mut ChaCha8Rng) -> Pick {
        let worker = self.lookup(key_hash(req.key));
        self.in_flight[worker] += 1;
        Pick {
            worker,
            decision_id: None,
        }
    }

    fn outcome(&mut self, o: &Outcome<'_>) {
        if let Some(c) = self.in_flight.get_mut(o.worker) {
            *c = c.saturating_sub(1);
        }
    }

    fn drain(&mut self, worker: usize, drained: bool, _now_ms: f64) {
        self.endpoints.set_drained(worker, drained);
        self.rebuild_ring();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::router::Op;
    use rand::SeedableRng;

    /// Three workers with one point each, at 1000, 2000 and 3000.
    fn small_ring() -> HashBounded {
        HashBounded::with_points(3, vec![(1000, 0), (2000, 1), (3000, 2)])
    }

    fn get(key: &str) -> PickRequest<'_> {
        PickRequest {
            now_ms: 0.0,
            key,
            op: Op::Get,
            timeout_ms: 100.0,
            router: 0,
        }
    }

    #[test]
    fn hashes_are_haproxys() {
        // Values from HAProxy's own hash_sdbm and full_hash, compiled in C.
        assert_eq!(sdbm(b"user:1:profile"), 1_561_963_697);
        assert_eq!(key_hash("user:1:profile"), 4_110_837_379);
        assert_eq!(key_hash("tenant:3:user:42"), 1_450_517_630);
        assert_eq!(key_hash(""), 2_874_071_335);
        let h = HashBounded::new(2);
        assert_eq!(h.points.len(), 32);
        assert!(h.points.contains(&(1_237_450_891, 0)), "worker 0, point 0");
        assert!(h.points.contains(&(4_061_310_468, 1)), "worker 1, point 15");
    }

    #[test]
    fn slots_are_chash_server_is_eligible() {
        // 2 in flight over 3 servers: ⌈3 × 1.25⌉ = 4 slots, 1 + 1 + 2.
        assert_eq!(
            (0..3).map(|p| slots(p, 3, 2)).collect::<Vec<_>>(),
            [1, 1, 2]
        );
        // 5 in flight: ⌈6 × 1.25⌉ = 8 slots, 2 + 3 + 3.
        assert_eq!(
            (0..3).map(|p| slots(p, 3, 5)).collect::<Vec<_>>(),
            [2, 3, 3]
        );
        // Never 0, even with nothing in flight.
        assert_eq!(slots(0, 12, 0), 1);
        // Many in flight: 1000 over 12 → ⌈1001 × 1.25⌉ = 1252 slots.
        let total: u64 = (0..12).map(|p| slots(p, 12, 1000)).sum();
        assert_eq!(total, 1252);
    }

    #[test]
    fn the_closest_point_is_the_home_and_under_the_bound_it_keeps_the_key() {
        let mut h = small_ring();
        // 1100: 100 past worker 0's point, 900 before worker 1's.
        assert_eq!(h.lookup(1100), 0);
        // 1600: 400 before worker 1's point, closer than worker 0's.
        assert_eq!(h.lookup(1600), 1);
        // 1500: equidistant, the point before wins.
        assert_eq!(h.lookup(1500), 0);
        // 5 in flight, worker 0 has 1 of its 2 slots: kept.
        h.in_flight = vec![1, 2, 2];
        assert_eq!(h.lookup(1100), 0);
    }

    #[test]
    fn at_the_bound_the_home_is_skipped_to_the_next_on_the_ring() {
        let mut h = small_ring();
        // 1 in flight: 3 slots, 1 each; worker 0 holds its one.
        h.in_flight = vec![1, 0, 0];
        assert_eq!(h.lookup(1100), 1);
        // Clockwise, not to the nearest other point: home worker 2 (3000)
        // full, 2900 goes on round the ring to worker 0, not back to 2000.
        h.in_flight = vec![0, 0, 1];
        assert_eq!(h.lookup(2900), 0);
        // Home worker 1 full (2 in flight: slots 1, 1, 2): on to worker 2.
        h.in_flight = vec![0, 2, 0];
        assert_eq!(h.lookup(1900), 2);
        // Workers 1 and 2 full (6 in flight: slots 3, 3, 3): the walk wraps
        // to worker 0.
        h.in_flight = vec![0, 3, 3];
        assert_eq!(h.lookup(1900), 0);
    }

    #[test]
    fn a_server_skips_its_own_later_points_when_full() {
        let mut h = HashBounded::with_points(2, vec![(1000, 0), (1500, 0), (2000, 1)]);
        h.in_flight = vec![1, 0];
        assert_eq!(h.lookup(1100), 1);
    }

    #[test]
    fn a_drained_server_leaves_the_ring_and_returns() {
        let mut h = small_ring();
        assert_eq!(h.lookup(1100), 0);
        h.drain(0, true, 0.0);
        assert_eq!(h.ring, vec![(2000, 1), (3000, 2)]);
        assert_eq!(h.lookup(1100), 1);
        // 1 in flight over 2 live servers: ⌈2 × 1.25⌉ = 3 slots, 1 and 2;
        // worker 1 is full.
        h.in_flight = vec![0, 1, 0];
        assert_eq!(h.lookup(1100), 2);
        // The drained server's requests still count in the backend's
        // total: 4 in flight, ⌈5 × 1.25⌉ = 7 slots, 3 and 4.
        h.in_flight = vec![3, 1, 0];
        assert_eq!(h.lookup(1100), 1);
        h.drain(0, false, 0.0);
        h.in_flight = vec![0, 0, 0];
        assert_eq!(h.lookup(1100), 0);
    }

    #[test]
    fn a_key_sticks_to_its_home_and_no_pick_passes_the_bound() {
        let mut h = HashBounded::new(12);
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let home = h.pick(&get("user:7:profile"), &mut rng).worker;
        h.outcome(&Outcome {
            worker: home,
            decision_id: None,
            latency_ms: 1.0,
            success: true,
            now_ms: 1.0,
            router: 0,
            cache_hit: None,
        });
        assert_eq!(h.pick(&get("user:7:profile"), &mut rng).worker, home);
        // Never released: every pick must still find a server under its slots.
        for r in 0..2_000 {
            let key = format!("user:{}:profile", r % 50);
            let served: u64 = h.in_flight.iter().map(|&c| u64::from(c)).sum();
            let w = h.pick(&get(&key), &mut rng).worker;
            assert!(
                u64::from(h.in_flight[w]) <= slots(w, 12, served),
                "pick {r}: {w} over its bound, {:?}",
                h.in_flight
            );
        }
    }
}
