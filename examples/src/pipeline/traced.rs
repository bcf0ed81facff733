//! Example 1 end to end: run a program on the pipeline and write everything into one trace.
//!
//! Three kinds of instrumentation share the trace, each where it fits:
//! * the run's phases (`load`, `simulate`, `verify`) are `#[jets::record]` functions written by
//!   [`jets::JetsLayer`] through `tracing`: cheap to add, a few records per run;
//! * the pipeline itself uses the native API ([`super::core`]): an `Instruction` record per fetched
//!   instruction with stage events, unit records with Gantt hints, stall and miss events and
//!   records: tens of lines per cycle, where the native API's cost matters;
//! * the host collector ([`jets_host::HostMonitor`]) samples the process and writes `HostSync`
//!   sync points that map cycles to host time.

use std::path::Path;
use std::time::{Duration, Instant};

use jets::capture::Capture;
use jets::{Metadata, SimClock, Trace, TraceBuilder};
use tracing_subscriber::layer::SubscriberExt;

use super::programs::{Program, WrongResult};
use super::{CacheConfig, Machine, Pipeline, SimError, Stats};

/// How to run.
#[derive(Clone, Debug)]
pub struct Options {
    /// The data cache.
    pub cache: CacheConfig,
    /// Give up after this many cycles.
    pub max_cycles: u64,
    /// Sample the host this often (`None`: no host collector).
    pub host_interval: Option<Duration>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            cache: CacheConfig::default(),
            max_cycles: 50_000_000,
            host_interval: Some(Duration::from_millis(10)),
        }
    }
}

/// What the host collector did.
#[derive(Clone, Debug)]
pub enum HostOutcome {
    /// It ran: samples written as sync points, and its cost as a fraction of one core.
    Sampled {
        /// Samples (sync points) written.
        samples: u64,
        /// Sampler CPU time over wall time.
        overhead: f64,
    },
    /// It was not asked for.
    Off,
    /// It could not run here, and why.
    Unavailable(String),
}

/// The result of a traced run.
#[derive(Clone, Debug)]
pub struct Outcome {
    /// The pipeline's counters.
    pub stats: Stats,
    /// What was verified (the program's result is right).
    pub verified: String,
    /// What the writer wrote.
    pub summary: jets::Summary,
    /// Host time spent simulating (with tracing on).
    pub sim_time: Duration,
    /// The host collector.
    pub host: HostOutcome,
}

impl Outcome {
    /// Simulated cycles per host second.
    pub fn cycles_per_sec(&self) -> f64 {
        self.stats.cycles as f64 / self.sim_time.as_secs_f64().max(1e-9)
    }
}

/// Why a traced run failed.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The simulation stopped early.
    #[error(transparent)]
    Sim(#[from] SimError),
    /// The program computed a wrong result.
    #[error(transparent)]
    Wrong(#[from] WrongResult),
    /// Opening or closing the trace failed.
    #[error("{path}: {source}")]
    Trace {
        /// The trace file.
        path: String,
        /// The cause.
        source: jets::Error,
    },
    /// The previous run's trace could not be removed.
    #[error("removing {path}: {source}")]
    Remove {
        /// The trace file.
        path: String,
        /// The cause.
        source: std::io::Error,
    },
    /// The simulator could not be pinned to the CPU asked for (the cause names it).
    #[error(transparent)]
    Pin {
        /// The cause, naming the CPU.
        source: std::io::Error,
    },
    /// The `tracing` layer or `#[jets::record]` met errors it could not return.
    #[error("{count} instrumentation error(s), the first: {first}")]
    Instrumentation {
        /// How many.
        count: u64,
        /// The first.
        first: String,
    },
}

#[jets::record(record_type = "Phase", description = "load the program and its data", skip_all)]
fn load(program: &Program) -> Result<Machine, SimError> {
    Machine::load(program)
}

#[jets::record(
    record_type = "Phase",
    description = "run the pipeline until ecall retires",
    skip(trace, machine, cache)
)]
fn simulate(
    trace: &Trace,
    machine: Machine,
    cache: CacheConfig,
    max_cycles: u64,
) -> Result<(Machine, Stats), SimError> {
    let mut pipeline = Pipeline::new(machine, cache).traced(trace, "core0")?;
    pipeline.run(max_cycles)?;
    let s = *pipeline.stats();
    tracing::info!(cycles = s.cycles, retired = s.retired, "halted");
    pipeline.finish()
}

#[jets::record(record_type = "Phase", description = "check the result against Rust", skip_all, err)]
fn verify(program: &Program, machine: &Machine) -> Result<String, WrongResult> {
    program.verify(machine)
}

/// Runs `program` with tracing into `path` (`.gz`/`.zst` compress) and checks its result.
pub fn run_to_file(path: &Path, program: &Program, options: &Options) -> Result<Outcome, RunError> {
    let trace_err = |source| RunError::Trace { path: path.display().to_string(), source };
    let clock = SimClock::new();
    let meta = Metadata::new()
        .hardware_model("Tiny5: in-order 5-stage RV32I")
        .architecture("RISC Pipeline")
        .clock_frequency_mhz(1000.0)
        .insert("program", program.name.clone());
    let trace = TraceBuilder::new().clock(clock).create(path, meta).map_err(trace_err)?;
    let layer = jets::JetsLayer::new(trace.clone());
    let layer_errors = layer.errors();
    let subscriber = tracing_subscriber::registry().with(layer);

    let (monitor, mut host) = start_host(&trace, options.host_interval);
    let started = Instant::now();
    let result = tracing::subscriber::with_default(subscriber, || {
        let machine = load(program)?;
        let (machine, stats) = simulate(&trace, machine, options.cache, options.max_cycles)?;
        let verified = verify(program, &machine)?;
        Ok::<_, RunError>((stats, verified))
    });
    let sim_time = started.elapsed();
    if let Some(m) = monitor {
        host = stop_host(m);
    }
    let summary = trace.close_at(trace.clock().now()).map_err(trace_err)?;
    let (stats, verified) = result?;
    if let Some(first) = layer_errors.first() {
        return Err(RunError::Instrumentation {
            count: layer_errors.count(),
            first: first.to_string(),
        });
    }
    Ok(Outcome { stats, verified, summary, sim_time, host })
}

