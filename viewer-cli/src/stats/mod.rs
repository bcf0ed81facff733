//! `jets stats FILE`: summary statistics of a JETS trace (or, detected from the first line, of a
//! denet JSON Lines file).

pub mod denet;
pub mod host;
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
    /// The trace (JETS, plain or compressed) or denet JSON Lines file.
    pub file: PathBuf,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    pub format: Format,
    /// Host samples: the record_type counted as simulated instructions for the speed report.
    #[arg(long, default_value = "Instruction")]
    pub instruction_type: String,
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
    let mut out = Out::stdout();
    match detect(&args.file)? {
        InputKind::Jets => {
            let (stats, host) = read(&args.file, &args.instruction_type)?;
            match args.format {
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
            let file = denet::read(&args.file)?;
            let summary = denet::summarize(&file, &args.file)?;
            match args.format {
                Format::Human => out.text(&denet::to_text(&summary, &args.file))?,
                Format::Json => out.json(&summary)?,
            }
        }
    }
    out.finish()?;
    Ok(ExitCode::SUCCESS)
}
