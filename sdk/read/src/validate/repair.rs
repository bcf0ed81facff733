//! Repair: copy the valid lines of a damaged trace (a crashed writer's file) into a valid one.

use std::io::{self, Write};

use super::check::{check_line, Kind};
use super::order::Order;
use crate::{ReadError, Reader};
use jets_format::{Footer, Header, RecordEnd};

/// What [`repair`] does beyond dropping bad lines.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RepairOptions {
    /// Ends every record still open at the last `clk` of the trace, children before parents.
    pub end_open_records: bool,
}

/// What [`repair`] did.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RepairReport {
    /// Lines copied unchanged.
    pub kept: u64,
    /// Lines dropped because they break a rule (invalid JSON, missing fields, unknown record,
    /// duplicate id, ...), with the first few line numbers.
    pub dropped: u64,
    /// Up to 20 of the dropped line numbers, for the message.
    pub dropped_lines: Vec<u64>,
    /// The torn last line was dropped.
    pub torn_tail: bool,
    /// A compressed input was cut short (its complete lines were kept).
    pub truncated: bool,
    /// The input had no valid header; a minimal one was written.
    pub header_added: bool,
    /// The input's footer lines (dropped: a correct footer is written at the end).
    pub old_footers: u64,
    /// `record_end` lines added for open records.
    pub ended: u64,
    /// The footer written.
    pub footer: Footer,
}

/// Why a repair failed.
#[derive(Debug, thiserror::Error)]
pub enum RepairError {
    /// Reading the input failed.
    #[error(transparent)]
    Read(#[from] ReadError),
    /// Writing the output failed.
    #[error("writing the repaired trace: {0}")]
    Write(#[from] io::Error),
}

/// Copies every complete, valid line of `reader` to `out`, drops a torn tail and every line that
/// breaks a rule (and, transitively, what refers to a dropped record), drops old footers, and
/// writes a footer with the exact totals of what was kept. Warnings do not drop a line.
///
/// ```
/// use jets_read::validate::{repair, validate_bytes, RepairOptions};
/// let crashed = concat!(
///     r#"{"type":"header","version":"2.0","metadata":{}}"#, "\n",
///     r#"{"clk":3,"type":"record","name":"r","record_type":"T","id":1,"parent_id":null,"description":""}"#, "\n",
///     r#"{"clk":7,"type":"ev"#,
/// );
/// let mut reader = jets_read::Reader::from_read(std::io::Cursor::new(crashed), "crash.jets")?;
/// let mut out = Vec::new();
/// let report = repair(&mut reader, &mut out, RepairOptions { end_open_records: true })?;
/// assert!(report.torn_tail);
/// assert_eq!(report.ended, 1);
/// assert!(validate_bytes(&out).1.is_valid());
/// # Ok::<(), jets_read::validate::RepairError>(())
/// ```
pub fn repair(
    reader: &mut Reader,
    out: &mut dyn Write,
    options: RepairOptions,
) -> Result<RepairReport, RepairError> {
    let mut out = io::BufWriter::with_capacity(1 << 20, out);
    let mut order = Order::new(true);
    let mut report = RepairReport::default();
    let mut scratch = Vec::new();
    let mut buf = Vec::new();
    let mut started = false;
    // The ordering pass sees output line numbers: a line is numbered only once it is kept.
    let mut written = 0u64;
    while let Some(raw) = reader.next_line() {
        let raw = raw?;
        scratch.clear();
        let mut fact = check_line(&raw, &mut scratch);
        if !started {
            started = true;
            if fact.kind != Kind::Header || fact.error {
                // Without a header no reader accepts the trace; the original is unknown.
                write_header(&mut out, &mut order, &mut buf)?;
                report.header_added = true;
                written = 1;
            }
        }
        if !raw.terminated && fact.error {
            report.torn_tail = true;
            continue;
        }
        if let Kind::Footer(_) = fact.kind {
            report.old_footers += 1;
            continue;
        }
        fact.line = written + 1;
        let (counts, max_clk) = (order.counts, order.max_clk);
        if fact.error || order.apply(&fact, raw.bytes, &mut |_| {}) {
            // A dropped line is not counted in the footer.
            (order.counts, order.max_clk) = (counts, max_clk);
            report.dropped += 1;
            if report.dropped_lines.len() < 20 {
                report.dropped_lines.push(raw.number);
            }
            continue;
        }
        out.write_all(raw.bytes)?;
        out.write_all(b"\n")?;
        written += 1;
        report.kept += 1;
    }
    if !started {
        write_header(&mut out, &mut order, &mut buf)?;
        report.header_added = true;
    }
    report.truncated = reader.truncated().is_some();
    if options.end_open_records {
        let end = order.max_clk.unwrap_or(0);
        for (id, _) in order.open_records() {
            buf.clear();
            RecordEnd { clk: end, record_id: id, extra: Default::default() }.write_json(&mut buf);
            out.write_all(&buf)?;
            report.ended += 1;
        }
        order.counts.record_ends += report.ended;
        order.open -= report.ended;
    }
    let mut footer = Footer {
        capture_end_clk: order.max_clk,
        total_records: Some(order.counts.records),
        total_annotations: Some(order.counts.annotations),
        total_events: Some(order.counts.events),
        extra: Default::default(),
    };
    footer.extra.insert("open_records".into(), order.open.into());
    buf.clear();
    footer.write_json(&mut buf);
    out.write_all(&buf)?;
    out.flush()?;
    report.footer = footer;
    Ok(report)
}

/// Writes a minimal header (version 2.0, empty metadata) as line 1.
fn write_header(out: &mut dyn Write, order: &mut Order, buf: &mut Vec<u8>) -> io::Result<()> {
    buf.clear();
    Header::new(serde_json::Map::new()).write_json(buf);
    out.write_all(buf)?;
    let fact = super::check::Fact { line: 1, offset: 0, len: 0, error: false, kind: Kind::Header };
    order.apply(&fact, buf, &mut |_| {});
    Ok(())
}
