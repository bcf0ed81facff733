use std::io::{Cursor, Write};

use super::*;

fn sample(lines: usize) -> String {
    let mut s = String::from("{\"type\":\"header\",\"version\":\"2.0\",\"metadata\":{}}\n");
    for i in 1..lines {
        // Lines of varied length so chunk edges fall everywhere.
        s.push_str(&format!(
            "{{\"clk\":{i},\"type\":\"event\",\"name\":\"{}\"}}\n",
            "x".repeat(i % 37)
        ));
    }
    s
}

/// Every line, with number, offset and termination, via `next_line`.
fn collect_lines(mut r: Reader) -> Vec<(u64, u64, Vec<u8>, bool)> {
    let mut out = Vec::new();
    while let Some(l) = r.next_line() {
        let l = l.expect("read");
        out.push((l.number, l.offset, l.bytes.to_vec(), l.terminated));
    }
    out
}

/// Every line via `next_chunk`.
fn collect_chunks(mut r: Reader) -> Vec<(u64, u64, Vec<u8>, bool)> {
    let mut out = Vec::new();
    while let Some(c) = r.next_chunk().expect("read") {
        out.extend(c.lines().map(|l| (l.number, l.offset, l.bytes.to_vec(), l.terminated)));
    }
    out
}

fn expected(text: &str) -> Vec<(u64, u64, Vec<u8>, bool)> {
    let mut out = Vec::new();
    let mut offset = 0u64;
    for (i, piece) in text.split_inclusive('\n').enumerate() {
        let terminated = piece.ends_with('\n');
        let body = piece.strip_suffix('\n').unwrap_or(piece);
        out.push((i as u64 + 1, offset, body.as_bytes().to_vec(), terminated));
        offset += piece.len() as u64;
    }
    out
}

#[test]
fn files_and_streams_agree_at_every_chunk_size() {
    let dir = tempfile::tempdir().unwrap();
    for text in [sample(300), format!("{}{{\"type\":\"ev", sample(50)), String::new()] {
        let path = dir.path().join("t.jets");
        std::fs::write(&path, &text).unwrap();
        let want = expected(&text);
        for chunk in [1, 7, 64, 1000, DEFAULT_CHUNK] {
            let open = || Reader::open(&path).unwrap().with_chunk_size(chunk);
            let stream = || {
                Reader::from_read(Cursor::new(text.clone().into_bytes()), "mem")
                    .unwrap()
                    .with_chunk_size(chunk)
            };
            assert_eq!(collect_lines(open()), want, "file lines, chunk {chunk}");
            assert_eq!(collect_chunks(open()), want, "file chunks, chunk {chunk}");
            assert_eq!(collect_lines(stream()), want, "stream lines, chunk {chunk}");
            assert_eq!(collect_chunks(stream()), want, "stream chunks, chunk {chunk}");
        }
    }
}

#[test]
fn compressed_traces_read_like_plain_ones() {
    let dir = tempfile::tempdir().unwrap();
    let text = sample(2000);
    let want = expected(&text);

    let gz = dir.path().join("t.jets.gz");
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    enc.write_all(text.as_bytes()).unwrap();
    std::fs::write(&gz, enc.finish().unwrap()).unwrap();

    let zst = dir.path().join("t.jets.zst");
    std::fs::write(&zst, zstd::encode_all(text.as_bytes(), 3).unwrap()).unwrap();

    let br = dir.path().join("t.jets.br");
    let mut compressed = Vec::new();
    {
        let mut w = brotli_writer(&mut compressed);
        w.write_all(text.as_bytes()).unwrap();
    }
    std::fs::write(&br, compressed).unwrap();

    for (path, c) in [(gz, Compression::Gzip), (zst, Compression::Zstd), (br, Compression::Brotli)]
    {
        let r = Reader::open(&path).unwrap().with_chunk_size(1000);
        assert_eq!(r.compression(), c);
        let len = std::fs::metadata(&path).unwrap().len();
        assert_eq!(r.source_len(), Some(len));
        let mut r2 = Reader::open(&path).unwrap();
        while r2.next_chunk().unwrap().is_some() {}
        assert_eq!(r2.source_pos(), len, "{path:?} progress reaches the file size");
        assert!(r2.truncated().is_none());
        assert_eq!(collect_chunks(r), want, "{path:?}");
    }
}

