//! The in-process host monitor: a sampler thread that writes sync points into the trace.

use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::sync::{
    keys, SyncPoint, CAPABILITIES_ANNOTATION, ENV_ANNOTATION, HOST_RECORD_TYPE, SYNC_EVENT,
};
use jets::format::Str;
use jets::{RecordHandle, SimClock, Trace};

use super::denet::TreeSample;
use super::procfs::clock_ns;
use super::{
    Capabilities, Capability, ClockBeacon, HostError, SamplerOptions, Schedule, TreeSampler,
};

/// How the [`HostMonitor`] samples.
#[derive(Clone, Debug)]
pub struct HostConfig {
    /// When to sample (default: every 100 ms).
    pub schedule: Schedule,
    /// Include child processes of the simulator (default: yes).
    pub include_children: bool,
    /// Open perf counters (default: yes).
    pub perf: bool,
    /// Write the environment snapshot annotation (default: yes).
    pub env_snapshot: bool,
    /// Publish the cycle to the beacon named by [`super::BEACON_ENV`], if set (default: yes).
    pub beacon_from_env: bool,
    /// How often to publish to the beacon, between samples (default: 10 ms).
    pub beacon_period: Duration,
    /// Look for new child processes every this many samples (default: 10, every second at
    /// 100 ms): listing `/proc` to find them is most of a sample's cost.
    pub discover_children_every: u32,
}

impl Default for HostConfig {
    fn default() -> Self {
        HostConfig {
            schedule: Schedule::Fixed(Duration::from_millis(100)),
            include_children: true,
            perf: true,
            env_snapshot: true,
            beacon_from_env: true,
            beacon_period: Duration::from_millis(10),
            discover_children_every: 10,
        }
    }
}

impl HostConfig {
    /// Samples every `interval`.
    pub fn interval(mut self, interval: Duration) -> Self {
        self.schedule = Schedule::Fixed(interval);
        self
    }
}

/// What a monitor measured, returned by [`HostMonitor::stop`].
#[derive(Clone, Debug)]
pub struct HostReport {
    /// Samples taken: each is a `HostSync` event in the trace, unless capture control left it
    /// out or tracing is compiled out (jets-sdk without `enabled`).
    pub samples: u64,
    /// The sync points, in order (one a sample; see `samples` for when they are written).
    pub sync_points: Vec<SyncPoint>,
    /// Which sources worked.
    pub capabilities: Capabilities,
    /// CPU time the sampler thread used, ns.
    pub sampler_cpu_ns: u64,
    /// Wall time the sampler thread ran, ns.
    pub wall_ns: u64,
    /// The last sample.
    pub last: TreeSample,
}

impl HostReport {
    /// Sampler CPU time over wall time: the collector's cost as a fraction of one core.
    pub fn overhead(&self) -> f64 {
        self.sampler_cpu_ns as f64 / self.wall_ns.max(1) as f64
    }

    /// The cycle ↔ host time map of this run, without reading the trace back.
    pub fn clock_map(&self) -> Result<crate::sync::ClockMap, crate::sync::SyncError> {
        crate::sync::ClockMap::new(self.sync_points.clone())
    }
}

type Stop = Arc<(Mutex<bool>, Condvar)>;

/// A running sampler thread; [`stop`](HostMonitor::stop) it before closing the trace.
#[derive(Debug)]
pub struct HostMonitor {
    stop: Stop,
    thread: Option<JoinHandle<Result<HostReport, HostError>>>,
}

