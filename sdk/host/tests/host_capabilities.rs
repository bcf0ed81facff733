//! The capabilities manifest says why a source is unavailable (on this VM: perf hardware counters).
#![cfg(target_os = "linux")]

use jets_host::perf::Perf;
use jets_host::procfs::thread_ids;
use jets_host::{SamplerOptions, TreeSampler};

#[test]
fn perf_hardware_counters_state_why_not() {
    let me = std::process::id();
    let mut perf = Perf::open(&thread_ids(me).expect("tasks"));
    let hw = &perf.hw_capability;
    eprintln!("perf_hw: {}", hw.to_json());
    eprintln!("perf_sw: {}", perf.sw_capability.to_json());
    if hw.available {
        assert!(perf.hardware_deltas().is_some());
        assert!(perf.instructions_total().is_some());
    } else {
        let why = hw.reason.as_deref().expect("a reason when unavailable");
        assert!(why.contains("perf_event_open"), "reason names the syscall: {why}");
        assert!(
            perf.hardware_deltas().is_none(),
            "no hardware numbers when the counters did not open"
        );
        assert!(perf.instructions_total().is_none());
        // The software fallback counts for real where perf_event_open is allowed at all (container
        // seccomp profiles may forbid the syscall: then that is the stated reason).
        let sw = perf.sw_capability.clone();
        if !sw.available {
            let why = sw.reason.as_deref().expect("a reason when unavailable");
            assert!(why.contains("perf_event_open"), "{why}");
            assert!(perf.software_deltas().is_none());
            return;
        }
        // Busy for 20 ms of wall time whatever the build's speed (a fixed loop took under 1 ms
        // of CPU in a release build).
        let (start, mut x) = (std::time::Instant::now(), 0u64);
        while start.elapsed() < std::time::Duration::from_millis(20) {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(1));
        }
        let d = perf.software_deltas().expect("software deltas");
        assert!(d.task_clock_ns > 1_000_000, "task clock moved: {d:?}");
    }
}

#[test]
fn every_source_has_a_verdict_and_unavailable_ones_a_reason() {
    let sampler = TreeSampler::new(std::process::id(), SamplerOptions::default()).expect("sampler");
    let caps = sampler.capabilities();
    for source in ["proc_stat", "proc_io", "net", "psi", "perf_hw", "perf_sw"] {
        let c = caps.get(source).unwrap_or_else(|| panic!("{source} missing"));
        assert!(
            c.available || c.reason.as_deref().is_some_and(|r| !r.is_empty()),
            "{source}: {:?}",
            c
        );
    }
    let json = caps.to_json();
    assert_eq!(
        json["perf_hw"]["available"],
        caps.get("perf_hw").map(|c| c.available).unwrap_or(false)
    );
}
