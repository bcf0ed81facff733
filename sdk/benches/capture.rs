//! Capture control benchmarks: what an emitting call costs when capture leaves its line out, or
//! keeps it only in memory.
//!
//! * `disabled`: capture switched off at run time (the "instrumentation compiled in, tracing off"
//!   path): one two-field event, or one child record begun and ended.
//! * `window/outside`: a `clk=A..B` window, calls after B (left out when the builder is made:
//!   inert builders) and `window/before` (events left out at their cycle, records queued as
//!   possible ancestors; `event_at`: the event made with its cycle, left out when made);
//!   `window/inside` for reference.
//! * `recorder`: a 100 k-cycle flight recorder: every line is queued and kept in memory.
//!
//! Producer-side cost, like `write.rs`: between timed chunks the bench waits, untimed, for the
//! writer to drain (`flush`) when the chunk queued anything, so no chunk blocks on a full ring.
//! Chunks are timed in the thread's CPU time, like `write.rs` (`JETS_BENCH_WALL=1`: wall clock).
//! Each case runs for about 2 s of measured time, so the whole bench takes a few minutes even
//! when a call costs a few nanoseconds.
#![allow(missing_docs)]

use std::cell::Cell;
use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use jets::capture::{Capture, Recorder};
use jets::{Metadata, Trace, TraceBuilder};

mod common;
use common::Clock;

/// Calls per timed chunk: well below the ring's capacity (each call queues at most two lines).
const CHUNK: u64 = 1 << 13;

fn trace(c: Capture) -> Trace {
    TraceBuilder::new()
        .capacity(1 << 15)
        .capture(c)
        .writer(std::io::sink(), Metadata::new())
        .expect("open")
}

/// Times `iters` calls of `f` in chunks, draining the writer between chunks (untimed) when the
/// calls queue lines. `clk` keeps counting across calls, so cycles never go backwards.
fn timed(t: &Trace, iters: u64, queues: bool, clk: &Cell<u64>, mut f: impl FnMut(u64)) -> Duration {
    let (clock, origin) = (Clock::from_env(), Instant::now());
    let mut total = Duration::ZERO;
    let mut done = 0;
    while done < iters {
        let n = CHUNK.min(iters - done);
        let base = clk.get();
        let start = clock.now(origin);
        for i in 0..n {
            f(base + i);
        }
        total += clock.now(origin) - start;
        clk.set(base + n);
        done += n;
        if queues {
            t.flush().expect("flush");
        }
    }
    total
}

/// A case: its name, the setting, the first cycle, and whether events and records are queued.
struct Case {
    name: &'static str,
    capture: Capture,
    start: u64,
    events_queue: bool,
    records_queue: bool,
}

fn bench(c: &mut Criterion) {
    // Far enough that no bench reaches the window's start (a few 1e8 calls per case at most).
    let window = |w: &str| Capture::parse(w).expect("setting");
    let cases = [
        Case {
            name: "disabled",
            capture: Capture { off: true, ..Capture::default() },
            start: 0,
            events_queue: false,
            records_queue: false,
        },
        Case {
            name: "window/outside",
            capture: window("clk=1000..2000"),
            start: 2_000,
            events_queue: false,
            records_queue: false,
        },
        Case {
            name: "window/before",
            capture: window("clk=1000000000000000..2000000000000000"),
            start: 0,
            events_queue: false,
            records_queue: true,
        },
        Case {
            name: "window/inside",
            capture: window("clk=0..1000000000000000"),
            start: 0,
            events_queue: true,
            records_queue: true,
        },
        Case {
            name: "recorder",
            capture: Capture { recorder: Some(Recorder::Cycles(100_000)), ..Capture::default() },
            start: 0,
            events_queue: true,
            records_queue: true,
        },
    ];
    let mut g = c.benchmark_group("capture");
    g.throughput(Throughput::Elements(1))
        .sample_size(20)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    for case in cases {
        let t = trace(case.capture);
        let clk = Cell::new(case.start);
        // The root begins where the case's cycles start, so every call is past it.
        let root = t.root("bench", "Bench").begin_at(case.start).expect("root");
        g.bench_function(format!("{}/event", case.name), |b| {
            b.iter_custom(|iters| {
                timed(&t, iters, case.events_queue, &clk, |i| {
                    root.event("Decode")
                        .field("pc", i)
                        .field("op", 7u64)
                        .emit_at(black_box(i))
                        .expect("emit")
                })
            })
        });
        if case.name == "window/before" {
            // The same event made with its cycle (`event_at`): judged, and left out, when made.
            g.bench_function(format!("{}/event_at", case.name), |b| {
                b.iter_custom(|iters| {
                    timed(&t, iters, false, &clk, |i| {
                        root.event_at(black_box(i), "Decode")
                            .field("pc", i)
                            .field("op", 7u64)
                            .emit()
                            .expect("emit")
                    })
                })
            });
        }
        g.bench_function(format!("{}/record", case.name), |b| {
            b.iter_custom(|iters| {
                timed(&t, iters, case.records_queue, &clk, |i| {
                    let r =
                        root.child("insn", "Instruction").begin_at(black_box(i)).expect("begin");
                    r.end_at(i + 1).expect("end")
                })
            })
        });
        root.end_at(clk.get()).expect("end root");
        t.close().expect("close");
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
