//! The exact traces `JetsLayer` writes for instrumented code.

use std::io::Write;
use std::sync::{Arc, Mutex};

use jets::layer::{JetsLayer, LayerErrors};
use jets::{Metadata, Trace};
use tracing::instrument::{Instrument, WithSubscriber};
use tracing_subscriber::layer::SubscriberExt;

/// A `Write` that keeps what it is given, shared with the test.
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

/// Runs `f` with a `JetsLayer` on a fresh trace; returns the whole file, which `jets_read::validate`
/// finds clean (no error, no warning), and asserts the layer met no error.
fn traced(f: impl FnOnce(&Trace)) -> String {
    let out = Buffer::default();
    let meta = Metadata::from(serde_json::Map::new()).tool("layer-test");
    let trace = Trace::to_writer(out.clone(), meta).unwrap();
    let layer = JetsLayer::new(trace.clone());
    let errors: LayerErrors = layer.errors();
    let subscriber = tracing_subscriber::registry().with(layer);
    tracing::subscriber::with_default(subscriber, || f(&trace));
    trace.close().unwrap();
    assert_eq!(errors.count(), 0, "layer errors: {:?}", errors.first());
    let text = String::from_utf8(out.0.lock().unwrap().clone()).unwrap();
    let (diagnostics, report) = jets_read::validate::validate_bytes(text.as_bytes());
    assert!(diagnostics.is_empty() && report.is_valid(), "{diagnostics:#?}\n{text}");
    text
}

/// The trace in a form independent of thread scheduling, for tests with several threads: record
/// ids are taken by threads in blocks and lines of different threads may interleave in any order
/// the spec allows. Records are sorted by (clk, name, data) and renumbered 1, 2, ...; each is
/// followed by its annotations, its events by clk, and its end.
fn canonical(text: &str) -> String {
    use serde_json::Value;
    let lines: Vec<Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let key = |v: &Value| (v["clk"].as_u64(), v["name"].to_string(), v["data"].to_string());
    let mut records: Vec<&Value> = lines.iter().filter(|v| v["type"] == "record").collect();
    records.sort_by_key(|v| key(v));
    let new_id = |old: &Value| -> Value {
        match records.iter().position(|r| r["id"] == *old) {
            Some(i) => Value::from(i as u64 + 1),
            None => old.clone(),
        }
    };
    let mut out = vec![lines[0].to_string()];
    for r in &records {
        let mut rec = (*r).clone();
        rec["id"] = new_id(&r["id"]);
        rec["parent_id"] = new_id(&r["parent_id"]);
        out.push(rec.to_string());
        let mut mine: Vec<&Value> = lines.iter().filter(|v| v["record_id"] == r["id"]).collect();
        let rank = |v: &Value| match v["type"].as_str() {
            Some("annotation") => 0,
            Some("event") => 1,
            _ => 2,
        };
        mine.sort_by_key(|v| (rank(v), v["clk"].as_u64()));
        for l in mine {
            let mut l = l.clone();
            l["record_id"] = new_id(&l["record_id"]);
            out.push(l.to_string());
        }
    }
    out.extend(lines.iter().filter(|v| v["type"] == "footer").map(Value::to_string));
    assert_eq!(out.len(), lines.len(), "every line belongs to a record");
    out.join("\n") + "\n"
}

#[test]
fn nesting_events_late_fields_hints_and_typed_data() {
    let text = traced(|trace| {
        let clock = trace.clock();
        let core = tracing::info_span!(
            "core0",
            record_type = "Core",
            description = "in-order core",
            jets.unit_id = 0,
            jets.color = "#3366FF",
            retired = tracing::field::Empty,
        );
        let _core = core.enter();
        clock.set(4);
        {
            let insn = tracing::info_span!(
                "add",
                record_type = "Instruction",
                description = "add x1, x2, x3",
                pc = 0x1000u64,
                neg = -3i64,
                ratio = 0.5f64,
                ok = true,
                mnemonic = "add x1, x2, x3",
                operands = ?(1, 2),
                jets.display_label = "ADD",
                jets.status = "complete",
                jets.criticality = 0.75,
            );
            let _insn = insn.enter();
            clock.set(5);
            tracing::info!(stage = 1u64, "Decode");
            tracing::warn!(clk = 6u64, jets.icon = "stall", jets.marker_style = "diamond", "Stall");
            tracing::error!(jets.severity = "info", description = "severity given", "Odd");
            clock.set(9);
        }
        clock.set(10);
        // Recorded after creation: an annotation named after the field.
        core.record("retired", 1u64);
        let later =
            tracing::info_span!(parent: None, "later", record_type = "Task", description = "l");
        later.follows_from(&core);
        drop(later);
        tracing::info!("no message fields");
        clock.set(12);
    });
    insta::assert_snapshot!(text);
}

