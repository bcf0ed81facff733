//! `jets run` on a command that forks children, allocates and writes files: the output parses as
//! denet JSON Lines and its peaks and I/O totals match what the command did.
//!
//! The workload is this test binary itself, re-run with `JETS_RUN_WORKLOAD` set so that the
//! `workload` test below does the work (the harness's own output adds a few hundred bytes of
//! syscall writes, inside the tolerances).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use jets_host::denet::{AggregatedMetrics, ChildStart, TreeSample};
use serde_json::Value;

const CHILD_ALLOC: usize = 48 << 20;
const CHILD_WRITE: usize = 8 << 20;
const PARENT_WRITE: usize = 4 << 20;
const CHILDREN: usize = 2;

fn write_file(path: &Path, len: usize) {
    use std::io::Write;
    let mut f = std::fs::File::create(path).expect("create");
    let block = vec![0x5au8; 1 << 20];
    for _ in 0..len / block.len() {
        f.write_all(&block).expect("write");
    }
    f.sync_all().expect("fsync");
}

/// The monitored command (only when `JETS_RUN_WORKLOAD` is set; a no-op in a normal test run).
#[test]
fn workload() {
    let Ok(role) = std::env::var("JETS_RUN_WORKLOAD") else { return };
    let dir = PathBuf::from(std::env::var("JETS_RUN_DIR").expect("dir"));
    let beacon = jets_host::ClockBeacon::from_env().expect("beacon");
    if role == "sim" {
        simulator(&dir);
        return;
    }
    if role == "unpriv-child" {
        write_file(&dir.join("unpriv-child.bin"), CHILD_WRITE);
        return;
    }
    if role == "unpriv" {
        // A child that exits long before it is reaped: for 400 ms it is a zombie whose
        // /proc/<pid>/io a non-root monitor cannot read.
        let mut kid = Command::new(std::env::current_exe().expect("exe"))
            .args(["--exact", "workload", "--nocapture", "--test-threads=1"])
            .env("JETS_RUN_WORKLOAD", "unpriv-child")
            .spawn()
            .expect("spawn child");
        std::thread::sleep(Duration::from_millis(400));
        write_file(&dir.join("unpriv-parent.bin"), PARENT_WRITE);
        assert!(kid.wait().expect("wait").success());
        return;
    }
    if role == "renamer" {
        // Renaming the main thread changes the process's command name without an exec (this
        // test may run on another thread: `/proc/self` is the process, so its main thread).
        std::thread::sleep(Duration::from_millis(250));
        std::fs::write("/proc/self/comm", "jets-renamed").expect("rename the main thread");
        std::thread::sleep(Duration::from_millis(250));
        return;
    }
    if role == "renamer-parent" {
        let status = Command::new(std::env::current_exe().expect("exe"))
            .args(["--exact", "workload", "--nocapture", "--test-threads=1"])
            .env("JETS_RUN_WORKLOAD", "renamer")
            .status()
            .expect("spawn child");
        assert!(status.success());
        return;
    }
    if role == "child" {
        // Allocate and touch every page, hold it while writing, then hold a little longer.
        let mut mem = vec![0u8; CHILD_ALLOC];
        for i in (0..mem.len()).step_by(4096) {
            mem[i] = 1;
        }
        let id = std::env::var("JETS_RUN_CHILD").expect("id");
        write_file(&dir.join(format!("child{id}.bin")), CHILD_WRITE);
        std::thread::sleep(Duration::from_millis(500));
        std::hint::black_box(&mem);
        return;
    }
    let exe = std::env::current_exe().expect("exe");
    let kids: Vec<_> = (0..CHILDREN)
        .map(|i| {
            Command::new(&exe)
                .args(["--exact", "workload", "--nocapture", "--test-threads=1"])
                .env("JETS_RUN_WORKLOAD", "child")
                .env("JETS_RUN_CHILD", i.to_string())
                .spawn()
                .expect("spawn child")
        })
        .collect();
    write_file(&dir.join("parent.bin"), PARENT_WRITE);
    // A simulator's clock, published while the children work.
    let start = Instant::now();
    let mut cycle = 0u64;
    while start.elapsed() < Duration::from_millis(700) {
        cycle += 1000;
        if let Some(b) = &beacon {
            b.publish(cycle);
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    for mut k in kids {
        assert!(k.wait().expect("wait").success());
    }
    std::fs::write(dir.join("final_cycle"), cycle.to_string()).expect("write final cycle");
}

/// A simulator built on the SDK: its HostMonitor publishes the trace clock to the beacon.
fn simulator(dir: &Path) {
    let trace = jets::Trace::create(dir.join("sim.jets"), jets::Metadata::new()).expect("trace");
    let clock = trace.clock().clone();
    let config = jets_host::HostConfig::default().interval(Duration::from_millis(50));
    let monitor = jets_host::HostMonitor::start(&trace, config).expect("monitor");
    let core = trace.root("core0", "Core").begin_at(0).expect("core");
    let start = Instant::now();
    while start.elapsed() < Duration::from_millis(600) {
        let clk = clock.advance(10);
        core.child("i", "Instruction").begin_at(clk).expect("begin").end_at(clk + 5).expect("end");
        std::thread::sleep(Duration::from_micros(200));
    }
    let report = monitor.stop().expect("stop");
    core.end_at(clock.now() + 5).expect("end");
    trace.close().expect("close");
    assert!(report.capabilities.get("beacon").is_some_and(|c| c.available), "the beacon was found");
}

fn jets() -> Command {
    Command::new(env!("CARGO_BIN_EXE_jets"))
}

/// Whether writes under `dir` reach a block device through the page cache, so the kernel counts
/// them in `write_bytes` (not on tmpfs, and not on network or FUSE file systems).
fn storage_accounted(dir: &Path) -> bool {
    let c = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes()).expect("path");
    // SAFETY: statfs is plain data and `c` a valid C string.
    let mut s: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    let ok = unsafe { libc::statfs(c.as_ptr(), &mut s) } == 0;
    // tmpfs, 9p, FUSE, NFS.
    let unaccounted = [libc::TMPFS_MAGIC, 0x0102_1997, 0x6573_5546, 0x6969];
    ok && !unaccounted.contains(&s.f_type)
}

#[test]
fn run_follows_the_tree_and_counts_its_memory_and_io() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("tempdir");
    let out = dir.path().join("run.jsonl");
    let status = jets()
        .args(["run", "--quiet", "--write-env", "--interval", "50", "--out"])
        .arg(&out)
        .arg("--")
        .arg(std::env::current_exe().expect("exe"))
        .args(["--exact", "workload", "--nocapture", "--test-threads=1"])
        .env("JETS_RUN_WORKLOAD", "parent")
        .env("JETS_RUN_DIR", dir.path())
        .stdout(std::process::Stdio::null())
        .status()
        .expect("jets run");
    assert!(status.success(), "jets run passes the command's exit code: {status}");

    let text = std::fs::read_to_string(&out).expect("output");
    let lines: Vec<Value> =
        text.lines().map(|l| serde_json::from_str(l).expect("JSON line")).collect();
    let kinds: Vec<&str> = lines.iter().map(|l| l["kind"].as_str().expect("kind")).collect();
    assert_eq!(&kinds[..2], ["env", "metadata"]);
    assert_eq!(kinds.last(), Some(&"exit"));
    assert!(kinds[2..kinds.len() - 1].iter().all(|k| *k == "tree" || *k == "child"), "{kinds:?}");
    let trees: Vec<TreeSample> = lines[2..lines.len() - 1]
        .iter()
        .filter(|l| l["kind"] == "tree")
        .map(|l| serde_json::from_value(l.clone()).expect("tree line"))
        .collect();
    // As denet's `run` (CV-DENET-2): one `child` line per descendant, before the first sample
    // that has it, naming its parent (the command), its command line and executable. Another
    // only after an exec (CV-DENET-3): never one that says the same again, as a thread renaming
    // itself (libtest names the main thread after its test) must not cause.
    let command_pid = lines[1]["pid"].as_u64().expect("pid");
    let mut announced = std::collections::HashMap::new();
    for l in &lines[2..lines.len() - 1] {
        if l["kind"] == "child" {
            let start: ChildStart = serde_json::from_value(l.clone()).expect("child line");
            let said = (start.cmd.clone(), start.exe.clone());
            assert_ne!(announced.insert(start.pid, said.clone()), Some(said), "{l}: said twice");
            assert_eq!(u64::from(start.ppid), command_pid, "{l}");
            assert!(!start.exe.is_empty(), "{l}");
            assert!(start.cmd.iter().any(|a| a == "workload"), "{l}");
        } else {
            let t: TreeSample = serde_json::from_value(l.clone()).expect("tree line");
            for c in &t.children {
                assert!(
                    announced.contains_key(&c.pid),
                    "child {} sampled before its child line",
                    c.pid
                );
            }
        }
    }
    assert!(announced.len() >= CHILDREN, "{announced:?}");
    assert!(trees.len() >= 10, "{} samples at 50 ms over ~0.8 s", trees.len());
    let caps = &lines[1]["capabilities"];
    assert!(
        caps["perf_hw"]["available"].is_boolean() && caps["psi"]["available"].is_boolean(),
        "{caps}"
    );

    let agg: Vec<&AggregatedMetrics> = trees.iter().filter_map(|t| t.aggregated.as_ref()).collect();
    // The tree: the command plus its two children at their peak.
    let max_procs = agg.iter().map(|a| a.process_count).max().expect("samples");
    assert!(max_procs > CHILDREN, "max_processes {max_procs}");
    assert!(trees.iter().any(|t| t.children.len() >= CHILDREN));
    // Peak RSS: both children hold 48 MiB at once for 500 ms. Tolerance: at least 90% of it
    // (resident pages of the allocations) and less than allocations + 64 MiB (binaries, heap).
    let peak_kb = agg.iter().map(|a| a.mem_rss_kb).max().expect("samples");
    let allocated_kb = (CHILDREN * CHILD_ALLOC / 1024) as u64;
    assert!(peak_kb >= allocated_kb * 9 / 10, "peak RSS {peak_kb} KiB < 90% of {allocated_kb} KiB");
    assert!(peak_kb <= allocated_kb + 64 * 1024, "peak RSS {peak_kb} KiB");
    // I/O totals (the last sample: the command's counters include its reaped children).
    let last = agg.last().expect("samples");
    let written = (CHILDREN * CHILD_WRITE + PARENT_WRITE) as u64;
    let wchar = last.syscall_write_bytes.expect("syscall writes");
    assert!(
        wchar >= written && wchar <= written + (256 << 10),
        "syscall writes {wchar} vs {written} (+256 KiB)"
    );
    if storage_accounted(dir.path()) {
        let disk = last.disk_write_bytes;
        assert!(
            disk >= written * 95 / 100 && disk <= written + (4 << 20),
            "disk writes {disk} vs {written}"
        );
    }
    // The clock beacon: sim_clk appears, never decreases, and ends at the last published cycle.
    let clks: Vec<u64> = trees.iter().filter_map(|t| t.sim_clk).collect();
    assert!(clks.len() >= 5, "sim_clk in {} samples", clks.len());
    assert!(clks.windows(2).all(|w| w[0] <= w[1]));
    let final_cycle: u64 =
        std::fs::read_to_string(dir.path().join("final_cycle")).expect("final").parse().expect("n");
    assert_eq!(*clks.last().expect("clk"), final_cycle);

    // And jets stats reads it back as denet would.
    let o = jets().args(["stats", "--format", "json"]).arg(&out).output().expect("stats");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let s: Value = serde_json::from_slice(&o.stdout).expect("summary");
    assert_eq!(s["peak_mem_rss_kb"], peak_kb);
    assert_eq!(s["max_processes"], max_procs);
    assert_eq!(s["total_syscall_write_bytes"], wchar);
}

