//! Where the writer thread puts bytes: a plain file, a compressed file, or any `Write`.

use std::fs::File;
use std::io::{self, Write};
use std::path::Path;

/// The destination of a trace. Every `write_all` it receives ends at a line boundary.
pub(crate) enum Sink {
    /// A plain file. `good_len` counts bytes known written, so a failed write can be cut back to
    /// the last complete line and the file stays a valid prefix.
    File { file: File, good_len: u64 },
    /// gzip, chosen by a `.gz` extension. Flushes are sync flushes: the stream stays readable up to
    /// the last flush even if the process dies before the trailer.
    #[cfg(feature = "gzip")]
    Gzip(flate2::write::GzEncoder<File>),
    /// zstd, chosen by a `.zst` extension.
    #[cfg(feature = "zstd")]
    Zstd(zstd::stream::write::Encoder<'static, File>),
    /// Any writer the caller provides.
    Writer(Box<dyn Write + Send>),
}

impl Sink {
    /// Creates (truncates) `path`, compressed according to its extension.
    pub(crate) fn create(path: &Path) -> io::Result<Sink> {
        let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
        let file = File::create(path)?;
        match ext {
            #[cfg(feature = "gzip")]
            "gz" => {
                Ok(Sink::Gzip(flate2::write::GzEncoder::new(file, flate2::Compression::fast())))
            }
            #[cfg(feature = "zstd")]
            "zst" => Ok(Sink::Zstd(zstd::stream::write::Encoder::new(file, 3)?)),
            #[cfg(not(all(feature = "gzip", feature = "zstd")))]
            "gz" | "zst" => Err(io::Error::new(
                io::ErrorKind::Unsupported,
                format!("compression .{ext} is not enabled in this build of the JETS SDK"),
            )),
            _ => Ok(Sink::File { file, good_len: 0 }),
        }
    }

    /// Writes whole lines.
    pub(crate) fn write_lines(&mut self, bytes: &[u8]) -> io::Result<()> {
        match self {
            Sink::File { file, good_len } => {
                let mut written = 0;
                while written < bytes.len() {
                    match file.write(&bytes[written..]) {
                        Ok(0) => {
                            return Err(cut_back(
                                file,
                                good_len,
                                bytes,
                                written,
                                io::ErrorKind::WriteZero.into(),
                            ))
                        }
                        Ok(n) => written += n,
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                        Err(e) => return Err(cut_back(file, good_len, bytes, written, e)),
                    }
                }
                *good_len += bytes.len() as u64;
                Ok(())
            }
            #[cfg(feature = "gzip")]
            Sink::Gzip(w) => w.write_all(bytes),
            #[cfg(feature = "zstd")]
            Sink::Zstd(w) => w.write_all(bytes),
            Sink::Writer(w) => w.write_all(bytes),
        }
    }

    /// Pushes buffered bytes to the OS (and, compressed, ends the current block).
    pub(crate) fn flush(&mut self) -> io::Result<()> {
        match self {
            Sink::File { .. } => Ok(()), // no user-space buffer: every write is already a syscall
            #[cfg(feature = "gzip")]
            Sink::Gzip(w) => w.flush(),
            #[cfg(feature = "zstd")]
            Sink::Zstd(w) => w.flush(),
            Sink::Writer(w) => w.flush(),
        }
    }

    /// Completes the stream (compression trailers) and flushes.
    pub(crate) fn finish(self) -> io::Result<()> {
        match self {
            Sink::File { file, .. } => {
                drop(file);
                Ok(())
            }
            #[cfg(feature = "gzip")]
            Sink::Gzip(w) => w.finish().map(drop),
            #[cfg(feature = "zstd")]
            Sink::Zstd(w) => w.finish().map(drop),
            Sink::Writer(mut w) => w.flush(),
        }
    }
}

/// After a failed write of `bytes` of which `written` reached the file: keep every complete line
/// that made it and cut off the partial one, so the file stays a valid prefix. Best effort: on a
/// device file (e.g. /dev/full) `set_len` fails and there is nothing to cut.
fn cut_back(
    file: &File,
    good_len: &mut u64,
    bytes: &[u8],
    written: usize,
    e: io::Error,
) -> io::Error {
    let complete = bytes[..written].iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    *good_len += complete as u64;
    let _ = file.set_len(*good_len);
    e
}
