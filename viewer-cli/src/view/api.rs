//! The viewer's JSON API: one function per endpoint, from query parameters to a typed answer that
//! serde writes (so every string from the trace leaves escaped, and a field is named once).
//!
//! Record ids are sent as strings (u64 does not fit a JavaScript number); cycles are numbers.
//! Items sent by the thousand (bars, markers, stages, host samples) are compact arrays: their
//! types are declared with the `compact!` macro, which also gives their field names, and the summary
//! sends those names (`layouts`) so the page indexes them by name. Closed sets (status,
//! severity, marker style) travel as their `jets_vocab` `code()`, and the summary sends the
//! vocabulary's lists (`vocab`), so the page never types a list of its own.

use std::collections::HashMap;

use jets::format::{Line, MarkerStyle, Severity, Status};
use jets_host::sync::ClockMap;
use serde::ser::{SerializeTuple, Serializer};
use serde::Serialize;
use serde_json::value::RawValue;

use super::build::Shared;
use super::index::{before_end, wire_code, Index, Item, Marker, MARKER_PX, NONE};

/// Labels are read back from the trace only for bars at least this many pixels wide.
const LABEL_MIN_PX: f64 = 24.0;
/// At most this many labels per window answer.
const MAX_LABELS: usize = 4000;
/// At most this many events or annotations in a record's details.
const MAX_DETAIL_LINES: usize = 1000;
/// At most this many pipeline rows per answer.
const MAX_PIPE_ROWS: usize = 2000;

/// An API failure: HTTP status and message.
#[derive(Debug, PartialEq, Eq)]
pub struct ApiError {
    /// HTTP status code.
    pub status: u16,
    /// What went wrong.
    pub message: String,
}

fn bad(message: impl Into<String>) -> ApiError {
    ApiError { status: 400, message: message.into() }
}

fn not_found(message: impl Into<String>) -> ApiError {
    ApiError { status: 404, message: message.into() }
}

fn internal(message: impl Into<String>) -> ApiError {
    ApiError { status: 500, message: message.into() }
}

/// Query parameters of a request.
pub type Params = HashMap<String, String>;

fn num<T: std::str::FromStr>(p: &Params, key: &str) -> Result<Option<T>, ApiError> {
    match p.get(key) {
        None => Ok(None),
        Some(v) if v.is_empty() => Ok(None),
        Some(v) => v.parse().map(Some).map_err(|_| bad(format!("`{key}` is not a number: {v:?}"))),
    }
}

fn lock(shared: &Shared) -> Result<std::sync::RwLockReadGuard<'_, Index>, ApiError> {
    shared.index.read().map_err(|_| internal("the index is unavailable"))
}

fn json(v: &impl Serialize) -> Result<Vec<u8>, ApiError> {
    serde_json::to_vec(v).map_err(|e| internal(format!("encoding the answer: {e}")))
}

/// Answers `GET /api/NAME?params` with a JSON body.
pub fn handle(shared: &Shared, name: &str, p: &Params) -> Result<Vec<u8>, ApiError> {
    match name {
        "summary" => json(&summary(shared)?),
        "window" => json(&window(shared, p)?),
        "children" => json(&children(shared, p)?),
        "nodes" => json(&nodes(shared, p)?),
        "record" => json(&record(shared, p)?),
        "search" => json(&search(shared, p)?),
        "host" => json(&host(shared)?),
        "bars" => json(&bars(shared, p)?),
        "pipeline" => json(&pipeline(shared, p)?),
        "jump" => json(&jump(shared, p)?),
        _ => Err(not_found(format!("no API endpoint {name:?}"))),
    }
}

/// The body of an error answer.
#[derive(Serialize)]
pub struct ErrorBody<'a> {
    /// What went wrong.
    pub error: &'a str,
}

