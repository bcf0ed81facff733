//! The records the BPF programs put in the ring buffer, decoded from bytes.
//!
//! The layouts are the C structs of `bpf/io.bpf.c` (native endianness, natural alignment). Each
//! record starts with a header whose `kind` says which one it is; a record whose length does not
//! match its kind is reported as [`DecodeError`], never read past its end.

/// Longest path the BPF programs copy, including the terminating NUL.
pub const PATH_LEN: usize = 256;
/// Syscall numbers at or above this are not classified (the `sysclass` map's size).
pub const MAX_SYSCALL: usize = 512;

/// The event streams, in io-tracer's directory order; the index of each is its lost-event counter.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Stream {
    /// File operations (`fs/`).
    Fs = 0,
    /// Block requests (`ds/`).
    Block = 1,
    /// Page-cache events (`cache/`).
    Cache = 2,
    /// Network send/receive (`nw/`).
    Net = 3,
    /// User page faults (`pagefault/`).
    Fault = 4,
    /// io_uring submissions and completions (`iouring/`).
    Uring = 5,
    /// Process fork/exec/exit (`process/` snapshots are taken when they happen).
    Process = 6,
}

impl Stream {
    /// Every stream.
    pub const ALL: [Stream; 7] = [
        Stream::Fs,
        Stream::Block,
        Stream::Cache,
        Stream::Net,
        Stream::Fault,
        Stream::Uring,
        Stream::Process,
    ];

    /// The stream's io-tracer directory name (`fs`, `ds`, ...).
    pub fn dir(self) -> &'static str {
        match self {
            Stream::Fs => "fs",
            Stream::Block => "ds",
            Stream::Cache => "cache",
            Stream::Net => "nw",
            Stream::Fault => "pagefault",
            Stream::Uring => "iouring",
            Stream::Process => "process",
        }
    }
}

/// The common header of every record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Header {
    /// Process id (tgid).
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
    /// CPU the program ran on.
    pub cpu: u32,
    /// `CLOCK_MONOTONIC` ns: the syscall's entry for syscalls, the completion for block requests
    /// and io_uring, the tracepoint's firing otherwise.
    pub ts: u64,
    /// The task's `comm`.
    pub comm: String,
    /// The simulator's cycle at `ts`, read by the BPF program from the simulator's `SimClock`
    /// when the record was made in a thread of the simulator process (see
    /// `IoTracer::start_in`); `None` otherwise (other processes, completions, no simulator).
    pub clk: Option<u64>,
}

/// A path argument as the BPF program read it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PathArg {
    /// The whole path.
    Full(String),
    /// The first `PATH_LEN - 1` bytes of a longer path.
    Truncated(String),
    /// The user pointer could not be read.
    Unreadable,
}

/// One decoded ring-buffer record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Raw {
    /// A traced syscall, emitted when it returned.
    Syscall {
        /// Header (`ts` = entry).
        h: Header,
        /// Syscall number.
        nr: i64,
        /// Return value.
        ret: i64,
        /// Arguments.
        args: [u64; 6],
        /// Entry to exit, ns.
        latency_ns: u64,
        /// Path arguments, in the order of the syscall's class.
        paths: Vec<PathArg>,
    },
    /// A block request, emitted at completion.
    Block {
        /// Header of the submitter (`ts` = completion).
        h: Header,
        /// Kernel `dev_t` (major << 20 | minor).
        dev: u32,
        /// Sectors.
        nr_sector: u32,
        /// First sector.
        sector: u64,
        /// Inserted into the scheduler queue, ns (0 = not seen).
        insert_ts: u64,
        /// Issued to the driver, ns (0 = not seen).
        issue_ts: u64,
        /// Completion error (0 = success).
        error: i32,
        /// The kernel's `rwbs` string (`W`, `WS`, `R`, `FWS`, ...).
        rwbs: String,
    },
    /// A page-cache tracepoint.
    Cache {
        /// Header.
        h: Header,
        /// Inode.
        ino: u64,
        /// Page index.
        index: u64,
        /// Superblock `dev_t` (0 when the tracepoint has none).
        dev: u32,
        /// What happened.
        op: CacheOp,
        /// Pages (folio size).
        pages: u32,
    },
    /// Bytes sent or received on a socket.
    Net {
        /// Header.
        h: Header,
        /// Kernel socket pointer (identity only).
        sk: u64,
        /// Address family.
        family: u16,
        /// IP protocol.
        protocol: u16,
        /// Bytes.
        size: i32,
        /// Received (true) or sent.
        receive: bool,
        /// Addresses, when the socket's TCP state changes were seen.
        addrs: Option<SockAddrs>,
    },
    /// A user page fault (`exceptions:page_fault_user`).
    Fault {
        /// Header.
        h: Header,
        /// Faulting address.
        address: u64,
        /// Instruction pointer.
        ip: u64,
        /// x86 error code (bit 1 = write).
        error_code: u64,
    },
    /// An io_uring request, emitted at completion.
    Uring {
        /// Header of the submitter (`ts` = completion).
        h: Header,
        /// The request's user_data.
        user_data: u64,
        /// Submission time, ns.
        submit_ts: u64,
        /// `IORING_OP_*`.
        opcode: u32,
        /// Result.
        res: i32,
    },
    /// A process of the tree forked, exec'd or exited.
    Process {
        /// Header.
        h: Header,
        /// What happened.
        op: ProcOp,
        /// The new process (fork).
        child: u32,
    },
}

