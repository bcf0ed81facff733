//! The eBPF I/O collector (feature `ebpf`, Linux, root): every file, block, page-cache, network,
//! page-fault and io_uring operation of a process tree, as io-tracer-linux CSV files and as JETS
//! events at the simulated cycle they happened at.
//!
//! BPF programs (`bpf/io.bpf.c`, compiled by `build.rs` with clang) attach to tracepoints only —
//! `raw_syscalls`, `sched`, `block`, `filemap`, `writeback`, `sock`, `exceptions`, `io_uring` —
//! filter to the traced process tree in the kernel (a pid map that follows forks), and send
//! records through one BPF ring buffer; a reservation that fails is counted per stream, so losses
//! are exact. A collector thread decodes the records ([`decode`]), writes the io-tracer layout
//! ([`csv`]) and, inside a simulator, JETS events on a `HostIo` record ([`jets`]). The convention
//! is spec/host-io.md.
//!
//! Only the collector's own thread is left out: the trace writer's writes are I/O of the
//! simulator and are reported. Run one collector per process: two would trace each other's
//! threads.
//!
//! Without privileges, tracefs or a usable tracepoint layout, [`IoTracer::start`] returns
//! [`IoTraceError::Unavailable`] with the reason, and [`capability`] says the same without trying.
//!
//! ```no_run
//! use jets_host::ebpf::{IoTraceConfig, IoTracer};
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let trace = jets::Trace::create("sim.jets", jets::Metadata::new())?;
//! let io = IoTracer::start_in(&trace, IoTraceConfig::default().output_dir("io"))?;
//! // ... simulate, advancing trace.clock() ...
//! let report = io.stop()?;
//! println!("{} file operations, {} lost", report.rows[0], report.lost.iter().sum::<u64>());
//! trace.close()?;
//! # Ok(()) }
//! ```

use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::Duration;

use serde_json::{json, Map, Value};

use super::Capability;
use ::jets::{RecordHandle, Trace};

pub mod csv;
pub mod decode;
pub mod event;
pub mod jets;
mod loader;
pub mod syscalls;
pub mod tracefs;

pub use decode::Row;
pub use event::Stream;

/// What went wrong in the I/O collector.
#[derive(Debug, thiserror::Error)]
pub enum IoTraceError {
    /// The collector cannot run on this machine (privileges, tracefs, kernel); the text says why.
    #[error("eBPF I/O collector unavailable: {0}")]
    Unavailable(String),
    /// Loading or driving the BPF programs failed.
    #[error("eBPF: {0}")]
    Bpf(String),
    /// Writing the output failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// The collector thread could not start or panicked.
    #[error("I/O collector thread: {0}")]
    Thread(String),
    /// Writing to the JETS trace failed.
    #[error("writing I/O events to the trace: {0}")]
    Trace(#[from] ::jets::Error),
}

impl IoTraceError {
    fn io(path: &Path, source: std::io::Error) -> IoTraceError {
        IoTraceError::Io { path: path.to_path_buf(), source }
    }
}

/// Whether the collector can run here, and why not, without loading anything.
pub fn capability() -> Capability {
    match loader::preflight() {
        Ok(()) => Capability::new(true, None),
        Err(reason) => Capability::new(false, Some(reason)),
    }
}

/// How the collector runs.
#[derive(Clone, Debug)]
pub struct IoTraceConfig {
    /// Write io-tracer CSV files under this directory (in a new `output_YYYYMMDD_HHMMSS/`).
    pub output_dir: Option<PathBuf>,
    /// Rows per CSV file before rotating (io-tracer: 1000).
    pub rotate_rows: usize,
    /// Keep every decoded row in memory and return them in [`IoReport::kept`] (tests, tools).
    pub keep_rows: bool,
    /// How long the collector waits for records before it re-reads the simulator's clock.
    pub poll: Duration,
    /// Size of the kernel → collector ring buffer (rounded up to a power of two). A bigger ring
    /// rides out longer stalls of the collector thread before records are lost.
    pub ring_bytes: usize,
}

impl Default for IoTraceConfig {
    fn default() -> Self {
        IoTraceConfig {
            output_dir: None,
            rotate_rows: 1000,
            keep_rows: false,
            poll: Duration::from_millis(20),
            ring_bytes: 16 << 20,
        }
    }
}

impl IoTraceConfig {
    /// Writes the io-tracer layout under `dir`.
    pub fn output_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.output_dir = Some(dir.into());
        self
    }

    /// Keeps the decoded rows for [`IoReport::kept`].
    pub fn keep_rows(mut self, keep: bool) -> Self {
        self.keep_rows = keep;
        self
    }
}

