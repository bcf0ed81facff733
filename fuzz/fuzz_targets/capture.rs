//! Capture control under any setting and any program (CAP-*).
//!
//! The input is a `JETS_CAPTURE` text, a setting made in code from arbitrary values, and a
//! single-threaded program (records, events, annotations, ends, regions of interest, dumps,
//! capture switched off and on) at arbitrary cycles. Whatever they are:
//! - parsing never panics; a text that parses is accepted by `Capture::check`, and its normalized
//!   spelling parses back to the same setting;
//! - opening a trace with either setting either works or is refused with `InvalidArgument`;
//! - the program never panics (its calls may return errors), and the file it leaves passes the
//!   validator with no error;
//! - a record in the file that the program ended is ended in the file too (CAP-END-1,
//!   CAP-REC-9), unless a size limit stopped capture or the drop policy dropped lines.
//!
//! Single-threaded so that an input replays the same way: the ordering property tests
//! (`sdk/tests/capture.rs`) cover threads.
#![no_main]

use std::collections::HashSet;
use std::io::Write;
use std::sync::{Arc, Mutex};

use jets::capture::{Capture, Recorder, Trigger};
use jets::format::{Severity, Status};
use jets::{Error, Metadata, Policy, RecordHandle, TraceBuilder};
use libfuzzer_sys::arbitrary::{self, Arbitrary, Unstructured};
use libfuzzer_sys::fuzz_target;

/// A few names, so that filters, samples and triggers meet the lines they name.
const NAMES: [&str; 4] = ["Instruction", "IF", "Core", "Refill"];

fn name(i: u8) -> &'static str {
    NAMES[usize::from(i) % NAMES.len()]
}

/// A setting made in code, as `TraceBuilder::capture` takes one: no grammar in the way, so
/// every value reaches `Capture::check` (empty windows, zero periods, a sample of 1 in 0 ...).
#[derive(Arbitrary, Debug)]
struct CodeSetting {
    off: bool,
    window: Option<(u64, u64)>,
    every: Option<u64>,
    roi: bool,
    types: Option<Vec<u8>>,
    events: Option<Vec<u8>>,
    units: Option<Vec<u64>>,
    samples: Vec<(u8, u64)>,
    recorder: Option<(bool, u64)>,
    triggers: Vec<Option<u8>>,
    post_trigger: Option<u64>,
    trigger_dumps: Option<u64>,
    count: bool,
    /// A size limit in bytes: small, so that programs reach it (CAP-LIM-1).
    limit: Option<u16>,
}

impl CodeSetting {
    fn capture(&self) -> Capture {
        let names = |v: &Vec<u8>| v.iter().map(|&i| name(i).to_owned()).collect();
        Capture {
            off: self.off,
            window: self.window.map(|(a, b)| a..b),
            every: self.every,
            roi: self.roi,
            types: self.types.as_ref().map(names),
            events: self.events.as_ref().map(names),
            units: self.units.clone(),
            samples: self.samples.iter().map(|&(t, n)| (name(t).to_owned(), n)).collect(),
            recorder: self.recorder.map(|(bytes, n)| {
                if bytes {
                    Recorder::Bytes(n)
                } else {
                    Recorder::Cycles(n)
                }
            }),
            triggers: self
                .triggers
                .iter()
                .map(|t| t.map_or(Trigger::Error, |i| Trigger::Event(name(i).to_owned())))
                .collect(),
            post_trigger: self.post_trigger,
            trigger_dumps: self.trigger_dumps,
            count: self.count,
            limit: self.limit.map(u64::from),
        }
    }
}

