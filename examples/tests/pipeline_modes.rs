//! `pipeline_modes`, the one-mode-per-process runner used to compare builds: each mode runs the
//! bench's program to its checked result and writes a valid trace of what the mode selects.

use std::path::Path;
use std::process::{Child, Command};

fn run(mode: &str, out: &Path) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_pipeline_modes"))
        .args([mode, "12", out.to_str().expect("a UTF-8 path")])
        .output()
        .expect("running pipeline_modes")
}

fn lines(path: &Path) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(path).expect("the trace");
    let (diags, report) = jets_read::validate::validate_bytes(text.as_bytes());
    assert!(diags.is_empty() && report.errors == 0, "{diags:?}");
    text.lines().map(|l| serde_json::from_str(l).expect("a JSON line")).collect()
}

#[test]
fn each_mode_runs_the_program_and_writes_what_it_selects() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut records = Vec::new();
    for mode in ["untraced", "off", "window", "full"] {
        let out = dir.path().join(format!("{mode}.jets"));
        let r = run(mode, &out);
        assert!(r.status.success(), "{mode}: {}", String::from_utf8_lossy(&r.stderr));
        let stdout = String::from_utf8_lossy(&r.stdout);
        assert!(
            stdout.starts_with(&format!("{mode}: ")) && stdout.contains(" cycles in "),
            "{stdout}"
        );
        // Beside the time, what else the machine ran meanwhile (Linux), or that it was not
        // measured.
        let other = if cfg!(target_os = "linux") { " cores, steal " } else { "not measured" };
        assert!(stdout.contains("; other work ") && stdout.contains(other), "{stdout}");
        assert!(stdout.contains("; cores' round trip "), "{stdout}");
        if mode == "untraced" {
            assert!(!out.exists(), "an untraced run writes no trace");
            continue;
        }
        let n = lines(&out).iter().filter(|l| l["type"] == "record").count();
        records.push((mode, n));
    }
    let count = |m: &str| records.iter().find(|(mode, _)| *mode == m).map(|(_, n)| *n);
    assert_eq!(count("off"), Some(0), "capture off writes no record");
    let (window, full) = (count("window").unwrap(), count("full").unwrap());
    assert!(window > 0 && window < full / 4, "a 1% window wrote {window} of {full} records");
}

/// A mode with `=` is a `JETS_CAPTURE` setting: the window `window` finds (its footer's
/// `capture`) given as `clk=A..B` writes the same trace without the untraced run, and a bad
/// setting is refused naming its clause.
#[test]
fn a_capture_setting_is_a_mode() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (found, given) = (dir.path().join("found.jets"), dir.path().join("given.jets"));
    assert!(run("window", &found).status.success());
    let found = lines(&found);
    let setting = found.last().expect("a footer")["capture"].as_str().expect("a setting");
    assert!(setting.starts_with("clk="), "{setting}");
    let r = run(setting, &given);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    assert!(String::from_utf8_lossy(&r.stdout).starts_with(&format!("{setting}: ")));
    let given = lines(&given);
    // The same lines between the header (which holds the time it was opened) and the footer.
    assert_eq!(given.len(), found.len());
    assert_eq!(given[1..given.len() - 1], found[1..found.len() - 1]);
    let r = run("clk=9..3", &dir.path().join("bad.jets"));
    assert!(!r.status.success());
    let stderr = String::from_utf8_lossy(&r.stderr);
    assert!(stderr.contains("JETS_CAPTURE clause `clk=9..3`"), "{stderr}");
}

#[test]
fn an_unknown_mode_is_an_error_naming_the_modes() {
    let dir = tempfile::tempdir().expect("temp dir");
    let r = run("everything", &dir.path().join("x.jets"));
    assert!(!r.status.success());
    let stderr = String::from_utf8_lossy(&r.stderr);
    assert!(
        stderr.contains("unknown mode \"everything\"") && stderr.contains("recorder"),
        "{stderr}"
    );
}

