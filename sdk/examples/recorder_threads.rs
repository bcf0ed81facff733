//! How the writer keeps up as threads are added: `T` threads each make `N / T` Tiny5-like
//! instructions (a record with six fields, five events by name, its end) at their own cycles,
//! into a trace under `JETS_CAPTURE` (a flight recorder, say), writing to `io::sink()` or to the
//! file a third argument names.
//! Prints the wall time and how long the threads waited for room in their rings (the writer's
//! pace).
//!
//! ```sh
//! cargo build --release -p jets-sdk --example recorder_threads
//! for t in 1 2 8 32 128; do
//!   JETS_CAPTURE=recorder=100000 target/release/examples/recorder_threads 2000000 $t
//! done
//! ```
#![allow(missing_docs)]

use std::time::Instant;

use jets::{Metadata, TraceBuilder};

fn main() {
    let mut args = std::env::args().skip(1);
    let n: u64 = args.next().map_or(2_000_000, |a| a.parse().expect("N"));
    let threads: u64 = args.next().map_or(2, |a| a.parse().expect("T"));
    let trace = match args.next() {
        Some(path) => TraceBuilder::new().create(&path, Metadata::new()),
        None => TraceBuilder::new().writer(std::io::sink(), Metadata::new()),
    }
    .expect("open");
    let core = trace.root("core", "Core").begin_at(0).expect("root");
    let start = Instant::now();
    std::thread::scope(|s| {
        for t in 0..threads {
            let core = &core;
            s.spawn(move || {
                for i in 0..n / threads {
                    let c = 8 * i;
                    let insn = core
                        .begin_child_fields_at(c, "addi", "Instruction", || {
                            [
                                ("pc", (4 * i).into()),
                                ("seq", i.into()),
                                ("display_label", "addi".into()),
                                ("unit_id", 0u64.into()),
                                ("thread_id", t.into()),
                                ("color", "blue".into()),
                            ]
                        })
                        .expect("begin");
                    for (k, stage) in ["IF", "ID", "EX", "MEM", "WB"].into_iter().enumerate() {
                        insn.emit_event_at(c + k as u64, stage).expect("event");
                    }
                    insn.end_at(c + 5).expect("end");
                }
            });
        }
    });
    let made = start.elapsed();
    core.end_at(8 * (n / threads)).expect("end");
    let summary = trace.close().expect("close");
    println!(
        "{threads} threads, {n} instructions: {:.3} s made, {:.3} s with the close; {summary:?}",
        made.as_secs_f64(),
        start.elapsed().as_secs_f64()
    );
}
