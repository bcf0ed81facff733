//! Example 1: the 5-stage RV32I pipeline sorting an array, traced into a JETS file.
//!
//! ```text
//! cargo run --release -p jets-examples --bin pipeline -- [OUT.jets] [WORDS]
//! ```
//!
//! `jets demo` runs the same simulation and then validates, summarizes and converts the trace.

use std::path::PathBuf;

use anyhow::Context;
use jets_examples::pipeline::{programs, traced};

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let out = PathBuf::from(args.next().unwrap_or_else(|| "pipeline.jets".to_owned()));
    let words: usize = match args.next() {
        Some(text) => text.parse().with_context(|| format!("array size {text:?}"))?,
        None => 32,
    };
    let program = programs::bubble_sort(&programs::random_words(words, 1))?;
    let outcome = traced::run_to_file(&out, &program, &traced::Options::default())?;
    let s = outcome.stats;
    println!("{}: {}", program.name, outcome.verified);
    println!(
        "{} cycles, {} retired (IPC {:.2}), {} squashed, {} load-use stalls, {} D$ misses",
        s.cycles,
        s.retired,
        s.retired as f64 / s.cycles as f64,
        s.squashed,
        s.load_use_stalls,
        s.dcache_misses
    );
    println!(
        "{}: {} lines, {:.0} simulated cycles/s with tracing",
        out.display(),
        outcome.summary.records
            + outcome.summary.record_ends
            + outcome.summary.events
            + outcome.summary.annotations,
        outcome.cycles_per_sec()
    );
    Ok(())
}
