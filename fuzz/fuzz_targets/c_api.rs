//! libjets' C API (`bindings-c/include/jets.h`) under arbitrary but contract-respecting calls.
//!
//! The input is the options of two traces and a single-threaded program of C API calls on them.
//! Every pointer passed is one the header allows (a NUL-terminated string, NULL where the header
//! accepts it, a whole `jets_attrs`/`jets_options` whose `size` says what is valid, `fields`
//! pointing to at least `field_count` fields); everything the header says is checked is
//! arbitrary: ids (never issued, ended, from the other trace, of a closed trace, `JETS_ID_OFF`),
//! cycles (any `u64`, going backwards, `JETS_CLK_NOW`), names and texts (any bytes, invalid UTF-8,
//! empty), JSON texts, status names, field kinds, interned handles, domains and clocks, struct
//! sizes, options (policy, capacity, flush interval, capture text), push/pop nesting, capture
//! on/off, regions of interest, dumps, flushes, closes and calls after a close. Whatever they are:
//! - no call panics or aborts, and each returns a documented code: `JETS_OK` or a refusal
//!   (`JETS_ERR_INVALID_ARGUMENT` .. `JETS_ERR_UNKNOWN_STRING`), never `JETS_ERR_INTERNAL`,
//!   `JETS_ERR_IO` (the files are on a RAM disk), `JETS_ERR_HOST`, `JETS_ERR_FORKED` or
//!   `JETS_ERR_REENTRANT`; `JETS_ERR_CLOSED` exactly when the trace was closed, for every call on
//!   it; a NULL trace is `JETS_ERR_INVALID_ARGUMENT`; a call returning 0 for failure leaves a
//!   refusal in `jets_last_error_code()` and a message in `jets_last_error()`;
//! - each trace that opened leaves a file with no validator error.
//!
//! The host monitor, signal handlers and fork are left out (process-wide and irreversible), and
//! the program runs on one thread so that an input replays (`tests/api.rs` and
//! `tests/c/safety_test.c` cover threads).
#![no_main]

use std::cell::Cell;
use std::ffi::{c_char, c_int, CStr, CString};
use std::path::PathBuf;
use std::ptr::{null, null_mut};

use jets_c::*;
use libfuzzer_sys::arbitrary::{self, Arbitrary, Unstructured};
use libfuzzer_sys::fuzz_target;

/// Names and texts most inputs use, so that lines meet the records, filters and statuses they
/// name; `Text::Bytes` reaches everything else.
const WORDS: [&str; 8] = ["core0", "Core", "IF", "Instruction", "", "complete", "flushed", "é"];

/// A string argument: NULL, a common word, or any bytes (cut at the first NUL).
#[derive(Arbitrary, Debug, Clone)]
enum Text {
    Null,
    Word(u8),
    Bytes(Vec<u8>),
}

impl Text {
    fn c(&self) -> Option<CString> {
        match self {
            Text::Null => None,
            Text::Word(i) => Some(CString::new(WORDS[usize::from(*i) % WORDS.len()]).unwrap()),
            Text::Bytes(b) => {
                let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
                Some(CString::new(&b[..end]).unwrap())
            }
        }
    }
}

/// A JSON argument: NULL, a well-formed object or value, or any text.
#[derive(Arbitrary, Debug, Clone)]
enum Json {
    Null,
    Object(Vec<(u8, i64)>),
    Number(f64),
    Array(Vec<u32>),
    Text(Text),
}

impl Json {
    fn c(&self) -> Option<CString> {
        let text = match self {
            Json::Null => return None,
            Json::Object(kv) => {
                let members: Vec<String> = kv
                    .iter()
                    .map(|(k, v)| format!("\"{}\":{v}", WORDS[usize::from(*k) % WORDS.len()]))
                    .collect();
                format!("{{{}}}", members.join(","))
            }
            Json::Number(f) => format!("{f}"),
            Json::Array(v) => format!("{v:?}"),
            Json::Text(t) => return t.c(),
        };
        Some(CString::new(text).unwrap())
    }
}

