//! Cost of the host collector.
//!
//! * `host/sample_tree`: one `TreeSampler::sample` of this process (stat, io, the `/proc` scan for
//!   descendants, PSI, net, perf reads), the work the sampler thread does per tick.
//! * Before criterion runs, a 10 s simulation with a `HostMonitor` at 100 ms (no beacon) prints the
//!   sampler thread's CPU time over wall time: the collector's overhead as a share of one core.
//!   `HOST_OVERHEAD_SECS` changes the duration.

use std::time::{Duration, Instant};

use criterion::Criterion;
use jets::{Metadata, Trace};
use jets_host::{HostConfig, HostMonitor, SamplerOptions, TreeSampler};

fn overhead_run() {
    let secs: u64 =
        std::env::var("HOST_OVERHEAD_SECS").ok().and_then(|s| s.parse().ok()).unwrap_or(10);
    let dir = tempfile::tempdir().expect("tempdir");
    let trace = Trace::create(dir.path().join("sim.jets"), Metadata::new()).expect("trace");
    let clock = trace.clock().clone();
    let mut config = HostConfig::default().interval(Duration::from_millis(100));
    config.beacon_from_env = false;
    let monitor = HostMonitor::start(&trace, config).expect("monitor");
    let core = trace.root("core0", "Core").begin_at(0).expect("core");
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(secs) {
        let clk = clock.advance(4);
        core.child("i", "Instruction").begin_at(clk).expect("begin").end_at(clk + 3).expect("end");
        std::thread::sleep(Duration::from_micros(20));
    }
    let report = monitor.stop().expect("stop");
    core.end_at(clock.now()).expect("end");
    trace.close().expect("close");
    println!(
        "host monitor at 100 ms over {secs} s: {} samples, sampler thread CPU {:.2} ms / {:.0} ms wall = {:.4}% of one core ({:.0} us per sample)",
        report.samples,
        report.sampler_cpu_ns as f64 / 1e6,
        report.wall_ns as f64 / 1e6,
        report.overhead() * 100.0,
        report.sampler_cpu_ns as f64 / 1e3 / report.samples.max(1) as f64
    );
}

fn sample(c: &mut Criterion) {
    let mut sampler =
        TreeSampler::new(std::process::id(), SamplerOptions::default()).expect("sampler");
    c.bench_function("host/sample_tree", |b| b.iter(|| sampler.sample()));
}

fn main() {
    overhead_run();
    let mut c = Criterion::default().configure_from_args();
    sample(&mut c);
    c.final_summary();
}
