//! Writing flight recorders on a fatal signal (SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT).
//!
//! The handler does only async-signal-safe work: it sets a flag on each registered trace and wakes
//! its writer thread, which dumps the recorder, writes the footer and closes the file; the handler
//! waits for that (at most [`WAIT`]), then restores the default action and re-raises the signal,
//! so the process still dies of it (and a core dump or a parent's `wait` sees the real cause).

use std::ptr;
use std::sync::atomic::{AtomicPtr, Ordering};
use std::sync::{Arc, Once};
use std::time::Duration;

use crate::write::Shared;

const SIGNALS: [libc::c_int; 5] =
    [libc::SIGSEGV, libc::SIGBUS, libc::SIGILL, libc::SIGFPE, libc::SIGABRT];
const SLOTS: usize = 16;
/// The longest a dying process waits for its recorders to be written.
const WAIT: Duration = Duration::from_secs(3);

static TRACES: [AtomicPtr<Shared>; SLOTS] = [const { AtomicPtr::new(ptr::null_mut()) }; SLOTS];
static INSTALL: Once = Once::new();

/// Registers a trace whose recorder must be written on a fatal signal. Returns false when all
/// slots are taken (the trace is then written on panic and close only).
pub(crate) fn register(shared: &Arc<Shared>) -> bool {
    // Miri cannot install signal handlers; under it (unit tests of the keeper) a recorder is
    // written on dump, trigger, panic and close only.
    if !cfg!(miri) {
        INSTALL.call_once(install);
    }
    let raw = Arc::into_raw(Arc::clone(shared)).cast_mut();
    for slot in &TRACES {
        if slot.compare_exchange(ptr::null_mut(), raw, Ordering::AcqRel, Ordering::Relaxed).is_ok()
        {
            return true;
        }
    }
    // SAFETY: `raw` came from Arc::into_raw just above and was not stored.
    drop(unsafe { Arc::from_raw(raw) });
    false
}

/// Forgets a trace (at close).
pub(crate) fn unregister(shared: &Arc<Shared>) {
    let me = Arc::as_ptr(shared).cast_mut();
    for slot in &TRACES {
        if slot.compare_exchange(me, ptr::null_mut(), Ordering::AcqRel, Ordering::Relaxed).is_ok() {
            // SAFETY: the slot held the pointer from `register`'s Arc::into_raw; it is taken out
            // of the slot exactly once, here.
            drop(unsafe { Arc::from_raw(me) });
        }
    }
}

fn install() {
    for sig in SIGNALS {
        // SAFETY: a plain sigaction call with a zeroed, then filled, struct.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = handler as extern "C" fn(libc::c_int) as usize;
            libc::sigemptyset(&mut action.sa_mask);
            action.sa_flags = libc::SA_ONSTACK;
            libc::sigaction(sig, &action, ptr::null_mut());
        }
    }
}

extern "C" fn handler(sig: libc::c_int) {
    let mut waiting = [ptr::null::<Shared>(); SLOTS];
    for (i, slot) in TRACES.iter().enumerate() {
        let p = slot.load(Ordering::Acquire);
        if !p.is_null() {
            // SAFETY: a registered pointer stays valid until `unregister`, which a trace calls
            // only after its writer has finished.
            unsafe { (*p).request_fatal_close() };
            waiting[i] = p;
        }
    }
    let step = libc::timespec { tv_sec: 0, tv_nsec: 1_000_000 };
    let mut waited = Duration::ZERO;
    while waited < WAIT {
        // SAFETY: as above.
        if waiting.iter().all(|p| p.is_null() || unsafe { (**p).finished() }) {
            break;
        }
        // SAFETY: nanosleep is async-signal-safe; a null remainder is allowed.
        unsafe { libc::nanosleep(&step, ptr::null_mut()) };
        waited += Duration::from_millis(1);
    }
    // SAFETY: back to the default action, then re-raise: the signal is blocked while this
    // handler runs, so it is delivered, and kills the process, when the handler returns (a real
    // fault would also recur on return). The default, not a previous handler: a handler that
    // returns (Rust's own stack-overflow one does) would let a raised signal be survived.
    unsafe {
        libc::signal(sig, libc::SIG_DFL);
        libc::raise(sig);
    }
}
