//! Record handles and the builders for records, events and annotations.
//!
//! Each builder holds the queued [`Line`] it will push, filled in place by the chained calls, so
//! emitting moves the line exactly once: into the thread's ring.
//!
//! Capture control is asked when a builder is made (`root`, `child`, `event`, `annotation`): a
//! builder whose line will certainly be left out (capture off, a record left out or dropped above
//! it, a filter that refuses it whatever its cycle) is *inert*. It holds no line, its chained
//! calls do nothing (no conversion, no formatting, no allocation: a branch each), and its final
//! call only counts the line as left out. A record handle left out by capture holds no reference
//! to the trace either, so making and ending one touches no shared reference count. Decisions
//! that need the line's cycle or data (a window's start, ROI, unit filters, sampling) are taken
//! when it is written, as before.
//!
//! A record capture *holds* (it may become the ancestor of a captured line: it began before the
//! window, outside the regions of interest, or fails a filter its descendants may pass) is
//! *deferred* (CAP-DEFER-1): its line stays in the builder's box, in the handle, and is pushed
//! (held, for the writer to decide) only when a line is made under it. Most held records end
//! before anything under them is captured: then they cost no push and no work in the writer.

use std::cell::{Cell, UnsafeCell};
use std::mem::{ManuallyDrop, MaybeUninit};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering};
use std::sync::Arc;

use super::kids::{self, Kids};
use super::lease::{self, Lease};
use super::line::{self, Kind, Line, Plain, PlainFields, PlainRecord};
use super::ring::{self, Pos};
use super::{Inner, Policy, DROP_ANNOTATION, DROP_END, DROP_EVENT, DROP_RECORD};
use crate::capture::gate::{self, bits, ChildAt, Verdict};
use crate::error::Error;
use crate::format::{Color, Data, DataRef, Field, MarkerStyle, Severity, Status, Str, Value};

/// A record that has begun: the only way to add children, events, annotations, and to end it.
///
/// `Send + Sync`: share it by reference (or in an `Arc`) with other threads, which may add children
/// and events concurrently. [`RecordHandle::end_at`] consumes the handle, so a record ends once.
/// Dropping a handle without ending it leaves the record open, which the spec allows; the footer
/// counts open records.
pub struct RecordHandle {
    /// The record's [`Node`], or, for a record left out by capture, the trace's id shifted left
    /// by one with [`LEFT_TAG`] set: such a record needs nothing but the id its lines are
    /// counted by, so making, moving and ending it touches no memory but the handle's two words.
    /// Owned like a `Box` (see [`nodes`]).
    word: NonNull<Node>,
    start: u64,
}

/// What a record written (or held, or dropped by the policy) keeps while it is open, in a box
/// from this thread's pool ([`nodes`]), or, for a deferred record, in the box of its line
/// ([`EMBEDDED`]): the handle itself stays two words, which a simulator moves through its own
/// structures (pipeline latches, queues) many times per record.
struct Node {
    /// The trace, kept alive by `lease` (a count this thread holds for all the nodes it made
    /// there), or by a count of this node's own when `lease` is `None`.
    inner: ManuallyDrop<Arc<Inner>>,
    lease: Option<NonNull<Lease>>,
    /// `inner`'s shared state, which `inner` keeps alive: one load less on every line made
    /// through the handle (capture's checks read the gate there).
    shared: NonNull<super::Shared>,
    /// The record's id, or 0 for a deferred record until its line is queued or [`RecordHandle::id`]
    /// is asked (most deferred records never need one: no locked instruction for them).
    id: AtomicU64,
    /// Where the record line was queued: lines pushed through this handle on another thread
    /// wait for it. Read through [`Node::pushed`]: a deferred record's is written once, by the
    /// thread that pushes its line, before [`Node::flags`] says [`PUSHED`].
    pos: UnsafeCell<Pos>,
    /// In one word, of which only the state changes after the node is made:
    /// * the state ([`STATE`] bits): [`PUSHED`], or that of a deferred record's line;
    /// * capture control's bits for lines made through this handle (`capture::gate::bits`),
    ///   shifted by [`CAP_SHIFT`];
    /// * [`LIVE`], unless the drop policy dropped this record's line: then everything hanging
    ///   off it is dropped (and counted) too, so no line can refer to a record missing from the
    ///   file.
    flags: AtomicU64,
    /// Lines under the record at a cycle before this one are left out whatever their name: the
    /// capture window's start ([`crate::capture::gate::Gate::refuse_below`]), or for a record
    /// deferred in a gap of a repeated window, the next window's
    /// ([`crate::capture::gate::Gate::refuse_below_at`]). Read by `event_at` before the gate, so
    /// that the events of a record deferred before a window, most of the lines there, are
    /// refused from the node alone.
    refuse_below: u64,
    /// The trace's id, which keys the left-out counters: a copy, read on every line a capture
    /// window leaves out under a deferred record.
    trace_id: u64,
    /// The count of the records deferred under this one (CAP-DEFER-2), made with the first:
    /// null for most records.
    kids: AtomicPtr<Kids>,
    /// For a deferred record, the count of its parent's it is counted in, given back when the
    /// node is freed.
    counted_in: Option<NonNull<Kids>>,
}

// SAFETY: `shared` points into `inner` (an `Arc`, `Send + Sync`), which the node keeps alive; the
// rest is plain data and atomics. A node moves between threads inside a line's box (`Slot`) or a
// handle (see `Send for RecordHandle`).
unsafe impl Send for Node {}

/// Bit 0 of [`RecordHandle::word`]: the record was left out by capture (a node's address is
/// aligned, so its bit 0 is clear).
const LEFT_TAG: usize = 1;

impl Drop for RecordHandle {
    /// Gives the node back; a deferred record dropped without an end gives its line back to the
    /// pool too (it was counted as left out when it was deferred).
    #[inline(always)]
    fn drop(&mut self) {
        if self.node().is_some() {
            // SAFETY: the handle owns its node and is not used again.
            unsafe { nodes::free(self.word) };
        }
    }
}

// SAFETY: the handle owns its node as a `Box` would, and everything in a node may move between
// threads (`Arc<Inner>`, a line's box).
unsafe impl Send for RecordHandle {}

// SAFETY: a node's `pos` and a deferred record's line (in the node's box, `EMBEDDED`) are the only
// parts shared without synchronization of their own. The line is touched only by the thread that
// won the state's move from DEFERRED to PUSHING, or through ownership of the handle; `pos` is
// written by that same thread before it publishes PUSHED (release) and read only after PUSHED was
// seen (acquire).
unsafe impl Sync for RecordHandle {}

const _: () = {
    fn send_and_sync<T: Send + Sync>() {}
    fn send<T: Send>() {}
    let _ = send_and_sync::<Arc<Inner>>;
    let _ = send::<Box<Slot>>;
};

/// The state's bits in [`Node::flags`].
const STATE: u64 = 0xff;
/// The record line is in its ring (every handle but a deferred one).
const PUSHED: u64 = 0;
/// A deferred record: its line is in the handle (CAP-DEFER-1).
const DEFERRED: u64 = 1;
/// A thread is pushing the deferred line: the others wait for it.
const PUSHING: u64 = 2;
/// Pushing the deferred line found the trace closed: nothing more is written under it.
const CLOSED: u64 = 3;
/// Where capture's bits are in [`Node::flags`].
const CAP_SHIFT: u64 = 8;
/// The record's lines are written ([`Node::flags`]).
const LIVE: u64 = 1 << 16;
/// The node is in the box of its record's line ([`Slot::node`]): a deferred record's, whose line
/// stays beside it until pushed, taken by the one thread that moves the state from [`DEFERRED`]
/// to [`PUSHING`], or dropped by `end`/`drop`, which own the handle ([`Node::flags`]).
const EMBEDDED: u64 = 1 << 17;

thread_local! {
    /// Set while this thread pushes a deferred line: a signal handler on it that emits under the
    /// same record must not wait for that push, which cannot go on until the handler returns.
    static PUSHING_DEFERRED: Cell<bool> = const { Cell::new(false) };
}

impl std::fmt::Debug for RecordHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecordHandle")
            .field("id", &self.id())
            .field("start", &self.start)
            .field("live", &self.live())
            .finish()
    }
}

impl RecordHandle {
    /// The record's id (unique in the trace, allocated by the SDK, starting at 1).
    pub fn id(&self) -> u64 {
        self.node().map_or(0, Node::id)
    }

    /// The record's node, unless capture left it out.
    #[inline(always)]
    fn node(&self) -> Option<&Node> {
        if self.word.as_ptr().addr() & LEFT_TAG != 0 {
            return None;
        }
        // SAFETY: an untagged word is the handle's own live node (see the field).
        Some(unsafe { self.word.as_ref() })
    }

    /// The trace's id (keys the left-out counters).
    #[inline(always)]
    fn trace_id(&self) -> u64 {
        match self.node() {
            Some(n) => n.trace_id,
            None => left_trace_id(self.word),
        }
    }

    /// The cycle at which the record began.
    pub fn start_clk(&self) -> u64 {
        self.start
    }

    /// False when the record was dropped by [`super::Policy::Drop`] or left out by capture
    /// control (and so is everything on it). True does not promise the line reaches the file: a
    /// record may be held as a possible ancestor, or kept by a flight recorder.
    pub fn is_recorded(&self) -> bool {
        self.live()
    }

    /// True when capture control left the record out as it began (capture off, past a window,
    /// a sample passing over it, a record left out above it): nothing on it is written, and
    /// everything on it is counted as left out. Such a handle holds nothing but its trace's
    /// id, so a binding may stand for all of them by one handle ([`Trace::left_out_record`]).
    ///
    /// ```
    /// let trace = jets::Trace::to_writer(std::io::sink(), jets::Metadata::new()).unwrap();
    /// trace.capture_off();
    /// let core = trace.root("core", "Core").begin_at(0).unwrap();
    /// assert!(core.is_left_out() && !core.is_recorded());
    /// ```
    ///
    /// [`Trace::left_out_record`]: super::Trace::left_out_record
    pub fn is_left_out(&self) -> bool {
        self.node().is_none()
    }

    /// A handle of a record capture left out, of the trace `trace_id` names (see
    /// [`super::Trace::left_out_record`]).
    pub(super) fn left_out_of(trace_id: u64) -> RecordHandle {
        left_out(trace_id, 0)
    }

    /// The node's flags, or those of a record left out by capture: not live, and capture's
    /// "left out" bit for everything under it.
    #[inline(always)]
    fn flags(&self) -> u64 {
        self.node().map_or(LEFT_OUT, |n| n.flags.load(Ordering::Relaxed))
    }

    /// See [`LIVE`].
    #[inline(always)]
    fn live(&self) -> bool {
        self.flags() & LIVE != 0
    }

    /// Capture control's bits for lines made through this handle.
    #[inline(always)]
    fn cap(&self) -> u8 {
        (self.flags() >> CAP_SHIFT) as u8
    }

    /// The node of a record whose lines are written, and capture's bits for lines made through
    /// it, from one load of the flags (an atomic load is made as often as it is written, even
    /// when relaxed).
    #[inline(always)]
    fn live_node_cap(&self) -> Option<(&Node, u8)> {
        let n = self.node()?;
        let flags = n.flags.load(Ordering::Relaxed);
        (flags & LIVE != 0).then_some((n, (flags >> CAP_SHIFT) as u8))
    }

