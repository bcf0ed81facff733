//! The far part of a large file written around the page cache (WR-STREAM-2): whole aligned
//! blocks through a second descriptor opened with `O_DIRECT`, by a thread of their own, while the
//! writer fills the next block ([`crate::write::StreamedFile`] switches to it past its cached
//! share).
//!
//! A full trace is gigabytes that nobody reads while they are written. Through the page cache,
//! each byte is copied by the writer thread into a fresh page, which the kernel then tracks,
//! writes back and frees, and on a 2-core machine that is the writer's largest cost: `jets
//! bench`'s full trace of Tiny5 (6.82 GB) spent 3.0 s of system time on it, beside 5.7 s of
//! encoding and making lines, in a run of 5.2 s. A direct write lets the disk copy the block out
//! of the process's own memory, and the thread that waits for it waits on the disk, not on a
//! core. Measured on the 2-core AMD VM of 2026-12-02 (`pipeline_modes full 1300`, seven
//! alternated pairs, four of them with a prototype): 4.17–6.22 s with 0.8–1.3 s of system time,
//! against 5.23–6.61 s with 2.8–4.2 s (docs/performance-history.md, "Session 53"). A direct write
//! that *waits* for the disk on the writer thread was slower than the page cache (session 40):
//! hence the thread.
//!
//! The file stays what a reader may see of it at any time, as through the page cache:
//! * one thread writes the blocks one after the other, at their offsets, so the file grows in
//!   order and never has a hole, even if the process is killed (it then ends where a block
//!   ended, most often inside a line, which `jets repair` drops as it drops any torn last line);
//! * the unfinished block is written through the ordinary descriptor at every flush (a
//!   [`crate::Trace::flush`], the writer's idle flushes, the close), after the blocks before it;
//!   the block, once full, is written again over it, with the same bytes and more;
//! * a file system that refuses direct writes (`EINVAL`: no `O_DIRECT`, or another alignment)
//!   gets that block and every later one through the ordinary descriptor, as if this module did
//!   not exist; any other failure stops the writes, and the next call returns it (the caller
//!   cuts the file back to its last complete line, [`last_line_end`]).

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::ptr::NonNull;
use std::sync::mpsc::{channel, sync_channel, Receiver, SyncSender, TryRecvError};
use std::thread::JoinHandle;

/// Bytes of a block: one direct write. 4 MiB, as the fastest single-stream `dd` here (16 MiB
/// was slower, 1.6 against 1.8 GB/s).
pub(crate) const BLOCK: usize = 4 << 20;

/// The alignment of a block's memory, size and offset: a page, which is a multiple of every
/// logical block size a disk reports (512 or 4096 bytes).
pub(crate) const ALIGN: u64 = 4096;

/// Full blocks handed to the thread and not yet written, at most: the writer fills the next
/// one meanwhile, and waits (as a `write` would) when the disk is this far behind.
const IN_FLIGHT: usize = 3;

/// A page-aligned block of memory, `size` bytes (a multiple of [`ALIGN`]).
struct Block {
    ptr: NonNull<u8>,
    size: usize,
}

// SAFETY: a `Block` owns its memory alone; it moves between the writer and the disk thread,
// never shared.
unsafe impl Send for Block {}

impl Block {
    fn layout(size: usize) -> std::alloc::Layout {
        // A multiple of ALIGN, checked by `Direct::start`; the alignment is a power of two.
        std::alloc::Layout::from_size_align(size, ALIGN as usize).expect("a valid block layout")
    }

    fn new(size: usize) -> Block {
        let layout = Block::layout(size);
        // SAFETY: `size` is not zero (`Direct::start`).
        let ptr = unsafe { std::alloc::alloc(layout) };
        let ptr = NonNull::new(ptr).unwrap_or_else(|| std::alloc::handle_alloc_error(layout));
        Block { ptr, size }
    }

    /// Copies `bytes` in at `at`; `at + bytes.len()` is at most `size`.
    fn fill(&mut self, at: usize, bytes: &[u8]) {
        assert!(at + bytes.len() <= self.size);
        // SAFETY: in bounds (checked above); `bytes` is not in this block, which nobody else
        // can borrow while `self` is borrowed mutably.
        unsafe {
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), self.ptr.as_ptr().add(at), bytes.len())
        };
    }

    /// The first `len` bytes (written by `fill`; the memory past what was filled is never read).
    fn bytes(&self, len: usize) -> &[u8] {
        assert!(len <= self.size);
        // SAFETY: in bounds, and initialized: the caller reads only what it filled.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), len) }
    }
}

