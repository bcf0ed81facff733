//! denet's JSON Lines data model: what `jets run` writes and `jets stats` reads.
//!
//! Field names, order and optionality follow denet 0.10 so that files written here are read by
//! denet's own tools and the other way round. Two additive extensions, both optional and ignored by
//! denet: `sim_clk` (the simulated cycle published through the [clock beacon](super::beacon) when
//! the sample was taken) and `perf_sw` (software perf counters, reported instead of zeros when the
//! hardware counters denet's `perf` field needs are not available).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Memory pressure stall information: fractions (0..=1) of the last 10 s window.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PsiMem {
    /// Share of time at least one task stalled on memory.
    pub some_avg10: f32,
    /// Share of time every task stalled on memory.
    pub full_avg10: f32,
}

/// Hardware perf counter deltas since the previous sample (denet's `perf`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PerfCounters {
    /// CPU cycles.
    #[serde(default)]
    pub cycles: u64,
    /// Retired instructions.
    #[serde(default)]
    pub instructions: u64,
    /// Last-level cache references.
    #[serde(default)]
    pub cache_refs: u64,
    /// Last-level cache misses.
    #[serde(default)]
    pub cache_misses: u64,
    /// Cycles stalled in the back end.
    #[serde(default)]
    pub stalled_backend: u64,
}

/// Software perf counter deltas since the previous sample (a JETS extension, `perf_sw`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PerfSoftware {
    /// Task clock: CPU time of the counted tasks, in nanoseconds.
    pub task_clock_ns: u64,
    /// Context switches.
    pub context_switches: u64,
    /// Page faults (minor and major).
    pub page_faults: u64,
}

/// One process at one instant (denet's `Metrics`; the body of a `sample` line).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Metrics {
    /// Capture time, Unix milliseconds.
    pub ts_ms: u64,
    /// CPU use over the last interval, percent of one core.
    pub cpu_usage: f32,
    /// Resident set size, KiB.
    pub mem_rss_kb: u64,
    /// Virtual size, KiB.
    pub mem_vms_kb: u64,
    /// Bytes the process caused to be read from storage (`read_bytes`).
    pub disk_read_bytes: u64,
    /// Bytes the process caused to be written to storage (`write_bytes`).
    pub disk_write_bytes: u64,
    /// Bytes read through read()-family syscalls (`rchar`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub syscall_read_bytes: Option<u64>,
    /// Bytes written through write()-family syscalls (`wchar`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub syscall_write_bytes: Option<u64>,
    /// Minor page faults.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page_faults_cached: Option<u64>,
    /// Major page faults.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page_faults_disk: Option<u64>,
    /// System-wide bytes received (legacy name `net_rx_bytes`).
    #[serde(alias = "net_rx_bytes")]
    pub sys_net_rx_bytes: u64,
    /// System-wide bytes sent (legacy name `net_tx_bytes`).
    #[serde(alias = "net_tx_bytes")]
    pub sys_net_tx_bytes: u64,
    /// Threads.
    pub thread_count: usize,
    /// Seconds since the process started.
    pub uptime_secs: u64,
    /// The CPU the process last ran on.
    #[serde(default)]
    pub cpu_core: Option<u32>,
    /// Memory pressure (the process's cgroup when readable, else system-wide).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub psi_mem: Option<PsiMem>,
    /// Hardware counter deltas.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub perf: Option<PerfCounters>,
    /// Software counter deltas (extension).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub perf_sw: Option<PerfSoftware>,
    /// The simulated cycle from the clock beacon (extension).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sim_clk: Option<u64>,
}

/// Parent plus children, summed (denet's `AggregatedMetrics`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct AggregatedMetrics {
    /// Capture time, Unix milliseconds.
    pub ts_ms: u64,
    /// Summed CPU use, percent of one core.
    pub cpu_usage: f32,
    /// Summed RSS, KiB.
    pub mem_rss_kb: u64,
    /// Summed virtual size, KiB.
    pub mem_vms_kb: u64,
    /// Summed storage reads.
    pub disk_read_bytes: u64,
    /// Summed storage writes.
    pub disk_write_bytes: u64,
    /// Summed syscall reads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub syscall_read_bytes: Option<u64>,
    /// Summed syscall writes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub syscall_write_bytes: Option<u64>,
    /// Summed minor faults.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page_faults_cached: Option<u64>,
    /// Summed major faults.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page_faults_disk: Option<u64>,
    /// System-wide bytes received.
    #[serde(alias = "net_rx_bytes")]
    pub sys_net_rx_bytes: u64,
    /// System-wide bytes sent.
    #[serde(alias = "net_tx_bytes")]
    pub sys_net_tx_bytes: u64,
    /// Summed threads.
    pub thread_count: usize,
    /// Live processes in the tree.
    pub process_count: usize,
    /// The longest uptime in the tree.
    pub uptime_secs: u64,
    /// The parent's memory pressure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub psi_mem: Option<PsiMem>,
    /// Hardware counter deltas for the whole tree.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub perf: Option<PerfCounters>,
    /// Software counter deltas for the whole tree (extension).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub perf_sw: Option<PerfSoftware>,
}