/// An id argument.
#[derive(Arbitrary, Debug, Clone, Copy)]
enum IdRef {
    Zero,
    Off,
    /// One handed out earlier (by either trace; ended or not), picked by index.
    Issued(u8),
    /// One handed out earlier, its bits changed (another generation, slot or the dropped flag).
    Flipped(u8, u64),
    Raw(u64),
}

/// A cycle argument.
#[derive(Arbitrary, Debug, Clone, Copy)]
enum Clk {
    /// The program's cycle, moved on.
    Later(u16),
    /// The program's cycle, moved back (without changing it).
    Earlier(u16),
    Now,
    BeforeNow,
    Raw(u64),
}

/// An interned handle argument.
#[derive(Arbitrary, Debug, Clone, Copy)]
enum StrRef {
    Zero,
    Interned(u8),
    Raw(u32),
}

/// A typed field: the kind mostly a real one, the value made to fit it.
#[derive(Arbitrary, Debug, Clone)]
struct Field {
    key: StrRef,
    kind: u8,
    raw: u64,
    str_value: StrRef,
    text: Text,
}

/// How big the caller says its `jets_attrs` is.
#[derive(Arbitrary, Debug, Clone, Copy)]
enum AttrsSize {
    Ours,
    /// The first version (no `domain`, no `clock`).
    First,
    /// A newer header's, with a member after ours.
    Larger,
    /// Too small: refused.
    Smaller(u8),
}

#[derive(Arbitrary, Debug, Clone)]
struct AttrsSpec {
    null: bool,
    size: AttrsSize,
    name: StrRef,
    record_type: StrRef,
    description: StrRef,
    fields: Vec<Field>,
    /// NULL `fields` (refused unless `field_count` is 0).
    null_fields: bool,
    /// `field_count`, at most `fields.len()` (unless `fields` is NULL).
    count: u8,
    data_json: Json,
    domain: u8,
    clock: u8,
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum Capacity {
    Default,
    Small(u8),
    /// Past `TraceBuilder::MAX_CAPACITY`: refused. (A large capacity that is accepted only costs
    /// memory, which is no finding.)
    TooLarge(u64),
}

#[derive(Arbitrary, Debug, Clone)]
struct Options {
    /// `size`: ours, the first version's (no `capture`), or a few bytes less than that.
    size: u8,
    policy: u32,
    capacity: Capacity,
    flush_interval_us: u64,
    capture: Option<Text>,
    capture_words: Option<Vec<(u8, u64, u64)>>,
}

#[derive(Arbitrary, Debug, Clone)]
struct Opening {
    metadata: Json,
    /// `clock_frequency_mhz` in the metadata (so that clocks can be made).
    mhz: Option<f64>,
    options: Option<Options>,
}

#[derive(Arbitrary, Debug, Clone)]
enum Op {
    Intern(Text),
    Begin { parent: IdRef, clk: Clk, name: Text, record_type: Text, desc: Text, json: Json },
    BeginEx { parent: IdRef, clk: Clk, attrs: AttrsSpec },
    End { id: IdRef, clk: Clk },
    EndStatus { id: IdRef, clk: Clk, status: Text },
    Event { id: IdRef, clk: Clk, name: Text, desc: Text, json: Json },
    EventEx { id: IdRef, clk: Clk, attrs: AttrsSpec },
    Annotation { id: IdRef, name: Text, desc: Text, json: Json },
    AnnotationEx { id: IdRef, attrs: AttrsSpec },
    Counter { id: IdRef, clk: Clk, name: StrRef, value: f64 },
    SetClock(Clk),
    Flush,
    Close,
    CloseAt(Clk),
    CaptureOn,
    CaptureOff,
    LimitReached,
    RoiBegin,
    RoiEnd,
    Dump,
    ClockCreate { name: Text, mhz: f64 },
    ClockSet { clock: u8, clk: Clk },
    SetEnabled(bool),
    DomainCreate(Text),
    DomainSetEnabled { domain: u8, on: bool },
    Push { clk: Clk, attrs: AttrsSpec },
    Pop(Clk),
    StatusName(i32),
}

#[derive(Arbitrary, Debug)]
struct Input {
    traces: [Opening; 2],
    start: u64,
    /// Each call on trace 0 or 1 (the flag), or on a NULL trace (`null`).
    ops: Vec<(bool, bool, Op)>,
}

/// Codes a call may return on an open trace, or on a NULL one.
fn refusal(code: c_int) -> bool {
    (JETS_ERR_UNKNOWN_STRING..=JETS_ERR_INVALID_ARGUMENT).contains(&code)
}

struct Program {
    clk: u64,
    ids: Vec<jets_id>,
    strs: Vec<jets_str>,
    clocks: Vec<jets_clock>,
    domains: Vec<jets_domain>,
}

impl Program {
    fn id(&self, r: IdRef) -> jets_id {
        let pick = |i: u8| match self.ids.is_empty() {
            true => 1,
            false => self.ids[usize::from(i) % self.ids.len()],
        };
        match r {
            IdRef::Zero => 0,
            IdRef::Off => JETS_ID_OFF,
            IdRef::Issued(i) => pick(i),
            IdRef::Flipped(i, bits) => pick(i) ^ bits,
            IdRef::Raw(v) => v,
        }
    }

