//! The process-wide signal handlers of open traces: a signal that ends the process closes the
//! traces it would otherwise cut short, then ends the process as it would have.
//!
//! * A **fatal** signal (SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT) closes every trace with a
//!   flight recorder, its window written first (CAP-REC-2): the recorder is the account of what
//!   led to the crash. Other traces are left as the crash leaves them (a valid prefix; the C
//!   API's `jets_install_fatal_signal_flush` flushes them).
//! * An **ending** signal (SIGINT, SIGTERM, SIGHUP, SIGXCPU: Ctrl-C, `kill`, `timeout`, a batch
//!   system's time limit, a closed terminal) closes every trace that closes at exit
//!   ([`crate::TraceBuilder::close_at_exit`], WR-SIG-1): every line, the recorder's window and
//!   the footer, as `Trace::close` writes them. Its handler is installed only where the process
//!   left the signal's default action, which ends the process anyway: a simulator that handles
//!   its own Ctrl-C keeps doing so (and when it then exits, the exit handler closes the traces),
//!   also when it sets its handler up after the trace is opened (one that calls the handler it
//!   found, as signal-hook does under tokio, finds ours doing nothing).
//! * A **dump** signal (SIGUSR1 or SIGUSR2, chosen with `trigger=SIGUSR1` in the capture
//!   setting, CAP-REC-4) asks the writer of each flight recorder that names it to write what the
//!   recorder holds, and returns: the run goes on. Opening such a trace fails when the process
//!   handles that signal itself. Once no open trace names the signal, it does what its default
//!   action does (it ends the process), as before any trace claimed it: the handler stays
//!   installed, and finding no trace to dump, restores the default action and re-raises.
//!
//! The handler does only async-signal-safe work: it sets a flag (or bumps a counter) on each
//! registered trace of this process and wakes its writer thread, which writes what the trace
//! holds, the footer, and closes the file. For a signal that ends the process, the handler waits
//! for that (at most [`WAIT`]), then restores the default action and re-raises the signal, so
//! the process still dies of it (a shell, a core dump or a parent's `wait` sees the real cause).
//! The writer threads block the ending and dump signals, so a signal sent to the process is
//! taken by a thread of the simulator's, never by the thread the handler waits for.

use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::Shared;
use crate::capture::{Capture, DumpSignal, Trigger};

const FATAL: [libc::c_int; 5] =
    [libc::SIGSEGV, libc::SIGBUS, libc::SIGILL, libc::SIGFPE, libc::SIGABRT];
const ENDING: [libc::c_int; 4] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGXCPU];

/// A registered trace's tag bits (in its slot's pointer, whose low bits an `Arc<Shared>`'s
/// alignment leaves clear): which kinds of signal close it, and whether a signal dumps it.
const ON_FATAL: usize = 1;
const ON_ENDING: usize = 2;
const ON_DUMP: usize = 4;
const TAGS: usize = ON_FATAL | ON_ENDING | ON_DUMP;

/// Traces the handlers know at once.
const SLOTS: usize = 64;
/// The longest a dying process waits for its traces to be written.
const WAIT: Duration = Duration::from_secs(3);

static TRACES: [AtomicPtr<Shared>; SLOTS] = [const { AtomicPtr::new(ptr::null_mut()) }; SLOTS];
/// Handlers running that may read a pointer taken from `TRACES`. A handler counts itself before
/// it reads a slot; `unregister` takes a pointer out of its slot, then waits for the count to be
/// zero before it gives up the reference: a handler that read the pointer just before never
/// finds the trace freed under it (a Ctrl-C while another thread closes the trace, a SIGUSR1
/// while it is dropped). All four operations are `SeqCst`, so that of "the handler counted
/// itself, then read the slot" and "the slot was emptied, then the count read", at least one
/// sees the other.
static ACTIVE: AtomicUsize = AtomicUsize::new(0);
/// Whether each kind's handlers are installed. Not `Once`s: a `Once` is a lock, which a child
/// forked while another thread installs would inherit held, and hang on when it opens a trace.
static FATAL_INSTALLED: AtomicBool = AtomicBool::new(false);
static ENDING_INSTALLED: AtomicBool = AtomicBool::new(false);

