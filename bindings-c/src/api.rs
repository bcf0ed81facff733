//! The exported functions of libjets. Each one checks every argument before queuing anything, runs
//! inside a guard that catches panics (none crosses into C) and reports failures through
//! `jets_last_error()`.

use std::ffi::{c_char, c_int};
use std::os::unix::ffi::OsStrExt;
use std::sync::atomic::{AtomicPtr, Ordering};
use std::time::Duration;

use jets::format::Str;
use jets::{Metadata, Policy, RecordHandle, Trace, TraceBuilder};

use crate::attrs::{self, at_once, filled, Attrs, Checked, Describe as _, Text, Typed};
use crate::codes::*;
use crate::cstr;
use crate::failure::{
    fail, guarded, last_code, last_message, run, status, status_uncancellable, Failure, Msg,
};
use crate::records::Records;
use crate::types::*;

/// A trace handle. Opaque: made by `jets_open`, closed by `jets_close`.
///
/// The handle is a small shell that outlives the trace: closing frees everything the trace
/// holds (writer thread, queues, record table) but keeps the shell, which from then on answers
/// every call with `JETS_ERR_CLOSED` (rule CA-LIFE-1 in spec/c-api-decisions.md). A shell is 24
/// bytes, kept reachable until the process exits.
pub struct jets_trace {
    /// The open trace; null once closed.
    open: AtomicPtr<Open>,
    /// The fork generation the trace was opened in (see `process`).
    generation: u64,
    /// The next closed shell (a lock-free list that keeps them reachable).
    next_closed: AtomicPtr<jets_trace>,
}

/// Closed shells (see [`jets_trace`]).
static CLOSED: AtomicPtr<jets_trace> = AtomicPtr::new(std::ptr::null_mut());

/// What an open trace holds.
pub(crate) struct Open {
    pub(crate) trace: Trace,
    records: Records,
    /// The running host monitor, if any (`jets_host_monitor_start`).
    pub(crate) host: crate::host::Slot,
    /// Run-time on/off, for the trace and per domain.
    pub(crate) switches: crate::domains::Switches,
    /// Clocks other than the trace's.
    pub(crate) clocks: crate::clocks::Clocks,
}

impl Open {
    /// The record `id` names, for `f`: one of the table, or for `JETS_ID_LEFT_OUT` the trace's
    /// handle of a record capture left out, on which every call counts its line as left out
    /// (CA-LEFT-1).
    #[inline(always)]
    fn with_record<R>(
        &self,
        id: jets_id,
        what: &'static str,
        f: impl FnOnce(&RecordHandle) -> Result<R, Failure>,
    ) -> Result<R, Failure> {
        if id == JETS_ID_LEFT_OUT {
            return f(&self.trace.left_out_record());
        }
        self.records.with(id, what, f)
    }

    /// The id of a record just begun: one of the table, or `JETS_ID_LEFT_OUT` for a record capture
    /// left out, which the table does not keep (CA-LEFT-1).
    #[inline(always)]
    fn keep(&self, handle: RecordHandle) -> Result<jets_id, Failure> {
        if handle.is_left_out() {
            return Ok(JETS_ID_LEFT_OUT);
        }
        self.records.insert(handle)
    }

    /// CA-LEFT-1: while capture is off, a record begun is left out whatever its parent, name and
    /// fields: counted as such (as a child of a left-out record is), without a look at any of
    /// them, and given `JETS_ID_LEFT_OUT`. `None` while capture is on and `parent` is a record
    /// of the table (or 0): the record is then begun in full.
    #[inline(always)]
    fn left_out_begin(&self, parent: jets_id) -> Option<Result<jets_id, Failure>> {
        if parent != JETS_ID_LEFT_OUT && self.trace.is_capturing() {
            return None;
        }
        let left = self.trace.left_out_record();
        let child = left.child_at(0, Str::EMPTY, Str::EMPTY).begin();
        Some(child.map(|_| JETS_ID_LEFT_OUT).map_err(Failure::from))
    }

    /// The first write error, which stops every later call: nothing is queued after it.
    #[inline(always)]
    fn check_healthy(&self) -> Result<(), Failure> {
        match self.trace.error() {
            Some(e) => Err(failed(e)),
            None => Ok(()),
        }
    }

    /// The cycle a call means: its `clk`, or the trace clock (never before `floor`).
    fn resolve(&self, clk: u64, floor: u64) -> u64 {
        if clk == JETS_CLK_NOW {
            self.trace.clock().now().max(floor)
        } else {
            clk
        }
    }

