//! A simulator trace with host samples: `jets convert --to map` writes MAP's JSON export over N
//! windows, and `jets stats` reports simulation speed over time and the host peaks.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use jets::{Metadata, Trace};
use jets_host::{HostConfig, HostMonitor};
use serde_json::Value;

mod common;
use common::jets;

/// A core that runs for ~400 ms: every step opens an instruction that lasts 8 cycles, 4 cycles
/// after the previous one, so two instructions are active at any cycle (after the first four).
fn simulate(dir: &Path) -> PathBuf {
    let path = dir.join("sim.jets");
    let trace = Trace::create(&path, Metadata::new().tool("map-test")).expect("trace");
    let clock = trace.clock().clone();
    let mut config = HostConfig::default().interval(Duration::from_millis(10));
    config.beacon_from_env = false;
    let monitor = HostMonitor::start(&trace, config).expect("monitor");
    let core = trace.root("core0", "Core").begin_at(0).expect("core");
    let start = Instant::now();
    let mut inflight = std::collections::VecDeque::new();
    while start.elapsed() < Duration::from_millis(400) {
        let clk = clock.now();
        inflight.push_back(core.child("i", "Instruction").begin_at(clk).expect("begin"));
        if inflight.len() > 2 {
            let done = inflight.pop_front().expect("one");
            let end = done.start_clk() + 8;
            done.end_at(end).expect("end");
        }
        clock.advance(4);
        std::thread::sleep(Duration::from_micros(100));
    }
    let report = monitor.stop().expect("stop");
    assert!(report.samples >= 20);
    for i in inflight {
        let end = i.start_clk() + 8;
        i.end_at(end).expect("end");
    }
    core.end_at(clock.now() + 8).expect("core end");
    trace.close().expect("close");
    path
}

