//! # libjets: the JETS trace writer for C and C++
//!
//! The C API (`include/jets.h`, generated from this crate by cbindgen) over the Rust writer in
//! [`jets::write`]. C code names records by `jets_id` numbers instead of holding Rust handles, so
//! every trace keeps a lock-free table from id to [`jets::RecordHandle`] (generation-tagged slots,
//! `records.rs`): an id that was never handed out or whose record has ended is detected and
//! refused, and a record ends once, after every line accepted for it.
//!
//! Rules every exported function keeps:
//! * it never unwinds into C: a panic is caught and reported as `JETS_ERR_INTERNAL`;
//! * bad input (NULL, invalid UTF-8, malformed JSON, unknown or ended ids, a `clk` before the
//!   record's start) returns a named negative code and writes nothing;
//! * the reason of the last failure on the calling thread is in `jets_last_error()`.
//! * it is not a POSIX thread cancellation point: a thread cancelled during it finishes it
//!   (`cancel.rs`).
//!
//! `include/jets.hpp` is a hand-written C++17 RAII wrapper over the same functions.

#![allow(non_camel_case_types)]

pub mod api;
mod attrs;
mod cancel;
pub mod capture;
pub mod clocks;
pub mod codes;
mod cstr;
pub mod domains;
mod failure;
pub mod host;
pub mod intern;
pub mod nesting;
pub mod process;
mod records;
pub mod types;

pub use api::*;
pub use capture::*;
pub use clocks::*;
pub use codes::*;
pub use domains::*;
pub use host::*;
pub use intern::jets_intern;
pub use nesting::*;
pub use process::jets_install_fatal_signal_flush;
pub use types::*;
