//! The Tiny5 pipeline of `jets bench`, run once in one capture mode: for timing builds against
//! each other in alternating processes, and for instruction counts under callgrind.
//!
//! ```text
//! cargo run --release -p jets-examples --bin pipeline_modes -- MODE [WORDS] [OUT.jets] [CPU] [LAYOUT]
//! cargo run --release -p jets-examples --no-default-features --bin pipeline_modes -- off
//! ```
//!
//! The second form builds the examples without jets-sdk's `enabled` feature: the instrumentation
//! stays in the code and writes nothing, so `off` then measures what it costs compiled out.
//!
//! MODE is one of `jets bench`'s: `untraced`, `off`, `window` (1% of the run in its middle),
//! `sample` (1 in 100 instructions), `recorder` (100 k cycles, dumped at the end), `count`
//! (everything counted, nothing written) or `full`; or any `JETS_CAPTURE` setting (a MODE with
//! `=`): `recorder=N` for a window of N cycles, or `clk=A..B`, the window `window` writes in its
//! footer, without the untraced run it takes to find it.
//! WORDS is the size of the array the program sorts (default 1300, as `jets bench`); OUT the
//! trace (default `pipeline-modes.jets`, removed first). CPU, when given, is the CPU the simulator
//! runs on, pinned once its trace is open (`traced::timed_run`): a virtual machine's CPUs can
//! differ in speed by half, so compare builds on the same CPU. It prints the run's time, from opening
//! the trace to closing it, as `jets bench` times each run (`traced::timed_run`), and how much
//! of it closing took (a flight recorder writes its window then) and how long the simulator
//! waited for room in its ring (the writer set the pace then), what else the machine ran
//! meanwhile, in cores (`jets_host::load`: compare only runs beside none), and the round trip
//! between two cores taken just before the run (`jets_host::load::core_round_trip`: compare
//! runs with the cores as far apart); `window` first runs untraced, outside the timing, to learn
//! the run's length. LAYOUT (0 to 7, default 0) places the simulator's stack as `jets bench` does
//! in its round of that number (`jets_host::layout`): the run is on a thread of its own whose
//! stack lies at the same place in every process, since on the main thread, whose stack Linux
//! places at random, about one process in ten ran Tiny5 a fifth slower than the others.

use std::path::PathBuf;

use anyhow::{bail, Context};
use jets::capture::{Capture, Recorder};
use jets_examples::pipeline::{programs, traced};

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let mode = args.next().unwrap_or_else(|| "untraced".to_owned());
    let words: usize = match args.next() {
        Some(text) => text.parse().with_context(|| format!("array size {text:?}"))?,
        None => 1300,
    };
    let out = PathBuf::from(args.next().unwrap_or_else(|| "pipeline-modes.jets".to_owned()));
    let cpu: Option<usize> = match args.next() {
        Some(text) => Some(text.parse().with_context(|| format!("CPU {text:?}"))?),
        None => None,
    };
    let layout: usize = match args.next() {
        Some(text) => match text.parse() {
            Ok(n) if n < jets_host::layout::STACK_OFFSETS.len() => n,
            _ => bail!(
                "layout {text:?}: a number from 0 to {}",
                jets_host::layout::STACK_OFFSETS.len() - 1
            ),
        },
        None => 0,
    };
    // The same program as `jets bench` (its seed too).
    let program = programs::bubble_sort(&programs::random_words(words, 7))?;
    let capture = match mode.as_str() {
        "untraced" => None,
        "off" => Some(Capture { off: true, ..Capture::default() }),
        "window" => {
            let untraced = || traced::timed_run(&out, &program, None, cpu);
            let cycles = jets_host::layout::run_at(layout, untraced)?.cycles;
            let mid = cycles / 2;
            Some(Capture { window: Some(mid..mid + (cycles / 100).max(1)), ..Capture::default() })
        }
        "sample" => {
            Some(Capture { samples: vec![("Instruction".to_owned(), 100)], ..Capture::default() })
        }
        "recorder" => {
            Some(Capture { recorder: Some(Recorder::Cycles(100_000)), ..Capture::default() })
        }
        "count" => Some(Capture { count: true, ..Capture::default() }),
        "full" => Some(Capture::full()),
        // Any other setting, as `JETS_CAPTURE` gives it: `recorder=N`, or the window `window`
        // makes (its `clk=` in the footer) without the untraced run that finds it.
        other if other.contains('=') => Some(other.parse::<Capture>()?),
        other => {
            bail!("unknown mode {other:?}: untraced, off, window, sample, recorder, count, full, or a JETS_CAPTURE setting")
        }
    };
    // Before the run, untimed: how far apart the host has the cores now (the recorder and the
    // full trace depend on it).
    let trip = match jets_host::load::core_round_trip() {
        Some(ns) => format!("; cores' round trip {ns:.0} ns"),
        None => "; cores' round trip not measured (one CPU, or its two threads never ran at once)"
            .to_owned(),
    };
    let mut tally = jets_host::load::Tally::default();
    let once = || traced::timed_run(&out, &program, capture.as_ref(), cpu);
    let run = tally.during(|| jets_host::layout::run_at(layout, once))?;
    // Built with `--no-default-features`, every traced mode writes nothing: said beside the time.
    let built = if jets::COMPILED_IN || capture.is_none() { "" } else { " (tracing compiled out)" };
    // What else the machine ran meanwhile: a run beside another load is no comparison.
    let other = match tally.load() {
        Some(l) => format!("; other work {:.2} cores, steal {:.2}", l.others, l.steal),
        None => "; other work not measured".to_owned(),
    };
    // Where the simulator ran: pinned there, or where it happened to finish.
    let ran_on = match (cpu, run.cpu) {
        (Some(c), _) => format!("; on CPU {c}, pinned"),
        (None, Some(c)) => format!("; finished on CPU {c}, not pinned"),
        (None, None) => String::new(),
    };
    println!(
        "{mode}: {} cycles in {:.3} s, closing {:.3} s, waiting for room {:.3} s{built}{other}{trip}{ran_on}",
        run.cycles,
        run.took.as_secs_f64(),
        run.closing.as_secs_f64(),
        run.waited.as_secs_f64()
    );
    Ok(())
}
