//! `jets bench --quick --format json --rounds 2` reports every figure as a number (each Tiny5 mode
//! the median of its two rounds), and what else the machine ran meanwhile.

use std::path::Path;
use std::process::Command;

fn quick_bench(dir: &Path, extra: &[&str]) -> serde_json::Value {
    let run = Command::new(env!("CARGO_BIN_EXE_jets"))
        .args(["bench", "--quick", "--format", "json", "--dir"])
        .arg(dir)
        .args(extra)
        .output()
        .unwrap();
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    serde_json::from_slice(&run.stdout).unwrap()
}

/// The least and the greatest of `xs`.
fn range(xs: &[f64]) -> (f64, f64) {
    xs.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), &x| (l.min(x), h.max(x)))
}

#[test]
fn bench_json_has_every_figure() {
    let dir = tempfile::tempdir().unwrap();
    // Two rounds, not the default three: every per-round figure must then have two entries
    // (`--rounds`), and a round is several runs of the simulator.
    let v = quick_bench(dir.path(), &["--rounds", "2"]);
    for field in [
        "producer_event_ns_p50_1_thread",
        "producer_event_ns_p99_1_thread",
        "producer_event_ns_p50_2_threads",
        "producer_event_ns_p99_2_threads",
        "producer_event_fields_ns_p50_1_thread",
        "producer_event_fields_ns_p99_1_thread",
        "producer_event_fields_ns_p50_2_threads",
        "producer_event_fields_ns_p99_2_threads",
        "producer_worker_record_ns_p50_2_threads",
        "producer_worker_record_ns_p99_2_threads",
        "end_to_end_lines_per_sec",
        "end_to_end_bytes_per_line",
        "layer_span_ns",
        "validation_gb_per_sec",
        "pipeline_untraced_sec",
        "slowdown_disabled",
        "slowdown_window_1pct",
        "slowdown_sample_1pct",
        "slowdown_recorder",
        "slowdown_count",
        "slowdown_full",
        "slowdown_write_floor",
        "slowdown_recorder_running",
        "recorder_dump_sec",
        "threads_many_vs_1_count",
        "threads_many_vs_1_recorder",
        "threads_many_vs_1_full",
    ] {
        let x = v[field].as_f64().unwrap_or_else(|| panic!("{field} missing in {v}"));
        assert!(x.is_finite() && x > 0.0, "{field} = {x}");
    }
    // Whether the full trace's bytes went around the page cache: a quick bench's trace is far
    // below the 512 MiB the page cache keeps, so they did not.
    assert_eq!(v["write_floor_direct"], false, "{v}");
    assert!(
        v["producer_event_ns_p99_1_thread"].as_f64()
            >= v["producer_event_ns_p50_1_thread"].as_f64()
    );
    // Each round's figures: one per round, for the untraced time and for every mode.
    let rounds = &v["pipeline_rounds"];
    let untraced = rounds["untraced_sec"].as_array().unwrap();
    assert_eq!(untraced.len(), 2, "--rounds 2: {rounds}");
    // Every untraced run of each round: one before each of the six modes and one after the
    // last, which each mode's ratio is taken against (the two either side of it).
    let runs = rounds["untraced_runs_sec"].as_array().unwrap();
    assert_eq!(runs.len(), untraced.len(), "{rounds}");
    for (r, median) in runs.iter().zip(untraced) {
        let r: Vec<f64> = r.as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect();
        assert_eq!(r.len(), 7, "{rounds}");
        assert!(r.iter().all(|x| x.is_finite() && *x > 0.0), "{rounds}");
        let (lo, hi) = range(&r);
        let median = median.as_f64().unwrap();
        assert!(lo <= median && median <= hi, "{rounds}");
    }
    for field in [
        "slowdown_disabled",
        "slowdown_window_1pct",
        "slowdown_sample_1pct",
        "slowdown_recorder",
        "slowdown_count",
        "slowdown_full",
        "slowdown_write_floor",
        "slowdown_recorder_running",
        "recorder_dump_sec",
    ] {
        let xs: Vec<f64> =
            rounds[field].as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect();
        assert_eq!(xs.len(), untraced.len(), "{field} in {rounds}");
        assert!(xs.iter().all(|x| x.is_finite() && *x > 0.0), "{field} in {rounds}");
        // The figure is the median of its rounds.
        let (lo, hi) = range(&xs);
        let median = v[field].as_f64().unwrap();
        assert!(lo <= median && median <= hi, "{field}: {median} outside its rounds {xs:?}");
    }
    // The core-to-core round trip: one per round, measured wherever two CPUs exist.
    let trips = rounds["core_round_trip_ns"].as_array().unwrap();
    assert_eq!(trips.len(), untraced.len(), "{rounds}");
    let two_cpus = v["cpus"].as_u64().unwrap() >= 2;
    for x in trips.iter().chain([&v["core_round_trip_ns"]]) {
        match x.as_f64() {
            Some(ns) => assert!(two_cpus && ns.is_finite() && ns > 0.0, "{v}"),
            None => assert!(!two_cpus && x.is_null(), "{v}"),
        }
    }
    // The CPU each round's simulator was pinned to, in turn over the CPUs, where there are two.
    let cpus = rounds["simulator_cpu"].as_array().unwrap();
    assert_eq!(cpus.len(), untraced.len(), "{rounds}");
    if two_cpus && cfg!(target_os = "linux") {
        let cpus: Vec<u64> = cpus.iter().map(|c| c.as_u64().expect("a CPU")).collect();
        assert_ne!(cpus[0], cpus[1], "in turn: {rounds}");
    } else {
        assert!(cpus.iter().all(|c| c.is_null()), "{rounds}");
    }
    // Each round's stack at its own offset in a page, the first at none (`jets_host::layout`).
    let offsets: Vec<u64> = rounds["stack_offset"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o.as_u64().expect("bytes"))
        .collect();
    assert_eq!(offsets.len(), untraced.len(), "{rounds}");
    assert_eq!(offsets[0], 0, "{rounds}");
    assert!(offsets.windows(2).all(|w| w[0] != w[1] && w[1] < 4096), "{rounds}");
    // The floor writes the full trace's bytes: a trace holds at least its header and footer.
    assert!(v["full_trace_bytes"].as_u64().unwrap() > 100, "{v}");
    // The recorder's file holds its window (more than a header and footer), less than the
    // full trace; its run up to the close is part of its whole run.
    let recorder_bytes = v["recorder_dump_bytes"].as_u64().unwrap();
    assert!(
        recorder_bytes > 1000 && recorder_bytes < v["full_trace_bytes"].as_u64().unwrap(),
        "{v}"
    );
    assert!(
        v["slowdown_recorder_running"].as_f64().unwrap()
            <= v["slowdown_recorder"].as_f64().unwrap() * 1.0001,
        "{v}"
    );
    // The simulator's waits for room: part of each round's run (a wait counted across runs, or
    // in the wrong unit, would not fit in it).
    for (waited, mode) in
        [("recorder_wait_sec", "slowdown_recorder"), ("full_wait_sec", "slowdown_full")]
    {
        let x = v[waited].as_f64().unwrap_or_else(|| panic!("{waited} missing in {v}"));
        assert!(x.is_finite() && x >= 0.0, "{waited} = {x}");
        let xs = rounds[waited].as_array().unwrap();
        assert_eq!(xs.len(), untraced.len(), "{waited} in {rounds}");
        for (r, w) in xs.iter().enumerate() {
            let run = rounds[mode][r].as_f64().unwrap() * untraced[r].as_f64().unwrap();
            let w = w.as_f64().unwrap();
            assert!(
                w >= 0.0 && w <= run * 1.05 + 0.002,
                "{waited} {w} s in a {run} s run: {rounds}"
            );
        }
    }
    assert!(v["cpus"].as_u64().unwrap() >= 1);
    assert_eq!(v["quick"], true);
    // The end-to-end file lives in --dir only while the bench runs.
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);

    // What else the machine ran during the timed runs, in cores: measured on Linux, null
    // elsewhere. (That the bench's own work is left out is `jets_host::load`'s unit test, and
    // that another process is seen is `pipeline_modes`' test, which takes the same measure and
    // a second, where a bench takes half a minute: here the machine may be busy with anything.)
    if !cfg!(target_os = "linux") {
        assert!(v["other_cpu_cores"].is_null() && v["steal_cpu_cores"].is_null(), "{v}");
        eprintln!("NOT CHECKED: other work on the machine is measured on Linux only");
        return;
    }
    for key in ["other_cpu_cores", "steal_cpu_cores"] {
        let x = v[key].as_f64().unwrap_or_else(|| panic!("{key} missing in {v}"));
        assert!(x.is_finite() && x >= 0.0, "{key} = {x}");
        let xs = rounds[key].as_array().unwrap();
        assert_eq!(xs.len(), untraced.len(), "{key} in {rounds}");
        assert!(xs.iter().all(|x| x.as_f64().is_some_and(|x| x >= 0.0)), "{key} in {rounds}");
    }
}

/// A round count outside 1..=99 is refused before anything runs, naming the option.
#[test]
fn rounds_out_of_range_is_refused() {
    for bad in ["0", "100", "three"] {
        let run = Command::new(env!("CARGO_BIN_EXE_jets"))
            .args(["bench", "--quick", "--rounds", bad])
            .output()
            .unwrap();
        assert_eq!(run.status.code(), Some(2), "--rounds {bad}");
        let err = String::from_utf8_lossy(&run.stderr);
        assert!(err.contains("--rounds"), "--rounds {bad}: {err}");
        assert!(run.stdout.is_empty(), "--rounds {bad} ran the bench");
    }
}