#[test]
fn explicit_parent_clk_end_clk_and_callsite_description() {
    let text = traced(|trace| {
        let a = tracing::info_span!("a", record_type = "Unit", description = "a", clk = 2u64);
        let b = tracing::info_span!("b", record_type = "Unit", description = "b", clk = 3u64);
        let _b = b.enter();
        // Inside b, but its parent is a.
        let c = tracing::info_span!(parent: &a, "c", description = "c", clk = 4u64, end_clk = tracing::field::Empty);
        c.record("end_clk", 8u64);
        tracing::info!(parent: &a, clk = 5u64, "on a");
        tracing::info!(clk = 6u64, "on b");
        // Explicitly a root, although b is entered.
        let r = tracing::info_span!(parent: None, "r", description = "r", clk = 7u64);
        drop(r);
        drop(c);
        trace.clock().set(20);
        // No record_type, no description: the target and the callsite.
        let d = tracing::info_span!("d");
        assert!(!d.is_disabled());
    });
    let line = text.lines().find(|l| l.contains(r#""name":"d""#)).unwrap();
    let v: serde_json::Value = serde_json::from_str(line).unwrap();
    assert_eq!(v["record_type"], "layer_trace");
    let desc = v["description"].as_str().unwrap();
    assert!(desc.starts_with("sdk/tests/layer_trace.rs:"), "{desc}");
    let text = text.replace(desc, "<callsite>");
    insta::assert_snapshot!(text);
}

#[test]
fn threads_events_outside_spans_and_spans_moved_between_threads() {
    let text = traced(|trace| {
        let dispatch = tracing::dispatcher::get_default(|d| d.clone());
        // Named threads, so the per-thread root records have stable names.
        let on = move |name: &str, f: Box<dyn FnOnce() + Send>| {
            let dispatch = dispatch.clone();
            std::thread::Builder::new()
                .name(name.into())
                .spawn(move || tracing::dispatcher::with_default(&dispatch, f))
                .unwrap()
                .join()
                .unwrap()
        };
        trace.clock().set(1);
        let worker = on.clone();
        on(
            "sim",
            Box::new(move || {
                tracing::info!(n = 1u64, "first");
                tracing::info!(n = 2u64, "second");
                // Created here, used on the worker: its events and children still hang off it.
                let moved =
                    tracing::info_span!("moved", record_type = "Task", description = "moved");
                worker(
                    "worker",
                    Box::new(move || {
                        tracing::info!(n = 3u64, "third");
                        let _in = moved.enter();
                        tracing::info!(n = 4u64, "inside moved");
                        let child =
                            tracing::info_span!("child", record_type = "Task", description = "c");
                        drop(child);
                    }),
                );
            }),
        );
        trace.clock().set(2);
    });
    insta::assert_snapshot!(canonical(&text));
}

#[jets::record(record_type = "Stage", description = "one pipeline stage", skip_all)]
async fn stage(i: u64, clock: jets::SimClock) -> u64 {
    tracing::info!(i, "start");
    // Each await is a poll boundary, possibly resumed on another worker thread.
    for _ in 0..3 {
        tokio::task::yield_now().await;
        clock.tick();
    }
    tokio::time::sleep(std::time::Duration::from_millis(1)).await;
    tracing::info!(i, "done");
    i * 10
}

#[test]
fn async_spans_on_a_multi_threaded_runtime_are_one_record_each() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_time()
        .build()
        .unwrap();
    let text = traced(|trace| {
        let clock = trace.clock().clone();
        let dispatch = tracing::dispatcher::get_default(|d| d.clone());
        let outer = dispatch.clone();
        rt.block_on(
            async move {
                let pipeline =
                    tracing::info_span!("pipeline", record_type = "Pipeline", description = "p");
                let mut total = 0;
                for i in 0..3 {
                    // Spawned: runs on a worker thread, under the pipeline span.
                    let fut = stage(i, clock.clone())
                        .instrument(pipeline.clone())
                        .with_subscriber(dispatch.clone());
                    total += tokio::spawn(fut).await.unwrap();
                }
                assert_eq!(total, 30);
            }
            .with_subscriber(outer),
        );
    });
    insta::assert_snapshot!(canonical(&text));
}

#[test]
fn a_clk_before_the_parent_is_counted_and_its_lines_go_to_the_nearest_recorded_ancestor() {
    let out = Buffer::default();
    let trace = Trace::to_writer(out.clone(), Metadata::from(serde_json::Map::new())).unwrap();
    let layer = JetsLayer::new(trace.clone());
    let errors = layer.errors();
    tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), || {
        let parent = tracing::info_span!("parent", description = "p", clk = 5u64);
        let _p = parent.enter();
        let early = tracing::info_span!("early", description = "e", clk = 1u64);
        let _e = early.enter();
        tracing::info!(clk = 6u64, "lands on parent");
    });
    trace.close().unwrap();
    assert_eq!(errors.count(), 1);
    assert!(
        matches!(errors.first(), Some(jets::Error::ClkBeforeStart { clk: 1, start: 5, .. })),
        "{:?}",
        errors.first()
    );
    let text = String::from_utf8(out.0.lock().unwrap().clone()).unwrap();
    let (diagnostics, _) = jets_read::validate::validate_bytes(text.as_bytes());
    assert!(diagnostics.is_empty(), "{diagnostics:#?}");
    assert!(!text.contains(r#""name":"early""#));
    let event = text.lines().find(|l| l.contains("lands on parent")).unwrap();
    assert!(event.contains(r#""record_id":1"#), "{event}");
}

#[test]
fn event_names_are_their_messages_even_when_they_change() {
    let text = traced(|_| {
        let s = tracing::info_span!("s", description = "s");
        let _s = s.enter();
        for i in 0..3u64 {
            tracing::info!(i, "step {i}");
            tracing::info!(i, "fixed");
        }
        tracing::info!(i = 9u64);
    });
    let names: Vec<String> = text
        .lines()
        .filter(|l| l.contains(r#""type":"event""#))
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["name"].to_string())
        .collect();
    let callsite = names.last().unwrap().clone();
    assert!(callsite.starts_with("\"event sdk/tests/layer_trace.rs:"), "{callsite}");
    assert_eq!(
        names[..6],
        ["\"step 0\"", "\"fixed\"", "\"step 1\"", "\"fixed\"", "\"step 2\"", "\"fixed\""]
    );
}

#[test]
fn varying_record_types_and_late_reserved_fields() {
    let text = traced(|trace| {
        for kind in ["Load", "Store", "Load"] {
            let s = tracing::info_span!(
                "op",
                record_type = kind,
                description = kind,
                status = tracing::field::Empty,
            );
            // Without the `jets.` prefix, a late `status` is data, not the hint.
            s.record("status", "plain data");
            drop(s);
        }
        let s = tracing::info_span!(
            "late",
            description = "l",
            jets.status = tracing::field::Empty,
            record_type = tracing::field::Empty
        );
        trace.clock().set(3);
        s.record("jets.status", "stalled");
        s.record("record_type", "Changed");
    });
    let records: Vec<serde_json::Value> =
        text.lines().map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()).collect();
    let types: Vec<&str> = records
        .iter()
        .filter(|v| v["type"] == "record" && v["name"] == "op")
        .map(|v| v["record_type"].as_str().unwrap())
        .collect();
    assert_eq!(types, ["Load", "Store", "Load"]);
    let late: Vec<String> = records
        .iter()
        .filter(|v| {
            v["type"] == "annotation"
                && v["record_id"] == records.iter().find(|r| r["name"] == "late").unwrap()["id"]
        })
        .map(|v| format!("{} {}", v["name"], v["data"]))
        .collect();
    assert_eq!(
        late,
        [r#""status" {"status":"stalled"}"#, r#""record_type" {"record_type":"Changed"}"#]
    );
}

#[test]
fn wide_integers_errors_and_color_spellings() {
    let text = traced(|_| {
        let io = std::io::Error::other("disk full");
        let s = tracing::info_span!(
            "s",
            description = "s",
            big = u128::MAX,
            small = 7u128,
            neg = i128::MIN,
            err = &io as &(dyn std::error::Error + 'static),
            jets.color = 0xff8800u64,
            jets.unknown = 1u64,
        );
        let _s = s.enter();
        tracing::info!(jets.color = "#ABCDEF", jets.unit_id = 3u64, "e");
    });
    let lines: Vec<serde_json::Value> =
        text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let data = &lines.iter().find(|v| v["type"] == "record").unwrap()["data"];
    assert_eq!(data["big"], u128::MAX.to_string(), "beyond 64 bits: exact digits as text");
    assert_eq!(data["small"], 7);
    assert_eq!(data["neg"], i128::MIN.to_string());
    assert_eq!(data["err"], "disk full");
    assert_eq!(data["color"], "#ff8800");
    assert_eq!(data["jets.unknown"], 1, "an unknown jets. name stays as it is");
    let event = &lines.iter().find(|v| v["type"] == "event").unwrap()["data"];
    assert_eq!(event["color"], "#abcdef");
    assert_eq!(event["jets.unit_id"], 3, "unit_id is a record hint, not an event one");
}

/// With capture off the Layer reads fields lean (no value formatted or copied): it must still
/// leave out exactly the lines a captured run writes, kind by kind, so that the footer says what
/// the run would have held. The workload has what the lean reading has to tell apart: text,
/// Debug, error and numeric fields, a message, a `clk`, nested spans, events outside any span,
/// and late fields (an annotation each, unless only `end_clk`).
#[test]
fn capture_off_leaves_out_exactly_what_a_captured_run_writes() {
    use tracing_subscriber::layer::SubscriberExt;
    let workload = || {
        let err = std::io::Error::other("late");
        for i in 0..20u64 {
            let outer = tracing::info_span!("outer", clk = i, op = "add", regs = ?[i, i + 1], late = tracing::field::Empty, end_clk = tracing::field::Empty);
            let _o = outer.enter();
            tracing::info!(clk = i, pc = i * 4, text = "t", "retire");
            tracing::warn!(dbg = ?(i, "x"), message = "stall");
            {
                let inner = tracing::info_span!("inner", record_type = "Stage", description = "d");
                let _i = inner.enter();
                tracing::info!(cycle = i);
            }
            outer.record("late", tracing::field::display("v"));
            outer.record("end_clk", i + 5);
            if i % 2 == 0 {
                outer.record("late", &err as &(dyn std::error::Error + 'static));
            }
        }
        tracing::info!(outside = true, "no span");
    };
    let run = |off: bool| {
        let trace =
            jets::TraceBuilder::new().writer(std::io::sink(), Metadata::new()).expect("open");
        if off {
            trace.capture_off();
        }
        let subscriber = tracing_subscriber::registry().with(JetsLayer::new(trace.clone()));
        tracing::subscriber::with_default(subscriber, workload);
        trace.close().expect("close")
    };
    let (on, off) = (run(false), run(true));
    let written = [on.records, on.events, on.annotations, on.record_ends];
    let left = off.left_out;
    assert!(written.iter().all(|&n| n > 0), "{written:?}");
    assert_eq!([left.records, left.events, left.annotations, left.record_ends], written);
    assert_eq!([off.records, off.events, off.annotations, off.record_ends], [0; 4]);
}

/// CAP-REC-3 through the `tracing` Layer: an `error!` is an event with severity `error`, so
/// `trigger=error` dumps the flight recorder there, with the cycles before it; the lines of
/// the cycles between the dump and the window of the close are left out.
#[test]
fn an_error_event_through_the_layer_triggers_the_flight_recorder() {
    use jets::capture::{Capture, Recorder, Trigger};
    let out = Buffer::default();
    let capture = Capture {
        recorder: Some(Recorder::Cycles(10)),
        triggers: vec![Trigger::Error],
        ..Capture::default()
    };
    let trace =
        jets::TraceBuilder::new().capture(capture).writer(out.clone(), Metadata::new()).unwrap();
    let layer = JetsLayer::new(trace.clone());
    let errors = layer.errors();
    let subscriber = tracing_subscriber::registry().with(layer);
    tracing::subscriber::with_default(subscriber, || {
        for i in 0..100u64 {
            let span = tracing::info_span!("insn", clk = i, end_clk = i + 1, seq = i);
            let _s = span.enter();
            tracing::info!(clk = i, "EX");
            if i == 50 {
                tracing::error!(clk = i, "parity");
            }
        }
    });
    let summary = trace.close().unwrap();
    assert_eq!(errors.count(), 0, "{:?}", errors.first());
    let text = String::from_utf8(out.0.lock().unwrap().clone()).unwrap();
    let (diagnostics, report) = jets_read::validate::validate_bytes(text.as_bytes());
    assert!(diagnostics.is_empty() && report.is_valid(), "{diagnostics:#?}\n{text}");
    let lines: Vec<serde_json::Value> =
        text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let ex: Vec<u64> = lines
        .iter()
        .filter(|l| l["type"] == "event" && l["name"] == "EX")
        .map(|l| l["clk"].as_u64().unwrap())
        .collect();
    // The trigger's window (41..=50) and the close's (90..=99).
    // The trigger's window (41..=50) and the close's (91..=99; its last line is the end at 100).
    let want: Vec<u64> = (41..=50).chain(91..100).collect();
    assert_eq!(ex, want, "{text}");
    let parity = lines.iter().find(|l| l["name"] == "parity").expect("the trigger is written");
    assert_eq!(parity["data"]["severity"], "error");
    // The span the trigger was in ended after the dump: its end is written all the same
    // (CAP-REC-9), as the window's first record's (40, whose end at 41 is in the window).
    let id = &parity["record_id"];
    let end = lines.iter().find(|l| l["type"] == "record_end" && l["record_id"] == *id);
    assert_eq!(end.expect("the end of the trigger's record")["clk"], 51, "{text}");
    let footer = lines.last().unwrap();
    assert_eq!(footer["recorder_dumps"], 2, "{text}");
    assert_eq!(footer["open_records"], 0, "{text}");
    assert_eq!(summary.records, 21);
}
