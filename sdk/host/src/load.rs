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
use std::time::{Duration, Instant};

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

/// The longest [`core_round_trip`] goes on for. It takes a few tens of milliseconds where both
/// threads run at once; under `valgrind`, which runs one thread at a time, each hand-over waits
/// for its scheduler, and the 100 000 round trips took a quarter of an hour (2026-11-28).
const LIMIT: Duration = Duration::from_secs(1);

/// The time for a cache line to go from this thread's core to another's and back, in ns: two
/// threads hand a counter to each other 100 000 times (`ROUND_TRIPS`; at most a few tens of
/// milliseconds, and never more than a second: the mean of those done by then). A line kept by
/// a traced run is written on the simulator's core and read on the writer's, so the flight
/// recorder and the full trace slow down as this time grows; on a virtual machine it depends on
/// where the host runs its cores, which changes while it runs (on this project's 2-vCPU AMD VM,
/// about 45 ns or about 380 ns from minute to minute; 150–210 ns on its Intel VM). `None` with
/// fewer than two CPUs, where the two threads would not run at once, or when not even the first
/// thousand round trips, untimed, were over within the second.
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
    // `turn` counts the hand-overs; STOP ends them early.
    const STOP: u64 = u64::MAX;
    let turn = AtomicU64::new(0);
    // Waits until `turn` is `value` (true) or STOP (false); yields now and then, so that a
    // descheduled partner runs.
    let wait = |value: u64| {
        let mut spins = 0u32;
        loop {
            match turn.load(Ordering::Acquire) {
                t if t == value => return true,
                STOP => return false,
                _ => {}
            }
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
                if !wait(2 * i + 1) {
                    return;
                }
                turn.store(2 * i + 2, Ordering::Release);
            }
        });
        let begun = Instant::now();
        let mut start = begun;
        for i in 0..WARM + ROUND_TRIPS {
            if i == WARM {
                start = Instant::now();
            }
            // Only this thread stores STOP: the partner hands the turn back.
            wait(2 * i);
            // `i` round trips are over, of which `i - WARM` timed.
            if i % 256 == 0 && begun.elapsed() > LIMIT {
                turn.store(STOP, Ordering::Release);
                let timed = i.checked_sub(WARM).filter(|&n| n > 0)?;
                return Some(start.elapsed().as_nanos() as f64 / timed as f64);
            }
            turn.store(2 * i + 1, Ordering::Release);
        }
        wait(2 * (WARM + ROUND_TRIPS));
        Some(start.elapsed().as_nanos() as f64 / ROUND_TRIPS as f64)
    })
}

/// The CPUs the calling thread may run on (`sched_getaffinity`), in increasing order; `None` off
/// Linux or if the kernel does not say.
///
/// ```
/// if let Some(cpus) = jets_host::load::allowed_cpus() {
///     assert!(!cpus.is_empty());
/// }
/// ```
pub fn allowed_cpus() -> Option<Vec<usize>> {
    #[cfg(target_os = "linux")]
    {
        let set = affinity::get().ok()?;
        let cpus: Vec<usize> = (0..libc::CPU_SETSIZE as usize)
            // SAFETY: `CPU_ISSET` reads the set only, and `i` is below its size.
            .filter(|&i| unsafe { libc::CPU_ISSET(i, &set) })
            .collect();
        (!cpus.is_empty()).then_some(cpus)
    }
    #[cfg(not(target_os = "linux"))]
    None
}

/// The calling thread, kept on one CPU until this is dropped, when it may run again on the CPUs
/// it had before ([`pin_current_thread`]).
///
/// Why a benchmark pins: the CPUs of a virtual machine need not be equally fast. On this
/// project's 2-vCPU VM on 2026-11-28 the same untraced Tiny5 run took 0.70–0.96 s pinned to
/// CPU 0 and 1.06–1.09 s pinned to CPU 1, in three alternated pairs; minutes later the two were
/// alike. The guest cannot see why (the host's other tenants, most likely). A slowdown whose
/// untraced run landed on one CPU and its traced run on the other is off by that much; pinned,
/// both runs of a ratio ran on the same CPU.
#[must_use = "the thread is unpinned when this is dropped"]
pub struct Pinned {
    #[cfg(target_os = "linux")]
    before: libc::cpu_set_t,
    cpu: usize,
}

impl Pinned {
    /// The CPU the thread is kept on.
    pub fn cpu(&self) -> usize {
        self.cpu
    }
}

impl Drop for Pinned {
    fn drop(&mut self) {
        // Back to the CPUs it had: this can only fail if they were all taken offline since,
        // and then the thread stays where it is, which loses nothing.
        #[cfg(target_os = "linux")]
        let _ = affinity::set(&self.before);
    }
}

