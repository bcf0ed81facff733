//! The writer thread: pops the rings in dependency order, formats lines, writes large batches.

use std::io;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use super::line::{Entry, Kind};
use super::ring::Pos;
use super::sink::Sink;
use super::spsc::Consumer;
use super::{Control, Shared, Summary};
use crate::error::Error;
use crate::format::{self, Footer};

pub(crate) struct Config {
    pub(crate) flush_interval: Duration,
    pub(crate) header_bytes: u64,
}

/// A batch is written once it reaches this size (or the rings run dry, or the interval passes).
const BATCH_BYTES: usize = 256 * 1024;
/// The longest nap of an idle writer. Short enough to keep the flush interval, long enough to
/// cost nothing measurable.
const MAX_NAP: Duration = Duration::from_millis(5);

/// How many lines the writer takes from one ring before looking at the next (fairness).
const ROUND: usize = 4096;

struct Ring {
    id: u32,
    consumer: Consumer,
}

impl Drop for Ring {
    /// Frees what the lines still queued own (only after the writer failed to drain, e.g. a panic).
    fn drop(&mut self) {
        while let Some(at) = self.consumer.peek() {
            // SAFETY: a published entry, dropped once, then popped.
            let words = unsafe {
                let words = Entry::read(at).words;
                Entry::drop_in_place(at);
                words
            };
            self.consumer.pop(words);
        }
    }
}

struct Writer {
    shared: Arc<Shared>,
    sink: Option<Sink>,
    buf: Vec<u8>,
    summary: Summary,
    config: Config,
    last_write: Instant,
    dirty: bool,
    rings: Vec<Ring>,
    /// Lines popped so far from each ring, by ring id: line `index` of ring `r` is written once
    /// `popped[r] > index`.
    popped: Vec<u64>,
}

/// Runs as the writer thread is left, normally or by a panic: stops the producers, frees the
/// rings and answers every waiting flush, so nobody waits for a writer that is gone.
struct Exit(Arc<Shared>);

impl Drop for Exit {
    fn drop(&mut self) {
        let shared = &self.0;
        if thread::panicking() {
            shared.fail(Error::io(
                &shared.target,
                io::Error::other("the JETS writer thread panicked"),
            ));
        }
        if !shared.is_retired() {
            // Only after a panic: a normal close has done this already. The consumers are gone,
            // so a producer waiting for room sees its ring abandoned and returns.
            shared.quiesce(thread::yield_now);
            shared.retire();
        }
        shared.writer_gone();
    }
}

/// Runs `f`, which calls into the user's `Write`, turning a panic into an I/O error: a panicking
/// sink must fail the trace like a failing one, not kill the writer thread.
fn guarded<T>(f: impl FnOnce() -> io::Result<T>) -> io::Result<T> {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|payload| {
        let why = payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_default();
        Err(io::Error::other(format!("the trace's Write panicked: {why}")))
    })
}

pub(crate) fn run(shared: Arc<Shared>, sink: Sink, config: Config) -> Summary {
    let _exit = Exit(Arc::clone(&shared));
    let mut w = Writer {
        summary: Summary { bytes: config.header_bytes, ..Summary::default() },
        shared,
        sink: Some(sink),
        buf: Vec::with_capacity(BATCH_BYTES + 64 * 1024),
        config,
        last_write: Instant::now(),
        dirty: false,
        rings: Vec::new(),
        popped: Vec::new(),
    };
    let mut nap = Duration::from_micros(20);
    loop {
        if w.shared.control_pending.swap(false, Ordering::Acquire) {
            let control =
                std::mem::take(&mut *w.shared.control.lock().unwrap_or_else(|p| p.into_inner()));
            if let Some(end_clk) = w.serve(control) {
                return w.close(end_clk);
            }
        }
        let got = w.drain_once();
        if got > 0 {
            nap = Duration::from_micros(20);
            if w.last_write.elapsed() >= w.config.flush_interval {
                w.write_buf();
                w.flush_sink();
            }
            continue;
        }
        // Nothing ready: hand what we have to the OS, then nap with a growing backoff.
        w.write_buf();
        if w.dirty && w.last_write.elapsed() >= w.config.flush_interval {
            w.flush_sink();
        }
        thread::park_timeout(nap);
        nap = (nap * 2).min(MAX_NAP);
    }
}

