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
//! * the owner drops the count when `live == away`: every node is gone. It checks at each
//!   of its own frees and when one of its `Trace` clones is dropped. A node freed elsewhere while
//!   the owner does neither again leaves the count to the owner's exit (or the process's, whose
//!   exit handler closes every trace): the only delay this adds.
//! * When the owner thread exits, it adds [`GONE`] minus the number of its nodes still alive to
//!   `away`, in one locked instruction; each later free adds one. The one addition that brings
//!   `away` to exactly [`GONE`] (the owner's, if no node is left) ends the lease: all additions
//!   to one word are ordered, so exactly one thread does, and no other touches the lease after
//!   its own addition.
//!
//! A node the thread cannot lease (the bookkeeping interrupted by a signal handler, the thread
//! exiting) holds its own count, as before.

use std::cell::Cell;
use std::ptr::{self, NonNull};
use std::sync::atomic::{compiler_fence, AtomicPtr, AtomicU64, Ordering};
use std::sync::Arc;

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
    /// The thread's id ([`Leases::id`]).
    owner: u64,
    /// The trace this lease is for: compared, never followed through this field. A lease with no
    /// live node holds no count and may be taken for another trace.
    key: AtomicPtr<Inner>,
    /// The count (`Arc::into_raw`), or null while no node is alive.
    held: AtomicPtr<Inner>,
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
                // SAFETY: a lease of this thread, alive until it is concluded below or by the
                // last free elsewhere (after GONE).
                unsafe { leave(lease) };
            }
        });
    }
}

