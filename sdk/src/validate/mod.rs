//! Validating traces against JETS 2.0: rules with stable codes, and the engine behind
//! `jets validate`.
//!
//! The engine reads a trace in chunks of whole lines ([`crate::read::Reader::next_chunk`]). Each
//! chunk is split at line boundaries and its lines are parsed and checked on all cores; a
//! sequential pass then applies the rules that depend on what came before (ids, parents, ends,
//! footer) in file order. The sequential pass keeps 32 bytes per record id and nothing per event,
//! so memory grows with the number of records, not with the file.
//!
//! ```
//! use jets::validate::{validate_bytes, Rule};
//!
//! let trace = concat!(
//!     r#"{"type":"header","version":"2.0","metadata":{}}"#, "\n",
//!     r#"{"clk":0,"type":"record","name":"core","record_type":"Core","id":1,"parent_id":null,"description":""}"#, "\n",
//!     r#"{"clk":5,"type":"event","name":"E","record_id":2,"description":""}"#, "\n",
//! );
//! let (diagnostics, report) = validate_bytes(trace.as_bytes());
//! assert_eq!(diagnostics[0].rule, Rule::UnknownRecord);
//! assert_eq!((diagnostics[0].line, report.errors), (3, 1));
//! ```
//!
//! The rules, their codes and the decisions they encode are listed in `spec/rules.md`.

mod check;
mod order;
mod repair;
mod rules;

use std::io::Cursor;

pub use order::Counts;
pub use repair::{repair, RepairError, RepairOptions, RepairReport};
pub use rules::{Diagnostic, Note, Rule, Severity};

use crate::read::{Chunk, ReadError, Reader};
use check::{check_line, Fact};
use order::Order;

/// Chunks smaller than this are checked on one thread: spawning costs more than it saves.
const PARALLEL_MIN: usize = 256 * 1024;

/// The outcome of a validation.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Report {
    /// Errors reported (rules allowed with [`Validator::allow`] are not counted).
    pub errors: u64,
    /// Warnings reported.
    pub warnings: u64,
    /// Lines by type.
    pub counts: Counts,
    /// Bytes of (decompressed) trace read.
    pub bytes: u64,
    /// Records still without a `record_end` at the end.
    pub open_records: u64,
    /// Record ids tracked by the ordering pass (its memory is 32 bytes per id plus table slack).
    pub ids_tracked: u64,
    /// Whether the trace has a footer.
    pub footer: bool,
    /// Validation stopped early at [`Validator::max_errors`].
    pub stopped_early: bool,
}

impl Report {
    /// No errors (warnings allowed).
    pub fn is_valid(&self) -> bool {
        self.errors == 0
    }
}

/// Runs the rules over a trace. See the [module documentation](self).
pub struct Validator {
    max_errors: Option<u64>,
    allowed: Vec<Rule>,
    threads: usize,
    stop_at_footer: bool,
    progress: Option<Box<dyn FnMut(u64)>>,
}

impl Default for Validator {
    fn default() -> Self {
        Validator::new()
    }
}

impl std::fmt::Debug for Validator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Validator")
            .field("max_errors", &self.max_errors)
            .field("allowed", &self.allowed)
            .field("threads", &self.threads)
            .field("stop_at_footer", &self.stop_at_footer)
            .finish_non_exhaustive()
    }
}

impl Validator {
    /// A validator using every core, reporting everything.
    pub fn new() -> Validator {
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        Validator {
            max_errors: None,
            allowed: Vec::new(),
            threads,
            stop_at_footer: false,
            progress: None,
        }
    }

    /// Stops after `n` errors (the report says so).
    pub fn max_errors(mut self, n: u64) -> Validator {
        self.max_errors = Some(n);
        self
    }

    /// Does not report `rule`, nor count it.
    pub fn allow(mut self, rule: Rule) -> Validator {
        self.allowed.push(rule);
        self
    }

    /// Parses on `n` threads (at least 1).
    pub fn threads(mut self, n: usize) -> Validator {
        self.threads = n.max(1);
        self
    }

    /// Stops at the footer (for following a trace that is still being written: the footer is the
    /// last line, so nothing more will come).
    pub fn stop_at_footer(mut self, yes: bool) -> Validator {
        self.stop_at_footer = yes;
        self
    }

    /// Calls `f` with the reader's [`source_pos`](Reader::source_pos) after every chunk.
    pub fn on_progress(mut self, f: impl FnMut(u64) + 'static) -> Validator {
        self.progress = Some(Box::new(f));
        self
    }