impl Writer {
    fn adopt_new_rings(&mut self) {
        if !self.shared.rings_pending.swap(false, Ordering::Acquire) {
            return;
        }
        let new =
            std::mem::take(&mut self.shared.rings.lock().unwrap_or_else(|p| p.into_inner()).new);
        for (id, consumer) in new {
            let idx = id as usize;
            if self.popped.len() <= idx {
                self.popped.resize(idx + 1, 0);
            }
            self.rings.push(Ring { id, consumer });
        }
    }

    fn written(&self, pos: Pos) -> bool {
        self.popped.get(pos.ring as usize).is_some_and(|&n| n > pos.index)
    }

    /// One pass over every ring: pops each ring's lines while their dependencies are written.
    /// Returns how many lines were popped.
    ///
    /// Progress is guaranteed: a line depends only on a line pushed before it (its handle existed),
    /// so the oldest blocked line's dependency is never itself blocked behind a younger line.
    fn drain_once(&mut self) -> usize {
        self.adopt_new_rings();
        // Taken out for the pass so lines can be encoded while the ring's chunk borrows them.
        let mut rings = std::mem::take(&mut self.rings);
        let mut got = 0;
        let mut i = 0;
        while i < rings.len() {
            got += self.drain_ring(&mut rings[i]);
            // A ring whose thread has exited and which is empty will never hold lines again.
            let ring = &rings[i];
            if ring.consumer.is_abandoned() && ring.consumer.is_empty() {
                rings.swap_remove(i);
            } else {
                i += 1;
            }
        }
        // Rings adopted meanwhile (none: adoption happens only in this thread) plus the kept ones.
        rings.append(&mut self.rings);
        self.rings = rings;
        got
    }

    /// Encodes up to [`ROUND`] lines of one ring where they lie, stopping at the first whose
    /// dependency is not written yet, drops them there and hands their words back to the
    /// producer. No line is copied.
    fn drain_ring(&mut self, ring: &mut Ring) -> usize {
        let mut ready = 0;
        while ready < ROUND {
            let Some(at) = ring.consumer.peek() else { break };
            // SAFETY: a published entry; it stays in place until popped below.
            let line = unsafe { Entry::read(at) };
            if !line.after.is_none_or(|p| self.written(p)) {
                break;
            }
            self.encode(&line);
            let words = line.words;
            // SAFETY: encoded and not used again; dropped once, then popped.
            unsafe { Entry::drop_in_place(at) };
            ring.consumer.pop(words);
            ready += 1;
            if self.buf.len() >= BATCH_BYTES {
                self.write_buf();
            }
        }
        ring.consumer.release();
        self.popped[ring.id as usize] += ready as u64;
        ready
    }

    /// Pops until every ring has reached `targets` (ring id, word position), or is gone.
    fn drain_to(&mut self, targets: &[(u32, usize)]) {
        let reached = |rings: &[Ring], (id, pos): (u32, usize)| {
            rings.iter().find(|r| r.id == id).is_none_or(|r| r.consumer.position() >= pos)
        };
        while !targets.iter().all(|&t| reached(&self.rings, t)) {
            if self.drain_once() == 0 {
                thread::yield_now();
            }
        }
    }

    /// Pops until all rings are empty.
    fn drain_all(&mut self) {
        loop {
            let got = self.drain_once();
            if got == 0 && self.rings.iter().all(|r| r.consumer.is_empty()) {
                self.adopt_new_rings();
                if self.rings.iter().all(|r| r.consumer.is_empty()) {
                    return;
                }
            }
            if got == 0 {
                thread::yield_now();
            }
        }
    }

    /// Serves flush requests: everything pushed before the request is written and flushed.
    /// Returns `Some(end_clk)` when close was requested.
    fn serve(&mut self, control: Control) -> Option<Option<u64>> {
        if !control.flushes.is_empty() {
            self.adopt_new_rings();
            let targets: Vec<(u32, usize)> =
                self.rings.iter().map(|r| (r.id, r.consumer.published())).collect();
            self.drain_to(&targets);
            self.write_buf();
            self.flush_sink();
            for ack in control.flushes {
                ack.set();
            }
        }
        control.close
    }

