//! The table from C record ids to the [`RecordHandle`]s of one trace. Lock-free: no call on it
//! waits for another thread, so it is safe in a signal handler and never holds anything across
//! `fork`.
//!
//! * **Slots and generations.** A record lives in a slot of an array that only grows (segments
//!   that double in size, never moved or freed before the trace). Its `jets_id` is the slot's
//!   index and the slot's generation when the record began; ending the record bumps the
//!   generation, so an ended record's id can never reach the slot's next record (ids cannot
//!   dangle), and an id is told apart as ended (older generation) or never begun.
//! * **One atomic word per slot** holds the generation, the flags and the number of calls using
//!   the handle. A call on a record increments the count with a compare-and-swap that also checks
//!   the generation, uses the handle, and decrements it.
//! * **Ending without waiting.** `jets_record_end` marks the slot ending (one caller wins: a
//!   record ends once; later calls are refused) and leaves the end's cycle in the slot; whichever
//!   call brings the count to zero, the ender or the last call still using the handle, writes the
//!   end. So a line accepted for a record is queued before its end, and nobody spins.
//! * **Free slots** are a stack (Treiber) whose head carries a tag bumped on every change, so a
//!   pop that raced with a pop and a push of the same slot (ABA) fails its compare-and-swap.
//!
//! The id layout: bits 0-31 the slot index + 1 (never 0, so 0 is never a record), bits 32-62 the
//! generation, bit 63 set for a record the drop policy dropped (rule CA-DROP-1).

use std::cell::UnsafeCell;
use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicPtr, AtomicU64, AtomicU8, Ordering};

use jets::format::Status;
use jets::RecordHandle;

use crate::codes::*;
use crate::failure::{Failure, Msg};
use crate::types::jets_id;

/// Bit 63 of the id of a record the drop policy dropped (rule CA-DROP-1).
pub(crate) const DROPPED_ID_BIT: jets_id = 1 << 63;

// The slot's state word.
const READERS: u64 = (1 << 24) - 1;
const OCCUPIED: u64 = 1 << 24;
const ENDING: u64 = 1 << 25;
const DROPPED: u64 = 1 << 26;
const GEN_SHIFT: u32 = 32;
const GEN_MASK: u64 = ((1 << 31) - 1) << GEN_SHIFT;

/// Slots in the first segment; segment `k` holds `FIRST << k`.
const FIRST_SHIFT: u32 = 6;
const SEGMENTS: usize = 32 - FIRST_SHIFT as usize;
/// Most slots (open records at once): index + 1 stays below `u32::MAX - 1`, so no id is
/// `JETS_ID_OFF` or `JETS_ID_LEFT_OUT`.
const MAX_SLOTS: u64 = u32::MAX as u64 - 1 - (1 << FIRST_SHIFT);

/// Where an open record's handle lives.
#[repr(align(64))] // one cache line each: threads working on neighbouring slots do not meet
struct Slot {
    /// This slot's index in the table.
    index: u64,
    state: AtomicU64,
    /// The next free slot's index + 1 (0: none), while this one is free.
    next_free: AtomicU64,
    /// The end's cycle and status (0: none, else `Status` index + 1), left by the ender for
    /// whichever call finishes the end.
    end_clk: AtomicU64,
    end_status: AtomicU8,
    /// Initialized while `OCCUPIED`; shared by the calls counted in `READERS`; taken out only by
    /// the call that brings the count to zero once `ENDING` is set.
    handle: UnsafeCell<MaybeUninit<RecordHandle>>,
}

impl Slot {
    fn new(index: u64) -> Slot {
        Slot {
            index,
            state: AtomicU64::new(0),
            next_free: AtomicU64::new(0),
            end_clk: AtomicU64::new(0),
            end_status: AtomicU8::new(0),
            handle: UnsafeCell::new(MaybeUninit::uninit()),
        }
    }
}

/// Open records by id.
pub(crate) struct Records {
    segments: [AtomicPtr<Slot>; SEGMENTS],
    /// Slots ever handed out (indices below are in allocated segments or being allocated).
    fresh: AtomicU64,
    /// Free list head: tag (bits 32-63) and slot index + 1 (bits 0-31, 0: empty).
    free: AtomicU64,
}

// SAFETY: the handles in the slots are `Send + Sync`; who may touch a slot's handle is decided by
// its state word (see the module docs), with acquire/release ordering on every hand-over.
unsafe impl Sync for Records {}
// SAFETY: as above; moving the table moves only pointers to its segments.
unsafe impl Send for Records {}

