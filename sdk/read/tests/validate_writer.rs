//! Every trace the writer produces validates clean: nested, multi-threaded, under the drop
//! policy, gzip and zstd, and closed with records still open.

use std::path::Path;

use jets::{Metadata, Policy, Trace, TraceBuilder};
use jets_format::{Color, MarkerStyle, Severity, Status};
use jets_read::validate::{Report, Validator};
use jets_read::Reader;

fn validate(path: &Path) -> Report {
    let mut reader = Reader::open(path).expect("open");
    let mut found = Vec::new();
    let report = Validator::new().run(&mut reader, |d| found.push(d.to_string())).expect("read");
    assert!(found.is_empty(), "{}:\n{}", path.display(), found.join("\n"));
    report
}

/// A core with instructions that have stages, events with hints, annotations; some left open.
fn pipeline(trace: &Trace, threads: u64, insns: u64) {
    let core =
        trace.root("core0", "Core").unit_id(0).color(Color::rgb(0x3366ff)).begin_at(0).unwrap();
    std::thread::scope(|s| {
        for t in 0..threads {
            let core = &core;
            s.spawn(move || {
                let lane =
                    core.child(format!("thread{t}"), "Thread").thread_id(t).begin_at(1).unwrap();
                for i in 0..insns {
                    let clk = 10 + i * 4;
                    let insn = lane
                        .child("add", "Instruction")
                        .field("pc", 0x1000 + i * 4)
                        .display_label("ADD")
                        .status(Status::Complete)
                        .criticality(0.25)
                        .begin_at(clk)
                        .unwrap();
                    let stage = insn.child("EX", "Stage").begin_at(clk + 1).unwrap();
                    insn.event("Stall")
                        .severity(Severity::Warning)
                        .marker_style(MarkerStyle::Diamond)
                        .emit_at(clk + 2)
                        .unwrap();
                    insn.annotation("Operands").data_json(r#"{"rs1":2,"rs2":3}"#).emit().unwrap();
                    stage.end_at(clk + 3).unwrap();
                    if i % 10 != 9 {
                        insn.end_at(clk + 3).unwrap(); // every tenth stays open
                    }
                }
                lane.end_at(10 + insns * 4).unwrap();
            });
        }
    });
    // core stays open: closing with open records is valid.
}

#[test]
fn nested_multi_threaded_compressed_and_plain_traces_validate_clean() {
    let dir = tempfile::tempdir().unwrap();
    for name in ["t.jets", "t.jets.gz", "t.jets.zst"] {
        let path = dir.path().join(name);
        let trace = Trace::create(
            &path,
            Metadata::new().hardware_model("test").clock_frequency_mhz(1000.0),
        )
        .unwrap();
        pipeline(&trace, 4, 500);
        let summary = trace.close().unwrap();
        let report = validate(&path);
        assert_eq!(report.counts.records, summary.records, "{name}");
        assert_eq!(report.counts.events, summary.events, "{name}");
        assert_eq!(report.open_records, summary.open_records, "{name}");
        assert!(report.footer);
    }
}

#[test]
fn drop_policy_traces_validate_clean() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("drop.jets");
    let trace = TraceBuilder::new()
        .policy(Policy::Drop)
        .capacity(64)
        .create(&path, Metadata::new())
        .unwrap();
    pipeline(&trace, 2, 3000);
    let summary = trace.close().unwrap();
    let report = validate(&path);
    assert_eq!(report.counts.records, summary.records);
    assert_eq!(report.counts.events, summary.events);
}

#[test]
fn a_trace_abandoned_mid_run_is_a_valid_prefix_after_repair() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("live.jets");
    let trace = Trace::create(&path, Metadata::new()).unwrap();
    pipeline(&trace, 1, 50);
    trace.flush().unwrap();
    // What a reader sees while the simulator is still running: no footer, open records.
    let text = std::fs::read(&path).unwrap();
    let (d, report) = jets_read::validate::validate_bytes(&text);
    assert!(d.is_empty(), "{d:#?}");
    assert!(!report.footer && report.open_records > 0);
    // Cut it mid-line, as a crash would, and repair it.
    let cut = &text[..text.len() - 7];
    let mut reader = Reader::from_read(std::io::Cursor::new(cut.to_vec()), "cut").unwrap();
    let mut out = Vec::new();
    let rep = jets_read::validate::repair(&mut reader, &mut out, Default::default()).unwrap();
    assert!(rep.torn_tail);
    assert!(jets_read::validate::validate_bytes(&out).0.is_empty());
    trace.close().unwrap();
}

/// Every value of the vocabulary's closed sets, written through the writer's builders, is what
/// the validator accepts: the writer, the vocabulary and the validator cannot drift apart.
#[test]
fn every_vocabulary_value_the_writer_writes_validates_clean() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("vocab.jets");
    let trace = Trace::create(&path, Metadata::new()).expect("trace");
    let root = trace.root("root", "Root").begin_at(0).expect("root");
    for (i, status) in Status::ALL.iter().enumerate() {
        let r = root.child("r", "T").status(*status).begin_at(i as u64).expect("child");
        for severity in Severity::ALL {
            for style in MarkerStyle::ALL {
                r.event("e")
                    .severity(*severity)
                    .marker_style(*style)
                    .emit_at(i as u64)
                    .expect("ev");
            }
        }
        r.end_at(i as u64 + 1).expect("end");
    }
    root.end_at(100).expect("end");
    trace.close().expect("close");
    let (diagnostics, report) = jets_read::validate::validate_bytes(&std::fs::read(&path).unwrap());
    assert!(diagnostics.is_empty(), "{diagnostics:?}");
    assert_eq!(
        report.counts.events as usize,
        Status::ALL.len() * Severity::ALL.len() * MarkerStyle::ALL.len()
    );
}