impl HostMonitor {
    /// Starts monitoring this process: begins the `HostProcess` root record at the trace clock's
    /// current cycle, writes the environment and capabilities annotations, and starts the thread.
    pub fn start(trace: &Trace, config: HostConfig) -> Result<HostMonitor, HostError> {
        let pid = std::process::id();
        let opts = SamplerOptions {
            include_children: config.include_children,
            perf: config.perf,
            discover_every: config.discover_children_every.max(1),
            ..Default::default()
        };
        let mut sampler = TreeSampler::new(pid, opts)?;
        let (beacon, beacon_cap) = if config.beacon_from_env {
            match ClockBeacon::from_env() {
                Ok(Some(b)) => {
                    let mut c = Capability::new(true, None);
                    c.extra.insert("file".into(), b.path().display().to_string().into());
                    (Some(b), c)
                }
                Ok(None) => (
                    None,
                    Capability::new(
                        false,
                        Some(format!("{} is not set: no monitor is listening", super::BEACON_ENV)),
                    ),
                ),
                Err(e) => (None, Capability::new(false, Some(e.to_string()))),
            }
        } else {
            (None, Capability::new(false, Some("disabled in HostConfig".into())))
        };
        let mut caps = sampler.capabilities().clone();
        caps.insert("beacon", beacon_cap);
        let instr_cap = match caps.get("perf_hw") {
            Some(c) if c.available => Capability::new(true, None),
            Some(c) => Capability::new(
                false,
                Some(format!(
                    "needs hardware counters: {}",
                    c.reason.as_deref().unwrap_or("unavailable")
                )),
            ),
            None => Capability::new(false, Some("perf counters not requested".into())),
        };
        caps.insert("host_instructions", instr_cap);

        let clock = trace.clock().clone();
        let comm = super::procfs::read_stat(pid).map(|s| s.comm).unwrap_or_default();
        let root = trace
            .root("host", HOST_RECORD_TYPE)
            .field("pid", pid)
            .field("command", comm)
            .begin_at(clock.now())?;
        if config.env_snapshot {
            let env = serde_json::Value::Object(super::env::snapshot(pid)).to_string();
            root.annotation(ENV_ANNOTATION)
                .description("host environment snapshot (denet env record)")
                .data_json(&env)
                .emit()?;
        }
        let manifest = serde_json::Value::Object(caps.to_json()).to_string();
        root.annotation(CAPABILITIES_ANNOTATION)
            .description("which host metric sources work here, and why not")
            .data_json(&manifest)
            .emit()?;
        // Prime the CPU and counter deltas so the first written sample covers a real interval.
        sampler.sample();

        let stop: Stop = Arc::new((Mutex::new(false), Condvar::new()));
        let stop2 = stop.clone();
        let thread = std::thread::Builder::new()
            .name("jets-host-sampler".into())
            .spawn(move || run(sampler, root, clock, beacon, config, caps, stop2))
            .map_err(|e| HostError::Thread(e.to_string()))?;
        Ok(HostMonitor { stop, thread: Some(thread) })
    }

    /// Takes a last sample, ends the `HostProcess` record and returns the report.
    pub fn stop(mut self) -> Result<HostReport, HostError> {
        self.signal();
        match self.thread.take() {
            Some(t) => t.join().map_err(|_| HostError::Thread("panicked".into()))?,
            None => Err(HostError::Thread("already stopped".into())),
        }
    }

    fn signal(&self) {
        let (lock, cv) = &*self.stop;
        if let Ok(mut s) = lock.lock() {
            *s = true;
        }
        cv.notify_all();
    }
}

impl Drop for HostMonitor {
    fn drop(&mut self) {
        if let Some(t) = self.thread.take() {
            self.signal();
            if let Ok(Err(e)) = t.join() {
                eprintln!("jets: host monitor: {e}");
            }
        }
    }
}

struct Writer {
    sampler: TreeSampler,
    root: RecordHandle,
    clock: SimClock,
    last_clk: u64,
    points: Vec<SyncPoint>,
    last: TreeSample,
}

impl Writer {
    fn sample(&mut self) -> Result<(), HostError> {
        let s = self.sampler.sample();
        // A simulator may rewind its clock; sync points must not, so they hold at the last cycle.
        let clk = self.clock.now().max(self.last_clk);
        let point = SyncPoint {
            clk,
            mono_ns: clock_ns(libc::CLOCK_MONOTONIC),
            real_ns: clock_ns(libc::CLOCK_REALTIME),
            cpu_ns: Some(clock_ns(libc::CLOCK_PROCESS_CPUTIME_ID)),
            host_instructions: self.sampler.instructions_total(),
        };
        let mut e = self
            .root
            .event(SYNC_EVENT)
            .field(keys::MONO_NS, point.mono_ns)
            .field(keys::REAL_NS, point.real_ns);
        if let Some(c) = point.cpu_ns {
            e = e.field(keys::CPU_NS, c);
        }
        if let Some(i) = point.host_instructions {
            e = e.field(keys::HOST_INSTRUCTIONS, i);
        }
        for (k, v) in metric_fields(&s, self.sampler.pressure()) {
            e = e.field(k, v);
        }
        e.emit_at(clk)?;
        self.last_clk = clk;
        self.points.push(point);
        self.last = s;
        Ok(())
    }
}

