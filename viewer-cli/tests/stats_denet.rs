//! `jets stats` on real denet files reproduces denet's own summary of each, number for number.

use std::path::Path;
use std::process::Command;

use serde_json::Value;

const FILES: [&str; 4] =
    ["cli_write_env_children", "legacy_untagged_tree", "single_growing_rss", "tree_gzip_children"];

fn data(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/denet").join(name)
}

fn stats(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_jets")).arg("stats").args(args).output().expect("run jets")
}

#[test]
fn json_summary_matches_denets_for_every_corpus_file() {
    for name in FILES {
        let input = data(&format!("{name}.jsonl"));
        let out = stats(&[input.to_str().expect("utf8"), "--format", "json"]);
        assert!(out.status.success(), "{name}: {}", String::from_utf8_lossy(&out.stderr));
        let ours: Value = serde_json::from_slice(&out.stdout).expect("our JSON");
        let expected: Value = serde_json::from_str(
            &std::fs::read_to_string(data(&format!("{name}.summary.json"))).expect("summary"),
        )
        .expect("denet JSON");
        assert_eq!(ours, expected, "{name}");
    }
}

#[test]
fn human_summary_names_the_numbers() {
    let out = stats(&[data("single_growing_rss.jsonl").to_str().expect("utf8")]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).expect("utf8");
    assert!(text.contains("15 samples"), "{text}");
    assert!(text.contains("7.8913035"), "{text}");
    assert!(text.contains("insufficient-data"), "{text}");
}

#[test]
fn a_broken_line_is_an_error_naming_file_and_line() {
    let dir = tempfile::tempdir().expect("tempdir");
    let good = std::fs::read_to_string(data("single_growing_rss.jsonl")).expect("read");
    let mut lines: Vec<&str> = good.lines().collect();
    lines[3] = r#"{"kind":"sample","ts_ms":1,"cpu_usage":"lots"}"#;
    let bad = dir.path().join("bad.jsonl");
    std::fs::write(&bad, lines.join("\n")).expect("write");
    let out = stats(&[bad.to_str().expect("utf8")]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8(out.stderr).expect("utf8");
    assert!(err.contains("bad.jsonl:4") && err.contains("sample"), "{err}");

    let empty = dir.path().join("header_only.jsonl");
    std::fs::write(&empty, lines[0]).expect("write");
    let out = stats(&[empty.to_str().expect("utf8")]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("no denet samples"));
}

#[test]
fn stats_of_an_imported_denet_file_reports_its_host_peaks_and_totals() {
    let dir = tempfile::tempdir().expect("tempdir");
    let trace = dir.path().join("imported.jets");
    let input = data("tree_gzip_children.jsonl");
    let o = Command::new(env!("CARGO_BIN_EXE_jets"))
        .args(["import", "--from", "denet", input.to_str().expect("utf8"), "-o"])
        .arg(&trace)
        .output()
        .expect("jets import");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = stats(&[trace.to_str().expect("utf8"), "--format", "json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let host = &v["host"];
    let expected: Value = serde_json::from_str(
        &std::fs::read_to_string(data("tree_gzip_children.summary.json")).expect("summary"),
    )
    .expect("denet JSON");
    assert_eq!(host["metric_samples"], expected["sample_count"]);
    assert_eq!(host["peaks"]["mem_rss_kb"].as_f64(), expected["peak_mem_rss_kb"].as_f64());
    assert_eq!(host["totals"]["syscall_write_bytes"], expected["total_syscall_write_bytes"]);
    assert_eq!(host["totals"]["disk_write_bytes"], expected["total_disk_write_bytes"]);
    assert!(host["cycles_per_sec"].is_null(), "no sync points, so no speed: {host}");
}
