//! DFTracer traces: JSON lines of Chrome-like complete (`X`) and metadata (`M`) events, with host,
//! file and other strings stored as hashes resolved by metadata events (`HH`, `FH`, `SH`).
//!
//! **Reading** accepts both forms found on disk: the older documented one (`"ph":"X"`/`"M"`,
//! integer hashes, optionally wrapped in `[` `]`) and what DFTracer 2.x writes (`"ph":1`/`4`, a
//! `type` field, hex-string hashes, `start`/`end` events, gzip). See [`Reader`].
//!
//! **Writing** ([`DftracerSink`]) produces the documented form: a JETS record becomes a complete
//! event (integer ns `ts`/`dur`, CV-DFT-2; `cat` = record_type, `pid` = root record, `tid` = lane)
//! whose `args` hold
//! the record's data, annotations, a string hash of its description (`shash`, resolved by an `SH`
//! event) and `jets_id`/`jets_parent_id`, so `jets import` restores the exact hierarchy; a JETS
//! event becomes a zero-length complete event of category `jets_event`; the header's metadata goes
//! into a `JETS` metadata event.

use std::collections::{HashMap, HashSet};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;

use anyhow::{bail, Context, Result};
use jets::format::json;
use jets::format::{Annotation, Header};
use serde_json::{Map, Value};

use super::timeline::{
    cycles_to_ns, read_trace, time_past, Instant, Process, Slice, Timeline, TimelineSink,
};
use crate::convert::Output;

/// The category of the complete events that carry JETS events.
pub const EVENT_CATEGORY: &str = "jets_event";
/// The name of the metadata event that carries the JETS header's metadata.
pub const HEADER_EVENT: &str = "JETS";
/// The key, in the [`HEADER_EVENT`]'s `args`, of the nanoseconds one cycle lasts in `ts`/`dur`.
pub const NS_PER_CYCLE: &str = "jets_ns_per_cycle";

