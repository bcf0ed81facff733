//! `jets view`'s index on a generated trace (10 M records by default; set
//! `JETS_VIEW_BENCH_RECORDS` for another size): the build time (measured once, the trace being
//! gigabytes) and the latency of window queries as the page makes them, JSON included, at the
//! whole-run zoom and zoomed in.
//!
//! `cargo bench -p jets-cli --bench view -- --warm-up-time 1 --measurement-time 3`

#![allow(missing_docs)]

#[path = "../src/view/api.rs"]
#[allow(dead_code)]
mod api;
#[path = "../src/view/build.rs"]
#[allow(dead_code)]
mod build;
#[path = "../src/view/index.rs"]
#[allow(dead_code)]
mod index;

use std::path::Path;
use std::time::Instant;

use criterion::Criterion;
use jets::format::Severity;
use jets::{Metadata, Trace};

const CORES: u64 = 4;

/// A pipeline-like trace: `CORES` roots (one unit each) and `records` instructions spread over
/// them, each 4 to 19 cycles long (about ten in flight per core), an event on every 8th, a
/// warning on every 64th.
fn generate(path: &Path, records: u64) -> Result<(), jets::Error> {
    let trace =
        Trace::create(path, Metadata::new().hardware_model("bench").clock_frequency_mhz(1000.0))?;
    let cores: Vec<_> = (0..CORES)
        .map(|c| trace.root("core", "Core").unit_id(c).begin_at(0))
        .collect::<Result<_, _>>()?;
    let mut in_flight: Vec<std::collections::VecDeque<(u64, jets::RecordHandle)>> =
        (0..CORES).map(|_| Default::default()).collect();
    let per_core = records / CORES;
    for i in 0..per_core {
        for (c, core) in cores.iter().enumerate() {
            let clk = i;
            let q = &mut in_flight[c];
            while q.front().is_some_and(|(end, _)| *end <= clk) {
                if let Some((end, h)) = q.pop_front() {
                    h.end_at(end)?;
                }
            }
            let h = core
                .child("add x1,x2,x3", "Instruction")
                .field("pc", 0x1000 + 4 * i)
                .begin_at(clk)?;
            if i % 8 == 0 {
                let e = h.event("Decode");
                if i % 64 == 0 { e.severity(Severity::Warning) } else { e }.emit_at(clk + 1)?;
            }
            let end = clk + 4 + (i * 7 + c as u64) % 16;
            let at = q.partition_point(|(e, _)| *e <= end);
            q.insert(at, (end, h));
        }
    }
    let last = per_core + 20;
    for q in in_flight {
        for (end, h) in q {
            h.end_at(end)?;
        }
    }
    for core in cores {
        core.end_at(last)?;
    }
    trace.close_at(last)?;
    Ok(())
}