    fn encode(&mut self, line: &Entry<'_>) {
        let out = &mut self.buf;
        let s = &mut self.summary;
        let data = (!line.data.is_empty()).then_some(&line.data as &dyn format::WriteJson);
        let (name, description) = (&**line.name, &**line.description);
        match line.kind {
            Kind::Record => {
                let rt = &**line.record_type;
                format::encode::write_record(
                    out,
                    line.clk,
                    name,
                    rt,
                    line.id,
                    line.parent,
                    description,
                    data,
                );
                s.records += 1;
            }
            Kind::End => {
                format::encode::write_record_end(out, line.clk, line.id);
                // record_end has no `data` object in the spec: its few fields (a final status)
                // are written as members of the line itself.
                for (key, value) in line.data.fields() {
                    format::json::write_key(out, key);
                    value.write_json(out);
                }
                s.record_ends += 1;
            }
            Kind::Event => {
                format::encode::write_event(out, line.clk, name, line.id, description, data);
                s.events += 1;
            }
            Kind::Annotation => {
                format::encode::write_annotation(
                    out,
                    name,
                    line.id,
                    description,
                    data.unwrap_or(&EmptyObject),
                );
                s.annotations += 1;
            }
        }
        format::encode::close_line(out);
        if line.kind != Kind::Annotation {
            s.capture_end_clk = Some(s.capture_end_clk.map_or(line.clk, |m| m.max(line.clk)));
        }
    }

    /// Hands the batch to the sink. After a failure, output is discarded (and the error kept), so
    /// producers never block on a dead sink and the file keeps its valid prefix.
    fn write_buf(&mut self) {
        if self.buf.is_empty() {
            return;
        }
        if let Some(sink) = self.sink.as_mut() {
            match guarded(|| sink.write_lines(&self.buf)) {
                Ok(()) => {
                    self.summary.bytes += self.buf.len() as u64;
                    self.dirty = true;
                }
                Err(e) => self.fail(e),
            }
        }
        self.buf.clear();
        self.last_write = Instant::now();
    }

    fn flush_sink(&mut self) {
        if let Some(sink) = self.sink.as_mut() {
            if let Err(e) = guarded(|| sink.flush()) {
                self.fail(e);
            }
        }
        self.dirty = false;
    }

    fn fail(&mut self, e: std::io::Error) {
        let sink = self.sink.take();
        // A sink that panicked may panic again when dropped.
        let _ = guarded(|| {
            drop(sink);
            Ok(())
        });
        self.shared.fail(Error::io(&self.shared.target, e));
    }

    fn close(mut self, end_clk: Option<u64>) -> Summary {
        // Every push that returned Ok belongs before the footer: wait for pushes in progress
        // (draining, so one waiting for room can finish), then drain everything.
        let shared = Arc::clone(&self.shared);
        shared.quiesce(|| {
            if self.drain_once() == 0 {
                thread::yield_now();
            }
        });
        self.drain_all();
        let s = &mut self.summary;
        s.open_records = s.records.saturating_sub(s.record_ends);
        if let Some(e) = end_clk {
            s.capture_end_clk = Some(s.capture_end_clk.map_or(e, |m| m.max(e)));
        }
        s.dropped = self.shared.dropped();
        let mut footer = Footer {
            capture_end_clk: s.capture_end_clk,
            total_records: Some(s.records),
            total_annotations: Some(s.annotations),
            total_events: Some(s.events),
            ..Footer::default()
        };
        footer.extra.insert("open_records".into(), s.open_records.into());
        if self.shared.policy == super::Policy::Drop {
            let d = s.dropped;
            footer.extra.insert("dropped_records".into(), d.records.into());
            footer.extra.insert("dropped_events".into(), d.events.into());
            footer.extra.insert("dropped_annotations".into(), d.annotations.into());
            footer.extra.insert("dropped_record_ends".into(), d.record_ends.into());
        }
        footer.write_json(&mut self.buf);
        self.write_buf();
        if let Some(sink) = self.sink.take() {
            if let Err(e) = guarded(|| sink.finish()) {
                self.shared.fail(Error::io(&self.shared.target, e));
            }
        }
        self.shared.retire();
        self.summary
    }
}

struct EmptyObject;

impl format::WriteJson for EmptyObject {
    fn write_json(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(b"{}");
    }
}
