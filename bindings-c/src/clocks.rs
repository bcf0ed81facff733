//! More than one clock: a simulator whose cores, DRAM and network-on-chip tick at different rates
//! gives each line's `clk` in its own clock, and the trace converts it to the trace's clock (the
//! header's `clock_frequency_mhz`) so that all lines share one time axis (rule CA-CLK-3).

use std::ffi::{c_char, c_int};
use std::sync::{Mutex, OnceLock};

use crate::api::{jets_trace, trace};
use crate::cstr;
use crate::failure::{run, status, Failure, Msg};
use crate::types::*;

/// 2^64 as a float: every product of a clock conversion below it casts to a cycle below
/// `JETS_CLK_NOW` (the largest double below 2^64 is 2^64 - 2048).
const TRACE_CYCLES_END: f64 = 18_446_744_073_709_551_616.0;

/// Most clocks a trace can have.
const MAX_CLOCKS: usize = 64;

/// A trace's extra clocks.
pub(crate) struct Clocks {
    /// The trace clock's frequency, from the header metadata (`None`: no extra clocks possible).
    base_mhz: Option<f64>,
    names: Mutex<Vec<(&'static str, f64)>>,
    /// `ratio[c - 1]` = trace cycles per cycle of clock `c`, published once.
    ratio: [OnceLock<f64>; MAX_CLOCKS],
}

impl Clocks {
    pub(crate) fn new(base_mhz: Option<f64>) -> Clocks {
        Clocks {
            base_mhz,
            names: Mutex::new(Vec::new()),
            ratio: [const { OnceLock::new() }; MAX_CLOCKS],
        }
    }

    /// `clk` of clock `c` in trace cycles (rounded down); `JETS_CLK_NOW` stays as it is.
    #[inline(always)]
    pub(crate) fn to_trace(&self, c: jets_clock, clk: u64) -> Result<u64, Failure> {
        if c == 0 || clk == JETS_CLK_NOW {
            return Ok(clk);
        }
        let ratio = self.ratio.get(c as usize - 1).and_then(|r| r.get()).ok_or(
            Failure::invalid(Msg::Id("clock", u64::from(c), " was never created in this trace")),
        )?;
        // Exact for products below 2^53 cycles; beyond that within one part in 2^53. A product
        // of 2^64 or more is no cycle (a cast would make it u64::MAX, JETS_CLK_NOW): CA-CLK-4.
        let at = clk as f64 * ratio;
        if !(0.0..TRACE_CYCLES_END).contains(&at) {
            return Err(Failure::invalid(format!(
                "clk {clk} of clock {c} is {at} trace cycles, not a cycle from 0 to below 2^64"
            )));
        }
        Ok(at as u64)
    }
}

/// A rate `what` is a positive, finite frequency, or it converts no cycle.
fn positive(mhz: f64, what: &str) -> Result<(), Failure> {
    if mhz.is_finite() && mhz > 0.0 {
        Ok(())
    } else {
        Err(Failure::invalid(format!("{what} {mhz} is not a positive frequency")))
    }
}

/// Creates a clock of `t` running at `mhz` (the same handle again for the same name and rate):
/// pass it in `jets_attrs.clock`, or to `jets_clock_set`, to give cycles of that clock; they are
/// written in cycles of the trace's clock, whose rate is the header's `clock_frequency_mhz` (which
/// `jets_open` must have been given, a positive number). Returns 0 on failure. A `clk` of that
/// clock whose trace cycle would be 2^64 or more is refused with `JETS_ERR_INVALID_ARGUMENT`
/// (CA-CLK-4).
///
/// # Safety
/// `t` is NULL or a handle from `jets_open`; `name` is NULL or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn jets_clock_create(
    t: *mut jets_trace,
    name: *const c_char,
    mhz: f64,
) -> jets_clock {
    run("jets_clock_create", || {
        // SAFETY: `t` is NULL or a handle from `jets_open` (this function's contract), and
        // `jets_close`'s contract keeps other threads from closing it during this call.
        let t = unsafe { trace(t) }?;
        // SAFETY: `name` is NULL or NUL-terminated (this function's contract).
        let name = unsafe { cstr::required(name, "name") }?;
        let c = &t.clocks;
        let base = c.base_mhz.ok_or(Failure::invalid(
            "the trace has no clock_frequency_mhz in its header metadata: give it to jets_open to use more than one clock",
        ))?;
        // The header's rate is whatever JSON number `jets_open` was given: 0 would map every
        // cycle of this clock to cycle 0, and a negative or infinite one to nothing real.
        positive(base, "the trace's clock_frequency_mhz")?;
        positive(mhz, "mhz")?;
        let mut names = c.names.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(i) = names.iter().position(|(n, _)| *n == name) {
            if names[i].1 != mhz {
                return Err(Failure::invalid(format!(
                    "clock {name:?} already runs at {} MHz",
                    names[i].1
                )));
            }
            return Ok(i as jets_clock + 1);
        }
        if names.len() == MAX_CLOCKS {
            return Err(Failure::invalid("too many clocks (64 per trace)"));
        }
        names.push((crate::intern::text(name)?, mhz));
        let _ = c.ratio[names.len() - 1].set(base / mhz);
        Ok(names.len() as jets_clock)
    })
    .unwrap_or(0)
}

/// `jets_set_clock` in cycles of `clock` (converted to the trace's clock).
///
/// # Safety
/// `t` is NULL or a handle from `jets_open`.
#[no_mangle]
pub unsafe extern "C" fn jets_clock_set(t: *mut jets_trace, clock: jets_clock, clk: u64) -> c_int {
    status("jets_clock_set", || {
        // SAFETY: forwarded from the caller.
        let t = unsafe { trace(t) }?;
        if clk == JETS_CLK_NOW {
            return Err(Failure::invalid("clk is JETS_CLK_NOW, which is not a cycle"));
        }
        t.trace.clock().set(t.clocks.to_trace(clock, clk)?);
        Ok(())
    })
}
