//! What else ran on this machine's CPUs while a measurement ran: other programs, the kernel's
//! own threads (the writeback of the measured program's files among them) and, on a virtual
//! machine, the host (`steal`: time a CPU of this machine had work and the hypervisor ran
//! something else). A figure taken while the machine was busy is not an idle machine's figure,
//! and a change measured then may be the load's doing: on 2026-11-28, two forgotten processes
//! spinning on this project's 2-core VM made Tiny5's full trace look 30 % slower, and a design
//! that added a thread look 12 % faster; on the idle machine it made no difference. `jets bench`
//! and `pipeline_modes` report it beside their times.
//!
//! The machine's busy time comes from `/proc/stat` (clock ticks, 10 ms), this process's own from
//! its CPU clock; what is left over, divided by the wall time, is the other work in cores. Linux
//! only: elsewhere nothing is measured ([`Tally::load`] is `None`).
//!
//! ```
//! let mut tally = jets_host::load::Tally::default();
//! let sum: u64 = tally.during(|| (0..1_000_000u64).sum());
//! assert_eq!(sum, 499_999_500_000);
//! if let Some(load) = tally.load() {
//!     assert!(load.others >= 0.0 && load.steal >= 0.0);
//! }
//! ```

use std::thread;
use std::time::Instant;

/// The other work on the machine, in cores (CPU seconds per second of wall time).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct OtherLoad {
    /// Other programs and kernel threads.
    pub others: f64,
    /// The host, on a virtual machine.
    pub steal: f64,
}

/// Sums the other work over several timed spans (a round's runs), leaving out what lies between
/// them.
#[derive(Default)]
pub struct Tally {
    others_secs: f64,
    steal_secs: f64,
    wall_secs: f64,
    /// A span could not be measured (not Linux, or `/proc` unreadable).
    unknown: bool,
}

impl Tally {
    /// Runs `f`, counting what else the machine did meanwhile.
    pub fn during<R>(&mut self, f: impl FnOnce() -> R) -> R {
        let before = Mark::now();
        let r = f();
        match (before, Mark::now()) {
            (Some(a), Some(b)) => {
                let ticks = a.ticks_per_sec;
                let busy = b.busy_ticks.saturating_sub(a.busy_ticks) as f64 / ticks;
                let own = b.own_ns.saturating_sub(a.own_ns) as f64 / 1e9;
                // Ticks are counted at the tick: a short span can read a little less busy time
                // than this process itself used. Never below zero.
                self.others_secs += (busy - own).max(0.0);
                self.steal_secs += b.steal_ticks.saturating_sub(a.steal_ticks) as f64 / ticks;
                self.wall_secs += (b.at - a.at).as_secs_f64();
            }
            _ => self.unknown = true,
        }
        r
    }

    /// The average over the spans, in cores; `None` if any span could not be measured.
    pub fn load(&self) -> Option<OtherLoad> {
        if self.unknown || self.wall_secs <= 0.0 {
            return None;
        }
        Some(OtherLoad {
            others: self.others_secs / self.wall_secs,
            steal: self.steal_secs / self.wall_secs,
        })
    }
}

/// One reading: the machine's CPU time, this process's own, and when.
struct Mark {
    at: Instant,
    busy_ticks: u64,
    steal_ticks: u64,
    ticks_per_sec: f64,
    own_ns: u64,
}

impl Mark {
    #[cfg(target_os = "linux")]
    fn now() -> Option<Mark> {
        use crate::procfs;
        let own_ns = procfs::clock_ns(libc::CLOCK_PROCESS_CPUTIME_ID);
        let system = procfs::system_cpu().ok()?;
        Some(Mark {
            at: Instant::now(),
            busy_ticks: system.busy_ticks,
            steal_ticks: system.steal_ticks,
            ticks_per_sec: procfs::clock_ticks() as f64,
            own_ns,
        })
    }

    #[cfg(not(target_os = "linux"))]
    fn now() -> Option<Mark> {
        None
    }
}

/// Round trips of [`core_round_trip`].
const ROUND_TRIPS: u64 = 100_000;

/// The time for a cache line to go from this thread's core to another's and back, in ns: two
/// threads hand a counter to each other 100 000 times (`ROUND_TRIPS`; at most a few tens of
/// milliseconds). A line kept by a traced run is written on the simulator's core and read on
/// the writer's, so the flight recorder and the full trace slow down as this time grows; on a
/// virtual machine it depends on where the host runs its cores, which changes while it runs
/// (on this project's 2-vCPU VM, about 45 ns or about 380 ns from minute to minute). `None`
/// with fewer than two CPUs, where the two threads would not run at once.
///
/// ```
/// if let Some(ns) = jets_host::load::core_round_trip() {
///     assert!(ns > 0.0 && ns.is_finite());
/// }
/// ```
pub fn core_round_trip() -> Option<f64> {
    use std::sync::atomic::{AtomicU64, Ordering};
    if thread::available_parallelism().map_or(1, |n| n.get()) < 2 {
        return None;
    }
    let turn = AtomicU64::new(0);
    // Waits until `turn` is `value`; yields now and then, so that a descheduled partner runs.
    let wait = |value: u64| {
        let mut spins = 0u32;
        while turn.load(Ordering::Acquire) != value {
            spins += 1;
            if spins % 4096 == 0 {
                thread::yield_now();
            }
            std::hint::spin_loop();
        }
    };
    // The first thousand round trips wait for the other thread to start: not timed.
    const WARM: u64 = 1000;
    thread::scope(|s| {
        s.spawn(|| {
            for i in 0..WARM + ROUND_TRIPS {
                wait(2 * i + 1);
                turn.store(2 * i + 2, Ordering::Release);
            }
        });
        let mut start = Instant::now();
        for i in 0..WARM + ROUND_TRIPS {
            if i == WARM {
                start = Instant::now();
            }
            wait(2 * i);
            turn.store(2 * i + 1, Ordering::Release);
        }
        wait(2 * (WARM + ROUND_TRIPS));
        Some(start.elapsed().as_nanos() as f64 / ROUND_TRIPS as f64)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// While this process keeps every CPU busy, others can only run by taking one from it: the
    /// other work is well under the machine's size, where it would be all of it if this
    /// process's own time were not taken off.
    #[test]
    fn this_process_own_work_is_not_other_work() {
        let cpus = thread::available_parallelism().map_or(1, |n| n.get());
        let mut tally = Tally::default();
        tally.during(|| {
            thread::scope(|s| {
                for _ in 0..cpus {
                    s.spawn(|| {
                        let t = Instant::now();
                        while t.elapsed() < Duration::from_millis(300) {
                            std::hint::spin_loop();
                        }
                    });
                }
            });
        });
        let Some(load) = tally.load() else {
            eprintln!("NOT CHECKED: other work is measured on Linux only");
            return;
        };
        assert!(load.others < 0.5 * cpus as f64, "{load:?} with {cpus} CPUs all this process's");
        assert!(load.steal >= 0.0);
    }
}
