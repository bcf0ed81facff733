//! Many threads emitting into one trace: how the writer keeps up as threads are added, whatever
//! the machine's cores. Each thread makes its share of Tiny5-like instructions (a record with six
//! fields given at once, five stage events by name, its end) at its own cycles, under one root
//! record; nothing is simulated, so the time is the SDK's and the writer's.
//!
//! For a GPU or many-core simulator that traces a thread per SM or core: with a fixed nap, 128
//! threads waiting for room left the writer almost no time (a flight recorder took 16.6 s for
//! what one thread does in 0.3 s); `jets bench` compares 64 threads with one here.

use std::path::Path;
use std::time::{Duration, Instant};

use jets::capture::Capture;
use jets::{Metadata, Summary, TraceBuilder};

/// One run: how long the threads took to make their lines, and the trace's summary.
#[derive(Debug)]
pub struct Run {
    /// From the first line to the last thread's last line.
    pub made: Duration,
    /// `made` and the close (a flight recorder writes its window then).
    pub total: Duration,
    /// The trace's summary.
    pub summary: Summary,
}

/// Makes `instructions` instructions from `threads` threads into a trace under `capture` (or
/// `JETS_CAPTURE` when `None`), written to `out`, or to nowhere (`io::sink()`). Instruction `n`
/// of the run is at cycles `8 n` to `8 n + 5`, and thread `t` makes those with `n % threads ==
/// t`: the run spans the same cycles whatever the threads, so a window of cycles (a flight
/// recorder's) holds as many lines from many threads as from one.
pub fn run(
    capture: Option<Capture>,
    threads: u64,
    instructions: u64,
    out: Option<&Path>,
) -> Result<Run, jets::Error> {
    let builder = match capture {
        Some(c) => TraceBuilder::new().capture(c),
        None => TraceBuilder::new(),
    };
    let trace = match out {
        Some(path) => builder.create(path, Metadata::new())?,
        None => builder.writer(std::io::sink(), Metadata::new())?,
    };
    let core = trace.root("core", "Core").begin_at(0)?;
    let start = Instant::now();
    std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|t| {
                let core = &core;
                s.spawn(move || -> Result<(), jets::Error> {
                    for n in (t..instructions).step_by(threads as usize) {
                        instruction(core, t, n)?;
                    }
                    Ok(())
                })
            })
            .collect();
        // A worker's panic goes on in this thread, as its own would.
        workers
            .into_iter()
            .try_for_each(|w| w.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
    })?;
    let made = start.elapsed();
    core.end_at(8 * instructions)?;
    let summary = trace.close()?;
    Ok(Run { made, total: start.elapsed(), summary })
}

/// Instruction `n` of the run, made by thread `t`.
fn instruction(core: &jets::RecordHandle, t: u64, n: u64) -> Result<(), jets::Error> {
    let c = 8 * n;
    let insn = core.begin_child_fields_at(c, "addi", "Instruction", || {
        [
            ("pc", (4 * n).into()),
            ("seq", n.into()),
            ("display_label", "addi".into()),
            ("unit_id", 0u64.into()),
            ("thread_id", t.into()),
            ("color", "#4e79a7".into()),
        ]
    })?;
    for (k, stage) in ["IF", "ID", "EX", "MEM", "WB"].into_iter().enumerate() {
        insn.emit_event_at(c + k as u64, stage)?;
    }
    insn.end_at(c + 5)
}
