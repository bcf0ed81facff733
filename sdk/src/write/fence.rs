//! The barriers of the close handshake: a light one on every push, a heavy one once per close.
//!
//! A push announces itself (`busy = true`) and then reads `closed`; a close stores `closed` and
//! then reads every ring's `busy`. For one of the two to see the other's store, both sides need a
//! store-load barrier (Dekker). A full fence on every push would cost the hot path several
//! nanoseconds, so on Linux the producer side only stops the compiler, and the closing side calls
//! `membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED)`, which runs a full barrier on every CPU that runs
//! a thread of this process (and a context switch is one too) before it returns. Where that system
//! call is missing (other systems, old kernels, Miri) both sides use an ordinary `SeqCst` fence.

use std::sync::atomic::{compiler_fence, fence, AtomicU8, Ordering};

/// 0: not probed yet, 1: membarrier registered, 2: not available.
static HEAVY: AtomicU8 = AtomicU8::new(0);

/// Probes and registers `membarrier` once per process. Called when a trace opens, before its
/// writer thread and any producer of it exist, so both sides read the same answer afterwards.
pub(crate) fn init() {
    if HEAVY.load(Ordering::Acquire) != 0 {
        return;
    }
    let ok = register();
    // Several traces may open at once: the first answer wins, and every answer is the same.
    let _ = HEAVY.compare_exchange(0, if ok { 1 } else { 2 }, Ordering::AcqRel, Ordering::Acquire);
}

#[inline(always)]
fn heavy_available() -> bool {
    HEAVY.load(Ordering::Relaxed) == 1
}

/// Producer side: between storing `busy` and loading `closed`.
#[inline(always)]
pub(crate) fn light() {
    Light::now().fence();
}

/// [`light`] with its question (is the heavy barrier there?) asked once, by whoever keeps it: a
/// ring asks when it is made, so that each push tests a byte of its own rather than load the
/// answer through the global offset table (two instructions a push). The answer never changes
/// once a trace has opened ([`init`] runs before any ring of it is made).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Light {
    heavy: bool,
}

impl Light {
    /// The light barrier as it is now: call after [`init`] (a trace is open).
    #[inline]
    pub(crate) fn now() -> Light {
        Light { heavy: heavy_available() }
    }

    /// See [`light`].
    #[inline(always)]
    pub(crate) fn fence(self) {
        if self.heavy {
            compiler_fence(Ordering::SeqCst);
        } else {
            fence(Ordering::SeqCst);
        }
    }
}

/// Closing side: between storing `closed` and loading the rings' `busy` flags.
pub(crate) fn heavy() {
    fence(Ordering::SeqCst);
    if heavy_available() {
        // Registered, so the kernel does not refuse it; retry on the documented transient errors.
        while !expedited() {
            std::thread::yield_now();
        }
    }
}

#[cfg(all(target_os = "linux", not(miri)))]
const MEMBARRIER_CMD_PRIVATE_EXPEDITED: libc::c_int = 1 << 3;
#[cfg(all(target_os = "linux", not(miri)))]
const MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED: libc::c_int = 1 << 4;

#[cfg(all(target_os = "linux", not(miri)))]
fn membarrier(cmd: libc::c_int) -> bool {
    // SAFETY: membarrier takes (cmd, flags, cpu_id) and touches no memory of ours.
    unsafe { libc::syscall(libc::SYS_membarrier, cmd, 0 as libc::c_uint, 0 as libc::c_int) == 0 }
}

#[cfg(all(target_os = "linux", not(miri)))]
fn register() -> bool {
    membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED)
}

#[cfg(all(target_os = "linux", not(miri)))]
fn expedited() -> bool {
    membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED)
}

#[cfg(not(all(target_os = "linux", not(miri))))]
fn register() -> bool {
    false
}

#[cfg(not(all(target_os = "linux", not(miri))))]
fn expedited() -> bool {
    true
}