/// A 64-bit FNV-1a hash, as DFTracer-style name hashes (the value only has to be stable and
/// unique within the file: every hash is resolved by its metadata event).
pub fn hash_name(s: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in s.bytes() {
        h ^= b as u64;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    // Keep it within JSON's exact integer range for readers that parse numbers as doubles.
    h & ((1 << 53) - 1)
}

/// Writes DFTracer lines.
pub struct DftracerSink<W: Write> {
    out: W,
    buf: Vec<u8>,
    mhz: f64,
    /// Whether `ts`/`dur` are real nanoseconds (clocks up to 1 GHz) or cycles (faster clocks).
    real_ns: bool,
    next_id: u64,
    hashed: HashSet<u64>,
    host_hash: Option<u64>,
}

impl<W: Write> DftracerSink<W> {
    /// A sink writing to `out`.
    pub fn new(out: W) -> Self {
        DftracerSink {
            out,
            buf: Vec::with_capacity(1 << 16),
            mhz: 1.0,
            real_ns: true,
            next_id: 1,
            hashed: HashSet::new(),
            host_hash: None,
        }
    }

    /// Gives back the writer.
    pub fn into_inner(self) -> W {
        self.out
    }

    fn start(&mut self, name: &str, cat: &str, pid: u64, tid: u64) {
        let b = &mut self.buf;
        b.extend_from_slice(b"{\"id\":");
        json::write_u64(b, self.next_id);
        self.next_id += 1;
        json::write_key(b, "name");
        json::write_str(b, name);
        json::write_key(b, "cat");
        json::write_str(b, cat);
        json::write_key(b, "pid");
        json::write_u64(b, pid);
        json::write_key(b, "tid");
        json::write_u64(b, tid);
    }

    fn metadata(&mut self, name: &str, pid: u64, tid: u64, args: &Map<String, Value>) {
        self.start(name, "dftracer", pid, tid);
        self.buf.extend_from_slice(b",\"ph\":\"M\",\"args\":");
        json::write_object(&mut self.buf, args);
        self.buf.extend_from_slice(b"}\n");
    }

    /// The hash of `s`, writing its `kind` (`HH`, `FH`, `SH`) metadata event the first time.
    fn hash(&mut self, kind: &str, s: &str) -> u64 {
        let h = hash_name(s);
        if self.hashed.insert(h) {
            let mut args = Map::new();
            args.insert("name".into(), s.into());
            args.insert("value".into(), h.into());
            self.metadata(kind, 0, 0, &args);
        }
        h
    }

    fn flush_if_full(&mut self) -> Result<()> {
        if self.buf.len() >= 1 << 16 {
            self.out.write_all(&self.buf).context("writing DFTracer trace")?;
            self.buf.clear();
        }
        Ok(())
    }

    /// A cycle as an integer time in the file's unit (CV-DFT-2): nanoseconds rounded, which
    /// keeps one cycle at least 1 ns at clocks up to 1 GHz; the cycle itself above that.
    /// An error past what a `u64` holds (a cast would wrap).
    fn time(&self, clk: u64) -> Result<u64> {
        if self.real_ns {
            cycles_to_ns(clk, self.mhz)
                .ok_or_else(|| time_past(clk, self.mhz, "the largest DFTracer time (2^64 ns)"))
        } else {
            Ok(clk)
        }
    }

    fn complete(
        &mut self,
        name: &str,
        cat: &str,
        pid: u64,
        tid: u64,
        start: u64,
        end: u64,
    ) -> Result<()> {
        let (s, e) = (self.time(start)?, self.time(end)?);
        self.start(name, cat, pid, tid);
        json::write_key(&mut self.buf, "ts");
        json::write_u64(&mut self.buf, s);
        json::write_key(&mut self.buf, "dur");
        json::write_u64(&mut self.buf, e.saturating_sub(s));
        self.buf.extend_from_slice(b",\"ph\":\"X\",\"args\":");
        Ok(())
    }
}

impl<W: Write> TimelineSink for DftracerSink<W> {
    fn header(&mut self, header: &Header<'_>, mhz: f64, _stated: bool) -> Result<()> {
        self.mhz = mhz;
        self.real_ns = mhz <= 1000.0;
        self.buf.extend_from_slice(b"[\n");
        // DFTracer's readers take the unit from a leading `CM` time_metric event.
        let mut cm = Map::new();
        cm.insert("name".into(), "time_metric".into());
        cm.insert("value".into(), "NS".into());
        self.metadata("CM", 0, 0, &cm);
        let mut args = Map::new();
        args.insert("name".into(), "header".into());
        args.insert("value".into(), Value::Object(header.metadata.clone()));
        let ns_per_cycle = if self.real_ns { 1000.0 / mhz } else { 1.0 };
        args.insert(NS_PER_CYCLE.into(), ns_per_cycle.into());
        self.metadata(HEADER_EVENT, 0, 0, &args);
        let host = ["hostname", "host"]
            .iter()
            .find_map(|k| header.metadata.get(*k).and_then(Value::as_str))
            .map(str::to_owned);
        if let Some(host) = host {
            self.host_hash = Some(self.hash("HH", &host));
        }
        Ok(())
    }

    fn process(&mut self, p: &Process<'_>) -> Result<()> {
        let mut args = Map::new();
        args.insert("name".into(), format!("{} ({})", p.name, p.record_type).into());
        self.metadata("process_name", p.pid, 0, &args);
        self.flush_if_full()
    }

    fn lane(&mut self, pid: u64, lane: u32, name: &str) -> Result<()> {
        let mut args = Map::new();
        args.insert("name".into(), name.into());
        self.metadata("thread_name", pid, lane as u64, &args);
        Ok(())
    }

    fn slice(&mut self, s: &Slice<'_>) -> Result<()> {
        let r = s.record;
        let mut args = Map::new();
        if let Some(h) = self.host_hash {
            args.insert("hhash".into(), h.into());
        }
        args.insert("jets_id".into(), r.id.into());
        args.insert("jets_parent_id".into(), r.parent_id.map_or(Value::Null, Value::from));
        if !r.description.is_empty() {
            args.insert("shash".into(), self.hash("SH", &r.description).into());
        }
        if let Some(data) = &r.data {
            args.insert("jets_data".into(), Value::Object(data.clone()));
        }
        if !r.annotations.is_empty() {
            let list = r
                .annotations
                .iter()
                .map(|(n, d, v)| serde_json::json!({"name": n, "description": d, "data": v}))
                .collect();
            args.insert("jets_annotations".into(), Value::Array(list));
        }
        if !s.ended {
            args.insert("jets_unended".into(), true.into());
        }
        self.complete(&r.name, &r.record_type, s.pid, s.lane as u64, r.start, s.end)?;
        json::write_object(&mut self.buf, &args);
        self.buf.extend_from_slice(b"}\n");
        self.flush_if_full()
    }

    fn instant(&mut self, i: &Instant<'_>) -> Result<()> {
        let e = i.event;
        let mut args = Map::new();
        args.insert("jets_record_id".into(), e.record_id.into());
        if !e.description.is_empty() {
            args.insert("shash".into(), self.hash("SH", &e.description).into());
        }
        if let Some(d) = &e.data {
            args.insert("jets_data".into(), d.clone());
        }
        self.complete(&e.name, EVENT_CATEGORY, i.pid, 0, e.clk, e.clk)?;
        json::write_object(&mut self.buf, &args);
        self.buf.extend_from_slice(b"}\n");
        self.flush_if_full()
    }

    fn late_annotation(&mut self, pid: u64, a: &Annotation<'_>) -> Result<()> {
        let mut args = Map::new();
        args.insert("name".into(), a.name.to_string().into());
        args.insert(
            "value".into(),
            serde_json::json!({"record_id": a.record_id, "description": a.description, "data": a.data}),
        );
        self.metadata("jets_annotation", pid, 0, &args);
        self.flush_if_full()
    }

    fn finish(&mut self, _end_clk: u64) -> Result<()> {
        self.buf.extend_from_slice(b"]\n");
        self.out.write_all(&self.buf).context("writing DFTracer trace")?;
        self.buf.clear();
        Ok(())
    }
}

/// Converts the JETS trace at `input` into DFTracer lines on `out`.
pub fn convert(input: &Path, out: Output) -> Result<()> {
    let mut timeline = Timeline::new(DftracerSink::new(out));
    read_trace(input, |_, line| timeline.line(line))?;
    timeline.finish()?.into_inner().finish()
}

/// One DFTracer event as read: the fields every form shares.
#[derive(Clone, Debug, PartialEq)]
pub struct DfEvent {
    /// `id` (absent on DFTracer 2.x metadata events).
    pub id: Option<u64>,
    /// `name`.
    pub name: String,
    /// `cat`.
    pub cat: String,
    /// `pid`.
    pub pid: u64,
    /// `tid`.
    pub tid: u64,
    /// Complete or metadata.
    pub kind: DfKind,
    /// `ts` (in the trace's time metric, µs unless a `CM` event says `NS`).
    pub ts: Time,
    /// `dur`, same unit.
    pub dur: Time,
    /// `args`.
    pub args: Map<String, Value>,
    /// The line it came from (1-based).
    pub line: u64,
}

/// A DFTracer time (`ts`, `dur`) as the file writes it: an integer, kept exact, or a number
/// with a fraction (CV-DFT-3). Read as a float, a time in nanoseconds since the epoch (about
/// 1.7e18, past the 2^53 a double holds exactly) came out up to 256 ns off, silently.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Time {
    /// A non-negative integer.
    Int(u64),
    /// A non-negative number with a fraction (or an integer past 2^64 - 1).
    Frac(f64),
}

