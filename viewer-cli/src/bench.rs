//! `jets bench [--format json] [--quick] [--rounds N]`: what tracing costs on this machine.
//!
//! * Producer cost per event (the native API: an event with two typed fields), on one and on two
//!   long-lived threads: each sample is the mean of a batch of calls timed together (one clock
//!   read per call would cost more than the call); p50 and p99 over the samples. Only the emitting
//!   calls are timed: between chunks the threads wait, untimed, for the writer to drain, as
//!   `sdk/benches/write.rs` does. This is the cost while the writer keeps up.
//! * End-to-end lines per second into a file: create, a record, eight events and an end per
//!   instruction, close (footer and all), timed from create to close.
//! * The `tracing` Layer: a span with two fields, created, entered, exited and closed.
//! * Validation throughput over the end-to-end file, warm in the page cache, on every core.
//! * Many threads: the same instructions (a record with six fields, five events, its end) made
//!   by one thread and by [`MANY`] threads into one trace written to nowhere, with everything
//!   counted, under a 100 k-cycle flight recorder, and with everything written; each figure
//!   (`threads_many_vs_1_count`, `_recorder`, `_full`) is the time the many threads took to
//!   make them over the time one took (the median of three alternated pairs): above 1, the
//!   writer keeps up less well with many threads than with one, whatever the machine's cores.
//! * What tracing costs a real simulator: the Tiny5 pipeline (what `jets demo` runs) sorting
//!   enough words for at least 10 M cycles (250 k with `--quick`), untraced, then traced into a
//!   file in six modes: capture off, a window of 1% of the run, a 1-in-100 sample of
//!   instructions, a 100 k-cycle flight recorder dumped at the end, everything counted but not
//!   written (`count`: every line made and handed to the writer, none kept, encoded or written:
//!   a floor under the recorder), and everything; slowdown = traced time / the geometric mean of
//!   the untraced runs just before and just after it (a round runs untraced, a mode, untraced,
//!   the next mode, ..., untraced), the median over rounds (`--rounds`, 3 unless given) in this
//!   process taken in turns (so a change of load weighs on every mode alike), each run from
//!   opening the trace to closing it;
//!   each round's ratios too (`pipeline_rounds`, with every untraced run in
//!   `untraced_runs_sec`), whose spread shows how steady the machine was.
//!   Each round's simulator runs pinned to one CPU, the next round's to the next CPU
//!   (`simulator_cpu`, none with one CPU): a round's untraced and traced runs on the same CPU,
//!   since a virtual machine's CPUs can differ in speed (`jets_host::load::Pinned`), and the
//!   report gives the untraced time on each. And each round's runs have their stack at that
//!   round's offset (`stack_offset`, bytes, `jets_host::layout`), the same in every process.
//!   Each mode runs once, untimed, before the first round (a VM's first trace files of a
//!   process cost it more).
//!   Beside "everything", a reference from the same rounds: writing as many bytes as the full
//!   trace has, the way a trace file is written but with nothing to encode
//!   (`slowdown_write_floor`): what the file's path alone costs (past 512 MiB that is the disk's
//!   pace, written around the page cache: `write_floor_direct`). And the time a
//!   cache line takes to go from one core to another and back (`core_round_trip_ns`), measured
//!   in each round just before the flight recorder: a traced run hands every line it keeps from
//!   the simulator's core to the writer's, and on a shared host that time changes by several
//!   times as the host moves the machine's cores about.
//!   The flight recorder's time is also split at its close: the slowdown up to it
//!   (`slowdown_recorder_running`, what a simulator pays while it runs with the recorder on) and
//!   the close itself (`recorder_dump_sec`, `recorder_dump_bytes`: writing the window, about
//!   half a million lines), which a run pays once per dump. For the recorder and the full trace,
//!   how long the simulator waited for room in its ring (`recorder_wait_sec`, `full_wait_sec`:
//!   `jets::Summary::waited_for_room`), the part of the run whose pace the writer set.
//!   And what else the machine ran during each round's timed runs (`other_cpu_cores`,
//!   `steal_cpu_cores`, `jets_host::load`): the report says when it was busy ([`BUSY_CORES`]).

use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Barrier;
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use jets::{Metadata, RecordHandle, Trace, TraceBuilder};
use jets_host::load::{core_round_trip, OtherLoad, Tally};
use jets_read::validate::Validator;
use jets_read::Reader;
use serde_json::{json, Value};
use tracing_subscriber::layer::SubscriberExt;

use crate::out::Format;

/// Arguments of `jets bench`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    pub format: Format,
    /// Small sizes (about a second): rougher figures, for a smoke test.
    #[arg(long)]
    pub quick: bool,
    /// Directory for the end-to-end file (default: the system's temporary directory).
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Rounds of the Tiny5 runs (each round: untraced, then every mode with an untraced run
    /// after it); each slowdown is the median over the rounds. More rounds give a steadier
    /// median on a machine whose speed moves (a shared VM), at about 25 s a round.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u16).range(1..=99))]
    pub rounds: u16,
}

/// Work sizes.
struct Sizes {
    events_per_thread: u64,
    end_to_end_lines: u64,
    spans: u64,
    validate_runs: usize,
    /// Words bubble-sorted by the pipeline runs.
    sort_words: usize,
    /// Instructions of the many-threads figures (seven lines each), in all.
    thread_instructions: u64,
}

/// The threads of the many-threads figures: as many as a GPU simulator's SMs, or cores of a
/// many-core one, each tracing on its own thread.
const MANY: u64 = 64;

/// Calls timed together for one sample.
const BATCH: u64 = 32;
/// Events per thread between two drains of the writer: well below the ring's capacity.
const CHUNK: u64 = 1 << 13;

