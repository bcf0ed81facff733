//! Sinks and lifecycle: compressed files, periodic flushing, close on drop, flush on panic,
//! calls driven by the shared SimClock.

mod common;

use std::io::Read;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use jets::{Metadata, SimClock, Trace, TraceBuilder};

/// Decompresses what is there, tolerating a stream cut short (a writer that has not finished).
fn read_partial(path: &Path) -> String {
    let file = std::fs::File::open(path).expect("open");
    let mut out = Vec::new();
    let result = match path.extension().and_then(|e| e.to_str()) {
        Some("gz") => flate2::read::MultiGzDecoder::new(file).read_to_end(&mut out),
        Some("zst") => zstd::stream::read::Decoder::new(file).expect("zstd").read_to_end(&mut out),
        _ => std::fs::File::open(path).expect("open").read_to_end(&mut out),
    };
    let _ = result; // a truncated stream errors at its end; what was decoded is in `out`
    String::from_utf8_lossy(&out).into_owned()
}

fn small_trace(trace: &Trace) {
    let root = trace.root("root", "Root").begin_at(0).expect("root");
    for i in 0..1000u64 {
        let r = root.child("n", "N").field("i", i).begin_at(i).expect("begin");
        r.event("e").emit_at(i + 1).expect("event");
        r.end_at(i + 2).expect("end");
    }
    root.end_at(2000).expect("end");
}

#[test]
fn gzip_and_zstd_by_extension() {
    let dir = tempfile::tempdir().expect("tempdir");
    for name in ["t.jets.gz", "t.jets.zst", "t.jets"] {
        let path = dir.path().join(name);
        let trace = Trace::create(&path, Metadata::new()).expect("create");
        small_trace(&trace);
        let summary = trace.close().expect("close");
        let text = read_partial(&path);
        let counts = common::check(&text, false).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(counts.records, 1001);
        assert_eq!(summary.bytes, text.len() as u64);
        let on_disk = std::fs::metadata(&path).expect("meta").len();
        if name != "t.jets" {
            assert!(on_disk * 3 < text.len() as u64, "{name} is compressed: {on_disk} bytes");
        }
    }
}

/// A size limit (CAP-LIM-1) counts the lines before compression, and a compressed trace it
/// stopped decompresses whole: the batches left out are whole compressed frames.
#[test]
fn a_size_limit_stops_a_compressed_trace_at_a_frame() {
    let dir = tempfile::tempdir().expect("tempdir");
    for name in ["l.jets.gz", "l.jets.zst"] {
        let path = dir.path().join(name);
        let trace = TraceBuilder::new()
            .capture("limit=64KiB".parse().expect("setting"))
            .create(&path, Metadata::new())
            .expect("create");
        let root = trace.root("root", "Root").begin_at(0).expect("root");
        let mut i = 0u64;
        while !trace.limit_reached() || i < 20_000 {
            let r = root.child("n", "N").field("i", i).begin_at(i).expect("begin");
            r.event("e").emit_at(i + 1).expect("event");
            r.end_at(i + 2).expect("end");
            i += 1;
            if i % 256 == 0 {
                trace.flush().expect("flush");
            }
            assert!(i < 1_000_000, "{name}: the limit was never reached");
        }
        root.end_at(i + 2).expect("end");
        let summary = trace.close().expect("close");
        assert!(summary.limit_reached, "{name}");
        let text = read_partial(&path);
        let counts = common::check(&text, false).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(counts.records < i / 2, "{name}: {} of {i} records written", counts.records);
        assert_eq!(summary.bytes, text.len() as u64, "{name}");
        let limit = 64 << 10;
        assert!((limit..limit + jets::WRITE_BATCH_BYTES as u64).contains(&summary.bytes), "{name}");
    }
}

#[test]
fn compressed_lines_reach_the_disk_within_the_flush_interval() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("live.jets.gz");
    let trace = TraceBuilder::new()
        .flush_interval(Duration::from_millis(50))
        .create(&path, Metadata::new())
        .expect("create");
    let root = trace.root("live", "Root").begin_at(0).expect("root");
    root.event("first").emit_at(1).expect("event");
    // Generous margin over the 50 ms interval: this checks that a flush happens, not its speed.
    let mut seen = false;
    for _ in 0..100 {
        std::thread::sleep(Duration::from_millis(50));
        if read_partial(&path).contains("\"first\"") {
            seen = true;
            break;
        }
    }
    assert!(seen, "the event never reached the file while the trace was open");
    drop(root);
    trace.close().expect("close");
}

