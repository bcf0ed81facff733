//! Visualization hints: optional fields in a record's or event's `data` that Gantt viewers read.
//!
//! The spec lists them as conventions inside `data`, so they are written there under their spec
//! names. Reading is lenient: a malformed hint is ignored here (the validator warns about it).

use std::fmt;
use std::str::FromStr;

use serde_json::{Map, Value};

/// The reserved `data` keys of a record's visualization hints.
pub const RECORD_HINT_KEYS: [&str; 7] =
    ["color", "unit_id", "thread_id", "subunit_id", "display_label", "status", "criticality"];
/// The reserved `data` keys of an event's visualization hints.
pub const EVENT_HINT_KEYS: [&str; 4] = ["color", "icon", "severity", "marker_style"];

/// An RGB color, written `#rrggbb`.
///
/// ```
/// use jets::format::Color;
/// let c: Color = "#FF5722".parse().unwrap();
/// assert_eq!(c, Color::rgb(0xff5722));
/// assert_eq!(c.to_hex().as_str(), "#ff5722");
/// assert!("red".parse::<Color>().is_err());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Color(u32);

impl Color {
    /// A color from `0xRRGGBB`; bits above 24 are ignored.
    pub const fn rgb(rgb: u32) -> Self {
        Color(rgb & 0xff_ffff)
    }

    /// The `0xRRGGBB` value.
    pub const fn value(self) -> u32 {
        self.0
    }

    /// The `#rrggbb` text, without allocating.
    pub fn to_hex(self) -> HexColor {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let mut b = [b'#'; 7];
        for i in 0..6 {
            b[1 + i] = HEX[((self.0 >> (20 - 4 * i)) & 0xf) as usize];
        }
        HexColor(b)
    }
}

/// The text of a [`Color`]: `#rrggbb`.
#[derive(Clone, Copy, Debug)]
pub struct HexColor([u8; 7]);

impl HexColor {
    /// The text.
    pub fn as_str(&self) -> &str {
        // Only ASCII hex digits and '#' are ever stored.
        std::str::from_utf8(&self.0).unwrap_or("#000000")
    }
}

impl fmt::Display for Color {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.to_hex().as_str())
    }
}

/// A hint that could not be parsed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{what} {text:?} is not one of {expected}")]
pub struct HintError {
    what: &'static str,
    text: String,
    expected: &'static str,
}

impl FromStr for Color {
    type Err = HintError;
    fn from_str(s: &str) -> Result<Self, HintError> {
        let err = || HintError { what: "color", text: s.to_owned(), expected: "#rrggbb" };
        let hex = s.strip_prefix('#').ok_or_else(err)?;
        if hex.len() != 6 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(err());
        }
        u32::from_str_radix(hex, 16).map(Color).map_err(|_| err())
    }
}

