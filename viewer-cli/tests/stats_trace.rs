//! `jets stats` on JETS traces: the numbers, in both output formats.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/trace").join(name)
}

fn stats(file: &Path, json: bool) -> String {
    let mut args = vec!["stats".to_owned(), file.display().to_string()];
    if json {
        args.extend(["--format".into(), "json".into()]);
    }
    let o = Command::new(env!("CARGO_BIN_EXE_jets")).args(&args).output().expect("run jets");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout).expect("utf8")
}

#[test]
fn human_report_snapshot() {
    insta::assert_snapshot!(stats(&data("small.jets"), false));
}

#[test]
fn json_report_has_the_numbers() {
    let v: Value = serde_json::from_str(&stats(&data("small.jets"), true)).expect("json");
    insta::assert_snapshot!(serde_json::to_string_pretty(&v).expect("json"));
    assert_eq!(v["time"]["extent_cycles"], 40);
    assert_eq!(v["lines"]["event"], 11);
    let ins = &v["record_types"]["Instruction"];
    // add 2..12, ld 4..20, br 6..9 ended; mul never ends.
    assert_eq!((ins["count"].as_u64(), ins["unended"].as_u64()), (Some(4), Some(1)));
    let d = &ins["duration_cycles"];
    assert_eq!(d["total"], 10 + 16 + 3);
    assert_eq!(
        (d["min"].as_u64(), d["max"].as_u64(), d["p50"].as_u64()),
        (Some(3), Some(16), Some(10))
    );
    assert_eq!(v["events"]["F"], 4);
    // Unit 0: core0 covers 0..40; unit 1: mem 0..38 (req on the same unit is inside it).
    assert_eq!(v["units"]["0"]["busy_cycles"], 40);
    assert_eq!(v["units"]["1"]["busy_cycles"], 38);
    assert_eq!(v["unended_records"]["first_ids"], serde_json::json!([8]));
    let footer = v["footer"].as_array().expect("footer checks");
    assert!(footer.iter().all(|c| c["agrees"] == true), "{footer:?}");
}

#[test]
fn peer_trace_matches_its_footer() {
    let v: Value =
        serde_json::from_str(&stats(&data("rjets_tests_trace.jets"), true)).expect("json");
    assert_eq!(v["lines"]["record"], 103);
    assert_eq!(v["record_types"]["Instruction"]["count"], 100);
    assert!(v["footer"].as_array().expect("checks").iter().all(|c| c["agrees"] == true));
}

#[test]
fn footer_disagreement_is_reported() {
    let dir = tempfile::tempdir().expect("tmp");
    let path = dir.path().join("t.jets");
    let text = std::fs::read_to_string(data("small.jets")).expect("read");
    std::fs::write(&path, text.replace("\"total_events\":11", "\"total_events\":12"))
        .expect("write");
    let out = stats(&path, false);
    assert!(out.contains("footer: DISAGREES: total_events says 12, trace has 11"), "{out}");
}

#[test]
fn a_broken_line_is_an_error_naming_file_and_line() {
    let dir = tempfile::tempdir().expect("tmp");
    let path = dir.path().join("t.jets");
    let text = std::fs::read_to_string(data("small.jets")).expect("read");
    std::fs::write(&path, text.replacen("{\"clk\":4,", "{\"clk\":-4,", 1)).expect("write");
    let o = Command::new(env!("CARGO_BIN_EXE_jets"))
        .args(["stats", path.to_str().expect("utf8")])
        .output()
        .expect("run");
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("t.jets") && err.contains("line 7"), "{err}");
}

