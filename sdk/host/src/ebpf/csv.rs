//! io-tracer-linux's output layout: `output_YYYYMMDD_HHMMSS/{fs,ds,cache,nw,pagefault,iouring,
//! process,system_spec}/`, headerless gzip CSV files rotated every N rows, named
//! `{type}_{YYYYMMDD_HHMMSS_mmm}.csv.gz`, timestamps in local time with microseconds.

use std::fmt::Write as _;
use std::fs::{self, File};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use flate2::write::GzEncoder;
use flate2::Compression;
use serde_json::{json, Value};

use super::decode::Row;
use super::event::Stream;
use super::IoTraceError;
use crate::procfs;

/// The file in the output directory with the rows and lost records per stream (not part of
/// io-tracer's layout, which logs its losses instead; spec/host-io.md HIO3).
pub const STATS_FILE: &str = "jets_io_stats.json";

/// `CLOCK_MONOTONIC` ns → local wall-clock text.
#[derive(Clone, Copy, Debug)]
pub struct WallClock {
    real_minus_mono: i128,
}

impl WallClock {
    /// Reads both clocks now.
    pub fn now() -> WallClock {
        let mono = procfs::clock_ns(libc::CLOCK_MONOTONIC) as i128;
        let real = procfs::clock_ns(libc::CLOCK_REALTIME) as i128;
        WallClock { real_minus_mono: real - mono }
    }

    /// `CLOCK_REALTIME` ns of a `CLOCK_MONOTONIC` instant.
    pub fn real_ns(&self, mono_ns: u64) -> i128 {
        mono_ns as i128 + self.real_minus_mono
    }

    /// `YYYY-MM-DD HH:MM:SS.ffffff`, or `YYYYMMDD_HHMMSS_mmm` when `compact`.
    pub fn local(&self, mono_ns: u64, compact: bool) -> String {
        let real = self.real_ns(mono_ns);
        let secs = real.div_euclid(1_000_000_000) as libc::time_t;
        let nanos = real.rem_euclid(1_000_000_000) as u64;
        // SAFETY: `tm` is plain data; localtime_r only writes it.
        let mut tm: libc::tm = unsafe { std::mem::zeroed() };
        // SAFETY: both pointers are valid for the call.
        unsafe { libc::localtime_r(&secs, &mut tm) };
        let (y, mo, d, h, mi, s) =
            (tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
        if compact {
            format!("{y:04}{mo:02}{d:02}_{h:02}{mi:02}{s:02}_{:03}", nanos / 1_000_000)
        } else {
            format!("{y:04}-{mo:02}-{d:02} {h:02}:{mi:02}:{s:02}.{:06}", nanos / 1000)
        }
    }
}

struct Rotating {
    dir: PathBuf,
    prefix: &'static str,
    out: Option<(PathBuf, GzEncoder<BufWriter<File>>)>,
    rows: usize,
}

/// Creates the next file of a rotated stream, never overwriting one that exists.
fn open_new(
    dir: &Path,
    prefix: &str,
    name_time: &str,
) -> Result<(PathBuf, GzEncoder<BufWriter<File>>), IoTraceError> {
    let mut path = dir.join(format!("{prefix}_{name_time}.csv.gz"));
    let mut n = 1;
    while path.exists() {
        path = dir.join(format!("{prefix}_{name_time}_{n}.csv.gz"));
        n += 1;
    }
    let f = File::create(&path).map_err(|e| IoTraceError::io(&path, e))?;
    Ok((path, GzEncoder::new(BufWriter::new(f), Compression::fast())))
}

impl Rotating {
    fn writer(&mut self, name_time: &str) -> Result<&mut GzEncoder<BufWriter<File>>, IoTraceError> {
        let (_, w) = match &mut self.out {
            Some(out) => out,
            slot @ None => {
                self.rows = 0;
                slot.insert(open_new(&self.dir, self.prefix, name_time)?)
            }
        };
        Ok(w)
    }

