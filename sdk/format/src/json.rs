//! The JSON encoder every JETS line goes through.
//!
//! Hand-written rather than serde's serializer because the writer thread formats millions of lines
//! per second: integers go through `itoa`, floats through `ryu`, and strings are escaped in one pass
//! that copies unescaped runs in bulk. The output is byte-for-byte what `serde_json` produces for the
//! same values (tested below; floats in exponent form may spell the exponent differently), so a
//! trace reads back identically whichever path wrote it.

/// Appends `s` as a JSON string literal (with quotes), escaping as RFC 8259 requires.
///
/// ```
/// let mut out = Vec::new();
/// jets_format::json::write_str(&mut out, "a\"b\n<");
/// assert_eq!(out, br#""a\"b\n<""#);
/// ```
pub fn write_str(out: &mut Vec<u8>, s: &str) {
    let bytes = s.as_bytes();
    // Names and labels almost never need escaping: one vectorizable scan, one copy.
    if !bytes.iter().any(|&b| b < 0x20 || b == b'"' || b == b'\\') {
        out.reserve(bytes.len() + 2);
        out.push(b'"');
        out.extend_from_slice(bytes);
        out.push(b'"');
        return;
    }
    write_escaped(out, bytes);
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
#[inline]
pub fn write_u64(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(itoa::Buffer::new().format(v).as_bytes());
}

/// Appends a signed integer.
#[inline]
pub fn write_i64(out: &mut Vec<u8>, v: i64) {
    out.extend_from_slice(itoa::Buffer::new().format(v).as_bytes());
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
    if !matches!(out.last(), Some(b'{')) {
        out.push(b',');
    }
    write_str(out, key);
    out.push(b':');
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

    proptest! {
        #[test]
        fn any_string_round_trips(s in any::<String>()) {
            let e = enc(&s);
            prop_assert_eq!(&e, &serde_json::to_string(&s).expect("ser"));
            let back: String = serde_json::from_str(&e).expect("parse");
            prop_assert_eq!(back, s);
        }
    }
}
