//! The closed vocabularies of the JETS 2.0 format, defined once.
//!
//! Every part of the SDK that needs one of these sets takes it from here: the format model
//! (`jets::format` re-exports them), the writer, the `#[jets::record]` macro (which is why this
//! crate has no dependencies: a proc-macro crate can use it), the validator, the converters and
//! the viewer (whose JavaScript receives them from the server). A test walks every list.
//!
//! ```
//! use jets_vocab::{LineType, Status};
//! assert_eq!("flushed".parse::<Status>(), Ok(Status::Flushed));
//! assert_eq!(LineType::parse("record_end"), Some(LineType::RecordEnd));
//! ```

#![deny(clippy::print_stdout)]
#![forbid(unsafe_code)]

use std::fmt;
use std::str::FromStr;

/// A vocabulary value that could not be parsed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HintError {
    what: &'static str,
    text: String,
    expected: &'static str,
}

impl HintError {
    /// What was being parsed (`status`, `color`, ...).
    pub fn what(&self) -> &'static str {
        self.what
    }

    /// The accepted spellings, separated by spaces (or the pattern, for colors).
    pub fn expected(&self) -> &'static str {
        self.expected
    }
}

impl fmt::Display for HintError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {:?} is not one of {}", self.what, self.text, self.expected.trim_end())
    }
}

impl std::error::Error for HintError {}

/// An RGB color, written `#rrggbb`.
///
/// ```
/// use jets_vocab::Color;
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

    /// The text's bytes, with no UTF-8 check (for an encoder that copies them as they are).
    pub fn as_bytes(&self) -> &[u8; 7] {
        &self.0
    }
}

impl fmt::Display for Color {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.to_hex().as_str())
    }
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

