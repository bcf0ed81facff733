//! `jets view FILE [--port N] [--no-open]`: a local web viewer that follows a trace as it runs.
//!
//! * [`index`]: compact per-record entries in non-overlapping rows, window queries with
//!   level-of-detail clustering;
//! * [`build`]: indexing on a background thread (following a growing file) and reading lines back
//!   by offset;
//! * [`api`]: the JSON endpoints; [`server`]: HTTP on 127.0.0.1; [`web`]: the embedded front-end.

pub mod api;
pub mod build;
pub mod index;
pub mod server;
pub mod web;

use std::io::Write;
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};

/// Arguments of `jets view`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The JETS trace (plain files are followed while they grow; .gz/.zst/.br are read once).
    pub file: PathBuf,
    /// Port on 127.0.0.1 (0 picks a free one).
    #[arg(long, default_value_t = 7878)]
    pub port: u16,
    /// Do not open a browser.
    #[arg(long)]
    pub no_open: bool,
}

/// Runs `jets view`.
pub fn run(args: Args) -> Result<ExitCode> {
    let shared = build::start(&args.file, true)?;
    let listener = TcpListener::bind(("127.0.0.1", args.port)).with_context(|| {
        format!(
            "listening on 127.0.0.1:{} (use --port N, or --port 0 for any free port)",
            args.port
        )
    })?;
    let port = listener.local_addr().context("reading the server's address")?.port();
    let url = format!("http://127.0.0.1:{port}/");
    // The first line of stdout is the address, so scripts and tests can read it. A closed stdout
    // must not stop the server, so write errors are ignored.
    let mut out = std::io::stdout().lock();
    let _ =
        writeln!(out, "jets view: serving {} at {url}\npress Ctrl-C to stop", args.file.display());
    let _ = out.flush();
    drop(out);
    if !args.no_open {
        open_browser(&url);
    }
    server::serve(listener, shared).context("serving HTTP")?;
    Ok(ExitCode::SUCCESS)
}

fn open_browser(url: &str) {
    let spawned = std::process::Command::new("xdg-open")
        .arg(url)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn();
    if let Err(e) = spawned {
        eprintln!("jets view: could not open a browser (xdg-open: {e}); open {url} yourself");
    }
}
