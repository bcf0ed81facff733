//! Unit tests of the rings and the writer thread, small enough for Miri
//! (`scripts/test.d/15-miri.sh` runs them there): pushes racing a close, full rings, flushes
//! racing a close, a panicking sink, retired rings, refused nested pushes, encoder threads, and the
//! capture keeper's ownership of the entries it keeps, and deferred records (CAP-DEFER-1).

use std::io::Write;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;

use super::ring::Entered;
use super::*;

/// Loops shrink under Miri, which runs the same code about a thousand times slower.
const N: u64 = if cfg!(miri) { 40 } else { 2000 };

/// A sink the test keeps a handle on (also used by the keeper's tests).
#[derive(Clone, Default)]
pub(crate) struct Buf(Arc<Mutex<Vec<u8>>>);

impl Write for Buf {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Buf {
    /// What was written so far.
    pub(crate) fn bytes(&self) -> Vec<u8> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn lines(&self) -> Vec<String> {
        String::from_utf8(self.bytes()).expect("utf8").lines().map(str::to_owned).collect()
    }
}

fn open(capacity: usize, policy: Policy, out: &Buf) -> Trace {
    TraceBuilder::new()
        .capacity(capacity)
        .policy(policy)
        .writer(out.clone(), Metadata::new())
        .expect("open")
}

/// Events whose emit returned Ok, as "t/seq" texts, and those found in the output.
fn race_close(capacity: usize, threads: u64, close_after: usize) -> (Vec<String>, Vec<String>) {
    let out = Buf::default();
    let trace = open(capacity, Policy::Block, &out);
    let root = Arc::new(trace.root("root", "Root").begin_at(0).expect("root"));
    let acked = Arc::new(AtomicUsize::new(0));
    let producers: Vec<_> = (0..threads)
        .map(|t| {
            let (root, acked) = (Arc::clone(&root), Arc::clone(&acked));
            thread::spawn(move || {
                let mut ok = Vec::new();
                for seq in 0..N {
                    let tag = format!("{t}/{seq}");
                    match root.event("e").field("tag", tag.clone()).emit_at(seq) {
                        Ok(()) => {
                            ok.push(tag);
                            acked.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(Error::Closed) => break,
                        Err(e) => panic!("{e}"),
                    }
                }
                ok
            })
        })
        .collect();
    while acked.load(Ordering::Relaxed) < close_after && producers.iter().any(|p| !p.is_finished())
    {
        thread::yield_now();
    }
    trace.close().expect("close");
    let mut ok: Vec<String> = producers.into_iter().flat_map(|p| p.join().expect("join")).collect();
    let mut written: Vec<String> = out
        .lines()
        .iter()
        .filter_map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).expect("json");
            v["data"]["tag"].as_str().map(str::to_owned)
        })
        .collect();
    ok.sort();
    written.sort();
    (ok, written)
}

#[test]
fn ok_means_written_when_close_races_pushes() {
    for close_after in [0, 5, 30] {
        let (ok, written) = race_close(16, 2, close_after);
        assert_eq!(ok, written, "close after {close_after} acknowledged lines");
    }
}

#[test]
fn a_full_ring_blocks_then_drains_in_order() {
    let out = Buf::default();
    let trace = open(16, Policy::Block, &out);
    let root = trace.root("root", "Root").begin_at(0).expect("root");
    for clk in 0..N {
        root.event("e").field("n", clk).emit_at(clk).expect("emit");
    }
    drop(root);
    let summary = trace.close().expect("close");
    assert_eq!(summary.events, N);
    let ns: Vec<u64> = out
        .lines()
        .iter()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok()?["data"]["n"].as_u64())
        .collect();
    assert_eq!(ns, (0..N).collect::<Vec<_>>(), "FIFO within a ring");
}

#[test]
fn a_full_ring_drops_and_counts_under_the_drop_policy() {
    let out = Buf::default();
    let trace = open(16, Policy::Drop, &out);
    let root = trace.root("root", "Root").begin_at(0).expect("root");
    for clk in 0..N {
        root.event("e").emit_at(clk).expect("emit");
    }
    drop(root);
    let s = trace.close().expect("close");
    assert_eq!(s.events + s.dropped.events, N);
}

