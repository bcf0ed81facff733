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
//! * [`format`](mod@format): the line types and the JSON encoder, shared by writer, reader and
//!   validator.
//! * [`read`]: a streaming line reader over a memory-mapped file or any `Read` (gz, zst, br).
//! * [`validate`]: the rules (stable codes), the parallel validator and `repair`.
//! * [`write`](mod@write): [`Trace`], record handles, per-thread lock-free rings and the writer thread.
//! * [`clock`]: [`SimClock`], the simulator's shared cycle counter.
//! * [`sync`]: host-time sync points (`HostSync` events) and the cycle ↔ time map.
//! * `host` (feature `host`, Linux): the host sampler thread, `/proc` and perf collectors, the
//!   clock beacon and denet's data model.
//! * [`layer`] (feature `tracing`): [`JetsLayer`], which turns `tracing` spans into records.
//! * [`record`] (feature `macros`), [`event!`] and [`annotate!`]: one-line instrumentation.

pub mod clock;
mod error;
pub mod format;
#[cfg(all(feature = "host", target_os = "linux"))]
pub mod host;
#[cfg(feature = "tracing")]
pub mod layer;
mod macros;
pub mod read;
pub mod sync;
pub mod validate;
pub mod write;

pub use clock::SimClock;
pub use error::Error;
pub use write::{Metadata, Policy, RecordHandle, Summary, Trace, TraceBuilder};

#[cfg(feature = "macros")]
pub use jets_macros::record;
#[cfg(feature = "tracing")]
pub use layer::JetsLayer;
#[doc(hidden)]
pub use macros::__private;
