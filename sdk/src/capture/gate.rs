//! The producer side of capture control: decides, in the emitting call, whether a line is
//! written, held as a possible ancestor, or left out. Asked first when a builder is made
//! ([`Gate::may_record`], [`Gate::may_event`], [`Gate::annotation`]): a line that is left out
//! whatever its cycle and data gets an inert builder that fills nothing. Lines that pass are
//! checked again at their cycle before anything is queued. Left-out lines are counted per thread
//! ([`left`]): a plain increment, no locked instruction.

use std::cell::RefCell;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};

use super::config::Capture;
use super::LeftOut;
use crate::format::Str;

/// Bits a record handle keeps for the capture decisions of the lines made through it.
pub(crate) mod bits {
    /// The record passes the record_type and unit filters: lines on it may be written.
    pub(crate) const MATCH: u8 = 1;
    /// The record is (or is inside) a record of a selected unit; children without a `unit_id`
    /// inherit it.
    pub(crate) const UNIT: u8 = 2;
    /// The record was left out by capture (not dropped by the ring policy): its subtree is too.
    pub(crate) const LEFT: u8 = 4;
    /// A record that passes both filters, as every record does under a setting without
    /// `types=` or `units=`.
    pub(crate) const PASSES: u8 = MATCH | UNIT;
}

/// What capture says of a child record at its cycle, before its fields are made
/// ([`Gate::child_at`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ChildAt {
    /// Left out, with its subtree.
    Leave,
    /// Made, and judged when written ([`Gate::record`]); `sampled`: its 1-of-N sample was taken.
    Make { sampled: bool },
    /// Held by its cycle alone ([`Verdict::Hold`], [`bits::PASSES`]).
    HeldByCycle,
}

/// What happens to a `record` line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Queued and written (or kept by the flight recorder).
    Select,
    /// Queued but held by the writer: written only if a line under it is (CAP-ANC-1).
    Hold,
    /// Not queued; the record's subtree is left out with it (CAP-SUB-1).
    Leave,
}

/// Line kinds, as indices of the left-out counters.
pub(crate) const RECORD: usize = 0;
pub(crate) const EVENT: usize = 1;
pub(crate) const ANNOTATION: usize = 2;
pub(crate) const END: usize = 3;

/// The capture state every emitting call reads.
pub(crate) struct Gate {
    /// Run-time on/off ([`crate::Trace::capture_on`]).
    on: AtomicBool,
    /// Capture stopped for good: the file reached its `limit=` size (CAP-LIM-1). `on` stays
    /// false from then on, whatever `set_on` is asked.
    stopped: AtomicBool,
    /// Any filter, window, ROI or sample: the slow checks run.
    filtering: bool,
    /// No type or unit filter and no sample (`events=` does not judge records): a record's
    /// verdict depends on its cycle alone (window, ROI), and is taken inline.
    cycles_only: bool,
    /// The window (`0..u64::MAX` without one), repeated every `every` cycles when that is not 0
    /// (CAP-WIN-2).
    window: Range<u64>,
    every: Period,
    /// The last cycle of the last window: nothing after it is captured (`u64::MAX` without a
    /// window, or for a repeated one, which has no last). Inclusive, so that a line at cycle
    /// `u64::MAX`, which the spec allows, is in a setting without a window; an exclusive end of
    /// `u64::MAX` left it out of every filtering setting (`roi`, `types=` ...; CAP-WIN-3).
    last: u64,
    roi: bool,
    roi_depth: AtomicI64,
    types: Option<Vec<String>>,
    events: Option<Vec<String>>,
    units: Option<Vec<u64>>,
    samples: Vec<(String, u64)>,
    trace_id: u64,
}

/// A repeated window's period (0: the window is not repeated), with what taking a remainder by
/// it needs without a division: every event under a record in a gap is judged by its remainder,
/// and a 64-bit division took more time than the rest of the check (the 6502 emulator with a
/// 1 % periodic sample, 2026-11-29).
#[derive(Clone, Copy)]
struct Period(u64, u64);

impl Period {
    fn new(p: u64) -> Period {
        // ⌊2^64 / p⌋; `Capture::check` makes a period at least 2 (longer than a window of at
        // least one cycle), so it fits. 0 and 1 are kept apart all the same.
        let inverse = match p {
            0 | 1 => 0,
            p => ((1u128 << 64) / u128::from(p)) as u64,
        };
        Period(p, inverse)
    }

