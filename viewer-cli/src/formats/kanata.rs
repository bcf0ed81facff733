//! JETS → Kanata (version 0004), the log format of the Konata pipeline viewer.
//!
//! Records of one `record_type` (default `Instruction`) become instructions: `I` when they begin,
//! `L 0` (display_label, else name) and `L 1` (description and data), `R` when they end (type 1,
//! flush, when `data.status` or the `record_end`'s `status` says the instruction was flushed or
//! squashed; CV-KANATA-1). Their events become stages: each event starts a stage on lane 0 that
//! lasts until the next one or the record's end; a stall (CV-KANATA-2) is a stage on lane 1
//! instead. Their child records become stages (`S` at begin, `E` at end; lane 1 when the child's
//! status is `stalled`).
//!
//! What Konata's own parser makes of the log decides how it is written (spec/convert-decisions.md):
//! Konata ignores `C=` and counts cycles from 0 with `C`, so the log starts with `C=\t0` and
//! advances to each trace cycle, and ends with a `C` to the end of the trace (Konata's cycle
//! count); its statistics report the last instruction id and the last retire id as the fetched
//! and committed counts, so both count from 1, and retire ids number retired instructions only
//! (CV-KANATA-3); the thread id comes from the hardware thread or core the instruction sits under
//! (CV-KANATA-4); Konata draws no stage that starts and ends in the same cycle, so such stages are
//! folded into labels or lengthened to one cycle (CV-KANATA-5, [`fold_cycle`]).
//!
//! Kanata wants one global time order (`C` advances the cycle). Commands are produced at the cycle
//! of the line that causes them and pass through a bounded reorder buffer; a trace whose lines are
//! out of time order by more than the buffer holds is refused with an error, never written wrong.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet};
use std::io::Write;
use std::path::Path;

use anyhow::{bail, Context, Result};
use jets::format::hints::{EVENT_HINT_KEYS, RECORD_HINT_KEYS};
use jets::format::{Line, Severity, Status};
use serde_json::{Map, Value};

use super::timeline::read_trace;
use crate::convert::Output;

/// Commands the reorder buffer holds before it must write the earliest.
pub const REORDER_WINDOW: usize = 1 << 18;

/// One Kanata command for one instruction (the instruction is kept beside it).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    /// `I`: the instruction begins on a thread.
    Insert {
        /// The simulator's id of the instruction (the JETS record id).
        sim: u64,
        /// Kanata thread id.
        thread: u64,
    },
    /// `L`: a label of type 0 (name), 1 (instruction tooltip) or 2 (current stage's tooltip).
    Label {
        /// Label type.
        kind: u8,
        /// Its text (no tab or line break).
        text: String,
    },
    /// `S`: a stage starts.
    Start {
        /// Lane (0 stages, 1 stalls).
        lane: u8,
        /// Stage name.
        stage: String,
        /// What to show in a label if the stage lasts no cycle (name and details).
        note: String,
    },
    /// `E`: a stage ends.
    End {
        /// Lane.
        lane: u8,
        /// Stage name.
        stage: String,
    },
    /// `R`: the instruction retires (or is flushed).
    Retire {
        /// Flushed rather than retired.
        flush: bool,
    },
}

#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Cmd {
    clk: u64,
    seq: u64,
    record: u64,
    kind: Kind,
    /// The input line that made it (0: made at the end of the trace, for what was left open).
    line: u64,
}

/// Where a command came from, for an error about it.
fn origin(line: u64) -> String {
    match line {
        0 => "the end of the trace".to_owned(),
        n => format!("line {n}"),
    }
}

/// An event stage still open: name and note.
type OpenStage = (String, String);

#[derive(Default)]
struct Inst {
    stage: Option<OpenStage>,
    stall: Option<OpenStage>,
}