/// Keeps the calling thread on CPU `cpu` until the returned guard is dropped. Threads it starts
/// meanwhile inherit that, so start those first (a trace's writer thread: `jets bench` pins the
/// simulator once the trace is open). An error names the CPU when the kernel refuses it (not
/// one of [`allowed_cpus`]), and says so off Linux, where nothing is pinned.
///
/// ```
/// if let Some(cpu) = jets_host::load::allowed_cpus().and_then(|cpus| cpus.last().copied()) {
///     let pinned = jets_host::load::pin_current_thread(cpu).unwrap();
///     assert_eq!(pinned.cpu(), cpu);
/// } // runs where it did before from here
/// ```
pub fn pin_current_thread(cpu: usize) -> std::io::Result<Pinned> {
    #[cfg(target_os = "linux")]
    {
        use std::io::{Error, ErrorKind};
        if cpu >= libc::CPU_SETSIZE as usize {
            return Err(Error::new(ErrorKind::InvalidInput, format!("no CPU {cpu} here")));
        }
        let before = affinity::get()?;
        // SAFETY: an all-zero `cpu_set_t` is the empty set.
        let mut one: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        // SAFETY: writes bit `cpu` of the set, below its size (checked above).
        unsafe { libc::CPU_SET(cpu, &mut one) };
        affinity::set(&one)
            .map_err(|e| Error::new(e.kind(), format!("pinning to CPU {cpu}: {e}")))?;
        Ok(Pinned { before, cpu })
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = cpu;
        Err(std::io::Error::new(
            std::io::ErrorKind::Unsupported,
            "pinning a thread to a CPU is implemented on Linux only",
        ))
    }
}

/// The CPU the calling thread runs on now (`sched_getcpu`); `None` off Linux.
pub fn current_cpu() -> Option<usize> {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: no arguments; -1 on failure.
        let cpu = unsafe { libc::sched_getcpu() };
        usize::try_from(cpu).ok()
    }
    #[cfg(not(target_os = "linux"))]
    None
}

/// The calling thread's CPU set (`pid` 0: this thread, not the process).
#[cfg(target_os = "linux")]
mod affinity {
    pub(super) fn get() -> std::io::Result<libc::cpu_set_t> {
        // SAFETY: an all-zero `cpu_set_t` is valid; the kernel writes at most its size.
        let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        let size = std::mem::size_of::<libc::cpu_set_t>();
        // SAFETY: `set` is a live `cpu_set_t` of `size` bytes.
        match unsafe { libc::sched_getaffinity(0, size, &mut set) } {
            0 => Ok(set),
            _ => Err(std::io::Error::last_os_error()),
        }
    }

    pub(super) fn set(set: &libc::cpu_set_t) -> std::io::Result<()> {
        let size = std::mem::size_of::<libc::cpu_set_t>();
        // SAFETY: `set` is a live `cpu_set_t` of `size` bytes, only read.
        match unsafe { libc::sched_setaffinity(0, size, set) } {
            0 => Ok(()),
            _ => Err(std::io::Error::last_os_error()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// While this process keeps every CPU busy, others can only run by taking one from it: the
    /// other work is well under the machine's size, where it would be all of it if this
    /// process's own time were not taken off. Work other processes were doing just before (a
    /// shared or busy machine) is allowed for, since they go on taking their share.
    #[test]
    fn this_process_own_work_is_not_other_work() {
        let cpus = thread::available_parallelism().map_or(1, |n| n.get());
        let mut before = Tally::default();
        before.during(|| thread::sleep(Duration::from_millis(300)));
        let busy_before = before.load().map_or(0.0, |l| l.others);
        if busy_before >= 0.5 * cpus as f64 {
            eprintln!(
                "NOTE: other processes ran {busy_before:.2} of {cpus} CPUs just before: the check \
                 below then tells little"
            );
        }
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
        assert!(
            load.others < 0.5 * cpus as f64 + busy_before,
            "{load:?} with {cpus} CPUs all this process's ({busy_before:.2} of other work before)"
        );
        assert!(load.steal >= 0.0);
    }

    /// Pinned, the thread runs on that CPU alone; unpinned, it has its CPUs back.
    #[test]
    fn a_pinned_thread_runs_on_its_cpu_and_gets_its_cpus_back() {
        let Some(cpus) = allowed_cpus() else {
            eprintln!("NOT CHECKED: threads are pinned on Linux only");
            assert!(pin_current_thread(0).is_err(), "says it cannot");
            return;
        };
        thread::spawn(move || {
            for &cpu in &cpus {
                let pinned = pin_current_thread(cpu).expect("an allowed CPU");
                assert_eq!(pinned.cpu(), cpu);
                assert_eq!(allowed_cpus().as_deref(), Some(&[cpu][..]));
                // Still there after giving the CPU up a few times.
                for _ in 0..5 {
                    thread::yield_now();
                    assert_eq!(current_cpu(), Some(cpu));
                }
                drop(pinned);
                assert_eq!(allowed_cpus().as_ref(), Some(&cpus), "the CPUs it had");
            }
        })
        .join()
        .expect("pinning thread");
        let err = pin_current_thread(1 << 20).err().expect("no such CPU");
        assert!(err.to_string().contains("no CPU"), "{err}");
    }
}
