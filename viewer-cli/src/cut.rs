//! `jets cut --capture SETTING IN -o OUT`: a part of a trace already written, chosen with the
//! `JETS_CAPTURE` grammar (a window of cycles, types, events, units, a sample, a flight recorder
//! with its triggers), for a trace too large for its viewer or a window found only afterwards.
//!
//! The cut replays IN through the SDK, a line at a time in the file's order, into a trace opened
//! with SETTING: the SDK's own capture control chooses what is written, so OUT is what the
//! simulator would have written under `JETS_CAPTURE=SETTING` (the ancestors of what is kept with
//! their real start, the ends of what is written, the footer naming the setting and counting
//! what was left out) with one rule set, the writer's. Spec: CAP-CUT-1 to CAP-CUT-4 in
//! spec/write-decisions.md.

use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use anyhow::{anyhow, bail, Context, Result};
use jets::capture::{Capture, FooterCapture, Recorder, Trigger};
use jets::format::{Line, Status, Str, Value};
use jets::{Metadata, RecordHandle, Trace, TraceBuilder};
use serde_json::{Map, Value as Json};

use crate::formats::timeline::read_trace;

/// Arguments of `jets cut`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The part to keep, in the `JETS_CAPTURE` grammar: `clk=A..B`, `types=`, `events=`,
    /// `units=`, `sample=TYPE:N`, `recorder=CYCLES;trigger=error` ... (README, "Tracing a long
    /// run").
    #[arg(long)]
    pub capture: String,
    /// The whole run's trace.
    pub input: PathBuf,
    /// The trace to write (`-` for standard output).
    #[arg(short, long)]
    pub output: PathBuf,
    /// Write the cut of a trace whose lines have members the spec does not name (JETS allows
    /// them; the SDK writes none), leaving those members out, and say which. Without it such a
    /// trace is refused.
    #[arg(long)]
    pub drop_unnamed_members: bool,
}

