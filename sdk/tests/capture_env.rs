//! `JETS_CAPTURE` at open, in its own test binary: the variable is process-wide, so no other test
//! may open a trace while it is set.

mod common;

use common::Buf;
use jets::capture::Capture;
use jets::{Metadata, TraceBuilder};

fn names(text: &str) -> Vec<String> {
    text.lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|l| l["type"] == "record")
        .map(|l| l["name"].as_str().unwrap().to_owned())
        .collect()
}

/// `JETS_CAPTURE` is read at open; an explicit setting wins; a bad clause fails the open.
/// (Environment changes are confined to this one test.)
#[test]
fn jets_capture_is_read_at_open_and_a_bad_clause_fails_it() {
    std::env::set_var(jets::capture::ENV, "types=Keep");
    let buf = Buf::default();
    let t = TraceBuilder::new().writer(buf.clone(), Metadata::new()).unwrap();
    assert_eq!(t.capture().to_string(), "types=Keep");
    t.root("a", "Drop").begin_at(0).unwrap().end_at(1).unwrap();
    t.root("b", "Keep").begin_at(0).unwrap().end_at(1).unwrap();
    t.close().unwrap();
    let text = buf.text();
    assert_eq!(names(&text), ["b"]);
    let explicit = TraceBuilder::new()
        .capture(Capture::full())
        .writer(std::io::sink(), Metadata::new())
        .unwrap();
    assert_eq!(explicit.capture().to_string(), "full");
    std::env::set_var(jets::capture::ENV, "types=Keep;clk=5");
    let err = TraceBuilder::new().writer(std::io::sink(), Metadata::new()).unwrap_err();
    assert_eq!(err.to_string(), "invalid argument: JETS_CAPTURE clause `clk=5`: expected `clk=A..B` (cycles A included, B excluded), got `5`");
    std::env::remove_var(jets::capture::ENV);
}
