//! The writer under failure: a process killed mid-write, a full disk, a failing `Write`.
//!
//! The crash and file-size tests re-run this test binary as a child process (selected by an
//! environment variable), so that the child can be killed or limited without touching the runner.

mod common;

use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::Failing;
use jets::{Error, Metadata, Trace, TraceBuilder};

const CHILD_ENV: &str = "JETS_TEST_CHILD";
const PATH_ENV: &str = "JETS_TEST_PATH";

/// Runs the test named `test` of this binary in a child process with `mode`.
fn spawn_child(test: &str, mode: &str, path: &Path) -> std::process::Child {
    common::this_binary_running(test)
        .env(CHILD_ENV, mode)
        .env(PATH_ENV, path)
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn child")
}

/// A child that writes forever is killed when the test ends, even when the test fails first
/// (an assertion before the planned SIGKILL must not leave it running).
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Emits forever from two threads: records with children, events, annotations and ends.
fn write_forever(trace: &Trace) -> ! {
    let root = trace.root("root", "Root").begin_at(0).expect("root");
    std::thread::scope(|s| {
        for t in 0..2u64 {
            let root = &root;
            s.spawn(move || {
                let mut clk = 0u64;
                loop {
                    clk += 1;
                    let r = root.child("insn", "Instruction").field("t", t).begin_at(clk);
                    let r = r.expect("begin");
                    let e = r.event("stage").field("n", clk).description("a \"quoted\" stage");
                    e.emit_at(clk).expect("event");
                    r.annotation("a").field("k", t).emit().expect("annotation");
                    let c = r.child("uop", "Uop").begin_at(clk + 1).expect("child");
                    c.end_at(clk + 2).expect("end");
                    r.end_at(clk + 3).expect("end");
                }
            });
        }
    });
    unreachable!("writer threads never return")
}

/// The child side of the tests below; does nothing when run as an ordinary test.
#[test]
fn child_process_entry() {
    let (Ok(mode), Ok(path)) = (std::env::var(CHILD_ENV), std::env::var(PATH_ENV)) else {
        return;
    };
    match mode.as_str() {
        "forever" => {
            let trace = Trace::create(&path, Metadata::new()).expect("create");
            write_forever(&trace)
        }
        "fsize" => {
            // A 64 KiB file-size limit stands in for a full disk: writes past it fail with EFBIG.
            // SIGXFSZ would kill us instead of failing the write, so ignore it.
            // SAFETY: plain libc calls with valid arguments, made before any other thread starts.
            unsafe {
                libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
                let lim = libc::rlimit { rlim_cur: 64 * 1024, rlim_max: 64 * 1024 };
                assert_eq!(libc::setrlimit(libc::RLIMIT_FSIZE, &lim), 0);
            }
            let trace = Trace::create(&path, Metadata::new()).expect("create");
            let root = trace.root("root", "Root").begin_at(0).expect("root");
            let mut reported_while_running = false;
            for clk in 0..100_000u64 {
                let r = root.child("insn", "Instruction").begin_at(clk).expect("begin");
                r.event("e").field("clk", clk).emit_at(clk).expect("event");
                r.end_at(clk + 1).expect("end");
                if clk % 1000 == 0 && trace.error().is_some() {
                    reported_while_running = true;
                }
            }
            drop(root);
            let err = trace.close().expect_err("close must report the failure");
            assert!(matches!(err, Error::Io { .. }), "{err:?}");
            assert!(err.to_string().contains(&path), "error names the file: {err}");
            assert!(reported_while_running, "Trace::error() reported the failure while running");
            std::process::exit(42);
        }
        other => panic!("unknown child mode {other}"),
    }
}

