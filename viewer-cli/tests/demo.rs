//! `jets demo --out DIR` writes every file it names, and each one is what it claims to be.

use std::path::PathBuf;
use std::process::Command;

fn jets() -> Command {
    Command::new(env!("CARGO_BIN_EXE_jets"))
}

/// The paths listed under "== what to open".
fn named_files(stdout: &str) -> Vec<PathBuf> {
    stdout
        .lines()
        .skip_while(|l| !l.starts_with("== what to open"))
        .skip(1)
        .filter_map(|l| l.split_whitespace().next())
        .filter(|w| w.contains("pipeline."))
        .map(PathBuf::from)
        .collect()
}

#[test]
fn demo_writes_every_file_it_names_and_each_is_valid() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("demo-out");
    let run = jets().arg("demo").arg("--out").arg(&out).arg("--words").arg("12").output().unwrap();
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(run.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&run.stderr));
    assert!(stdout.contains("result checked: 12 words sorted in memory"), "{stdout}");
    assert!(stdout.contains("valid, no warnings"), "{stdout}");
    assert!(stdout.contains("cycles/s"), "{stdout}");

    let files = named_files(&stdout);
    assert_eq!(files.len(), 4, "{stdout}");
    for f in &files {
        assert!(f.starts_with(&out), "{} is not in --out", f.display());
        assert!(f.is_file(), "{} named but missing", f.display());
    }
    let by_suffix =
        |suffix: &str| files.iter().find(|f| f.to_string_lossy().ends_with(suffix)).unwrap();

    let trace = std::fs::read(by_suffix(".jets")).unwrap();
    let (diagnostics, report) = jets_read::validate::validate_bytes(&trace);
    assert!(diagnostics.is_empty(), "{diagnostics:#?}");
    assert!(report.footer && report.counts.records > 100);

    let chrome: serde_json::Value =
        serde_json::from_slice(&std::fs::read(by_suffix(".chrome.json")).unwrap()).unwrap();
    let events = chrome["traceEvents"].as_array().unwrap();
    assert!(events
        .iter()
        .any(|e| e["ph"] == "X" && e["name"].as_str().unwrap().starts_with("lw ")));

    let kanata = std::fs::read_to_string(by_suffix(".kanata.log")).unwrap();
    assert!(kanata.starts_with("Kanata\t0004\n"), "{}", &kanata[..40.min(kanata.len())]);
    assert!(kanata.lines().any(|l| l.starts_with("S\t") && l.ends_with("\tMEM")));
    assert!(kanata.lines().any(|l| l.starts_with("R\t")));
    // What Konata reports for it (CV-KANATA-3): committed = the last retire id, cycles = the sum
    // of `C` (it ignores `C=`), IPC = their ratio; all as the simulator printed them.
    let said = stdout.lines().find(|l| l.contains(" instructions retired (IPC ")).expect("stats");
    let num = |w: &str| said.split_whitespace().position(|x| x == w).map(|i| i - 1);
    let words: Vec<&str> = said.split_whitespace().collect();
    let cycles: u64 = words[num("cycles,").expect("cycles")].parse().unwrap();
    let retired: u64 = words[num("instructions").expect("retired")].parse().unwrap();
    let (mut konata_cycles, mut last_rid, mut retires) = (0u64, 0u64, 0u64);
    for l in kanata.lines() {
        let f: Vec<&str> = l.split('\t').collect();
        match f[0] {
            "C" => konata_cycles += f[1].parse::<u64>().unwrap(),
            "R" if f[3] == "0" => {
                retires += 1;
                last_rid = last_rid.max(f[2].parse().unwrap());
            }
            _ => {}
        }
    }
    assert_eq!((last_rid, retires, konata_cycles), (retired, retired, cycles), "{said}");

    let html = std::fs::read_to_string(by_suffix(".gantt.html")).unwrap();
    assert!(
        html.trim_start().to_ascii_lowercase().starts_with("<!doctype html"),
        "not an HTML page"
    );
    assert!(html.trim_end().ends_with("</html>"));
    assert!(html.contains("PipelineStage"), "the page carries the trace's records");
}

#[test]
fn demo_reports_an_unwritable_out_dir() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a-file");
    std::fs::write(&file, "x").unwrap();
    let run = jets().arg("demo").arg("--out").arg(&file).output().unwrap();
    assert_eq!(run.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(stderr.contains("a-file"), "{stderr}");
}

#[test]
fn demo_defaults_to_jets_demo_in_the_current_directory() {
    let dir = tempfile::tempdir().unwrap();
    let run = jets().args(["demo", "--words", "4"]).current_dir(dir.path()).output().unwrap();
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    for name in
        ["pipeline.jets", "pipeline.chrome.json", "pipeline.kanata.log", "pipeline.gantt.html"]
    {
        assert!(dir.path().join("jets-demo").join(name).is_file(), "{name}");
    }
}
