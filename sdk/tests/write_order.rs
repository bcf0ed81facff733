//! Random multi-threaded programs against the writer: whatever the interleaving, the file obeys
//! every ordering rule and the footer's totals are exact.

mod common;

use common::Buf;

use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use jets::{Metadata, Policy, RecordHandle, Trace, TraceBuilder};
use proptest::prelude::*;

/// One step of a thread's program. Indices pick a handle from the shared pool (modulo its size);
/// taking a handle out of the pool and putting it back is how handles travel between threads.
#[derive(Clone, Debug)]
enum Op {
    Root(u8),
    Child(u8, u8),
    Event(u8, u8),
    Annotate(u8),
    End(u8, u8),
    Yield,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        any::<u8>().prop_map(Op::Root),
        (any::<u8>(), any::<u8>()).prop_map(|(i, d)| Op::Child(i, d)),
        (any::<u8>(), any::<u8>()).prop_map(|(i, d)| Op::Event(i, d)),
        any::<u8>().prop_map(Op::Annotate),
        (any::<u8>(), any::<u8>()).prop_map(|(i, d)| Op::End(i, d)),
        Just(Op::Yield),
    ]
}

#[derive(Default)]
struct Expected {
    records: AtomicU64,
    ends: AtomicU64,
    events: AtomicU64,
    annotations: AtomicU64,
}

type Pool = Mutex<Vec<Option<RecordHandle>>>;

fn take(pool: &Pool, i: u8) -> Option<(usize, RecordHandle)> {
    let mut p = pool.lock().expect("lock");
    if p.is_empty() {
        return None;
    }
    let n = p.len();
    (0..n).map(|k| (i as usize + k) % n).find_map(|slot| p[slot].take().map(|h| (slot, h)))
}

fn run_op(trace: &Trace, pool: &Pool, exp: &Expected, op: &Op) {
    match *op {
        Op::Root(d) => {
            let h = trace.root("root", "Root").field("d", d).begin_at(d as u64).expect("root");
            exp.records.fetch_add(1, Ordering::Relaxed);
            pool.lock().expect("lock").push(Some(h));
        }
        Op::Child(i, d) => {
            if let Some((slot, h)) = take(pool, i) {
                let c = h.child("child", "Node").begin_at(h.start_clk() + d as u64).expect("child");
                exp.records.fetch_add(1, Ordering::Relaxed);
                let mut p = pool.lock().expect("lock");
                p[slot] = Some(h);
                p.push(Some(c));
            }
        }
        Op::Event(i, d) => {
            if let Some((slot, h)) = take(pool, i) {
                h.event("ev").field("d", d).emit_at(h.start_clk() + d as u64).expect("event");
                exp.events.fetch_add(1, Ordering::Relaxed);
                pool.lock().expect("lock")[slot] = Some(h);
            }
        }
        Op::Annotate(i) => {
            if let Some((slot, h)) = take(pool, i) {
                h.annotation("note").data_json("[1,2]").emit().expect("annotation");
                exp.annotations.fetch_add(1, Ordering::Relaxed);
                pool.lock().expect("lock")[slot] = Some(h);
            }
        }
        Op::End(i, d) => {
            if let Some((_, h)) = take(pool, i) {
                let at = h.start_clk() + d as u64;
                h.end_at(at).expect("end");
                exp.ends.fetch_add(1, Ordering::Relaxed);
            }
        }
        Op::Yield => std::thread::yield_now(),
    }
}