#[test]
fn flush_racing_close_returns() {
    for _ in 0..if cfg!(miri) { 2 } else { 50 } {
        let out = Buf::default();
        let trace = open(16, Policy::Block, &out);
        let flusher = {
            let trace = trace.clone();
            thread::spawn(move || while trace.flush().is_ok() {})
        };
        trace.close().expect("close");
        flusher.join().expect("flusher returns");
        assert!(matches!(trace.flush(), Err(Error::Closed)));
    }
}

struct Exploding;

impl Write for Exploding {
    fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
        panic!("sink exploded");
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn a_panicking_sink_fails_the_trace() {
    // The header is written by `open` on this thread: let it through, then explode.
    struct HeaderThenExplode(bool);
    impl Write for HeaderThenExplode {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            if std::mem::replace(&mut self.0, true) {
                return Exploding.write(b);
            }
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let trace = TraceBuilder::new()
        .capacity(16)
        .writer(HeaderThenExplode(false), Metadata::new())
        .expect("open");
    let root = trace.root("root", "Root").begin_at(0).expect("root");
    for clk in 0..N {
        root.event("e").emit_at(clk).expect("emit after failure: discarded, never blocks");
    }
    assert!(trace.flush().is_err());
    assert!(trace.error().is_some());
    drop(root);
    assert!(trace.close().is_err());
}

#[test]
fn close_retires_the_rings_of_live_threads() {
    let out = Buf::default();
    let trace = open(16, Policy::Block, &out);
    let root = trace.root("root", "Root").begin_at(0).expect("root");
    root.event("e").emit_at(1).expect("emit");
    let slots: Vec<Arc<Slot>> = {
        let registry = trace.0.shared.rings.lock().expect("lock");
        registry.slots.iter().filter_map(std::sync::Weak::upgrade).collect()
    };
    assert_eq!(slots.len(), 1);
    assert!(slots[0].has_producer());
    trace.close().expect("close");
    assert!(!slots[0].has_producer(), "the buffer is freed at close");
    // This thread's ring is retired: emitting is refused, and no new ring is made.
    assert!(matches!(root.event("late").emit_at(2), Err(Error::Closed)));
}

#[test]
fn a_push_inside_a_push_is_refused() {
    let out = Buf::default();
    let trace = open(16, Policy::Block, &out);
    let root = trace.root("root", "Root").begin_at(0).expect("root");
    let outer = Entered::enter().expect("not inside a push yet");
    assert!(Entered::enter().is_none(), "nested");
    assert!(matches!(root.event("nested").emit_at(1), Err(Error::Reentrant)));
    drop(outer);
    root.event("after").emit_at(2).expect("emit");
    drop(root);
    let s = trace.close().expect("close");
    assert_eq!(s.events, 1);
}

/// Encoder threads read entries where they lie in the rings and drop them there (owned names and
/// values, so a double drop, a leak or a read of a handed-back word shows under Miri); every line
/// is written, each thread's in its order.
#[test]
fn encoder_threads_encode_and_drop_entries_in_place() {
    let out = Buf::default();
    let trace = TraceBuilder::new()
        .capacity(16)
        .encoders(2)
        .writer(out.clone(), Metadata::new())
        .expect("open");
    thread::scope(|s| {
        for t in 0..2 {
            let trace = &trace;
            s.spawn(move || {
                let r = trace.root(format!("root{t}"), "Root").begin_at(0).expect("root");
                for i in 0..N {
                    r.event(format!("t{t}e{i}")).field("v", format!("s{i}")).emit_at(i).expect("e");
                }
                r.end_at(N).expect("end");
            });
        }
    });
    trace.close().expect("close");
    let lines = out.lines();
    for t in 0..2 {
        let order: Vec<u64> = lines
            .iter()
            .filter_map(|l| l.split(&format!("\"t{t}e")).nth(1))
            .map(|rest| rest.split('"').next().expect("name").parse().expect("index"))
            .collect();
        assert_eq!(order, (0..N).collect::<Vec<_>>(), "thread {t}: every event, in order");
    }
}

/// A producer waiting for room naps [`ring::NAP`] times the number of producers napping, up to
/// [`ring::NAP_MOST`], counting itself from its first nap on, once; its place is given back when
/// its wait ends.
#[test]
fn producers_nap_longer_the_more_of_them_wait() {
    let trace = open(16, Policy::Block, &Buf::default());
    let shared = &trace.0.shared;
    let mut first = ring::Napping::new(shared);
    assert_eq!(first.nap(), ring::NAP, "alone");
    assert_eq!(first.nap(), ring::NAP, "counted once");
    let napping = |n| -> Vec<ring::Napping<'_>> {
        let one = |_| {
            let mut p = ring::Napping::new(shared);
            p.nap();
            p
        };
        (0..n).map(one).collect()
    };
    let nine = napping(9);
    assert_eq!(first.nap(), ring::NAP * 10);
    let many = napping(1000);
    assert_eq!(first.nap(), ring::NAP_MOST);
    drop((nine, many, first));
    assert_eq!(shared.napping.load(Ordering::Relaxed), 0);
    // A producer that never napped (its wait ended in the spin) was never counted.
    drop(ring::Napping::new(shared));
    assert_eq!(shared.napping.load(Ordering::Relaxed), 0);
    trace.close().expect("close");
}

/// Many producers behind a slow sink nap at once (the count the naps scale with sees them), and
/// every one gives its place back: after the close none is counted, and every event is written.
/// Whether two were seen napping at once depends on the observer thread getting a core while
/// they do, which a loaded machine may not give it: the run is repeated (up to five times) until
/// it does, each run checked in full.
#[test]
#[cfg_attr(miri, ignore = "thousands of naps: too slow under Miri")]
fn producers_waiting_together_are_counted_and_let_go() {
    let mut seen = Vec::new();
    for _ in 0..5 {
        let most = producers_behind_a_slow_sink();
        seen.push(most);
        if most > 1 {
            return;
        }
    }
    panic!("producers napped one at a time in every run ({seen:?}): the test proves nothing");
}

/// One run of [`producers_waiting_together_are_counted_and_let_go`]: the most producers seen
/// napping at once.
fn producers_behind_a_slow_sink() -> usize {
    const THREADS: u64 = 8;
    let out = Slow::default();
    let trace =
        TraceBuilder::new().capacity(16).writer(out.clone(), Metadata::new()).expect("open");
    let root = trace.root("root", "Root").begin_at(0).expect("root");
    let most = std::sync::atomic::AtomicUsize::new(0);
    let done = std::sync::atomic::AtomicBool::new(false);
    thread::scope(|s| {
        let producers: Vec<_> = (0..THREADS)
            .map(|_| {
                let root = &root;
                s.spawn(move || {
                    for clk in 0..200 {
                        root.event("e").emit_at(clk).expect("emit");
                    }
                })
            })
            .collect();
        s.spawn(|| {
            while !done.load(Ordering::Relaxed) {
                most.fetch_max(trace.0.shared.napping.load(Ordering::Relaxed), Ordering::Relaxed);
                thread::yield_now();
            }
        });
        for p in producers {
            p.join().expect("producer");
        }
        done.store(true, Ordering::Relaxed);
    });
    assert_eq!(trace.0.shared.napping.load(Ordering::Relaxed), 0);
    drop(root);
    assert_eq!(trace.close().expect("close").events, THREADS * 200);
    most.into_inner()
}

/// A sink slower than the producer: every write waits a while, as a loaded disk does.
#[derive(Clone, Default)]
struct Slow(Buf);

impl Write for Slow {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        thread::sleep(std::time::Duration::from_millis(2));
        self.0.write(b)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Events one producer emits into a trace with a slow sink (under Miri too slow: the tests
/// that use it are ignored there).
const BEHIND: u64 = 200_000;

/// Emits `events` events numbered by a field `i` (with a text field `s` too when `texts`) from
/// this thread into `trace`, inside `signal_safe` when `safe`; then reads `helped` off the
/// trace's helper (what the producer did while it waited for room), closes the trace, checks
/// that `out` holds every event, in order, and returns what it read.
fn emit_through_waits(
    trace: Trace,
    out: &Buf,
    events: u64,
    texts: bool,
    safe: bool,
    helped: impl FnOnce(&Helper) -> u64,
) -> u64 {
    let emit = || {
        let r = trace.root("root", "Root").begin_at(0).expect("root");
        for i in 0..events {
            let e = r.event("e").field("i", i);
            let e = if texts { e.field("s", format!("s{i}")) } else { e };
            e.emit_at(i).expect("event");
        }
        r.end_at(events).expect("end");
    };
    if safe {
        signal_safe(emit);
    } else {
        emit();
    }
    let helped = helped(trace.0.shared.helper.get().expect("a helper"));
    trace.close().expect("close");
    let order: Vec<u64> = out
        .lines()
        .iter()
        .filter_map(|l| l.split("\"i\":").nth(1))
        .map(|rest| rest.split([',', '}']).next().expect("value").parse().expect("i"))
        .collect();
    assert_eq!(order, (0..events).collect::<Vec<_>>(), "every event, in order");
    helped
}

/// One producer emitting [`BEHIND`] events into a trace with a slow sink, inside `signal_safe`
/// when `safe`; checks that every event is in the file, in order, and returns how many batches
/// the producer encoded.
fn behind_a_slow_sink(safe: bool) -> u64 {
    let out = Slow::default();
    // The default ring (16,384 lines): several batches of 256 KiB. One encoder: with encoder
    // threads, they could take every batch before the producer looks.
    let trace = TraceBuilder::new().encoders(1).writer(out.clone(), Metadata::new()).expect("open");
    emit_through_waits(trace, &out.0, BEHIND, true, safe, |helper| match helper {
        Helper::Encode(queue) => queue.helped(),
        _ => panic!("one encoder: a queue"),
    })
}

/// A producer that finds its ring full encodes batches the writer has sequenced instead of
/// waiting (the writer is behind: its sink is slow); the file is the same, in order.
#[test]
#[cfg_attr(miri, ignore = "hundreds of batches of 256 KiB: too slow under Miri")]
fn a_waiting_producer_encodes_the_writers_batches() {
    assert!(behind_a_slow_sink(false) > 0, "the producer waited for room and encoded no batch");
}

/// Inside `signal_safe` (the C API's async-signal-safe calls), a push that waits for room only
/// waits: encoding allocates, which a signal handler must not.
#[test]
#[cfg_attr(miri, ignore = "hundreds of batches of 256 KiB: too slow under Miri")]
fn a_signal_safe_push_only_waits() {
    assert_eq!(behind_a_slow_sink(true), 0, "a batch was encoded inside signal_safe");
}

/// Events one producer emits into a flight recorder that keeps them all, through a ring of 16
/// lines (so that the producer often waits for room), inside `signal_safe` when `safe`; checks
/// that the dump at close writes every event, in order, and returns how many chunks of the
/// recorder's memory the producer made while it waited (`capture::stock`).
fn a_growing_recorder(safe: bool) -> u64 {
    use crate::capture::{Capture, Recorder};
    const EVENTS: u64 = 20_000;
    let out = Buf::default();
    let capture = Capture { recorder: Some(Recorder::Cycles(2 * EVENTS)), ..Capture::default() };
    let trace = TraceBuilder::new()
        .capacity(16)
        .capture(capture)
        .writer(out.clone(), Metadata::new())
        .expect("open");
    emit_through_waits(trace, &out, EVENTS, false, safe, |helper| match helper {
        Helper::Stock(stock) => stock.made(),
        _ => panic!("a flight recorder: a stock"),
    })
}

/// A producer that waits for room while a flight recorder's window grows makes the window's
/// next chunks of memory, which the writer then uses: the dump is the same.
#[test]
#[cfg_attr(miri, ignore = "thousands of waits for room: too slow under Miri")]
fn a_waiting_producer_makes_the_recorders_memory() {
    assert!(a_growing_recorder(false) > 0, "the producer waited for room and made no chunk");
}

/// Inside `signal_safe`, a push that waits for room under a flight recorder only waits: making
/// a chunk allocates, which a signal handler must not.
#[test]
#[cfg_attr(miri, ignore = "thousands of waits for room: too slow under Miri")]
fn a_signal_safe_push_makes_no_memory() {
    assert_eq!(a_growing_recorder(true), 0, "a chunk was made inside signal_safe");
}

/// A push that panics while it waits for room (as a bug in what it calls meanwhile would) leaves
/// its ring free: the trace still closes (here from another thread, so that a hang fails the
/// test), and what was pushed before is in the file.
#[test]
#[cfg_attr(miri, ignore = "a slow sink and a timeout: too slow under Miri")]
fn a_push_that_panics_while_waiting_does_not_hold_up_the_close() {
    use std::sync::mpsc::channel;
    use std::time::Duration;
    let out = Slow::default();
    let trace =
        TraceBuilder::new().capacity(16).writer(out.clone(), Metadata::new()).expect("open");
    let root = trace.root("root", "Root").begin_at(0).expect("root");
    super::ring::PANIC_WHILE_WAITING.with(|p| p.set(true));
    let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        for i in 1..1000 {
            let _ = root.event("e").field("i", i).emit_at(i);
        }
    }));
    super::ring::PANIC_WHILE_WAITING.with(|p| p.set(false));
    assert!(panicked.is_err(), "a 16-line ring behind a slow sink: the push waited and panicked");
    drop(root);
    // Closed on another thread, so that a close that hangs fails the test instead.
    let (done, closed) = channel();
    thread::spawn(move || done.send(trace.close().map(|s| s.events)));
    let events = closed
        .recv_timeout(Duration::from_secs(30))
        .expect("the close waited for the push that panicked")
        .expect("close");
    assert!(events > 0, "the events before the panic are written");
    assert!(out.0.lines().iter().any(|l| l.contains("\"footer\"")), "the file is complete");
}

