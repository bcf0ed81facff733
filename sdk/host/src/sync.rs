//! Linking simulated cycles to host time: the `HostSync` convention and the piecewise-linear map.
//!
//! A host collector (the `host` feature) writes, on a root record of record_type
//! [`HOST_RECORD_TYPE`], one [`SYNC_EVENT`] event per sample: its `clk` is the simulator's cycle at
//! that instant and its data holds the host clocks read at the same instant ([`keys`]). The
//! convention is written down in `spec/host-sync.md`. This module reads those points back
//! ([`collect`]), maps any cycle to host time and back ([`ClockMap`]) and reports the simulation
//! speed of each interval ([`ClockMap::speed`]). It needs no feature: any reader of a trace can use it.
//!
//! ```
//! use jets_host::sync::{ClockMap, SyncPoint};
//! let p = |clk, mono_ns| SyncPoint { clk, mono_ns, real_ns: mono_ns, cpu_ns: None, host_instructions: None };
//! let map = ClockMap::new(vec![p(0, 1_000), p(100, 2_000), p(300, 3_000)]).unwrap();
//! assert_eq!(map.cycle_to_mono_ns(200.0), Some(2_500.0));
//! assert_eq!(map.mono_ns_to_cycle(2_500.0), Some(200.0));
//! let speed = map.speed(&[10, 20, 150]);
//! assert_eq!(speed[0].cycles_per_sec, 100.0 / 1e-6);
//! assert_eq!(speed[1].sim_instructions, 1);
//! ```

use serde_json::{Map, Value};

use jets::format::{Event, Line};

/// record_type of the root record that carries the host samples.
pub const HOST_RECORD_TYPE: &str = "HostProcess";
/// Name of the per-sample event.
pub const SYNC_EVENT: &str = "HostSync";
/// Name of the annotation holding the environment snapshot (denet's `env` record).
pub const ENV_ANNOTATION: &str = "HostEnv";
/// Name of the annotation holding the capabilities manifest.
pub const CAPABILITIES_ANNOTATION: &str = "HostCapabilities";

/// The data keys of a [`SYNC_EVENT`] that carry clocks. Metric keys are listed in
/// `spec/host-sync.md`.
pub mod keys {
    /// `CLOCK_MONOTONIC` in ns (required).
    pub const MONO_NS: &str = "mono_ns";
    /// `CLOCK_REALTIME` in ns since the Unix epoch (required).
    pub const REAL_NS: &str = "real_ns";
    /// CPU time of the whole simulator process in ns (`CLOCK_PROCESS_CPUTIME_ID`; absent in
    /// samples imported from tools that do not record it).
    pub const CPU_NS: &str = "cpu_ns";
    /// Instructions retired by the simulator process so far (only when hardware counters work).
    pub const HOST_INSTRUCTIONS: &str = "host_instructions";
}

/// How a [`METRICS`] value is spelled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MetricType {
    /// An unsigned integer (a count, bytes, KiB, ns).
    Count,
    /// A number with a fraction (a percentage or a 0..1 pressure).
    Fraction,
}

/// The metric keys of a [`SYNC_EVENT`]'s data, as spec/host-sync.md lists them ("Metric keys"),
/// with their type. Each is optional (HS5: absent when its source is unavailable).
pub const METRICS: &[(&str, MetricType)] = &[
    ("cpu_usage", MetricType::Fraction),
    ("mem_rss_kb", MetricType::Count),
    ("mem_vms_kb", MetricType::Count),
    ("disk_read_bytes", MetricType::Count),
    ("disk_write_bytes", MetricType::Count),
    ("syscall_read_bytes", MetricType::Count),
    ("syscall_write_bytes", MetricType::Count),
    ("page_faults_cached", MetricType::Count),
    ("page_faults_disk", MetricType::Count),
    ("sys_net_rx_bytes", MetricType::Count),
    ("sys_net_tx_bytes", MetricType::Count),
    ("thread_count", MetricType::Count),
    ("process_count", MetricType::Count),
    ("psi_some_avg10", MetricType::Fraction),
    ("psi_full_avg10", MetricType::Fraction),
    ("psi_cgroup_some_avg10", MetricType::Fraction),
    ("psi_cgroup_full_avg10", MetricType::Fraction),
    ("perf_cycles", MetricType::Count),
    ("perf_instructions", MetricType::Count),
    ("perf_cache_refs", MetricType::Count),
    ("perf_cache_misses", MetricType::Count),
    ("perf_stalled_backend", MetricType::Count),
    ("perf_task_clock_ns", MetricType::Count),
    ("perf_context_switches", MetricType::Count),
    ("perf_page_faults", MetricType::Count),
];

