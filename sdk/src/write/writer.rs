//! The writer thread: pops messages in queue order, formats them, writes large batches.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use super::sink::Sink;
use super::{Ack, Shared, Summary};
use crate::error::Error;
use crate::format::{self, Data, Footer, Str};

/// One queued line (or a control message). Built on the producer's stack, moved into the queue.
pub(crate) enum Msg {
    Record {
        clk: u64,
        id: u64,
        parent: Option<u64>,
        name: Str,
        record_type: Str,
        description: Str,
        data: Data,
    },
    End {
        clk: u64,
        id: u64,
    },
    Event {
        clk: u64,
        record_id: u64,
        name: Str,
        description: Str,
        data: Data,
    },
    Annotation {
        record_id: u64,
        name: Str,
        description: Str,
        data: Data,
    },
    Flush(Arc<Ack>),
    Close {
        end_clk: Option<u64>,
    },
}

pub(crate) struct Config {
    pub(crate) flush_interval: Duration,
    pub(crate) header_bytes: u64,
}

/// A batch is written once it reaches this size (or the queue runs dry, or the interval passes).
const BATCH_BYTES: usize = 256 * 1024;
/// The longest nap of an idle writer. Short enough to keep the flush interval, long enough to
/// cost nothing measurable.
const MAX_NAP: Duration = Duration::from_millis(5);

struct Writer {
    shared: Arc<Shared>,
    sink: Option<Sink>,
    buf: Vec<u8>,
    summary: Summary,
    config: Config,
    last_write: Instant,
    dirty: bool,
}

pub(crate) fn run(shared: Arc<Shared>, sink: Sink, config: Config) -> Summary {
    let mut w = Writer {
        summary: Summary { bytes: config.header_bytes, ..Summary::default() },
        shared,
        sink: Some(sink),
        buf: Vec::with_capacity(BATCH_BYTES + 64 * 1024),
        config,
        last_write: Instant::now(),
        dirty: false,
    };
    let mut nap = Duration::from_micros(20);
    loop {
        let mut got = 0usize;
        while let Some(msg) = w.shared.queue.pop() {
            got += 1;
            match msg {
                Msg::Close { end_clk } => return w.close(end_clk),
                Msg::Flush(ack) => {
                    w.write_buf();
                    w.flush_sink();
                    ack.set();
                }
                line => {
                    w.encode(line);
                    if w.buf.len() >= BATCH_BYTES {
                        w.write_buf();
                    }
                }
            }
            if got % 4096 == 0 && w.last_write.elapsed() >= w.config.flush_interval {
                w.write_buf();
                w.flush_sink();
            }
        }
        // The queue ran dry: hand what we have to the OS now, then nap with a growing backoff.
        w.write_buf();
        if w.dirty && w.last_write.elapsed() >= w.config.flush_interval {
            w.flush_sink();
        }
        if got > 0 {
            nap = Duration::from_micros(20);
            thread::yield_now();
        } else {
            thread::park_timeout(nap);
            nap = (nap * 2).min(MAX_NAP);
        }
    }
}

impl Writer {
    fn encode(&mut self, msg: Msg) {
        let out = &mut self.buf;
        let s = &mut self.summary;
        let clk = match msg {
            Msg::Record { clk, id, parent, name, record_type, description, data } => {
                let data = (!data.is_empty()).then_some(&data as &dyn format::WriteJson);
                format::write_record(out, clk, &name, &record_type, id, parent, &description, data);
                s.records += 1;
                Some(clk)
            }
            Msg::End { clk, id } => {
                format::write_record_end(out, clk, id);
                s.record_ends += 1;
                Some(clk)
            }
            Msg::Event { clk, record_id, name, description, data } => {
                let data = (!data.is_empty()).then_some(&data as &dyn format::WriteJson);
                format::write_event(out, clk, &name, record_id, &description, data);
                s.events += 1;
                Some(clk)
            }
            Msg::Annotation { record_id, name, description, data } => {
                if data.is_empty() {
                    format::write_annotation(out, &name, record_id, &description, &EmptyObject);
                } else {
                    format::write_annotation(out, &name, record_id, &description, &data);
                }
                s.annotations += 1;
                None
            }
            Msg::Flush(_) | Msg::Close { .. } => None,
        };
        format::close_line(out);
        if let Some(clk) = clk {
            s.capture_end_clk = Some(s.capture_end_clk.map_or(clk, |m| m.max(clk)));
        }
    }

    /// Hands the batch to the sink. After a failure, output is discarded (and the error kept), so
    /// producers never block on a dead sink and the file keeps its valid prefix.
    fn write_buf(&mut self) {
        if self.buf.is_empty() {
            return;
        }
        if let Some(sink) = self.sink.as_mut() {
            match sink.write_lines(&self.buf) {
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
            if let Err(e) = sink.flush() {
                self.fail(e);
            }
        }
        self.dirty = false;
    }

    fn fail(&mut self, e: std::io::Error) {
        self.sink = None;
        self.shared.fail(Error::io(&self.shared.target, e));
    }

    fn close(mut self, end_clk: Option<u64>) -> Summary {
        // Producers that raced with close may still have pushed lines; they belong before the
        // footer (their handles predate it), so write them.
        while let Some(msg) = self.shared.queue.pop() {
            match msg {
                Msg::Flush(ack) => ack.set(),
                Msg::Close { .. } => {}
                line => self.encode(line),
            }
        }
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
            if let Err(e) = sink.finish() {
                self.shared.fail(Error::io(&self.shared.target, e));
            }
        }
        self.shared.closed.store(true, Ordering::SeqCst);
        self.summary
    }
}

struct EmptyObject;

impl format::WriteJson for EmptyObject {
    fn write_json(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(b"{}");
    }
}
