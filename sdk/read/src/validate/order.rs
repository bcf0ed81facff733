//! The sequential pass: the rules that depend on what came before (ids, parents, ends, footer).
//!
//! Memory is one entry per record id (see [`IdTable`]); nothing is kept per event, annotation or
//! record_end.

use memchr::memmem;

use super::ids::{IdTable, Slot};

use super::check::{Fact, Kind};
use super::rules::{source_text, Diagnostic, Level, Note, Rule};

/// Line numbers use the low 62 bits of [`Slot::line`]; the top bits are flags.
const ENDED: u64 = 1 << 63;
/// The record's `clk` was invalid, so span checks against it are skipped.
const NO_START: u64 = 1 << 62;
const LINE: u64 = (1 << 62) - 1;

/// Counts of the lines seen, by type.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// All lines.
    pub lines: u64,
    /// `record` lines.
    pub records: u64,
    /// `record_end` lines.
    pub record_ends: u64,
    /// `annotation` lines.
    pub annotations: u64,
    /// `event` lines.
    pub events: u64,
}

/// The state of the sequential pass.
pub(crate) struct Order {
    table: IdTable,
    header_line: Option<u64>,
    footer_line: Option<u64>,
    after_footer_reported: bool,
    pub counts: Counts,
    /// Records defined and not yet ended.
    pub open: u64,
    pub max_clk: Option<u64>,
    /// In validation, a record whose parent is unknown is still entered, so its children and
    /// events do not each repeat the error. In repair, a line with an error changes nothing.
    pub strict: bool,
}

/// The part of a diagnostic the pass fills in; the caller adds line, offset and source.
struct Finding {
    rule: Rule,
    key: Option<&'static str>,
    message: String,
    note: Option<Note>,
}

impl Order {
    pub fn new(strict: bool) -> Order {
        Order {
            table: IdTable::default(),
            header_line: None,
            footer_line: None,
            after_footer_reported: false,
            counts: Counts::default(),
            open: 0,
            max_clk: None,
            strict,
        }
    }

    /// Applies one line; returns whether it broke an ordering rule (an error, not a warning).
    pub fn apply(&mut self, fact: &Fact, bytes: &[u8], emit: &mut dyn FnMut(Diagnostic)) -> bool {
        let mut findings = Vec::new();
        self.apply_inner(fact, &mut findings);
        let mut error = false;
        for f in findings {
            error |= f.rule.level() == Level::Error;
            let column = f
                .key
                .and_then(|k| memmem::find(bytes, format!("\"{k}\"").as_bytes()))
                .map_or(1, |p| p as u64 + 1);
            emit(Diagnostic {
                rule: f.rule,
                line: fact.line,
                column,
                offset: fact.offset,
                message: f.message,
                source: source_text(bytes),
                note: f.note,
                help: None,
            });
        }
        error
    }

