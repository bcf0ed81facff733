//! The viewer's JSON API: one function per endpoint, from query parameters to a JSON body.
//!
//! Everything is written with the SDK's JSON encoder (`jets::format::json`), so every string from
//! the trace leaves escaped. Record ids are sent as strings (u64 does not fit a JavaScript number);
//! cycles are sent as numbers.

use std::collections::HashMap;

use jets::format::json::{write_f64, write_key, write_str, write_u64};
use jets::format::Line;
use jets_host::sync::ClockMap;
use serde_json::value::RawValue;

use super::build::Shared;
use super::index::{Ev, Index, Item, NONE, OPEN};

/// Labels are read back from the trace only for bars at least this many pixels wide.
const LABEL_MIN_PX: f64 = 24.0;
/// At most this many labels per window answer.
const MAX_LABELS: usize = 4000;
/// At most this many events or annotations in a record's details.
const MAX_DETAIL_LINES: usize = 1000;

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

/// Answers `GET /api/NAME?params`.
pub fn handle(shared: &Shared, name: &str, p: &Params) -> Result<Vec<u8>, ApiError> {
    match name {
        "summary" => summary(shared),
        "window" => window(shared, p),
        "children" => children(shared, p),
        "record" => record(shared, p),
        "search" => search(shared, p),
        "host" => host(shared),
        "bars" => bars(shared, p),
        _ => Err(not_found(format!("no API endpoint {name:?}"))),
    }
}

fn color_json(out: &mut Vec<u8>, c: u32) {
    if c == 0 {
        out.extend_from_slice(b"null");
    } else {
        write_u64(out, u64::from(c & 0xff_ffff));
    }
}

fn opt_u64(out: &mut Vec<u8>, v: Option<u64>) {
    match v {
        Some(v) => write_u64(out, v),
        None => out.extend_from_slice(b"null"),
    }
}

fn id_json(out: &mut Vec<u8>, id: u64) {
    write_str(out, &id.to_string());
}

/// One event marker as the page reads it: `[clk, event, count, style, severity, color, icon,
/// record id]`; `count` > 1 when nearby events were merged into it.
fn marker_json(out: &mut Vec<u8>, clk: u64, ev: u32, count: u64, e: &Ev, record_id: u64) {
    out.push(b'[');
    for v in [clk, u64::from(ev), count, e.style.into(), e.severity.into()] {
        write_u64(out, v);
        out.push(b',');
    }
    color_json(out, e.color);
    out.push(b',');
    if e.icon == NONE {
        out.extend_from_slice(b"null");
    } else {
        write_u64(out, u64::from(e.icon));
    }
    out.push(b',');
    id_json(out, record_id);
    out.push(b']');
}

