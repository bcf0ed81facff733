//! Producer-side cost per span, side by side on one workload: a span with two fields, entered,
//! one event inside it with one field, exited and closed.
//!
//! * `registry_only`: `tracing_subscriber::Registry` without a layer (the floor of any layer);
//! * `jets_layer`: `JetsLayer` writing a JETS trace;
//! * `tracing_chrome`: `tracing-chrome`'s layer writing Chrome JSON (`include_args(true)`);
//! * `native_record`: `#[jets::record(trace = ..)]` begin + end with the same two fields, no
//!   `tracing`; `write_api`: the same record written by hand through the writer API (the floor
//!   of the macro's path); `native_record_event` adds the event through `jets::event!`.
//!
//! Every variant writes to `std::io::sink()` on its own background thread. Only the emitting code
//! is timed, in chunks; between chunks the bench waits, untimed, for the JETS writer to drain, so
//! the producer never blocks on a full queue (tracing-chrome's queue is unbounded).
#![allow(missing_docs)]

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use jets::{Metadata, RecordHandle, Trace, TraceBuilder};
use tracing_subscriber::layer::SubscriberExt;

/// Spans per timed chunk: their lines (two per span, three with the event) stay well below the
/// ring capacity, and the ring is small enough to stay in cache.
const CHUNK: u64 = 1 << 11;

fn quiet_trace() -> Trace {
    TraceBuilder::new().capacity(1 << 14).writer(std::io::sink(), Metadata::new()).expect("open")
}

/// The workload through `tracing`.
#[inline(never)]
fn span_workload(i: u64) {
    let span = tracing::info_span!("stage", pc = i, taken = true);
    let _enter = span.enter();
    tracing::info!(cycle = i, "retire");
}

/// Times `iters` calls of `f` in chunks, calling `between` untimed after each chunk.
fn chunked(iters: u64, mut f: impl FnMut(u64), mut between: impl FnMut()) -> Duration {
    let mut total = Duration::ZERO;
    let mut done = 0;
    while done < iters {
        let n = CHUNK.min(iters - done);
        let start = Instant::now();
        for i in done..done + n {
            f(i);
        }
        total += start.elapsed();
        done += n;
        between();
    }
    total
}

#[jets::record(trace = parent, args(pc, taken))]
fn native(parent: &RecordHandle, pc: u64, taken: bool) {
    black_box(pc);
}

#[jets::record(trace = parent, handle = me, args(pc, taken))]
fn native_with_event(parent: &RecordHandle, pc: u64, taken: bool) {
    if let Some(me) = me {
        let _ = jets::event!(me, "retire", cycle = pc);
    }
}

fn per_span(c: &mut Criterion) {
    let mut g = c.benchmark_group("per_span");

    g.bench_function("registry_only", |b| {
        let subscriber = tracing_subscriber::registry();
        tracing::subscriber::with_default(subscriber, || {
            b.iter_custom(|iters| chunked(iters, span_workload, || {}))
        })
    });

    g.bench_function("jets_layer", |b| {
        let trace = quiet_trace();
        let subscriber = tracing_subscriber::registry().with(jets::JetsLayer::new(trace.clone()));
        tracing::subscriber::with_default(subscriber, || {
            b.iter_custom(|iters| chunked(iters, span_workload, || trace.flush().expect("flush")))
        });
        trace.close().expect("close");
    });

    // The same with capture off: what the layer adds to the registry while it writes nothing
    // (the span's record is left out, with its event; no field is formatted).
    g.bench_function("jets_layer_capture_off", |b| {
        let trace = quiet_trace();
        trace.capture_off();
        let subscriber = tracing_subscriber::registry().with(jets::JetsLayer::new(trace.clone()));
        tracing::subscriber::with_default(subscriber, || {
            b.iter_custom(|iters| chunked(iters, span_workload, || {}))
        });
        trace.close().expect("close");
    });

    g.bench_function("tracing_chrome", |b| {
        let (layer, guard) = tracing_chrome::ChromeLayerBuilder::new()
            .writer(std::io::sink())
            .include_args(true)
            .build();
        let subscriber = tracing_subscriber::registry().with(layer);
        tracing::subscriber::with_default(subscriber, || {
            b.iter_custom(|iters| chunked(iters, span_workload, || guard.flush()))
        });
        drop(guard);
    });

    g.bench_function("native_record", |b| {
        let trace = quiet_trace();
        let root = trace.root("bench", "Bench").begin_at(0).expect("root");
        b.iter_custom(|iters| {
            chunked(iters, |i| native(&root, i, true), || trace.flush().expect("flush"))
        });
        trace.close().expect("close");
    });

    g.bench_function("write_api", |b| {
        // The same record through the writer API by hand: what the macro's path costs at least.
        let trace = quiet_trace();
        let root = trace.root("bench", "Bench").begin_at(0).expect("root");
        let record = |i: u64| {
            let r = root
                .child("native", module_path!())
                .description(concat!(file!(), ":", line!()))
                .field("pc", i)
                .field("taken", true)
                .begin();
            if let Ok(r) = r {
                let _ = r.end();
            }
        };
        b.iter_custom(|iters| chunked(iters, record, || trace.flush().expect("flush")));
        trace.close().expect("close");
    });

    g.bench_function("native_record_event", |b| {
        let trace = quiet_trace();
        let root = trace.root("bench", "Bench").begin_at(0).expect("root");
        b.iter_custom(|iters| {
            chunked(iters, |i| native_with_event(&root, i, true), || trace.flush().expect("flush"))
        });
        trace.close().expect("close");
    });
    g.finish();
}

criterion_group!(benches, per_span);
criterion_main!(benches);
