//! The viewer's index: a compact entry per record and event, laid out for time-window queries
//! at any zoom, for the pipeline view and for search.
//!
//! Nothing of the JSON is kept but interned names: a record is 36 bytes (32-bit id and line
//! offset, parent, where its events and bar are, interned name and *look*: type, color, status,
//! criticality) plus a 16-byte bar (start, 32-bit duration), 4 bytes in its sequence and 4 in the
//! id table; an event is 14 bytes (its cycle and line offset as 32-bit deltas from its record's,
//! the record, a 16-bit interned *kind*: name, icon, color, style, severity) plus 4 bytes in its
//! row's marker list. The rare value that does not fit its field (a 64-bit id, a bar longer than
//! 4 G cycles, a far event, a 65,536th kind) is kept whole in a small overflow map, and offsets
//! past 4 GiB take their high bits from the record index where they change. Descriptions, data
//! and annotations are read back from the trace by byte offset when a query shows them.
//!
//! Records are packed into *rows*: a lane (from `unit_id`/`thread_id`/`subunit_id`, inherited
//! from the parent) holds one group of rows per tree depth, and a record takes the first row of its
//! group that is free when it begins. So the bars of a row never overlap and are appended in start
//! order: starts and ends are both sorted, and the gap before a bar is fixed once it is in. Each
//! row keeps level-of-detail summaries per block of 64, 4 096, ... bars (largest gap, largest
//! duration), updated in O(1) as bars begin and end, so they follow a growing trace for free.
//! [`Index::window`] merges bars closer than a pixel and narrower than a few pixels into one
//! cluster with its exact count, skipping busy stretches a block at a time: it answers at most
//! about one item per pixel and row whatever the zoom. Event markers have one sorted list per row
//! and severity; markers closer than a marker's width are merged into one that carries the
//! highest severity and the total count (VW-MARK-2).
//!
//! Records are also kept in *sequences*: the records of one record_type under one parent, in file
//! order. A sequence is a pipeline group (the instructions of a core in program order), and the
//! children of a record are the merge of its sequences.

use std::collections::{BTreeSet, HashMap};

use jets::format::{Line, MarkerStyle, Severity, Status};
use jets_host::sync::{SyncPoint, HOST_RECORD_TYPE, SYNC_EVENT};
use jets_read::{LineError, RawLine};
use serde_json::{Map, Value};

/// "No entry" in the `u32` links.
pub const NONE: u32 = u32::MAX;
/// Markers closer than this many pixels are one marker: they are drawn about that wide.
pub const MARKER_PX: f64 = 8.0;
/// How many line errors are kept with their text (all are counted).
const MAX_ERRORS: usize = 50;
/// A delta that does not fit 32 bits; the value is in an overflow map.
const FAR: u32 = u32::MAX;

/// A closed set's value as the index stores it in a byte: 0 when absent, else the vocabulary's
/// `code()` + 1. The one conversion between the two (see [`wire_code`]).
pub fn stored_code(code: Option<u8>) -> u8 {
    code.map_or(0, |c| c + 1)
}

/// The code the API sends for a stored byte: `None` when absent, else the vocabulary's `code()`.
pub fn wire_code(stored: u8) -> Option<u8> {
    stored.checked_sub(1)
}

/// One record: 36 bytes.
///
/// Its id and line offset are kept in 32 bits. An id that does not fit is [`FAR`] here and kept
/// whole in an overflow map ([`Index::rec_id`]); offsets grow with the record index (records are
/// indexed in file order), so their high 32 bits come from the record indices where they change
/// ([`Index::rec_offset`]).
#[derive(Clone, Copy, Debug)]
pub struct Rec {
    /// The record's id in the trace, or [`FAR`] (see [`Index::rec_id`]).
    id: u32,
    /// The low 32 bits of its line's byte offset in the line store (see [`Index::rec_offset`]).
    offset: u32,
    /// Index of the parent, or [`NONE`].
    pub parent: u32,
    /// Its first event, or [`NONE`]; its events follow in [`Index::evs`] (interleaved with
    /// others'), [`Rec::n_ev`] of them.
    pub first_ev: u32,
    /// How many events it has.
    pub n_ev: u32,
    /// The row of its bar.
    pub row: u32,
    /// Position of the bar in the row.
    pub pos: u32,
    /// Interned [`Look`].
    pub look: u32,
    /// Interned name.
    pub name: u32,
}

/// What a bar looks like: shared by many records, interned.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Look {
    /// Interned record_type.
    pub rtype: u32,
    /// `0x1rrggbb` when the record has a color hint, 0 otherwise.
    pub color: u32,
    /// The status as [`stored_code`] of `Status::code()`.
    pub status: u8,
    /// Criticality × 255, or 256 = none.
    pub crit: u16,
}

/// The time span of a record, as queries see it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bar {
    /// Start cycle.
    pub start: u64,
    /// End cycle; `None` while open. Not a `u64::MAX` sentinel: a record may end at that cycle
    /// (the spec's range ends there), and was then shown as never ended.
    pub end: Option<u64>,
    /// Index of the record.
    pub rec: u32,
}

/// A bar as a row stores it: 16 bytes, the end as a 32-bit duration (a longer one is in the
/// row's overflow map).
#[derive(Clone, Copy, Debug)]
#[repr(C, packed(4))]
struct Slot {
    start: u64,
    /// Cycles from start to end, [`OPEN_DUR`] while open, [`FAR`] when it does not fit.
    dur: u32,
    rec: u32,
}

/// The duration of a bar that has not ended.
const OPEN_DUR: u32 = u32::MAX - 1;

/// One event: 14 bytes (packed to 2-byte alignment).
#[derive(Clone, Copy, Debug)]
#[repr(C, packed(2))]
pub struct Ev {
    /// Cycles after its record's start, or [`FAR`] (see [`Index::ev_clk`]).
    dclk: u32,
    /// Bytes after its record's line, or [`FAR`] (see [`Index::ev_offset`]).
    doff: u32,
    /// Index of its record.
    pub rec: u32,
    /// Interned [`Kind`], or [`FAR_KIND`] (see [`Index::kind_id`]).
    kind: u16,
}

/// An event kind id that does not fit 16 bits; the id is in an overflow map.
const FAR_KIND: u16 = u16::MAX;

/// What an event is, shared by many events, interned.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Kind {
    /// Interned event name.
    pub name: u32,
    /// Interned icon name, or [`NONE`].
    pub icon: u32,
    /// `0x1rrggbb` when it has a color hint, 0 otherwise.
    pub color: u32,
    /// [`stored_code`] of `MarkerStyle::code()`.
    pub style: u8,
    /// [`stored_code`] of `Severity::code()`.
    pub severity: u8,
}

impl Kind {
    /// Whether events of this kind are pipeline stages: no severity (VW-PIPE-1).
    pub fn is_stage(&self) -> bool {
        self.severity == 0
    }
}

/// Identity of a swimlane.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LaneKey {
    /// Host records (`HostProcess`) get a lane of their own.
    pub host: bool,
    /// `unit_id`.
    pub unit: Option<u64>,
    /// `thread_id`.
    pub thread: Option<u64>,
    /// `subunit_id`.
    pub subunit: Option<u64>,
}

impl LaneKey {
    /// The lane's ids, e.g. "unit 0 · thread 1" (empty for a lane without any).
    pub fn ids(&self) -> String {
        let mut parts = Vec::new();
        for (what, v) in [("unit", self.unit), ("thread", self.thread), ("subunit", self.subunit)] {
            if let Some(v) = v {
                parts.push(format!("{what} {v}"));
            }
        }
        parts.join(" · ")
    }
}

/// A swimlane: its rows by depth.
#[derive(Debug)]
pub struct Lane {
    /// Its identity.
    pub key: LaneKey,
    /// Rows per depth (index = depth), each a list of row ids by slot.
    pub depths: Vec<Vec<u32>>,
    /// The first record placed in it: its type and name say what runs there (VW-LANE-2).
    pub first: u32,
    /// Free rows per depth.
    free: Vec<BTreeSet<u32>>,
}

