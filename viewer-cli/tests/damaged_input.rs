//! Damaged input never crashes `jets import` or `jets convert`.
//!
//! The inputs are the real files of `tests/data` (see its README.md): the denet JSON Lines files
//! of `denet/`, the DFTracer traces of `dftracer/` (plus the DFTracer files `jets convert --to
//! dftracer` writes from the JETS traces, which take the importer's other path), the io-tracer
//! fixture directories of `iotracer/` and the JETS traces of `trace/`; and one small JETS trace
//! with `HostSync` samples written out below ([`host_trace`]), since `--to map` needs samples and
//! `tests/data` has no trace with them. Each is damaged deterministically (a xorshift generator
//! with a fixed seed): cut at a random byte, random bytes flipped or replaced, a line deleted,
//! duplicated or swapped with another, a number replaced by a huge, negative, NaN, `1e400` or text
//! value, a closing brace dropped, now and then two of these; compressed files (gzip, zstd,
//! brotli) are damaged as compressed bytes too. Each damaged file goes through the command that
//! reads it: `jets import --from denet|dftracer|io-tracer`, `jets convert --to
//! chrome|perfetto|kanata|dftracer` for JETS traces, `--to map` for the sampled trace and the
//! denet files: about 500 damaged inputs, 1,000 runs of `jets`.
//!
//! The rule checked: the process exits by itself within [`TIMEOUT`] (no hang, no signal), never
//! panics (no `panicked` or `RUST_BACKTRACE` on stderr), and when it fails its error names the
//! input. An import that succeeds must have written a valid JETS trace, and a Chrome, DFTracer or
//! MAP export that succeeds must be well-formed JSON. Every case is checked before the test fails,
//! and the failure lists them all with the damage that caused each, so a crash can be replayed.
//!
//! [`CONVERT_REGRESSIONS`], [`DFTRACER_REGRESSIONS`] and [`DENET_REGRESSIONS`] replay the damages
//! that broke the rule once, so that they stay fixed. `JETS_DAMAGE_SCALE=10` runs ten times as
//! many random damages (the first ones unchanged), to hunt for more.

use std::ffi::OsString;
use std::io::Read;
use std::path::{Path, PathBuf};

use serde_json::Value;

mod common;
use common::damage::{damage_bytes, damage_text, gzip, jets, os, rounds, Damages, Rng, TIMEOUT};
use common::data;

/// The generator's seed: the damages are the same on every run.
const SEED: u64 = 0x4a45_5453_2044_4d47;

/// What replaces a number: out of every range the readers use, not a number, not finite, or so
/// small (a clock of 1e-300 MHz) that the times made of it are past every format's range.
const BAD_NUMBERS: &[&str] = &[
    "18446744073709551615",
    "18446744073709551616",
    "99999999999999999999999999",
    "9223372036854775807",
    "4294967296",
    "-1",
    "-9223372036854775809",
    "NaN",
    "1e400",
    "-1e400",
    "1e19",
    "1e300",
    "1e-300",
    "5e-324",
    "-0.5",
    "0",
    "\"17\"",
    "\"x\"",
    "null",
];

/// This file's damages.
const DAMAGES: Damages = Damages { bad_numbers: BAD_NUMBERS, twice_one_in: 6, number_weight: 2 };

fn gunzip(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    flate2::read::MultiGzDecoder::new(bytes).read_to_end(&mut out).expect("gunzip test data");
    out
}

/// The decompressed text of any file the SDK's reader opens (plain, gzip, zstd, brotli).
fn text_of(path: &Path) -> Vec<u8> {
    let mut r = jets_read::Reader::open(path).expect("open test data");
    let mut out = Vec::new();
    while let Some(line) = r.next_line() {
        let line = line.expect("read test data");
        out.extend_from_slice(line.bytes);
        if line.terminated {
            out.push(b'\n');
        }
    }
    out
}

/// What a successful run's output must be.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Check {
    /// A valid JETS trace.
    Jets,
    /// One JSON document.
    Json,
    /// JSON Lines between `[` and `]` (DFTracer).
    JsonLines,
    /// Nothing checked (binary or line formats).
    Nothing,
}

