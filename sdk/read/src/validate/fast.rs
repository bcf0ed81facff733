//! A fast path for the common line: a flat object whose keys and checked strings have no escapes
//! and whose checked numbers are plain unsigned integers.
//!
//! serde_json builds every string it hands to a visitor (escape handling, UTF-8 checks per string);
//! this scanner only finds where values end, on a line already known to be UTF-8. It fills the same
//! [`Fields`] as the serde path, or returns `None` for anything else (escapes in a checked string
//! or key, `\u` anywhere, signs, fractions, exponents, integers above u64, duplicate fields, deep
//! nesting, and every syntax error), and the caller re-parses the line with serde_json, which
//! decides and words the error. It must never accept what serde_json rejects: a property test
//! compares the two on random and mutated lines.

use std::borrow::Cow;

use super::check::{DataField, Fields, Hints, Val, DATA_BIT};

/// Nesting beyond this falls back to serde_json (whose own limit is 128).
const MAX_DEPTH: u32 = 100;

struct Scan<'a> {
    text: &'a str,
    b: &'a [u8],
    i: usize,
}

/// Parses `text` (valid UTF-8) into `f`, or `None` to let serde_json do it.
pub(crate) fn parse<'a>(text: &'a str, f: &mut Fields<'a>) -> Option<()> {
    let mut s = Scan { text, b: text.as_bytes(), i: 0 };
    s.ws();
    s.eat(b'{')?;
    s.ws();
    let mut seen = 0u32;
    if !s.eat_if(b'}') {
        loop {
            let key = s.plain_string()?;
            s.ws();
            s.eat(b':')?;
            s.ws();
            if key == "data" {
                if seen & (1 << DATA_BIT) != 0 {
                    return None;
                }
                seen |= 1 << DATA_BIT;
                f.data = s.data()?;
                if s.next_member()? {
                    continue;
                }
                break;
            }
            let Some((bit, _, slot)) = f.member(key) else {
                s.skip_value(0)?;
                if s.next_member()? {
                    continue;
                }
                break;
            };
            if seen & (1 << bit) != 0 {
                return None;
            }
            seen |= 1 << bit;
            *slot = s.val()?;
            if !s.next_member()? {
                break;
            }
        }
    }
    s.ws();
    (s.i == s.b.len()).then_some(())
}

