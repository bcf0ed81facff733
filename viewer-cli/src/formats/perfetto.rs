//! JETS → Perfetto protobuf trace (`Trace { repeated TracePacket packet = 1 }`), for the Perfetto
//! UI and trace processor.
//!
//! Hand-encoded: the few messages needed (TracePacket, TrackDescriptor, TrackEvent, InternedData,
//! DebugAnnotation, ClockSnapshot) are a page of field numbers, not worth a protobuf toolchain in
//! the build. Layout, with the same lanes as the Chrome output ([`super::timeline`]):
//!
//! * each root record is a track with `child_ordering = EXPLICIT`, its lanes child tracks ordered by
//!   `sibling_order_rank` (lane 0, the events, first), each named after the records on it
//!   (CV-NEST-2) and never merged with a same-named sibling;
//! * records are `TYPE_SLICE_BEGIN`/`TYPE_SLICE_END` pairs, events `TYPE_INSTANT`, with names and
//!   categories (record_type) interned, data and annotations as debug annotations;
//! * packets are written in time order (CV-PERFETTO-1, [`PerfettoSink`]): a record that stays
//!   open long (a core, a thread, a unit) gets a track of its own, ranked before the lanes;
//! * timestamps are simulated time in ns (from `clock_frequency_mhz`, 1 cycle = 1 µs without it)
//!   on the default trace clock; each host sync point (`HostSync` event, spec/host-sync.md) becomes
//!   a `ClockSnapshot` linking that simulated instant to CLOCK_MONOTONIC and CLOCK_REALTIME.

use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap, HashMap};
use std::io::Write;
use std::path::Path;

use anyhow::{Context, Result};
use jets::format::{Annotation, Header};
use serde_json::{Map, Value};

use super::chrome::record_args;
use super::timeline::{
    cycles_to_ns, read_trace, time_past, CaptureMark, Instant, OpenRecord, Process, Slice,
    Timeline, TimelineSink,
};
use crate::convert::Output;

/// The main packet sequence (late packets get sequences of their own, numbered after it).
const SEQUENCE: u64 = 1;
/// The key of the track that says a trace is a part of its run (CV-CAP-1): root records have
/// ids from 1, so process 0 is nobody's.
const CAPTURE_TRACK: (u64, u32) = (0, 0);
/// Names interned at most; later new names are written inline (unique record names would
/// otherwise make the table grow with the trace).
const MAX_INTERNED: usize = 1 << 17;

/// Field numbers of the Perfetto protos used here.
mod field {
    pub const TRACE_PACKET: u32 = 1;
    // TracePacket
    pub const CLOCK_SNAPSHOT: u32 = 6;
    pub const TIMESTAMP: u32 = 8;
    pub const SEQUENCE_ID: u32 = 10;
    pub const TRACK_EVENT: u32 = 11;
    pub const INTERNED_DATA: u32 = 12;
    pub const SEQUENCE_FLAGS: u32 = 13;
    pub const TRACK_DESCRIPTOR: u32 = 60;
    // TrackDescriptor
    pub const TD_UUID: u32 = 1;
    pub const TD_NAME: u32 = 2;
    pub const TD_PARENT_UUID: u32 = 5;
    pub const TD_CHILD_ORDERING: u32 = 11;
    pub const TD_SIBLING_ORDER_RANK: u32 = 12;
    pub const TD_DESCRIPTION: u32 = 14;
    pub const TD_SIBLING_MERGE_BEHAVIOR: u32 = 15;
    // TrackEvent
    pub const TE_CATEGORY_IIDS: u32 = 3;
    pub const TE_DEBUG_ANNOTATIONS: u32 = 4;
    pub const TE_TYPE: u32 = 9;
    pub const TE_NAME_IID: u32 = 10;
    pub const TE_TRACK_UUID: u32 = 11;
    pub const TE_CATEGORIES: u32 = 22;
    pub const TE_NAME: u32 = 23;
    // InternedData, EventCategory / EventName
    pub const ID_EVENT_CATEGORIES: u32 = 1;
    pub const ID_EVENT_NAMES: u32 = 2;
    pub const IID: u32 = 1;
    pub const INTERNED_NAME: u32 = 2;
    // DebugAnnotation
    pub const DA_BOOL: u32 = 2;
    pub const DA_UINT: u32 = 3;
    pub const DA_INT: u32 = 4;
    pub const DA_DOUBLE: u32 = 5;
    pub const DA_STRING: u32 = 6;
    pub const DA_LEGACY_JSON: u32 = 9;
    pub const DA_NAME: u32 = 10;
    // ClockSnapshot / Clock
    pub const CS_CLOCKS: u32 = 1;
    pub const CLOCK_ID: u32 = 1;
    pub const CLOCK_TIMESTAMP: u32 = 2;
}

