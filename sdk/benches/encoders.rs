//! End-to-end throughput with one encoder (the writer thread formats every line) and with
//! several encoder threads (`TraceBuilder::encoders`), into a plain and a zstd file: the same
//! program as `write`'s `end_to_end` (one record, eight events and an end per instruction), timed
//! from create to close. The one-encoder figure is the same-run reference.
#![allow(missing_docs)]

use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use jets::{Metadata, TraceBuilder};

const LINES: u64 = 500_000;

fn end_to_end(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut g = c.benchmark_group("encoders");
    g.sample_size(10).throughput(Throughput::Elements(LINES));
    for file in ["bench.jets", "bench.jets.zst"] {
        for encoders in [1, 2] {
            g.bench_function(BenchmarkId::new(file, encoders), |b| {
                b.iter_custom(|iters| {
                    let mut total = Duration::ZERO;
                    for _ in 0..iters {
                        let path = dir.path().join(file);
                        let start = Instant::now();
                        let trace = TraceBuilder::new()
                            .encoders(encoders)
                            .create(&path, Metadata::new())
                            .expect("create");
                        let root = trace.root("bench", "Bench").begin_at(0).expect("root");
                        for i in 0..LINES / 10 {
                            let clk = i * 4;
                            let rec = root
                                .child("insn", "Instruction")
                                .field("pc", i * 4)
                                .begin_at(clk)
                                .expect("begin");
                            for stage in 0..8u64 {
                                rec.event("Stage")
                                    .field("stage", stage)
                                    .emit_at(clk + stage)
                                    .expect("ev");
                            }
                            rec.end_at(clk + 8).expect("end");
                        }
                        drop(root);
                        trace.close().expect("close");
                        total += start.elapsed();
                    }
                    total
                })
            });
        }
    }
    g.finish();
}

criterion_group!(benches, end_to_end);
criterion_main!(benches);