impl Time {
    /// Beyond this a double no longer holds every integer.
    const EXACT: f64 = 9_007_199_254_740_992.0; // 2^53

    /// The time from a JSON number; `None` for a negative one.
    pub fn of(n: &serde_json::Number) -> Option<Time> {
        match n.as_u64() {
            Some(u) => Some(Time::Int(u)),
            None => n.as_f64().filter(|x| *x >= 0.0).map(Time::Frac),
        }
    }

    /// As a float, for an ordering (exact below 2^53).
    fn approx(self) -> f64 {
        match self {
            Time::Int(u) => u as f64,
            Time::Frac(x) => x,
        }
    }

    /// `self + other`, exact for integers (`None` past 2^64 - 1).
    pub fn plus(self, other: Time) -> Option<Time> {
        match (self, other) {
            (Time::Int(a), Time::Int(b)) => a.checked_add(b).map(Time::Int),
            (a, b) => Some(Time::Frac(a.approx() + b.approx())),
        }
    }

    /// Orders two times: exactly when both are integers.
    pub fn total_cmp(self, other: Time) -> std::cmp::Ordering {
        match (self, other) {
            (Time::Int(a), Time::Int(b)) => a.cmp(&b),
            (a, b) => a.approx().total_cmp(&b.approx()),
        }
    }