    /// Validates the trace, passing each diagnostic to `emit` in line order as it is found.
    pub fn run(
        &mut self,
        reader: &mut Reader,
        mut emit: impl FnMut(Diagnostic),
    ) -> Result<Report, ReadError> {
        let mut order = Order::new(false);
        let mut report = Report::default();
        let mut parts: Vec<(Vec<Fact>, Vec<Diagnostic>)> = Vec::new();
        let mut done = false;
        let mut last_line = 0u64;
        let allowed = self.allowed.clone();
        let max_errors = self.max_errors;
        let mut filtered = |d: Diagnostic, report: &mut Report| -> bool {
            if allowed.contains(&d.rule) {
                return false;
            }
            match d.severity() {
                Severity::Error => report.errors += 1,
                Severity::Warning => report.warnings += 1,
            }
            emit(d);
            max_errors.is_some_and(|m| report.errors >= m)
        };
        while !done {
            let Some(chunk) = reader.next_chunk()? else { break };
            report.bytes += chunk.bytes.len() as u64;
            let pieces = if chunk.bytes.len() >= PARALLEL_MIN && self.threads > 1 {
                chunk.split(self.threads)
            } else {
                vec![chunk]
            };
            parts.resize_with(pieces.len(), Default::default);
            check_parallel(&pieces, &mut parts);
            'pieces: for (piece, (facts, local)) in pieces.iter().zip(&mut parts) {
                let mut local = local.drain(..).peekable();
                for fact in facts.iter() {
                    while let Some(d) = local.next_if(|d| d.line <= fact.line) {
                        if filtered(d, &mut report) {
                            report.stopped_early = true;
                            done = true;
                            break 'pieces;
                        }
                    }
                    let start = (fact.offset - piece.offset) as usize;
                    let bytes = &piece.bytes[start..start + fact.len];
                    let mut stop = false;
                    order.apply(fact, bytes, &mut |d| stop |= filtered(d, &mut report));
                    last_line = fact.line;
                    if stop {
                        report.stopped_early = true;
                        done = true;
                        break 'pieces;
                    }
                    if self.stop_at_footer && matches!(fact.kind, check::Kind::Footer { .. }) {
                        done = true;
                        break 'pieces;
                    }
                }
            }
            if let Some(p) = &mut self.progress {
                p(reader.source_pos());
            }
        }
        if !done {
            let end = last_line + 1;
            if let Some(why) = reader.truncated() {
                let format = match reader.compression() {
                    crate::read::Compression::Gzip => "gzip",
                    crate::read::Compression::Zstd => "zstd",
                    crate::read::Compression::Brotli => "brotli",
                    crate::read::Compression::None => "input",
                };
                let message = format!(
                    "the {format} stream ends early or is corrupt after line {last_line}: {why}"
                );
                filtered(end_diag(Rule::TruncatedStream, end, report.bytes, message), &mut report);
            }
            if last_line == 0 {
                let message = "the trace is empty: it must begin with a header".to_owned();
                filtered(end_diag(Rule::FirstNotHeader, 1, 0, message), &mut report);
            }
        }
        report.counts = order.counts;
        report.open_records = order.open;
        report.ids_tracked = order.tracked() as u64;
        report.footer = order.footer_seen();
        Ok(report)
    }
}

fn end_diag(rule: Rule, line: u64, offset: u64, message: String) -> Diagnostic {
    let help = (rule == Rule::TruncatedStream)
        .then_some("the writer probably crashed; `jets repair` keeps the complete lines");
    Diagnostic { rule, line, column: 1, offset, message, source: String::new(), note: None, help }
}

/// Checks each piece on its own thread (the first on this one).
fn check_parallel(pieces: &[Chunk<'_>], parts: &mut [(Vec<Fact>, Vec<Diagnostic>)]) {
    fn check_piece(piece: &Chunk<'_>, (facts, local): &mut (Vec<Fact>, Vec<Diagnostic>)) {
        facts.clear();
        local.clear();
        facts.extend(piece.lines().map(|raw| check_line(&raw, local)));
    }
    let Some(((first_part, rest_parts), (first_piece, rest_pieces))) =
        parts.split_first_mut().zip(pieces.split_first())
    else {
        return;
    };
    if rest_pieces.is_empty() {
        check_piece(first_piece, first_part);
        return;
    }
    std::thread::scope(|s| {
        for (piece, part) in rest_pieces.iter().zip(rest_parts.iter_mut()) {
            s.spawn(move || check_piece(piece, part));
        }
        check_piece(first_piece, first_part);
    });
}

/// Validates a trace held in memory with default settings; returns every diagnostic and the
/// report. For tests, fuzzing and small traces.
pub fn validate_bytes(bytes: &[u8]) -> (Vec<Diagnostic>, Report) {
    let mut diagnostics = Vec::new();
    let report = Reader::from_read(Cursor::new(bytes.to_vec()), "<memory>")
        .and_then(|mut r| Validator::new().run(&mut r, |d| diagnostics.push(d)))
        .unwrap_or_default();
    (diagnostics, report)
}

#[cfg(test)]
mod tests;
