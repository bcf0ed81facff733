//! `jets validate`: check traces against JETS 2.0 and print rustc-style or JSON diagnostics.

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use anyhow::{anyhow, bail, Context};
use jets_read::validate::{Diagnostic, Report, Rule, Validator};
use jets_read::Reader;
use serde_json::json;

use crate::out::{error_chain, is_broken_pipe, Format, Out};
use crate::progress::Progress;

/// Arguments of `jets validate`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Exit status: 0 valid, 1 invalid (or warnings with --strict), 2 usage or I/O error.\n\
                        Rule codes and their meaning: spec/rules.md."
)]
pub struct Args {
    /// Output format: rustc-style for people, or one JSON object per diagnostic then one summary
    /// object per file (JSON Lines).
    #[arg(long, value_enum, default_value_t = Format::Human)]
    format: Format,
    /// Treat warnings as failures (exit 1).
    #[arg(long)]
    strict: bool,
    /// Stop checking a file after N errors.
    #[arg(long, value_name = "N")]
    max_errors: Option<u64>,
    /// Do not report a rule (repeatable), e.g. `--allow W013`.
    #[arg(long, value_name = "CODE")]
    allow: Vec<String>,
    /// Follow a trace that is still being written: report lines as they arrive, wait for a line
    /// being written, end at the footer or on Ctrl-C.
    #[arg(long)]
    follow: bool,
    /// Traces (`-` for stdin; .gz, .zst and .br are decompressed).
    #[arg(required = true, value_name = "FILE")]
    files: Vec<PathBuf>,
}

/// Runs `jets validate`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let mut allowed = Vec::new();
    for code in &args.allow {
        match Rule::from_code(code) {
            Some(r) => allowed.push(r),
            None => bail!("--allow {code}: no such rule (codes are E001..E020 and W001..W013)"),
        }
    }
    if args.follow && args.files.len() != 1 {
        bail!("--follow takes exactly one file");
    }
    let mut worst = 0u8;
    for file in &args.files {
        let code = match check_file(&args, &allowed, file) {
            Ok(report) => verdict(&report, args.strict),
            Err(e) if is_broken_pipe(&e) => return Err(e),
            Err(e) => {
                eprintln!("jets: error: {}", error_chain(&e));
                2
            }
        };
        worst = worst.max(code);
    }
    Ok(ExitCode::from(worst))
}

fn verdict(report: &Report, strict: bool) -> u8 {
    if report.errors > 0 || (strict && report.warnings > 0) {
        1
    } else {
        0
    }
}

fn check_file(args: &Args, allowed: &[Rule], file: &Path) -> anyhow::Result<Report> {
    let name = file.display().to_string();
    let mut reader = if args.follow {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        ctrlc::set_handler(move || flag.store(true, Ordering::Relaxed))
            .context("installing the Ctrl-C handler for --follow")?;
        // The reader's errors name the file and the cause; `anyhow!` keeps the cause from being
        // printed twice.
        Reader::follow(file, stop).map_err(|e| anyhow!("{e}"))?
    } else {
        Reader::open(file).map_err(|e| anyhow!("{e}"))?
    };
    let progress = if args.follow {
        Progress::bytes(None, &name)
    } else {
        Progress::bytes(reader.source_len(), &name)
    };
    let mut validator = Validator::new().stop_at_footer(args.follow).on_progress(progress.setter());
    for r in allowed {
        validator = validator.allow(*r);
    }
    if let Some(n) = args.max_errors {
        validator = validator.max_errors(n);
    }
    let mut out = Out::stdout();
    let mut write_error = None;
    let follow = args.follow;
    let report = validator.run(&mut reader, |d| {
        let printed = match args.format {
            Format::Human => write_human(&mut out, &name, &d),
            Format::Json => write_json_diag(&mut out, &name, &d),
        };
        // Following a live trace, diagnostics appear as the lines arrive.
        let printed =
            printed.and_then(|()| if follow { io::Write::flush(&mut out) } else { Ok(()) });
        if let Err(e) = printed {
            write_error.get_or_insert(e);
        }
    });
    progress.finish();
    let report = report.map_err(|e| anyhow!("{e}"))?;
    match args.format {
        Format::Human => write_human_summary(&mut out, &name, &report),
        Format::Json => write_json_summary(&mut out, &name, &report),
    }
    .context("writing to standard output")?;
    out.finish()?;
    if let Some(e) = write_error {
        return Err(e).context("writing to standard output");
    }
    Ok(report)
}

