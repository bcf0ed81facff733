//! Push/pop nesting, as `nvtxRangePush`/`nvtxRangePop`: each thread keeps, per trace, a stack of
//! the records it pushed; a push begins a child of the top one (a root when empty), a pop ends
//! the top one.
//!
//! Closed shells are never freed, so a shell address never names another trace and a stale
//! entry can never be mistaken for a new trace's.

use std::cell::RefCell;
use std::ffi::c_int;

use jets::format::Str;

use crate::api::{jets_trace, trace};
use crate::attrs::{Attrs, Typed};
use crate::failure::{run, status, Failure};
use crate::types::*;

thread_local! {
    /// (trace shell, record id) pushed by this thread, innermost last.
    static STACK: RefCell<Vec<(usize, jets_id)>> = const { RefCell::new(Vec::new()) };
}

fn top(t: *mut jets_trace) -> Option<jets_id> {
    STACK.with_borrow(|s| s.iter().rev().find(|(k, _)| *k == t as usize).map(|(_, id)| *id))
}

/// Begins a record, a child of this thread's innermost pushed record of `t` (a root record if
/// none), and pushes it. `attrs` as in `jets_record_begin_ex`. Returns its id (`JETS_ID_OFF` when
/// tracing is off, which pops like any other), or 0 on failure (nothing pushed).
///
/// # Safety
/// `t` is NULL or a handle from `jets_open`; `attrs` is NULL or initialized with
/// `JETS_ATTRS_INIT`, its `fields` pointing to `field_count` fields, and `attrs->data_json` NULL or
/// a NUL-terminated string, as in `jets_record_begin_ex`.
#[no_mangle]
pub unsafe extern "C" fn jets_push(
    t: *mut jets_trace,
    clk: u64,
    attrs: *const jets_attrs,
) -> jets_id {
    run("jets_push", || {
        // SAFETY: `t` is NULL or a handle from `jets_open` (this function's contract), and
        // `jets_close`'s contract keeps other threads from closing it during this call.
        let open = unsafe { trace(t) }?;
        // SAFETY: `attrs` is NULL or initialized with JETS_ATTRS_INIT (this function's contract,
        // as in `jets_record_begin_ex`), so its `size` says how many bytes of it are valid.
        let a = unsafe { Attrs::read(attrs) }?;
        let parent = top(t).unwrap_or(0);
        let id = match open.switches.route(a.domain())? {
            Some(_) if parent == JETS_ID_OFF => JETS_ID_OFF,
            None => JETS_ID_OFF,
            Some(domain) => {
                let clk = open.clocks.to_trace(a.clock(), clk)?;
                let (name, record_type) = (a.name()?, a.record_type()?);
                let mut typed = Typed::new();
                // SAFETY: per the contract `fields` points to `field_count` fields, and
                // `data_json` (a C string member) is NULL or NUL-terminated, alive for the call.
                let c = unsafe { a.check(domain, &mut typed) }?;
                open.begin_ex(parent, clk, Str::Static(name), Str::Static(record_type), c)?
            }
        };
        STACK.with_borrow_mut(|s| s.push((t as usize, id)));
        Ok(id)
    })
    .unwrap_or(0)
}

/// Ends this thread's innermost pushed record of `t` at `clk` (or `JETS_CLK_NOW`) and pops it.
/// `JETS_ERR_INVALID_ARGUMENT` when nothing is pushed; on any other failure the record stays
/// pushed and open.
///
/// # Safety
/// `t` is NULL or a handle from `jets_open`.
#[no_mangle]
pub unsafe extern "C" fn jets_pop(t: *mut jets_trace, clk: u64) -> c_int {
    status("jets_pop", || {
        // SAFETY: forwarded from the caller.
        let open = unsafe { trace(t) }?;
        let id =
            top(t).ok_or(Failure::invalid("nothing is pushed on this thread for this trace"))?;
        open.end(id, clk, None)?;
        STACK.with_borrow_mut(|s| {
            if let Some(i) = s.iter().rposition(|(k, _)| *k == t as usize) {
                s.remove(i);
            }
        });
        Ok(())
    })
}
