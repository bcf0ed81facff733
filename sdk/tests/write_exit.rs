//! A trace still open when the process ends is closed (`TraceBuilder::close_at_exit`, on by
//! default): at exit (WR-EXIT-1) and on a signal that ends the process (WR-SIG-1). A child process
//! (this test binary, re-run with `JETS_EXIT_CHILD`) keeps its trace in a `static`, as a global
//! tracer is, emits, and ends with a record still open: by `std::process::exit`, by raising
//! SIGTERM, by Ctrl-C's SIGINT with a flight recorder, or by a SIGTERM sent from outside while it
//! runs. The file it leaves holds every line and a footer that counts the open record. With
//! `close_at_exit(false)` the same exit leaves no footer (what every such run did before the
//! handlers): the check can fail. A process that handles SIGTERM itself keeps its handler, also
//! when it sets it up after the trace is opened, as tokio does, whose handler chains to ours.
#![cfg(unix)]

mod common;

use std::io::{BufRead, BufReader};
use std::os::unix::process::ExitStatusExt;
use std::process::{ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use jets::capture::{Capture, Recorder};
use jets::{Metadata, Trace, TraceBuilder};

const CHILD: &str = "JETS_EXIT_CHILD";
const EVENTS: u64 = 5000;
/// The flight recorder's window in the SIGINT run, in cycles (one event a cycle).
const WINDOW: u64 = 1000;

static TRACE: OnceLock<Trace> = OnceLock::new();

/// How the child's run ends.
#[derive(Clone, Copy, PartialEq)]
enum End {
    /// `exit(3)`, with or without the exit handler.
    Exit { close_at_exit: bool },
    /// `raise` of a signal that ends the process (SIGTERM, SIGHUP).
    Raise(libc::c_int),
    /// Started as `nohup` starts it (SIGHUP ignored), then `raise(SIGHUP)`: nothing happens.
    Nohup,
    /// A flight recorder, then `raise(SIGINT)` (what Ctrl-C sends).
    RecorderInterrupted,
    /// Its own SIGTERM handler, installed before the trace is opened: it keeps it.
    OwnHandler,
    /// Tokio's SIGTERM stream, set up after the trace is opened (its handler chains to the one it
    /// finds, ours): the program still handles SIGTERM itself.
    Tokio,
}

/// The trace every run opens: a long flush interval keeps the writer from writing on its own
/// before the process ends.
fn open(path: &std::path::Path, close_at_exit: bool, capture: Capture) -> &'static Trace {
    TRACE.get_or_init(|| {
        TraceBuilder::new()
            .flush_interval(Duration::from_secs(60))
            .close_at_exit(close_at_exit)
            .capture(capture)
            .create(path, Metadata::new())
            .unwrap()
    })
}