    fn close(&mut self) -> Result<(), IoTraceError> {
        if let Some((path, w)) = self.out.take() {
            let mut inner = w.finish().map_err(|e| IoTraceError::io(&path, e))?;
            inner.flush().map_err(|e| IoTraceError::io(&path, e))?;
        }
        Ok(())
    }
}

/// An io-tracer output directory being written.
pub struct CsvOutput {
    dir: PathBuf,
    streams: Vec<Rotating>,
    rotate_rows: usize,
    clock: WallClock,
    line: String,
    /// The last whole second formatted, as `localtime_r` is too slow to call per row.
    second: (i128, String),
    mem_total_kb: u64,
    /// Rows written per stream ([`Stream`] index).
    pub rows: [u64; 7],
}

fn field(out: &mut String, s: &str) {
    if s.contains([',', '"', '\n', '\r']) {
        out.push('"');
        out.push_str(&s.replace('"', "\"\""));
        out.push('"');
    } else {
        out.push_str(s);
    }
}

fn opt<T: std::fmt::Display>(v: Option<T>) -> String {
    v.map(|v| v.to_string()).unwrap_or_default()
}

impl CsvOutput {
    /// Creates `parent/output_YYYYMMDD_HHMMSS/` with its stream directories and `system_spec/`.
    /// Rotates each stream's file every `rotate_rows` rows (io-tracer: 1000).
    pub fn create(parent: &Path, rotate_rows: usize) -> Result<CsvOutput, IoTraceError> {
        let clock = WallClock::now();
        let stamp = clock.local(procfs::clock_ns(libc::CLOCK_MONOTONIC), true);
        let mut dir = parent.join(format!("output_{}", &stamp[..15]));
        let mut n = 1;
        while dir.exists() {
            dir = parent.join(format!("output_{}_{n}", &stamp[..15]));
            n += 1;
        }
        let mut streams = Vec::new();
        for s in Stream::ALL {
            let d = dir.join(s.dir());
            fs::create_dir_all(&d).map_err(|e| IoTraceError::io(&d, e))?;
            streams.push(Rotating { dir: d, prefix: s.dir(), out: None, rows: 0 });
        }
        write_system_spec(&dir.join("system_spec"))?;
        let mem_total_kb = fs::read_to_string("/proc/meminfo")
            .ok()
            .and_then(|m| meminfo_kb(&m, "MemTotal:"))
            .unwrap_or(0);
        Ok(CsvOutput {
            dir,
            streams,
            rotate_rows: rotate_rows.max(1),
            clock,
            line: String::new(),
            second: (i128::MIN, String::new()),
            mem_total_kb,
            rows: [0; 7],
        })
    }

    /// The `output_…` directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Writes one row (failed syscalls never reach here; process events become snapshots).
    pub fn write(&mut self, row: &Row) -> Result<(), IoTraceError> {
        let w = row.who();
        let real = self.clock.real_ns(w.ts);
        let sec = real.div_euclid(1_000_000_000);
        if self.second.0 != sec {
            let text = self.clock.local(w.ts, false);
            self.second = (sec, text[..19].to_string());
        }
        let l = &mut self.line;
        l.clear();
        l.push_str(&self.second.1);
        let _ = write!(l, ".{:06},", real.rem_euclid(1_000_000_000) / 1000);
        match row {
            Row::Fs(r) => {
                let _ = write!(l, "{},{},", r.op, w.pid);
                field(l, &w.comm);
                l.push(',');
                match &r.path2 {
                    Some(p2) => field(l, &format!("{}->{p2}", r.path)),
                    None => field(l, &r.path),
                }
                let inode = if r.path2.is_some() { "0:0" } else { "0" };
                let _ = write!(l, ",{},{inode},", r.size);
                field(l, &r.flags);
                let _ = write!(l, ",{},{},{}", r.latency_ns, opt(r.offset), w.tid);
            }
            Row::Block(r) => {
                let _ = write!(l, "{},", w.pid);
                field(l, &w.comm);
                let _ = write!(
                    l,
                    ",{},{},{},{:.3},{},{},{},{},{}",
                    r.sector,
                    r.op,
                    r.size,
                    r.latency_ns as f64 / 1e6,
                    w.tid,
                    w.cpu,
                    opt(r.ppid),
                    r.dev,
                    opt(r.queue_ns.map(|q| format!("{:.3}", q as f64 / 1e6)))
                );
            }
            Row::Cache(r) => {
                let _ = write!(l, "{},", w.pid);
                field(l, &w.comm);
                let _ = write!(
                    l,
                    ",{},{},{},0,{},{},{}",
                    r.event, r.inode, r.index, w.cpu, r.dev_id, r.count
                );
            }
            Row::Net(r) => {
                let _ = write!(l, "{},", w.pid);
                field(l, &w.comm);
                let _ = write!(
                    l,
                    ",{},{},{},{},{},{}",
                    r.source_addr, r.dest_addr, r.source_port, r.dest_port, r.size, r.direction
                );
            }
            Row::Fault(r) => {
                let _ = write!(l, "{},{},", w.pid, w.tid);
                field(l, &w.comm);
                let _ = write!(
                    l,
                    ",{},{},{},{},{:#x},{}",
                    r.fault_type, r.severity, r.inode, r.offset, r.address, r.dev_id
                );
            }
            Row::Uring(r) => {
                let _ = write!(l, "{},", w.pid);
                field(l, &w.comm);
                let _ = write!(
                    l,
                    ",{},{},,{},{},{}",
                    r.opcode,
                    opt(r.fd),
                    opt(r.length),
                    opt(r.result),
                    opt(r.latency_ns.map(|n| format!("{:.3}", n as f64 / 1e6)))
                );
            }
            Row::Process(r) => {
                let pid = r.child.unwrap_or(w.pid);
                return self.snapshot(pid, w.ts);
            }
        }
        l.push('\n');
        self.emit(row.stream())
    }

