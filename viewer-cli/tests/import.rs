//! `jets import --from dftracer` on every DFTracer file of the test corpus (real DFTracer 2.2.0
//! output and the older documented form): a valid JETS trace, one record per complete event, file
//! names resolved from their hashes.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;

use jets::format::Line;
use serde_json::Value;

fn corpus() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/dftracer");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("test data")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.to_string_lossy().contains(".pfw"))
        .collect();
    files.sort();
    assert_eq!(files.len(), 3, "the three corpus files");
    files
}

fn text_of(path: &Path) -> String {
    let bytes = std::fs::read(path).expect("read");
    if bytes.starts_with(&[0x1f, 0x8b]) {
        let mut s = String::new();
        flate2::read::MultiGzDecoder::new(&bytes[..]).read_to_string(&mut s).expect("gunzip");
        s
    } else {
        String::from_utf8(bytes).expect("utf8")
    }
}

/// Complete events and the file-name hashes (FH) of a DFTracer file, read independently of the
/// importer.
fn complete_events_and_files(path: &Path) -> (usize, Vec<String>) {
    let mut complete = 0;
    let mut files = Vec::new();
    for line in text_of(path).lines() {
        let t = line.trim().trim_end_matches(',');
        if t.is_empty() || t == "[" || t == "]" {
            continue;
        }
        let v: Value = serde_json::from_str(t).expect("json");
        match &v["ph"] {
            Value::String(s) if s == "X" => complete += 1,
            Value::Number(n) if n.as_u64() == Some(1) => complete += 1,
            _ => {
                if v["name"] == "FH" {
                    files.push(v["args"]["name"].as_str().expect("name").to_owned());
                }
            }
        }
    }
    (complete, files)
}

fn import(inputs: &[&Path], out: &Path) -> std::process::Output {
    let mut args = vec!["import".to_owned(), "--from".into(), "dftracer".into()];
    args.extend(inputs.iter().map(|p| p.display().to_string()));
    args.extend(["-o".into(), out.display().to_string()]);
    Command::new(env!("CARGO_BIN_EXE_jets")).args(&args).output().expect("run jets")
}

#[test]
fn every_corpus_file_imports_into_a_valid_trace_with_one_record_per_complete_event() {
    let dir = tempfile::tempdir().expect("tmp");
    for input in corpus() {
        let out = dir.path().join("out.jets");
        let o = import(&[&input], &out);
        assert!(o.status.success(), "{}: {}", input.display(), String::from_utf8_lossy(&o.stderr));
        let bytes = std::fs::read(&out).expect("read");
        let (diagnostics, report) = jets_read::validate::validate_bytes(&bytes);
        assert!(report.is_valid(), "{}: {diagnostics:#?}", input.display());
        assert_eq!(report.warnings, 0, "{}: {diagnostics:#?}", input.display());

        let (complete, files) = complete_events_and_files(&input);
        let text = String::from_utf8(bytes).expect("utf8");
        let mut records = 0;
        let mut with_file = Vec::new();
        for l in text.lines() {
            if let Line::Record(r) = Line::parse(l).expect("line") {
                // Process and Thread records are the importer's frame around the events.
                if r.record_type != "Process" && r.record_type != "Thread" {
                    records += 1;
                    let data = r.data.as_ref().expect("data");
                    if data.contains_key("fhash") {
                        let file = data["file"].as_str().unwrap_or_else(|| {
                            panic!("{}: fhash not resolved in {l}", input.display())
                        });
                        assert_eq!(r.description, file, "the description names the file");
                        with_file.push(file.to_owned());
                    }
                }
            }
        }
        assert_eq!(records, complete, "{}: one record per complete event", input.display());
        assert!(!with_file.is_empty(), "{}: some events name a file", input.display());
        for f in &with_file {
            assert!(files.contains(f), "{}: {f} is one of the hashed names", input.display());
        }
    }
}

