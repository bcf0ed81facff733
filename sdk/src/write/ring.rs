//! Per-thread rings: the producer side of the hot path.
//!
//! Each emitting thread gets its own single-producer single-consumer ring (`rtrb`) per trace, found
//! through a thread-local list. Pushing is a slot write and one release store; no cache line is
//! shared with other producers. Within one ring the writer keeps FIFO order. Across rings, order
//! follows the handles: every record line gets a [`Pos`] (ring, index), the handle remembers it,
//! and a line pushed through that handle on another thread carries it as a dependency. The writer
//! emits a line only once the line it depends on has been written. Because a handle exists only
//! after its record line was pushed, dependencies always point backwards in time, so the writer
//! can always make progress (see `writer::Writer::pop_ready`).

use std::cell::RefCell;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::Duration;

use rtrb::{Producer, PushError, RingBuffer};

use super::writer::Msg;
use super::{Policy, Shared};
use crate::error::Error;

/// Where a line sits: its ring and its index in that ring (0-based, counting every push).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Pos {
    pub(crate) ring: u32,
    pub(crate) index: u64,
}

/// A queued line and the line it must follow, if that one is on another ring.
pub(crate) struct Queued {
    pub(crate) after: Option<Pos>,
    pub(crate) msg: Msg,
}

/// How many ids a thread takes from the shared counter at a time, so that creating records on
/// several threads does not bounce one cache line between cores.
const ID_BLOCK: u64 = 256;

/// A thread's ring for one trace.
pub(crate) struct LocalRing {
    trace: Weak<Shared>,
    trace_id: u64,
    ring: u32,
    producer: Producer<Queued>,
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

    /// Pushes a line. `Ok(None)` when the drop policy dropped it.
    #[inline]
    fn push(&mut self, shared: &Shared, mut item: Queued) -> Result<Option<Pos>, Error> {
        if item.after.is_some_and(|p| p.ring == self.ring) {
            item.after = None; // same ring: FIFO already orders it
        }
        if let Err(PushError::Full(item)) = self.producer.push(item) {
            match shared.policy {
                Policy::Drop => return Ok(None),
                Policy::Block => self.push_blocking(shared, item)?,
            }
        }
        let pos = Pos { ring: self.ring, index: self.pushed };
        self.pushed += 1;
        Ok(Some(pos))
    }

    /// The slow path: the ring is full. Spin briefly, then wake the writer and sleep in short steps.
    #[cold]
    fn push_blocking(&mut self, shared: &Shared, mut item: Queued) -> Result<(), Error> {
        let backoff = crossbeam_utils::Backoff::new();
        loop {
            match self.producer.push(item) {
                Ok(()) => return Ok(()),
                Err(PushError::Full(back)) => item = back,
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
    static RINGS: RefCell<Vec<LocalRing>> = const { RefCell::new(Vec::new()) };
}

/// Pushes the line built by `make` (which may take a fresh record id) on this thread's ring.
#[inline]
pub(crate) fn push(
    shared: &Arc<Shared>,
    after: Option<Pos>,
    make: impl FnOnce(&mut dyn FnMut() -> u64) -> Msg,
) -> Result<Option<Pos>, Error> {
    if shared.closed.load(Ordering::Relaxed) {
        return Err(Error::Closed);
    }
    let mut make = Some(make);
    let fast = RINGS.try_with(|rings| {
        let Ok(mut rings) = rings.try_borrow_mut() else { return None };
        let ring = match rings.iter().position(|r| r.trace_id == shared.id) {
            Some(i) => &mut rings[i],
            None => {
                // Cold: first line from this thread. Forget rings of traces that are gone.
                rings.retain(|r| r.trace.upgrade().is_some_and(|t| !t.closed.load(Ordering::Relaxed)));
                rings.push(LocalRing::new(shared));
                rings.last_mut()?
            }
        };
        let make = make.take()?;
        let msg = make(&mut || ring.next_id(shared));
        Some(ring.push(shared, Queued { after, msg }))
    });
    match fast {
        Ok(Some(result)) => result,
        // No thread-local ring (this thread is being torn down, or re-entered): use the trace's
        // shared ring behind a mutex. Slower, same ordering.
        _ => {
            let make = make.take().ok_or(Error::Closed)?;
            let mut fallback = shared.fallback.lock().unwrap_or_else(|p| p.into_inner());
            let ring = fallback.get_or_insert_with(|| LocalRing::new(shared));
            let msg = make(&mut || ring.next_id(shared));
            ring.push(shared, Queued { after, msg })
        }
    }
}
