//! A large file written as a stream: the OS is asked to start writing each part to disk as soon
//! as it is written, and to forget parts far behind once they are on disk.
//!
//! A full trace is gigabytes, written once and not read back while it is written. Left to
//! itself, the OS keeps all of it in the page cache and starts writing it out only when a
//! tenth of memory is dirty; past a fifth, it stops the writer until the disk catches up. And
//! every page of a multi-gigabyte file is a fresh page of memory, which on a virtual machine
//! whose host takes freed memory back (virtio free page reporting) is a fault on the host. Three
//! hints change that, as databases do for their own large writes (PostgreSQL's
//! `backend_flush_after`, RocksDB's `bytes_per_sync`):
//! * every [`STEP`] bytes, `sync_file_range(SYNC_FILE_RANGE_WRITE)` starts writing the part just
//!   written (without waiting for it), so the disk works from the start instead of from the
//!   dirty threshold;
//! * what lies more than [`KEEP_CACHED`] bytes behind is dropped from the page cache
//!   (`posix_fadvise(POSIX_FADV_DONTNEED)`, which leaves pages not yet written alone), so the
//!   file's pages are reused rather than new ones taken;
//! * disk space is reserved [`RESERVE_AHEAD`] bytes ahead of the end
//!   (`fallocate(FALLOC_FL_KEEP_SIZE)`), so that the file system finds blocks for 64 MiB at once
//!   rather than for each page as it is written (ext4's delayed allocation looks up and reserves
//!   per page: `perf` put a quarter of the writer thread's kernel time there). The file's length
//!   is what was written, as without it; the space past the end is given back when the file is
//!   dropped. A process killed before that leaves up to 64 MiB allocated past the end of its
//!   trace (seen by `du`, not by readers), until the file is truncated or removed.
//!
//! And past [`KEEP_CACHED`], a file of lines (not one of compressed streams) leaves the page cache
//! altogether where the file system allows it: whole aligned blocks written with `O_DIRECT` by a
//! thread of their own (`direct.rs`, which says why and what was measured), the unfinished block
//! through the page cache at each flush. A flush still means every byte taken is in the file; a
//! failed direct write cuts the file back to its last complete line (or its last flush, if that
//! is further) and is returned by the next call, as a failed `write` is.
//!
//! Measured here (2-core VM, 2026-11-25, a loop of 256 KiB writes of 6.8 GB, as large as a full
//! trace of `jets bench`): 5.7–7.9 s plain, 2.0–2.3 s with the first two hints
//! (`spec/write-decisions.md`, WR-STREAM-1). The reservation (2026-11-28, six alternated pairs of
//! the same loop in C): 2.62–2.80 s against 2.78–2.94 s without it, and 1.39–1.45 s of busy CPU on
//! both cores (kernel writeback included) against 1.96–2.05 s; Tiny5's full trace
//! (`pipeline_modes full`, five alternated pairs): 3.90–4.23 s against 4.54–4.69 s. No hint
//! changes what is written or when a write returns. Nothing is asked until the file is larger
//! than [`KEEP_CACHED`]: a trace up to that size is left to the page cache as any file is, so
//! that on a slow disk (where early writeback paces the writer at the disk's speed) a trace that
//! fits in memory is not held back; starting past 512 MiB changed nothing in the figure above
//! (2.2–2.7 s). They are hints: on a pipe, a device, or a system
//! without them, nothing happens.

use std::fs::File;
use std::io::{self, Write};

#[cfg(target_os = "linux")]
use super::direct::BLOCK;
/// Off Linux there are no direct writes, and no block size to give them.
#[cfg(not(target_os = "linux"))]
const BLOCK: usize = 0;

/// Bytes written between two requests to start writing to disk.
pub(crate) const STEP: u64 = 8 << 20;

/// Bytes behind the end of the file kept in the page cache (a reader following the trace as it
/// grows, such as `jets view` or `jets validate --follow`, finds the recent part there).
pub(crate) const KEEP_CACHED: u64 = 512 << 20;

