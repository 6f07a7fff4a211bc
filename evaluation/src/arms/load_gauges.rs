//! The service replicas' load gauges on the bus: each replica publishes
//! its outstanding picks per worker (absolute counts, not add/free
//! events) when they changed since its last gauge, or
//! [`REPUBLISH_MS`] after it regardless; every other replica hears a gauge
//! one bus hop after it left. A replica counts the latest gauge of each
//! other replica, unless it is older than [`GAUGE_TTL_MS`]. A gauge may
//! also carry the keys its replica routed since its last, as a router's
//! load report does.

use std::collections::VecDeque;

/// An unchanged gauge goes out again after this long, ms.
pub const REPUBLISH_MS: f64 = 250.0;

/// A gauge older than this no longer counts, ms.
pub const GAUGE_TTL_MS: f64 = 1_000.0;

/// A key a replica routed: its hash, the worker, when, ms.
pub type Routed = (u64, String, f64);

/// A gauge as heard: when it was sent, ms, and the load per worker.
type Heard = (f64, Vec<u32>);

/// One gauge on its way.
#[derive(Debug, Clone)]
struct Gauge {
    from: usize,
    sent_ms: f64,
    arrive_ms: f64,
    load: Vec<u32>,
    routed: Vec<Routed>,
}

/// Every replica's gauges in flight and as heard.
#[derive(Debug)]
pub struct LoadGauges {
    one_way_ms: f64,
    /// In order of arrival (one delay for every hop, gauges sent in time
    /// order).
    in_flight: VecDeque<Gauge>,
    /// `heard[k][j]`: replica `j`'s latest gauge that reached replica `k`,
    /// when it was sent, ms, and the load.
    heard: Vec<Vec<Option<Heard>>>,
    /// Each replica's last gauge: when, ms, and the load.
    last: Vec<Option<Heard>>,
}

impl LoadGauges {
    /// `replicas` replicas, nothing published, each hop `one_way_ms`.
    pub fn new(replicas: usize, one_way_ms: f64) -> Self {
        Self {
            one_way_ms: one_way_ms.max(0.0),
            in_flight: VecDeque::new(),
            heard: vec![vec![None; replicas]; replicas],
            last: vec![None; replicas],
        }
    }

    /// Replica `from`'s clock ticks at `now_ms` with `load` outstanding
    /// per worker and the keys it `routed` since its last gauge: whether a
    /// gauge went out (an unchanged one without keys waits).
    pub fn publish(
        &mut self,
        from: usize,
        load: Vec<u32>,
        routed: Vec<Routed>,
        now_ms: f64,
    ) -> bool {
        let Some(last) = self.last.get_mut(from) else {
            return false;
        };
        if let Some((at_ms, old)) = last.as_ref()
            && *old == load
            && routed.is_empty()
            && now_ms - at_ms < REPUBLISH_MS
        {
            return false;
        }
        *last = Some((now_ms, load.clone()));
        self.in_flight.push_back(Gauge {
            from,
            sent_ms: now_ms,
            arrive_ms: now_ms + self.one_way_ms,
            load,
            routed,
        });
        true
    }

    /// Delivers every gauge that has reached the other replicas by
    /// `now_ms`: the replicas that heard one, ascending, and the keys
    /// each delivered gauge carried, with the replica that routed them.
    pub fn deliver(&mut self, now_ms: f64) -> (Vec<usize>, Vec<(usize, Vec<Routed>)>) {
        let mut heard_one = vec![false; self.heard.len()];
        let mut routed = Vec::new();
        while self
            .in_flight
            .front()
            .is_some_and(|g| g.arrive_ms <= now_ms)
        {
            let Some(g) = self.in_flight.pop_front() else {
                break;
            };
            for (k, heard) in self.heard.iter_mut().enumerate() {
                if k != g.from {
                    heard[g.from] = Some((g.sent_ms, g.load.clone()));
                    heard_one[k] = true;
                }
            }
            if !g.routed.is_empty() {
                routed.push((g.from, g.routed));
            }
        }
        let heard = (0..heard_one.len()).filter(|&k| heard_one[k]).collect();
        (heard, routed)
    }

    /// What replica `k` knows at `now_ms` of the others' load over
    /// `workers` workers: per worker the sum of their latest gauges that
    /// still count, when those were sent on average, ms, and how many
    /// counted; `None` when none does.
    pub fn others(&self, k: usize, now_ms: f64, workers: usize) -> Option<(Vec<u32>, f64, u32)> {
        let mut total = vec![0u32; workers];
        let (mut counted, mut sent_sum_ms) = (0u32, 0.0);
        let live = self.heard.get(k)?.iter().flatten();
        for (sent_ms, load) in live.filter(|(sent_ms, _)| now_ms - sent_ms <= GAUGE_TTL_MS) {
            for (t, n) in total.iter_mut().zip(load) {
                *t = t.saturating_add(*n);
            }
            counted += 1;
            sent_sum_ms += sent_ms;
        }
        (counted > 0).then(|| (total, sent_sum_ms / f64::from(counted), counted))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gauge_reaches_the_other_replicas_one_hop_later_and_not_its_own() {
        let mut g = LoadGauges::new(3, 0.5);
        let key = (7u64, "w1".to_owned(), 9.0);
        assert!(g.publish(0, vec![2, 0], vec![key.clone()], 10.0));
        assert!(g.deliver(10.4).0.is_empty());
        assert_eq!(g.others(1, 10.4, 2), None);
        assert_eq!(g.deliver(10.5), (vec![1, 2], vec![(0, vec![key])]));
        assert_eq!(g.others(1, 10.5, 2), Some((vec![2, 0], 10.0, 1)));
        assert_eq!(
            g.others(0, 10.5, 2),
            None,
            "its own load is not the others'"
        );
        // Two others: their sum, sent on average at their mean time.
        assert!(g.publish(2, vec![1, 3], Vec::new(), 12.0));
        assert_eq!(g.deliver(12.5), (vec![0, 1], Vec::new()));
        assert_eq!(g.others(1, 12.5, 2), Some((vec![3, 3], 11.0, 2)));
    }

    #[test]
    fn an_unchanged_gauge_waits_and_an_old_one_stops_counting() {
        let mut g = LoadGauges::new(2, 0.0);
        assert!(g.publish(0, vec![1], Vec::new(), 0.0));
        assert!(!g.publish(0, vec![1], Vec::new(), 5.0), "unchanged");
        assert!(
            g.publish(0, vec![1], vec![(1, "w0".into(), 6.0)], 7.0),
            "keys"
        );
        assert!(g.publish(0, vec![2], Vec::new(), 10.0), "changed");
        let again = 10.0 + REPUBLISH_MS;
        assert!(g.publish(0, vec![2], Vec::new(), again), "regardless");
        g.deliver(again);
        assert!(g.others(1, again + GAUGE_TTL_MS, 1).is_some());
        assert_eq!(g.others(1, again + GAUGE_TTL_MS + 1.0, 1), None);
        assert!(!g.publish(5, vec![1], Vec::new(), 0.0), "no such replica");
    }
}