    /// Ends `record` at `clk` (or the clock), with an optional status.
    pub(crate) fn end(
        &self,
        record: jets_id,
        clk: u64,
        status: Option<jets::format::Status>,
    ) -> Result<(), Failure> {
        if record == JETS_ID_OFF {
            return Ok(());
        }
        if record == JETS_ID_LEFT_OUT {
            // Counted as the end of a record capture left out (CA-LEFT-1).
            return Ok(self.trace.left_out_record().end_at(0)?);
        }
        self.check_healthy()?;
        self.records.end(record, "record", status, |h| {
            let at = self.resolve(clk, h.start_clk());
            if at < h.start_clk() {
                return Err(jets::Error::ClkBeforeStart {
                    clk: at,
                    start: h.start_clk(),
                    record_id: h.id(),
                }
                .into());
            }
            Ok(at)
        })
    }

    /// Begins a record under `parent` (0 for a root) and registers its id.
    fn begin(
        &self,
        parent: jets_id,
        clk: u64,
        name: &str,
        record_type: &str,
        text: Text<'_>,
    ) -> Result<jets_id, Failure> {
        self.check_healthy()?;
        if let Some(id) = self.left_out_begin(parent) {
            return id;
        }
        let (name, record_type) = (Str::from(name.to_owned()), Str::from(record_type.to_owned()));
        let handle = if parent == 0 {
            text.apply(self.trace.root(name, record_type))?.begin_at(self.resolve(clk, 0))?
        } else {
            self.with_record(parent, "parent", |p: &RecordHandle| {
                let at = self.resolve(clk, p.start_clk());
                Ok(text.apply(p.child_at(at, name, record_type))?.begin()?)
            })?
        };
        self.keep(handle)
    }
}

impl Open {
    /// While capture is off a line is left out whatever its record, name and text (CA-JSON-2,
    /// CA-LEFT-1): the plain-string calls ask first, with an empty name, on the trace's handle of
    /// a left-out record (`lean` makes the line's builder there, inert, and emits it, which
    /// counts it), so that nothing is copied, parsed or looked up. True when the line was left
    /// out that way; false while capture is on: the caller then makes the line in full.
    fn left_out_lean(
        &self,
        lean: impl FnOnce(&RecordHandle) -> Result<bool, jets::Error>,
    ) -> Result<bool, Failure> {
        if self.trace.is_capturing() {
            return Ok(false);
        }
        Ok(lean(&self.trace.left_out_record())?)
    }

    /// [`Open::begin`] for checked `jets_attrs`, filling the builder in place.
    pub(crate) fn begin_ex(
        &self,
        parent: jets_id,
        clk: u64,
        name: Str,
        record_type: Str,
        mut c: Checked<'_>,
    ) -> Result<jets_id, Failure> {
        self.check_healthy()?;
        if let Some(id) = self.left_out_begin(parent) {
            return id;
        }
        let handle = if parent == 0 {
            filled!(c, self.trace.root(name, record_type), |b| b.begin_at(self.resolve(clk, 0)))?
        } else {
            self.with_record(parent, "parent", |p: &RecordHandle| {
                let at = self.resolve(clk, p.start_clk());
                // Typed fields alone (at most 4): given at once, with no builder.
                let Some(t) = c.typed.as_mut() else {
                    return Ok(filled!(c, p.child_at(at, name, record_type), |b| b.begin())?);
                };
                at_once!(t, |fields| p.begin_child_fields_at(at, name, record_type, fields))
                    .map_err(Failure::from)
            })?
        };
        self.keep(handle)
    }
}

#[cold]
fn failed(e: jets::Error) -> Failure {
    e.into()
}

/// The open trace behind `t`: refused when NULL, closed, or inherited across a `fork`.
/// Allocates nothing and takes no lock.
///
/// # Safety
/// `t` is NULL or a pointer returned by `jets_open` (closed or not), and no other thread is
/// closing it.
pub(crate) unsafe fn trace<'a>(t: *mut jets_trace) -> Result<&'a Open, Failure> {
    // SAFETY: per the caller's contract.
    let shell = unsafe { t.as_ref() }.ok_or(Failure::invalid(Msg::Static("trace is NULL")))?;
    if crate::process::forked(shell.generation) {
        return Err(Failure::new(JETS_ERR_FORKED, Msg::Static(FORKED)));
    }
    let open = shell.open.load(Ordering::Acquire);
    // SAFETY: non-null means open; it is freed only by jets_close, which the contract keeps from
    // running concurrently.
    unsafe { open.as_ref() }
        .ok_or(Failure::new(JETS_ERR_CLOSED, Msg::Static("the trace is closed")))
}

const FORKED: &str = "the trace was opened before fork() in the parent process; this child cannot write to it (open a new trace here)";

