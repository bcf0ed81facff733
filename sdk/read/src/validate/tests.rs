use std::io::Cursor;

use super::*;
use crate::DEFAULT_CHUNK;

const HEADER: &str = r#"{"type":"header","version":"2.0","metadata":{}}"#;
const ROOT: &str = r#"{"clk":0,"type":"record","name":"r","record_type":"T","id":1,"parent_id":null,"description":""}"#;

fn rec(id: u64, parent: Option<u64>, clk: u64) -> String {
    let p = parent.map_or("null".to_owned(), |p| p.to_string());
    format!(
        r#"{{"clk":{clk},"type":"record","name":"r{id}","record_type":"T","id":{id},"parent_id":{p},"description":"d"}}"#
    )
}

fn rules_of(text: &str) -> Vec<(u64, Rule)> {
    validate_bytes(text.as_bytes()).0.iter().map(|d| (d.line, d.rule)).collect()
}

#[test]
fn a_small_valid_trace_is_clean() {
    let text = format!(
        "{HEADER}\n{}\n{}\n{}\n{}\n{}\n{}\n",
        rec(1, None, 0),
        rec(2, Some(1), 2),
        r##"{"clk":3,"type":"event","name":"E","record_id":2,"description":"","data":{"severity":"warning","color":"#aabbcc"}}"##,
        r#"{"type":"annotation","name":"A","record_id":2,"description":"","data":null}"#,
        r#"{"clk":4,"type":"record_end","record_id":2}"#,
        r#"{"type":"footer","capture_end_clk":4,"total_records":2,"total_annotations":1,"total_events":1,"open_records":1}"#,
    );
    let (d, report) = validate_bytes(text.as_bytes());
    assert!(d.is_empty(), "{d:#?}");
    assert_eq!(report.counts.records, 2);
    assert_eq!(report.open_records, 1);
    assert!(report.footer);
}

#[test]
fn ordering_rules_point_at_the_related_line() {
    let text = format!("{HEADER}\n{}\n{}\n", rec(1, None, 0), rec(1, None, 5));
    let (d, _) = validate_bytes(text.as_bytes());
    assert_eq!(d.len(), 1);
    assert_eq!(d[0].rule, Rule::DuplicateId);
    assert_eq!(d[0].line, 3);
    assert_eq!(d[0].note.as_ref().map(|n| n.line), Some(2));
    assert_eq!(&d[0].source[d[0].column as usize - 1..][..4], "\"id\"");
}

#[test]
fn ids_must_be_u64() {
    for bad in ["\"1\"", "-1", "1.5", "18446744073709551616", "1e3"] {
        let line = rec(1, None, 0).replace("\"id\":1", &format!("\"id\":{bad}"));
        let got = rules_of(&format!("{HEADER}\n{line}\n"));
        assert_eq!(got, vec![(2, Rule::InvalidId)], "id {bad}");
    }
    let max = rec(u64::MAX, None, u64::MAX);
    assert_eq!(rules_of(&format!("{HEADER}\n{max}\n")), vec![]);
}

#[test]
fn torn_tail_and_missing_newline() {
    let torn = format!("{HEADER}\n{}\n{{\"clk\":5,\"ty", rec(1, None, 0));
    let d = validate_bytes(torn.as_bytes()).0;
    assert_eq!(d.iter().map(|d| (d.line, d.rule)).collect::<Vec<_>>(), vec![(3, Rule::TornLine)]);
    assert!(d[0].help.is_some_and(|h| h.contains("jets repair")));
    let unterminated = format!("{HEADER}\n{}", rec(1, None, 0));
    assert_eq!(rules_of(&unterminated), vec![(2, Rule::NoFinalNewline)]);
    // The same bad line in the middle is invalid JSON, not torn.
    let middle = format!("{HEADER}\n{{\"clk\":5,\"ty\n{}\n", rec(1, None, 0));
    assert_eq!(rules_of(&middle), vec![(2, Rule::InvalidJson)]);
}