    /// The time in cycles at `scale`, rounded to the nearest (half up), or why it has none.
    /// Exact for integers at a whole number of cycles per unit (a foreign file's 1, a clock of
    /// whole MHz) and at a whole number of units per cycle (whole nanoseconds per cycle), each
    /// read as the file states it, in one step; otherwise worked out in floating point (one
    /// multiplication or division), and refused past 2^53, where that would round (CV-DFT-3).
    pub fn cycles(self, scale: Scale) -> Result<u64, &'static str> {
        const OUTSIDE: &str = "outside the cycles a JETS trace holds (0 to 2^64 - 1)";
        let whole = |x: f64| x >= 1.0 && x.fract() == 0.0 && x < Time::EXACT;
        // Rounded half up, in 128 bits so that `t + n / 2` cannot overflow.
        let divide = |t: u64, n: u64| ((u128::from(t) + u128::from(n / 2)) / u128::from(n)) as u64;
        match (self, scale) {
            (Time::Int(t), Scale::CyclesPerUnit(c)) if whole(c) => {
                t.checked_mul(c as u64).ok_or(OUTSIDE)
            }
            (Time::Int(t), Scale::UnitsPerCycle(u)) if whole(u) => Ok(divide(t, u as u64)),
            // A fraction of a unit per cycle that is one over a whole number (0.5, 0.1 ns per
            // cycle: 2, 10 cycles per ns), and the other way round (a clock of 0.5 MHz in a
            // file from before `jets_ns_per_cycle`: 2 µs per cycle).
            (Time::Int(t), Scale::UnitsPerCycle(u)) if u > 0.0 && whole(1.0 / u) => {
                t.checked_mul((1.0 / u) as u64).ok_or(OUTSIDE)
            }
            (Time::Int(t), Scale::CyclesPerUnit(c)) if c > 0.0 && whole(1.0 / c) => {
                Ok(divide(t, (1.0 / c) as u64))
            }
            _ => {
                let t = self.approx();
                let c = match scale {
                    Scale::CyclesPerUnit(c) => t * c,
                    Scale::UnitsPerCycle(u) => t / u,
                }
                .round();
                if !(c.is_finite() && (0.0..u64::MAX as f64).contains(&c)) {
                    Err(OUTSIDE)
                } else if t >= Time::EXACT || c >= Time::EXACT {
                    Err("past 2^53, where floating point no longer holds every integer, at a \
                         scale that is no whole number of cycles or units: its cycle cannot be \
                         worked out exactly")
                } else {
                    Ok(c as u64)
                }
            }
        }
    }
}

/// How a DFTracer file's time unit (`ts`, `dur`) relates to a cycle, as the file states it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Scale {
    /// So many cycles per unit: 1 for a foreign file (1 cycle = 1 µs or 1 ns, CV-DFT-1), the
    /// clock in MHz for a file `jets convert` wrote before `jets_ns_per_cycle` (unit: the µs).
    CyclesPerUnit(f64),
    /// So many units per cycle: the `jets_ns_per_cycle` of a file `jets convert` wrote
    /// (CV-DFT-2), used as it stands rather than inverted twice.
    UnitsPerCycle(f64),
}

impl std::fmt::Display for Time {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Time::Int(u) => write!(f, "{u}"),
            Time::Frac(x) => write!(f, "{x}"),
        }
    }
}

/// The two event kinds DFTracer writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DfKind {
    /// `X` / 1.
    Complete,
    /// `M` / 4.
    Metadata,
}

/// Reads DFTracer events from a file (plain or gzip, detected by its first bytes).
pub struct Reader {
    lines: std::io::Lines<Box<dyn BufRead>>,
    name: String,
    line: u64,
    /// Events of other phases (B/E, i, C...) skipped so far; DFTracer does not write them.
    pub skipped: u64,
    /// Bytes of (decompressed) text read so far.
    pub bytes: u64,
}

impl Reader {
    /// Opens `path`.
    pub fn open(path: &Path) -> Result<Reader> {
        let name = path.display().to_string();
        let mut file = std::fs::File::open(path).with_context(|| format!("opening {name}"))?;
        let mut magic = [0u8; 2];
        let got = file.read(&mut magic).with_context(|| format!("reading {name}"))?;
        let file = std::fs::File::open(path).with_context(|| format!("opening {name}"))?;
        let reader: Box<dyn BufRead> = if got == 2 && magic == [0x1f, 0x8b] {
            Box::new(BufReader::new(flate2::read::MultiGzDecoder::new(file)))
        } else {
            Box::new(BufReader::new(file))
        };
        Ok(Reader { lines: reader.lines(), name, line: 0, skipped: 0, bytes: 0 })
    }