/// Opens (creates or truncates) the trace file `path` and writes its header; `.gz` and `.zst`
/// paths are compressed. `header_metadata_json` is a JSON object of header metadata (e.g.
/// `{"hardware_model":"Tiny5","clock_frequency_mhz":1000}`) or NULL. On success `*out` is the
/// trace; on failure it is set to NULL.
///
/// # Safety
/// `path` and `header_metadata_json` are NULL or NUL-terminated strings; `out` is NULL or
/// writable.
#[no_mangle]
pub unsafe extern "C" fn jets_open(
    path: *const c_char,
    header_metadata_json: *const c_char,
    out: *mut *mut jets_trace,
) -> c_int {
    // SAFETY: forwarded from the caller; NULL options mean all defaults.
    unsafe { jets_open_ex(path, header_metadata_json, std::ptr::null(), out) }
}

/// `jets_open` with options (NULL for the defaults). Initialize `options` with
/// `JETS_OPTIONS_INIT` and change what you need.
///
/// # Safety
/// As `jets_open`; `options` is NULL or points to a `jets_options` whose `size` is right.
#[no_mangle]
pub unsafe extern "C" fn jets_open_ex(
    path: *const c_char,
    header_metadata_json: *const c_char,
    options: *const jets_options,
    out: *mut *mut jets_trace,
) -> c_int {
    status_uncancellable("jets_open", || {
        if out.is_null() {
            return Err(Failure::invalid("out is NULL"));
        }
        // SAFETY: `out` is non-NULL and writable per the contract.
        unsafe { out.write(std::ptr::null_mut()) };
        if path.is_null() {
            return Err(Failure::invalid("path is NULL"));
        }
        // SAFETY: non-NULL and NUL-terminated. A path is bytes on Unix: no UTF-8 needed.
        let path =
            std::ffi::OsStr::from_bytes(unsafe { std::ffi::CStr::from_ptr(path) }.to_bytes());
        // SAFETY: forwarded from the caller.
        let meta = unsafe { cstr::optional(header_metadata_json, "header_metadata_json") }?;
        let mut metadata = Metadata::new();
        let mut base_mhz = None;
        if let Some(text) = meta {
            let map: serde_json::Map<String, serde_json::Value> = serde_json::from_str(text)
                .map_err(|e| {
                    Failure::new(
                        JETS_ERR_INVALID_JSON,
                        format!("header_metadata_json is not a JSON object: {e}"),
                    )
                })?;
            base_mhz = map.get("clock_frequency_mhz").and_then(|v| v.as_f64());
            for (k, v) in map {
                metadata = metadata.insert(k, v);
            }
        }
        // SAFETY: forwarded from the caller.
        let builder = unsafe { builder(options) }?;
        let generation = crate::process::generation();
        let trace = crate::process::with_signals_blocked(|| builder.create(path, metadata))?;
        let open = Box::new(Open {
            trace,
            records: Records::default(),
            host: Default::default(),
            switches: Default::default(),
            clocks: crate::clocks::Clocks::new(base_mhz),
        });
        let t = Box::into_raw(Box::new(jets_trace {
            open: AtomicPtr::new(Box::into_raw(open)),
            generation,
            next_closed: AtomicPtr::new(std::ptr::null_mut()),
        }));
        crate::process::register(t);
        // SAFETY: checked non-NULL above.
        unsafe { out.write(t) };
        Ok(())
    })
}

/// # Safety
/// `options` is NULL or points to a `jets_options` whose `size` says how many bytes are valid,
/// and whose `capture`, when `size` covers it, is NULL or NUL-terminated.
unsafe fn builder(options: *const jets_options) -> Result<TraceBuilder, Failure> {
    let b = TraceBuilder::new();
    if options.is_null() {
        return Ok(b);
    }
    // SAFETY: `size` is the first member of every version of the struct.
    let size = unsafe { std::ptr::read_unaligned(options.cast::<u32>()) } as usize;
    // The first version of the struct ends where `capture` begins: a program built against it
    // has the members before `capture`, and a larger `size` than ours has ours and newer ones.
    let first = std::mem::offset_of!(jets_options, capture);
    let ours = std::mem::size_of::<jets_options>();
    if size < first {
        return Err(Failure::invalid(format!(
            "options->size is {size}, expected at least {first} (initialize with JETS_OPTIONS_INIT)"
        )));
    }
    let mut o = jets_options {
        size: 0,
        policy: JETS_POLICY_BLOCK,
        queue_capacity: 0,
        flush_interval_us: 0,
        capture: std::ptr::null(),
    };
    // Whole members only, those the caller's `size` covers: the rest keep their defaults.
    let valid = if size >= ours { ours } else { first };
    // SAFETY: the caller's struct has `size` valid bytes, at least `valid`; `o` is ours.
    unsafe {
        std::ptr::copy_nonoverlapping(options.cast::<u8>(), (&raw mut o).cast::<u8>(), valid)
    };
    let b = match o.policy {
        JETS_POLICY_BLOCK => b.policy(Policy::Block),
        JETS_POLICY_DROP => b.policy(Policy::Drop),
        p => return Err(Failure::invalid(format!("options->policy {p} is not a JETS_POLICY_*"))),
    };
    let b = match usize::try_from(o.queue_capacity) {
        Ok(0) => b,
        Ok(n) if n <= TraceBuilder::MAX_CAPACITY => b.capacity(n),
        _ => {
            return Err(Failure::invalid(format!(
                "options->queue_capacity {} is larger than {} lines",
                o.queue_capacity,
                TraceBuilder::MAX_CAPACITY
            )))
        }
    };
    let b = match o.flush_interval_us {
        0 => b,
        us => b.flush_interval(Duration::from_micros(us)),
    };
    // SAFETY: NULL or NUL-terminated, per the member's contract.
    Ok(match unsafe { cstr::optional(o.capture, "options->capture") }? {
        None => b,
        Some(text) => b.capture(text.parse().map_err(|e: jets::capture::CaptureError| {
            Failure::invalid(format!("options->capture: {e}"))
        })?),
    })
}

