//! The records deferred under a record (CAP-DEFER-2): counted, so that a parent whose handle is
//! gone while one of them may still be queued stays in the writer's table until the last is
//! freed.
//!
//! A deferred record (CAP-DEFER-1) keeps its line in its handle and queues it only when a line
//! is made under it, possibly long after its parent ended. The capture keeper forgets an ended
//! held record once every ring has passed its end (CAP-ANC-2), so the parent must tell it to
//! wait: a parent that ends while records deferred under it are alive queues its end *held*
//! (`hold` on the `record_end` line), and the last of them to be freed queues a
//! [`Kind::Release`] line, after which the keeper forgets the parent as it forgets any other.
//!
//! The count is kept the way a lease counts its nodes (see `lease`), so that a simulator that
//! makes and ends its records on one thread pays no locked instruction for it:
//! * the thread of the parent's lease, its *owner*, counts in [`Kids::count`] with plain loads
//!   and stores: one more for each record deferred under the parent, one less for each freed;
//! * any other thread (or a signal handler that interrupted the owner's bookkeeping) counts in
//!   [`Kids::away`] with locked instructions: one less for a record deferred there, one more for
//!   one freed there;
//! * when the parent's handle goes (its end, or a drop without one), whichever thread that is
//!   swaps [`MARK`] into `count` and adds `ZOMBIE - 1 - count` to `away`: `away` then says
//!   `ZOMBIE - 1 - alive` (with alive the records still to be freed), every later free adds one
//!   there whatever its thread, and the one that brings it to exactly [`ZOMBIE`] is the last.
//!   The parent's own thread adds the last one itself once its held end is queued, so that the
//!   release always follows that end.
//!
//! An owner's free reads `count` and stores one less only if it was not [`MARK`]. If the handle
//! goes on another thread between that load and that store, the swap took the count before the
//! free: that record stays counted as alive, and the parent is never released. It is kept until
//! the trace closes, which costs memory, never correctness; no count can be too low.
//!
//! The count lives in a small box of its own, made when the first record is deferred under a
//! parent, not in the parent's node: the parent's node and handle go with its end as always,
//! and only this box outlives them.

use std::cell::UnsafeCell;
use std::mem::ManuallyDrop;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering};
use std::sync::Arc;

use super::lease::{self, Lease};
use super::line::{Kind, Plain};
use super::ring::{self, Pos};
use super::Inner;
use crate::format::Str;

/// What [`Kids::count`] holds once the parent's handle is gone.
const MARK: u64 = u64::MAX;
/// What [`Kids::away`] reaches with the last free after the parent's handle is gone. Far from
/// anything it holds before: at most as many records as are alive, either way from 0.
const ZOMBIE: u64 = 1 << 62;

/// The count of the records deferred under one record (see the module).
pub(super) struct Kids {
    /// Records deferred on the owner's thread, less those it freed: written only by the owner
    /// (inside its lease bookkeeping), then [`MARK`].
    count: AtomicU64,
    /// Records deferred on other threads (subtracted) and freed there (added), wrapping; after
    /// the parent's handle is gone, see [`ZOMBIE`].
    away: AtomicU64,
    /// The parent's lease: its owner counts in `count`.
    lease: Option<NonNull<Lease>>,
    /// What the last free queues: the parent's trace, its id, and where its held end went.
    /// Written by the thread its handle went on, before its last addition to `away`; read by
    /// the thread whose addition reaches [`ZOMBIE`].
    release: UnsafeCell<Option<(Arc<Inner>, u64, Pos)>>,
}

// SAFETY: `lease` is only compared and read through `lease::as_owner` (leases are never freed and
// their owner field is atomic); `release` is written before a release-ordered addition to `away`
// and read after the acquire-ordered addition that makes it exactly ZOMBIE, once.
unsafe impl Send for Kids {}
// SAFETY: as above.
unsafe impl Sync for Kids {}

/// Counts a record deferred under the parent whose count pointer is `slot` (made here for the
/// parent's first), and returns the count for the record to give back when it is freed
/// ([`gone`]).
#[inline(never)]
pub(super) fn add(slot: &AtomicPtr<Kids>, lease: Option<NonNull<Lease>>) -> NonNull<Kids> {
    let k = match NonNull::new(slot.load(Ordering::Acquire)) {
        Some(k) => k,
        None => install(slot, lease),
    };
    // SAFETY: a count lives until its parent's handle is gone and its last record freed; the
    // caller holds the parent's handle.
    let kids = unsafe { k.as_ref() };
    let owned = lease::as_owner(kids.lease, || {
        let c = kids.count.load(Ordering::Relaxed);
        kids.count.store(c.wrapping_add(1), Ordering::Relaxed);
    });
    if owned.is_none() {
        kids.away.fetch_sub(1, Ordering::AcqRel);
    }
    k
}