/// One call of the program. Records are referred to by their place among the open ones.
#[derive(Arbitrary, Debug)]
enum Op {
    /// A child of an open record (or a root when there is none), `dt` cycles on.
    Begin {
        parent: u8,
        dt: u16,
        name: u8,
        unit: Option<u8>,
    },
    /// The same through `begin_child_fields_at` (the fields from a closure, made in the box a
    /// record held by its cycle waits in).
    BeginFields {
        parent: u8,
        dt: u16,
        name: u8,
        unit: u8,
    },
    Event {
        record: u8,
        dt: u16,
        name: u8,
        error: bool,
    },
    /// Through `emit_event_at` and `emit_event_fields_at` (no builder).
    EventPlain {
        record: u8,
        dt: u16,
        name: u8,
        value: Option<u64>,
    },
    /// An event and a child record through the builders without a cycle: at the trace clock's
    /// cycle, which `Clock` sets (anywhere, before a record's start too).
    EventNow {
        record: u8,
        name: u8,
    },
    BeginNow {
        parent: u8,
        name: u8,
    },
    Clock {
        dt: u16,
        back: bool,
    },
    Annotate {
        record: u8,
    },
    End {
        record: u8,
        dt: u16,
        flushed: bool,
    },
    RoiBegin,
    RoiEnd,
    Dump,
    Flush,
    On,
    Off,
}

#[derive(Arbitrary, Debug)]
struct Input {
    text: String,
    code: CodeSetting,
    /// Which setting opens the trace: the text's (when it parses) or the one made in code.
    use_code: bool,
    /// A ring of the fewest lines (so that the program fills it), and the policy that then
    /// drops lines rather than wait.
    small_ring: bool,
    drop: bool,
    /// The program's first cycle: anywhere, so that windows and recorders meet `u64::MAX`.
    start: u64,
    /// Closed with `close_at` (its cycle ends the records still open) rather than `close`.
    close_at: Option<u64>,
    ops: Vec<Op>,
}

/// The trace's bytes, shared with the writer thread.
#[derive(Clone, Default)]
struct Bytes(Arc<Mutex<Vec<u8>>>);

