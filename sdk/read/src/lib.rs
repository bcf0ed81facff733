//! Reading traces: a streaming line reader over a memory-mapped file or any `Read`, and the
//! [`validate`] module (the rules, the parallel validator and `repair`).
//!
//! A [`Reader`] hands out lines ([`RawLine`]) or blocks of whole lines ([`Chunk`]) borrowed from
//! its buffer, with 1-based line numbers and byte offsets. Every source (a plain file, stdin (`-`),
//! `.gz`, `.zst` and `.br` traces) streams through a buffer that holds one chunk (8 MiB by default)
//! plus the longest line, so memory does not grow with the size of the trace.
//!
//! Files are read, never memory-mapped: a mapped file that another process truncates makes the
//! next read of a vanished page kill the reader with SIGBUS, and a validator must never die of a
//! signal. A plain file that shrinks while it is read ends early and is reported through
//! [`Reader::truncated`], like a cut compressed stream. A line may be at most [`MAX_LINE`] bytes
//! long (spec/rules.md, RD1): a source without newlines (`/dev/zero`) is an error, not a buffer
//! that grows until memory runs out.
//!
//! ```
//! use jets_format::Line;
//! use jets_read::Reader;
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let dir = tempfile::tempdir()?;
//! # let path = dir.path().join("t.jets");
//! # std::fs::write(&path, "{\"type\":\"header\",\"version\":\"2.0\",\"metadata\":{}}\n{\"type\":\"footer\"}\n")?;
//! let mut reader = Reader::open(&path)?;
//! while let Some(raw) = reader.next_line() {
//!     let raw = raw?;
//!     match raw.parse()? {
//!         Line::Header(h) => println!("line {}: version {}", raw.number, h.version),
//!         other => println!("line {} at byte {}: {:?}", raw.number, raw.offset, other.line_type()),
//!     }
//! }
//! # Ok(()) }
//! ```
//!
//! Two kinds of end are told apart. A last line without a newline that does not parse is *torn*
//! ([`LineError::Torn`]): the writer stopped in the middle of it. A compressed stream that stops
//! before its end marker (a crashed writer's `.gz`) yields all its complete lines, then the reader
//! reports [`Reader::truncated`]; so does a plain file that shrank while it was read.

#![deny(clippy::print_stdout)]

mod lines;
mod source;
pub mod validate;

use std::fs::File;
use std::io::{self, Read};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use memchr::{memchr, memrchr};

pub use lines::{Chunk, LineError, RawLine, RawLines};
pub use source::Compression;

/// The default size of a chunk: large enough to amortize the per-chunk work of a parallel
/// consumer, small enough to stay in the last-level cache of a few cores.
pub const DEFAULT_CHUNK: usize = 8 << 20;

/// The longest line a reader accepts, in bytes, without its newline (spec/rules.md, RD1): far
/// above any line a tracer writes, low enough that a source without newlines stops with an error
/// naming the line long before memory runs out.
pub const MAX_LINE: usize = 64 << 20;

/// Why a trace could not be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReadError {
    /// Opening or reading failed.
    #[error("{name}: {source}")]
    Io {
        /// The file (or `<stdin>`).
        name: String,
        /// The underlying error.
        source: io::Error,
    },
    /// The trace needs something this build or mode does not offer.
    #[error("{name}: {what}")]
    Unsupported {
        /// The file.
        name: String,
        /// What is missing.
        what: String,
    },
    /// A line is longer than the limit ([`MAX_LINE`] unless set with [`Reader::with_max_line`]):
    /// reading stops there (spec/rules.md, RD1).
    #[error(
        "{name}:{line}: the line is longer than {limit} bytes without a newline; JETS readers \
         stop there (spec/rules.md, RD1)"
    )]
    LineTooLong {
        /// The file.
        name: String,
        /// 1-based number of the line.
        line: u64,
        /// The limit in bytes.
        limit: usize,
    },
}