/// Runs `jets bench`.
pub fn run(args: Args) -> Result<ExitCode> {
    let sizes = if args.quick {
        Sizes {
            events_per_thread: 1 << 16,
            end_to_end_lines: 100_000,
            spans: 1 << 14,
            validate_runs: 2,
            sort_words: 200,
            thread_instructions: 64_000,
        }
    } else {
        Sizes {
            events_per_thread: 1 << 21,
            end_to_end_lines: 2_000_000,
            spans: 1 << 19,
            validate_runs: 5,
            sort_words: 1300,
            thread_instructions: 1_000_000,
        }
    };
    let human = args.format == Format::Human;
    let step = |what: &str| {
        if human {
            eprintln!("jets bench: {what}...");
        }
    };
    step("producer, one thread");
    let one = producer(Call::Event, 1, sizes.events_per_thread)?;
    step("producer, two threads");
    let two = producer(Call::Event, 2, sizes.events_per_thread)?;
    step("producer, fields given at once, one and two threads");
    let fields_one = producer(Call::EventFields, 1, sizes.events_per_thread)?;
    let fields_two = producer(Call::EventFields, 2, sizes.events_per_thread)?;
    step("producer, records of two worker threads");
    // A quarter as many calls: each makes two lines and a node, and the step stays short.
    let workers = producer(Call::WorkerRecord, 2, sizes.events_per_thread / 4)?;
    let dir = TempDir::new(args.dir.as_deref())?;
    step("end to end into a file");
    let (lines_per_sec, file, bytes_per_line) = end_to_end(dir.path(), sizes.end_to_end_lines)?;
    step("tracing Layer");
    let span_ns = layer(sizes.spans)?;
    step("validation");
    let gb_per_sec = validation(&file, sizes.validate_runs)?;
    step("many threads into one trace");
    let many = many_threads(sizes.thread_instructions)?;
    step("Tiny5 pipeline, untraced and in each capture mode");
    let sim = simulator(dir.path(), sizes.sort_words, usize::from(args.rounds))?;

    let cpus = thread::available_parallelism().map_or(1, |n| n.get());
    let mut report = json!({
        "producer_event_ns_p50_1_thread": round(one.p50),
        "producer_event_ns_p99_1_thread": round(one.p99),
        "producer_event_ns_p50_2_threads": round(two.p50),
        "producer_event_ns_p99_2_threads": round(two.p99),
        "producer_event_fields_ns_p50_1_thread": round(fields_one.p50),
        "producer_event_fields_ns_p99_1_thread": round(fields_one.p99),
        "producer_event_fields_ns_p50_2_threads": round(fields_two.p50),
        "producer_event_fields_ns_p99_2_threads": round(fields_two.p99),
        "producer_worker_record_ns_p50_2_threads": round(workers.p50),
        "producer_worker_record_ns_p99_2_threads": round(workers.p99),
        "end_to_end_lines_per_sec": lines_per_sec.round(),
        "end_to_end_bytes_per_line": round(bytes_per_line),
        "layer_span_ns": round(span_ns),
        "validation_gb_per_sec": round(gb_per_sec),
        "pipeline_cycles": sim.cycles,
        "pipeline_untraced_sec": round3(sim.untraced),
        "cpus": cpus,
        "cpu_model": cpu_model(),
        "quick": args.quick,
    });
    for ((_, key, _), s) in MODES.iter().zip(sim.slowdown) {
        report[*key] = json!(round(s));
    }
    for (key, ratio) in many {
        report[format!("threads_many_vs_1_{key}")] = json!(round(ratio));
    }
    report["threads_many"] = json!(MANY);
    report["full_trace_bytes"] = json!(sim.full_bytes);
    report["write_floor_direct"] = json!(sim.full_direct);
    report["slowdown_write_floor"] = json!(round(sim.write_floor));
    report["core_round_trip_ns"] = json!(sim.core_round_trip_ns.map(round));
    report["slowdown_recorder_running"] = json!(round(sim.recorder_running));
    report["recorder_dump_sec"] = json!(round3(sim.recorder_dump));
    report["recorder_dump_bytes"] = json!(sim.recorder_bytes);
    report["recorder_wait_sec"] = json!(round3(sim.recorder_wait));
    report["full_wait_sec"] = json!(round3(sim.full_wait));
    report["other_cpu_cores"] = json!(sim.other.map(|o| round3(o.others)));
    report["steal_cpu_cores"] = json!(sim.other.map(|o| round3(o.steal)));
    let mut rounds = json!({
        "untraced_sec": sim
            .rounds
            .iter()
            .map(|r| percentiles(r.untraced.clone()).map_or(f64::NAN, |p| round3(p.p50)))
            .collect::<Vec<_>>(),
        "untraced_runs_sec": sim
            .rounds
            .iter()
            .map(|r| r.untraced.iter().copied().map(round3).collect::<Vec<_>>())
            .collect::<Vec<_>>(),
        "slowdown_write_floor": sim.rounds.iter().map(|r| round(r.write_floor)).collect::<Vec<_>>(),
        "core_round_trip_ns":
            sim.rounds.iter().map(|r| r.core_round_trip_ns.map(round)).collect::<Vec<_>>(),
        "slowdown_recorder_running":
            sim.rounds.iter().map(|r| round(r.recorder_running)).collect::<Vec<_>>(),
        "recorder_dump_sec": sim.rounds.iter().map(|r| round3(r.recorder_dump)).collect::<Vec<_>>(),
        "recorder_wait_sec": sim.rounds.iter().map(|r| round3(r.recorder_wait)).collect::<Vec<_>>(),
        "full_wait_sec": sim.rounds.iter().map(|r| round3(r.full_wait)).collect::<Vec<_>>(),
        "other_cpu_cores":
            sim.rounds.iter().map(|r| r.other.map(|o| round3(o.others))).collect::<Vec<_>>(),
        "steal_cpu_cores":
            sim.rounds.iter().map(|r| r.other.map(|o| round3(o.steal))).collect::<Vec<_>>(),
        "simulator_cpu": sim.rounds.iter().map(|r| r.cpu).collect::<Vec<_>>(),
        "stack_offset": (0..sim.rounds.len()).map(jets_host::layout::offset).collect::<Vec<_>>(),
    });
    for (m, (_, key, _)) in MODES.iter().enumerate() {
        rounds[*key] = sim.rounds.iter().map(|r| round(r.slowdown[m])).collect();
    }
    report["pipeline_rounds"] = rounds;
    let mut out = crate::out::Out::stdout();
    match args.format {
        Format::Json => out.json(&report)?,
        Format::Human => out.text(&to_text(&report))?,
    }
    out.finish()?;
    Ok(ExitCode::SUCCESS)
}

