//! A record told whole once it is over ([`RecordHandle::write_complete_child`]): its start, its
//! fields, its events and its end in one call, as gem5's O3 pipeline viewer writes an
//! instruction's stages when it retires.
//!
//! Written line by line through a handle, an instruction of a pipeline simulator costs an
//! emitting call per line: the handle's node, capture's checks and the ring's push (finding the
//! thread's ring, announcing the push to a close, publishing the entry) for each of its six or
//! seven lines. Told whole, capture judges the record once and the lines go into the ring in one
//! push: when the record is left out (capture off, or the record outside a window) nothing but
//! counting is done at all.
//!
//! The lines written are exactly those the handle calls made at the moment of this call would
//! write (`begin_child_fields_at`, then an event call per event in the order given, then
//! `end_at` or `end_with_status_at`), in the same order, with the same ids, and counted in the
//! footer alike (CAP-WHOLE-1): where capture's answer is not known for the whole record at once
//! (filters, samples, regions of interest, a repeated window, or a record that crosses a
//! window's edge) this module makes exactly those calls.

use std::mem::ManuallyDrop;

use super::{gate, left_trace_id, Node, RecordHandle, DROP_END, DROP_EVENT, DROP_RECORD};
use crate::capture::gate::Whole;
use crate::error::Error;
use crate::format::{Field, Status, Str};
use crate::write::line::{Copied, Kind, Plain, PlainRecord};
use crate::write::ring::{self, Refused};
use crate::write::Policy;

/// A record told whole, once it is over: what [`RecordHandle::write_complete_child`] writes.
///
/// Its description is empty, as that of a record begun with
/// [`RecordHandle::begin_child_fields_at`]; `fields` are its typed data fields, hints included
/// (`display_label`, `unit_id`, `color`...).
#[derive(Clone, Debug)]
pub struct CompleteRecord<'a> {
    /// The record's name.
    pub name: Str,
    /// Its `record_type`.
    pub record_type: Str,
    /// The cycle it began at: not before its parent's start.
    pub start: u64,
    /// Its typed data fields (cloned into the trace; the caller keeps them).
    pub fields: &'a [Field],
    /// Its events, written in this order: none before `start`.
    pub events: &'a [CompleteEvent<'a>],
    /// The cycle it ended at: not before `start`.
    pub end: u64,
    /// A final status for its `record_end` line, as [`RecordHandle::end_with_status_at`] gives.
    pub status: Option<Status>,
}

/// An event of a [`CompleteRecord`], with an empty description.
#[derive(Clone, Debug)]
pub struct CompleteEvent<'a> {
    /// The cycle it happened at.
    pub clk: u64,
    /// Its name.
    pub name: Str,
    /// Its typed data fields, hints included (`severity`, `icon`, `marker_style`, `color`).
    pub fields: &'a [Field],
}

