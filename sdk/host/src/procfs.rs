//! Reading `/proc` and `/sys`: the raw counters the samplers turn into metrics.
//!
//! Every reader returns `io::Result` because processes vanish between listing and reading; callers
//! treat a vanished process as gone, never as zeros.

use std::collections::{HashMap, HashSet};
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use super::denet::PsiMem;

/// The fields of `/proc/<pid>/stat` the samplers use.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ProcStat {
    /// Process name (`comm`).
    pub comm: String,
    /// State letter (`R`, `S`, `Z`, ...).
    pub state: char,
    /// Parent process id.
    pub ppid: u32,
    /// Minor faults.
    pub minflt: u64,
    /// Major faults.
    pub majflt: u64,
    /// User CPU time, clock ticks.
    pub utime: u64,
    /// System CPU time, clock ticks.
    pub stime: u64,
    /// Threads.
    pub num_threads: u64,
    /// Start time after boot, clock ticks.
    pub starttime: u64,
    /// Virtual size, bytes.
    pub vsize: u64,
    /// Resident pages.
    pub rss_pages: u64,
    /// CPU last run on.
    pub processor: Option<u32>,
}

fn invalid(path: &Path, what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("{}: {what}", path.display()))
}

/// Parses `/proc/<pid>/stat`.
pub fn read_stat(pid: u32) -> io::Result<ProcStat> {
    let path = PathBuf::from(format!("/proc/{pid}/stat"));
    let text = fs::read_to_string(&path)?;
    parse_stat(&text).ok_or_else(|| invalid(&path, "unexpected layout"))
}

/// Parses the text of a `stat` file. `comm` may hold spaces and parentheses, so the fields are
/// counted from the last `)`.
pub fn parse_stat(text: &str) -> Option<ProcStat> {
    let open = text.find('(')?;
    let close = text.rfind(')')?;
    let comm = text.get(open + 1..close)?.to_string();
    let f: Vec<&str> = text.get(close + 1..)?.split_whitespace().collect();
    // f[0] is field 3 of proc(5).
    let n = |field: usize| -> Option<u64> { f.get(field - 3)?.parse().ok() };
    Some(ProcStat {
        comm,
        state: f.first()?.chars().next()?,
        ppid: n(4)? as u32,
        minflt: n(10)?,
        majflt: n(12)?,
        utime: n(14)?,
        stime: n(15)?,
        num_threads: n(20)?,
        starttime: n(22)?,
        vsize: n(23)?,
        rss_pages: f.get(24 - 3)?.parse::<i64>().ok()?.max(0) as u64,
        processor: n(39).map(|c| c as u32),
    })
}

/// `/proc/<pid>/io`.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ProcIo {
    /// Bytes read through syscalls.
    pub rchar: u64,
    /// Bytes written through syscalls.
    pub wchar: u64,
    /// Bytes fetched from storage.
    pub read_bytes: u64,
    /// Bytes sent to storage.
    pub write_bytes: u64,
}

impl ProcIo {
    /// The growth of each counter since `earlier`.
    pub fn since(&self, earlier: &ProcIo) -> ProcIo {
        ProcIo {
            rchar: self.rchar.saturating_sub(earlier.rchar),
            wchar: self.wchar.saturating_sub(earlier.wchar),
            read_bytes: self.read_bytes.saturating_sub(earlier.read_bytes),
            write_bytes: self.write_bytes.saturating_sub(earlier.write_bytes),
        }
    }
}

/// Parses `/proc/<pid>/io` (readable for one's own live processes, or with `CAP_SYS_PTRACE`; an
/// exited, unreaped process's is root's).
pub fn read_io(pid: u32) -> io::Result<ProcIo> {
    let path = PathBuf::from(format!("/proc/{pid}/io"));
    let text = fs::read_to_string(&path)?;
    parse_io(&path, &text)
}

