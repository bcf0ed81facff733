//! The writer under races and faults: flushes racing a close, a panicking `Write`, emits racing a
//! close (`Ok` means written), and many traces asking to be flushed on panic.
//!
//! A test that would hang runs its body on another thread and fails when the body does not finish
//! within a generous bound, so a hang is reported as a failure instead of stalling the run.

mod common;

use common::Buf;

use std::collections::HashSet;
use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Barrier};
use std::thread;
use std::time::Duration;

use jets::{Error, Metadata, Trace, TraceBuilder};
use proptest::prelude::*;

/// Far above what any body here needs, even on a loaded machine.
const BOUND: Duration = Duration::from_secs(60);

/// Runs `body` on its own thread; panics if it does not finish within [`BOUND`].
fn bounded<T: Send + 'static>(what: &str, body: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let _ = tx.send(body());
    });
    match rx.recv_timeout(BOUND) {
        Ok(v) => v,
        Err(mpsc::RecvTimeoutError::Timeout) => panic!("{what}: hung (no answer in {BOUND:?})"),
        Err(mpsc::RecvTimeoutError::Disconnected) => panic!("{what}: panicked"),
    }
}

/// Issue 17.1: `flush` on many threads while another closes. Each flush must return (Ok when it
/// was answered, `Closed` when it came too late), never wait for a writer that has exited.
#[test]
fn flush_racing_close_never_hangs() {
    // Many more threads than cores, so that some are preempted between deciding to flush and
    // queueing the request, the window in which the close used to slip through.
    const FLUSHERS: usize = 64;
    for round in 0..100 {
        bounded(&format!("round {round}"), || {
            let trace = Trace::to_writer(Buf::default(), Metadata::new()).expect("open");
            let root = trace.root("r", "R").begin_at(0).expect("root");
            let start = Arc::new(Barrier::new(FLUSHERS + 1));
            let flushers: Vec<_> = (0..FLUSHERS)
                .map(|_| {
                    let (trace, start) = (trace.clone(), Arc::clone(&start));
                    thread::spawn(move || {
                        start.wait();
                        loop {
                            match trace.flush() {
                                Ok(()) => {}
                                Err(Error::Closed) => return,
                                Err(e) => panic!("flush: {e}"),
                            }
                        }
                    })
                })
                .collect();
            start.wait();
            root.event("e").emit_at(1).expect("event");
            drop(root);
            trace.close().expect("close");
            for f in flushers {
                f.join().expect("flusher");
            }
        });
    }
}

/// A `Write` that panics on its `fail_at`-th call to `write`.
struct PanickingWrite {
    calls: usize,
    fail_at: usize,
}