/// The child's run: a root record, `EVENTS` events on it from two threads, a second record ended,
/// then the end it is given, with the root still open.
fn simulate(path: &std::path::Path, end: End) {
    static SIGTERM_SEEN: AtomicBool = AtomicBool::new(false);
    extern "C" fn on_sigterm(_: libc::c_int) {
        SIGTERM_SEEN.store(true, Ordering::SeqCst);
    }
    if end == End::OwnHandler {
        // SAFETY: installs a handler that only stores to an atomic.
        unsafe { libc::signal(libc::SIGTERM, on_sigterm as extern "C" fn(libc::c_int) as usize) };
    }
    if end == End::Nohup {
        // SAFETY: sets the signal's action to "ignore", as `nohup` does before `exec`.
        unsafe { libc::signal(libc::SIGHUP, libc::SIG_IGN) };
    }
    // The raised signal's default action, whatever this process inherited: the tests may run
    // under `nohup` (SIGHUP ignored) or as a shell's background job (SIGINT ignored), and an
    // ignored signal stays ignored with a trace open (`under_nohup_sighup_stays_ignored`).
    let raised = match end {
        End::Raise(sig) => Some(sig),
        End::RecorderInterrupted => Some(libc::SIGINT),
        _ => None,
    };
    if let Some(sig) = raised {
        // SAFETY: sets the signal's action to its default.
        unsafe { libc::signal(sig, libc::SIG_DFL) };
    }
    let close_at_exit = end != End::Exit { close_at_exit: false };
    if end == End::RecorderInterrupted {
        let capture = Capture { recorder: Some(Recorder::Cycles(WINDOW)), ..Capture::default() };
        let root = open(path, close_at_exit, capture).root("sim", "Simulator").begin_at(0).unwrap();
        for clk in 0..EVENTS * 20 {
            root.event_at(clk, "Tick").emit().unwrap();
        }
        // SAFETY: raises a signal on this thread.
        unsafe { libc::raise(libc::SIGINT) };
        unreachable!("SIGINT ends the process");
    }
    let trace = open(path, close_at_exit, Capture::full());
    let root = trace.root("sim", "Simulator").begin_at(0).unwrap();
    std::thread::scope(|s| {
        for half in 0..2 {
            let root = &root;
            s.spawn(move || {
                for i in 0..EVENTS / 2 {
                    root.event("Tick").field("i", i).emit_at(half * EVENTS + i).unwrap();
                }
            });
        }
    });
    root.child("done", "Phase").begin_at(1).unwrap().end_at(2).unwrap();
    match end {
        End::Exit { .. } => std::process::exit(3),
        End::Raise(sig) => {
            // SAFETY: raises a signal on this thread.
            unsafe { libc::raise(sig) };
            unreachable!("the signal ends the process");
        }
        End::Nohup => {
            // SAFETY: raises a signal on this thread; it is ignored.
            unsafe { libc::raise(libc::SIGHUP) };
            root.event("Stopping").emit_at(EVENTS * 2).unwrap();
            root.end_at(EVENTS * 2).unwrap();
            trace.close().unwrap();
        }
        End::OwnHandler => {
            // SAFETY: raises a signal on this thread; its handler only stores to an atomic.
            unsafe { libc::raise(libc::SIGTERM) };
            assert!(SIGTERM_SEEN.load(Ordering::SeqCst), "the process's own handler ran");
            root.event("Stopping").emit_at(EVENTS * 2).unwrap();
            root.end_at(EVENTS * 2).unwrap();
            trace.close().unwrap();
        }
        End::Tokio => {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build();
            runtime.unwrap().block_on(async {
                use tokio::signal::unix::{signal, SignalKind};
                let mut terminate = signal(SignalKind::terminate()).unwrap();
                // SAFETY: raises a signal on this thread.
                unsafe { libc::raise(libc::SIGTERM) };
                let got = tokio::time::timeout(Duration::from_secs(30), terminate.recv()).await;
                assert!(got.is_ok(), "tokio saw the SIGTERM");
            });
            root.event("Stopping").emit_at(EVENTS * 2).unwrap();
            root.end_at(EVENTS * 2).unwrap();
            trace.close().unwrap();
        }
        End::RecorderInterrupted => unreachable!(),
    }
}

/// The child's run when it is killed from outside: it says "ready" once its first lines are
/// out, then emits one event a cycle, about 20 a millisecond, until a signal ends it (or gives
/// up after a minute). Once the trace is closed under it (the signal's handler runs on another
/// thread meanwhile) its calls fail, and it waits for the end.
fn run_until_killed(path: &std::path::Path) {
    let root = open(path, true, Capture::full()).root("sim", "Simulator").begin_at(0).unwrap();
    let started = Instant::now();
    for clk in 0.. {
        if root.event_at(clk, "Tick").emit().is_err() {
            std::thread::sleep(Duration::from_secs(60));
        }
        if clk == 1000 {
            println!("ready");
        }
        if clk % 20 == 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
        if started.elapsed() > Duration::from_secs(60) {
            std::process::exit(1);
        }
    }
}

/// Runs this binary as a child in `mode`; returns how it ended and the trace's text.
fn child(mode: &str) -> (ExitStatus, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("exit.jets");
    let out = common::this_binary_running("child_entry")
        .env(CHILD, mode)
        .env("JETS_EXIT_PATH", &path)
        .output()
        .unwrap();
    assert!(out.stderr.is_empty(), "{}", String::from_utf8_lossy(&out.stderr));
    (out.status, std::fs::read_to_string(&path).unwrap_or_default())
}

/// The entry the parent runs in a child; does nothing in a normal test run.
#[test]
fn child_entry() {
    let Ok(mode) = std::env::var(CHILD) else { return };
    let path = std::env::var("JETS_EXIT_PATH").unwrap();
    let path = std::path::Path::new(&path);
    match mode.as_str() {
        "close" => simulate(path, End::Exit { close_at_exit: true }),
        "keep" => simulate(path, End::Exit { close_at_exit: false }),
        "sigterm" => simulate(path, End::Raise(libc::SIGTERM)),
        "sighup" => simulate(path, End::Raise(libc::SIGHUP)),
        "nohup" => simulate(path, End::Nohup),
        "sigint-recorder" => simulate(path, End::RecorderInterrupted),
        "own-handler" => simulate(path, End::OwnHandler),
        "tokio" => simulate(path, End::Tokio),
        "killed" => run_until_killed(path),
        other => panic!("unknown mode {other}"),
    }
}

