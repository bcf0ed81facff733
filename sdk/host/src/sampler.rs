//! Sampling a process tree into denet metrics: CPU from the processes' CPU clocks, I/O and faults
//! against a baseline, sizes as they are.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Instant;

use super::denet::{AggregatedMetrics, ChildMetrics, Metrics, PsiMem, TreeSample};
use super::perf::Perf;
use super::procfs::{self, ProcIo, ProcStat};
use super::{Capabilities, Capability, HostError};

/// What a [`TreeSampler`] measures and against which baseline.
#[derive(Clone, Debug)]
pub struct SamplerOptions {
    /// Follow descendants (children recursively); otherwise only the root process.
    pub include_children: bool,
    /// Report I/O and fault counters since each process started, not since monitoring started.
    pub since_process_start: bool,
    /// The root was started by the monitor itself, so everything it did happened under
    /// monitoring: no baseline even without `since_process_start`.
    pub root_is_fresh: bool,
    /// Open perf counters (hardware, or software as the fallback) on the root's threads.
    pub perf: bool,
    /// Look for new descendants every this many samples (1 = every sample); in between, only the
    /// descendants already found are sampled. Finding them lists `/proc` (see
    /// [`procfs::ProcScanner`]), most of a sample's cost.
    pub discover_every: u32,
}

impl Default for SamplerOptions {
    fn default() -> Self {
        SamplerOptions {
            include_children: true,
            since_process_start: false,
            root_is_fresh: false,
            perf: true,
            discover_every: 1,
        }
    }
}

/// Discoveries between two full re-reads of every process's parent (pid reuse).
const FORGET_EVERY: u32 = 50;

#[derive(Clone, Copy, Debug, Default)]
struct Baseline {
    io: ProcIo,
    minflt: u64,
    majflt: u64,
}

#[derive(Debug)]
struct PidState {
    cpu_ns: u64,
    at: Instant,
    starttime: u64,
    base: Baseline,
    /// The last `/proc/<pid>/io` that could be read. A process that exited but is not reaped yet
    /// keeps its counters, but its `io` file belongs to root then (no `mm`), so a non-root
    /// monitor holds this value instead of dropping the process's I/O from the totals.
    io: Option<ProcIo>,
}

/// The latest PSI readings.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Pressure {
    /// `/proc/pressure/memory`.
    pub system: Option<PsiMem>,
    /// The root's cgroup v2 `memory.pressure`.
    pub cgroup: Option<PsiMem>,
}

/// Samples one process and (optionally) its descendants.
#[derive(Debug)]
pub struct TreeSampler {
    root: u32,
    opts: SamplerOptions,
    clk_tck: u64,
    page_kb: u64,
    boot_ms: u64,
    states: HashMap<u32, PidState>,
    first: bool,
    net_base: Option<(u64, u64)>,
    cgroup_psi: Option<PathBuf>,
    perf: Option<Perf>,
    capabilities: Capabilities,
    pressure: Pressure,
    uptime: f64,
    scanner: procfs::ProcScanner,
    since_scan: u32,
    discoveries: u32,
    known: Vec<u32>,
    io_floor: IoFloor,
}

/// The highest summed I/O counters reported so far.
#[derive(Debug, Default)]
struct IoFloor {
    disk_read: u64,
    disk_write: u64,
    syscall_read: u64,
    syscall_write: u64,
}