/// What the collector saw, returned by [`IoTracer::stop`].
#[derive(Clone, Debug, Default)]
pub struct IoReport {
    /// Rows per stream, indexed by [`Stream`] (`rows[Stream::Fs as usize]`).
    pub rows: [u64; 7],
    /// Records the kernel could not hand over (ring buffer full), per stream.
    pub lost: [u64; 7],
    /// Ring-buffer records read.
    pub records: u64,
    /// Traced syscalls that failed (not reported as rows).
    pub failed_syscalls: u64,
    /// Records that could not be decoded.
    pub decode_errors: u64,
    /// The io-tracer output directory, when one was written.
    pub output: Option<PathBuf>,
    /// Inside a simulator: the largest `clk_uncertainty` of the events written, in cycles (HIO1).
    pub clk_uncertainty_max: u64,
    /// Inside a simulator: the mean `clk_uncertainty`, in cycles.
    pub clk_uncertainty_mean: f64,
    /// Optional tracepoints that could not be used: tracepoint → reason.
    pub degraded: Vec<(String, String)>,
    /// The rows, when [`IoTraceConfig::keep_rows`] was set.
    pub kept: Vec<Row>,
    /// CPU time the collector thread used (decoding and writing), ns.
    pub collector_cpu_ns: u64,
    /// Wall time the collector thread ran, ns.
    pub wall_ns: u64,
}

impl IoReport {
    /// Per-stream counts and losses as JSON (the `HostIoStats` annotation).
    pub fn to_json(&self) -> Value {
        let mut m = Map::new();
        for s in Stream::ALL {
            m.insert(
                s.dir().into(),
                json!({"rows": self.rows[s as usize], "lost": self.lost[s as usize]}),
            );
        }
        json!({"streams": m, "records": self.records, "failed_syscalls": self.failed_syscalls,
               "decode_errors": self.decode_errors,
               "clk_uncertainty": {"max": self.clk_uncertainty_max,
                                   "mean": self.clk_uncertainty_mean}})
    }

    /// One line for people: rows, and the losses per stream (a trace with losses is incomplete
    /// for those streams, HIO3).
    pub fn summary(&self) -> String {
        let rows: u64 = self.rows.iter().sum();
        let lost: Vec<String> = Stream::ALL
            .iter()
            .filter(|&&s| self.lost[s as usize] > 0)
            .map(|&s| format!("{} {}", s.dir(), self.lost[s as usize]))
            .collect();
        if lost.is_empty() {
            format!("{rows} rows, none lost")
        } else {
            format!(
                "{rows} rows, lost (ring buffer full; these streams are incomplete): {}",
                lost.join(", ")
            )
        }
    }

    /// Records the collector can take per second of one core: records over its CPU time (its
    /// capacity, as opposed to the rate the traced process happened to produce).
    pub fn records_per_cpu_second(&self) -> f64 {
        self.records as f64 / (self.collector_cpu_ns.max(1) as f64 / 1e9)
    }
}

/// A running collector; [`stop`](IoTracer::stop) it to get the report and finish the files.
#[derive(Debug)]
pub struct IoTracer {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<Result<IoReport, IoTraceError>>>,
}

struct JetsOut {
    root: RecordHandle,
    map: jets::CycleMap,
    /// Rows waiting for a clock reading later than their time (HIO1: no extrapolation).
    pending: Vec<Row>,
    /// Where the simulator's cycle counter lives (the map holds a clone: it stays valid).
    addr: u64,
}

impl IoTracer {
    /// Traces the process `pid` and the processes it forks from now on.
    pub fn start(pid: u32, config: IoTraceConfig) -> Result<IoTracer, IoTraceError> {
        Self::spawn(pid, config, None)
    }

    /// Traces this process (a simulator) and its children, writing each operation as a JETS
    /// event on a `HostIo` root record of `trace` at the cycle of the trace's clock when it
    /// happened (spec/host-io.md). The collector's own thread is not traced.
    pub fn start_in(trace: &Trace, config: IoTraceConfig) -> Result<IoTracer, IoTraceError> {
        let pid = std::process::id();
        // Refuse before writing anything to the trace.
        loader::preflight().map_err(IoTraceError::Unavailable)?;
        let clock = trace.clock().clone();
        let comm = crate::procfs::read_stat(pid).map(|s| s.comm).unwrap_or_default();
        let root = trace
            .root("io", jets::IO_RECORD_TYPE)
            .field("pid", pid)
            .field("command", comm)
            .begin_at(clock.now())?;
        let addr = clock.counter_address() as u64;
        let map = jets::CycleMap::new(clock, root.start_clk());
        Self::spawn(pid, config, Some(JetsOut { root, map, pending: Vec::new(), addr }))
    }

