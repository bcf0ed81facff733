//! The writer and the global allocator: emitting with up to eight typed fields allocates nothing,
//! an allocator that emits into a trace is refused (not undefined behaviour), and a closed trace
//! gives its rings' memory back even while the threads that emitted to it live on.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicIsize, AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};

use jets::{Error, Metadata, RecordHandle, Trace, TraceBuilder};

/// Counts live bytes, and on threads that armed it, emits an event on every allocation.
struct Hooked;

static LIVE: AtomicIsize = AtomicIsize::new(0);
static TARGET: OnceLock<RecordHandle> = OnceLock::new();
static REFUSED: AtomicUsize = AtomicUsize::new(0);
static NESTED_OK: AtomicUsize = AtomicUsize::new(0);
/// The tests measure process-wide allocation: one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

thread_local! {
    static ARMED: Cell<bool> = const { Cell::new(false) };
    static IN_HOOK: Cell<bool> = const { Cell::new(false) };
    static IN_EMIT: Cell<bool> = const { Cell::new(false) };
    /// Allocations made by this thread so far.
    static ALLOCS: Cell<u64> = const { Cell::new(0) };
}

#[global_allocator]
static ALLOC: Hooked = Hooked;

// SAFETY: forwards to `System`, adding only counters and (on armed threads) an emitting call.
unsafe impl GlobalAlloc for Hooked {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract, passed on.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
            let _ = ALLOCS.try_with(|n| n.set(n.get() + 1));
            emit_from_allocator();
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: the caller's contract, passed on.
        unsafe { System.dealloc(ptr, layout) }
    }
}

/// What an instrumented allocator does: emit an event for the allocation. The allocator guards
/// against its own recursion (as any real one must); the SDK must guard against being entered
/// from inside its own emitting call, which happens when that call allocates.
fn emit_from_allocator() {
    let armed = ARMED.try_with(Cell::get).unwrap_or(false);
    if !armed || IN_HOOK.try_with(|h| h.replace(true)).unwrap_or(true) {
        return;
    }
    if let Some(target) = TARGET.get() {
        let nested = IN_EMIT.try_with(Cell::get).unwrap_or(false);
        match target.event("alloc").emit_at(1) {
            Err(Error::Reentrant) => {
                REFUSED.fetch_add(1, Ordering::Relaxed);
            }
            Ok(()) if nested => {
                NESTED_OK.fetch_add(1, Ordering::Relaxed);
            }
            _ => {}
        }
    }
    let _ = IN_HOOK.try_with(|h| h.set(false));
}

/// Issue 17.6: the first emit of a thread creates its ring, which allocates; the allocator's
/// emit from inside it must be refused with `Error::Reentrant`, and the outer emit succeed.
#[test]
fn allocator_that_emits_is_refused_inside_an_emit() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("alloc.jets");
    let trace = Trace::create(&path, Metadata::new()).expect("create");
    let root = trace.root("root", "Root").begin_at(0).expect("root");
    assert!(TARGET.set(root).is_ok(), "set once");
    let outer = std::thread::spawn(|| {
        ARMED.with(|a| a.set(true));
        IN_EMIT.with(|e| e.set(true));
        // First emit of this thread: creates its ring.
        let r = TARGET.get().expect("target").event("outer").emit_at(2);
        IN_EMIT.with(|e| e.set(false));
        ARMED.with(|a| a.set(false));
        r
    })
    .join()
    .expect("thread");
    outer.expect("the outer emit succeeds");
    assert!(REFUSED.load(Ordering::Relaxed) > 0, "the nested emit was refused");
    assert_eq!(NESTED_OK.load(Ordering::Relaxed), 0, "no emit succeeded inside another");
    trace.close().expect("close");
    let text = std::fs::read_to_string(&path).expect("read");
    assert!(text.contains("\"outer\""), "{text}");
    let (diagnostics, report) = jets_read::validate::validate_bytes(text.as_bytes());
    assert!(diagnostics.is_empty() && report.is_valid(), "{diagnostics:#?}\n{text}");
}