/// A row of non-overlapping bars in start order.
#[derive(Debug, Default)]
pub struct Row {
    /// Its lane.
    pub lane: u32,
    /// Tree depth of its records.
    pub depth: u32,
    /// Its bars (see [`Row::bar`]).
    bars: Vec<Slot>,
    /// Ends of bars (by position) longer than a 32-bit duration.
    far_end: HashMap<u32, u64>,
    /// Event markers (event indices) in clk order, one list per stored severity (none, info,
    /// warning, error).
    pub markers: [Vec<u32>; SEVERITIES],
    /// Level-of-detail summaries of the bars: level `l` holds, per block of `FAN^(l+1)` bars,
    /// the largest gap before a bar and the largest duration of an ended bar in the block.
    summaries: Vec<Vec<Summary>>,
}

/// Marker lists per row: one for "no severity" and one per value of the vocabulary.
const SEVERITIES: usize = Severity::ALL.len() + 1;

/// Bars per block of the first summary level (and blocks per block of the next).
const FAN: usize = 64;
/// Summary levels: blocks of 64, 4 096, 262 144 and 16 777 216 bars.
const LEVELS: usize = 4;
/// Bars at least this many pixels wide are never merged into a cluster.
const WIDE_PX: f64 = 3.0;

/// The largest gap and duration within a block of bars.
#[derive(Clone, Copy, Debug, Default)]
struct Summary {
    gap: u64,
    width: u64,
}

impl Row {
    /// How many bars it holds.
    pub fn bar_count(&self) -> usize {
        self.bars.len()
    }

    /// Its bar at position `i`.
    pub fn bar(&self, i: usize) -> Bar {
        let s = self.bars[i];
        let end = match s.dur {
            OPEN_DUR => None,
            FAR => self.far_end.get(&(i as u32)).copied(),
            d => Some(s.start + u64::from(d)),
        };
        Bar { start: s.start, end, rec: s.rec }
    }

    fn last(&self) -> Option<Bar> {
        self.bars.len().checked_sub(1).map(|i| self.bar(i))
    }

    fn push_bar(&mut self, start: u64, rec: u32) -> u32 {
        let i = self.bars.len();
        // A row takes a bar only when its last one has ended by the new start (`take_row`).
        let gap = self.last().and_then(|p| p.end).map_or(0, |e| start.saturating_sub(e));
        self.bars.push(Slot { start, dur: OPEN_DUR, rec });
        self.summaries.resize_with(LEVELS, Vec::new);
        let mut size = 1;
        for level in &mut self.summaries {
            size *= FAN;
            let b = i / size;
            if b == level.len() {
                level.push(Summary { gap, width: 0 });
            } else {
                level[b].gap = level[b].gap.max(gap);
            }
        }
        i as u32
    }

    fn end_bar(&mut self, pos: u32, clk: u64) {
        let slot = &mut self.bars[pos as usize];
        let start = slot.start;
        let width = clk.max(start) - start;
        slot.dur = match u32::try_from(width) {
            Ok(d) if d < OPEN_DUR => d,
            _ => {
                self.far_end.insert(pos, start + width);
                FAR
            }
        };
        let mut size = 1;
        for level in &mut self.summaries {
            size *= FAN;
            let s = &mut level[pos as usize / size];
            s.width = s.width.max(width);
        }
    }

    /// Where the cluster that starts with bar `i` ends: the first later bar that starts at or
    /// after `t1`, or after a gap of at least `gap` cycles, or that is at least `wide` cycles long
    /// (or open). Whole blocks whose summary shows none of these are skipped, so a row that is
    /// busy across the window costs O(blocks), not O(bars).
    fn cluster_end(&self, i: usize, t1: u64, gap: f64, wide: f64, now: u64) -> usize {
        let n = self.bars.len();
        let width = |b: &Bar| (end_of(b, now) - b.start) as f64;
        if b_is_wide(&self.bar(i), wide, width) {
            return i + 1;
        }
        let open_last = self.last().is_some_and(|b| b.end.is_none());
        let mut k = i + 1;
        let mut prev_end = self.bar(i).end;
        'walk: while k < n {
            let mut size = FAN.pow(LEVELS as u32);
            for level in self.summaries.iter().rev() {
                if k % size == 0 {
                    let end = (k + size).min(n);
                    let s = level[k / size];
                    let skip = (s.gap as f64) < gap
                        && (s.width as f64) < wide
                        && before_end(self.bars[end - 1].start, t1)
                        && !(open_last && end == n);
                    if skip {
                        k = end;
                        prev_end = self.bar(k - 1).end;
                        continue 'walk;
                    }
                }
                size /= FAN;
            }
            let b = self.bar(k);
            let g = prev_end.map_or(0, |e| b.start.saturating_sub(e));
            if !before_end(b.start, t1) || g as f64 >= gap || b_is_wide(&b, wide, width) {
                return k;
            }
            prev_end = b.end;
            k += 1;
        }
        n
    }
}

/// Whether cycle `clk` lies before the end `t1` of a window `[t0, t1)`. A window ending at
/// `u64::MAX` holds that cycle too: no `t1` lies past it, and a trace may have records and events
/// there, which `jets gantt`'s whole-trace window would otherwise leave out (VW-END-3).
pub fn before_end(clk: u64, t1: u64) -> bool {
    clk < t1 || t1 == u64::MAX
}

fn b_is_wide(b: &Bar, wide: f64, width: impl Fn(&Bar) -> f64) -> bool {
    b.end.is_none() || width(b) >= wide
}

/// A host sample from a `HostSync` event.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HostSample {
    /// The sync point.
    pub point: SyncPoint,
    /// `cpu_usage`, percent of one core.
    pub cpu_usage: Option<f64>,
    /// `mem_rss_kb`.
    pub mem_rss_kb: Option<u64>,
}

/// A line, parsed into what the index keeps (done outside the index's lock).
#[derive(Debug)]
pub enum Parsed {
    /// The header's metadata.
    Header(Map<String, Value>),
    /// A record.
    Record(ParsedRecord),
    /// A record end.
    End {
        /// Record id.
        id: u64,
        /// Cycle.
        clk: u64,
        /// A final status ([`stored_code`]), when the line has one.
        status: Option<u8>,
    },
    /// An annotation.
    Annotation {
        /// Record id.
        id: u64,
    },
    /// An event.
    Event(ParsedEvent),
    /// The footer.
    Footer(jets::format::Footer),
}

/// The parts of a record line the index keeps.
#[derive(Debug)]
pub struct ParsedRecord {
    clk: u64,
    id: u64,
    parent: Option<u64>,
    name: String,
    rtype: String,
    unit: Option<u64>,
    thread: Option<u64>,
    subunit: Option<u64>,
    color: u32,
    status: u8,
    crit: u16,
}

/// The parts of an event line the index keeps.
#[derive(Debug)]
pub struct ParsedEvent {
    clk: u64,
    id: u64,
    name: String,
    icon: Option<String>,
    color: u32,
    style: u8,
    severity: u8,
    sync: Option<HostSample>,
}

impl Parsed {
    /// Parses one line with the format model.
    pub fn from_raw(raw: &RawLine<'_>) -> Result<Parsed, LineError> {
        Ok(Parsed::from_line(raw.parse()?))
    }

