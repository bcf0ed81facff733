//! `jets import --from dftracer|denet IN... -o OUT.jets`: foreign traces into a JETS trace, written
//! with the SDK's writer (`jets::Trace`), so the result obeys every ordering rule by construction.
//!
//! **DFTracer.** A file this tool wrote (it carries a `JETS` metadata event and `jets_id`s) comes
//! back as the original hierarchy, events and annotations. Any other DFTracer trace becomes one
//! `Process` record per pid and one `Thread` record per thread, with each complete event a record
//! nested by time containment on its thread; hashed arguments are resolved (`fhash` → `file`,
//! `hhash` → `host`, ... see [`dftracer::resolved_key`]) and other metadata events become
//! annotations on the process. Times are in µs (1 cycle = 1 µs) or ns when a `CM` `time_metric`
//! event says `NS` (1 cycle = 1 ns). The complete events are held in memory to be sorted: DFTracer
//! writes an event when it ends, so parents come after their children.
//!
//! **denet.** Each file becomes a `HostProcess` root record (spec/host-sync.md) with the `env`
//! snapshot as its `HostEnv` annotation, the capabilities as `HostCapabilities`, and one
//! `HostSample` event per sample carrying the metric keys of spec/host-sync.md and `real_ns`.
//! They are not `HostSync` sync points: denet records neither CLOCK_MONOTONIC nor the process's CPU
//! time, which a sync point requires (CV-DENET-1 in spec/convert-decisions.md). A sample's `clk` is
//! its `sim_clk` when denet ran with a clock beacon (`jets run`), else host wall-clock µs since the
//! first sample (the header then says `clock_frequency_mhz` 1 and `time_base`).

use std::cmp::Reverse;
use std::collections::hash_map::Entry;
use std::collections::{BinaryHeap, HashMap};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{anyhow, bail, Context, Result};
use clap::ValueEnum;
use jets::{Metadata, RecordHandle, Trace};
use serde_json::{Map, Value};

use crate::formats::dftracer::{self, DfEvent, DfKind, Hashes, Scale, Time};

/// The formats `jets import` reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Source {
    /// DFTracer traces (`.pfw`, `.pfw.gz`), old and 2.x forms.
    Dftracer,
    /// denet JSON Lines (host process monitoring).
    Denet,
    /// io-tracer-linux output directories (`output_YYYYMMDD_HHMMSS/`, schema 1 or 2).
    IoTracer,
}

/// Arguments of `jets import`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The format of the inputs.
    #[arg(long = "from", value_enum)]
    pub from: Source,
    /// The files to import (DFTracer writes one per process: give them all).
    #[arg(required = true)]
    pub inputs: Vec<PathBuf>,
    /// The JETS trace to write.
    #[arg(short, long)]
    pub output: PathBuf,
}

/// Runs `jets import`.
pub fn run(args: Args) -> Result<ExitCode> {
    let result = match args.from {
        Source::Dftracer => import_dftracer(&args.inputs, &args.output),
        Source::Denet => import_denet(&args.inputs, &args.output),
        Source::IoTracer => crate::formats::iotracer::import_all(&args.inputs, &args.output),
    };
    match result {
        Ok(summary) => {
            eprintln!("jets import: {summary}");
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            let _ = std::fs::remove_file(&args.output);
            Err(e.context(format!("importing into {}", args.output.display())))
        }
    }
}

/// What an import did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ImportSummary {
    /// Complete events read (JETS events carried as complete events included).
    pub complete_events: u64,
    /// `record` lines written.
    pub records: u64,
    /// `event` lines written.
    pub events: u64,
    /// Hash values resolved to names.
    pub hashes: u64,
    /// Events of other phases skipped.
    pub skipped: u64,
}

impl std::fmt::Display for ImportSummary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} input events -> {} records and {} events",
            self.complete_events, self.records, self.events
        )?;
        if self.hashes > 0 {
            write!(f, "; {} hashed names resolved", self.hashes)?;
        }
        if self.skipped > 0 {
            write!(
                f,
                "; {} events of other phases skipped (DFTracer writes only X and M)",
                self.skipped
            )?;
        }
        Ok(())
    }
}

/// A record to write.
#[derive(Debug, Default)]
struct Node {
    parent: Option<usize>,
    name: String,
    record_type: String,
    description: String,
    start: u64,
    end: Option<u64>,
    data: Map<String, Value>,
    annotations: Vec<(String, String, Value)>,
    depth: u32,
    /// Where it comes from (`file:line`), for the errors.
    at: String,
}

/// An event to write.
#[derive(Debug)]
struct Ev {
    record: usize,
    clk: u64,
    name: String,
    description: String,
    data: Option<Value>,
    /// Where it comes from (`file:line`), for the errors.
    at: String,
}

