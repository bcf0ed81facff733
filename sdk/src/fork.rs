//! A process-wide lock's guard held across a `fork` by the C library's `pthread_atfork`
//! handlers ([`crate::__fork`]): taken before the fork, so that no other thread holds the lock
//! when the child is made (the child would inherit it held forever, and hang opening a trace),
//! and released after it, in the parent and in the child.

use std::cell::UnsafeCell;

/// Where a lock's guard waits out a `fork` (see the module).
pub(crate) struct HeldAcrossFork<G>(UnsafeCell<Option<G>>);

// SAFETY: touched only by `hold` and `release`, which a `fork` wrapper (the C library's
// `pthread_atfork` handlers) calls one after the other on the forking thread.
unsafe impl<G> Sync for HeldAcrossFork<G> {}

impl<G> HeldAcrossFork<G> {
    pub(crate) const fn new() -> Self {
        HeldAcrossFork(UnsafeCell::new(None))
    }

    /// Before a `fork`, on the forking thread: keeps `guard` until [`HeldAcrossFork::release`].
    pub(crate) fn hold(&self, guard: G) {
        // SAFETY: see the `Sync` impl: no other thread touches the cell.
        unsafe { *self.0.get() = Some(guard) };
    }

    /// After a `fork`, in the parent and in the child: drops the guard, releasing the lock.
    pub(crate) fn release(&self) {
        // SAFETY: as in `hold`.
        drop(unsafe { (*self.0.get()).take() });
    }
}