    /// Keeps what the index needs of a parsed line.
    pub fn from_line(line: Line<'_>) -> Parsed {
        match line {
            Line::Header(h) => Parsed::Header(h.metadata),
            Line::Record(r) => {
                let h = r.hints();
                Parsed::Record(ParsedRecord {
                    clk: r.clk,
                    id: r.id,
                    parent: r.parent_id,
                    unit: h.unit_id,
                    thread: h.thread_id,
                    subunit: h.subunit_id,
                    color: h.color.map_or(0, |c| 0x100_0000 | c.value()),
                    status: stored_code(h.status.map(Status::code)),
                    crit: h
                        .criticality
                        .filter(|c| c.is_finite())
                        .map_or(256, |c| (c.clamp(0.0, 1.0) * 255.0).round() as u16),
                    name: r.name.into_owned(),
                    rtype: r.record_type.into_owned(),
                })
            }
            Line::RecordEnd(e) => Parsed::End {
                id: e.record_id,
                clk: e.clk,
                // A final status on the record_end line (WR-END-1) replaces the record's.
                status: e
                    .extra
                    .get("status")
                    .and_then(Value::as_str)
                    .and_then(Status::parse)
                    .map(|s| stored_code(Some(s.code()))),
            },
            Line::Annotation(a) => Parsed::Annotation { id: a.record_id },
            Line::Event(e) => {
                let h = e.hints();
                let sync = match (e.name == SYNC_EVENT, e.data.as_ref().and_then(Value::as_object))
                {
                    (true, Some(d)) => {
                        SyncPoint::from_data(e.clk, d).ok().map(|point| HostSample {
                            point,
                            cpu_usage: d.get("cpu_usage").and_then(Value::as_f64),
                            mem_rss_kb: d.get("mem_rss_kb").and_then(Value::as_u64),
                        })
                    }
                    _ => None,
                };
                Parsed::Event(ParsedEvent {
                    clk: e.clk,
                    id: e.record_id,
                    icon: h.icon.map(str::to_owned),
                    color: h.color.map_or(0, |c| 0x100_0000 | c.value()),
                    style: stored_code(h.marker_style.map(MarkerStyle::code)),
                    severity: stored_code(h.severity.map(Severity::code)),
                    sync,
                    name: e.name.into_owned(),
                })
            }
            Line::Footer(f) => Parsed::Footer(f),
        }
    }
}

/// Strings seen often (names, record types, icons), stored once.
#[derive(Debug, Default)]
pub struct Interner {
    /// The strings by id.
    pub names: Vec<Box<str>>,
    ids: HashMap<Box<str>, u32>,
}

impl Interner {
    fn intern(&mut self, s: &str) -> u32 {
        if let Some(&i) = self.ids.get(s) {
            return i;
        }
        let i = self.names.len() as u32;
        self.names.push(s.into());
        self.ids.insert(s.into(), i);
        i
    }

    /// The string with id `i`.
    pub fn get(&self, i: u32) -> &str {
        self.names.get(i as usize).map_or("", |s| s)
    }

    /// Ids of the strings that contain `lower` (already lower-case), ignoring case.
    pub fn matching(&self, lower: &str) -> Vec<bool> {
        self.names.iter().map(|n| n.to_lowercase().contains(lower)).collect()
    }

    fn bytes(&self) -> usize {
        // Each string twice (the list and the map's key), plus the map's slots.
        self.names.iter().map(|s| 2 * s.len() + 16).sum::<usize>() + self.ids.capacity() * 24
    }
}

/// Values shared by many entries, stored once: `intern(v)` gives a small id.
#[derive(Debug)]
pub struct Table<T> {
    /// The values by id.
    pub items: Vec<T>,
    ids: HashMap<T, u32>,
}

impl<T> Default for Table<T> {
    fn default() -> Self {
        Table { items: Vec::new(), ids: HashMap::new() }
    }
}

impl<T: Copy + Eq + std::hash::Hash> Table<T> {
    fn intern(&mut self, v: T) -> u32 {
        if let Some(&i) = self.ids.get(&v) {
            return i;
        }
        let i = self.items.len() as u32;
        self.items.push(v);
        self.ids.insert(v, i);
        i
    }
}

/// Record id → index: a flat table while ids are dense (as writers assign them), a hash map
/// otherwise.
#[derive(Debug)]
enum IdMap {
    Dense(Vec<u32>),
    Sparse(HashMap<u64, u32>),
}

impl IdMap {
    fn get(&self, id: u64) -> Option<u32> {
        match self {
            IdMap::Dense(v) => v.get(usize::try_from(id).ok()?).copied().filter(|&i| i != NONE),
            IdMap::Sparse(m) => m.get(&id).copied(),
        }
    }

    fn insert(&mut self, id: u64, idx: u32) {
        if let IdMap::Dense(v) = self {
            let limit = (v.len() as u64).saturating_mul(2).max(1 << 20);
            if id < limit {
                let i = id as usize;
                if i >= v.len() {
                    v.resize(i + 1, NONE);
                }
                v[i] = idx;
                return;
            }
            let map = v.iter().enumerate().filter(|(_, &x)| x != NONE);
            *self = IdMap::Sparse(map.map(|(i, &x)| (i as u64, x)).collect());
        }
        if let IdMap::Sparse(m) = self {
            m.insert(id, idx);
        }
    }
}

/// Counts of what has been indexed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Lines read.
    pub lines: u64,
    /// Records.
    pub records: u64,
    /// Records not ended yet.
    pub open: u64,
    /// Events.
    pub events: u64,
    /// Annotations.
    pub annotations: u64,
    /// Lines skipped because they are malformed or refer to unknown records.
    pub errors: u64,
}

/// The records of one record_type under one parent, in file order: a pipeline group.
#[derive(Debug)]
pub struct Seq {
    /// Interned record_type.
    pub rtype: u32,
    /// The parent, or [`NONE`] for roots.
    pub parent: u32,
    /// The records, in file order.
    pub recs: Vec<u32>,
}

/// The whole index. See the [module documentation](self).
#[derive(Debug)]
pub struct Index {
    /// Header metadata, once the header has been read.
    pub metadata: Option<Map<String, Value>>,
    /// The footer, once read.
    pub footer: Option<jets::format::Footer>,
    /// Records in file order.
    pub recs: Vec<Rec>,
    /// Events in file order.
    pub evs: Vec<Ev>,
    /// Annotation line offsets per record (few traces have many).
    pub anns: HashMap<u32, Vec<u64>>,
    /// Rows of bars.
    pub rows: Vec<Row>,
    /// Swimlanes, in order of first appearance.
    pub lanes: Vec<Lane>,
    /// Sequences of records (type, parent).
    pub seqs: Vec<Seq>,
    /// Interned record names.
    pub names: Interner,
    /// Interned record types.
    pub types: Interner,
    /// Records per interned type.
    pub type_counts: Vec<u64>,
    /// Stage events (no severity) on records of each interned type.
    pub type_stages: Vec<u64>,
    /// Interned event names.
    pub event_names: Interner,
    /// Interned event icons.
    pub icons: Interner,
    /// Interned record looks.
    pub looks: Table<Look>,
    /// Interned event kinds.
    pub kinds: Table<Kind>,
    /// Host samples in file order.
    pub host: Vec<HostSample>,
    /// Counts.
    pub counts: Counts,
    /// First error messages (file line and what is wrong).
    pub errors: Vec<String>,
    /// First and last cycle seen.
    pub first_clk: Option<u64>,
    /// Last cycle of a line (the footer's `capture_end_clk` aside, see [`Index::now`]): where a
    /// size limit stopped capture, when one did (VW-CAP-1).
    pub last_clk: u64,
    /// Bumped by every change, so clients know when to ask again.
    pub version: u64,
    ids: IdMap,
    lane_ids: HashMap<LaneKey, u32>,
    seq_ids: HashMap<(u32, u32), u32>,
    /// Sequences per parent ([`NONE`] for the roots).
    kids: HashMap<u32, Vec<u32>>,
    /// Event cycles and offsets whose delta does not fit 32 bits.
    far_clk: HashMap<u32, u64>,
    far_off: HashMap<u32, u64>,
    /// Event kind ids that do not fit 16 bits.
    far_kind: HashMap<u32, u32>,
    /// Record ids that do not fit 32 bits.
    far_ids: HashMap<u32, u64>,
    /// `offset_steps[k]`: the first record whose line offset is at least `(k + 1) << 32`.
    offset_steps: Vec<u32>,
}

