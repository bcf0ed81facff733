//! What the damaged-input tests share (`damaged_input.rs`, `damaged_traces.rs`): a seeded
//! generator, the damages it makes to text and to compressed bytes, and a run of `jets` that
//! counts a hang after [`TIMEOUT`]. Each test file keeps its own seed and [`Damages`], so its
//! damages stay what they were.

use std::ffi::OsString;
use std::io::Write;
use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// How long one run of `jets` may take before it counts as a hang.
pub const TIMEOUT: Duration = Duration::from_secs(20);

/// `n` damages of an input, times `JETS_DAMAGE_SCALE` when it is set (the first `n` are the same
/// either way).
pub fn rounds(n: usize) -> usize {
    let scale = std::env::var("JETS_DAMAGE_SCALE").ok().and_then(|s| s.parse().ok());
    n * scale.unwrap_or(1)
}

/// A xorshift64 generator.
pub struct Rng(u64);

impl Rng {
    /// The generator of stream `stream` (one per input) of a test file's `seed`.
    pub fn new(seed: u64, stream: u64) -> Rng {
        // Different streams for different inputs, never the all-zero state.
        let mut r = Rng((seed ^ stream.wrapping_mul(0x9e37_79b9_7f4a_7c15)) | 1);
        for _ in 0..8 {
            r.next();
        }
        r
    }

    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    /// A number in `0..n` (`n` > 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// Bytes a replacement draws from: JSON and CSV syntax, line breaks, a NUL, invalid UTF-8.
pub const BAD_BYTES: &[u8] = b"{}[]\",:\n\r\t 0-9.eE\\x\0\xff\xc3";

/// The lines of `text`, each with its `\n` when it has one.
fn lines_of(text: &[u8]) -> Vec<&[u8]> {
    text.split_inclusive(|&b| b == b'\n').collect()
}

/// The spans of the numbers in `text` (a digit run with its sign, fraction and exponent).
fn numbers(text: &[u8]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < text.len() {
        if text[i].is_ascii_digit() {
            let mut s = i;
            if s > 0 && text[s - 1] == b'-' {
                s -= 1;
            }
            let mut e = i;
            while e < text.len() && (text[e].is_ascii_digit() || b".eE+-".contains(&text[e])) {
                e += 1;
            }
            out.push((s, e));
            i = e;
        } else {
            i += 1;
        }
    }
    out
}

/// How a test file damages text: what replaces a number, and how often.
pub struct Damages {
    /// Replacements for a number.
    pub bad_numbers: &'static [&'static str],
    /// One damage in this many is followed by a second.
    pub twice_one_in: usize,
    /// The weight of a replaced number among the other kinds of damage (one each).
    pub number_weight: usize,
}

/// One damage to plain text (JSON Lines, CSV), or now and then two, and what they did.
pub fn damage_text(text: &[u8], rng: &mut Rng, d: &Damages) -> (Vec<u8>, String) {
    let (once, what) = damage_text_once(text, rng, d);
    if rng.below(d.twice_one_in) != 0 || once.is_empty() {
        return (once, what);
    }
    let (twice, then) = damage_text_once(&once, rng, d);
    (twice, format!("{what}, then {then}"))
}