/// Declares a struct sent as a JSON array of its fields in order, with `FIELDS`, their names.
macro_rules! compact {
    ($(#[$m:meta])* pub struct $name:ident { $($(#[$fm:meta])* pub $f:ident : $t:ty),* $(,)? }) => {
        $(#[$m])*
        #[derive(Clone, Debug, PartialEq)]
        pub struct $name { $($(#[$fm])* pub $f: $t),* }

        impl $name {
            /// The field names, in the order they are sent.
            pub const FIELDS: &'static [&'static str] = &[$(stringify!($f)),*];
        }

        impl Serialize for $name {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                let mut t = s.serialize_tuple(Self::FIELDS.len())?;
                $(t.serialize_element(&self.$f)?;)*
                t.end()
            }
        }
    };
}

compact! {
    /// A bar, or a cluster of bars closer than a pixel (`count` > 1; id and type are the first's).
    pub struct BarOut {
        /// Start cycle.
        pub start: u64,
        /// End cycle (open bars end at the last cycle seen).
        pub end: u64,
        /// Record id.
        pub id: String,
        /// Interned record_type (index into the summary's `types`).
        pub rtype: u32,
        /// `0xrrggbb`, when the record has a color hint.
        pub color: Option<u32>,
        /// `Status::code()`.
        pub status: Option<u8>,
        /// Criticality in [0, 1].
        pub crit: Option<f64>,
        /// How many records it stands for.
        pub count: u32,
        /// Whether the (last) record is still open.
        pub open: bool,
        /// `display_label` or name, for bars wide enough to show it.
        pub label: Option<String>,
    }
}

compact! {
    /// An event marker, or markers within 8 pixels merged into one (VW-MARK-2).
    pub struct MarkerOut {
        /// Cycle of the first event.
        pub clk: u64,
        /// Index of the event shown (the first of the highest severity).
        pub ev: u32,
        /// How many events it stands for.
        pub count: u32,
        /// `MarkerStyle::code()` of the event shown.
        pub style: Option<u8>,
        /// The highest `Severity::code()` among them.
        pub severity: Option<u8>,
        /// `0xrrggbb` of the event shown, when it has a color hint.
        pub color: Option<u32>,
        /// Interned icon (index into the summary's `icons`).
        pub icon: Option<u32>,
        /// Record id of the event shown.
        pub record: String,
        /// Interned event name (index into the summary's `event_names`).
        pub name: u32,
    }
}

compact! {
    /// A pipeline stage: where it begins (it lasts until the next stage or the record's end).
    pub struct StageOut {
        /// Cycle the stage begins.
        pub clk: u64,
        /// Interned event name (index into the summary's `event_names`).
        pub name: u32,
    }
}

compact! {
    /// A host sample.
    pub struct SampleOut {
        /// Cycle.
        pub clk: u64,
        /// Host monotonic time, ns.
        pub mono_ns: u64,
        /// CPU usage, percent of one core.
        pub cpu_usage: Option<f64>,
        /// Resident memory, KiB.
        pub mem_rss_kb: Option<u64>,
    }
}

compact! {
    /// Simulation speed over one interval between sync points.
    pub struct SpeedOut {
        /// First cycle.
        pub start_clk: u64,
        /// Last cycle.
        pub end_clk: u64,
        /// Simulated cycles per host second.
        pub cycles_per_sec: f64,
        /// CPU time over wall time, when recorded.
        pub cpu_utilization: Option<f64>,
    }
}

/// The field names of every compact type, for the page.
#[derive(Serialize)]
pub struct Layouts {
    /// [`BarOut`].
    pub bar: &'static [&'static str],
    /// [`MarkerOut`].
    pub marker: &'static [&'static str],
    /// [`StageOut`].
    pub stage: &'static [&'static str],
    /// [`SampleOut`].
    pub sample: &'static [&'static str],
    /// [`SpeedOut`].
    pub speed: &'static [&'static str],
}

/// The closed sets of the format the page shows, from `jets_vocab`: a code is a position.
#[derive(Serialize)]
pub struct Vocab {
    /// `Status::ALL`.
    pub status: Vec<&'static str>,
    /// `Severity::ALL`.
    pub severity: Vec<&'static str>,
    /// `MarkerStyle::ALL`.
    pub marker_style: Vec<&'static str>,
}

impl Vocab {
    /// The lists, in `code()` order.
    pub fn new() -> Vocab {
        Vocab {
            status: Status::ALL.iter().map(|s| s.as_str()).collect(),
            severity: Severity::ALL.iter().map(|s| s.as_str()).collect(),
            marker_style: MarkerStyle::ALL.iter().map(|s| s.as_str()).collect(),
        }
    }
}

impl Default for Vocab {
    fn default() -> Self {
        Vocab::new()
    }
}

/// Counts in the summary.
#[derive(Serialize)]
pub struct CountsOut {
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
    /// Lines skipped.
    pub errors: u64,
    /// Host samples.
    pub host_samples: u64,
    /// Bytes the index holds.
    pub index_bytes: u64,
}

/// A record_type and how many records it has.
#[derive(Serialize)]
pub struct TypeOut {
    /// The record_type.
    pub name: String,
    /// Records of it.
    pub count: u64,
}

/// A swimlane and its rows.
#[derive(Serialize)]
pub struct LaneOut {
    /// What runs there and its ids (VW-LANE-2).
    pub label: String,
    /// The host lane.
    pub host: bool,
    /// `[row, depth]` pairs in display order.
    pub rows: Vec<(u32, u32)>,
}

/// A pipeline group: the records of one type under one parent, in file order.
#[derive(Serialize)]
pub struct GroupOut {
    /// Its id (for `pipeline?groups=`).
    pub seq: u32,
    /// Interned record_type.
    pub rtype: u32,
    /// The parent's id, or null for roots.
    pub parent: Option<String>,
    /// The parent's name and lane (what the group runs on).
    pub label: String,
    /// Records in it.
    pub count: u64,
}