/// Runs `f` (a `waitpid` that reaps a child) and returns how much this process's own I/O
/// counters grew meanwhile. Reaping adds the child's final counters, with those of every process
/// it reaped, to its parent's, so this is the child's I/O, readable without privileges where the
/// exited child's `/proc/<pid>/io` is not. The bytes of the first `/proc/self/io` read are taken
/// out of `rchar` (the kernel counts them once the read returns). Exact when no other thread of
/// this process does I/O during `f`.
pub fn io_across<R>(f: impl FnOnce() -> R) -> (R, io::Result<ProcIo>) {
    let path = Path::new("/proc/self/io");
    let before = fs::read_to_string(path).and_then(|t| Ok((parse_io(path, &t)?, t.len())));
    let r = f();
    let after = fs::read_to_string(path).and_then(|t| parse_io(path, &t));
    let grown = match (before, after) {
        (Ok((b, len)), Ok(a)) => {
            let mut d = a.since(&b);
            d.rchar = d.rchar.saturating_sub(len as u64);
            Ok(d)
        }
        (Err(e), _) | (_, Err(e)) => Err(e),
    };
    (r, grown)
}

fn parse_io(path: &Path, text: &str) -> io::Result<ProcIo> {
    let mut io = ProcIo::default();
    for line in text.lines() {
        let Some((k, v)) = line.split_once(':') else { continue };
        let v: u64 = v.trim().parse().map_err(|_| invalid(path, "non-numeric value"))?;
        match k {
            "rchar" => io.rchar = v,
            "wchar" => io.wchar = v,
            "read_bytes" => io.read_bytes = v,
            "write_bytes" => io.write_bytes = v,
            _ => {}
        }
    }
    Ok(io)
}

/// The ids of the threads of `pid`.
pub fn thread_ids(pid: u32) -> io::Result<Vec<u32>> {
    numeric_entries(Path::new(&format!("/proc/{pid}/task")))
}

fn numeric_entries(dir: &Path) -> io::Result<Vec<u32>> {
    let mut out = Vec::new();
    for e in fs::read_dir(dir)? {
        if let Some(n) = e?.file_name().to_str().and_then(|s| s.parse().ok()) {
            out.push(n);
        }
    }
    Ok(out)
}

/// Finds the descendants of a process (children recursively), parents before their children.
///
/// Descendants are found through every process's parent in `/proc/<pid>/stat`, because
/// `/proc/<pid>/task/*/children` needs `CONFIG_PROC_CHILDREN`, which kernels (this VM's included)
/// may lack. Reading every `stat` costs about 40 µs per process on a busy host, so the scanner
/// remembers each pid's parent and reads only the pids that appeared since the last call; the
/// candidates are then re-read and kept only if their parent still matches. A pid that died and
/// was reused between two calls keeps its remembered parent until [`ProcScanner::forget`] starts
/// over, which the samplers do every `rescan_every` samples.
#[derive(Debug, Default)]
pub struct ProcScanner {
    parent_of: HashMap<u32, u32>,
}

impl ProcScanner {
    /// Forgets every remembered parent: the next call reads every `stat` again.
    pub fn forget(&mut self) {
        self.parent_of.clear();
    }

    /// The descendants of `root`, with their `stat`.
    pub fn descendants(&mut self, root: u32) -> io::Result<Vec<(u32, ProcStat)>> {
        let pids = numeric_entries(Path::new("/proc"))?;
        let live: HashSet<u32> = pids.iter().copied().collect();
        self.parent_of.retain(|pid, _| live.contains(pid));
        for pid in pids {
            if let std::collections::hash_map::Entry::Vacant(e) = self.parent_of.entry(pid) {
                if let Ok(stat) = read_stat(pid) {
                    e.insert(stat.ppid);
                }
            }
        }
        let mut children: HashMap<u32, Vec<u32>> = HashMap::new();
        for (&pid, &ppid) in &self.parent_of {
            if pid != root {
                children.entry(ppid).or_default().push(pid);
            }
        }
        let mut out = Vec::new();
        let mut frontier = vec![root];
        while let Some(parent) = frontier.pop() {
            for &pid in children.get(&parent).map(Vec::as_slice).unwrap_or_default() {
                let Ok(stat) = read_stat(pid) else { continue };
                // Reparented (its parent died) or a reused pid: not in the tree any more.
                if stat.ppid != parent {
                    self.parent_of.insert(pid, stat.ppid);
                    continue;
                }
                frontier.push(pid);
                out.push((pid, stat));
            }
        }
        Ok(out)
    }
}

