//! `JETS_CAPTURE` end to end on `jets demo` (which opens its trace through the SDK): a window of
//! instructions gives a valid trace whose stats say it is a part of the run; `count` counts what
//! the window writes; a flight recorder's delayed and limited triggers; a size limit; a bad
//! clause stops the demo with a message naming it.

use std::process::Command;

fn demo(capture: &str, out: &std::path::Path) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_jets"))
        .args(["demo", "--words", "12", "--out"])
        .arg(out)
        .env("JETS_CAPTURE", capture)
        .output()
        .unwrap()
}

/// `jets demo` under `capture`, which must succeed; its standard output (the demo's report, with
/// `jets validate` and `jets stats` of the trace).
fn demo_ok(capture: &str, out: &std::path::Path) -> String {
    let run = demo(capture, out);
    let stdout = String::from_utf8_lossy(&run.stdout).into_owned();
    assert!(run.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&run.stderr));
    stdout
}

/// The text of the trace the demo wrote into `out`.
fn trace_text(out: &std::path::Path) -> String {
    let trace = std::fs::read_dir(out)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().ends_with(".jets"))
        .expect("trace");
    std::fs::read_to_string(trace).unwrap()
}

/// A trace's footer.
fn footer(text: &str) -> serde_json::Value {
    serde_json::from_str(text.lines().last().unwrap()).unwrap()
}

#[test]
fn a_window_of_instructions_is_valid_and_stats_say_it_is_a_part() {
    let dir = tempfile::tempdir().unwrap();
    let stdout = demo_ok("clk=100..200;types=Instruction", &dir.path().join("o"));
    assert!(stdout.contains("valid, no warnings"), "{stdout}");
    assert!(
        stdout.contains("capture: clk=100..200;types=Instruction: a PART of the run"),
        "{stdout}"
    );
    let text = trace_text(&dir.path().join("o"));
    for line in text.lines().map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()) {
        if line["type"] == "event" {
            let clk = line["clk"].as_u64().unwrap();
            assert!((100..200).contains(&clk), "{line}");
        }
        if line["type"] == "record" && line["record_type"] == "Instruction" {
            assert!(line["clk"].as_u64().unwrap() < 200, "{line}");
        }
    }
    assert!(text.contains("\"left_out_records\""));
}

/// CAP-LIM-1 end to end: the demo's trace (0.6 MB whole) stops at its 64 KiB limit, after one
/// batch, is valid, and `jets stats` says where it stopped; the demo's exports still read it.
#[test]
fn a_size_limit_stops_the_trace_and_stats_say_so() {
    let dir = tempfile::tempdir().unwrap();
    let stdout = demo_ok("limit=64KiB", &dir.path().join("o"));
    assert!(stdout.contains("valid, no warnings"), "{stdout}");
    assert!(
        stdout.contains("capture: limit=64KiB: a PART of the run (stopped at its size limit;"),
        "{stdout}"
    );
    let text = trace_text(&dir.path().join("o"));
    let bytes = text.len();
    assert!((64 << 10..(64 << 10) + jets::WRITE_BATCH_BYTES).contains(&bytes), "{bytes} bytes");
    let f = footer(&text);
    assert_eq!(f["limit_reached"], true);
    assert!(f["left_out_events"].as_u64() > Some(0), "{f}");
    for export in ["pipeline.chrome.json", "pipeline.kanata.log", "pipeline.gantt.html"] {
        assert!(dir.path().join("o").join(export).exists(), "{export}");
    }
    // `jets stats --format json` says it too, for scripts.
    let stats = Command::new(env!("CARGO_BIN_EXE_jets"))
        .args(["stats", "--format", "json"])
        .arg(dir.path().join("o").join("pipeline.jets"))
        .output()
        .unwrap();
    let stats: serde_json::Value = serde_json::from_slice(&stats.stdout).unwrap();
    assert_eq!(stats["capture"]["limit_reached"], true, "{stats}");
    assert_eq!(stats["capture"]["setting"], "limit=64KiB");
}

/// A bad clause stops the demo with a message naming it, once.
#[test]
fn a_bad_clause_stops_the_demo_naming_the_clause() {
    let dir = tempfile::tempdir().unwrap();
    let run = demo("types=Instruction;sample=Instruction:0", &dir.path().join("o"));
    assert!(!run.status.success());
    let stderr = String::from_utf8_lossy(&run.stderr);
    let said = "JETS_CAPTURE clause `sample=Instruction:0`: N must be at least 1";
    // Once: the error that names the file spells its cause, which the chain then left out.
    assert_eq!(stderr.matches(said).count(), 1, "{stderr}");
}

/// CAP-COUNT-1 end to end: `count` with a window writes no line, and the footer's counts are the
/// lines the same window writes without it; `jets stats` says the lines were counted. (Only
/// instructions: the demo's host collector adds a number of `HostSync` lines that depends on the
/// wall clock.)
#[test]
fn count_counts_what_the_setting_writes_and_stats_say_so() {
    let footer = |dir: &std::path::Path| footer(&trace_text(dir));
    let dir = tempfile::tempdir().unwrap();
    let (written, counted) = (dir.path().join("w"), dir.path().join("c"));
    demo_ok("clk=100..400;types=Instruction", &written);
    let stdout = demo_ok("clk=100..400;types=Instruction;count", &counted);
    assert!(
        stdout
            .contains("capture: clk=100..400;types=Instruction;count: lines COUNTED, not written"),
        "{stdout}"
    );
    let (w, c) = (footer(&written), footer(&counted));
    assert!(w["total_events"].as_u64().unwrap() > 0, "{w}");
    for kind in ["records", "events", "annotations"] {
        assert_eq!(c[format!("counted_{kind}")], w[format!("total_{kind}")], "{kind}: {c} {w}");
        assert_eq!(c[format!("total_{kind}")], 0, "{c}");
    }
}

/// CAP-REC-5 and CAP-REC-6 end to end: a flight recorder whose trigger (the demo's squashes)
/// dumps 50 cycles late writes a valid trace that names the setting; `dumps=1` dumps once for
/// all the squashes; a delay as long as the window stops the demo naming the clause.
#[test]
fn a_delayed_trigger_dumps_a_valid_window_and_a_bad_delay_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let stdout = demo_ok("recorder=200;trigger=Squash;post=50", &dir.path().join("o"));
    assert!(stdout.contains("valid, no warnings"), "{stdout}");
    assert!(stdout.contains("capture: recorder=200;trigger=Squash;post=50"), "{stdout}");
    let text = trace_text(&dir.path().join("o"));
    let delayed = footer(&text);
    // The close's dump, and at least one a squash asked for.
    assert!(delayed["recorder_dumps"].as_u64().unwrap() >= 2, "{delayed}");
    assert!(text.contains("\"name\":\"Squash\""));

    // CAP-REC-6: with `dumps=1`, only the first squash dumps, then the close.
    let stdout = demo_ok("recorder=200;trigger=Squash;dumps=1", &dir.path().join("q"));
    // `jets stats` (the demo's step 3) says how the file was made.
    assert!(stdout.contains("written by 2 dumps of the flight recorder"), "{stdout}");
    let once = footer(&trace_text(&dir.path().join("q")));
    assert_eq!(once["recorder_dumps"], 2, "{once}");

    let run = demo("recorder=200;trigger=Squash;post=200", &dir.path().join("p"));
    assert!(!run.status.success());
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(
        stderr.contains("JETS_CAPTURE clause `post=200`: the post-trigger cycles must be fewer"),
        "{stderr}"
    );
}