/// `jets run` as a user who may not read an exited process's `/proc/<pid>/io` (root re-runs it
/// as `nobody`): the totals never dip while a child is unreaped, and the last sample has the
/// command's whole I/O, its reaped child's included.
#[test]
fn an_unprivileged_run_counts_exited_processes() {
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::process::CommandExt;
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("tempdir");
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).expect("chmod");
    let out = dir.path().join("unpriv.jsonl");
    let mut c = jets();
    c.args(["run", "--quiet", "--interval", "20", "--out"])
        .arg(&out)
        .arg("--")
        .arg(std::env::current_exe().expect("exe"))
        .args(["--exact", "workload", "--nocapture", "--test-threads=1"])
        .env("JETS_RUN_WORKLOAD", "unpriv")
        .env("JETS_RUN_DIR", dir.path())
        .env("TMPDIR", dir.path())
        .stdout(std::process::Stdio::null());
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        c.uid(65534).gid(65534);
    }
    let status = c.status().expect("jets run");
    assert!(status.success(), "{status}");
    let trees: Vec<AggregatedMetrics> = std::fs::read_to_string(&out)
        .expect("output")
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).expect("json"))
        .filter(|v| v["kind"] == "tree")
        .filter_map(|v| serde_json::from_value(v["aggregated"].clone()).ok())
        .collect();
    assert!(trees.len() >= 10, "{} samples", trees.len());
    let wchar: Vec<u64> = trees.iter().map(|a| a.syscall_write_bytes.unwrap_or(0)).collect();
    assert!(wchar.windows(2).all(|w| w[0] <= w[1]), "syscall writes dipped: {wchar:?}");
    let disk: Vec<u64> = trees.iter().map(|a| a.disk_write_bytes).collect();
    assert!(disk.windows(2).all(|w| w[0] <= w[1]), "disk writes dipped: {disk:?}");
    let written = (CHILD_WRITE + PARENT_WRITE) as u64;
    let last = *wchar.last().expect("samples");
    assert!(last >= written && last <= written + (256 << 10), "syscall writes {last} vs {written}");
    if storage_accounted(dir.path()) {
        let d = *disk.last().expect("samples");
        assert!(
            d >= written * 95 / 100 && d <= written + (4 << 20),
            "disk writes {d} vs {written}"
        );
    }
}

