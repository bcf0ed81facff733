//! `jets stats FILE`: summary statistics of a JETS trace (or, detected from the first line, of a
//! denet JSON Lines file).

pub mod denet;
pub mod host;
#[cfg(feature = "parquet")]
pub mod parquet;
pub mod trace;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use clap::ValueEnum;

/// How `jets stats` prints.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// Tables for people.
    #[default]
    Human,
    /// One JSON object.
    Json,
    /// One Parquet table of many traces, a row per run and record_type (needs `-o`).
    Parquet,
}

/// Arguments of `jets stats`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The trace (JETS, plain or compressed) or denet JSON Lines file; several JETS traces with
    /// `--format parquet`.
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
    /// Parquet: the file to write.
    #[arg(short, long)]
    pub output: Option<PathBuf>,
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
    /// A JETS trace (first line `"type":"header"`, or compressed).
    Jets,
    /// denet JSON Lines.
    Denet,
}

/// Detects the kind of `path` from its first line.
pub fn detect(path: &Path) -> Result<InputKind> {
    let file = std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
    let mut first = Vec::new();
    BufReader::new(file)
        .read_until(b'\n', &mut first)
        .with_context(|| format!("reading {}", path.display()))?;
    if first.starts_with(&[0x1f, 0x8b]) || first.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
        // Compressed: the JETS reader decompresses and reports what it finds.
        return Ok(InputKind::Jets);
    }
    let v: serde_json::Value = serde_json::from_slice(&first)
        .with_context(|| format!("{}:1: not a JSON line", path.display()))?;
    if v.get("type").and_then(|t| t.as_str()) == Some("header") {
        Ok(InputKind::Jets)
    } else if v.get("kind").is_some() || v.get("ts_ms").is_some() || v.get("pid").is_some() {
        Ok(InputKind::Denet)
    } else {
        bail!("{}:1: neither a JETS header nor a denet record", path.display())
    }
}

/// Runs `jets stats`.
pub fn run(args: Args) -> Result<ExitCode> {
    if args.format == Format::Parquet {
        return parquet(&args);
    }
    if args.output.is_some() {
        bail!("-o is for --format parquet; the other formats print to standard output");
    }
    let [file] = &args.files[..] else {
        bail!("{} files given: several traces need --format parquet -o FILE", args.files.len())
    };
    match detect(file)? {
        InputKind::Jets => {
            let stats = trace::TraceStats::from_path(file)?;
            let host = host::HostStats::from_path(file, &args.instruction_type)?;
            match args.format {
                Format::Human => {
                    print!("{}", stats.to_text());
                    if let Some(h) = &host {
                        print!("{}", h.to_text());
                    }
                }
                Format::Json => {
                    let mut v = stats.to_json();
                    if let (Some(h), Some(obj)) = (&host, v.as_object_mut()) {
                        obj.insert("host".into(), h.to_json());
                    }
                    println!("{}", serde_json::to_string_pretty(&v)?)
                }
                Format::Parquet => bail!("internal error: parquet is written above"),
            }
            Ok(ExitCode::SUCCESS)
        }
        InputKind::Denet => {
            let denet_file = denet::read(file)?;
            let summary = denet::summarize(&denet_file, file)?;
            match args.format {
                Format::Human => print!("{}", denet::to_text(&summary, file)),
                Format::Json => println!("{}", serde_json::to_string_pretty(&summary)?),
                Format::Parquet => bail!("internal error: parquet is written above"),
            }
            Ok(ExitCode::SUCCESS)
        }
    }
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
    bail!("this jets was built without the `parquet` feature (a default feature of jets-cli)")
}