/// Begins a record at `clk` (or `JETS_CLK_NOW`) under `parent` (0: a root record) and returns its
/// id, or 0 on failure (see `jets_last_error()`, `jets_last_error_code()`). `description` and
/// `data_json` may be NULL; `data_json` must be a JSON object. A child may not begin before its
/// parent. A record that capture leaves out gets `JETS_ID_LEFT_OUT`, on which every call succeeds
/// and is counted as left out (CA-LEFT-1); its description and JSON are neither copied nor parsed
/// (CA-JSON-2): bad JSON there is no error.
///
/// # Safety
/// `t` is NULL or an open trace; the strings are NULL or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn jets_record_begin(
    t: *mut jets_trace,
    parent: jets_id,
    clk: u64,
    name: *const c_char,
    record_type: *const c_char,
    description: *const c_char,
    data_json: *const c_char,
) -> jets_id {
    run("jets_record_begin", || {
        // SAFETY: `t` is NULL or a handle from `jets_open` (this function's contract), and
        // `jets_close`'s contract keeps other threads from closing it during this call.
        let t = unsafe { trace(t) }?;
        if !t.switches.on() || parent == JETS_ID_OFF {
            return Ok(JETS_ID_OFF);
        }
        // SAFETY: the caller's contract: `name` is NULL or NUL-terminated, alive for the call.
        let name = unsafe { cstr::required(name, "name") }?;
        // SAFETY: the caller's contract: `record_type` is NULL or NUL-terminated.
        let record_type = unsafe { cstr::required(record_type, "record_type") }?;
        // SAFETY: the caller's contract: `description` and `data_json` are NULL or NUL-terminated.
        let text = unsafe { attrs::text(description, data_json) }?;
        t.begin(parent, clk, name, record_type, text)
    })
    .unwrap_or(0)
}

/// `jets_record_begin` with interned names and typed fields (no string copies, no JSON text).
/// While capture is off it returns `JETS_ID_LEFT_OUT` before reading `parent` or `attrs` beyond
/// its size and domain: a left-out record costs its count alone (CA-LEFT-1).
///
/// # Safety
/// `t` is NULL or an open trace; `attrs` is NULL or initialized with `JETS_ATTRS_INIT`, its
/// `fields` pointing to `field_count` fields (each `JETS_FIELD_TEXT` value NULL or
/// NUL-terminated), and `attrs->data_json` NULL or a NUL-terminated string; all of them valid for
/// the duration of the call.
#[no_mangle]
pub unsafe extern "C" fn jets_record_begin_ex(
    t: *mut jets_trace,
    parent: jets_id,
    clk: u64,
    attrs: *const jets_attrs,
) -> jets_id {
    run("jets_record_begin_ex", || {
        // SAFETY: `t` is NULL or a handle from `jets_open` (this function's contract), and
        // `jets_close`'s contract keeps other threads from closing it during this call.
        let t = unsafe { trace(t) }?;
        // SAFETY: the caller's contract: `attrs` is NULL or initialized with JETS_ATTRS_INIT, so
        // its `size` says how many bytes of it are valid (what `Attrs::read` requires).
        let a = unsafe { Attrs::read(attrs) }?;
        let Some(domain) = t.switches.route(a.domain())? else { return Ok(JETS_ID_OFF) };
        if parent == JETS_ID_OFF {
            return Ok(JETS_ID_OFF);
        }
        // Before the names and fields are read: a record left out costs only its count.
        if let Some(id) = t.left_out_begin(parent) {
            return id;
        }
        let clk = t.clocks.to_trace(a.clock(), clk)?;
        let (name, record_type) = (a.name()?, a.record_type()?);
        let mut typed = Typed::new();
        // SAFETY: per this function's contract `fields` points to `field_count` fields, and
        // `data_json` (a C string member) is NULL or NUL-terminated, both alive for the call.
        let c = unsafe { a.check(domain, &mut typed) }?;
        t.begin_ex(parent, clk, Str::Static(name), Str::Static(record_type), c)
    })
    .unwrap_or(0)
}

