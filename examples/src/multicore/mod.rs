//! Example 2: cores on their own threads sharing one memory system thread.
//!
//! Each core sums its slice of a shared array: per word an address step, a load and an add, then a
//! store of its partial sum. Loads and stores are requests to the memory thread, which owns the
//! data, serves one request per port slot in cycle order and answers with the value and the cycle
//! it completes. The core blocks on every request (an in-order core without a store buffer).
//!
//! The simulation is cycle-accurate and deterministic however the threads are scheduled: the
//! memory thread serves a request only once every running core has one outstanding (or has
//! finished), so nothing with an earlier cycle can still arrive (conservative parallel discrete
//! event simulation).
//!
//! In the trace, each core's `Instruction` records are written on the core's thread; each memory
//! request is a `MemRequest` record written on the memory thread as a **child of the instruction
//! record that issued it**: a child created on another thread than its parent. The SDK orders the
//! lines by construction: the request's line waits in the writer until its parent's line is out.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::Arc;
use std::thread;

use jets::format::{Color, MarkerStyle, Severity, Status};
use jets::{Metadata, RecordHandle, Trace, TraceBuilder};

/// The machine and the workload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    /// Cores (threads).
    pub cores: usize,
    /// Words each core sums.
    pub words_per_core: usize,
    /// Cycles between two requests the memory port accepts.
    pub port_interval: u64,
    /// Cycles from a request's service start to its data.
    pub latency: u64,
}

impl Default for Config {
    fn default() -> Self {
        Config { cores: 4, words_per_core: 64, port_interval: 2, latency: 6 }
    }
}

/// What went wrong.
#[derive(Debug, thiserror::Error)]
pub enum McError {
    /// Writing the trace failed.
    #[error("writing the trace: {0}")]
    Trace(#[from] jets::Error),
    /// A simulator thread failed or vanished.
    #[error("simulator thread: {0}")]
    Thread(String),
    /// A core addressed memory outside the array.
    #[error("core {core}: address {addr} is outside memory")]
    Fault {
        /// The core.
        core: usize,
        /// The word address.
        addr: usize,
    },
    /// The result differs from the sums computed in Rust.
    #[error("wrong result: {0}")]
    Wrong(String),
}

/// The result of a run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    /// Each core's partial sum as read back from memory.
    pub sums: Vec<i64>,
    /// The sum of all words.
    pub total: i64,
    /// The cycle the last core finished.
    pub cycles: u64,
    /// Requests served.
    pub requests: u64,
    /// Cycles requests waited for the memory port, summed.
    pub queued_cycles: u64,
}

enum Kind {
    Read,
    Write(i64),
}

enum Msg {
    Request { core: usize, addr: usize, issue: u64, kind: Kind, insn: Arc<RecordHandle> },
    Done,
}

struct Reply {
    value: i64,
    done: u64,
}

/// The shared array's initial contents (word `i` of the run).
pub fn word(i: usize) -> i64 {
    ((i as i64 * 7919) % 1000) - 500
}

/// Runs the simulation into `trace` and checks the result.
pub fn run(trace: &Trace, config: Config) -> Result<Outcome, McError> {
    let n = config.cores * config.words_per_core;
    // Data words, then one result word per core.
    let memory: Vec<i64> = (0..n).map(word).chain(std::iter::repeat_n(0, config.cores)).collect();
    let (to_memory, requests) = mpsc::channel::<Msg>();
    let mut replies = Vec::new();
    let mut reply_rx = Vec::new();
    for _ in 0..config.cores {
        let (tx, rx) = mpsc::channel::<Reply>();
        replies.push(tx);
        reply_rx.push(rx);
    }
    let memory_root = trace
        .root("memory", "MemorySystem")
        .description("one shared port: a request every port_interval cycles, data after latency")
        .unit_id(config.cores as u64)
        .display_label("memory")
        .color(Color::rgb(0x9c755f))
        .status(Status::Running)
        .field("port_interval", config.port_interval)
        .field("latency", config.latency)
        .begin_at(0)?;

    thread::scope(|s| {
        let mem = thread::Builder::new()
            .name("memory".into())
            .spawn_scoped(s, || serve(memory, requests, replies, memory_root, config))
            .map_err(|e| McError::Thread(e.to_string()))?;
        let mut cores = Vec::new();
        for (core, rx) in reply_rx.into_iter().enumerate() {
            let tx = to_memory.clone();
            let handle = thread::Builder::new()
                .name(format!("core{core}"))
                .spawn_scoped(s, move || core_main(trace, core, config, tx, rx))
                .map_err(|e| McError::Thread(e.to_string()))?;
            cores.push(handle);
        }
        drop(to_memory);
        let mut cycles = 0;
        for c in cores {
            cycles = cycles.max(c.join().map_err(|_| McError::Thread("a core panicked".into()))??);
        }
        let (memory, requests, queued_cycles) =
            mem.join().map_err(|_| McError::Thread("the memory thread panicked".into()))??;
        let sums = memory[n..].to_vec();
        let outcome = Outcome { total: sums.iter().sum(), sums, cycles, requests, queued_cycles };
        check(&outcome, config)?;
        Ok(outcome)
    })
}

/// Compares the sums read back from memory with the ones computed here.
fn check(o: &Outcome, config: Config) -> Result<(), McError> {
    for (core, got) in o.sums.iter().enumerate() {
        let base = core * config.words_per_core;
        let want: i64 = (base..base + config.words_per_core).map(word).sum();
        if *got != want {
            return Err(McError::Wrong(format!("core {core} stored {got}, expected {want}")));
        }
    }
    let want: i64 = (0..config.cores * config.words_per_core).map(word).sum();
    if o.total != want {
        return Err(McError::Wrong(format!("total {}, expected {want}", o.total)));
    }
    Ok(())
}