impl Drop for Block {
    fn drop(&mut self) {
        // SAFETY: allocated by `Block::new` with this layout.
        unsafe { std::alloc::dealloc(self.ptr.as_ptr(), Block::layout(self.size)) };
    }
}

/// What the disk thread did with a block.
struct Done {
    block: Block,
    /// The block's offset, and the failure that stopped the writes there.
    result: Result<(), (u64, io::Error)>,
}

/// The writing side: the block being filled, and the thread that writes the full ones.
pub(crate) struct Direct {
    to_disk: Option<SyncSender<(Block, u64)>>,
    back: Receiver<Done>,
    thread: Option<JoinHandle<()>>,
    /// The block being filled, its length, and its offset in the file.
    block: Block,
    len: usize,
    at: u64,
    /// Blocks written and back, for reuse; blocks out.
    spare: Vec<Block>,
    out: usize,
    /// The first failure (the failed block's offset, the cause): every later call returns it.
    failed: Option<(u64, io::ErrorKind, String)>,
}

impl Direct {
    /// Starts writing `file` directly from offset `at` (a multiple of [`ALIGN`]), in blocks of
    /// `size` bytes (a multiple of [`ALIGN`]; [`BLOCK`] but in tests).
    pub(crate) fn start(file: &File, at: u64, size: usize) -> io::Result<Direct> {
        Direct::start_failing(file, at, size, None)
    }

    /// [`Direct::start`], with the disk thread failing the block at a given offset with a given
    /// error (tests of what follows a failure).
    pub(crate) fn start_failing(
        file: &File,
        at: u64,
        size: usize,
        fail: Option<(u64, fn() -> io::Error)>,
    ) -> io::Result<Direct> {
        use std::os::fd::AsRawFd;
        use std::os::unix::fs::OpenOptionsExt;
        if at % ALIGN != 0 || size == 0 || size as u64 % ALIGN != 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "direct writes need aligned blocks",
            ));
        }
        // The same file, opened again rather than `dup`ed: `O_DIRECT` is a flag of the open
        // file, which a `dup` shares. Through /proc, as the file may have no name of its own
        // yet (it is renamed at its first flush, `sink.rs`).
        let direct = std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_DIRECT)
            .open(format!("/proc/self/fd/{}", file.as_raw_fd()))?;
        let plain = file.try_clone()?;
        let (to_disk, from_writer) = sync_channel(IN_FLIGHT);
        let (to_writer, back) = channel();
        let thread = std::thread::Builder::new()
            .name("jets-disk".into())
            .spawn(move || serve(&direct, &plain, &from_writer, &to_writer, fail))?;
        Ok(Direct {
            to_disk: Some(to_disk),
            back,
            thread: Some(thread),
            block: Block::new(size),
            len: 0,
            at,
            spare: Vec::new(),
            out: 0,
            failed: None,
        })
    }

    /// Takes `bytes`, handing each block to the disk thread as it fills. An error is a write
    /// that failed before (`(offset of the failed block, cause)`): nothing from there on is in
    /// the file.
    pub(crate) fn write(&mut self, mut bytes: &[u8]) -> Result<(), (u64, io::Error)> {
        self.check()?;
        while !bytes.is_empty() {
            let n = bytes.len().min(self.block.size - self.len);
            self.block.fill(self.len, &bytes[..n]);
            self.len += n;
            bytes = &bytes[n..];
            if self.len == self.block.size {
                self.send_block()?;
            }
        }
        Ok(())
    }

    /// Hands the full block to the disk thread and takes another (a spare, a new one while
    /// fewer than [`IN_FLIGHT`] are out, or the next one back).
    fn send_block(&mut self) -> Result<(), (u64, io::Error)> {
        self.collect(false)?;
        let next = match self.spare.pop() {
            Some(b) => b,
            None if self.out < IN_FLIGHT => Block::new(self.block.size),
            None => {
                self.collect_one(true)?;
                self.spare.pop().unwrap_or_else(|| Block::new(self.block.size))
            }
        };
        let full = std::mem::replace(&mut self.block, next);
        let size = full.size as u64;
        let sent = self.to_disk.as_ref().map(|to| to.send((full, self.at)));
        if !matches!(sent, Some(Ok(()))) {
            return Err((
                self.at,
                io::Error::other("the thread writing the trace to disk stopped"),
            ));
        }
        self.out += 1;
        self.at += size;
        self.len = 0;
        Ok(())
    }

    /// The first failure, if any (the same for every call from then on).
    fn check(&self) -> Result<(), (u64, io::Error)> {
        match &self.failed {
            Some((at, kind, what)) => Err((*at, io::Error::new(*kind, what.clone()))),
            None => Ok(()),
        }
    }

    /// Keeps the first failure, which every later call returns ([`Direct::check`]): nothing is
    /// written after it, so the file has no hole.
    fn keep_failure(&mut self, at: u64, e: &io::Error) {
        self.failed.get_or_insert_with(|| (at, e.kind(), e.to_string()));
    }

    /// Takes back the blocks the thread has written (all of them with `wait`).
    fn collect(&mut self, wait: bool) -> Result<(), (u64, io::Error)> {
        while self.out > 0 {
            if !self.collect_one(wait)? {
                break;
            }
        }
        Ok(())
    }

    /// Takes back one written block (waiting for it with `wait`); false when none was back.
    fn collect_one(&mut self, wait: bool) -> Result<bool, (u64, io::Error)> {
        let done = if wait {
            self.back.recv().map_err(|_| TryRecvError::Disconnected)
        } else {
            self.back.try_recv()
        };
        match done {
            Ok(Done { block, result }) => {
                self.out -= 1;
                self.spare.push(block);
                if let Err((at, e)) = &result {
                    self.keep_failure(*at, e);
                }
                self.check().map(|()| true)
            }
            Err(TryRecvError::Empty) => Ok(false),
            Err(TryRecvError::Disconnected) => {
                Err((self.at, io::Error::other("the thread writing the trace to disk stopped")))
            }
        }
    }

    /// Waits until every full block is written, then writes the unfinished one through `file`
    /// (the ordinary descriptor), so that the file holds every byte taken so far.
    pub(crate) fn flush(&mut self, file: &File) -> Result<(), (u64, io::Error)> {
        self.check()?;
        self.collect(true)?;
        if let Err(e) = file.write_all_at(self.block.bytes(self.len), self.at) {
            self.keep_failure(self.at, &e);
        }
        self.check()
    }
}