/// Ends `record` at `clk` (or `JETS_CLK_NOW`), which may not be before its start. A record ends
/// once: afterwards its id is refused with `JETS_ERR_RECORD_ENDED`. On failure the record stays
/// open.
///
/// # Safety
/// `t` is NULL or an open trace.
#[no_mangle]
pub unsafe extern "C" fn jets_record_end(t: *mut jets_trace, record: jets_id, clk: u64) -> c_int {
    status("jets_record_end", || {
        // SAFETY: forwarded from the caller.
        unsafe { trace(t) }?.end(record, clk, None)
    })
}

/// `jets_record_end` with a final status on the `record_end` line, for outcomes known only at
/// the end: `status` is one of the JETS status names, `"running"`, `"stalled"`, `"complete"` or
/// `"flushed"` (e.g. an instruction squashed by a branch).
///
/// # Safety
/// `t` is NULL or a handle from `jets_open`; `status` is NULL or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn jets_record_end_status(
    t: *mut jets_trace,
    record: jets_id,
    clk: u64,
    status_name: *const c_char,
) -> c_int {
    status("jets_record_end_status", || {
        // SAFETY: `t` is NULL or a handle from `jets_open` (this function's contract), and
        // `jets_close`'s contract keeps other threads from closing it during this call.
        let t = unsafe { trace(t) }?;
        // SAFETY: the caller's contract: `status_name` is NULL or NUL-terminated.
        let name = unsafe { cstr::required(status_name, "status") }?;
        let s: jets::format::Status = name.parse().map_err(|_| {
            let known: Vec<&str> = jets::format::Status::ALL.iter().map(|s| s.as_str()).collect();
            Failure::invalid(format!("status {name:?} is not one of {}", known.join(", ")))
        })?;
        t.end(record, clk, Some(s))
    })
}

/// Emits an event on `record` at `clk` (or `JETS_CLK_NOW`), not before the record's start.
/// `description` and `data_json` (any JSON value) may be NULL; they are copied and parsed only
/// for an event that capture does not leave out (CA-JSON-2).
///
/// # Safety
/// `t` is NULL or an open trace; the strings are NULL or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn jets_event(
    t: *mut jets_trace,
    record: jets_id,
    clk: u64,
    name: *const c_char,
    description: *const c_char,
    data_json: *const c_char,
) -> c_int {
    status("jets_event", || {
        // SAFETY: `t` is NULL or a handle from `jets_open` (this function's contract), and
        // `jets_close`'s contract keeps other threads from closing it during this call.
        let t = unsafe { trace(t) }?;
        if !t.switches.on() || record == JETS_ID_OFF {
            return Ok(());
        }
        // SAFETY: the caller's contract: `name` is NULL or NUL-terminated, alive for the call.
        let name = unsafe { cstr::required(name, "name") }?;
        // SAFETY: the caller's contract: `description` and `data_json` are NULL or NUL-terminated.
        let text = unsafe { attrs::text(description, data_json) }?;
        t.check_healthy()?;
        let lean = |h: &RecordHandle| {
            let e = h.event_at(t.resolve(clk, h.start_clk()), Str::EMPTY);
            e.is_inert().then(|| e.emit()).transpose().map(|done| done.is_some())
        };
        if t.left_out_lean(lean)? {
            return Ok(());
        }
        let name = Str::from(name.to_owned());
        t.with_record(record, "record", |h| {
            Ok(text.apply(h.event_at(t.resolve(clk, h.start_clk()), name))?.emit()?)
        })
    })
}

/// `jets_event` with interned names and typed fields.
///
/// # Safety
/// `t` is NULL or an open trace; `attrs` is NULL or initialized with `JETS_ATTRS_INIT`, its
/// `fields` pointing to `field_count` fields (each `JETS_FIELD_TEXT` value NULL or
/// NUL-terminated), and `attrs->data_json` NULL or a NUL-terminated string, as in
/// `jets_record_begin_ex`.
#[no_mangle]
pub unsafe extern "C" fn jets_event_ex(
    t: *mut jets_trace,
    record: jets_id,
    clk: u64,
    attrs: *const jets_attrs,
) -> c_int {
    const NAME: &str = "jets_event_ex";
    // Async-signal-safe: a wait for room in the queue only waits (see `jets_counter`).
    jets::write::signal_safe(|| {
        guarded(NAME, || {
            // SAFETY: forwarded from the caller (this function's contract).
            match unsafe { event_ex_fast(t, record, clk, attrs) } {
                Some(Ok(())) => JETS_OK,
                Some(Err(e)) => fail(NAME, Err(e.into())),
                // SAFETY: as above.
                None => fail(NAME, unsafe { event_ex(t, record, clk, attrs) }),
            }
        })
    })
}

