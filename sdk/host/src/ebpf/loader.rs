//! Loading and attaching the BPF programs with aya, and what stops them from working here.

use std::collections::BTreeMap;

use aya::maps::{Array, HashMap, MapData, PerCpuArray, RingBuf};
use aya::programs::TracePoint;
use aya::{Ebpf, EbpfLoader, Pod};

use super::event::Stream;
use super::syscalls::TABLE;
use super::{tracefs, IoTraceError};

static OBJECT: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/io.bpf.o"));

#[derive(Clone, Copy, Default)]
#[repr(C)]
struct SysClass {
    trace: u8,
    path_arg: [u8; 2],
    stream: u8,
}

// SAFETY: plain bytes, no padding, any bit pattern is valid.
unsafe impl Pod for SysClass {}

/// `struct simclk` of the C code: the simulator process and the address of its cycle counter.
#[derive(Clone, Copy, Default)]
#[repr(C)]
struct SimClk {
    tgid: u32,
    pad: u32,
    addr: u64,
}

// SAFETY: plain integers, no padding (4 + 4 + 8), any bit pattern is valid.
unsafe impl Pod for SimClk {}

/// Each program, the tracepoint it attaches to and the stream it feeds.
const PROGRAMS: &[(&str, &str, Stream)] = &[
    ("sys_enter", "raw_syscalls/sys_enter", Stream::Fs),
    ("sys_exit", "raw_syscalls/sys_exit", Stream::Fs),
    ("process_fork", "sched/sched_process_fork", Stream::Process),
    ("process_exec", "sched/sched_process_exec", Stream::Process),
    ("process_exit", "sched/sched_process_exit", Stream::Process),
    ("block_insert", "block/block_rq_insert", Stream::Block),
    ("block_issue", "block/block_rq_issue", Stream::Block),
    ("block_complete", "block/block_rq_complete", Stream::Block),
    ("cache_add", "filemap/mm_filemap_add_to_page_cache", Stream::Cache),
    ("cache_delete", "filemap/mm_filemap_delete_from_page_cache", Stream::Cache),
    ("cache_fault", "filemap/mm_filemap_fault", Stream::Fault),
    ("cache_dirty", "writeback/writeback_dirty_folio", Stream::Cache),
    ("sock_state", "sock/inet_sock_set_state", Stream::Net),
    ("sock_send", "sock/sock_send_length", Stream::Net),
    ("sock_recv", "sock/sock_recv_length", Stream::Net),
    ("fault_user", "exceptions/page_fault_user", Stream::Fault),
    ("uring_submit", "io_uring/io_uring_submit_req", Stream::Uring),
    ("uring_complete", "io_uring/io_uring_complete", Stream::Uring),
];

/// Programs without which nothing works (the syscall pair and the process tree).
const REQUIRED: &[&str] = &["sys_enter", "sys_exit", "process_fork", "process_exit"];

/// Why a stream is missing or degraded: tracepoint → reason, for the capabilities manifest.
pub type Degraded = BTreeMap<&'static str, (Stream, String)>;

/// Loaded, attached programs and the maps user space drives.
pub struct Loaded {
    /// Owns the programs: dropping it detaches them.
    pub _programs: Ebpf,
    /// The event ring buffer.
    pub ring: RingBuf<MapData>,
    /// Traced tgids.
    pub pids: HashMap<MapData, u32, u8>,
    /// Collector threads not to trace.
    pub ignore: HashMap<MapData, u32, u8>,
    /// Per-stream lost-event counters.
    pub lost: PerCpuArray<MapData, u64>,
    /// The simulator whose cycle counter the programs read.
    simclk: Array<MapData, SimClk>,
    /// Optional tracepoints that could not be used, and why.
    pub degraded: Degraded,
}

fn bpf_err(what: &str, e: impl std::fmt::Display) -> IoTraceError {
    let text = e.to_string();
    let lower = text.to_lowercase();
    if lower.contains("permission") || lower.contains("operation not permitted") {
        IoTraceError::Unavailable(format!(
            "{what}: {text} (needs root or CAP_BPF + CAP_PERFMON, and tracefs access)"
        ))
    } else {
        IoTraceError::Bpf(format!("{what}: {text}"))
    }
}

/// Checks what can be checked before loading: privileges, tracefs (mounted when missing) and the
/// tracepoint layouts. `Err(reason)` = the collector cannot run here.
pub fn preflight() -> Result<(), String> {
    if !has_bpf_privileges() {
        return Err("the eBPF collector needs root or CAP_BPF + CAP_PERFMON (effective \
                    capabilities of this process lack them)"
            .into());
    }
    tracefs::ensure_mounted()?;
    for tp in REQUIRED.iter().filter_map(|p| PROGRAMS.iter().find(|e| e.0 == *p)) {
        tracefs::check(tp.1)?;
    }
    Ok(())
}

