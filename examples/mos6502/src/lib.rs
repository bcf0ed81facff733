//! A simulator we did not write, traced with JETS: the [`mos6502`] crate (an instruction-level
//! 6502 emulator from crates.io) running Klaus Dormann's 6502 functional test, which that crate
//! ships in its own package (`tests/assets/6502_functional_test.bin`, about 30 M instructions).
//!
//! The instrumentation is what the README teaches a new user, and what the user who reported the
//! capture-control issue wrote: one `Instruction` record per instruction (named by its mnemonic,
//! with its address and opcode), an event when it is decoded and one when it has executed, and
//! an event for every byte the instruction reads or writes on the bus. Memory events come from a
//! wrapper around the crate's [`Memory`], the only place a user can see bus traffic without
//! changing the emulator. Cycles are the emulator's own cycle count.
//!
//! Traced in full, the test writes tens of gigabytes; the point of the example is
//! `JETS_CAPTURE` (a window, a flight recorder, a sample), which the trace reads when it is
//! opened.

use std::path::Path;
use std::time::{Duration, Instant};

use jets::format::Str;
use jets::{Metadata, RecordHandle, Summary, TraceBuilder};
use mos6502::cpu::CPU;
use mos6502::instruction::Nmos6502;
use mos6502::memory::{Bus, Memory};

/// Where the functional test's code starts.
pub const START: u16 = 0x0400;
/// The `jmp *` the functional test ends in when every test passed (for the binary the crate
/// ships; its own test uses the same address).
pub const SUCCESS: u16 = 0x331C;

/// How a run ended.
#[derive(Clone, Debug)]
pub struct Run {
    /// Instructions executed.
    pub instructions: u64,
    /// The emulator's cycles.
    pub cycles: u64,
    /// Host time from the first instruction to the trace closed (or the last instruction).
    pub took: Duration,
    /// Of which closing the trace: what the writer still had to write (a flight recorder's
    /// window), the footer, and the file's close (zero untraced).
    pub closing: Duration,
    /// What the writer wrote (`None` untraced).
    pub summary: Option<Summary>,
}

/// Why a run failed.
#[derive(Debug)]
pub enum Failure {
    /// The test trapped (a `jmp *` or branch to itself) somewhere other than the success address:
    /// the emulator failed one of the test's cases.
    Trapped {
        /// The trap's address.
        pc: u16,
        /// Instructions executed before it.
        instructions: u64,
    },
    /// An opcode the emulator cannot decode.
    Illegal {
        /// Its address.
        pc: u16,
    },
    /// The trace failed.
    Trace(jets::Error),
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Trapped { pc, instructions } => write!(
                f,
                "the functional test trapped at ${pc:04X} after {instructions} instructions \
                 (success is ${SUCCESS:04X})"
            ),
            Failure::Illegal { pc } => write!(f, "illegal opcode at ${pc:04X}"),
            Failure::Trace(e) => write!(f, "tracing failed: {e}"),
        }
    }
}

impl std::error::Error for Failure {}

impl From<jets::Error> for Failure {
    fn from(e: jets::Error) -> Self {
        Failure::Trace(e)
    }
}

/// The crate's memory, with an event per byte read or written by the instruction in flight.
struct TracedBus {
    memory: Memory,
    /// The instruction in flight (`None` untraced, or between instructions).
    insn: Option<RecordHandle>,
    /// Its cycle: the 6502 emulator counts cycles per instruction, not per bus access.
    clk: u64,
    /// The first error an event returned: a `Bus` method cannot return one, so it is kept and
    /// returned by the run.
    error: Option<jets::Error>,
}

impl TracedBus {
    fn access(&mut self, name: &'static str, address: u16, value: u8) {
        if let Some(r) = &self.insn {
            // Both fields known at the call: made without a builder.
            let fields = [("addr", u64::from(address).into()), ("value", u64::from(value).into())];
            if let Err(e) = r.emit_event_fields_at(self.clk, name, fields) {
                self.error.get_or_insert(e);
            }
        }
    }
}

impl Bus for TracedBus {
    fn get_byte(&mut self, address: u16) -> u8 {
        let value = self.memory.get_byte(address);
        self.access("read", address, value);
        value
    }

