//! Damaged JETS traces never crash the commands that read them: `jets validate`, `jets repair`,
//! `jets stats` (text and JSON), `jets tree` (whole and filtered), `jets cut`, `jets gantt` and,
//! with the `parquet` feature, the run comparison of "Comparing runs" in the README (`jets
//! convert --to parquet` and `jets stats --format parquet`). `tests/damaged_input.rs` does the
//! same for `jets import` and `jets convert`; the damages are the same kinds, from the same kind
//! of generator.
//!
//! The inputs: the JETS traces of `tests/data/trace` (see its README.md), traces written here with
//! the SDK (`jets::Trace`: deep nesting, many open records, cycles up to `u64::MAX`, and `.gz` and
//! `.zst` files), a trace with host samples (`HostSync`, from cycle 0 and near `u64::MAX`), and
//! hand-written traces that break one structural rule each (a record ending
//! before it begins, lines naming unknown records, duplicate ids, a missing or second header or
//! footer, footer totals that disagree, ...). Each is damaged deterministically (a xorshift
//! generator with a fixed seed): cut, bytes flipped or replaced, a line deleted, doubled or
//! swapped, a number made huge, negative or text, a brace dropped; compressed files are damaged as
//! compressed bytes too.
//!
//! The rule checked on every input and command: the process exits by itself within [`TIMEOUT`]
//! (no hang, no signal), never panics (no `panicked` or `RUST_BACKTRACE` on stderr), and when it
//! fails its error names the input (`jets validate` names it in its diagnostics). `validate` runs
//! with its options in turn, `repair` with `--end-open` or not, to a file, a `.gz` or standard
//! output, `tree` whole and with a filter in turn, `cut` under a setting in turn. Beyond the rule:
//! `jets repair`'s output passes `jets validate` with a footer that agrees with it, and a part
//! `jets cut` writes passes it too; every line of `jets validate --format json` and the whole of
//! `jets stats --format json` is well-formed JSON;
//! and the numbers agree where they can be checked: the stats counts add up (count = ended +
//! unended per record_type, the types sum to the record lines, text and JSON say the same), and
//! on a trace `jets validate` accepts, the record, event and annotation counts of `stats`,
//! `tree`, `gantt` (its summary, and the bars and markers of its whole-trace window), `repair`
//! (nothing dropped) and the Parquet tables equal the validator's; on the undamaged traces, the
//! footer's totals agree with the counted lines. About 170 inputs and 1,500 runs of `jets` by
//! default (more with the `parquet` feature). `jets validate --follow`, which waits for a footer
//! by design, runs on the plain traces that have one and a complete last line: it must end by
//! itself with a plain run's exit status and diagnostics
//! ([`validate_follow_ends_with_the_verdict_of_a_plain_run`]).
//!
//! [`REGRESSIONS`] replays the inputs that broke the rule once. `JETS_DAMAGE_SCALE=10` runs ten
//! times as many random damages (the first ones unchanged), to hunt for more.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use jets::{Metadata, Trace};
use serde_json::Value;

mod common;
#[cfg(feature = "parquet")]
use common::damage::Run;
use common::damage::{
    damage_bytes, damage_text, gzip, jets, jets_within, os, rounds, Damages, Rng, TIMEOUT,
};
use common::data;

/// The generator's seed: the damages are the same on every run.
const SEED: u64 = 0x4a45_5453_2052_4541;

/// What replaces a number: out of every range the readers use, not a number, not finite, or so
/// small (a clock of 1e-300 MHz) that the times made of it are past every format's range.
const BAD_NUMBERS: &[&str] = &[
    "18446744073709551615",
    "18446744073709551614",
    "18446744073709551616",
    "99999999999999999999999999",
    "9223372036854775807",
    "9007199254740993",
    "4294967296",
    "-1",
    "NaN",
    "1e400",
    "1e19",
    "1e-300",
    "5e-324",
    "-0",
    "0",
    "\"17\"",
    "null",
];

/// This file's damages.
const DAMAGES: Damages = Damages { bad_numbers: BAD_NUMBERS, twice_one_in: 5, number_weight: 3 };

/// What is known of an input beyond the rule every input keeps.
#[derive(Clone, Copy, Default)]
struct Expect {
    /// Undamaged: valid, and its footer's totals agree with its lines.
    whole: bool,
    /// The commands that must refuse it (a regression that once gave a wrong answer).
    refused_by: &'static [&'static str],
}

/// The figures `jets validate --format json` counted in a trace it accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Counted {
    records: u64,
    events: u64,
    annotations: u64,
}

/// Notes a broken rule: the command's arguments, what broke.
type Note<'a> = dyn FnMut(&[OsString], String) + 'a;

/// Runs a command (named as in [`Regression::refused_by`]) and checks the rule every run keeps:
/// whether it kept it, and the run. Named for the Parquet checks, which take it as an argument.
#[cfg(feature = "parquet")]
type Ran<'a> = dyn Fn(&str, Vec<OsString>, &mut Note<'_>) -> (bool, Run) + 'a;

/// The options `jets validate` is run with (one per input, in turn), besides `--format json`.
const VALIDATE_OPTIONS: &[&[&str]] =
    &[&[], &["--strict"], &["--max-errors", "1"], &["--allow", "W013", "--allow", "E018"]];

