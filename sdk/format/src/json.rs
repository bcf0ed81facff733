//! The JSON encoder every JETS line goes through.
//!
//! Hand-written rather than serde's serializer because the writer thread formats millions of lines
//! per second: integers are written digit pair by digit pair straight into the output, floats go
//! through `ryu`, and strings are escaped in one pass that copies unescaped runs in bulk. The
//! output is byte-for-byte what `serde_json` produces for the same values (tested below; floats
//! in exponent form may spell the exponent differently), so a trace reads back identically
//! whichever path wrote it.

use std::cell::Cell;

/// Appends `s` as a JSON string literal (with quotes), escaping as RFC 8259 requires.
///
/// ```
/// let mut out = Vec::new();
/// jets_format::json::write_str(&mut out, "a\"b\n<");
/// assert_eq!(out, br#""a\"b\n<""#);
/// ```
#[inline]
pub fn write_str(out: &mut Vec<u8>, s: &str) {
    let bytes = s.as_bytes();
    // Names, keys and labels almost never need escaping: a scan of a word at a time, then one
    // reservation and one copy between the quotes.
    if needs_escape(bytes) {
        return write_escaped(out, bytes);
    }
    write_clean(out, bytes);
}

/// Appends `bytes`, which need no escaping, between quotes.
#[inline(always)]
fn write_clean(out: &mut Vec<u8>, bytes: &[u8]) {
    out.reserve(bytes.len() + 2);
    let len = out.len();
    // SAFETY: `reserve` made room for the quotes and the bytes at `len`; they are written
    // before the length covers them.
    unsafe {
        let at = out.as_mut_ptr().add(len);
        at.write(b'"');
        copy_short(bytes, at.add(1));
        at.add(1 + bytes.len()).write(b'"');
        out.set_len(len + bytes.len() + 2);
    }
}

/// Appends a text that lives as long as the program (the static names and keys a simulator
/// writes on every line) as a JSON string literal, exactly as [`write_str`] does.
///
/// Such a text never changes, so whether it needs escaping is remembered per thread by its
/// address and length in a small table, and its bytes are not scanned on every line.
#[inline(always)]
pub fn write_static_str(out: &mut Vec<u8>, s: &'static str) {
    if static_needs_escape(s) {
        return write_escaped(out, s.as_bytes());
    }
    write_clean(out, s.as_bytes());
}

/// [`write_member_key`] for a key that lives as long as the program (a typed field's key), as
/// [`write_static_str`] is to [`write_str`].
#[inline(always)]
pub fn write_static_member_key(out: &mut Vec<u8>, key: &'static str, comma: bool) {
    if static_needs_escape(key) {
        return write_escaped_key(out, key.as_bytes(), comma);
    }
    write_clean_key(out, key.as_bytes(), comma);
}

/// A text the line encoders write as a JSON string literal: any `str`, or a [`crate::Str`],
/// whose static texts skip the escaping scan ([`write_static_str`]).
pub trait Text {
    /// Appends the text as a JSON string literal (with quotes).
    fn write_json_str(&self, out: &mut Vec<u8>);

    /// The text's bytes when they need no escaping (most names), so that a line encoder can
    /// copy them between quotes itself; `None` sends it to [`Text::write_json_str`].
    #[inline]
    fn clean_bytes(&self) -> Option<&[u8]> {
        None
    }
}

impl Text for str {
    #[inline]
    fn write_json_str(&self, out: &mut Vec<u8>) {
        write_str(out, self)
    }

    #[inline(always)]
    fn clean_bytes(&self) -> Option<&[u8]> {
        (!needs_escape(self.as_bytes())).then_some(self.as_bytes())
    }
}

/// Whether a text that lives as long as the program needs escaping, remembered per thread
/// ([`write_static_str`]).
#[inline(always)]
pub(crate) fn static_is_clean(s: &'static str) -> bool {
    !static_needs_escape(s)
}

/// Where a line encoder writes: the end of `out`, with room for `n` more bytes, which it
/// writes through the returned pointer, kept in a register from part to part, and then hands
/// to [`commit`]. Appending part by part to the `Vec` itself read its length and capacity back
/// from memory for every part (a byte stored through the `Vec`'s pointer may alias them),
/// compared them and stored the length again (callgrind, 2026-11-28: an event line 226 → 171
/// instructions, a `record_end` line 113 → 93, a `record` line 65 fewer).
///
/// Tried and not kept: a record's typed fields written the same way, with one look at the room
/// left per field (694 → 666 instructions for six fields: the per-field work is the key's
/// escaping check, the value's kind and its digits, not the appending).
#[inline(always)]
pub(crate) fn room(out: &mut Vec<u8>, n: usize) -> *mut u8 {
    out.reserve(n);
    // SAFETY: the length is within the allocation.
    unsafe { out.as_mut_ptr().add(out.len()) }
}