    fn parse(&mut self, text: &str) -> Result<Option<DfEvent>> {
        let at = || format!("{}:{}", self.name, self.line);
        let v: Value = serde_json::from_str(text)
            .with_context(|| format!("{}: not a DFTracer event (JSON object)", at()))?;
        let Value::Object(mut o) = v else { bail!("{}: not a JSON object", at()) };
        let kind = match o.get("ph") {
            Some(Value::String(s)) if s == "X" => DfKind::Complete,
            Some(Value::String(s)) if s == "M" => DfKind::Metadata,
            Some(Value::Number(n)) if n.as_u64() == Some(1) => DfKind::Complete,
            Some(Value::Number(n)) if n.as_u64() == Some(4) => DfKind::Metadata,
            Some(_) => {
                self.skipped += 1;
                return Ok(None);
            }
            None => bail!("{}: event without \"ph\"", at()),
        };
        let uint = |o: &Map<String, Value>, k: &str| -> Result<u64> {
            match o.get(k) {
                Some(v) => v
                    .as_u64()
                    .with_context(|| format!("{}: \"{k}\" is not an unsigned integer: {v}", at())),
                None => bail!("{}: missing \"{k}\"", at()),
            }
        };
        let num = |o: &Map<String, Value>, k: &str| -> Result<Time> {
            match o.get(k) {
                Some(v) => v.as_number().and_then(Time::of).with_context(|| {
                    format!("{}: \"{k}\" is not a non-negative number: {v}", at())
                }),
                None => bail!("{}: complete event without \"{k}\"", at()),
            }
        };
        let name = match o.get("name") {
            Some(Value::String(s)) => s.clone(),
            _ => bail!("{}: missing or non-text \"name\"", at()),
        };
        let (ts, dur) = match kind {
            DfKind::Complete => (num(&o, "ts")?, num(&o, "dur")?),
            DfKind::Metadata => (Time::Int(0), Time::Int(0)),
        };
        let args = match o.remove("args") {
            Some(Value::Object(m)) => m,
            None | Some(Value::Null) => Map::new(),
            Some(other) => bail!("{}: \"args\" is not an object: {other}", at()),
        };
        Ok(Some(DfEvent {
            id: o.get("id").and_then(Value::as_u64),
            name,
            cat: o.get("cat").and_then(Value::as_str).unwrap_or("").to_owned(),
            pid: uint(&o, "pid")?,
            tid: o.get("tid").and_then(Value::as_u64).unwrap_or(0),
            kind,
            ts,
            dur,
            args,
            line: self.line,
        }))
    }
}

impl Iterator for Reader {
    type Item = Result<DfEvent>;
    fn next(&mut self) -> Option<Result<DfEvent>> {
        loop {
            let text = match self.lines.next()? {
                Ok(t) => t,
                Err(e) => {
                    return Some(Err(e).with_context(|| format!("{}:{}", self.name, self.line + 1)))
                }
            };
            self.line += 1;
            self.bytes += text.len() as u64 + 1;
            // The documented form wraps lines in `[` `]`; Chrome-style writers add commas.
            let t = text.trim().trim_end_matches(',');
            if t.is_empty() || t == "[" || t == "]" {
                continue;
            }
            match self.parse(t) {
                Ok(Some(ev)) => return Some(Ok(ev)),
                Ok(None) => continue,
                Err(e) => return Some(Err(e)),
            }
        }
    }
}

/// Hash → name tables from `HH`, `FH` and `SH` metadata events.
#[derive(Debug, Default)]
pub struct Hashes {
    names: HashMap<String, String>,
}

impl Hashes {
    /// The key of a hash value: integers and hex strings are both accepted.
    fn key(v: &Value) -> Option<String> {
        match v {
            Value::Number(n) => n.as_u64().map(|u| u.to_string()),
            Value::String(s) => Some(s.to_ascii_lowercase()),
            _ => None,
        }
    }

    /// Records a hash metadata event (`HH`, `FH`, `SH`); false for other events.
    pub fn learn(&mut self, ev: &DfEvent) -> bool {
        if ev.kind != DfKind::Metadata || !matches!(ev.name.as_str(), "HH" | "FH" | "SH") {
            return false;
        }
        if let (Some(name), Some(k)) =
            (ev.args.get("name").and_then(Value::as_str), ev.args.get("value").and_then(Self::key))
        {
            self.names.insert(k, name.to_owned());
        }
        true
    }

    /// The name behind a hash value.
    pub fn resolve(&self, v: &Value) -> Option<&str> {
        Self::key(v).and_then(|k| self.names.get(&k)).map(String::as_str)
    }

    /// Number of known hashes.
    pub fn len(&self) -> usize {
        self.names.len()
    }
}

/// The key under which the name behind hashed argument `key` is stored: `fhash` → `file`,
/// `hhash` → `host`, `shash` → `string`, `cmd_hash` → `cmd`, others → `<key>_name`.
pub fn resolved_key(key: &str) -> String {
    match key {
        "fhash" => "file".into(),
        "hhash" => "host".into(),
        "shash" => "string".into(),
        _ => match key.strip_suffix("_hash") {
            Some(base) if !base.is_empty() => base.to_owned(),
            _ => format!("{key}_name"),
        },
    }
}

/// Whether argument `key` may hold a hash (DFTracer names them `*hash`; `cwd` is an `FH` too).
pub fn is_hash_key(key: &str) -> bool {
    key.ends_with("hash") || key == "cwd"
}