/// Konata draws a stage from the cycle of its `S` to the cycle it ends, and nothing when the two
/// are equal. Given one instruction's commands of one cycle, in order, and whether it started a
/// stage in an earlier cycle, returns the commands to write in this cycle and those to write one
/// cycle later (CV-KANATA-5):
///
/// * the last lane-0 stage before an `R` in the same cycle is lengthened to one cycle: its `E`,
///   and everything after it (the `R` included), move to the next cycle;
/// * any other stage or stall that would last no cycle is not written as a stage: its note
///   becomes a type-2 label on the next stage started in this cycle, or else on the
///   instruction's current stage (type 1, the instruction's tooltip, if it has none).
pub fn fold_cycle(cmds: Vec<Kind>, staged_before: bool) -> (Vec<Kind>, Vec<Kind>) {
    let n = cmds.len();
    // partner[i]: for a Start, its End in this cycle; for an End, its Start in this cycle.
    let mut partner: Vec<Option<usize>> = vec![None; n];
    let mut open: Vec<usize> = Vec::new();
    for (i, c) in cmds.iter().enumerate() {
        match c {
            Kind::Start { .. } => open.push(i),
            Kind::End { lane, stage } => {
                let hit = open.iter().rposition(|&s| {
                    matches!(&cmds[s], Kind::Start { lane: l, stage: st, .. } if l == lane && st == stage)
                });
                if let Some(p) = hit {
                    let s = open.remove(p);
                    partner[s] = Some(i);
                    partner[i] = Some(s);
                }
            }
            _ => {}
        }
    }
    let zero = |i: usize| matches!(cmds[i], Kind::Start { .. }) && partner[i].is_some();
    let retire = cmds.iter().position(|c| matches!(c, Kind::Retire { .. }));
    let lengthened = retire.and_then(|r| {
        (0..r).rev().find(|&i| zero(i) && matches!(cmds[i], Kind::Start { lane: 0, .. }))
    });
    let split = lengthened.and_then(|i| partner[i]).unwrap_or(usize::MAX);
    let folded: Vec<bool> = (0..n)
        .map(|i| match cmds[i] {
            Kind::Start { .. } => zero(i) && Some(i) != lengthened,
            Kind::End { .. } => partner[i].is_some_and(|s| Some(s) != lengthened),
            _ => false,
        })
        .collect();

    let (mut now, mut later) = (Vec::new(), Vec::new());
    let mut notes: Vec<String> = Vec::new();
    let mut staged = staged_before;
    for (i, c) in cmds.into_iter().enumerate() {
        let out = if i >= split { &mut later } else { &mut now };
        if folded[i] {
            if let Kind::Start { note, .. } = c {
                notes.push(note);
            }
            continue;
        }
        match c {
            Kind::Start { .. } => {
                out.push(c);
                staged = true;
                out.extend(notes.drain(..).map(|text| Kind::Label { kind: 2, text }));
            }
            Kind::Retire { .. } => {
                let kind = if staged { 2 } else { 1 };
                out.extend(notes.drain(..).map(|text| Kind::Label { kind, text }));
                out.push(c);
            }
            _ => out.push(c),
        }
    }
    if !notes.is_empty() {
        let kind = if staged { 2 } else { 1 };
        let out = if later.is_empty() { &mut now } else { &mut later };
        out.extend(notes.into_iter().map(|text| Kind::Label { kind, text }));
    }
    (now, later)
}

/// Streams Kanata commands in time order.
struct Emitter<W: Write> {
    out: W,
    heap: BinaryHeap<Reverse<Cmd>>,
    seq: u64,
    /// The cycle of the commands in `batch`.
    batch_clk: Option<u64>,
    batch: Vec<(u64, Kind)>,
    /// The cycle the written `C` commands have reached.
    written: u64,
    kanata_ids: HashMap<u64, u64>,
    /// Instructions that have written an `S` (a type-2 label needs one).
    staged: HashSet<u64>,
    next_id: u64,
    next_retire: u64,
    /// The input line being converted (0 once the input is read), given to its commands.
    line: u64,
}

