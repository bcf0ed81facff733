//! Issue 17, items 7–13: the CLI under fault and bad input. Every command ends quietly when the
//! reader of its output goes away; `repair` never truncates its input, whatever names it has;
//! `--follow` notices a shrinking file and lines after the footer; a line without end is an error,
//! not a memory exhaustion; `stats` reads what `validate` reads. Waits are bounded: a command that
//! would hang fails its test by timeout instead.

use std::fs::File;
use std::io::Write;
use std::os::fd::{FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::{data, jets, stdout, HEADER};

/// Waits for `child` at most `limit`; kills it and fails the test past that.
fn wait_bounded(child: &mut Child, limit: Duration, what: &str) -> ExitStatus {
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().expect("wait") {
            return status;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what}: still running after {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A trace of `n` root records with events: big enough that its tree, stats, conversions and
/// diagnostics do not fit in a pipe's buffer.
fn big_trace(dir: &Path, n: u64) -> PathBuf {
    let mut text = format!("{HEADER}\n");
    for id in 1..=n {
        text += &format!(
            "{{\"clk\":{id},\"type\":\"record\",\"name\":\"r{id}\",\"record_type\":\"T{}\",\"id\":{id},\"parent_id\":null,\"description\":\"\"}}\n",
            id % 50
        );
        text += &format!(
            "{{\"clk\":{id},\"type\":\"event\",\"name\":\"E{}\",\"record_id\":{id},\"description\":\"\"}}\n",
            id % 300
        );
        text += &format!("{{\"clk\":{},\"type\":\"record_end\",\"record_id\":{id}}}\n", id + 1);
    }
    let path = dir.join("big.jets");
    std::fs::write(&path, text).expect("write");
    path
}

/// Runs `jets args` with its standard output a pipe whose reader is already gone.
fn with_closed_stdout(args: &[&str]) -> Output {
    let mut fds = [0; 2];
    // SAFETY: `fds` has room for the two descriptors pipe(2) writes.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0, "pipe");
    // SAFETY: pipe(2) just returned these two descriptors, each owned only here.
    let (reader, writer) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    drop(reader);
    let mut child = Command::new(env!("CARGO_BIN_EXE_jets"))
        .args(args)
        .stdout(Stdio::from(writer))
        .stderr(Stdio::piped())
        .spawn()
        .expect("run jets");
    wait_bounded(&mut child, Duration::from_secs(60), &args.join(" "));
    child.wait_with_output().expect("output")
}

#[test]
fn every_command_ends_quietly_when_its_reader_goes_away() {
    let dir = tempfile::tempdir().unwrap();
    let big = big_trace(dir.path(), 3000);
    let big = big.to_str().unwrap();
    let bad = dir.path().join("bad.jets");
    // Every line an error: the diagnostics fill the pipe.
    std::fs::write(&bad, "{\n".repeat(2000)).unwrap();
    let bad = bad.to_str().unwrap();
    for args in [
        &["tree", big][..],
        &["stats", big],
        &["stats", "--format", "json", big],
        &["validate", bad],
        &["validate", "--format", "json", bad],
        &["convert", big, "--to", "chrome", "-o", "-"],
        &["repair", big, "-o", "-"],
    ] {
        let o = with_closed_stdout(args);
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(141), "jets {}: {:?} {stderr}", args.join(" "), o.status);
        // `repair` reports what it did on stderr only when it succeeded.
        assert!(stderr.is_empty(), "jets {}: {stderr}", args.join(" "));
    }
}

#[test]
fn repair_refuses_an_output_that_is_its_input_under_another_name() {
    let dir = tempfile::tempdir().unwrap();
    let trace = big_trace(dir.path(), 10);
    let before = std::fs::read(&trace).unwrap();
    let t = trace.to_str().unwrap();
    // `jets repair - -o F < F`: the input is stdin, the same file as the output.
    let o = Command::new(env!("CARGO_BIN_EXE_jets"))
        .args(["repair", "-", "-o", t])
        .stdin(File::open(&trace).unwrap())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stderr).contains("same file"));
    assert_eq!(std::fs::read(&trace).unwrap(), before, "the input was modified");
    // A hard link is the same file too, and so is stdout appending to the input.
    let link = dir.path().join("link.jets");
    std::fs::hard_link(&trace, &link).unwrap();
    let o = jets(&["repair", t, "-o", link.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    let append = std::fs::OpenOptions::new().append(true).open(&trace).unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_jets"))
        .args(["repair", t, "-o", "-"])
        .stdout(append)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(std::fs::read(&trace).unwrap(), before, "the input was modified");
    // Another file is fine.
    let out = dir.path().join("out.jets");
    let o = jets(&["repair", "-", "-o", out.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
}

#[test]
fn follow_reports_lines_after_the_footer_like_plain_validate() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.jets");
    let root = r#"{"clk":0,"type":"record","name":"r","record_type":"T","id":1,"parent_id":null,"description":""}"#;
    std::fs::write(&path, format!("{HEADER}\n{{\"type\":\"footer\"}}\n{root}\n")).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_jets"))
        .args(["validate", "--follow", path.to_str().unwrap()])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let status = wait_bounded(&mut child, Duration::from_secs(20), "validate --follow");
    let o = child.wait_with_output().unwrap();
    assert_eq!(status.code(), Some(1), "{}", stdout(&o));
    assert!(stdout(&o).contains("error[E017]"), "{}", stdout(&o));
    let plain = jets(&["validate", path.to_str().unwrap()]);
    assert_eq!(plain.status.code(), Some(1));
    assert!(stdout(&plain).contains("error[E017]"));
}

#[test]
fn follow_notices_a_file_that_shrinks() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.jets");
    let root = r#"{"clk":0,"type":"record","name":"r","record_type":"T","id":1,"parent_id":null,"description":""}"#;
    std::fs::write(&path, format!("{HEADER}\n{root}\n")).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_jets"))
        .args(["validate", "--follow", path.to_str().unwrap()])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    // The simulator is restarted and rewrites the file from the start.
    File::create(&path).unwrap().write_all(b"{").unwrap();
    let status = wait_bounded(&mut child, Duration::from_secs(20), "validate --follow");
    let o = child.wait_with_output().unwrap();
    assert_eq!(status.code(), Some(1), "{}", stdout(&o));
    assert!(stdout(&o).contains("error[E019]") && stdout(&o).contains("shrank"), "{}", stdout(&o));
}

#[test]
fn a_line_without_end_is_an_error_not_an_exhausted_memory() {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_jets"));
    cmd.args(["validate", "/dev/zero"]).stdout(Stdio::piped()).stderr(Stdio::piped());
    // Today's limit is 64 MiB; 1 GiB of address space leaves room for the rest of the program,
    // and turns a reader without a limit into a failed allocation instead of a swapping machine.
    use std::os::unix::process::CommandExt;
    // SAFETY: setrlimit is async-signal-safe, and the closure touches nothing else.
    unsafe {
        cmd.pre_exec(|| {
            let limit = libc::rlimit { rlim_cur: 1 << 30, rlim_max: 1 << 30 };
            if libc::setrlimit(libc::RLIMIT_AS, &limit) == 0 {
                Ok(())
            } else {
                Err(std::io::Error::last_os_error())
            }
        });
    }
    let mut child = cmd.spawn().unwrap();
    let status = wait_bounded(&mut child, Duration::from_secs(60), "validate /dev/zero");
    let o = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(status.code(), Some(2), "{status:?} {stderr}");
    assert!(stderr.contains("/dev/zero:1:") && stderr.contains("longer than"), "{stderr}");
}

#[test]
fn stats_reads_brotli_like_validate_does() {
    let plain = data("trace/rjets_tests_trace.jets");
    let br = data("trace/rjets_tests_trace.jets.br");
    let a = jets(&["stats", "--format", "json", plain.to_str().unwrap()]);
    let b = jets(&["stats", "--format", "json", br.to_str().unwrap()]);
    assert_eq!(b.status.code(), Some(0), "{}", String::from_utf8_lossy(&b.stderr));
    assert_eq!(stdout(&a), stdout(&b));
    assert!(stdout(&b).contains("\"kind\": \"jets\""), "{}", stdout(&b));
}

/// Numbers and strings at the edges of JSON, in every place a line can hold them. The validator
/// accepts this trace (spec/rules.md, JV1–JV3), so every reading command must read it.
const EDGES: &str = concat!(
    r#"{"type":"header","version":"2.0","metadata":{"big":1e300,"tiny":1e-400,"z":-0,"s":"\ud83d\ude00","n":18446744073709551616}}"#,
    "\n",
    r#"{"clk":0,"type":"record","name":"\ud83d\ude00","record_type":"T","id":1,"parent_id":null,"description":"","data":{"criticality":-0,"x":-0.0,"y":1E+2,"z":[1e-400,-0]},"vendor":-0}"#,
    "\n",
    r#"{"clk":1,"type":"event","name":"e","record_id":1,"description":"","data":-0}"#,
    "\n",
    r#"{"type":"annotation","name":"a","record_id":1,"description":"","data":{"k":123456789012345678901234567890}}"#,
    "\n",
    r#"{"clk":2,"type":"record_end","record_id":1}"#,
    "\n",
);

#[test]
fn every_reading_command_reads_what_the_validator_accepts() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("edges.jets");
    std::fs::write(&path, EDGES).unwrap();
    let p = path.to_str().unwrap();
    let o = jets(&["validate", p]);
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
    let out = dir.path().join("out");
    for args in [
        &["stats", p][..],
        &["stats", "--format", "json", p],
        &["tree", p],
        &["convert", p, "--to", "chrome", "-o", out.to_str().unwrap()],
        &["convert", p, "--to", "perfetto", "-o", out.to_str().unwrap()],
        &["convert", p, "--to", "dftracer", "-o", out.to_str().unwrap()],
        &["convert", p, "--to", "kanata", "--record-type", "T", "-o", out.to_str().unwrap()],
        &["gantt", p, "-o", out.to_str().unwrap()],
    ] {
        let o = jets(args);
        assert_eq!(
            o.status.code(),
            Some(0),
            "jets {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&o.stderr)
        );
    }
}

#[test]
fn out_of_range_numbers_and_lone_surrogates_are_errors_wherever_they_stand() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        (r#""name":"\ud800""#, r#""name":"n""#),
        (r#""data":{"x":"\ud800"}"#, r#""data":{"x":"s"}"#),
        (r#""data":{"\udc00":1}"#, r#""data":{"k":1}"#),
        (r#""vendor":["\ud800"]"#, r#""vendor":[]"#),
        (r#""data":{"x":1e400}"#, r#""data":{"x":1}"#),
        (r#""data":{"criticality":1e400}"#, r#""data":{"criticality":1}"#),
        (r#""vendor":{"a":[-1e400]}"#, r#""vendor":{}"#),
    ];
    for (bad, good) in cases {
        let line = |member: &str| {
            format!(
                "{HEADER}\n{{\"clk\":0,\"type\":\"record\",\"record_type\":\"T\",\"id\":1,\"parent_id\":null,\"description\":\"\",{member}{}}}\n",
                if member.starts_with("\"name\"") { "" } else { ",\"name\":\"n\"" }
            )
        };
        let path = dir.path().join("t.jets");
        std::fs::write(&path, line(bad)).unwrap();
        let o = jets(&["validate", path.to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(1), "{bad}: {}", stdout(&o));
        assert!(stdout(&o).contains("error[E001]"), "{bad}: {}", stdout(&o));
        std::fs::write(&path, line(good)).unwrap();
        let o = jets(&["validate", path.to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(0), "{good}: {}", stdout(&o));
    }
}

#[test]
fn negative_zero_is_not_an_unsigned_integer_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.jets");
    std::fs::write(
        &path,
        format!("{HEADER}\n{{\"clk\":-0,\"type\":\"record\",\"name\":\"n\",\"record_type\":\"T\",\"id\":-0,\"parent_id\":null,\"description\":\"\",\"data\":{{\"unit_id\":-0}}}}\n"),
    )
    .unwrap();
    let o = jets(&["validate", path.to_str().unwrap()]);
    let out = stdout(&o);
    assert_eq!(o.status.code(), Some(1), "{out}");
    assert!(
        out.contains(
            "error[E011]: `id` must be an unsigned 64-bit integer, found negative zero (-0)"
        ),
        "{out}"
    );
    assert!(out.contains("error[E012]") && out.contains("warning[W011]"), "{out}");
    assert!(!out.contains("fraction"), "{out}");
}