    /// Starts describing a child record.
    #[inline(always)]
    pub fn child(&self, name: impl Into<Str>, record_type: impl Into<Str>) -> RecordBuilder<'_> {
        self.child_made(None, name, record_type)
    }

    /// Starts describing a child record that begins at `clk`, written by
    /// [`RecordBuilder::begin`]. Capture control judges the cycle now, so a record that begins
    /// after a capture window costs no building: use this form in a simulator's hot path.
    ///
    /// ```
    /// # let trace = jets::Trace::to_writer(std::io::sink(), jets::Metadata::new()).unwrap();
    /// let core = trace.root("core0", "Core").begin_at(0).unwrap();
    /// let insn = core.child_at(12, "addi", "Instruction").field("pc", 0x40u64).begin().unwrap();
    /// assert_eq!(insn.start_clk(), 12);
    /// # insn.end_at(13).unwrap();
    /// ```
    #[inline(always)]
    pub fn child_at(
        &self,
        clk: u64,
        name: impl Into<Str>,
        record_type: impl Into<Str>,
    ) -> RecordBuilder<'_> {
        self.child_made(Some(clk), name, record_type)
    }

    #[inline(always)]
    fn child_made(
        &self,
        at: Option<u64>,
        name: impl Into<Str>,
        record_type: impl Into<Str>,
    ) -> RecordBuilder<'_> {
        let node = self.node();
        let inner = node.map(|n| &*n.inner);
        let mut b =
            RecordBuilder { inner, parent: Some(self), p: Pending::inert(), at, sampled: false };
        let Some(n) = node.filter(|n| n.flags.load(Ordering::Relaxed) & LIVE != 0) else {
            return b;
        };
        let record_type = record_type.into();
        let made = match at {
            Some(clk) => n.shared().gate.may_record_at(self.start, clk, &record_type),
            None => n.shared().gate.may_record(self.start).then_some(false),
        };
        if let Some(sampled) = made {
            b.sampled = sampled;
            b.p = Pending::under(n, self.word, Kind::Record, name.into());
            if let Some(line) = b.p.line() {
                line.parent = Some(n.raw_id());
                // SAFETY: a new line's record type is the static empty text (`Line::init`),
                // which needs no drop. Not `=`: see `store_str`.
                unsafe { line::store_str(&mut line.record_type, record_type) };
            }
        }
        b
    }

    /// Starts describing an event on this record.
    #[inline(always)]
    pub fn event(&self, name: impl Into<Str>) -> EventBuilder<'_> {
        let mut b = EventBuilder { record: self, p: Pending::inert(), at: None };
        if let Some((n, cap)) = self.live_node_cap() {
            let name = name.into();
            if n.shared().gate.may_event(&name, cap, self.start) {
                b.p = Pending::under(n, self.word, Kind::Event, name);
            }
        }
        b
    }

    /// Starts describing an event at `clk` on this record, written by [`EventBuilder::emit`].
    /// Capture control judges the event now, with its cycle, so one left out (outside a window,
    /// outside the regions of interest) costs no building: use this form in a simulator's hot
    /// path.
    ///
    /// ```
    /// # let trace = jets::Trace::to_writer(std::io::sink(), jets::Metadata::new()).unwrap();
    /// let insn = trace.root("addi", "Instruction").begin_at(10).unwrap();
    /// insn.event_at(11, "ID").field("rs1", 3u64).emit().unwrap();
    /// # insn.end_at(12).unwrap();
    /// ```
    #[inline(always)]
    pub fn event_at(&self, clk: u64, name: impl Into<Str>) -> EventBuilder<'_> {
        let mut b = EventBuilder { record: self, p: Pending::inert(), at: Some(clk) };
        if let Some((n, cap)) = self.live_node_cap() {
            // Before a window: refused by the cycle alone (CAP-AT-1).
            if clk >= self.start && clk < n.refuse_below {
                return b;
            }
            let name = name.into();
            // A cycle before the record's start is an error at `emit`; the line is made so that
            // the error does not depend on capture.
            if clk < self.start || n.shared().gate.event(&name, clk, cap) {
                b.p = Pending::under(n, self.word, Kind::Event, name);
            }
        }
        b
    }

    /// Writes an event at `clk` with no data and an empty description: the line
    /// `event_at(clk, name).emit()` writes, made without a builder, which makes it the cheapest
    /// line to write (a pipeline's stage changes are mostly such events). Capture control judges
    /// it as it judges [`RecordHandle::event_at`]'s.
    ///
    /// ```
    /// # let trace = jets::Trace::to_writer(std::io::sink(), jets::Metadata::new()).unwrap();
    /// let insn = trace.root("addi", "Instruction").begin_at(10).unwrap();
    /// insn.emit_event_at(10, "IF").unwrap();
    /// insn.emit_event_at(11, "ID").unwrap();
    /// // writes {"clk":11,"type":"event","name":"ID","record_id":1,"description":""}
    /// # insn.end_at(12).unwrap();
    /// ```
    #[inline(always)]
    pub fn emit_event_at(&self, clk: u64, name: impl Into<Str>) -> Result<(), Error> {
        self.emit_plain_event(clk, name, ())
    }

    /// Writes an event at `clk` with the typed data fields `fields` and an empty description:
    /// the line `event_at(clk, name).field(k1, v1).field(k2, v2).emit()` writes, made without a
    /// builder, as [`RecordHandle::emit_event_at`] makes one with no data. For an event on a
    /// simulator's hot path whose fields are known at the call (an address, a value, a stage's
    /// operands); the builder remains the way to add fields one by one, a description, hints
    /// that need checking, JSON data, or more than [`Data::INLINE`] (8) fields, which this call
    /// refuses at compile time. Capture control judges it as it judges
    /// [`RecordHandle::event_at`]'s, so a left-out event costs no more than the array.
    ///
    /// ```
    /// # let trace = jets::Trace::to_writer(std::io::sink(), jets::Metadata::new()).unwrap();
    /// let insn = trace.root("lw", "Instruction").begin_at(10).unwrap();
    /// let addr: u64 = 0x1000;
    /// insn.emit_event_fields_at(12, "MEM", [("addr", addr.into()), ("hit", true.into())]).unwrap();
    /// // writes {"clk":12,"type":"event","name":"MEM","record_id":1,"description":"",
    /// //         "data":{"addr":4096,"hit":true}}
    /// # insn.end_at(13).unwrap();
    /// ```
    ///
    /// Nine fields do not compile (E0080, "emit_event_fields_at takes at most 8 fields"):
    ///
    /// ```compile_fail,E0080
    /// # let trace = jets::Trace::to_writer(std::io::sink(), jets::Metadata::new()).unwrap();
    /// # let insn = trace.root("lw", "Instruction").begin_at(10).unwrap();
    /// let nine: [_; 9] = std::array::from_fn(|_| ("k", 1u64.into()));
    /// insn.emit_event_fields_at(12, "MEM", nine).unwrap();
    /// ```
    #[inline(always)]
    pub fn emit_event_fields_at<const N: usize>(
        &self,
        clk: u64,
        name: impl Into<Str>,
        fields: [Field; N],
    ) -> Result<(), Error> {
        const {
            assert!(
                N <= Data::INLINE,
                "emit_event_fields_at takes at most 8 fields (Data::INLINE): use the builder"
            )
        };
        // Wrapped first, before any path that could drop the array: then the array the caller
        // made is only ever moved here, and the compiler stores its fields straight into the
        // wrapper (which the line then points at) rather than making them apart and copying them
        // over with 16-byte loads (see `line::put`).
        self.emit_plain_event(clk, name, line::ArrayFields::new(&mut ManuallyDrop::new(fields)))
    }

    /// [`RecordHandle::emit_event_at`] and [`RecordHandle::emit_event_fields_at`]: an event made
    /// as a [`Plain`] line. `fields` is given up: pushed with the line, or dropped here (through
    /// `PlainFields::drop_unwritten`, which does nothing for fields that own nothing).
    #[inline(always)]
    fn emit_plain_event<F: PlainFields>(
        &self,
        clk: u64,
        name: impl Into<Str>,
        mut fields: F,
    ) -> Result<(), Error> {
        if let Err(e) = self.check_clk(clk) {
            // SAFETY: given up by the caller, and not used again.
            unsafe { fields.drop_unwritten() };
            return Err(e);
        }
        match self.live_node_cap() {
            // Before a window: refused by the cycle alone (CAP-AT-1).
            Some((n, cap)) if clk >= n.refuse_below => {
                // The name goes straight into the line, which the gate then reads: made apart
                // and moved in, it was copied with a 16-byte load over the 8-byte stores that had
                // just made it, which the CPU cannot forward from its store buffer (see
                // `line::put`): 13.2 ns an event, 7.0 ns now (criterion, `producer/emit_event_at`;
                // 11.2 ns through a builder, `producer/event_no_data`; 2026-11-28).
                let mut line = ManuallyDrop::new(Plain {
                    kind: Kind::Event,
                    clk,
                    id: 0,
                    name: name.into(),
                    after: None,
                    fields,
                });
                if n.shared().gate.event(&line.name, clk, cap) {
                    // A deferred record's line is pushed here, which gives it its id.
                    match n.pushed(self.word) {
                        Ok(pos) => (line.after, line.id) = (Some(*pos), n.raw_id()),
                        Err(e) => {
                            // SAFETY: not pushed, and not used again.
                            unsafe { ManuallyDrop::drop(&mut line) };
                            return Err(e);
                        }
                    }
                    return Ok(push_plain::<DROP_EVENT, F>(&n.inner, &mut line)?);
                }
                // SAFETY: not pushed, and not used again.
                unsafe { ManuallyDrop::drop(&mut line) };
                self.not_written(DROP_EVENT);
            }
            _ => {
                // SAFETY: given up by the caller, and not used again.
                unsafe { fields.drop_unwritten() };
                self.not_written(DROP_EVENT);
            }
        }
        Ok(())
    }

    /// Writes a child record that begins at `clk`, with the typed data fields (hints included)
    /// that `fields` gives, and returns its handle: the record
    /// `child_at(clk, name, record_type).field(k1, v1).field(k2, v2).begin()` writes, made
    /// without a builder, as [`RecordHandle::emit_event_fields_at`] makes an event. For the
    /// record a simulator makes per instruction or per request; the builder remains the way to
    /// add a description, JSON data or more than [`Data::INLINE`] (8) fields, which this call
    /// refuses at compile time.
    ///
    /// `fields` is an array, or a closure that returns one ([`FieldArray`]): the closure runs
    /// only when capture control will make the record, as a builder's
    /// [`with`](RecordBuilder::with) does, so fields that take work cost nothing in a record left
    /// out (capture off, outside a window, passed over by a sample).
    ///
    /// ```
    /// # let trace = jets::Trace::to_writer(std::io::sink(), jets::Metadata::new()).unwrap();
    /// let core = trace.root("core0", "Core").begin_at(0).unwrap();
    /// let pc: u64 = 0x40;
    /// let insn = core
    ///     .begin_child_fields_at(12, "addi", "Instruction", || {
    ///         [("pc", pc.into()), ("display_label", "addi".into()), ("unit_id", 0u64.into())]
    ///     })
    ///     .unwrap();
    /// // writes {"clk":12,"type":"record","name":"addi","record_type":"Instruction","id":2,
    /// //         "parent_id":1,"description":"","data":{"pc":64,"display_label":"addi","unit_id":0}}
    /// assert_eq!(insn.start_clk(), 12);
    /// # insn.end_at(13).unwrap();
    /// ```
    #[inline(always)]
    pub fn begin_child_fields_at<const N: usize>(
        &self,
        clk: u64,
        name: impl Into<Str>,
        record_type: impl Into<Str>,
        fields: impl FieldArray<N>,
    ) -> Result<RecordHandle, Error> {
        const {
            assert!(
                N <= Data::INLINE,
                "begin_child_fields_at takes at most 8 fields (Data::INLINE): use the builder"
            )
        };
        self.check_clk(clk)?;
        // Counted as an inert builder's record is (left out, or dropped under a dropped parent).
        let not_written = || {
            let inner = self.node().map(|n| &*n.inner);
            let b = RecordBuilder {
                inner,
                parent: Some(self),
                p: Pending::inert(),
                at: None,
                sampled: false,
            };
            b.not_written(clk)
        };
        let Some(n) = self.node().filter(|n| n.flags.load(Ordering::Relaxed) & LIVE != 0) else {
            return Ok(not_written());
        };
        let record_type = record_type.into();
        let shared = n.shared();
        let sampled = match shared.gate.child_at(self.start, clk, &record_type) {
            ChildAt::Leave => return Ok(not_written()),
            ChildAt::Make { sampled } => sampled,
            // Held by its cycle (before the window, in a gap, outside the regions of interest):
            // deferred, with its fields made in the box it waits in.
            ChildAt::HeldByCycle if shared.policy == Policy::Block => {
                let word = defer_fields(n, self.word, clk, name.into(), record_type, fields)?;
                return Ok(RecordHandle { word, start: clk });
            }
            ChildAt::HeldByCycle => false,
        };
        // Made only now (a closure runs here), and wrapped at once: see `emit_event_fields_at`.
        let mut fields = ManuallyDrop::new(fields.into_fields());
        let owns_nothing = line::own_nothing(&fields[..]);
        let after = match n.pushed(self.word) {
            Ok(pos) => *pos,
            Err(e) => {
                // SAFETY: not pushed, and not used again.
                unsafe { ManuallyDrop::drop(&mut fields) };
                return Err(e);
            }
        };
        let mut line = ManuallyDrop::new(PlainRecord {
            clk,
            id: 0,
            parent: n.raw_id(),
            name: name.into(),
            record_type,
            after: Some(after),
            hold: false,
            fields: line::ArrayFields::known(&mut fields, owns_nothing),
        });
        let word = begin_plain(&n.inner, self, &mut line, sampled)?;
        Ok(RecordHandle { word, start: clk })
    }

    /// Starts describing an annotation on this record.
    #[inline(always)]
    pub fn annotation(&self, name: impl Into<Str>) -> AnnotationBuilder<'_> {
        let mut b = AnnotationBuilder { record: self, p: Pending::inert() };
        if let Some((n, _)) =
            self.live_node_cap().filter(|(n, cap)| n.shared().gate.annotation(*cap))
        {
            b.p = Pending::under(n, self.word, Kind::Annotation, name.into());
        }
        b
    }

    /// Counts a line of `kind` (a drop kind, also capture's line-kind index) on this record that
    /// is not written: left out by capture, or dropped with its record by the drop policy.
    #[inline(always)]
    fn not_written(&self, kind: usize) {
        // The tag is tested once: this is every left-out line's path.
        let Some(n) = self.node() else {
            return gate::left::count(left_trace_id(self.word), kind);
        };
        let flags = n.flags.load(Ordering::Relaxed);
        match (flags >> CAP_SHIFT) as u8 & bits::LEFT == 0 && flags & LIVE == 0 {
            true => n.shared().count_drop(kind),
            false => gate::left::count(n.trace_id, kind),
        }
    }

    /// Ends the record at `clk` (not before its start).
    ///
    /// On error the handle is gone and the record stays open.
    #[inline]
    pub fn end_at(self, clk: u64) -> Result<(), Error> {
        self.end_line(clk, None)
    }

    #[inline(always)]
    fn end_line(self, clk: u64, status: Option<Status>) -> Result<(), Error> {
        self.check_clk(clk)?;
        // One load of the flags for both questions (live, and the state of a deferred line).
        let Some((n, flags)) = self.node().map(|n| (n, n.flags.load(Ordering::Acquire))) else {
            // The end of a left-out record is too, and counted like everything on it.
            self.not_written(DROP_END);
            return Ok(());
        };
        if flags & LIVE == 0 {
            // Dropped by the policy: so is its end.
            self.not_written(DROP_END);
            return Ok(());
        }
        match flags & STATE {
            PUSHED if n.kids.load(Ordering::Relaxed).is_null() => {
                // SAFETY: PUSHED was seen (acquire): `pos` is written.
                Ok(write_end(&n.inner, n.raw_id(), unsafe { *n.pos.get() }, clk, status)?)
            }
            // Records were deferred under it: its end may have to be held (CAP-DEFER-2).
            PUSHED => end_with_kids(n, clk, status),
            DEFERRED => {
                // Nothing under it was made: its line (released with the handle, below) and its
                // end are left out.
                gate::left::count(n.trace_id, gate::END);
                Ok(())
            }
            _ => Err(Error::Closed),
        }
    }

    /// Ends the record at `clk` with a final `status` on the `record_end` line, for outcomes known
    /// only at the end (an instruction squashed by a branch: [`Status::Flushed`]).
    ///
    /// ```
    /// # let trace = jets::Trace::to_writer(std::io::sink(), jets::Metadata::new()).unwrap();
    /// use jets::format::Status;
    /// let insn = trace.root("addi", "Instruction").begin_at(10).unwrap();
    /// insn.end_with_status_at(12, Status::Flushed).unwrap();
    /// // writes {"clk":12,"type":"record_end","record_id":1,"status":"flushed"}
    /// ```
    #[inline]
    pub fn end_with_status_at(self, clk: u64, status: Status) -> Result<(), Error> {
        self.end_line(clk, Some(status))
    }

    /// Ends the record at the trace clock's current cycle (or at its start if the clock is behind).
    #[inline(always)]
    pub fn end(self) -> Result<(), Error> {
        let clk = self.now();
        self.end_at(clk)
    }

    /// The trace clock's cycle, not before the record's start (the start for a left-out record,
    /// which keeps no trace).
    #[inline(always)]
    fn now(&self) -> u64 {
        self.node().map_or(self.start, |n| n.shared().clock.now().max(self.start))
    }

    #[inline(always)]
    fn check_clk(&self, clk: u64) -> Result<(), Error> {
        if clk < self.start {
            return Err(Error::ClkBeforeStart { clk, start: self.start, record_id: self.id() });
        }
        Ok(())
    }

    /// Pushes an event or annotation line through this handle, counting it when dropped or left
    /// out. Takes the builder's line (see [`Pending`]).
    #[inline(always)]
    fn push<const DROP_KIND: usize>(&self, pending: &mut Pending) -> Result<(), Error> {
        let Some(slot) = pending.0.take() else {
            // An inert builder: the record is not written, or capture refused the line when
            // the builder was made. The drop kinds are also capture's line-kind indices.
            self.not_written(DROP_KIND);
            return Ok(());
        };
        // A builder has a line only when it was made under a live record (`Pending::under`),
        // and a node's LIVE and capture bits never change once it is made (only its state
        // does, see `Node::flags`): so the handle is that node's, still live, and only
        // capture's bits are read again (asking again whether it is live cost a test of the
        // handle's tag and of the flags on every builder's line).
        debug_assert!(self.live());
        // SAFETY: as above, the handle's word is its own live node, untagged.
        let n = unsafe { self.word.as_ref() };
        let cap = (n.flags.load(Ordering::Relaxed) >> CAP_SHIFT) as u8;
        // SAFETY: a box taken from a `Pending` holds an initialized line that was not pushed.
        match unsafe { slot.line.assume_init_ref() } {
            // A line built without an error, whose data is an object (or has no typed fields):
            // the usual case, whose push returns a byte, not an `Error` (which went through
            // memory).
            line if slot.error.is_none() && line.data.is_object() => {
                Ok(push_line::<DROP_KIND>(&n.inner, cap, slot)?)
            }
            _ => push_checked::<DROP_KIND>(&n.inner, cap, slot),
        }
    }
}