/// [`MANY`] threads against one making `instructions` instructions (`jets_examples::threads`)
/// into one trace written to nowhere, in three capture modes: per mode, the median over three
/// alternated pairs of the time the many took to make them over the time one took.
fn many_threads(instructions: u64) -> Result<Vec<(&'static str, f64)>> {
    use jets::capture::{Capture, Recorder};
    let modes = [
        ("count", Capture { count: true, ..Capture::default() }),
        ("recorder", Capture { recorder: Some(Recorder::Cycles(100_000)), ..Capture::default() }),
        ("full", Capture::full()),
    ];
    let made = |c: &Capture, threads| -> Result<f64> {
        let run = jets_examples::threads::run(Some(c.clone()), threads, instructions, None)
            .with_context(|| format!("{threads} threads under {c}"))?;
        Ok(run.made.as_secs_f64())
    };
    let mut ratios = Vec::new();
    for (key, c) in modes {
        let mut pairs = Vec::new();
        for _ in 0..3 {
            let one = made(&c, 1)?;
            pairs.push(made(&c, MANY)? / one);
        }
        ratios.push((key, percentiles(pairs)?.p50));
    }
    Ok(ratios)
}

/// Three significant digits: a small figure (a debug build on a loaded machine) never reads 0.
fn round(x: f64) -> f64 {
    if x == 0.0 || !x.is_finite() {
        return x;
    }
    let scale = 10f64.powi(2 - x.abs().log10().floor() as i32);
    (x * scale).round() / scale
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

/// The Tiny5 figures: cycles per run, untraced seconds, and the slowdown of each mode of
/// [`MODES`]; and per round, the untraced seconds and each mode's slowdown against them.
struct Sim {
    cycles: u64,
    untraced: f64,
    slowdown: [f64; MODES.len()],
    rounds: Vec<Round>,
    /// The full trace's size, and the time to write that many bytes (no encoding) over the
    /// untraced run's ([`write_floor`]).
    full_bytes: u64,
    write_floor: f64,
    /// Whether those bytes went to disk around the page cache past its share (`O_DIRECT`,
    /// [`jets::write::StreamedFile::is_direct`]) in every round, as the full trace's did.
    full_direct: bool,
    /// The median of the rounds' [`core_round_trip`] (none with one CPU).
    core_round_trip_ns: Option<f64>,
    /// The flight recorder's run: the median time its close took (the window written), the
    /// file's size, and the median slowdown up to the close.
    recorder_dump: f64,
    recorder_bytes: u64,
    recorder_running: f64,
    /// The median time the simulator waited for room in its ring: in the flight recorder's runs
    /// and in the full trace's.
    recorder_wait: f64,
    full_wait: f64,
    /// The median of the rounds' other work on the machine (`jets_host::load`).
    other: Option<OtherLoad>,
}

/// One round of the Tiny5 runs: its untraced runs, and each mode's traced time divided by the
/// untraced runs either side of it (their geometric mean). The rounds' spread is the machine's
/// noise during the bench: on a shared machine a slow spell can double every time for minutes,
/// and a ratio from one round is then not comparable with a ratio from another run.
struct Round {
    /// The untraced times, in the order they ran: before the first mode, then after each.
    untraced: Vec<f64>,
    slowdown: [f64; MODES.len()],
    write_floor: f64,
    /// [`core_round_trip`] just before the round's flight recorder run.
    core_round_trip_ns: Option<f64>,
    /// The flight recorder's close (seconds), and its slowdown up to it.
    recorder_dump: f64,
    recorder_running: f64,
    /// The simulator's waits for room (seconds), in the recorder's run and the full trace's.
    recorder_wait: f64,
    full_wait: f64,
    /// What else the machine ran during the round's timed runs (`None`: not measurable here).
    other: Option<OtherLoad>,
    /// The CPU the round's simulator ran on, pinned (`None`: not pinned, with one CPU).
    cpu: Option<usize>,
}

/// The traced modes, in report order: what they are, their JSON member, and their targets on the
/// reference machine (none for the sample, which the issue sets no target for).
const MODES: [(&str, &str, Option<f64>); 6] = [
    ("capture off (compiled in)", "slowdown_disabled", Some(1.10)),
    ("window of 1% of the run", "slowdown_window_1pct", Some(1.5)),
    ("sample, 1 of 100 instructions", "slowdown_sample_1pct", None),
    ("flight recorder, 100 k cycles", "slowdown_recorder", Some(3.0)),
    ("everything, counted not written", "slowdown_count", None),
    ("everything", "slowdown_full", Some(8.0)),
];

fn simulator(dir: &Path, words: usize, runs: usize) -> Result<Sim> {
    use jets::capture::{Capture, Recorder};
    use jets_examples::pipeline::{programs, traced};
    let program = programs::bubble_sort(&programs::random_words(words, 7))
        .map_err(|e| anyhow!("assembling the benchmark program: {e}"))?;
    let path = dir.join("pipeline-bench.jets");
    // One run; `capture` None is untraced. The error names the trace file itself. Each round
    // runs on a stack of its own layout (`jets_host::layout`): the same in every process, and
    // another in each round, so that no one random placement of the stack sets every round.
    let once = |capture: Option<&Capture>, cpu: Option<usize>, round: usize| {
        jets_host::layout::run_at(round, || traced::timed_run(&path, &program, capture, cpu))
            .context("running the benchmark")
    };
    // Warms up, and gives the run's length for the window.
    let cycles = once(None, None, 0)?.cycles;

    // The CPU each round's simulator runs on, in turn over the CPUs this process may use:
    // untraced and traced runs of a round on the same one, since a virtual machine's CPUs can
    // differ in speed by half (`jets_host::load::Pinned`). Not pinned with one CPU.
    let cpus = jets_host::load::allowed_cpus().filter(|c| c.len() > 1).unwrap_or_default();
    let mut sim_cpus = Vec::with_capacity(runs);
    let mid = cycles / 2;
    let settings: [Capture; MODES.len()] = [
        Capture { off: true, ..Capture::default() },
        Capture { window: Some(mid..mid + (cycles / 100).max(1)), ..Capture::default() },
        Capture { samples: vec![("Instruction".to_owned(), 100)], ..Capture::default() },
        Capture { recorder: Some(Recorder::Cycles(100_000)), ..Capture::default() },
        Capture { count: true, ..Capture::default() },
        Capture::full(),
    ];
    // Each mode once more, untimed: on a virtual machine a process's first trace files can be
    // written much slower than its later ones (the 2-core Intel VM, 2026-12-02: the writer's
    // 256 KiB writes took 0.30-0.37 ms each in such a run against 0.06 ms, `strace`; fresh
    // page-cache memory, most likely), which made the first round's window and sample the
    // slowest of the bench in three runs of four, and its full trace too. The rounds measure the
    // steady state every round then shares.
    for c in &settings {
        settle_disk();
        once(Some(c), None, 0)?;
    }
    // Runs take turns (untraced, then each mode, `runs` times over), so that a change of the
    // machine's load during the bench weighs on every mode alike. Each traced run is bracketed:
    // timed between two untraced runs on the same CPU (the round's runs go untraced, a mode,
    // untraced, the next mode, ..., untraced), and compared with their geometric mean. On a
    // shared host whose speed drifts by a quarter within a minute, one untraced run per round,
    // made up to half a minute before a mode's run, set that mode's ratio as much as the mode
    // did.
    let mut untraced: Vec<[f64; MODES.len() + 1]> = Vec::with_capacity(runs);
    let mut traced: [Vec<f64>; MODES.len()] = Default::default();
    let mut floor = Vec::with_capacity(runs);
    let mut round_trips = Vec::with_capacity(runs);
    let mut full_bytes = 0;
    let mut full_direct = true;
    // The recorder's runs: (the time its close took, the time before it).
    let mut recorder = Vec::with_capacity(runs);
    // The simulator's waits for room, in the recorder's runs and in the full trace's.
    let mut recorder_waits = Vec::with_capacity(runs);
    let mut full_waits = Vec::with_capacity(runs);
    let mut recorder_bytes = 0;
    let mut others = Vec::with_capacity(runs);
    for round in 0..runs.max(1) {
        let cpu = (!cpus.is_empty()).then(|| cpus[round % cpus.len()]);
        sim_cpus.push(cpu);
        let mut tally = Tally::default();
        let mut bare = [0.0; MODES.len() + 1];
        let untraced_run = |tally: &mut Tally| -> Result<f64> {
            settle_disk();
            Ok(tally.during(|| once(None, cpu, round))?.took.as_secs_f64())
        };
        bare[0] = untraced_run(&mut tally)?;
        for (m, ((times, c), (_, key, _))) in
            traced.iter_mut().zip(&settings).zip(MODES).enumerate()
        {
            if key == "slowdown_recorder" {
                round_trips.push(core_round_trip());
            }
            settle_disk();
            let run = tally.during(|| once(Some(c), cpu, round))?;
            times.push(run.took.as_secs_f64());
            if key == "slowdown_recorder" {
                recorder.push((run.closing.as_secs_f64(), (run.took - run.closing).as_secs_f64()));
                recorder_waits.push(run.waited.as_secs_f64());
                recorder_bytes =
                    std::fs::metadata(&path).with_context(|| path.display().to_string())?.len();
            }
            if key == "slowdown_full" {
                full_waits.push(run.waited.as_secs_f64());
                // The full trace is at `path` now.
                let (took, bytes, direct) = write_floor(dir, &path)?;
                floor.push(took);
                full_bytes = bytes;
                full_direct &= direct;
            }
            bare[m + 1] = untraced_run(&mut tally)?;
        }
        untraced.push(bare);
        others.push(tally.load());
    }
    let reference = |r: usize, m: usize| beside(&untraced[r], m);
    let mode = |key: &str| {
        MODES.iter().position(|(_, k, _)| *k == key).with_context(|| format!("no mode {key}"))
    };
    let (rec, full) = (mode("slowdown_recorder")?, mode("slowdown_full")?);
    let rounds: Vec<Round> = (0..untraced.len())
        .map(|r| Round {
            untraced: untraced[r].to_vec(),
            slowdown: std::array::from_fn(|m| traced[m][r] / reference(r, m)),
            write_floor: floor[r] / reference(r, full),
            core_round_trip_ns: round_trips[r],
            recorder_dump: recorder[r].0,
            recorder_running: recorder[r].1 / reference(r, rec),
            recorder_wait: recorder_waits[r],
            full_wait: full_waits[r],
            other: others[r],
            cpu: sim_cpus[r],
        })
        .collect();
    // Medians over the rounds of each round's ratio.
    let median = |f: &dyn Fn(&Round) -> f64| percentiles(rounds.iter().map(f).collect());
    let untraced = percentiles(untraced.iter().flatten().copied().collect())?.p50;
    let mut slowdown = [0.0; MODES.len()];
    for (m, s) in slowdown.iter_mut().enumerate() {
        *s = median(&|r| r.slowdown[m])?.p50;
    }
    let write_floor = median(&|r| r.write_floor)?.p50;
    let core_round_trip_ns = percentiles(round_trips.into_iter().flatten().collect()).ok();
    let recorder_dump = percentiles(recorder.iter().map(|r| r.0).collect())?.p50;
    let recorder_running = median(&|r| r.recorder_running)?.p50;
    let recorder_wait = percentiles(recorder_waits)?.p50;
    let full_wait = percentiles(full_waits)?.p50;
    let other = others.iter().copied().collect::<Option<Vec<_>>>().and_then(|o| {
        Some(OtherLoad {
            others: percentiles(o.iter().map(|l| l.others).collect()).ok()?.p50,
            steal: percentiles(o.iter().map(|l| l.steal).collect()).ok()?.p50,
        })
    });
    Ok(Sim {
        cycles,
        untraced,
        slowdown,
        rounds,
        full_bytes,
        full_direct,
        write_floor,
        core_round_trip_ns: core_round_trip_ns.map(|p| p.p50),
        recorder_dump,
        recorder_bytes,
        recorder_running,
        recorder_wait,
        full_wait,
        other,
    })
}

/// The untraced time a round's `m`-th traced run is compared with: the geometric mean of the
/// untraced runs either side of it (`untraced` in the order the round ran them, one before each
/// traced run and one after the last), which cancels a steady drift of the machine's speed
/// across the three runs.
fn beside(untraced: &[f64], m: usize) -> f64 {
    (untraced[m] * untraced[m + 1]).sqrt()
}

/// Waits until the disk has taken what earlier runs left in the page cache, before a run is
/// timed: the full trace (gigabytes) is still being written back after its run closed it, even
/// once it is removed, and a run timed meanwhile would share the disk and the kernel's
/// writeback with it. `sync` on Unix; nothing elsewhere.
fn settle_disk() {
    #[cfg(unix)]
    // SAFETY: `sync` has no arguments and no failure.
    unsafe {
        libc::sync()
    };
}

/// Bytes per `write` call of [`write_floor`]: the writer's batch.
const FLOOR_WRITE: usize = jets::WRITE_BATCH_BYTES;

/// The reference beside the full trace: the time to write as many bytes as the full trace at
/// `full` has into a new file beside it, [`FLOOR_WRITE`] bytes per call from one buffer (the
/// trace's first bytes, repeated), through the file type a trace is written with
/// ([`jets::write::StreamedFile`]), from create to close as a traced run is timed, with nothing
/// to encode: what the file's path alone costs, which the SDK does not set.
/// The trace is removed first (only its size and first bytes are needed), so that the two never
/// fill the page cache together. Returns the seconds, the trace's size, and whether the file
/// went around the page cache (past 512 MiB, on a file system that takes direct writes): then
/// this is the disk's pace, which a shared disk changes from minute to minute, so that a round's
/// floor can come out above its full trace.
fn write_floor(dir: &Path, full: &Path) -> Result<(f64, u64, bool)> {
    use std::io::{Read, Write};
    let at = |path: &Path| path.display().to_string();
    let bytes = std::fs::metadata(full).with_context(|| at(full))?.len();
    let mut chunk = Vec::with_capacity(FLOOR_WRITE);
    std::fs::File::open(full)
        .and_then(|f| f.take(FLOOR_WRITE as u64).read_to_end(&mut chunk))
        .with_context(|| at(full))?;
    if chunk.is_empty() {
        bail!("{}: the full trace is empty", at(full));
    }
    std::fs::remove_file(full).with_context(|| format!("removing {}", at(full)))?;
    settle_disk();
    while chunk.len() < FLOOR_WRITE {
        chunk.extend_from_within(..chunk.len().min(FLOOR_WRITE - chunk.len()));
    }
    let path = dir.join("write-floor.bin");
    let start = Instant::now();
    // Through the same hints as a trace file, so that only the encoding differs.
    let mut file =
        jets::write::StreamedFile::new(std::fs::File::create(&path).with_context(|| at(&path))?);
    let mut left = bytes;
    while left > 0 {
        let n = left.min(FLOOR_WRITE as u64) as usize;
        file.write_all(&chunk[..n]).with_context(|| at(&path))?;
        left -= n as u64;
    }
    let direct = file.is_direct();
    drop(file);
    let took = start.elapsed().as_secs_f64();
    std::fs::remove_file(&path).with_context(|| format!("removing {}", at(&path)))?;
    Ok((took, bytes, direct))
}

fn to_text(r: &Value) -> String {
    let f = |k: &str| r[k].as_f64().unwrap_or(f64::NAN);
    let mut s = String::new();
    s += &format!(
        "machine: {} ({} cpus){}\n\n",
        r["cpu_model"].as_str().unwrap_or("unknown CPU"),
        r["cpus"],
        if r["quick"] == true { ", --quick sizes" } else { "" }
    );
    s += "what                                        p50          p99\n";
    // The producer's figures: what was timed, its p50 and p99 keys, and a note.
    let producer = [
        ("producer, event with 2 fields, 1 thread", "producer_event_ns", "1_thread", ""),
        (
            "producer, event with 2 fields, 2 threads",
            "producer_event_ns",
            "2_threads",
            "  (per thread)",
        ),
        (
            "the same, fields at once, 1 thread",
            "producer_event_fields_ns",
            "1_thread",
            "  (emit_event_fields_at)",
        ),
        (
            "the same, fields at once, 2 threads",
            "producer_event_fields_ns",
            "2_threads",
            "  (per thread)",
        ),
        (
            "producer, record of a worker, 2 threads",
            "producer_worker_record_ns",
            "2_threads",
            "  (begun and ended)",
        ),
    ];
    for (what, key, threads, note) in producer {
        let (p50, p99) = (f(&format!("{key}_p50_{threads}")), f(&format!("{key}_p99_{threads}")));
        s += &format!("{what:<41}{p50:>7.1} ns   {p99:>7.1} ns{note}\n");
    }
    s += "\n";
    s += &format!(
        "end to end into a file    {:>10.2} M lines/s ({:.0} bytes per line)\n",
        f("end_to_end_lines_per_sec") / 1e6,
        f("end_to_end_bytes_per_line")
    );
    s += &format!(
        "tracing Layer             {:>10.1} ns per span (new, enter, exit, close)\n",
        f("layer_span_ns")
    );
    s += &format!(
        "validation                {:>10.2} GB/s (warm file, all cores)\n",
        f("validation_gb_per_sec")
    );
    s += &format!(
        "\n{} threads against one, making the same lines (time of many / time of one):\n",
        r["threads_many"]
    );
    for (what, key) in [
        ("everything counted, not written", "count"),
        ("flight recorder, 100 k cycles", "recorder"),
        ("everything written (to nowhere)", "full"),
    ] {
        s += &format!("  {what:<32} {:>6.2}x\n", f(&format!("threads_many_vs_1_{key}")));
    }
    s += &format!(
        "\nTiny5 pipeline, {} cycles, untraced {:.3} s; slowdown = traced time / the untraced runs \
         either side of it:\n",
        r["pipeline_cycles"],
        f("pipeline_untraced_sec")
    );
    let rounds = &r["pipeline_rounds"];
    for (what, key, target) in MODES {
        let (lo, hi) = range(&rounds[key]);
        let target = match (target, key) {
            (Some(t), _) => format!("   (target <= {t})"),
            (None, "slowdown_count") => "   (made and handed over, none kept: a floor under the \
                                         recorder here)"
                .to_owned(),
            (None, _) => String::new(),
        };
        s += &format!("  {what:<32} {:>6.2}x   rounds {lo:.2}-{hi:.2}x{target}\n", f(key));
        if matches!(key, "slowdown_recorder" | "slowdown_count" | "slowdown_full") {
            if let Some((close, apart)) = by_distance(rounds, key) {
                s += &format!(
                    "    {:<30} {close:>6.2}x / {apart:.2}x   (medians of the rounds; apart: a \
                     round trip over {APART}x the shortest)\n",
                    "cores close / apart"
                );
            }
        }
        if key == "slowdown_recorder" {
            let (lo, hi) = range(&rounds["slowdown_recorder_running"]);
            let (dlo, dhi) = range(&rounds["recorder_dump_sec"]);
            s += &format!(
                "    {:<30} {:>6.2}x   rounds {lo:.2}-{hi:.2}x   (what the run pays while it \
                 records)\n",
                "until its close",
                f("slowdown_recorder_running")
            );
            let label = format!("its close: {:.0} MB written", f("recorder_dump_bytes") / 1e6);
            s += &format!(
                "    {label:<30} {:>6.3} s   rounds {dlo:.3}-{dhi:.3} s   (its window, once a \
                 dump)\n",
                f("recorder_dump_sec")
            );
        }
        let waited = match key {
            "slowdown_recorder" => Some("recorder_wait_sec"),
            "slowdown_full" => Some("full_wait_sec"),
            _ => None,
        };
        if let Some(waited) = waited {
            let (wlo, whi) = range(&rounds[waited]);
            s += &format!(
                "    {:<30} {:>6.3} s   rounds {wlo:.3}-{whi:.3} s   (the simulator waiting for \
                 room in its ring: the writer's pace)\n",
                "of which waiting",
                f(waited)
            );
        }
    }
    let (lo, hi) = range(&rounds["slowdown_write_floor"]);
    let label = format!("only writing its {:.2} GB", f("full_trace_bytes") / 1e9);
    let path = if r["write_floor_direct"] == true {
        "past 512 MiB around the page cache: the disk's pace"
    } else {
        "through the page cache"
    };
    s += &format!(
        "  {label:<32} {:>6.2}x   rounds {lo:.2}-{hi:.2}x   (no encoding, {path})\n",
        f("slowdown_write_floor")
    );
    match r["core_round_trip_ns"].as_f64() {
        Some(ns) => {
            let (lo, hi) = range(&rounds["core_round_trip_ns"]);
            s += &format!(
                "\ncore-to-core round trip {ns:.0} ns (rounds {lo:.0}-{hi:.0} ns), taken before each \
                 flight recorder run:\nthe recorder and the full trace hand every line from the \
                 simulator's core to the writer's,\nwhich costs more where that trip is long.\n"
            );
        }
        None => s +=
            "\ncore-to-core round trip not measured: one CPU, or two threads never ran at once.\n",
    }
    s += &other_work(r);
    s += &cpu_speeds(rounds);
    s
}

/// The human report's paragraph on the simulator's CPUs: the untraced time on each, when the
/// rounds ran on several, and a warning when one CPU's untraced times differ by more than
/// [`SPELL`] (CPUs that differ from each other are not a change of speed).
fn cpu_speeds(rounds: &Value) -> String {
    let mut s = String::new();
    let cpus = by_cpu(rounds);
    if cpus.len() > 1 {
        // Several CPUs: all pinned, so each has its number.
        let each: Vec<String> = cpus
            .iter()
            .filter_map(|(cpu, t)| Some(format!("{:.3} s on CPU {}", t.p50, (*cpu)?)))
            .collect();
        s += &format!(
            "\nThe simulator ran pinned to each CPU in turn, a round on one (`simulator_cpu`): \
             untraced,\n{} (medians), and each slowdown compares runs on the same CPU.\n\
             Each round's stack lay at an offset of its own (`stack_offset`), the same in every \
             process.\n",
            each.join(", ")
        );
    }
    // A change of speed within one CPU's rounds: CPUs that differ from each other are not one.
    if let Some((cpu, t)) = cpus.iter().find(|(_, t)| t.hi > t.lo * SPELL) {
        let on = if cpu.is_some() { " on one CPU" } else { "" };
        s += &format!(
            "\nThe untraced runs took {:.3}-{:.3} s{on}: the machine's speed changed during the \
             bench\n(another load, or a shared host). Compare only figures from one bench run, \
             and run it\nagain for figures to publish.\n",
            t.lo, t.hi
        );
    }
    s
}

/// The untraced times of a CPU's rounds: their smallest, median and largest.
struct Spread {
    lo: f64,
    p50: f64,
    hi: f64,
}

/// The untraced times by the CPU the simulator ran on (`simulator_cpu`), in CPU order; the
/// rounds of a run that pinned nothing count as one CPU's (`None`).
fn by_cpu(rounds: &Value) -> Vec<(Option<u64>, Spread)> {
    let cpus = rounds["simulator_cpu"].as_array().cloned().unwrap_or_default();
    // Every untraced run of each round where the report has them, else each round's median.
    let times: Vec<Vec<f64>> = match rounds["untraced_runs_sec"].as_array() {
        Some(runs) => runs
            .iter()
            .map(|r| r.as_array().into_iter().flatten().filter_map(Value::as_f64).collect())
            .collect(),
        None => rounds["untraced_sec"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|t| t.as_f64().into_iter().collect())
            .collect(),
    };
    let mut each: std::collections::BTreeMap<Option<u64>, Vec<f64>> = Default::default();
    for (i, ts) in times.into_iter().enumerate() {
        each.entry(cpus.get(i).and_then(Value::as_u64)).or_default().extend(ts);
    }
    each.into_iter()
        .filter_map(|(cpu, ts)| {
            let (lo, hi) =
                ts.iter().fold((f64::INFINITY, 0.0f64), |(l, h), &t| (l.min(t), h.max(t)));
            Some((cpu, Spread { lo, hi, p50: percentiles(ts).ok()?.p50 }))
        })
        .collect()
}

/// A round ran with the machine's cores apart when its round trip (`core_round_trip_ns`) was over
/// this many times the run's shortest: on this project's VM the host moves its two vCPUs between
/// about 45 ns and about 380 ns apart.
const APART: f64 = 2.0;

/// The median of `key`'s rounds with the cores close and of those with them apart (see
/// [`APART`]), when the run had rounds of both kinds: the same build can read several tenths
/// apart between the two, so a comparison is made class by class.
fn by_distance(rounds: &Value, key: &str) -> Option<(f64, f64)> {
    let trips: Vec<Option<f64>> =
        rounds["core_round_trip_ns"].as_array()?.iter().map(Value::as_f64).collect();
    let shortest = trips.iter().flatten().copied().reduce(f64::min)?;
    let (mut close, mut apart) = (Vec::new(), Vec::new());
    for (trip, x) in trips.iter().zip(rounds[key].as_array()?) {
        match (trip, x.as_f64()) {
            (Some(t), Some(x)) if *t > APART * shortest => apart.push(x),
            (Some(_), Some(x)) => close.push(x),
            _ => {}
        }
    }
    Some((percentiles(close).ok()?.p50, percentiles(apart).ok()?.p50))
}

/// Above this many cores of other work (or of steal) in a round, the report says the machine was
/// busy.
const BUSY_CORES: f64 = 0.15;

/// The smallest and the largest of a round-by-round list of figures (`pipeline_rounds`), its
/// missing ones (null) left out.
fn range(xs: &Value) -> (f64, f64) {
    let xs = xs.as_array().into_iter().flatten().filter_map(Value::as_f64);
    xs.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), x| (lo.min(x), hi.max(x)))
}

