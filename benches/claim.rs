//! Criterion benchmarks of the `notify try claim` batch sizes, on the lab's
//! own settings (WAL, synchronous=FULL): `cargo bench --features bench --bench claim`.
//!
//! Each batch size claims from its own fresh database, and only the claim
//! itself is timed: topping the outbox up with pending rows happens between
//! timed claims. Throughput is reported in rows, so criterion's "elem/s" is
//! the rows per second `try claim` prints.

use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use lab::experiments::claim::{Bench, BATCHES};
use lab::experiments::Journal;

fn claim(c: &mut Criterion) {
    let mut group = c.benchmark_group("claim");
    for batch in BATCHES {
        let mut bench = Bench::new(Journal::Wal).expect("could not set up the experiment database");
        group.throughput(Throughput::Elements(batch as u64));
        group.bench_function(BenchmarkId::new("rows per claim", batch), |b| {
            b.iter_custom(|iters| {
                let mut spent = Duration::ZERO;
                for _ in 0..iters {
                    bench.ready_for(batch).expect("pending rows");
                    let start = Instant::now();
                    bench.claim(batch).expect("a claim");
                    spent += start.elapsed();
                }
                spent
            })
        });
    }
    group.finish();
}

// Short on purpose: a claim costs about one fsync, so a few seconds per
// batch size give hundreds of samples, and the whole bench finishes in
// about a minute on a small machine.
fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(4))
        .sample_size(20)
}

criterion_group! {
    name = benches;
    config = config();
    targets = claim
}
criterion_main!(benches);
