//! Validating traces against JETS 2.0: rules with stable codes, and the engine behind
//! `jets validate`.
//!
//! Lines are parsed and checked on their own on all cores; a sequential pass then applies the
//! rules that depend on what came before (ids, parents, ends, footer) in file order. A feeding
//! thread reads the trace ([`crate::Reader::next_chunk`]) and cuts it into pieces of whole lines
//! that worker threads check while the calling thread orders the finished ones; a trace being
//! followed is checked chunk by chunk as it grows. The sequential pass keeps 24
//! bytes per record id (when ids are dense, as writers make them) and nothing per event, so memory
//! grows with the number of records, not with the file.
//!
//! ```
//! use jets_read::validate::{validate_bytes, Rule};
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
mod fast;
mod ids;
mod order;
mod repair;
mod rules;

use std::io::Cursor;

pub use order::Counts;
pub use repair::{repair, RepairError, RepairOptions, RepairReport};
pub use rules::{Diagnostic, Level, Note, Rule};

use crate::{Chunk, ReadError, Reader};
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
    /// Record ids tracked by the ordering pass.
    pub ids_tracked: u64,
    /// Bytes the ordering pass holds for them (24 per id when ids are dense; see `spec/rules.md`).
    pub ids_bytes: u64,
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

    /// Stops waiting for more data at the footer (for following a trace that is still being
    /// written: the footer is the last line a writer writes). Lines already in the file after it
    /// are still checked, and reported (E017) as in a plain run.
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
        emit: impl FnMut(Diagnostic),
    ) -> Result<Report, ReadError> {
        let mut seq = Sequential {
            order: Order::new(false),
            report: Report::default(),
            allowed: self.allowed.clone(),
            max_errors: self.max_errors,
            emit,
            last_line: 0,
            done: false,
        };
        if self.threads > 1 && !reader.following() {
            self.run_pipelined(reader, &mut seq)?;
        } else {
            self.run_chunks(reader, &mut seq)?;
        }
        if !seq.done {
            let end = seq.last_line + 1;
            if let Some(why) = reader.truncated() {
                let format = match reader.compression() {
                    crate::Compression::Gzip => "gzip",
                    crate::Compression::Zstd => "zstd",
                    crate::Compression::Brotli => "brotli",
                    crate::Compression::None => "input",
                };
                let message = format!(
                    "the {format} stream ends early or is corrupt after line {}: {why}",
                    seq.last_line
                );
                seq.emit(end_diag(Rule::TruncatedStream, end, seq.report.bytes, message));
            }
            if seq.last_line == 0 {
                let message = "the trace is empty: it must begin with a header".to_owned();
                seq.emit(end_diag(Rule::FirstNotHeader, 1, 0, message));
            }
        }
        let mut report = seq.report;
        report.counts = seq.order.counts;
        report.open_records = seq.order.open;
        report.ids_tracked = seq.order.tracked() as u64;
        report.ids_bytes = seq.order.table_bytes() as u64;
        report.footer = seq.order.footer_seen();
        Ok(report)
    }

    /// The pipeline: a feeding thread reads chunks and deals their pieces of whole lines to
    /// `threads` workers in turn; each checks its pieces in order while this thread runs the
    /// ordering pass over the finished pieces in file order. Each worker is at most two pieces
    /// ahead, so memory stays bounded (a few chunks).
    fn run_pipelined<F: FnMut(Diagnostic)>(
        &mut self,
        reader: &mut Reader,
        seq: &mut Sequential<F>,
    ) -> Result<(), ReadError> {
        use std::sync::mpsc::sync_channel;
        use std::sync::Arc;
        /// A piece to check: `bytes[range]` starts at byte `offset` of the trace; the reader had
        /// consumed `source_pos` bytes of its source when it was read (for the progress bar).
        struct Job {
            bytes: Arc<[u8]>,
            range: std::ops::Range<usize>,
            offset: u64,
            source_pos: u64,
        }
        const PIECE: usize = 2 << 20;
        let workers = self.threads;
        let progress = &mut self.progress;
        std::thread::scope(|s| {
            let (mut inputs, mut outputs) = (Vec::new(), Vec::new());
            for _ in 0..workers {
                let (job_tx, job_rx) = sync_channel::<Job>(2);
                let (done_tx, done_rx) = sync_channel::<(Job, Piece)>(2);
                s.spawn(move || {
                    for job in job_rx {
                        let chunk = Chunk {
                            bytes: &job.bytes[job.range.clone()],
                            first_line: 1,
                            offset: job.offset,
                        };
                        let mut piece = Piece::default();
                        check_piece(&chunk, &mut piece);
                        if done_tx.send((job, piece)).is_err() {
                            return; // the ordering pass stopped early
                        }
                    }
                });
                inputs.push(job_tx);
                outputs.push(done_rx);
            }
            let feeder = s.spawn(move || -> Result<(), ReadError> {
                let mut next = 0usize;
                loop {
                    let Some(chunk) = reader.next_chunk()? else { return Ok(()) };
                    let (bytes, offset): (Arc<[u8]>, u64) = (Arc::from(chunk.bytes), chunk.offset);
                    let source_pos = reader.source_pos();
                    let mut start = 0;
                    while start < bytes.len() {
                        let at = (start + PIECE).min(bytes.len());
                        let end =
                            memchr::memchr(b'\n', &bytes[at - 1..]).map_or(bytes.len(), |p| at + p);
                        let job = Job {
                            bytes: bytes.clone(),
                            range: start..end,
                            offset: offset + start as u64,
                            source_pos,
                        };
                        if inputs[next % workers].send(job).is_err() {
                            return Ok(()); // the ordering pass stopped early
                        }
                        next += 1;
                        start = end;
                    }
                }
            });
            for i in 0.. {
                let Ok((job, piece)) = outputs[i % workers].recv() else { break };
                seq.report.bytes += piece.len as u64;
                seq.consume(piece, &job.bytes[job.range.clone()]);
                if let Some(p) = progress.as_mut() {
                    p(job.source_pos);
                }
                if seq.done {
                    break;
                }
            }
            // Workers and feeder see their channels close and stop.
            drop(outputs);
            match feeder.join() {
                Ok(result) => result,
                Err(panic) => std::panic::resume_unwind(panic),
            }
        })
    }

    /// Chunk by chunk, for one thread or a followed trace: each chunk is split and checked on
    /// all threads, then ordered. Following, the footer ends the wait for more data: what the file
    /// holds after it is still checked (E017), as in a plain run.
    fn run_chunks<F: FnMut(Diagnostic)>(
        &mut self,
        reader: &mut Reader,
        seq: &mut Sequential<F>,
    ) -> Result<(), ReadError> {
        let mut parts: Vec<Piece> = Vec::new();
        while !seq.done {
            let Some(chunk) = reader.next_chunk()? else { break };
            seq.report.bytes += chunk.bytes.len() as u64;
            let pieces = if chunk.bytes.len() >= PARALLEL_MIN && self.threads > 1 {
                chunk.split(self.threads)
            } else {
                vec![chunk]
            };
            parts.resize_with(pieces.len(), Piece::default);
            check_parallel(&pieces, &mut parts);
            for (chunk, piece) in pieces.iter().zip(&mut parts) {
                // Stream pieces carry absolute line numbers already.
                let piece = std::mem::take(piece);
                seq.consume_numbered(piece, chunk.bytes);
                if seq.done {
                    break;
                }
            }
            if let Some(p) = &mut self.progress {
                p(reader.source_pos());
            }
            if self.stop_at_footer && seq.order.footer_seen() {
                reader.finish_following();
            }
        }
        Ok(())
    }
}

