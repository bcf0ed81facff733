//! A driver for counting instructions (not a benchmark): the event of `benches/ffi.rs`'s group
//! `event_2_fields`, through the Rust API and through `jets_event_ex`, each in a function of its
//! own so that callgrind can count them apart:
//!
//! ```sh
//! cargo build --profile bench -p jets-c --example ffi_count
//! valgrind --tool=callgrind --toggle-collect='*rust_event*' --toggle-collect=jets_event_ex \
//!     target/release/examples/ffi_count 20000
//! ```
//!
//! Both write to a temporary directory, flushed every 4,096 calls (as the bench does, untimed);
//! the instructions per call are the total over the calls made (argument 1, default 20,000 each).

use std::ffi::c_char;
use std::hint::black_box;
use std::ptr::null;

use jets_c::*;

/// One Rust call: `event("Retire").field("pc", clk).field("latency", 3).emit_at(clk)`.
#[inline(never)]
fn rust_event(root: &jets::RecordHandle, clk: u64) {
    black_box(root.event("Retire").field("pc", clk).field("latency", 3u64).emit_at(clk))
        .expect("emit");
}

/// One C call through the exported function, as C makes it.
#[inline(never)]
fn c_event(
    t: *mut jets_trace,
    root: jets_id,
    clk: u64,
    pc: jets_str,
    lat: jets_str,
    a: jets_attrs,
) {
    let fields = [
        jets_field { key: pc, kind: JETS_FIELD_U64, value: jets_value { u64: clk } },
        jets_field { key: lat, kind: JETS_FIELD_U64, value: jets_value { u64: 3 } },
    ];
    let a = jets_attrs { fields: fields.as_ptr(), field_count: 2, ..a };
    // SAFETY: `t` is open; `a` is a whole `jets_attrs` whose `fields` points to `fields`.
    assert_eq!(black_box(unsafe { jets_event_ex(t, root, clk, &a) }), JETS_OK);
}

fn cs(s: &'static std::ffi::CStr) -> *const c_char {
    s.as_ptr()
}

fn main() {
    let n: u64 = std::env::args().nth(1).map_or(20_000, |s| s.parse().expect("a count"));
    let dir = tempfile::tempdir().expect("tempdir");

    let trace =
        jets::Trace::create(dir.path().join("rust.jets"), jets::Metadata::new()).expect("open");
    let root = trace.root("core0", "Core").begin_at(0).expect("root");
    for clk in 1..=n {
        rust_event(&root, clk);
        if clk % 4096 == 0 {
            trace.flush().expect("flush");
        }
    }
    drop(root);
    trace.close().expect("close");

    let path =
        std::ffi::CString::new(dir.path().join("c.jets").into_os_string().into_encoded_bytes())
            .expect("no NUL");
    let mut t = std::ptr::null_mut();
    // SAFETY: NUL-terminated path, writable out pointer; the strings are static C strings.
    unsafe {
        assert_eq!(jets_open(path.as_ptr(), null(), &mut t), JETS_OK);
        let root = jets_record_begin(t, 0, 0, cs(c"core0"), cs(c"Core"), null(), null());
        let a = jets_attrs { name: jets_intern(cs(c"Retire")), ..jets_attrs::default() };
        let (pc, lat) = (jets_intern(cs(c"pc")), jets_intern(cs(c"latency")));
        for clk in 1..=n {
            c_event(t, root, clk, pc, lat, a);
            if clk % 4096 == 0 {
                assert_eq!(jets_flush(t), JETS_OK);
            }
        }
        assert_eq!(jets_close(t), JETS_OK);
    }
}