/// TrackEvent.Type values.
const SLICE_BEGIN: u64 = 1;
const SLICE_END: u64 = 2;
const INSTANT: u64 = 3;
/// TrackDescriptor.ChildTracksOrdering.EXPLICIT.
const EXPLICIT: u64 = 3;
/// TrackDescriptor.SiblingMergeBehavior.NONE: a track is never merged with same-named siblings,
/// and a descriptor written again renames it.
const MERGE_NONE: u64 = 2;
/// TracePacket.SequenceFlags.
const INCREMENTAL_STATE_CLEARED: u64 = 1;
const NEEDS_INCREMENTAL_STATE: u64 = 2;
/// BuiltinClock ids.
const CLOCK_REALTIME: u64 = 1;
const CLOCK_MONOTONIC: u64 = 3;
const CLOCK_BOOTTIME: u64 = 6;

/// Protobuf wire encoding into a byte vector.
pub mod wire {
    /// Appends a varint.
    pub fn varint(out: &mut Vec<u8>, mut v: u64) {
        while v >= 0x80 {
            out.push((v as u8) | 0x80);
            v >>= 7;
        }
        out.push(v as u8);
    }
    /// Appends a varint field.
    pub fn uint(out: &mut Vec<u8>, field: u32, v: u64) {
        varint(out, (field as u64) << 3);
        varint(out, v);
    }
    /// Appends a signed (int32/int64, two's complement) varint field.
    pub fn int(out: &mut Vec<u8>, field: u32, v: i64) {
        uint(out, field, v as u64);
    }
    /// Appends a double field.
    pub fn double(out: &mut Vec<u8>, field: u32, v: f64) {
        varint(out, ((field as u64) << 3) | 1);
        out.extend_from_slice(&v.to_le_bytes());
    }
    /// Appends a length-delimited field.
    pub fn bytes(out: &mut Vec<u8>, field: u32, b: &[u8]) {
        varint(out, ((field as u64) << 3) | 2);
        varint(out, b.len() as u64);
        out.extend_from_slice(b);
    }
}

/// Packets held back to be written in time order, at most; past that, the open record that began
/// first gets a track of its own so that what came after it can go (CV-PERFETTO-1).
pub const MAX_HELD: usize = 1 << 14;
/// Packets always held back, so lines a little out of time order (a simulator writing an event of
/// the next cycle before one of this cycle) still find their place.
pub const REORDER: usize = 1 << 10;

/// A packet waiting for its turn: a track event (names interned when it is written, so interned
/// data always precedes its use) or a finished body.
enum Body {
    Event { track: u64, kind: u64, name: String, category: Option<String>, annotations: Vec<u8> },
    Raw(Vec<u8>),
}

struct Held {
    ts: u64,
    seq: u64,
    body: Body,
}

impl PartialEq for Held {
    fn eq(&self, o: &Self) -> bool {
        (self.ts, self.seq) == (o.ts, o.seq)
    }
}
impl Eq for Held {}
impl PartialOrd for Held {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Held {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        (self.ts, self.seq).cmp(&(o.ts, o.seq))
    }
}

/// A track, kept to describe it late or again under a new name.
struct TrackInfo {
    uuid: u64,
    parent: Option<u64>,
    rank: i64,
    name: String,
    description: Option<String>,
    described: bool,
}