/// The human report's paragraph on what else the machine ran during the Tiny5 rounds.
fn other_work(r: &Value) -> String {
    let rounds = &r["pipeline_rounds"];
    let (Some(others), Some(steal)) =
        (r["other_cpu_cores"].as_f64(), r["steal_cpu_cores"].as_f64())
    else {
        return "\nother work on this machine not measured (Linux's /proc/stat is needed).\n"
            .to_owned();
    };
    // Never below zero, which is what an empty list would read.
    let most = |key: &str| range(&rounds[key]).1.max(0.0);
    let (busiest, most_steal) = (most("other_cpu_cores"), most("steal_cpu_cores"));
    let mut s = format!(
        "\nother work on this machine during the timed runs: {others:.2} cores (at most \
         {busiest:.2} in a round),\nof which the kernel's writeback of the bench's own files is \
         a part; the host took {steal:.2} cores (steal, at most {most_steal:.2}).\n"
    );
    if busiest.max(most_steal) > BUSY_CORES {
        s += "The machine was busy with other work during the bench: these are not an idle \
              machine's figures,\nand a change between two builds measured now may be the \
              load's. Run it again when the machine is idle.\n";
    }
    s
}

/// How much slower than the fastest untraced run the slowest may be before the human report
/// says that the machine's speed changed during the bench.
const SPELL: f64 = 1.25;