/// Every descendant of `root` (children recursively), reading every `/proc/<pid>/stat` once.
pub fn descendants(root: u32) -> io::Result<Vec<(u32, ProcStat)>> {
    ProcScanner::default().descendants(root)
}

/// System-wide network bytes (received, sent) over every interface but loopback.
pub fn net_totals() -> io::Result<(u64, u64)> {
    let path = Path::new("/proc/net/dev");
    let text = fs::read_to_string(path)?;
    let (mut rx, mut tx) = (0u64, 0u64);
    for line in text.lines().skip(2) {
        let Some((iface, rest)) = line.split_once(':') else { continue };
        if iface.trim() == "lo" {
            continue;
        }
        let f: Vec<u64> = rest.split_whitespace().filter_map(|v| v.parse().ok()).collect();
        if f.len() < 16 {
            return Err(invalid(path, "fewer than 16 counters on an interface line"));
        }
        rx += f[0];
        tx += f[8];
    }
    Ok((rx, tx))
}

/// Parses a PSI file (`/proc/pressure/memory` or a cgroup's `memory.pressure`) into fractions.
pub fn read_psi(path: &Path) -> io::Result<PsiMem> {
    let text = fs::read_to_string(path)?;
    let avg10 = |prefix: &str| -> Option<f32> {
        let line = text.lines().find(|l| l.starts_with(prefix))?;
        let v = line.split_whitespace().find_map(|kv| kv.strip_prefix("avg10="))?;
        v.parse::<f32>().ok().map(|p| p / 100.0)
    };
    Ok(PsiMem {
        some_avg10: avg10("some ").ok_or_else(|| invalid(path, "no `some avg10=` line"))?,
        // Kernels before 5.x wrote no `full` line for memory; none means no full stall.
        full_avg10: avg10("full ").unwrap_or(0.0),
    })
}

/// Where the cgroup v2 hierarchy is mounted, from `/proc/self/mountinfo`.
pub fn cgroup2_mount() -> Option<PathBuf> {
    let text = fs::read_to_string("/proc/self/mountinfo").ok()?;
    text.lines().find_map(|l| {
        let (pre, post) = l.split_once(" - ")?;
        if post.split_whitespace().next()? != "cgroup2" {
            return None;
        }
        pre.split_whitespace().nth(4).map(PathBuf::from)
    })
}

/// The `memory.pressure` file of `pid`'s own cgroup v2, when it exists (see
/// [`memory_pressure_file`] for when a cgroup is not the process's own).
pub fn cgroup_memory_pressure(pid: u32) -> Option<PathBuf> {
    let text = fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
    memory_pressure_file(&text, &cgroup2_mount()?)
}

/// The `memory.pressure` file for a `/proc/<pid>/cgroup` text under the cgroup v2 mount `mount`.
///
/// `None` when the process sits in the root cgroup (`0::/`): the root's pressure is the
/// system-wide PSI (or, inside a cgroup namespace, that of everything in the container), so it
/// would be system PSI claimed as per-process (rule HS6 in spec/host-sync.md).
pub fn memory_pressure_file(cgroup: &str, mount: &Path) -> Option<PathBuf> {
    let rel = cgroup.lines().find_map(|l| l.strip_prefix("0::"))?.trim().trim_start_matches('/');
    if rel.is_empty() {
        return None;
    }
    let file = mount.join(rel).join("memory.pressure");
    file.exists().then_some(file)
}

