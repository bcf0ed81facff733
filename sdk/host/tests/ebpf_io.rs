//! The eBPF I/O collector against a process whose I/O is known exactly.
//!
//! Needs root (or CAP_BPF + CAP_PERFMON) and tracefs; elsewhere the collector test prints
//! `unavailable: <reason>` and passes (scripts/test.d/30-ebpf.sh makes that line visible). The
//! unprivileged test always runs: it drops root in a child and expects a clear refusal.
#![cfg(all(feature = "ebpf", target_os = "linux"))]

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::{Command, Stdio};

use jets_host::ebpf::decode::{FsRow, Row};
use jets_host::ebpf::{capability, IoTraceConfig, IoTraceError, IoTracer};

const CHILD_ENV: &str = "JETS_EBPF_TEST_CHILD";
const UNPRIV_ENV: &str = "JETS_EBPF_TEST_UNPRIV";
const CAPS_ENV: &str = "JETS_EBPF_TEST_CAPS";
const BLOCKS: usize = 4;
const BLOCK: usize = 4096;

fn harness(test: &str) -> Command {
    let mut c = Command::new(std::env::current_exe().unwrap());
    c.args([test, "--exact", "--nocapture", "--test-threads=1"]);
    c
}

/// The traced workload; runs only in the child started by `collector_reports_known_io`. Waits for
/// a line on stdin (the collector is attached by then), does its I/O, prints what the parent
/// needs to check (ports, mapping address, inode) as `key=value` lines.
#[test]
fn child_workload() {
    let Ok(dir) = std::env::var(CHILD_ENV) else { return };
    let dir = Path::new(&dir);
    let mut go = String::new();
    std::io::stdin().read_line(&mut go).unwrap();
    let data = dir.join("data.bin");
    let block = vec![0xabu8; BLOCK];
    {
        let mut f = std::fs::File::create(&data).unwrap();
        for _ in 0..BLOCKS {
            f.write_all(&block).unwrap();
        }
        f.sync_all().unwrap();
        println!("data_inode={}", f.metadata().unwrap().ino());
    }
    {
        let mut f = std::fs::File::open(&data).unwrap();
        let mut buf = vec![0u8; BLOCK];
        for _ in 0..BLOCKS {
            f.read_exact(&mut buf).unwrap();
        }
    }
    let moved = dir.join("moved.bin");
    std::fs::rename(&data, &moved).unwrap();
    std::fs::remove_file(&moved).unwrap();

    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let mut client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    let (mut server, _) = listener.accept().unwrap();
    client.write_all(&[1u8; 100]).unwrap();
    let mut got = [0u8; 100];
    server.read_exact(&mut got).unwrap();
    server.write_all(&[2u8; 50]).unwrap();
    let mut back = [0u8; 50];
    client.read_exact(&mut back).unwrap();
    println!("client_port={}", client.local_addr().unwrap().port());
    println!("server_port={}", listener.local_addr().unwrap().port());

    let map = dir.join("map.bin");
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&map)
        .unwrap();
    f.set_len(2 * BLOCK as u64).unwrap();
    use std::os::fd::AsRawFd;
    // SAFETY: a fresh shared mapping of a file we own, touched within its length, then unmapped.
    let addr = unsafe {
        let p = libc::mmap(
            std::ptr::null_mut(),
            2 * BLOCK,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            f.as_raw_fd(),
            0,
        );
        assert_ne!(p, libc::MAP_FAILED);
        *(p as *mut u8) = 1;
        *(p as *mut u8).add(BLOCK) = 2;
        libc::munmap(p, 2 * BLOCK);
        p as usize
    };
    println!("map_addr={addr}");
    // The same pages, cached now, mapped again read-only: the kernel maps them on the read fault
    // without calling the file's fault handler (fault-around), so the inode comes from the mapping.
    // SAFETY: a fresh private read-only mapping of a file we own, read within its length.
    let ro = unsafe {
        let p = libc::mmap(
            std::ptr::null_mut(),
            2 * BLOCK,
            libc::PROT_READ,
            libc::MAP_PRIVATE,
            f.as_raw_fd(),
            0,
        );
        assert_ne!(p, libc::MAP_FAILED);
        let v = std::ptr::read_volatile((p as *const u8).add(BLOCK));
        assert_eq!(v, 2);
        libc::munmap(p, 2 * BLOCK);
        p as usize
    };
    println!("ro_addr={ro}");
    println!("map_inode={}", f.metadata().unwrap().ino());
    println!("uring_res={}", uring_read(f.as_raw_fd(), BLOCK));
}

