use std::collections::HashMap;

use super::*;

#[test]
fn sums_are_right_and_the_trace_validates_clean() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("multicore.jets");
    let config = Config { cores: 3, words_per_core: 40, ..Config::default() };
    let (outcome, summary) = run_to_file(&path, config).unwrap();
    let want: i64 = (0..120).map(word).sum();
    assert_eq!(outcome.total, want);
    assert_eq!(outcome.requests, 3 * 41);
    assert!(outcome.queued_cycles > 0, "three cores share one port: some requests wait");

    let bytes = std::fs::read(&path).unwrap();
    let (diagnostics, report) = jets_read::validate::validate_bytes(&bytes);
    assert!(diagnostics.is_empty(), "{diagnostics:#?}");
    assert_eq!(report.open_records, 0);
    assert_eq!(summary.records, report.counts.records);

    // Every MemRequest (written on the memory thread) hangs off an Instruction record written
    // on a core thread.
    let mut types = HashMap::new();
    let mut requests = 0;
    for line in std::str::from_utf8(&bytes).unwrap().lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        if v["type"] == "record" {
            let rt = v["record_type"].as_str().unwrap().to_owned();
            if rt == "MemRequest" {
                requests += 1;
                let parent = v["parent_id"].as_u64().unwrap();
                assert_eq!(types[&parent], "Instruction");
            }
            types.insert(v["id"].as_u64().unwrap(), rt);
        }
    }
    assert_eq!(requests, outcome.requests);
}

#[test]
fn the_simulation_is_deterministic_and_contention_costs_cycles() {
    let trace = || Trace::to_writer(std::io::sink(), Metadata::new()).unwrap();
    let config = Config { cores: 4, words_per_core: 30, ..Config::default() };
    let a = run(&trace(), config).unwrap();
    let b = run(&trace(), config).unwrap();
    assert_eq!(a, b);
    let alone = run(&trace(), Config { cores: 1, ..config }).unwrap();
    // One core alone: per word 1 + latency + 1 cycles, and the store.
    assert_eq!(alone.cycles, 30 * (2 + config.latency) + config.latency);
    assert_eq!(alone.queued_cycles, 0);
    assert!(a.cycles > alone.cycles);
}