impl Default for Index {
    fn default() -> Self {
        Index {
            metadata: None,
            footer: None,
            recs: Vec::new(),
            evs: Vec::new(),
            anns: HashMap::new(),
            rows: Vec::new(),
            lanes: Vec::new(),
            seqs: Vec::new(),
            names: Interner::default(),
            types: Interner::default(),
            type_counts: Vec::new(),
            type_stages: Vec::new(),
            event_names: Interner::default(),
            icons: Interner::default(),
            looks: Table::default(),
            kinds: Table::default(),
            host: Vec::new(),
            counts: Counts::default(),
            errors: Vec::new(),
            first_clk: None,
            last_clk: 0,
            version: 0,
            ids: IdMap::Dense(Vec::new()),
            lane_ids: HashMap::new(),
            seq_ids: HashMap::new(),
            kids: HashMap::new(),
            far_clk: HashMap::new(),
            far_off: HashMap::new(),
            far_kind: HashMap::new(),
            far_ids: HashMap::new(),
            offset_steps: Vec::new(),
        }
    }
}

/// What a window query returns for one row.
#[derive(Debug, Default, PartialEq)]
pub struct RowWindow {
    /// The row.
    pub row: u32,
    /// Bars and clusters in time order.
    pub items: Vec<Item>,
    /// Markers in time order.
    pub markers: Vec<Marker>,
}

/// A bar (one record) or a cluster of bars closer than a pixel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Item {
    /// Start cycle.
    pub start: u64,
    /// End cycle (an open bar ends at the last cycle seen).
    pub end: u64,
    /// The first record (the only one when `count` is 1).
    pub rec: u32,
    /// How many records it stands for.
    pub count: u32,
    /// Whether the (last) record is still open.
    pub open: bool,
}

/// An event marker, or markers within a marker's width merged into one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Marker {
    /// Cycle of the first event.
    pub clk: u64,
    /// The event shown: the first of the highest severity.
    pub ev: u32,
    /// How many events it stands for.
    pub count: u32,
    /// The highest severity among them ([`stored_code`]).
    pub severity: u8,
}

impl Index {
    /// An empty index.
    pub fn new() -> Index {
        Index::default()
    }

    /// Looks a record up by id.
    pub fn rec_by_id(&self, id: u64) -> Option<u32> {
        self.ids.get(id)
    }

    /// The bar of a record.
    pub fn bar(&self, rec: u32) -> Bar {
        let r = &self.recs[rec as usize];
        self.rows[r.row as usize].bar(r.pos as usize)
    }

    /// The id of a record in the trace.
    pub fn rec_id(&self, rec: u32) -> u64 {
        match self.recs[rec as usize].id {
            FAR => self.far_ids.get(&rec).copied().unwrap_or(u64::MAX),
            id => u64::from(id),
        }
    }

    /// Where a record's line starts in the line store.
    pub fn rec_offset(&self, rec: u32) -> u64 {
        let high = self.offset_steps.partition_point(|&first| first <= rec) as u64;
        high << 32 | u64::from(self.recs[rec as usize].offset)
    }

    /// The look of a record.
    pub fn look(&self, rec: u32) -> Look {
        self.looks.items[self.recs[rec as usize].look as usize]
    }

    /// The kind of an event.
    pub fn kind(&self, ev: u32) -> Kind {
        self.kinds.items[self.kind_id(ev) as usize]
    }

    /// The interned kind id of an event.
    pub fn kind_id(&self, ev: u32) -> u32 {
        match self.evs[ev as usize].kind {
            FAR_KIND => self.far_kind.get(&ev).copied().unwrap_or(0),
            k => u32::from(k),
        }
    }

    /// The cycle of an event.
    pub fn ev_clk(&self, ev: u32) -> u64 {
        let e = self.evs[ev as usize];
        if e.dclk == FAR {
            return self.far_clk.get(&ev).copied().unwrap_or(0);
        }
        self.bar(e.rec).start + u64::from(e.dclk)
    }

    /// Where an event's line starts in the line store.
    pub fn ev_offset(&self, ev: u32) -> u64 {
        let e = self.evs[ev as usize];
        if e.doff == FAR {
            return self.far_off.get(&ev).copied().unwrap_or(0);
        }
        self.rec_offset(e.rec) + u64::from(e.doff)
    }

    /// The last cycle, where open bars end: the last line's, or the footer's `capture_end_clk`
    /// when it is later (the run's end, which a trace whose capture stopped early reaches).
    pub fn now(&self) -> u64 {
        let footer_end = self.footer.as_ref().and_then(|f| f.capture_end_clk);
        self.last_clk.max(footer_end.unwrap_or(0))
    }

    /// The record_type a pipeline view shows first: of the types with at least two stage events
    /// per record on average, the one with most records (VW-PIPE-1).
    pub fn pipeline_type(&self) -> Option<u32> {
        (0..self.type_counts.len())
            .filter(|&t| self.type_counts[t] > 0 && self.type_stages[t] >= 2 * self.type_counts[t])
            .max_by_key(|&t| self.type_counts[t])
            .map(|t| t as u32)
    }

    /// The sequences of a record_type, by their parent's position in the file.
    pub fn seqs_of_type(&self, rtype: u32) -> Vec<u32> {
        let mut out: Vec<u32> =
            (0..self.seqs.len() as u32).filter(|&s| self.seqs[s as usize].rtype == rtype).collect();
        out.sort_by_key(|&s| self.seqs[s as usize].parent);
        out
    }

    /// The position in sequence `seq` of its first record starting at or after `clk` (records
    /// of a sequence begin in file order, which simulators write in time order; VW-PIPE-3).
    pub fn seq_find(&self, seq: u32, clk: u64) -> usize {
        let recs = &self.seqs[seq as usize].recs;
        recs.partition_point(|&r| self.bar(r).start < clk)
    }

    fn error(&mut self, line: u64, what: impl FnOnce() -> String) {
        self.counts.errors += 1;
        if self.errors.len() < MAX_ERRORS {
            self.errors.push(format!("line {line}: {}", what()));
        }
    }

    /// Records a line that could not be parsed.
    pub fn bad_line(&mut self, line: u64, err: &LineError) {
        self.counts.lines += 1;
        self.version += 1;
        self.error(line, || match err {
            // The line number is already in the message.
            LineError::Torn { source, .. } | LineError::Invalid { source, .. } => {
                format!("{source}")
            }
        });
    }

    fn see_clk(&mut self, clk: u64) {
        self.first_clk = Some(self.first_clk.map_or(clk, |f| f.min(clk)));
        self.last_clk = self.last_clk.max(clk);
    }

    /// Adds one parsed line: `line` is its 1-based number, `offset` where it starts in the store.
    pub fn apply(&mut self, p: Parsed, line: u64, offset: u64) {
        self.counts.lines += 1;
        self.version += 1;
        match p {
            Parsed::Header(m) => self.metadata = Some(m),
            Parsed::Footer(f) => self.footer = Some(f),
            Parsed::Record(r) => self.add_record(r, line, offset),
            Parsed::End { id, clk, status } => self.end_record(id, clk, status, line),
            Parsed::Annotation { id } => {
                let Some(rec) = self.ids.get(id) else {
                    return self.error(line, || format!("annotation on unknown record {id}"));
                };
                self.anns.entry(rec).or_default().push(offset);
                self.counts.annotations += 1;
            }
            Parsed::Event(e) => self.add_event(e, line, offset),
        }
    }

