//! The short sleeps of a thread that waits inside an emitting call, which must not be POSIX
//! thread cancellation points.
//!
//! A C or C++ simulator may cancel its threads (`pthread_cancel`, deferred: the default). glibc
//! acts on a cancel request at a cancellation point, such as `nanosleep` (what
//! `std::thread::sleep` calls), by unwinding the thread's stack; inside an emitting call that
//! unwind would pass through this crate's frames (and, in libjets, reach a `catch_unwind` that
//! must abort the process), with the thread's ring half written. So a producer that waits for
//! room sleeps with the `clock_nanosleep` system call itself, which glibc does not make a
//! cancellation point: the request then acts at the simulator's next cancellation point,
//! outside the call. (The C API also defers cancellation around its calls that open, flush or
//! close a trace: `bindings-c`.)

use std::time::Duration;

/// Sleeps for about `d` without being a cancellation point (see the module); async-signal-safe.
#[cfg(all(target_os = "linux", not(miri)))]
pub(crate) fn nap(d: Duration) {
    let ts = libc::timespec {
        tv_sec: d.as_secs() as libc::time_t,
        tv_nsec: d.subsec_nanos() as libc::c_long,
    };
    // SAFETY: `ts` is a valid timespec; a null remainder is allowed. An interrupted or failed
    // sleep only ends early: every caller checks its condition again.
    unsafe {
        libc::syscall(
            libc::SYS_clock_nanosleep,
            libc::CLOCK_MONOTONIC,
            0,
            &ts as *const libc::timespec,
            std::ptr::null_mut::<libc::timespec>(),
        );
    }
}

/// Sleeps for about `d` (no thread cancellation to keep out here).
#[cfg(not(all(target_os = "linux", not(miri))))]
pub(crate) fn nap(d: Duration) {
    std::thread::sleep(d);
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    #[test]
    fn a_nap_sleeps() {
        let start = Instant::now();
        super::nap(Duration::from_millis(5));
        assert!(start.elapsed() >= Duration::from_millis(5));
    }
}