/// With a CPU, the simulator runs pinned to it, and the line says so; a CPU the machine does not
/// have is an error naming it.
#[test]
fn a_cpu_pins_the_simulator_to_it() {
    let dir = tempfile::tempdir().expect("temp dir");
    let out = dir.path().join("pinned.jets");
    let Some(cpus) = jets_host::load::allowed_cpus() else {
        eprintln!("NOT CHECKED: threads are pinned on Linux only");
        return;
    };
    let cpu = *cpus.last().expect("a CPU");
    let r = Command::new(env!("CARGO_BIN_EXE_pipeline_modes"))
        .args(["full", "12", out.to_str().expect("a UTF-8 path"), &cpu.to_string()])
        .output()
        .expect("running pipeline_modes");
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let stdout = String::from_utf8_lossy(&r.stdout);
    assert!(stdout.trim_end().ends_with(&format!("; on CPU {cpu}, pinned")), "{stdout}");
    assert!(lines(&out).iter().any(|l| l["type"] == "record"), "the trace has the run");
    let r = Command::new(env!("CARGO_BIN_EXE_pipeline_modes"))
        .args(["off", "12", out.to_str().expect("a UTF-8 path"), "100000"])
        .output()
        .expect("running pipeline_modes");
    assert!(!r.status.success());
    let stderr = String::from_utf8_lossy(&r.stderr);
    assert!(stderr.contains("CPU 100000"), "{stderr}");
}

/// A process that keeps a CPU busy until dropped.
struct Spinner(Child);

impl Drop for Spinner {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The other work printed beside a run's time (`jets_host::load`, as `jets bench` measures it
/// per round) sees a process spinning beside the run.
#[test]
fn a_process_spinning_beside_the_run_is_seen() {
    if !cfg!(target_os = "linux") {
        eprintln!("NOT CHECKED: other work on the machine is measured on Linux only");
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let _spinner = Spinner(Command::new("sh").args(["-c", "while :; do :; done"]).spawn().unwrap());
    // Long enough for the kernel's 10 ms ticks to count the spinner: about a second here.
    let r = Command::new(env!("CARGO_BIN_EXE_pipeline_modes"))
        .args(["untraced", "400", dir.path().join("x.jets").to_str().expect("a UTF-8 path")])
        .output()
        .expect("running pipeline_modes");
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let stdout = String::from_utf8_lossy(&r.stdout);
    let others: f64 = stdout
        .split("; other work ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|x| x.parse().ok())
        .unwrap_or_else(|| panic!("no other work in {stdout}"));
    assert!(others >= 0.3, "a spinning process beside the run: {others} cores ({stdout})");
}

/// A layout (0 to 7) places the simulator's stack as `jets bench`'s round of that number does;
/// the run and its trace are the same, and any other layout is an error naming it.
#[test]
fn a_layout_places_the_run_and_a_bad_one_is_refused() {
    let dir = tempfile::tempdir().expect("temp dir");
    let out = dir.path().join("layout.jets");
    let path = out.to_str().expect("a UTF-8 path");
    let cpu = jets_host::load::allowed_cpus().and_then(|c| c.first().copied()).unwrap_or(0);
    let with = |layout: &str| {
        Command::new(env!("CARGO_BIN_EXE_pipeline_modes"))
            .args(["sample", "12", path, &cpu.to_string(), layout])
            .output()
            .expect("running pipeline_modes")
    };
    let r = with("7");
    // Off Linux a CPU cannot be pinned: the error says so, and there is nothing more to see.
    if !r.status.success() && String::from_utf8_lossy(&r.stderr).contains("Linux only") {
        eprintln!("NOT CHECKED: threads are pinned on Linux only");
        return;
    }
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    assert!(String::from_utf8_lossy(&r.stdout).starts_with("sample: "));
    let sampled = lines(&out);
    assert!(sampled.iter().any(|l| l["record_type"] == "Instruction"), "the run is traced");
    let r = with("0");
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    assert_eq!(lines(&out).len(), sampled.len(), "the same lines whatever the layout");
    for bad in ["8", "-1", "first"] {
        let r = with(bad);
        assert!(!r.status.success(), "layout {bad} was taken");
        let stderr = String::from_utf8_lossy(&r.stderr);
        assert!(stderr.contains(&format!("layout \"{bad}\": a number from 0 to 7")), "{stderr}");
    }
}
