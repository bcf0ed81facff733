//! Example 1: a cycle-accurate in-order 5-stage RV32I pipeline, instrumented with JETS.
//!
//! * [`isa`]: the RV32I subset (real encodings), [`asm`]: a small assembler with labels,
//!   [`programs`]: bubble sort and Fibonacci with their result checks.
//! * [`cache`]: the direct-mapped data cache; [`core`]: the pipeline (forwarding, load-use
//!   interlock, branch squashes, cache-miss stalls).
//! * [`traced`]: one call that runs a program end to end into a trace: the native API for the
//!   per-instruction lines, `#[jets::record]` + [`jets::JetsLayer`] for the run's phases, and the
//!   host collector for sync points.
//!
//! ```
//! use jets_examples::pipeline::{self, programs};
//! let program = programs::fibonacci(10).unwrap();
//! let (machine, stats) = pipeline::run(&program, Default::default(), 100_000).unwrap();
//! assert_eq!(program.verify(&machine).unwrap(), "x10 = 55");
//! assert!(stats.cycles > stats.retired);
//! ```

pub mod asm;
pub mod cache;
pub mod core;
pub mod isa;
pub mod programs;
pub mod traced;

pub use cache::CacheConfig;
pub use core::Pipeline;
pub use programs::Program;

/// The first byte address of data memory (instructions live from address 0 in their own memory).
pub const DATA_BASE: u32 = 0x1000;
/// Data memory size in words (16 KiB).
pub const DATA_WORDS: usize = 4096;

/// Architectural state: registers, instruction memory, data memory.
#[derive(Clone, Debug)]
pub struct Machine {
    /// `x0`..`x31` (`x0` stays 0).
    pub regs: [u32; 32],
    /// Instruction words from address 0.
    pub program: Vec<u32>,
    /// Data words from [`DATA_BASE`].
    pub data: Vec<u32>,
}

impl Machine {
    /// Loads a program and its initial data.
    pub fn load(program: &Program) -> Result<Machine, SimError> {
        if program.data.len() > DATA_WORDS {
            return Err(SimError::DataTooLarge { words: program.data.len() });
        }
        let mut data = program.data.clone();
        data.resize(DATA_WORDS, 0);
        Ok(Machine { regs: [0; 32], program: program.code.clone(), data })
    }

    /// The data word at byte address `addr`, if it is in data memory and word-aligned.
    pub fn word_index(&self, addr: u32) -> Option<usize> {
        let offset = addr.checked_sub(DATA_BASE)?;
        (offset % 4 == 0).then_some(offset as usize / 4).filter(|i| *i < self.data.len())
    }
}

/// Counters of one run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Cycles simulated.
    pub cycles: u64,
    /// Instructions fetched (including squashed ones).
    pub fetched: u64,
    /// Instructions retired.
    pub retired: u64,
    /// Instructions squashed (wrong path after a taken branch or jump, or younger than `ecall`).
    pub squashed: u64,
    /// Cycles an instruction was held in ID by the load-use interlock.
    pub load_use_stalls: u64,
    /// Cycles MEM was held by a cache refill.
    pub mem_stall_cycles: u64,
    /// Conditional branches executed.
    pub branches: u64,
    /// Taken branches and jumps (each squashes two instructions).
    pub taken_branches: u64,
    /// Operands forwarded from MEM or WB.
    pub forwards: u64,
    /// Data cache hits.
    pub dcache_hits: u64,
    /// Data cache misses.
    pub dcache_misses: u64,
}

/// Why a simulation stopped early.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// An instruction outside the subset retired.
    #[error("illegal instruction {word:#010x} retired at pc {pc:#x}")]
    Illegal {
        /// Its address.
        pc: u32,
        /// Its word.
        word: u32,
    },
    /// A load or store outside data memory, or not word-aligned.
    #[error(
        "memory fault at pc {pc:#x}: address {addr:#x} is outside data memory or not word-aligned"
    )]
    MemoryFault {
        /// The instruction's address.
        pc: u32,
        /// The data address.
        addr: u32,
    },
    /// The program did not halt in time.
    #[error("the program did not reach ecall within {0} cycles")]
    CycleLimit(u64),
    /// The initial data does not fit.
    #[error("initial data of {words} words does not fit the {DATA_WORDS}-word data memory")]
    DataTooLarge {
        /// Its size.
        words: usize,
    },
    /// Writing the trace failed.
    #[error("writing the trace: {0}")]
    Trace(#[from] jets::Error),
}

/// Runs `program` without tracing; returns the final state and the counters.
pub fn run(
    program: &Program,
    cache: CacheConfig,
    max_cycles: u64,
) -> Result<(Machine, Stats), SimError> {
    let mut p = Pipeline::new(Machine::load(program)?, cache);
    p.run(max_cycles)?;
    p.finish()
}

#[cfg(test)]
mod tests;
