//! Failures at the C boundary: a code plus a message, kept per thread for `jets_last_error`, and
//! the guard every exported call runs in: it turns panics into `JETS_ERR_INTERNAL` (none unwinds
//! into C) and refuses a call made while another libjets call is running on the same thread
//! (only a signal handler can do that) with `JETS_ERR_REENTRANT`.
//!
//! Nothing here allocates: the message is formatted into a fixed per-thread buffer, so a failing
//! call from a signal handler cannot deadlock on the allocator's lock.

use std::cell::{Cell, UnsafeCell};
use std::ffi::{c_char, c_int};
use std::fmt::{self, Write as _};
use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::codes::*;

/// Why a call failed.
#[derive(Debug)]
pub(crate) struct Failure {
    pub(crate) code: c_int,
    pub(crate) msg: Msg,
}

/// A failure's text, formatted only when it is stored (into the per-thread buffer).
#[derive(Debug)]
pub(crate) enum Msg {
    Static(&'static str),
    Owned(String),
    /// `"{what} {id}{tail}"`, e.g. "record 7 has already ended", without allocating.
    Id(&'static str, u64, &'static str),
    /// `"{what}{tail}"`, e.g. "attrs->name is 0 (required)".
    What(&'static str, &'static str),
    Sdk(jets::Error),
}

impl fmt::Display for Msg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Msg::Static(s) => f.write_str(s),
            Msg::Owned(s) => f.write_str(s),
            Msg::Id(what, id, tail) => write!(f, "{what} {id}{tail}"),
            Msg::What(what, tail) => write!(f, "{what}{tail}"),
            Msg::Sdk(e) => write!(f, "{e}"),
        }
    }
}

impl From<&'static str> for Msg {
    fn from(s: &'static str) -> Self {
        Msg::Static(s)
    }
}

impl From<String> for Msg {
    fn from(s: String) -> Self {
        Msg::Owned(s)
    }
}

impl Failure {
    pub(crate) fn new(code: c_int, msg: impl Into<Msg>) -> Self {
        Failure { code, msg: msg.into() }
    }
    pub(crate) fn invalid(msg: impl Into<Msg>) -> Self {
        Failure::new(JETS_ERR_INVALID_ARGUMENT, msg)
    }
}

impl From<jets::Error> for Failure {
    fn from(e: jets::Error) -> Self {
        let code = match &e {
            jets::Error::ClkBeforeStart { .. } => JETS_ERR_CLK_BEFORE_START,
            jets::Error::Closed => JETS_ERR_CLOSED,
            jets::Error::InvalidJson(_) => JETS_ERR_INVALID_JSON,
            jets::Error::InvalidArgument(_) => JETS_ERR_INVALID_ARGUMENT,
            jets::Error::Io { .. } => JETS_ERR_IO,
            _ => JETS_ERR_INTERNAL,
        };
        Failure::new(code, Msg::Sdk(e))
    }
}

const MESSAGE_BYTES: usize = 1024;

/// What libjets keeps per thread, in one thread-local (one address computation per call, which
/// in a shared library is a call to `__tls_get_addr`). Const-initialized plain data: no
/// allocation, no destructor, usable from a signal handler.
struct State {
    /// Depth of libjets calls running on this thread: more than one only from a signal handler.
    depth: Cell<u32>,
    code: Cell<c_int>,
    /// The last message, NUL-terminated.
    message: UnsafeCell<[u8; MESSAGE_BYTES]>,
}

thread_local! {
    static STATE: State = const {
        State {
            depth: Cell::new(0),
            code: Cell::new(JETS_OK),
            message: UnsafeCell::new([0; MESSAGE_BYTES]),
        }
    };
}

/// This thread's [`State`]; `None` only during thread teardown, which a type without a
/// destructor never sees in practice.
#[inline(always)]
fn state() -> Option<&'static State> {
    // SAFETY: the thread-local has no destructor, so its storage lives as long as the thread,
    // and the reference never leaves it (each use is within one call on this thread).
    STATE.try_with(|s| unsafe { &*(s as *const State) }).ok()
}

/// Writes into a fixed buffer, cutting (at a character boundary) what does not fit or at a NUL.
struct Cursor<'a> {
    buf: &'a mut [u8; MESSAGE_BYTES],
    len: usize,
    full: bool,
}

impl fmt::Write for Cursor<'_> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        for c in s.chars() {
            let mut tmp = [0u8; 4];
            let bytes = c.encode_utf8(&mut tmp).as_bytes();
            if self.full || c == '\0' || self.len + bytes.len() >= MESSAGE_BYTES {
                self.full = true;
                return Ok(());
            }
            self.buf[self.len..self.len + bytes.len()].copy_from_slice(bytes);
            self.len += bytes.len();
        }
        Ok(())
    }
}

/// Remembers `f` as this thread's last failure of `function`.
#[cold]
#[inline(never)]
fn remember(function: &str, f: Failure) -> c_int {
    let Some(state) = state() else { return f.code };
    state.code.set(f.code);
    // SAFETY: only this thread touches its buffer, and no reference to it outlives this call
    // (jets_last_error hands C a pointer, not a Rust reference).
    let buf = unsafe { &mut *state.message.get() };
    let mut cur = Cursor { buf, len: 0, full: false };
    let _ = write!(cur, "{function}: {}", f.msg);
    let end = cur.len;
    cur.buf[end] = 0;
    f.code
}