/// Imports DFTracer files into the JETS trace `output`.
pub fn import_dftracer(inputs: &[PathBuf], output: &std::path::Path) -> Result<ImportSummary> {
    let mut summary = ImportSummary::default();
    let mut hashes = Hashes::default();
    let mut events = Vec::new();
    for path in inputs {
        let mut reader = dftracer::Reader::open(path)?;
        let progress = crate::progress::Progress::bytes(None, &path.display().to_string());
        let mut set_progress = progress.setter();
        while let Some(ev) = reader.next() {
            let ev = ev?;
            if ev.line % 4096 == 0 {
                set_progress(reader.bytes);
            }
            if !hashes.learn(&ev) {
                events.push((path.display().to_string(), ev));
            }
        }
        progress.finish();
        summary.skipped += reader.skipped;
    }
    summary.hashes = hashes.len() as u64;
    summary.complete_events =
        events.iter().filter(|(_, e)| e.kind == DfKind::Complete).count() as u64;
    if summary.complete_events == 0 {
        let names: Vec<String> = inputs.iter().map(|p| p.display().to_string()).collect();
        bail!("no complete event in {}: nothing to import", names.join(", "));
    }
    let header = events.iter().find_map(|(_, e)| {
        (e.kind == DfKind::Metadata && e.name == dftracer::HEADER_EVENT)
            .then(|| e.args.get("value").and_then(Value::as_object).cloned())
            .flatten()
    });
    let from_jets = header.is_some()
        && events.iter().all(|(_, e)| {
            e.kind == DfKind::Metadata
                || e.args.contains_key("jets_id")
                || e.args.contains_key("jets_record_id")
        });
    let (metadata, nodes, evs) = if let (true, Some(meta)) = (from_jets, header) {
        // The ns per cycle the writer states (CV-DFT-2), as it stands, else the clock in cycles
        // per µs (files from before integer ns).
        let per_cycle = events.iter().find_map(|(_, e)| {
            (e.kind == DfKind::Metadata && e.name == dftracer::HEADER_EVENT)
                .then(|| e.args.get(dftracer::NS_PER_CYCLE).and_then(Value::as_f64))
                .flatten()
                .filter(|n| *n > 0.0)
        });
        let mhz = meta.get("clock_frequency_mhz").and_then(Value::as_f64).filter(|f| *f > 0.0);
        let scale =
            per_cycle.map_or(Scale::CyclesPerUnit(mhz.unwrap_or(1.0)), Scale::UnitsPerCycle);
        build_from_jets(meta, &events, &hashes, scale)?
    } else {
        build_foreign(&events, &hashes)?
    };
    summary.records = nodes.len() as u64;
    summary.events = evs.len() as u64;
    write_trace(output, metadata, nodes, evs)?;
    Ok(summary)
}

/// A foreign file's scale: 1 cycle per unit of its `ts`/`dur` (CV-DFT-1).
const FOREIGN: Scale = Scale::CyclesPerUnit(1.0);

fn at(file: &str, e: &DfEvent) -> String {
    format!("{file}:{}", e.line)
}

/// Cycles from a DFTracer time (at `scale`) of the event at `place`: an error outside the cycles
/// a `u64` holds (a cast would silently make it 0 or the last cycle), or where the cycle cannot
/// be worked out exactly ([`Time::cycles`], CV-DFT-3).
fn clk(t: Time, scale: Scale, place: &str) -> Result<u64> {
    t.cycles(scale).map_err(|why| anyhow!("{place}: time {t}: {why}"))
}

/// The end (`ts + dur`) of the event at `place`, in cycles (see [`clk`]).
fn end_clk(e: &DfEvent, scale: Scale, place: &str) -> Result<u64> {
    match e.ts.plus(e.dur) {
        Some(t) => clk(t, scale, place),
        None => bail!(
            "{place}: ts {} + dur {} is outside the cycles a JETS trace holds (0 to 2^64 - 1)",
            e.ts,
            e.dur
        ),
    }
}

/// The data of a foreign complete event: its args, with hashed names resolved next to them.
fn resolved_args(args: &Map<String, Value>, hashes: &Hashes) -> Map<String, Value> {
    let mut data = Map::new();
    for (k, v) in args {
        data.insert(k.clone(), v.clone());
        if dftracer::is_hash_key(k) {
            if let Some(name) = hashes.resolve(v) {
                data.insert(dftracer::resolved_key(k), name.into());
            }
        }
    }
    data
}

