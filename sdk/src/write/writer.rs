//! The writer thread: pops the rings in dependency order, formats lines, writes large batches.

use std::io;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use super::encoders::{Job, Pool};
use super::line::{Entry, Kind};
use super::ring::Pos;
use super::sink::Sink;
use super::spsc::Consumer;
use super::WRITE_BATCH_BYTES as BATCH_BYTES;
use super::{Control, Helper, Policy, Shared, Summary};
use crate::capture::gate;
use crate::capture::keep::{self, Keeper};
use crate::capture::{
    LeftOut, COMPILED_OUT, FOOTER_CAPTURE, FOOTER_COUNTED, FOOTER_LEFT_OUT, FOOTER_LIMIT_REACHED,
    FOOTER_RECORDER_DUMPS,
};
use crate::error::Error;
use crate::format::{self, Footer};

pub(crate) struct Config {
    pub(crate) flush_interval: Duration,
    pub(crate) header_bytes: u64,
    /// Encoder threads besides this one (1: this thread encodes, see `encoders.rs`).
    pub(crate) encoders: usize,
}

/// The longest nap of an idle writer. Short enough to keep the flush interval, long enough to
/// cost nothing measurable.
const MAX_NAP: Duration = Duration::from_millis(5);

/// How long a close after a fatal signal waits for pushes in progress.
const FATAL_PATIENCE: Duration = Duration::from_millis(200);

/// How many lines the writer takes from one ring before looking at the next (fairness).
const ROUND: usize = 4096;

/// A pass over the rings that pops fewer lines than this finds the writer keeping up with the
/// emitting threads: it naps [`BATCH_NAP`] before the next pass, and then takes a batch.
/// Without the nap it chases each thread's ring line by line, and every line it reads as soon
/// as it is published takes that ring's index and the line's memory to the writer's core while
/// the producer is still writing beside them: the producer then waits for them to come back
/// (its stores leave its core in order, so one store to a line held elsewhere stalls all that
/// follow). On a 2-core VM whose cores were far apart (a round trip of 330 ns between them,
/// `jets bench`), a flight recorder's run took mostly 9.5-11.8 s chasing and 6.6-7.7 s with the
/// nap; with the cores close (65 ns), 3.1-3.3 s either way.
const FEW: usize = 1024;

/// See [`FEW`]. A producer that finds its ring full wakes the writer, so a nap never
/// holds up a lossless trace; a trace whose policy drops lines when the ring is full
/// ([`Policy::Drop`]) never naps between passes that found lines.
const BATCH_NAP: Duration = Duration::from_micros(20);

struct Ring {
    id: u32,
    consumer: Consumer,
}

impl Ring {
    /// Every word popped has been handed back (no encoder thread still reads this ring).
    fn settled(&self, released: &[usize]) -> bool {
        released[self.id as usize] == self.consumer.position()
    }
}

impl Drop for Ring {
    /// Frees what the lines still queued own (only after the writer failed to drain, e.g. a panic).
    fn drop(&mut self) {
        while let Some(at) = self.consumer.peek() {
            // SAFETY: a published entry, dropped once, then popped.
            let words = unsafe {
                let words = Entry::head(at).words;
                Entry::drop_in_place(at);
                words
            };
            self.consumer.pop(words);
        }
    }
}

struct Writer {
    /// Encoder threads, when there is more than one encoder; first, so it is dropped (its
    /// threads done with the rings' entries) before the rings.
    pool: Option<Pool>,
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
    /// Words consumed so far from each ring, by ring id (a position capture control compares
    /// with what was published).
    consumed: Vec<u64>,
    /// With encoder threads: the word position up to which each ring's entries are written,
    /// by ring id; words are handed back to the producer up to here.
    released: Vec<usize>,
    /// Capture control's writer side, when the setting holds anything back.
    keeper: Option<Keeper>,
    /// The signal dumps served (`Shared::signal_dumps` asks for more).
    signal_dumps: u64,
    /// CAP-LIM-1, once the file reached its `limit=` size: what the summary counted then (the
    /// lines in the file) and, from close, the lines counted after it.
    past_limit: Option<(Written, LeftOut)>,
}

/// What the summary counts of the lines in the file: per kind, and their largest cycle.
#[derive(Clone, Copy)]
struct Written {
    lines: LeftOut,
    capture_end_clk: Option<u64>,
}

impl Written {
    fn of(s: &Summary) -> Written {
        Written { lines: lines_of(s), capture_end_clk: s.capture_end_clk }
    }
}

