//! Capture control benchmarks: what an emitting call costs when capture leaves its line out.
//!
//! * `disabled`: capture switched off at run time (the "instrumentation compiled in, tracing off"
//!   path): one two-field event, or one record begun and ended.
//! * `window/outside`: a `clk=A..B` window, calls before A (events dropped in the call, records
//!   queued as possible ancestors), and `window/inside` for reference.
//! * `recorder`: a 100 k-cycle flight recorder: every line is queued and kept in memory.
//!
//! Producer-side cost, like `write.rs`: between timed chunks the bench waits, untimed, for the
//! writer to drain (`flush`), so no chunk blocks on a full ring.
#![allow(missing_docs)]

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use jets::capture::{Capture, Recorder};
use jets::{Metadata, Trace, TraceBuilder};

const CHUNK: u64 = 1 << 14;

fn trace(c: Capture) -> Trace {
    TraceBuilder::new()
        .capacity(1 << 16)
        .capture(c)
        .writer(std::io::sink(), Metadata::new())
        .expect("open")
}

/// Times `iters` calls of `f` in chunks, draining the writer between chunks (untimed).
fn timed(t: &Trace, iters: u64, mut f: impl FnMut(u64)) -> Duration {
    let mut total = Duration::ZERO;
    let mut done = 0;
    while done < iters {
        let n = CHUNK.min(iters - done);
        let start = Instant::now();
        for i in 0..n {
            f(done + i);
        }
        total += start.elapsed();
        done += n;
        t.flush().expect("flush");
    }
    total
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("capture");
    g.throughput(Throughput::Elements(1));
    let cases: [(&str, Capture, u64); 4] = [
        ("disabled", Capture { off: true, ..Capture::default() }, 0),
        ("window/outside", Capture::parse("clk=1000000000..1000000001").unwrap(), 0),
        ("window/inside", Capture::parse("clk=0..1000000000").unwrap(), 0),
        (
            "recorder",
            Capture { recorder: Some(Recorder::Cycles(100_000)), ..Capture::default() },
            0,
        ),
    ];
    for (name, setting, _) in cases {
        let t = trace(setting);
        t.capture_on();
        if name == "disabled" {
            t.capture_off();
        }
        let root = t.root("bench", "Bench").begin_at(0).expect("root");
        g.bench_function(format!("{name}/event"), |b| {
            b.iter_custom(|iters| {
                timed(&t, iters, |i| {
                    root.event("Decode")
                        .field("pc", i)
                        .field("op", 7u64)
                        .emit_at(black_box(i))
                        .unwrap()
                })
            })
        });
        g.bench_function(format!("{name}/record"), |b| {
            b.iter_custom(|iters| {
                timed(&t, iters, |i| {
                    let r = root.child("insn", "Instruction").begin_at(black_box(i)).unwrap();
                    r.end_at(i + 1).unwrap()
                })
            })
        });
        drop(root);
        t.close().expect("close");
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