/// One `IORING_OP_READ` of `len` bytes at offset 0 of `fd` through a raw io_uring (no crate: the
/// kernel ABI is small); returns the completion's result.
fn uring_read(fd: i32, len: usize) -> i32 {
    use std::sync::atomic::{AtomicU32, Ordering};
    #[repr(C)]
    #[derive(Default)]
    struct Offsets {
        head: u32,
        tail: u32,
        ring_mask: u32,
        ring_entries: u32,
        a: u32,
        b: u32,
        c: u32,
        resv: u32,
        user_addr: u64,
    }
    #[repr(C)]
    #[derive(Default)]
    struct Params {
        sq_entries: u32,
        cq_entries: u32,
        flags: u32,
        sq_thread_cpu: u32,
        sq_thread_idle: u32,
        features: u32,
        wq_fd: u32,
        resv: [u32; 3],
        sq_off: Offsets, // a = flags, b = dropped, c = array
        cq_off: Offsets, // a = overflow, b = cqes, c = flags
    }
    const IORING_OP_READ: u8 = 22;
    const IORING_FEAT_SINGLE_MMAP: u32 = 1;
    const IORING_ENTER_GETEVENTS: u32 = 1;
    const IORING_OFF_SQES: i64 = 0x1000_0000;
    let mut p = Params::default();
    let mut buf = vec![0u8; len];
    // SAFETY: the io_uring ABI as documented in io_uring_setup(2)/io_uring_enter(2): the rings are
    // mapped with the sizes the kernel returned and accessed within them; `buf` outlives the read.
    unsafe {
        let ring = libc::syscall(libc::SYS_io_uring_setup, 4u32, &mut p as *mut Params) as i32;
        assert!(ring >= 0, "io_uring_setup: {}", std::io::Error::last_os_error());
        assert!(p.features & IORING_FEAT_SINGLE_MMAP != 0);
        let size = (p.sq_off.c as usize + p.sq_entries as usize * 4)
            .max(p.cq_off.b as usize + p.cq_entries as usize * 16);
        let prot = libc::PROT_READ | libc::PROT_WRITE;
        let flags = libc::MAP_SHARED | libc::MAP_POPULATE;
        let rings = libc::mmap(std::ptr::null_mut(), size, prot, flags, ring, 0) as *mut u8;
        let sqes_len = p.sq_entries as usize * 64;
        let sqes = libc::mmap(std::ptr::null_mut(), sqes_len, prot, flags, ring, IORING_OFF_SQES);
        assert!(rings as *mut libc::c_void != libc::MAP_FAILED && sqes != libc::MAP_FAILED);
        let sqe = sqes as *mut u8;
        std::ptr::write_bytes(sqe, 0, 64);
        *sqe = IORING_OP_READ;
        *(sqe.add(4) as *mut i32) = fd;
        *(sqe.add(16) as *mut u64) = buf.as_mut_ptr() as u64;
        *(sqe.add(24) as *mut u32) = len as u32;
        *(sqe.add(32) as *mut u64) = 0xfeed;
        let sq_tail = &*(rings.add(p.sq_off.tail as usize) as *const AtomicU32);
        let sq_mask = *(rings.add(p.sq_off.ring_mask as usize) as *const u32);
        let t = sq_tail.load(Ordering::Acquire);
        *(rings.add(p.sq_off.c as usize) as *mut u32).add((t & sq_mask) as usize) = 0;
        sq_tail.store(t.wrapping_add(1), Ordering::Release);
        let n = libc::syscall(
            libc::SYS_io_uring_enter,
            ring,
            1u32,
            1u32,
            IORING_ENTER_GETEVENTS,
            std::ptr::null::<u8>(),
            0usize,
        );
        assert_eq!(n, 1, "io_uring_enter: {}", std::io::Error::last_os_error());
        let cq_head = &*(rings.add(p.cq_off.head as usize) as *const AtomicU32);
        let cq_mask = *(rings.add(p.cq_off.ring_mask as usize) as *const u32);
        let h = cq_head.load(Ordering::Acquire);
        let cqe = rings.add(p.cq_off.b as usize + (h & cq_mask) as usize * 16);
        assert_eq!(*(cqe as *const u64), 0xfeed);
        let res = *(cqe.add(8) as *const i32);
        cq_head.store(h.wrapping_add(1), Ordering::Release);
        libc::munmap(sqes, sqes_len);
        libc::munmap(rings.cast(), size);
        libc::close(ring);
        res
    }
}