/// Marks a libjets call running on this thread.
struct Entered(Option<&'static State>);

impl Entered {
    #[inline(always)]
    fn enter() -> Option<Entered> {
        // During thread teardown the state is gone: let the call run (no handler can be nested).
        let state = state();
        let nested = state.is_some_and(|s| s.depth.replace(1) > 0);
        // Build the guard only when entering (never eagerly, as `then_some` or `unwrap_or`
        // would): dropping one resets the depth.
        if nested {
            None
        } else {
            Some(Entered(state))
        }
    }
}

impl Drop for Entered {
    #[inline(always)]
    fn drop(&mut self) {
        if let Some(s) = self.0 {
            s.depth.set(0);
        }
    }
}

/// Runs one C call: a failure, or a panic inside it, becomes this thread's last error and its
/// code is returned. A call made while another runs on this thread (from a signal handler that
/// interrupted it) is refused and touches nothing.
#[inline(always)]
pub(crate) fn run<T>(function: &str, f: impl FnOnce() -> Result<T, Failure>) -> Result<T, c_int> {
    let Some(_entered) = Entered::enter() else { return Err(reentrant()) };
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(failure)) => Err(remember(function, failure)),
        Err(panic) => Err(panicked(function, panic)),
    }
}

/// [`run`] for a call whose body returns its status code itself (a hot path that reports its
/// rare failures through [`fail`]), with no `Result` to carry.
#[inline(always)]
pub(crate) fn guarded(function: &str, f: impl FnOnce() -> c_int) -> c_int {
    let Some(_entered) = Entered::enter() else { return reentrant() };
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(code) => code,
        Err(panic) => panicked(function, panic),
    }
}

/// The status of `result`, a call of `function` inside [`guarded`]: a failure becomes this
/// thread's last error.
#[inline(always)]
pub(crate) fn fail(function: &str, result: Result<(), Failure>) -> c_int {
    match result {
        Ok(()) => JETS_OK,
        Err(f) => remember(function, f),
    }
}

/// A call refused by [`run`]: only the code is set, as the interrupted call may be writing the
/// message buffer.
#[cold]
#[inline(never)]
fn reentrant() -> c_int {
    if let Some(s) = state() {
        s.code.set(JETS_ERR_REENTRANT);
    }
    JETS_ERR_REENTRANT
}

/// A panic caught by [`run`], reported as `JETS_ERR_INTERNAL`.
#[cold]
#[inline(never)]
fn panicked(function: &str, panic: Box<dyn std::any::Any + Send>) -> c_int {
    let what = panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".to_owned());
    remember(function, Failure::new(JETS_ERR_INTERNAL, format!("internal error (a bug): {what}")))
}

/// [`run`] for calls that return a status code.
#[inline(always)]
pub(crate) fn status(function: &str, f: impl FnOnce() -> Result<(), Failure>) -> c_int {
    run(function, f).map_or_else(|code| code, |()| JETS_OK)
}

/// [`status`] for a call that may reach a cancellation point on the caller's thread (it opens
/// or closes a file, joins a thread): run with cancellation disabled ([`crate::cancel`]).
pub(crate) fn status_uncancellable(
    function: &str,
    f: impl FnOnce() -> Result<(), Failure>,
) -> c_int {
    crate::cancel::deferred(|| status(function, f))
}

/// The code of this thread's last failure (`JETS_OK` when nothing failed yet).
pub(crate) fn last_code() -> c_int {
    state().map_or(JETS_OK, |s| s.code.get())
}

/// This thread's last message, NUL-terminated (`""` when nothing failed, or for a refused
/// re-entrant call, which has a fixed text).
pub(crate) fn last_message() -> *const c_char {
    if last_code() == JETS_ERR_REENTRANT {
        return c"a libjets call was made from a signal handler that interrupted another libjets call on the same thread; it was refused".as_ptr();
    }
    state().map_or(c"".as_ptr(), |s| s.message.get().cast::<c_char>().cast_const())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text() -> String {
        // SAFETY: the buffer is NUL-terminated.
        unsafe { std::ffi::CStr::from_ptr(last_message()) }.to_string_lossy().into_owned()
    }

    #[test]
    fn a_panic_becomes_an_internal_error_with_its_message() {
        let got: Result<(), c_int> = run("jets_test", || panic!("boom"));
        assert_eq!(got, Err(JETS_ERR_INTERNAL));
        assert_eq!(last_code(), JETS_ERR_INTERNAL);
        assert_eq!(text(), "jets_test: internal error (a bug): boom");
    }

    #[test]
    fn a_nul_in_a_message_cuts_it_there() {
        let got: Result<(), c_int> =
            run("jets_test", || Err(Failure::invalid("bad\0tail".to_owned())));
        assert_eq!(got, Err(JETS_ERR_INVALID_ARGUMENT));
        assert_eq!(text(), "jets_test: bad");
    }

    #[test]
    fn a_long_message_is_cut_to_the_buffer() {
        let long = "é".repeat(2 * MESSAGE_BYTES);
        let _: Result<(), c_int> = run("jets_test", || Err(Failure::invalid(long)));
        let t = text();
        assert!(t.len() < MESSAGE_BYTES && t.starts_with("jets_test: éé"), "{t}");
    }

    #[test]
    fn a_nested_call_is_refused() {
        let got = run("outer", || Ok(run("inner", || Ok(1))));
        assert_eq!(got, Ok(Err(JETS_ERR_REENTRANT)));
        assert_eq!(run("after", || Ok(2)), Ok(2));
    }
}