/// Disk space reserved ahead of the end of the file, past [`KEEP_CACHED`].
pub(crate) const RESERVE_AHEAD: u64 = 64 << 20;

/// A file written front to back as a stream (see the module documentation): what a trace file
/// is written through, and what a tool that writes a large file beside one can use to compare
/// like with like (`jets bench` writes its reference file with it).
///
/// ```
/// use std::io::Write;
/// let dir = tempfile::tempdir().unwrap();
/// let path = dir.path().join("big.bin");
/// let mut f = jets::write::StreamedFile::new(std::fs::File::create(&path).unwrap());
/// f.write_all(b"bytes\n").unwrap();
/// drop(f);
/// assert_eq!(std::fs::read(&path).unwrap(), b"bytes\n");
/// ```
pub struct StreamedFile {
    file: File,
    /// Bytes written so far; the first byte not yet handed to writeback (or left to the OS, up
    /// to `keep`); the first byte not yet dropped from the page cache.
    written: u64,
    started: u64,
    dropped: u64,
    /// The end of the disk space reserved so far ([`RESERVE_AHEAD`]), and whether to go on
    /// reserving: not once the file system refused (no support, or a full disk). What was
    /// reserved before a refusal is still given back at the drop.
    reserved: u64,
    may_reserve: bool,
    /// [`STEP`] and [`KEEP_CACHED`] (smaller in unit tests).
    step: u64,
    keep: u64,
    /// Past `keep`, the writes that go around the page cache (`direct.rs`), once started.
    #[cfg(target_os = "linux")]
    direct: Option<Box<super::direct::Direct>>,
    /// Whether to start them past `keep`: not after [`StreamedFile::stay_buffered`] (a file of
    /// compressed streams, a fatal signal), not once the file could not be opened for them.
    may_go_direct: bool,
    /// The size of a direct write ([`super::direct::BLOCK`]; smaller in unit tests).
    block: usize,
    /// The offset of a direct block to fail, and how (tests of a failure).
    #[cfg(all(test, target_os = "linux"))]
    fail: Option<(u64, fn() -> io::Error)>,
    /// Bytes in the file at the last flush, which ends at a line end: kept whatever fails later.
    flushed: u64,
}

impl StreamedFile {
    /// Writes to `file` from its current offset, which is taken as 0 (a new file).
    pub fn new(file: File) -> StreamedFile {
        StreamedFile::with_sizes(file, STEP, KEEP_CACHED, BLOCK)
    }

    fn with_sizes(file: File, step: u64, keep: u64, block: usize) -> StreamedFile {
        StreamedFile {
            file,
            written: 0,
            started: 0,
            dropped: 0,
            reserved: 0,
            may_reserve: true,
            step,
            keep,
            #[cfg(target_os = "linux")]
            direct: None,
            may_go_direct: cfg!(target_os = "linux"),
            block,
            flushed: 0,
            #[cfg(all(test, target_os = "linux"))]
            fail: None,
        }
    }

    /// Stays with the page cache from now on if it has not left it: for a file that is not one
    /// of lines (a failed direct write is cut back to a line end), and after a fatal signal (no
    /// thread is started for direct writes: the signal's thread may hold a lock that starting
    /// one needs).
    pub(crate) fn stay_buffered(&mut self) {
        self.may_go_direct = false;
    }

    /// Whether the file is being written around the page cache (past 512 MiB, on a
    /// file system that takes direct writes).
    pub fn is_direct(&self) -> bool {
        #[cfg(target_os = "linux")]
        return self.direct.is_some();
        #[cfg(not(target_os = "linux"))]
        false
    }

    /// The file.
    pub fn file(&self) -> &File {
        &self.file
    }

