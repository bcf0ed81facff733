//! Encoder threads: the writer thread decides the order of lines, these threads format them.
//!
//! With more than one encoder ([`crate::TraceBuilder::encoders`]) the writer thread is a
//! *sequencer*: it walks the rings in dependency order exactly as it does alone (the same rule,
//! so the file order is valid by the same argument) but only collects entry pointers into
//! numbered batches. Batch `k` goes to encoder `k mod E`, which encodes each entry where it lies
//! in its ring (no copy), drops it, and, for a compressed file, compresses the batch into one
//! complete gzip member or zstd frame. The writer thread writes the returned batches strictly in
//! number order, and only then hands the batch's ring words back to the producers, so an entry
//! is never overwritten while an encoder reads it.

use std::collections::BTreeMap;
use std::io;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::Arc;
use std::thread::{self, JoinHandle};

use super::line::Entry;
use super::sink::Codec;
use super::spsc::Consumer;
use super::writer::encode_counted;
use super::Summary;

/// An entry in a ring, popped by the sequencer and not yet encoded.
struct At(*mut u64);

// SAFETY: the entry's values are `Send` (line.rs); the sequencer does not touch an entry after
// putting it in a batch, and its words are not handed back to the producer until the batch
// returns, so exactly one thread uses it at a time.
unsafe impl Send for At {}

/// A numbered batch: entries to encode, then what they became.
pub(super) struct Job {
    seq: u64,
    entries: Vec<At>,
    /// Estimated output size (entry words), to end the batch.
    weight: usize,
    /// The encoded lines.
    pub(super) out: Vec<u8>,
    /// The lines as one compressed stream, for a compressed file.
    pub(super) frame: Option<Vec<u8>>,
    /// What the lines were (records, events... and the largest clk).
    pub(super) counts: Summary,
    /// Ring word positions (ring id, position) this batch's entries end at.
    pub(super) release: Vec<(u32, usize)>,
    /// The rings' memory, alive until the batch is done, whatever happens to the writer.
    rings: Vec<Arc<dyn Send + Sync>>,
    /// Compression failed, or encoding panicked.
    pub(super) failed: Option<io::Error>,
}

impl Job {
    fn new() -> Job {
        Job {
            seq: 0,
            entries: Vec::new(),
            weight: 0,
            out: Vec::new(),
            frame: None,
            counts: Summary::default(),
            release: Vec::new(),
            rings: Vec::new(),
            failed: None,
        }
    }

    /// Encodes and drops every entry, in order, then compresses.
    fn run(&mut self, codec: Option<Codec>) {
        self.out.clear();
        for at in self.entries.drain(..) {
            // SAFETY: a published entry the sequencer gave up (see `At`), read, then dropped
            // once; its words stay in place until the batch is written.
            unsafe {
                encode_counted(&mut self.out, &mut self.counts, &Entry::read(at.0));
                Entry::drop_in_place(at.0);
            }
        }
        if let Some(codec) = codec {
            match codec.compress(&self.out) {
                Ok(frame) => self.frame = frame,
                Err(e) => self.failed = Some(e),
            }
        }
    }
}

/// The encoder threads and the batches between them and the writer thread.
pub(super) struct Pool {
    to: Vec<Sender<Job>>,
    from: Receiver<Job>,
    threads: Vec<JoinHandle<()>>,
    /// The batch being filled.
    filling: Job,
    /// Number of the next batch handed out, and of the next one to write.
    next_seq: u64,
    next_out: u64,
    /// Batches back from the encoders, waiting for an earlier one.
    done: BTreeMap<u64, Job>,
    spare: Vec<Job>,
}

impl Pool {
    /// Starts `n` encoder threads; `codec` compresses each batch (a compressed file).
    pub(super) fn new(n: usize, codec: Option<Codec>) -> io::Result<Pool> {
        let (done_tx, from) = channel();
        let mut to = Vec::with_capacity(n);
        let mut threads = Vec::with_capacity(n);
        for i in 0..n {
            let (tx, rx) = channel::<Job>();
            let done = done_tx.clone();
            threads.push(thread::Builder::new().name(format!("jets-encoder-{i}")).spawn(
                move || {
                    while let Ok(mut job) = rx.recv() {
                        if catch_unwind(AssertUnwindSafe(|| job.run(codec))).is_err() {
                            // The entries left are leaked, not dropped twice.
                            job.entries.clear();
                            job.failed = Some(io::Error::other("a JETS encoder thread panicked"));
                        }
                        if done.send(job).is_err() {
                            return;
                        }
                    }
                },
            )?);
            to.push(tx);
        }
        Ok(Pool {
            to,
            from,
            threads,
            filling: Job::new(),
            next_seq: 0,
            next_out: 0,
            done: BTreeMap::new(),
            spare: Vec::new(),
        })
    }

