//! Issue 14.1 for the C API: while capture is off, the plain-string calls (`jets_record_begin`,
//! `jets_event`, `jets_annotation`) and `jets_record_end` allocate nothing, whatever names, text
//! and JSON they are given (CA-JSON-2); the same calls with capture on do (the check can fail),
//! and write their lines.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::ffi::{c_char, CStr, CString};
use std::ptr::null;

use jets_c::*;

struct Counting;

thread_local! {
    /// Allocations made by this thread so far.
    static ALLOCS: Cell<u64> = const { Cell::new(0) };
}

// SAFETY: forwards to the system allocator; the count is a thread-local without a destructor.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = ALLOCS.try_with(|n| n.set(n.get() + 1));
        // SAFETY: forwarded.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn c(s: &CStr) -> *const c_char {
    s.as_ptr()
}

fn allocations_by(f: impl FnOnce()) -> u64 {
    let before = ALLOCS.with(Cell::get);
    f();
    ALLOCS.with(Cell::get) - before
}

#[test]
fn plain_string_calls_allocate_nothing_while_capture_is_off() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = CString::new(dir.path().join("t.jets").into_os_string().into_encoded_bytes())
        .expect("no NUL");
    let mut t = std::ptr::null_mut();
    // SAFETY: `path` is NUL-terminated; `t` is a writable out pointer; every string below is a
    // NUL-terminated C-string literal; `t` is open until the jets_close at the end.
    unsafe {
        assert_eq!(jets_open(path.as_ptr(), null(), &mut t), JETS_OK);
        let root = jets_record_begin(t, 0, 0, c(c"core0"), c(c"Core"), null(), null());
        assert_ne!(root, 0);
        let work = |clk: u64| {
            let json = c(c"{\"pc\":4096,\"latency\":3}");
            let r = jets_record_begin(t, root, clk, c(c"insn"), c(c"Instruction"), null(), json);
            assert_ne!(r, 0);
            assert_eq!(jets_event(t, r, clk, c(c"Retire"), c(c"retired"), json), JETS_OK);
            assert_eq!(jets_annotation(t, r, c(c"note"), null(), json), JETS_OK);
            assert_eq!(jets_record_end(t, r, clk + 1), JETS_OK);
        };
        for clk in 1..20 {
            work(clk); // the thread's ring, the record table's slots and pools are made here
        }
        assert_eq!(jets_capture_off(t), JETS_OK);
        for clk in 20..40 {
            work(clk);
        }
        let off = allocations_by(|| (40..140).for_each(work));
        assert_eq!(jets_capture_on(t), JETS_OK);
        let on = allocations_by(|| (140..240).for_each(work));
        assert_eq!(
            off, 0,
            "capture off: allocations for 100 records with an event and an annotation"
        );
        assert!(on >= 100, "captured, names and JSON are copied and parsed: {on} allocations");
        assert_eq!(jets_record_end(t, root, 300), JETS_OK);
        assert_eq!(jets_close(t), JETS_OK);
    }
    let text = std::fs::read_to_string(dir.path().join("t.jets")).expect("read");
    let events = text.lines().filter(|l| l.contains("\"type\":\"event\"")).count();
    assert_eq!(events, 19 + 100, "the events written: before off and after on");
}
