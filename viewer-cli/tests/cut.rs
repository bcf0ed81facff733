//! `jets cut`: a part of a written trace is the trace the simulator writes under the same
//! `JETS_CAPTURE` setting, byte for byte (CAP-CUT-1), and what it cannot cut is refused, naming the
//! line (CAP-CUT-2 to CAP-CUT-4).

mod common;

use std::path::{Path, PathBuf};

use common::{jets, stdout, HEADER};
use jets::capture::Capture;
use jets_examples::pipeline::{programs, traced};

/// Tiny5 sorting 24 words (its units, stalls, refills and squashes: a deeper tree than one level
/// of instructions), traced into `path` under `setting` (`None`: the whole run).
fn tiny5(path: &Path, setting: Option<&str>) {
    let program = programs::bubble_sort(&programs::random_words(24, 3)).expect("program");
    let capture = setting.map(|s| s.parse::<Capture>().expect("a setting"));
    let full = Capture::full();
    traced::timed_run(path, &program, Some(capture.as_ref().unwrap_or(&full)), None).expect("run");
}

fn text(p: &Path) -> String {
    std::fs::read_to_string(p).expect("a trace")
}

fn cut(setting: &str, input: &Path, output: &Path) -> std::process::Output {
    let (i, o) = (input.to_str().unwrap(), output.to_str().unwrap());
    jets(&["cut", "--capture", setting, i, "-o", o])
}

/// A file in `dir` holding `lines`, after a header.
fn file(dir: &Path, name: &str, lines: &[&str]) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, format!("{HEADER}\n{}\n", lines.join("\n"))).unwrap();
    p
}

#[test]
fn a_cut_of_the_whole_run_is_the_trace_the_setting_writes() {
    let dir = tempfile::tempdir().unwrap();
    let full = dir.path().join("full.jets");
    tiny5(&full, None);
    let cycles: u64 = text(&full)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok()?["clk"].as_u64())
        .max()
        .unwrap();
    assert!(cycles > 2000, "{cycles} cycles");
    let (mid, tenth) = (cycles / 2, cycles / 10);
    for setting in [
        format!("clk={mid}..{}", mid + tenth),
        format!("clk=0..{tenth}"),
        format!("clk=100..150;every={tenth}"),
        "types=Stall,Refill".to_owned(),
        "events=Squash,DCacheMiss".to_owned(),
        "units=6".to_owned(),
        "sample=Instruction:7".to_owned(),
        format!("clk={mid}..{cycles};types=Instruction;events=MEM"),
        "recorder=300".to_owned(),
        format!("recorder={tenth};trigger=Squash;post=20;dumps=2"),
        "recorder=200;trigger=error;dumps=3".to_owned(),
    ] {
        let (want, got) = (dir.path().join("want.jets"), dir.path().join("got.jets"));
        tiny5(&want, Some(&setting));
        let o = cut(&setting, &full, &got);
        assert!(o.status.success(), "{setting}: {}", String::from_utf8_lossy(&o.stderr));
        assert!(stdout(&o).contains("left out"), "{}", stdout(&o));
        let (want, got) = (text(&want), text(&got));
        assert!(got.lines().count() > 2, "{setting}: the cut holds lines");
        assert!(got.lines().count() < text(&full).lines().count(), "{setting}: a part");
        assert!(want == got, "{setting}: the cut differs from the run's own trace");
    }
}