/// One damage to plain text, and what it did.
fn damage_text_once(text: &[u8], rng: &mut Rng, d: &Damages) -> (Vec<u8>, String) {
    let mut out = text.to_vec();
    let lines = lines_of(text);
    let what = match rng.below(7 + d.number_weight) {
        0 => {
            let at = rng.below(text.len());
            out.truncate(at);
            format!("cut at byte {at}")
        }
        1 => {
            let mut places = Vec::new();
            for _ in 0..1 + rng.below(3) {
                let at = rng.below(out.len());
                out[at] ^= 1 << rng.below(8);
                places.push(at);
            }
            format!("bits flipped at bytes {places:?}")
        }
        2 => {
            let mut places = Vec::new();
            for _ in 0..1 + rng.below(3) {
                let at = rng.below(out.len());
                out[at] = *rng.pick(BAD_BYTES);
                places.push((at, out[at] as char));
            }
            format!("bytes replaced: {places:?}")
        }
        3 => {
            let n = rng.below(lines.len());
            out = lines
                .iter()
                .enumerate()
                .filter(|&(i, _)| i != n)
                .flat_map(|(_, l)| *l)
                .copied()
                .collect();
            format!("line {} deleted", n + 1)
        }
        4 => {
            let n = rng.below(lines.len());
            let mut v: Vec<&[u8]> = lines.clone();
            let mut dup = lines[n].to_vec();
            if !dup.ends_with(b"\n") {
                dup.push(b'\n');
                v[n] = &dup;
            }
            v.insert(n, &dup);
            out = v.concat();
            format!("line {} duplicated", n + 1)
        }
        5 => {
            let (a, b) = (rng.below(lines.len()), rng.below(lines.len()));
            let mut v: Vec<Vec<u8>> = lines.iter().map(|l| l.to_vec()).collect();
            for l in &mut v {
                if !l.ends_with(b"\n") {
                    l.push(b'\n');
                }
            }
            v.swap(a, b);
            out = v.concat();
            format!("lines {} and {} swapped", a + 1, b + 1)
        }
        k if k < 6 + d.number_weight => {
            let spans = numbers(text);
            if spans.is_empty() {
                return damage_text_once(text, rng, d);
            }
            let (s, e) = *rng.pick(&spans);
            let with = *rng.pick(d.bad_numbers);
            out.splice(s..e, with.bytes());
            format!(
                "number {:?} at byte {s} replaced by {with}",
                String::from_utf8_lossy(&text[s..e])
            )
        }
        _ => {
            let braces: Vec<usize> =
                text.iter().enumerate().filter(|&(_, &b)| b == b'}').map(|(i, _)| i).collect();
            if braces.is_empty() {
                return damage_text_once(text, rng, d);
            }
            let at = *rng.pick(&braces);
            out.remove(at);
            format!("closing brace at byte {at} dropped")
        }
    };
    (out, what)
}

/// One damage to compressed bytes: cut, flipped or replaced bytes.
pub fn damage_bytes(bytes: &[u8], rng: &mut Rng) -> (Vec<u8>, String) {
    let mut out = bytes.to_vec();
    let what = match rng.below(3) {
        0 => {
            let at = rng.below(bytes.len());
            out.truncate(at);
            format!("compressed bytes cut at {at}")
        }
        1 => {
            let at = rng.below(bytes.len());
            out[at] ^= 1 << rng.below(8);
            format!("compressed bit flipped at byte {at}")
        }
        _ => {
            let at = rng.below(bytes.len());
            let n = 1 + rng.below(8);
            for b in out.iter_mut().skip(at).take(n) {
                *b = rng.next() as u8;
            }
            format!("{n} compressed bytes replaced at {at}")
        }
    };
    (out, what)
}

pub fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(bytes).expect("gzip");
    e.finish().expect("gzip")
}

/// How a run of `jets` ended.
pub struct Run {
    pub status: Option<ExitStatus>,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    pub fn ok(&self) -> bool {
        self.status.is_some_and(|s| s.success())
    }
}

/// Runs `jets args`, its output in files of `work`, killing it after [`TIMEOUT`].
pub fn jets(args: &[OsString], work: &Path) -> Run {
    jets_within(args, work, TIMEOUT)
}

/// Runs `jets args`, its output in files of `work`, killing it after `timeout` (its status is
/// then `None`).
pub fn jets_within(args: &[OsString], work: &Path, timeout: Duration) -> Run {
    let (out, err) = (work.join("stdout"), work.join("stderr"));
    let mut child = Command::new(env!("CARGO_BIN_EXE_jets"))
        .args(args)
        .env_remove("RUST_BACKTRACE")
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out).expect("stdout file"))
        .stderr(std::fs::File::create(&err).expect("stderr file"))
        .spawn()
        .expect("run jets");
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait for jets") {
            break Some(s);
        }
        if start.elapsed() > timeout {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(2));
    };
    let read =
        |p: &Path| String::from_utf8_lossy(&std::fs::read(p).unwrap_or_default()).into_owned();
    Run { status, stdout: read(&out), stderr: read(&err) }
}

/// Arguments of mixed types (text, paths) as the `OsString`s of a command line.
pub fn os(args: &[&dyn AsRef<std::ffi::OsStr>]) -> Vec<OsString> {
    args.iter().map(|a| a.as_ref().to_owned()).collect()
}