impl Drop for Direct {
    /// Lets the thread write what it has, then joins it (the caller flushes first to keep the
    /// unfinished block).
    fn drop(&mut self) {
        self.to_disk = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The disk thread: writes each block at its offset, in the order given, until the writer
/// hangs up. After a failure, the later blocks are not written (the file would have a hole)
/// but returned with the failure.
fn serve(
    direct: &File,
    plain: &File,
    blocks: &Receiver<(Block, u64)>,
    back: &std::sync::mpsc::Sender<Done>,
    fail: Option<(u64, fn() -> io::Error)>,
) {
    let mut through_cache = false;
    let mut failed: Option<(u64, io::Error)> = None;
    for (block, at) in blocks {
        let result = match &failed {
            Some((at, e)) => Err((*at, io::Error::new(e.kind(), e.to_string()))),
            None => {
                let bytes = block.bytes(block.size);
                let written = match fail {
                    Some((offset, error)) if offset == at => Err(error()),
                    _ if through_cache => plain.write_all_at(bytes, at),
                    _ => direct.write_all_at(bytes, at),
                };
                match written {
                    // Refused as direct (possibly after a part of it went): the whole block
                    // again, and every later one, through the page cache.
                    Err(e) if !through_cache && e.raw_os_error() == Some(libc::EINVAL) => {
                        through_cache = true;
                        plain.write_all_at(bytes, at).map_err(|e| (at, e))
                    }
                    other => other.map_err(|e| (at, e)),
                }
            }
        };
        if let Err((at, e)) = &result {
            failed.get_or_insert_with(|| (*at, io::Error::new(e.kind(), e.to_string())));
        }
        if back.send(Done { block, result }).is_err() {
            return;
        }
    }
}

/// The end of the last complete line (after its `\n`) at or before `end` in `file`; 0 if none.
/// Reads through a descriptor of its own, since a trace's is opened for writing only.
pub(crate) fn last_line_end(file: &File, end: u64) -> io::Result<u64> {
    use std::os::fd::AsRawFd;
    const CHUNK: u64 = 64 << 10;
    let file = File::open(format!("/proc/self/fd/{}", file.as_raw_fd()))?;
    let mut buf = vec![0u8; CHUNK as usize];
    let mut to = end;
    while to > 0 {
        let from = to.saturating_sub(CHUNK);
        let part = &mut buf[..(to - from) as usize];
        file.read_exact_at(part, from)?;
        if let Some(i) = part.iter().rposition(|&b| b == b'\n') {
            return Ok(from + i as u64 + 1);
        }
        to = from;
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(n: usize) -> Vec<u8> {
        (0..n).flat_map(|i| format!("{{\"line\":{i}}}\n").into_bytes()).collect()
    }

    /// A file of `ALIGN` bytes of lines, the start a direct tail continues from.
    fn start_file(path: &std::path::Path) -> (File, Vec<u8>) {
        let mut head = lines(1000);
        head.truncate(ALIGN as usize);
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)
            .unwrap();
        file.write_all_at(&head, 0).unwrap();
        (file, head)
    }

    /// Direct writes of `file` from `ALIGN` in blocks of `size`, failing as `fail` says; `None`,
    /// said on stderr, where the file system under `dir` refuses them.
    fn started(
        dir: &std::path::Path,
        file: &File,
        size: usize,
        fail: Option<(u64, fn() -> io::Error)>,
    ) -> Option<Direct> {
        // Without a failure, through the entry point the trace's file uses.
        let direct = match fail {
            None => Direct::start(file, ALIGN, size),
            Some(_) => Direct::start_failing(file, ALIGN, size, fail),
        };
        direct
            .map_err(|e| {
                eprintln!(
                    "NOT CHECKED: {} refuses direct writes ({e}); traces there go through the \
                     page cache only",
                    dir.display()
                )
            })
            .ok()
    }

    #[test]
    fn blocks_and_flushed_tails_make_the_file_byte_for_byte() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("d.jets");
        let (file, mut expected) = start_file(&path);
        let size = 4 * ALIGN as usize;
        let Some(mut d) = started(dir.path(), &file, size, None) else { return };
        let body = lines(20_000);
        for (i, piece) in body.chunks(777).enumerate() {
            d.write(piece).unwrap();
            expected.extend_from_slice(piece);
            // Flushed now and then: a reader sees every byte taken so far.
            if i % 37 == 0 {
                d.flush(&file).unwrap();
                assert_eq!(std::fs::read(&path).unwrap(), expected, "after piece {i}");
            }
        }
        d.flush(&file).unwrap();
        drop(d);
        assert_eq!(std::fs::read(&path).unwrap(), expected);
    }

    #[test]
    fn a_failed_block_stops_the_writes_and_is_returned_with_its_offset() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.jets");
        let (file, _) = start_file(&path);
        let size = 4 * ALIGN as usize;
        let fail_at = ALIGN + 3 * size as u64;
        let disk_full = || io::Error::from_raw_os_error(libc::ENOSPC);
        let Some(mut d) = started(dir.path(), &file, size, Some((fail_at, disk_full))) else {
            return;
        };
        let body = lines(50_000);
        let mut failure = None;
        for piece in body.chunks(1000) {
            if let Err(f) = d.write(piece) {
                failure = Some(f);
                break;
            }
        }
        let (at, e) = failure.or_else(|| d.flush(&file).err()).expect("the failure is returned");
        assert_eq!(at, fail_at);
        assert_eq!(e.kind(), io::ErrorKind::StorageFull, "{e}");
        // Nothing past the failed block reached the file, and what did ends where it began.
        assert_eq!(file.metadata().unwrap().len(), fail_at);
        // Every later call says so too.
        assert!(d.write(&body[..size]).is_err() || d.flush(&file).is_err());
        let cut = last_line_end(&file, fail_at).unwrap();
        let text = std::fs::read(&path).unwrap();
        assert_eq!(text[cut as usize - 1], b'\n');
        assert!(fail_at - cut < 32, "the last line end is within a line of the failure");
    }

    #[test]
    fn a_file_system_that_refuses_direct_writes_gets_every_block_through_the_cache() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("e.jets");
        let (file, mut expected) = start_file(&path);
        let size = 2 * ALIGN as usize;
        // The first block is refused as direct, as on a file system without `O_DIRECT`.
        let refuse = || io::Error::from_raw_os_error(libc::EINVAL);
        let Some(mut d) = started(dir.path(), &file, size, Some((ALIGN, refuse))) else { return };
        let body = lines(5_000);
        d.write(&body).unwrap();
        d.flush(&file).unwrap();
        expected.extend_from_slice(&body);
        assert_eq!(std::fs::read(&path).unwrap(), expected);
    }

    #[test]
    fn the_last_line_end_is_found_across_chunks() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("l.jets");
        let mut text = b"{\"a\":1}\n".to_vec();
        text.extend(std::iter::repeat_n(b'x', 200_000));
        std::fs::write(&path, &text).unwrap();
        let file = File::open(&path).unwrap();
        assert_eq!(last_line_end(&file, text.len() as u64).unwrap(), 8);
        assert_eq!(last_line_end(&file, 8).unwrap(), 8);
        assert_eq!(last_line_end(&file, 7).unwrap(), 0);
    }
}
