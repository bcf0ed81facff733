//! Record handles and the builders for records, events and annotations.

use std::sync::Arc;

use super::ring::{self, Pos};
use super::writer::Msg;
use super::{Inner, DROP_ANNOTATION, DROP_END, DROP_EVENT, DROP_RECORD};
use crate::error::Error;
use crate::format::{Color, Data, MarkerStyle, Severity, Status, Str, Value};

/// Data given as JSON text is parsed when the builder method is called; a parse error is kept and
/// returned by the final call, so builders stay chainable.
#[derive(Default)]
struct Payload {
    data: Data,
    error: Option<Box<Error>>,
}

impl Payload {
    #[inline(always)]
    fn field(&mut self, key: impl Into<Str>, value: impl Into<Value>) {
        self.data.push(key, value);
    }

    fn json(&mut self, text: &str) {
        if let Err(e) = self.data.parse_json(text) {
            self.error = Some(Box::new(Error::InvalidJson(e.to_string())));
        }
    }

    /// The data, or the error found while building it. Typed fields merge only into an object.
    #[inline(always)]
    fn finish(self, object_required: bool) -> Result<Data, Error> {
        if let Some(e) = self.error {
            return Err(*e);
        }
        if !self.data.is_object() && (object_required || self.data.fields().next().is_some()) {
            return Err(Error::InvalidJson(if object_required {
                "a record's data must be a JSON object".to_owned()
            } else {
                "typed fields can only be merged into JSON data that is an object".to_owned()
            }));
        }
        Ok(self.data)
    }
}

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

    /// False when the record was dropped by [`super::Policy::Drop`] (and so is everything on it).
    pub fn is_recorded(&self) -> bool {
        self.live
    }

    /// Starts describing a child record.
    #[inline(always)]
    pub fn child(&self, name: impl Into<Str>, record_type: impl Into<Str>) -> RecordBuilder<'_> {
        let mut b = RecordBuilder::new(&self.inner, Some(self.id), name.into(), record_type.into());
        b.parent_start = self.start;
        b.parent_pos = Some(self.pos);
        b.parent_live = self.live;
        b
    }

    /// Starts describing an event on this record.
    #[inline(always)]
    pub fn event(&self, name: impl Into<Str>) -> EventBuilder<'_> {
        EventBuilder {
            record: self,
            name: name.into(),
            description: Str::EMPTY,
            payload: Payload::default(),
        }
    }

    /// Starts describing an annotation on this record.
    pub fn annotation(&self, name: impl Into<Str>) -> AnnotationBuilder<'_> {
        AnnotationBuilder {
            record: self,
            name: name.into(),
            description: Str::EMPTY,
            payload: Payload::default(),
        }
    }

    /// Ends the record at `clk` (not before its start).
    ///
    /// On error the handle is gone and the record stays open.
    #[inline]
    pub fn end_at(self, clk: u64) -> Result<(), Error> {
        self.check_clk(clk)?;
        if !self.live {
            return Ok(());
        }
        let shared = &self.inner.shared;
        if ring::push(shared, Some(self.pos), |_| Msg::End { clk, id: self.id })?.is_none() {
            shared.count_drop(DROP_END);
        }
        Ok(())
    }

    /// Ends the record at the trace clock's current cycle (or at its start if the clock is behind).
    pub fn end(self) -> Result<(), Error> {
        let clk = self.inner.shared.clock.now().max(self.start);
        self.end_at(clk)
    }

    #[inline]
    fn check_clk(&self, clk: u64) -> Result<(), Error> {
        if clk < self.start {
            return Err(Error::ClkBeforeStart { clk, start: self.start, record_id: self.id });
        }
        Ok(())
    }
}

/// Describes a record before it begins. Made by [`super::Trace::root`] or [`RecordHandle::child`].
#[must_use = "a record is written only by begin_at() or begin()"]
pub struct RecordBuilder<'a> {
    inner: &'a Arc<Inner>,
    parent: Option<u64>,
    parent_start: u64,
    parent_pos: Option<Pos>,
    parent_live: bool,
    name: Str,
    record_type: Str,
    description: Str,
    payload: Payload,
}

impl<'a> RecordBuilder<'a> {
    pub(super) fn new(
        inner: &'a Arc<Inner>,
        parent: Option<u64>,
        name: Str,
        record_type: Str,
    ) -> Self {
        RecordBuilder {
            inner,
            parent,
            parent_start: 0,
            parent_pos: None,
            parent_live: true,
            name,
            record_type,
            description: Str::EMPTY,
            payload: Payload::default(),
        }
    }

    /// Sets the human-readable description (empty by default; the key is always written).
    #[inline(always)]
    pub fn description(mut self, text: impl Into<Str>) -> Self {
        self.description = text.into();
        self
    }

    /// Adds a typed field to `data`.
    #[inline(always)]
    pub fn field(mut self, key: impl Into<Str>, value: impl Into<Value>) -> Self {
        self.payload.field(key, value);
        self
    }

    /// Sets `data` from JSON text, which must be an object; typed fields are merged into it.
    /// A parse error is returned by `begin_at`.
    #[inline(always)]
    pub fn data_json(mut self, text: &str) -> Self {
        self.payload.json(text);
        self
    }