/// The parent's first deferred record: its count, made and published (another thread may make
/// one at once for the same parent; one of them is kept).
#[cold]
fn install(slot: &AtomicPtr<Kids>, lease: Option<NonNull<Lease>>) -> NonNull<Kids> {
    // Allocating counts as being inside an emitting call: an allocator that emits is refused.
    let _entered = ring::Entered::enter();
    let fresh = Box::into_raw(Box::new(Kids {
        count: AtomicU64::new(0),
        away: AtomicU64::new(0),
        lease,
        release: UnsafeCell::new(None),
    }));
    match slot.compare_exchange(std::ptr::null_mut(), fresh, Ordering::AcqRel, Ordering::Acquire) {
        // SAFETY: `Box::into_raw` is never null.
        Ok(_) => unsafe { NonNull::new_unchecked(fresh) },
        Err(first) => {
            // SAFETY: ours, never published.
            drop(unsafe { Box::from_raw(fresh) });
            // SAFETY: a published count is never null.
            unsafe { NonNull::new_unchecked(first) }
        }
    }
}

/// A record counted by [`add`] is freed.
///
/// # Safety
/// `k` came from [`add`] for that record, and is given back once.
#[inline(never)]
pub(super) unsafe fn gone(k: NonNull<Kids>) {
    // SAFETY: alive until this record, counted, is given back (see the module).
    let kids = unsafe { k.as_ref() };
    let owned = lease::as_owner(kids.lease, || {
        let c = kids.count.load(Ordering::Relaxed);
        // The owner's last touch of the count, unless the parent is gone.
        (c != MARK).then(|| kids.count.store(c.wrapping_sub(1), Ordering::Release))
    });
    if owned.flatten().is_none() {
        // SAFETY: as above; once this addition is made, only the last one touches `k`.
        unsafe { add_one(k) };
    }
}

/// One more freed, or the parent's own share given up: the addition that reaches [`ZOMBIE`]
/// queues the release and frees the count.
///
/// # Safety
/// As for [`gone`].
unsafe fn add_one(k: NonNull<Kids>) {
    // SAFETY: see the function.
    let kids = unsafe { k.as_ref() };
    if kids.away.fetch_add(1, Ordering::AcqRel).wrapping_add(1) == ZOMBIE {
        // SAFETY: the last addition: nothing else touches the count.
        unsafe { finish(k) };
    }
}

/// The last record is freed (or none was alive): queues the parent's release, if its end was
/// queued held, and frees the count.
///
/// # Safety
/// Nothing else touches `k`, now or later.
unsafe fn finish(k: NonNull<Kids>) {
    // SAFETY: see the function; made by `install` with `Box::into_raw`.
    let kids = unsafe { Box::from_raw(k.as_ptr()) };
    if let Some((inner, id, end)) = kids.release.into_inner() {
        // Refused only by a closed trace or a push nested in another on this thread (a record
        // freed by an allocator that emits): the parent then stays in the writer's table, which
        // costs memory until the close, never a line.
        let release = Plain {
            kind: Kind::Release,
            clk: 0,
            id,
            name: Str::EMPTY,
            after: Some(end),
            fields: (),
        };
        let _ = ring::push::<false, _>(&inner.shared, &mut ManuallyDrop::new(release));
    }
}

/// The parent's handle goes (its end, or a drop without one): `None` if no record deferred under
/// it is alive (the count is freed), else the count, for [`Parting::finish`] once the end is
/// queued, held.
///
/// # Safety
/// `k` is the parent's count, taken out of its node (no record is deferred under it any more),
/// and given here once.
#[must_use]
pub(super) unsafe fn part(k: NonNull<Kids>) -> Option<Parting> {
    // SAFETY: see the function.
    let kids = unsafe { k.as_ref() };
    let count = kids.count.swap(MARK, Ordering::AcqRel);
    // Our own share is the 1 below: the last addition is ours (`Parting::finish`) or a free's.
    let away = kids.away.fetch_add(ZOMBIE.wrapping_sub(count).wrapping_sub(1), Ordering::AcqRel);
    let alive = count.wrapping_sub(away) as i64;
    if alive <= 0 {
        // Every record counted was freed before the swap: none touches the count again.
        // SAFETY: as above.
        unsafe { finish(k) };
        return None;
    }
    Some(Parting(k))
}

/// A parent gone with deferred records alive: its count, until its end is queued.
pub(super) struct Parting(NonNull<Kids>);

impl Parting {
    /// Gives the parent's share up, with what the last free releases: the trace, the parent's
    /// id and where its held end was queued, or `None` (no end was queued).
    pub(super) fn finish(self, release: Option<(Arc<Inner>, u64, Pos)>) {
        // SAFETY: the parent's share is not given up yet, so the count is alive and nothing
        // reads `release` until the addition below.
        unsafe {
            *self.0.as_ref().release.get() = release;
            add_one(self.0);
        }
    }
}
