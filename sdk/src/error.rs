use std::io;
use std::sync::Arc;

/// Everything that can go wrong while writing a trace.
///
/// Errors are values: no call of the SDK panics on bad input or failed I/O.
#[derive(Clone, Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A line's `clk` is earlier than the start of the record it belongs to (or of the parent).
    #[error("clk {clk} is before the start of record {record_id} at clk {start}")]
    ClkBeforeStart {
        /// The cycle given.
        clk: u64,
        /// The record's start cycle.
        start: u64,
        /// The record.
        record_id: u64,
    },
    /// The trace was closed; nothing more can be written to it.
    #[error("the trace is closed")]
    Closed,
    /// An emitting call was made while another one was running on the same thread (from a
    /// global allocator, or a destructor run by the SDK, that emits). Refused: nothing written.
    #[error("an emitting call was made from inside another emitting call on the same thread")]
    Reentrant,
    /// `data` given as JSON text did not parse, or is not an object where one is required.
    #[error("invalid JSON data: {0}")]
    InvalidJson(String),
    /// An argument is not acceptable (the message says which and why).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// Reading or writing failed. The trace stops writing at the first failure; what was written
    /// before it is a valid prefix.
    #[error("I/O error on {target}: {source}")]
    Io {
        /// The file (or "writer") concerned.
        target: String,
        /// The underlying error.
        source: Arc<io::Error>,
    },
}

impl Error {
    pub(crate) fn io(target: impl Into<String>, source: io::Error) -> Self {
        Error::Io { target: target.into(), source: Arc::new(source) }
    }
}