impl Default for Records {
    fn default() -> Self {
        let r = Records {
            segments: [const { AtomicPtr::new(std::ptr::null_mut()) }; SEGMENTS],
            fresh: AtomicU64::new(0),
            free: AtomicU64::new(0),
        };
        // The first segment up front: a trace with few records open allocates nothing per begin.
        r.segments[0].store(new_segment(0), Ordering::Release);
        r
    }
}

fn segment_len(segment: usize) -> usize {
    1 << (FIRST_SHIFT as usize + segment)
}

fn new_segment(segment: usize) -> *mut Slot {
    // Segment k starts at index FIRST * (2^k - 1).
    let first = (segment_len(segment) - (1 << FIRST_SHIFT)) as u64;
    let slots: Box<[Slot]> =
        (0..segment_len(segment) as u64).map(|i| Slot::new(first + i)).collect();
    Box::into_raw(slots).cast::<Slot>()
}

/// Segment and offset of slot `index`.
fn locate(index: u64) -> (usize, usize) {
    let biased = index + (1 << FIRST_SHIFT);
    let segment = (63 - biased.leading_zeros() - FIRST_SHIFT) as usize;
    (segment, (biased - (1 << (segment as u32 + FIRST_SHIFT))) as usize)
}

/// What an id names: a slot index and the state its slot has while the record is open.
fn decode(id: jets_id) -> Option<(u64, u64)> {
    let index = (id & u64::from(u32::MAX)).checked_sub(1)?;
    let generation = (id >> GEN_SHIFT) & (GEN_MASK >> GEN_SHIFT);
    let dropped = if id & DROPPED_ID_BIT != 0 { DROPPED } else { 0 };
    Some((index, generation << GEN_SHIFT | OCCUPIED | dropped))
}

impl Records {
    /// The slot `index`, if it was ever handed out.
    #[inline(always)]
    fn slot(&self, index: u64) -> Option<&Slot> {
        if index >= self.fresh.load(Ordering::Acquire).min(MAX_SLOTS) {
            return None;
        }
        let (segment, offset) = locate(index);
        let slots = self.segments[segment].load(Ordering::Acquire);
        // SAFETY: non-null segments hold `segment_len(segment)` slots and live as long as the
        // table; `offset` is below that length by construction of `locate`.
        (!slots.is_null()).then(|| unsafe { &*slots.add(offset) })
    }

    /// Counts a call in on the open record `id`: its slot, now safe to read the handle from
    /// until [`Records::release`].
    #[inline(always)]
    fn acquire(&self, id: jets_id, what: &'static str) -> Result<&Slot, Failure> {
        match self.try_acquire(id) {
            Some(slot) => Ok(slot),
            None => Err(self.missing(id, what)),
        }
    }

    /// [`Records::acquire`] without the reason of a refusal (built apart, off the hot path).
    #[inline(always)]
    fn try_acquire(&self, id: jets_id) -> Option<&Slot> {
        let (index, open) = decode(id)?;
        let slot = self.slot(index)?;
        let mut s = slot.state.load(Ordering::Relaxed);
        loop {
            // The generation, the dropped flag, and open (occupied, not ending).
            if s & (GEN_MASK | OCCUPIED | ENDING | DROPPED) != open || s & READERS == READERS {
                return None;
            }
            match slot.state.compare_exchange_weak(s, s + 1, Ordering::Acquire, Ordering::Relaxed) {
                Ok(_) => return Some(slot),
                Err(now) => s = now,
            }
        }
    }

    /// Counts a call out of `slot`. The last call out of an ending record writes its end (the
    /// result is the end's).
    #[inline(always)]
    fn release(&self, slot: &Slot) -> Option<Result<(), jets::Error>> {
        let before = slot.state.fetch_sub(1, Ordering::AcqRel);
        if before & READERS != 1 || before & ENDING == 0 {
            return None;
        }
        Some(self.finish_end(slot, before))
    }

    /// Writes the end of the ending record in `slot`, whose count `release` just brought to
    /// zero (`before`: the state word before that), and frees the slot.
    #[inline(never)]
    fn finish_end(&self, slot: &Slot, before: u64) -> Result<(), jets::Error> {
        // The count is zero and ENDING keeps it there: the handle is ours alone. The ender's
        // stores of the end's clk and status happened before its own count-out (release), which
        // this fetch_sub read (acquire, through the release sequence of the state word).
        // SAFETY: OCCUPIED was set, so the handle is initialized; nobody else reads it any more.
        let handle = unsafe { (*slot.handle.get()).assume_init_read() };
        let clk = slot.end_clk.load(Ordering::Relaxed);
        let status = slot.end_status.load(Ordering::Relaxed);
        let next_generation = (before & GEN_MASK).wrapping_add(1 << GEN_SHIFT) & GEN_MASK;
        // Free, one generation on: every id of the ended record is refused from here.
        slot.state.store(next_generation, Ordering::Release);
        let result = match status.checked_sub(1).and_then(|i| Status::ALL.get(usize::from(i))) {
            Some(&s) => handle.end_with_status_at(clk, s),
            None => handle.end_at(clk),
        };
        self.push_free(slot);
        result
    }