    fn add_record(&mut self, r: ParsedRecord, line: u64, offset: u64) {
        if self.ids.get(r.id).is_some() {
            return self.error(line, || format!("record id {} is used twice", r.id));
        }
        let parent = match r.parent {
            None => NONE,
            Some(p) => match self.ids.get(p) {
                Some(i) => i,
                None => {
                    self.error(line, || format!("parent_id {p} is not a known record"));
                    NONE
                }
            },
        };
        let idx = self.recs.len() as u32;
        if idx == NONE {
            return self.error(line, || "more records than the viewer can index".to_owned());
        }
        self.see_clk(r.clk);
        let (key, depth) = match parent {
            NONE => (
                LaneKey {
                    host: r.rtype == HOST_RECORD_TYPE,
                    unit: r.unit,
                    thread: r.thread,
                    subunit: r.subunit,
                },
                0,
            ),
            p => {
                let pr = &self.recs[p as usize];
                let prow = &self.rows[pr.row as usize];
                let pkey = self.lanes[prow.lane as usize].key;
                let key = LaneKey {
                    host: pkey.host,
                    unit: r.unit.or(pkey.unit),
                    thread: r.thread.or(pkey.thread),
                    subunit: r.subunit.or(pkey.subunit),
                };
                (key, prow.depth + 1)
            }
        };
        let row = self.take_row(key, depth, r.clk, idx);
        let pos = self.rows[row as usize].push_bar(r.clk, idx);
        let rtype = self.types.intern(&r.rtype);
        if rtype as usize >= self.type_counts.len() {
            self.type_counts.push(0);
            self.type_stages.push(0);
        }
        self.type_counts[rtype as usize] += 1;
        let look =
            self.looks.intern(Look { rtype, color: r.color, status: r.status, crit: r.crit });
        let name = self.names.intern(&r.name);
        let id = match u32::try_from(r.id) {
            Ok(id) if id != FAR => id,
            _ => {
                self.far_ids.insert(idx, r.id);
                FAR
            }
        };
        // Records come in file order, so offsets only grow (see `rec_offset`).
        while (self.offset_steps.len() as u64) < offset >> 32 {
            self.offset_steps.push(idx);
        }
        self.recs.push(Rec {
            id,
            offset: offset as u32,
            parent,
            first_ev: NONE,
            n_ev: 0,
            row,
            pos,
            look,
            name,
        });
        self.ids.insert(r.id, idx);
        let seq = match self.seq_ids.get(&(rtype, parent)) {
            Some(&s) => s,
            None => {
                let s = self.seqs.len() as u32;
                self.seqs.push(Seq { rtype, parent, recs: Vec::new() });
                self.seq_ids.insert((rtype, parent), s);
                self.kids.entry(parent).or_default().push(s);
                s
            }
        };
        self.seqs[seq as usize].recs.push(idx);
        self.counts.records += 1;
        self.counts.open += 1;
    }

    /// The first free row of (lane, depth) whose last bar ends by `start`, or a new one.
    fn take_row(&mut self, key: LaneKey, depth: u32, start: u64, rec: u32) -> u32 {
        let lane = match self.lane_ids.get(&key) {
            Some(&l) => l,
            None => {
                let l = self.lanes.len() as u32;
                self.lanes.push(Lane { key, depths: Vec::new(), first: rec, free: Vec::new() });
                self.lane_ids.insert(key, l);
                l
            }
        };
        let d = depth as usize;
        let rows = &self.rows;
        let l = &mut self.lanes[lane as usize];
        if l.depths.len() <= d {
            l.depths.resize_with(d + 1, Vec::new);
            l.free.resize_with(d + 1, BTreeSet::new);
        }
        let found = l.free[d].iter().copied().find(|&slot| {
            let row = l.depths[d][slot as usize];
            rows[row as usize].last().is_none_or(|b| b.end.is_some_and(|e| e <= start))
        });
        if let Some(slot) = found {
            l.free[d].remove(&slot);
            return l.depths[d][slot as usize];
        }
        let row = self.rows.len() as u32;
        l.depths[d].push(row);
        self.rows.push(Row { lane, depth, ..Row::default() });
        row
    }

    fn end_record(&mut self, id: u64, clk: u64, status: Option<u8>, line: u64) {
        let Some(rec) = self.ids.get(id) else {
            return self.error(line, || format!("record_end of unknown record {id}"));
        };
        let r = self.recs[rec as usize];
        let row = &mut self.rows[r.row as usize];
        if row.bar(r.pos as usize).end.is_some() {
            return self.error(line, || format!("record {id} ends twice"));
        }
        row.end_bar(r.pos, clk);
        let (lane, depth) = (row.lane, row.depth);
        if let Some(status) = status {
            let look = Look { status, ..self.looks.items[r.look as usize] };
            self.recs[rec as usize].look = self.looks.intern(look);
        }
        let slot =
            self.lanes[lane as usize].depths[depth as usize].iter().position(|&x| x == r.row);
        if let Some(slot) = slot {
            self.lanes[lane as usize].free[depth as usize].insert(slot as u32);
        }
        self.see_clk(clk);
        self.counts.open -= 1;
    }

    fn add_event(&mut self, e: ParsedEvent, line: u64, offset: u64) {
        let Some(rec) = self.ids.get(e.id) else {
            return self.error(line, || format!("event on unknown record {}", e.id));
        };
        self.see_clk(e.clk);
        let idx = self.evs.len() as u32;
        let icon = e.icon.as_deref().map_or(NONE, |i| self.icons.intern(i));
        let name = self.event_names.intern(&e.name);
        let kind = Kind { name, icon, color: e.color, style: e.style, severity: e.severity };
        let kind_id = self.kinds.intern(kind);
        let kind_small = match u16::try_from(kind_id) {
            Ok(k) if k != FAR_KIND => k,
            _ => {
                self.far_kind.insert(idx, kind_id);
                FAR_KIND
            }
        };
        let r = self.recs[rec as usize];
        let start = self.bar(rec).start;
        let dclk = match e.clk.checked_sub(start).map(u32::try_from) {
            Some(Ok(d)) if d != FAR => d,
            _ => {
                self.far_clk.insert(idx, e.clk);
                FAR
            }
        };
        let doff = match offset.checked_sub(self.rec_offset(rec)).map(u32::try_from) {
            Some(Ok(d)) if d != FAR => d,
            _ => {
                self.far_off.insert(idx, offset);
                FAR
            }
        };
        self.evs.push(Ev { dclk, doff, rec, kind: kind_small });
        let rm = &mut self.recs[rec as usize];
        if rm.first_ev == NONE {
            rm.first_ev = idx;
        }
        rm.n_ev += 1;
        self.counts.events += 1;
        if kind.is_stage() {
            let rtype = self.looks.items[r.look as usize].rtype;
            self.type_stages[rtype as usize] += 1;
        }
        // HostSync points of a HostProcess record are drawn as host tracks, not as markers.
        if let Some(s) = e.sync {
            if self.lanes[self.rows[r.row as usize].lane as usize].key.host {
                self.host.push(s);
                return;
            }
        }
        let group = usize::from(e.severity).min(SEVERITIES - 1);
        let at = {
            let markers = &self.rows[r.row as usize].markers[group];
            // Events usually come in clk order; an out-of-order one is inserted in place.
            match markers.last() {
                Some(&last) if self.ev_clk(last) > e.clk => {
                    markers.partition_point(|&m| self.ev_clk(m) <= e.clk)
                }
                _ => markers.len(),
            }
        };
        self.rows[r.row as usize].markers[group].insert(at, idx);
    }

    /// The bars, clusters and markers of `rows` within cycles `[t0, t1)` drawn `px` pixels wide:
    /// bars closer than one pixel are merged into clusters, markers closer than a marker's width,
    /// so each row answers at most about one item per pixel and one marker per 8 pixels.
    pub fn window(&self, t0: u64, t1: u64, px: u32, rows: &[u32]) -> Vec<RowWindow> {
        let t1 = t1.max(t0.saturating_add(1));
        let cpp = ((t1 - t0) as f64 / f64::from(px.max(1))).max(f64::MIN_POSITIVE);
        let now = self.now();
        rows.iter()
            .filter_map(|&r| self.rows.get(r as usize).map(|row| (r, row)))
            .map(|(r, row)| RowWindow {
                row: r,
                items: bars_in(row, t0, t1, cpp, now),
                markers: self.markers_in(row, t0, t1, cpp * MARKER_PX),
            })
            .collect()
    }

    /// The markers of a row in `[t0, t1)`, merged within `reach` cycles: each severity's list
    /// is clustered with an exponential search (O(clusters · log), whatever the number of
    /// events), then the clusters of all severities are merged, keeping the highest severity.
    fn markers_in(&self, row: &Row, t0: u64, t1: u64, reach: f64) -> Vec<Marker> {
        let mut all = Vec::new();
        for (sev, list) in row.markers.iter().enumerate() {
            let clk = |&e: &u32| self.ev_clk(e);
            let mut i = list.partition_point(|e| clk(e) < t0);
            while i < list.len() && before_end(clk(&list[i]), t1) {
                let c = clk(&list[i]);
                let limit = (c as f64 + reach).min(u64::MAX as f64) as u64;
                let k = gallop(list, i + 1, |e| clk(e) < limit);
                all.push(Marker {
                    clk: c,
                    ev: list[i],
                    count: (k - i) as u32,
                    severity: sev as u8,
                });
                i = k;
            }
        }
        merge_markers(all, reach)
    }

