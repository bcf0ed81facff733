//! Per-thread rings: the producer side of the hot path.
//!
//! Each emitting thread gets its own single-producer single-consumer ring (`spsc`) per trace, found
//! through a thread-local list. Pushing moves the line's used words into the ring and makes a few
//! stores to lines this thread owns; no cache line is written by two producers. Within one ring the writer keeps FIFO order. Across
//! rings, order follows the handles: every record line gets a [`Pos`] (ring, index), the handle
//! remembers it, and a line pushed through that handle on another thread carries it as a
//! dependency. The writer emits a line only once the line it depends on has been written. Because
//! a handle exists only after its record line was pushed, dependencies always point backwards in
//! time, so the writer can always make progress (see `writer::Writer::drain_once`).
//!
//! # Closing: `Ok` means written
//!
//! A push sets its ring's `busy` flag, then reads `closed`, and clears `busy` when the line is in
//! the ring. Closing stores `closed`, runs [`fence::heavy`], and waits until no ring is busy
//! ([`Shared::quiesce`]). So a push either sees `closed` and writes nothing (`Err(Closed)`), or the
//! writer waits for its line and drains it before the footer (`Ok`). After that the writer retires
//! every ring ([`Shared::retire`]): their buffers are freed even while the threads that pushed to
//! them live on, and a thread that still holds a retired ring finds `closed` and never touches it.
//! A push that panics (only its slow path, which waits for room, calls anything that can) clears
//! `busy` as it unwinds, so that the close does not wait for it for ever.

use std::cell::{Cell, UnsafeCell};
use std::mem::ManuallyDrop;
use std::ptr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use super::fence;
use super::line::{Line, Queued, MAX_WORDS};
use super::record::Slot as LineBox;
use super::spsc::{self, Cursor, Producer};
use super::{Policy, Shared};
use crate::error::Error;

/// Where a line sits: its ring and its index in that ring (0-based, counting every push).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Pos {
    pub(crate) ring: u32,
    pub(crate) index: u64,
}

/// Why a push wrote nothing: [`Error::Closed`] or [`Error::Reentrant`]. A plain byte rather
/// than an `Error`, so that a push's result is a few words the compiler keeps in registers: as
/// an `Error` it went through the stack with mismatched loads and stores, which cost a
/// store-forwarding stall on every push.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Refused {
    Closed,
    Reentrant,
}

impl From<Refused> for Error {
    #[cold]
    fn from(r: Refused) -> Error {
        match r {
            Refused::Closed => Error::Closed,
            Refused::Reentrant => Error::Reentrant,
        }
    }
}

/// What a push returns: where the line went and its record id (`None`: the drop policy dropped
/// it), or why nothing was written.
pub(crate) type Pushed = Result<Option<(Pos, u64)>, Refused>;

/// How many ids a thread takes from the shared counter at a time, so that creating records on
/// several threads does not bounce one cache line between cores.
const ID_BLOCK: u64 = 256;

/// The part of a ring that the writer thread reaches too: the producer end and the busy flag.
///
/// The writer keeps only a `Weak` to it, so a thread that exits frees its ring (the consumer then
/// sees it abandoned); the writer takes the producer out at close, so a thread that lives on
/// does not keep the buffer of a closed trace.
pub(crate) struct Slot {
    /// True from the moment a push announces itself until its line is in the ring (or refused).
    busy: AtomicBool,
    /// The producer end; `None` once retired. Touched only by the owning thread while `busy` and
    /// the trace is not closed, or by the writer after [`Shared::quiesce`] (see the module doc).
    producer: UnsafeCell<Option<Producer>>,
}

// SAFETY: `producer` is accessed under the busy/closed handshake described above, which gives
// the owning thread and the writer exclusive access in turn; `Producer` is `Send`.
unsafe impl Sync for Slot {}

impl Slot {
    /// Whether a push is in progress; `Acquire` so a finished push's line is visible after it.
    pub(crate) fn is_busy(&self) -> bool {
        self.busy.load(Ordering::Acquire)
    }

    /// Whether the producer end is still there (not retired).
    #[cfg(test)]
    pub(crate) fn has_producer(&self) -> bool {
        // SAFETY: tests call this only while no push runs on the slot.
        unsafe { (*self.producer.get()).is_some() }
    }

