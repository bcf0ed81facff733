//! The conformance cases in spec/conformance: every valid trace validates clean, every invalid
//! trace produces the diagnostics in spec/conformance/expected (insta snapshots), and every rule
//! has at least one case named after its code that triggers it.

use std::collections::BTreeSet;
use std::fmt::Write;
use std::path::{Path, PathBuf};

use jets_read::validate::{Rule, Validator};
use jets_read::Reader;

fn conformance_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../spec/conformance")
}

fn cases(sub: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(conformance_dir().join(sub))
        .unwrap_or_else(|e| panic!("spec/conformance/{sub}: {e}"))
        .map(|e| e.unwrap().path())
        .collect();
    v.sort();
    v
}

/// The diagnostics of a case, one per line, as the expected files show them.
fn render(path: &Path) -> (String, BTreeSet<Rule>) {
    let mut reader = Reader::open(path).unwrap();
    let mut out = String::new();
    let mut rules = BTreeSet::new();
    // One thread: the output must not depend on it (the engine's own tests check that), and the
    // cases are tiny.
    let report = Validator::new()
        .threads(1)
        .run(&mut reader, |d| {
            rules.insert(d.rule);
            writeln!(out, "{d}").unwrap();
        })
        .unwrap();
    writeln!(
        out,
        "-- {} errors, {} warnings, {} lines",
        report.errors, report.warnings, report.counts.lines
    )
    .unwrap();
    (out, rules)
}

#[test]
fn valid_cases_are_clean() {
    let valid = cases("valid");
    assert!(valid.len() >= 3);
    for path in valid {
        let (text, rules) = render(&path);
        assert!(rules.is_empty(), "{}:\n{text}", path.display());
    }
}

#[test]
fn invalid_cases_match_their_expected_diagnostics() {
    let mut covered = BTreeSet::new();
    for path in cases("invalid") {
        let file = path.file_name().unwrap().to_string_lossy().into_owned();
        let code = &file[..4];
        let rule = Rule::from_code(code)
            .unwrap_or_else(|| panic!("{file}: name must start with a rule code"));
        let (text, rules) = render(&path);
        assert!(rules.contains(&rule), "{file} does not trigger {code}:\n{text}");
        covered.insert(rule);
        let name = file.split('.').next().unwrap().to_owned();
        insta::with_settings!({
            snapshot_path => conformance_dir().join("expected"),
            prepend_module_to_snapshot => false,
            omit_expression => true,
            description => format!("jets validate spec/conformance/invalid/{file}"),
        }, {
            insta::assert_snapshot!(name, text);
        });
    }
    let missing: Vec<&str> =
        Rule::ALL.iter().filter(|r| !covered.contains(r)).map(|r| r.code()).collect();
    assert!(missing.is_empty(), "rules without a conformance case: {missing:?}");
}

#[test]
fn rules_md_lists_every_rule_with_its_severity() {
    let text = std::fs::read_to_string(conformance_dir().join("../rules.md")).unwrap();
    for rule in Rule::ALL {
        let row = format!("| {} | {} |", rule.code(), rule.level());
        assert!(text.contains(&row), "spec/rules.md has no row starting {row:?}");
    }
}