/// Boot time, Unix milliseconds (`btime` in `/proc/stat`).
pub fn boot_time_ms() -> io::Result<u64> {
    let path = Path::new("/proc/stat");
    let text = fs::read_to_string(path)?;
    text.lines()
        .find_map(|l| l.strip_prefix("btime ")?.trim().parse::<u64>().ok())
        .map(|s| s * 1000)
        .ok_or_else(|| invalid(path, "no btime line"))
}

/// The whole machine's CPU time so far, in clock ticks ([`clock_ticks`]) summed over its CPUs,
/// from the `cpu` line of `/proc/stat`: what any program or the kernel ran (`busy`), and what a
/// hypervisor ran instead while a CPU of this virtual machine had work (`steal`). Two readings
/// apart, less what a process itself used, say how busy the rest of the machine was meanwhile.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SystemCpu {
    /// user + nice + system + irq + softirq (a guest's time is counted in user already).
    pub busy_ticks: u64,
    /// steal.
    pub steal_ticks: u64,
}

/// Reads [`SystemCpu`] from `/proc/stat`.
pub fn system_cpu() -> io::Result<SystemCpu> {
    let path = Path::new("/proc/stat");
    let text = fs::read_to_string(path)?;
    parse_system_cpu(&text).ok_or_else(|| invalid(path, "no cpu line of 8 counters"))
}

/// [`SystemCpu`] from the text of `/proc/stat`; `None` without a `cpu` line of at least eight
/// counters (user nice system idle iowait irq softirq steal, kernels since 2.6.11).
pub fn parse_system_cpu(text: &str) -> Option<SystemCpu> {
    let line = text.lines().find_map(|l| l.strip_prefix("cpu "))?;
    let n: Vec<u64> = line.split_whitespace().map(|v| v.parse().ok()).collect::<Option<_>>()?;
    let &[user, nice, system, _idle, _iowait, irq, softirq, steal, ..] = n.as_slice() else {
        return None;
    };
    Some(SystemCpu { busy_ticks: user + nice + system + irq + softirq, steal_ticks: steal })
}

/// Seconds since boot, from `/proc/uptime` (centisecond precision, unlike `btime`).
pub fn uptime_secs() -> io::Result<f64> {
    let path = Path::new("/proc/uptime");
    let text = fs::read_to_string(path)?;
    text.split_whitespace()
        .next()
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| invalid(path, "no uptime value"))
}

/// CPU time a process used so far (every thread, the exited ones included), ns: its POSIX CPU
/// clock (`clock_getcpuclockid`), the scheduler's nanosecond count. `utime` + `stime` in `stat`
/// are the same time cut to clock ticks (10 ms), too coarse for intervals of 100 ms.
pub fn cpu_time_ns(pid: u32) -> io::Result<u64> {
    let mut clock: libc::clockid_t = 0;
    // SAFETY: `clock` is a valid out pointer.
    let rc = unsafe { libc::clock_getcpuclockid(pid as libc::pid_t, &mut clock) };
    if rc != 0 {
        return Err(io::Error::from_raw_os_error(rc));
    }
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid, writable timespec.
    if unsafe { libc::clock_gettime(clock, &mut ts) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64)
}

/// Clock ticks per second (`sysconf(_SC_CLK_TCK)`).
pub fn clock_ticks() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as u64
    } else {
        100
    }
}

/// Page size in KiB.
pub fn page_kb() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 {
        p as u64 / 1024
    } else {
        4
    }
}

