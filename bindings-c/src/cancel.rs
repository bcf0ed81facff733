//! POSIX thread cancellation: no libjets call is a cancellation point.
//!
//! A C or C++ simulator may cancel its threads (`pthread_cancel`, deferred: the default). glibc
//! acts on the request at the thread's next cancellation point (`open`, `close`, `nanosleep`,
//! `pthread_join`...) by unwinding its stack; inside a libjets call that unwind would meet the
//! call's `catch_unwind` (which must then abort the whole process: "FATAL: exception not
//! rethrown", seen before this module) or leave a trace half opened, a writer thread never
//! joined. So the calls that open, flush, dump or close a trace, or start or stop the host
//! monitor, run with cancellation disabled, and the emitting calls, which reach no cancellation
//! point (a producer waiting for room sleeps with a raw system call: `jets::write`'s `nap`),
//! need nothing. A cancel request made meanwhile acts at the caller's next cancellation point,
//! after the call returned (rule CA-CANCEL-1).
//!
//! Asynchronous cancellation (`PTHREAD_CANCEL_ASYNCHRONOUS`) is not supported, as by almost all
//! of libc: a thread in that state must not call libjets.

/// Runs `f` with this thread's cancellation disabled, then restores its previous state (a
/// request made meanwhile stays pending until the caller's next cancellation point).
#[cfg(all(target_os = "linux", not(miri)))]
pub(crate) fn deferred<R>(f: impl FnOnce() -> R) -> R {
    // Not in the libc crate for Linux; the same values in glibc and musl.
    const PTHREAD_CANCEL_DISABLE: libc::c_int = 1;
    extern "C" {
        fn pthread_setcancelstate(state: libc::c_int, old: *mut libc::c_int) -> libc::c_int;
    }
    struct Restore(libc::c_int);
    impl Drop for Restore {
        fn drop(&mut self) {
            // SAFETY: restores the state read below; a null old state is allowed.
            unsafe { pthread_setcancelstate(self.0, std::ptr::null_mut()) };
        }
    }
    let mut old = 0;
    // SAFETY: a valid state and a valid pointer for the old one; only this thread's state.
    unsafe { pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &mut old) };
    let _restore = Restore(old);
    f()
}

/// Runs `f` (no POSIX thread cancellation here).
#[cfg(not(all(target_os = "linux", not(miri))))]
pub(crate) fn deferred<R>(f: impl FnOnce() -> R) -> R {
    f()
}