/// The lines `s` counts, per kind.
fn lines_of(s: &Summary) -> LeftOut {
    LeftOut {
        records: s.records,
        events: s.events,
        annotations: s.annotations,
        record_ends: s.record_ends,
    }
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
        if !shared.is_retired() && !shared.finished() {
            // Only after a panic: a normal close has done this already (a fatal-signal close
            // leaves the rings to the dying process). The consumers are gone, so a producer
            // waiting for room sees its ring abandoned and returns.
            if shared.quiesce(thread::yield_now, None) {
                shared.retire();
            }
        }
        shared.writer_gone();
        // A signal handler waiting for this trace (WR-SIG-1) stops waiting: nothing more will
        // be written.
        shared.finished.store(true, Ordering::SeqCst);
    }
}

/// Runs `f`, which calls into the user's `Write`, turning a panic into an I/O error: a panicking
/// sink must fail the trace like a failing one, not kill the writer thread.
fn guarded<T>(f: impl FnOnce() -> io::Result<T>) -> io::Result<T> {
    super::hooks::caught(|| catch_unwind(AssertUnwindSafe(f))).unwrap_or_else(|payload| {
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
        buf: batch_buffer(),
        config,
        last_write: Instant::now(),
        dirty: false,
        rings: Vec::new(),
        popped: Vec::new(),
        consumed: Vec::new(),
        released: Vec::new(),
        keeper: None,
        pool: None,
        signal_dumps: 0,
        past_limit: None,
    };
    w.keeper = Keeper::new(&w.shared.capture);
    // Batches (module `encoders`) when another thread can encode them: encoder threads, or
    // producers that wait for room (`Policy::Block`). Otherwise this thread encodes line by line
    // and hands each pass's ring words back at once: under `Policy::Drop` a batch's words would
    // stay taken until it is written, and more lines would be dropped. Capture control decides
    // line by line in order, in this thread: its traces are encoded here too (most of their
    // lines are never encoded at all). Counting encodes nothing: there is nothing to share out.
    // A size limit is decided line by line too (CAP-LIM-1), so that the file ends at the same
    // line however the batches fell.
    let others_encode = w.config.encoders > 1 || w.shared.policy == Policy::Block;
    let capture = &w.shared.capture;
    if others_encode && w.keeper.is_none() && !capture.count && capture.limit.is_none() {
        let codec = w.sink.as_ref().and_then(Sink::codec);
        // Threads that cannot be started: this thread encodes, as with one encoder.
        w.pool = Pool::new(w.config.encoders, codec).or_else(|_| Pool::new(1, codec)).ok();
        if let Some(pool) = &w.pool {
            let _ = w.shared.helper.set(Helper::Encode(Arc::clone(pool.queue())));
        }
    }
    // A flight recorder's producers make its memory instead (a trace with a keeper has no
    // pool, so there is one helper at most).
    if let Some(stock) = w.keeper.as_ref().and_then(Keeper::stock) {
        let _ = w.shared.helper.set(Helper::Stock(Arc::clone(stock)));
    }
    let mut nap = Duration::from_micros(20);
    loop {
        if w.shared.fatal.load(Ordering::Acquire) {
            return w.close(None);
        }
        // A load first: a swap writes the cache line even when the flag is down, and this loop
        // runs all the time, while producers read `closed` and the gate beside it on every push.
        if w.shared.control_pending.load(Ordering::Relaxed)
            && w.shared.control_pending.swap(false, Ordering::Acquire)
        {
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
            if got < FEW && w.shared.policy == Policy::Block {
                thread::park_timeout(BATCH_NAP);
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
        // Load first, so that an idle check does not write the cache line (see `control_pending`).
        if !(self.shared.rings_pending.load(Ordering::Relaxed)
            && self.shared.rings_pending.swap(false, Ordering::Acquire))
        {
            return;
        }
        let new =
            std::mem::take(&mut self.shared.rings.lock().unwrap_or_else(|p| p.into_inner()).new);
        for (id, consumer) in new {
            let idx = id as usize;
            if self.popped.len() <= idx {
                self.popped.resize(idx + 1, 0);
                self.consumed.resize(idx + 1, 0);
                self.released.resize(idx + 1, 0);
            }
            self.rings.push(Ring { id, consumer });
        }
    }

    fn written(&self, pos: Pos) -> bool {
        written(&self.popped, pos)
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
            if let Some(k) = self.keeper.as_mut().filter(|k| k.recording()) {
                // CAP-REC-8: this turn takes what the ring holds now, and the recorder learns
                // which other rings hold lines now too, so that none of those published before
                // a line of this turn is missed as behind.
                rings[i].consumer.load_published();
                let id = rings[i].id;
                for r in rings.iter().filter(|r| r.id != id && !r.consumer.is_empty()) {
                    k.lines_waiting(r.id);
                }
            }
            got += self.drain_ring(&mut rings[i]);
            // A ring whose thread has exited and which is empty will never hold lines again.
            let ring = &rings[i];
            if ring.consumer.is_abandoned() && ring.consumer.is_empty() && self.settled(ring) {
                rings.swap_remove(i);
            } else {
                i += 1;
            }
        }
        // Rings adopted meanwhile (none: adoption happens only in this thread) plus the kept ones.
        rings.append(&mut self.rings);
        self.rings = rings;
        if self.pool.is_some() {
            // Rings run dry: what is batched goes to the encoders now, not when a batch fills.
            if got == 0 {
                if let Some(pool) = self.pool.as_mut() {
                    pool.submit();
                }
            }
            self.output(false);
        }
        if let Some(k) = self.keeper.as_mut() {
            let (consumed, rings) = (&self.consumed, &self.rings);
            k.end_pass(consumed, || {
                let mut published = consumed.clone();
                for r in rings {
                    published[r.id as usize] = r.consumer.published() as u64;
                }
                published
            });
        }
        got
    }

    /// Encodes up to [`ROUND`] lines of one ring where they lie, stopping at the first whose
    /// dependency is not written yet, drops them there and hands their words back to the
    /// producer. No line is copied.
    fn drain_ring(&mut self, ring: &mut Ring) -> usize {
        let ready = if self.pool.is_some() {
            let ready = self.batch_ring(ring);
            ring.consumer.release_to(self.released[ring.id as usize]);
            ready
        } else {
            let ready = self.take_ring(ring);
            // The recorder copies the lines it took before their words go back.
            if let Some(k) = self.keeper.as_mut() {
                k.copy_taken();
                k.left(ring.id, !ring.consumer.is_empty());
            }
            ring.consumer.release();
            self.released[ring.id as usize] = ring.consumer.position();
            ready
        };
        self.popped[ring.id as usize] += ready as u64;
        self.consumed[ring.id as usize] = ring.consumer.position() as u64;
        ready
    }

    /// [`Writer::drain_ring`] with encoder threads: collects the ring's entries into batches.
    fn batch_ring(&mut self, ring: &mut Ring) -> usize {
        let mut ready = 0;
        while ready < ROUND {
            let Some(at) = ring.consumer.peek() else { break };
            // SAFETY: a published entry; it stays in place until popped below.
            let (words, after) = unsafe { Entry::order(at) };
            if !after.is_none_or(|p| self.written(p)) {
                break;
            }
            // Always there (`drain_ring` batches only with a pool); taken anew each turn, since
            // `output_one` below needs the writer.
            let Some(pool) = self.pool.as_mut() else { break };
            ring.consumer.pop(words);
            // SAFETY: a published entry, given up to the pool (its words are handed back only
            // once its batch is written).
            let full = unsafe { pool.push(at, words, ring.id, &ring.consumer) };
            ready += 1;
            if full {
                pool.submit();
                // A bounded number of batches out: past it, write the oldest first (encoding it
                // here if nobody has taken it).
                if pool.in_flight() >= pool.max_in_flight() {
                    self.output_one(true);
                }
            }
        }
        ready
    }

    /// [`Writer::drain_ring`] on the writer thread alone: each entry goes to the keeper, or is
    /// encoded (or counted) onto the batch, which is written whenever it fills.
    ///
    /// The choice between the keeper and the batch, and the batch's `Counted`, are made once
    /// per run of lines that fit in the batch, not once per line: made per line (the pool's and
    /// the keeper's options tested, the `Counted` stored anew for the keeper's `&mut dyn Out`),
    /// they cost the writer thread 13 to 16 instructions a line (callgrind, Tiny5, 2026-11-28:
    /// recorder 273.4 -> 260.6, count 97.3 -> 81.4).
    fn take_ring(&mut self, ring: &mut Ring) -> usize {
        let mut ready = 0;
        if let Some(k) = self.keeper.as_mut() {
            k.taking_from(ring.id);
        }
        loop {
            let Writer { keeper, buf, summary, shared, popped, past_limit, .. } = self;
            // Past the size limit, lines are only counted (CAP-LIM-1).
            let counting = shared.capture.count || past_limit.is_some();
            let full_at = batch_full_at(shared.capture.limit, summary.bytes, past_limit.is_some());
            let mut out = Counted { buf, summary, counting, full_at };
            let popped: &[u64] = popped;
            let stopped = match keeper.as_mut() {
                // A trigger's dump stops only at a full batch (`Out::full`), which ends the run
                // too: the dump is finished below before another line is taken. A delayed
                // trigger's dump due before a line (CAP-REC-5) ends the run with that line left
                // in the ring, offered again once the dump is written.
                Some(k) => {
                    // A flight recorder's turn takes what was published when `drain_once`
                    // looked at the rings (CAP-REC-8).
                    let fresh = !k.recording();
                    // SAFETY: a published entry, not dropped, given up to the keeper (it writes
                    // and drops it, or keeps it; or, returning false, leaves it untouched).
                    let stopped = pop_ready(ring, &mut ready, popped, fresh, |at| unsafe {
                        match k.line(at, &mut out) {
                            true if keep::Out::full(&out) => Took::Full,
                            true => Took::Taken,
                            false => Took::Later,
                        }
                    });
                    // Ends of written records that left the recorder's window (CAP-REC-9).
                    k.write_leaving_ends(&mut out);
                    stopped
                }
                // SAFETY: as above; encoded (or counted) and dropped.
                None => pop_ready(ring, &mut ready, popped, true, |at| unsafe {
                    keep::Out::take(&mut out, at);
                    match keep::Out::full(&out) {
                        true => Took::Full,
                        false => Took::Taken,
                    }
                }),
            };
            let limit = self.shared.capture.limit;
            if self.buf.len() >= batch_full_at(limit, self.summary.bytes, self.past_limit.is_some())
            {
                self.write_buf();
            }
            if self.keeper.as_ref().is_some_and(Keeper::dumping) {
                self.dump();
            }
            if stopped {
                return ready;
            }
        }
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
        let signal_flushes = self.shared.signal_flushes[0].load(Ordering::Acquire);
        let signal_flush = signal_flushes > self.shared.signal_flushes[1].load(Ordering::Relaxed);
        let signal_dumps = self.shared.signal_dumps.load(Ordering::Acquire);
        let signal_dump = signal_dumps != self.signal_dumps;
        let dump = !control.dumps.is_empty() || signal_dump;
        if !control.flushes.is_empty() || dump || signal_flush {
            self.adopt_new_rings();
            let targets: Vec<(u32, usize)> =
                self.rings.iter().map(|r| (r.id, r.consumer.published())).collect();
            self.drain_to(&targets);
            if dump {
                self.dump();
                self.signal_dumps = signal_dumps;
            }
            self.write_buf();
            self.flush_sink();
            for ack in control.flushes.into_iter().chain(control.dumps) {
                ack.set();
            }
            self.shared.signal_flushes[1].store(signal_flushes, Ordering::Release);
        }
        control.close
    }

    fn settled(&self, ring: &Ring) -> bool {
        ring.settled(&self.released)
    }

    /// Writes the encoded batches that are next in order; with `wait`, every batch in flight.
    fn output(&mut self, wait: bool) {
        while self.output_one(wait) {}
    }

    /// Writes the next batch in order, if encoded (or waits for it); false when there was none.
    fn output_one(&mut self, wait: bool) -> bool {
        let Some(job) = self.pool.as_mut().and_then(|p| p.next(wait)) else { return false };
        self.write_job(&job);
        for &(id, pos) in &job.release {
            let r = &mut self.released[id as usize];
            *r = (*r).max(pos);
        }
        for ring in &mut self.rings {
            ring.consumer.release_to(self.released[ring.id as usize]);
        }
        if let Some(pool) = self.pool.as_mut() {
            pool.recycle(job);
        }
        true
    }

    /// Writes an encoded batch (after a failure, discards it like `write_buf`).
    fn write_job(&mut self, job: &Job) {
        let c = &job.counts;
        let s = &mut self.summary;
        s.records += c.records;
        s.record_ends += c.record_ends;
        s.events += c.events;
        s.annotations += c.annotations;
        if let Some(clk) = c.capture_end_clk {
            s.capture_end_clk = Some(s.capture_end_clk.map_or(clk, |m| m.max(clk)));
        }
        if let Some(e) = &job.failed {
            let e = io::Error::new(e.kind(), e.to_string());
            if self.sink.is_some() {
                self.fail(e);
            }
            return;
        }
        if let Some(sink) = self.sink.as_mut() {
            let written = match &job.frame {
                Some(frame) => guarded(|| sink.write_frame(frame)),
                None => guarded(|| sink.write_lines(&job.out)),
            };
            match written {
                Ok(()) => self.wrote(job.out.len() as u64),
                Err(e) => self.fail(e),
            }
        }
        self.last_write = Instant::now();
    }

    /// Writes the flight recorder's lines (or the rest of a dump under way), a batch at a time.
    ///
    /// A dump of more than one batch is encoded on this thread while a thread of its own writes
    /// the batches already encoded ([`Writer::dump_writing_beside`]), except after a fatal
    /// signal, when no thread is started (the thread that took it may hold a lock a new thread
    /// needs).
    fn dump(&mut self) {
        if self.dump_batch() {
            return;
        }
        if !self.shared.fatal.load(Ordering::Acquire) && self.dump_writing_beside() {
            return;
        }
        loop {
            self.write_buf();
            if self.dump_batch() {
                return;
            }
        }
    }

    /// Encodes the dump into the batch until the batch is full (false) or the dump is done.
    fn dump_batch(&mut self) -> bool {
        let Writer { keeper, buf, summary, shared, .. } = self;
        let Some(keeper) = keeper.as_mut() else { return true };
        // A recorder has no size limit (CAP-LIM-1): a batch's worth.
        keeper.dump(&mut Counted {
            buf,
            summary,
            counting: shared.capture.count,
            full_at: BATCH_BYTES,
        })
    }

    /// Finishes a dump whose first batch is encoded (and not written): each full batch goes to a
    /// thread that writes it while this one encodes the next (the last one, partial, stays in
    /// `buf` for the lines after it). Returns false, having done nothing, when there is no
    /// sink or the thread cannot be started.
    ///
    /// Why: a dump is written when the simulator waits for it (at close, or a trigger's dump
    /// that holds up the lines after it), and a third of its time was the `write` calls (Tiny5's
    /// 100 k-cycle recorder at close, 57.8 MB: 12 of 33 ms); at close, the simulator's core is
    /// free to take them. The order of the file is the batches' order: one channel, one writer.
    fn dump_writing_beside(&mut self) -> bool {
        use std::sync::mpsc::{channel, sync_channel};
        use std::sync::{Mutex, PoisonError};
        if self.sink.is_none() {
            return false;
        }
        // Lent to the writing thread; back in `self.sink` whatever happens to it.
        let sink = Mutex::new(self.sink.take());
        let written = thread::scope(|scope| {
            // One batch waiting while one is written: at most three batches exist at once.
            let (to_write, full) = sync_channel::<Vec<u8>>(1);
            let (to_reuse, spare) = channel::<Vec<u8>>();
            let sink = &sink;
            let writing = thread::Builder::new().name("jets-dump".into()).spawn_scoped(
                scope,
                move || -> io::Result<u64> {
                    let mut sink = sink.lock().unwrap_or_else(PoisonError::into_inner);
                    let mut result = Ok(0);
                    for batch in full {
                        // After a failure, batches are taken and discarded: the encoding side
                        // finds out when the dump is done.
                        if let (Ok(bytes), Some(sink)) = (&mut result, sink.as_mut()) {
                            match guarded(|| sink.write_lines(&batch)) {
                                Ok(()) => *bytes += batch.len() as u64,
                                Err(e) => result = Err(e),
                            }
                        }
                        let mut batch = batch;
                        batch.clear();
                        let _ = to_reuse.send(batch);
                    }
                    result
                },
            );
            let writing = writing.ok()?;
            loop {
                let next = spare.try_recv().unwrap_or_else(|_| batch_buffer());
                let batch = std::mem::replace(&mut self.buf, next);
                if to_write.send(batch).is_err() || self.dump_batch() {
                    break;
                }
            }
            drop(to_write);
            Some(writing.join())
        });
        self.sink = sink.into_inner().unwrap_or_else(PoisonError::into_inner);
        let Some(written) = written else { return false };
        self.last_write = Instant::now();
        match written {
            Ok(Ok(bytes)) => self.wrote(bytes),
            Ok(Err(e)) => self.fail(e),
            Err(_) => self.fail(io::Error::other("the JETS dump's writing thread panicked")),
        }
        // A thread that panicked refuses the batches after: the dump is finished here.
        while self.keeper.as_ref().is_some_and(Keeper::dumping) && !self.dump_batch() {
            self.write_buf();
        }
        true
    }
}

/// Whether the line at `pos` has been taken from its ring, by the lines popped from each ring.
#[inline(always)]
fn written(popped: &[u64], pos: Pos) -> bool {
    popped.get(pos.ring as usize).is_some_and(|&n| n > pos.index)
}

/// Pops the entries of `ring` whose dependencies are written and gives each to `take`, up to
/// [`ROUND`] lines in all (`ready` counts them), until `take` says the batch is full or leaves
/// an entry for a dump to be written first. Returns true when it stopped for another reason
/// (the ring is empty, a line waits, or the round is done).
///
/// `take` is given each entry before it is popped. Unless it says [`Took::Later`] it gives the
/// entry up: it must write and drop it, or keep it, and not touch it again. Without `fresh`, only
/// the entries published when the ring was last looked at are given (a flight recorder's turn,
/// `drain_once`).
#[inline(always)]
fn pop_ready(
    ring: &mut Ring,
    ready: &mut usize,
    popped: &[u64],
    fresh: bool,
    mut take: impl FnMut(*mut u64) -> Took,
) -> bool {
    while *ready < ROUND {
        let next = if fresh { ring.consumer.peek() } else { ring.consumer.peek_loaded() };
        let Some(at) = next else { return true };
        // SAFETY: a published entry; it stays in place until popped below.
        let (words, after) = unsafe { Entry::order(at) };
        if !after.is_none_or(|p| written(popped, p)) {
            return true;
        }
        let took = take(at);
        // One comparison on the way of nearly every line.
        if took != Took::Taken {
            if took == Took::Full {
                ring.consumer.pop(words);
                *ready += 1;
            }
            return false;
        }
        ring.consumer.pop(words);
        *ready += 1;
    }
    true
}

/// What [`pop_ready`]'s `take` did with an entry.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Took {
    /// Taken (popped next); the batch has room for more.
    Taken,
    /// Taken, and the batch is full: the run stops after popping it.
    Full,
    /// Not taken: a dump comes first (CAP-REC-5). The run stops with the entry left in the
    /// ring, to be offered again.
    Later,
}

/// The writer's batch and the totals of what went into it.
struct Counted<'a> {
    buf: &'a mut Vec<u8>,
    summary: &'a mut Summary,
    /// CAP-COUNT-1: count the line without encoding it (the totals move to
    /// `Summary::counted` at close).
    counting: bool,
    /// The batch is full when it holds this many bytes ([`batch_full_at`]).
    full_at: usize,
}

