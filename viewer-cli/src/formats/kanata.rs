//! JETS → Kanata (version 0004), the log format of the Konata pipeline viewer.
//!
//! Records of one `record_type` (default `Instruction`) become instructions: `I` when they begin,
//! `L 0` (display_label, else name) and `L 1` (description and data), `R` when they end (type 1,
//! flush, when `data.status` or the `record_end`'s `status` says the instruction was flushed or
//! squashed; see spec/decisions). Their events become stages: each event starts a stage on lane 0
//! that lasts until the next one or the record's end; a stall (severity warning or error, or
//! "stall" in the name or icon) is a stage on lane 1 instead. Their child records become stages
//! (`S` at begin, `E` at end; lane 1 when the child's status is `stalled`).
//!
//! Kanata wants one global time order (`C` advances the cycle). Commands are produced at the cycle
//! of the line that causes them and pass through a bounded reorder buffer; a trace whose lines are
//! out of time order by more than the buffer holds is refused with an error, never written wrong.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::io::Write;
use std::path::Path;

use anyhow::{bail, Context, Result};
use jets::format::hints::RECORD_HINT_KEYS;
use jets::format::{Line, Severity, Status};
use serde_json::{Map, Value};

use super::timeline::read_trace;
use crate::convert::Output;

/// Commands the reorder buffer holds before it must write the earliest.
pub const REORDER_WINDOW: usize = 1 << 18;

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    Insert { thread: u64 },
    Label { kind: u8, text: String },
    Start { lane: u8, stage: String },
    End { lane: u8, stage: String },
    Retire { flush: bool },
}

#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Cmd {
    clk: u64,
    seq: u64,
    record: u64,
    kind: Kind,
}

#[derive(Default)]
struct Inst {
    stage: Option<String>,
    stall: Option<String>,
}

/// Streams Kanata commands in time order.
struct Emitter<W: Write> {
    out: W,
    heap: BinaryHeap<Reverse<Cmd>>,
    seq: u64,
    now: Option<u64>,
    kanata_ids: HashMap<u64, u64>,
    next_id: u64,
    next_retire: u64,
}

impl<W: Write> Emitter<W> {
    fn push(&mut self, clk: u64, record: u64, kind: Kind) -> Result<()> {
        self.seq += 1;
        self.heap.push(Reverse(Cmd { clk, seq: self.seq, record, kind }));
        if self.heap.len() > REORDER_WINDOW {
            self.pop()?;
        }
        Ok(())
    }

    fn pop(&mut self) -> Result<()> {
        let Some(Reverse(cmd)) = self.heap.pop() else { return Ok(()) };
        match self.now {
            None => writeln!(self.out, "C=\t{}", cmd.clk)?,
            Some(now) if cmd.clk > now => writeln!(self.out, "C\t{}", cmd.clk - now)?,
            Some(now) if cmd.clk < now => bail!(
                "the trace goes back in time from cycle {now} to {} (record {}) by more than \
                 the {REORDER_WINDOW} commands the Kanata writer can reorder",
                cmd.clk,
                cmd.record
            ),
            Some(_) => {}
        }
        self.now = Some(cmd.clk);
        let id = match cmd.kind {
            Kind::Insert { .. } => {
                let id = self.next_id;
                self.next_id += 1;
                self.kanata_ids.insert(cmd.record, id);
                id
            }
            _ => match self.kanata_ids.get(&cmd.record) {
                Some(&id) => id,
                None => {
                    bail!("record {} has a line before its start at cycle {}", cmd.record, cmd.clk)
                }
            },
        };
        match cmd.kind {
            Kind::Insert { thread } => writeln!(self.out, "I\t{id}\t{}\t{thread}", cmd.record)?,
            Kind::Label { kind, text } => writeln!(self.out, "L\t{id}\t{kind}\t{text}")?,
            Kind::Start { lane, stage } => writeln!(self.out, "S\t{id}\t{lane}\t{stage}")?,
            Kind::End { lane, stage } => writeln!(self.out, "E\t{id}\t{lane}\t{stage}")?,
            Kind::Retire { flush } => {
                writeln!(self.out, "R\t{id}\t{}\t{}", self.next_retire, u8::from(flush))?;
                self.next_retire += 1;
                self.kanata_ids.remove(&cmd.record);
            }
        }
        Ok(())
    }
}