/// The metrics of a sample as flat `HostSync` data fields (named in spec/host-sync.md).
fn metric_fields(s: &TreeSample, p: super::Pressure) -> Vec<(Str, jets::format::Value)> {
    let mut out: Vec<(Str, jets::format::Value)> = Vec::new();
    let mut put = |k: &'static str, v: jets::format::Value| out.push((Str::Static(k), v));
    if let Some(a) = &s.aggregated {
        put("cpu_usage", a.cpu_usage.into());
        put("mem_rss_kb", a.mem_rss_kb.into());
        put("mem_vms_kb", a.mem_vms_kb.into());
        put("disk_read_bytes", a.disk_read_bytes.into());
        put("disk_write_bytes", a.disk_write_bytes.into());
        if let Some(v) = a.syscall_read_bytes {
            put("syscall_read_bytes", v.into());
        }
        if let Some(v) = a.syscall_write_bytes {
            put("syscall_write_bytes", v.into());
        }
        if let Some(v) = a.page_faults_cached {
            put("page_faults_cached", v.into());
        }
        if let Some(v) = a.page_faults_disk {
            put("page_faults_disk", v.into());
        }
        put("sys_net_rx_bytes", a.sys_net_rx_bytes.into());
        put("sys_net_tx_bytes", a.sys_net_tx_bytes.into());
        put("thread_count", a.thread_count.into());
        put("process_count", a.process_count.into());
        if let Some(h) = a.perf {
            put("perf_cycles", h.cycles.into());
            put("perf_instructions", h.instructions.into());
            put("perf_cache_refs", h.cache_refs.into());
            put("perf_cache_misses", h.cache_misses.into());
            put("perf_stalled_backend", h.stalled_backend.into());
        }
        if let Some(w) = a.perf_sw {
            put("perf_task_clock_ns", w.task_clock_ns.into());
            put("perf_context_switches", w.context_switches.into());
            put("perf_page_faults", w.page_faults.into());
        }
    }
    if let Some(m) = p.system {
        put("psi_some_avg10", m.some_avg10.into());
        put("psi_full_avg10", m.full_avg10.into());
    }
    if let Some(m) = p.cgroup {
        put("psi_cgroup_some_avg10", m.some_avg10.into());
        put("psi_cgroup_full_avg10", m.full_avg10.into());
    }
    out
}

fn run(
    sampler: TreeSampler,
    root: RecordHandle,
    clock: SimClock,
    beacon: Option<ClockBeacon>,
    config: HostConfig,
    capabilities: Capabilities,
    stop: Stop,
) -> Result<HostReport, HostError> {
    let cpu0 = clock_ns(libc::CLOCK_THREAD_CPUTIME_ID);
    let start = Instant::now();
    let last_clk = clock.now().max(root.start_clk());
    let mut w =
        Writer { sampler, root, clock, last_clk, points: Vec::new(), last: TreeSample::default() };
    let (lock, cv) = &*stop;
    let mut next = start;
    loop {
        let now = Instant::now();
        if now >= next {
            w.sample()?;
            next = now + config.schedule.interval_at(now - start);
        }
        if let Some(b) = &beacon {
            b.publish(w.clock.now());
        }
        let wake = match &beacon {
            Some(_) => next.min(Instant::now() + config.beacon_period),
            None => next,
        };
        let guard = lock.lock().map_err(|_| HostError::Thread("stop lock poisoned".into()))?;
        let timeout = wake.saturating_duration_since(Instant::now());
        let (guard, _) = cv
            .wait_timeout_while(guard, timeout, |stopped| !*stopped)
            .map_err(|_| HostError::Thread("stop lock poisoned".into()))?;
        if *guard {
            break;
        }
    }
    w.sample()?;
    if let Some(b) = &beacon {
        b.publish(w.clock.now());
    }
    let Writer { root, last_clk, points, last, .. } = w;
    root.end_at(last_clk)?;
    Ok(HostReport {
        samples: points.len() as u64,
        sync_points: points,
        capabilities,
        sampler_cpu_ns: clock_ns(libc::CLOCK_THREAD_CPUTIME_ID).saturating_sub(cpu0),
        wall_ns: start.elapsed().as_nanos() as u64,
        last,
    })
}
