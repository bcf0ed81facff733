//! Host collectors (Linux): how fast the simulation runs and what it costs the host.
//!
//! * [`HostMonitor`]: a sampler thread inside the simulator. Each sample becomes a
//!   [`HostSync`](crate::sync::SYNC_EVENT) event on a `HostProcess` root record: the simulator's
//!   cycle, the host clocks read at that instant, and the process tree's metrics. The environment
//!   snapshot and the capabilities manifest are annotations on that record. [`crate::sync`] turns
//!   the events back into a cycle ↔ time map and a speed report.
//! * [`TreeSampler`]: the sampling itself (a process, its threads and its descendants), shared with
//!   `jets run`, which writes the samples as [denet] JSON Lines.
//! * [`ClockBeacon`]: a memory-mapped file through which a simulator publishes its cycle to a
//!   monitor in another process.
//! * [`Capabilities`]: for each source, whether it works here and why not. A source that does not
//!   work is absent from the samples, never reported as zeros.
//!
//! ```no_run
//! use jets_host::{HostConfig, HostMonitor};
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let trace = jets::Trace::create("sim.jets", jets::Metadata::new())?;
//! let monitor = HostMonitor::start(&trace, HostConfig::default())?;
//! // ... simulate, advancing trace.clock() ...
//! let report = monitor.stop()?;
//! println!("{} samples, sampler used {:.3}% of a core", report.samples, report.overhead() * 100.0);
//! trace.close()?;
//! # Ok(()) }
//! ```

#![deny(clippy::print_stdout)]

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Map, Value};

#[cfg(target_os = "linux")]
pub mod beacon;
pub mod denet;
#[cfg(all(feature = "ebpf", target_os = "linux"))]
pub mod ebpf;
#[cfg(target_os = "linux")]
pub mod env;
pub mod layout;
pub mod load;
#[cfg(target_os = "linux")]
mod monitor;
#[cfg(target_os = "linux")]
pub mod perf;
#[cfg(target_os = "linux")]
pub mod procfs;
#[cfg(target_os = "linux")]
mod sampler;
pub mod sync;

#[cfg(target_os = "linux")]
pub use beacon::{ClockBeacon, BEACON_ENV};
#[cfg(target_os = "linux")]
pub use monitor::{HostConfig, HostMonitor, HostReport};
#[cfg(target_os = "linux")]
pub use sampler::{Pressure, SamplerOptions, TreeSampler};

/// What went wrong in a host collector.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    /// Reading or mapping a file failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// A beacon file is not one.
    #[error("{}: not a JETS clock beacon: {what}", path.display())]
    Beacon {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        what: String,
    },
    /// The sampler thread could not be started or panicked.
    #[error("host sampler thread: {0}")]
    Thread(String),
    /// Writing to the trace failed.
    #[error("writing host samples to the trace: {0}")]
    Trace(#[from] jets::Error),
}

/// Whether one metric source works here, and why not.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Capability {
    /// The source delivers data.
    pub available: bool,
    /// Why it does not (or how it was degraded).
    pub reason: Option<String>,
    /// Source-specific details (`events` opened, PSI `system`/`per_process`, ...).
    pub extra: Map<String, Value>,
}

impl Capability {
    /// A capability without details.
    pub fn new(available: bool, reason: Option<String>) -> Capability {
        Capability { available, reason, extra: Map::new() }
    }

    /// As JSON: `{"available":..,"reason":..,...details}` (denet's shape).
    pub fn to_json(&self) -> Value {
        let mut m = Map::new();
        m.insert("available".into(), self.available.into());
        if let Some(r) = &self.reason {
            m.insert("reason".into(), r.clone().into());
        }
        m.extend(self.extra.clone());
        Value::Object(m)
    }
}

/// The capabilities manifest: one [`Capability`] per source (`proc_stat`, `proc_io`, `net`, `psi`,
/// `perf_hw`, `perf_sw`, `beacon`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Capabilities(pub BTreeMap<&'static str, Capability>);

impl Capabilities {
    /// Sets a source's capability.
    pub fn insert(&mut self, source: &'static str, c: Capability) {
        self.0.insert(source, c);
    }

    /// A source's capability.
    pub fn get(&self, source: &str) -> Option<&Capability> {
        self.0.get(source)
    }

    /// As a JSON object keyed by source (denet's `capabilities` shape).
    pub fn to_json(&self) -> Map<String, Value> {
        self.0.iter().map(|(k, v)| (k.to_string(), v.to_json())).collect()
    }
}

/// When to sample.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Schedule {
    /// Every `interval`.
    Fixed(Duration),
    /// denet-style adaptive: `base` for the first second (short runs get dense samples), then
    /// growing linearly to `max` at 10 s, then `max` (long runs stay cheap).
    Adaptive {
        /// The interval at the start.
        base: Duration,
        /// The interval from 10 s on.
        max: Duration,
    },
}

impl Schedule {
    /// The interval to wait after `elapsed` time of monitoring.
    pub fn interval_at(&self, elapsed: Duration) -> Duration {
        match *self {
            Schedule::Fixed(d) => d,
            Schedule::Adaptive { base, max } => {
                let t = elapsed.as_secs_f64();
                if t <= 1.0 || max <= base {
                    base
                } else if t >= 10.0 {
                    max
                } else {
                    base + (max - base).mul_f64((t - 1.0) / 9.0)
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adaptive_schedule_ramps_from_base_to_max() {
        let s = Schedule::Adaptive {
            base: Duration::from_millis(100),
            max: Duration::from_millis(1000),
        };
        assert_eq!(s.interval_at(Duration::from_millis(500)), Duration::from_millis(100));
        assert_eq!(s.interval_at(Duration::from_millis(5500)), Duration::from_millis(550));
        assert_eq!(s.interval_at(Duration::from_secs(60)), Duration::from_millis(1000));
        assert_eq!(
            Schedule::Fixed(Duration::from_millis(7)).interval_at(Duration::from_secs(9)),
            Duration::from_millis(7)
        );
    }
}
