//! Writing traces: the [`Trace`] handle, record handles, and the writer thread behind them.
//!
//! # Design
//!
//! Every emitting call builds a small message on the caller's stack and pushes it into the calling
//! thread's own single-producer ring (module `ring`); a background thread pops the rings, formats lines
//! with [`crate::format::json`] and writes large batches. The caller never formats, allocates (for
//! static names and up to [`crate::format::Data::INLINE`] typed fields), locks or makes a syscall,
//! unless its ring is full under [`Policy::Block`] (it then encodes the writer's batches while it
//! waits, module `encoders`).
//!
//! Ordering holds by construction: a [`RecordHandle`] is handed out only after its `record` line
//! is in a ring, and everything that refers to a record (children, events, annotations, its
//! `record_end`) needs the handle. A line pushed through a handle from another thread carries the
//! position of the handle's record line, and the writer holds it back until that line is written.
//! `end` consumes the handle, so a record ends at most once, and [`Trace::close`] writes the footer
//! after draining every ring.

#[cfg(target_os = "linux")]
mod direct;
mod encoders;
mod fence;
pub(crate) mod hooks;
mod kids;
pub(crate) mod lease;
pub(crate) mod line;
mod nap;
mod record;
mod ring;
#[cfg(unix)]
pub(crate) mod signals;
mod sink;
mod spsc;
mod streamed;
#[cfg(test)]
pub(crate) mod tests;
mod writer;

use std::cell::Cell;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock, Weak};
use std::thread::LocalKey;
use std::thread::{self, JoinHandle, Thread};
use std::time::Duration;

use serde_json::{Map, Value as Json};

use crate::capture::gate::Gate;
use crate::capture::{Capture, LeftOut};
use crate::clock::SimClock;
use crate::error::Error;
use crate::format::Header;
pub use record::{AnnotationBuilder, EventBuilder, FieldArray, RecordBuilder, RecordHandle};
pub use ring::signal_safe;
use ring::{LocalRing, Slot};
use sink::Sink;
pub use streamed::StreamedFile;

/// What an emitting call does when its thread's ring to the writer thread is full.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Policy {
    /// Wait for room: lossless (the default). While it waits, the call encodes batches of lines
    /// the writer thread has put in order and not yet encoded, so a simulator that outruns the
    /// writer lends it its core instead of idling (signals are held meanwhile, a batch at a
    /// time); inside [`signal_safe`] it only waits.
    #[default]
    Block,
    /// Drop the line and count it. A dropped record takes its whole subtree, events, annotations
    /// and end with it, so a drop never breaks an ordering rule; the footer carries exact
    /// `dropped_records`, `dropped_events`, `dropped_annotations` and `dropped_record_ends` counts.
    Drop,
}

/// The header's `metadata` object, with setters for the fields the spec names.
///
/// ```
/// let m = jets::Metadata::new()
///     .hardware_model("Custom Processor v2")
///     .clock_frequency_mhz(2520.0)
///     .insert("num_cores", 4);
/// assert_eq!(m.as_map()["num_cores"], 4);
/// ```
#[derive(Clone, Debug, Default)]
pub struct Metadata(Map<String, Json>);

impl Metadata {
    /// Metadata naming this SDK as the `tool`.
    pub fn new() -> Self {
        Metadata(Map::new()).tool(concat!("jets-sdk ", env!("CARGO_PKG_VERSION")))
    }
    /// Sets `hardware_model`.
    pub fn hardware_model(self, v: impl Into<String>) -> Self {
        self.insert("hardware_model", v.into())
    }
    /// Sets `architecture`.
    pub fn architecture(self, v: impl Into<String>) -> Self {
        self.insert("architecture", v.into())
    }
    /// Sets `clock_frequency_mhz`, which converts cycles to seconds.
    pub fn clock_frequency_mhz(self, mhz: f64) -> Self {
        self.insert("clock_frequency_mhz", mhz)
    }
    /// Sets `tool`.
    pub fn tool(self, v: impl Into<String>) -> Self {
        self.insert("tool", v.into())
    }
    /// Sets `timestamp` (ISO 8601 text).
    pub fn timestamp(self, v: impl Into<String>) -> Self {
        self.insert("timestamp", v.into())
    }
    /// Sets any field.
    pub fn insert(mut self, key: impl Into<String>, v: impl Into<Json>) -> Self {
        self.0.insert(key.into(), v.into());
        self
    }
    /// The fields.
    pub fn as_map(&self) -> &Map<String, Json> {
        &self.0
    }
}

impl From<Map<String, Json>> for Metadata {
    fn from(m: Map<String, Json>) -> Self {
        Metadata(m)
    }
}

/// What was written, returned by [`Trace::close`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    /// `record` lines written.
    pub records: u64,
    /// `record_end` lines written.
    pub record_ends: u64,
    /// `event` lines written.
    pub events: u64,
    /// `annotation` lines written.
    pub annotations: u64,
    /// Records begun but not ended at close.
    pub open_records: u64,
    /// The largest `clk` written (or given to [`Trace::close_at`]).
    pub capture_end_clk: Option<u64>,
    /// Lines dropped by [`Policy::Drop`]: records (with their subtrees), events, annotations, ends.
    pub dropped: Dropped,
    /// Bytes handed to the sink (before compression).
    pub bytes: u64,
    /// Lines left out by capture control (filters, window, sampling, recorder, capture off).
    pub left_out: LeftOut,
    /// With the `count` clause ([`Capture::count`]): the lines the setting selected, counted
    /// instead of written, per kind (the fields above then count none).
    pub counted: LeftOut,
    /// How many times the flight recorder was written.
    pub dumps: u64,
    /// With `limit=` ([`Capture::limit`]): the file reached that size and capture stopped for
    /// good (CAP-LIM-1).
    pub limit_reached: bool,
    /// How many times an emitting call found its thread's ring full and waited for the writer
    /// ([`Policy::Block`]; meanwhile it encodes lines for the writer when it can).
    ///
    /// With [`Summary::waited_for_room`], this says who set the simulator's pace: when the
    /// waits are a large part of the run, it was the writer (its encoding, the disk, or the
    /// flight recorder's window), not the emitting calls. A larger ring
    /// ([`TraceBuilder::capacity`]) absorbs bursts, not a writer that is slower on average.
    pub waits_for_room: u64,
    /// How long the waits counted in [`Summary::waits_for_room`] took in all.
    pub waited_for_room: Duration,
}