impl AggregatedMetrics {
    /// Sums the processes of a tree the way denet does: counters and sizes add up, uptime is the
    /// longest, PSI is the first process's (it is one measurement per tick, not per process).
    pub fn from_metrics<'a>(ts_ms: u64, all: impl IntoIterator<Item = &'a Metrics>) -> Self {
        fn add(acc: &mut Option<u64>, v: Option<u64>) {
            if let Some(v) = v {
                *acc = Some(acc.unwrap_or(0) + v);
            }
        }
        let mut a = AggregatedMetrics { ts_ms, ..Default::default() };
        for m in all {
            a.cpu_usage += m.cpu_usage;
            a.mem_rss_kb += m.mem_rss_kb;
            a.mem_vms_kb += m.mem_vms_kb;
            a.disk_read_bytes += m.disk_read_bytes;
            a.disk_write_bytes += m.disk_write_bytes;
            add(&mut a.syscall_read_bytes, m.syscall_read_bytes);
            add(&mut a.syscall_write_bytes, m.syscall_write_bytes);
            add(&mut a.page_faults_cached, m.page_faults_cached);
            add(&mut a.page_faults_disk, m.page_faults_disk);
            a.sys_net_rx_bytes = m.sys_net_rx_bytes;
            a.sys_net_tx_bytes = m.sys_net_tx_bytes;
            a.thread_count += m.thread_count;
            a.process_count += 1;
            a.uptime_secs = a.uptime_secs.max(m.uptime_secs);
            a.psi_mem = a.psi_mem.or(m.psi_mem);
        }
        a
    }
}

/// A child process in a `tree` line.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ChildMetrics {
    /// Process id.
    pub pid: u32,
    /// Process name (`comm`).
    pub command: String,
    /// Its metrics.
    pub metrics: Metrics,
}

/// A `tree` line: the monitored process, its descendants and their sum.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TreeSample {
    /// Capture time, Unix milliseconds.
    pub ts_ms: u64,
    /// The monitored process (`null` once it has exited).
    pub parent: Option<Metrics>,
    /// Its live descendants.
    #[serde(default)]
    pub children: Vec<ChildMetrics>,
    /// Parent plus children.
    pub aggregated: Option<AggregatedMetrics>,
    /// The simulated cycle from the clock beacon (extension).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sim_clk: Option<u64>,
}

/// The `metadata` line.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ProcessMetadata {
    /// Process id.
    pub pid: u32,
    /// Command line.
    pub cmd: Vec<String>,
    /// Executable path.
    pub executable: String,
    /// Process start, Unix milliseconds.
    pub t0_ms: u64,
    /// Which optional sources resolved, and why not when they did not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capabilities: Option<Map<String, Value>>,
}

/// A `child` line: a descendant seen for the first time, as denet's `run` reports it (written
/// just before the sample that first includes it). `jets run` writes one again, with the same
/// `ts_ms`, when the descendant has run another program since (a process seen between its fork
/// and its exec has its parent's command line); a reader keeps the last line of a pid, as
/// denet's own reader does.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ChildStart {
    /// When it was first seen, Unix milliseconds.
    pub ts_ms: u64,
    /// Process id.
    pub pid: u32,
    /// Parent process id.
    pub ppid: u32,
    /// Command line (`/proc/PID/cmdline`; empty when unreadable).
    #[serde(default)]
    pub cmd: Vec<String>,
    /// Executable path (`/proc/PID/exe`; empty when unreadable).
    #[serde(default)]
    pub exe: String,
}

impl ChildStart {
    /// Reads what `/proc` says about `pid` now; `None` once it has gone.
    ///
    /// A process caught inside `execve` has its new executable but not yet its new arguments
    /// (the kernel fills them in after replacing the address space), so its command line reads
    /// empty for a few microseconds. Such a read is retried for up to 10 ms rather than
    /// announcing a command line that was never true. (A zombie has neither: it is read once.)
    pub fn read(pid: u32, ts_ms: u64) -> Option<ChildStart> {
        let stat = super::procfs::read_stat(pid).ok()?;
        let read_cmd = || -> Vec<String> {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .map(|b| {
                    b.split(|&c| c == 0)
                        .filter(|a| !a.is_empty())
                        .map(|a| String::from_utf8_lossy(a).into_owned())
                        .collect()
                })
                .unwrap_or_default()
        };
        let read_exe = || {
            std::fs::read_link(format!("/proc/{pid}/exe"))
                .map(|p| p.display().to_string())
                .unwrap_or_default()
        };
        let mut cmd = read_cmd();
        let mut exe = read_exe();
        for _ in 0..10 {
            if !cmd.is_empty() || exe.is_empty() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
            cmd = read_cmd();
            exe = read_exe();
        }
        Some(ChildStart { ts_ms, pid, ppid: stat.ppid, cmd, exe })
    }
}

/// A line of a denet file to write, tagged by `kind`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Line<'a> {
    /// The optional reproducibility snapshot ([`super::env::snapshot`]).
    Env(&'a Map<String, Value>),
    /// The header.
    Metadata(&'a ProcessMetadata),
    /// A descendant seen for the first time.
    Child(&'a ChildStart),
    /// A process-tree sample.
    Tree(&'a TreeSample),
    /// A single-process sample (`--exclude-children`).
    Sample(&'a Metrics),
}

impl Line<'_> {
    /// The line as compact JSON, without the newline.
    pub fn to_json(&self) -> String {
        // Serializing these plain structs cannot fail: every map key is a string.
        serde_json::to_string(self).unwrap_or_default()
    }
}
