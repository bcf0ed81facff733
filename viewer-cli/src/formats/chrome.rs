//! JETS → Chrome trace JSON (object form), for chrome://tracing and the Perfetto UI.
//!
//! Records become complete (`X`) events on lanes where they nest (see [`super::timeline`]); root
//! records become processes and lanes threads, named by `M` events with sort indices (a lane is
//! named after the core, thread or unit record on it, CV-NEST-2, and renamed by a later
//! `thread_name` when a better one lands: readers keep the last); events become thread-scoped
//! instants (`"ph":"I"`, `"s":"t"`: DevTools' trace engine reads only the capital form, Perfetto
//! both) on each process's event lane. `ts`/`dur` are in µs from
//! `clock_frequency_mhz` (1 cycle = 1 µs when the trace gives none, stated in `otherData`). Record
//! data, annotations and hints (the hex color too) go into `args`. Output is streamed: memory grows
//! with open records, not with events.

use std::collections::HashSet;
use std::io::Write;
use std::path::Path;

use anyhow::{Context, Result};
use jets::format::json;
use jets::format::{Annotation, Header};
use serde_json::{Map, Value};

use super::timeline::{
    cycles_to_ps, read_trace, time_past, write_us, CaptureMark, Instant, Process, Slice, Timeline,
    TimelineSink,
};
use crate::convert::Output;

/// Writes Chrome trace JSON to `W`.
pub struct ChromeSink<W: Write> {
    out: W,
    buf: Vec<u8>,
    mhz: f64,
    first: bool,
    /// Lanes that have their sort index.
    sorted: HashSet<(u64, u32)>,
}

impl<W: Write> ChromeSink<W> {
    /// A sink writing to `out`.
    pub fn new(out: W) -> Self {
        ChromeSink {
            out,
            buf: Vec::with_capacity(1 << 16),
            mhz: 1.0,
            first: true,
            sorted: HashSet::new(),
        }
    }

    /// Gives back the writer.
    pub fn into_inner(self) -> W {
        self.out
    }

    fn begin_event(&mut self) {
        if !self.first {
            self.buf.extend_from_slice(b",\n");
        }
        self.first = false;
    }

    fn flush_if_full(&mut self) -> Result<()> {
        if self.buf.len() >= 1 << 16 {
            self.out.write_all(&self.buf).context("writing Chrome trace")?;
            self.buf.clear();
        }
        Ok(())
    }

    /// Cycle `clk` in ps; an error past what this writer states (2^128 ps, CV-TIME-4).
    fn ps(&self, clk: u64) -> Result<u128> {
        cycles_to_ps(clk, self.mhz).ok_or_else(|| {
            time_past(clk, self.mhz, "the largest Chrome time this writer states (2^128 ps)")
        })
    }

    fn ts(&mut self, key: &str, clk: u64) -> Result<()> {
        let ps = self.ps(clk)?;
        json::write_key(&mut self.buf, key);
        write_us(&mut self.buf, ps);
        Ok(())
    }

    fn metadata(&mut self, name: &str, pid: u64, tid: Option<u32>, arg: &str, value: Value) {
        self.begin_event();
        let b = &mut self.buf;
        b.extend_from_slice(b"{\"ph\":\"M\",\"name\":");
        json::write_str(b, name);
        json::write_key(b, "pid");
        json::write_u64(b, pid);
        if let Some(t) = tid {
            json::write_key(b, "tid");
            json::write_u64(b, t as u64);
        }
        b.extend_from_slice(b",\"args\":{");
        json::write_str(b, arg);
        b.push(b':');
        json::write_value(b, &value);
        b.extend_from_slice(b"}}");
    }
}

/// The `args` of a record's slice: identity, description, data (hints included) and annotations.
pub fn record_args(s: &Slice<'_>) -> Map<String, Value> {
    let r = s.record;
    let mut args = Map::new();
    args.insert("id".into(), r.id.into());
    args.insert("record_type".into(), r.record_type.clone().into());
    if let Some(p) = r.parent_id {
        args.insert("parent_id".into(), p.into());
    }
    if !r.description.is_empty() {
        args.insert("description".into(), r.description.clone().into());
    }
    if let Some(data) = &r.data {
        for (k, v) in data {
            args.entry(k.clone()).or_insert_with(|| v.clone());
        }
    }
    if !r.annotations.is_empty() {
        let mut ann = Map::new();
        for (name, description, data) in &r.annotations {
            let v = if description.is_empty() {
                data.clone()
            } else {
                serde_json::json!({ "description": description, "data": data })
            };
            ann.insert(name.clone(), v);
        }
        args.insert("annotations".into(), Value::Object(ann));
    }
    if !s.ended {
        args.insert("unended".into(), true.into());
    }
    args
}

impl<W: Write> TimelineSink for ChromeSink<W> {
    fn header(&mut self, header: &Header<'_>, mhz: f64, stated: bool) -> Result<()> {
        self.mhz = mhz;
        let mut other = Map::new();
        other.insert("source".into(), "JETS".into());
        other.insert("jets_version".into(), header.version.to_string().into());
        other.insert(
            "time_unit".into(),
            if stated {
                // Short at any clock (CV-TIME-3): `{}` writes 1e300 in 301 digits.
                let cycle = crate::human::cycles_time(1, mhz);
                format!("1 cycle = {cycle} (clock_frequency_mhz {})", crate::human::number(mhz))
                    .into()
            } else {
                "1 cycle = 1 µs (the trace gives no clock_frequency_mhz)".into()
            },
        );
        other.insert("jets_metadata".into(), Value::Object(header.metadata.clone()));
        self.buf.extend_from_slice(b"{\"displayTimeUnit\":\"ns\",\"otherData\":");
        json::write_object(&mut self.buf, &other);
        self.buf.extend_from_slice(b",\"traceEvents\":[\n");
        Ok(())
    }

