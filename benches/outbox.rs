//! Criterion benchmarks of the `notify try outbox` variants, on the lab's
//! own settings (WAL, synchronous=FULL): `cargo bench --features bench --bench outbox`.
//!
//! Each variant gets its own fresh database, because criterion runs one
//! benchmark after another and a database shared between them would be
//! larger, with a longer WAL, for whichever ran last.

use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion};
use lab::experiments::outbox::Bench;
use lab::experiments::Journal;

fn fresh() -> Bench {
    Bench::new(Journal::Wal).expect("could not set up the experiment database")
}

fn outbox(c: &mut Criterion) {
    let mut group = c.benchmark_group("outbox");

    let mut bench = fresh();
    group.bench_function("a change only, one commit", |b| {
        b.iter(|| bench.change_only().expect("change only"))
    });

    let mut bench = fresh();
    group.bench_function("b change and outbox row, one commit", |b| {
        b.iter(|| bench.change_and_outbox().expect("change and outbox row"))
    });

    let mut bench = fresh();
    group.bench_function("c change, then outbox row, two commits", |b| {
        b.iter(|| bench.two_commits().expect("two commits"))
    });

    let mut bench = fresh();
    group.bench_function("d floor, 4 KiB write + fsync (sync_all)", |b| {
        b.iter(|| bench.floor().expect("floor"))
    });

    group.finish();
}

// Short on purpose: each call costs a few hundred microseconds, so a few
// seconds per variant give thousands of samples, and the whole bench
// finishes in well under two minutes on a small machine.
fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(5))
        .sample_size(30)
}

criterion_group! {
    name = benches;
    config = config();
    targets = outbox
}
criterion_main!(benches);