    /// Markers of the events `evs` (any order) in `[t0, t1)`, merged within `reach` cycles.
    pub fn markers_of(&self, evs: &[u32], t0: u64, t1: u64, reach: f64) -> Vec<Marker> {
        let all = evs
            .iter()
            .map(|&e| (e, self.ev_clk(e)))
            .filter(|&(_, c)| c >= t0 && before_end(c, t1))
            .map(|(ev, clk)| Marker { clk, ev, count: 1, severity: self.kind(ev).severity })
            .collect();
        merge_markers(all, reach)
    }

    /// The rows of every lane in display order: by lane (host lane last), then depth, then slot.
    pub fn row_order(&self) -> Vec<(u32, Vec<u32>)> {
        let mut lanes: Vec<u32> = (0..self.lanes.len() as u32).collect();
        lanes.sort_by_key(|&l| self.lanes[l as usize].key);
        lanes
            .into_iter()
            .map(|l| (l, self.lanes[l as usize].depths.iter().flatten().copied().collect()))
            .collect()
    }

    /// The roots, in file order.
    #[cfg(test)]
    pub fn roots(&self) -> Vec<u32> {
        self.children(None, None, usize::MAX)
    }

    /// The children of a record (or the roots) after record index `after`, at most `limit`, in
    /// file order: the merge of the parent's sequences.
    pub fn children(&self, parent: Option<u32>, after: Option<u32>, limit: usize) -> Vec<u32> {
        let seqs = self.kids.get(&parent.unwrap_or(NONE)).map_or(&[][..], Vec::as_slice);
        let mut heads: Vec<(&[u32], usize)> = seqs
            .iter()
            .map(|&s| {
                let recs = self.seqs[s as usize].recs.as_slice();
                (recs, after.map_or(0, |a| recs.partition_point(|&r| r <= a)))
            })
            .collect();
        let mut out = Vec::new();
        while out.len() < limit {
            let next = heads
                .iter_mut()
                .filter(|(recs, i)| *i < recs.len())
                .min_by_key(|(recs, i)| recs[*i]);
            match next {
                Some((recs, i)) => {
                    out.push(recs[*i]);
                    *i += 1;
                }
                None => break,
            }
        }
        out
    }

    /// Whether a record has children.
    pub fn has_children(&self, rec: u32) -> bool {
        self.kids.contains_key(&rec)
    }

    /// Events of a record in file order: its first event and the next `n_ev - 1` events of the
    /// same record after it, at most `limit`.
    pub fn events_of(&self, rec: u32, limit: usize) -> Vec<u32> {
        let r = self.recs[rec as usize];
        let want = (r.n_ev as usize).min(limit);
        let mut out = Vec::with_capacity(want);
        if r.first_ev == NONE {
            return out;
        }
        for (i, e) in self.evs[r.first_ev as usize..].iter().enumerate() {
            if out.len() == want {
                break;
            }
            if e.rec == rec {
                out.push(r.first_ev + i as u32);
            }
        }
        out
    }

    /// Annotation line offsets of a record in file order.
    pub fn annotations_of(&self, rec: u32) -> &[u64] {
        self.anns.get(&rec).map_or(&[], Vec::as_slice)
    }

    /// Gives back the spare capacity of the tables once nothing more will be added.
    pub fn shrink(&mut self) {
        self.recs.shrink_to_fit();
        self.evs.shrink_to_fit();
        for row in &mut self.rows {
            row.bars.shrink_to_fit();
            row.far_end.shrink_to_fit();
            row.markers.iter_mut().for_each(Vec::shrink_to_fit);
        }
        for s in &mut self.seqs {
            s.recs.shrink_to_fit();
        }
        if let IdMap::Dense(v) = &mut self.ids {
            v.shrink_to_fit();
        }
    }

    /// Bytes of memory the index holds (capacity of its tables).
    pub fn memory_bytes(&self) -> usize {
        use std::mem::size_of;
        let rows: usize = self
            .rows
            .iter()
            .map(|r| {
                r.bars.capacity() * size_of::<Slot>()
                    + r.far_end.capacity() * 16
                    + r.markers.iter().map(|m| m.capacity() * 4).sum::<usize>()
                    + r.summaries.iter().map(|s| s.capacity() * 16).sum::<usize>()
            })
            .sum();
        let ids = match &self.ids {
            IdMap::Dense(v) => v.capacity() * 4,
            IdMap::Sparse(m) => m.capacity() * 24,
        };
        let seqs: usize = self.seqs.iter().map(|s| s.recs.capacity() * 4).sum();
        self.recs.capacity() * size_of::<Rec>()
            + self.evs.capacity() * size_of::<Ev>()
            + self.anns.values().map(|a| a.capacity() * 8 + 32).sum::<usize>()
            + (self.far_clk.capacity() + self.far_off.capacity() + self.far_ids.capacity()) * 16
            + self.far_kind.capacity() * 8
            + self.offset_steps.capacity() * 4
            + self.names.bytes()
            + self.types.bytes()
            + self.event_names.bytes()
            + self.icons.bytes()
            + rows
            + ids
            + seqs
    }
}

/// Merges markers (any order) that lie within `reach` cycles of the first of a group into one:
/// its count is the sum, its severity the highest, its event the first of that severity.
fn merge_markers(mut all: Vec<Marker>, reach: f64) -> Vec<Marker> {
    all.sort_unstable_by_key(|m| (m.clk, std::cmp::Reverse(m.severity)));
    let mut out: Vec<Marker> = Vec::with_capacity(all.len());
    let mut first = 0u64;
    for m in all {
        match out.last_mut() {
            Some(last) if (m.clk as f64) < first as f64 + reach => {
                last.count += m.count;
                if m.severity > last.severity {
                    last.severity = m.severity;
                    last.ev = m.ev;
                }
            }
            _ => {
                first = m.clk;
                out.push(m);
            }
        }
    }
    out
}

fn end_of(b: &Bar, now: u64) -> u64 {
    b.end.unwrap_or(now.max(b.start))
}

