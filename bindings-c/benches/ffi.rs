//! The cost of one C call per line, calling the exported `extern "C"` functions exactly as C does,
//! and, in the group `event_2_fields`, the C call for an event with interned names and two typed
//! fields side by side with the same event through the Rust API (the cost of the C layer).
//!
//! Only the calls are timed: between chunks the bench waits, untimed, for the writer thread
//! (`jets_flush`), so a chunk never blocks on a full ring. That is the cost a simulator thread
//! pays while the writer keeps up.
//!
//! `cargo bench -p jets-c --bench ffi -- --warm-up-time 1 --measurement-time 3`

// criterion_group! generates an undocumented public function.
#![allow(missing_docs)]

use std::ffi::{c_char, CStr};
use std::hint::black_box;
use std::ptr::null;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use jets_c::*;

/// Calls per timed chunk: well below the ring capacity (16,384 lines by default).
const CHUNK: u64 = 1 << 13;

fn c(s: &'static CStr) -> *const c_char {
    s.as_ptr()
}

/// Times `iters` calls of `call(clk)` in chunks, flushing `t` untimed between chunks.
fn timed(t: *mut jets_trace, clk: &mut u64, iters: u64, mut call: impl FnMut(u64)) -> Duration {
    let mut total = Duration::ZERO;
    let mut left = iters;
    while left > 0 {
        let n = left.min(CHUNK);
        let start = Instant::now();
        for _ in 0..n {
            *clk += 1;
            call(*clk);
        }
        total += start.elapsed();
        left -= n;
        // SAFETY: `t` is open for the whole bench.
        assert_eq!(unsafe { jets_flush(t) }, JETS_OK);
    }
    total
}

