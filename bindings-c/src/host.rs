//! The host monitor for C: `jets_host::HostMonitor` sampling this process (CPU, memory, I/O,
//! perf counters where allowed) into the trace as `HostSync` events under a `HostProcess` root
//! record. Linux only; elsewhere the calls return `JETS_ERR_HOST`.

use std::ffi::c_int;
use std::sync::Mutex;

use crate::api::{jets_trace, trace, Open};
use crate::codes::*;
use crate::failure::{status_uncancellable, Failure};

#[cfg(target_os = "linux")]
type Monitor = jets_host::HostMonitor;
#[cfg(not(target_os = "linux"))]
type Monitor = ();

/// A trace's running monitor.
pub(crate) type Slot = Mutex<Option<Monitor>>;

/// Starts sampling this process (and its children) into the trace every `interval_ms`
/// milliseconds (0: every 100 ms): a `HostProcess` root record begun at the trace clock, its
/// environment and capabilities annotations (which sources work here, and why not), then one
/// `HostSync` event per sample, linking the trace clock to host time. Stop it with
/// `jets_host_monitor_stop`, or `jets_close` stops it.
///
/// # Safety
/// `t` is NULL or an open trace.
#[no_mangle]
pub unsafe extern "C" fn jets_host_monitor_start(t: *mut jets_trace, interval_ms: u32) -> c_int {
    status_uncancellable("jets_host_monitor_start", || {
        // SAFETY: forwarded from the caller.
        let t = unsafe { trace(t) }?;
        let mut slot = t.host.lock().unwrap_or_else(|p| p.into_inner());
        if slot.is_some() {
            return Err(Failure::invalid("the host monitor of this trace is already running"));
        }
        *slot = Some(start(t, interval_ms)?);
        Ok(())
    })
}

/// Stops the host monitor: a last sample, then the `HostProcess` record ends.
///
/// # Safety
/// `t` is NULL or an open trace.
#[no_mangle]
pub unsafe extern "C" fn jets_host_monitor_stop(t: *mut jets_trace) -> c_int {
    status_uncancellable("jets_host_monitor_stop", || {
        // SAFETY: forwarded from the caller.
        let t = unsafe { trace(t) }?;
        let monitor = t.host.lock().unwrap_or_else(|p| p.into_inner()).take();
        match monitor {
            Some(m) => stop(m),
            None => Err(Failure::invalid("the host monitor of this trace is not running")),
        }
    })
}

/// Stops the monitor if one runs (for `jets_close`).
pub(crate) fn stop_running(t: &Open) -> Result<(), Failure> {
    let monitor = t.host.lock().unwrap_or_else(|p| p.into_inner()).take();
    monitor.map_or(Ok(()), stop)
}

#[cfg(target_os = "linux")]
fn start(t: &Open, interval_ms: u32) -> Result<Monitor, Failure> {
    let mut config = jets_host::HostConfig::default();
    if interval_ms > 0 {
        config = config.interval(std::time::Duration::from_millis(u64::from(interval_ms)));
    }
    crate::process::with_signals_blocked(|| jets_host::HostMonitor::start(&t.trace, config))
        .map_err(|e| Failure::new(JETS_ERR_HOST, e.to_string()))
}

#[cfg(target_os = "linux")]
fn stop(m: Monitor) -> Result<(), Failure> {
    m.stop().map(drop).map_err(|e| Failure::new(JETS_ERR_HOST, e.to_string()))
}

#[cfg(not(target_os = "linux"))]
fn start(_: &Open, _: u32) -> Result<Monitor, Failure> {
    Err(Failure::new(JETS_ERR_HOST, "the host monitor needs Linux (/proc, perf_event_open)"))
}

#[cfg(not(target_os = "linux"))]
fn stop(_: Monitor) -> Result<(), Failure> {
    Ok(())
}