#[test]
fn map_windows_hold_host_metrics_and_simulated_activity() {
    let dir = tempfile::tempdir().expect("tempdir");
    let trace = simulate(dir.path());
    let out = dir.path().join("run.map.json");
    let o = jets(&[
        "convert",
        trace.to_str().expect("utf8"),
        "--to",
        "map",
        "--windows",
        "5",
        "-o",
        out.to_str().expect("utf8"),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let doc: Value =
        serde_json::from_str(&std::fs::read_to_string(&out).expect("read")).expect("JSON");

    let info = &doc["info"];
    assert_eq!(info["number_of_processes"], 1);
    assert!(
        info["runtime"].as_f64().is_some_and(|ms| ms > 300.0 && ms < 5000.0),
        "{}",
        info["runtime"]
    );
    assert!(info["start_time"].as_str().is_some_and(|t| t.ends_with('Z') && t.len() == 20));
    assert!(info["machine"].as_str().is_some_and(|m| !m.is_empty()));

    let samples = &doc["samples"];
    assert_eq!(samples["count"], 5);
    let offsets: Vec<f64> = samples["window_start_offsets"]
        .as_array()
        .expect("offsets")
        .iter()
        .map(|v| v.as_f64().expect("f64"))
        .collect();
    assert_eq!(offsets.len(), 5);
    assert_eq!(offsets[0], 0.0);
    assert!(offsets.windows(2).all(|w| w[0] < w[1]));

    let rss = &samples["metrics"]["mem_rss_kb"];
    for key in ["mins", "maxs", "means", "vars", "sums"] {
        assert_eq!(rss[key].as_array().map(Vec::len), Some(5), "{key}");
    }
    for w in 0..5 {
        let (min, mean, max) = (
            rss["mins"][w].as_f64().expect("min"),
            rss["means"][w].as_f64().expect("mean"),
            rss["maxs"][w].as_f64().expect("max"),
        );
        assert!(min > 0.0 && min <= mean && mean <= max, "window {w}: {min} {mean} {max}");
        assert!(rss["vars"][w].as_f64().expect("var") >= 0.0);
    }
    let speed = &samples["metrics"]["sim_cycles_per_sec"]["means"];
    assert!(
        speed.as_array().expect("speed").iter().all(|v| v.as_f64().is_some_and(|s| s > 0.0)),
        "{speed}"
    );
    assert!(samples["metrics"].get("mono_ns").is_none(), "clocks are not metrics");

    // Simulated activity: the core is active over every window's cycles, two instructions are.
    let act = &samples["activity"]["simulation"];
    for w in 0..5 {
        let core = act["Core"][w].as_f64().expect("core activity");
        assert!((core - 1.0).abs() < 1e-9, "window {w}: Core {core}");
        let instr = act["Instruction"][w].as_f64().expect("instruction activity");
        assert!((1.9..=2.1).contains(&instr), "window {w}: Instruction {instr}");
    }
    assert!(act.get("HostProcess").is_none());
}

#[test]
fn map_needs_host_samples() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("plain.jets");
    let trace = Trace::create(&path, Metadata::new()).expect("trace");
    trace.root("core0", "Core").begin_at(0).expect("core").end_at(10).expect("end");
    trace.close().expect("close");
    let o = jets(&[
        "convert",
        path.to_str().expect("utf8"),
        "--to",
        "map",
        "-o",
        dir.path().join("x.json").to_str().expect("utf8"),
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("HostSync"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(!dir.path().join("x.json").exists(), "no half-written output");
}

#[test]
fn stats_reports_simulation_speed_and_host_peaks() {
    let dir = tempfile::tempdir().expect("tempdir");
    let trace = simulate(dir.path());
    let o = jets(&["stats", trace.to_str().expect("utf8"), "--format", "json"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: Value = serde_json::from_slice(&o.stdout).expect("JSON");
    let host = &v["host"];
    assert!(host["samples"].as_u64().is_some_and(|n| n >= 20));
    assert!(host["cycles_per_sec"].as_f64().is_some_and(|c| c > 0.0));
    // ~4 cycles per instruction, so the two rates agree within the edges of the run.
    let ratio = host["cycles_per_sec"].as_f64().expect("c")
        / host["sim_instructions_per_sec"].as_f64().expect("i");
    assert!((3.5..=4.5).contains(&ratio), "cycles per instruction {ratio}");
    assert_eq!(
        host["speed"].as_array().map(Vec::len),
        host["samples"].as_u64().map(|n| n as usize - 1)
    );
    assert!(host["peaks"]["mem_rss_kb"].as_f64().is_some_and(|kb| kb > 0.0));
    assert!(host["peaks"]["thread_count"].as_f64().is_some_and(|n| n >= 2.0));
    assert!(host["capabilities"]["perf_hw"]["available"].is_boolean());

    let o = jets(&["stats", trace.to_str().expect("utf8")]);
    let text = String::from_utf8(o.stdout).expect("utf8");
    assert!(
        text.contains("simulation speed")
            && text.contains("speed over time")
            && text.contains("peak mem_rss_kb"),
        "{text}"
    );
}

#[test]
fn a_denet_file_converts_too() {
    let dir = tempfile::tempdir().expect("tempdir");
    let input =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/denet/tree_gzip_children.jsonl");
    let out = dir.path().join("denet.map.json");
    let o = jets(&[
        "convert",
        input.to_str().expect("utf8"),
        "--to",
        "map",
        "--windows",
        "4",
        "-o",
        out.to_str().expect("utf8"),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let doc: Value =
        serde_json::from_str(&std::fs::read_to_string(&out).expect("read")).expect("JSON");
    assert_eq!(doc["info"]["runtime"], 775.0, "first to last sample, ms");
    assert!(doc["info"]["command_line"].as_str().is_some_and(|c| c.starts_with("bash -c")));
    assert_eq!(doc["info"]["metrics"]["wchar_total"]["max"], 107356160.0);
    let m = &doc["samples"]["metrics"];
    // The peak over the windows is denet's own peak_mem_rss_kb for this file.
    let peak = m["mem_rss_kb"]["maxs"]
        .as_array()
        .expect("maxs")
        .iter()
        .filter_map(Value::as_f64)
        .fold(0.0, f64::max);
    assert_eq!(peak, 12800.0);
    let procs = m["process_count"]["maxs"]
        .as_array()
        .expect("maxs")
        .iter()
        .filter_map(Value::as_f64)
        .fold(0.0, f64::max);
    assert_eq!(procs, 7.0);
    assert!(m.get("psi_some_avg10").is_some(), "psi_mem flattened to the HostSync key names");
    assert!(m.get("sim_cycles_per_sec").is_none(), "no sim_clk in this file");
    assert_eq!(doc["samples"]["activity"], serde_json::json!({}));
}