/// Exact counts of lines dropped under [`Policy::Drop`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Dropped {
    /// `record` lines (including children of dropped records).
    pub records: u64,
    /// `event` lines.
    pub events: u64,
    /// `annotation` lines.
    pub annotations: u64,
    /// `record_end` lines.
    pub record_ends: u64,
}

/// The writer hands the OS its encoded lines in batches of this many bytes (or fewer, when the
/// rings run dry or the flush interval passes): one `write` call each. `jets bench` writes its
/// reference for the full trace's cost in calls of this size.
pub const WRITE_BATCH_BYTES: usize = 256 * 1024;

/// State shared by producers and the writer thread.
pub(crate) struct Shared {
    /// Unique per trace in this process: keys the thread-local rings.
    id: u64,
    policy: Policy,
    /// Size of each thread's ring, in 8-byte words.
    ring_words: usize,
    clock: SimClock,
    next_id: AtomicU64,
    closed: AtomicBool,
    failed: AtomicBool,
    error: Mutex<Option<Error>>,
    dropped: [AtomicU64; 4],
    /// Emitting calls that waited for room, and the nanoseconds they waited in all
    /// ([`Summary::waits_for_room`]).
    waits: [AtomicU64; 2],
    /// Producers napping until their ring has room now (`ring::wait_for_room`): each naps
    /// longer the more there are, so that many threads waiting at once leave the cores to the
    /// writer they wait for.
    napping: AtomicUsize,
    writer: OnceLock<Thread>,
    target: String,
    /// Every ring of this trace (see [`Registry`]).
    rings: Mutex<Registry>,
    /// Set when `rings` has new consumers for the writer.
    rings_pending: AtomicBool,
    /// Flush and close requests for the writer.
    control: Mutex<Control>,
    control_pending: AtomicBool,
    /// The ring used when a thread's own cannot be (thread-local storage torn down).
    fallback: Mutex<Option<LocalRing>>,
    /// Flushes asked by [`Trace::flush_signal_safe`] and served by the writer: counters rather
    /// than an `Ack`, so that asking allocates nothing and takes no lock.
    signal_flushes: [AtomicU64; 2],
    /// Flight-recorder dumps asked by a signal (`trigger=SIGUSR1`, CAP-REC-4) and served by the
    /// writer: a counter, for the same reason.
    signal_dumps: AtomicU64,
    /// Capture control: what the emitting calls let through.
    pub(crate) gate: Gate,
    pub(crate) capture: Capture,
    /// A fatal signal asked the writer to dump, write the footer and stop.
    fatal: AtomicBool,
    /// The writer is done: it closed the file, or it is gone (it panicked).
    finished: AtomicBool,
    /// The process that opened the trace: a forked child's exit and signal handlers leave its
    /// parent's traces alone (their writer threads do not exist there).
    pid: u32,
    /// What an emitting thread waiting for room in its ring does for the writer meanwhile (set
    /// by the writer thread when it starts, if anything).
    helper: OnceLock<Helper>,
}

/// Work of the writer's that an emitting thread waiting for room can do meanwhile: its core is
/// idle, and on a machine whose cores are all busy (a simulator on one, the writer on the
/// other) its wait is the writer's missing core.
pub(crate) enum Helper {
    /// Encode batches of lines the writer sequenced (see `encoders`).
    Encode(Arc<encoders::Queue>),
    /// Make the flight recorder's next chunks of memory while its window grows (see
    /// `capture::stock`).
    Stock(Arc<crate::capture::stock::Stock>),
}

impl Helper {
    /// Does one piece of the work; false when there was none to do.
    pub(crate) fn help(&self) -> bool {
        match self {
            Helper::Encode(queue) => queue.help(),
            Helper::Stock(stock) => stock.help(),
        }
    }
}

/// Requests from `flush` and `close`, taken by the writer thread.
#[derive(Default)]
pub(crate) struct Control {
    flushes: Vec<Arc<Ack>>,
    /// Flight-recorder dumps requested by `Trace::dump`.
    dumps: Vec<Arc<Ack>>,
    /// `Some(end_clk)` once close was requested.
    close: Option<Option<u64>>,
    /// Set by the writer thread as it exits (closed or died): no request is queued after it, so
    /// none waits for an answer that never comes.
    gone: bool,
}

/// The rings of a trace, as the writer and `close` see them.
#[derive(Default)]
pub(crate) struct Registry {
    /// Consumers of rings created since the writer last looked, with their ids.
    new: Vec<(u32, spsc::Consumer)>,
    /// The producer side of every ring. Weak: a thread that exits frees its ring.
    slots: Vec<Weak<Slot>>,
    next: u32,
    /// Set at close once the rings are retired: no ring can be created any more.
    retired: bool,
}

impl Registry {
    /// Registers a new ring; returns its id.
    fn add(&mut self, consumer: spsc::Consumer, slot: &Arc<Slot>) -> u32 {
        let id = self.next;
        self.next += 1;
        self.new.push((id, consumer));
        self.slots.retain(|s| s.strong_count() > 0);
        self.slots.push(Arc::downgrade(slot));
        id
    }
}

