//! `jets tree`: the hierarchy and its filters.

use std::path::{Path, PathBuf};
use std::process::Command;

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/trace").join(name)
}

fn tree(file: &Path, extra: &[&str]) -> String {
    let mut args = vec!["tree", file.to_str().expect("utf8")];
    args.extend_from_slice(extra);
    let o = Command::new(env!("CARGO_BIN_EXE_jets")).args(&args).output().expect("run jets");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout).expect("utf8")
}

#[test]
fn whole_tree() {
    insta::assert_snapshot!(tree(&data("small.jets"), &[]));
}

#[test]
fn depth_limits_levels() {
    let out = tree(&data("rjets_tests_trace.jets"), &["--depth", "3"]);
    insta::assert_snapshot!(out);
    assert_eq!(out.lines().count(), 3);
}

#[test]
fn filters_keep_matches_with_their_ancestors() {
    let out = tree(&data("small.jets"), &["--type", "CacheAccess"]);
    insta::assert_snapshot!(out);
    assert!(out.contains("· core0") && out.contains("· ld") && out.contains("dcache"));
    assert!(!out.contains("add"));
    let out = tree(&data("small.jets"), &["--name", "^(add|mul)$"]);
    assert!(out.contains("add") && out.contains("mul") && !out.contains(" ld "), "{out}");
    let out = tree(&data("small.jets"), &["--clk", "13..19", "--type", "Instruction"]);
    assert!(out.contains("ld") && !out.contains("mul") && !out.contains("add ["), "{out}");
    let out = tree(&data("small.jets"), &["--clk", "31..", "--type", "Instruction"]);
    assert!(out.contains("mul") && out.contains("(unended)"), "{out}");
}

#[test]
fn bad_filters_are_usage_errors() {
    for args in [&["--clk", "9..3"][..], &["--name", "("], &["--depth", "0"], &["--clk", "x"]] {
        let mut all = vec!["tree", "x.jets"];
        all.extend_from_slice(args);
        let o = Command::new(env!("CARGO_BIN_EXE_jets")).args(&all).output().expect("run");
        assert!(!o.status.success(), "{args:?}");
        assert!(!o.stderr.is_empty());
    }
}