impl Write for PanickingWrite {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.calls += 1;
        if self.calls == self.fail_at {
            panic!("user Write exploded");
        }
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Issue 17.2: a panicking user `Write` fails the trace like an I/O error: `flush` returns the
/// error, `error()` reports it, a thread that starts emitting afterwards does not spin, and
/// `close` returns the error.
#[test]
fn panicking_write_fails_the_trace_without_hanging() {
    bounded("panicking Write", || {
        // Call 1 is the header (written before the writer thread starts); call 2 panics.
        let sink = PanickingWrite { calls: 0, fail_at: 2 };
        let trace = TraceBuilder::new().capacity(64).writer(sink, Metadata::new()).expect("open");
        let root = trace.root("r", "R").begin_at(0).expect("root");
        root.event("e").emit_at(1).expect("event");
        let err = trace.flush().expect_err("flush reports the failure");
        assert!(err.to_string().contains("panicked"), "{err}");
        let reported = trace.error().expect("error() reports the failure");
        assert!(reported.to_string().contains("user Write exploded"), "{reported}");
        // A ring created after the failure, pushed well past its capacity, must not block.
        let late = thread::scope(|s| {
            s.spawn(|| {
                for clk in 0..10_000 {
                    root.event("late").emit_at(clk + 1).expect("emit after failure");
                }
            })
            .join()
        });
        late.expect("late producer");
        drop(root);
        let err = trace.close().expect_err("close reports the failure");
        assert!(err.to_string().contains("panicked"), "{err}");
    });
}

/// Issue 17.4: `flush_on_panic` on many traces installs one hook, not one each. With a hook per
/// trace, a panic walks (and nests on its stack) one closure per trace ever opened, and overflows
/// a small stack; here it must still run, and still flush a live trace.
#[test]
fn many_flush_on_panic_traces_share_one_hook() {
    bounded("10,000 flush_on_panic traces", || {
        for _ in 0..10_000 {
            let trace = TraceBuilder::new()
                .flush_on_panic(true)
                .writer(std::io::sink(), Metadata::new())
                .expect("open");
            trace.close().expect("close");
        }
        let out = Buf::default();
        let trace = TraceBuilder::new()
            .flush_interval(Duration::from_secs(3600))
            .flush_on_panic(true)
            .writer(out.clone(), Metadata::new())
            .expect("open");
        let root = trace.root("alive", "R").begin_at(0).expect("root");
        root.event("before_panic").emit_at(1).expect("event");
        // A 64 KiB stack: enough for one hook, not for thousands nested.
        let panicked = thread::Builder::new()
            .stack_size(64 * 1024)
            .spawn(|| std::panic::catch_unwind(|| panic!("simulated crash")).is_err())
            .expect("spawn")
            .join()
            .expect("panic caught");
        assert!(panicked);
        assert!(out.text().contains("before_panic"), "the hook flushed the live trace");
        drop(root);
        trace.close().expect("close");
    });
}

/// What one emitting thread does before, during and after a close on another thread.
#[derive(Clone, Debug)]
struct Race {
    threads: usize,
    /// Lines each thread tries to emit.
    lines: u64,
    /// How many lines the closing thread waits to see acknowledged before closing.
    close_after: usize,
    /// Lines per record (events under a per-thread record), so records begin and end in the race.
    per_record: u64,
    capacity: usize,
}

fn race() -> impl Strategy<Value = Race> {
    (1usize..5, 100u64..3000, 0usize..2000, 1u64..20, prop_oneof![Just(16usize), Just(1024)])
        .prop_map(|(threads, lines, close_after, per_record, capacity)| Race {
            threads,
            lines,
            close_after,
            per_record,
            capacity,
        })
}

/// Runs one race; returns the (thread, seq) of every event whose emit returned `Ok`, and the file.
fn run_race(r: &Race) -> (HashSet<(usize, u64)>, String) {
    let out = Buf::default();
    let trace = TraceBuilder::new()
        .capacity(r.capacity)
        .writer(out.clone(), Metadata::new())
        .expect("open");
    let root = Arc::new(trace.root("root", "Root").begin_at(0).expect("root"));
    let acked = Arc::new(AtomicUsize::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let producers: Vec<_> = (0..r.threads)
        .map(|t| {
            let (root, acked, stop, r) =
                (Arc::clone(&root), Arc::clone(&acked), Arc::clone(&stop), r.clone());
            thread::spawn(move || {
                let mut ok = Vec::new();
                let mut rec: Option<jets::RecordHandle> = None;
                for seq in 0..r.lines {
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                    let clk = seq + 1;
                    if seq % r.per_record == 0 {
                        if let Some(h) = rec.take() {
                            let _ = h.end_at(clk);
                        }
                        rec = root.child("rec", "Rec").field("t", t as u64).begin_at(clk).ok();
                    }
                    let Some(h) = rec.as_ref() else { break };
                    let sent = h.event("e").field("t", t as u64).field("seq", seq).emit_at(clk);
                    match sent {
                        Ok(()) => {
                            ok.push((t, seq));
                            acked.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(Error::Closed) => break,
                        Err(e) => panic!("emit: {e}"),
                    }
                }
                ok
            })
        })
        .collect();
    while acked.load(Ordering::Relaxed) < r.close_after
        && producers.iter().any(|p| !p.is_finished())
    {
        thread::yield_now();
    }
    trace.close().expect("close");
    stop.store(true, Ordering::Relaxed);
    let mut ok = HashSet::new();
    for p in producers {
        ok.extend(p.join().expect("producer"));
    }
    (ok, out.text())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, .. ProptestConfig::default() })]

    /// Issue 17.3: exactly the events whose emit returned `Ok` are in the file, however the close falls
    /// among the pushes, and the file is valid with exact totals.
    #[test]
    fn ok_means_written_under_concurrent_close(r in race()) {
        let (ok, text) = bounded("race", move || run_race(&r));
        let counts = common::check(&text, false).map_err(TestCaseError::fail)?;
        let mut written = HashSet::new();
        for line in text.lines() {
            let v: serde_json::Value = serde_json::from_str(line).expect("json");
            if v["type"] == "event" {
                let (t, seq) = (v["data"]["t"].as_u64(), v["data"]["seq"].as_u64());
                written.insert((t.expect("t") as usize, seq.expect("seq")));
            }
        }
        let lost: Vec<_> = ok.difference(&written).collect();
        prop_assert!(lost.is_empty(), "{} acknowledged events missing: {:?}", lost.len(), lost);
        // And the converse: a refused emit (Err(Closed)) wrote nothing.
        let refused_but_written: Vec<_> = written.difference(&ok).collect();
        prop_assert!(refused_but_written.is_empty(), "refused yet written: {:?}", refused_but_written);
        prop_assert_eq!(counts.events, written.len() as u64);
    }
}