    /// `x % p`, for p at least 2. The quotient ⌊x · ⌊2^64/p⌋ / 2^64⌋ is ⌊x/p⌋ or one less
    /// (x · ⌊2^64/p⌋ is below x · 2^64/p by less than x < 2^64), so the remainder it leaves is
    /// below 2p, and one subtraction makes it exact.
    #[inline(always)]
    fn rem(self, x: u64) -> u64 {
        let Period(p, inverse) = self;
        if p < 2 {
            return if p == 1 { 0 } else { x };
        }
        let q = ((u128::from(x) * u128::from(inverse)) >> 64) as u64;
        let r = x - q * p;
        if r >= p {
            r - p
        } else {
            r
        }
    }
}

thread_local! {
    /// This thread's sample counters: (trace id, index of the `sample=` clause, records seen).
    static SAMPLED: RefCell<Vec<(u64, usize, u64)>> = const { RefCell::new(Vec::new()) };
}

impl Drop for Gate {
    fn drop(&mut self) {
        left::forget(self.trace_id);
    }
}

impl Gate {
    pub(crate) fn new(c: &Capture, trace_id: u64) -> Gate {
        left::register(trace_id);
        Gate {
            on: AtomicBool::new(!c.off),
            stopped: AtomicBool::new(false),
            filtering: c.window.is_some()
                || c.roi
                || c.types.is_some()
                || c.events.is_some()
                || c.units.is_some()
                || !c.samples.is_empty(),
            cycles_only: c.types.is_none() && c.units.is_none() && c.samples.is_empty(),
            window: c.window.clone().unwrap_or(0..u64::MAX),
            every: Period::new(c.every.unwrap_or(0)),
            // A window holds a cycle at least (`Capture::check`): its end is above 0.
            last: match (&c.window, c.every) {
                (Some(w), None) => w.end - 1,
                _ => u64::MAX,
            },
            roi: c.roi,
            roi_depth: AtomicI64::new(0),
            types: c.types.clone(),
            events: c.events.clone(),
            units: c.units.clone(),
            samples: c.samples.clone(),
            trace_id,
        }
    }

    /// The first cycle a line may be captured at when capture filters at all: a line at an
    /// earlier cycle is left out whatever its name (0: none is); with a repeated window, the
    /// first window's start (the gaps after it are for [`Gate::event`] to judge). Nodes keep a
    /// copy, so that an event under a deferred record before a window is refused without a look
    /// here.
    #[inline(always)]
    pub(crate) fn refuse_below(&self) -> u64 {
        // 0 without a window (`0..u64::MAX`).
        self.window.start
    }

    /// [`Gate::refuse_below`] for a record held from cycle `clk` on: with a repeated window,
    /// the start of the window `clk` is in or of the next one, so that the events of a record
    /// begun in a gap are refused by their cycle until the next window, as before the first.
    #[inline(always)]
    pub(crate) fn refuse_below_at(&self, clk: u64) -> u64 {
        let Range { start, end } = self.window;
        if self.every.0 == 0 || clk < start {
            return start;
        }
        let into = self.every.rem(clk - start);
        let this = clk - into;
        if into < end - start {
            this
        } else {
            this.saturating_add(self.every.0)
        }
    }

    /// The trace this gate belongs to (keys the left-out counters).
    #[inline(always)]
    pub(crate) fn trace_id(&self) -> u64 {
        self.trace_id
    }

    /// True while capture is on (compiled in and not switched off).
    #[inline(always)]
    pub(crate) fn on(&self) -> bool {
        cfg!(feature = "enabled") && self.on.load(Ordering::Relaxed)
    }

    /// Switches capture on or off, unless it is stopped for good ([`Gate::stop`]).
    pub(crate) fn set_on(&self, on: bool) {
        self.on.store(on, Ordering::SeqCst);
        // A stop between the store and here has stored false after it; a stop before it is seen
        // here. Either way `on` ends false (the emitting calls read it relaxed: a line or two
        // made meanwhile are written, as any line made before a switch).
        if on && self.stopped.load(Ordering::SeqCst) {
            self.on.store(false, Ordering::SeqCst);
        }
    }

    /// Stops capture for good (CAP-LIM-1): as [`Gate::set_on`]`(false)`, and no later `set_on`
    /// turns it on again.
    pub(crate) fn stop(&self) {
        self.stopped.store(true, Ordering::SeqCst);
        self.on.store(false, Ordering::SeqCst);
    }

    /// Whether [`Gate::stop`] was called.
    pub(crate) fn stopped(&self) -> bool {
        self.stopped.load(Ordering::SeqCst)
    }

