//! Capture control: which lines of a run reach the file.
//!
//! A long simulation cannot be traced whole; [`Capture`] selects what matters: a cycle window, the
//! regions of interest a simulator marks ([`crate::Trace::roi_begin`]), record types, event
//! names, units, a deterministic 1-of-N sample of a record type, or a flight recorder that keeps
//! the last cycles in memory and writes them on [`crate::Trace::dump`], a trigger event, a panic, a
//! fatal signal, Ctrl-C or SIGTERM, or close. Capture can also be switched off and on at run time
//! ([`crate::Trace::capture_off`]); while off, a builder is inert from the start (its calls do
//! nothing) and the emitting call only counts the line left out: a few nanoseconds.
//!
//! Set it in code with [`crate::TraceBuilder::capture`], or without rebuilding through the
//! `JETS_CAPTURE` environment variable, read when a trace is opened (the code's setting wins):
//!
//! ```text
//! JETS_CAPTURE="clk=1000000..1100000" ./sim          # one window of 100 k cycles
//! JETS_CAPTURE="clk=0..10000;every=1000000" ./sim  # 10 k cycles of every million
//! JETS_CAPTURE="types=Instruction;sample=Instruction:100" ./sim
//! JETS_CAPTURE="recorder=100000;trigger=error" ./sim # last 100 k cycles before an error
//! JETS_CAPTURE="recorder=100000;trigger=error;post=20000" ./sim # and 20 k cycles after it
//! JETS_CAPTURE="clk=1000000..1100000;count" ./sim    # how many lines that window would write
//! JETS_CAPTURE="limit=2GiB" ./sim                     # everything until the file holds 2 GiB
//! ```
//!
//! The trace stays valid by construction (rules CAP-* in `spec/write-decisions.md`): the emitting
//! call decides, per line, to queue it, to queue a record only as a possible ancestor (held by the
//! writer thread), or to leave it out with everything under it; the writer writes a held record,
//! with its real start cycle, just before the first captured line that needs it. The footer's
//! `capture` member names the setting and `left_out_*` count what was not written; with
//! `count`, nothing is written and `counted_*` count what would have been.
//! A held record may outlive its parent: the parent then stays known to the writer until the
//! last such record is freed (CAP-DEFER-2), so a line captured under it later is written with
//! its whole chain.

mod config;
mod footer;
pub(crate) mod gate;
pub(crate) mod keep;
pub(crate) mod stock;

pub use config::{Capture, CaptureError, DumpSignal, Recorder, Trigger, ENV};
pub(crate) use footer::COMPILED_OUT;
pub use footer::{FooterCapture, FOOTER_CAPTURE};

/// Exact counts of lines per kind: those capture control left out of the file
/// ([`crate::Summary::left_out`]), or, with the `count` clause, those it counted instead of writing
/// them ([`crate::Summary::counted`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LeftOut {
    /// `record` lines.
    pub records: u64,
    /// `event` lines.
    pub events: u64,
    /// `annotation` lines.
    pub annotations: u64,
    /// `record_end` lines.
    pub record_ends: u64,
}

impl std::ops::AddAssign for LeftOut {
    fn add_assign(&mut self, more: LeftOut) {
        self.records += more.records;
        self.events += more.events;
        self.annotations += more.annotations;
        self.record_ends += more.record_ends;
    }
}

impl LeftOut {
    /// The sum of all kinds.
    pub fn total(&self) -> u64 {
        self.records + self.events + self.annotations + self.record_ends
    }

    /// The counts with the names the footer gives their kinds ([`FOOTER_KINDS`], in that order).
    ///
    /// ```
    /// use jets::capture::{LeftOut, FOOTER_LEFT_OUT};
    /// let left = LeftOut { events: 3, ..LeftOut::default() };
    /// let members: Vec<String> =
    ///     left.by_kind().iter().map(|(k, n)| format!("{FOOTER_LEFT_OUT}{k}={n}")).collect();
    /// assert_eq!(members[1], "left_out_events=3");
    /// ```
    pub fn by_kind(&self) -> [(&'static str, u64); 4] {
        let [r, e, a, x] = FOOTER_KINDS;
        [(r, self.records), (e, self.events), (a, self.annotations), (x, self.record_ends)]
    }
}

/// The line kinds as the footer's count members name them, after [`FOOTER_LEFT_OUT`] or
/// [`FOOTER_COUNTED`] (CAP-FOOT-1, CAP-COUNT-1): written by the SDK, read by `jets stats`.
pub const FOOTER_KINDS: [&str; 4] = ["records", "events", "annotations", "record_ends"];
/// The prefix of the footer members that count what capture control left out (`left_out_events`).
pub const FOOTER_LEFT_OUT: &str = "left_out_";
/// The prefix of the footer members that count what `count` counted (`counted_events`).
pub const FOOTER_COUNTED: &str = "counted_";
/// The footer member that counts a flight recorder's dumps (CAP-FOOT-1): written by the SDK when
/// the setting has a recorder, read by `jets stats`.
pub const FOOTER_RECORDER_DUMPS: &str = "recorder_dumps";
/// The footer member that says a `limit=` size was reached and capture stopped there
/// (CAP-LIM-1): `true`, written only then.
pub const FOOTER_LIMIT_REACHED: &str = "limit_reached";
