//! The rules, their stable codes, and the diagnostics they produce.

use std::fmt;

/// How bad a finding is: its level (named so as not to be confused with the format's event
/// `severity` hint, [`jets_format::Severity`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Level {
    /// The trace breaks the JETS 2.0 spec; readers may reject or misread it.
    Error,
    /// The trace is valid but probably not what its writer meant.
    Warning,
}

impl Level {
    /// `error` or `warning`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Level::Error => "error",
            Level::Warning => "warning",
        }
    }
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

macro_rules! rules {
    ($($(#[$m:meta])* $variant:ident = $code:literal, $sev:ident, $summary:literal;)*) => {
        /// A validation rule. Codes are stable: a rule is never renumbered or reused.
        ///
        /// The decision behind each rule (how the spec's ambiguities are read) is in
        /// `spec/rules.md`; every rule has a conformance case in `spec/conformance/`.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Rule {
            $($(#[$m])* $variant,)*
        }

        impl Rule {
            /// Every rule, in code order.
            pub const ALL: &'static [Rule] = &[$(Rule::$variant),*];

            /// The stable code, e.g. `E013`.
            pub const fn code(self) -> &'static str {
                match self { $(Rule::$variant => $code,)* }
            }

            /// Error or warning.
            pub const fn level(self) -> Level {
                match self { $(Rule::$variant => Level::$sev,)* }
            }

            /// One line saying what the rule checks.
            pub const fn summary(self) -> &'static str {
                match self { $(Rule::$variant => $summary,)* }
            }
        }
    };
}

rules! {
    /// A line is not valid JSON (including an empty line and invalid UTF-8).
    InvalidJson = "E001", Error, "line is not valid JSON";
    /// A line is JSON but not an object.
    NotObject = "E002", Error, "line is not a JSON object";
    /// The `type` field is missing or not a string.
    MissingType = "E003", Error, "line has no string `type` field";
    /// The `type` is not one of the six line types.
    UnknownType = "E004", Error, "`type` is not one of the six JETS line types";
    /// The first line is not a header.
    FirstNotHeader = "E005", Error, "first line is not a header";
    /// The header's `version` is missing or not a string.
    HeaderVersion = "E006", Error, "header `version` is missing or not a string";
    /// The header's `metadata` is missing or not an object.
    HeaderMetadata = "E007", Error, "header `metadata` is missing or not an object";
    /// A header after the first line.
    DuplicateHeader = "E008", Error, "second header";
    /// A field the line type requires is missing.
    MissingField = "E009", Error, "required field missing";
    /// A field has the wrong JSON type.
    WrongType = "E010", Error, "field has the wrong type";
    /// An id (`id`, `parent_id`, `record_id`) is not an unsigned 64-bit integer.
    InvalidId = "E011", Error, "id is not an unsigned 64-bit integer";
    /// A `clk` is not an unsigned 64-bit integer.
    InvalidClk = "E012", Error, "`clk` is not an unsigned 64-bit integer";
    /// Two records share an id.
    DuplicateId = "E013", Error, "duplicate record id";
    /// A record's parent has not appeared before it.
    UnknownParent = "E014", Error, "parent record not yet seen";
    /// A record_end, annotation or event refers to a record that has not appeared before it.
    UnknownRecord = "E015", Error, "reference to a record not yet seen";
    /// A record has a second `record_end`.
    DoubleEnd = "E016", Error, "record ended twice";
    /// A line follows the footer.
    AfterFooter = "E017", Error, "line after the footer";
    /// The last line has no newline and is not valid JSON: the writer stopped mid-line.
    TornLine = "E018", Error, "torn last line (the writer stopped mid-line)";
    /// A compressed trace ends before its end marker, or is corrupt.
    TruncatedStream = "E019", Error, "compressed stream cut short or corrupt";
    /// A known field appears twice in one line.
    DuplicateField = "E020", Error, "field appears twice in one line";
    /// A record ends before it starts.
    EndBeforeStart = "W001", Warning, "record_end earlier than the record's start";
    /// An event lies outside its record's [start, end].
    EventOutsideRecord = "W002", Warning, "event outside its record's span";
    /// A child starts before its parent starts (or after its parent ended).
    ChildOutsideParent = "W003", Warning, "child record starts outside its parent's span";
    /// A footer total disagrees with the lines in the file.
    FooterCount = "W004", Warning, "footer count disagrees with the file";
    /// The footer's `capture_end_clk` is earlier than a `clk` in the file.
    FooterCaptureEnd = "W005", Warning, "footer `capture_end_clk` earlier than the last clk";
    /// A `color` hint is not `#rrggbb`.
    BadColor = "W006", Warning, "`color` is not #rrggbb";
    /// A `criticality` hint is not a number in [0, 1].
    BadCriticality = "W007", Warning, "`criticality` is not a number in [0, 1]";
    /// A `status` hint is not running, stalled, complete or (this SDK's) flushed.
    BadStatus = "W008", Warning, "unknown `status`";
    /// A `severity` hint is not info, warning or error.
    BadSeverity = "W009", Warning, "unknown `severity`";
    /// A `marker_style` hint is not box, diamond, circle or line.
    BadMarkerStyle = "W010", Warning, "unknown `marker_style`";
    /// Another visualization hint has the wrong type (`unit_id` not an unsigned integer, ...).
    BadHintType = "W011", Warning, "visualization hint has the wrong type";
    /// The header's version is not a 2.x version.
    UnsupportedVersion = "W012", Warning, "header `version` is not 2.x";
    /// The last line is complete JSON but has no newline.
    NoFinalNewline = "W013", Warning, "last line has no newline";
}

impl Rule {
    /// The rule with this code (case-insensitive), e.g. `"e013"`.
    pub fn from_code(code: &str) -> Option<Rule> {
        Rule::ALL.iter().copied().find(|r| r.code().eq_ignore_ascii_case(code))
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.code())
    }
}