fn dump_signal(which: DumpSignal) -> libc::c_int {
    match which {
        DumpSignal::Usr1 => libc::SIGUSR1,
        DumpSignal::Usr2 => libc::SIGUSR2,
    }
}

/// The dump signals `capture` names.
fn dump_signals(capture: &Capture) -> impl Iterator<Item = DumpSignal> + '_ {
    capture.triggers.iter().filter_map(|t| match t {
        Trigger::Signal(which) => Some(*which),
        _ => None,
    })
}

/// Installs the handler of each dump signal `capture` names (CAP-REC-4), before the trace is
/// opened; refuses a signal the process handles itself (its handler would be replaced, or the
/// dump never asked), naming the clause.
pub(crate) fn claim_dump_signals(capture: &Capture) -> Result<(), String> {
    for which in dump_signals(capture) {
        let sig = dump_signal(which);
        if cfg!(miri) {
            return Err(format!(
                "JETS_CAPTURE clause `trigger={}`: not under Miri",
                Trigger::Signal(which)
            ));
        }
        if installed(sig) {
            continue;
        }
        if !at_default(sig) {
            return Err(format!(
                "JETS_CAPTURE clause `trigger={}`: the process handles this signal itself (call \
                 `Trace::dump` from its handler's thread instead, or choose the other signal)",
                Trigger::Signal(which)
            ));
        }
        // SA_RESTART: the run goes on after a dump, and a system call the signal interrupted
        // is restarted.
        set_handler(sig, libc::SA_RESTART);
    }
    Ok(())
}

/// A slot of [`TRACES`] taken for a trace being opened, before its file is written: an open
/// refused for want of a slot fails before it replaces a file. The slot holds [`RESERVED`],
/// which carries no tag, so handlers and `unregister` pass over it. [`register`] fills it; an
/// open that fails before then gives it back when this is dropped. `tags` are the kinds of
/// signal the trace answers ([`ON_FATAL`], [`ON_ENDING`], [`ON_DUMP`]), slot or not.
pub(crate) struct Reserved {
    slot: Option<&'static AtomicPtr<Shared>>,
    tags: usize,
}

/// What a reserved slot holds: not null, no tag bits, and the address of no `Shared`.
const RESERVED: *mut Shared = ptr::dangling_mut();

impl Drop for Reserved {
    fn drop(&mut self) {
        if let Some(slot) = self.slot.take() {
            slot.store(ptr::null_mut(), Ordering::SeqCst);
        }
    }
}

/// Reserves a slot for a trace that the kinds of signal `fatal`, `ending` close, or that
/// `capture`'s `trigger=SIGUSR1` dumps (claimed by [`claim_dump_signals`]). With [`SLOTS`]
/// traces registered already, the trace is not closed by a signal (it still is at exit and by
/// `close`, and a recorder is still dumped on panic); if it names a dump signal, which would then
/// end the process instead of dumping it, the error names the clause, for the open to fail.
pub(crate) fn reserve(capture: &Capture, fatal: bool, ending: bool) -> Result<Reserved, String> {
    // Miri cannot install signal handlers; under it (unit tests of the writer and keeper) a
    // trace is closed by `close`, at exit, and dumped on panic only.
    let dump = dump_signals(capture).next();
    let tags = if fatal { ON_FATAL } else { 0 }
        | if ending { ON_ENDING } else { 0 }
        | if dump.is_some() { ON_DUMP } else { 0 };
    if cfg!(miri) || tags == 0 {
        return Ok(Reserved { slot: None, tags: 0 });
    }
    let free = TRACES.iter().find(|slot| {
        slot.compare_exchange(ptr::null_mut(), RESERVED, Ordering::SeqCst, Ordering::Relaxed)
            .is_ok()
    });
    match (free, dump) {
        (None, Some(which)) => Err(format!(
            "JETS_CAPTURE clause `trigger={}`: {SLOTS} traces are open already with signal \
             handlers; a signal could not dump this one",
            Trigger::Signal(which)
        )),
        (slot, _) => Ok(Reserved { slot, tags }),
    }
}

