//! The exported functions of libjets. Each one checks every argument before queuing anything, runs
//! inside a guard that catches panics (none crosses into C) and reports failures through
//! `jets_last_error()`.

use std::ffi::{c_char, c_int};
use std::os::unix::ffi::OsStrExt;
use std::time::Duration;

use jets::format::Str;
use jets::{Metadata, Policy, RecordHandle, Trace, TraceBuilder};

use crate::attrs::{self, Attrs, Checked, Parts};
use crate::codes::*;
use crate::cstr;
use crate::failure::{last_code, run, status, with_last_message, Failure};
use crate::records::Records;
use crate::types::*;

/// An open trace. Opaque: made by `jets_open`, freed by `jets_close`.
pub struct jets_trace {
    pub(crate) trace: Trace,
    records: Records,
    /// The running host monitor, if any (`jets_host_monitor_start`).
    pub(crate) host: crate::host::Slot,
}

impl jets_trace {
    /// The first write error, which stops every later call: nothing is queued after it.
    fn check_healthy(&self) -> Result<(), Failure> {
        match self.trace.error() {
            Some(e) => Err(e.into()),
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

    /// Begins a record under `parent` (0 for a root) and registers its id.
    fn begin(
        &self,
        parent: jets_id,
        clk: u64,
        name: Str,
        record_type: Str,
        parts: Parts,
    ) -> Result<jets_id, Failure> {
        self.check_healthy()?;
        let handle = if parent == 0 {
            parts.apply(self.trace.root(name, record_type)).begin_at(self.resolve(clk, 0))?
        } else {
            self.records.with(parent, "parent", |p: &RecordHandle| {
                let b = parts.apply(p.child(name, record_type));
                Ok(b.begin_at(self.resolve(clk, p.start_clk()))?)
            })?
        };
        Ok(self.records.insert(handle))
    }
}

impl jets_trace {
    /// [`jets_trace::begin`] for checked `jets_attrs`, filling the builder in place.
    fn begin_ex(
        &self,
        parent: jets_id,
        clk: u64,
        name: Str,
        record_type: Str,
        c: Checked<'_>,
    ) -> Result<jets_id, Failure> {
        self.check_healthy()?;
        let handle = if parent == 0 {
            c.fill(self.trace.root(name, record_type))?.begin_at(self.resolve(clk, 0))?
        } else {
            self.records.with(parent, "parent", |p: &RecordHandle| {
                let b = c.fill(p.child(name, record_type))?;
                Ok(b.begin_at(self.resolve(clk, p.start_clk()))?)
            })?
        };
        Ok(self.records.insert(handle))
    }
}

/// # Safety
/// `t` is NULL or a pointer returned by `jets_open` and not yet closed.
pub(crate) unsafe fn trace<'a>(t: *mut jets_trace) -> Result<&'a jets_trace, Failure> {
    // SAFETY: per the caller's contract.
    unsafe { t.as_ref() }.ok_or_else(|| Failure::invalid("trace is NULL"))
}

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
    status("jets_open", || {
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
        if let Some(text) = meta {
            let map: serde_json::Map<String, serde_json::Value> = serde_json::from_str(text)
                .map_err(|e| {
                    Failure::new(
                        JETS_ERR_INVALID_JSON,
                        format!("header_metadata_json is not a JSON object: {e}"),
                    )
                })?;
            for (k, v) in map {
                metadata = metadata.insert(k, v);
            }
        }
        // SAFETY: forwarded from the caller.
        let builder = unsafe { builder(options) }?;
        let trace = builder.create(path, metadata)?;
        let t =
            Box::new(jets_trace { trace, records: Records::default(), host: Default::default() });
        // SAFETY: checked non-NULL above.
        unsafe { out.write(Box::into_raw(t)) };
        Ok(())
    })
}

/// # Safety
/// `options` is NULL or points to a `jets_options` whose `size` says how many bytes are valid.
unsafe fn builder(options: *const jets_options) -> Result<TraceBuilder, Failure> {
    let b = TraceBuilder::new();
    if options.is_null() {
        return Ok(b);
    }
    // SAFETY: `size` is the first member of every version of the struct.
    let size = unsafe { std::ptr::read_unaligned(options.cast::<u32>()) } as usize;
    let ours = std::mem::size_of::<jets_options>();
    if size < ours {
        return Err(Failure::invalid(format!(
            "options->size is {size}, expected at least {ours} (initialize with JETS_OPTIONS_INIT)"
        )));
    }
    // SAFETY: the caller's struct is at least as large as ours; newer members are ignored.
    let o = unsafe { std::ptr::read(options) };
    let b = match o.policy {
        JETS_POLICY_BLOCK => b.policy(Policy::Block),
        JETS_POLICY_DROP => b.policy(Policy::Drop),
        p => return Err(Failure::invalid(format!("options->policy {p} is not a JETS_POLICY_*"))),
    };
    let b = match usize::try_from(o.queue_capacity) {
        Ok(0) => b,
        Ok(n) if n <= 1 << 26 => b.capacity(n),
        _ => {
            return Err(Failure::invalid(format!(
                "options->queue_capacity {} is larger than 2^26 lines",
                o.queue_capacity
            )))
        }
    };
    Ok(match o.flush_interval_us {
        0 => b,
        us => b.flush_interval(Duration::from_micros(us)),
    })
}

/// Begins a record at `clk` (or `JETS_CLK_NOW`) under `parent` (0: a root record) and returns its
/// id, or 0 on failure (see `jets_last_error()`, `jets_last_error_code()`). `description` and
/// `data_json` may be NULL; `data_json` must be a JSON object. A child may not begin before its
/// parent.
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
        // SAFETY (all calls below): forwarded from the caller.
        let t = unsafe { trace(t) }?;
        let name = unsafe { cstr::required(name, "name") }?;
        let record_type = unsafe { cstr::required(record_type, "record_type") }?;
        let parts = unsafe { attrs::text(description, data_json) }?;
        t.begin(parent, clk, name.to_owned().into(), record_type.to_owned().into(), parts)
    })
    .unwrap_or(0)
}

