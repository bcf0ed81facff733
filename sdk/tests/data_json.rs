//! JSON text given as `data` (`data_json`): what is refused, and how it is written.

mod common;

use jets::{Error, Metadata, Trace};

#[test]
fn json_no_reader_accepts_is_refused_and_writes_nothing() {
    let buf = common::Buf::default();
    let trace = Trace::to_writer(buf.clone(), Metadata::new()).expect("open");
    let r = trace.root("r", "R").begin_at(10).expect("root");
    // JSON that `serde_json` reads past as raw text but no reader of the trace accepts
    // (WR-DATA-2): refused at the call, as the C API refuses it, not written for `jets
    // validate` to find.
    let deep = format!("{}{}", "[".repeat(128), "]".repeat(128));
    for unreadable in [r#"{"x":1e999}"#, r#"{"s":"\ud800"}"#, &deep] {
        let e = r.event("e").data_json(unreadable).emit_at(10);
        assert!(matches!(e, Err(Error::InvalidJson(_))), "{unreadable:.20}: {e:?}");
        let a = r.annotation("a").data_json(unreadable).emit();
        assert!(matches!(a, Err(Error::InvalidJson(_))), "{unreadable:.20}: {a:?}");
        let c = r.child("c", "C").data_json(unreadable).begin_at(10);
        assert!(matches!(c, Err(Error::InvalidJson(_))), "{unreadable:.20}");
    }
    r.end_at(11).expect("end");
    trace.close().expect("close");
    let text = buf.text();
    assert_eq!(text.lines().count(), 4, "header, root, its end, footer:\n{text}");
}

#[test]
fn pretty_printed_data_json_keeps_every_line_one_line() {
    // As a C program's JSON library or `serde_json::to_string_pretty` makes it (WR-DATA-3):
    // written as given, each line break in it split the line, and no reader could read the file.
    let pretty = "{\n  \"pc\": 4096,\r\n  \"ops\": [\n    \"a b\",\n    \"c\\nd\"\n  ]\n}\n";
    let buf = common::Buf::default();
    let trace = Trace::to_writer(buf.clone(), Metadata::new()).expect("open");
    let r = trace.root("r", "R").data_json(pretty).begin_at(0).expect("root");
    r.event("e").data_json(pretty).emit_at(1).expect("event");
    r.event("typed").field("lat", 3u64).data_json(pretty).emit_at(1).expect("merged");
    r.annotation("a").data_json("[\n1,\n2\n]").emit().expect("annotation");
    r.end_at(2).expect("end");
    trace.close().expect("close");
    let text = buf.text();
    let (diagnostics, report) = jets_read::validate::validate_bytes(text.as_bytes());
    assert!(diagnostics.is_empty(), "{diagnostics:?}\n{text}");
    assert_eq!(text.lines().count(), 7, "header, 5 lines, footer:\n{text}");
    let c = report.counts;
    assert_eq!((c.records, c.events, c.annotations, c.record_ends), (1, 2, 1, 1));
    let event: serde_json::Value =
        serde_json::from_str(text.lines().nth(2).expect("event")).expect("the event line is JSON");
    assert_eq!(event["data"], serde_json::json!({"pc": 4096, "ops": ["a b", "c\nd"]}));
}
