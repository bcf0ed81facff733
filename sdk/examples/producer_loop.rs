//! A small driver for profiling the producer: `N` two-field events on one thread, the writer
//! draining to `io::sink()` between chunks (as in `benches/write.rs`). Each event goes through
//! [`emit_one`], never inlined, so `valgrind --tool=callgrind` and `perf` show the cost per call.
//! A third argument `fields` makes each event with `emit_event_fields_at` instead of its builder;
//! `record` begins and ends a record with two fields through its builder instead, and
//! `record_fields` the same record with `begin_child_fields_at`; `instruction` makes what Tiny5
//! makes per instruction (a record with six fields at once from a closure, five events by name,
//! its end), each at cycles `8 i` to `8 i + 5`. The trace reads `JETS_CAPTURE`: with a window
//! past the run, every `instruction` is deferred and released (CAP-DEFER-1).
//!
//! ```sh
//! cargo build --release -p jets-sdk --example producer_loop
//! valgrind --tool=callgrind target/release/examples/producer_loop 100000
//! perf record -e cpu-clock -g target/release/examples/producer_loop 50000000
//! JETS_CAPTURE=clk=1000000000..1000000010 valgrind --tool=callgrind \
//!     target/release/examples/producer_loop 100000 32768 instruction
//! ```
#![allow(missing_docs)]

use std::hint::black_box;
use std::time::Instant;

use jets::{Metadata, RecordHandle, TraceBuilder};

#[inline(never)]
fn emit_one(r: &RecordHandle, i: u64) {
    r.event("Execute").field("a", i).field("b", i ^ 7).emit_at(black_box(i + 1)).expect("emit");
}

#[inline(never)]
fn emit_one_fields(r: &RecordHandle, i: u64) {
    r.emit_event_fields_at(black_box(i + 1), "Execute", [("a", i.into()), ("b", (i ^ 7).into())])
        .expect("emit");
}

#[inline(never)]
fn record_one(r: &RecordHandle, i: u64) {
    let rec =
        r.child_at(black_box(i), "insn", "Instruction").field("pc", i).field("seq", i ^ 7).begin();
    rec.expect("begin").end_at(i + 3).expect("end");
}

#[inline(never)]
fn record_one_fields(r: &RecordHandle, i: u64) {
    let fields = [("pc", i.into()), ("seq", (i ^ 7).into())];
    let rec = r.begin_child_fields_at(black_box(i), "insn", "Instruction", fields);
    rec.expect("begin").end_at(i + 3).expect("end");
}

#[inline(never)]
fn instruction_one(r: &RecordHandle, i: u64) {
    let c = black_box(8 * i);
    let insn = r.begin_child_fields_at(c, "addi", "Instruction", || {
        [
            ("pc", (4 * i).into()),
            ("seq", i.into()),
            ("display_label", "addi".into()),
            ("unit_id", 0u64.into()),
            ("thread_id", (i % 2).into()),
            ("color", "blue".into()),
        ]
    });
    let insn = insn.expect("begin");
    for (k, stage) in ["IF", "ID", "EX", "MEM", "WB"].into_iter().enumerate() {
        insn.emit_event_at(c + k as u64, stage).expect("event");
    }
    insn.end_at(c + 5).expect("end");
}

fn main() {
    let arg = |i: usize| std::env::args().nth(i).and_then(|a| a.parse().ok());
    let n: u64 = arg(1).unwrap_or(10_000_000);
    // Lines per chunk (the writer drains between chunks, untimed): half the ring's capacity.
    let chunk: u64 = arg(2).unwrap_or(1 << 15);
    let emit = match std::env::args().nth(3).as_deref() {
        Some("fields") => emit_one_fields,
        Some("record") => record_one,
        Some("record_fields") => record_one_fields,
        Some("instruction") => instruction_one,
        _ => emit_one,
    };
    let trace = TraceBuilder::new()
        .capacity(2 * chunk as usize)
        .writer(std::io::sink(), Metadata::new())
        .expect("open");
    let root = trace.root("bench", "Bench").begin_at(0).expect("root");
    let mut timed = std::time::Duration::ZERO;
    let mut done = 0;
    while done < n {
        let k = chunk.min(n - done);
        let start = Instant::now();
        for i in done..done + k {
            emit(&root, i);
        }
        timed += start.elapsed();
        done += k;
        trace.flush().expect("flush");
    }
    drop(root);
    trace.close().expect("close");
    println!("{n} events, {:.1} ns per event (wall clock)", timed.as_nanos() as f64 / n as f64);
}
