//! Turning `tracing` field values into typed JETS `data`, and picking out the reserved names.

use std::fmt::{self, Write as _};

use tracing::field::{Field, Visit};
use tracing::Metadata;

use super::callsites::{self, Slot};

use crate::format::hints::{EVENT_HINT_KEYS, RECORD_HINT_KEYS};
use crate::format::{Color, Data, Str, Value};

/// Field names with a meaning of their own (not copied into `data`).
pub(super) const RECORD_TYPE: &str = "record_type";
pub(super) const DESCRIPTION: &str = "description";
pub(super) const CLK: &str = "clk";
pub(super) const END_CLK: &str = "end_clk";
const MESSAGE: &str = "message";
/// Prefix of the visualization hints: `jets.color` is written as the `color` hint.
const HINT_PREFIX: &str = "jets.";

/// Whether the fields belong to a record (span) or an event: they have different hint sets.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    Record,
    Event,
    /// Fields recorded on a span after its record was written (an annotation): `record_type`
    /// can no longer change, so it is data there.
    Late,
}

/// The fields of one span, event or `span.record(..)` call, sorted into `data` and the reserved
/// names. Field names from `tracing` are `&'static str`, so up to [`Data::INLINE`] typed fields
/// are kept without allocating.
pub(super) struct Fields {
    kind: Kind,
    /// The callsite: literal `record_type`, `description` texts are kept once per callsite.
    meta: &'static Metadata<'static>,
    pub data: Data,
    pub record_type: Option<Str>,
    pub description: Option<Str>,
    pub clk: Option<u64>,
    pub end_clk: Option<u64>,
    /// The event's message text, when `has_message`: a reused buffer, so formatting it does
    /// not allocate once the buffer has grown.
    pub message: String,
    pub has_message: bool,
    pub has_severity: bool,
    /// The first field copied into `data`: names an annotation made of late fields.
    pub first: Option<&'static str>,
    /// Only the cycles are read, and which fields would go to `data`: for a line that capture
    /// leaves out whatever they hold, so that no value is formatted or copied ([`Fields::lean`]).
    lean: bool,
}

impl Fields {
    pub fn new(kind: Kind, meta: &'static Metadata<'static>, mut message: String) -> Self {
        message.clear();
        Fields {
            kind,
            meta,
            data: Data::new(),
            record_type: None,
            description: None,
            clk: None,
            end_clk: None,
            message,
            has_message: false,
            has_severity: false,
            first: None,
            lean: false,
        }
    }

    /// Fields for a line capture leaves out whatever they hold (capture is off): `clk`,
    /// `end_clk` and which fields would go to `data` are read, nothing is formatted, copied or
    /// kept.
    pub fn lean(kind: Kind, meta: &'static Metadata<'static>) -> Self {
        Fields { lean: true, ..Fields::new(kind, meta, String::new()) }
    }

    /// Files a text, Debug or error value in lean fields without making it: under `message`
    /// (when the visitor takes `message` as the message: text and Debug do, an error goes to
    /// `data`) it only marks the message; any other name is filed by [`Fields::put`] as an empty
    /// text, so it goes where the real text would, and nothing is formatted or copied.
    fn put_unmade(&mut self, field: &Field, message: bool) {
        match field.name() {
            MESSAGE if message => self.has_message = true,
            _ => self.put(field, Value::Str(Str::EMPTY)),
        }
    }

    /// Files one value under its field name.
    fn put(&mut self, field: &Field, value: Value) {
        let name = field.name();
        if self.lean && (name == DESCRIPTION || name == RECORD_TYPE && self.kind == Kind::Record) {
            return; // texts only a written line uses (a number would be formatted): not made
        }
        match name {
            RECORD_TYPE if self.kind == Kind::Record => self.record_type = Some(into_str(value)),
            DESCRIPTION => self.description = Some(into_str(value)),
            CLK => match as_cycle(&value) {
                Some(c) => self.clk = Some(c),
                None => self.push(name, value),
            },
            END_CLK if self.kind != Kind::Event => match as_cycle(&value) {
                Some(c) => self.end_clk = Some(c),
                None => self.push(name, value),
            },
            _ => match name.strip_prefix(HINT_PREFIX).filter(|h| self.is_hint(h)) {
                Some(hint) => {
                    self.has_severity |= hint == "severity";
                    let value = if hint == "color" { normalize_color(value) } else { value };
                    self.push(hint, value);
                }
                None => self.push(name, value),
            },
        }
    }

