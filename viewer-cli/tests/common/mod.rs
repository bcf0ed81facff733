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
