//! The cycle-accurate in-order pipeline: IF, ID, EX, MEM, WB.
//!
//! Timing model (one instruction fetched per cycle, predict not-taken):
//! * Operands are forwarded into EX from the instructions in MEM and WB; the register file is
//!   written in the first half of WB and read after it, so no other bypass is needed.
//! * A load followed by an instruction that reads its result stalls that instruction in ID for
//!   one cycle (load-use interlock): IF and ID hold, a bubble enters EX.
//! * Branches and jumps resolve at the end of EX: when taken, the two younger instructions (in ID
//!   and the one fetched that cycle) are squashed and fetch restarts at the target.
//! * A data-cache miss keeps MEM busy for the refill; MEM and everything before it hold, bubbles
//!   enter WB.
//! * `ecall` halts when it retires; younger instructions in flight are squashed.
//!
//! Instruction fetch reads an ideal instruction memory (no I-cache is modelled).

use jets::format::{Color, MarkerStyle, Severity, Status, Str};
use jets::{RecordHandle, SimClock, Trace};

use super::cache::{Access, Cache, CacheConfig};
use super::isa::{Class, Insn};
use super::{Machine, SimError, Stats};

/// The stages, in pipeline order: unit records and Kanata stage names use these.
pub const STAGES: [&str; 5] = ["IF", "ID", "EX", "MEM", "WB"];
const IF: usize = 0;
const ID: usize = 1;
const EX: usize = 2;
const MEM: usize = 3;
const WB: usize = 4;

/// The name of an instruction fetched from outside the program.
const OUTSIDE: Str = Str::Static("(outside the program)");

/// Gantt lanes for instructions: at most five are in flight, so five lanes never overlap.
const LANES: u64 = 5;

const STAGE_COLORS: [u32; 5] = [0x4e79a7, 0x76b7b2, 0xf28e2b, 0x59a14f, 0xedc948];
const STALL_COLOR: Color = Color::rgb(0xe15759);

fn class_color(class: Class) -> Color {
    Color::rgb(match class {
        Class::Alu => 0x4e79a7,
        Class::Load => 0x59a14f,
        Class::Store => 0xf28e2b,
        Class::Control => 0xaf7aa1,
        Class::System => 0xbab0ac,
    })
}

/// An instruction in flight.
// Aligned to 32 bytes, so that its size is a multiple of 32: the latches move a slot every stage
// (`memcpy`), and a copy of a size that is not lands its 32-byte loads across the stores of the
// copy before, which the CPU cannot forward (a stall). Unaligned, the untraced run took 30% longer
// or not depending on the size of `RecordHandle`, which made a poor yardstick for `jets bench`.
#[repr(align(32))]
struct Slot {
    pc: u32,
    insn: Insn,
    record: Option<RecordHandle>,
    /// EX has computed `result` (and `addr`/`store_value` for memory operations).
    executed: bool,
    result: u32,
    addr: u32,
    store_value: u32,
    /// Where EX took each source operand from, when forwarded (`"MEM"` or `"WB"`).
    forwarded: [Option<&'static str>; 2],
    /// The target of a taken branch or jump.
    taken: Option<u32>,
    /// The cycle MEM completes, set when the instruction enters MEM.
    mem_ready: Option<u64>,
    /// The last stall episode reported on this instruction (one event per episode).
    stall_reported: u64,
}

/// The records the pipeline writes into: the core, one record per stage unit, the data cache.
struct Tracer {
    core: RecordHandle,
    units: Vec<RecordHandle>,
    dcache: RecordHandle,
    /// Each program word's disassembly, the name of its instruction records: interned
    /// (`Str::interned`), so that a record's name is a static text, with no reference count for
    /// the simulator's and the writer's threads to share.
    names: Vec<Str>,
}

/// A 5-stage pipeline running one program.
pub struct Pipeline {
    machine: Machine,
    cache: Cache,
    stats: Stats,
    cycle: u64,
    pc: u32,
    seq: u64,
    if_id: Option<Slot>,
    id_ex: Option<Slot>,
    ex_mem: Option<Slot>,
    mem_wb: Option<Slot>,
    halted: bool,
    /// Numbers stall episodes, so a held instruction reports each once.
    episode: u64,
    tracer: Option<Tracer>,
    clock: Option<SimClock>,
}

/// The data cache's refill: a record on the cache unit from the miss to the data's arrival.
#[jets::record(trace = dcache, name = "refill", record_type = "Refill",
    description = "a data-cache line refilled from memory", clk = now, end_clk = now + penalty,
    skip(dcache, now), display_label = "refill", color = "#e15759", unit_id = 6, status = "stalled")]
