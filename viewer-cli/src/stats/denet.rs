//! `jets stats` for denet JSON Lines: denet's own summary, number for number.
//!
//! The rules are denet 0.10's (`generate_summary_from_file`): the tree's `aggregated` metrics when
//! there are any, else the single-process samples; totals are the last sample's (the counters are
//! cumulative), peaks the maximum, `avg_cpu_usage` the mean in single precision, elapsed time from
//! the first to the last sample. Reading (both the tagged and the legacy shapes) is
//! [`crate::formats::denet`]'s.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::{bail, Result};
use serde::Serialize;

pub use crate::formats::denet::{read, DenetFile};

/// denet's memory characterization roll-up.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MemoryCharacterization {
    /// instructions / cycles over the run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mean_ipc: Option<f64>,
    /// cache_misses / cache_refs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub llc_miss_rate: Option<f64>,
    /// stalled_backend / cycles.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backend_stall_ratio: Option<f64>,
    /// Share of samples with PSI `some_avg10 > 0`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub psi_some_fraction: Option<f64>,
    /// `memory-bound`, `cpu-bound`, `mixed` or `insufficient-data`.
    pub verdict: &'static str,
}

impl MemoryCharacterization {
    /// From (perf deltas, PSI some) per sample; `None` when neither source has data.
    fn from_samples(
        samples: impl Iterator<Item = (Option<jets_host::denet::PerfCounters>, Option<f32>)>,
    ) -> Option<Self> {
        let (mut cyc, mut ins, mut refs, mut miss, mut stall) = (0u64, 0u64, 0u64, 0u64, 0u64);
        let (mut perf_seen, mut psi_total, mut psi_pressured) = (false, 0usize, 0usize);
        for (perf, psi) in samples {
            if let Some(p) = perf {
                cyc += p.cycles;
                ins += p.instructions;
                refs += p.cache_refs;
                miss += p.cache_misses;
                stall += p.stalled_backend;
                perf_seen = true;
            }
            if let Some(some) = psi {
                psi_total += 1;
                psi_pressured += usize::from(some > 0.0);
            }
        }
        if !perf_seen && psi_total == 0 {
            return None;
        }
        let div = |a: u64, b: u64| (perf_seen && b != 0).then(|| a as f64 / b as f64);
        let (mean_ipc, llc_miss_rate, backend_stall_ratio) =
            (div(ins, cyc), div(miss, refs), div(stall, cyc));
        let psi_some_fraction = (psi_total > 0).then(|| psi_pressured as f64 / psi_total as f64);
        let psi_high = psi_some_fraction.unwrap_or(0.0) > 0.5;
        // denet's thresholds: stalls > 0.5 with IPC < 1 is memory-bound, stalls < 0.2 with IPC > 1.5
        // is cpu-bound; PSI breaks ties, and is the only signal without perf counters.
        let verdict = match (mean_ipc, backend_stall_ratio) {
            (Some(ipc), Some(st)) if st > 0.5 && ipc < 1.0 => "memory-bound",
            (Some(ipc), Some(st)) if st < 0.2 && ipc > 1.5 => "cpu-bound",
            (Some(_), Some(_)) if psi_high => "memory-bound",
            (Some(_), Some(_)) => "mixed",
            _ if psi_high => "memory-bound",
            _ => "insufficient-data",
        };
        Some(MemoryCharacterization {
            mean_ipc,
            llc_miss_rate,
            backend_stall_ratio,
            psi_some_fraction,
            verdict,
        })
    }
}

/// denet's end-of-run summary, in its field order.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Summary {
    /// Seconds from the first sample to the last.
    pub total_time_secs: f64,
    /// Samples.
    pub sample_count: usize,
    /// Most processes at once.
    pub max_processes: usize,
    /// Most threads at once.
    pub max_threads: usize,
    /// Storage bytes read (last sample).
    pub total_disk_read_bytes: u64,
    /// Storage bytes written (last sample).
    pub total_disk_write_bytes: u64,
    /// Syscall bytes read (last sample).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub total_syscall_read_bytes: Option<u64>,
    /// Syscall bytes written (last sample).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub total_syscall_write_bytes: Option<u64>,
    /// Most minor faults.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peak_page_faults_cached: Option<u64>,
    /// Most major faults.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peak_page_faults_disk: Option<u64>,
    /// Network bytes received (last sample).
    pub total_sys_net_rx_bytes: u64,
    /// Network bytes sent (last sample).
    pub total_sys_net_tx_bytes: u64,
    /// Most resident memory, KiB.
    pub peak_mem_rss_kb: u64,
    /// Mean CPU use, percent of one core (single precision, as denet).
    pub avg_cpu_usage: f32,
    /// The memory roll-up, when perf or PSI data exists.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory_characterization: Option<MemoryCharacterization>,
}