/// Runs `jets cut`.
pub fn run(a: Args) -> Result<ExitCode> {
    let capture: Capture =
        a.capture.parse().map_err(|e| anyhow!("--capture {:?}: {e}", a.capture))?;
    if let Some(why) = not_in_a_file(&capture) {
        bail!("--capture {:?}: {why}", a.capture);
    }
    let to_stdout = a.output.as_os_str() == "-";
    if !to_stdout && same_file(&a.input, &a.output) {
        bail!("{}: the output would overwrite the input", a.output.display());
    }
    let mut replay = Replay::new(capture, &a.output, to_stdout, a.drop_unnamed_members);
    let read = read_trace(&a.input, |_, line| replay.line(line));
    let name = a.input.display();
    let summary = match (read, replay.trace.take()) {
        (Ok(()), Some(trace)) => {
            // Records still open in IN stay open in OUT: their handles go without an end.
            replay.open.clear();
            trace.close_at(replay.last_clk).with_context(|| format!("{}", a.output.display()))?
        }
        (Ok(()), None) => bail!("{name}: no header line, not a JETS trace"),
        (Err(e), trace) => {
            // No footer follows what was written: standard output ends without one (a reader
            // sees the part is incomplete), and a file is removed.
            replay.stdout.stop();
            replay.open.clear();
            drop(trace.map(|t| t.close()));
            if !to_stdout {
                let _ = std::fs::remove_file(&a.output);
            }
            return Err(e);
        }
    };
    for (member, lines) in &replay.dropped {
        let s = if *lines == 1 { "" } else { "s" };
        eprintln!(
            "jets cut: left out the member {member:?}, which the spec does not name, of {lines} \
             line{s}"
        );
    }
    if !to_stdout {
        let left = summary.left_out;
        println!(
            "jets cut: {} -> {}: {} records, {} events, {} annotations written; left out {} \
             records, {} events, {} annotations, {} record_ends",
            name,
            a.output.display(),
            summary.records,
            summary.events,
            summary.annotations,
            left.records,
            left.events,
            left.annotations,
            left.record_ends,
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// Why a setting has no meaning for a trace already written (CAP-CUT-4), if it has none: its
/// clauses follow the running simulator, not the lines of the file: a cut could only leave its
/// output empty or ignore them, without a word.
fn not_in_a_file(c: &Capture) -> Option<&'static str> {
    if c.count {
        Some("`count` writes no line; `jets stats` counts a trace")
    } else if c.off {
        Some("`off` writes no line")
    } else if c.roi {
        Some("`roi` follows the simulator's region-of-interest calls, which a trace does not hold")
    } else if c.triggers.iter().any(|t| matches!(t, Trigger::Signal(_))) {
        Some("a signal trigger dumps on a signal to the running simulator, which a cut has not")
    } else if matches!(c.recorder, Some(Recorder::Bytes(_))) {
        // The memory a line takes queued depends on how the simulator made it (a name borrowed
        // or copied, fields typed or as JSON): the replay's lines take other sizes, so its
        // window would hold other lines than the run's.
        Some(
            "`recorder=NMiB` counts the memory the simulator's lines took as it made them, \
             which a trace does not tell; cut with `recorder=CYCLES`",
        )
    } else {
        None
    }
}

/// Standard output, until a failed cut stops it: the SDK's close then cannot add a footer to
/// the lines of a part that is not whole (CAP-CUT-4).
#[derive(Clone, Default)]
struct Stoppable(Arc<AtomicBool>);

impl Stoppable {
    fn stop(&self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

impl Write for Stoppable {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self.0.load(Ordering::SeqCst) {
            true => Err(std::io::Error::other("the cut failed: no footer")),
            false => std::io::stdout().write(buf),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stdout().flush()
    }
}

/// Whether two paths name one existing file.
fn same_file(a: &Path, b: &Path) -> bool {
    match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

/// A record's or an event's builder `$b` given IN's `data` object: its scalars as typed fields,
/// the rest as JSON merged after them ([`split_data`]). A macro: the two builders share these
/// methods but no trait.
macro_rules! with_data {
    ($b:expr, $data:expr) => {{
        let (fields, rest) = split_data($data);
        let b = fields.into_iter().fold($b, |b, (k, v)| b.field(k, v));
        match rest {
            Some(rest) => b.data_json(&rest),
            None => b,
        }
    }};
}

/// The state of a replay: the trace being written and IN's open records by IN's ids.
struct Replay<'a> {
    capture: Option<Capture>,
    output: &'a Path,
    to_stdout: bool,
    /// Standard output, when OUT is `-`.
    stdout: Stoppable,
    trace: Option<Trace>,
    open: HashMap<u64, RecordHandle>,
    last_clk: u64,
    footer_seen: bool,
    /// Leave out members the spec does not name (counted here by name) rather than refuse.
    drop_unnamed: bool,
    dropped: BTreeMap<String, u64>,
}

impl<'a> Replay<'a> {
    fn new(capture: Capture, output: &'a Path, to_stdout: bool, drop_unnamed: bool) -> Replay<'a> {
        Replay {
            capture: Some(capture),
            output,
            to_stdout,
            stdout: Stoppable::default(),
            trace: None,
            open: HashMap::new(),
            last_clk: 0,
            footer_seen: false,
            drop_unnamed,
            dropped: BTreeMap::new(),
        }
    }

    /// Members the spec does not name (JETS allows them) cannot be written again by the SDK:
    /// refused, or with `--drop-unnamed-members` counted as left out, never dropped without a
    /// word.
    fn unnamed<'k>(&mut self, members: impl IntoIterator<Item = &'k String>) -> Result<()> {
        for k in members {
            if !self.drop_unnamed {
                bail!(
                    "the line has a member the spec does not name ({k:?}), which the SDK does not \
                     write: `--drop-unnamed-members` cuts the trace without such members"
                );
            }
            *self.dropped.entry(k.clone()).or_default() += 1;
        }
        Ok(())
    }

    /// A line at `clk` on the record IN calls `id`, which must not begin before it: asked here,
    /// before the SDK would refuse it, so that the error names IN's id rather than the replay's.
    fn at(&self, id: u64, clk: u64) -> Result<&RecordHandle> {
        let r = self.record(id)?;
        if clk < r.start_clk() {
            bail!("clk {clk} is before the start of record {id} at clk {}", r.start_clk());
        }
        Ok(r)
    }

    /// The trace opened by the header line.
    fn trace(&self) -> Result<&Trace> {
        self.trace.as_ref().ok_or_else(|| anyhow!("a line before the header"))
    }

    /// The open record IN calls `id`.
    fn record(&self, id: u64) -> Result<&RecordHandle> {
        self.open.get(&id).ok_or_else(|| no_record(id))
    }

    /// The final status of a `record_end` (a `status` member of the spec's vocabulary, as the
    /// SDK writes one), or `None`; other members as [`Replay::unnamed`] says.
    fn end_status(&mut self, extra: &Map<String, Json>) -> Result<Option<Status>> {
        let mut status = None;
        for (k, v) in extra {
            match (k == "status").then(|| v.as_str().map(str::parse::<Status>)).flatten() {
                Some(Ok(s)) => status = Some(s),
                _ if k == "status" => bail!("status {v} is not one of the spec's"),
                _ => self.unnamed([k])?,
            }
        }
        Ok(status)
    }

    fn line(&mut self, line: Line<'_>) -> Result<()> {
        if self.footer_seen {
            bail!("a line after the footer");
        }
        if let Some(clk) = line.clk() {
            self.last_clk = self.last_clk.max(clk);
        }
        match line {
            Line::Header(h) => {
                self.unnamed(h.extra.keys())?;
                if h.version != jets::format::VERSION {
                    bail!(
                        "version {:?}: this build writes JETS {}",
                        h.version,
                        jets::format::VERSION
                    );
                }
                let Some(capture) = self.capture.take() else { bail!("a second header") };
                // IN's metadata, its `tool` included, replaces the SDK's own.
                let metadata =
                    h.metadata.into_iter().fold(Metadata::new(), |m, (k, v)| m.insert(k, v));
                let builder = TraceBuilder::new().capture(capture);
                let trace = if self.to_stdout {
                    builder.writer(self.stdout.clone(), metadata)
                } else {
                    builder.create(self.output, metadata)
                };
                self.trace = Some(trace.with_context(|| format!("{}", self.output.display()))?);
            }
            Line::Record(r) => {
                self.unnamed(r.extra.keys())?;
                if self.open.contains_key(&r.id) {
                    bail!("record id {} begins a second time while it is open", r.id);
                }
                let (name, record_type) = (text(r.name), text(r.record_type));
                let b = match r.parent_id {
                    Some(p) => self.at(p, r.clk)?.child_at(r.clk, name, record_type),
                    None => self.trace()?.root(name, record_type),
                };
                let mut b = b.description(text(r.description));
                if let Some(data) = r.data {
                    b = with_data!(b, data);
                }
                let handle = b.begin_at(r.clk)?;
                self.open.insert(r.id, handle);
            }
            Line::Event(e) => {
                self.unnamed(e.extra.keys())?;
                let mut b = self
                    .at(e.record_id, e.clk)?
                    .event_at(e.clk, text(e.name))
                    .description(text(e.description));
                match e.data {
                    Some(Json::Object(data)) => b = with_data!(b, data),
                    Some(other) => b = b.data_json(&other.to_string()),
                    None => {}
                }
                b.emit()?;
            }
            Line::Annotation(n) => {
                self.unnamed(n.extra.keys())?;
                self.record(n.record_id)?
                    .annotation(text(n.name))
                    .description(text(n.description))
                    .data_json(&n.data.to_string())
                    .emit()?;
            }
            Line::RecordEnd(e) => {
                let status = self.end_status(&e.extra)?;
                self.at(e.record_id, e.clk)?;
                let handle =
                    self.open.remove(&e.record_id).ok_or_else(|| no_record(e.record_id))?;
                match status {
                    Some(s) => handle.end_with_status_at(e.clk, s)?,
                    None => handle.end_at(e.clk)?,
                }
            }
            Line::Footer(f) => {
                self.footer_seen = true;
                if let Some(c) = FooterCapture::read(&f).filter(is_part) {
                    bail!(
                        "the trace is itself a part of its run ({}); cut the whole run's trace, \
                         so that the footer can say what was left out",
                        c.describe()
                    );
                }
                if let Some(end) = f.capture_end_clk {
                    self.last_clk = self.last_clk.max(end);
                }
            }
        }
        Ok(())
    }
}

/// Whether a footer's capture members say the file is less than the whole run.
fn is_part(c: &FooterCapture) -> bool {
    c.spelled != "full" || c.left_out != jets::capture::LeftOut::default() || c.counted.is_some()
}

/// A text of IN as the SDK's: the empty text static, as the SDK's own lines have it.
fn text(s: std::borrow::Cow<'_, str>) -> Str {
    match s.is_empty() {
        true => Str::EMPTY,
        false => Str::from(s.into_owned()),
    }
}

fn no_record(id: u64) -> anyhow::Error {
    anyhow!("record_id {id} is not an open record: it never began, or it ended before this line")
}

/// A `data` object as typed fields (its scalars, which a simulator gives typed, so that they are
/// written as the run wrote them) and the JSON text of the rest (arrays and objects), merged
/// after them by the SDK.
fn split_data(data: Map<String, Json>) -> (Vec<(Str, Value)>, Option<String>) {
    let mut fields = Vec::with_capacity(data.len());
    let mut rest = Map::new();
    for (k, v) in data {
        let typed = match &v {
            Json::Null => Some(Value::Null),
            Json::Bool(b) => Some(Value::Bool(*b)),
            Json::Number(n) => n
                .as_u64()
                .map(Value::U64)
                .or_else(|| n.as_i64().map(Value::I64))
                .or_else(|| n.as_f64().map(Value::F64)),
            Json::String(s) => Some(Value::from(s.clone())),
            Json::Array(_) | Json::Object(_) => None,
        };
        match typed {
            Some(t) => fields.push((Str::from(k), t)),
            None => {
                rest.insert(k, v);
            }
        }
    }
    let rest = (!rest.is_empty()).then(|| Json::Object(rest).to_string());
    (fields, rest)
}