/// Socket addresses from `sock:inet_sock_set_state`, local first.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SockAddrs {
    /// Address family of the addresses.
    pub family: u16,
    /// Local port.
    pub sport: u16,
    /// Remote port.
    pub dport: u16,
    /// Local address (4 or 16 bytes used).
    pub saddr: [u8; 16],
    /// Remote address.
    pub daddr: [u8; 16],
}

/// Page-cache tracepoints.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CacheOp {
    /// A page was added (a miss: read from storage or created by a write).
    Add,
    /// A page was removed.
    Evict,
    /// A page was dirtied.
    Dirty,
    /// A file-backed page fault went through the page cache.
    Fault,
}

/// Process lifecycle tracepoints.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProcOp {
    /// `sched_process_fork`.
    Fork,
    /// `sched_process_exit` of the whole process.
    Exit,
    /// `sched_process_exec`.
    Exec,
}

/// A record that cannot be decoded.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("ring buffer record of {len} bytes: {what}")]
pub struct DecodeError {
    /// Record length.
    pub len: usize,
    /// What is wrong.
    pub what: String,
}

const HDR: usize = 48;
/// [`Header::clk`] when the BPF program had no cycle to read.
const NO_CLK: u64 = u64::MAX;

struct Rd<'a>(&'a [u8]);

impl Rd<'_> {
    fn bytes<const N: usize>(&self, off: usize) -> [u8; N] {
        let mut out = [0u8; N];
        out.copy_from_slice(&self.0[off..off + N]);
        out
    }
    fn u16(&self, off: usize) -> u16 {
        u16::from_ne_bytes(self.bytes(off))
    }
    fn u32(&self, off: usize) -> u32 {
        u32::from_ne_bytes(self.bytes(off))
    }
    fn i32(&self, off: usize) -> i32 {
        i32::from_ne_bytes(self.bytes(off))
    }
    fn u64(&self, off: usize) -> u64 {
        u64::from_ne_bytes(self.bytes(off))
    }
    fn i64(&self, off: usize) -> i64 {
        i64::from_ne_bytes(self.bytes(off))
    }
    fn cstr(&self, off: usize, len: usize) -> String {
        let b = &self.0[off..off + len];
        let end = b.iter().position(|&c| c == 0).unwrap_or(len);
        String::from_utf8_lossy(&b[..end]).into_owned()
    }
    fn header(&self) -> Header {
        Header {
            pid: self.u32(4),
            tid: self.u32(8),
            cpu: self.u32(12),
            ts: self.u64(16),
            comm: self.cstr(24, 16),
            clk: Some(self.u64(40)).filter(|&c| c != NO_CLK),
        }
    }
}

impl Raw {
    /// The record's header.
    pub fn header(&self) -> &Header {
        match self {
            Raw::Syscall { h, .. }
            | Raw::Block { h, .. }
            | Raw::Cache { h, .. }
            | Raw::Net { h, .. }
            | Raw::Fault { h, .. }
            | Raw::Uring { h, .. }
            | Raw::Process { h, .. } => h,
        }
    }