/// Makes the trace known to the handlers, in the slot `reserved` holds (if any), and installs
/// the closing handlers of the kinds of signal that close it if they are not yet.
pub(crate) fn register(mut reserved: Reserved, shared: &Arc<Shared>) {
    let tags = reserved.tags;
    if tags & ON_FATAL != 0 && !FATAL_INSTALLED.swap(true, Ordering::AcqRel) {
        FATAL.into_iter().for_each(|sig| install(sig, false));
    }
    if tags & ON_ENDING != 0 {
        install_ending();
    }
    let Some(slot) = reserved.slot.take() else { return };
    let raw = Arc::into_raw(Arc::clone(shared)).cast_mut();
    debug_assert_eq!(raw.addr() & TAGS, 0, "an Arc<Shared> is aligned past its tags");
    slot.store(raw.map_addr(|a| a | tags), Ordering::SeqCst);
}

/// Installs the ending signals' handlers, once per process, where the action is the default.
pub(crate) fn install_ending() {
    if !cfg!(miri) && !ENDING_INSTALLED.swap(true, Ordering::AcqRel) {
        ENDING.into_iter().for_each(|sig| install(sig, true));
    }
}

/// Forgets a trace (at close).
pub(crate) fn unregister(shared: &Arc<Shared>) {
    let me = Arc::as_ptr(shared).cast_mut();
    for slot in &TRACES {
        let p = slot.load(Ordering::Acquire);
        if p.is_null() || p.map_addr(|a| a & !TAGS) != me {
            continue;
        }
        if slot.compare_exchange(p, ptr::null_mut(), Ordering::SeqCst, Ordering::Relaxed).is_ok() {
            // A handler that read the pointer before it left the slot is done with it first
            // (see `ACTIVE`). This thread is not one of them: a handler runs to its end before
            // the thread it interrupted goes on. A dying handler waits at most `WAIT`, and this
            // trace's writer has finished, so it does not wait for this one.
            while ACTIVE.load(Ordering::SeqCst) != 0 {
                std::thread::yield_now();
            }
            // SAFETY: the slot held the pointer from `register`'s Arc::into_raw (tagged); it is
            // taken out of the slot exactly once, here, and no handler holds it any more.
            drop(unsafe { Arc::from_raw(me) });
        }
    }
}

/// Installs the handler for `sig`; an ending signal only where its action is the default.
fn install(sig: libc::c_int, only_over_default: bool) {
    if only_over_default && !at_default(sig) {
        return;
    }
    set_handler(sig, 0);
}

/// Makes [`handler`] `sig`'s action, on the alternate signal stack where there is one (a stack
/// overflow's SIGSEGV), with `flags` besides.
fn set_handler(sig: libc::c_int, flags: libc::c_int) {
    // SAFETY: a plain sigaction call with a zeroed, then filled, struct.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = handler as extern "C" fn(libc::c_int) as usize;
        libc::sigemptyset(&mut action.sa_mask);
        action.sa_flags = libc::SA_ONSTACK | flags;
        libc::sigaction(sig, &action, ptr::null_mut());
    }
}

