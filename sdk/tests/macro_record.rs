//! The exact traces `#[jets::record]`, `jets::event!` and `jets::annotate!` write, natively and
//! through `tracing`. They read the lines written, so they need the `enabled` feature;
//! `compiled_out.rs` covers the build without it.
#![cfg(feature = "enabled")]

use std::io::Write;
use std::sync::{Arc, Mutex};

use jets::format::{Color, Severity, Status};
use jets::{Metadata, RecordHandle, Trace};
use tracing_subscriber::layer::SubscriberExt;

#[derive(Clone, Default)]
struct Buffer(Arc<Mutex<Vec<u8>>>);

impl Write for Buffer {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn new_trace() -> (Trace, Buffer) {
    let out = Buffer::default();
    let meta = Metadata::from(serde_json::Map::new()).tool("macro-test");
    (Trace::to_writer(out.clone(), meta).unwrap(), out)
}

/// Closes the trace and returns its text, which `jets_read::validate` finds clean (no error, no warning).
fn finish(trace: Trace, out: Buffer) -> String {
    trace.close().unwrap();
    let text = String::from_utf8(out.0.lock().unwrap().clone()).unwrap();
    let (diagnostics, report) = jets_read::validate::validate_bytes(text.as_bytes());
    assert!(diagnostics.is_empty() && report.is_valid(), "{diagnostics:#?}\n{text}");
    text
}

// ---- native: trace = ..

#[jets::record(trace = parent, record_type = "Instruction", description = "decode and execute",
    clk = start, end_clk = start + 3, unit_id = 1, color = "#FF5722", status = "complete",
    display_label = "ADD", criticality = 0.5, fields(opcode = 0x33u32, "kind.name" = "R"),
    skip(parent, start), ret)]
fn execute(parent: &RecordHandle, start: u64, rs1: u64, neg: i32, name: &str) -> u64 {
    jets::event!(parent, "Issued", clk = start, rs1 = rs1).unwrap();
    rs1 + 1
}

#[jets::record(trace = parent, name = "load", record_type = "Mem", args(addr), err)]
fn load(parent: &RecordHandle, addr: u64, fail: bool) -> Result<u64, std::io::Error> {
    if fail {
        return Err(std::io::Error::other("bus error"));
    }
    Ok(addr * 2)
}

struct Core {
    trace: Trace,
    cycle: u64,
}

impl Core {
    #[jets::record(trace = self.trace, record_type = "Core", clk = self.cycle,
        end_clk = self.cycle, skip_all, status = Status::Running, ret, err)]
    fn step(&mut self, n: u64) -> Result<u64, String> {
        self.cycle += n;
        if n == 0 {
            return Err("no progress".to_owned());
        }
        Ok(self.cycle)
    }
}

#[jets::record(trace = trace, skip_all, clk = 100)]
async fn fetch(trace: &Trace, line: u64) -> u64 {
    tokio::task::yield_now().await;
    trace.clock().set(105);
    line
}

#[test]
fn native_records_free_functions_methods_async_and_options() {
    let (trace, out) = new_trace();
    let root = trace.root("top", "Top").description("").begin_at(0).unwrap();
    assert_eq!(execute(&root, 4, 7, -2, "add"), 8);
    trace.clock().set(10);
    assert_eq!(load(&root, 8, false).unwrap(), 16);
    assert_eq!(load(&root, 9, true).unwrap_err().to_string(), "bus error");
    let mut core = Core { trace: trace.clone(), cycle: 20 };
    assert_eq!(core.step(2), Ok(22));
    assert_eq!(core.step(0), Err("no progress".to_owned()));
    let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
    assert_eq!(rt.block_on(fetch(&trace, 64)), 64);
    jets::annotate!(root, "Summary", description = "typed one-liner", ok = true, ratio = 0.25)
        .unwrap();
    jets::event!(&root, "Marker", clk = 200, color = Color::rgb(0x00ff00), severity = Severity::Warning, what = ?Some(3), shown = %1.5)
        .unwrap();
    root.end_at(200).unwrap();
    assert_eq!(jets::__private::error_count(), 0);
    insta::assert_snapshot!(finish(trace, out));
}

// ---- through tracing and JetsLayer

#[jets::record(record_type = "Instruction", description = "via tracing", clk = 4, end_clk = 9,
    unit_id = 2, color = "#00AA00", status = "stalled", display_label = label, fields(slot = 1),
    skip(label), ret)]
