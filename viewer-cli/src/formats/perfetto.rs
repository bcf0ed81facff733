//! JETS → Perfetto protobuf trace (`Trace { repeated TracePacket packet = 1 }`), for the Perfetto
//! UI and trace processor.
//!
//! Hand-encoded: the few messages needed (TracePacket, TrackDescriptor, TrackEvent, InternedData,
//! DebugAnnotation, ClockSnapshot) are a page of field numbers, not worth a protobuf toolchain in
//! the build. Layout, with the same lanes as the Chrome output ([`super::timeline`]):
//!
//! * each root record is a track with `child_ordering = EXPLICIT`, its lanes child tracks ordered by
//!   `sibling_order_rank` (lane 0, the events, first);
//! * records are `TYPE_SLICE_BEGIN`/`TYPE_SLICE_END` pairs, events `TYPE_INSTANT`, with names and
//!   categories (record_type) interned, data and annotations as debug annotations;
//! * timestamps are simulated time in ns (from `clock_frequency_mhz`, 1 cycle = 1 µs without it)
//!   on the default trace clock; each host sync point (`HostSync` event, spec/host-sync.md) becomes
//!   a `ClockSnapshot` linking that simulated instant to CLOCK_MONOTONIC and CLOCK_REALTIME.

use std::collections::HashMap;
use std::io::Write;
use std::path::Path;

use anyhow::{Context, Result};
use jets::format::{Annotation, Header};
use serde_json::{Map, Value};

use super::chrome::record_args;
use super::timeline::{cycles_to_ps, read_trace, Instant, Process, Slice, Timeline, TimelineSink};
use crate::convert::Output;

/// Our one packet sequence.
const SEQUENCE: u64 = 1;
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
    // TrackEvent
    pub const TE_CATEGORY_IIDS: u32 = 3;
    pub const TE_DEBUG_ANNOTATIONS: u32 = 4;
    pub const TE_TYPE: u32 = 9;
    pub const TE_NAME_IID: u32 = 10;
    pub const TE_TRACK_UUID: u32 = 11;
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