/// `summary`: header, extent, counts, lanes and their rows, record types, build state.
pub fn summary(shared: &Shared) -> Result<Vec<u8>, ApiError> {
    let state = shared.state();
    let ix = lock(shared)?;
    let mut o = Vec::with_capacity(4096);
    o.push(b'{');
    o.extend_from_slice(b"\"file\":");
    write_str(&mut o, &shared.path.display().to_string());
    write_key(&mut o, "version");
    write_u64(&mut o, ix.version);
    write_key(&mut o, "metadata");
    match &ix.metadata {
        Some(m) => jets::format::json::write_object(&mut o, m),
        None => o.extend_from_slice(b"null"),
    }
    write_key(&mut o, "footer");
    o.extend_from_slice(if ix.footer.is_some() { b"true" } else { b"false" });
    write_key(&mut o, "extent");
    o.push(b'[');
    write_u64(&mut o, ix.first_clk.unwrap_or(0));
    o.push(b',');
    write_u64(&mut o, ix.now().max(ix.first_clk.unwrap_or(0)));
    o.push(b']');
    let c = ix.counts;
    write_key(&mut o, "counts");
    o.push(b'{');
    for (i, (k, v)) in [
        ("lines", c.lines),
        ("records", c.records),
        ("open", c.open),
        ("events", c.events),
        ("annotations", c.annotations),
        ("errors", c.errors),
        ("host_samples", ix.host.len() as u64),
        ("index_bytes", ix.memory_bytes() as u64),
    ]
    .into_iter()
    .enumerate()
    {
        if i > 0 {
            o.push(b',');
        }
        write_str(&mut o, k);
        o.push(b':');
        write_u64(&mut o, v);
    }
    o.push(b'}');
    write_key(&mut o, "errors");
    string_list(&mut o, &ix.errors);
    write_key(&mut o, "types");
    o.push(b'[');
    for (i, name) in ix.types.names.iter().enumerate() {
        if i > 0 {
            o.push(b',');
        }
        o.extend_from_slice(b"{\"name\":");
        write_str(&mut o, name);
        write_key(&mut o, "count");
        write_u64(&mut o, ix.type_counts[i]);
        o.push(b'}');
    }
    o.push(b']');
    write_key(&mut o, "icons");
    string_list(&mut o, &ix.icons.names);
    write_key(&mut o, "lanes");
    o.push(b'[');
    for (i, (lane, rows)) in ix.row_order().into_iter().enumerate() {
        if i > 0 {
            o.push(b',');
        }
        let key = ix.lanes[lane as usize].key;
        o.extend_from_slice(b"{\"label\":");
        write_str(&mut o, &key.label());
        write_key(&mut o, "host");
        o.extend_from_slice(if key.host { b"true" } else { b"false" });
        write_key(&mut o, "rows");
        o.push(b'[');
        for (j, r) in rows.iter().enumerate() {
            if j > 0 {
                o.push(b',');
            }
            o.push(b'[');
            write_u64(&mut o, u64::from(*r));
            o.push(b',');
            write_u64(&mut o, u64::from(ix.rows[*r as usize].depth));
            o.push(b']');
        }
        o.extend_from_slice(b"]}");
    }
    o.push(b']');
    drop(ix);
    write_key(&mut o, "following");
    o.extend_from_slice(if state.following { b"true" } else { b"false" });
    write_key(&mut o, "done");
    o.extend_from_slice(if state.done { b"true" } else { b"false" });
    for (k, v) in [("build_error", &state.error), ("note", &state.note)] {
        write_key(&mut o, k);
        match v {
            Some(t) => write_str(&mut o, t),
            None => o.extend_from_slice(b"null"),
        }
    }
    o.push(b'}');
    Ok(o)
}