/// The first sample is of the command's program, not of a process in the middle of `execve`
/// (RSS 0): over 20 runs, every first sample shows resident memory.
#[test]
fn the_first_sample_is_taken_after_exec() {
    for _ in 0..20 {
        let o = jets()
            .args(["run", "--json", "--no-beacon", "--exclude-children", "-i", "60000"])
            .args(["--", "sleep", "0.05"])
            .output()
            .expect("jets run");
        assert!(o.status.success());
        let text = String::from_utf8(o.stdout).expect("utf8");
        let first = text
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).expect("json"))
            .find(|v| v["kind"] == "sample")
            .expect("a sample");
        assert!(first["mem_rss_kb"].as_u64().expect("rss") > 0, "{first}");
    }
}

/// A descendant first seen between its fork and its exec (here a subshell that runs `sleep 0.3`
/// and then becomes `sleep 0.25`) is announced again once it has exec'd: the last `child` line of
/// its pid, the one denet's reader keeps, names the program it became, with the time it was
/// first seen.
#[test]
fn a_child_seen_before_its_exec_is_announced_again_after_it() {
    let o = jets()
        .args(["run", "--json", "--no-beacon", "-i", "40"])
        .args(["--", "sh", "-c", "(sleep 0.3; exec sleep 0.25) & wait"])
        .output()
        .expect("jets run");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8(o.stdout).expect("utf8");
    let mut lines: std::collections::HashMap<u32, Vec<ChildStart>> = Default::default();
    for l in text.lines().map(|l| serde_json::from_str::<Value>(l).expect("json")) {
        if l["kind"] == "child" {
            let start: ChildStart = serde_json::from_value(l).expect("child line");
            lines.entry(start.pid).or_default().push(start);
        }
    }
    let became = lines
        .values()
        .find(|v| v.last().is_some_and(|c| c.cmd == ["sleep", "0.25"]))
        .unwrap_or_else(|| panic!("no child ends as `sleep 0.25`: {lines:?}"));
    let first = &became[0];
    assert_eq!(first.cmd.first().map(String::as_str), Some("sh"), "{became:?}");
    assert!(became.iter().all(|c| c.ts_ms == first.ts_ms), "{became:?}");
    let sleeps = lines.values().filter(|v| v.last().is_some_and(|c| c.cmd[..1] == ["sleep"]));
    assert_eq!(sleeps.count(), 2, "the inner sleep and the exec'd subshell: {lines:?}");
}

