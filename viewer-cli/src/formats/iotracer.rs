//! io-tracer-linux output directories (`output_YYYYMMDD_HHMMSS/`), both layouts:
//!
//! * **schema 1** (the documented one): headerless `.csv.gz` files under `fs/`, `ds/`, `cache/`,
//!   `nw/`, `pagefault/`, `iouring/`, `process/`, columns as io-tracer's documentation lists them;
//!   timestamps are local wall-clock text with microseconds.
//! * **schema 2**: a header row in every file, a trailing `mono_ns` column, `block/` instead of
//!   `ds/`, `.csv.zst` files, and a `manifest.json` at the top.
//!
//! Every row becomes an event on a `HostIo` root record per pid (spec/host-io.md), named like the
//! SDK's collector names them (`WRITE`, `BLOCK_WRITE`, `CACHE_MISS`, `NET_SEND`, `PAGE_FAULT`,
//! `IOURING_READ`, `PROCESS_SNAPSHOT`), with the row's columns as typed data fields.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context, Result};
use jets::{Metadata, RecordHandle, Trace};
use serde_json::Value;

use crate::import::ImportSummary;

/// A stream: its directories (schema 1 name first) and its schema-1 columns.
struct StreamDef {
    dirs: &'static [&'static str],
    columns: &'static [&'static str],
}

const STREAMS: &[StreamDef] = &[
    StreamDef {
        dirs: &["fs"],
        columns: &[
            "timestamp",
            "operation",
            "pid",
            "command",
            "filename",
            "size",
            "inode",
            "flags",
            "latency_ns",
            "offset",
            "tid",
        ],
    },
    StreamDef {
        dirs: &["ds", "block"],
        columns: &[
            "timestamp",
            "pid",
            "command",
            "sector",
            "operation",
            "size",
            "latency_ms",
            "tid",
            "cpu_id",
            "ppid",
            "dev",
            "queue_time_ms",
        ],
    },
    StreamDef {
        dirs: &["cache"],
        columns: &[
            "timestamp",
            "pid",
            "command",
            "event_type",
            "inode",
            "index",
            "size",
            "cpu_id",
            "dev_id",
            "count",
        ],
    },
    StreamDef {
        dirs: &["nw"],
        columns: &[
            "timestamp",
            "pid",
            "command",
            "source_addr",
            "dest_addr",
            "source_port",
            "dest_port",
            "size",
            "direction",
        ],
    },
    StreamDef {
        dirs: &["pagefault"],
        columns: &[
            "timestamp",
            "pid",
            "tid",
            "command",
            "fault_type",
            "severity",
            "inode",
            "offset",
            "address",
            "dev_id",
        ],
    },
    StreamDef {
        dirs: &["iouring"],
        columns: &[
            "timestamp",
            "pid",
            "command",
            "opcode",
            "fd",
            "offset",
            "length",
            "result",
            "latency_ms",
        ],
    },
    StreamDef {
        dirs: &["process"],
        columns: &[
            "timestamp",
            "pid",
            "ppid",
            "name",
            "state",
            "uid",
            "gid",
            "num_threads",
            "cpu_percent",
            "memory_percent",
            "cmdline",
        ],
    },
];

const INTS: &[&str] = &[
    "pid",
    "size",
    "latency_ns",
    "offset",
    "tid",
    "sector",
    "cpu_id",
    "ppid",
    "index",
    "dev_id",
    "count",
    "source_port",
    "dest_port",
    "fd",
    "length",
    "result",
    "uid",
    "gid",
    "num_threads",
    "mono_ns",
];
const FLOATS: &[&str] = &["latency_ms", "queue_time_ms", "cpu_percent", "memory_percent"];

/// One row, ready to become an event.
#[derive(Debug, Clone, PartialEq)]
pub struct IoRow {
    /// Time: ns of `mono_ns` (schema 2) or µs of the wall-clock timestamp (schema 1).
    pub time: u64,
    /// Process id.
    pub pid: u64,
    /// Process name.
    pub command: String,
    /// Event name.
    pub name: String,
    /// The stream's directory (`fs`, `ds`/`block`, ...).
    pub stream: &'static str,
    /// The other columns, typed.
    pub data: serde_json::Map<String, Value>,
}

