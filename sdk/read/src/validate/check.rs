//! The per-line checks, run in parallel: parse one line, check its fields, reduce it to a [`Fact`]
//! for the sequential ordering pass.
//!
//! This is a *checking view* of a line, not a second model of the format: it classifies every
//! field's JSON type instead of converting it, so that it can say precisely what is wrong (the
//! format model in [`crate::format`] stops at the first error and allocates maps for `data`), and
//! it skips the contents of `metadata` and `data` except the visualization hints.

use std::borrow::Cow;
use std::fmt;

use memchr::memmem;
use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;

use super::rules::{source_text, Diagnostic, Rule};
use crate::RawLine;
use jets_format::vocab::{event_hint, record_hint, HintType, EVENT_HINTS, RECORD_HINTS};
use jets_format::{Color, LineType, MarkerStyle, Readable, Severity, Status};

/// What the ordering pass needs to know about a line.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Fact {
    pub line: u64,
    pub offset: u64,
    /// Length of the line's bytes (for the source text of ordering diagnostics).
    pub len: usize,
    /// The local checks found an error on this line.
    pub error: bool,
    pub kind: Kind,
}

/// A line reduced to its ids and cycles. `None` marks a field that is missing or invalid (an
/// error was reported for it), so the ordering pass skips the checks that need it.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Kind {
    /// Not JSON, not an object, or no known `type`.
    Unusable,
    Header,
    Record {
        id: Option<u64>,
        /// `Some(None)` for a root; `None` when `parent_id` is missing or invalid.
        parent: Option<Option<u64>>,
        clk: Option<u64>,
    },
    End {
        id: Option<u64>,
        clk: Option<u64>,
    },
    Annotation {
        id: Option<u64>,
    },
    Event {
        id: Option<u64>,
        clk: Option<u64>,
    },
    /// Boxed: footers are rare, and a small `Fact` keeps a piece's facts in cache.
    Footer(Box<FooterFacts>),
}

/// The numbers a footer claims.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct FooterFacts {
    pub capture_end: Option<u64>,
    /// total_records, total_annotations, total_events.
    pub totals: [Option<u64>; 3],
    /// This SDK's `open_records` extension.
    pub open_records: Option<u64>,
}

/// A JSON value, classified. Strings borrow from the line unless they contain escapes.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) enum Val<'a> {
    #[default]
    Missing,
    Null,
    Bool,
    U64(u64),
    Neg(i64),
    /// A number with a fraction or exponent, or an integer too large for u64 (serde_json reads
    /// those as f64).
    Float(f64),
    Str(Cow<'a, str>),
    Array,
    Object,
}

impl Val<'_> {
    fn is_missing(&self) -> bool {
        matches!(self, Val::Missing)
    }
}

impl fmt::Display for Val<'_> {
    /// Describes the value for a message: "a string", "negative number -3", ...
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Val::Missing => f.write_str("nothing"),
            Val::Null => f.write_str("null"),
            Val::Bool => f.write_str("a boolean"),
            Val::U64(n) => write!(f, "{n}"),
            Val::Neg(n) => write!(f, "negative number {n}"),
            // JSON has `-0`; serde_json reads it as a float, but it has neither fraction nor
            // exponent (spec/rules.md, JV2).
            Val::Float(x) if *x == 0.0 && x.is_sign_negative() => f.write_str("negative zero (-0)"),
            Val::Float(x) if x.fract() == 0.0 && *x >= 18446744073709551616.0 => {
                f.write_str("an integer above 2^64-1")
            }
            Val::Float(x) if x.fract() == 0.0 && *x < 0.0 => write!(f, "negative number {x}"),
            Val::Float(x) if x.fract() == 0.0 => {
                write!(f, "number {x:?} (written with a fraction or an exponent)")
            }
            Val::Float(x) => write!(f, "non-integer number {x}"),
            Val::Str(s) if s.len() <= 40 => write!(f, "string {s:?}"),
            Val::Str(_) => f.write_str("a string"),
            Val::Array => f.write_str("an array"),
            Val::Object => f.write_str("an object"),
        }
    }
}

struct ValVisitor;

