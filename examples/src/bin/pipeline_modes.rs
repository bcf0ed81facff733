//! The Tiny5 pipeline of `jets bench`, run once in one capture mode: for timing builds against
//! each other in alternating processes, and for instruction counts under callgrind.
//!
//! ```text
//! cargo run --release -p jets-examples --bin pipeline_modes -- MODE [WORDS] [OUT.jets]
//! ```
//!
//! MODE is one of `jets bench`'s: `untraced`, `off`, `window` (1% of the run in its middle),
//! `sample` (1 in 100 instructions), `recorder` (100 k cycles, dumped at the end) or `full`.
//! WORDS is the size of the array the program sorts (default 1300, as `jets bench`); OUT the
//! trace (default `pipeline-modes.jets`, removed first). It prints the run's time, from opening
//! the trace to closing it, as `jets bench` times each run; `window` first runs untraced, outside
//! the timing, to learn the run's length.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{bail, Context};
use jets::capture::{Capture, Recorder};
use jets::{Metadata, TraceBuilder};
use jets_examples::pipeline::{programs, CacheConfig, Machine, Pipeline, Program};

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let mode = args.next().unwrap_or_else(|| "untraced".to_owned());
    let words: usize = match args.next() {
        Some(text) => text.parse().with_context(|| format!("array size {text:?}"))?,
        None => 1300,
    };
    let out = PathBuf::from(args.next().unwrap_or_else(|| "pipeline-modes.jets".to_owned()));
    // The same program as `jets bench` (its seed too).
    let program = programs::bubble_sort(&programs::random_words(words, 7))?;
    let capture = match mode.as_str() {
        "untraced" => None,
        "off" => Some(Capture { off: true, ..Capture::default() }),
        "window" => {
            let (_, cycles) = run(&program, None, &out)?;
            let mid = cycles / 2;
            Some(Capture { window: Some(mid..mid + (cycles / 100).max(1)), ..Capture::default() })
        }
        "sample" => {
            Some(Capture { samples: vec![("Instruction".to_owned(), 100)], ..Capture::default() })
        }
        "recorder" => {
            Some(Capture { recorder: Some(Recorder::Cycles(100_000)), ..Capture::default() })
        }
        "full" => Some(Capture::full()),
        other => bail!("unknown mode {other:?}: untraced, off, window, sample, recorder or full"),
    };
    let (took, cycles) = run(&program, capture, &out)?;
    println!("{mode}: {cycles} cycles in {took:.3} s");
    Ok(())
}

/// One run, traced into `out` under `capture` (None: untraced); its time and length in cycles.
/// The result is checked, so a mode that broke the simulation cannot pass as fast.
fn run(program: &Program, capture: Option<Capture>, out: &PathBuf) -> anyhow::Result<(f64, u64)> {
    match std::fs::remove_file(out) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            return Err(e).with_context(|| format!("removing {}", out.display()));
        }
        _ => {}
    }
    let machine = Machine::load(program)?;
    let start = Instant::now();
    let mut pipe = Pipeline::new(machine, CacheConfig::default());
    let trace = match capture {
        Some(c) => {
            let t = TraceBuilder::new()
                .capture(c)
                .create(out, Metadata::new())
                .with_context(|| format!("creating {}", out.display()))?;
            pipe = pipe.traced(&t, "core0")?;
            Some(t)
        }
        None => None,
    };
    pipe.run(u64::MAX)?;
    let (machine, stats) = pipe.finish()?;
    if let Some(t) = trace {
        t.close_at(stats.cycles)?;
    }
    let took = start.elapsed().as_secs_f64();
    program.verify(&machine).map_err(|e| anyhow::anyhow!("the program went wrong: {e}"))?;
    Ok((took, stats.cycles))
}
