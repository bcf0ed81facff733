//! Where the writer thread puts bytes: a plain file, a compressed file, or any `Write`.
//!
//! Two promises hold for files (rules CA-DURABLE-1 and CA-DURABLE-2 in spec/c-api-decisions.md):
//! * **Opening never destroys an existing trace before the new one works.** A regular file that
//!   already exists at the path is replaced only once the new header is written: the trace is
//!   written to a temporary file next to it, renamed over the old one on the first successful
//!   flush, and removed if that never happens.
//! * **After an I/O error the file is a valid prefix.** A plain file is cut back to its last
//!   complete line. A compressed file is a sequence of complete streams (gzip members, zstd
//!   frames), one per flush: after a failed write it is cut back to the end of the last complete
//!   one, so it decompresses to every line flushed before the error, and `jets repair` adds the
//!   footer.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use super::streamed::StreamedFile;

/// The destination of a trace. Every `write_all` it receives ends at a line boundary.
pub(crate) struct Sink {
    kind: Kind,
    /// `(temporary, final)` until the first successful flush renames one over the other.
    pending: Option<(PathBuf, PathBuf)>,
}

enum Kind {
    /// A file, plain or compressed.
    File(FileSink),
    /// Any writer the caller provides.
    Writer(Box<dyn Write + Send>),
}

/// A compressed stream flushed this many uncompressed bytes at the latest, to bound memory.
const FRAME_BYTES: usize = 4 << 20;

struct FileSink {
    /// Written as a stream: writeback starts early, and the page cache keeps only the recent
    /// part (`streamed.rs`).
    file: StreamedFile,
    /// Bytes of the file known complete (whole lines, or whole compressed streams): a failed
    /// write is cut back to here.
    good_len: u64,
    codec: Codec,
    /// Compressed files: lines not yet in a frame.
    pending: Vec<u8>,
}

/// How a compressed file's frames are made; encoder threads compress their batches with it.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Codec {
    Plain,
    #[cfg(feature = "gzip")]
    Gzip,
    #[cfg(feature = "zstd")]
    Zstd,
}

impl Sink {
    /// Creates `path`, compressed according to its extension (see the module docs for how an
    /// existing file is replaced).
    pub(crate) fn create(path: &Path) -> io::Result<Sink> {
        let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
        let codec = match ext {
            #[cfg(feature = "gzip")]
            "gz" => Codec::Gzip,
            #[cfg(feature = "zstd")]
            "zst" => Codec::Zstd,
            #[cfg(not(all(feature = "gzip", feature = "zstd")))]
            "gz" | "zst" => {
                return Err(io::Error::new(
                    io::ErrorKind::Unsupported,
                    format!("compression .{ext} is not enabled in this build of the JETS SDK"),
                ))
            }
            _ => Codec::Plain,
        };
        // Only a regular file is replaced through a temporary file: a device, a FIFO or
        // /dev/stdout is written in place, and a symbolic link is followed to its file.
        let (file, pending) = match std::fs::metadata(path) {
            Ok(m) if m.is_file() => {
                let target = std::fs::canonicalize(path)?;
                let temp = temporary_beside(&target);
                match OpenOptions::new().write(true).create_new(true).open(&temp) {
                    Ok(file) => (file, Some((temp, target))),
                    // A writable file in a read-only directory: in place, as the only way.
                    Err(e) if e.kind() == io::ErrorKind::PermissionDenied => {
                        (File::create(path)?, None)
                    }
                    Err(e) => return Err(e),
                }
            }
            _ => (File::create(path)?, None),
        };
        // A file of lines may be written around the page cache past its cached share; one of
        // compressed streams stays with the cache, since a failed direct write is cut back to a
        // line end, which a compressed stream does not have (WR-STREAM-2).
        let mut file = StreamedFile::new(file);
        if codec != Codec::Plain {
            file.stay_buffered();
        }
        let sink = FileSink { file, good_len: 0, codec, pending: Vec::new() };
        Ok(Sink { kind: Kind::File(sink), pending })
    }