/// The checked lines of one piece of a trace.
#[derive(Default)]
struct Piece {
    /// Byte offset of the piece in the trace.
    offset: usize,
    /// Length of the piece in bytes.
    len: usize,
    /// Lines in the piece.
    lines: u64,
    facts: Vec<Fact>,
    local: Vec<Diagnostic>,
}

fn check_piece(chunk: &Chunk<'_>, piece: &mut Piece) {
    piece.facts.clear();
    piece.local.clear();
    piece.offset = chunk.offset as usize;
    piece.len = chunk.bytes.len();
    let local = &mut piece.local;
    piece.facts.extend(chunk.lines().map(|raw| check_line(&raw, local)));
    piece.lines = piece.facts.len() as u64;
}

/// The ordering pass and the bookkeeping around it: allowed rules, counts, --max-errors.
struct Sequential<F> {
    order: Order,
    report: Report,
    allowed: Vec<Rule>,
    max_errors: Option<u64>,
    emit: F,
    last_line: u64,
    done: bool,
}

impl<F: FnMut(Diagnostic)> Sequential<F> {
    /// Reports a diagnostic unless its rule is allowed; true when --max-errors is reached.
    fn emit(&mut self, d: Diagnostic) -> bool {
        filter(&self.allowed, self.max_errors, &mut self.report, &mut self.emit, d)
    }