/// Percentiles of per-call samples.
struct Percentiles {
    p50: f64,
    p99: f64,
}

fn percentiles(mut samples: Vec<f64>) -> Result<Percentiles> {
    if samples.is_empty() {
        bail!("no samples");
    }
    samples.sort_by(f64::total_cmp);
    let at = |q: f64| samples[((samples.len() - 1) as f64 * q).round() as usize];
    Ok(Percentiles { p50: at(0.5), p99: at(0.99) })
}

/// What a producer call of the bench does.
#[derive(Clone, Copy)]
enum Call {
    /// A two-field event on a record the bench thread made, through its builder.
    Event,
    /// The same event with its fields given at once (`emit_event_fields_at`, no builder).
    EventFields,
    /// A record begun and ended under a record made on a thread that has exited, so that no
    /// producer has a record of its own open between calls: a thread pool's workers.
    WorkerRecord,
}

#[inline(always)]
fn emit(call: Call, root: &RecordHandle, i: u64) -> Result<(), jets::Error> {
    match call {
        Call::Event => {
            root.event("Execute").field("a", i).field("b", i ^ 7).emit_at(black_box(i + 1))
        }
        Call::EventFields => root.emit_event_fields_at(
            black_box(i + 1),
            "Execute",
            [("a", i.into()), ("b", (i ^ 7).into())],
        ),
        Call::WorkerRecord => {
            root.child("insn", "Instruction").begin_at(black_box(i))?.end_at(i + 3)
        }
    }
}