const DROP_RECORD: usize = 0;
const DROP_EVENT: usize = 1;
const DROP_ANNOTATION: usize = 2;
const DROP_END: usize = 3;

static NEXT_TRACE_ID: AtomicU64 = AtomicU64::new(1);

/// The line size [`TraceBuilder::capacity`] counts in, in words.
const WORDS_PER_LINE: usize = 16;

impl Shared {
    fn request<T>(&self, f: impl FnOnce(&mut Control) -> T) -> T {
        let answer = f(&mut self.control.lock().unwrap_or_else(|p| p.into_inner()));
        self.control_pending.store(true, Ordering::Release);
        self.wake_writer();
        answer
    }

    /// Stops the producers: once this returns true, every push that returned `Ok` has its line
    /// in a ring, and every later push sees `closed` and writes nothing. `meanwhile` runs while a
    /// push is still in progress (the writer drains there, so a push waiting for room can
    /// finish). With `patience`, gives up after that long and returns false (a fatal signal: the
    /// thread that took it may never finish its push).
    fn quiesce(&self, mut meanwhile: impl FnMut(), patience: Option<Duration>) -> bool {
        self.closed.store(true, Ordering::SeqCst);
        fence::heavy();
        let slots: Vec<Arc<Slot>> = {
            let registry = self.rings.lock().unwrap_or_else(|p| p.into_inner());
            registry.slots.iter().filter_map(Weak::upgrade).collect()
        };
        let deadline = patience.map(|p| std::time::Instant::now() + p);
        for slot in &slots {
            while slot.is_busy() {
                if deadline.is_some_and(|d| std::time::Instant::now() >= d) {
                    return false;
                }
                meanwhile();
            }
        }
        true
    }

    /// Frees every ring's producer end and refuses new rings. Call only after
    /// [`Shared::quiesce`] returned true.
    fn retire(&self) {
        let mut registry = self.rings.lock().unwrap_or_else(|p| p.into_inner());
        if registry.retired {
            return;
        }
        registry.retired = true;
        registry.new.clear();
        for slot in registry.slots.drain(..).filter_map(|s| s.upgrade()) {
            // SAFETY: every caller has seen `quiesce` return true first (the writer's close and
            // its exit guard).
            unsafe { slot.retire() };
        }
    }

    fn is_retired(&self) -> bool {
        self.rings.lock().unwrap_or_else(|p| p.into_inner()).retired
    }

    /// The writer thread is exiting: answer every waiting flush, refuse later ones.
    fn writer_gone(&self) {
        let flushes = {
            let mut control = self.control.lock().unwrap_or_else(|p| p.into_inner());
            control.gone = true;
            std::mem::take(&mut control.flushes)
        };
        for ack in flushes {
            ack.set();
        }
    }

    fn count_drop(&self, kind: usize) {
        self.dropped[kind].fetch_add(1, Ordering::Relaxed);
    }

    /// Counts an emitting call's wait for room in its ring.
    fn count_wait(&self, waited: Duration) {
        self.waits[0].fetch_add(1, Ordering::Relaxed);
        let nanos = u64::try_from(waited.as_nanos()).unwrap_or(u64::MAX);
        self.waits[1].fetch_add(nanos, Ordering::Relaxed);
    }

    /// The waits counted by [`Shared::count_wait`]: how many, and how long in all.
    fn waits(&self) -> (u64, Duration) {
        let nanos = self.waits[1].load(Ordering::Relaxed);
        (self.waits[0].load(Ordering::Relaxed), Duration::from_nanos(nanos))
    }

    fn dropped(&self) -> Dropped {
        let get = |i: usize| self.dropped[i].load(Ordering::Relaxed);
        Dropped {
            records: get(DROP_RECORD),
            events: get(DROP_EVENT),
            annotations: get(DROP_ANNOTATION),
            record_ends: get(DROP_END),
        }
    }

    /// Asks the writer to dump the flight recorder. From a signal handler: only atomics and an
    /// unpark (a futex wake); does not wait.
    #[cfg_attr(not(unix), allow(dead_code))]
    pub(crate) fn request_signal_dump(&self) {
        self.signal_dumps.fetch_add(1, Ordering::AcqRel);
        self.control_pending.store(true, Ordering::Release);
        self.wake_writer();
    }

    /// Asks the writer to write what it holds, the footer, and stop. From a signal handler:
    /// only atomics and an unpark (a futex wake).
    pub(crate) fn request_fatal_close(&self) {
        self.fatal.store(true, Ordering::SeqCst);
        self.wake_writer();
    }

    pub(crate) fn finished(&self) -> bool {
        self.finished.load(Ordering::SeqCst)
    }

    fn wake_writer(&self) {
        if let Some(t) = self.writer.get() {
            t.unpark();
        }
    }

    fn fail(&self, e: Error) {
        let mut slot = self.error.lock().unwrap_or_else(|p| p.into_inner());
        if slot.is_none() {
            *slot = Some(e);
        }
        self.failed.store(true, Ordering::Release);
    }

    // Inline: callers that check before every line (libjets) pay one load while healthy.
    #[inline]
    fn error(&self) -> Option<Error> {
        if !self.failed.load(Ordering::Acquire) {
            return None;
        }
        self.first_error()
    }