    /// Replaces the typed fields and JSON given so far with `data`, built elsewhere (for example
    /// by a `tracing` field visitor) without an intermediate copy.
    pub fn data(mut self, data: Data) -> Self {
        self.payload.data = data;
        self
    }

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
    pub fn begin_at(self, clk: u64) -> Result<RecordHandle, Error> {
        if let Some(parent) = self.parent {
            if clk < self.parent_start {
                return Err(Error::ClkBeforeStart {
                    clk,
                    start: self.parent_start,
                    record_id: parent,
                });
            }
        }
        let data = self.payload.finish(true)?;
        let shared = &self.inner.shared;
        let RecordBuilder { name, record_type, description, parent, .. } = self;
        let mut id = 0;
        let pushed = if self.parent_live {
            ring::push(shared, self.parent_pos, |next_id| {
                id = next_id();
                Msg::Record { clk, id, parent, name, record_type, description, data }
            })?
        } else {
            None
        };
        if pushed.is_none() {
            shared.count_drop(DROP_RECORD);
        }
        Ok(RecordHandle {
            inner: Arc::clone(self.inner),
            id,
            start: clk,
            pos: pushed.unwrap_or(Pos { ring: u32::MAX, index: u64::MAX }),
            live: pushed.is_some(),
        })
    }

    /// Writes the `record` line at the trace clock's current cycle (never before the parent).
    pub fn begin(self) -> Result<RecordHandle, Error> {
        let clk = self.inner.shared.clock.now().max(self.parent_start);
        self.begin_at(clk)
    }
}

/// Describes an event before it is emitted. Made by [`RecordHandle::event`].
#[must_use = "an event is written only by emit_at() or emit()"]
pub struct EventBuilder<'a> {
    record: &'a RecordHandle,
    name: Str,
    description: Str,
    payload: Payload,
}

impl EventBuilder<'_> {
    /// Sets the description (empty by default).
    #[inline(always)]
    pub fn description(mut self, text: impl Into<Str>) -> Self {
        self.description = text.into();
        self
    }
    /// Adds a typed field to `data`.
    #[inline(always)]
    pub fn field(mut self, key: impl Into<Str>, value: impl Into<Value>) -> Self {
        self.payload.field(key, value);
        self
    }
    /// Sets `data` from JSON text (any JSON value; typed fields merge only into an object).
    #[inline(always)]
    pub fn data_json(mut self, text: &str) -> Self {
        self.payload.json(text);
        self
    }

    /// Replaces the typed fields and JSON given so far with `data`, built elsewhere.
    pub fn data(mut self, data: Data) -> Self {
        self.payload.data = data;
        self
    }
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
    pub fn emit_at(self, clk: u64) -> Result<(), Error> {
        self.record.check_clk(clk)?;
        let data = self.payload.finish(false)?;
        let shared = &self.record.inner.shared;
        if !self.record.live {
            shared.count_drop(DROP_EVENT);
            return Ok(());
        }
        let (record_id, name, description) = (self.record.id, self.name, self.description);
        let msg = |_: &mut dyn FnMut() -> u64| Msg::Event { clk, record_id, name, description, data };
        if ring::push(shared, Some(self.record.pos), msg)?.is_none() {
            shared.count_drop(DROP_EVENT);
        }
        Ok(())
    }

    /// Writes the `event` line at the trace clock's current cycle (never before the record's start).
    pub fn emit(self) -> Result<(), Error> {
        let clk = self.record.inner.shared.clock.now().max(self.record.start);
        self.emit_at(clk)
    }
}

/// Describes an annotation before it is emitted. Made by [`RecordHandle::annotation`].
#[must_use = "an annotation is written only by emit()"]
pub struct AnnotationBuilder<'a> {
    record: &'a RecordHandle,
    name: Str,
    description: Str,
    payload: Payload,
}

impl AnnotationBuilder<'_> {
    /// Sets the description (empty by default).
    #[inline(always)]
    pub fn description(mut self, text: impl Into<Str>) -> Self {
        self.description = text.into();
        self
    }
    /// Adds a typed field to `data`.
    #[inline(always)]
    pub fn field(mut self, key: impl Into<Str>, value: impl Into<Value>) -> Self {
        self.payload.field(key, value);
        self
    }
    /// Sets `data` from JSON text (any JSON value; typed fields merge only into an object).
    #[inline(always)]
    pub fn data_json(mut self, text: &str) -> Self {
        self.payload.json(text);
        self
    }

    /// Replaces the typed fields and JSON given so far with `data`, built elsewhere.
    pub fn data(mut self, data: Data) -> Self {
        self.payload.data = data;
        self
    }

    /// Writes the `annotation` line. With no data given, `data` is written as `{}` (the spec
    /// requires the key).
    pub fn emit(self) -> Result<(), Error> {
        let data = self.payload.finish(false)?;
        let shared = &self.record.inner.shared;
        if !self.record.live {
            shared.count_drop(DROP_ANNOTATION);
            return Ok(());
        }
        let (record_id, name, description) = (self.record.id, self.name, self.description);
        let msg = |_: &mut dyn FnMut() -> u64| Msg::Annotation { record_id, name, description, data };
        if ring::push(shared, Some(self.record.pos), msg)?.is_none() {
            shared.count_drop(DROP_ANNOTATION);
        }
        Ok(())
    }
}