/// CV-UNIT-2: sums of durations that pass the 64-bit range (two records of almost the whole
/// range on one unit) are exact in the text report and `null` in JSON, where a cast wrapped the
/// total to 2^64 - 2 and an addition wrapped (or, in a debug build, panicked on) a unit's busy
/// cycles.
#[test]
fn sums_past_the_64_bit_range_are_exact_or_null_never_wrapped() {
    const MAX: u64 = u64::MAX;
    let dir = std::env::temp_dir().join(format!("jets-stats-sums-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let file = dir.join("sums.jets");
    let mut text = String::from(r#"{"type":"header","version":"2.0","metadata":{}}"#);
    for id in 1..=2u64 {
        text += &format!(
            "\n{{\"type\":\"record\",\"clk\":0,\"id\":{id},\"name\":\"c{id}\",\"parent_id\":null,\
             \"record_type\":\"Core\",\"description\":\"\",\"data\":{{\"unit_id\":0}}}}"
        );
    }
    for id in 1..=2u64 {
        text += &format!("\n{{\"type\":\"record_end\",\"clk\":{MAX},\"record_id\":{id}}}");
    }
    std::fs::write(&file, text + "\n").expect("write");
    let v: Value = serde_json::from_str(&stats(&file, true)).expect("json");
    let d = &v["record_types"]["Core"]["duration_cycles"];
    assert_eq!((d["total"].clone(), d["max"].as_u64()), (Value::Null, Some(MAX)));
    assert_eq!(v["units"]["0"]["busy_cycles"], Value::Null);
    assert_eq!(v["units"]["0"]["records"], 2);
    let human = stats(&file, false);
    let exact = (2 * u128::from(MAX)).to_string();
    assert_eq!(human.matches(&exact).count(), 2, "total and busy cycles, exact:\n{human}");
    std::fs::remove_dir_all(&dir).ok();
}

/// CV-TIME-3: `clock_frequency_mhz` is free-form metadata, and `jets validate` accepts any
/// positive double there, so `jets stats` and `jets tree` print times readably at any such
/// clock: before, 1e-300 MHz printed a duration of 296 digits (and the clock of 301 with
/// `{}`), 1e300 MHz "0.0 ns", 5e-324 MHz "inf s", and the JSON report's `extent_seconds` was
/// 0 at 1e305 MHz (`mhz * 1e6` overflowed).
#[test]
fn extreme_clocks_print_readable_times() {
    let dir = tempfile::tempdir().expect("tmp");
    let cases = [
        // (clock, stats' time line, tree's root, JSON extent_seconds)
        ("1e-300", "40 cycles, 4.000e295 s at 1e-300 MHz", "(40 cycles, 4.000e295 s)", Some(4e295)),
        (
            "1e300",
            "40 cycles, 4.000e-305 s at 1e300 MHz",
            "(40 cycles, 4.000e-305 s)",
            Some(4e-305),
        ),
        ("1e305", "40 cycles, 4.000e-310 s at 1e305 MHz", "(40 cycles, 4.000e-310 s)", None),
        ("5e-324", "40 cycles, 8.096e318 s at 5e-324 MHz", "(40 cycles, 8.096e318 s)", None),
        (
            "1.7976931348623157e308",
            "40 cycles, 2.225e-313 s at 1.7976931348623157e308 MHz",
            "(40 cycles, 2.225e-313 s)",
            None,
        ),
        ("2000", "40 cycles, 20.0 ns at 2000 MHz", "(40 cycles, 20.0 ns)", Some(2e-8)),
        ("1e5", "40 cycles, 400.0 ps at 100000 MHz", "(40 cycles, 400.0 ps)", Some(4e-10)),
    ];
    for (mhz, time, root, seconds) in cases {
        let path = dir.path().join(format!("clock_{mhz}.jets"));
        let text = std::fs::read_to_string(data("small.jets")).expect("read");
        let header = text.lines().next().expect("header");
        let clocked = header
            .replace(r#""clock_frequency_mhz":1000.0"#, &format!(r#""clock_frequency_mhz":{mhz}"#));
        assert_ne!(clocked, header, "small.jets states its clock");
        std::fs::write(&path, text.replacen(header, &clocked, 1)).expect("write");
        // The spec allows the header: the validator says nothing of it.
        let o = Command::new(env!("CARGO_BIN_EXE_jets"))
            .args(["validate", path.to_str().expect("utf8")])
            .output()
            .expect("run");
        assert!(o.status.success(), "{mhz}: {}", String::from_utf8_lossy(&o.stdout));
        let human = stats(&path, false);
        assert!(human.contains(time), "{mhz}: {human}");
        let tree = Command::new(env!("CARGO_BIN_EXE_jets"))
            .args(["tree", path.to_str().expect("utf8")])
            .output()
            .expect("run");
        let tree = String::from_utf8_lossy(&tree.stdout).into_owned();
        assert!(tree.lines().next().is_some_and(|l| l.ends_with(root)), "{mhz}: {tree}");
        for line in human.lines().chain(tree.lines()) {
            assert!(line.chars().count() < 200, "{mhz}: a long line: {line}");
            assert!(!line.contains(" 0.0 ns") && !line.contains("inf"), "{mhz}: {line}");
        }
        let v: Value = serde_json::from_str(&stats(&path, true)).expect("json");
        let got = v["time"]["extent_seconds"].as_f64();
        let close = match (got, seconds) {
            (Some(g), Some(w)) => ((g - w) / w).abs() < 1e-12,
            (g, w) => g == w,
        };
        assert!(close, "{mhz}: extent_seconds {got:?}, want {seconds:?}");
        assert_eq!(v["time"]["clock_frequency_mhz"].as_f64(), mhz.parse().ok(), "{mhz}");
    }
}