    fn set_byte(&mut self, address: u16, value: u8) {
        self.memory.set_byte(address, value);
        self.access("write", address, value);
    }
}

/// Runs the functional test in `program` (the 64 KiB image), traced into `trace_path` when given
/// (the trace reads `JETS_CAPTURE`, or uses `builder`'s capture), for at most `limit` instructions
/// when given (then the run stops there and does not check the result).
pub fn run(
    program: &[u8],
    trace_path: Option<&Path>,
    builder: TraceBuilder,
    limit: Option<u64>,
) -> Result<Run, Failure> {
    let mut memory = Memory::new();
    memory.set_bytes(0, program);
    let bus = TracedBus { memory, insn: None, clk: 0, error: None };
    let mut cpu = CPU::new(bus, Nmos6502);
    cpu.registers.program_counter = START;

    let start = Instant::now();
    let trace = match trace_path {
        Some(p) => Some(builder.create(p, Metadata::new())?),
        None => None,
    };
    let core = match &trace {
        Some(t) => Some(
            t.root("mos6502", "Core")
                .description(
                    "NMOS 6502 (the mos6502 crate) running Klaus Dormann's functional test",
                )
                .unit_id(0)
                .begin_at(0)?,
        ),
        None => None,
    };
    // Mnemonics by opcode, made once each: a name is passed by reference and cloned only when
    // its record is written.
    let mut names: Vec<Option<Str>> = vec![None; 256];
    let mut instructions = 0u64;
    let outcome = loop {
        let pc = cpu.registers.program_counter;
        if pc == SUCCESS || limit.is_some_and(|l| instructions >= l) {
            break Ok(());
        }
        let clk = cpu.cycles;
        if let Some(core) = &core {
            cpu.memory.clk = clk;
            let opcode = cpu.memory.memory.get_byte(pc);
            let name = names[usize::from(opcode)].get_or_insert_with(|| mnemonic(opcode));
            // Its fields at once, with no builder; made by a closure, which runs only when
            // capture makes the record.
            let fields = || [("pc", u64::from(pc).into()), ("opcode", u64::from(opcode).into())];
            let insn = core.begin_child_fields_at(clk, &*name, "Instruction", fields)?;
            cpu.memory.insn = Some(insn);
        }
        let Some(decoded) = cpu.fetch_next_and_decode() else {
            break Err(Failure::Illegal { pc });
        };
        if let Some(insn) = &cpu.memory.insn {
            insn.emit_event_at(clk, "decode")?;
        }
        cpu.execute_instruction(decoded);
        instructions += 1;
        if let Some(insn) = cpu.memory.insn.take() {
            let end = cpu.cycles.max(clk + 1);
            insn.emit_event_at(end - 1, "execute")?;
            insn.end_at(end)?;
        }
        if let Some(e) = cpu.memory.error.take() {
            break Err(e.into());
        }
        if cpu.registers.program_counter == pc {
            break Err(Failure::Trapped { pc, instructions });
        }
    };
    let cycles = cpu.cycles;
    if let Some(core) = core {
        core.end_at(cycles)?;
    }
    let close = Instant::now();
    let summary = match trace {
        Some(t) => Some(t.close_at(cycles)?),
        None => None,
    };
    // Both from one reading of the clock: the close is part of the run.
    let end = Instant::now();
    outcome?;
    Ok(Run { instructions, cycles, took: end - start, closing: end - close, summary })
}

/// The mnemonic of `opcode` (as the crate decodes it), or `???`.
fn mnemonic(opcode: u8) -> Str {
    use mos6502::Variant;
    match Nmos6502::decode(opcode) {
        // Interned (at most one text per opcode): a record's name is cloned when its line is
        // made, and a static text clones for free, where a shared one is a reference count the
        // writer thread gives back and an owned one an allocation per instruction.
        Some((instruction, _mode)) => Str::interned(&format!("{instruction:?}")),
        None => Str::Static("???"),
    }
}

/// Opens `trace_path` for [`run`] with the given capture, or with `JETS_CAPTURE` when `None`.
pub fn builder(capture: Option<jets::capture::Capture>) -> TraceBuilder {
    match capture {
        Some(c) => TraceBuilder::new().capture(c),
        None => TraceBuilder::new(),
    }
}