impl IoFloor {
    /// Keeps cumulative I/O from going down. The root is read before its descendants, so a child
    /// reaped between the two reads is in neither: the root's reading predates the reap that
    /// hands the child's counters to it, and the child's `/proc` entry is gone by the listing.
    /// The sum then dips for one sample. Read in this order a sample can miss I/O but never count
    /// it twice, so the previous total is the better value until the next sample has it whole.
    fn apply(&mut self, a: &mut AggregatedMetrics) {
        fn keep(floor: &mut u64, v: &mut u64) {
            *v = (*v).max(*floor);
            *floor = *v;
        }
        keep(&mut self.disk_read, &mut a.disk_read_bytes);
        keep(&mut self.disk_write, &mut a.disk_write_bytes);
        if let Some(v) = a.syscall_read_bytes.as_mut() {
            keep(&mut self.syscall_read, v);
        }
        if let Some(v) = a.syscall_write_bytes.as_mut() {
            keep(&mut self.syscall_write, v);
        }
    }
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

impl TreeSampler {
    /// Prepares to sample `root`, probing every source once to fill the capabilities.
    pub fn new(root: u32, opts: SamplerOptions) -> Result<TreeSampler, HostError> {
        let stat_path = PathBuf::from(format!("/proc/{root}/stat"));
        procfs::read_stat(root).map_err(|source| HostError::Io { path: stat_path, source })?;
        let mut caps = Capabilities::default();
        caps.insert("proc_stat", Capability::new(true, None));
        let io = procfs::read_io(root);
        caps.insert(
            "proc_io",
            Capability::new(
                io.is_ok(),
                io.err().map(|e| {
                    format!("/proc/{root}/io: {e} (needs the same user or CAP_SYS_PTRACE)")
                }),
            ),
        );
        let net = procfs::net_totals();
        caps.insert(
            "net",
            Capability::new(net.is_ok(), net.as_ref().err().map(|e| format!("/proc/net/dev: {e}"))),
        );
        let system_psi = procfs::read_psi(std::path::Path::new("/proc/pressure/memory"));
        let cgroup_psi = procfs::cgroup_memory_pressure(root);
        let mut psi = Capability::new(system_psi.is_ok() || cgroup_psi.is_some(), None);
        psi.extra.insert("system".into(), system_psi.is_ok().into());
        psi.extra.insert("per_process".into(), cgroup_psi.is_some().into());
        if let Some(p) = &cgroup_psi {
            psi.extra.insert("cgroup_file".into(), p.display().to_string().into());
        }
        psi.reason = match (&system_psi, &cgroup_psi) {
            (Err(e), None) => Some(format!("/proc/pressure/memory: {e}; no cgroup v2 memory.pressure for the process")),
            (Ok(_), None) => Some("no cgroup v2 memory.pressure of the process's own (cgroup v1, the root cgroup, whose pressure is the system's, or a group without the memory controller)".into()),
            (Err(e), Some(_)) => Some(format!("system PSI unavailable: /proc/pressure/memory: {e}")),
            (Ok(_), Some(_)) => None,
        };
        caps.insert("psi", psi);
        let perf = if opts.perf {
            let tids = procfs::thread_ids(root).unwrap_or_else(|_| vec![root]);
            let p = Perf::open(&tids);
            caps.insert("perf_hw", p.hw_capability.clone());
            caps.insert("perf_sw", p.sw_capability.clone());
            Some(p)
        } else {
            caps.insert(
                "perf_hw",
                Capability::new(false, Some("perf counters not requested".into())),
            );
            None
        };
        Ok(TreeSampler {
            root,
            opts,
            clk_tck: procfs::clock_ticks(),
            page_kb: procfs::page_kb(),
            boot_ms: procfs::boot_time_ms().unwrap_or(0),
            states: HashMap::new(),
            first: true,
            net_base: None,
            cgroup_psi,
            perf,
            capabilities: caps,
            pressure: Pressure::default(),
            uptime: 0.0,
            scanner: procfs::ProcScanner::default(),
            since_scan: 0,
            discoveries: 0,
            known: Vec::new(),
            io_floor: IoFloor::default(),
        })
    }

    /// Which sources are available, and why not when they are not.
    pub fn capabilities(&self) -> &Capabilities {
        &self.capabilities
    }

    /// The PSI readings of the latest sample.
    pub fn pressure(&self) -> Pressure {
        self.pressure
    }

    /// Instructions retired so far by the root's threads, when hardware counters are open.
    pub fn instructions_total(&self) -> Option<u64> {
        self.perf.as_ref()?.instructions_total()
    }

    /// When the root process started, Unix milliseconds (second precision: `btime` is whole seconds).
    pub fn root_start_ms(&self) -> Option<u64> {
        procfs::read_stat(self.root).ok().map(|s| self.boot_ms + s.starttime * 1000 / self.clk_tck)
    }

