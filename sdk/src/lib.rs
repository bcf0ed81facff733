//! # JETS SDK
//!
//! Instrumentation for cycle-accurate simulators: emit a [JETS 2.0](mod@format) trace (JSON Lines
//! of header, record, record_end, annotation, event and footer) from any thread of a simulator, at
//! a cost of tens of nanoseconds per line, with the spec's ordering rules enforced by construction.
//!
//! ```
//! use jets::{Trace, Metadata};
//!
//! # fn main() -> Result<(), jets::Error> {
//! let dir = tempfile::tempdir().unwrap();
//! let trace = Trace::create(dir.path().join("run.jets"), Metadata::new().clock_frequency_mhz(1000.0))?;
//! let core = trace.root("core0", "Core").unit_id(0).begin_at(0)?;
//! let add = core.child("add x1, x2, x3", "Instruction").field("pc", 0x1000u64).begin_at(4)?;
//! add.event("Decode").emit_at(5)?;
//! add.end_at(9)?;
//! core.end_at(10)?;
//! let summary = trace.close()?;
//! assert_eq!(summary.records, 2);
//! # Ok(()) }
//! ```
//!
//! Where things live:
//! * [`format`](mod@format): the line types and the JSON encoder (the `jets-format` crate,
//!   re-exported), shared by writer, reader and validator; its closed vocabularies come from
//!   `jets-vocab`.
//! * [`write`](mod@write): [`Trace`], record handles, per-thread lock-free rings and the writer thread.
//! * [`clock`]: [`SimClock`], the simulator's shared cycle counter.
//! * [`layer`] (feature `tracing`): [`JetsLayer`], which turns `tracing` spans into records.
//! * [`record`] (feature `macros`), [`event!`] and [`annotate!`]: one-line instrumentation.
//!
//! Reading, validating and repairing traces is the `jets-read` crate; the host collectors (the
//! `/proc` and perf sampler, eBPF I/O, the clock beacon and cycle ↔ wall-time sync points) are
//! `jets-host`. A simulator links only this crate.

#![deny(clippy::print_stdout)]

pub mod capture;
pub mod clock;
mod error;
mod fork;
#[cfg(feature = "tracing")]
pub mod layer;
mod macros;
pub mod write;

pub use jets_format as format;

pub use clock::SimClock;
pub use error::Error;
pub use write::{
    FieldArray, Metadata, Policy, RecordHandle, Roi, Summary, Trace, TraceBuilder,
    WRITE_BATCH_BYTES,
};

/// True when this build traces: jets-sdk's `enabled` feature is on (the default). Without it
/// every emitting call does nothing and a trace holds its header and footer only; a simulator can
/// say so when it starts.
///
/// ```
/// if !jets::COMPILED_IN {
///     eprintln!("tracing is compiled out of this build");
/// }
/// ```
pub const COMPILED_IN: bool = cfg!(feature = "enabled");

#[cfg(feature = "macros")]
pub use jets_macros::record;
#[cfg(feature = "tracing")]
pub use layer::JetsLayer;
#[doc(hidden)]
pub use macros::__private;

/// For a library that installs signal handlers of its own that end by re-raising the signal
/// (the C library's `jets_install_fatal_signal_flush`); not a stable API.
#[doc(hidden)]
#[cfg(unix)]
pub mod __signals {
    /// Installs the handlers that close every open trace on a signal that ends the process
    /// (WR-SIG-1) now, where the process left the default action, rather than at the first
    /// open: a handler installed after this one and restoring it before re-raising then runs
    /// both.
    pub fn install_ending() {
        crate::write::signals::install_ending();
    }
}

/// For a `fork` wrapper such as the C library's `pthread_atfork` handlers; not a stable API.
/// Opening and closing a trace, and a thread's first record in one, take process-wide locks (the
/// capture counters' registry, the list of the process hooks' traces, the list of the threads'
/// leases on traces): [`hold`](__fork::hold) takes them before the fork and
/// [`release`](__fork::release) gives them back after, in the parent and in the child, so that
/// a child never inherits them held.
#[doc(hidden)]
pub mod __fork {
    /// Before `fork`, on the forking thread.
    pub fn hold() {
        crate::capture::gate::left::hold_for_fork();
        crate::write::hooks::hold_for_fork();
        crate::write::lease::hold_for_fork();
    }
    /// After `fork`, in the parent and in the child, on the forking thread.
    pub fn release() {
        crate::write::lease::release_after_fork();
        crate::write::hooks::release_after_fork();
        crate::capture::gate::left::release_after_fork();
    }
}
