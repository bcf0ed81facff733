//! What a trace's footer says of capture control, read back: the one reading that `jets stats`,
//! `jets view` and every other tool shares, so that none of them shows a part of a run as the
//! whole of it.

use std::fmt::Write as _;

use jets_format::Footer;

use super::{
    Capture, LeftOut, FOOTER_COUNTED, FOOTER_KINDS, FOOTER_LEFT_OUT, FOOTER_LIMIT_REACHED,
    FOOTER_RECORDER_DUMPS,
};

/// The footer member that names the setting that made the trace (CAP-FOOT-1).
pub const FOOTER_CAPTURE: &str = "capture";

/// What the footer's `capture`, `left_out_*`, `counted_*`, `recorder_dumps` and
/// `limit_reached` members say (CAP-FOOT-1, CAP-COUNT-1, CAP-LIM-1). The SDK writes them
/// whenever the trace is not the whole run.
///
/// ```
/// use jets::capture::FooterCapture;
/// let line = r#"{"type":"footer","capture":"clk=100..200","left_out_records":4,"left_out_events":17,"left_out_annotations":0,"left_out_record_ends":4}"#;
/// let jets::format::Line::Footer(footer) = jets::format::Line::parse(line).unwrap() else { panic!() };
/// let c = FooterCapture::read(&footer).unwrap();
/// assert_eq!(c.left_out.events, 17);
/// assert_eq!(c.setting().unwrap().window, Some(100..200));
/// assert_eq!(
///     c.describe(),
///     "capture: clk=100..200: a PART of the run (left out: 4 records, 17 events, 4 record_ends)"
/// );
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FooterCapture {
    /// The setting as the footer spells it: a `JETS_CAPTURE` text (`full` when only run-time
    /// off/on left lines out), or `compiled out`.
    pub spelled: String,
    /// Lines left out (members the footer lacks count 0).
    pub left_out: LeftOut,
    /// With `count`: the lines counted instead of written.
    pub counted: Option<LeftOut>,
    /// With a flight recorder: how many dumps wrote the file.
    pub recorder_dumps: Option<u64>,
    /// The file reached its `limit=` size, and capture stopped there (CAP-LIM-1).
    pub limit_reached: bool,
}

/// What the footer says when the instrumentation was built without jets-sdk's `enabled` feature.
pub(crate) const COMPILED_OUT: &str = "compiled out";

impl FooterCapture {
    /// The footer's capture members, or `None` when it has none (the trace is the whole run).
    pub fn read(footer: &Footer) -> Option<FooterCapture> {
        let extra = &footer.extra;
        let spelled = extra.get(FOOTER_CAPTURE)?.as_str()?.to_owned();
        let counts = |prefix: &str| -> Option<LeftOut> {
            let n = |k: &str| extra.get(&format!("{prefix}{k}")).and_then(|v| v.as_u64());
            let [r, e, a, x] = FOOTER_KINDS.map(n);
            [r, e, a, x].iter().any(Option::is_some).then(|| LeftOut {
                records: r.unwrap_or(0),
                events: e.unwrap_or(0),
                annotations: a.unwrap_or(0),
                record_ends: x.unwrap_or(0),
            })
        };
        Some(FooterCapture {
            spelled,
            left_out: counts(FOOTER_LEFT_OUT).unwrap_or_default(),
            counted: counts(FOOTER_COUNTED),
            recorder_dumps: extra.get(FOOTER_RECORDER_DUMPS).and_then(|v| v.as_u64()),
            limit_reached: extra.get(FOOTER_LIMIT_REACHED).and_then(|v| v.as_bool()) == Some(true),
        })
    }

    /// The setting, parsed back; `None` for `compiled out`, or a text this build does not read.
    pub fn setting(&self) -> Option<Capture> {
        self.spelled.parse().ok()
    }

    /// Whether the instrumentation was compiled out: the file holds no line of the run.
    pub fn compiled_out(&self) -> bool {
        self.spelled == COMPILED_OUT
    }