    /// Frees the producer end (and with the consumer, the buffer).
    ///
    /// # Safety
    /// Only after [`Shared::quiesce`] returned: no push is in progress and every later one sees
    /// `closed` before it touches the producer.
    pub(crate) unsafe fn retire(&self) {
        // SAFETY: per this function's contract, nothing else accesses the cell now.
        unsafe { *self.producer.get() = None };
    }
}

/// A thread's ring for one trace.
pub(crate) struct LocalRing {
    trace: Weak<Shared>,
    /// The address of `trace`'s `Shared`, only compared with that of a push's trace, which it
    /// is exactly when the addresses are equal, since `trace` keeps the allocation (not the
    /// value) for as long as this ring lives. One compare with the pointer the push has in
    /// hand, where comparing ids loaded the trace's id first.
    shared: usize,
    trace_id: u64,
    ring: u32,
    slot: Arc<Slot>,
    /// Where the next entry goes, kept here rather than behind `slot`'s producer end, so that
    /// a push reaches the ring's words without following two more pointers. Used only while
    /// that producer end is there (see [`LocalRing::push`]).
    cursor: Cursor,
    pushed: u64,
    next_id: u64,
    id_end: u64,
    /// The barrier between a push's `busy` and its look at `closed` ([`fence::Light`]).
    light: fence::Light,
}

impl LocalRing {
    /// A new ring registered with the writer, or `Err(Closed)` when the trace has retired its rings.
    fn new(shared: &Arc<Shared>) -> Result<LocalRing, Refused> {
        let mut registry = shared.rings.lock().unwrap_or_else(|p| p.into_inner());
        if registry.retired {
            return Err(Refused::Closed);
        }
        let (producer, cursor, consumer) = spsc::ring(shared.ring_words, MAX_WORDS);
        let slot = Arc::new(Slot {
            busy: AtomicBool::new(false),
            producer: UnsafeCell::new(Some(producer)),
        });
        let ring = registry.add(consumer, &slot);
        drop(registry);
        shared.rings_pending.store(true, Ordering::Release);
        Ok(LocalRing {
            trace: Arc::downgrade(shared),
            shared: Arc::as_ptr(shared).addr(),
            trace_id: shared.id,
            ring,
            slot,
            cursor,
            pushed: 0,
            next_id: 0,
            id_end: 0,
            // The trace is open (`shared` is), so `fence::init` has run: the answer is final.
            light: fence::Light::now(),
        })
    }

    #[inline]
    fn next_id(&mut self, shared: &Shared) -> u64 {
        if self.next_id == self.id_end {
            self.next_id = shared.next_id.fetch_add(ID_BLOCK, Ordering::Relaxed);
            self.id_end = self.next_id + ID_BLOCK;
        }
        let id = self.next_id;
        self.next_id += 1;
        id
    }

    /// Pushes a line, giving a record its id first. `Ok(None)` when the drop policy dropped it.
    ///
    /// Always consumes `*line`: it is moved into the ring, or dropped. The caller must not use or
    /// drop it afterwards. Taking it by reference lets the line go from the builder's storage
    /// straight into the ring slot, one copy, instead of being passed down by value.
    ///
    /// `RECORD`: the line is a `record` line (see [`Line::write_to`]). `map` makes the result
    /// what the caller needs, where each outcome is made, so that a caller that needs less than
    /// a [`Pushed`] gets a constant on each way (see [`push_counted`]).
    #[inline(always)]
    fn push<const RECORD: bool, L: Queued, R>(
        &mut self,
        shared: &Shared,
        line: &mut ManuallyDrop<L>,
        map: impl Fn(Pushed) -> R,
    ) -> R {
        // Borrowed once: the ring's words, written below through raw pointers, might alias
        // `self` for all the compiler knows, so it would load the slot's address again to
        // clear the flag.
        let busy = &*self.slot as *const Slot;
        // SAFETY: `self.slot` keeps the slot alive for the whole push.
        let busy = unsafe { &(*busy).busy };
        busy.store(true, Ordering::Relaxed);
        self.light.fence();
        let result = if shared.closed.load(Ordering::Relaxed) {
            // SAFETY: consumed here, per the contract.
            unsafe { ManuallyDrop::drop(line) };
            map(Err(Refused::Closed))
        } else {
            // Busy is set and the trace was not closed when we looked: its writer retires a
            // ring (takes its producer end) only after `Shared::quiesce`, which stores `closed`
            // first and then waits until busy is cleared, so this ring's producer end is there
            // (it was not retired before, or `closed` would be set) and stays there until busy
            // is cleared. The cursor's buffer is alive meanwhile: `push_to` may use it, without
            // looking at the producer end itself (one dependent load less on every push).
            self.push_to::<RECORD, L, R>(shared, line, map)
        };
        busy.store(false, Ordering::Release);
        result
    }

