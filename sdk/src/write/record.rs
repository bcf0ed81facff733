//! Record handles and the builders for records, events and annotations.
//!
//! Each builder holds the queued [`Line`] it will push, filled in place by the chained calls, so
//! emitting moves the line exactly once: into the thread's ring.

use std::mem::ManuallyDrop;
use std::sync::Arc;

use super::line::{Kind, Line};
use super::ring::{self, Pos};
use super::{Inner, DROP_ANNOTATION, DROP_END, DROP_EVENT, DROP_RECORD};
use crate::capture::gate::{self, bits, Verdict};
use crate::error::Error;
use crate::format::{Color, Data, MarkerStyle, Severity, Status, Str, Value};

/// A record that has begun: the only way to add children, events, annotations, and to end it.
///
/// `Send + Sync`: share it by reference (or in an `Arc`) with other threads, which may add children
/// and events concurrently. [`RecordHandle::end_at`] consumes the handle, so a record ends once.
/// Dropping a handle without ending it leaves the record open, which the spec allows; the footer
/// counts open records.
pub struct RecordHandle {
    inner: Arc<Inner>,
    id: u64,
    start: u64,
    /// Where the record line was queued: lines pushed through this handle on another thread
    /// wait for it.
    pos: Pos,
    /// False when the drop policy dropped this record's line: then everything hanging off it is
    /// dropped (and counted) too, so no line can refer to a record missing from the file.
    live: bool,
    /// Capture control's bits for lines made through this handle (`capture::gate::bits`).
    cap: u8,
}

impl std::fmt::Debug for RecordHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecordHandle")
            .field("id", &self.id)
            .field("start", &self.start)
            .field("live", &self.live)
            .finish()
    }
}

impl RecordHandle {
    /// The record's id (unique in the trace, allocated by the SDK, starting at 1).
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The cycle at which the record began.
    pub fn start_clk(&self) -> u64 {
        self.start
    }

    /// False when the record was dropped by [`super::Policy::Drop`] or left out by capture
    /// control (and so is everything on it). True does not promise the line reaches the file: a
    /// record may be held as a possible ancestor, or kept by a flight recorder.
    pub fn is_recorded(&self) -> bool {
        self.live
    }

    /// Starts describing a child record.
    #[inline(always)]
    pub fn child(&self, name: impl Into<Str>, record_type: impl Into<Str>) -> RecordBuilder<'_> {
        let mut line = Line::new(Kind::Record, 0, name.into(), Some(self.pos));
        line.parent = Some(self.id);
        line.record_type = record_type.into();
        RecordBuilder {
            inner: &self.inner,
            parent_start: self.start,
            parent_live: self.live,
            parent_cap: self.cap,
            p: Pending::new(line),
        }
    }

    /// Starts describing an event on this record.
    #[inline(always)]
    pub fn event(&self, name: impl Into<Str>) -> EventBuilder<'_> {
        let line = Line::new(Kind::Event, self.id, name.into(), Some(self.pos));
        EventBuilder { record: self, p: Pending::new(line) }
    }

    /// Starts describing an annotation on this record.
    #[inline(always)]
    pub fn annotation(&self, name: impl Into<Str>) -> AnnotationBuilder<'_> {
        let line = Line::new(Kind::Annotation, self.id, name.into(), Some(self.pos));
        AnnotationBuilder { record: self, p: Pending::new(line) }
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
        if !self.live {
            if self.cap & bits::LEFT != 0 {
                self.inner.shared.gate.leave(gate::END);
            } else {
                // The end of a dropped record is dropped too, and counted like everything on it.
                self.inner.shared.count_drop(DROP_END);
            }
            return Ok(());
        }
        let mut line = ManuallyDrop::new(Line::new(Kind::End, self.id, Str::EMPTY, Some(self.pos)));
        line.clk = clk;
        if let Some(status) = status {
            line.data.push("status", status);
        }
        // `line` is consumed by the push whatever it returns.
        if ring::push(&self.inner.shared, &mut line)?.is_none() {
            self.inner.shared.count_drop(DROP_END);
        }
        Ok(())
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
    pub fn end_with_status_at(self, clk: u64, status: Status) -> Result<(), Error> {
        self.end_line(clk, Some(status))
    }

    /// Ends the record at the trace clock's current cycle (or at its start if the clock is behind).
    #[inline(always)]
    pub fn end(self) -> Result<(), Error> {
        let clk = self.inner.shared.clock.now().max(self.start);
        self.end_at(clk)
    }

    #[inline(always)]
    fn check_clk(&self, clk: u64) -> Result<(), Error> {
        if clk < self.start {
            return Err(Error::ClkBeforeStart { clk, start: self.start, record_id: self.id });
        }
        Ok(())
    }

    /// Pushes an event or annotation line through this handle, counting it when dropped.
    /// Takes the builder's line (see [`Pending`]).
    #[inline(always)]
    fn push(&self, mut pending: Pending, drop_kind: usize) -> Result<(), Error> {
        check_data(&pending.line, pending.error.take())?;
        let shared = &self.inner.shared;
        // The drop kinds are also capture's line-kind indices.
        if !self.live {
            if self.cap & bits::LEFT != 0 {
                shared.gate.leave(drop_kind);
            } else {
                shared.count_drop(drop_kind);
            }
            return Ok(());
        }
        let line = &pending.line;
        let captured = if drop_kind == DROP_EVENT {
            shared.gate.event(&line.name, line.clk, self.cap)
        } else {
            shared.gate.annotation(self.cap)
        };
        if !captured {
            shared.gate.leave(drop_kind);
            return Ok(());
        }
        if pending.push(shared)?.is_none() {
            shared.count_drop(drop_kind);
        }
        Ok(())
    }
}