/// Issue 17.5: a thread that emitted to a trace does not keep that trace's ring (16,384 lines,
/// megabytes) after the trace is closed and dropped.
#[test]
fn closed_trace_frees_the_ring_of_a_thread_that_lives_on() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let before = LIVE.load(Ordering::Relaxed);
    let trace = TraceBuilder::new()
        .capacity(1 << 14)
        .writer(std::io::sink(), Metadata::new())
        .expect("open");
    let root = trace.root("root", "Root").begin_at(0).expect("root");
    root.event("e").emit_at(1).expect("event");
    let during = LIVE.load(Ordering::Relaxed);
    drop(root);
    trace.close().expect("close");
    drop(trace);
    let after = LIVE.load(Ordering::Relaxed);
    assert!(during - before > 1 << 20, "the ring is megabytes: {} bytes", during - before);
    assert!(after - before < 256 << 10, "{} bytes still held after close", after - before);
}

fn allocations_by(f: impl FnOnce()) -> u64 {
    let before = ALLOCS.with(Cell::get);
    f();
    ALLOCS.with(Cell::get) - before
}

/// Issue 14.4: up to eight typed fields with static keys, hints included, never allocate while
/// the ring has room: not for a record with every record hint and a field, nor an event with
/// every event hint and four fields, nor an event or record without a builder, nor their ends.
#[test]
fn eight_typed_fields_with_hints_do_not_allocate() {
    use jets::format::{Color, MarkerStyle, Severity, Status};
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let trace = TraceBuilder::new()
        .capacity(1 << 10)
        .writer(std::io::sink(), Metadata::new())
        .expect("open");
    let root = trace.root("root", "Root").begin_at(0).expect("root");
    root.event("warm").emit_at(0).expect("the ring is created (and allocated) here");
    // A thread's first open records allocate the boxes their handles' nodes live in (two open
    // at once below); ended, the boxes stay in the thread's pool.
    let warm = root.child("warm", "Warm").begin_at(0).expect("warm");
    warm.child("warm", "Warm").begin_at(0).expect("warm").end_at(0).expect("warm end");
    warm.end_at(0).expect("warm end");
    for clk in 1..200u64 {
        // With room in the ring: a call that waits for room encodes the writer's batches
        // meanwhile, which allocates (README), and 200 of these iterations fill this ring
        // whenever the writer thread does not run for a while (it failed once so, at clk 152,
        // on a loaded 2-CPU machine). The flush empties the ring first, outside the count.
        trace.flush().expect("flush");
        let n = allocations_by(|| {
            let rec = root
                .child("insn", "Instruction")
                .color(Color::rgb(0x102030))
                .unit_id(1)
                .thread_id(2)
                .subunit_id(3)
                .display_label("ADDI")
                .status(Status::Running)
                .criticality(0.5)
                .field("pc", clk * 4)
                .begin_at(clk)
                .expect("record");
            rec.event("EX")
                .color(Color::rgb(0x405060))
                .icon("cache_miss")
                .severity(Severity::Warning)
                .marker_style(MarkerStyle::Diamond)
                .field("a", clk)
                .field("b", -1i64)
                .field("c", 1.5)
                .field("d", true)
                .emit_at(clk)
                .expect("event");
            rec.emit_event_at(clk, "WB").expect("an event without a builder");
            let fields = [("addr", (clk * 8).into()), ("hit", true.into()), ("lat", 1.5.into())];
            rec.emit_event_fields_at(clk, "MEM", fields).expect("fields given at once");
            let uop = rec
                .begin_child_fields_at(clk, "uop", "Uop", || {
                    [("pc", (clk * 4).into()), ("display_label", "ADDI".into())]
                })
                .expect("a record's fields given at once");
            uop.end_at(clk + 1).expect("end");
            rec.end_at(clk + 1).expect("end");
        });
        assert_eq!(n, 0, "allocations at clk {clk}");
    }
    drop(root);
    let summary = trace.close().expect("close");
    assert_eq!(summary.records, 1 + 2 + 2 * 199);
}

