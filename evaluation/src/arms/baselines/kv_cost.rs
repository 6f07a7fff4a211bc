//! NVIDIA Dynamo's KV router cost, in its approximate mode (no KV events:
//! the router remembers what it routed where, for a TTL).
//!
//! Sources (ai-dynamo/dynamo): the cost, `DefaultWorkerSelector` in the
//! KV router's scheduler/selector (`lib/llm/src/kv_router/scheduler.rs`,
//! later `lib/kv-router/src/scheduling/selector.rs`):
//! `logit = overlap_score_weight × potential_prefill_blocks +
//! potential_active_blocks`, lowest wins; at `router_temperature` 0 the
//! minimum is taken (ties at random), above it a softmax is sampled. The
//! approximate indexer, `lib/llm/src/kv_router/approx.rs`: every routing
//! decision stores the request's blocks for that worker with an expiry of
//! now + TTL (a block routed again gets a new expiry), expired blocks are
//! removed when their time comes, and when the tree outgrows
//! `router_max_tree_size` the blocks expiring first are pruned down to
//! `router_prune_target_ratio` of it. Defaults, `KvRouterConfig::default`
//! in `lib/llm/src/kv_router/config.rs`: `overlap_score_weight` 1.0,
//! `router_temperature` 0.0, `router_ttl_secs` 120,
//! `router_max_tree_size` 2^20, `router_prune_target_ratio` 0.8.
//!
//! **Translation to a key-value world.** One key is one block. A request's
//! potential prefill blocks on a worker are its blocks not cached there:
//! 1 if the router has not routed this key to that worker within the TTL,
//! else 0. Its potential active blocks are the router's own requests in
//! flight on the worker (`+1` at the pick, `−1` at the outcome); Dynamo
//! also adds the request's own new blocks on every worker, the same for
//! all of them, which does not move the minimum and is left out. So
//!
//! `cost(w) = 1.0 × [key not routed to w in the last 120 s] + in_flight(w)`
//!
//! and the pick is the cheapest live worker, ties at random: a worker
//! that saw the key wins unless it has at least one more request in flight
//! than the least loaded worker that did not (a tie at exactly one more is
//! broken at random).
//!
//! Expiry is exact: an entry whose expiry is at or before the pick's time
//! counts as absent, as Dynamo's timer would have removed it. The records
//! are kept in a queue in routing order, which is expiry order since the
//! TTL is fixed, and popped as they expire (stale ones, refreshed since,
//! are skipped), as Dynamo's `PruneManager` heap does. Dynamo checks the
//! size on a timer; here it is checked at every routing decision, so the
//! bound is never exceeded. A drain removes the worker's records, as
//! Dynamo's `remove_worker` does when a worker leaves.
//!
//! **vLLM production-stack** is not added as a variant: its `kvaware`
//! router asks LMCache's controller where a prompt's KV cache actually is
//! (cache state, which these routers do not see) and otherwise falls back
//! to a session hash ring or the lowest request rate; its `prefixaware`
//! router sends a prompt to a random one of the endpoints with its longest
//! prefix match, with no load term and no eviction — a subset of what
//! `cache-aware` already does (`src/vllm_router/routers/routing_logic.py`).
//!
//! Memory: at most 2^20 live (key, worker) records, plus the queue's stale
//! entries, which leave it within one TTL: at most the picks of the last
//! 120 s.

use std::collections::{HashMap, VecDeque};

use rand::Rng;
use rand_chacha::ChaCha8Rng;

use super::Endpoints;
use crate::router::{Outcome, Pick, PickRequest, Router};

/// `overlap_score_weight`.
pub const OVERLAP_SCORE_WEIGHT: f64 = 1.0;

/// `router_ttl_secs`, in ms.
pub const TTL_MS: f64 = 120_000.0;

/// `router_max_tree_size`, in blocks: (key, worker) records.
pub const MAX_TREE_SIZE: usize = 1 << 20;

/// `router_prune_target_ratio`.
pub const PRUNE_TARGET_RATIO: f64 = 0.8;

/// Dynamo's KV-router cost over `n` workers.
#[derive(Debug, Clone)]
pub struct KvCost {
    in_flight: Vec<u32>,
    endpoints: Endpoints,
    /// Key → the workers it was routed to, each with its expiry, ms.
    routed: HashMap<String, Vec<(usize, f64)>>,
    /// Live records.
    records: usize,
    /// (expiry, worker, key) in routing order.
    expiries: VecDeque<(f64, usize, String)>,
    max_records: usize,
}