/// A trace of `n` lines with errors and warnings sprinkled through it.
fn noisy_trace(n: u64) -> String {
    let mut s = format!("{HEADER}\n{}\n", rec(1, None, 0));
    for i in 2..n {
        let line = match i % 97 {
            0 => rec(i, Some(i + 1000), i), // unknown parent
            1 => rec(1, None, i),           // duplicate id
            2 => "not json".to_owned(),     // invalid
            3 => {
                format!(r#"{{"clk":{i},"type":"record_end","record_id":{}}}"#, i.saturating_sub(6))
            } // ends (then doubles)
            4 => format!(
                r#"{{"clk":0,"type":"event","name":"x","record_id":{},"description":""}}"#,
                i - 4
            ),
            5 => {
                format!(r#"{{"clk":{i},"type":"record_end","record_id":{}}}"#, i.saturating_sub(8))
            } // double end
            _ => rec(i, Some(1), i),
        };
        s.push_str(&line);
        s.push('\n');
    }
    s
}

#[test]
fn parallel_and_sequential_runs_agree_at_any_chunk_size() {
    let text = noisy_trace(20_000);
    let run = |threads: usize, chunk: usize| {
        let mut r =
            Reader::from_read(Cursor::new(text.clone()), "mem").unwrap().with_chunk_size(chunk);
        let mut d = Vec::new();
        let report = Validator::new().threads(threads).run(&mut r, |x| d.push(x)).unwrap();
        (d, report)
    };
    let (base, base_report) = run(1, 1 << 30);
    assert!(base.len() > 500, "the noisy trace has many findings: {}", base.len());
    assert!(base.windows(2).all(|w| w[0].line <= w[1].line), "in line order");
    for (threads, chunk) in [(2, 300_000), (4, 1 << 20), (3, 1000)] {
        let (d, report) = run(threads, chunk);
        assert_eq!(report, base_report, "threads {threads}, chunk {chunk}");
        assert_eq!(d, base, "threads {threads}, chunk {chunk}");
    }
}

#[test]
fn max_errors_and_allow() {
    let text = noisy_trace(5000);
    let mut r = Reader::from_read(Cursor::new(text.clone()), "mem").unwrap();
    let mut n = 0;
    let report = Validator::new()
        .max_errors(3)
        .run(&mut r, |d| n += u64::from(d.level() == Level::Error))
        .unwrap();
    assert!(report.stopped_early);
    assert_eq!((report.errors, n), (3, 3));

    let mut r = Reader::from_read(Cursor::new(text), "mem").unwrap();
    let mut seen = Vec::new();
    let report =
        Validator::new().allow(Rule::DuplicateId).run(&mut r, |d| seen.push(d.rule)).unwrap();
    assert!(!seen.contains(&Rule::DuplicateId));
    assert!(report.errors > 0);
}

#[test]
fn repair_keeps_valid_lines_and_cascades_drops() {
    let text = format!(
        "{HEADER}\n{}\n{}\n{}\n{}\n{}\n{{\"clk\":9,\"type\":\"re",
        rec(1, None, 0),
        rec(2, Some(7), 1), // unknown parent: dropped
        rec(3, Some(2), 2), // child of a dropped record: dropped
        r#"{"type":"footer","total_records":99}"#,
        rec(4, Some(1), 8),
    );
    let mut r = Reader::from_read(Cursor::new(text), "mem").unwrap();
    let mut out = Vec::new();
    let rep = repair(&mut r, &mut out, RepairOptions { end_open_records: true }).unwrap();
    assert_eq!((rep.kept, rep.dropped, rep.old_footers, rep.ended), (3, 2, 1, 2));
    assert_eq!(rep.dropped_lines, vec![3, 4]);
    assert!(rep.torn_tail && !rep.header_added);
    let (d, report) = validate_bytes(&out);
    assert!(d.is_empty(), "{d:#?}\n{}", String::from_utf8_lossy(&out));
    assert_eq!((report.counts.records, report.counts.record_ends, report.open_records), (2, 2, 0));
    let text = String::from_utf8(out).unwrap();
    // Children end before their parents.
    let ends: Vec<&str> = text.lines().filter(|l| l.contains("record_end")).collect();
    assert!(ends[0].contains("\"record_id\":4") && ends[1].contains("\"record_id\":1"), "{ends:?}");
}

#[test]
fn repair_adds_a_header_when_there_is_none() {
    let text = format!("{}\n", rec(1, None, 0));
    let mut r = Reader::from_read(Cursor::new(text), "mem").unwrap();
    let mut out = Vec::new();
    let rep = repair(&mut r, &mut out, RepairOptions::default()).unwrap();
    assert!(rep.header_added);
    assert_eq!(rep.kept, 1);
    assert_eq!(validate_bytes(&out).0, vec![]);
}

#[test]
fn pipelined_pieces_and_sequential_chunks_give_the_same_result() {
    let text = noisy_trace(150_000) + "{\"clk\":1,\"type\":\"ev";
    assert!(text.len() > 3 * (2 << 20), "several pieces");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("noisy.jets");
    std::fs::write(&path, &text).unwrap();
    let streamed = {
        let mut r = Reader::from_read(Cursor::new(text.clone()), "mem").unwrap();
        let mut d = Vec::new();
        let report = Validator::new().threads(1).run(&mut r, |x| d.push(x)).unwrap();
        (d, report)
    };
    assert_eq!(streamed.0.last().map(|d| d.rule), Some(Rule::TornLine));
    for (threads, chunk) in
        [(1, DEFAULT_CHUNK), (2, DEFAULT_CHUNK), (3, DEFAULT_CHUNK), (2, 3 << 20)]
    {
        let mut r = Reader::open(&path).unwrap().with_chunk_size(chunk);
        let mut d = Vec::new();
        let report = Validator::new().threads(threads).run(&mut r, |x| d.push(x)).unwrap();
        assert_eq!(report, streamed.1, "threads {threads}, chunk {chunk}");
        assert_eq!(d, streamed.0, "threads {threads}, chunk {chunk}");
    }
    // Stopping early leaves the workers without a reader; they must end.
    let mut r = Reader::open(&path).unwrap();
    let report = Validator::new().max_errors(1).run(&mut r, |_| {}).unwrap();
    assert!(report.stopped_early);
}

/// The checking view takes its members and hints from the vocabulary (jets-vocab): every required
/// member of every line type has a slot, and every record and event hint is checked by its type.
/// A member or hint added to the vocabulary without a check here fails this test.
#[test]
fn the_checking_view_covers_every_list_of_the_vocabulary() {
    use super::check::{Fields, Hints};
    use jets_format::vocab::{LineType, EVENT_HINTS, RECORD_HINTS};
    for t in LineType::ALL {
        for key in t.required() {
            assert!(*key == "data" || Fields::default().member(key).is_some(), "{t} {key}");
        }
        // Each required member, left out, is reported missing (E009).
        if *t == LineType::Header || *t == LineType::Footer {
            continue;
        }
        for key in t.required() {
            let members: Vec<String> = t
                .required()
                .iter()
                .filter(|k| *k != key)
                .map(|k| match *k {
                    "clk" | "id" | "record_id" => format!("\"{k}\":1"),
                    "parent_id" => "\"parent_id\":null".into(),
                    _ => format!("\"{k}\":\"x\""),
                })
                .collect();
            let line = format!("{{\"type\":\"{t}\",{}}}", members.join(","));
            let rules = rules_of(&format!("{HEADER}\n{}\n", line.replace(",}", "}")));
            assert!(rules.contains(&(2, Rule::MissingField)), "{t} without {key}: {rules:?}");
        }
    }
    // A value no hint accepts (an array), under each hint key, is reported under the hint's key.
    for (table, line) in [
        (
            &RECORD_HINTS[..],
            r#"{"clk":0,"type":"record","name":"n","record_type":"T","id":1,"parent_id":null,"description":"","data":{"K":[]}}"#,
        ),
        (
            &EVENT_HINTS[..],
            r#"{"clk":0,"type":"event","name":"n","record_id":1,"description":"","data":{"K":[]}}"#,
        ),
    ] {
        for (key, _) in table {
            assert!(Hints::is_hint(key));
            let text = format!("{HEADER}\n{ROOT}\n{}\n", line.replace('K', key));
            let (diagnostics, _) = validate_bytes(text.as_bytes());
            assert!(
                diagnostics.iter().any(|d| d.line == 3 && d.message.contains(&format!("`{key}`"))),
                "{key}: {diagnostics:?}"
            );
        }
    }
}