/// What a directory holds.
#[derive(Debug, Default)]
pub struct IoDir {
    /// 2 when any file has a header row or the directory a `manifest.json`, else 1.
    pub schema: u32,
    /// `manifest.json`, when present.
    pub manifest: Option<Value>,
    /// Rows of every stream, in time order.
    pub rows: Vec<IoRow>,
    /// Times are `mono_ns` in ns (else wall-clock µs).
    pub mono: bool,
}

/// Splits one CSV line (RFC 4180 quoting, as Python's csv module writes it).
fn split_csv(line: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut chars = line.chars().peekable();
    let mut quoted = false;
    while let Some(c) = chars.next() {
        match (quoted, c) {
            (true, '"') if chars.peek() == Some(&'"') => {
                chars.next();
                cur.push('"');
            }
            (true, '"') => quoted = false,
            (false, '"') if cur.is_empty() => quoted = true,
            (false, ',') => out.push(std::mem::take(&mut cur)),
            (_, c) => cur.push(c),
        }
    }
    if quoted {
        return Err("unterminated quoted field".into());
    }
    out.push(cur);
    Ok(out)
}

/// `YYYY-MM-DD HH:MM:SS[.ffffff]` → µs since 1970 (the text's own time zone, taken as UTC: only
/// differences are used).
fn parse_timestamp(s: &str) -> Option<u64> {
    let (date, time) = s.trim().split_once(' ')?;
    let mut d = date.split('-').map(|p| p.parse::<i64>().ok());
    let (y, m, day) = (d.next()??, d.next()??, d.next()??);
    let (hms, frac) = time.split_once('.').unwrap_or((time, ""));
    let mut t = hms.split(':').map(|p| p.parse::<i64>().ok());
    let (h, mi, sec) = (t.next()??, t.next()??, t.next()??);
    if !(1..=12).contains(&m) || !(1..=31).contains(&day) || h > 23 || mi > 59 || sec > 60 {
        return None;
    }
    let us: i64 = if frac.is_empty() {
        0
    } else {
        if frac.len() > 9 || !frac.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        format!("{frac:0<6}")[..6].parse().ok()?
    };
    // Days from civil (Howard Hinnant's algorithm).
    let y2 = if m <= 2 { y - 1 } else { y };
    let era = y2.div_euclid(400);
    let yoe = y2 - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let secs = days * 86_400 + h * 3600 + mi * 60 + sec;
    u64::try_from(secs * 1_000_000 + us).ok()
}

fn files_of(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for e in std::fs::read_dir(dir).with_context(|| format!("listing {}", dir.display()))? {
        let p = e.with_context(|| format!("listing {}", dir.display()))?.path();
        let name = p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        if name.ends_with(".csv") || name.ends_with(".csv.gz") || name.ends_with(".csv.zst") {
            files.push(p);
        }
    }
    files.sort();
    Ok(files)
}

/// Reads an io-tracer output directory (either schema).
pub fn read_dir(dir: &Path) -> Result<IoDir> {
    if !dir.is_dir() {
        bail!("{}: not a directory (give the output_YYYYMMDD_HHMMSS directory)", dir.display());
    }
    let mut out = IoDir { schema: 1, ..IoDir::default() };
    let manifest = dir.join("manifest.json");
    if manifest.exists() {
        let text = std::fs::read_to_string(&manifest)
            .with_context(|| format!("reading {}", manifest.display()))?;
        let v: Value = serde_json::from_str(&text)
            .with_context(|| format!("{}: not valid JSON", manifest.display()))?;
        out.manifest = Some(v);
        out.schema = 2;
    }
    let mut found = false;
    for def in STREAMS {
        for sub in def.dirs {
            let d = dir.join(sub);
            if !d.is_dir() {
                continue;
            }
            found = true;
            for f in files_of(&d)? {
                read_file(&f, sub, def, &mut out)?;
            }
        }
    }
    if !found {
        bail!(
            "{}: no io-tracer stream directory (fs/, ds/ or block/, cache/, nw/, pagefault/, \
             iouring/, process/)",
            dir.display()
        );
    }
    if out.mono && out.rows.iter().any(|r| !r.data.contains_key("mono_ns")) {
        bail!("{}: some files have a mono_ns column and others not", dir.display());
    }
    out.rows.sort_by_key(|r| r.time);
    Ok(out)
}

