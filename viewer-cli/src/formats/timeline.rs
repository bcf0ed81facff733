//! The shared core of the timeline converters (Chrome, Perfetto, DFTracer): a JETS trace as
//! processes, lanes, slices and instants, streamed with memory that grows with open records only.
//!
//! * A root record becomes a **process**; everything below it lives in that process.
//! * A record becomes a **slice** when it ends (or at the end of the trace when it never does). It
//!   is placed on the first **lane** of its process where it nests: every slice already on the lane
//!   is either disjoint from it or inside it. Viewers draw one lane per thread and require slices on
//!   a thread to nest, which pipelined (overlapping) records would otherwise break.
//! * An event becomes an **instant** on its process's event lane (lane 0): its record's lane is not
//!   known until the record ends, and holding events back would make memory grow with events.
//!
//! Each lane remembers only its *maximal* slices (those not inside another one). A new slice fits
//! when it is disjoint from or contains each of them; it is never placed inside an existing one, so
//! the nesting inside every maximal slice is proper by induction. A lane keeps at most
//! [`LANE_MEMORY`] maximal slices; older ones are forgotten behind a floor below which nothing new
//! may start on that lane, which keeps memory bounded and the placement correct.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use anyhow::{anyhow, bail, Context, Result};
use jets::capture::FooterCapture;
use jets::format::{Header, Line};
use serde_json::{Map, Value};

/// Maximal slices a lane remembers before raising its floor.
pub const LANE_MEMORY: usize = 4096;
/// Maximal slices looked at when choosing a lane for a child of an open record.
pub const PREFER_SCAN: usize = 64;

/// A root record, drawn as a process.
#[derive(Debug)]
pub struct Process<'a> {
    /// The root record's id (used as the process id).
    pub pid: u64,
    /// The root record's name.
    pub name: &'a str,
    /// The root record's type.
    pub record_type: &'a str,
    /// Order of appearance, from 0.
    pub sort_index: u64,
}

/// A record with its start and end.
#[derive(Debug)]
pub struct Slice<'a> {
    /// The process (root record id).
    pub pid: u64,
    /// The lane, from 1 (lane 0 carries the instants).
    pub lane: u32,
    /// The record.
    pub record: &'a OpenRecord,
    /// End cycle.
    pub end: u64,
    /// False when the record never ended and `end` is the end of the trace.
    pub ended: bool,
}

/// An event on a record.
#[derive(Debug)]
pub struct Instant<'a> {
    /// The process (root record id).
    pub pid: u64,
    /// The event.
    pub event: &'a jets::format::Event<'a>,
    /// The record's name, when the record is still open.
    pub record_name: Option<&'a str>,
}