impl Write for Bytes {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(input) = Input::arbitrary_take_rest(Unstructured::new(data)) else { return };
    // `JETS_FUZZ_SHOW=1 .../capture ARTIFACT` shows what an input found is.
    if std::env::var_os("JETS_FUZZ_SHOW").is_some() {
        eprintln!("{input:#?}");
    }
    let parsed = input.text.parse::<Capture>();
    if let Ok(c) = &parsed {
        assert_eq!(c.check(), Ok(()), "{:?} parsed but does not pass check", input.text);
        let again = c.to_string().parse::<Capture>();
        assert_eq!(again.as_ref(), Ok(c), "{:?} spelled {:?} reads back otherwise", input.text, c);
    }
    let capture = match (&parsed, input.use_code) {
        (Ok(c), false) => c.clone(),
        _ => input.code.capture(),
    };
    let out = Bytes::default();
    let mut builder = TraceBuilder::new();
    if input.small_ring {
        builder = builder.capacity(16);
    }
    if input.drop {
        builder = builder.policy(Policy::Drop);
    }
    let opened =
        builder.capture(capture.clone()).flush_on_panic(false).writer(out.clone(), Metadata::new());
    let trace = match opened {
        Ok(t) => t,
        Err(Error::InvalidArgument(_)) => return,
        Err(e) => panic!("opening with {capture:?}: {e}"),
    };
    let mut clk = input.start;
    let mut open: Vec<RecordHandle> = Vec::new();
    // The records the program ended (by id; 0 is a record capture left out).
    let mut ended: HashSet<u64> = HashSet::new();
    let pick =
        |open: &Vec<RecordHandle>, i: u8| (!open.is_empty()).then(|| usize::from(i) % open.len());
    for op in &input.ops {
        // Errors (a cycle before a record's start, one past u64::MAX) are the API's answer to
        // a bad call, not a failure here; panics and invalid files are.
        match *op {
            Op::Begin { parent, dt, name: n, unit } => {
                clk = clk.saturating_add(u64::from(dt));
                let builder = match pick(&open, parent) {
                    Some(p) => open[p].child_at(clk, name(n), name(n)),
                    None => trace.root(name(n), name(n)),
                };
                let builder = match unit {
                    Some(u) => builder.field("unit_id", u64::from(u)),
                    None => builder,
                };
                if let Ok(h) = builder.begin_at(clk) {
                    open.push(h);
                }
            }
            Op::BeginFields { parent, dt, name: n, unit } => {
                clk = clk.saturating_add(u64::from(dt));
                if let Some(p) = pick(&open, parent) {
                    let fields = || [("unit_id", u64::from(unit).into()), ("pc", clk.into())];
                    if let Ok(h) = open[p].begin_child_fields_at(clk, name(n), name(n), fields) {
                        open.push(h);
                    }
                }
            }
            Op::EventPlain { record, dt, name: n, value } => {
                clk = clk.saturating_add(u64::from(dt));
                if let Some(r) = pick(&open, record) {
                    let _ = match value {
                        Some(v) => open[r].emit_event_fields_at(clk, name(n), [("v", v.into())]),
                        None => open[r].emit_event_at(clk, name(n)),
                    };
                }
            }
            Op::Event { record, dt, name: n, error } => {
                clk = clk.saturating_add(u64::from(dt));
                if let Some(r) = pick(&open, record) {
                    let e = open[r].event_at(clk, name(n));
                    let e = if error { e.severity(Severity::Error) } else { e };
                    let _ = e.emit();
                }
            }
            Op::EventNow { record, name: n } => {
                if let Some(r) = pick(&open, record) {
                    let _ = open[r].event(name(n)).emit();
                }
            }
            Op::BeginNow { parent, name: n } => {
                if let Some(p) = pick(&open, parent) {
                    if let Ok(h) = open[p].child(name(n), name(n)).begin() {
                        open.push(h);
                    }
                }
            }
            Op::Clock { dt, back } => {
                let now = trace.clock().now();
                trace.clock().set(match back {
                    true => now.saturating_sub(u64::from(dt)),
                    false => clk.saturating_add(u64::from(dt)),
                });
            }
            Op::Annotate { record } => {
                if let Some(r) = pick(&open, record) {
                    let _ = open[r].annotation("note").field("k", 1u64).emit();
                }
            }
            Op::End { record, dt, flushed } => {
                clk = clk.saturating_add(u64::from(dt));
                if let Some(r) = pick(&open, record) {
                    let h = open.swap_remove(r);
                    let id = h.id();
                    let done = match flushed {
                        true => h.end_with_status_at(clk, Status::Flushed),
                        false => h.end_at(clk),
                    };
                    if done.is_ok() && id != 0 {
                        ended.insert(id);
                    }
                }
            }
            Op::RoiBegin => trace.roi_begin(),
            Op::RoiEnd => {
                trace.roi_end();
            }
            Op::Dump => {
                let _ = trace.dump();
            }
            Op::Flush => {
                let _ = trace.flush();
            }
            Op::On => trace.capture_on(),
            Op::Off => trace.capture_off(),
        }
    }
    // Handles dropped without an end leave their records open, as a simulator stopped mid-run
    // does: the footer counts them (`open_records`).
    drop(open);
    let closed = match input.close_at {
        Some(at) => trace.close_at(at),
        None => trace.close(),
    };
    closed.unwrap_or_else(|e| panic!("closing with {capture:?}: {e}"));
    let bytes = out.0.lock().unwrap().clone();
    let (diagnostics, report) = jets_read::validate::validate_bytes(&bytes);
    assert_eq!(
        report.errors,
        0,
        "{capture:?}: {diagnostics:?}\n{}",
        String::from_utf8_lossy(&bytes)
    );
    let text = String::from_utf8_lossy(&bytes);
    let lines: Vec<serde_json::Value> =
        text.lines().filter_map(|l| serde_json::from_str(l).ok()).collect();
    let stopped = lines.last().is_some_and(|f| f["limit_reached"] == true);
    if !stopped && !input.drop {
        let ids = |ty: &str, key: &str| -> HashSet<u64> {
            lines.iter().filter(|l| l["type"] == ty).filter_map(|l| l[key].as_u64()).collect()
        };
        let (records, ends) = (ids("record", "id"), ids("record_end", "record_id"));
        for id in records.intersection(&ended) {
            assert!(ends.contains(id), "{capture:?}: record {id} ended, but not in the file\n{text}");
        }
    }
});