/// Writes a Perfetto trace.
///
/// Slices are known when their record ends, so their begin packets are held in a time-ordered
/// buffer and written once no open record can still produce an earlier one: the main sequence's
/// timestamps never decrease. A record that stays open while [`MAX_HELD`] packets wait gets a
/// track of its own (named after it), where its begin is written at once; a packet that arrives
/// after later ones were written (a trace out of time order) goes on a sequence of its own.
pub struct PerfettoSink<W: Write> {
    out: W,
    buf: Vec<u8>,
    mhz: f64,
    unit_note: String,
    tracks: HashMap<(u64, u32), TrackInfo>,
    /// Tracks declared and not described yet, by uuid.
    undescribed: HashMap<u64, (u64, u32)>,
    next_uuid: u64,
    names: HashMap<String, u64>,
    categories: HashMap<String, u64>,
    first: bool,
    held: BinaryHeap<Reverse<Held>>,
    seq: u64,
    /// Open records by start (ns): what can still produce an early begin packet.
    open: BTreeSet<(u64, u64)>,
    /// Open records: process, name, record_type, start (ns).
    open_info: HashMap<u64, (u64, String, String, u64)>,
    /// Records moved to a track of their own, and that track.
    own: HashMap<u64, u64>,
    own_tracks: i64,
    /// The last timestamp written on the main sequence.
    written: Option<u64>,
    next_sequence: u64,
}

impl<W: Write> PerfettoSink<W> {
    /// A sink writing to `out`.
    pub fn new(out: W) -> Self {
        PerfettoSink {
            out,
            buf: Vec::with_capacity(1 << 16),
            mhz: 1.0,
            unit_note: String::new(),
            tracks: HashMap::new(),
            undescribed: HashMap::new(),
            next_uuid: 1,
            names: HashMap::new(),
            categories: HashMap::new(),
            first: true,
            held: BinaryHeap::new(),
            seq: 0,
            open: BTreeSet::new(),
            open_info: HashMap::new(),
            own: HashMap::new(),
            own_tracks: 0,
            written: None,
            next_sequence: SEQUENCE + 1,
        }
    }

    /// Gives back the writer.
    pub fn into_inner(self) -> W {
        self.out
    }

    /// Cycle `clk` in ns; an error past what Perfetto's `u64` timestamps hold (a cast would wrap).
    fn ns(&self, clk: u64) -> Result<u64> {
        cycles_to_ns(clk, self.mhz)
            .ok_or_else(|| time_past(clk, self.mhz, "the largest Perfetto timestamp (2^64 ns)"))
    }

    fn emit(&mut self, sequence: u64, flags: Option<u64>, body: &[u8]) -> Result<()> {
        let mut p = Vec::with_capacity(body.len() + 8);
        wire::uint(&mut p, field::SEQUENCE_ID, sequence);
        if let Some(f) = flags {
            wire::uint(&mut p, field::SEQUENCE_FLAGS, f);
        }
        p.extend_from_slice(body);
        wire::bytes(&mut self.buf, field::TRACE_PACKET, &p);
        if self.buf.len() >= 1 << 16 {
            self.out.write_all(&self.buf).context("writing Perfetto trace")?;
            self.buf.clear();
        }
        Ok(())
    }

    /// A packet on the main sequence.
    fn packet(&mut self, body: &[u8]) -> Result<()> {
        let flags = if std::mem::replace(&mut self.first, false) {
            INCREMENTAL_STATE_CLEARED
        } else {
            NEEDS_INCREMENTAL_STATE
        };
        self.emit(SEQUENCE, Some(flags), body)
    }

    /// Declares track `key` (or renames it). Lanes are described when their first event is
    /// written (`now` false), so a lane that ends up empty in this output is never shown; a
    /// track already described is described again under its new name. Every track is its own
    /// (no merging with same-named siblings), which is also what lets a new name replace the old.
    fn track(
        &mut self,
        key: (u64, u32),
        parent: Option<u64>,
        name: &str,
        rank: i64,
        description: Option<&str>,
        now: bool,
    ) -> Result<u64> {
        let (uuid, described) = match self.tracks.get_mut(&key) {
            Some(t) => {
                t.name = name.to_owned();
                (t.uuid, t.described)
            }
            None => {
                let uuid = self.next_uuid;
                self.next_uuid += 1;
                let info = TrackInfo {
                    uuid,
                    parent,
                    rank,
                    name: name.to_owned(),
                    description: description.map(str::to_owned),
                    described: false,
                };
                self.tracks.insert(key, info);
                self.undescribed.insert(uuid, key);
                (uuid, false)
            }
        };
        if described || now {
            self.undescribed.remove(&uuid);
            self.describe(key)?;
        }
        Ok(uuid)
    }