/// A pointer to another line that explains a diagnostic (where a duplicate id was first defined,
/// where the footer is, ...).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Note {
    /// The related line (1-based).
    pub line: u64,
    /// What that line is.
    pub message: String,
}

/// One finding of the validator.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostic {
    /// The rule broken.
    pub rule: Rule,
    /// The line (1-based). End-of-trace findings point one past the last line.
    pub line: u64,
    /// The column (1-based, in bytes) of the offending part of the line.
    pub column: u64,
    /// Byte offset of the line in the (decompressed) trace.
    pub offset: u64,
    /// What is wrong, in a sentence.
    pub message: String,
    /// The offending line's text (at most [`Diagnostic::MAX_SOURCE`] bytes; empty when the finding
    /// is about the end of the trace).
    pub source: String,
    /// A related line.
    pub note: Option<Note>,
    /// How to fix it, when there is a standard fix.
    pub help: Option<&'static str>,
}

impl Diagnostic {
    /// Lines longer than this are cut (at a character boundary) in [`Diagnostic::source`].
    pub const MAX_SOURCE: usize = 512;

    /// The rule's severity.
    pub fn level(&self) -> Level {
        self.rule.level()
    }
}

impl fmt::Display for Diagnostic {
    /// `line 12:5: error[E013]: duplicate record id 5 (note: ...)`, one line.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "line {}:{}: {}[{}]: {}",
            self.line,
            self.column,
            self.level(),
            self.rule.code(),
            self.message
        )?;
        if let Some(n) = &self.note {
            write!(f, " (note: line {}: {})", n.line, n.message)?;
        }
        Ok(())
    }
}

/// The source text of a line for a diagnostic: lossy UTF-8, cut to [`Diagnostic::MAX_SOURCE`].
pub(crate) fn source_text(bytes: &[u8]) -> String {
    let cut = &bytes[..bytes.len().min(Diagnostic::MAX_SOURCE)];
    let mut s = String::from_utf8_lossy(cut).into_owned();
    if s.ends_with('\r') {
        s.pop();
    }
    s
}