/// The common case of `jets_event_ex` (up to 4 typed fields, no description, JSON text, domain
/// or clock, on an open record of a healthy trace), with checks that answer yes or no rather
/// than build a failure: `None` means something is unusual and nothing was done, and the
/// general [`event_ex`] then runs from the start and says what. Both paths write the same line;
/// the fast one only skips building failures it does not have (see ARCHITECTURE.md, "The C
/// boundary's cost").
///
/// # Safety
/// As `jets_event_ex`.
#[inline(always)]
unsafe fn event_ex_fast(
    t: *mut jets_trace,
    record: jets_id,
    clk: u64,
    attrs: *const jets_attrs,
) -> Option<Result<(), jets::Error>> {
    // SAFETY: `t` is NULL or a handle from `jets_open`, not being closed (the contract).
    let shell = unsafe { t.as_ref() }?;
    if crate::process::forked(shell.generation) {
        return None;
    }
    // SAFETY: non-null means open; freed only by jets_close, which may not run concurrently.
    let open = unsafe { shell.open.load(Ordering::Acquire).as_ref() }?;
    if attrs.is_null() {
        return None;
    }
    // SAFETY: `attrs` is a `jets_attrs` (the contract) whose first member, `size`, says how many
    // bytes are valid.
    let size = unsafe { std::ptr::read_unaligned(attrs.cast::<u32>()) } as usize;
    if size < std::mem::size_of::<jets_attrs>() {
        return None;
    }
    // SAFETY: checked just above: a whole, initialized `jets_attrs`, plain data.
    let a = unsafe { &*attrs };
    if !open.switches.on() {
        return Some(Ok(()));
    }
    if a.domain != 0 || a.clock != 0 || a.description != 0 || !a.data_json.is_null() {
        return None;
    }
    if record == JETS_ID_OFF {
        return Some(Ok(()));
    }
    if open.trace.error().is_some() {
        return None;
    }
    // CA-LEFT-1: on a record capture left out, or while capture is off, the event is left out
    // whatever it holds: counted, with no look at its record, name or fields.
    if record == JETS_ID_LEFT_OUT || !open.trace.is_capturing() {
        return Some(open.trace.left_out_record().emit_event_at(0, Str::EMPTY));
    }
    let name = crate::intern::get(a.name)?;
    let fields: &[jets_field] = match a.field_count {
        0 => &[],
        1..=4 if !a.fields.is_null() => {
            // SAFETY: non-NULL, and the caller promises `field_count` fields.
            unsafe { std::slice::from_raw_parts(a.fields, a.field_count) }
        }
        _ => return None,
    };
    let mut typed = Typed::new();
    for f in fields {
        // SAFETY: the caller's contract on `fields` (a text value NULL or NUL-terminated).
        typed.push(unsafe { attrs::convert(f) }?);
    }
    let counted = open.records.enter(record)?;
    let h = counted.handle();
    let at = open.resolve(clk, h.start_clk());
    // A C call has its cycle from the start: made with it (`event_at`, `child_at` elsewhere),
    // a line outside a capture window is left out before anything is built (CAP-AT-1).
    // Made without a builder: a stage change, or typed fields given at once.
    let result = match typed.len() {
        0 => h.emit_event_at(at, name),
        _ => at_once!(&mut typed, |fields| h.emit_event_fields_at(at, name, fields)),
    };
    counted.leave();
    Some(result)
}

/// `jets_event_ex` in general (any shape, and every failure named).
///
/// # Safety
/// As `jets_event_ex`.
#[inline(never)]
unsafe fn event_ex(
    t: *mut jets_trace,
    record: jets_id,
    clk: u64,
    attrs: *const jets_attrs,
) -> Result<(), Failure> {
    // SAFETY: `t` is NULL or a handle from `jets_open` (this function's contract), and
    // `jets_close`'s contract keeps other threads from closing it during this call.
    let t = unsafe { trace(t) }?;
    // SAFETY: the caller's contract: `attrs` is NULL or initialized with JETS_ATTRS_INIT, so
    // its `size` says how many bytes of it are valid (what `Attrs::read` requires).
    let a = unsafe { Attrs::read(attrs) }?;
    if t.switches.route(a.domain())?.is_none() || record == JETS_ID_OFF {
        return Ok(());
    }
    let clk = t.clocks.to_trace(a.clock(), clk)?;
    let name = a.name()?;
    let mut typed = Typed::new();
    // SAFETY: per this function's contract `fields` points to `field_count` fields, and
    // `data_json` (a C string member) is NULL or NUL-terminated, both alive for the call.
    let mut c = unsafe { a.check(None, &mut typed) }?;
    t.check_healthy()?;
    t.with_record(record, "record", |h| {
        let at = t.resolve(clk, h.start_clk());
        Ok(filled!(c, h.event_at(at, name), |b| b.emit())?)
    })
}