/// See [`Index::window`]. Bars of a row are sorted by start and do not overlap, so their ends are
/// sorted too: the first bar in the window is a binary search away, and a cluster (bars closer
/// than a pixel, each narrower than [`WIDE_PX`]) ends at the first large gap or wide bar, which
/// the row's summaries find without visiting every bar.
fn bars_in(row: &Row, t0: u64, t1: u64, cpp: f64, now: u64) -> Vec<Item> {
    let mut out = Vec::new();
    // A bar ending exactly at t0 touches the window and is kept (zero-length bars included).
    // Ends are sorted like starts (bars of a row do not overlap), open bars last.
    let (mut lo, mut hi) = (0, row.bar_count());
    while lo < hi {
        let mid = (lo + hi) / 2;
        let b = row.bar(mid);
        if b.end.is_some_and(|e| e < t0) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    let mut i = lo;
    while i < row.bar_count() && before_end(row.bars[i].start, t1) {
        let k = row.cluster_end(i, t1, cpp, cpp * WIDE_PX, now);
        let (first, last) = (row.bar(i), row.bar(k - 1));
        out.push(Item {
            start: first.start,
            end: end_of(&last, now),
            rec: first.rec,
            count: (k - i) as u32,
            open: last.end.is_none(),
        });
        i = k;
    }
    out
}

/// The first index at or after `from` where `pred` stops holding (`pred` holds on a prefix):
/// an exponential search from `from`, so finding the end of the markers within a marker's width
/// costs O(log k) for k such markers instead of a search over the whole row.
fn gallop<T>(v: &[T], from: usize, pred: impl Fn(&T) -> bool) -> usize {
    let (mut lo, mut hi, mut step) = (from, from, 1);
    while hi < v.len() && pred(&v[hi]) {
        lo = hi + 1;
        hi += step;
        step *= 2;
    }
    let hi = hi.min(v.len());
    lo + v[lo..hi].partition_point(pred)
}

#[cfg(test)]
mod tests {
    use super::*;
    use jets::format::Line;

    fn index(lines: &[&str]) -> Index {
        let mut ix = Index::new();
        let mut offset = 0;
        for (i, l) in lines.iter().enumerate() {
            match Line::parse(l) {
                Ok(line) => ix.apply(Parsed::from_line(line), i as u64 + 1, offset),
                Err(e) => {
                    ix.bad_line(i as u64 + 1, &LineError::Invalid { line: i as u64 + 1, source: e })
                }
            }
            offset += l.len() as u64 + 1;
        }
        ix
    }

    fn rec(clk: u64, id: u64, parent: Option<u64>, data: &str) -> String {
        let p = parent.map_or("null".to_owned(), |p| p.to_string());
        format!(
            r#"{{"clk":{clk},"type":"record","name":"r{id}","record_type":"T","id":{id},"parent_id":{p},"description":"","data":{data}}}"#
        )
    }

    fn end(clk: u64, id: u64) -> String {
        format!(r#"{{"clk":{clk},"type":"record_end","record_id":{id}}}"#)
    }

    /// Many short children of one root: 1000 instructions, 3 in flight at a time.
    fn pipeline() -> Index {
        let mut lines = vec![rec(0, 1, None, r#"{"unit_id":0}"#)];
        for i in 0..1000u64 {
            lines.push(rec(i * 2, 10 + i, Some(1), "{}"));
            if i >= 2 {
                lines.push(end(i * 2 + 1, 10 + i - 2));
            }
        }
        lines.push(end(2000, 1008));
        lines.push(end(2001, 1009));
        lines.push(end(2002, 1));
        let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
        index(&refs)
    }

    #[test]
    fn rows_never_overlap_and_stay_sorted() {
        let ix = pipeline();
        assert_eq!(ix.counts.records, 1001);
        assert_eq!(ix.counts.open, 0);
        let lane = &ix.lanes[0];
        assert_eq!(lane.key.unit, Some(0));
        assert_eq!(lane.depths.len(), 2);
        // Three instructions are in flight at once: three rows at depth 1.
        assert_eq!(lane.depths[1].len(), 3);
        for row in &ix.rows {
            for i in 1..row.bar_count() {
                let (a, b) = (row.bar(i - 1), row.bar(i));
                assert!(a.end.is_some_and(|e| e <= b.start), "{a:?} overlaps {b:?}");
            }
        }
    }

    #[test]
    fn window_clusters_what_is_closer_than_a_pixel() {
        let ix = pipeline();
        let rows: Vec<u32> = (0..ix.rows.len() as u32).collect();
        // Zoomed in: every bar on its own.
        let near = ix.window(100, 140, 1000, &rows);
        let singles: usize = near.iter().flat_map(|r| &r.items).filter(|i| i.count == 1).count();
        let all: usize = near.iter().map(|r| r.items.len()).sum();
        assert_eq!(singles, all);
        assert!(all >= 20, "{all} bars in 40 cycles");
        // Zoomed out to 10 pixels: a handful of clusters that still count every record.
        let far = ix.window(0, 2003, 10, &rows);
        let items: usize = far.iter().map(|r| r.items.len()).sum();
        assert!(items <= rows.len() * 11, "{items} items for 10 px");
        let counted: u64 = far.iter().flat_map(|r| &r.items).map(|i| u64::from(i.count)).sum();
        assert_eq!(counted, 1001);
    }

    #[test]
    fn window_answers_are_bounded_by_pixels_not_records() {
        let mut lines = vec![rec(0, 1, None, "{}")];
        for i in 0..50_000u64 {
            lines.push(rec(i * 3, 2 + i, Some(1), "{}"));
            lines.push(end(i * 3 + 2, 2 + i));
        }
        let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
        let ix = index(&refs);
        let rows: Vec<u32> = (0..ix.rows.len() as u32).collect();
        let w = ix.window(0, 150_000, 500, &rows);
        let child_row = &w.iter().find(|r| ix.rows[r.row as usize].depth == 1).expect("row").items;
        assert!(child_row.len() <= 501, "{} items", child_row.len());
        assert_eq!(child_row.iter().map(|i| u64::from(i.count)).sum::<u64>(), 50_000);
        // At one cycle per pixel, the 1-cycle gaps separate every bar.
        let w = ix.window(3000, 3300, 300, &rows);
        let child_row = &w.iter().find(|r| ix.rows[r.row as usize].depth == 1).expect("row").items;
        assert_eq!(child_row.len(), 100);
        assert!(child_row.iter().all(|i| i.count == 1 && i.end - i.start == 2));
    }

    #[test]
    fn lanes_inherit_hints_and_open_records_end_now() {
        let lines = [
            rec(0, 1, None, r#"{"unit_id":1}"#),
            rec(5, 2, Some(1), r##"{"thread_id":3,"color":"#ff0000","status":"stalled","criticality":1.0}"##),
            rec(6, 3, Some(2), "{}"),
            rec(0, 4, None, "{}"),
            r#"{"clk":9,"type":"event","name":"Miss","record_id":3,"description":"","data":{"severity":"error","marker_style":"diamond","icon":"cache_miss"}}"#.to_owned(),
            r#"{"clk":9,"type":"event","name":"Info","record_id":3,"description":""}"#.to_owned(),
            r#"{"type":"annotation","name":"A","record_id":3,"description":"","data":1}"#.to_owned(),
            end(20, 3),
            r#"{"clk":20,"type":"record_end","record_id":4,"status":"flushed"}"#.to_owned(),
        ];
        let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
        let ix = index(&refs);
        let lane = |id: u64| {
            let r = ix.rec_by_id(id).expect("record");
            ix.lanes[ix.rows[ix.recs[r as usize].row as usize].lane as usize].key
        };
        assert_eq!((lane(2).unit, lane(2).thread), (Some(1), Some(3)));
        assert_eq!(lane(3), lane(2));
        assert_eq!(lane(4).unit, None);
        let r2 = ix.look(ix.rec_by_id(2).expect("2"));
        let stalled = stored_code(Some(Status::Stalled.code()));
        assert_eq!((r2.color, r2.status, r2.crit), (0x1ff0000, stalled, 255));
        let flushed = stored_code(Some(Status::Flushed.code()));
        assert_eq!(ix.look(ix.rec_by_id(4).expect("4")).status, flushed);
        assert_eq!(ix.now(), 20);
        let rows: Vec<u32> = (0..ix.rows.len() as u32).collect();
        let w = ix.window(0, 30, 300, &rows);
        let open: Vec<&Item> = w.iter().flat_map(|r| &r.items).filter(|i| i.open).collect();
        assert_eq!(open.len(), 2);
        assert!(open.iter().all(|i| i.end == 20));
        let markers: Vec<&Marker> = w.iter().flat_map(|r| &r.markers).collect();
        assert_eq!(markers.len(), 1, "an error and an info marker at the same cycle merge");
        let error = stored_code(Some(Severity::Error.code()));
        assert_eq!((markers[0].count, markers[0].severity), (2, error), "the highest severity");
        assert_eq!(ix.event_names.get(ix.kind(markers[0].ev).name), "Miss");
        let r3 = ix.rec_by_id(3).expect("3");
        assert_eq!(ix.events_of(r3, usize::MAX).len(), 2);
        assert_eq!(ix.annotations_of(r3).len(), 1);
        assert_eq!(ix.icons.get(0), "cache_miss");
    }

    #[test]
    fn bad_lines_are_counted_with_their_line_number() {
        let lines = [
            rec(0, 1, None, "{}"),
            "{\"type\":\"record\"".to_owned(),
            end(3, 99),
            rec(1, 1, None, "{}"),
            rec(2, 5, Some(42), "{}"),
        ];
        let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
        let ix = index(&refs);
        assert_eq!(ix.counts.errors, 4);
        assert!(ix.errors[0].starts_with("line 2: "), "{}", ix.errors[0]);
        assert_eq!(ix.errors[1], "line 3: record_end of unknown record 99");
        assert_eq!(ix.errors[2], "line 4: record id 1 is used twice");
        assert_eq!(ix.errors[3], "line 5: parent_id 42 is not a known record");
        // The orphan is still shown, as a root.
        assert_eq!(ix.roots().len(), 2);
    }

    #[test]
    fn children_page_in_file_order() {
        let ix = pipeline();
        let root = ix.rec_by_id(1);
        let first = ix.children(root, None, 10);
        assert_eq!(first.len(), 10);
        let next = ix.children(root, first.last().copied(), 10);
        assert_eq!(ix.rec_id(next[0]), 20);
        assert_eq!(ix.children(None, None, 10), vec![0]);
    }

    #[test]
    fn touching_bars_merge_only_when_narrow() {
        // 10 000 back-to-back stages of 10 cycles in one row: blocks of the summaries are used.
        let mut lines = vec![rec(0, 1, None, "{}")];
        for i in 0..10_000u64 {
            lines.push(rec(i * 10, 2 + i, Some(1), "{}"));
            lines.push(end(i * 10 + 10, 2 + i));
        }
        lines.push(rec(100_000, 20_000, Some(1), "{}")); // still open
        let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
        let ix = index(&refs);
        let row = ix.rows.iter().position(|r| r.depth == 1).expect("row") as u32;
        let items = |t0, t1, px| ix.window(t0, t1, px, &[row]).remove(0).items;
        // 1 cycle per pixel: every stage is 10 px wide and drawn on its own.
        let near = items(5_000, 6_000, 1_000);
        assert_eq!(near.len(), 101);
        assert!(near.iter().all(|i| i.count == 1));
        // 5 cycles per pixel: 2-pixel stages merge into one cluster; the open bar stays apart.
        let far = items(0, 100_100, 20_020);
        assert_eq!(far.len(), 2, "{far:?}");
        assert_eq!((far[0].count, far[0].start, far[0].end), (10_000, 0, 100_000));
        assert!(far[1].open && far[1].count == 1);
        // A window that ends inside the busy stretch cuts the cluster there.
        let part = items(0, 50_000, 10_000);
        assert_eq!(part.len(), 1);
        assert_eq!(part[0].count, 5_000);
    }

    #[test]
    fn merged_markers_keep_the_highest_severity_at_every_zoom() {
        // One warning among 2 000 severity-less stage events on 1 000 instructions.
        let mut lines = vec![rec(0, 1, None, "{}")];
        for i in 0..1000u64 {
            lines.push(rec(i, 10 + i, Some(1), "{}"));
            for (k, name) in ["IF", "EX", "WB"].iter().enumerate() {
                lines.push(format!(
                    r#"{{"clk":{},"type":"event","name":"{name}","record_id":{},"description":""}}"#,
                    i + k as u64,
                    10 + i
                ));
            }
            if i == 500 {
                lines.push(format!(
                    r#"{{"clk":{i},"type":"event","name":"DCacheMiss","record_id":{},"description":"","data":{{"severity":"warning"}}}}"#,
                    10 + i
                ));
            }
            lines.push(end(i + 3, 10 + i));
        }
        let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
        let ix = index(&refs);
        let rows: Vec<u32> = (0..ix.rows.len() as u32).collect();
        let warning = stored_code(Some(Severity::Warning.code()));
        for (t0, t1, px) in [(0, 1010, 10), (0, 1010, 1000), (480, 520, 800), (500, 501, 100)] {
            let w = ix.window(t0, t1, px, &rows);
            let markers: Vec<&Marker> = w.iter().flat_map(|r| &r.markers).collect();
            let warn: Vec<&&Marker> = markers.iter().filter(|m| m.severity == warning).collect();
            assert_eq!(warn.len(), 1, "the miss shows as a warning at {t0}..{t1} over {px} px");
            let total: u32 = markers.iter().map(|m| m.count).sum();
            assert!(total >= 1 && (t1 - t0 > 100 || total <= 3 * (t1 - t0) as u32 + 1));
        }
        assert_eq!(
            ix.pipeline_type(),
            ix.types.names.iter().position(|t| &**t == "T").map(|t| t as u32)
        );
        let seq = ix.seqs_of_type(0);
        assert_eq!(seq.len(), 2, "the root and the instructions are separate sequences");
        let instrs =
            seq.iter().copied().find(|&s| ix.seqs[s as usize].parent != NONE).expect("seq");
        assert_eq!(ix.seq_find(instrs, 700), 700);
    }

    #[test]
    fn gallop_finds_the_end_of_a_prefix() {
        let v: Vec<u32> = (0..100).collect();
        for from in [0, 1, 37, 99, 100] {
            for limit in [0, 1, 2, 50, 98, 99, 100, 200] {
                let expect = (limit as usize).clamp(from, 100);
                assert_eq!(gallop(&v, from, |&x| x < limit), expect, "from {from} limit {limit}");
            }
        }
    }

    #[test]
    fn sparse_ids_fall_back_to_a_map() {
        let lines = [rec(0, 1 << 40, None, "{}"), rec(1, 3, Some(1 << 40), "{}")];
        let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
        let ix = index(&refs);
        assert_eq!(ix.rec_by_id(1 << 40), Some(0));
        assert_eq!(ix.rec_by_id(3), Some(1));
        assert_eq!(ix.rec_by_id(4), None);
        assert_eq!((ix.rec_id(0), ix.rec_id(1)), (1 << 40, 3), "a 64-bit id is kept whole");
    }

    #[test]
    fn entries_stay_small_and_values_that_do_not_fit_are_kept_whole() {
        use std::mem::size_of;
        assert_eq!((size_of::<Rec>(), size_of::<Slot>(), size_of::<Ev>()), (36, 16, 14));
        let parse = |l: &str| Parsed::from_line(Line::parse(l).expect("line"));
        let mut ix = Index::new();
        let big = 5u64 << 32; // past 4 GiB of file and 4 G cycles
        ix.apply(parse(&rec(0, 1, None, "{}")), 1, 0);
        ix.apply(parse(&rec(7, 2, Some(1), "{}")), 2, 100);
        ix.apply(parse(&rec(big, 3, Some(1), "{}")), 3, big);
        ix.apply(parse(&rec(big + 1, 4, Some(1), "{}")), 4, big + 7);
        assert_eq!(
            (0..4).map(|r| ix.rec_offset(r)).collect::<Vec<_>>(),
            vec![0, 100, big, big + 7]
        );
        // An event far in time and in the file from its record.
        let ev = |clk: u64, name: &str| {
            format!(
                r#"{{"clk":{clk},"type":"event","name":"{name}","record_id":1,"description":""}}"#
            )
        };
        ix.apply(parse(&ev(big + 2, "late")), 5, big + 50);
        assert_eq!((ix.ev_clk(0), ix.ev_offset(0)), (big + 2, big + 50));
        // A bar longer than 4 G cycles.
        ix.apply(parse(&end(big + 3, 1)), 6, big + 60);
        ix.apply(parse(&end(9, 2)), 7, big + 70);
        assert_eq!((ix.bar(0).start, ix.bar(0).end), (0, Some(big + 3)));
        assert_eq!((ix.bar(1).start, ix.bar(1).end), (7, Some(9)));
        assert_eq!(ix.bar(2).end, None);
        // More event kinds than 16 bits hold.
        for i in 0..70_000u64 {
            ix.apply(parse(&ev(big + 2, &format!("k{i}"))), 8 + i, big + 100 + i);
        }
        assert_eq!(ix.kinds.items.len(), 70_001);
        let last = ix.evs.len() as u32 - 1;
        assert_eq!(ix.event_names.get(ix.kind(last).name), "k69999");
        // A record that ends at the last cycle has ended (it was shown as open: its end was the
        // sentinel for none).
        ix.apply(parse(&end(u64::MAX, 3)), 80_000, big + 200_000);
        assert_eq!(ix.bar(2).end, Some(u64::MAX));
        assert_eq!(ix.event_names.get(ix.kind(1).name), "k0");
    }
}
