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
//!   and stores: one more for each record deferred under the parent, one less for each freed,
//!   as part of the lease bookkeeping of the record's own node (`lease::take`, `lease::give`),
//!   which already knows whose thread it runs on;
//! * any other thread (or a signal handler that interrupted the owner's bookkeeping) counts in
//!   [`Kids::away`] with locked instructions: one less for a record deferred there, one more for
//!   one freed there;
//! * when the parent's handle goes (its end, or a drop without one), whichever thread that is
//!   swaps [`MARK`] into `count` and adds `ZOMBIE - 1 - count` to `away`: `away` then says
//!   `ZOMBIE - 1 - alive` (with alive the records still to be freed), every later free adds one
//!   there whatever its thread, and the one that brings it to exactly [`ZOMBIE`] is the last.
//!   The `1` is the parting thread's own share, given up once the held end is queued, so that
//!   the release always follows that end.
//!
//! An owner's free reads `count` and stores one less only if it was not [`MARK`]. If the handle
//! goes on another thread between that load and that store, the swap took the count before the
//! free: that record stays counted as alive, and the parent is never released. It is kept until
//! the trace closes and the count's box is never freed (a few dozen bytes, and the shell of a
//! weak reference to the trace), which costs memory, never correctness: no count can be too low.
//!
//! Whose thread a lease is does not change while the parent's node holds it. Once the parent is
//! gone its lease may end and be taken by another thread, which then passes for the owner; but
//! the count is [`MARK`] by then, which sends every free to `away`.
//!
//! The count lives in a small box of its own, made when the first record is deferred under a
//! parent, not in the parent's node: the parent's node and handle go with its end as always,
//! and only this box outlives them.

use std::cell::UnsafeCell;
use std::mem::ManuallyDrop;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering};
use std::sync::Weak;

use super::lease::Lease;
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
pub(crate) struct Kids {
    /// Records deferred on the owner's thread, less those it freed: written only by the owner
    /// (inside its lease bookkeeping), until [`part`] swaps in [`MARK`].
    count: AtomicU64,
    /// Records deferred on other threads (subtracted) and freed there (added), wrapping; after
    /// the parent's handle is gone, see [`ZOMBIE`].
    away: AtomicU64,
    /// The parent's lease: its owner counts in `count`.
    lease: Option<NonNull<Lease>>,
    /// What the last free queues: the parent's trace, its id, and where its held end went.
    /// Written by the thread its handle went on, before its last addition to `away`; read by
    /// the thread whose addition reaches [`ZOMBIE`]. Weak: a trace nobody holds any more is
    /// closed, and needs no release.
    release: UnsafeCell<Option<(Weak<Inner>, u64, Pos)>>,
}

// SAFETY: `lease` is only compared, never followed; `release` is written before a release-ordered
// addition to `away` and read after the acquire-ordered addition that makes it exactly ZOMBIE,
// once.
unsafe impl Send for Kids {}
// SAFETY: as above.
unsafe impl Sync for Kids {}

/// The count of the records deferred under the parent whose count pointer is `slot` (its
/// node's), made with the first; `lease` is the parent's. The caller counts one more in it: by
/// [`add_owned`] as part of the lease bookkeeping of the record's own node, or else by
/// [`add_away`].
#[inline(always)]
pub(super) fn of(slot: &AtomicPtr<Kids>, lease: Option<NonNull<Lease>>) -> NonNull<Kids> {
    match NonNull::new(slot.load(Ordering::Acquire)) {
        Some(k) => k,
        None => install(slot, lease),
    }
}

/// The parent's first deferred record: its count, made and published (another thread may make
/// one at once for the same parent; one of them is kept).
#[cold]
#[inline(never)]
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

/// Counts a record deferred on the thread whose lease is `lease`, inside that lease's
/// bookkeeping (`lease::take`), if that is the parent's: returns whether it did.
///
/// # Safety
/// `k` is alive (the caller holds the parent's handle).
#[inline(always)]
pub(super) unsafe fn add_owned(k: NonNull<Kids>, lease: NonNull<Lease>) -> bool {
    // SAFETY: see the function.
    let kids = unsafe { k.as_ref() };
    if kids.lease != Some(lease) {
        return false;
    }
    let c = kids.count.load(Ordering::Relaxed);
    kids.count.store(c.wrapping_add(1), Ordering::Relaxed);
    true
}

/// Counts a record deferred on another thread than the parent's.
///
/// # Safety
/// As for [`add_owned`].
#[cold]
#[inline(never)]
pub(super) unsafe fn add_away(k: NonNull<Kids>) {
    // SAFETY: see the function.
    unsafe { k.as_ref() }.away.fetch_sub(1, Ordering::AcqRel);
}

/// Gives back a record counted in `k`, freed on the thread whose lease is `lease`, inside that
/// lease's bookkeeping (`lease::give`), if that is the parent's and the parent's handle is not
/// gone: returns whether it did. Else the caller gives it back by [`gone_away`].
///
/// # Safety
/// `k` came from [`of`] for that record and was counted; not given back yet.
#[inline(always)]
pub(super) unsafe fn gone_owned(k: NonNull<Kids>, lease: NonNull<Lease>) -> bool {
    // SAFETY: alive until this record, counted, is given back (see the module).
    let kids = unsafe { k.as_ref() };
    if kids.lease != Some(lease) {
        return false;
    }
    let c = kids.count.load(Ordering::Relaxed);
    if c == MARK {
        return false;
    }
    // The owner's last touch of the count.
    kids.count.store(c.wrapping_sub(1), Ordering::Release);
    true
}

/// Gives back a record counted in `k` on any thread, with a locked addition.
///
/// # Safety
/// As for [`gone_owned`]; once this is called, only the last addition touches `k`.
#[cold]
#[inline(never)]
pub(super) unsafe fn gone_away(k: NonNull<Kids>) {
    // SAFETY: see the function.
    unsafe { add_one(k) }
}

/// One more freed, or the parent's own share given up: the addition that reaches [`ZOMBIE`]
/// queues the release and frees the count.
///
/// # Safety
/// `k` is alive, and this addition is one the count is owed: a counted record's, or the parting
/// thread's own share.
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
    let Some((trace, id, end)) = kids.release.into_inner() else { return };
    // A trace nobody holds any more is closed: there is nothing to release.
    if let Some(inner) = trace.upgrade() {
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
#[must_use = "the parent's share of the count is given up only by `Parting::finish`"]
pub(super) struct Parting(NonNull<Kids>);

impl Parting {
    /// Gives the parent's share up, with what the last free releases: the trace, the parent's
    /// id and where its held end was queued, or `None` (no end was queued).
    pub(super) fn finish(self, release: Option<(Weak<Inner>, u64, Pos)>) {
        // SAFETY: the parent's share is not given up yet, so the count is alive and nothing
        // reads `release` until the addition below.
        unsafe {
            *self.0.as_ref().release.get() = release;
            add_one(self.0);
        }
    }
}
