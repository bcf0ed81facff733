//! The cost of one C call per line, calling the exported `extern "C"` functions exactly as C does.
//!
//! `cargo bench -p jets-c --bench ffi -- --warm-up-time 1 --measurement-time 3`

// criterion_group! generates an undocumented public function.
#![allow(missing_docs)]

use std::ffi::c_char;
use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use jets_c::*;

fn open(dir: &tempfile::TempDir) -> *mut jets_trace {
    let path =
        std::ffi::CString::new(dir.path().join("bench.jets").into_os_string().into_encoded_bytes())
            .expect("temp path has no NUL");
    let mut t = std::ptr::null_mut();
    // SAFETY: valid strings and out pointer.
    let rc = unsafe { jets_open(path.as_ptr(), std::ptr::null(), &mut t) };
    assert_eq!(rc, JETS_OK);
    t
}

fn c(s: &'static std::ffi::CStr) -> *const c_char {
    s.as_ptr()
}

fn calls(cr: &mut Criterion) {
    let dir = tempfile::tempdir().expect("tempdir");
    let t = open(&dir);
    // SAFETY (all calls below): `t` is open until jets_close at the end; strings are static.
    let root = unsafe {
        jets_record_begin(t, 0, 0, c(c"core0"), c(c"Core"), std::ptr::null(), std::ptr::null())
    };
    assert_ne!(root, 0);
    let name = unsafe { jets_intern(c(c"Retire")) };
    let kind = unsafe { jets_intern(c(c"Instruction")) };
    let pc = unsafe { jets_intern(c(c"pc")) };
    let lat = unsafe { jets_intern(c(c"latency")) };
    let mut g = cr.benchmark_group("c_api");
    g.throughput(Throughput::Elements(1));
    let mut clk = 0u64;
    g.bench_function("jets_event strings, no data", |b| {
        b.iter(|| {
            clk += 1;
            let rc = unsafe {
                jets_event(t, root, clk, c(c"Retire"), std::ptr::null(), std::ptr::null())
            };
            black_box(rc)
        })
    });
    g.bench_function("jets_event strings + data_json", |b| {
        b.iter(|| {
            clk += 1;
            let rc = unsafe {
                jets_event(
                    t,
                    root,
                    clk,
                    c(c"Retire"),
                    std::ptr::null(),
                    c(c"{\"pc\":4096,\"latency\":3}"),
                )
            };
            black_box(rc)
        })
    });
    g.bench_function("jets_event_ex interned + 2 typed fields", |b| {
        b.iter(|| {
            clk += 1;
            let fields = [
                jets_field { key: pc, kind: JETS_FIELD_U64, value: jets_value { u64: clk } },
                jets_field { key: lat, kind: JETS_FIELD_U64, value: jets_value { u64: 3 } },
            ];
            let a = jets_attrs {
                size: std::mem::size_of::<jets_attrs>() as u32,
                name,
                record_type: 0,
                description: 0,
                fields: fields.as_ptr(),
                field_count: fields.len(),
                data_json: std::ptr::null(),
            };
            black_box(unsafe { jets_event_ex(t, root, clk, &a) })
        })
    });
    g.bench_function("jets_record_begin_ex + jets_record_end", |b| {
        b.iter(|| {
            clk += 1;
            let a = jets_attrs {
                size: std::mem::size_of::<jets_attrs>() as u32,
                name,
                record_type: kind,
                description: 0,
                fields: std::ptr::null(),
                field_count: 0,
                data_json: std::ptr::null(),
            };
            let id = unsafe { jets_record_begin_ex(t, root, clk, &a) };
            black_box(unsafe { jets_record_end(t, id, clk + 1) })
        })
    });
    g.finish();
    assert_eq!(unsafe { jets_close(t) }, JETS_OK);
}

criterion_group!(benches, calls);
criterion_main!(benches);
