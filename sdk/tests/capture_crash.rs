//! A flight recorder is written when the process fails: on a panic, and on SIGSEGV / SIGABRT in a
//! child process (this test binary, re-run with `JETS_CRASH_CHILD`). The trace left behind is
//! valid and holds the last lines before the failure; the child dies of its signal within the
//! handler's bounded wait.
#![cfg(unix)]

mod common;

use std::os::unix::process::ExitStatusExt;
use std::time::{Duration, Instant};

use jets::capture::{Capture, Recorder};
use jets::{Metadata, TraceBuilder};

const CHILD: &str = "JETS_CRASH_CHILD";

/// The simulated run: 1000 instructions of 10 cycles, then the failure at cycle ~9990.
fn simulate(path: &std::path::Path, fail: &str) {
    let c = Capture { recorder: Some(Recorder::Cycles(100)), ..Capture::default() };
    let trace = TraceBuilder::new().capture(c).create(path, Metadata::new()).unwrap();
    let core = trace.root("core", "Core").begin_at(0).unwrap();
    for i in 0..1000u64 {
        let insn = core.child(format!("i{i}"), "Instruction").begin_at(i * 10).unwrap();
        insn.event("EX").emit_at(i * 10 + 3).unwrap();
        insn.end_at(i * 10 + 5).unwrap();
    }
    let last = core.child("i-fail", "Instruction").begin_at(9995).unwrap();
    last.event("before-failure").emit_at(9996).unwrap();
    match fail {
        "panic" => panic!("simulated failure"),
        "segv" => {
            // SAFETY: deliberately raising the signal a bad memory access would.
            unsafe { libc::raise(libc::SIGSEGV) };
        }
        "abort" => std::process::abort(),
        _ => {}
    }
    unreachable!("the failure above ends the process");
}

/// Runs this binary as a child that fails with `fail`; returns its status and the trace text.
fn child(fail: &str) -> (std::process::ExitStatus, String, Duration) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("crash.jets");
    let start = Instant::now();
    let out = common::this_binary_running("child_entry")
        .env(CHILD, fail)
        .env("JETS_CRASH_PATH", &path)
        .output()
        .unwrap();
    let took = start.elapsed();
    let text = std::fs::read_to_string(&path).unwrap_or_default();
    (out.status, text, took)
}

/// The entry the parent runs in a child; does nothing in a normal test run.
#[test]
fn child_entry() {
    if let Ok(fail) = std::env::var(CHILD) {
        let path = std::env::var("JETS_CRASH_PATH").unwrap();
        simulate(std::path::Path::new(&path), &fail);
    }
}

fn check_trace(text: &str) {
    let counts = common::check(text, false).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let (diags, report) = jets_read::validate::validate_bytes(text.as_bytes());
    assert!(report.errors == 0 && diags.is_empty(), "{diags:?}");
    // The last lines before the failure, with their ancestors, and not the start of the run.
    assert!(text.contains("\"name\":\"before-failure\""), "{text}");
    assert!(text.contains("\"name\":\"i998\""));
    assert!(!text.contains("\"name\":\"i500\""), "only the last 100 cycles are kept");
    assert!(text.lines().nth(1).unwrap().contains("\"name\":\"core\""), "the ancestor comes first");
    let footer = counts.footer.expect("footer written by the failure path");
    assert_eq!(footer["capture"], "recorder=100");
    assert!(footer["left_out_records"].as_u64().unwrap() > 900);
}

#[test]
fn a_panic_writes_the_recorder() {
    let (status, text, _) = child("panic");
    assert!(!status.success());
    check_trace(&text);
}

#[test]
fn sigsegv_writes_the_recorder_and_the_process_still_dies_of_it() {
    let (status, text, took) = child("segv");
    assert_eq!(status.signal(), Some(libc::SIGSEGV), "{status:?}");
    assert!(took < Duration::from_secs(30), "bounded: {took:?}");
    check_trace(&text);
}

#[test]
fn sigabrt_writes_the_recorder_and_the_process_still_dies_of_it() {
    let (status, text, took) = child("abort");
    assert_eq!(status.signal(), Some(libc::SIGABRT), "{status:?}");
    assert!(took < Duration::from_secs(30), "bounded: {took:?}");
    check_trace(&text);
}
