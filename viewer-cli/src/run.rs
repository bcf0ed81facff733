//! `jets run [options] -- CMD ARGS...`: runs a command and monitors its process tree like denet's
//! `run`, writing denet JSON Lines.
//!
//! The command is forked stopped (it raises SIGSTOP before exec), so the monitor opens its perf
//! counters (inherited by everything the command starts) and primes its CPU deltas before the
//! command runs a single instruction; the first written sample is taken once exec has loaded the
//! new program (not in the middle of `execve`, where the process has no memory yet). When the
//! command exits, the monitor sees it without reaping it (`waitid(WNOWAIT)`) and samples the
//! zombie; it then reaps it and takes the command's final I/O counters (its own and those of every
//! child it reaped) from the growth of jets's own `/proc/self/io` across the reaping, which any
//! user can read, where the zombie's `/proc/<pid>/io` belongs to root. jets exits with the
//! command's exit code.
//!
//! A simulator built on the SDK finds the clock beacon through `JETS_CLOCK_BEACON` and publishes
//! its cycle there; every sample then carries `sim_clk`.

use std::ffi::CString;
use std::fs::File;
use std::io::{BufWriter, IsTerminal, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use jets_host::denet::{ChildStart, Line, Metrics, ProcessMetadata, TreeSample};
use jets_host::procfs::{self, ProcIo};
use jets_host::{Capability, ClockBeacon, SamplerOptions, Schedule, TreeSampler, BEACON_ENV};
use serde_json::json;

use crate::formats::denet::DenetFile;
use crate::stats::denet;

/// Arguments of `jets run`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Sampling interval in milliseconds (the starting interval with `--adaptive`).
    #[arg(short, long, default_value_t = 100)]
    pub interval: u64,
    /// Adaptive schedule: `--interval` for the first second, growing to `--max-interval` at 10 s.
    #[arg(long)]
    pub adaptive: bool,
    /// Longest interval of the adaptive schedule, milliseconds.
    #[arg(long, default_value_t = 1000)]
    pub max_interval: u64,
    /// Write the JSON Lines to FILE.
    #[arg(short, long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Print the JSON Lines to standard output instead of the live display.
    #[arg(long)]
    pub json: bool,
    /// No output on standard output (except with `--json`).
    #[arg(short, long)]
    pub quiet: bool,
    /// Print a new line per sample instead of updating one line in place.
    #[arg(long)]
    pub no_update: bool,
    /// Start with an `env` line (host, kernel, CPU, NUMA, affinity, governor, THP, SMT, cgroup).
    #[arg(long)]
    pub write_env: bool,
    /// Monitor the command alone (`sample` lines), not its process tree (`tree` lines).
    #[arg(long)]
    pub exclude_children: bool,
    /// I/O and fault counters since each process started (the default counts from the start of
    /// monitoring; for the command itself both are the same).
    #[arg(long)]
    pub since_process_start: bool,
    /// Do not create the clock beacon (no `sim_clk` in the samples).
    #[arg(long)]
    pub no_beacon: bool,
    /// Also trace the command's file, block, page-cache, network, page-fault and io_uring
    /// operations with eBPF into DIR, in io-tracer-linux's layout (root; feature `ebpf`).
    #[arg(long, value_name = "DIR")]
    pub io_trace: Option<PathBuf>,
    /// The command and its arguments.
    #[arg(required = true, last = true, value_name = "CMD")]
    pub command: Vec<String>,
}

/// A forked command, stopped before exec until [`Child::resume`].
struct Child {
    pid: i32,
    exec_status: OwnedFd,
}

fn cstring(s: &str) -> Result<CString> {
    CString::new(s).with_context(|| format!("argument {s:?} contains a NUL byte"))
}