/// `jets cut`'s settings, one per input in turn.
const CUT_SETTINGS: &[&str] = &[
    "clk=0..100",
    "recorder=50",
    "types=Instruction",
    "clk=5..10;every=20",
    "sample=Instruction:2;events=IF,e",
    "recorder=3;trigger=error",
];

/// The filters `jets tree` is run with (one per input, in turn), besides no filter at all.
const TREE_FILTERS: &[&[&str]] = &[
    &["--depth", "2"],
    &["--clk", "0..100"],
    &["--type", "Instruction"],
    &["--depth", "1", "--clk", "..5"],
    &["--name", "^i", "--depth", "3"],
    &["--clk", "18446744073709551610.."],
    &["--type", "T", "--clk", "5..18446744073709551615"],
];

/// Checks every command on `input`; the broken rules, each with the command that broke it.
fn check_input(what: &str, input: &Path, work: &Path, n: usize, expect: Expect) -> Vec<String> {
    let mut problems = Vec::new();
    let name = input.display().to_string();
    let mut note = |cmd: &[OsString], p: String| {
        problems.push(format!("{what}\n    jets {cmd:?}\n    {p}"));
    };
    // The rule every run keeps; false when it was broken (and noted).
    let ran = |cmd: &str, args: Vec<OsString>, note: &mut Note<'_>| {
        let run = jets(&args, work);
        let head: String = run.stderr.lines().take(4).collect::<Vec<_>>().join(" | ");
        let refused = expect.refused_by.contains(&cmd);
        let problem = match run.status {
            None => Some(format!("hung: killed after {TIMEOUT:?}")),
            Some(s) if s.code().is_none() => Some(format!("killed by a signal: {s}")),
            Some(_) if run.stderr.contains("panicked") || run.stderr.contains("RUST_BACKTRACE") => {
                Some(format!("panicked: {head}"))
            }
            Some(s) if s.success() && refused => {
                Some("succeeded on an input it must refuse".to_owned())
            }
            // `jets validate` names the file in each diagnostic (stdout), the others on stderr.
            Some(s)
                if !s.success() && !run.stderr.contains(&name) && !run.stdout.contains(&name) =>
            {
                Some(format!("failed ({s}) without naming {name}: {head}"))
            }
            Some(_) => None,
        };
        let ok = problem.is_none();
        if let Some(p) = problem {
            note(&args, p);
        }
        (ok, run)
    };

    // validate: every line JSON; the summary's counts when the trace is valid.
    let args = os(&[&"validate", &"--format", &"json", &input]);
    let (_, run) = ran("validate", args.clone(), &mut note);
    let mut counted = None;
    for line in run.stdout.lines() {
        match serde_json::from_str::<Value>(line) {
            Err(e) => note(&args, format!("a malformed JSON line ({e}): {line}")),
            Ok(v) if v["type"] == "summary" && v["valid"] == true => {
                let n = |k: &str| v[k].as_u64().unwrap_or(u64::MAX);
                counted = Some(Counted {
                    records: n("records"),
                    events: n("events"),
                    annotations: n("annotations"),
                });
            }
            Ok(_) => {}
        }
    }
    if expect.whole && (counted.is_none() || !run.ok()) {
        note(&args, format!("an undamaged trace is not valid: {}", run.stdout));
    }

    // validate's options, in turn, on the text output.
    let mut args = os(&[&"validate", &input]);
    args.extend(VALIDATE_OPTIONS[n % VALIDATE_OPTIONS.len()].iter().map(OsString::from));
    ran("validate", args, &mut note);

    // repair (every other input with --end-open, every third to a .gz, every fifth to standard
    // output): its output validates, with a footer that agrees; nothing of a valid trace is
    // dropped.
    let repaired = work.join(if n % 3 == 0 { "repaired.jets.gz" } else { "repaired.jets" });
    let _ = std::fs::remove_file(&repaired);
    let to_stdout = n % 5 == 4;
    let out: &dyn AsRef<std::ffi::OsStr> = if to_stdout { &"-" } else { &repaired };
    let mut args = os(&[&"repair", &input, &"-o", out]);
    if n % 2 == 0 {
        args.push("--end-open".into());
    }
    let (ok, run) = ran("repair", args.clone(), &mut note);
    if ok && run.ok() && to_stdout {
        let repaired = work.join("repaired.jets");
        std::fs::write(&repaired, &run.stdout).expect("write the repaired trace");
    }
    let repaired = if to_stdout { work.join("repaired.jets") } else { repaired };
    if ok && run.ok() {
        if counted.is_some() && run.stderr.contains("dropped") {
            note(&args, format!("dropped lines of a valid trace: {}", run.stderr.trim()));
        }
        let check = os(&[&"validate", &"--format", &"json", &repaired]);
        let v = jets(&check, work);
        let footer = v.stdout.lines().any(|l| l.contains(r#""code":"W004""#))
            || v.stdout.lines().any(|l| l.contains(r#""code":"W005""#));
        if !v.ok() || footer {
            let first: Vec<&str> = v.stdout.lines().take(3).collect();
            note(&args, format!("wrote a trace `jets validate` refuses: {first:?}"));
        } else if let Some(c) = counted {
            let summary = v.stdout.lines().last().unwrap_or_default();
            let s: Value = serde_json::from_str(summary).unwrap_or_default();
            let got = (s["records"].as_u64(), s["events"].as_u64(), s["annotations"].as_u64());
            if got != (Some(c.records), Some(c.events), Some(c.annotations)) {
                note(&args, format!("repaired a valid trace into other counts: {got:?}, {c:?}"));
            }
        }
    }

    // stats, text and JSON: the same counts in both, which add up.
    let text_args = os(&[&"stats", &input]);
    let (_, text) = ran("stats", text_args, &mut note);
    let args = os(&[&"stats", &"--format", &"json", &input]);
    let (ok, run) = ran("stats", args.clone(), &mut note);
    if ok && run.ok() {
        match serde_json::from_str::<Value>(&run.stdout) {
            Err(e) => note(&args, format!("malformed JSON: {e}")),
            Ok(v) => {
                for p in stats_problems(&v, counted, expect.whole) {
                    note(&args, p);
                }
                if text.ok() {
                    let lines = &v["lines"];
                    let said = format!(
                        "lines     header {} record {} record_end {} annotation {} event {} \
                         footer {}",
                        lines["header"],
                        lines["record"],
                        lines["record_end"],
                        lines["annotation"],
                        lines["event"],
                        lines["footer"]
                    );
                    if !text.stdout.contains(&said) {
                        note(&args, format!("the text report does not say {said:?}"));
                    }
                }
            }
        }
    }

    // tree: every record once on a valid trace; a filter too.
    let args = os(&[&"tree", &input]);
    let (ok, run) = ran("tree", args.clone(), &mut note);
    if let (true, true, Some(c)) = (ok, run.ok(), counted) {
        let shown = tree_records(&run.stdout);
        if shown != c.records {
            note(&args, format!("shows {shown} records of the {} the trace has", c.records));
        }
    }
    let mut args = os(&[&"tree", &input]);
    args.extend(TREE_FILTERS[n % TREE_FILTERS.len()].iter().map(OsString::from));
    ran("tree-filtered", args, &mut note);

    // cut, under a setting in turn: a part it writes validates, and one it refuses is not left
    // behind (CAP-CUT-4).
    let part = work.join("part.jets");
    let _ = std::fs::remove_file(&part);
    let setting = CUT_SETTINGS[n % CUT_SETTINGS.len()];
    let args = os(&[&"cut", &"--capture", &setting, &input, &"-o", &part]);
    let (ok, run) = ran("cut", args.clone(), &mut note);
    if ok && run.ok() {
        let v = jets(&os(&[&"validate", &part]), work);
        if !v.ok() {
            let first: Vec<&str> = v.stdout.lines().take(3).collect();
            note(&args, format!("wrote a part `jets validate` refuses: {first:?}"));
        }
    } else if ok && part.exists() {
        note(&args, "failed and left its output behind".to_owned());
    }

    // gantt: a page whose data is JSON, with the validator's counts and no skipped line.
    let page = work.join("page.html");
    let _ = std::fs::remove_file(&page);
    let args = os(&[&"gantt", &input, &"-o", &page]);
    let (ok, run) = ran("gantt", args.clone(), &mut note);
    if ok && run.ok() {
        match gantt_counts(&page) {
            Err(p) => note(&args, p),
            Ok(got) => {
                if let Some(c) = counted {
                    let want = (c.records, c.events, c.annotations, 0);
                    if got != want {
                        note(&args, format!("counts (records, events, annotations, errors) {got:?}, want {want:?}"));
                    }
                }
            }
        }
    }

    #[cfg(feature = "parquet")]
    parquet::check(input, work, counted, &ran, &mut note);

    problems
}

/// What is wrong with a `jets stats --format json` report: counts that do not add up, counts that
/// differ from the validator's (`counted`, on a valid trace), a footer that disagrees (`whole`).
fn stats_problems(v: &Value, counted: Option<Counted>, whole: bool) -> Vec<String> {
    let mut out = Vec::new();
    let lines = |k: &str| v["lines"][k].as_u64();
    let (mut count, mut unended) = (0u64, 0u64);
    match v["record_types"].as_object() {
        None => out.push("no record_types object".to_owned()),
        Some(types) => {
            for (t, s) in types {
                let (c, e, u) = (s["count"].as_u64(), s["ended"].as_u64(), s["unended"].as_u64());
                let (Some(c), Some(e), Some(u)) = (c, e, u) else {
                    out.push(format!("record_type {t:?}: counts missing: {s}"));
                    continue;
                };
                if c != e + u {
                    out.push(format!("record_type {t:?}: count {c} != ended {e} + unended {u}"));
                }
                count += c;
                unended += u;
            }
        }
    }
    if lines("record") != Some(count) {
        out.push(format!("{count} records by type, {:?} record lines", lines("record")));
    }
    if v["unended_records"]["count"].as_u64() != Some(unended) {
        out.push(format!(
            "{unended} unended by type, {} in unended_records",
            v["unended_records"]["count"]
        ));
    }
    if let Some(c) = counted {
        let got = (lines("record"), lines("event"), lines("annotation"));
        if got != (Some(c.records), Some(c.events), Some(c.annotations)) {
            out.push(format!("lines {got:?}, the validator counted {c:?}"));
        }
    }
    if whole {
        let checks = v["footer"].as_array().map_or(&[][..], Vec::as_slice);
        if checks.len() != 4 || checks.iter().any(|c| c["agrees"] != true) {
            out.push(format!("the footer of an undamaged trace: {}", v["footer"]));
        }
    }
    out
}

/// The record lines of a `jets tree` output.
fn tree_records(out: &str) -> u64 {
    let re = regex::Regex::new(r"\] #\d+  clk \d").expect("regex");
    re.find_iter(out).count() as u64
}

/// (records, events, annotations, skipped lines) of a `jets gantt` page's data.
fn gantt_counts(page: &Path) -> Result<(u64, u64, u64, u64), String> {
    let html = std::fs::read_to_string(page).map_err(|e| format!("page unreadable: {e}"))?;
    let open = r#"<script type="application/json" id="jets-data">"#;
    let start = html.find(open).ok_or("no data in the page")? + open.len();
    let len = html[start..].find("</script>").ok_or("the data does not end")?;
    if !html.trim_end().ends_with("</html>") {
        return Err("the page does not end with </html>".into());
    }
    let v: Value = serde_json::from_str(&html[start..start + len])
        .map_err(|e| format!("the page's data is malformed JSON: {e}"))?;
    let c = &v["summary"]["counts"];
    let n = |k: &str| c[k].as_u64().ok_or(format!("no count {k} in {c}"));
    let counts = (n("records")?, n("events")?, n("annotations")?, n("errors")?);
    // The page's window is the whole trace: every record a bar (`count` is the bar's 8th field),
    // every event a marker (its 3rd) but the host samples, which are the host tracks' (VW-HOST-1).
    let rows = v["window"]["rows"].as_array().ok_or("no window rows in the page")?;
    let sum = |key: &str, at: usize| -> u64 {
        let items = rows.iter().filter_map(|r| r[key].as_array()).flatten();
        items.map(|i| i[at].as_u64().unwrap_or(0)).sum()
    };
    let (bars, markers) = (sum("bars", 7), sum("markers", 2));
    let samples = n("host_samples")?;
    if (bars, markers + samples) != (counts.0, counts.1) {
        return Err(format!(
            "the page's window shows {bars} records and {markers} events (and {samples} host \
             samples) of {} and {}",
            counts.0, counts.1
        ));
    }
    Ok(counts)
}

#[cfg(feature = "parquet")]
mod parquet {
    //! The run comparison of "Comparing runs": one run of a dataset and a stats summary.

    use std::path::Path;

    use parquet::file::reader::{FileReader, SerializedFileReader};

    use super::{os, Counted, Note, Ran};

    fn rows(path: &Path) -> Result<i64, String> {
        let file = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let reader =
            SerializedFileReader::new(file).map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(reader.metadata().file_metadata().num_rows())
    }

    pub fn check(
        input: &Path,
        work: &Path,
        counted: Option<Counted>,
        ran: &Ran<'_>,
        note: &mut Note<'_>,
    ) {
        let dataset = work.join("sweep");
        let _ = std::fs::remove_dir_all(&dataset);
        let args = os(&[&"convert", &input, &"--to", &"parquet", &"--run", &"r", &"-o", &dataset]);
        let (ok, run) = ran("parquet", args.clone(), note);
        if ok && run.ok() {
            let dir = dataset.join("run=r");
            for (table, want) in [
                ("records", counted.map(|c| c.records)),
                ("events", counted.map(|c| c.events)),
                ("annotations", counted.map(|c| c.annotations)),
            ] {
                match rows(&dir.join(format!("{table}.parquet"))) {
                    Err(e) => note(&args, format!("succeeded but {e}")),
                    Ok(n) => {
                        if want.is_some_and(|w| w as i64 != n) {
                            note(
                                &args,
                                format!("{table}: {n} rows, the validator counted {want:?}"),
                            );
                        }
                    }
                }
            }
        }
        let summary = work.join("summary.parquet");
        let _ = std::fs::remove_file(&summary);
        let args = os(&[&"stats", &input, &"--format", &"parquet", &"-o", &summary]);
        let (ok, run) = ran("stats-parquet", args.clone(), note);
        if ok && run.ok() {
            if let Err(e) = rows(&summary) {
                note(&args, format!("succeeded but {e}"));
            }
        }
    }
}

/// Runs [`check_input`] on every input; panics listing every broken rule.
fn check_all(inputs: &[(String, PathBuf, Expect)], work: &Path) {
    let mut problems = Vec::new();
    for (n, (what, input, expect)) in inputs.iter().enumerate() {
        problems.extend(check_input(what, input, work, n, *expect));
    }
    assert!(
        problems.is_empty(),
        "{} broken rules on {} damaged traces:\n{}",
        problems.len(),
        inputs.len(),
        problems.join("\n")
    );
}

/// Writes `bytes` to `dir/case<n>_<name>` (a name of its own, for the error to name).
fn write_input(dir: &Path, n: usize, name: &str, bytes: &[u8]) -> PathBuf {
    let p = dir.join(format!("case{n}_{name}"));
    std::fs::write(&p, bytes).expect("write damaged input");
    p
}

/// A temporary directory with `in/` for the inputs and `work/` for the runs' outputs (the
/// directory goes when the first value is dropped).
fn scratch() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let dir = tempfile::tempdir().expect("tmp");
    let (inputs, work) = (dir.path().join("in"), dir.path().join("work"));
    std::fs::create_dir_all(&inputs).expect("mkdir");
    std::fs::create_dir_all(&work).expect("mkdir");
    (dir, inputs, work)
}

/// The last cycle a trace can name.
const MAX: u64 = u64::MAX;

/// A trace nested `depth` levels deep, an event and an annotation on every level.
fn deep_trace(path: &Path, depth: u64) {
    let t = Trace::create(path, Metadata::new().clock_frequency_mhz(500.0)).expect("create");
    let mut handles = vec![t.root("top", "Core").unit_id(0).begin_at(0).expect("root")];
    for d in 1..depth {
        let parent = handles.last().expect("a parent");
        let kind = if d % 2 == 0 { "Instruction" } else { "Stage" };
        let h = parent.child(format!("i{d}"), kind).begin_at(d).expect("child");
        h.event("e").emit_at(d).expect("event");
        h.annotation("a").data_json(r#"{"d":1}"#).emit().expect("annotation");
        handles.push(h);
    }
    let mut clk = depth;
    while let Some(h) = handles.pop() {
        h.end_at(clk).expect("end");
        clk += 1;
    }
    t.close_at(clk).expect("close");
}

/// A trace with `n` records never ended, children of a few roots, some with events.
fn open_trace(path: &Path, n: u64) {
    let t = Trace::create(path, Metadata::new()).expect("create");
    let roots: Vec<_> = (0..4)
        .map(|u| t.root(format!("core{u}"), "Core").unit_id(u).begin_at(0).expect("root"))
        .collect();
    for i in 0..n {
        let r = roots[(i % 4) as usize]
            .child(format!("i{i}"), "Instruction")
            .begin_at(i)
            .expect("child");
        if i % 7 == 0 {
            r.event("F").emit_at(i + 1).expect("event");
        }
        drop(r); // never ended
    }
    for (k, r) in roots.into_iter().enumerate() {
        if k % 2 == 0 {
            r.end_at(n + 10).expect("end");
        }
    }
    t.close_at(n + 10).expect("close");
}

/// A trace in the last cycles a `u64` holds, ending at `u64::MAX`, on units.
fn last_cycles_trace(path: &Path) {
    let meta = Metadata::new().clock_frequency_mhz(2000.0);
    let t = Trace::create(path, meta).expect("create");
    let core = t.root("core0", "Core").unit_id(0).begin_at(0).expect("root");
    let late = t.root("late", "Memory").unit_id(1).begin_at(MAX - 100).expect("root");
    for i in 0..20u64 {
        let at = MAX - 60 + i * 3;
        let ins = core.child(format!("i{i}"), "Instruction").unit_id(2).begin_at(at).expect("i");
        ins.event("F").emit_at(at).expect("e");
        ins.event("W").emit_at(MAX).expect("e");
        ins.end_at(if i % 3 == 0 { MAX } else { at + 1 }).expect("end");
    }
    let req = late.child("req", "MemRequest").begin_at(MAX).expect("req");
    req.end_at(MAX).expect("end");
    late.end_at(MAX).expect("end");
    core.end_at(MAX).expect("end");
    t.close_at(MAX).expect("close");
}

/// A trace with host samples (spec/host-sync.md, what `jets stats` and `jets gantt` read into
/// host figures), from cycle `base` on: a `HostProcess` record with 20 `HostSync` events 100
/// cycles (10 ms of host time) apart, and a core running a 50-cycle instruction per sample. As
/// `tests/damaged_input.rs` writes it, by hand so that it is the same on every run.
fn host_trace(base: u64) -> String {
    let mut t = vec![
        concat!(
            r#"{"type":"header","version":"2.0","metadata":{"tool":"damaged_traces test","#,
            r#""clock_frequency_mhz":1000.0}}"#
        )
        .to_owned(),
        format!(
            r#"{{"clk":{base},"type":"record","name":"sim","record_type":"HostProcess","id":1,"parent_id":null,"description":"","data":{{"pid":4242,"command":"sim"}}}}"#
        ),
        r#"{"type":"annotation","name":"HostEnv","record_id":1,"description":"","data":{"hostname":"h","cpus":2}}"#.to_owned(),
        rec(base, 2, None, "Core"),
    ];
    for i in 0..20u64 {
        let (clk, id) = (base + i * 100, 3 + i);
        let (mono, real) =
            (5_000_000_000 + i * 10_000_000, 1_700_000_000_000_000_000 + i * 10_000_000);
        let (cpu, usage, rss) = (i * 9_000_000, 10 + i, 20_000 + i * 64);
        t.push(format!(
            r#"{{"clk":{clk},"type":"event","name":"HostSync","record_id":1,"description":"","data":{{"mono_ns":{mono},"real_ns":{real},"cpu_ns":{cpu},"cpu_usage":{usage}.5,"mem_rss_kb":{rss}}}}}"#
        ));
        t.push(rec(clk + 1, id, Some(2), "Instruction"));
        t.push(end(clk + 51, id));
    }
    t.push(end(base + 2000, 2));
    t.push(end(base + 2000, 1));
    t.push(footer(base + 2000, 22, 20, 1));
    t.join("\n") + "\n"
}

/// The header every hand-written trace starts with.
const HEADER: &str =
    r#"{"type":"header","version":"2.0","metadata":{"clock_frequency_mhz":1000.0}}"#;

/// A record line.
fn rec(clk: u64, id: u64, parent: Option<u64>, kind: &str) -> String {
    let parent = parent.map_or("null".to_owned(), |p| p.to_string());
    format!(
        r#"{{"clk":{clk},"type":"record","name":"r{id}","record_type":"{kind}","id":{id},"parent_id":{parent},"description":""}}"#
    )
}

fn end(clk: u64, id: u64) -> String {
    format!(r#"{{"clk":{clk},"type":"record_end","record_id":{id}}}"#)
}

fn event(clk: u64, id: u64) -> String {
    format!(r#"{{"clk":{clk},"type":"event","name":"F","record_id":{id},"description":""}}"#)
}

fn annotation(id: u64) -> String {
    format!(
        r#"{{"type":"annotation","name":"a","record_id":{id},"description":"","data":{{"k":1}}}}"#
    )
}

fn footer(end: u64, records: u64, events: u64, annotations: u64) -> String {
    format!(
        r#"{{"type":"footer","capture_end_clk":{end},"total_records":{records},"total_events":{events},"total_annotations":{annotations}}}"#
    )
}

/// Hand-written traces, each breaking one rule of the format's structure (or, for the first, none).
fn structural_traces() -> Vec<(&'static str, String)> {
    let body = vec![
        HEADER.to_owned(),
        rec(0, 1, None, "Core"),
        rec(2, 2, Some(1), "Instruction"),
        event(3, 2),
        annotation(2),
        rec(4, 3, Some(2), "Stage"),
        end(6, 3),
        end(9, 2),
        rec(10, 4, Some(1), "Instruction"),
        event(11, 4),
        end(20, 1),
    ];
    let with = |edit: &dyn Fn(&mut Vec<String>)| {
        let mut lines = body.clone();
        edit(&mut lines);
        lines.join("\n") + "\n"
    };
    let ok_footer = footer(20, 4, 2, 1);
    vec![
        ("well_formed", with(&|l| l.push(ok_footer.clone()))),
        ("end_before_begin", with(&|l| l[6] = end(1, 3))),
        ("end_before_root_begins", with(&|l| l[10] = end(0, 1))),
        ("event_on_unknown_record", with(&|l| l.insert(4, event(5, 99)))),
        ("annotation_on_unknown_record", with(&|l| l.insert(4, annotation(77)))),
        ("end_of_unknown_record", with(&|l| l.insert(4, end(5, 55)))),
        ("end_before_its_record", with(&|l| l.insert(1, end(0, 4)))),
        ("event_before_its_record", with(&|l| l.insert(1, event(0, 4)))),
        ("parent_unknown", with(&|l| l.insert(9, rec(10, 5, Some(42), "Instruction")))),
        ("parent_after_child", with(&|l| l.insert(1, rec(0, 6, Some(1), "Instruction")))),
        ("own_parent", with(&|l| l.insert(9, rec(10, 5, Some(5), "Instruction")))),
        ("duplicate_open_id", with(&|l| l.insert(3, rec(2, 2, Some(1), "Instruction")))),
        ("duplicate_ended_id", with(&|l| l.insert(8, rec(9, 3, Some(1), "Stage")))),
        ("duplicate_root_id", with(&|l| l.insert(2, rec(1, 1, None, "Memory")))),
        ("ended_twice", with(&|l| l.insert(8, end(9, 2)))),
        ("no_header", with(&|l| drop(l.remove(0)))),
        ("header_twice", with(&|l| l.insert(0, HEADER.to_owned()))),
        ("header_late", with(&|l| l.swap(0, 3))),
        ("header_only", HEADER.to_owned() + "\n"),
        ("footer_only", ok_footer.clone() + "\n"),
        ("footer_twice", with(&|l| l.extend([ok_footer.clone(), ok_footer.clone()]))),
        ("footer_first", with(&|l| l.insert(1, ok_footer.clone()))),
        ("line_after_footer", with(&|l| l.extend([ok_footer.clone(), event(20, 1)]))),
        ("footer_totals_off", with(&|l| l.push(footer(5, 9, 0, 7)))),
        ("footer_totals_past_range", with(&|l| l.push(footer(MAX, MAX, MAX, MAX)))),
        (
            "footer_open_records_off",
            with(&|l| {
                l.push(ok_footer.replace('}', r#","open_records":3}"#));
            }),
        ),
        (
            "record_at_last_cycle",
            with(&|l| {
                l.insert(10, rec(MAX, 5, Some(1), "Instruction"));
                l.insert(11, event(MAX, 5));
                l.insert(12, end(MAX, 5));
                l[13] = end(MAX, 1);
            }),
        ),
        (
            "root_spans_every_cycle",
            with(&|l| {
                l[1] = rec(0, 1, None, "Core")
                    .replace(r#""description":"""#, r#""description":"","data":{"unit_id":0}"#);
                l[10] = end(MAX, 1);
            }),
        ),
        ("no_lines_at_all", String::new()),
        ("blank_lines", with(&|l| l.insert(3, String::new()))),
    ]
}

/// Undamaged inputs: the data traces, the SDK's traces (plain and compressed), and the
/// structural traces, each checked whole.
#[test]
fn undamaged_and_structurally_broken_traces() {
    let (_dir, inputs, work) = scratch();
    let mut cases: Vec<(String, PathBuf, Expect)> = Vec::new();
    let whole = Expect { whole: true, refused_by: &[] };
    for name in ["small.jets", "rjets_tests_trace.jets", "rjets_tests_trace.jets.br"] {
        cases.push((name.to_owned(), data(&format!("trace/{name}")), whole));
    }
    for name in ["deep.jets", "deep.jets.gz", "open.jets.zst", "last.jets", "last.jets.gz"] {
        let p = inputs.join(name);
        match name.split('.').next() {
            Some("deep") => deep_trace(&p, 300),
            Some("open") => open_trace(&p, 2000),
            _ => last_cycles_trace(&p),
        }
        cases.push((name.to_owned(), p, whole));
    }
    for (k, base) in [0, MAX - 2000].into_iter().enumerate() {
        let p = write_input(&inputs, 100 + k, "host.jets", host_trace(base).as_bytes());
        cases.push((format!("host trace from cycle {base}"), p, whole));
    }
    for (k, (name, text)) in structural_traces().into_iter().enumerate() {
        let expect = if name == "well_formed" { whole } else { Expect::default() };
        let p = write_input(&inputs, k, &format!("{name}.jets"), text.as_bytes());
        cases.push((name.to_owned(), p, expect));
        // And compressed, which takes the readers' other path.
        let p = write_input(&inputs, k, &format!("{name}.jets.gz"), &gzip(text.as_bytes()));
        cases.push((format!("{name} (gzip)"), p, expect));
    }
    check_all(&cases, &work);
}

/// The texts every damage starts from: the data traces, the SDK's and the structural traces.
fn sources(dir: &Path) -> Vec<(String, Vec<u8>, usize)> {
    let mut out = Vec::new();
    for (name, n) in [("small.jets", 12), ("rjets_tests_trace.jets", 8)] {
        out.push((
            name.to_owned(),
            std::fs::read(data(&format!("trace/{name}"))).expect("read"),
            n,
        ));
    }
    let deep = dir.join("deep.jets");
    deep_trace(&deep, 40);
    let open = dir.join("open.jets");
    open_trace(&open, 60);
    let last = dir.join("last.jets");
    last_cycles_trace(&last);
    for (p, n) in [(deep, 6), (open, 6), (last, 8)] {
        let name = p.file_name().expect("name").to_string_lossy().into_owned();
        out.push((name, std::fs::read(&p).expect("read"), n));
    }
    out.push(("host.jets".to_owned(), host_trace(0).into_bytes(), 8));
    out.push(("host_late.jets".to_owned(), host_trace(MAX - 2000).into_bytes(), 4));
    let structural = structural_traces();
    for (name, text) in structural.into_iter().filter(|(_, t)| !t.is_empty()) {
        out.push((format!("{name}.jets"), text.into_bytes(), 1));
    }
    out
}

/// Damaged texts, plain and now and then gzip-compressed.
#[test]
fn damaged_traces_read_or_fail_cleanly() {
    let (_dir, inputs, work) = scratch();
    let mut cases = Vec::new();
    let mut n = 0;
    for (k, (name, text, count)) in sources(&inputs).into_iter().enumerate() {
        let mut rng = Rng::new(SEED, k as u64);
        for _ in 0..rounds(count) {
            let (bytes, what) = damage_text(&text, &mut rng, &DAMAGES);
            n += 1;
            let (bytes, name) = if n % 5 == 0 {
                (gzip(&bytes), format!("{name}.gz"))
            } else {
                (bytes, name.clone())
            };
            let input = write_input(&inputs, n, &name, &bytes);
            cases.push((format!("{name}: {what}"), input, Expect::default()));
        }
    }
    check_all(&cases, &work);
}

/// Compressed traces damaged as compressed bytes: gzip and zstd from the SDK, brotli from rjets.
#[test]
fn damaged_compressed_traces_read_or_fail_cleanly() {
    let (_dir, inputs, work) = scratch();
    let gz = inputs.join("deep.jets.gz");
    deep_trace(&gz, 30);
    let zst = inputs.join("open.jets.zst");
    open_trace(&zst, 50);
    let compressed = [
        ("deep.jets.gz", std::fs::read(&gz).expect("read")),
        ("open.jets.zst", std::fs::read(&zst).expect("read")),
        (
            "rjets_tests_trace.jets.br",
            std::fs::read(data("trace/rjets_tests_trace.jets.br")).expect("read"),
        ),
    ];
    let mut cases = Vec::new();
    let mut n = 0;
    for (k, (name, bytes)) in compressed.iter().enumerate() {
        let mut rng = Rng::new(SEED, 100 + k as u64);
        for _ in 0..rounds(5) {
            let (bytes, what) = damage_bytes(bytes, &mut rng);
            n += 1;
            let input = write_input(&inputs, n, name, &bytes);
            cases.push((format!("{name}: {what}"), input, Expect::default()));
        }
    }
    check_all(&cases, &work);
}

/// How long `jets validate --follow` may take on a trace that ends (a footer, a last newline):
/// it stops waiting at the footer, so a run that lasts longer is one that waits for good.
const FOLLOW_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// Whether `jets validate --follow` has an end to come to in `bytes`: a complete line that is a
/// footer, and a last line that is complete (`--follow` waits for the rest of a last line
/// without `\n`, which it takes for a line still being written and never reports, E018, W013).
fn follow_ends(bytes: &[u8]) -> bool {
    bytes.ends_with(b"\n")
        && bytes
            .split(|&b| b == b'\n')
            .any(|line| serde_json::from_slice::<Value>(line).is_ok_and(|v| v["type"] == "footer"))
}

/// `jets validate --follow` on the damaged and structurally broken traces that have an end to
/// come to (see [`follow_ends`]; compressed traces are refused by `--follow`, and the others
/// wait for their footer by design): it ends by itself within [`FOLLOW_TIMEOUT`], with the exit
/// status and the diagnostics of a plain `jets validate` (E017 included: it checks what the file
/// already holds after the footer).
#[test]
fn validate_follow_ends_with_the_verdict_of_a_plain_run() {
    let (_dir, inputs, work) = scratch();
    let mut cases: Vec<(String, PathBuf)> = Vec::new();
    for (k, (name, text)) in structural_traces().into_iter().enumerate() {
        cases.push((
            name.to_owned(),
            write_input(&inputs, k, &format!("{name}.jets"), text.as_bytes()),
        ));
    }
    let mut n = 1000;
    for (k, (name, text, count)) in sources(&inputs).into_iter().enumerate() {
        let mut rng = Rng::new(SEED, 200 + k as u64);
        for _ in 0..rounds(count) {
            let (bytes, what) = damage_text(&text, &mut rng, &DAMAGES);
            n += 1;
            cases.push((format!("{name}: {what}"), write_input(&inputs, n, &name, &bytes)));
        }
    }
    let mut problems = Vec::new();
    let mut followed = 0;
    for (what, input) in &cases {
        if !follow_ends(&std::fs::read(input).expect("read")) {
            continue;
        }
        followed += 1;
        let plain = jets(&os(&[&"validate", &"--format", &"json", input]), &work);
        let args = os(&[&"validate", &"--follow", &"--format", &"json", input]);
        let follow = jets_within(&args, &work, FOLLOW_TIMEOUT);
        let problem = match (follow.status, plain.status) {
            (None, _) => format!("hung: killed after {FOLLOW_TIMEOUT:?}"),
            (Some(f), Some(p)) if f.code() != p.code() => format!("exit {f}, plain {p}"),
            _ if follow.stdout != plain.stdout => {
                format!("diagnostics differ:\n{}\n    plain:\n{}", follow.stdout, plain.stdout)
            }
            _ => continue,
        };
        problems.push(format!("{what}\n    jets {args:?}\n    {problem}"));
    }
    // Enough of them end for the check to mean something (the seed makes this the same each run).
    assert!(followed >= 40, "only {followed} of {} traces end", cases.len());
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// A fixed damage that once broke the rule, replayed on every run.
struct Regression {
    /// A name for the input file.
    name: &'static str,
    /// What it found (and what fixed it).
    found: &'static str,
    /// The trace's text.
    text: fn() -> String,
    /// The commands (`validate`, `repair`, `stats`, `tree`, `tree-filtered`, `gantt`, `parquet`,
    /// `stats-parquet`) that must refuse it.
    refused_by: &'static [&'static str],
}

/// The inputs that broke the rule once.
const REGRESSIONS: &[Regression] = &[
    Regression {
        name: "record_at_last_cycle.jets",
        found: "a record and events at u64::MAX: `jets gantt` panicked (overflow computing the \
                page's window end, `now + 1`); then its page left them out (a window [t0, t1) \
                cannot hold u64::MAX) (VW-END-3)",
        text: || structural("record_at_last_cycle"),
        refused_by: &[],
    },
    Regression {
        name: "all_at_last_cycle.jets",
        found: "every line at u64::MAX: `jets gantt` panicked (overflow in the index's window, \
                `t0 + 1`, t0 being the first cycle) (VW-END-3)",
        text: || {
            [HEADER.to_owned(), rec(MAX, 1, None, "Core"), event(MAX, 1), end(MAX, 1)].join("\n")
                + "\n"
        },
        refused_by: &[],
    },
    Regression {
        name: "duplicate_open_id.jets",
        found: "a record id used again while its record is open: `jets stats` dropped the \
                earlier record, neither ended nor unended (count > ended + unended) (CV-DUP-1)",
        text: || structural("duplicate_open_id"),
        refused_by: &[],
    },
    Regression {
        name: "parent_unknown.jets",
        found: "a record whose parent never appeared (its line lost): `jets tree` left it and \
                its subtree out of the tree without a word, and then still with `--depth` (its \
                filter here is `--depth 1 --clk ..5`) (CV-TREE-1)",
        text: || structural("parent_unknown"),
        refused_by: &["validate", "tree", "tree-filtered"],
    },
    Regression {
        name: "parent_line_deleted.jets",
        found: "small.jets with the line of `ld` (the parent of `dcache`) deleted: `jets tree` \
                showed 6 of its 7 records and exited 0, and then still with `--depth` (its \
                filter here is `--name ^i --depth 3`) (CV-TREE-1)",
        text: || {
            let text = std::fs::read_to_string(data("trace/small.jets")).expect("read");
            text.lines().filter(|l| !l.contains(r#""name":"ld""#)).collect::<Vec<_>>().join("\n")
                + "\n"
        },
        refused_by: &["validate", "tree", "tree-filtered"],
    },
    Regression {
        name: "own_parent.jets",
        found: "a record naming itself as its parent: `jets tree` left it out without a word \
                (CV-TREE-1)",
        text: || structural("own_parent"),
        refused_by: &["validate", "tree", "tree-filtered"],
    },
];

/// The structural trace called `name`.
fn structural(name: &str) -> String {
    let all = structural_traces();
    all.into_iter().find(|(n, _)| *n == name).expect("a structural trace").1
}

#[test]
fn regressions_stay_fixed() {
    let (_dir, inputs, work) = scratch();
    let cases: Vec<(String, PathBuf, Expect)> = REGRESSIONS
        .iter()
        .enumerate()
        .map(|(k, r)| {
            let input = write_input(&inputs, k, r.name, (r.text)().as_bytes());
            let expect = Expect { whole: false, refused_by: r.refused_by };
            (format!("regression {k}: {}", r.found), input, expect)
        })
        .collect();
    check_all(&cases, &work);
}