fn refill(dcache: &RecordHandle, now: u64, penalty: u64, addr: u32, set: u32) -> u64 {
    now + penalty
}

impl Pipeline {
    /// A pipeline about to fetch from address 0, without tracing.
    pub fn new(machine: Machine, cache: CacheConfig) -> Pipeline {
        Pipeline {
            machine,
            cache: Cache::new(cache),
            stats: Stats::default(),
            cycle: 0,
            pc: 0,
            seq: 0,
            if_id: None,
            id_ex: None,
            ex_mem: None,
            mem_wb: None,
            halted: false,
            episode: 0,
            tracer: None,
            clock: None,
        }
    }

    /// Writes the run into `trace`: a `Core` root record with one `PipelineStage` record per stage
    /// and a `Cache` record, an `Instruction` record per fetched instruction with an event per
    /// stage, and stalls, misses and squashes as events and records. Advances the trace's clock.
    pub fn traced(mut self, trace: &Trace, name: &str) -> Result<Pipeline, SimError> {
        let core = trace
            .root(name.to_owned(), "Core")
            .description("in-order 5-stage RV32I pipeline, forwarding, load-use interlock")
            .unit_id(0)
            .display_label(name.to_owned())
            .color(Color::rgb(0x79706e))
            .begin_at(self.cycle)?;
        let mut units = Vec::with_capacity(STAGES.len());
        for (i, stage) in STAGES.iter().enumerate() {
            let unit = core
                .child(*stage, "PipelineStage")
                .unit_id(i as u64 + 1)
                .thread_id(0)
                .display_label(*stage)
                .color(Color::rgb(STAGE_COLORS[i]))
                .status(Status::Running)
                .begin_at(self.cycle)?;
            units.push(unit);
        }
        let c = self.cache.config();
        let dcache = core
            .child("dcache", "Cache")
            .description("direct-mapped, write-through, write-allocate data cache")
            .unit_id(6)
            .thread_id(0)
            .display_label("D$")
            .color(Color::rgb(0x9c755f))
            .status(Status::Running)
            .field("lines", u64::from(c.lines))
            .field("line_bytes", u64::from(c.line_bytes))
            .field("miss_penalty", c.miss_penalty)
            .begin_at(self.cycle)?;
        let names = self
            .machine
            .program
            .iter()
            .map(|w| Str::interned(&Insn::decode(*w).to_string()))
            .collect();
        self.clock = Some(trace.clock().clone());
        self.tracer = Some(Tracer { core, units, dcache, names });
        Ok(self)
    }

    /// Runs until `ecall` retires, or fails after `max_cycles`.
    pub fn run(&mut self, max_cycles: u64) -> Result<(), SimError> {
        while !self.halted {
            if self.cycle >= max_cycles {
                return Err(SimError::CycleLimit(max_cycles));
            }
            self.step()?;
        }
        Ok(())
    }

    /// Counters so far.
    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// The architectural state.
    pub fn machine(&self) -> &Machine {
        &self.machine
    }

    /// Ends the unit and core records at the last cycle and writes the counters as annotations.
    pub fn finish(mut self) -> Result<(Machine, Stats), SimError> {
        self.stats.dcache_hits = self.cache.hits;
        self.stats.dcache_misses = self.cache.misses;
        if let Some(t) = self.tracer.take() {
            let end = self.cycle;
            let s = &self.stats;
            jets::annotate!(
                t.dcache,
                "DCacheStats",
                hits = s.dcache_hits,
                misses = s.dcache_misses
            )?;
            t.dcache.end_at(end)?;
            for unit in t.units {
                unit.end_at(end)?;
            }
            jets::annotate!(
                t.core,
                "PipelineStats",
                description = "counters at the end of the run",
                cycles = s.cycles,
                retired = s.retired,
                squashed = s.squashed,
                load_use_stalls = s.load_use_stalls,
                mem_stall_cycles = s.mem_stall_cycles,
                taken_branches = s.taken_branches
            )?;
            t.core.end_at(end)?;
        }
        Ok((self.machine, self.stats))
    }