    /// Writes a `process/` row for `pid` from `/proc` (nothing if it is gone).
    pub fn snapshot(&mut self, pid: u32, mono_ns: u64) -> Result<(), IoTraceError> {
        let Some(line) = process_row(pid, &self.clock.local(mono_ns, false), self.mem_total_kb)
        else {
            return Ok(());
        };
        self.line = line;
        self.emit(Stream::Process)
    }

    fn emit(&mut self, s: Stream) -> Result<(), IoTraceError> {
        let i = s as usize;
        let r = &mut self.streams[i];
        let name_time = match r.out {
            Some(_) => String::new(),
            None => self.clock.local(procfs::clock_ns(libc::CLOCK_MONOTONIC), true),
        };
        let w = r.writer(&name_time)?;
        if let Err(e) = w.write_all(self.line.as_bytes()) {
            let path = r.out.as_ref().map(|o| o.0.clone()).unwrap_or_default();
            return Err(IoTraceError::io(&path, e));
        }
        r.rows += 1;
        self.rows[i] += 1;
        if r.rows >= self.rotate_rows {
            r.close()?;
        }
        Ok(())
    }

    /// Finishes every open file and writes `stats` (rows and losses per stream, the
    /// `HostIoStats` JSON) to [`STATS_FILE`] in the directory, so that a reader of the CSV files
    /// alone learns which streams are incomplete (HIO3); returns the directory.
    pub fn finish(mut self, stats: &Value) -> Result<PathBuf, IoTraceError> {
        for r in &mut self.streams {
            r.close()?;
        }
        let p = self.dir.join(STATS_FILE);
        let text = serde_json::to_string_pretty(stats).unwrap_or_default();
        fs::write(&p, text).map_err(|e| IoTraceError::io(&p, e))?;
        Ok(self.dir)
    }
}

fn meminfo_kb(text: &str, key: &str) -> Option<u64> {
    text.lines().find(|l| l.starts_with(key))?.split_whitespace().nth(1)?.parse().ok()
}

fn process_row(pid: u32, ts: &str, mem_total_kb: u64) -> Option<String> {
    let st = procfs::read_stat(pid).ok()?;
    let status = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let id = |key: &str| -> String {
        status
            .lines()
            .find(|l| l.starts_with(key))
            .and_then(|l| l.split_whitespace().nth(1))
            .unwrap_or("")
            .to_string()
    };
    let state = status
        .lines()
        .find(|l| l.starts_with("State:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .unwrap_or("?")
        .to_string();
    let cmdline = fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| {
            b.split(|&c| c == 0)
                .filter(|s| !s.is_empty())
                .map(|s| String::from_utf8_lossy(s).into_owned())
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_default();
    let ticks = procfs::clock_ticks() as f64;
    let age = procfs::uptime_secs().ok()? - st.starttime as f64 / ticks;
    let cpu = if age > 0.0 { (st.utime + st.stime) as f64 / ticks / age * 100.0 } else { 0.0 };
    let mem = if mem_total_kb > 0 {
        (st.rss_pages * procfs::page_kb()) as f64 / mem_total_kb as f64 * 100.0
    } else {
        0.0
    };
    let mut l = format!("{ts},{pid},{},", st.ppid);
    field(&mut l, &st.comm);
    let _ =
        write!(l, ",{state},{},{},{},{cpu:.1},{mem:.1},", id("Uid:"), id("Gid:"), st.num_threads);
    field(&mut l, &cmdline);
    l.push('\n');
    Some(l)
}

fn read(path: &str) -> Option<String> {
    fs::read_to_string(path).ok().map(|s| s.trim().to_string())
}

fn write_system_spec(dir: &Path) -> Result<(), IoTraceError> {
    fs::create_dir_all(dir).map_err(|e| IoTraceError::io(dir, e))?;
    let cpuinfo = read("/proc/cpuinfo").unwrap_or_default();
    let cpu_field = |k: &str| {
        cpuinfo
            .lines()
            .find(|l| l.starts_with(k))
            .and_then(|l| l.split_once(':'))
            .map(|(_, v)| v.trim().to_string())
    };
    let logical = cpuinfo.lines().filter(|l| l.starts_with("processor")).count();
    let meminfo = read("/proc/meminfo").unwrap_or_default();
    let disks: Vec<Value> = read("/proc/partitions")
        .unwrap_or_default()
        .lines()
        .skip(2)
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() == 4).then(|| {
                json!({"major": f[0].parse::<u64>().ok(), "minor": f[1].parse::<u64>().ok(),
                       "blocks_kb": f[2].parse::<u64>().ok(), "name": f[3]})
            })
        })
        .collect();
    let mut nets = Vec::new();
    if let Ok(rd) = fs::read_dir("/sys/class/net") {
        for e in rd.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let attr = |a: &str| read(&format!("/sys/class/net/{name}/{a}"));
            nets.push(json!({"name": name, "mac": attr("address"), "mtu": attr("mtu")
                .and_then(|m| m.parse::<u64>().ok()), "operstate": attr("operstate")}));
        }
    }
    let os_release = read("/etc/os-release").unwrap_or_default();
    let distro = os_release
        .lines()
        .find_map(|l| l.strip_prefix("PRETTY_NAME="))
        .map(|s| s.trim_matches('"').to_string());
    let files = [
        (
            "cpu_info.json",
            json!({"model": cpu_field("model name"), "logical_cpus": logical,
                   "mhz": cpu_field("cpu MHz").and_then(|m| m.parse::<f64>().ok())}),
        ),
        (
            "memory_info.json",
            json!({"total_kb": meminfo_kb(&meminfo, "MemTotal:"),
                   "available_kb": meminfo_kb(&meminfo, "MemAvailable:")}),
        ),
        ("disk_info.json", json!({ "partitions": disks })),
        ("network_info.json", json!({ "interfaces": nets })),
        (
            "os_info.json",
            json!({"kernel": read("/proc/sys/kernel/osrelease"),
                   "hostname": read("/proc/sys/kernel/hostname"), "distribution": distro}),
        ),
    ];
    for (name, v) in files {
        let p = dir.join(name);
        let text = serde_json::to_string_pretty(&v).unwrap_or_default();
        fs::write(&p, text).map_err(|e| IoTraceError::io(&p, e))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ebpf::decode::{FsRow, Who};

    #[test]
    fn writes_rotated_headerless_gzip_csv() {
        let tmp = tempfile::tempdir().unwrap();
        let mut out = CsvOutput::create(tmp.path(), 2).unwrap();
        let row = |i: u64| {
            Row::Fs(FsRow {
                who: Who { ts: 1_000 + i, pid: 1, tid: 2, cpu: 0, comm: "a,b".into(), clk: None },
                op: "WRITE",
                syscall: "write",
                path: "/t/f".into(),
                path2: None,
                size: 4096,
                flags: "O_WRONLY".into(),
                latency_ns: 9,
                offset: Some(i * 4096),
                fd: Some(3),
                ret: 4096,
            })
        };
        for i in 0..5 {
            out.write(&row(i)).unwrap();
        }
        let stats = json!({"streams": {"fs": {"rows": 5, "lost": 2}}});
        let dir = out.finish(&stats).unwrap();
        let written: Value =
            serde_json::from_str(&fs::read_to_string(dir.join(STATS_FILE)).unwrap()).unwrap();
        assert_eq!(written, stats, "losses recorded beside the CSV files");
        assert!(dir.file_name().unwrap().to_string_lossy().starts_with("output_"));
        let mut files: Vec<_> =
            fs::read_dir(dir.join("fs")).unwrap().map(|e| e.unwrap().path()).collect();
        files.sort();
        assert_eq!(files.len(), 3, "{files:?}");
        let mut text = String::new();
        for f in &files {
            use std::io::Read;
            flate2::read::GzDecoder::new(File::open(f).unwrap()).read_to_string(&mut text).unwrap();
        }
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 5);
        let cols: Vec<&str> = lines[1].splitn(2, ',').collect();
        assert_eq!(cols[0].len(), "2024-01-15 10:30:45.123456".len());
        assert!(
            lines[1].ends_with(",WRITE,1,\"a,b\",/t/f,4096,0,O_WRONLY,9,4096,2"),
            "{}",
            lines[1]
        );
        for f in ["cpu_info", "memory_info", "disk_info", "network_info", "os_info"] {
            assert!(dir.join("system_spec").join(format!("{f}.json")).exists());
        }
    }
}
