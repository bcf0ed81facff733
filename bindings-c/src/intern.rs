//! Interned strings: a name registered once with `jets_intern` and then passed by a 32-bit handle,
//! like ITT string handles. The text is kept for the life of the process (interned names are a
//! small, fixed vocabulary), which makes it `&'static str` to the writer: no copy, no reference
//! count and no allocation per line.

use std::collections::BTreeMap;
use std::ffi::c_char;
use std::sync::{LazyLock, RwLock};

use crate::codes::*;
use crate::cstr;
use crate::failure::{run, Failure};
use crate::types::jets_str;

#[derive(Default)]
struct Table {
    /// Handle `h` is `texts[h - 1]`.
    texts: Vec<&'static str>,
    /// A B-tree rather than a hash map: its nodes are referenced from their start, so leak
    /// checkers see the table as reachable rather than "possibly lost".
    handles: BTreeMap<&'static str, jets_str>,
}

static TABLE: LazyLock<RwLock<Table>> = LazyLock::new(Default::default);

/// Registers `text` and returns its handle (the same handle for the same text, from any thread,
/// for any trace). Returns 0 on failure (NULL or invalid UTF-8; see `jets_last_error()`).
///
/// Interned strings live until the process exits: intern names and keys, not per-line values.
///
/// # Safety
/// `text` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn jets_intern(text: *const c_char) -> jets_str {
    run("jets_intern", || {
        // SAFETY: the caller passes NULL or a NUL-terminated string.
        let text = unsafe { cstr::required(text, "text") }?;
        intern(text)
    })
    .unwrap_or(0)
}

/// Registers `text` (see [`jets_intern`]).
pub(crate) fn intern(text: &str) -> Result<jets_str, Failure> {
    if let Some(&h) = read().handles.get(text) {
        return Ok(h);
    }
    let mut table = TABLE.write().unwrap_or_else(|p| p.into_inner());
    if let Some(&h) = table.handles.get(text) {
        return Ok(h);
    }
    let handle = jets_str::try_from(table.texts.len() + 1)
        .map_err(|_| Failure::invalid("too many interned strings (more than 2^32 - 1)"))?;
    // Leaked on purpose: interned strings live as long as the process (see the module docs).
    let text: &'static str = Box::leak(text.to_owned().into_boxed_str());
    table.texts.push(text);
    table.handles.insert(text, handle);
    Ok(handle)
}

/// The text of handle `h`; `what` names the argument in the error.
pub(crate) fn lookup(h: jets_str, what: &str) -> Result<&'static str, Failure> {
    let index = (h as usize).wrapping_sub(1);
    read().texts.get(index).copied().ok_or_else(|| {
        Failure::new(JETS_ERR_UNKNOWN_STRING, format!("{what} {h} is not a jets_intern handle"))
    })
}

fn read() -> std::sync::RwLockReadGuard<'static, Table> {
    TABLE.read().unwrap_or_else(|p| p.into_inner())
}