impl Counted<'_> {
    /// Counts a line of `kind` at `clk` (an annotation has no cycle: its `clk` is not looked at).
    fn count(&mut self, kind: Kind, clk: u64) {
        let s = &mut *self.summary;
        match kind {
            Kind::Record => s.records += 1,
            Kind::End => s.record_ends += 1,
            Kind::Event => s.events += 1,
            Kind::Annotation => {
                s.annotations += 1;
                return;
            }
            // Not a line of the file (and only ever given to the keeper).
            Kind::Release => return,
        }
        s.capture_end_clk = Some(s.capture_end_clk.map_or(clk, |m| m.max(clk)));
    }
}

impl keep::Out for Counted<'_> {
    // Inline, with the encoding out of line: a line only counted costs a few instructions.
    #[inline]
    fn put(&mut self, line: &Entry<'_>) {
        if !self.counting {
            encode_line(self.buf, line);
        }
        self.count(line.kind, line.clk);
    }

    /// A line only counted is read no further than its head (`Entry::head`): its kind, its
    /// cycle and whether it owns something to drop. Read whole, its parts were found for
    /// nothing (the encoding is out of line, so the `Entry` was built in full): callgrind, Tiny5
    /// `count`, writer thread, 2026-11-28: 119.0 -> 97.3 instructions a line. Counting is
    /// inlined where the writer takes lines, the encoding and the drop of an entry that owns
    /// something are not: as one function called for every line, its entry and exit cost
    /// 15 instructions a line, and the drop inlined crowded the loop (74.6 -> 50.9).
    #[inline(always)]
    unsafe fn take(&mut self, at: *mut u64) {
        if !self.counting {
            // SAFETY: the caller's contract.
            unsafe { self.encode_at(at) };
            return;
        }
        // SAFETY: the caller's contract: a published entry, dropped once, here, if it owns
        // something.
        unsafe {
            let head = Entry::head(at);
            self.count(head.kind, head.clk);
            if !head.owns_nothing {
                drop_entry(at);
            }
        }
    }

    /// A batch's worth encoded (never while only counting: nothing is encoded). What ends a
    /// run of lines the writer takes, and a part of a dump.
    #[inline(always)]
    fn full(&self) -> bool {
        self.buf.len() >= self.full_at
    }
}