/// What is wrong with output `out`, if anything.
fn check_output(check: Check, out: &Path) -> Option<String> {
    let bytes = match std::fs::read(out) {
        Ok(b) => b,
        Err(e) => return Some(format!("succeeded but {} is unreadable: {e}", out.display())),
    };
    match check {
        Check::Jets => {
            let (diagnostics, report) = jets_read::validate::validate_bytes(&bytes);
            (!report.is_valid()).then(|| {
                let first: Vec<String> =
                    diagnostics.iter().take(3).map(|d| format!("{d:?}")).collect();
                format!("succeeded but wrote an invalid JETS trace: {first:?}")
            })
        }
        Check::Json => serde_json::from_slice::<Value>(&bytes)
            .err()
            .map(|e| format!("succeeded but wrote malformed JSON: {e}")),
        Check::JsonLines => String::from_utf8_lossy(&bytes)
            .lines()
            .map(|l| l.trim().trim_end_matches(','))
            .filter(|l| !l.is_empty() && *l != "[" && *l != "]")
            .find_map(|l| serde_json::from_str::<Value>(l).err())
            .map(|e| format!("succeeded but wrote a malformed DFTracer line: {e}")),
        Check::Nothing => None,
    }
}

/// One command on one damaged input.
struct Case {
    /// What was damaged and how (to replay it).
    what: String,
    /// The arguments of `jets`.
    args: Vec<OsString>,
    /// What its error must name: the input as given.
    input: PathBuf,
    /// The output file.
    output: PathBuf,
    check: Check,
    /// The input must be refused (a regression case that once gave wrong output).
    must_fail: bool,
}

/// Runs the cases, each checked against the rule; panics listing every case that broke it.
fn run_all(cases: &[Case], work: &Path) {
    let mut problems = Vec::new();
    for c in cases {
        let _ = std::fs::remove_file(&c.output);
        let run = jets(&c.args, work);
        let head: String = run.stderr.lines().take(4).collect::<Vec<_>>().join(" | ");
        let problem = match run.status {
            None => Some(format!("hung: killed after {TIMEOUT:?}")),
            Some(s) if s.code().is_none() => Some(format!("killed by a signal: {s}")),
            Some(_) if run.stderr.contains("panicked") || run.stderr.contains("RUST_BACKTRACE") => {
                Some(format!("panicked: {head}"))
            }
            Some(s) if s.success() && c.must_fail => {
                Some("succeeded on an input it must refuse".to_owned())
            }
            Some(s) if !s.success() => {
                let input = c.input.display().to_string();
                (!run.stderr.contains(&input))
                    .then(|| format!("failed ({s}) without naming {input}: {head}"))
            }
            Some(_) => check_output(c.check, &c.output),
        };
        if let Some(p) = problem {
            problems.push(format!("{}\n    jets {:?}\n    {p}", c.what, c.args));
        }
    }
    assert!(
        problems.is_empty(),
        "{} of {} damaged inputs broke the rule:\n{}",
        problems.len(),
        cases.len(),
        problems.join("\n")
    );
}

/// The cases of one JETS trace `input` (already written): every timeline target, and MAP when
/// `map`.
fn convert_cases(what: &str, input: &Path, work: &Path, map: bool) -> Vec<Case> {
    convert_cases_refused(what, input, work, map, &[])
}

/// [`convert_cases`], the targets in `refused` having to refuse the input.
fn convert_cases_refused(
    what: &str,
    input: &Path,
    work: &Path,
    map: bool,
    refused: &[&str],
) -> Vec<Case> {
    let mut targets = vec![
        ("chrome", "json", Check::Json),
        ("perfetto", "pftrace", Check::Nothing),
        ("kanata", "log", Check::Nothing),
        ("dftracer", "pfw", Check::JsonLines),
    ];
    if map {
        targets.push(("map", "map.json", Check::Json));
    }
    targets
        .into_iter()
        .map(|(to, ext, check)| {
            let output = work.join(format!("out.{ext}"));
            Case {
                what: format!("{what} (--to {to})"),
                args: os(&[&"convert", &input, &"--to", &to, &"-o", &output]),
                input: input.to_owned(),
                output,
                check,
                must_fail: refused.contains(&to),
            }
        })
        .collect()
}