/// `jets_record_begin` with interned names and typed fields (no string copies, no JSON text).
///
/// # Safety
/// `t` is NULL or an open trace; `attrs` is NULL or initialized with `JETS_ATTRS_INIT`, its
/// `fields` pointing to `field_count` fields.
#[no_mangle]
pub unsafe extern "C" fn jets_record_begin_ex(
    t: *mut jets_trace,
    parent: jets_id,
    clk: u64,
    attrs: *const jets_attrs,
) -> jets_id {
    run("jets_record_begin_ex", || {
        // SAFETY (all calls below): forwarded from the caller.
        let t = unsafe { trace(t) }?;
        let a = unsafe { Attrs::read(attrs) }?;
        let (name, record_type) = (a.name()?, a.record_type()?);
        let c = unsafe { a.check() }?;
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
        let t = unsafe { trace(t) }?;
        t.check_healthy()?;
        let mut at = clk;
        let handle = t.records.take(record, "record", |h| {
            at = t.resolve(clk, h.start_clk());
            if at < h.start_clk() {
                return Err(jets::Error::ClkBeforeStart {
                    clk: at,
                    start: h.start_clk(),
                    record_id: h.id(),
                }
                .into());
            }
            Ok(())
        })?;
        Ok(handle.end_at(at)?)
    })
}

/// Emits an event on `record` at `clk` (or `JETS_CLK_NOW`), not before the record's start.
/// `description` and `data_json` (any JSON value) may be NULL.
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
        // SAFETY (all calls below): forwarded from the caller.
        let t = unsafe { trace(t) }?;
        let name = unsafe { cstr::required(name, "name") }?;
        let parts = unsafe { attrs::text(description, data_json) }?;
        let name = Str::from(name.to_owned());
        t.check_healthy()?;
        t.records.with(record, "record", |h| {
            Ok(parts.apply(h.event(name)).emit_at(t.resolve(clk, h.start_clk()))?)
        })
    })
}