impl<W: Write> Emitter<W> {
    fn new(out: W) -> Self {
        Emitter {
            out,
            heap: BinaryHeap::new(),
            seq: 0,
            batch_clk: None,
            batch: Vec::new(),
            written: 0,
            kanata_ids: HashMap::new(),
            staged: HashSet::new(),
            // Konata reports the last id as the number of instructions (CV-KANATA-3).
            next_id: 1,
            next_retire: 1,
            line: 0,
        }
    }

    fn push(&mut self, clk: u64, record: u64, kind: Kind) -> Result<()> {
        self.seq += 1;
        self.heap.push(Reverse(Cmd { clk, seq: self.seq, record, kind, line: self.line }));
        if self.heap.len() > REORDER_WINDOW {
            self.pop()?;
        }
        Ok(())
    }

    fn pop(&mut self) -> Result<()> {
        let Some(Reverse(cmd)) = self.heap.pop() else { return Ok(()) };
        match self.batch_clk {
            Some(now) if cmd.clk < now => bail!(
                "the trace goes back in time from cycle {now} to {} ({}, record {}) by more \
                 than the {REORDER_WINDOW} commands the Kanata writer can reorder",
                cmd.clk,
                origin(cmd.line),
                cmd.record
            ),
            Some(now) if cmd.clk > now => self.end_cycle(Some(cmd.clk))?,
            _ => {}
        }
        self.batch_clk = Some(cmd.clk);
        let id = match cmd.kind {
            Kind::Insert { .. } => {
                let id = self.next_id;
                self.next_id += 1;
                self.kanata_ids.insert(cmd.record, id);
                id
            }
            _ => match self.kanata_ids.get(&cmd.record) {
                Some(&id) => id,
                None => bail!(
                    "record {} has a line ({}) before its start at cycle {}",
                    cmd.record,
                    origin(cmd.line),
                    cmd.clk
                ),
            },
        };
        if matches!(cmd.kind, Kind::Retire { .. }) {
            self.kanata_ids.remove(&cmd.record);
        }
        self.batch.push((id, cmd.kind));
        Ok(())
    }

    /// Writes the batch of the current cycle, folded per instruction; what moves one cycle later
    /// starts the next batch when that is the next cycle, or is written on its own.
    fn end_cycle(&mut self, next: Option<u64>) -> Result<()> {
        let Some(clk) = self.batch_clk else { return Ok(()) };
        let mut order: Vec<u64> = Vec::new();
        let mut groups: HashMap<u64, Vec<Kind>> = HashMap::new();
        for (id, kind) in self.batch.drain(..) {
            groups
                .entry(id)
                .or_insert_with(|| {
                    order.push(id);
                    Vec::new()
                })
                .push(kind);
        }
        self.advance(clk)?;
        let mut later = Vec::new();
        for id in order {
            let cmds = groups.remove(&id).unwrap_or_default();
            let (now, next_cycle) = fold_cycle(cmds, self.staged.contains(&id));
            for k in now {
                self.write(id, k)?;
            }
            later.extend(next_cycle.into_iter().map(|k| (id, k)));
        }
        if !later.is_empty() {
            let Some(after) = clk.checked_add(1) else {
                bail!(
                    "a stage ends in cycle {clk}, the last a u64 holds: it cannot be drawn one \
                     cycle longer (CV-KANATA-5)"
                )
            };
            if next == Some(after) {
                self.batch = later;
            } else {
                self.advance(after)?;
                for (id, k) in later {
                    self.write(id, k)?;
                }
            }
        }
        Ok(())
    }

    fn advance(&mut self, clk: u64) -> Result<()> {
        if clk > self.written {
            writeln!(self.out, "C\t{}", clk - self.written)?;
            self.written = clk;
        }
        Ok(())
    }