/// Per-call producer cost of `call` on `threads` long-lived threads, `calls_per_thread` each.
fn producer(call: Call, threads: usize, calls_per_thread: u64) -> Result<Percentiles> {
    let trace = TraceBuilder::new().capacity(1 << 15).writer(std::io::sink(), Metadata::new())?;
    let root = match call {
        Call::Event | Call::EventFields => trace.root("bench", "Bench").begin_at(0)?,
        Call::WorkerRecord => {
            let trace = trace.clone();
            let made = thread::spawn(move || trace.root("bench", "Bench").begin_at(0));
            made.join().map_err(|_| anyhow!("the root's thread panicked"))??
        }
    };
    let chunks = (calls_per_thread / CHUNK).max(2);
    let barrier = Barrier::new(threads);
    let work = |leader: bool| -> Result<Vec<f64>> {
        let mut samples = Vec::with_capacity((chunks * CHUNK / BATCH) as usize);
        let mut i = 0u64;
        for chunk in 0..chunks {
            barrier.wait();
            for _ in 0..CHUNK / BATCH {
                let start = Instant::now();
                for _ in 0..BATCH {
                    emit(call, &root, i)?;
                    i += 1;
                }
                // The first chunk warms the ring and the caches up.
                if chunk > 0 {
                    samples.push(start.elapsed().as_nanos() as f64 / BATCH as f64);
                }
            }
            barrier.wait();
            if leader {
                trace.flush()?;
            }
        }
        Ok(samples)
    };
    let samples = thread::scope(|s| -> Result<Vec<f64>> {
        let others: Vec<_> = (1..threads).map(|_| s.spawn(|| work(false))).collect();
        let mut all = work(true)?;
        for h in others {
            all.extend(h.join().map_err(|_| anyhow!("a producer thread panicked"))??);
        }
        Ok(all)
    })?;
    root.end_at(chunks * CHUNK + 4)?;
    trace.close()?;
    percentiles(samples)
}