/// Writes a Perfetto trace.
pub struct PerfettoSink<W: Write> {
    out: W,
    buf: Vec<u8>,
    mhz: f64,
    unit_note: String,
    tracks: HashMap<(u64, u32), u64>,
    next_uuid: u64,
    names: HashMap<String, u64>,
    categories: HashMap<String, u64>,
    first: bool,
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
            next_uuid: 1,
            names: HashMap::new(),
            categories: HashMap::new(),
            first: true,
        }
    }

    /// Gives back the writer.
    pub fn into_inner(self) -> W {
        self.out
    }

    fn ns(&self, clk: u64) -> u64 {
        ((cycles_to_ps(clk, self.mhz) + 500) / 1000) as u64
    }

    fn packet(&mut self, body: &[u8]) -> Result<()> {
        let mut p = Vec::with_capacity(body.len() + 8);
        wire::uint(&mut p, field::SEQUENCE_ID, SEQUENCE);
        if self.first {
            wire::uint(&mut p, field::SEQUENCE_FLAGS, INCREMENTAL_STATE_CLEARED);
            self.first = false;
        } else {
            wire::uint(&mut p, field::SEQUENCE_FLAGS, NEEDS_INCREMENTAL_STATE);
        }
        p.extend_from_slice(body);
        wire::bytes(&mut self.buf, field::TRACE_PACKET, &p);
        if self.buf.len() >= 1 << 16 {
            self.out.write_all(&self.buf).context("writing Perfetto trace")?;
            self.buf.clear();
        }
        Ok(())
    }

    fn track(
        &mut self,
        key: (u64, u32),
        parent: Option<u64>,
        name: &str,
        rank: i64,
        description: Option<&str>,
    ) -> Result<u64> {
        let uuid = self.next_uuid;
        self.next_uuid += 1;
        self.tracks.insert(key, uuid);
        let mut td = Vec::new();
        wire::uint(&mut td, field::TD_UUID, uuid);
        wire::bytes(&mut td, field::TD_NAME, name.as_bytes());
        match parent {
            Some(p) => wire::uint(&mut td, field::TD_PARENT_UUID, p),
            None => wire::uint(&mut td, field::TD_CHILD_ORDERING, EXPLICIT),
        }
        wire::int(&mut td, field::TD_SIBLING_ORDER_RANK, rank);
        if let Some(d) = description {
            wire::bytes(&mut td, field::TD_DESCRIPTION, d.as_bytes());
        }
        let mut body = Vec::new();
        wire::bytes(&mut body, field::TRACK_DESCRIPTOR, &td);
        self.packet(&body)?;
        Ok(uuid)
    }

    /// Appends the name to the event (interned when the table has room) and any new interned
    /// entries to `interned`.
    fn name(&mut self, te: &mut Vec<u8>, interned: &mut Vec<u8>, name: &str) {
        let iid = match self.names.get(name) {
            Some(&iid) => Some(iid),
            None if self.names.len() < MAX_INTERNED => {
                let iid = self.names.len() as u64 + 1;
                self.names.insert(name.to_owned(), iid);
                let mut en = Vec::new();
                wire::uint(&mut en, field::IID, iid);
                wire::bytes(&mut en, field::INTERNED_NAME, name.as_bytes());
                wire::bytes(interned, field::ID_EVENT_NAMES, &en);
                Some(iid)
            }
            None => None,
        };
        match iid {
            Some(iid) => wire::uint(te, field::TE_NAME_IID, iid),
            None => wire::bytes(te, field::TE_NAME, name.as_bytes()),
        }
    }

    fn category(&mut self, te: &mut Vec<u8>, interned: &mut Vec<u8>, cat: &str) {
        let iid = match self.categories.get(cat) {
            Some(&iid) => iid,
            None => {
                let iid = self.categories.len() as u64 + 1;
                self.categories.insert(cat.to_owned(), iid);
                let mut ec = Vec::new();
                wire::uint(&mut ec, field::IID, iid);
                wire::bytes(&mut ec, field::INTERNED_NAME, cat.as_bytes());
                wire::bytes(interned, field::ID_EVENT_CATEGORIES, &ec);
                iid
            }
        };
        wire::uint(te, field::TE_CATEGORY_IIDS, iid);
    }

    fn event_packet(&mut self, ts: u64, te: &[u8], interned: &[u8]) -> Result<()> {
        let mut body = Vec::with_capacity(te.len() + interned.len() + 16);
        wire::uint(&mut body, field::TIMESTAMP, ts);
        if !interned.is_empty() {
            wire::bytes(&mut body, field::INTERNED_DATA, interned);
        }
        wire::bytes(&mut body, field::TRACK_EVENT, te);
        self.packet(&body)
    }

    fn lane_uuid(&self, pid: u64, lane: u32) -> u64 {
        self.tracks.get(&(pid, lane)).copied().unwrap_or(0)
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
            format!("JETS trace; 1 cycle = {} ns (clock_frequency_mhz {mhz})", 1000.0 / mhz)
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
        let uuid = self.track((p.pid, u32::MAX), None, &name, p.sort_index as i64, Some(&note))?;
        self.track((p.pid, 0), Some(uuid), "events", 0, None)?;
        Ok(())
    }

    fn lane(&mut self, pid: u64, lane: u32, name: &str) -> Result<()> {
        let parent = self.lane_uuid(pid, u32::MAX);
        self.track((pid, lane), Some(parent), &format!("{name} {lane}"), lane as i64, None)?;
        Ok(())
    }

    fn slice(&mut self, s: &Slice<'_>) -> Result<()> {
        let track = self.lane_uuid(s.pid, s.lane);
        let r = s.record;
        let (mut te, mut interned) = (Vec::new(), Vec::new());
        wire::uint(&mut te, field::TE_TYPE, SLICE_BEGIN);
        wire::uint(&mut te, field::TE_TRACK_UUID, track);
        self.name(&mut te, &mut interned, &r.name);
        self.category(&mut te, &mut interned, &r.record_type);
        annotations(&mut te, &record_args(s));
        self.event_packet(self.ns(r.start), &te, &interned)?;
        let mut end = Vec::new();
        wire::uint(&mut end, field::TE_TYPE, SLICE_END);
        wire::uint(&mut end, field::TE_TRACK_UUID, track);
        self.event_packet(self.ns(s.end), &end, &[])
    }

    fn instant(&mut self, i: &Instant<'_>) -> Result<()> {
        let e = i.event;
        if e.name == jets_host::sync::SYNC_EVENT {
            if let Some(Ok(p)) = jets_host::sync::SyncPoint::from_event(e) {
                let mut cs = Vec::new();
                for (id, ts) in [
                    (CLOCK_BOOTTIME, self.ns(e.clk)),
                    (CLOCK_MONOTONIC, p.mono_ns),
                    (CLOCK_REALTIME, p.real_ns),
                ] {
                    let mut c = Vec::new();
                    wire::uint(&mut c, field::CLOCK_ID, id);
                    wire::uint(&mut c, field::CLOCK_TIMESTAMP, ts);
                    wire::bytes(&mut cs, field::CS_CLOCKS, &c);
                }
                let mut body = Vec::new();
                wire::uint(&mut body, field::TIMESTAMP, self.ns(e.clk));
                wire::bytes(&mut body, field::CLOCK_SNAPSHOT, &cs);
                self.packet(&body)?;
            }
        }
        let track = self.lane_uuid(i.pid, 0);
        let (mut te, mut interned) = (Vec::new(), Vec::new());
        wire::uint(&mut te, field::TE_TYPE, INSTANT);
        wire::uint(&mut te, field::TE_TRACK_UUID, track);
        self.name(&mut te, &mut interned, &e.name);
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
        annotations(&mut te, &args);
        self.event_packet(self.ns(e.clk), &te, &interned)
    }

    fn late_annotation(&mut self, pid: u64, a: &Annotation<'_>) -> Result<()> {
        // Untimed, and its slice is already written: an instant at time 0 on the events lane.
        let track = self.lane_uuid(pid, 0);
        let (mut te, mut interned) = (Vec::new(), Vec::new());
        wire::uint(&mut te, field::TE_TYPE, INSTANT);
        wire::uint(&mut te, field::TE_TRACK_UUID, track);
        self.name(&mut te, &mut interned, &format!("annotation {}", a.name));
        let mut args = Map::new();
        args.insert("record_id".into(), a.record_id.into());
        args.insert("description".into(), a.description.to_string().into());
        args.insert("data".into(), a.data.clone());
        annotations(&mut te, &args);
        self.event_packet(0, &te, &interned)
    }

    fn finish(&mut self, _end_clk: u64) -> Result<()> {
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
