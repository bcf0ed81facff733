//! Writer benchmarks: producer-side cost per call, and end-to-end lines per second to a file.
//!
//! Producer-side numbers time only the emitting calls: between timed chunks the bench waits,
//! untimed, for the writer thread to drain the queue, so the chunk never blocks on a full queue.
//! That is the cost a simulator thread pays while the writer keeps up (as it does whenever the
//! simulator emits fewer lines per second than the end-to-end figure).
#![allow(missing_docs)]

use std::hint::black_box;
use std::thread;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use jets::{Metadata, RecordHandle, Trace, TraceBuilder};

/// Lines per timed chunk: well below the queue capacity.
const CHUNK: u64 = 1 << 15;

fn quiet_trace() -> Trace {
    TraceBuilder::new().capacity(1 << 17).writer(std::io::sink(), Metadata::new()).expect("open")
}

/// Runs `emit(i)` `iters` times on each of `threads` threads, timing only the emitting chunks.
/// Returns the mean per-thread wall time, i.e. the cost per call as seen by each simulator thread.
fn producer_time(
    trace: &Trace,
    threads: usize,
    iters: u64,
    emit: impl Fn(&RecordHandle, u64) + Sync,
) -> Duration {
    let root = trace.root("bench", "Bench").begin_at(0).expect("root");
    let mut total = Duration::ZERO;
    let mut done = 0;
    while done < iters {
        let n = CHUNK.min(iters - done);
        let per_thread = n / threads as u64 + 1;
        let elapsed: Vec<Duration> = thread::scope(|s| {
            let handles: Vec<_> = (0..threads)
                .map(|_| {
                    s.spawn(|| {
                        let start = Instant::now();
                        for i in 0..per_thread {
                            emit(&root, i);
                        }
                        start.elapsed()
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().expect("thread")).collect()
        });
        total += elapsed.iter().sum::<Duration>() / threads as u32;
        done += n;
        trace.flush().expect("flush");
    }
    // `total` covers `iters / threads` calls per thread; scale to a per-call figure over `iters`.
    total * threads as u32
}

fn producer(c: &mut Criterion) {
    let mut g = c.benchmark_group("producer");
    for threads in [1usize, 2] {
        g.bench_function(BenchmarkId::new("event_two_fields", threads), |b| {
            let trace = quiet_trace();
            b.iter_custom(|iters| {
                producer_time(&trace, threads, iters, |r, i| {
                    r.event("Execute")
                        .field("a", i)
                        .field("b", i ^ 7)
                        .emit_at(black_box(i + 1))
                        .expect("emit")
                })
            });
            trace.close().expect("close");
        });
        g.bench_function(BenchmarkId::new("record_begin_end", threads), |b| {
            let trace = quiet_trace();
            b.iter_custom(|iters| {
                producer_time(&trace, threads, iters, |r, i| {
                    let rec = r.child("insn", "Instruction").begin_at(black_box(i)).expect("begin");
                    rec.end_at(i + 3).expect("end");
                })
            });
            trace.close().expect("close");
        });
    }
    g.finish();
}

fn end_to_end(c: &mut Criterion) {
    const LINES: u64 = 500_000;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut g = c.benchmark_group("end_to_end");
    g.sample_size(10).throughput(Throughput::Elements(LINES));
    g.bench_function("lines_to_file", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let path = dir.path().join("bench.jets");
                let start = Instant::now();
                let trace = Trace::create(&path, Metadata::new()).expect("create");
                let root = trace.root("bench", "Bench").begin_at(0).expect("root");
                // One record, one end and eight events per instruction: 10 lines.
                for i in 0..LINES / 10 {
                    let clk = i * 4;
                    let rec = root.child("insn", "Instruction").field("pc", i * 4).begin_at(clk);
                    let rec = rec.expect("begin");
                    for stage in 0..8u64 {
                        rec.event("Stage").field("stage", stage).emit_at(clk + stage).expect("ev");
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
    g.finish();
}

criterion_group!(benches, producer, end_to_end);
criterion_main!(benches);