    /// One line for a reader: which setting, that the file is a part of the run (or holds no
    /// lines, for `count` and `compiled out`), and what was left out or counted.
    pub fn describe(&self) -> String {
        if self.compiled_out() {
            return "capture: compiled out: the instrumentation was built without jets-sdk's \
                    `enabled` feature; the file holds no line of the run"
                .to_owned();
        }
        let mut s = format!("capture: {}: ", self.spelled);
        match &self.counted {
            Some(counted) => {
                let _ = write!(
                    s,
                    "lines COUNTED, not written (counted: {}; left out: {}); the file holds no lines",
                    list(counted),
                    list(&self.left_out)
                );
            }
            None => {
                s.push_str("a PART of the run (");
                if self.limit_reached {
                    s.push_str("stopped at its size limit; ");
                }
                let _ = write!(s, "left out: {}", list(&self.left_out));
                // A flight recorder's file is its dumps, one after another.
                if let Some(n) = self.recorder_dumps {
                    let plural = if n == 1 { "" } else { "s" };
                    let _ = write!(s, "; written by {n} dump{plural} of the flight recorder");
                }
                s.push(')');
            }
        }
        s
    }
}

/// `4 records, 1 event` (kinds with none left out are not named), or `nothing`.
fn list(counts: &LeftOut) -> String {
    let named: Vec<String> = counts
        .by_kind()
        .iter()
        .filter(|(_, n)| *n > 0)
        .map(|&(kind, n)| {
            let kind = if n == 1 { kind.strip_suffix('s').unwrap_or(kind) } else { kind };
            format!("{n} {kind}")
        })
        .collect();
    if named.is_empty() {
        "nothing".to_owned()
    } else {
        named.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn footer(members: &str) -> Footer {
        let text = format!(r#"{{"type":"footer"{members}}}"#);
        match jets_format::Line::parse(&text).unwrap() {
            jets_format::Line::Footer(f) => f,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_whole_run_has_no_capture_members() {
        assert_eq!(FooterCapture::read(&footer(r#","total_records":3"#)), None);
    }

    #[test]
    fn a_recorder_says_its_dumps_and_a_count_says_it_holds_no_lines() {
        let c = FooterCapture::read(&footer(
            r#","capture":"recorder=1000","left_out_records":2,"left_out_events":0,"left_out_annotations":0,"left_out_record_ends":2,"recorder_dumps":3"#,
        ))
        .unwrap();
        assert_eq!(c.recorder_dumps, Some(3));
        assert_eq!(
            c.describe(),
            "capture: recorder=1000: a PART of the run (left out: 2 records, 2 record_ends; \
             written by 3 dumps of the flight recorder)"
        );
        let c = FooterCapture::read(&footer(
            r#","capture":"count","left_out_records":0,"counted_records":5,"counted_events":9"#,
        ))
        .unwrap();
        assert_eq!(c.counted, Some(LeftOut { records: 5, events: 9, ..LeftOut::default() }));
        assert_eq!(
            c.describe(),
            "capture: count: lines COUNTED, not written (counted: 5 records, 9 events; left out: \
             nothing); the file holds no lines"
        );
    }

    #[test]
    fn a_trace_stopped_at_its_size_limit_says_so() {
        let c = FooterCapture::read(&footer(
            r#","capture":"limit=64KiB","left_out_records":2,"left_out_events":40,"limit_reached":true"#,
        ))
        .unwrap();
        assert!(c.limit_reached);
        assert_eq!(c.setting().unwrap().limit, Some(64 << 10));
        assert_eq!(
            c.describe(),
            "capture: limit=64KiB: a PART of the run (stopped at its size limit; left out: 2 \
             records, 40 events)"
        );
        // A limit not reached: the setting names it, the line says nothing of it.
        let c = FooterCapture::read(&footer(
            r#","capture":"clk=0..9;limit=64KiB","left_out_events":1"#,
        ))
        .unwrap();
        assert!(!c.limit_reached);
        assert_eq!(
            c.describe(),
            "capture: clk=0..9;limit=64KiB: a PART of the run (left out: 1 event)"
        );
    }

    #[test]
    fn compiled_out_names_the_feature_and_has_no_setting() {
        let c = FooterCapture::read(&footer(r#","capture":"compiled out""#)).unwrap();
        assert!(c.compiled_out());
        assert_eq!(c.setting(), None);
        assert!(c.describe().contains("without jets-sdk's `enabled` feature"), "{}", c.describe());
    }
}
