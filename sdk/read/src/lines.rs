//! Lines and chunks of lines, borrowed from the reader's buffer.

use memchr::memchr;

use jets_format::Line;

/// One line of a trace, without its newline, borrowed from the reader.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RawLine<'a> {
    /// 1-based line number.
    pub number: u64,
    /// Byte offset of the line's first byte in the (decompressed) trace.
    pub offset: u64,
    /// The line's bytes, without the `\n` (a `\r` before it is kept; JSON treats it as space).
    pub bytes: &'a [u8],
    /// Whether a `\n` ended the line. Only the very last line of a trace can lack one: it is the
    /// line a crashed writer was in the middle of, or a file written without a final newline.
    pub terminated: bool,
}

/// Why a line did not parse as a JETS line.
#[derive(Debug, thiserror::Error)]
pub enum LineError {
    /// The last line has no newline and is not valid JSON: a writer stopped in the middle of it.
    #[error("line {line} is torn: the trace ends in the middle of it ({source})")]
    Torn {
        /// 1-based line number.
        line: u64,
        /// What the parser said.
        source: serde_json::Error,
    },
    /// A complete line that is not a valid JETS line.
    #[error("line {line}: {source}")]
    Invalid {
        /// 1-based line number.
        line: u64,
        /// What the parser said (with the column).
        source: serde_json::Error,
    },
}

impl<'a> RawLine<'a> {
    /// Parses the line into the format model; strings borrow from the reader's buffer where they
    /// need no unescaping.
    ///
    /// ```
    /// use jets_read::{LineError, Reader};
    /// let text = "{\"type\":\"header\",\"version\":\"2.0\",\"metadata\":{}}\n{\"type\":\"foo";
    /// let mut reader = Reader::from_read(std::io::Cursor::new(text), "mem")?;
    /// let first = reader.next_line().unwrap()?;
    /// assert!(first.parse().is_ok());
    /// let last = reader.next_line().unwrap()?;
    /// assert!(matches!(last.parse(), Err(LineError::Torn { line: 2, .. })));
    /// # Ok::<(), jets_read::ReadError>(())
    /// ```
    pub fn parse(&self) -> Result<Line<'a>, LineError> {
        serde_json::from_slice(self.bytes).map_err(|source| {
            if self.terminated {
                LineError::Invalid { line: self.number, source }
            } else {
                LineError::Torn { line: self.number, source }
            }
        })
    }

    /// The line as text, with invalid UTF-8 replaced (for messages).
    pub fn text_lossy(&self) -> std::borrow::Cow<'a, str> {
        String::from_utf8_lossy(self.bytes)
    }
}

/// A block of whole lines handed out by [`Reader::next_chunk`](super::Reader::next_chunk).
///
/// Every line in a chunk ends with `\n`, except possibly the last line of the last chunk.
#[derive(Clone, Copy, Debug)]
pub struct Chunk<'a> {
    /// The bytes of the lines.
    pub bytes: &'a [u8],
    /// Number of the chunk's first line (1-based).
    pub first_line: u64,
    /// Byte offset of the chunk's first byte in the (decompressed) trace.
    pub offset: u64,
}

impl<'a> Chunk<'a> {
    /// The chunk's lines.
    pub fn lines(&self) -> RawLines<'a> {
        RawLines { rest: self.bytes, number: self.first_line, offset: self.offset }
    }

    /// Splits the chunk at line boundaries into at most `parts` pieces of similar size, with their
    /// first line numbers counted (one `memchr` pass over each piece but the last).
    pub fn split(&self, parts: usize) -> Vec<Chunk<'a>> {
        let mut out = Vec::with_capacity(parts.max(1));
        let mut rest = *self;
        for i in (1..parts.max(1)).rev() {
            let target = rest.bytes.len() / (i + 1);
            if target == 0 {
                break;
            }
            let cut = match memchr(b'\n', &rest.bytes[target..]) {
                Some(p) => target + p + 1,
                None => break,
            };
            let (head, tail) = rest.bytes.split_at(cut);
            let lines = memchr::memchr_iter(b'\n', head).count() as u64;
            out.push(Chunk { bytes: head, first_line: rest.first_line, offset: rest.offset });
            rest = Chunk {
                bytes: tail,
                first_line: rest.first_line + lines,
                offset: rest.offset + cut as u64,
            };
        }
        out.push(rest);
        out
    }
}

/// Iterator over the lines of a [`Chunk`].
#[derive(Clone, Debug)]
pub struct RawLines<'a> {
    rest: &'a [u8],
    number: u64,
    offset: u64,
}

impl<'a> Iterator for RawLines<'a> {
    type Item = RawLine<'a>;

    fn next(&mut self) -> Option<RawLine<'a>> {
        if self.rest.is_empty() {
            return None;
        }
        let (bytes, terminated, used) = match memchr(b'\n', self.rest) {
            Some(i) => (&self.rest[..i], true, i + 1),
            None => (self.rest, false, self.rest.len()),
        };
        let line = RawLine { number: self.number, offset: self.offset, bytes, terminated };
        self.rest = &self.rest[used..];
        self.number += 1;
        self.offset += used as u64;
        Some(line)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_keeps_every_line_once_with_its_number() {
        let text: String = (1..=100).map(|i| format!("line {i}\n")).collect();
        let chunk = Chunk { bytes: text.as_bytes(), first_line: 1, offset: 0 };
        for parts in 1..6 {
            let pieces = chunk.split(parts);
            assert!(pieces.len() <= parts.max(1));
            let all: Vec<RawLine<'_>> = pieces.iter().flat_map(|c| c.lines()).collect();
            assert_eq!(all.len(), 100);
            for (i, l) in all.iter().enumerate() {
                assert_eq!(l.number, i as u64 + 1);
                assert_eq!(l.bytes, format!("line {}", i + 1).as_bytes());
                assert_eq!(&text.as_bytes()[l.offset as usize..][..l.bytes.len()], l.bytes);
            }
        }
    }

    #[test]
    fn unterminated_tail() {
        let chunk = Chunk { bytes: b"a\nbc", first_line: 7, offset: 10 };
        let lines: Vec<_> = chunk.lines().collect();
        assert_eq!(lines.len(), 2);
        assert!(lines[0].terminated);
        assert_eq!((lines[1].number, lines[1].offset, lines[1].terminated), (8, 12, false));
    }
}
