//! `TraceBuilder::flush_on_panic` (and a flight recorder's dump on panic): one process-wide panic
//! hook for every trace that asks for it.
//!
//! Installing a hook per trace would chain one closure per trace ever opened, and a panic would
//! walk (and its stack would hold) all of them. Instead the hook is installed once and flushes the
//! traces of a list; a dropped trace is a dead `Weak` there, pruned whenever a trace registers.

use std::sync::{Arc, Mutex, Once, Weak};
use std::time::Duration;

use super::Inner;

/// The traces, each with whether to dump its flight recorder (which flushes too) or only flush.
static TRACES: Mutex<Vec<(Weak<Inner>, bool)>> = Mutex::new(Vec::new());
static HOOK: Once = Once::new();

/// How long the hook waits for each trace: a panic must not hang on a stuck disk.
const FLUSH_TIMEOUT: Duration = Duration::from_secs(2);

/// Flushes `trace` (or with `dump`, writes its flight recorder) on every later panic, while it
/// lives.
pub(super) fn register(trace: Weak<Inner>, dump: bool) {
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            flush_all();
            previous(info);
        }));
    });
    let mut traces = TRACES.lock().unwrap_or_else(|p| p.into_inner());
    traces.retain(|(t, _)| t.strong_count() > 0);
    traces.push((trace, dump));
}

fn flush_all() {
    // try_lock: a panic raised while this thread holds the list (it cannot, but a hook must never
    // deadlock) skips the flush rather than waiting for itself.
    let live = |list: &[(Weak<Inner>, bool)]| -> Vec<(Arc<Inner>, bool)> {
        list.iter().filter_map(|(t, dump)| Some((t.upgrade()?, *dump))).collect()
    };
    let traces = match TRACES.try_lock() {
        Ok(list) => live(&list),
        Err(std::sync::TryLockError::Poisoned(p)) => live(&p.into_inner()),
        Err(std::sync::TryLockError::WouldBlock) => return,
    };
    let me = std::thread::current().id();
    for (trace, dump) in traces {
        // A trace's own writer thread cannot wait for itself (a panicking user `Write` runs there).
        if trace.shared.writer.get().is_some_and(|w| w.id() == me) {
            continue;
        }
        let _ =
            if dump { trace.dump(Some(FLUSH_TIMEOUT)) } else { trace.flush(Some(FLUSH_TIMEOUT)) };
    }
}