fn fs_rows(rows: &[Row], dir: &Path) -> Vec<FsRow> {
    let d = dir.to_string_lossy().to_string();
    rows.iter()
        .filter_map(|r| match r {
            Row::Fs(f) if f.path.starts_with(&d) => Some(f.clone()),
            _ => None,
        })
        .collect()
}

#[test]
fn collector_reports_known_io() {
    if [CHILD_ENV, UNPRIV_ENV, CAPS_ENV].iter().any(|v| std::env::var(v).is_ok()) {
        return;
    }
    let cap = capability();
    if !cap.available {
        println!("unavailable: {}", cap.reason.unwrap_or_default());
        return;
    }
    // Under /var/tmp rather than /tmp, which may be tmpfs (no block requests).
    let tmp = tempfile::Builder::new().prefix("jets-ebpf-").tempdir_in("/var/tmp").unwrap();
    let dir = tmp.path().canonicalize().unwrap();
    let out_dir = tempfile::tempdir().unwrap();
    let mut child = harness("child_workload")
        .env(CHILD_ENV, &dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let tracer = match IoTracer::start(
        child.id(),
        IoTraceConfig::default().keep_rows(true).output_dir(out_dir.path()),
    ) {
        Ok(t) => t,
        Err(IoTraceError::Unavailable(why)) => {
            println!("unavailable: {why}");
            let _ = child.kill();
            let _ = child.wait();
            return;
        }
        Err(e) => panic!("{e}"),
    };
    child.stdin.take().unwrap().write_all(b"go\n").unwrap();
    let mut vars = std::collections::HashMap::new();
    for line in BufReader::new(child.stdout.take().unwrap()).lines() {
        // The last word: libtest may print `test name ... ` before the first line.
        let line = line.unwrap();
        if let Some((k, v)) = line.split_whitespace().last().and_then(|w| w.split_once('=')) {
            vars.insert(k.to_string(), v.to_string());
        }
    }
    assert!(child.wait().unwrap().success());
    let report = tracer.stop().unwrap();
    assert_eq!(report.lost, [0; 7], "no event may be lost");
    assert_eq!(report.decode_errors, 0);
    let var = |k: &str| -> u64 { vars[k].parse().unwrap() };

    // File operations: exactly these, in this order, with these sizes and offsets.
    let p = |name: &str| dir.join(name).to_string_lossy().to_string();
    let got: Vec<(&str, String, u64, Option<u64>)> = fs_rows(&report.kept, &dir)
        .into_iter()
        .map(|r| {
            let path = match r.path2 {
                Some(p2) => format!("{}->{p2}", r.path),
                None => r.path,
            };
            (r.op, path, r.size, r.offset)
        })
        .collect();
    let b = BLOCK as u64;
    let mut want = vec![("OPEN", p("data.bin"), 0, None)];
    want.extend((0..BLOCKS as u64).map(|i| ("WRITE", p("data.bin"), b, Some(i * b))));
    want.push(("FSYNC", p("data.bin"), 0, None));
    want.push(("CLOSE", p("data.bin"), 0, None));
    want.push(("OPEN", p("data.bin"), 0, None));
    want.extend((0..BLOCKS as u64).map(|i| ("READ", p("data.bin"), b, Some(i * b))));
    want.push(("CLOSE", p("data.bin"), 0, None));
    want.push(("RENAME", format!("{}->{}", p("data.bin"), p("moved.bin")), 0, None));
    want.push(("UNLINK", p("moved.bin"), 0, None));
    want.push(("OPEN", p("map.bin"), 0, None));
    want.push(("TRUNCATE", p("map.bin"), 0, None));
    want.push(("MMAP", p("map.bin"), 2 * b, Some(0)));
    want.push(("MMAP", p("map.bin"), 2 * b, Some(0)));
    want.push(("CLOSE", p("map.bin"), 0, None));
    assert_eq!(got, want);
    let fs = fs_rows(&report.kept, &dir);
    assert_eq!(fs[0].flags, "O_WRONLY|O_CREAT|O_TRUNC|O_CLOEXEC");
    assert_eq!(fs[7].flags, "O_RDONLY|O_CLOEXEC");
    assert!(fs.iter().all(|r| r.who.pid == child.id()));
    let mmap_ts = fs.iter().find(|r| r.op == "MMAP").unwrap().who.ts;
    assert!(report.kept.iter().any(|r| matches!(r, Row::Fs(f)
        if f.op == "MUNMAP" && f.size == 2 * b && f.who.ts > mmap_ts)));

    // The mmap touch: a write fault on each page of the mapping, backed by the file.
    let (addr, inode) = (var("map_addr"), var("map_inode"));
    let faults: Vec<_> = report
        .kept
        .iter()
        .filter_map(|r| match r {
            Row::Fault(f)
                if (addr..addr + 2 * b).contains(&f.address) && f.fault_type == "WRITE" =>
            {
                Some(f)
            }
            _ => None,
        })
        .collect();
    assert_eq!(faults.len(), 2, "{faults:?}");
    assert!(faults.iter().all(|f| f.fault_type == "WRITE" && f.inode == inode), "{faults:?}");
    assert_eq!((faults[0].offset, faults[1].offset), (0, 1));
    let ro = var("ro_addr");
    let ro_faults: Vec<_> = report
        .kept
        .iter()
        .filter_map(|r| match r {
            // The kernel may place it where the first mapping was: its faults are the reads.
            Row::Fault(f) if (ro..ro + 2 * b).contains(&f.address) && f.fault_type == "READ" => {
                Some(f)
            }
            _ => None,
        })
        .collect();
    assert!(!ro_faults.is_empty(), "a read fault on the read-only mapping");
    assert!(ro_faults.iter().all(|f| f.inode == inode && f.offset == 1), "{ro_faults:?}");

    // The page cache: the 4 new pages were added (MISS) and dirtied, and evicted by the unlink.
    // Only up to the unlink: map.bin, created next, may get the freed inode number.
    let data_inode = var("data_inode");
    let unlink = fs.iter().find(|r| r.op == "UNLINK").unwrap();
    let unlink_end = unlink.who.ts + unlink.latency_ns;
    let pages = |event: &str| -> (u64, Vec<u64>) {
        let rows: Vec<_> = report
            .kept
            .iter()
            .filter_map(|r| match r {
                Row::Cache(c)
                    if c.inode == data_inode && c.event == event && c.who.ts <= unlink_end =>
                {
                    Some(c)
                }
                _ => None,
            })
            .collect();
        (rows.iter().map(|c| u64::from(c.count)).sum(), rows.iter().map(|c| c.index).collect())
    };
    let (added, _) = pages("MISS");
    let (evicted, _) = pages("EVICT");
    let (dirtied, dirty_index) = pages("DIRTY");
    assert_eq!((added, evicted), (BLOCKS as u64, BLOCKS as u64), "pages added / evicted");
    assert!(dirtied >= 1 && dirty_index.iter().all(|&i| i < BLOCKS as u64), "{dirty_index:?}");

    // io_uring: the one READ request (submitted and completed) and the io_uring_enter batch.
    assert_eq!(var("uring_res"), b);
    let uring: Vec<_> = report
        .kept
        .iter()
        .filter_map(|r| match r {
            Row::Uring(u) if u.who.pid == child.id() => Some(u),
            _ => None,
        })
        .collect();
    let summary: Vec<_> =
        uring.iter().map(|u| (u.opcode.as_str(), u.length, u.result, u.user_data)).collect();
    assert_eq!(
        summary,
        vec![
            ("READ", None, Some(b as i64), Some(0xfeed)),
            ("IO_URING_ENTER", Some(1), Some(1), None)
        ]
    );
    assert!(uring.iter().all(|u| u.latency_ns.is_some_and(|l| l > 0)));

    // TCP on loopback: 100 bytes one way, 50 back, each seen on both ends, with ports.
    let (cport, sport) = (var("client_port") as u16, var("server_port") as u16);
    let net: Vec<_> = report
        .kept
        .iter()
        .filter_map(|r| match r {
            Row::Net(n) if n.protocol == "tcp" => Some((
                n.direction,
                n.size,
                n.source_addr.as_str(),
                n.source_port,
                n.dest_addr.as_str(),
                n.dest_port,
            )),
            _ => None,
        })
        .collect();
    let lo = "127.0.0.1";
    assert_eq!(
        net,
        vec![
            ("send", 100, lo, cport, lo, sport),
            ("receive", 100, lo, sport, lo, cport),
            ("send", 50, lo, sport, lo, cport),
            ("receive", 50, lo, cport, lo, sport),
        ]
    );

    // fsync wrote the data to the disk under /var/tmp: block writes attributed to the child.
    if std::fs::metadata(&dir).unwrap().dev() >> 8 != 0 {
        let writes: u64 = report
            .kept
            .iter()
            .filter_map(|r| match r {
                Row::Block(bl) if bl.who.pid == child.id() && bl.op == "write" => Some(bl.size),
                _ => None,
            })
            .sum();
        assert!(writes >= BLOCKS as u64 * b, "block writes of the child: {writes} bytes");
    }

    // The same operations in io-tracer's layout on disk.
    let output = report.output.unwrap();
    let mut text = String::new();
    for e in std::fs::read_dir(output.join("fs")).unwrap() {
        let f = std::fs::File::open(e.unwrap().path()).unwrap();
        flate2::read::GzDecoder::new(f).read_to_string(&mut text).unwrap();
    }
    let line = text.lines().find(|l| l.contains(",WRITE,") && l.contains("data.bin")).unwrap();
    let cols: Vec<&str> = line.split(',').collect();
    assert_eq!(cols.len(), 11, "{line}");
    assert_eq!(
        (cols[1], cols[4], cols[5], cols[9]),
        ("WRITE", p("data.bin").as_str(), "4096", "0")
    );
}

/// Runs in a child: drops root, then asks for the collector.
#[test]
fn unprivileged_child() {
    if std::env::var(UNPRIV_ENV).is_err() {
        return;
    }
    // SAFETY: plain syscalls; on failure the assertions below report it.
    unsafe {
        if libc::geteuid() == 0 {
            assert_eq!(libc::setgroups(0, std::ptr::null()), 0);
            assert_eq!(libc::setgid(65534), 0);
            assert_eq!(libc::setuid(65534), 0);
        }
    }
    let cap = capability();
    assert!(!cap.available);
    match IoTracer::start(std::process::id(), IoTraceConfig::default()) {
        Err(IoTraceError::Unavailable(why)) => println!("unavailable: {why}"),
        Err(e) => panic!("expected Unavailable, got {e}"),
        Ok(_) => panic!("the collector started without privileges"),
    }
}

/// Runs in a child started as `nobody` with CAP_BPF + CAP_PERFMON: asks why not.
#[test]
fn capabilities_child() {
    if std::env::var(CAPS_ENV).is_err() {
        return;
    }
    let cap = capability();
    println!("reason: {}", cap.reason.unwrap_or_default());
}

/// With CAP_BPF + CAP_PERFMON but not root, a root-only tracefs is named as the obstacle (it is
/// mounted: the old message said it was missing).
#[test]
fn a_root_only_tracefs_is_named_as_such() {
    if [CHILD_ENV, UNPRIV_ENV, CAPS_ENV].iter().any(|v| std::env::var(v).is_ok()) {
        return;
    }
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 || jets_host::ebpf::tracefs::ensure_mounted().is_err() {
        println!("unavailable: needs root to mount tracefs and to start a capable non-root child");
        return;
    }
    let mode = std::fs::metadata(jets_host::ebpf::tracefs::TRACEFS).ok().map(|m| {
        use std::os::unix::fs::PermissionsExt;
        m.permissions().mode() & 0o777
    });
    if mode.is_none_or(|m| m & 0o005 != 0) {
        println!("unavailable: tracefs here is not root-only ({mode:?}): nothing to refuse");
        return;
    }
    let exe = std::env::current_exe().unwrap();
    let out = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .args(["--inh-caps=+bpf,+perfmon", "--ambient-caps=+bpf,+perfmon"])
        .arg(&exe)
        .args(["capabilities_child", "--exact", "--nocapture", "--test-threads=1"])
        .env(CAPS_ENV, "1")
        .output();
    let out = match out {
        Ok(o) if o.status.success() => o,
        Ok(o) => {
            println!("unavailable: setpriv failed: {}", String::from_utf8_lossy(&o.stderr));
            return;
        }
        Err(e) => {
            println!("unavailable: setpriv: {e}");
            return;
        }
    };
    let stdout = String::from_utf8_lossy(&out.stdout);
    let reason = stdout.lines().find_map(|l| l.split_once("reason: ").map(|x| x.1)).unwrap();
    assert!(
        reason.contains("tracefs is mounted") && reason.contains("may not read it"),
        "{reason}"
    );
    assert!(!reason.contains("not mounted"), "{reason}");
}

#[test]
fn without_privileges_the_collector_is_unavailable_not_a_crash() {
    if [CHILD_ENV, UNPRIV_ENV, CAPS_ENV].iter().any(|v| std::env::var(v).is_ok()) {
        return;
    }
    let out = harness("unprivileged_child").env(UNPRIV_ENV, "1").output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    // libtest may print `test name ... ` on the same line before the test's own output.
    let line = stdout
        .lines()
        .find_map(|l| l.find("unavailable: ").map(|i| &l[i..]))
        .unwrap_or_else(|| panic!("no `unavailable:` line in {stdout}"));
    assert!(line.contains("CAP_BPF"), "{line}");
    println!("{line}");
}

/// Inside a simulator: the operations become events on a `HostIo` record, at the cycle the trace's
/// clock showed when they happened, and the trace stays valid.
#[test]
fn start_in_writes_io_events_at_the_simulated_cycle() {
    if [CHILD_ENV, UNPRIV_ENV, CAPS_ENV].iter().any(|v| std::env::var(v).is_ok()) {
        return;
    }
    let cap = capability();
    if !cap.available {
        println!("unavailable: {}", cap.reason.unwrap_or_default());
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("sim.jets");
    let trace = jets::Trace::create(&path, jets::Metadata::new()).unwrap();
    let io = match IoTracer::start_in(&trace, IoTraceConfig::default()) {
        Ok(io) => io,
        Err(IoTraceError::Unavailable(why)) => {
            println!("unavailable: {why}");
            return;
        }
        Err(e) => panic!("{e}"),
    };
    let pause = || std::thread::sleep(std::time::Duration::from_millis(60));
    let file = tmp.path().join("checkpoint.bin");
    trace.clock().set(1000);
    pause();
    std::fs::write(&file, vec![7u8; 3000]).unwrap();
    pause();
    trace.clock().set(2000);
    pause();
    assert_eq!(std::fs::read(&file).unwrap().len(), 3000);
    pause();
    let report = io.stop().unwrap();
    assert_eq!(report.lost, [0; 7]);
    trace.close().unwrap();

    let text = std::fs::read_to_string(&path).unwrap();
    let lines: Vec<serde_json::Value> =
        text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let root = lines.iter().find(|l| l["record_type"] == "HostIo").expect("a HostIo record");
    assert_eq!(root["data"]["pid"], std::process::id());
    let name = file.to_string_lossy().to_string();
    let ops: Vec<(&str, u64, u64)> = lines
        .iter()
        .filter(|l| l["type"] == "event" && l["data"]["path"] == name.as_str())
        .map(|l| {
            (
                l["name"].as_str().unwrap(),
                l["clk"].as_u64().unwrap(),
                l["data"]["size"].as_u64().unwrap(),
            )
        })
        .collect();
    let want: Vec<(&str, u64, u64)> = vec![
        ("OPEN", 1000, 0),
        ("WRITE", 1000, 3000),
        ("CLOSE", 1000, 0),
        ("OPEN", 2000, 0),
        ("READ", 2000, 3000),
        ("READ", 2000, 0),
        ("CLOSE", 2000, 0),
    ];
    assert_eq!(ops, want);
    for a in ["HostIoCapabilities", "HostIoStats"] {
        assert!(lines.iter().any(|l| l["type"] == "annotation" && l["name"] == a), "{a}");
    }
    let (diagnostics, _) = jets_read::validate::validate_bytes(text.as_bytes());
    assert!(diagnostics.is_empty(), "{diagnostics:?}");
}

/// HIO1: each I/O event inside a simulator carries the cycle interpolated from the clock readings
/// around its time, and `clk_uncertainty` bounds its distance from the true cycle. The simulator
/// sets its clock to a known cycle before each of 2,000 one-byte writes, so the true cycle of
/// write `i` (at file offset `i`) is known.
#[test]
fn io_events_carry_the_cycle_they_happened_at() {
    if [CHILD_ENV, UNPRIV_ENV, CAPS_ENV].iter().any(|v| std::env::var(v).is_ok()) {
        return;
    }
    let cap = capability();
    if !cap.available {
        println!("unavailable: {}", cap.reason.unwrap_or_default());
        return;
    }
    const N: u64 = 2000;
    const STEP: u64 = 1000;
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("sim.jets");
    let trace = jets::Trace::create(&path, jets::Metadata::new()).unwrap();
    let clock = trace.clock().clone();
    let io = match IoTracer::start_in(&trace, IoTraceConfig::default()) {
        Ok(io) => io,
        Err(IoTraceError::Unavailable(why)) => {
            println!("unavailable: {why}");
            return;
        }
        Err(e) => panic!("{e}"),
    };
    let file = tmp.path().join("ticks.bin");
    let mut f = std::fs::File::create(&file).unwrap();
    for i in 0..N {
        clock.set((i + 1) * STEP);
        f.write_all(&[0u8]).unwrap();
    }
    drop(f);
    // A child process: the kernel cannot read the simulator's clock in it, so its write is
    // interpolated between the collector's readings, within the bound it states.
    let during_child = (N + 1) * STEP;
    clock.set(during_child);
    let child_file = tmp.path().join("child.txt");
    let sh = format!("echo hi > '{}'", child_file.display());
    assert!(Command::new("sh").args(["-c", &sh]).status().unwrap().success());
    std::thread::sleep(std::time::Duration::from_millis(50));
    clock.set(during_child + 5 * STEP);
    std::thread::sleep(std::time::Duration::from_millis(50));
    let report = io.stop().unwrap();
    trace.close().unwrap();

    let name = file.to_string_lossy().to_string();
    let text = std::fs::read_to_string(&path).unwrap();
    let writes: Vec<(u64, u64, u64)> = text
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|l| l["name"] == "WRITE" && l["data"]["path"] == name.as_str())
        .map(|l| {
            let d = &l["data"];
            let unc = d["clk_uncertainty"].as_u64().unwrap_or(0);
            (d["offset"].as_u64().unwrap(), l["clk"].as_u64().unwrap(), unc)
        })
        .collect();
    assert_eq!(writes.len() as u64, N);
    let (mut exact, mut within_step, mut max_unc) = (0, 0, 0);
    for &(offset, clk, unc) in &writes {
        let truth = (offset + 1) * STEP;
        let off = clk.abs_diff(truth);
        assert!(off <= unc, "write at offset {offset}: clk {clk}, true {truth}, ± {unc}");
        exact += usize::from(off == 0);
        within_step += usize::from(off <= STEP);
        max_unc = max_unc.max(unc);
    }
    assert!(report.clk_uncertainty_max >= max_unc, "the stats cover every event");
    let child_name = child_file.to_string_lossy().to_string();
    let child: Vec<(u64, u64)> = text
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|l| l["name"] == "WRITE" && l["data"]["path"] == child_name.as_str())
        .map(|l| (l["clk"].as_u64().unwrap(), l["data"]["clk_uncertainty"].as_u64().unwrap()))
        .collect();
    assert_eq!(child.len(), 1, "the child's write");
    let (clk, unc) = child[0];
    assert!(
        clk.abs_diff(during_child) <= unc,
        "child write: clk {clk} ± {unc}, true {during_child}"
    );
    println!("HIO1: the child's write at {clk} ± {unc} (true {during_child})");
    println!(
        "HIO1: {exact} of {N} writes at their exact cycle, {within_step} within one write's \
         interval ({STEP} cycles); uncertainty max {max_unc}, mean {:.0} cycles",
        report.clk_uncertainty_mean
    );
    let (diagnostics, _) = jets_read::validate::validate_bytes(text.as_bytes());
    assert!(diagnostics.is_empty(), "{diagnostics:?}");
}
