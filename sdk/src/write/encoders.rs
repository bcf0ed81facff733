//! Encoding in batches: the writer thread decides the order of lines; whoever is free formats
//! them.
//!
//! The writer thread (of a trace that writes every line, under `Policy::Block` or with encoder
//! threads) is a *sequencer*: it walks the rings in dependency order exactly as it does
//! alone (the same rule, so the file order is valid by the same argument) but only collects entry
//! pointers into numbered batches, which go to one [`Queue`]. A batch is taken, oldest first, by
//! an encoder thread ([`crate::TraceBuilder::encoders`] above 1), by the writer thread itself when
//! there is none, or by a producer that waits for room in its ring ([`Queue::help`]): on a
//! machine whose cores are all busy (a simulator on one, the writer on the other), the producer's
//! wait is the writer's missing core. The taker encodes each entry where it lies in its ring (no
//! copy), drops it, and, for a compressed file, compresses the batch into one complete gzip member
//! or zstd frame. The writer thread writes the returned batches strictly in number order, and only
//! then hands the batch's ring words back to the producers, so an entry is never overwritten while
//! a batch is encoded.

use std::collections::{BTreeMap, VecDeque};
use std::io;
use std::panic::{catch_unwind, AssertUnwindSafe};
#[cfg(test)]
use std::sync::atomic::AtomicU64;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Condvar, Mutex};
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
            // once (a no-op skipped when it owns nothing); its words stay in place until the
            // batch is written.
            unsafe {
                let entry = Entry::read(at.0);
                encode_counted(&mut self.out, &mut self.counts, &entry);
                if !entry.owns_nothing() {
                    Entry::drop_in_place(at.0);
                }
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

/// The batches waiting to be encoded, shared by whoever encodes them: the encoder threads, the
/// writer thread when it has no encoder thread, and producers waiting for room in their ring
/// ([`Queue::help`]).
pub(crate) struct Queue {
    todo: Mutex<Todo>,
    /// Wakes an encoder thread when a batch is queued, or all of them at shutdown.
    ready: Condvar,
    /// Batches in `todo`: read before taking the lock, so that a producer's check costs a load.
    waiting: AtomicUsize,
    done: Sender<Job>,
    codec: Option<Codec>,
    /// Batches encoded by producers ([`Queue::help`]), counted for the tests.
    #[cfg(test)]
    helped: AtomicU64,
}

#[derive(Default)]
struct Todo {
    jobs: VecDeque<Job>,
    shutdown: bool,
}

impl Queue {
    /// For a producer waiting for room in its ring: encodes the oldest waiting batch, as
    /// [`Queue::encode_next`] does (counted in test builds).
    pub(crate) fn help(&self) -> bool {
        let helped = self.encode_next();
        #[cfg(test)]
        if helped {
            self.helped.fetch_add(1, Ordering::Relaxed);
        }
        helped
    }

    /// Batches encoded by producers so far.
    #[cfg(test)]
    pub(crate) fn helped(&self) -> u64 {
        self.helped.load(Ordering::Relaxed)
    }

    /// Encodes the oldest waiting batch on this thread and hands it back to the writer; false
    /// when there was none (or another thread holds the queue: this call never waits for a lock,
    /// so a thread that forked or a signal handler cannot hang here).
    fn encode_next(&self) -> bool {
        if self.waiting.load(Ordering::Relaxed) == 0 {
            return false;
        }
        // Signals wait until the batch is done: a handler that ran meanwhile on this thread (a
        // fatal-signal flush, `Trace::flush_signal_safe`) would wait for the writer, which
        // waits for this batch.
        signals_held(|| {
            let Some(job) = self.todo.try_lock().ok().and_then(|mut t| self.take(&mut t)) else {
                return false;
            };
            self.finish(job);
            true
        })
    }

    fn take(&self, todo: &mut Todo) -> Option<Job> {
        let job = todo.jobs.pop_front()?;
        self.waiting.store(todo.jobs.len(), Ordering::Relaxed);
        Some(job)
    }

    /// Encodes `job` and sends it back to the writer.
    fn finish(&self, mut job: Job) {
        if catch_unwind(AssertUnwindSafe(|| job.run(self.codec))).is_err() {
            // The entries left are leaked, not dropped twice.
            job.entries.clear();
            job.failed = Some(io::Error::other("encoding a batch of JETS lines panicked"));
        }
        // Fails only when the writer has stopped and dropped its pool (a fatal signal, a
        // panic): the batch, encoded and its entries dropped, is then discarded.
        let _ = self.done.send(job);
    }

    fn push(&self, job: Job) {
        let mut todo = self.todo.lock().unwrap_or_else(|p| p.into_inner());
        todo.jobs.push_back(job);
        self.waiting.store(todo.jobs.len(), Ordering::Relaxed);
        drop(todo);
        self.ready.notify_one();
    }

    /// An encoder thread's loop: encodes batches until shutdown.
    fn serve(&self) {
        loop {
            let job = {
                let mut todo = self.todo.lock().unwrap_or_else(|p| p.into_inner());
                loop {
                    if let Some(job) = self.take(&mut todo) {
                        break job;
                    }
                    if todo.shutdown {
                        return;
                    }
                    todo = self.ready.wait(todo).unwrap_or_else(|p| p.into_inner());
                }
            };
            self.finish(job);
        }
    }
}

/// Runs `f` with this thread's blockable signals blocked; those that arrive meanwhile are
/// delivered when it returns.
#[cfg(all(unix, not(miri)))]
fn signals_held<R>(f: impl FnOnce() -> R) -> R {
    // SAFETY: `sigfillset` initializes the set; `pthread_sigmask` reads `all` and writes `old`,
    // both valid, and only changes this thread's mask, restored below.
    unsafe {
        let mut all = std::mem::zeroed::<libc::sigset_t>();
        let mut old = std::mem::zeroed::<libc::sigset_t>();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_BLOCK, &all, &mut old);
        struct Restore(libc::sigset_t);
        impl Drop for Restore {
            fn drop(&mut self) {
                // SAFETY: a mask read by `pthread_sigmask` above.
                unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &self.0, std::ptr::null_mut()) };
            }
        }
        let _restore = Restore(old);
        f()
    }
}