/// What is wrong with a set of sync points.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum SyncError {
    /// No sync points at all.
    #[error("no {SYNC_EVENT} events on a {HOST_RECORD_TYPE} record")]
    Empty,
    /// A required key is missing or not an unsigned integer.
    #[error("{SYNC_EVENT} event at clk {clk}: `{key}` is missing or not an unsigned integer")]
    BadKey {
        /// The event's cycle.
        clk: u64,
        /// The key.
        key: &'static str,
    },
    /// A clock went backwards between two consecutive points.
    #[error("{SYNC_EVENT} point {index}: {what} goes backwards")]
    NotMonotonic {
        /// Index of the later point.
        index: usize,
        /// `clk` or `mono_ns`.
        what: &'static str,
    },
}

/// One instant seen by both clocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SyncPoint {
    /// Simulated cycle.
    pub clk: u64,
    /// `CLOCK_MONOTONIC`, ns.
    pub mono_ns: u64,
    /// `CLOCK_REALTIME`, ns since the Unix epoch.
    pub real_ns: u64,
    /// Process CPU time, ns, when recorded.
    pub cpu_ns: Option<u64>,
    /// Host instructions retired so far, when counted.
    pub host_instructions: Option<u64>,
}

impl SyncPoint {
    /// Reads a sync point from the data of a [`SYNC_EVENT`] event at `clk`.
    pub fn from_data(clk: u64, data: &Map<String, Value>) -> Result<SyncPoint, SyncError> {
        let get = |key: &'static str| {
            data.get(key).and_then(Value::as_u64).ok_or(SyncError::BadKey { clk, key })
        };
        Ok(SyncPoint {
            clk,
            mono_ns: get(keys::MONO_NS)?,
            real_ns: get(keys::REAL_NS)?,
            cpu_ns: data.get(keys::CPU_NS).and_then(Value::as_u64),
            host_instructions: data.get(keys::HOST_INSTRUCTIONS).and_then(Value::as_u64),
        })
    }

    /// Reads a sync point from an event, `None` if the event is not a [`SYNC_EVENT`].
    pub fn from_event(e: &Event<'_>) -> Option<Result<SyncPoint, SyncError>> {
        if e.name != SYNC_EVENT {
            return None;
        }
        let empty = Map::new();
        let data = e.data.as_ref().and_then(Value::as_object).unwrap_or(&empty);
        Some(SyncPoint::from_data(e.clk, data))
    }
}

/// What [`collect`] finds in a trace.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Collected {
    /// Sync points in file order, with the full data of their events.
    pub points: Vec<(SyncPoint, Map<String, Value>)>,
    /// Start cycles of the records of the counted record_type (the simulated instructions).
    pub counted_clks: Vec<u64>,
}

/// Collects the sync points (events named [`SYNC_EVENT`] on records of type [`HOST_RECORD_TYPE`])
/// and the start cycles of every record of type `count_record_type`, from parsed lines.
pub fn collect<'a>(
    lines: impl IntoIterator<Item = Line<'a>>,
    count_record_type: &str,
) -> Result<Collected, SyncError> {
    let mut hosts = std::collections::HashSet::new();
    let mut out = Collected::default();
    for line in lines {
        match line {
            Line::Record(r) => {
                if r.record_type == HOST_RECORD_TYPE {
                    hosts.insert(r.id);
                }
                if r.record_type == count_record_type {
                    out.counted_clks.push(r.clk);
                }
            }
            Line::Event(e) if hosts.contains(&e.record_id) => {
                if let Some(p) = SyncPoint::from_event(&e) {
                    let data =
                        e.data.as_ref().and_then(Value::as_object).cloned().unwrap_or_default();
                    out.points.push((p?, data));
                }
            }
            _ => {}
        }
    }
    out.counted_clks.sort_unstable();
    Ok(out)
}

/// Simulation speed over one interval between consecutive sync points.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct IntervalSpeed {
    /// Cycle at the start.
    pub start_clk: u64,
    /// Cycle at the end.
    pub end_clk: u64,
    /// `CLOCK_MONOTONIC` at the start, ns.
    pub start_mono_ns: u64,
    /// `CLOCK_MONOTONIC` at the end, ns.
    pub end_mono_ns: u64,
    /// Simulated cycles per host second.
    pub cycles_per_sec: f64,
    /// Counted records that start in `[start_clk, end_clk)`.
    pub sim_instructions: u64,
    /// Those per host second.
    pub sim_instructions_per_sec: f64,
    /// Host instructions per simulated cycle, when host instructions were counted and cycles passed.
    pub host_instructions_per_cycle: Option<f64>,
    /// Process CPU time over wall time (1.0 = one core busy), when both points have `cpu_ns`.
    pub cpu_utilization: Option<f64>,
}

