//! A [`tracing_subscriber::Layer`] that writes spans and events as a JETS trace.
//!
//! | `tracing` | JETS |
//! |---|---|
//! | span created | `record`: name = span name; `record_type` from a `record_type` field, else the target; `description` from a `description` field, else the callsite `file:line`; parent = the span's parent (explicit or contextual) |
//! | span closed | `record_end` |
//! | event | `event` on the record of its span (explicit parent honoured, contextual otherwise); name = the message, else the callsite name |
//! | event outside any span | `event` on one root record per thread (`record_type` `"Thread"`) |
//! | `span.record(..)` later | `annotation` on the span's record, named after its first field |
//! | `span.follows_from(other)` | `annotation` `follows_from` with `data.record_id` = the other's record |
//!
//! Field values keep their types in `data` (integers, floats, bools, strings; `?x` and `%x` are
//! text). Reserved field names:
//! * `clk`: the cycle of a span's start or of an event (instead of the trace's [`SimClock`](crate::SimClock));
//! * `end_clk`: the cycle of a span's end, at creation or recorded later;
//! * `record_type`, `description`: the line's fields of those names;
//! * `jets.color`, `jets.unit_id`, `jets.thread_id`, `jets.subunit_id`, `jets.display_label`,
//!   `jets.status`, `jets.criticality` on spans and `jets.color`, `jets.icon`, `jets.severity`,
//!   `jets.marker_style` on events: the visualization hints, written under their spec names.
//!
//! `WARN` and `ERROR` events without a `jets.severity` get the `warning` / `error` severity hint.
//!
//! Cycles come from the trace's [`SimClock`](crate::SimClock) (see [`crate::TraceBuilder::clock`]), which the
//! simulator advances. A span is one record for its whole life, however often it is entered: an
//! instrumented future is one record from creation to drop, across polls and threads.
//!
//! ```
//! use tracing_subscriber::layer::SubscriberExt;
//! # fn main() -> Result<(), jets::Error> {
//! let trace = jets::Trace::to_writer(std::io::sink(), jets::Metadata::new())?;
//! let layer = jets::layer::JetsLayer::new(trace.clone());
//! let errors = layer.errors();
//! let subscriber = tracing_subscriber::registry().with(layer);
//! tracing::subscriber::with_default(subscriber, || {
//!     let span = tracing::info_span!("add", record_type = "Instruction", pc = 0x1000u64, jets.unit_id = 0);
//!     let _enter = span.enter();
//!     trace.clock().advance(3);
//!     tracing::info!(stage = 1, "Decode");
//! });
//! assert_eq!(errors.count(), 0);
//! assert_eq!(trace.close()?.records, 1);
//! # Ok(()) }
//! ```

mod callsites;
mod fields;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{self, ThreadId};

use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::layer::Context;
use tracing_subscriber::registry::{LookupSpan, SpanRef};

use crate::error::Error;
use crate::format::{Severity, Str};
use crate::write::{RecordHandle, Trace};
use callsites::Slot;
use fields::{Fields, Kind};

/// The `tracing` Layer: see the [module documentation](self).
pub struct JetsLayer {
    trace: Trace,
    roots: Mutex<HashMap<ThreadId, Arc<RecordHandle>>>,
    errors: LayerErrors,
}

/// What the layer keeps in a span's extensions.
struct SpanRecord {
    handle: RecordHandle,
    end_clk: Option<u64>,
}

impl JetsLayer {
    /// A layer writing to `trace`, reading cycles from the trace's clock.
    pub fn new(trace: Trace) -> Self {
        JetsLayer { trace, roots: Mutex::default(), errors: LayerErrors::default() }
    }

    /// The errors this layer met: a layer cannot return them to the instrumented code, so it
    /// counts them, prints the first on stderr and keeps it here. Take this before giving the
    /// layer to a subscriber.
    pub fn errors(&self) -> LayerErrors {
        self.errors.clone()
    }

    /// The root record of the current thread, which holds events outside any span.
    fn thread_root(&self, clk: u64) -> Option<Arc<RecordHandle>> {
        let current = thread::current();
        let mut roots = self.roots.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(root) = roots.get(&current.id()) {
            return Some(Arc::clone(root));
        }
        let name: Str = match current.name() {
            Some(n) => n.to_owned().into(),
            None => format!("{:?}", current.id()).into(),
        };
        let root = self
            .trace
            .root(name, "Thread")
            .description("events outside any span on this thread")
            .begin_at(clk);
        let root = Arc::new(self.errors.check(root)?);
        roots.insert(current.id(), Arc::clone(&root));
        Some(root)
    }