    #[cold]
    fn first_error(&self) -> Option<Error> {
        self.error.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

/// Ties the writer thread's lifetime to the last `Trace` clone or record handle.
///
/// Aligned to two cache lines, so that the `Arc`'s counts, before it, have a pair of lines of
/// their own, shared with nothing else of the heap: every record made anywhere reads `shared`
/// here, and a count change took that line from the other cores. Criterion, 2026-11-28, a record
/// begun and ended under the thread's own record, two threads (alternated builds): 51.6 → 32.8 ns
/// per thread when a thread there still took its lease's count for each record; with leases
/// parking their count (`lease`), 37.1 and 39.2 → 34.8 and 35.2 ns. On one thread no difference
/// (26.3–28.4 ns either way).
#[repr(align(128))]
pub(crate) struct Inner {
    shared: Arc<Shared>,
    /// `Trace` values alive (clones of the one [`TraceBuilder`] made): the last one dropped
    /// takes back the counts the threads' leases keep parked ([`lease::revoke`]).
    pub(crate) traces: AtomicUsize,
    join: Mutex<Option<JoinHandle<Summary>>>,
    result: Mutex<Option<Result<Summary, Error>>>,
}

impl Inner {
    fn close(&self, end_clk: Option<u64>) -> Result<Summary, Error> {
        let mut join = self.join.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(handle) = join.take() {
            self.ask_to_close(end_clk);
            self.collect(handle);
        }
        drop(join);
        self.result()
    }

    /// [`Inner::close`] at process exit ([`hooks`]): `None` when another thread is closing the
    /// trace, or it is closed; otherwise the result, or a time-out error when the writer was not
    /// done within `timeout` (the trace is then left as it is).
    #[cfg_attr(not(all(unix, not(miri))), allow(dead_code))]
    fn close_within(&self, timeout: Duration) -> Option<Result<Summary, Error>> {
        let mut join = self.join.try_lock().ok()?;
        let handle = join.take()?;
        self.ask_to_close(None);
        let deadline = std::time::Instant::now() + timeout;
        while !handle.is_finished() {
            if std::time::Instant::now() >= deadline {
                let e = std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    format!("the writer was not done after {} s", timeout.as_secs()),
                );
                return Some(Err(Error::io(&self.shared.target, e)));
            }
            nap::nap(Duration::from_millis(1));
        }
        self.collect(handle);
        Some(self.result())
    }

    /// Refuses new lines and asks the writer to drain every ring, write the footer and stop.
    fn ask_to_close(&self, end_clk: Option<u64>) {
        self.shared.closed.store(true, Ordering::SeqCst);
        self.shared.request(|c| c.close = Some(end_clk));
    }

    /// Waits for the writer thread to stop and keeps its result for every later close.
    fn collect(&self, handle: JoinHandle<Summary>) {
        let result = match handle.join() {
            Ok(summary) => match self.shared.error() {
                Some(e) => Err(e),
                None => Ok(summary),
            },
            Err(_) => Err(Error::io(
                &self.shared.target,
                std::io::Error::other("the JETS writer thread panicked"),
            )),
        };
        *self.result.lock().unwrap_or_else(|p| p.into_inner()) = Some(result);
        #[cfg(unix)]
        signals::unregister(&self.shared);
    }

    fn result(&self) -> Result<Summary, Error> {
        self.result.lock().unwrap_or_else(|p| p.into_inner()).clone().unwrap_or(Err(Error::Closed))
    }

    fn flush(&self, timeout: Option<Duration>) -> Result<(), Error> {
        self.ask(timeout, |c, ack| c.flushes.push(ack))
    }

    fn dump(&self, timeout: Option<Duration>) -> Result<(), Error> {
        self.ask(timeout, |c, ack| c.dumps.push(ack))
    }

    /// Queues a request for the writer and waits for its answer (or `timeout`).
    fn ask(
        &self,
        timeout: Option<Duration>,
        f: impl FnOnce(&mut Control, Arc<Ack>),
    ) -> Result<(), Error> {
        if self.shared.closed.load(Ordering::Acquire) {
            return Err(Error::Closed);
        }
        let ack = Arc::new(Ack::default());
        // Queued only while the writer runs; the writer answers every queued request, at the
        // latest as it exits (after the footer when it closes), so this wait always ends.
        let queued = self.shared.request(|c| {
            if !c.gone {
                f(c, Arc::clone(&ack));
            }
            !c.gone
        });
        if !queued {
            return Err(Error::Closed);
        }
        if !ack.wait(timeout) {
            let e = std::io::Error::new(std::io::ErrorKind::TimedOut, "timed out");
            return Err(Error::io(&self.shared.target, e));
        }
        match self.shared.error() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        let pending = self.join.lock().map(|j| j.is_some()).unwrap_or(false);
        if pending {
            if let Err(e) = self.close(None) {
                // No caller is left to return this to: say it rather than lose it silently.
                eprintln!("jets: closing trace {} on drop failed: {e}", self.shared.target);
            }
        }
    }
}

/// Completion signal for [`Trace::flush`].
#[derive(Default)]
pub(crate) struct Ack {
    done: Mutex<bool>,
    cv: Condvar,
}

impl Ack {
    fn set(&self) {
        *self.done.lock().unwrap_or_else(|p| p.into_inner()) = true;
        self.cv.notify_all();
    }