/// How many bytes make the batch full: a batch's worth, or fewer when a size limit (`limit`, not
/// reached yet) is nearer than that past the `written` bytes. CAP-LIM-1: the batch then ends at
/// the line that brings the file to the limit, and is written at once; the lines after it are
/// only counted. So the file ends at that one line wherever the batches before it ended (a
/// flush, a pass that found the rings empty): the same line in every run of a program on one
/// thread, and in `jets cut` of its whole trace (CAP-CUT-1).
#[inline(always)]
fn batch_full_at(limit: Option<u64>, written: u64, reached: bool) -> usize {
    match limit {
        Some(limit) if !reached => limit.saturating_sub(written).min(BATCH_BYTES as u64) as usize,
        _ => BATCH_BYTES,
    }
}

/// An empty batch, with room for the line that makes it full (a line is rarely above 64 KiB):
/// it is written once full, so it seldom grows.
fn batch_buffer() -> Vec<u8> {
    Vec::with_capacity(BATCH_BYTES + 64 * 1024)
}

impl Counted<'_> {
    /// [`keep::Out::take`] for a line written: reads the entry at `at`, encodes it, counts it
    /// and drops it.
    ///
    /// # Safety
    /// As for [`keep::Out::take`].
    #[inline(never)]
    unsafe fn encode_at(&mut self, at: *mut u64) {
        // SAFETY: the caller's contract.
        let line = unsafe { Entry::read(at) };
        encode_line(self.buf, &line);
        self.count(line.kind, line.clk);
        if !line.owns_nothing() {
            // SAFETY: encoded and not used again; dropped once, here.
            unsafe { Entry::drop_in_place(at) };
        }
    }
}

