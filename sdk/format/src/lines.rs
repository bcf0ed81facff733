//! The six JETS line types, as typed values that read (serde) and write (the encoder) the same way.
//!
//! Strings borrow from the input when they can ([`Cow`]), so a reader over a memory-mapped file does
//! not copy names. Fields the spec does not name are kept in each line's `extra` map and written
//! back after the known ones, so a read/write round trip loses nothing.

use std::borrow::Cow;

use serde::{Deserialize, Deserializer};
use serde_json::{Map, Value};

use super::hints::{EventHints, RecordHints};
use super::json::{self, Text};

/// The version this SDK writes.
pub const VERSION: &str = "2.0";

/// Something that can append itself as one JSON value.
pub trait WriteJson {
    /// Appends `self` as compact JSON.
    fn write_json(&self, out: &mut Vec<u8>);
}

impl WriteJson for Value {
    fn write_json(&self, out: &mut Vec<u8>) {
        json::write_value(out, self)
    }
}
impl WriteJson for Map<String, Value> {
    fn write_json(&self, out: &mut Vec<u8>) {
        json::write_object(out, self)
    }
}
impl WriteJson for super::Data {
    fn write_json(&self, out: &mut Vec<u8>) {
        super::Data::write_json(self, out)
    }
}
impl WriteJson for super::DataRef<'_> {
    fn write_json(&self, out: &mut Vec<u8>) {
        super::DataRef::write_json(self, out)
    }
}

/// Deserializes a field that must be present but may be `null` (the spec's `parent_id`).
fn required_nullable<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    Option::<u64>::deserialize(d)
}

/// The first line of every trace.
#[derive(Clone, Debug, PartialEq, Deserialize)]
pub struct Header<'a> {
    /// Format version, `"2.0"`.
    #[serde(borrow)]
    pub version: Cow<'a, str>,
    /// Trace metadata: hardware model, architecture, `clock_frequency_mhz`, tool, timestamp, ...
    pub metadata: Map<String, Value>,
    /// Fields the spec does not name.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl Header<'_> {
    /// A version-2.0 header with the given metadata.
    pub fn new(metadata: Map<String, Value>) -> Header<'static> {
        Header { version: Cow::Borrowed(VERSION), metadata, extra: Map::new() }
    }

    /// `metadata.clock_frequency_mhz`, when it is a positive number.
    pub fn clock_frequency_mhz(&self) -> Option<f64> {
        self.metadata.get("clock_frequency_mhz").and_then(Value::as_f64).filter(|f| *f > 0.0)
    }

    /// Appends the line (with its newline).
    pub fn write_json(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(b"{\"type\":\"header\",\"version\":");
        json::write_str(out, &self.version);
        out.extend_from_slice(b",\"metadata\":");
        json::write_object(out, &self.metadata);
        finish(out, &self.extra);
    }
}

/// The start of a record: a node of the trace tree.
#[derive(Clone, Debug, PartialEq, Deserialize)]
pub struct Record<'a> {
    /// Cycle at which the record begins.
    pub clk: u64,
    /// Short name for tree views and labels.
    #[serde(borrow)]
    pub name: Cow<'a, str>,
    /// Semantic type: `Pipeline`, `Instruction`, `ExecutionUnit`, ...
    #[serde(borrow)]
    pub record_type: Cow<'a, str>,
    /// Globally unique id.
    pub id: u64,
    /// The parent's id; `None` (JSON `null`) for a root. The key itself is required.
    #[serde(deserialize_with = "required_nullable")]
    pub parent_id: Option<u64>,
    /// Human-readable context.
    #[serde(borrow)]
    pub description: Cow<'a, str>,
    /// Extra fields, including the visualization hints.
    #[serde(default)]
    pub data: Option<Map<String, Value>>,
    /// Fields the spec does not name.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl Record<'_> {
    /// The visualization hints in `data`.
    pub fn hints(&self) -> RecordHints<'_> {
        self.data.as_ref().map(RecordHints::from_data).unwrap_or_default()
    }

    /// Appends the line (with its newline).
    pub fn write_json(&self, out: &mut Vec<u8>) {
        write_record(
            out,
            self.clk,
            &*self.name,
            &*self.record_type,
            self.id,
            self.parent_id,
            &self.description,
            self.data.as_ref().map(|d| d as &dyn WriteJson),
        );
        finish(out, &self.extra);
    }
}