    /// A piece whose line numbers start at 1: renumbers them after the lines seen so far.
    fn consume(&mut self, mut piece: Piece, bytes: &[u8]) {
        let base = self.last_line;
        for f in &mut piece.facts {
            f.line += base;
        }
        for d in &mut piece.local {
            d.line += base;
        }
        self.consume_numbered(piece, bytes);
    }

    /// Applies the facts of a piece in order, with its local diagnostics before each line's own.
    fn consume_numbered(&mut self, piece: Piece, bytes: &[u8]) {
        let mut local = piece.local.into_iter().peekable();
        for fact in &piece.facts {
            while let Some(d) = local.next_if(|d| d.line <= fact.line) {
                if self.emit(d) {
                    self.report.stopped_early = true;
                    self.done = true;
                    return;
                }
            }
            let start = fact.offset as usize - piece.offset;
            let line = &bytes[start..start + fact.len];
            let mut stop = false;
            let (allowed, max_errors, report, emit) =
                (&self.allowed, self.max_errors, &mut self.report, &mut self.emit);
            self.order
                .apply(fact, line, &mut |d| stop |= filter(allowed, max_errors, report, emit, d));
            self.last_line = fact.line;
            if stop {
                self.report.stopped_early = true;
                self.done = true;
                return;
            }
        }
    }
}

fn filter(
    allowed: &[Rule],
    max_errors: Option<u64>,
    report: &mut Report,
    emit: &mut impl FnMut(Diagnostic),
    d: Diagnostic,
) -> bool {
    if allowed.contains(&d.rule) {
        return false;
    }
    match d.level() {
        Level::Error => report.errors += 1,
        Level::Warning => report.warnings += 1,
    }
    emit(d);
    max_errors.is_some_and(|m| report.errors >= m)
}

fn end_diag(rule: Rule, line: u64, offset: u64, message: String) -> Diagnostic {
    let help = (rule == Rule::TruncatedStream)
        .then_some("the writer probably crashed; `jets repair` keeps the complete lines");
    Diagnostic { rule, line, column: 1, offset, message, source: String::new(), note: None, help }
}

/// Checks each piece on its own thread (the first on this one).
fn check_parallel(chunks: &[Chunk<'_>], parts: &mut [Piece]) {
    let Some(((first_part, rest_parts), (first_chunk, rest_chunks))) =
        parts.split_first_mut().zip(chunks.split_first())
    else {
        return;
    };
    if rest_chunks.is_empty() {
        check_piece(first_chunk, first_part);
        return;
    }
    std::thread::scope(|s| {
        for (chunk, part) in rest_chunks.iter().zip(rest_parts.iter_mut()) {
            s.spawn(move || check_piece(chunk, part));
        }
        check_piece(first_chunk, first_part);
    });
}

/// Validates a trace held in memory with default settings; returns every diagnostic and the
/// report. For tests, fuzzing and small traces.
pub fn validate_bytes(bytes: &[u8]) -> (Vec<Diagnostic>, Report) {
    let mut diagnostics = Vec::new();
    match Reader::from_read(Cursor::new(bytes.to_vec()), "<memory>")
        .and_then(|mut r| Validator::new().run(&mut r, |d| diagnostics.push(d)))
    {
        Ok(report) => (diagnostics, report),
        // Only a decoder that cannot start gets here (memory cannot fail to read): the bytes
        // are then an unreadable compressed stream, which is what E019 reports.
        Err(e) => {
            let message = format!("the data cannot be read: {e}");
            diagnostics.push(end_diag(Rule::TruncatedStream, 1, 0, message));
            (diagnostics, Report { errors: 1, ..Report::default() })
        }
    }
}

#[cfg(test)]
mod tests;