#[test]
fn sigkill_mid_write_leaves_a_valid_prefix() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("crash.jets");
    let mut child = KillOnDrop(spawn_child("child_process_entry", "forever", &path));
    let deadline = Instant::now() + Duration::from_secs(60);
    while std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0) < 4 << 20 {
        assert!(Instant::now() < deadline, "child wrote too little");
        std::thread::sleep(Duration::from_millis(20));
    }
    child.0.kill().expect("SIGKILL");
    child.0.wait().expect("wait");
    let bytes = std::fs::read(&path).expect("read");
    let text = String::from_utf8_lossy(&bytes);
    let counts = common::check(&text, true).expect("every complete line valid and ordered");
    assert!(counts.records > 1000, "{counts:?}");
    assert!(counts.footer.is_none());
}

#[test]
fn full_disk_stops_cleanly_with_a_valid_prefix() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("full.jets");
    let status = spawn_child("child_process_entry", "fsize", &path).wait().expect("wait");
    assert_eq!(status.code(), Some(42), "child checks passed");
    let text = std::fs::read_to_string(&path).expect("read");
    assert!(text.len() <= 64 * 1024);
    // A plain file is cut back to its last complete line: no torn tail at all.
    let counts = common::check(&text, true).expect("valid prefix");
    assert!(counts.footer.is_none(), "no footer: the disk was full");
    assert!(text.ends_with('\n'), "the file ends at a line boundary");
    assert!(counts.records > 10);
}

#[test]
fn dev_full_fails_at_open_with_a_named_error() {
    let err = Trace::create("/dev/full", Metadata::new()).expect_err("no space");
    assert!(err.to_string().contains("/dev/full"), "{err}");
}

#[test]
fn failing_writer_is_reported_and_never_blocks_producers() {
    let w = Failing::new(10_000, false);
    let trace = TraceBuilder::new().capacity(64).writer(w.clone(), Metadata::new()).expect("open");
    let root = trace.root("root", "Root").begin_at(0).expect("root");
    for clk in 0..50_000u64 {
        // Producers keep going: after the failure the writer discards, so nothing blocks forever.
        root.event("e").field("clk", clk).emit_at(clk).expect("emit");
    }
    assert!(trace.error().is_some(), "error visible while running");
    assert!(trace.flush().is_err(), "flush reports it too");
    let err = trace.close().expect_err("close reports it");
    assert!(err.to_string().contains("pipe closed"), "{err}");
    // A generic Write may take part of a line before failing: at most one torn line.
    let text = w.text();
    common::check(&text, true).expect("valid prefix");
}

#[test]
fn closed_trace_refuses_new_lines() {
    let trace = Trace::to_writer(std::io::sink(), Metadata::new()).expect("open");
    let r = trace.root("r", "R").begin_at(5).expect("root");
    trace.close().expect("close");
    assert!(matches!(trace.root("x", "X").begin_at(0), Err(Error::Closed)));
    assert!(matches!(r.event("e").emit_at(6), Err(Error::Closed)));
    assert!(matches!(trace.flush(), Err(Error::Closed)));
    // Closing again returns the same summary.
    assert_eq!(trace.close().expect("again").records, 1);
}

#[test]
fn clk_before_start_is_refused_and_writes_nothing() {
    let w = Failing::new(usize::MAX, false);
    let out = Arc::clone(&w.out);
    let trace = Trace::to_writer(w, Metadata::new()).expect("open");
    let r = trace.root("r", "R").begin_at(10).expect("root");
    let e = r.child("c", "C").begin_at(9).expect_err("child before parent");
    assert!(matches!(e, Error::ClkBeforeStart { clk: 9, start: 10, .. }), "{e:?}");
    assert!(r.event("e").emit_at(3).is_err());
    assert!(matches!(r.event("e").data_json("{bad").emit_at(10), Err(Error::InvalidJson(_))));
    assert!(
        r.child("c", "C").data_json("[1]").begin_at(10).is_err(),
        "record data must be an object"
    );
    assert!(r.end_at(2).is_err());
    let summary = trace.close().expect("close");
    assert_eq!((summary.records, summary.events, summary.record_ends), (1, 0, 0));
    let text = String::from_utf8(out.lock().expect("lock").clone()).expect("utf8");
    assert_eq!(text.lines().count(), 3, "header, root, footer:\n{text}");
}