    #[inline(always)]
    fn push_to<const RECORD: bool, L: Queued, R>(
        &mut self,
        shared: &Shared,
        line: &mut ManuallyDrop<L>,
        map: impl Fn(Pushed) -> R,
    ) -> R {
        // A deferred record has its id already (`record::begin_line`).
        let id = line.id_mut();
        if RECORD && *id == 0 {
            *id = self.next_id(shared);
        }
        let id = *id;
        // Room for the largest entry (a constant: no need to look at the line first); only when
        // the ring has less than that is the line's own size worked out, to see whether it
        // still fits.
        // SAFETY: the producer end is there (see `push`), and this ring's cursor is this one.
        let at = match unsafe { self.cursor.reserve(MAX_WORDS) } {
            Some(at) => at,
            None => {
                let (cursor, slot) = (&mut self.cursor, &self.slot);
                // SAFETY: as above, during this push (busy, not closed).
                match unsafe { reserve_exact(cursor, slot, shared, &**line, self.ring) } {
                    Ok(at) => at,
                    Err(e) => {
                        // SAFETY: consumed here, per the contract.
                        unsafe { ManuallyDrop::drop(line) };
                        return map(e);
                    }
                }
            }
        };
        // SAFETY: `reserve` gave at least `MAX_WORDS` free words at `at` (or `words`, the exact
        // size), and the line is not used again by the caller (this function's contract);
        // `commit` publishes exactly the entry just written. A dependency on this ring is left
        // out: FIFO already orders it.
        let words = unsafe { L::write_to::<RECORD>(line, at, self.ring) };
        // SAFETY: as for `reserve`.
        unsafe { self.cursor.commit(words) };
        let pos = Pos { ring: self.ring, index: self.pushed };
        self.pushed += 1;
        map(Ok(Some((pos, id))))
    }
}

/// The ring has less room than the largest entry `line` could make: room for its own size, or
/// else the drop policy's answer (`Err`: what the push returns), or room after waiting.
#[cold]
///
/// # Safety
/// As for [`Cursor::reserve`], with `slot` the ring's slot, during a push that has set its busy
/// flag and found the trace not closed (so its producer end is there).
unsafe fn reserve_exact(
    cursor: &mut Cursor,
    slot: &Slot,
    shared: &Shared,
    line: &impl Queued,
    ring: u32,
) -> Result<*mut u64, Pushed> {
    let words = line.words(ring);
    // SAFETY: per this function's contract.
    if let Some(at) = unsafe { cursor.reserve(words) } {
        return Ok(at);
    }
    // SAFETY: per this function's contract, the writer does not touch the producer end now.
    let Some(producer) = (unsafe { &*slot.producer.get() }) else {
        return Err(Err(Refused::Closed)); // not reached: see `LocalRing::push`
    };
    // What follows calls out (the helpers, the clock, the nap): should any of it panic, the
    // push's busy flag is cleared on the way out, or the trace's close would wait for it for
    // ever (`Shared::quiesce`), perhaps on this very thread as it unwinds. Only here, off the
    // path of a push that finds room, which calls nothing that can panic.
    let unwinding = ClearOnUnwind(&slot.busy);
    let room = match shared.policy {
        Policy::Drop => Err(Ok(None)),
        // SAFETY: per this function's contract.
        Policy::Block => unsafe { push_blocking(cursor, producer, shared, words) }.map_err(Err),
    };
    std::mem::forget(unwinding);
    room
}

/// Clears a push's busy flag if dropped, which [`reserve_exact`] lets happen only by a panic.
struct ClearOnUnwind<'a>(&'a AtomicBool);

impl Drop for ClearOnUnwind<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