/// What a timeline converter writes.
pub trait TimelineSink {
    /// The header, before anything else. `mhz` is the clock (1.0 when the trace gives none).
    fn header(&mut self, header: &Header<'_>, mhz: f64, stated: bool) -> Result<()>;
    /// A new process.
    fn process(&mut self, p: &Process<'_>) -> Result<()>;
    /// A lane in a process, or a new name for it: the lane is named when it is created and
    /// renamed when a record that names it better lands on it (CV-NEST-2), so this is called
    /// once or more per lane, always before the slice that caused it.
    fn lane(&mut self, pid: u64, lane: u32, name: &str) -> Result<()>;
    /// A record began (it becomes a slice when it ends). Most sinks need nothing here.
    fn begin(&mut self, _pid: u64, _record: &OpenRecord) -> Result<()> {
        Ok(())
    }
    /// A finished slice.
    fn slice(&mut self, s: &Slice<'_>) -> Result<()>;
    /// An event.
    fn instant(&mut self, i: &Instant<'_>) -> Result<()>;
    /// An annotation whose record had already ended (so it could not go into the slice's args).
    fn late_annotation(&mut self, pid: u64, a: &jets::format::Annotation<'_>) -> Result<()>;
    /// Where a trace that is a part of its run says so (CV-CAP-1), once, before
    /// [`TimelineSink::finish`]; a sink that has no way to show it leaves this as it is.
    fn capture(&mut self, _marks: &[CaptureMark]) -> Result<()> {
        Ok(())
    }
    /// The end of the trace.
    fn finish(&mut self, end_clk: u64) -> Result<()>;
}

/// A moment a converter marks across the whole timeline of a trace that capture control made a
/// part of its run (CV-CAP-1): a `clk=A..B` window's edges, the last cycle written before a size
/// limit stopped capture, or, for any other setting, the first cycle, each named and carrying
/// the line `jets stats` prints ([`jets::capture::FooterCapture::describe`]).
#[derive(Debug, Clone, PartialEq)]
pub struct CaptureMark {
    /// Its cycle.
    pub clk: u64,
    /// `capture window begins`, `capture window ends`, `capture stops: size limit`, or
    /// `capture: a part of the run`.
    pub name: &'static str,
    /// What the footer says of capture.
    pub text: String,
}

/// The marks of a trace whose footer says `capture`, whose lines span `first..=last` and whose
/// timeline ends at `end` (the footer's `capture_end_clk` may lie past its last line): the edges
/// of a single `clk=` window that lie in `first..=end`, and `last` when a size limit stopped
/// capture there (CAP-LIM-1: the run went on, its lines were not written); or else one mark at
/// `first`. A repeated window (`every=`) gets no edge marks: its edges may be millions.
fn capture_marks(capture: &FooterCapture, first: u64, last: u64, end: u64) -> Vec<CaptureMark> {
    let text = capture.describe();
    let setting = capture.setting();
    let mut marks = Vec::new();
    if let Some(w) = setting.as_ref().filter(|s| s.every.is_none()).and_then(|s| s.window.clone()) {
        for (clk, name) in [(w.start, "capture window begins"), (w.end, "capture window ends")] {
            if (first..=end).contains(&clk) {
                marks.push(CaptureMark { clk, name, text: text.clone() });
            }
        }
    }
    if capture.limit_reached {
        marks.push(CaptureMark {
            clk: last,
            name: "capture stops: size limit",
            text: text.clone(),
        });
        marks.sort_by_key(|m| m.clk);
    }
    if marks.is_empty() {
        marks.push(CaptureMark { clk: first, name: "capture: a part of the run", text });
    }
    marks
}

/// A record that has begun and not yet become a slice.
#[derive(Debug, Clone)]
pub struct OpenRecord {
    /// Record id.
    pub id: u64,
    /// Parent id.
    pub parent_id: Option<u64>,
    /// Name.
    pub name: String,
    /// Record type.
    pub record_type: String,
    /// Description.
    pub description: String,
    /// Start cycle.
    pub start: u64,
    /// `data`, if any.
    pub data: Option<Map<String, Value>>,
    /// Annotations seen while open: (name, description, data).
    pub annotations: Vec<(String, String, Value)>,
}

#[derive(Default)]
struct Lane {
    /// Maximal slices: start -> (end, record id). Disjoint, so ordered by end too.
    maximal: BTreeMap<u64, (u64, u64)>,
    floor: u64,
}

/// The starts of the slices a slice over `[s, e]` holds: `s..e`, or `s` alone when `e <= s`.
/// Inclusive, so that a slice ending at the last cycle (`u64::MAX`) needs no `e + 1`.
fn starts_within(s: u64, e: u64) -> std::ops::RangeInclusive<u64> {
    s..=e.saturating_sub(1).max(s)
}

impl Lane {
    /// Whether `[s, e]` of record `id` nests here: it partially overlaps no maximal slice, lies
    /// inside none, and contains only slices of its own descendants (a viewer draws a slice
    /// inside another as its child, so unrelated records must not nest).
    fn fits(&self, s: u64, e: u64, id: u64, descends: &dyn Fn(u64, u64) -> bool) -> bool {
        if s < self.floor {
            return false;
        }
        if let Some((_, &(pe, _))) = self.maximal.range(..s).next_back() {
            if pe > s {
                return false;
            }
        }
        if let Some(&(me, _)) = self.maximal.get(&s) {
            if me > e {
                return false;
            }
        }
        self.maximal.range(starts_within(s, e)).all(|(_, &(me, m))| me <= e && descends(m, id))
    }

    /// Whether open parent `p` (started at `ps`) could later be placed here with a child ending
    /// at `e`: a preference, not a guarantee, so only the latest [`PREFER_SCAN`] maximal slices
    /// are looked at (a full scan from the parent's start would make packing quadratic).
    fn prefers(&self, ps: u64, e: u64, p: u64, descends: &dyn Fn(u64, u64) -> bool) -> bool {
        if ps < self.floor {
            return false;
        }
        if let Some((_, &(pe, _))) = self.maximal.range(..ps).next_back() {
            if pe > ps {
                return false;
            }
        }
        self.maximal
            .range(starts_within(ps, e))
            .rev()
            .take(PREFER_SCAN)
            .all(|(_, &(me, m))| me <= e && descends(m, p))
    }

    fn place(&mut self, s: u64, e: u64, id: u64) {
        let inside: Vec<u64> = self.maximal.range(starts_within(s, e)).map(|(&k, _)| k).collect();
        for k in inside {
            self.maximal.remove(&k);
        }
        self.maximal.insert(s, (e, id));
        while self.maximal.len() > LANE_MEMORY {
            if let Some((_, (end, _))) = self.maximal.pop_first() {
                self.floor = self.floor.max(end);
            }
        }
    }
}

/// What a lane is named after (CV-NEST-2): the outermost record placed on it below the
/// process's root record ("name (record_type)"), or, when several records share that depth,
/// their type and the lane number ("Instruction 3"). The root record names a lane only when
/// nothing else is on it: the process already carries its name.
#[derive(Default)]
struct LaneName {
    /// Depth of the naming record(s); `None` before the first slice.
    depth: Option<u32>,
    namer: u64,
    record_type: String,
    several: bool,
}

impl LaneName {
    /// Takes record `rec` at `depth` into account; the lane's new name when it changes.
    fn add(&mut self, rec: &OpenRecord, depth: u32, lane: u32) -> Option<String> {
        // The root is the process itself: the least telling name for one of its lanes.
        let d = if depth == 0 { u32::MAX } else { depth };
        match self.depth {
            Some(cur) if d > cur => None,
            Some(cur) if d == cur => {
                if self.several || self.namer == rec.id {
                    return None;
                }
                self.several = true;
                Some(format!("{} {lane}", self.record_type))
            }
            _ => {
                *self = LaneName {
                    depth: Some(d),
                    namer: rec.id,
                    record_type: rec.record_type.clone(),
                    several: false,
                };
                Some(format!("{} ({})", rec.name, rec.record_type))
            }
        }
    }
}

/// Packs the slices of one process into lanes where they nest.
#[derive(Default)]
pub struct LanePacker {
    lanes: Vec<Lane>,
}

impl LanePacker {
    /// The lane (from 1) for record `id` over `[s, e]`, and whether the lane is new.
    /// `descends(a, b)` tells whether record `a` is a descendant of record `b`. With
    /// `open_parent` (its id and start), the slice goes to a lane where that parent will fit too,
    /// so parents end up on their children's lane; a new lane if there is none.
    pub fn assign(
        &mut self,
        s: u64,
        e: u64,
        id: u64,
        open_parent: Option<(u64, u64)>,
        descends: &dyn Fn(u64, u64) -> bool,
    ) -> (u32, bool) {
        let e = e.max(s);
        let found = match open_parent {
            Some((p, ps)) => self
                .lanes
                .iter()
                .position(|l| l.prefers(ps.min(s), e, p, descends) && l.fits(s, e, id, descends)),
            None => self.lanes.iter().position(|l| l.fits(s, e, id, descends)),
        };
        let (i, new) = match found {
            Some(i) => (i, false),
            None => {
                self.lanes.push(Lane::default());
                (self.lanes.len() - 1, true)
            }
        };
        self.lanes[i].place(s, e, id);
        (i as u32 + 1, new)
    }
}

/// Streams a trace into a [`TimelineSink`].
pub struct Timeline<S> {
    sink: S,
    open: HashMap<u64, OpenRecord>,
    /// Every record's process and parent: children may begin after their parent ended, and
    /// lane packing asks who descends from whom.
    family: HashMap<u64, (u64, Option<u64>, u32)>,
    /// What each (process, lane) is named after (CV-NEST-2).
    lane_names: HashMap<(u64, u32), LaneName>,
    packers: HashMap<u64, LanePacker>,
    processes: u64,
    /// The first cycle of the lines (where a part of a run is marked when it has no window).
    first_clk: Option<u64>,
    end_clk: u64,
    footer_end: Option<u64>,
    /// What the footer says of capture control (CV-CAP-1).
    capture: Option<FooterCapture>,
    header_seen: bool,
}

impl<S: TimelineSink> Timeline<S> {
    /// A timeline writing to `sink`.
    pub fn new(sink: S) -> Self {
        Timeline {
            sink,
            open: HashMap::new(),
            family: HashMap::new(),
            lane_names: HashMap::new(),
            packers: HashMap::new(),
            processes: 0,
            first_clk: None,
            end_clk: 0,
            footer_end: None,
            capture: None,
            header_seen: false,
        }
    }

    /// Feeds one line.
    pub fn line(&mut self, line: Line<'_>) -> Result<()> {
        // The sinks write their file's opening from the header: without a header first, or with
        // a second one, what they write would not be a file of their format (E005, E008).
        match (&line, self.header_seen) {
            (Line::Header(_), true) => {
                bail!("a second header: the header must be the first line only")
            }
            (Line::Header(_), false) => self.header_seen = true,
            (_, false) => bail!("the trace does not start with a header line"),
            (_, true) => {}
        }
        if let Some(clk) = line.clk() {
            self.end_clk = self.end_clk.max(clk);
            self.first_clk = Some(self.first_clk.map_or(clk, |f| f.min(clk)));
        }
        match line {
            Line::Header(h) => {
                let (mhz, stated) = match h.clock_frequency_mhz() {
                    Some(f) => (f, true),
                    None => (1.0, false),
                };
                self.sink.header(&h, mhz, stated)?;
            }
            Line::Record(r) => {
                let (pid, depth) = match r.parent_id {
                    None => {
                        self.sink.process(&Process {
                            pid: r.id,
                            name: &r.name,
                            record_type: &r.record_type,
                            sort_index: self.processes,
                        })?;
                        self.processes += 1;
                        (r.id, 0)
                    }
                    Some(p) => match self.family.get(&p) {
                        Some(&(root, _, d)) => (root, d + 1),
                        None => bail!("record {} refers to parent {p}, not seen before it", r.id),
                    },
                };
                self.family.insert(r.id, (pid, r.parent_id, depth));
                let rec = OpenRecord {
                    id: r.id,
                    parent_id: r.parent_id,
                    name: r.name.into_owned(),
                    record_type: r.record_type.into_owned(),
                    description: r.description.into_owned(),
                    start: r.clk,
                    data: r.data,
                    annotations: Vec::new(),
                };
                self.sink.begin(pid, &rec)?;
                self.open.insert(r.id, rec);
            }
            Line::RecordEnd(e) => {
                let Some(rec) = self.open.remove(&e.record_id) else {
                    bail!("record_end for record {} that is not open", e.record_id)
                };
                self.emit_slice(&rec, e.clk, true)?;
            }
            Line::Annotation(a) => {
                if let Some(rec) = self.open.get_mut(&a.record_id) {
                    rec.annotations.push((a.name.into_owned(), a.description.into_owned(), a.data));
                } else {
                    let Some(&(pid, _, _)) = self.family.get(&a.record_id) else {
                        bail!("annotation on record {}, not seen before it", a.record_id)
                    };
                    self.sink.late_annotation(pid, &a)?;
                }
            }
            Line::Event(e) => {
                let Some(&(pid, _, _)) = self.family.get(&e.record_id) else {
                    bail!("event on record {}, not seen before it", e.record_id)
                };
                let record_name = self.open.get(&e.record_id).map(|r| r.name.as_str());
                self.sink.instant(&Instant { pid, event: &e, record_name })?;
            }
            Line::Footer(f) => {
                self.footer_end = f.capture_end_clk;
                self.capture = FooterCapture::read(&f);
            }
        }
        Ok(())
    }

    fn emit_slice(&mut self, rec: &OpenRecord, end: u64, ended: bool) -> Result<()> {
        let pid = self.family.get(&rec.id).map_or(rec.id, |f| f.0);
        let family = &self.family;
        let descends = |mut a: u64, b: u64| -> bool {
            while let Some(&(_, Some(p), _)) = family.get(&a) {
                if p == b {
                    return true;
                }
                a = p;
            }
            false
        };
        let open_parent = rec.parent_id.and_then(|p| self.open.get(&p)).map(|p| (p.id, p.start));
        let (lane, _) = self.packers.entry(pid).or_default().assign(
            rec.start,
            end,
            rec.id,
            open_parent,
            &descends,
        );
        let depth = self.family.get(&rec.id).map_or(0, |f| f.2);
        if let Some(name) = self.lane_names.entry((pid, lane)).or_default().add(rec, depth, lane) {
            self.sink.lane(pid, lane, &name)?;
        }
        self.sink.slice(&Slice { pid, lane, record: rec, end: end.max(rec.start), ended })
    }

    /// Ends the records still open at the end of the trace, then finishes the sink.
    pub fn finish(mut self) -> Result<S> {
        let end = self.end_clk.max(self.footer_end.unwrap_or(0));
        let mut open: Vec<OpenRecord> = self.open.drain().map(|(_, r)| r).collect();
        // Children start no earlier than their parents: placing later starts first lets the
        // enclosing records absorb them on the same lane.
        open.sort_by(|a, b| b.start.cmp(&a.start).then(b.id.cmp(&a.id)));
        for rec in &open {
            self.emit_slice(rec, end, false)?;
        }
        if let Some(c) = &self.capture {
            let first = self.first_clk.unwrap_or(0);
            self.sink.capture(&capture_marks(c, first, self.end_clk, end))?;
        }
        self.sink.finish(end)?;
        Ok(self.sink)
    }
}

/// Reads a JETS trace (plain, `.gz`, `.zst`, `.br`) line by line with [`jets_read::Reader`],
/// handing each parsed line and its number to `f`; errors name the file and the line. A
/// compressed trace cut short is an error too: converting it would silently drop its tail. Shows
/// a progress bar on stderr when it is a terminal.
pub fn read_trace(path: &Path, mut f: impl FnMut(u64, Line<'_>) -> Result<()>) -> Result<()> {
    // The SDK's errors already name the file and the cause; `anyhow!` keeps them from being
    // printed twice (once as the message, once as the source).
    let mut reader = jets_read::Reader::open(path).map_err(|e| anyhow!("{e}"))?;
    let name = reader.name().to_owned();
    // A bar on a TTY only (see crate::progress); updated every 64Ki lines, not per line.
    let progress = crate::progress::Progress::bytes(reader.source_len(), &name);
    let mut set_progress = progress.setter();
    let mut n = 0u64;
    loop {
        if n % (1 << 16) == 0 {
            set_progress(reader.source_pos());
        }
        let Some(raw) = reader.next_line() else { break };
        let raw = raw.map_err(|e| anyhow!("{e}"))?;
        n = raw.number;
        if raw.bytes.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let line = raw.parse().map_err(|e| anyhow!("{name}: {e}"))?;
        f(raw.number, line).with_context(|| format!("{name}:{}", raw.number))?;
    }
    progress.finish();
    if let Some(why) = reader.truncated() {
        bail!("{name}: the trace is cut short after line {n}: {why}");
    }
    if n == 0 {
        bail!("{name}: empty file, not a JETS trace");
    }
    Ok(())
}

/// Writes `clk` cycles at `mhz` as microseconds, exactly to the picosecond, in decimal.
///
/// Going through integer picoseconds keeps every conversion monotone and `ts + dur` equal to the
/// end's own conversion, so nesting in cycles stays nesting in microseconds.
pub fn write_us(out: &mut Vec<u8>, ps: u128) {
    let whole = ps / 1_000_000;
    let frac = ps % 1_000_000;
    out.extend_from_slice(whole.to_string().as_bytes());
    if frac != 0 {
        let digits = format!("{frac:06}");
        out.push(b'.');
        out.extend_from_slice(digits.trim_end_matches('0').as_bytes());
    }
}

/// Cycles to picoseconds at `mhz` (rounded to the nearest picosecond); `None` past what a `u128`
/// holds (about 3.4e38 ps), which a clock far below 1 MHz reaches (`jets validate` accepts any
/// positive `clock_frequency_mhz`): a cast would saturate, and a sum after it wrap (CV-TIME-4).
pub fn cycles_to_ps(clk: u64, mhz: f64) -> Option<u128> {
    if (mhz - 1.0).abs() < f64::EPSILON {
        return Some(clk as u128 * 1_000_000);
    }
    if mhz.fract() == 0.0 && mhz <= 1e6 {
        let m = mhz as u128;
        return Some((clk as u128 * 1_000_000 + m / 2) / m);
    }
    let ps = (clk as f64 * 1e6 / mhz).round();
    // 2^128, exactly a double: below it, the cast is exact to the double's precision.
    (ps.is_finite() && ps < 340_282_366_920_938_463_463_374_607_431_768_211_456.0)
        .then_some(ps as u128)
}

/// The error of a cycle whose time at `mhz` lies past `limit`, the largest time an export can
/// state (CV-TIME-4): refused rather than written saturated or wrapped.
pub fn time_past(clk: u64, mhz: f64, limit: &str) -> anyhow::Error {
    anyhow!("cycle {clk} at {} MHz is past {limit}", crate::human::number(mhz))
}

/// Cycles to nanoseconds at `mhz` (rounded to the nearest), for the formats whose times are
/// integer ns (Perfetto, DFTracer); `None` past what a `u64` holds (a cast would wrap).
pub fn cycles_to_ns(clk: u64, mhz: f64) -> Option<u64> {
    u64::try_from(cycles_to_ps(clk, mhz)?.checked_add(500)? / 1000).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Parents: 1 is the root of 2, 3 and 4; 5 is inside 2.
    fn descends(a: u64, b: u64) -> bool {
        let parent = |x: u64| match x {
            2..=4 => Some(1),
            5 => Some(2),
            _ => None,
        };
        let mut cur = a;
        while let Some(p) = parent(cur) {
            if p == b {
                return true;
            }
            cur = p;
        }
        false
    }

    #[test]
    fn lanes_nest_pipelined_records() {
        let mut p = LanePacker::default();
        assert_eq!(p.assign(2, 3, 5, None, &descends), (1, true)); // stage 5 of instruction 2
        assert_eq!(p.assign(0, 4, 2, None, &descends), (1, false)); // 2 contains its stage
        assert_eq!(p.assign(3, 6, 3, None, &descends), (2, true)); // 3 overlaps 2 partially
        assert_eq!(p.assign(6, 8, 4, None, &descends), (1, false)); // disjoint from 2
        assert_eq!(p.assign(0, 10, 1, None, &descends), (1, false)); // the root contains 2 and 4
    }

    #[test]
    fn unrelated_records_do_not_nest() {
        let mut p = LanePacker::default();
        assert_eq!(p.assign(2, 3, 3, None, &descends), (1, true));
        // 2 contains 3 in time, but 3 is not its descendant.
        assert_eq!(p.assign(0, 4, 2, None, &descends), (2, true));
    }

    #[test]
    fn a_child_goes_where_its_open_parent_will_fit() {
        let mut p = LanePacker::default();
        // 3 ends first and takes lane 1.
        assert_eq!(p.assign(6, 9, 3, None, &descends), (1, true));
        // 5 (child of 2, which started at 4 and is still open) avoids lane 1, where 3 overlaps
        // its parent's span, and opens lane 2; its parent then joins it.
        assert_eq!(p.assign(9, 14, 5, Some((2, 4)), &descends), (2, true));
        assert_eq!(p.assign(4, 20, 2, None, &descends), (2, false));
    }

    #[test]
    fn never_placed_inside_an_existing_slice() {
        let mut p = LanePacker::default();
        assert_eq!(p.assign(0, 10, 1, None, &descends), (1, true));
        assert_eq!(p.assign(2, 3, 2, None, &descends), (2, true));
    }

    #[test]
    fn microseconds_are_exact() {
        let mut out = Vec::new();
        write_us(&mut out, cycles_to_ps(1003, 1000.0).unwrap());
        assert_eq!(out, b"1.003");
        out.clear();
        write_us(&mut out, cycles_to_ps(5, 1.0).unwrap());
        assert_eq!(out, b"5");
        out.clear();
        write_us(&mut out, cycles_to_ps(2520, 2520.0).unwrap());
        assert_eq!(out, b"1");
    }
}