    /// The nearest span in `scope` (itself first) that has a record.
    fn recorded<'a, S>(scope: Option<SpanRef<'a, S>>) -> Option<SpanRef<'a, S>>
    where
        S: for<'l> LookupSpan<'l>,
    {
        let mut span = scope;
        while let Some(s) = span {
            if s.extensions().get::<SpanRecord>().is_some() {
                return Some(s);
            }
            span = s.parent();
        }
        None
    }
}

impl Drop for JetsLayer {
    /// The per-thread roots end when the layer goes (with its subscriber).
    fn drop(&mut self) {
        let roots = std::mem::take(&mut *self.roots.lock().unwrap_or_else(|p| p.into_inner()));
        for (_, root) in roots {
            if let Ok(root) = Arc::try_unwrap(root) {
                self.errors.check(root.end());
            }
        }
    }
}

/// False when built without the `enabled` feature: every callback returns at once. (Not
/// `Interest::never()`: that would silence the other layers of the subscriber too.)
const ENABLED: bool = cfg!(feature = "enabled");

impl<S> tracing_subscriber::Layer<S> for JetsLayer
where
    S: Subscriber + for<'l> LookupSpan<'l>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        if !ENABLED {
            return;
        }
        // See `lean_first`.
        if !(self.lean_first() && self.begin_span(attrs, id, &ctx, true)) {
            self.begin_span(attrs, id, &ctx, false);
        }
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        if !ENABLED {
            return;
        }
        if !(self.lean_first() && self.record_late(id, values, &ctx, true)) {
            self.record_late(id, values, &ctx, false);
        }
    }

    fn on_follows_from(&self, id: &Id, follows: &Id, ctx: Context<'_, S>) {
        if !ENABLED {
            return;
        }
        let (Some(span), Some(cause)) = (ctx.span(id), ctx.span(follows)) else { return };
        let (Some(span), Some(cause)) = (Self::recorded(Some(span)), Self::recorded(Some(cause)))
        else {
            return;
        };
        let cause_id = match cause.extensions().get::<SpanRecord>() {
            Some(rec) => rec.handle.id(),
            None => return,
        };
        let ext = span.extensions();
        if let Some(rec) = ext.get::<SpanRecord>() {
            let a = rec.handle.annotation("follows_from").field("record_id", cause_id);
            self.errors.check(
                a.description("the record this one follows from (tracing follows_from)").emit(),
            );
        }
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        if !ENABLED {
            return;
        }
        if !(self.lean_first() && self.emit_event(event, &ctx, true)) {
            self.emit_event(event, &ctx, false);
        }
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        if !ENABLED {
            return;
        }
        let Some(span) = ctx.span(&id) else { return };
        let Some(rec) = span.extensions_mut().remove::<SpanRecord>() else { return };
        self.errors.check(match rec.end_clk {
            Some(c) => rec.handle.end_at(c),
            None => rec.handle.end(),
        });
    }
}

impl JetsLayer {
    /// While capture is off, a span's record, an event and an annotation are left out whatever
    /// their fields hold, so each callback first reads only the cycles (`Fields::lean`: no Debug
    /// text formatted, no text copied, nothing allocated) and makes the builder with the
    /// callsite's own name; if the builder holds a line after all (capture came back on meanwhile)
    /// it is dropped unwritten, and the callback starts again with every field.
    fn lean_first(&self) -> bool {
        !self.trace.is_capturing()
    }

    /// `on_new_span`'s work; `lean`: see [`JetsLayer::lean_first`]. False when lean and the
    /// record's builder was not inert (nothing done).
    fn begin_span<S>(
        &self,
        attrs: &Attributes<'_>,
        id: &Id,
        ctx: &Context<'_, S>,
        lean: bool,
    ) -> bool
    where
        S: Subscriber + for<'l> LookupSpan<'l>,
    {
        let Some(span) = ctx.span(id) else { return true };
        let meta = span.metadata();
        let mut fields = match lean {
            true => Fields::lean(Kind::Record, meta),
            false => Fields::new(Kind::Record, meta, String::new()),
        };
        attrs.record(&mut fields);
        let name = Str::Static(meta.name());
        let record_type = fields.record_type.take().unwrap_or(Str::Static(meta.target()));
        let (clk, end_clk) = (fields.clk, fields.end_clk);
        // Straight-line, so the line is built in place: no closure moving the data around.
        let ancestor = Self::recorded(span.parent());
        let ext = ancestor.as_ref().map(|a| a.extensions());
        let builder = match ext.as_ref().and_then(|e| e.get::<SpanRecord>()) {
            Some(parent) => parent.handle.child(name, record_type),
            None => self.trace.root(name, record_type),
        };
        if lean && !builder.is_inert() {
            return false;
        }
        let builder = match lean {
            true => builder,
            false => {
                let description = match fields.description.take() {
                    Some(d) => d,
                    None => callsites::description(meta),
                };
                builder.description(description).data(fields.data)
            }
        };
        let result = match clk {
            Some(c) => builder.begin_at(c),
            None => builder.begin(),
        };
        drop(ext);
        if let Some(handle) = self.errors.check(result) {
            span.extensions_mut().insert(SpanRecord { handle, end_clk });
        }
        true
    }