/// Sets `out`'s length to end at `end`.
///
/// # Safety
/// `end` is in `out`'s buffer, at or after its length, and every byte up to it is written:
/// [`room`] gave a pointer with room for the bytes written through it, which end at `end`.
#[inline(always)]
pub(crate) unsafe fn commit(out: &mut Vec<u8>, end: *mut u8) {
    // SAFETY: per the contract.
    unsafe {
        let len = end.offset_from(out.as_ptr()) as usize;
        debug_assert!(len >= out.len() && len <= out.capacity());
        out.set_len(len);
    }
}

/// Copies `b` to `p` and returns the byte after it: a constant part of a line, whose length
/// is known where this is inlined, so the copy is a few moves.
///
/// # Safety
/// `p` has room for `b` (see [`room`]).
#[inline(always)]
pub(crate) unsafe fn put(p: *mut u8, b: &[u8]) -> *mut u8 {
    // SAFETY: per the contract; `b` is not in the output buffer.
    unsafe {
        std::ptr::copy_nonoverlapping(b.as_ptr(), p, b.len());
        p.add(b.len())
    }
}

/// Writes the digits of `v` at `p` and returns the byte after them.
///
/// # Safety
/// `p` has room for 20 bytes.
#[inline(always)]
pub(crate) unsafe fn put_digits(p: *mut u8, v: u64) -> *mut u8 {
    // SAFETY: per the contract.
    unsafe { p.add(put_u64(p, v)) }
}

/// Writes `bytes`, which need no escaping, between quotes at `p` and returns the byte after.
///
/// # Safety
/// `p` has room for `bytes.len() + 2` bytes.
#[inline(always)]
pub(crate) unsafe fn put_quoted(p: *mut u8, bytes: &[u8]) -> *mut u8 {
    // SAFETY: per the contract; `bytes` is not in the output buffer.
    unsafe {
        p.write(b'"');
        copy_short(bytes, p.add(1));
        p.add(1 + bytes.len()).write(b'"');
        p.add(bytes.len() + 2)
    }
}

/// Slots of the per-thread table of static texts known to need no escaping.
const CLEAN_SLOTS: usize = 128;

thread_local! {
    /// Static texts seen to need no escaping, by (address, length), direct-mapped: a text that
    /// needs escaping is never stored, and a collision only costs a scan.
    static CLEAN: [Cell<(usize, usize)>; CLEAN_SLOTS] =
        const { [const { Cell::new((0, 0)) }; CLEAN_SLOTS] };
}

/// [`needs_escape`] for a text that never changes: a lookup of its address after the first
/// time. A `&'static str` cannot change or go away, so its address and length name its bytes.
#[inline(always)]
fn static_needs_escape(s: &'static str) -> bool {
    let key = (s.as_ptr() as usize, s.len());
    // Fibonacci hashing of the address: string literals sit side by side at any byte offset.
    let slot = (key.0 as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (64 - CLEAN_SLOTS.ilog2());
    // Two small closures rather than one around the scan: `LocalKey::with` is then inlined
    // (with the scan inside, it was a call of its own on every text).
    let slot = slot as usize;
    if CLEAN.with(|table| table[slot].get() == key) {
        return false;
    }
    let dirty = needs_escape(s.as_bytes());
    if !dirty {
        CLEAN.with(|table| table[slot].set(key));
    }
    dirty
}

/// Reads up to 8 bytes of `b` (at least 4, or all of a shorter `b`) as one word, the missing
/// ones as `a`: overlapping loads rather than a loop.
#[inline(always)]
fn word_of(b: &[u8]) -> u64 {
    let n = b.len();
    let u32_at = |i: usize| u64::from(u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]));
    match n {
        8.. => u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]),
        4..=7 => u32_at(0) | u32_at(n - 4) << 32,
        // Three loads cover 1 to 3 bytes (as in `copy_short`): no loop over short names.
        1..=3 => {
            let plain = u64::from_le_bytes([b'a'; 8]) & !0xff_ffff;
            plain | u64::from(b[0]) | u64::from(b[n / 2]) << 8 | u64::from(b[n - 1]) << 16
        }
        0 => u64::from_le_bytes([b'a'; 8]),
    }
}

