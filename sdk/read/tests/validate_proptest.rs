//! Random bytes and random mutations of valid traces never make the validator (or repair) panic,
//! and what it reports stays consistent.

use proptest::prelude::*;

use jets_read::validate::{repair, validate_bytes, Level};

const VALID: &str = include_str!("../../../spec/conformance/valid/full.jets");

fn check(bytes: &[u8]) {
    let (diagnostics, report) = validate_bytes(bytes);
    let errors = diagnostics.iter().filter(|d| d.level() == Level::Error).count() as u64;
    assert_eq!(errors, report.errors);
    assert_eq!(diagnostics.len() as u64 - errors, report.warnings);
    assert!(diagnostics.windows(2).all(|w| w[0].line <= w[1].line), "in line order");
    for d in &diagnostics {
        assert!(d.line >= 1 && d.line <= report.counts.lines + 1, "{d}");
        assert!(d.column >= 1);
    }
    // The SDK's own readers (stats, convert, view: the format model) read every line the
    // validator finds no error in (issue 17, item 11).
    let bad: std::collections::BTreeSet<u64> =
        diagnostics.iter().filter(|d| d.level() == Level::Error).map(|d| d.line).collect();
    let mut reader =
        jets_read::Reader::from_read(std::io::Cursor::new(bytes.to_vec()), "fuzz").unwrap();
    while let Some(Ok(raw)) = reader.next_line() {
        if !bad.contains(&raw.number) {
            if let Err(e) = raw.parse() {
                panic!("line {} passes the validator but not the reader: {e}", raw.number);
            }
        }
    }
    // Repair of anything yields a trace without errors.
    let mut reader =
        jets_read::Reader::from_read(std::io::Cursor::new(bytes.to_vec()), "fuzz").unwrap();
    let mut out = Vec::new();
    repair(&mut reader, &mut out, Default::default()).unwrap();
    let (d, r) = validate_bytes(&out);
    assert_eq!(r.errors, 0, "repair output has errors: {d:#?}\n{}", String::from_utf8_lossy(&out));
}

#[derive(Debug, Clone)]
enum Mutation {
    Flip(usize, u8),
    Delete(usize, usize),
    Insert(usize, Vec<u8>),
    Truncate(usize),
    SwapLines(usize, usize),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let tokens = prop::sample::select(vec![
        &b"\n"[..],
        b"{",
        b"}",
        b"\"",
        b",",
        b":",
        b"null",
        b"-1",
        b"1e999",
        b"1e400",
        b"-0",
        b"\\ud800",
        b"\\udc00\\ud800",
        b"18446744073709551616",
        b"\"type\":\"footer\"",
        b"\\u00",
        b"\xff",
        b"\"id\":1,",
        b"[",
    ]);
    prop_oneof![
        (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Mutation::Flip(i, b)),
        (any::<usize>(), 0..20usize).prop_map(|(i, n)| Mutation::Delete(i, n)),
        (any::<usize>(), tokens).prop_map(|(i, t)| Mutation::Insert(i, t.to_vec())),
        any::<usize>().prop_map(Mutation::Truncate),
        (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Mutation::SwapLines(a, b)),
    ]
}

fn apply(bytes: &mut Vec<u8>, m: &Mutation) {
    let n = bytes.len().max(1);
    match m {
        Mutation::Flip(i, b) => {
            if !bytes.is_empty() {
                bytes[i % n] ^= b | 1;
            }
        }
        Mutation::Delete(i, k) => {
            let at = i % n;
            let end = (at + k).min(bytes.len());
            if at < end {
                bytes.drain(at..end);
            }
        }
        Mutation::Insert(i, t) => {
            let at = i % (bytes.len() + 1);
            bytes.splice(at..at, t.iter().copied());
        }
        Mutation::Truncate(i) => bytes.truncate(i % n),
        Mutation::SwapLines(a, b) => {
            let mut lines: Vec<Vec<u8>> =
                bytes.split(|c| *c == b'\n').map(<[u8]>::to_vec).collect();
            let l = lines.len();
            lines.swap(a % l, b % l);
            *bytes = lines.join(&b'\n');
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn random_bytes(bytes in prop::collection::vec(any::<u8>(), 0..600)) {
        check(&bytes);
    }

    #[test]
    fn random_lines_of_json_tokens(bytes in prop::collection::vec(
        prop::sample::select(b"{}[]\":,\n 0123-e.nultrfasy_idclkpe".to_vec()), 0..400)) {
        check(&bytes);
    }

    #[test]
    fn mutated_valid_traces(muts in prop::collection::vec(mutation(), 1..6)) {
        let mut bytes = VALID.as_bytes().to_vec();
        for m in &muts {
            apply(&mut bytes, m);
        }
        check(&bytes);
    }

    #[test]
    fn mutated_gzip_traces(muts in prop::collection::vec(mutation(), 1..3)) {
        use std::io::Write;
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        enc.write_all(VALID.as_bytes()).unwrap();
        let mut bytes = enc.finish().unwrap();
        for m in &muts {
            apply(&mut bytes, m);
        }
        check(&bytes);
    }
}

/// Issue 17, item 11: a value is valid or not whatever member it stands in, and the validator
/// and the format model (what stats, convert and view read with) agree on every such line.
#[test]
fn edge_values_are_judged_alike_wherever_they_stand() {
    // (JSON text, valid wherever any value may stand)
    let values = [
        (r#""\ud800""#, false),
        (r#""\udc00\ud800""#, false),
        ("1e400", false),
        ("-1e400", false),
        (&"9".repeat(400), false),
        (r#""\ud83d\ude00""#, true),
        ("-0", true),
        ("-0.0", true),
        ("1e-400", true),
        ("123456789012345678901234567890", true),
        ("1.7976931348623157e308", true),
    ];
    let places = [
        r#"{"type":"header","version":"2.0","metadata":{"k":V}}"#,
        r#"{"type":"header","version":"2.0","metadata":{},"vendor":V}"#,
        r#"{"type":"header","version":"2.0","metadata":{"a":[{"b":[V]}]}}"#,
        r#"{"type":"header","version":"2.0","metadata":{},"data":{"x":V}}"#,
    ];
    for (value, valid) in values {
        for place in places {
            let line = place.replace('V', value);
            let (diagnostics, report) = validate_bytes(format!("{line}\n").as_bytes());
            assert_eq!(report.errors == 0, valid, "{line}: {diagnostics:?}");
            if !valid {
                assert_eq!(diagnostics[0].rule.code(), "E001", "{line}");
            }
            let parsed = jets_format::Line::parse(&line);
            assert_eq!(parsed.is_ok(), valid, "the model disagrees on {line}: {parsed:?}");
        }
    }
}
