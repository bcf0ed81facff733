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

/// CV-TREE-1 with `--depth`: a record whose parent never appeared is an error naming the file
/// and line at any depth limit, as without one (before, `--depth` hid it and its subtree without
/// a word), while records whose parent was left out below the limit are left out too.
#[test]
fn depth_tells_a_parent_below_the_limit_from_one_never_seen() {
    let dir = tempfile::tempdir().expect("tmp");
    let rec = |id: u64, parent: Option<u64>| {
        let parent = parent.map_or("null".to_owned(), |p| p.to_string());
        format!(
            r#"{{"clk":{id},"type":"record","name":"r{id}","record_type":"T","id":{id},"parent_id":{parent},"description":""}}"#
        )
    };
    // 1 > 2 > 3 > 4 and 5.
    let mut lines = vec![
        r#"{"type":"header","version":"2.0","metadata":{}}"#.to_owned(),
        rec(1, None),
        rec(2, Some(1)),
        rec(3, Some(2)),
        rec(4, Some(3)),
        rec(5, Some(3)),
    ];
    let good = dir.path().join("good.jets");
    std::fs::write(&good, lines.join("\n") + "\n").expect("write");
    for (depth, shown) in [("1", 1), ("2", 2), ("3", 3), ("4", 5)] {
        let out = tree(&good, &["--depth", depth]);
        assert_eq!(out.matches("[T]").count(), shown, "--depth {depth}: {out}");
    }
    // Line 7: record 6 names parent 42, which never appeared, or itself; then record 7 under 4.
    for (name, line, parent) in [("lost", 7, 42), ("own", 7, 6)] {
        lines.truncate(6);
        lines.push(rec(6, Some(parent)));
        lines.push(rec(7, Some(4)));
        let bad = dir.path().join(format!("{name}.jets"));
        std::fs::write(&bad, lines.join("\n") + "\n").expect("write");
        for depth in [None, Some("1"), Some("2"), Some("3"), Some("9")] {
            let mut args = vec!["tree", bad.to_str().expect("utf8")];
            args.extend(depth.iter().flat_map(|d| ["--depth", *d]));
            let o = Command::new(env!("CARGO_BIN_EXE_jets")).args(&args).output().expect("run");
            let err = String::from_utf8_lossy(&o.stderr);
            assert!(
                !o.status.success(),
                "{name} {depth:?}: {}",
                String::from_utf8_lossy(&o.stdout)
            );
            assert!(
                err.contains(&format!("{name}.jets:{line}: "))
                    && err.contains(&format!(
                        "record 6 refers to parent {parent}, not seen before it"
                    )),
                "{name} {depth:?}: {err}"
            );
        }
    }
}