fn traced_insn(pc: u64, taken: bool, label: &str) -> u64 {
    tracing::info!(clk = 5u64, "Decode");
    let _ = inner(pc);
    pc + 4
}

#[jets::record(name = "inner_op", skip_all, clk = 6, err)]
fn inner(pc: u64) -> Result<(), String> {
    if pc > 0 {
        Err(format!("fault at {pc:#x}"))
    } else {
        Ok(())
    }
}

#[test]
fn records_through_the_tracing_layer() {
    let (trace, out) = new_trace();
    let layer = jets::JetsLayer::new(trace.clone());
    let errors = layer.errors();
    tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), || {
        trace.clock().set(3);
        assert_eq!(traced_insn(0x40, true, "BEQ"), 0x44);
        trace.clock().set(12);
    });
    assert_eq!(errors.count(), 0, "{:?}", errors.first());
    insta::assert_snapshot!(finish(trace, out));
}

// ---- expansions that must compile and behave: async with ret/err/end_clk and `?`, generics,
// `impl Trait` returns, `self` by value

#[jets::record(record_type = "Mem", clk = 30, end_clk = 34, ret, err)]
async fn read_word(addr: u64) -> Result<u64, std::num::ParseIntError> {
    tokio::task::yield_now().await;
    let v: u64 = if addr == 0 { "x".parse()? } else { "7".parse()? };
    Ok(v + addr)
}

#[jets::record(trace = trace, skip_all, clk = 40, end_clk = 41, ret, err)]
async fn native_read(trace: &Trace, fail: bool) -> Result<u8, String> {
    tokio::task::yield_now().await;
    if fail {
        Err("parity".to_owned())?;
    }
    Ok(1)
}

#[jets::record(skip_all, clk = 50, end_clk = 50)]
fn evens<T: Into<u64> + Copy>(n: T) -> impl Iterator<Item = u64> {
    (0..n.into()).filter(|i| i % 2 == 0)
}

struct Token(u64);

impl Token {
    #[jets::record(trace = trace, clk = self.0, skip(trace))]
    fn consume(self, trace: &Trace) -> u64 {
        self.0
    }
}

#[test]
fn async_generic_impl_trait_and_by_value_self() {
    let (trace, out) = new_trace();
    let layer = jets::JetsLayer::new(trace.clone());
    let errors = layer.errors();
    let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
    tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), || {
        assert_eq!(rt.block_on(read_word(5)), Ok(12));
        assert!(rt.block_on(read_word(0)).is_err());
        assert_eq!(rt.block_on(native_read(&trace, false)), Ok(1));
        assert_eq!(rt.block_on(native_read(&trace, true)), Err("parity".to_owned()));
        assert_eq!(evens(7u8).collect::<Vec<_>>(), [0, 2, 4, 6]);
        assert_eq!(Token(60).consume(&trace), 60);
        trace.clock().set(70);
    });
    assert_eq!(errors.count(), 0, "{:?}", errors.first());
    insta::assert_snapshot!(finish(trace, out));
}

// ---- native nesting through `handle`

#[jets::record(trace = parent, handle = me, skip(parent), record_type = "Warp")]
fn warp(parent: &RecordHandle, lanes: u32) {
    if let Some(me) = me {
        jets::event!(me, "Issue", lanes = lanes).unwrap();
        for lane in 0..lanes {
            thread_op(me, lane);
        }
    }
}

#[jets::record(trace = warp, skip(warp), record_type = "Lane", end_clk = 3)]
fn thread_op(warp: &RecordHandle, lane: u32) {}

#[test]
fn native_records_nest_through_handle() {
    let (trace, out) = new_trace();
    let sm = trace.root("sm0", "SM").description("").begin_at(0).unwrap();
    warp(&sm, 2);
    sm.end_at(3).unwrap();
    insta::assert_snapshot!(finish(trace, out));
}

// ---- native, optional: `trace = Option<..>` (None: no record, and nothing computed)

#[jets::record(trace = core, skip(core), record_type = "Instruction", clk = pc, end_clk = pc + 1,
    fields(text = described(pc)))]
fn step_maybe(core: Option<&RecordHandle>, pc: u64) -> u64 {
    pc + 4
}

static DESCRIBED: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

fn described(pc: u64) -> String {
    DESCRIBED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("pc {pc:#x}")
}

#[jets::record(trace = trace, skip(trace), record_type = "Core", clk = 0, end_clk = 9, handle = me)]
fn run_maybe(trace: Option<Trace>) -> u64 {
    // The body's own handle is an `Option<&RecordHandle>`: it is a parent as it is.
    step_maybe(me, 0) + step_maybe(me, 4)
}