/// One core: returns the cycle it finished.
fn core_main(
    trace: &Trace,
    core: usize,
    config: Config,
    memory: Sender<Msg>,
    replies: Receiver<Reply>,
) -> Result<u64, McError> {
    let root = trace
        .root(format!("core{core}"), "Core")
        .description("in-order core, blocking loads and stores")
        .unit_id(core as u64)
        .display_label(format!("core{core}"))
        .color(Color::rgb(0x4e79a7))
        .status(Status::Running)
        .begin_at(0)?;
    let gone = || McError::Thread("the memory thread stopped".into());
    // Issues one request and blocks until the memory answers: (completion cycle, value read).
    let request =
        |t: u64, name: &'static str, addr: usize, kind: Kind| -> Result<(u64, i64), McError> {
            let insn = root
                .child(name, "Instruction")
                .display_label(name)
                .thread_id(0)
                .field("addr", addr as u64)
                .color(Color::rgb(0x59a14f))
                .begin_at(t)?;
            let insn = Arc::new(insn);
            let msg = Msg::Request { core, addr, issue: t, kind, insn: Arc::clone(&insn) };
            memory.send(msg).map_err(|_| gone())?;
            let reply = replies.recv().map_err(|_| gone())?;
            // The memory thread dropped its reference before replying.
            let insn = Arc::try_unwrap(insn)
                .map_err(|_| McError::Thread("request still shared".into()))?;
            insn.end_at(reply.done)?;
            Ok((reply.done, reply.value))
        };
    let mut t = 0u64;
    let mut sum = 0i64;
    let base = core * config.words_per_core;
    for i in base..base + config.words_per_core {
        t += 1; // address arithmetic
        let (done, value) = request(t, "lw", i, Kind::Read)?;
        t = done;
        sum += value;
        let add = root.child("add", "Instruction").display_label("add").thread_id(0).begin_at(t)?;
        t += 1;
        add.end_at(t)?;
    }
    let result_addr = config.cores * config.words_per_core + core;
    t = request(t, "sw", result_addr, Kind::Write(sum))?.0;
    memory.send(Msg::Done).map_err(|_| gone())?;
    jets::annotate!(root, "Result", partial_sum = sum)?;
    root.end_at(t)?;
    Ok(t)
}

type Served = (Vec<i64>, u64, u64);

/// The memory thread: serves requests in cycle order once every running core has one pending.
fn serve(
    mut memory: Vec<i64>,
    requests: Receiver<Msg>,
    replies: Vec<Sender<Reply>>,
    root: RecordHandle,
    config: Config,
) -> Result<Served, McError> {
    let mut running = config.cores;
    // Pending requests by (issue cycle, core): the smallest is served first.
    let mut pending: BTreeMap<(u64, usize), (usize, Kind, Arc<RecordHandle>)> = BTreeMap::new();
    let (mut port_free, mut served, mut queued, mut last) = (0u64, 0u64, 0u64, 0u64);
    while running > 0 || !pending.is_empty() {
        if pending.len() < running {
            match requests.recv() {
                Ok(Msg::Request { core, addr, issue, kind, insn }) => {
                    pending.insert((issue, core), (addr, kind, insn));
                }
                Ok(Msg::Done) => running -= 1,
                Err(_) => return Err(McError::Thread("a core stopped without finishing".into())),
            }
            continue;
        }
        let Some(((issue, core), (addr, kind, insn))) = pending.pop_first() else { break };
        let start = issue.max(port_free);
        port_free = start + config.port_interval;
        let done = start + config.latency;
        let (name, value) = match kind {
            Kind::Read => ("read", memory.get(addr).copied()),
            Kind::Write(v) => ("write", memory.get_mut(addr).map(|w| std::mem::replace(w, v))),
        };
        let value = value.ok_or(McError::Fault { core, addr })?;
        // Written on this thread, as a child of a record the core's thread created.
        let req = insn
            .child(name, "MemRequest")
            .field("core", core as u64)
            .field("addr", addr as u64)
            .unit_id(config.cores as u64)
            .thread_id(core as u64)
            .display_label(name)
            .color(Color::rgb(0x9c755f))
            .begin_at(issue)?;
        if start > issue {
            queued += start - issue;
            req.event("PortBusy")
                .description("waited for the memory port")
                .field("waited", start - issue)
                .severity(Severity::Warning)
                .icon("stall")
                .marker_style(MarkerStyle::Box)
                .emit_at(issue)?;
        }
        req.event("Granted").emit_at(start)?;
        req.end_at(done)?;
        drop(insn);
        served += 1;
        last = last.max(done);
        let value = if matches!(name, "read") { value } else { 0 };
        replies[core]
            .send(Reply { value, done })
            .map_err(|_| McError::Thread(format!("core {core} stopped")))?;
    }
    root.end_at(last)?;
    Ok((memory, served, queued))
}

/// Runs the simulation into a new trace at `path`.
pub fn run_to_file(path: &Path, config: Config) -> Result<(Outcome, jets::Summary), McError> {
    let meta = Metadata::new()
        .hardware_model(format!("{} in-order cores, one memory port", config.cores))
        .architecture("shared-memory multicore")
        .clock_frequency_mhz(1000.0);
    let trace = TraceBuilder::new().create(path, meta)?;
    let outcome = run(&trace, config);
    let summary = match &outcome {
        Ok(o) => trace.close_at(o.cycles)?,
        Err(_) => trace.close()?,
    };
    Ok((outcome?, summary))
}

#[cfg(test)]
mod tests;
