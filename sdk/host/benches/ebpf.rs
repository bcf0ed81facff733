//! Events per second the eBPF I/O collector captures: this process writes 1 byte to /dev/null in
//! a loop while the collector traces it (each write is one ring-buffer record, decoded, counted
//! and, in the second case, written as io-tracer CSV). After each case the bench prints the
//! lost-record counters (the rate counts only if nothing was lost) and the collector's capacity:
//! records per CPU-second of its thread. Needs root; prints `unavailable: <reason>` otherwise.

#![allow(missing_docs)] // criterion_group! generates an undocumented function

use std::os::fd::AsRawFd;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use jets_host::ebpf::{capability, IoTraceConfig, IoTracer};

const BATCH: u64 = 10_000;

fn case(c: &mut Criterion, name: &str, config: IoTraceConfig) {
    let tracer = match IoTracer::start(std::process::id(), config) {
        Ok(t) => t,
        Err(e) => {
            println!("unavailable: {e}");
            return;
        }
    };
    let null = std::fs::OpenOptions::new().write(true).open("/dev/null").expect("/dev/null");
    let fd = null.as_raw_fd();
    let mut g = c.benchmark_group("ebpf");
    g.throughput(Throughput::Elements(BATCH));
    g.bench_function(name, |b| {
        b.iter(|| {
            for _ in 0..BATCH {
                // SAFETY: a valid fd and a 1-byte buffer.
                unsafe { libc::write(fd, b"x".as_ptr().cast(), 1) };
            }
        })
    });
    g.finish();
    let report = tracer.stop().expect("stopping the collector");
    let lost: u64 = report.lost.iter().sum();
    println!(
        "ebpf {name}: {} records decoded, {} fs rows, {:.0} records per collector CPU-second, \
         {lost} lost{}",
        report.records,
        report.rows[0],
        report.records_per_cpu_second(),
        if lost == 0 { " (no loss)" } else { " — the rate above is NOT loss-free" }
    );
}

fn traced_writes(c: &mut Criterion) {
    let cap = capability();
    if !cap.available {
        println!("unavailable: {}", cap.reason.unwrap_or_default());
        return;
    }
    case(c, "traced_write_syscalls", IoTraceConfig::default());
    let dir = tempfile::tempdir().expect("a temporary directory");
    case(c, "traced_write_syscalls_to_csv", IoTraceConfig::default().output_dir(dir.path()));
}

criterion_group!(benches, traced_writes);
criterion_main!(benches);
