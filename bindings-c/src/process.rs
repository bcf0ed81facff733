//! What a simulator's process does around libjets: `fork`, and fatal signals.
//!
//! * **fork**: only the forking thread survives in the child, so a trace opened before the fork
//!   has no writer thread there, and any lock another thread held is held forever. A
//!   `pthread_atfork` child handler bumps `FORK_GENERATION`; every trace remembers the
//!   generation it was opened in and refuses calls from a later one with `JETS_ERR_FORKED`
//!   before touching anything. The process-wide locks (the intern table's, and the SDK's registry
//!   of capture counters that opening and closing take) are taken before the fork and released on
//!   both sides, so they are never inherited held; everything else a call on
//!   the C path shares between threads is lock-free (the record table, the list of open traces,
//!   the one-time setups below, which are atomics rather than `Once`s).
//! * **fatal signals**: [`jets_install_fatal_signal_flush`] flushes every open trace (bounded,
//!   allocation- and lock-free) and then lets the signal do what it did before.

use std::ffi::c_int;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicU8, Ordering};
use std::time::Duration;

use crate::api::jets_trace;
use crate::codes::*;
use crate::failure::{status, Failure};

/// How many forks this process's ancestors and itself have gone through since libjets loaded.
static FORK_GENERATION: AtomicU64 = AtomicU64::new(0);

/// Whether the fork handlers are registered.
static ATFORK: AtomicBool = AtomicBool::new(false);

/// Registers the fork handlers when libjets is loaded (a constructor, run before `main` or by
/// `dlopen`), so that no call has to: a `Once` would be a lock, held forever in a child forked
/// while another thread was inside it.
#[used]
#[link_section = ".init_array"]
static REGISTER_AT_LOAD: extern "C" fn() = register_fork_handlers;

extern "C" fn register_fork_handlers() {
    // The first caller registers; any other goes on without waiting (nothing here blocks).
    if !ATFORK.swap(true, Ordering::AcqRel) {
        // SAFETY: the handlers are `extern "C"` functions that live as long as the library.
        unsafe { libc::pthread_atfork(Some(prepare), Some(parent), Some(child)) };
    }
}

/// The current fork generation (registers the fork handlers if the constructor did not run).
pub(crate) fn generation() -> u64 {
    if !ATFORK.load(Ordering::Relaxed) {
        register_fork_handlers();
    }
    FORK_GENERATION.load(Ordering::Relaxed)
}

/// True when a trace opened in generation `opened` is in a forked child.
#[inline(always)]
pub(crate) fn forked(opened: u64) -> bool {
    FORK_GENERATION.load(Ordering::Relaxed) != opened
}

extern "C" fn prepare() {
    crate::intern::hold_for_fork();
    jets::__fork::hold();
}

extern "C" fn parent() {
    jets::__fork::release();
    crate::intern::release_after_fork();
}

extern "C" fn child() {
    FORK_GENERATION.fetch_add(1, Ordering::Relaxed);
    jets::__fork::release();
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
/// 0: not installed, 1: being installed, 2: installed. Not a `Once`, which would be a lock that
/// a child forked during the installation inherits held.
static INSTALLED: AtomicU8 = AtomicU8::new(0);

/// Installs a handler for SIGSEGV, SIGABRT, SIGBUS, SIGTERM and SIGINT that flushes every open
/// trace (waiting at most 2 s per trace), restores the action that was in place before, and
/// re-raises the signal: a crashing or interrupted simulator leaves everything it emitted on disk
/// (a valid prefix: `jets repair` adds the footer) and then dies, or runs its own handler, as it
/// would have without libjets. On SIGTERM and SIGINT, where the program had left the default
/// action, the action restored is libjets' own closing one, so those traces also get their
/// footer (as without this call). Install your own handlers first if you have any. Idempotent.
#[no_mangle]
pub extern "C" fn jets_install_fatal_signal_flush() -> c_int {
    status("jets_install_fatal_signal_flush", || {
        // Only the first call installs; a concurrent one returns at once (installing is quick
        // and cannot fail for these signals, so it is as good as done).
        if INSTALLED.compare_exchange(0, 1, Ordering::AcqRel, Ordering::Acquire).is_err() {
            return Ok(());
        }
        let result = install();
        INSTALLED.store(if result.is_ok() { 2 } else { 0 }, Ordering::Release);
        result
    })
}

fn install() -> Result<(), Failure> {
    // The SDK's handlers for SIGTERM and SIGINT (which close every open trace, footer included,
    // WR-SIG-1) go first, whether or not a trace is open yet: ours below then flushes, restores
    // theirs and re-raises, and theirs closes. Installed after ours, they would see a handler
    // where they install only over the default, and traces would only be flushed.
    jets::__signals::install_ending();
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