/// A descendant whose command name changes without an exec (a thread renaming itself) is not
/// announced again: its command line and executable are what its first `child` line said.
#[test]
fn a_child_that_renames_itself_is_announced_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("run.jsonl");
    let o = jets()
        .args(["run", "--quiet", "--no-beacon", "-i", "40", "-o"])
        .arg(&out)
        .arg("--")
        .arg(std::env::current_exe().expect("exe"))
        .args(["--exact", "workload", "--nocapture", "--test-threads=1"])
        .env("JETS_RUN_WORKLOAD", "renamer-parent")
        .env("JETS_RUN_DIR", dir.path())
        .output()
        .expect("jets run");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = std::fs::read_to_string(&out).expect("output");
    let lines: Vec<Value> = text.lines().map(|l| serde_json::from_str(l).expect("json")).collect();
    // The rename is seen: some sample names the child by its new name.
    let renamed = lines.iter().filter(|l| l["kind"] == "tree").any(|l| {
        l["children"].as_array().is_some_and(|c| c.iter().any(|c| c["command"] == "jets-renamed"))
    });
    assert!(renamed, "no sample shows the rename: {text}");
    let children: Vec<&Value> = lines.iter().filter(|l| l["kind"] == "child").collect();
    assert_eq!(children.len(), 1, "{children:?}");
}

