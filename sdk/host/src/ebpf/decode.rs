//! From ring-buffer records to io-tracer rows: fd → path tables, file offsets, flag names, page
//! fault severity.
//!
//! The decoder is the only stateful step: it follows each process's fds (open, dup, close) so
//! reads and writes carry their file's path and offset, and it holds a user page fault until the
//! same thread's next record, so a file-backed fault can be told MAJOR (the page had to be added
//! to the page cache) or MINOR.

use std::collections::HashMap;

use super::event::{CacheOp, Header, PathArg, ProcOp, Raw, SockAddrs, Stream};
use super::syscalls::{self, Sys};

/// Who did it and when.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Who {
    /// `CLOCK_MONOTONIC` ns (see [`Header::ts`]).
    pub ts: u64,
    /// Process id.
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
    /// CPU.
    pub cpu: u32,
    /// Task name.
    pub comm: String,
    /// The simulator's cycle at `ts`, when the kernel read it ([`Header::clk`]).
    pub clk: Option<u64>,
}

impl From<&Header> for Who {
    fn from(h: &Header) -> Who {
        Who { ts: h.ts, pid: h.pid, tid: h.tid, cpu: h.cpu, comm: h.comm.clone(), clk: h.clk }
    }
}

/// A file operation (`fs/`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FsRow {
    /// Who and when (entry of the syscall).
    pub who: Who,
    /// io-tracer operation (`READ`, `WRITE`, `OPEN`, ...).
    pub op: &'static str,
    /// The syscall.
    pub syscall: &'static str,
    /// The file (`[sendfile]`, `[decode_error]`, or empty for anonymous mmap).
    pub path: String,
    /// The second path of a rename.
    pub path2: Option<String>,
    /// Bytes (see io-tracer's operations table).
    pub size: u64,
    /// Flag names, `|`-separated, or `NO_FLAGS`.
    pub flags: String,
    /// Entry to exit, ns.
    pub latency_ns: u64,
    /// File offset for reads, writes and mmap, when known.
    pub offset: Option<u64>,
    /// The fd involved, if any.
    pub fd: Option<i64>,
    /// The syscall's return value.
    pub ret: i64,
}

/// A block request (`ds/`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlockRow {
    /// Submitter; `ts` is the completion.
    pub who: Who,
    /// Parent of the submitter, when known.
    pub ppid: Option<u32>,
    /// First sector.
    pub sector: u64,
    /// `read`, `write`, `flush`, `discard`, `secure_erase` or `none`.
    pub op: &'static str,
    /// Bytes.
    pub size: u64,
    /// Issue → completion, ns (insert → completion when the issue was not seen).
    pub latency_ns: u64,
    /// Insert → issue, ns, when both were seen.
    pub queue_ns: Option<u64>,
    /// `major:minor`.
    pub dev: String,
    /// The kernel's rwbs flags.
    pub rwbs: String,
    /// Completion error (0 = success).
    pub error: i32,
}

/// A page-cache event (`cache/`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CacheRow {
    /// Who and when.
    pub who: Who,
    /// `MISS`, `EVICT` or `DIRTY`.
    pub event: &'static str,
    /// Inode.
    pub inode: u64,
    /// Page index.
    pub index: u64,
    /// Superblock device id (kernel `dev_t`), 0 when unknown.
    pub dev_id: u32,
    /// Pages.
    pub count: u32,
}

/// A socket send or receive (`nw/`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NetRow {
    /// Who and when.
    pub who: Who,
    /// Local address (empty when unknown).
    pub source_addr: String,
    /// Remote address.
    pub dest_addr: String,
    /// Local port (0 when unknown).
    pub source_port: u16,
    /// Remote port.
    pub dest_port: u16,
    /// Bytes.
    pub size: u64,
    /// `send` or `receive`.
    pub direction: &'static str,
    /// `tcp`, `udp`, `unix`, or the family/protocol numbers.
    pub protocol: String,
}

/// A user page fault (`pagefault/`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FaultRow {
    /// Who and when.
    pub who: Who,
    /// `READ` or `WRITE`.
    pub fault_type: &'static str,
    /// `MAJOR` (the page was read into the page cache) or `MINOR`.
    pub severity: &'static str,
    /// Backing inode, 0 for anonymous memory.
    pub inode: u64,
    /// File offset in pages.
    pub offset: u64,
    /// Faulting address.
    pub address: u64,
    /// Superblock device id, 0 when unknown.
    pub dev_id: u32,
}

/// An io_uring request or an `io_uring_enter` (`iouring/`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UringRow {
    /// Submitter; `ts` is the completion (the syscall's entry for `IO_URING_ENTER`).
    pub who: Who,
    /// Operation name (`READ`, `WRITE`, ..., `IO_URING_ENTER`).
    pub opcode: String,
    /// The ring's fd for `IO_URING_ENTER`; requests carry none (not in the tracepoints).
    pub fd: Option<i64>,
    /// Submissions of an `IO_URING_ENTER`.
    pub length: Option<u64>,
    /// Result.
    pub result: Option<i64>,
    /// Submission → completion, ns.
    pub latency_ns: Option<u64>,
    /// The request's user_data.
    pub user_data: Option<u64>,
}

/// A process of the tree forked, exec'd or exited (`process/` snapshots follow these).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProcRow {
    /// Who and when.
    pub who: Who,
    /// `FORK`, `EXEC` or `EXIT`.
    pub op: &'static str,
    /// The new process of a fork.
    pub child: Option<u32>,
}