    /// One clock cycle.
    fn step(&mut self) -> Result<(), SimError> {
        let c = self.cycle;
        if let Some(clock) = &self.clock {
            clock.set(c);
        }
        // WB: the register file is written before anything reads it this cycle.
        let wb_rd = match self.mem_wb.take() {
            Some(s) => {
                if let Some(rd) = s.insn.rd() {
                    self.machine.regs[rd as usize] = s.result;
                }
                if let Insn::Illegal(word) = s.insn {
                    return Err(SimError::Illegal { pc: s.pc, word });
                }
                let rd = s.insn.rd();
                let halt = s.insn == Insn::Ecall;
                self.retire(s, c)?;
                if halt {
                    return self.halt(c);
                }
                rd
            }
            None => None,
        };

        // MEM: a miss holds this stage and everything before it.
        if let Some(mut s) = self.ex_mem.take() {
            if s.mem_ready.is_none() {
                s.mem_ready = Some(self.memory_access(&mut s, c)?);
                self.episode += 1;
            }
            let busy = s.mem_ready.is_some_and(|r| r > c);
            self.ex_mem = Some(s);
            if busy {
                self.stats.mem_stall_cycles += 1;
                for slot in [self.id_ex.as_mut(), self.if_id.as_mut()].into_iter().flatten() {
                    report_stall(slot, self.episode, c, "dcache-miss", None)?;
                }
                self.cycle += 1;
                self.stats.cycles = self.cycle;
                return Ok(());
            }
        }

        // EX: computes once, in the cycle the instruction leaves EX.
        let mut redirect = None;
        if let Some(mut s) = self.id_ex.take() {
            if !s.executed {
                redirect = self.execute(&mut s, wb_rd)?;
            }
            self.id_ex = Some(s);
        }

        // ID: the load-use interlock.
        let load_use = match (&self.id_ex, &self.if_id) {
            (Some(ex), Some(id)) => match ex.insn {
                Insn::Lw { rd, .. } if rd != 0 => id.insn.sources().contains(&Some(rd)),
                _ => false,
            },
            _ => false,
        };

        // End of cycle: latch.
        let next = c + 1;
        self.mem_wb = self.ex_mem.take();
        if let Some(s) = &self.mem_wb {
            stage_event(s, WB, next)?;
        }
        self.ex_mem = self.id_ex.take();
        if let Some(s) = &self.ex_mem {
            stage_event(s, MEM, next)?;
        }
        if let Some(target) = redirect {
            // The instruction fetched this cycle is on the wrong path too.
            let wrong = self.fetch(c)?;
            for s in [self.if_id.take(), Some(wrong)].into_iter().flatten() {
                self.squash(s, next, "branch")?;
            }
            self.pc = target;
        } else if load_use {
            self.stats.load_use_stalls += 1;
            if let Some(s) = self.if_id.as_mut() {
                let reg = match self.ex_mem.as_ref().map(|s| s.insn) {
                    Some(Insn::Lw { rd, .. }) => Some(rd),
                    _ => None,
                };
                self.episode += 1;
                report_stall(s, self.episode, c, "load-use", reg)?;
            }
            if let Some(t) = &self.tracer {
                let stall = t.units[ID]
                    .child_at(c, "load-use", "Stall")
                    .description("ID holds an instruction that needs a load's result")
                    .status(Status::Stalled)
                    .color(STALL_COLOR)
                    .display_label("stall")
                    .thread_id(1)
                    .begin()?;
                stall.end_at(next)?;
            }
        } else {
            self.id_ex = self.if_id.take();
            if let Some(s) = &self.id_ex {
                stage_event(s, EX, next)?;
            }
            let fetched = self.fetch(c)?;
            stage_event(&fetched, ID, next)?;
            self.if_id = Some(fetched);
        }
        self.cycle = next;
        self.stats.cycles = next;
        Ok(())
    }