/// Kanata text may hold no tab or line break.
fn clean(s: &str) -> String {
    s.chars().map(|c| if c == '\t' || c == '\n' || c == '\r' { ' ' } else { c }).collect()
}

fn details(description: &str, data: Option<&Map<String, Value>>) -> String {
    let mut parts = Vec::new();
    if !description.is_empty() {
        parts.push(description.to_owned());
    }
    for (k, v) in data.into_iter().flatten() {
        if RECORD_HINT_KEYS.contains(&k.as_str()) {
            continue;
        }
        match v {
            Value::String(s) => parts.push(format!("{k}={s}")),
            other => parts.push(format!("{k}={other}")),
        }
    }
    clean(&parts.join("; "))
}

/// Whether a `status` text means the instruction did not retire (see spec/decisions).
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

/// Converts the JETS trace at `input` into a Kanata log on `out`, drawing records of
/// `record_type` as instructions.
pub fn convert(input: &Path, out: Output, record_type: &str) -> Result<()> {
    let mut em = Emitter {
        out,
        heap: BinaryHeap::new(),
        seq: 0,
        now: None,
        kanata_ids: HashMap::new(),
        next_id: 0,
        next_retire: 0,
    };
    em.out.write_all(b"Kanata\t0004\n").context("writing Kanata")?;
    let mut insts: HashMap<u64, Inst> = HashMap::new();
    // Child records drawn as stages: child id -> (instruction id, lane, stage name).
    let mut stages: HashMap<u64, (u64, u8, String)> = HashMap::new();
    let mut flushed: HashMap<u64, bool> = HashMap::new();
    let mut end_clk = 0u64;
    let mut found = 0u64;
    read_trace(input, |_, line| {
        if let Some(c) = line.clk() {
            end_clk = end_clk.max(c);
        }
        match line {
            Line::Record(r) if r.record_type == record_type => {
                found += 1;
                let h = r.hints();
                let thread = h.thread_id.or(h.unit_id).unwrap_or(0);
                let label = clean(h.display_label.unwrap_or(&r.name));
                let flush = r
                    .data
                    .as_ref()
                    .and_then(|d| d.get("status"))
                    .and_then(Value::as_str)
                    .is_some_and(is_flush_status);
                let details = details(&r.description, r.data.as_ref());
                em.push(r.clk, r.id, Kind::Insert { thread })?;
                em.push(r.clk, r.id, Kind::Label { kind: 0, text: label })?;
                if !details.is_empty() {
                    em.push(r.clk, r.id, Kind::Label { kind: 1, text: details })?;
                }
                insts.insert(r.id, Inst::default());
                flushed.insert(r.id, flush);
            }
            Line::Record(r) => {
                if let Some(p) = r.parent_id.filter(|p| insts.contains_key(p)) {
                    let lane = u8::from(r.hints().status == Some(Status::Stalled));
                    let stage = clean(&r.name);
                    em.push(r.clk, p, Kind::Start { lane, stage: stage.clone() })?;
                    stages.insert(r.id, (p, lane, stage));
                }
            }
            Line::Event(e) => {
                if let Some(inst) = insts.get_mut(&e.record_id) {
                    let name = clean(&e.name);
                    if is_stall(&e) {
                        if let Some(prev) = inst.stall.replace(name.clone()) {
                            em.push(e.clk, e.record_id, Kind::End { lane: 1, stage: prev })?;
                        }
                        em.push(e.clk, e.record_id, Kind::Start { lane: 1, stage: name })?;
                    } else {
                        if let Some(prev) = inst.stall.take() {
                            em.push(e.clk, e.record_id, Kind::End { lane: 1, stage: prev })?;
                        }
                        if let Some(prev) = inst.stage.replace(name.clone()) {
                            em.push(e.clk, e.record_id, Kind::End { lane: 0, stage: prev })?;
                        }
                        em.push(e.clk, e.record_id, Kind::Start { lane: 0, stage: name })?;
                    }
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
    if found == 0 {
        bail!(
            "{}: no record has record_type {record_type:?} (choose one with --record-type)",
            input.display()
        );
    }
    em.out.finish()
}

fn close_stages<W: Write>(em: &mut Emitter<W>, clk: u64, id: u64, inst: Inst) -> Result<()> {
    if let Some(s) = inst.stall {
        em.push(clk, id, Kind::End { lane: 1, stage: s })?;
    }
    if let Some(s) = inst.stage {
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