    pub(crate) fn roi_begin(&self) {
        self.roi_depth.fetch_add(1, Ordering::SeqCst);
    }

    /// Returns false when no region was open.
    pub(crate) fn roi_end(&self) -> bool {
        self.roi_depth
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |d| (d > 0).then_some(d - 1))
            .is_ok()
    }

    #[inline(always)]
    fn in_region(&self, clk: u64) -> bool {
        self.in_window(clk) && (!self.roi || self.roi_depth.load(Ordering::Relaxed) > 0)
    }

    /// Whether `clk` is in the window, or in one of its repeats (CAP-WIN-2).
    #[inline(always)]
    fn in_window(&self, clk: u64) -> bool {
        // A single window's own test first: most lines outside it fail the first comparison,
        // as before there were repeats (`last` is the window's last cycle then).
        let Range { start, end } = self.window;
        clk >= start
            && clk <= self.last
            && (self.every.0 == 0 || self.every.rem(clk - start) < end - start)
    }

    /// Counts a line left out by capture.
    #[inline(always)]
    pub(crate) fn leave(&self, kind: usize) {
        left::count(self.trace_id, kind);
    }

    /// Lines left out in the emitting calls so far.
    pub(crate) fn left_out(&self) -> LeftOut {
        left::sum(self.trace_id)
    }

    /// False when a child of a captured record with bits `parent` that began at `parent_start`
    /// is left out whatever its cycle and data: capture is off, or the parent began at or after
    /// the last window's end (a child cannot begin before its parent). The builder is then inert.
    #[inline(always)]
    pub(crate) fn may_record(&self, parent_start: u64) -> bool {
        self.on() && (!self.filtering || parent_start <= self.last)
    }

    /// As [`Gate::may_record`], for a child of `record_type` that begins at `clk` (CAP-AT-1):
    /// `None` (left out) also when `clk` is at or after the window's end, or when a 1-of-N sample
    /// of its type passes it over; the sample is counted here, and `Some(true)` says so, so that
    /// the record's write does not count it again.
    #[inline(always)]
    pub(crate) fn may_record_at(
        &self,
        parent_start: u64,
        clk: u64,
        record_type: &Str,
    ) -> Option<bool> {
        match self.child_at(parent_start, clk, record_type) {
            ChildAt::Leave => None,
            ChildAt::Make { sampled } => Some(sampled),
            ChildAt::HeldByCycle => Some(false),
        }
    }

    /// [`Gate::may_record_at`], telling apart a record held by its cycle alone: a setting with
    /// no type, unit or sample clause, and `clk` before the window (or in a gap between its
    /// repeats, or outside the regions of interest). [`Gate::record`] would then say
    /// [`Verdict::Hold`] with [`bits::PASSES`] whatever the record's type and fields, so its
    /// fields can be made straight into the box it is deferred in. Asked in the same branches,
    /// so that a setting that holds nothing back pays nothing for it.
    #[inline(always)]
    pub(crate) fn child_at(&self, parent_start: u64, clk: u64, record_type: &Str) -> ChildAt {
        if !self.on() {
            return ChildAt::Leave;
        }
        if !self.filtering {
            return ChildAt::Make { sampled: false };
        }
        if self.cycles_only {
            return match parent_start <= self.last && clk <= self.last {
                false => ChildAt::Leave,
                true if self.in_region(clk) => ChildAt::Make { sampled: false },
                true => ChildAt::HeldByCycle,
            };
        }
        match self.record_at_filtered(parent_start, clk, record_type) {
            None => ChildAt::Leave,
            Some(sampled) => ChildAt::Make { sampled },
        }
    }

    #[cold]
    fn record_at_filtered(&self, parent_start: u64, clk: u64, record_type: &Str) -> Option<bool> {
        if parent_start > self.last || clk > self.last {
            return None;
        }
        match self.sample_clause(record_type) {
            Some(clause) => self.sample(clause).then_some(true),
            None => Some(false),
        }
    }

    /// False when an event named `name` on a record with bits `rec` that began at `start` is
    /// left out whatever its cycle: [`Gate::event`] would refuse it for every `clk >= start`.
    /// The builder is then inert. The window and the ROI are checked again at the event's cycle.
    #[inline(always)]
    pub(crate) fn may_event(&self, name: &Str, rec: u8, start: u64) -> bool {
        if !self.on() {
            return false;
        }
        !self.filtering
            || (rec & bits::MATCH != 0
                && start <= self.last
                && self.events.as_ref().is_none_or(|e| e.iter().any(|e| **e == **name)))
    }

    /// The verdict on a record line and the bits its handle keeps; `parent`: the parent's bits,
    /// asked only by a unit filter (a load through the parent's handle that a window alone does
    /// not need); `sampled`: the 1-of-N sample was already taken when its builder was made
    /// ([`Gate::may_record_at`]).
    #[inline(always)]
    pub(crate) fn record(
        &self,
        record_type: &Str,
        data_unit: impl FnOnce() -> Option<u64>,
        clk: u64,
        parent: impl FnOnce() -> u8,
        sampled: bool,
    ) -> (Verdict, u8) {
        if !self.on() {
            return (Verdict::Leave, bits::LEFT);
        }
        if !self.filtering {
            return (Verdict::Select, bits::PASSES);
        }
        if self.cycles_only {
            // As `record_filtered` with no type, unit or sample clause.
            return match clk {
                _ if clk > self.last => (Verdict::Leave, bits::LEFT),
                _ if self.in_region(clk) => (Verdict::Select, bits::PASSES),
                _ => (Verdict::Hold, bits::PASSES),
            };
        }
        self.record_filtered(record_type, data_unit, clk, parent, sampled)
    }

    #[cold]
    fn record_filtered(
        &self,
        record_type: &Str,
        unit: impl FnOnce() -> Option<u64>,
        clk: u64,
        parent: impl FnOnce() -> u8,
        sampled: bool,
    ) -> (Verdict, u8) {
        if clk > self.last {
            // Nothing under it can be in the window either (children start at or after it).
            return (Verdict::Leave, bits::LEFT);
        }
        if let Some(clause) = self.sample_clause(record_type).filter(|_| !sampled) {
            if !self.sample(clause) {
                return (Verdict::Leave, bits::LEFT);
            }
        }
        // The unit is looked up among the fields only when a unit filter asks for it.
        let unit_ok = match (&self.units, self.units.as_ref().and_then(|_| unit())) {
            (None, _) => true,
            (Some(units), Some(u)) => units.contains(&u),
            (Some(_), None) => parent() & bits::UNIT != 0,
        };
        let type_ok = self.types.as_ref().is_none_or(|t| t.iter().any(|t| **t == **record_type));
        let mut b = 0;
        if unit_ok {
            b |= bits::UNIT;
        }
        if unit_ok && type_ok {
            b |= bits::MATCH;
        }
        let verdict = if b & bits::MATCH != 0 && self.in_region(clk) {
            Verdict::Select
        } else {
            Verdict::Hold
        };
        (verdict, b)
    }

    /// Deterministic 1-of-N per record_type, counted per emitting thread (CAP-SAMPLE-1): the 1st,
    /// (N+1)th, (2N+1)th... record of the type begun on a thread are kept.
    fn sample(&self, clause: usize) -> bool {
        let n = self.samples[clause].1;
        SAMPLED
            .try_with(|s| {
                let mut s = s.borrow_mut();
                let i = match s.iter().position(|&(t, c, _)| t == self.trace_id && c == clause) {
                    Some(i) => i,
                    None => {
                        s.push((self.trace_id, clause, 0));
                        s.len() - 1
                    }
                };
                let seen = s[i].2;
                s[i].2 += 1;
                seen % n == 0
            })
            .unwrap_or(true)
    }

    /// The `sample=` clause for `record_type`, if any.
    #[inline]
    fn sample_clause(&self, record_type: &str) -> Option<usize> {
        if self.samples.is_empty() {
            return None;
        }
        self.samples.iter().position(|(t, _)| t == record_type)
    }

    /// Whether an event on a record with bits `rec` is written.
    #[inline(always)]
    pub(crate) fn event(&self, name: &Str, clk: u64, rec: u8) -> bool {
        if !self.on() {
            return false;
        }
        if !self.filtering {
            return true;
        }
        rec & bits::MATCH != 0
            && self.in_region(clk)
            && self.events.as_ref().is_none_or(|e| e.iter().any(|e| **e == **name))
    }

    /// Whether an annotation on a record with bits `rec` is queued (the writer then keeps it
    /// with its record: CAP-ANN-1).
    #[inline(always)]
    pub(crate) fn annotation(&self, rec: u8) -> bool {
        self.on() && (!self.filtering || rec & bits::MATCH != 0)
    }
}

