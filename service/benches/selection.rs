//! Pick cost per policy for 16 and 1024 candidates (issue #3).
//!
//! `cargo bench -p service --bench selection`

#![allow(missing_docs)] // criterion_group! generates undocumented items

use criterion::{BenchmarkId, Criterion, black_box, criterion_group, criterion_main};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use scorer_core::selection::{Candidate, PolicyKind, Selector};

fn candidates(ids: &[String]) -> Vec<Candidate<'_>> {
    ids.iter()
        .enumerate()
        .map(|(i, id)| Candidate {
            worker_id: id,
            score: 40.0 + (i * 37 % 60) as f64,
            weight: 1.0,
            in_flight: (i % 5) as f64,
            outstanding: (i % 5) as u32,
            cost: Some(1.0 + (i * 37 % 60) as f64),
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    let selector = Selector::default();
    let mut group = c.benchmark_group("pick");
    for n in [16usize, 1024] {
        let ids: Vec<String> = (0..n).map(|i| format!("worker-{i}")).collect();
        let cands = candidates(&ids);
        for policy in [
            PolicyKind::Max,
            PolicyKind::Softmax,
            PolicyKind::P2c,
            PolicyKind::Swrr,
            PolicyKind::Hash,
        ] {
            let mut rng = ChaCha8Rng::seed_from_u64(1);
            let mut key = 0u64;
            group.bench_with_input(BenchmarkId::new(policy.as_str(), n), &cands, |b, cands| {
                b.iter(|| {
                    key += 1;
                    let k = if policy == PolicyKind::Hash {
                        "user:42:profile"
                    } else {
                        "k"
                    };
                    black_box(selector.select(policy, black_box(cands), k, None, &mut rng))
                })
            });
        }
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
