//! Many threads into one trace (`jets_examples::threads`), under `JETS_CAPTURE`.
//!
//! ```text
//! cargo build --release -p jets-examples --bin threads
//! for t in 1 2 8 32 128; do
//!   JETS_CAPTURE=recorder=100000 target/release/threads 1000000 $t
//! done
//! ```
//!
//! Arguments: INSTRUCTIONS (default 1,000,000), THREADS (default 2), and OUT.jets to write the
//! trace (default: written to nowhere).

use std::path::PathBuf;

use anyhow::Context;

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let mut number = |what: &str, default: u64| -> anyhow::Result<u64> {
        match args.next() {
            Some(text) => text.parse().with_context(|| format!("{what} {text:?}")),
            None => Ok(default),
        }
    };
    let instructions = number("instruction count", 1_000_000)?;
    let threads = number("thread count", 2)?;
    anyhow::ensure!(threads > 0, "at least one thread");
    let out = args.next().map(PathBuf::from);
    let run = jets_examples::threads::run(None, threads, instructions, out.as_deref())?;
    println!(
        "{threads} threads, {instructions} instructions: {:.3} s made, {:.3} s with the close, \
         waiting for room {:.3} s; {} records, {} events written",
        run.made.as_secs_f64(),
        run.total.as_secs_f64(),
        run.summary.waited_for_room.as_secs_f64(),
        run.summary.records,
        run.summary.events,
    );
    Ok(())
}