    /// After `n` more bytes were written: the hints that are due.
    fn wrote(&mut self, n: usize) {
        self.written += n as u64;
        if self.written - self.started < self.step {
            return;
        }
        // Up to `keep` bytes a file is left to the OS, as any file is: a trace that fits in the
        // page cache is not paced by the disk. Past it with direct writes, the page cache holds
        // only flushed tails of unfinished blocks: the hints below still start and drop those,
        // and the reservation serves the direct blocks as it served the cached writes.
        if self.written > self.keep {
            start_writeback(&self.file, self.started, self.written - self.started);
            if self.may_reserve && self.reserved < self.written + self.step {
                let from = self.reserved.max(self.written);
                let to = self.written + RESERVE_AHEAD.max(2 * self.step);
                self.may_reserve = reserve(&self.file, from, to - from);
                if self.may_reserve {
                    self.reserved = to;
                }
            }
        }
        self.started = self.written;
        let behind = self.started.saturating_sub(self.keep);
        if behind > self.dropped {
            drop_cached(&self.file, self.dropped, behind - self.dropped);
            self.dropped = behind;
        }
    }
}

impl Drop for StreamedFile {
    fn drop(&mut self) {
        // The unfinished direct block goes in (a failure is cut back, as in any flush).
        #[cfg(target_os = "linux")]
        if self.direct.is_some() {
            let _ = self.flush();
            self.direct = None;
        }
        // Space reserved past the end goes back: a truncation to the file's own length frees
        // what lies beyond it (and never extends a file that a failed write cut back).
        if self.reserved > 0 {
            if let Ok(meta) = self.file.metadata() {
                let _ = self.file.set_len(meta.len());
            }
        }
    }
}

impl Write for StreamedFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        #[cfg(target_os = "linux")]
        if let Some(n) = self.write_direct(buf)? {
            return Ok(n);
        }
        let n = self.file.write(buf)?;
        self.wrote(n);
        Ok(n)
    }

    /// Waits until every byte taken is in the file (with direct writes, the blocks out, then
    /// the unfinished block through the page cache).
    fn flush(&mut self) -> io::Result<()> {
        #[cfg(target_os = "linux")]
        if let Some(d) = self.direct.as_mut() {
            if let Err(failure) = d.flush(&self.file) {
                return Err(self.cut_back(failure));
            }
        }
        self.flushed = self.written;
        self.file.flush()
    }
}

#[cfg(target_os = "linux")]
impl StreamedFile {
    /// Past `keep`, takes `buf` for the direct writes, starting them at the first aligned offset
    /// (the bytes up to it go through the page cache, as a short write). `None`: not for direct
    /// writes (before `keep`, or a file that cannot have them), write it through the page cache.
    fn write_direct(&mut self, buf: &[u8]) -> io::Result<Option<usize>> {
        use super::direct::{Direct, ALIGN};
        if self.direct.is_none() {
            if !self.may_go_direct || self.written < self.keep {
                return Ok(None);
            }
            let pad = self.written.next_multiple_of(ALIGN) - self.written;
            if pad > 0 {
                let n = self.file.write(&buf[..buf.len().min(pad as usize)])?;
                self.wrote(n);
                return Ok(Some(n));
            }
            #[cfg(not(test))]
            let started = Direct::start(&self.file, self.written, self.block);
            #[cfg(test)]
            let started = Direct::start_failing(&self.file, self.written, self.block, self.fail);
            match started {
                Ok(d) => self.direct = Some(Box::new(d)),
                Err(_) => {
                    self.may_go_direct = false;
                    return Ok(None);
                }
            }
        }
        let Some(d) = self.direct.as_mut() else { return Ok(None) };
        match d.write(buf) {
            Ok(()) => {
                self.wrote(buf.len());
                Ok(Some(buf.len()))
            }
            Err(failure) => Err(self.cut_back(failure)),
        }
    }