/// Adds an annotation (untimed metadata) to `record`. `description` and `data_json` (any JSON
/// value; `{}` when NULL) may be NULL.
///
/// # Safety
/// `t` is NULL or an open trace; the strings are NULL or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn jets_annotation(
    t: *mut jets_trace,
    record: jets_id,
    name: *const c_char,
    description: *const c_char,
    data_json: *const c_char,
) -> c_int {
    status("jets_annotation", || {
        // SAFETY: `t` is NULL or a handle from `jets_open` (this function's contract), and
        // `jets_close`'s contract keeps other threads from closing it during this call.
        let t = unsafe { trace(t) }?;
        if !t.switches.on() || record == JETS_ID_OFF {
            return Ok(());
        }
        // SAFETY: the caller's contract: `name` is NULL or NUL-terminated, alive for the call.
        let name = unsafe { cstr::required(name, "name") }?;
        // SAFETY: the caller's contract: `description` and `data_json` are NULL or NUL-terminated.
        let text = unsafe { attrs::text(description, data_json) }?;
        t.check_healthy()?;
        let lean = |h: &RecordHandle| {
            let a = h.annotation(Str::EMPTY);
            a.is_inert().then(|| a.emit()).transpose().map(|done| done.is_some())
        };
        if t.left_out_lean(lean)? {
            return Ok(());
        }
        let name = Str::from(name.to_owned());
        t.with_record(record, "record", |h| Ok(text.apply(h.annotation(name))?.emit()?))
    })
}

/// `jets_annotation` with interned names and typed fields.
///
/// # Safety
/// `t` is NULL or an open trace; `attrs` is NULL or initialized with `JETS_ATTRS_INIT`, its
/// `fields` pointing to `field_count` fields (each `JETS_FIELD_TEXT` value NULL or
/// NUL-terminated), and `attrs->data_json` NULL or a NUL-terminated string, as in
/// `jets_record_begin_ex`.
#[no_mangle]
pub unsafe extern "C" fn jets_annotation_ex(
    t: *mut jets_trace,
    record: jets_id,
    attrs: *const jets_attrs,
) -> c_int {
    status("jets_annotation_ex", || {
        // SAFETY: `t` is NULL or a handle from `jets_open` (this function's contract), and
        // `jets_close`'s contract keeps other threads from closing it during this call.
        let t = unsafe { trace(t) }?;
        // SAFETY: the caller's contract: `attrs` is NULL or initialized with JETS_ATTRS_INIT, so
        // its `size` says how many bytes of it are valid (what `Attrs::read` requires).
        let a = unsafe { Attrs::read(attrs) }?;
        if t.switches.route(a.domain())?.is_none() || record == JETS_ID_OFF {
            return Ok(());
        }
        let name = a.name()?;
        let mut typed = Typed::new();
        // SAFETY: per this function's contract `fields` points to `field_count` fields, and
        // `data_json` (a C string member) is NULL or NUL-terminated, both alive for the call.
        let mut c = unsafe { a.check(None, &mut typed) }?;
        t.check_healthy()?;
        t.with_record(record, "record", |h| Ok(filled!(c, h.annotation(name), |b| b.emit())?))
    })
}

/// Emits a counter sample on `record`: an event named `name` whose `data.value` is `value` (rule
/// CA-COUNTER-1), at `clk` (or `JETS_CLK_NOW`). Async-signal-safe, like `jets_event_ex`.
///
/// # Safety
/// `t` is NULL or a handle from `jets_open`.
#[no_mangle]
pub unsafe extern "C" fn jets_counter(
    t: *mut jets_trace,
    record: jets_id,
    clk: u64,
    name: jets_str,
    value: f64,
) -> c_int {
    // Async-signal-safe: a push that waits for room in the queue only waits, rather than
    // encode a batch of the writer's meanwhile as the other calls do (that allocates).
    jets::write::signal_safe(|| {
        status("jets_counter", || {
            // SAFETY: forwarded from the caller.
            let t = unsafe { trace(t) }?;
            if !t.switches.on() || record == JETS_ID_OFF {
                return Ok(());
            }
            let name = crate::intern::lookup(name, "name")?;
            t.check_healthy()?;
            t.with_record(record, "record", |h| {
                Ok(h.event_at(t.resolve(clk, h.start_clk()), name).field("value", value).emit()?)
            })
        })
    })
}