fn import_case(what: &str, from: &str, input: &Path, work: &Path) -> Case {
    let output = work.join("imported.jets");
    Case {
        what: what.to_owned(),
        args: os(&[&"import", &"--from", &from, &input, &"-o", &output]),
        input: input.to_owned(),
        output,
        check: Check::Jets,
        must_fail: false,
    }
}

/// Writes `bytes` to `dir/case<n>_<name>` (a name of its own, for the error to name).
fn write_input(dir: &Path, n: usize, name: &str, bytes: &[u8]) -> PathBuf {
    let p = dir.join(format!("case{n}_{name}"));
    std::fs::write(&p, bytes).expect("write damaged input");
    p
}

/// A small JETS trace with host samples (what `jets convert --to map` reads), written by hand so
/// that it is the same on every run: a `HostProcess` record with 20 `HostSync` events every 100
/// cycles (10 ms of host time apart), and a core running one 50-cycle instruction per sample.
fn host_trace() -> Vec<u8> {
    let mut t = String::new();
    let mut line = |l: String| {
        t.push_str(&l);
        t.push('\n');
    };
    line(
        concat!(
            r#"{"type":"header","version":"2.0","metadata":{"tool":"damaged_input test","#,
            r#""clock_frequency_mhz":1000.0}}"#
        )
        .into(),
    );
    line(
        concat!(
            r#"{"clk":0,"type":"record","name":"sim","record_type":"HostProcess","id":1,"#,
            r#""parent_id":null,"description":"","data":{"pid":4242,"command":"sim"}}"#
        )
        .into(),
    );
    line(
        concat!(
            r#"{"type":"annotation","name":"HostEnv","record_id":1,"description":"","#,
            r#""data":{"hostname":"h","cpus":2}}"#
        )
        .into(),
    );
    line(
        concat!(
            r#"{"clk":0,"type":"record","name":"core0","record_type":"Core","id":2,"#,
            r#""parent_id":null,"description":""}"#
        )
        .into(),
    );
    for i in 0..20u64 {
        let (clk, id) = (i * 100, 3 + i);
        let (mono, real) =
            (5_000_000_000 + i * 10_000_000, 1_700_000_000_000_000_000 + i * 10_000_000);
        let (cpu, usage, rss) = (i * 9_000_000, 10 + i, 20_000 + i * 64);
        let head = format!(r#"{{"clk":{clk},"type":"event","name":"HostSync","record_id":1,"#);
        let data = format!(r#"{{"mono_ns":{mono},"real_ns":{real},"cpu_ns":{cpu},"#)
            + &format!(r#""cpu_usage":{usage}.5,"mem_rss_kb":{rss}}}"#);
        line(format!(r#"{head}"description":"","data":{data}}}"#));
        let head = format!(r#"{{"clk":{},"type":"record","name":"i{i}","#, clk + 1);
        line(format!(
            r#"{head}"record_type":"Instruction","id":{id},"parent_id":2,"description":""}}"#
        ));
        line(format!(r#"{{"clk":{},"type":"record_end","record_id":{id}}}"#, clk + 51));
    }
    line(r#"{"clk":2000,"type":"record_end","record_id":2}"#.into());
    line(r#"{"clk":2000,"type":"record_end","record_id":1}"#.into());
    t.into_bytes()
}

/// A fixed damage to an input's (decompressed) text.
enum Edit {
    /// The first occurrence of a text replaced.
    Replace(&'static str, &'static str),
    /// Two lines (1-based) swapped.
    SwapLines(usize, usize),
    /// A line (1-based) written twice.
    DuplicateLine(usize),
    /// A line (1-based) removed.
    DeleteLine(usize),
}

/// A damage that once broke the rule, replayed on every run.
struct Regression {
    /// The input (a file name of the test's sources).
    input: &'static str,
    /// What it found (and what fixed it).
    found: &'static str,
    edits: &'static [Edit],
    /// The targets (`--to`), or `import`, that must refuse it.
    refused_by: &'static [&'static str],
}

/// `text` with `edits` applied, in order.
fn apply(text: &[u8], edits: &[Edit]) -> Vec<u8> {
    let mut text = String::from_utf8(text.to_vec()).expect("regression inputs are UTF-8");
    for edit in edits {
        let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
        match *edit {
            Edit::Replace(from, to) => {
                assert!(text.contains(from), "{from:?} is not in the input");
                text = text.replacen(from, to, 1);
                continue;
            }
            Edit::SwapLines(a, b) => lines.swap(a - 1, b - 1),
            Edit::DuplicateLine(n) => lines.insert(n - 1, lines[n - 1].clone()),
            Edit::DeleteLine(n) => drop(lines.remove(n - 1)),
        }
        text = lines.join("\n") + "\n";
    }
    text.into_bytes()
}

/// JETS traces (`small.jets`, `host.jets`) through `jets convert`.
const CONVERT_REGRESSIONS: &[Regression] = &[
    Regression {
        input: "small.jets",
        found: "a record at the last cycle (u64::MAX): Chrome, Perfetto and DFTracer panicked \
                (overflow in the timeline's lane packing, `s + 1`)",
        edits: &[Edit::Replace(
            r#"{"clk":0,"type":"record","name":"core0""#,
            r#"{"clk":18446744073709551615,"type":"record","name":"core0""#,
        )],
        refused_by: &[],
    },
    Regression {
        input: "small.jets",
        found: "an instruction retiring at the last cycle in the cycle of its last stage: Kanata \
                panicked (overflow lengthening the stage to the next cycle)",
        edits: &[
            Edit::Replace(
                r#"{"clk":15,"type":"event","name":"W","record_id":4"#,
                r#"{"clk":18446744073709551615,"type":"event","name":"W","record_id":4"#,
            ),
            Edit::Replace(
                r#"{"clk":20,"type":"record_end","record_id":4}"#,
                r#"{"clk":18446744073709551615,"type":"record_end","record_id":4}"#,
            ),
        ],
        refused_by: &["kanata"],
    },
    Regression {
        input: "small.jets",
        found: "the header line twice: Chrome wrote malformed JSON (its opening twice), DFTracer \
                and Perfetto two openings too",
        edits: &[Edit::DuplicateLine(1)],
        refused_by: &["chrome", "perfetto", "dftracer"],
    },
    Regression {
        input: "small.jets",
        found: "no header line first: Chrome wrote malformed JSON (no opening)",
        edits: &[Edit::SwapLines(1, 2)],
        refused_by: &["chrome", "perfetto", "dftracer"],
    },
    Regression {
        input: "small.jets",
        found: "no header line at all: Chrome wrote malformed JSON (no opening)",
        edits: &[Edit::DeleteLine(1)],
        refused_by: &["chrome", "perfetto", "dftracer"],
    },
    Regression {
        input: "small.jets",
        found: "a cycle past 2^64 ns (a slow clock): Perfetto and DFTracer wrote timestamps \
                wrapped modulo 2^64 (a cast), silently wrong",
        edits: &[
            Edit::Replace(r#""clock_frequency_mhz":1000.0"#, r#""clock_frequency_mhz":0.001"#),
            Edit::Replace(
                r#"{"clk":40,"type":"record_end""#,
                r#"{"clk":18446744073709551000,"type":"record_end""#,
            ),
        ],
        refused_by: &["perfetto", "dftracer"],
    },
];

/// DFTracer files (those `jets convert --to dftracer` writes) through `jets import`.
const DFTRACER_REGRESSIONS: &[Regression] = &[
    Regression {
        input: "small.jets.pfw",
        found: "a `ts` past 2^64 cycles (1e26): silently made the last cycle, then the writer \
                failed without naming the file",
        edits: &[Edit::Replace(
            r#""name":"br","cat":"Instruction","pid":1,"tid":1,"ts":6,"#,
            r#""name":"br","cat":"Instruction","pid":1,"tid":1,"ts":99999999999999999999999999,"#,
        )],
        refused_by: &["import"],
    },
    Regression {
        input: "rjets_tests_trace.jets.pfw",
        found: "a record's `ts` moved past its events (1e19): the writer's error named neither \
                the file nor the line",
        edits: &[Edit::Replace(r#""pid":1,"tid":7,"ts":1101,"#, r#""pid":1,"tid":7,"ts":1e19,"#)],
        refused_by: &["import"],
    },
];

/// denet files through `jets import` and `jets convert --to map`.
const DENET_REGRESSIONS: &[Regression] = &[
    Regression {
        input: "single_growing_rss.jsonl",
        found: "samples out of time order: MAP panicked (overflow in `ts - t0`)",
        edits: &[Edit::SwapLines(5, 2)],
        refused_by: &["import", "map"],
    },
    Regression {
        input: "legacy_untagged_tree.jsonl",
        found: "samples out of time order: the import failed in the writer without naming the file",
        edits: &[Edit::SwapLines(10, 6)],
        refused_by: &["import", "map"],
    },
];

/// A temporary directory with `in/` for the damaged inputs and `work/` for the runs' outputs
/// (the directory goes when the first value is dropped).
fn scratch() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let dir = tempfile::tempdir().expect("tmp");
    let (inputs, work) = (dir.path().join("in"), dir.path().join("work"));
    std::fs::create_dir_all(&inputs).expect("mkdir");
    std::fs::create_dir_all(&work).expect("mkdir");
    (dir, inputs, work)
}

#[test]
fn the_undamaged_inputs_convert_and_import() {
    let dir = tempfile::tempdir().expect("tmp");
    let host = dir.path().join("host.jets");
    std::fs::write(&host, host_trace()).expect("write");
    let (diagnostics, report) = jets_read::validate::validate_bytes(&host_trace());
    assert!(report.is_valid() && report.warnings == 0, "{diagnostics:#?}");
    let mut cases = convert_cases("host trace", &host, dir.path(), true);
    for name in ["small.jets", "rjets_tests_trace.jets", "rjets_tests_trace.jets.br"] {
        cases.extend(convert_cases(name, &data(&format!("trace/{name}")), dir.path(), false));
    }
    for name in ["c_stdio_preload.pfw.gz", "legacy_doc_format.pfw", "python_threads_fsync.pfw.gz"] {
        cases.push(import_case(name, "dftracer", &data(&format!("dftracer/{name}")), dir.path()));
    }
    for name in denet_files() {
        let input = data(&format!("denet/{name}"));
        cases.push(import_case(name, "denet", &input, dir.path()));
        let output = dir.path().join("denet.map.json");
        cases.push(Case {
            what: format!("{name} (--to map)"),
            args: os(&[&"convert", &input, &"--to", &"map", &"-o", &output]),
            input,
            output,
            check: Check::Json,
            must_fail: false,
        });
    }
    for v in ["v1", "v2"] {
        let input = data(&format!("iotracer/{v}/output_20240115_103045"));
        cases.push(import_case(v, "io-tracer", &input, dir.path()));
    }
    for c in &cases {
        let run = jets(&c.args, dir.path());
        assert!(run.status.is_some_and(|s| s.success()), "{}: {}", c.what, run.stderr);
        assert_eq!(check_output(c.check, &c.output), None, "{}", c.what);
    }
}

fn denet_files() -> [&'static str; 4] {
    [
        "cli_write_env_children.jsonl",
        "legacy_untagged_tree.jsonl",
        "single_growing_rss.jsonl",
        "tree_gzip_children.jsonl",
    ]
}

#[test]
fn damaged_jets_traces_convert_or_fail_cleanly() {
    let (_dir, inputs, work) = scratch();
    let mut cases = Vec::new();
    let mut n = 0;
    let sources: [(&str, Vec<u8>, usize, bool); 3] = [
        ("small.jets", std::fs::read(data("trace/small.jets")).expect("read"), 40, false),
        (
            "rjets_tests_trace.jets",
            std::fs::read(data("trace/rjets_tests_trace.jets")).expect("read"),
            25,
            false,
        ),
        ("host.jets", host_trace(), 40, true),
    ];
    for (k, (name, text, count, map)) in sources.iter().enumerate() {
        let mut rng = Rng::new(SEED, k as u64);
        for _ in 0..rounds(*count) {
            let (bytes, what) = damage_text(text, &mut rng, &DAMAGES);
            n += 1;
            let input = write_input(&inputs, n, name, &bytes);
            cases.extend(convert_cases(&format!("{name}: {what}"), &input, &work, *map));
        }
    }
    // The brotli trace, damaged as compressed bytes.
    let br = std::fs::read(data("trace/rjets_tests_trace.jets.br")).expect("read");
    let mut rng = Rng::new(SEED, 100);
    for _ in 0..rounds(8) {
        let (bytes, what) = damage_bytes(&br, &mut rng);
        n += 1;
        let input = write_input(&inputs, n, "rjets_tests_trace.jets.br", &bytes);
        cases.extend(convert_cases(
            &format!("rjets_tests_trace.jets.br: {what}"),
            &input,
            &work,
            false,
        ));
    }
    for (i, r) in CONVERT_REGRESSIONS.iter().enumerate() {
        let original = match r.input {
            "host.jets" => host_trace(),
            name => std::fs::read(data(&format!("trace/{name}"))).expect("read"),
        };
        let input = write_input(&inputs, 10_000 + i, r.input, &apply(&original, r.edits));
        let what = format!("regression {i}: {}", r.found);
        let map = r.input == "host.jets";
        cases.extend(convert_cases_refused(&what, &input, &work, map, r.refused_by));
    }
    run_all(&cases, &work);
}

#[test]
fn damaged_dftracer_files_import_or_fail_cleanly() {
    let (_dir, inputs, work) = scratch();
    // DFTracer files this tool writes: the importer restores the JETS hierarchy from them.
    let mut sources: Vec<(String, Vec<u8>, bool)> = Vec::new();
    for name in ["small.jets", "rjets_tests_trace.jets"] {
        let out = work.join(format!("{name}.pfw"));
        let args =
            os(&[&"convert", &data(&format!("trace/{name}")), &"--to", &"dftracer", &"-o", &out]);
        let run = jets(&args, &work);
        assert!(run.status.is_some_and(|s| s.success()), "{}", run.stderr);
        sources.push((format!("{name}.pfw"), std::fs::read(&out).expect("read"), false));
    }
    for name in ["c_stdio_preload.pfw.gz", "legacy_doc_format.pfw", "python_threads_fsync.pfw.gz"] {
        let bytes = std::fs::read(data(&format!("dftracer/{name}"))).expect("read");
        let gz = bytes.starts_with(&[0x1f, 0x8b]);
        sources.push((name.to_owned(), if gz { gunzip(&bytes) } else { bytes }, gz));
    }
    let mut cases = Vec::new();
    let mut n = 0;
    for (k, (name, text, gz)) in sources.iter().enumerate() {
        let mut rng = Rng::new(SEED, 200 + k as u64);
        for _ in 0..rounds(30) {
            let (bytes, what) = damage_text(text, &mut rng, &DAMAGES);
            n += 1;
            // Compressed files go back compressed, damaged inside.
            let bytes = if *gz { gzip(&bytes) } else { bytes };
            let input = write_input(&inputs, n, name, &bytes);
            cases.push(import_case(&format!("{name}: {what}"), "dftracer", &input, &work));
        }
        if *gz {
            let compressed = gzip(text);
            for _ in 0..rounds(8) {
                let (bytes, what) = damage_bytes(&compressed, &mut rng);
                n += 1;
                let input = write_input(&inputs, n, name, &bytes);
                cases.push(import_case(&format!("{name}: {what}"), "dftracer", &input, &work));
            }
        }
    }
    for (i, r) in DFTRACER_REGRESSIONS.iter().enumerate() {
        let (_, text, _) = sources.iter().find(|(name, _, _)| name == r.input).expect("source");
        let input = write_input(&inputs, 10_000 + i, r.input, &apply(text, r.edits));
        let mut case =
            import_case(&format!("regression {i}: {}", r.found), "dftracer", &input, &work);
        case.must_fail = r.refused_by.contains(&"import");
        cases.push(case);
    }
    run_all(&cases, &work);
}

#[test]
fn damaged_denet_files_import_or_fail_cleanly() {
    let (_dir, inputs, work) = scratch();
    let mut cases = Vec::new();
    let mut n = 0;
    let denet_cases = |what: &str, input: PathBuf, refused_by: &[&str]| {
        let mut import = import_case(what, "denet", &input, &work);
        import.must_fail = refused_by.contains(&"import");
        let output = work.join("denet.map.json");
        let map = Case {
            what: format!("{what} (--to map)"),
            args: os(&[&"convert", &input, &"--to", &"map", &"-o", &output]),
            input,
            output,
            check: Check::Json,
            must_fail: refused_by.contains(&"map"),
        };
        [import, map]
    };
    for (k, name) in denet_files().into_iter().enumerate() {
        let text = std::fs::read(data(&format!("denet/{name}"))).expect("read");
        let mut rng = Rng::new(SEED, 300 + k as u64);
        for _ in 0..rounds(30) {
            let (bytes, what) = damage_text(&text, &mut rng, &DAMAGES);
            n += 1;
            let input = write_input(&inputs, n, name, &bytes);
            cases.extend(denet_cases(&format!("{name}: {what}"), input, &[]));
        }
    }
    for (i, r) in DENET_REGRESSIONS.iter().enumerate() {
        let text = std::fs::read(data(&format!("denet/{}", r.input))).expect("read");
        let input = write_input(&inputs, 10_000 + i, r.input, &apply(&text, r.edits));
        cases.extend(denet_cases(&format!("regression {i}: {}", r.found), input, r.refused_by));
    }
    run_all(&cases, &work);
}

/// Copies directory `from` into `to`, recursively.
fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for e in std::fs::read_dir(from).expect("list") {
        let p = e.expect("entry").path();
        let dest = to.join(p.file_name().expect("name"));
        if p.is_dir() {
            copy_dir(&p, &dest);
        } else {
            std::fs::copy(&p, &dest).expect("copy");
        }
    }
}

/// Every file under `dir`, sorted.
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).expect("list") {
        let p = e.expect("entry").path();
        if p.is_dir() {
            out.extend(files_under(&p));
        } else {
            out.push(p);
        }
    }
    out.sort();
    out
}

#[test]
fn damaged_io_tracer_directories_import_or_fail_cleanly() {
    let dir = tempfile::tempdir().expect("tmp");
    let work = dir.path().join("work");
    std::fs::create_dir_all(&work).expect("mkdir");
    let mut cases = Vec::new();
    let mut n = 0;
    for (k, v) in ["v1", "v2"].into_iter().enumerate() {
        let original = data(&format!("iotracer/{v}/output_20240115_103045"));
        let files: Vec<PathBuf> = files_under(&original)
            .into_iter()
            .filter(|p| !p.ends_with("system_spec/cpu_info.json"))
            .collect();
        let mut rng = Rng::new(SEED, 400 + k as u64);
        for _ in 0..rounds(40) {
            n += 1;
            let case_dir = dir.path().join(format!("case{n}")).join("output_20240115_103045");
            copy_dir(&original, &case_dir);
            let file = rng.pick(&files);
            let rel = file.strip_prefix(&original).expect("under");
            let target = case_dir.join(rel);
            let name = rel.display().to_string();
            let bytes = std::fs::read(file).expect("read");
            let what = if name.ends_with(".gz") || name.ends_with(".zst") {
                if rng.below(3) == 0 {
                    let (b, what) = damage_bytes(&bytes, &mut rng);
                    std::fs::write(&target, b).expect("write");
                    what
                } else {
                    let (b, what) = damage_text(&text_of(file), &mut rng, &DAMAGES);
                    if name.ends_with(".gz") {
                        std::fs::write(&target, gzip(&b)).expect("write");
                    } else {
                        // No zstd encoder here: the damaged text replaces the file as plain CSV.
                        std::fs::remove_file(&target).expect("remove");
                        std::fs::write(target.with_extension(""), b).expect("write");
                    }
                    what
                }
            } else {
                let (b, what) = damage_text(&bytes, &mut rng, &DAMAGES);
                std::fs::write(&target, b).expect("write");
                what
            };
            cases.push(import_case(&format!("{v} {name}: {what}"), "io-tracer", &case_dir, &work));
        }
    }
    run_all(&cases, &work);
}
