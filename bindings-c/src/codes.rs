//! Status codes returned by the C API: 0 is success, every failure has its own negative code.

use std::ffi::{c_char, c_int};

/// Success.
pub const JETS_OK: c_int = 0;
/// A required pointer is NULL, or an argument is out of range (e.g. record id 0, an unknown field
/// kind, a struct whose `size` is too small).
pub const JETS_ERR_INVALID_ARGUMENT: c_int = -1;
/// A string argument is not valid UTF-8.
pub const JETS_ERR_INVALID_UTF8: c_int = -2;
/// `data_json` or `header_metadata_json` is not valid JSON, or not an object where one is required.
pub const JETS_ERR_INVALID_JSON: c_int = -3;
/// No record with this id was ever begun in this trace.
pub const JETS_ERR_UNKNOWN_RECORD: c_int = -4;
/// The record has already ended.
pub const JETS_ERR_RECORD_ENDED: c_int = -5;
/// `clk` is before the start of the record (or, for a new record, of its parent).
pub const JETS_ERR_CLK_BEFORE_START: c_int = -6;
/// An interned string handle that `jets_intern` never returned.
pub const JETS_ERR_UNKNOWN_STRING: c_int = -7;
/// Writing the trace failed (disk full, permission denied...). The file holds a valid prefix and
/// nothing more is written.
pub const JETS_ERR_IO: c_int = -8;
/// A bug in libjets (a caught panic, or an SDK error the C layer should have prevented). Please
/// report it with `jets_last_error()`.
pub const JETS_ERR_INTERNAL: c_int = -9;
/// The host monitor could not start or stop (the message says why), or this platform has none.
pub const JETS_ERR_HOST: c_int = -10;

/// The trace was closed (`jets_close`): every later call on it, including a second close, returns
/// this. The closed handle itself stays valid (see `jets_close`).
pub const JETS_ERR_CLOSED: c_int = -11;
/// The trace was opened by the parent of this process, before a `fork`: the child cannot write to
/// it (its writer thread did not survive the fork), and touches nothing of it. Open a new trace in
/// the child if it should trace too.
pub const JETS_ERR_FORKED: c_int = -12;
/// The call was made from a signal handler that interrupted another libjets call on the same
/// thread; it was refused and did nothing. Only the async-signal-safe calls (see jets.h) may be
/// made from a handler, and they too are refused when they would re-enter.
pub const JETS_ERR_REENTRANT: c_int = -13;

/// The name of a status code, e.g. `"JETS_ERR_IO"`; `"JETS_ERR_UNRECOGNIZED"` for other values.
/// The string is static: never free it.
#[no_mangle]
pub extern "C" fn jets_status_name(code: c_int) -> *const c_char {
    let name: &'static [u8] = match code {
        JETS_OK => b"JETS_OK\0",
        JETS_ERR_INVALID_ARGUMENT => b"JETS_ERR_INVALID_ARGUMENT\0",
        JETS_ERR_INVALID_UTF8 => b"JETS_ERR_INVALID_UTF8\0",
        JETS_ERR_INVALID_JSON => b"JETS_ERR_INVALID_JSON\0",
        JETS_ERR_UNKNOWN_RECORD => b"JETS_ERR_UNKNOWN_RECORD\0",
        JETS_ERR_RECORD_ENDED => b"JETS_ERR_RECORD_ENDED\0",
        JETS_ERR_CLK_BEFORE_START => b"JETS_ERR_CLK_BEFORE_START\0",
        JETS_ERR_UNKNOWN_STRING => b"JETS_ERR_UNKNOWN_STRING\0",
        JETS_ERR_IO => b"JETS_ERR_IO\0",
        JETS_ERR_INTERNAL => b"JETS_ERR_INTERNAL\0",
        JETS_ERR_HOST => b"JETS_ERR_HOST\0",
        JETS_ERR_CLOSED => b"JETS_ERR_CLOSED\0",
        JETS_ERR_FORKED => b"JETS_ERR_FORKED\0",
        JETS_ERR_REENTRANT => b"JETS_ERR_REENTRANT\0",
        _ => b"JETS_ERR_UNRECOGNIZED\0",
    };
    name.as_ptr().cast()
}
