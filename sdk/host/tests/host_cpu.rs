//! `cpu_usage` comes from the processes' CPU clocks (nanoseconds), not from clock ticks: an
//! interval shorter than a tick in which the process surely ran reads more than 0%.
#![cfg(target_os = "linux")]

use jets_host::procfs::clock_ns;
use jets_host::{SamplerOptions, TreeSampler};

#[test]
fn short_busy_intervals_never_read_zero() {
    let opts = SamplerOptions { include_children: false, perf: false, ..Default::default() };
    let mut s = TreeSampler::new(std::process::id(), opts).expect("sampler");
    s.sample();
    let mut usages = Vec::new();
    for _ in 0..30 {
        // 3 ms of this thread's own CPU time between two samples: whatever the load, the
        // process ran for at least that long in the interval. Clock ticks (10 ms) would show
        // most of these intervals as 0%.
        let t0 = clock_ns(libc::CLOCK_THREAD_CPUTIME_ID);
        while clock_ns(libc::CLOCK_THREAD_CPUTIME_ID) - t0 < 3_000_000 {}
        usages.push(s.sample().parent.expect("own process").cpu_usage);
    }
    assert!(usages.iter().all(|&u| u > 0.0), "intervals read 0%: {usages:?}");
}
