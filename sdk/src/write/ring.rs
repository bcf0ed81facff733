//! Per-thread rings: the producer side of the hot path.
//!
//! Each emitting thread gets its own single-producer single-consumer ring (`rtrb`) per trace, found
//! through a thread-local list. Pushing is a slot write and one release store; no cache line is
//! shared with other producers. Within one ring the writer keeps FIFO order. Across rings, order
//! follows the handles: every record line gets a [`Pos`] (ring, index), the handle remembers it,
//! and a line pushed through that handle on another thread carries it as a dependency. The writer
//! emits a line only once the line it depends on has been written. Because a handle exists only
//! after its record line was pushed, dependencies always point backwards in time, so the writer
//! can always make progress (see `writer::Writer::drain_once`).

use std::cell::UnsafeCell;
use std::mem::ManuallyDrop;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::Duration;

use rtrb::{Producer, PushError, RingBuffer};

use super::writer::{Kind, Line};
use super::{Policy, Shared};
use crate::error::Error;

/// Where a line sits: its ring and its index in that ring (0-based, counting every push).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Pos {
    pub(crate) ring: u32,
    pub(crate) index: u64,
}

/// How many ids a thread takes from the shared counter at a time, so that creating records on
/// several threads does not bounce one cache line between cores.
const ID_BLOCK: u64 = 256;

/// A thread's ring for one trace.
pub(crate) struct LocalRing {
    trace: Weak<Shared>,
    trace_id: u64,
    ring: u32,
    producer: Producer<Line>,
    pushed: u64,
    next_id: u64,
    id_end: u64,
}

impl LocalRing {
    fn new(shared: &Arc<Shared>) -> LocalRing {
        let (producer, consumer) = RingBuffer::new(shared.ring_capacity);
        let ring = shared.adopt(consumer);
        LocalRing {
            trace: Arc::downgrade(shared),
            trace_id: shared.id,
            ring,
            producer,
            pushed: 0,
            next_id: 0,
            id_end: 0,
        }
    }

    #[inline]
    fn next_id(&mut self, shared: &Shared) -> u64 {
        if self.next_id == self.id_end {
            self.next_id = shared.next_id.fetch_add(ID_BLOCK, Ordering::Relaxed);
            self.id_end = self.next_id + ID_BLOCK;
        }
        let id = self.next_id;
        self.next_id += 1;
        id
    }

    /// Pushes a line, giving a record its id first. `Ok(None)` when the drop policy dropped it.
    ///
    /// Always consumes `*line`: it is moved into the ring, or dropped. The caller must not use or
    /// drop it afterwards. Taking it by reference lets the line go from the builder's storage
    /// straight into the ring slot, one copy, instead of being passed down by value.
    #[inline(always)]
    fn push(
        &mut self,
        shared: &Shared,
        line: &mut ManuallyDrop<Line>,
    ) -> Result<Option<(Pos, u64)>, Error> {
        if line.after.is_some_and(|p| p.ring == self.ring) {
            line.after = None; // same ring: FIFO already orders it
        }
        if line.kind == Kind::Record {
            line.id = self.next_id(shared);
        }
        let id = line.id;
        match self.producer.write_chunk_uninit(1) {
            Ok(mut chunk) => {
                // SAFETY: `*line` is initialized and, per this function's contract, not used again
                // by the caller; the slot gets the only copy. `commit(1)` publishes exactly the one
                // slot just written.
                unsafe {
                    chunk.as_mut_slices().0[0].write(ManuallyDrop::take(line));
                    chunk.commit(1);
                }
            }
            Err(_) => {
                // SAFETY: as above; ownership moves out of `*line` here.
                let line = unsafe { ManuallyDrop::take(line) };
                match shared.policy {
                    Policy::Drop => return Ok(None),
                    Policy::Block => self.push_blocking(shared, line)?,
                }
            }
        }
        let pos = Pos { ring: self.ring, index: self.pushed };
        self.pushed += 1;
        Ok(Some((pos, id)))
    }