/// One decoded operation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Row {
    /// `fs/`.
    Fs(FsRow),
    /// `ds/`.
    Block(BlockRow),
    /// `cache/`.
    Cache(CacheRow),
    /// `nw/`.
    Net(NetRow),
    /// `pagefault/`.
    Fault(FaultRow),
    /// `iouring/`.
    Uring(UringRow),
    /// `process/`.
    Process(ProcRow),
}

impl Row {
    /// The row's stream.
    pub fn stream(&self) -> Stream {
        match self {
            Row::Fs(_) => Stream::Fs,
            Row::Block(_) => Stream::Block,
            Row::Cache(_) => Stream::Cache,
            Row::Net(_) => Stream::Net,
            Row::Fault(_) => Stream::Fault,
            Row::Uring(_) => Stream::Uring,
            Row::Process(_) => Stream::Process,
        }
    }

    /// Who did it and when.
    pub fn who(&self) -> &Who {
        match self {
            Row::Fs(r) => &r.who,
            Row::Block(r) => &r.who,
            Row::Cache(r) => &r.who,
            Row::Net(r) => &r.who,
            Row::Fault(r) => &r.who,
            Row::Uring(r) => &r.who,
            Row::Process(r) => &r.who,
        }
    }
}

#[derive(Clone, Debug)]
struct Fd {
    path: String,
    flags: Option<u64>,
    pos: Option<u64>,
}

struct PendingFault {
    row: FaultRow,
    file_fault_seen: bool,
}

/// A file mapping of a process: where a user page fault's inode comes from when the kernel
/// resolved the fault without calling the file's fault handler (pages already cached, mapped by
/// fault-around: no `mm_filemap_fault`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Mapping {
    start: u64,
    end: u64,
    inode: u64,
    /// Kernel `dev_t` (major << 20 | minor).
    dev: u32,
    /// File offset of `start`, bytes.
    offset: u64,
}

impl Mapping {
    /// Parses a `/proc/<pid>/maps` line (`start-end perms offset major:minor inode path`).
    fn parse(line: &str) -> Option<Mapping> {
        let mut f = line.split_whitespace();
        let (start, end) = f.next()?.split_once('-')?;
        let _perms = f.next()?;
        let offset = u64::from_str_radix(f.next()?, 16).ok()?;
        let (major, minor) = f.next()?.split_once(':')?;
        let dev =
            (u32::from_str_radix(major, 16).ok()? << 20) | u32::from_str_radix(minor, 16).ok()?;
        Some(Mapping {
            start: u64::from_str_radix(start, 16).ok()?,
            end: u64::from_str_radix(end, 16).ok()?,
            inode: f.next()?.parse().ok()?,
            dev,
            offset,
        })
    }
}

const PAGE: u64 = 4096;

/// Turns ring-buffer records into rows. Feed records in ring order with [`Decoder::push`].
#[derive(Default)]
pub struct Decoder {
    fds: HashMap<(u32, i64), Fd>,
    faults: HashMap<u32, PendingFault>,
    /// File mappings per process: from MMAP rows, and from `/proc/<pid>/maps` (read when a fault
    /// falls outside them, again after the process maps, unmaps or execs).
    maps: HashMap<u32, Vec<Mapping>>,
    proc_maps: HashMap<u32, Vec<Mapping>>,
    ppids: HashMap<u32, u32>,
    /// Syscalls that failed (not reported as rows; io-tracer has no error column).
    pub failed_syscalls: u64,
}

const O_ACCMODE: u64 = 3;
const O_APPEND: u64 = 0o2000;
const O_DIRECT: u64 = 0o40000;
/// The status flags `fcntl(F_SETFL)` may change: O_APPEND, O_ASYNC, O_DIRECT, O_NOATIME,
/// O_NONBLOCK.
const SETFL_MASK: u64 = O_APPEND | 0o20000 | O_DIRECT | 0o1000000 | 0o4000;
const O_CREAT_WRONLY_TRUNC: u64 = 0o100 | 0o1 | 0o1000;

impl Decoder {
    /// A decoder with empty fd tables.
    pub fn new() -> Decoder {
        Decoder::default()
    }

    /// Learns the fds `pid` has now, before it runs: the traced command, stopped before its
    /// `exec` (`jets run`), or the process tracing itself as it starts. Without this, an fd
    /// the tree inherited (its stdin, stdout, stderr) is looked up in `/proc` when a record
    /// first uses it, which is later than the record was made: by then the process may have
    /// put another file on that number (a shell saving its stdout before `> file`), and the
    /// record would be given that file's name.
    pub fn adopt(&mut self, pid: u32) {
        let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/fd")) else { return };
        for fd in dir.flatten().filter_map(|e| e.file_name().to_str()?.parse::<i64>().ok()) {
            let f = from_proc(pid, fd);
            self.fds.insert((pid, fd), f);
        }
    }

