//! `jets demo [--out DIR]`: the bundled example simulator, end to end.
//!
//! Runs example 1 of `jets-examples` (a cycle-accurate 5-stage RV32I pipeline sorting an array)
//! with tracing on, checks the program's result, validates the trace, prints its statistics and
//! the simulation speed, writes the Chrome, Kanata and Gantt HTML exports next to it, and says
//! what to open with what. Everything goes through the same modules as `jets validate`, `jets
//! stats`, `jets convert` and `jets gantt`.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use jets_examples::pipeline::{self, programs, traced, Program};
use jets_read::validate::Validator;
use jets_read::Reader;

use crate::convert::open_output;
use crate::formats::{chrome, kanata};
use crate::view::build;

/// Arguments of `jets demo`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Directory for the trace and its exports (created if missing).
    #[arg(long, default_value = "jets-demo")]
    pub out: PathBuf,
    /// Words of the array the simulated program sorts (up to 64: the Gantt page holds every record).
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u32).range(2..=64))]
    pub words: u32,
}

/// The files the demo writes, in the order it writes them.
pub const TRACE: &str = "pipeline.jets";
/// Chrome trace JSON.
pub const CHROME: &str = "pipeline.chrome.json";
/// Kanata log for Konata.
pub const KANATA: &str = "pipeline.kanata.log";
/// Self-contained Gantt page.
pub const GANTT: &str = "pipeline.gantt.html";

