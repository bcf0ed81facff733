//! What the CLI's integration tests share: running the `jets` binary and finding test data.
#![allow(dead_code)] // each test file uses its own part

pub mod damage;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A minimal header line.
pub const HEADER: &str = r#"{"type":"header","version":"2.0","metadata":{}}"#;

/// Runs the `jets` binary under test and collects its output.
pub fn jets(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_jets")).args(args).output().expect("run jets")
}

/// A file under `viewer-cli/tests/data`.
pub fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data").join(name)
}

/// Standard output as text.
pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Writes to `path` a run of `cycles` one-cycle `Instruction`s under a `core` root, each with an
/// `IF` event, traced under the capture `setting` (a `JETS_CAPTURE` text; `None`: the whole run)
/// at `meta`'s clock: what the tests of a part of a run look at.
pub fn captured_pipeline(path: &Path, setting: Option<&str>, meta: jets::Metadata, cycles: u64) {
    let mut builder = jets::TraceBuilder::new();
    if let Some(s) = setting {
        builder = builder.capture(s.parse().expect("a setting"));
    }
    let trace = builder.create(path, meta).expect("create");
    let core = trace.root("core", "Core").begin_at(0).expect("core");
    for c in 0..cycles {
        let insn = core.child_at(c, "add", "Instruction").begin().expect("insn");
        insn.emit_event_at(c, "IF").expect("event");
        insn.end_at(c + 1).expect("end");
    }
    core.end_at(cycles + 1).expect("end");
    trace.close_at(cycles + 1).expect("close");
}

/// The last cycle of the lines of the trace at `path` (the footer's `capture_end_clk` aside):
/// where a size limit stopped capture, in a trace it stopped.
pub fn last_line_clk(path: &Path) -> u64 {
    std::fs::read_to_string(path)
        .expect("the trace")
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok()?["clk"].as_u64())
        .max()
        .expect("lines with a cycle")
}