    fn describe(&mut self, key: (u64, u32)) -> Result<()> {
        let Some(t) = self.tracks.get_mut(&key) else { return Ok(()) };
        t.described = true;
        let mut td = Vec::new();
        wire::uint(&mut td, field::TD_UUID, t.uuid);
        wire::bytes(&mut td, field::TD_NAME, t.name.as_bytes());
        match t.parent {
            Some(p) => wire::uint(&mut td, field::TD_PARENT_UUID, p),
            None => wire::uint(&mut td, field::TD_CHILD_ORDERING, EXPLICIT),
        }
        wire::int(&mut td, field::TD_SIBLING_ORDER_RANK, t.rank);
        wire::uint(&mut td, field::TD_SIBLING_MERGE_BEHAVIOR, MERGE_NONE);
        if let Some(d) = &t.description {
            wire::bytes(&mut td, field::TD_DESCRIPTION, d.as_bytes());
        }
        let mut body = Vec::new();
        wire::bytes(&mut body, field::TRACK_DESCRIPTOR, &td);
        self.packet(&body)
    }

    /// Describes `uuid` if it has not been yet (before the first event on it).
    fn ensure_described(&mut self, uuid: u64) -> Result<()> {
        match self.undescribed.remove(&uuid) {
            Some(key) => self.describe(key),
            None => Ok(()),
        }
    }

    /// The interned id of `name` (with its definition added to `interned` the first time), or
    /// `None` once the table is full.
    fn intern_name(&mut self, interned: &mut Vec<u8>, name: &str) -> Option<u64> {
        if !self.names.contains_key(name) && self.names.len() >= MAX_INTERNED {
            return None;
        }
        Some(intern(&mut self.names, interned, field::ID_EVENT_NAMES, name))
    }

    fn intern_category(&mut self, interned: &mut Vec<u8>, cat: &str) -> u64 {
        intern(&mut self.categories, interned, field::ID_EVENT_CATEGORIES, cat)
    }

    /// Writes a held packet on the main sequence, interning its names now.
    fn write_main(&mut self, h: Held) -> Result<()> {
        let mut body = Vec::new();
        wire::uint(&mut body, field::TIMESTAMP, h.ts);
        match h.body {
            Body::Raw(raw) => body.extend_from_slice(&raw),
            Body::Event { track, kind, name, category, annotations } => {
                self.ensure_described(track)?;
                let (mut te, mut interned) = (Vec::new(), Vec::new());
                wire::uint(&mut te, field::TE_TYPE, kind);
                wire::uint(&mut te, field::TE_TRACK_UUID, track);
                if kind != SLICE_END {
                    match self.intern_name(&mut interned, &name) {
                        Some(iid) => wire::uint(&mut te, field::TE_NAME_IID, iid),
                        None => wire::bytes(&mut te, field::TE_NAME, name.as_bytes()),
                    }
                }
                if let Some(cat) = category {
                    let iid = self.intern_category(&mut interned, &cat);
                    wire::uint(&mut te, field::TE_CATEGORY_IIDS, iid);
                }
                te.extend_from_slice(&annotations);
                if !interned.is_empty() {
                    wire::bytes(&mut body, field::INTERNED_DATA, &interned);
                }
                wire::bytes(&mut body, field::TRACK_EVENT, &te);
            }
        }
        self.written = Some(h.ts);
        self.packet(&body)
    }