/// Whether the effective capability set holds CAP_SYS_ADMIN or CAP_BPF + CAP_PERFMON.
pub fn has_bpf_privileges() -> bool {
    let Ok(status) = std::fs::read_to_string("/proc/self/status") else { return false };
    let Some(eff) = status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
    else {
        return false;
    };
    const SYS_ADMIN: u64 = 1 << 21;
    const PERFMON: u64 = 1 << 38;
    const BPF: u64 = 1 << 39;
    eff & SYS_ADMIN != 0 || (eff & PERFMON != 0 && eff & BPF != 0)
}

/// Loads the object, fills the syscall classes and attaches every program whose tracepoint
/// exists with the expected layout. Fails when a required program cannot be attached.
/// `ring_bytes` sizes the event ring buffer (rounded up to a power of two, at least one page).
pub fn load(ring_bytes: usize) -> Result<Loaded, IoTraceError> {
    preflight().map_err(IoTraceError::Unavailable)?;
    let ring = u32::try_from(ring_bytes.max(4096).next_power_of_two()).map_err(|_| {
        IoTraceError::Bpf(format!("ring buffer of {ring_bytes} bytes: at most 2 GiB"))
    })?;
    let mut bpf = EbpfLoader::new()
        .set_max_entries("events", ring)
        .load(OBJECT)
        .map_err(|e| bpf_err("loading the BPF object", e))?;
    {
        let map =
            bpf.map_mut("sysclass").ok_or_else(|| IoTraceError::Bpf("no sysclass map".into()))?;
        let mut classes: Array<&mut MapData, SysClass> =
            Array::try_from(map).map_err(|e| bpf_err("sysclass map", e))?;
        for &(nr, _, _, paths) in TABLE {
            let c = SysClass {
                trace: 1,
                path_arg: [
                    paths.first().copied().unwrap_or(0xff),
                    paths.get(1).copied().unwrap_or(0xff),
                ],
                stream: Stream::Fs as u8,
            };
            classes.set(nr, c, 0).map_err(|e| bpf_err("filling the sysclass map", e))?;
        }
    }
    let mut degraded = Degraded::new();
    for &(prog, tp, stream) in PROGRAMS {
        let required = REQUIRED.contains(&prog);
        let attach = |bpf: &mut Ebpf| -> Result<(), IoTraceError> {
            tracefs::check(tp).map_err(IoTraceError::Unavailable)?;
            let p: &mut TracePoint = bpf
                .program_mut(prog)
                .ok_or_else(|| IoTraceError::Bpf(format!("no program {prog} in the object")))?
                .try_into()
                .map_err(|e| bpf_err(prog, e))?;
            p.load().map_err(|e| bpf_err(&format!("verifying {prog}"), e))?;
            let (group, name) = tp.split_once('/').unwrap_or((tp, tp));
            p.attach(group, name).map_err(|e| bpf_err(&format!("attaching to {tp}"), e))?;
            Ok(())
        };
        match attach(&mut bpf) {
            Ok(()) => {}
            Err(e) if required => return Err(e),
            Err(e) => {
                degraded.insert(tp, (stream, e.to_string()));
            }
        }
    }
    let take = |bpf: &mut Ebpf, name: &str| {
        bpf.take_map(name).ok_or_else(|| IoTraceError::Bpf(format!("no map {name} in the object")))
    };
    let ring = RingBuf::try_from(take(&mut bpf, "events")?).map_err(|e| bpf_err("events", e))?;
    let pids = HashMap::try_from(take(&mut bpf, "pids")?).map_err(|e| bpf_err("pids", e))?;
    let ignore = HashMap::try_from(take(&mut bpf, "ignore")?).map_err(|e| bpf_err("ignore", e))?;
    let lost = PerCpuArray::try_from(take(&mut bpf, "lost")?).map_err(|e| bpf_err("lost", e))?;
    let simclk = Array::try_from(take(&mut bpf, "simclk")?).map_err(|e| bpf_err("simclk", e))?;
    Ok(Loaded { _programs: bpf, ring, pids, ignore, lost, simclk, degraded })
}

impl Loaded {
    /// Adds a process (and, through fork tracking, its future children) to the traced tree.
    pub fn trace_pid(&mut self, pid: u32) -> Result<(), IoTraceError> {
        self.pids.insert(pid, 1, 0).map_err(|e| bpf_err("adding a pid", e))
    }

    /// Has the programs read the cycle counter at `addr` in process `tgid` (a simulator's
    /// `SimClock`) for every record made in one of its threads.
    pub fn read_clock(&mut self, tgid: u32, addr: u64) -> Result<(), IoTraceError> {
        let v = SimClk { tgid, pad: 0, addr };
        self.simclk.set(0, v, 0).map_err(|e| bpf_err("setting the simulator's clock", e))
    }

    /// Excludes a thread (the collector's own) from tracing.
    pub fn ignore_tid(&mut self, tid: u32) -> Result<(), IoTraceError> {
        self.ignore.insert(tid, 1, 0).map_err(|e| bpf_err("ignoring a thread", e))
    }

    /// Lost events per stream, summed over CPUs.
    pub fn lost(&self) -> [u64; 7] {
        let mut out = [0u64; 7];
        for (i, o) in out.iter_mut().enumerate() {
            if let Ok(v) = self.lost.get(&(i as u32), 0) {
                *o = v.iter().sum();
            }
        }
        out
    }
}