/// True when a byte of `bytes` must be escaped in a JSON string: a control character (below
/// 0x20), `"` or `\\`. A word at a time (the last word overlapping the one before it): the
/// per-byte `any` with three compares was a tenth of the writer's time.
#[inline]
fn needs_escape(bytes: &[u8]) -> bool {
    let n = bytes.len();
    if n > 8 {
        let mut i = 0;
        while i + 8 < n {
            if word_needs_escape(word_of(&bytes[i..i + 8])) {
                return true;
            }
            i += 8;
        }
        return word_needs_escape(word_of(&bytes[n - 8..]));
    }
    word_needs_escape(word_of(bytes))
}

/// [`needs_escape`] for 8 bytes, with the classic exact tests for "some byte is below n" (n at
/// most 128) and "some byte is zero" (applied to the word xor a repeated `"` or `\\`): a byte
/// at or above 0x80 (UTF-8) cannot set a flag, and a borrow starts only at a byte that already
/// answers yes.
#[inline(always)]
fn word_needs_escape(w: u64) -> bool {
    const ONES: u64 = u64::from_le_bytes([1; 8]);
    const HIGH: u64 = ONES << 7;
    let below = |x: u64, n: u8| x.wrapping_sub(ONES * u64::from(n)) & !x;
    let control = below(w, 0x20);
    let quote = below(w ^ (ONES * u64::from(b'"')), 1);
    let backslash = below(w ^ (ONES * u64::from(b'\\')), 1);
    (control | quote | backslash) & HIGH != 0
}

/// Copies `src` to `dst` with at most two overlapping moves for up to 16 bytes (most keys and
/// names), without a call to `memcpy`.
///
/// # Safety
/// `dst` is valid for writing `src.len()` bytes and does not overlap `src`.
#[inline(always)]
unsafe fn copy_short(src: &[u8], dst: *mut u8) {
    let n = src.len();
    let s = src.as_ptr();
    // SAFETY: every read is inside `src` and every write inside `dst[..n]` (the caller's
    // contract); unaligned moves of plain bytes.
    unsafe {
        match n {
            8..=16 => {
                dst.cast::<u64>().write_unaligned(s.cast::<u64>().read_unaligned());
                dst.add(n - 8)
                    .cast::<u64>()
                    .write_unaligned(s.add(n - 8).cast::<u64>().read_unaligned());
            }
            4..=7 => {
                dst.cast::<u32>().write_unaligned(s.cast::<u32>().read_unaligned());
                dst.add(n - 4)
                    .cast::<u32>()
                    .write_unaligned(s.add(n - 4).cast::<u32>().read_unaligned());
            }
            1..=3 => {
                *dst = *s;
                *dst.add(n / 2) = *s.add(n / 2);
                *dst.add(n - 1) = *s.add(n - 1);
            }
            0 => {}
            _ => std::ptr::copy_nonoverlapping(s, dst, n),
        }
    }
}

#[cold]
#[inline(never)]
fn write_escaped_key(out: &mut Vec<u8>, bytes: &[u8], comma: bool) {
    if comma {
        out.push(b',');
    }
    write_escaped(out, bytes);
    out.push(b':');
}

#[cold]
fn write_escaped(out: &mut Vec<u8>, bytes: &[u8]) {
    out.reserve(bytes.len() + 8);
    out.push(b'"');
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        let escape: &[u8] = match b {
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            b'\n' => b"\\n",
            b'\r' => b"\\r",
            b'\t' => b"\\t",
            0x08 => b"\\b",
            0x0c => b"\\f",
            0x00..=0x1f => {
                out.extend_from_slice(&bytes[start..i]);
                const HEX: &[u8; 16] = b"0123456789abcdef";
                out.extend_from_slice(b"\\u00");
                out.push(HEX[(b >> 4) as usize]);
                out.push(HEX[(b & 0xf) as usize]);
                start = i + 1;
                continue;
            }
            _ => continue,
        };
        out.extend_from_slice(&bytes[start..i]);
        out.extend_from_slice(escape);
        start = i + 1;
    }
    out.extend_from_slice(&bytes[start..]);
    out.push(b'"');
}

