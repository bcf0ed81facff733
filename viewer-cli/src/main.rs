//! `jets`: validate, inspect, convert, view and monitor JETS traces.
//!
//! One module per subcommand; each exposes an `Args` struct (clap) and
//! `run(args) -> anyhow::Result<ExitCode>`. Foreign formats live in `formats/`.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[macro_use]
mod out;

mod bench;
mod convert;
mod cut;
mod demo;
mod formats;
mod gantt;
mod human;
mod import;
mod progress;
mod repair;
mod run;
mod stats;
mod tree;
mod validate;
mod view;

#[derive(Parser)]
#[command(
    name = "jets",
    version,
    about = "Validate, inspect, convert, view and monitor JETS traces"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    // Subcommands, one line each (keep alphabetical):
    /// Measure what tracing costs on this machine (producer, end to end, Layer, validation).
    Bench(bench::Args),
    /// Convert a JETS trace to Chrome JSON, Perfetto, Kanata (Konata) or DFTracer.
    Convert(convert::Args),
    /// Write a part of a trace (a window, types, events, units, a sample, a flight recorder).
    Cut(cut::Args),
    /// Run the bundled example simulator end to end: trace, validate, stats, exports.
    Demo(demo::Args),
    /// Write a self-contained HTML Gantt page of a small trace.
    Gantt(gantt::Args),
    /// Import DFTracer or denet files into a JETS trace.
    Import(import::Args),
    /// Copy the valid lines of a damaged trace into a valid one (IN is never modified).
    Repair(repair::Args),
    /// Run a command and monitor its process tree (denet JSON Lines).
    Run(run::Args),
    /// Summary statistics of a JETS trace (or a denet JSON Lines file).
    Stats(stats::Args),
    /// The record hierarchy with durations, annotations and event counts.
    Tree(tree::Args),
    /// Check traces against JETS 2.0 (exit 0 valid, 1 invalid, 2 usage or I/O error).
    Validate(validate::Args),
    /// Local web viewer of a trace (follows a growing file).
    View(view::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result: anyhow::Result<ExitCode> = match cli.command {
        // Dispatch, one line each (keep alphabetical):
        Command::Bench(a) => bench::run(a),
        Command::Convert(a) => convert::run(a),
        Command::Cut(a) => cut::run(a),
        Command::Demo(a) => demo::run(a),
        Command::Gantt(a) => gantt::run(a),
        Command::Import(a) => import::run(a),
        Command::Repair(a) => repair::run(a),
        Command::Run(a) => run::run(a),
        Command::Stats(a) => stats::run(a),
        Command::Tree(a) => tree::run(a),
        Command::Validate(a) => validate::run(a),
        Command::View(a) => view::run(a),
    };
    match result {
        Ok(code) => code,
        // The reader of our output went away (`jets tree big.jets | head -1`): end quietly.
        Err(e) if out::is_broken_pipe(&e) => ExitCode::from(out::BROKEN_PIPE_EXIT),
        Err(e) => {
            eprintln!("jets: error: {}", out::error_chain(&e));
            ExitCode::from(2)
        }
    }
}
