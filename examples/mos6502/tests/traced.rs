//! The mos6502 crate traced through JETS, on the functional test image the crate ships.
//!
//! The image is found through `cargo metadata` (the crate's package is in cargo's registry cache
//! whenever this crate builds). These runs stop after a few hundred thousand instructions to stay
//! fast in a debug build; `scripts/test.d/24-mos6502.sh` runs the whole test (30.6 M
//! instructions) in a release build.

use std::path::PathBuf;
use std::process::Command;

use jets::capture::{Capture, Recorder};
use jets_example_mos6502::{builder, run};
use serde_json::Value;

/// The functional test image in the mos6502 package.
///
/// `cargo metadata` is asked for this machine's platform only: unfiltered, it needs the
/// manifests of every platform's dependencies (Windows-only crates too), which a fresh machine
/// that only built for Linux does not have, and `--offline` then fails.
fn image() -> Vec<u8> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let host = host_triple();
    let out = Command::new(cargo)
        .args(["metadata", "--format-version", "1", "--offline", "--filter-platform", &host])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("running cargo metadata");
    assert!(out.status.success(), "cargo metadata: {}", String::from_utf8_lossy(&out.stderr));
    let meta: Value = serde_json::from_slice(&out.stdout).expect("cargo metadata's JSON");
    let manifest = meta["packages"]
        .as_array()
        .expect("packages")
        .iter()
        .find(|p| p["name"] == "mos6502")
        .and_then(|p| p["manifest_path"].as_str())
        .expect("the mos6502 package in cargo metadata");
    let path = PathBuf::from(manifest).with_file_name("tests/assets/6502_functional_test.bin");
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The host's target triple, from `rustc -vV`.
fn host_triple() -> String {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".to_owned());
    let out = Command::new(rustc).arg("-vV").output().expect("running rustc -vV");
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .find_map(|l| l.strip_prefix("host: "))
        .unwrap_or_else(|| panic!("no host line in rustc -vV: {text}"))
        .to_owned()
}

fn lines(path: &std::path::Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).expect("trace");
    let (diags, report) = jets_read::validate::validate_bytes(text.as_bytes());
    assert!(diags.is_empty() && report.errors == 0, "{diags:?}");
    text.lines().map(|l| serde_json::from_str(l).expect("JSON line")).collect()
}

const LIMIT: u64 = 200_000;

#[test]
fn every_instruction_is_a_record_with_its_decode_execute_and_bus_events() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("full.jets");
    let r = run(&image(), Some(&path), builder(Some(Capture::full())), Some(20_000)).unwrap();
    assert_eq!(r.instructions, 20_000);
    let lines = lines(&path);
    let insns: Vec<&Value> = lines.iter().filter(|l| l["record_type"] == "Instruction").collect();
    assert_eq!(insns.len(), 20_000);
    // The first instruction of the test is `cld` at $0400 (opcode $D8).
    assert_eq!(insns[0]["name"], "CLD");
    assert_eq!(insns[0]["data"]["pc"], 0x400);
    assert_eq!(insns[0]["data"]["opcode"], 0xD8);
    let count = |name: &str| lines.iter().filter(|l| l["name"] == name).count();
    assert_eq!(count("decode"), 20_000);
    assert_eq!(count("execute"), 20_000);
    // At least the opcode is read for every instruction.
    assert!(count("read") >= 20_000, "{} reads", count("read"));
    assert!(count("write") > 0);
    let s = r.summary.unwrap();
    assert_eq!(s.records, 20_001);
    assert_eq!(s.left_out.records, 0);
}

#[test]
fn a_window_writes_its_cycles_and_counts_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let image = image();
    let untraced = run(&image, None, builder(None), Some(LIMIT)).unwrap();
    let (a, b) = (untraced.cycles / 2, untraced.cycles / 2 + 2_000);
    let path = dir.path().join("window.jets");
    let c = Capture { window: Some(a..b), ..Capture::default() };
    let r = run(&image, Some(&path), builder(Some(c)), Some(LIMIT)).unwrap();
    assert_eq!(r.cycles, untraced.cycles, "tracing changed the emulation");
    let lines = lines(&path);
    let s = r.summary.unwrap();
    // Every instruction is written or counted as left out; `mos6502` (the core) is written as the
    // ancestor of the window's instructions.
    assert_eq!(s.records + s.left_out.records, LIMIT + 1);
    for l in &lines {
        if l["record_type"] == "Instruction" {
            let clk = l["clk"].as_u64().unwrap();
            // Begun in the window, or just before it with an event in it.
            assert!(clk < b && clk + 10 >= a, "{l}");
        }
        if l["type"] == "event" {
            let clk = l["clk"].as_u64().unwrap();
            assert!((a..b).contains(&clk), "{l}");
        }
    }
    assert!(s.records > 100, "{} records in the window", s.records);
    assert_eq!(lines.last().unwrap()["capture"], format!("clk={a}..{b}"));
}

#[test]
fn the_flight_recorder_keeps_the_last_cycles() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("recorder.jets");
    let c = Capture { recorder: Some(Recorder::Cycles(5_000)), ..Capture::default() };
    let r = run(&image(), Some(&path), builder(Some(c)), Some(LIMIT)).unwrap();
    let lines = lines(&path);
    let last = r.cycles;
    for l in lines.iter().filter(|l| l["type"] == "event") {
        let clk = l["clk"].as_u64().unwrap();
        assert!(clk + 5_000 >= last, "{l} is older than the recorder's 5 k cycles before {last}");
    }
    assert_eq!(r.summary.unwrap().dumps, 1, "written once, at close");
}