/// Drops the entry at `at`, out of line: most entries own nothing, and are not dropped.
///
/// # Safety
/// As for [`Entry::drop_in_place`].
#[inline(never)]
unsafe fn drop_entry(at: *mut u64) {
    // SAFETY: the caller's contract.
    unsafe { Entry::drop_in_place(at) };
}

/// Encodes one line (with its newline) onto `buf`, counted in `summary`.
pub(super) fn encode_counted(buf: &mut Vec<u8>, summary: &mut Summary, line: &Entry<'_>) {
    keep::Out::put(&mut Counted { buf, summary, counting: false, full_at: BATCH_BYTES }, line);
}

/// Encodes one line (with its newline) onto `out`.
#[inline(never)]
fn encode_line(out: &mut Vec<u8>, line: &Entry<'_>) {
    {
        let data = (!line.data.is_empty()).then_some(&line.data as &dyn format::WriteJson);
        // Names and record types as `Str`: a static one is not scanned for escapes each time.
        let (name, description) = (line.name, &**line.description);
        match line.kind {
            Kind::Record => {
                format::encode::write_record(
                    out,
                    line.clk,
                    name,
                    line.record_type,
                    line.id,
                    line.parent,
                    description,
                    data,
                );
            }
            Kind::End => {
                format::encode::write_record_end(out, line.clk, line.id);
                // record_end has no `data` object in the spec: its few fields (a final status)
                // are written as members of the line itself.
                let inline = line.data.inline;
                for (key, value) in inline {
                    format::json::write_static_member_key(out, key, true);
                    value.write_json(out);
                }
                if line.data.extra.is_some() {
                    for (key, value) in line.data.fields().skip(inline.len()) {
                        format::json::write_member_key(out, key, true);
                        value.write_json(out);
                    }
                }
            }
            Kind::Event => {
                format::encode::write_event(out, line.clk, name, line.id, description, data);
            }
            Kind::Annotation => {
                format::encode::write_annotation(
                    out,
                    name,
                    line.id,
                    description,
                    data.unwrap_or(&EmptyObject),
                );
            }
            // For the capture keeper, which takes it (only a trace with one defers records, the
            // only source of releases): never a line of the file.
            Kind::Release => {
                debug_assert!(false, "a release reached the encoder");
                return;
            }
        }
        format::encode::close_line(out);
    }
}

