//! Validation throughput on a warm trace written by the SDK's writer (`JETS_BENCH_MB`, default
//! 1024 MB): records with typed data and hints, events, annotations, record_ends.
//!
//! `cargo bench -p jets-sdk --bench validate -- --warm-up-time 1 --measurement-time 3`

#![allow(missing_docs)] // criterion_group! generates undocumented items

use std::path::PathBuf;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use jets::{Metadata, Trace};
use jets_format::{Severity, Status};
use jets_read::validate::Validator;
use jets_read::Reader;

/// Writes (once) a trace of about `mb` megabytes and returns its path.
fn trace(mb: u64) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let path = dir.join(format!("validate-bench-{mb}mb.jets"));
    if path.exists() {
        return path;
    }
    let tmp = path.with_extension("tmp");
    let trace =
        Trace::create(&tmp, Metadata::new().hardware_model("bench").clock_frequency_mhz(1000.0))
            .expect("create");
    let core = trace.root("core0", "Core").unit_id(0).begin_at(0).expect("root");
    let mut clk = 0u64;
    let target = mb << 20;
    let mut written = 0u64;
    while written < target {
        for _ in 0..1000 {
            clk += 1;
            let insn = core
                .child("add x1, x2, x3", "Instruction")
                .field("pc", 0x8000_0000u64 + clk * 4)
                .display_label("ADD")
                .status(Status::Complete)
                .begin_at(clk)
                .expect("child");
            insn.event("Fetch").emit_at(clk).expect("event");
            insn.event("Decode").description("decode stage").emit_at(clk + 1).expect("event");
            insn.event("Stall").severity(Severity::Warning).emit_at(clk + 2).expect("event");
            if clk % 16 == 0 {
                insn.annotation("Operands").data_json(r#"{"rs1":2,"rs2":3}"#).emit().expect("ann");
            }
            insn.end_at(clk + 3).expect("end");
        }
        trace.flush().expect("flush");
        written = std::fs::metadata(&tmp).map(|m| m.len()).unwrap_or(0);
    }
    core.end_at(clk + 10).expect("end");
    trace.close().expect("close");
    std::fs::rename(&tmp, &path).expect("rename");
    path
}

fn bench(c: &mut Criterion) {
    let mb = std::env::var("JETS_BENCH_MB").ok().and_then(|s| s.parse().ok()).unwrap_or(1024);
    let path = trace(mb);
    let len = std::fs::metadata(&path).expect("trace").len();
    let mut g = c.benchmark_group("validate");
    g.sample_size(10);
    g.throughput(Throughput::Bytes(len));
    for threads in [1, 2] {
        g.bench_function(format!("{mb}MB/{threads}-threads"), |b| {
            b.iter(|| {
                let mut reader = Reader::open(&path).expect("open");
                let report =
                    Validator::new().threads(threads).run(&mut reader, |_| {}).expect("read");
                assert_eq!(report.errors, 0);
                report.counts.lines
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