    /// Takes one sample of the tree. `parent` is `None` once the root has exited (and been reaped).
    pub fn sample(&mut self) -> TreeSample {
        let ts_ms = now_ms();
        let now = Instant::now();
        let net = procfs::net_totals().ok().map(|(rx, tx)| {
            let base = *self.net_base.get_or_insert(if self.opts.since_process_start {
                (0, 0)
            } else {
                (rx, tx)
            });
            (rx.saturating_sub(base.0), tx.saturating_sub(base.1))
        });
        self.pressure = Pressure {
            system: procfs::read_psi(std::path::Path::new("/proc/pressure/memory")).ok(),
            cgroup: self.cgroup_psi.as_deref().and_then(|p| procfs::read_psi(p).ok()),
        };
        let psi = self.pressure.cgroup.or(self.pressure.system);
        let first = std::mem::replace(&mut self.first, false);
        self.uptime = procfs::uptime_secs().unwrap_or(0.0);

        let parent = procfs::read_stat(self.root).ok().map(|stat| {
            self.metrics(self.root, &stat, ts_ms, now, net, psi, first, self.opts.root_is_fresh)
        });
        let mut children = Vec::new();
        if self.opts.include_children {
            for (pid, stat) in self.descendants() {
                let m = self.metrics(pid, &stat, ts_ms, now, net, psi, first, false);
                children.push(ChildMetrics { pid, command: stat.comm, metrics: m });
            }
        }
        let live: Vec<u32> =
            parent.iter().map(|_| self.root).chain(children.iter().map(|c| c.pid)).collect();
        self.states.retain(|pid, _| live.contains(pid));

        let (hw, sw) = match self.perf.as_mut() {
            Some(p) => (p.hardware_deltas(), p.software_deltas()),
            None => (None, None),
        };
        let aggregated = parent.as_ref().map(|p| {
            let mut a = AggregatedMetrics::from_metrics(
                ts_ms,
                std::iter::once(p).chain(children.iter().map(|c| &c.metrics)),
            );
            a.perf = hw;
            a.perf_sw = sw;
            self.io_floor.apply(&mut a);
            a
        });
        let parent = parent.map(|mut p| {
            // With inherit, the counters cover the root and everything it started: that is the
            // aggregate, and also the parent's own value when there are no children.
            if children.is_empty() {
                p.perf = hw;
                p.perf_sw = sw;
            }
            p
        });
        TreeSample { ts_ms, parent, children, aggregated, sim_clk: None }
    }

    /// Replaces the root's I/O in `tree`, a sample of the exited but unreaped root, by `io`: what
    /// its parent measured when reaping it ([`procfs::io_across`] around `waitpid`), and sums the
    /// tree again. An exited process's `/proc/<pid>/io` is root's, so without privileges the
    /// sample holds the root's last reading from before it exited; reaping hands the final
    /// counters (the root's and those of every child it reaped) to the parent, exactly.
    pub fn set_reaped_root_io(&self, tree: &mut TreeSample, io: ProcIo) {
        let Some(parent) = tree.parent.as_mut() else { return };
        let b = self.states.get(&self.root).map(|s| s.base).unwrap_or_default();
        parent.disk_read_bytes = io.read_bytes.saturating_sub(b.io.read_bytes);
        parent.disk_write_bytes = io.write_bytes.saturating_sub(b.io.write_bytes);
        parent.syscall_read_bytes = Some(io.rchar.saturating_sub(b.io.rchar));
        parent.syscall_write_bytes = Some(io.wchar.saturating_sub(b.io.wchar));
        let (perf, perf_sw) =
            tree.aggregated.as_ref().map(|a| (a.perf, a.perf_sw)).unwrap_or_default();
        let mut a = AggregatedMetrics::from_metrics(
            tree.ts_ms,
            std::iter::once(&*parent).chain(tree.children.iter().map(|c| &c.metrics)),
        );
        a.perf = perf;
        a.perf_sw = perf_sw;
        tree.aggregated = Some(a);
    }

    /// The descendants: a discovery (listing `/proc`, ~0.4 ms on this VM, plus the `stat` of new
    /// pids) every `discover_every` samples; in between, the known descendants still in the tree.
    fn descendants(&mut self) -> Vec<(u32, ProcStat)> {
        let discover = self.since_scan == 0;
        self.since_scan = (self.since_scan + 1) % self.opts.discover_every.max(1);
        let found = if discover {
            self.discoveries += 1;
            if self.discoveries % FORGET_EVERY == 0 {
                self.scanner.forget();
            }
            self.scanner.descendants(self.root).unwrap_or_default()
        } else {
            let mut alive: Vec<(u32, ProcStat)> = Vec::new();
            for &pid in &self.known {
                let Ok(stat) = procfs::read_stat(pid) else { continue };
                if stat.ppid == self.root || alive.iter().any(|(p, _)| *p == stat.ppid) {
                    alive.push((pid, stat));
                }
            }
            alive
        };
        self.known = found.iter().map(|(p, _)| *p).collect();
        found
    }

