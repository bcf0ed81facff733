//! `jets import --from denet` on the denet test files (real denet 0.10.3 output): a valid JETS
//! trace with one root `HostProcess` record and one `HostSample` event per sample, and a
//! `HostProcess` record per descendant carrying its own metrics and `child` line: the monitor
//! file's per-child data survives the import.

use std::collections::HashMap;
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
        let mut root = None;
        for l in text.lines() {
            match Line::parse(l).expect("line") {
                Line::Record(r) => {
                    assert_eq!(r.record_type, "HostProcess");
                    if r.parent_id.is_none() {
                        hosts += 1;
                        root = Some(r.id);
                    }
                }
                Line::Event(e) if Some(e.record_id) == root => {
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

fn import(input: &Path, out: &Path) -> String {
    let o = Command::new(env!("CARGO_BIN_EXE_jets"))
        .args(["import", "--from", "denet", input.to_str().expect("utf8"), "-o"])
        .arg(out)
        .output()
        .expect("run jets");
    assert!(o.status.success(), "{}: {}", input.display(), String::from_utf8_lossy(&o.stderr));
    std::fs::read_to_string(out).expect("read")
}

/// Per-child metrics of a monitor file, rebuilt from the imported trace, equal the file's (CV-DENET-2): for
/// each child pid, every (sample index, metrics) of the tree lines; and each `child` line's
/// `ppid`, `cmd` and `exe` are on that child's record.
#[test]
fn per_child_metrics_and_child_lines_round_trip() {
    let dir = tempfile::tempdir().expect("tmp");
    let mut with_children = 0;
    for input in files() {
        let mut want: HashMap<u64, Vec<(usize, u64, u64, f64)>> = HashMap::new();
        let mut child_lines: HashMap<u64, Value> = HashMap::new();
        let mut index = 0;
        for l in std::fs::read_to_string(&input).expect("read").lines() {
            let v: Value = serde_json::from_str(l).expect("json");
            if v["kind"] == "child" {
                child_lines.insert(v["pid"].as_u64().expect("pid"), v);
                continue;
            }
            if v["aggregated"].is_null() {
                continue;
            }
            for c in v["children"].as_array().into_iter().flatten() {
                let m = &c["metrics"];
                want.entry(c["pid"].as_u64().expect("pid")).or_default().push((
                    index,
                    m["mem_rss_kb"].as_u64().expect("rss"),
                    m["disk_write_bytes"].as_u64().expect("writes"),
                    m["cpu_usage"].as_f64().expect("cpu"),
                ));
            }
            index += 1;
        }
        if want.is_empty() && child_lines.is_empty() {
            continue;
        }
        with_children += 1;
        let text = import(&input, &dir.path().join("out.jets"));
        let mut pid_of: HashMap<u64, u64> = HashMap::new();
        let mut root = 0;
        let mut sample_clks: Vec<u64> = Vec::new();
        let mut got: HashMap<u64, Vec<(usize, u64, u64, f64)>> = HashMap::new();
        for l in text.lines() {
            match Line::parse(l).expect("line") {
                Line::Record(r) if r.parent_id.is_none() => root = r.id,
                Line::Record(r) => {
                    assert_eq!(r.parent_id, Some(root), "children hang off the monitored process");
                    let d = r.data.as_ref().expect("data");
                    let pid = d["pid"].as_u64().expect("pid");
                    if let Some(cl) = child_lines.get(&pid) {
                        for k in ["ppid", "cmd", "exe"] {
                            assert_eq!(d[k], cl[k], "{}: pid {pid} {k}", input.display());
                        }
                    }
                    pid_of.insert(r.id, pid);
                }
                Line::Event(e) if e.record_id == root => sample_clks.push(e.clk),
                Line::Event(e) => {
                    let d = e.data.as_ref().expect("data");
                    let at = sample_clks.iter().rposition(|&c| c == e.clk).expect("a sample");
                    got.entry(pid_of[&e.record_id]).or_default().push((
                        at,
                        d["mem_rss_kb"].as_u64().expect("rss"),
                        d["disk_write_bytes"].as_u64().expect("writes"),
                        d["cpu_usage"].as_f64().expect("cpu"),
                    ));
                }
                _ => {}
            }
        }
        assert_eq!(got, want, "{}", input.display());
        for pid in child_lines.keys() {
            assert!(pid_of.values().any(|p| p == pid), "{}: child {pid}", input.display());
        }
    }
    assert!(with_children >= 2, "the test data has tree files with children");
}