/// A `jets run` that fails (here: the command does not exist) removes its private directory.
#[test]
fn a_failed_run_leaves_no_temporary_directory() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let o = jets()
        .args(["run", "--quiet", "--", "/nonexistent/jets-test-command"])
        .env("TMPDIR", tmp.path())
        .output()
        .expect("jets run");
    assert_eq!(o.status.code(), Some(2));
    let left: Vec<_> = std::fs::read_dir(tmp.path()).expect("list").collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}

#[test]
fn exclude_children_writes_sample_lines_and_the_exit_code() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("one.jsonl");
    let status = jets()
        .args(["run", "--quiet", "--exclude-children", "--no-beacon", "-i", "20", "-o"])
        .arg(&out)
        .args(["--", "sh", "-c", "sleep 0.2; exit 3"])
        .status()
        .expect("jets run");
    assert_eq!(status.code(), Some(3));
    let text = std::fs::read_to_string(&out).expect("output");
    let kinds: Vec<String> = text
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).expect("json")["kind"]
                .as_str()
                .expect("kind")
                .to_string()
        })
        .collect();
    assert_eq!(kinds[0], "metadata");
    assert!(
        kinds[1..kinds.len() - 1].iter().all(|k| k == "sample") && kinds.len() >= 5,
        "{kinds:?}"
    );
    assert!(text.lines().last().expect("exit").contains("\"exit_code\":3"));
}

#[test]
fn a_command_that_cannot_start_is_an_error() {
    let o = jets()
        .args(["run", "--quiet", "--", "/nonexistent/jets-test-command"])
        .output()
        .expect("jets run");
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("cannot run") && err.contains("No such file"), "{err}");
}

