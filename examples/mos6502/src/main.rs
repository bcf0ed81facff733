//! `mos6502-trace`: runs Klaus Dormann's 6502 functional test on the mos6502 crate, traced.
//!
//! ```text
//! mos6502-trace --program PATH [--trace OUT.jets] [--untraced] [--limit N]
//! mos6502-trace --program PATH --bench [--runs N] [--dir DIR]
//! ```
//!
//! `PATH` is `tests/assets/6502_functional_test.bin` in the mos6502 crate's package, e.g.
//! `$(cargo metadata --format-version 1 | jq -r '.packages[] | select(.name=="mos6502") |
//! .manifest_path' | xargs dirname)/tests/assets/6502_functional_test.bin`.
//! The trace reads `JETS_CAPTURE`. `--bench` runs the test untraced and in each capture mode, in
//! turns, each traced run between two untraced ones, and prints the slowdowns (the medians of
//! each traced run's time over the geometric mean of the untraced runs either side of it).
//! Built with `--no-default-features` (jets-sdk without `enabled`), the same bench measures the
//! instrumentation compiled out.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{anyhow, bail, Context, Result};
use jets::capture::{Capture, Recorder};
use jets_example_mos6502::{builder, run, Run};

struct Args {
    program: PathBuf,
    trace: PathBuf,
    untraced: bool,
    limit: Option<u64>,
    bench: bool,
    runs: usize,
    dir: PathBuf,
}

fn args() -> Result<Args> {
    let mut a = Args {
        program: PathBuf::new(),
        trace: PathBuf::from("mos6502.jets"),
        untraced: false,
        limit: None,
        bench: false,
        runs: 3,
        dir: std::env::temp_dir(),
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut value = |name: &str| it.next().ok_or_else(|| anyhow!("{name} needs a value"));
        match arg.as_str() {
            "--program" => a.program = value("--program")?.into(),
            "--trace" => a.trace = value("--trace")?.into(),
            "--untraced" => a.untraced = true,
            "--limit" => a.limit = Some(value("--limit")?.parse().context("--limit")?),
            "--bench" => a.bench = true,
            "--runs" => a.runs = value("--runs")?.parse().context("--runs")?,
            "--dir" => a.dir = value("--dir")?.into(),
            "-h" | "--help" => {
                println!(
                    "mos6502-trace --program PATH [--trace OUT.jets] [--untraced] [--limit N]\n\
                     mos6502-trace --program PATH --bench [--runs N] [--dir DIR]"
                );
                std::process::exit(0);
            }
            other => bail!("unknown argument {other:?} (see --help)"),
        }
    }
    if a.program.as_os_str().is_empty() {
        bail!(
            "--program PATH is required: the functional test image the mos6502 crate ships, \
             tests/assets/6502_functional_test.bin in its package"
        );
    }
    Ok(a)
}

