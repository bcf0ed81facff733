//! Per-thread leases on a trace: how record handles keep their trace open without a locked
//! instruction per record.
//!
//! A record's node keeps its trace's [`Inner`] alive: the trace is closed when the last `Trace`
//! and the last handle are gone. With a count in the `Arc` per node, every record made and ended
//! cost two locked instructions on that count, and on several threads making records the count's
//! cache line moved between cores for each (criterion, 2026-11-28: a record begun and ended
//! 34.9 ns on one thread, 75.5 ns per thread on two; with leases, 25.5 ns on one thread).
//!
//! Instead, a thread holds one counted `Arc` per trace it makes records in, its lease, on behalf
//! of every node it made there, and counts those nodes in plain loads and stores (atomics with
//! relaxed order, which no other thread writes):
//! * `live` counts the nodes this thread made, less those it freed itself;
//! * a node freed on another thread (or on this one while a signal handler interrupted the
//!   lease's bookkeeping) adds one to `away`, a locked instruction, and then leaves the lease
//!   alone;
//! * once `live == away` (every node is gone; checked at each of the owner's own frees and when
//!   one of its `Trace` clones is dropped), the owner *parks* the count: it moves it to
//!   `parked`, where it waits for the thread's next record. A thread that makes its records one
//!   at a time, none of its own open between them (a worker making children of another thread's
//!   record), takes its count back from there with one locked instruction on its own lease's
//!   cache line, rather than two on the trace's count, which every such thread would share
//!   (criterion `worker_record_begin_end`, 2026-11-28, two such threads: 70.5 and 93.4 ns per
//!   record begun and ended, per thread, taking the trace's count; 40.8 and 39.5 ns parking with
//!   sequentially consistent atomics; 35.1 and 34.1 ns with the barrier below, and 30.6 and
//!   29.9 ns on one thread against 37.1 and 35.1).
//! * A parked count never holds a trace open on its own: when the last `Trace` clone is dropped
//!   ([`revoke`]), every lease on the trace is marked *orphan* and its parked count taken and
//!   dropped; an orphan lease drops its count when its records are gone rather than park it.
//!   Both sides write then read (the owner parks, then reads the mark; the revoker marks, then
//!   takes what is parked), with a store-load barrier between (the close handshake's: nothing
//!   but the compiler's on the owner's side, `membarrier` on the revoker's; see `fence`):
//!   whichever comes second sees the other's write, so no count stays parked on a trace that has
//!   no clone left. Both may take the count; the swap gives it to one.
//! * A node freed on another thread while the owner neither frees a node of its own there again
//!   nor drops a clone leaves the count to the owner's exit (or the process's, whose exit handler
//!   closes every trace): the only delay leases add.
//! * When the owner thread exits, it adds [`GONE`] minus the number of its nodes still alive to
//!   `away`, in one locked instruction; each later free adds one. The one addition that brings
//!   `away` to exactly [`GONE`] (the owner's, if no node is left) ends the lease: all additions
//!   to one word are ordered, so exactly one thread does, and no other touches the lease after
//!   its own addition.
//!
//! A node the thread cannot lease (the bookkeeping interrupted by a signal handler, the thread
//! exiting) holds its own count, as before.
//!
//! Leases are never freed: an ended lease (its owner exited, its last node freed) is marked free
//! and taken by the next thread that needs one, so that [`revoke`] can read every lease in the
//! process-wide list [`ALL`] without taking each thread's exit into account. There are at most as
//! many as threads have held leases at once, times the traces each had.

