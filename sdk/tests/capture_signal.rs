//! A flight recorder written on demand from outside the process, the run going on (CAP-REC-4):
//! with `JETS_CAPTURE="recorder=N;trigger=SIGUSR1"`, `kill -USR1 PID` writes what the recorder
//! holds. A child process (this test binary, re-run with `JETS_SIGNAL_CHILD`) emits one event a
//! cycle; the parent sends SIGUSR1 while it runs; the trace then holds the recorder's window at
//! the signal and, written at close, the window at the end. A process that handles SIGUSR1
//! itself cannot open such a trace: the open names the clause.
#![cfg(unix)]

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use jets::{Metadata, TraceBuilder};

const CHILD: &str = "JETS_SIGNAL_CHILD";
const WINDOW: u64 = 1000;
const CYCLES: u64 = 20_000;

/// The child's run: a root record and one event a cycle (about 10 a millisecond: two seconds in
/// all, long enough for the signal's dump to come well before the end even on a loaded
/// machine), "ready" on stdout at cycle 1000, closed normally at the end.
fn run(path: &std::path::Path) {
    let trace = TraceBuilder::new().create(path, Metadata::new()).unwrap();
    let root = trace.root("sim", "Simulator").begin_at(0).unwrap();
    for clk in 0..CYCLES {
        root.event_at(clk, "Tick").emit().unwrap();
        if clk == WINDOW {
            println!("ready");
        }
        if clk % 10 == 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    root.end_at(CYCLES).unwrap();
    trace.close().unwrap();
}

/// The child's run with a SIGUSR1 handler of its own: opening the trace fails; prints the error.
fn run_with_own_handler(path: &std::path::Path) {
    extern "C" fn ignore(_: libc::c_int) {}
    // SAFETY: installs a handler that does nothing.
    unsafe { libc::signal(libc::SIGUSR1, ignore as extern "C" fn(libc::c_int) as usize) };
    let e = TraceBuilder::new().create(path, Metadata::new()).unwrap_err();
    println!("error: {e}");
}

/// The child's run after its trace closed: SIGUSR1 has its default action again (it ends the
/// process), as before the trace claimed it.
fn run_then_signal_after_close(path: &std::path::Path) {
    let trace = TraceBuilder::new().create(path, Metadata::new()).unwrap();
    trace.root("sim", "Simulator").begin_at(0).unwrap().end_at(1).unwrap();
    trace.close().unwrap();
    // SAFETY: raises a signal in this process.
    unsafe { libc::raise(libc::SIGUSR1) };
    println!("survived");
}

/// The child's run with 64 traces open already (the signal handlers' table full): opening one
/// more with `trigger=SIGUSR1` fails; prints the error.
fn run_with_table_full(dir: &std::path::Path) {
    let mut open = Vec::new();
    for i in 0..64 {
        // An explicit capture: these do not read JETS_CAPTURE (no trigger).
        let t = TraceBuilder::new()
            .capture(jets::capture::Capture::default())
            .create(dir.join(format!("filler{i}.jets")), Metadata::new())
            .unwrap();
        open.push(t);
    }
    let e = TraceBuilder::new().create(dir.join("one-more.jets"), Metadata::new()).unwrap_err();
    println!("error: {e}");
    for t in open {
        t.close().unwrap();
    }
}

/// The child's run while the parent sends SIGUSR1 again and again: one recorder stays open
/// (every signal finds it), while another thread opens and closes recorders that name the
/// signal too, so that handlers run while those traces leave the handlers' table. The run must
/// go on and its dumps be served. (A handler reading a trace already freed would seldom crash
/// here; what rules it out is the `ACTIVE` count in `write/signals.rs`, by construction.)
fn run_churning(dir: &std::path::Path) {
    let path = dir.join("steady.jets");
    let steady = TraceBuilder::new().create(&path, Metadata::new()).unwrap();
    let root = steady.root("sim", "Simulator").begin_at(0).unwrap();
    println!("ready");
    let churn = std::thread::spawn({
        let dir = dir.to_owned();
        move || {
            for i in 0..300u64 {
                let t = TraceBuilder::new()
                    .create(dir.join(format!("churn{}.jets", i % 4)), Metadata::new())
                    .unwrap();
                t.root("r", "R").begin_at(i).unwrap().end_at(i + 1).unwrap();
                t.close().unwrap();
            }
        }
    });
    let mut clk = 0;
    while !churn.is_finished() {
        root.event_at(clk, "Tick").emit().unwrap();
        clk += 1;
        std::thread::sleep(Duration::from_micros(50));
    }
    churn.join().unwrap();
    // The parent sends signals until this process is gone: once the last recorder naming the
    // signal is closed, it would end the process (its default action), so ignore it from here.
    // SAFETY: sets the signal's action to "ignore".
    unsafe { libc::signal(libc::SIGUSR1, libc::SIG_IGN) };
    root.end_at(clk).unwrap();
    steady.close().unwrap();
    println!("done");
}

/// The entry the parent runs in a child; does nothing in a normal test run.
#[test]
fn child_entry() {
    let Ok(mode) = std::env::var(CHILD) else { return };
    let path = std::env::var("JETS_SIGNAL_PATH").unwrap();
    match mode.as_str() {
        "run" => run(std::path::Path::new(&path)),
        "closed" => run_then_signal_after_close(std::path::Path::new(&path)),
        "table-full" => run_with_table_full(std::path::Path::new(&path)),
        "churning" => run_churning(std::path::Path::new(&path)),
        _ => run_with_own_handler(std::path::Path::new(&path)),
    }
}

fn child(mode: &str, path: &std::path::Path) -> Command {
    let mut c = common::this_binary_running("child_entry");
    c.env(CHILD, mode)
        .env("JETS_SIGNAL_PATH", path)
        .env("JETS_CAPTURE", format!("recorder={WINDOW};trigger=SIGUSR1"));
    c
}

#[test]
fn sigusr1_from_outside_writes_the_recorder_and_the_run_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("usr1.jets");
    let mut run =
        child("run", &path).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let mut lines = BufReader::new(run.stdout.take().unwrap()).lines().map_while(Result::ok);
    // The test harness writes the test's name on the same line.
    let ready = lines.by_ref().any(|l| l.ends_with("ready"));
    assert!(ready, "the child never said it was ready");
    // SAFETY: sends a signal to the child we started (running: we have not waited on it).
    assert_eq!(unsafe { libc::kill(run.id() as libc::pid_t, libc::SIGUSR1) }, 0);
    // The rest of its output, to the end (a closed pipe would fail its last words).
    lines.for_each(drop);
    let out = run.wait_with_output().unwrap();
    assert!(out.status.success(), "{:?}: {}", out.status, String::from_utf8_lossy(&out.stderr));
    let text = std::fs::read_to_string(&path).unwrap();
    let counts = common::check(&text, false).unwrap_or_else(|e| panic!("{e}"));
    let (diags, report) = jets_read::validate::validate_bytes(text.as_bytes());
    assert!(report.errors == 0 && diags.is_empty(), "{diags:?}");
    let footer = counts.footer.expect("a footer");
    assert_eq!(footer["recorder_dumps"], 2, "one dump by the signal, one at close: {footer}");
    let clks: Vec<u64> = text
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["type"] == "event")
        .filter_map(|v| v["clk"].as_u64())
        .collect();
    // The signal's dump: the window up to where the child was then, before close's window.
    assert!(clks.iter().any(|&c| c <= CYCLES - WINDOW), "no line from the signal's dump");
    // Close's dump: the last WINDOW cycles (up to the root's end at CYCLES).
    assert_eq!(clks.iter().max(), Some(&(CYCLES - 1)));
    let last = clks.iter().filter(|&&c| c > CYCLES - WINDOW).count() as u64;
    assert_eq!(last, WINDOW - 1, "events in the last window");
}