/// A field made only for the Debug text of an argument (here a vector), recorded by
/// `#[jets::record]`.
#[cfg(feature = "macros")]
#[jets::record(trace = trace, name = "step", record_type = "Step", clk = clk, end_clk = clk + 1)]
fn recorded_step(trace: &RecordHandle, clk: u64, regs: &[u32]) -> usize {
    regs.len()
}

/// Issue 14.1: while capture leaves lines out, emitting allocates nothing, even where the line
/// would need memory: `#[jets::record]` formats an argument's Debug text only for a record it
/// writes, and `with` works out its fields only for a line that is made. Written, the same calls
/// allocate (the check can fail).
#[test]
fn lines_left_out_allocate_nothing_even_where_written_ones_would() {
    use jets::capture::Capture;
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let regs = [1u32, 2, 3];
    for off in [true, false] {
        let capture = Capture { off, ..Capture::default() };
        let trace = TraceBuilder::new()
            .capacity(1 << 10)
            .capture(capture)
            .writer(std::io::sink(), Metadata::new())
            .expect("open");
        let root = trace.root("root", "Root").begin_at(0).expect("root");
        let mut described = 0;
        let n = allocations_by(|| {
            for clk in 1..100u64 {
                let rec = root
                    .child_at(clk, "insn", "Instruction")
                    .with(|b| {
                        described += 1;
                        b.field("disasm", format!("addi x1, x1, {clk}"))
                    })
                    .begin()
                    .expect("record");
                rec.end_at(clk + 1).expect("end");
                let at_once = root
                    .begin_child_fields_at(clk, "insn", "Instruction", || {
                        described += 1;
                        [("disasm", format!("addi x1, x1, {clk}").into())]
                    })
                    .expect("record");
                at_once.end_at(clk + 1).expect("end");
                #[cfg(feature = "macros")]
                recorded_step(&root, clk, &regs);
            }
        });
        drop(root);
        let summary = trace.close().expect("close");
        if off {
            assert_eq!((n, described), (0, 0), "capture off: allocations, descriptions");
            assert_eq!(summary.records, 0);
        } else {
            assert!(n >= 198, "written, each record's text is made: {n} allocations");
            assert_eq!(described, 198);
        }
    }
}

/// Issue 14.1 for the `tracing` Layer: while capture is off, an event is left out whatever its
/// fields hold, so the Layer reads only its cycle: a Debug field is not formatted and a text
/// field is not copied (no allocation per event). With capture on the same events allocate, and
/// they are written; turned off and on again, the Layer writes again with every field.
#[cfg(feature = "tracing")]
#[test]
fn layer_events_left_out_allocate_nothing() {
    use tracing_subscriber::layer::SubscriberExt;
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let trace = TraceBuilder::new()
        .capacity(1 << 10)
        .writer(std::io::sink(), Metadata::new())
        .expect("open");
    let subscriber =
        tracing_subscriber::registry().with(jets::layer::JetsLayer::new(trace.clone()));
    let regs = vec![1u32, 2, 3];
    tracing::subscriber::with_default(subscriber, || {
        let emit = |n: u64| {
            for clk in 0..n {
                tracing::info!(clk, regs = ?regs, op = "addi", "retire");
            }
        };
        emit(10); // the thread's root record and the Layer's buffers are made here
        trace.capture_off();
        emit(10);
        let off = allocations_by(|| emit(100));
        trace.capture_on();
        let on = allocations_by(|| emit(100));
        assert_eq!(off, 0, "capture off: allocations for 100 events");
        assert!(on >= 100, "captured, each event's Debug and text fields are made: {on}");
    });
    let summary = trace.close().expect("close");
    assert_eq!(summary.events, 110, "the events written: before off, and after on");
}