#[cfg(not(all(unix, not(miri))))]
fn signals_held<R>(f: impl FnOnce() -> R) -> R {
    f()
}

/// The batches between the writer thread and whoever encodes them.
pub(super) struct Pool {
    queue: Arc<Queue>,
    from: Receiver<Job>,
    threads: Vec<JoinHandle<()>>,
    /// The writer thread encodes batches too (there is no encoder thread).
    writer_encodes: bool,
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
    /// Starts `n` encoder threads for `n > 1` (none for `n == 1`: the writer thread encodes);
    /// `codec` compresses each batch (a compressed file).
    pub(super) fn new(n: usize, codec: Option<Codec>) -> io::Result<Pool> {
        let (done, from) = channel();
        let queue = Arc::new(Queue {
            todo: Mutex::new(Todo::default()),
            ready: Condvar::new(),
            waiting: AtomicUsize::new(0),
            done,
            codec,
            #[cfg(test)]
            helped: AtomicU64::new(0),
        });
        let threads = if n > 1 { n } else { 0 };
        let mut pool = Pool {
            queue,
            from,
            threads: Vec::with_capacity(threads),
            writer_encodes: threads == 0,
            filling: Job::new(),
            next_seq: 0,
            next_out: 0,
            done: BTreeMap::new(),
            spare: Vec::new(),
        };
        for i in 0..threads {
            let queue = Arc::clone(&pool.queue);
            // On failure the pool drops: the threads started so far stop.
            pool.threads.push(
                thread::Builder::new()
                    .name(format!("jets-encoder-{i}"))
                    .spawn(move || queue.serve())?,
            );
        }
        Ok(pool)
    }

    /// The queue, for producers that wait for room to encode batches meanwhile.
    pub(super) fn queue(&self) -> &Arc<Queue> {
        &self.queue
    }

    /// How many batches may be out at once before the writer thread waits for the oldest: two
    /// per encoder thread, and at least eight, so that with none (the writer and waiting
    /// producers encode) a producer whose ring is full still finds batches queued.
    pub(super) fn max_in_flight(&self) -> u64 {
        2 * self.threads.len().max(4) as u64
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

    /// Queues the batch being filled (if any) for encoding.
    pub(super) fn submit(&mut self) {
        if self.filling.entries.is_empty() {
            return;
        }
        let fresh = self.spare.pop().unwrap_or_else(Job::new);
        let mut job = std::mem::replace(&mut self.filling, fresh);
        job.seq = self.next_seq;
        job.weight = 0;
        self.next_seq += 1;
        self.queue.push(job);
    }

    /// The next batch in number order once it is encoded; waits for it when `wait` is true.
    /// Without encoder threads, this thread encodes the waiting batches itself meanwhile.
    pub(super) fn next(&mut self, wait: bool) -> Option<Job> {
        if self.next_out == self.next_seq {
            return None;
        }
        loop {
            if let Some(job) = self.done.remove(&self.next_out) {
                self.next_out += 1;
                return Some(job);
            }
            if let Ok(job) = self.from.try_recv() {
                self.done.insert(job.seq, job);
                continue;
            }
            if !wait {
                return None;
            }
            if self.writer_encodes && self.queue.encode_next() {
                continue;
            }
            // The batch is being encoded by another thread, which sends it back when done
            // (`Queue::finish`, even after a panic). The queue holds a sender, so `recv` fails
            // only if that changes: then say the batches out are lost rather than wait.
            match self.from.recv() {
                Ok(job) => {
                    self.done.insert(job.seq, job);
                }
                Err(_) => {
                    let mut lost = self.spare.pop().unwrap_or_else(Job::new);
                    lost.seq = self.next_out;
                    lost.failed = Some(io::Error::other(format!(
                        "{} batches of JETS lines were not encoded",
                        self.next_seq - self.next_out
                    )));
                    self.next_out = self.next_seq;
                    self.done.clear();
                    return Some(lost);
                }
            }
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
        // Batches nobody took (the writer stopped before writing them): encoded here, so that
        // each entry handed out is dropped once, and discarded. With the lock waited for (unlike
        // `encode_next`), since a producer may hold it for a moment; then the encoder threads stop.
        loop {
            let job = {
                let mut todo = self.queue.todo.lock().unwrap_or_else(|p| p.into_inner());
                let job = self.queue.take(&mut todo);
                todo.shutdown |= job.is_none();
                job
            };
            match job {
                Some(job) => self.queue.finish(job),
                None => break,
            }
        }
        self.queue.ready.notify_all();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}