/// Left-out counts: per thread and trace, so that counting a line is a plain increment of
/// memory only this thread writes (no locked instruction, no shared cache line), and summed on
/// demand. Keyed by trace id rather than by the gate, so that a handle left out by capture can
/// count what is made through it without holding the trace (no reference count to touch).
pub(crate) mod left {
    use std::cell::{Cell, RefCell};
    use std::mem::ManuallyDrop;
    use std::ops::{Deref, DerefMut};
    use std::sync::atomic::{compiler_fence, AtomicU64, Ordering};
    use std::sync::{Arc, Mutex, MutexGuard};

    use super::super::LeftOut;
    use super::{ANNOTATION, END, EVENT, RECORD};
    use crate::fork::HeldAcrossFork;

    /// One thread's counts for one trace, per line kind. Written only by that thread (an
    /// unlocked increment, [`Counts::bump`]), except `shared` ones, which use `fetch_add`; read
    /// atomically by the sum on any thread.
    struct Counts {
        trace: u64,
        kinds: [AtomicU64; 4],
    }

    impl Counts {
        const fn new(trace: u64) -> Counts {
            Counts { trace, kinds: [const { AtomicU64::new(0) }; 4] }
        }

        #[inline(always)]
        fn bump(&self, kind: usize, by: u64) {
            let c = &self.kinds[kind];
            #[cfg(all(target_arch = "x86_64", not(miri)))]
            // SAFETY: one aligned 8-byte add to memory this thread alone writes (other threads
            // only load it, atomically: an aligned store is).
            unsafe {
                // A count of one (every line left out) adds an immediate: no register to load.
                if by == 1 {
                    std::arch::asm!("add qword ptr [{c}], 1", c = in(reg) c.as_ptr(),
                        options(nostack));
                } else {
                    std::arch::asm!("add qword ptr [{c}], {by}", c = in(reg) c.as_ptr(),
                        by = in(reg) by, options(nostack));
                }
            }
            #[cfg(not(all(target_arch = "x86_64", not(miri))))]
            c.store(c.load(Ordering::Relaxed).wrapping_add(by), Ordering::Relaxed);
        }
    }

