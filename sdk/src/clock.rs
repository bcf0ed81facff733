//! The simulator's clock as seen by the SDK.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// A shared cycle counter that the simulator advances and the SDK reads when a call gives no `clk`.
///
/// Cloning is cheap and every clone sees the same counter. Reads and writes are single relaxed
/// atomic operations: the counter carries no other memory ordering.
///
/// ```
/// let clock = jets::SimClock::new();
/// let view = clock.clone();
/// clock.advance(10);
/// clock.tick();
/// assert_eq!(view.now(), 11);
/// clock.set(100);
/// assert_eq!(view.now(), 100);
/// ```
#[derive(Clone, Debug, Default)]
pub struct SimClock(Arc<AtomicU64>);

impl SimClock {
    /// A clock at cycle 0.
    pub fn new() -> Self {
        Self::default()
    }

    /// A clock at `cycle`.
    pub fn starting_at(cycle: u64) -> Self {
        SimClock(Arc::new(AtomicU64::new(cycle)))
    }

    /// The current cycle.
    #[inline]
    pub fn now(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }

    /// Sets the current cycle.
    #[inline]
    pub fn set(&self, cycle: u64) {
        self.0.store(cycle, Ordering::Relaxed)
    }

    /// Advances by `cycles` and returns the new cycle.
    #[inline]
    pub fn advance(&self, cycles: u64) -> u64 {
        self.0.fetch_add(cycles, Ordering::Relaxed).wrapping_add(cycles)
    }

    /// Advances by one cycle and returns the new cycle.
    #[inline]
    pub fn tick(&self) -> u64 {
        self.advance(1)
    }

    /// Where the counter (a native-endian `u64`) lives in this process's memory, valid while any
    /// clone of this clock lives: for collectors that read the cycle from outside the program's
    /// code (the eBPF I/O collector, `jets_host::ebpf`, reads it in the kernel at each traced
    /// operation of this process, so each operation has the cycle it happened at).
    pub fn counter_address(&self) -> usize {
        Arc::as_ptr(&self.0) as usize
    }
}