impl Child {
    fn spawn_stopped(argv: &[String]) -> Result<Child> {
        let args: Vec<CString> = argv.iter().map(|a| cstring(a)).collect::<Result<_>>()?;
        let mut ptrs: Vec<*const libc::c_char> = args.iter().map(|a| a.as_ptr()).collect();
        ptrs.push(std::ptr::null());
        let mut fds = [0i32; 2];
        // SAFETY: `fds` has room for the two descriptors pipe2 writes.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return Err(std::io::Error::last_os_error()).context("creating the exec status pipe");
        }
        // SAFETY: jets is single-threaded here (no sampler, no writer yet), so the child may run
        // the async-signal-safe calls below; everything it uses was allocated before the fork.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            // SAFETY: in the child of a single-threaded process (see the fork above), so no lock
            // can be held by a lost thread; `ptrs` is a NULL-terminated array of C strings built
            // before the fork, `fds[1]` is open, and `errno` is this thread's, 4 bytes long.
            unsafe {
                libc::close(fds[0]);
                libc::raise(libc::SIGSTOP);
                libc::execvp(ptrs[0], ptrs.as_ptr());
                let errno = *libc::__errno_location();
                libc::write(fds[1], (&errno as *const i32).cast(), 4);
                libc::_exit(127);
            }
        }
        // SAFETY: both descriptors were just created by pipe2 and are owned here.
        let (read_end, write_end) =
            unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        drop(write_end);
        if pid < 0 {
            return Err(std::io::Error::last_os_error()).context("fork");
        }
        let mut status = 0;
        // SAFETY: waiting for our own child; `status` is a valid out pointer.
        let rc = unsafe { libc::waitpid(pid, &mut status, libc::WUNTRACED) };
        if rc != pid || !libc::WIFSTOPPED(status) {
            bail!("the command's process {pid} did not stop before exec (wait status {status:#x})");
        }
        Ok(Child { pid, exec_status: read_end })
    }

    /// Lets the command exec; returns once it has (or reports why it could not).
    fn resume(&self, argv0: &str) -> Result<()> {
        // SAFETY: signalling our own stopped child.
        unsafe { libc::kill(self.pid, libc::SIGCONT) };
        let mut errno = 0i32;
        // SAFETY: reads at most 4 bytes into `errno`; EOF (0) means exec closed the pipe.
        let n =
            unsafe { libc::read(self.exec_status.as_raw_fd(), (&mut errno as *mut i32).cast(), 4) };
        if n == 4 {
            self.wait()?;
            bail!("cannot run {argv0:?}: {}", std::io::Error::from_raw_os_error(errno));
        }
        Ok(())
    }

    /// Waits (at most 200 ms) until the kernel reports resident memory for the new program.
    /// Right after `execve` the process has the new program mapped but nothing resident yet (and
    /// the RSS the kernel shows lags behind by a batch of pages per CPU), so a sample then reads
    /// RSS 0 for a program that is about to run its dynamic loader (rule HS7).
    fn wait_exec_loaded(&self) {
        let start = Instant::now();
        while start.elapsed() < Duration::from_millis(200) {
            match procfs::read_stat(self.pid as u32) {
                Ok(s) if s.rss_pages > 0 || s.state == 'Z' || s.state == 'X' => return,
                Ok(_) if !self.exited() => {}
                _ => return,
            }
            std::thread::sleep(Duration::from_micros(100));
        }
    }

    /// Whether the command has exited, without reaping it (its `/proc` entry stays readable).
    fn exited(&self) -> bool {
        // SAFETY: siginfo_t is plain data; waitid writes it for our own child.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        let flags = libc::WEXITED | libc::WNOHANG | libc::WNOWAIT;
        // SAFETY: as above.
        let rc = unsafe { libc::waitid(libc::P_PID, self.pid as libc::id_t, &mut info, flags) };
        // SAFETY: si_pid is valid to read after waitid filled `info` (0 when nothing changed).
        rc == 0 && unsafe { info.si_pid() } != 0
    }

    /// Reaps the command; its exit code and its final I/O counters, as they reached jets's own
    /// (see [`procfs::io_across`]: exact while no other jets thread does I/O).
    fn reap_with_io(&self) -> Result<(u8, Option<ProcIo>)> {
        let (code, io) = procfs::io_across(|| self.wait());
        Ok((code?, io.ok()))
    }

    /// Reaps the command; its exit code (128 + signal when killed).
    fn wait(&self) -> Result<u8> {
        let mut status = 0;
        // SAFETY: waiting for our own child.
        if unsafe { libc::waitpid(self.pid, &mut status, 0) } != self.pid {
            return Err(std::io::Error::last_os_error()).context("waiting for the command");
        }
        Ok(if libc::WIFEXITED(status) {
            libc::WEXITSTATUS(status) as u8
        } else if libc::WIFSIGNALED(status) {
            128u8.wrapping_add(libc::WTERMSIG(status) as u8)
        } else {
            1
        })
    }
}