/// Typed fields given at once ([`RecordHandle::begin_child_fields_at`]): an array of them, or a
/// closure that returns one, which runs only when the line will be made.
///
/// ```
/// use jets::FieldArray;
/// let now = [("pc", 64u64.into())];
/// let later = || [("pc", 64u64.into())];
/// assert_eq!(now.into_fields(), later.into_fields());
/// ```
pub trait FieldArray<const N: usize> {
    /// The fields (a closure runs here).
    fn into_fields(self) -> [Field; N];
}

impl<const N: usize> FieldArray<N> for [Field; N] {
    #[inline(always)]
    fn into_fields(self) -> [Field; N] {
        self
    }
}

impl<const N: usize, F: FnOnce() -> [Field; N]> FieldArray<N> for F {
    #[inline(always)]
    fn into_fields(self) -> [Field; N] {
        self()
    }
}

/// What [`RecordHandle::flags`] says of a record left out by capture (it has no node).
const LEFT_OUT: u64 = PUSHED | (bits::LEFT as u64) << CAP_SHIFT;

impl Node {
    #[inline(always)]
    fn shared(&self) -> &super::Shared {
        // SAFETY: it points into `inner`, which the node holds.
        unsafe { self.shared.as_ref() }
    }

    /// The record's id, allocated now for a deferred record that has none.
    #[inline(always)]
    fn id(&self) -> u64 {
        match self.raw_id() {
            0 => self.allocate_id(),
            id => id,
        }
    }

    #[cold]
    fn allocate_id(&self) -> u64 {
        // Ids start at 1: 0 never comes out. A thread that loses the race gives its number up (a
        // gap in the ids, which need only be unique).
        let id = self.shared().next_id.fetch_add(1, Ordering::Relaxed);
        match self.id.compare_exchange(0, id, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => id,
            Err(first) => first,
        }
    }

    /// The id word as it is: 0 for a deferred record that has no id yet.
    #[inline(always)]
    fn raw_id(&self) -> u64 {
        self.id.load(Ordering::Relaxed)
    }

    /// [`PUSHED`], or the state of a deferred record's line.
    #[inline(always)]
    fn state(&self) -> u64 {
        self.flags.load(Ordering::Acquire) & STATE
    }

    /// Where the record line was queued, once it was: a deferred line is pushed now (held, for
    /// the writer to decide), since a line is being made under it. `word` is the handle's word
    /// for this node: a deferred record's line is in the node's box, outside the node, which a
    /// pointer made from `&self` may not reach.
    #[inline(always)]
    fn pushed(&self, word: NonNull<Node>) -> Result<&Pos, Error> {
        if self.state() != PUSHED {
            self.push_deferred(word)?;
        }
        // SAFETY: PUSHED was seen (acquire), after which `pos` is never written (see `flags`).
        Ok(unsafe { &*self.pos.get() })
    }