/// A trace that is a part of its run (`summary.capture`, VW-CAP-1): what the page says of it, and
/// the cycle window its setting selects, which the timeline marks.
#[derive(Serialize)]
pub struct CaptureOut {
    /// The setting as the footer spells it.
    pub setting: String,
    /// One line for the status bar ([`jets::capture::FooterCapture::describe`]).
    pub text: String,
    /// The header's badge: `part of the run`, or, for a file that holds no line of the run,
    /// `counted, not written` (`count`) or `compiled out`.
    pub badge: &'static str,
    /// The `clk=A..B` window, as numbers (`null` without one).
    pub window: Option<(u64, u64)>,
    /// The window's period (`every=P`), `null` when it does not repeat.
    pub every: Option<u64>,
    /// The last cycle of the file's lines when a size limit stopped capture there (CAP-LIM-1):
    /// the run went on past it, its lines not written. `null` otherwise.
    pub stopped_at: Option<u64>,
}

impl CaptureOut {
    /// What the footer says of capture; `last_line` is the last cycle of the file's lines.
    fn read(footer: &jets::format::Footer, last_line: u64) -> Option<CaptureOut> {
        let c = jets::capture::FooterCapture::read(footer)?;
        let setting = c.setting();
        let window = setting.as_ref().and_then(|s| s.window.clone()).map(|w| (w.start, w.end));
        let badge = if c.compiled_out() {
            "compiled out"
        } else if c.counted.is_some() {
            "counted, not written"
        } else {
            "part of the run"
        };
        Some(CaptureOut {
            text: c.describe(),
            badge,
            window,
            every: setting.and_then(|s| s.every),
            stopped_at: c.limit_reached.then_some(last_line),
            setting: c.spelled,
        })
    }
}

/// `summary`: header, extent, counts, lanes, types, pipeline groups, vocabularies, build state.
#[derive(Serialize)]
pub struct Summary {
    /// The trace's path.
    pub file: String,
    /// The index version.
    pub version: u64,
    /// The header's metadata.
    pub metadata: Option<serde_json::Map<String, serde_json::Value>>,
    /// Whether the footer was read.
    pub footer: bool,
    /// What the footer says of capture control, when the trace is a part of the run (VW-CAP-1).
    pub capture: Option<CaptureOut>,
    /// First and last cycle.
    pub extent: (u64, u64),
    /// Counts.
    pub counts: CountsOut,
    /// First line errors.
    pub errors: Vec<String>,
    /// Record types.
    pub types: Vec<TypeOut>,
    /// Interned icons.
    pub icons: Vec<String>,
    /// Interned event names.
    pub event_names: Vec<String>,
    /// Lanes.
    pub lanes: Vec<LaneOut>,
    /// Pipeline groups.
    pub groups: Vec<GroupOut>,
    /// The record_type the pipeline view shows first (VW-PIPE-1).
    pub pipeline_type: Option<u32>,
    /// Field names of the compact types.
    pub layouts: Layouts,
    /// The vocabulary lists.
    pub vocab: Vocab,
    /// Still following a growing file.
    pub following: bool,
    /// Indexing is finished.
    pub done: bool,
    /// Reading failed.
    pub build_error: Option<String>,
    /// Something the user should know.
    pub note: Option<String>,
}