/// The capture keeper moves the entries it keeps out of the rings: it writes the ones a window
/// or a recorder selects (with their ancestors) and drops the others exactly once.
#[test]
fn the_keeper_owns_the_entries_it_keeps() {
    use crate::capture::{Capture, Recorder};
    let window = Capture { window: Some(N / 2..N / 2 + 2), ..Capture::default() };
    // The last line is the root's end at N + 1: four cycles keep the events at N - 2 and N - 1.
    let recorder = Capture { recorder: Some(Recorder::Cycles(4)), ..Capture::default() };
    for (capture, kept) in [(window, N / 2..N / 2 + 2), (recorder, N - 2..N)] {
        let out = Buf::default();
        let trace = TraceBuilder::new()
            .capacity(16)
            .capture(capture)
            .writer(out.clone(), Metadata::new())
            .expect("open");
        let root = trace.root(String::from("root"), "Root").begin_at(0).expect("root");
        for i in 0..N {
            let c = root.child(format!("c{i}"), "C").field("v", format!("s{i}")).begin_at(i);
            let c = c.expect("child");
            c.event(format!("e{i}")).emit_at(i).expect("event");
            c.emit_event_at(i, format!("p{i}")).expect("event without a builder");
            // Owning nothing, kept lines like this one are copied out of the ring in runs, at
            // the end of the writer's turn (`keep::Ring::pending`), before the producer may
            // reuse their words (a copy made after that is caught by `tests/capture.rs`, whose
            // recorder trace then fails the checks).
            c.emit_event_at(i, "q").expect("event without a builder");
            c.annotation(format!("a{i}")).data_json("[1]").emit().expect("annotation");
            c.end_at(i + 1).expect("end");
        }
        root.end_at(N + 1).expect("end");
        trace.close().expect("close");
        let text = out.lines().join("\n");
        for i in 0..N {
            let want = kept.contains(&i);
            assert_eq!(text.contains(&format!("\"e{i}\"")), want, "event {i}");
            assert_eq!(text.contains(&format!("\"p{i}\"")), want, "event {i} (no builder)");
            let q = format!("{{\"clk\":{i},\"type\":\"event\",\"name\":\"q\"");
            assert_eq!(text.contains(&q), want, "static event {i}: {text}");
            if want {
                assert!(text.contains(&format!("\"c{i}\"")), "its record {i}");
            }
        }
        assert!(text.contains("\"root\""), "the ancestor of everything kept");
    }
}

