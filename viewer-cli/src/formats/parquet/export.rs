//! A JETS trace's lines into the rows of the dataset's tables, streamed: events, annotations and
//! host samples are written as they come; a record is written when it ends, so memory grows with
//! the records open at one time, never with the trace.

use std::collections::{HashMap, HashSet};
use std::path::Path;

use anyhow::{bail, Context, Result};
use jets::format::{json, EventHints, Line, RecordHints, Status};
use jets_host::sync::{MetricType, SyncPoint, HOST_RECORD_TYPE, METRICS, SYNC_EVENT};
use serde_json::{Map, Value};

use super::schema;
use super::table::Table;

/// The file names of the tables, inside a run's partition directory.
pub const RECORDS_FILE: &str = "records.parquet";
/// Events.
pub const EVENTS_FILE: &str = "events.parquet";
/// Annotations.
pub const ANNOTATIONS_FILE: &str = "annotations.parquet";
/// Host samples (only when the trace has HostSync points).
pub const HOST_SAMPLES_FILE: &str = "host_samples.parquet";

/// Rows written to each table.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Records (ended and unended).
    pub records: u64,
    /// Records that never ended (`end_clk` null).
    pub unended: u64,
    /// Events.
    pub events: u64,
    /// Annotations.
    pub annotations: u64,
    /// Host samples.
    pub host_samples: u64,
}

/// A record between its begin and its end: what its row needs, without the parsed `data` map.
struct Open {
    parent_id: Option<i64>,
    name: String,
    record_type: String,
    description: String,
    start: i64,
    data: Option<String>,
    status: Option<Status>,
    unit_id: Option<i64>,
    thread_id: Option<i64>,
    subunit_id: Option<i64>,
    display_label: Option<String>,
    color: Option<String>,
    criticality: Option<f64>,
}

/// Writes one run's tables into a directory.
pub struct Export<'d> {
    run: String,
    dir: &'d Path,
    records: Table,
    events: Table,
    annotations: Table,
    host: Option<Table>,
    open: HashMap<u64, Open>,
    /// Ids of the `HostProcess` records: HostSync events count only on them (spec/host-sync.md).
    host_records: HashSet<u64>,
    header: Option<String>,
    counts: Counts,
    /// Scratch space for JSON text.
    buf: Vec<u8>,
}

/// `v` as a Parquet INT64 (PQ-INT-1: no JETS integer that fits is changed; larger ones are refused).
fn int(v: u64, what: &str) -> Result<i64> {
    i64::try_from(v).map_err(|_| {
        anyhow::anyhow!("{what} {v} is beyond Parquet's signed 64-bit integers (PQ-INT-1)")
    })
}

fn opt_int(v: Option<u64>, what: &str) -> Result<Option<i64>> {
    v.map(|v| int(v, what)).transpose()
}