fn read_file(path: &Path, stream: &'static str, def: &StreamDef, out: &mut IoDir) -> Result<()> {
    let mut reader =
        jets_read::Reader::open(path).with_context(|| format!("opening {}", path.display()))?;
    let mut columns: Vec<String> = def.columns.iter().map(|c| c.to_string()).collect();
    let mut lineno = 0u64;
    while let Some(line) = reader.next_line() {
        lineno += 1;
        let line = line.with_context(|| format!("{} line {lineno}", path.display()))?;
        let text = line.text_lossy();
        let text = text.trim_end_matches(['\r', '\n']);
        if text.is_empty() {
            continue;
        }
        let at = || format!("{} line {lineno}", path.display());
        let cells = split_csv(text).map_err(|e| anyhow!("{}: {e}", at()))?;
        if lineno == 1 && cells.first().is_some_and(|c| c.ends_with("timestamp")) {
            columns = cells;
            out.schema = 2;
            if columns.iter().any(|c| c == "mono_ns") {
                out.mono = true;
            }
            continue;
        }
        out.rows.push(parse_row(&cells, &columns, stream).map_err(|e| anyhow!("{}: {e}", at()))?);
    }
    if let Some(t) = reader.truncated() {
        bail!("{}: truncated: {t}", path.display());
    }
    Ok(())
}

fn parse_row(cells: &[String], columns: &[String], stream: &'static str) -> Result<IoRow, String> {
    // fs rows of schema 1 may leave out the trailing offset and tid (dual-path rows).
    let min = if stream == "fs" { columns.len().min(9) } else { columns.len() };
    if cells.len() < min || cells.len() > columns.len() {
        return Err(format!(
            "{} columns, the {stream} stream has {} ({})",
            cells.len(),
            columns.len(),
            columns.join(",")
        ));
    }
    let mut data = serde_json::Map::new();
    let mut time_text = "";
    for (col, cell) in columns.iter().zip(cells) {
        let col = col.as_str();
        if col == "timestamp" || col == "snapshot_timestamp" {
            time_text = cell;
            continue;
        }
        if cell.is_empty() {
            continue;
        }
        let v = if INTS.contains(&col) && !(stream == "fs" && col == "inode") {
            match cell.parse::<i64>() {
                Ok(n) => Value::from(n),
                Err(_) => return Err(format!("column `{col}`: `{cell}` is not an integer")),
            }
        } else if FLOATS.contains(&col) {
            match cell.parse::<f64>() {
                Ok(x) if x.is_finite() => Value::from(x),
                _ => return Err(format!("column `{col}`: `{cell}` is not a number")),
            }
        } else {
            Value::from(cell.as_str())
        };
        // `severity` is a JETS event hint (info/warning/error, W009): the fault's goes elsewhere.
        let key = if col == "severity" { "fault_severity" } else { col };
        data.insert(key.to_string(), v);
    }
    let time = match data.get("mono_ns").and_then(Value::as_u64) {
        Some(ns) => ns,
        None => parse_timestamp(time_text)
            .ok_or_else(|| format!("timestamp `{time_text}` is not YYYY-MM-DD HH:MM:SS.ffffff"))?,
    };
    if data.get("mono_ns").is_some() {
        data.insert("timestamp".into(), Value::from(time_text));
    }
    let pid = data
        .get("pid")
        .and_then(Value::as_u64)
        .ok_or_else(|| "column `pid` is missing or negative".to_string())?;
    let s = |k: &str| data.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    let command = if stream == "process" { s("name") } else { s("command") };
    let name = match stream {
        "fs" => s("operation"),
        "ds" | "block" => format!("BLOCK_{}", s("operation").to_uppercase()),
        "cache" => format!("CACHE_{}", s("event_type")),
        "nw" if s("direction") == "send" => "NET_SEND".into(),
        "nw" => "NET_RECEIVE".into(),
        "pagefault" => "PAGE_FAULT".into(),
        "iouring" => format!("IOURING_{}", s("opcode")),
        _ => "PROCESS_SNAPSHOT".into(),
    };
    if name.is_empty() || name.ends_with('_') {
        return Err("the operation column is empty".into());
    }
    data.insert("stream".into(), Value::from(stream));
    Ok(IoRow { time, pid, command, name, stream, data })
}

