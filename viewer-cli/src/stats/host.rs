//! `jets stats` on a trace with host samples (spec/host-sync.md): simulation speed over time and
//! the host's peaks.

use std::collections::HashSet;
use std::fmt::Write as _;

use anyhow::{Context, Result};
use jets::format::Line;
use jets_host::sync::{
    ClockMap, IntervalSpeed, SyncPoint, CAPABILITIES_ANNOTATION, HOST_RECORD_TYPE, SYNC_EVENT,
};
use serde_json::{json, Map, Value};

/// Metrics whose maximum is a peak.
const PEAKS: [&str; 7] = [
    "cpu_usage",
    "mem_rss_kb",
    "mem_vms_kb",
    "thread_count",
    "process_count",
    "psi_some_avg10",
    "psi_cgroup_some_avg10",
];
/// Cumulative counters: the last sample is the total.
const TOTALS: [&str; 8] = [
    "disk_read_bytes",
    "disk_write_bytes",
    "syscall_read_bytes",
    "syscall_write_bytes",
    "page_faults_cached",
    "page_faults_disk",
    "sys_net_rx_bytes",
    "sys_net_tx_bytes",
];
/// Per-sample metrics without host clocks, as `jets import --from denet` writes them
/// (spec/host-sync.md, CV-DENET-1): they count for peaks and totals, not for speed.
const SAMPLE_EVENT: &str = "HostSample";
/// Rows of the speed-over-time table.
const ROWS: usize = 10;

/// Host statistics of a trace.
#[derive(Clone, Debug)]
pub struct HostStats {
    /// The record_type counted as simulated instructions.
    pub instruction_type: String,
    /// The sync points.
    pub points: Vec<SyncPoint>,
    /// `HostSample` events (metrics without a sync point, as imported from denet).
    pub metric_samples: u64,
    /// Speed of every interval between sync points.
    pub intervals: Vec<IntervalSpeed>,
    /// Peak of each metric present.
    pub peaks: Map<String, Value>,
    /// Total of each cumulative counter present.
    pub totals: Map<String, Value>,
    /// The capabilities manifest, if written.
    pub capabilities: Option<Value>,
}

/// Collects the host samples of a trace line by line, inside the one pass of `jets stats`.
#[derive(Debug, Default)]
pub struct HostCollector {
    instruction_type: String,
    hosts: HashSet<u64>,
    points: Vec<SyncPoint>,
    clks: Vec<u64>,
    peaks: Map<String, Value>,
    totals: Map<String, Value>,
    capabilities: Option<Value>,
    metric_samples: u64,
}

impl HostCollector {
    /// A collector counting records of `instruction_type` as simulated instructions.
    pub fn new(instruction_type: &str) -> HostCollector {
        HostCollector { instruction_type: instruction_type.into(), ..HostCollector::default() }
    }