/// A builder's line, and the data error found while building it. The line is handed to the ring
/// by reference and moved from here straight into the ring slot (one copy); `pushed` records that
/// it is gone, so that dropping an unused builder still frees it. `push` takes the `Pending` by
/// value, so no code can reach the moved-out line afterwards: the contract is the type's.
struct Pending {
    line: ManuallyDrop<Line>,
    error: Option<Box<Error>>,
    pushed: bool,
}

impl Pending {
    #[inline(always)]
    fn new(line: Line) -> Pending {
        Pending { line: ManuallyDrop::new(line), error: None, pushed: false }
    }

    #[inline(always)]
    fn push(mut self, shared: &Arc<super::Shared>) -> Result<Option<(Pos, u64)>, Error> {
        // The push consumes the line whatever it returns; `self` is dropped right after, and
        // `pushed` keeps that drop from freeing the line a second time.
        self.pushed = true;
        ring::push(shared, &mut self.line)
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        if !self.pushed {
            // SAFETY: not pushed, so the line is still ours and dropped exactly once, here.
            unsafe { ManuallyDrop::drop(&mut self.line) }
        }
    }
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
        /// Sets the human-readable description (empty by default; the key is always written).
        #[inline(always)]
        pub fn description(mut self, text: impl Into<Str>) -> Self {
            self.p.line.description = text.into();
            self
        }

        /// Adds a typed field to `data`.
        #[inline(always)]
        pub fn field(mut self, key: impl Into<Str>, value: impl Into<Value>) -> Self {
            self.p.line.data.push(key, value);
            self
        }

        /// Sets `data` wholesale from a prepared [`Data`], replacing fields added before.
        #[inline(always)]
        pub fn data(mut self, data: Data) -> Self {
            self.p.line.data = data;
            self
        }

        /// Sets `data` from JSON text; typed fields are merged into it when it is an object.
        /// A parse error is returned by the call that writes the line.
        pub fn data_json(mut self, text: &str) -> Self {
            if let Err(e) = self.p.line.data.parse_json(text) {
                self.p.error = Some(Box::new(Error::InvalidJson(e.to_string())));
            }
            self
        }
    };
}

/// Describes a record before it begins. Made by [`super::Trace::root`] or [`RecordHandle::child`].
#[must_use = "a record is written only by begin_at() or begin()"]
pub struct RecordBuilder<'a> {
    inner: &'a Arc<Inner>,
    parent_start: u64,
    parent_live: bool,
    parent_cap: u8,
    p: Pending,
}

impl<'a> RecordBuilder<'a> {
    #[inline(always)]
    pub(super) fn root(inner: &'a Arc<Inner>, name: Str, record_type: Str) -> Self {
        let mut line = Line::new(Kind::Record, 0, name, None);
        line.record_type = record_type;
        RecordBuilder {
            inner,
            parent_start: 0,
            parent_live: true,
            parent_cap: 0,
            p: Pending::new(line),
        }
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
    pub fn display_label(self, label: impl Into<Str>) -> Self {
        self.field("display_label", Value::Str(label.into()))
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
        if let Some(parent) = self.p.line.parent {
            if clk < self.parent_start {
                return Err(Error::ClkBeforeStart {
                    clk,
                    start: self.parent_start,
                    record_id: parent,
                });
            }
        }
        check_data(&self.p.line, self.p.error.take())?;
        self.p.line.clk = clk;
        let shared = &self.inner.shared;
        let line = &self.p.line;
        let (verdict, mut cap) = if self.parent_live {
            shared.gate.record(
                &line.record_type,
                || gate::unit_of(line.data.fields()),
                clk,
                self.parent_cap,
            )
        } else {
            (Verdict::Leave, self.parent_cap & bits::LEFT)
        };
        let pushed = if verdict == Verdict::Leave {
            None
        } else {
            self.p.line.hold = verdict == Verdict::Hold;
            self.p.push(shared)?
        };
        if pushed.is_none() {
            if cap & bits::LEFT != 0 {
                shared.gate.leave(gate::RECORD);
            } else {
                cap = 0;
                shared.count_drop(DROP_RECORD);
            }
        }
        let (pos, id) = pushed.unwrap_or((Pos { ring: u32::MAX, index: u64::MAX }, 0));
        Ok(RecordHandle {
            inner: Arc::clone(self.inner),
            id,
            start: clk,
            pos,
            live: pushed.is_some(),
            cap,
        })
    }

    /// Writes the `record` line at the trace clock's current cycle (never before the parent).
    #[inline(always)]
    pub fn begin(self) -> Result<RecordHandle, Error> {
        let clk = self.inner.shared.clock.now().max(self.parent_start);
        self.begin_at(clk)
    }
}

/// Describes an event before it is emitted. Made by [`RecordHandle::event`].
#[must_use = "an event is written only by emit_at() or emit()"]
pub struct EventBuilder<'a> {
    record: &'a RecordHandle,
    p: Pending,
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
    pub fn icon(self, icon: impl Into<Str>) -> Self {
        self.field("icon", Value::Str(icon.into()))
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
        self.p.line.clk = clk;
        self.record.push(self.p, DROP_EVENT)
    }

    /// Writes the `event` line at the trace clock's current cycle (never before the record's start).
    #[inline(always)]
    pub fn emit(self) -> Result<(), Error> {
        let clk = self.record.inner.shared.clock.now().max(self.record.start);
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
    pub fn emit(self) -> Result<(), Error> {
        self.record.push(self.p, DROP_ANNOTATION)
    }
}