    #[allow(clippy::too_many_arguments)]
    fn metrics(
        &mut self,
        pid: u32,
        stat: &ProcStat,
        ts_ms: u64,
        now: Instant,
        net: Option<(u64, u64)>,
        psi: Option<PsiMem>,
        first: bool,
        fresh: bool,
    ) -> Metrics {
        let read = procfs::read_io(pid).ok();
        // The CPU clock; ticks (10 ms) only where the clock cannot be read.
        let cpu_ns = procfs::cpu_time_ns(pid)
            .unwrap_or((stat.utime + stat.stime) * 1_000_000_000 / self.clk_tck.max(1));
        let since_start = self.opts.since_process_start;
        let state = self.states.entry(pid).or_insert_with(|| PidState {
            cpu_ns,
            at: now,
            starttime: stat.starttime,
            // Processes seen at the first sample ran before monitoring: count from here, unless
            // asked for totals since their start. Later ones started under monitoring.
            base: if first && !since_start && !fresh {
                Baseline { io: read.unwrap_or_default(), minflt: stat.minflt, majflt: stat.majflt }
            } else {
                Baseline::default()
            },
            io: None,
        });
        if state.starttime != stat.starttime {
            // The pid was reused by a new process.
            *state = PidState {
                cpu_ns,
                at: now,
                starttime: stat.starttime,
                base: Baseline::default(),
                io: None,
            };
        }
        let dt = now.duration_since(state.at).as_secs_f64();
        let cpu_usage = if dt > 0.0 {
            (cpu_ns.saturating_sub(state.cpu_ns) as f64 / 1e9 / dt * 100.0) as f32
        } else {
            0.0
        };
        state.cpu_ns = cpu_ns;
        state.at = now;
        if read.is_some() {
            state.io = read;
        }
        let io = state.io;
        let b = state.base;
        let uptime_secs =
            (self.uptime - stat.starttime as f64 / self.clk_tck as f64).max(0.0) as u64;
        Metrics {
            ts_ms,
            cpu_usage,
            mem_rss_kb: stat.rss_pages * self.page_kb,
            mem_vms_kb: stat.vsize / 1024,
            disk_read_bytes: io.map_or(0, |i| i.read_bytes.saturating_sub(b.io.read_bytes)),
            disk_write_bytes: io.map_or(0, |i| i.write_bytes.saturating_sub(b.io.write_bytes)),
            syscall_read_bytes: io.map(|i| i.rchar.saturating_sub(b.io.rchar)),
            syscall_write_bytes: io.map(|i| i.wchar.saturating_sub(b.io.wchar)),
            page_faults_cached: Some(stat.minflt.saturating_sub(b.minflt)),
            page_faults_disk: Some(stat.majflt.saturating_sub(b.majflt)),
            sys_net_rx_bytes: net.map_or(0, |n| n.0),
            sys_net_tx_bytes: net.map_or(0, |n| n.1),
            thread_count: stat.num_threads as usize,
            uptime_secs,
            cpu_core: stat.processor,
            psi_mem: psi,
            perf: None,
            perf_sw: None,
            sim_clk: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn io(disk_write: u64, syscall_write: Option<u64>) -> AggregatedMetrics {
        AggregatedMetrics {
            disk_write_bytes: disk_write,
            syscall_write_bytes: syscall_write,
            ..Default::default()
        }
    }

    /// The sums a child's reap made dip (seen in `jets run` as an unprivileged user: 8 MiB, then
    /// 4 MiB, then 12 MiB) are reported at the previous total; growth passes through.
    #[test]
    fn summed_io_never_goes_down() {
        let mut floor = IoFloor::default();
        let mut seen = Vec::new();
        for (disk, sys) in
            [(10, Some(8 << 20)), (4, Some(4 << 20)), (12, Some(12 << 20)), (12, None)]
        {
            let mut a = io(disk, sys);
            floor.apply(&mut a);
            seen.push((a.disk_write_bytes, a.syscall_write_bytes));
        }
        assert_eq!(
            seen,
            [(10, Some(8 << 20)), (10, Some(8 << 20)), (12, Some(12 << 20)), (12, None)]
        );
    }
}