/// Appends an unsigned integer.
///
/// Its digits are written straight into `out`, last pair first, once their count is known:
/// formatting into a buffer of its own (as `itoa` does) and copying the digits over cost a
/// `memcpy` call per number, and a line has three or four numbers.
#[inline]
pub fn write_u64(out: &mut Vec<u8>, v: u64) {
    out.reserve(20);
    let len = out.len();
    // SAFETY: `reserve` made room for the at most 20 digits at `len`; they are written before
    // the length covers them.
    unsafe {
        let n = put_u64(out.as_mut_ptr().add(len), v);
        out.set_len(len + n);
    }
}

/// Appends a signed integer.
#[inline]
pub fn write_i64(out: &mut Vec<u8>, v: i64) {
    out.reserve(21);
    let len = out.len();
    let minus = usize::from(v < 0);
    // SAFETY: as in `write_u64`, with one more byte for the sign.
    unsafe {
        let at = out.as_mut_ptr().add(len);
        at.write(b'-');
        let n = put_u64(at.add(minus), v.unsigned_abs());
        out.set_len(len + minus + n);
    }
}

/// The decimal digits of `v`: 1 to 20.
#[inline(always)]
fn digits(v: u64) -> usize {
    // 10^t, except 0 for t = 0, so that 0 has one digit like the other numbers below 10.
    const POW10: [u64; 20] = {
        let mut t = [0u64; 20];
        let mut i = 1;
        let mut p = 10u64;
        while i < 20 {
            t[i] = p;
            p = p.wrapping_mul(10);
            i += 1;
        }
        t
    };
    // 1233 / 4096 is just above log10(2): `t` is the digit count of the largest number with as
    // many bits as `v`, less one; one compare says whether `v` has that many digits or one less.
    let bits = 64 - (v | 1).leading_zeros() as usize;
    let t = (bits * 1233) >> 12;
    t + 1 - usize::from(v < POW10[t])
}

/// "00" to "99", two bytes each.
const PAIRS: [u8; 200] = {
    let mut t = [0u8; 200];
    let mut i = 0;
    while i < 100 {
        t[2 * i] = b'0' + (i / 10) as u8;
        t[2 * i + 1] = b'0' + (i % 10) as u8;
        i += 1;
    }
    t
};

/// Writes the digits of `v` at `dst` and returns how many.
///
/// # Safety
/// `dst` is valid for writing 20 bytes.
#[inline(always)]
unsafe fn put_u64(dst: *mut u8, mut v: u64) -> usize {
    let n = digits(v);
    // SAFETY: every write is inside `dst[..n]`, `n` at most 20; pairs are read inside `PAIRS`
    // (indices below 100).
    unsafe {
        let mut end = dst.add(n);
        let pair = |end: *mut u8, i: u64| {
            std::ptr::copy_nonoverlapping(PAIRS.as_ptr().add(2 * i as usize), end.sub(2), 2);
        };
        while v >= 10_000 {
            let r = v % 10_000;
            v /= 10_000;
            pair(end, r % 100);
            pair(end.sub(2), r / 100);
            end = end.sub(4);
        }
        if v >= 100 {
            pair(end, v % 100);
            v /= 100;
            end = end.sub(2);
        }
        if v >= 10 {
            pair(end, v);
        } else {
            end.sub(1).write(b'0' + v as u8);
        }
    }
    n
}

/// Appends a float the way `serde_json` does: shortest round-trip form, `null` for NaN and the
/// infinities (JSON has no spelling for them).
#[inline]
pub fn write_f64(out: &mut Vec<u8>, v: f64) {
    if v.is_finite() {
        out.extend_from_slice(ryu::Buffer::new().format_finite(v).as_bytes());
    } else {
        out.extend_from_slice(b"null");
    }
}

/// Appends `true` or `false`.
#[inline]
pub fn write_bool(out: &mut Vec<u8>, v: bool) {
    out.extend_from_slice(if v { b"true" } else { b"false" });
}

/// Appends `,"key":` (or `"key":` right after an opening brace).
#[inline]
pub fn write_key(out: &mut Vec<u8>, key: &str) {
    write_member_key(out, key, !matches!(out.last(), Some(b'{')));
}

/// Appends `,"key":` when `comma`, else `"key":`: for a writer that knows whether a member came
/// before (the first key of an object has none), in one reservation and one copy.
///
/// Inlined into the loops over a line's fields (the escaping path is a call of its own): as a
/// call, saving and restoring registers was a quarter of its cost.
#[inline(always)]
pub fn write_member_key(out: &mut Vec<u8>, key: &str, comma: bool) {
    let bytes = key.as_bytes();
    if needs_escape(bytes) {
        return write_escaped_key(out, bytes, comma);
    }
    write_clean_key(out, bytes, comma);
}