/// Piecewise-linear map between simulated cycles and host time, through the sync points.
#[derive(Clone, Debug, PartialEq)]
pub struct ClockMap {
    points: Vec<SyncPoint>,
}

impl ClockMap {
    /// Builds the map. Cycles must not decrease (equal cycles = the simulation paused) and host time
    /// must strictly increase.
    pub fn new(points: Vec<SyncPoint>) -> Result<ClockMap, SyncError> {
        if points.is_empty() {
            return Err(SyncError::Empty);
        }
        for (i, w) in points.windows(2).enumerate() {
            if w[1].clk < w[0].clk {
                return Err(SyncError::NotMonotonic { index: i + 1, what: "clk" });
            }
            if w[1].mono_ns <= w[0].mono_ns {
                return Err(SyncError::NotMonotonic { index: i + 1, what: "mono_ns" });
            }
        }
        Ok(ClockMap { points })
    }

    /// The sync points.
    pub fn points(&self) -> &[SyncPoint] {
        &self.points
    }

    /// `CLOCK_MONOTONIC` ns at cycle `clk`; `None` outside the sampled range. Where the simulation
    /// paused (several points at one cycle) the first of them is the answer.
    pub fn cycle_to_mono_ns(&self, clk: f64) -> Option<f64> {
        self.cycle_to(clk, |p| p.mono_ns)
    }

    /// `CLOCK_REALTIME` ns at cycle `clk`; `None` outside the sampled range.
    pub fn cycle_to_real_ns(&self, clk: f64) -> Option<f64> {
        self.cycle_to(clk, |p| p.real_ns)
    }

    fn cycle_to(&self, clk: f64, time: impl Fn(&SyncPoint) -> u64) -> Option<f64> {
        let (first, last) = (self.points.first()?, self.points.last()?);
        if clk < first.clk as f64 || clk > last.clk as f64 {
            return None;
        }
        // First point whose cycle is >= clk.
        let i = self.points.partition_point(|p| (p.clk as f64) < clk);
        let b = &self.points[i];
        if i == 0 || b.clk as f64 == clk {
            return Some(time(b) as f64);
        }
        let a = &self.points[i - 1];
        let f = (clk - a.clk as f64) / (b.clk - a.clk) as f64;
        Some(time(a) as f64 + f * (time(b) as f64 - time(a) as f64))
    }

    /// The cycle at `CLOCK_MONOTONIC` ns `mono_ns`; `None` outside the sampled range.
    pub fn mono_ns_to_cycle(&self, mono_ns: f64) -> Option<f64> {
        let (first, last) = (self.points.first()?, self.points.last()?);
        if mono_ns < first.mono_ns as f64 || mono_ns > last.mono_ns as f64 {
            return None;
        }
        let i = self.points.partition_point(|p| (p.mono_ns as f64) < mono_ns);
        let b = &self.points[i];
        if i == 0 || b.mono_ns as f64 == mono_ns {
            return Some(b.clk as f64);
        }
        let a = &self.points[i - 1];
        let f = (mono_ns - a.mono_ns as f64) / (b.mono_ns - a.mono_ns) as f64;
        Some(a.clk as f64 + f * (b.clk - a.clk) as f64)
    }

