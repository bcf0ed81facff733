//! Where the bytes come from: a file read as a stream (never mapped), or a (possibly decompressed) stream.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::ReadError;

/// The compression of a trace, detected from its first bytes (gzip, zstd) or its name (brotli,
/// which has no magic number).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compression {
    /// Plain JSON Lines.
    None,
    /// gzip (`.gz`).
    Gzip,
    /// Zstandard (`.zst`).
    Zstd,
    /// Brotli (`.br`), as the rjets writer produces.
    Brotli,
}

impl Compression {
    /// Detects the compression from the first bytes of the data and the file name.
    pub fn detect(head: &[u8], name: &str) -> Compression {
        if head.starts_with(&[0x1f, 0x8b]) {
            Compression::Gzip
        } else if head.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
            Compression::Zstd
        } else if name.ends_with(".br") {
            Compression::Brotli
        } else {
            Compression::None
        }
    }
}

/// Counts the bytes read from the underlying file (before decompression), for progress bars.
struct Counted<R> {
    inner: R,
    count: Arc<AtomicU64>,
}

impl<R: Read> Read for Counted<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.count.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }
}

/// Wraps `raw` in the decoder for `compression`.
pub(super) fn decoder(
    raw: Box<dyn Read + Send>,
    compression: Compression,
    count: Arc<AtomicU64>,
    name: &str,
) -> Result<Box<dyn Read + Send>, ReadError> {
    // Buffered so that the magic-number peek does not lose bytes and decoders read in large blocks.
    let counted = BufReader::with_capacity(256 * 1024, Counted { inner: raw, count });
    let unsupported = |what: &str| ReadError::Unsupported {
        name: name.to_owned(),
        what: format!("{what} compression is not enabled in this build of the JETS SDK"),
    };
    match compression {
        Compression::None => Ok(Box::new(counted)),
        #[cfg(feature = "gzip")]
        Compression::Gzip => Ok(Box::new(flate2::read::MultiGzDecoder::new(counted))),
        #[cfg(feature = "zstd")]
        Compression::Zstd => zstd::stream::read::Decoder::with_buffer(counted)
            .map(|d| Box::new(d) as Box<dyn Read + Send>)
            .map_err(|source| ReadError::Io { name: name.to_owned(), source }),
        #[cfg(feature = "brotli")]
        Compression::Brotli => {
            Ok(Box::new(brotli_decompressor::Decompressor::new(counted, 64 * 1024)))
        }
        #[allow(unreachable_patterns)]
        other => Err(unsupported(&format!("{other:?}"))),
    }
}

/// Reads the first bytes of `r` without consuming them.
pub(super) fn peek<R: BufRead>(r: &mut R) -> io::Result<Vec<u8>> {
    Ok(r.fill_buf()?.iter().take(4).copied().collect())
}

/// Opens `path` for streaming (no mmap), returning the raw reader and the file's length.
pub(super) fn open_file(path: &Path) -> Result<(File, u64), ReadError> {
    let name = path.display().to_string();
    let file = File::open(path).map_err(|source| ReadError::Io { name: name.clone(), source })?;
    let len = file.metadata().map_err(|source| ReadError::Io { name, source })?.len();
    Ok((file, len))
}