/// Imports one io-tracer output directory (`inputs` holds exactly one) into the JETS trace
/// `output`.
pub fn import_all(inputs: &[PathBuf], output: &Path) -> Result<ImportSummary> {
    let [dir] = inputs else {
        bail!("give one io-tracer output directory (output_YYYYMMDD_HHMMSS), not {}", inputs.len());
    };
    let d = read_dir(dir)?;
    let t0 = d.rows.first().map(|r| r.time).unwrap_or(0);
    let (mhz, base) = if d.mono {
        (1000.0, format!("CLOCK_MONOTONIC: 1 cycle = 1 ns since {t0} ns"))
    } else {
        (1.0, "io-tracer wall-clock timestamps: 1 cycle = 1 µs since the first row".to_string())
    };
    let meta = Metadata::new()
        .clock_frequency_mhz(mhz)
        .insert("source_format", "io-tracer-linux")
        .insert("io_tracer_schema", u64::from(d.schema))
        .insert("time_base", base);
    let trace =
        Trace::create(output, meta).with_context(|| format!("creating {}", output.display()))?;
    let mut roots: BTreeMap<u64, (RecordHandle, u64)> = BTreeMap::new();
    let mut summary = ImportSummary::default();
    for row in &d.rows {
        let clk = row.time - t0;
        if !roots.contains_key(&row.pid) {
            let rec = trace
                .root(format!("io {}", row.pid), "HostIo")
                .field("pid", row.pid)
                .field("command", row.command.clone())
                .begin_at(clk)?;
            if roots.is_empty() {
                if let Some(m) = &d.manifest {
                    rec.annotation("IoTracerManifest").data_json(&m.to_string()).emit()?;
                }
            }
            summary.records += 1;
            roots.insert(row.pid, (rec, clk));
        }
        let Some((rec, last)) = roots.get_mut(&row.pid) else { continue };
        rec.event(row.name.clone())
            .data_json(&Value::Object(row.data.clone()).to_string())
            .emit_at(clk)?;
        *last = clk;
        summary.events += 1;
        summary.complete_events += 1;
    }
    for (_, (rec, last)) in roots {
        rec.end_at(last)?;
    }
    trace.close().with_context(|| format!("writing {}", output.display()))?;
    Ok(summary)
}

/// The eBPF collector `jets run --io-trace` drives (the SDK's, with feature `ebpf`).
#[cfg(feature = "ebpf")]
pub type Collector = jets_host::ebpf::IoTracer;
/// Without feature `ebpf` there is no collector: this type has no values.
#[cfg(not(feature = "ebpf"))]
pub type Collector = std::convert::Infallible;

/// Starts tracing `pid`'s I/O into `dir` (io-tracer layout) when `dir` is given.
pub fn start_collector(dir: Option<&Path>, pid: u32) -> Result<Option<Collector>> {
    let Some(dir) = dir else { return Ok(None) };
    #[cfg(feature = "ebpf")]
    {
        let config = jets_host::ebpf::IoTraceConfig::default().output_dir(dir);
        jets_host::ebpf::IoTracer::start(pid, config)
            .map(Some)
            .with_context(|| format!("--io-trace {}", dir.display()))
    }
    #[cfg(not(feature = "ebpf"))]
    {
        let _ = pid;
        bail!(
            "--io-trace {}: this jets was built without the `ebpf` feature (build it with \
             `cargo build -p jets-cli --features ebpf`, which needs clang)",
            dir.display()
        )
    }
}

/// Stops the collector, finishing its files, and says where they are and what was lost.
pub fn stop_collector(c: Option<Collector>) -> Result<()> {
    let Some(c) = c else { return Ok(()) };
    #[cfg(feature = "ebpf")]
    {
        let r = c.stop().context("stopping the I/O collector")?;
        eprintln!(
            "jets run: I/O trace in {}: {}",
            r.output.as_deref().map(|p| p.display().to_string()).unwrap_or_default(),
            r.summary()
        );
        Ok(())
    }
    #[cfg(not(feature = "ebpf"))]
    match c {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_quoting_and_timestamps() {
        assert_eq!(split_csv(r#"a,"b,c","d""e",,"#).unwrap(), vec!["a", "b,c", "d\"e", "", ""]);
        assert!(split_csv(r#"a,"b"#).is_err());
        let t = parse_timestamp("2024-01-15 10:30:45.123456").unwrap();
        assert_eq!(t - parse_timestamp("2024-01-15 10:30:45").unwrap(), 123_456);
        assert_eq!(parse_timestamp("1970-01-02 00:00:00.5"), Some(86_400_500_000));
        assert_eq!(parse_timestamp("2024-13-01 00:00:00"), None);
    }
}