/// Prints a diagnostic like rustc does: header, location, the line with a caret, note, help.
fn write_human(out: &mut dyn Write, file: &str, d: &Diagnostic) -> io::Result<()> {
    writeln!(out, "{}[{}]: {}", d.level(), d.rule.code(), d.message)?;
    let gutter = d.line.to_string().len();
    let pad = " ".repeat(gutter);
    writeln!(out, "{pad}--> {file}:{}:{}", d.line, d.column)?;
    if !d.source.is_empty() {
        let (shown, caret) = window(&d.source, d.column as usize);
        writeln!(out, "{pad} |")?;
        writeln!(out, "{} | {shown}", d.line)?;
        writeln!(out, "{pad} | {}^", " ".repeat(caret))?;
    }
    if let Some(n) = &d.note {
        writeln!(out, "note: {}", n.message)?;
        writeln!(out, "{pad}--> {file}:{}", n.line)?;
    }
    if let Some(h) = d.help {
        writeln!(out, "{pad} = help: {h}")?;
    }
    writeln!(out)
}

/// At most 100 characters of `source` around byte column `column`, and the caret's position in
/// characters within what is shown.
fn window(source: &str, column: usize) -> (String, usize) {
    const WIDTH: usize = 100;
    let at = column.saturating_sub(1).min(source.len());
    let at = (0..=at).rev().find(|i| source.is_char_boundary(*i)).unwrap_or(0);
    let chars_before = source[..at].chars().count();
    let total = source.chars().count();
    let start = chars_before.saturating_sub(WIDTH / 2).min(total.saturating_sub(WIDTH));
    let mut shown: String = source.chars().skip(start).take(WIDTH).collect();
    let mut caret = chars_before - start;
    if start > 0 {
        shown.insert(0, '…');
        caret += 1;
    }
    if start + WIDTH < total {
        shown.push('…');
    }
    (shown, caret)
}

fn write_human_summary(out: &mut dyn Write, file: &str, r: &Report) -> io::Result<()> {
    let c = &r.counts;
    let plural = |n: u64, w: &str| format!("{n} {w}{}", if n == 1 { "" } else { "s" });
    let what = format!(
        "{}, {}, {}, {}",
        plural(c.lines, "line"),
        plural(c.records, "record"),
        plural(c.events, "event"),
        plural(c.annotations, "annotation")
    );
    if r.errors == 0 && r.warnings == 0 {
        writeln!(out, "{file}: valid ({what})")
    } else {
        let verdict = if r.errors == 0 { "valid with warnings" } else { "invalid" };
        let stopped = if r.stopped_early { "; stopped early (--max-errors)" } else { "" };
        writeln!(
            out,
            "{file}: {verdict}: {}, {} ({what}){stopped}",
            plural(r.errors, "error"),
            plural(r.warnings, "warning")
        )
    }
}

fn write_json_diag(out: &mut dyn Write, file: &str, d: &Diagnostic) -> io::Result<()> {
    let mut v = json!({
        "type": "diagnostic",
        "file": file,
        "code": d.rule.code(),
        "severity": d.level().as_str(),
        "line": d.line,
        "column": d.column,
        "offset": d.offset,
        "message": d.message,
    });
    if let Some(n) = &d.note {
        v["note"] = json!({ "line": n.line, "message": n.message });
    }
    if let Some(h) = d.help {
        v["help"] = json!(h);
    }
    serde_json::to_writer(&mut *out, &v)?;
    writeln!(out)
}

fn write_json_summary(out: &mut dyn Write, file: &str, r: &Report) -> io::Result<()> {
    let v = json!({
        "type": "summary",
        "file": file,
        "valid": r.is_valid(),
        "errors": r.errors,
        "warnings": r.warnings,
        "lines": r.counts.lines,
        "records": r.counts.records,
        "record_ends": r.counts.record_ends,
        "annotations": r.counts.annotations,
        "events": r.counts.events,
        "open_records": r.open_records,
        "footer": r.footer,
        "bytes": r.bytes,
        "ids_tracked": r.ids_tracked,
        "ids_bytes": r.ids_bytes,
        "stopped_early": r.stopped_early,
    });
    serde_json::to_writer(&mut *out, &v)?;
    writeln!(out)
}

#[cfg(test)]
mod tests {
    use super::window;

    #[test]
    fn window_keeps_the_caret_under_the_column() {
        let (s, c) = window("abc", 2);
        assert_eq!((s.as_str(), c), ("abc", 1));
        let long: String = "x".repeat(300) + "é" + &"y".repeat(300);
        let (s, c) = window(&long, 301);
        assert_eq!(s.chars().nth(c), Some('é'));
        assert!(s.starts_with('…') && s.ends_with('…'));
    }
}