impl KvCost {
    /// Over `n ≥ 1` workers, all idle, with nothing routed.
    pub fn new(n: usize) -> Self {
        let n = n.max(1);
        Self {
            in_flight: vec![0; n],
            endpoints: Endpoints::new(n),
            routed: HashMap::new(),
            records: 0,
            expiries: VecDeque::new(),
            max_records: MAX_TREE_SIZE,
        }
    }

    /// Requests in flight at worker `i`.
    pub fn in_flight(&self, i: usize) -> u32 {
        self.in_flight[i]
    }

    /// Whether `key` was routed to `worker` and has not expired at `now_ms`.
    fn cached(&self, key: &str, worker: usize, now_ms: f64) -> bool {
        self.routed
            .get(key)
            .is_some_and(|ws| ws.iter().any(|&(w, e)| w == worker && e > now_ms))
    }

    /// The cost of sending `key` to `worker` at `now_ms`.
    pub fn cost(&self, key: &str, worker: usize, now_ms: f64) -> f64 {
        let miss = if self.cached(key, worker, now_ms) {
            0.0
        } else {
            1.0
        };
        OVERLAP_SCORE_WEIGHT * miss + f64::from(self.in_flight[worker])
    }

    /// Removes (worker, key)'s record if it still expires at `expiry`.
    fn forget(&mut self, key: &str, worker: usize, expiry: Option<f64>) {
        let Some(ws) = self.routed.get_mut(key) else {
            return;
        };
        let before = ws.len();
        ws.retain(|&(w, e)| w != worker || expiry.is_some_and(|x| e != x));
        self.records -= before - ws.len();
        if ws.is_empty() {
            self.routed.remove(key);
        }
    }

    /// Pops the records expired at `now_ms`.
    fn expire(&mut self, now_ms: f64) {
        while self.expiries.front().is_some_and(|&(e, _, _)| e <= now_ms) {
            if let Some((e, w, key)) = self.expiries.pop_front() {
                self.forget(&key, w, Some(e));
            }
        }
    }

    /// Prunes the records expiring first down to the target ratio when
    /// there are more than the maximum.
    fn prune(&mut self) {
        if self.records <= self.max_records {
            return;
        }
        let target = (self.max_records as f64 * PRUNE_TARGET_RATIO) as usize;
        while self.records > target {
            let Some((e, w, key)) = self.expiries.pop_front() else {
                break;
            };
            self.forget(&key, w, Some(e));
        }
    }

    fn record(&mut self, key: &str, worker: usize, now_ms: f64) {
        let expiry = now_ms + TTL_MS;
        let ws = self.routed.entry(key.to_owned()).or_default();
        match ws.iter_mut().find(|(w, _)| *w == worker) {
            Some(entry) => entry.1 = expiry,
            None => {
                ws.push((worker, expiry));
                self.records += 1;
            }
        }
        self.expiries.push_back((expiry, worker, key.to_owned()));
        self.prune();
    }

    fn choose(&self, key: &str, now_ms: f64, rng: &mut ChaCha8Rng) -> usize {
        let live = self.endpoints.live();
        let cost = |w: usize| self.cost(key, w, now_ms);
        let best = live.iter().map(|&w| cost(w)).fold(f64::INFINITY, f64::min);
        let tied = live.iter().filter(|&&w| cost(w) == best).count();
        let nth = rng.random_range(0..tied.max(1));
        live.iter()
            .copied()
            .filter(|&w| cost(w) == best)
            .nth(nth)
            .unwrap_or(0)
    }
}