impl Writer {
    /// Hands the batch to the sink. After a failure, output is discarded (and the error kept), so
    /// producers never block on a dead sink and the file keeps its valid prefix.
    fn write_buf(&mut self) {
        if let Some(pool) = self.pool.as_mut() {
            // Everything sequenced goes before what this thread encoded itself (the footer).
            pool.submit();
            self.output(true);
        }
        if self.buf.is_empty() {
            return;
        }
        if let Some(sink) = self.sink.as_mut() {
            match guarded(|| sink.write_lines(&self.buf)) {
                Ok(()) => self.wrote(self.buf.len() as u64),
                Err(e) => self.fail(e),
            }
        }
        self.buf.clear();
        self.last_write = Instant::now();
    }

    /// Counts `bytes` handed to the sink. CAP-LIM-1: once the file holds its `limit=` size, the
    /// file ends there, with the line that reached it (the batch ended at that line, [`batch_full_at`]):
    /// every line the writer takes from then on is only counted, and capture stops for good (as
    /// `capture_off` stops it), so that the emitting calls make no more lines. The file is a
    /// prefix of the whole trace, hence valid; the footer counts what it lacks
    /// ([`Writer::close`]).
    fn wrote(&mut self, bytes: u64) {
        self.summary.bytes += bytes;
        self.dirty = true;
        let limit = self.shared.capture.limit;
        if limit.is_some_and(|limit| self.summary.bytes >= limit) && self.past_limit.is_none() {
            self.past_limit = Some((Written::of(&self.summary), LeftOut::default()));
            self.shared.gate.stop();
        }
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
        // After a fatal signal, the thread that took it may be stuck inside a push: wait briefly.
        let patience = self.shared.fatal.load(Ordering::Acquire).then_some(FATAL_PATIENCE);
        if patience.is_some() {
            if let Some(sink) = self.sink.as_mut() {
                sink.stay_buffered();
            }
        }
        let shared = Arc::clone(&self.shared);
        let all_idle = shared.quiesce(
            || {
                if self.drain_once() == 0 {
                    thread::yield_now();
                }
            },
            patience,
        );
        self.drain_all();
        // CAP-REC-2: the recorder is written at close.
        self.dump();
        // Every batch written: the totals below count what the encoder threads encoded.
        self.write_buf();
        if let Some((written, not_written)) = self.past_limit.as_mut() {
            // CAP-LIM-1: the lines counted past the limit were not written. With a keeper, they
            // are among what it saw and the file lacks (`capture_footer`); without, they are
            // left out here.
            let s = &mut self.summary;
            s.limit_reached = true;
            let w = written.lines;
            if self.keeper.is_none() {
                *not_written += LeftOut {
                    records: s.records - w.records,
                    events: s.events - w.events,
                    annotations: s.annotations - w.annotations,
                    record_ends: s.record_ends - w.record_ends,
                };
            }
            (s.records, s.events, s.annotations, s.record_ends) =
                (w.records, w.events, w.annotations, w.record_ends);
            s.capture_end_clk = written.capture_end_clk;
        }
        let s = &mut self.summary;
        if self.shared.capture.count {
            // CAP-COUNT-1: what was counted was not written.
            s.counted = LeftOut {
                records: std::mem::take(&mut s.records),
                events: std::mem::take(&mut s.events),
                annotations: std::mem::take(&mut s.annotations),
                record_ends: std::mem::take(&mut s.record_ends),
            };
        }
        s.open_records = s.records.saturating_sub(s.record_ends);
        if let Some(e) = end_clk {
            s.capture_end_clk = Some(s.capture_end_clk.map_or(e, |m| m.max(e)));
        }
        s.dropped = self.shared.dropped();
        (s.waits_for_room, s.waited_for_room) = self.shared.waits();
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
        self.capture_footer(&mut footer);
        footer.write_json(&mut self.buf);
        self.write_buf();
        if let Some(sink) = self.sink.take() {
            if let Err(e) = guarded(|| sink.finish()) {
                self.shared.fail(Error::io(&self.shared.target, e));
            }
        }
        // The file is complete: a flight recorder's window goes back to the system beside the
        // close (`Keeper::drop_beside`), except after a fatal signal, when no thread is started.
        if let Some(keeper) = self.keeper.take() {
            if self.shared.fatal.load(Ordering::Acquire) {
                drop(keeper);
            } else {
                keeper.drop_beside();
            }
        }
        if all_idle {
            self.shared.retire();
        }
        self.shared.finished.store(true, Ordering::SeqCst);
        self.summary
    }