use std::cell::Cell;
use std::ptr::{self, NonNull};
use std::sync::atomic::{compiler_fence, AtomicBool, AtomicPtr, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use super::kids::Kids;
use super::ring::Entered;
use super::Inner;

/// What [`Lease::away`] holds once the owner has exited and the last node is freed. Never
/// reached before: `away` then counts frees, far fewer.
const GONE: u64 = 1 << 63;

/// A thread's counted reference to one trace, shared by the nodes it made there. Aligned to two
/// cache lines (the unit the CPU fetches in pairs), so that the owner's stores never share a line
/// with another thread's lease.
#[repr(align(128))]
pub(crate) struct Lease {
    /// The owning thread's id ([`Leases::id`]), or 0 while the lease is free (see [`ALL`]).
    owner: AtomicU64,
    /// The trace this lease is for: compared, never followed through this field. A lease with no
    /// live node and no count, held or parked, may be taken for another trace (under [`ALL`]'s
    /// lock).
    key: AtomicPtr<Inner>,
    /// The count (`Arc::into_raw`), or null while no node is alive.
    held: AtomicPtr<Inner>,
    /// The count while no node is alive, kept for the next one (see the module), or null.
    parked: AtomicPtr<Inner>,
    /// The trace has no `Trace` clone left: the count is dropped rather than parked.
    orphan: AtomicBool,
    /// Nodes made, less those freed by the owner's own path: written by the owner only.
    live: AtomicU64,
    /// Nodes freed by other threads; after the owner's exit, counts up to [`GONE`].
    away: AtomicU64,
}

impl Lease {
    /// Whether every node made under the lease is freed. Owner only.
    fn idle(&self) -> bool {
        self.live.load(Ordering::Relaxed) == self.away.load(Ordering::Acquire)
    }

    /// Takes the count out of the lease (owner only, or the last free after its exit).
    fn take_held(&self) -> Option<Arc<Inner>> {
        let p = self.held.load(Ordering::Relaxed);
        if p.is_null() {
            return None;
        }
        self.held.store(ptr::null_mut(), Ordering::Relaxed);
        // SAFETY: a non-null `held` came from `Arc::into_raw` and is taken once (nulled above).
        Some(unsafe { Arc::from_raw(p) })
    }

    /// Parks the count of a lease whose last node is gone (owner only); returns it when the
    /// lease is an orphan, for the caller to drop once its bookkeeping is done.
    #[inline(always)]
    fn park(&self) -> Option<Arc<Inner>> {
        let count = self.held.load(Ordering::Relaxed);
        if count.is_null() {
            return None;
        }
        self.held.store(ptr::null_mut(), Ordering::Relaxed);
        // Release: this thread's uses of the trace happen before `revoke` drops the count.
        self.parked.store(count, Ordering::Release);
        // Store, then load, as `revoke` does the other way round: a store-load barrier on both
        // sides, the heavy one in `revoke` (see `fence`), so that this side's costs nothing.
        super::fence::light();
        if !self.orphan.load(Ordering::Relaxed) {
            return None;
        }
        let count = self.parked.swap(ptr::null_mut(), Ordering::SeqCst);
        // SAFETY: a non-null `parked` came from `Arc::into_raw` and is taken once (swapped out).
        (!count.is_null()).then(|| unsafe { Arc::from_raw(count) })
    }

    /// Makes the lease free for another thread ([`find`]): its owner has exited and its last
    /// node is freed. Returns its counts, for the caller to drop.
    fn end(&self) -> [Option<Arc<Inner>>; 2] {
        let parked = self.parked.swap(ptr::null_mut(), Ordering::SeqCst);
        // SAFETY: as in `park`.
        let parked = (!parked.is_null()).then(|| unsafe { Arc::from_raw(parked) });
        let held = self.take_held();
        self.key.store(ptr::null_mut(), Ordering::Relaxed);
        self.live.store(0, Ordering::Relaxed);
        self.away.store(0, Ordering::Relaxed);
        self.orphan.store(false, Ordering::Relaxed);
        // Release: the resets above happen before the next owner's use (`find`, Acquire).
        self.owner.store(0, Ordering::Release);
        [held, parked]
    }
}

/// Every lease ever made, free or owned (`Box::into_raw`, never freed). Locked to make or take a
/// lease, to change a lease's trace, and to [`revoke`] a trace's parked counts: so that no lease
/// is given a trace while `revoke` walks the list (it would miss a count parked there).
static ALL: Mutex<Vec<LeasePtr>> = Mutex::new(Vec::new());

struct LeasePtr(*mut Lease);

// SAFETY: a lease is made of atomics (and the immutable-after-claim fields read under `ALL`'s
// lock); the pointer is only read through `&Lease`.
unsafe impl Send for LeasePtr {}

fn all() -> MutexGuard<'static, Vec<LeasePtr>> {
    ALL.lock().unwrap_or_else(|p| p.into_inner())
}

