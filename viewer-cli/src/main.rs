//! `jets`: validate, inspect, convert, view and monitor JETS traces.
//!
//! One module per subcommand; each exposes an `Args` struct (clap) and
//! `run(args) -> anyhow::Result<ExitCode>`. Foreign formats live in `formats/`.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "jets", version, about = "Validate, inspect, convert, view and monitor JETS traces")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    // Subcommands, one line each (keep alphabetical):
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result: anyhow::Result<ExitCode> = match cli.command {
        // Dispatch, one line each (keep alphabetical):
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("jets: error: {e:#}");
            ExitCode::from(2)
        }
    }
}