/// The slow path: the ring is full. Spin briefly, then wake the writer and sleep in short steps,
/// until `words` words are free. Gives up when the trace closes or its writer is gone, so a
/// producer never waits forever.
#[cold]
///
/// # Safety
/// As for [`reserve_exact`].
unsafe fn push_blocking(
    cursor: &mut Cursor,
    producer: &Producer,
    shared: &Shared,
    words: usize,
) -> Result<*mut u64, Refused> {
    // Timed only here, on the way that waits: a push that finds room never reads the clock.
    let waiting = std::time::Instant::now();
    // SAFETY: the same contract.
    let room = unsafe { wait_for_room(cursor, producer, shared, words) };
    shared.count_wait(waiting.elapsed());
    room
}

/// A waiting producer's nap, while it is the only one napping: short, since the writer frees
/// room in its ring within a turn.
pub(super) const NAP: Duration = Duration::from_micros(20);
/// The longest nap, however many producers nap.
pub(super) const NAP_MOST: Duration = Duration::from_millis(2);

/// A producer's place among those napping for room ([`Shared::napping`]), taken at its first nap
/// and given back when its wait ends, however it ends.
///
/// Each nap is [`NAP`] times the number napping: with one producer (a simulator's thread) it is
/// what it always was, and with many, their wake-ups together stay about one per [`NAP`]. Before,
/// every thread napped 20 µs: 128 threads waiting for a writer that fell behind asked to be woken
/// 6 million times a second between them, and the writer, one thread among 129 on two cores, got
/// almost no time (a flight recorder of 128 threads: 16.6 s against 0.8 s; `jets_examples::threads`).
pub(super) struct Napping<'a> {
    shared: &'a Shared,
    counted: bool,
}

