//! `jets import --from denet` on the denet test files (real denet 0.10.3 output): a valid JETS
//! trace with one `HostProcess` record and one `HostSample` event per sample.

use std::path::{Path, PathBuf};
use std::process::Command;

use jets::format::Line;
use serde_json::Value;

fn files() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/denet");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("test data")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .collect();
    files.sort();
    assert!(!files.is_empty());
    files
}

/// Samples as denet counts them: `sample` lines, and `tree` lines whose `aggregated` is not null.
fn samples(path: &Path) -> usize {
    std::fs::read_to_string(path)
        .expect("read")
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str::<Value>(l).expect("json"))
        .filter(|v| match v["kind"].as_str() {
            Some("sample") => true,
            Some("tree") => !v["aggregated"].is_null(),
            Some(_) => false,
            None => {
                v.get("cpu_usage").is_some() || v.get("aggregated").is_some_and(|a| !a.is_null())
            }
        })
        .count()
}

#[test]
fn every_denet_file_becomes_a_valid_trace_of_host_samples() {
    let dir = tempfile::tempdir().expect("tmp");
    for input in files() {
        let out = dir.path().join("out.jets");
        let o = Command::new(env!("CARGO_BIN_EXE_jets"))
            .args(["import", "--from", "denet", input.to_str().expect("utf8"), "-o"])
            .arg(&out)
            .output()
            .expect("run jets");
        assert!(o.status.success(), "{}: {}", input.display(), String::from_utf8_lossy(&o.stderr));
        let bytes = std::fs::read(&out).expect("read");
        let (diagnostics, report) = jets_read::validate::validate_bytes(&bytes);
        assert!(report.is_valid(), "{}: {diagnostics:#?}", input.display());
        let text = String::from_utf8(bytes).expect("utf8");
        let (mut hosts, mut events, mut env) = (0, 0, 0);
        let mut last_clk = 0;
        for l in text.lines() {
            match Line::parse(l).expect("line") {
                Line::Record(r) => {
                    assert_eq!(r.record_type, "HostProcess");
                    hosts += 1;
                }
                Line::Event(e) => {
                    assert_eq!(e.name, "HostSample");
                    let d = e.data.as_ref().expect("data");
                    assert!(d["real_ns"].as_u64().is_some() && d["mem_rss_kb"].as_u64().is_some());
                    assert!(e.clk >= last_clk, "samples in time order");
                    last_clk = e.clk;
                    events += 1;
                }
                Line::Annotation(a) if a.name == "HostEnv" => {
                    assert!(a.data.get("kernel").is_some(), "{l}");
                    env += 1;
                }
                _ => {}
            }
        }
        assert_eq!(hosts, 1);
        assert_eq!(events, samples(&input), "{}: one event per sample", input.display());
        let with_env = std::fs::read_to_string(&input).expect("read").contains("\"kind\":\"env\"");
        assert_eq!(env, usize::from(with_env), "{}", input.display());
    }
}
