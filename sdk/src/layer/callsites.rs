//! Texts built once per callsite: the `file:line` description of spans and the message of events.
//!
//! Callsites are static and finite, so these texts are leaked like `tracing`'s own metadata and
//! every line refers to them as `&'static str`: no allocation and no reference count per span or
//! event. Each thread keeps its own small cache in front of the process-wide one, so the common
//! path touches no shared cache line.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::{OnceLock, RwLock};

use tracing::Metadata;

use crate::format::Str;

type Map = HashMap<usize, &'static str, BuildHasherDefault<PtrHasher>>;

/// The process-wide texts: descriptions and messages (keyed by different callsites, so one map).
static SHARED: OnceLock<RwLock<Map>> = OnceLock::new();

thread_local! {
    static LOCAL: RefCell<Map> = RefCell::default();
    static BUFFER: Cell<String> = const { Cell::new(String::new()) };
}

fn key(meta: &'static Metadata<'static>) -> usize {
    meta as *const Metadata<'static> as usize
}

/// The text for `meta`, from this thread's cache, else the process's, else made by `make`.
fn cached(meta: &'static Metadata<'static>, make: impl FnOnce() -> String) -> &'static str {
    let key = key(meta);
    if let Some(t) = LOCAL.with(|l| l.borrow().get(&key).copied()) {
        return t;
    }
    let shared = SHARED.get_or_init(RwLock::default);
    let found = shared.read().unwrap_or_else(|p| p.into_inner()).get(&key).copied();
    let text = match found {
        Some(t) => t,
        None => *shared
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .entry(key)
            .or_insert_with(|| Box::leak(make().into_boxed_str())),
    };
    LOCAL.with(|l| l.borrow_mut().insert(key, text));
    text
}

/// A span callsite's `file:line` (its file, or its module, when that is all there is).
pub(super) fn description(meta: &'static Metadata<'static>) -> Str {
    Str::Static(cached(meta, || match (meta.file(), meta.line()) {
        (Some(file), Some(line)) => format!("{file}:{line}"),
        (Some(file), None) => file.to_owned(),
        _ => meta.module_path().unwrap_or("").to_owned(),
    }))
}

/// An event's message as a line name: the callsite's first message is kept, so a message that
/// never changes (the usual case, a literal) is static; a different one is copied.
pub(super) fn message(meta: &'static Metadata<'static>, text: &str) -> Str {
    let first = cached(meta, || text.to_owned());
    if first == text {
        Str::Static(first)
    } else {
        Str::Owned(text.into())
    }
}

/// This thread's buffer for formatting messages (empty, with the capacity it grew to).
pub(super) fn take_buffer() -> String {
    BUFFER.with(Cell::take)
}

/// Gives the buffer back for the next event on this thread.
pub(super) fn return_buffer(buffer: String) {
    BUFFER.with(|b| b.set(buffer));
}

/// Hashes a callsite's address: addresses are unique already, only their low bits are spread.
#[derive(Default)]
struct PtrHasher(u64);

impl Hasher for PtrHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 << 8) | u64::from(b);
        }
    }
    fn write_usize(&mut self, n: usize) {
        self.0 = (n as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}
