//! Capture control from C: on/off, regions of interest and flight-recorder dumps
//! (see `jets::capture`). The setting itself comes from `JETS_CAPTURE`, read by `jets_open`.

use std::ffi::c_int;

use crate::api::{jets_trace, trace};
use crate::failure::{run, status, status_uncancellable, Failure};

/// Turns capture on: lines emitted from now on are written (subject to `JETS_CAPTURE`).
///
/// # Safety
/// `t` is NULL or an open trace.
#[no_mangle]
pub unsafe extern "C" fn jets_capture_on(t: *mut jets_trace) -> c_int {
    status("jets_capture_on", || {
        // SAFETY: forwarded from the caller.
        unsafe { trace(t) }?.trace.capture_on();
        Ok(())
    })
}

/// Turns capture off: until `jets_capture_on`, emitting calls write nothing; records begun while
/// off get `JETS_ID_LEFT_OUT` and are left out with everything under them (CA-LEFT-1).
///
/// # Safety
/// `t` is NULL or an open trace.
#[no_mangle]
pub unsafe extern "C" fn jets_capture_off(t: *mut jets_trace) -> c_int {
    status("jets_capture_off", || {
        // SAFETY: forwarded from the caller.
        unsafe { trace(t) }?.trace.capture_off();
        Ok(())
    })
}

/// Whether the file reached the size of the `limit=` clause of `JETS_CAPTURE` and capture stopped
/// for good: 1 when it did (`jets_capture_on` then does nothing), 0 when not, a negative
/// `JETS_ERR_*` code on failure (a NULL or closed trace).
///
/// # Safety
/// `t` is NULL or an open trace.
#[no_mangle]
pub unsafe extern "C" fn jets_limit_reached(t: *mut jets_trace) -> c_int {
    let reached = run("jets_limit_reached", || {
        // SAFETY: forwarded from the caller.
        Ok(unsafe { trace(t) }?.trace.limit_reached())
    });
    reached.map_or_else(|code| code, c_int::from)
}

/// Opens a region of interest (used with the `roi` clause of `JETS_CAPTURE`). Regions nest and
/// may be opened and closed on any thread.
///
/// # Safety
/// `t` is NULL or an open trace.
#[no_mangle]
pub unsafe extern "C" fn jets_roi_begin(t: *mut jets_trace) -> c_int {
    status("jets_roi_begin", || {
        // SAFETY: forwarded from the caller.
        unsafe { trace(t) }?.trace.roi_begin();
        Ok(())
    })
}

/// Closes a region of interest; `JETS_ERR_INVALID_ARGUMENT` when none is open.
///
/// # Safety
/// `t` is NULL or an open trace.
#[no_mangle]
pub unsafe extern "C" fn jets_roi_end(t: *mut jets_trace) -> c_int {
    status("jets_roi_end", || {
        // SAFETY: forwarded from the caller.
        if unsafe { trace(t) }?.trace.roi_end() {
            Ok(())
        } else {
            Err(Failure::invalid("no region of interest is open"))
        }
    })
}

/// Writes what the flight recorder holds (with the ancestors its lines need) and flushes it to
/// the OS; without a recorder, the same as `jets_flush`.
///
/// # Safety
/// `t` is NULL or an open trace.
#[no_mangle]
pub unsafe extern "C" fn jets_dump(t: *mut jets_trace) -> c_int {
    status_uncancellable("jets_dump", || {
        // SAFETY: forwarded from the caller.
        Ok(unsafe { trace(t) }?.trace.dump()?)
    })
}
