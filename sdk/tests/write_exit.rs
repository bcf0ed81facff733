//! A trace still open when the process exits is closed by the exit handler
//! (`TraceBuilder::close_at_exit`, on by default). A child process (this test binary, re-run with
//! `JETS_EXIT_CHILD`) keeps its trace in a `static`, as a global tracer is, emits, and calls
//! `std::process::exit` with a record still open; the file it leaves holds every line and a
//! footer that counts the open record. With `close_at_exit(false)` the same run leaves no footer
//! (what every such run did before the handler): the check can fail.
#![cfg(unix)]

mod common;

use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

use jets::{Metadata, Trace, TraceBuilder};

const CHILD: &str = "JETS_EXIT_CHILD";
const EVENTS: u64 = 5000;

static TRACE: OnceLock<Trace> = OnceLock::new();

/// The child's run: a root record, `EVENTS` events on it from two threads, a second record ended,
/// then `exit(3)` with the root still open. A long flush interval keeps the writer from writing
/// on its own before the exit.
fn simulate(path: &std::path::Path, close_at_exit: bool) -> ! {
    let trace = TRACE.get_or_init(|| {
        TraceBuilder::new()
            .flush_interval(Duration::from_secs(60))
            .close_at_exit(close_at_exit)
            .create(path, Metadata::new())
            .unwrap()
    });
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
    std::process::exit(3);
}

/// Runs this binary as a child; returns its exit code and the trace's text.
fn child(mode: &str) -> (Option<i32>, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("exit.jets");
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child_entry", "--nocapture", "--test-threads=1"])
        .env(CHILD, mode)
        .env("JETS_EXIT_PATH", &path)
        .output()
        .unwrap();
    assert!(out.stderr.is_empty(), "{}", String::from_utf8_lossy(&out.stderr));
    (out.status.code(), std::fs::read_to_string(&path).unwrap_or_default())
}

/// The entry the parent runs in a child; does nothing in a normal test run.
#[test]
fn child_entry() {
    if let Ok(mode) = std::env::var(CHILD) {
        let path = std::env::var("JETS_EXIT_PATH").unwrap();
        simulate(std::path::Path::new(&path), mode == "close");
    }
}

#[test]
fn a_trace_open_at_exit_is_closed_with_every_line() {
    let (code, text) = child("close");
    assert_eq!(code, Some(3), "the process keeps its own exit status");
    let counts = common::check(&text, false).unwrap_or_else(|e| panic!("{e}"));
    let (diags, report) = jets_read::validate::validate_bytes(text.as_bytes());
    assert!(report.errors == 0 && diags.is_empty(), "{diags:?}");
    assert_eq!((counts.records, counts.ends, counts.events), (2, 1, EVENTS));
    let footer = counts.footer.expect("a footer, written at exit");
    assert_eq!(footer["open_records"], 1, "the root was still open: {footer}");
    assert_eq!(footer["total_events"], EVENTS);
}

#[test]
fn without_close_at_exit_the_footer_is_missing() {
    let (code, text) = child("keep");
    assert_eq!(code, Some(3));
    let counts = common::check(&text, true).unwrap_or_else(|e| panic!("{e}"));
    assert!(counts.footer.is_none(), "nothing closed the trace, yet it has a footer");
}