    /// Waits for the answer; false when `timeout` passed first.
    fn wait(&self, timeout: Option<Duration>) -> bool {
        let deadline = timeout.map(|t| std::time::Instant::now() + t);
        let mut done = self.done.lock().unwrap_or_else(|p| p.into_inner());
        while !*done {
            match deadline {
                None => done = self.cv.wait(done).unwrap_or_else(|p| p.into_inner()),
                Some(d) => {
                    let now = std::time::Instant::now();
                    if now >= d {
                        return false;
                    }
                    done = self.cv.wait_timeout(done, d - now).unwrap_or_else(|p| p.into_inner()).0;
                }
            }
        }
        true
    }
}

/// Options for opening a trace.
///
/// ```
/// use jets::{Policy, SimClock, TraceBuilder, Metadata};
/// let clock = SimClock::new();
/// let trace = TraceBuilder::new()
///     .policy(Policy::Drop)
///     .capacity(1 << 12)
///     .clock(clock.clone())
///     .writer(std::io::sink(), Metadata::new())
///     .unwrap();
/// clock.advance(3);
/// let r = trace.root("top", "Top").begin().unwrap(); // at the clock's cycle, 3
/// assert_eq!(r.start_clk(), 3);
/// ```
#[derive(Clone, Debug)]
pub struct TraceBuilder {
    policy: Policy,
    ring_capacity: usize,
    flush_interval: Duration,
    clock: Option<SimClock>,
    flush_on_panic: bool,
    close_at_exit: bool,
    capture: Option<Capture>,
    encoders: Option<usize>,
}

impl Default for TraceBuilder {
    fn default() -> Self {
        TraceBuilder {
            policy: Policy::Block,
            ring_capacity: 1 << 14,
            flush_interval: Duration::from_millis(100),
            clock: None,
            flush_on_panic: false,
            close_at_exit: true,
            capture: None,
            encoders: None,
        }
    }
}

impl TraceBuilder {
    /// The most lines [`TraceBuilder::capacity`] takes (2^26): a ring of 8 GiB per emitting
    /// thread. A larger one would be refused by the allocator at a thread's first line, or its
    /// size would overflow into a tiny ring.
    pub const MAX_CAPACITY: usize = 1 << 26;

    /// Default options: [`Policy::Block`], 16,384 queued lines per emitting thread, flush every
    /// 100 ms, a new clock.
    pub fn new() -> Self {
        Self::default()
    }
    /// What to do when an emitting thread's ring is full.
    pub fn policy(mut self, policy: Policy) -> Self {
        self.policy = policy;
        self
    }
    /// How many lines each emitting thread's ring holds (at least 16, at most
    /// [`TraceBuilder::MAX_CAPACITY`]: more is refused when the trace is opened), counted as
    /// lines of 128 bytes (an event with two fields): the ring takes `lines * 128` bytes,
    /// rounded up to a power of two, and a line takes only what it uses (a record with a name
    /// and type and no fields about 100 bytes, 40 more per field). A larger ring absorbs longer
    /// bursts before the policy applies. A smaller one than the default (`1 << 14`, 2 MiB) fills
    /// while the writer naps between batches, and the emitting thread then waits too
    /// ([`Summary::waited_for_room`] says how long): on the project's 2-core VM, 512 KiB made a
    /// traced Tiny5 run nearly twice as long as 1 or 2 MiB.
    pub fn capacity(mut self, lines: usize) -> Self {
        self.ring_capacity = lines.max(16);
        self
    }
    /// The longest time a written line may wait in the writer before reaching the OS.
    pub fn flush_interval(mut self, every: Duration) -> Self {
        self.flush_interval = every;
        self
    }
    /// The clock read by calls that give no `clk`.
    pub fn clock(mut self, clock: SimClock) -> Self {
        self.clock = Some(clock);
        self
    }
    /// Flush this trace when any thread panics, before the panic unwinds. A panicking simulator
    /// then leaves everything it emitted on disk. One process-wide hook (chained with the hook
    /// found when it is installed) serves every such trace; a trace leaves it when dropped. Set
    /// your own panic hook before opening the first such trace: a hook set later replaces it.
    pub fn flush_on_panic(mut self, yes: bool) -> Self {
        self.flush_on_panic = yes;
        self
    }

    /// Close this trace when the process ends if it is still open then, as [`Trace::close`]
    /// does: every line, a flight recorder's window, and the footer, which counts the records
    /// still open. On Unix, and on by default. It covers:
    /// * an exit: `exit()` or a return from `main` (WR-EXIT-1; the handler waits at most 30 s
    ///   for each trace);
    /// * a signal that ends the process: SIGINT (Ctrl-C), SIGTERM (`kill`, `timeout`, a batch
    ///   system's time limit), SIGHUP, SIGXCPU, where the process left its default action. The
    ///   trace is closed (at most 3 s), then the process dies of the signal as it would have
    ///   (WR-SIG-1). A process that handles such a signal itself keeps its handler, also one
    ///   it sets up after the trace is opened (tokio's `ctrl_c`, signal-hook).
    ///
    /// Without it, a trace nobody closed (one kept in a `static`, a C program's error path, a
    /// run stopped with Ctrl-C) keeps only what the writer had written by then, and no footer; a
    /// flight recorder's window is lost. The exit handler leaves alone a trace another thread
    /// is closing; in a forked child, the handlers leave the parent's traces alone.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let path = dir.path().join("run.jets");
    /// use jets::{Metadata, TraceBuilder};
    /// static TRACE: std::sync::OnceLock<jets::Trace> = std::sync::OnceLock::new();
    /// let trace = TRACE.get_or_init(|| TraceBuilder::new().create(&path, Metadata::new()).unwrap());
    /// trace.root("sim", "Simulator").begin_at(0).unwrap();
    /// // Never dropped: closed by the exit handler, its footer saying one record was open.
    /// ```
    pub fn close_at_exit(mut self, yes: bool) -> Self {
        self.close_at_exit = yes;
        self
    }

    /// What to capture (see [`crate::capture`]). Without this call the `JETS_CAPTURE`
    /// environment variable is read at open (a bad value fails the open with
    /// [`Error::InvalidArgument`] naming the clause); a setting given here wins over it. A
    /// `trigger=SIGUSR1` (or `SIGUSR2`), from either, fails the open the same way when the
    /// process handles that signal itself.
    pub fn capture(mut self, capture: Capture) -> Self {
        self.capture = Some(capture);
        self
    }