    /// [`Counts::bump`] is one instruction, so a signal handler on this thread that counts too
    /// runs before or after it, never between a load and a store of the same counter: then no
    /// count needs [`Local::counting`].
    const BUMP_IS_ONE_INSTRUCTION: bool = cfg!(all(target_arch = "x86_64", not(miri)));

    /// What [`Local::last`] points at before this thread's first count: no trace has id 0, so
    /// the fast path needs no null test.
    static NONE_YET: Counts = Counts::new(0);

    /// One open trace's counters: its id, the per-thread ones, and one shared by threads that
    /// cannot use their own (thread-local storage torn down, or a count nested in another).
    type Entry = (u64, Vec<Arc<Counts>>, Counts);

    /// Every open trace's counters. A vector (few traces are open at once) rather than a hash
    /// map: it points at the start of its allocation, so leak checkers (valgrind) see it as
    /// reachable, not "possibly lost".
    static REGISTRY: Mutex<Vec<Entry>> = Mutex::new(Vec::new());

    /// This thread's counters, one per trace it counted for.
    struct Here(RefCell<Vec<Arc<Counts>>>);

    impl Drop for Here {
        fn drop(&mut self) {
            // The counters go with this thread: the shortcut must not outlive them.
            let _ = LOCAL.try_with(|l| l.last.set(&raw const NONE_YET));
        }
    }

    /// What a count reads on its fast path, in one thread-local (one address to compute).
    struct Local {
        /// Set while this thread counts, where an increment is a load and a store
        /// ([`BUMP_IS_ONE_INSTRUCTION`] is false): a count nested in it (a signal handler that
        /// emits) goes to the trace's shared counter, since it would fall between them.
        counting: Cell<bool>,
        /// The counters this thread counted into last ([`NONE_YET`] before its first count),
        /// held alive by [`HERE`] ([`join`] never frees the ones it points at): a count for the
        /// same trace is a load, a compare and an increment, with no lookup.
        last: Cell<*const Counts>,
        /// Set while this thread holds [`REGISTRY`] (from just before it locks it until just
        /// after it unlocks it): a count nested in that (a signal handler that emits) must not
        /// wait for the lock, which the interrupted code cannot release, and goes to [`nested`].
        holding: Cell<bool>,
    }

    thread_local! {
        static HERE: Here = const { Here(RefCell::new(Vec::new())) };
        static LOCAL: Local = const {
            Local {
                counting: Cell::new(false),
                last: Cell::new(&raw const NONE_YET),
                holding: Cell::new(false),
            }
        };
    }

