//! Records told whole (`RecordHandle::write_complete_child`, CAP-WHOLE-1) write, byte for byte,
//! the trace that the handle calls they stand for write when made at the same moment: the same
//! lines in the same order, the same ids, the same footer counts, under every kind of capture
//! setting and with capture and regions of interest switched while the program runs. The SDK
//! takes shortcuts (everything left out, or everything pushed in one group) only where it can
//! tell the whole record's fate at once; a wrong shortcut shows here as a different file.

mod common;

use common::Buf;

use jets::capture::Capture;
use jets::format::{Field, Status, Str, Value};
use jets::{CompleteEvent, CompleteRecord, Metadata, RecordHandle, TraceBuilder};
use proptest::prelude::*;

/// One step of a program.
#[derive(Clone, Debug)]
enum Step {
    /// A record under the root (`under_core`: under the `core` record instead), beginning
    /// `delay` cycles after the previous one.
    Record {
        under_core: bool,
        delay: u64,
        rec: Rec,
    },
    RoiBegin,
    RoiEnd,
    CaptureOff,
    CaptureOn,
}

#[derive(Clone, Debug)]
struct Rec {
    ty: u8,
    /// Which fields it has (see `fields`).
    fields: u8,
    /// Its events: cycles after its start, names, which fields.
    events: Vec<(u64, u8, u8)>,
    len: u64,
    status: bool,
}

const TYPES: [&str; 3] = ["Instruction", "Request", "Stall"];
const EVENTS: [&str; 4] = ["IF", "ID", "MEM", "WB"];

/// Fields of kind `k`, made fresh for each call: some own nothing (numbers, static texts,
/// hints), some own a text (then the SDK writes the record line by line, cloning them).
fn fields(k: u8, seq: u64) -> Vec<Field> {
    match k % 6 {
        0 => vec![],
        1 => vec![("pc", seq.into()), ("display_label", "addi".into())],
        2 => vec![("seq", seq.into()), ("unit_id", (seq % 3).into()), ("color", "#4e79a7".into())],
        3 => vec![("note", Value::Str(Str::from(format!("n{seq}"))))],
        4 => (0..8)
            .map(|i| (["a", "b", "c", "d", "e", "f", "g", "h"][i], (seq + i as u64).into()))
            .collect(),
        // More than fit inline: written line by line.
        _ => (0..9)
            .map(|i| (["a", "b", "c", "d", "e", "f", "g", "h", "i"][i], (i as u64).into()))
            .collect(),
    }
}

fn event_name(n: u8) -> Str {
    match n as usize {
        i if i < EVENTS.len() => Str::from(EVENTS[i]),
        // A name that owns its text.
        _ => Str::from(format!("E{n}")),
    }
}

fn rec() -> impl Strategy<Value = Rec> {
    (
        0..3u8,
        0..6u8,
        proptest::collection::vec((0..30u64, 0..5u8, 0..4u8), 0..6),
        0..30u64,
        any::<bool>(),
    )
        .prop_map(|(ty, fields, mut events, len, status)| {
            // Events within the record's life, as a simulator's are (not required).
            for e in &mut events {
                e.0 = e.0.min(len);
            }
            Rec { ty, fields, events, len, status }
        })
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        12 => (any::<bool>(), 0..8u64, rec())
            .prop_map(|(under_core, delay, rec)| Step::Record { under_core, delay, rec }),
        1 => Just(Step::RoiBegin),
        1 => Just(Step::RoiEnd),
        1 => Just(Step::CaptureOff),
        1 => Just(Step::CaptureOn),
    ]
}

fn setting() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        Just("off".to_owned()),
        Just("count".to_owned()),
        (0..120u64, 1..60u64).prop_map(|(a, l)| format!("clk={a}..{}", a + l)),
        (0..120u64, 1..60u64).prop_map(|(a, l)| format!("clk={a}..{};count", a + l)),
        (0..60u64, 1..20u64, 1..30u64).prop_map(|(a, l, g)| format!(
            "clk={a}..{};every={}",
            a + l,
            l + g
        )),
        Just("roi".to_owned()),
        (0..120u64, 1..60u64).prop_map(|(a, l)| format!("clk={a}..{};roi", a + l)),
        (0..120u64, 1..60u64).prop_map(|(a, l)| format!("clk={a}..{};events=IF,WB", a + l)),
        Just("types=Instruction,Core,Top".to_owned()),
        Just("units=1".to_owned()),
        Just("events=MEM".to_owned()),
        (1..4u64).prop_map(|n| format!("sample=Instruction:{n}")),
        (1..80u64).prop_map(|n| format!("recorder={n}")),
        (1..80u64).prop_map(|n| format!("recorder={n};trigger=MEM")),
    ]
}