/// A streaming reader of trace lines. See the [module documentation](self).
pub struct Reader {
    name: String,
    data: Stream,
    /// The part of the buffer handed out by the current chunk and not yet by `next_line`.
    pos: usize,
    lim: usize,
    /// Number and offset of the line at `pos`.
    line: u64,
    offset: u64,
    chunk: usize,
    max_line: usize,
    compression: Compression,
    source_len: Option<u64>,
    source_read: Arc<AtomicU64>,
    truncated: Option<String>,
    /// In follow mode, set to stop waiting for more data.
    follow: Option<Arc<AtomicBool>>,
}

struct Stream {
    r: Box<dyn Read + Send>,
    /// The file behind a plain trace, to tell how long it is now (it may shrink while read).
    file: Option<File>,
    buf: Vec<u8>,
    /// Bytes of `buf` holding data; `buf[lim..len]` is a line not yet complete.
    len: usize,
    eof: bool,
}

impl std::fmt::Debug for Reader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reader")
            .field("name", &self.name)
            .field("compression", &self.compression)
            .field("line", &self.line)
            .field("offset", &self.offset)
            .finish_non_exhaustive()
    }
}

impl Reader {
    /// Opens a trace: `-` is stdin; gzip and zstd are detected from the first bytes, brotli from a
    /// `.br` name.
    pub fn open(path: impl AsRef<Path>) -> Result<Reader, ReadError> {
        let path = path.as_ref();
        if path.as_os_str() == "-" {
            return Reader::from_read(io::stdin(), "<stdin>");
        }
        let (name, file, len, compression) = open_detect(path)?;
        Reader::from_file(file, &name, compression, len)
    }

    /// Reads a trace from any `Read` (e.g. a socket or a decompressor you built); compression is
    /// detected from the first bytes (and, for brotli, from `name` ending in `.br`).
    pub fn from_read(r: impl Read + Send + 'static, name: &str) -> Result<Reader, ReadError> {
        let mut buffered = io::BufReader::with_capacity(64 * 1024, r);
        let head = source::peek(&mut buffered).map_err(|source| io_err(name, source))?;
        let compression = Compression::detect(&head, name);
        Reader::from_stream(Box::new(buffered), None, name, compression, None)
    }

    /// Follows a plain file that a running simulator is still writing: at the end of the data it
    /// waits for more instead of stopping, and hands out only complete lines. It stops when
    /// `stop` is set (the partial line being written is then not handed out), or when the file
    /// shrinks under it ([`truncated`](Self::truncated) then says so).
    pub fn follow(path: impl AsRef<Path>, stop: Arc<AtomicBool>) -> Result<Reader, ReadError> {
        let (name, file, len, compression) = open_detect(path.as_ref())?;
        if compression != Compression::None {
            return Err(ReadError::Unsupported {
                name,
                what: format!(
                    "following a growing {compression:?} trace is not supported; follow the \
                     uncompressed trace instead"
                ),
            });
        }
        let mut reader = Reader::from_file(file, &name, compression, len)?;
        reader.follow = Some(stop);
        Ok(reader)
    }

    /// Stops following at the end of the data that is there now: the rest, up to the current end
    /// of the file, is handed out as if the file were complete (an unterminated last line
    /// included). For a follower that has seen the last line a writer writes, the footer: what
    /// follows it is an error to report, not a line to wait for.
    pub fn finish_following(&mut self) {
        self.follow = None;
    }

    /// Whether the reader follows a growing file (and has not been told to finish).
    pub fn following(&self) -> bool {
        self.follow.is_some()
    }

    fn from_file(
        file: io::BufReader<File>,
        name: &str,
        compression: Compression,
        len: u64,
    ) -> Result<Reader, ReadError> {
        // Only a regular file has a length to compare with (a FIFO or /dev/zero has none).
        let plain = compression == Compression::None && file_is_regular(file.get_ref());
        let check = if plain { file.get_ref().try_clone().ok() } else { None };
        Reader::from_stream(Box::new(file), check, name, compression, Some(len))
    }