/// The child in `mode` (given `path`) finds its open refused, prints the error and exits 0: the
/// error begins with `want`.
fn open_refused(mode: &str, path: &std::path::Path, want: &str) {
    let out = child(mode, path).output().unwrap();
    assert!(out.status.success(), "{:?}: {}", out.status, String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains(&format!("error: {want}")), "{stdout}");
}

#[test]
fn a_process_that_handles_sigusr1_itself_cannot_have_it_dump_the_recorder() {
    let dir = tempfile::tempdir().unwrap();
    open_refused(
        "own-handler",
        &dir.path().join("own.jets"),
        "invalid argument: JETS_CAPTURE clause `trigger=SIGUSR1`: the process handles this \
         signal itself",
    );
}

#[test]
fn after_the_trace_closes_sigusr1_ends_the_process_again() {
    use std::os::unix::process::ExitStatusExt;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("closed.jets");
    let out = child("closed", &path).output().unwrap();
    assert_eq!(out.status.signal(), Some(libc::SIGUSR1), "{:?}", out.status);
    assert!(!String::from_utf8_lossy(&out.stdout).contains("survived"));
    // The trace itself was closed before the signal, whole.
    let text = std::fs::read_to_string(&path).unwrap();
    let counts = common::check(&text, false).unwrap_or_else(|e| panic!("{e}"));
    assert!(counts.footer.is_some());
}