/// Runs `program` under `setting`, each record told whole (`whole`) or through a handle.
fn run(program: &[Step], core_at: u64, setting: &str, whole: bool) -> (String, Vec<String>) {
    let c = Capture::parse(setting).unwrap_or_else(|e| panic!("{setting}: {e}"));
    let buf = Buf::default();
    let t = TraceBuilder::new().capture(c).writer(buf.clone(), Metadata::new()).expect("open");
    let top = t.root("top", "Top").begin_at(0).unwrap();
    let core = top.child_at(core_at, "core", "Core").unit_id(1).begin().unwrap();
    let mut clk = core_at;
    let mut errors = Vec::new();
    for (seq, step) in program.iter().enumerate() {
        let seq = seq as u64;
        match step {
            Step::RoiBegin => t.roi_begin(),
            Step::RoiEnd => {
                t.roi_end();
            }
            Step::CaptureOff => t.capture_off(),
            Step::CaptureOn => t.capture_on(),
            Step::Record { under_core, delay, rec } => {
                clk += delay;
                let parent = if *under_core { &core } else { &top };
                let result = match whole {
                    true => told_whole(parent, rec, clk, seq),
                    false => by_handle(parent, rec, clk, seq),
                };
                errors.push(format!("{result:?}"));
            }
        }
    }
    core.end_at(clk + 40).unwrap();
    top.end_at(clk + 50).unwrap();
    t.close().unwrap();
    (buf.text(), errors)
}

fn told_whole(parent: &RecordHandle, rec: &Rec, start: u64, seq: u64) -> Result<(), jets::Error> {
    let fields = fields(rec.fields, seq);
    let event_fields: Vec<Vec<Field>> =
        rec.events.iter().map(|e| fields_of_event(e.2, seq)).collect();
    let events: Vec<CompleteEvent<'_>> = rec
        .events
        .iter()
        .zip(&event_fields)
        .map(|(&(at, name, _), fields)| CompleteEvent {
            clk: start + at,
            name: event_name(name),
            fields,
        })
        .collect();
    parent.write_complete_child(CompleteRecord {
        name: Str::from(format!("r{seq}")),
        record_type: TYPES[rec.ty as usize].into(),
        start,
        fields: &fields,
        events: &events,
        end: start + rec.len,
        status: rec.status.then_some(Status::Flushed),
    })
}

/// Event fields: none, two numbers, the error hints, or a text that owns itself.
fn fields_of_event(k: u8, seq: u64) -> Vec<Field> {
    match k % 4 {
        0 => vec![],
        1 => vec![("addr", seq.into()), ("hit", true.into())],
        2 => vec![
            ("cause", "branch".into()),
            ("severity", jets::format::Severity::Error.into()),
            ("icon", "flush".into()),
        ],
        _ => vec![("why", Value::Str(Str::from(format!("w{seq}"))))],
    }
}