#[test]
fn a_cut_goes_to_standard_output_and_names_its_setting_in_the_footer() {
    let dir = tempfile::tempdir().unwrap();
    let full = dir.path().join("full.jets");
    tiny5(&full, None);
    let o = jets(&["cut", "--capture", "clk=1000..1100", full.to_str().unwrap(), "-o", "-"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = stdout(&o);
    let footer = out.lines().last().unwrap();
    assert!(footer.contains(r#""capture":"clk=1000..1100""#), "{footer}");
    assert!(footer.contains(r#""left_out_records":"#), "{footer}");
    let want = dir.path().join("want.jets");
    tiny5(&want, Some("clk=1000..1100"));
    assert!(out == text(&want));
    // `full` writes the whole trace again, here compressed (as the SDK names it); a cut reads a
    // compressed trace too.
    let gz = dir.path().join("full.jets.gz");
    let o = cut("full", &full, &gz);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(std::fs::read(&gz).unwrap()[..2], [0x1f, 0x8b], "gzip");
    let part = dir.path().join("part.jets");
    let o = cut("types=Stall", &gz, &part);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    tiny5(&want, Some("types=Stall"));
    assert!(text(&part) == text(&want), "the part cut from the compressed copy");
}

#[test]
fn what_cannot_be_cut_is_refused_naming_the_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let out = d.join("out.jets");
    let refused = |setting: &str, input: &Path, words: &[&str]| {
        let o = cut(setting, input, &out);
        let err = String::from_utf8_lossy(&o.stderr).into_owned();
        assert_eq!(o.status.code(), Some(2), "{setting} on {}: {err}", input.display());
        for w in words {
            assert!(err.contains(w), "{w:?} not in {err}");
        }
        assert!(!out.exists(), "no output is left behind: {err}");
    };
    let good = file(
        d,
        "good.jets",
        &[
            r#"{"clk":0,"type":"record","name":"r","record_type":"T","id":1,"parent_id":null,"description":""}"#,
            r#"{"clk":3,"type":"record_end","record_id":1}"#,
        ],
    );
    // A bad setting names its clause; `count` writes nothing to cut to.
    refused("clk=9..3", &good, &["--capture", "clk=9..3"]);
    refused("count", &good, &["count"]);
    refused("off", &good, &["`off`"]);
    refused("roi", &good, &["`roi`", "region-of-interest"]);
    refused("recorder=10;trigger=SIGUSR1", &good, &["signal trigger"]);
    refused("recorder=1MiB;trigger=error", &good, &["`recorder=NMiB`", "recorder=CYCLES"]);
    // A part of a run cannot be cut again: its footer could not say what the first cut left out.
    let part = d.join("part.jets");
    tiny5(&part, Some("clk=100..200"));
    refused("clk=120..150", &part, &["part.jets:", "a part of its run", "clk=100..200"]);
    // Lines the SDK would not write, with the line named.
    let after = file(
        d,
        "after.jets",
        &[
            r#"{"clk":0,"type":"record","name":"r","record_type":"T","id":1,"parent_id":null,"description":""}"#,
            r#"{"type":"footer"}"#,
            r#"{"clk":3,"type":"record_end","record_id":1}"#,
        ],
    );
    refused("clk=0..10", &after, &["after.jets:4", "after the footer"]);
    let unknown = file(d, "unknown.jets", &[r#"{"clk":3,"type":"record_end","record_id":7}"#]);
    refused("clk=0..10", &unknown, &["unknown.jets:2", "record_id 7"]);
    let early = file(
        d,
        "early.jets",
        &[
            r#"{"clk":5,"type":"record","name":"r","record_type":"T","id":1,"parent_id":null,"description":""}"#,
            r#"{"clk":4,"type":"event","name":"e","record_id":1,"description":""}"#,
        ],
    );
    refused("clk=0..10", &early, &["early.jets:3", "clk 4 is before the start of record 1"]);
    // To standard output, a failed cut's lines end without a footer.
    let o = jets(&["cut", "--capture", "clk=0..10", after.to_str().unwrap(), "-o", "-"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stdout(&o).starts_with("{\"type\":\"header\""), "{}", stdout(&o));
    assert!(!stdout(&o).contains("footer"), "{}", stdout(&o));
    let same = cut("clk=0..10", &good, &good);
    assert_eq!(same.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&same.stderr).contains("overwrite the input"));
    assert!(text(&good).contains("record_end"), "the input is untouched");
}

#[test]
fn members_the_spec_does_not_name_are_refused_or_left_out_when_asked() {
    let dir = tempfile::tempdir().unwrap();
    let input = file(
        dir.path(),
        "vendor.jets",
        &[
            r#"{"clk":0,"type":"record","name":"r","record_type":"T","id":1,"parent_id":null,"description":"","vendor":{"x":1}}"#,
            r#"{"clk":1,"type":"event","name":"e","record_id":1,"description":"","data":{"pc":4,"regs":[1,2]}}"#,
            r#"{"clk":2,"type":"record_end","record_id":1,"status":"flushed"}"#,
        ],
    );
    let out = dir.path().join("out.jets");
    let o = cut("clk=0..10", &input, &out);
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("vendor.jets:2") && err.contains("\"vendor\""), "{err}");
    assert!(err.contains("--drop-unnamed-members"), "{err}");

    let (i, p) = (input.to_str().unwrap(), out.to_str().unwrap());
    let o = jets(&["cut", "--drop-unnamed-members", "--capture", "clk=0..10", i, "-o", p]);
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(o.status.success(), "{err}");
    assert!(err.contains("\"vendor\"") && err.contains("1 line"), "{err}");
    let got = text(&out);
    assert!(!got.contains("vendor"), "{got}");
    // Data of every shape, and a final status, are written again.
    assert!(got.contains(r#""data":{"pc":4,"regs":[1,2]}"#), "{got}");
    assert!(got.contains(r#""status":"flushed""#), "{got}");
    let v = jets(&["validate", "--strict", p]);
    assert!(v.status.success(), "{}", stdout(&v));
}
