//! Switching tracing off at run time, for the whole trace or per subsystem ("domain", as in NVTX
//! and ITT). A switched-off call costs one atomic load and allocates nothing: records begun then
//! get [`JETS_ID_OFF`], on which every call succeeds and writes nothing.

use std::ffi::{c_char, c_int};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use crate::api::{jets_trace, trace};
use crate::cstr;
use crate::failure::{run, status, Failure, Msg};
use crate::types::*;

/// Most domains a trace can have.
const MAX_DOMAINS: usize = 255;

/// A trace's switches.
pub(crate) struct Switches {
    on: AtomicBool,
    /// Domain `d` is `names[d - 1]`, switched by `enabled[d - 1]`.
    names: Mutex<Vec<&'static str>>,
    enabled: [AtomicBool; MAX_DOMAINS],
    /// Lock-free copies of `names` for the hot path (set once, before the handle is returned).
    published: [std::sync::OnceLock<&'static str>; MAX_DOMAINS],
}

impl Default for Switches {
    fn default() -> Self {
        Switches {
            on: AtomicBool::new(true),
            names: Mutex::new(Vec::new()),
            enabled: [const { AtomicBool::new(true) }; MAX_DOMAINS],
            published: [const { std::sync::OnceLock::new() }; MAX_DOMAINS],
        }
    }
}

impl Switches {
    /// Whether the trace is on.
    #[inline(always)]
    pub(crate) fn on(&self) -> bool {
        self.on.load(Ordering::Relaxed)
    }

    /// `Ok(None)` when a line in `domain` is to be skipped; otherwise the domain's name (`None`
    /// inside for no domain).
    #[inline(always)]
    pub(crate) fn route(
        &self,
        domain: jets_domain,
    ) -> Result<Option<Option<&'static str>>, Failure> {
        if !self.on() {
            return Ok(None);
        }
        if domain == 0 {
            return Ok(Some(None));
        }
        let (i, name) = self.created(domain)?;
        Ok(self.enabled[i].load(Ordering::Relaxed).then_some(Some(name)))
    }

    /// The index and name of a domain `jets_domain_create` made; 0 ("none") and any other handle
    /// are refused, whether the trace is on or off.
    #[inline(always)]
    fn created(&self, domain: jets_domain) -> Result<(usize, &'static str), Failure> {
        let i = (domain as usize).wrapping_sub(1);
        match self.published.get(i).and_then(|n| n.get()) {
            Some(name) => Ok((i, name)),
            None => Err(Failure::invalid(Msg::Id(
                "domain",
                u64::from(domain),
                " was never created in this trace",
            ))),
        }
    }
}

/// Switches tracing of `t` on or off (on when opened). While off, every record, event, annotation
/// and end call returns `JETS_OK` (a record: `JETS_ID_OFF`) and writes nothing, at the cost of
/// one atomic load; `jets_flush` and `jets_close` work as usual.
///
/// # Safety
/// `t` is NULL or a handle from `jets_open`.
#[no_mangle]
pub unsafe extern "C" fn jets_set_enabled(t: *mut jets_trace, on: bool) -> c_int {
    status("jets_set_enabled", || {
        // SAFETY: forwarded from the caller.
        unsafe { trace(t) }?.switches.on.store(on, Ordering::Relaxed);
        Ok(())
    })
}

/// Creates the domain `name` of `t` (the same handle again for the same name), enabled: a
/// subsystem whose lines can be switched off together (`jets_domain_set_enabled`). Name it in
/// `jets_attrs.domain`; its records carry `data.domain`. Returns 0 on failure (at most 255
/// domains per trace).
///
/// # Safety
/// `t` is NULL or a handle from `jets_open`; `name` is NULL or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn jets_domain_create(
    t: *mut jets_trace,
    name: *const c_char,
) -> jets_domain {
    run("jets_domain_create", || {
        // SAFETY: `t` is NULL or a handle from `jets_open` (this function's contract), and
        // `jets_close`'s contract keeps other threads from closing it during this call.
        let t = unsafe { trace(t) }?;
        // SAFETY: `name` is NULL or NUL-terminated (this function's contract).
        let name = unsafe { cstr::required(name, "name") }?;
        let s = &t.switches;
        let mut names = s.names.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(i) = names.iter().position(|n| *n == name) {
            return Ok(i as jets_domain + 1);
        }
        if names.len() == MAX_DOMAINS {
            return Err(Failure::invalid("too many domains (255 per trace)"));
        }
        let text = crate::intern::text(name)?;
        names.push(text);
        let _ = s.published[names.len() - 1].set(text);
        Ok(names.len() as jets_domain)
    })
    .unwrap_or(0)
}

/// Enables or disables the lines of `domain`. A handle `jets_domain_create` did not return for
/// `t` (0 included) is refused with `JETS_ERR_INVALID_ARGUMENT`, whether tracing is on or off.
///
/// # Safety
/// `t` is NULL or a handle from `jets_open`.
#[no_mangle]
pub unsafe extern "C" fn jets_domain_set_enabled(
    t: *mut jets_trace,
    domain: jets_domain,
    on: bool,
) -> c_int {
    status("jets_domain_set_enabled", || {
        // SAFETY: forwarded from the caller.
        let t = unsafe { trace(t) }?;
        let (i, _) = t.switches.created(domain)?;
        t.switches.enabled[i].store(on, Ordering::Relaxed);
        Ok(())
    })
}