    fn clk(&mut self, c: Clk) -> u64 {
        match c {
            Clk::Later(d) => {
                self.clk = self.clk.saturating_add(u64::from(d)).min(u64::MAX - 1);
                self.clk
            }
            Clk::Earlier(d) => self.clk.saturating_sub(u64::from(d)),
            Clk::Now => JETS_CLK_NOW,
            Clk::BeforeNow => u64::MAX - 1,
            Clk::Raw(v) => v,
        }
    }

    fn str(&self, s: StrRef) -> jets_str {
        match s {
            StrRef::Zero => 0,
            StrRef::Interned(i) if !self.strs.is_empty() => {
                self.strs[usize::from(i) % self.strs.len()]
            }
            StrRef::Interned(i) => u32::from(i),
            StrRef::Raw(v) => v,
        }
    }

    fn handle(list: &[u32], i: u8) -> u32 {
        match (list.is_empty(), i) {
            (_, 0) => 0,
            (true, i) => u32::from(i),
            (false, i) if i >= 200 => u32::from(i),
            (false, i) => list[usize::from(i) % list.len()],
        }
    }
}

/// A `jets_attrs` and everything it points to, alive as long as this is.
struct AttrsBox {
    newer: Newer,
    _fields: Vec<jets_field>,
    _texts: Vec<Option<CString>>,
    _json: Option<CString>,
    null: bool,
}

#[repr(C)]
struct Newer {
    a: jets_attrs,
    future: u64,
}

impl AttrsBox {
    fn new(p: &Program, s: &AttrsSpec) -> AttrsBox {
        let texts: Vec<Option<CString>> = s.fields.iter().map(|f| f.text.c()).collect();
        let fields: Vec<jets_field> = s
            .fields
            .iter()
            .zip(&texts)
            .map(|(f, text)| {
                // Mostly the six kinds, sometimes one that is not.
                let kind = match f.kind {
                    k @ 0..=239 => u32::from(k % 6 + 1),
                    k => u32::from(k - 240) * 7,
                };
                let value = match kind {
                    JETS_FIELD_TEXT => {
                        jets_value { text: text.as_ref().map_or(null(), |t| t.as_ptr()) }
                    }
                    JETS_FIELD_STR => {
                        let mut v = jets_value { u64: 0 };
                        v.str = p.str(f.str_value);
                        v
                    }
                    _ => jets_value { u64: f.raw },
                };
                jets_field { key: p.str(f.key), kind, value }
            })
            .collect();
        let json = s.data_json.c();
        let ours = std::mem::size_of::<jets_attrs>() as u32;
        let first = std::mem::offset_of!(jets_attrs, domain) as u32;
        let size = match s.size {
            AttrsSize::Ours => ours,
            AttrsSize::First => first,
            AttrsSize::Larger => std::mem::size_of::<Newer>() as u32,
            AttrsSize::Smaller(n) => first.saturating_sub(u32::from(n % 16) + 1),
        };
        let (ptr, count) = match s.null_fields {
            true => (null(), usize::from(s.count % 4)),
            false => (fields.as_ptr(), usize::from(s.count).min(fields.len())),
        };
        let a = jets_attrs {
            size,
            name: p.str(s.name),
            record_type: p.str(s.record_type),
            description: p.str(s.description),
            fields: ptr,
            field_count: count,
            data_json: json.as_ref().map_or(null(), |j| j.as_ptr()),
            domain: Program::handle(&p.domains, s.domain),
            clock: Program::handle(&p.clocks, s.clock),
        };
        AttrsBox {
            newer: Newer { a, future: 7 },
            _fields: fields,
            _texts: texts,
            _json: json,
            null: s.null,
        }
    }