    fn spawn(
        pid: u32,
        config: IoTraceConfig,
        out: Option<JetsOut>,
    ) -> Result<IoTracer, IoTraceError> {
        let loaded = loader::load(config.ring_bytes)?;
        if let Some(o) = &out {
            let mut caps = Map::new();
            for s in Stream::ALL {
                let reasons: Vec<&str> = loaded
                    .degraded
                    .values()
                    .filter(|(st, _)| *st == s)
                    .map(|(_, r)| r.as_str())
                    .collect();
                let mut c = Capability::new(reasons.is_empty(), None);
                if !reasons.is_empty() {
                    c.reason = Some(reasons.join("; "));
                }
                caps.insert(s.dir().into(), c.to_json());
            }
            o.root
                .annotation(jets::IO_CAPABILITIES_ANNOTATION)
                .description("which I/O streams the eBPF collector captures here, and why not")
                .data_json(&Value::Object(caps).to_string())
                .emit()?;
        }
        let csv = match &config.output_dir {
            Some(d) => {
                std::fs::create_dir_all(d).map_err(|e| IoTraceError::io(d, e))?;
                Some(csv::CsvOutput::create(d, config.rotate_rows)?)
            }
            None => None,
        };
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = stop.clone();
        let (ready_tx, ready_rx) = mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("jets-io-collector".into())
            .spawn(move || {
                let mut c = Collector::new(loaded, config, csv, out);
                let setup = c.setup(pid);
                let failed = setup.is_err();
                let _ = ready_tx.send(setup);
                if failed {
                    return Err(IoTraceError::Thread("setup failed".into()));
                }
                c.run(&stop2)
            })
            .map_err(|e| IoTraceError::Thread(e.to_string()))?;
        match ready_rx.recv() {
            Ok(Ok(())) => Ok(IoTracer { stop, thread: Some(thread) }),
            Ok(Err(e)) => {
                let _ = thread.join();
                Err(e)
            }
            Err(_) => Err(IoTraceError::Thread("the collector thread died while starting".into())),
        }
    }

    /// Drains the ring buffer, finishes the files, ends the `HostIo` record and returns the report.
    pub fn stop(mut self) -> Result<IoReport, IoTraceError> {
        self.stop.store(true, Ordering::Release);
        match self.thread.take() {
            Some(t) => t.join().map_err(|_| IoTraceError::Thread("panicked".into()))?,
            None => Err(IoTraceError::Thread("already stopped".into())),
        }
    }
}

impl Drop for IoTracer {
    fn drop(&mut self) {
        if let Some(t) = self.thread.take() {
            self.stop.store(true, Ordering::Release);
            if let Ok(Err(e)) = t.join() {
                eprintln!("jets: I/O collector: {e}");
            }
        }
    }
}

struct Collector {
    loaded: loader::Loaded,
    config: IoTraceConfig,
    csv: Option<csv::CsvOutput>,
    jets: Option<JetsOut>,
    decoder: decode::Decoder,
    report: IoReport,
    rows: Vec<Row>,
    stamped: u64,
    uncertainty_sum: u128,
}

impl Collector {
    fn new(
        loaded: loader::Loaded,
        config: IoTraceConfig,
        csv: Option<csv::CsvOutput>,
        jets: Option<JetsOut>,
    ) -> Collector {
        let degraded =
            loaded.degraded.iter().map(|(tp, (_, why))| (tp.to_string(), why.clone())).collect();
        Collector {
            loaded,
            config,
            csv,
            jets,
            decoder: decode::Decoder::new(),
            report: IoReport { degraded, ..IoReport::default() },
            rows: Vec::new(),
            stamped: 0,
            uncertainty_sum: 0,
        }
    }

    fn setup(&mut self, pid: u32) -> Result<(), IoTraceError> {
        // SAFETY: gettid has no preconditions.
        let tid = unsafe { libc::gettid() } as u32;
        self.loaded.ignore_tid(tid)?;
        if let Some(j) = &mut self.jets {
            // The simulator's own operations carry the cycle read in the kernel (HIO1).
            self.loaded.read_clock(pid, j.addr)?;
            j.map.sample(); // before the first traced operation
        }
        self.loaded.trace_pid(pid)?;
        // Its fds as they are before it runs (or goes on): see `Decoder::adopt`.
        self.decoder.adopt(pid);
        if let Some(c) = &mut self.csv {
            c.snapshot(pid, crate::procfs::clock_ns(libc::CLOCK_MONOTONIC))?;
        }
        Ok(())
    }

