//! The process-wide hooks of open traces: a panic flushes the traces that ask for it
//! ([`crate::TraceBuilder::flush_on_panic`], and a flight recorder's dump on panic), and the
//! process's exit closes every trace still open ([`crate::TraceBuilder::close_at_exit`]).
//!
//! Installing a hook per trace would chain one closure per trace ever opened, and a panic would
//! walk (and its stack would hold) all of them. Instead each hook is installed once and serves a
//! list; a dropped trace is a dead `Weak` there, pruned whenever a trace registers.
//!
//! Why close at exit: a simulator that calls `exit()` or returns from `main` without closing its
//! trace (a C program on its error path, a Rust program with its trace in a `static`) lost every
//! line still in the writer, up to `flush_interval` of them, and its footer: the file held the
//! header alone when that was all written by then. The exit handler (`atexit`, which both
//! `exit()` and a return from `main` run) closes such traces as `Trace::close` does, the records
//! still open counted in the footer. A signal that ends the process is served elsewhere
//! (`signals.rs`): a handler can take no lock, as this list's.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

use super::Inner;
use crate::fork::HeldAcrossFork;

/// A registered trace.
struct Open {
    trace: Weak<Inner>,
    /// On panic: `Some(true)` dumps its flight recorder, `Some(false)` flushes, `None` nothing.
    on_panic: Option<bool>,
    /// Closed at exit, by the process that opened it (a forked child's exit leaves its parent's
    /// traces alone: their writer threads do not exist there).
    #[cfg_attr(not(all(unix, not(miri))), allow(dead_code))]
    at_exit: bool,
}

static TRACES: Mutex<Vec<Open>> = Mutex::new(Vec::new());
/// Whether the panic hook and the exit handler are installed. Not `Once`s: a `Once` is a lock,
/// which a child forked while another thread installs would inherit held, and hang on when it
/// opens a trace.
static PANIC_HOOK: AtomicBool = AtomicBool::new(false);
#[cfg(all(unix, not(miri)))]
static EXIT_HOOK: AtomicBool = AtomicBool::new(false);

/// How long the panic hook waits for each trace: a panic must not hang on a stuck disk.
const FLUSH_TIMEOUT: Duration = Duration::from_secs(2);
/// How long the exit handler waits for each trace's writer to finish: an exit must not hang on
/// a stuck disk or a pipe nobody reads (the trace is then left as `jets repair` completes it).
#[cfg(all(unix, not(miri)))]
const CLOSE_TIMEOUT: Duration = Duration::from_secs(30);

fn traces() -> MutexGuard<'static, Vec<Open>> {
    TRACES.lock().unwrap_or_else(|p| p.into_inner())
}

/// Serves `trace` from the hooks it asks for, while it lives: on every later panic, a flush
/// (`Some(false)`) or its flight recorder's dump (`Some(true)`); at exit, a close.
pub(super) fn register(trace: Weak<Inner>, on_panic: Option<bool>, close_at_exit: bool) {
    if on_panic.is_none() && !close_at_exit {
        return;
    }
    if on_panic.is_some() && !PANIC_HOOK.swap(true, Ordering::AcqRel) {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            flush_all();
            previous(info);
        }));
    }
    // Unix only (and not under Miri, which cannot call `atexit`): elsewhere a trace nobody
    // closed keeps what was written.
    #[cfg(all(unix, not(miri)))]
    if close_at_exit && !EXIT_HOOK.swap(true, Ordering::AcqRel) {
        // SAFETY: registers a function of the right type; fails only when the handler table is
        // full, and then traces are not closed at exit (as before this hook).
        unsafe { libc::atexit(close_all) };
    }
    let mut traces = traces();
    traces.retain(|t| t.trace.strong_count() > 0);
    traces.push(Open { trace, on_panic, at_exit: close_at_exit });
}

/// The live traces for which `pick` says what to do, taken without blocking on the list's lock:
/// a hook must never deadlock (a panic raised while this thread holds the list). While another
/// thread holds it (registering a trace, briefly), the lock is tried again for up to `patience`.
fn live<T>(pick: impl Fn(&Open) -> Option<T>, patience: Duration) -> Vec<(Arc<Inner>, T)> {
    let collect =
        |list: &[Open]| list.iter().filter_map(|o| Some((o.trace.upgrade()?, pick(o)?))).collect();
    let start = Instant::now();
    loop {
        match TRACES.try_lock() {
            Ok(list) => return collect(&list),
            Err(std::sync::TryLockError::Poisoned(p)) => return collect(&p.into_inner()),
            Err(std::sync::TryLockError::WouldBlock) if start.elapsed() < patience => {
                std::thread::sleep(Duration::from_millis(1));
            }
            Err(std::sync::TryLockError::WouldBlock) => return Vec::new(),
        }
    }
}

thread_local! {
    /// Set while this thread runs code whose panic the SDK catches and reports as an error of
    /// one trace ([`caught`]): such a panic is not the program failing.
    static CATCHING: Cell<bool> = const { Cell::new(false) };
}

/// Runs `f`, a user's code whose panic the caller catches and reports as its trace's error (a
/// sink's `Write` on the writer or dump thread): a panic in it does not flush or dump the
/// process's traces from the panic hook (CAP-REC-7). Before, a sink that panicked in one trace
/// dumped the flight recorder of every other trace in the process, a dump nobody asked for.
pub(super) fn caught<T>(f: impl FnOnce() -> T) -> T {
    super::with_flag(&CATCHING, f)
}

/// True when `trace`'s own writer thread is this one (a user `Write` that panics or exits runs
/// there), which cannot wait for itself.
fn on_its_writer(trace: &Inner) -> bool {
    let me = std::thread::current().id();
    trace.shared.writer.get().is_some_and(|w| w.id() == me)
}

fn flush_all() {
    if CATCHING.try_with(Cell::get).unwrap_or(false) {
        return;
    }
    // A panic may come from this thread while it holds the list: no waiting.
    for (trace, dump) in live(|o| o.on_panic, Duration::ZERO) {
        if on_its_writer(&trace) {
            continue;
        }
        let _ =
            if dump { trace.dump(Some(FLUSH_TIMEOUT)) } else { trace.flush(Some(FLUSH_TIMEOUT)) };
    }
}

/// The exit handler: closes every trace this process opened that is still open.
#[cfg(all(unix, not(miri)))]
extern "C" fn close_all() {
    let pid = std::process::id();
    // Another thread may be registering a trace as the process exits: wait a little for it.
    for (trace, ()) in live(|o| o.at_exit.then_some(()), Duration::from_secs(1)) {
        if trace.shared.pid != pid || on_its_writer(&trace) {
            continue;
        }
        if let Some(Err(e)) = trace.close_within(CLOSE_TIMEOUT) {
            // No caller is left to return this to: say it rather than lose it silently.
            eprintln!("jets: closing trace {} at exit failed: {e}", trace.shared.target);
        }
    }
}

/// The list's guard held across a `fork`.
static HELD: HeldAcrossFork<MutexGuard<'static, Vec<Open>>> = HeldAcrossFork::new();

/// Before a `fork`: takes the list's lock (see [`crate::fork`]).
pub(crate) fn hold_for_fork() {
    HELD.hold(traces());
}

/// After a `fork`, in the parent and in the child: releases what [`hold_for_fork`] took.
pub(crate) fn release_after_fork() {
    HELD.release();
}
