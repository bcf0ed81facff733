//! Example 2: cores on their own threads sharing a memory system thread, traced into a JETS file.
//!
//! ```text
//! cargo run --release -p jets-examples --bin multicore -- [OUT.jets] [CORES] [WORDS_PER_CORE]
//! ```

use std::path::PathBuf;

use anyhow::Context;
use jets_examples::multicore::{run_to_file, Config};

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let out = PathBuf::from(args.next().unwrap_or_else(|| "multicore.jets".to_owned()));
    let mut config = Config::default();
    if let Some(text) = args.next() {
        config.cores = text.parse().with_context(|| format!("core count {text:?}"))?;
    }
    if let Some(text) = args.next() {
        config.words_per_core = text.parse().with_context(|| format!("words per core {text:?}"))?;
    }
    anyhow::ensure!(config.cores > 0, "at least one core");
    let (outcome, summary) = run_to_file(&out, config)?;
    println!(
        "{} cores summed {} words: total {} (checked), {} cycles, {} requests waited {} cycles",
        config.cores,
        config.cores * config.words_per_core,
        outcome.total,
        outcome.cycles,
        outcome.requests,
        outcome.queued_cycles
    );
    println!("{}: {} records, {} events", out.display(), summary.records, summary.events);
    Ok(())
}