impl<'a> Scan<'a> {
    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    fn ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.i += 1;
        }
    }

    fn eat(&mut self, c: u8) -> Option<()> {
        (self.peek() == Some(c)).then(|| self.i += 1)
    }

    fn eat_if(&mut self, c: u8) -> bool {
        self.eat(c).is_some()
    }

    /// After a member: `,` then the next key's quote (true), or `}` (false).
    fn next_member(&mut self) -> Option<bool> {
        self.ws();
        match self.peek()? {
            b',' => {
                self.i += 1;
                self.ws();
                (self.peek() == Some(b'"')).then_some(true)
            }
            b'}' => {
                self.i += 1;
                Some(false)
            }
            _ => None,
        }
    }

    /// A string without escapes or control characters, borrowed.
    fn plain_string(&mut self) -> Option<&'a str> {
        self.eat(b'"')?;
        let start = self.i;
        let rest = &self.b[start..];
        let end = rest.iter().position(|&c| c == b'"' || c == b'\\' || c < 0x20)?;
        if rest[end] != b'"' {
            return None;
        }
        self.i = start + end + 1;
        // Both ends are ASCII quotes, so these are character boundaries.
        Some(&self.text[start..start + end])
    }

    /// Skips a string, allowing the simple escapes; `\u` falls back (surrogate rules differ).
    fn skip_string(&mut self) -> Option<()> {
        self.eat(b'"')?;
        loop {
            let rest = &self.b[self.i..];
            let at = rest.iter().position(|&c| c == b'"' || c == b'\\' || c < 0x20)?;
            self.i += at;
            match rest[at] {
                b'"' => {
                    self.i += 1;
                    return Some(());
                }
                b'\\' => match self.b.get(self.i + 1)? {
                    b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => self.i += 2,
                    _ => return None,
                },
                _ => return None,
            }
        }
    }

    /// A checked value: scalars classified, containers skipped.
    fn val(&mut self) -> Option<Val<'a>> {
        match self.peek()? {
            b'"' => self.plain_string().map(|s| Val::Str(Cow::Borrowed(s))),
            b'0'..=b'9' => self.uint().map(Val::U64),
            b'n' => self.literal(b"null").map(|()| Val::Null),
            b't' => self.literal(b"true").map(|()| Val::Bool),
            b'f' => self.literal(b"false").map(|()| Val::Bool),
            b'{' => self.skip_value(0).map(|()| Val::Object),
            b'[' => self.skip_value(0).map(|()| Val::Array),
            _ => None, // '-' and anything else: serde_json decides
        }
    }

    /// An unsigned integer with nothing after it that would make it a fraction or an exponent.
    fn uint(&mut self) -> Option<u64> {
        let start = self.i;
        let mut n: u64 = 0;
        while let Some(d @ b'0'..=b'9') = self.peek() {
            n = n.checked_mul(10)?.checked_add(u64::from(d - b'0'))?;
            self.i += 1;
        }
        let len = self.i - start;
        if (self.b[start] == b'0' && len > 1) || matches!(self.peek(), Some(b'.' | b'e' | b'E')) {
            return None;
        }
        Some(n)
    }

    fn literal(&mut self, word: &[u8]) -> Option<()> {
        self.b[self.i..].starts_with(word).then(|| self.i += word.len())
    }

    /// A `data` member: an object's hints extracted, anything else classified.
    fn data(&mut self) -> Option<DataField<'a>> {
        if self.peek()? != b'{' {
            let val = match self.peek()? {
                // Event and annotation data may be any value; strings may hold escapes.
                b'"' => {
                    self.skip_string()?;
                    Val::Str(Cow::Borrowed(""))
                }
                _ => self.val()?,
            };
            return Some(DataField { val, hints: None });
        }
        self.i += 1;
        self.ws();
        let mut hints: Option<Box<Hints<'a>>> = None;
        if !self.eat_if(b'}') {
            loop {
                let key = self.plain_string()?;
                self.ws();
                self.eat(b':')?;
                self.ws();
                if Hints::is_hint(key) {
                    let v = self.val()?;
                    hints.get_or_insert_with(Box::default).set(key, v);
                } else {
                    self.skip_value(1)?;
                }
                if !self.next_member()? {
                    break;
                }
            }
        }
        Some(DataField { val: Val::Object, hints })
    }

    /// Skips any JSON value, checking its syntax.
    fn skip_value(&mut self, depth: u32) -> Option<()> {
        if depth > MAX_DEPTH {
            return None;
        }
        match self.peek()? {
            b'"' => self.skip_string(),
            b'-' | b'0'..=b'9' => self.skip_number(),
            b'n' => self.literal(b"null"),
            b't' => self.literal(b"true"),
            b'f' => self.literal(b"false"),
            b'{' => {
                self.i += 1;
                self.ws();
                if self.eat_if(b'}') {
                    return Some(());
                }
                loop {
                    if self.peek()? != b'"' {
                        return None;
                    }
                    self.skip_string()?;
                    self.ws();
                    self.eat(b':')?;
                    self.ws();
                    self.skip_value(depth + 1)?;
                    if !self.next_member()? {
                        return Some(());
                    }
                }
            }
            b'[' => {
                self.i += 1;
                self.ws();
                if self.eat_if(b']') {
                    return Some(());
                }
                loop {
                    self.skip_value(depth + 1)?;
                    self.ws();
                    match self.peek()? {
                        b',' => {
                            self.i += 1;
                            self.ws();
                        }
                        b']' => {
                            self.i += 1;
                            return Some(());
                        }
                        _ => return None,
                    }
                }
            }
            _ => None,
        }
    }

    /// `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`, of a magnitude that surely fits in a
    /// double: anything near or beyond its range (`1e400`) falls back to serde_json, which
    /// rejects what is out of range (spec/rules.md, JV3).
    fn skip_number(&mut self) -> Option<()> {
        self.eat_if(b'-');
        let int_start = self.i;
        match self.peek()? {
            b'0' => self.i += 1,
            b'1'..=b'9' => self.digits(),
            _ => return None,
        }
        let int_digits = self.i - int_start;
        if self.eat_if(b'.') {
            self.peek().filter(u8::is_ascii_digit)?;
            self.digits();
        }
        let mut exponent = 0usize;
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.i += 1;
            let negative = self.eat_if(b'-') || {
                self.eat_if(b'+');
                false
            };
            let start = self.i;
            self.peek().filter(u8::is_ascii_digit)?;
            self.digits();
            if !negative {
                // More than 4 digits is far out of range anyway; serde_json decides.
                exponent = self.text.get(start..self.i).filter(|e| e.len() <= 4)?.parse().ok()?;
            }
        }
        if int_digits + exponent > 300 {
            return None;
        }
        // serde_json reads a number followed directly by a letter or digit as an error; so must
        // we (`01`, `1x`); the caller's delimiter check covers the rest.
        match self.peek() {
            Some(c) if c.is_ascii_alphanumeric() => None,
            _ => Some(()),
        }
    }

    fn digits(&mut self) {
        while matches!(self.peek(), Some(b'0'..=b'9')) {
            self.i += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::super::check::parse_fields;
    use super::*;

    /// The fast path accepts a subset of what serde_json accepts, with the same result.
    fn agree(text: &str) {
        let mut fast = Fields::default();
        if parse(text, &mut fast).is_some() {
            let mut slow = Fields::default();
            let r = parse_fields(text, &mut slow);
            assert!(r.is_ok(), "fast path accepted what serde_json rejects: {text:?}: {r:?}");
            assert_eq!(fast, slow, "{text:?}");
        }
    }

    const LINES: &[&str] = &[
        r#"{"type":"header","version":"2.0","metadata":{"a":[1,2.5e-3,{"b":null}],"c":"\n\"x\""}}"#,
        r##"{"clk":1,"type":"record","name":"n","record_type":"T","id":7,"parent_id":null,"description":"d","data":{"color":"#aabbcc","unit_id":3,"status":"running","pc":-1,"x":[true,false]}}"##,
        r#"{"clk":18446744073709551615,"type":"event","name":"e","record_id":1,"description":"","data":"s\"q"}"#,
        r#"{"type":"annotation","name":"a","record_id":1,"description":"","data":[]}"#,
        r#"{"type":"footer","total_records":3,"open_records":0,"dropped_events":0}"#,
        r#" { "clk" : 0 , "type" : "record_end" , "record_id" : 2 } "#,
        "{}",
    ];

    #[test]
    fn common_lines_take_the_fast_path_and_agree() {
        for line in LINES {
            let mut f = Fields::default();
            assert!(parse(line, &mut f).is_some(), "{line}");
            agree(line);
        }
    }

    #[test]
    fn unusual_lines_fall_back() {
        for line in [
            r#"{"clk":-1}"#,
            r#"{"clk":1.0}"#,
            r#"{"clk":18446744073709551616}"#,
            r#"{"clk":01}"#,
            r#"{"id":1,"id":2}"#,
            r#"{"name":"a\"b"}"#,
            r#"{"n\u0061me":"x"}"#,
            r#"{"x":"\ud800"}"#,
            r#"{"x":[1,]}"#,
            r#"{"x":1,}"#,
            r#"{"x":1} x"#,
            r#"{"x":tru}"#,
            r#"{"x":1.}"#,
            r#"{"x":-}"#,
            r#"{"x":1e}"#,
            r#"{"x":"a	b"}"#,
            r#"{"data":{"x":1e400}}"#,
            r#"{"x":[1E+309]}"#,
            r#"{"x":-1e999}"#,
            &format!("{{\"x\":{}}}", "9".repeat(400)),
            "[1]",
            "",
        ] {
            let mut f = Fields::default();
            assert!(parse(line, &mut f).is_none(), "{line}");
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 3000, ..ProptestConfig::default() })]

        #[test]
        fn random_json_like_text(t in "[{}\\[\\]\":, 0-9eE.+\\-tfalsnu\\\\/abcdxyz_]{0,60}") {
            agree(&t);
            agree(&format!("{{\"type\":{t}}}"));
            agree(&format!("{{\"data\":{{\"color\":{t}}}}}"));
        }

        #[test]
        fn mutated_lines(which in 0..LINES.len(), at in any::<usize>(), what in prop::sample::select(
            vec!["", "\"", "\\", ",", "}", "{", "[", "]", ":", "-", "0", "1e", ".", " ", "null", "\\u0041", "\u{e9}", "1e400", "\\ud800", "-0", "9e307"]),
            cut in any::<bool>()) {
            let line = LINES[which];
            let mut at = at % (line.len() + 1);
            while !line.is_char_boundary(at) {
                at -= 1;
            }
            let end = if cut { (at + 1).min(line.len()) } else { at };
            let end = (end..=line.len()).find(|e| line.is_char_boundary(*e)).unwrap_or(line.len());
            let text = format!("{}{}{}", &line[..at], what, &line[end..]);
            agree(&text);
        }
    }
}