impl<'d> Export<'d> {
    /// Creates the tables of run `run` in `dir` (which must exist).
    pub fn create(dir: &'d Path, run: &str) -> Result<Export<'d>> {
        Ok(Export {
            run: run.to_owned(),
            dir,
            records: Table::create(&dir.join(RECORDS_FILE), schema::RECORDS.to_vec())?,
            events: Table::create(&dir.join(EVENTS_FILE), schema::EVENTS.to_vec())?,
            annotations: Table::create(&dir.join(ANNOTATIONS_FILE), schema::ANNOTATIONS.to_vec())?,
            host: None,
            open: HashMap::new(),
            host_records: HashSet::new(),
            header: None,
            counts: Counts::default(),
            buf: Vec::new(),
        })
    }

    fn json_value(&mut self, v: &Value) -> Result<String> {
        self.buf.clear();
        json::write_value(&mut self.buf, v);
        Ok(std::str::from_utf8(&self.buf).context("JSON text")?.to_owned())
    }

    fn json_object(&mut self, m: &Map<String, Value>) -> Result<String> {
        self.buf.clear();
        json::write_object(&mut self.buf, m);
        Ok(std::str::from_utf8(&self.buf).context("JSON text")?.to_owned())
    }

    /// Takes one line of the trace.
    pub fn line(&mut self, line: Line<'_>) -> Result<()> {
        match line {
            Line::Header(h) => {
                let mut out = Vec::new();
                h.write_json(&mut out);
                self.header = Some(String::from_utf8(out).context("header text")?.trim().into());
            }
            Line::Record(r) => {
                let id = r.id;
                if self.open.contains_key(&id) {
                    bail!("record {id} begins again while it is still open");
                }
                let hints = r.data.as_ref().map(RecordHints::from_data).unwrap_or_default();
                let open = Open {
                    parent_id: opt_int(r.parent_id, "parent_id")?,
                    start: int(r.clk, "clk")?,
                    status: hints.status,
                    unit_id: opt_int(hints.unit_id, "unit_id")?,
                    thread_id: opt_int(hints.thread_id, "thread_id")?,
                    subunit_id: opt_int(hints.subunit_id, "subunit_id")?,
                    display_label: hints.display_label.map(str::to_owned),
                    color: hints.color.map(|c| c.to_string()),
                    criticality: hints.criticality,
                    data: match &r.data {
                        Some(d) => Some(self.json_object(d)?),
                        None => None,
                    },
                    name: r.name.into_owned(),
                    record_type: r.record_type.into_owned(),
                    description: r.description.into_owned(),
                };
                int(id, "record id")?;
                if open.record_type == HOST_RECORD_TYPE {
                    self.host_records.insert(id);
                }
                self.open.insert(id, open);
            }
            Line::RecordEnd(e) => {
                let Some(open) = self.open.remove(&e.record_id) else {
                    bail!("record_end for record {}, which is not open", e.record_id)
                };
                // PQ-STATUS-1: the outcome stated at the end wins over the status at the begin.
                let end_status =
                    e.extra.get("status").and_then(Value::as_str).and_then(|s| s.parse().ok());
                let end = int(e.clk, "clk")?;
                self.record_row(e.record_id, open, Some(end), end_status)?;
            }
            Line::Annotation(a) => {
                let data = match &a.data {
                    Value::Null => None,
                    v => Some(self.json_value(v)?),
                };
                self.annotations
                    .row()
                    .text(Some(&self.run))
                    .int(Some(int(a.record_id, "record_id")?))
                    .text(Some(&a.name))
                    .text(Some(&a.description))
                    .text(data.as_deref())
                    .end()?;
                self.counts.annotations += 1;
            }
            Line::Event(e) => {
                let data = match &e.data {
                    Some(v) => Some(self.json_value(v)?),
                    None => None,
                };
                let severity = e.data.as_ref().and_then(|d| EventHints::from_data(d).severity);
                self.events
                    .row()
                    .text(Some(&self.run))
                    .int(Some(int(e.record_id, "record_id")?))
                    .int(Some(int(e.clk, "clk")?))
                    .text(Some(&e.name))
                    .text(Some(&e.description))
                    .text(severity.map(|s| s.as_str()))
                    .text(data.as_deref())
                    .end()?;
                self.counts.events += 1;
                if e.name == SYNC_EVENT && self.host_records.contains(&e.record_id) {
                    self.host_row(&e)?;
                }
            }
            Line::Footer(_) => {}
        }
        Ok(())
    }

    fn record_row(
        &mut self,
        id: u64,
        r: Open,
        end: Option<i64>,
        end_status: Option<Status>,
    ) -> Result<()> {
        let status = end_status.or(r.status);
        self.records
            .row()
            .text(Some(&self.run))
            .int(Some(int(id, "record id")?))
            .int(r.parent_id)
            .text(Some(&r.name))
            .text(Some(&r.record_type))
            .text(Some(&r.description))
            .int(Some(r.start))
            .int(end)
            .text(status.map(Status::as_str))
            .int(r.unit_id)
            .int(r.thread_id)
            .int(r.subunit_id)
            .text(r.display_label.as_deref())
            .text(r.color.as_deref())
            .float(r.criticality)
            .text(r.data.as_deref())
            .end()?;
        self.counts.records += 1;
        if end.is_none() {
            self.counts.unended += 1;
        }
        Ok(())
    }

    /// A HostSync event on a HostProcess record: its clocks and every metric of the convention in
    /// their own columns, any other key in `extra` (PQ-HOST-1).
    fn host_row(&mut self, e: &jets::format::Event<'_>) -> Result<()> {
        let empty = Map::new();
        let data = e.data.as_ref().and_then(Value::as_object).unwrap_or(&empty);
        let point = SyncPoint::from_data(e.clk, data)?;
        let mut metrics = Vec::with_capacity(METRICS.len());
        for &(key, t) in METRICS {
            let v = data.get(key);
            let bad = || {
                let v = v.map(Value::to_string).unwrap_or_default();
                anyhow::anyhow!("{SYNC_EVENT} `{key}` is {v}, not {t:?} (spec/host-sync.md)")
            };
            metrics.push(match (t, v) {
                (_, None | Some(Value::Null)) => (None, None),
                (MetricType::Count, Some(v)) => {
                    (Some(int(v.as_u64().ok_or_else(bad)?, key)?), None)
                }
                (MetricType::Fraction, Some(v)) => (None, Some(v.as_f64().ok_or_else(bad)?)),
            });
        }
        let known = |k: &str| {
            [
                jets_host::sync::keys::MONO_NS,
                jets_host::sync::keys::REAL_NS,
                jets_host::sync::keys::CPU_NS,
                jets_host::sync::keys::HOST_INSTRUCTIONS,
            ]
            .contains(&k)
                || METRICS.iter().any(|m| m.0 == k)
        };
        let extra: Map<String, Value> =
            data.iter().filter(|(k, _)| !known(k)).map(|(k, v)| (k.clone(), v.clone())).collect();
        let extra = if extra.is_empty() { None } else { Some(self.json_object(&extra)?) };
        let host = match &mut self.host {
            Some(h) => h,
            None => self
                .host
                .insert(Table::create(&self.dir.join(HOST_SAMPLES_FILE), schema::host_samples())?),
        };
        let mut row = host
            .row()
            .text(Some(&self.run))
            .int(Some(int(e.record_id, "record_id")?))
            .int(Some(int(point.clk, "clk")?))
            .int(Some(int(point.mono_ns, "mono_ns")?))
            .int(Some(int(point.real_ns, "real_ns")?))
            .int(opt_int(point.cpu_ns, "cpu_ns")?)
            .int(opt_int(point.host_instructions, "host_instructions")?);
        for (&(_, t), (i, f)) in METRICS.iter().zip(metrics) {
            row = match t {
                MetricType::Count => row.int(i),
                MetricType::Fraction => row.float(f),
            };
        }
        row.text(extra.as_deref()).end()?;
        self.counts.host_samples += 1;
        Ok(())
    }

    /// Writes the records that never ended (`end_clk` null, PQ-OPEN-1), in id order, and
    /// completes every file.
    pub fn finish(mut self) -> Result<Counts> {
        let mut open: Vec<(u64, Open)> = self.open.drain().collect();
        open.sort_unstable_by_key(|(id, _)| *id);
        for (id, r) in open {
            self.record_row(id, r, None, None)?;
        }
        if let Some(h) = self.header.take() {
            for t in [&mut self.records, &mut self.events, &mut self.annotations] {
                t.metadata("jets.header", h.clone());
            }
            if let Some(t) = self.host.as_mut() {
                t.metadata("jets.header", h);
            }
        }
        self.records.close()?;
        self.events.close()?;
        self.annotations.close()?;
        if let Some(h) = self.host {
            h.close()?;
        }
        Ok(self.counts)
    }
}
