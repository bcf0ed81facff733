//! The exact bytes of a small deterministic trace.

use std::io::Write;
use std::sync::{Arc, Mutex};

use jets::format::{Color, MarkerStyle, Severity, Status};
use jets::{Metadata, Trace};

/// A `Write` that keeps what it is given, shared with the test.
#[derive(Clone, Default)]
struct Shared(Arc<Mutex<Vec<u8>>>);

impl Write for Shared {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn small_pipeline_trace() {
    let out = Shared::default();
    let meta = Metadata::from(serde_json::Map::new())
        .hardware_model("Tiny5")
        .architecture("RISC Pipeline")
        .clock_frequency_mhz(2520.0)
        .tool("snapshot-test");
    let trace = Trace::to_writer(out.clone(), meta).unwrap();
    let core = trace
        .root("core0", "Core")
        .description("in-order core")
        .unit_id(0)
        .color(Color::rgb(0x3366ff))
        .begin_at(0)
        .unwrap();
    let insn = core
        .child("add", "Instruction")
        .description("add x1, x2, x3")
        .field("pc", 0x1000u64)
        .display_label("ADD")
        .status(Status::Complete)
        .criticality(0.75)
        .begin_at(4)
        .unwrap();
    insn.event("Decode").description("decode stage").field("stage", 1u64).emit_at(5).unwrap();
    insn.event("Stall")
        .description("RAW hazard on \"x2\"")
        .severity(Severity::Warning)
        .marker_style(MarkerStyle::Diamond)
        .icon("stall")
        .emit_at(6)
        .unwrap();
    insn.annotation("Regs")
        .description("operands")
        .data_json(r#"{"rs1":2,"rs2":3}"#)
        .emit()
        .unwrap();
    insn.annotation("Empty").emit().unwrap();
    insn.end_at(9).unwrap();
    let squashed = core.child("beq", "Instruction").begin_at(9).unwrap();
    squashed.end_with_status_at(10, Status::Flushed).unwrap();
    let open =
        core.child("ld", "Instruction").field("neg", -3i64).field("ok", true).begin_at(10).unwrap();
    drop(open); // left open: the footer counts it
    core.end_at(12).unwrap();
    let summary = trace.close().unwrap();
    assert_eq!(summary.records, 4);
    assert_eq!(summary.open_records, 1);
    let text = String::from_utf8(out.0.lock().unwrap().clone()).unwrap();
    insta::assert_snapshot!(text);
}