impl<'de> Visitor<'de> for ValVisitor {
    type Value = Val<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, _: bool) -> Result<Val<'de>, E> {
        Ok(Val::Bool)
    }
    fn visit_i64<E>(self, v: i64) -> Result<Val<'de>, E> {
        Ok(if v < 0 { Val::Neg(v) } else { Val::U64(v as u64) })
    }
    fn visit_u64<E>(self, v: u64) -> Result<Val<'de>, E> {
        Ok(Val::U64(v))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Val<'de>, E> {
        Ok(Val::Float(v))
    }
    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Val<'de>, E> {
        Ok(Val::Str(Cow::Borrowed(v)))
    }
    fn visit_str<E>(self, v: &str) -> Result<Val<'de>, E> {
        Ok(Val::Str(Cow::Owned(v.to_owned())))
    }
    fn visit_string<E>(self, v: String) -> Result<Val<'de>, E> {
        Ok(Val::Str(Cow::Owned(v)))
    }
    fn visit_unit<E>(self) -> Result<Val<'de>, E> {
        Ok(Val::Null)
    }
    fn visit_none<E>(self) -> Result<Val<'de>, E> {
        Ok(Val::Null)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Val<'de>, A::Error> {
        while seq.next_element::<Readable>()?.is_some() {}
        Ok(Val::Array)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Val<'de>, A::Error> {
        while map.next_entry::<Readable, Readable>()?.is_some() {}
        Ok(Val::Object)
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Val<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Val<'a>, D::Error> {
        d.deserialize_any(ValVisitor)
    }
}

/// The visualization hints found in a `data` object, in the order of the vocabulary's tables
/// (`jets_vocab::RECORD_HINTS`, `EVENT_HINTS`): what a record or an event would mean by each. A
/// key in both tables (`color`) fills both.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Hints<'a> {
    pub(super) record: [Val<'a>; RECORD_HINTS.len()],
    pub(super) event: [Val<'a>; EVENT_HINTS.len()],
}

impl<'a> Hints<'a> {
    /// Whether `key` is a hint of records or events (the parsers keep only those values).
    pub(super) fn is_hint(key: &str) -> bool {
        record_hint(key).is_some() || event_hint(key).is_some()
    }

    /// Keeps the value of hint `key`.
    pub(super) fn set(&mut self, key: &str, v: Val<'a>) {
        if let Some(i) = EVENT_HINTS.iter().position(|(k, _)| *k == key) {
            self.event[i] = v.clone();
        }
        if let Some(i) = RECORD_HINTS.iter().position(|(k, _)| *k == key) {
            self.record[i] = v;
        }
    }
}

/// A `data` field: its JSON type, and the hints when it is an object.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct DataField<'a> {
    pub(super) val: Val<'a>,
    pub(super) hints: Option<Box<Hints<'a>>>,
}

/// A map key, borrowed unless escaped.
struct Key<'a>(Cow<'a, str>);

impl<'de: 'a, 'a> Deserialize<'de> for Key<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Key<'a>, D::Error> {
        match d.deserialize_str(ValVisitor)? {
            Val::Str(s) => Ok(Key(s)),
            _ => Err(de::Error::custom("expected a string key")),
        }
    }
}

struct DataVisitor;

impl<'de> Visitor<'de> for DataVisitor {
    type Value = DataField<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<DataField<'de>, A::Error> {
        let mut hints: Option<Box<Hints<'de>>> = None;
        while let Some(Key(key)) = map.next_key::<Key<'de>>()? {
            if Hints::is_hint(&key) {
                let v = map.next_value::<Val<'de>>()?;
                hints.get_or_insert_with(Box::default).set(&key, v);
            } else {
                map.next_value::<Readable>()?;
            }
        }
        Ok(DataField { val: Val::Object, hints })
    }

    // Anything else: classify like any value.
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<DataField<'de>, E> {
        ValVisitor.visit_bool(v).map(DataField::plain)
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<DataField<'de>, E> {
        ValVisitor.visit_i64(v).map(DataField::plain)
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<DataField<'de>, E> {
        ValVisitor.visit_u64(v).map(DataField::plain)
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<DataField<'de>, E> {
        ValVisitor.visit_f64(v).map(DataField::plain)
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<DataField<'de>, E> {
        Ok(DataField::plain(Val::Str(Cow::Borrowed(""))))
    }
    fn visit_unit<E: de::Error>(self) -> Result<DataField<'de>, E> {
        Ok(DataField::plain(Val::Null))
    }
    fn visit_none<E: de::Error>(self) -> Result<DataField<'de>, E> {
        Ok(DataField::plain(Val::Null))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<DataField<'de>, A::Error> {
        ValVisitor.visit_seq(seq).map(DataField::plain)
    }
}