    fn process(&mut self, p: &Process<'_>) -> Result<()> {
        self.metadata(
            "process_name",
            p.pid,
            None,
            "name",
            format!("{} ({})", p.name, p.record_type).into(),
        );
        self.metadata("process_sort_index", p.pid, None, "sort_index", p.sort_index.into());
        self.metadata("thread_name", p.pid, Some(0), "name", "events".into());
        self.metadata("thread_sort_index", p.pid, Some(0), "sort_index", 0.into());
        self.flush_if_full()
    }

    fn lane(&mut self, pid: u64, lane: u32, name: &str) -> Result<()> {
        self.metadata("thread_name", pid, Some(lane), "name", name.into());
        if self.sorted.insert((pid, lane)) {
            self.metadata("thread_sort_index", pid, Some(lane), "sort_index", lane.into());
        }
        self.flush_if_full()
    }

    fn slice(&mut self, s: &Slice<'_>) -> Result<()> {
        let args = record_args(s);
        self.begin_event();
        let r = s.record;
        self.buf.extend_from_slice(b"{\"ph\":\"X\",\"name\":");
        json::write_str(&mut self.buf, &r.name);
        json::write_key(&mut self.buf, "cat");
        json::write_str(&mut self.buf, &r.record_type);
        json::write_key(&mut self.buf, "pid");
        json::write_u64(&mut self.buf, s.pid);
        json::write_key(&mut self.buf, "tid");
        json::write_u64(&mut self.buf, s.lane as u64);
        self.ts("ts", r.start)?;
        let dur = self.ps(s.end)? - self.ps(r.start)?;
        json::write_key(&mut self.buf, "dur");
        write_us(&mut self.buf, dur);
        json::write_key(&mut self.buf, "args");
        json::write_object(&mut self.buf, &args);
        self.buf.push(b'}');
        self.flush_if_full()
    }

    fn instant(&mut self, i: &Instant<'_>) -> Result<()> {
        let e = i.event;
        self.begin_event();
        self.buf.extend_from_slice(b"{\"ph\":\"I\",\"s\":\"t\",\"name\":");
        json::write_str(&mut self.buf, &e.name);
        json::write_key(&mut self.buf, "pid");
        json::write_u64(&mut self.buf, i.pid);
        self.buf.extend_from_slice(b",\"tid\":0");
        self.ts("ts", e.clk)?;
        self.buf.extend_from_slice(b",\"args\":{\"record_id\":");
        json::write_u64(&mut self.buf, e.record_id);
        if let Some(name) = i.record_name {
            json::write_key(&mut self.buf, "record");
            json::write_str(&mut self.buf, name);
        }
        if !e.description.is_empty() {
            json::write_key(&mut self.buf, "description");
            json::write_str(&mut self.buf, &e.description);
        }
        if let Some(d) = &e.data {
            json::write_key(&mut self.buf, "data");
            json::write_value(&mut self.buf, d);
        }
        self.buf.extend_from_slice(b"}}");
        self.flush_if_full()
    }

    fn capture(&mut self, marks: &[CaptureMark]) -> Result<()> {
        // Global instants (`"s":"g"`): drawn across every process and thread.
        for m in marks {
            self.begin_event();
            self.buf.extend_from_slice(b"{\"ph\":\"i\",\"s\":\"g\",\"name\":");
            json::write_str(&mut self.buf, m.name);
            self.buf.extend_from_slice(b",\"pid\":0,\"tid\":0");
            self.ts("ts", m.clk)?;
            self.buf.extend_from_slice(b",\"args\":{\"capture\":");
            json::write_str(&mut self.buf, &m.text);
            self.buf.extend_from_slice(b"}}");
        }
        self.flush_if_full()
    }

    fn late_annotation(&mut self, pid: u64, a: &Annotation<'_>) -> Result<()> {
        // Untimed and too late for its slice's args: keep it as process metadata.
        self.metadata(
            "jets_annotation",
            pid,
            None,
            "annotation",
            serde_json::json!({
                "record_id": a.record_id, "name": a.name, "description": a.description,
                "data": a.data,
            }),
        );
        self.flush_if_full()
    }

    fn finish(&mut self, _end_clk: u64) -> Result<()> {
        self.buf.extend_from_slice(b"\n]}\n");
        self.out.write_all(&self.buf).context("writing Chrome trace")?;
        self.buf.clear();
        self.out.flush().context("writing Chrome trace")
    }
}

/// Converts the JETS trace at `input` into Chrome trace JSON on `out`.
pub fn convert(input: &Path, out: Output) -> Result<()> {
    let mut timeline = Timeline::new(ChromeSink::new(out));
    read_trace(input, |_, line| timeline.line(line))?;
    timeline.finish()?.into_inner().finish()
}