/// The owner's exit: concludes the lease now if none of its nodes is alive, else leaves that to
/// the last free.
///
/// # Safety
/// `lease` is the exiting thread's own.
unsafe fn leave(lease: *mut Lease) {
    // SAFETY: alive until concluded (see the function).
    let l = unsafe { &*lease };
    let left = l.live.load(Ordering::Relaxed);
    // AcqRel: the frees counted before are seen (their nodes' last uses happen before the count
    // is dropped), and this thread's uses are seen by the free that ends the lease.
    if l.away.fetch_add(GONE - left, Ordering::AcqRel) == left {
        // SAFETY: every node is freed and no free can come: the lease is ours to end.
        drop(unsafe { Box::from_raw(lease) }.take_held());
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
#[inline(always)]
pub(crate) fn take(inner: &Arc<Inner>) -> Option<NonNull<Lease>> {
    // `Leases` has no destructor: reaching it never fails.
    LEASES.try_with(|l| take_in(l, inner)).ok().flatten()
}

#[inline(always)]
fn take_in(l: &Leases, inner: &Arc<Inner>) -> Option<NonNull<Lease>> {
    if l.mode.get() != READY {
        return take_cold(l, inner);
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
        NonNull::new(lease)
    })
}

/// The first lease of a thread (its guard is registered first), or none: inside a signal
/// handler that interrupted the bookkeeping, or while the thread exits.
#[cold]
#[inline(never)]
fn take_cold(l: &Leases, inner: &Arc<Inner>) -> Option<NonNull<Lease>> {
    if l.mode.get() == UNGUARDED {
        // Registering a destructor may allocate: inside an emitting call, as the ring's
        // allocations are, so that an allocator that emits is refused.
        let _entered = Entered::enter();
        if GUARD.try_with(|_| ()).is_ok() {
            static NEXT_ID: AtomicU64 = AtomicU64::new(1);
            l.id.set(NEXT_ID.fetch_add(1, Ordering::Relaxed));
            l.mode.set(READY);
            return take_in(l, inner);
        }
    }
    None
}

/// Takes a count for the lease's first live node.
#[cold]
#[inline(never)]
fn hold(lease: &Lease, inner: &Arc<Inner>) {
    lease.held.store(Arc::into_raw(Arc::clone(inner)).cast_mut(), Ordering::Relaxed);
}

/// This thread's lease for `inner`: the one it has, else an idle one taken over, else a new one.
/// Inside the bookkeeping ([`busy`]).
#[cold]
#[inline(never)]
fn find(l: &Leases, inner: &Arc<Inner>) -> *mut Lease {
    let key = Arc::as_ptr(inner).cast_mut();
    let mut all = l.all.take();
    let found = own(&all).find(|(_, p)| p.key.load(Ordering::Relaxed) == key).map(|(p, _)| p);
    // An idle lease that holds no count has no node, and no free of it can come: it can serve
    // another trace.
    let idle = || {
        own(&all)
            .find(|(_, p)| p.held.load(Ordering::Relaxed).is_null() && p.idle())
            .map(|(p, _)| p)
    };
    let lease = found.or_else(idle).unwrap_or_else(|| {
        let _entered = Entered::enter();
        let lease = Box::into_raw(Box::new(Lease {
            owner: l.id.get(),
            key: AtomicPtr::new(key),
            held: AtomicPtr::new(ptr::null_mut()),
            live: AtomicU64::new(0),
            away: AtomicU64::new(0),
        }));
        all.push(lease);
        lease
    });
    l.all.set(all);
    // SAFETY: a live lease of this thread.
    unsafe { (*lease).key.store(key, Ordering::Relaxed) };
    l.current.set(lease);
    lease
}

/// A thread's list of its leases, each as a pointer and a reference.
fn own(all: &[*mut Lease]) -> impl Iterator<Item = (*mut Lease, &Lease)> {
    // SAFETY: the list holds this thread's leases, which live at least until its exit (`leave`),
    // when the list is emptied first.
    all.iter().map(|&p| (p, unsafe { &*p }))
}

/// A node made under `lease` is freed.
///
/// # Safety
/// `lease` came from [`take`] for that node, which is freed once, here.
#[inline(always)]
pub(crate) unsafe fn give(lease: NonNull<Lease>) {
    // SAFETY: a node's lease lives until its last node is freed: this one is not yet.
    let lease_ref = unsafe { lease.as_ref() };
    let released = LEASES
        .try_with(|l| {
            if l.mode.get() != READY || l.id.get() != lease_ref.owner {
                return Err(());
            }
            Ok(busy(l, || {
                let live = lease_ref.live.load(Ordering::Relaxed) - 1;
                lease_ref.live.store(live, Ordering::Relaxed);
                match live == lease_ref.away.load(Ordering::Acquire) {
                    true => lease_ref.take_held(),
                    false => None,
                }
            }))
        })
        .unwrap_or(Err(()));
    match released {
        // Dropped after the bookkeeping: the trace's last count closes it.
        Ok(count) => drop(count),
        // SAFETY: the function's contract.
        Err(()) => unsafe { give_away(lease) },
    }
}

/// [`give`] from another thread than the lease's owner (or from a signal handler on it): counted
/// in `away`, after which this thread does not touch the lease, unless its owner has exited and
/// this was its last node.
#[cold]
#[inline(never)]
unsafe fn give_away(lease: NonNull<Lease>) {
    // SAFETY: alive until this free is counted (see `give`).
    let l = unsafe { lease.as_ref() };
    // AcqRel: this node's uses happen before whoever ends the lease drops the count, and the
    // uses of the others before this thread does.
    if l.away.fetch_add(1, Ordering::AcqRel) + 1 == GONE {
        // SAFETY: the owner has exited and this was the last node: the lease is ours to end.
        drop(unsafe { Box::from_raw(lease.as_ptr()) }.take_held());
    }
}

/// A `Trace` clone of `inner` is dropped on this thread: if this thread's lease on it is idle,
/// its count is dropped now, so that the trace closes when the last clone goes, as it would
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
                    .and_then(|(_, p)| if p.idle() { p.take_held() } else { None });
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
    use super::super::{Metadata, Trace};

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
        assert_eq!(count(&trace), 1, "the last record gone, the lease's count is let go");
        drop(trace);
        assert!(closed(&out), "dropping the last clone closed the trace");
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