    /// Pushes a deferred record's line, or waits for the thread that is pushing it.
    #[cold]
    #[inline(never)]
    fn push_deferred(&self, word: NonNull<Node>) -> Result<(), Error> {
        // Inside a push on this thread (an allocator or destructor that emits): refused, as that
        // push would be, before the line is taken.
        if ring::Entered::enter().is_none() {
            return Err(Error::Reentrant);
        }
        // Only the state changes: the other bits are the same in every value compared.
        let rest = self.flags.load(Ordering::Relaxed) & !STATE;
        loop {
            match self.flags.compare_exchange(
                rest | DEFERRED,
                rest | PUSHING,
                Ordering::Acquire,
                Ordering::Acquire,
            ) {
                Ok(_) => break,
                Err(f) if f & STATE == PUSHED => return Ok(()),
                Err(f) if f & STATE == CLOSED => return Err(Error::Closed),
                Err(_) if PUSHING_DEFERRED.with(Cell::get) => return Err(Error::Reentrant),
                Err(_) => std::thread::yield_now(),
            }
        }
        PUSHING_DEFERRED.with(|p| p.set(true));
        let id = self.id();
        // SAFETY: a deferred record's node is in the box of its line (EMBEDDED), which holds the
        // line initialized while the state is DEFERRED; this thread moved the state out of
        // DEFERRED, so it alone reaches the line. `ManuallyDrop<Line>` has `Line`'s layout, and
        // the push takes the line whatever it returns.
        let line = unsafe {
            debug_assert!(self.flags.load(Ordering::Relaxed) & EMBEDDED != 0);
            let slot = embedding_slot(word.as_ptr());
            &mut *(&raw mut (*slot).line).cast::<ManuallyDrop<Line>>()
        };
        line.id = id;
        let shared = &self.inner.shared;
        let pushed = ring::push::<true, _>(shared, line);
        PUSHING_DEFERRED.with(|p| p.set(false));
        match pushed {
            Ok(Some((pos, _))) => {
                // No longer left out: the writer holds it, and counts it if never written.
                gate::left::uncount(shared.gate.trace_id(), gate::RECORD);
                // SAFETY: as above; readers wait for PUSHED, published below.
                unsafe { *self.pos.get() = pos };
                self.flags.store(rest | PUSHED, Ordering::Release);
                Ok(())
            }
            // Deferral is only under `Policy::Block`, whose pushes drop nothing, and a push
            // nested in another was refused above: the trace has closed.
            Ok(None) | Err(_) => {
                self.flags.store(rest | CLOSED, Ordering::Release);
                Err(Error::Closed)
            }
        }
    }
}

// The paths that write a line are out of line (`inline(never)`), and what makes a builder and its
// inert path are inline: code that emits then keeps a small frame and a few instructions per call
// while capture leaves its lines out, and a written line is made in its pooled box, not on the
// caller's stack and copied there.

/// Writes an event or annotation line, or counts it as left out by capture or dropped: one
/// built without an error, whose data passes [`check_data`].
#[inline(never)]
///
/// One copy per kind (`DROP_KIND`, [`DROP_EVENT`] or [`DROP_ANNOTATION`]): the kind a constant,
/// rather than an argument tested and kept across the push (a register saved, spilled and
/// loaded back on every builder's line).
fn push_line<const DROP_KIND: usize>(
    inner: &Arc<Inner>,
    cap: u8,
    slot: Box<Slot>,
) -> Result<(), ring::Refused> {
    // SAFETY: a box taken from a `Pending` holds an initialized line that was not pushed.
    let line = unsafe { slot.line.assume_init_ref() };
    debug_assert!(slot.error.is_none());
    let shared = &inner.shared;
    let captured = if DROP_KIND == DROP_EVENT {
        shared.gate.event(&line.name, line.clk, cap)
    } else {
        shared.gate.annotation(cap)
    };
    if !captured {
        leave(shared, slot, DROP_KIND);
        return Ok(());
    }
    push_slot::<false, _>(shared, slot, ring::counting(shared, DROP_KIND))
}

/// [`push_line`] for a line with a data error, or data that is not an object: the error is
/// returned, or the line is pushed after all (data that is no object, with no typed fields).
#[cold]
#[inline(never)]
fn push_checked<const DROP_KIND: usize>(
    inner: &Arc<Inner>,
    cap: u8,
    mut slot: Box<Slot>,
) -> Result<(), Error> {
    let error = slot.error.take();
    // SAFETY: a box taken from a `Pending` holds an initialized line that was not pushed.
    if let Err(e) = check_data(unsafe { slot.line.assume_init_ref() }, error) {
        release(slot);
        return Err(e);
    }
    Ok(push_line::<DROP_KIND>(inner, cap, slot)?)
}

/// A line capture leaves out when it is written (a window's start, ROI, a filter on its name):
/// its box goes back and it is counted. Out of line, so that the thread-local counting inlines
/// here whatever the size of the push it is taken from.
#[inline(never)]
fn leave(shared: &super::Shared, slot: Box<Slot>, drop_kind: usize) {
    release(slot);
    shared.gate.leave(drop_kind);
}

/// Writes a `record_end` line (with a final status). Returns a byte, not an `Error` (which went
/// through memory), as [`push_plain`] does.
#[inline(never)]
fn write_end(
    inner: &Arc<Inner>,
    id: u64,
    pos: Pos,
    clk: u64,
    status: Option<Status>,
) -> Result<(), ring::Refused> {
    // The line is consumed by the push whatever it returns.
    let shared = &inner.shared;
    match status {
        None => {
            let end = line::End { clk, id, after: pos };
            ring::push_counted(shared, &mut ManuallyDrop::new(end), DROP_END)?;
        }
        Some(status) => {
            ring::push_counted(shared, &mut end_line(id, pos, clk, Some(status)), DROP_END)?;
        }
    }
    Ok(())
}

/// A `record_end` line as a builder's [`Line`], for an end with a final status or a held one
/// (which a [`Plain`] line cannot carry).
#[inline(always)]
fn end_line(id: u64, pos: Pos, clk: u64, status: Option<Status>) -> ManuallyDrop<Line> {
    let mut line = ManuallyDrop::new(Line::new(Kind::End, id, Str::EMPTY, Some(pos)));
    line.clk = clk;
    if let Some(status) = status {
        line.data.push("status", status);
    }
    line
}

/// Ends a record under which records were deferred (CAP-DEFER-2): if one of them is still alive,
/// it may yet be queued, with this record as its parent, so the end is queued held (the writer
/// keeps the record), and the last of them to be freed queues the release ([`kids`]).
#[cold]
#[inline(never)]
fn end_with_kids(n: &Node, clk: u64, status: Option<Status>) -> Result<(), Error> {
    // SAFETY: the caller saw PUSHED (acquire): `pos` is written.
    let pos = unsafe { *n.pos.get() };
    // The handle is being consumed: no record can be deferred under it any more.
    let Some(k) = NonNull::new(n.kids.swap(std::ptr::null_mut(), Ordering::Acquire)) else {
        return Ok(write_end(&n.inner, n.raw_id(), pos, clk, status)?);
    };
    // SAFETY: taken out of the node, given once.
    let Some(parting) = (unsafe { kids::part(k) }) else {
        return Ok(write_end(&n.inner, n.raw_id(), pos, clk, status)?);
    };
    let id = n.raw_id();
    let mut line = end_line(id, pos, clk, status);
    line.hold = true;
    let pushed = ring::push::<false, _>(&n.inner.shared, &mut line);
    parting.finish(match pushed {
        Ok(Some((end, _))) => Some((Arc::downgrade(&n.inner), id, end)),
        _ => None,
    });
    if pushed?.is_none() {
        n.inner.shared.count_drop(DROP_END);
    }
    Ok(())
}

/// Writes a [`Plain`] line (consumed whatever happens), counting it as `DROP_KIND` if the drop
/// policy drops it (a constant, as for [`push_line`]). Returns a byte, not an `Error` (which
/// would go through memory).
#[inline(never)]
fn push_plain<const DROP_KIND: usize, F: PlainFields>(
    inner: &Inner,
    line: &mut ManuallyDrop<Plain<F>>,
) -> Result<(), ring::Refused> {
    ring::push_counted(&inner.shared, line, DROP_KIND)
}

/// Writes a `record` line, or leaves it out (capture) or drops it (policy); returns its handle's
/// word (see [`RecordHandle::word`]).
#[inline(never)]
fn begin_line(
    inner: &Arc<Inner>,
    parent: Option<&RecordHandle>,
    mut slot: Box<Slot>,
    clk: u64,
    sampled: bool,
) -> Result<NonNull<Node>, Error> {
    let error = slot.error.take();
    // SAFETY: a box taken from a `Pending` holds an initialized line that was not pushed.
    let line = unsafe { slot.line.assume_init_mut() };
    if let Err(e) = check_data(line, error) {
        release(slot);
        return Err(e);
    }
    line.clk = clk;
    let shared = &inner.shared;
    let (verdict, cap) = shared.gate.record(
        &line.record_type,
        || line.data.as_ref().unit_id(),
        clk,
        || parent.map_or(0, |p| p.cap()),
        sampled,
    );
    if verdict == Verdict::Leave {
        release(slot);
        return Ok(left_out_word(shared));
    }
    line.hold = verdict == Verdict::Hold;
    if line.hold && shared.policy == Policy::Block {
        return Ok(deferred_word(inner, slot, clk, cap, parent.and_then(RecordHandle::node)));
    }
    let pushed = push_slot::<true, _>(shared, slot, ring::placed_record).pushed();
    Ok(pushed_word(inner, pushed?, cap))
}

/// The word of a record line capture leaves out, counted as such.
#[inline(always)]
fn left_out_word(shared: &super::Shared) -> NonNull<Node> {
    shared.gate.leave(gate::RECORD);
    left_word(shared.gate.trace_id())
}

/// The word of a record line capture defers (CAP-DEFER-1): kept in its box, beside its node,
/// until a line is made under it. Counted as left out until then, so that a trace closed while
/// it is open counts it. Counted under its parent too (CAP-DEFER-2, [`kids`]), which stays in
/// the writer's table while it is alive.
#[inline(always)]
fn deferred_word(
    inner: &Arc<Inner>,
    slot: Box<Slot>,
    clk: u64,
    cap: u8,
    parent: Option<&Node>,
) -> NonNull<Node> {
    let gate = &inner.shared.gate;
    gate.leave(gate::RECORD);
    let refuse_below = gate.refuse_below_at(clk);
    let kids = parent.map(|p| kids::of(&p.kids, p.lease));
    let flags = flags(DEFERRED, true, cap) | EMBEDDED;
    // SAFETY: the count of the parent, whose node the borrow keeps alive.
    unsafe { embedded_node_word(inner, slot, refuse_below, flags, kids) }
}