#[test]
fn nesting_follows_time_containment_per_thread() {
    let dir = tempfile::tempdir().expect("tmp");
    let input = corpus().into_iter().find(|p| p.ends_with("python_threads_fsync.pfw.gz"));
    let out = dir.path().join("out.jets");
    assert!(import(&[&input.expect("file")], &out).status.success());
    let text = std::fs::read_to_string(&out).expect("read");
    let mut names = std::collections::HashMap::new();
    let mut nested = 0;
    for l in text.lines() {
        if let Line::Record(r) = Line::parse(l).expect("line") {
            if let Some(p) = r.parent_id {
                if names.get(&p).map(String::as_str) == Some("load_checkpoint") {
                    assert_eq!(r.record_type, "POSIX", "{l}");
                    nested += 1;
                }
            }
            names.insert(r.id, r.name.to_string());
        }
    }
    // Three threads each load a checkpoint: open, lseek, reads and close inside.
    assert!(nested >= 3 * 4, "POSIX calls nest inside load_checkpoint: {nested}");
}

#[test]
fn several_files_make_one_trace_and_bad_input_names_file_and_line() {
    let dir = tempfile::tempdir().expect("tmp");
    let files = corpus();
    let refs: Vec<&Path> = files.iter().map(PathBuf::as_path).collect();
    let out = dir.path().join("all.jets");
    let o = import(&refs, &out);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = std::fs::read_to_string(&out).expect("read");
    let processes = text.matches("\"record_type\":\"Process\"").count();
    assert_eq!(processes, 3, "one Process record per pid");

    let bad = dir.path().join("bad.pfw");
    std::fs::write(
        &bad,
        "[\n{\"id\":1,\"name\":\"x\",\"pid\":1,\"tid\":1,\"ts\":5,\"ph\":\"X\"}\n",
    )
    .expect("write");
    let o = import(&[&bad], &dir.path().join("bad.jets"));
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("bad.pfw:2") && err.contains("\"dur\""), "{err}");
    assert!(!dir.path().join("bad.jets").exists(), "no partial output");
}

/// DFTracer times are integers; past 2^53 (nanoseconds since the epoch are about 1.7e18) a
/// double no longer holds them, and `ts + dur` past 2^64 - 1 is no cycle (CV-DFT-3).
#[test]
fn times_past_2_53_are_exact_or_refused() {
    let dir = tempfile::tempdir().expect("tmp");
    let event = |ts: &str, dur: &str| {
        format!(
            "[\n{{\"id\":1,\"name\":\"read\",\"cat\":\"POSIX\",\"pid\":1,\"tid\":1,\
             \"ts\":{ts},\"dur\":{dur},\"ph\":\"X\",\"args\":{{}}}}\n]\n"
        )
    };
    let run = |name: &str, text: String| {
        let input = dir.path().join(format!("{name}.pfw"));
        std::fs::write(&input, text).expect("write");
        let out = dir.path().join(format!("{name}.jets"));
        (import(&[&input], &out), out)
    };
    // Odd, and 2^53 + 1 apart from a double: any rounding shows.
    for (ts, dur) in [("1727286231145000123", "7"), ("18446744073709540001", "5001")] {
        let (o, out) = run("exact", event(ts, dur));
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let text = std::fs::read_to_string(&out).expect("read");
        let (start, end): (u64, u64) = (ts.parse().unwrap(), dur.parse().unwrap());
        let posix = text.lines().find(|l| l.contains("\"POSIX\"")).expect("the call's record");
        assert!(posix.starts_with(&format!("{{\"clk\":{start},")), "{posix}");
        let end_line = format!("{{\"clk\":{},\"type\":\"record_end\"", start + end);
        assert!(text.contains(&end_line), "{text}");
    }
    let (o, out) = run("past", event("18446744073709551000", "1000"));
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("past.pfw:2") && err.contains("outside the cycles"), "{err}");
    assert!(!out.exists(), "no partial output");
}