    fn apply_inner(&mut self, fact: &Fact, out: &mut Vec<Finding>) {
        let line = fact.line;
        self.counts.lines += 1;
        let find =
            |rule, key, message: String, note: Option<Note>| Finding { rule, key, message, note };
        if line == 1 && fact.kind != Kind::Header {
            let message = "the first line of a trace must be a header".to_owned();
            out.push(find(Rule::FirstNotHeader, None, message, None));
        }
        if let Some(footer) = self.footer_line {
            if !self.after_footer_reported {
                self.after_footer_reported = true;
                let message = "a line after the footer: the footer must be the last line".into();
                let note = Note { line: footer, message: "the footer is here".into() };
                out.push(find(Rule::AfterFooter, None, message, Some(note)));
            }
        }
        // A line with a local error changes no state in strict (repair) mode.
        let change = !(self.strict && fact.error);
        match fact.kind {
            Kind::Unusable => {}
            Kind::Header => {
                if line != 1 {
                    let note = match self.header_line {
                        Some(h) => Note { line: h, message: "the first header is here".into() },
                        None => Note { line: 1, message: "the trace starts here".into() },
                    };
                    let message = "a second header: the header must be the first line only".into();
                    out.push(find(Rule::DuplicateHeader, None, message, Some(note)));
                } else if change {
                    self.header_line = Some(line);
                }
            }
            Kind::Record { id, parent, clk } => {
                self.counts.records += 1;
                self.clk(clk);
                let Some(id) = id else { return };
                if let Some(first) = self.table.get(id) {
                    let message = format!("duplicate record id {id}");
                    let note = Note {
                        line: first.line & LINE,
                        message: format!("record {id} is first defined here"),
                    };
                    out.push(find(Rule::DuplicateId, Some("id"), message, Some(note)));
                    return;
                }
                let mut ok = true;
                if let Some(Some(p)) = parent {
                    match self.table.get(p) {
                        None if p == id => {
                            let message = format!("record {id} names itself as its parent");
                            out.push(find(Rule::UnknownParent, Some("parent_id"), message, None));
                            ok = false;
                        }
                        None => {
                            let message = format!(
                                "parent record {p} has not appeared before this line (parents \
                                 must be written before their children)"
                            );
                            out.push(find(Rule::UnknownParent, Some("parent_id"), message, None));
                            ok = false;
                        }
                        Some(ps) => {
                            if let (Some(c), true) = (clk, ps.line & NO_START == 0) {
                                let parent_line = ps.line & LINE;
                                let note = |m: String| Some(Note { line: parent_line, message: m });
                                if c < ps.start {
                                    let message = format!(
                                        "record {id} starts at clk {c}, before its parent {p} starts at clk {}",
                                        ps.start
                                    );
                                    let n = note(format!("parent {p} starts here"));
                                    out.push(find(
                                        Rule::ChildOutsideParent,
                                        Some("clk"),
                                        message,
                                        n,
                                    ));
                                } else if ps.line & ENDED != 0 && c > ps.end {
                                    let message = format!(
                                        "record {id} starts at clk {c}, after its parent {p} ended at clk {}",
                                        ps.end
                                    );
                                    let n = note(format!("parent {p} is defined here"));
                                    out.push(find(
                                        Rule::ChildOutsideParent,
                                        Some("clk"),
                                        message,
                                        n,
                                    ));
                                }
                            }
                        }
                    }
                }
                if change && (ok || !self.strict) {
                    let flags = if clk.is_none() { NO_START } else { 0 };
                    self.table
                        .insert(id, Slot { start: clk.unwrap_or(0), end: 0, line: line | flags });
                    self.open += 1;
                }
            }
            Kind::End { id, clk } => {
                self.counts.record_ends += 1;
                self.clk(clk);
                let Some(id) = id else { return };
                let Some(slot) = self.table.get_mut(id) else {
                    out.push(unknown(id, "record_end"));
                    return;
                };
                let record_line = slot.line & LINE;
                if slot.line & ENDED != 0 {
                    let message = format!("record {id} already ended at clk {}", slot.end);
                    let note =
                        Note { line: record_line, message: format!("record {id} is defined here") };
                    out.push(find(Rule::DoubleEnd, Some("record_id"), message, Some(note)));
                    return;
                }
                if let (Some(c), true) = (clk, slot.line & NO_START == 0) {
                    if c < slot.start {
                        let message = format!(
                            "record {id} ends at clk {c}, before it starts at clk {}",
                            slot.start
                        );
                        let note =
                            Note { line: record_line, message: format!("record {id} starts here") };
                        out.push(find(Rule::EndBeforeStart, Some("clk"), message, Some(note)));
                    }
                }
                if change {
                    slot.line |= ENDED;
                    match clk {
                        Some(c) => slot.end = c,
                        // An end without a usable clk still ends the record; later span checks
                        // against it are skipped by pretending it ends at the last cycle.
                        None => slot.end = u64::MAX,
                    }
                    self.open -= 1;
                }
            }
            Kind::Annotation { id } => {
                self.counts.annotations += 1;
                if let Some(id) = id {
                    if self.table.get(id).is_none() {
                        out.push(unknown(id, "annotation"));
                    }
                }
            }
            Kind::Event { id, clk } => {
                self.counts.events += 1;
                self.clk(clk);
                let Some(id) = id else { return };
                let Some(slot) = self.table.get(id) else {
                    out.push(unknown(id, "event"));
                    return;
                };
                if let (Some(c), true) = (clk, slot.line & NO_START == 0) {
                    let ended = slot.line & ENDED != 0;
                    if c < slot.start || (ended && c > slot.end) {
                        let span = if ended {
                            format!("[{}, {}]", slot.start, slot.end)
                        } else {
                            format!("[{}, ...)", slot.start)
                        };
                        let message =
                            format!("event at clk {c} lies outside record {id}'s span {span}");
                        let note = Note {
                            line: slot.line & LINE,
                            message: format!("record {id} is defined here"),
                        };
                        out.push(find(Rule::EventOutsideRecord, Some("clk"), message, Some(note)));
                    }
                }
            }
            Kind::Footer(ref f) => {
                let (capture_end, totals, open_records) = (f.capture_end, f.totals, f.open_records);
                if self.footer_line.is_none() {
                    self.footer_line = Some(line);
                }
                let counted = [
                    ("total_records", self.counts.records),
                    ("total_annotations", self.counts.annotations),
                    ("total_events", self.counts.events),
                ];
                for ((key, n), claimed) in counted.into_iter().zip(totals) {
                    if let Some(claimed) = claimed.filter(|c| *c != n) {
                        let message = format!("footer says {key} {claimed}, the file has {n}");
                        out.push(find(Rule::FooterCount, Some(key), message, None));
                    }
                }
                if let Some(claimed) = open_records.filter(|c| *c != self.open) {
                    let message = format!(
                        "footer says open_records {claimed}, the file leaves {} records without a record_end",
                        self.open
                    );
                    out.push(find(Rule::FooterCount, Some("open_records"), message, None));
                }
                if let (Some(end), Some(max)) = (capture_end, self.max_clk) {
                    if end < max {
                        let message = format!(
                            "footer says capture_end_clk {end}, but the file has a clk of {max}"
                        );
                        out.push(find(
                            Rule::FooterCaptureEnd,
                            Some("capture_end_clk"),
                            message,
                            None,
                        ));
                    }
                }
            }
        }
    }

