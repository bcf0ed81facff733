//! Visualization hints: optional fields in a record's or event's `data` that Gantt viewers read.
//!
//! The spec lists them as conventions inside `data`, so they are written there under their spec
//! names. Reading is lenient: a malformed hint is ignored here (the validator warns about it).
//! The closed sets themselves (keys, statuses, severities, marker styles) are defined once in
//! [`jets_vocab`] and re-exported here.

use serde_json::{Map, Value};

pub use jets_vocab::{
    Color, HexColor, HintError, HintType, MarkerStyle, Severity, Status, EVENT_HINTS,
    EVENT_HINT_KEYS, RECORD_HINTS, RECORD_HINT_KEYS,
};

macro_rules! into_value {
    ($($name:ident),*) => {$(
        impl From<$name> for super::Value {
            fn from(v: $name) -> Self { super::Value::Str(super::Str::Static(v.as_str())) }
        }
    )*};
}
into_value!(Status, Severity, MarkerStyle);

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
}