    /// A sink over any writer.
    pub(crate) fn writer(w: Box<dyn Write + Send>) -> Sink {
        Sink { kind: Kind::Writer(w), pending: None }
    }

    /// The codec that compresses this sink's frames, for a compressed file (`None`: plain file,
    /// or any `Write`).
    pub(crate) fn codec(&self) -> Option<Codec> {
        match &self.kind {
            Kind::File(f) if f.codec != Codec::Plain => Some(f.codec),
            _ => None,
        }
    }

    /// Writes one complete compressed stream made by [`Codec::compress`] of this sink's codec,
    /// after the lines still pending (which end a stream of their own). Like a flush, it leaves
    /// the file a sequence of complete streams.
    pub(crate) fn write_frame(&mut self, frame: &[u8]) -> io::Result<()> {
        match &mut self.kind {
            Kind::File(f) => {
                f.end_frame()?;
                f.write_durably(frame)
            }
            Kind::Writer(_) => Err(io::Error::other("a compressed frame for a plain writer")),
        }
    }

    /// Writes whole lines.
    pub(crate) fn write_lines(&mut self, bytes: &[u8]) -> io::Result<()> {
        match &mut self.kind {
            Kind::File(f) if f.codec == Codec::Plain => f.write_durably(bytes),
            Kind::File(f) => {
                f.pending.extend_from_slice(bytes);
                if f.pending.len() >= FRAME_BYTES {
                    f.end_frame()?;
                }
                Ok(())
            }
            Kind::Writer(w) => w.write_all(bytes),
        }
    }

    /// Pushes buffered bytes to the OS; a compressed file then ends with a complete stream. The
    /// first successful flush puts a new file in place of the one it replaces.
    pub(crate) fn flush(&mut self) -> io::Result<()> {
        match &mut self.kind {
            Kind::File(f) => f.end_frame()?,
            Kind::Writer(w) => w.flush()?,
        }
        if let Some((temp, target)) = self.pending.take() {
            if let Err(e) = std::fs::rename(&temp, &target) {
                let _ = std::fs::remove_file(&temp);
                return Err(e);
            }
        }
        Ok(())
    }

    /// Starts no thread from now on (after a fatal signal: the thread that took it may hold a
    /// lock a new thread needs): a file stays with the page cache if it has not left it.
    pub(crate) fn stay_buffered(&mut self) {
        if let Kind::File(f) = &mut self.kind {
            f.file.stay_buffered();
        }
    }

    /// Completes the file and flushes.
    pub(crate) fn finish(mut self) -> io::Result<()> {
        self.flush()
    }
}

impl Drop for Sink {
    fn drop(&mut self) {
        // Never put in place (the header could not be written): the old file stays.
        if let Some((temp, _)) = self.pending.take() {
            let _ = std::fs::remove_file(temp);
        }
    }
}

impl Codec {
    /// `bytes` (whole lines) as one complete gzip member or zstd frame; `None` for a plain file.
    // Built without `gzip` and `zstd`, only `Plain` is left and `bytes` goes unused.
    #[cfg_attr(not(any(feature = "gzip", feature = "zstd")), allow(unused_variables))]
    pub(crate) fn compress(self, bytes: &[u8]) -> io::Result<Option<Vec<u8>>> {
        Ok(match self {
            Codec::Plain => None,
            #[cfg(feature = "gzip")]
            Codec::Gzip => {
                let mut e = flate2::write::GzEncoder::new(
                    Vec::with_capacity(bytes.len() / 4),
                    flate2::Compression::fast(),
                );
                e.write_all(bytes)?;
                Some(e.finish()?)
            }
            #[cfg(feature = "zstd")]
            Codec::Zstd => Some(zstd::bulk::compress(bytes, 3)?),
        })
    }
}