    /// Decodes one record; appends the rows it completes to `out` (zero, one or two).
    pub fn push(&mut self, raw: Raw, out: &mut Vec<Row>) {
        let tid = raw.header().tid;
        let fault_followup = matches!(raw, Raw::Cache { op: CacheOp::Fault | CacheOp::Add, .. });
        if !fault_followup {
            if let Some(p) = self.faults.remove(&tid) {
                out.push(Row::Fault(self.finish_fault(p)));
            }
        }
        match raw {
            Raw::Syscall { h, nr, ret, args, latency_ns, paths } => {
                match self.syscall(&h, nr, ret, args, latency_ns, paths) {
                    Some(r) if r.op == "IO_URING_ENTER" => out.push(Row::Uring(UringRow {
                        opcode: r.op.into(),
                        fd: r.fd,
                        length: Some(r.size),
                        result: Some(r.ret),
                        latency_ns: Some(r.latency_ns),
                        user_data: None,
                        who: r.who,
                    })),
                    Some(r) => out.push(Row::Fs(r)),
                    None => {}
                }
            }
            Raw::Uring { h, user_data, submit_ts, opcode, res } => {
                out.push(Row::Uring(UringRow {
                    who: Who::from(&h),
                    opcode: uring_op(opcode),
                    fd: None,
                    length: None,
                    result: Some(res.into()),
                    latency_ns: Some(h.ts.saturating_sub(submit_ts)),
                    user_data: Some(user_data),
                }));
            }
            Raw::Block { h, dev, nr_sector, sector, insert_ts, issue_ts, error, rwbs } => {
                let start = if issue_ts != 0 { issue_ts } else { insert_ts };
                out.push(Row::Block(BlockRow {
                    ppid: self.ppid(h.pid),
                    who: Who::from(&h),
                    sector,
                    op: block_op(&rwbs),
                    size: u64::from(nr_sector) * 512,
                    latency_ns: h.ts.saturating_sub(start),
                    queue_ns: (insert_ts != 0 && issue_ts != 0)
                        .then(|| issue_ts.saturating_sub(insert_ts)),
                    dev: format!("{}:{}", dev >> 20, dev & 0xfffff),
                    rwbs,
                    error,
                }));
            }
            Raw::Cache { h, ino, index, dev, op, pages } => {
                if let Some(p) = self.faults.get_mut(&tid) {
                    match op {
                        CacheOp::Fault => {
                            p.row.inode = ino;
                            p.row.offset = index;
                            p.row.dev_id = dev;
                            p.file_fault_seen = true;
                        }
                        CacheOp::Add if p.file_fault_seen => p.row.severity = "MAJOR",
                        _ => {}
                    }
                }
                let event = match op {
                    CacheOp::Add => "MISS",
                    CacheOp::Evict => "EVICT",
                    CacheOp::Dirty => "DIRTY",
                    CacheOp::Fault => return,
                };
                out.push(Row::Cache(CacheRow {
                    who: Who::from(&h),
                    event,
                    inode: ino,
                    index,
                    dev_id: dev,
                    count: pages,
                }));
            }
            Raw::Net { h, family, protocol, size, receive, addrs, .. } => {
                let (source_addr, dest_addr, source_port, dest_port) = match &addrs {
                    Some(a) => (ip(a, &a.saddr), ip(a, &a.daddr), a.sport, a.dport),
                    None => (String::new(), String::new(), 0, 0),
                };
                out.push(Row::Net(NetRow {
                    who: Who::from(&h),
                    source_addr,
                    dest_addr,
                    source_port,
                    dest_port,
                    size: size.max(0) as u64,
                    direction: if receive { "receive" } else { "send" },
                    protocol: protocol_name(family, protocol),
                }));
            }
            Raw::Fault { h, address, error_code, .. } => {
                self.faults.insert(
                    tid,
                    PendingFault {
                        row: FaultRow {
                            who: Who::from(&h),
                            fault_type: if error_code & 2 != 0 { "WRITE" } else { "READ" },
                            severity: "MINOR",
                            inode: 0,
                            offset: 0,
                            address,
                            dev_id: 0,
                        },
                        file_fault_seen: false,
                    },
                );
            }
            Raw::Process { h, op, child } => {
                let op = match op {
                    ProcOp::Fork => {
                        self.ppids.insert(child, h.pid);
                        let inherited: Vec<_> = self
                            .fds
                            .iter()
                            .filter(|((p, _), _)| *p == h.pid)
                            .map(|((_, fd), f)| ((child, *fd), f.clone()))
                            .collect();
                        self.fds.extend(inherited);
                        if let Some(m) = self.maps.get(&h.pid).cloned() {
                            self.maps.insert(child, m);
                        }
                        "FORK"
                    }
                    ProcOp::Exec => {
                        self.maps.remove(&h.pid);
                        self.remap(h.pid);
                        "EXEC"
                    }
                    ProcOp::Exit => {
                        self.maps.remove(&h.pid);
                        self.remap(h.pid);
                        self.fds.retain(|(p, _), _| *p != h.pid);
                        "EXIT"
                    }
                };
                out.push(Row::Process(ProcRow {
                    who: Who::from(&h),
                    op,
                    child: (op == "FORK").then_some(child),
                }));
            }
        }
    }

    /// Emits the faults still held (at the end of a trace).
    pub fn flush(&mut self, out: &mut Vec<Row>) {
        let pending: Vec<_> = self.faults.drain().map(|(_, p)| p).collect();
        let mut held: Vec<_> = pending.into_iter().map(|p| self.finish_fault(p)).collect();
        held.sort_by_key(|r| r.who.ts);
        out.extend(held.into_iter().map(Row::Fault));
    }

    /// A fault without its file's fault handler: its inode and page from the mapping around its
    /// address (anonymous memory stays inode 0).
    fn finish_fault(&mut self, p: PendingFault) -> FaultRow {
        let mut row = p.row;
        if p.file_fault_seen {
            return row;
        }
        let (pid, addr) = (row.who.pid, row.address);
        let inside = |m: &&Mapping| (m.start..m.end).contains(&addr);
        let mut found = self.maps.get(&pid).and_then(|v| v.iter().rev().find(inside)).copied();
        if found.is_none() {
            let maps = self.proc_maps.entry(pid).or_insert_with(|| {
                std::fs::read_to_string(format!("/proc/{pid}/maps"))
                    .map(|t| t.lines().filter_map(Mapping::parse).collect())
                    .unwrap_or_default()
            });
            found = maps.iter().find(inside).copied();
        }
        if let Some(m) = found.filter(|m| m.inode != 0) {
            row.inode = m.inode;
            row.dev_id = m.dev;
            row.offset = (m.offset + (addr - m.start)) / PAGE;
        }
        row
    }