    /// How many threads encode lines (JSON formatting and compression, the writer's main cost);
    /// the order of the file is decided by the writer thread alone either way. `1`: the writer
    /// thread encodes. `n > 1`: `n` encoder threads besides it (module `encoders`). Either way,
    /// emitting calls that wait for room under [`Policy::Block`] encode batches too. Default:
    /// 1 on machines with up to 2 cores, then half the cores, at
    /// most 4. A trace with capture control holding lines back is encoded by the writer thread.
    pub fn encoders(mut self, n: usize) -> Self {
        self.encoders = Some(n.max(1));
        self
    }

    /// Creates (truncates) the file at `path` and writes the header. `.gz` and `.zst` compress.
    pub fn create(self, path: impl AsRef<Path>, metadata: Metadata) -> Result<Trace, Error> {
        let path = path.as_ref();
        let target = path.display().to_string();
        // Whatever can refuse the open (a bad `JETS_CAPTURE`, a ring too large, a dump signal
        // taken) refuses it before the file is made: a refused open leaves no empty file where
        // there was none (an existing file is replaced only at close, `Sink::create`).
        let opening = self.opening()?;
        let sink = Sink::create(path).map_err(|e| Error::io(&target, e))?;
        opening.open(sink, target, metadata)
    }

    /// Writes to any `Write` (a socket, a pipe, a `Vec` behind a mutex...).
    pub fn writer(
        self,
        w: impl std::io::Write + Send + 'static,
        metadata: Metadata,
    ) -> Result<Trace, Error> {
        self.opening()?.open(Sink::writer(Box::new(w)), "writer".to_owned(), metadata)
    }

    /// Decides everything that can refuse the open, before anything is written.
    fn opening(mut self) -> Result<Opening, Error> {
        if self.ring_capacity > TraceBuilder::MAX_CAPACITY {
            let most = TraceBuilder::MAX_CAPACITY;
            let gib = (most * WORDS_PER_LINE * 8) >> 30;
            return Err(Error::InvalidArgument(format!(
                "a ring of {} lines is more than the largest, {most} ({gib} GiB a thread)",
                self.ring_capacity
            )));
        }
        let capture = match self.capture.take() {
            Some(c) => c,
            None => Capture::from_env()
                .map_err(|e| Error::InvalidArgument(e.to_string()))?
                .unwrap_or_default(),
        };
        // A setting made in code has not been through `Capture::parse`'s checks.
        capture.check().map_err(|e| Error::InvalidArgument(e.to_string()))?;
        // CAP-REC-4: a signal that dumps the recorder is claimed before anything is written.
        #[cfg(unix)]
        signals::claim_dump_signals(&capture).map_err(Error::InvalidArgument)?;
        // CAP-REC-2: a recorder is written on a fatal signal; WR-SIG-1: a trace that closes at
        // exit is closed on a signal that ends the process. The handlers' slot is taken before
        // the file is made, so that a refusal (CAP-REC-4) leaves the file it would replace.
        #[cfg(unix)]
        let signal_slot =
            signals::reserve(&capture, capture.recorder.is_some(), self.close_at_exit)
                .map_err(Error::InvalidArgument)?;
        Ok(Opening {
            builder: self,
            capture,
            #[cfg(unix)]
            signal_slot,
        })
    }
}

/// A [`TraceBuilder`] whose open can no longer be refused but by its sink
/// ([`TraceBuilder::opening`]).
struct Opening {
    builder: TraceBuilder,
    capture: Capture,
    #[cfg(unix)]
    signal_slot: signals::Reserved,
}

impl Opening {
    fn open(self, mut sink: Sink, target: String, metadata: Metadata) -> Result<Trace, Error> {
        fence::init();
        let Opening {
            builder,
            capture,
            #[cfg(unix)]
            signal_slot,
        } = self;
        let recorder = capture.recorder.is_some();
        let id = NEXT_TRACE_ID.fetch_add(1, Ordering::Relaxed);
        let mut header = Vec::with_capacity(256);
        Header::new(metadata.0).write_json(&mut header);
        sink.write_lines(&header).and_then(|()| sink.flush()).map_err(|e| Error::io(&target, e))?;
        let shared = Arc::new(Shared {
            id,
            policy: builder.policy,
            // Sized for lines of 16 words (an event with two fields), and never smaller than
            // two of the largest line.
            ring_words: (builder.ring_capacity * WORDS_PER_LINE).max(2 * line::MAX_WORDS),
            clock: builder.clock.unwrap_or_default(),
            next_id: AtomicU64::new(1),
            closed: AtomicBool::new(false),
            failed: AtomicBool::new(false),
            error: Mutex::new(None),
            dropped: Default::default(),
            waits: Default::default(),
            napping: AtomicUsize::new(0),
            writer: OnceLock::new(),
            target: target.clone(),
            rings: Mutex::new(Registry::default()),
            rings_pending: AtomicBool::new(false),
            control: Mutex::new(Control::default()),
            control_pending: AtomicBool::new(false),
            fallback: Mutex::new(None),
            signal_flushes: Default::default(),
            signal_dumps: AtomicU64::new(0),
            gate: Gate::new(&capture, id),
            capture,
            fatal: AtomicBool::new(false),
            finished: AtomicBool::new(false),
            pid: std::process::id(),
            helper: OnceLock::new(),
        });
        let config = writer::Config {
            flush_interval: builder.flush_interval,
            header_bytes: header.len() as u64,
            encoders: builder.encoders.unwrap_or_else(writer::default_encoders),
        };
        let for_thread = Arc::clone(&shared);
        let spawn = move || {
            thread::Builder::new()
                .name("jets-writer".into())
                .spawn(move || writer::run(for_thread, sink, config))
        };
        // WR-SIG-1: the writer (and its encoder threads) never take a signal sent to the process.
        #[cfg(unix)]
        let spawn = || signals::shielded(spawn);
        let handle = spawn().map_err(|e| Error::io(&target, e))?;
        let _ = shared.writer.set(handle.thread().clone());
        let trace = Trace(Arc::new(Inner {
            shared,
            traces: AtomicUsize::new(1),
            join: Mutex::new(Some(handle)),
            result: Mutex::new(None),
        }));
        // CAP-REC-2: a flight recorder is written (dumped) on panic; otherwise flushed if asked.
        let on_panic = (builder.flush_on_panic || recorder).then_some(recorder);
        hooks::register(Arc::downgrade(&trace.0), on_panic, builder.close_at_exit);
        #[cfg(unix)]
        signals::register(signal_slot, &trace.0.shared);
        Ok(trace)
    }
}

/// A region of interest, open until this guard is dropped ([`Trace::roi`]).
#[must_use = "the region of interest closes when this guard is dropped"]
pub struct Roi(Trace);

impl Drop for Roi {
    fn drop(&mut self) {
        // `Trace::roi` opened one for this guard to close: regions are counted, not named.
        self.0.roi_end();
    }
}

/// An open trace: the root of everything a simulator emits.
///
/// `Send + Sync` and cheap to clone; every clone writes to the same file. The trace is closed
/// (footer written, file completed) by [`Trace::close`], or when the last clone and the last
/// record handle are dropped. A record ended on another thread than the one that began it, when
/// it is that thread's last, counts as gone once that thread ends or drops a record, drops a
/// clone, or exits (spec WR-LEASE-1); at the latest, the trace is closed at process exit.
pub struct Trace(Arc<Inner>);

impl Clone for Trace {
    fn clone(&self) -> Self {
        // Relaxed: the count cannot reach zero meanwhile (`self` is one of them).
        self.0.traces.fetch_add(1, Ordering::Relaxed);
        Trace(Arc::clone(&self.0))
    }
}

impl Drop for Trace {
    /// A thread's records keep the trace through one count for all of them (`lease`), which the
    /// thread keeps, parked, between its records, and may still hold after its last record was
    /// ended on another thread. This thread's is parked here if so; the last clone takes back
    /// every parked count, so that the trace closes when the last clone and the last record
    /// handle are gone, as it would without leases.
    fn drop(&mut self) {
        lease::settle(&self.0);
        // SeqCst: see `lease`.
        if self.0.traces.fetch_sub(1, Ordering::SeqCst) == 1 {
            lease::revoke(&self.0);
        }
    }
}

impl std::fmt::Debug for Trace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Trace").field("target", &self.0.shared.target).finish_non_exhaustive()
    }
}