/// Appends `,"key":` (or `"key":`) for a key that needs no escaping.
#[inline(always)]
fn write_clean_key(out: &mut Vec<u8>, bytes: &[u8], comma: bool) {
    let n = bytes.len();
    out.reserve(n + 4);
    let len = out.len();
    let comma = usize::from(comma);
    // SAFETY: `reserve` made room for the comma, the quotes, the colon and the bytes at `len`;
    // they are written before the length covers them (a comma not wanted is overwritten).
    unsafe {
        let at = out.as_mut_ptr().add(len);
        at.write(b',');
        let at = at.add(comma);
        at.write(b'"');
        copy_short(bytes, at.add(1));
        at.add(1 + n).write(b'"');
        at.add(2 + n).write(b':');
        out.set_len(len + comma + n + 3);
    }
}

/// Appends a [`serde_json::Value`] in compact form.
pub fn write_value(out: &mut Vec<u8>, v: &serde_json::Value) {
    use serde_json::Value;
    match v {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Bool(b) => write_bool(out, *b),
        Value::Number(n) => {
            if let Some(u) = n.as_u64() {
                write_u64(out, u)
            } else if let Some(i) = n.as_i64() {
                write_i64(out, i)
            } else {
                write_f64(out, n.as_f64().unwrap_or(f64::NAN))
            }
        }
        Value::String(s) => write_str(out, s),
        Value::Array(a) => {
            out.push(b'[');
            for (i, item) in a.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_value(out, item);
            }
            out.push(b']');
        }
        Value::Object(m) => write_object(out, m),
    }
}