extern "C" fn handler(sig: libc::c_int) {
    // SAFETY: getpid is async-signal-safe.
    let pid = unsafe { libc::getpid() } as u32;
    if sig == libc::SIGUSR1 || sig == libc::SIGUSR2 {
        return ask_dumps(sig, pid);
    }
    let kind = if FATAL.contains(&sig) { ON_FATAL } else { ON_ENDING };
    if kind == ON_ENDING && !installed(sig) {
        // A handler installed over ours calls it (signal-hook, under tokio's `ctrl_c`, chains
        // to the handler it found): the program handles this signal now, and the default action
        // ours stands for would not have ended the process from there. Do nothing.
        return;
    }
    ACTIVE.fetch_add(1, Ordering::SeqCst);
    let mut waiting = [ptr::null::<Shared>(); SLOTS];
    for (i, slot) in TRACES.iter().enumerate() {
        let p = slot.load(Ordering::SeqCst);
        if p.addr() & kind == 0 {
            continue;
        }
        let p = p.map_addr(|a| a & !TAGS).cast_const();
        // SAFETY: a registered pointer stays valid until `unregister`, which a trace calls only
        // after its writer has finished.
        let shared = unsafe { &*p };
        // In a forked child, the parent's traces have no writer thread: leave them.
        if shared.pid == pid {
            shared.request_fatal_close();
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
    // Nothing below reads a trace.
    ACTIVE.fetch_sub(1, Ordering::SeqCst);
    // SAFETY: back to the default action, then re-raise: the signal is blocked while this
    // handler runs, so it is delivered, and ends the process, when the handler returns (a real
    // fault would also recur on return). The default, not a previous handler: a handler that
    // returns (Rust's own stack-overflow one does) would let a raised signal be survived; an
    // ending signal's handler is only installed over the default.
    unsafe {
        libc::signal(sig, libc::SIG_DFL);
        libc::raise(sig);
    }
}

/// Whether `sig`'s action is the default one.
fn at_default(sig: libc::c_int) -> bool {
    // SAFETY: reads the signal's action into a zeroed struct.
    unsafe {
        let mut current: libc::sigaction = std::mem::zeroed();
        libc::sigaction(sig, ptr::null(), &mut current) == 0
            && current.sa_sigaction == libc::SIG_DFL
    }
}

/// Whether `sig`'s action is this module's handler. Async-signal-safe (`sigaction` is).
fn installed(sig: libc::c_int) -> bool {
    // SAFETY: reads the signal's action into a zeroed struct.
    unsafe {
        let mut current: libc::sigaction = std::mem::zeroed();
        libc::sigaction(sig, ptr::null(), &mut current) == 0
            && current.sa_sigaction == handler as extern "C" fn(libc::c_int) as usize
    }
}

/// A dump signal: asks each flight recorder of this process that names `sig` to be written, and
/// returns at once (CAP-REC-4). With none left (each trace that named it has closed, or this is
/// a forked child of the process that opened them), the signal does what it did before any trace
/// claimed it: its default action, which ends the process.
fn ask_dumps(sig: libc::c_int, pid: u32) {
    ACTIVE.fetch_add(1, Ordering::SeqCst);
    let mut asked = false;
    for slot in &TRACES {
        let p = slot.load(Ordering::SeqCst);
        if p.addr() & ON_DUMP == 0 {
            continue;
        }
        // SAFETY: as in `handler`.
        let shared = unsafe { &*p.map_addr(|a| a & !TAGS) };
        if shared.pid == pid && dump_signals(&shared.capture).any(|w| dump_signal(w) == sig) {
            shared.request_signal_dump();
            asked = true;
        }
    }
    ACTIVE.fetch_sub(1, Ordering::SeqCst);
    if !asked {
        // SAFETY: as at the end of `handler`: the signal is blocked while this runs, so the
        // raised one is delivered, with the default action, when the handler returns.
        unsafe {
            libc::signal(sig, libc::SIG_DFL);
            libc::raise(sig);
        }
    }
}

/// Runs `spawn` (which starts the writer thread) with the ending and dump signals blocked, so
/// that the thread it starts, and the encoder threads that one starts, inherit the mask: a signal
/// sent to the process is then taken by another thread, and the writer is free to close the
/// trace that the handler waits for. The caller's mask is restored.
pub(crate) fn shielded<T>(spawn: impl FnOnce() -> T) -> T {
    if cfg!(miri) {
        return spawn();
    }
    // SAFETY: `sigemptyset`/`sigaddset` initialize and fill the set; `pthread_sigmask` reads
    // `blocked` and writes `old`, both valid, and only changes this thread's mask, restored below.
    unsafe {
        let mut blocked: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut blocked);
        for sig in ENDING.into_iter().chain([libc::SIGUSR1, libc::SIGUSR2]) {
            libc::sigaddset(&mut blocked, sig);
        }
        libc::pthread_sigmask(libc::SIG_BLOCK, &blocked, &mut old);
        let result = spawn();
        libc::pthread_sigmask(libc::SIG_SETMASK, &old, ptr::null_mut());
        result
    }
}