/// Reads a clock (`CLOCK_MONOTONIC`, `CLOCK_REALTIME`, `CLOCK_PROCESS_CPUTIME_ID`, ...) in ns.
pub fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid, writable timespec.
    let rc = unsafe { libc::clock_gettime(clock, &mut ts) };
    if rc != 0 {
        return 0;
    }
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_with_parens_and_spaces_in_comm() {
        let text = "42 (a (b) c) S 1 42 42 0 -1 4194560 100 0 3 0 7 8 0 0 20 0 5 0 1234 409600 25 \
                    18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0";
        let s = parse_stat(text).expect("parses");
        assert_eq!(s.comm, "a (b) c");
        assert_eq!((s.state, s.ppid, s.minflt, s.majflt), ('S', 1, 100, 3));
        assert_eq!((s.utime, s.stime, s.num_threads, s.starttime), (7, 8, 5, 1234));
        assert_eq!((s.vsize, s.rss_pages, s.processor), (409600, 25, Some(1)));
        assert!(parse_stat("garbage").is_none());
    }

    #[test]
    fn the_root_cgroup_is_not_per_process_psi() {
        let mount = tempfile::tempdir().expect("tempdir");
        std::fs::write(mount.path().join("memory.pressure"), "some avg10=0.00").expect("root");
        let group = mount.path().join("a/b");
        std::fs::create_dir_all(&group).expect("group");
        std::fs::write(group.join("memory.pressure"), "some avg10=0.00").expect("group");
        assert_eq!(memory_pressure_file("0::/\n", mount.path()), None);
        assert_eq!(
            memory_pressure_file("4:memory:/x\n0::/a/b\n", mount.path()),
            Some(group.join("memory.pressure"))
        );
        assert_eq!(memory_pressure_file("0::/c\n", mount.path()), None, "no such group");
    }

    #[test]
    fn cpu_time_is_nanoseconds_not_ticks() {
        let me = std::process::id();
        let a = cpu_time_ns(me).expect("cpu clock");
        // Spin until this thread alone has used 2 ms: far less than a clock tick.
        let t0 = clock_ns(libc::CLOCK_THREAD_CPUTIME_ID);
        while clock_ns(libc::CLOCK_THREAD_CPUTIME_ID) - t0 < 2_000_000 {}
        let b = cpu_time_ns(me).expect("cpu clock");
        assert!(b - a >= 2_000_000, "{a} -> {b}");
        assert!(cpu_time_ns(4_194_305).is_err(), "above any pid_max: no such process");
    }

    #[test]
    fn system_cpu_sums_the_busy_counters_of_the_cpu_line() {
        let text = "cpu  100 2 30 5000 40 6 7 8 9 0\ncpu0 50 1 15 2500 20 3 3 4 4 0\nbtime 1\n";
        let c = parse_system_cpu(text).expect("parses");
        assert_eq!(c, SystemCpu { busy_ticks: 100 + 2 + 30 + 6 + 7, steal_ticks: 8 });
        assert!(parse_system_cpu("cpu0 1 2 3 4 5 6 7 8\n").is_none(), "a CPU's line alone");
        assert!(parse_system_cpu("cpu 1 2 3 4 5 6 7\n").is_none(), "no steal counter");
        assert!(parse_system_cpu("cpu 1 2 x 4 5 6 7 8\n").is_none(), "not a number");
    }

    #[test]
    fn the_machines_busy_time_counts_this_process_cpu_time() {
        let ticks = clock_ticks() as f64;
        let before = system_cpu().expect("/proc/stat");
        let own = clock_ns(libc::CLOCK_PROCESS_CPUTIME_ID);
        while clock_ns(libc::CLOCK_PROCESS_CPUTIME_ID) - own < 100_000_000 {}
        let after = system_cpu().expect("/proc/stat");
        let busy = (after.busy_ticks - before.busy_ticks) as f64 / ticks;
        // 100 ms of this process's CPU is in the machine's busy time (ticks are 10 ms, counted
        // per CPU at the tick: a tick's slack either way).
        assert!(busy >= 0.08, "{busy} s busy over 0.1 s of this process's CPU");
        assert!(after.steal_ticks >= before.steal_ticks);
    }

    #[test]
    fn own_process_is_readable() {
        let me = std::process::id();
        let s = read_stat(me).expect("stat");
        assert!(s.num_threads >= 1 && s.rss_pages > 0);
        read_io(me).expect("io");
        assert!(thread_ids(me).expect("tasks").contains(&me));
    }
}