    fn ptr(&self) -> *const jets_attrs {
        if self.null {
            null()
        } else {
            &self.newer.a
        }
    }
}

fn opt(t: &Option<CString>) -> *const c_char {
    t.as_ref().map_or(null(), |s| s.as_ptr())
}

fn last_error() -> String {
    // SAFETY: jets_last_error returns a valid NUL-terminated string.
    unsafe { CStr::from_ptr(jets_last_error()) }.to_string_lossy().into_owned()
}

/// A per-process directory on the RAM disk when there is one.
fn dir() -> PathBuf {
    let base = match std::path::Path::new("/dev/shm").is_dir() {
        true => PathBuf::from("/dev/shm"),
        false => std::env::temp_dir(),
    };
    base.join(format!("jets-fuzz-c-api-{}", std::process::id()))
}

/// One trace of the program: its handle (NULL when it did not open) and whether it was closed.
struct Slot {
    t: *mut jets_trace,
    path: PathBuf,
    closed: Cell<bool>,
}

impl Slot {
    /// Checks a status-returning call's code.
    fn check(&self, what: &str, op: &Op, rc: c_int) {
        if self.t.is_null() {
            assert_eq!(rc, JETS_ERR_INVALID_ARGUMENT, "{what} on a NULL trace: {op:?}");
        } else if self.closed.get() {
            assert_eq!(rc, JETS_ERR_CLOSED, "{what} on a closed trace: {op:?}");
        } else {
            assert!(
                rc == JETS_OK || refusal(rc),
                "{what} returned {rc} ({}): {op:?}",
                last_error()
            );
        }
        if rc != JETS_OK {
            assert_eq!(jets_last_error_code(), rc, "{what}: last code: {op:?}");
            assert!(!last_error().is_empty(), "{what}: no message: {op:?}");
        }
    }