/// The word of a record line pushed (where it went, and its id), or dropped by the policy
/// (`None`): then what hangs off it is counted as dropped too.
#[inline(always)]
fn pushed_word(inner: &Arc<Inner>, pushed: Option<(Pos, u64)>, cap: u8) -> NonNull<Node> {
    match pushed {
        Some((pos, id)) => node_word(inner, id, pos, flags(PUSHED, true, cap)),
        None => {
            inner.shared.count_drop(DROP_RECORD);
            node_word(inner, 0, NOWHERE, flags(PUSHED, false, 0))
        }
    }
}

/// [`begin_line`] for a [`PlainRecord`] (consumed whatever happens): writes it, leaves it out,
/// defers it (into a pooled box as a builder's line, CAP-DEFER-1) or drops it; returns its
/// handle's word, or why the push refused it: two words in registers, where a
/// `Result<_, Error>` was returned through memory and tested there.
#[inline(never)]
fn begin_plain<F: PlainFields>(
    inner: &Arc<Inner>,
    parent: &RecordHandle,
    line: &mut ManuallyDrop<PlainRecord<F>>,
    sampled: bool,
) -> Result<NonNull<Node>, ring::Refused> {
    let shared = &inner.shared;
    let (verdict, cap) = shared.gate.record(
        &line.record_type,
        || DataRef { inline: line.fields.as_slice(), extra: None }.unit_id(),
        line.clk,
        || parent.cap(),
        sampled,
    );
    if verdict == Verdict::Leave {
        // SAFETY: not pushed, and not used again.
        unsafe { ManuallyDrop::drop(line) };
        return Ok(left_out_word(shared));
    }
    line.hold = verdict == Verdict::Hold;
    if line.hold && shared.policy == Policy::Block {
        // As a builder's line, which is what a deferred record keeps in its box.
        let clk = line.clk;
        return Ok(deferred_word(inner, boxed_record(line), clk, cap, parent.node()));
    }
    Ok(pushed_word(inner, ring::push_record(shared, line)?, cap))
}

/// The word of a child record that a capture window holds by its cycle alone
/// ([`gate::ChildAt::HeldByCycle`]), deferred (CAP-DEFER-1) as [`begin_plain`] defers one: its
/// line is made in a pooled box, its fields made there by `fields` rather than on the caller's
/// stack and copied over, which is most of what a record before the window costs.
/// `parent` is the parent's node and `word` its handle's word (see [`Node::pushed`]). Out of line
/// and given few values, so that the paths that do not defer keep theirs in registers.
#[inline(never)]
fn defer_fields<const N: usize>(
    parent: &Node,
    word: NonNull<Node>,
    clk: u64,
    name: Str,
    record_type: Str,
    fields: impl FieldArray<N>,
) -> Result<NonNull<Node>, Error> {
    let after = *parent.pushed(word)?;
    let fill = |data: &mut Data| data.push_all(fields.into_fields());
    let slot = deferred_line(name, record_type, Some(after), clk, parent.raw_id(), fill);
    Ok(deferred_word(&parent.inner, slot, clk, bits::PASSES, Some(parent)))
}

/// A [`PlainRecord`] (consumed) as a builder's record line in a pooled box: the line a deferred
/// record keeps beside its node. Out of line: every record before a capture window comes here.
#[inline(never)]
fn boxed_record<F: PlainFields>(line: &mut ManuallyDrop<PlainRecord<F>>) -> Box<Slot> {
    debug_assert!(line.hold, "only a held record is deferred");
    // SAFETY: the line is given up: its texts and fields are moved out exactly once, here, and
    // the rest of it (plain values, and the borrow of the caller's array) needs no drop.
    let (name, record_type) =
        unsafe { (std::ptr::read(&line.name), std::ptr::read(&line.record_type)) };
    let (after, clk, parent) = (line.after, line.clk, line.parent);
    // SAFETY: the fields are moved out once (see above).
    let fill = |data: &mut Data| unsafe { line.fields.move_into(data) };
    deferred_line(name, record_type, after, clk, parent, fill)
}

/// A deferred record's line (CAP-DEFER-1, held), made in a pooled box, its data filled by
/// `fill`: inlined into each caller, so that fields made by `fill` are made where they go.
#[inline(always)]
fn deferred_line(
    name: Str,
    record_type: Str,
    after: Option<Pos>,
    clk: u64,
    parent: u64,
    fill: impl FnOnce(&mut Data),
) -> Box<Slot> {
    let mut slot = ring::take_spare().unwrap_or_else(pool::take_more);
    // SAFETY: the box's line is ours and uninitialized (see `Pending::fill`), and whole once
    // `Line::init` returns. Only `fill` may unwind below (a caller's closure): the box is then
    // freed with its line in it not dropped (its texts leak, which is safe).
    let l = unsafe { Line::init(slot.line.as_mut_ptr(), Kind::Record, 0, name, after) };
    l.clk = clk;
    l.parent = Some(parent);
    l.hold = true;
    // SAFETY: a new line's record type is the static empty text, which needs no drop.
    unsafe { line::store_str(&mut l.record_type, record_type) };
    fill(&mut l.data);
    slot
}

/// Pushes a builder's line into the ring and gives its box back to the pool; `map` makes the
/// result what the caller needs (see [`ring::push_counted`]).
#[inline(always)]
fn push_slot<const RECORD: bool, R>(
    shared: &Arc<super::Shared>,
    slot: Box<Slot>,
    map: impl Fn(ring::Pushed) -> R,
) -> R {
    // The box left its `Pending`, so nothing else reaches its line; the push keeps the box as
    // this thread's spare, or hands it back.
    let (result, back) = ring::push_boxed::<RECORD, R>(shared, slot, map);
    if let Some(slot) = back {
        pool::give(slot);
    }
    result
}

/// A builder's line, and the data error found while building it. The line is handed to the ring
/// by reference and moved from its box straight into the ring slot (one copy); the box leaves
/// the `Pending` as it goes, so no code can reach the moved-out line afterwards (the contract is
/// the type's), and dropping an unused builder still frees the line.
///
/// The line lives in a box from this thread's [`pool`], not in the builder: a builder is a few
/// words (this one, the record or trace it hangs off, a cycle given when made), so the chained
/// calls, which take and return it by value, move those rather than the ~500-byte line (most of
/// it room for fields). An inert builder has no box at all.
// The box is in a `ManuallyDrop` so that the drop glue is `Drop::drop` alone: one inlined
// compare for an inert or pushed builder, with the release out of line.
struct Pending(ManuallyDrop<Option<Box<Slot>>>);

/// A pooled box: a line (initialized while a `Pending` holds it) and its data error.
pub(super) struct Slot {
    pub(super) line: MaybeUninit<Line>,
    error: Option<Box<Error>>,
    /// A deferred record's node, when the box is one's ([`embedded_node_word`]); uninitialized
    /// otherwise.
    node: MaybeUninit<Node>,
}

impl Pending {
    #[inline(always)]
    fn inert() -> Pending {
        Pending(ManuallyDrop::new(None))
    }

    /// A builder's line, made in a box from the pool.
    ///
    /// `after` is the handle's position, by reference: read here from the handle, which was
    /// written long ago, rather than copied by the caller into a fresh `Option<Pos>` that this
    /// function would read back with a 16-byte load over its just-made stores (a stall).
    ///
    /// Inline: the usual case, the thread's spare box, is a thread-local load and store and a
    /// dozen stores into the box; as a call of its own it cost about as much again in argument
    /// moves, saved registers and a copy of the name (callgrind: 54 instructions per event, 20
    /// inline). A thread's first builders, or several alive at once, take the cold path.
    ///
    /// `name` is not dropped should taking a box unwind (see [`Pending::under`]).
    #[inline(always)]
    fn new(kind: Kind, id: u64, name: ManuallyDrop<Str>, after: Option<&Pos>) -> Pending {
        let slot = ring::take_spare().unwrap_or_else(pool::take_more);
        Pending::fill(slot, kind, id, ManuallyDrop::into_inner(name), after)
    }

    #[inline(always)]
    fn fill(mut slot: Box<Slot>, kind: Kind, id: u64, name: Str, after: Option<&Pos>) -> Pending {
        let after = after.copied();
        // SAFETY: the box's line is ours and uninitialized (or moved out); `init` writes it
        // part by part (`write(Line::new(..))` can copy the whole ~500-byte line).
        unsafe { Line::init(slot.line.as_mut_ptr(), kind, id, name, after) };
        Pending(ManuallyDrop::new(Some(slot)))
    }

    /// A line made under `record`, after its line (pushing it now if it was deferred); an event
    /// or annotation refers to it by id (a record's own id comes with its push). When that push
    /// fails, the builder keeps the error for the call that would write the line.
    ///
    /// The name is not dropped if a call made before it is stored unwinds (pushing the deferred
    /// line, taking a box from the pool): a cleanup that drops it needs it in memory, so it was
    /// kept on the stack, stored and loaded back on every builder.
    #[inline(always)]
    fn under(record: &Node, word: NonNull<Node>, kind: Kind, name: Str) -> Pending {
        let name = ManuallyDrop::new(name);
        match record.pushed(word) {
            Ok(pos) => {
                let id = if kind == Kind::Record { 0 } else { record.raw_id() };
                Pending::new(kind, id, name, Some(pos))
            }
            Err(e) => Pending::failed(kind, ManuallyDrop::into_inner(name), e),
        }
    }

    #[cold]
    #[inline(never)]
    fn failed(kind: Kind, name: Str, e: Error) -> Pending {
        let mut p = Pending::new(kind, 0, ManuallyDrop::new(name), None);
        p.set_error(e);
        p
    }

    /// The line, unless the builder is inert (or the line was pushed).
    #[inline(always)]
    fn line(&mut self) -> Option<&mut Line> {
        // SAFETY: a box held by a `Pending` holds an initialized line that is still ours.
        self.0.as_mut().map(|s| unsafe { s.line.assume_init_mut() })
    }

    /// Keeps the first data error, to be returned by the call that writes the line.
    fn set_error(&mut self, e: Error) {
        if let Some(s) = &mut *self.0 {
            s.error.get_or_insert_with(|| Box::new(e));
        }
    }
}

impl Drop for Pending {
    #[inline(always)]
    fn drop(&mut self) {
        // The box leaves by value: the builder's address never escapes to the out-of-line
        // release, so the chained calls' moves of a builder can stay in registers.
        if let Some(slot) = self.0.take() {
            release(slot);
        }
    }
}

/// A builder dropped unused (or on an error path): frees its line, returns its box.
#[cold]
#[inline(never)]
fn release(slot: Box<Slot>) {
    release_inline(slot);
}

/// [`release`], inlined where lines are released in numbers: a deferred record's, when its
/// handle goes (one per instruction before a capture window).
#[inline(always)]
fn release_inline(mut slot: Box<Slot>) {
    // SAFETY: a box taken from a `Pending` holds an initialized line that was not pushed (a push
    // takes the box out first), so the line is ours and dropped exactly once, here.
    unsafe { drop_line(slot.line.assume_init_mut()) };
    slot.error = None;
    pool::give(slot);
}