    fn from_stream(
        raw: Box<dyn Read + Send>,
        file: Option<File>,
        name: &str,
        compression: Compression,
        source_len: Option<u64>,
    ) -> Result<Reader, ReadError> {
        let count = Arc::new(AtomicU64::new(0));
        let r = source::decoder(raw, compression, count.clone(), name)?;
        let data = Stream { r, file, buf: Vec::new(), len: 0, eof: false };
        Ok(Reader {
            name: name.to_owned(),
            data,
            pos: 0,
            lim: 0,
            line: 1,
            offset: 0,
            chunk: DEFAULT_CHUNK,
            max_line: MAX_LINE,
            compression,
            source_len,
            source_read: count,
            truncated: None,
            follow: None,
        })
    }

    /// Sets the chunk size (at least 1 byte; a chunk always holds at least one whole line).
    pub fn with_chunk_size(mut self, bytes: usize) -> Reader {
        self.chunk = bytes.max(1);
        self
    }

    /// Sets the longest line accepted, in bytes (at least 1; [`MAX_LINE`] by default).
    pub fn with_max_line(mut self, bytes: usize) -> Reader {
        self.max_line = bytes.max(1);
        self
    }

    /// The name given at open (the path, or `<stdin>`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The compression detected.
    pub fn compression(&self) -> Compression {
        self.compression
    }

    /// The size of the source file in bytes (compressed size for compressed traces), when known.
    pub fn source_len(&self) -> Option<u64> {
        self.source_len
    }

    /// How many bytes of the source (compressed, for compressed traces) have been consumed: the
    /// position of a progress bar whose length is [`source_len`](Self::source_len).
    pub fn source_pos(&self) -> u64 {
        self.source_read.load(Ordering::Relaxed)
    }

    /// Set once the end was reached, when the source ended early: a compressed stream that
    /// stopped before its end marker (or was corrupt), or a plain file that shrank while it was
    /// read. The text says what happened. Every complete line before the damage has been handed
    /// out.
    pub fn truncated(&self) -> Option<&str> {
        self.truncated.as_deref()
    }