impl FileSink {
    /// Compresses the pending lines into one complete stream and writes it (nothing for a plain
    /// file, whose lines are written as they come).
    fn end_frame(&mut self) -> io::Result<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        // A plain file's lines were written as they came (and no codec exists without features).
        let Some(frame) = self.codec.compress(&self.pending)? else { return Ok(()) };
        self.pending.clear();
        self.write_durably(&frame)
    }

    /// Writes `bytes`, a whole number of lines or one complete stream; on failure cuts the file
    /// back to what was complete before.
    fn write_durably(&mut self, bytes: &[u8]) -> io::Result<()> {
        let mut written = 0;
        while written < bytes.len() {
            match self.file.write(&bytes[written..]) {
                Ok(0) => {
                    return Err(self.cut_back(bytes, written, io::ErrorKind::WriteZero.into()))
                }
                Ok(n) => written += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(self.cut_back(bytes, written, e)),
            }
        }
        self.good_len += bytes.len() as u64;
        Ok(())
    }

    /// After a failed write of `bytes` of which `written` reached the file: keep what is
    /// complete (for a plain file, every whole line that made it; for a compressed one, nothing
    /// of the partial stream) and cut off the rest. Best effort: on a device file (e.g.
    /// /dev/full) `set_len` fails and there is nothing to cut.
    fn cut_back(&mut self, bytes: &[u8], written: usize, e: io::Error) -> io::Error {
        if self.codec == Codec::Plain {
            let complete = bytes[..written].iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
            self.good_len += complete as u64;
        }
        // Never longer than the file is: a failed direct write has cut it back further already
        // (`StreamedFile`), and growing it again would add zeros.
        let len = self.file.file().metadata().map_or(self.good_len, |m| m.len());
        let _ = self.file.file().set_len(self.good_len.min(len));
        e
    }
}

/// A fresh name next to `target`: same directory (so the rename is atomic), hidden.
fn temporary_beside(target: &Path) -> PathBuf {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let name = target.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    target.with_file_name(format!(".{name}.{}-{n}.jets-tmp", std::process::id()))
}

#[cfg(all(test, feature = "gzip", feature = "zstd"))]
mod tests {
    use super::*;

    fn gunzip(bytes: &[u8]) -> String {
        let mut s = String::new();
        io::Read::read_to_string(&mut flate2::read::MultiGzDecoder::new(bytes), &mut s).unwrap();
        s
    }

    #[test]
    fn each_flush_ends_a_complete_gzip_member_and_zstd_frame() {
        let dir = tempfile::tempdir().unwrap();
        for ext in ["gz", "zst"] {
            let path = dir.path().join(format!("t.jets.{ext}"));
            let mut s = Sink::create(&path).unwrap();
            s.write_lines(b"{\"a\":1}\n").unwrap();
            s.flush().unwrap();
            s.write_lines(b"{\"b\":2}\n").unwrap();
            s.flush().unwrap();
            s.write_lines(b"{\"c\":3}\n").unwrap(); // not flushed: lost if the process dies
            let on_disk = std::fs::read(&path).unwrap();
            let text = if ext == "gz" {
                gunzip(&on_disk)
            } else {
                String::from_utf8(zstd::decode_all(&on_disk[..]).unwrap()).unwrap()
            };
            assert_eq!(text, "{\"a\":1}\n{\"b\":2}\n", "{ext}");
            s.finish().unwrap();
        }
    }

    #[test]
    fn an_existing_file_is_replaced_only_by_a_flushed_new_one() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("old.jets");
        std::fs::write(&path, "old\n").unwrap();
        let mut s = Sink::create(&path).unwrap();
        s.write_lines(b"new\n").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "old\n");
        drop(s); // never flushed: the old file stays, the temporary is gone
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "old\n");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
        let mut s = Sink::create(&path).unwrap();
        s.write_lines(b"new\n").unwrap();
        s.flush().unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "new\n");
        s.finish().unwrap();
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }
}