impl RecordHandle {
    /// Writes a child record told whole once it is over: its `record` line, its events and its
    /// `record_end`, in one call. For a simulator that keeps what it needs of an instruction (or
    /// a memory request) while it flies, as gem5's O3 pipeline viewer keeps each stage's tick,
    /// and writes it when it retires or is squashed: much cheaper than a handle held for the
    /// record's life with a call per line, and nearly free when capture leaves it out.
    ///
    /// The trace then gets the lines, ids and counts that these calls made now would give
    /// (CAP-WHOLE-1): `begin_child_fields_at(start, name, record_type, fields)`, an event call
    /// per event in the order given, then `end_at(end)` or `end_with_status_at(end, status)`.
    /// Capture control judges them so, at the moment of this call: a region of interest is the
    /// one open now, and a trigger on one of its events fires now. The record is written later
    /// than its begin: lines of other records after its start may come before it in the file,
    /// which the format allows (only a record's own lines must follow it). A record whose
    /// simulator crashes before it is over is not in the trace (its handle's lines would be).
    ///
    /// Errors, with nothing written: `start` before this record's start
    /// ([`Error::ClkBeforeStart`]), an event or the end before `start`
    /// ([`Error::InvalidArgument`]), and what the handle calls return.
    ///
    /// ```
    /// use jets::format::Status;
    /// use jets::{CompleteEvent, CompleteRecord};
    /// # let trace = jets::Trace::to_writer(std::io::sink(), jets::Metadata::new()).unwrap();
    /// let core = trace.root("core0", "Core").begin_at(0).unwrap();
    /// // Kept by the simulator while the instruction flies...
    /// let fields = [("pc", 0x40u64.into()), ("display_label", "addi".into())];
    /// let mem = [("addr", 0x1000u64.into())];
    /// let events = [
    ///     CompleteEvent { clk: 12, name: "IF".into(), fields: &[] },
    ///     CompleteEvent { clk: 13, name: "ID".into(), fields: &[] },
    ///     CompleteEvent { clk: 15, name: "MEM".into(), fields: &mem },
    /// ];
    /// // ...and written when it retires.
    /// core.write_complete_child(CompleteRecord {
    ///     name: "addi".into(),
    ///     record_type: "Instruction".into(),
    ///     start: 12,
    ///     fields: &fields,
    ///     events: &events,
    ///     end: 17,
    ///     status: None,
    /// })
    /// .unwrap();
    /// // writes {"clk":12,"type":"record","name":"addi","record_type":"Instruction","id":2,
    /// //         "parent_id":1,"description":"","data":{"pc":64,"display_label":"addi"}}
    /// // then the three events and {"clk":17,"type":"record_end","record_id":2}
    /// # core.end_at(20).unwrap();
    /// ```
    pub fn write_complete_child(&self, record: CompleteRecord<'_>) -> Result<(), Error> {
        self.check_clk(record.start)?;
        let last = last_clk(&record)?;
        let Some(n) = self.node() else {
            // Under a record capture left out: so is everything under it.
            leave(left_trace_id(self.word), &record);
            return Ok(());
        };
        if n.flags.load(std::sync::atomic::Ordering::Relaxed) & super::LIVE == 0 {
            // Under a record the drop policy dropped: counted as dropped, line by line.
            return self.write_by_lines(record);
        }
        let block = n.shared().policy == Policy::Block;
        match n.shared().gate.whole(record.start, last, block) {
            Whole::Leave => {
                leave(n.trace_id, &record);
                Ok(())
            }
            Whole::Defer => {
                // As deferring the record would: its parent's line goes first.
                n.pushed(self.word)?;
                leave(n.trace_id, &record);
                Ok(())
            }
            Whole::Write => self.write_whole(n, record),
            Whole::Judge => self.write_by_lines(record),
        }
    }