fn names(list: &[Box<str>]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

/// The lane's label: what runs there (a root's name, else the record_type of its first record)
/// and its ids (VW-LANE-2).
fn lane_label(ix: &Index, lane: u32) -> String {
    let l = &ix.lanes[lane as usize];
    if l.key.host {
        return "host process".to_owned();
    }
    let first = l.first;
    let r = ix.recs[first as usize];
    let what = if r.parent == NONE {
        ix.names.get(r.name).to_owned()
    } else {
        ix.types.get(ix.look(first).rtype).to_owned()
    };
    let ids = l.key.ids();
    match (what.is_empty(), ids.is_empty()) {
        (true, true) => "records".to_owned(),
        (false, true) => what,
        (true, false) => ids,
        (false, false) => format!("{what} · {ids}"),
    }
}

/// `summary`.
pub fn summary(shared: &Shared) -> Result<Summary, ApiError> {
    let state = shared.state();
    let ix = lock(shared)?;
    let c = ix.counts;
    let groups = (0..ix.seqs.len() as u32)
        .map(|s| {
            let seq = &ix.seqs[s as usize];
            let (parent, label) = match seq.parent {
                NONE => (None, "roots".to_owned()),
                p => {
                    let r = ix.recs[p as usize];
                    let lane = ix.rows[r.row as usize].lane;
                    let ids = ix.lanes[lane as usize].key.ids();
                    let name = ix.names.get(r.name);
                    let label =
                        if ids.is_empty() { name.to_owned() } else { format!("{name} · {ids}") };
                    (Some(ix.rec_id(p).to_string()), label)
                }
            };
            GroupOut { seq: s, rtype: seq.rtype, parent, label, count: seq.recs.len() as u64 }
        })
        .collect();
    let extent = (ix.first_clk.unwrap_or(0), ix.now().max(ix.first_clk.unwrap_or(0)));
    Ok(Summary {
        file: shared.path.display().to_string(),
        version: ix.version,
        metadata: ix.metadata.clone(),
        footer: ix.footer.is_some(),
        capture: ix.footer.as_ref().and_then(|f| CaptureOut::read(f, ix.last_clk)),
        extent,
        counts: CountsOut {
            lines: c.lines,
            records: c.records,
            open: c.open,
            events: c.events,
            annotations: c.annotations,
            errors: c.errors,
            host_samples: ix.host.len() as u64,
            index_bytes: ix.memory_bytes() as u64,
        },
        errors: ix.errors.clone(),
        types: ix
            .types
            .names
            .iter()
            .zip(&ix.type_counts)
            .map(|(n, &count)| TypeOut { name: n.to_string(), count })
            .collect(),
        icons: names(&ix.icons.names),
        event_names: names(&ix.event_names.names),
        lanes: ix
            .row_order()
            .into_iter()
            .map(|(lane, rows)| LaneOut {
                label: lane_label(&ix, lane),
                host: ix.lanes[lane as usize].key.host,
                rows: rows.iter().map(|&r| (r, ix.rows[r as usize].depth)).collect(),
            })
            .collect(),
        groups,
        pipeline_type: ix.pipeline_type(),
        layouts: Layouts {
            bar: BarOut::FIELDS,
            marker: MarkerOut::FIELDS,
            stage: StageOut::FIELDS,
            sample: SampleOut::FIELDS,
            speed: SpeedOut::FIELDS,
        },
        vocab: Vocab::new(),
        following: state.following,
        done: state.done,
        build_error: state.error,
        note: [state.note, rounding_note(extent.1)]
            .into_iter()
            .flatten()
            .reduce(|a, b| a + "; " + &b),
    })
}

/// The largest integer up to which a browser's numbers (IEEE doubles) hold every integer.
const PAGE_EXACT: u64 = 1 << 53;

/// What the page must say of a trace whose cycles reach `last` (VW-NUM-1): past 2^53 its
/// numbers hold only every 2nd, 4th, … cycle, so cycles shown and bar positions are rounded.
fn rounding_note(last: u64) -> Option<String> {
    (last > PAGE_EXACT).then(|| {
        // The spacing of doubles at `last`: 2^(bits of `last` - 53).
        let step = 1u64 << (64 - last.leading_zeros() - 53);
        format!(
            "cycles reach {last}, past 2^53: this page's numbers hold them to the nearest {step} \
             cycles, so cycles shown here are rounded (jets stats and jets tree give them exactly)"
        )
    })
}

/// The short text shown on a bar: `display_label`, else the name.
pub fn bar_label(shared: &Shared, offset: u64) -> Option<String> {
    let bytes = shared.store.line(offset).ok()?;
    match Line::parse(std::str::from_utf8(&bytes).ok()?).ok()? {
        Line::Record(r) => {
            Some(r.hints().display_label.map(str::to_owned).unwrap_or_else(|| r.name.into_owned()))
        }
        _ => None,
    }
}

/// Bars and markers of one row.
#[derive(Serialize)]
pub struct RowOut {
    /// The row (a record id in tree mode).
    pub row: String,
    /// Bars and clusters.
    pub bars: Vec<BarOut>,
    /// Markers.
    pub markers: Vec<MarkerOut>,
}

/// A `window` or `bars` answer.
#[derive(Serialize)]
pub struct WindowOut {
    /// The index version.
    pub version: u64,
    /// The last cycle seen.
    pub now: u64,
    /// The rows.
    pub rows: Vec<RowOut>,
}

fn window_params(p: &Params) -> Result<(u64, u64, u32), ApiError> {
    let t0: u64 = num(p, "t0")?.unwrap_or(0);
    let t1: u64 = num(p, "t1")?.ok_or_else(|| bad("`t1` is required"))?;
    if t1 <= t0 {
        return Err(bad(format!("empty window: t1 ({t1}) must be greater than t0 ({t0})")));
    }
    let px: u32 = num(p, "px")?.unwrap_or(1000).clamp(1, 16384);
    Ok((t0, t1, px))
}

fn list<T: std::str::FromStr>(p: &Params, key: &str, max: usize) -> Result<Vec<T>, ApiError> {
    match p.get(key).map(String::as_str) {
        None | Some("") => Ok(Vec::new()),
        Some(list) => list
            .split(',')
            .take(max)
            .map(|r| r.trim().parse().map_err(|_| bad(format!("bad `{key}` entry {r:?}"))))
            .collect(),
    }
}

/// `window?t0=&t1=&px=&rows=1,2,3`: bars, clusters and markers of the rows in `[t0, t1)`.
pub fn window(shared: &Shared, p: &Params) -> Result<WindowOut, ApiError> {
    let (t0, t1, px) = window_params(p)?;
    let rows: Vec<u32> = list(p, "rows", 100_000)?;
    let ix = lock(shared)?;
    Ok(window_of(shared, &ix, t0, t1, px, &rows, false))
}

/// A window answer; `all_labels` reads the label of every bar (for `jets gantt`, whose page draws
/// labels at any zoom without asking again).
pub fn window_of(
    shared: &Shared,
    ix: &Index,
    t0: u64,
    t1: u64,
    px: u32,
    rows: &[u32],
    all_labels: bool,
) -> WindowOut {
    let cpp = (t1 - t0) as f64 / f64::from(px);
    let mut labels = 0usize;
    let rows = ix
        .window(t0, t1, px, rows)
        .into_iter()
        .map(|rw| RowOut {
            row: rw.row.to_string(),
            bars: rw
                .items
                .iter()
                .map(|it| {
                    let wide = it.count == 1 && (it.end - it.start) as f64 >= LABEL_MIN_PX * cpp;
                    let label = if all_labels || (wide && labels < MAX_LABELS) {
                        labels += 1;
                        bar_label(shared, ix.rec_offset(it.rec))
                    } else {
                        None
                    };
                    bar_out(ix, it, label)
                })
                .collect(),
            markers: rw.markers.iter().map(|m| marker_out(ix, m)).collect(),
        })
        .collect();
    WindowOut { version: ix.version, now: ix.now(), rows }
}

/// One bar of an answer.
pub fn bar_out(ix: &Index, it: &Item, label: Option<String>) -> BarOut {
    let look = ix.look(it.rec);
    BarOut {
        start: it.start,
        end: it.end,
        id: ix.rec_id(it.rec).to_string(),
        rtype: look.rtype,
        color: (look.color != 0).then_some(look.color & 0xff_ffff),
        status: wire_code(look.status),
        crit: (look.crit <= 255).then(|| f64::from(look.crit) / 255.0),
        count: it.count,
        open: it.open,
        label,
    }
}

/// One marker of an answer.
pub fn marker_out(ix: &Index, m: &Marker) -> MarkerOut {
    let k = ix.kind(m.ev);
    MarkerOut {
        clk: m.clk,
        ev: m.ev,
        count: m.count,
        style: wire_code(k.style),
        severity: wire_code(m.severity),
        color: (k.color != 0).then_some(k.color & 0xff_ffff),
        icon: (k.icon != NONE).then_some(k.icon),
        record: ix.rec_id(ix.evs[m.ev as usize].rec).to_string(),
        name: k.name,
    }
}

fn record_ref(p: &Params, ix: &Index, key: &str) -> Result<Option<u32>, ApiError> {
    match num::<u64>(p, key)? {
        None => Ok(None),
        Some(id) => {
            ix.rec_by_id(id).map(Some).ok_or_else(|| not_found(format!("no record with id {id}")))
        }
    }
}

/// A tree node.
#[derive(Serialize)]
pub struct Node {
    /// Record id.
    pub id: String,
    /// Parent id.
    pub parent: Option<String>,
    /// Name.
    pub name: String,
    /// record_type.
    #[serde(rename = "type")]
    pub rtype: String,
    /// Start cycle.
    pub start: u64,
    /// End cycle, null while open.
    pub end: Option<u64>,
    /// Its row in lanes mode.
    pub row: u32,
    /// Whether it has children.
    pub has_children: bool,
    /// `Status::code()`.
    pub status: Option<u8>,
}

/// The tree node of a record.
pub fn node(ix: &Index, rec: u32) -> Node {
    let r = ix.recs[rec as usize];
    let bar = ix.bar(rec);
    let look = ix.look(rec);
    Node {
        id: ix.rec_id(rec).to_string(),
        parent: (r.parent != NONE).then(|| ix.rec_id(r.parent).to_string()),
        name: ix.names.get(r.name).to_owned(),
        rtype: ix.types.get(look.rtype).to_owned(),
        start: bar.start,
        end: bar.end,
        row: r.row,
        has_children: ix.has_children(rec),
        status: wire_code(look.status),
    }
}

/// A page of children.
#[derive(Serialize)]
pub struct ChildrenOut {
    /// The children.
    pub children: Vec<Node>,
    /// Whether another page follows.
    pub more: bool,
}

/// `children?parent=ID&after=ID&limit=N`: a page of a record's children (the roots without
/// `parent`) in file order.
pub fn children(shared: &Shared, p: &Params) -> Result<ChildrenOut, ApiError> {
    let ix = lock(shared)?;
    let parent = record_ref(p, &ix, "parent")?;
    let after = record_ref(p, &ix, "after")?;
    let limit: usize = num(p, "limit")?.unwrap_or(200).clamp(1, 5000);
    let mut page = ix.children(parent, after, limit + 1);
    let more = page.len() > limit;
    page.truncate(limit);
    Ok(ChildrenOut { children: page.iter().map(|&c| node(&ix, c)).collect(), more })
}

/// Nodes.
#[derive(Serialize)]
pub struct NodesOut {
    /// The nodes of the known ids.
    pub nodes: Vec<Node>,
}

/// `nodes?ids=1,2,3`: the tree nodes of records as they are now (a live page refreshes the ends
/// and expand arrows of what it shows).
pub fn nodes(shared: &Shared, p: &Params) -> Result<NodesOut, ApiError> {
    let ids: Vec<u64> = list(p, "ids", 5000)?;
    let ix = lock(shared)?;
    Ok(NodesOut {
        nodes: ids.iter().filter_map(|&id| ix.rec_by_id(id)).map(|r| node(&ix, r)).collect(),
    })
}

/// A line of the trace as it is (it parsed when it was indexed; checked again here).
pub fn raw_line(shared: &Shared, offset: u64) -> Box<RawValue> {
    let error = |message: &str| {
        let text = serde_json::to_string(&ErrorBody { error: message }).unwrap_or_default();
        RawValue::from_string(text).unwrap_or_else(|_| Box::default())
    };
    let bytes = match shared.store.line(offset) {
        Ok(b) => b,
        Err(e) => return error(&e.to_string()),
    };
    let text = String::from_utf8_lossy(&bytes).trim_end().to_owned();
    RawValue::from_string(text).unwrap_or_else(|e| error(&format!("the line changed on disk: {e}")))
}

/// A record's details.
#[derive(Serialize)]
pub struct RecordOut {
    /// Record id.
    pub id: String,
    /// Its line.
    pub line: Box<RawValue>,
    /// record_type.
    #[serde(rename = "type")]
    pub rtype: String,
    /// Start cycle.
    pub start: u64,
    /// End cycle.
    pub end: Option<u64>,
    /// Duration.
    pub duration: Option<u64>,
    /// Parent id.
    pub parent: Option<String>,
    /// Status.
    pub status: Option<&'static str>,
    /// Row in lanes mode.
    pub row: u32,
    /// Lane label.
    pub lane: String,
    /// Annotation lines (the first ones).
    pub annotations: Vec<Box<RawValue>>,
    /// How many annotations.
    pub annotations_total: u64,
    /// Event lines (the first ones).
    pub events: Vec<Box<RawValue>>,
    /// How many events.
    pub events_total: u64,
}

/// `record?id=ID`: the record's line, duration, parent, annotations and events.
pub fn record(shared: &Shared, p: &Params) -> Result<RecordOut, ApiError> {
    let ix = lock(shared)?;
    let rec = record_ref(p, &ix, "id")?.ok_or_else(|| bad("`id` is required"))?;
    Ok(record_of(shared, &ix, rec))
}

/// The details of one record.
pub fn record_of(shared: &Shared, ix: &Index, rec: u32) -> RecordOut {
    let r = ix.recs[rec as usize];
    let bar = ix.bar(rec);
    let end = bar.end;
    let anns = ix.annotations_of(rec);
    let evs = ix.events_of(rec, MAX_DETAIL_LINES);
    RecordOut {
        id: ix.rec_id(rec).to_string(),
        line: raw_line(shared, ix.rec_offset(rec)),
        rtype: ix.types.get(ix.look(rec).rtype).to_owned(),
        start: bar.start,
        end,
        duration: end.map(|e| e - bar.start),
        parent: (r.parent != NONE).then(|| ix.rec_id(r.parent).to_string()),
        status: wire_code(ix.look(rec).status)
            .and_then(|c| Status::ALL.get(usize::from(c)))
            .map(|s| s.as_str()),
        row: r.row,
        lane: lane_label(ix, ix.rows[r.row as usize].lane),
        annotations: anns.iter().take(MAX_DETAIL_LINES).map(|&o| raw_line(shared, o)).collect(),
        annotations_total: anns.len() as u64,
        events: evs.iter().map(|&e| raw_line(shared, ix.ev_offset(e))).collect(),
        events_total: u64::from(r.n_ev),
    }
}

/// A search hit: a record, and the event that matched (if an event name matched).
#[derive(Serialize)]
pub struct Hit {
    /// The record.
    #[serde(flatten)]
    pub node: Node,
    /// The cycle to jump to: the event's, else the record's start.
    pub clk: u64,
    /// The name of the event that matched.
    pub event: Option<String>,
}

/// Search results.
#[derive(Serialize)]
pub struct SearchOut {
    /// Hits: records first, then events, each in file order.
    pub results: Vec<Hit>,
    /// Whether every hit is listed.
    pub complete: bool,
}

/// `search?q=TEXT&limit=N`: records whose name or record_type, and events whose name, contains
/// TEXT (ignoring case). Everything is matched in the index: the interned strings first, so a
/// text that matches none answers at once; then the records and events of the matching ones.
pub fn search(shared: &Shared, p: &Params) -> Result<SearchOut, ApiError> {
    let q = p.get("q").map(|s| s.trim()).unwrap_or("");
    if q.is_empty() {
        return Err(bad("`q` is required"));
    }
    let limit: usize = num(p, "limit")?.unwrap_or(100).clamp(1, 1000);
    let lower = q.to_lowercase();
    let ix = lock(shared)?;
    let names = ix.names.matching(&lower);
    let types = ix.types.matching(&lower);
    let looks: Vec<bool> = ix.looks.items.iter().map(|l| types[l.rtype as usize]).collect();
    let event_names = ix.event_names.matching(&lower);
    let kinds: Vec<bool> = ix.kinds.items.iter().map(|k| event_names[k.name as usize]).collect();
    let mut results = Vec::new();
    let mut complete = true;
    if names.iter().any(|&b| b) || looks.iter().any(|&b| b) {
        for (i, r) in ix.recs.iter().enumerate() {
            if names[r.name as usize] || looks[r.look as usize] {
                if results.len() == limit {
                    complete = false;
                    break;
                }
                let node = node(&ix, i as u32);
                results.push(Hit { clk: node.start, node, event: None });
            }
        }
    }
    if complete && kinds.iter().any(|&b| b) {
        for (i, e) in ix.evs.iter().enumerate() {
            if kinds[ix.kind_id(i as u32) as usize] {
                if results.len() == limit {
                    complete = false;
                    break;
                }
                let name = ix.event_names.get(ix.kind(i as u32).name).to_owned();
                let clk = ix.ev_clk(i as u32);
                results.push(Hit { node: node(&ix, e.rec), clk, event: Some(name) });
            }
        }
    }
    Ok(SearchOut { results, complete })
}

/// Host tracks.
#[derive(Serialize)]
pub struct HostOut {
    /// Samples.
    pub samples: Vec<SampleOut>,
    /// Speed per interval.
    pub speed: Vec<SpeedOut>,
    /// Why the speed could not be computed.
    pub error: Option<String>,
}

/// `host`: host samples and simulation speed per interval, from the HostSync events.
pub fn host(shared: &Shared) -> Result<HostOut, ApiError> {
    let ix = lock(shared)?;
    let samples = ix
        .host
        .iter()
        .map(|s| SampleOut {
            clk: s.point.clk,
            mono_ns: s.point.mono_ns,
            cpu_usage: s.cpu_usage,
            mem_rss_kb: s.mem_rss_kb,
        })
        .collect();
    let (mut speed, mut error) = (Vec::new(), None);
    if ix.host.len() >= 2 {
        match ClockMap::new(ix.host.iter().map(|s| s.point).collect()) {
            Ok(map) => {
                speed = map
                    .speed(&[])
                    .iter()
                    .map(|s| SpeedOut {
                        start_clk: s.start_clk,
                        end_clk: s.end_clk,
                        cycles_per_sec: s.cycles_per_sec,
                        cpu_utilization: s.cpu_utilization,
                    })
                    .collect();
            }
            Err(e) => error = Some(e.to_string()),
        }
    }
    Ok(HostOut { samples, speed, error })
}

/// `bars?ids=1,2&t0=&t1=&px=`: each record's own bar and event markers in `[t0, t1)`, for the
/// timeline's tree mode (one row per record; `row` is the record id).
pub fn bars(shared: &Shared, p: &Params) -> Result<WindowOut, ApiError> {
    let (t0, t1, px) = window_params(p)?;
    let cpp = (t1 - t0) as f64 / f64::from(px);
    let ids: Vec<u64> = list(p, "ids", 2000)?;
    let ix = lock(shared)?;
    let rows = ids
        .into_iter()
        .filter_map(|id| ix.rec_by_id(id).map(|rec| (id, rec)))
        .map(|(id, rec)| {
            let bar = ix.bar(rec);
            let end = bar.end.unwrap_or(ix.now().max(bar.start));
            let mut bars = Vec::new();
            if before_end(bar.start, t1) && end >= t0 {
                let it = Item { start: bar.start, end, rec, count: 1, open: bar.end.is_none() };
                let wide = (end - bar.start) as f64 >= LABEL_MIN_PX * cpp;
                let label = if wide { bar_label(shared, ix.rec_offset(rec)) } else { None };
                bars.push(bar_out(&ix, &it, label));
            }
            let evs = ix.events_of(rec, usize::MAX);
            let markers = ix.markers_of(&evs, t0, t1, cpp * MARKER_PX);
            RowOut {
                row: id.to_string(),
                bars,
                markers: markers.iter().map(|m| marker_out(&ix, m)).collect(),
            }
        })
        .collect();
    Ok(WindowOut { version: ix.version, now: ix.now(), rows })
}

/// One instruction of the pipeline view.
#[derive(Serialize)]
pub struct PipeRow {
    /// Its position in the group (program order).
    pub k: u64,
    /// Record id.
    pub id: String,
    /// Name (e.g. the disassembly).
    pub name: String,
    /// Start cycle.
    pub start: u64,
    /// End cycle (the last cycle seen while open).
    pub end: u64,
    /// Still open.
    pub open: bool,
    /// `Status::code()` (a flushed instruction is drawn so).
    pub status: Option<u8>,
    /// Its stages (events without severity) in cycle order.
    pub stages: Vec<StageOut>,
    /// Its other events, merged within 8 pixels.
    pub markers: Vec<MarkerOut>,
}

/// A range of a group's rows.
#[derive(Serialize)]
pub struct PipeGroup {
    /// The group (sequence).
    pub seq: u32,
    /// The rows.
    pub rows: Vec<PipeRow>,
}

/// A `pipeline` answer.
#[derive(Serialize)]
pub struct PipelineOut {
    /// The index version.
    pub version: u64,
    /// The last cycle seen.
    pub now: u64,
    /// The groups asked for.
    pub groups: Vec<PipeGroup>,
}

/// `pipeline?t0=&t1=&px=&groups=SEQ:FIRST:COUNT,...`: rows `FIRST..FIRST+COUNT` of each group,
/// one per record in program order, with stages and markers (VW-PIPE-1, VW-PIPE-2).
pub fn pipeline(shared: &Shared, p: &Params) -> Result<PipelineOut, ApiError> {
    let (t0, t1, px) = window_params(p)?;
    let cpp = (t1 - t0) as f64 / f64::from(px);
    let ranges: Vec<String> = list(p, "groups", 64)?;
    let ix = lock(shared)?;
    let mut budget = MAX_PIPE_ROWS;
    let mut groups = Vec::new();
    for r in ranges {
        let parts: Vec<u64> = r.split(':').filter_map(|x| x.parse().ok()).collect();
        let [seq, first, count] = parts[..] else {
            return Err(bad(format!("bad group range {r:?} (SEQ:FIRST:COUNT)")));
        };
        let seq = u32::try_from(seq).map_err(|_| bad("bad group"))?;
        let Some(s) = ix.seqs.get(seq as usize) else {
            return Err(not_found(format!("no group {seq}")));
        };
        let from = (first as usize).min(s.recs.len());
        let to = from.saturating_add((count as usize).min(budget)).min(s.recs.len());
        budget -= to - from;
        let rows = pipe_rows(&ix, seq, from..to, cpp);
        groups.push(PipeGroup { seq, rows });
    }
    Ok(PipelineOut { version: ix.version, now: ix.now(), groups })
}

/// Rows `range` of group `seq` of the pipeline view: each instruction with its stages and its
/// other events as markers merged for `cpp` cycles per pixel. `jets view` answers
/// `api/pipeline` with it, and `jets gantt` writes every row with it.
pub fn pipe_rows(ix: &Index, seq: u32, range: std::ops::Range<usize>, cpp: f64) -> Vec<PipeRow> {
    let s = &ix.seqs[seq as usize];
    range
        .map(|k| {
            let rec = s.recs[k];
            let r = ix.recs[rec as usize];
            let bar = ix.bar(rec);
            let evs = ix.events_of(rec, usize::MAX);
            let (mut stages, mut others) = (Vec::new(), Vec::new());
            for e in evs {
                let kind = ix.kind(e);
                if kind.is_stage() {
                    stages.push(StageOut { clk: ix.ev_clk(e), name: kind.name });
                } else {
                    others.push(e);
                }
            }
            stages.sort_by_key(|s| s.clk);
            let markers = ix.markers_of(&others, 0, u64::MAX, cpp * MARKER_PX);
            PipeRow {
                k: k as u64,
                id: ix.rec_id(rec).to_string(),
                name: ix.names.get(r.name).to_owned(),
                start: bar.start,
                end: bar.end.unwrap_or(ix.now().max(bar.start)),
                open: bar.end.is_none(),
                status: wire_code(ix.look(rec).status),
                stages,
                markers: markers.iter().map(|m| marker_out(ix, m)).collect(),
            }
        })
        .collect()
}

/// Where a jump lands.
#[derive(Serialize)]
pub struct JumpOut {
    /// Per group of the type: `[seq, k]`, the first row starting at or after the cycle.
    pub rows: Vec<(u32, u64)>,
}

/// `jump?type=T&clk=C`: for each group of record_type `T`, the first row that starts at or after
/// cycle `C` (a binary search: instant at any size; VW-PIPE-3).
pub fn jump(shared: &Shared, p: &Params) -> Result<JumpOut, ApiError> {
    let rtype: u32 = num(p, "type")?.ok_or_else(|| bad("`type` is required"))?;
    let clk: u64 = num(p, "clk")?.ok_or_else(|| bad("`clk` is required"))?;
    let ix = lock(shared)?;
    Ok(JumpOut {
        rows: ix.seqs_of_type(rtype).into_iter().map(|s| (s, ix.seq_find(s, clk) as u64)).collect(),
    })
}
