//! Foreign formats, one module each: what `jets convert` writes and `jets import` reads.

pub mod chrome;
pub mod denet;
pub mod dftracer;
pub mod iotracer;
pub mod kanata;
pub mod map;
#[cfg(feature = "parquet")]
pub mod parquet;
pub mod perfetto;
pub mod timeline;