#[test]
fn native_option_parent_records_only_when_some() {
    use std::sync::atomic::Ordering::Relaxed;
    let (trace, out) = new_trace();
    DESCRIBED.store(0, Relaxed);
    assert_eq!(run_maybe(None), 12);
    assert_eq!(DESCRIBED.load(Relaxed), 0, "a None parent must not compute field values");
    assert_eq!(run_maybe(Some(trace.clone())), 12);
    assert_eq!(DESCRIBED.load(Relaxed), 2);
    let text = finish(trace, out);
    let records: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|v| v["type"] == "record")
        .collect();
    let names: Vec<&str> = records.iter().map(|r| r["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["run_maybe", "step_maybe", "step_maybe"]);
    assert_eq!(records[1]["parent_id"], records[0]["id"]);
    assert_eq!(records[2]["data"]["text"], "pc 0x4");
}

// ---- tracing mode: an explicit parent span

#[jets::record(parent = owner, skip(owner), description = "adopted", clk = 2)]
fn adopted(owner: &tracing::Span, x: u64) {}

#[test]
fn parent_option_names_the_span_to_hang_off() {
    let (trace, out) = new_trace();
    let layer = jets::JetsLayer::new(trace.clone());
    tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), || {
        let owner = tracing::info_span!("owner", description = "o", clk = 1u64);
        let current = tracing::info_span!("current", description = "c", clk = 1u64);
        let _c = current.enter();
        adopted(&owner, 5);
    });
    let text = finish(trace, out);
    let lines: Vec<serde_json::Value> =
        text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let id_of = |name: &str| lines.iter().find(|v| v["name"] == name).unwrap()["id"].clone();
    let rec = lines.iter().find(|v| v["name"] == "adopted").unwrap();
    assert_eq!(rec["parent_id"], id_of("owner"));
    assert_eq!(rec["data"]["x"], 5);
}

// ---- tracing mode: fields and hints computed from temporaries

#[jets::record(skip_all, description = "t", clk = 1, fields(sum = a + b, tag = format!("x{a}"), ratio = a as f64 / 4.0),
    display_label = label.to_uppercase(), status = Status::Running, unit_id = u64::from(b))]
fn temporaries(a: u32, b: u32, label: &str) {}

#[test]
fn tracing_mode_fields_from_temporaries() {
    let (trace, out) = new_trace();
    let layer = jets::JetsLayer::new(trace.clone());
    tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), || {
        temporaries(3, 4, "ld");
    });
    let text = finish(trace, out);
    let rec = text.lines().find(|l| l.contains(r#""name":"temporaries""#)).unwrap();
    let data = &serde_json::from_str::<serde_json::Value>(rec).unwrap()["data"];
    assert_eq!(
        data.to_string(),
        r#"{"display_label":"LD","status":"running","unit_id":4,"sum":7,"tag":"x3","ratio":0.75}"#
    );
}

// Every status the vocabulary defines is accepted as a literal (the macro checks literals against
// jets-vocab, so a status added there needs no change here), `flushed` included.
#[jets::record(trace = parent, clk = 1, end_clk = 2, status = "running")]
fn status_running(parent: &RecordHandle) {}
#[jets::record(trace = parent, clk = 1, end_clk = 2, status = "stalled")]
fn status_stalled(parent: &RecordHandle) {}
#[jets::record(trace = parent, clk = 1, end_clk = 2, status = "complete")]
fn status_complete(parent: &RecordHandle) {}
#[jets::record(trace = parent, clk = 1, end_clk = 2, status = "flushed")]
fn status_flushed(parent: &RecordHandle) {}

#[test]
fn every_status_literal_compiles_and_is_written() {
    let (trace, out) = new_trace();
    let root = trace.root("core", "Core").begin_at(0).unwrap();
    status_running(&root);
    status_stalled(&root);
    status_complete(&root);
    status_flushed(&root);
    root.end_at(3).unwrap();
    let text = finish(trace, out);
    let written: Vec<String> = text
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|v| v["type"] == "record" && v["record_type"] != "Core")
        .map(|v| v["data"]["status"].as_str().unwrap().to_owned())
        .collect();
    let all: Vec<String> = Status::ALL.iter().map(|s| s.as_str().to_owned()).collect();
    assert_eq!(written, all, "one record per status, in vocabulary order");
}