impl Router for KvCost {
    fn pick(&mut self, req: &PickRequest<'_>, rng: &mut ChaCha8Rng) -> Pick {
        self.expire(req.now_ms);
        let worker = self.choose(req.key, req.now_ms, rng);
        self.record(req.key, worker, req.now_ms);
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
        if drained && !self.endpoints.is_live(worker) {
            let keys: Vec<String> = self
                .routed
                .iter()
                .filter(|(_, ws)| ws.iter().any(|&(w, _)| w == worker))
                .map(|(k, _)| k.clone())
                .collect();
            for k in keys {
                self.forget(&k, worker, None);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::router::Op;
    use rand::SeedableRng;

    fn get(key: &str, now_ms: f64) -> PickRequest<'_> {
        PickRequest {
            now_ms,
            key,
            op: Op::Get,
            timeout_ms: 100.0,
            router: 0,
        }
    }

    #[test]
    fn the_cost_is_the_weighted_miss_plus_the_requests_in_flight() {
        let mut p = KvCost::new(3);
        p.record("k", 0, 0.0);
        p.in_flight = vec![0, 1, 1];
        assert_eq!(
            (0..3).map(|w| p.cost("k", w, 1.0)).collect::<Vec<_>>(),
            [0.0, 2.0, 2.0]
        );
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        assert_eq!(p.choose("k", 1.0, &mut rng), 0);
        // One more in flight on the holder than elsewhere: 2 against 1.
        p.in_flight = vec![2, 1, 0];
        assert_eq!(p.cost("k", 0, 1.0), 2.0);
        assert_eq!(p.choose("k", 1.0, &mut rng), 2);
        // Equal loads: the hit wins.
        p.in_flight = vec![1, 1, 1];
        assert_eq!(p.choose("k", 1.0, &mut rng), 0);
        // A key never routed costs its miss everywhere.
        assert_eq!(p.cost("other", 0, 1.0), 2.0);
    }

    #[test]
    fn a_record_expires_after_the_ttl_and_a_new_route_renews_it() {
        let mut p = KvCost::new(2);
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        p.record("k", 0, 0.0);
        assert_eq!(p.cost("k", 0, TTL_MS - 1.0), 0.0);
        assert_eq!(p.cost("k", 0, TTL_MS), 1.0); // expiry ≤ now: gone
        p.expire(TTL_MS);
        assert_eq!((p.records, p.routed.len()), (0, 0));

        p.record("k", 1, 10.0);
        p.record("k", 1, 60_000.0); // renewed: expires at 180 s
        p.expire(TTL_MS + 10.0); // the stale first entry leaves the queue
        assert_eq!(p.records, 1);
        assert_eq!(p.cost("k", 1, TTL_MS + 10.0), 0.0);
        assert_eq!(p.cost("k", 1, 60_000.0 + TTL_MS), 1.0);
        // The pick clock expires records too.
        let w = p.pick(&get("k", 60_000.0 + TTL_MS), &mut rng).worker;
        assert_eq!(p.records, 1, "only the new record");
        assert_eq!(p.cost("k", w, 60_000.0 + TTL_MS), 1.0); // now in flight
    }

    #[test]
    fn records_past_the_maximum_are_pruned_earliest_expiry_first() {
        let mut p = KvCost::new(2);
        p.max_records = 10;
        for i in 0..11u32 {
            p.record(&format!("k{i}"), (i % 2) as usize, f64::from(i));
        }
        assert_eq!(p.records, 8);
        assert!(!p.cached("k2", 0, 20.0) && p.cached("k3", 1, 20.0));
    }

    #[test]
    fn ties_are_broken_at_random_and_picks_record_the_key() {
        let mut p = KvCost::new(4);
        let mut rng = ChaCha8Rng::seed_from_u64(2);
        let mut seen = [0u32; 4];
        for i in 0..4_000 {
            let key = format!("u{i}");
            let w = p.pick(&get(&key, 0.0), &mut rng).worker;
            seen[w] += 1;
            assert!(p.cached(&key, w, 1.0));
            p.outcome(&Outcome {
                worker: w,
                decision_id: None,
                latency_ms: 1.0,
                success: true,
                now_ms: 0.0,
                router: 0,
                cache_hit: None,
            });
        }
        assert!(seen.iter().all(|&c| c > 850), "{seen:?}");
    }

    #[test]
    fn a_drained_worker_is_skipped_and_forgets_what_it_was_sent() {
        let mut p = KvCost::new(2);
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        p.record("k", 0, 0.0);
        p.record("k", 1, 0.0);
        p.drain(0, true, 0.0);
        assert_eq!(p.records, 1);
        assert!(!p.cached("k", 0, 1.0));
        p.in_flight = vec![0, 5];
        assert_eq!(p.pick(&get("k", 1.0), &mut rng).worker, 1);
        p.drain(0, false, 2.0);
        assert_eq!(p.pick(&get("k", 3.0), &mut rng).worker, 0);
    }
}