macro_rules! hint_enum {
    ($(#[$m:meta])* $name:ident, $what:literal { $($(#[$vm:meta])* $variant:ident = $text:literal),* $(,)? }) => {
        $(#[$m])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum $name { $($(#[$vm])* $variant),* }

        impl $name {
            /// Every value, in spec order.
            pub const ALL: &'static [$name] = &[$($name::$variant),*];
            /// The spelling in the trace.
            pub const fn as_str(self) -> &'static str {
                match self { $($name::$variant => $text),* }
            }
        }

        impl FromStr for $name {
            type Err = HintError;
            fn from_str(s: &str) -> Result<Self, HintError> {
                match s {
                    $($text => Ok($name::$variant),)*
                    _ => Err(HintError {
                        what: $what,
                        text: s.to_owned(),
                        expected: concat!($($text, " "),*),
                    }),
                }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result { f.write_str(self.as_str()) }
        }

        impl From<$name> for super::Value {
            fn from(v: $name) -> Self { super::Value::Str(super::Str::Static(v.as_str())) }
        }
    };
}

hint_enum!(
    /// A record's visual state (`data.status`).
    Status, "status" {
        /// Still executing.
        Running = "running",
        /// Waiting on something.
        Stalled = "stalled",
        /// Finished normally.
        Complete = "complete",
        /// Left without effect: squashed or flushed from a pipeline (Konata shows it as a flush).
        Flushed = "flushed",
    }
);

hint_enum!(
    /// An event's visual severity (`data.severity`).
    Severity, "severity" {
        /// Informational.
        Info = "info",
        /// Worth a look (a stall, a miss).
        Warning = "warning",
        /// Something went wrong.
        Error = "error",
    }
);

hint_enum!(
    /// How an event marker is drawn (`data.marker_style`).
    MarkerStyle, "marker_style" {
        /// A small box.
        Box = "box",
        /// A diamond.
        Diamond = "diamond",
        /// A circle.
        Circle = "circle",
        /// A vertical line.
        Line = "line",
    }
);

/// The visualization hints of a record, read from its `data`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RecordHints<'a> {
    /// Bar color override.
    pub color: Option<Color>,
    /// Execution unit (swimlane group).
    pub unit_id: Option<u64>,
    /// Lane within the unit.
    pub thread_id: Option<u64>,
    /// Sub-unit within the unit.
    pub subunit_id: Option<u64>,
    /// Short label on the bar.
    pub display_label: Option<&'a str>,
    /// Visual state.
    pub status: Option<Status>,
    /// Critical-path weight in [0, 1].
    pub criticality: Option<f64>,
}

impl<'a> RecordHints<'a> {
    /// Reads the hints from a record's `data` object, ignoring malformed ones.
    pub fn from_data(data: &'a Map<String, Value>) -> Self {
        RecordHints {
            color: data.get("color").and_then(Value::as_str).and_then(|s| s.parse().ok()),
            unit_id: data.get("unit_id").and_then(Value::as_u64),
            thread_id: data.get("thread_id").and_then(Value::as_u64),
            subunit_id: data.get("subunit_id").and_then(Value::as_u64),
            display_label: data.get("display_label").and_then(Value::as_str),
            status: data.get("status").and_then(Value::as_str).and_then(|s| s.parse().ok()),
            criticality: data.get("criticality").and_then(Value::as_f64),
        }
    }
}

/// The visualization hints of an event, read from its `data`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct EventHints<'a> {
    /// Marker color.
    pub color: Option<Color>,
    /// Icon identifier, e.g. `cache_miss`.
    pub icon: Option<&'a str>,
    /// Visual severity.
    pub severity: Option<Severity>,
    /// Marker shape.
    pub marker_style: Option<MarkerStyle>,
}

impl<'a> EventHints<'a> {
    /// Reads the hints from an event's `data`, ignoring malformed ones and non-object data.
    pub fn from_data(data: &'a Value) -> Self {
        let Some(m) = data.as_object() else { return EventHints::default() };
        EventHints {
            color: m.get("color").and_then(Value::as_str).and_then(|s| s.parse().ok()),
            icon: m.get("icon").and_then(Value::as_str),
            severity: m.get("severity").and_then(Value::as_str).and_then(|s| s.parse().ok()),
            marker_style: m
                .get("marker_style")
                .and_then(Value::as_str)
                .and_then(|s| s.parse().ok()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn enums_round_trip() {
        for s in Status::ALL {
            assert_eq!(s.as_str().parse::<Status>(), Ok(*s));
        }
        for s in Severity::ALL {
            assert_eq!(s.as_str().parse::<Severity>(), Ok(*s));
        }
        for s in MarkerStyle::ALL {
            assert_eq!(s.as_str().parse::<MarkerStyle>(), Ok(*s));
        }
        assert!("Running".parse::<Status>().is_err());
    }

    #[test]
    fn record_hints_from_data() {
        let v: Value = serde_json::json!({
            "color": "#00ff00", "unit_id": 2, "thread_id": 5, "display_label": "LD R4",
            "status": "stalled", "criticality": 0.5, "subunit_id": "bad"
        });
        let h = RecordHints::from_data(v.as_object().expect("object"));
        assert_eq!(h.color, Some(Color::rgb(0x00ff00)));
        assert_eq!(h.unit_id, Some(2));
        assert_eq!(h.subunit_id, None);
        assert_eq!(h.status, Some(Status::Stalled));
        assert_eq!(h.display_label, Some("LD R4"));
    }

    #[test]
    fn colors() {
        assert_eq!(Color::rgb(0x0a0b0c).to_string(), "#0a0b0c");
        assert!("#12345".parse::<Color>().is_err());
        assert!("#12345g".parse::<Color>().is_err());
        assert!("#+12345".parse::<Color>().is_err());
    }
}
