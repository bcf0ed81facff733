//! Interned strings: a name registered once with `jets_intern` and then passed by a 32-bit handle,
//! like ITT string handles. The text is kept for the life of the process (interned names are a
//! small, fixed vocabulary), which makes it `&'static str` to the writer: no copy, no reference
//! count and no allocation per line.
//!
//! Looking a handle up is on every `_ex` call, so it takes no lock: texts live in segments that
//! double in size (segment `k` holds handles `2^k .. 2^(k+1)`), each allocated once and never
//! moved, and a slot is published before its handle is returned. Registering takes a lock.

use std::cell::UnsafeCell;
use std::collections::BTreeMap;
use std::ffi::c_char;
use std::sync::atomic::{AtomicPtr, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};

use crate::codes::*;
use crate::cstr;
use crate::failure::{run, Failure, Msg};
use crate::types::jets_str;

type Slot = OnceLock<&'static str>;

/// Segment `k` points to `2^k` slots (or is null until needed).
static SEGMENTS: [AtomicPtr<Slot>; 32] = [const { AtomicPtr::new(std::ptr::null_mut()) }; 32];

/// Text to handle, for registering; the next handle is `len + 1`. A B-tree rather than a hash
/// map: its nodes are referenced from their start, so leak checkers see the table as reachable
/// rather than "possibly lost".
static HANDLES: Mutex<BTreeMap<&'static str, jets_str>> = Mutex::new(BTreeMap::new());

/// The guard of [`HANDLES`] held across a `fork` (see [`hold_for_fork`]).
struct Held(UnsafeCell<Option<MutexGuard<'static, BTreeMap<&'static str, jets_str>>>>);
// SAFETY: touched only by the `pthread_atfork` handlers, which run one after the other on the
// forking thread (the prepare handler, then the parent or the child handler).
unsafe impl Sync for Held {}
static HELD: Held = Held(UnsafeCell::new(None));

/// Before a `fork`: takes the intern lock, so that no other thread holds it when the child is
/// made (the child would inherit it held forever).
pub(crate) fn hold_for_fork() {
    let guard = HANDLES.lock().unwrap_or_else(|p| p.into_inner());
    // SAFETY: see `Held`.
    unsafe { *HELD.0.get() = Some(guard) };
}

/// After a `fork`, in the parent and in the child: releases the lock taken by [`hold_for_fork`].
pub(crate) fn release_after_fork() {
    // SAFETY: see `Held`.
    drop(unsafe { (*HELD.0.get()).take() });
}

/// Registers `text` and returns its handle (the same handle for the same text, from any thread,
/// for any trace). Returns 0 on failure (NULL or invalid UTF-8; see `jets_last_error()`).
///
/// Interned strings live until the process exits: intern names and keys, not per-line values.
///
/// # Safety
/// `text` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn jets_intern(text: *const c_char) -> jets_str {
    crate::process::generation(); // registers the fork handlers that keep this lock safe
    run("jets_intern", || {
        // SAFETY: the caller passes NULL or a NUL-terminated string.
        let text = unsafe { cstr::required(text, "text") }?;
        intern(text)
    })
    .unwrap_or(0)
}

/// Registers `text` (see [`jets_intern`]).
pub(crate) fn intern(text: &str) -> Result<jets_str, Failure> {
    let mut handles = HANDLES.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(&h) = handles.get(text) {
        return Ok(h);
    }
    let handle = jets_str::try_from(handles.len() + 1)
        .ok()
        .filter(|&h| h != jets_str::MAX)
        .ok_or_else(|| Failure::invalid("too many interned strings (2^32 - 2 at most)"))?;
    // Leaked on purpose: interned strings live as long as the process (see the module docs).
    let text: &'static str = Box::leak(text.to_owned().into_boxed_str());
    let (segment, index) = locate(handle);
    let mut slots = SEGMENTS[segment].load(Ordering::Acquire);
    if slots.is_null() {
        // Only registering allocates segments, and it holds the lock: no race to install one.
        let fresh: Box<[Slot]> = (0..1usize << segment).map(|_| Slot::new()).collect();
        slots = Box::leak(fresh).as_mut_ptr();
        SEGMENTS[segment].store(slots, Ordering::Release);
    }
    // SAFETY: `index < 2^segment`, the segment's length; segments are never freed.
    let _ = unsafe { &*slots.add(index) }.set(text);
    handles.insert(text, handle);
    Ok(handle)
}

/// The interned, `'static` copy of `text` (registered if new).
pub(crate) fn text(text: &str) -> Result<&'static str, Failure> {
    let h = intern(text)?;
    lookup(h, "text")
}

/// Segment and index of handle `h` (> 0).
#[inline(always)]
fn locate(h: jets_str) -> (usize, usize) {
    let segment = (31 - h.leading_zeros()) as usize;
    (segment, (h - (1 << segment)) as usize)
}

/// The text of handle `h`; `what` names the argument in the error.
#[inline]
pub(crate) fn lookup(h: jets_str, what: &'static str) -> Result<&'static str, Failure> {
    get(h).ok_or_else(|| {
        Failure::new(
            JETS_ERR_UNKNOWN_STRING,
            Msg::Id(what, u64::from(h), " is not a jets_intern handle"),
        )
    })
}

/// The text of handle `h`, if it is one.
#[inline(always)]
pub(crate) fn get(h: jets_str) -> Option<&'static str> {
    if h == 0 {
        return None;
    }
    let (segment, index) = locate(h);
    let slots = SEGMENTS[segment].load(Ordering::Acquire);
    if slots.is_null() {
        return None;
    }
    // SAFETY: `index < 2^segment`, the segment's length; segments are never freed.
    unsafe { &*slots.add(index) }.get().copied()
}