fn main() {
    let records: u64 = std::env::var("JETS_VIEW_BENCH_RECORDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000_000);
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("bench.jets");
    let t = Instant::now();
    generate(&path, records).expect("writing the trace");
    let size = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
    eprintln!(
        "view bench: wrote {records} instructions ({:.2} GB) in {:.1} s",
        size as f64 / 1e9,
        t.elapsed().as_secs_f64()
    );
    let t = Instant::now();
    let shared = build::build_now(&path).expect("indexing");
    let build = t.elapsed();
    let (count, extent, bytes, rows) = {
        let ix = shared.index.read().expect("index");
        (ix.counts, ix.now(), ix.memory_bytes(), ix.rows.len())
    };
    eprintln!(
        "view bench: index build {:.2} s ({:.0} k lines/s), {} records, {} events, {} rows, \
         index {:.0} MB ({:.1} B per record+event)",
        build.as_secs_f64(),
        count.lines as f64 / build.as_secs_f64() / 1e3,
        count.records,
        count.events,
        rows,
        bytes as f64 / 1e6,
        bytes as f64 / (count.records + count.events) as f64
    );
    // The other queries the page makes: a search that matches nothing (every interned string
    // looked at), a jump to the middle cycle, and 50 pipeline rows there.
    let q = |pairs: &[(&str, String)]| -> api::Params {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), v.clone())).collect()
    };
    let rtype = shared.index.read().expect("index").pipeline_type().unwrap_or(0);
    let seq = shared.index.read().expect("index").seqs_of_type(rtype).first().copied().unwrap_or(0);
    let other = [
        ("search_no_match", "search", q(&[("q", "zzz-no-such-name".to_owned())])),
        (
            "jump_middle",
            "jump",
            q(&[("type", rtype.to_string()), ("clk", (extent / 2).to_string())]),
        ),
        (
            "pipeline_50_rows",
            "pipeline",
            q(&[
                ("t0", (extent / 2).to_string()),
                ("t1", (extent / 2 + 100).to_string()),
                ("px", "1600".to_owned()),
                ("groups", format!("{seq}:{}:50", records / CORES / 2)),
            ]),
        ),
    ];
    let all_rows: String = (0..rows.min(200)).map(|r| r.to_string()).collect::<Vec<_>>().join(",");
    let params = |t0: u64, t1: u64| -> api::Params {
        [
            ("t0", t0.to_string()),
            ("t1", t1.to_string()),
            ("px", "1600".to_owned()),
            ("rows", all_rows.clone()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect()
    };
    let windows = [
        ("whole_run", 0, extent + 1),
        ("one_percent", extent / 2, extent / 2 + extent / 100),
        ("200_cycles", extent / 3, extent / 3 + 200),
    ];
    for (name, t0, t1) in windows {
        let answer = api::handle(&shared, "window", &params(t0, t1)).expect("window");
        eprintln!("view bench: {name}: {} rows, answer {} kB", rows.min(200), answer.len() / 1000);
    }
    // Wall time, and the query thread's CPU time: on a shared machine the second is what the
    // query costs, the first also counts the time other processes held the cores.
    let mut c = Criterion::default().configure_from_args();
    let mut g = c.benchmark_group("view_window_wall");
    for (name, t0, t1) in windows {
        let p = params(t0, t1);
        g.bench_function(name, |b| b.iter(|| api::handle(&shared, "window", &p).expect("window")));
    }
    g.finish();
    let mut c = Criterion::default().with_measurement(ThreadCpu).configure_from_args();
    let mut g = c.benchmark_group("view_window_cpu");
    for (name, t0, t1) in windows {
        let p = params(t0, t1);
        g.bench_function(name, |b| b.iter(|| api::handle(&shared, "window", &p).expect("window")));
    }
    for (name, endpoint, p) in &other {
        g.bench_function(*name, |b| b.iter(|| api::handle(&shared, endpoint, p).expect("query")));
    }
    g.finish();
    c.final_summary();
}

/// CPU time of the measuring thread (`CLOCK_THREAD_CPUTIME_ID`), in nanoseconds.
struct ThreadCpu;

fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid timespec for the call to fill.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID)");
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

impl criterion::measurement::Measurement for ThreadCpu {
    type Intermediate = u64;
    type Value = u64;
    fn start(&self) -> u64 {
        thread_cpu_ns()
    }
    fn end(&self, start: u64) -> u64 {
        thread_cpu_ns().saturating_sub(start)
    }
    fn add(&self, a: &u64, b: &u64) -> u64 {
        a + b
    }
    fn zero(&self) -> u64 {
        0
    }
    fn to_f64(&self, v: &u64) -> f64 {
        *v as f64
    }
    fn formatter(&self) -> &dyn criterion::measurement::ValueFormatter {
        &CpuFormatter
    }
}

struct CpuFormatter;

impl criterion::measurement::ValueFormatter for CpuFormatter {
    fn scale_values(&self, typical: f64, values: &mut [f64]) -> &'static str {
        let (div, unit) = if typical >= 1e6 { (1e6, "ms cpu") } else { (1e3, "µs cpu") };
        values.iter_mut().for_each(|v| *v /= div);
        unit
    }
    fn scale_throughputs(
        &self,
        _typical: f64,
        _throughput: &criterion::Throughput,
        values: &mut [f64],
    ) -> &'static str {
        values.iter_mut().for_each(|v| *v /= 1e6);
        "ms cpu"
    }
    fn scale_for_machines(&self, _values: &mut [f64]) -> &'static str {
        "ns cpu"
    }
}