impl<'a> DataField<'a> {
    fn plain(val: Val<'a>) -> Self {
        DataField { val, hints: None }
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for DataField<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<DataField<'a>, D::Error> {
        d.deserialize_any(DataVisitor)
    }
}

/// Every field any line type names; what a line type does not use is ignored.
#[derive(Debug, Default, PartialEq)]
pub(super) struct Fields<'a> {
    pub(super) ty: Val<'a>,
    pub(super) version: Val<'a>,
    pub(super) metadata: Val<'a>,
    pub(super) clk: Val<'a>,
    pub(super) id: Val<'a>,
    pub(super) parent_id: Val<'a>,
    pub(super) record_id: Val<'a>,
    pub(super) name: Val<'a>,
    pub(super) record_type: Val<'a>,
    pub(super) description: Val<'a>,
    pub(super) data: DataField<'a>,
    pub(super) capture_end_clk: Val<'a>,
    pub(super) total_records: Val<'a>,
    pub(super) total_annotations: Val<'a>,
    pub(super) total_events: Val<'a>,
    pub(super) open_records: Val<'a>,
}

/// The bit of `data` in the duplicate check (the members of [`Fields::member`] use 0..=14).
pub(super) const DATA_BIT: u32 = 15;

impl<'a> Fields<'a> {
    /// The one table of the members this view checks, for both parsers (serde and the fast
    /// path): bit for the duplicate check, name, and slot. `data` has its own handling
    /// ([`DATA_BIT`]); any other key is skipped. A test checks it against the vocabulary's
    /// required members of every line type.
    pub(super) fn member(&mut self, key: &str) -> Option<(u32, &'static str, &mut Val<'a>)> {
        Some(match key {
            "type" => (0, "type", &mut self.ty),
            "version" => (1, "version", &mut self.version),
            "metadata" => (2, "metadata", &mut self.metadata),
            "clk" => (3, "clk", &mut self.clk),
            "id" => (4, "id", &mut self.id),
            "parent_id" => (5, "parent_id", &mut self.parent_id),
            "record_id" => (6, "record_id", &mut self.record_id),
            "name" => (7, "name", &mut self.name),
            "record_type" => (8, "record_type", &mut self.record_type),
            "description" => (9, "description", &mut self.description),
            "capture_end_clk" => (10, "capture_end_clk", &mut self.capture_end_clk),
            "total_records" => (11, "total_records", &mut self.total_records),
            "total_annotations" => (12, "total_annotations", &mut self.total_annotations),
            "total_events" => (13, "total_events", &mut self.total_events),
            "open_records" => (14, "open_records", &mut self.open_records),
            _ => return None,
        })
    }
}

/// Fills a [`Fields`] in place (a derived `Deserialize` would build it field by field and then
/// move it, copying a few hundred bytes per line).
struct FieldsSeed<'f, 'a>(&'f mut Fields<'a>);

impl<'de: 'a, 'a> de::DeserializeSeed<'de> for FieldsSeed<'_, 'a> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de: 'a, 'a> Visitor<'de> for FieldsSeed<'_, 'a> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let f = self.0;
        let mut seen = 0u32;
        while let Some(Key(key)) = map.next_key::<Key<'de>>()? {
            if key == "data" {
                if seen & (1 << DATA_BIT) != 0 {
                    return Err(de::Error::duplicate_field("data"));
                }
                seen |= 1 << DATA_BIT;
                f.data = map.next_value()?;
                continue;
            }
            let Some((bit, name, slot)) = f.member(&key) else {
                map.next_value::<Readable>()?;
                continue;
            };
            if seen & (1 << bit) != 0 {
                return Err(de::Error::duplicate_field(name));
            }
            seen |= 1 << bit;
            *slot = map.next_value()?;
        }
        Ok(())
    }
}