    fn write(&mut self, id: u64, kind: Kind) -> Result<()> {
        match kind {
            Kind::Insert { sim, thread } => writeln!(self.out, "I\t{id}\t{sim}\t{thread}")?,
            Kind::Label { kind, text } => writeln!(self.out, "L\t{id}\t{kind}\t{text}")?,
            Kind::Start { lane, stage, .. } => {
                self.staged.insert(id);
                writeln!(self.out, "S\t{id}\t{lane}\t{stage}")?
            }
            Kind::End { lane, stage } => writeln!(self.out, "E\t{id}\t{lane}\t{stage}")?,
            Kind::Retire { flush } => {
                self.staged.remove(&id);
                // Retire ids number the instructions that retire, not the flushed ones.
                let rid = if flush { self.next_retire.saturating_sub(1) } else { self.next_retire };
                writeln!(self.out, "R\t{id}\t{rid}\t{}", u8::from(flush))?;
                if !flush {
                    self.next_retire += 1;
                }
            }
        }
        Ok(())
    }
}

/// Kanata text may hold no tab or line break.
fn clean(s: &str) -> String {
    s.chars().map(|c| if c == '\t' || c == '\n' || c == '\r' { ' ' } else { c }).collect()
}

/// Description and data of a record or event as `k=v` text, hint keys (`skip`) left out.
fn details(description: &str, data: Option<&Map<String, Value>>, skip: &[&str]) -> String {
    let mut parts = Vec::new();
    if !description.is_empty() {
        parts.push(description.to_owned());
    }
    for (k, v) in data.into_iter().flatten() {
        if skip.contains(&k.as_str()) {
            continue;
        }
        match v {
            Value::String(s) => parts.push(format!("{k}={s}")),
            other => parts.push(format!("{k}={other}")),
        }
    }
    clean(&parts.join("; "))
}

/// A stage's name with its details, for the label that shows a stage lasting no cycle.
fn note(name: &str, details: String) -> String {
    if details.is_empty() {
        name.to_owned()
    } else {
        format!("{name}: {details}")
    }
}

/// Whether a `status` text means the instruction did not retire (CV-KANATA-1).
pub fn is_flush_status(s: &str) -> bool {
    matches!(
        s.to_ascii_lowercase().as_str(),
        "flush" | "flushed" | "squash" | "squashed" | "cancelled" | "canceled" | "aborted"
    )
}

fn is_stall(e: &jets::format::Event<'_>) -> bool {
    let h = e.hints();
    matches!(h.severity, Some(Severity::Warning | Severity::Error))
        || e.name.to_ascii_lowercase().contains("stall")
        || h.icon.is_some_and(|i| i.to_ascii_lowercase().contains("stall"))
}

/// Kanata thread ids from the trace's structure (CV-KANATA-4): a record of type `Thread` (any
/// case) is a hardware thread, numbered by its `thread_id` hint when it has one, else in order of
/// appearance; a `Core` is numbered in order of appearance among cores; every other record
/// belongs to the nearest of them above it. The instruction's own `thread_id` and `unit_id` are
/// Gantt lane hints and are not used.
#[derive(Default)]
struct Threads {
    of: HashMap<u64, u64>,
    threads: u64,
    cores: u64,
}

impl Threads {
    fn begin(&mut self, r: &jets::format::Record<'_>) {
        let own = if r.record_type.eq_ignore_ascii_case("thread") {
            let n = self.threads;
            self.threads += 1;
            Some(r.hints().thread_id.unwrap_or(n))
        } else if r.record_type.eq_ignore_ascii_case("core") {
            let n = self.cores;
            self.cores += 1;
            Some(n)
        } else {
            r.parent_id.and_then(|p| self.of.get(&p).copied())
        };
        if let Some(t) = own {
            self.of.insert(r.id, t);
        }
    }

    fn of(&self, id: u64) -> u64 {
        self.of.get(&id).copied().unwrap_or(0)
    }
}

