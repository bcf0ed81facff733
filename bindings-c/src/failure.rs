//! Failures at the C boundary: a code plus a message, kept per thread for `jets_last_error`, and
//! the guard that turns panics into `JETS_ERR_INTERNAL` so that none unwinds into C.

use std::cell::RefCell;
use std::ffi::{c_int, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::codes::*;

/// Why a call failed.
#[derive(Debug)]
pub(crate) struct Failure {
    pub(crate) code: c_int,
    pub(crate) message: String,
}

impl Failure {
    pub(crate) fn new(code: c_int, message: impl Into<String>) -> Self {
        Failure { code, message: message.into() }
    }
    pub(crate) fn invalid(message: impl Into<String>) -> Self {
        Failure::new(JETS_ERR_INVALID_ARGUMENT, message)
    }
}

impl From<jets::Error> for Failure {
    fn from(e: jets::Error) -> Self {
        let code = match &e {
            jets::Error::ClkBeforeStart { .. } => JETS_ERR_CLK_BEFORE_START,
            // jets_close frees the trace, so no call can reach a closed one: a bug if it happens.
            jets::Error::Closed => JETS_ERR_INTERNAL,
            jets::Error::InvalidJson(_) => JETS_ERR_INVALID_JSON,
            jets::Error::InvalidArgument(_) => JETS_ERR_INVALID_ARGUMENT,
            jets::Error::Io { .. } => JETS_ERR_IO,
            _ => JETS_ERR_INTERNAL,
        };
        Failure::new(code, e.to_string())
    }
}

thread_local! {
    static LAST: RefCell<(c_int, CString)> = RefCell::new((JETS_OK, CString::default()));
}

/// Remembers `f` as this thread's last failure of `function`.
fn remember(function: &str, f: Failure) -> c_int {
    // The message comes from our own text and user input, which may hold a NUL: cut there rather
    // than lose the whole message.
    let text = format!("{function}: {}", f.message);
    let text = match CString::new(text) {
        Ok(c) => c,
        Err(e) => {
            let cut = e.nul_position();
            let mut bytes = e.into_vec();
            bytes.truncate(cut);
            CString::new(bytes).unwrap_or_default()
        }
    };
    // During thread teardown the slot may be gone; the code is still returned.
    let _ = LAST.try_with(|slot| *slot.borrow_mut() = (f.code, text));
    f.code
}

/// Runs one C call: a failure, or a panic inside it, becomes this thread's last error and its
/// code is returned.
pub(crate) fn run<T>(function: &str, f: impl FnOnce() -> Result<T, Failure>) -> Result<T, c_int> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(failure)) => Err(remember(function, failure)),
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".to_owned());
            let f = Failure::new(JETS_ERR_INTERNAL, format!("internal error (a bug): {what}"));
            Err(remember(function, f))
        }
    }
}

/// [`run`] for calls that return a status code.
pub(crate) fn status(function: &str, f: impl FnOnce() -> Result<(), Failure>) -> c_int {
    run(function, f).map_or_else(|code| code, |()| JETS_OK)
}

/// The code of this thread's last failure (`JETS_OK` when nothing failed yet).
pub(crate) fn last_code() -> c_int {
    LAST.try_with(|slot| slot.borrow().0).unwrap_or(JETS_OK)
}

/// Runs `f` with this thread's last error message.
pub(crate) fn with_last_message<R>(f: impl FnOnce(&CString) -> R) -> Option<R> {
    LAST.try_with(|slot| f(&slot.borrow().1)).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_becomes_an_internal_error_with_its_message() {
        let got: Result<(), c_int> = run("jets_test", || panic!("boom"));
        assert_eq!(got, Err(JETS_ERR_INTERNAL));
        assert_eq!(last_code(), JETS_ERR_INTERNAL);
        let text = with_last_message(|m| m.to_string_lossy().into_owned()).expect("slot");
        assert_eq!(text, "jets_test: internal error (a bug): boom");
    }

    #[test]
    fn a_nul_in_a_message_cuts_it_there() {
        let got: Result<(), c_int> = run("jets_test", || Err(Failure::invalid("bad\0tail")));
        assert_eq!(got, Err(JETS_ERR_INVALID_ARGUMENT));
        let text = with_last_message(|m| m.to_string_lossy().into_owned()).expect("slot");
        assert_eq!(text, "jets_test: bad");
    }
}
