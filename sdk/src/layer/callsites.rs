//! Texts kept once per callsite: a span's `file:line` description, and the first text seen for an
//! event's message or a `record_type` or `description` field.
//!
//! Callsites are static and finite, so these texts are leaked like `tracing`'s own metadata and
//! every line refers to them as `&'static str`: a text that does not change from call to call (a
//! literal, the usual case) costs no allocation and no reference count per span or event; a text
//! that differs from the callsite's first one is copied. Each thread keeps its own small cache in
//! front of the process-wide one, so the common path touches no shared cache line.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::{OnceLock, RwLock};

use tracing::Metadata;

use crate::format::Str;

/// Which text of a callsite.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum Slot {
    /// The callsite's `file:line`.
    Location,
    /// An event's message.
    Message,
    /// A `record_type` field.
    RecordType,
    /// A `description` field.
    Description,
}

type Map = HashMap<(usize, Slot), &'static str, BuildHasherDefault<PtrHasher>>;

/// The process-wide texts.
static SHARED: OnceLock<RwLock<Map>> = OnceLock::new();

thread_local! {
    static LOCAL: RefCell<Map> = RefCell::default();
    static BUFFER: Cell<String> = const { Cell::new(String::new()) };
}

/// The text for `meta`, from this thread's cache, else the process's, else made by `make`.
fn cached(
    meta: &'static Metadata<'static>,
    slot: Slot,
    make: impl FnOnce() -> String,
) -> &'static str {
    let key = (meta as *const Metadata<'static> as usize, slot);
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
    Str::Static(cached(meta, Slot::Location, || match (meta.file(), meta.line()) {
        (Some(file), Some(line)) => format!("{file}:{line}"),
        (Some(file), None) => file.to_owned(),
        _ => meta.module_path().unwrap_or("").to_owned(),
    }))
}

/// `text` as static when it is the callsite's first text for `slot`, else a copy.
pub(super) fn text(meta: &'static Metadata<'static>, slot: Slot, text: &str) -> Str {
    let first = cached(meta, slot, || text.to_owned());
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
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }
    fn write_usize(&mut self, n: usize) {
        self.0 ^= (n as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}