/// Parses a line into `f`.
pub(super) fn parse_fields<'a>(text: &'a str, f: &mut Fields<'a>) -> Result<(), serde_json::Error> {
    use serde::de::DeserializeSeed;
    let mut de = serde_json::Deserializer::from_str(text);
    FieldsSeed(f).deserialize(&mut de)?;
    de.end()
}

/// Collects the diagnostics of one line.
struct LineCheck<'r, 'o> {
    raw: &'r RawLine<'r>,
    out: &'o mut Vec<Diagnostic>,
    error: bool,
}

impl LineCheck<'_, '_> {
    fn report(&mut self, rule: Rule, column: u64, message: String, help: Option<&'static str>) {
        if rule.level() == super::Level::Error {
            self.error = true;
        }
        self.out.push(Diagnostic {
            rule,
            line: self.raw.number,
            column,
            offset: self.raw.offset,
            message,
            source: source_text(self.raw.bytes),
            note: None,
            help,
        });
    }

    /// The column of `"key"` in the line, or 1.
    fn column_of(&self, key: &str) -> u64 {
        let quoted = format!("\"{key}\"");
        memmem::find(self.raw.bytes, quoted.as_bytes()).map_or(1, |p| p as u64 + 1)
    }

    fn field(&mut self, rule: Rule, key: &str, message: String) {
        let column = self.column_of(key);
        self.report(rule, column, message, None)
    }

    /// A required string field.
    fn string(&mut self, what: LineType, key: &str, v: &Val<'_>) {
        match v {
            Val::Str(_) => {}
            Val::Missing => self.missing(what, key),
            other => {
                self.field(Rule::WrongType, key, format!("`{key}` must be a string, found {other}"))
            }
        }
    }

    fn missing(&mut self, what: LineType, key: &str) {
        let message = format!("{} is missing required field `{key}`", what.as_str());
        self.report(Rule::MissingField, 1, message, None)
    }

    /// A required (or, with `optional`, optional) u64 field checked under `rule`.
    fn uint(
        &mut self,
        what: LineType,
        rule: Rule,
        key: &str,
        v: &Val<'_>,
        optional: bool,
    ) -> Option<u64> {
        match v {
            Val::U64(n) => Some(*n),
            Val::Missing if optional => None,
            Val::Missing => {
                self.missing(what, key);
                None
            }
            other => {
                let message = format!("`{key}` must be an unsigned 64-bit integer, found {other}");
                self.field(rule, key, message);
                None
            }
        }
    }