/// The original tree of a file `jets convert --to dftracer` wrote, its times at `scale`.
fn build_from_jets(
    meta: Map<String, Value>,
    events: &[(String, DfEvent)],
    hashes: &Hashes,
    scale: Scale,
) -> Result<(Metadata, Vec<Node>, Vec<Ev>)> {
    let mut index: HashMap<u64, usize> = HashMap::new();
    let mut nodes = Vec::new();
    let mut parents = Vec::new();
    for (file, e) in events.iter().filter(|(_, e)| e.kind == DfKind::Complete) {
        let Some(id) = e.args.get("jets_id").and_then(Value::as_u64) else { continue };
        let description = e.args.get("shash").and_then(|h| hashes.resolve(h)).unwrap_or("");
        let annotations = e
            .args
            .get("jets_annotations")
            .and_then(Value::as_array)
            .map(|list| {
                list.iter()
                    .map(|a| {
                        (
                            a["name"].as_str().unwrap_or("").to_owned(),
                            a["description"].as_str().unwrap_or("").to_owned(),
                            a["data"].clone(),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default();
        let unended = e.args.get("jets_unended").and_then(Value::as_bool).unwrap_or(false);
        if index.insert(id, nodes.len()).is_some() {
            bail!("{}: jets_id {id} appears twice", at(file, e));
        }
        let place = at(file, e);
        parents.push((e.args.get("jets_parent_id").and_then(Value::as_u64), place.clone()));
        nodes.push(Node {
            parent: None,
            name: e.name.clone(),
            record_type: e.cat.clone(),
            description: description.to_owned(),
            start: clk(e.ts, scale, &place)?,
            end: (!unended).then(|| end_clk(e, scale, &place)).transpose()?,
            data: e.args.get("jets_data").and_then(Value::as_object).cloned().unwrap_or_default(),
            annotations,
            depth: 0,
            at: place,
        });
    }
    for (i, (p, place)) in parents.iter().enumerate() {
        if let Some(p) = p {
            match index.get(p) {
                Some(&pi) => nodes[i].parent = Some(pi),
                None => bail!("{place}: jets_parent_id {p} names no record in the trace"),
            }
        }
    }
    set_depths(&mut nodes)?;
    let mut evs = Vec::new();
    for (file, e) in events {
        match e.kind {
            DfKind::Complete if e.cat == dftracer::EVENT_CATEGORY => {
                let Some(rid) = e.args.get("jets_record_id").and_then(Value::as_u64) else {
                    continue;
                };
                let Some(&record) = index.get(&rid) else {
                    bail!("{}: event on record {rid}, which is not in the trace", at(file, e))
                };
                let place = at(file, e);
                evs.push(Ev {
                    record,
                    clk: clk(e.ts, scale, &place)?,
                    name: e.name.clone(),
                    description: e
                        .args
                        .get("shash")
                        .and_then(|h| hashes.resolve(h))
                        .unwrap_or("")
                        .to_owned(),
                    data: e.args.get("jets_data").cloned(),
                    at: place,
                });
            }
            DfKind::Metadata if e.name == "jets_annotation" => {
                let v = e.args.get("value").cloned().unwrap_or_default();
                let Some(&record) =
                    v.get("record_id").and_then(Value::as_u64).and_then(|r| index.get(&r))
                else {
                    bail!("{}: annotation on a record that is not in the trace", at(file, e))
                };
                nodes[record].annotations.push((
                    e.args.get("name").and_then(Value::as_str).unwrap_or("").to_owned(),
                    v["description"].as_str().unwrap_or("").to_owned(),
                    v["data"].clone(),
                ));
            }
            _ => {}
        }
    }
    Ok((Metadata::from(meta), nodes, evs))
}

fn set_depths(nodes: &mut [Node]) -> Result<()> {
    let mut depth: Vec<Option<u32>> = vec![None; nodes.len()];
    for i in 0..nodes.len() {
        let mut chain = vec![i];
        let mut d = loop {
            let cur = *chain.last().unwrap_or(&i);
            if let Some(d) = depth[cur] {
                chain.pop();
                break d + 1;
            }
            match nodes[cur].parent {
                None => break 0,
                Some(p) => {
                    if chain.len() > nodes.len() {
                        bail!(
                            "{}: the jets_parent_id links form a cycle (record {:?})",
                            nodes[i].at,
                            nodes[i].name
                        );
                    }
                    chain.push(p)
                }
            }
        };
        while let Some(c) = chain.pop() {
            depth[c] = Some(d);
            d += 1;
        }
    }
    for (n, d) in nodes.iter_mut().zip(depth) {
        n.depth = d.unwrap_or(0);
    }
    Ok(())
}

fn build_foreign(
    events: &[(String, DfEvent)],
    hashes: &Hashes,
) -> Result<(Metadata, Vec<Node>, Vec<Ev>)> {
    let ns = events.iter().any(|(_, e)| {
        e.kind == DfKind::Metadata
            && e.name == "CM"
            && e.args.get("name").and_then(Value::as_str) == Some("time_metric")
            && e.args
                .get("value")
                .and_then(Value::as_str)
                .is_some_and(|v| v.eq_ignore_ascii_case("NS"))
    });
    let mut process_names: HashMap<u64, String> = HashMap::new();
    let mut thread_names: HashMap<(u64, u64), String> = HashMap::new();
    let mut process_notes: HashMap<u64, Vec<(String, String, Value)>> = HashMap::new();
    let mut threads: std::collections::BTreeMap<(u64, u64), Vec<(&str, &DfEvent)>> =
        Default::default();
    for (file, e) in events {
        match e.kind {
            DfKind::Complete => threads.entry((e.pid, e.tid)).or_default().push((file, e)),
            DfKind::Metadata => {
                let name = e.args.get("name").and_then(Value::as_str);
                match (e.name.as_str(), name) {
                    ("process_name", Some(n)) => {
                        process_names.insert(e.pid, n.to_owned());
                    }
                    ("thread_name", Some(n)) => {
                        thread_names.insert((e.pid, e.tid), n.to_owned());
                    }
                    _ => process_notes.entry(e.pid).or_default().push((
                        name.map_or_else(|| e.name.clone(), str::to_owned),
                        format!("DFTracer metadata event {}", e.name),
                        e.args
                            .get("value")
                            .cloned()
                            .unwrap_or_else(|| Value::Object(e.args.clone())),
                    )),
                }
            }
        }
    }
    let mut nodes: Vec<Node> = Vec::new();
    let mut process_node: HashMap<u64, usize> = HashMap::new();
    for (&(pid, tid), list) in &mut threads {
        list.sort_by(|(_, a), (_, b)| {
            a.ts.total_cmp(b.ts).then(b.dur.total_cmp(a.dur)).then(a.line.cmp(&b.line))
        });
        // The process and thread records come from the thread's first event.
        let first = at(list[0].0, list[0].1);
        let start = clk(list[0].1.ts, FOREIGN, &first)?;
        let mut end = start;
        for &(file, e) in list.iter() {
            end = end.max(end_clk(e, FOREIGN, &at(file, e))?);
        }
        let p = *process_node.entry(pid).or_insert_with(|| {
            nodes.push(Node {
                parent: None,
                name: process_names.get(&pid).cloned().unwrap_or_else(|| format!("pid {pid}")),
                record_type: "Process".into(),
                description: format!("DFTracer process {pid}"),
                start,
                end: Some(end),
                data: Map::from_iter([("pid".to_owned(), pid.into())]),
                annotations: process_notes.remove(&pid).unwrap_or_default(),
                depth: 0,
                at: first.clone(),
            });
            nodes.len() - 1
        });
        nodes[p].start = nodes[p].start.min(start);
        nodes[p].end = nodes[p].end.max(Some(end));
        let t = nodes.len();
        nodes.push(Node {
            parent: Some(p),
            name: thread_names.get(&(pid, tid)).cloned().unwrap_or_else(|| format!("tid {tid}")),
            record_type: "Thread".into(),
            description: format!("DFTracer thread {tid} of process {pid}"),
            start,
            end: Some(end),
            data: Map::from_iter([("pid".to_owned(), pid.into()), ("tid".to_owned(), tid.into())]),
            annotations: Vec::new(),
            depth: 1,
            at: first,
        });
        // Nesting by time containment: the stack holds the enclosing events.
        let mut stack: Vec<(usize, u64)> = Vec::new();
        for &(file, e) in list.iter() {
            let place = at(file, e);
            let (s, en) = (clk(e.ts, FOREIGN, &place)?, end_clk(e, FOREIGN, &place)?);
            while let Some(&(_, top_end)) = stack.last() {
                if en <= top_end {
                    break;
                }
                stack.pop();
            }
            let parent = stack.last().map_or(t, |&(i, _)| i);
            let mut data = resolved_args(&e.args, hashes);
            if let Some(id) = e.id {
                data.insert("dftracer_id".into(), id.into());
            }
            let description =
                data.get("file").and_then(Value::as_str).map(str::to_owned).unwrap_or_default();
            nodes.push(Node {
                parent: Some(parent),
                name: e.name.clone(),
                record_type: if e.cat.is_empty() { "Event".into() } else { e.cat.clone() },
                description,
                start: s,
                end: Some(en),
                data,
                annotations: Vec::new(),
                depth: nodes[parent].depth + 1,
                at: place,
            });
            stack.push((nodes.len() - 1, en));
        }
    }
    let (mhz, unit) = if ns { (1000.0, "ns") } else { (1.0, "us") };
    let meta = Metadata::new()
        .clock_frequency_mhz(mhz)
        .insert("source_format", "DFTracer")
        .insert("source_time_unit", unit);
    Ok((meta, nodes, Vec::new()))
}

/// Writes nodes and events with the SDK writer: records begin in time order (parents first),
/// ends are written as time passes, and a record ends only once everything that needs its handle
/// (children, events) has been written.
fn write_trace(
    output: &std::path::Path,
    metadata: Metadata,
    nodes: Vec<Node>,
    evs: Vec<Ev>,
) -> Result<()> {
    let trace = Trace::create(output, metadata)
        .with_context(|| format!("creating {}", output.display()))?;
    // (clk, 0 = record / 1 = event, depth, index)
    let mut items: Vec<(u64, u8, u32, usize)> = nodes
        .iter()
        .enumerate()
        .map(|(i, n)| (n.start, 0, n.depth, i))
        .chain(evs.iter().enumerate().map(|(i, e)| (e.clk, 1, 0, i)))
        .collect();
    items.sort_unstable();
    let mut pending = vec![0u32; nodes.len()];
    for n in &nodes {
        if let Some(p) = n.parent {
            pending[p] += 1;
        }
    }
    for e in &evs {
        pending[e.record] += 1;
    }
    let mut handles: Vec<Option<RecordHandle>> = (0..nodes.len()).map(|_| None).collect();
    let mut due = vec![false; nodes.len()];
    let mut ends: BinaryHeap<Reverse<(u64, u32, usize)>> = BinaryHeap::new();
    let end = |i: usize, handles: &mut Vec<Option<RecordHandle>>| -> Result<()> {
        if let (Some(h), Some(at)) = (handles[i].take(), nodes[i].end) {
            h.end_at(at)
                .with_context(|| format!("{}: ending record {:?}", nodes[i].at, nodes[i].name))?;
        }
        Ok(())
    };
    for (clk, kind, _, i) in items {
        while let Some(&Reverse((e, _, j))) = ends.peek() {
            if e >= clk {
                break;
            }
            ends.pop();
            if pending[j] == 0 {
                end(j, &mut handles)?;
            } else {
                due[j] = true;
            }
        }
        let owner = if kind == 0 {
            let n = &nodes[i];
            let builder = match n.parent {
                Some(p) => match &handles[p] {
                    Some(h) => h.child(n.name.clone(), n.record_type.clone()),
                    None => bail!("{}: record {:?} begins before its parent", n.at, n.name),
                },
                None => trace.root(n.name.clone(), n.record_type.clone()),
            };
            let mut builder = builder.description(n.description.clone());
            if !n.data.is_empty() {
                builder = builder.data_json(&serde_json::to_string(&n.data)?);
            }
            let h = builder
                .begin_at(n.start)
                .with_context(|| format!("{}: record {:?}", n.at, n.name))?;
            for (name, description, data) in &n.annotations {
                h.annotation(name.clone())
                    .description(description.clone())
                    .data_json(&serde_json::to_string(data)?)
                    .emit()
                    .with_context(|| format!("{}: annotation {name:?} on {:?}", n.at, n.name))?;
            }
            handles[i] = Some(h);
            if let Some(e) = n.end {
                ends.push(Reverse((e, u32::MAX - n.depth, i)));
            }
            n.parent
        } else {
            let e = &evs[i];
            let Some(h) = &handles[e.record] else {
                let r = &nodes[e.record];
                bail!(
                    "{}: event {:?} at cycle {} is outside its record {:?} (cycles {} to {})",
                    e.at,
                    e.name,
                    e.clk,
                    r.name,
                    r.start,
                    r.end.map_or_else(|| "the end of the trace".to_owned(), |c| c.to_string())
                )
            };
            let mut b = h.event(e.name.clone()).description(e.description.clone());
            if let Some(d) = &e.data {
                b = b.data_json(&serde_json::to_string(d)?);
            }
            b.emit_at(e.clk).with_context(|| format!("{}: event {:?}", e.at, e.name))?;
            Some(e.record)
        };
        if let Some(p) = owner {
            pending[p] -= 1;
            if pending[p] == 0 && due[p] {
                end(p, &mut handles)?;
            }
        }
    }
    while let Some(Reverse((_, _, j))) = ends.pop() {
        end(j, &mut handles)?;
    }
    // Records that never ended stay open: dropping their handles leaves them so.
    drop(handles);
    trace.close().with_context(|| format!("writing {}", output.display()))?;
    Ok(())
}

/// The metric keys of spec/host-sync.md for one denet sample.
/// An `f32` as the number denet wrote (its shortest decimal), not the binary value widened to
/// `f64` (70.70955 stays 70.70955, not 70.70954895019531).
fn decimal(x: f32) -> Value {
    x.to_string().parse::<f64>().map_or(Value::Null, Value::from)
}

fn host_sample(m: &jets_host::denet::AggregatedMetrics, tree: bool) -> Map<String, Value> {
    let mut d = Map::new();
    let mut put = |k: &str, v: Value| {
        d.insert(k.to_owned(), v);
    };
    put("real_ns", (m.ts_ms.saturating_mul(1_000_000)).into());
    put("cpu_usage", decimal(m.cpu_usage));
    put("mem_rss_kb", m.mem_rss_kb.into());
    put("mem_vms_kb", m.mem_vms_kb.into());
    put("disk_read_bytes", m.disk_read_bytes.into());
    put("disk_write_bytes", m.disk_write_bytes.into());
    for (k, v) in [
        ("syscall_read_bytes", m.syscall_read_bytes),
        ("syscall_write_bytes", m.syscall_write_bytes),
        ("page_faults_cached", m.page_faults_cached),
        ("page_faults_disk", m.page_faults_disk),
    ] {
        // Absent, not zero (HS5).
        if let Some(v) = v {
            put(k, v.into());
        }
    }
    put("sys_net_rx_bytes", m.sys_net_rx_bytes.into());
    put("sys_net_tx_bytes", m.sys_net_tx_bytes.into());
    put("thread_count", (m.thread_count as u64).into());
    if tree {
        put("process_count", (m.process_count as u64).into());
    }
    put("uptime_secs", m.uptime_secs.into());
    if let Some(p) = m.psi_mem {
        put("psi_some_avg10", decimal(p.some_avg10));
        put("psi_full_avg10", decimal(p.full_avg10));
    }
    if let Some(p) = m.perf {
        put("perf_cycles", p.cycles.into());
        put("perf_instructions", p.instructions.into());
        put("perf_cache_refs", p.cache_refs.into());
        put("perf_cache_misses", p.cache_misses.into());
        put("perf_stalled_backend", p.stalled_backend.into());
    }
    if let Some(p) = m.perf_sw {
        put("perf_task_clock_ns", p.task_clock_ns.into());
        put("perf_context_switches", p.context_switches.into());
        put("perf_page_faults", p.page_faults.into());
    }
    d
}

/// Name of the per-sample event of an imported denet file (not a `HostSync`: see the module docs).
pub const HOST_SAMPLE_EVENT: &str = "HostSample";

/// Imports denet JSON Lines files into the JETS trace `output`: one `HostProcess` record each.
/// The writer's errors name the input file and the line the refused item comes from (a
/// sample's `sample`/`tree` line, a descendant's `child` line, the `env`, `metadata` or `exit`
/// line), as the reader's do.
pub fn import_denet(inputs: &[PathBuf], output: &std::path::Path) -> Result<ImportSummary> {
    use crate::formats::denet;
    use jets_host::denet::AggregatedMetrics;
    let mut files = Vec::new();
    for path in inputs {
        let f = denet::read(path)?;
        // Tree files sum the process tree; single-process files hold plain samples.
        let (samples, tree): (Vec<AggregatedMetrics>, bool) = if !f.aggregated.is_empty() {
            (f.aggregated.clone(), true)
        } else {
            let s =
                f.metrics.iter().map(|m| AggregatedMetrics::from_metrics(m.ts_ms, [m])).collect();
            (s, false)
        };
        if samples.is_empty() {
            bail!("{}: no sample in this denet file: nothing to import", path.display());
        }
        files.push((path, f, samples, tree));
    }
    let with_clk = files
        .iter()
        .all(|(_, f, s, _)| f.sim_clks.len() == s.len() && f.sim_clks.iter().all(Option::is_some));
    let t0 = files.iter().filter_map(|(_, _, s, _)| s.first().map(|m| m.ts_ms)).min().unwrap_or(0);
    let mut meta = Metadata::new().insert("source_format", "denet");
    if !with_clk {
        meta = meta.clock_frequency_mhz(1.0).insert(
            "time_base",
            format!("host wall clock: 1 cycle = 1 µs since Unix time {t0} ms"),
        );
    }
    let trace =
        Trace::create(output, meta).with_context(|| format!("creating {}", output.display()))?;
    let mut summary = ImportSummary::default();
    for (path, f, samples, tree) in &files {
        let clks: Vec<u64> = if with_clk {
            // HS1: a clock that goes back is held at its last value.
            let mut last = 0;
            f.sim_clks
                .iter()
                .map(|c| {
                    last = last.max(c.unwrap_or(last));
                    last
                })
                .collect()
        } else {
            samples.iter().map(|m| m.ts_ms.saturating_sub(t0).saturating_mul(1000)).collect()
        };
        let file = DenetSamples { path, f, samples, tree: *tree, clks: &clks };
        write_denet_file(&trace, &file, &mut summary)?;
        summary.complete_events += samples.len() as u64;
    }
    trace.close().with_context(|| format!("writing {}", output.display()))?;
    Ok(summary)
}

/// One denet file, read, with its samples and their cycles.
struct DenetSamples<'a> {
    path: &'a std::path::Path,
    f: &'a crate::formats::denet::DenetFile,
    /// The aggregated metrics of each sample (not empty).
    samples: &'a [jets_host::denet::AggregatedMetrics],
    /// Whether the samples are `tree` lines (else `sample` lines).
    tree: bool,
    /// The cycle of each sample.
    clks: &'a [u64],
}

impl DenetSamples<'_> {
    /// `file:line` of line `n` (0: a line the file does not have, named by the file alone).
    fn at(&self, n: usize) -> String {
        match n {
            0 => self.path.display().to_string(),
            n => format!("{}:{n}", self.path.display()),
        }
    }

    /// `file:line` of sample `i`'s line.
    fn sample_at(&self, i: usize) -> String {
        let lines = if self.tree { &self.f.lines.aggregated } else { &self.f.lines.metrics };
        self.at(lines.get(i).copied().unwrap_or(0))
    }
}

/// Writes one denet file into `trace`: its `HostProcess` record, annotations, samples and
/// descendants (CV-DENET-1, CV-DENET-2). Every error names the file and line it comes from.
fn write_denet_file(
    trace: &Trace,
    d: &DenetSamples<'_>,
    summary: &mut ImportSummary,
) -> Result<()> {
    use jets_host::denet::AggregatedMetrics;
    let (path, f, samples, clks) = (d.path, d.f, d.samples, d.clks);
    let (first, last) = (clks[0], clks[clks.len() - 1]);
    let mut rec = trace.root("host", jets_host::sync::HOST_RECORD_TYPE).description(format!(
        "denet file {}",
        path.file_name()
            .map_or_else(|| path.display().to_string(), |n| n.to_string_lossy().into_owned())
    ));
    if let Some(m) = &f.metadata {
        let command = std::path::Path::new(&m.executable)
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .or_else(|| m.cmd.first().cloned())
            .unwrap_or_default();
        rec = rec.field("pid", u64::from(m.pid)).field("command", command);
    }
    // The record begins at the first sample and ends at the last.
    let host =
        rec.begin_at(first).with_context(|| format!("{}: HostProcess record", d.sample_at(0)))?;
    summary.records += 1;
    if let Some(env) = &f.env {
        let mut env = env.clone();
        env.remove("kind");
        host.annotation(jets_host::sync::ENV_ANNOTATION)
            .description("denet env record")
            .data_json(&serde_json::to_string(&env)?)
            .emit()
            .with_context(|| format!("{}: env line", d.at(f.lines.env)))?;
    }
    if let Some(m) = &f.metadata {
        let place = || format!("{}: metadata line", d.at(f.lines.metadata));
        if let Some(caps) = &m.capabilities {
            host.annotation(jets_host::sync::CAPABILITIES_ANNOTATION)
                .description("denet metadata capabilities")
                .data_json(&serde_json::to_string(caps)?)
                .emit()
                .with_context(place)?;
        }
        let about = serde_json::json!({"cmd": m.cmd, "executable": m.executable, "t0_ms": m.t0_ms});
        host.annotation("DenetMetadata")
            .data_json(&about.to_string())
            .emit()
            .with_context(place)?;
    }
    if let Some(exit) = &f.exit {
        let mut exit = exit.clone();
        exit.remove("kind");
        host.annotation("DenetExit")
            .data_json(&serde_json::to_string(&exit)?)
            .emit()
            .with_context(|| format!("{}: exit line", d.at(f.lines.exit)))?;
    }
    // Each descendant is a HostProcess record under the monitored one (flat, its `ppid` in
    // its data, so a process that outlives its parent still nests), with its own HostSample
    // events: the per-child metrics of the tree lines, and what its `child` line said.
    let started: HashMap<u32, &jets_host::denet::ChildStart> =
        f.children.iter().map(|c| (c.pid, c)).collect();
    // pid -> (record, last cycle seen, where it was last seen)
    let mut procs: HashMap<u32, (RecordHandle, u64, String)> = HashMap::new();
    let mut order: Vec<u32> = Vec::new();
    let begin_child = |pid: u32, command: &str, clk: u64, place: &str| -> Result<RecordHandle> {
        let mut data = Map::new();
        data.insert("pid".into(), pid.into());
        data.insert("command".into(), command.into());
        if let Some(s) = started.get(&pid) {
            data.insert("ppid".into(), s.ppid.into());
            data.insert("cmd".into(), s.cmd.clone().into());
            data.insert("exe".into(), s.exe.clone().into());
            data.insert("started_ms".into(), s.ts_ms.into());
        }
        host.child(command.to_owned(), jets_host::sync::HOST_RECORD_TYPE)
            .description(format!("child process {pid}"))
            .data_json(&serde_json::to_string(&data)?)
            .begin_at(clk)
            .with_context(|| format!("{place}: child process {pid}"))
    };
    for (i, (m, &clk)) in samples.iter().zip(clks).enumerate() {
        let place = d.sample_at(i);
        host.event(HOST_SAMPLE_EVENT)
            .data_json(&serde_json::to_string(&host_sample(m, d.tree))?)
            .emit_at(clk)
            .with_context(|| format!("{place}: {HOST_SAMPLE_EVENT} event"))?;
        summary.events += 1;
        for c in f.tree_children.get(i).into_iter().flatten() {
            let (rec, seen, seen_at) = match procs.entry(c.pid) {
                Entry::Occupied(e) => e.into_mut(),
                Entry::Vacant(e) => {
                    order.push(c.pid);
                    summary.records += 1;
                    e.insert((begin_child(c.pid, &c.command, clk, &place)?, clk, place.clone()))
                }
            };
            let mut one = AggregatedMetrics::from_metrics(c.metrics.ts_ms, [&c.metrics]);
            one.perf = c.metrics.perf;
            one.perf_sw = c.metrics.perf_sw;
            rec.event(HOST_SAMPLE_EVENT)
                .data_json(&serde_json::to_string(&host_sample(&one, false))?)
                .emit_at(clk)
                .with_context(|| {
                    format!("{place}: {HOST_SAMPLE_EVENT} event of child process {}", c.pid)
                })?;
            *seen = clk;
            seen_at.clone_from(&place);
            summary.events += 1;
        }
    }
    // Descendants seen only by a `child` line (gone before a sample included them).
    for (k, s) in f.children.iter().enumerate() {
        if let Entry::Vacant(e) = procs.entry(s.pid) {
            let at = samples.iter().position(|m| m.ts_ms >= s.ts_ms).unwrap_or(clks.len() - 1);
            let command = s.cmd.first().map_or("", |c| c.rsplit('/').next().unwrap_or(c));
            let place = d.at(f.lines.children.get(k).copied().unwrap_or(0));
            e.insert((begin_child(s.pid, command, clks[at], &place)?, clks[at], place));
            order.push(s.pid);
            summary.records += 1;
        }
    }
    for pid in order {
        if let Some((rec, seen, place)) = procs.remove(&pid) {
            rec.end_at(seen).with_context(|| format!("{place}: end of child process {pid}"))?;
        }
    }
    host.end_at(last).with_context(|| {
        format!("{}: end of the HostProcess record", d.sample_at(samples.len() - 1))
    })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use jets::{Metadata, Trace};

    use super::{write_denet_file, DenetSamples, ImportSummary};

    /// The writer's errors on a denet file name the file and the line of what it refused, as the
    /// reader's do. Input cannot reach them (the reader refuses samples out of time order, and
    /// the cycles it gives never go back), so this hands the writer cycles that do and a closed
    /// trace. Before, they named the sample's number ("sample 2"), not its line.
    #[test]
    fn the_writer_s_errors_name_the_denet_file_and_line() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/data/denet/cli_write_env_children.jsonl");
        let f = crate::formats::denet::read(&path).expect("read");
        // Lines 9, 10 and 11 are its tree samples (1-8: env, metadata, child lines; 12: exit).
        assert_eq!(f.lines.aggregated, [9, 10, 11]);
        let name = path.display().to_string();
        let write = |clks: &[u64], closed: bool| {
            let trace = Trace::to_writer(std::io::sink(), Metadata::new()).expect("trace");
            if closed {
                trace.close().expect("close");
            }
            let d = DenetSamples { path: &path, f: &f, samples: &f.aggregated, tree: true, clks };
            let e = write_denet_file(&trace, &d, &mut ImportSummary::default()).expect_err("fails");
            format!("{e:#}")
        };
        let e = write(&[10, 5, 20], false);
        assert!(e.starts_with(&format!("{name}:10: HostSample event: clk 5 is before")), "{e}");
        let e = write(&[10, 20, 5], false);
        assert!(e.starts_with(&format!("{name}:11: HostSample event: clk 5 is before")), "{e}");
        let e = write(&[10, 20, 30], true);
        assert!(e.starts_with(&format!("{name}:9: HostProcess record: ")), "{e}");
    }
}
