//! The decision tables in `spec/` give each rule one code, and every code the project cites (in
//! its code, tests and documents) is one of them: a decision cited but never written down, or two
//! decisions under one code, is a reader sent to the wrong rule.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use regex::Regex;

/// A decision code: a family of the decision tables (`spec/*-decisions.md`), a word, a number
/// (`CV-END-2`). The number is required, so that text such as `IN-OUT` in a generated file is not
/// taken for a code.
const CODE: &str = r"\b(?:CA|CAP|CV|IN|PQ|VW|WR)(?:-[A-Z0-9]+)*-[0-9]+\b";

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("the workspace").to_path_buf()
}

/// Every text file of the project that may cite a code, outside build output and `spec/`.
fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("readable") {
        let path = entry.expect("entry").path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if path.is_dir() {
            if !matches!(name, "target" | "node_modules" | ".git" | "spec")
                && !name.starts_with('.')
            {
                sources(&path, out);
            }
        } else if ["rs", "md", "c", "h", "hpp", "cpp", "js", "py", "sh"]
            .iter()
            .any(|ext| path.extension().is_some_and(|e| e == *ext))
        {
            out.push(path);
        }
    }
}

#[test]
fn each_rule_code_is_defined_once_and_every_cited_code_is_defined() {
    let root = root();
    let row = Regex::new(&format!(r"(?m)^\| ({CODE}) \|")).unwrap();
    let mut defined: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for entry in std::fs::read_dir(root.join("spec")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "md") {
            let text = std::fs::read_to_string(&path).unwrap();
            for (i, line) in text.lines().enumerate() {
                if let Some(c) = row.captures(line) {
                    let at = format!("{}:{}", path.display(), i + 1);
                    defined.entry(c[1].to_owned()).or_default().push(at);
                }
            }
        }
    }
    assert!(defined.len() > 100, "the tables were not found: {defined:?}");
    let twice: Vec<_> = defined.iter().filter(|(_, at)| at.len() > 1).collect();
    assert!(twice.is_empty(), "codes defined more than once: {twice:?}");

    let cite = Regex::new(CODE).unwrap();
    let mut files = Vec::new();
    sources(&root, &mut files);
    let mut undefined = Vec::new();
    for file in files {
        let Ok(text) = std::fs::read_to_string(&file) else { continue };
        for (i, line) in text.lines().enumerate() {
            for m in cite.find_iter(line) {
                if !defined.contains_key(m.as_str()) {
                    undefined.push(format!("{}:{}: {}", file.display(), i + 1, m.as_str()));
                }
            }
        }
    }
    assert!(undefined.is_empty(), "codes cited but not in spec/: {undefined:#?}");
}
