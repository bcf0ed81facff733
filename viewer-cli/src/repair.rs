//! `jets repair IN -o OUT`: keep every complete valid line of a damaged trace, drop the rest, and
//! write a correct footer. IN is never modified.

use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{anyhow, bail, Context};
use jets_read::validate::{repair, RepairOptions};
use jets_read::Reader;

/// Arguments of `jets repair`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The damaged trace (`-` for stdin; .gz, .zst and .br are decompressed).
    #[arg(value_name = "IN")]
    input: PathBuf,
    /// Where to write the repaired trace (`-` for stdout; `.gz` is gzip-compressed).
    #[arg(short, long, value_name = "OUT")]
    output: PathBuf,
    /// End every record still open at the last clk of the trace (children before parents).
    #[arg(long)]
    end_open: bool,
}

/// Runs `jets repair`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let in_name = args.input.display().to_string();
    let out_name = args.output.display().to_string();
    if let (Some(a), Some(b)) = (identity(&args.input, true), identity(&args.output, false)) {
        if a == b {
            bail!(
                "{out_name} is the same file as the input {in_name}; repair never modifies its \
                 input, choose another output"
            );
        }
    }
    let mut reader = Reader::open(&args.input).map_err(|e| anyhow!("{e}"))?;
    let options = RepairOptions { end_open_records: args.end_open };
    let context = || format!("repairing {in_name} into {out_name}");
    let report = if args.output.as_os_str() == "-" {
        let mut out = io::stdout().lock();
        let report = repair(&mut reader, &mut out, options).with_context(context)?;
        out.flush().with_context(context)?;
        report
    } else {
        let file = File::create(&args.output).with_context(|| format!("creating {out_name}"))?;
        if out_name.ends_with(".gz") {
            let mut gz = flate2::write::GzEncoder::new(file, flate2::Compression::default());
            let report = repair(&mut reader, &mut gz, options).with_context(context)?;
            gz.finish().and_then(|f| f.sync_all()).with_context(context)?;
            report
        } else {
            let mut file = file;
            let report = repair(&mut reader, &mut file, options).with_context(context)?;
            file.sync_all().with_context(context)?;
            report
        }
    };
    let mut msg = format!("{in_name} -> {out_name}: kept {} lines", report.kept);
    if report.dropped > 0 {
        let lines: Vec<String> = report.dropped_lines.iter().map(u64::to_string).collect();
        let more = if report.dropped > lines.len() as u64 { ", ..." } else { "" };
        msg += &format!("; dropped {} invalid (lines {}{more})", report.dropped, lines.join(", "));
    }
    if report.torn_tail {
        msg += "; dropped the torn last line";
    }
    if report.truncated {
        msg += "; the input was cut short (a compressed stream without its end, or a file that \
                shrank while it was read)";
    }
    if report.header_added {
        msg += "; added a header (none was valid)";
    }
    if report.old_footers > 0 {
        msg += &format!("; replaced {} footer line(s)", report.old_footers);
    }
    if report.ended > 0 {
        msg += &format!("; ended {} open records", report.ended);
    }
    eprintln!("{msg}");
    Ok(ExitCode::SUCCESS)
}

/// The identity (device, inode) of the regular file behind `path`, or, for `-`, behind stdin
/// (`input`) or stdout. Compared by identity rather than by name, two names, links or redirections
/// of one file are the same (`jets repair - -o F < F`), so creating the output can never truncate
/// the input. Terminals and pipes have no identity here: `-` on both sides is fine.
fn identity(path: &Path, input: bool) -> Option<(u64, u64)> {
    use std::os::fd::AsFd;
    use std::os::unix::fs::MetadataExt;
    let meta = if path.as_os_str() == "-" {
        let fd = if input {
            io::stdin().as_fd().try_clone_to_owned()
        } else {
            io::stdout().as_fd().try_clone_to_owned()
        };
        File::from(fd.ok()?).metadata().ok()?
    } else {
        std::fs::metadata(path).ok()?
    };
    meta.is_file().then(|| (meta.dev(), meta.ino()))
}
