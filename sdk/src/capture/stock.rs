//! Memory for the flight recorder's window, made ready ahead by emitting threads that wait for
//! room in their ring.
//!
//! Until its window is full, the recorder's writer takes a new chunk of memory for every few
//! thousand lines, and every page of it is new to the process: the first write to each one is a
//! page fault, and on a virtual machine often a fault on the host too. For Tiny5's 100 k-cycle
//! recorder that is about 86 MB and 21 k faults, which kept the writer in the kernel for most of
//! the run's first 50 ms, while the simulator's thread waited for room in its ring 30–35 ms of
//! them (`perf`, the waits logged one by one, 2026-11-28). A waiting thread's core is idle, so
//! that thread makes the next chunk instead ([`Stock::help`], called where an emitting call
//! waits for room, as it encodes batches for a full trace): it allocates the chunk and writes a
//! word on each of its pages, so the faults are taken there, and the writer finds the chunk in
//! stock ([`Stock::take`]). Once the window is full the writer reuses its own chunks and closes
//! the stock ([`Stock::close`]).
//!
//! Only the emitting threads' spare time goes to it, and at most [`AHEAD`] chunks wait made.
//! Neither side ever waits for the other's lock (`try_lock`): a thread interrupted by a signal
//! while it holds it, or a forked child, cannot hang anyone; a chunk that finds the lock taken
//! is freed, and the writer makes its own.

use std::mem::MaybeUninit;
#[cfg(test)]
use std::sync::atomic::AtomicU64;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// One chunk of the recorder's arena: [`CHUNK`] words of capacity (its length stays 0).
pub(crate) type Chunk = Vec<MaybeUninit<u64>>;

/// Words per chunk of the recorder's arena: 512 KiB, far above the largest entry (unit tests
/// use small chunks, so that chunks are reused and records outlive theirs).
#[cfg(not(test))]
pub(crate) const CHUNK: usize = 1 << 16;
#[cfg(test)]
pub(crate) const CHUNK: usize = 1 << 7;

/// Chunks made ahead at most: 2 MiB, a few thousand lines' room beyond the writer's chunk.
pub(crate) const AHEAD: usize = 4;

/// A new chunk, not touched.
pub(crate) fn chunk() -> Chunk {
    Vec::with_capacity(CHUNK)
}

/// Chunks made ahead for the recorder's writer (see the module documentation).
pub(crate) struct Stock {
    /// The chunks made and not taken yet.
    ready: Mutex<Vec<Chunk>>,
    /// How many more chunks an emitting thread may make now: [`AHEAD`] less those in stock
    /// or being made; [`CLOSED`] once the stock is closed (stored with `ready` locked, so that
    /// a thread holding the lock sees whether it is).
    wanted: AtomicUsize,
    /// Chunks made by [`Stock::help`], counted for the tests.
    #[cfg(test)]
    made: AtomicU64,
}

/// [`Stock::wanted`] of a closed stock.
const CLOSED: usize = usize::MAX;

impl Stock {
    pub(crate) fn new() -> Stock {
        Stock {
            ready: Mutex::new(Vec::with_capacity(AHEAD)),
            wanted: AtomicUsize::new(AHEAD),
            #[cfg(test)]
            made: AtomicU64::new(0),
        }
    }

    /// Chunks made by [`Stock::help`] so far.
    #[cfg(test)]
    pub(crate) fn made(&self) -> u64 {
        self.made.load(Ordering::Relaxed)
    }

    /// For an emitting thread waiting for room: makes one chunk, with every page written once,
    /// if one is wanted. False when none is (nothing done).
    pub(crate) fn help(&self) -> bool {
        let claim = |n: usize| if n == CLOSED { None } else { n.checked_sub(1) };
        if self.wanted.fetch_update(Ordering::Relaxed, Ordering::Relaxed, claim).is_err() {
            return false;
        }
        let mut new = chunk();
        let words = new.as_mut_ptr().cast::<u64>();
        // A word on each 4 KiB page: the page faults are taken here, not by the writer. Volatile,
        // since nothing reads these words before the writer overwrites them.
        for at in (0..CHUNK).step_by(4096 / 8) {
            // SAFETY: `at` is below the chunk's capacity, and the chunk is not shared yet.
            unsafe { words.add(at).write_volatile(0) };
        }
        #[cfg(test)]
        self.made.fetch_add(1, Ordering::Relaxed);
        match self.ready.try_lock() {
            Ok(mut ready) if !self.closed() => ready.push(new),
            // Closed meanwhile: the chunk is freed.
            Ok(_) => {}
            // The writer is at the stock: the chunk is freed, and wanted again.
            Err(_) => self.want_one_more(),
        }
        true
    }

    fn closed(&self) -> bool {
        self.wanted.load(Ordering::Relaxed) == CLOSED
    }

    /// One more chunk is wanted, unless the stock is closed.
    fn want_one_more(&self) {
        let more = |n: usize| (n != CLOSED).then(|| n + 1);
        let _ = self.wanted.fetch_update(Ordering::Relaxed, Ordering::Relaxed, more);
    }

    /// For the writer: a chunk made ahead, if one is ready (and another one is then wanted).
    pub(crate) fn take(&self) -> Option<Chunk> {
        let chunk = self.ready.try_lock().ok()?.pop()?;
        self.want_one_more();
        Some(chunk)
    }

    /// For the writer, once the window is full: no chunk is wanted any more; returns those
    /// made and not taken (None if the lock is taken at the moment: ask again later).
    pub(crate) fn close(&self) -> Option<Vec<Chunk>> {
        let mut ready = self.ready.try_lock().ok()?;
        self.wanted.store(CLOSED, Ordering::Relaxed);
        Some(std::mem::take(&mut *ready))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_are_made_ahead_up_to_the_limit_and_replaced_as_taken() {
        let stock = Stock::new();
        assert!(stock.take().is_none(), "nothing made yet");
        for _ in 0..AHEAD {
            assert!(stock.help());
        }
        assert!(!stock.help(), "no more than AHEAD chunks wait made");
        let chunk = stock.take().expect("a chunk made ahead");
        assert_eq!(chunk.capacity(), CHUNK);
        assert!(stock.help(), "a taken chunk is wanted again");
        assert!(!stock.help());
        let left = stock.close().expect("the lock is free");
        assert_eq!(left.len(), AHEAD);
        assert!(!stock.help(), "a closed stock wants nothing");
        stock.want_one_more();
        assert!(!stock.help(), "nor after a chunk that found the lock taken");
        assert!(stock.take().is_none());
    }

    #[test]
    fn a_chunk_made_while_the_lock_is_taken_is_wanted_again() {
        let stock = Stock::new();
        let held = stock.ready.lock().unwrap();
        assert!(stock.help(), "the chunk was made");
        drop(held);
        assert_eq!(stock.wanted.load(Ordering::Relaxed), AHEAD, "and is wanted again");
        assert!(stock.take().is_none(), "it was freed, not kept");
    }
}