/// Defines a closed set: the enum, `ALL`, `as_str`, `FromStr` and `Display`, from one table.
macro_rules! vocabulary {
    ($(#[$m:meta])* $name:ident, $what:literal { $($(#[$vm:meta])* $variant:ident = $text:literal),* $(,)? }) => {
        $(#[$m])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum $name { $($(#[$vm])* $variant),* }

        impl $name {
            /// Every value, in spec order.
            pub const ALL: &'static [$name] = &[$($name::$variant),*];
            /// The spelling in the trace.
            pub const fn as_str(self) -> &'static str {
                match self { $($name::$variant => $text),* }
            }
            /// Parses the spelling in the trace.
            pub fn parse(s: &str) -> Option<$name> {
                match s { $($text => Some($name::$variant),)* _ => None }
            }
            /// Where this value stands in [`Self::ALL`] (a stable small code, e.g. for the viewer).
            pub const fn code(self) -> u8 {
                self as u8
            }
        }

        impl FromStr for $name {
            type Err = HintError;
            fn from_str(s: &str) -> Result<Self, HintError> {
                $name::parse(s).ok_or_else(|| HintError {
                    what: $what,
                    text: s.to_owned(),
                    expected: concat!($($text, " "),*),
                })
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result { f.write_str(self.as_str()) }
        }
    };
}

vocabulary!(
    /// The six values of a line's `type` field.
    LineType, "line type" {
        /// `header`
        Header = "header",
        /// `record`
        Record = "record",
        /// `record_end`
        RecordEnd = "record_end",
        /// `annotation`
        Annotation = "annotation",
        /// `event`
        Event = "event",
        /// `footer`
        Footer = "footer",
    }
);

impl LineType {
    /// The members the spec requires on a line of this type (besides `type`), in spec order.
    pub const fn required(self) -> &'static [&'static str] {
        match self {
            LineType::Header => &["version", "metadata"],
            LineType::Record => &["clk", "name", "record_type", "id", "parent_id", "description"],
            LineType::RecordEnd => &["clk", "record_id"],
            LineType::Annotation => &["name", "record_id", "description", "data"],
            LineType::Event => &["clk", "name", "record_id", "description"],
            LineType::Footer => &[],
        }
    }
}

vocabulary!(
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

vocabulary!(
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

vocabulary!(
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

/// The JSON type a visualization hint must have.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HintType {
    /// A `#rrggbb` string ([`Color`]).
    Color,
    /// A non-negative integer.
    UInt,
    /// Any string.
    Text,
    /// A number in `[0, 1]`.
    Fraction,
    /// One of [`Status`].
    Status,
    /// One of [`Severity`].
    Severity,
    /// One of [`MarkerStyle`].
    MarkerStyle,
}

/// The reserved `data` keys of a record's visualization hints, with their types.
pub const RECORD_HINTS: [(&str, HintType); 7] = [
    ("color", HintType::Color),
    ("unit_id", HintType::UInt),
    ("thread_id", HintType::UInt),
    ("subunit_id", HintType::UInt),
    ("display_label", HintType::Text),
    ("status", HintType::Status),
    ("criticality", HintType::Fraction),
];

/// The reserved `data` keys of an event's visualization hints, with their types.
pub const EVENT_HINTS: [(&str, HintType); 4] = [
    ("color", HintType::Color),
    ("icon", HintType::Text),
    ("severity", HintType::Severity),
    ("marker_style", HintType::MarkerStyle),
];

/// The reserved `data` keys of a record's visualization hints.
pub const RECORD_HINT_KEYS: [&str; 7] = {
    let mut keys = [""; 7];
    let mut i = 0;
    while i < keys.len() {
        keys[i] = RECORD_HINTS[i].0;
        i += 1;
    }
    keys
};

/// The reserved `data` keys of an event's visualization hints.
pub const EVENT_HINT_KEYS: [&str; 4] = {
    let mut keys = [""; 4];
    let mut i = 0;
    while i < keys.len() {
        keys[i] = EVENT_HINTS[i].0;
        i += 1;
    }
    keys
};

/// The type of a record hint key, if it is one.
pub fn record_hint(key: &str) -> Option<HintType> {
    RECORD_HINTS.iter().find(|(k, _)| *k == key).map(|(_, t)| *t)
}

/// The type of an event hint key, if it is one.
pub fn event_hint(key: &str) -> Option<HintType> {
    EVENT_HINTS.iter().find(|(k, _)| *k == key).map(|(_, t)| *t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_value_round_trips_and_codes_are_positions() {
        for (i, s) in Status::ALL.iter().enumerate() {
            assert_eq!(s.as_str().parse::<Status>(), Ok(*s));
            assert_eq!(s.code() as usize, i);
        }
        for (i, s) in Severity::ALL.iter().enumerate() {
            assert_eq!(s.as_str().parse::<Severity>(), Ok(*s));
            assert_eq!(s.code() as usize, i);
        }
        for s in MarkerStyle::ALL {
            assert_eq!(s.as_str().parse::<MarkerStyle>(), Ok(*s));
        }
        for t in LineType::ALL {
            assert_eq!(LineType::parse(t.as_str()), Some(*t));
            assert!(!t.required().contains(&"type"));
        }
        assert!("Running".parse::<Status>().is_err());
        let e = "x".parse::<Status>().unwrap_err().to_string();
        assert_eq!(e, "status \"x\" is not one of running stalled complete flushed");
    }

    #[test]
    fn hint_key_lists_follow_the_typed_tables() {
        assert_eq!(RECORD_HINT_KEYS[0], "color");
        assert_eq!(RECORD_HINT_KEYS[6], "criticality");
        assert_eq!(EVENT_HINT_KEYS, ["color", "icon", "severity", "marker_style"]);
        assert_eq!(record_hint("status"), Some(HintType::Status));
        assert_eq!(event_hint("status"), None);
    }

    #[test]
    fn colors() {
        assert_eq!(Color::rgb(0x0a0b0c).to_string(), "#0a0b0c");
        assert!("#12345".parse::<Color>().is_err());
        assert!("#12345g".parse::<Color>().is_err());
        assert!("#+12345".parse::<Color>().is_err());
    }
}