    /// Speed of every interval between consecutive points. `counted_clks` are the sorted start
    /// cycles of the records that count as simulated instructions ([`Collected::counted_clks`]).
    pub fn speed(&self, counted_clks: &[u64]) -> Vec<IntervalSpeed> {
        self.points
            .windows(2)
            .map(|w| {
                let (a, b) = (&w[0], &w[1]);
                let secs = (b.mono_ns - a.mono_ns) as f64 / 1e9;
                let cycles = b.clk - a.clk;
                let lo = counted_clks.partition_point(|&c| c < a.clk);
                let hi = counted_clks.partition_point(|&c| c < b.clk);
                let n = (hi - lo) as u64;
                let host_ipc = match (a.host_instructions, b.host_instructions) {
                    (Some(x), Some(y)) if cycles > 0 => {
                        Some(y.saturating_sub(x) as f64 / cycles as f64)
                    }
                    _ => None,
                };
                IntervalSpeed {
                    start_clk: a.clk,
                    end_clk: b.clk,
                    start_mono_ns: a.mono_ns,
                    end_mono_ns: b.mono_ns,
                    cycles_per_sec: cycles as f64 / secs,
                    sim_instructions: n,
                    sim_instructions_per_sec: n as f64 / secs,
                    host_instructions_per_cycle: host_ipc,
                    cpu_utilization: match (a.cpu_ns, b.cpu_ns) {
                        (Some(x), Some(y)) => Some(y.saturating_sub(x) as f64 / 1e9 / secs),
                        _ => None,
                    },
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// [`METRICS`] is the spec's table of metric keys, no more and no less.
    #[test]
    fn metrics_are_the_spec_table() {
        let spec = std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../spec/host-sync.md"),
        )
        .expect("spec/host-sync.md");
        let table = spec.split("Metric keys").nth(1).expect("Metric keys section");
        let table = table.split("## ").next().expect("section");
        let mut in_spec: Vec<&str> = table
            .lines()
            .filter(|l| l.starts_with("| `"))
            .flat_map(|l| l.split('|').nth(1).unwrap_or("").split(',').map(str::trim))
            .map(|k| k.trim_matches('`'))
            .collect();
        in_spec.sort_unstable();
        let mut ours: Vec<&str> = METRICS.iter().map(|m| m.0).collect();
        ours.sort_unstable();
        assert_eq!(ours, in_spec);
    }

    fn p(clk: u64, mono_ns: u64) -> SyncPoint {
        SyncPoint {
            clk,
            mono_ns,
            real_ns: mono_ns + 7,
            cpu_ns: Some(mono_ns / 2),
            host_instructions: Some(clk * 3),
        }
    }

    #[test]
    fn rejects_backwards_clocks() {
        assert_eq!(ClockMap::new(vec![]), Err(SyncError::Empty));
        assert_eq!(
            ClockMap::new(vec![p(5, 1), p(4, 2)]),
            Err(SyncError::NotMonotonic { index: 1, what: "clk" })
        );
        assert_eq!(
            ClockMap::new(vec![p(5, 2), p(6, 2)]),
            Err(SyncError::NotMonotonic { index: 1, what: "mono_ns" })
        );
    }

    #[test]
    fn pause_maps_to_its_first_instant_and_ranges_are_bounded() {
        let m = ClockMap::new(vec![p(0, 0), p(10, 100), p(10, 500), p(20, 600)]).expect("map");
        assert_eq!(m.cycle_to_mono_ns(10.0), Some(100.0));
        assert_eq!(m.cycle_to_mono_ns(15.0), Some(550.0));
        assert_eq!(m.mono_ns_to_cycle(300.0), Some(10.0));
        assert_eq!(m.cycle_to_mono_ns(21.0), None);
        assert_eq!(m.mono_ns_to_cycle(601.0), None);
        let s = m.speed(&[0, 5, 10, 19, 20]);
        assert_eq!(s.len(), 3);
        assert_eq!(s[1].cycles_per_sec, 0.0);
        assert_eq!(
            (s[0].sim_instructions, s[1].sim_instructions, s[2].sim_instructions),
            (2, 0, 2)
        );
        assert_eq!(s[0].host_instructions_per_cycle, Some(3.0));
        assert_eq!(s[1].host_instructions_per_cycle, None);
    }

    #[test]
    fn collect_reads_only_host_records() {
        let text = [
            r#"{"type":"header","version":"2.0","metadata":{}}"#,
            r#"{"clk":0,"type":"record","name":"host","record_type":"HostProcess","id":1,"parent_id":null,"description":""}"#,
            r#"{"clk":0,"type":"record","name":"i","record_type":"Instruction","id":2,"parent_id":null,"description":""}"#,
            r#"{"clk":3,"type":"event","name":"HostSync","record_id":2,"description":"","data":{"mono_ns":1,"real_ns":1,"cpu_ns":1}}"#,
            r#"{"clk":4,"type":"event","name":"HostSync","record_id":1,"description":"","data":{"mono_ns":9,"real_ns":10,"cpu_ns":11,"cpu_usage":50.0}}"#,
        ];
        let c = collect(text.iter().map(|t| Line::parse(t).expect("line")), "Instruction")
            .expect("collect");
        assert_eq!(c.points.len(), 1);
        assert_eq!(
            c.points[0].0,
            SyncPoint {
                clk: 4,
                mono_ns: 9,
                real_ns: 10,
                cpu_ns: Some(11),
                host_instructions: None
            }
        );
        assert_eq!(c.points[0].1["cpu_usage"], 50.0);
        assert_eq!(c.counted_clks, vec![0]);
        let bad = r#"{"clk":4,"type":"event","name":"HostSync","record_id":1,"description":"","data":{"mono_ns":9}}"#;
        let lines = [text[1], bad].map(|t| Line::parse(t).expect("line"));
        assert_eq!(collect(lines, "x"), Err(SyncError::BadKey { clk: 4, key: "real_ns" }));
    }
}