/// The end of a record.
#[derive(Clone, Debug, PartialEq, Deserialize)]
pub struct RecordEnd {
    /// Cycle at which the record completes.
    pub clk: u64,
    /// The record that ends.
    pub record_id: u64,
    /// Fields the spec does not name.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl RecordEnd {
    /// Appends the line (with its newline).
    pub fn write_json(&self, out: &mut Vec<u8>) {
        write_record_end(out, self.clk, self.record_id);
        finish(out, &self.extra);
    }
}

/// Untimed metadata attached to a record.
#[derive(Clone, Debug, PartialEq, Deserialize)]
pub struct Annotation<'a> {
    /// Short name.
    #[serde(borrow)]
    pub name: Cow<'a, str>,
    /// The record described.
    pub record_id: u64,
    /// Human-readable purpose.
    #[serde(borrow)]
    pub description: Cow<'a, str>,
    /// Any JSON value (required by the spec).
    pub data: Value,
    /// Fields the spec does not name.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl Annotation<'_> {
    /// Appends the line (with its newline).
    pub fn write_json(&self, out: &mut Vec<u8>) {
        write_annotation(out, &*self.name, self.record_id, &self.description, &self.data);
        finish(out, &self.extra);
    }
}

/// A timed occurrence on a record.
#[derive(Clone, Debug, PartialEq, Deserialize)]
pub struct Event<'a> {
    /// Cycle of the event.
    pub clk: u64,
    /// Short name.
    #[serde(borrow)]
    pub name: Cow<'a, str>,
    /// The record it happens on.
    pub record_id: u64,
    /// Human-readable description.
    #[serde(borrow)]
    pub description: Cow<'a, str>,
    /// Optional data, including the visualization hints.
    #[serde(default)]
    pub data: Option<Value>,
    /// Fields the spec does not name.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl Event<'_> {
    /// The visualization hints in `data`.
    pub fn hints(&self) -> EventHints<'_> {
        self.data.as_ref().map(EventHints::from_data).unwrap_or_default()
    }

    /// Appends the line (with its newline).
    pub fn write_json(&self, out: &mut Vec<u8>) {
        write_event(
            out,
            self.clk,
            &*self.name,
            self.record_id,
            &self.description,
            self.data.as_ref().map(|d| d as &dyn WriteJson),
        );
        finish(out, &self.extra);
    }
}