    fn is_hint(&self, key: &str) -> bool {
        match self.kind {
            Kind::Record | Kind::Late => RECORD_HINT_KEYS.contains(&key),
            Kind::Event => EVENT_HINT_KEYS.contains(&key),
        }
    }

    fn push(&mut self, key: &'static str, value: Value) {
        self.first.get_or_insert(key);
        if !self.lean {
            self.data.push(key, value);
        }
    }
}

/// A text field used as a name or description.
fn into_str(value: Value) -> Str {
    match value {
        Value::Str(s) => s,
        other => {
            let mut out = Vec::new();
            other.write_json(&mut out);
            String::from_utf8_lossy(&out).into_owned().into()
        }
    }
}

/// A cycle number: a non-negative integer.
fn as_cycle(value: &Value) -> Option<u64> {
    match *value {
        Value::U64(c) => Some(c),
        Value::I64(c) => u64::try_from(c).ok(),
        _ => None,
    }
}

/// `"#FF5722"` and `0xff5722` both become the spec's `"#ff5722"`; anything else is kept as given
/// (the validator reports a malformed hint).
fn normalize_color(value: Value) -> Value {
    match &value {
        Value::Str(s) => s.parse::<Color>().map(Value::Color).unwrap_or(value),
        Value::U64(v) if *v <= 0xff_ffff => Value::Color(Color::rgb(*v as u32)),
        _ => value,
    }
}

impl Visit for Fields {
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.put(field, Value::U64(value));
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.put(field, Value::I64(value));
    }
    fn record_u128(&mut self, field: &Field, value: u128) {
        if self.lean && u64::try_from(value).is_err() {
            return self.put_unmade(field, false);
        }
        match u64::try_from(value) {
            Ok(v) => self.put(field, Value::U64(v)),
            // JSON readers lose precision beyond 64 bits: keep the exact digits as text.
            Err(_) => self.put(field, Value::Str(value.to_string().into())),
        }
    }
    fn record_i128(&mut self, field: &Field, value: i128) {
        if self.lean && i64::try_from(value).is_err() {
            return self.put_unmade(field, false);
        }
        match i64::try_from(value) {
            Ok(v) => self.put(field, Value::I64(v)),
            Err(_) => self.put(field, Value::Str(value.to_string().into())),
        }
    }
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.put(field, Value::F64(value));
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.put(field, Value::Bool(value));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        if self.lean {
            return self.put_unmade(field, true);
        }
        match field.name() {
            MESSAGE => {
                self.message.clear();
                self.message.push_str(value);
                self.has_message = true;
            }
            RECORD_TYPE if self.kind == Kind::Record => {
                self.record_type = Some(callsites::text(self.meta, Slot::RecordType, value))
            }
            DESCRIPTION => {
                self.description = Some(callsites::text(self.meta, Slot::Description, value))
            }
            _ => self.put(field, Value::Str(value.to_owned().into())),
        }
    }
    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        if self.lean {
            return self.put_unmade(field, false);
        }
        self.put(field, Value::Str(value.to_string().into()));
    }
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        if self.lean {
            return self.put_unmade(field, true);
        }
        // Writing to a String cannot fail; a Debug impl that errors leaves what it wrote.
        if field.name() == MESSAGE {
            self.message.clear();
            let _ = write!(self.message, "{value:?}");
            self.has_message = true;
        } else {
            let mut text = String::new();
            let _ = write!(text, "{value:?}");
            self.put(field, Value::Str(text.into()));
        }
    }
}