/// Appends a JSON object in compact form, keys in their stored order.
pub fn write_object(out: &mut Vec<u8>, m: &serde_json::Map<String, serde_json::Value>) {
    out.push(b'{');
    for (k, v) in m {
        write_key(out, k);
        write_value(out, v);
    }
    out.push(b'}');
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The word-at-a-time test agrees with the byte-at-a-time one for every byte value at every
    /// position of strings of 0 to 19 bytes, over a background of plain ASCII, of UTF-8 bytes
    /// (at or above 0x80, which must not trip it) and of the bytes just above each special one.
    #[test]
    fn needs_escape_matches_the_byte_test_everywhere() {
        let naive = |b: &[u8]| b.iter().any(|&b| b < 0x20 || b == b'"' || b == b'\\');
        for background in [b'a', 0x80, 0xff, 0x20, b'"' + 1, b'\\' + 1, 0x7f] {
            for len in 0..20 {
                let plain = vec![background; len];
                assert_eq!(super::needs_escape(&plain), naive(&plain), "{background:#x} x {len}");
                for at in 0..len {
                    for b in 0..=255u8 {
                        let mut s = plain.clone();
                        s[at] = b;
                        assert_eq!(super::needs_escape(&s), naive(&s), "{s:?}");
                    }
                }
            }
        }
    }
    use proptest::prelude::*;

    fn enc(s: &str) -> String {
        let mut out = Vec::new();
        write_str(&mut out, s);
        String::from_utf8(out).expect("utf8")
    }

    #[test]
    fn escapes_like_serde_json() {
        for s in ["", "plain", "q\"b\\s", "\u{0}\u{1f}\u{7f}é😀", "<script>&'", "\t\r\n\u{8}\u{c}"]
        {
            assert_eq!(enc(s), serde_json::to_string(s).expect("ser"));
        }
    }

    #[test]
    fn floats_like_serde_json() {
        for f in [0.0, -0.0, 1.0, 0.1, 2520.0, 123456789.125] {
            let mut out = Vec::new();
            write_f64(&mut out, f);
            assert_eq!(
                String::from_utf8(out).expect("utf8"),
                serde_json::to_string(&f).expect("ser")
            );
        }
        // Exponent spelling may differ from serde_json's ("1e300" vs "1e+300"); the value may not.
        for f in [1e300, -2.5e-8, f64::MAX, f64::MIN_POSITIVE] {
            let mut out = Vec::new();
            write_f64(&mut out, f);
            let back: f64 = serde_json::from_slice(&out).expect("parse");
            assert_eq!(back, f);
        }
        let mut out = Vec::new();
        write_f64(&mut out, f64::NAN);
        assert_eq!(out, b"null");
    }

    /// Every length the short copies distinguish (and the word scan's overlap), with and without
    /// a byte to escape at each end, writes what serde_json writes.
    #[test]
    fn strings_of_every_short_length_encode_like_serde_json() {
        for len in 0..40 {
            let plain: String = "abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGH"[..len].to_owned();
            let utf8: String = "é".repeat(len / 2);
            for s in [plain.clone(), utf8, format!("\"{plain}"), format!("{plain}\n")] {
                assert_eq!(enc(&s), serde_json::to_string(&s).expect("ser"), "{s:?}");
            }
        }
    }

    /// Every integer next to a power of ten and of two (where the digit count changes and where
    /// the count's estimate from the bit length changes), and the extremes, as Rust prints them.
    #[test]
    fn integers_at_every_boundary_print_like_rust() {
        let mut cases = vec![0u64, 1, 9, 10, 99, 100, u64::MAX, u64::MAX - 1];
        let mut p = 1u64;
        while let Some(next) = p.checked_mul(10) {
            p = next;
            cases.extend([p - 1, p, p + 1]);
        }
        for b in 0..64 {
            let p = 1u64 << b;
            cases.extend([p - 1, p, p + 1]);
        }
        for v in cases {
            let mut out = b"x".to_vec();
            write_u64(&mut out, v);
            assert_eq!(out, format!("x{v}").as_bytes(), "{v}");
            for s in [v as i64, (v as i64).wrapping_neg(), i64::MIN, i64::MAX] {
                let mut out = b"x".to_vec();
                write_i64(&mut out, s);
                assert_eq!(out, format!("x{s}").as_bytes(), "{s}");
            }
        }
    }

    /// A key written with a known comma is what `write_key` writes after a member and after
    /// an opening brace, escapes included.
    #[test]
    fn member_keys_like_write_key() {
        for key in ["", "a", "pc", "seq", "unit_id", "display_label", "q\"", "tab\t", "é"] {
            for (before, comma) in [(&b"{"[..], false), (&b"{\"a\":1"[..], true)] {
                let mut expected = before.to_vec();
                write_key(&mut expected, key);
                let mut out = before.to_vec();
                write_member_key(&mut out, key, comma);
                assert_eq!(out, expected, "{key:?}");
                let mut text = String::from_utf8(out).expect("utf8");
                text.push_str("0}");
                let v: serde_json::Value = serde_json::from_str(&text).expect("valid");
                assert_eq!(v[key], 0, "{text}");
            }
        }
    }

    /// Static texts, clean and not, more of them than the table has slots (so slots are shared
    /// and replaced), each written several times: always what `write_str` writes, keys too.
    #[test]
    fn static_texts_write_like_any_text_every_time() {
        let texts: Vec<&'static str> = (0..3 * CLEAN_SLOTS)
            .map(|i| match i % 4 {
                0 => format!("k{i}"),
                1 => format!("quote\"{i}"),
                2 => format!("line\n{i}"),
                _ => format!("display_label_{i}"),
            })
            .map(|s| &*Box::leak(s.into_boxed_str()))
            .chain(["", "a", "\\", "é"])
            .collect();
        for _ in 0..3 {
            for &t in &texts {
                let (mut want, mut got) = (Vec::new(), Vec::new());
                write_str(&mut want, t);
                write_static_str(&mut got, t);
                assert_eq!(got, want, "{t:?}");
                for comma in [false, true] {
                    let (mut want, mut got) = (Vec::new(), Vec::new());
                    write_member_key(&mut want, t, comma);
                    write_static_member_key(&mut got, t, comma);
                    assert_eq!(got, want, "{t:?}");
                }
            }
        }
    }

    proptest! {
        #[test]
        fn any_integer_prints_like_rust(v in any::<u64>(), s in any::<i64>()) {
            let mut out = Vec::new();
            write_u64(&mut out, v);
            write_i64(&mut out, s);
            prop_assert_eq!(out, format!("{v}{s}").into_bytes());
        }

        #[test]
        fn any_string_round_trips(s in any::<String>()) {
            let e = enc(&s);
            prop_assert_eq!(&e, &serde_json::to_string(&s).expect("ser"));
            let back: String = serde_json::from_str(&e).expect("parse");
            prop_assert_eq!(back, s);
        }
    }
}
