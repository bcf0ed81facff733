//! Example simulators instrumented with the JETS SDK, to run (`jets demo`) and to copy from.
//!
//! * [`pipeline`]: a cycle-accurate in-order 5-stage RV32I pipeline with forwarding, a load-use
//!   interlock, branch squashes and a small data cache, running real machine code.
//! * [`multicore`]: cores on their own threads sharing a memory system thread; memory requests
//!   are records created on the memory thread as children of the cores' instruction records.
//! * [`threads`]: many threads emitting into one trace, to see the writer keep up with them.
//!
//! The C and C++ examples (a systolic array and a DMA engine) live in `examples/c/`.

pub mod multicore;
pub mod pipeline;
pub mod threads;