    /// Runs `f` on the open record `id`; its end waits (without blocking anyone) until `f` is done.
    #[inline(always)]
    pub(crate) fn with<R>(
        &self,
        id: jets_id,
        what: &'static str,
        f: impl FnOnce(&RecordHandle) -> Result<R, Failure>,
    ) -> Result<R, Failure> {
        let slot = self.acquire(id, what)?;
        // SAFETY: counted in, so the handle is initialized and not taken out until we count out.
        let handle = unsafe { (*slot.handle.get()).assume_init_ref() };
        // A panic in `f` leaves the count up: the record then never ends (the panic is reported
        // as JETS_ERR_INTERNAL, a bug), which is safe.
        let r = f(handle);
        // A call on a record never performs an end it did not ask for unless it is the last out
        // of a record that another thread ended: that end's result is the ender's business (an
        // I/O error sticks to the trace and is reported by every later call).
        let _ = self.release(slot);
        r
    }

    /// Counts a call in on the open record `id` (`None` if it is not one), for a caller that
    /// uses the handle in its own body rather than in a closure (the hot path inlines it whole).
    /// [`Counted::leave`] must follow; if it does not (a panic), the record never ends, which is
    /// safe, as in [`Records::with`].
    #[inline(always)]
    pub(crate) fn enter(&self, id: jets_id) -> Option<Counted<'_>> {
        self.try_acquire(id).map(|slot| Counted { table: self, slot })
    }

    /// Ends the open record `id` at the cycle `check` returns (or fails with its error, the
    /// record staying open), with an optional status. The end is written before this returns,
    /// unless a call from another thread is still using the record: then that call writes it
    /// when it is done.
    pub(crate) fn end(
        &self,
        id: jets_id,
        what: &'static str,
        status: Option<Status>,
        check: impl FnOnce(&RecordHandle) -> Result<u64, Failure>,
    ) -> Result<(), Failure> {
        let slot = self.acquire(id, what)?;
        // SAFETY: counted in (see `with`).
        let clk = match check(unsafe { (*slot.handle.get()).assume_init_ref() }) {
            Ok(clk) => clk,
            Err(e) => {
                let _ = self.release(slot);
                return Err(e);
            }
        };
        // Claim the end: one caller sets ENDING, any other gets "ended".
        let mut s = slot.state.load(Ordering::Relaxed);
        loop {
            if s & ENDING != 0 {
                let _ = self.release(slot);
                return Err(ended(id, what));
            }
            match slot.state.compare_exchange_weak(
                s,
                s | ENDING,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => break,
                Err(now) => s = now,
            }
        }
        // Still counted in, so nobody can finish the end before these are stored.
        slot.end_clk.store(clk, Ordering::Relaxed);
        let code =
            status.and_then(|s| Status::ALL.iter().position(|&x| x == s)).map_or(0, |i| i + 1);
        slot.end_status.store(code as u8, Ordering::Relaxed);
        match self.release(slot) {
            Some(result) => Ok(result?),
            None => Ok(()),
        }
    }

    /// Makes a newly begun record known and returns its id (handed to C only after this).
    pub(crate) fn insert(&self, handle: RecordHandle) -> Result<jets_id, Failure> {
        let (index, slot) = self.pop_free().map_or_else(|| self.fresh_slot(), Ok)?;
        let dropped = if handle.is_recorded() { 0 } else { DROPPED };
        // SAFETY: a free slot (popped, or fresh) is ours alone until OCCUPIED is published below.
        unsafe { (*slot.handle.get()).write(handle) };
        let generation = slot.state.load(Ordering::Relaxed) & GEN_MASK;
        slot.state.store(generation | OCCUPIED | dropped, Ordering::Release);
        let flag = if dropped != 0 { DROPPED_ID_BIT } else { 0 };
        Ok(flag | generation | (index + 1))
    }

    fn pop_free(&self) -> Option<(u64, &Slot)> {
        let mut head = self.free.load(Ordering::Acquire);
        loop {
            let index = (head & u64::from(u32::MAX)).checked_sub(1)?;
            let slot = self.slot(index)?;
            let next = slot.next_free.load(Ordering::Relaxed);
            let tagged = (head >> 32).wrapping_add(1) << 32 | next;
            match self.free.compare_exchange_weak(
                head,
                tagged,
                Ordering::Acquire,
                Ordering::Acquire,
            ) {
                Ok(_) => return Some((index, slot)),
                Err(now) => head = now,
            }
        }
    }

    fn push_free(&self, slot: &Slot) {
        let index = slot.index;
        let mut head = self.free.load(Ordering::Relaxed);
        loop {
            slot.next_free.store(head & u64::from(u32::MAX), Ordering::Relaxed);
            let tagged = (head >> 32).wrapping_add(1) << 32 | (index + 1);
            match self.free.compare_exchange_weak(
                head,
                tagged,
                Ordering::Release,
                Ordering::Relaxed,
            ) {
                Ok(_) => return,
                Err(now) => head = now,
            }
        }
    }

    /// A never-used slot (allocates its segment if it is the first there).
    fn fresh_slot(&self) -> Result<(u64, &Slot), Failure> {
        let index = self.fresh.fetch_add(1, Ordering::AcqRel);
        if index >= MAX_SLOTS {
            return Err(Failure::invalid("too many records open at once in this trace (2^32)"));
        }
        let (segment, offset) = locate(index);
        let mut slots = self.segments[segment].load(Ordering::Acquire);
        if slots.is_null() {
            let fresh = new_segment(segment);
            match self.segments[segment].compare_exchange(
                std::ptr::null_mut(),
                fresh,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => slots = fresh,
                Err(installed) => {
                    // SAFETY: ours, never published.
                    drop(unsafe { Box::from_raw(segment_slice(fresh, segment)) });
                    slots = installed;
                }
            }
        }
        // SAFETY: the segment holds `segment_len(segment)` slots; `offset` is below that.
        Ok((index, unsafe { &*slots.add(offset) }))
    }

    /// Why `id` is not an open record. Allocates nothing (it runs on the signal-safe path).
    #[cold]
    #[inline(never)]
    fn missing(&self, id: jets_id, what: &'static str) -> Failure {
        if id == 0 {
            return Failure::invalid(Msg::Id(what, 0, " (no record)"));
        }
        let never = || {
            Failure::new(
                JETS_ERR_UNKNOWN_RECORD,
                Msg::Id(what, id, " was never begun in this trace"),
            )
        };
        let Some((index, open)) = decode(id) else { return never() };
        let Some(slot) = self.slot(index) else { return never() };
        let s = slot.state.load(Ordering::Acquire);
        let (asked, now) = (open & GEN_MASK, s & GEN_MASK);
        let ended_here = asked == now && s & ENDING != 0 && s & DROPPED == open & DROPPED;
        if asked < now || ended_here {
            ended(id, what)
        } else {
            never()
        }
    }
}

