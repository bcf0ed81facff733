//! Random bytes and random mutations of valid traces never make the validator (or repair) panic,
//! and what it reports stays consistent.

use proptest::prelude::*;

use jets_read::validate::{repair, validate_bytes, Severity};

const VALID: &str = include_str!("../../../spec/conformance/valid/full.jets");

fn check(bytes: &[u8]) {
    let (diagnostics, report) = validate_bytes(bytes);
    let errors = diagnostics.iter().filter(|d| d.severity() == Severity::Error).count() as u64;
    assert_eq!(errors, report.errors);
    assert_eq!(diagnostics.len() as u64 - errors, report.warnings);
    assert!(diagnostics.windows(2).all(|w| w[0].line <= w[1].line), "in line order");
    for d in &diagnostics {
        assert!(d.line >= 1 && d.line <= report.counts.lines + 1, "{d}");
        assert!(d.column >= 1);
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