    /// Forgets what is known of a process's mappings (after mmap, munmap, exec, exit).
    fn remap(&mut self, pid: u32) {
        self.proc_maps.remove(&pid);
    }

    fn ppid(&mut self, pid: u32) -> Option<u32> {
        if let Some(&p) = self.ppids.get(&pid) {
            return Some(p);
        }
        let p = crate::procfs::read_stat(pid).ok()?.ppid;
        self.ppids.insert(pid, p);
        Some(p)
    }

    fn fd(&mut self, pid: u32, fd: i64) -> Fd {
        if let Some(f) = self.fds.get(&(pid, fd)) {
            return f.clone();
        }
        // Opened before tracing began and not adopted (`Decoder::adopt`), or made by a call
        // this decoder does not follow (a pipe, a socket): ask /proc, hoping the fd is still
        // the same one.
        let f = from_proc(pid, fd);
        self.fds.insert((pid, fd), f.clone());
        f
    }

    fn advance(&mut self, pid: u32, fd: i64, by: u64) {
        if let Some(Fd { pos: Some(p), .. }) = self.fds.get_mut(&(pid, fd)) {
            *p += by;
        }
    }

    fn syscall(
        &mut self,
        h: &Header,
        nr: i64,
        ret: i64,
        a: [u64; 6],
        latency_ns: u64,
        paths: Vec<PathArg>,
    ) -> Option<FsRow> {
        let &(_, name, sys, _) = syscalls::lookup(nr)?;
        if ret < 0 {
            self.failed_syscalls += 1;
            return None;
        }
        let mut paths = paths.into_iter().map(path_text);
        let path0 = paths.next();
        let path1 = paths.next();
        let fd0 = a[0] as i32 as i64;
        let mut row = FsRow {
            who: Who::from(h),
            op: "",
            syscall: name,
            path: String::new(),
            path2: None,
            size: 0,
            flags: NO_FLAGS.into(),
            latency_ns,
            offset: None,
            fd: None,
            ret,
        };
        let pid = h.pid;
        match sys {
            Sys::Open { flags_arg } => {
                let flags = match flags_arg {
                    0xff => Some(O_CREAT_WRONLY_TRUNC),
                    0xfe => None,
                    i => Some(a[usize::from(i)]),
                };
                let path = absolute(pid, path0.unwrap_or_default(), a[0], name != "open");
                let pos = flags.map(|_| 0).filter(|_| flags.is_some_and(|f| f & O_APPEND == 0));
                self.fds.insert((pid, ret), Fd { path: path.clone(), flags, pos });
                row.op = "OPEN";
                row.path = path;
                row.flags = flags.map(open_flags).unwrap_or_else(|| NO_FLAGS.into());
                row.fd = Some(ret);
            }
            Sys::Read | Sys::Write | Sys::PRead { .. } | Sys::PWrite { .. } => {
                let f = self.fd(pid, fd0);
                let positioned = match sys {
                    Sys::PRead { offset_arg } | Sys::PWrite { offset_arg } => {
                        Some(a[usize::from(offset_arg)])
                    }
                    _ => None,
                };
                // io-tracer's names: a transfer on an O_DIRECT fd bypasses the page cache.
                let direct = f.flags.is_some_and(|fl| fl & O_DIRECT != 0);
                let read = matches!(sys, Sys::Read | Sys::PRead { .. });
                row.op = match (read, direct) {
                    (true, false) => "READ",
                    (false, false) => "WRITE",
                    (true, true) => "DIO_READ",
                    (false, true) => "DIO_WRITE",
                };
                row.offset = positioned.or(f.pos);
                if positioned.is_none() {
                    self.advance(pid, fd0, ret as u64);
                }
                row.path = f.path;
                row.flags = f.flags.map(open_flags).unwrap_or_else(|| NO_FLAGS.into());
                row.size = ret as u64;
                row.fd = Some(fd0);
            }
            Sys::Close => {
                let f = self.fds.remove(&(pid, fd0));
                row.op = "CLOSE";
                row.path =
                    f.as_ref().map(|f| f.path.clone()).unwrap_or_else(|| format!("[fd {fd0}]"));
                row.flags =
                    f.and_then(|f| f.flags).map(open_flags).unwrap_or_else(|| NO_FLAGS.into());
                row.fd = Some(fd0);
            }
            Sys::Fsync | Sys::Fdatasync => {
                let f = self.fd(pid, fd0);
                row.op = "FSYNC";
                row.path = f.path;
                row.flags = f.flags.map(open_flags).unwrap_or_else(|| NO_FLAGS.into());
                row.fd = Some(fd0);
            }
            Sys::Mmap => {
                let fd = a[4] as i32 as i64;
                let anonymous = a[3] & 0x20 != 0 || fd < 0;
                row.op = "MMAP";
                row.size = a[1];
                row.flags = format!("{},{}", prot_flags(a[2]), map_flags(a[3]));
                self.remap(pid);
                if !anonymous {
                    row.path = self.fd(pid, fd).path;
                    row.offset = Some(a[5]);
                    row.fd = Some(fd);
                    // The file's identity now, while the fd is likely still open.
                    let meta = std::fs::metadata(format!("/proc/{pid}/fd/{fd}"))
                        .or_else(|_| std::fs::metadata(&row.path));
                    if let Ok(m) = meta {
                        use std::os::unix::fs::MetadataExt;
                        let (major, minor) = (libc::major(m.dev()), libc::minor(m.dev()));
                        let start = ret as u64;
                        self.maps.entry(pid).or_default().push(Mapping {
                            start,
                            end: start.saturating_add(a[1].div_ceil(PAGE) * PAGE),
                            inode: m.ino(),
                            dev: (major << 20) | minor,
                            offset: a[5],
                        });
                    }
                }
            }
            Sys::Munmap => {
                let (start, end) = (a[0], a[0].saturating_add(a[1]));
                if let Some(v) = self.maps.get_mut(&pid) {
                    v.retain(|m| m.end <= start || m.start >= end);
                }
                self.remap(pid);
                row.op = "MUNMAP";
                row.size = a[1];
            }
            Sys::Msync => {
                row.op = "MSYNC";
                row.size = a[1];
                row.flags = bits(a[2], &[(1, "MS_ASYNC"), (2, "MS_INVALIDATE"), (4, "MS_SYNC")]);
            }
            Sys::Madvise => {
                row.op = "MADVISE";
                row.size = a[1];
                row.flags = madvise_name(a[2]);
            }
            Sys::Rename => {
                row.op = "RENAME";
                let dirfd = |i: usize| if name == "rename" { None } else { Some(a[i]) };
                row.path = absolute_at(pid, path0.unwrap_or_default(), dirfd(0));
                row.path2 = Some(absolute_at(pid, path1.unwrap_or_default(), dirfd(2)));
            }
            Sys::Unlink { flags_arg } => {
                let dir = flags_arg.is_some_and(|i| a[usize::from(i)] & 0x200 != 0);
                row.op = if dir { "RMDIR" } else { "UNLINK" };
                row.path = absolute(pid, path0.unwrap_or_default(), a[0], flags_arg.is_some());
            }
            Sys::Rmdir => {
                row.op = "RMDIR";
                row.path = absolute(pid, path0.unwrap_or_default(), 0, false);
            }
            Sys::Mkdir { mode_arg } => {
                row.op = "MKDIR";
                row.path = absolute(pid, path0.unwrap_or_default(), a[0], mode_arg == 2);
                row.flags = format!("{:o}", a[usize::from(mode_arg)] & 0o7777);
            }
            Sys::Truncate { .. } => {
                row.op = "TRUNCATE";
                row.path = match path0 {
                    Some(p) => absolute(pid, p, 0, false),
                    None => {
                        row.fd = Some(fd0);
                        self.fd(pid, fd0).path
                    }
                };
            }
            Sys::Fallocate => {
                row.op = "FALLOCATE";
                row.path = self.fd(pid, fd0).path;
                row.size = a[3];
                row.offset = Some(a[2]);
                row.flags = if a[1] == 0 {
                    NO_FLAGS.into()
                } else {
                    bits(
                        a[1],
                        &[
                            (1, "FALLOC_FL_KEEP_SIZE"),
                            (2, "FALLOC_FL_PUNCH_HOLE"),
                            (8, "FALLOC_FL_COLLAPSE_RANGE"),
                            (16, "FALLOC_FL_ZERO_RANGE"),
                            (32, "FALLOC_FL_INSERT_RANGE"),
                            (64, "FALLOC_FL_UNSHARE_RANGE"),
                        ],
                    )
                };
                row.fd = Some(fd0);
            }
            Sys::Sendfile => {
                row.op = "SENDFILE";
                row.path = "[sendfile]".into();
                row.size = ret as u64;
                let in_fd = a[1] as i32 as i64;
                if a[2] == 0 {
                    self.advance(pid, in_fd, ret as u64);
                }
                self.advance(pid, fd0, ret as u64);
            }
            Sys::Sync => {
                row.op = "SYNC";
            }
            Sys::Lseek => {
                if let Some(f) = self.fds.get_mut(&(pid, fd0)) {
                    f.pos = Some(ret as u64);
                }
                return None;
            }
            Sys::Dup => {
                let f = self.fd(pid, fd0);
                self.fds.insert((pid, ret), f);
                return None;
            }
            Sys::Fcntl => {
                const F_DUPFD: u64 = 0;
                const F_DUPFD_CLOEXEC: u64 = 1030;
                const F_SETFL: u64 = 4;
                if a[1] == F_DUPFD || a[1] == F_DUPFD_CLOEXEC {
                    let f = self.fd(pid, fd0);
                    self.fds.insert((pid, ret), f);
                } else if a[1] == F_SETFL {
                    let mut f = self.fd(pid, fd0);
                    f.flags = f.flags.map(|old| (old & !SETFL_MASK) | (a[2] & SETFL_MASK));
                    self.fds.insert((pid, fd0), f);
                }
                return None;
            }
            Sys::UringEnter => {
                // `push` moves it to the iouring stream.
                row.op = "IO_URING_ENTER";
                row.fd = Some(fd0);
                row.size = a[1];
            }
        }
        Some(row)
    }
}