    /// `on_record`'s work (fields recorded after the span's record was written: an annotation);
    /// `lean` as in [`JetsLayer::begin_span`].
    fn record_late<S>(&self, id: &Id, values: &Record<'_>, ctx: &Context<'_, S>, lean: bool) -> bool
    where
        S: Subscriber + for<'l> LookupSpan<'l>,
    {
        let Some(span) = ctx.span(id) else { return true };
        let mut fields = match lean {
            true => Fields::lean(Kind::Late, span.metadata()),
            false => Fields::new(Kind::Late, span.metadata(), String::new()),
        };
        values.record(&mut fields);
        let mut ext = span.extensions_mut();
        let Some(rec) = ext.get_mut::<SpanRecord>() else { return true };
        if let Some(name) = fields.first {
            let a = rec.handle.annotation(name);
            if lean && !a.is_inert() {
                return false;
            }
            let mut a = a.data(fields.data);
            if let Some(d) = fields.description {
                a = a.description(d);
            }
            self.errors.check(a.emit());
        }
        if fields.end_clk.is_some() {
            rec.end_clk = fields.end_clk;
        }
        true
    }

    /// `on_event`'s work; `lean` as in [`JetsLayer::begin_span`].
    fn emit_event<S>(&self, event: &Event<'_>, ctx: &Context<'_, S>, lean: bool) -> bool
    where
        S: Subscriber + for<'l> LookupSpan<'l>,
    {
        let meta = event.metadata();
        let mut fields = match lean {
            true => Fields::lean(Kind::Event, meta),
            false => Fields::new(Kind::Event, meta, callsites::take_buffer()),
        };
        event.record(&mut fields);
        let name = match fields.has_message && !lean {
            true => callsites::text(meta, Slot::Message, &fields.message),
            false => Str::Static(meta.name()),
        };
        if !lean {
            // (A lean reading did not take the thread's buffer: it has none to give back.)
            callsites::return_buffer(std::mem::take(&mut fields.message));
        }
        let severity = match *meta.level() {
            Level::ERROR => Some(Severity::Error),
            Level::WARN => Some(Severity::Warning),
            _ => None,
        };
        let ancestor = match ctx.event_span(event) {
            Some(span) => match Self::recorded(Some(span)) {
                Some(a) => Some(a),
                None => return true,
            },
            None => None,
        };
        let ext = ancestor.as_ref().map(|a| a.extensions());
        let root = match ancestor {
            Some(_) => None,
            None => self.thread_root(fields.clk.unwrap_or_else(|| self.trace.clock().now())),
        };
        let record = match (ext.as_ref().and_then(|e| e.get::<SpanRecord>()), &root) {
            (Some(rec), _) => &rec.handle,
            (None, Some(root)) => root,
            (None, None) => return true,
        };
        let e = record.event(name);
        if lean && !e.is_inert() {
            return false;
        }
        let mut e = e.data(fields.data);
        if let Some(d) = fields.description {
            e = e.description(d);
        }
        if let (Some(s), false) = (severity, fields.has_severity) {
            e = e.severity(s);
        }
        self.errors.check(match fields.clk {
            Some(c) => e.emit_at(c),
            None => e.emit(),
        });
        true
    }
}

/// Errors met by a [`JetsLayer`]: a count and the first one. Cheap to clone; every clone sees the
/// same counts.
///
/// [`Error::Closed`] (spans that end after the trace was closed) is not counted: closing the trace
/// while spans are open is how a program ends, and the footer counts the open records.
#[derive(Clone, Debug, Default)]
pub struct LayerErrors(Arc<ErrorsInner>);

#[derive(Debug, Default)]
struct ErrorsInner {
    count: AtomicU64,
    first: Mutex<Option<Error>>,
}

impl LayerErrors {
    /// How many calls failed.
    pub fn count(&self) -> u64 {
        self.0.count.load(Ordering::Relaxed)
    }

    /// The first failure.
    pub fn first(&self) -> Option<Error> {
        self.0.first.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn check<T>(&self, result: Result<T, Error>) -> Option<T> {
        match result {
            Ok(v) => Some(v),
            Err(Error::Closed) => None,
            Err(e) => {
                if self.0.count.fetch_add(1, Ordering::Relaxed) == 0 {
                    // Nobody can receive this error where it happened: say it once.
                    eprintln!("jets: tracing layer: {e} (further errors are only counted)");
                    *self.0.first.lock().unwrap_or_else(|p| p.into_inner()) = Some(e);
                }
                None
            }
        }
    }
}