    /// Checks a handle-returning call (0 on failure).
    fn check_handle(&self, what: &str, op: &Op, h: u64) {
        let rc = if h == 0 { jets_last_error_code() } else { JETS_OK };
        if h == 0 {
            assert_ne!(rc, JETS_OK, "{what} returned 0 with no error: {op:?}");
        }
        self.check(what, op, rc);
    }
}

fn open(path: &std::path::Path, o: &Opening) -> (c_int, *mut jets_trace) {
    let p = CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    let meta = match (&o.metadata, o.mhz) {
        (Json::Null, Some(mhz)) => {
            Some(CString::new(format!("{{\"clock_frequency_mhz\":{mhz}}}")).unwrap())
        }
        (m, _) => m.c(),
    };
    let capture = o.options.as_ref().and_then(|op| match (&op.capture_words, &op.capture) {
        (Some(words), _) => {
            let clauses: Vec<String> = words
                .iter()
                .map(|&(k, a, b)| match k % 9 {
                    0 => format!("clk={a}..{b}"),
                    8 => format!("limit={}B", a % 65536),
                    1 => format!("every={a}"),
                    2 => format!("recorder={a}"),
                    3 => "trigger=error".to_owned(),
                    4 => "roi".to_owned(),
                    5 => "off".to_owned(),
                    6 => format!("types={}", WORDS[(a % 8) as usize]),
                    _ => format!("sample={}:{b}", WORDS[(a % 8) as usize]),
                })
                .collect();
            Some(CString::new(clauses.join(";")).unwrap())
        }
        (None, Some(t)) => t.c(),
        (None, None) => None,
    });
    let options = o.options.as_ref().map(|op| {
        let ours = std::mem::size_of::<jets_options>() as u32;
        let first = std::mem::offset_of!(jets_options, capture) as u32;
        jets_options {
            size: match op.size % 4 {
                0 | 1 => ours,
                2 => first,
                _ => first - 1 - u32::from(op.size % 8),
            },
            policy: if op.policy < 0x8000_0000 { op.policy % 2 } else { op.policy },
            queue_capacity: match op.capacity {
                Capacity::Default => 0,
                Capacity::Small(n) => u64::from(n),
                Capacity::TooLarge(n) => n.max(1 << 26).saturating_add(1),
            },
            flush_interval_us: op.flush_interval_us,
            capture: opt(&capture),
        }
    });
    let mut t = null_mut();
    let o_ptr = options.as_ref().map_or(null(), |o| o as *const jets_options);
    // SAFETY: `p` and `meta` are NUL-terminated or NULL, `o_ptr` is NULL or a whole
    // `jets_options` (whose `capture` is NULL or NUL-terminated), `t` is writable; all live across
    // the call.
    let rc = unsafe { jets_open_ex(p.as_ptr(), opt(&meta), o_ptr, &mut t) };
    (rc, t)
}

fuzz_target!(|data: &[u8]| {
    let Ok(input) = Input::arbitrary_take_rest(Unstructured::new(data)) else { return };
    // `JETS_FUZZ_SHOW=1 .../c_api ARTIFACT` shows what an input found is.
    if std::env::var_os("JETS_FUZZ_SHOW").is_some() {
        eprintln!("{input:#?}");
    }
    let dir = dir();
    std::fs::create_dir_all(&dir).expect("temporary directory");
    let mut slots: Vec<Slot> = Vec::new();
    for (i, o) in input.traces.iter().enumerate() {
        let path = dir.join(format!("t{i}.jets"));
        let (rc, t) = open(&path, o);
        match rc {
            JETS_OK => assert!(!t.is_null()),
            JETS_ERR_INVALID_ARGUMENT | JETS_ERR_INVALID_JSON | JETS_ERR_INVALID_UTF8 => {
                assert!(t.is_null());
                assert_eq!(jets_last_error_code(), rc);
            }
            rc => panic!("jets_open_ex returned {rc}: {} ({o:?})", last_error()),
        }
        slots.push(Slot { t, path, closed: Cell::new(false) });
    }
    let null_slot = Slot { t: null_mut(), path: PathBuf::new(), closed: Cell::new(false) };
    let mut p = Program {
        clk: input.start.min(u64::MAX - 1),
        ids: Vec::new(),
        strs: Vec::new(),
        clocks: Vec::new(),
        domains: Vec::new(),
    };
    for (which, null, op) in &input.ops {
        let slot = match null {
            true => &null_slot,
            false => &slots[usize::from(*which)],
        };
        let t = slot.t;
        // SAFETY (every call below): `t` is NULL or a handle from `jets_open` (closed or not),
        // used on this thread only; every string is NULL or NUL-terminated and every `jets_attrs`
        // is NULL or whole, with `fields` pointing to at least `field_count` fields, all alive
        // across the call (`AttrsBox`).
        unsafe {
            match op {
                Op::Intern(text) => {
                    let s = text.c();
                    let h = jets_intern(opt(&s));
                    match h {
                        0 => assert!(matches!(
                            jets_last_error_code(),
                            JETS_ERR_INVALID_ARGUMENT | JETS_ERR_INVALID_UTF8
                        )),
                        h => p.strs.push(h),
                    }
                }
                Op::Begin { parent, clk, name, record_type, desc, json } => {
                    let (n, ty, d, j) = (name.c(), record_type.c(), desc.c(), json.c());
                    let (parent, clk) = (p.id(*parent), p.clk(*clk));
                    let id = jets_record_begin(t, parent, clk, opt(&n), opt(&ty), opt(&d), opt(&j));
                    slot.check_handle("jets_record_begin", op, id);
                    if id != 0 {
                        p.ids.push(id);
                    }
                }
                Op::BeginEx { parent, clk, attrs } => {
                    let a = AttrsBox::new(&p, attrs);
                    let (parent, clk) = (p.id(*parent), p.clk(*clk));
                    let id = jets_record_begin_ex(t, parent, clk, a.ptr());
                    slot.check_handle("jets_record_begin_ex", op, id);
                    if id != 0 {
                        p.ids.push(id);
                    }
                }
                Op::End { id, clk } => {
                    let (id, clk) = (p.id(*id), p.clk(*clk));
                    slot.check("jets_record_end", op, jets_record_end(t, id, clk));
                }
                Op::EndStatus { id, clk, status } => {
                    let s = status.c();
                    let (id, clk) = (p.id(*id), p.clk(*clk));
                    slot.check(
                        "jets_record_end_status",
                        op,
                        jets_record_end_status(t, id, clk, opt(&s)),
                    );
                }
                Op::Event { id, clk, name, desc, json } => {
                    let (n, d, j) = (name.c(), desc.c(), json.c());
                    let (id, clk) = (p.id(*id), p.clk(*clk));
                    slot.check("jets_event", op, jets_event(t, id, clk, opt(&n), opt(&d), opt(&j)));
                }
                Op::EventEx { id, clk, attrs } => {
                    let a = AttrsBox::new(&p, attrs);
                    let (id, clk) = (p.id(*id), p.clk(*clk));
                    slot.check("jets_event_ex", op, jets_event_ex(t, id, clk, a.ptr()));
                }
                Op::Annotation { id, name, desc, json } => {
                    let (n, d, j) = (name.c(), desc.c(), json.c());
                    let id = p.id(*id);
                    slot.check(
                        "jets_annotation",
                        op,
                        jets_annotation(t, id, opt(&n), opt(&d), opt(&j)),
                    );
                }
                Op::AnnotationEx { id, attrs } => {
                    let a = AttrsBox::new(&p, attrs);
                    let id = p.id(*id);
                    slot.check("jets_annotation_ex", op, jets_annotation_ex(t, id, a.ptr()));
                }
                Op::Counter { id, clk, name, value } => {
                    let (id, clk, name) = (p.id(*id), p.clk(*clk), p.str(*name));
                    slot.check("jets_counter", op, jets_counter(t, id, clk, name, *value));
                }
                Op::SetClock(clk) => {
                    let clk = p.clk(*clk);
                    slot.check("jets_set_clock", op, jets_set_clock(t, clk));
                }
                Op::Flush => slot.check("jets_flush", op, jets_flush(t)),
                Op::Close | Op::CloseAt(_) => {
                    let rc = match op {
                        Op::CloseAt(clk) => jets_close_at(t, p.clk(*clk)),
                        _ => jets_close(t),
                    };
                    if t.is_null() || slot.closed.get() {
                        slot.check("jets_close", op, rc);
                    } else {
                        assert_eq!(rc, JETS_OK, "jets_close: {}: {op:?}", last_error());
                        slot.closed.set(true);
                    }
                }
                Op::CaptureOn => slot.check("jets_capture_on", op, jets_capture_on(t)),
                Op::CaptureOff => slot.check("jets_capture_off", op, jets_capture_off(t)),
                // 1 or 0 on an open trace; an error code otherwise.
                Op::LimitReached => match jets_limit_reached(t) {
                    1 => assert!(!t.is_null() && !slot.closed.get(), "{op:?}"),
                    rc => slot.check("jets_limit_reached", op, rc),
                },
                Op::RoiBegin => slot.check("jets_roi_begin", op, jets_roi_begin(t)),
                Op::RoiEnd => slot.check("jets_roi_end", op, jets_roi_end(t)),
                Op::Dump => slot.check("jets_dump", op, jets_dump(t)),
                Op::ClockCreate { name, mhz } => {
                    let n = name.c();
                    let c = jets_clock_create(t, opt(&n), *mhz);
                    slot.check_handle("jets_clock_create", op, u64::from(c));
                    if c != 0 {
                        p.clocks.push(c);
                    }
                }
                Op::ClockSet { clock, clk } => {
                    let (c, clk) = (Program::handle(&p.clocks, *clock), p.clk(*clk));
                    slot.check("jets_clock_set", op, jets_clock_set(t, c, clk));
                }
                Op::SetEnabled(on) => slot.check("jets_set_enabled", op, jets_set_enabled(t, *on)),
                Op::DomainCreate(name) => {
                    let n = name.c();
                    let d = jets_domain_create(t, opt(&n));
                    slot.check_handle("jets_domain_create", op, u64::from(d));
                    if d != 0 {
                        p.domains.push(d);
                    }
                }
                Op::DomainSetEnabled { domain, on } => {
                    let d = Program::handle(&p.domains, *domain);
                    slot.check("jets_domain_set_enabled", op, jets_domain_set_enabled(t, d, *on));
                }
                Op::Push { clk, attrs } => {
                    let a = AttrsBox::new(&p, attrs);
                    let clk = p.clk(*clk);
                    let id = jets_push(t, clk, a.ptr());
                    slot.check_handle("jets_push", op, id);
                    if id != 0 {
                        p.ids.push(id);
                    }
                }
                Op::Pop(clk) => {
                    let clk = p.clk(*clk);
                    slot.check("jets_pop", op, jets_pop(t, clk));
                }
                Op::StatusName(code) => {
                    let name = CStr::from_ptr(jets_status_name(*code)).to_str().expect("ASCII");
                    assert!(name.starts_with("JETS_"), "{name}");
                }
            }
        }
    }
    for slot in &slots {
        if slot.t.is_null() {
            continue;
        }
        if !slot.closed.get() {
            // SAFETY: an open handle, used on this thread only.
            let rc = unsafe { jets_close(slot.t) };
            assert_eq!(rc, JETS_OK, "closing: {}", last_error());
        }
        let bytes = std::fs::read(&slot.path).expect("the trace file");
        // CA-CLK-1 (and CA-CLK-4): no line at cycle 2^64 - 1, which is JETS_CLK_NOW.
        let at_now = format!("{{\"clk\":{}", u64::MAX).into_bytes();
        assert!(
            !bytes.split(|&b| b == b'\n').any(|l| l.starts_with(&at_now)),
            "a line at JETS_CLK_NOW:\n{}",
            String::from_utf8_lossy(&bytes)
        );
        let (diagnostics, report) = jets_read::validate::validate_bytes(&bytes);
        assert_eq!(
            report.errors,
            0,
            "{}: {diagnostics:?}\n{}",
            slot.path.display(),
            String::from_utf8_lossy(&bytes)
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
});
