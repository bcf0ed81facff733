//! `HostConfig::discover_children_every` decides how often the in-process monitor lists `/proc`
//! for new children; in between, a child that appeared is not in the samples yet.
//! One test in this binary: no other test's children are counted.
#![cfg(target_os = "linux")]

use std::time::Duration;

use jets::{Metadata, Trace};
use jets_host::{HostConfig, HostMonitor};

/// Processes in the monitor's last sample, with `sleep` started after the monitor.
fn processes_seen(discover_children_every: u32) -> usize {
    let dir = tempfile::tempdir().expect("tempdir");
    let trace = Trace::create(dir.path().join("t.jets"), Metadata::new()).expect("trace");
    let config = HostConfig {
        perf: false,
        env_snapshot: false,
        beacon_from_env: false,
        discover_children_every,
        ..HostConfig::default().interval(Duration::from_millis(10))
    };
    let monitor = HostMonitor::start(&trace, config).expect("start");
    let mut child = std::process::Command::new("sleep").arg("30").spawn().expect("spawn sleep");
    // At least 10 samples after the child started (the sampler thread may be held up: it does
    // not matter how many more).
    std::thread::sleep(Duration::from_millis(150));
    let report = monitor.stop().expect("stop");
    child.kill().expect("kill");
    child.wait().expect("reap");
    trace.close().expect("close");
    assert!(report.samples >= 2, "{} samples", report.samples);
    report.last.aggregated.expect("aggregated").process_count
}

#[test]
fn children_are_looked_for_every_n_samples() {
    // Discovery at the priming sample only (before the child existed), then every 1000th.
    assert_eq!(processes_seen(1000), 1, "the child is not looked for before the 1000th sample");
    assert_eq!(processes_seen(1), 2, "looked for at every sample, the child is found");
}
