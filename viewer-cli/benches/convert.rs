//! End-to-end throughput of `jets stats`, `jets tree` and `jets convert` (the release binary) on a
//! pipelined CPU trace written with the SDK: 20,000 overlapping instructions with five stage
//! events each, a stalled cache access on every eighth, under one core record.
//!
//! `cargo bench -p jets-cli --bench convert -- --warm-up-time 1 --measurement-time 3`

// criterion_group! defines an undocumented public function.
#![allow(missing_docs)]

use std::path::Path;
use std::process::Command;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use jets::{Metadata, Trace};

const INSTRUCTIONS: u64 = 20_000;

/// Writes the trace; returns its number of lines.
fn write_trace(path: &Path) -> u64 {
    let t = Trace::create(path, Metadata::new().clock_frequency_mhz(2000.0)).expect("create");
    let core = t.root("core0", "Core").unit_id(0).begin_at(0).expect("core");
    let mut inflight = std::collections::VecDeque::new();
    for i in 0..INSTRUCTIONS {
        let clk = i * 2;
        let ins = core.child("insn", "Instruction").field("pc", 0x1000 + 4 * i).begin_at(clk);
        let ins = ins.expect("insn");
        for (k, stage) in ["F", "D", "R", "X", "W"].iter().enumerate() {
            ins.event(*stage).emit_at(clk + 2 * k as u64).expect("event");
        }
        if i % 8 == 0 {
            let c = ins.child("dcache", "CacheAccess").begin_at(clk + 6).expect("child");
            c.end_at(clk + 9).expect("end");
        }
        inflight.push_back((ins, clk + 12));
        // Out-of-order completion within a window keeps several instructions in flight.
        if inflight.len() > 6 {
            if let Some((ins, end)) = inflight.pop_front() {
                ins.end_at(end).expect("end");
            }
        }
    }
    for (ins, end) in inflight {
        ins.end_at(end).expect("end");
    }
    core.end_at(INSTRUCTIONS * 2 + 20).expect("end");
    t.close().expect("close");
    std::fs::read_to_string(path).expect("read").lines().count() as u64
}

fn run(args: &[&str]) {
    let o = Command::new(env!("CARGO_BIN_EXE_jets")).args(args).output().expect("run jets");
    assert!(o.status.success(), "{args:?}: {}", String::from_utf8_lossy(&o.stderr));
}

fn bench(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("tmp");
    let trace = dir.path().join("pipeline.jets");
    let lines = write_trace(&trace);
    let input = trace.to_str().expect("utf8");
    let mut g = c.benchmark_group("jets_cli");
    g.sample_size(10);
    g.throughput(Throughput::Elements(lines));
    g.bench_function("stats", |b| b.iter(|| run(&["stats", input])));
    g.bench_function("tree_depth_2", |b| b.iter(|| run(&["tree", input, "--depth", "2"])));
    for (to, ext) in
        [("chrome", "json"), ("perfetto", "pftrace"), ("kanata", "kanata"), ("dftracer", "pfw")]
    {
        let out = dir.path().join(format!("out.{ext}"));
        let out = out.to_str().expect("utf8").to_owned();
        g.bench_function(format!("convert_{to}"), |b| {
            b.iter(|| run(&["convert", input, "--to", to, "-o", &out]))
        });
    }
    let pfw = dir.path().join("back.pfw");
    run(&["convert", input, "--to", "dftracer", "-o", pfw.to_str().expect("utf8")]);
    let back = dir.path().join("back.jets");
    let (pfw, back) = (pfw.to_str().expect("utf8"), back.to_str().expect("utf8"));
    g.bench_function("import_dftracer", |b| {
        b.iter(|| run(&["import", "--from", "dftracer", pfw, "-o", back]))
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