/// The trace is valid (the independent checker and `jets validate`'s rules), and has a footer
/// that counts `open` records still open; returns the checker's counts.
fn closed(text: &str, open: u64) -> common::Counts {
    let counts = common::check(text, false).unwrap_or_else(|e| panic!("{e}"));
    let (diags, report) = jets_read::validate::validate_bytes(text.as_bytes());
    assert!(report.errors == 0 && diags.is_empty(), "{diags:?}");
    let footer = counts.footer.as_ref().expect("a footer, written as the process ended");
    assert_eq!(footer["open_records"], open, "{footer}");
    counts
}

#[test]
fn a_trace_open_at_exit_is_closed_with_every_line() {
    let (status, text) = child("close");
    assert_eq!(status.code(), Some(3), "the process keeps its own exit status");
    let counts = closed(&text, 1);
    assert_eq!((counts.records, counts.ends, counts.events), (2, 1, EVENTS));
    assert_eq!(counts.footer.unwrap()["total_events"], EVENTS);
}

#[test]
fn without_close_at_exit_the_footer_is_missing() {
    let (status, text) = child("keep");
    assert_eq!(status.code(), Some(3));
    let counts = common::check(&text, true).unwrap_or_else(|e| panic!("{e}"));
    assert!(counts.footer.is_none(), "nothing closed the trace, yet it has a footer");
}

/// The child in `mode` raises `sig`: the trace is closed with every line, and the process still
/// dies of the signal.
fn closed_then_dies_of(mode: &str, sig: libc::c_int) {
    let (status, text) = child(mode);
    assert_eq!(status.signal(), Some(sig), "{status:?}");
    let counts = closed(&text, 1);
    assert_eq!((counts.records, counts.ends, counts.events), (2, 1, EVENTS));
}

#[test]
fn sigterm_closes_the_trace_and_the_process_still_dies_of_it() {
    closed_then_dies_of("sigterm", libc::SIGTERM);
}

#[test]
fn sighup_closes_the_trace_and_the_process_still_dies_of_it() {
    closed_then_dies_of("sighup", libc::SIGHUP);
}

#[test]
fn under_nohup_sighup_stays_ignored() {
    goes_on_after_the_signal("nohup", "the event emitted after the ignored SIGHUP is there");
}

#[test]
fn ctrl_c_writes_the_flight_recorder_window_and_closes_the_trace() {
    let (status, text) = child("sigint-recorder");
    assert_eq!(status.signal(), Some(libc::SIGINT), "{status:?}");
    let counts = closed(&text, 1);
    // The root (an ancestor) and the last WINDOW cycles' events, up to the last one emitted.
    let last = EVENTS * 20 - 1;
    assert_eq!(counts.max_clk, Some(last));
    assert_eq!(counts.records, 1);
    assert!((WINDOW..=WINDOW + 1).contains(&counts.events), "{} events", counts.events);
    let footer = counts.footer.unwrap();
    assert_eq!(footer["left_out_events"], EVENTS * 20 - counts.events, "{footer}");
}

/// The child in `mode` handles SIGTERM itself (or ignores SIGHUP): it goes on after the signal,
/// emits one more event (`after`, what that says), closes the trace and exits 0.
fn goes_on_after_the_signal(mode: &str, after: &str) {
    let (status, text) = child(mode);
    assert_eq!(status.code(), Some(0), "{status:?}");
    let counts = closed(&text, 0);
    assert_eq!(counts.events, EVENTS + 1, "{after}");
}

#[test]
fn a_process_that_handles_sigterm_itself_keeps_its_handler() {
    goes_on_after_the_signal("own-handler", "the event emitted after the handler ran is there");
}

#[test]
fn a_tokio_program_that_awaits_sigterm_keeps_handling_it() {
    goes_on_after_the_signal("tokio", "the event emitted after tokio saw SIGTERM is there");
}

#[test]
fn a_sigterm_sent_from_outside_closes_the_trace_with_every_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("killed.jets");
    let mut child = common::this_binary_running("child_entry")
        .env(CHILD, "killed")
        .env("JETS_EXIT_PATH", &path)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = BufReader::new(child.stdout.take().unwrap());
    // The test harness writes the test's name on the same line.
    let ready = stdout.lines().map_while(Result::ok).any(|l| l.ends_with("ready"));
    assert!(ready, "the child never said it was ready");
    // SAFETY: sends a signal to the child we started (still running: we have not waited on it).
    assert_eq!(unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) }, 0);
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.signal(), Some(libc::SIGTERM), "{:?}", out.status);
    assert!(out.stderr.is_empty(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = std::fs::read_to_string(&path).unwrap();
    let counts = closed(&text, 1);
    // Every event emitted before the signal, one a cycle from 0: none missing at the end.
    assert!(counts.events > 1000, "{} events", counts.events);
    assert_eq!(counts.max_clk, Some(counts.events - 1));
}
