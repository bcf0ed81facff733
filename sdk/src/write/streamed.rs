//! A large file written as a stream: the OS is asked to start writing each part to disk as soon
//! as it is written, and to forget parts far behind once they are on disk.
//!
//! A full trace is gigabytes, written once and not read back while it is written. Left to
//! itself, the OS keeps all of it in the page cache and starts writing it out only when a
//! tenth of memory is dirty; past a fifth, it stops the writer until the disk catches up. And
//! every page of a multi-gigabyte file is a fresh page of memory, which on a virtual machine
//! whose host takes freed memory back (virtio free page reporting) is a fault on the host. Two
//! hints change that, as databases do for their own large writes (PostgreSQL's
//! `backend_flush_after`, RocksDB's `bytes_per_sync`):
//! * every [`STEP`] bytes, `sync_file_range(SYNC_FILE_RANGE_WRITE)` starts writing the part just
//!   written (without waiting for it), so the disk works from the start instead of from the
//!   dirty threshold;
//! * what lies more than [`KEEP_CACHED`] bytes behind is dropped from the page cache
//!   (`posix_fadvise(POSIX_FADV_DONTNEED)`, which leaves pages not yet written alone), so the
//!   file's pages are reused rather than new ones taken.
//!
//! Measured here (2-core VM, 2026-11-25, a loop of 256 KiB writes of 6.8 GB, as large as a full
//! trace of `jets bench`): 5.7–7.9 s plain, 2.0–2.3 s with both hints (`spec/write-decisions.md`,
//! WR-STREAM-1). Neither hint changes what is written or when a write returns. Nothing is asked
//! until the file is larger than [`KEEP_CACHED`]: a trace up to that size is left to the page
//! cache as any file is, so that on a slow disk (where early writeback paces the writer at the
//! disk's speed) a trace that fits in memory is not held back; starting past 512 MiB changed
//! nothing in the figure above (2.2–2.7 s). They are hints: on a pipe, a device, or a system
//! without them, nothing happens.

use std::fs::File;
use std::io::{self, Write};

/// Bytes written between two requests to start writing to disk.
pub(crate) const STEP: u64 = 8 << 20;

/// Bytes behind the end of the file kept in the page cache (a reader following the trace as it
/// grows, such as `jets view` or `jets validate --follow`, finds the recent part there).
pub(crate) const KEEP_CACHED: u64 = 512 << 20;

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
    /// [`STEP`] and [`KEEP_CACHED`] (smaller in unit tests).
    step: u64,
    keep: u64,
}

impl StreamedFile {
    /// Writes to `file` from its current offset, which is taken as 0 (a new file).
    pub fn new(file: File) -> StreamedFile {
        StreamedFile::with_sizes(file, STEP, KEEP_CACHED)
    }

    fn with_sizes(file: File, step: u64, keep: u64) -> StreamedFile {
        StreamedFile { file, written: 0, started: 0, dropped: 0, step, keep }
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
        // page cache is not paced by the disk.
        if self.written > self.keep {
            start_writeback(&self.file, self.started, self.written - self.started);
        }
        self.started = self.written;
        let behind = self.started.saturating_sub(self.keep);
        if behind > self.dropped {
            drop_cached(&self.file, self.dropped, behind - self.dropped);
            self.dropped = behind;
        }
    }
}

impl Write for StreamedFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.file.write(buf)?;
        self.wrote(n);
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
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
        let mut f = StreamedFile::with_sizes(File::create(&path).unwrap(), step, keep);
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
}
