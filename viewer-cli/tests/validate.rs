//! `jets validate` and `jets repair`, run as a user runs them.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

mod common;
use common::{data, jets, stdout, HEADER};

const ROOT: &str = r#"{"clk":0,"type":"record","name":"r","record_type":"T","id":1,"parent_id":null,"description":""}"#;

fn write(dir: &Path, name: &str, text: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p.to_string_lossy().into_owned()
}

#[test]
fn the_rjets_sample_trace_validates_clean() {
    let path = data("trace/rjets_tests_trace.jets");
    let o = jets(&["validate", path.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), String::from_utf8_lossy(&o.stderr));
    assert!(stdout(&o).contains("valid (1222 lines, 103 records"), "{}", stdout(&o));
}

#[test]
fn brotli_traces_are_read_and_a_cut_one_is_reported() {
    let path = data("trace/rjets_tests_trace.jets.br");
    let o = jets(&["validate", path.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
    assert!(stdout(&o).contains("valid (1222 lines"), "{}", stdout(&o));
    let dir = tempfile::tempdir().unwrap();
    let bytes = std::fs::read(&path).unwrap();
    let cut = dir.path().join("cut.jets.br");
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
    let o = jets(&["validate", "--format", "json", cut.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stdout(&o).contains("\"code\":\"E019\""), "{}", stdout(&o));
}

#[test]
fn human_output_is_rustc_style_with_a_note() {
    let dir = tempfile::tempdir().unwrap();
    let f = write(dir.path(), "dup.jets", &format!("{HEADER}\n{ROOT}\n{ROOT}\n"));
    let o = jets(&["validate", &f]);
    assert_eq!(o.status.code(), Some(1));
    let out = stdout(&o);
    assert!(out.contains("error[E013]: duplicate record id 1"), "{out}");
    assert!(out.contains(&format!("--> {f}:3:55")), "{out}");
    assert!(out.contains("3 | {\"clk\":0"), "{out}");
    assert!(out.contains("note: record 1 is first defined here"), "{out}");
    assert!(out.contains(&format!("--> {f}:2\n")), "{out}");
    assert!(out.contains("invalid: 1 error, 0 warnings"), "{out}");
}

#[test]
fn json_output_has_one_object_per_diagnostic_then_a_summary() {
    let dir = tempfile::tempdir().unwrap();
    let f = write(dir.path(), "t.jets", &format!("{HEADER}\n{ROOT}\n{ROOT}\n{{\"clk\":1,\"ty"));
    let o = jets(&["validate", "--format", "json", &f]);
    assert_eq!(o.status.code(), Some(1));
    let objs: Vec<serde_json::Value> =
        stdout(&o).lines().map(|l| serde_json::from_str(l).expect("each line is JSON")).collect();
    assert_eq!(objs.len(), 3);
    assert_eq!(objs[0]["code"], "E013");
    assert_eq!(objs[0]["severity"], "error");
    assert_eq!(objs[0]["line"], 3);
    assert_eq!(objs[0]["note"]["line"], 2);
    assert_eq!(objs[1]["code"], "E018");
    assert!(objs[1]["help"].as_str().unwrap().contains("jets repair"));
    assert!(objs[1]["message"].is_string());
    assert_eq!(objs[2]["type"], "summary");
    assert_eq!(objs[2]["valid"], false);
    assert_eq!(objs[2]["errors"], 2);
}

#[test]
fn strict_allow_and_max_errors() {
    let dir = tempfile::tempdir().unwrap();
    let warn = write(dir.path(), "w.jets", &format!("{HEADER}\n{ROOT}"));
    assert_eq!(jets(&["validate", &warn]).status.code(), Some(0));
    assert_eq!(jets(&["validate", "--strict", &warn]).status.code(), Some(1));
    assert_eq!(jets(&["validate", "--strict", "--allow", "w013", &warn]).status.code(), Some(0));
    let many = write(dir.path(), "m.jets", &format!("{HEADER}\nx\ny\nz\n"));
    let o = jets(&["validate", "--format", "json", "--max-errors", "2", &many]);
    assert_eq!(o.status.code(), Some(1));
    let out = stdout(&o);
    assert_eq!(out.matches("\"E001\"").count(), 2, "{out}");
    assert!(out.contains("\"stopped_early\":true"), "{out}");
}

#[test]
fn usage_and_io_errors_exit_2() {
    let o = jets(&["validate", "--allow", "E999", "x.jets"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("E999"));
    let o = jets(&["validate", "/nonexistent/t.jets"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("/nonexistent/t.jets"));
    assert_eq!(jets(&["validate"]).status.code(), Some(2));
}

#[test]
fn several_files_and_stdin() {
    let dir = tempfile::tempdir().unwrap();
    let good = write(dir.path(), "g.jets", &format!("{HEADER}\n{ROOT}\n"));
    let bad = write(dir.path(), "b.jets", "nope\n");
    assert_eq!(jets(&["validate", &good, &bad]).status.code(), Some(1));
    let mut child = Command::new(env!("CARGO_BIN_EXE_jets"))
        .args(["validate", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(format!("{HEADER}\n{ROOT}\n").as_bytes()).unwrap();
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
}

#[test]
fn repair_fixes_a_crashed_trace_and_never_touches_its_input() {
    let dir = tempfile::tempdir().unwrap();
    let text = format!("{HEADER}\n{ROOT}\n{{\"clk\":5,\"type\":\"event\",\"na");
    let input = write(dir.path(), "crash.jets", &text);
    let output = dir.path().join("fixed.jets").to_string_lossy().into_owned();
    let o = jets(&["repair", &input, "-o", &output, "--end-open"]);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stderr).contains("dropped the torn last line"));
    assert_eq!(std::fs::read_to_string(&input).unwrap(), text);
    let fixed = std::fs::read_to_string(&output).unwrap();
    assert!(fixed.contains(r#"{"clk":0,"type":"record_end","record_id":1}"#), "{fixed}");
    assert_eq!(jets(&["validate", "--strict", &output]).status.code(), Some(0));
    // Repairing into the input is refused, also through a hard link.
    assert_eq!(jets(&["repair", &input, "-o", &input]).status.code(), Some(2));
    let link = dir.path().join("link.jets");
    std::fs::hard_link(&input, &link).unwrap();
    assert_eq!(jets(&["repair", &input, "-o", link.to_str().unwrap()]).status.code(), Some(2));
    assert_eq!(std::fs::read_to_string(&input).unwrap(), text);
}

#[test]
fn follow_reports_lines_as_they_arrive_and_ends_at_the_footer() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("live.jets");
    let mut f = std::fs::File::create(&path).unwrap();
    writeln!(f, "{HEADER}\n{ROOT}").unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_jets"))
        .args(["validate", "--follow", "--format", "json", path.to_str().unwrap()])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    // A bad line, then a line written in two pieces, then the footer.
    writeln!(f, r#"{{"clk":1,"type":"event","name":"e","record_id":9,"description":""}}"#).unwrap();
    f.flush().unwrap();
    std::thread::sleep(Duration::from_millis(200));
    write!(f, r#"{{"clk":2,"type":"event","#).unwrap();
    f.flush().unwrap();
    std::thread::sleep(Duration::from_millis(200));
    writeln!(f, r#""name":"e","record_id":1,"description":""}}"#).unwrap();
    writeln!(f, r#"{{"type":"footer","total_events":2}}"#).unwrap();
    f.flush().unwrap();
    let o = child.wait_with_output().unwrap();
    let out = stdout(&o);
    assert_eq!(o.status.code(), Some(1), "{out}");
    let objs: Vec<serde_json::Value> =
        out.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(objs.len(), 2, "{out}");
    assert_eq!((objs[0]["code"].as_str(), objs[0]["line"].as_u64()), (Some("E015"), Some(3)));
    assert_eq!(objs[1]["lines"], 5);
    assert_eq!(objs[1]["footer"], true);
}