#[test]
fn dropping_everything_closes_the_trace() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("dropped.jets");
    {
        let trace = Trace::create(&path, Metadata::new()).expect("create");
        let r = trace.root("r", "R").begin_at(0).expect("root");
        drop(trace); // the handle keeps the writer alive
        r.event("after").emit_at(3).expect("still open");
    }
    let text = std::fs::read_to_string(&path).expect("read");
    let counts = common::check(&text, false).expect("closed with a footer");
    assert_eq!((counts.records, counts.events, counts.ends), (1, 1, 0));
    assert_eq!(counts.footer.expect("footer")["open_records"], 1);
}

#[test]
fn calls_without_clk_read_the_sim_clock() {
    let clock = SimClock::starting_at(100);
    let out = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    struct W(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);
    impl std::io::Write for W {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().expect("lock").extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let trace = TraceBuilder::new()
        .clock(clock.clone())
        .writer(W(out.clone()), Metadata::new())
        .expect("open");
    let r = trace.root("r", "R").begin().expect("begin");
    clock.advance(5);
    r.event("e").emit().expect("event");
    clock.set(50); // behind the record's start: clamped, never before it
    let c = r.child("c", "C").begin().expect("child");
    clock.set(120);
    c.end().expect("end");
    r.end().expect("end");
    trace.close().expect("close");
    let text = String::from_utf8(out.lock().expect("lock").clone()).expect("utf8");
    common::check(&text, false).expect("valid");
    let clks: Vec<u64> = text
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok()?["clk"].as_u64())
        .collect();
    assert_eq!(clks, vec![100, 105, 100, 120, 120]);
}

const CHILD_ENV: &str = "JETS_PANIC_CHILD";

/// Child side of the panic test: a gzip trace whose only flush can come from the panic hook,
/// then a panic that aborts the process (no unwinding, no destructors).
#[test]
fn panic_child_entry() {
    let Ok(path) = std::env::var(CHILD_ENV) else { return };
    std::panic::set_hook(Box::new(|_| std::process::abort()));
    let trace = TraceBuilder::new()
        .flush_interval(Duration::from_secs(3600))
        .flush_on_panic(true)
        .create(&path, Metadata::new())
        .expect("create");
    let r = trace.root("before_panic", "R").begin_at(7).expect("root");
    r.event("last_words").emit_at(8).expect("event");
    std::thread::sleep(Duration::from_millis(100)); // let the writer encode (but not flush) them
    panic!("simulated simulator crash");
}

#[test]
fn panic_hook_flushes_before_the_process_dies() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("panic.jets.gz");
    let status = common::this_binary_running("panic_child_entry")
        .env(CHILD_ENV, &path)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("run child");
    assert!(!status.success(), "the child aborted");
    let text = read_partial(&path);
    assert!(text.contains("last_words"), "flushed by the hook: {text:?}");
    common::check(&text, true).expect("valid prefix");
}

/// The summary says how often, and how long, the emitting calls waited for room in their ring:
/// not at all when the writer keeps up, and for at least one of a slow sink's writes when it
/// does not (a ring of 16 lines, a sink that takes 2 ms a write).
#[test]
fn the_summary_counts_the_waits_for_a_slow_writer() {
    let fast = Trace::to_writer(common::Buf::default(), Metadata::new()).expect("open");
    small_trace(&fast);
    let summary = fast.close().expect("close");
    assert_eq!((summary.waits_for_room, summary.waited_for_room), (0, Duration::ZERO));

    #[derive(Clone, Default)]
    struct Slow(common::Buf, std::sync::Arc<std::sync::atomic::AtomicU64>);
    impl std::io::Write for Slow {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            std::thread::sleep(Duration::from_millis(2));
            self.1.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            self.0.write(b)
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let sink = Slow::default();
    let started = std::time::Instant::now();
    let slow =
        TraceBuilder::new().capacity(16).writer(sink.clone(), Metadata::new()).expect("open");
    small_trace(&slow);
    let summary = slow.close().expect("close");
    let took = started.elapsed();
    common::check(&sink.0.text(), false).expect("every line, valid");
    // Thousands of lines through a ring of 16: the producer waited for many of the writes, each
    // a sleep of 2 ms; the waits are part of the run.
    assert!(sink.1.load(std::sync::atomic::Ordering::Relaxed) > 10, "few writes");
    assert!(summary.waits_for_room > 0, "{summary:?}");
    assert!(summary.waited_for_room >= Duration::from_millis(2), "{summary:?}");
    assert!(summary.waited_for_room <= took, "{summary:?} in {took:?}");
}