/// Lines per second into a file; returns (lines/s, the file, bytes per line).
fn end_to_end(dir: &Path, lines: u64) -> Result<(f64, PathBuf, f64)> {
    let path = dir.join("bench.jets");
    let start = Instant::now();
    let trace = Trace::create(&path, Metadata::new().clock_frequency_mhz(1000.0))?;
    let root = trace.root("bench", "Bench").begin_at(0)?;
    // One record, eight events and one end per instruction: ten lines.
    for i in 0..lines / 10 {
        let clk = i * 4;
        let rec = root.child("insn", "Instruction").field("pc", i * 4).begin_at(clk)?;
        for stage in 0..8u64 {
            rec.event("Stage").field("stage", stage).emit_at(clk + stage)?;
        }
        rec.end_at(clk + 8)?;
    }
    root.end_at(lines / 10 * 4 + 8)?;
    let summary = trace.close().with_context(|| format!("writing {}", path.display()))?;
    let secs = start.elapsed().as_secs_f64();
    let written = summary.records + summary.record_ends + summary.events + summary.annotations;
    Ok((written as f64 / secs, path, summary.bytes as f64 / written as f64))
}

#[inline(never)]
fn span_workload(i: u64) {
    let span = tracing::info_span!("stage", pc = i, taken = true);
    let _enter = span.enter();
}