/// The handle calls a record told whole stands for, in the forms a simulator would write them.
fn by_handle(parent: &RecordHandle, rec: &Rec, start: u64, seq: u64) -> Result<(), jets::Error> {
    let name = format!("r{seq}");
    let ty = TYPES[rec.ty as usize];
    let fields = fields(rec.fields, seq);
    let handle = match fields.len() {
        // The calls without a builder for the common shapes, the builder for the others.
        2 => {
            let [a, b]: [Field; 2] = fields.try_into().unwrap();
            parent.begin_child_fields_at(start, name, ty, || [a, b])?
        }
        0 => parent.begin_child_fields_at(start, name, ty, [])?,
        _ => {
            let mut b = parent.child_at(start, name, ty);
            for (k, v) in fields {
                b = b.field(k, v);
            }
            b.begin()?
        }
    };
    for &(at, n, f) in &rec.events {
        let fields = fields_of_event(f, seq);
        match fields.len() {
            0 => handle.emit_event_at(start + at, event_name(n))?,
            _ => {
                let mut e = handle.event_at(start + at, event_name(n));
                for (k, v) in fields {
                    e = e.field(k, v);
                }
                e.emit()?
            }
        }
    }
    match rec.status {
        true => handle.end_with_status_at(start + rec.len, Status::Flushed),
        false => handle.end_at(start + rec.len),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn records_told_whole_write_what_their_handle_calls_write(
        program in proptest::collection::vec(step(), 0..40),
        core_at in 0..60u64,
        setting in setting(),
    ) {
        let (whole, whole_errors) = run(&program, core_at, &setting, true);
        let (handles, handle_errors) = run(&program, core_at, &setting, false);
        common::check(&whole, false).unwrap_or_else(|e| panic!("{e}\n{whole}"));
        prop_assert_eq!(&whole_errors, &handle_errors);
        prop_assert_eq!(whole, handles, "setting {:?}", setting);
    }
}

/// Bad cycles are refused with nothing written: a start before the parent's, an event or an end
/// before the start.
#[test]
fn a_record_told_whole_with_a_line_before_its_start_writes_nothing() {
    let buf = Buf::default();
    let t = TraceBuilder::new().writer(buf.clone(), Metadata::new()).expect("open");
    let core = t.root("core", "Core").begin_at(10).unwrap();
    let ev = [CompleteEvent { clk: 11, name: "IF".into(), fields: &[] }];
    let record = |start, end, events| CompleteRecord {
        name: "i".into(),
        record_type: "Instruction".into(),
        start,
        fields: &[],
        events,
        end,
        status: None,
    };
    let e = core.write_complete_child(record(9, 12, &ev[..])).unwrap_err();
    assert!(matches!(e, jets::Error::ClkBeforeStart { clk: 9, start: 10, .. }), "{e}");
    let e = core.write_complete_child(record(12, 13, &ev[..])).unwrap_err();
    assert_eq!(
        e.to_string(),
        "invalid argument: event \"IF\" at clk 11 is before the start of record \"i\" at clk 12: \
         nothing written"
    );
    let e = core.write_complete_child(record(12, 11, &[])).unwrap_err();
    assert!(e.to_string().contains("the end at clk 11 is before the start"), "{e}");
    core.write_complete_child(record(11, 12, &ev[..])).unwrap();
    core.end_at(20).unwrap();
    t.close().unwrap();
    let text = buf.text();
    common::check(&text, false).unwrap();
    assert_eq!(text.matches("\"type\":\"record\"").count(), 2, "{text}");
}

/// Threads telling records whole under one parent at once: the trace is valid and holds every
/// record with its events and end.
#[test]
fn records_told_whole_on_several_threads_are_all_written() {
    let buf = Buf::default();
    let t = TraceBuilder::new().writer(buf.clone(), Metadata::new()).expect("open");
    let core = t.root("core", "Core").begin_at(0).unwrap();
    std::thread::scope(|s| {
        for th in 0..4u64 {
            let core = &core;
            s.spawn(move || {
                for i in 0..2000u64 {
                    let fields = [("thread", th.into()), ("i", i.into())];
                    let events = [
                        CompleteEvent { clk: i + 1, name: "IF".into(), fields: &[] },
                        CompleteEvent { clk: i + 2, name: "WB".into(), fields: &fields },
                    ];
                    core.write_complete_child(CompleteRecord {
                        name: "insn".into(),
                        record_type: "Instruction".into(),
                        start: i,
                        fields: &fields,
                        events: &events,
                        end: i + 3,
                        status: (i % 7 == 0).then_some(Status::Flushed),
                    })
                    .unwrap();
                }
            });
        }
    });
    core.end_at(3000).unwrap();
    t.close().unwrap();
    let text = buf.text();
    common::check(&text, false).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(text.matches("\"type\":\"record\"").count(), 1 + 4 * 2000);
    assert_eq!(text.matches("\"type\":\"event\"").count(), 4 * 2000 * 2);
    assert_eq!(text.matches("\"status\":\"flushed\"").count(), 4 * (2000 / 7 + 1));
}