fn calls(cr: &mut Criterion) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path =
        std::ffi::CString::new(dir.path().join("bench.jets").into_os_string().into_encoded_bytes())
            .expect("temp path has no NUL");
    let mut t = std::ptr::null_mut();
    // `t` is open from here until the jets_close after the last bench (each closure runs only
    // inside `bench_function`, before it); every string is a `'static` C-string literal.
    // SAFETY: `path` is NUL-terminated and outlives the call; `t` is a writable out pointer.
    assert_eq!(unsafe { jets_open(path.as_ptr(), null(), &mut t) }, JETS_OK);
    // SAFETY: `t` is open (see above); the strings are static and NUL-terminated.
    let root = unsafe { jets_record_begin(t, 0, 0, c(c"core0"), c(c"Core"), null(), null()) };
    assert_ne!(root, 0);
    // SAFETY: a static NUL-terminated string (jets_intern copies it).
    let name = unsafe { jets_intern(c(c"Retire")) };
    // SAFETY: as above.
    let kind = unsafe { jets_intern(c(c"Instruction")) };
    // SAFETY: as above.
    let pc = unsafe { jets_intern(c(c"pc")) };
    // SAFETY: as above.
    let lat = unsafe { jets_intern(c(c"latency")) };
    let attrs = |fields: &[jets_field], record_type| jets_attrs {
        name,
        record_type,
        fields: fields.as_ptr(),
        field_count: fields.len(),
        ..jets_attrs::default()
    };

    let mut g = cr.benchmark_group("c_api");
    g.throughput(Throughput::Elements(1));
    let mut clk = 0u64;
    g.bench_function("jets_event strings, no data", |b| {
        b.iter_custom(|n| {
            timed(t, &mut clk, n, |clk| {
                // SAFETY: `t` is open (see the jets_open above); the name is a static C string.
                let rc = unsafe { jets_event(t, root, clk, c(c"Retire"), null(), null()) };
                black_box(rc);
            })
        })
    });
    g.bench_function("jets_event strings + data_json (2 fields)", |b| {
        b.iter_custom(|n| {
            timed(t, &mut clk, n, |clk| {
                let json = c(c"{\"pc\":4096,\"latency\":3}");
                // SAFETY: `t` is open; the name and the JSON text are static C strings.
                black_box(unsafe { jets_event(t, root, clk, c(c"Retire"), null(), json) });
            })
        })
    });
    g.bench_function("jets_record_begin_ex + jets_record_end (2 lines)", |b| {
        b.iter_custom(|n| {
            timed(t, &mut clk, n, |clk| {
                let a = attrs(&[], kind);
                // SAFETY: `t` is open; `a` is a whole `jets_attrs` with no fields and no JSON.
                let id = unsafe { jets_record_begin_ex(t, root, clk, &a) };
                // SAFETY: `t` is open.
                black_box(unsafe { jets_record_end(t, id, clk) });
            })
        })
    });
    // The JSON event again with capture off (`jets_capture_off`, as `JETS_CAPTURE=off` or outside
    // a window): the line is counted as left out, and its text is neither copied nor parsed
    // (CA-JSON-2).
    // SAFETY: `t` is open.
    assert_eq!(unsafe { jets_capture_off(t) }, JETS_OK);
    g.bench_function("jets_event strings + data_json (2 fields), capture off", |b| {
        b.iter_custom(|n| {
            timed(t, &mut clk, n, |clk| {
                let json = c(c"{\"pc\":4096,\"latency\":3}");
                // SAFETY: `t` is open; the name and the JSON text are static C strings.
                black_box(unsafe { jets_event(t, root, clk, c(c"Retire"), null(), json) });
            })
        })
    });
    // What a simulator's instruction costs with capture off: a record with two typed fields, an
    // event with two typed fields on it, its end. Capture is asked before the fields are read.
    let fields = |v: u64| {
        [
            jets_field { key: pc, kind: JETS_FIELD_U64, value: jets_value { u64: v } },
            jets_field { key: lat, kind: JETS_FIELD_U64, value: jets_value { u64: 3 } },
        ]
    };
    g.bench_function(
        "record_begin_ex + event_ex + record_end (2 typed fields each), capture off",
        |b| {
            b.iter_custom(|n| {
                timed(t, &mut clk, n, |clk| {
                    let f = fields(clk);
                    let (r, e) = (attrs(&f, kind), attrs(&f, 0));
                    // SAFETY: `t` is open; `r` and `e` are whole `jets_attrs` whose fields live here.
                    let id = unsafe { jets_record_begin_ex(t, root, clk, &r) };
                    // SAFETY: as above.
                    black_box(unsafe { jets_event_ex(t, id, clk, &e) });
                    // SAFETY: `t` is open.
                    black_box(unsafe { jets_record_end(t, id, clk) });
                })
            })
        },
    );
    // SAFETY: `t` is open.
    assert_eq!(unsafe { jets_capture_on(t) }, JETS_OK);
    g.finish();

    // The same event through the Rust API, side by side with the C call: the cost of the C layer
    // (argument checks, id table, interned names, the error guard).
    let trace =
        jets::Trace::create(dir.path().join("rust.jets"), jets::Metadata::new()).expect("open");
    let rust_root = trace.root("core0", "Core").begin_at(0).expect("root");
    let mut g = cr.benchmark_group("event_2_fields");
    g.throughput(Throughput::Elements(1));
    let mut rust_clk = 0u64;
    g.bench_function("rust: event + 2 typed fields", |b| {
        b.iter_custom(|n| {
            let mut total = Duration::ZERO;
            let mut left = n;
            while left > 0 {
                let k = left.min(CHUNK);
                let start = Instant::now();
                for _ in 0..k {
                    rust_clk += 1;
                    let e = rust_root.event("Retire").field("pc", rust_clk).field("latency", 3u64);
                    black_box(e.emit_at(rust_clk)).expect("emit");
                }
                total += start.elapsed();
                left -= k;
                trace.flush().expect("flush");
            }
            total
        })
    });
    g.bench_function("c: jets_event_ex interned + 2 typed fields", |b| {
        b.iter_custom(|n| {
            timed(t, &mut clk, n, |clk| {
                let fields = [
                    jets_field { key: pc, kind: JETS_FIELD_U64, value: jets_value { u64: clk } },
                    jets_field { key: lat, kind: JETS_FIELD_U64, value: jets_value { u64: 3 } },
                ];
                let a = attrs(&fields, 0);
                // SAFETY: `t` is open; `a` is a whole `jets_attrs` (its `size`) whose `fields`
                // points to `fields`, alive across the call, and whose `data_json` is NULL.
                black_box(unsafe { jets_event_ex(t, root, clk, &a) });
            })
        })
    });
    g.finish();
    drop(rust_root);
    trace.close().expect("close");
    // SAFETY: `t` is open, and no other thread uses it (the benches ran on this one).
    assert_eq!(unsafe { jets_close(t) }, JETS_OK);
}

criterion_group!(benches, calls);
criterion_main!(benches);