/// The optional last line: summary counts.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
pub struct Footer {
    /// The last cycle of the capture.
    #[serde(default)]
    pub capture_end_clk: Option<u64>,
    /// Number of `record` lines.
    #[serde(default)]
    pub total_records: Option<u64>,
    /// Number of `annotation` lines.
    #[serde(default)]
    pub total_annotations: Option<u64>,
    /// Number of `event` lines.
    #[serde(default)]
    pub total_events: Option<u64>,
    /// Custom summary fields (this SDK adds `open_records` and, under the drop policy, `dropped_*`).
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl Footer {
    /// Appends the line (with its newline).
    pub fn write_json(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(b"{\"type\":\"footer\"");
        for (key, v) in [
            ("capture_end_clk", self.capture_end_clk),
            ("total_records", self.total_records),
            ("total_annotations", self.total_annotations),
            ("total_events", self.total_events),
        ] {
            if let Some(v) = v {
                json::write_key(out, key);
                json::write_u64(out, v);
            }
        }
        finish(out, &self.extra);
    }
}

/// Any JETS line.
///
/// ```
/// use jets_format::Line;
/// let text = r#"{"clk":5,"type":"record_end","record_id":1}"#;
/// let line: Line = serde_json::from_str(text).unwrap();
/// assert!(matches!(line, Line::RecordEnd(ref e) if e.clk == 5));
/// assert_eq!(line.to_json_line(), format!("{text}\n"));
/// ```
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Line<'a> {
    /// `header`
    #[serde(borrow)]
    Header(Header<'a>),
    /// `record`
    #[serde(borrow)]
    Record(Record<'a>),
    /// `record_end`
    RecordEnd(RecordEnd),
    /// `annotation`
    #[serde(borrow)]
    Annotation(Annotation<'a>),
    /// `event`
    #[serde(borrow)]
    Event(Event<'a>),
    /// `footer`
    Footer(Footer),
}

pub use jets_vocab::LineType;

impl<'a> Line<'a> {
    /// Parses one line of text (without its newline).
    pub fn parse(text: &'a str) -> Result<Line<'a>, serde_json::Error> {
        serde_json::from_str(text)
    }

    /// The line's type.
    pub fn line_type(&self) -> LineType {
        match self {
            Line::Header(_) => LineType::Header,
            Line::Record(_) => LineType::Record,
            Line::RecordEnd(_) => LineType::RecordEnd,
            Line::Annotation(_) => LineType::Annotation,
            Line::Event(_) => LineType::Event,
            Line::Footer(_) => LineType::Footer,
        }
    }

    /// The cycle of a timed line (record, record_end, event).
    pub fn clk(&self) -> Option<u64> {
        match self {
            Line::Record(r) => Some(r.clk),
            Line::RecordEnd(e) => Some(e.clk),
            Line::Event(e) => Some(e.clk),
            _ => None,
        }
    }

    /// Appends the line as compact JSON followed by a newline.
    pub fn write_json(&self, out: &mut Vec<u8>) {
        match self {
            Line::Header(h) => h.write_json(out),
            Line::Record(r) => r.write_json(out),
            Line::RecordEnd(e) => e.write_json(out),
            Line::Annotation(a) => a.write_json(out),
            Line::Event(e) => e.write_json(out),
            Line::Footer(f) => f.write_json(out),
        }
    }

    /// The line as compact JSON followed by a newline.
    pub fn to_json_line(&self) -> String {
        let mut out = Vec::with_capacity(128);
        self.write_json(&mut out);
        // The encoder only ever appends valid UTF-8.
        String::from_utf8(out).unwrap_or_default()
    }
}

/// Writes the extra fields, the closing brace and the newline.
fn finish(out: &mut Vec<u8>, extra: &Map<String, Value>) {
    for (k, v) in extra {
        json::write_key(out, k);
        json::write_value(out, v);
    }
    out.push(b'}');
    out.push(b'\n');
}

/// Appends a `record` line without its closing brace (see [`close_line`]).
#[allow(clippy::too_many_arguments)]
pub fn write_record(
    out: &mut Vec<u8>,
    clk: u64,
    name: &(impl Text + ?Sized),
    record_type: &(impl Text + ?Sized),
    id: u64,
    parent_id: Option<u64>,
    description: &str,
    data: Option<&dyn WriteJson>,
) {
    match (name.clean_bytes(), record_type.clean_bytes(), description.is_empty()) {
        (Some(name), Some(record_type), true) => {
            const CLK: &[u8] = b"{\"clk\":";
            const NAME: &[u8] = b",\"type\":\"record\",\"name\":";
            const TYPE: &[u8] = b",\"record_type\":";
            const ID: &[u8] = b",\"id\":";
            const PARENT: &[u8] = b",\"parent_id\":";
            const REST: &[u8] = b",\"description\":\"\"";
            let n = CLK.len() + NAME.len() + TYPE.len() + ID.len() + PARENT.len() + REST.len();
            let n = n + 3 * 20 + name.len() + record_type.len() + 4;
            // SAFETY: `room` made room for every part written below, each at most as long as
            // counted (a number at most 20 digits, `null` fewer), and `commit` ends the line
            // after the last.
            unsafe {
                let mut p = json::room(out, n);
                p = json::put(p, CLK);
                p = json::put_digits(p, clk);
                p = json::put(p, NAME);
                p = json::put_quoted(p, name);
                p = json::put(p, TYPE);
                p = json::put_quoted(p, record_type);
                p = json::put(p, ID);
                p = json::put_digits(p, id);
                p = json::put(p, PARENT);
                p = match parent_id {
                    Some(parent) => json::put_digits(p, parent),
                    None => json::put(p, b"null"),
                };
                p = json::put(p, REST);
                json::commit(out, p);
            }
        }
        _ => write_record_head(out, clk, name, record_type, id, parent_id, description),
    }
    write_data(out, data);
}

/// [`write_record`]'s members up to the description, for a name or record type that needs
/// escaping, or a description.
///
/// The general path, apart from the direct one rather than merged into it: one layout per line
/// kind, with a text that needs escaping written through the `Vec` mid-line and room made again
/// after it, cost an event line 233 instructions against the direct path's 171 (218 with an empty
/// description not scanned; callgrind, 2026-11-28). The property test in this module checks that
/// the two write the same bytes.
#[cold]
fn write_record_head(
    out: &mut Vec<u8>,
    clk: u64,
    name: &(impl Text + ?Sized),
    record_type: &(impl Text + ?Sized),
    id: u64,
    parent_id: Option<u64>,
    description: &str,
) {
    out.extend_from_slice(b"{\"clk\":");
    json::write_u64(out, clk);
    out.extend_from_slice(b",\"type\":\"record\",\"name\":");
    name.write_json_str(out);
    out.extend_from_slice(b",\"record_type\":");
    record_type.write_json_str(out);
    out.extend_from_slice(b",\"id\":");
    json::write_u64(out, id);
    out.extend_from_slice(b",\"parent_id\":");
    match parent_id {
        Some(p) => json::write_u64(out, p),
        None => out.extend_from_slice(b"null"),
    }
    write_description(out, description);
}

/// Appends a `record_end` line without its closing brace.
pub fn write_record_end(out: &mut Vec<u8>, clk: u64, record_id: u64) {
    const CLK: &[u8] = b"{\"clk\":";
    const ID: &[u8] = b",\"type\":\"record_end\",\"record_id\":";
    // SAFETY: room for both parts and two numbers of at most 20 digits; the line ends after
    // the last.
    unsafe {
        let mut p = json::room(out, CLK.len() + ID.len() + 2 * 20);
        p = json::put(p, CLK);
        p = json::put_digits(p, clk);
        p = json::put(p, ID);
        p = json::put_digits(p, record_id);
        json::commit(out, p);
    }
}

/// Appends an `annotation` line without its closing brace.
pub fn write_annotation(
    out: &mut Vec<u8>,
    name: &(impl Text + ?Sized),
    record_id: u64,
    description: &str,
    data: &dyn WriteJson,
) {
    out.extend_from_slice(b"{\"type\":\"annotation\",\"name\":");
    name.write_json_str(out);
    out.extend_from_slice(b",\"record_id\":");
    json::write_u64(out, record_id);
    write_description(out, description);
    out.extend_from_slice(b",\"data\":");
    data.write_json(out);
}

/// Appends an `event` line without its closing brace.
pub fn write_event(
    out: &mut Vec<u8>,
    clk: u64,
    name: &(impl Text + ?Sized),
    record_id: u64,
    description: &str,
    data: Option<&dyn WriteJson>,
) {
    match (name.clean_bytes(), description.is_empty()) {
        (Some(name), true) => {
            const CLK: &[u8] = b"{\"clk\":";
            const NAME: &[u8] = b",\"type\":\"event\",\"name\":";
            const ID: &[u8] = b",\"record_id\":";
            const REST: &[u8] = b",\"description\":\"\"";
            let n = CLK.len() + NAME.len() + ID.len() + REST.len() + 2 * 20 + name.len() + 2;
            // SAFETY: `room` made room for every part written below, each at most as long as
            // counted, and `commit` ends the line after the last.
            unsafe {
                let mut p = json::room(out, n);
                p = json::put(p, CLK);
                p = json::put_digits(p, clk);
                p = json::put(p, NAME);
                p = json::put_quoted(p, name);
                p = json::put(p, ID);
                p = json::put_digits(p, record_id);
                p = json::put(p, REST);
                json::commit(out, p);
            }
        }
        _ => write_event_head(out, clk, name, record_id, description),
    }
    write_data(out, data);
}

/// [`write_event`]'s members up to the description, for a name that needs escaping, or a
/// description (apart from the direct path: see [`write_record_head`]).
#[cold]
fn write_event_head(
    out: &mut Vec<u8>,
    clk: u64,
    name: &(impl Text + ?Sized),
    record_id: u64,
    description: &str,
) {
    out.extend_from_slice(b"{\"clk\":");
    json::write_u64(out, clk);
    out.extend_from_slice(b",\"type\":\"event\",\"name\":");
    name.write_json_str(out);
    out.extend_from_slice(b",\"record_id\":");
    json::write_u64(out, record_id);
    write_description(out, description);
}

/// Appends `,"data":` and the data, if any.
#[inline(always)]
fn write_data(out: &mut Vec<u8>, data: Option<&dyn WriteJson>) {
    if let Some(d) = data {
        out.extend_from_slice(b",\"data\":");
        d.write_json(out);
    }
}

/// Appends `,"description":` and the text: an empty one, as on most lines a simulator writes,
/// is one constant with nothing to scan.
#[inline(always)]
fn write_description(out: &mut Vec<u8>, description: &str) {
    if description.is_empty() {
        out.extend_from_slice(b",\"description\":\"\"");
    } else {
        out.extend_from_slice(b",\"description\":");
        json::write_str(out, description);
    }
}

/// Closes a line begun by one of the `write_*` functions above.
#[inline]
pub fn close_line(out: &mut Vec<u8>) {
    out.extend_from_slice(b"}\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = concat!(
        r##"{"type":"header","version":"2.0","metadata":{"hardware_model":"X","clock_frequency_mhz":2520}}"##,
        "\n",
        r##"{"clk":1000,"type":"record","name":"ProcessTask","record_type":"HostProgram","id":1,"parent_id":null,"description":"Main","data":{"process_id":12345,"color":"#ff5722","unit_id":0}}"##,
        "\n",
        r##"{"clk":1001,"type":"record","name":"I","record_type":"Instruction","id":18446744073709551615,"parent_id":1,"description":"","vendor":{"x":[1,2]}}"##,
        "\n",
        r##"{"type":"annotation","name":"Grid","record_id":1,"description":"d","data":[1,"a",null]}"##,
        "\n",
        r##"{"clk":1151,"type":"event","name":"Decode","record_id":1,"description":"stage \"2\"","data":{"severity":"warning"}}"##,
        "\n",
        r##"{"clk":1152,"type":"event","name":"E","record_id":1,"description":""}"##,
        "\n",
        r##"{"clk":1500,"type":"record_end","record_id":1}"##,
        "\n",
        r##"{"type":"footer","capture_end_clk":1500,"total_records":2,"total_annotations":1,"total_events":2,"open_records":1}"##,
        "\n",
    );

    /// A text that never offers its bytes: the line writers take their general path with it.
    struct Escaped<'a>(&'a str);

    impl Text for Escaped<'_> {
        fn write_json_str(&self, out: &mut Vec<u8>) {
            json::write_str(out, self.0)
        }
    }

    proptest::proptest! {
        /// The line writers' direct path (clean names, no description) writes what their
        /// general path writes, and it reads back as the values given.
        #[test]
        fn the_direct_path_writes_what_the_general_path_writes(
            clk in proptest::num::u64::ANY,
            id in proptest::num::u64::ANY,
            parent in proptest::option::of(proptest::num::u64::ANY),
            name in "[ -~]{0,20}|\\PC{0,8}",
            record_type in "[A-Za-z]{0,12}|\\PC{0,4}",
            description in proptest::option::of("\\PC{1,6}"),
        ) {
            let description = description.as_deref().unwrap_or("");
            let (mut direct, mut general) = (Vec::new(), Vec::new());
            write_record(&mut direct, clk, &*name, &*record_type, id, parent, description, None);
            write_record(
                &mut general, clk, &Escaped(&name), &Escaped(&record_type), id, parent,
                description, None,
            );
            close_line(&mut direct);
            close_line(&mut general);
            write_event(&mut direct, clk, &*name, id, description, None);
            write_event(&mut general, clk, &Escaped(&name), id, description, None);
            close_line(&mut direct);
            close_line(&mut general);
            write_record_end(&mut direct, clk, id);
            close_line(&mut direct);
            general.extend_from_slice(
                format!("{{\"clk\":{clk},\"type\":\"record_end\",\"record_id\":{id}}}\n").as_bytes(),
            );
            proptest::prop_assert_eq!(&direct, &general);
            let text = String::from_utf8(direct).expect("utf-8");
            let lines: Vec<Line<'_>> = text.lines().map(|l| Line::parse(l).expect("parses")).collect();
            match &lines[..] {
                [Line::Record(r), Line::Event(e), Line::RecordEnd(end)] => {
                    proptest::prop_assert_eq!(
                        (r.clk, &*r.name, &*r.record_type, r.id, r.parent_id, &*r.description),
                        (clk, &*name, &*record_type, id, parent, description)
                    );
                    proptest::prop_assert_eq!(
                        (e.clk, &*e.name, e.record_id, &*e.description),
                        (clk, &*name, id, description)
                    );
                    proptest::prop_assert_eq!((end.clk, end.record_id), (clk, id));
                }
                other => proptest::prop_assert!(false, "{other:?}"),
            }
        }
    }

    #[test]
    fn every_line_type_round_trips_byte_for_byte() {
        for text in SAMPLE.lines() {
            let line = Line::parse(text).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(line.to_json_line(), format!("{text}\n"));
        }
    }

    #[test]
    fn strings_borrow_from_input() {
        let text = r#"{"clk":1,"type":"record","name":"n","record_type":"t","id":1,"parent_id":null,"description":"d"}"#;
        let Line::Record(r) = Line::parse(text).expect("parse") else { panic!("not a record") };
        assert!(matches!(r.name, Cow::Borrowed(_)));
    }

    #[test]
    fn hints_accessors() {
        let line = Line::parse(SAMPLE.lines().nth(1).expect("line")).expect("parse");
        let Line::Record(r) = line else { panic!() };
        assert_eq!(r.hints().unit_id, Some(0));
        let Line::Event(e) = Line::parse(SAMPLE.lines().nth(4).expect("line")).expect("parse")
        else {
            panic!()
        };
        assert_eq!(e.hints().severity, Some(super::super::Severity::Warning));
    }

    #[test]
    fn strict_on_ids_and_parent_key() {
        let bad = [
            r#"{"clk":1,"type":"record","name":"n","record_type":"t","id":1,"description":"d"}"#,
            r#"{"clk":1,"type":"record","name":"n","record_type":"t","id":-1,"parent_id":null,"description":"d"}"#,
            r#"{"clk":1,"type":"record","name":"n","record_type":"t","id":1.5,"parent_id":null,"description":"d"}"#,
            r#"{"clk":1,"type":"record","name":"n","record_type":"t","id":"1","parent_id":null,"description":"d"}"#,
            r#"{"clk":1,"type":"record","name":"n","record_type":"t","id":18446744073709551616,"parent_id":null,"description":"d"}"#,
            r#"{"type":"annotation","name":"a","record_id":1,"description":"d"}"#,
            r#"{"clk":1.0,"type":"record_end","record_id":1}"#,
        ];
        for text in bad {
            assert!(Line::parse(text).is_err(), "accepted {text}");
        }
    }
}
