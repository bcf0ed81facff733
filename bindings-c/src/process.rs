//! What a simulator's process does around libjets: `fork`, and fatal signals.
//!
//! * **fork**: only the forking thread survives in the child, so a trace opened before the fork
//!   has no writer thread there, and any lock another thread held is held forever. A
//!   `pthread_atfork` child handler bumps `FORK_GENERATION`; every trace remembers the
//!   generation it was opened in and refuses calls from a later one with `JETS_ERR_FORKED`
//!   before touching anything. The one process-wide lock (the intern table's) is taken before the
//!   fork and released on both sides, so it is never inherited held.
//! * **fatal signals**: [`jets_install_fatal_signal_flush`] flushes every open trace (bounded,
//!   allocation- and lock-free) and then lets the signal do what it did before.

use std::ffi::c_int;
use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering};
use std::sync::Once;
use std::time::Duration;

use crate::api::jets_trace;
use crate::codes::*;
use crate::failure::{status, Failure};

/// How many forks this process's ancestors and itself have gone through since libjets loaded.
static FORK_GENERATION: AtomicU64 = AtomicU64::new(0);

/// The current fork generation (registers the fork handlers on first use).
pub(crate) fn generation() -> u64 {
    static ATFORK: Once = Once::new();
    ATFORK.call_once(|| {
        // SAFETY: the handlers are `extern "C"` functions that live as long as the process.
        unsafe { libc::pthread_atfork(Some(prepare), Some(parent), Some(child)) };
    });
    FORK_GENERATION.load(Ordering::Relaxed)
}

/// True when a trace opened in generation `opened` is in a forked child.
#[inline(always)]
pub(crate) fn forked(opened: u64) -> bool {
    FORK_GENERATION.load(Ordering::Relaxed) != opened
}

extern "C" fn prepare() {
    crate::intern::hold_for_fork();
}

extern "C" fn parent() {
    crate::intern::release_after_fork();
}

extern "C" fn child() {
    FORK_GENERATION.fetch_add(1, Ordering::Relaxed);
    crate::intern::release_after_fork();
}

/// Runs `f` (which starts libjets threads) with every blockable signal blocked, so that the
/// threads it starts inherit that mask: a process-directed signal (SIGALRM, SIGINT...) is then
/// never delivered to a libjets thread, whose handler would run in the middle of the writer's
/// work. The caller's mask is restored.
pub(crate) fn with_signals_blocked<R>(f: impl FnOnce() -> R) -> R {
    // SAFETY: plain libc calls on local sigset_t values.
    unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_BLOCK, &all, &mut old);
        let r = f();
        libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
        r
    }
}

/// Open traces the fatal-signal handler flushes. Fixed and lock-free: a handler can walk it.
const LIVE_SLOTS: usize = 64;
static LIVE: [AtomicPtr<jets_trace>; LIVE_SLOTS] =
    [const { AtomicPtr::new(std::ptr::null_mut()) }; LIVE_SLOTS];

/// Makes `t` known to the fatal-signal handler (beyond 64 open traces, later ones are not).
pub(crate) fn register(t: *mut jets_trace) {
    for slot in &LIVE {
        if slot
            .compare_exchange(std::ptr::null_mut(), t, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
        {
            return;
        }
    }
}

/// Forgets `t` (before it is closed).
pub(crate) fn unregister(t: *mut jets_trace) {
    for slot in &LIVE {
        let _ = slot.compare_exchange(t, std::ptr::null_mut(), Ordering::AcqRel, Ordering::Relaxed);
    }
}

/// The signals whose default action kills the process and which a simulator sees in practice.
const FATAL: [c_int; 5] = [libc::SIGSEGV, libc::SIGABRT, libc::SIGBUS, libc::SIGTERM, libc::SIGINT];

/// The actions in place before ours, restored before re-raising. Written once, before our
/// handler is installed; read only by the handler.
static mut PREVIOUS: [std::mem::MaybeUninit<libc::sigaction>; 5] =
    [const { std::mem::MaybeUninit::uninit() }; 5];
static INSTALLED: Once = Once::new();

/// Installs a handler for SIGSEGV, SIGABRT, SIGBUS, SIGTERM and SIGINT that flushes every open
/// trace (waiting at most 2 s per trace), restores the action that was in place before, and
/// re-raises the signal: a crashing or interrupted simulator leaves everything it emitted on disk
/// (a valid prefix: `jets repair` adds the footer) and then dies, or runs its own handler, as it
/// would have without libjets. Install your own handlers first if you have any. Idempotent.
#[no_mangle]
pub extern "C" fn jets_install_fatal_signal_flush() -> c_int {
    status("jets_install_fatal_signal_flush", || {
        let mut result = Ok(());
        INSTALLED.call_once(|| result = install());
        result
    })
}

fn install() -> Result<(), Failure> {
    for (i, &sig) in FATAL.iter().enumerate() {
        // SAFETY: plain libc calls on zeroed, then filled, structs; PREVIOUS[i] is written before
        // the handler that reads it can run (it is installed by this very call).
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_fatal as *const () as usize;
            action.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
            libc::sigemptyset(&mut action.sa_mask);
            let previous = &mut *std::ptr::addr_of_mut!(PREVIOUS[i]);
            if libc::sigaction(sig, &action, previous.as_mut_ptr()) != 0 {
                return Err(Failure::new(
                    JETS_ERR_INVALID_ARGUMENT,
                    format!("sigaction({sig}) failed: {}", std::io::Error::last_os_error()),
                ));
            }
        }
    }
    Ok(())
}

extern "C" fn on_fatal(sig: c_int, _: *mut libc::siginfo_t, _: *mut libc::c_void) {
    flush_all();
    if let Some(i) = FATAL.iter().position(|&s| s == sig) {
        // SAFETY: PREVIOUS[i] was filled by install() before this handler could run. sigaction
        // and raise are async-signal-safe. The signal is blocked while we run, so the raise is
        // delivered on return, to the restored action.
        unsafe {
            let previous = &*std::ptr::addr_of!(PREVIOUS[i]);
            libc::sigaction(sig, previous.as_ptr(), std::ptr::null_mut());
            libc::raise(sig);
        }
    }
}

/// Flushes every registered trace of this process generation. Async-signal-safe.
fn flush_all() {
    for slot in &LIVE {
        let t = slot.load(Ordering::Acquire);
        if t.is_null() {
            continue;
        }
        // SAFETY: registered traces are unregistered before they are closed; a trace closed
        // concurrently with a fatal signal is a race the caller's contract already forbids.
        if let Ok(open) = unsafe { crate::api::trace(t) } {
            let _ = open.trace.flush_signal_safe(Duration::from_secs(2));
        }
    }
}
