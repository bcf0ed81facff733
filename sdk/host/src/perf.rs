//! perf_event_open counters: hardware when the CPU exposes them, software otherwise.
//!
//! Counters are opened with `inherit`, so they follow the threads and child processes that the
//! counted tasks create after the counters were opened. A hardware counter that fails to open is
//! reported in the [capability](super::Capability) with the kernel's reason; it is never read as 0.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use super::denet::{PerfCounters, PerfSoftware};
use super::Capability;

// perf_event_attr's first 64 bytes (PERF_ATTR_SIZE_VER0): all the fields counting needs.
#[repr(C)]
#[derive(Default)]
struct Attr {
    kind: u32,
    size: u32,
    config: u64,
    sample_period: u64,
    sample_type: u64,
    read_format: u64,
    flags: u64,
    wakeup_events: u32,
    bp_type: u32,
    config1: u64,
}

const TYPE_HARDWARE: u32 = 0;
const TYPE_SOFTWARE: u32 = 1;
const FLAG_INHERIT: u64 = 1 << 1;
const FLAG_EXCLUDE_KERNEL: u64 = 1 << 5;
const FLAG_EXCLUDE_HV: u64 = 1 << 6;

/// Hardware counters, in [`PerfCounters`] field order: (name, config).
const HARDWARE: [(&str, u64); 5] = [
    ("cycles", 0),
    ("instructions", 1),
    ("cache_refs", 2),
    ("cache_misses", 3),
    ("stalled_backend", 8),
];
/// Software counters, in [`PerfSoftware`] field order: (name, config).
const SOFTWARE: [(&str, u64); 3] = [("task_clock", 1), ("context_switches", 3), ("page_faults", 2)];

fn open(kind: u32, config: u64, tid: i32) -> io::Result<OwnedFd> {
    let mut attr = Attr {
        kind,
        size: std::mem::size_of::<Attr>() as u32,
        config,
        flags: FLAG_INHERIT | FLAG_EXCLUDE_HV,
        ..Default::default()
    };
    for attempt in 0..2 {
        // SAFETY: `attr` is a valid perf_event_attr of the size it declares; the other arguments
        // are plain integers (cpu -1 = any CPU, no group, no flags).
        let fd = unsafe {
            libc::syscall(libc::SYS_perf_event_open, &attr as *const Attr, tid, -1i32, -1i32, 0u64)
        };
        if fd >= 0 {
            // SAFETY: the kernel just returned this descriptor to us and nobody else owns it.
            return Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) });
        }
        let err = io::Error::last_os_error();
        // perf_event_paranoid 2 allows user-space counting only: retry without the kernel.
        if attempt == 0 && matches!(err.raw_os_error(), Some(libc::EACCES) | Some(libc::EPERM)) {
            attr.flags |= FLAG_EXCLUDE_KERNEL;
            continue;
        }
        return Err(err);
    }
    Err(io::Error::from_raw_os_error(libc::EACCES))
}

fn read_fd(fd: &OwnedFd) -> Option<u64> {
    let mut v = 0u64;
    // SAFETY: reads at most 8 bytes into a valid u64.
    let n = unsafe { libc::read(fd.as_raw_fd(), (&mut v as *mut u64).cast(), 8) };
    (n == 8).then_some(v)
}

fn reason(err: &io::Error) -> String {
    match err.raw_os_error() {
        Some(libc::ENOENT) | Some(libc::EOPNOTSUPP) => format!(
            "the CPU (or the hypervisor, on a VM) exposes no such counter to perf_event_open ({err})"
        ),
        Some(libc::EACCES) | Some(libc::EPERM) => format!(
            "perf_event_open refused: needs perf_event_paranoid <= 2 or CAP_PERFMON ({err})"
        ),
        Some(libc::ENOSYS) => format!("the kernel has no perf_event_open ({err})"),
        _ => format!("perf_event_open failed: {err}"),
    }
}

/// A set of counters (hardware or software) on some threads, read as deltas.
#[derive(Debug)]
pub struct Counters {
    /// One descriptor per (counter, thread): `fds[counter][thread]`.
    fds: Vec<Vec<OwnedFd>>,
    last: Vec<u64>,
}