#[test]
fn with_the_handlers_table_full_a_dump_signal_trace_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    // The file the refused open would have replaced.
    let before = "a file from an earlier run\n";
    std::fs::write(dir.path().join("one-more.jets"), before).unwrap();
    open_refused(
        "table-full",
        dir.path(),
        "invalid argument: JETS_CAPTURE clause `trigger=SIGUSR1`: 64 traces are open already",
    );
    // Refused before anything was written: the earlier file is whole, and no temporary file is
    // left beside it.
    assert_eq!(std::fs::read_to_string(dir.path().join("one-more.jets")).unwrap(), before);
    let mut names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    let mut want: Vec<String> = (0..64).map(|i| format!("filler{i}.jets")).collect();
    want.push("one-more.jets".into());
    want.sort();
    assert_eq!(names, want);
}

#[test]
fn dump_signals_while_traces_close_on_another_thread() {
    let dir = tempfile::tempdir().unwrap();
    let mut run = child("churning", dir.path()).stdout(Stdio::piped()).spawn().unwrap();
    let mut lines = BufReader::new(run.stdout.take().unwrap()).lines().map_while(Result::ok);
    assert!(lines.by_ref().any(|l| l.ends_with("ready")), "the child never said it was ready");
    // Signals until the child's output ends (it is then exiting, or gone but not reaped, so
    // its pid is still its own), at most 10 s.
    let stop = Arc::new(AtomicBool::new(false));
    let sender = std::thread::spawn({
        let (pid, stop) = (run.id() as libc::pid_t, Arc::clone(&stop));
        move || {
            let mut sent = 0u32;
            let start = std::time::Instant::now();
            while !stop.load(Ordering::Relaxed) && start.elapsed() < Duration::from_secs(10) {
                // SAFETY: sends a signal to the child we started, not reaped before this thread
                // is joined; once it has exited, the signal is ignored.
                if unsafe { libc::kill(pid, libc::SIGUSR1) } == 0 {
                    sent += 1;
                }
                std::thread::sleep(Duration::from_micros(300));
            }
            sent
        }
    });
    let rest: Vec<String> = lines.collect();
    stop.store(true, Ordering::Relaxed);
    let sent = sender.join().unwrap();
    let status = run.wait().unwrap();
    assert!(status.success(), "{status:?} after {sent} signals");
    assert!(rest.iter().any(|l| l.ends_with("done")), "{rest:?}");
    assert!(sent > 10, "only {sent} signals were sent while the child ran");
    let text = std::fs::read_to_string(dir.path().join("steady.jets")).unwrap();
    let counts = common::check(&text, false).unwrap_or_else(|e| panic!("{e}"));
    let dumps = counts.footer.expect("a footer")["recorder_dumps"].as_u64().unwrap();
    assert!(dumps >= 2, "{dumps} dumps after {sent} signals");
}