/// The last `Trace` clone of `inner` is being dropped: marks every lease on it orphan and drops
/// the counts parked there, so that the trace closes once its last record is gone too.
pub(crate) fn revoke(inner: &Inner) {
    let key = ptr::from_ref(inner).cast_mut();
    let mut counts = Vec::new();
    {
        let all = all();
        let on_trace = || {
            all.iter()
                // SAFETY: leases are never freed.
                .map(|p| unsafe { &*p.0 })
                .filter(|l| l.key.load(Ordering::Relaxed) == key)
        };
        for l in on_trace() {
            l.orphan.store(true, Ordering::Relaxed);
        }
        // Store, then load: see `Lease::park`.
        super::fence::heavy();
        for l in on_trace() {
            let count = l.parked.swap(ptr::null_mut(), Ordering::Acquire);
            if !count.is_null() {
                // SAFETY: as in `Lease::park`.
                counts.push(unsafe { Arc::from_raw(count) });
            }
        }
    }
    // After the lock: the trace's last count (not these: the caller holds one) closes it.
    drop(counts);
}

/// The list's guard held across a `fork` (see [`crate::fork`]).
static HELD: crate::fork::HeldAcrossFork<MutexGuard<'static, Vec<LeasePtr>>> =
    crate::fork::HeldAcrossFork::new();

/// Before a `fork`: takes the list's lock.
pub(crate) fn hold_for_fork() {
    HELD.hold(all());
}

/// After a `fork`, in the parent and in the child: releases what [`hold_for_fork`] took.
pub(crate) fn release_after_fork() {
    HELD.release();
}

/// No lease list yet: nothing is leased until its guard is registered.
const UNGUARDED: u8 = 0;
const READY: u8 = 1;
/// The thread is changing a lease: a signal handler that interrupted it uses the other paths.
const BUSY: u8 = 2;
/// The thread's guard has run (it is exiting): nodes hold their own count.
const EXITED: u8 = 3;

/// A thread's leases. No destructor (reaching it checks no thread-local state); [`Guard`] ends
/// the leases when the thread exits.
struct Leases {
    /// [`READY`] for the fast paths, one test.
    mode: Cell<u8>,
    /// This thread's id, unique in the process: 0 until its first lease.
    id: Cell<u64>,
    /// The lease used last, and every lease of this thread (boxes, `Box::into_raw`).
    current: Cell<*mut Lease>,
    all: Cell<Vec<*mut Lease>>,
}

thread_local! {
    static LEASES: Leases = const {
        Leases {
            mode: Cell::new(UNGUARDED),
            id: Cell::new(0),
            current: Cell::new(ptr::null_mut()),
            all: Cell::new(Vec::new()),
        }
    };
    static GUARD: Guard = const { Guard };
}

/// Ends the thread's leases when it exits.
struct Guard;

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = LEASES.try_with(|l| {
            l.mode.set(EXITED);
            l.current.set(ptr::null_mut());
            for lease in l.all.take() {
                // SAFETY: a lease of this thread (never freed; ended below or by the last free
                // elsewhere, after GONE).
                unsafe { leave(lease) };
            }
        });
    }
}

/// The owner's exit: ends the lease now if none of its nodes is alive, else leaves that to the
/// last free.
///
/// # Safety
/// `lease` is the exiting thread's own.
unsafe fn leave(lease: *mut Lease) {
    // SAFETY: leases are never freed.
    let l = unsafe { &*lease };
    let left = l.live.load(Ordering::Relaxed);
    // AcqRel: the frees counted before are seen (their nodes' last uses happen before the count
    // is dropped), and this thread's uses are seen by the free that ends the lease.
    if l.away.fetch_add(GONE - left, Ordering::AcqRel) == left {
        // Every node is freed and no free can come: the lease is ours to end.
        drop(l.end());
    }
}

/// Runs `f`, the thread's bookkeeping on its leases, as [`BUSY`] (the caller found it
/// [`READY`]). The mode is set before `f` reads a lease and restored after it wrote, as a signal
/// handler on this thread sees them (compiler fences: no cost at run time); a handler that finds
/// it busy uses the other paths.
#[inline(always)]
fn busy<R>(l: &Leases, f: impl FnOnce() -> R) -> R {
    l.mode.set(BUSY);
    compiler_fence(Ordering::SeqCst);
    let r = f();
    compiler_fence(Ordering::SeqCst);
    l.mode.set(READY);
    r
}