    /// The next block of whole lines, or `None` at the end of the trace. The chunk borrows the
    /// reader's buffer, so it must be dropped before the next call.
    pub fn next_chunk(&mut self) -> Result<Option<Chunk<'_>>, ReadError> {
        if self.pos == self.lim && !self.fill()? {
            return Ok(None);
        }
        let (pos, lim, line, offset) = (self.pos, self.lim, self.line, self.offset);
        let bytes = &self.buf()[pos..lim];
        let mut lines = memchr::memchr_iter(b'\n', bytes).count() as u64;
        if bytes.last() != Some(&b'\n') {
            lines += 1; // the unterminated last line
        }
        self.line += lines;
        self.offset += (lim - pos) as u64;
        self.pos = lim;
        let chunk = Chunk { bytes: &self.buf()[pos..lim], first_line: line, offset };
        Ok(Some(chunk))
    }

    /// The next line, or `None` at the end of the trace.
    pub fn next_line(&mut self) -> Option<Result<RawLine<'_>, ReadError>> {
        if self.pos == self.lim {
            match self.fill() {
                Ok(true) => {}
                Ok(false) => return None,
                Err(e) => return Some(Err(e)),
            }
        }
        let (pos, lim) = (self.pos, self.lim);
        let (len, used, terminated) = match memchr(b'\n', &self.buf()[pos..lim]) {
            Some(i) => (i, i + 1, true),
            None => (lim - pos, lim - pos, false),
        };
        let line = RawLine { number: self.line, offset: self.offset, bytes: &[], terminated };
        self.pos += used;
        self.line += 1;
        self.offset += used as u64;
        Some(Ok(RawLine { bytes: &self.buf()[pos..pos + len], ..line }))
    }

    fn buf(&self) -> &[u8] {
        &self.data.buf[..self.data.len]
    }

    /// (length expected, length now) of a plain file that is now shorter than it was at open or
    /// than what has been read of it.
    fn shrunk(&self) -> Option<(u64, u64)> {
        let now = self.data.file.as_ref()?.metadata().ok()?.len();
        let expected = self.source_pos().max(self.source_len.unwrap_or(0));
        (now < expected).then_some((expected, now))
    }

    /// Makes `pos..lim` the next chunk of whole lines; false at the end.
    fn fill(&mut self) -> Result<bool, ReadError> {
        let chunk = self.chunk;
        // Keep the incomplete line at the front, then read until the buffer is full.
        let s = &mut self.data;
        s.buf.copy_within(self.lim..s.len, 0);
        s.len -= self.lim;
        self.pos = 0;
        self.lim = 0;
        // Grow towards the chunk size only while the data fills the buffer, so a small trace does
        // not pay for a chunk-sized buffer.
        if s.buf.len() < chunk && s.len == s.buf.len() {
            s.buf.resize((s.buf.len() * 2).max(64 * 1024).min(chunk), 0);
        }
        loop {
            let s = &mut self.data;
            while s.len < s.buf.len() && !s.eof {
                match s.r.read(&mut s.buf[s.len..]) {
                    Ok(0) => s.eof = true,
                    Ok(n) => {
                        s.len += n;
                        if self.follow.is_some()
                            && memchr(b'\n', &s.buf[s.len - n..s.len]).is_some()
                        {
                            break; // hand out lines as soon as they arrive
                        }
                    }
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) if self.compression != Compression::None => {
                        self.truncated = Some(e.to_string());
                        s.eof = true;
                    }
                    Err(source) => return Err(io_err(&self.name, source)),
                }
            }
            if let Some(i) = memrchr(b'\n', &s.buf[..s.len]) {
                if !s.eof || self.follow.is_some() || s.len == i + 1 {
                    self.lim = i + 1;
                    return Ok(true);
                }
            }
            if s.eof {
                // A plain file that is now shorter than what was read of it was truncated (or
                // rewritten) under the reader: what was read is stale, so stop and say so.
                if self.truncated.is_none() {
                    if let Some((was, now)) = self.shrunk() {
                        self.truncated = Some(format!(
                            "the file shrank from {was} to {now} bytes while it was read"
                        ));
                        self.follow = None;
                    }
                }
                let s = &mut self.data;
                let Some(stop) = &self.follow else {
                    self.lim = s.len; // all that is left, with an unterminated last line
                    return Ok(s.len > 0);
                };
                // A growing file: wait for the writer, unless told to stop; the partial line it
                // is writing is never handed out.
                if stop.load(Ordering::Relaxed) {
                    return Ok(false);
                }
                std::thread::sleep(Duration::from_millis(50));
                s.eof = false;
                continue;
            }
            // One line longer than the buffer: grow it, up to the limit.
            if s.len > self.max_line {
                return Err(ReadError::LineTooLong {
                    name: self.name.clone(),
                    line: self.line,
                    limit: self.max_line,
                });
            }
            let grown = (s.buf.len() * 2).min(self.max_line + 1);
            s.buf.resize(grown, 0);
        }
    }
}

/// Opens a file and detects its compression from its first bytes (and name), without consuming
/// them (a FIFO cannot be read twice).
fn open_detect(path: &Path) -> Result<(String, io::BufReader<File>, u64, Compression), ReadError> {
    let name = path.display().to_string();
    let (file, len) = source::open_file(path)?;
    let mut file = io::BufReader::with_capacity(64 * 1024, file);
    let head = source::peek(&mut file).map_err(|source| io_err(&name, source))?;
    let compression = Compression::detect(&head, &name);
    Ok((name, file, len, compression))
}

fn io_err(name: &str, source: io::Error) -> ReadError {
    ReadError::Io { name: name.to_owned(), source }
}

fn file_is_regular(file: &File) -> bool {
    file.metadata().map(|m| m.is_file()).unwrap_or(false)
}

#[cfg(test)]
mod tests;