/// Drops a line that is not pushed. Most lines own nothing but perhaps their name (static
/// texts, numbers): then only the name is dropped, rather than running the drop glue over every
/// field. Records that capture deferred and never needed (CAP-DEFER-1) are released this way,
/// one per instruction before a window.
///
/// # Safety
/// `line` is initialized and is not used or dropped again.
unsafe fn drop_line(line: &mut Line) {
    // `Line`'s other members (kind, cycle, ids, position, flags) are plain values.
    if line.record_type.is_static() && line.description.is_static() && line.data.owns_nothing() {
        // SAFETY: the caller gives the line up; what is not dropped here owns nothing.
        unsafe { std::ptr::drop_in_place(&mut line.name) };
    } else {
        // SAFETY: as above.
        unsafe { std::ptr::drop_in_place(line) };
    }
}

/// Boxes for builders' lines, reused per thread: once a thread has made its first builders,
/// making one takes a box from here and emitting gives it back, without the allocator.
// The pool holds boxes, not lines: a builder owns its box, which moves as one word.
mod pool {
    use std::mem::MaybeUninit;

    use super::boxes::{Free, Guard, Linked};
    use super::ring::{self, Entered};
    use super::Slot;

    /// Boxes kept per thread besides its spare box: more than the builders a thread has alive at
    /// once, usually.
    const KEEP: usize = 8;

    // SAFETY: a kept box's line is not initialized (a box is given back once its line was
    // pushed or dropped), and `Line` is word-aligned; its `error` is left as it is (`None`).
    unsafe impl Linked for Slot {
        #[inline(always)]
        fn link(p: *mut Slot) -> *mut *mut Slot {
            // SAFETY: `p` points at a box's slot (see the trait).
            unsafe { (&raw mut (*p).line).cast() }
        }
    }

    thread_local! {
        static FREE: Free<Slot> = const { Free::new() };
        static GUARD: Guard<Slot> = const { Guard(&FREE) };
    }

    /// A box for a line (uninitialized, no error) when the thread has no spare box (kept beside
    /// its rings, `ring::take_spare`): several builders alive at once, or the thread's first one.
    /// One from [`FREE`], else a new one.
    #[cold]
    #[inline(never)]
    pub(super) fn take_more() -> Box<Slot> {
        super::boxes::pop(&FREE).unwrap_or_else(fresh)
    }

    /// Cold: the pool is empty (a thread's first builders), or in use (a builder made from an
    /// allocator or destructor inside this module). Allocating counts as being inside an
    /// emitting call, so that an allocator that emits is refused (`Error::Reentrant`) as it is
    /// when the ring itself allocates.
    #[cold]
    fn fresh() -> Box<Slot> {
        let _entered = Entered::enter();
        Box::new(Slot { line: MaybeUninit::uninit(), error: None, node: MaybeUninit::uninit() })
    }

    /// Gives a box back (its content, if any, is not dropped).
    #[inline(always)]
    pub(super) fn give(slot: Box<Slot>) {
        if let Some(slot) = ring::give_spare(slot) {
            give_more(slot);
        }
    }

    #[cold]
    fn give_more(slot: Box<Slot>) {
        super::boxes::keep(&FREE, &GUARD, slot, KEEP);
    }
}

/// A builder made with a cycle (`child_at`, `event_at`) was judged by capture at that cycle, so it
/// is written at that cycle only.
#[inline(always)]
fn check_at(at: Option<u64>, clk: u64) -> Result<(), Error> {
    match at {
        Some(at) if at != clk => Err(at_mismatch(at, clk)),
        _ => Ok(()),
    }
}

#[cold]
fn at_mismatch(at: u64, clk: u64) -> Error {
    Error::InvalidArgument(format!(
        "a line made for cycle {at} (child_at / event_at) cannot be written at cycle {clk}: \
         use begin() / emit()"
    ))
}

/// The data error kept by a builder, or a shape error: typed fields merge only into an object,
/// and a record's data must be one.
#[inline(always)]
fn check_data(line: &Line, error: Option<Box<Error>>) -> Result<(), Error> {
    if let Some(e) = error {
        return Err(*e);
    }
    let data = &line.data;
    if !data.is_object() && (line.kind == Kind::Record || data.fields().next().is_some()) {
        return Err(Error::InvalidJson(if line.kind == Kind::Record {
            "a record's data must be a JSON object".to_owned()
        } else {
            "typed fields can only be merged into JSON data that is an object".to_owned()
        }));
    }
    Ok(())
}

/// The chained calls every builder has: description, typed fields, JSON data.
macro_rules! data_methods {
    () => {
        /// True when the builder holds no line: capture leaves it out whatever is added to it,
        /// and every chained call on it does nothing (the final call only counts it as left
        /// out). [`with`](Self::with) is the simpler way to skip work for such a line; this is
        /// for a caller that must decide before it can even name the line properly (a binding
        /// that would have to copy the name first).
        ///
        /// ```
        /// # let trace = jets::Trace::to_writer(std::io::sink(), jets::Metadata::new()).unwrap();
        /// let core = trace.root("core0", "Core").begin_at(0).unwrap();
        /// trace.capture_off();
        /// assert!(core.event_at(5, "Retire").is_inert());
        /// trace.capture_on();
        /// assert!(!core.event_at(5, "Retire").is_inert());
        /// ```
        #[inline(always)]
        pub fn is_inert(&self) -> bool {
            self.p.0.is_none()
        }

        /// Runs `describe` on the builder only when its line will be made: what it computes
        /// (a disassembly, a name looked up, a field that needs work) and the calls it chains
        /// cost nothing when capture leaves the line out, as arguments passed directly would.
        /// One question for the whole group instead of one per chained call: the form for a
        /// simulator's hot path.
        ///
        /// ```
        /// # let trace = jets::Trace::to_writer(std::io::sink(), jets::Metadata::new()).unwrap();
        /// # let core = trace.root("core0", "Core").begin_at(0).unwrap();
        /// let pc = 0x40u64;
        /// let insn = core
        ///     .child_at(12, "addi", "Instruction")
        ///     .with(|b| b.field("pc", pc).field("opcode", format!("{:#x}", 0x13)))
        ///     .begin()
        ///     .unwrap();
        /// # insn.end_at(13).unwrap();
        /// ```
        #[inline(always)]
        pub fn with(self, describe: impl FnOnce(Self) -> Self) -> Self {
            match self.is_inert() {
                false => describe(self),
                true => self,
            }
        }

        /// Sets the human-readable description (empty by default; the key is always written).
        #[inline(always)]
        pub fn description(mut self, text: impl Into<Str>) -> Self {
            if let Some(line) = self.p.line() {
                line.description = text.into();
            }
            self
        }

        /// Adds a typed field to `data`.
        #[inline(always)]
        pub fn field(mut self, key: impl Into<Str>, value: impl Into<Value>) -> Self {
            if let Some(line) = self.p.line() {
                line.data.push(key, value);
            }
            self
        }

        /// Sets `data` wholesale from a prepared [`Data`], replacing fields added before.
        #[inline(always)]
        pub fn data(mut self, data: Data) -> Self {
            if let Some(line) = self.p.line() {
                line.data = data;
            }
            self
        }

        /// Sets `data` from JSON text; typed fields are merged into it when it is an object.
        /// A parse error is returned by the call that writes the line (an inert builder, whose
        /// line is left out, does not parse).
        pub fn data_json(mut self, text: &str) -> Self {
            if let Some(line) = self.p.line() {
                if let Err(e) = line.data.parse_json(text) {
                    self.p.set_error(Error::InvalidJson(e.to_string()));
                }
            }
            self
        }
    };
}

/// Describes a record before it begins. Made by [`super::Trace::root`] or [`RecordHandle::child`].
#[must_use = "a record is written only by begin_at() or begin()"]
pub struct RecordBuilder<'a> {
    /// `None` under a record left out by capture (the builder is inert).
    inner: Option<&'a Arc<Inner>>,
    /// `None` for a root. A reference, not copies of its fields: the chained calls move the
    /// builder, which stays three words.
    parent: Option<&'a RecordHandle>,
    p: Pending,
    /// The cycle given to [`RecordHandle::child_at`], which capture has judged.
    at: Option<u64>,
    /// Its 1-of-N sample was taken when it was made (`child_at`), not to be taken again.
    sampled: bool,
}

impl<'a> RecordBuilder<'a> {
    #[inline(always)]
    pub(super) fn root(
        inner: &'a Arc<Inner>,
        name: impl Into<Str>,
        record_type: impl Into<Str>,
    ) -> Self {
        let mut b = RecordBuilder {
            inner: Some(inner),
            parent: None,
            p: Pending::inert(),
            at: None,
            sampled: false,
        };
        if inner.shared.gate.may_record(0) {
            b.p = Pending::new(Kind::Record, 0, ManuallyDrop::new(name.into()), None);
            if let Some(line) = b.p.line() {
                line.record_type = record_type.into();
            }
        }
        b
    }

    data_methods!();

    /// Hint: bar color.
    #[inline(always)]
    pub fn color(self, c: Color) -> Self {
        self.field("color", c)
    }
    /// Hint: execution unit (swimlane group).
    #[inline(always)]
    pub fn unit_id(self, id: u64) -> Self {
        self.field("unit_id", id)
    }
    /// Hint: lane within the unit.
    #[inline(always)]
    pub fn thread_id(self, id: u64) -> Self {
        self.field("thread_id", id)
    }
    /// Hint: sub-unit within the unit.
    #[inline(always)]
    pub fn subunit_id(self, id: u64) -> Self {
        self.field("subunit_id", id)
    }
    /// Hint: short label for the bar.
    #[inline(always)]
    pub fn display_label(mut self, label: impl Into<Str>) -> Self {
        if let Some(line) = self.p.line() {
            line.data.push("display_label", Value::Str(label.into()));
        }
        self
    }
    /// Hint: visual state.
    #[inline(always)]
    pub fn status(self, s: Status) -> Self {
        self.field("status", s)
    }
    /// Hint: critical-path weight, clamped to [0, 1] (NaN is written as null).
    #[inline(always)]
    pub fn criticality(self, w: f64) -> Self {
        self.field("criticality", if w.is_nan() { w } else { w.clamp(0.0, 1.0) })
    }

    /// Writes the `record` line at `clk` and returns the handle. A child may not start before its
    /// parent.
    #[inline(always)]
    pub fn begin_at(mut self, clk: u64) -> Result<RecordHandle, Error> {
        if let Some(parent) = self.parent {
            parent.check_clk(clk)?;
        }
        check_at(self.at, clk)?;
        match (self.inner, self.p.0.take()) {
            (Some(inner), Some(slot)) => {
                let word = begin_line(inner, self.parent, slot, clk, self.sampled)?;
                Ok(RecordHandle { word, start: clk })
            }
            (_, slot) => {
                if let Some(slot) = slot {
                    release(slot); // unreachable: a builder has a line only with the trace
                }
                Ok(self.not_written(clk))
            }
        }
    }

    /// Cold-ish: an inert builder's record, counted as left out (or dropped under a record the
    /// drop policy dropped), and its handle.
    #[inline(always)]
    fn not_written(&self, clk: u64) -> RecordHandle {
        match (self.inner, self.parent) {
            (Some(inner), Some(p)) if !p.live() && p.cap() & bits::LEFT == 0 => {
                inner.shared.count_drop(DROP_RECORD);
                dropped(inner, clk)
            }
            _ => {
                gate::left::count(self.trace_id(), gate::RECORD);
                left_out(self.trace_id(), clk)
            }
        }
    }