    /// Checks each hint of the vocabulary's table for records or events by its type.
    fn hints(&mut self, hints: &Hints<'_>, record: bool) {
        let (table, vals): (&[(&str, HintType)], &[Val<'_>]) =
            if record { (&RECORD_HINTS, &hints.record) } else { (&EVENT_HINTS, &hints.event) };
        for (&(key, ty), v) in table.iter().zip(vals) {
            self.hint_value(key, ty, v);
        }
    }

    fn hint_value(&mut self, key: &str, ty: HintType, v: &Val<'_>) {
        match ty {
            HintType::Color => {
                if let Val::Str(s) = v {
                    if s.parse::<Color>().is_err() {
                        self.hint(Rule::BadColor, key, format!("`{key}` {s:?} is not #rrggbb"));
                    }
                } else if !v.is_missing() {
                    let message = format!("`{key}` must be a \"#rrggbb\" string, found {v}");
                    self.hint(Rule::BadColor, key, message);
                }
            }
            HintType::UInt => {
                if !matches!(v, Val::Missing | Val::U64(_)) {
                    let message = format!("`{key}` must be an unsigned integer, found {v}");
                    self.hint(Rule::BadHintType, key, message);
                }
            }
            HintType::Text => self.hint_string(key, v),
            HintType::Fraction => {
                let ok = match v {
                    Val::Missing => true,
                    Val::U64(n) => *n <= 1,
                    Val::Float(x) => (0.0..=1.0).contains(x),
                    _ => false,
                };
                if !ok {
                    let message = format!("`{key}` must be a number in [0, 1], found {v}");
                    self.hint(Rule::BadCriticality, key, message);
                }
            }
            HintType::Status => self.hint_enum::<Status>(Rule::BadStatus, key, v),
            HintType::Severity => self.hint_enum::<Severity>(Rule::BadSeverity, key, v),
            HintType::MarkerStyle => self.hint_enum::<MarkerStyle>(Rule::BadMarkerStyle, key, v),
        }
    }

    fn hint(&mut self, rule: Rule, key: &str, message: String) {
        let column = self.column_of(key);
        self.report(rule, column, message, None)
    }

    fn hint_string(&mut self, key: &str, v: &Val<'_>) {
        if !matches!(v, Val::Missing | Val::Str(_)) {
            self.hint(Rule::BadHintType, key, format!("`{key}` must be a string, found {v}"));
        }
    }

    fn hint_enum<T: std::str::FromStr<Err = jets_format::hints::HintError>>(
        &mut self,
        rule: Rule,
        key: &str,
        v: &Val<'_>,
    ) {
        match v {
            Val::Missing => {}
            Val::Str(s) => {
                if let Err(e) = s.parse::<T>() {
                    self.hint(rule, key, format!("`{key}`: {}", e.to_string().trim_end()));
                }
            }
            other => self.hint(rule, key, format!("`{key}` must be a string, found {other}")),
        }
    }
}

const TORN_HELP: &str =
    "the writer stopped in the middle of this line (a crash?); `jets repair` keeps the complete lines";

/// Checks one line on its own, appending its diagnostics to `out`.
pub(crate) fn check_line(raw: &RawLine<'_>, out: &mut Vec<Diagnostic>) -> Fact {
    let mut c = LineCheck { raw, out, error: false };
    let kind = check_fields(&mut c);
    let error = c.error;
    Fact { line: raw.number, offset: raw.offset, len: raw.bytes.len(), error, kind }
}

fn check_fields(c: &mut LineCheck<'_, '_>) -> Kind {
    let bytes = c.raw.bytes;
    // One UTF-8 check per line is cheaper than serde_json's check per string.
    let text = match std::str::from_utf8(bytes) {
        Ok(t) => t,
        Err(e) => {
            let column = e.valid_up_to() as u64 + 1;
            if c.raw.terminated {
                c.report(
                    Rule::InvalidJson,
                    column,
                    "invalid JSON: the line is not valid UTF-8".into(),
                    None,
                );
            } else {
                let message = "the trace ends in the middle of this line (invalid UTF-8)".into();
                c.report(Rule::TornLine, column, message, Some(TORN_HELP));
            }
            return Kind::Unusable;
        }
    };
    let mut fields = Fields::default();
    if super::fast::parse(text, &mut fields).is_none() {
        // Anything the fast path does not handle (escapes, signs, fractions, errors) goes through
        // serde_json, which also words the error.
        fields = Fields::default();
        if let Err(e) = parse_fields(text, &mut fields) {
            return json_error(c, e);
        }
    }
    if !c.raw.terminated {
        c.report(
            Rule::NoFinalNewline,
            bytes.len() as u64 + 1,
            "the last line has no newline".into(),
            None,
        );
    }
    let what = match &fields.ty {
        Val::Str(s) => match LineType::parse(s) {
            Some(t) => t,
            None => {
                let message = format!(
                    "unknown line type {s:?}: expected header, record, record_end, annotation, \
                     event or footer"
                );
                c.field(Rule::UnknownType, "type", message);
                return Kind::Unusable;
            }
        },
        Val::Missing => {
            c.report(Rule::MissingType, 1, "line has no `type` field".into(), None);
            return Kind::Unusable;
        }
        other => {
            c.field(Rule::MissingType, "type", format!("`type` must be a string, found {other}"));
            return Kind::Unusable;
        }
    };
    let f = &fields;
    match what {
        LineType::Header => {
            match &f.version {
                Val::Str(v) => {
                    if !(v.as_ref() == "2" || v.starts_with("2.")) {
                        let message =
                            format!("version {v:?} is not 2.x; this validator checks JETS 2.0");
                        c.field(Rule::UnsupportedVersion, "version", message);
                    }
                }
                Val::Missing => {
                    c.report(Rule::HeaderVersion, 1, "header has no `version`".into(), None)
                }
                other => c.field(
                    Rule::HeaderVersion,
                    "version",
                    format!("`version` must be a string, found {other}"),
                ),
            }
            match &f.metadata {
                Val::Object => {}
                Val::Missing => {
                    c.report(Rule::HeaderMetadata, 1, "header has no `metadata`".into(), None)
                }
                other => c.field(
                    Rule::HeaderMetadata,
                    "metadata",
                    format!("`metadata` must be an object, found {other}"),
                ),
            }
            Kind::Header
        }
        LineType::Record => {
            let clk = c.uint(what, Rule::InvalidClk, "clk", &f.clk, false);
            c.string(what, "name", &f.name);
            c.string(what, "record_type", &f.record_type);
            let id = c.uint(what, Rule::InvalidId, "id", &f.id, false);
            let parent = match &f.parent_id {
                Val::Null => Some(None),
                Val::Missing => {
                    let message =
                        "record is missing required field `parent_id` (use null for a root)".into();
                    c.report(Rule::MissingField, 1, message, None);
                    None
                }
                v => c.uint(what, Rule::InvalidId, "parent_id", v, false).map(Some),
            };
            c.string(what, "description", &f.description);
            match &f.data.val {
                Val::Missing | Val::Null | Val::Object => {}
                other => c.field(
                    Rule::WrongType,
                    "data",
                    format!("a record's `data` must be an object, found {other}"),
                ),
            }
            if let Some(h) = &f.data.hints {
                c.hints(h, true);
            }
            Kind::Record { id, parent, clk }
        }
        LineType::RecordEnd => {
            let clk = c.uint(what, Rule::InvalidClk, "clk", &f.clk, false);
            let id = c.uint(what, Rule::InvalidId, "record_id", &f.record_id, false);
            Kind::End { id, clk }
        }
        LineType::Annotation => {
            c.string(what, "name", &f.name);
            let id = c.uint(what, Rule::InvalidId, "record_id", &f.record_id, false);
            c.string(what, "description", &f.description);
            if f.data.val.is_missing() {
                c.missing(what, "data");
            }
            Kind::Annotation { id }
        }
        LineType::Event => {
            let clk = c.uint(what, Rule::InvalidClk, "clk", &f.clk, false);
            c.string(what, "name", &f.name);
            let id = c.uint(what, Rule::InvalidId, "record_id", &f.record_id, false);
            c.string(what, "description", &f.description);
            if let Some(h) = &f.data.hints {
                c.hints(h, false);
            }
            Kind::Event { id, clk }
        }
        LineType::Footer => {
            let capture_end =
                c.uint(what, Rule::WrongType, "capture_end_clk", &f.capture_end_clk, true);
            let totals = [
                c.uint(what, Rule::WrongType, "total_records", &f.total_records, true),
                c.uint(what, Rule::WrongType, "total_annotations", &f.total_annotations, true),
                c.uint(what, Rule::WrongType, "total_events", &f.total_events, true),
            ];
            let open_records = c.uint(what, Rule::WrongType, "open_records", &f.open_records, true);
            Kind::Footer(Box::new(FooterFacts { capture_end, totals, open_records }))
        }
    }
}

fn json_error(c: &mut LineCheck<'_, '_>, e: serde_json::Error) -> Kind {
    let bytes = c.raw.bytes;
    let column = e.column().max(1) as u64;
    let text = e.to_string();
    let bare = text.rfind(" at line ").map_or(&text[..], |i| &text[..i]);
    if !c.raw.terminated {
        let message = format!("the trace ends in the middle of this line ({bare})");
        c.report(Rule::TornLine, column, message, Some(TORN_HELP));
        return Kind::Unusable;
    }
    let first = bytes.iter().find(|b| !b.is_ascii_whitespace());
    if e.is_data() {
        if first == Some(&b'{') {
            // The only data error our field types raise: serde's duplicate-field check.
            let message = bare.replace("duplicate field", "duplicate field in one line:");
            c.report(Rule::DuplicateField, column, message, None);
        } else {
            c.report(Rule::NotObject, 1, "line is a JSON value but not an object".into(), None);
        }
        return Kind::Unusable;
    }
    if first.is_none() {
        c.report(Rule::InvalidJson, 1, "empty line".into(), None);
    } else {
        c.report(Rule::InvalidJson, column, format!("invalid JSON: {bare}"), None);
    }
    Kind::Unusable
}