    /// Takes one line of the trace (the caller names the file and line in errors).
    pub fn line(&mut self, line: &Line<'_>) -> Result<()> {
        match line {
            Line::Record(r) => {
                // The monitored process is the root HostProcess record (spec/host-sync.md); its
                // children (imported from denet `child` lines) carry per-process samples that
                // are parts of the root's totals, not samples of their own.
                if r.record_type == HOST_RECORD_TYPE && r.parent_id.is_none() {
                    self.hosts.insert(r.id);
                }
                if r.record_type == self.instruction_type.as_str() {
                    self.clks.push(r.clk);
                }
            }
            Line::Annotation(a)
                if a.name == CAPABILITIES_ANNOTATION && self.hosts.contains(&a.record_id) =>
            {
                self.capabilities = Some(a.data.clone());
            }
            Line::Event(e)
                if (e.name == SYNC_EVENT || e.name == SAMPLE_EVENT)
                    && self.hosts.contains(&e.record_id) =>
            {
                let empty = Map::new();
                let data = e.data.as_ref().and_then(Value::as_object).unwrap_or(&empty);
                if e.name == SYNC_EVENT {
                    self.points.push(SyncPoint::from_data(e.clk, data)?);
                } else {
                    self.metric_samples += 1;
                }
                for k in PEAKS {
                    if let Some(v) = data.get(k).and_then(Value::as_f64) {
                        let peak =
                            self.peaks.get(k).and_then(Value::as_f64).map_or(v, |p| p.max(v));
                        self.peaks.insert(k.into(), json!(peak));
                    }
                }
                for k in TOTALS {
                    if let Some(v) = data.get(k) {
                        self.totals.insert(k.into(), v.clone());
                    }
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// The host statistics of `name` after its last line; `None` when the trace has no samples.
    pub fn finish(mut self, name: &str) -> Result<Option<HostStats>> {
        if self.points.is_empty() && self.metric_samples == 0 {
            return Ok(None);
        }
        self.clks.sort_unstable();
        let intervals = if self.points.is_empty() {
            Vec::new()
        } else {
            ClockMap::new(self.points.clone())
                .with_context(|| format!("{name}: {SYNC_EVENT} points"))?
                .speed(&self.clks)
        };
        Ok(Some(HostStats {
            instruction_type: self.instruction_type,
            points: self.points,
            metric_samples: self.metric_samples,
            intervals,
            peaks: self.peaks,
            totals: self.totals,
            capabilities: self.capabilities,
        }))
    }
}

impl HostStats {
    /// Whole-run speed: (seconds, cycles, cycles/s, instructions/s); `None` without two sync points.
    fn overall(&self) -> Option<(f64, u64, f64, f64)> {
        let (a, b) = (self.points.first()?, self.points.last()?);
        let secs = (b.mono_ns - a.mono_ns) as f64 / 1e9;
        let instr: u64 = self.intervals.iter().map(|i| i.sim_instructions).sum();
        (secs > 0.0)
            .then(|| (secs, b.clk - a.clk, (b.clk - a.clk) as f64 / secs, instr as f64 / secs))
    }

    /// As JSON (the `host` member of `jets stats --format json`).
    pub fn to_json(&self) -> Value {
        let overall = self.overall();
        let t0 = self.points.first().map_or(0, |p| p.mono_ns);
        json!({
            "samples": self.points.len(),
            "metric_samples": self.metric_samples,
            "host_seconds": overall.map(|o| o.0),
            "cycles": overall.map(|o| o.1),
            "cycles_per_sec": overall.map(|o| o.2),
            "instruction_record_type": self.instruction_type,
            "sim_instructions_per_sec": overall.map(|o| o.3),
            "speed": self.intervals.iter().map(|i| json!({
                "t_secs": (i.start_mono_ns - t0) as f64 / 1e9,
                "dt_secs": (i.end_mono_ns - i.start_mono_ns) as f64 / 1e9,
                "start_clk": i.start_clk,
                "end_clk": i.end_clk,
                "cycles_per_sec": i.cycles_per_sec,
                "sim_instructions_per_sec": i.sim_instructions_per_sec,
                "host_instructions_per_cycle": i.host_instructions_per_cycle,
                "cpu_utilization": i.cpu_utilization,
            })).collect::<Vec<_>>(),
            "peaks": self.peaks,
            "totals": self.totals,
            "capabilities": self.capabilities,
        })
    }

    /// For people: overall speed, speed over time in up to ten rows, peaks and totals.
    pub fn to_text(&self) -> String {
        let mut o = String::new();
        match self.overall() {
            Some((secs, _, cps, ips)) => {
                let _ = writeln!(o, "\nhost ({} samples over {secs:.3} s)", self.points.len());
                let _ = writeln!(
                    o,
                    "  simulation speed  {cps:.0} cycles/s, {ips:.0} {}/s",
                    self.instruction_type
                );
                let _ = writeln!(
                    o,
                    "  speed over time   {:>10} {:>14} {:>14} {:>10}",
                    "t (s)", "cycles/s", "instr/s", "cpu"
                );
            }
            None => {
                let _ = writeln!(
                    o,
                    "\nhost ({} {SYNC_EVENT} points, {} {SAMPLE_EVENT} samples)\n  simulation \
                     speed: unknown (needs two {SYNC_EVENT} points; imported samples carry no host \
                     monotonic clock)",
                    self.points.len(),
                    self.metric_samples
                );
            }
        }
        let t0 = self.points.first().map_or(0, |p| p.mono_ns);
        let per_row = self.intervals.len().div_ceil(ROWS).max(1);
        for rows in self.intervals.chunks(per_row) {
            let (first, last) = (rows[0], rows[rows.len() - 1]);
            let dt = (last.end_mono_ns - first.start_mono_ns) as f64 / 1e9;
            let cycles = (last.end_clk - first.start_clk) as f64;
            let instr: u64 = rows.iter().map(|r| r.sim_instructions).sum();
            let cpu: Option<f64> = rows
                .iter()
                .map(|r| {
                    r.cpu_utilization.map(|u| u * (r.end_mono_ns - r.start_mono_ns) as f64 / 1e9)
                })
                .sum::<Option<f64>>()
                .map(|busy| busy / dt);
            let cpu = cpu.map_or("n/a".to_string(), |c| format!("{:.0}%", c * 100.0));
            let _ = writeln!(
                o,
                "                    {:>10.3} {:>14.0} {:>14.0} {cpu:>10}",
                (first.start_mono_ns - t0) as f64 / 1e9,
                cycles / dt,
                instr as f64 / dt,
            );
        }
        if let Some(ipc) =
            self.intervals.iter().filter_map(|i| i.host_instructions_per_cycle).reduce(f64::max)
        {
            let _ = writeln!(o, "  host instructions per simulated cycle: up to {ipc:.1}");
        }
        for (k, v) in &self.peaks {
            let v = v.as_f64().map_or(v.to_string(), |x| {
                if x.fract() == 0.0 {
                    format!("{x:.0}")
                } else {
                    format!("{x:.3}")
                }
            });
            let _ = writeln!(o, "  peak {k:<20} {v}");
        }
        for (k, v) in &self.totals {
            let _ = writeln!(o, "  total {k:<19} {v}");
        }
        if let Some(Value::Object(caps)) = &self.capabilities {
            for (k, c) in caps {
                if c["available"] == false {
                    let _ = writeln!(
                        o,
                        "  unavailable {k}: {}",
                        c["reason"].as_str().unwrap_or("no reason given")
                    );
                }
            }
        }
        o
    }
}