    /// Writes packets that come too late for the main sequence on a sequence of their own
    /// (names inline: interning is per sequence).
    fn write_alone(&mut self, packets: Vec<(u64, Body)>) -> Result<()> {
        let sequence = self.next_sequence;
        self.next_sequence += 1;
        for (i, (ts, b)) in packets.into_iter().enumerate() {
            let mut body = Vec::new();
            wire::uint(&mut body, field::TIMESTAMP, ts);
            match b {
                Body::Raw(raw) => body.extend_from_slice(&raw),
                Body::Event { track, kind, name, category, annotations } => {
                    self.ensure_described(track)?;
                    let mut te = Vec::new();
                    wire::uint(&mut te, field::TE_TYPE, kind);
                    wire::uint(&mut te, field::TE_TRACK_UUID, track);
                    if kind != SLICE_END {
                        wire::bytes(&mut te, field::TE_NAME, name.as_bytes());
                    }
                    if let Some(cat) = category {
                        wire::bytes(&mut te, field::TE_CATEGORIES, cat.as_bytes());
                    }
                    te.extend_from_slice(&annotations);
                    wire::bytes(&mut body, field::TRACK_EVENT, &te);
                }
            }
            let flags = (i == 0).then_some(INCREMENTAL_STATE_CLEARED);
            self.emit(sequence, flags, &body)?;
        }
        Ok(())
    }

    /// Queues packets that belong together (a slice's begin and end), in time order.
    fn hold(&mut self, packets: Vec<(u64, Body)>) -> Result<()> {
        let first = packets.iter().map(|(ts, _)| *ts).min().unwrap_or(0);
        if self.written.is_some_and(|w| first < w) {
            return self.write_alone(packets);
        }
        for (ts, body) in packets {
            self.seq += 1;
            self.held.push(Reverse(Held { ts, seq: self.seq, body }));
        }
        self.release(false)
    }

    /// Writes what no open record can precede any more (everything when `all`), keeping the
    /// latest [`REORDER`] packets back for lines written a little out of time order; while too
    /// much is held, the open record that began first stops holding it back.
    fn release(&mut self, all: bool) -> Result<()> {
        loop {
            let (limit, keep) = match self.open.first() {
                _ if all => (u64::MAX, 0),
                Some(&(start, _)) => (start, REORDER),
                None => (u64::MAX, REORDER),
            };
            while self.held.len() > keep && self.held.peek().is_some_and(|Reverse(h)| h.ts <= limit)
            {
                if let Some(Reverse(h)) = self.held.pop() {
                    self.write_main(h)?;
                }
            }
            if all || self.held.len() <= MAX_HELD || self.open.is_empty() {
                return Ok(());
            }
            self.give_up()?;
        }
    }

    /// The open record that began first gets a track of its own, and its begin is queued now.
    fn give_up(&mut self) -> Result<()> {
        let Some((start, id)) = self.open.pop_first() else { return Ok(()) };
        let Some((pid, name, record_type, _)) = self.open_info.remove(&id) else { return Ok(()) };
        let parent = self.tracks.get(&(pid, u32::MAX)).map(|t| t.uuid);
        self.own_tracks += 1;
        // After the events lane (rank 0), before the lanes (ranks from 1)? Lanes hold its
        // descendants; the record's own track goes first among the process's tracks.
        let rank = -self.own_tracks;
        let key = (pid, u32::MAX - 1 - self.own_tracks as u32);
        let uuid = self.track(key, parent, &format!("{name} ({record_type})"), rank, None, true)?;
        self.own.insert(id, uuid);
        self.seq += 1;
        let body = Body::Event {
            track: uuid,
            kind: SLICE_BEGIN,
            name,
            category: Some(record_type),
            annotations: Vec::new(),
        };
        self.held.push(Reverse(Held { ts: start, seq: self.seq, body }));
        Ok(())
    }

    fn lane_uuid(&self, pid: u64, lane: u32) -> u64 {
        self.tracks.get(&(pid, lane)).map_or(0, |t| t.uuid)
    }
}

