//! Several encoder threads (`TraceBuilder::encoders`): the file is the one a single encoder
//! writes, flush means written, compressed files are complete streams per batch, a failing
//! sink or a panicking `Write` still fails the trace without hanging a producer, and producers
//! that wait for room encode batches beside the encoder threads without breaking any order.

mod common;

use std::io::Read;

use common::{Buf, Failing};
use jets::{Metadata, TraceBuilder};

/// A deterministic single-threaded program, big enough for many batches.
fn program(trace: &jets::Trace, instructions: u64) {
    let root = trace.root("cpu", "Core").begin_at(0).expect("root");
    for i in 0..instructions {
        let r = root.child(format!("i{i}"), "Instruction").field("pc", i * 4).begin_at(i).unwrap();
        r.event("Fetch").field("addr", i).field("hit", i % 3 == 0).emit_at(i).unwrap();
        r.event("Execute").field("op", "add").emit_at(i + 1).unwrap();
        if i % 97 == 0 {
            r.annotation("note").data_json("{\"k\":1}").emit().unwrap();
        }
        r.end_at(i + 2).unwrap();
    }
    root.end_at(instructions + 2).unwrap();
}

fn run(encoders: usize) -> (String, jets::Summary) {
    let out = Buf::default();
    let trace = TraceBuilder::new()
        .capacity(256)
        .encoders(encoders)
        .writer(out.clone(), Metadata::new())
        .expect("open");
    program(&trace, 20_000);
    let summary = trace.close().expect("close");
    (out.text(), summary)
}

#[test]
fn several_encoders_write_the_same_file_as_one() {
    let (one, s1) = run(1);
    let counts = common::check(&one, false).expect("valid");
    assert_eq!(counts.records, 20_001);
    for encoders in [2, 4] {
        let (many, s) = run(encoders);
        assert_eq!(
            many, one,
            "{encoders} encoders: a single producer's file is byte for byte the same"
        );
        // The same counts; the waits for room are the machine's timing, not the file's.
        let counts = |s: &jets::Summary| jets::Summary {
            waits_for_room: 0,
            waited_for_room: std::time::Duration::ZERO,
            ..s.clone()
        };
        assert_eq!(counts(&s), counts(&s1), "{encoders} encoders: same summary");
    }
}

#[test]
fn flush_means_written_with_several_encoders() {
    let out = Buf::default();
    let trace = TraceBuilder::new().encoders(3).writer(out.clone(), Metadata::new()).expect("open");
    let root = trace.root("r", "R").begin_at(0).expect("root");
    for i in 0..5_000u64 {
        root.event("e").field("i", i).emit_at(i).expect("event");
    }
    trace.flush().expect("flush");
    let text = out.text();
    assert_eq!(text.lines().filter(|l| l.contains("\"event\"")).count(), 5_000, "all flushed");
    assert!(text.contains("\"i\":4999"), "the last event before the flush is written");
    root.end_at(5_000).expect("end");
    trace.close().expect("close");
    common::check(&out.text(), false).expect("valid");
}

#[test]
fn compressed_files_from_several_encoders_decompress_to_the_same_trace() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (plain, _) = run(1);
    for ext in ["gz", "zst"] {
        let path = dir.path().join(format!("t.jets.{ext}"));
        let trace = TraceBuilder::new()
            .capacity(256)
            .encoders(2)
            .create(&path, Metadata::new())
            .expect("create");
        program(&trace, 20_000);
        trace.close().expect("close");
        let bytes = std::fs::read(&path).expect("read");
        let mut text = String::new();
        if ext == "gz" {
            flate2::read::MultiGzDecoder::new(&bytes[..]).read_to_string(&mut text).expect("gz");
        } else {
            zstd::stream::read::Decoder::new(&bytes[..])
                .expect("zstd")
                .read_to_string(&mut text)
                .expect("zst");
        }
        assert_eq!(text, plain, "{ext}");
    }
}

#[test]
fn a_failing_or_panicking_sink_fails_the_trace_without_hanging_producers() {
    for panic in [false, true] {
        let w = Failing::new(10_000, panic);
        let trace = TraceBuilder::new()
            .capacity(64)
            .encoders(2)
            .writer(w.clone(), Metadata::new())
            .expect("open");
        let root = trace.root("root", "Root").begin_at(0).expect("root");
        for clk in 0..50_000u64 {
            root.event("e").field("clk", clk).emit_at(clk).expect("emit");
        }
        assert!(trace.flush().is_err(), "flush reports the failure");
        let err = trace.close().expect_err("close reports it");
        let why = if panic { "sink exploded" } else { "pipe closed" };
        assert!(err.to_string().contains(why), "{err}");
        let text = w.text();
        common::check(&text, true).expect("valid prefix");
    }
}

/// A sink slower than the producers (each write waits a while, like a loaded disk), so that
/// their rings fill and they encode batches while they wait.
#[derive(Clone, Default)]
struct Slow(Buf);

impl std::io::Write for Slow {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        std::thread::sleep(std::time::Duration::from_millis(1));
        self.0.write(b)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Producers that wait for room encode batches beside the writer and the encoder threads, all
/// taking from one queue: the file passes the ordering checker, and each thread's events are
/// all there, in the order it emitted them, whoever encoded them.
#[test]
fn producers_that_wait_encode_beside_the_encoder_threads() {
    const THREADS: u64 = 3;
    const EVENTS: u64 = 60_000;
    for encoders in [1, 2] {
        let out = Slow::default();
        let trace = TraceBuilder::new()
            .encoders(encoders)
            .writer(out.clone(), Metadata::new())
            .expect("open");
        std::thread::scope(|s| {
            for t in 0..THREADS {
                let trace = &trace;
                s.spawn(move || {
                    let r = trace.root(format!("core{t}"), "Core").begin_at(0).expect("root");
                    for i in 0..EVENTS {
                        r.event("e").field("t", t).field("i", i).emit_at(i).expect("event");
                    }
                    r.end_at(EVENTS).expect("end");
                });
            }
        });
        trace.close().expect("close");
        let text = out.0.text();
        let counts = common::check(&text, false).expect("valid");
        assert_eq!(counts.events, THREADS * EVENTS, "{encoders} encoders: every event");
        for t in 0..THREADS {
            let mine = format!("\"t\":{t},\"i\":");
            let order: Vec<u64> = text
                .lines()
                .filter_map(|l| l.split(&mine).nth(1))
                .map(|rest| rest.split('}').next().expect("i").parse().expect("number"))
                .collect();
            assert_eq!(order, (0..EVENTS).collect::<Vec<_>>(), "{encoders} encoders, thread {t}");
        }
    }
}