    fn clk(&mut self, clk: Option<u64>) {
        if let Some(c) = clk {
            self.max_clk = Some(self.max_clk.map_or(c, |m| m.max(c)));
        }
    }

    /// Whether a footer has been seen.
    pub fn footer_seen(&self) -> bool {
        self.footer_line.is_some()
    }

    /// Records defined and not ended, latest-defined first (children before their parents).
    pub fn open_records(&self) -> Vec<(u64, u64)> {
        let mut open: Vec<(u64, u64)> = self
            .table
            .iter()
            .filter(|(_, s)| s.line & ENDED == 0)
            .map(|(id, s)| (s.line & LINE, id))
            .collect();
        open.sort_unstable_by(|a, b| b.cmp(a));
        open.into_iter().map(|(line, id)| (id, line)).collect()
    }

    /// Bytes held for the record ids.
    pub fn table_bytes(&self) -> usize {
        self.table.bytes()
    }

    /// Number of record ids tracked.
    pub fn tracked(&self) -> usize {
        self.table.len()
    }
}

fn unknown(id: u64, what: &str) -> Finding {
    Finding {
        rule: Rule::UnknownRecord,
        key: Some("record_id"),
        message: format!(
            "{what} refers to record {id}, which has not appeared before this line (a record must \
             be written before anything that refers to it)"
        ),
        note: None,
    }
}
