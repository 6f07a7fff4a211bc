//! Least outstanding requests over all workers (full scan).
//!
//! Every pick looks at the router's own in-flight count of **every**
//! worker and sends to the minimum — what HAProxy's `balance leastconn`
//! and NGINX's `least_conn` do with equal weights. In-flight counts are the
//! router's own: `+1` at pick, `−1` at the outcome (success, refusal or the
//! client's timeout), as a proxy counts its open requests.
//!
//! Sources:
//!
//! - HAProxy `src/lb_fwlc.c` (haproxy/haproxy at `cb33d3ac`):
//!   `fwlc_queue_srv` keys each server by
//!   `(inflight + 1) × SRV_EWGHT_MAX / eweight` (0 when idle) with
//!   `inflight = served + nbpend`; `fwlc_srv_reposition`, installed as both
//!   `server_take_conn` and `server_drop_conn` in `fwlc_init_server_tree`,
//!   re-keys a server whenever it takes or releases one; and
//!   `fwlc_get_next_server` takes `eb32_first`, the lowest key. With equal
//!   weights that is the fewest in flight.
//! - NGINX `src/http/modules/ngx_http_upstream_least_conn_module.c`
//!   (nginx/nginx), `ngx_http_upstream_get_least_conn_peer`: the peer with
//!   the least `conns × best->weight < best->conns × weight`.
//!
//! Ties: both proxies break them by rotation, not at random — HAProxy's
//! ebtree keeps equal keys in insertion order and a re-keyed server goes
//! behind the others of its key (its `configuration.txt`: "Round-robin is
//! performed within groups of servers of the same load"); NGINX runs a
//! smooth weighted round robin (`current_weight`) over the tied peers
//! (the `many` branch). Here ties are broken **uniformly at random**, which
//! spreads them the same on average without a rotation's state.

use rand::Rng;
use rand_chacha::ChaCha8Rng;

use super::Endpoints;
use crate::router::{Outcome, Pick, PickRequest, Router};

/// Least-request over all `n` workers, ties at random.
#[derive(Debug, Clone)]
pub struct LeastRequestAll {
    in_flight: Vec<u32>,
    endpoints: Endpoints,
}

impl LeastRequestAll {
    /// Over `n ≥ 1` workers, all idle.
    pub fn new(n: usize) -> Self {
        Self {
            in_flight: vec![0; n.max(1)],
            endpoints: Endpoints::new(n),
        }
    }

    /// Requests in flight at worker `i`.
    pub fn in_flight(&self, i: usize) -> u32 {
        self.in_flight[i]
    }
}

impl Router for LeastRequestAll {
    fn pick(&mut self, _req: &PickRequest<'_>, rng: &mut ChaCha8Rng) -> Pick {
        let live = self.endpoints.live();
        let count = |i: &usize| self.in_flight[*i];
        let least = live.iter().map(count).min().unwrap_or(0);
        let tied = live.iter().filter(|i| count(i) == least).count();
        let nth = rng.random_range(0..tied);
        let worker = live
            .iter()
            .copied()
            .filter(|i| count(i) == least)
            .nth(nth)
            .unwrap_or(0);
        self.in_flight[worker] += 1;
        Pick {
            worker,
            decision_id: None,
        }
    }

    fn outcome(&mut self, o: &Outcome<'_>) {
        let c = &mut self.in_flight[o.worker];
        *c = c.saturating_sub(1);
    }

    fn drain(&mut self, worker: usize, drained: bool, _now_ms: f64) {
        self.endpoints.set_drained(worker, drained);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    fn done(worker: usize) -> Outcome<'static> {
        Outcome {
            worker,
            decision_id: None,
            latency_ms: 2.0,
            success: true,
            now_ms: 2.0,
            router: 0,
            cache_hit: None,
        }
    }

    #[test]
    fn the_minimum_is_always_chosen() {
        let mut p = LeastRequestAll::new(6);
        let mut rng = ChaCha8Rng::seed_from_u64(4);
        let mut open: Vec<usize> = Vec::new();
        for i in 0..5_000u32 {
            let before = p.in_flight.clone();
            let least = *before.iter().min().expect("workers");
            let w = p.pick(&PickRequest::test_get(0.0), &mut rng).worker;
            assert_eq!(before[w], least, "picked {w} with {before:?}");
            assert_eq!(p.in_flight(w), least + 1);
            open.push(w);
            // Release an older request now and then, so loads differ.
            if i % 3 == 0 {
                let k = (i as usize * 7) % open.len();
                p.outcome(&done(open.swap_remove(k)));
            }
        }
    }

    #[test]
    fn ties_are_spread_over_all_tied_workers() {
        let mut p = LeastRequestAll::new(5);
        p.in_flight = vec![3, 1, 1, 5, 1];
        let mut rng = ChaCha8Rng::seed_from_u64(8);
        let mut seen = [0u32; 5];
        for _ in 0..30_000 {
            let w = p.pick(&PickRequest::test_get(0.0), &mut rng).worker;
            seen[w] += 1;
            p.outcome(&done(w)); // back to 1: the tie stays
        }
        assert_eq!((seen[0], seen[3]), (0, 0), "{seen:?}");
        for w in [1, 2, 4] {
            assert!((9_500..10_500).contains(&seen[w]), "{seen:?}");
        }
    }

    #[test]
    fn a_single_worker_always_gets_the_pick() {
        let mut p = LeastRequestAll::new(1);
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        assert_eq!(p.pick(&PickRequest::test_get(0.0), &mut rng).worker, 0);
        assert_eq!(p.pick(&PickRequest::test_get(0.0), &mut rng).worker, 0);
        assert_eq!(p.in_flight(0), 2);
    }
}