fn string_list(o: &mut Vec<u8>, items: &[String]) {
    o.push(b'[');
    for (i, s) in items.iter().enumerate() {
        if i > 0 {
            o.push(b',');
        }
        write_str(o, s);
    }
    o.push(b']');
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

/// `window?t0=&t1=&px=&rows=1,2,3`: bars, clusters and markers of the rows in `[t0, t1)`.
///
/// A bar is `[start, end, id, type, color, status, crit, count, open, label]`: `count` > 1 makes
/// it a cluster of records closer than a pixel (id and type are then the first one's); `label`
/// is `null` for bars too narrow to show one. A marker is
/// `[clk, event, count, style, severity, color, icon, record id]`.
pub fn window(shared: &Shared, p: &Params) -> Result<Vec<u8>, ApiError> {
    let t0: u64 = num(p, "t0")?.unwrap_or(0);
    let t1: u64 = num(p, "t1")?.ok_or_else(|| bad("`t1` is required"))?;
    if t1 <= t0 {
        return Err(bad(format!("empty window: t1 ({t1}) must be greater than t0 ({t0})")));
    }
    let px: u32 = num(p, "px")?.unwrap_or(1000).clamp(1, 16384);
    let rows: Vec<u32> = match p.get("rows").map(String::as_str) {
        None | Some("") => Vec::new(),
        Some(list) => list
            .split(',')
            .map(|r| r.trim().parse().map_err(|_| bad(format!("bad row number {r:?}"))))
            .collect::<Result<_, _>>()?,
    };
    let ix = lock(shared)?;
    Ok(window_json(shared, &ix, t0, t1, px, &rows, false))
}

/// Writes a window answer; `all_labels` reads the label of every bar (for `jets gantt`, whose
/// page draws labels at any zoom without asking again).
pub fn window_json(
    shared: &Shared,
    ix: &Index,
    t0: u64,
    t1: u64,
    px: u32,
    rows: &[u32],
    all_labels: bool,
) -> Vec<u8> {
    let result = ix.window(t0, t1, px, rows);
    let cpp = (t1 - t0) as f64 / f64::from(px);
    let mut labels = 0usize;
    let mut o = Vec::with_capacity(64 * 1024);
    o.extend_from_slice(b"{\"version\":");
    write_u64(&mut o, ix.version);
    write_key(&mut o, "now");
    write_u64(&mut o, ix.now());
    write_key(&mut o, "rows");
    o.push(b'[');
    for (i, rw) in result.iter().enumerate() {
        if i > 0 {
            o.push(b',');
        }
        o.extend_from_slice(b"{\"row\":");
        write_u64(&mut o, u64::from(rw.row));
        write_key(&mut o, "bars");
        o.push(b'[');
        for (j, it) in rw.items.iter().enumerate() {
            if j > 0 {
                o.push(b',');
            }
            let wide = it.count == 1 && (it.end - it.start) as f64 >= LABEL_MIN_PX * cpp;
            let label = if all_labels || (wide && labels < MAX_LABELS) {
                labels += 1;
                bar_label(shared, ix.recs[it.rec as usize].offset)
            } else {
                None
            };
            bar_json(&mut o, ix, it, label.as_deref());
        }
        o.extend_from_slice(b"],\"markers\":[");
        for (j, m) in rw.markers.iter().enumerate() {
            if j > 0 {
                o.push(b',');
            }
            let e = &ix.evs[m.ev as usize];
            marker_json(&mut o, m.clk, m.ev, u64::from(m.count), e, ix.recs[e.rec as usize].id);
        }
        o.extend_from_slice(b"]}");
    }
    o.extend_from_slice(b"]}");
    o
}

/// One bar of a window answer (see [`window`]).
pub fn bar_json(o: &mut Vec<u8>, ix: &Index, it: &Item, label: Option<&str>) {
    let r = &ix.recs[it.rec as usize];
    o.push(b'[');
    write_u64(o, it.start);
    o.push(b',');
    write_u64(o, it.end);
    o.push(b',');
    id_json(o, r.id);
    o.push(b',');
    write_u64(o, u64::from(r.rtype));
    o.push(b',');
    color_json(o, r.color);
    o.push(b',');
    write_u64(o, u64::from(r.status));
    o.push(b',');
    if r.crit > 255 {
        o.extend_from_slice(b"null");
    } else {
        write_f64(o, f64::from(r.crit) / 255.0);
    }
    o.push(b',');
    write_u64(o, u64::from(it.count));
    o.push(b',');
    o.push(if it.open { b'1' } else { b'0' });
    o.push(b',');
    match label {
        Some(l) => write_str(o, l),
        None => o.extend_from_slice(b"null"),
    }
    o.push(b']');
}

fn record_ref(p: &Params, ix: &Index, key: &str) -> Result<Option<u32>, ApiError> {
    match num::<u64>(p, key)? {
        None => Ok(None),
        Some(id) => {
            ix.rec_by_id(id).map(Some).ok_or_else(|| not_found(format!("no record with id {id}")))
        }
    }
}

/// A tree node: `{"id","parent","name","type","start","end","row","has_children","status"}`.
pub fn node_json(o: &mut Vec<u8>, shared: &Shared, ix: &Index, rec: u32) {
    let r = &ix.recs[rec as usize];
    let bar = ix.bar(rec);
    let name = match shared.store.line(r.offset).ok().as_deref().map(std::str::from_utf8) {
        Some(Ok(text)) => match Line::parse(text) {
            Ok(Line::Record(rec)) => rec.name.into_owned(),
            _ => String::from("(unreadable)"),
        },
        _ => String::from("(unreadable)"),
    };
    o.extend_from_slice(b"{\"id\":");
    id_json(o, r.id);
    write_key(o, "parent");
    if r.parent == NONE {
        o.extend_from_slice(b"null");
    } else {
        id_json(o, ix.recs[r.parent as usize].id);
    }
    write_key(o, "name");
    write_str(o, &name);
    write_key(o, "type");
    write_str(o, &ix.types.names[r.rtype as usize]);
    write_key(o, "start");
    write_u64(o, bar.start);
    write_key(o, "end");
    opt_u64(o, (bar.end != OPEN).then_some(bar.end));
    write_key(o, "row");
    write_u64(o, u64::from(r.row));
    write_key(o, "has_children");
    o.extend_from_slice(if r.first_child != NONE { b"true" } else { b"false" });
    write_key(o, "status");
    write_u64(o, u64::from(r.status));
    o.push(b'}');
}

/// `children?parent=ID&after=ID&limit=N`: a page of a record's children (the roots without
/// `parent`); `more` tells whether another page follows.
pub fn children(shared: &Shared, p: &Params) -> Result<Vec<u8>, ApiError> {
    let ix = lock(shared)?;
    let parent = record_ref(p, &ix, "parent")?;
    let after = record_ref(p, &ix, "after")?;
    let limit: usize = num(p, "limit")?.unwrap_or(200).clamp(1, 5000);
    let mut page = ix.children(parent, after, limit + 1);
    let more = page.len() > limit;
    page.truncate(limit);
    let mut o = Vec::with_capacity(page.len() * 128 + 32);
    o.extend_from_slice(b"{\"children\":[");
    for (i, &c) in page.iter().enumerate() {
        if i > 0 {
            o.push(b',');
        }
        node_json(&mut o, shared, &ix, c);
    }
    o.extend_from_slice(b"],\"more\":");
    o.extend_from_slice(if more { b"true" } else { b"false" });
    o.push(b'}');
    Ok(o)
}

/// Appends a line of the trace as it is (it parsed when it was indexed; checked again here).
pub fn raw_line(o: &mut Vec<u8>, shared: &Shared, offset: u64) {
    let bytes = match shared.store.line(offset) {
        Ok(b) => b,
        Err(e) => return write_error_object(o, &e.to_string()),
    };
    let text = String::from_utf8_lossy(&bytes);
    match serde_json::from_str::<&RawValue>(text.trim_end()) {
        Ok(raw) => o.extend_from_slice(raw.get().as_bytes()),
        Err(e) => write_error_object(o, &format!("the line changed on disk: {e}")),
    }
}

fn write_error_object(o: &mut Vec<u8>, message: &str) {
    o.extend_from_slice(b"{\"error\":");
    write_str(o, message);
    o.push(b'}');
}

/// `record?id=ID`: the record's line, duration, parent, annotations and events.
pub fn record(shared: &Shared, p: &Params) -> Result<Vec<u8>, ApiError> {
    let ix = lock(shared)?;
    let rec = record_ref(p, &ix, "id")?.ok_or_else(|| bad("`id` is required"))?;
    let r = ix.recs[rec as usize];
    let bar = ix.bar(rec);
    let mut o = Vec::with_capacity(4096);
    o.extend_from_slice(b"{\"id\":");
    id_json(&mut o, r.id);
    write_key(&mut o, "line");
    raw_line(&mut o, shared, r.offset);
    write_key(&mut o, "type");
    write_str(&mut o, &ix.types.names[r.rtype as usize]);
    write_key(&mut o, "start");
    write_u64(&mut o, bar.start);
    let end = (bar.end != OPEN).then_some(bar.end);
    write_key(&mut o, "end");
    opt_u64(&mut o, end);
    write_key(&mut o, "duration");
    opt_u64(&mut o, end.map(|e| e - bar.start));
    write_key(&mut o, "parent");
    if r.parent == NONE {
        o.extend_from_slice(b"null");
    } else {
        id_json(&mut o, ix.recs[r.parent as usize].id);
    }
    write_key(&mut o, "status");
    match ["", "running", "stalled", "complete", "flushed"].get(usize::from(r.status)) {
        Some(s) if !s.is_empty() => write_str(&mut o, s),
        _ => o.extend_from_slice(b"null"),
    }
    write_key(&mut o, "row");
    write_u64(&mut o, u64::from(r.row));
    write_key(&mut o, "lane");
    write_str(&mut o, &ix.lanes[ix.rows[r.row as usize].lane as usize].key.label());
    for (key, list, offsets) in
        [("annotations", ix.annotations_of(rec), false), ("events", ix.events_of(rec), true)]
    {
        write_key(&mut o, key);
        o.push(b'[');
        for (i, &x) in list.iter().take(MAX_DETAIL_LINES).enumerate() {
            if i > 0 {
                o.push(b',');
            }
            let off = if offsets { ix.evs[x as usize].offset } else { ix.anns[x as usize].offset };
            raw_line(&mut o, shared, off);
        }
        o.push(b']');
        write_key(&mut o, &format!("{key}_total"));
        write_u64(&mut o, list.len() as u64);
    }
    o.push(b'}');
    Ok(o)
}

/// `search?q=TEXT&limit=N`: records whose record_type or name contains TEXT (case-insensitive).
/// Types are matched in the index; names by scanning the trace, so this takes as long as reading
/// the file once.
pub fn search(shared: &Shared, p: &Params) -> Result<Vec<u8>, ApiError> {
    let q = p.get("q").map(|s| s.trim()).unwrap_or("");
    if q.is_empty() {
        return Err(bad("`q` is required"));
    }
    let limit: usize = num(p, "limit")?.unwrap_or(100).clamp(1, 1000);
    let lower = q.to_lowercase();
    // Types are matched under the lock (a pass over the compact records); names by reading the
    // file without it, so a long scan never holds up the indexing of a growing trace.
    let (mut hits, range) = {
        let ix = lock(shared)?;
        let types: Vec<bool> =
            ix.types.names.iter().map(|t| t.to_lowercase().contains(&lower)).collect();
        let hits: Vec<u32> = if types.iter().any(|&t| t) {
            (0..ix.recs.len() as u32)
                .filter(|&i| types[ix.recs[i as usize].rtype as usize])
                .take(limit)
                .collect()
        } else {
            Vec::new()
        };
        (hits, ix.recs.first().zip(ix.recs.last()).map(|(a, b)| (a.offset, b.offset)))
    };
    let mut scanned_all = true;
    let mut offsets = Vec::new();
    if let (true, Some((first, last))) = (hits.len() < limit, range) {
        // The needle as it is spelled inside a JSON string, lower-cased like the line.
        let mut needle = Vec::new();
        write_str(&mut needle, &lower);
        let needle = &needle[1..needle.len() - 1];
        let finder = memchr::memmem::Finder::new(needle);
        let mut lowered = Vec::new();
        let want = limit - hits.len();
        let result = shared.store.scan(first, |offset, line| {
            if offset > last {
                return false;
            }
            lowered.clear();
            lowered.extend(line.iter().map(u8::to_ascii_lowercase));
            if finder.find(&lowered).is_none() {
                return true;
            }
            let Ok(text) = std::str::from_utf8(line) else { return true };
            if let Ok(Line::Record(r)) = Line::parse(text) {
                if r.name.to_lowercase().contains(&lower) {
                    offsets.push(offset);
                }
            }
            if offsets.len() >= want {
                scanned_all = false;
                return false;
            }
            true
        });
        result.map_err(|e| internal(format!("reading the trace: {e}")))?;
    }
    let ix = lock(shared)?;
    for offset in offsets {
        let i = ix.recs.partition_point(|x| x.offset < offset);
        let known = ix.recs.get(i).is_some_and(|x| x.offset == offset);
        if known && !hits.contains(&(i as u32)) {
            hits.push(i as u32);
        }
    }
    let mut o = Vec::with_capacity(hits.len() * 128 + 64);
    o.extend_from_slice(b"{\"results\":[");
    for (i, &h) in hits.iter().take(limit).enumerate() {
        if i > 0 {
            o.push(b',');
        }
        node_json(&mut o, shared, &ix, h);
    }
    o.extend_from_slice(b"],\"complete\":");
    o.extend_from_slice(if scanned_all && hits.len() < limit { b"true" } else { b"false" });
    o.push(b'}');
    Ok(o)
}

/// `host`: host samples (`[clk, mono_ns, cpu_usage, mem_rss_kb]`) and simulation speed per
/// interval (`[start_clk, end_clk, cycles_per_sec, cpu_utilization]`), from the HostSync events.
pub fn host(shared: &Shared) -> Result<Vec<u8>, ApiError> {
    let ix = lock(shared)?;
    let mut o = Vec::with_capacity(ix.host.len() * 64 + 64);
    o.extend_from_slice(b"{\"samples\":[");
    for (i, s) in ix.host.iter().enumerate() {
        if i > 0 {
            o.push(b',');
        }
        o.push(b'[');
        write_u64(&mut o, s.point.clk);
        o.push(b',');
        write_u64(&mut o, s.point.mono_ns);
        o.push(b',');
        match s.cpu_usage {
            Some(c) => write_f64(&mut o, c),
            None => o.extend_from_slice(b"null"),
        }
        o.push(b',');
        opt_u64(&mut o, s.mem_rss_kb);
        o.push(b']');
    }
    o.extend_from_slice(b"],\"speed\":[");
    let mut error = None;
    if ix.host.len() >= 2 {
        match ClockMap::new(ix.host.iter().map(|s| s.point).collect()) {
            Ok(map) => {
                for (i, s) in map.speed(&[]).iter().enumerate() {
                    if i > 0 {
                        o.push(b',');
                    }
                    o.push(b'[');
                    write_u64(&mut o, s.start_clk);
                    o.push(b',');
                    write_u64(&mut o, s.end_clk);
                    o.push(b',');
                    write_f64(&mut o, s.cycles_per_sec);
                    o.push(b',');
                    write_f64(&mut o, s.cpu_utilization.unwrap_or(f64::NAN)); // null when not recorded
                    o.push(b']');
                }
            }
            Err(e) => error = Some(e.to_string()),
        }
    }
    o.extend_from_slice(b"],\"error\":");
    match error {
        Some(e) => write_str(&mut o, &e),
        None => o.extend_from_slice(b"null"),
    }
    o.push(b'}');
    Ok(o)
}

/// At most this many events of one record are looked at for its markers in a `bars` answer.
const MAX_RECORD_EVENTS: usize = 100_000;

/// `bars?ids=1,2&t0=&t1=&px=`: each record's own bar and event markers in `[t0, t1)`, for the
/// timeline's tree mode (one row per record). Bars and markers have the [`window`] layout; markers
/// closer than 8 pixels are one.
pub fn bars(shared: &Shared, p: &Params) -> Result<Vec<u8>, ApiError> {
    let t0: u64 = num(p, "t0")?.unwrap_or(0);
    let t1: u64 = num(p, "t1")?.ok_or_else(|| bad("`t1` is required"))?;
    if t1 <= t0 {
        return Err(bad(format!("empty window: t1 ({t1}) must be greater than t0 ({t0})")));
    }
    let px: u32 = num(p, "px")?.unwrap_or(1000).clamp(1, 16384);
    let cpp = (t1 - t0) as f64 / f64::from(px);
    let ids: Vec<u64> = match p.get("ids").map(String::as_str) {
        None | Some("") => Vec::new(),
        Some(list) => list
            .split(',')
            .take(2000)
            .map(|r| r.trim().parse().map_err(|_| bad(format!("bad record id {r:?}"))))
            .collect::<Result<_, _>>()?,
    };
    let ix = lock(shared)?;
    let mut o = Vec::with_capacity(ids.len() * 128 + 64);
    o.extend_from_slice(b"{\"version\":");
    write_u64(&mut o, ix.version);
    write_key(&mut o, "rows");
    o.push(b'[');
    let mut first = true;
    for id in ids {
        let Some(rec) = ix.rec_by_id(id) else { continue };
        if !first {
            o.push(b',');
        }
        first = false;
        let bar = ix.bar(rec);
        let end = if bar.end == OPEN { ix.now().max(bar.start) } else { bar.end };
        o.extend_from_slice(b"{\"row\":");
        id_json(&mut o, id);
        o.extend_from_slice(b",\"bars\":[");
        if bar.start < t1 && end >= t0 {
            let it = Item { start: bar.start, end, rec, count: 1, open: bar.end == OPEN };
            let wide = (end - bar.start) as f64 >= LABEL_MIN_PX * cpp;
            let label = if wide { bar_label(shared, ix.recs[rec as usize].offset) } else { None };
            bar_json(&mut o, &ix, &it, label.as_deref());
        }
        o.extend_from_slice(b"],\"markers\":[");
        let mut events: Vec<u32> = ix.events_of(rec);
        events.truncate(MAX_RECORD_EVENTS);
        let mut clks: Vec<(u64, u32)> = events
            .into_iter()
            .map(|e| (ix.evs[e as usize].clk, e))
            .filter(|&(c, _)| c >= t0 && c < t1)
            .collect();
        clks.sort_unstable();
        let mut i = 0;
        let mut n = 0;
        while i < clks.len() {
            let reach = clks[i].0 as f64 + cpp * 8.0;
            let k = i + clks[i..].iter().take_while(|&&(c, _)| (c as f64) < reach).count();
            let e = &ix.evs[clks[i].1 as usize];
            if n > 0 {
                o.push(b',');
            }
            n += 1;
            marker_json(&mut o, clks[i].0, clks[i].1, (k - i) as u64, e, id);
            i = k;
        }
        o.extend_from_slice(b"]}");
    }
    o.extend_from_slice(b"]}");
    Ok(o)
}