/// A lease on `inner` for a node this thread is making, or `None`: the node then holds a count
/// of its own.
///
/// For a deferred record, `kids` is its parent's count (CAP-DEFER-2), kept like the lease's own:
/// the record is counted there as part of this bookkeeping, which a signal handler on this
/// thread never interrupts halfway (it finds the thread busy and takes the other paths), if this
/// is the parent's thread; the second value says whether it was.
#[inline(always)]
pub(crate) fn take(
    inner: &Arc<Inner>,
    kids: Option<NonNull<Kids>>,
) -> (Option<NonNull<Lease>>, bool) {
    // `Leases` has no destructor: reaching it never fails.
    LEASES.try_with(|l| take_in(l, inner, kids)).unwrap_or((None, false))
}

#[inline(always)]
fn take_in(
    l: &Leases,
    inner: &Arc<Inner>,
    kids: Option<NonNull<Kids>>,
) -> (Option<NonNull<Lease>>, bool) {
    if l.mode.get() != READY {
        return take_cold(l, inner, kids);
    }
    busy(l, || {
        let mut lease = l.current.get();
        // SAFETY: `current` is null or a live lease of this thread.
        let current = unsafe { lease.as_ref() };
        if current.is_none_or(|c| c.key.load(Ordering::Relaxed) != Arc::as_ptr(inner).cast_mut()) {
            lease = find(l, inner);
        }
        // SAFETY: a live lease of this thread, whose fields only this thread writes (but `away`).
        let leased = unsafe { &*lease };
        if leased.held.load(Ordering::Relaxed).is_null() {
            hold(leased, inner);
        }
        leased.live.store(leased.live.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
        let lease = NonNull::new(lease);
        let counted = match (kids, lease) {
            // SAFETY: the caller holds the parent's handle, which keeps its count alive.
            (Some(k), Some(lease)) => unsafe { super::kids::add_owned(k, lease) },
            _ => false,
        };
        (lease, counted)
    })
}

/// The first lease of a thread (its guard is registered first), or none: inside a signal
/// handler that interrupted the bookkeeping, or while the thread exits.
#[cold]
#[inline(never)]
fn take_cold(
    l: &Leases,
    inner: &Arc<Inner>,
    kids: Option<NonNull<Kids>>,
) -> (Option<NonNull<Lease>>, bool) {
    if l.mode.get() == UNGUARDED {
        // Registering a destructor may allocate: inside an emitting call, as the ring's
        // allocations are, so that an allocator that emits is refused.
        let _entered = Entered::enter();
        if GUARD.try_with(|_| ()).is_ok() {
            static NEXT_ID: AtomicU64 = AtomicU64::new(1);
            l.id.set(NEXT_ID.fetch_add(1, Ordering::Relaxed));
            l.mode.set(READY);
            return take_in(l, inner, kids);
        }
    }
    (None, false)
}

/// Takes a count for the lease's first live node: the parked one, else a new one.
#[inline(always)]
fn hold(lease: &Lease, inner: &Arc<Inner>) {
    let mut count = lease.parked.swap(ptr::null_mut(), Ordering::SeqCst);
    if count.is_null() {
        count = Arc::into_raw(Arc::clone(inner)).cast_mut();
    }
    lease.held.store(count, Ordering::Relaxed);
}

/// This thread's lease for `inner`: the one it has, else an unused one of its own or a free one
/// taken over, else a new one. Inside the bookkeeping ([`busy`]).
#[cold]
#[inline(never)]
fn find(l: &Leases, inner: &Arc<Inner>) -> *mut Lease {
    let key = Arc::as_ptr(inner).cast_mut();
    let mut all_own = l.all.take();
    let found = own(&all_own).find(|(_, p)| p.key.load(Ordering::Relaxed) == key).map(|(p, _)| p);
    let lease = found.unwrap_or_else(|| {
        let _entered = Entered::enter();
        let mut list = all();
        // A lease of this thread that holds no count has no node, and no free of it can come:
        // it can serve another trace. Under the list's lock, as is taking a free one.
        let unused = own(&all_own)
            .find(|(_, p)| {
                p.held.load(Ordering::Relaxed).is_null()
                    && p.parked.load(Ordering::Relaxed).is_null()
                    && p.idle()
            })
            .map(|(p, _)| p);
        let lease = unused.unwrap_or_else(|| {
            let free = list
                .iter()
                // SAFETY: leases are never freed. Acquire: see `Lease::end`.
                .find(|p| unsafe { &*p.0 }.owner.load(Ordering::Acquire) == 0)
                .map(|p| p.0);
            let lease = free.unwrap_or_else(|| {
                let lease = Box::into_raw(Box::new(Lease {
                    owner: AtomicU64::new(0),
                    key: AtomicPtr::new(ptr::null_mut()),
                    held: AtomicPtr::new(ptr::null_mut()),
                    parked: AtomicPtr::new(ptr::null_mut()),
                    orphan: AtomicBool::new(false),
                    live: AtomicU64::new(0),
                    away: AtomicU64::new(0),
                }));
                list.push(LeasePtr(lease));
                lease
            });
            // SAFETY: a free lease: nobody else touches it (taking one needs the lock).
            unsafe { (*lease).owner.store(l.id.get(), Ordering::Relaxed) };
            all_own.push(lease);
            lease
        });
        // SAFETY: a lease of this thread, with no count and no node.
        let leased = unsafe { &*lease };
        leased.key.store(key, Ordering::Relaxed);
        // Under the lock, which `Trace`'s drop takes (in `revoke`) after counting clones down:
        // either that drop marks this lease, or this load sees its count.
        leased.orphan.store(inner.traces.load(Ordering::SeqCst) == 0, Ordering::Relaxed);
        drop(list);
        lease
    });
    l.all.set(all_own);
    l.current.set(lease);
    lease
}

/// A thread's list of its leases, each as a pointer and a reference.
fn own(all: &[*mut Lease]) -> impl Iterator<Item = (*mut Lease, &Lease)> {
    // SAFETY: leases are never freed; the list holds this thread's own until its exit
    // (`leave`), when it is emptied first.
    all.iter().map(|&p| (p, unsafe { &*p }))
}

/// A node made under `lease` is freed. A deferred record counted in `kids`, its parent's count,
/// is given back there as part of the bookkeeping if this is the parent's thread (as in
/// [`take`]); returns whether it was.
///
/// # Safety
/// `lease` came from [`take`] for that node, which is freed once, here; `kids` is the count the
/// node is counted in, given back once (here, or by the caller when this returns false).
#[inline(always)]
pub(crate) unsafe fn give(lease: NonNull<Lease>, kids: Option<NonNull<Kids>>) -> bool {
    // SAFETY: leases are never freed, and this one is not ended (not free for another thread)
    // while a node made under it, this one, is alive.
    let lease_ref = unsafe { lease.as_ref() };
    let released = LEASES
        .try_with(|l| {
            if l.mode.get() != READY || l.id.get() != lease_ref.owner.load(Ordering::Relaxed) {
                return Err(());
            }
            Ok(busy(l, || {
                // SAFETY: the function's contract.
                let given = kids.is_some_and(|k| unsafe { super::kids::gone_owned(k, lease) });
                let live = lease_ref.live.load(Ordering::Relaxed) - 1;
                lease_ref.live.store(live, Ordering::Relaxed);
                let count = match live == lease_ref.away.load(Ordering::Acquire) {
                    true => lease_ref.park(),
                    false => None,
                };
                (count, given)
            }))
        })
        .unwrap_or(Err(()));
    match released {
        // Dropped after the bookkeeping (an orphan's): the trace's last count closes it.
        Ok((count, given)) => {
            drop(count);
            given
        }
        Err(()) => {
            // SAFETY: the function's contract.
            unsafe { give_away(lease) };
            false
        }
    }
}

/// [`give`] from another thread than the lease's owner (or from a signal handler on it): counted
/// in `away`, after which this thread does not touch the lease, unless its owner has exited and
/// this was its last node.
#[cold]
#[inline(never)]
unsafe fn give_away(lease: NonNull<Lease>) {
    // SAFETY: leases are never freed.
    let l = unsafe { lease.as_ref() };
    // AcqRel: this node's uses happen before whoever ends the lease drops the count, and the
    // uses of the others before this thread does.
    if l.away.fetch_add(1, Ordering::AcqRel) + 1 == GONE {
        // The owner has exited and this was the last node: the lease is ours to end.
        drop(l.end());
    }
}

/// A `Trace` clone of `inner` is dropped on this thread: if this thread's lease on it is idle
/// (its last record ended on another thread), its count is parked now, where [`revoke`] finds it
/// if this is the last clone, so that the trace closes when the last clone goes, as it would
/// without leases.
pub(crate) fn settle(inner: &Arc<Inner>) {
    let count = LEASES
        .try_with(|l| {
            if l.mode.get() != READY {
                return None;
            }
            busy(l, || {
                let key = Arc::as_ptr(inner).cast_mut();
                let all = l.all.take();
                let count = own(&all)
                    .find(|(_, p)| p.key.load(Ordering::Relaxed) == key)
                    .and_then(|(_, p)| if p.idle() { p.park() } else { None });
                l.all.set(all);
                count
            })
        })
        .ok()
        .flatten();
    drop(count);
}

#[cfg(test)]
mod tests {
    use std::sync::{mpsc, Arc};
    use std::thread;

    use super::super::tests::Buf;
    use super::super::{Metadata, RecordHandle, Trace};

    fn open(out: &Buf) -> Trace {
        Trace::to_writer(out.clone(), Metadata::new()).expect("open")
    }

    fn closed(out: &Buf) -> bool {
        String::from_utf8(out.bytes()).expect("utf8").contains("\"type\":\"footer\"")
    }

    /// The trace's count: its clones, plus one per thread lease that holds one.
    fn count(trace: &Trace) -> usize {
        Arc::strong_count(&trace.0)
    }

    #[test]
    fn a_thread_holds_one_count_for_all_its_records() {
        let out = Buf::default();
        let trace = open(&out);
        assert_eq!(count(&trace), 1);
        let root = trace.root("core", "Core").begin_at(0).expect("root");
        assert_eq!(count(&trace), 2, "the lease's count");
        let children: Vec<_> =
            (0..10).map(|i| root.child("insn", "Insn").begin_at(i).expect("child")).collect();
        assert_eq!(count(&trace), 2, "no count per record");
        for (i, c) in children.into_iter().enumerate() {
            c.end_at(i as u64 + 1).expect("end");
        }
        assert_eq!(count(&trace), 2, "the root is still open");
        root.end_at(20).expect("end");
        assert_eq!(count(&trace), 2, "the last record gone, the lease's count is parked");
        let again = trace.root("core", "Core").begin_at(21).expect("root");
        assert_eq!(count(&trace), 2, "the next record takes the parked count back");
        again.end_at(22).expect("end");
        drop(trace);
        assert!(closed(&out), "dropping the last clone closed the trace");
    }

    /// A worker thread that makes `records` children of `root`, one at a time, and then lives
    /// on, making nothing, until told to exit (a send on the returned channel). Returns once
    /// its records are ended and its count is parked.
    fn parked_worker(
        root: &Arc<RecordHandle>,
        records: u64,
    ) -> (thread::JoinHandle<()>, mpsc::Sender<()>) {
        let (parked_tx, parked_rx) = mpsc::channel();
        let (done_tx, done_rx) = mpsc::channel::<()>();
        let root = Arc::clone(root);
        let worker = thread::spawn(move || {
            for i in 0..records {
                let kid = root.child("insn", "Insn").begin_at(i + 1).expect("kid");
                kid.end_at(i + 2).expect("end");
            }
            drop(root);
            parked_tx.send(()).expect("send");
            done_rx.recv().expect("recv");
        });
        parked_rx.recv().expect("recv");
        (worker, done_tx)
    }

    #[test]
    fn a_worker_between_records_keeps_its_count_parked_until_it_exits() {
        let out = Buf::default();
        let trace = open(&out);
        let root = Arc::new(trace.root("core", "Core").begin_at(0).expect("root"));
        assert_eq!(count(&trace), 2);
        let (worker, done_tx) = parked_worker(&root, 10);
        assert_eq!(count(&trace), 3, "the worker's count, parked between its records");
        done_tx.send(()).expect("send");
        // `join` returns once the thread's exit handlers have run.
        worker.join().expect("join");
        assert_eq!(count(&trace), 2, "the worker's exit let its count go");
        let root = Arc::into_inner(root).expect("the only handle left");
        root.end_at(20).expect("end");
        drop(trace);
        assert!(closed(&out));
    }

    #[test]
    fn the_last_clone_takes_back_the_counts_parked_on_its_trace() {
        let out = Buf::default();
        let trace = open(&out);
        let root = Arc::new(trace.root("core", "Core").begin_at(0).expect("root"));
        let (worker, done_tx) = parked_worker(&root, 1);
        assert_eq!(count(&trace), 3, "the clone, the root's lease, the worker's parked count");
        drop(trace);
        assert!(!closed(&out), "the root is open");
        let root = Arc::into_inner(root).expect("the only handle left");
        root.end_at(3).expect("end");
        assert!(closed(&out), "the worker's parked count did not hold the trace open");
        done_tx.send(()).expect("send");
        worker.join().expect("join");
    }

    #[test]
    fn threads_churning_while_the_last_clone_goes_leave_nothing_open() {
        let out = Buf::default();
        let trace = open(&out);
        let root = Arc::new(trace.root("core", "Core").begin_at(0).expect("root"));
        let rounds = if cfg!(miri) { 20 } else { 2000 };
        let workers: Vec<_> = (0..2)
            .map(|w| {
                let root = Arc::clone(&root);
                thread::spawn(move || {
                    for i in 0..rounds {
                        let kid = root.child("insn", "Insn").begin_at(i + w).expect("kid");
                        kid.end_at(i + w + 1).expect("end");
                    }
                })
            })
            .collect();
        drop(trace);
        for w in workers {
            w.join().expect("join");
        }
        assert!(!closed(&out), "the root is open");
        let root = Arc::into_inner(root).expect("the only handle left");
        root.end_at(rounds + 5).expect("end");
        assert!(closed(&out), "no count stayed parked on a trace with no clone left");
    }

    #[test]
    fn leases_of_exited_threads_are_taken_by_later_ones() {
        let out = Buf::default();
        let trace = open(&out);
        let before = super::all().len();
        let threads = if cfg!(miri) { 4 } else { 64 };
        for i in 0..threads {
            let trace = trace.clone();
            thread::spawn(move || {
                let r = trace.root("r", "R").begin_at(i).expect("root");
                r.end_at(i + 1).expect("end");
            })
            .join()
            .expect("join");
        }
        // Other tests make leases meanwhile; these threads, one after the other, reuse theirs.
        let made = super::all().len() - before;
        assert!(made < threads as usize / 2 || cfg!(miri), "{made} leases for {threads} threads");
        drop(trace);
        assert!(closed(&out));
    }

    #[test]
    fn records_ended_on_another_thread_after_theirs_exited_close_the_trace() {
        let out = Buf::default();
        let trace = open(&out);
        let made = {
            let trace = trace.clone();
            thread::spawn(move || {
                let root = trace.root("core", "Core").begin_at(0).expect("root");
                let kids: Vec<_> =
                    (0..5).map(|i| root.child("insn", "Insn").begin_at(i).expect("kid")).collect();
                (root, kids)
            })
            .join()
            .expect("join")
        };
        // The thread that made them has exited: its lease lives on for them alone.
        let (root, kids) = made;
        assert_eq!(count(&trace), 2);
        for k in kids {
            k.end_at(9).expect("end");
        }
        assert_eq!(count(&trace), 2, "the root keeps the lease");
        root.end_at(10).expect("end");
        assert_eq!(count(&trace), 1, "the last one let the exited thread's lease go");
        drop(trace);
        assert!(closed(&out));
    }

    #[test]
    fn records_ended_on_another_thread_while_theirs_lives_close_the_trace_when_it_exits() {
        let out = Buf::default();
        let trace = open(&out);
        let (give, take) = mpsc::channel();
        let (done_tx, done_rx) = mpsc::channel::<()>();
        let maker = {
            let trace = trace.clone();
            thread::spawn(move || {
                let root = trace.root("core", "Core").begin_at(0).expect("root");
                give.send(root).expect("send");
                drop(trace);
                // Lives on, making nothing, until told to exit.
                done_rx.recv().expect("recv");
            })
        };
        let root = take.recv().expect("recv");
        root.end_at(1).expect("end");
        drop(trace);
        // The maker did not see its last record go: its lease keeps the trace open...
        assert!(!closed(&out));
        done_tx.send(()).expect("send");
        maker.join().expect("join");
        // ...until it exits.
        assert!(closed(&out), "the maker's exit let its lease go, closing the trace");
    }

    #[test]
    fn a_trace_dropped_on_the_thread_that_ended_its_records_closes() {
        let out = Buf::default();
        let trace = open(&out);
        for i in 0..5 {
            let r = trace.root("r", "R").begin_at(i).expect("root");
            r.end_at(i + 1).expect("end");
        }
        drop(trace);
        assert!(closed(&out));
    }
}