impl<'a> Napping<'a> {
    /// A producer that has not napped yet.
    pub(super) fn new(shared: &'a Shared) -> Napping<'a> {
        Napping { shared, counted: false }
    }

    /// How long to nap now.
    pub(super) fn nap(&mut self) -> Duration {
        let napping = match self.counted {
            true => self.shared.napping.load(Ordering::Relaxed),
            false => {
                self.counted = true;
                self.shared.napping.fetch_add(1, Ordering::Relaxed) + 1
            }
        };
        NAP.saturating_mul(u32::try_from(napping).unwrap_or(u32::MAX)).min(NAP_MOST)
    }
}

impl Drop for Napping<'_> {
    fn drop(&mut self) {
        if self.counted {
            self.shared.napping.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

/// The wait of [`push_blocking`].
///
/// # Safety
/// As for [`reserve_exact`].
unsafe fn wait_for_room(
    cursor: &mut Cursor,
    producer: &Producer,
    shared: &Shared,
    words: usize,
) -> Result<*mut u64, Refused> {
    let backoff = crossbeam_utils::Backoff::new();
    let mut napping = Napping::new(shared);
    #[cfg(test)]
    if PANIC_WHILE_WAITING.with(Cell::get) {
        panic!("a push that waits for room panics (test)");
    }
    loop {
        // SAFETY: per this function's contract.
        if let Some(at) = unsafe { cursor.reserve(words) } {
            return Ok(at);
        }
        if producer.is_abandoned() || shared.closed.load(Ordering::Relaxed) {
            return Err(Refused::Closed);
        }
        // Rather than wait for the writer, do some of its work (`Helper`).
        if help_allowed() && shared.helper.get().is_some_and(super::Helper::help) {
            shared.wake_writer();
            continue;
        }
        if backoff.is_completed() {
            shared.wake_writer();
            super::nap::nap(napping.nap());
        } else {
            backoff.snooze();
        }
    }
}

/// A thread's rings, one per trace it has emitted to: a thread usually emits to one trace, whose
/// ring is kept inline (`first`), so that a push reaches its cursor with one load less than
/// through a `Vec`'s pointer.
struct Rings {
    first: Option<LocalRing>,
    more: Vec<LocalRing>,
}

/// What a thread keeps for its emitting calls: its rings. Its destructor also frees the
/// thread's spare box ([`SPARE`]).
struct Local {
    /// An `UnsafeCell` rather than a `RefCell`: [`push`] is the only code that touches it, and
    /// [`Entered`] refuses a push nested in another one on the same thread (from a global
    /// allocator, or a `Drop` run by the push), so a mutable reference obtained here (or through
    /// [`FIRST`]) is always unique. That lets the line be moved once, straight into the ring,
    /// instead of through a closure.
    rings: UnsafeCell<Rings>,
}

impl Drop for Local {
    fn drop(&mut self) {
        // The rings go with `self`: no push may reach the first one through `FIRST` any more
        // (a push from a later destructor finds `LOCAL` gone and takes the fallback ring).
        FIRST.set(ptr::null_mut());
        // No box is kept after this: `give_spare` keeps one only while `LOCAL` is alive.
        if let Some(slot) = take_spare() {
            drop(slot);
        }
    }
}

thread_local! {
    static LOCAL: Local =
        const { Local { rings: UnsafeCell::new(Rings { first: None, more: Vec::new() }) } };

    /// The spare box for a builder's line (`record::pool`), given back by the push that empties
    /// it: a thread usually has one builder alive at a time, so this one-box cache (a take and a
    /// set) serves most builders without the pool's list. A raw pointer (owning: from
    /// `Box::into_raw`, or null) in a thread-local without a destructor, so that taking it is a
    /// load and a store, with no check of the thread-local's state and no call to register a
    /// destructor; `Local`'s destructor frees it. A nested call (a signal handler) between the
    /// load and the store of `take` runs to its end first and leaves the cell as it found it.
    static SPARE: Cell<*mut LineBox> = const { Cell::new(std::ptr::null_mut()) };

    /// This thread's first ring (`Rings::first` of [`LOCAL`]) while no push runs on this thread
    /// and `LOCAL` is alive; [`IN_PUSH`] while one runs (or anything counted as one: see
    /// [`Entered`]); null before the thread's first push and once `LOCAL` is gone. A push to
    /// the first ring, nearly every push, reads this word, sets it to `IN_PUSH`, pushes, and
    /// sets it back: a load and two stores, where a flag for "inside a push", the check that
    /// `LOCAL` is alive and the check that it has a first ring took eleven instructions more.
    /// Any other word sends the push the long way ([`push_slow`]), which refuses it when a
    /// push runs. No destructor, so that it stays usable while the thread's other
    /// thread-locals are torn down. A nested call (a signal handler) between the load and the
    /// store runs to its end first and leaves the word as it found it.
    static FIRST: Cell<*mut LocalRing> = const { Cell::new(ptr::null_mut()) };

    /// True while this thread runs [`signal_safe`]: a push that waits for room then only waits.
    static SIGNAL_SAFE: Cell<bool> = const { Cell::new(false) };

    /// Tests only: a push on this thread that waits for room panics there, as a bug in what it
    /// calls meanwhile would.
    #[cfg(test)]
    pub(crate) static PANIC_WHILE_WAITING: Cell<bool> = const { Cell::new(false) };
}

/// Runs `f` with this thread's emitting calls kept async-signal-safe: a call that waits for room
/// under [`Policy::Block`](super::Policy::Block) only waits, and does not encode a batch of the
/// writer's meanwhile (encoding allocates). The C API's async-signal-safe calls run in it. (A
/// handler cannot interrupt a batch being encoded: signals are held while one is.)
///
/// ```
/// # let dir = tempfile::tempdir().unwrap();
/// let trace = jets::TraceBuilder::new().create(dir.path().join("t.jets"), Default::default())?;
/// let root = trace.root("core", "Core").begin_at(0)?;
/// jets::write::signal_safe(|| root.event("tick").emit_at(1))?;
/// # root.end_at(2)?;
/// # trace.close()?;
/// # Ok::<(), jets::Error>(())
/// ```
pub fn signal_safe<R>(f: impl FnOnce() -> R) -> R {
    super::with_flag(&SIGNAL_SAFE, f)
}

/// Whether a push that waits for room may encode a batch meanwhile.
fn help_allowed() -> bool {
    !SIGNAL_SAFE.try_with(Cell::get).unwrap_or(true)
}

/// The spare box for a builder's line, if this thread has one.
#[inline(always)]
pub(crate) fn take_spare() -> Option<Box<LineBox>> {
    let raw = SPARE.try_with(|s| s.replace(std::ptr::null_mut())).unwrap_or(std::ptr::null_mut());
    // SAFETY: a non-null pointer in `SPARE` came from `Box::into_raw` and is owned by the cell,
    // which was just emptied.
    (!raw.is_null()).then(|| unsafe { Box::from_raw(raw) })
}

/// Keeps `slot` as this thread's spare box; gives it back when there is one already (or the
/// thread's storage is torn down).
#[inline(always)]
pub(crate) fn give_spare(slot: Box<LineBox>) -> Option<Box<LineBox>> {
    match LOCAL.try_with(|_| ()) {
        // `LOCAL` is alive (its destructor registered), so it frees a box kept now.
        Ok(()) => keep_spare(slot),
        Err(_) => Some(slot),
    }
}

/// [`give_spare`] once `LOCAL` is known to be alive.
#[inline(always)]
fn keep_spare(slot: Box<LineBox>) -> Option<Box<LineBox>> {
    // `SPARE` has no destructor, so it is always there (were it not, the box moved into the
    // closure would be freed with it).
    SPARE
        .try_with(|s| {
            if s.get().is_null() {
                s.set(Box::into_raw(slot));
                None
            } else {
                Some(slot)
            }
        })
        .unwrap_or_default()
}

/// What [`FIRST`] holds while this thread is inside a push (or counted as inside one): an
/// address no ring has, and no null, so that one comparison (`<= IN_PUSH`) sends a push the
/// long way both before the first ring and inside a push.
const IN_PUSH: *mut LocalRing = ptr::dangling_mut();

/// Whether `first` (a value of [`FIRST`]) is the first ring, for a push to use.
#[inline(always)]
fn is_ring(first: *mut LocalRing) -> bool {
    first.addr() > IN_PUSH.addr()
}

/// Marks this thread as inside [`push`] until dropped; `None` when it already is. Keeps what
/// [`FIRST`] held, to put back when dropped.
pub(crate) struct Entered(*mut LocalRing);

impl Entered {
    #[inline(always)]
    pub(crate) fn enter() -> Option<Entered> {
        match FIRST.replace(IN_PUSH) {
            IN_PUSH => None,
            first => Some(Entered(first)),
        }
    }
}

impl Drop for Entered {
    #[inline(always)]
    fn drop(&mut self) {
        FIRST.set(self.0);
    }
}

/// [`push_slow`]'s push to a ring other than the thread's first: of a second trace, or a new
/// one. Consumes `*line` as [`push`] does.
#[cold]
fn push_other<const RECORD: bool, L: Queued>(
    rings: &mut Rings,
    shared: &Arc<Shared>,
    line: &mut ManuallyDrop<L>,
) -> Pushed {
    match other_ring(rings, shared) {
        Ok(ring) => ring.push::<RECORD, L, _>(shared, line, |p| p),
        Err(e) => {
            // SAFETY: consumed here, per the contract.
            unsafe { ManuallyDrop::drop(line) };
            Err(e)
        }
    }
}

/// A ring other than the first: of a second trace, or a new one.
#[cold]
fn other_ring<'a>(
    rings: &'a mut Rings,
    shared: &Arc<Shared>,
) -> Result<&'a mut LocalRing, Refused> {
    match rings.more.iter().position(|r| r.trace_id == shared.id) {
        Some(i) => Ok(&mut rings.more[i]),
        None => new_local_ring(rings, shared),
    }
}

/// The first line from this thread to this trace. Also forgets rings of traces that are closed
/// or gone.
fn new_local_ring<'a>(
    rings: &'a mut Rings,
    shared: &Arc<Shared>,
) -> Result<&'a mut LocalRing, Refused> {
    if shared.closed.load(Ordering::Relaxed) {
        return Err(Refused::Closed);
    }
    let live = |r: &LocalRing| r.trace.upgrade().is_some_and(|t| !t.closed.load(Ordering::Relaxed));
    rings.more.retain(live);
    if rings.first.as_ref().is_some_and(|r| !live(r)) {
        rings.first = rings.more.pop();
    }
    let ring = LocalRing::new(shared)?;
    if rings.first.is_none() {
        Ok(rings.first.insert(ring))
    } else {
        rings.more.push(ring);
        Ok(rings.more.last_mut().expect("just pushed"))
    }
}