    /// Fetches the instruction at `pc` and advances `pc`; out-of-range words are illegal.
    fn fetch(&mut self, c: u64) -> Result<Slot, SimError> {
        let pc = self.pc;
        let index = (pc % 4 == 0).then_some(pc as usize / 4);
        let word = index.and_then(|i| self.machine.program.get(i).copied()).unwrap_or(0);
        let insn = Insn::decode(word);
        self.pc = pc.wrapping_add(4);
        let seq = self.seq;
        self.seq += 1;
        self.stats.fetched += 1;
        let record = match &self.tracer {
            Some(t) => {
                // By reference: cloned only when the record is written.
                let name = index.and_then(|i| t.names.get(i)).unwrap_or(&OUTSIDE);
                // The fields at once, from a closure: worked out only when the record is made.
                let r = t.core.begin_child_fields_at(c, name, "Instruction", || {
                    [
                        ("pc", u64::from(pc).into()),
                        ("seq", seq.into()),
                        ("display_label", insn.mnemonic().into()),
                        ("unit_id", 0u64.into()),
                        ("thread_id", (seq % LANES).into()),
                        ("color", class_color(insn.class()).into()),
                    ]
                })?;
                // An event with no data: by name, with no builder (as `stage_event` does).
                r.emit_event_at(c, STAGES[IF])?;
                Some(r)
            }
            None => None,
        };
        Ok(Slot {
            pc,
            insn,
            record,
            executed: false,
            result: 0,
            addr: 0,
            store_value: 0,
            forwarded: [None; 2],
            taken: None,
            mem_ready: None,
            stall_reported: 0,
        })
    }

    /// Reads a source register as EX sees it: forwarded from MEM, else the register file (which
    /// WB wrote earlier this cycle).
    fn operand(&mut self, reg: u8, wb_rd: Option<u8>) -> (u32, Option<&'static str>) {
        if reg == 0 {
            return (0, None);
        }
        if let Some(m) = &self.ex_mem {
            if m.insn.rd() == Some(reg) {
                debug_assert!(m.insn.class() != Class::Load || m.mem_ready.is_some());
                self.stats.forwards += 1;
                return (m.result, Some("MEM"));
            }
        }
        if wb_rd == Some(reg) {
            self.stats.forwards += 1;
            return (self.machine.regs[reg as usize], Some("WB"));
        }
        (self.machine.regs[reg as usize], None)
    }

    /// Executes `s`; returns the redirect target of a taken branch or jump.
    fn execute(&mut self, s: &mut Slot, wb_rd: Option<u8>) -> Result<Option<u32>, SimError> {
        s.executed = true;
        let [r1, r2] = s.insn.sources();
        let (a, fa) = r1.map_or((0, None), |r| self.operand(r, wb_rd));
        let (b, fb) = r2.map_or((0, None), |r| self.operand(r, wb_rd));
        s.forwarded = [fa, fb];
        let pc = s.pc;
        let mut target = None;
        match s.insn {
            Insn::Lui { imm, .. } => s.result = imm as u32,
            Insn::Auipc { imm, .. } => s.result = pc.wrapping_add(imm as u32),
            Insn::Jal { imm, .. } => {
                s.result = pc.wrapping_add(4);
                target = Some(pc.wrapping_add(imm as u32));
            }
            Insn::Jalr { imm, .. } => {
                s.result = pc.wrapping_add(4);
                target = Some(a.wrapping_add(imm as u32) & !1);
            }
            Insn::Branch { cond, imm, .. } => {
                self.stats.branches += 1;
                if cond.holds(a, b) {
                    target = Some(pc.wrapping_add(imm as u32));
                }
            }
            Insn::Lw { imm, .. } => s.addr = a.wrapping_add(imm as u32),
            Insn::Sw { imm, .. } => {
                s.addr = a.wrapping_add(imm as u32);
                s.store_value = b;
            }
            Insn::OpImm { op, imm, .. } => s.result = op.apply(a, imm as u32),
            Insn::Op { op, .. } => s.result = op.apply(a, b),
            Insn::Ecall | Insn::Illegal(_) => {}
        }
        if target.is_some() {
            self.stats.taken_branches += 1;
        }
        s.taken = target;
        Ok(target)
    }