/// Resolves the executable the way execvp will.
fn executable(argv0: &str) -> String {
    if argv0.contains('/') {
        return std::fs::canonicalize(argv0).map_or(argv0.to_string(), |p| p.display().to_string());
    }
    std::env::var_os("PATH")
        .and_then(|path| std::env::split_paths(&path).map(|d| d.join(argv0)).find(|p| p.is_file()))
        .map_or(argv0.to_string(), |p| p.display().to_string())
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// Where the lines go.
struct Sinks {
    file: Option<(PathBuf, BufWriter<File>)>,
    stdout_json: bool,
}

impl Sinks {
    fn line(&mut self, text: &str) -> Result<()> {
        if let Some((path, f)) = &mut self.file {
            writeln!(f, "{text}")
                .and_then(|_| f.flush())
                .with_context(|| format!("writing {}", path.display()))?;
        }
        if self.stdout_json {
            let mut out = std::io::stdout().lock();
            writeln!(out, "{text}")
                .and_then(|_| out.flush())
                .context("writing to standard output")?;
        }
        Ok(())
    }
}

fn bytes(n: u64) -> String {
    match n {
        n if n >= 1 << 30 => format!("{:.1} GiB", n as f64 / (1u64 << 30) as f64),
        n if n >= 1 << 20 => format!("{:.1} MiB", n as f64 / (1u64 << 20) as f64),
        n if n >= 1 << 10 => format!("{:.1} KiB", n as f64 / 1024.0),
        n => format!("{n} B"),
    }
}

fn display(elapsed: Duration, m: &Metrics, processes: usize, sim_clk: Option<u64>) -> String {
    let mut s = format!(
        "[{:7.1}s] cpu {:6.1}%  rss {:>9}  threads {:3}  procs {:3}  disk r {:>9} w {:>9}",
        elapsed.as_secs_f64(),
        m.cpu_usage,
        bytes(m.mem_rss_kb * 1024),
        m.thread_count,
        processes,
        bytes(m.disk_read_bytes),
        bytes(m.disk_write_bytes)
    );
    if let Some(c) = sim_clk {
        s.push_str(&format!("  sim_clk {c}"));
    }
    s
}

/// Runs `jets run`.
pub fn run(args: Args) -> Result<ExitCode> {
    let argv0 = args.command[0].clone();
    let schedule = if args.adaptive {
        Schedule::Adaptive {
            base: Duration::from_millis(args.interval.max(1)),
            max: Duration::from_millis(args.max_interval.max(args.interval).max(1)),
        }
    } else {
        Schedule::Fixed(Duration::from_millis(args.interval.max(1)))
    };
    let file = match &args.out {
        Some(p) => Some((
            p.clone(),
            BufWriter::new(File::create(p).with_context(|| format!("creating {}", p.display()))?),
        )),
        None => None,
    };
    let mut sinks = Sinks { file, stdout_json: args.json };
    let live = !args.json && !args.quiet;

    let beacon_dir = if args.no_beacon { None } else { Some(PrivateDir::create()?) };
    let beacon = match &beacon_dir {
        Some(dir) => {
            let b =
                ClockBeacon::create(dir.0.join("clock")).context("creating the clock beacon")?;
            // jets is single-threaded here; the command inherits the variable through exec.
            std::env::set_var(BEACON_ENV, b.path());
            Some(b)
        }
        None => None,
    };

    let t0_ms = now_ms();
    let child = Child::spawn_stopped(&args.command)?;
    // Ctrl-C reaches the command (same process group); jets stays to write the last sample.
    // SAFETY: installing SIG_IGN has no preconditions; the child keeps the default disposition.
    unsafe { libc::signal(libc::SIGINT, libc::SIG_IGN) };
    let opts = SamplerOptions {
        include_children: !args.exclude_children,
        since_process_start: args.since_process_start,
        root_is_fresh: true,
        perf: true,
        discover_every: 1,
    };
    let mut sampler = TreeSampler::new(child.pid as u32, opts).context("preparing the sampler")?;
    sampler.sample(); // primes CPU deltas and counters on the stopped, not yet exec'd process

    let mut caps = sampler.capabilities().clone();
    caps.insert(
        "beacon",
        match &beacon {
            Some(b) => {
                let mut c = Capability::new(
                    true,
                    Some(format!(
                        "{BEACON_ENV} names the file; sim_clk appears once the command publishes"
                    )),
                );
                c.extra.insert("file".into(), b.path().display().to_string().into());
                c
            }
            None => Capability::new(false, Some("--no-beacon".into())),
        },
    );
    if args.write_env {
        sinks.line(&Line::Env(&jets_host::env::snapshot(std::process::id())).to_json())?;
    }
    let meta = ProcessMetadata {
        pid: child.pid as u32,
        cmd: args.command.clone(),
        executable: executable(&argv0),
        t0_ms,
        capabilities: Some(caps.to_json()),
    };
    sinks.line(&Line::Metadata(&meta).to_json())?;

    let io_trace = args.io_trace.as_deref();
    let io = match crate::formats::iotracer::start_collector(io_trace, child.pid as u32) {
        Ok(io) => io,
        Err(e) => {
            // The stopped command never runs: kill and reap it so nothing waits on its pipes.
            // SAFETY: signalling our own stopped child.
            unsafe { libc::kill(child.pid, libc::SIGKILL) };
            let _ = child.wait();
            return Err(e);
        }
    };
    if let Err(e) = child.resume(&argv0) {
        let _ = crate::formats::iotracer::stop_collector(io);
        return Err(e);
    }
    child.wait_exec_loaded();
    let start = Instant::now();
    let mut io = io;
    let mut code = None;
    let mut seen = DenetFile::default();
    let mut last_line_ms = t0_ms;
    let mut tty_line = false;
    // Each descendant announced: its command name when last sampled, and its last `child` line.
    struct Announced {
        command: String,
        start: ChildStart,
    }
    let mut announced: std::collections::HashMap<u32, Announced> = std::collections::HashMap::new();
    let poll = Duration::from_millis(5);
    let mut next = Instant::now();
    loop {
        let done = child.exited();
        if done || Instant::now() >= next {
            let mut tree: TreeSample = sampler.sample();
            if done {
                // The collector is a thread of jets: stopped first, so that the growth of jets's
                // own counters across the reaping is the command's alone.
                crate::formats::iotracer::stop_collector(io.take())?;
                let (c, reaped) = child.reap_with_io()?;
                code = Some(c);
                if let Some(r) = reaped {
                    sampler.set_reaped_root_io(&mut tree, r);
                }
            }
            let sim_clk = beacon.as_ref().and_then(ClockBeacon::cycle);
            tree.sim_clk = sim_clk;
            last_line_ms = tree.ts_ms;
            if args.exclude_children {
                if let Some(mut m) = tree.parent.take() {
                    m.perf = tree.aggregated.as_ref().and_then(|a| a.perf);
                    m.perf_sw = tree.aggregated.as_ref().and_then(|a| a.perf_sw);
                    m.sim_clk = sim_clk;
                    sinks.line(&Line::Sample(&m).to_json())?;
                    if live {
                        show(
                            &display(start.elapsed(), &m, 1, sim_clk),
                            args.no_update,
                            &mut tty_line,
                        );
                    }
                    seen.metrics.push(m);
                    seen.sim_clks.push(sim_clk);
                }
            } else if let Some(a) = &tree.aggregated {
                // As denet's `run`: a `child` line for each descendant the first time it is seen,
                // and again (with the time it was first seen) once it has run another program:
                // one seen between its fork and its exec would otherwise keep its parent's
                // command line. A changed command name is the cheap sign of an exec; the line is
                // written only if what it says (command line, executable) changed too, since a
                // thread can rename itself without exec (libtest names the main thread after
                // the test it runs). Readers keep the last line of a pid, as denet's own does
                // (`denet.report._load_records`). A command line announced empty (caught inside
                // its exec, see `ChildStart::read`) is read again at every sample until it says
                // something.
                for c in &tree.children {
                    let (first_ms, last) = match announced.get_mut(&c.pid) {
                        None => (tree.ts_ms, None),
                        Some(a) if a.command == c.command && !a.start.cmd.is_empty() => continue,
                        Some(a) => {
                            a.command.clone_from(&c.command);
                            (a.start.ts_ms, Some(&mut a.start))
                        }
                    };
                    let Some(start) = ChildStart::read(c.pid, first_ms) else { continue };
                    match last {
                        Some(last) if last.cmd == start.cmd && last.exe == start.exe => continue,
                        Some(last) => *last = start.clone(),
                        None => {
                            let command = c.command.clone();
                            announced.insert(c.pid, Announced { command, start: start.clone() });
                        }
                    }
                    sinks.line(&Line::Child(&start).to_json())?;
                }
                sinks.line(&Line::Tree(&tree).to_json())?;
                if live {
                    let m = Metrics {
                        cpu_usage: a.cpu_usage,
                        mem_rss_kb: a.mem_rss_kb,
                        thread_count: a.thread_count,
                        disk_read_bytes: a.disk_read_bytes,
                        disk_write_bytes: a.disk_write_bytes,
                        ..Default::default()
                    };
                    show(
                        &display(start.elapsed(), &m, a.process_count, sim_clk),
                        args.no_update,
                        &mut tty_line,
                    );
                }
                seen.aggregated.push(a.clone());
                seen.sim_clks.push(sim_clk);
            }
            next = Instant::now() + schedule.interval_at(start.elapsed());
        }
        if done {
            break;
        }
        std::thread::sleep(
            poll.min(next.saturating_duration_since(Instant::now()))
                .max(Duration::from_micros(200)),
        );
    }
    let code = match code {
        Some(c) => c,
        None => child.wait()?,
    };
    sinks.line(&json!({"kind": "exit", "ts_ms": now_ms(), "last_sample_to_exit_ms": now_ms().saturating_sub(last_line_ms), "exit_code": code}).to_string())?;
    drop(beacon_dir);
    if tty_line {
        println!();
    }
    if live {
        let path = args.out.clone().unwrap_or_else(|| PathBuf::from(args.command.join(" ")));
        match denet::summarize(&seen, &path) {
            Ok(s) => print!("{}", denet::to_text(&s, &path)),
            Err(_) => println!("no samples: the command ended before the first one"),
        }
    }
    Ok(ExitCode::from(code))
}

fn show(line: &str, no_update: bool, tty_line: &mut bool) {
    let mut out = std::io::stdout().lock();
    if no_update || !out.is_terminal() {
        let _ = writeln!(out, "{line}");
    } else {
        let _ = write!(out, "\r\x1b[2K{line}");
        *tty_line = true;
    }
    let _ = out.flush();
}

/// A private directory for the beacon file, removed when dropped: on every way out of `run`,
/// errors included.
struct PrivateDir(PathBuf);

impl PrivateDir {
    fn create() -> Result<PrivateDir> {
        let base = std::env::temp_dir();
        for i in 0..100u32 {
            let dir = base.join(format!("jets-run-{}-{}-{i}", std::process::id(), now_ms()));
            match std::fs::create_dir(&dir) {
                Ok(()) => return Ok(PrivateDir(dir)),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(e).with_context(|| format!("creating {}", dir.display())),
            }
        }
        bail!("could not create a private directory in {}", base.display())
    }
}

impl Drop for PrivateDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