/// Converts the JETS trace at `input` into a Kanata log on `out`, drawing records of
/// `record_type` as instructions.
pub fn convert(input: &Path, out: Output, record_type: &str) -> Result<()> {
    let mut em = Emitter::new(out);
    // Konata ignores `C=` and counts from 0: start at 0 so its cycles are the trace's.
    em.out.write_all(b"Kanata\t0004\nC=\t0\n").context("writing Kanata")?;
    let mut insts: HashMap<u64, Inst> = HashMap::new();
    // Child records drawn as stages: child id -> (instruction id, lane, stage name).
    let mut stages: HashMap<u64, (u64, u8, String)> = HashMap::new();
    let mut flushed: HashMap<u64, bool> = HashMap::new();
    let mut threads = Threads::default();
    let mut end_clk = 0u64;
    let mut found = 0u64;
    read_trace(input, |number, line| {
        em.line = number;
        if let Some(c) = line.clk() {
            end_clk = end_clk.max(c);
        }
        match line {
            Line::Record(r) if r.record_type == record_type => {
                threads.begin(&r);
                found += 1;
                let h = r.hints();
                let thread = threads.of(r.id);
                let label = clean(h.display_label.unwrap_or(&r.name));
                let flush = r
                    .data
                    .as_ref()
                    .and_then(|d| d.get("status"))
                    .and_then(Value::as_str)
                    .is_some_and(is_flush_status);
                let details = details(&r.description, r.data.as_ref(), &RECORD_HINT_KEYS);
                em.push(r.clk, r.id, Kind::Insert { sim: r.id, thread })?;
                em.push(r.clk, r.id, Kind::Label { kind: 0, text: label })?;
                if !details.is_empty() {
                    em.push(r.clk, r.id, Kind::Label { kind: 1, text: details })?;
                }
                insts.insert(r.id, Inst::default());
                flushed.insert(r.id, flush);
            }
            Line::Record(r) => {
                threads.begin(&r);
                if let Some(p) = r.parent_id.filter(|p| insts.contains_key(p)) {
                    let lane = u8::from(r.hints().status == Some(Status::Stalled));
                    let stage = clean(&r.name);
                    let note =
                        note(&stage, details(&r.description, r.data.as_ref(), &RECORD_HINT_KEYS));
                    em.push(r.clk, p, Kind::Start { lane, stage: stage.clone(), note })?;
                    stages.insert(r.id, (p, lane, stage));
                }
            }
            Line::Event(e) => {
                if let Some(inst) = insts.get_mut(&e.record_id) {
                    let name = clean(&e.name);
                    let data = e.data.as_ref().and_then(Value::as_object);
                    let note = note(&name, details(&e.description, data, &EVENT_HINT_KEYS));
                    let stall = is_stall(&e);
                    if let Some((prev, _)) = inst.stall.take() {
                        em.push(e.clk, e.record_id, Kind::End { lane: 1, stage: prev })?;
                    }
                    if stall {
                        inst.stall = Some((name.clone(), note.clone()));
                    } else if let Some((prev, _)) = inst.stage.replace((name.clone(), note.clone()))
                    {
                        em.push(e.clk, e.record_id, Kind::End { lane: 0, stage: prev })?;
                    }
                    let lane = u8::from(stall);
                    em.push(e.clk, e.record_id, Kind::Start { lane, stage: name, note })?;
                }
            }
            Line::RecordEnd(end) => {
                if let Some((inst, lane, stage)) = stages.remove(&end.record_id) {
                    em.push(end.clk, inst, Kind::End { lane, stage })?;
                } else if let Some(inst) = insts.remove(&end.record_id) {
                    end_child_stages(&mut em, &mut stages, end.clk, end.record_id)?;
                    close_stages(&mut em, end.clk, end.record_id, inst)?;
                    let flush = flushed.remove(&end.record_id).unwrap_or(false)
                        || end
                            .extra
                            .get("status")
                            .and_then(Value::as_str)
                            .is_some_and(is_flush_status);
                    em.push(end.clk, end.record_id, Kind::Retire { flush })?;
                }
            }
            Line::Footer(f) => end_clk = end_clk.max(f.capture_end_clk.unwrap_or(0)),
            _ => {}
        }
        Ok(())
    })?;
    // Instructions that never ended: their stages close at the end of the trace, without R,
    // so Konata shows them as still in flight.
    let mut open: Vec<(u64, Inst)> = insts.into_iter().collect();
    open.sort_by_key(|(id, _)| *id);
    for (id, inst) in open {
        end_child_stages(&mut em, &mut stages, end_clk, id)?;
        close_stages(&mut em, end_clk, id, inst)?;
    }
    while !em.heap.is_empty() {
        em.pop()?;
    }
    em.end_cycle(None)?;
    // Konata's cycle count (and so its IPC) is where the log's time ends: the end of the trace.
    em.advance(end_clk)?;
    if found == 0 {
        bail!(
            "{}: no record has record_type {record_type:?} (choose one with --record-type)",
            input.display()
        );
    }
    em.out.finish()
}

