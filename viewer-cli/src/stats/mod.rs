//! `jets stats FILE`: summary statistics of a JETS trace (or, detected from the first line, of a
//! denet JSON Lines file).

pub mod denet;
pub mod host;
#[cfg(feature = "parquet")]
pub mod parquet;
pub mod trace;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{anyhow, bail, Result};
use jets_read::{Compression, Reader};

use crate::formats::timeline::read_trace;
use crate::out::{Format, Out};

/// Arguments of `jets stats`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The trace (JETS, plain or compressed) or denet JSON Lines file; several JETS traces with
    /// `--format parquet`.
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
    /// Output format: `human`, `json`, or `parquet` (a file, `-o`, of many traces: one row per
    /// run and record_type, spec/parquet.md).
    #[arg(long, default_value = "human", value_parser = parse_destination)]
    pub format: Destination,
    /// Parquet: the file to write.
    #[arg(short, long)]
    pub output: Option<PathBuf>,
    /// Host samples: the record_type counted as simulated instructions for the speed report.
    #[arg(long, default_value = "Instruction")]
    pub instruction_type: String,
}

/// Where `jets stats` writes: printed in one of the formats every command shares, or a Parquet
/// file (only `jets stats` writes one, so it is not one of the shared [`Format`]s).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Destination {
    /// Standard output, `human` or `json`.
    Print(Format),
    /// `parquet`: a file of many traces.
    Parquet,
}

fn parse_destination(s: &str) -> Result<Destination, String> {
    if s == "parquet" {
        return Ok(Destination::Parquet);
    }
    <Format as clap::ValueEnum>::from_str(s, false)
        .map(Destination::Print)
        .map_err(|_| format!("{s:?} is not one of human, json, parquet"))
}

/// What a file holds, judged by its first line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InputKind {
    /// A JETS trace (first line `"type":"header"`).
    Jets,
    /// denet JSON Lines.
    Denet,
}

/// Detects the kind of `path` from its first line, read through the one trace reader (so a
/// compressed file is judged by what it holds; `jets_read` is the one compression sniffer).
pub fn detect(path: &Path) -> Result<InputKind> {
    let mut reader = Reader::open(path).map_err(|e| anyhow!("{e}"))?;
    let name = reader.name().to_owned();
    let compressed = reader.compression() != Compression::None;
    let first = match reader.next_line() {
        Some(line) => line.map_err(|e| anyhow!("{e}"))?.bytes.to_vec(),
        None => bail!("{name}: empty file, neither a JETS trace nor denet JSON Lines"),
    };
    let v: serde_json::Value =
        serde_json::from_slice(&first).map_err(|e| anyhow!("{name}:1: not a JSON line ({e})"))?;
    if v.get("type").and_then(|t| t.as_str()) == Some("header") {
        Ok(InputKind::Jets)
    } else if v.get("kind").is_some() || v.get("ts_ms").is_some() || v.get("pid").is_some() {
        if compressed {
            bail!("{name}: a compressed denet file; decompress it first");
        }
        Ok(InputKind::Denet)
    } else {
        bail!("{name}:1: neither a JETS header nor a denet record")
    }
}

/// The statistics of a JETS trace and of its host samples, in one pass over the file.
pub fn read(
    path: &Path,
    instruction_type: &str,
) -> Result<(trace::TraceStats, Option<host::HostStats>)> {
    let mut stats = trace::TraceStats::default();
    let mut host = host::HostCollector::new(instruction_type);
    read_trace(path, |_, line| {
        host.line(&line)?;
        stats.line(line);
        Ok(())
    })?;
    stats.finish();
    Ok((stats, host.finish(&path.display().to_string())?))
}

/// Runs `jets stats`.
pub fn run(args: Args) -> Result<ExitCode> {
    let format = match args.format {
        Destination::Parquet => return parquet(&args),
        Destination::Print(f) => f,
    };
    if args.output.is_some() {
        bail!("-o is for --format parquet; the other formats print to standard output");
    }
    let [file] = &args.files[..] else {
        bail!("{} files given: several traces need --format parquet -o FILE", args.files.len())
    };
    let mut out = Out::stdout();
    match detect(file)? {
        InputKind::Jets => {
            let (stats, host) = read(file, &args.instruction_type)?;
            match format {
                Format::Human => {
                    out.text(&stats.to_text())?;
                    if let Some(h) = &host {
                        out.text(&h.to_text())?;
                    }
                }
                Format::Json => {
                    let mut v = stats.to_json();
                    if let (Some(h), Some(obj)) = (&host, v.as_object_mut()) {
                        obj.insert("host".into(), h.to_json());
                    }
                    out.json(&v)?;
                }
            }
        }
        InputKind::Denet => {
            let denet_file = denet::read(file)?;
            let summary = denet::summarize(&denet_file, file)?;
            match format {
                Format::Human => out.text(&denet::to_text(&summary, file))?,
                Format::Json => out.json(&summary)?,
            }
        }
    }
    out.finish()?;
    Ok(ExitCode::SUCCESS)
}

#[cfg(feature = "parquet")]
fn parquet(args: &Args) -> Result<ExitCode> {
    let Some(out) = &args.output else { bail!("--format parquet writes a file: give -o FILE") };
    let rows = parquet::write(&args.files, out)?;
    eprintln!("{}: {rows} rows from {} traces", out.display(), args.files.len());
    Ok(ExitCode::SUCCESS)
}

#[cfg(not(feature = "parquet"))]
fn parquet(_: &Args) -> Result<ExitCode> {
    bail!("this jets was built without the `parquet` feature: build it with `cargo build --release -p jets-cli --features parquet`")
}