/// A hand-rolled brotli stream would be a second encoder; instead we use the stored-block form
/// of the format (window bits + uncompressed meta-blocks), which every brotli decoder accepts.
fn brotli_writer(out: &mut Vec<u8>) -> impl Write + '_ {
    struct Stored<'a>(&'a mut Vec<u8>, Vec<u8>);
    impl Write for Stored<'_> {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.1.extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    impl Drop for Stored<'_> {
        fn drop(&mut self) {
            let mut bits = BitWriter::default();
            bits.put(0, 1); // WBITS = 16
            for block in self.1.chunks(1 << 16) {
                bits.put(0, 1); // ISLAST = 0
                bits.put(0, 2); // MNIBBLES = 4
                bits.put((block.len() - 1) as u64, 16);
                bits.put(1, 1); // ISUNCOMPRESSED
                bits.align();
                bits.bytes.extend_from_slice(block);
            }
            bits.put(1, 1); // ISLAST
            bits.put(1, 1); // ISLASTEMPTY
            bits.align();
            self.0.extend_from_slice(&bits.bytes);
        }
    }
    #[derive(Default)]
    struct BitWriter {
        bytes: Vec<u8>,
        bit: u32,
    }
    impl BitWriter {
        fn put(&mut self, v: u64, n: u32) {
            for i in 0..n {
                if self.bit == 0 {
                    self.bytes.push(0);
                }
                let last = self.bytes.len() - 1;
                self.bytes[last] |= (((v >> i) & 1) as u8) << self.bit;
                self.bit = (self.bit + 1) % 8;
            }
        }
        fn align(&mut self) {
            self.bit = 0;
        }
    }
    Stored(out, Vec::new())
}

#[test]
fn truncated_gzip_yields_complete_lines_then_reports_the_tear() {
    let text = sample(5000);
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    enc.write_all(text.as_bytes()).unwrap();
    let full = enc.finish().unwrap();
    let cut = &full[..full.len() * 2 / 3];
    let mut r = Reader::from_read(Cursor::new(cut.to_vec()), "crash.jets.gz").unwrap();
    let mut lines = Vec::new();
    while let Some(l) = r.next_line() {
        let l = l.unwrap();
        lines.push((l.number, l.bytes.to_vec(), l.terminated));
    }
    assert!(r.truncated().is_some(), "a cut gzip stream is reported");
    let want = expected(&text);
    let complete: Vec<_> = lines.iter().filter(|l| l.2).collect();
    assert!(complete.len() > 100, "the complete lines before the cut are yielded");
    for (got, want) in complete.iter().zip(&want) {
        assert_eq!((got.0, &got.1), (want.0, &want.2));
    }
    // Whatever follows the last newline is a prefix of the next line, marked unterminated.
    if let Some(last) = lines.last().filter(|l| !l.2) {
        assert!(want[last.0 as usize - 1].2.starts_with(&last.1));
    }
}

#[test]
fn truncated_zstd_is_reported() {
    let text = sample(5000);
    let full = zstd::encode_all(text.as_bytes(), 3).unwrap();
    let cut = &full[..full.len() / 2];
    let mut r = Reader::from_read(Cursor::new(cut.to_vec()), "crash.jets.zst").unwrap();
    while let Some(l) = r.next_line() {
        l.unwrap();
    }
    assert!(r.truncated().is_some());
}

#[test]
fn torn_last_line_is_not_an_invalid_line() {
    let text = "{\"type\":\"header\",\"version\":\"2.0\",\"metadata\":{}}\n{oops}\n{\"type\":\"foo";
    let mut r = Reader::from_read(Cursor::new(text), "mem").unwrap();
    let mut errors = Vec::new();
    while let Some(l) = r.next_line() {
        let l = l.unwrap();
        if let Err(e) = l.parse() {
            errors.push(e);
        }
    }
    assert!(matches!(errors[0], LineError::Invalid { line: 2, .. }), "{errors:?}");
    assert!(matches!(errors[1], LineError::Torn { line: 3, .. }), "{errors:?}");
}