fn main() -> ExitCode {
    match main_result() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("mos6502-trace: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn main_result() -> Result<()> {
    let a = args()?;
    let program = std::fs::read(&a.program)
        .with_context(|| format!("reading the test image {}", a.program.display()))?;
    if program.len() != 0x10000 {
        bail!("{}: {} bytes, not a 64 KiB 6502 memory image", a.program.display(), program.len());
    }
    if a.bench {
        return bench(&program, &a);
    }
    let trace = (!a.untraced).then_some(a.trace.as_path());
    let r = run(&program, trace, builder(None), a.limit).map_err(|e| anyhow!("{e}"))?;
    report(&r, a.limit.is_none());
    if let Some(s) = &r.summary {
        println!(
            "trace {}: {} records, {} events, {} bytes; left out {} records, {} events; {} dumps",
            a.trace.display(),
            s.records,
            s.events,
            s.bytes,
            s.left_out.records,
            s.left_out.events,
            s.dumps
        );
        if s.counted.total() > 0 {
            // JETS_CAPTURE with `count`: what the setting would have written.
            println!(
                "counted, not written: {} records, {} events, {} record ends",
                s.counted.records, s.counted.events, s.counted.record_ends
            );
        }
    }
    Ok(())
}

fn report(r: &Run, whole: bool) {
    println!(
        "{} after {} instructions, {} cycles, {:.3} s ({:.1} ns per instruction)",
        if whole { "functional test PASSED" } else { "stopped at the limit" },
        r.instructions,
        r.cycles,
        r.took.as_secs_f64(),
        r.took.as_nanos() as f64 / r.instructions.max(1) as f64
    );
}

fn bench(program: &[u8], a: &Args) -> Result<()> {
    let path = a.dir.join("mos6502-bench.jets");
    // Each round on a stack of its own layout, as `jets bench` does (`jets_host::layout`).
    let once = |capture: Option<&Capture>, round: usize| -> Result<Run> {
        // The previous file goes outside the timing (freeing a large file's pages is the last
        // run's cost).
        match std::fs::remove_file(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(e).with_context(|| format!("removing {}", path.display()));
            }
            _ => {}
        }
        let trace = capture.map(|_| path.as_path());
        jets_host::layout::run_at(round, || {
            run(program, trace, builder(capture.cloned()), a.limit).map_err(|e| anyhow!("{e}"))
        })
    };
    let first = once(None, 0)?;
    report(&first, a.limit.is_none());
    let cycles = first.cycles;
    let mid = cycles / 2;
    let modes: [(&str, Capture); 4] = [
        ("capture off", Capture { off: true, ..Capture::default() }),
        (
            "window of 1% of the cycles",
            Capture { window: Some(mid..mid + cycles / 100), ..Capture::default() },
        ),
        (
            "sample, 1 of 100 instructions",
            Capture { samples: vec![("Instruction".to_owned(), 100)], ..Capture::default() },
        ),
        (
            "flight recorder, 100 k cycles",
            Capture { recorder: Some(Recorder::Cycles(100_000)), ..Capture::default() },
        ),
    ];
    // Each traced run between two untraced ones (untraced, a mode, untraced, the next mode, ...,
    // untraced), its ratio taken against their geometric mean, as `jets bench` does: the host's
    // speed drifts between runs a few seconds apart.
    let mut untraced = Vec::new();
    let mut ratios: Vec<Vec<f64>> = vec![Vec::new(); modes.len()];
    let mut closing: Vec<Vec<f64>> = vec![Vec::new(); modes.len()];
    let mut waited: Vec<Vec<f64>> = vec![Vec::new(); modes.len()];
    let mut bytes = vec![0u64; modes.len()];
    for round in 0..a.runs.max(1) {
        let mut before = once(None, round)?.took.as_secs_f64();
        untraced.push(before);
        for (i, (_, c)) in modes.iter().enumerate() {
            let r = once(Some(c), round)?;
            let after = once(None, round)?.took.as_secs_f64();
            untraced.push(after);
            ratios[i].push(r.took.as_secs_f64() / (before * after).sqrt());
            before = after;
            closing[i].push(r.closing.as_secs_f64());
            waited[i].push(r.summary.as_ref().map_or(0.0, |s| s.waited_for_room.as_secs_f64()));
            bytes[i] = r.summary.map_or(0, |s| s.bytes);
        }
    }
    let _ = std::fs::remove_file(&path);
    let base = median(&mut untraced);
    println!(
        "\nuntraced: {base:.3} s (median of {} runs); slowdown = traced / the untraced runs either \
         side of it (median of {}):",
        untraced.len(),
        a.runs
    );
    if !jets::COMPILED_IN {
        // `--no-default-features`: what the instrumentation costs when it does nothing at all.
        println!(
            "  (tracing compiled out: every mode below writes nothing but a header and footer)"
        );
    }
    for (i, (name, _)) in modes.iter().enumerate() {
        let slowdown = median(&mut ratios[i]);
        // The close writes what the writer still holds: a flight recorder's whole window.
        let c = median(&mut closing[i]);
        // How long the emulator waited for room in its ring: the writer's pace.
        let w = median(&mut waited[i]);
        println!(
            "  {name:<32} {:>6.2}x   {:>10} bytes written, closing {c:.3} s, waiting for room \
             {w:.3} s",
            slowdown, bytes[i]
        );
    }
    Ok(())
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}