/// Pushes `line` on this thread's ring; a record gets its id here. Returns where the line went
/// and its record id, or `None` when the drop policy dropped it. `Ok` means the line will be
/// written (unless writing fails): a close that races with this call waits for it.
///
/// Always consumes `*line` (into the ring, or dropped), whatever it returns: the caller must
/// neither use nor drop it afterwards.
#[inline(always)]
pub(crate) fn push<const RECORD: bool, L: Queued>(
    shared: &Arc<Shared>,
    line: &mut ManuallyDrop<L>,
) -> Pushed {
    push_local::<RECORD, L, _>(shared, line, |p| p).0
}

/// A [`Pushed`] as plain values side by side (the outcome, where the line went, its id), which
/// the ways a push can go can meet in: as a `Pushed`, whose variants overlap, a record's push
/// met in memory, its position stored a byte, a word and a half-word at a time and read back
/// whole (a load the CPU cannot forward from those stores), ten instructions and a stall.
#[derive(Clone, Copy)]
pub(crate) struct Placed {
    /// 0: written; 1: dropped by the policy; 2: refused, closed; 3: refused, re-entered.
    outcome: u8,
    pos: Pos,
    id: u64,
}

/// [`Pushed`] as [`Placed`].
#[inline(always)]
fn placed(p: Pushed) -> Placed {
    let nowhere = Pos { ring: 0, index: 0 };
    match p {
        Ok(Some((pos, id))) => Placed { outcome: 0, pos, id },
        Ok(None) => Placed { outcome: 1, pos: nowhere, id: 0 },
        Err(Refused::Closed) => Placed { outcome: 2, pos: nowhere, id: 0 },
        Err(Refused::Reentrant) => Placed { outcome: 3, pos: nowhere, id: 0 },
    }
}