    /// Performs a load or store; returns the cycle MEM completes.
    fn memory_access(&mut self, s: &mut Slot, c: u64) -> Result<u64, SimError> {
        if !matches!(s.insn.class(), Class::Load | Class::Store) {
            return Ok(c);
        }
        let word = self
            .machine
            .word_index(s.addr)
            .ok_or(SimError::MemoryFault { pc: s.pc, addr: s.addr })?;
        match s.insn {
            Insn::Lw { .. } => s.result = self.machine.data[word],
            _ => self.machine.data[word] = s.store_value,
        }
        match self.cache.access(s.addr) {
            Access::Hit => Ok(c),
            Access::Miss { set, evicted } => {
                let penalty = self.cache.config().miss_penalty;
                let Some(t) = &self.tracer else { return Ok(c + penalty) };
                if let Some(rec) = &s.record {
                    let e = rec
                        .event_at(c, "DCacheMiss")
                        .field("addr", u64::from(s.addr))
                        .field("set", u64::from(set))
                        .field("penalty", penalty)
                        .severity(Severity::Warning)
                        .icon("cache_miss")
                        .marker_style(MarkerStyle::Diamond)
                        .color(STALL_COLOR);
                    match evicted {
                        Some(v) => e.field("evicted", u64::from(v)).emit()?,
                        None => e.emit()?,
                    }
                }
                if penalty > 0 {
                    let stall = t.units[MEM]
                        .child_at(c, "dcache-miss", "Stall")
                        .description("MEM waits for the data cache's refill")
                        .status(Status::Stalled)
                        .color(STALL_COLOR)
                        .display_label("miss")
                        .thread_id(1)
                        .begin()?;
                    stall.end_at(c + penalty)?;
                }
                Ok(refill(&t.dcache, c, penalty, s.addr, set))
            }
        }
    }

    fn retire(&mut self, s: Slot, c: u64) -> Result<(), SimError> {
        self.stats.retired += 1;
        if let Some(r) = s.record {
            r.end_at(c + 1)?;
        }
        Ok(())
    }

    fn squash(&mut self, s: Slot, at: u64, cause: &'static str) -> Result<(), SimError> {
        self.stats.squashed += 1;
        if let Some(r) = s.record {
            let at = at.max(r.start_clk());
            r.event_at(at, "Squash")
                .with(|e| {
                    e.field("cause", cause)
                        .severity(Severity::Error)
                        .icon("flush")
                        .marker_style(MarkerStyle::Line)
                })
                .emit()?;
            // The status on the record_end makes Konata show a flush instead of a retire.
            r.end_with_status_at(at, Status::Flushed)?;
        }
        Ok(())
    }

    /// `ecall` retired at `c`: squash everything younger.
    fn halt(&mut self, c: u64) -> Result<(), SimError> {
        for s in [self.ex_mem.take(), self.id_ex.take(), self.if_id.take()].into_iter().flatten() {
            self.squash(s, c + 1, "halt")?;
        }
        self.halted = true;
        self.cycle = c + 1;
        self.stats.cycles = self.cycle;
        Ok(())
    }
}

/// The event marking `s`'s entry into `stage` at `clk`. What EX did (the address, forwarded
/// operands, a taken branch's target) rides on the MEM event as fields, so that every event of an
/// instruction is a pipeline stage (Kanata draws each event as a stage).
fn stage_event(s: &Slot, stage: usize, clk: u64) -> Result<(), SimError> {
    let Some(r) = &s.record else { return Ok(()) };
    if stage != MEM {
        r.emit_event_at(clk, STAGES[stage])?;
        return Ok(());
    }
    r.event_at(clk, STAGES[stage])
        .with(|mut e| {
            if matches!(s.insn.class(), Class::Load | Class::Store) {
                e = e.field("addr", u64::from(s.addr));
            }
            if let Some(from) = s.forwarded[0] {
                e = e.field("rs1_from", from);
            }
            if let Some(from) = s.forwarded[1] {
                e = e.field("rs2_from", from);
            }
            if let Some(target) = s.taken {
                e = e.field("taken_to", u64::from(target));
            }
            e
        })
        .emit()?;
    Ok(())
}

/// A `Stall` event on a held instruction, once per stall episode.
fn report_stall(
    s: &mut Slot,
    episode: u64,
    c: u64,
    cause: &'static str,
    reg: Option<u8>,
) -> Result<(), SimError> {
    if s.stall_reported == episode {
        return Ok(());
    }
    s.stall_reported = episode;
    if let Some(r) = &s.record {
        let e = r
            .event_at(c, "Stall")
            .field("cause", cause)
            .severity(Severity::Warning)
            .icon("stall")
            .marker_style(MarkerStyle::Box);
        match reg {
            Some(reg) => e.field("reg", u64::from(reg)).emit()?,
            None => e.emit()?,
        }
    }
    Ok(())
}