/// CAP-DEFER-1 under Miri: held records wait in their handle (their pooled box) and are pushed
/// by whichever thread first makes a line under them, once; those never needed are released
/// when they end or are dropped. Every box is freed exactly once (Miri checks).
#[test]
fn deferred_records_are_pushed_once_or_released() {
    use crate::capture::Capture;
    let out = Buf::default();
    let window = Capture { window: Some(N..N + 10), ..Capture::default() };
    let trace =
        TraceBuilder::new().capture(window).writer(out.clone(), Metadata::new()).expect("open");
    let root = trace.root("root", "Root").begin_at(0).expect("root");
    // Never needed: ended, dropped.
    let ended = root.child("ended", "R").field("k", String::from("owned")).begin_at(1).expect("r");
    ended.end_at(2).expect("end");
    drop(root.child_at(3, "dropped", "R").begin().expect("r"));
    // Needed by two threads at once: pushed by one of them, both events written.
    let shared = root.child_at(4, "shared", "R").begin().expect("r");
    thread::scope(|s| {
        for t in 0..2 {
            let shared = &shared;
            // With a builder, and without one (an owned name: dropped once, by the writer).
            s.spawn(move || match t {
                0 => shared.event_at(N, "e").emit().expect("event"),
                _ => shared.emit_event_at(N + 1, String::from("e")).expect("event"),
            });
        }
    });
    shared.end_at(N + 5).expect("end");
    // Fields given at once (no builder): the window holds them by their cycle, so the deferred
    // line is made in its box, its fields made there (`record::defer_fields`). One owns its text
    // and is never needed; the other, with an owned name, is.
    let owned = || [("k", String::from("owned").into())];
    let unneeded = root.begin_child_fields_at(5, "unneeded", "R", owned).expect("r");
    unneeded.end_at(6).expect("end");
    let needed = root.begin_child_fields_at(7, String::from("needed"), "R", [("n", 1u64.into())]);
    let needed = needed.expect("r");
    needed.emit_event_at(N + 2, "e").expect("event");
    needed.end_at(N + 3).expect("end");
    root.end_at(N + 6).expect("end");
    trace.close().expect("close");
    let lines = out.lines();
    let records = record_lines(&lines);
    assert_eq!(records.len(), 3, "{lines:?}");
    // By name: `shared` is pushed by one of the spawned threads, on its own ring, so where its
    // line lands among the main thread's (before `needed`, or after the root's end) is not
    // fixed; only that it comes before its own events and end (a line's dependency).
    let named = |name: &str| records.iter().find(|r| r.contains(&format!(r#""name":"{name}""#)));
    assert!(named("shared").is_some(), "{lines:?}");
    let needed = named("needed").expect("the needed record");
    assert!(needed.contains(r#""data":{"n":1}"#), "{lines:?}");
    assert_eq!(lines.iter().filter(|l| l.contains(r#""type":"event""#)).count(), 3);
}

/// CAP-DEFER-1 under Miri, for records whose verdict needs their fields (a `types=` clause
/// besides the window): the array is made on the stack and moved into a builder's line in the
/// box (`record::boxed_record`), released or pushed as above.
#[test]
fn deferred_records_judged_by_their_type_are_moved_into_their_box() {
    use crate::capture::Capture;
    let out = Buf::default();
    let setting = Capture {
        window: Some(N..N + 10),
        types: Some(vec!["Root".into(), "R".into()]),
        ..Capture::default()
    };
    let trace =
        TraceBuilder::new().capture(setting).writer(out.clone(), Metadata::new()).expect("open");
    let root = trace.root("root", "Root").begin_at(0).expect("root");
    let owned = || [("k", String::from("owned").into())];
    let unneeded = root.begin_child_fields_at(1, "unneeded", "R", owned).expect("r");
    unneeded.end_at(2).expect("end");
    let needed = root.begin_child_fields_at(3, String::from("needed"), "R", owned).expect("r");
    needed.emit_event_at(N, "e").expect("event");
    needed.end_at(N + 1).expect("end");
    root.end_at(N + 2).expect("end");
    trace.close().expect("close");
    let lines = out.lines();
    let records = record_lines(&lines);
    assert_eq!(records.len(), 2, "{lines:?}");
    assert!(records[1].contains(r#""name":"needed""#), "{lines:?}");
    assert!(records[1].contains(r#""data":{"k":"owned"}"#), "{lines:?}");
}

/// CAP-DEFER-2 under Miri: the count of the records deferred under a record, kept by the
/// parent's thread in plain stores and by the others in locked ones, across every way a handle
/// can cross threads: a record deferred on another thread, a parent ended on another thread
/// while its deferred child is alive, a child freed on another thread after its parent ended, a
/// child freed before its parent ends. Every count is freed once (Miri checks), and every record
/// written has its parent before it.
#[test]
fn deferred_records_keep_their_parents_across_threads() {
    use crate::capture::Capture;
    let out = Buf::default();
    let window = Capture { window: Some(N..N + 10), ..Capture::default() };
    let trace =
        TraceBuilder::new().capture(window).writer(out.clone(), Metadata::new()).expect("open");
    let root = trace.root("root", "Root").begin_at(0).expect("root");
    // Deferred on another thread than its parent's, needed after the parent's end.
    let p1 = root.child_at(1, "p1", "R").begin().expect("r");
    let c1 = thread::scope(|s| s.spawn(|| p1.child_at(2, "c1", "R").begin()).join());
    let c1 = c1.expect("thread").expect("r");
    p1.end_at(3).expect("end");
    trace.flush().expect("flush");
    thread::scope(|s| {
        s.spawn(move || {
            c1.emit_event_at(N, "e").expect("event");
            c1.end_at(N + 1).expect("end");
        });
    });
    // Deferred on the parent's thread; the parent ends on another thread while it is alive.
    let p2 = root.child_at(4, "p2", "R").begin().expect("r");
    let c2 = p2.child_at(5, "c2", "R").begin().expect("r");
    thread::scope(|s| {
        s.spawn(move || p2.end_at(6).expect("end"));
    });
    trace.flush().expect("flush");
    c2.emit_event_at(N + 2, "e").expect("event");
    c2.end_at(N + 3).expect("end");
    // The parent ends first on its thread; its child is dropped on another, never needed: the
    // release comes from there.
    let p3 = root.child_at(7, "p3", "R").begin().expect("r");
    let c3 = p3.child_at(8, "c3", "R").begin().expect("r");
    p3.end_at(9).expect("end");
    thread::scope(|s| {
        s.spawn(move || drop(c3));
    });
    // A child freed before its parent ends: nothing is held.
    let p4 = root.child_at(10, "p4", "R").begin().expect("r");
    p4.child_at(11, "c4", "R").begin().expect("r").end_at(12).expect("end");
    p4.end_at(13).expect("end");
    root.end_at(N + 6).expect("end");
    trace.close().expect("close");
    let lines = out.lines();
    let mut seen = std::collections::HashSet::new();
    let mut names = Vec::new();
    for l in &lines {
        let v: serde_json::Value = serde_json::from_str(l).expect("json");
        if v["type"] == "record" {
            if let Some(p) = v["parent_id"].as_u64() {
                assert!(seen.contains(&p), "{l}: its parent is not before it\n{lines:?}");
            }
            seen.insert(v["id"].as_u64().expect("id"));
            names.push(v["name"].as_str().expect("name").to_owned());
        }
    }
    assert_eq!(names, ["root", "p1", "c1", "p2", "c2"], "{lines:?}");
}

/// The `record` lines among `lines`.
fn record_lines(lines: &[String]) -> Vec<&String> {
    lines.iter().filter(|l| l.contains(r#""type":"record""#)).collect()
}

/// A ring too large for any machine is refused when the trace is opened, rather than aborting
/// in the allocator at a thread's first line (or, multiplied past `usize`, wrapping to a tiny
/// ring); the largest allowed opens.
#[test]
fn a_ring_larger_than_the_largest_is_refused_at_open() {
    for lines in [TraceBuilder::MAX_CAPACITY + 1, usize::MAX / 8, usize::MAX] {
        let Err(e) = TraceBuilder::new().capacity(lines).writer(Buf::default(), Metadata::new())
        else {
            panic!("a ring of {lines} lines is refused");
        };
        let want = format!("invalid argument: a ring of {lines} lines is more than the largest");
        assert!(e.to_string().starts_with(&want), "{e}");
    }
    let largest = TraceBuilder::new().capacity(TraceBuilder::MAX_CAPACITY);
    largest.writer(Buf::default(), Metadata::new()).expect("open").close().expect("close");
}