/// Sets the trace clock, the cycle used by calls given `JETS_CLK_NOW`.
///
/// # Safety
/// `t` is NULL or an open trace.
#[no_mangle]
pub unsafe extern "C" fn jets_set_clock(t: *mut jets_trace, clk: u64) -> c_int {
    status("jets_set_clock", || {
        // SAFETY: forwarded from the caller.
        let t = unsafe { trace(t) }?;
        if clk == JETS_CLK_NOW {
            return Err(Failure::invalid("clk is JETS_CLK_NOW, which is not a cycle"));
        }
        t.trace.clock().set(clk);
        Ok(())
    })
}

/// Waits until everything emitted before this call is written and handed to the OS (for a
/// compressed trace: the file is then a complete stream). Async-signal-safe.
///
/// # Safety
/// `t` is NULL or a handle from `jets_open`.
#[no_mangle]
pub unsafe extern "C" fn jets_flush(t: *mut jets_trace) -> c_int {
    status("jets_flush", || {
        // SAFETY: forwarded from the caller.
        let t = unsafe { trace(t) }?;
        // No timeout in practice (about 34 years); the wait allocates nothing and takes no lock.
        if t.trace.flush_signal_safe(Duration::from_secs(1 << 30)) {
            return Ok(());
        }
        // Only a failed trace gets here: naming its I/O error copies it, which allocates (the
        // one place this call does; the trace writes nothing more anyway).
        Err(match t.trace.error() {
            Some(e) => e.into(),
            None => Failure::new(JETS_ERR_CLOSED, Msg::Static("the trace is closed")),
        })
    })
}

/// Writes the footer (exact totals; records still open are counted in `open_records`), completes
/// the file and frees what the trace holds, even when this returns an error (`JETS_ERR_IO`: the
/// file holds a valid prefix). The handle stays valid: every later call on it, a second close
/// included, returns `JETS_ERR_CLOSED`. In a child process after `fork`, returns
/// `JETS_ERR_FORKED` and touches nothing (the parent still owns the file).
///
/// # Safety
/// `t` is NULL or a handle from `jets_open`, and no other thread uses it during this call.
#[no_mangle]
pub unsafe extern "C" fn jets_close(t: *mut jets_trace) -> c_int {
    // SAFETY: forwarded from the caller.
    unsafe { close(t, None, "jets_close") }
}

/// `jets_close` with the footer's `capture_end_clk` at least `clk` (the simulation's last cycle).
///
/// # Safety
/// As `jets_close`.
#[no_mangle]
pub unsafe extern "C" fn jets_close_at(t: *mut jets_trace, clk: u64) -> c_int {
    // SAFETY: forwarded from the caller.
    unsafe { close(t, Some(clk), "jets_close_at") }
}

/// # Safety
/// As `jets_close`.
unsafe fn close(t: *mut jets_trace, clk: Option<u64>, function: &str) -> c_int {
    status_uncancellable(function, || {
        // Refuses NULL, a closed trace (a second close) and a trace inherited across fork, whose
        // writer thread does not exist here: closing it would wait forever.
        // SAFETY: forwarded from the caller.
        unsafe { trace(t) }?;
        // SAFETY: `trace` accepted it, so it is a live shell.
        let shell = unsafe { &*t };
        crate::process::unregister(t);
        // SAFETY: the pointer came from Box::into_raw in jets_open; swapping it out makes this
        // the only owner, and later calls see null (closed).
        let open =
            unsafe { Box::from_raw(shell.open.swap(std::ptr::null_mut(), Ordering::AcqRel)) };
        // Keep the shell reachable: push it on the closed list.
        let mut head = CLOSED.load(Ordering::Relaxed);
        loop {
            shell.next_closed.store(head, Ordering::Relaxed);
            match CLOSED.compare_exchange_weak(head, t, Ordering::Release, Ordering::Relaxed) {
                Ok(_) => break,
                Err(h) => head = h,
            }
        }
        // The monitor writes into the trace: it stops (last sample, record end) before the footer.
        let host = crate::host::stop_running(&open);
        let result = match clk {
            Some(clk) => open.trace.close_at(clk),
            None => open.trace.close(),
        };
        // The handles of records still open go with the table (they stay open in the file).
        drop(open);
        // A write error outweighs a monitor's.
        result.map_err(Failure::from)?;
        host
    })
}

/// Why the last failing call on this thread failed (e.g. `"jets_event: record 7 has already
/// ended"`); `""` if none failed. Valid until the next failing call on this thread; never free it.
#[no_mangle]
pub extern "C" fn jets_last_error() -> *const c_char {
    last_message()
}

/// The status code of the last failing call on this thread (`JETS_OK` if none failed): the reason
/// a `jets_record_begin` returned 0.
#[no_mangle]
pub extern "C" fn jets_last_error_code() -> c_int {
    last_code()
}

/// The library version, e.g. `"0.1.0"`. Static: never free it.
#[no_mangle]
pub extern "C" fn jets_version() -> *const c_char {
    concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr().cast()
}