    /// How many encoder threads.
    pub(super) fn encoders(&self) -> usize {
        self.to.len()
    }

    /// Adds the entry at `at`, of `words` words, just popped from ring `ring` (`from`), to the
    /// batch being filled. Returns true when the batch is full.
    ///
    /// # Safety
    /// `at` is a published entry of `from`, not dropped, which the caller gives up: the pool
    /// drops it.
    pub(super) unsafe fn push(
        &mut self,
        at: *mut u64,
        words: usize,
        ring: u32,
        from: &Consumer,
    ) -> bool {
        let job = &mut self.filling;
        job.entries.push(At(at));
        let pos = from.position();
        match job.release.last_mut() {
            Some((id, p)) if *id == ring => *p = pos,
            _ => {
                job.release.push((ring, pos));
                job.rings.push(from.keep_alive());
            }
        }
        job.weight += words * 8;
        job.weight >= super::WRITE_BATCH_BYTES
    }

    /// Batches handed out and not yet taken back by [`Pool::next`].
    pub(super) fn in_flight(&self) -> u64 {
        self.next_seq - self.next_out
    }

    /// Hands the batch being filled (if any) to its encoder.
    pub(super) fn submit(&mut self) {
        if self.filling.entries.is_empty() {
            return;
        }
        let fresh = self.spare.pop().unwrap_or_else(Job::new);
        let mut job = std::mem::replace(&mut self.filling, fresh);
        job.seq = self.next_seq;
        job.weight = 0;
        let to = &self.to[(job.seq % self.to.len() as u64) as usize];
        self.next_seq += 1;
        if let Err(e) = to.send(job) {
            // Only if that encoder thread is gone, which `catch_unwind` prevents: keep the
            // order (a failed batch in its place) rather than wait for it forever.
            let mut job = e.0;
            job.entries.clear();
            job.failed = Some(io::Error::other("a JETS encoder thread is gone"));
            self.done.insert(job.seq, job);
        }
    }

    /// The next batch in number order once it is encoded; waits for it when `wait` is true.
    pub(super) fn next(&mut self, wait: bool) -> Option<Job> {
        if self.next_out == self.next_seq {
            return None;
        }
        loop {
            if let Some(job) = self.done.remove(&self.next_out) {
                self.next_out += 1;
                return Some(job);
            }
            let job = if wait { self.from.recv().ok() } else { self.from.try_recv().ok() };
            let Some(job) = job else {
                if !wait {
                    return None;
                }
                // Every encoder is gone (only one dying outside `catch_unwind` could do it):
                // the batches still out are lost. Say so: the next one in order comes back
                // failed, which fails the trace, rather than passing over them in silence.
                let mut lost = self.spare.pop().unwrap_or_else(Job::new);
                lost.seq = self.next_out;
                lost.failed = Some(io::Error::other(format!(
                    "the JETS encoder threads are gone: {} batches of lines not written",
                    self.next_seq - self.next_out
                )));
                self.next_out = self.next_seq;
                self.done.clear();
                return Some(lost);
            };
            self.done.insert(job.seq, job);
        }
    }

    /// Takes back a written batch's buffers for a later one.
    pub(super) fn recycle(&mut self, mut job: Job) {
        job.out.clear();
        job.frame = None;
        job.counts = Summary::default();
        job.release.clear();
        job.rings.clear();
        job.failed = None;
        self.spare.push(job);
    }
}

impl Drop for Pool {
    /// Lets the encoders finish what they have (each entry handed out is dropped by one of
    /// them), then joins them.
    fn drop(&mut self) {
        for at in self.filling.entries.drain(..) {
            // SAFETY: entries never handed out: dropped here, once.
            unsafe { Entry::drop_in_place(at.0) };
        }
        self.to.clear();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}