    /// The trace's id: the parent's, or the trace's own for a root.
    #[inline(always)]
    fn trace_id(&self) -> u64 {
        match (self.parent, self.inner) {
            (Some(p), _) => p.trace_id(),
            (None, Some(inner)) => inner.shared.gate.trace_id(),
            (None, None) => 0, // not made: a root builder always has the trace
        }
    }

    /// Writes the `record` line at the cycle given to [`RecordHandle::child_at`], or else at the
    /// trace clock's current cycle (never before the parent).
    #[inline(always)]
    pub fn begin(self) -> Result<RecordHandle, Error> {
        let start = self.parent.map_or(0, |p| p.start);
        let clk = match self.at {
            Some(at) => at,
            None => self.inner.map_or(start, |i| i.shared.clock.now().max(start)),
        };
        self.begin_at(clk)
    }
}

/// The handle of a record left out by capture.
#[inline(always)]
fn left_out(trace_id: u64, clk: u64) -> RecordHandle {
    RecordHandle { word: left_word(trace_id), start: clk }
}

/// The trace's id in the word of a record left out by capture.
#[inline(always)]
fn left_trace_id(word: NonNull<Node>) -> u64 {
    (word.as_ptr().addr() >> 1) as u64
}

/// The word of a record left out by capture: no node, only the trace's id to count by.
#[inline(always)]
fn left_word(trace_id: u64) -> NonNull<Node> {
    // Trace ids count up from 1, one per trace opened: far below a word's top bit.
    let word = std::ptr::without_provenance_mut::<Node>((trace_id as usize) << 1 | LEFT_TAG);
    // SAFETY: the tag bit makes the word non-zero.
    unsafe { NonNull::new_unchecked(word) }
}

/// The word of a record with a node, made from its parts.
#[inline(always)]
fn node_word(inner: &Arc<Inner>, id: u64, pos: Pos, flags: u64) -> NonNull<Node> {
    let node = nodes::take();
    let refuse_below = inner.shared.gate.refuse_below();
    // SAFETY: `take` gives a box for a node, ours and uninitialized.
    unsafe { write_node(node.as_ptr(), inner, id, pos, refuse_below, flags, None) };
    node
}

/// The word of a deferred record (CAP-DEFER-1): its node is made in the box that holds its line,
/// which the node then owns. Most deferred records end before anything is made under them: one
/// box to take and give back, not two.
///
/// # Safety
/// `counted_in`, if any, is the count of the parent deferred under, whose handle the caller
/// holds.
#[inline(always)]
unsafe fn embedded_node_word(
    inner: &Arc<Inner>,
    slot: Box<Slot>,
    refuse_below: u64,
    flags: u64,
    counted_in: Option<NonNull<Kids>>,
) -> NonNull<Node> {
    debug_assert!(flags & EMBEDDED != 0);
    let slot = Box::into_raw(slot);
    // SAFETY: a live box of ours; its node is uninitialized and written whole here; the
    // function's contract for `counted_in`.
    unsafe {
        let p = (&raw mut (*slot).node).cast::<Node>();
        write_node(p, inner, 0, NOWHERE, refuse_below, flags, counted_in);
        NonNull::new_unchecked(p)
    }
}

/// Writes a node at `p`, leased by this thread ([`lease`]) or holding a count of its own. A
/// deferred record is counted in `counted_in`, its parent's count (CAP-DEFER-2): by the lease
/// bookkeeping on the parent's thread, else with a locked instruction.
/// Field by field: a node made whole on the stack and moved in was read
/// back 16 bytes at a time over the 8-byte stores that had just made it, which the CPU cannot
/// forward (a stall per record).
///
/// # Safety
/// `p` is valid for writes of a node, and holds none to drop; `counted_in`, if any, is the count
/// of a parent whose handle the caller holds.
#[inline(always)]
unsafe fn write_node(
    p: *mut Node,
    inner: &Arc<Inner>,
    id: u64,
    pos: Pos,
    refuse_below: u64,
    flags: u64,
    counted_in: Option<NonNull<Kids>>,
) {
    let (lease, counted) = lease::take(inner, counted_in);
    if let (Some(k), false) = (counted_in, counted) {
        // SAFETY: the caller holds the parent's handle, which keeps its count alive.
        unsafe { kids::add_away(k) };
    }
    // SAFETY: see the function. A leased node's `Arc` is a copy the lease's count keeps valid,
    // never dropped (`nodes::free`).
    unsafe {
        let inner = match lease {
            Some(_) => std::ptr::read(inner),
            None => Arc::clone(inner),
        };
        (&raw mut (*p).refuse_below).write(refuse_below);
        (&raw mut (*p).trace_id).write(inner.shared.gate.trace_id());
        (&raw mut (*p).shared).write(NonNull::from(&*inner.shared));
        (&raw mut (*p).inner).write(ManuallyDrop::new(inner));
        (&raw mut (*p).lease).write(lease);
        (&raw mut (*p).id).write(AtomicU64::new(id));
        (&raw mut (*p).pos).write(UnsafeCell::new(pos));
        (&raw mut (*p).flags).write(AtomicU64::new(flags));
        (&raw mut (*p).kids).write(AtomicPtr::new(std::ptr::null_mut()));
        (&raw mut (*p).counted_in).write(counted_in);
    }
}

/// The box a node was made in by [`embedded_node_word`].
///
/// # Safety
/// `node` points at the `node` member of a live [`Slot`].
#[inline(always)]
unsafe fn embedding_slot(node: *mut Node) -> *mut Slot {
    // SAFETY: see the function.
    unsafe { node.byte_sub(std::mem::offset_of!(Slot, node)).cast::<Slot>() }
}

/// The position of a line not queued (yet).
const NOWHERE: Pos = Pos { ring: u32::MAX, index: u64::MAX };

/// A [`Node::flags`] word.
#[inline(always)]
fn flags(state: u64, live: bool, cap: u8) -> u64 {
    state | u64::from(cap) << CAP_SHIFT | if live { LIVE } else { 0 }
}

/// The handle of a record the drop policy dropped: what hangs off it is counted as dropped.
#[cold]
fn dropped(inner: &Arc<Inner>, clk: u64) -> RecordHandle {
    let word = node_word(inner, 0, NOWHERE, flags(PUSHED, false, 0));
    RecordHandle { word, start: clk }
}

/// Per-thread lists of boxes kept for reuse, shared by the line boxes' [`pool`] and the nodes'
/// [`nodes`]. A list in use (a signal handler that interrupted this code on the same thread) or
/// torn down (a thread's exit) is passed over: the box is made or freed by the allocator.
///
/// A list is a stack linked through the kept boxes themselves, in a thread-local without a
/// destructor: taking a box is a flag test and three loads and stores, where a
/// `RefCell<Vec<Box>>` cost its thread-local's state check, the borrow, the vector's length and
/// capacity (callgrind: ~20 instructions less per record a capture window defers). The boxes
/// left at the thread's exit are freed by a [`Guard`], a second thread-local registered by the
/// first box kept.
mod boxes {
    use std::cell::Cell;
    use std::sync::atomic::{compiler_fence, Ordering};
    use std::thread::LocalKey;

    use super::ring::Entered;

    /// A box kept in a [`Free`] list holds the link to the next one.
    ///
    /// # Safety
    /// `link(p)`, for `p` from `Box::into_raw`, points into `*p` at 8 aligned bytes that a box
    /// in the list does not need: storage its owner treats as uninitialized when it takes it.
    pub(super) unsafe trait Linked: Sized + 'static {
        fn link(p: *mut Self) -> *mut *mut Self;
    }

    /// The list has no [`Guard`] yet: nothing is kept until it does.
    const UNGUARDED: u8 = 0;
    const GUARDED: u8 = 1;
    /// The thread's guard has run (the thread is exiting): boxes are freed, not kept.
    const GONE: u8 = 2;

    /// A thread's list of boxes.
    pub(super) struct Free<T> {
        /// The last box kept (null: none), linked to the one before ([`Linked::link`]).
        top: Cell<*mut T>,
        len: Cell<usize>,
        /// Set while this thread changes the list: a signal handler on it passes over the list
        /// rather than take a box the interrupted code is taking too.
        busy: Cell<bool>,
        state: Cell<u8>,
    }

    impl<T> Free<T> {
        pub(super) const fn new() -> Free<T> {
            Free {
                top: Cell::new(std::ptr::null_mut()),
                len: Cell::new(0),
                busy: Cell::new(false),
                state: Cell::new(UNGUARDED),
            }
        }
    }

    /// Frees a thread's kept boxes when it exits (a list has no destructor of its own, so that
    /// reaching it checks no thread-local state).
    pub(super) struct Guard<T: Linked>(pub(super) &'static LocalKey<Free<T>>);

    impl<T: Linked> Drop for Guard<T> {
        fn drop(&mut self) {
            let _ = self.0.try_with(|f| {
                f.state.set(GONE);
                while let Some(b) = pop_from(f) {
                    drop(b);
                }
            });
        }
    }

    /// A box from `list`, if it has one.
    #[inline(always)]
    pub(super) fn pop<T: Linked>(list: &'static LocalKey<Free<T>>) -> Option<Box<T>> {
        // `Free` has no destructor: reaching it never fails.
        list.try_with(|f| pop_from(f)).ok().flatten()
    }

    #[inline(always)]
    fn pop_from<T: Linked>(f: &Free<T>) -> Option<Box<T>> {
        if f.busy.get() {
            return None;
        }
        f.busy.set(true);
        // The flag is set before the list is read and cleared after it is written, as a signal
        // handler on this thread sees them (no cost at run time). The top is read only once the
        // flag is set: a handler that ran before took its box whole, and one that runs after
        // passes over the list.
        compiler_fence(Ordering::SeqCst);
        let top = f.top.get();
        let b = (!top.is_null()).then(|| {
            f.len.set(f.len.get() - 1);
            // SAFETY: `top` is a kept box (from `Box::into_raw`), owned by the list, whose link
            // `push` wrote; taking it off the list gives its ownership back.
            unsafe {
                f.top.set(T::link(top).read());
                Box::from_raw(top)
            }
        });
        compiler_fence(Ordering::SeqCst);
        f.busy.set(false);
        b
    }

    /// Keeps `b` in `list` while it holds fewer than `most`; frees it otherwise. `guard` frees
    /// the list's boxes when the thread exits.
    #[inline(always)]
    pub(super) fn keep<T: Linked>(
        list: &'static LocalKey<Free<T>>,
        guard: &'static LocalKey<Guard<T>>,
        b: Box<T>,
        most: usize,
    ) {
        let Ok(f) = list.try_with(|f| f as *const Free<T>) else { return };
        // SAFETY: `Free` has no destructor, so it lives as long as this thread.
        let f = unsafe { &*f };
        // Read before `push` sets the flag: a signal handler that keeps a box in between (a
        // whole `keep` of its own) can take the list one box past `most`, no further.
        if f.state.get() != GUARDED || f.busy.get() || f.len.get() >= most {
            return keep_cold(f, guard, b, most);
        }
        push(f, b);
    }

    #[inline(always)]
    fn push<T: Linked>(f: &Free<T>, b: Box<T>) {
        f.busy.set(true);
        compiler_fence(Ordering::SeqCst);
        let p = Box::into_raw(b);
        // SAFETY: `p` is a box the list now owns; its link is storage it does not need.
        unsafe { T::link(p).write(f.top.get()) };
        f.top.set(p);
        f.len.set(f.len.get() + 1);
        compiler_fence(Ordering::SeqCst);
        f.busy.set(false);
    }

    /// The list's first box (its guard is registered first), or one it cannot keep: freed.
    #[cold]
    fn keep_cold<T: Linked>(
        f: &Free<T>,
        guard: &'static LocalKey<Guard<T>>,
        b: Box<T>,
        most: usize,
    ) {
        if f.state.get() == UNGUARDED && !f.busy.get() {
            // Registering a destructor may allocate: inside an emitting call, as the ring's
            // allocations are, so that an allocator that emits is refused.
            let _entered = Entered::enter();
            if guard.try_with(|_| ()).is_ok() {
                f.state.set(GUARDED);
            }
        }
        if f.state.get() == GUARDED && !f.busy.get() && f.len.get() < most {
            push(f, b);
        }
        // A box the list did not take is freed here.
    }

    #[cfg(test)]
    mod tests {
        use super::{keep, pop, Free, Guard, Linked};

        struct B([u64; 2]);

        // SAFETY: a test box's words are plain data, overwritten when it is taken.
        unsafe impl Linked for B {
            fn link(p: *mut B) -> *mut *mut B {
                p.cast()
            }
        }

        thread_local! {
            static FREE: Free<B> = const { Free::new() };
            static GUARD: Guard<B> = const { Guard(&FREE) };
        }

        /// Boxes come back last in, first out, up to the limit; a list in use (as a signal
        /// handler would find it) is passed over; a thread's kept boxes are freed when it exits
        /// (under Miri, a leak fails the test).
        #[test]
        fn boxes_are_kept_up_to_the_limit_and_freed_with_the_thread() {
            std::thread::spawn(|| {
                // The mark is in the second word: the first is the link while a box is kept.
                let mark = |n: u64| Box::new(B([0, n]));
                keep(&FREE, &GUARD, mark(1), 2);
                keep(&FREE, &GUARD, mark(2), 2);
                keep(&FREE, &GUARD, mark(3), 2); // over the limit: freed
                assert_eq!(pop(&FREE).map(|b| b.0[1]), Some(2));
                FREE.with(|f| f.busy.set(true));
                assert!(pop(&FREE).is_none(), "a list in use is passed over");
                keep(&FREE, &GUARD, mark(4), 2); // freed, not kept
                FREE.with(|f| f.busy.set(false));
                assert_eq!(pop(&FREE).map(|b| b.0[1]), Some(1));
                assert!(pop(&FREE).is_none());
                keep(&FREE, &GUARD, mark(5), 2); // left for the guard
            })
            .join()
            .expect("thread");
        }
    }
}