impl Trace {
    /// Creates `path` with default options and writes the header. See [`TraceBuilder`].
    pub fn create(path: impl AsRef<Path>, metadata: Metadata) -> Result<Trace, Error> {
        TraceBuilder::new().create(path, metadata)
    }

    /// Writes to any `Write` with default options.
    pub fn to_writer(
        w: impl std::io::Write + Send + 'static,
        metadata: Metadata,
    ) -> Result<Trace, Error> {
        TraceBuilder::new().writer(w, metadata)
    }

    /// Starts describing a root record (`parent_id: null`); finish with
    /// [`RecordBuilder::begin_at`] or [`RecordBuilder::begin`].
    pub fn root(
        &self,
        name: impl Into<crate::format::Str>,
        record_type: impl Into<crate::format::Str>,
    ) -> RecordBuilder<'_> {
        RecordBuilder::root(&self.0, name, record_type)
    }

    /// The clock read by calls without an explicit `clk`.
    pub fn clock(&self) -> &SimClock {
        &self.0.shared.clock
    }

    /// Waits until everything emitted before this call is written and flushed to the OS.
    pub fn flush(&self) -> Result<(), Error> {
        self.0.flush(None)
    }

    /// [`Trace::flush`] for a signal handler: allocates nothing and takes no lock (it only touches
    /// atomics, wakes the writer and sleeps), and waits at most `timeout`. Returns false when the
    /// writer did not confirm in time or writing has failed.
    pub fn flush_signal_safe(&self, timeout: Duration) -> bool {
        let shared = &self.0.shared;
        if shared.closed.load(Ordering::Relaxed) {
            return false;
        }
        let want = shared.signal_flushes[0].fetch_add(1, Ordering::AcqRel) + 1;
        shared.control_pending.store(true, Ordering::Release);
        shared.wake_writer();
        let deadline = std::time::Instant::now() + timeout;
        while shared.signal_flushes[1].load(Ordering::Acquire) < want {
            if shared.failed.load(Ordering::Acquire) || std::time::Instant::now() >= deadline {
                return false;
            }
            nap::nap(Duration::from_micros(50));
        }
        !shared.failed.load(Ordering::Acquire)
    }

    /// The first I/O error, if writing has failed. Once failed, nothing more is written; the file
    /// holds a valid prefix.
    #[inline]
    pub fn error(&self) -> Option<Error> {
        self.0.shared.error()
    }

    /// Lines dropped so far under [`Policy::Drop`].
    pub fn dropped(&self) -> Dropped {
        self.0.shared.dropped()
    }

    /// The capture setting in force (given to [`TraceBuilder::capture`], or read from
    /// `JETS_CAPTURE`).
    pub fn capture(&self) -> &Capture {
        &self.0.shared.capture
    }

    /// Turns capture on: lines emitted from now on are written (subject to the setting).
    pub fn capture_on(&self) {
        self.0.shared.gate.set_on(true);
    }

    /// Turns capture off: until [`Trace::capture_on`], emitting calls write nothing and cost a
    /// few nanoseconds (builders made while off are inert). Records begun while off are left out
    /// with their subtrees (CAP-OFF-1).
    pub fn capture_off(&self) {
        self.0.shared.gate.set_on(false);
    }

    /// Whether capture is on.
    pub fn is_capturing(&self) -> bool {
        self.0.shared.gate.on()
    }

    /// A handle of a record capture left out ([`RecordHandle::is_left_out`]), begun at cycle 0:
    /// every call on it writes nothing and counts its line as left out in this trace's footer,
    /// as on any record capture left out. For a binding that gives every such record one id
    /// instead of a handle of its own (the C API's `JETS_ID_LEFT_OUT`): nothing is kept per
    /// record, and the calls on it cost what a left-out line costs.
    ///
    /// ```
    /// let trace = jets::Trace::to_writer(std::io::sink(), jets::Metadata::new()).unwrap();
    /// let left = trace.left_out_record();
    /// left.emit_event_at(5, "EX").unwrap(); // counted as left out, not written
    /// left.end_at(6).unwrap();
    /// let summary = trace.close().unwrap();
    /// assert_eq!((summary.events, summary.left_out.events), (0, 1));
    /// ```
    pub fn left_out_record(&self) -> RecordHandle {
        RecordHandle::left_out_of(self.0.shared.gate.trace_id())
    }

    /// Whether the file reached its `limit=` size ([`Capture::limit`]) and capture stopped for
    /// good (CAP-LIM-1): from then on [`Trace::capture_on`] does nothing, and a simulator run
    /// for its trace alone may as well end.
    ///
    /// ```
    /// let c: jets::capture::Capture = "limit=1KiB".parse().unwrap();
    /// let trace = jets::TraceBuilder::new()
    ///     .capture(c)
    ///     .writer(std::io::sink(), jets::Metadata::new())
    ///     .unwrap();
    /// let run = trace.root("run", "Phase").begin_at(0).unwrap();
    /// let mut clk = 0;
    /// while !trace.limit_reached() {
    ///     clk += 1;
    ///     run.emit_event_at(clk, "tick").unwrap();
    ///     trace.flush().unwrap();
    /// }
    /// trace.capture_on(); // does nothing now
    /// assert!(!trace.is_capturing());
    /// # run.end_at(clk).unwrap();
    /// assert!(trace.close().unwrap().limit_reached);
    /// ```
    pub fn limit_reached(&self) -> bool {
        self.0.shared.gate.stopped()
    }

    /// Opens a region of interest (for a setting with `roi`). Regions nest and may be opened
    /// and closed on any thread; lines are captured while at least one is open.
    pub fn roi_begin(&self) {
        self.0.shared.gate.roi_begin();
    }

    /// Closes a region of interest. Returns false (and does nothing) when none was open.
    pub fn roi_end(&self) -> bool {
        self.0.shared.gate.roi_end()
    }

    /// Opens a region of interest that stays open until the returned guard is dropped: the
    /// scoped form of [`Trace::roi_begin`] and [`Trace::roi_end`], closed on every way out of
    /// the scope, an early `return`, a `?` or a panic included. The guard holds a clone of the
    /// trace and is `Send`, so a region opened on one thread may close on another.
    ///
    /// ```
    /// # use jets::{capture::Capture, Metadata, TraceBuilder};
    /// let trace = TraceBuilder::new()
    ///     .capture("roi".parse::<Capture>()?)
    ///     .writer(std::io::sink(), Metadata::new())?;
    /// let core = trace.root("core", "Core").begin_at(0)?;
    /// core.emit_event_at(1, "warm-up")?; // outside: left out
    /// {
    ///     let _kernel = trace.roi();
    ///     core.emit_event_at(2, "kernel")?; // written
    /// }
    /// core.emit_event_at(3, "after")?; // left out
    /// assert_eq!(trace.left_out().events, 2);
    /// # core.end_at(4)?;
    /// # trace.close()?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn roi(&self) -> Roi {
        self.roi_begin();
        Roi(self.clone())
    }

    /// Writes what the flight recorder holds (with the ancestors its lines need) and waits until
    /// it is flushed to the OS. Without a recorder this is [`Trace::flush`].
    pub fn dump(&self) -> Result<(), Error> {
        self.0.dump(None)
    }

    /// Lines left out by capture control in the emitting calls so far (the writer's own count,
    /// of held records never needed and recorder lines never dumped, is added at close).
    pub fn left_out(&self) -> LeftOut {
        self.0.shared.gate.left_out()
    }

    /// Writes the footer with exact totals and completes the file. Later calls return the same
    /// result; emitting afterwards returns [`Error::Closed`].
    pub fn close(&self) -> Result<Summary, Error> {
        self.0.close(None)
    }

    /// Like [`Trace::close`], with `capture_end_clk` at least `clk` (the simulation's last cycle).
    pub fn close_at(&self, clk: u64) -> Result<Summary, Error> {
        self.0.close(Some(clk))
    }
}

/// Runs `f` with this thread's `flag` set, and puts the flag back as it was when `f` returns or
/// unwinds: for the thread-local switches that say what the code below may do (a signal-safe
/// call, a user `Write` whose panic is caught). Once the thread's storage is torn down the flag
/// is neither read nor set.
pub(crate) fn with_flag<R>(flag: &'static LocalKey<Cell<bool>>, f: impl FnOnce() -> R) -> R {
    struct Restore(&'static LocalKey<Cell<bool>>, bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            let _ = self.0.try_with(|c| c.set(self.1));
        }
    }
    let _restore = Restore(flag, flag.try_with(|c| c.replace(true)).unwrap_or(false));
    f()
}