/// Appends `args` as debug annotations.
fn annotations(te: &mut Vec<u8>, args: &Map<String, Value>) {
    for (k, v) in args {
        let mut da = Vec::new();
        wire::bytes(&mut da, field::DA_NAME, k.as_bytes());
        match v {
            Value::Bool(b) => wire::uint(&mut da, field::DA_BOOL, u64::from(*b)),
            Value::Number(n) => {
                if let Some(u) = n.as_u64() {
                    wire::uint(&mut da, field::DA_UINT, u)
                } else if let Some(i) = n.as_i64() {
                    wire::int(&mut da, field::DA_INT, i)
                } else {
                    wire::double(&mut da, field::DA_DOUBLE, n.as_f64().unwrap_or(f64::NAN))
                }
            }
            Value::String(s) => wire::bytes(&mut da, field::DA_STRING, s.as_bytes()),
            other => wire::bytes(&mut da, field::DA_LEGACY_JSON, other.to_string().as_bytes()),
        }
        wire::bytes(te, field::TE_DEBUG_ANNOTATIONS, &da);
    }
}

impl<W: Write> TimelineSink for PerfettoSink<W> {
    fn header(&mut self, header: &Header<'_>, mhz: f64, stated: bool) -> Result<()> {
        self.mhz = mhz;
        self.unit_note = if stated {
            // Short at any clock (CV-TIME-3), as in `jets stats`.
            let (cycle, mhz) = (crate::human::cycles_time(1, mhz), crate::human::number(mhz));
            format!("JETS trace; 1 cycle = {cycle} (clock_frequency_mhz {mhz})")
        } else {
            "JETS trace; 1 cycle = 1 µs (the trace gives no clock_frequency_mhz)".to_owned()
        };
        if let Some(model) = header.metadata.get("hardware_model").and_then(Value::as_str) {
            self.unit_note = format!("{model}: {}", self.unit_note);
        }
        Ok(())
    }

    fn process(&mut self, p: &Process<'_>) -> Result<()> {
        let note = self.unit_note.clone();
        let name = format!("{} ({})", p.name, p.record_type);
        let (key, rank) = ((p.pid, u32::MAX), p.sort_index as i64);
        let uuid = self.track(key, None, &name, rank, Some(&note), true)?;
        self.track((p.pid, 0), Some(uuid), "events", 0, None, false)?;
        Ok(())
    }

    fn lane(&mut self, pid: u64, lane: u32, name: &str) -> Result<()> {
        let parent = self.lane_uuid(pid, u32::MAX);
        self.track((pid, lane), Some(parent), name, lane as i64, None, false)?;
        Ok(())
    }

    fn begin(&mut self, pid: u64, r: &OpenRecord) -> Result<()> {
        let ts = self.ns(r.start)?;
        self.open.insert((ts, r.id));
        self.open_info.insert(r.id, (pid, r.name.clone(), r.record_type.clone(), ts));
        Ok(())
    }

    fn slice(&mut self, s: &Slice<'_>) -> Result<()> {
        let r = s.record;
        let (begin, end) = (self.ns(r.start)?, self.ns(s.end)?);
        if self.open_info.remove(&r.id).is_some() {
            self.open.remove(&(begin, r.id));
        }
        let mut args = Vec::new();
        annotations(&mut args, &record_args(s));
        let packets = match self.own.remove(&r.id) {
            // Its begin is already queued on its own track: the end carries the arguments.
            Some(track) => vec![(
                end,
                Body::Event {
                    track,
                    kind: SLICE_END,
                    name: String::new(),
                    category: None,
                    annotations: args,
                },
            )],
            None => {
                let track = self.lane_uuid(s.pid, s.lane);
                vec![
                    (
                        begin,
                        Body::Event {
                            track,
                            kind: SLICE_BEGIN,
                            name: r.name.clone(),
                            category: Some(r.record_type.clone()),
                            annotations: args,
                        },
                    ),
                    (
                        end,
                        Body::Event {
                            track,
                            kind: SLICE_END,
                            name: String::new(),
                            category: None,
                            annotations: Vec::new(),
                        },
                    ),
                ]
            }
        };
        self.hold(packets)
    }

