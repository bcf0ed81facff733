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

/// A file `jets convert --to dftracer` wrote states the nanoseconds a cycle lasts
/// (`jets_ns_per_cycle`, CV-DFT-2); the import reads that number as it stands (CV-DFT-3). Taken
/// as cycles per ns (1 / 98) and inverted back, 98 came out 98.00000000000001: no whole number
/// of ns per cycle, so a time past 2^53 was refused and a time half way between two cycles
/// (147 ns = 1.5 cycles) went down through floating point where a whole scale rounds it up.
#[test]
fn ns_per_cycle_is_read_as_the_file_states_it() {
    let dir = tempfile::tempdir().expect("tmp");
    // One record at `ts`, `dur` in a file with `ns` ns per cycle; its start and end cycles.
    let cycles = |ns: &str, ts: u64, dur: u64| -> Result<(u64, u64), String> {
        let text = format!(
            "[\n\
             {{\"id\":1,\"name\":\"CM\",\"cat\":\"dftracer\",\"pid\":0,\"tid\":0,\"ph\":\"M\",\
             \"args\":{{\"name\":\"time_metric\",\"value\":\"NS\"}}}}\n\
             {{\"id\":2,\"name\":\"JETS\",\"cat\":\"dftracer\",\"pid\":0,\"tid\":0,\"ph\":\"M\",\
             \"args\":{{\"name\":\"header\",\"value\":{{}},\"jets_ns_per_cycle\":{ns}}}}}\n\
             {{\"id\":3,\"name\":\"core\",\"cat\":\"Core\",\"pid\":1,\"tid\":1,\"ts\":{ts},\
             \"dur\":{dur},\"ph\":\"X\",\"args\":{{\"jets_id\":1,\"jets_parent_id\":null}}}}\n]\n"
        );
        let input = dir.path().join("scaled.pfw");
        std::fs::write(&input, text).expect("write");
        let out = dir.path().join("scaled.jets");
        let o = import(&[&input], &out);
        if !o.status.success() {
            return Err(String::from_utf8_lossy(&o.stderr).into_owned());
        }
        let text = std::fs::read_to_string(&out).expect("read");
        let (mut start, mut end) = (None, None);
        for l in text.lines() {
            match Line::parse(l).expect("line") {
                Line::Record(r) => start = Some(r.clk),
                Line::RecordEnd(e) => end = Some(e.clk),
                _ => {}
            }
        }
        Ok((start.expect("the record"), end.expect("its end")))
    };
    // 98 ns per cycle: past 2^53, exact (cycle 10^17 + 3 is 98 * (10^17 + 3) ns).
    let k = 100_000_000_000_000_003u64;
    assert_eq!(cycles("98", 98 * k, 98 * 5), Ok((k, k + 5)));
    assert_eq!(cycles("98.0", 98 * k, 98 * 5), Ok((k, k + 5)));
    // Half way (1.5 and 2.5 cycles) rounds up, as at any whole number of ns per cycle.
    assert_eq!(cycles("98", 147, 98), Ok((2, 3)));
    assert_eq!(cycles("4", 6, 4), Ok((2, 3)));
    // Unchanged where the two steps were exact: 3 ns per cycle, and 0.1 (10 cycles per ns).
    assert_eq!(cycles("3", 3 * k + 1, 3), Ok((k, k + 1)));
    let ts = 100_000_000_000_000_007;
    assert_eq!(cycles("0.1", ts, 2), Ok((10 * ts, 10 * ts + 20)));
    // No whole number either way: floating point, one division, refused past 2^53.
    assert_eq!(cycles("2.5", 25, 10), Ok((10, 14)));
    let err = cycles("2.5", 25 * k, 10).expect_err("past 2^53 at 2.5 ns per cycle");
    assert!(err.contains("scaled.pfw:4") && err.contains("cannot be worked out exactly"), "{err}");
}