/// What `/proc` says fd `fd` of `pid` is now: its path (`[fd N]` once closed) and flags.
fn from_proc(pid: u32, fd: i64) -> Fd {
    let path = std::fs::read_link(format!("/proc/{pid}/fd/{fd}"))
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_else(|_| format!("[fd {fd}]"));
    let flags = std::fs::read_to_string(format!("/proc/{pid}/fdinfo/{fd}")).ok().and_then(|t| {
        let v = t.lines().find_map(|l| l.strip_prefix("flags:"))?;
        u64::from_str_radix(v.trim(), 8).ok()
    });
    Fd { path, flags, pos: None }
}

/// `NO_FLAGS`, io-tracer's spelling of an empty flag set.
pub const NO_FLAGS: &str = "NO_FLAGS";

fn path_text(p: PathArg) -> String {
    match p {
        PathArg::Full(s) => s,
        PathArg::Truncated(s) => format!("{s}..."),
        PathArg::Unreadable => "[decode_error]".into(),
    }
}

const AT_FDCWD: u64 = (-100i64) as u64;

/// A path made absolute against the process's cwd (or the directory fd of an `*at` call).
fn absolute(pid: u32, path: String, dirfd: u64, at: bool) -> String {
    absolute_at(pid, path, at.then_some(dirfd))
}