impl Placed {
    /// Back as a [`Pushed`], once the ways have met.
    #[inline(always)]
    pub(crate) fn pushed(self) -> Pushed {
        match self.outcome {
            0 => Ok(Some((self.pos, self.id))),
            1 => Ok(None),
            2 => Err(Refused::Closed),
            _ => Err(Refused::Reentrant),
        }
    }
}

/// [`push`] for a record line (`RECORD`), its result met in [`Placed`].
#[inline(always)]
pub(crate) fn push_record<L: Queued>(shared: &Arc<Shared>, line: &mut ManuallyDrop<L>) -> Pushed {
    push_local::<true, L, _>(shared, line, placed).0.pushed()
}

/// [`placed`], for a builder's record line pushed from its box ([`push_boxed`]).
#[inline(always)]
pub(crate) fn placed_record(p: Pushed) -> Placed {
    placed(p)
}

/// [`push`] for a line that is no record, whose caller needs neither where it went nor an id:
/// a line the drop policy drops is counted as `drop_kind`.
///
/// Why apart: the ways a push can go (this thread's ring, another, the shared fallback, a
/// refusal) meet in one result; as a [`Pushed`], four words, that result went through the
/// stack, stored on every push and loaded back. Each way's result is made what the caller
/// needs before they meet ([`counting`]), so that they meet in a register.
#[inline(always)]
pub(crate) fn push_counted<L: Queued>(
    shared: &Arc<Shared>,
    line: &mut ManuallyDrop<L>,
    drop_kind: usize,
) -> Result<(), Refused> {
    push_local::<false, L, _>(shared, line, counting(shared, drop_kind)).0
}

/// What a caller of [`push_counted`] (or of [`push_boxed`] with this) does with a push's
/// outcome, done on each way the push can go, so that each way's result is a constant (where
/// whether the line was written met, was tested, and made this: five instructions a line).
#[inline(always)]
pub(crate) fn counting(
    shared: &Shared,
    drop_kind: usize,
) -> impl Fn(Pushed) -> Result<(), Refused> + '_ {
    move |p: Pushed| match p {
        Ok(Some(_)) => Ok(()),
        Ok(None) => {
            shared.count_drop(drop_kind);
            Ok(())
        }
        Err(e) => Err(e),
    }
}

/// [`push`] for a builder's line in its box, which then becomes this thread's spare box (or is
/// handed back to the caller's pool when there is one already).
///
/// `map` makes the result what the caller needs (see [`push_counted`]).
#[inline(always)]
pub(crate) fn push_boxed<const RECORD: bool, R>(
    shared: &Arc<Shared>,
    slot: Box<LineBox>,
    map: impl Fn(Pushed) -> R,
) -> (R, Option<Box<LineBox>>) {
    // A raw pointer owns the box while its line is moved out, so that no `Box` is asserted
    // unique while the reference to the line is in use.
    let raw = Box::into_raw(slot);
    // SAFETY: `raw` is a live box whose line is initialized and ours; `ManuallyDrop<Line>` has
    // the same layout as `Line`, and the push takes ownership through it exactly once.
    let (result, local) = push_local::<RECORD, Line, R>(
        shared,
        unsafe { &mut *(*raw).line.as_mut_ptr().cast::<ManuallyDrop<Line>>() },
        map,
    );
    // SAFETY: the line has been consumed and the reference to it is gone; the box (holding a
    // moved-out line, which `MaybeUninit` never drops) is ours again.
    let slot = unsafe { Box::from_raw(raw) };
    if local {
        // `LOCAL` was reachable, so it is alive and frees a box kept now.
        (result, keep_spare(slot))
    } else {
        (result, Some(slot))
    }
}

