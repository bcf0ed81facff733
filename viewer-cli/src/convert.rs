//! `jets convert FILE --to FORMAT -o OUT`: a JETS trace into a format other viewers read.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::ValueEnum;

use crate::formats;

/// The formats `jets convert` writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Target {
    /// Chrome trace JSON (object form) for chrome://tracing and the Perfetto UI.
    Chrome,
    /// Perfetto protobuf trace.
    Perfetto,
    /// Kanata log for the Konata pipeline viewer.
    Kanata,
    /// DFTracer JSON lines (gzip when OUT ends in .gz).
    Dftracer,
    /// Linaro MAP JSON export of the trace's host samples (spec/host-sync.md), over `--windows`.
    Map,
    /// One run of a Parquet dataset: OUT is the dataset directory, the run goes to
    /// OUT/run=NAME/ (spec/parquet.md).
    Parquet,
}

/// Arguments of `jets convert`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The JETS trace to convert.
    pub input: PathBuf,
    /// The format to write.
    #[arg(long = "to", value_enum)]
    pub to: Target,
    /// The file to write (`-` for standard output); for Parquet, the dataset directory.
    #[arg(short, long)]
    pub output: PathBuf,
    /// Parquet: the run's name in the dataset (default: the file name without its suffixes).
    #[arg(long)]
    pub run: Option<String>,
    /// Kanata: the record_type whose records become instructions.
    #[arg(long, default_value = "Instruction")]
    pub record_type: String,
    /// MAP: the number of sample windows.
    #[arg(long, default_value_t = 100)]
    pub windows: usize,
}

/// Runs `jets convert`.
pub fn run(args: Args) -> Result<ExitCode> {
    let result = convert(&args);
    // A Parquet export cleans up after itself and must never remove what OUT was before.
    if result.is_err() && args.output != Path::new("-") && args.to != Target::Parquet {
        // A half-written file would pass for a whole one: remove it.
        let _ = std::fs::remove_file(&args.output);
    }
    result.with_context(|| {
        format!("converting {} to {:?} {}", args.input.display(), args.to, args.output.display())
    })?;
    Ok(ExitCode::SUCCESS)
}

fn convert(args: &Args) -> Result<()> {
    if args.to == Target::Parquet {
        return parquet(args);
    }
    let out = open_output(&args.output)?;
    match args.to {
        Target::Chrome => formats::chrome::convert(&args.input, out),
        Target::Perfetto => formats::perfetto::convert(&args.input, out),
        Target::Kanata => formats::kanata::convert(&args.input, out, &args.record_type),
        Target::Dftracer => formats::dftracer::convert(&args.input, out),
        Target::Map => formats::map::convert(&args.input, out, args.windows),
        Target::Parquet => parquet(args),
    }
}

#[cfg(feature = "parquet")]
fn parquet(args: &Args) -> Result<()> {
    use std::io::Write as _;
    let (dir, n) = formats::parquet::convert(&args.input, &args.output, args.run.as_deref())?;
    let mut o = std::io::stdout().lock();
    say!(
        o,
        "{}: {} records ({} unended), {} events, {} annotations, {} host samples",
        dir.display(),
        n.records,
        n.unended,
        n.events,
        n.annotations,
        n.host_samples
    );
    Ok(())
}

#[cfg(not(feature = "parquet"))]
fn parquet(_: &Args) -> Result<()> {
    anyhow::bail!(
        "this jets was built without the `parquet` feature: build it with `cargo build --release -p jets-cli --features parquet`"
    )
}

/// Where a converter writes: a file or standard output, gzip-compressed when the name ends in
/// `.gz`. [`Output::finish`] must be called: it completes the gzip stream and reports write errors
/// that a drop would swallow.
pub enum Output {
    /// Uncompressed.
    Plain(BufWriter<Box<dyn Write>>),
    /// Gzip.
    Gzip(flate2::write::GzEncoder<BufWriter<Box<dyn Write>>>),
}

impl Output {
    /// Writes everything out, completing the gzip stream.
    pub fn finish(self) -> Result<()> {
        match self {
            Output::Plain(mut w) => w.flush().context("writing the output"),
            Output::Gzip(g) => {
                let mut w = g.finish().context("completing the gzip output")?;
                w.flush().context("writing the output")
            }
        }
    }
}

impl Write for Output {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Output::Plain(w) => w.write(buf),
            Output::Gzip(w) => w.write(buf),
        }
    }
    fn write_all(&mut self, buf: &[u8]) -> std::io::Result<()> {
        match self {
            Output::Plain(w) => w.write_all(buf),
            Output::Gzip(w) => w.write_all(buf),
        }
    }
    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Output::Plain(w) => w.flush(),
            Output::Gzip(w) => w.flush(),
        }
    }
}

/// Opens the output: standard output for `-`, gzip when the name ends in `.gz`.
pub fn open_output(path: &Path) -> Result<Output> {
    let inner: Box<dyn Write> = if path == Path::new("-") {
        Box::new(std::io::stdout().lock())
    } else {
        Box::new(File::create(path).with_context(|| format!("creating {}", path.display()))?)
    };
    let w = BufWriter::with_capacity(1 << 20, inner);
    if path.extension().is_some_and(|e| e == "gz") {
        Ok(Output::Gzip(flate2::write::GzEncoder::new(w, flate2::Compression::default())))
    } else {
        Ok(Output::Plain(w))
    }
}