fn absolute_at(pid: u32, path: String, dirfd: Option<u64>) -> String {
    if path.starts_with('/') || path.starts_with('[') || path.is_empty() {
        return path;
    }
    let base = match dirfd {
        Some(fd) if fd != AT_FDCWD && (fd as i32) >= 0 => format!("/proc/{pid}/fd/{}", fd as i32),
        _ => format!("/proc/{pid}/cwd"),
    };
    match std::fs::read_link(&base) {
        Ok(dir) => dir.join(path.trim_start_matches("./")).to_string_lossy().into_owned(),
        Err(_) => path,
    }
}

fn bits(v: u64, names: &[(u64, &str)]) -> String {
    let s: Vec<&str> = names.iter().filter(|(b, _)| v & b != 0).map(|(_, n)| *n).collect();
    if s.is_empty() {
        NO_FLAGS.into()
    } else {
        s.join("|")
    }
}

/// `O_*` names of open flags, io-tracer style (`O_RDONLY` when no access bit is set).
pub fn open_flags(f: u64) -> String {
    let acc = match f & O_ACCMODE {
        0 => "O_RDONLY",
        1 => "O_WRONLY",
        _ => "O_RDWR",
    };
    let rest = bits(
        f,
        &[
            (0o100, "O_CREAT"),
            (0o200, "O_EXCL"),
            (0o1000, "O_TRUNC"),
            (0o2000, "O_APPEND"),
            (0o4000, "O_NONBLOCK"),
            (0o10000, "O_DSYNC"),
            (0o40000, "O_DIRECT"),
            (0o100000, "O_LARGEFILE"),
            (0o200000, "O_DIRECTORY"),
            (0o400000, "O_NOFOLLOW"),
            (0o1000000, "O_NOATIME"),
            (0o2000000, "O_CLOEXEC"),
            (0o4000000, "O_SYNC"),
            (0o10000000, "O_PATH"),
        ],
    );
    if rest == NO_FLAGS {
        acc.into()
    } else {
        format!("{acc}|{rest}")
    }
}

fn prot_flags(p: u64) -> String {
    if p == 0 {
        return "PROT_NONE".into();
    }
    bits(p, &[(1, "PROT_READ"), (2, "PROT_WRITE"), (4, "PROT_EXEC")])
}

fn map_flags(f: u64) -> String {
    let kind = match f & 3 {
        1 => "MAP_SHARED",
        2 => "MAP_PRIVATE",
        _ => "MAP_SHARED_VALIDATE",
    };
    let rest = bits(
        f,
        &[
            (0x10, "MAP_FIXED"),
            (0x20, "MAP_ANONYMOUS"),
            (0x100, "MAP_GROWSDOWN"),
            (0x2000, "MAP_LOCKED"),
            (0x4000, "MAP_NORESERVE"),
            (0x8000, "MAP_POPULATE"),
            (0x40000, "MAP_HUGETLB"),
        ],
    );
    if rest == NO_FLAGS {
        kind.into()
    } else {
        format!("{kind}|{rest}")
    }
}

fn madvise_name(a: u64) -> String {
    match a {
        0 => "MADV_NORMAL",
        1 => "MADV_RANDOM",
        2 => "MADV_SEQUENTIAL",
        3 => "MADV_WILLNEED",
        4 => "MADV_DONTNEED",
        8 => "MADV_FREE",
        9 => "MADV_REMOVE",
        12 => "MADV_MERGEABLE",
        14 => "MADV_HUGEPAGE",
        15 => "MADV_NOHUGEPAGE",
        20 => "MADV_COLD",
        21 => "MADV_PAGEOUT",
        22 => "MADV_POPULATE_READ",
        23 => "MADV_POPULATE_WRITE",
        _ => return format!("MADV_{a}"),
    }
    .into()
}

fn block_op(rwbs: &str) -> &'static str {
    match rwbs.trim_start_matches('F').chars().next() {
        Some('R') => "read",
        Some('W') => "write",
        Some('D') => "discard",
        Some('E') => "secure_erase",
        Some('N') => "none",
        _ if rwbs.starts_with('F') => "flush",
        _ => "none",
    }
}

fn ip(a: &SockAddrs, bytes: &[u8; 16]) -> String {
    if a.family == 2 {
        std::net::Ipv4Addr::new(bytes[0], bytes[1], bytes[2], bytes[3]).to_string()
    } else {
        std::net::Ipv6Addr::from(*bytes).to_string()
    }
}