/// Boxes for the nodes of open records, reused per thread: a simulator begins and ends records
/// all the time, a few open at once, and taking a box from here costs a fraction of the
/// allocator's round trip. A handle ended on another thread gives its node to that thread's pool.
mod nodes {
    use std::mem::MaybeUninit;
    use std::ptr::NonNull;

    use super::boxes::{Free, Guard, Linked};
    use super::ring::Entered;
    use super::Node;

    /// Boxes kept per thread: more than most simulators keep records open on one thread.
    const KEEP: usize = 64;

    // SAFETY: a kept box holds no node (it was dropped, or not written yet), and a node is
    // word-aligned.
    unsafe impl Linked for MaybeUninit<Node> {
        #[inline(always)]
        fn link(p: *mut MaybeUninit<Node>) -> *mut *mut MaybeUninit<Node> {
            p.cast()
        }
    }

    thread_local! {
        static FREE: Free<MaybeUninit<Node>> = const { Free::new() };
        static GUARD: Guard<MaybeUninit<Node>> = const { Guard(&FREE) };
    }

    /// A box for a node, uninitialized, owned by the returned pointer: the caller writes the
    /// node, and gives it to [`free`].
    #[inline(always)]
    pub(super) fn take() -> NonNull<Node> {
        let b = super::boxes::pop(&FREE).unwrap_or_else(fresh);
        // SAFETY: `Box::into_raw` is never null.
        unsafe { NonNull::new_unchecked(Box::into_raw(b).cast::<Node>()) }
    }

    /// Cold: the pool is empty, or in use (a record begun from a signal handler that interrupted
    /// this module). Allocating counts as being inside an emitting call, as in the line pool.
    #[cold]
    fn fresh() -> Box<MaybeUninit<Node>> {
        let _entered = Entered::enter();
        Box::new(MaybeUninit::uninit())
    }

    /// Drops the node (a deferred line goes back to its pool) and keeps its box.
    ///
    /// Out of line, so that a handle's drop glue stays a test of its tag, inlined wherever a
    /// handle goes out of scope.
    ///
    /// # Safety
    /// `node` came from [`take`], was written, and is not used again.
    #[inline(never)]
    pub(super) unsafe fn free(node: NonNull<Node>) {
        let p = node.as_ptr();
        // SAFETY: the caller owns the node. The count of the records deferred under it
        // (CAP-DEFER-2), still there if its handle goes without an end: no end was held, so
        // the last of them has nothing to release. (The count this node is counted in, if any,
        // is given back with its lease, below.)
        let counted_in = unsafe {
            let kids = (*p).kids.load(std::sync::atomic::Ordering::Acquire);
            if let Some(k) = NonNull::new(kids) {
                if let Some(parting) = super::kids::part(k) {
                    parting.finish(None);
                }
            }
            (*p).counted_in
        };
        // SAFETY: the caller owns the node, written whole: the field that owns something is
        // moved out (the others are plain values, asserted below), so nothing in it is left to
        // drop.
        let (inner, lease, flags) = unsafe {
            (
                std::ptr::read(&raw const (*p).inner),
                (*p).lease,
                (*p).flags.load(std::sync::atomic::Ordering::Relaxed),
            )
        };
        // SAFETY: the node's own, given back once (on one of the two paths below).
        let let_go = move || unsafe { let_go(inner, lease, counted_in) };
        if flags & super::EMBEDDED != 0 {
            // SAFETY: an embedded node is in the box of its record's line, which it owns.
            let slot = unsafe { Box::from_raw(super::embedding_slot(p)) };
            let_go();
            // The line is still there unless it was pushed (or the push found the trace closed).
            return match flags & super::STATE == super::DEFERRED {
                true => super::release_inline(slot),
                false => super::pool::give(slot),
            };
        }
        // SAFETY: made by `take` in a box of this layout, and emptied above.
        let b = unsafe { Box::from_raw(p.cast::<MaybeUninit<Node>>()) };
        super::boxes::keep(&FREE, &GUARD, b, KEEP);
        // After the box is kept: nothing then waits in a register across a call.
        let_go();
    }

    /// A freed node's hold on its trace: its lease's (see `write_node`), or its own count; and a
    /// deferred record's place in its parent's count (CAP-DEFER-2), given back as part of the
    /// lease's bookkeeping on the parent's thread, else with a locked instruction.
    ///
    /// # Safety
    /// What the node held, given back once, here.
    #[inline(always)]
    unsafe fn let_go(
        inner: std::mem::ManuallyDrop<std::sync::Arc<super::Inner>>,
        lease: Option<NonNull<super::Lease>>,
        counted_in: Option<NonNull<super::Kids>>,
    ) {
        let given = match lease {
            // SAFETY: the lease this node was made under, and the count, alive while this record
            // is counted in it: the function's contract.
            Some(lease) => unsafe { super::lease::give(lease, counted_in) },
            None => {
                drop(std::mem::ManuallyDrop::into_inner(inner));
                false
            }
        };
        if let (Some(k), false) = (counted_in, given) {
            // SAFETY: as above.
            unsafe { super::kids::gone_away(k) };
        }
    }

    // [`free`] drops only a node's `inner`: the other fields must need no drop.
    const _: () = assert!(
        !std::mem::needs_drop::<NonNull<crate::write::Shared>>()
            && !std::mem::needs_drop::<Option<NonNull<super::Lease>>>()
            && !std::mem::needs_drop::<std::sync::atomic::AtomicU64>()
            && !std::mem::needs_drop::<std::cell::UnsafeCell<super::Pos>>()
    );
}

/// Describes an event before it is emitted. Made by [`RecordHandle::event`].
#[must_use = "an event is written only by emit_at() or emit()"]
pub struct EventBuilder<'a> {
    record: &'a RecordHandle,
    p: Pending,
    /// The cycle given to [`RecordHandle::event_at`], which capture has judged.
    at: Option<u64>,
}

impl EventBuilder<'_> {
    data_methods!();

    /// Hint: marker color.
    #[inline(always)]
    pub fn color(self, c: Color) -> Self {
        self.field("color", c)
    }
    /// Hint: icon identifier, e.g. `cache_miss`.
    #[inline(always)]
    pub fn icon(mut self, icon: impl Into<Str>) -> Self {
        if let Some(line) = self.p.line() {
            line.data.push("icon", Value::Str(icon.into()));
        }
        self
    }
    /// Hint: severity.
    #[inline(always)]
    pub fn severity(self, s: Severity) -> Self {
        self.field("severity", s)
    }
    /// Hint: marker shape.
    #[inline(always)]
    pub fn marker_style(self, m: MarkerStyle) -> Self {
        self.field("marker_style", m)
    }

    /// Writes the `event` line at `clk`, which may not be before the record's start.
    #[inline(always)]
    pub fn emit_at(mut self, clk: u64) -> Result<(), Error> {
        self.record.check_clk(clk)?;
        check_at(self.at, clk)?;
        let Some(line) = self.p.line() else {
            // Inert (capture left the event out, or its record is not written): counted, and
            // nothing else to look at. The general path asks again what was asked when the
            // builder was made.
            self.record.not_written(DROP_EVENT);
            return Ok(());
        };
        line.clk = clk;
        self.record.push::<DROP_EVENT>(&mut self.p)
    }

    /// Writes the `event` line at the cycle given to [`RecordHandle::event_at`], or else at the
    /// trace clock's current cycle (never before the record's start).
    #[inline(always)]
    pub fn emit(self) -> Result<(), Error> {
        let clk = self.at.unwrap_or_else(|| self.record.now());
        self.emit_at(clk)
    }
}

/// Describes an annotation before it is emitted. Made by [`RecordHandle::annotation`].
#[must_use = "an annotation is written only by emit()"]
pub struct AnnotationBuilder<'a> {
    record: &'a RecordHandle,
    p: Pending,
}

impl AnnotationBuilder<'_> {
    data_methods!();

    /// Writes the `annotation` line. With no data given, `data` is written as `{}` (the spec
    /// requires the key).
    #[inline(always)]
    pub fn emit(mut self) -> Result<(), Error> {
        self.record.push::<DROP_ANNOTATION>(&mut self.p)
    }
}
