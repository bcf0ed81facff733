//! Reading C strings: NULL and invalid UTF-8 become failures naming the argument.

use std::ffi::{c_char, CStr};

use crate::codes::JETS_ERR_INVALID_UTF8;
use crate::failure::Failure;

/// The text of a required string argument.
///
/// # Safety
/// `ptr` is NULL or points to a NUL-terminated string that outlives `'a`.
pub(crate) unsafe fn required<'a>(ptr: *const c_char, what: &str) -> Result<&'a str, Failure> {
    // SAFETY: forwarded from the caller.
    unsafe { optional(ptr, what) }?.ok_or_else(|| Failure::invalid(format!("{what} is NULL")))
}

/// The text of an optional string argument (NULL is `None`).
///
/// # Safety
/// `ptr` is NULL or points to a NUL-terminated string that outlives `'a`.
pub(crate) unsafe fn optional<'a>(
    ptr: *const c_char,
    what: &str,
) -> Result<Option<&'a str>, Failure> {
    if ptr.is_null() {
        return Ok(None);
    }
    // SAFETY: non-NULL and NUL-terminated per the caller's contract.
    let bytes = unsafe { CStr::from_ptr(ptr) }.to_bytes();
    std::str::from_utf8(bytes).map(Some).map_err(|e| {
        Failure::new(
            JETS_ERR_INVALID_UTF8,
            format!("{what} is not valid UTF-8 (at byte {})", e.valid_up_to()),
        )
    })
}