impl Counters {
    fn open_all(kind: u32, set: &[(&str, u64)], tids: &[u32]) -> (Option<Counters>, Capability) {
        let mut fds: Vec<Vec<OwnedFd>> = Vec::new();
        let mut opened: Vec<&str> = Vec::new();
        let mut first_error: Option<(String, io::Error)> = None;
        for &(name, config) in set {
            let mut per_thread = Vec::new();
            for &tid in tids {
                match open(kind, config, tid as i32) {
                    Ok(fd) => per_thread.push(fd),
                    // A thread that exited meanwhile is simply not counted.
                    Err(e) if e.raw_os_error() == Some(libc::ESRCH) => {}
                    Err(e) => {
                        first_error.get_or_insert((name.to_string(), e));
                        per_thread.clear();
                        break;
                    }
                }
            }
            if per_thread.is_empty() {
                fds.push(Vec::new());
            } else {
                opened.push(name);
                fds.push(per_thread);
            }
        }
        let required = if kind == TYPE_HARDWARE { 2 } else { 1 };
        let ok = fds.iter().take(required).all(|f| !f.is_empty());
        let mut cap = Capability::new(ok, None);
        cap.extra
            .insert("events".into(), opened.iter().map(|s| serde_json::Value::from(*s)).collect());
        if let Some((name, e)) = &first_error {
            cap.reason = Some(format!("{name}: {}", reason(e)));
        }
        if !ok {
            return (None, cap);
        }
        let mut c = Counters { last: vec![0; fds.len()], fds };
        c.last = c.totals();
        (Some(c), cap)
    }

    fn totals(&self) -> Vec<u64> {
        self.fds.iter().map(|fds| fds.iter().filter_map(read_fd).sum()).collect()
    }

    /// Deltas since the previous call (or since opening), in the order of the counter set.
    fn deltas(&mut self) -> Vec<u64> {
        let now = self.totals();
        let d = now.iter().zip(&self.last).map(|(n, l)| n.saturating_sub(*l)).collect();
        self.last = now;
        d
    }

    /// Running total of the second counter (instructions for hardware).
    fn total(&self, i: usize) -> Option<u64> {
        let fds = self.fds.get(i)?;
        (!fds.is_empty()).then(|| fds.iter().filter_map(read_fd).sum())
    }
}

/// Hardware and software counters on a set of threads, with the capabilities that say which opened.
#[derive(Debug)]
pub struct Perf {
    hardware: Option<Counters>,
    software: Option<Counters>,
    /// `perf_hw`: hardware counters (cycles and instructions required).
    pub hw_capability: Capability,
    /// `perf_sw`: software counters (task clock required).
    pub sw_capability: Capability,
}

impl Perf {
    /// Opens counters on the given threads (with inherit, so their future threads and children
    /// count too). Software counters are opened only when the hardware ones are not available.
    pub fn open(tids: &[u32]) -> Perf {
        let (hardware, hw_capability) = Counters::open_all(TYPE_HARDWARE, &HARDWARE, tids);
        let (software, mut sw_capability) = if hardware.is_none() {
            Counters::open_all(TYPE_SOFTWARE, &SOFTWARE, tids)
        } else {
            (
                None,
                Capability::new(false, Some("not needed: hardware counters are available".into())),
            )
        };
        if software.is_some() && sw_capability.reason.is_none() {
            sw_capability.reason = Some("fallback for the unavailable hardware counters".into());
        }
        Perf { hardware, software, hw_capability, sw_capability }
    }

    /// Hardware deltas since the previous sample, when hardware counters are open.
    pub fn hardware_deltas(&mut self) -> Option<PerfCounters> {
        let d = self.hardware.as_mut()?.deltas();
        let g = |i: usize| d.get(i).copied().unwrap_or(0);
        Some(PerfCounters {
            cycles: g(0),
            instructions: g(1),
            cache_refs: g(2),
            cache_misses: g(3),
            stalled_backend: g(4),
        })
    }

    /// Software deltas since the previous sample, when software counters are open.
    pub fn software_deltas(&mut self) -> Option<PerfSoftware> {
        let d = self.software.as_mut()?.deltas();
        let g = |i: usize| d.get(i).copied().unwrap_or(0);
        Some(PerfSoftware { task_clock_ns: g(0), context_switches: g(1), page_faults: g(2) })
    }

    /// Instructions retired so far, when the hardware counter is open.
    pub fn instructions_total(&self) -> Option<u64> {
        self.hardware.as_ref()?.total(1)
    }
}