    /// After a direct write failed at `at`: the file ends at its last complete line before
    /// `at`, or at the last flush if that is further (its bytes went through the page cache).
    fn cut_back(&mut self, (at, e): (u64, io::Error)) -> io::Error {
        let end = super::direct::last_line_end(&self.file, at).unwrap_or(0).max(self.flushed);
        let _ = self.file.set_len(end);
        e
    }
}

/// Asks the OS to start writing `len` bytes at `offset` to disk, without waiting.
fn start_writeback(file: &File, offset: u64, len: u64) {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        // SAFETY: a plain system call on a descriptor this file owns; a failure (a pipe, a
        // file system without it) only means the hint is not taken.
        let _ = unsafe {
            libc::sync_file_range(
                file.as_raw_fd(),
                offset as libc::off64_t,
                len as libc::off64_t,
                libc::SYNC_FILE_RANGE_WRITE,
            )
        };
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (file, offset, len);
}

/// Reserves disk space for `len` bytes at `offset` without changing the file's length
/// (`fallocate(FALLOC_FL_KEEP_SIZE)`); false when the file system cannot.
fn reserve(file: &File, offset: u64, len: u64) -> bool {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        // SAFETY: a plain system call on a descriptor this file owns. With KEEP_SIZE the
        // file's length and contents stay as they are: the blocks lie past its end.
        let r = unsafe {
            libc::fallocate(
                file.as_raw_fd(),
                libc::FALLOC_FL_KEEP_SIZE,
                offset as libc::off_t,
                len as libc::off_t,
            )
        };
        r == 0
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = (file, offset, len);
        false
    }
}