    /// The slow path: the ring is full. Spin briefly, then wake the writer and sleep in short steps.
    #[cold]
    fn push_blocking(&mut self, shared: &Shared, mut line: Line) -> Result<(), Error> {
        let backoff = crossbeam_utils::Backoff::new();
        loop {
            match self.producer.push(line) {
                Ok(()) => return Ok(()),
                Err(PushError::Full(back)) => line = back,
            }
            if self.producer.is_abandoned() || shared.closed.load(Ordering::Relaxed) {
                return Err(Error::Closed);
            }
            if backoff.is_completed() {
                shared.wake_writer();
                std::thread::sleep(Duration::from_micros(20));
            } else {
                backoff.snooze();
            }
        }
    }
}

thread_local! {
    /// This thread's rings, one per trace it has emitted to.
    ///
    /// An `UnsafeCell` rather than a `RefCell`: [`push`] is the only code that touches it, and
    /// nothing it runs can re-enter it (pushing runs no user code: dropping a line frees only
    /// strings), so a mutable reference obtained here is always unique. That lets the line be
    /// moved once, straight into the ring, instead of through a closure.
    static RINGS: UnsafeCell<Vec<LocalRing>> = const { UnsafeCell::new(Vec::new()) };
}

/// This thread's ring for `shared`, created on first use; `None` while the thread's
/// thread-local storage is being torn down.
#[inline(always)]
fn local_ring(shared: &Arc<Shared>) -> Option<*mut LocalRing> {
    RINGS
        .try_with(|cell| {
            // SAFETY: see RINGS: no other reference to the Vec exists while this one lives.
            let rings = unsafe { &mut *cell.get() };
            let i = match rings.iter().position(|r| r.trace_id == shared.id) {
                Some(i) => i,
                None => new_local_ring(rings, shared),
            };
            &mut rings[i] as *mut LocalRing
        })
        .ok()
}

/// Cold: the first line from this thread to this trace. Also forgets rings of traces that are
/// closed or gone, so a long-lived thread does not keep their memory.
#[cold]
fn new_local_ring(rings: &mut Vec<LocalRing>, shared: &Arc<Shared>) -> usize {
    rings.retain(|r| r.trace.upgrade().is_some_and(|t| !t.closed.load(Ordering::Relaxed)));
    rings.push(LocalRing::new(shared));
    rings.len() - 1
}

/// Pushes `line` on this thread's ring; a record gets its id here. Returns where the line went
/// and its record id, or `None` when the drop policy dropped it.
///
/// Always consumes `*line` (into the ring, or dropped), whatever it returns: the caller must
/// neither use nor drop it afterwards.
#[inline(always)]
pub(crate) fn push(
    shared: &Arc<Shared>,
    line: &mut ManuallyDrop<Line>,
) -> Result<Option<(Pos, u64)>, Error> {
    if shared.closed.load(Ordering::Relaxed) {
        // SAFETY: consumed here, per the contract.
        unsafe { ManuallyDrop::drop(line) };
        return Err(Error::Closed);
    }
    match local_ring(shared) {
        // SAFETY: the pointer comes from this thread's RINGS, which nothing else touches until
        // this push returns (see RINGS); the Vec is not resized in between.
        Some(ring) => unsafe { &mut *ring }.push(shared, line),
        None => push_fallback(shared, line),
    }
}

/// No usable thread-local ring (this thread is being torn down, or re-entered): use the trace's
/// shared ring behind a mutex. Slower, same ordering.
#[cold]
fn push_fallback(
    shared: &Arc<Shared>,
    line: &mut ManuallyDrop<Line>,
) -> Result<Option<(Pos, u64)>, Error> {
    let mut fallback = shared.fallback.lock().unwrap_or_else(|p| p.into_inner());
    fallback.get_or_insert_with(|| LocalRing::new(shared)).push(shared, line)
}