/// `jets_event` with interned names and typed fields.
///
/// # Safety
/// `t` is NULL or an open trace; `attrs` as in `jets_record_begin_ex`.
#[no_mangle]
pub unsafe extern "C" fn jets_event_ex(
    t: *mut jets_trace,
    record: jets_id,
    clk: u64,
    attrs: *const jets_attrs,
) -> c_int {
    status("jets_event_ex", || {
        // SAFETY (all calls below): forwarded from the caller.
        let t = unsafe { trace(t) }?;
        let a = unsafe { Attrs::read(attrs) }?;
        let name = a.name()?;
        let c = unsafe { a.check() }?;
        t.check_healthy()?;
        t.records.with(record, "record", |h| {
            Ok(c.fill(h.event(name))?.emit_at(t.resolve(clk, h.start_clk()))?)
        })
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
        // SAFETY (all calls below): forwarded from the caller.
        let t = unsafe { trace(t) }?;
        let name = unsafe { cstr::required(name, "name") }?;
        let parts = unsafe { attrs::text(description, data_json) }?;
        let name = Str::from(name.to_owned());
        t.check_healthy()?;
        t.records.with(record, "record", |h| Ok(parts.apply(h.annotation(name)).emit()?))
    })
}

/// `jets_annotation` with interned names and typed fields.
///
/// # Safety
/// `t` is NULL or an open trace; `attrs` as in `jets_record_begin_ex`.
#[no_mangle]
pub unsafe extern "C" fn jets_annotation_ex(
    t: *mut jets_trace,
    record: jets_id,
    attrs: *const jets_attrs,
) -> c_int {
    status("jets_annotation_ex", || {
        // SAFETY (all calls below): forwarded from the caller.
        let t = unsafe { trace(t) }?;
        let a = unsafe { Attrs::read(attrs) }?;
        let name = a.name()?;
        let c = unsafe { a.check() }?;
        t.check_healthy()?;
        t.records.with(record, "record", |h| Ok(c.fill(h.annotation(name))?.emit()?))
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

/// Waits until everything emitted before this call is written and handed to the OS.
///
/// # Safety
/// `t` is NULL or an open trace.
#[no_mangle]
pub unsafe extern "C" fn jets_flush(t: *mut jets_trace) -> c_int {
    status("jets_flush", || {
        // SAFETY: forwarded from the caller.
        Ok(unsafe { trace(t) }?.trace.flush()?)
    })
}

/// Writes the footer (exact totals; records still open are counted in `open_records`), completes
/// the file and frees `t`, which must not be used again, even when this returns an error
/// (`JETS_ERR_IO`: the file holds a valid prefix).
///
/// # Safety
/// `t` is NULL or an open trace, and no other thread uses it during or after this call.
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
    status(function, || {
        if t.is_null() {
            return Err(Failure::invalid("trace is NULL"));
        }
        // SAFETY: a live pointer from `jets_open`, given up by the caller.
        let t = unsafe { Box::from_raw(t) };
        // The monitor writes into the trace: it stops (last sample, record end) before the footer.
        let host = crate::host::stop_running(&t);
        let result = match clk {
            Some(clk) => t.trace.close_at(clk),
            None => t.trace.close(),
        };
        t.records.clear();
        drop(t);
        // A write error outweighs a monitor's.
        result.map_err(Failure::from)?;
        host
    })
}

/// Why the last failing call on this thread failed (e.g. `"jets_event: record 7 has already
/// ended"`); `""` if none failed. Valid until the next failing call on this thread; never free it.
#[no_mangle]
pub extern "C" fn jets_last_error() -> *const c_char {
    with_last_message(|m| m.as_ptr()).unwrap_or(c"".as_ptr())
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