/// Pushes `line` as [`push`] does, its result made what the caller needs by `map` on each way
/// the push can go (see [`push_counted`]); also says whether this thread's [`Local`] was
/// reachable (alive), so that a box given to [`SPARE`] now is freed with it.
#[inline(always)]
fn push_local<const RECORD: bool, L: Queued, R>(
    shared: &Arc<Shared>,
    line: &mut ManuallyDrop<L>,
    map: impl Fn(Pushed) -> R,
) -> (R, bool) {
    let first = FIRST.get();
    if is_ring(first) {
        // SAFETY: a ring in `FIRST` is `LOCAL`'s first, alive (`Local`'s destructor clears the
        // word), and no push runs on this thread (one would have left `IN_PUSH` there), so no
        // other reference to it exists; `IN_PUSH` keeps it so until the word is put back.
        let ring = unsafe { &mut *first };
        if ring.shared == Arc::as_ptr(shared).addr() {
            FIRST.set(IN_PUSH);
            let result = ring.push::<RECORD, L, R>(shared, line, map);
            FIRST.set(first);
            return (result, true);
        }
    }
    push_slow::<RECORD, L, R>(shared, line, map)
}

/// [`push_local`] for a push that is not to the thread's first ring: the thread's first push, a
/// push to another trace, one nested in a push, or one while the thread is torn down.
#[cold]
#[inline(never)]
fn push_slow<const RECORD: bool, L: Queued, R>(
    shared: &Arc<Shared>,
    line: &mut ManuallyDrop<L>,
    map: impl Fn(Pushed) -> R,
) -> (R, bool) {
    let Some(mut entered) = Entered::enter() else {
        // A push from inside a push on this thread (a global allocator or a destructor that
        // emits): refused, since the thread's ring list is in use. The line is dropped while
        // this thread is still marked, so its destructor cannot recurse either.
        // SAFETY: consumed here, per the contract.
        unsafe { ManuallyDrop::drop(line) };
        return (map(Err(Refused::Reentrant)), false);
    };
    // `closed` is read once, in the handshake of `LocalRing::push` (and before a ring is made).
    let pushed = match LOCAL.try_with(|l| l as *const Local) {
        Ok(local) => {
            // SAFETY: `Local` lives as long as this thread, which is running this call; and see
            // `Local::rings`: `entered` proves no other reference to the rings exists on this
            // thread while this one lives.
            let rings = unsafe { &mut *(*local).rings.get() };
            let result = match rings.first.as_mut() {
                Some(ring) if ring.trace_id == shared.id => {
                    ring.push::<RECORD, L, R>(shared, line, map)
                }
                _ => map(push_other::<RECORD, L>(rings, shared, line)),
            };
            // The first ring as it is now (made, or replaced, by this push), for the pushes
            // after this one; made from this reference, the latest to the rings.
            entered.0 = rings.first.as_mut().map_or(ptr::null_mut(), |r| r as *mut LocalRing);
            (result, true)
        }
        // No usable thread-local ring (this thread is being torn down).
        Err(_) => (map(push_fallback::<RECORD, L>(shared, line)), false),
    };
    drop(entered);
    pushed
}

/// No usable thread-local ring (this thread is being torn down): use the trace's shared ring
/// behind a mutex. Slower, same ordering.
#[cold]
fn push_fallback<const RECORD: bool, L: Queued>(
    shared: &Arc<Shared>,
    line: &mut ManuallyDrop<L>,
) -> Pushed {
    let mut fallback = shared.fallback.lock().unwrap_or_else(|p| p.into_inner());
    let ring = match fallback.take() {
        Some(ring) => ring,
        None => match LocalRing::new(shared) {
            Ok(ring) => ring,
            Err(e) => {
                // SAFETY: consumed here, per the contract.
                unsafe { ManuallyDrop::drop(line) };
                return Err(e);
            }
        },
    };
    fallback.insert(ring).push::<RECORD, L, _>(shared, line, |p| p)
}