    /// Decodes one ring-buffer record.
    pub fn decode(b: &[u8]) -> Result<Raw, DecodeError> {
        let err = |what: String| DecodeError { len: b.len(), what };
        if b.len() < HDR {
            return Err(err("shorter than the header".into()));
        }
        let r = Rd(b);
        let kind = r.u32(0);
        let need = match kind {
            1 => HDR + 80,
            2 => HDR + 80 + 2 * PATH_LEN,
            3 => HDR + 48,
            4 => HDR + 32,
            5 => HDR + 64,
            6 => HDR + 24,
            7 => HDR + 32,
            8 => HDR + 8,
            k => return Err(err(format!("unknown kind {k}"))),
        };
        if b.len() < need {
            return Err(err(format!("kind {kind} needs {need} bytes")));
        }
        let h = r.header();
        Ok(match kind {
            1 | 2 => {
                let mut args = [0u64; 6];
                for (i, a) in args.iter_mut().enumerate() {
                    *a = r.u64(HDR + 16 + 8 * i);
                }
                let lens = [r.u16(HDR + 72), r.u16(HDR + 74)];
                let mut paths = Vec::new();
                if kind == 2 {
                    for (i, &len) in lens.iter().enumerate() {
                        let off = HDR + 80 + i * PATH_LEN;
                        paths.push(match len {
                            0 => continue,
                            0xffff => PathArg::Unreadable,
                            n if n as usize >= PATH_LEN => {
                                PathArg::Truncated(r.cstr(off, PATH_LEN))
                            }
                            _ => PathArg::Full(r.cstr(off, PATH_LEN)),
                        });
                    }
                }
                Raw::Syscall {
                    h,
                    nr: r.i64(HDR),
                    ret: r.i64(HDR + 8),
                    args,
                    latency_ns: r.u64(HDR + 64),
                    paths,
                }
            }
            3 => Raw::Block {
                h,
                dev: r.u32(HDR),
                nr_sector: r.u32(HDR + 4),
                sector: r.u64(HDR + 8),
                insert_ts: r.u64(HDR + 16),
                issue_ts: r.u64(HDR + 24),
                error: r.i32(HDR + 32),
                rwbs: r.cstr(HDR + 36, 12),
            },
            4 => Raw::Cache {
                h,
                ino: r.u64(HDR),
                index: r.u64(HDR + 8),
                dev: r.u32(HDR + 16),
                op: match r.u32(HDR + 20) {
                    1 => CacheOp::Add,
                    2 => CacheOp::Evict,
                    3 => CacheOp::Dirty,
                    4 => CacheOp::Fault,
                    o => return Err(err(format!("unknown cache op {o}"))),
                },
                pages: r.u32(HDR + 24),
            },
            5 => Raw::Net {
                h,
                sk: r.u64(HDR),
                family: r.u16(HDR + 8),
                protocol: r.u16(HDR + 10),
                size: r.i32(HDR + 12),
                receive: r.u32(HDR + 16) == 1,
                addrs: (r.u32(HDR + 20) == 1).then(|| SockAddrs {
                    family: r.u16(HDR + 24),
                    sport: r.u16(HDR + 26),
                    dport: r.u16(HDR + 28),
                    saddr: r.bytes(HDR + 32),
                    daddr: r.bytes(HDR + 48),
                }),
            },
            6 => Raw::Fault {
                h,
                address: r.u64(HDR),
                ip: r.u64(HDR + 8),
                error_code: r.u64(HDR + 16),
            },
            7 => Raw::Uring {
                h,
                user_data: r.u64(HDR),
                submit_ts: r.u64(HDR + 8),
                opcode: r.u32(HDR + 16),
                res: r.i32(HDR + 20),
            },
            _ => Raw::Process {
                h,
                op: match r.u32(HDR) {
                    1 => ProcOp::Fork,
                    2 => ProcOp::Exit,
                    3 => ProcOp::Exec,
                    o => return Err(err(format!("unknown process op {o}"))),
                },
                child: r.u32(HDR + 4),
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(kind: u32, len: usize) -> Vec<u8> {
        let mut b = vec![0u8; len];
        b[0..4].copy_from_slice(&kind.to_ne_bytes());
        b[4..8].copy_from_slice(&42u32.to_ne_bytes());
        b[8..12].copy_from_slice(&43u32.to_ne_bytes());
        b[16..24].copy_from_slice(&1000u64.to_ne_bytes());
        b[24..28].copy_from_slice(b"sim\0");
        b[40..48].copy_from_slice(&NO_CLK.to_ne_bytes());
        b
    }

    #[test]
    fn decodes_a_syscall_with_a_truncated_and_an_unreadable_path() {
        let mut b = header(2, 128 + 2 * PATH_LEN);
        b[40..48].copy_from_slice(&777u64.to_ne_bytes());
        b[48..56].copy_from_slice(&257i64.to_ne_bytes());
        b[56..64].copy_from_slice(&3i64.to_ne_bytes());
        b[120..122].copy_from_slice(&(PATH_LEN as u16).to_ne_bytes());
        b[122..124].copy_from_slice(&0xffffu16.to_ne_bytes());
        for c in &mut b[128..128 + PATH_LEN - 1] {
            *c = b'a';
        }
        let Raw::Syscall { h, nr, ret, paths, .. } = Raw::decode(&b).unwrap() else { panic!() };
        assert_eq!((h.pid, h.tid, h.ts, h.comm.as_str()), (42, 43, 1000, "sim"));
        assert_eq!(h.clk, Some(777), "the simulator's cycle read in the kernel");
        assert_eq!((nr, ret), (257, 3));
        assert_eq!(paths, vec![PathArg::Truncated("a".repeat(PATH_LEN - 1)), PathArg::Unreadable]);
    }

    #[test]
    fn short_and_unknown_records_are_errors() {
        assert!(Raw::decode(&[0u8; 10]).unwrap_err().what.contains("header"));
        assert!(Raw::decode(&header(99, 64)).unwrap_err().what.contains("unknown kind 99"));
        assert!(Raw::decode(&header(3, 64)).unwrap_err().what.contains("needs 96"));
        let mut b = header(8, 56);
        b[48..52].copy_from_slice(&1u32.to_ne_bytes()); // fork
        let Raw::Process { h, .. } = Raw::decode(&b).unwrap() else { panic!() };
        assert_eq!(h.clk, None, "no cycle read");
    }
}