    fn run(mut self, stop: &AtomicBool) -> Result<IoReport, IoTraceError> {
        let clock_ns = crate::procfs::clock_ns;
        let (wall0, cpu0) =
            (clock_ns(libc::CLOCK_MONOTONIC), clock_ns(libc::CLOCK_THREAD_CPUTIME_ID));
        let fd = self.loaded.ring.as_raw_fd();
        let poll_ms = self.config.poll.as_millis().clamp(1, 1000) as i32;
        loop {
            let stopping = stop.load(Ordering::Acquire);
            self.drain()?;
            // After the drain: a reading later than every operation drained so far (the last
            // ones arrived during the drain), so every pending row gets one after it.
            if let Some(j) = &mut self.jets {
                j.map.sample();
            }
            self.stamp_ready(stopping)?;
            if stopping {
                break;
            }
            let mut p = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
            // SAFETY: one valid pollfd for the duration of the call.
            unsafe { libc::poll(&mut p, 1, poll_ms) };
        }
        self.decoder.flush(&mut self.rows);
        self.write_rows()?;
        self.stamp_ready(true)?;
        self.report.lost = self.loaded.lost();
        self.report.failed_syscalls = self.decoder.failed_syscalls;
        self.report.wall_ns = clock_ns(libc::CLOCK_MONOTONIC).saturating_sub(wall0);
        self.report.collector_cpu_ns = clock_ns(libc::CLOCK_THREAD_CPUTIME_ID).saturating_sub(cpu0);
        if let Some(c) = self.csv.take() {
            self.report.output = Some(c.finish(&self.report.to_json())?);
        }
        if let Some(j) = self.jets.take() {
            j.root
                .annotation(jets::IO_STATS_ANNOTATION)
                .description("rows and lost records per stream")
                .data_json(&self.report.to_json().to_string())
                .emit()?;
            j.root.end_at(j.map.end())?;
        }
        Ok(self.report)
    }

    fn drain(&mut self) -> Result<(), IoTraceError> {
        loop {
            let mut n = 0;
            while let Some(item) = self.loaded.ring.next() {
                n += 1;
                self.report.records += 1;
                match event::Raw::decode(&item) {
                    Ok(raw) => self.decoder.push(raw, &mut self.rows),
                    Err(_) => self.report.decode_errors += 1,
                }
                drop(item);
                if n % 4096 == 0 {
                    break;
                }
            }
            self.write_rows()?;
            if n < 4096 {
                return Ok(());
            }
        }
    }

    /// Writes the JETS events of the pending rows that a clock reading follows (all of them when
    /// `all`), in time order, each at its interpolated cycle.
    fn stamp_ready(&mut self, all: bool) -> Result<(), IoTraceError> {
        let Some(j) = &mut self.jets else { return Ok(()) };
        let latest = j.map.latest();
        let (mut ready, wait): (Vec<Row>, Vec<Row>) =
            j.pending.drain(..).partition(|r| all || r.who().ts <= latest);
        j.pending = wait;
        ready.sort_by_key(|r| r.who().ts);
        for row in ready {
            let stamp = match row.who().clk {
                Some(c) => j.map.exact(c),
                None => j.map.stamp(row.who().ts),
            };
            if let Some(u) = stamp.uncertainty {
                self.stamped += 1;
                self.uncertainty_sum += u128::from(u);
                self.report.clk_uncertainty_max = self.report.clk_uncertainty_max.max(u);
            }
            jets::emit(&j.root, &row, stamp)?;
        }
        if self.stamped > 0 {
            self.report.clk_uncertainty_mean = self.uncertainty_sum as f64 / self.stamped as f64;
        }
        Ok(())
    }

    fn write_rows(&mut self) -> Result<(), IoTraceError> {
        for row in self.rows.drain(..) {
            self.report.rows[row.stream() as usize] += 1;
            if let Some(c) = &mut self.csv {
                c.write(&row)?;
            }
            if self.config.keep_rows {
                self.report.kept.push(row.clone());
            }
            if let Some(j) = &mut self.jets {
                j.pending.push(row);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_names_each_stream_that_lost_records() {
        let mut r = IoReport { rows: [5, 0, 2, 0, 0, 0, 1], ..IoReport::default() };
        assert_eq!(r.summary(), "8 rows, none lost");
        r.lost[Stream::Fs as usize] = 3;
        r.lost[Stream::Cache as usize] = 1;
        let s = r.summary();
        assert!(s.starts_with("8 rows, lost"), "{s}");
        assert!(s.ends_with(": fs 3, cache 1"), "{s}");
        assert_eq!(r.to_json()["streams"]["fs"]["lost"], 3);
    }
}