    /// CAP-FOOT-1: what capture control left out, and the setting that made the trace.
    fn capture_footer(&mut self, footer: &mut Footer) {
        let s = &mut self.summary;
        let mut left = self.shared.gate.left_out();
        if let Some((_, not_written)) = self.past_limit {
            left += not_written;
        }
        if let Some(k) = &self.keeper {
            // Lines the writer saw but never wrote: held records never needed, recorder lines
            // never dumped. Counted lines are not left out: the setting selected them.
            let (c, seen) = (&s.counted, &k.seen);
            left.records += seen[gate::RECORD].saturating_sub(s.records + c.records);
            left.events += seen[gate::EVENT].saturating_sub(s.events + c.events);
            left.annotations +=
                seen[gate::ANNOTATION].saturating_sub(s.annotations + c.annotations);
            left.record_ends += seen[gate::END].saturating_sub(s.record_ends + c.record_ends);
            s.dumps = k.dumps;
        }
        s.left_out = left;
        let capture = &self.shared.capture;
        if !cfg!(feature = "enabled") {
            // Built without the `enabled` feature: nothing was emitted, and nothing counted.
            footer.extra.insert(FOOTER_CAPTURE.into(), COMPILED_OUT.into());
            return;
        }
        if capture.is_full()
            && !capture.off
            && !capture.count
            && !s.limit_reached
            && left.total() == 0
        {
            return;
        }
        footer.extra.insert(FOOTER_CAPTURE.into(), capture.to_string().into());
        insert_counts(footer, FOOTER_LEFT_OUT, &left);
        if s.limit_reached {
            footer.extra.insert(FOOTER_LIMIT_REACHED.into(), true.into());
        }
        if capture.recorder.is_some() {
            footer.extra.insert(FOOTER_RECORDER_DUMPS.into(), s.dumps.into());
        }
        if capture.count {
            insert_counts(footer, FOOTER_COUNTED, &s.counted);
        }
    }
}

/// Adds one footer member per line kind, `{prefix}{kind}` (CAP-FOOT-1, CAP-COUNT-1).
fn insert_counts(footer: &mut Footer, prefix: &str, counts: &LeftOut) {
    for (kind, n) in counts.by_kind() {
        footer.extra.insert(format!("{prefix}{kind}"), n.into());
    }
}

struct EmptyObject;

impl format::WriteJson for EmptyObject {
    fn write_json(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(b"{}");
    }
}

/// The default number of encoders: one (the writer thread) on machines with up to 2 cores, where
/// a second encoder would take the simulator's core; then half the cores, at most 4 (one
/// sequencer keeps up with about that many; see ARCHITECTURE.md for more cores).
pub(crate) fn default_encoders() -> usize {
    let cores = thread::available_parallelism().map_or(1, |n| n.get());
    if cores <= 2 {
        1
    } else {
        (cores / 2).min(4)
    }
}