/// Summarizes a file's samples; an error when it has none.
pub fn summarize(f: &DenetFile, path: &Path) -> Result<Summary> {
    fn elapsed(first: u64, last: u64) -> f64 {
        last.saturating_sub(first) as f64 / 1000.0
    }
    fn mean(it: impl Iterator<Item = f32>, n: usize) -> f32 {
        // Accumulated in f32 like denet, so the last digits agree.
        let mut total = 0.0f32;
        for v in it {
            total += v;
        }
        total / n as f32
    }
    if let (Some(first), Some(last)) = (f.aggregated.first(), f.aggregated.last()) {
        let a = &f.aggregated;
        return Ok(Summary {
            total_time_secs: elapsed(first.ts_ms, last.ts_ms),
            sample_count: a.len(),
            max_processes: a.iter().map(|m| m.process_count).max().unwrap_or(0),
            max_threads: a.iter().map(|m| m.thread_count).max().unwrap_or(0),
            total_disk_read_bytes: last.disk_read_bytes,
            total_disk_write_bytes: last.disk_write_bytes,
            total_syscall_read_bytes: last.syscall_read_bytes,
            total_syscall_write_bytes: last.syscall_write_bytes,
            peak_page_faults_cached: a.iter().filter_map(|m| m.page_faults_cached).max(),
            peak_page_faults_disk: a.iter().filter_map(|m| m.page_faults_disk).max(),
            total_sys_net_rx_bytes: last.sys_net_rx_bytes,
            total_sys_net_tx_bytes: last.sys_net_tx_bytes,
            peak_mem_rss_kb: a.iter().map(|m| m.mem_rss_kb).max().unwrap_or(0),
            avg_cpu_usage: mean(a.iter().map(|m| m.cpu_usage), a.len()),
            memory_characterization: MemoryCharacterization::from_samples(
                a.iter().map(|m| (m.perf, m.psi_mem.map(|p| p.some_avg10))),
            ),
        });
    }
    if let (Some(first), Some(last)) = (f.metrics.first(), f.metrics.last()) {
        let m = &f.metrics;
        return Ok(Summary {
            total_time_secs: elapsed(first.ts_ms, last.ts_ms),
            sample_count: m.len(),
            max_processes: 1,
            max_threads: m.iter().map(|x| x.thread_count).max().unwrap_or(0),
            total_disk_read_bytes: last.disk_read_bytes,
            total_disk_write_bytes: last.disk_write_bytes,
            total_syscall_read_bytes: last.syscall_read_bytes,
            total_syscall_write_bytes: last.syscall_write_bytes,
            peak_page_faults_cached: m.iter().filter_map(|x| x.page_faults_cached).max(),
            peak_page_faults_disk: m.iter().filter_map(|x| x.page_faults_disk).max(),
            total_sys_net_rx_bytes: last.sys_net_rx_bytes,
            total_sys_net_tx_bytes: last.sys_net_tx_bytes,
            peak_mem_rss_kb: m.iter().map(|x| x.mem_rss_kb).max().unwrap_or(0),
            avg_cpu_usage: mean(m.iter().map(|x| x.cpu_usage), m.len()),
            memory_characterization: MemoryCharacterization::from_samples(
                m.iter().map(|x| (x.perf, x.psi_mem.map(|p| p.some_avg10))),
            ),
        });
    }
    bail!("{}: no denet samples (no `sample` or `tree` lines)", path.display())
}

fn bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{n} B")
    } else {
        format!("{v:.1} {} ({n} B)", UNITS[u])
    }
}

/// The summary for people.
pub fn to_text(s: &Summary, path: &Path) -> String {
    let mut o = String::new();
    let opt = |v: Option<u64>| v.map_or("n/a".to_string(), bytes);
    let _ = writeln!(o, "denet summary of {}", path.display());
    let _ =
        writeln!(o, "  time             {:.3} s, {} samples", s.total_time_secs, s.sample_count);
    let _ =
        writeln!(o, "  processes        max {}, threads max {}", s.max_processes, s.max_threads);
    let _ = writeln!(o, "  cpu              avg {}% of one core", s.avg_cpu_usage);
    let _ = writeln!(o, "  memory           peak RSS {}", bytes(s.peak_mem_rss_kb * 1024));
    let _ = writeln!(
        o,
        "  disk             read {}, written {}",
        bytes(s.total_disk_read_bytes),
        bytes(s.total_disk_write_bytes)
    );
    let _ = writeln!(
        o,
        "  syscall I/O      read {}, written {}",
        opt(s.total_syscall_read_bytes),
        opt(s.total_syscall_write_bytes)
    );
    let faults = |v: Option<u64>| v.map_or("n/a".to_string(), |v| v.to_string());
    let _ = writeln!(
        o,
        "  page faults      peak minor {}, major {}",
        faults(s.peak_page_faults_cached),
        faults(s.peak_page_faults_disk)
    );
    let _ = writeln!(
        o,
        "  network (system) received {}, sent {}",
        bytes(s.total_sys_net_rx_bytes),
        bytes(s.total_sys_net_tx_bytes)
    );
    match &s.memory_characterization {
        Some(m) => {
            let f = |v: Option<f64>| v.map_or("n/a".to_string(), |v| format!("{v:.3}"));
            let _ = writeln!(
                o,
                "  memory verdict   {} (IPC {}, LLC miss rate {}, backend stalls {}, PSI some {})",
                m.verdict,
                f(m.mean_ipc),
                f(m.llc_miss_rate),
                f(m.backend_stall_ratio),
                f(m.psi_some_fraction)
            );
        }
        None => {
            let _ =
                writeln!(o, "  memory verdict   none: the file has neither perf counters nor PSI");
        }
    }
    o
}
