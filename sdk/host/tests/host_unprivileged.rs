//! A monitor without privileges: a child that exited but is not reaped yet keeps its I/O in the
//! tree's totals (its `/proc/<pid>/io` is root's then), and reaping hands the child's final
//! counters to the parent, where [`procfs::io_across`] reads them exactly.
//!
//! As root, the test re-runs itself as `nobody` (uid 65534); otherwise as the current user.
#![cfg(target_os = "linux")]

use std::io::Write;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use jets_host::procfs::{self, io_across};
use jets_host::{SamplerOptions, TreeSampler};

const ROLE: &str = "JETS_HOST_UNPRIV_ROLE";
const WRITTEN: u64 = 1 << 20;

/// The monitor, run without privileges by the test below.
#[test]
fn unprivileged_monitor() {
    if std::env::var(ROLE).is_err() {
        return;
    }
    // SAFETY: geteuid has no preconditions.
    assert_ne!(unsafe { libc::geteuid() }, 0, "must run unprivileged");
    let opts = SamplerOptions { perf: false, ..Default::default() };
    let mut s = TreeSampler::new(std::process::id(), opts).expect("sampler");
    s.sample(); // before the child: it started under monitoring, so it has no baseline
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("out");
    // A shell whose child writes WRITTEN bytes, then waits for a line before it exits.
    let script = format!("head -c {WRITTEN} /dev/zero > '{}'; read x", file.display());
    let mut child =
        Command::new("sh").args(["-c", &script]).stdin(Stdio::piped()).spawn().expect("spawn sh");
    let pid = child.id();
    let writes = |s: &mut TreeSampler| {
        let tree = s.sample();
        let c = tree.children.iter().find(|c| c.pid == pid).map(|c| c.metrics.clone());
        c.map(|m| (m.syscall_write_bytes, m.disk_write_bytes))
    };
    let start = Instant::now();
    let alive = loop {
        let w = writes(&mut s).expect("the child is in the tree");
        if w.0 == Some(WRITTEN) {
            break w;
        }
        assert!(start.elapsed() < Duration::from_secs(20), "the child never wrote: {w:?}");
        std::thread::sleep(Duration::from_millis(5));
    };
    // Let it exit, and wait until it is a zombie (not reaped: nobody waits for it yet).
    child.stdin.take().expect("stdin").write_all(b"go\n").expect("write");
    while procfs::read_stat(pid).expect("stat").state != 'Z' {
        assert!(start.elapsed() < Duration::from_secs(20), "the child did not exit");
        std::thread::sleep(Duration::from_millis(2));
    }
    assert!(procfs::read_io(pid).is_err(), "an exited process's io file is root's");
    let zombie = writes(&mut s).expect("an unreaped child is still in the tree");
    assert_eq!(zombie, alive, "its counters are held, not dropped from the totals");

    let (status, io) = io_across(|| child.wait());
    assert!(status.expect("wait").success());
    let io = io.expect("own io");
    assert_eq!(io.wchar, WRITTEN, "reaping handed over the child's writes exactly: {io:?}");
    assert!(io.rchar >= WRITTEN, "{io:?}");
    println!("unprivileged monitor: ok");
}

#[test]
fn exited_children_keep_their_io_without_privileges() {
    if std::env::var(ROLE).is_ok() {
        return;
    }
    let mut c = Command::new(std::env::current_exe().expect("exe"));
    c.args(["unprivileged_monitor", "--exact", "--nocapture", "--test-threads=1"]).env(ROLE, "1");
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        // std clears the supplementary groups when it changes the uid as root.
        c.uid(65534).gid(65534).env("TMPDIR", "/tmp");
    }
    let out = c.output().expect("run the monitor");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("unprivileged monitor: ok"),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