fn protocol_name(family: u16, protocol: u16) -> String {
    match (family, protocol) {
        (1, _) => "unix".into(),
        (2 | 10, 6) => "tcp".into(),
        (2 | 10, 17) => "udp".into(),
        (f, p) => format!("family{f}/proto{p}"),
    }
}

/// The io_uring opcode's name (`IORING_OP_*` without the prefix).
pub fn uring_op(op: u32) -> String {
    const NAMES: [&str; 58] = [
        "NOP",
        "READV",
        "WRITEV",
        "FSYNC",
        "READ_FIXED",
        "WRITE_FIXED",
        "POLL_ADD",
        "POLL_REMOVE",
        "SYNC_FILE_RANGE",
        "SENDMSG",
        "RECVMSG",
        "TIMEOUT",
        "TIMEOUT_REMOVE",
        "ACCEPT",
        "ASYNC_CANCEL",
        "LINK_TIMEOUT",
        "CONNECT",
        "FALLOCATE",
        "OPENAT",
        "CLOSE",
        "FILES_UPDATE",
        "STATX",
        "READ",
        "WRITE",
        "FADVISE",
        "MADVISE",
        "SEND",
        "RECV",
        "OPENAT2",
        "EPOLL_CTL",
        "SPLICE",
        "PROVIDE_BUFFERS",
        "REMOVE_BUFFERS",
        "TEE",
        "SHUTDOWN",
        "RENAMEAT",
        "UNLINKAT",
        "MKDIRAT",
        "SYMLINKAT",
        "LINKAT",
        "MSG_RING",
        "FSETXATTR",
        "SETXATTR",
        "FGETXATTR",
        "GETXATTR",
        "SOCKET",
        "URING_CMD",
        "SEND_ZC",
        "SENDMSG_ZC",
        "READ_MULTISHOT",
        "WAITID",
        "FUTEX_WAIT",
        "FUTEX_WAKE",
        "FUTEX_WAITV",
        "FIXED_FD_INSTALL",
        "FTRUNCATE",
        "BIND",
        "LISTEN",
    ];
    NAMES.get(op as usize).map(|s| s.to_string()).unwrap_or_else(|| format!("OP_{op}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(tid: u32, ts: u64) -> Header {
        Header { pid: 7, tid, cpu: 0, ts, comm: "t".into(), clk: None }
    }

    fn sys(nr: i64, ret: i64, args: [u64; 6], paths: Vec<PathArg>) -> Raw {
        Raw::Syscall { h: h(7, 1), nr, ret, args, latency_ns: 5, paths }
    }

    /// A write through fd `fd` of this process, as the collector would decode it.
    #[cfg(target_arch = "x86_64")]
    fn own_write(d: &mut Decoder, fd: i32) -> String {
        let pid = std::process::id();
        let h = Header { pid, tid: pid, cpu: 0, ts: 1, comm: "t".into(), clk: None };
        let raw = Raw::Syscall {
            h,
            nr: 1,
            ret: 3,
            args: [fd as u64, 0, 3, 0, 0, 0],
            latency_ns: 5,
            paths: vec![],
        };
        let mut out = Vec::new();
        d.push(raw, &mut out);
        match &out[..] {
            [Row::Fs(f)] => f.path.clone(),
            _ => panic!("{out:?}"),
        }
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn fds_adopted_before_the_process_runs_keep_their_file() {
        use std::os::fd::AsRawFd;
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        let (fa, fb) = (std::fs::File::create(&a).unwrap(), std::fs::File::create(&b).unwrap());
        let spare = std::fs::File::create(dir.path().join("c")).unwrap();
        // The number the process will reuse, and the file it first held.
        let fd = spare.as_raw_fd();
        // SAFETY: dup2 onto a descriptor this test owns (`spare`).
        let put = |from: &std::fs::File| unsafe { libc::dup2(from.as_raw_fd(), fd) };
        assert_eq!(put(&fa), fd);
        let mut adopted = Decoder::new();
        adopted.adopt(std::process::id());
        let mut lazy = Decoder::new();
        // The process puts another file on that number before the collector reads its write
        // (a shell saving its stdout, then `> file`).
        assert_eq!(put(&fb), fd);
        assert_eq!(own_write(&mut adopted, fd), a.to_str().unwrap());
        // Without adopting, the number is looked up when the record is read: the other file.
        assert_eq!(own_write(&mut lazy, fd), b.to_str().unwrap());
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn follows_fds_and_offsets() {
        let mut d = Decoder::new();
        let mut out = Vec::new();
        let flags = 0o100 | 0o1 | 0o1000 | 0o2000000;
        d.push(
            sys(257, 5, [AT_FDCWD, 0, flags, 0o644, 0, 0], vec![PathArg::Full("/x/f".into())]),
            &mut out,
        );
        d.push(sys(1, 4096, [5, 0, 4096, 0, 0, 0], vec![]), &mut out);
        d.push(sys(1, 100, [5, 0, 100, 0, 0, 0], vec![]), &mut out);
        d.push(sys(18, 10, [5, 0, 10, 77, 0, 0], vec![]), &mut out);
        d.push(sys(1, -9, [5, 0, 10, 0, 0, 0], vec![]), &mut out);
        d.push(sys(3, 0, [5, 0, 0, 0, 0, 0], vec![]), &mut out);
        let rows: Vec<_> = out
            .iter()
            .map(|r| match r {
                Row::Fs(f) => (f.op, f.path.as_str(), f.size, f.offset),
                _ => panic!(),
            })
            .collect();
        assert_eq!(
            rows,
            vec![
                ("OPEN", "/x/f", 0, None),
                ("WRITE", "/x/f", 4096, Some(0)),
                ("WRITE", "/x/f", 100, Some(4096)),
                ("WRITE", "/x/f", 10, Some(77)),
                ("CLOSE", "/x/f", 0, None),
            ]
        );
        let Row::Fs(open) = &out[0] else { panic!() };
        assert_eq!(open.flags, "O_WRONLY|O_CREAT|O_TRUNC|O_CLOEXEC");
        assert_eq!(d.failed_syscalls, 1);
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn transfers_on_an_o_direct_fd_are_dio() {
        let mut d = Decoder::new();
        let mut out = Vec::new();
        let open = |fd, flags| {
            sys(257, fd, [AT_FDCWD, 0, flags, 0, 0, 0], vec![PathArg::Full("/x/d".into())])
        };
        d.push(open(5, O_DIRECT), &mut out);
        d.push(sys(0, 4096, [5, 0, 4096, 0, 0, 0], vec![]), &mut out);
        d.push(sys(17, 4096, [5, 0, 4096, 8192, 0, 0], vec![]), &mut out);
        d.push(open(6, 2), &mut out);
        d.push(sys(1, 512, [6, 0, 512, 0, 0, 0], vec![]), &mut out);
        // fcntl(6, F_SETFL, O_DIRECT): from now on direct.
        d.push(sys(72, 0, [6, 4, O_DIRECT, 0, 0, 0], vec![]), &mut out);
        d.push(sys(1, 512, [6, 0, 512, 0, 0, 0], vec![]), &mut out);
        let ops: Vec<_> = out
            .iter()
            .filter_map(|r| match r {
                Row::Fs(f) if f.op != "OPEN" => Some((f.op, f.offset)),
                _ => None,
            })
            .collect();
        assert_eq!(
            ops,
            vec![
                ("DIO_READ", Some(0)),
                ("DIO_READ", Some(8192)),
                ("WRITE", Some(0)),
                ("DIO_WRITE", Some(512))
            ]
        );
    }

    #[test]
    fn a_fault_that_adds_a_page_after_a_file_fault_is_major() {
        let mut d = Decoder::new();
        let mut out = Vec::new();
        d.push(Raw::Fault { h: h(9, 1), address: 0x1000, ip: 0, error_code: 2 }, &mut out);
        let cache = |op, ts| Raw::Cache { h: h(9, ts), ino: 11, index: 3, dev: 5, op, pages: 1 };
        d.push(cache(CacheOp::Fault, 2), &mut out);
        d.push(cache(CacheOp::Add, 3), &mut out);
        d.push(Raw::Fault { h: h(9, 4), address: 0x2000, ip: 0, error_code: 0 }, &mut out);
        d.flush(&mut out);
        let faults: Vec<_> = out
            .iter()
            .filter_map(|r| match r {
                Row::Fault(f) => Some((f.fault_type, f.severity, f.inode, f.offset, f.address)),
                _ => None,
            })
            .collect();
        assert_eq!(
            faults,
            vec![("WRITE", "MAJOR", 11, 3, 0x1000), ("READ", "MINOR", 0, 0, 0x2000)]
        );
        assert!(out.iter().any(|r| matches!(r, Row::Cache(c) if c.event == "MISS")));
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn a_fault_without_the_file_handler_gets_its_inode_from_the_mapping() {
        use std::os::fd::AsRawFd;
        use std::os::unix::fs::MetadataExt;
        let f = tempfile::tempfile().expect("file");
        let ino = f.metadata().expect("meta").ino();
        let me = std::process::id();
        let hd = |ts| Header { pid: me, tid: me, cpu: 0, ts, comm: "t".into(), clk: None };
        let mut d = Decoder::new();
        let mut out = Vec::new();
        let base = 0x7000_0000u64;
        // mmap(NULL, 8192, PROT_READ, MAP_SHARED, fd, 4096) = base
        let args = [0, 8192, 1, 1, f.as_raw_fd() as u64, 4096];
        let mmap =
            Raw::Syscall { h: hd(1), nr: 9, ret: base as i64, args, latency_ns: 1, paths: vec![] };
        d.push(mmap, &mut out);
        // A read fault in the second page, resolved from the page cache (no file fault event),
        // and one in anonymous memory far away.
        d.push(Raw::Fault { h: hd(2), address: base + 4096 + 16, ip: 0, error_code: 0 }, &mut out);
        d.push(Raw::Fault { h: hd(3), address: 0x10, ip: 0, error_code: 0 }, &mut out);
        d.flush(&mut out);
        let faults: Vec<_> = out
            .iter()
            .filter_map(|r| match r {
                Row::Fault(f) => Some((f.inode, f.offset, f.severity)),
                _ => None,
            })
            .collect();
        assert_eq!(faults, vec![(ino, 2, "MINOR"), (0, 0, "MINOR")]);
        assert_eq!(
            Mapping::parse("7f00-8f00 r--p 00002000 fd:01 1234 /usr/lib/x.so"),
            Some(Mapping {
                start: 0x7f00,
                end: 0x8f00,
                inode: 1234,
                dev: (0xfd << 20) | 1,
                offset: 0x2000
            })
        );
    }

    #[test]
    fn names() {
        assert_eq!(open_flags(0), "O_RDONLY");
        assert_eq!(map_flags(0x22), "MAP_PRIVATE|MAP_ANONYMOUS");
        assert_eq!(block_op("FWS"), "write");
        assert_eq!(block_op("FF"), "flush");
        assert_eq!(uring_op(22), "READ");
    }
}