    /// [`REGISTRY`], locked by this thread (see [`Local::holding`]).
    struct Locked(ManuallyDrop<MutexGuard<'static, Vec<Entry>>>);

    impl Deref for Locked {
        type Target = Vec<Entry>;
        fn deref(&self) -> &Vec<Entry> {
            &self.0
        }
    }

    impl DerefMut for Locked {
        fn deref_mut(&mut self) -> &mut Vec<Entry> {
            &mut self.0
        }
    }

    impl Drop for Locked {
        fn drop(&mut self) {
            // SAFETY: dropped once, here; the flag is cleared only once the lock is released.
            unsafe { ManuallyDrop::drop(&mut self.0) };
            let _ = LOCAL.try_with(|l| l.holding.set(false));
        }
    }

    /// Locks the registry. Not from inside a count nested in code that holds it: see
    /// [`holding`].
    fn registry() -> Locked {
        let _ = LOCAL.try_with(|l| l.holding.set(true));
        Locked(ManuallyDrop::new(REGISTRY.lock().unwrap_or_else(|p| p.into_inner())))
    }

    /// True while this thread holds the registry, or is about to: a count then cannot take it.
    fn holding() -> bool {
        LOCAL.try_with(|l| l.holding.get()).unwrap_or(false)
    }

    fn entry(registry: &mut [Entry], trace: u64) -> Option<&mut Entry> {
        registry.iter_mut().find(|(t, _, _)| *t == trace)
    }

    /// The guard of [`REGISTRY`] held across a `fork`.
    static HELD: HeldAcrossFork<Locked> = HeldAcrossFork::new();

    /// Before a `fork`: takes the registry's lock (see [`crate::fork`]).
    pub(crate) fn hold_for_fork() {
        HELD.hold(registry());
    }

    /// After a `fork`, in the parent and in the child: releases what [`hold_for_fork`] took.
    pub(crate) fn release_after_fork() {
        HELD.release();
    }

    /// A trace opens: its counts start at zero.
    pub(crate) fn register(trace: u64) {
        registry().push((trace, Vec::new(), Counts::new(trace)));
    }

    /// The trace's gate is gone: nobody reads its counts any more.
    pub(crate) fn forget(trace: u64) {
        registry().retain(|(t, _, _)| *t != trace);
    }

    /// Counts one line of `kind` left out of `trace` by capture.
    #[inline(always)]
    pub(crate) fn count(trace: u64, kind: usize) {
        add(trace, kind, 1);
    }

    /// Takes back a count: a deferred record, counted as left out, was pushed after all
    /// (CAP-DEFER-1). A thread's counters may go below zero; their sum cannot.
    #[cold]
    pub(crate) fn uncount(trace: u64, kind: usize) {
        add(trace, kind, 1u64.wrapping_neg());
    }

    /// Adds `by` (wrapping) to a count of `kind` for `trace`.
    #[inline(always)]
    fn add(trace: u64, kind: usize, by: u64) {
        if !cfg!(feature = "enabled") {
            return;
        }
        // SAFETY: `LOCAL` has no destructor, so it lives as long as this thread (a closure
        // with the whole count in it is not inlined: the count would cost a call).
        let l = unsafe { &*LOCAL.with(|l| l as *const Local) };
        if BUMP_IS_ONE_INSTRUCTION {
            // A count nested in this one (a signal handler) finds `last` pointing at counters
            // that `HERE` holds, before or after this count changes it; `join` keeps the ones it
            // points at, and a nested first count that finds `HERE` borrowed counts elsewhere.
            // SAFETY: `last` points at `NONE_YET` or at counters that `HERE` holds.
            let c = unsafe { &*l.last.get() };
            return match c.trace == trace {
                true => c.bump(kind, by),
                false => count_here(l, trace, kind, by),
            };
        }
        if l.counting.get() {
            return count_shared(trace, kind, by);
        }
        l.counting.set(true);
        // The flag is set before the counter is read and cleared after it is written, as a
        // signal handler on this thread sees them (no cost at run time).
        compiler_fence(Ordering::SeqCst);
        // SAFETY: `last` points at `NONE_YET` or at counters that `HERE` holds.
        let c = unsafe { &*l.last.get() };
        if c.trace == trace {
            c.bump(kind, by);
        } else {
            count_here(l, trace, kind, by);
        }
        compiler_fence(Ordering::SeqCst);
        l.counting.set(false);
    }

    /// Runs `f` as if inside a count (for the nested-count test).
    #[cfg(test)]
    pub(super) fn nested(f: impl FnOnce()) {
        LOCAL.with(|l| l.counting.set(true));
        f();
        LOCAL.with(|l| l.counting.set(false));
    }

    /// Runs `f` while this thread holds the registry (for the nested-count test).
    #[cfg(test)]
    pub(super) fn holding_registry(f: impl FnOnce()) {
        let _locked = registry();
        f();
    }

    /// A count for another trace than the last one: looks its counters up (or makes them), and
    /// makes them the last ones.
    #[cold]
    fn count_here(local: &Local, trace: u64, kind: usize, by: u64) {
        if local.holding.get() {
            // Nested in code that holds the registry, which a first count would lock.
            return nested::add(trace, kind, by);
        }
        let counted = HERE.try_with(|here| {
            let Ok(mut here) = here.0.try_borrow_mut() else { return false };
            let counts = match here.iter().position(|c| c.trace == trace) {
                Some(i) => &here[i],
                None => match join(&mut here, local, trace) {
                    Some(c) => c,
                    None => return true, // the trace is gone: nobody will read the count
                },
            };
            counts.bump(kind, by);
            local.last.set(Arc::as_ptr(counts));
            true
        });
        if counted != Ok(true) {
            count_shared(trace, kind, by);
        }
    }

    /// This thread's first count for `trace`. Also forgets counters of traces that are gone
    /// (but the ones [`Local::last`] points at).
    fn join<'a>(
        here: &'a mut Vec<Arc<Counts>>,
        local: &Local,
        trace: u64,
    ) -> Option<&'a Arc<Counts>> {
        let mut registry = registry();
        let (_, threads, _) = entry(&mut registry, trace)?;
        let counts = Arc::new(Counts::new(trace));
        threads.push(Arc::clone(&counts));
        drop(registry);
        let last = local.last.get();
        here.retain(|c| Arc::strong_count(c) > 1 || Arc::as_ptr(c) == last);
        here.push(counts);
        here.last()
    }

    #[cold]
    fn count_shared(trace: u64, kind: usize, by: u64) {
        if holding() {
            return nested::add(trace, kind, by);
        }
        if let Some((_, _, shared)) = entry(&mut registry(), trace) {
            shared.kinds[kind].fetch_add(by, Ordering::Relaxed);
        }
    }

    /// Counts made while their thread holds the registry (a signal handler that emits,
    /// interrupting code that holds it): they cannot wait for the lock, so they go to slots
    /// claimed by trace id with a compare-and-swap. A slot is claimed for good (trace ids are
    /// never reused), so a count never lands in another trace's slot; should every slot be
    /// claimed, which takes that many traces each counting in such a handler, the count is lost
    /// and said so on standard error.
    mod nested {
        use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

        struct Slot {
            trace: AtomicU64,
            kinds: [AtomicU64; 4],
        }

        const SLOTS: usize = 32;
        static TAKEN: [Slot; SLOTS] =
            [const { Slot { trace: AtomicU64::new(0), kinds: [const { AtomicU64::new(0) }; 4] } };
                SLOTS];

        pub(super) fn add(trace: u64, kind: usize, by: u64) {
            for slot in &TAKEN {
                let claimed = match slot.trace.load(Ordering::Acquire) {
                    0 => match slot.trace.compare_exchange(
                        0,
                        trace,
                        Ordering::AcqRel,
                        Ordering::Acquire,
                    ) {
                        Ok(_) => true,
                        Err(t) => t == trace,
                    },
                    t => t == trace,
                };
                if claimed {
                    slot.kinds[kind].fetch_add(by, Ordering::Relaxed);
                    return;
                }
            }
            static SAID: AtomicBool = AtomicBool::new(false);
            if !SAID.swap(true, Ordering::Relaxed) {
                say_lost();
            }
        }

        /// Says once that a count was lost; a plain `write(2)`, as this may run in a signal
        /// handler.
        #[cold]
        fn say_lost() {
            const TEXT: &[u8] = b"jets: a left-out line could not be counted (counted in a signal \
                handler, where every slot for such counts is taken): the footer's left_out counts \
                may be short\n";
            // SAFETY: writes a static buffer to standard error.
            #[cfg(unix)]
            unsafe {
                libc::write(2, TEXT.as_ptr().cast(), TEXT.len())
            };
            #[cfg(not(unix))]
            eprint!("{}", String::from_utf8_lossy(TEXT));
        }

        /// The nested counts of `trace`, per line kind.
        pub(super) fn sum(trace: u64, kind: usize) -> u64 {
            TAKEN
                .iter()
                .filter(|s| s.trace.load(Ordering::Acquire) == trace)
                .map(|s| s.kinds[kind].load(Ordering::Relaxed))
                .fold(0, u64::wrapping_add)
        }
    }

    /// The counts of `trace` so far.
    pub(crate) fn sum(trace: u64) -> LeftOut {
        let mut registry = registry();
        let Some((_, threads, shared)) = entry(&mut registry, trace) else {
            return LeftOut::default();
        };
        let sum = |k: usize| {
            let counts = threads.iter().map(|c| c.kinds[k].load(Ordering::Relaxed));
            let here = counts.fold(shared.kinds[k].load(Ordering::Relaxed), u64::wrapping_add);
            here.wrapping_add(nested::sum(trace, k))
        };
        LeftOut {
            records: sum(RECORD),
            events: sum(EVENT),
            annotations: sum(ANNOTATION),
            record_ends: sum(END),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{left, Period};
    use proptest::prelude::*;

    proptest! {
        /// The remainder without a division is the remainder, for any period and any cycle,
        /// the largest ones included.
        #[test]
        fn a_periods_remainder_is_the_remainder(
            p in prop_oneof![2..1000u64, any::<u64>(), (u64::MAX - 3)..=u64::MAX],
            x in prop_oneof![any::<u64>(), 0..10_000u64, (u64::MAX - 3)..=u64::MAX],
        ) {
            prop_assume!(p >= 2);
            prop_assert_eq!(Period::new(p).rem(x), x % p);
        }
    }

    /// A record held in a gap refuses its events until the next window; one held in a window,
    /// none (its events there are the gate's to judge).
    #[test]
    fn a_record_held_in_a_gap_refuses_its_events_until_the_next_window() {
        let gate = |text: &str, id| super::Gate::new(&text.parse().unwrap(), id);
        let repeated = gate("clk=10..20;every=100", u64::MAX - 11);
        let at: Vec<u64> =
            [0, 9, 10, 19, 20, 109, 110, 119, 120].map(|c| repeated.refuse_below_at(c)).into();
        assert_eq!(at, [10, 10, 10, 10, 110, 110, 110, 110, 210]);
        let once = gate("clk=10..20", u64::MAX - 12);
        assert_eq!([0, 15, 500].map(|c| once.refuse_below_at(c)), [10, 10, 10]);
        let everything = gate("", u64::MAX - 13);
        assert_eq!(everything.refuse_below_at(500), 0);
    }

    #[test]
    fn a_periods_remainder_at_the_edges() {
        for p in [2u64, 3, 7, 1 << 32, (1 << 63) + 1, u64::MAX] {
            for x in [0, 1, p - 1, p, p.wrapping_add(1), u64::MAX, u64::MAX - 1, u64::MAX / p * p] {
                assert_eq!(Period::new(p).rem(x), x % p, "{x} % {p}");
            }
        }
    }

    /// Counts on one thread, with one count nested in another (as a signal handler that emits
    /// would make), all add up: the nested one goes to the shared counter.
    #[test]
    fn left_out_counts_add_up_with_a_nested_count() {
        let trace = u64::MAX - 7; // an id no trace of this test process uses
        left::register(trace);
        left::count(trace, super::EVENT);
        left::count(trace, super::EVENT); // through the one-word shortcut
        left::nested(|| left::count(trace, super::EVENT));
        left::count(trace, super::RECORD);
        let sum = left::sum(trace);
        assert_eq!((sum.events, sum.records), (3, 1));
        left::forget(trace);
    }

    /// A count made while its thread holds the counters' registry (a signal handler that emits,
    /// interrupting a first count, a sum or a trace's opening) does not wait for the lock the
    /// interrupted code cannot release (this test would hang), and is still counted.
    #[test]
    fn a_count_nested_in_code_holding_the_registry_is_counted_without_waiting() {
        let trace = u64::MAX - 9;
        left::register(trace);
        left::holding_registry(|| {
            left::count(trace, super::EVENT); // a first count on this thread
            left::nested(|| left::count(trace, super::END)); // nested in a count
        });
        left::count(trace, super::EVENT);
        let sum = left::sum(trace);
        assert_eq!((sum.events, sum.record_ends), (2, 1));
        left::forget(trace);
    }
}