/// What [`timed_run`] measured.
#[derive(Clone, Copy, Debug)]
pub struct Timed {
    /// From opening the trace to closing it.
    pub took: Duration,
    /// Of which closing it: what the writer still had to write (a flight recorder's window),
    /// the footer, and the file's close.
    pub closing: Duration,
    /// How long the simulator waited for room in its ring, in all (the writer set its pace
    /// meanwhile: `jets::Summary::waited_for_room`).
    pub waited: Duration,
    /// The run's length.
    pub cycles: u64,
    /// The CPU the simulator ran on as it finished (the one asked for, when pinned; `None` where
    /// this cannot be known).
    pub cpu: Option<usize>,
}

/// One run of `program` timed as `jets bench` times it: from opening the trace at `path` under
/// `capture` (None: untraced, no trace) to closing it; the result is checked after the timing, so
/// a mode that broke the simulation cannot pass as fast.
///
/// A file left at `path` by an earlier run is removed first, outside the timing: replacing a
/// large file makes the kernel free its page cache in the `create` call, a cost of the last run
/// (several tenths of a second after a full trace), not of this one.
///
/// With `cpu`, the simulator runs pinned to that CPU (`jets_host::load::pin_current_thread`):
/// pinned once its trace is open, so that the trace's writer thread, started by the open, may
/// run on any other CPU, and unpinned once the simulation is over, before the close, so that
/// what the close starts is not kept on that CPU either. Comparing an untraced and a traced
/// run on the same CPU is what makes their ratio mean something on a machine whose CPUs are
/// not equally fast.
pub fn timed_run(
    path: &Path,
    program: &Program,
    capture: Option<&Capture>,
    cpu: Option<usize>,
) -> Result<Timed, RunError> {
    let display = || path.display().to_string();
    match std::fs::remove_file(path) {
        Err(source) if source.kind() != std::io::ErrorKind::NotFound => {
            return Err(RunError::Remove { path: display(), source });
        }
        _ => {}
    }
    let trace_err = |source| RunError::Trace { path: display(), source };
    let machine = Machine::load(program)?;
    let start = Instant::now();
    let mut pipe = Pipeline::new(machine, CacheConfig::default());
    let trace = match capture {
        Some(c) => {
            let t = TraceBuilder::new()
                .capture(c.clone())
                .create(path, Metadata::new())
                .map_err(trace_err)?;
            pipe = pipe.traced(&t, "core0")?;
            Some(t)
        }
        None => None,
    };
    let pinned = match cpu {
        Some(cpu) => Some(
            jets_host::load::pin_current_thread(cpu).map_err(|source| RunError::Pin { source })?,
        ),
        None => None,
    };
    pipe.run(u64::MAX)?;
    let (machine, stats) = pipe.finish()?;
    let ran_on = jets_host::load::current_cpu();
    drop(pinned);
    let close = Instant::now();
    let waited = match trace {
        Some(t) => t.close_at(stats.cycles).map_err(trace_err)?.waited_for_room,
        None => Duration::ZERO,
    };
    // Both from one reading of the clock: the close is part of the run.
    let end = Instant::now();
    let (took, closing) = (end - start, end - close);
    program.verify(&machine)?;
    Ok(Timed { took, closing, waited, cycles: stats.cycles, cpu: ran_on })
}

#[cfg(target_os = "linux")]
type Monitor = jets_host::HostMonitor;
#[cfg(not(target_os = "linux"))]
type Monitor = std::convert::Infallible;

#[cfg(target_os = "linux")]
fn start_host(trace: &Trace, interval: Option<Duration>) -> (Option<Monitor>, HostOutcome) {
    let Some(interval) = interval else { return (None, HostOutcome::Off) };
    let config = jets_host::HostConfig::default().interval(interval);
    match jets_host::HostMonitor::start(trace, config) {
        Ok(m) => (Some(m), HostOutcome::Off),
        Err(e) => (None, HostOutcome::Unavailable(e.to_string())),
    }
}

#[cfg(target_os = "linux")]
fn stop_host(m: Monitor) -> HostOutcome {
    match m.stop() {
        Ok(r) => HostOutcome::Sampled { samples: r.samples, overhead: r.overhead() },
        Err(e) => HostOutcome::Unavailable(e.to_string()),
    }
}

#[cfg(not(target_os = "linux"))]
fn start_host(_: &Trace, interval: Option<Duration>) -> (Option<Monitor>, HostOutcome) {
    match interval {
        None => (None, HostOutcome::Off),
        Some(_) => (None, HostOutcome::Unavailable("host collectors need Linux".into())),
    }
}

#[cfg(not(target_os = "linux"))]
fn stop_host(m: Monitor) -> HostOutcome {
    match m {}
}
