//! The types of the C API: ids, interned string handles, typed fields and the size-versioned
//! structs. Their layout is part of the ABI: fields are only ever appended to a size-versioned
//! struct, and `jets_field` is frozen.

use std::ffi::c_char;

/// A record id; 0 means "none" (as a parent: a root record; as a result: failure).
pub type jets_id = u64;

/// A handle to a string registered once with `jets_intern`; 0 means "none".
pub type jets_str = u32;

/// A subsystem that can be switched off at run time (`jets_domain_create`); 0 means "none".
pub type jets_domain = u32;

/// A clock other than the trace's own (`jets_clock_create`); 0 means the trace's clock.
pub type jets_clock = u32;

/// The id of a record begun while tracing was off (`jets_set_enabled`, a disabled domain): every
/// call on it succeeds and writes nothing, its children are off too. Never a real record.
pub const JETS_ID_OFF: jets_id = u64::MAX;

/// The id of every record capture control left out (begun while capture was off, under a record
/// left out, past a window's end, passed over by a sample): every call on it succeeds, writes
/// nothing and counts its line as left out in the footer, as a child of it is. One id for all of
/// them: nothing is kept per record, so these calls cost only the count (rule CA-LEFT-1). Never a
/// real record; its end is counted each time it is given.
pub const JETS_ID_LEFT_OUT: jets_id = u64::MAX - 1;

/// Pass as `clk` to use the trace clock (`jets_set_clock`) instead of an explicit cycle. The
/// clock is clamped so a line never lands before its record's (or parent's) start.
pub const JETS_CLK_NOW: u64 = u64::MAX;

/// `jets_field.kind`: an unsigned integer in `value.u64`.
pub const JETS_FIELD_U64: u32 = 1;
/// `jets_field.kind`: a signed integer in `value.i64`.
pub const JETS_FIELD_I64: u32 = 2;
/// `jets_field.kind`: a float in `value.f64` (written as `null` when not finite).
pub const JETS_FIELD_F64: u32 = 3;
/// `jets_field.kind`: a boolean, `value.u64 != 0`.
pub const JETS_FIELD_BOOL: u32 = 4;
/// `jets_field.kind`: an interned string in `value.str`.
pub const JETS_FIELD_STR: u32 = 5;
/// `jets_field.kind`: a string copied from `value.text` (for values that vary per line; intern
/// names and keys instead).
pub const JETS_FIELD_TEXT: u32 = 6;

/// `jets_options.policy`: wait for room when the queue is full (lossless, the default); see
/// "Signals" above for what a waiting call does meanwhile.
pub const JETS_POLICY_BLOCK: u32 = 0;
/// `jets_options.policy`: drop lines when the queue is full; the footer counts them exactly.
pub const JETS_POLICY_DROP: u32 = 1;

/// The value of a typed field; which member is meant is said by `jets_field.kind`.
#[repr(C)]
#[derive(Clone, Copy)]
pub union jets_value {
    /// `JETS_FIELD_U64` and `JETS_FIELD_BOOL`.
    pub u64: u64,
    /// `JETS_FIELD_I64`.
    pub i64: i64,
    /// `JETS_FIELD_F64`.
    pub f64: f64,
    /// `JETS_FIELD_STR`: an interned string.
    pub str: jets_str,
    /// `JETS_FIELD_TEXT`: a NUL-terminated UTF-8 string, copied by the call (no interning, no
    /// JSON escaping by hand).
    pub text: *const c_char,
}

/// One typed key/value of a line's `data`, written without any JSON text. 16 bytes, frozen:
/// build it with `jets_field_u64()` and friends.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct jets_field {
    /// The key, interned.
    pub key: jets_str,
    /// `JETS_FIELD_U64`, `JETS_FIELD_I64`, `JETS_FIELD_F64`, `JETS_FIELD_BOOL` or `JETS_FIELD_STR`.
    pub kind: u32,
    /// The value.
    pub value: jets_value,
}

/// Everything a line can carry, by interned handles: for `jets_record_begin_ex`,
/// `jets_event_ex` and `jets_annotation_ex`. Initialize with `JETS_ATTRS_INIT`, which sets `size`;
/// fields added in later versions are appended, and a library reads only the prefix it knows.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct jets_attrs {
    /// `sizeof(jets_attrs)` of the caller's header.
    pub size: u32,
    /// The line's name (required).
    pub name: jets_str,
    /// The record type (records only; required there, ignored elsewhere).
    pub record_type: jets_str,
    /// The description; 0 for none.
    pub description: jets_str,
    /// Typed fields of `data` (may be NULL when `field_count` is 0).
    pub fields: *const jets_field,
    /// How many `fields`.
    pub field_count: usize,
    /// Optional JSON text for `data`: NULL, or a NUL-terminated UTF-8 string valid for the call.
    /// Typed fields are merged into it (then it must be an object).
    pub data_json: *const c_char,
    /// The subsystem the line belongs to (`jets_domain_create`); 0 for none. A line in a disabled
    /// domain is skipped at the cost of one atomic load; a record's line carries `data.domain`.
    pub domain: jets_domain,
    /// The clock `clk` counts in (`jets_clock_create`); 0 for the trace's own clock.
    pub clock: jets_clock,
}

/// `JETS_ATTRS_INIT` for Rust code that calls the C API as C does (this crate's tests and
/// benches): `size` set, every other member empty.
impl Default for jets_attrs {
    fn default() -> Self {
        jets_attrs {
            size: std::mem::size_of::<jets_attrs>() as u32,
            name: 0,
            record_type: 0,
            description: 0,
            fields: std::ptr::null(),
            field_count: 0,
            data_json: std::ptr::null(),
            domain: 0,
            clock: 0,
        }
    }
}

/// Options of `jets_open_ex`. Initialize with `JETS_OPTIONS_INIT` (all defaults), which sets `size`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct jets_options {
    /// `sizeof(jets_options)` of the caller's header.
    pub size: u32,
    /// `JETS_POLICY_BLOCK` (default) or `JETS_POLICY_DROP`.
    pub policy: u32,
    /// Lines the queue of each emitting thread holds; 0 for the default (16,384).
    pub queue_capacity: u64,
    /// Longest time a line waits in the writer before reaching the OS, in microseconds; 0 for the
    /// default (100 ms).
    pub flush_interval_us: u64,
    /// What to capture, in the `JETS_CAPTURE` grammar (`"clk=1000000..1100000"`,
    /// `"recorder=100000;trigger=error"`, ...), read during the call: set by the simulator (from
    /// its own command line, say), it wins over the environment variable, as Rust's
    /// `TraceBuilder::capture` does. NULL (the default): the variable's setting, or everything.
    /// A bad setting fails the open with `JETS_ERR_INVALID_ARGUMENT`, naming the clause. Added
    /// after the members above: a program built against a header without it (a smaller `size`)
    /// opens as before.
    pub capture: *const c_char,
}
