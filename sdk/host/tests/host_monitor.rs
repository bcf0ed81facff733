//! A test simulator with the host collector and the clock beacon: sync points land in the trace,
//! both clocks are monotonic, cycle ↔ time round-trips, speed is reported, and the capabilities
//! say why a source is missing instead of writing zeros.
#![cfg(target_os = "linux")]

use std::time::{Duration, Instant};

use jets::format::Line;
use jets::{Metadata, Trace};
use jets_host::sync::{
    collect, ClockMap, CAPABILITIES_ANNOTATION, ENV_ANNOTATION, HOST_RECORD_TYPE,
};
use jets_host::{ClockBeacon, HostConfig, HostMonitor, BEACON_ENV};

#[test]
fn simulator_with_host_monitor_and_beacon() {
    let dir = tempfile::tempdir().expect("tempdir");
    let beacon_path = dir.path().join("beacon");
    let monitor_side = ClockBeacon::create(&beacon_path).expect("beacon");
    // The only test in this binary, so no other thread reads the environment meanwhile.
    std::env::set_var(BEACON_ENV, &beacon_path);

    let path = dir.path().join("sim.jets");
    let trace = Trace::create(&path, Metadata::new().clock_frequency_mhz(1000.0)).expect("trace");
    let clock = trace.clock().clone();
    let monitor =
        HostMonitor::start(&trace, HostConfig::default().interval(Duration::from_millis(25)))
            .expect("start");

    // The simulation: a core retiring instructions, with a slow phase in the middle.
    let core = trace.root("core0", "Core").begin_at(0).expect("core");
    let start = Instant::now();
    let mut instructions = 0u64;
    let mut seen_by_monitor = Vec::new();
    while start.elapsed() < Duration::from_millis(600) {
        let clk = clock.advance(4);
        let i = core.child("add", "Instruction").begin_at(clk).expect("instr");
        i.end_at(clk + 3).expect("end");
        instructions += 1;
        let slow = start.elapsed() > Duration::from_millis(250)
            && start.elapsed() < Duration::from_millis(400);
        std::thread::sleep(Duration::from_micros(if slow { 500 } else { 50 }));
        if instructions % 200 == 0 {
            seen_by_monitor.extend(monitor_side.cycle());
        }
    }
    let report = monitor.stop().expect("stop");
    let last = clock.advance(4);
    core.end_at(last).expect("core end");
    trace.close().expect("close");

    // The beacon carried the simulator's cycle to the other mapping, never ahead of the clock.
    assert!(!seen_by_monitor.is_empty(), "monitor never saw a published cycle");
    assert!(seen_by_monitor.windows(2).all(|w| w[0] <= w[1]));
    assert!(*seen_by_monitor.last().expect("one") <= last);
    assert!(report.capabilities.get("beacon").is_some_and(|c| c.available));

    // The trace is valid JETS, and holds the host record, its annotations and the sync points.
    let text = std::fs::read_to_string(&path).expect("read");
    let (diagnostics, validation) = jets_read::validate::validate_bytes(text.as_bytes());
    assert!(validation.is_valid(), "{diagnostics:?}");
    let lines: Vec<Line<'_>> = text.lines().map(|l| Line::parse(l).expect("line parses")).collect();
    let host_records: Vec<u64> = lines
        .iter()
        .filter_map(|l| match l {
            Line::Record(r) if r.record_type == HOST_RECORD_TYPE => Some(r.id),
            _ => None,
        })
        .collect();
    assert_eq!(host_records.len(), 1);
    let annotations: Vec<&str> = lines
        .iter()
        .filter_map(|l| match l {
            Line::Annotation(a) if a.record_id == host_records[0] => Some(a.name.as_ref()),
            _ => None,
        })
        .collect();
    assert_eq!(annotations, [ENV_ANNOTATION, CAPABILITIES_ANNOTATION]);
    let collected = collect(lines.clone(), "Instruction").expect("collect");
    assert_eq!(collected.points.len() as u64, report.samples);
    assert!(report.samples >= 10, "only {} samples in 600 ms at 25 ms", report.samples);
    assert_eq!(collected.counted_clks.len() as u64, instructions);

    // Monotonic in both clocks (ClockMap::new checks), and the map round-trips.
    let points: Vec<_> = collected.points.iter().map(|(p, _)| *p).collect();
    assert_eq!(points, report.sync_points);
    assert!(points.windows(2).all(|w| w[0].clk <= w[1].clk
        && w[0].mono_ns < w[1].mono_ns
        && w[0].real_ns <= w[1].real_ns));
    let map = ClockMap::new(points.clone()).expect("monotonic sync points");
    assert_eq!(report.clock_map().expect("the report's own map"), map);
    let (lo, hi) = (points[0].clk, points[points.len() - 1].clk);
    assert!(hi > lo, "the clock advanced under monitoring");
    for k in 0..=20 {
        let clk = lo as f64 + (hi - lo) as f64 * k as f64 / 20.0;
        let ns = map.cycle_to_mono_ns(clk).expect("in range");
        let back = map.mono_ns_to_cycle(ns).expect("in range");
        assert!((back - clk).abs() < 1e-3 * (hi - lo) as f64 / 20.0, "{clk} -> {ns} -> {back}");
    }

    // Speed per interval: cycles/s and simulated instructions/s are reported and consistent.
    let speed = map.speed(&collected.counted_clks);
    assert_eq!(speed.len(), points.len() - 1);
    let total_instr: u64 = speed.iter().map(|s| s.sim_instructions).sum();
    assert!(total_instr > 0 && total_instr <= instructions);
    assert!(speed.iter().all(|s| s.cycles_per_sec >= 0.0 && s.cycles_per_sec.is_finite()));
    let fastest = speed.iter().map(|s| s.cycles_per_sec).fold(0.0, f64::max);
    let slowest = speed
        .iter()
        .filter(|s| s.cycles_per_sec > 0.0)
        .map(|s| s.cycles_per_sec)
        .fold(f64::INFINITY, f64::min);
    assert!(fastest > 2.0 * slowest, "the slow phase shows: fastest {fastest}, slowest {slowest}");

    // Metrics ride along; missing sources are absent, not zero.
    let data = &collected.points.last().expect("points").1;
    assert!(data["mem_rss_kb"].as_u64().is_some_and(|kb| kb > 0));
    assert!(data["thread_count"].as_u64().is_some_and(|n| n >= 2), "simulator + sampler thread");
    let hw = report.capabilities.get("perf_hw").expect("perf_hw capability");
    if hw.available {
        assert!(data.contains_key("perf_cycles") && data.contains_key("host_instructions"));
    } else {
        assert!(!data.contains_key("perf_cycles") && !data.contains_key("host_instructions"));
        assert!(speed.iter().all(|s| s.host_instructions_per_cycle.is_none()));
        let sw = report.capabilities.get("perf_sw").expect("perf_sw capability");
        assert_eq!(sw.available, data.contains_key("perf_task_clock_ns"));
    }
    eprintln!(
        "host monitor: {} samples, sampler CPU {:.3} ms over {:.0} ms wall ({:.3}% of a core, with a 10 ms beacon)",
        report.samples,
        report.sampler_cpu_ns as f64 / 1e6,
        report.wall_ns as f64 / 1e6,
        report.overhead() * 100.0
    );
}