/// A call counted in on an open record by [`Records::enter`].
pub(crate) struct Counted<'a> {
    table: &'a Records,
    slot: &'a Slot,
}

impl Counted<'_> {
    /// The record's handle.
    #[inline(always)]
    pub(crate) fn handle(&self) -> &RecordHandle {
        // SAFETY: counted in, so the handle is initialized and not taken out until we count out.
        unsafe { (*self.slot.handle.get()).assume_init_ref() }
    }

    /// Counts the call out (writing the record's end if it was ending and this was the last
    /// call using it; that end's result is the ender's business, as in [`Records::with`]).
    #[inline(always)]
    pub(crate) fn leave(self) {
        let _ = self.table.release(self.slot);
    }
}

fn ended(id: jets_id, what: &'static str) -> Failure {
    Failure::new(JETS_ERR_RECORD_ENDED, Msg::Id(what, id, " has already ended"))
}

fn segment_slice(ptr: *mut Slot, segment: usize) -> *mut [Slot] {
    std::ptr::slice_from_raw_parts_mut(ptr, segment_len(segment))
}

impl Drop for Records {
    /// Drops the handles of records still open (they stay open in the trace: the footer counts
    /// them) and frees the slots.
    fn drop(&mut self) {
        for (segment, ptr) in self.segments.iter_mut().enumerate() {
            let slots = *ptr.get_mut();
            if slots.is_null() {
                continue;
            }
            // SAFETY: allocated by `new_segment` with this length; `&mut self`: no call is running.
            let mut slots = unsafe { Box::from_raw(segment_slice(slots, segment)) };
            for slot in slots.iter_mut() {
                if *slot.state.get_mut() & OCCUPIED != 0 {
                    // SAFETY: OCCUPIED: initialized, and ours alone.
                    unsafe { slot.handle.get_mut().assume_init_drop() };
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locate_covers_every_index_once() {
        assert_eq!(locate(0), (0, 0));
        assert_eq!(locate(63), (0, 63));
        assert_eq!(locate(64), (1, 0));
        assert_eq!(locate(191), (1, 127));
        assert_eq!(locate(192), (2, 0));
        let (segment, offset) = locate(MAX_SLOTS - 1);
        assert!(segment < SEGMENTS && offset < segment_len(segment));
    }
}
