//! The JETS 2.0 format: one model of the six line types shared by every part of the SDK.
//!
//! * [`Line`] and its variants ([`Header`], [`Record`], [`RecordEnd`], [`Annotation`], [`Event`],
//!   [`Footer`]) read with serde and write with the [`json`] encoder, byte for byte the same way.
//! * [`Data`], [`Value`] and [`Str`] carry typed `data` on the write path without allocating.
//! * [`hints`] holds the visualization conventions (colors, swimlanes, status, markers).

#![deny(clippy::print_stdout)]

pub mod hints;
pub mod json;
mod lines;
mod value;

pub use hints::{Color, EventHints, MarkerStyle, RecordHints, Severity, Status};
pub use jets_vocab as vocab;
/// The low-level line encoders the writer fills its batches with (one per line type); the
/// typed [`WriteJson`] impls and the writer are the only callers that should need them.
pub mod encode {
    pub use crate::lines::{
        close_line, write_annotation, write_event, write_record, write_record_end,
    };
}
pub use lines::{
    Annotation, Event, Footer, Header, Line, LineType, Record, RecordEnd, WriteJson, VERSION,
};
pub use value::{check_json, Data, DataExtra, DataRef, Field, Readable, Str, Value};