/// Median ns per span through `JetsLayer`.
fn layer(spans: u64) -> Result<f64> {
    const SPAN_CHUNK: u64 = 1 << 12;
    let trace = TraceBuilder::new().capacity(1 << 14).writer(std::io::sink(), Metadata::new())?;
    let layer = jets::JetsLayer::new(trace.clone());
    let errors = layer.errors();
    let subscriber = tracing_subscriber::registry().with(layer);
    let mut samples = Vec::new();
    tracing::subscriber::with_default(subscriber, || -> Result<()> {
        for chunk in 0..(spans / SPAN_CHUNK).max(2) {
            let start = Instant::now();
            for i in 0..SPAN_CHUNK {
                span_workload(i);
            }
            if chunk > 0 {
                samples.push(start.elapsed().as_nanos() as f64 / SPAN_CHUNK as f64);
            }
            trace.flush()?;
        }
        Ok(())
    })?;
    trace.close()?;
    if let Some(e) = errors.first() {
        bail!("the tracing layer failed: {e}");
    }
    Ok(percentiles(samples)?.p50)
}

/// Median GB/s of validating `file`.
fn validation(file: &Path, runs: usize) -> Result<f64> {
    let mut rates = Vec::new();
    for _ in 0..runs.max(1) {
        let mut reader = Reader::open(file).map_err(|e| anyhow!("{e}"))?;
        let start = Instant::now();
        let report = Validator::new().run(&mut reader, |_| {}).map_err(|e| anyhow!("{e}"))?;
        let secs = start.elapsed().as_secs_f64();
        if !report.is_valid() || report.warnings > 0 {
            bail!("{}: the benchmark's own trace does not validate clean", file.display());
        }
        rates.push(report.bytes as f64 / secs / 1e9);
    }
    Ok(percentiles(rates)?.p50)
}

fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_owned())
        })
        .unwrap_or_else(|| std::env::consts::ARCH.to_owned())
}

/// A directory removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(parent: Option<&Path>) -> Result<TempDir> {
        let parent = parent.map_or_else(std::env::temp_dir, Path::to_path_buf);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or(Duration::ZERO)
            .subsec_nanos();
        let dir = parent.join(format!("jets-bench-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        Ok(TempDir(dir))
    }

    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(others: Option<f64>, rounds: [f64; 3]) -> Value {
        json!({
            "other_cpu_cores": others,
            "steal_cpu_cores": others.map(|_| 0.01),
            "pipeline_rounds": { "other_cpu_cores": rounds, "steal_cpu_cores": [0.0, 0.01, 0.0] },
        })
    }

    #[test]
    fn rounds_are_split_by_the_distance_between_the_cores() {
        let rounds = json!({
            "core_round_trip_ns": [45.0, 380.0, 50.0, 400.0, 47.0],
            "slowdown_full": [8.0, 9.5, 8.2, 9.1, 7.9],
            "slowdown_count": [2.8, 2.9, 2.8, 3.0, 2.7],
        });
        assert_eq!(by_distance(&rounds, "slowdown_full"), Some((8.0, 9.5)));
        assert_eq!(by_distance(&rounds, "slowdown_count"), Some((2.8, 3.0)));
        // All close (or no round trip at all): nothing to split.
        let close = json!({ "core_round_trip_ns": [45.0, 60.0], "slowdown_full": [8.0, 8.1] });
        assert_eq!(by_distance(&close, "slowdown_full"), None);
        let one_cpu = json!({ "core_round_trip_ns": [null, null], "slowdown_full": [8.0, 8.1] });
        assert_eq!(by_distance(&one_cpu, "slowdown_full"), None);
    }

    #[test]
    fn a_traced_run_is_compared_with_the_untraced_runs_either_side_of_it() {
        // A round that slowed down steadily: 1, 4, 9 s untraced around two traced runs.
        let untraced = [1.0, 4.0, 9.0];
        assert_eq!(beside(&untraced, 0), 2.0);
        assert_eq!(beside(&untraced, 1), 6.0);
    }

    #[test]
    fn a_change_of_speed_within_a_round_is_reported() {
        // Each round's median alike, but one round's runs 0.70-0.95 s apart: the speed changed.
        let rounds = json!({
            "simulator_cpu": [0, 0],
            "untraced_sec": [0.72, 0.72],
            "untraced_runs_sec": [[0.70, 0.72, 0.95], [0.71, 0.72, 0.73]],
        });
        let text = cpu_speeds(&rounds);
        assert!(text.contains("took 0.700-0.950 s on one CPU"), "{text}");
        let steady = json!({
            "simulator_cpu": [0, 0],
            "untraced_sec": [0.72, 0.72],
            "untraced_runs_sec": [[0.70, 0.72, 0.75], [0.71, 0.72, 0.73]],
        });
        assert!(!cpu_speeds(&steady).contains("speed changed"));
    }

    #[test]
    fn the_report_gives_each_cpus_untraced_time_and_a_change_within_one() {
        // Two CPUs of different speeds, each steady: their times, and no change of speed.
        let pinned = json!({ "simulator_cpu": [0, 1, 0], "untraced_sec": [0.70, 1.07, 0.72] });
        let text = cpu_speeds(&pinned);
        assert!(text.contains("0.720 s on CPU 0, 1.070 s on CPU 1"), "{text}");
        assert!(!text.contains("speed changed"), "{text}");
        // The same times unpinned, or on one CPU: the machine's speed changed.
        let unpinned =
            json!({ "simulator_cpu": [null, null, null], "untraced_sec": [0.70, 1.07, 0.72] });
        let text = cpu_speeds(&unpinned);
        assert!(text.contains("took 0.700-1.070 s") && !text.contains("on CPU"), "{text}");
        let one = json!({ "simulator_cpu": [1, 0, 1], "untraced_sec": [0.70, 0.71, 1.07] });
        let text = cpu_speeds(&one);
        assert!(text.contains("took 0.700-1.070 s on one CPU"), "{text}");
    }

    #[test]
    fn the_report_says_when_the_machine_was_busy() {
        let idle = other_work(&report(Some(0.03), [0.02, 0.03, 0.05]));
        assert!(idle.contains("0.03 cores (at most 0.05 in a round)"), "{idle}");
        assert!(!idle.contains("busy"), "{idle}");
        // One busy round is enough: its figures went into the medians.
        let busy = other_work(&report(Some(0.04), [0.02, 0.04, 0.9]));
        assert!(busy.contains("at most 0.90") && busy.contains("was busy"), "{busy}");
        let unknown = other_work(&report(None, [0.0; 3]));
        assert!(unknown.contains("not measured"), "{unknown}");
    }
}