fn close_stages<W: Write>(em: &mut Emitter<W>, clk: u64, id: u64, inst: Inst) -> Result<()> {
    if let Some((s, _)) = inst.stall {
        em.push(clk, id, Kind::End { lane: 1, stage: s })?;
    }
    if let Some((s, _)) = inst.stage {
        em.push(clk, id, Kind::End { lane: 0, stage: s })?;
    }
    Ok(())
}

/// Ends the child-record stages of instruction `id` still open (a child outliving its instruction
/// cannot be drawn after the instruction retires).
fn end_child_stages<W: Write>(
    em: &mut Emitter<W>,
    stages: &mut HashMap<u64, (u64, u8, String)>,
    clk: u64,
    id: u64,
) -> Result<()> {
    let mut children: Vec<u64> =
        stages.iter().filter(|(_, (inst, _, _))| *inst == id).map(|(&c, _)| c).collect();
    children.sort_unstable();
    for c in children {
        if let Some((inst, lane, stage)) = stages.remove(&c) {
            em.push(clk, inst, Kind::End { lane, stage })?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(lane: u8, stage: &str) -> Kind {
        Kind::Start { lane, stage: stage.into(), note: format!("{stage} note") }
    }
    fn e(lane: u8, stage: &str) -> Kind {
        Kind::End { lane, stage: stage.into() }
    }
    fn l(kind: u8, text: &str) -> Kind {
        Kind::Label { kind, text: text.into() }
    }
    const R: Kind = Kind::Retire { flush: false };
    const FLUSH: Kind = Kind::Retire { flush: true };

    #[test]
    fn a_squash_in_the_flush_cycle_becomes_a_label_on_the_current_stage() {
        let (now, later) =
            fold_cycle(vec![s(1, "Squash"), e(1, "Squash"), e(0, "ID"), FLUSH], true);
        assert_eq!(now, vec![e(0, "ID"), l(2, "Squash note"), FLUSH]);
        assert!(later.is_empty());
    }

    #[test]
    fn a_last_stage_in_the_retire_cycle_lasts_one_cycle() {
        let (now, later) = fold_cycle(vec![e(0, "WB"), s(0, "C"), e(0, "C"), R], true);
        assert_eq!(now, vec![e(0, "WB"), s(0, "C")]);
        assert_eq!(later, vec![e(0, "C"), R]);
    }

    #[test]
    fn a_stage_skipped_within_a_cycle_labels_the_next_one() {
        let (now, later) = fold_cycle(vec![e(0, "A"), s(0, "B"), e(0, "B"), s(0, "C")], true);
        assert_eq!(now, vec![e(0, "A"), s(0, "C"), l(2, "B note")]);
        assert!(later.is_empty());
    }

    #[test]
    fn without_any_stage_the_note_goes_to_the_instruction() {
        let (now, later) = fold_cycle(vec![s(1, "X"), e(1, "X")], false);
        assert_eq!(now, vec![l(1, "X note")]);
        assert!(later.is_empty());
    }

    #[test]
    fn stages_of_a_cycle_or_more_are_untouched() {
        let cmds = vec![e(0, "A"), s(0, "B"), s(1, "stall")];
        assert_eq!(fold_cycle(cmds.clone(), true), (cmds, vec![]));
    }
}