/// Asks the OS to drop the clean pages of `len` bytes at `offset` from its page cache.
fn drop_cached(file: &File, offset: u64, len: u64) {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        // SAFETY: as for `start_writeback`; the advice never changes the file's contents.
        let _ = unsafe {
            libc::posix_fadvise(
                file.as_raw_fd(),
                offset as libc::off_t,
                len as libc::off_t,
                libc::POSIX_FADV_DONTNEED,
            )
        };
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (file, offset, len);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hints_are_asked_for_each_step_and_never_change_the_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.bin");
        let (step, keep) = (4096, 3 * 4096);
        let mut f = StreamedFile::with_sizes(File::create(&path).unwrap(), step, keep, BLOCK);
        let block: Vec<u8> = (0..=255u8).cycle().take(1000).collect();
        let mut steps_seen = Vec::new();
        for _ in 0..100 {
            f.write_all(&block).unwrap();
            steps_seen.push((f.started, f.dropped));
        }
        let total = 100 * block.len() as u64;
        assert_eq!(f.written, total);
        // The hints kept up with every step (never more than a step behind; writeback is asked
        // for past `keep` only), and what lies further back than `keep` from there was dropped.
        assert!(total - f.started < step, "{} of {total} handed to writeback", f.started);
        assert!(f.started >= total - step);
        assert_eq!(f.dropped, f.started - keep);
        assert!(steps_seen.windows(2).all(|w| w[0].0 <= w[1].0 && w[0].1 <= w[1].1));
        assert!(steps_seen.iter().any(|&(s, _)| s > 0 && s < total - step), "asked along the way");
        drop(f);
        let back = std::fs::read(&path).unwrap();
        assert_eq!(back.len() as u64, total);
        assert!(back.chunks(block.len()).all(|c| c == &block[..]));
    }

    /// A file of lines as `jets bench` writes them: every line the same length.
    #[cfg(target_os = "linux")]
    fn line(i: usize) -> Vec<u8> {
        format!("{{\"clk\":{i:08},\"type\":\"event\"}}\n").into_bytes()
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn past_keep_the_file_goes_direct_and_every_flush_shows_all_of_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("d.bin");
        let (step, keep, block) = (16 * 1024, 64 * 1024, 32 * 1024);
        let mut f = StreamedFile::with_sizes(File::create(&path).unwrap(), step, keep, block);
        let mut expected = Vec::new();
        for i in 0..20_000 {
            let l = line(i);
            f.write_all(&l).unwrap();
            expected.extend_from_slice(&l);
            if i % 1500 == 0 {
                f.flush().unwrap();
                assert_eq!(std::fs::read(&path).unwrap(), expected, "after line {i}");
            }
        }
        if !f.is_direct() {
            eprintln!(
                "NOT CHECKED: the file system under {} refuses direct writes; traces there go \
                 through the page cache only",
                dir.path().display()
            );
        }
        drop(f);
        assert_eq!(std::fs::read(&path).unwrap(), expected);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_failed_direct_write_leaves_whole_lines_and_everything_flushed() {
        let dir = tempfile::tempdir().unwrap();
        for flush_at in [None, Some(5000)] {
            let path = dir.path().join("f.bin");
            let (step, keep, block) = (16 * 1024, 64 * 1024, 32 * 1024);
            let mut f = StreamedFile::with_sizes(File::create(&path).unwrap(), step, keep, block);
            // The third direct block fails, as a full disk would.
            let fail_at = keep + 2 * block as u64;
            f.fail = Some((fail_at, || io::Error::from_raw_os_error(libc::ENOSPC)));
            let mut sent = Vec::new();
            let mut error = None;
            for i in 0..20_000 {
                if let Err(e) = f.write_all(&line(i)) {
                    error = Some(e);
                    break;
                }
                sent.extend_from_slice(&line(i));
                if Some(i) == flush_at {
                    f.flush().unwrap();
                }
            }
            let error = error.or_else(|| f.flush().err());
            if !f.is_direct() {
                eprintln!("NOT CHECKED: {} refuses direct writes", dir.path().display());
                return;
            }
            let e = error.expect("the failure is returned");
            assert_eq!(e.kind(), io::ErrorKind::StorageFull, "{e}");
            drop(f);
            let got = std::fs::read(&path).unwrap();
            // Whole lines, the first of what was sent: up to the failed block (whose offset is
            // a line end here), or up to the flush if that came later.
            let flushed = flush_at.map_or(0, |i| (i as u64 + 1) * line(0).len() as u64);
            assert!(sent.starts_with(&got));
            assert_eq!(got.len() as u64, fail_at.max(flushed), "flushed at {flush_at:?}");
        }
    }

    #[test]
    fn space_is_reserved_ahead_past_keep_and_given_back_at_drop() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.bin");
        let (step, keep) = (64 * 1024, 256 * 1024);
        let mut f = StreamedFile::with_sizes(File::create(&path).unwrap(), step, keep, BLOCK);
        let block = vec![7u8; 16 * 1024];
        // Up to `keep`, nothing is reserved.
        while f.written + (block.len() as u64) <= keep {
            f.write_all(&block).unwrap();
        }
        assert_eq!(f.reserved, 0);
        for _ in 0..64 {
            f.write_all(&block).unwrap();
        }
        let total = f.written;
        if !f.may_reserve {
            eprintln!(
                "NOT CHECKED: the file system under {} refuses fallocate(KEEP_SIZE); \
                 traces there are written without reserved space",
                dir.path().display()
            );
        } else {
            assert!(f.reserved >= total + step, "reserved up to {} of {total}", f.reserved);
            // Past `keep` the last bytes may wait in a direct block: a flush puts them in.
            f.flush().unwrap();
            let meta = std::fs::metadata(&path).unwrap();
            assert_eq!(meta.len(), total, "the reservation does not change the length");
            assert!(meta.blocks() * 512 >= f.reserved, "{} bytes allocated", meta.blocks() * 512);
        }
        drop(f);
        let meta = std::fs::metadata(&path).unwrap();
        assert_eq!(meta.len(), total);
        // What lay past the end was given back: at most one file-system block of slack.
        assert!(
            meta.blocks() * 512 < total + 64 * 1024,
            "{} bytes still allocated",
            meta.blocks() * 512
        );
        assert!(std::fs::read(&path).unwrap().iter().all(|&b| b == 7));
    }
}
