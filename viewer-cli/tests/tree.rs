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

/// The tree of a capture window ends by saying it is a part of the run (CV-TREE-2); a whole
/// run's does not.
#[test]
fn a_windowed_tree_says_it_is_a_part_of_the_run() {
    let dir = tempfile::tempdir().expect("tempdir");
    for setting in [Some("clk=10..20"), None] {
        let path = dir.path().join(format!("{}.jets", setting.is_some()));
        let mut builder = jets::TraceBuilder::new();
        if let Some(s) = setting {
            builder = builder.capture(s.parse().expect("a setting"));
        }
        let trace = builder.create(&path, jets::Metadata::new()).expect("create");
        let core = trace.root("core", "Core").begin_at(0).expect("core");
        for c in 0..40u64 {
            core.child_at(c, "add", "Instruction")
                .begin()
                .expect("insn")
                .end_at(c + 1)
                .expect("end");
        }
        core.end_at(41).expect("end");
        trace.close_at(41).expect("close");
        let out = tree(&path, &[]);
        let last = out.lines().last().expect("a line");
        match setting {
            Some(_) => assert_eq!(
                last,
                "capture: clk=10..20: a PART of the run (left out: 30 records, 30 record_ends)",
                "{out}"
            ),
            None => assert!(!out.contains("capture"), "{out}"),
        }
    }
}