fn run_program(
    threads: &[Vec<Op>],
    capacity: usize,
    encoders: usize,
) -> (String, Expected, jets::Summary) {
    let out = Buf::default();
    let trace = TraceBuilder::new()
        .capacity(capacity)
        .encoders(encoders)
        .writer(out.clone(), Metadata::new())
        .expect("open");
    let pool: Pool = Mutex::new(Vec::new());
    let exp = Expected::default();
    std::thread::scope(|s| {
        for program in threads {
            let (trace, pool, exp) = (&trace, &pool, &exp);
            s.spawn(move || {
                for op in program {
                    run_op(trace, pool, exp, op);
                }
            });
        }
    });
    // Some handles are still in the pool: those records stay open. Close first, drop after.
    let summary = trace.close().expect("close");
    drop(pool);
    (out.text(), exp, summary)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn random_threaded_programs_obey_the_ordering_rules(
        threads in prop::collection::vec(prop::collection::vec(op(), 0..120), 1..5),
        tiny_queue in any::<bool>(),
        encoders in 1usize..4,
    ) {
        // A tiny queue makes producers block and interleave with the writer far more often;
        // encoder threads format batches out of the rings while the writer sequences more.
        let capacity = if tiny_queue { 16 } else { 4096 };
        let (text, exp, summary) = run_program(&threads, capacity, encoders);
        let counts = common::check(&text, false).map_err(TestCaseError::fail)?;
        prop_assert_eq!(counts.records, exp.records.load(Ordering::Relaxed));
        prop_assert_eq!(counts.ends, exp.ends.load(Ordering::Relaxed));
        prop_assert_eq!(counts.events, exp.events.load(Ordering::Relaxed));
        prop_assert_eq!(counts.annotations, exp.annotations.load(Ordering::Relaxed));
        prop_assert_eq!(summary.records, counts.records);
        prop_assert_eq!(summary.open_records, counts.records - counts.ends);
        let footer = counts.footer.expect("footer");
        prop_assert_eq!(footer["capture_end_clk"].as_u64(), counts.max_clk);
    }
}

/// Children made on another thread than their parent, many times over, with a queue small enough
/// that every thread blocks repeatedly; with one encoder and with three.
#[test]
fn children_on_other_threads_follow_their_parents() {
    for encoders in [1, 3] {
        children_on_other_threads_with(encoders);
    }
}

fn children_on_other_threads_with(encoders: usize) {
    let out = Buf::default();
    let trace = TraceBuilder::new()
        .capacity(16)
        .encoders(encoders)
        .writer(out.clone(), Metadata::new())
        .expect("open");
    let root = trace.root("root", "Root").begin_at(0).expect("root");
    let (tx, rx) = std::sync::mpsc::sync_channel::<RecordHandle>(64);
    std::thread::scope(|s| {
        s.spawn(|| {
            for i in 0..2000u64 {
                let parent = root.child("parent", "Parent").begin_at(i).expect("parent");
                tx.send(parent).expect("send");
            }
            drop(tx);
        });
        s.spawn(|| {
            for parent in rx {
                let child = parent.child("child", "Child").begin_at(parent.start_clk()).expect("c");
                child.event("e").emit_at(parent.start_clk() + 1).expect("e");
                child.end_at(parent.start_clk() + 2).expect("end");
                let at = parent.start_clk() + 3;
                parent.end_at(at).expect("end");
            }
        });
    });
    root.end_at(5000).expect("end");
    trace.close().expect("close");
    let counts = common::check(&out.text(), false).expect("valid");
    assert_eq!(counts.records, 4001);
    assert_eq!(counts.ends, 4001);
}

#[test]
fn drop_policy_counts_exactly_and_never_breaks_order() {
    /// A sink slow enough that a tiny queue overflows.
    #[derive(Clone, Default)]
    struct Slow(Buf);
    impl Write for Slow {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            std::thread::sleep(std::time::Duration::from_micros(200));
            self.0.write(b)
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let out = Slow::default();
    let trace = TraceBuilder::new()
        .capacity(16)
        .policy(Policy::Drop)
        .writer(out.clone(), Metadata::new())
        .expect("open");
    let mut attempted = [0u64; 3]; // records, events, annotations
    let root = trace.root("root", "Root").begin_at(0);
    let root = root.expect("root");
    attempted[0] += 1;
    for i in 0..20_000u64 {
        let rec = root.child("r", "R").begin_at(i).expect("begin");
        attempted[0] += 1;
        rec.event("e").emit_at(i).expect("event");
        attempted[1] += 1;
        if i % 7 == 0 {
            rec.annotation("a").emit().expect("annotation");
            attempted[2] += 1;
        }
        rec.end_at(i + 1).expect("end");
    }
    drop(root);
    let summary = trace.close().expect("close");
    let counts = common::check(&out.0.text(), false).expect("valid despite drops");
    assert!(
        summary.dropped.records + summary.dropped.events > 0,
        "nothing was dropped: {summary:?}"
    );
    let footer = counts.footer.expect("footer");
    assert_eq!(counts.records + footer["dropped_records"].as_u64().expect("n"), attempted[0]);
    assert_eq!(counts.events + footer["dropped_events"].as_u64().expect("n"), attempted[1]);
    assert_eq!(
        counts.annotations + footer["dropped_annotations"].as_u64().expect("n"),
        attempted[2]
    );
    assert_eq!(footer["dropped_records"].as_u64(), Some(summary.dropped.records));
}