    /// Every line of `record` pushed in one group, when all of them are captured: the entries
    /// the handle calls would push, from the caller's values. Line by line instead when a value
    /// owns something (cloned then) or the thread has no ring of its own.
    fn write_whole(&self, n: &Node, record: CompleteRecord<'_>) -> Result<(), Error> {
        let Some(fields) = Copied::new(record.fields) else {
            return self.write_by_lines(record);
        };
        if !record.events.iter().all(|e| e.name.is_static() && Copied::new(e.fields).is_some()) {
            return self.write_by_lines(record);
        }
        let after = *n.pushed(self.word)?;
        let shared = n.shared();
        let events = record.events;
        let (end, status) = (record.end, record.status);
        let mut line = ManuallyDrop::new(PlainRecord {
            clk: record.start,
            id: 0,
            parent: n.raw_id(),
            name: record.name,
            record_type: record.record_type,
            after: Some(after),
            hold: false,
            fields,
        });
        let pushed = ring::push_group(&n.inner.shared, |group| -> Result<(), Refused> {
            let Some((pos, id)) = group.push::<true, _>(&mut line)? else {
                // Dropped by the policy: so is everything under it.
                shared.count_drop(DROP_RECORD);
                (0..events.len()).for_each(|_| shared.count_drop(DROP_EVENT));
                shared.count_drop(DROP_END);
                return Ok(());
            };
            for e in events {
                // SAFETY: a static name (checked above) owns nothing: copying it is a clone.
                let name = unsafe { std::ptr::read(&e.name) };
                // Checked above: they own nothing and fit.
                let fields = Copied(e.fields);
                let mut event = ManuallyDrop::new(Plain {
                    kind: Kind::Event,
                    clk: e.clk,
                    id,
                    name,
                    after: Some(pos),
                    fields,
                });
                if group.push::<false, _>(&mut event)?.is_none() {
                    shared.count_drop(DROP_EVENT);
                }
            }
            let pushed = match status {
                None => {
                    let mut end = ManuallyDrop::new(Plain {
                        kind: Kind::End,
                        clk: end,
                        id,
                        name: Str::EMPTY,
                        after: Some(pos),
                        fields: (),
                    });
                    group.push::<false, _>(&mut end)?
                }
                Some(status) => {
                    // The entry `end_with_status_at` makes: the status as the end's one field.
                    let mut status = ManuallyDrop::new([("status", status.into())]);
                    let mut end = ManuallyDrop::new(Plain {
                        kind: Kind::End,
                        clk: end,
                        id,
                        name: Str::EMPTY,
                        after: Some(pos),
                        fields: &mut status,
                    });
                    group.push::<false, _>(&mut end)?
                }
            };
            if pushed.is_none() {
                shared.count_drop(DROP_END);
            }
            Ok(())
        });
        match pushed {
            Some(Ok(result)) => Ok(result?),
            Some(Err(refused)) => {
                // Nothing pushed: the record's line is ours to drop.
                // SAFETY: not pushed, and not used again.
                unsafe { ManuallyDrop::drop(&mut line) };
                Err(refused.into())
            }
            None => {
                // SAFETY: as above; the lines are made again, one call each.
                let line = unsafe { ManuallyDrop::take(&mut line) };
                let record = CompleteRecord {
                    name: line.name.clone(),
                    record_type: line.record_type.clone(),
                    start: line.clk,
                    fields: line.fields.0,
                    events,
                    end,
                    status,
                };
                self.write_by_lines(record)
            }
        }
    }

    /// The handle calls `record` stands for, made now: what capture judges line by line.
    #[cold]
    fn write_by_lines(&self, record: CompleteRecord<'_>) -> Result<(), Error> {
        let mut child = self.child_at(record.start, record.name, record.record_type);
        for (k, v) in record.fields {
            child = child.field(*k, v.clone());
        }
        let handle = child.begin()?;
        for e in record.events {
            let mut event = handle.event_at(e.clk, e.name.clone());
            for (k, v) in e.fields {
                event = event.field(*k, v.clone());
            }
            event.emit()?;
        }
        match record.status {
            None => handle.end_at(record.end),
            Some(status) => handle.end_with_status_at(record.end, status),
        }
    }
}

/// The last cycle of `record`'s lines, once they are found not to go before its start.
fn last_clk(record: &CompleteRecord<'_>) -> Result<u64, Error> {
    let before = |what: String, clk: u64| {
        Error::InvalidArgument(format!(
            "{what} at clk {clk} is before the start of record {:?} at clk {}: nothing written",
            &*record.name, record.start
        ))
    };
    let mut last = record.end;
    if record.end < record.start {
        return Err(before("the end".to_owned(), record.end));
    }
    for e in record.events {
        if e.clk < record.start {
            return Err(before(format!("event {:?}", &*e.name), e.clk));
        }
        last = last.max(e.clk);
    }
    Ok(last)
}

/// Counts every line of `record` as left out of trace `trace` by capture.
#[inline(always)]
fn leave(trace: u64, record: &CompleteRecord<'_>) {
    gate::left::count(trace, gate::RECORD);
    if !record.events.is_empty() {
        gate::left::count_many(trace, gate::EVENT, record.events.len() as u64);
    }
    gate::left::count(trace, gate::END);
}