/// Runs `jets demo`.
pub fn run(args: Args) -> Result<ExitCode> {
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("creating {}", args.out.display()))?;
    let trace = args.out.join(TRACE);
    let program = programs::bubble_sort(&programs::random_words(args.words as usize, 1))?;
    let mut o = std::io::stdout().lock();

    say!(o, "== 1. simulate: Tiny5, a cycle-accurate in-order 5-stage RV32I pipeline");
    say!(
        o,
        "   program: {} (real RV32I machine code, {} instructions)",
        program.name,
        program.code.len()
    );
    let options = traced::Options::default();
    let outcome = traced::run_to_file(&trace, &program, &options)
        .with_context(|| format!("running {} into {}", program.name, trace.display()))?;
    let s = &outcome.stats;
    say!(o, "   result checked: {}", outcome.verified);
    say!(
        o,
        "   {} cycles, {} instructions retired (IPC {:.2}), {} squashed by branches and halt",
        s.cycles,
        s.retired,
        s.retired as f64 / s.cycles.max(1) as f64,
        s.squashed
    );
    say!(
        o,
        "   {} load-use stalls, {} data-cache misses ({} stall cycles), {} operands forwarded",
        s.load_use_stalls,
        s.dcache_misses,
        s.mem_stall_cycles,
        s.forwards
    );
    let secs = outcome.sim_time.as_secs_f64().max(1e-9);
    // Lines made: written, or counted instead (`JETS_CAPTURE=count`).
    let lines = outcome.summary.records
        + outcome.summary.record_ends
        + outcome.summary.events
        + outcome.summary.annotations
        + outcome.summary.counted.total();
    say!(o,
        "   simulation speed with tracing on: {:.0} cycles/s, {:.0} instructions/s, {:.0} trace lines/s",
        s.cycles as f64 / secs,
        s.retired as f64 / secs,
        lines as f64 / secs
    );
    let untraced = untraced_time(&program, &options)?;
    say!(
        o,
        "   the same run without tracing: {:.0} cycles/s ({:.1}x slower traced, {:.0} ns per trace line)",
        s.cycles as f64 / untraced.as_secs_f64().max(1e-9),
        secs / untraced.as_secs_f64().max(1e-9),
        (secs - untraced.as_secs_f64()).max(0.0) * 1e9 / lines.max(1) as f64
    );
    match &outcome.host {
        traced::HostOutcome::Sampled { samples, overhead } => {
            say!(o,
            "   host collector: {samples} HostSync sync points, sampler cost {:.2}% of one core",
            overhead * 100.0
        )
        }
        traced::HostOutcome::Unavailable(why) => say!(o, "   host collector unavailable: {why}"),
        traced::HostOutcome::Off => {}
    }

    say!(o, "\n== 2. validate {}", trace.display());
    let started = Instant::now();
    let mut reader = Reader::open(&trace).map_err(|e| anyhow!("{e}"))?;
    let mut problems = Vec::new();
    let report = Validator::new()
        .run(&mut reader, |d| problems.push(d.to_string()))
        .map_err(|e| anyhow!("{e}"))?;
    if !problems.is_empty() {
        for p in problems.iter().take(20) {
            eprintln!("{p}");
        }
        bail!(
            "{}: {} errors, {} warnings: the SDK wrote a trace that does not validate clean",
            trace.display(),
            report.errors,
            report.warnings
        );
    }
    say!(
        o,
        "   valid, no warnings: {} lines, {:.1} MB in {:.0} ms",
        report.counts.lines,
        report.bytes as f64 / 1e6,
        started.elapsed().as_secs_f64() * 1e3
    );

    say!(o, "\n== 3. jets stats {}", trace.display());
    let (stats, host) = crate::stats::read(&trace, "Instruction")?;
    put!(o, "{}", indent(&stats.to_text()));
    if let Some(host) = host {
        put!(o, "{}", indent(&host.to_text()));
    }

    say!(o, "\n== 4. export");
    let chrome_path = args.out.join(CHROME);
    chrome::convert(&trace, open_output(&chrome_path)?)
        .with_context(|| format!("writing {}", chrome_path.display()))?;
    let kanata_path = args.out.join(KANATA);
    // A capture setting may leave every instruction out (or count lines instead of writing
    // them): Konata's pipeline diagram then has nothing to show.
    let instructions = stats.records_of("Instruction") > 0;
    if instructions {
        kanata::convert(&trace, open_output(&kanata_path)?, "Instruction")
            .with_context(|| format!("writing {}", kanata_path.display()))?;
    } else {
        say!(o, "   Kanata log: not written, the trace holds no Instruction record");
    }
    let gantt_path = args.out.join(GANTT);
    write_gantt(&trace, &gantt_path)?;
    let exports = [
        (&chrome_path, "Chrome trace JSON"),
        (&kanata_path, "Kanata log"),
        (&gantt_path, "Gantt HTML page"),
    ];
    for (path, what) in exports.into_iter().filter(|(p, _)| instructions || *p != &kanata_path) {
        let bytes =
            std::fs::metadata(path).with_context(|| format!("reading {}", path.display()))?.len();
        say!(o, "   {:<18} {} ({:.1} MB)", what, path.display(), bytes as f64 / 1e6);
    }

    say!(o, "\n== what to open");
    let rows = [
        (GANTT, "in a web browser: units, instructions, stalls and misses as Gantt bars"),
        (CHROME, "in https://ui.perfetto.dev or chrome://tracing: the same as a timeline"),
        (KANATA, "in Konata (github.com/shioyadan/Konata): the pipeline diagram per instruction"),
        (TRACE, "the JETS trace itself: `jets tree`, `jets view`, `jets stats` read it"),
    ];
    for (file, what) in rows.into_iter().filter(|(f, _)| instructions || *f != KANATA) {
        say!(o, "   {:<40} {what}", args.out.join(file).display());
    }
    say!(o,
        "\n   Next: instrument your own simulator; see README.md, \"From the demo to your simulator\"."
    );
    Ok(ExitCode::SUCCESS)
}

/// The fastest of three untraced runs of the same program (the simulator alone).
fn untraced_time(program: &Program, options: &traced::Options) -> Result<Duration> {
    let mut best = Duration::MAX;
    for _ in 0..3 {
        let start = Instant::now();
        let (machine, _) = pipeline::run(program, options.cache, options.max_cycles)?;
        best = best.min(start.elapsed());
        program.verify(&machine)?;
    }
    Ok(best)
}

/// The same page `jets gantt` writes.
fn write_gantt(trace: &Path, out: &Path) -> Result<()> {
    let shared = build::build_now(trace)?;
    let html = crate::gantt::page(&shared, u64::MAX)?;
    std::fs::write(out, html).with_context(|| format!("writing {}", out.display()))
}

fn indent(text: &str) -> String {
    text.lines().map(|l| format!("   {l}\n")).collect()
}