    fn instant(&mut self, i: &Instant<'_>) -> Result<()> {
        let e = i.event;
        let ts = self.ns(e.clk)?;
        if e.name == jets_host::sync::SYNC_EVENT {
            if let Some(Ok(p)) = jets_host::sync::SyncPoint::from_event(e) {
                let mut cs = Vec::new();
                for (id, t) in [
                    (CLOCK_BOOTTIME, ts),
                    (CLOCK_MONOTONIC, p.mono_ns),
                    (CLOCK_REALTIME, p.real_ns),
                ] {
                    let mut c = Vec::new();
                    wire::uint(&mut c, field::CLOCK_ID, id);
                    wire::uint(&mut c, field::CLOCK_TIMESTAMP, t);
                    wire::bytes(&mut cs, field::CS_CLOCKS, &c);
                }
                let mut raw = Vec::new();
                wire::bytes(&mut raw, field::CLOCK_SNAPSHOT, &cs);
                self.hold(vec![(ts, Body::Raw(raw))])?;
            }
        }
        let mut args = Map::new();
        args.insert("record_id".into(), e.record_id.into());
        if let Some(n) = i.record_name {
            args.insert("record".into(), n.into());
        }
        if !e.description.is_empty() {
            args.insert("description".into(), e.description.to_string().into());
        }
        if let Some(d) = &e.data {
            args.insert("data".into(), d.clone());
        }
        let mut ann = Vec::new();
        annotations(&mut ann, &args);
        let track = self.lane_uuid(i.pid, 0);
        let body = Body::Event {
            track,
            kind: INSTANT,
            name: e.name.to_string(),
            category: None,
            annotations: ann,
        };
        self.hold(vec![(ts, body)])
    }

    fn late_annotation(&mut self, pid: u64, a: &Annotation<'_>) -> Result<()> {
        // Untimed, and its slice is already written: an instant at time 0 on the events lane.
        let mut args = Map::new();
        args.insert("record_id".into(), a.record_id.into());
        args.insert("description".into(), a.description.to_string().into());
        args.insert("data".into(), a.data.clone());
        let mut ann = Vec::new();
        annotations(&mut ann, &args);
        let track = self.lane_uuid(pid, 0);
        let name = format!("annotation {}", a.name);
        let body = Body::Event { track, kind: INSTANT, name, category: None, annotations: ann };
        self.hold(vec![(0, body)])
    }

    fn capture(&mut self, marks: &[CaptureMark]) -> Result<()> {
        // A track of its own, first of all, named and described so that the Perfetto UI says
        // what the trace is; its instants mark the window's edges.
        let Some(first) = marks.first() else { return Ok(()) };
        let uuid = self.track(CAPTURE_TRACK, None, "capture", i64::MIN, Some(&first.text), true)?;
        for m in marks {
            let mut args = Map::new();
            args.insert("capture".into(), m.text.clone().into());
            let mut ann = Vec::new();
            annotations(&mut ann, &args);
            let body = Body::Event {
                track: uuid,
                kind: INSTANT,
                name: m.name.to_owned(),
                category: None,
                annotations: ann,
            };
            let ts = self.ns(m.clk)?;
            self.hold(vec![(ts, body)])?;
        }
        Ok(())
    }

    fn finish(&mut self, _end_clk: u64) -> Result<()> {
        self.release(true)?;
        self.out.write_all(&self.buf).context("writing Perfetto trace")?;
        self.buf.clear();
        Ok(())
    }
}

/// Converts the JETS trace at `input` into a Perfetto protobuf trace on `out`.
pub fn convert(input: &Path, out: Output) -> Result<()> {
    let mut timeline = Timeline::new(PerfettoSink::new(out));
    read_trace(input, |_, line| timeline.line(line))?;
    timeline.finish()?.into_inner().finish()
}

/// The interning id of `text` in `table`; a new one is also added to the packet's `interned`
/// data under `list` (event names or categories).
fn intern(table: &mut HashMap<String, u64>, interned: &mut Vec<u8>, list: u32, text: &str) -> u64 {
    if let Some(&iid) = table.get(text) {
        return iid;
    }
    let iid = table.len() as u64 + 1;
    table.insert(text.to_owned(), iid);
    let mut entry = Vec::new();
    wire::uint(&mut entry, field::IID, iid);
    wire::bytes(&mut entry, field::INTERNED_NAME, text.as_bytes());
    wire::bytes(interned, list, &entry);
    iid
}