#[test]
fn json_mode_prints_lines_on_stdout() {
    let o = jets()
        .args(["run", "--json", "-i", "20", "--", "sleep", "0.1"])
        .output()
        .expect("jets run");
    assert!(o.status.success());
    let text = String::from_utf8(o.stdout).expect("utf8");
    for l in text.lines() {
        let v: Value = serde_json::from_str(l).expect("only JSON lines on stdout");
        assert!(v["kind"].is_string());
    }
    assert!(text.lines().count() >= 4);
}

#[test]
fn a_simulator_under_jets_run_publishes_its_cycle_consistently_with_its_trace() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("sim.jsonl");
    let status = jets()
        .args(["run", "--quiet", "--interval", "20", "--out"])
        .arg(&out)
        .arg("--")
        .arg(std::env::current_exe().expect("exe"))
        .args(["--exact", "workload", "--nocapture", "--test-threads=1"])
        .env("JETS_RUN_WORKLOAD", "sim")
        .env("JETS_RUN_DIR", dir.path())
        .stdout(std::process::Stdio::null())
        .status()
        .expect("jets run");
    assert!(status.success());

    // The simulator's own trace: valid, with its sync points.
    let text = std::fs::read_to_string(dir.path().join("sim.jets")).expect("trace");
    let (diagnostics, report) = jets_read::validate::validate_bytes(text.as_bytes());
    assert!(report.is_valid(), "{diagnostics:?}");
    let lines = text.lines().map(|l| jets::format::Line::parse(l).expect("line"));
    let collected = jets_host::sync::collect(lines, "Instruction").expect("sync points");
    let map = jets_host::sync::ClockMap::new(collected.points.iter().map(|(p, _)| *p).collect())
        .expect("map");

    // The monitor's samples: sim_clk from the beacon. By the trace's own clock map, a sample's
    // cycle maps to the sample's time within: the beacon's staleness (its 10 ms publish period,
    // or a sync interval when the sampler thread is held up), the linear interpolation's error (at
    // most one sync interval) and ts_ms rounding (1 ms).
    let longest_interval_ms = map
        .points()
        .windows(2)
        .map(|w| (w[1].mono_ns - w[0].mono_ns) as f64 / 1e6)
        .fold(0.0, f64::max);
    let tolerance_ms = 2.0 * longest_interval_ms + 11.0;
    let samples: Vec<(u64, u64)> = std::fs::read_to_string(&out)
        .expect("jsonl")
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).expect("json"))
        .filter(|v| v["kind"] == "tree")
        .filter_map(|v| Some((v["sim_clk"].as_u64()?, v["ts_ms"].as_u64()?)))
        .collect();
    assert!(samples.len() >= 10, "{} samples with sim_clk", samples.len());
    assert!(samples.windows(2).all(|w| w[0].0 <= w[1].0));
    let mut checked = 0;
    for (clk, ts_ms) in samples {
        if let Some(real_ns) = map.cycle_to_real_ns(clk as f64) {
            let off_ms = (real_ns / 1e6 - ts_ms as f64).abs();
            assert!(off_ms <= tolerance_ms, "cycle {clk} at {real_ns} ns, sampled at {ts_ms} ms");
            checked += 1;
        }
    }
    assert!(checked >= 5, "only {checked} samples inside the trace's sync range");
}

#[test]
fn the_display_shows_each_sample_and_the_summary() {
    let o = jets()
        .args(["run", "--no-update", "--no-beacon", "-i", "20", "--", "sleep", "0.2"])
        .output()
        .expect("jets run");
    assert!(o.status.success());
    let text = String::from_utf8(o.stdout).expect("utf8");
    let rows: Vec<&str> = text.lines().filter(|l| l.starts_with('[')).collect();
    assert!(rows.len() >= 5, "{text}");
    assert!(
        rows.iter().all(|r| r.contains("cpu") && r.contains("rss") && r.contains("procs")),
        "{text}"
    );
    assert!(text.contains("denet summary of sleep 0.2") && text.contains("samples"), "{text}");
}