#[test]
fn a_line_longer_than_the_buffer_grows_it() {
    let long = format!("{{\"type\":\"footer\",\"pad\":\"{}\"}}\n", "y".repeat(10_000));
    let text = format!("a\n{long}b\n");
    let r = Reader::from_read(Cursor::new(text.clone()), "mem").unwrap().with_chunk_size(16);
    assert_eq!(collect_lines(r), expected(&text));
}

#[test]
fn follow_waits_for_complete_lines_and_stops_on_request() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("live.jets");
    let mut f = std::fs::File::create(&path).unwrap();
    f.write_all(b"first\nsec").unwrap();
    f.flush().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let mut r = Reader::follow(&path, stop.clone()).unwrap();
    let l = r.next_line().unwrap().unwrap();
    assert_eq!((l.number, l.bytes), (1, &b"first"[..]));

    let writer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(120));
        f.write_all(b"ond\nthi").unwrap();
        f.flush().unwrap();
        std::thread::sleep(Duration::from_millis(120));
        stop.store(true, Ordering::Relaxed);
    });
    let l = r.next_line().unwrap().unwrap();
    assert_eq!((l.number, l.offset, l.bytes, l.terminated), (2, 6, &b"second"[..], true));
    // "thi" is still being written when the stop comes: it is not handed out.
    assert!(r.next_line().is_none());
    writer.join().unwrap();
}

/// Issue 17, item 7: a file truncated by another process while it is read ends early with a
/// report; it used to be memory-mapped, and the next read of a vanished page raised SIGBUS.
#[test]
fn a_file_truncated_while_read_is_reported_not_a_signal() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.jets");
    let text = sample(200_000);
    assert!(text.len() > 4 << 20);
    std::fs::write(&path, &text).unwrap();
    let mut r = Reader::open(&path).unwrap().with_chunk_size(64 << 10);
    let first = r.next_chunk().unwrap().unwrap().bytes.len();
    std::fs::OpenOptions::new().write(true).open(&path).unwrap().set_len(1000).unwrap();
    let mut read = first;
    while let Some(c) = r.next_chunk().unwrap() {
        read += c.bytes.len();
    }
    assert!(read < text.len(), "{read} bytes of {}", text.len());
    let why = r.truncated().expect("the shrink is reported");
    assert!(why.contains("shrank") && why.contains("to 1000 bytes"), "{why}");

    // The validator reports it as the end of a cut stream (E019), on any number of threads.
    for threads in [1, 2] {
        std::fs::write(&path, &text).unwrap();
        let mut r = Reader::open(&path).unwrap().with_chunk_size(64 << 10);
        let _ = r.next_chunk().unwrap();
        std::fs::OpenOptions::new().write(true).open(&path).unwrap().set_len(1000).unwrap();
        let mut rules = Vec::new();
        crate::validate::Validator::new()
            .threads(threads)
            .run(&mut r, |d| rules.push(d.rule))
            .unwrap();
        assert_eq!(rules.last(), Some(&crate::validate::Rule::TruncatedStream), "{rules:?}");
    }
}

/// Issue 17, item 10: a source without newlines stops at the line limit with an error naming the
/// line, instead of growing the buffer until memory runs out.
#[test]
fn a_line_without_end_stops_at_the_limit() {
    use std::io::Read as _;
    let text = b"{\"type\":\"header\"}\n".to_vec();
    let endless = Cursor::new(text).chain(std::io::repeat(b'x').take(1 << 24));
    let mut r = Reader::from_read(endless, "endless").unwrap().with_max_line(100_000);
    assert!(r.next_line().unwrap().is_ok());
    match r.next_line() {
        Some(Err(ReadError::LineTooLong { line: 2, limit: 100_000, name })) => {
            assert_eq!(name, "endless")
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(MAX_LINE, 64 << 20, "spec/rules.md RD1 states this figure");
}
